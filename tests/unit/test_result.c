/* The run result (host/run/result.c): the host's own cap on each output
 * stream (outbuf_take, outbuf_append), the JSON object's truncation flags
 * (set by the agent's EXIT flags or by a drop on the host), exit statuses,
 * the JSON writer keeping hostile bytes valid, and the network array. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "result.h"

static char json[1 << 16];

/* r as JSON, in the static buffer. */
static const char *to_json(const struct run_result *r)
{
	FILE *f = fmemopen(json, sizeof(json), "w");
	assert_non_null(f);
	result_print_json(f, r);
	assert_int_equal(fclose(f), 0);
	return json;
}

static void assert_has(const char *s, const char *part)
{
	if (!strstr(s, part))
		fail_msg("%s not in %s", part, s);
}

static void take_counts_against_limit(void **state)
{
	(void)state;
	struct outbuf b = { .limit = 10 };
	assert_int_equal(outbuf_take(&b, 4), 4);
	assert_int_equal(outbuf_take(&b, 6), 6);   /* exactly the limit: all of it */
	assert_false(b.truncated);
	assert_int_equal(outbuf_take(&b, 0), 0);
	assert_false(b.truncated);
	assert_int_equal(outbuf_take(&b, 1), 0);
	assert_true(b.truncated);
	assert_int_equal(b.passed, 10);
	assert_int_equal(b.len, 0);   /* counted, not stored */

	/* a chunk across the limit passes its first part */
	b = (struct outbuf){ .limit = 100 };
	assert_int_equal(outbuf_take(&b, 64), 64);
	assert_int_equal(outbuf_take(&b, 64), 36);
	assert_true(b.truncated);
	assert_int_equal(outbuf_take(&b, 65536), 0);
	assert_int_equal(b.passed, 100);

	/* a limit of 0; a limit beyond anything */
	b = (struct outbuf){ .limit = 0 };
	assert_int_equal(outbuf_take(&b, 5), 0);
	assert_true(b.truncated);
	b = (struct outbuf){ .limit = SIZE_MAX };
	assert_int_equal(outbuf_take(&b, 1u << 30), 1u << 30);
	assert_int_equal(outbuf_take(&b, 1u << 30), 1u << 30);
	assert_false(b.truncated);
}

static void append_keeps_up_to_limit(void **state)
{
	(void)state;
	struct run_result r = { 0 };
	r.stage[0].out.limit = 8;
	assert_true(outbuf_append(&r.stage[0].out, (const uint8_t *)"abc", 3));
	assert_false(outbuf_append(&r.stage[0].out, (const uint8_t *)"defghij", 7));
	assert_int_equal(r.stage[0].out.len, 8);
	assert_memory_equal(r.stage[0].out.data, "abcdefgh", 8);
	assert_true(r.stage[0].out.truncated);
	assert_false(outbuf_append(&r.stage[0].out, (const uint8_t *)"k", 1));
	assert_int_equal(r.stage[0].out.len, 8);
	/* a larger stream: stored whole below the limit */
	r.stage[0].err.limit = 1 << 20;
	static uint8_t chunk[16384];
	memset(chunk, 'e', sizeof(chunk));
	for (int i = 0; i < 64; i++)
		assert_true(outbuf_append(&r.stage[0].err, chunk, sizeof(chunk)));
	assert_int_equal(r.stage[0].err.len, 1 << 20);
	assert_false(r.stage[0].err.truncated);
	assert_false(outbuf_append(&r.stage[0].err, chunk, 1));
	assert_true(r.stage[0].err.truncated);
	result_free(&r);
	assert_null(r.stage[0].out.data);
	assert_int_equal(r.stage[0].out.passed, 0);
}

/* Output the host dropped is flagged in --json, whatever the agent said;
 * the agent's flag alone sets it too. */
