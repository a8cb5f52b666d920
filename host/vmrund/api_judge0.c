/* Judge0 CE 1.13.1's API under judge0_prefix (docs/judge0.md; the
 * translation is judge0.h's). A submission is a run of the native API:
 * its token is the run's id as a UUID, and GET /v1/runs/ID shows it in
 * full. Judge0's error bodies are {"error": ...} (400, 503) or the
 * model's {"field": [...]} (422); its clients show them as they are. */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "judge0.h"
#include "judge0_batch.h"
#include "judge0_runs.h"

static enum MHD_Result j0_error(struct http_req *r, unsigned status, const char *msg)
{
	json_t *o = json_object();
	if (o)
		json_object_set_new(o, "error", json_string(msg));
	return http_json(r, status, o);
}

static const char *query(struct http_req *r, const char *key)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

/* set_base64_encoded: 1.13.1 reads base64 unless told "false". */
static bool base64_of(struct http_req *r)
{
	const char *q = query(r, "base64_encoded");
	if (r->d->cfg.judge0.disable_implicit_base64_encoding)
		return q && !strcmp(q, "true");
	return !q || strcmp(q, "false");
}

/* ?fields=: the mask, or false after answering 400. */
static bool fields_of(struct http_req *r, uint64_t *mask)
{
	char invalid[300], msg[340];
	if (!judge0_fields(query(r, "fields"), mask, invalid, sizeof(invalid)))
		return true;
	snprintf(msg, sizeof(msg), "invalid fields: [%s]", invalid);
	j0_error(r, 400, msg);
	return false;
}

/* X-Auth-User (Judge0's authorization header) must be a key of the
 * tenant asking: what the listing endpoints need. */
static bool authorized(struct http_req *r)
{
	const char *user = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Auth-User");
	return user && tenants_by_key(&r->d->ts, user) == r->tenant;
}

/* ---- a submission's view ------------------------------------------------------ */

/* The tenant's run of token, shown with mask (judge0_run_view's). */
static json_t *view_of(struct http_req *r, const char *token, uint64_t mask, bool b64, unsigned *status)
{
	char id[33];
	*status = 404;
	if (!judge0_token_id(token, id))
		return NULL;
	return judge0_run_view(r->d, id, r->d->ts.t[r->tenant].name, mask, b64, status);
}

static enum MHD_Result answer_view(struct http_req *r, const char *token, unsigned ok_status, uint64_t mask,
				   bool b64)
{
	unsigned status;
	json_t *v = view_of(r, token, mask, b64, &status);
	if (v)
		return http_json(r, ok_status, v);
	if (status == 400)
		return j0_error(r, 400, "some attributes for this submission cannot be converted to UTF-8, use "
					"base64_encoded=true query parameter");
	return j0_error(r, status, status == 404 ? "submission not found" : "the store could not be read");
}

/* ---- creating ---------------------------------------------------------------------- */

/* One submission read into rq: 0, or -1 with *errors (422's body; NULL:
 * out of memory). */
static int read_one(struct http_req *r, const json_t *body, bool b64, struct run_spec *rq, json_t **errors)
{
	*errors = NULL;
	return judge0_submission(body, b64, &r->d->cfg.judge0, r->d->rts, r->d->nrts, &r->d->ts.t[r->tenant], rq,
				 errors);
}

/* rq queued: 0 with its id; else -1 with *answer set (a refusal of the
 * service: 503 and the rest). */
static int queue_one(struct http_req *r, struct run_spec *rq, char id[SCHED_ID_MAX], struct vmrund_answer *answer)
{
	*answer = vmrund_submit(r->d, (unsigned)r->tenant, rq, NULL, id);
	return answer->status == 202 ? 0 : -1;
}

/* One submission queued: 0 with its id; else -1 with *errors (422's
 * body) or *answer set. */
