/* /v1/sandboxes (docs/sandboxes.md; openapi.yaml): create, list, one,
 * delete and timeout are vmrund's own (sandboxes.h); everything else
 * under a sandbox (commands, their events, files) is passed through to
 * its supervisor's API, answers streamed back as they come. */
#include "api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "clock.h"
#include "daemon.h"
#include "sandbox_http.h"
#include "sandboxes.h"

#define PASS_BLOCK   65536
#define PASS_CALL_MS 60000        /* each read of an answer that is not a wait or a stream */
#define LIST_MAX     1000         /* sandboxes in one listing */

static bool id_ok(const char *id)
{
	return strlen(id) == STORE_ID_LEN && strspn(id, "0123456789abcdef") == STORE_ID_LEN;
}

/* Tenant's sandbox id: 1 (free *sb), or 0 after answering 404/503. */
static int find(struct http_req *r, const char *id, struct store_sandbox *sb)
{
	char err[300];
	if (!id_ok(id)) {
		http_error(r, 404, 0, "no sandbox %.64s", id);
		return 0;
	}
	int found = vmrund_sbx_get(r->d, r->d->ts.t[r->tenant].name, id, sb, err, sizeof(err));
	if (found < 0)
		http_error(r, 503, 2, "the store: %s", err);
	else if (!found)
		http_error(r, 404, 0, "no sandbox %s", id);
	return found == 1;
}

/* The view, with what its supervisor says of it now while it runs (or is
 * paused: its life left, kept by the supervisor, not the store) here. */
static json_t *view_live(struct http_req *r, const struct store_sandbox *sb)
{
	json_t *v = sandbox_view(sb, clock_wall_ms());
	if ((sb->state != SBS_RUNNING && sb->state != SBS_PAUSED) || !vmrund_sbx_here(r->d, sb->id))
		return v;
	char dir[PATH_MAX], *out = NULL;
	unsigned status;
	vmrund_sbx_dir(r->d, sb->id, dir, sizeof(dir));
	if (sbxc_call(dir, "GET", "/", NULL, 5000, 65536, &status, &out) == 0 && status == 200) {
		json_t *live = json_loads(out, 0, NULL);
		const char *keep[] = { "commands_running", "commands", "guest_faults" };
		for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
			if (json_is_integer(json_object_get(live, keep[i])))
				json_object_set(v, keep[i], json_object_get(live, keep[i]));
		if (json_is_object(json_object_get(live, "usage")))
			json_object_set(v, "usage", json_object_get(live, "usage"));
		if (sb->state == SBS_PAUSED && json_is_number(json_object_get(live, "time_left_s"))) {
			json_object_set(v, "time_left_s", json_object_get(live, "time_left_s"));
			json_object_set_new(v, "timeout_at", json_null());   /* none while paused */
		}
		const char *paused[] = { "paused_at", "pauses" };
		for (size_t i = 0; i < sizeof(paused) / sizeof(paused[0]); i++)
			if (json_object_get(live, paused[i]))
				json_object_set(v, paused[i], json_object_get(live, paused[i]));
		json_decref(live);
	}
	free(out);
	return v;
}

static enum MHD_Result answer_sandbox(struct http_req *r, unsigned status, const char *id)
{
	struct store_sandbox sb;
	if (!find(r, id, &sb))
		return MHD_YES;
	json_t *v = view_live(r, &sb);
	store_sandbox_free(&sb);
	return http_json(r, status, v);
}

/* POST /v1/sandboxes with from_checkpoint and count: count forks, made
 * one after another; 201 with them all, or the first failure's error
 * (the forks made before it stay, and are named in it). */
