/* E2B's control API under e2b_prefix (docs/e2b.md): what the `e2b` SDK
 * calls with E2B_API_URL set to vmrund's address and that prefix, onto
 * vmrund's own sandboxes (sandboxes.h), translated by e2b.h. Errors are
 * E2B's {"code", "message"}, whose code the SDK reads to raise its own
 * errors (a kill of an unknown sandbox is false, a pause of a paused one
 * false). A change of a sandbox another node holds is passed to that
 * node's same endpoint whole (api_sandbox_here). */
#include "api.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "e2b.h"
#include "envd.h"
#include "errmsg.h"
#include "run_pause.h"
#include "sandbox_http.h"
#include "sandboxes.h"

#define E2B_SCAN_MAX 10000        /* a tenant's sandboxes one listing looks at */
#define E2B_CHECKPOINT_MS 180000  /* a checkpoint: the VM paused, saved and resumed (the emulated host is slow) */


/* No body: 204, which the SDK reads as nothing. */
static enum MHD_Result no_content(struct http_req *r)
{
	return http_bytes(r, 204, "application/json", "", 0);
}

/* The asking tenant's sandbox id as its native view, when E2B knows it
 * (running or paused): 1 with *v, 0 none (no such id, another tenant's,
 * ended), -1 the store failed (err). Answers nothing. */
static int known(struct http_req *r, const char *id, json_t **v, char *err, size_t errlen)
{
	struct store_sandbox sb;
	*v = NULL;
	if (strlen(id) != STORE_ID_LEN || strspn(id, "0123456789abcdef") != STORE_ID_LEN)
		return 0;
	int found = vmrund_sbx_get(r->d, r->d->ts.t[r->tenant].name, id, &sb, err, errlen);
	if (found <= 0)
		return found;
	*v = sandbox_view(&sb, clock_wall_ms());
	store_sandbox_free(&sb);
	if (*v && !e2b_state(*v)) {
		json_decref(*v);
		*v = NULL;
	}
	return *v != NULL;
}

/* known's view, or NULL after answering 404 (E2B's) or 503. */
static json_t *view_of(struct http_req *r, const char *id)
{
	json_t *v;
	char err[300], q[80];
	int k = known(r, id, &v, err, sizeof(err));
	if (k < 0)
		http_error(r, 503, 0, "the store: %s", err);
	else if (!k)
		http_error(r, 404, 0, "sandbox \"%s\" not found", errmsg_printable(q, sizeof(q), id));
	return v;
}

/* Before a call on the asking tenant's sandbox id: true when this node
 * is to answer it; false after answering (404, 503) or after passing the
 * request to the node that holds it. */
static bool here(struct http_req *r, const char *id)
{
	json_t *v = view_of(r, id);
	json_decref(v);
	return v && api_sandbox_here(r, id);
}

/* A native answer that was not a success, as E2B's error (a 429's or a
 * 503's Retry-After kept: the SDK waits it out). */
static enum MHD_Result failed(struct http_req *r, const struct vmrund_answer *a)
{
	return http_error(r, a->status, a->retry_after_s, "%s", a->message);
}

/* E2B's Sandbox of the native view v, with the access token to its envd
 * that the asking key makes (none for the anonymous tenant's, whose
 * envd calls need none: api_envd.c). */
static json_t *sandbox_of(struct http_req *r, const json_t *v)
{
	char token[ENVD_TOKEN_LEN + 1];
	const char *id = json_string_value(json_object_get(v, "id"));
	if (r->keyed && id)
		envd_token(r->key_digest, id, token);
	return e2b_sandbox(v, r->keyed && id ? token : NULL);
}

/* The sandbox id's E2B Sandbox, with status. */
static enum MHD_Result answer_sandbox(struct http_req *r, unsigned status, const char *id)
{
	json_t *v = view_of(r, id);
	if (!v)
		return MHD_YES;
	json_t *s = sandbox_of(r, v);
	json_decref(v);
	return http_json(r, status, s);
}

