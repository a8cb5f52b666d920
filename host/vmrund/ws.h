/* WebSocket framing (RFC 6455), the server's side, for Piston's
 * interactive /api/v2/connect: the handshake's accept key, whole messages
 * from a client's frames (masked, maybe fragmented, control frames
 * between fragments), and the headers of the frames vmrund sends. Pure:
 * no I/O, no globals; the socket is piston_ws.c's. Every byte here is the
 * client's, so every length is checked before it is used
 * (tests/fuzz/fuzz_ws.c). */
#ifndef VMRUND_WS_H
#define VMRUND_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WS_HEADER_MAX 14              /* a frame's head: 2, 8 of length, 4 of mask */
#define WS_CONTROL_MAX 125            /* a control frame's payload */

enum ws_op { WS_CONT = 0, WS_TEXT = 1, WS_BINARY = 2, WS_CLOSE = 8, WS_PING = 9, WS_PONG = 10 };

/* Close codes (RFC 6455 7.4.1). */
#define WS_CLOSE_NORMAL 1000
#define WS_CLOSE_GOING_AWAY 1001
#define WS_CLOSE_PROTOCOL 1002
#define WS_CLOSE_TOO_BIG 1009

/* Whether code may be sent in a close frame (RFC 6455 7.4: 1000-1003,
 * 1007-1014, and 3000-4999 for libraries and applications). */
bool ws_close_code_ok(unsigned code);

/* Sec-WebSocket-Accept for a client's Sec-WebSocket-Key: 0 with the
 * answer (28 characters) in out, or -1 when key is not 24 characters of
 * base64 (16 bytes), as the RFC requires. */
int ws_accept(const char *key, char out[29]);

/* What a client sent so far of a fragmented message. */
struct ws_reader {
	size_t max;                   /* a message's bytes, at most (its fragments together) */
	uint8_t *msg;                 /* the fragments so far (malloc'd) */
	size_t len, cap;
	int op;                       /* WS_TEXT or WS_BINARY while one is under way; else 0 */
};

/* A whole message: data[0..len) valid until the next ws_next or
 * ws_reader_free, and until the caller moves its input. */
struct ws_message {
	int op;                       /* WS_TEXT, WS_BINARY, WS_CLOSE, WS_PING, WS_PONG */
	const uint8_t *data;
	size_t len;
};

/* Take the next frame from in[0..n) (unmasked in place): the bytes it
 * used, with *m filled and *whole true when a message is whole (a
 * fragment alone leaves it false); 0 when the frame is not all there yet
 * (in must have room for r->max + WS_HEADER_MAX bytes for any to be);
 * -1 with *code (WS_CLOSE_PROTOCOL: unmasked, reserved bits or opcodes, a
 * control frame long or fragmented, a continuation of nothing or a new
 * message inside one; WS_CLOSE_TOO_BIG: past r->max; out of memory
 * too) when the connection must be closed. */
long ws_next(struct ws_reader *r, uint8_t *in, size_t n, struct ws_message *m, bool *whole, unsigned *code);

/* Free what r holds; safe twice. */
void ws_reader_free(struct ws_reader *r);

/* The head of an unfragmented, unmasked frame (a server's) of op with a
 * payload of len bytes: its length, at most 10. */
size_t ws_header(uint8_t out[10], int op, uint64_t len);

/* A close frame's payload: code, then reason cut to what fits in
 * WS_CONTROL_MAX (at a UTF-8 character's start). Its length. */
size_t ws_close_payload(uint8_t out[WS_CONTROL_MAX], unsigned code, const char *reason);

#endif