static enum MHD_Result create_forks(struct http_req *r, json_t *body, json_int_t count)
{
	json_t *made = json_array();
	char id[SCHED_ID_MAX], ids[VMRUND_SBX_FORKS_MAX * (SCHED_ID_MAX + 1)] = "";
	for (json_int_t i = 0; i < count; i++) {
		struct vmrund_answer a = vmrund_sbx_create(r->d, (unsigned)r->tenant, body, NULL, id);
		if (a.status != 201) {
			json_decref(made);
			json_decref(body);
			return http_error(r, a.status, a.retry_after_s, "%s%s%s", a.message, ids[0] ? "; made before it: " : "",
					  ids);
		}
		snprintf(ids + strlen(ids), sizeof(ids) - strlen(ids), "%s%s", ids[0] ? " " : "", id);
		/* the checkpoint never changes: its digest was checked once */
		json_object_del(body, "expect_digest");
		struct store_sandbox sb;
		char err[300];
		if (vmrund_sbx_get(r->d, r->d->ts.t[r->tenant].name, id, &sb, err, sizeof(err)) == 1) {
			json_array_append_new(made, view_live(r, &sb));
			store_sandbox_free(&sb);
		}
	}
	json_decref(body);
	return http_json(r, 201, json_pack("{s:o}", "sandboxes", made));
}

static enum MHD_Result create(struct http_req *r)
{
	json_t *body = http_body_json(r);
	if (!body)
		return MHD_YES;
	const json_t *count = json_object_get(body, "count");
	if (count) {
		json_int_t n = json_integer_value(count);
		if (!json_is_integer(count) || n < 1 || n > VMRUND_SBX_FORKS_MAX || !json_object_get(body, "from_checkpoint") ||
		    MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Idempotency-Key")) {
			json_decref(body);
			return http_error(r, 400, 0, "count: 1 to %d forks, with from_checkpoint and without an Idempotency-Key",
					  VMRUND_SBX_FORKS_MAX);
		}
		return create_forks(r, body, n);
	}
	struct store_idem idem;
	char hash[STORE_IDEM_HASH_LEN + 1], id[SCHED_ID_MAX];
	int keyed = api_idempotency_key(r, &idem, hash);
	if (keyed < 0) {
		json_decref(body);
		return MHD_YES;
	}
	struct vmrund_answer a = vmrund_sbx_create(r->d, (unsigned)r->tenant, body, keyed ? &idem : NULL, id);
	json_decref(body);
	if (a.status != 200 && a.status != 201)
		return http_error(r, a.status, a.retry_after_s, "%s", a.message);
	return answer_sandbox(r, a.status, id);
}

struct list_ctx {
	json_t *a;
	int want;                     /* a state, or -1: all */
};

static int list_one(void *ctx, const struct store_sandbox *sb)
{
	struct list_ctx *l = ctx;
	if (l->want >= 0 && (int)sb->state != l->want)
		return 0;
	json_array_append_new(l->a, sandbox_view(sb, clock_wall_ms()));
	return json_array_size(l->a) >= LIST_MAX;
}

/* GET /v1/sandboxes[?state=S]: the tenant's, oldest first. */
static enum MHD_Result list(struct http_req *r)
{
	const char *st = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "state");
	struct list_ctx l = { json_array(), st ? store_sbx_state_parse(st) : -1 };
	if (st && l.want < 0) {
		json_decref(l.a);
		return http_error(r, 400, 0, "state: starting, running, stopping, stopped or lost");
	}
	char err[300];
	pthread_mutex_lock(&r->d->lock);
	int rc = r->d->store->ops->sbx_each(r->d->store, r->d->ts.t[r->tenant].name, NULL, false, list_one, &l, err,
					     sizeof(err));
	pthread_mutex_unlock(&r->d->lock);
	if (rc < 0) {
		json_decref(l.a);
		return http_error(r, 503, 2, "the store: %s", err);
	}
	return http_json(r, 200, json_pack("{s:o,s:b}", "sandboxes", l.a, "truncated", rc > 0));
}

static enum MHD_Result answer_of(struct http_req *r, struct vmrund_answer a, const char *id)
{
	if (a.status != 200)
		return http_error(r, a.status, a.retry_after_s, "%s", a.message);
	return answer_sandbox(r, 200, id);
}

