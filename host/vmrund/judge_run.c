/* /v1/judge's runs (judge.h, judge_run.h): the program compiled once in
 * a sandbox of the tenant's, which is then checkpointed; each test runs
 * in a fork of that checkpoint (its memory and workspace as they were
 * right after the compile, nothing any other test left), deleted after
 * it. Every sandbox is the tenant's, under its ceilings, through the same
 * calls the sandbox API makes. */
#include "judge_run.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "errmsg.h"

#define CHECKPOINT "compiled"

char *const judge_testlib_args[3] = { "input.txt", "output.txt", "answer.txt" };

/* A template of pg's runtime expanded over its file names and args. */
static json_t *argv_of(struct judge_job *job, const struct program *pg, const char *tmpl, char *const *args,
		       unsigned nargs)
{
	char *argv[RUNTIME_ARGV_MAX + 1], store[RUNTIME_STORE_MAX];
	int n = runtime_expand(tmpl, pg->names, pg->src->nfiles, args, nargs, argv, RUNTIME_ARGV_MAX + 1, store,
			       sizeof(store), job->u.err, sizeof(job->u.err));
	if (n < 0)
		return NULL;
	json_t *a = json_array();
	for (int i = 0; a && i < n; i++)
		json_array_append_new(a, json_string(argv[i]));
	return a;
}

json_t *judge_argv(struct judge_job *job, const struct program *pg, char *const *args, unsigned nargs)
{
	return argv_of(job, pg, pg->rt->run, args, nargs);
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
	if (sbxu_create(&job->u, json_pack("{ss so}", "runtime", pg->rt->name, "limits", limits), pg->base))
		return -1;
	for (unsigned i = 0; i < pg->src->nfiles; i++)
		if (sbxu_put_file(&job->u, pg->base, pg->src->files[i].name, pg->src->files[i].data,
				  pg->src->files[i].len))
			return -1;
	if (pg->rt->compile[0]) {
		uint64_t t = pg->rt->compile_timeout_s ? pg->rt->compile_timeout_s : RUN_SPEC_DEFAULT_COMPILE_TIMEOUT_S;
		*compile_cmd = sbxu_command(&job->u, pg->base, argv_of(job, pg, pg->rt->compile, NULL, 0), "", 0,
					    (double)t, NULL);
		if (!*compile_cmd)
			return -1;
		if (json_integer_value(json_object_get(*compile_cmd, "exit_code")) != 0 ||
		    !json_is_integer(json_object_get(*compile_cmd, "exit_code")))
			return 0;
	}
	json_t *cp = json_pack("{ss}", "name", CHECKPOINT);
	json_t *made = sbxu_expect(&job->u, pg->base, "POST", "/checkpoints", cp, 120000, 201);
	json_decref(cp);
	json_decref(made);
	return made ? 1 : -1;
}

/* The problem setter's program (a checker, an interactor: what) compiled
 * once: 0, or -1 with *status (400 when it does not compile: the
 * request's fault; 503) and err. */
static int compile_setter(struct judge_job *job, struct program *pg, const char *what, unsigned *status, char *err,
			  size_t errlen)
{
	json_t *cmd = NULL;
	int ok = compile(job, pg, &cmd);
	if (!ok)
		snprintf(job->u.err, sizeof(job->u.err), "the %s does not compile: %.400s", what,
			 json_string_value(json_object_get(cmd, "stderr")) ?: "");
	json_decref(cmd);
	if (ok > 0)
		return 0;
	*status = ok ? 503 : 400;
	return errf(err, errlen, "%s", job->u.err);
}

int judge_fork(struct judge_job *job, const struct program *pg, double life_s, char id[SCHED_ID_MAX])
{
	char from[SCHED_ID_MAX + 16];
	snprintf(from, sizeof(from), "%s/" CHECKPOINT, pg->base);
	return sbxu_create(&job->u, json_pack("{ss sf}", "from_checkpoint", from, "timeout_s", life_s), id);
}

