/* How a run ended (host/run/run_classify.c), from the facts its execution
 * gathers, for every branch: exits and signals, the agent's refusals, a
 * VM that did not reset or was lost, the deadline, VM failures, a cancel
 * and a vmm that could not start, and source mode's two stages. Pure: no
 * KVM. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "run.h"

static struct run_result r;
static struct session_result sr;

static struct run_facts facts(enum session_status st)
{
	memset(&r, 0, sizeof(r));
	memset(&sr, 0, sizeof(sr));
	r.nstages = 1;
	for (unsigned i = 0; i < PROTO_MAX_STAGES; i++)
		r.stage[i].term = TERM_ERROR;   /* as run_result_init leaves them */
	return (struct run_facts){ .session = st, .sr = &sr, .timeout_s = 2.5, .vmm_pid = 77, .vmm_said = "" };
}

/* The agent's one EXIT, of the run stage. */
static void one_exit(struct proto_exit e)
{
	sr.stages = sr.exits = 1;
	sr.exit[0] = e;
}

static void classify_exited_and_signaled(void **state)
{
	(void)state;
	struct run_facts f = facts(SESSION_DONE);
	one_exit((struct proto_exit){ .kind = PROTO_END_EXITED, .code = 3, .cpu_ms = 12, .max_rss_kib = 900,
				      .flags = PROTO_EXIT_STDERR_TRUNCATED });
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_EXITED);
	assert_int_equal(r.stage[0].exit_code, 3);
	assert_int_equal(result_exit_status(&r), 3);
	assert_int_equal(r.stage[0].cpu_ms, 12);
	assert_int_equal(r.stage[0].max_rss_kib, 900);
	assert_false(r.stage[0].out_truncated);
	assert_true(r.stage[0].err_truncated);
	assert_string_equal(r.message, "");
	f = facts(SESSION_DONE);
	one_exit((struct proto_exit){ .kind = PROTO_END_SIGNALED, .signal = SIGKILL });
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_SIGNALED);
	assert_int_equal(result_exit_status(&r), 128 + SIGKILL);
}

static void classify_agent_refusals(void **state)
{
	(void)state;
	struct { uint32_t kind; int32_t code; enum termination want; int status; const char *msg; } c[] = {
		{ PROTO_END_DENIED, 0, TERM_DENIED, 126, "the agent refused the program" },
		{ PROTO_END_NOT_FOUND, 0, TERM_NOT_FOUND, 127, "no such program in the guest" },
		{ PROTO_END_ERROR, ENOEXEC, TERM_ERROR, 125, "the agent could not start the program: Exec format error" },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct run_facts f = facts(SESSION_DONE);
		one_exit((struct proto_exit){ .kind = c[i].kind, .code = c[i].code });
		run_classify(&f, &r);
		assert_int_equal(r.term, c[i].want);
		assert_int_equal(result_exit_status(&r), c[i].status);
		assert_string_equal(r.message, c[i].msg);
	}
}

static void classify_no_reset_and_lost(void **state)
{
	(void)state;
	struct run_facts f = facts(SESSION_DONE);
	one_exit((struct proto_exit){ .kind = PROTO_END_EXITED });
	f.vmm_killed = true;
	f.vmm_lost = true;
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_EXITED);   /* the command's result stands */
	assert_string_equal(r.message, "the VM did not reset after the run and was killed; vmm (pid 77) did not die "
				       "within 10000 ms of SIGKILL and was left behind");
}

static void classify_timeout(void **state)
{
	(void)state;
	struct run_facts f = facts(SESSION_TIMEOUT);
	f.vmm_killed = true;
	f.vmm_status = SIGKILL;   /* as wait reports a kill */
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_TIMEOUT);
	assert_int_equal(result_exit_status(&r), 124);
	assert_string_equal(r.message, "the run exceeded its 2.5 s limit; the VM was killed");
}

static void classify_vm_failures(void **state)
{
	(void)state;
	/* vmm exited non-zero: its last line says why */
	struct run_facts f = facts(SESSION_FAILED);
	f.vmm_status = 1 << 8;
	f.vmm_said = "vmm: KVM_CREATE_VM: Permission denied";
	snprintf(sr.error, sizeof(sr.error), "the VM exited before the agent connected");
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_VM_FAILED);
	assert_int_equal(result_exit_status(&r), 125);
	assert_string_equal(r.message, "vmm: KVM_CREATE_VM: Permission denied");
	/* killed by a signal we did not send: its seccomp filter, say */
	f = facts(SESSION_FAILED);
	f.vmm_status = SIGSYS;
	run_classify(&f, &r);
	assert_string_equal(r.message, "vmm died of SIGSYS");
	/* SIGKILL from the host's OOM killer in the run's cgroup: said so,
	 * even when the teardown killed the cgroup too (vmm was still dying
	 * when the session ended); a SIGKILL with no OOM kill counted is only
	 * a SIGKILL */
	f = facts(SESSION_FAILED);
	f.vmm_status = SIGKILL;
	f.oom_kills = 1;
	snprintf(sr.error, sizeof(sr.error), "the agent's connection ended before EXIT");
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_VM_FAILED);
	assert_string_equal(r.message, "the host's OOM killer killed vmm: the run's cgroup reached its memory limit");
	f.vmm_killed = true;
	run_classify(&f, &r);
	assert_string_equal(r.message, "the host's OOM killer killed vmm: the run's cgroup reached its memory limit");
	f.vmm_killed = false;
	f.oom_kills = 0;
	run_classify(&f, &r);
	assert_string_equal(r.message, "vmm died of SIGKILL");
	/* we killed it: the session's own reason */
	f = facts(SESSION_FAILED);
	f.vmm_status = SIGKILL;
	f.vmm_killed = true;
	snprintf(sr.error, sizeof(sr.error), "agent: mount /workspace: No such device");
	run_classify(&f, &r);
	assert_string_equal(r.message, "agent: mount /workspace: No such device");
	f = facts(SESSION_FAILED);
	run_classify(&f, &r);
	assert_string_equal(r.message, "the VM ended without a result");
}

