/* vmrund's own calls to a tenant's sandboxes, for what it builds on
 * them (a judge's compile and tests, an interactor talking to a
 * contestant): the requests a client sends to /v1/sandboxes/ID, made
 * straight to the sandbox's supervisor, under the tenant's ceilings. */
#ifndef VMRUND_SANDBOX_CALLS_H
#define VMRUND_SANDBOX_CALLS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "sandbox_http.h"
#include "sse.h"
#include "scheduler.h"

struct vmrund;

#define SBXU_CALL_MS 30000           /* a call that waits on nothing */

/* Whose sandboxes, and why the last call failed. */
struct sbx_user {
	struct vmrund *d;
	unsigned tenant;
	char err[512];
};

/* A new sandbox of the tenant's from body (taken: decref'd): 0 with its
 * id, or -1 with u->err. */
int sbxu_create(struct sbx_user *u, json_t *body, char id[SCHED_ID_MAX]);

/* Delete sandbox id; a failure is said in vmrund's log, not returned
 * (it ends with its timeout anyway). */
void sbxu_destroy(struct sbx_user *u, const char *id);

/* A call to sandbox id with a JSON body (NULL: none) whose answer must
 * be status want: its JSON body (an empty object when none; the caller
 * decrefs), or NULL with u->err. */
json_t *sbxu_expect(struct sbx_user *u, const char *id, const char *method, const char *target, const json_t *body,
		    int timeout_ms, int want);

/* A call to sandbox id with a JSON body (NULL: none): the answer's
 * status with its JSON body into *out (NULL when it is none or not
 * JSON; the caller decrefs), or -1 with u->err when no answer came. */
int sbxu_call(struct sbx_user *u, const char *id, const char *method, const char *target, const json_t *body,
	      int timeout_ms, json_t **out);

/* Put n bytes at path (relative ones under /workspace; at most
 * SBXU_PATH_MAX bytes) in sandbox id: 0; the supervisor's status
 * (400..599) when it refused, with u->err; or -1 with u->err when no
 * answer came. */
#define SBXU_PATH_MAX 2048            /* a path percent-encoded stays within SBXC_TARGET_MAX */
int sbxu_put_file(struct sbx_user *u, const char *id, const char *path, const void *data, size_t n);

/* The file at path in sandbox id, at most max bytes, into *out
 * (malloc'd and NUL-terminated, its length in *n; the caller frees it):
 * 0; 1 when there is no such file (*out NULL); -1 with u->err (a file
 * past max among the reasons). */
int sbxu_get_file(struct sbx_user *u, const char *id, const char *path, size_t max, char **out, size_t *n);

/* Run argv (taken) in sandbox id with stdin (in_len bytes) under
 * timeout_s and limits (the command's own "limits"; NULL: none), waiting
 * for its end: its answer (exit, usage, output), or NULL with u->err. */
json_t *sbxu_command(struct sbx_user *u, const char *id, json_t *argv, const char *in, size_t in_len,
		     double timeout_s, const json_t *limits);

/* Start argv (taken) in sandbox id in the background, its stdin open,
 * under timeout_s: its command id (> 0), or 0 with u->err. */
unsigned sbxu_start(struct sbx_user *u, const char *id, json_t *argv, double timeout_s);

/* Write n bytes to command cid's stdin, then close it when close, within
 * timeout_ms: 0; 1 when it takes nothing more (it ended, or its stdin is
 * closed: 409); -1 with u->err. */
int sbxu_stdin(struct sbx_user *u, const char *id, unsigned cid, const char *data, size_t n, bool close,
	       int timeout_ms);

/* Send signal signo to command cid: 0, or -1 with u->err (409: it has
 * ended). */
int sbxu_signal(struct sbx_user *u, const char *id, unsigned cid, int signo);

/* Command cid of sandbox id as it stands (with its output): its answer,
 * or NULL with u->err. */
json_t *sbxu_command_get(struct sbx_user *u, const char *id, unsigned cid);

/* Follow command cid's events (GET .../events: its output from the
 * start, then exit) on c, left open for the caller to read (c->fd can be
 * polled; bytes that came with the head are in c->buf first) and close:
 * 0, or -1 with u->err. */
int sbxu_events(struct sbx_user *u, const char *id, unsigned cid, struct sbxc *c);

#define SBXU_EVENTS_MAX (8u << 20)   /* an event's bytes while they wait for its end */

/* One read of the events sbxu_events opened on c, each whole event
 * handed to on (sse_parse's); what is not yet whole is kept in *buf
 * (*len bytes; the caller frees it). 1 when it read and passed them on,
 * 0 when the stream is over: its end, the sandbox gone, bytes that are
 * no events, or out of memory. */
int sbxu_events_read(struct sbxc *c, char **buf, size_t *len, sse_on_event on, void *ctx);

#endif