/* POST /v2/sandboxes */
static enum MHD_Result create(struct http_req *r)
{
	json_t *in = http_body_json(r), *native = NULL;
	if (!in)
		return MHD_YES;
	char template[E2B_SNAPSHOT_MAX + 1], err[400], id[SCHED_ID_MAX];
	const struct tenant *t = &r->d->ts.t[r->tenant];
	int st = e2b_create_body(in, r->d->rts, r->d->nrts, &t->net, &native, template, sizeof(template), err,
				 sizeof(err));
	json_decref(in);
	if (st)
		return http_error(r, (unsigned)st, 0, "%s", err);
	struct vmrund_answer a = vmrund_sbx_create(r->d, (unsigned)r->tenant, native, NULL, id);
	json_decref(native);
	if (a.status != 201)
		return failed(r, &a);
	return answer_sandbox(r, 201, id);
}

/* The body's "timeout" (seconds), as the native {"timeout_s"}: 1 with
 * *native, 0 when there is none, -1 after answering 400. */
static int timeout_body(struct http_req *r, json_t **native)
{
	*native = NULL;
	json_t *in = r->body_len ? http_body_json(r) : json_object();
	if (!in)
		return -1;
	const json_t *t = json_object_get(in, "timeout");
	if (t && (!json_is_integer(t) || json_integer_value(t) < 0)) {
		json_decref(in);
		http_error(r, 400, 0, "timeout: must be a whole number of seconds");
		return -1;
	}
	if (t)
		*native = json_pack("{s:I}", "timeout_s", json_integer_value(t));
	json_decref(in);
	return t ? 1 : 0;
}

/* POST /v2/sandboxes/ID/connect: a paused one resumed (201), a running
 * one's timeout set when one is given (200). */
static enum MHD_Result connect_to(struct http_req *r, const char *id)
{
	json_t *v = view_of(r, id), *t = NULL;
	if (!v)
		return MHD_YES;
	bool paused = !strcmp(e2b_state(v), "paused");
	json_decref(v);
	if (!api_sandbox_here(r, id))
		return MHD_YES;
	int has = timeout_body(r, &t);
	if (has < 0)
		return MHD_YES;
	struct vmrund_answer a = { .status = 200 };
	if (paused) {
		json_t *body = t ? json_incref(t) : json_object();
		a = vmrund_sbx_pause(r->d, (unsigned)r->tenant, id, body, true);
		json_decref(body);
	} else if (has) {
		a = vmrund_sbx_timeout(r->d, (unsigned)r->tenant, id, t);
	}
	json_decref(t);
	if (a.status != 200)
		return failed(r, &a);
	return answer_sandbox(r, paused ? 201 : 200, id);
}

/* POST /sandboxes/ID/timeout, /pause; DELETE /sandboxes/ID: 204 */
static enum MHD_Result change(struct http_req *r, const char *id, const char *what)
{
	json_t *v = view_of(r, id);
	if (!v)
		return MHD_YES;
	bool paused = !strcmp(e2b_state(v), "paused");
	json_decref(v);
	if (!strcmp(what, "pause") && paused)
		return http_error(r, 409, 0, "sandbox %s is already paused", id);
	if (!api_sandbox_here(r, id))
		return MHD_YES;
	struct vmrund_answer a;
	if (!strcmp(what, "kill")) {
		a = vmrund_sbx_delete(r->d, (unsigned)r->tenant, id);
	} else if (!strcmp(what, "pause")) {
		json_t *body = json_object();
		a = vmrund_sbx_pause(r->d, (unsigned)r->tenant, id, body, false);
		json_decref(body);
	} else {
		json_t *t;
		int has = timeout_body(r, &t);
		if (has < 0)
			return MHD_YES;
		if (!has)
			return http_error(r, 400, 0, "timeout: required");
		a = vmrund_sbx_timeout(r->d, (unsigned)r->tenant, id, t);
		json_decref(t);
	}
	return a.status == 200 ? no_content(r) : failed(r, &a);
}

/* GET /sandboxes/ID */
static enum MHD_Result detail(struct http_req *r, const char *id)
{
	json_t *v = view_of(r, id);
	if (!v)
		return MHD_YES;
	json_t *d = e2b_detail(v);
	json_decref(v);
	return http_json(r, 200, d);
}