static void json_truncated_by_host_drop(void **state)
{
	(void)state;
	struct run_result r = { .term = TERM_EXITED, .nstages = 1, .stage = { { .term = TERM_EXITED } } };
	r.stage[0].out.limit = r.stage[0].err.limit = 5;
	outbuf_append(&r.stage[0].out, (const uint8_t *)"hello world", 11);   /* past the cap: an agent ignoring it */
	outbuf_append(&r.stage[0].err, (const uint8_t *)"err", 3);
	const char *j = to_json(&r);
	assert_has(j, "\"stdout\":\"hello\"");
	assert_has(j, "\"stderr\":\"err\"");
	assert_has(j, "\"stdout_truncated\":true,\"stderr_truncated\":false");
	r.stage[0].err_truncated = true;   /* EXIT's STDERR_TRUNCATED */
	j = to_json(&r);
	assert_has(j, "\"stdout_truncated\":true,\"stderr_truncated\":true");
	result_free(&r);
	r.stage[0].out.limit = r.stage[0].err.limit = 5;
	r.stage[0].err_truncated = false;
	outbuf_append(&r.stage[0].out, (const uint8_t *)"hello", 5);   /* exactly the cap */
	assert_has(to_json(&r), "\"stdout_truncated\":false,\"stderr_truncated\":false");
	result_free(&r);
}

/* Hostile bytes in output and message still make valid JSON: control
 * bytes escaped, invalid UTF-8 replaced. */
static void json_escapes(void **state)
{
	(void)state;
	struct run_result r = { .term = TERM_SIGNALED, .nstages = 1, .stage = { { .term = TERM_SIGNALED, .signal = 9 } } };
	r.stage[0].out.limit = 64;
	static const uint8_t out[] = { '\x1b', '[', '2', 'J', '"', '\\', '\n', 0x00, 0xff, 0xc3, 0xa9 };
	outbuf_append(&r.stage[0].out, out, sizeof(out));
	snprintf(r.message, sizeof(r.message), "a\tb\x7f");
	const char *j = to_json(&r);
	assert_has(j, "\"stdout\":\"\\u001b[2J\\\"\\\\\\n\\u0000\\ufffd\xc3\xa9\"");
	assert_has(j, "\"message\":\"a\\tb\\u007f\"");
	assert_has(j, "\"signal\":\"SIGKILL\"");
	assert_int_equal(result_exit_status(&r), 137);
	result_free(&r);
}

/* Source mode: the final stage's fields at the top, a compile and a run
 * object; a compile error ends with the compiler's status and output, and
 * no run object. */
static void json_stages(void **state)
{
	(void)state;
	struct run_result r = { .term = TERM_COMPILE_ERROR, .source = true, .nstages = 2 };
	snprintf(r.runtime, sizeof(r.runtime), "c");
	snprintf(r.runtime_version, sizeof(r.runtime_version), "12.2.0");
	struct run_stage *c = &r.stage[0];
	*c = (struct run_stage){ .started = true, .term = TERM_EXITED, .exit_code = 1, .wall_ms = 812, .cpu_ms = 700,
				 .oom_killed = true, .limits = { 30, 512, 0 } };
	c->err.limit = 100;
	outbuf_append(&c->err, (const uint8_t *)"main.c:1: error", 15);
	r.stage[1].term = TERM_ERROR;
	const char *j = to_json(&r);
	assert_has(j, "\"termination\":\"compile_error\",\"exit_code\":1,");
	assert_has(j, ",\"stderr\":\"main.c:1: error\",");
	assert_has(j, "\"runtime\":{\"name\":\"c\",\"version\":\"12.2.0\"}");
	assert_has(j, "\"compile\":{\"termination\":\"exited\",\"exit_code\":1,\"signal\":null,\"timed_out\":false,"
		      "\"stdout\":\"\",\"stderr\":\"main.c:1: error\",\"stdout_truncated\":false,"
		      "\"stderr_truncated\":false,\"oom_killed\":true,\"cpu_time_exceeded\":false,\"duration_ms\":812,"
		      "\"usage\":{\"cpu_ms\":700,\"max_rss_kib\":0},\"limits\":{\"timeout_s\":30,\"memory_mib\":512,"
		      "\"cpu_time_ms\":0}}");
	assert_has(j, "\"run\":null");
	assert_int_equal(result_exit_status(&r), 1);
	assert_ptr_equal(result_final(&r), c);
	/* it ran: the run stage's fields at the top */
	r.term = TERM_EXITED;
	c->exit_code = 0;
	r.stage[1] = (struct run_stage){ .started = true, .term = TERM_SIGNALED, .signal = 24, .cpu_exceeded = true };
	r.term = TERM_SIGNALED;
	j = to_json(&r);
	assert_has(j, "{\"run_id\":\"\",\"termination\":\"signaled\",\"exit_code\":null,\"signal\":\"SIGXCPU\"");
	assert_has(j, "\"run\":{\"termination\":\"signaled\"");
	assert_has(j, "\"cpu_time_exceeded\":true");
	assert_int_equal(result_exit_status(&r), 128 + 24);
	result_free(&r);
	/* argv mode: neither object */
	struct run_result a = { .term = TERM_EXITED, .nstages = 1, .stage = { { .term = TERM_EXITED } } };
	j = to_json(&a);
	assert_null(strstr(j, "\"compile\""));
	assert_null(strstr(j, "\"run\":{"));
	assert_null(strstr(j, "\"run\":null"));
}

