/* A Judge0 batch judged from one compile, the node's side
 * (judge0_batch.h): the compiled programs this node keeps, each a
 * checkpointed sandbox of its tenant's, and a thread for each run judged
 * in a fork of one. The thread writes the worker's result into the run's
 * directory and marks its slot reaped, so that loop.c records the run as
 * it records a worker's; whatever the fork path cannot do (a sandbox the
 * tenant's ceilings refuse, a compile that could not be made) goes to a
 * worker instead, which makes the run as ever. */
#include "judge0_batch.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "run_stages.h"
#include "sandbox_calls.h"
#include "spool.h"

#define CHECKPOINT "compiled"
#define FORK_SPARE_S 120        /* a fork's life past its command's limit: its start and end */
#define GATE_TRIES 60           /* the store asked this many times, half a second apart */

enum job_state { JOB_NEW, JOB_COMPILING, JOB_READY, JOB_FAILED, JOB_BROKEN };

/* One program compiled for a batch's runs. */
struct judge0_job {
	struct judge0_job *next;
	char key[JUDGE0_BATCH_KEY_LEN + 1];
	unsigned tenant;
	enum job_state state;
	char base[SCHED_ID_MAX];    /* its compiled sandbox; "" none */
	json_t *compile;            /* the compile command's answer (JOB_READY, JOB_FAILED) */
	int64_t compile_ms;
	unsigned users;             /* runs of it under way */
	unsigned done, batch;       /* runs of it made here; how many its batch has (its mark) */
	int64_t made_ms, idle_ms;   /* monotonic */
};

/* A run judged by a thread of ours. */
struct row {
	struct vmrund *d;
	struct vmrund_active *x;
	struct judge0_job *job;
	struct run_spec rq;
	const struct runtime *rt;
	struct run_effective e;
	struct proto_request pr;    /* its stages */
	char store[RUNTIME_STORE_MAX];
	int64_t timeout_ms[PROTO_MAX_STAGES];
	struct run_result r;
	char dir[PATH_MAX];
};

/* A proto stage's limits as a sandbox command's "limits" (NULL: none). */
static json_t *limits_of(const struct proto_stage *ps)
{
	json_t *o = json_object();
	if (ps->memory_kib)
		json_object_set_new(o, "memory_mib", json_integer((json_int_t)((ps->memory_kib + 1023) / 1024)));
	if (ps->cpu_ms)
		json_object_set_new(o, "cpu_time_ms", json_integer((json_int_t)ps->cpu_ms));
	return o;
}

static json_t *argv_of(const struct proto_stage *ps)
{
	json_t *a = json_array();
	for (unsigned i = 0; a && i < ps->argc; i++)
		json_array_append_new(a, json_string(ps->argv[i]));
	return a;
}

/* Stage i of w run in sandbox id with stdin: its answer, or NULL with
 * u->err; its wall time into *ms. */
static json_t *command(struct row *w, struct sbx_user *u, const char *id, unsigned i, const char *in, size_t n,
		       int64_t *ms)
{
	const struct proto_stage *ps = &w->pr.stage[i];
	json_t *limits = limits_of(ps);
	int64_t t0 = clock_mono_ms();
	json_t *cmd = sbxu_command(u, id, argv_of(ps), in, n, (double)w->timeout_ms[i] / 1000, limits);
	*ms = clock_mono_ms() - t0;
	json_decref(limits);
	return cmd;
}

/* w's program compiled into its job's sandbox and checkpointed: the
 * job's next state (READY, FAILED: it does not compile, BROKEN: no
 * sandbox could be had), the compile's answer into the job. */