/* ---- snapshots, forks, metrics: a sandbox's supervisor asked ----------------------- */

/* A call to the supervisor of sandbox id: its status, and its answer
 * parsed into *out (NULL: none, or not JSON); -1 with errno (ENOENT: no
 * supervisor runs here, the sandbox is parked or elsewhere). Answers
 * nothing. */
static int call(struct vmrund *d, const char *id, const char *method, const char *target, const char *body,
		int timeout_ms, json_t **out)
{
	char dir[PATH_MAX], *text = NULL;
	unsigned status;
	*out = NULL;
	if (!vmrund_sbx_here(d, id)) {
		errno = ENOENT;
		return -1;
	}
	vmrund_sbx_dir(d, id, dir, sizeof(dir));
	if (sbxc_call(dir, method, target, body, timeout_ms, 1u << 20, &status, &text))
		return -1;
	*out = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
	free(text);
	return (int)status;
}

/* call, answering when it fails: 409 (parked: no supervisor runs) or
 * 502. */
static int supervisor(struct http_req *r, const char *id, const char *method, const char *target, const char *body,
		      int timeout_ms, json_t **out)
{
	int st = call(r->d, id, method, target, body, timeout_ms, out);
	if (st < 0 && errno == ENOENT)
		http_error(r, 409, 0, "sandbox %s is parked: connect to it first", id);
	else if (st < 0)
		http_error(r, 502, 0, "sandbox %s: its supervisor: %s", id, strerror(errno));
	return st;
}

/* The supervisor's refusal as E2B's error. */
static enum MHD_Result refused(struct http_req *r, int status, const json_t *out, const char *what)
{
	const char *msg = json_string_value(json_object_get(out, "message"));
	return http_error(r, (unsigned)status, 0, "%s: %s", what, msg ? msg : "refused");
}

/* A checkpoint of sandbox id (held here) named name: 0, or -1 after
 * answering. */
static int checkpoint(struct http_req *r, const char *id, const char *name)
{
	char body[RUN_CHECKPOINT_NAME_MAX + 16];
	json_t *out;
	snprintf(body, sizeof(body), "{\"name\":\"%s\"}", name);   /* name_ok: no quote, no backslash */
	int st = supervisor(r, id, "POST", "/checkpoints", body, E2B_CHECKPOINT_MS, &out);
	if (st != 201 && st >= 0)
		refused(r, st, out, "the snapshot");
	json_decref(out);
	return st == 201 ? 0 : -1;
}

/* The body of a change of the asking tenant's sandbox id that this node
 * is to make ({} when there is none): NULL after answering (404, 400,
 * ...) or after passing the request to the node that holds it. */
static json_t *held_body(struct http_req *r, const char *id)
{
	if (!here(r, id))
		return NULL;
	return r->body_len ? http_body_json(r) : json_object();
}

/* E2B's SnapshotInfo of sandbox id's checkpoint name: its id "ID:NAME". */
static json_t *snapshot_info(const char *id, const char *name)
{
	char sid[STORE_ID_LEN + RUN_CHECKPOINT_NAME_MAX + 4];
	snprintf(sid, sizeof(sid), "%.*s%c%s", STORE_ID_LEN, id, E2B_SNAPSHOT_SEP, name);
	return json_pack("{s:s,s:[s]}", "snapshotID", sid, "names", sid);
}

/* POST /sandboxes/ID/snapshots {name}: a checkpoint, whose id
 * "ID:NAME" is a template a create may name. */
static enum MHD_Result snapshot(struct http_req *r, const char *id)
{
	json_t *in = held_body(r, id);
	if (!in)
		return MHD_YES;
	const json_t *n = json_object_get(in, "name");
	char name[RUN_CHECKPOINT_NAME_MAX + 1];
	bool ok = !n || (json_is_string(n) && run_checkpoint_name_ok(json_string_value(n)));
	if (ok && n)
		snprintf(name, sizeof(name), "%s", json_string_value(n));
	else
		snprintf(name, sizeof(name), "snapshot-%lld", (long long)clock_wall_ms());
	json_decref(in);
	if (!ok)
		return http_error(r, 400, 0, "name: 1 to %d of A-Z, a-z, 0-9, '.', '_' and '-', not starting with '.'",
			     RUN_CHECKPOINT_NAME_MAX);
	if (checkpoint(r, id, name))
		return MHD_YES;
	return http_json(r, 201, snapshot_info(id, name));
}

