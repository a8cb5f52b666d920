/* /v1/judge's request, checkers and verdicts (host/vmrund/judge.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "judge.h"

static char err[512];

static int parse(const char *text, struct judge_request *jr)
{
	json_t *body = json_loads(text, 0, NULL);
	assert_non_null(body);
	err[0] = '\0';
	int rc = judge_parse(body, jr, err, sizeof(err));
	json_decref(body);
	return rc;
}

static void refused(const char *text, const char *want)
{
	struct judge_request jr;
	if (parse(text, &jr) != -1)
		fail_msg("accepted: %s", text);
	if (!strstr(err, want))
		fail_msg("%s: \"%s\", wanted \"%s\"", text, err, want);
	assert_int_equal(jr.ntests, 0);
	assert_null(jr.tests);
}

#define PROG "\"runtime\":\"c\",\"files\":[{\"name\":\"main.c\",\"content\":\"int main(){}\"}]"

static void requests(void **state)
{
	(void)state;
	struct judge_request jr;
	assert_int_equal(parse("{" PROG ",\"tests\":[{\"stdin\":\"1\\n\",\"expected_output\":\"2\"},{}],"
			       "\"checker\":{\"type\":\"floats\",\"epsilon\":0.001},"
			       "\"limits\":{\"timeout_s\":2.5,\"cpu_time_ms\":1000,\"memory_mib\":128},"
			       "\"stop_on_first_failure\":true}",
			       &jr),
			 0);
	assert_string_equal(jr.src.runtime, "c");
	assert_true(jr.src.source);
	assert_int_equal(jr.src.nfiles, 1);
	assert_int_equal(jr.ntests, 2);
	assert_string_equal(jr.tests[0].in, "1\n");
	assert_int_equal(jr.tests[0].expected_len, 1);
	assert_string_equal(jr.tests[1].in, "");
	assert_null(jr.tests[1].expected);
	assert_int_equal(jr.checker, JUDGE_FLOATS);
	assert_true(jr.epsilon == 0.001);
	assert_true(jr.timeout_s == 2.5);
	assert_int_equal(jr.cpu_time_ms, 1000);
	assert_int_equal(jr.memory_mib, 128);
	assert_true(jr.stop_on_first_failure);
	assert_int_equal(jr.parallel, 1);
	judge_free(&jr);
	assert_int_equal(parse("{" PROG ",\"tests\":[{}],\"parallel\":8}", &jr), 0);
	assert_int_equal(jr.parallel, 8);
	judge_free(&jr);
	refused("{" PROG ",\"tests\":[{}],\"parallel\":0}", "parallel: a whole number from 1 to 8");
	refused("{" PROG ",\"tests\":[{}],\"parallel\":9}", "parallel: a whole number from 1 to 8");
	refused("{" PROG ",\"tests\":[{}],\"parallel\":2.5}", "parallel: a whole number");
	/* the defaults */
	assert_int_equal(parse("{" PROG ",\"tests\":[{}]}", &jr), 0);
	assert_int_equal(jr.checker, JUDGE_LINES);
	assert_true(jr.timeout_s == JUDGE_DEFAULT_TIMEOUT_S);
	assert_int_equal(jr.max_output, JUDGE_DEFAULT_MAX_OUTPUT);
	judge_free(&jr);
	judge_free(&jr);

	/* a checker program: its own runtime and files */
	assert_int_equal(parse("{" PROG ",\"tests\":[{}],\"checker\":{\"type\":\"program\",\"runtime\":\"python\","
			       "\"files\":[{\"name\":\"check.py\",\"content\":\"import sys\"}]}}",
			       &jr),
			 0);
	assert_int_equal(jr.checker, JUDGE_PROGRAM);
	assert_string_equal(jr.checker_src.runtime, "python");
	assert_string_equal(jr.checker_src.files[0].name, "check.py");
	judge_free(&jr);
	refused("{" PROG ",\"tests\":[{}],\"checker\":{\"type\":\"program\"}}", "checker.runtime and files");
	refused("{" PROG ",\"tests\":[{}],\"checker\":{\"type\":\"program\",\"runtime\":\"c\","
		"\"files\":[{\"name\":\"..\",\"content\":\"\"}]}}",
		"checker.files[0].name");
	/* an interactive problem: the interactor's runtime and files */
	assert_int_equal(parse("{" PROG ",\"tests\":[{\"stdin\":\"42\"}],\"interactor\":{\"runtime\":\"python\","
			       "\"files\":[{\"name\":\"i.py\",\"content\":\"import sys\"}]}}",
			       &jr),
			 0);
	assert_true(jr.interactive);
	assert_string_equal(jr.interactor_src.runtime, "python");
	assert_string_equal(jr.interactor_src.files[0].name, "i.py");
	judge_free(&jr);
	assert_false(jr.interactive);
	refused("{" PROG ",\"tests\":[{}],\"interactor\":\"i.py\"}", "interactor: {\"runtime\"");
	refused("{" PROG ",\"tests\":[{}],\"interactor\":{\"runtime\":\"c\"}}", "interactor.runtime and files");
	refused("[]", "a JSON object");
	refused("{\"tests\":[{}]}", "runtime and files");
	refused("{" PROG "}", "tests: must be an array of 1 to 200");
	refused("{" PROG ",\"tests\":[]}", "tests: must be an array");
	refused("{" PROG ",\"tests\":[1]}", "tests[0]: must be an object");
	refused("{" PROG ",\"tests\":[{\"stdin\":1}]}", "tests[0].stdin: must be a string");
	refused("{" PROG ",\"tests\":[{\"input\":\"x\"}]}", "tests[0]: unknown field \"input\"");
	refused("{" PROG ",\"tests\":[{}],\"checker\":{\"type\":\"regex\"}}", "checker.type: exact, lines");
	refused("{" PROG ",\"tests\":[{}],\"checker\":{\"type\":\"floats\",\"epsilon\":2}}", "checker.epsilon");
	refused("{" PROG ",\"tests\":[{}],\"limits\":{\"timeout_s\":0}}", "limits.timeout_s");
	refused("{" PROG ",\"tests\":[{}],\"limits\":{\"timeout_s\":61}}", "limits.timeout_s");
	refused("{" PROG ",\"tests\":[{}],\"limits\":{\"cpu_time_ms\":1.5}}", "limits.cpu_time_ms: a whole number");
	refused("{" PROG ",\"tests\":[{}],\"limits\":{\"wall\":1}}", "limits: unknown field \"wall\"");
	refused("{" PROG ",\"tests\":[{}],\"stop_on_first_failure\":1}", "stop_on_first_failure");
	refused("{" PROG ",\"tests\":[{}],\"extra\":1}", "unknown field \"extra\"");
	refused("{\"runtime\":\"c\",\"files\":[{\"name\":\"../x.c\",\"content\":\"\"}],\"tests\":[{}]}", "must not contain '/'");
	/* 201 tests */
	char *big = malloc(201 * 3 + 200);
	int o = sprintf(big, "{" PROG ",\"tests\":[");
	for (int i = 0; i < 201; i++)
		o += sprintf(big + o, "%s{}", i ? "," : "");
	sprintf(big + o, "]}");
	refused(big, "tests: at most 200");
	free(big);
}