static int submit_one(struct http_req *r, const json_t *body, bool b64, char id[SCHED_ID_MAX], json_t **errors,
		      struct vmrund_answer *answer)
{
	struct run_spec rq;
	answer->status = 0;
	if (read_one(r, body, b64, &rq, errors))
		return -1;
	int rc = queue_one(r, &rq, id, answer);
	run_spec_free(&rq);
	return rc;
}

/* The service's refusal in Judge0's words: its queue is full (503) for
 * every limit of the queue, the tenant's or the node's. */
static enum MHD_Result refusal(struct http_req *r, const struct vmrund_answer *a)
{
	bool full = a->status == 429 || a->status == 503;
	json_t *o = json_object();
	if (o) {
		json_object_set_new(o, "error", json_string(full ? "queue is full" : a->message));
		if (full)
			json_object_set_new(o, "message", json_string(a->message));
	}
	return http_json(r, full ? 503 : a->status, o);
}

static enum MHD_Result create(struct http_req *r)
{
	const char *w = query(r, "wait");
	bool wait = w && !strcmp(w, "true"), b64 = base64_of(r);
	uint64_t mask;
	if (wait && !r->d->cfg.judge0.enable_wait_result)
		return j0_error(r, 400, "wait not allowed");
	if (!fields_of(r, &mask))
		return MHD_YES;
	json_t *body = http_body_json(r);
	if (!body)
		return MHD_YES;
	/* a wait holds this connection's thread: one of the tenant's
	 * places, taken before anything is queued */
	if (wait && !http_stream_begin(r)) {
		json_decref(body);
		return MHD_YES;
	}
	char id[SCHED_ID_MAX], token[JUDGE0_TOKEN_LEN + 1];
	json_t *errors;
	struct vmrund_answer a;
	int rc = submit_one(r, body, b64, id, &errors, &a);
	json_decref(body);
	enum MHD_Result res;
	if (rc && errors)
		res = http_json(r, 422, errors);
	else if (rc)
		res = a.status ? refusal(r, &a) : j0_error(r, 500, "out of memory");
	else {
		judge0_token(id, token);
		/* wait=true: the whole submission once it ends (as it is after
		 * wait_max_s: a client's poll finds the rest) */
		if (wait)
			vmrund_wait(r->d, id, clock_mono_ms() + (int64_t)r->d->cfg.wait_max_s * 1000);
		res = wait ? answer_view(r, token, 201, mask, b64)
			   : http_json(r, 201, json_pack("{ss}", "token", token));
	}
	if (wait)
		vmrund_stream_end(r->d, (unsigned)r->tenant);
	return res;
}

/* ---- batches --------------------------------------------------------------------------- */

static bool batch_size_ok(struct http_req *r, size_t n)
{
	char msg[160];
	if (!n)
		return j0_error(r, 400, "there should be at least one submission in a batch"), false;
	if (n > (size_t)r->d->cfg.judge0.max_submission_batch_size) {
		snprintf(msg, sizeof(msg), "number of submissions in a batch should be less than or equal to %ld",
			 r->d->cfg.judge0.max_submission_batch_size);
		return j0_error(r, 400, msg), false;
	}
	return true;
}

/* Each submission's token or its errors; 201 when any was queued. Those
 * that share a program are marked to be judged from one compile
 * (judge0_batch.h). */
