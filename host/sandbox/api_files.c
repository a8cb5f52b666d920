/* The sandbox's files over HTTP (host/sandbox/supervisor.h): read and
 * write streamed to and from the guest, list, stat, mkdir, remove,
 * rename. */
#include "api.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/sha.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

static bool fop_ended(void *arg) { return ((struct sbx_fop *)arg)->ended; }

/* ---- files ------------------------------------------------------------------------------ */

/* Start file operation op on path (path2 for RENAME, mode for WRITE and
 * MKDIR): its slot, sent; NULL after answering why not. */
static struct sbx_fop *fop_start(struct sbx *s, struct MHD_Connection *conn, uint32_t op, const char *path,
				 const char *path2, uint32_t mode, enum MHD_Result *rc)
{
	struct proto_file_req *r = calloc(1, sizeof(*r));
	if (!r) {
		*rc = api_answer_error(conn, 500, "out of memory");
		return NULL;
	}
	if (!path || !*path || strlen(path) > PROTO_MAX_STR || (path2 && (!*path2 || strlen(path2) > PROTO_MAX_STR))) {
		free(r);
		*rc = api_answer_error(conn, 400, "path: 1 to %u bytes", PROTO_MAX_STR);
		return NULL;
	}
	pthread_mutex_lock(&s->mu);
	struct sbx_fop *f = s->state == SBX_RUNNING ? sbx_fop_new(s, op) : NULL;
	bool running = s->state == SBX_RUNNING;
	pthread_mutex_unlock(&s->mu);
	if (!f) {
		free(r);
		*rc = running ? api_answer_error(conn, 429, "%d file operations are under way", SBX_MAX_FILE_OPS)
			      : api_answer_error(conn, 409, "the sandbox is not running");
		return NULL;
	}
	*r = (struct proto_file_req){ .id = f->id, .op = op, .mode = mode };
	snprintf(r->path, sizeof(r->path), "%s", path);
	snprintf(r->path2, sizeof(r->path2), "%s", path2 ? path2 : "");
	uint8_t buf[2 * PROTO_MAX_STR + 64];
	size_t n = proto_encode_file_req(r, buf, sizeof(buf));
	free(r);
	if (!n || sbx_send(s, PROTO_FILE_OP, buf, (uint32_t)n, NULL, 0) < 0) {
		pthread_mutex_lock(&s->mu);
		sbx_fop_free(f);
		pthread_mutex_unlock(&s->mu);
		*rc = n ? api_answer_error(conn, 409, "the sandbox is not running") : api_answer_error(conn, 400, "a bad path");
		return NULL;
	}
	return f;
}

/* Wait for f's end; mu held on return. */
static void fop_wait(struct sbx *s, struct sbx_fop *f)
{
	pthread_mutex_lock(&s->mu);
	api_wait_for(s, fop_ended, f, INT64_MAX);
}

enum MHD_Result api_fop_simple(struct sbx *s, struct MHD_Connection *conn, uint32_t op, const char *path,
				  const char *path2)
{
	enum MHD_Result rc;
	struct sbx_fop *f = fop_start(s, conn, op, path, path2, 0, &rc);
	if (!f)
		return rc;
	fop_wait(s, f);
	int e = f->error;
	json_t *j = e ? NULL : f->has_entry ? sbx_entry_json(&f->entry) : json_pack("{s:b}", "ok", 1);
	sbx_fop_free(f);
	pthread_mutex_unlock(&s->mu);
	return e ? api_answer_error(conn, api_errno_status(e), "%s: %s", path, strerror(e)) : api_answer_json(conn, 200, j);
}

enum MHD_Result api_list_files(struct sbx *s, struct MHD_Connection *conn, const char *path)
{
	enum MHD_Result rc;
	struct sbx_fop *f = fop_start(s, conn, PROTO_FILE_LIST, path, NULL, 0, &rc);
	if (!f)
		return rc;
	fop_wait(s, f);
	int e = f->error;
	json_t *a = json_array();
	char err[128];
	struct proto_entry entry;
	for (uint32_t at = 0; !e && at < f->len && !proto_next_entry(f->data, (uint32_t)f->len, &at, &entry, err,
								      sizeof(err));)
		json_array_append_new(a, sbx_entry_json(&entry));
	bool truncated = f->flags & PROTO_FILE_TRUNCATED;
	sbx_fop_free(f);
	pthread_mutex_unlock(&s->mu);
	if (e) {
		json_decref(a);
		return api_answer_error(conn, api_errno_status(e), "%s: %s", path, strerror(e));
	}
	return api_answer_json(conn, 200, json_pack("{s:o,s:b}", "entries", a, "truncated", truncated));
}

/* A file's bytes as they come from the guest. */
struct download {
	struct sbx *s;
	struct sbx_fop *f;
};