/* ---- passing through ------------------------------------------------------------- */

/* The query, as the client sent it, rebuilt (libmicrohttpd hands it over
 * decoded): each value percent-encoded again. */
struct query {
	char *p;
	size_t len, cap;
	bool over;
};

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	struct query *q = cls;
	const char *parts[2] = { key, value };
	for (int k = 0; k < 2 && parts[k]; k++) {
		if (q->len + 2 > q->cap) {
			q->over = true;
			return MHD_NO;
		}
		char sep = k ? '=' : q->len ? '&' : '?';
		q->p[q->len++] = sep;
		for (const unsigned char *c = (const unsigned char *)parts[k]; *c; c++) {
			bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
				     strchr("-._~/", *c);
			if (q->len + 4 > q->cap) {
				q->over = true;
				return MHD_NO;
			}
			q->len += (size_t)snprintf(q->p + q->len, 4, plain ? "%c" : "%%%02X", *c);
		}
	}
	return MHD_YES;
}

/* "/REST?QUERY" into target: 0, or -1 after answering 414. */
static int target_of(struct http_req *r, const char *rest, char target[SBXC_TARGET_MAX])
{
	int n = snprintf(target, SBXC_TARGET_MAX, "%s", rest);
	struct query q = { target + n, 0, n < SBXC_TARGET_MAX ? SBXC_TARGET_MAX - (size_t)n : 0, n >= SBXC_TARGET_MAX };
	if (!q.over)
		MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, add_arg, &q);
	if (q.over) {
		http_error(r, 414, 0, "the path and query are over %d bytes", SBXC_TARGET_MAX);
		return -1;
	}
	q.p[q.len] = '\0';
	return 0;
}

/* An answer read from a supervisor, on its way to the client. */
struct pass {
	struct sbxc c;
	struct vmrund *d;
	int place;                    /* the tenant whose stream place it holds, or -1 */
};

static ssize_t pass_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct pass *p = cls;
	ssize_t n = sbxc_read_body(&p->c, buf, max);
	if (n > 0)
		return n;
	return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void pass_free(void *cls)
{
	struct pass *p = cls;
	sbxc_close(&p->c);
	if (p->place >= 0)
		vmrund_stream_end(p->d, (unsigned)p->place);
	free(p);
}

/* Answer with what the supervisor answers on p's connection (its head
 * read already); p is taken. */
static enum MHD_Result pass_answer(struct http_req *r, struct pass *p)
{
	const struct sbxc_head *h = &p->c.head;
	struct MHD_Response *resp = MHD_create_response_from_callback(
		h->length >= 0 ? (uint64_t)h->length : MHD_SIZE_UNKNOWN, PASS_BLOCK, pass_read, p, pass_free);
	if (!resp) {
		pass_free(p);
		return MHD_NO;
	}
	if (h->type[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, h->type);
	if (h->retry_after[0])
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, h->retry_after);
	return http_queue(r, h->status, resp);
}

/* Where a sandbox's calls go: its supervisor here, or the node that
 * holds it. */
struct dest {
	bool here;
	char dir[PATH_MAX];           /* here: the sandbox's directory */
	char addr[256];               /* elsewhere: the node's published address */
};

/* The node (not this one) that holds open sandbox id, and its address:
 * 0, or -1 after answering 502 (no address, a request forwarded once
 * already) or 503. */
static int peer(struct http_req *r, const char *id, const char *node, struct dest *t)
{
	struct vmrund *d = r->d;
	char err[300];
	if (MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, SBXC_VIA)) {
		http_error(r, 502, 0, "sandbox %s is held by node %s, and this request was forwarded once already", id, node);
		return -1;
	}
	int found = 0;
	pthread_mutex_lock(&d->lock);
	if (d->store->ops->address_of)
		found = d->store->ops->address_of(d->store, node, t->addr, sizeof(t->addr), err, sizeof(err));
	pthread_mutex_unlock(&d->lock);
	if (found < 0)
		http_error(r, 503, 2, "the store: %s", err);
	else if (!found)
		http_error(r, 502, 0, "sandbox %s is held by node %s, which published no address (advertise)", id, node);
	return found == 1 ? 0 : -1;
}

