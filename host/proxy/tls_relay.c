/* A secret header's tunnel (tls_relay.h). */
#include "tls_relay.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <poll.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "errmsg.h"
#include "proxy_wire.h"

#define TLS_CA_MAX (4 << 20)   /* a CA file, bytes */

void tls_relay_init(struct tls_relay *t, int guest, int remote, SSL *ssl, const uint8_t *first, size_t n,
		    const struct relay_limits *lim, int64_t now_ms)
{
	memset(t, 0, sizeof(*t));
	t->guest = guest;
	t->remote = remote;
	t->ssl = ssl;
	t->lim = *lim;
	t->last_ms = now_ms;
	t->want = POLLOUT;   /* the ClientHello goes first */
	if (n > RELAY_BUF) {
		t->end = RELAY_ERROR;
		snprintf(t->why, sizeof(t->why), "the request head is too large");
		return;
	}
	memcpy(t->up, first, n);
	t->up_len = n;
	t->moved[RELAY_GUEST] = n;
	if (n > lim->max_up)
		t->end = RELAY_UP_CAP;   /* as relay_init: the head counts */
}

short tls_relay_events(const struct tls_relay *t, enum relay_side s)
{
	if (t->end != RELAY_RUNNING)
		return 0;
	if (s == RELAY_GUEST)
		return (short)((t->handshaken && !t->guest_eof && t->up_off == t->up_len ? POLLIN : 0) |
			       (t->down_off < t->down_len ? POLLOUT : 0));
	if (t->want)
		return t->want;
	/* the last pass still moved bytes (its cap of passes): read on
	 * while there is room for the response */
	return t->handshaken && !t->remote_eof && t->down_off == t->down_len ? POLLIN : 0;
}

int64_t tls_relay_timeout_ms(const struct tls_relay *t, int64_t now_ms)
{
	int64_t left = t->last_ms + t->lim.idle_ms - now_ms;
	return left > 0 ? left : 0;
}

/* Why a TLS call failed, for the audit. */
static enum relay_end tls_failed(struct tls_relay *t, const char *what)
{
	long v = SSL_get_verify_result(t->ssl);
	unsigned long e = ERR_get_error();
	if (v != X509_V_OK)
		snprintf(t->why, sizeof(t->why), "TLS %s: certificate verify failed: %s", what,
			 X509_verify_cert_error_string(v));
	else if (e)
		snprintf(t->why, sizeof(t->why), "TLS %s: %s", what, ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "error");
	else
		snprintf(t->why, sizeof(t->why), "TLS %s: %s", what, errno ? strerror(errno) : "the connection ended");
	ERR_clear_error();
	return t->end = RELAY_ERROR;
}

/* A TLS call's result r: 1 when it moved bytes, 0 when it must wait (what
 * for added to want), -1 when the tunnel failed. */
static int tls_result(struct tls_relay *t, int r, const char *what)
{
	if (r > 0)
		return 1;
	switch (SSL_get_error(t->ssl, r)) {
	case SSL_ERROR_WANT_READ: t->want |= POLLIN; return 0;
	case SSL_ERROR_WANT_WRITE: t->want |= POLLOUT; return 0;
	case SSL_ERROR_ZERO_RETURN: t->remote_eof = true; return 0;
	default: tls_failed(t, what); return -1;
	}
}

