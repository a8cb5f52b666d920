/* vmrund's native API under /v1 (docs/vmrund.md; openapi.yaml). */
#include "api.h"

#include <errno.h>
#include <openssl/sha.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "hex.h"
#include "judge_run.h"
#include "spool.h"
#include "stream.h"

json_t *api_run_view(const struct store_run *run)
{
	json_t *o = spool_result_parse(run->result);
	if (!json_is_object(o)) {
		json_decref(o);
		o = json_object();
	}
	/* The result's run_id is the run library's (its cgroup's name): the
	 * API's id is ours. */
	json_object_del(o, "run_id");
	json_object_set_new(o, "id", json_string(run->id));
	json_object_set_new(o, "state", json_string(store_state_name(run->state)));
	json_object_set_new(o, "tenant", json_string(run->tenant));
	json_object_set_new(o, "created_at", spool_iso_time(run->created_ms));
	json_object_set_new(o, "started_at", spool_iso_time(run->started_ms));
	json_object_set_new(o, "finished_at", spool_iso_time(run->finished_ms));
	json_object_set_new(o, "queue_ms", run->started_ms ? json_integer(run->started_ms - run->created_ms) : json_null());
	if (run->message[0] || !json_object_get(o, "message"))
		json_object_set_new(o, "message", json_string(run->message));
	return o;
}

/* The run, if the tenant may see it: 1, or 0 after answering 404/500. */
static int find_run(struct http_req *r, const char *id, struct store_run *run)
{
	char err[300];
	if (strlen(id) != STORE_ID_LEN || strspn(id, "0123456789abcdef") != STORE_ID_LEN) {
		http_error(r, 404, 0, "no run %.64s", id);
		return 0;
	}
	int found = vmrund_get_run(r->d, id, r->d->ts.t[r->tenant].name, run, err, sizeof(err));
	if (found < 0)
		http_error(r, 500, 0, "%s", err);
	else if (!found)
		http_error(r, 404, 0, "no run %s", id);
	return found == 1;
}

static enum MHD_Result answer_run(struct http_req *r, unsigned status, const char *id)
{
	struct store_run run;
	if (!find_run(r, id, &run))
		return MHD_YES;
	json_t *v = api_run_view(&run);
	store_run_free(&run);
	return http_json(r, status, v);
}

/* ?NAME= as a whole number from 0 to max into *n: 1, 0 when absent (*n
 * untouched), -1 when it is not one. Unanswered: each caller words its
 * own 400. */
static int query_number(struct http_req *r, const char *name, long max, long *n)
{
	const char *v = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
	if (!v)
		return 0;
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || *end || !*v || x < 0 || x > max)
		return -1;
	*n = x;
	return 1;
}

/* ?wait=SECONDS, capped by the config; 0 when absent; -1 after a 400. */
int api_wait_seconds(struct http_req *r)
{
	long s = 0;
	if (query_number(r, "wait", LONG_MAX, &s) < 0) {
		http_error(r, 400, 0, "wait: a whole number of seconds");
		return -1;
	}
	return s > (long)r->d->cfg.wait_max_s ? (int)r->d->cfg.wait_max_s : (int)s;
}

int api_accept(struct http_req *r, int parsed, struct run_spec *rq, const char *err, char id[SCHED_ID_MAX])
{
	int rc = parsed ? http_error(r, 400, 0, "%s", err), -1 : api_submit(r, rq, id);
	run_spec_free(rq);
	return rc;
}

/* Keys are opaque to us, as Stripe's and the IETF draft's are. */
int api_idempotency_key(struct http_req *r, struct store_idem *idem, char hash[STORE_IDEM_HASH_LEN + 1])
{
	const char *key = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Idempotency-Key");
	if (!key)
		return 0;
	size_t n = strlen(key);
	bool ok = n >= 1 && n <= STORE_IDEM_KEY_MAX;
	for (size_t i = 0; ok && i < n; i++)
		ok = key[i] > ' ' && key[i] < 0x7f;
	if (!ok) {
		http_error(r, 400, 0, "Idempotency-Key: 1 to %d visible ASCII characters", STORE_IDEM_KEY_MAX);
		return -1;
	}
	sha256_hex(r->body ? r->body : "", r->body_len, hash);
	*idem = (struct store_idem){ .key = key, .hash = hash };
	return 1;
}

_Static_assert(STORE_IDEM_HASH_LEN == 2 * SHA256_DIGEST_LENGTH, "a body's hash is SHA-256's, in hex");

int api_submit(struct http_req *r, struct run_spec *rq, char id[SCHED_ID_MAX])
{
	if (rq->runtime[0] && !runtime_pick(r->d->rts, r->d->nrts, rq->runtime)) {
		http_error(r, 400, 0, "runtime %s is not installed (GET /v1/runtimes lists them)", rq->runtime);
		return -1;
	}
	struct store_idem idem;
	char hash[STORE_IDEM_HASH_LEN + 1];
	int keyed = api_idempotency_key(r, &idem, hash);
	if (keyed < 0)
		return -1;
	struct vmrund_answer a = vmrund_submit(r->d, (unsigned)r->tenant, rq, keyed ? &idem : NULL, id);
	if (a.status != 202) {
		http_error(r, a.status, a.retry_after_s, "%s", a.message);
		return -1;
	}
	return 0;
}