/* Where the asking tenant's sandbox id is served: 0 with *t, or -1 after
 * answering (404; 409 when running is asked and it is not). A sandbox
 * that is open on another node goes there, whatever its state. */
static int locate(struct http_req *r, const char *id, bool running, struct dest *t)
{
	struct store_sandbox sb;
	if (!find(r, id, &sb))
		return -1;
	enum sbx_row_state st = sb.state;
	bool open = st == SBS_STARTING || st == SBS_RUNNING || st == SBS_STOPPING || st == SBS_PAUSED;
	char node[STORE_NODE_MAX];
	snprintf(node, sizeof(node), "%s", sb.node);
	store_sandbox_free(&sb);
	/* a parked one (paused on no node) is resumed or deleted by whichever node is asked */
	*t = (struct dest){ .here = !open || !node[0] || !strcmp(node, r->d->node) };
	if (!t->here)
		return peer(r, id, node, t);
	if (running && (st != SBS_RUNNING || !vmrund_sbx_here(r->d, id))) {
		http_error(r, 409, st == SBS_STARTING ? 1 : 0, "sandbox %s is %s", id, store_sbx_state_name(st));
		return -1;
	}
	vmrund_sbx_dir(r->d, id, t->dir, sizeof(t->dir));
	return 0;
}

/* Open the exchange for r at t: the supervisor's REST, or the same path
 * on the node that holds the sandbox, as the client asked it (its key,
 * and this node as the one that forwarded it). The head is sent; a body
 * of length bytes is the caller's to send. 0, or -1 after answering. */
static int open_pass(struct http_req *r, const struct dest *t, const char *id, const char *rest, bool stream,
		     uint64_t length, struct pass *p)
{
	char target[SBXC_TARGET_MAX];
	if (target_of(r, t->here ? rest : r->path, target))
		return -1;
	const char *type = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	const char *idem = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Idempotency-Key");
	const char *auth = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	int timeout = stream ? 0 : PASS_CALL_MS;
	if (t->here ? sbxc_connect(&p->c, t->dir, timeout) : sbxc_connect_server(&p->c, t->addr, timeout)) {
		int e = errno;
		http_error(r, 502, 0, "sandbox %s: %s: %s", id, t->here ? "its supervisor" : t->addr, strerror(e));
		return -1;
	}
	if (!t->here) {
		/* authenticated here already: the key is the client's, for the other node to check again */
		/* E2B's clients send theirs as X-API-Key, which only its prefix takes */
		const char *e2b = r->d->cfg.e2b_prefix;
		bool e2b_path = e2b[0] && !strncmp(r->path, e2b, strlen(e2b));
		p->c.auth = auth && !strncasecmp(auth, "Bearer ", 7) ? auth + 7
			    : e2b_path ? MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-API-Key")
				       : NULL;
		p->c.via = r->d->node;
	}
	/* envd's calls (api_envd.c) say their sandbox and its token in
	 * headers of their own, and Connect's stream limits in two more */
	const char *names[] = { "E2b-Sandbox-Id", "X-Access-Token", "Connect-Timeout-Ms", "Keepalive-Ping-Interval" };
	const char *headers[2 * 4 + 1] = { NULL };
	for (size_t i = 0, k = 0; !t->here && i < 4; i++) {
		/* the sandbox as this node found it: a request routed by its host name has no header for it */
		const char *v = i ? MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, names[i]) : id;
		if (v) {
			headers[k++] = names[i];
			headers[k++] = v;
		}
	}
	p->c.headers = headers;
	int sent = sbxc_send_head(&p->c, r->method, target, type, idem, length);
	p->c.headers = NULL;
	if (sent) {
		int e = errno;
		sbxc_close(&p->c);
		http_error(r, e == EINVAL ? 400 : 502, 0, "sandbox %s: %s", id,
			   e == EINVAL ? "a header with a line break" : strerror(e));
		return -1;
	}
	return 0;
}

