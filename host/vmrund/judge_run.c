/* /v1/judge's runs (judge.h, judge_run.h): the program compiled once in
 * a sandbox of the tenant's, which is then checkpointed; each test runs
 * in a fork of that checkpoint (its memory and workspace as they were
 * right after the compile, nothing any other test left), deleted after
 * it. Every sandbox is the tenant's, under its ceilings, through the same
 * calls the sandbox API makes. */
#include "judge_run.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "errmsg.h"
#include "sandbox_http.h"
#include "sandboxes.h"

#define CALL_MS 30000                 /* a supervisor call that waits on nothing */
#define ANSWER_MAX (16u << 20)        /* a command's answer: its output twice over, as JSON */
#define CHECKPOINT "compiled"

struct judge_job {
	struct vmrund *d;
	unsigned tenant;
	const struct judge_request *jr;
	const struct runtime *rt;
	char base[SCHED_ID_MAX];      /* the compiled sandbox; "" none */
	const char *names[RUN_SPEC_MAX_FILES];
	char err[512];
};

/* One call to sandbox id's supervisor: its status, and its body as JSON
 * into *out (NULL when it is none). -1 with job->err when the call
 * failed. */
static int call(struct judge_job *job, const char *id, const char *method, const char *target, const char *type,
		const void *body, size_t len, int timeout_ms, json_t **out)
{
	char dir[PATH_MAX];
	struct sbxc c = { .fd = -1 };
	char *buf = NULL;
	size_t n = 0;
	int status = -1;
	*out = NULL;
	vmrund_sbx_dir(job->d, id, dir, sizeof(dir));
	if (sbxc_connect(&c, dir, timeout_ms) || sbxc_send_head(&c, method, target, type, NULL, len) ||
	    sbxc_send(&c, body ? body : "", len) || sbxc_read_head(&c)) {
		snprintf(job->err, sizeof(job->err), "sandbox %s: %s %s: %s", id, method, target, strerror(errno));
		goto out;
	}
	/* grown as the answer comes, up to ANSWER_MAX */
	for (size_t cap = 0;;) {
		if (n == cap) {
			char *more = cap < ANSWER_MAX ? realloc(buf, (cap = cap ? 2 * cap : 65536)) : NULL;
			if (!more) {
				snprintf(job->err, sizeof(job->err), "sandbox %s: %s %s: %s", id, method, target,
					 cap >= ANSWER_MAX ? "its answer is too long" : "out of memory");
				goto out;
			}
			buf = more;
		}
		ssize_t k = sbxc_read_body(&c, buf + n, cap - n);
		if (k == 0)
			break;
		if (k < 0) {
			snprintf(job->err, sizeof(job->err), "sandbox %s: %s %s: reading: %s", id, method, target,
				 strerror(errno));
			goto out;
		}
		n += (size_t)k;
	}
	*out = json_loadb(buf, n, 0, NULL);
	status = (int)c.head.status;
out:
	free(buf);
	sbxc_close(&c);
	return status;
}

/* A call whose answer must be want: its body (the caller's), or NULL
 * with job->err. */
static json_t *expect(struct judge_job *job, const char *id, const char *method, const char *target,
		      const json_t *body, int timeout_ms, int want)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_t *out;
	int status = call(job, id, method, target, "application/json", text, text ? strlen(text) : 0, timeout_ms, &out);
	free(text);
	if (status == want)
		return out ? out : json_object();
	if (status > 0)
		snprintf(job->err, sizeof(job->err), "sandbox %s: %s %s: %d %.300s", id, method, target, status,
			 json_string_value(json_object_get(out, "message")) ?: "");
	json_decref(out);
	return NULL;
}

/* A new sandbox of the tenant's from body: 0 with its id, or -1. */
static int create(struct judge_job *job, json_t *body, char id[SCHED_ID_MAX])
{
	struct vmrund_answer a = vmrund_sbx_create(job->d, job->tenant, body, NULL, id);
	json_decref(body);
	if (a.status == 201)
		return 0;
	snprintf(job->err, sizeof(job->err), "a sandbox for the judge: %d %s", a.status, a.message);
	return -1;
}

static void destroy(struct judge_job *job, const char *id)
{
	struct vmrund_answer a = vmrund_sbx_delete(job->d, job->tenant, id);
	if (a.status != 200)
		vmrund_say("judge: sandbox %s: delete: %d %s", id, a.status, a.message);
}

/* name percent-encoded for a query ("a b.c" -> "a%20b.c"). */
static void encode(const char *name, char *out, size_t cap)
{
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)name; *p && o + 4 < cap; p++)
		o += (size_t)(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~", *p) && *p
				      ? snprintf(out + o, cap - o, "%c", *p)
				      : snprintf(out + o, cap - o, "%%%02X", *p));
	out[o] = '\0';
}

