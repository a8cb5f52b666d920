#include "event_loop.h"

#include <errno.h>
#include <unistd.h>

#include "log.h"

/* Enough for every queue, socket and control fd of a busy VM per wakeup;
 * more simply wait for the next round. */
#define EVL_BATCH 64

int evl_init(struct event_loop *l)
{
	l->batch = NULL;
	l->batch_len = 0;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		vmm_perr("epoll_create1");
		return -1;
	}
	return 0;
}

void evl_release(struct event_loop *l)
{
	if (l->epfd >= 0)
		close(l->epfd);
	l->epfd = -1;
}

int evl_add(struct event_loop *l, struct evl_handler *h, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = h };
	return epoll_ctl(l->epfd, EPOLL_CTL_ADD, h->fd, &ev);
}

void evl_del(struct event_loop *l, struct evl_handler *h)
{
	/* Fails only when the fd was never added, which leaves nothing to undo. */
	(void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, h->fd, NULL);
	if (l->batch && pthread_equal(l->owner, pthread_self()))
		for (int i = 0; i < l->batch_len; i++)
			if (l->batch[i].data.ptr == h)
				l->batch[i].data.ptr = NULL;
}

int evl_run_once(struct event_loop *l, int timeout_ms)
{
	struct epoll_event evs[EVL_BATCH];
	int n = epoll_wait(l->epfd, evs, EVL_BATCH, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -1;
	l->owner = pthread_self();
	l->batch = evs;
	l->batch_len = n;
	int ran = 0;
	for (int i = 0; i < n; i++) {
		struct evl_handler *h = evs[i].data.ptr;
		if (!h)
			continue;   /* removed by an earlier handler of this batch */
		h->fn(h->ctx, evs[i].events);
		ran++;
	}
	l->batch = NULL;
	l->batch_len = 0;
	return ran;
}
