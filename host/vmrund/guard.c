/* The deadline for a request's head (host/vmrund/guard.h). */
#include "guard.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "clock.h"
#include "daemon.h"
#include "errmsg.h"

#define GUARD_EVERY_MS 250   /* how late past its deadline a head may be cut */

/* One connection, watched for the deadline of its request's head. */
struct watched {
	struct watched *prev, *next;
	int fd;
	int64_t since_ms;             /* accepted, or its last request completed */
	bool head;                    /* its current request's head is whole */
	bool cut;                     /* shut down for being late */
};

struct guard {
	struct vmrund *d;
	pthread_mutex_t lock;         /* the list and stop */
	pthread_cond_t wake;          /* stop */
	struct watched *list;
	bool stop;
	pthread_t thread;
};

/* The connection's watch (NULL when it has none: out of memory at its
 * accept, and then it was cut at once). */
static struct watched *watch_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

void guard_mark(struct guard *g, struct MHD_Connection *conn, bool head)
{
	struct watched *w = watch_of(conn);
	if (!w)
		return;
	pthread_mutex_lock(&g->lock);
	w->head = head;
	if (!head)
		w->since_ms = clock_mono_ms();
	pthread_mutex_unlock(&g->lock);
}

/* Closed: forgotten before libmicrohttpd closes the descriptor (so the
 * guard, under the same lock, never shuts down a descriptor that another
 * connection has taken since). */
void guard_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			 enum MHD_ConnectionNotificationCode what)
{
	struct guard *g = cls;
	struct watched *w = *socket_context;
	if (what == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (!w)
			return;
		pthread_mutex_lock(&g->lock);
		if (w->prev)
			w->prev->next = w->next;
		else
			g->list = w->next;
		if (w->next)
			w->next->prev = w->prev;
		pthread_mutex_unlock(&g->lock);
		free(w);
		*socket_context = NULL;
		return;
	}
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return;
	if (!(w = calloc(1, sizeof(*w)))) {
		shutdown(ci->connect_fd, SHUT_RDWR);   /* not served unwatched */
		return;
	}
	w->fd = ci->connect_fd;
	w->since_ms = clock_mono_ms();
	pthread_mutex_lock(&g->lock);
	w->next = g->list;
	if (g->list)
		g->list->prev = w;
	g->list = w;
	pthread_mutex_unlock(&g->lock);
	*socket_context = w;
}

/* Whether a watched connection is past its deadline for a head. Pure. */
static bool head_late(const struct watched *w, int64_t now_ms, int64_t limit_ms)
{
	return !w->head && !w->cut && now_ms - w->since_ms >= limit_ms;
}

/* The guard's thread: shuts down every connection past its deadline,
 * which wakes its thread from its wait at once to close it. */
static void *guard_run(void *arg)
{
	struct guard *g = arg;
	int64_t limit = (int64_t)g->d->cfg.request_head_timeout_s * 1000;
	pthread_mutex_lock(&g->lock);
	while (!g->stop) {
		int64_t now = clock_mono_ms();
		unsigned cut = 0;
		for (struct watched *w = g->list; w; w = w->next)
			if (head_late(w, now, limit)) {
				shutdown(w->fd, SHUT_RDWR);
				w->cut = true;
				cut++;
			}
		if (cut) {
			/* the daemon's lock is never taken inside ours elsewhere,
			 * nor ours inside it: let go of ours first all the same */
			pthread_mutex_unlock(&g->lock);
			vmrund_count_cut(g->d, cut);
			pthread_mutex_lock(&g->lock);
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += GUARD_EVERY_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&g->wake, &g->lock, &ts);
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

/* The guard's own parts, before its thread starts. */
static struct guard *guard_new(struct vmrund *d)
{
	struct guard *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->d = d;
	pthread_mutex_init(&g->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->wake, &ca);
	pthread_condattr_destroy(&ca);
	return g;
}

static void guard_free(struct guard *g)
{
	pthread_cond_destroy(&g->wake);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

struct guard *guard_start(struct vmrund *d, char *err, size_t errlen)
{
	struct guard *g = guard_new(d);
	if (!g) {
		errf(err, errlen, "out of memory");
		return NULL;
	}
	int e = pthread_create(&g->thread, NULL, guard_run, g);
	if (e) {
		errf(err, errlen, "the HTTP server's guard thread: %s", strerror(e));
		guard_free(g);
		return NULL;
	}
	return g;
}

void guard_stop(struct guard *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	g->stop = true;
	pthread_cond_signal(&g->wake);
	pthread_mutex_unlock(&g->lock);
	pthread_join(g->thread, NULL);
	guard_free(g);
}
