/* Base64 (base64.h). */
#include "base64.h"

#include <stdint.h>
#include <stdlib.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The quad of the (up to 3) bytes at s, left of them, padded with '='. */
static void quad(const unsigned char *s, size_t left, char q[4])
{
	uint32_t v = (uint32_t)s[0] << 16 | (left > 1 ? (uint32_t)s[1] << 8 : 0) | (left > 2 ? s[2] : 0);
	q[0] = alphabet[v >> 18 & 63];
	q[1] = alphabet[v >> 12 & 63];
	q[2] = left > 1 ? alphabet[v >> 6 & 63] : '=';
	q[3] = left > 2 ? alphabet[v & 63] : '=';
}

char *base64_encode(const void *p, size_t n, size_t line, size_t *outlen)
{
	const unsigned char *s = p;
	/* past this the length would not fit a size_t: no allocation could hold it */
	if (n / 3 >= SIZE_MAX / 8)
		return NULL;
	size_t chars = (n + 2) / 3 * 4;
	size_t len = chars + (line ? (chars + line - 1) / line : 0);
	char *out = malloc(len + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0, c = 0; i < n; i += 3) {
		char q[4];
		quad(s + i, n - i, q);
		for (int k = 0; k < 4; k++) {
			out[o++] = q[k];
			if (line && ++c % line == 0)
				out[o++] = '\n';
		}
	}
	/* the last line ended too, as Ruby ends it */
	if (line && chars % line)
		out[o++] = '\n';
	out[o] = '\0';
	if (outlen)
		*outlen = o;
	return out;
}

int base64_value(unsigned char c, bool url)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || (url && c == '-'))
		return 62;
	if (c == '/' || (url && c == '_'))
		return 63;
	return -1;
}

int base64_decode(const char *s, size_t n, bool url, size_t max, unsigned char **out, size_t *outlen, size_t *at)
{
	size_t pad = 0;
	while (pad < 2 && n > pad && s[n - 1 - pad] == '=')
		pad++;
	/* with padding the text is whole quads; without, a last quad of 2 or
	 * 3 characters is taken too (both forms are common) */
	if ((pad && n % 4) || (n - pad) % 4 == 1)
		return BASE64_LENGTH;
	n -= pad;
	size_t len = n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
	if (len > max)
		return BASE64_OVER;
	for (size_t i = 0; i < n; i++)
		if (base64_value((unsigned char)s[i], url) < 0) {
			if (at)
				*at = i;
			return BASE64_CHAR;
		}
	*outlen = len;
	if (!len) {
		*out = NULL;
		return BASE64_OK;
	}
	unsigned char *d = malloc(len + 1);
	if (!d)
		return BASE64_NOMEM;
	size_t o = 0;
	uint32_t acc = 0;
	unsigned bits = 0;
	for (size_t i = 0; i < n; i++) {
		acc = (acc << 6 | (uint32_t)base64_value((unsigned char)s[i], url)) & 0xffffff;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			d[o++] = (unsigned char)(acc >> bits);
		}
	}
	d[o] = '\0';
	*out = d;
	return BASE64_OK;
}
