#include "event_loop.h"

#include <errno.h>
#include <unistd.h>

#include "log.h"

/* Enough for every queue, socket and control fd of a busy VM per wakeup;
 * more simply wait for the next round. */
#define EVL_BATCH 64

int evl_init(struct event_loop *l)
{
	l->epoch = 0;
	l->batch = NULL;
	l->batch_len = 0;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		vmm_perr("epoll_create1");
		return -1;
	}
	if (pthread_mutex_init(&l->lock, NULL)) {
		vmm_err("event loop: mutex init failed");
		close(l->epfd);
		l->epfd = -1;
		return -1;
	}
	return 0;
}

void evl_release(struct event_loop *l)
{
	if (l->epfd >= 0) {
		close(l->epfd);
		pthread_mutex_destroy(&l->lock);
	}
	l->epfd = -1;
}

int evl_add(struct event_loop *l, struct evl_handler *h, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = h };
	pthread_mutex_lock(&l->lock);
	int rc = epoll_ctl(l->epfd, EPOLL_CTL_ADD, h->fd, &ev);
	if (rc == 0) {
		h->events = events;
		h->added = true;
		h->epoch = ++l->epoch;
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

void evl_del(struct event_loop *l, struct evl_handler *h)
{
	pthread_mutex_lock(&l->lock);
	/* Fails only when the fd was never added, which leaves nothing to undo. */
	(void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, h->fd, NULL);
	h->added = false;
	h->epoch = ++l->epoch;
	for (int i = 0; i < l->batch_len; i++)
		if (l->batch[i].data.ptr == h)
			l->batch[i].data.ptr = NULL;
	pthread_mutex_unlock(&l->lock);
}

/* Under the lock: may the event for h taken in the wait that began at
 * epoch since still be delivered? One taken before h was deleted or
 * re-added may not; if h is watched again, re-arming it makes epoll report
 * afresh whatever its new fd has ready (an edge of the new registration
 * that fell into the same batch would otherwise be lost). */
static bool evl_current(struct event_loop *l, struct evl_handler *h, uint64_t since)
{
	if (h->epoch <= since)
		return true;
	if (h->added) {
		struct epoll_event ev = { .events = h->events, .data.ptr = h };
		(void)epoll_ctl(l->epfd, EPOLL_CTL_MOD, h->fd, &ev);
	}
	return false;
}

int evl_run_once(struct event_loop *l, int timeout_ms)
{
	struct epoll_event evs[EVL_BATCH];
	pthread_mutex_lock(&l->lock);
	uint64_t since = l->epoch;
	pthread_mutex_unlock(&l->lock);
	int n = epoll_wait(l->epfd, evs, EVL_BATCH, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -1;
	pthread_mutex_lock(&l->lock);
	l->batch = evs;
	l->batch_len = n;
	pthread_mutex_unlock(&l->lock);
	int ran = 0;
	for (int i = 0; i < n; i++) {
		pthread_mutex_lock(&l->lock);
		struct evl_handler *h = evs[i].data.ptr;
		/* NULL: removed while this batch was held; a stale epoch:
		 * deleted or re-added before it was published. */
		bool current = h && evl_current(l, h, since);
		pthread_mutex_unlock(&l->lock);
		if (!current)
			continue;
		h->fn(h->ctx, evs[i].events);
		ran++;
	}
	pthread_mutex_lock(&l->lock);
	l->batch = NULL;
	l->batch_len = 0;
	pthread_mutex_unlock(&l->lock);
	return ran;
}