static ssize_t download_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct download *d = cls;
	struct sbx *s = d->s;
	struct sbx_fop *f = d->f;
	pthread_mutex_lock(&s->mu);
	while (f->taken == f->len && !f->ended && !f->dropping)
		pthread_cond_wait(&s->cv, &s->mu);
	ssize_t n;
	uint32_t id = f->id;
	if (f->taken < f->len && !f->dropping) {
		size_t k = f->len - f->taken < max ? f->len - f->taken : max;
		memcpy(buf, f->data + f->taken, k);
		f->taken += k;
		n = (ssize_t)k;
	} else {
		/* an error after bytes went out can only cut the body short */
		n = f->error || f->dropping ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
	}
	pthread_mutex_unlock(&s->mu);
	if (n > 0)
		sbx_fop_credit(s, id, (uint32_t)n);   /* the guest may send as much again */
	return n;
}

static void download_free(void *cls)
{
	struct download *d = cls;
	pthread_mutex_lock(&d->s->mu);
	if (d->f->ended)
		sbx_fop_free(d->f);
	else
		d->f->abandoned = true;   /* its FILE_END frees it */
	pthread_mutex_unlock(&d->s->mu);
	free(d);
}

/* The first bytes (or the end) decide the status: an error before any
 * byte is an error answer, not an empty file. */
enum MHD_Result api_get_file(struct sbx *s, struct MHD_Connection *conn, const char *path, bool tar)
{
	enum MHD_Result rc;
	struct sbx_fop *f = fop_start(s, conn, tar ? PROTO_FILE_TAR_OUT : PROTO_FILE_READ, path, NULL, 0, &rc);
	if (!f)
		return rc;
	pthread_mutex_lock(&s->mu);
	while (!f->len && !f->ended && !f->dropping)
		pthread_cond_wait(&s->cv, &s->mu);
	int e = f->dropping ? EIO : f->len ? 0 : f->error;
	if (e) {
		sbx_fop_free(f);
		pthread_mutex_unlock(&s->mu);
		return api_answer_error(conn, api_errno_status(e), "%s: %s", path, strerror(e));
	}
	pthread_mutex_unlock(&s->mu);
	struct download *d = malloc(sizeof(*d));
	struct MHD_Response *r = d ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 65536, download_reader, d,
								      download_free) : NULL;
	if (!r) {
		pthread_mutex_lock(&s->mu);
		f->abandoned = true;
		if (f->ended)
			sbx_fop_free(f);
		pthread_mutex_unlock(&s->mu);
		free(d);
		return MHD_NO;
	}
	*d = (struct download){ s, f };
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, tar ? "application/x-tar" : "application/octet-stream");
	rc = MHD_queue_response(conn, 200, r);
	MHD_destroy_response(r);
	return rc;
}

/* PUT /files: the head (start the write), each piece of the body (sent on
 * as it comes), then its end (the answer). */
enum MHD_Result api_put_file(struct sbx *s, struct MHD_Connection *conn, struct req_state *st, const char *upload,
				size_t *upload_size, bool tar)
{
	enum MHD_Result rc;
	if (!st->write && !st->write_failed) {
		const char *path = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "path");
		const char *mode_s = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "mode");
		const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		char *end = NULL;
		unsigned long mode = mode_s ? strtoul(mode_s, &end, 8) : 0;
		st->write_failed = true;
		st->answered = true;
		if (mode_s && (tar || *end || !mode || mode > 07777))
			return api_answer_error(conn, 400, "mode: octal permissions, 1 to 7777, of a file (not a tar)");
		if (cl && strtoull(cl, NULL, 10) > s->max_upload)
			return api_answer_error(conn, 413, "the file is over %llu bytes", (unsigned long long)s->max_upload);
		if (!(st->write = fop_start(s, conn, tar ? PROTO_FILE_TAR_IN : PROTO_FILE_WRITE, path, NULL, (uint32_t)mode,
					    &rc)))
			return rc;
		st->write_id = st->write->id;
		st->write_failed = st->answered = false;
		return MHD_YES;
	}
	if (st->write_failed)   /* answered already: the rest of the body is dropped */
		return (*upload_size = 0), MHD_YES;
	if (*upload_size) {
		size_t n = *upload_size;
		*upload_size = 0;
		st->len += n;
		if (st->len > s->max_upload) {
			st->too_big = true;
			return MHD_YES;
		}
		for (size_t at = 0; !st->too_big && at < n;) {
			uint32_t k = n - at > PROTO_SB_CHUNK ? PROTO_SB_CHUNK : (uint32_t)(n - at);
			if (sbx_send(s, PROTO_FILE_DATA, &st->write_id, PROTO_SB_ID_LEN, upload + at, k) < 0)
				st->too_big = true;   /* the link is down: its end says so */
			at += k;
		}
		return MHD_YES;
	}
	(void)sbx_send(s, PROTO_FILE_DATA, &st->write_id, PROTO_SB_ID_LEN, NULL, 0);
	struct sbx_fop *f = st->write;
	st->write = NULL;
	st->write_failed = true;
	fop_wait(s, f);
	int e = f->error;
	sbx_fop_free(f);
	pthread_mutex_unlock(&s->mu);
	const char *path = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "path");
	if (st->len > s->max_upload)
		return api_answer_error(conn, 413, "the file is over %llu bytes (what came is written: remove it)",
				    (unsigned long long)s->max_upload);
	if (e)
		return api_answer_error(conn, api_errno_status(e), "%s: %s", path, strerror(e));
	return api_answer_json(conn, 200, json_pack("{s:s,s:I}", "path", path, "size", (json_int_t)st->len));
}

