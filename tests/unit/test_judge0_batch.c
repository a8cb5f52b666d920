/* A Judge0 batch judged from one compile, the pure part
 * (host/vmrund/judge0_batch.c): the key a batch's submissions share,
 * which may take the shared compile, the marking of a batch, and the
 * result written from a sandbox command's answer. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "judge0_batch.h"
#include "proto.h"

/* A Judge0-made source-mode request: the program, its limits, and the
 * per-test fields given. */
static json_t *request(const char *src, const char *in, const char *expected, const char *callback)
{
	json_t *j0 = json_pack("{si}", "language_id", 50);
	if (expected)
		json_object_set_new(j0, "expected_output", json_string(expected));
	if (callback)
		json_object_set_new(j0, "callback_url", json_string(callback));
	json_t *rq = json_pack("{ss s[{ss ss}] s{sf sI} so}", "runtime", "c", "files", "name", "main.c", "content", src,
			       "run", "timeout_s", 5.0, "cpu_time_ms", (json_int_t)1500, "client",
			       json_pack("{so}", "judge0", j0));
	if (in)
		json_object_set_new(rq, "stdin", json_string(in));
	return rq;
}

static void key_shared(void **state)
{
	(void)state;
	char a[JUDGE0_BATCH_KEY_LEN + 1], b[JUDGE0_BATCH_KEY_LEN + 1];
	json_t *r1 = request("int main(){}", "1", "x", NULL), *r2 = request("int main(){}", "2", "y", "http://h/");
	assert_int_equal(judge0_batch_key(r1, "t", a), 0);
	assert_int_equal(judge0_batch_key(r2, "t", b), 0);
	assert_int_equal(strlen(a), JUDGE0_BATCH_KEY_LEN);
	assert_string_equal(a, b);   /* stdin, expected output and callback are each test's own */
	assert_int_equal(judge0_batch_key(r2, "u", b), 0);
	assert_string_not_equal(a, b);   /* another tenant's is another program */
	json_t *r3 = request("int main(){return 1;}", "1", "x", NULL);
	assert_int_equal(judge0_batch_key(r3, "t", b), 0);
	assert_string_not_equal(a, b);
	/* a limit is part of what is shared */
	json_object_set_new(json_object_get(r1, "run"), "cpu_time_ms", json_integer(2500));
	assert_int_equal(judge0_batch_key(r1, "t", b), 0);
	assert_string_not_equal(a, b);
	json_decref(r1);
	json_decref(r2);
	json_decref(r3);
}

/* rq parsed from req, with client.judge0.batch set to batch (0: none). */
static void parsed(json_t *req, long batch, struct run_spec *rq)
{
	char err[200];
	if (batch)
		json_object_set_new(json_object_get(json_object_get(req, "client"), "judge0"), "batch",
				    json_integer(batch));
	if (run_spec_from_json(req, rq, err, sizeof(err)))
		fail_msg("%s", err);
}

static void eligible(void **state)
{
	(void)state;
	char why[64];
	struct run_spec rq;
	json_t *req = request("int main(){}", "in", NULL, NULL);
	parsed(req, 0, &rq);
	assert_false(judge0_batch_eligible(&rq, req, true, why, sizeof(why)));
	assert_string_equal(why, "not one of a batch's sharing a program");
	run_spec_free(&rq);
	parsed(req, 3, &rq);
	assert_true(judge0_batch_eligible(&rq, req, true, why, sizeof(why)));
	assert_false(judge0_batch_eligible(&rq, req, false, why, sizeof(why)));
	assert_string_equal(why, "no compile stage");
	run_spec_free(&rq);
	/* what a fork's command would do otherwise than a run does */
	json_object_set_new(req, "repeat", json_integer(3));
	parsed(req, 3, &rq);
	assert_false(judge0_batch_eligible(&rq, req, true, why, sizeof(why)));
	assert_string_equal(why, "more than one run");
	run_spec_free(&rq);
	json_object_del(req, "repeat");
	json_object_set_new(req, "stdin", json_string("AA=="));
	json_object_set_new(req, "stdin_encoding", json_string("base64"));
	parsed(req, 3, &rq);
	assert_false(judge0_batch_eligible(&rq, req, true, why, sizeof(why)));
	assert_string_equal(why, "stdin that is not text");
	run_spec_free(&rq);
	json_object_set_new(req, "stdin", json_string("x"));
	json_object_del(req, "stdin_encoding");
	json_object_set_new(json_object_get(json_object_get(req, "client"), "judge0"), "redirect_stderr_to_stdout",
			    json_true());
	parsed(req, 3, &rq);
	assert_false(judge0_batch_eligible(&rq, req, true, why, sizeof(why)));
	assert_string_equal(why, "stderr merged into stdout");
	run_spec_free(&rq);
	json_object_del(req, "client");
	parsed(req, 0, &rq);
	assert_false(judge0_batch_eligible(&rq, req, true, why, sizeof(why)));
	assert_string_equal(why, "not a Judge0 submission");
	run_spec_free(&rq);
	json_decref(req);
}