/* One pass over every direction: whether anything moved. */
static int pass(struct tls_relay *t)
{
	int moved = 0, r;
	/* What the remote waits for is what this pass's TLS calls wait for,
	 * all of them: a write waiting for room while a read waits for bytes
	 * wants both, and a read not tried (the guest has yet to take the
	 * last) wants nothing. */
	t->want = 0;
	if (!t->handshaken) {
		ERR_clear_error();
		r = SSL_connect(t->ssl);
		if ((r = tls_result(t, r, "handshake")) <= 0)
			return r;
		t->handshaken = true;
		moved = 1;
	}
	if (t->up_off < t->up_len) {   /* the guest's bytes, into TLS */
		ERR_clear_error();
		r = SSL_write(t->ssl, t->up + t->up_off, (int)(t->up_len - t->up_off));
		int k = tls_result(t, r, "write");
		if (k < 0)
			return -1;
		if (k > 0) {
			t->up_off += (size_t)r;
			moved = 1;
		}
	}
	if (t->up_off == t->up_len && !t->guest_eof) {   /* more from the guest */
		ssize_t n = recv(t->guest, t->up, sizeof(t->up), MSG_DONTWAIT);
		if (n > 0) {
			t->up_len = (size_t)n;
			t->up_off = 0;
			t->moved[RELAY_GUEST] += (uint64_t)n;
			if (t->moved[RELAY_GUEST] > t->lim.max_up)
				return t->end = RELAY_UP_CAP, -1;
			moved = 1;
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			t->guest_eof = true;   /* not passed on: the response still comes */
		}
	}
	if (t->down_off == t->down_len && !t->remote_eof) {   /* the response, out of TLS */
		ERR_clear_error();
		r = SSL_read(t->ssl, t->down, (int)sizeof(t->down));
		int k = tls_result(t, r, "read");
		if (k < 0)
			return -1;
		if (k > 0) {
			t->down_len = (size_t)r;
			t->down_off = 0;
			t->moved[RELAY_REMOTE] += (uint64_t)r;
			if (t->moved[RELAY_REMOTE] > t->lim.max_down)
				return t->end = RELAY_DOWN_CAP, -1;
			moved = 1;
		}
	}
	if (t->down_off < t->down_len) {   /* to the guest */
		ssize_t n = send(t->guest, t->down + t->down_off, t->down_len - t->down_off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			t->down_off += (size_t)n;
			moved = 1;
		} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
			snprintf(t->why, sizeof(t->why), "the guest: %s", strerror(errno));
			return t->end = RELAY_ERROR, -1;
		}
	}
	return moved;
}

enum relay_end tls_relay_step(struct tls_relay *t, const short revents[2], int64_t now_ms)
{
	(void)revents;   /* every direction is tried: TLS reads may need writes and back */
	if (t->end != RELAY_RUNNING)
		return t->end;
	for (int i = 0; i < 64; i++) {
		int r = pass(t);
		if (r < 0)
			return t->end;
		if (r == 0)
			break;
		t->last_ms = now_ms;
	}
	if (t->remote_eof && t->down_off == t->down_len)
		return t->end = RELAY_CLOSED;
	if (now_ms - t->last_ms >= t->lim.idle_ms)
		return t->end = RELAY_IDLE;
	return RELAY_RUNNING;
}

void tls_relay_free(struct tls_relay *t)
{
	if (t->ssl)
		SSL_free(t->ssl);
	t->ssl = NULL;
}

/* The CA file's certificates into store: how many, or -1. */
static int load_cas(X509_STORE *store, int fd, char *err, size_t errlen)
{
	char *buf = malloc(TLS_CA_MAX);
	size_t len = 0;
	ssize_t n;
	if (!buf)
		return errf(err, errlen, "proxy: out of memory");
	while (len < TLS_CA_MAX && (n = read(fd, buf + len, TLS_CA_MAX - len)) > 0)
		len += (size_t)n;
	BIO *b = BIO_new_mem_buf(buf, (int)len);
	int count = 0;
	X509 *x;
	while (b && (x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
		if (X509_STORE_add_cert(store, x) == 1)
			count++;
		X509_free(x);
	}
	ERR_clear_error();
	BIO_free(b);
	free(buf);
	if (!count)
		return errf(err, errlen, "proxy: the CA file holds no PEM certificate");
	return count;
}

SSL_CTX *tls_relay_context(int ca_fd, char *err, size_t errlen)
{
	OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, NULL);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx) {
		errf(err, errlen, "proxy: SSL_CTX_new failed");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/* a server that closes without close_notify has still ended its
	 * response (Connection: close) */
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	int ok = ca_fd >= 0 ? load_cas(SSL_CTX_get_cert_store(ctx), ca_fd, err, errlen) > 0
			    : SSL_CTX_load_verify_file(ctx, PROXY_SYSTEM_CAS) == 1;
	if (!ok) {
		if (ca_fd < 0)
			errf(err, errlen, "proxy: %s: cannot load the system's CAs", PROXY_SYSTEM_CAS);
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

SSL *tls_relay_session(SSL_CTX *ctx, int fd, const char *host, char *err, size_t errlen)
{
	SSL *ssl = SSL_new(ctx);
	if (!ssl || SSL_set_fd(ssl, fd) != 1 || SSL_set_tlsext_host_name(ssl, host) != 1 || SSL_set1_host(ssl, host) != 1) {
		errf(err, errlen, "TLS: cannot set up a session for %s", host);
		SSL_free(ssl);
		return NULL;
	}
	SSL_set_connect_state(ssl);
	return ssl;
}
