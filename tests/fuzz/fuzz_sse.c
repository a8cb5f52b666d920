/* libFuzzer harness for the output's Server-Sent Events
 * (host/vmrund/sse.c): whatever bytes the guest wrote, and however the
 * output file's records arrive in pieces, every event must be exactly
 * "event: stdout|stderr\ndata: JSON\n\n" with the JSON on one line (or
 * "event: next_run", a repeated run's next run, {"run": N}), and
 * its text must be the record's bytes as spool_utf8 makes them, record
 * by record, in order.
 *
 * Input: the first byte picks the mode. Even: records, each one byte of
 * stage/stream bits, two of length (at most 4095, cut at the input's
 * end), then the data; they are written as the worker writes them and
 * fed in pieces whose sizes the following bytes choose. Odd: the rest of
 * the input is the output file as it stands (no record need be whole or
 * ours), fed at once; the events must still be well formed. With the
 * second bit set too, the rest is what a reader (sse_parse) is fed
 * instead, in pieces the last bytes choose: any bytes, none taken twice,
 * every event's name and data within bounds. And the records' events,
 * read back by sse_parse, are the records' texts, in order. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "spool.h"
#include "sse.h"

#define MAX_RECORDS 64

struct expect {
	unsigned stream;
	char *text;
	size_t len;
};

/* One event at *p (at most end): its stream and text checked against
 * want (NULL: anything well formed). Returns the event's end. */
static const char *check_event(const char *p, const char *end, const struct expect *want)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	if (!nl || strncmp(p, "event: ", 7))
		abort();
	size_t nlen = (size_t)(nl - p - 7);
	unsigned stream = nlen == 6 && !memcmp(p + 7, "stdout", 6) ? PROTO_STDOUT
			  : nlen == 6 && !memcmp(p + 7, "stderr", 6) ? PROTO_STDERR
			  : nlen == 8 && !memcmp(p + 7, "next_run", 8) ? SPOOL_NEXT_RUN : 0;
	if (!stream)
		abort();
	p = nl + 1;
	if (end - p < 6 || strncmp(p, "data: ", 6))
		abort();
	p += 6;
	nl = memchr(p, '\n', (size_t)(end - p));
	if (!nl || nl + 1 >= end || nl[1] != '\n')
		abort();   /* the data is one line, and a blank line ends the event */
	json_error_t e;
	json_t *o = json_loadb(p, (size_t)(nl - p), 0, &e);
	if (stream == SPOOL_NEXT_RUN) {
		/* a repeated run's next run: its number, from a file as it stands only */
		if (want || !json_is_integer(json_object_get(o, "run")) || json_object_size(o) != 1)
			abort();
		json_decref(o);
		return nl + 2;
	}
	json_t *text = json_object_get(o, "text");
	const char *stage = json_string_value(json_object_get(o, "stage"));
	if (!json_is_string(text) || !stage || (strcmp(stage, "run") && strcmp(stage, "compile")))
		abort();
	if (want && (want->stream != stream || json_string_length(text) != want->len ||
		     memcmp(json_string_value(text), want->text, want->len)))
		abort();
	json_decref(o);
	return nl + 2;
}

static void check_all(const struct sse_buf *b, const struct expect *want, size_t nwant)
{
	size_t n = 0;
	if (!b->q.len) {
		if (want && nwant)
			abort();
		return;
	}
	const char *p = b->q.p, *end = b->q.p + b->q.len;
	while (p < end) {
		p = check_event(p, end, want && n < nwant ? &want[n] : NULL);
		n++;
	}
	if (want && n != nwant)
		abort();
}

/* The reader's side: each event's name and data bounded, its data a
 * whole JSON event of ours where want says so. */
struct reading {
	const struct expect *want;
	size_t nwant, n;
};

static int on_event(void *ctx, const char *name, const char *data, size_t len)
{
	struct reading *r = ctx;
	if (strlen(name) > 63 || strlen(data) > len || data[len] != '\0')
		abort();
	if (r->want) {
		if (r->n >= r->nwant)
			abort();
		const struct expect *w = &r->want[r->n];
		json_t *o = json_loadb(data, len, 0, NULL);
		json_t *text = json_object_get(o, "text");
		if (strcmp(name, w->stream == PROTO_STDOUT ? "stdout" : "stderr") || json_string_length(text) != w->len ||
		    memcmp(json_string_value(text), w->text, w->len))
			abort();
		json_decref(o);
	}
	r->n++;
	return 0;
}

