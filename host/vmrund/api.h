/* What the APIs (api_v1.c, the native one; api_piston.c, Piston's v2;
 * api_judge0.c, Judge0's) share, and their entry points, which http.c routes to. Apart from
 * http.h so that the HTTP layer's header knows no handler. */
#ifndef VMRUND_API_H
#define VMRUND_API_H

#include <jansson.h>
#include <microhttpd.h>

#include "http.h"
#include "run_spec.h"
#include "scheduler.h"
#include "store.h"

/* Shared by both APIs: a stored run as the API shows it (the result's
 * fields, state, tenant, times, queue_ms); ?wait= in seconds (0 absent,
 * -1 after a 400); queue rq for the asking tenant (0, or -1 after
 * answering: an unknown runtime, 429, 503). */
json_t *api_run_view(const struct store_run *run);
int api_wait_seconds(struct http_req *r);

/* A listing's page: API_LIST_DEFAULT runs unless ?limit= says, at most
 * API_LIST_MAX. */
#define API_LIST_DEFAULT 20
#define API_LIST_MAX 100

/* ?name=, a whole number from 0 to max: dflt when absent; -1 after
 * answering 400. */
long api_query_number(struct http_req *r, const char *name, long dflt, long max);
int api_submit(struct http_req *r, struct run_spec *rq, char id[SCHED_ID_MAX]);

/* After a parser filled rq (parsed: its status, err its reason): 400
 * with the reason, or api_submit; rq is freed either way. 0 with the id,
 * or -1 after answering. */
int api_accept(struct http_req *r, int parsed, struct run_spec *rq, const char *err, char id[SCHED_ID_MAX]);

/* The request's Idempotency-Key into idem, with the hex SHA-256 of its
 * body into hash: 1 there is one, 0 none, -1 a malformed one (answered
 * 400): 1 to STORE_IDEM_KEY_MAX visible ASCII characters. */
int api_idempotency_key(struct http_req *r, struct store_idem *idem, char hash[STORE_IDEM_HASH_LEN + 1]);

/* /v1/sandboxes (api_sandboxes.c); path is past "/v1/sandboxes". */
enum MHD_Result api_sandboxes(struct http_req *r, const char *path);

/* Before a change of the asking tenant's sandbox id (it is known to
 * exist): 1 when this node is to make it (it is held here, or parked),
 * else 0 once the request was passed whole, as the client sent it (its
 * path, body and key), to the node that holds it, whose answer was the
 * answer (or after answering 502 or 503 when it could not be). */
int api_sandbox_here(struct http_req *r, const char *id);

/* A sandbox's file upload (PUT /v1/sandboxes/ID/files and .../files/tar)
 * is streamed to its supervisor as it arrives, never held whole: http.c
 * calls begin once the head is in (the tenant authenticated), data with
 * each piece of the body, end after the last, and free when the
 * connection's request is over. begin and end answer (begin only when it
 * refuses: then *u stays NULL and the body is dropped). */
struct api_upload;
bool api_sandbox_is_upload(const char *method, const char *url);
enum MHD_Result api_sandbox_upload_begin(struct http_req *r, struct api_upload **u);
void api_sandbox_upload_data(struct api_upload *u, const char *data, size_t n);
enum MHD_Result api_sandbox_upload_end(struct http_req *r, struct api_upload *u);
void api_sandbox_upload_free(struct api_upload *u);

/* Endpoints. path is past the prefix ("/v1", "/api/v2"). Each answers. */
enum MHD_Result api_v1(struct http_req *r, const char *path);
enum MHD_Result api_piston(struct http_req *r, const char *path);
/* Piston's interactive WebSocket, /api/v2/connect (api_piston_ws.c). */
enum MHD_Result api_piston_connect(struct http_req *r);
enum MHD_Result api_judge0(struct http_req *r, const char *path);   /* path past judge0_prefix */
enum MHD_Result api_e2b(struct http_req *r, const char *path);      /* path past e2b_prefix (api_e2b.c) */
/* envd, the API in an E2B sandbox (api_envd.c): whether path (past
 * e2b_prefix, or at the root of a sandbox's host name) is one of its
 * calls, and the call, which authenticates itself (the sandbox's access
 * token) and answers. host_id: the sandbox its host name names (config
 * e2b_domain), or NULL for the E2b-Sandbox-Id header's. */
bool api_envd_path(const char *path);
enum MHD_Result api_envd(struct http_req *r, const char *path, const char *host_id);

/* A call on the asking tenant's sandbox id passed through to its
 * supervisor's rest ("/files": the client's query goes with it), or to
 * the node that holds it, the answer streamed back (api_sandboxes.c). */
enum MHD_Result api_sandbox_pass(struct http_req *r, const char *id, const char *rest);

#endif
