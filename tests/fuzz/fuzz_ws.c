/* libFuzzer harness for the WebSocket framing (host/vmrund/ws.c) and
 * Piston's messages over it (host/vmrund/piston_ws.c): every byte is a
 * client's.
 *
 * Input: the first byte picks the mode. Even: the rest is what a client
 * sent, fed to ws_next in pieces the last bytes choose, as recv returns
 * them; no byte is taken twice or past what was given, every message is
 * within the reader's max (a control one within 125), and each text
 * message goes through piston_ws_decide. Odd: the rest is cut into
 * messages (a length byte, then that many bytes), each written as a
 * client writes it (masked; fragmented, with a ping between fragments,
 * where its first byte is odd); read back, they must be the same
 * messages, in order. */
#include <stdlib.h>
#include <string.h>

#include "piston.h"
#include "ws.h"

#define MAX 4096

static void decide(const struct ws_message *m)
{
	if (m->op != WS_TEXT)
		return;
	struct piston_ws_msg pm;
	piston_ws_decide((const char *)m->data, m->len, m->len & 1, &pm);
	if (pm.ask == PISTON_ASK_STDIN && (!pm.data || strlen(pm.data) > pm.len))
		abort();
	if (pm.ask == PISTON_ASK_SIGNAL && (pm.signo < 1 || pm.signo > 64))
		abort();
	if (pm.ask == PISTON_ASK_CLOSE && !piston_ws_reason(pm.code)[0])
		abort();
	json_decref(pm.msg);
}

static void any_bytes(const uint8_t *in, size_t len)
{
	struct ws_reader r = { .max = MAX };
	uint8_t *buf = malloc(MAX + WS_HEADER_MAX);
	size_t have = 0, fed = 0, k = 0;
	while (fed < len) {
		size_t piece = 1 + (k < len ? in[len - 1 - k] : 255) % 97;
		k++;
		if (piece > len - fed)
			piece = len - fed;
		if (piece > MAX + WS_HEADER_MAX - have)
			piece = MAX + WS_HEADER_MAX - have;
		memcpy(buf + have, in + fed, piece);
		have += piece;
		fed += piece;
		for (;;) {
			struct ws_message m;
			bool whole;
			unsigned code;
			long used = ws_next(&r, buf, have, &m, &whole, &code);
			if (used < 0) {
				if (code != WS_CLOSE_PROTOCOL && code != WS_CLOSE_TOO_BIG)
					abort();
				goto out;   /* the connection would close */
			}
			if ((size_t)used > have)
				abort();
			if (!used) {
				if (have == MAX + WS_HEADER_MAX)
					abort();   /* a buffer this full holds a whole frame, or is refused */
				break;
			}
			if (whole) {
				if (m.len > MAX || (m.op >= WS_CLOSE && m.len > WS_CONTROL_MAX))
					abort();
				decide(&m);
			}
			memmove(buf, buf + used, have - (size_t)used);
			have -= (size_t)used;
		}
	}
out:
	ws_reader_free(&r);
	free(buf);
}

/* A client's frame: its bytes at out, their count returned. */
static size_t frame(uint8_t *out, bool fin, int op, const uint8_t *p, size_t n, uint8_t seed)
{
	const uint8_t mask[4] = { seed, (uint8_t)(seed * 7), (uint8_t)(seed + 91), 0x5a };
	size_t at = 0;
	out[at++] = (uint8_t)((fin ? 0x80 : 0) | op);
	if (n < 126) {
		out[at++] = (uint8_t)(0x80 | n);
	} else {
		out[at++] = 0x80 | 126;
		out[at++] = (uint8_t)(n >> 8);
		out[at++] = (uint8_t)n;
	}
	memcpy(out + at, mask, 4);
	at += 4;
	for (size_t i = 0; i < n; i++)
		out[at + i] = p[i] ^ mask[i & 3];
	return at + n;
}

static void round_trip(const uint8_t *in, size_t len)
{
	struct ws_reader r = { .max = MAX };
	uint8_t *wire = malloc(len * 2 + 64 * (len + 1));
	size_t wlen = 0, pos = 0, nmsg = 0;
	/* the messages, as the client writes them */
	while (pos < len) {
		size_t n = in[pos++];
		if (n > len - pos)
			n = len - pos;
		const uint8_t *p = in + pos;
		if (n && (p[0] & 1) && n > 1) {
			size_t half = n / 2;
			wlen += frame(wire + wlen, false, WS_TEXT, p, half, p[0]);
			wlen += frame(wire + wlen, true, WS_PING, p, half > 125 ? 125 : half, p[1]);
			wlen += frame(wire + wlen, true, WS_CONT, p + half, n - half, p[1]);
		} else {
			wlen += frame(wire + wlen, true, WS_BINARY, p, n, n ? p[0] : 0);
		}
		pos += n;
		nmsg++;
	}
	/* read back */
	size_t at = 0, got = 0;
	pos = 0;
	while (at < wlen) {
		struct ws_message m;
		bool whole;
		unsigned code;
		long used = ws_next(&r, wire + at, wlen - at, &m, &whole, &code);
		if (used <= 0)
			abort();
		at += (size_t)used;
		if (!whole || m.op == WS_PING)
			continue;
		size_t n = in[pos++];
		if (n > len - pos)
			n = len - pos;
		if (m.len != n || (n && memcmp(m.data, in + pos, n)))
			abort();
		pos += n;
		got++;
	}
	if (got != nmsg)
		abort();
	ws_reader_free(&r);
	free(wire);
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len)
{
	if (len < 1)
		return 0;
	if (in[0] & 1)
		round_trip(in + 1, len - 1);
	else
		any_bytes(in + 1, len - 1);
	return 0;
}