static enum MHD_Result submit_and_wait(struct http_req *r, int wait)
{
	json_t *body = http_body_json(r);
	if (!body)
		return MHD_YES;
	struct run_spec rq;
	char err[400], id[SCHED_ID_MAX];
	int rc = run_spec_from_json(body, &rq, err, sizeof(err));
	json_decref(body);
	if (api_accept(r, rc, &rq, err, id))
		return MHD_YES;
	bool done = wait > 0 && vmrund_wait(r->d, id, clock_mono_ms() + (int64_t)wait * 1000);
	return answer_run(r, done ? 200 : 202, id);
}

static enum MHD_Result create(struct http_req *r)
{
	int wait = api_wait_seconds(r);
	if (wait < 0)
		return MHD_YES;
	/* a wait holds this connection's thread: one of the tenant's places,
	 * taken before the run is queued so that a refusal queues nothing */
	if (wait > 0 && !http_stream_begin(r))
		return MHD_YES;
	enum MHD_Result rc = submit_and_wait(r, wait);
	if (wait > 0)
		vmrund_stream_end(r->d, (unsigned)r->tenant);
	return rc;
}

static enum MHD_Result cancel(struct http_req *r, const char *id)
{
	struct store_run run;
	if (!find_run(r, id, &run))
		return MHD_YES;
	store_run_free(&run);
	struct vmrund_answer a = vmrund_cancel(r->d, (unsigned)r->tenant, id, 20000);
	if (a.status != 200 && a.status != 202)
		return http_error(r, a.status, a.retry_after_s, "%s", a.message);
	return answer_run(r, a.status, id);
}

static enum MHD_Result runtimes(struct http_req *r)
{
	json_t *list = json_array();
	for (size_t i = 0; i < r->d->nrts; i++) {
		const struct runtime *rt = &r->d->rts[i];
		json_t *aliases = json_array();
		for (const char *a = rt->aliases; *(a += strspn(a, " "));) {
			size_t n = strcspn(a, " ");
			json_array_append_new(aliases, json_stringn(a, n));
			a += n;
		}
		json_array_append_new(list, json_pack("{s:s,s:s,s:s,s:o,s:b}", "name", rt->name, "version", rt->version,
						      "extension", rt->extension, "aliases", aliases, "compiled",
						      rt->compile[0] != '\0'));
	}
	return http_json(r, 200, list);
}

/* ---- artifacts ---------------------------------------------------------- */

static bool kept(struct http_req *r, const struct store_run *run, char *dir, size_t len)
{
	vmrund_run_path(r->d, run->id, SPOOL_ARTIFACTS, dir, len);
	struct stat st;
	if (!store_state_terminal(run->state))
		return false;
	vmrund_fetch_run(r->d, run->id);   /* it may have run on another node */
	return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

static enum MHD_Result artifact_list(struct http_req *r, const struct store_run *run)
{
	char dir[PATH_MAX];
	json_t *res = spool_result_parse(run->result);
	json_t *list = json_object_get(res, "artifacts");
	enum MHD_Result rc;
	if (!store_state_terminal(run->state))
		rc = http_error(r, 409, 0, "run %s has not ended: its artifacts come when it does", run->id);
	else if (!kept(r, run, dir, sizeof(dir)))
		rc = http_error(r, 404, 0, "run %s kept no artifacts (keep_artifacts), or they expired", run->id);
	else
		rc = http_json(r, 200, json_pack("{s:O,s:O}", "artifacts", list ? list : json_array(), "skipped",
						 json_object_get(res, "artifacts_skipped") ?: json_array()));
	json_decref(res);
	return rc;
}

/* One kept file, opened beneath the run's artifacts with no symlink and
 * no ".." followed (the tree was extracted by our own walk, regular files
 * and directories only; this holds even if something else put one there). */
static int open_beneath(const char *dir, const char *rel)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dfd < 0)
		return -1;
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
	int fd = (int)syscall(SYS_openat2, dfd, rel, &how, sizeof(how));
	int e = errno;
	close(dfd);
	errno = e;
	return fd;
}

static enum MHD_Result artifact_file(struct http_req *r, const struct store_run *run, const char *rel)
{
	char dir[PATH_MAX];
	if (!kept(r, run, dir, sizeof(dir)))
		return http_error(r, 404, 0, "run %s kept no artifacts, or they expired", run->id);
	int fd = *rel && rel[0] != '/' && !strstr(rel, "..") ? open_beneath(dir, rel) : -1;
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		return http_error(r, 404, 0, "no artifact %.300s", rel);
	}
	struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
	if (!resp) {
		close(fd);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
	return http_queue(r, 200, resp);
}