/* The snapshots of sandbox id appended to a: none when its supervisor
 * does not answer (it went, or is parked), since a listing of many
 * sandboxes answers once, for them all. */
static void add_snapshots(struct vmrund *d, const char *id, json_t *a)
{
	json_t *out;
	int st = call(d, id, "GET", "/checkpoints", NULL, 10000, &out);
	size_t i;
	const json_t *c;
	json_array_foreach(st == 200 ? json_object_get(out, "checkpoints") : NULL, i, c)
	if (json_is_string(json_object_get(c, "name")))
		json_array_append_new(a, snapshot_info(id, json_string_value(json_object_get(c, "name"))));
	json_decref(out);
}

static int open_id(void *ctx, const struct store_sandbox *sb)
{
	json_array_append_new(ctx, json_string(sb->id));
	return json_array_size(ctx) >= E2B_SCAN_MAX;
}

/* GET /snapshots[?sandboxID=]: one sandbox's, or those of the tenant's
 * sandboxes held on this node. */
static enum MHD_Result snapshots(struct http_req *r)
{
	const char *sid = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "sandboxID");
	json_t *a = json_array(), *ids = json_array();
	char err[300];
	if (sid) {
		if (!here(r, sid)) {
			json_decref(a);
			json_decref(ids);
			return MHD_YES;
		}
		json_array_append_new(ids, json_string(sid));
	} else {
		pthread_mutex_lock(&r->d->lock);
		int rc = r->d->store->ops->sbx_each(r->d->store, r->d->ts.t[r->tenant].name, r->d->node, true, open_id,
						     ids, err, sizeof(err));
		pthread_mutex_unlock(&r->d->lock);
		if (rc < 0) {
			json_decref(a);
			json_decref(ids);
			return http_error(r, 503, 0, "the store: %s", err);
		}
	}
	size_t i;
	const json_t *id;
	json_array_foreach(ids, i, id)
	add_snapshots(r->d, json_string_value(id), a);
	json_decref(ids);
	return http_json(r, 200, a);
}

/* DELETE /templates/ID:NAME: a snapshot deleted (204); one that is not
 * there is E2B's 404, which the SDK answers false. */
static enum MHD_Result delete_snapshot(struct http_req *r, const char *text)
{
	char ref[E2B_SNAPSHOT_MAX + 1], id[RUN_CHECKPOINT_SANDBOX_MAX + 1], target[RUN_CHECKPOINT_NAME_MAX + 16];
	const char *name;
	if (!e2b_snapshot_ref(text, ref) || !run_checkpoint_ref(ref, id, &name)) {
		char q[120];
		return http_error(r, 404, 0, "snapshot \"%s\" not found", errmsg_printable(q, sizeof(q), text));
	}
	json_t *out;
	if (!here(r, id))
		return MHD_YES;
	snprintf(target, sizeof(target), "/checkpoints/%s", name);
	int st = supervisor(r, id, "DELETE", target, NULL, 30000, &out);
	if (st < 0)
		return MHD_YES;
	enum MHD_Result res = st / 100 == 2 ? no_content(r) : refused(r, st, out, "the snapshot");
	json_decref(out);
	return res;
}

/* POST /sandboxes/ID/fork {count, timeout}: a checkpoint of it now, and
 * count sandboxes from it: 200 with each one's Sandbox, or its error. */
