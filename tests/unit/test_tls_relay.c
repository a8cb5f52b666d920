/* A secret header's tunnel (host/proxy/tls_relay.h), between two
 * socketpairs: the test plays the guest on one and, in a thread of its
 * own, an OpenSSL server on the other, with a key and a self-signed
 * certificate made here at run time (its own CA). The handshake and the
 * request head in plaintext at the server, the answer back, the ends
 * with and without close_notify, a large answer to a slow guest and a
 * large upload (back-pressure both ways), certificates that must not
 * verify, each cap, idling out, and freeing twice. Time is passed in;
 * every wait is bounded, so a bug fails rather than hangs. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tls_relay.h"

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A byte of a long stream at offset i: a hash of i, so that bytes out of
 * place do not match. */
static uint8_t pat(size_t i)
{
	return (uint8_t)(((uint32_t)i * 2654435761u) >> 24);
}

/* ---- keys and certificates, made once ---- */

static EVP_PKEY *key_a, *key_b;
static X509 *cert_ok, *cert_other, *cert_stranger;   /* ok.test; other.test; ok.test by key_b */

static X509 *make_cert(EVP_PKEY *key, const char *cn, const char *san, long serial)
{
	X509 *x = X509_new();
	assert_non_null(x);
	assert_int_equal(X509_set_version(x, 2), 1);
	assert_int_equal(ASN1_INTEGER_set(X509_get_serialNumber(x), serial), 1);
	assert_non_null(X509_gmtime_adj(X509_getm_notBefore(x), -3600));
	assert_non_null(X509_gmtime_adj(X509_getm_notAfter(x), 86400));
	assert_int_equal(X509_set_pubkey(x, key), 1);
	X509_NAME *name = X509_get_subject_name(x);
	assert_int_equal(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0), 1);
	assert_int_equal(X509_set_issuer_name(x, name), 1);
	X509V3_CTX v3;
	X509V3_set_ctx_nodb(&v3);
	X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
	char dns[64];
	snprintf(dns, sizeof(dns), "DNS:%s", san);
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, dns);
	assert_non_null(ext);
	assert_int_equal(X509_add_ext(x, ext, -1), 1);
	X509_EXTENSION_free(ext);
	assert_true(X509_sign(x, key, EVP_sha256()) > 0);
	return x;
}

static int setup(void **state)
{
	(void)state;
	signal(SIGPIPE, SIG_IGN);   /* as the proxy does: a server writing to a closed tunnel */
	key_a = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	key_b = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	if (!key_a || !key_b)
		return -1;
	cert_ok = make_cert(key_a, "ok.test", "ok.test", 1);
	cert_other = make_cert(key_a, "other.test", "other.test", 2);
	cert_stranger = make_cert(key_b, "ok.test", "ok.test", 3);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	X509_free(cert_ok);
	X509_free(cert_other);
	X509_free(cert_stranger);
	EVP_PKEY_free(key_a);
	EVP_PKEY_free(key_b);
	return 0;
}

/* A CA file holding cert (NULL: text that is no certificate), open for
 * reading and already unlinked: its descriptor. */
static int ca_file(X509 *cert)
{
	char path[] = "/tmp/test_tls_relay_ca.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	FILE *f = fdopen(fd, "w");
	assert_non_null(f);
	if (cert)
		assert_int_equal(PEM_write_X509(f, cert), 1);
	else
		fputs("-----BEGIN NOTHING-----\nnot a certificate\n-----END NOTHING-----\n", f);
	assert_int_equal(fclose(f), 0);
	int rd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(rd >= 0);
	unlink(path);
	return rd;
}

/* The proxy's context, trusting ca. */
static SSL_CTX *client_ctx(X509 *ca)
{
	char err[256] = "";
	int fd = ca_file(ca);
	SSL_CTX *ctx = tls_relay_context(fd, err, sizeof(err));
	close(fd);
	if (!ctx)
		print_error("tls_relay_context: %s\n", err);
	assert_non_null(ctx);
	return ctx;
}

/* ---- the server, in a thread of its own, blocking ---- */