/* j as a JSON object (it must parse); the caller json_decref()s it. */
static json_t *parsed(const char *j)
{
	json_error_t e;
	json_t *v = json_loads(j, 0, &e);
	if (!v)
		fail_msg("not JSON (%s at %d): %s", e.text, e.position, j);
	assert_true(json_is_object(v));
	return v;
}

static void assert_json_string(json_t *o, const char *key, const char *want)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_string(v) || strcmp(json_string_value(v), want))
		fail_msg("\"%s\" is not \"%s\"", key, want);
}

static void assert_json_null(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_null(v))
		fail_msg("\"%s\" is not null (or absent)", key);
}

static void assert_json_int(json_t *o, const char *key, json_int_t want)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v))
		fail_msg("\"%s\" is not an integer", key);
	assert_int_equal(json_integer_value(v), want);
}

/* The network array: only for a run that allowed network, one object
 * per decision with null for what it lacks, and the unrecorded count. */
static void json_network(void **state)
{
	(void)state;
	struct run_result r = { .term = TERM_EXITED, .nstages = 1, .stage = { { .term = TERM_EXITED } } };
	struct proxy_audit a[2] = { 0 };
	snprintf(a[0].host, sizeof(a[0].host), "pypi.org");
	snprintf(a[0].method, sizeof(a[0].method), "CONNECT");
	snprintf(a[0].end, sizeof(a[0].end), "closed");
	a[0].port = 443;
	a[0].allowed = a[0].has_addr = 1;
	a[0].addr[10] = a[0].addr[11] = 0xff;   /* ::ffff:151.101.0.223 */
	a[0].addr[12] = 151;
	a[0].addr[13] = 101;
	a[0].addr[14] = 0;
	a[0].addr[15] = 223;
	a[0].up = 517;
	a[0].down = 5000000000ull;   /* past 32 bits */
	a[0].ms = 1234;
	snprintf(a[1].host, sizeof(a[1].host), "169.254.169.254");
	snprintf(a[1].why, sizeof(a[1].why), "\"169.254.169.254\" is an IP address");
	a[1].port = 80;
	a[1].addr[15] = 9;   /* has_addr 0: not shown, whatever it holds */
	a[1].ms = 3;
	/* off: no network keys, whatever the entries */
	r.network.entry = a;
	r.network.n = 2;
	r.network.unrecorded = 4;
	const char *j = to_json(&r);
	assert_null(strstr(j, "\"network\""));
	assert_null(strstr(j, "network_unrecorded"));
	json_t *v = parsed(j);
	assert_null(json_object_get(v, "network"));
	json_decref(v);

	r.network.on = true;
	j = to_json(&r);
	assert_has(j, ",\"network\":[{\"host\":\"pypi.org\",");
	assert_has(j, "],\"network_unrecorded\":4,\"message\":");
	v = parsed(j);
	json_t *net = json_object_get(v, "network");
	assert_true(json_is_array(net));
	assert_int_equal(json_array_size(net), 2);
	assert_json_int(v, "network_unrecorded", 4);
	json_t *e = json_array_get(net, 0);
	assert_int_equal(json_object_size(e), 10);
	assert_json_string(e, "host", "pypi.org");
	assert_json_int(e, "port", 443);
	assert_json_string(e, "method", "CONNECT");
	assert_json_string(e, "address", "151.101.0.223");
	assert_true(json_is_true(json_object_get(e, "allowed")));
	assert_json_null(e, "why");
	assert_json_int(e, "bytes_up", 517);
	assert_json_int(e, "bytes_down", 5000000000ll);
	assert_json_string(e, "end", "closed");
	assert_json_int(e, "ms", 1234);
	e = json_array_get(net, 1);
	assert_int_equal(json_object_size(e), 10);
	assert_json_string(e, "host", "169.254.169.254");
	assert_json_int(e, "port", 80);
	assert_json_null(e, "method");   /* "": the head did not parse */
	assert_json_null(e, "address");
	assert_true(json_is_false(json_object_get(e, "allowed")));
	assert_json_string(e, "why", "\"169.254.169.254\" is an IP address");
	assert_json_int(e, "bytes_up", 0);
	assert_json_int(e, "bytes_down", 0);
	assert_json_null(e, "end");
	assert_json_int(e, "ms", 3);
	json_decref(v);

	/* an IPv6 address as such */
	a[1].has_addr = 1;
	memset(a[1].addr, 0, 16);
	a[1].addr[0] = 0x20;
	a[1].addr[1] = 0x01;
	a[1].addr[2] = 0x0d;
	a[1].addr[3] = 0xb8;
	a[1].addr[15] = 1;
	assert_has(to_json(&r), "\"address\":\"2001:db8::1\"");

	/* on with no decisions: an empty array */
	r.network.n = 0;
	r.network.unrecorded = 0;
	j = to_json(&r);
	assert_has(j, ",\"network\":[],\"network_unrecorded\":0");
	v = parsed(j);
	assert_int_equal(json_array_size(json_object_get(v, "network")), 0);
	json_decref(v);
}

