/* WebSocket framing (host/vmrund/ws.c): the handshake's key, a client's
 * frames into messages, and the frames vmrund writes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "ws.h"

static void accept_key(void **state)
{
	(void)state;
	char out[29];
	/* RFC 6455's own example */
	assert_int_equal(ws_accept("dGhlIHNhbXBsZSBub25jZQ==", out), 0);
	assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	assert_int_equal(ws_accept("short", out), -1);
	assert_int_equal(ws_accept("dGhlIHNhbXBsZSBub25jZQ=", out), -1);
	assert_int_equal(ws_accept("dGhlIHNhbXBsZSBub25jZQ!!", out), -1);
	assert_int_equal(ws_accept("dGhlIHNhbXBsZSBub25jZQ===", out), -1);
}

/* A client's frame of op (fin or not) with payload p: its bytes in out. */
static size_t frame(uint8_t *out, bool fin, int op, const char *p, size_t n)
{
	static const uint8_t mask[4] = { 0x37, 0xfa, 0x21, 0x3d };
	size_t at = 0;
	out[at++] = (uint8_t)((fin ? 0x80 : 0) | op);
	if (n < 126) {
		out[at++] = (uint8_t)(0x80 | n);
	} else if (n <= 0xffff) {
		out[at++] = 0x80 | 126;
		out[at++] = (uint8_t)(n >> 8);
		out[at++] = (uint8_t)n;
	} else {
		out[at++] = 0x80 | 127;
		for (int i = 7; i >= 0; i--)
			out[at++] = (uint8_t)((uint64_t)n >> (8 * i));
	}
	memcpy(out + at, mask, 4);
	at += 4;
	for (size_t i = 0; i < n; i++)
		out[at + i] = (uint8_t)(p[i] ^ mask[i & 3]);
	return at + n;
}

static void messages(void **state)
{
	(void)state;
	struct ws_reader r = { .max = 100000 };
	uint8_t buf[200000];
	struct ws_message m;
	bool whole;
	unsigned code;
	/* RFC 6455 5.7's masked "Hello" */
	uint8_t hello[] = { 0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58 };
	for (size_t k = 0; k < sizeof(hello); k++)
		assert_int_equal(ws_next(&r, hello, k, &m, &whole, &code), 0);   /* not all there */
	assert_int_equal(ws_next(&r, hello, sizeof(hello), &m, &whole, &code), sizeof(hello));
	assert_true(whole);
	assert_int_equal(m.op, WS_TEXT);
	assert_int_equal(m.len, 5);
	assert_memory_equal(m.data, "Hello", 5);
	/* 126..65535 and past it: the longer lengths */
	char *big = malloc(70000);
	memset(big, 'x', 70000);
	size_t n = frame(buf, true, WS_BINARY, big, 300);
	assert_int_equal(ws_next(&r, buf, n, &m, &whole, &code), (long)n);
	assert_int_equal(m.len, 300);
	n = frame(buf, true, WS_TEXT, big, 70000);
	assert_int_equal(ws_next(&r, buf, n, &m, &whole, &code), (long)n);
	assert_int_equal(m.len, 70000);
	assert_int_equal(m.data[69999], 'x');
	/* fragments, with a ping between them */
	size_t a = frame(buf, false, WS_TEXT, "Hel", 3);
	size_t b = frame(buf + a, true, WS_PING, "p", 1);
	size_t c = frame(buf + a + b, true, WS_CONT, "lo", 2);
	assert_int_equal(ws_next(&r, buf, a + b + c, &m, &whole, &code), (long)a);
	assert_false(whole);
	assert_int_equal(ws_next(&r, buf + a, b + c, &m, &whole, &code), (long)b);
	assert_true(whole);
	assert_int_equal(m.op, WS_PING);
	assert_int_equal(ws_next(&r, buf + a + b, c, &m, &whole, &code), (long)c);
	assert_true(whole);
	assert_int_equal(m.op, WS_TEXT);
	assert_memory_equal(m.data, "Hello", 5);
	/* many small fragments: one message, whatever their number */
	size_t at = 0;
	at += frame(buf, false, WS_TEXT, "a", 1);
	for (int i = 0; i < 3000; i++)
		at += frame(buf + at, false, WS_CONT, "b", 1);
	at += frame(buf + at, true, WS_CONT, "c", 1);
	size_t off = 0;
	for (;;) {
		long used = ws_next(&r, buf + off, at - off, &m, &whole, &code);
		assert_true(used > 0);
		off += (size_t)used;
		if (whole)
			break;
	}
	assert_int_equal(off, at);
	assert_int_equal(m.len, 3002);
	assert_int_equal(m.data[0], 'a');
	assert_int_equal(m.data[3001], 'c');
	/* an empty close */
	n = frame(buf, true, WS_CLOSE, "", 0);
	assert_int_equal(ws_next(&r, buf, n, &m, &whole, &code), (long)n);
	assert_int_equal(m.op, WS_CLOSE);
	assert_int_equal(m.len, 0);
	ws_reader_free(&r);
	ws_reader_free(&r);
	free(big);
}

