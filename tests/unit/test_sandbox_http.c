/* vmrund's client of a sandbox supervisor (host/vmrund/sandbox_http.c):
 * answer heads parsed (whole, in pieces, malformed, values made
 * printable) and a whole exchange with a stand-in supervisor on a Unix
 * socket: the request as sent, the body read to the end, a body past the
 * cap refused, and a header that would end the head early refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sandbox_http.h"

static long parse(const char *s, struct sbxc_head *h)
{
	return sbxc_parse_head(s, strlen(s), h);
}

static void heads(void **state)
{
	(void)state;
	struct sbxc_head h;
	const char *ok = "HTTP/1.0 201 Created\r\nContent-Type: application/json\r\ncontent-length: 12\r\n"
			 "Retry-After: 3\r\nX-Other: y\r\n\r\n{\"a\":1}";
	assert_int_equal(parse(ok, &h), (long)(strstr(ok, "\r\n\r\n") - ok) + 4);
	assert_int_equal(h.status, 201);
	assert_int_equal(h.length, 12);
	assert_string_equal(h.type, "application/json");
	assert_string_equal(h.retry_after, "3");
	assert_int_equal(parse("HTTP/1.1 200 OK\r\n\r\n", &h), 19);
	assert_int_equal(h.length, -1);
	assert_string_equal(h.type, "");
	/* in pieces: more is needed until the blank line */
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n", &h), 0);
	assert_int_equal(parse("", &h), 0);
	/* values go on into a client's answer: printable ASCII only */
	assert_true(parse("HTTP/1.0 200 OK\r\nContent-Type: a\x01" "b\r\n\r\n", &h) > 0);
	assert_string_equal(h.type, "a?b");
	const char *bad[] = {
		"HTTP/2.0 200 OK\r\n\r\n",
		"HTTP/1.1 99 Low\r\n\r\n",
		"HTTP/1.1 600 High\r\n\r\n",
		"HTTP/1.1 2x0 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 9999999999999999999\r\n\r\n",
		"HTTP/1.1 200 OK\r\nA: b\nC: d\r\n\r\n",
		"ICY 200 OK\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse(bad[i], &h) != -1)
			fail_msg("taken: %s", bad[i]);
	/* a head that does not fit is refused, not waited for */
	char *big = malloc(SBXC_HEAD_MAX + 1);
	memset(big, 'a', SBXC_HEAD_MAX);
	memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
	assert_int_equal(sbxc_parse_head(big, SBXC_HEAD_MAX, &h), -1);
	free(big);
}

/* A stand-in supervisor: takes one connection, keeps what it was sent,
 * answers with its canned bytes and closes. */
struct standin {
	char dir[64];
	int lfd;
	const char *answer;
	char got[4096];
	size_t gotlen;
	pthread_t t;
};

static void *serve(void *arg)
{
	struct standin *s = arg;
	int fd = accept(s->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	/* the request's head and its body (as long as the client sends) */
	for (ssize_t n; s->gotlen < sizeof(s->got) - 1 && (n = recv(fd, s->got + s->gotlen, sizeof(s->got) - 1 - s->gotlen, 0)) > 0;) {
		s->gotlen += (size_t)n;
		s->got[s->gotlen] = '\0';
		const char *e = strstr(s->got, "\r\n\r\n");
		const char *cl = strstr(s->got, "Content-Length: ");
		if (e && cl && s->gotlen >= (size_t)(e + 4 - s->got) + strtoul(cl + 16, NULL, 10))
			break;
	}
	(void)!write(fd, s->answer, strlen(s->answer));
	close(fd);
	return NULL;
}

static void standin_start(struct standin *s, const char *answer)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "/tmp/test_sbxc.XXXXXX");
	assert_non_null(mkdtemp(s->dir));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/api.sock", s->dir);
	s->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s->lfd, 1), 0);
	s->answer = answer;
	assert_int_equal(pthread_create(&s->t, NULL, serve, s), 0);
}

