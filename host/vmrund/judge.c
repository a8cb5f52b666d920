/* /v1/judge's request, checkers and verdicts (judge.h). */
#include "judge.h"

#include <ctype.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "judge0.h"
#include "lines.h"

/* ---- the request ------------------------------------------------------------- */

/* A test's text: a string, or absent (NULL, allowed only where optional). */
static int text_of(const json_t *v, const char *what, unsigned i, bool optional, char **out, size_t *len, char *err,
		   size_t errlen)
{
	if (!v || json_is_null(v)) {
		if (!optional)
			return errf(err, errlen, "tests[%u].%s: is required", i, what);
		return 0;
	}
	if (!json_is_string(v))
		return errf(err, errlen, "tests[%u].%s: must be a string", i, what);
	*len = json_string_length(v);
	if (*len > JUDGE_TEXT_MAX)
		return errf(err, errlen, "tests[%u].%s: more than %u bytes", i, what, JUDGE_TEXT_MAX);
	if (!(*out = malloc(*len + 1)))
		return errf(err, errlen, "out of memory");
	memcpy(*out, json_string_value(v), *len + 1);
	return 0;
}

static int parse_tests(const json_t *a, struct judge_request *jr, char *err, size_t errlen)
{
	if (!json_is_array(a) || !json_array_size(a))
		return errf(err, errlen, "tests: must be an array of 1 to %d tests", JUDGE_TESTS_MAX);
	if (json_array_size(a) > JUDGE_TESTS_MAX)
		return errf(err, errlen, "tests: at most %d", JUDGE_TESTS_MAX);
	if (!(jr->tests = calloc(json_array_size(a), sizeof(*jr->tests))))
		return errf(err, errlen, "out of memory");
	for (unsigned i = 0; i < json_array_size(a); i++) {
		const json_t *t = json_array_get(a, i);
		struct judge_test *jt = &jr->tests[i];
		jr->ntests++;
		if (!json_is_object(t))
			return errf(err, errlen, "tests[%u]: must be an object", i);
		const char *key;
		const json_t *v;
		char q[72];
		json_object_foreach((json_t *)t, key, v)
			if (strcmp(key, "stdin") && strcmp(key, "expected_output"))
				return errf(err, errlen, "tests[%u]: unknown field \"%s\"", i,
					    errmsg_printable(q, sizeof(q), key));
		if (text_of(json_object_get(t, "stdin"), "stdin", i, true, &jt->in, &jt->in_len, err, errlen) ||
		    text_of(json_object_get(t, "expected_output"), "expected_output", i, true, &jt->expected,
			    &jt->expected_len, err, errlen))
			return -1;
		if (!jt->in && !(jt->in = strdup("")))
			return errf(err, errlen, "out of memory");
	}
	return 0;
}

/* The program a request names (its runtime and files, as a run spec's
 * source mode reads them) into rq; what names it in err's words. */
static int parse_program(const json_t *o, const char *what, struct run_spec *rq, char *err, size_t errlen)
{
	char why[400];
	json_t *src = json_object();
	if (!src)
		return errf(err, errlen, "out of memory");
	json_object_set(src, "runtime", json_object_get(o, "runtime"));
	json_object_set(src, "files", json_object_get(o, "files"));
	int rc = !json_object_get(o, "runtime") || !json_object_get(o, "files")
			 ? errf(err, errlen, "%sruntime and files: the program is required", what)
			 : run_spec_from_json(src, rq, why, sizeof(why)) ? errf(err, errlen, "%s%s", what, why) : 0;
	json_decref(src);
	return rc;
}

static int parse_checker(const json_t *c, struct judge_request *jr, char *err, size_t errlen)
{
	static const char *const names[] = { "exact", "lines", "tokens", "floats", "program" };
	jr->checker = JUDGE_LINES;
	jr->epsilon = 1e-6;
	if (!c)
		return 0;
	const char *type = json_string_value(json_object_get(c, "type"));
	if (!json_is_object(c) || !type)
		return errf(err, errlen, "checker: {\"type\": \"exact\" | \"lines\" | \"tokens\" | \"floats\" | \"program\"}");
	unsigned i = 0;
	while (i < 5 && strcmp(type, names[i]))
		i++;
	char q[40];
	if (i == 5)
		return errf(err, errlen, "checker.type: exact, lines, tokens, floats or program, not \"%s\"",
			    errmsg_printable(q, sizeof(q), type));
	jr->checker = (enum judge_checker)i;
	if (jr->checker == JUDGE_PROGRAM)
		return parse_program(c, "checker.", &jr->checker_src, err, errlen);
	const json_t *eps = json_object_get(c, "epsilon");
	if (eps && (!json_is_number(eps) || !(json_number_value(eps) >= 0 && json_number_value(eps) < 1)))
		return errf(err, errlen, "checker.epsilon: a number from 0 to 1");
	if (eps)
		jr->epsilon = json_number_value(eps);
	return 0;
}