static enum job_state compile(struct row *w, struct sbx_user *u)
{
	struct judge0_job *job = w->job;
	json_t *limits = json_pack("{sI sI}", "memory_mib", (json_int_t)w->e.memory_mib, "max_output",
				   (json_int_t)w->e.max_output);
	/* named for what it is in the tenant's listing; one a vmrund that
	 * stopped left ends with its life */
	if (sbxu_create(u, json_pack("{ss so si s{ss}}", "runtime", w->rq.runtime, "limits", limits, "timeout_s",
				     JUDGE0_BATCH_LIFE_S, "metadata", "vmrun", "judge0 batch compile"),
			job->base)) {
		job->base[0] = '\0';
		return JOB_BROKEN;
	}
	for (unsigned i = 0; i < w->rq.nfiles; i++)
		if (sbxu_put_file(u, job->base, w->rq.files[i].name, w->rq.files[i].data, w->rq.files[i].len))
			return JOB_BROKEN;
	if (!(job->compile = command(w, u, job->base, 0, "", 0, &job->compile_ms)))
		return JOB_BROKEN;
	const json_t *code = json_object_get(job->compile, "exit_code");
	if (!json_is_integer(code) || json_integer_value(code) != 0)
		return JOB_FAILED;
	json_t *cp = json_pack("{ss}", "name", CHECKPOINT);
	json_t *made = sbxu_expect(u, job->base, "POST", "/checkpoints", cp, 120000, 201);
	json_decref(cp);
	json_decref(made);
	return made ? JOB_READY : JOB_BROKEN;
}

/* The job's program, compiled by the first of its runs to come while
 * the others wait: its state once it is no longer being compiled. */
static enum job_state job_ready(struct row *w, struct sbx_user *u)
{
	struct vmrund *d = w->d;
	struct judge0_job *job = w->job;
	pthread_mutex_lock(&d->lock);
	while (job->state == JOB_COMPILING)
		pthread_cond_wait(&d->changed, &d->lock);
	enum job_state st = job->state;
	if (st == JOB_NEW)
		job->state = JOB_COMPILING;
	pthread_mutex_unlock(&d->lock);
	if (st != JOB_NEW)
		return st;
	st = compile(w, u);
	if (st == JOB_BROKEN)
		vmrund_say("judge0 batch %.12s: compiled in a worker for each run instead: %s", job->key, u->err);
	pthread_mutex_lock(&d->lock);
	job->state = st;
	pthread_cond_broadcast(&d->changed);
	pthread_mutex_unlock(&d->lock);
	return st;
}

/* The store's word that w's command may start (the gate a worker asks):
 * 1 it may, 0 it may not (a cancel, or this node no longer holds the
 * run), -1 the store stayed away (a worker, which waits at its gate until
 * the run's deadline, is to make it). */
static int gate(struct row *w)
{
	struct vmrund *d = w->d;
	char err[300];
	for (int i = 0; i < GATE_TRIES; i++) {
		pthread_mutex_lock(&d->lock);
		int ok = w->x->cancel ? 0 : d->store->ops->command(d->store, w->x->id, d->node, clock_wall_ms(), err,
								    sizeof(err));
		if (ok < 0)
			vmrund_store_failed(d, "letting a command start", err);
		pthread_mutex_unlock(&d->lock);
		if (ok >= 0)
			return ok == 1;
		usleep(500 * 1000);
	}
	return -1;
}

