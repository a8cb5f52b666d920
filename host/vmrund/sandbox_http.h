/* A client of the sandbox APIs: vmrund's side of a sandbox supervisor's
 * (host/sandbox/supervisor.h), HTTP/1.0 over the Unix socket in the
 * sandbox's directory, and `vmrun sandbox`'s side of vmrund's (over TCP
 * or vmrund --local's Unix socket). HTTP/1.0 so
 * that the supervisor's answer is its bytes up to the end of the
 * connection, never chunked: vmrund passes an answer through (a file, a
 * live stream of events) without decoding it. The supervisor is ours,
 * but what it answers carries what the guest sent, so the head is parsed
 * with bounds like any peer's (tests/fuzz/fuzz_sandbox_http.c). */
#ifndef VMRUND_SANDBOX_HTTP_H
#define VMRUND_SANDBOX_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SBXC_HEAD_MAX 16384        /* bytes of an answer's head */
#define SBXC_TARGET_MAX 8192       /* a request's path and query */
#define SBXC_VIA "X-Vmrun-Via"     /* a request one node forwarded to another: never forwarded again */

/* An answer's head, as far as vmrund uses it. */
struct sbxc_head {
	unsigned status;              /* 100..599 */
	int64_t length;               /* Content-Length, or -1: to the end */
	char type[128];               /* Content-Type, "" when none */
	char retry_after[16];         /* Retry-After, "" when none */
};

/* One exchange with a supervisor: its connection, the head once read,
 * and the body's bytes that came with the head. */
struct sbxc {
	int fd;
	const char *auth;             /* an API key, sent as Authorization: Bearer; NULL: none */
	const char *via;              /* a node forwarding the request, sent as SBXC_VIA; NULL: none */
	const char *const *headers;   /* more of the request's headers: name, value, ..., NULL; NULL: none */
	struct sbxc_head head;
	char buf[SBXC_HEAD_MAX];
	size_t len, off;              /* buf[off..len) is body not yet taken */
};

/* Parse an answer's head from buf[0..n): its length (through the blank
 * line) when whole, 0 when more is needed (and n < SBXC_HEAD_MAX), -1
 * when it is no HTTP/1.x answer (a bad status line, a header without a
 * colon, a Content-Length that is no number, a head that does not fit).
 * Pure. */
long sbxc_parse_head(const char *buf, size_t n, struct sbxc_head *h);

/* Connect to DIR/api.sock, with send and receive timeouts of timeout_ms
 * (0: none, for a stream that may idle). 0, or -1 with errno (ENOENT or
 * ECONNREFUSED while the supervisor has no API yet). */
int sbxc_connect(struct sbxc *c, const char *dir, int timeout_ms);

/* Connect to a server as `vmrun sandbox` names one: "unix:PATH" or an
 * absolute PATH (a Unix socket), or "http://HOST[:PORT][/]" (port 80 by
 * default), with send and receive timeouts of timeout_ms (0: none). 0,
 * or -1 with errno (EINVAL for a name that is none of these). */
int sbxc_connect_server(struct sbxc *c, const char *server, int timeout_ms);

/* Where vmrund --local keeps its state and socket, for this user:
 * $XDG_RUNTIME_DIR/vmrun, else /run/vmrun/local for root, else
 * /tmp/vmrun-UID; into buf. And its socket, DIR/vmrund.sock. */
void sbxc_local_dir(char *buf, size_t len);
void sbxc_local_socket(char *buf, size_t len);

/* Send a request's head: method, target ("/commands?wait=5"), and where
 * non-NULL the Content-Type and Idempotency-Key (and c->auth, c->via,
 * c->headers); length the body's bytes that follow (sbxc_send). 0, or -1
 * with errno (EINVAL for a value with a line break, E2BIG for a head
 * past SBXC_TARGET_MAX + 1024 bytes). */
int sbxc_send_head(struct sbxc *c, const char *method, const char *target, const char *type, const char *idem,
		   uint64_t length);

/* Send all n bytes of p (no SIGPIPE): 0, or -1 with errno. */
int sbxc_send(struct sbxc *c, const void *p, size_t n);

/* Read the answer's head into c->head: 0, or -1 (errno EPROTO for one
 * sbxc_parse_head refuses, EPIPE for a connection closed before it). */
int sbxc_read_head(struct sbxc *c);

/* Read up to n bytes of the body (what came with the head first): the
 * count, 0 at its end, -1 with errno. */
ssize_t sbxc_read_body(struct sbxc *c, void *p, size_t n);

/* s percent-encoded for a query's value, into out (len bytes, cut where
 * the next character would not fit): RFC 3986's unreserved characters
 * and '/' as they are, every other byte as %XX. Pure. */
void sbxc_query_encode(const char *s, char *out, size_t len);

/* Close the connection; safe twice. */
void sbxc_close(struct sbxc *c);

/* A whole exchange with a small body each way, for vmrund's own calls
 * (GET /, DELETE /, POST /timeout): the answer's status into *status and
 * its body into *out (malloc'd, NUL-terminated, at most max bytes; the
 * caller frees it). 0, or -1 with errno (EMSGSIZE for a body past max). */
int sbxc_call(const char *dir, const char *method, const char *target, const char *body, int timeout_ms,
	      size_t max, unsigned *status, char **out);

#endif
