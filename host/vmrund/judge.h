/* Problems judged from one compile (POST /v1/judge, docs/judge.md): the
 * request, the checkers and each test's verdict. Pure: no I/O, no
 * globals; judge_run.c drives the sandboxes (one compiled and
 * checkpointed, a fork of that checkpoint per test).
 *
 * Body:
 *   {"runtime": "c",
 *    "files": [{"name": "main.c", "content": "...", "encoding": ...}],
 *    "tests": [{"stdin": "1 2\n", "expected_output": "3\n"}, ...],
 *    "checker": {"type": "exact" | "lines" | "tokens" | "floats",
 *                "epsilon": 1e-6},                 default "lines"
 *             | {"type": "program", "runtime": "c++", "files": [...]}
 *                                   the problem setter's checker, testlib's
 *                                   convention, in a VM of its own
 *    "interactor": {"runtime": "c++", "files": [...]}   an interactive
 *                                   problem: the program talking to the
 *                                   contestant's, through the host; each
 *                                   test's stdin is its input file
 *    "limits": {"timeout_s": 2, "cpu_time_ms": 1000,   each test's
 *               "memory_mib": 256, "max_output": 65536},
 *    "stop_on_first_failure": false,
 *    "parallel": 1}                  tests at once, each in its own fork */
#ifndef VMRUND_JUDGE_H
#define VMRUND_JUDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "run_spec.h"

#define JUDGE_TESTS_MAX 200
#define JUDGE_TEXT_MAX (1u << 20)          /* a test's stdin or expected output, bytes */
#define JUDGE_DEFAULT_TIMEOUT_S 5
#define JUDGE_MAX_TIMEOUT_S 60
#define JUDGE_DEFAULT_MAX_OUTPUT (1u << 20)
#define JUDGE_PARALLEL_MAX 8
#define JUDGE_CHECKER_TIMEOUT_S 10         /* a checker program's wall clock, each test */
#define JUDGE_INTERACTOR_GRACE_S 2         /* an interactor's wall clock past the contestant's: time to judge its end */

enum judge_checker {
	JUDGE_EXACT,    /* byte for byte */
	JUDGE_LINES,    /* Judge0's: each line right-stripped, then the whole */
	JUDGE_TOKENS,   /* the same words, white space of any kind and amount between them */
	JUDGE_FLOATS,   /* tokens, numbers equal within epsilon (absolute or relative) */
	JUDGE_PROGRAM,  /* a checker program: "input output answer" files, the verdict by its exit status */
};

struct judge_test {
	char *in;                     /* stdin (malloc'd, NUL-terminated) */
	size_t in_len;
	char *expected;               /* NULL: none (the test passes when the program succeeds) */
	size_t expected_len;
};

struct judge_request {
	struct run_spec src;          /* runtime and files (source mode): the program */
	struct judge_test *tests;
	unsigned ntests;
	enum judge_checker checker;
	double epsilon;
	struct run_spec checker_src;  /* JUDGE_PROGRAM: its runtime and files */
	bool interactive;             /* an interactor talks to the program */
	struct run_spec interactor_src;
	double timeout_s;             /* each test's wall clock */
	uint64_t cpu_time_ms;         /* each test's CPU time; 0: none but the wall clock */
	uint64_t memory_mib;          /* the VMs'; 0: the runtime's */
	uint64_t max_output;          /* bytes of each stream */
	bool stop_on_first_failure;
	unsigned parallel;            /* tests at once, 1..JUDGE_PARALLEL_MAX (the tenant's sandboxes may allow fewer) */
};

/* Parse body into jr (zeroed first): 0, or -1 with a one-line reason for
 * the client ("tests[3].stdin: must be a string") and jr empty. */
int judge_parse(const json_t *body, struct judge_request *jr, char *err, size_t errlen);

/* Free what jr holds; safe on a zeroed or failed one. */
void judge_free(struct judge_request *jr);

/* Whether actual passes for expected under checker c (epsilon for
 * JUDGE_FLOATS). */
bool judge_check(enum judge_checker c, double epsilon, const char *expected, size_t elen, const char *actual,
		 size_t alen);

enum judge_verdict {
	JV_ACCEPTED,
	JV_WRONG_ANSWER,
	JV_TIME_LIMIT,
	JV_MEMORY_LIMIT,
	JV_OUTPUT_LIMIT,
	JV_RUNTIME_ERROR,
	JV_COMPILE_ERROR,
	JV_INTERNAL_ERROR,
	JV_SKIPPED,                   /* not run: an earlier test failed and stop_on_first_failure */
	JV_CHECK,                     /* ran well: the checker program decides (never a test's last word) */
};

/* "accepted", "wrong_answer", "time_limit", "memory_limit",
 * "output_limit", "runtime_error", "compile_error", "internal_error",
 * "skipped". */
const char *judge_verdict_name(enum judge_verdict v);

/* The contestant's program's end as the sandbox reports it (exit_code,
 * signal, timed_out, the truncation flags, usage.cpu_ms) against jr's
 * limits, with why in words ("CPU time: 1240 ms, over the limit of 1000
 * ms", "exit status 3", "signal 11 (SIGSEGV)"); JV_CHECK when it ran well
 * and what it wrote is to be judged. */
enum judge_verdict judge_end_verdict(const struct judge_request *jr, const json_t *cmd, char *why, size_t cap);

/* Output out (len bytes) against test t's expected output under jr's
 * text checker: accepted (also when t expects nothing) or wrong answer. */
enum judge_verdict judge_output_verdict(const struct judge_request *jr, const struct judge_test *t, const char *out,
					size_t len, char *why, size_t cap);

/* Test t's verdict from its command's end: judge_end_verdict, then its
 * stdout by judge_output_verdict; JV_CHECK when it ran well and a checker
 * program is to judge its output. */
enum judge_verdict judge_test_verdict(const struct judge_request *jr, const struct judge_test *t, const json_t *cmd,
				      char *why, size_t cap);

/* A checker program's verdict from its command's end (testlib's exit
 * statuses: 0 ok, 1 wrong answer, 2 presentation error, 3 the checker's
 * own failure), its first line of stderr in why. */
enum judge_verdict judge_checker_verdict(const json_t *cmd, char *why, size_t cap);

/* An interactive test's verdict from both programs' ends (interactor
 * ran with the same exit statuses as a checker): the interactor's own
 * failure (past its time, a signal, exit 3 or above) is internal_error,
 * since no verdict can be trusted; then the contestant's time, memory or
 * output limit; then the interactor's wrong answer (1 or 2, which comes
 * before the contestant's runtime error: an interactor that found a
 * wrong answer ends the talk, and what the contestant does then is its
 * consequence); then the contestant's runtime error. JV_CHECK when both
 * ran well and a checker is to judge the interactor's output file (a
 * checker program, or t's expected output); else accepted. Where both
 * ran well, why has the first line of the interactor's stderr. */
enum judge_verdict judge_interactive_verdict(const struct judge_request *jr, const struct judge_test *t,
					     const json_t *contestant, const json_t *interactor, char *why,
					     size_t cap);

#endif