/* One test in a fork of the contestant's checkpoint: its command's
 * answer, or NULL with job->u.err. */
static json_t *run_test(struct judge_job *job, const struct judge_test *t)
{
	char fork[SCHED_ID_MAX];
	/* its life: the test's limit and room for its start and end */
	if (judge_fork(job, &job->contestant, job->jr->timeout_s + 120, fork))
		return NULL;
	json_t *cmd = sbxu_command(&job->u, fork, judge_argv(job, &job->contestant, NULL, 0), t->in, t->in_len,
				   job->jr->timeout_s, NULL);
	sbxu_destroy(&job->u, fork);
	return cmd;
}

/* The checker program on test t and the output judged (out, len bytes),
 * in a fork of the checker's checkpoint: testlib's convention, "input
 * output answer" files as its arguments and the verdict by its exit
 * status (0 accepted, 1 or 2 wrong answer; anything else: the checker
 * failed). */
static enum judge_verdict check(struct judge_job *job, const struct judge_test *t, const char *out, size_t len,
				char *why, size_t cap)
{
	char *const *args = judge_testlib_args;
	char fork[SCHED_ID_MAX];
	enum judge_verdict v = JV_INTERNAL_ERROR;
	json_t *res = NULL;
	if (judge_fork(job, &job->checker, JUDGE_CHECKER_TIMEOUT_S + 120, fork)) {
		snprintf(why, cap, "the checker: %.250s", job->u.err);
		return v;
	}
	if (sbxu_put_file(&job->u, fork, args[0], t->in, t->in_len) ||
	    sbxu_put_file(&job->u, fork, args[1], out, len) ||
	    sbxu_put_file(&job->u, fork, args[2], t->expected ? t->expected : "", t->expected_len) ||
	    !(res = sbxu_command(&job->u, fork, judge_argv(job, &job->checker, args, 3), "", 0,
				 JUDGE_CHECKER_TIMEOUT_S, NULL))) {
		snprintf(why, cap, "the checker: %.250s", job->u.err);
	} else {
		v = judge_checker_verdict(res, why, cap);
	}
	json_decref(res);
	sbxu_destroy(&job->u, fork);
	return v;
}

/* Test t run and judged: its verdict with why, the contestant's command
 * into *cmd and the interactor's into *icmd (NULL: none). */
static enum judge_verdict judge_test(struct judge_job *job, const struct judge_test *t, json_t **cmd, json_t **icmd,
				     char *why, size_t cap)
{
	const struct judge_request *jr = job->jr;
	enum judge_verdict v;
	*cmd = *icmd = NULL;
	if (!jr->interactive) {
		if (!(*cmd = run_test(job, t))) {
			snprintf(why, cap, "%.290s", job->u.err);
			return JV_INTERNAL_ERROR;
		}
		v = judge_test_verdict(jr, t, *cmd, why, cap);
		const json_t *out = json_object_get(*cmd, "stdout");
		return v != JV_CHECK ? v
				     : check(job, t, json_string_value(out) ? json_string_value(out) : "",
					     json_string_length(out), why, cap);
	}
	struct judge_talk talk = { 0 };
	if (judge_interact(job, t, &talk)) {
		snprintf(why, cap, "%.290s", job->u.err);
		return JV_INTERNAL_ERROR;
	}
	*cmd = json_incref(talk.contestant);
	*icmd = json_incref(talk.interactor);
	v = judge_interactive_verdict(jr, t, talk.contestant, talk.interactor, why, cap);
	/* what the interactor wrote for the checker; none is empty */
	const char *out = talk.output ? talk.output : "";
	if (v == JV_CHECK)
		v = jr->checker == JUDGE_PROGRAM ? check(job, t, out, talk.output_len, why, cap)
						 : judge_output_verdict(jr, t, out, talk.output_len, why, cap);
	judge_talk_free(&talk);
	return v;
}

