/* Bytes on their way to a client whose connection takes them as it can:
 * appended at the end, taken from the front, the buffer used again from
 * its start once all of it was taken. What a Server-Sent Events stream
 * (sse.h) and an envd stream of Connect frames (envd.h) hold. Pure. */
#ifndef VMRUND_PENDING_H
#define VMRUND_PENDING_H

#include <stdbool.h>
#include <stddef.h>

struct pending {
	char *p;
	size_t len, cap, off;         /* p[off..len) waits */
};

/* Room for n more bytes at the end: true, or false out of memory
 * (nothing changed). */
bool pending_room(struct pending *b, size_t n);

/* Append n bytes; pending_room made room for them. */
void pending_put(struct pending *b, const void *data, size_t n);

/* Whether nothing waits. */
bool pending_empty(const struct pending *b);

/* Copy what waits, at most max bytes, into out: how many (0: nothing
 * waits). */
size_t pending_take(struct pending *b, char *out, size_t max);

/* Release the buffer and zero b; safe on a zeroed one. */
void pending_free(struct pending *b);

#endif
