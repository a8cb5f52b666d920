/* The host side of a run (host/session.c) against scripted, hostile
 * agents: guest text (the HELLO name, an ERROR frame's text) reaches the
 * result only made printable, and session_printable itself. The
 * conversation with the real agent is tested in test_agent.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto.h"
#include "session.h"

static struct proto_request rq;
static struct session_result res;

static size_t put_frame(uint8_t *buf, uint16_t type, const void *p, uint32_t len)
{
	proto_header(buf, type, len);
	if (len)
		memcpy(buf + PROTO_HDR_LEN, p, len);
	return PROTO_HDR_LEN + len;
}

/* session_run on a socket where the "agent" already wrote script and
 * closed its end. */
static enum session_status scripted(const uint8_t *script, size_t n)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(write(sv[1], script, n), (ssize_t)n);
	close(sv[1]);
	memset(&rq, 0, sizeof(rq));
	rq.nstages = 1;
	rq.stage[0] = (struct proto_stage){ .kind = PROTO_STAGE_RUN, .argc = 1, .argv = { "true" } };
	struct session_io io = { .cancel_fd = -1, .stdin_fd = -1 };
	enum session_status st = session_run(sv[0], &rq, &io, session_now_ms() + 5000, &res);
	close(sv[0]);
	return st;
}

static void assert_printable(const char *s)
{
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
			fail_msg("byte 0x%02x at %zu of \"%s\"", (unsigned char)*c, (size_t)(c - s), s);
}

static void printable_helper(void **state)
{
	(void)state;
	char all[256], out[300];
	for (int i = 0; i < 256; i++)
		all[i] = (char)i;
	assert_ptr_equal(session_printable(out, sizeof(out), all, sizeof(all)), out);
	assert_int_equal(strlen(out), 256);
	for (int i = 0; i < 256; i++)
		assert_int_equal(out[i], i >= 0x20 && i <= 0x7e ? i : '?');
	/* escapes, CR, DEL, C1 controls, UTF-8 and a NUL that would end the text */
	static const char evil[] = "\x1b]0;owned\x07 a\r\n\x7f\x9b" "31m \xc3\xa9\0tail";
	session_printable(out, sizeof(out), evil, sizeof(evil) - 1);
	assert_string_equal(out, "?]0;owned? a????31m ???tail");
	/* cut to fit, always terminated; nothing at all */
	session_printable(out, 4, "abcdef", 6);
	assert_string_equal(out, "abc");
	session_printable(out, 1, "abc", 3);
	assert_string_equal(out, "");
	memset(out, 'z', sizeof(out));
	session_printable(out, sizeof(out), "abc", 0);
	assert_string_equal(out, "");
	out[0] = 'z';
	session_printable(out, 0, "abc", 3);   /* no room: nothing written */
	assert_int_equal(out[0], 'z');
}

static void hostile_hello_and_error(void **state)
{
	(void)state;
	static uint8_t s[2 * PROTO_MAX_PAYLOAD];
	uint8_t hello[128];
	static const char name[] = "\x1b[2J\x1b]0;pwned\x07" "agent\r\n\x9b" "1m";
	uint32_t v = PROTO_VERSION;
	memcpy(hello, &v, 4);
	memcpy(hello + 4, name, sizeof(name) - 1);
	static const char text[] = "\x1b[31mfailed\x1b[0m\0hidden\n";
	size_t n = put_frame(s, PROTO_HELLO, hello, 4 + sizeof(name) - 1);
	n += put_frame(s + n, PROTO_ERROR, text, sizeof(text) - 1);
	assert_int_equal(scripted(s, n), SESSION_FAILED);
	assert_string_equal(res.agent, "?[2J?]0;pwned?agent???1m");
	assert_string_equal(res.error, "agent: ?[31mfailed?[0m?hidden?");

	/* a long ERROR: 400 bytes of it, all printable */
	static uint8_t longmsg[1000];
	for (size_t i = 0; i < sizeof(longmsg); i++)
		longmsg[i] = (uint8_t)(i % 3 ? 'm' : 0x1b);
	n = put_frame(s, PROTO_HELLO, hello, 4 + sizeof(name) - 1);
	n += put_frame(s + n, PROTO_ERROR, longmsg, sizeof(longmsg));
	assert_int_equal(scripted(s, n), SESSION_FAILED);
	assert_int_equal(strlen(res.error), strlen("agent: ") + 400);
	assert_printable(res.error);
	assert_printable(res.agent);
}

static size_t hello_frame(uint8_t *buf)
{
	uint8_t hello[16];
	uint32_t v = PROTO_VERSION;
	memcpy(hello, &v, 4);
	memcpy(hello + 4, "test", 4);
	return put_frame(buf, PROTO_HELLO, hello, 8);
}

