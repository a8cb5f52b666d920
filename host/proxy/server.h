/* The proxy's event loop: every tunnel of one run, in one thread, on
 * non-blocking sockets. A guest connection's life:
 *
 *   head    read the request head (host/proxy/request.h); a bad one is
 *           answered 400/414/431/501, a slow one 408
 *   decide  the policy and the resolved address, once (net_decide); a
 *           refusal is answered 403 with the reason
 *   hello   CONNECT to port 443: answer 200, read the ClientHello, and
 *           hold its server name to the CONNECT host before dialing
 *   dial    connect to the one address decided, once the dial check
 *           (dial_guard.h) passes the socket address; plain HTTP gets its head
 *           rewritten to origin form (Connection: close)
 *   relay   host/proxy/relay.h, with the caps; a plain HTTP request to
 *           a host with a secret header goes to its port 443 over TLS
 *           instead, the header added (tls_relay.h)
 *
 * Each decision is one struct proxy_audit, kept in order, up to
 * PROXY_AUDIT_MAX (then counted). */
#ifndef VMRUN_PROXY_SERVER_H
#define VMRUN_PROXY_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <openssl/ssl.h>

#include "netpolicy.h"
#include "proxy_wire.h"

struct tunnel;

/* The last check before each connect(), on the socket address itself:
 * why not to dial it (into why[cap]), or NULL. The proxy's is
 * dial_guard_refusal (dial_guard.h); a unit test may pass its own to
 * reach a remote on loopback. */
typedef const char *(*proxy_dial_check_fn)(const void *ctx, const struct sockaddr *sa, socklen_t len, char *why,
					   size_t cap);

struct proxy_server {
	const struct proxy_config *cfg;
	int listen_fd, control_fd;    /* control readable with nothing: stop */
	net_resolve_fn resolve;
	void *resolve_ctx;
	const uint8_t (*self)[16];    /* the proxy's own addresses: never dialed */
	size_t nself;
	proxy_dial_check_fn dial_check;   /* never NULL: every connect() passes it */
	const void *dial_check_ctx;
	SSL_CTX *tls;                 /* for secret headers; NULL without */
	struct tunnel **t;            /* cfg->caps.tunnels slots */
	struct proxy_audit audit[PROXY_AUDIT_MAX];
	unsigned naudit, dropped;
};

/* Set s up; the fds, the resolver, self, the dial check and tls stay
 * the caller's. Returns 0, or -1 out of memory or without a dial check. */
int proxy_server_init(struct proxy_server *s, const struct proxy_config *cfg, int listen_fd, int control_fd,
		      net_resolve_fn resolve, void *resolve_ctx, const uint8_t (*self)[16], size_t nself,
		      proxy_dial_check_fn dial_check, const void *dial_check_ctx, SSL_CTX *tls);

/* Serve until the control socket says stop (EOF or an error on it).
 * Returns 0, or -1 when poll itself failed. */
int proxy_server_run(struct proxy_server *s);

/* End every tunnel still open ("run ended"), recording its bytes. */
void proxy_server_stop(struct proxy_server *s);

/* Send the audit: each record, then the end record. 0, or -1. */
int proxy_server_send_audit(const struct proxy_server *s, int fd);

/* Release what init took; safe twice and after a failed init. */
void proxy_server_free(struct proxy_server *s);

#endif
