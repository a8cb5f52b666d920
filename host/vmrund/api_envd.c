/* envd under e2b_prefix (docs/e2b.md): what the `e2b` SDK's `commands`
 * and `files` call with E2B_SANDBOX_URL set to vmrund's address and
 * that prefix, each call naming its sandbox in E2b-Sandbox-Id and
 * carrying its access token (envd.h) in X-Access-Token. The Connect
 * services process.Process and filesystem.Filesystem (JSON; unary
 * calls, and server streams in Connect's envelopes) and the plain HTTP
 * /files and /health, made as calls on the sandbox's supervisor
 * (sandbox_calls.h); a sandbox another node holds has its calls passed
 * to that node whole (api_sandbox_here). */
#include "api.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "clock.h"
#include "daemon.h"
#include "api_envd.h"
#include "envd.h"
#include "errmsg.h"
#include "sandbox_calls.h"
#include "sandboxes.h"

#define ENVD_PING_S 50            /* a stream's keepalive when the client asks for none */
#define ENVD_PING_MAX_S 60        /* and at the longest: a client gone is seen at a keepalive's write */
#define ENVD_START_SLACK_MS 5000  /* a Start's stream outlives its command's timeout by this, for the exit */


bool api_envd_path(const char *p)
{
	return !strncmp(p, "/process.Process/", 17) || !strncmp(p, "/filesystem.Filesystem/", 23) ||
	       !strcmp(p, "/files") || !strcmp(p, "/health");
}

/* ---- answers ------------------------------------------------------------------------ */

static enum MHD_Result frames(struct http_req *r, const char *buf, size_t len)
{
	return http_bytes(r, 200, "application/connect+json", buf, len);
}

/* Connect's error: a unary call's status and {"code", "message"}; a
 * stream's 200 with only its end message. */
enum MHD_Result call_fail(struct call *c, enum envd_code code, const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->plain)   /* a sandbox that is not running is E2B's 502, which the SDK reads as its end */
		return http_error(c->r, code == ENVD_UNAVAILABLE ? 502 : envd_code_status(code), 0, "%s", msg);
	if (!c->stream) {
		json_t *e = envd_error(code, msg);
		char *text = e ? json_dumps(e, JSON_COMPACT) : NULL;
		json_decref(e);
		enum MHD_Result rc = text ? http_bytes(c->r, envd_code_status(code), "application/json", text, strlen(text))
					  : MHD_NO;
		free(text);
		return rc;
	}
	struct pending q = { 0 };
	if (envd_frame(&q, ENVD_FLAG_END, envd_end(code, msg)))
		return MHD_NO;
	enum MHD_Result rc = frames(c->r, q.p, q.len);
	pending_free(&q);
	return rc;
}

/* A supervisor's call that did not answer what was wanted: its status
 * as Connect's code, with what it said. */
enum MHD_Result call_failed(struct call *c, int status, const json_t *out, const char *what)
{
	if (status < 0)
		return call_fail(c, ENVD_UNAVAILABLE, "%s", c->u.err);
	const char *m = json_string_value(json_object_get(out, "message"));
	return call_fail(c, envd_code_of_status((unsigned)status), "%s: %s", what, m ? m : "failed");
}

enum MHD_Result call_unary(struct call *c, json_t *msg)
{
	return msg ? http_json(c->r, 200, msg) : call_fail(c, ENVD_INTERNAL, "out of memory");
}

/* ---- who is asking ----------------------------------------------------------------------- */

/* The request's user, as the SDK says it (Basic "USER:" when it names
 * one; ?username= on /files): absent or E2B's default "user" is the
 * sandbox's one user; another (root) cannot be had. 0, or -1 after
 * answering. */
