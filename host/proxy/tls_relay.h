/* A secret header's tunnel: the guest's plain HTTP on one side, TLS to
 * the real host on the other, which the proxy opens, verifies and
 * speaks (DESIGN: the guest never holds the platform's secret). The same
 * shape as host/proxy/relay.h, with the same caps, so one loop serves
 * both: the owner polls the two descriptors for what tls_relay_events
 * asks and steps. The guest's half-close is not passed on (the request
 * says Connection: close; the tunnel ends once the response is all
 * delivered). */
#ifndef VMRUN_PROXY_TLS_RELAY_H
#define VMRUN_PROXY_TLS_RELAY_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdint.h>

#include "relay.h"

struct tls_relay {
	int guest, remote;
	SSL *ssl;                      /* the tunnel's; freed by tls_relay_free */
	struct relay_limits lim;
	bool handshaken;
	short want;                    /* what the last TLS call waits for on remote, 0: none */
	uint8_t up[RELAY_BUF], down[RELAY_BUF];
	size_t up_len, up_off, down_len, down_off;
	bool guest_eof, remote_eof;
	uint64_t moved[2];             /* by enum relay_side: bytes that side sent */
	int64_t last_ms;
	enum relay_end end;
	char why[160];                 /* RELAY_ERROR: what failed ("certificate verify failed: ...") */
};

/* Start: ssl is set up for the connected remote (SNI, host check); first
 * (n bytes, at most RELAY_BUF) is the request head to send once the
 * handshake is done. Takes ssl. */
void tls_relay_init(struct tls_relay *t, int guest, int remote, SSL *ssl, const uint8_t *first, size_t n,
		    const struct relay_limits *lim, int64_t now_ms);

/* The poll events side s waits for now. */
short tls_relay_events(const struct tls_relay *t, enum relay_side s);

/* Ms until the tunnel idles out (0: it has). */
int64_t tls_relay_timeout_ms(const struct tls_relay *t, int64_t now_ms);

/* Move what can be moved: the tunnel's end, RELAY_RUNNING while it goes
 * on. */
enum relay_end tls_relay_step(struct tls_relay *t, const short revents[2], int64_t now_ms);

/* The proxy's TLS client context, made before it jails itself: TLS 1.2
 * at least, the peer verified against the certificates read from ca_fd
 * (PEM; -1: the system's PROXY_SYSTEM_CAS, read now, in whole). NULL
 * with why in err. */
SSL_CTX *tls_relay_context(int ca_fd, char *err, size_t errlen);

/* A session for one tunnel to host over the connected fd: SNI host, and
 * the certificate must name host. NULL with why. */
SSL *tls_relay_session(SSL_CTX *ctx, int fd, const char *host, char *err, size_t errlen);

/* Free the TLS session (the descriptors stay the caller's). Safe twice. */
void tls_relay_free(struct tls_relay *t);

#endif
