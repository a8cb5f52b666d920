/* Piston's interactive WebSocket, GET /api/v2/connect (piston.h has its
 * messages, ws.h the framing): the client's init is an execute body; the
 * program then runs in a sandbox of the tenant's, a stage at a time, each
 * a background command whose events (output, its end) become Piston's
 * messages, while the client's stdin and signals go to it as they come.
 * Unlike Piston, which drops them, signals reach the program.
 *
 * The upgraded connection is served by its libmicrohttpd thread (one per
 * connection): the upgrade handler runs the session to its end, then
 * hands the socket back to be closed, so vmrund's stop waits for it; the
 * session notices vmrund closing within a second and says 1001. It holds
 * one of the tenant's places for streams and waits, as execute does. */
#include "api.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "piston.h"
#include "sandbox_calls.h"
#include "sse.h"
#include "ws.h"

#define INIT_MS 1000                  /* Piston's: an init within a second of the upgrade */
#define SEND_MS 10000                 /* a client that takes nothing for this long is gone */
#define PENDING_MAX (1u << 20)        /* stdin typed before the run stage, held for it */
#define STAGE_SLACK_S 30              /* past a stage's limit: the VM's own end, then ours */

struct session {
	struct sbx_user u;
	const struct runtime *rt;
	int fd;
	struct ws_reader rd;
	uint8_t *in;                  /* the client's bytes not yet taken */
	size_t len, cap;
	json_t *init;                 /* the init message, once it came */
	bool closed;                  /* our close frame is sent: nothing else is */
	int64_t send_by_ms;           /* a send not done by then: the client is gone (monotonic) */
	bool gone;                    /* the client closed, or its connection broke */
	char sbx[SCHED_ID_MAX];       /* "" none */
	unsigned cid;                 /* the stage's command; 0 none */
	struct sbxc ev;
	char *evbuf;
	size_t evlen;
	json_t *exit;                 /* the stage's end, from its exit event */
	char *pending;                /* stdin before the run stage */
	size_t plen;
	bool run_stage;
};

static bool closing(struct vmrund *d)
{
	pthread_mutex_lock(&d->lock);
	bool c = d->closing;
	pthread_mutex_unlock(&d->lock);
	return c;
}

static bool over(const struct session *s)
{
	return s->closed || s->gone;
}

/* All of p[0..n) to the client, or the session is over: by SEND_MS
 * from now and by send_by_ms, so that a client taking a byte now and then
 * holds nothing past its stage's time. */
