/* WebSocket framing (ws.h). */
#include "ws.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

int ws_accept(const char *key, char out[29])
{
	unsigned char raw[20], dec[19];
	unsigned char cat[24 + sizeof(WS_GUID)];
	/* 16 bytes in base64: 22 characters and "==" */
	if (strlen(key) != 24 || EVP_DecodeBlock(dec, (const unsigned char *)key, 24) != 18 || key[22] != '=' ||
	    key[23] != '=')
		return -1;
	memcpy(cat, key, 24);
	memcpy(cat + 24, WS_GUID, sizeof(WS_GUID) - 1);
	unsigned len = 0;
	if (!EVP_Digest(cat, 24 + sizeof(WS_GUID) - 1, raw, &len, EVP_sha1(), NULL) || len != 20)
		return -1;
	EVP_EncodeBlock((unsigned char *)out, raw, 20);
	return 0;
}

bool ws_close_code_ok(unsigned code)
{
	return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}

static long fail(unsigned *code, unsigned c)
{
	*code = c;
	return -1;
}

long ws_next(struct ws_reader *r, uint8_t *in, size_t n, struct ws_message *m, bool *whole, unsigned *code)
{
	*whole = false;
	if (n < 2)
		return 0;
	bool fin = in[0] & 0x80;
	int op = in[0] & 0x0f;
	uint64_t len = in[1] & 0x7f;
	size_t at = 2;
	if (in[0] & 0x70 || !(in[1] & 0x80))
		return fail(code, WS_CLOSE_PROTOCOL);   /* no extension was agreed; a client masks every frame */
	bool control = op >= 8;
	if ((op > WS_BINARY && op < WS_CLOSE) || op > WS_PONG || (control && (!fin || len > WS_CONTROL_MAX)))
		return fail(code, WS_CLOSE_PROTOCOL);
	if (!control && (op == WS_CONT) != (r->op != 0))
		return fail(code, WS_CLOSE_PROTOCOL);   /* a continuation of nothing, or a message inside one */
	if (len >= 126) {
		size_t k = len == 126 ? 2 : 8;
		if (n < at + k)
			return 0;
		len = 0;
		for (size_t i = 0; i < k; i++)
			len = len << 8 | in[at + i];
		at += k;
		if (len >> 63)
			return fail(code, WS_CLOSE_PROTOCOL);
	}
	if (len > r->max || (!control && r->op && len > r->max - r->len))
		return fail(code, WS_CLOSE_TOO_BIG);
	if (n < at + 4 || n - at - 4 < len)
		return 0;
	const uint8_t *mask = in + at;
	uint8_t *p = in + at + 4;
	for (size_t i = 0; i < len; i++)
		p[i] ^= mask[i & 3];
	long used = (long)(at + 4 + len);
	if (control || (fin && !r->op)) {
		*m = (struct ws_message){ .op = op, .data = p, .len = (size_t)len };
		*whole = true;
		return used;
	}
	/* a fragment: kept until the last one */
	if (r->len + len > r->cap) {
		/* doubled, so that many small fragments cost few copies */
		size_t cap = r->cap ? 2 * r->cap : 4096;
		cap = cap < r->len + len ? r->len + len : cap;
		cap = cap > r->max ? r->max : cap;
		uint8_t *more = realloc(r->msg, cap);
		if (!more)
			return fail(code, WS_CLOSE_TOO_BIG);
		r->msg = more;
		r->cap = cap;
	}
	if (len)
		memcpy(r->msg + r->len, p, len);
	r->len += len;
	if (op != WS_CONT)
		r->op = op;
	if (fin) {
		*m = (struct ws_message){ .op = r->op, .data = r->msg, .len = r->len };
		*whole = true;
		r->op = 0;
		r->len = 0;   /* the data stays where it is until the next call */
	}
	return used;
}

void ws_reader_free(struct ws_reader *r)
{
	free(r->msg);
	r->msg = NULL;
	r->len = r->cap = 0;
	r->op = 0;
}

size_t ws_header(uint8_t out[10], int op, uint64_t len)
{
	out[0] = (uint8_t)(0x80 | (op & 0x0f));
	if (len < 126) {
		out[1] = (uint8_t)len;
		return 2;
	}
	size_t k = len <= 0xffff ? 2 : 8;
	out[1] = k == 2 ? 126 : 127;
	for (size_t i = 0; i < k; i++)
		out[2 + i] = (uint8_t)(len >> (8 * (k - 1 - i)));
	return 2 + k;
}

size_t ws_close_payload(uint8_t out[WS_CONTROL_MAX], unsigned code, const char *reason)
{
	size_t n = strlen(reason);
	if (n > WS_CONTROL_MAX - 2)
		n = WS_CONTROL_MAX - 2;
	while (n && ((unsigned char)reason[n] & 0xc0) == 0x80 && reason[n] != '\0')
		n--;   /* not inside a character */
	out[0] = (uint8_t)(code >> 8);
	out[1] = (uint8_t)code;
	memcpy(out + 2, reason, n);
	return 2 + n;
}