static enum MHD_Result fork_of(struct http_req *r, const char *id)
{
	json_t *in = held_body(r, id);
	if (!in)
		return MHD_YES;
	const json_t *c = json_object_get(in, "count"), *t = json_object_get(in, "timeout");
	json_int_t count = c ? json_integer_value(c) : 1;
	bool ok = (!c || (json_is_integer(c) && count >= 1 && count <= VMRUND_SBX_FORKS_MAX)) &&
		  (!t || (json_is_integer(t) && json_integer_value(t) >= 1));
	json_int_t timeout = t ? json_integer_value(t) : 0;
	json_decref(in);
	if (!ok)
		return http_error(r, 400, 0, "count: 1 to %d; timeout: whole seconds, at least 1", VMRUND_SBX_FORKS_MAX);
	char name[RUN_CHECKPOINT_NAME_MAX + 1], ref[STORE_ID_LEN + RUN_CHECKPOINT_NAME_MAX + 4];
	snprintf(name, sizeof(name), "fork-%lld", (long long)clock_wall_ms());
	if (checkpoint(r, id, name))
		return MHD_YES;
	snprintf(ref, sizeof(ref), "%s/%s", id, name);
	json_t *results = json_array();
	for (json_int_t i = 0; i < count; i++) {
		json_t *body = json_pack("{s:s}", "from_checkpoint", ref);
		if (timeout)
			json_object_set_new(body, "timeout_s", json_integer(timeout));
		char fid[SCHED_ID_MAX];
		struct vmrund_answer a = vmrund_sbx_create(r->d, (unsigned)r->tenant, body, NULL, fid);
		json_decref(body);
		char err[300];
		json_t *fv = NULL;
		if (a.status == 201)
			known(r, fid, &fv, err, sizeof(err));
		json_array_append_new(results, fv ? json_pack("{s:o}", "sandbox", sandbox_of(r, fv))
						  : json_pack("{s:o}", "error", e2b_error(a.status == 201 ? 500 : a.status,
										       a.status == 201 ? "it ended at once"
												       : a.message)));
		json_decref(fv);
	}
	return http_json(r, 200, results);
}

/* GET /sandboxes/ID/metrics: one sample, now, of a running sandbox; none
 * of a paused one. */
static enum MHD_Result metrics(struct http_req *r, const char *id)
{
	json_t *v = view_of(r, id), *out = NULL;
	if (!v)
		return MHD_YES;
	if (!api_sandbox_here(r, id)) {
		json_decref(v);
		return MHD_YES;
	}
	json_t *a = json_array();
	if (!strcmp(e2b_state(v), "running") && vmrund_sbx_here(r->d, id)) {
		int st = supervisor(r, id, "GET", "/", NULL, 10000, &out);
		if (st < 0) {
			json_decref(v);
			json_decref(a);
			return MHD_YES;
		}
		if (st == 200 && json_is_object(json_object_get(out, "usage")))
			json_array_append_new(a, e2b_metric(v, json_object_get(out, "usage"), clock_wall_ms()));
		json_decref(out);
	}
	json_decref(v);
	return http_json(r, 200, a);
}

/* ---- GET /v2/sandboxes ----------------------------------------------------------- */

struct list_ctx {
	json_t *a;
	const char *states, *metadata;
	long skip, limit;             /* matches to pass over, then to take */
	long seen;                    /* rows looked at */
	bool more;                    /* a match past the page */
};

static int list_one(void *ctx, const struct store_sandbox *sb)
{
	struct list_ctx *l = ctx;
	if (++l->seen > E2B_SCAN_MAX)
		return 1;
	json_t *v = sandbox_view(sb, clock_wall_ms());
	bool match = v && e2b_state_match(v, l->states) && (!l->metadata || e2b_metadata_match(v, l->metadata));
	if (match && l->skip > 0) {
		l->skip--;
	} else if (match && (long)json_array_size(l->a) < l->limit) {
		json_array_append_new(l->a, e2b_detail(v));
	} else if (match) {
		l->more = true;
	}
	json_decref(v);
	return l->more;
}

