/* The ClientHello's server name (host/proxy/tls_sni.h): read from hellos that
 * OpenSSL writes (in memory, no network), every prefix of one waited
 * on, and hand-built hellos for what OpenSSL would never send. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <openssl/ssl.h>
#include <stdbool.h>
#include <string.h>

#include "tls_sni.h"

/* OpenSSL's first flight as a client naming sni (NULL: none), at most
 * max_version: its length. */
static size_t openssl_hello(const char *sni, int max_version, uint8_t *buf, size_t cap)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	assert_non_null(ctx);
	assert_int_equal(SSL_CTX_set_max_proto_version(ctx, max_version), 1);
	SSL *ssl = SSL_new(ctx);
	BIO *in = BIO_new(BIO_s_mem()), *out = BIO_new(BIO_s_mem());
	assert_true(ssl && in && out);
	SSL_set_bio(ssl, in, out);
	if (sni)
		assert_int_equal(SSL_set_tlsext_host_name(ssl, sni), 1);
	assert_true(SSL_connect(ssl) <= 0);   /* wants the server's answer */
	int n = BIO_read(out, buf, (int)cap);
	assert_true(n > 5);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return (size_t)n;
}

static void from_openssl(void **state)
{
	(void)state;
	uint8_t buf[4096];
	char name[256];
	const char *why = NULL;
	int versions[] = { TLS1_2_VERSION, TLS1_3_VERSION };
	for (size_t v = 0; v < 2; v++) {
		size_t n = openssl_hello("pypi.org", versions[v], buf, sizeof(buf));
		assert_int_equal(tls_sni(buf, n, name, sizeof(name), &why), TLS_SNI_FOUND);
		assert_string_equal(name, "pypi.org");
		/* Every prefix of the record: wait for more. */
		size_t record = 5 + ((size_t)buf[3] << 8 | buf[4]);
		assert_true(record <= n);
		for (size_t k = 0; k < record; k++)
			assert_int_equal(tls_sni(buf, k, name, sizeof(name), &why), TLS_SNI_MORE);
		/* Too small a buffer for the name: refused, never cut. */
		assert_int_equal(tls_sni(buf, n, name, 8, &why), TLS_SNI_BAD);
		n = openssl_hello(NULL, versions[v], buf, sizeof(buf));
		assert_int_equal(tls_sni(buf, n, name, sizeof(name), &why), TLS_SNI_NONE);
	}
	size_t n = openssl_hello("xn--bcher-kva.example", TLS1_3_VERSION, buf, sizeof(buf));
	assert_int_equal(tls_sni(buf, n, name, sizeof(name), &why), TLS_SNI_FOUND);
	assert_string_equal(name, "xn--bcher-kva.example");
}

/* A hand-built hello: its extensions' bytes as given. */
struct hello {
	uint8_t b[1024];
	size_t n;
};

static void put(struct hello *h, const void *p, size_t n)
{
	memcpy(h->b + h->n, p, n);
	h->n += n;
}

static void put16(struct hello *h, size_t v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };
	put(h, b, 2);
}

/* An extension of type with the server_name list of names. */
static size_t sni_ext(uint8_t *out, unsigned type, const char *const *names, size_t k)
{
	size_t list = 0;
	for (size_t i = 0; i < k; i++)
		list += 3 + strlen(names[i]);
	size_t n = 0;
	out[n++] = (uint8_t)(type >> 8);
	out[n++] = (uint8_t)type;
	out[n++] = (uint8_t)((list + 2) >> 8);
	out[n++] = (uint8_t)(list + 2);
	out[n++] = (uint8_t)(list >> 8);
	out[n++] = (uint8_t)list;
	for (size_t i = 0; i < k; i++) {
		size_t l = strlen(names[i]);
		out[n++] = 0;
		out[n++] = (uint8_t)(l >> 8);
		out[n++] = (uint8_t)l;
		memcpy(out + n, names[i], l);
		n += l;
	}
	return n;
}

/* The record around a ClientHello body with session id sid_len and the
 * extensions exts[elen] (elen SIZE_MAX: no extension block at all). */