struct server {
	int fd;
	X509 *cert;
	EVP_PKEY *key;
	bool tls12, no_tickets;
	size_t head_len;             /* the request head's length: what follows is pat() */
	size_t expect;               /* request bytes to take before answering */
	const uint8_t *resp;         /* the answer (NULL: resp_len pat() bytes) */
	size_t resp_len;
	bool close_notify;           /* end with close_notify, else just close */
	bool hold;                   /* answer nothing: read until the tunnel goes */
	/* what it saw */
	int accepted;                /* 1: handshake done, -1: failed */
	uint8_t got[1024];
	size_t total;                /* request bytes taken */
	bool pattern_ok;
	atomic_bool ready;           /* expect bytes in */
	pthread_t th;
};

static void *serve(void *arg)
{
	struct server *s = arg;
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	SSL *ssl = NULL;
	if (!ctx || SSL_CTX_use_certificate(ctx, s->cert) != 1 || SSL_CTX_use_PrivateKey(ctx, s->key) != 1)
		goto out;
	if (s->tls12)
		SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
	if (s->no_tickets)
		SSL_CTX_set_num_tickets(ctx, 0);
	ssl = SSL_new(ctx);
	if (!ssl || SSL_set_fd(ssl, s->fd) != 1)
		goto out;
	if (SSL_accept(ssl) != 1) {
		s->accepted = -1;
		goto out;
	}
	s->accepted = 1;
	s->pattern_ok = true;
	static _Thread_local uint8_t buf[16384];
	while (s->total < s->expect) {
		int n = SSL_read(ssl, buf, sizeof(buf));
		if (n <= 0)
			goto out;
		for (int j = 0; j < n; j++) {
			size_t at = s->total + (size_t)j;
			if (at < sizeof(s->got))
				s->got[at] = buf[j];
			if (at >= s->head_len && buf[j] != pat(at - s->head_len))
				s->pattern_ok = false;
		}
		s->total += (size_t)n;
	}
	atomic_store(&s->ready, true);
	if (s->hold) {
		while (SSL_read(ssl, buf, sizeof(buf)) > 0)
			;
		goto out;
	}
	for (size_t off = 0; off < s->resp_len;) {
		size_t k = s->resp_len - off < sizeof(buf) ? s->resp_len - off : sizeof(buf);
		if (s->resp)
			memcpy(buf, s->resp + off, k);
		else
			for (size_t j = 0; j < k; j++)
				buf[j] = pat(off + j);
		int n = SSL_write(ssl, buf, (int)k);
		if (n <= 0)
			goto out;
		off += (size_t)n;
	}
	if (s->close_notify)
		SSL_shutdown(ssl);
out:
	ERR_clear_error();
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	close(s->fd);
	return NULL;
}

static bool server_ready(void *arg)
{
	return atomic_load(&((struct server *)arg)->ready);
}

/* ---- the tunnel's two socketpairs, the guest's end, the pump ---- */

struct rig {
	int guest, remote;           /* the tunnel's ends (non-blocking) */
	int guest_peer;              /* the guest's (non-blocking) */
	struct server srv;           /* its fd: the remote's other end (blocking) */
	SSL_CTX *ctx;
	struct tls_relay *t;
	bool started;
	/* the guest */
	const uint8_t *send;         /* what it sends, as room allows */
	size_t send_len, sent;
	uint8_t *recv;               /* what reached it (NULL: it reads nothing) */
	size_t cap, got;
	size_t chunk;                /* at most this much read a turn */
	bool slow;                   /* read only while the tunnel waits for room */
	bool full;                   /* it does, now */
	unsigned fulls;              /* times it came to */
	bool read_while_full;        /* and also waited to read the remote */
};

static void nonblock(int fd)
{
	assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

/* Set up both pairs and the proxy's context, trusting ca; the server
 * (r->srv, filled in by the caller but for fd) starts in start(). */
static void rig_init(struct rig *r, X509 *ca)
{
	int a[2], b[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, b), 0);
	r->guest_peer = a[0];
	r->guest = a[1];
	r->remote = b[0];
	r->srv.fd = b[1];
	nonblock(r->guest_peer);
	nonblock(r->guest);
	nonblock(r->remote);
	r->ctx = client_ctx(ca);
	r->t = test_malloc(sizeof(*r->t));
	r->chunk = 65536;
}

static SSL *session(struct rig *r, const char *host)
{
	char err[256] = "";
	SSL *ssl = tls_relay_session(r->ctx, r->remote, host, err, sizeof(err));
	if (!ssl)
		print_error("tls_relay_session: %s\n", err);
	assert_non_null(ssl);
	return ssl;
}