static int parse_interactor(const json_t *o, struct judge_request *jr, char *err, size_t errlen)
{
	if (!o)
		return 0;
	if (!json_is_object(o))
		return errf(err, errlen, "interactor: {\"runtime\": ..., \"files\": [...]}");
	jr->interactive = true;
	return parse_program(o, "interactor.", &jr->interactor_src, err, errlen);
}

static int parse_limits(const json_t *l, struct judge_request *jr, char *err, size_t errlen)
{
	jr->timeout_s = JUDGE_DEFAULT_TIMEOUT_S;
	jr->max_output = JUDGE_DEFAULT_MAX_OUTPUT;
	if (!l)
		return 0;
	if (!json_is_object(l))
		return errf(err, errlen, "limits: must be an object");
	const char *key;
	const json_t *v;
	char q[40];
	json_object_foreach((json_t *)l, key, v) {
		double d = json_number_value(v);
		if (!json_is_number(v))
			return errf(err, errlen, "limits.%s: must be a number", errmsg_printable(q, sizeof(q), key));
		if (!strcmp(key, "timeout_s")) {
			if (!(d > 0 && d <= JUDGE_MAX_TIMEOUT_S))
				return errf(err, errlen, "limits.timeout_s: above 0, at most %d", JUDGE_MAX_TIMEOUT_S);
			jr->timeout_s = d;
		} else if (!strcmp(key, "cpu_time_ms") || !strcmp(key, "memory_mib") || !strcmp(key, "max_output")) {
			if (!(d >= 0 && d <= 1e12) || d != floor(d))
				return errf(err, errlen, "limits.%s: a whole number", key);
			*(!strcmp(key, "cpu_time_ms") ? &jr->cpu_time_ms
			  : !strcmp(key, "memory_mib") ? &jr->memory_mib : &jr->max_output) = (uint64_t)d;
		} else {
			return errf(err, errlen, "limits: unknown field \"%s\"", errmsg_printable(q, sizeof(q), key));
		}
	}
	return 0;
}

int judge_parse(const json_t *body, struct judge_request *jr, char *err, size_t errlen)
{
	static const char *const keys[] = { "runtime", "files", "tests", "checker", "limits", "stop_on_first_failure",
					    "interactor", "parallel" };
	memset(jr, 0, sizeof(*jr));
	if (!json_is_object(body))
		return errf(err, errlen, "the request must be a JSON object");
	const char *key;
	const json_t *v;
	json_object_foreach((json_t *)body, key, v) {
		size_t i = 0;
		while (i < sizeof(keys) / sizeof(keys[0]) && strcmp(key, keys[i]))
			i++;
		char q[72];
		if (i == sizeof(keys) / sizeof(keys[0]))
			return errf(err, errlen, "unknown field \"%s\"", errmsg_printable(q, sizeof(q), key));
	}
	v = json_object_get(body, "stop_on_first_failure");
	if (v && !json_is_boolean(v))
		return errf(err, errlen, "stop_on_first_failure: must be true or false");
	jr->stop_on_first_failure = json_is_true(v);
	v = json_object_get(body, "parallel");
	if (v && (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > JUDGE_PARALLEL_MAX))
		return errf(err, errlen, "parallel: a whole number from 1 to %d", JUDGE_PARALLEL_MAX);
	jr->parallel = v ? (unsigned)json_integer_value(v) : 1;
	if (parse_program(body, "", &jr->src, err, errlen) || parse_tests(json_object_get(body, "tests"), jr, err, errlen) ||
	    parse_checker(json_object_get(body, "checker"), jr, err, errlen) ||
	    parse_limits(json_object_get(body, "limits"), jr, err, errlen) ||
	    parse_interactor(json_object_get(body, "interactor"), jr, err, errlen)) {
		judge_free(jr);
		return -1;
	}
	return 0;
}

void judge_free(struct judge_request *jr)
{
	for (unsigned i = 0; i < jr->ntests; i++) {
		free(jr->tests[i].in);
		free(jr->tests[i].expected);
	}
	free(jr->tests);
	run_spec_free(&jr->src);
	run_spec_free(&jr->checker_src);
	run_spec_free(&jr->interactor_src);
	memset(jr, 0, sizeof(*jr));
}

