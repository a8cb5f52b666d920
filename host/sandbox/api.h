/* What the sandbox API's files share (api.c, api_commands.c,
 * api_files.c): the answers, waiting on the guest, a request's state, and
 * each endpoint's handler, which routing in api.c calls. Internal to
 * host/sandbox/. */
#ifndef VMRUN_SANDBOX_API_H
#define VMRUN_SANDBOX_API_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>
#include <microhttpd.h>

#include "supervisor.h"

#define WAIT_MAX_S 3600   /* ?wait= at most */

/* What one request accumulates between calls. */
struct req_state {
	char *body;
	size_t len, cap;
	bool too_big, answered;
	/* PUT /files: the write under way */
	struct sbx_fop *write;
	uint32_t write_id;
	bool write_failed;
};

/* Answer with bytes of a content type (copied), JSON (taken: decref'd,
 * a newline after it), or {"message": ...}. */
enum MHD_Result api_answer_bytes(struct MHD_Connection *conn, unsigned status, const char *type, const void *p, size_t n);
enum MHD_Result api_answer_json(struct MHD_Connection *conn, unsigned status, json_t *v);
enum MHD_Result api_answer_error(struct MHD_Connection *conn, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The HTTP status for a guest's errno from a file operation. Pure. */
unsigned api_errno_status(int e);

/* Wait (mu held) until done(arg), for wait_ms at most (INT64_MAX:
 * forever), measured on the monotonic clock: a wall clock set while a
 * request waits neither ends the wait early nor stretches it. */
void api_wait_for(struct sbx *s, bool (*done)(void *), void *arg, int64_t wait_ms);

/* ?wait=S: seconds, 0 when absent, WAIT_MAX_S for a bare "wait"; -1 when
 * not a number in 0..WAIT_MAX_S. */
long api_wait_arg(struct MHD_Connection *conn);

/* Give back a reference on c (taken by routing's lookup, or by
 * api_post_command). */
void api_command_put(struct sbx *s, struct sbx_cmd *c);

/* ---- api_commands.c: each takes the request's parsed body where it has one ---- */

/* POST /commands: text (len bytes) is the raw body, what an
 * Idempotency-Key is held to. */
enum MHD_Result api_post_command(struct sbx *s, struct MHD_Connection *conn, const char *text, size_t len,
				 json_t *body);
enum MHD_Result api_list_commands(struct sbx *s, struct MHD_Connection *conn);
/* Command c (a reference held), once it ended or wait_s passed. */
enum MHD_Result api_answer_cmd(struct sbx *s, struct MHD_Connection *conn, struct sbx_cmd *c, long wait_s,
			       unsigned status);
enum MHD_Result api_cmd_stdin(struct sbx *s, struct MHD_Connection *conn, struct sbx_cmd *c, json_t *body);
enum MHD_Result api_cmd_signal(struct sbx *s, struct MHD_Connection *conn, struct sbx_cmd *c, json_t *body);
/* POST .../resize {"cols", "rows"}: the terminal of a command started with "pty". */
enum MHD_Result api_cmd_resize(struct sbx *s, struct MHD_Connection *conn, struct sbx_cmd *c, json_t *body);
/* The stream takes over the reference on c, and gives it back at its end. */
enum MHD_Result api_cmd_events(struct sbx *s, struct MHD_Connection *conn, struct sbx_cmd *c);

/* ---- checkpoint.c ---- */

/* GET /checkpoints: {"checkpoints": [{name, created_at, bytes}]}. */
enum MHD_Result api_list_checkpoints(struct sbx *s, struct MHD_Connection *conn);
/* GET or DELETE /checkpoints/NAME. */
enum MHD_Result api_checkpoint(struct sbx *s, struct MHD_Connection *conn, const char *method, const char *name);

/* ---- diff.c ---- */

/* GET /diff?from=F&to=T: the workspace's change (wsdiff.h) as JSON. */
enum MHD_Result api_diff(struct sbx *s, struct MHD_Connection *conn);

/* ---- api_files.c ---- */

/* STAT, MKDIR, REMOVE, RENAME (path2: its target): answered once the guest
 * answered. */
enum MHD_Result api_fop_simple(struct sbx *s, struct MHD_Connection *conn, uint32_t op, const char *path,
			       const char *path2);
enum MHD_Result api_list_files(struct sbx *s, struct MHD_Connection *conn, const char *path);
/* GET /files (a file's bytes), or /files/tar with tar (a directory as a
 * tar, which the guest makes). */
enum MHD_Result api_get_file(struct sbx *s, struct MHD_Connection *conn, const char *path, bool tar);
/* PUT /files, or /files/tar with tar (a tar the guest extracts into the
 * directory): called for the head, each piece of the body, and its end. */
enum MHD_Result api_put_file(struct sbx *s, struct MHD_Connection *conn, struct req_state *st, const char *upload,
			     size_t *upload_size, bool tar);

#endif