static json_t *test_json(unsigned i, enum judge_verdict v, const char *why, const json_t *cmd, const json_t *icmd)
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
	if (icmd)
		json_object_set_new(o, "interactor",
				    json_pack("{sO? sO? sO? sO?}", "exit_code", json_object_get(icmd, "exit_code"),
					      "signal", json_object_get(icmd, "signal"), "stdout",
					      json_object_get(icmd, "stdout"), "stderr", json_object_get(icmd, "stderr")));
	return o;
}

/* One test's outcome. */
struct judged {
	enum judge_verdict v;
	char why[300];
	json_t *cmd, *icmd;
};

/* Tests taken in order by the workers of run_tests. */
struct pool {
	const struct judge_job *job;
	struct judged *res;
	pthread_mutex_t mu;
	unsigned next;                /* the next test to take */
	bool failed;                  /* one failed: with stop_on_first_failure, none starts after */
};

static void *worker(void *arg)
{
	struct pool *p = arg;
	struct judge_job job = *p->job;   /* its own: sandbox calls say why in job.u.err */
	const struct judge_request *jr = job.jr;
	for (;;) {
		pthread_mutex_lock(&p->mu);
		unsigned i = p->next++;
		bool skip = jr->stop_on_first_failure && p->failed;
		pthread_mutex_unlock(&p->mu);
		if (i >= jr->ntests)
			return NULL;
		struct judged *t = &p->res[i];
		t->v = skip ? JV_SKIPPED : judge_test(&job, &jr->tests[i], &t->cmd, &t->icmd, t->why, sizeof(t->why));
		pthread_mutex_lock(&p->mu);
		p->failed |= t->v != JV_ACCEPTED && t->v != JV_SKIPPED;
		pthread_mutex_unlock(&p->mu);
	}
}

/* How many tests run at once: the request's parallel, within what the
 * tenant's sandboxes leave beside the compiled ones (a test holds one
 * fork, two when interactive), and the tests there are; 1 at least. */
static unsigned parallel_of(const struct judge_job *job)
{
	const struct judge_request *jr = job->jr;
	unsigned open = job->u.d->ts.t[job->u.tenant].sandboxes;
	unsigned bases = 1 + (jr->checker == JUDGE_PROGRAM) + jr->interactive;
	unsigned room = open > bases ? (open - bases) / (jr->interactive ? 2 : 1) : 0;
	unsigned n = jr->parallel < room ? jr->parallel : room;
	n = n < jr->ntests ? n : jr->ntests;
	return n ? n : 1;
}

/* Every test of job, n at once (fewer when threads cannot be had: this
 * one is always among them), into res. */
static void run_tests(struct judge_job *job, struct judged *res, unsigned n)
{
	struct pool p = { .job = job, .res = res };
	pthread_t th[JUDGE_PARALLEL_MAX];
	unsigned started = 0;
	pthread_mutex_init(&p.mu, NULL);
	while (started + 1 < n && !pthread_create(&th[started], NULL, worker, &p))
		started++;
	worker(&p);   /* this thread is one of them */
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&p.mu);
}

/* A program from its source: its runtime installed (0), or -1 with err. */
static int program_of(struct judge_job *job, struct program *pg, const struct run_spec *src, char *err, size_t errlen)
{
	pg->src = src;
	if (!(pg->rt = runtime_pick(job->u.d->rts, job->u.d->nrts, src->runtime)))
		return errf(err, errlen, "runtime %s is not installed (GET /v1/runtimes lists them)", src->runtime);
	for (unsigned i = 0; i < src->nfiles; i++)
		pg->names[i] = src->files[i].name;
	return 0;
}