static void standin_stop(struct standin *s)
{
	pthread_join(s->t, NULL);
	close(s->lfd);
	char path[96];
	snprintf(path, sizeof(path), "%s/api.sock", s->dir);
	unlink(path);
	rmdir(s->dir);
}

static void call(void **state)
{
	(void)state;
	struct standin s;
	standin_start(&s, "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"state\":\"running\"}\n");
	unsigned status = 0;
	char *out = NULL;
	assert_int_equal(sbxc_call(s.dir, "POST", "/timeout", "{\"timeout_s\":5}", 5000, 1024, &status, &out), 0);
	standin_stop(&s);
	assert_int_equal(status, 200);
	assert_string_equal(out, "{\"state\":\"running\"}\n");
	free(out);
	assert_string_equal(s.got, "POST /timeout HTTP/1.0\r\nHost: sandbox\r\nContent-Length: 15\r\n"
				   "Content-Type: application/json\r\n\r\n{\"timeout_s\":5}");

	/* a body past the cap */
	standin_start(&s, "HTTP/1.0 200 OK\r\n\r\n0123456789");
	assert_int_equal(sbxc_call(s.dir, "GET", "/", NULL, 5000, 9, &status, &out), -1);
	assert_int_equal(errno, EMSGSIZE);
	assert_null(out);
	standin_stop(&s);

	/* a connection closed before any head */
	standin_start(&s, "");
	assert_int_equal(sbxc_call(s.dir, "GET", "/", NULL, 5000, 9, &status, &out), -1);
	assert_int_equal(errno, EPIPE);
	standin_stop(&s);

	/* no supervisor there (yet) */
	assert_int_equal(sbxc_call("/tmp/no-such-sandbox-dir", "GET", "/", NULL, 5000, 9, &status, &out), -1);
	assert_int_equal(errno, ENOENT);
}

static void header_injection(void **state)
{
	(void)state;
	struct standin s;
	standin_start(&s, "HTTP/1.0 200 OK\r\n\r\n");
	struct sbxc c;
	assert_int_equal(sbxc_connect(&c, s.dir, 5000), 0);
	assert_int_equal(sbxc_send_head(&c, "POST", "/commands", "application/json", "k\r\nX-Evil: 1", 0), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(sbxc_send_head(&c, "GET", "/a b", NULL, NULL, 0), -1);
	/* the body comes after the head and what came with it is read first */
	assert_int_equal(sbxc_send_head(&c, "GET", "/files?path=a%20b", NULL, "key-1", 0), 0);
	assert_int_equal(sbxc_read_head(&c), 0);
	char b[8];
	assert_int_equal(sbxc_read_body(&c, b, sizeof(b)), 0);
	sbxc_close(&c);
	sbxc_close(&c);
	standin_stop(&s);
	assert_non_null(strstr(s.got, "GET /files?path=a%20b HTTP/1.0\r\n"));
	assert_non_null(strstr(s.got, "Idempotency-Key: key-1\r\n"));
}

/* A path or name as a query's value: nothing of it can end the value,
 * start another parameter or break the request line. */
static void query_encode(void **state)
{
	(void)state;
	char out[64];
	sbxc_query_encode("dir/a b.c", out, sizeof(out));
	assert_string_equal(out, "dir/a%20b.c");
	sbxc_query_encode("x&path=/etc/passwd#\r\n%", out, sizeof(out));
	assert_string_equal(out, "x%26path%3D/etc/passwd%23%0D%0A%25");
	sbxc_query_encode("\xc3\xa9~-_.", out, sizeof(out));
	assert_string_equal(out, "%C3%A9~-_.");
	/* cut where the next character would not fit, never inside an escape */
	char small[8];
	sbxc_query_encode("ab cd", small, sizeof(small));
	assert_string_equal(small, "ab%20");
	sbxc_query_encode("", small, sizeof(small));
	assert_string_equal(small, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(heads),
		cmocka_unit_test(call),
		cmocka_unit_test(header_injection),
		cmocka_unit_test(query_encode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