static void classify_cancel_and_start_error(void **state)
{
	(void)state;
	struct run_facts f = facts(SESSION_CANCELLED);
	f.cancelled = true;
	f.vmm_killed = true;
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_ERROR);
	assert_true(r.cancelled);
	assert_string_equal(r.message, "cancelled; the VM was killed");
	f = facts(SESSION_FAILED);
	f.start_error = "jail: clone: Operation not permitted";
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_ERROR);
	assert_false(r.cancelled);
	assert_string_equal(r.message, "jail: clone: Operation not permitted");
}

/* Facts of a two-stage run: the compile stage's EXIT decides. */
static struct run_facts two_stage(enum session_status st, unsigned stages, unsigned exits)
{
	struct run_facts f = facts(st);
	r.nstages = 2;
	r.source = true;
	r.stage[0].limits.timeout_s = 30;
	r.stage[1].limits.timeout_s = 5;
	sr.stages = stages;
	sr.exits = exits;
	for (unsigned i = 0; i < 2; i++) {
		sr.stage_start_ms[i] = 1000 * (i + 1);
		sr.stage_end_ms[i] = 1000 * (i + 1) + 400;
	}
	f.ended_ms = 9000;
	return f;
}

static void classify_stages(void **state)
{
	(void)state;
	/* compiled, ran, exited 4 */
	struct run_facts f = two_stage(SESSION_DONE, 2, 2);
	sr.exit[0] = (struct proto_exit){ .kind = PROTO_END_EXITED, .stage = 0, .cpu_ms = 300 };
	sr.exit[1] = (struct proto_exit){ .kind = PROTO_END_EXITED, .code = 4, .stage = 1,
					  .flags = PROTO_EXIT_CPU_EXCEEDED };
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_EXITED);
	assert_int_equal(result_exit_status(&r), 4);
	assert_true(r.stage[0].started && r.stage[1].started);
	assert_int_equal(r.stage[0].cpu_ms, 300);
	assert_int_equal(r.stage[1].wall_ms, 400);
	assert_true(r.stage[1].cpu_exceeded);
	assert_ptr_equal(result_final(&r), &r.stage[1]);
	/* a compile error: the compiler's status, no run stage */
	f = two_stage(SESSION_DONE, 1, 1);
	sr.exit[0] = (struct proto_exit){ .kind = PROTO_END_EXITED, .code = 1, .flags = PROTO_EXIT_OOM_KILLED };
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_COMPILE_ERROR);
	assert_int_equal(r.stage[0].term, TERM_EXITED);
	assert_true(r.stage[0].oom_killed);
	assert_false(r.stage[1].started);
	assert_int_equal(result_exit_status(&r), 1);
	assert_string_equal(r.message, "the compile stage failed with status 1");
	assert_ptr_equal(result_final(&r), &r.stage[0]);
	/* the compiler killed by a signal */
	f = two_stage(SESSION_DONE, 1, 1);
	sr.exit[0] = (struct proto_exit){ .kind = PROTO_END_SIGNALED, .signal = SIGKILL };
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_COMPILE_ERROR);
	assert_int_equal(result_exit_status(&r), 128 + SIGKILL);
	/* the compiler not in the image: not a compile error */
	f = two_stage(SESSION_DONE, 1, 1);
	sr.exit[0] = (struct proto_exit){ .kind = PROTO_END_NOT_FOUND };
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_NOT_FOUND);
	assert_string_equal(r.message, "compile stage: no such program in the guest");
	/* the compile stage's own limit: a timeout of that stage, the run
	 * stage never started */
	f = two_stage(SESSION_TIMEOUT, 1, 0);
	sr.stage_timeout = true;
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_TIMEOUT);
	assert_int_equal(r.stage[0].term, TERM_TIMEOUT);
	assert_int_equal(r.stage[0].wall_ms, 9000 - 1000);
	assert_false(r.stage[1].started);
	assert_int_equal(result_exit_status(&r), 124);
	assert_string_equal(r.message, "the compile stage exceeded its 30 s limit; the VM was killed");
	/* the run stage's */
	f = two_stage(SESSION_TIMEOUT, 2, 1);
	sr.exit[0] = (struct proto_exit){ .kind = PROTO_END_EXITED };
	sr.stage_timeout = true;
	run_classify(&f, &r);
	assert_int_equal(r.stage[0].term, TERM_EXITED);
	assert_int_equal(r.stage[1].term, TERM_TIMEOUT);
	assert_string_equal(r.message, "the run stage exceeded its 5 s limit; the VM was killed");
	/* the VM died during the run stage */
	f = two_stage(SESSION_FAILED, 2, 1);
	sr.exit[0] = (struct proto_exit){ .kind = PROTO_END_EXITED };
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_VM_FAILED);
	assert_int_equal(r.stage[1].term, TERM_VM_FAILED);
	assert_int_equal(result_exit_status(&r), 125);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(classify_exited_and_signaled),
		cmocka_unit_test(classify_agent_refusals),
		cmocka_unit_test(classify_no_reset_and_lost),
		cmocka_unit_test(classify_timeout),
		cmocka_unit_test(classify_vm_failures),
		cmocka_unit_test(classify_cancel_and_start_error),
		cmocka_unit_test(classify_stages),
	};
	return cmocka_run_group_tests_name("run_classify", tests, NULL, NULL);
}