json_t *judge_run(struct vmrund *d, unsigned tenant, const struct judge_request *jr, unsigned *status, char *err,
		  size_t errlen)
{
	struct judge_job job = { .u = { .d = d, .tenant = tenant }, .jr = jr };
	json_t *compile_cmd = NULL, *tests = json_array(), *result = NULL;
	unsigned passed = 0, failed = 0;
	json_int_t max_cpu = 0, max_rss = 0;
	enum judge_verdict overall = JV_ACCEPTED;
	*status = 500;
	if (program_of(&job, &job.contestant, &jr->src, err, errlen) ||
	    (jr->checker == JUDGE_PROGRAM && program_of(&job, &job.checker, &jr->checker_src, err, errlen)) ||
	    (jr->interactive && program_of(&job, &job.interactor, &jr->interactor_src, err, errlen))) {
		*status = 400;
		goto out;
	}
	int64_t t0 = clock_mono_ms();
	int compiled = compile(&job, &job.contestant, &compile_cmd);
	int64_t compile_ms = clock_mono_ms() - t0;
	if (compiled < 0) {
		*status = 503;
		errf(err, errlen, "%s", job.u.err);
		goto out;
	}
	/* the problem setter's programs: compiled once too, each in a VM
	 * of its own */
	if (compiled && ((jr->checker == JUDGE_PROGRAM &&
			  compile_setter(&job, &job.checker, "checker", status, err, errlen)) ||
			 (jr->interactive && compile_setter(&job, &job.interactor, "interactor", status, err, errlen))))
		goto out;
	if (!compiled)
		overall = JV_COMPILE_ERROR;
	struct judged *res = compiled ? calloc(jr->ntests, sizeof(*res)) : NULL;
	if (compiled && !res) {
		errf(err, errlen, "out of memory");
		goto out;
	}
	if (compiled)
		run_tests(&job, res, parallel_of(&job));
	for (unsigned i = 0; compiled && i < jr->ntests; i++) {
		struct judged *t = &res[i];
		passed += t->v == JV_ACCEPTED;
		failed += t->v != JV_ACCEPTED && t->v != JV_SKIPPED;
		if (overall == JV_ACCEPTED && t->v != JV_ACCEPTED && t->v != JV_SKIPPED)
			overall = t->v;
		json_int_t cpu = json_integer_value(json_object_get(json_object_get(t->cmd, "usage"), "cpu_ms"));
		json_int_t rss = json_integer_value(json_object_get(json_object_get(t->cmd, "usage"), "max_rss_kib"));
		max_cpu = cpu > max_cpu ? cpu : max_cpu;
		max_rss = rss > max_rss ? rss : max_rss;
		if (tests && json_array_append_new(tests, test_json(i, t->v, t->why, t->cmd, t->icmd))) {
			json_decref(tests);
			tests = NULL;
		}
		json_decref(t->cmd);
		json_decref(t->icmd);
	}
	free(res);
	if (!tests) {
		errf(err, errlen, "out of memory");
		goto out;
	}
	/* how it ended too, where it did not exit: a signal, or the sandbox's
	 * refusal (its "end") */
	json_t *comp = compile_cmd ? json_pack("{sO sO* sO* sO sO sI}", "exit_code", json_object_get(compile_cmd, "exit_code"),
					       "signal", json_object_get(compile_cmd, "signal"), "end",
					       json_object_get(compile_cmd, "end"), "stdout",
					       json_object_get(compile_cmd, "stdout"), "stderr",
					       json_object_get(compile_cmd, "stderr"), "ms", (json_int_t)compile_ms)
				   : json_null();
	result = json_pack("{ss so sO s{sI sI sI sI sI}}", "verdict", judge_verdict_name(overall), "compile", comp,
			   "tests", tests, "summary", "tests", (json_int_t)jr->ntests, "passed", (json_int_t)passed,
			   "failed", (json_int_t)failed, "max_cpu_ms", max_cpu, "max_rss_kib", max_rss);
	*status = result ? 200 : 500;
	if (!result)
		errf(err, errlen, "out of memory");
out:
	for (struct program *pg[] = { &job.contestant, &job.checker, &job.interactor }, **p = pg; p < pg + 3; p++)
		if ((*p)->base[0])
			sbxu_destroy(&job.u, (*p)->base);
	json_decref(compile_cmd);
	json_decref(tests);
	return result;
}
