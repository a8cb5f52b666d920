/* Bytes on their way to a client (host/vmrund/pending.h). */
#include "pending.h"

#include <stdlib.h>
#include <string.h>

bool pending_room(struct pending *b, size_t n)
{
	if (b->len + n <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + n)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p)
		return false;
	b->p = p;
	b->cap = cap;
	return true;
}

void pending_put(struct pending *b, const void *data, size_t n)
{
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

bool pending_empty(const struct pending *b)
{
	return b->off >= b->len;
}

size_t pending_take(struct pending *b, char *out, size_t max)
{
	size_t n = b->len - b->off < max ? b->len - b->off : max;
	if (!n)
		return 0;
	memcpy(out, b->p + b->off, n);
	b->off += n;
	if (b->off == b->len)
		b->off = b->len = 0;
	return n;
}

void pending_free(struct pending *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}
