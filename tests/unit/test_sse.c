/* Server-Sent Events (host/vmrund/sse.c): the events vmrund writes, and
 * the reader vmrund follows a sandbox command's events with. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "spool.h"
#include "sse.h"

struct seen {
	char names[8][64];
	char *data[8];
	size_t len[8];
	unsigned n, stop_at;          /* stop_at: on says stop after event n (0: never) */
};

static int on(void *ctx, const char *name, const char *data, size_t len)
{
	struct seen *s = ctx;
	assert_true(s->n < 8);
	assert_int_equal(strlen(data), len);   /* NUL-terminated, no NUL inside here */
	strcpy(s->names[s->n], name);
	s->data[s->n] = strdup(data);
	s->len[s->n] = len;
	s->n++;
	return s->stop_at && s->n == s->stop_at;
}

static void seen_free(struct seen *s)
{
	for (unsigned i = 0; i < s->n; i++)
		free(s->data[i]);
	memset(s, 0, sizeof(*s));
}

/* What the writer writes, the reader reads back. */
static void round_trip(void **state)
{
	(void)state;
	struct sse_buf b = { 0 };
	sse_event(&b, "stdout", json_pack("{ss}", "text", "a\nb"));
	sse_comment(&b, "ping");
	sse_event(&b, "exit", json_pack("{si}", "exit_code", 3));
	struct seen s = { 0 };
	assert_int_equal(sse_parse(b.q.p, b.q.len, 1024, on, &s), (long)b.q.len);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.names[0], "stdout");
	assert_string_equal(s.data[0], "{\"text\":\"a\\nb\"}");
	assert_string_equal(s.names[1], "exit");
	assert_string_equal(s.data[1], "{\"exit_code\":3}");
	seen_free(&s);
	/* fed a byte at a time, only whole events are taken */
	size_t have = 0, used = 0;
	for (size_t i = 1; i <= b.q.len; i++) {
		long k = sse_parse(b.q.p + used, i - used, 1024, on, &s);
		assert_true(k >= 0);
		used += (size_t)k;
		have = s.n;
	}
	assert_int_equal(used, b.q.len);
	assert_int_equal(have, 2);
	seen_free(&s);
	sse_free(&b);
}

/* The output file's records as events; a repeated run's next run is an
 * event of its own, with its number. */
static void records(void **state)
{
	(void)state;
	uint8_t raw[64];
	size_t len = 0;
	struct spool_record h = { .stage = PROTO_STAGE_RUN, .stream = PROTO_STDOUT, .len = 2 };
	memcpy(raw, &h, sizeof(h));
	memcpy(raw + sizeof(h), "a\n", 2);
	len = sizeof(h) + 2;
	uint32_t next = 2;
	h = (struct spool_record){ .stage = PROTO_STAGE_RUN, .stream = SPOOL_NEXT_RUN, .len = sizeof(next) };
	memcpy(raw + len, &h, sizeof(h));
	memcpy(raw + len + sizeof(h), &next, sizeof(next));
	len += sizeof(h) + sizeof(next);
	struct sse_buf b = { 0 };
	assert_int_equal(sse_records(&b, raw, len), (long)len);
	struct seen s = { 0 };
	assert_int_equal(sse_parse(b.q.p, b.q.len, 1024, on, &s), (long)b.q.len);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.names[0], "stdout");
	assert_string_equal(s.data[0], "{\"stage\":\"run\",\"text\":\"a\\n\"}");
	assert_string_equal(s.names[1], "next_run");
	assert_string_equal(s.data[1], "{\"run\":2}");
	seen_free(&s);
	sse_free(&b);
}

static void reader(void **state)
{
	(void)state;
	struct seen s = { 0 };
	/* several data lines are joined; no event line: "message"; no space
	 * after the colon; a field of no name's line and an unknown field
	 * skipped */
	const char *t = "data: one\ndata:two\nid: 7\n\n: comment\n\n\nevent: x\nretry\ndata\n\n";
	assert_int_equal(sse_parse(t, strlen(t), 64, on, &s), (long)strlen(t));
	assert_int_equal(s.n, 2);
	assert_string_equal(s.names[0], "message");
	assert_string_equal(s.data[0], "one\ntwo");
	assert_string_equal(s.names[1], "x");
	assert_string_equal(s.data[1], "");
	seen_free(&s);
	/* an event without data is none */
	t = "event: lonely\n\n";
	assert_int_equal(sse_parse(t, strlen(t), 64, on, &s), (long)strlen(t));
	assert_int_equal(s.n, 0);
	/* a long name is cut */
	char name[200] = "event: ";
	memset(name + 7, 'n', 100);
	strcpy(name + 107, "\ndata: d\n\n");
	assert_int_equal(sse_parse(name, strlen(name), 1024, on, &s), (long)strlen(name));
	assert_int_equal(strlen(s.names[0]), 63);
	seen_free(&s);
	/* on stops the parse after its event */
	t = "data: 1\n\ndata: 2\n\n";
	s.stop_at = 1;
	assert_int_equal(sse_parse(t, strlen(t), 64, on, &s), 9);
	assert_int_equal(s.n, 1);
	seen_free(&s);
	/* what waits without an end: kept up to max, refused past it */
	t = "data: 0123456789";
	assert_int_equal(sse_parse(t, strlen(t), 64, on, &s), 0);
	assert_int_equal(sse_parse(t, strlen(t), 8, on, &s), -1);
	assert_int_equal(sse_parse("", 0, 8, on, &s), 0);
	assert_int_equal(s.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(records),
		cmocka_unit_test(reader),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
