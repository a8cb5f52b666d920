/* vmrund's HTTP server (host/vmrund/http.h): libmicrohttpd, routing and
 * authentication. */
#include "http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "api.h"
#include "clock.h"
#include "errmsg.h"
#include "run_spec.h"

#define GUARD_EVERY_MS 250   /* how late past its deadline a head may be cut */

/* One connection, watched for the deadline of its request's head
 * (request_head_timeout_s): libmicrohttpd's own timeout is an idle one,
 * which a client that sends a byte at a time never reaches. */
struct watched {
	struct watched *prev, *next;
	int fd;
	int64_t since_ms;             /* accepted, or its last request completed */
	bool head;                    /* its current request's head is whole */
	bool cut;                     /* shut down for being late */
};

struct http_server {
	struct MHD_Daemon *mhd;
	struct vmrund *d;
	pthread_mutex_t lock;         /* the list and stop */
	pthread_cond_t wake;          /* stop */
	struct watched *list;
	bool stop;
	pthread_t guard;
};

/* What one connection's request accumulates between callbacks. */
struct conn_state {
	char *body;
	size_t len, cap;
	bool too_big;
	bool answered;                /* refused before its body (413) */
};

static void count(struct vmrund *d, unsigned status)
{
	pthread_mutex_lock(&d->lock);
	metrics_http(&d->m, status);
	pthread_mutex_unlock(&d->lock);
}

enum MHD_Result http_queue(struct http_req *r, unsigned status, struct MHD_Response *resp)
{
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	enum MHD_Result rc = MHD_queue_response(r->conn, status, resp);
	MHD_destroy_response(resp);
	count(r->d, status);
	return rc;
}

enum MHD_Result http_bytes(struct http_req *r, unsigned status, const char *type, const void *data, size_t len)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	return http_queue(r, status, resp);
}

enum MHD_Result http_json(struct http_req *r, unsigned status, json_t *v)
{
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	if (!text)
		return http_bytes(r, 500, "application/json", "{\"message\":\"out of memory\"}", 27);
	/* A newline after the object, as curl users expect of a JSON API. */
	size_t n = strlen(text);
	char *line = realloc(text, n + 2);
	if (line) {
		text = line;
		text[n++] = '\n';
	}
	enum MHD_Result rc = http_bytes(r, status, "application/json", text, n);
	free(text);
	return rc;
}

static enum MHD_Result error_v(struct http_req *r, unsigned status, unsigned retry_s, const char *fmt, va_list ap)
{
	char msg[600];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	json_t *o = json_object();
	/* jansson refuses invalid UTF-8: a message quoting client bytes may
	 * carry some, and then says less rather than nothing. */
	json_t *s = json_string(msg);
	json_object_set_new(o, "message", s ? s : json_string("(a message that was not UTF-8)"));
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!text)
		return MHD_NO;
	size_t n = strlen(text);
	struct MHD_Response *resp = MHD_create_response_from_buffer(n, text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	if (retry_s) {
		char ra[16];
		snprintf(ra, sizeof(ra), "%u", retry_s);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, ra);
	}
	return http_queue(r, status, resp);
}

enum MHD_Result http_error(struct http_req *r, unsigned status, unsigned retry_s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	enum MHD_Result rc = error_v(r, status, retry_s, fmt, ap);
	va_end(ap);
	return rc;
}

json_t *http_body_json(struct http_req *r)
{
	const char *type = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	size_t tl = type ? strcspn(type, "; ") : 0;
	if (!type || tl != 16 || strncasecmp(type, "application/json", 16)) {
		http_error(r, 415, 0, "the body must be application/json");
		return NULL;
	}
	json_error_t e;
	json_t *v = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &e);
	if (!v) {
		http_error(r, 400, 0, "malformed JSON at line %d column %d: %s", e.line, e.column, e.text);
		return NULL;
	}
	return v;
}

/* ---- who is asking ------------------------------------------------------- */