static int user_ok(struct call *c)
{
	const char *auth = MHD_lookup_connection_value(c->r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	const char *q = MHD_lookup_connection_value(c->r->conn, MHD_GET_ARGUMENT_KIND, "username");
	char *name = NULL;
	size_t n = 0;
	if (auth && !strncasecmp(auth, "Basic ", 6) && envd_bytes(auth + 6, strlen(auth + 6), &name, &n) == 0) {
		char *colon = strchr(name, ':');
		if (colon)
			*colon = '\0';
	}
	const char *who = name && *name ? name : q && *q ? q : NULL;
	bool ok = !who || !strcmp(who, "user");
	char w[80];
	if (!ok)
		call_fail(c, ENVD_PERMISSION_DENIED, "user %s: a vmrun sandbox runs everything as its one user (\"user\"; docs/e2b.md)",
		     errmsg_printable(w, sizeof(w), who));
	free(name);
	return ok ? 0 : -1;
}

/* The sandbox the call names, its tenant by its token, and that it runs
 * here: 1 to go on; 0 after answering, or after passing the call to the
 * node that holds the sandbox. */
int call_begin(struct call *c)
{
	struct http_req *r = c->r;
	struct vmrund *d = r->d;
	const char *id = c->host_id ? c->host_id : MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "E2b-Sandbox-Id");
	const char *token = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Access-Token");
	char q[80];
	if (!id || strlen(id) != STORE_ID_LEN || strspn(id, "0123456789abcdef") != STORE_ID_LEN) {
		call_fail(c, ENVD_INVALID_ARGUMENT, "E2b-Sandbox-Id: %s", id ? "no sandbox's id" : "the header is missing");
		return 0;
	}
	snprintf(c->id, sizeof(c->id), "%s", id);
	int t = token ? envd_token_tenant(&d->ts, id, token) : http_anonymous(r);
	if (t < 0) {
		call_fail(c, ENVD_UNAUTHENTICATED, token ? "the access token does not open sandbox %s"
						    : "sandbox %s: its access token is required (X-Access-Token)", id);
		return 0;
	}
	unsigned wait = vmrund_rate(d, (unsigned)t);
	if (wait) {
		call_fail(c, ENVD_RESOURCE_EXHAUSTED, "tenant %s is over its request rate", d->ts.t[t].name);
		return 0;
	}
	r->tenant = t;
	c->u = (struct sbx_user){ .d = d, .tenant = (unsigned)t };
	if (user_ok(c))
		return 0;
	struct store_sandbox sb;
	char err[300];
	int found = vmrund_sbx_get(d, d->ts.t[t].name, id, &sb, err, sizeof(err));
	if (found < 0) {
		call_fail(c, ENVD_UNAVAILABLE, "the store: %s", err);
		return 0;
	}
	enum sbx_row_state st = found ? sb.state : SBS_STOPPED;
	if (found)
		store_sandbox_free(&sb);
	/* E2B's proxy answers 502 for a sandbox that is not running, which
	 * the SDK reads as the sandbox's end (its TimeoutError): Connect's
	 * unavailable is the same to it */
	if (st != SBS_RUNNING) {
		call_fail(c, ENVD_UNAVAILABLE, "sandbox %s is %s%s", errmsg_printable(q, sizeof(q), id),
		     found ? store_sbx_state_name(st) : "not found",
		     st == SBS_PAUSED ? " (Sandbox.connect resumes it)" : "");
		return 0;
	}
	if (vmrund_sbx_here(d, id))
		return 1;
	return api_sandbox_here(r, id);
}

/* The call's message: a unary call's JSON body, a stream's one
 * envelope. NULL after answering 400. */
json_t *call_message(struct call *c)
{
	char err[300];
	json_t *v;
	if (c->stream) {
		v = envd_unwrap(c->r->body, c->r->body_len, err, sizeof(err));
	} else {
		json_error_t je;
		v = json_loadb(c->r->body_len ? c->r->body : "{}", c->r->body_len ? c->r->body_len : 2, 0, &je);
		if (!json_is_object(v))
			snprintf(err, sizeof(err), "the body is not a JSON object: %s", v ? "" : je.text);
	}
	if (!json_is_object(v)) {
		json_decref(v);
		call_fail(c, ENVD_INVALID_ARGUMENT, "%s", err);
		return NULL;
	}
	return v;
}