/* ---- checkers ----------------------------------------------------------------- */

/* The next token of s[*at..n): its start and length; false at the end. */
static bool next_token(const char *s, size_t n, size_t *at, const char **tok, size_t *len)
{
	while (*at < n && isspace((unsigned char)s[*at]))
		(*at)++;
	if (*at >= n)
		return false;
	*tok = s + *at;
	while (*at < n && !isspace((unsigned char)s[*at]))
		(*at)++;
	*len = (size_t)(s + *at - *tok);
	return true;
}

/* A token as a number, whole: true with *d. */
static bool number_of(const char *tok, size_t len, double *d)
{
	char buf[64], *end;
	if (len >= sizeof(buf))
		return false;
	memcpy(buf, tok, len);
	buf[len] = '\0';
	*d = strtod(buf, &end);
	return end != buf && !*end && isfinite(*d);
}

static bool tokens_match(bool floats, double eps, const char *e, size_t en, const char *a, size_t an)
{
	size_t ea = 0, aa = 0;
	for (;;) {
		const char *et, *at;
		size_t el, al;
		bool he = next_token(e, en, &ea, &et, &el), ha = next_token(a, an, &aa, &at, &al);
		if (!he || !ha)
			return he == ha;
		double x, y;
		if (floats && number_of(et, el, &x) && number_of(at, al, &y)) {
			if (fabs(x - y) > eps && fabs(x - y) > eps * fabs(x))
				return false;
		} else if (el != al || memcmp(et, at, el)) {
			return false;
		}
	}
}

bool judge_check(enum judge_checker c, double epsilon, const char *expected, size_t elen, const char *actual,
		 size_t alen)
{
	switch (c) {
	case JUDGE_EXACT:
		return elen == alen && !memcmp(expected, actual, elen);
	case JUDGE_LINES:
		/* Judge0's, but an empty output is an empty text here (not nil) */
		return lines_match(expected, elen, actual, alen);
	case JUDGE_TOKENS:
		return tokens_match(false, 0, expected, elen, actual, alen);
	case JUDGE_FLOATS:
		return tokens_match(true, epsilon, expected, elen, actual, alen);
	case JUDGE_PROGRAM:
		break;   /* judge_run.c's: in a VM */
	}
	return false;
}

/* ---- verdicts ------------------------------------------------------------------- */

const char *judge_verdict_name(enum judge_verdict v)
{
	static const char *const names[] = { "accepted", "wrong_answer", "time_limit", "memory_limit", "output_limit",
					     "runtime_error", "compile_error", "internal_error", "skipped" };
	return (unsigned)v < sizeof(names) / sizeof(names[0]) ? names[v] : "internal_error";
}

enum judge_verdict judge_end_verdict(const struct judge_request *jr, const json_t *cmd, char *why, size_t cap)
{
	const json_t *code = json_object_get(cmd, "exit_code"), *sig = json_object_get(cmd, "signal");
	json_int_t cpu = json_integer_value(json_object_get(json_object_get(cmd, "usage"), "cpu_ms"));
	why[0] = '\0';
	if (!json_is_object(cmd) || (!json_is_integer(code) && !json_is_integer(sig) &&
				     !json_is_true(json_object_get(cmd, "timed_out")))) {
		const char *end = json_string_value(json_object_get(cmd, "end"));
		snprintf(why, cap, "the command did not run to an end: %.64s", end ? end : "none");
		return JV_INTERNAL_ERROR;
	}
	if (json_is_true(json_object_get(cmd, "timed_out"))) {
		snprintf(why, cap, "wall clock: past %g s", jr->timeout_s);
		return JV_TIME_LIMIT;
	}
	if (jr->cpu_time_ms && cpu > (json_int_t)jr->cpu_time_ms) {
		snprintf(why, cap, "CPU time: %lld ms, over the limit of %llu ms", (long long)cpu,
			 (unsigned long long)jr->cpu_time_ms);
		return JV_TIME_LIMIT;
	}
	if (json_is_true(json_object_get(cmd, "stdout_truncated")) ||
	    json_is_true(json_object_get(cmd, "stderr_truncated"))) {
		snprintf(why, cap, "output past %llu bytes", (unsigned long long)jr->max_output);
		return JV_OUTPUT_LIMIT;
	}
	if (json_is_integer(sig)) {
		/* a command's SIGKILL that no timeout sent is the guest's
		 * OOM killer: the VM's memory is the test's */
		json_int_t s = json_integer_value(sig);
		snprintf(why, cap, "signal %lld (SIG%s)%s", (long long)s, sigabbrev_np((int)s) ? sigabbrev_np((int)s) : "?",
			 s == SIGKILL ? ": out of memory" : "");
		return s == SIGKILL ? JV_MEMORY_LIMIT : JV_RUNTIME_ERROR;
	}
	if (json_integer_value(code) != 0) {
		snprintf(why, cap, "exit status %lld", (long long)json_integer_value(code));
		return JV_RUNTIME_ERROR;
	}
	return JV_CHECK;
}