static void start(struct rig *r, const char *host, const char *head, const struct relay_limits *lim, int64_t now)
{
	r->srv.head_len = strlen(head);
	if (!r->srv.expect)
		r->srv.expect = r->srv.head_len;
	tls_relay_init(r->t, r->guest, r->remote, session(r, host), (const uint8_t *)head, strlen(head), lim, now);
	assert_int_equal(pthread_create(&r->srv.th, NULL, serve, &r->srv), 0);
	r->started = true;
}

/* The tunnel gone: its descriptors closed (which ends any server still
 * reading or writing), the server joined, all freed. */
static void rig_done(struct rig *r)
{
	tls_relay_free(r->t);
	close(r->guest);
	close(r->remote);
	close(r->guest_peer);
	if (r->started)
		assert_int_equal(pthread_join(r->srv.th, NULL), 0);
	else
		close(r->srv.fd);
	SSL_CTX_free(r->ctx);
	test_free(r->t);
	ERR_clear_error();
}

/* The guest's turn: send what it may, read at most chunk. */
static void guest_turn(struct rig *r, short rev)
{
	if ((rev & POLLOUT) && r->sent < r->send_len) {
		ssize_t n = send(r->guest_peer, r->send + r->sent, r->send_len - r->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0)
			r->sent += (size_t)n;
	}
	if (r->recv && (rev & (POLLIN | POLLHUP))) {
		static uint8_t buf[65536];
		size_t want = r->chunk < sizeof(buf) ? r->chunk : sizeof(buf);
		ssize_t n = recv(r->guest_peer, buf, want, MSG_DONTWAIT);
		if (n > 0) {
			size_t k = r->got + (size_t)n <= r->cap ? (size_t)n : r->cap - r->got;
			memcpy(r->recv + r->got, buf, k);
			r->got += (size_t)n;
			assert_true(r->got <= r->cap);
		}
	}
}

/* Poll the tunnel's two descriptors for what it asks, and the guest's,
 * and step the tunnel on what came (as the proxy's loop does), at the
 * given clock: until it ends, until() holds, nothing happens for 50 ms
 * (quiet), or 15 s pass (RELAY_RUNNING). */
static enum relay_end pump(struct rig *r, int64_t now, bool (*until)(void *), void *arg, bool quiet)
{
	struct tls_relay *t = r->t;
	int64_t deadline = mono_ms() + 15000;
	while (t->end == RELAY_RUNNING && mono_ms() < deadline) {
		if (until && until(arg))
			break;
		short ge = tls_relay_events(t, RELAY_GUEST), re = tls_relay_events(t, RELAY_REMOTE);
		bool was = r->full;
		r->full = ge & POLLOUT;   /* the guest's socket is full */
		if (r->full) {
			r->fulls += !was;
			if (re & POLLIN)   /* and the remote is still read: a busy loop */
				r->read_while_full = true;
		}
		bool reads = r->recv && (!r->slow || r->full);
		short pe = (short)((reads ? POLLIN : 0) | (r->sent < r->send_len ? POLLOUT : 0));
		struct pollfd f[3] = { { ge ? t->guest : -1, ge, 0 },
				       { re ? t->remote : -1, re, 0 },
				       { pe ? r->guest_peer : -1, pe, 0 } };
		int n = poll(f, 3, 50);
		assert_true(n >= 0);
		if (f[2].revents)
			guest_turn(r, f[2].revents);
		if (f[0].revents || f[1].revents) {
			short rev[2] = { f[0].revents, f[1].revents };
			tls_relay_step(t, rev, now);
		} else if (n == 0 && quiet) {
			break;
		}
	}
	return t->end;
}

/* What is left for the guest, all of it. */
static void drain(struct rig *r)
{
	r->chunk = 65536;
	r->slow = false;
	for (int i = 0; i < 100000; i++) {
		struct pollfd f = { r->guest_peer, POLLIN, 0 };
		if (poll(&f, 1, 0) <= 0)
			return;
		size_t before = r->got;
		guest_turn(r, f.revents);
		if (r->got == before)
			return;   /* end of file */
	}
}

static const char head[] = "GET /v1/x HTTP/1.1\r\nHost: ok.test\r\nAuthorization: Bearer s3cret\r\n"
			   "Connection: close\r\n\r\n";