/* in[0..len) to sse_parse in pieces as read() would return them, at
 * most max bytes waiting. */
static void read_pieces(const uint8_t *in, size_t len, size_t max, struct reading *r)
{
	char *buf = malloc(len + 1);
	size_t have = 0, fed = 0, k = 0;
	while (fed < len) {
		size_t piece = 1 + (k < len ? in[len - 1 - k] : 255) % 61;
		k++;
		if (piece > len - fed)
			piece = len - fed;
		memcpy(buf + have, in + fed, piece);
		have += piece;
		fed += piece;
		long used = sse_parse(buf, have, max, on_event, r);
		if (used < 0) {
			have = 0;   /* a reader gives up on such a stream */
			continue;
		}
		if ((size_t)used > have)
			abort();
		memmove(buf, buf + used, have - (size_t)used);
		have -= (size_t)used;
	}
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len)
{
	if (len < 1)
		return 0;
	struct sse_buf b = { 0 };
	if ((in[0] & 3) == 3) {
		struct reading r = { 0 };
		read_pieces(in + 1, len - 1, 4096, &r);
		return 0;
	}
	if (in[0] & 1) {
		(void)sse_records(&b, in + 1, len - 1);
		check_all(&b, NULL, 0);
		sse_free(&b);
		return 0;
	}
	/* Records, as the worker writes them. */
	uint8_t *file = malloc(len * 2 + 8 * MAX_RECORDS + 1);
	struct expect want[MAX_RECORDS];
	size_t flen = 0, nw = 0, pos = 1;
	while (pos + 3 <= len && nw < MAX_RECORDS) {
		unsigned bits = in[pos];
		size_t n = ((size_t)in[pos + 1] << 8 | in[pos + 2]) & 0xfff;
		pos += 3;
		if (n > len - pos)
			n = len - pos;
		struct spool_record h = { .stage = bits & 1 ? PROTO_STAGE_COMPILE : PROTO_STAGE_RUN,
					  .stream = bits & 2 ? PROTO_STDERR : PROTO_STDOUT, .len = (uint32_t)n };
		memcpy(file + flen, &h, sizeof(h));
		memcpy(file + flen + sizeof(h), in + pos, n);
		flen += sizeof(h) + n;
		want[nw].stream = h.stream;
		want[nw].text = spool_utf8(in + pos, n, &want[nw].len);
		if (!want[nw].text)
			abort();
		nw++;
		pos += n;
	}
	/* Fed in pieces, as read() returns them: what is not a whole record
	 * waits for the next. */
	uint8_t *raw = malloc(flen + 1);
	size_t rawlen = 0, fed = 0, k = 0;
	while (fed < flen) {
		size_t piece = 1 + (k < len ? in[len - 1 - k] : 255) % 97;
		k++;
		if (piece > flen - fed)
			piece = flen - fed;
		memcpy(raw + rawlen, file + fed, piece);
		rawlen += piece;
		fed += piece;
		long used = sse_records(&b, raw, rawlen);
		if (used < 0)
			abort();   /* records the worker wrote are always ours */
		memmove(raw, raw + used, rawlen - (size_t)used);
		rawlen -= (size_t)used;
	}
	if (rawlen || b.lost)
		abort();
	check_all(&b, want, nw);
	/* read back, the events are the records */
	struct reading r = { .want = want, .nwant = nw };
	read_pieces((const uint8_t *)b.q.p, b.q.len, b.q.len, &r);
	if (r.n != nw)
		abort();
	/* taken out in small pieces, the bytes are the same */
	char out[7];
	size_t total = b.q.len, got = 0;
	char *copy = malloc(total + 1);
	if (total)
		memcpy(copy, b.q.p, total);
	while (!sse_empty(&b)) {
		size_t n = sse_take(&b, out, sizeof(out));
		if (memcmp(out, copy + got, n))
			abort();
		got += n;
	}
	if (got != total)
		abort();
	free(copy);
	for (size_t i = 0; i < nw; i++)
		free(want[i].text);
	free(raw);
	free(file);
	sse_free(&b);
	return 0;
}
