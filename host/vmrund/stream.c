/* Streamed answers (host/vmrund/stream.h): output as Server-Sent Events,
 * artifacts as a tar. Each is a libmicrohttpd content reader that runs
 * on its connection's own thread, so it may wait. */
#include "stream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "spool.h"
#include "sse.h"
#include "tar.h"

#define STREAM_BLOCK   65536
#define STREAM_PING_MS 10000

/* ---- output as Server-Sent Events --------------------------------------- */

struct out_stream {
	struct vmrund *d;
	unsigned tenant;              /* whose place it holds (vmrund_stream_begin) */
	char id[SCHED_ID_MAX], path[PATH_MAX];
	int fd;
	uint8_t *raw;                 /* file bytes not yet a whole record */
	size_t rawlen;
	struct sse_buf ev;            /* events ready to send */
	bool terminal, done;
	char state[24];
	int64_t last_ms;
};

/* New records from the output file: true when there were bytes. */
static bool read_more(struct out_stream *s)
{
	if (s->fd < 0 && (s->fd = open(s->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return false;
	uint8_t *raw = realloc(s->raw, s->rawlen + STREAM_BLOCK);
	if (!raw)
		return false;
	s->raw = raw;
	ssize_t n = read(s->fd, s->raw + s->rawlen, STREAM_BLOCK);
	if (n <= 0)
		return false;
	s->rawlen += (size_t)n;
	long used = sse_records(&s->ev, s->raw, s->rawlen);
	if (used < 0) {
		s->rawlen = 0;   /* not ours: say nothing more of it */
		return true;
	}
	memmove(s->raw, s->raw + used, s->rawlen - (size_t)used);
	s->rawlen -= (size_t)used;
	return true;
}

static void replay(struct out_stream *s, const char *result)
{
	json_t *r = spool_result_parse(result);
	json_t *run = json_object_get(r, "run");
	json_t *stages[2] = { json_object_get(r, "compile"), json_is_object(run) ? run : r };
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 2; k++) {
			const char *key = k ? "stderr" : "stdout";
			json_t *text = json_object_get(stages[i], key);
			if (json_string_length(text))
				sse_event(&s->ev, key, json_pack("{s:s,s:O}", "stage", i ? "run" : "compile", "text", text));
		}
	json_decref(r);
}

/* Whether the run has ended (its state kept for the end event); its
 * output replayed from the result when the stream never saw the file. */
static bool check_end(struct out_stream *s)
{
	struct store_run run;
	bool fetched;
	/* A stream that never saw the file wants it, fetched from the store
	 * when the run ran on another node, else replays the result's. */
	int found = vmrund_get_run_output(s->d, s->id, s->fd < 0, &run, &fetched);
	bool ended = found == 0 || (found == 1 && store_state_terminal(run.state));
	snprintf(s->state, sizeof(s->state), "%s", found == 1 ? store_state_name(run.state) : "lost");
	if (ended && s->fd < 0 && found == 1 && run.result && !fetched)
		replay(s, run.result);
	if (found == 1)
		store_run_free(&run);
	return ended;
}

static ssize_t out_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct out_stream *s = cls;
	for (;;) {
		if (!sse_empty(&s->ev)) {
			size_t n = sse_take(&s->ev, buf, max);
			s->last_ms = clock_mono_ms();
			return (ssize_t)n;
		}
		if (s->done || s->d->closing)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (read_more(s))
			continue;
		/* The worker wrote all its output before the run could end, so
		 * reading on to the end of the file after seeing the end drains
		 * it; then the end event. */
		if (s->terminal) {
			s->done = true;
			sse_event(&s->ev, "end", json_pack("{s:s}", "state", s->state));
			continue;
		}
		if (check_end(s)) {
			s->terminal = true;
			continue;
		}
		if (clock_mono_ms() - s->last_ms >= STREAM_PING_MS)
			sse_comment(&s->ev, "waiting");
		else
			vmrund_wait(s->d, s->id, clock_mono_ms() + 200);
	}
}

static void out_free(void *cls)
{
	struct out_stream *s = cls;
	vmrund_stream_end(s->d, s->tenant);
	if (s->fd >= 0)
		close(s->fd);
	free(s->raw);
	sse_free(&s->ev);
	free(s);
}

enum MHD_Result stream_output(struct http_req *r, const char *id)
{
	if (!http_stream_begin(r))
		return MHD_YES;
	struct out_stream *s = calloc(1, sizeof(*s));
	if (!s) {
		vmrund_stream_end(r->d, (unsigned)r->tenant);
		return http_error(r, 500, 0, "out of memory");
	}
	s->d = r->d;
	s->tenant = (unsigned)r->tenant;
	s->fd = -1;
	s->last_ms = clock_mono_ms();
	snprintf(s->id, sizeof(s->id), "%s", id);
	vmrund_run_path(r->d, id, SPOOL_OUTPUT, s->path, sizeof(s->path));
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK, out_reader, s, out_free);
	if (!resp) {
		out_free(s);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	return http_queue(r, 200, resp);
}

/* ---- artifacts as a tar ------------------------------------------------- */

static ssize_t tar_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	size_t n = tar_stream_read(cls, buf, max);
	return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void tar_free(void *cls)
{
	tar_stream_free(cls);
}

enum MHD_Result stream_tar(struct http_req *r, const struct store_run *run, const char *dir)
{
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dirfd < 0)
		return http_error(r, 404, 0, "run %s kept no artifacts, or they expired", run->id);
	json_t *res = spool_result_parse(run->result);
	struct tar_stream *t = tar_stream_new(dirfd, json_object_get(res, "artifacts"));
	json_decref(res);
	if (!t)
		return http_error(r, 500, 0, "out of memory");
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK, tar_reader, t, tar_free);
	if (!resp) {
		tar_stream_free(t);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-tar");
	return http_queue(r, 200, resp);
}