/* A template of the runtime's expanded over the program's file names. */
static json_t *argv_of(struct judge_job *job, const char *tmpl)
{
	char *argv[RUNTIME_ARGV_MAX + 1], store[RUNTIME_STORE_MAX];
	int n = runtime_expand(tmpl, job->names, job->jr->src.nfiles, NULL, 0, argv, RUNTIME_ARGV_MAX + 1, store,
			       sizeof(store), job->err, sizeof(job->err));
	if (n < 0)
		return NULL;
	json_t *a = json_array();
	for (int i = 0; a && i < n; i++)
		json_array_append_new(a, json_string(argv[i]));
	return a;
}

/* The base sandbox: made, the program's files put, compiled (its
 * compile command's answer into *compile), checkpointed. 1 compiled, 0
 * the compile failed, -1 error. */
static int compile(struct judge_job *job, json_t **compile_cmd)
{
	const struct judge_request *jr = job->jr;
	*compile_cmd = NULL;
	json_t *limits = json_pack("{sI}", "max_output", (json_int_t)jr->max_output);
	if (jr->memory_mib)
		json_object_set_new(limits, "memory_mib", json_integer((json_int_t)jr->memory_mib));
	if (create(job, json_pack("{ss so}", "runtime", job->rt->name, "limits", limits), job->base))
		return -1;
	for (unsigned i = 0; i < jr->src.nfiles; i++) {
		char target[RUN_SPEC_MAX_FILE_NAME * 3 + 16], name[RUN_SPEC_MAX_FILE_NAME * 3 + 1];
		json_t *out;
		encode(jr->src.files[i].name, name, sizeof(name));
		snprintf(target, sizeof(target), "/files?path=%s", name);
		int st = call(job, job->base, "PUT", target, "application/octet-stream", jr->src.files[i].data,
			      jr->src.files[i].len, CALL_MS, &out);
		json_decref(out);
		if (st < 200 || st > 299) {
			if (st > 0)
				snprintf(job->err, sizeof(job->err), "putting %s: %d", jr->src.files[i].name, st);
			return -1;
		}
	}
	if (job->rt->compile[0]) {
		json_t *argv = argv_of(job, job->rt->compile);
		uint64_t t = job->rt->compile_timeout_s ? job->rt->compile_timeout_s : RUN_SPEC_DEFAULT_COMPILE_TIMEOUT_S;
		char target[64];
		snprintf(target, sizeof(target), "/commands?wait=%llu", (unsigned long long)t + 10);
		json_t *body = argv ? json_pack("{so sI}", "argv", argv, "timeout_s", (json_int_t)t) : NULL;
		*compile_cmd = body ? expect(job, job->base, "POST", target, body, (int)(t + 20) * 1000, 201) : NULL;
		json_decref(body);
		if (!*compile_cmd)
			return -1;
		if (json_integer_value(json_object_get(*compile_cmd, "exit_code")) != 0 ||
		    !json_is_integer(json_object_get(*compile_cmd, "exit_code")))
			return 0;
	}
	json_t *cp = json_pack("{ss}", "name", CHECKPOINT);
	json_t *made = expect(job, job->base, "POST", "/checkpoints", cp, 120000, 201);
	json_decref(cp);
	json_decref(made);
	return made ? 1 : -1;
}

/* One test in a fork of the checkpoint: its command's answer, or NULL
 * with job->err. */
static json_t *run_test(struct judge_job *job, const struct judge_test *t)
{
	char fork[SCHED_ID_MAX], from[SCHED_ID_MAX + 16], target[64];
	snprintf(from, sizeof(from), "%s/" CHECKPOINT, job->base);
	/* its life: the test's limit and room for its start and end */
	if (create(job, json_pack("{ss sf}", "from_checkpoint", from, "timeout_s", job->jr->timeout_s + 120), fork))
		return NULL;
	json_t *argv = argv_of(job, job->rt->run), *cmd = NULL;
	unsigned wait = (unsigned)ceil(job->jr->timeout_s) + 10;
	snprintf(target, sizeof(target), "/commands?wait=%u", wait);
	json_t *body = argv ? json_pack("{so ss% sf}", "argv", argv, "stdin", t->in, t->in_len, "timeout_s",
					job->jr->timeout_s)
			    : NULL;
	if (body)
		cmd = expect(job, fork, "POST", target, body, (int)(wait + 10) * 1000, 201);
	json_decref(body);
	destroy(job, fork);
	return cmd;
}

