/* vmrund's HTTP side, on libmicrohttpd: one thread per connection (so a
 * handler may wait for a run, and a stream may wait for output), caps on
 * connections (max_connections in all, max_connections_per_address from
 * one client address), on idle time (connection_timeout_s) and on the
 * whole time a request's head may take (request_head_timeout_s, so a
 * slowloris that sends a byte at a time holds one thread that long at
 * most), on each tenant's open streams and waits (max_streams_per_tenant,
 * 429 past it), bodies capped at max_body. http.c owns the server,
 * authentication and routing, guard.c the head's deadline; the endpoints
 * live in api_v1.c (native) and api_piston.c (Piston v2) (api.h), answer
 * through the helpers here, and reach runs only through daemon.h's
 * functions. Every error is JSON {"message": ...}, with "code" (its
 * status) under E2B's prefix, whose SDK reads it. */
#ifndef VMRUND_HTTP_H
#define VMRUND_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>
#include <microhttpd.h>

struct vmrund;

/* One request as the endpoints see it. */
struct http_req {
	struct vmrund *d;
	struct MHD_Connection *conn;
	const char *method, *path;
	const char *body;             /* the whole body, NUL-terminated */
	size_t body_len;
	int tenant;                   /* who is asking (authenticated), or -1 before */
	bool error_code;              /* errors say their status as "code" too: E2B's error body */
	bool stream;                  /* a stream of its handler's (envd's Start): passed to another node, it may idle */
	bool keyed;                   /* authenticated by an API key, whose SHA-256 is key_digest */
	unsigned char key_digest[32]; /* (tenants.h's digest: what a sandbox's envd token is made with) */
	struct conn_state *cs;        /* http.c's own */
};

struct http_server;

/* Start serving on the config's address. NULL with a reason in err. */
struct http_server *http_start(struct vmrund *d, char *err, size_t errlen);

/* Stop: no new connections; waits for the threads; frees h (NULL: nothing). */
void http_stop(struct http_server *h);

/* The tenant a request without a key acts as (the config's anonymous
 * tenant, for a client on loopback unless anonymous_any), or -1. */
int http_anonymous(struct http_req *r);

/* Take one of the asking tenant's places for an output stream or a wait
 * (vmrund_stream_begin): true, or false after answering 429. */
bool http_stream_begin(struct http_req *r);

/* Answer with a JSON value (taken: decref'd here). */
enum MHD_Result http_json(struct http_req *r, unsigned status, json_t *v);

/* Answer {"message": ...}, with Retry-After when retry_s > 0. */
enum MHD_Result http_error(struct http_req *r, unsigned status, unsigned retry_s, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Answer with a body from memory (copied), of this content type. */
enum MHD_Result http_bytes(struct http_req *r, unsigned status, const char *type, const void *data, size_t len);

/* Queue a response the endpoint built (a stream), counted like the rest;
 * destroys it. */
enum MHD_Result http_queue(struct http_req *r, unsigned status, struct MHD_Response *resp);

/* Call fn(arg, sent) once, when the request is over: sent true when its
 * answer went out whole (an upgrade's handler runs, or ran), false when
 * the connection failed first (an upgrade's handler never runs: what it
 * was to own is fn's to release). One per request. */
void http_at_end(struct http_req *r, void (*fn)(void *arg, bool sent), void *arg);

/* The body as JSON: NULL after answering 415 (not application/json) or
 * 400 (malformed, too deep) already. */
json_t *http_body_json(struct http_req *r);

#endif
