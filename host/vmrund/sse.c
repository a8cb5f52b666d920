/* The text of a run's output as Server-Sent Events (host/vmrund/sse.h). */
#include "sse.h"

#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "spool.h"

void sse_event(struct sse_buf *b, const char *name, json_t *data)
{
	char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
	json_decref(data);
	size_t nlen = strlen(name), tlen = text ? strlen(text) : 0;
	/* the whole event or none of it */
	if (!text || !pending_room(&b->q, 7 + nlen + 7 + tlen + 2)) {
		b->lost++;
		free(text);
		return;
	}
	pending_put(&b->q, "event: ", 7);
	pending_put(&b->q, name, nlen);
	pending_put(&b->q, "\ndata: ", 7);
	pending_put(&b->q, text, tlen);
	pending_put(&b->q, "\n\n", 2);
	free(text);
}

void sse_comment(struct sse_buf *b, const char *text)
{
	size_t n = strlen(text);
	if (!pending_room(&b->q, 2 + n + 2)) {
		b->lost++;
		return;
	}
	pending_put(&b->q, ": ", 2);
	pending_put(&b->q, text, n);
	pending_put(&b->q, "\n\n", 2);
}

static void on_record(void *ctx, unsigned stage, unsigned stream, const uint8_t *data, size_t n)
{
	struct sse_buf *b = ctx;
	if (stream == SPOOL_NEXT_RUN) {
		uint32_t run;
		memcpy(&run, data, sizeof(run));
		sse_event(b, "next_run", json_pack("{s:I}", "run", (json_int_t)run));
		return;
	}
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
	return pending_empty(&b->q);
}

size_t sse_take(struct sse_buf *b, char *out, size_t max)
{
	return pending_take(&b->q, out, max);
}

void sse_free(struct sse_buf *b)
{
	pending_free(&b->q);
	b->lost = 0;
}

/* The event in buf[0..len) (its lines, the blank one not included) to
 * on: 0, or on's word, or -1 out of memory. */
static int parse_event(const char *buf, size_t len, sse_on_event on, void *ctx)
{
	char name[64] = "message";
	char *data = NULL;
	size_t dlen = 0;
	bool any = false;
	for (size_t at = 0; at < len;) {
		const char *line = buf + at, *nl = memchr(line, '\n', len - at);
		size_t n = nl ? (size_t)(nl - line) : len - at;
		at += n + 1;
		const char *colon = memchr(line, ':', n);
		size_t flen = colon ? (size_t)(colon - line) : n;
		const char *val = colon ? colon + 1 : line + n;
		size_t vlen = (size_t)(line + n - val);
		if (vlen && *val == ' ')
			val++, vlen--;
		if (flen == 5 && !memcmp(line, "event", 5)) {
			size_t k = vlen < sizeof(name) - 1 ? vlen : sizeof(name) - 1;
			memcpy(name, val, k);
			name[k] = '\0';
		} else if (flen == 4 && !memcmp(line, "data", 4)) {
			char *more = realloc(data, dlen + any + vlen + 1);
			if (!more) {
				free(data);
				return -1;
			}
			data = more;
			if (any)
				data[dlen++] = '\n';
			memcpy(data + dlen, val, vlen);
			dlen += vlen;
			data[dlen] = '\0';
			any = true;
		}
	}
	int rc = any ? on(ctx, name, data, dlen) : 0;
	free(data);
	return rc;
}

long sse_parse(const char *buf, size_t len, size_t max, sse_on_event on, void *ctx)
{
	size_t used = 0;
	for (;;) {
		/* an event ends at its blank line: "\n\n", or one at the very start */
		const char *p = buf + used, *end = NULL;
		size_t left = len - used;
		if (left && *p == '\n') {
			used++;
			continue;
		}
		for (const char *q = p; (q = memchr(q, '\n', (size_t)(buf + len - q))) && q + 1 < buf + len; q++)
			if (q[1] == '\n') {
				end = q;
				break;
			}
		if (!end)
			return left > max ? -1 : (long)used;
		int rc = parse_event(p, (size_t)(end - p), on, ctx);
		if (rc < 0)
			return -1;
		used += (size_t)(end - p) + 2;
		if (rc)
			return (long)used;
	}
}
