/* libFuzzer harness for a supervisor's answer head as vmrund reads it
 * (host/vmrund/sandbox_http.c, sbxc_parse_head): whatever the bytes, the
 * parser stays inside them, says "more" only for an incomplete head that
 * still fits, and a head it takes has a status of 100 to 599, a length
 * within the input that ends with the blank line, and header values of
 * printable ASCII only (they go on into the client's answer). Parsing
 * any prefix of an accepted head asks for more; parsing it with bytes
 * after it gives the same head. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox_http.h"

static void printable(const char *s)
{
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 2 * SBXC_HEAD_MAX)
		return 0;
	/* a copy of exactly size bytes, so that ASan sees any read past it */
	char *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	struct sbxc_head h;
	long n = sbxc_parse_head(buf, size, &h);
	if (n == 0 && size >= SBXC_HEAD_MAX)
		abort();
	if (n > 0) {
		if ((size_t)n > size || n < 4 || memcmp(buf + n - 4, "\r\n\r\n", 4) || h.status < 100 || h.status > 599 ||
		    h.length < -1)
			abort();
		printable(h.type);
		printable(h.retry_after);
		struct sbxc_head again;
		if (sbxc_parse_head(buf, (size_t)n, &again) != n || memcmp(&again, &h, sizeof(h)))
			abort();
		if (sbxc_parse_head(buf, (size_t)n - 1, &again) != 0)
			abort();
	}
	free(buf);
	return 0;
}