static void checkers(void **state)
{
	(void)state;
	assert_true(judge_check(JUDGE_EXACT, 0, "a\n", 2, "a\n", 2));
	assert_false(judge_check(JUDGE_EXACT, 0, "a\n", 2, "a", 1));
	assert_true(judge_check(JUDGE_LINES, 0, "a\nb", 3, "a  \nb\n\n", 6));
	assert_false(judge_check(JUDGE_LINES, 0, "a b", 3, "a  b", 4));
	assert_true(judge_check(JUDGE_LINES, 0, "", 0, "", 0));
	assert_true(judge_check(JUDGE_TOKENS, 0, "1 2\n3", 5, "  1\t2 3\n", 8));
	assert_false(judge_check(JUDGE_TOKENS, 0, "1 2 3", 5, "1 2", 3));
	assert_false(judge_check(JUDGE_TOKENS, 0, "1 2", 3, "1 2 3", 5));
	assert_true(judge_check(JUDGE_FLOATS, 1e-6, "0.3333333 x", 11, "0.33333331 x", 12));
	assert_false(judge_check(JUDGE_FLOATS, 1e-6, "0.333", 5, "0.334", 5));
	/* relative for large numbers */
	assert_true(judge_check(JUDGE_FLOATS, 1e-6, "1000000000", 10, "1000000100", 10));
	assert_false(judge_check(JUDGE_FLOATS, 1e-6, "nan", 3, "nan 1", 5));
	assert_false(judge_check(JUDGE_FLOATS, 1e-6, "1.0", 3, "abc", 3));
}