enum judge_verdict judge_output_verdict(const struct judge_request *jr, const struct judge_test *t, const char *out,
					size_t len, char *why, size_t cap)
{
	if (!t->expected || judge_check(jr->checker, jr->epsilon, t->expected, t->expected_len, out, len))
		return JV_ACCEPTED;
	snprintf(why, cap, "the output differs from the expected");
	return JV_WRONG_ANSWER;
}

enum judge_verdict judge_test_verdict(const struct judge_request *jr, const struct judge_test *t, const json_t *cmd,
				      char *why, size_t cap)
{
	enum judge_verdict v = judge_end_verdict(jr, cmd, why, cap);
	if (v != JV_CHECK || jr->checker == JUDGE_PROGRAM)
		return v;
	const json_t *out = json_object_get(cmd, "stdout");
	return judge_output_verdict(jr, t, json_string_value(out) ? json_string_value(out) : "",
				    json_string_length(out), why, cap);
}

/* A testlib program's verdict (a checker's or an interactor's: who) from
 * its command's end, its time being timeout_s. */
static enum judge_verdict program_verdict(const char *who, double timeout_s, const json_t *cmd, char *why, size_t cap)
{
	const json_t *code = json_object_get(cmd, "exit_code"), *sig = json_object_get(cmd, "signal");
	const char *err = json_string_value(json_object_get(cmd, "stderr"));
	int n = err ? (int)strcspn(err, "\n") : 0;
	if (n > 200)
		n = 200;
	if (json_is_true(json_object_get(cmd, "timed_out"))) {
		snprintf(why, cap, "the %s ran past %g s", who, timeout_s);
		return JV_INTERNAL_ERROR;
	}
	if (!json_is_integer(code)) {
		snprintf(why, cap, "the %s did not exit: %s %lld", who, json_is_integer(sig) ? "signal" : "end",
			 json_is_integer(sig) ? (long long)json_integer_value(sig) : 0LL);
		return JV_INTERNAL_ERROR;
	}
	json_int_t c = json_integer_value(code);
	if (c == 0 || c == 1 || c == 2) {
		if (n)
			snprintf(why, cap, "%s: %.*s", who, n, err);
		else
			why[0] = '\0';
		return c == 0 ? JV_ACCEPTED : JV_WRONG_ANSWER;
	}
	snprintf(why, cap, "the %s failed (exit status %lld)%s%.*s", who, (long long)c, n ? ": " : "", n, n ? err : "");
	return JV_INTERNAL_ERROR;
}

enum judge_verdict judge_checker_verdict(const json_t *cmd, char *why, size_t cap)
{
	return program_verdict("checker", JUDGE_CHECKER_TIMEOUT_S, cmd, why, cap);
}

enum judge_verdict judge_interactive_verdict(const struct judge_request *jr, const struct judge_test *t,
					     const json_t *contestant, const json_t *interactor, char *why,
					     size_t cap)
{
	char iwhy[256];
	enum judge_verdict iv = program_verdict("interactor", jr->timeout_s + JUDGE_INTERACTOR_GRACE_S, interactor,
						iwhy, sizeof(iwhy));
	if (iv == JV_INTERNAL_ERROR) {
		snprintf(why, cap, "%s", iwhy);
		return iv;
	}
	enum judge_verdict v = judge_end_verdict(jr, contestant, why, cap);
	if (v == JV_TIME_LIMIT || v == JV_MEMORY_LIMIT || v == JV_OUTPUT_LIMIT || v == JV_INTERNAL_ERROR)
		return v;
	if (iv == JV_WRONG_ANSWER) {
		snprintf(why, cap, "%s", iwhy[0] ? iwhy : "the interactor: wrong answer");
		return iv;
	}
	if (v == JV_RUNTIME_ERROR)
		return v;
	snprintf(why, cap, "%s", iwhy);   /* its word, as a checker's, unless a checker says more */
	return jr->checker == JUDGE_PROGRAM || t->expected ? JV_CHECK : JV_ACCEPTED;
}
