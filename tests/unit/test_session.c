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
	rq.argc = 1;
	rq.argv[0] = "true";
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(printable_helper),
		cmocka_unit_test(hostile_hello_and_error),
	};
	return cmocka_run_group_tests_name("session", tests, NULL, NULL);
}