static enum MHD_Result batch_create(struct http_req *r)
{
	bool b64 = base64_of(r), any = false;
	json_t *body = http_body_json(r);
	if (!body)
		return MHD_YES;
	const json_t *subs = json_object_get(body, "submissions");
	size_t n = json_is_array(subs) ? json_array_size(subs) : 0;
	if (!batch_size_ok(r, n)) {
		json_decref(body);
		return MHD_YES;
	}
	struct run_spec *rq = calloc(n, sizeof(*rq));
	struct run_spec **ok = calloc(n, sizeof(*ok));
	json_t **errors = calloc(n, sizeof(*errors));
	json_t *out = rq && ok && errors ? json_array() : NULL;
	for (size_t i = 0; out && i < n; i++)
		if (!read_one(r, json_array_get(subs, i), b64, &rq[i], &errors[i]))
			ok[i] = &rq[i];
	/* unmarked, they are judged one by one, as ever */
	if (out && judge0_batch_mark(ok, n, r->d->ts.t[r->tenant].name))
		vmrund_say("judge0 batch: out of memory marking shared programs");
	for (size_t i = 0; out && i < n; i++) {
		char id[SCHED_ID_MAX], token[JUDGE0_TOKEN_LEN + 1];
		json_t *item;
		struct vmrund_answer a = { 0 };
		if (ok[i] && !queue_one(r, ok[i], id, &a)) {
			judge0_token(id, token);
			item = json_pack("{ss}", "token", token);
			any = true;
		} else {
			item = errors[i] ? json_incref(errors[i]) :
					   json_pack("{s[s]}", "error", a.status == 429 || a.status == 503 ? "queue is full" :
									a.status ? a.message : "out of memory");
		}
		if (!item || json_array_append_new(out, item)) {
			json_decref(out);
			out = NULL;
		}
	}
	for (size_t i = 0; rq && errors && i < n; i++) {
		run_spec_free(&rq[i]);
		json_decref(errors[i]);
	}
	free(rq);
	free(ok);
	free(errors);
	json_decref(body);
	if (!out)
		return j0_error(r, 500, "out of memory");
	return http_json(r, any ? 201 : 422, out);
}

/* tokens=a,b (a query parameter, or Judge0's "tokens" header too). */
static enum MHD_Result batch_show(struct http_req *r)
{
	const char *list = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "tokens");
	bool b64 = base64_of(r);
	uint64_t mask;
	if (!list)
		list = query(r, "tokens");
	if (!fields_of(r, &mask))
		return MHD_YES;
	char *copy = strdup(list ? list : "");
	if (!copy)
		return j0_error(r, 500, "out of memory");
	/* Ruby's to_s.strip.split(","): empty ones at the end dropped */
	size_t n = 0, len = strlen(copy);
	while (len && strchr(" \t\r\n,", copy[len - 1]))
		copy[--len] = '\0';
	for (size_t i = 0; len && i <= len; i++)
		n += copy[i] == ',' || copy[i] == '\0';
	if (!batch_size_ok(r, n)) {
		free(copy);
		return MHD_YES;
	}
	json_t *subs = json_array();
	/* each place kept, an empty token's too (null, as Ruby's split keeps it) */
	for (char *rest = copy, *tok; subs && n-- && (tok = strsep(&rest, ","));) {
		unsigned status = 404;
		json_t *v = *tok ? view_of(r, tok, mask, b64, &status) : NULL;
		if (!v && status == 400) {
			json_decref(subs);
			free(copy);
			return j0_error(r, 400, "some attributes for one or more submissions cannot be converted to "
						"UTF-8, use base64_encoded=true query parameter");
		}
		if (json_array_append_new(subs, v ? v : json_null())) {
			json_decref(subs);
			subs = NULL;
		}
	}
	free(copy);
	return subs ? http_json(r, 200, json_pack("{so}", "submissions", subs)) : j0_error(r, 500, "out of memory");
}

/* ---- listing ------------------------------------------------------------------------------ */

/* Judge0's ?page= and ?per_page= (will_paginate's): page from 1. */
static long page_param(struct http_req *r, const char *name, long dflt)
{
	const char *v = query(r, name);
	return v ? strtol(v, NULL, 10) : dflt;   /* Ruby's to_i: junk is 0 */
}

/* GET /submissions: the tenant's Judge0 submissions, newest first, a
 * page at a time (per_page at most API_LIST_MAX, where Judge0 has none). */
