/* The run result (host/result.c): the host's own cap on each output
 * stream (outbuf_take, outbuf_append), the JSON object's truncation flags
 * (set by the agent's EXIT flags or by a drop on the host), exit statuses,
 * and the JSON writer keeping hostile bytes valid. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(take_counts_against_limit),
		cmocka_unit_test(append_keeps_up_to_limit),
		cmocka_unit_test(json_stages),
		cmocka_unit_test(json_truncated_by_host_drop),
		cmocka_unit_test(json_escapes),
	};
	return cmocka_run_group_tests_name("result", tests, NULL, NULL);
}