/* buf[0..n) must be refused with want. */
static void refused(struct ws_reader *r, uint8_t *buf, size_t n, unsigned want)
{
	struct ws_message m;
	bool whole;
	unsigned code = 0;
	assert_int_equal(ws_next(r, buf, n, &m, &whole, &code), -1);
	assert_int_equal(code, want);
}

static void errors(void **state)
{
	(void)state;
	struct ws_reader r = { .max = 1000 };
	uint8_t buf[4096];
	uint8_t unmasked[] = { 0x81, 0x01, 'x' };
	refused(&r, unmasked, sizeof(unmasked), WS_CLOSE_PROTOCOL);
	size_t n = frame(buf, true, WS_TEXT, "x", 1);
	buf[0] |= 0x40;   /* RSV1: no extension was agreed */
	refused(&r, buf, n, WS_CLOSE_PROTOCOL);
	n = frame(buf, true, 3, "x", 1);
	refused(&r, buf, n, WS_CLOSE_PROTOCOL);
	n = frame(buf, true, 11, "x", 1);
	refused(&r, buf, n, WS_CLOSE_PROTOCOL);
	n = frame(buf, false, WS_PING, "x", 1);
	refused(&r, buf, n, WS_CLOSE_PROTOCOL);
	char big[200];
	memset(big, 'y', sizeof(big));
	n = frame(buf, true, WS_PING, big, 126);
	refused(&r, buf, n, WS_CLOSE_PROTOCOL);
	n = frame(buf, true, WS_CONT, "x", 1);
	refused(&r, buf, n, WS_CLOSE_PROTOCOL);
	/* past max, whole or in fragments; the length is judged before the payload comes */
	n = frame(buf, true, WS_TEXT, (const char *)buf, 1001);
	refused(&r, buf, 4, WS_CLOSE_TOO_BIG);
	struct ws_message m;
	bool whole;
	unsigned code;
	char part[600];
	memset(part, 'z', sizeof(part));
	n = frame(buf, false, WS_TEXT, part, 600);
	assert_int_equal(ws_next(&r, buf, n, &m, &whole, &code), (long)n);
	n = frame(buf, false, WS_TEXT, part, 1);
	refused(&r, buf, n, WS_CLOSE_PROTOCOL);   /* a new message inside one */
	n = frame(buf, true, WS_CONT, part, 401);
	refused(&r, buf, n, WS_CLOSE_TOO_BIG);
	ws_reader_free(&r);
	/* a 64-bit length with its top bit set */
	uint8_t huge[] = { 0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4 };
	refused(&r, huge, sizeof(huge), WS_CLOSE_PROTOCOL);
}

static void writing(void **state)
{
	(void)state;
	uint8_t h[10];
	assert_int_equal(ws_header(h, WS_TEXT, 5), 2);
	assert_int_equal(h[0], 0x81);
	assert_int_equal(h[1], 5);
	assert_int_equal(ws_header(h, WS_BINARY, 126), 4);
	assert_int_equal(h[1], 126);
	assert_int_equal(h[2] << 8 | h[3], 126);
	assert_int_equal(ws_header(h, WS_TEXT, 65536), 10);
	assert_int_equal(h[1], 127);
	assert_int_equal(h[7], 1);
	assert_int_equal(h[8], 0);
	/* the codes a close frame may carry */
	assert_true(ws_close_code_ok(1000));
	assert_true(ws_close_code_ok(1011));
	assert_true(ws_close_code_ok(4999));
	assert_false(ws_close_code_ok(0));
	assert_false(ws_close_code_ok(1005));
	assert_false(ws_close_code_ok(1006));
	assert_false(ws_close_code_ok(1015));
	assert_false(ws_close_code_ok(5000));
	uint8_t p[WS_CONTROL_MAX];
	assert_int_equal(ws_close_payload(p, 4999, "Job Completed"), 15);
	assert_int_equal(p[0] << 8 | p[1], 4999);
	assert_memory_equal(p + 2, "Job Completed", 13);
	/* a long reason is cut to fit, not inside a character */
	char reason[300] = "";
	for (int i = 0; i < 100; i++)
		strcat(reason, "\xc3\xa9");   /* é, two bytes each */
	size_t n = ws_close_payload(p, 1000, reason);
	assert_true(n <= WS_CONTROL_MAX);
	assert_int_equal((n - 2) % 2, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(accept_key),
		cmocka_unit_test(messages),
		cmocka_unit_test(errors),
		cmocka_unit_test(writing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
