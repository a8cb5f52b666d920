/* The proxy's request head (host/proxy/request.h): CONNECT and
 * absolute-form requests, what is dropped and kept, the head written
 * upstream, and every refusal with its status. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"

static char err[256];

static int parse(const char *text, struct proxy_request *r)
{
	err[0] = '\0';
	return proxy_request_parse(text, strlen(text), r, err, sizeof(err));
}

/* text is refused with status, the reason saying why. */
static void refused(const char *text, int status, const char *why)
{
	struct proxy_request r;
	int rc = parse(text, &r);
	if (rc != status || !strstr(err, why))
		fail_msg("%.60s: %d \"%s\", want %d \"%s\"", text, rc, err, status, why);
	assert_null(strchr(err, '\n'));
	assert_int_equal(r.nh, 0);
	assert_null(r.path);
}

static void connect_tunnel(void **state)
{
	(void)state;
	struct proxy_request r;
	const char *in = "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\nUser-Agent: pip\r\n\r\n\x16\x03\x01";
	assert_int_equal(parse(in, &r), 1);
	assert_true(r.connect);
	assert_string_equal(r.method, "CONNECT");
	assert_string_equal(r.host, "pypi.org");
	assert_int_equal(r.port, 443);
	assert_int_equal(r.head_len, strlen(in) - 3);   /* the TLS bytes after are the tunnel's */
	proxy_request_free(&r);
	proxy_request_free(&r);   /* safe twice */
	assert_int_equal(parse("CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n", &r), 1);
	assert_string_equal(r.host, "2001:db8::1");
	assert_int_equal(r.port, 8443);
	proxy_request_free(&r);
	/* Not all there yet. */
	assert_int_equal(parse("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi", &r), 0);
	assert_int_equal(parse("", &r), 0);
	refused("CONNECT pypi.org HTTP/1.1\r\n\r\n", 400, "host:port");
	refused("CONNECT pypi.org:0 HTTP/1.1\r\n\r\n", 400, "");
	refused("CONNECT /x HTTP/1.1\r\n\r\n", 400, "host:port");
}

static void plain_http(void **state)
{
	(void)state;
	struct proxy_request r;
	const char *in = "GET http://Mirror.test:8080/simple/pkg/?x=1#frag HTTP/1.1\r\n"
			 "Host: elsewhere.test\r\n"
			 "User-Agent: curl/7.88\r\n"
			 "Proxy-Connection: keep-alive\r\n"
			 "Proxy-Authorization: Basic Zm9v\r\n"
			 "Connection: keep-alive, X-Hop\r\n"
			 "Keep-Alive: 5\r\n"
			 "X-Hop: gone\r\n"
			 "Authorization: from the guest\r\n"
			 "Accept: */*\r\n"
			 "Content-Length: 4\r\n"
			 "\r\n"
			 "body";
	assert_int_equal(parse(in, &r), 1);
	assert_false(r.connect);
	assert_string_equal(r.method, "GET");
	assert_string_equal(r.host, "Mirror.test");   /* normalizing is the policy's */
	assert_int_equal(r.port, 8080);
	assert_string_equal(r.path, "/simple/pkg/?x=1");
	assert_int_equal(r.head_len, strlen(in) - 4);
	assert_int_equal(r.nh, 4);
	size_t len;
	char *up = proxy_request_upstream(&r, "authorization", "Authorization", "Bearer s3cret", &len);
	assert_non_null(up);
	assert_int_equal(len, strlen(up));
	assert_string_equal(up, "GET /simple/pkg/?x=1 HTTP/1.1\r\n"
				"Host: Mirror.test:8080\r\n"
				"User-Agent: curl/7.88\r\n"
				"Accept: */*\r\n"
				"Content-Length: 4\r\n"
				"Connection: close\r\n"
				"Authorization: Bearer s3cret\r\n"
				"\r\n");
	free(up);
	up = proxy_request_upstream(&r, NULL, NULL, NULL, &len);   /* no secret: the guest's header stays */
	assert_non_null(strstr(up, "Authorization: from the guest\r\n"));
	free(up);
	proxy_request_free(&r);

	assert_int_equal(parse("POST http://[fd00::1]/ HTTP/1.0\nA: 1\n folded\n\n", &r), 1);   /* bare LF, a fold */
	assert_string_equal(r.host, "fd00::1");
	assert_int_equal(r.port, 80);
	assert_int_equal(r.http_minor, 0);
	assert_int_equal(r.nh, 1);
	assert_string_equal(r.h[0].value, "1 folded");
	up = proxy_request_upstream(&r, NULL, NULL, NULL, &len);
	assert_non_null(strstr(up, "POST / HTTP/1.1\r\nHost: [fd00::1]\r\n"));
	free(up);
	proxy_request_free(&r);
	assert_int_equal(parse("HEAD http://a.test HTTP/1.1\r\n\r\n", &r), 1);
	assert_string_equal(r.path, "/");
	proxy_request_free(&r);
}

static void refusals(void **state)
{
	(void)state;
	refused("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", 400, "http://HOST/PATH");
	refused("GET https://a.test/ HTTP/1.1\r\n\r\n", 400, "CONNECT");
	refused("GET ftp://a.test/ HTTP/1.1\r\n\r\n", 501, "only http://");
	refused("GET http://user:pw@a.test/ HTTP/1.1\r\n\r\n", 400, "user name");
	refused("GET http:///x HTTP/1.1\r\n\r\n", 400, "");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "more than one Host");
	refused("GET http://a.test/ HTTP/1.1\r\nX: a\x01b\r\n\r\n", 400, "");
	refused("GET http://a.test/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "");
	refused("GET http://a.test/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400, "");
	refused("hello\r\n\r\n", 400, "not an HTTP request");
	refused("\x16\x03\x01\x02\x01\x01\xfc\x03\x03\r\n\r\n", 400, "not an HTTP request");   /* TLS to the proxy port */

	char *big = malloc(PROXY_HEAD_MAX + 64);
	assert_non_null(big);
	/* No end of the head within the limit. */
	memset(big, 'a', PROXY_HEAD_MAX + 10);
	memcpy(big, "GET http://a.test/ HTTP/1.1\r\nX: ", 32);
	big[PROXY_HEAD_MAX + 10] = '\0';
	refused(big, 431, "over");
	/* A long target. */
	int n = snprintf(big, PROXY_HEAD_MAX, "GET http://a.test/");
	memset(big + n, 'p', PROXY_TARGET_MAX);
	strcpy(big + n + PROXY_TARGET_MAX, " HTTP/1.1\r\n\r\n");
	refused(big, 414, "target");
	/* Too many headers. */
	n = snprintf(big, PROXY_HEAD_MAX, "GET http://a.test/ HTTP/1.1\r\n");
	for (int i = 0; i <= PROXY_HEADERS_MAX; i++)
		n += snprintf(big + n, PROXY_HEAD_MAX - (size_t)n, "X-%d: v\r\n", i);
	strcpy(big + n, "\r\n");
	refused(big, 431, "headers");
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(connect_tunnel),
		cmocka_unit_test(plain_http),
		cmocka_unit_test(refusals),
	};
	return cmocka_run_group_tests_name("proxy_request", tests, NULL, NULL);
}
