/* What the two APIs (api_v1.c, the native one; api_piston.c, Piston's
 * v2) share, and their entry points, which http.c routes to. Apart from
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
int api_submit(struct http_req *r, struct run_spec *rq, char id[SCHED_ID_MAX]);

/* After a parser filled rq (parsed: its status, err its reason): 400
 * with the reason, or api_submit; rq is freed either way. 0 with the id,
 * or -1 after answering. */
int api_accept(struct http_req *r, int parsed, struct run_spec *rq, const char *err, char id[SCHED_ID_MAX]);

/* Endpoints. path is past the prefix ("/v1", "/api/v2"). Each answers. */
enum MHD_Result api_v1(struct http_req *r, const char *path);
enum MHD_Result api_piston(struct http_req *r, const char *path);

#endif
