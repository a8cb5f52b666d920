/* The encodings a run spec's file contents and stdin come in (utf8,
 * base64, hex), decoded strictly: a stray character or a bad padding is
 * the client's error, never silently dropped. */
#include "run_spec.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "errmsg.h"
static int hex_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int b64_decode(const char *s, size_t n, size_t max, unsigned char **out, size_t *outlen, char *err,
		      size_t errlen)
{
	size_t at = 0;
	switch (base64_decode(s, n, false, max, out, outlen, &at)) {
	case BASE64_OK: return 0;
	case BASE64_LENGTH: return errf(err, errlen, "not valid base64 (bad length or padding)");
	case BASE64_CHAR: return errf(err, errlen, "not valid base64 (a character outside A-Z a-z 0-9 + / at %zu)", at);
	case BASE64_OVER: return errf(err, errlen, "over %zu bytes", max);
	default: return errf(err, errlen, "out of memory");
	}
}

static int hex_decode(const char *s, size_t n, size_t max, unsigned char **out, size_t *outlen, char *err,
		      size_t errlen)
{
	if (n % 2)
		return errf(err, errlen, "not valid hex (odd length)");
	if (n / 2 > max)
		return errf(err, errlen, "over %zu bytes", max);
	for (size_t i = 0; i < n; i++)
		if (hex_value((unsigned char)s[i]) < 0)
			return errf(err, errlen, "not valid hex (a character outside 0-9 a-f A-F at %zu)", i);
	if (!n)
		return 0;
	unsigned char *d = malloc(n / 2);
	if (!d)
		return errf(err, errlen, "out of memory");
	const unsigned char *u = (const unsigned char *)s;
	for (size_t i = 0; i < n / 2; i++)
		d[i] = (unsigned char)(hex_value(u[2 * i]) << 4 | hex_value(u[2 * i + 1]));
	*out = d;
	*outlen = n / 2;
	return 0;
}

bool run_spec_encoding_known(const char *e)
{
	return !strcmp(e, "utf8") || !strcmp(e, "base64") || !strcmp(e, "hex");
}

int run_spec_decode(const char *s, size_t n, const char *encoding, size_t max, unsigned char **out, size_t *outlen,
	       char *err, size_t errlen)
{
	*out = NULL;
	*outlen = 0;
	if (!strcmp(encoding, "base64"))
		return b64_decode(s, n, max, out, outlen, err, errlen);
	if (!strcmp(encoding, "hex"))
		return hex_decode(s, n, max, out, outlen, err, errlen);
	if (strcmp(encoding, "utf8"))
		return errf(err, errlen, "unknown encoding (utf8, base64 or hex)");
	if (n > max)
		return errf(err, errlen, "over %zu bytes", max);
	if (!n)
		return 0;
	if (!(*out = malloc(n)))
		return errf(err, errlen, "out of memory");
	memcpy(*out, s, n);
	*outlen = n;
	return 0;
}