static struct hello build(size_t sid_len, const uint8_t *exts, size_t elen)
{
	struct hello body = { .n = 0 };
	put16(&body, 0x0303);
	uint8_t random[32] = { 0 }, sid[40] = { 0 };
	put(&body, random, 32);
	uint8_t l = (uint8_t)sid_len;
	put(&body, &l, 1);
	put(&body, sid, sid_len);
	put16(&body, 2);
	put16(&body, 0x1301);
	put(&body, "\x01\x00", 2);
	if (elen != SIZE_MAX) {
		put16(&body, elen);
		put(&body, exts, elen);
	}
	struct hello h = { .n = 0 };
	put(&h, "\x16\x03\x01", 3);
	put16(&h, body.n + 4);
	uint8_t hs[4] = { 1, (uint8_t)(body.n >> 16), (uint8_t)(body.n >> 8), (uint8_t)body.n };
	put(&h, hs, 4);
	put(&h, body.b, body.n);
	return h;
}

static enum tls_sni_result judge(const struct hello *h, char *name)
{
	const char *why = NULL;
	enum tls_sni_result r = tls_sni(h->b, h->n, name, 256, &why);
	if (r == TLS_SNI_BAD)
		assert_non_null(why);
	return r;
}

static void hand_built(void **state)
{
	(void)state;
	char name[256];
	uint8_t e[600];
	const char *one[] = { "api.example.com" };
	size_t n = sni_ext(e, 0, one, 1);
	struct hello h = build(32, e, n);
	assert_int_equal(judge(&h, name), TLS_SNI_FOUND);
	assert_string_equal(name, "api.example.com");
	/* Another extension first (ALPN's type, any bytes), then the name. */
	uint8_t e2[600] = { 0x00, 0x10, 0x00, 0x03, 1, 2, 3 };
	n = 7 + sni_ext(e2 + 7, 0, one, 1);
	h = build(0, e2, n);
	assert_int_equal(judge(&h, name), TLS_SNI_FOUND);
	/* Two server_name extensions, or two host names in one: which
	 * would the server read? Refused. */
	n = sni_ext(e, 0, one, 1);
	const char *other[] = { "evil.test" };
	n += sni_ext(e + n, 0, other, 1);
	h = build(0, e, n);
	assert_int_equal(judge(&h, name), TLS_SNI_BAD);
	const char *two[] = { "api.example.com", "evil.test" };
	n = sni_ext(e, 0, two, 2);
	h = build(0, e, n);
	assert_int_equal(judge(&h, name), TLS_SNI_BAD);
	/* Names that are not printable, or empty, or too long. */
	const char *badnames[] = { "a b", "a\tb", "\x7f", "" };
	for (size_t i = 0; i < 4; i++) {
		n = sni_ext(e, 0, &badnames[i], 1);
		h = build(0, e, n);
		assert_int_equal(judge(&h, name), TLS_SNI_BAD);
	}
	char longname[300];
	memset(longname, 'a', 254);
	longname[254] = '\0';
	const char *lp = longname;
	n = sni_ext(e, 0, &lp, 1);
	h = build(0, e, n);
	assert_int_equal(judge(&h, name), TLS_SNI_BAD);
	/* No extensions, or none that names a server. */
	h = build(0, NULL, SIZE_MAX);
	assert_int_equal(judge(&h, name), TLS_SNI_NONE);
	h = build(0, e2, 7);
	assert_int_equal(judge(&h, name), TLS_SNI_NONE);
	/* Lengths that disagree. */
	n = sni_ext(e, 0, one, 1);
	h = build(0, e, n);
	h.b[h.n - 1 - strlen("api.example.com") - 3] ^= 1;   /* the list's length */
	assert_int_equal(judge(&h, name), TLS_SNI_BAD);
	h = build(33, e, n);   /* a session id over 32 */
	assert_int_equal(judge(&h, name), TLS_SNI_BAD);
	h = build(0, e, n);
	h.b[0] = 0x17;   /* application data, not a handshake */
	assert_int_equal(judge(&h, name), TLS_SNI_BAD);
	h = build(0, e, n);
	h.b[5] = 2;   /* a ServerHello */
	assert_int_equal(judge(&h, name), TLS_SNI_BAD);
	h = build(0, e, n);
	h.b[8]++;   /* the handshake runs past its record: split over records */
	assert_int_equal(judge(&h, name), TLS_SNI_BAD);
	h = build(0, e, n);
	h.b[3] = 0x40;   /* a record over 16 KiB */
	assert_int_equal(judge(&h, name), TLS_SNI_BAD);
	assert_int_equal(tls_sni((const uint8_t *)"GET / HTTP/1.1\r\n", 16, name, 256, NULL), TLS_SNI_BAD);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(from_openssl),
		cmocka_unit_test(hand_built),
	};
	return cmocka_run_group_tests_name("tls_sni", tests, NULL, NULL);
}
