/* The main thread's event loop: one epoll set, a handler per fd.
 *
 * Everything that is not a vCPU runs here: queue notifications (ioeventfds),
 * vsock sockets, the stop eventfd and termination signals. Handlers run one
 * at a time on this thread, so device back-ends never race one another; a
 * device still locks against the vCPU threads that touch its registers. */
#ifndef VMM_EVENT_LOOP_H
#define VMM_EVENT_LOOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

/* Called with the epoll events that fired for the fd it was added with. */
typedef void (*evl_fn)(void *ctx, uint32_t events);

/* One registration; owned by the caller, which keeps it alive until
 * evl_del. */
struct evl_handler {
	evl_fn fn;
	void *ctx;
	int fd;
	/* Owned by the loop, under its lock: the events it was added with
	 * (to re-arm it) and the loop epoch of its last add or del, which
	 * tells an event of this registration from one of an earlier. */
	uint32_t events;
	bool added;
	uint64_t epoch;
};

struct event_loop {
	int epfd;
	/* evl_add and evl_del may run on a vCPU thread (a driver reset) while
	 * this thread holds a batch: every add and del bumps epoch under the
	 * lock and stamps the handler, so the loop can skip an event taken
	 * before its handler was deleted or re-added. */
	pthread_mutex_t lock;
	uint64_t epoch;
	/* The batch being dispatched: evl_del scrubs it, so that a handler
	 * its owner frees right after evl_del is never touched again. */
	struct epoll_event *batch;
	int batch_len;
};

/* Create the epoll set. Returns 0, or -1 after one error line. */
int evl_init(struct event_loop *l);

/* Close the epoll set; safe on a zeroed loop whose epfd is -1. */
void evl_release(struct event_loop *l);

/* Watch h->fd for events (EPOLLIN, EPOLLOUT, EPOLLET...) and call h->fn.
 * Returns 0, or -1 with errno set. */
int evl_add(struct event_loop *l, struct evl_handler *h, uint32_t events);

/* Stop watching h->fd (before it is closed). From any thread, the removed
 * handler is not called again for an event taken before the removal, even
 * if h was added again meanwhile; its new registration is re-armed so that
 * no edge is lost. Only a call that had already begun when another thread
 * removed h may still run (so h must stay valid and tolerate that). */
void evl_del(struct event_loop *l, struct evl_handler *h);

/* Wait up to timeout_ms (-1: no limit) and run the handlers of every ready
 * fd. Returns the number of handlers run, 0 on timeout or EINTR, or -1 with
 * errno set when epoll itself failed. */
int evl_run_once(struct event_loop *l, int timeout_ms);

#endif