static enum judge_verdict verdict_of(const char *cmd, const char *expected, char *why)
{
	struct judge_request jr = { .timeout_s = 2, .cpu_time_ms = 1000, .max_output = 100, .checker = JUDGE_LINES };
	struct judge_test t = { .in = "", .expected = (char *)expected, .expected_len = expected ? strlen(expected) : 0 };
	json_t *c = json_loads(cmd, 0, NULL);
	assert_non_null(c);
	enum judge_verdict v = judge_test_verdict(&jr, &t, c, why, 300);
	json_decref(c);
	return v;
}

static void verdicts(void **state)
{
	(void)state;
	char why[300];
	assert_int_equal(verdict_of("{\"exit_code\":0,\"stdout\":\"3\\n\",\"usage\":{\"cpu_ms\":5}}", "3", why),
			 JV_ACCEPTED);
	assert_int_equal(verdict_of("{\"exit_code\":0,\"stdout\":\"4\\n\"}", "3", why), JV_WRONG_ANSWER);
	assert_int_equal(verdict_of("{\"exit_code\":0,\"stdout\":\"\"}", NULL, why), JV_ACCEPTED);
	assert_int_equal(verdict_of("{\"exit_code\":null,\"signal\":9,\"timed_out\":true}", "3", why), JV_TIME_LIMIT);
	assert_string_equal(why, "wall clock: past 2 s");
	assert_int_equal(verdict_of("{\"exit_code\":0,\"usage\":{\"cpu_ms\":1240}}", "3", why), JV_TIME_LIMIT);
	assert_string_equal(why, "CPU time: 1240 ms, over the limit of 1000 ms");
	assert_int_equal(verdict_of("{\"exit_code\":0,\"stdout_truncated\":true}", "3", why), JV_OUTPUT_LIMIT);
	assert_int_equal(verdict_of("{\"exit_code\":null,\"signal\":11}", "3", why), JV_RUNTIME_ERROR);
	assert_string_equal(why, "signal 11 (SIGSEGV)");
	assert_int_equal(verdict_of("{\"exit_code\":null,\"signal\":9}", "3", why), JV_MEMORY_LIMIT);
	assert_int_equal(verdict_of("{\"exit_code\":3}", "3", why), JV_RUNTIME_ERROR);
	assert_string_equal(why, "exit status 3");
	assert_int_equal(verdict_of("{\"end\":\"denied\",\"exit_code\":null}", "3", why), JV_INTERNAL_ERROR);
	assert_string_equal(why, "the command did not run to an end: denied");
	assert_string_equal(judge_verdict_name(JV_SKIPPED), "skipped");
	/* a checker program's part: the run was fine, it decides */
	struct judge_request jr = { .timeout_s = 2, .checker = JUDGE_PROGRAM };
	struct judge_test t = { .in = "" };
	json_t *c = json_loads("{\"exit_code\":0,\"stdout\":\"x\"}", 0, NULL);
	assert_int_equal(judge_test_verdict(&jr, &t, c, why, sizeof(why)), JV_CHECK);
	json_decref(c);
	const struct {
		const char *cmd;
		enum judge_verdict v;
		const char *why;
	} checks[] = {
		{ "{\"exit_code\":0,\"stderr\":\"ok 3 numbers\\nmore\"}", JV_ACCEPTED, "checker: ok 3 numbers" },
		{ "{\"exit_code\":1,\"stderr\":\"wrong answer 2nd differs\"}", JV_WRONG_ANSWER,
		  "checker: wrong answer 2nd differs" },
		{ "{\"exit_code\":2,\"stderr\":\"\"}", JV_WRONG_ANSWER, "" },
		{ "{\"exit_code\":3,\"stderr\":\"FAIL bad answer file\"}", JV_INTERNAL_ERROR,
		  "the checker failed (exit status 3): FAIL bad answer file" },
		{ "{\"exit_code\":null,\"signal\":11}", JV_INTERNAL_ERROR, "the checker did not exit: signal 11" },
		{ "{\"exit_code\":null,\"timed_out\":true}", JV_INTERNAL_ERROR, "the checker ran past 10 s" },
	};
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		c = json_loads(checks[i].cmd, 0, NULL);
		assert_non_null(c);
		assert_int_equal(judge_checker_verdict(c, why, sizeof(why)), checks[i].v);
		assert_string_equal(why, checks[i].why);
		json_decref(c);
	}
	assert_string_equal(judge_verdict_name((enum judge_verdict)99), "internal_error");
}