static bool from_loopback(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (!ci || !ci->client_addr)
		return false;
	const struct sockaddr *sa = ci->client_addr;
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

/* The tenant, or an answer already sent (401, 429): -1. */
static int authenticate(struct http_req *r)
{
	struct vmrund *d = r->d;
	const char *auth = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	int t;
	if (auth) {
		if (strncasecmp(auth, "Bearer ", 7) || (t = tenants_by_key(&d->ts, auth + 7)) < 0) {
			http_error(r, 401, 0, "unknown API key");
			return -1;
		}
	} else if (d->anonymous >= 0 && (d->cfg.anonymous_any || from_loopback(r->conn))) {
		t = d->anonymous;
	} else {
		http_error(r, 401, 0, "an API key is required: Authorization: Bearer KEY");
		return -1;
	}
	unsigned wait = vmrund_rate(d, (unsigned)t);
	if (wait) {
		http_error(r, 429, wait, "tenant %s is over its request rate", d->ts.t[t].name);
		return -1;
	}
	return t;
}

/* ---- routing --------------------------------------------------------------- */

static enum MHD_Result health(struct http_req *r, bool ready)
{
	if (strcmp(r->method, "GET"))
		return http_error(r, 405, 0, "only GET here");
	char why[400];
	if (ready && !vmrund_ready(r->d, why, sizeof(why)))
		return http_error(r, 503, 0, "not ready: %s", why);
	return http_bytes(r, 200, "text/plain", "ok\n", 3);
}

static enum MHD_Result metrics(struct http_req *r)
{
	struct vmrund *d = r->d;
	uint64_t states[RS_COUNT] = { 0 };
	char err[300];
	pthread_mutex_lock(&d->lock);
	int rc = d->store->ops->count(d->store, states, err, sizeof(err));
	char *text = rc < 0 ? NULL : metrics_render(&d->m, states[RS_QUEUED], vmrund_running_here(d), d->slots, states);
	pthread_mutex_unlock(&d->lock);
	if (!text)
		return http_error(r, 500, 0, "%s", rc < 0 ? err : "out of memory");
	enum MHD_Result res = http_bytes(r, 200, "text/plain; version=0.0.4", text, strlen(text));
	free(text);
	return res;
}

static enum MHD_Result route(struct http_req *r)
{
	const char *p = r->path;
	if (!strcmp(p, "/healthz") || !strcmp(p, "/readyz"))
		return health(r, !strcmp(p, "/readyz"));
	if (!strcmp(p, "/metrics"))
		return strcmp(r->method, "GET") ? http_error(r, 405, 0, "only GET here") : metrics(r);
	bool v1 = !strncmp(p, "/v1/", 4), v2 = !strncmp(p, "/api/v2/", 8);
	if (!v1 && !v2)
		return http_error(r, 404, 0, "no such endpoint: %.200s", p);
	if ((r->tenant = authenticate(r)) < 0)
		return MHD_YES;
	return v1 ? api_v1(r, p + 3) : api_piston(r, p + 7);
}

/* ---- the deadline for a request's head ------------------------------------ */

/* The connection's watch (NULL when it has none: out of memory at its
 * accept, and then it was cut at once). */
static struct watched *watch_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

/* The head of the connection's request is whole (head), or its request
 * is over and the next one's head is awaited from now (!head). */
static void watch_mark(struct http_server *h, struct MHD_Connection *conn, bool head)
{
	struct watched *w = watch_of(conn);
	if (!w)
		return;
	pthread_mutex_lock(&h->lock);
	w->head = head;
	if (!head)
		w->since_ms = clock_mono_ms();
	pthread_mutex_unlock(&h->lock);
}

/* Accepted: watched from now. Closed: forgotten, before libmicrohttpd
 * closes the descriptor (so the guard, under the same lock, never shuts
 * down a descriptor that another connection has taken since). */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode what)
{
	struct http_server *h = cls;
	struct watched *w = *socket_context;
	if (what == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (!w)
			return;
		pthread_mutex_lock(&h->lock);
		if (w->prev)
			w->prev->next = w->next;
		else
			h->list = w->next;
		if (w->next)
			w->next->prev = w->prev;
		pthread_mutex_unlock(&h->lock);
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
	pthread_mutex_lock(&h->lock);
	w->next = h->list;
	if (h->list)
		h->list->prev = w;
	h->list = w;
	pthread_mutex_unlock(&h->lock);
	*socket_context = w;
}

/* Whether a watched connection is past its deadline for a head. Pure. */
static bool head_late(const struct watched *w, int64_t now_ms, int64_t limit_ms)
{
	return !w->head && !w->cut && now_ms - w->since_ms >= limit_ms;
}

/* The guard's thread: shuts down every connection past its deadline,
 * which wakes its thread from its wait at once to close it. */
static void *guard(void *arg)
{
	struct http_server *h = arg;
	int64_t limit = (int64_t)h->d->cfg.request_head_timeout_s * 1000;
	pthread_mutex_lock(&h->lock);
	while (!h->stop) {
		int64_t now = clock_mono_ms();
		unsigned cut = 0;
		for (struct watched *w = h->list; w; w = w->next)
			if (head_late(w, now, limit)) {
				shutdown(w->fd, SHUT_RDWR);
				w->cut = true;
				cut++;
			}
		if (cut) {
			/* the daemon's lock is never taken inside ours elsewhere,
			 * nor ours inside it: let go of ours first all the same */
			pthread_mutex_unlock(&h->lock);
			pthread_mutex_lock(&h->d->lock);
			h->d->m.cut_head += cut;
			pthread_mutex_unlock(&h->d->lock);
			pthread_mutex_lock(&h->lock);
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += GUARD_EVERY_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&h->wake, &h->lock, &ts);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

/* ---- requests ---------------------------------------------------------------- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	(void)version;
	struct http_server *h = cls;
	struct vmrund *d = h->d;
	struct conn_state *cs = *con_cls;
	struct http_req r = { .d = d, .conn = conn, .method = method, .path = url, .tenant = -1 };
	if (!cs) {
		/* the first call comes once the head is whole */
		watch_mark(h, conn, true);
		if (!(cs = calloc(1, sizeof(*cs))))
			return MHD_NO;
		*con_cls = cs;
		/* A declared length past the cap is refused before its body. */
		const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > d->cfg.max_body) {
			cs->answered = true;
			return http_error(&r, 413, 0, "the body is over %zu bytes", d->cfg.max_body);
		}
		return MHD_YES;
	}
	if (*upload_size) {
		size_t n = *upload_size;
		*upload_size = 0;
		if (cs->too_big || cs->answered || cs->len + n > d->cfg.max_body) {
			cs->too_big = true;
			return MHD_YES;
		}
		if (cs->len + n + 1 > cs->cap) {
			size_t cap = (cs->len + n + 1) * 2;
			cap = cap > d->cfg.max_body + 1 ? d->cfg.max_body + 1 : cap;
			char *b = realloc(cs->body, cap);
			if (!b)
				return MHD_NO;
			cs->body = b;
			cs->cap = cap;
		}
		memcpy(cs->body + cs->len, upload, n);
		cs->len += n;
		return MHD_YES;
	}
	if (cs->answered)
		return MHD_YES;
	if (cs->too_big)
		return http_error(&r, 413, 0, "the body is over %zu bytes", d->cfg.max_body);
	r.body = cs->body ? cs->body : "";
	if (cs->body)
		cs->body[cs->len] = '\0';
	r.body_len = cs->len;
	return route(&r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode t)
{
	(void)t;
	struct conn_state *cs = *con_cls;
	if (cs)
		free(cs->body);
	free(cs);
	*con_cls = NULL;
	/* a kept-alive connection's next head has the same time */
	watch_mark(cls, conn, false);
}

/* The server's own parts, before libmicrohttpd starts. */
static struct http_server *server_new(struct vmrund *d)
{
	struct http_server *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->d = d;
	pthread_mutex_init(&h->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->wake, &ca);
	pthread_condattr_destroy(&ca);
	return h;
}

static void server_free(struct http_server *h)
{
	pthread_cond_destroy(&h->wake);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

struct http_server *http_start(struct vmrund *d, char *err, size_t errlen)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	if (inet_pton(AF_INET, d->cfg.listen_host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)d->cfg.listen_port);
	} else if (inet_pton(AF_INET6, d->cfg.listen_host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)d->cfg.listen_port);
		flags |= MHD_USE_IPv6;
	} else {
		errf(err, errlen, "listen %s: not a numeric address", d->cfg.listen_host);
		return NULL;
	}
	struct http_server *h = server_new(d);
	if (!h) {
		errf(err, errlen, "out of memory");
		return NULL;
	}
	/* The per-address cap is libmicrohttpd's, counted at accept in every
	 * threading mode; a connection past it is closed unanswered. */
	h->mhd = MHD_start_daemon(
		flags, (uint16_t)d->cfg.listen_port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)d->cfg.max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
		(unsigned)d->cfg.max_connections_per_address, MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned)d->cfg.connection_timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, h, MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
		MHD_OPTION_END);
	if (!h->mhd) {
		errf(err, errlen, "listen %s:%u: cannot start the HTTP server (address in use?)", d->cfg.listen_host,
		     d->cfg.listen_port);
		server_free(h);
		return NULL;
	}
	int e = pthread_create(&h->guard, NULL, guard, h);
	if (e) {
		errf(err, errlen, "the HTTP server's guard thread: %s", strerror(e));
		MHD_stop_daemon(h->mhd);
		server_free(h);
		return NULL;
	}
	return h;
}

void http_stop(struct http_server *h)
{
	if (!h)
		return;
	/* every connection closes first, and leaves the list as it does */
	MHD_stop_daemon(h->mhd);
	pthread_mutex_lock(&h->lock);
	h->stop = true;
	pthread_cond_signal(&h->wake);
	pthread_mutex_unlock(&h->lock);
	pthread_join(h->guard, NULL);
	server_free(h);
}

bool http_stream_begin(struct http_req *r)
{
	if (vmrund_stream_begin(r->d, (unsigned)r->tenant))
		return true;
	http_error(r, 429, 1, "tenant %s has %u output streams and waits open (max_streams_per_tenant); end one first",
		   r->d->ts.t[r->tenant].name, r->d->cfg.max_streams_per_tenant);
	return false;
}