static void send_all(struct session *s, const uint8_t *p, size_t n)
{
	int64_t by = clock_mono_ms() + SEND_MS;
	by = s->send_by_ms && s->send_by_ms < by ? s->send_by_ms : by;
	while (n && !s->gone) {
		ssize_t k = send(s->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		struct pollfd pfd = { .fd = s->fd, .events = POLLOUT };
		int64_t left = by - clock_mono_ms();
		if ((k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) || left <= 0 ||
		    poll(&pfd, 1, (int)left) < 0)
			s->gone = true;
	}
}

static void send_frame(struct session *s, int op, const void *p, size_t n)
{
	uint8_t head[10];
	send_all(s, head, ws_header(head, op, n));
	send_all(s, p, n);
}

/* A message (taken) as a text frame. */
static void send_json(struct session *s, json_t *msg)
{
	if (over(s)) {
		json_decref(msg);
		return;
	}
	char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	if (text)
		send_frame(s, WS_TEXT, text, strlen(text));
	free(text);
}

/* Close with code and Piston's reason (or reason): the session is over. */
static void send_close(struct session *s, unsigned code, const char *reason)
{
	uint8_t payload[WS_CONTROL_MAX];
	if (over(s))
		return;
	send_frame(s, WS_CLOSE, payload, ws_close_payload(payload, code, reason ? reason : piston_ws_reason(code)));
	s->closed = true;
}

/* Piston's error message, then its close 4002. */
static void send_error(struct session *s, const char *message)
{
	send_json(s, json_pack("{ss ss}", "type", "error", "message", message));
	send_close(s, PISTON_WS_ERROR, NULL);
}

static void to_stdin(struct session *s, const char *data, size_t n)
{
	if (s->run_stage && s->cid) {
		(void)sbxu_stdin(&s->u, s->sbx, s->cid, data, n, false, SBXU_CALL_MS);   /* one that ended takes nothing */
		return;
	}
	if (s->run_stage || s->plen + n > PENDING_MAX)
		return;   /* after the run, or past what is held: dropped, as a closed pipe would */
	char *more = realloc(s->pending, s->plen + n + 1);
	if (!more)
		return;
	s->pending = more;
	memcpy(s->pending + s->plen, data, n);
	s->plen += n;
}

/* One whole message of the client's. */
static void on_message(struct session *s, const struct ws_message *m)
{
	if (m->op == WS_PING) {
		if (!s->closed)
			send_frame(s, WS_PONG, m->data, m->len);
		return;
	}
	if (m->op == WS_CLOSE) {
		/* the client's close, answered with its code (one a close frame
		 * may carry) unless ours went first */
		unsigned code = m->len >= 2 ? (unsigned)m->data[0] << 8 | m->data[1] : WS_CLOSE_NORMAL;
		send_close(s, m->len == 1 || !ws_close_code_ok(code) ? WS_CLOSE_PROTOCOL : code, "");
		s->gone = true;
		return;
	}
	if (s->closed || (m->op != WS_TEXT && m->op != WS_BINARY))
		return;
	struct piston_ws_msg pm;
	piston_ws_decide((const char *)m->data, m->len, s->init != NULL, &pm);
	switch (pm.ask) {
	case PISTON_ASK_INIT:
		s->init = json_incref(pm.msg);
		break;
	case PISTON_ASK_STDIN:
		to_stdin(s, pm.data, pm.len);
		break;
	case PISTON_ASK_SIGNAL:
		if (s->cid)
			(void)sbxu_signal(&s->u, s->sbx, s->cid, pm.signo);
		break;
	case PISTON_ASK_CLOSE:
		send_close(s, pm.code, NULL);
		break;
	case PISTON_ASK_ERROR:
		send_error(s, pm.err);
		break;
	case PISTON_ASK_NOTHING:
		break;
	}
	json_decref(pm.msg);
}

/* The client's whole frames in s->in, handled and taken; after one that
 * breaks the protocol, the session ends (its close said). */
static void client_frames(struct session *s)
{
	size_t at = 0;
	while (!s->gone && at < s->len) {
		struct ws_message m;
		bool whole;
		unsigned code;
		long used = ws_next(&s->rd, s->in + at, s->len - at, &m, &whole, &code);
		if (used < 0) {
			send_close(s, code, "");
			s->gone = true;   /* nothing it sends after is read */
			return;
		}
		if (!used)
			break;
		if (whole)
			on_message(s, &m);
		at += (size_t)used;
	}
	memmove(s->in, s->in + at, s->len - at);
	s->len -= at;
}

/* Take what the client sent: its whole messages handled. */
static void client_read(struct session *s)
{
	size_t want = s->rd.max + WS_HEADER_MAX;
	if (s->len == s->cap) {
		/* full: a whole frame of the most a message may be fits in want,
		 * so a buffer of want that is full and holds none is refused */
		size_t cap = s->cap ? 2 * s->cap : 65536;
		cap = cap < want ? cap : want;
		uint8_t *more = s->len < cap ? realloc(s->in, cap) : NULL;
		if (!more) {
			send_close(s, WS_CLOSE_TOO_BIG, "");
			return;
		}
		s->in = more;
		s->cap = cap;
	}
	ssize_t k = recv(s->fd, s->in + s->len, s->cap - s->len, MSG_DONTWAIT);
	if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
		s->gone = true;   /* without a close */
		return;
	}
	if (k > 0)
		s->len += (size_t)k;
	client_frames(s);
}

/* An event of the stage's command: its output to the client, its end
 * kept. */
static int on_event(void *ctx, const char *name, const char *data, size_t len)
{
	struct session *s = ctx;
	if (!strcmp(name, "exit")) {
		json_decref(s->exit);
		s->exit = json_loadb(data, len, 0, NULL);
		return 1;
	}
	if (strcmp(name, "stdout") && strcmp(name, "stderr"))
		return 0;
	json_t *o = json_loadb(data, len, 0, NULL);
	const json_t *text = json_object_get(o, "text");
	if (json_string_length(text))
		send_json(s, json_pack("{ss ss sO}", "type", "data", "stream", name, "data", text));
	json_decref(o);
	return 0;
}

/* Serve the client and the stage's events until until() holds, the
 * session is over (closed: until the client's close too), or
 * deadline_ms. */
