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

/* A program a judge compiles once and forks for each test: the
 * contestant's, or a checker. */
struct program {
	const struct run_spec *src;   /* runtime and files */
	const struct runtime *rt;
	const char *names[RUN_SPEC_MAX_FILES];
	char base[SCHED_ID_MAX];      /* its compiled sandbox; "" none */
};

struct judge_job {
	struct vmrund *d;
	unsigned tenant;
	const struct judge_request *jr;
	struct program contestant, checker;
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

/* A template of pg's runtime expanded over its file names and args. */
static json_t *argv_of(struct judge_job *job, const struct program *pg, const char *tmpl, char *const *args,
		       unsigned nargs)
{
	char *argv[RUNTIME_ARGV_MAX + 1], store[RUNTIME_STORE_MAX];
	int n = runtime_expand(tmpl, pg->names, pg->src->nfiles, args, nargs, argv, RUNTIME_ARGV_MAX + 1, store,
			       sizeof(store), job->err, sizeof(job->err));
	if (n < 0)
		return NULL;
	json_t *a = json_array();
	for (int i = 0; a && i < n; i++)
		json_array_append_new(a, json_string(argv[i]));
	return a;
}

/* Put n bytes at path in sandbox id: 0, or -1 with job->err. */
static int put_file(struct judge_job *job, const char *id, const char *path, const void *data, size_t n)
{
	char target[RUN_SPEC_MAX_FILE_NAME * 3 + 16], name[RUN_SPEC_MAX_FILE_NAME * 3 + 1];
	json_t *out;
	encode(path, name, sizeof(name));
	snprintf(target, sizeof(target), "/files?path=%s", name);
	int st = call(job, id, "PUT", target, "application/octet-stream", data, n, CALL_MS, &out);
	json_decref(out);
	if (st >= 200 && st <= 299)
		return 0;
	if (st > 0)
		snprintf(job->err, sizeof(job->err), "putting %s: %d", path, st);
	return -1;
}

/* Run argv in sandbox id with stdin (in_len bytes) under timeout_s: its
 * answer, or NULL with job->err. */
static json_t *command(struct judge_job *job, const char *id, json_t *argv, const char *in, size_t in_len,
		       double timeout_s)
{
	char target[64];
	unsigned wait = (unsigned)ceil(timeout_s) + 10;
	snprintf(target, sizeof(target), "/commands?wait=%u", wait);
	json_t *body = argv ? json_pack("{so ss% sf}", "argv", argv, "stdin", in, in_len, "timeout_s", timeout_s) : NULL;
	json_t *cmd = body ? expect(job, id, "POST", target, body, (int)(wait + 10) * 1000, 201) : NULL;
	json_decref(body);
	return cmd;
}

/* pg's base sandbox: made, its files put, compiled (its compile
 * command's answer into *compile_cmd), checkpointed. 1 compiled, 0 the
 * compile failed, -1 error. */
static int compile(struct judge_job *job, struct program *pg, json_t **compile_cmd)
{
	const struct judge_request *jr = job->jr;
	*compile_cmd = NULL;
	json_t *limits = json_pack("{sI}", "max_output", (json_int_t)jr->max_output);
	if (jr->memory_mib)
		json_object_set_new(limits, "memory_mib", json_integer((json_int_t)jr->memory_mib));
	if (create(job, json_pack("{ss so}", "runtime", pg->rt->name, "limits", limits), pg->base))
		return -1;
	for (unsigned i = 0; i < pg->src->nfiles; i++)
		if (put_file(job, pg->base, pg->src->files[i].name, pg->src->files[i].data, pg->src->files[i].len))
			return -1;
	if (pg->rt->compile[0]) {
		uint64_t t = pg->rt->compile_timeout_s ? pg->rt->compile_timeout_s : RUN_SPEC_DEFAULT_COMPILE_TIMEOUT_S;
		*compile_cmd = command(job, pg->base, argv_of(job, pg, pg->rt->compile, NULL, 0), "", 0, (double)t);
		if (!*compile_cmd)
			return -1;
		if (json_integer_value(json_object_get(*compile_cmd, "exit_code")) != 0 ||
		    !json_is_integer(json_object_get(*compile_cmd, "exit_code")))
			return 0;
	}
	json_t *cp = json_pack("{ss}", "name", CHECKPOINT);
	json_t *made = expect(job, pg->base, "POST", "/checkpoints", cp, 120000, 201);
	json_decref(cp);
	json_decref(made);
	return made ? 1 : -1;
}

/* A fork of pg's checkpoint, living life_s: 0 with its id, or -1. */
static int fork_of(struct judge_job *job, const struct program *pg, double life_s, char id[SCHED_ID_MAX])
{
	char from[SCHED_ID_MAX + 16];
	snprintf(from, sizeof(from), "%s/" CHECKPOINT, pg->base);
	return create(job, json_pack("{ss sf}", "from_checkpoint", from, "timeout_s", life_s), id);
}

/* One test in a fork of the contestant's checkpoint: its command's
 * answer, or NULL with job->err. */
static json_t *run_test(struct judge_job *job, const struct judge_test *t)
{
	char fork[SCHED_ID_MAX];
	/* its life: the test's limit and room for its start and end */
	if (fork_of(job, &job->contestant, job->jr->timeout_s + 120, fork))
		return NULL;
	json_t *cmd = command(job, fork, argv_of(job, &job->contestant, job->contestant.rt->run, NULL, 0), t->in,
			      t->in_len, job->jr->timeout_s);
	destroy(job, fork);
	return cmd;
}

/* The checker program on test t and the contestant's output (its
 * command's stdout), in a fork of the checker's checkpoint: testlib's
 * convention, "input output answer" files as its arguments and the
 * verdict by its exit status (0 accepted, 1 or 2 wrong answer; anything
 * else: the checker failed). */
static enum judge_verdict check(struct judge_job *job, const struct judge_test *t, const json_t *cmd, char *why,
				size_t cap)
{
	static char *const args[] = { "input.txt", "output.txt", "answer.txt" };
	char fork[SCHED_ID_MAX];
	const json_t *out = json_object_get(cmd, "stdout");
	enum judge_verdict v = JV_INTERNAL_ERROR;
	json_t *res = NULL;
	if (fork_of(job, &job->checker, JUDGE_CHECKER_TIMEOUT_S + 120, fork)) {
		snprintf(why, cap, "the checker: %.250s", job->err);
		return v;
	}
	if (put_file(job, fork, args[0], t->in, t->in_len) ||
	    put_file(job, fork, args[1], json_string_value(out) ? json_string_value(out) : "", json_string_length(out)) ||
	    put_file(job, fork, args[2], t->expected ? t->expected : "", t->expected_len) ||
	    !(res = command(job, fork, argv_of(job, &job->checker, job->checker.rt->run, args, 3), "", 0,
			    JUDGE_CHECKER_TIMEOUT_S))) {
		snprintf(why, cap, "the checker: %.250s", job->err);
	} else {
		v = judge_checker_verdict(res, why, cap);
	}
	json_decref(res);
	destroy(job, fork);
	return v;
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

/* A program from its source: its runtime installed (0), or -1 with err. */
static int program_of(struct judge_job *job, struct program *pg, const struct run_spec *src, char *err, size_t errlen)
{
	pg->src = src;
	if (!(pg->rt = runtime_pick(job->d->rts, job->d->nrts, src->runtime)))
		return errf(err, errlen, "runtime %s is not installed (GET /v1/runtimes lists them)", src->runtime);
	for (unsigned i = 0; i < src->nfiles; i++)
		pg->names[i] = src->files[i].name;
	return 0;
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
	if (program_of(&job, &job.contestant, &jr->src, err, errlen) ||
	    (jr->checker == JUDGE_PROGRAM && program_of(&job, &job.checker, &jr->checker_src, err, errlen))) {
		*status = 400;
		goto out;
	}
	int64_t t0 = clock_mono_ms();
	int compiled = compile(&job, &job.contestant, &compile_cmd);
	int64_t compile_ms = clock_mono_ms() - t0;
	if (compiled > 0 && jr->checker == JUDGE_PROGRAM) {
		/* the problem setter's checker: compiled once too, in a VM
		 * of its own; one that does not compile is the request's fault */
		json_t *checker_cmd = NULL;
		int ok = compile(&job, &job.checker, &checker_cmd);
		if (!ok)
			snprintf(job.err, sizeof(job.err), "the checker does not compile: %.400s",
				 json_string_value(json_object_get(checker_cmd, "stderr")) ?: "");
		json_decref(checker_cmd);
		if (ok <= 0) {
			*status = ok ? 503 : 400;
			errf(err, errlen, "%s", job.err);
			goto out;
		}
	}
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
			if (v == JV_CHECK)
				v = check(&job, &jr->tests[i], cmd, why, sizeof(why));
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
	if (job.contestant.base[0])
		destroy(&job, job.contestant.base);
	if (job.checker.base[0])
		destroy(&job, job.checker.base);
	json_decref(compile_cmd);
	json_decref(tests);
	return result;
}