/* One interactive test's verdict from both programs' ends. */
static enum judge_verdict talk(const struct judge_request *jr, const struct judge_test *t, const char *contestant,
			       const char *interactor, char *why, size_t cap)
{
	json_t *c = json_loads(contestant, 0, NULL), *i = json_loads(interactor, 0, NULL);
	assert_non_null(c);
	assert_non_null(i);
	enum judge_verdict v = judge_interactive_verdict(jr, t, c, i, why, cap);
	json_decref(c);
	json_decref(i);
	return v;
}

static void interactive(void **state)
{
	(void)state;
	char why[256];
	struct judge_request jr = { .timeout_s = 2, .cpu_time_ms = 500, .checker = JUDGE_LINES, .interactive = true };
	struct judge_test t = { .in = "7" }, te = { .in = "7", .expected = "7\n", .expected_len = 2 };
	const char *fine = "{\"exit_code\":0}", *ok = "{\"exit_code\":0,\"stderr\":\"ok found\"}",
		   *wa = "{\"exit_code\":1,\"stderr\":\"wrong answer: too many\\nmore\"}";
	const struct {
		const char *c, *i;
		const struct judge_test *t;
		enum judge_verdict v;
		const char *why;
	} cases[] = {
		{ fine, ok, &t, JV_ACCEPTED, "interactor: ok found" },
		/* an output file expected: a checker has the last word */
		{ fine, ok, &te, JV_CHECK, "interactor: ok found" },
		{ fine, wa, &t, JV_WRONG_ANSWER, "interactor: wrong answer: too many" },
		{ fine, "{\"exit_code\":2}", &t, JV_WRONG_ANSWER, "the interactor: wrong answer" },
		/* the interactor's wrong answer before the contestant's crash
		 * that followed it ... */
		{ "{\"exit_code\":null,\"signal\":11}", wa, &t, JV_WRONG_ANSWER, "interactor: wrong answer: too many" },
		{ "{\"exit_code\":3}", ok, &t, JV_RUNTIME_ERROR, "exit status 3" },
		/* ... but after the contestant's limits */
		{ "{\"exit_code\":null,\"timed_out\":true}", wa, &t, JV_TIME_LIMIT, "wall clock: past 2 s" },
		{ "{\"exit_code\":0,\"usage\":{\"cpu_ms\":900}}", wa, &t, JV_TIME_LIMIT,
		  "CPU time: 900 ms, over the limit of 500 ms" },
		{ "{\"exit_code\":null,\"signal\":9}", ok, &t, JV_MEMORY_LIMIT, "signal 9 (SIGKILL): out of memory" },
		/* an interactor that failed makes every verdict untrustworthy */
		{ "{\"exit_code\":null,\"timed_out\":true}", "{\"exit_code\":null,\"timed_out\":true}", &t,
		  JV_INTERNAL_ERROR, "the interactor ran past 4 s" },
		{ fine, "{\"exit_code\":3,\"stderr\":\"FAIL secret\"}", &t, JV_INTERNAL_ERROR,
		  "the interactor failed (exit status 3): FAIL secret" },
		{ fine, "{\"exit_code\":null,\"signal\":6}", &t, JV_INTERNAL_ERROR,
		  "the interactor did not exit: signal 6" },
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		enum judge_verdict v = talk(&jr, cases[k].t, cases[k].c, cases[k].i, why, sizeof(why));
		if (v != cases[k].v || strcmp(why, cases[k].why))
			fail_msg("case %zu: %s \"%s\", wanted %s \"%s\"", k, judge_verdict_name(v), why,
				 judge_verdict_name(cases[k].v), cases[k].why);
	}
	/* a checker program judges the interactor's output file */
	jr.checker = JUDGE_PROGRAM;
	assert_int_equal(talk(&jr, &t, fine, ok, why, sizeof(why)), JV_CHECK);
	/* the output file under a text checker */
	jr.checker = JUDGE_TOKENS;
	assert_int_equal(judge_output_verdict(&jr, &te, " 7 ", 3, why, sizeof(why)), JV_ACCEPTED);
	assert_int_equal(judge_output_verdict(&jr, &te, "8", 1, why, sizeof(why)), JV_WRONG_ANSWER);
	assert_string_equal(why, "the output differs from the expected");
	assert_int_equal(judge_output_verdict(&jr, &t, "anything", 8, why, sizeof(why)), JV_ACCEPTED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(requests),
		cmocka_unit_test(checkers),
		cmocka_unit_test(verdicts),
		cmocka_unit_test(interactive),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