static json_t *test_json(unsigned i, enum judge_verdict v, const char *why, const json_t *cmd)
{
	const json_t *usage = json_object_get(cmd, "usage");
	json_t *o = json_pack("{sI ss}", "index", (json_int_t)i, "verdict", judge_verdict_name(v));
	if (!o)
		return NULL;
	json_object_set_new(o, "message", why[0] ? json_string(why) : json_null());
	if (cmd) {
		json_object_set(o, "exit_code", json_object_get(cmd, "exit_code"));
		json_object_set(o, "signal", json_object_get(cmd, "signal"));
		json_object_set(o, "cpu_ms", json_object_get(usage, "cpu_ms"));
		json_object_set(o, "max_rss_kib", json_object_get(usage, "max_rss_kib"));
		json_object_set(o, "stdout", json_object_get(cmd, "stdout"));
		json_object_set(o, "stderr", json_object_get(cmd, "stderr"));
	}
	return o;
}

json_t *judge_run(struct vmrund *d, unsigned tenant, const struct judge_request *jr, unsigned *status, char *err,
		  size_t errlen)
{
	struct judge_job job = { .d = d, .tenant = tenant, .jr = jr };
	json_t *compile_cmd = NULL, *tests = json_array(), *result = NULL;
	unsigned passed = 0, failed = 0;
	json_int_t max_cpu = 0, max_rss = 0;
	enum judge_verdict overall = JV_ACCEPTED;
	*status = 500;
	if (!(job.rt = runtime_pick(d->rts, d->nrts, jr->src.runtime))) {
		*status = 400;
		errf(err, errlen, "runtime %s is not installed (GET /v1/runtimes lists them)", jr->src.runtime);
		goto out;
	}
	for (unsigned i = 0; i < jr->src.nfiles; i++)
		job.names[i] = jr->src.files[i].name;
	int64_t t0 = clock_mono_ms();
	int compiled = compile(&job, &compile_cmd);
	int64_t compile_ms = clock_mono_ms() - t0;
	if (compiled < 0) {
		*status = 503;
		errf(err, errlen, "%s", job.err);
		goto out;
	}
	if (!compiled)
		overall = JV_COMPILE_ERROR;
	for (unsigned i = 0; compiled && tests && i < jr->ntests; i++) {
		char why[300] = "";
		json_t *cmd = NULL;
		enum judge_verdict v = JV_SKIPPED;
		if (!(jr->stop_on_first_failure && failed)) {
			cmd = run_test(&job, &jr->tests[i]);
			v = cmd ? judge_test_verdict(jr, &jr->tests[i], cmd, why, sizeof(why)) : JV_INTERNAL_ERROR;
			if (!cmd)
				snprintf(why, sizeof(why), "%.290s", job.err);
		}
		passed += v == JV_ACCEPTED;
		failed += v != JV_ACCEPTED && v != JV_SKIPPED;
		if (overall == JV_ACCEPTED && v != JV_ACCEPTED && v != JV_SKIPPED)
			overall = v;
		json_int_t cpu = json_integer_value(json_object_get(json_object_get(cmd, "usage"), "cpu_ms"));
		json_int_t rss = json_integer_value(json_object_get(json_object_get(cmd, "usage"), "max_rss_kib"));
		max_cpu = cpu > max_cpu ? cpu : max_cpu;
		max_rss = rss > max_rss ? rss : max_rss;
		if (json_array_append_new(tests, test_json(i, v, why, cmd))) {
			json_decref(tests);
			tests = NULL;
		}
		json_decref(cmd);
	}
	if (!tests) {
		errf(err, errlen, "out of memory");
		goto out;
	}
	json_t *comp = compile_cmd ? json_pack("{sO sO sO sI}", "exit_code", json_object_get(compile_cmd, "exit_code"),
					       "stdout", json_object_get(compile_cmd, "stdout"), "stderr",
					       json_object_get(compile_cmd, "stderr"), "ms", (json_int_t)compile_ms)
				   : json_null();
	result = json_pack("{ss so sO s{sI sI sI sI sI}}", "verdict", judge_verdict_name(overall), "compile", comp,
			   "tests", tests, "summary", "tests", (json_int_t)jr->ntests, "passed", (json_int_t)passed,
			   "failed", (json_int_t)failed, "max_cpu_ms", max_cpu, "max_rss_kib", max_rss);
	*status = result ? 200 : 500;
	if (!result)
		errf(err, errlen, "out of memory");
out:
	if (job.base[0])
		destroy(&job, job.base);
	json_decref(compile_cmd);
	json_decref(tests);
	return result;
}