static enum MHD_Result artifacts(struct http_req *r, const char *id, const char *rest)
{
	struct store_run run;
	if (!find_run(r, id, &run))
		return MHD_YES;
	enum MHD_Result rc;
	char dir[PATH_MAX];
	if (!*rest)
		rc = artifact_list(r, &run);
	else if (!strcmp(rest, ".tar"))
		rc = kept(r, &run, dir, sizeof(dir)) ? stream_tar(r, &run, dir)
						      : http_error(r, 404, 0, "run %s kept no artifacts, or they expired", id);
	else
		rc = artifact_file(r, &run, rest + 1);
	store_run_free(&run);
	return rc;
}

/* /runs/ID[/output|/artifacts[.tar|/PATH]] */
static enum MHD_Result run_path(struct http_req *r, const char *p)
{
	char id[STORE_ID_LEN + 2];
	size_t n = strcspn(p, "/.");
	snprintf(id, sizeof(id), "%.*s", (int)(n < sizeof(id) - 1 ? n : sizeof(id) - 1), p);
	const char *rest = p + n;
	bool get = !strcmp(r->method, "GET");
	if (!*rest) {
		if (get)
			return answer_run(r, 200, id);
		if (!strcmp(r->method, "DELETE"))
			return cancel(r, id);
		return http_error(r, 405, 0, "GET or DELETE here");
	}
	if (!get)
		return http_error(r, 405, 0, "only GET here");
	if (!strcmp(rest, "/output")) {
		struct store_run run;
		if (!find_run(r, id, &run))
			return MHD_YES;
		store_run_free(&run);
		return stream_output(r, id);
	}
	if (!strncmp(rest, "/artifacts", 10) && (rest[10] == '\0' || rest[10] == '/' || !strcmp(rest + 10, ".tar")))
		return artifacts(r, id, rest + 10);
	return http_error(r, 404, 0, "no such endpoint");
}

/* ?NAME=, a whole number up to max: dflt when absent; -1 after a 400. */
long api_query_number(struct http_req *r, const char *name, long dflt, long max)
{
	long n = dflt;
	if (query_number(r, name, max, &n) < 0) {
		http_error(r, 400, 0, "%s: a whole number from 0 to %ld", name, max);
		return -1;
	}
	return n;
}

/* GET /v1/runs?limit=&offset=: the tenant's runs, newest first. */
static enum MHD_Result list(struct http_req *r)
{
	long limit = api_query_number(r, "limit", API_LIST_DEFAULT, API_LIST_MAX);
	long offset = limit < 0 ? -1 : api_query_number(r, "offset", 0, LONG_MAX);
	if (limit < 0 || offset < 0)
		return MHD_YES;
	struct store_run *rows;
	unsigned n;
	uint64_t total;
	char err[300];
	if (vmrund_list_runs(r->d, r->d->ts.t[r->tenant].name, NULL, (uint64_t)offset, (unsigned)limit, &rows, &n, &total,
			     err, sizeof(err)))
		return http_error(r, 503, 2, "%s", err);
	json_t *a = json_array();
	for (unsigned i = 0; i < n; i++) {
		if (a && json_array_append_new(a, api_run_view(&rows[i]))) {
			json_decref(a);
			a = NULL;
		}
	}
	store_runs_free(rows, n);
	if (!a)
		return http_error(r, 500, 0, "out of memory");
	return http_json(r, 200, json_pack("{so sI sI sI}", "runs", a, "total", (json_int_t)total, "offset",
					   (json_int_t)offset, "limit", (json_int_t)limit));
}

/* POST /v1/judge: waits for every test, on one of the tenant's places. */
static enum MHD_Result judge(struct http_req *r)
{
	json_t *body = http_body_json(r);
	if (!body)
		return MHD_YES;
	struct judge_request jr;
	char err[512];
	int rc = judge_parse(body, &jr, err, sizeof(err));
	json_decref(body);
	if (rc)
		return http_error(r, 400, 0, "%s", err);
	if (!http_stream_begin(r)) {
		judge_free(&jr);
		return MHD_YES;
	}
	unsigned status;
	json_t *v = judge_run(r->d, (unsigned)r->tenant, &jr, &status, err, sizeof(err));
	vmrund_stream_end(r->d, (unsigned)r->tenant);
	judge_free(&jr);
	return v ? http_json(r, 200, v) : http_error(r, status, status == 503 ? 2 : 0, "%s", err);
}

enum MHD_Result api_v1(struct http_req *r, const char *p)
{
	if (!strcmp(p, "/judge"))
		return strcmp(r->method, "POST") ? http_error(r, 405, 0, "only POST here") : judge(r);
	if (!strcmp(p, "/runs"))
		return !strcmp(r->method, "POST") ? create(r)
		       : !strcmp(r->method, "GET") ? list(r) : http_error(r, 405, 0, "only GET and POST here");
	if (!strncmp(p, "/runs/", 6))
		return run_path(r, p + 6);
	if (!strncmp(p, "/sandboxes", 10) && (p[10] == '\0' || p[10] == '/'))
		return api_sandboxes(r, p + 10);
	if (!strcmp(p, "/runtimes"))
		return strcmp(r->method, "GET") ? http_error(r, 405, 0, "only GET here") : runtimes(r);
	return http_error(r, 404, 0, "no such endpoint: /v1%.200s", p);
}