static enum MHD_Result index_of(struct http_req *r)
{
	char msg[80], err[300];
	long page = page_param(r, "page", 1), per_page = page_param(r, "per_page", API_LIST_DEFAULT);
	uint64_t mask;
	if (page <= 0) {
		snprintf(msg, sizeof(msg), "invalid page: %ld", page);
		return j0_error(r, 400, msg);
	}
	if (per_page < 0) {
		snprintf(msg, sizeof(msg), "invalid per_page: %ld", per_page);
		return j0_error(r, 400, msg);
	}
	if (!fields_of(r, &mask))
		return MHD_YES;
	if (per_page > API_LIST_MAX)
		per_page = API_LIST_MAX;
	bool b64 = base64_of(r);
	struct store_run *rows;
	unsigned n;
	uint64_t total;
	uint64_t offset = (uint64_t)(page - 1) * (uint64_t)per_page;
	if (vmrund_list_runs(r->d, r->d->ts.t[r->tenant].name, "judge0", offset, (unsigned)per_page, &rows, &n, &total,
			     err, sizeof(err)))
		return j0_error(r, 503, err);
	json_t *a = json_array();
	bool not_utf8 = false;
	for (unsigned i = 0; i < n; i++) {
		bool bad = false;
		json_t *v = judge0_row_view(r->d, &rows[i], NULL, mask, b64, &bad);
		not_utf8 |= bad;
		if (!v || json_array_append_new(a, v)) {
			json_decref(a);
			a = NULL;
		}
	}
	store_runs_free(rows, n);
	if (not_utf8) {
		json_decref(a);
		return j0_error(r, 400, "some attributes for one or more submissions cannot be converted to UTF-8, use "
					"base64_encoded=true query parameter");
	}
	if (!a)
		return j0_error(r, 500, "out of memory");
	uint64_t pages = per_page ? (total + (uint64_t)per_page - 1) / (uint64_t)per_page : 0;
	json_t *meta = json_pack("{sI so so sI sI}", "current_page", (json_int_t)page, "next_page",
				 (uint64_t)page < pages ? json_integer(page + 1) : json_null(), "prev_page",
				 page > 1 ? json_integer(page - 1) : json_null(), "total_pages", (json_int_t)pages,
				 "total_count", (json_int_t)total);
	return http_json(r, 200, json_pack("{so so}", "submissions", a, "meta", meta));
}

/* ---- the rest ------------------------------------------------------------------------------ */

static enum MHD_Result submissions(struct http_req *r, const char *p)
{
	if (!strcmp(p, "") || !strcmp(p, "/")) {
		if (!strcmp(r->method, "POST"))
			return create(r);
		if (strcmp(r->method, "GET"))
			return j0_error(r, 405, "only GET and POST here");
		if (!authorized(r))
			return j0_error(r, 403, "X-Auth-User: a key of this tenant is required to list submissions");
		return index_of(r);
	}
	if (!strcmp(p, "/batch")) {
		if (!r->d->cfg.judge0.enable_batched_submissions)
			return j0_error(r, 400, "batched submissions are not allowed");
		return !strcmp(r->method, "POST") ? batch_create(r)
		       : !strcmp(r->method, "GET") ? batch_show(r) : j0_error(r, 405, "only GET and POST here");
	}
	const char *token = p + 1;
	if (!strcmp(r->method, "DELETE"))
		return !authorized(r) ? j0_error(r, 403, "X-Auth-User: a key of this tenant is required")
				      : j0_error(r, 400, "delete not allowed");
	if (strcmp(r->method, "GET"))
		return j0_error(r, 405, "only GET and DELETE here");
	uint64_t mask;
	if (!fields_of(r, &mask))
		return MHD_YES;
	return answer_view(r, token, 200, mask, base64_of(r));
}

static enum MHD_Result languages(struct http_req *r, const char *p)
{
	if (!strcmp(p, "") || !strcmp(p, "/all"))
		return http_json(r, 200, judge0_languages(r->d->rts, r->d->nrts, *p != '\0'));
	char *end;
	long id = strtol(p + 1, &end, 10);
	json_t *l = *end || end == p + 1 ? NULL : judge0_language(r->d->rts, r->d->nrts, id);
	return l ? http_json(r, 200, l) : j0_error(r, 404, "no such language");
}