/* "boot": how vmm started, restored from a snapshot or cold, right after
 * the durations. */
static void json_boot(void **state)
{
	(void)state;
	struct run_result r = { .term = TERM_EXITED, .nstages = 1, .stage = { { .term = TERM_EXITED } } };
	const char *j = to_json(&r);
	assert_has(j, "\"total\":0},\"boot\":\"cold\",\"usage\":");
	json_t *v = parsed(j);
	assert_json_string(v, "boot", "cold");
	json_decref(v);
	r.restored = true;
	v = parsed(to_json(&r));
	assert_json_string(v, "boot", "restored");
	json_decref(v);
}

/* A repeated run: runs go on while they succeed and fewer were made than
 * asked; the last one reports the means, rounded down, and the counts. */
static void repeat(void **state)
{
	(void)state;
	struct run_repeat rep = { .asked = 3 };
	struct run_result r = { .term = TERM_EXITED, .nstages = 1,
				.stage = { { .started = true, .term = TERM_EXITED, .cpu_ms = 10, .max_rss_kib = 1000 } } };
	result_repeat_add(&rep, &r);
	assert_true(result_repeat_more(&rep, &r));
	r.stage[0].cpu_ms = 21;
	r.stage[0].max_rss_kib = 1001;
	result_repeat_add(&rep, &r);
	assert_true(result_repeat_more(&rep, &r));
	/* the third fails: no more, whatever was asked */
	r.stage[0].exit_code = 1;
	r.stage[0].cpu_ms = 0;
	r.stage[0].max_rss_kib = 2000;
	result_repeat_add(&rep, &r);
	assert_false(result_repeat_more(&rep, &r));
	result_repeat_apply(&r, &rep);
	assert_int_equal(r.stage[0].cpu_ms, 10);         /* 31 / 3 */
	assert_int_equal(r.stage[0].max_rss_kib, 1333);  /* 4001 / 3 */
	json_t *v = parsed(to_json(&r));
	json_t *o = json_object_get(v, "repeat");
	assert_json_int(o, "made", 3);
	assert_json_int(o, "asked", 3);
	assert_json_int(o, "max_cpu_ms", 21);
	assert_json_int(json_object_get(v, "usage"), "cpu_ms", 10);
	json_decref(v);
	/* a failure, a cancel and the count reached each end it early */
	struct run_repeat two = { .asked = 2 };
	result_repeat_add(&two, &r);
	assert_false(result_repeat_more(&two, &r));
	r.stage[0].exit_code = 0;
	assert_true(result_repeat_more(&two, &r));
	r.cancelled = true;
	assert_false(result_repeat_more(&two, &r));
	r.cancelled = false;
	r.term = TERM_TIMEOUT;
	r.stage[0].term = TERM_TIMEOUT;
	assert_false(result_repeat_more(&two, &r));
	/* one run asked: no "repeat" at all */
	struct run_result one = { .term = TERM_EXITED, .nstages = 1, .stage = { { .term = TERM_EXITED } } };
	assert_null(strstr(to_json(&one), "\"repeat\""));
}