static enum MHD_Result list(struct http_req *r)
{
	struct list_ctx l = {
		.states = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "state"),
		.metadata = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "metadata"),
	};
	const char *next = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "nextToken");
	if ((l.limit = api_query_number(r, "limit", E2B_LIST_MAX, E2B_LIST_MAX)) < 0)
		return MHD_YES;
	/* the token is the count of matches before the page */
	char *end = NULL;
	l.skip = next && *next ? strtol(next, &end, 10) : 0;
	if ((next && *next && (*end || l.skip < 0 || l.skip > E2B_SCAN_MAX)) || !l.limit)
		return http_error(r, 400, 0, "nextToken: a token from X-Next-Token; limit: 1 to %d", E2B_LIST_MAX);
	long first = l.skip;
	if (!(l.a = json_array()))
		return MHD_NO;
	char err[300];
	pthread_mutex_lock(&r->d->lock);
	/* open ones only: E2B forgets the rest */
	int rc = r->d->store->ops->sbx_each(r->d->store, r->d->ts.t[r->tenant].name, NULL, true, list_one, &l, err,
					     sizeof(err));
	pthread_mutex_unlock(&r->d->lock);
	if (rc < 0) {
		json_decref(l.a);
		return http_error(r, 503, 0, "the store: %s", err);
	}
	char *text = json_dumps(l.a, JSON_COMPACT);
	json_decref(l.a);
	struct MHD_Response *resp =
		text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE) : NULL;
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	if (l.more && first + l.limit <= E2B_SCAN_MAX) {
		char tok[32];
		snprintf(tok, sizeof(tok), "%ld", first + l.limit);
		MHD_add_response_header(resp, "X-Next-Token", tok);
	}
	return http_queue(r, 200, resp);
}

/* ---- routing ----------------------------------------------------------------------- */

/* "ID" or "ID/REST" after a prefix into id (at most STORE_ID_LEN + 1
 * bytes kept, so a longer one is not found) and *rest ("" or "/REST"). */
static void split(const char *p, char id[STORE_ID_LEN + 2], const char **rest)
{
	size_t n = strcspn(p, "/");
	snprintf(id, STORE_ID_LEN + 2, "%.*s", (int)(n > STORE_ID_LEN + 1 ? STORE_ID_LEN + 1 : n), p);
	*rest = p + n;
}

enum MHD_Result api_e2b(struct http_req *r, const char *p)
{
	bool get = !strcmp(r->method, "GET"), post = !strcmp(r->method, "POST"), del = !strcmp(r->method, "DELETE");
	char id[STORE_ID_LEN + 2];
	const char *rest;
	if (!strcmp(p, "/v2/sandboxes"))
		return post ? create(r) : get ? list(r) : http_error(r, 405, 0, "GET or POST here");
	if (!strncmp(p, "/v2/sandboxes/", 14)) {
		split(p + 14, id, &rest);
		if (!strcmp(rest, "/connect"))
			return post ? connect_to(r, id) : http_error(r, 405, 0, "only POST here");
	} else if (!strncmp(p, "/sandboxes/", 11)) {
		split(p + 11, id, &rest);
		if (!*rest)
			return get ? detail(r, id) : del ? change(r, id, "kill") : http_error(r, 405, 0, "GET or DELETE here");
		if (!strcmp(rest, "/timeout") || !strcmp(rest, "/pause"))
			return post ? change(r, id, rest + 1) : http_error(r, 405, 0, "only POST here");
		if (!strcmp(rest, "/snapshots"))
			return post ? snapshot(r, id) : http_error(r, 405, 0, "only POST here");
		if (!strcmp(rest, "/fork"))
			return post ? fork_of(r, id) : http_error(r, 405, 0, "only POST here");
		if (!strcmp(rest, "/metrics"))
			return get ? metrics(r, id) : http_error(r, 405, 0, "only GET here");
		if (!strcmp(rest, "/network") || !strncmp(rest, "/logs", 5))
			return http_error(r, 501, 0, "%s: not available in vmrun (docs/e2b.md)", rest + 1);
	} else if (!strcmp(p, "/snapshots")) {
		return get ? snapshots(r) : http_error(r, 405, 0, "only GET here");
	} else if (!strncmp(p, "/templates/", 11) && del) {
		return delete_snapshot(r, p + 11);
	} else if (!strcmp(p, "/sandboxes")) {
		return http_error(r, 501, 0, "%s: not available in vmrun (the SDK's 2.x lists with /v2/sandboxes)", p + 1);
	}
	char q[200];
	return http_error(r, 404, 0, "no such endpoint: %s", errmsg_printable(q, sizeof(q), p));
}