/* lscpu's and free's few lines that Judge0's system_info shows. */
static json_t *system_info(void)
{
	struct utsname u;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN), pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	char cpus_s[32], mem[32];
	snprintf(cpus_s, sizeof(cpus_s), "%ld", cpus);
	snprintf(mem, sizeof(mem), "%.1fGi", (double)pages * (double)psize / (1024.0 * 1024 * 1024));
	uname(&u);
	return json_pack("{ss ss ss}", "Architecture", u.machine, "CPU(s)", cpus_s, "Mem", mem);
}

static enum MHD_Result workers(struct http_req *r)
{
	uint64_t states[RS_COUNT];
	unsigned here;
	char err[300];
	if (vmrund_count_runs(r->d, states, &here, err, sizeof(err)))
		return j0_error(r, 500, err);
	unsigned slots = r->d->slots;
	return http_json(r, 200,
			 json_pack("[{ss sI sI sI sI sI sI}]", "queue", JUDGE0_VERSION, "size",
				   (json_int_t)states[RS_QUEUED], "available", (json_int_t)slots, "idle",
				   (json_int_t)(here < slots ? slots - here : 0), "working", (json_int_t)here, "paused",
				   (json_int_t)0, "failed", (json_int_t)0));
}

/* GET /statistics[?invalidate_cache=true]: the tenant's own submissions
 * (Judge0 has one tenant: all of them). */
static enum MHD_Result statistics(struct http_req *r)
{
	char err[300];
	const char *inv = query(r, "invalidate_cache");
	json_t *v = judge0_stats_of(r->d, (unsigned)r->tenant, inv && !strcmp(inv, "true"), err, sizeof(err));
	return v ? http_json(r, 200, v) : j0_error(r, 503, err);
}

static enum MHD_Result get_only(struct http_req *r, const char *p)
{
	if (!strcmp(p, "/statuses"))
		return http_json(r, 200, judge0_statuses());
	if (!strcmp(p, "/config_info")) {
		const struct tenant_reach *net = r->tenant >= 0 ? &r->d->ts.t[r->tenant].net : NULL;
		return http_json(r, 200, judge0_config_info(&r->d->cfg.judge0, r->d->cfg.queue_max,
							     net && (net->any || net->n)));
	}
	if (!strcmp(p, "/about"))
		return http_json(r, 200, json_pack("{ss ss ss ss}", "version", JUDGE0_VERSION, "homepage",
						   "https://github.com/vmrun/vmrun", "source_code",
						   "https://github.com/vmrun/vmrun", "maintainer", "vmrun"));
	if (!strcmp(p, "/version"))
		return http_bytes(r, 200, "text/plain", JUDGE0_VERSION, strlen(JUDGE0_VERSION));
	if (!strcmp(p, "/isolate")) {
		static const char text[] = "vmrun: each submission in its own KVM microVM, not isolate\n";
		return http_bytes(r, 200, "text/plain", text, sizeof(text) - 1);
	}
	if (!strcmp(p, "/system_info"))
		return http_json(r, 200, system_info());
	if (!strcmp(p, "/workers"))
		return workers(r);
	if (!strcmp(p, "/statistics"))
		return statistics(r);
	return j0_error(r, 404, "no such endpoint");
}

enum MHD_Result api_judge0(struct http_req *r, const char *p)
{
	if (!strncmp(p, "/submissions", 12) && (!p[12] || p[12] == '/'))
		return submissions(r, p + 12);
	if (!strcmp(p, "/authenticate") || !strcmp(p, "/authorize")) {
		if (strcmp(r->method, "POST"))
			return j0_error(r, 405, "only POST here");
		if (!strcmp(p, "/authorize") && !authorized(r))
			return j0_error(r, 403, "X-Auth-User: not a key of this tenant");
		return http_bytes(r, 200, "text/plain", "", 0);
	}
	if (strcmp(r->method, "GET"))
		return j0_error(r, 405, "only GET here");
	if (!strncmp(p, "/languages", 10) && (!p[10] || p[10] == '/'))
		return languages(r, p + 10);
	return get_only(r, p);
}