static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

/* ---- the cases ---- */

static void answered(void **state)
{
	(void)state;
	/* TLS 1.3 ending with close_notify, and without; TLS 1.2 without. */
	struct { bool tls12, notify; } runs[] = { { false, true }, { false, false }, { true, false } };
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		struct rig r = { 0 };
		rig_init(&r, cert_ok);
		r.srv.cert = cert_ok;
		r.srv.key = key_a;
		r.srv.tls12 = runs[i].tls12;
		r.srv.resp = (const uint8_t *)answer;
		r.srv.resp_len = strlen(answer);
		r.srv.close_notify = runs[i].notify;
		uint8_t got[256];
		r.recv = got;
		r.cap = sizeof(got);
		/* Exactly each cap: fine. */
		struct relay_limits lim = { strlen(head), strlen(answer), 60000 };
		start(&r, "ok.test", head, &lim, 0);
		assert_int_equal(tls_relay_events(r.t, RELAY_REMOTE), POLLOUT);   /* the ClientHello first */
		assert_int_equal(tls_relay_events(r.t, RELAY_GUEST), 0);         /* nothing read before the handshake */
		assert_int_equal(pump(&r, 1, NULL, NULL, false), RELAY_CLOSED);
		drain(&r);
		assert_true(r.t->handshaken);
		assert_int_equal(SSL_version(r.t->ssl), runs[i].tls12 ? TLS1_2_VERSION : TLS1_3_VERSION);
		assert_string_equal(r.t->why, "");
		assert_int_equal(tls_relay_events(r.t, RELAY_GUEST), 0);
		assert_int_equal(tls_relay_events(r.t, RELAY_REMOTE), 0);
		assert_int_equal(tls_relay_step(r.t, (short[2]){ 0, 0 }, 2), RELAY_CLOSED);   /* it stays ended */
		/* The head reached the server as it was, in plaintext. */
		assert_int_equal(r.srv.accepted, 1);
		assert_int_equal(r.srv.total, strlen(head));
		assert_memory_equal(r.srv.got, head, strlen(head));
		/* The answer reached the guest, whole. */
		assert_int_equal(r.got, strlen(answer));
		assert_memory_equal(got, answer, strlen(answer));
		assert_int_equal(r.t->moved[RELAY_GUEST], strlen(head));
		assert_int_equal(r.t->moved[RELAY_REMOTE], strlen(answer));
		rig_done(&r);
	}
}

static void large_answer(void **state)
{
	(void)state;
	const size_t big = 3u << 20;
	struct rig r = { 0 };
	rig_init(&r, cert_ok);
	r.srv.cert = cert_ok;
	r.srv.key = key_a;
	r.srv.resp_len = big;   /* pat() bytes */
	r.srv.close_notify = true;
	r.recv = test_malloc(big);
	r.cap = big;
	r.chunk = 4096;   /* a slow guest */
	r.slow = true;
	struct relay_limits lim = { 1 << 20, 4u << 20, 60000 };
	start(&r, "ok.test", head, &lim, 0);
	assert_int_equal(pump(&r, 1, NULL, NULL, false), RELAY_CLOSED);
	drain(&r);
	assert_int_equal(r.got, big);
	size_t bad = big;
	for (size_t i = 0; i < big && bad == big; i++)
		if (r.recv[i] != pat(i))
			bad = i;
	assert_int_equal(bad, big);   /* whole and in order */
	assert_int_equal(r.t->moved[RELAY_REMOTE], big);
	/* The guest's socket filled (how often: as the server keeps up), and
	 * the tunnel then waited on the guest alone, not on the remote too. */
	print_message("    the guest's socket filled %u times\n", r.fulls);
	assert_true(r.fulls > 0);
	assert_false(r.read_while_full);
	test_free(r.recv);
	rig_done(&r);
}

