/* The text of a run's output as Server-Sent Events (host/vmrund/sse.h). */
#include "sse.h"

#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "spool.h"

/* Room for n more bytes; false (nothing changed) out of memory. */
static bool room(struct sse_buf *b, size_t n)
{
	if (b->len + n <= b->cap)
		return true;
	size_t cap = (b->len + n) * 2;
	char *p = realloc(b->p, cap);
	if (!p)
		return false;
	b->p = p;
	b->cap = cap;
	return true;
}

static void put(struct sse_buf *b, const char *text, size_t n)
{
	memcpy(b->p + b->len, text, n);
	b->len += n;
}

void sse_event(struct sse_buf *b, const char *name, json_t *data)
{
	char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
	json_decref(data);
	size_t nlen = strlen(name), tlen = text ? strlen(text) : 0;
	/* the whole event or none of it */
	if (!text || !room(b, 7 + nlen + 7 + tlen + 2)) {
		b->lost++;
		free(text);
		return;
	}
	put(b, "event: ", 7);
	put(b, name, nlen);
	put(b, "\ndata: ", 7);
	put(b, text, tlen);
	put(b, "\n\n", 2);
	free(text);
}

void sse_comment(struct sse_buf *b, const char *text)
{
	size_t n = strlen(text);
	if (!room(b, 2 + n + 2)) {
		b->lost++;
		return;
	}
	put(b, ": ", 2);
	put(b, text, n);
	put(b, "\n\n", 2);
}

static void on_record(void *ctx, unsigned stage, unsigned stream, const uint8_t *data, size_t n)
{
	struct sse_buf *b = ctx;
	size_t len;
	char *text = spool_utf8(data, n, &len);
	if (!text) {
		b->lost++;
		return;
	}
	sse_event(b, stream == PROTO_STDOUT ? "stdout" : "stderr",
		  json_pack("{s:s,s:s%}", "stage", stage == PROTO_STAGE_COMPILE ? "compile" : "run", "text", text, len));
	free(text);
}

long sse_records(struct sse_buf *b, const uint8_t *raw, size_t len)
{
	return spool_parse(raw, len, on_record, b);
}

bool sse_empty(const struct sse_buf *b)
{
	return b->off >= b->len;
}

size_t sse_take(struct sse_buf *b, char *out, size_t max)
{
	size_t n = b->len - b->off < max ? b->len - b->off : max;
	memcpy(out, b->p + b->off, n);
	b->off += n;
	if (b->off == b->len)
		b->off = b->len = 0;
	return n;
}

void sse_free(struct sse_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}
