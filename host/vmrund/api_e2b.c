/* E2B's control API under e2b_prefix (docs/e2b.md): what the `e2b` SDK
 * calls with E2B_API_URL set to vmrund's address and that prefix, onto
 * vmrund's own sandboxes (sandboxes.h), translated by e2b.h. Errors are
 * E2B's {"code", "message"}, whose code the SDK reads to raise its own
 * errors (a kill of an unknown sandbox is false, a pause of a paused one
 * false). A change of a sandbox another node holds is passed to that
 * node's same endpoint whole (api_sandbox_here). */
#include "api.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "e2b.h"
#include "sandboxes.h"

#define E2B_SCAN_MAX 10000        /* a tenant's sandboxes one listing looks at */

static enum MHD_Result error(struct http_req *r, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static enum MHD_Result error(struct http_req *r, unsigned status, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return http_json(r, status, e2b_error(status, msg));
}

/* No body: 204, which the SDK reads as nothing. */
static enum MHD_Result no_content(struct http_req *r)
{
	return http_bytes(r, 204, "application/json", "", 0);
}

/* The asking tenant's sandbox id as its native view, when E2B would know
 * it: the view, or NULL after answering 404 (E2B's) or 503. */
static json_t *view_of(struct http_req *r, const char *id)
{
	struct store_sandbox sb;
	char err[300];
	int found = strlen(id) == STORE_ID_LEN && strspn(id, "0123456789abcdef") == STORE_ID_LEN
			    ? vmrund_sbx_get(r->d, r->d->ts.t[r->tenant].name, id, &sb, err, sizeof(err))
			    : 0;
	if (found < 0) {
		error(r, 503, "the store: %s", err);
		return NULL;
	}
	json_t *v = found ? sandbox_view(&sb, clock_wall_ms()) : NULL;
	if (found)
		store_sandbox_free(&sb);
	if (v && !e2b_state(v)) {
		json_decref(v);
		v = NULL;
	}
	if (!v)
		error(r, 404, "sandbox \"%.64s\" not found", id);
	return v;
}

/* A native answer that was not a success, as E2B's error. */
static enum MHD_Result failed(struct http_req *r, const struct vmrund_answer *a)
{
	return error(r, a->status, "%s", a->message);
}

/* The sandbox id's E2B Sandbox, with status. */
static enum MHD_Result answer_sandbox(struct http_req *r, unsigned status, const char *id)
{
	json_t *v = view_of(r, id);
	if (!v)
		return MHD_YES;
	json_t *s = e2b_sandbox(v);
	json_decref(v);
	return http_json(r, status, s);
}

/* POST /v2/sandboxes */
static enum MHD_Result create(struct http_req *r)
{
	json_t *in = http_body_json(r), *native = NULL;
	if (!in)
		return MHD_YES;
	char template[RUNTIME_NAME_MAX + 8], err[400], id[SCHED_ID_MAX];
	const struct tenant *t = &r->d->ts.t[r->tenant];
	int st = e2b_create_body(in, r->d->rts, r->d->nrts, &t->net, &native, template, sizeof(template), err,
				 sizeof(err));
	json_decref(in);
	if (st)
		return error(r, (unsigned)st, "%s", err);
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
		error(r, 400, "timeout: must be a whole number of seconds");
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
		return error(r, 409, "sandbox %s is already paused", id);
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
			return error(r, 400, "timeout: required");
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

/* ---- GET /v2/sandboxes ----------------------------------------------------------- */

struct list_ctx {
	json_t *a;
	const char *states, *metadata;
	long skip, limit;             /* matches to pass over, then to take */
	bool more;                    /* a match past the page */
};

static int list_one(void *ctx, const struct store_sandbox *sb)
{
	struct list_ctx *l = ctx;
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
		return error(r, 400, "nextToken: a token from X-Next-Token; limit: 1 to %d", E2B_LIST_MAX);
	long first = l.skip;
	if (!(l.a = json_array()))
		return MHD_NO;
	char err[300];
	pthread_mutex_lock(&r->d->lock);
	int rc = r->d->store->ops->sbx_each(r->d->store, r->d->ts.t[r->tenant].name, NULL, false, list_one, &l, err,
					     sizeof(err));
	pthread_mutex_unlock(&r->d->lock);
	if (rc < 0) {
		json_decref(l.a);
		return error(r, 503, "the store: %s", err);
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
	if (l.more) {
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
		return post ? create(r) : get ? list(r) : error(r, 405, "GET or POST here");
	if (!strncmp(p, "/v2/sandboxes/", 14)) {
		split(p + 14, id, &rest);
		if (!strcmp(rest, "/connect"))
			return post ? connect_to(r, id) : error(r, 405, "only POST here");
	} else if (!strncmp(p, "/sandboxes/", 11)) {
		split(p + 11, id, &rest);
		if (!*rest)
			return get ? detail(r, id) : del ? change(r, id, "kill") : error(r, 405, "GET or DELETE here");
		if (!strcmp(rest, "/timeout") || !strcmp(rest, "/pause"))
			return post ? change(r, id, rest + 1) : error(r, 405, "only POST here");
		if (!strcmp(rest, "/metrics") || !strcmp(rest, "/snapshots") || !strcmp(rest, "/fork") ||
		    !strcmp(rest, "/network") || !strncmp(rest, "/logs", 5))
			return error(r, 501, "%s: not available in vmrun yet (docs/e2b.md)", rest + 1);
	} else if (!strcmp(p, "/snapshots") || !strcmp(p, "/sandboxes")) {
		return error(r, 501, "%s: not available in vmrun yet (docs/e2b.md)", p + 1);
	}
	return error(r, 404, "no such endpoint: %.200s", p);
}
