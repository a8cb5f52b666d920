/* Server-Sent Events for a run's output (GET /v1/runs/ID/output): the
 * text of each event built from the output file's records, apart from
 * the HTTP glue (stream.c), so that a fuzzer can hold it to the format:
 * every event is "event: NAME\ndata: JSON\n\n" with the JSON on one line,
 * whatever bytes the guest wrote. */
#ifndef VMRUND_SSE_H
#define VMRUND_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "pending.h"

/* Events ready to send. */
struct sse_buf {
	struct pending q;
	unsigned long lost;           /* events left out for want of memory */
};

/* Append "event: NAME\ndata: JSON\n\n" for data (taken: decref'd), with
 * the JSON compact and so on one line. Out of memory, or with no data,
 * the whole event is left out and counted in lost, so that what is sent
 * stays well formed. name is one of ours, never the client's or guest's. */
void sse_event(struct sse_buf *b, const char *name, json_t *data);

/* Append a comment line (": TEXT\n\n"), which clients ignore: a ping. */
void sse_comment(struct sse_buf *b, const char *text);

/* One event per whole record in raw[0..len) (spool.h's output records):
 * "stdout" or "stderr" with {"stage": "compile"|"run", "text": ...}, the
 * text as spool_utf8 makes it. Returns the bytes of whole records used
 * (the rest waits for more), or -1 when raw is not a record stream. */
long sse_records(struct sse_buf *b, const uint8_t *raw, size_t len);

/* Whether nothing is waiting to be sent. */
bool sse_empty(const struct sse_buf *b);

/* Copy up to max waiting bytes into out; returns how many. */
size_t sse_take(struct sse_buf *b, char *out, size_t max);

/* Release the buffer; safe on a zeroed one. */
void sse_free(struct sse_buf *b);

/* The reading side, for vmrund following a sandbox command's events: one
 * call of on per whole event in buf[0..len), an event being lines ended
 * by "\n" up to a blank line. "event: NAME" names it ("message" when no
 * line does; cut at 63 bytes), "data: TEXT" lines are its data (several
 * joined by "\n"; NUL-terminated for on, valid during the call); comments
 * (": ping") and other fields are skipped, and an event without data is
 * no event, as the SSE standard has it. on returns 0 to go on, else the
 * parse stops after that event. Returns the bytes of the events taken
 * (the rest waits for more), or -1 when what waits is past max bytes
 * with no end in it, or out of memory. */
typedef int (*sse_on_event)(void *ctx, const char *name, const char *data, size_t len);
long sse_parse(const char *buf, size_t len, size_t max, sse_on_event on, void *ctx);

#endif