/* r passed on whole (its body in memory) to t, the answer streamed back. */
static enum MHD_Result pass_to(struct http_req *r, const struct dest *t, const char *id, const char *rest)
{
	/* a wait, a live stream or a diff (two walks of images, bounded by
	 * the supervisor) holds a thread: one of the tenant's places, and no
	 * read timeout of ours */
	size_t rl = strlen(rest);
	bool stream = (rl >= 7 && !strcmp(rest + rl - 7, "/events")) || !strcmp(rest, "/diff") ||
		      MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "wait") || r->stream;
	if (stream && !http_stream_begin(r))
		return MHD_YES;
	struct pass *p = calloc(1, sizeof(*p));
	if (!p) {
		if (stream)
			vmrund_stream_end(r->d, (unsigned)r->tenant);
		return MHD_NO;
	}
	p->d = r->d;
	p->place = stream ? r->tenant : -1;
	p->c.fd = -1;
	if (open_pass(r, t, id, rest, stream, r->body_len, p)) {
		pass_free(p);
		return MHD_YES;
	}
	if (sbxc_send(&p->c, r->body ? r->body : "", r->body_len) || sbxc_read_head(&p->c)) {
		int e = errno;
		pass_free(p);
		return http_error(r, 502, 0, "sandbox %s: %s: %s", id, t->here ? "its supervisor" : t->addr, strerror(e));
	}
	return pass_answer(r, p);
}

static enum MHD_Result pass(struct http_req *r, const char *id, const char *rest)
{
	struct dest t;
	/* what reads a paused sandbox's files (its diff, its checkpoints) goes
	 * to its supervisor too, which a paused sandbox still has */
	bool reads = !strcmp(r->method, "GET") && (!strcmp(rest, "/diff") || !strncmp(rest, "/checkpoints", 12));
	if (locate(r, id, !reads, &t))
		return MHD_YES;
	if (reads && t.here && !vmrund_sbx_here(r->d, id))
		return http_error(r, 409, 0, "sandbox %s is neither running nor paused on a node (a parked one is "
					     "read once it is resumed)", id);
	return pass_to(r, &t, id, rest);
}

enum MHD_Result api_sandbox_pass(struct http_req *r, const char *id, const char *rest)
{
	return pass(r, id, rest);
}

int api_sandbox_here(struct http_req *r, const char *id)
{
	struct dest t;
	if (locate(r, id, false, &t))
		return 0;
	if (t.here)
		return 1;
	pass_to(r, &t, id, "");
	return 0;
}

/* ---- uploads --------------------------------------------------------------------- */

struct api_upload {
	struct pass *p;
	bool failed;                  /* the supervisor stopped taking the body: the rest is dropped */
};

/* "ID/REST" of a /v1/sandboxes/ path into id and rest: 0, or -1. */
static int split(const char *p, char id[STORE_ID_LEN + 2], const char **rest)
{
	size_t n = strcspn(p, "/");
	snprintf(id, STORE_ID_LEN + 2, "%.*s", (int)(n <= STORE_ID_LEN ? n : STORE_ID_LEN + 1), p);
	*rest = p + n;
	return n ? 0 : -1;
}

bool api_sandbox_is_upload(const char *method, const char *url)
{
	char id[STORE_ID_LEN + 2];
	const char *rest;
	return !strcmp(method, "PUT") && !strncmp(url, "/v1/sandboxes/", 14) && !split(url + 14, id, &rest) &&
	       (!strcmp(rest, "/files") || !strcmp(rest, "/files/tar"));
}