/* w's result written where a worker writes it: 0, or -1. */
static int write_result(struct row *w)
{
	char tmp[PATH_MAX + 16], path[PATH_MAX + 16];
	snprintf(tmp, sizeof(tmp), "%s/" SPOOL_RESULT ".tmp", w->dir);
	snprintf(path, sizeof(path), "%s/" SPOOL_RESULT, w->dir);
	FILE *f = fopen(tmp, "we");
	if (!f)
		return -1;
	result_print_json(f, &w->r);
	if (fclose(f) || rename(tmp, path) < 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* The run of w from its job's compiled program: 1 with its result
 * written (or nothing to write: the gate said no), 0 when a worker must
 * make it instead. */
static int judge(struct row *w)
{
	struct sbx_user u = { .d = w->d, .tenant = w->job->tenant };
	struct run_result *r = &w->r;
	json_t *cmd = NULL;
	char fork[SCHED_ID_MAX] = "";
	int64_t ms = 0;
	enum job_state st = job_ready(w, &u);
	if (st == JOB_BROKEN)
		return 0;
	if (st == JOB_READY) {
		char from[SCHED_ID_MAX + 16];
		snprintf(from, sizeof(from), "%s/" CHECKPOINT, w->job->base);
		double life = (double)w->timeout_ms[w->pr.nstages - 1] / 1000 + FORK_SPARE_S;
		if (sbxu_create(&u, json_pack("{ss sf}", "from_checkpoint", from, "timeout_s", life), fork))
			return 0;
		int may = gate(w);
		if (may <= 0) {
			if (!may) {
				pthread_mutex_lock(&w->d->lock);
				w->x->refused = true;   /* recorded as a worker's refused run: nothing started */
				pthread_mutex_unlock(&w->d->lock);
			}
			sbxu_destroy(&u, fork);
			return !may;
		}
		const char *in = w->rq.stdin_data ? (const char *)w->rq.stdin_data : "";
		cmd = command(w, &u, fork, w->pr.nstages - 1, in, w->rq.stdin_len, &ms);
		sbxu_destroy(&u, fork);
	}
	snprintf(r->run_id, sizeof(r->run_id), "%s", w->x->id);
	snprintf(r->runtime, sizeof(r->runtime), "%s", w->rt->name);
	snprintf(r->runtime_version, sizeof(r->runtime_version), "%s", w->rt->version);
	r->restored = true;
	judge0_batch_stage(&r->stage[0], w->job->compile, &w->pr.stage[0], w->timeout_ms[0], w->job->compile_ms);
	if (st == JOB_READY)
		judge0_batch_stage(&r->stage[1], cmd, &w->pr.stage[1], w->timeout_ms[1], ms);
	if (st == JOB_READY && !cmd)
		result_message(r, "the test's sandbox: %s", u.err);
	judge0_batch_term(r);
	if (st == JOB_READY && !cmd)
		r->term = TERM_VM_FAILED;
	r->run = r->total = ms;
	r->limits.timeout_s = w->e.timeout_s;
	r->limits.memory_mib = w->e.memory_mib;
	r->limits.max_output = w->e.max_output;
	int rc = write_result(w);
	json_decref(cmd);
	if (rc)
		vmrund_say("run %s: its result: %s", w->x->id, strerror(errno));
	return 1;
}

static void row_free(struct row *w)
{
	run_spec_free(&w->rq);
	free(w);
}

static void *row_main(void *arg)
{
	struct row *w = arg;
	struct vmrund *d = w->d;
	struct vmrund_active *x = w->x;
	struct judge0_job *job = w->job;
	int done = judge(w);
	row_free(w);
	pthread_mutex_lock(&d->lock);
	if (--job->users == 0)
		job->idle_ms = clock_mono_ms();
	job->done++;
	if (done || x->cancel) {
		x->pid = 0;   /* reaped: loop.c records it from its directory */
		x->status = 0;
	} else {
		/* started by the loop's thread: a worker dies with the thread
		 * that forked it (PR_SET_PDEATHSIG), and this one ends now */
		x->need_worker = true;
	}
	d->j0_threads--;
	pthread_cond_broadcast(&d->changed);
	/* under the lock: once the loop sees the slot reaped, vmrund may end
	 * and free d; this thread touches nothing of it after */
	vmrund_wake(d);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* The job of key for tenant, of a batch of n: one being made or kept
 * young enough to join, else a new one. NULL when out of memory. Lock
 * held. */
static struct judge0_job *job_of(struct vmrund *d, const char *key, unsigned tenant, unsigned n)
{
	int64_t now = clock_mono_ms();
	for (struct judge0_job *j = d->j0_jobs; j; j = j->next)
		if (!strcmp(j->key, key) && j->state != JOB_BROKEN && now - j->made_ms < JUDGE0_BATCH_JOIN_S * 1000LL) {
			j->batch = n > j->batch ? n : j->batch;
			return j;
		}
	struct judge0_job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	snprintf(j->key, sizeof(j->key), "%s", key);
	j->tenant = tenant;
	j->batch = n;
	j->made_ms = now;
	j->next = d->j0_jobs;
	d->j0_jobs = j;
	return j;
}

/* w's stages as the worker would make them: 0, or -1 (the worker will
 * say why). */
static int stages_of(struct vmrund *d, struct row *w, const struct store_run *run)
{
	char err[300];
	const char *names[RUN_SPEC_MAX_FILES];
	if (run_spec_from_text(run->request, strlen(run->request), &w->rq, err, sizeof(err)) ||
	    !(w->rt = runtime_pick(d->rts, d->nrts, w->rq.runtime)))
		return -1;
	run_spec_effective(&w->rq, w->rt, &w->e);
	for (unsigned i = 0; i < w->rq.nfiles; i++)
		names[i] = w->rq.files[i].name;
	struct run_stages st = { .proto = &w->pr, .store = w->store, .storelen = sizeof(w->store) };
	if (run_stages_build(&st, &w->rq, &w->e, w->rt, names, w->rq.nfiles, &w->r, err, sizeof(err)))
		return -1;
	memcpy(w->timeout_ms, st.stage_timeout_ms, sizeof(w->timeout_ms));
	return 0;
}

/* How many of its batch share the run's program (its mark). */
static json_int_t batch_count(const json_t *request)
{
	json_int_t n = json_integer_value(json_object_get(json_object_get(json_object_get(request, "client"), "judge0"),
							 "batch"));
	return n > 0 && n <= UINT32_MAX ? n : 1;
}

bool judge0_batch_take(struct vmrund *d, struct vmrund_active *x, const struct store_run *run)
{
	/* most runs are no batch's: told without parsing them */
	if (!strstr(run->request, "\"judge0\":") || !strstr(run->request, "\"batch\":"))
		return false;
	int tenant = tenants_by_name(&d->ts, run->tenant);
	json_t *request = json_loads(run->request, 0, NULL);
	struct row *w = calloc(1, sizeof(*w));
	char key[JUDGE0_BATCH_KEY_LEN + 1], why[64];
	bool taken = false;
	/* a compiled sandbox and a fork at least, under the tenant's ceiling */
	if (tenant < 0 || d->ts.t[tenant].sandboxes < 2 || !request || !w || stages_of(d, w, run) ||
	    !judge0_batch_eligible(&w->rq, request, w->pr.nstages > 1, why, sizeof(why)) ||
	    judge0_batch_key(request, run->tenant, key) ||
	    !(w->job = job_of(d, key, (unsigned)tenant, (unsigned)batch_count(request))))
		goto out;
	w->d = d;
	w->x = x;
	vmrund_run_path(d, x->id, NULL, w->dir, sizeof(w->dir));
	pthread_attr_t attr;
	pthread_t th;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	w->job->users++;
	d->j0_threads++;
	x->pid = -1;   /* no process: vmrund_stop marks it cancelled, reap_all waits for the thread */
	taken = !pthread_create(&th, &attr, row_main, w);
	pthread_attr_destroy(&attr);
	if (!taken) {
		w->job->users--;
		d->j0_threads--;
	}
out:
	if (!taken && w)
		row_free(w);
	json_decref(request);
	return taken;
}

void judge0_batch_sweep(struct vmrund *d, bool all)
{
	struct judge0_job *gone = NULL;
	int64_t now = clock_mono_ms();
	pthread_mutex_lock(&d->lock);
	/* at the end, every thread first: vmrund is freed after this */
	while (all && d->j0_threads)
		pthread_cond_wait(&d->changed, &d->lock);
	for (struct judge0_job **p = &d->j0_jobs; *p;) {
		struct judge0_job *j = *p;
		/* its batch's runs all made here: its VM's memory is not held
		 * for runs that will not come */
		if (j->users == 0 && j->state != JOB_COMPILING &&
		    (all || j->state == JOB_BROKEN || j->done >= j->batch || now - j->idle_ms >= JUDGE0_BATCH_LINGER_MS)) {
			*p = j->next;
			j->next = gone;
			gone = j;
		} else {
			p = &j->next;
		}
	}
	pthread_mutex_unlock(&d->lock);
	while (gone) {
		struct judge0_job *j = gone;
		gone = j->next;
		struct sbx_user u = { .d = d, .tenant = j->tenant };
		if (j->base[0])
			sbxu_destroy(&u, j->base);
		json_decref(j->compile);
		free(j);
	}
}
