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
#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "api.h"
#include "daemon.h"
#include "e2b.h"
#include "errmsg.h"
#include "guard.h"
#include "run_spec.h"
#include "sandbox_http.h"

struct http_server {
	struct MHD_Daemon *mhd;
	struct vmrund *d;
	struct guard *guard;          /* the deadline for a request's head */
};

/* What one connection's request accumulates between callbacks. */
struct conn_state {
	char *body;
	size_t len, cap;
	bool too_big;
	bool answered;                /* refused before its body (413) */
	bool upload;                  /* a sandbox's upload: streamed, never held (api.h) */
	int tenant;                   /* an upload's, authenticated at its head */
	struct api_upload *up;        /* NULL: refused at its head (answered) */
	void (*at_end)(void *arg, bool sent);   /* http_at_end's */
	void *at_end_arg;
};

void http_at_end(struct http_req *r, void (*fn)(void *arg, bool sent), void *arg)
{
	r->cs->at_end = fn;
	r->cs->at_end_arg = arg;
}

enum MHD_Result http_queue(struct http_req *r, unsigned status, struct MHD_Response *resp)
{
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	enum MHD_Result rc = MHD_queue_response(r->conn, status, resp);
	MHD_destroy_response(resp);
	vmrund_count_answer(r->d, status);
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
	if (r->error_code)
		json_object_set_new(o, "code", json_integer(status));
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
	/* a Unix socket is this machine's, its mode says whose */
	if (sa->sa_family == AF_UNIX)
		return true;
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

/* The tenant, or an answer already sent (401, 429): -1. Judge0's
 * clients send their key as X-Auth-Token, E2B's as X-API-Key: key_header
 * names the one an API's prefix takes beside Authorization (NULL none). */
_Static_assert(sizeof(((struct http_req *)0)->key_digest) == TENANT_DIGEST_LEN, "a key's digest is tenants.h's");

int http_anonymous(struct http_req *r)
{
	struct vmrund *d = r->d;
	return d->anonymous >= 0 && (d->cfg.anonymous_any || from_loopback(r->conn)) ? d->anonymous : -1;
}

static int authenticate(struct http_req *r, const char *key_header)
{
	struct vmrund *d = r->d;
	const char *auth = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	const char *token = key_header ? MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, key_header) : NULL;
	int t;
	const char *key = auth ? (strncasecmp(auth, "Bearer ", 7) ? NULL : auth + 7) : token;
	if (auth || token) {
		if (!key || (t = tenants_by_key(&d->ts, key)) < 0) {
			http_error(r, 401, 0, "unknown API key");
			return -1;
		}
		SHA256((const unsigned char *)key, strlen(key), r->key_digest);
		r->keyed = true;
	} else if ((t = http_anonymous(r)) >= 0) {
		/* the anonymous tenant */
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
	char err[300];
	char *text = vmrund_metrics_text(r->d, err, sizeof(err));
	if (!text)
		return http_error(r, 500, 0, "%s", err);
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
	char sid[33];
	/* envd by host name goes with the E2B API: passed to another node, it goes under its prefix */
	if (r->d->cfg.e2b_prefix[0] && e2b_host_sandbox(MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST),
			     r->d->cfg.e2b_domain, sid)) {
		/* PORT-ID.DOMAIN: the SDK's address of a sandbox's envd, which is all such a host serves */
		r->error_code = true;
		char q[200], under[E2B_PREFIX_MAX + SBXC_TARGET_MAX];
		/* passed to another node, it goes under the prefix, with the id in E2b-Sandbox-Id */
		snprintf(under, sizeof(under), "%s%s", r->d->cfg.e2b_prefix, p);
		r->path = under;
		return api_envd_path(p) ? api_envd(r, p, sid)
					: http_error(r, 404, 0, "no such endpoint on a sandbox's host: %s",
						     errmsg_printable(q, sizeof(q), p));
	}
	bool v1 = !strncmp(p, "/v1/", 4), v2 = !strncmp(p, "/api/v2/", 8);
	const char *j0 = r->d->cfg.judge0_prefix;
	size_t j0len = strlen(j0);
	bool judge0 = j0len && !strncmp(p, j0, j0len) && (!p[j0len] || p[j0len] == '/');
	const char *e2 = r->d->cfg.e2b_prefix;
	size_t e2len = strlen(e2);
	bool e2b = e2len && !strncmp(p, e2, e2len) && (!p[e2len] || p[e2len] == '/');
	if (!v1 && !v2 && !judge0 && !e2b)
		return http_error(r, 404, 0, "no such endpoint: %.200s", p);
	r->error_code = e2b;
	/* envd's calls carry a sandbox's access token, not a key: api_envd.c checks it */
	if (e2b && api_envd_path(p + e2len))
		return api_envd(r, p + e2len, NULL);
	if ((r->tenant = authenticate(r, judge0 ? "X-Auth-Token" : e2b ? "X-API-Key" : NULL)) < 0)
		return MHD_YES;
	return v1 ? api_v1(r, p + 3) : v2 ? api_piston(r, p + 7) : judge0 ? api_judge0(r, p + j0len) : api_e2b(r, p + e2len);
}

