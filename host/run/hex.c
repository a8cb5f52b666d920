/* Hex (hex.h). */
#include "hex.h"

#include <string.h>

#include <openssl/sha.h>

void hex_of(const void *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

void sha256_hex(const void *p, size_t n, char out[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256(n ? p : (const void *)"", n, md);
	hex_of(md, sizeof(md), out);
}

bool hex_is_sha256(const char *s)
{
	if (!s || strlen(s) != 64)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}