/* ---- process.Process: the streams ------------------------------------------------------------ */

/* A command's events on their way to the client as ProcessEvents. */
struct stream {
	struct vmrund *d;
	unsigned tenant;              /* whose stream place it holds */
	struct sbxc ev;               /* the supervisor's events of the command */
	char *sse;                    /* of them, what is not yet a whole event */
	size_t sse_len;
	struct pace pace;             /* frames not yet sent, the client's deadline, keepalives */
	bool pty;                     /* the command's on a terminal: its stdout is pty data */
};

static int on_event(void *ctx, const char *name, const char *data, size_t len)
{
	struct stream *s = ctx;
	bool end;
	enum envd_code code;
	json_t *msg = envd_event(name, data, len, s->pty, &end, &code);
	if (msg)
		envd_out_frame(&s->pace.out, msg);
	if (end)
		envd_out_end(&s->pace.out, code, code == ENVD_DEADLINE_EXCEEDED ? "the command ran past its timeout (timeoutMs) and was killed"
								 : NULL);
	return end;
}

ssize_t pace_read(struct pace *p, char *buf, size_t max, void (*step)(void *ctx, int64_t now, int64_t until),
		  void *ctx)
{
	for (;;) {
		size_t n = pending_take(&p->out.q, buf, max);
		if (n)
			return (ssize_t)n;
		if (p->out.done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		int64_t now = clock_mono_ms();
		if (p->deadline_ms && now >= p->deadline_ms) {
			envd_out_end(&p->out, ENVD_DEADLINE_EXCEEDED, p->deadline_why);
		} else if (now >= p->next_ping_ms) {
			p->next_ping_ms = now + p->ping_ms;
			envd_out_frame(&p->out, json_incref(p->keepalive));
		} else {
			step(ctx, now, p->deadline_ms && p->deadline_ms < p->next_ping_ms ? p->deadline_ms : p->next_ping_ms);
		}
	}
}

void pace_start(struct pace *p, struct http_req *r, int64_t slack_ms, const char *deadline_why, json_t *keepalive)
{
	int64_t t = call_timeout_ms(r), now = clock_mono_ms();
	*p = (struct pace){ .deadline_ms = t ? now + t + slack_ms : 0, .ping_ms = call_ping_ms(r),
			    .deadline_why = deadline_why, .keepalive = keepalive };
	p->next_ping_ms = now + p->ping_ms;
}

void pace_free(struct pace *p)
{
	envd_out_free(&p->out);
	json_decref(p->keepalive);
	p->keepalive = NULL;
}

/* Wait until then at most for the command's events, and frame them. */
static void stream_step(void *ctx, int64_t now, int64_t until)
{
	struct stream *s = ctx;
	/* bytes that came with the head are read before any poll */
	struct pollfd p = { .fd = s->ev.fd, .events = POLLIN };
	int ready = s->ev.off < s->ev.len ? 1 : poll(&p, 1, (int)(until - now));
	if (ready < 0 && errno != EINTR)
		envd_out_end(&s->pace.out, ENVD_INTERNAL, "poll failed");
	else if (ready > 0 && !sbxu_events_read(&s->ev, &s->sse, &s->sse_len, on_event, s) && !s->pace.out.done)
		envd_out_end(&s->pace.out, ENVD_UNAVAILABLE, "the sandbox stopped while the command ran");
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct stream *s = cls;
	return pace_read(&s->pace, buf, max, stream_step, s);
}

static void stream_free(void *cls)
{
	struct stream *s = cls;
	sbxc_close(&s->ev);
	vmrund_stream_end(s->d, s->tenant);
	free(s->sse);
	pace_free(&s->pace);
	free(s);
}

/* The client's Connect-Timeout-Ms, in ms (0: none), and the keepalive
 * interval it asks for, in ms. */
int64_t call_timeout_ms(struct http_req *r)
{
	const char *v = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Connect-Timeout-Ms");
	char *end;
	/* Connect's header is at most 10 digits; past the longest command, the longest command */
	long long ms = v && strlen(v) <= 10 ? strtoll(v, &end, 10) : 0;
	if (!v || strlen(v) > 10 || *end || ms <= 0)
		return 0;
	return ms < ENVD_NO_TIMEOUT_S * 1000LL ? ms : ENVD_NO_TIMEOUT_S * 1000LL;
}

int64_t call_ping_ms(struct http_req *r)
{
	const char *v = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Keepalive-Ping-Interval");
	long s = v ? strtol(v, NULL, 10) : 0;
	return (s >= 1 && s <= ENVD_PING_MAX_S ? s : ENVD_PING_S) * 1000;
}

/* One of the tenant's stream places for the call: true, or false after
 * answering resource_exhausted in the stream's end frame. */
bool call_place(struct call *c)
{
	struct vmrund *d = c->r->d;
	if (vmrund_stream_begin(d, (unsigned)c->r->tenant))
		return true;
	call_fail(c, ENVD_RESOURCE_EXHAUSTED, "tenant %s has %u streams and waits open (max_streams_per_tenant); end one first",
	     d->ts.t[c->r->tenant].name, d->cfg.max_streams_per_tenant);
	return false;
}

/* Answer with command cid's events, its start first, on the stream place
 * the caller took (given back here, whatever happens): true once answered
 * (*rc), false when the events could not be opened (nothing answered; why
 * in c->u.err). The stream ends at the client's timeout (plus slack, for
 * a Start whose command has that timeout itself, so that its exit comes
 * first). */
static bool follow(struct call *c, unsigned cid, bool pty, int64_t slack_ms, enum MHD_Result *rc)
{
	struct http_req *r = c->r;
	struct stream *s = calloc(1, sizeof(*s));
	*rc = MHD_NO;
	if (!s) {
		vmrund_stream_end(r->d, (unsigned)r->tenant);
		return true;
	}
	*s = (struct stream){ .d = r->d, .tenant = (unsigned)r->tenant, .ev.fd = -1, .pty = pty };
	pace_start(&s->pace, r, slack_ms, "the stream's timeout (timeoutMs) passed",
		   json_pack("{s:{s:{}}}", "event", "keepalive"));
	if (sbxu_events(&c->u, c->id, cid, &s->ev)) {
		stream_free(s);
		return false;
	}
	struct MHD_Response *resp = NULL;
	if (!envd_out_frame(&s->pace.out, json_pack("{s:{s:{s:i}}}", "event", "start", "pid", (int)cid)))
		resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 65536, stream_read, s, stream_free);
	if (!resp) {
		stream_free(s);
		return true;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/connect+json");
	*rc = http_queue(r, 200, resp);
	return true;
}

/* process.Process/Start: a background command (its stdin closed at
 * once unless asked open), then its events. The stream's place is taken
 * first, and a command whose stream cannot follow it is killed: none is
 * left running that its client never heard of. */
static enum MHD_Result start(struct call *c, const json_t *req)
{
	char err[300];
	json_t *native;
	bool open_stdin;
	int64_t t = call_timeout_ms(c->r);
	double timeout_s = t ? ceil((double)t / 1000.0) : ENVD_NO_TIMEOUT_S;
	enum envd_code code = envd_start_body(req, timeout_s, &native, &open_stdin, err, sizeof(err));
	if (code)
		return call_fail(c, code, "%s", err);
	if (!call_place(c)) {
		json_decref(native);
		return MHD_YES;
	}
	json_t *out;
	int st = sbxu_call(&c->u, c->id, "POST", "/commands", native, SBXU_CALL_MS, &out);
	bool pty = json_object_get(native, "pty") != NULL;
	json_decref(native);
	json_int_t cid = json_integer_value(json_object_get(out, "id"));
	if (st != 201 || cid <= 0) {
		vmrund_stream_end(c->r->d, (unsigned)c->r->tenant);
		enum MHD_Result rc = call_failed(c, st, out, "the command");
		json_decref(out);
		return rc;
	}
	json_decref(out);
	enum MHD_Result rc;
	if (!open_stdin && sbxu_stdin(&c->u, c->id, (unsigned)cid, "", 0, true, SBXU_CALL_MS) < 0)
		vmrund_stream_end(c->r->d, (unsigned)c->r->tenant);
	else if (follow(c, (unsigned)cid, pty, ENVD_START_SLACK_MS, &rc))
		return rc;
	char why[sizeof(c->u.err)];
	snprintf(why, sizeof(why), "%s", c->u.err);
	sbxu_signal(&c->u, c->id, (unsigned)cid, SIGKILL);
	return call_fail(c, ENVD_UNAVAILABLE, "%s", why);
}

/* process.Process/Connect: a command's events, from its start. */
static enum MHD_Result connect_to(struct call *c, const json_t *req)
{
	char err[300], target[64];
	unsigned pid;
	enum envd_code code = envd_pid(req, &pid, err, sizeof(err));
	if (code)
		return call_fail(c, code, "%s", err);
	snprintf(target, sizeof(target), "/commands/%u", pid);
	json_t *out;
	int st = sbxu_call(&c->u, c->id, "GET", target, NULL, SBXU_CALL_MS, &out);
	bool pty = json_object_get(json_object_get(out, "request"), "pty") != NULL;
	json_decref(out);
	if (st != 200)
		return st == 404 ? call_fail(c, ENVD_NOT_FOUND, "process with pid %u not found", pid)
				 : call_failed(c, st, NULL, "the process");
	if (!call_place(c))
		return MHD_YES;
	enum MHD_Result rc;
	return follow(c, pid, pty, 0, &rc) ? rc : call_fail(c, ENVD_UNAVAILABLE, "%s", c->u.err);
}

/* ---- process.Process: unary ---------------------------------------------------------------- */

static enum MHD_Result list(struct call *c)
{
	json_t *out;
	int st = sbxu_call(&c->u, c->id, "GET", "/commands", NULL, SBXU_CALL_MS, &out);
	if (st != 200) {
		enum MHD_Result rc = call_failed(c, st, out, "the processes");
		json_decref(out);
		return rc;
	}
	json_t *a = json_array(), *cmd;
	size_t i;
	json_array_foreach(json_object_get(out, "commands"), i, cmd) {
		json_t *p = envd_process_info(cmd);
		if (p)
			json_array_append_new(a, p);
	}
	json_decref(out);
	return call_unary(c, json_pack("{s:o}", "processes", a));
}

/* SendInput and CloseStdin: data to process pid's stdin, closing it
 * after when close. */
static enum MHD_Result input(struct call *c, const json_t *req, bool close)
{
	char err[300], *data = NULL;
	size_t n = 0;
	unsigned pid;
	enum envd_code code = envd_pid(req, &pid, err, sizeof(err));
	if (!code && !close)
		code = envd_input(req, &data, &n, err, sizeof(err));
	if (code)
		return call_fail(c, code, "%s", err);
	int rc = sbxu_stdin(&c->u, c->id, pid, data ? data : "", n, close, SBXU_CALL_MS);
	free(data);
	if (rc < 0 && strstr(c->u.err, ": 404"))
		return call_fail(c, ENVD_NOT_FOUND, "process with pid %u not found", pid);
	if (rc < 0)
		return call_fail(c, ENVD_UNAVAILABLE, "%s", c->u.err);
	if (rc > 0)
		return call_fail(c, ENVD_FAILED_PRECONDITION, "process %u: its stdin is closed, or it has ended", pid);
	return call_unary(c, json_object());
}

static enum MHD_Result send_signal(struct call *c, const json_t *req)
{
	char err[300], target[64];
	unsigned pid;
	int signo;
	enum envd_code code = envd_pid(req, &pid, err, sizeof(err));
	if (!code)
		code = envd_signal(req, &signo, err, sizeof(err));
	if (code)
		return call_fail(c, code, "%s", err);
	snprintf(target, sizeof(target), "/commands/%u/signal", pid);
	json_t *body = json_pack("{s:i}", "signal", signo), *out;
	int st = sbxu_call(&c->u, c->id, "POST", target, body, SBXU_CALL_MS, &out);
	json_decref(body);
	json_decref(out);
	/* one that ended is gone, as E2B's envd says of it: the SDK's kill() is false */
	if (st == 404 || st == 409)
		return call_fail(c, ENVD_NOT_FOUND, "process with pid %u not found", pid);
	return st == 202 ? call_unary(c, json_object()) : call_failed(c, st, NULL, "the signal");
}

/* Update: a terminal's new size. */
static enum MHD_Result update(struct call *c, const json_t *req)
{
	char err[300], target[64];
	unsigned pid;
	json_t *native = NULL, *out = NULL;
	enum envd_code code = envd_pid(req, &pid, err, sizeof(err));
	if (!code)
		code = envd_resize_body(req, &native, err, sizeof(err));
	if (code)
		return call_fail(c, code, "%s", err);
	snprintf(target, sizeof(target), "/commands/%u/resize", pid);
	int st = sbxu_call(&c->u, c->id, "POST", target, native, SBXU_CALL_MS, &out);
	json_decref(native);
	enum MHD_Result rc = st == 200 ? call_unary(c, json_object())
		: st == 404 ? call_fail(c, ENVD_NOT_FOUND, "process with pid %u not found", pid)
		: st == 409 ? call_fail(c, ENVD_FAILED_PRECONDITION, "process %u: it has no terminal, or it has ended", pid)
			    : call_failed(c, st, out, "the resize");
	json_decref(out);
	return rc;
}

static enum MHD_Result process(struct call *c, const char *method)
{
	c->stream = !strcmp(method, "Start") || !strcmp(method, "Connect");
	/* a client stream, which HTTP/1.1 and the SDK's transport do not carry */
	if (!strcmp(method, "StreamInput"))
		return call_fail(c, ENVD_UNIMPLEMENTED, "process.Process/StreamInput: vmrun takes stdin by SendInput (docs/e2b.md)");
	bool known = c->stream || !strcmp(method, "List") || !strcmp(method, "SendInput") ||
		     !strcmp(method, "CloseStdin") || !strcmp(method, "SendSignal") || !strcmp(method, "Update");
	if (!known) {
		char m[80];
		return call_fail(c, ENVD_UNIMPLEMENTED, "process.Process/%s: no such method", errmsg_printable(m, sizeof(m), method));
	}
	c->r->stream = c->stream;
	if (call_begin(c) != 1)
		return MHD_YES;
	json_t *req = call_message(c);
	if (!req)
		return MHD_YES;
	enum MHD_Result rc = !strcmp(method, "Start") ? start(c, req)
		: !strcmp(method, "Connect") ? connect_to(c, req)
		: !strcmp(method, "List") ? list(c)
		: !strcmp(method, "SendInput") ? input(c, req, false)
		: !strcmp(method, "CloseStdin") ? input(c, req, true)
		: !strcmp(method, "Update") ? update(c, req)
		: send_signal(c, req);
	json_decref(req);
	return rc;
}

enum MHD_Result api_envd(struct http_req *r, const char *p, const char *host_id)
{
	struct call c = { .r = r, .host_id = host_id };
	if (!strncmp(p, "/process.Process/", 17) || !strncmp(p, "/filesystem.Filesystem/", 23)) {
		bool proc = p[1] == 'p';
		if (strcmp(r->method, "POST"))
			return call_fail(&c, ENVD_UNIMPLEMENTED, "Connect's calls are POSTs");
		return proc ? process(&c, p + 17) : envd_filesystem(&c, p + 23);
	}
	c.plain = true;
	if (!strcmp(p, "/files"))
		return envd_files(&c);
	/* /health: the SDK's probe after a dropped connection, which reads
	 * 502 as the sandbox's end */
	if (strcmp(r->method, "GET"))
		return http_error(r, 405, 0, "only GET here");
	if (call_begin(&c) != 1)
		return MHD_YES;
	return http_bytes(r, 204, "application/json", "", 0);
}