static void large_upload(void **state)
{
	(void)state;
	/* A body after the head, larger than every buffer on the way: the
	 * tunnel must wait for the remote's room, and the guest's bytes,
	 * as the proxy's loop polls for what it asks. */
	const size_t body = 2u << 20;
	uint8_t *up = test_malloc(body);
	for (size_t i = 0; i < body; i++)
		up[i] = pat(i);
	struct rig r = { 0 };
	rig_init(&r, cert_ok);
	r.srv.cert = cert_ok;
	r.srv.key = key_a;
	r.srv.expect = strlen(head) + body;
	r.srv.resp = (const uint8_t *)answer;
	r.srv.resp_len = strlen(answer);
	r.send = up;
	r.send_len = body;
	uint8_t got[256];
	r.recv = got;
	r.cap = sizeof(got);
	struct relay_limits lim = { 4u << 20, 1 << 20, 60000 };
	start(&r, "ok.test", head, &lim, 0);
	assert_int_equal(pump(&r, 1, NULL, NULL, false), RELAY_CLOSED);
	drain(&r);
	assert_int_equal(r.srv.total, strlen(head) + body);
	assert_true(r.srv.pattern_ok);
	assert_memory_equal(r.srv.got, head, strlen(head));
	assert_int_equal(r.got, strlen(answer));
	assert_int_equal(r.t->moved[RELAY_GUEST], strlen(head) + body);
	test_free(up);
	rig_done(&r);
}

/* The tunnel's end when the server shows cert and the proxy trusts ca. */
static void refused(X509 *cert, EVP_PKEY *key, X509 *ca, const char *want)
{
	struct rig r = { 0 };
	rig_init(&r, ca);
	r.srv.cert = cert;
	r.srv.key = key;
	uint8_t got[256];
	r.recv = got;
	r.cap = sizeof(got);
	struct relay_limits lim = { 1 << 20, 1 << 20, 60000 };
	start(&r, "ok.test", head, &lim, 0);
	assert_int_equal(pump(&r, 1, NULL, NULL, false), RELAY_ERROR);
	print_message("    why: %s\n", r.t->why);
	assert_non_null(strstr(r.t->why, "certificate verify failed"));
	if (want)
		assert_non_null(strstr(r.t->why, want));
	assert_false(r.t->handshaken);
	assert_int_equal(tls_relay_events(r.t, RELAY_GUEST), 0);
	assert_int_equal(tls_relay_events(r.t, RELAY_REMOTE), 0);
	rig_done(&r);
	assert_int_equal(r.srv.accepted, -1);
	assert_int_equal(r.srv.total, 0);   /* the head never went */
	assert_int_equal(r.got, 0);
}

static void bad_certificates(void **state)
{
	(void)state;
	refused(cert_other, key_a, cert_other, "hostname mismatch");   /* trusted, for another name */
	refused(cert_stranger, key_b, cert_ok, NULL);                  /* the right name, not trusted */
	refused(cert_ok, key_a, cert_other, NULL);
}

static void bad_ca_file(void **state)
{
	(void)state;
	char err[256] = "";
	int fd = ca_file(NULL);
	assert_null(tls_relay_context(fd, err, sizeof(err)));
	assert_non_null(strstr(err, "no PEM certificate"));
	close(fd);
	/* An empty one too. */
	char path[] = "/tmp/test_tls_relay_ca.XXXXXX";
	fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	err[0] = 0;
	assert_null(tls_relay_context(fd, err, sizeof(err)));
	assert_non_null(strstr(err, "no PEM certificate"));
	close(fd);
	ERR_clear_error();
}

static void down_cap(void **state)
{
	(void)state;
	static uint8_t resp[1000];
	memset(resp, 'z', sizeof(resp));
	struct rig r = { 0 };
	rig_init(&r, cert_ok);
	r.srv.cert = cert_ok;
	r.srv.key = key_a;
	r.srv.resp = resp;
	r.srv.resp_len = sizeof(resp);
	r.srv.close_notify = true;
	uint8_t got[2048];
	r.recv = got;
	r.cap = sizeof(got);
	struct relay_limits lim = { 1 << 20, sizeof(resp) - 1, 60000 };
	start(&r, "ok.test", head, &lim, 0);
	assert_int_equal(pump(&r, 1, NULL, NULL, false), RELAY_DOWN_CAP);
	drain(&r);
	assert_true(r.t->moved[RELAY_REMOTE] > lim.max_down);
	assert_true(r.got <= lim.max_down);   /* nothing past the cap reached the guest */
	assert_int_equal(tls_relay_events(r.t, RELAY_GUEST), 0);
	assert_int_equal(tls_relay_events(r.t, RELAY_REMOTE), 0);
	rig_done(&r);
}