static long batch_of(const struct run_spec *rq)
{
	return (long)json_integer_value(json_object_get(json_object_get(rq->client, "judge0"), "batch"));
}

static void mark(void **state)
{
	(void)state;
	struct run_spec rq[4];
	json_t *req[4] = { request("A", "1", "x", NULL), request("B", "1", NULL, NULL), request("A", "2", "y", NULL),
			   request("A", "3", NULL, NULL) };
	for (int i = 0; i < 4; i++)
		parsed(req[i], 0, &rq[i]);
	struct run_spec *ok[4] = { &rq[0], &rq[1], &rq[2], NULL };   /* the last was refused */
	assert_int_equal(judge0_batch_mark(ok, 4, "t"), 0);
	assert_int_equal(batch_of(&rq[0]), 2);
	assert_int_equal(batch_of(&rq[1]), 0);   /* alone with its program */
	assert_int_equal(batch_of(&rq[2]), 2);
	assert_int_equal(batch_of(&rq[3]), 0);
	for (int i = 0; i < 4; i++) {
		run_spec_free(&rq[i]);
		json_decref(req[i]);
	}
}

static void stages(void **state)
{
	(void)state;
	struct proto_stage ps = { .cpu_ms = 1500, .memory_kib = 65536 };
	struct run_stage s;
	json_t *cmd = json_pack("{sn si sb ss ss sb sb s{sI sI}}", "exit_code", "signal", SIGXCPU, "timed_out", 0,
				"stdout", "partial", "stderr", "", "cpu_time_exceeded", 1, "oom_killed", 0, "usage",
				"cpu_ms", (json_int_t)2010, "max_rss_kib", (json_int_t)1400);
	judge0_batch_stage(&s, cmd, &ps, 5000, 2300);
	assert_true(s.started);
	assert_int_equal(s.term, TERM_SIGNALED);
	assert_int_equal(s.signal, SIGXCPU);
	assert_true(s.cpu_exceeded);
	assert_false(s.oom_killed);
	assert_int_equal(s.cpu_ms, 2010);
	assert_int_equal(s.out.len, 7);
	assert_memory_equal(s.out.data, "partial", 7);
	assert_int_equal(s.limits.memory_mib, 64);
	assert_int_equal(s.limits.cpu_time_ms, 1500);
	assert_int_equal(s.wall_ms, 2300);
	json_decref(cmd);
	/* a command the sandbox refused, and one that never answered */
	cmd = json_pack("{sn sn sb ss}", "exit_code", "signal", "timed_out", 0, "end", "not_found");
	judge0_batch_stage(&s, cmd, &ps, 5000, 10);
	assert_int_equal(s.term, TERM_NOT_FOUND);
	json_decref(cmd);
	judge0_batch_stage(&s, NULL, &ps, 5000, 10);
	assert_int_equal(s.term, TERM_ERROR);
	assert_int_equal(s.out.len, 0);
}

static void terms(void **state)
{
	(void)state;
	struct run_result r = { .nstages = 2 };
	r.stage[0] = (struct run_stage){ .started = true, .term = TERM_EXITED, .exit_code = 0 };
	r.stage[1] = (struct run_stage){ .started = true, .term = TERM_SIGNALED, .signal = SIGSEGV };
	judge0_batch_term(&r);
	assert_int_equal(r.term, TERM_SIGNALED);
	r.stage[0].exit_code = 1;
	r.stage[1].started = false;
	judge0_batch_term(&r);
	assert_int_equal(r.term, TERM_COMPILE_ERROR);
	assert_string_equal(r.message, "the compile stage failed with status 1");
	/* a compile that ran out of time is the run's timeout, as a worker says */
	r.message[0] = '\0';
	r.stage[0].term = TERM_TIMEOUT;
	judge0_batch_term(&r);
	assert_int_equal(r.term, TERM_TIMEOUT);
	assert_string_equal(r.message, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(key_shared), cmocka_unit_test(eligible), cmocka_unit_test(mark),
		cmocka_unit_test(stages),     cmocka_unit_test(terms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