static void pump(struct session *s, bool (*until)(const struct session *), int64_t deadline_ms)
{
	while (!s->gone && !(s->closed && until != NULL) && !(until && until(s))) {
		int64_t left = deadline_ms - clock_mono_ms();
		if (left <= 0)
			return;
		if (closing(s->u.d) && !s->closed) {
			send_close(s, WS_CLOSE_GOING_AWAY, "vmrund is stopping");
			return;
		}
		bool held = s->ev.fd >= 0 && s->ev.off < s->ev.len;
		struct pollfd pfd[2] = { { .fd = s->fd, .events = POLLIN }, { .fd = s->ev.fd, .events = POLLIN } };
		if (!held && poll(pfd, 2, left > 1000 ? 1000 : (int)left) < 0 && errno != EINTR)
			s->gone = true;
		if (pfd[0].revents)
			client_read(s);
		if (s->ev.fd >= 0 && (held || pfd[1].revents) &&
		    !sbxu_events_read(&s->ev, &s->evbuf, &s->evlen, on_event, s))
			sbxc_close(&s->ev);   /* its end, or the sandbox went */
	}
}

static bool has_init(const struct session *s)
{
	return s->init != NULL;
}

static bool stage_ended(const struct session *s)
{
	return s->exit || s->ev.fd < 0;
}

/* A stage: Piston's stage message, the command run as its events come,
 * and its exit message. 0 with its exit code (-1: none, a signal), or -1
 * when the session cannot go on (said to the client). */
static int stage(struct session *s, const char *name, json_t *argv, double timeout_s, int *code)
{
	send_json(s, json_pack("{ss ss}", "type", "stage", "stage", name));
	s->run_stage = !strcmp(name, "run");
	if (!(s->cid = sbxu_start(&s->u, s->sbx, argv, timeout_s)) || sbxu_events(&s->u, s->sbx, s->cid, &s->ev)) {
		send_error(s, s->u.err);
		return -1;
	}
	if (s->run_stage && s->plen) {
		(void)sbxu_stdin(&s->u, s->sbx, s->cid, s->pending, s->plen, false, SBXU_CALL_MS);
		s->plen = 0;
	}
	int64_t deadline = clock_mono_ms() + (int64_t)((timeout_s + STAGE_SLACK_S) * 1000);
	s->send_by_ms = deadline;
	pump(s, stage_ended, deadline);
	s->send_by_ms = 0;
	sbxc_close(&s->ev);
	if (over(s))
		return -1;
	if (!s->exit) {
		send_error(s, clock_mono_ms() >= deadline ? "the stage did not end in time" : "the stage's end was lost");
		return -1;
	}
	const json_t *c = json_object_get(s->exit, "exit_code"), *sig = json_object_get(s->exit, "signal");
	char signame[16] = "";
	if (json_is_true(json_object_get(s->exit, "timed_out")))
		snprintf(signame, sizeof(signame), "SIGKILL");   /* Piston's word for a stage past its time */
	else if (json_is_integer(sig))
		piston_signal_name((int)json_integer_value(sig), signame);
	send_json(s, json_pack("{ss ss so so}", "type", "exit", "stage", name, "code",
			       json_is_integer(c) && !signame[0] ? json_integer(json_integer_value(c)) : json_null(),
			       "signal", signame[0] ? json_string(signame) : json_null()));
	*code = json_is_integer(c) && !signame[0] ? (int)json_integer_value(c) : -1;
	json_decref(s->exit);
	s->exit = NULL;
	s->cid = 0;
	return 0;
}

/* A stage's argv from rt's template over the request's files (and the
 * run's args), or NULL with u.err. */
static json_t *argv_of(struct session *s, const struct run_spec *rq, const char *tmpl, bool with_args)
{
	const char *names[RUN_SPEC_MAX_FILES];
	char *argv[RUNTIME_ARGV_MAX + 1], store[RUNTIME_STORE_MAX];
	for (unsigned i = 0; i < rq->nfiles; i++)
		names[i] = rq->files[i].name;
	int n = runtime_expand(tmpl, names, rq->nfiles, with_args ? rq->argv : NULL, with_args ? rq->argc : 0, argv,
			       RUNTIME_ARGV_MAX + 1, store, sizeof(store), s->u.err, sizeof(s->u.err));
	json_t *a = n >= 0 ? json_array() : NULL;
	for (int i = 0; a && i < n; i++)
		json_array_append_new(a, json_string(argv[i]));
	return a;
}

