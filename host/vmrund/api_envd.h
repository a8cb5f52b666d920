/* Between api_envd.c (routing, who is asking, Connect's answers,
 * process.Process) and api_envd_fs.c (filesystem.Filesystem, envd's
 * /files): one envd call and what both answer it with. */
#ifndef VMRUND_API_ENVD_H
#define VMRUND_API_ENVD_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <microhttpd.h>

#include "envd.h"
#include "http.h"
#include "sandbox_calls.h"
#include "store.h"

/* One envd call: whose, on which sandbox, and how its errors go. */
struct call {
	struct http_req *r;
	struct sbx_user u;
	char id[STORE_ID_LEN + 1];
	bool stream;                  /* a server stream: errors are its end message, on a 200 */
	bool plain;                   /* /files and /health: errors are E2B's HTTP ones, not Connect's */
	const char *host_id;          /* the sandbox the request's host name names, or NULL */
};

/* Connect's error: a unary call's status and {"code", "message"}; a
 * stream's 200 with only its end message; for /files and /health (plain)
 * E2B's HTTP error, a sandbox that is not running 502. */
enum MHD_Result call_fail(struct call *c, enum envd_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A supervisor's call (status, or -1: none came, c->u.err) that did not
 * answer what was wanted: its status as Connect's code, with what it
 * said (out's message) after what. */
enum MHD_Result call_failed(struct call *c, int status, const json_t *out, const char *what);

/* A unary call's answer, msg (taken); NULL is out of memory. */
enum MHD_Result call_unary(struct call *c, json_t *msg);

/* The sandbox the call names, its tenant by its token (or the anonymous
 * tenant's), and that it runs here: 1 to go on; 0 after answering, or
 * after passing the call to the node that holds the sandbox. */
int call_begin(struct call *c);

/* The call's message: a unary call's JSON body, a stream's one envelope.
 * NULL after answering 400. */
json_t *call_message(struct call *c);

/* One of the tenant's stream places for a stream call: true (given back
 * by whoever ends the stream: vmrund_stream_end), or false after
 * answering resource_exhausted. */
bool call_place(struct call *c);

/* The client's Connect-Timeout-Ms (0: none; at most ENVD_NO_TIMEOUT_S),
 * and the keepalive interval it asks for, in ms. */
int64_t call_timeout_ms(struct http_req *r);
int64_t call_ping_ms(struct http_req *r);

/* A server stream on its way to the client, the part process streams
 * and WatchDir share: the frames waiting, the client's deadline, the
 * keepalives. */
struct pace {
	struct envd_out out;
	int64_t deadline_ms;          /* monotonic; 0: none */
	int64_t ping_ms, next_ping_ms;
	const char *deadline_why;     /* the end's message when the deadline passes */
	json_t *keepalive;            /* the message a keepalive sends (held) */
};

/* p set up for a stream of r's call: its deadline the client's timeout
 * and slack_ms from now (none without a timeout), deadline_why said
 * then, keepalive (taken) sent at the interval the client asks for. */
void pace_start(struct pace *p, struct http_req *r, int64_t slack_ms, const char *deadline_why, json_t *keepalive);

/* A stream's read callback: what waits in p (at most max bytes into
 * buf), else the stream's end, else its deadline's end or a keepalive,
 * else step(ctx, now, until), which waits at most until then for more
 * and frames what came into p->out. */
ssize_t pace_read(struct pace *p, char *buf, size_t max, void (*step)(void *ctx, int64_t now, int64_t until),
		  void *ctx);

/* Release what p holds; safe on a zeroed one. */
void pace_free(struct pace *p);

/* filesystem.Filesystem/METHOD (api_envd_fs.c). */
enum MHD_Result envd_filesystem(struct call *c, const char *method);

/* envd's /files: GET reads a file, POST writes files (api_envd_fs.c). */
enum MHD_Result envd_files(struct call *c);

#endif