static void up_cap(void **state)
{
	(void)state;
	uint8_t body[11];
	for (size_t i = 0; i < sizeof(body); i++)
		body[i] = pat(i);
	struct rig r = { 0 };
	rig_init(&r, cert_ok);
	r.srv.cert = cert_ok;
	r.srv.key = key_a;
	r.srv.expect = strlen(head) + 10;
	r.srv.hold = true;
	/* The head counts: ten bytes more is the cap exactly, fine. */
	struct relay_limits lim = { strlen(head) + 10, 1 << 20, 60000 };
	r.send = body;
	r.send_len = 10;
	start(&r, "ok.test", head, &lim, 0);
	assert_int_equal(pump(&r, 1, server_ready, &r.srv, false), RELAY_RUNNING);
	assert_true(server_ready(&r.srv));
	assert_int_equal(r.srv.total, strlen(head) + 10);
	assert_true(r.srv.pattern_ok);
	assert_int_equal(r.t->moved[RELAY_GUEST], strlen(head) + 10);
	/* One more: over. */
	r.send_len = 11;
	assert_int_equal(pump(&r, 2, NULL, NULL, false), RELAY_UP_CAP);
	assert_int_equal(r.t->moved[RELAY_GUEST], strlen(head) + 11);
	assert_int_equal(tls_relay_events(r.t, RELAY_GUEST), 0);
	rig_done(&r);
	assert_int_equal(r.srv.total, strlen(head) + 10);   /* the byte over never went */
}

static void idle(void **state)
{
	(void)state;
	struct rig r = { 0 };
	rig_init(&r, cert_ok);
	r.srv.cert = cert_ok;
	r.srv.key = key_a;
	r.srv.no_tickets = true;   /* nothing comes after the handshake */
	r.srv.hold = true;
	uint8_t got[256];
	r.recv = got;
	r.cap = sizeof(got);
	struct relay_limits lim = { 1 << 20, 1 << 20, 5000 };
	start(&r, "ok.test", head, &lim, 1000);
	assert_int_equal(tls_relay_timeout_ms(r.t, 1000), 5000);
	assert_int_equal(pump(&r, 2000, server_ready, &r.srv, false), RELAY_RUNNING);
	assert_true(server_ready(&r.srv));
	assert_int_equal(pump(&r, 2000, NULL, NULL, true), RELAY_RUNNING);
	/* Bytes moved at 2000: the clock started again then. */
	assert_int_equal(tls_relay_timeout_ms(r.t, 3000), 4000);
	short none[2] = { 0, 0 };
	assert_int_equal(tls_relay_step(r.t, none, 6999), RELAY_RUNNING);
	assert_int_equal(tls_relay_step(r.t, none, 7000), RELAY_IDLE);
	assert_int_equal(tls_relay_timeout_ms(r.t, 9000), 0);
	assert_int_equal(tls_relay_events(r.t, RELAY_REMOTE), 0);
	rig_done(&r);
}

static void free_twice(void **state)
{
	(void)state;
	struct rig r = { 0 };
	rig_init(&r, cert_ok);
	/* A head too large: ended at once, and the session is still taken. */
	static uint8_t huge[RELAY_BUF + 1];
	struct relay_limits lim = { 1 << 20, 1 << 20, 60000 };
	tls_relay_init(r.t, r.guest, r.remote, session(&r, "ok.test"), huge, sizeof(huge), &lim, 0);
	assert_int_equal(r.t->end, RELAY_ERROR);
	assert_non_null(strstr(r.t->why, "too large"));
	assert_int_equal(tls_relay_events(r.t, RELAY_REMOTE), 0);
	assert_int_equal(tls_relay_step(r.t, (short[2]){ POLLIN, POLLIN }, 1), RELAY_ERROR);
	tls_relay_free(r.t);
	assert_null(r.t->ssl);
	tls_relay_free(r.t);   /* safe (rig_done frees a third time) */
	rig_done(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(answered),   cmocka_unit_test(large_answer), cmocka_unit_test(large_upload),
		cmocka_unit_test(bad_certificates), cmocka_unit_test(bad_ca_file), cmocka_unit_test(down_cap),
		cmocka_unit_test(up_cap),     cmocka_unit_test(idle),         cmocka_unit_test(free_twice),
	};
	return cmocka_run_group_tests_name("tls_relay", tests, setup, teardown);
}