/* ---- requests ---------------------------------------------------------------- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	(void)version;
	struct http_server *h = cls;
	struct vmrund *d = h->d;
	struct conn_state *cs = *con_cls;
	struct http_req r = { .d = d, .conn = conn, .method = method, .path = url, .tenant = -1, .cs = cs };
	if (!cs) {
		/* the first call comes once the head is whole */
		guard_mark(h->guard, conn, true);
		if (!(cs = calloc(1, sizeof(*cs))))
			return MHD_NO;
		*con_cls = r.cs = cs;
		if (api_sandbox_is_upload(method, url)) {
			cs->upload = true;
			if ((cs->tenant = r.tenant = authenticate(&r, NULL)) < 0)
				return MHD_YES;
			return api_sandbox_upload_begin(&r, &cs->up);
		}
		/* A declared length past the cap is refused before its body. */
		const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > d->cfg.max_body) {
			cs->answered = true;
			return http_error(&r, 413, 0, "the body is over %zu bytes", d->cfg.max_body);
		}
		return MHD_YES;
	}
	if (cs->upload) {
		r.tenant = cs->tenant;
		if (*upload_size) {
			api_sandbox_upload_data(cs->up, upload, *upload_size);
			*upload_size = 0;
			return MHD_YES;
		}
		return cs->up ? api_sandbox_upload_end(&r, cs->up) : MHD_YES;
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
	struct http_server *h = cls;
	struct conn_state *cs = *con_cls;
	if (cs && cs->at_end)
		cs->at_end(cs->at_end_arg, t == MHD_REQUEST_TERMINATED_COMPLETED_OK);
	if (cs) {
		free(cs->body);
		api_sandbox_upload_free(cs->up);
	}
	free(cs);
	*con_cls = NULL;
	/* a kept-alive connection's next head has the same time */
	guard_mark(h->guard, conn, false);
}

/* The Unix socket at path, bound with mode 0600 (a stale one of a
 * previous life replaced) and listening: its fd, or -1 with err. */
static int unix_listener(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
		return errf(err, errlen, "listen unix:%s: there is a file that is not a socket", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errf(err, errlen, "socket: %s", strerror(errno));
	unlink(path);
	mode_t old = umask(0177);
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || listen(fd, 64) < 0) {
		errf(err, errlen, "listen unix:%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

struct http_server *http_start(struct vmrund *d, char *err, size_t errlen)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	/* upgrades: Piston's WebSocket */
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
			 MHD_ALLOW_UPGRADE;
	int lfd = -1;
	if (d->cfg.listen_unix[0]) {
		if ((lfd = unix_listener(d->cfg.listen_unix, err, errlen)) < 0)
			return NULL;
	} else if (inet_pton(AF_INET, d->cfg.listen_host, &in4->sin_addr) == 1) {
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
	struct http_server *h = calloc(1, sizeof(*h));
	if (!h) {
		errf(err, errlen, "out of memory");
		if (lfd >= 0)
			close(lfd);
		return NULL;
	}
	h->d = d;
	if (!(h->guard = guard_start(d, err, errlen))) {
		free(h);
		if (lfd >= 0)
			close(lfd);
		return NULL;
	}
	/* The per-address cap is libmicrohttpd's, counted at accept in every
	 * threading mode; a connection past it is closed unanswered. */
	/* the Unix socket, which libmicrohttpd takes over; else it binds ss */
	struct MHD_OptionItem where[] = {
		lfd >= 0 ? (struct MHD_OptionItem){ MHD_OPTION_LISTEN_SOCKET, lfd, NULL }
			 : (struct MHD_OptionItem){ MHD_OPTION_SOCK_ADDR, 0, &ss },
		{ MHD_OPTION_END, 0, NULL },
	};
	h->mhd = MHD_start_daemon(
		flags, (uint16_t)d->cfg.listen_port, NULL, NULL, on_request, h, MHD_OPTION_ARRAY, where,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)d->cfg.max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
		(unsigned)d->cfg.max_connections_per_address, MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned)d->cfg.connection_timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
		MHD_OPTION_NOTIFY_CONNECTION, guard_on_connection, h->guard, MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
		MHD_OPTION_END);
	if (!h->mhd) {
		if (lfd >= 0) {
			errf(err, errlen, "listen unix:%s: cannot start the HTTP server", d->cfg.listen_unix);
			close(lfd);
		} else {
			errf(err, errlen, "listen %s:%u: cannot start the HTTP server (address in use?)",
			     d->cfg.listen_host, d->cfg.listen_port);
		}
		guard_stop(h->guard);
		free(h);
		return NULL;
	}
	return h;
}

void http_stop(struct http_server *h)
{
	if (!h)
		return;
	/* every connection closes first, and leaves the guard's list as it does */
	MHD_stop_daemon(h->mhd);
	guard_stop(h->guard);
	free(h);
}

bool http_stream_begin(struct http_req *r)
{
	if (vmrund_stream_begin(r->d, (unsigned)r->tenant))
		return true;
	http_error(r, 429, 1, "tenant %s has %u output streams and waits open (max_streams_per_tenant); end one first",
		   r->d->ts.t[r->tenant].name, r->d->cfg.max_streams_per_tenant);
	return false;
}