/* Every termination's name reads back as that termination; nothing else
 * reads as one. */
static void termination_names_round_trip(void **state)
{
	(void)state;
	for (int t = 0; t < TERM_COUNT; t++)
		assert_int_equal(result_termination_from_name(result_termination_name((enum termination)t)), t);
	assert_int_equal(result_termination_from_name("timeout"), TERM_TIMEOUT);
	assert_int_equal(result_termination_from_name("timed_out"), -1);
	assert_int_equal(result_termination_from_name(""), -1);
	assert_int_equal(result_termination_from_name(NULL), -1);
}

/* r's outcome, decided, and read back from its JSON: the same. */
static struct run_outcome outcome_of(const struct run_result *r)
{
	struct run_outcome want, got;
	result_outcome(r, &want);
	json_t *o = parsed(to_json(r));
	assert_int_equal(result_outcome_parse(o, &got), 0);
	json_decref(o);
	assert_int_equal(got.state, want.state);
	assert_int_equal(got.term, want.term);
	assert_int_equal(got.limits, want.limits);
	return want;
}

/* How a run ended, decided once: every case vmrund's state rests on
 * (these were its spool's own decisions), and the limits hit. */
static void outcome(void **state)
{
	(void)state;
	struct run_result ok = { .term = TERM_EXITED, .nstages = 1, .stage = { { .started = true, .term = TERM_EXITED } } };
	assert_int_equal(outcome_of(&ok).state, OUTCOME_SUCCEEDED);
	assert_int_equal(outcome_of(&ok).limits, 0);
	struct run_result one = ok;
	one.stage[0].exit_code = 1;
	assert_int_equal(outcome_of(&one).state, OUTCOME_FAILED);
	struct run_result timeout = { .term = TERM_TIMEOUT, .nstages = 1,
				      .stage = { { .started = true, .term = TERM_TIMEOUT } } };
	assert_int_equal(outcome_of(&timeout).state, OUTCOME_TIMED_OUT);
	assert_int_equal(outcome_of(&timeout).limits, LIMIT_TIMEOUT);
	struct run_result sig = { .term = TERM_SIGNALED, .nstages = 1,
				  .stage = { { .started = true, .term = TERM_SIGNALED, .signal = 9, .oom_killed = true } } };
	assert_int_equal(outcome_of(&sig).state, OUTCOME_FAILED);
	assert_int_equal(outcome_of(&sig).limits, LIMIT_MEMORY);
	/* source mode: the compile stage ran out of time, the run never started */
	struct run_result compile = { .term = TERM_COMPILE_ERROR, .source = true, .nstages = 2,
				      .stage = { { .started = true, .term = TERM_TIMEOUT }, { .term = TERM_ERROR } } };
	assert_int_equal(outcome_of(&compile).state, OUTCOME_TIMED_OUT);
	assert_int_equal(outcome_of(&compile).term, TERM_COMPILE_ERROR);
	/* compiled, then ran and exited 0; or the compiler failed */
	struct run_result compiled = { .term = TERM_EXITED, .source = true, .nstages = 2,
				       .stage = { { .started = true, .term = TERM_EXITED },
						  { .started = true, .term = TERM_EXITED } } };
	assert_int_equal(outcome_of(&compiled).state, OUTCOME_SUCCEEDED);
	struct run_result compile_failed = compiled;
	compile_failed.term = TERM_COMPILE_ERROR;
	compile_failed.stage[0].exit_code = 1;
	compile_failed.stage[1].started = false;
	assert_int_equal(outcome_of(&compile_failed).state, OUTCOME_FAILED);
	struct run_result vm_failed = { .term = TERM_VM_FAILED, .nstages = 1 };
	assert_int_equal(outcome_of(&vm_failed).state, OUTCOME_FAILED);
	/* the CPU limit and a cut stream, in the run stage */
	struct run_result cpu = ok;
	cpu.stage[0].cpu_exceeded = true;
	cpu.stage[0].err.truncated = true;
	assert_int_equal(outcome_of(&cpu).state, OUTCOME_SUCCEEDED);
	assert_int_equal(outcome_of(&cpu).limits, LIMIT_CPU_TIME | LIMIT_OUTPUT);
	/* names, and what is none */
	assert_string_equal(result_outcome_name(OUTCOME_TIMED_OUT), "timed_out");
	assert_null(result_outcome_name((enum outcome_state)7));
	assert_string_equal(result_limit_name(LIMIT_CPU_TIME), "cpu_time");
	assert_null(result_limit_name(LIMIT_MEMORY | LIMIT_OUTPUT));
	/* a result that says no outcome, or a garbled one: a failure, -1 */
	const char *bad[] = { "{}", "[1]", "{\"termination\":\"exited\"}",
			      "{\"termination\":\"exited\",\"outcome\":{\"state\":\"won\",\"limits_hit\":[]}}",
			      "{\"termination\":\"exited\",\"outcome\":{\"state\":\"succeeded\",\"limits_hit\":[\"x\"]}}",
			      "{\"termination\":\"nope\",\"outcome\":{\"state\":\"succeeded\",\"limits_hit\":[]}}" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct run_outcome o = { .state = OUTCOME_SUCCEEDED };
		json_t *v = json_loads(bad[i], 0, NULL);
		assert_int_equal(result_outcome_parse(v, &o), -1);
		assert_int_equal(o.state, OUTCOME_FAILED);
		assert_int_equal(o.limits, 0);
		json_decref(v);
	}
	struct run_outcome o;
	assert_int_equal(result_outcome_parse(NULL, &o), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(take_counts_against_limit),
		cmocka_unit_test(append_keeps_up_to_limit),
		cmocka_unit_test(json_stages),
		cmocka_unit_test(json_truncated_by_host_drop),
		cmocka_unit_test(json_escapes),
		cmocka_unit_test(json_network),
		cmocka_unit_test(json_boot),
		cmocka_unit_test(repeat),
		cmocka_unit_test(termination_names_round_trip),
		cmocka_unit_test(outcome),
	};
	return cmocka_run_group_tests_name("result", tests, NULL, NULL);
}