enum MHD_Result api_sandbox_upload_begin(struct http_req *r, struct api_upload **u)
{
	char id[STORE_ID_LEN + 2];
	const char *rest;
	*u = NULL;
	split(r->path + 14, id, &rest);
	const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	char *end = NULL;
	unsigned long long len = cl ? strtoull(cl, &end, 10) : 0;
	if (!cl || end == cl || *end)
		return http_error(r, 411, 0, "an upload needs its Content-Length");
	struct dest t;
	if (locate(r, id, true, &t))
		return MHD_YES;
	struct api_upload *up = calloc(1, sizeof(*up));
	struct pass *p = calloc(1, sizeof(*p));
	if (!up || !p) {
		free(up);
		free(p);
		return MHD_NO;
	}
	p->d = r->d;
	p->place = -1;
	p->c.fd = -1;
	up->p = p;
	if (open_pass(r, &t, id, rest, false, len, p)) {
		api_sandbox_upload_free(up);
		return MHD_YES;
	}
	*u = up;
	return MHD_YES;
}

void api_sandbox_upload_data(struct api_upload *u, const char *data, size_t n)
{
	if (u && !u->failed && sbxc_send(&u->p->c, data, n) < 0)
		u->failed = true;   /* it answered early (a refusal), or went: its answer says which */
}

enum MHD_Result api_sandbox_upload_end(struct http_req *r, struct api_upload *u)
{
	if (sbxc_read_head(&u->p->c) < 0)
		return http_error(r, 502, 0, "the sandbox's supervisor: %s", strerror(errno));
	struct pass *p = u->p;
	u->p = NULL;
	return pass_answer(r, p);
}

void api_sandbox_upload_free(struct api_upload *u)
{
	if (!u)
		return;
	if (u->p)
		pass_free(u->p);
	free(u);
}

/* ---- routing --------------------------------------------------------------------- */

enum MHD_Result api_sandboxes(struct http_req *r, const char *p)
{
	bool get = !strcmp(r->method, "GET"), post = !strcmp(r->method, "POST");
	if (!*p || !strcmp(p, "/")) {
		if (post)
			return create(r);
		return get ? list(r) : http_error(r, 405, 0, "GET or POST here");
	}
	char id[STORE_ID_LEN + 2];
	const char *rest;
	if (split(p + 1, id, &rest))
		return http_error(r, 404, 0, "no such endpoint");
	bool del = !strcmp(r->method, "DELETE"), timeout = !strcmp(rest, "/timeout");
	bool pause = !strcmp(rest, "/pause"), resume = !strcmp(rest, "/resume");
	if (!*rest && !get && !del)
		return http_error(r, 405, 0, "GET or DELETE here");
	if ((timeout || pause || resume) && !post)
		return http_error(r, 405, 0, "only POST here");
	/* a change of a sandbox another node holds is that node's to make */
	struct dest t;
	if ((del && !*rest) || timeout || pause || resume) {
		if (locate(r, id, false, &t))
			return MHD_YES;
		if (!t.here)
			return pass_to(r, &t, id, rest);
	}
	if (!*rest)
		return get ? answer_sandbox(r, 200, id) : answer_of(r, vmrund_sbx_delete(r->d, (unsigned)r->tenant, id), id);
	if (timeout || pause || resume) {
		json_t *body = r->body_len ? http_body_json(r) : json_object();
		if (!body)
			return MHD_YES;
		struct vmrund_answer a = timeout ? vmrund_sbx_timeout(r->d, (unsigned)r->tenant, id, body)
						 : vmrund_sbx_pause(r->d, (unsigned)r->tenant, id, body, resume);
		json_decref(body);
		return answer_of(r, a, id);
	}
	if (!strncmp(rest, "/commands", 9) || !strncmp(rest, "/files", 6) || !strncmp(rest, "/checkpoints", 12) ||
	    (get && !strcmp(rest, "/diff")))
		return pass(r, id, rest);
	return http_error(r, 404, 0, "no such endpoint");
}
