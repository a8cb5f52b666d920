/* How a run ended, from the facts its execution gathered (run.h's
 * struct run_facts): each stage's termination, the run's, and its
 * message. Pure, so that every way a run can end is tested without KVM
 * (tests/unit/test_run_classify.c). */
#include "run.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

static const char *sig_name(int sig)
{
	const char *n = sigabbrev_np(sig);
	return n ? n : "?";
}

/* One stage's EXIT: how it ended, into st. Returns the message for a
 * stage that never started its program, else NULL. */
static const char *classify_exit(const struct proto_exit *e, struct run_stage *st, char *why, size_t len)
{
	st->cpu_ms = e->cpu_ms;
	st->max_rss_kib = e->max_rss_kib;
	st->out_truncated = e->flags & PROTO_EXIT_STDOUT_TRUNCATED;
	st->err_truncated = e->flags & PROTO_EXIT_STDERR_TRUNCATED;
	st->oom_killed = e->flags & PROTO_EXIT_OOM_KILLED;
	st->cpu_exceeded = e->flags & PROTO_EXIT_CPU_EXCEEDED;
	switch (e->kind) {
	case PROTO_END_EXITED: st->term = TERM_EXITED; st->exit_code = e->code; return NULL;
	case PROTO_END_SIGNALED: st->term = TERM_SIGNALED; st->signal = e->signal; return NULL;
	case PROTO_END_DENIED: st->term = TERM_DENIED; return "the agent refused the program";
	case PROTO_END_NOT_FOUND: st->term = TERM_NOT_FOUND; return "no such program in the guest";
	default:
		st->term = TERM_ERROR;
		snprintf(why, len, "the agent could not start the program: %s", strerror(e->code));
		return why;
	}
}

/* The stages the agent reported on: each one's outcome and duration. The
 * one still running when the session ended gets its duration only.
 * Returns the index of the stage the last EXIT ended, or -1. */
static int classify_stages(const struct run_facts *f, struct run_result *r)
{
	const struct session_result *sr = f->sr;
	int last = -1;
	for (unsigned i = 0; sr && i < sr->stages && i < r->nstages; i++) {
		struct run_stage *st = &r->stage[i];
		st->started = true;
		st->wall_ms = (i < sr->exits ? sr->stage_end_ms[i] : f->ended_ms) - sr->stage_start_ms[i];
		if (i < sr->exits) {
			char why[300];
			const char *msg = classify_exit(&sr->exit[i], st, why, sizeof(why));
			if (msg)
				result_message(r, "%s%s", i + 1 < r->nstages ? "compile stage: " : "", msg);
			last = (int)i;
		}
	}
	return last;
}

/* How a session that reached its end (SESSION_DONE) ended the run. */
static void classify_done(const struct run_facts *f, struct run_result *r, int last)
{
	if (last < 0) {
		r->term = TERM_VM_FAILED;
		result_message(r, "the session ended without an EXIT");
		return;
	}
	const struct run_stage *st = &r->stage[last];
	bool compile = (unsigned)last + 1 < r->nstages;
	if (compile && (st->term == TERM_EXITED || st->term == TERM_SIGNALED)) {
		r->term = TERM_COMPILE_ERROR;
		if (st->term == TERM_EXITED)
			result_message(r, "the compile stage failed with status %d", st->exit_code);
		else
			result_message(r, "the compile stage was killed by SIG%s", sigabbrev_np(st->signal) ?
				       sigabbrev_np(st->signal) : "?");
	} else {
		r->term = st->term;
	}
	if (f->vmm_killed)
		result_add_message(r, "the VM did not reset after the run and was killed");
}

void run_classify(const struct run_facts *f, struct run_result *r)
{
	const int vst = f->vmm_status;
	r->cancelled = f->cancelled;
	int last = f->start_error ? -1 : classify_stages(f, r);
	struct run_stage *fin = result_final_mut(r);
	unsigned at = (unsigned)(fin - r->stage);
	const char *which = r->nstages > 1 ? (at + 1 < r->nstages ? "the compile stage" : "the run stage") : NULL;
	if (f->cancelled) {
		r->term = TERM_ERROR;
		result_message(r, "%s", f->start_error ? f->start_error : "cancelled; the VM was killed");
	} else if (f->start_error) {
		r->term = TERM_ERROR;
		result_message(r, "%s", f->start_error);
		fin->term = r->term;
		return;
	} else if (f->session == SESSION_TIMEOUT && f->sr && f->sr->stage_timeout && which) {
		r->term = TERM_TIMEOUT;
		result_message(r, "%s exceeded its %g s limit; the VM was killed", which, fin->limits.timeout_s);
	} else if (f->session == SESSION_TIMEOUT) {
		r->term = TERM_TIMEOUT;
		result_message(r, "the run exceeded its %g s limit; the VM was killed", f->timeout_s);
	} else if (f->session == SESSION_DONE) {
		classify_done(f, r, last);
	} else {
		r->term = TERM_VM_FAILED;
		/* First: the teardown may have killed the cgroup as well, when it
		 * found vmm still dying, and the session only saw its end. */
		if (f->oom_kills)
			result_message(r, "the host's OOM killer killed vmm: the run's cgroup reached its memory limit");
		else if (WIFEXITED(vst) && WEXITSTATUS(vst) != 0 && f->vmm_said && f->vmm_said[0])
			result_message(r, "%s", f->vmm_said);
		else if (WIFSIGNALED(vst) && !f->vmm_killed)
			result_message(r, "vmm died of SIG%s", sig_name(WTERMSIG(vst)));
		else
			result_message(r, "%s", f->sr && f->sr->error[0] ? f->sr->error : "the VM ended without a result");
	}
	/* The stage the run ended in, when no EXIT of its own says how. */
	if (f->session != SESSION_DONE || last < 0)
		fin->term = r->term;
	if (f->vmm_lost)
		result_add_message(r, "vmm (pid %d) did not die within %d ms of SIGKILL and was left behind",
				   (int)f->vmm_pid, RUN_REAP_AFTER_KILL_MS);
}