/* The job the init asked for: a sandbox, the files, each stage. */
static void job(struct session *s)
{
	struct run_spec rq;
	char err[400];
	if (piston_parse(s->init, s->u.d->rts, s->u.d->nrts, &rq, &s->rt, err, sizeof(err))) {
		send_error(s, err);
		return;
	}
	uint64_t mem = rq.compile.memory_mib > rq.run.memory_mib ? rq.compile.memory_mib : rq.run.memory_mib;
	json_t *limits = json_object();
	if (mem)
		json_object_set_new(limits, "memory_mib", json_integer((json_int_t)mem));
	if (sbxu_create(&s->u, json_pack("{ss so}", "runtime", s->rt->name, "limits", limits), s->sbx)) {
		send_error(s, s->u.err);
		goto out;
	}
	for (unsigned i = 0; i < rq.nfiles; i++)
		if (sbxu_put_file(&s->u, s->sbx, rq.files[i].name, rq.files[i].data, rq.files[i].len)) {
			send_error(s, s->u.err);
			goto out;
		}
	send_json(s, json_pack("{ss ss ss}", "type", "runtime", "language", s->rt->name, "version", s->rt->version));
	int code = 0;
	if (s->rt->compile[0]) {
		double t = rq.compile.timeout_s ? rq.compile.timeout_s
			   : s->rt->compile_timeout_s ? (double)s->rt->compile_timeout_s
						      : RUN_SPEC_DEFAULT_COMPILE_TIMEOUT_S;
		if (stage(s, "compile", argv_of(s, &rq, s->rt->compile, false), t, &code))
			goto out;
	}
	if (code == 0) {
		double t = rq.run.timeout_s ? rq.run.timeout_s
			   : s->rt->run_timeout_s ? (double)s->rt->run_timeout_s : RUN_SPEC_DEFAULT_RUN_TIMEOUT_S;
		if (stage(s, "run", argv_of(s, &rq, s->rt->run, true), t, &code))
			goto out;
	}
	send_close(s, PISTON_WS_DONE, NULL);
out:
	run_spec_free(&rq);
}

static void upgraded(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra, size_t extra_n,
		     MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	(void)conn;
	(void)con_cls;
	struct session *s = cls;
	s->fd = sock;
	if (extra_n && (s->in = malloc(extra_n))) {
		/* frames a client sent right behind its request */
		memcpy(s->in, extra, extra_n);
		s->len = s->cap = extra_n;
		client_frames(s);
	}
	pump(s, has_init, clock_mono_ms() + INIT_MS);
	if (!s->init)
		send_close(s, PISTON_WS_INIT_TIMEOUT, NULL);
	if (!over(s))
		job(s);
	if (s->sbx[0])
		sbxu_destroy(&s->u, s->sbx);
	/* the client's close, a second at most: one that reads our close
	 * frame before the connection ends sees its code */
	pump(s, NULL, clock_mono_ms() + 1000);
	vmrund_stream_end(s->u.d, s->u.tenant);
	sbxc_close(&s->ev);
	ws_reader_free(&s->rd);
	json_decref(s->init);
	json_decref(s->exit);
	free(s->in);
	free(s->evbuf);
	free(s->pending);
	free(s);
	MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
}

/* The request ended: when its 101 did not go out whole, upgraded never
 * runs, and the session's place and memory are released here. */
static void abandoned(void *arg, bool sent)
{
	struct session *s = arg;
	if (sent)
		return;
	vmrund_stream_end(s->u.d, s->u.tenant);
	free(s);
}

/* Whether header h's value has token among its comma-separated words. */
static bool has_token(struct http_req *r, const char *h, const char *token)
{
	const char *v = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, h);
	size_t n = strlen(token);
	for (const char *p = v; p && *p; p += strcspn(p, ",")) {
		p += strspn(p, ", \t");
		if (!strncasecmp(p, token, n) && strchr(", \t", p[n]))
			return true;
	}
	return false;
}

enum MHD_Result api_piston_connect(struct http_req *r)
{
	const char *key = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Sec-WebSocket-Key");
	const char *version = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Sec-WebSocket-Version");
	char accept[29];
	if (strcmp(r->method, "GET"))
		return http_error(r, 405, 0, "only GET here");
	if (!has_token(r, "Upgrade", "websocket") || !has_token(r, "Connection", "upgrade"))
		return http_error(r, 426, 0, "/api/v2/connect is a WebSocket: Upgrade: websocket");
	if (!version || strcmp(version, "13"))
		return http_error(r, 426, 0, "Sec-WebSocket-Version: 13 only");
	if (!key || ws_accept(key, accept))
		return http_error(r, 400, 0, "Sec-WebSocket-Key: 16 bytes in base64");
	if (!http_stream_begin(r))
		return MHD_YES;
	struct session *s = calloc(1, sizeof(*s));
	struct MHD_Response *resp = s ? MHD_create_response_for_upgrade(upgraded, s) : NULL;
	if (!resp) {
		free(s);
		vmrund_stream_end(r->d, (unsigned)r->tenant);
		return http_error(r, 500, 0, "out of memory");
	}
	s->u = (struct sbx_user){ .d = r->d, .tenant = (unsigned)r->tenant };
	s->ev.fd = -1;
	s->rd.max = r->d->cfg.max_body;
	http_at_end(r, abandoned, s);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
	MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept);
	return http_queue(r, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
}