static size_t exit_frame(uint8_t *buf, uint32_t stage, uint32_t kind, int32_t code)
{
	struct proto_exit e = { .kind = kind, .code = code, .stage = stage };
	uint8_t p[PROTO_EXIT_LEN];
	proto_encode_exit(&e, p);
	return put_frame(buf, PROTO_EXIT, p, sizeof(p));
}

/* Collected output: "<stage><type letter>data" per frame. */
static char seen[256];
static void collect(void *ctx, unsigned stage, uint16_t type, const uint8_t *data, uint32_t len)
{
	(void)ctx;
	size_t n = strlen(seen);
	snprintf(seen + n, sizeof(seen) - n, "%u%c%.*s;", stage, type == PROTO_STDOUT ? 'o' : 'e', (int)len,
		 (const char *)data);
}

/* session_run of a two-stage request against the script; keep_open: the
 * agent's end stays open (until the deadline) instead of closing. */
static enum session_status staged(const uint8_t *script, size_t n, int64_t stage0_ms, int64_t within_ms)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(write(sv[1], script, n), (ssize_t)n);
	memset(&rq, 0, sizeof(rq));
	rq.nstages = 2;
	rq.stage[0] = (struct proto_stage){ .kind = PROTO_STAGE_COMPILE, .argc = 1, .argv = { "cc" } };
	rq.stage[1] = (struct proto_stage){ .kind = PROTO_STAGE_RUN, .argc = 1, .argv = { "/tmp/prog" } };
	seen[0] = '\0';
	struct session_io io = { .cancel_fd = -1, .stdin_fd = -1, .output = collect, .stage_timeout_ms = { stage0_ms, 0 } };
	enum session_status st = session_run(sv[0], &rq, &io, session_now_ms() + within_ms, &res);
	close(sv[0]);
	close(sv[1]);
	return st;
}

/* Stages in order: output goes to the stage that runs, each EXIT ends its
 * stage, a failed compile stage ends the session; an EXIT out of order and
 * output before any stage are the agent's fault; a stage's own limit ends
 * it as a timeout of that stage. */
static void stages(void **state)
{
	(void)state;
	static uint8_t s[4096];
	size_t n = hello_frame(s);
	n += put_frame(s + n, PROTO_STDERR, "warn", 4);
	n += exit_frame(s + n, 0, PROTO_END_EXITED, 0);
	n += put_frame(s + n, PROTO_STDOUT, "hi", 2);
	n += exit_frame(s + n, 1, PROTO_END_EXITED, 3);
	enum session_status got = staged(s, n, 0, 5000);
	if (got != SESSION_DONE)
		fail_msg("status %d: %s", got, res.error);
	assert_int_equal(res.stages, 2);
	assert_int_equal(res.exits, 2);
	assert_int_equal(res.exit[1].code, 3);
	assert_string_equal(seen, "0ewarn;1ohi;");
	assert_true(res.stage_end_ms[0] >= res.stage_start_ms[0] && res.stage_start_ms[1] >= res.stage_end_ms[0]);
	/* a compile error: done after the first EXIT, the rest unread */
	n = hello_frame(s);
	n += exit_frame(s + n, 0, PROTO_END_EXITED, 1);
	n += put_frame(s + n, PROTO_STDOUT, "never", 5);
	assert_int_equal(staged(s, n, 0, 5000), SESSION_DONE);
	assert_int_equal(res.stages, 1);
	assert_int_equal(res.exits, 1);
	assert_string_equal(seen, "");
	/* the run stage's EXIT first */
	n = hello_frame(s);
	n += exit_frame(s + n, 1, PROTO_END_EXITED, 0);
	assert_int_equal(staged(s, n, 0, 5000), SESSION_FAILED);
	assert_string_equal(res.error, "EXIT for stage 1 while stage 0 runs");
	/* the first stage's limit, well before the session's deadline */
	n = hello_frame(s);
	int64_t t0 = session_now_ms();
	assert_int_equal(staged(s, n, 100, 5000), SESSION_TIMEOUT);
	assert_true(res.stage_timeout);
	assert_true(session_now_ms() - t0 < 4000);
	/* the session's own deadline */
	assert_int_equal(staged(s, n, 0, 100), SESSION_TIMEOUT);
	assert_false(res.stage_timeout);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(printable_helper),
		cmocka_unit_test(hostile_hello_and_error),
		cmocka_unit_test(stages),
	};
	return cmocka_run_group_tests_name("session", tests, NULL, NULL);
}
