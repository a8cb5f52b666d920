/* The head of one request from the guest to its host proxy (DESIGN: the
 * guest's HTTP proxy forwards each connection over vsock to a per-run
 * host proxy): either CONNECT host:port, which opens a tunnel, or a plain
 * HTTP request in absolute form ("GET http://host/path HTTP/1.1"), which
 * the proxy sends on in origin form. Parsed by Node's http_parser
 * (Debian's libhttp-parser); what this adds is what a proxy must hold the
 * parse to. Guest input throughout: every refusal is an HTTP status and a
 * one-line reason, never a crash. */
#ifndef VMRUN_PROXY_REQUEST_H
#define VMRUN_PROXY_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "netpolicy.h"

#define PROXY_HEAD_MAX    (16 * 1024)   /* request line and headers, in bytes */
#define PROXY_TARGET_MAX  8192          /* the request target */
#define PROXY_HEADERS_MAX 64

struct proxy_header {
	char *name, *value;   /* as sent; a folded value joined with one space */
};

struct proxy_request {
	bool connect;                     /* a tunnel: no path, no headers kept */
	char method[24];
	char host[NET_HOST_MAX + 1];      /* as the guest wrote it, an IPv6 literal without brackets */
	uint16_t port;                    /* the target's, else 80 */
	char *path;                       /* plain HTTP: the origin-form target ("/" when none) */
	unsigned http_minor;              /* HTTP/1.x */
	/* Plain HTTP: the headers to send on, without the hop-by-hop ones
	 * (Connection, the ones it names, Proxy-*, Keep-Alive, TE, Trailer,
	 * Upgrade) and without Host, which the target's authority replaces. */
	struct proxy_header h[PROXY_HEADERS_MAX];
	unsigned nh;
	size_t head_len;                  /* bytes of the input that were the head */
};

/* Parse the head at the start of buf[len]: 1 when it is complete (*out
 * filled; proxy_request_free releases it; the bytes after head_len are
 * the body or the tunnel's first data), 0 when more input is needed,
 * else the HTTP status to answer (400, 414, 431, 501) with the reason in
 * err, *out left empty. */
int proxy_request_parse(const char *buf, size_t len, struct proxy_request *out, char *err, size_t errlen);

/* Free what parse allocated and zero *r; safe twice. */
void proxy_request_free(struct proxy_request *r);

/* The head to send upstream for a plain HTTP request: its request line
 * in origin form, "Host: " the target's authority, its kept headers but
 * any named drop (NULL: none), then "Connection: close" and, when
 * add_name is non-NULL, "add_name: add_value" (the host proxy's secret
 * header, which the guest never sees). A malloc'd string (*len bytes),
 * NULL out of memory. */
char *proxy_request_upstream(const struct proxy_request *r, const char *drop, const char *add_name,
			     const char *add_value, size_t *len);

#endif
