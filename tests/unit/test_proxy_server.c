/* The proxy's event loop (host/proxy/server.h), run in a thread of its
 * own with a table for a resolver: the test plays the guest (connecting
 * to the proxy's Unix socket, as vmm would) and the remote (a TCP
 * listener on 127.0.0.1, which address rules allow). Every refusal the
 * issue names, each cap, the SNI check, and the audit the run gets. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "dial_guard.h"
#include "proxy_wire.h"
#include "server.h"

struct fixture {
	struct proxy_config cfg;
	struct proxy_server srv;
	int listen_fd, control[2];
	char path[108];
	int up_fd;                 /* the remote's listener */
	uint16_t up_port;
	pthread_t th;
	struct dial_guard guard;   /* the proxy's own check, as main.c sets it */
	uint8_t self[1][16];
	struct proxy_audit audit[PROXY_AUDIT_MAX];
	unsigned naudit, dropped;
};

/* The test's DNS. */
static int table(void *ctx, const char *host, uint8_t addrs[][16], char *err, size_t errlen)
{
	(void)ctx;
	static const struct {
		const char *name, *addr;
	} t[] = { { "up.test", "127.0.0.1" }, { "meta.test", "169.254.169.254" }, { "lo.test", "127.0.0.2" },
		  { "private.test", "10.1.2.3" }, { "host.test", "198.51.100.7" } };
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (strcmp(host, t[i].name))
			continue;
		uint8_t v4[4];
		inet_pton(AF_INET, t[i].addr, v4);
		memset(addrs[0], 0, 10);
		addrs[0][10] = addrs[0][11] = 0xff;
		memcpy(addrs[0] + 12, v4, 4);
		return 1;
	}
	snprintf(err, errlen, "NXDOMAIN");
	return 0;
}

static void *serve(void *arg)
{
	struct fixture *f = arg;
	proxy_server_run(&f->srv);
	proxy_server_stop(&f->srv);
	proxy_server_send_audit(&f->srv, f->control[1]);
	return NULL;
}

static void rule(struct fixture *f, const char *line)
{
	char err[200];
	assert_int_equal(proxy_config_line(&f->cfg, line, err, sizeof(err)), 0);
}

/* The dial check of the tests that need a remote: the remote's
 * loopback address passes, everything else meets the proxy's own. */
static const char *remote_or_guard(const void *ctx, const struct sockaddr *sa, socklen_t len, char *why, size_t cap)
{
	const struct sockaddr_in *v4 = (const struct sockaddr_in *)(const void *)sa;
	if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(*v4) && v4->sin_addr.s_addr == htonl(INADDR_LOOPBACK))
		return NULL;
	return dial_guard_refusal(ctx, sa, len, why, cap);
}

/* A proxy allowing up.test on 80, 443 and the remote's port, and
 * 127.0.0.1 (the remote) on those ports; caps as the test set them.
 * check: the dial check (NULL: the remote passes, else the proxy's);
 * the guard's own address is host.test's; more (NULL: none) adds rules. */
static struct fixture *setup_with(void (*tune)(struct proxy_caps *), proxy_dial_check_fn check,
				  void (*more)(struct fixture *))
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->up_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	assert_int_equal(bind(f->up_fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(f->up_fd, 16), 0);
	assert_int_equal(getsockname(f->up_fd, (struct sockaddr *)&a, &al), 0);
	f->up_port = ntohs(a.sin_port);
	proxy_config_init(&f->cfg);
	char line[128];
	rule(f, "rule-host up.test");
	snprintf(line, sizeof(line), "rule-host up.test:%u", f->up_port);
	rule(f, line);
	rule(f, "rule-host lo.test");
	rule(f, "rule-host meta.test");
	rule(f, "rule-host private.test");
	rule(f, "rule-addr 127.0.0.1/32");
	snprintf(line, sizeof(line), "rule-addr 127.0.0.1/32:%u", f->up_port);
	rule(f, line);
	if (tune)
		tune(&f->cfg.caps);
	if (more)
		more(f);
	snprintf(f->path, sizeof(f->path), "/tmp/vmrun-proxy-test-%d-%p", (int)getpid(), (void *)f);
	struct sockaddr_un u = { .sun_family = AF_UNIX };
	snprintf(u.sun_path, sizeof(u.sun_path), "%s", f->path);
	f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	assert_int_equal(bind(f->listen_fd, (struct sockaddr *)&u, sizeof(u)), 0);
	assert_int_equal(listen(f->listen_fd, 16), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, f->control), 0);
	assert_int_equal(inet_pton(AF_INET6, "::ffff:198.51.100.7", f->self[0]), 1);
	f->guard = (struct dial_guard){ (const uint8_t (*)[16])f->self, 1 };
	/* no own addresses for net_decide: only the dial check knows them */
	assert_int_equal(proxy_server_init(&f->srv, &f->cfg, f->listen_fd, f->control[1], table, NULL, NULL, 0,
					   check ? check : remote_or_guard, &f->guard, NULL),
			 0);
	assert_int_equal(pthread_create(&f->th, NULL, serve, f), 0);
	return f;
}

static struct fixture *setup(void (*tune)(struct proxy_caps *))
{
	return setup_with(tune, NULL, NULL);
}

/* Stop the proxy the way a run does, and read its audit. The proxy is
 * given a moment first to see the closes the test just made, as a run
 * ends only after its guest has. */
static void finish(struct fixture *f)
{
	usleep(200000);
	shutdown(f->control[0], SHUT_WR);
	for (;;) {
		union {
			struct proxy_audit a;
			struct proxy_audit_end e;
		} u;
		ssize_t n = recv(f->control[0], &u, sizeof(u), 0);
		assert_true(n > 0);
		if (n == sizeof(struct proxy_audit_end)) {
			assert_int_equal(u.e.magic, PROXY_AUDIT_END_MAGIC);
			f->dropped = u.e.dropped;
			break;
		}
		assert_int_equal(n, sizeof(struct proxy_audit));
		assert_true(proxy_audit_valid(&u.a));
		f->audit[f->naudit++] = u.a;
	}
	pthread_join(f->th, NULL);
}

static void teardown(struct fixture *f)
{
	proxy_server_free(&f->srv);
	close(f->listen_fd);
	close(f->control[0]);
	close(f->control[1]);
	close(f->up_fd);
	unlink(f->path);
	free(f);
}

/* A guest connection to the proxy, with a 5 s receive timeout so that a
 * broken proxy fails the test instead of hanging it. */
static int guest(const struct fixture *f)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un u = { .sun_family = AF_UNIX };
	snprintf(u.sun_path, sizeof(u.sun_path), "%s", f->path);
	assert_int_equal(connect(fd, (struct sockaddr *)&u, sizeof(u)), 0);
	struct timeval tv = { 5, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static void say(int fd, const char *text)
{
	assert_int_equal(send(fd, text, strlen(text), MSG_NOSIGNAL), (ssize_t)strlen(text));
}

/* Everything until EOF (or the timeout), NUL-terminated. */
static size_t hear(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	ssize_t k;
	while (n + 1 < cap && (k = recv(fd, buf + n, cap - 1 - n, 0)) > 0)
		n += (size_t)k;
	buf[n] = '\0';
	return n;
}

/* Read until the end of a head (CRLF CRLF). */
static void hear_head(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	while (n + 1 < cap) {
		ssize_t k = recv(fd, buf + n, 1, 0);
		assert_true(k == 1);
		n++;
		buf[n] = '\0';
		if (n >= 4 && !memcmp(buf + n - 4, "\r\n\r\n", 4))
			return;
	}
	fail_msg("no end of head");
}

static int accept_up(struct fixture *f)
{
	int fd = accept4(f->up_fd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(fd >= 0);
	struct timeval tv = { 5, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static void plain_http_allowed(void **state)
{
	(void)state;
	struct fixture *f = setup(NULL);
	int g = guest(f);
	char req[256], buf[4096];
	snprintf(req, sizeof(req),
		 "GET http://UP.test:%u/x?y=1 HTTP/1.1\r\nHost: up.test\r\nProxy-Authorization: secret\r\n"
		 "Accept: */*\r\n\r\n", f->up_port);
	say(g, req);
	int u = accept_up(f);
	hear_head(u, buf, sizeof(buf));
	assert_non_null(strstr(buf, "GET /x?y=1 HTTP/1.1\r\n"));
	assert_non_null(strstr(buf, "Connection: close\r\n"));
	assert_non_null(strstr(buf, "Accept: */*\r\n"));
	assert_null(strstr(buf, "Proxy-Authorization"));
	say(u, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
	close(u);
	hear(g, buf, sizeof(buf));
	assert_non_null(strstr(buf, "\r\n\r\nhello"));
	close(g);
	finish(f);
	assert_int_equal(f->naudit, 1);
	const struct proxy_audit *a = &f->audit[0];
	assert_string_equal(a->host, "up.test");
	assert_string_equal(a->method, "GET");
	assert_int_equal(a->port, f->up_port);
	assert_true(a->allowed && a->has_addr);
	assert_true(a->up > 0);
	assert_int_equal(a->down, strlen("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"));
	assert_string_equal(a->end, "closed");
	teardown(f);
}

/* One request that must be answered with status, and the audit's why. */
static void refused(const char *request, const char *status, const char *why)
{
	struct fixture *f = setup(NULL);
	int g = guest(f);
	say(g, request);
	char buf[2048];
	hear(g, buf, sizeof(buf));
	close(g);
	finish(f);
	if (strncmp(buf, status, strlen(status)))
		fail_msg("%s: got \"%.80s\"", request, buf);
	assert_int_equal(f->naudit, 1);
	assert_false(f->audit[0].allowed);
	if (!strstr(f->audit[0].why, why))
		fail_msg("%s: why \"%s\", not \"%s\"", request, f->audit[0].why, why);
	assert_non_null(strstr(buf, why));   /* the guest is told why, too */
	teardown(f);
}

static void refusals(void **state)
{
	(void)state;
	refused("GET http://other.test/ HTTP/1.1\r\n\r\n", "HTTP/1.1 403", "not in the allowlist");
	refused("CONNECT other.test:443 HTTP/1.1\r\n\r\n", "HTTP/1.1 403", "not in the allowlist");
	refused("CONNECT up.test:22 HTTP/1.1\r\n\r\n", "HTTP/1.1 403", "not in the allowlist");
	/* allowed names whose address is in the deny set: rebinding */
	refused("CONNECT lo.test:443 HTTP/1.1\r\n\r\n", "HTTP/1.1 403", "127.0.0.2 is loopback");
	refused("GET http://meta.test/latest/meta-data/ HTTP/1.1\r\n\r\n", "HTTP/1.1 403", "169.254.169.254");
	refused("GET http://private.test/ HTTP/1.1\r\n\r\n", "HTTP/1.1 403", "10.1.2.3 is private");
	/* IP literals, even of an address an address rule allows, need
	 * that rule's port; others never */
	refused("CONNECT 1.2.3.4:443 HTTP/1.1\r\n\r\n", "HTTP/1.1 403", "an IP address");
	refused("GET http://169.254.169.254/ HTTP/1.1\r\n\r\n", "HTTP/1.1 403", "an IP address");
	refused("CONNECT [::1]:443 HTTP/1.1\r\n\r\n", "HTTP/1.1 403", "an IP address");
	refused("CONNECT 0x7f.2:80 HTTP/1.1\r\n\r\n", "HTTP/1.1 403", "an IP address");
	refused("GET /relative HTTP/1.1\r\nHost: up.test\r\n\r\n", "HTTP/1.1 400", "");
}

/* A ClientHello record naming name (TLS 1.2 layout, one cipher). */
static size_t client_hello(uint8_t *b, const char *name)
{
	size_t nl = strlen(name), ext = 9 + nl, body = 2 + 32 + 1 + 4 + 2 + 2 + ext, n = 0;
	uint8_t rec[5] = { 0x16, 3, 1, (uint8_t)((body + 4) >> 8), (uint8_t)(body + 4) };
	memcpy(b, rec, 5);
	n = 5;
	b[n++] = 1;
	b[n++] = 0;
	b[n++] = (uint8_t)(body >> 8);
	b[n++] = (uint8_t)body;
	b[n++] = 3;
	b[n++] = 3;
	memset(b + n, 7, 32);
	n += 32;
	b[n++] = 0;                       /* session id */
	b[n++] = 0; b[n++] = 2; b[n++] = 0; b[n++] = 0x2f;   /* ciphers */
	b[n++] = 1; b[n++] = 0;           /* compression */
	b[n++] = (uint8_t)(ext >> 8); b[n++] = (uint8_t)ext;
	b[n++] = 0; b[n++] = 0;           /* server_name */
	b[n++] = (uint8_t)((nl + 5) >> 8); b[n++] = (uint8_t)(nl + 5);
	b[n++] = (uint8_t)((nl + 3) >> 8); b[n++] = (uint8_t)(nl + 3);
	b[n++] = 0;
	b[n++] = (uint8_t)(nl >> 8); b[n++] = (uint8_t)nl;
	memcpy(b + n, name, nl);
	return n + nl;
}

static void sni(void **state)
{
	(void)state;
	/* a name other than the CONNECT host: refused before any dial */
	struct fixture *f = setup(NULL);
	int g = guest(f);
	say(g, "CONNECT up.test:443 HTTP/1.1\r\n\r\n");
	char buf[512];
	hear_head(g, buf, sizeof(buf));
	assert_non_null(strstr(buf, " 200 "));
	uint8_t hello[512];
	size_t hl = client_hello(hello, "other.test");
	assert_int_equal(send(g, hello, hl, MSG_NOSIGNAL), (ssize_t)hl);
	assert_int_equal(hear(g, buf, sizeof(buf)), 0);   /* closed */
	close(g);
	/* the same name: dialed (127.0.0.1:443, where nothing listens) */
	g = guest(f);
	say(g, "CONNECT up.test:443 HTTP/1.1\r\n\r\n");
	hear_head(g, buf, sizeof(buf));
	hl = client_hello(hello, "UP.test");
	assert_int_equal(send(g, hello, hl, MSG_NOSIGNAL), (ssize_t)hl);
	hear(g, buf, sizeof(buf));
	close(g);
	finish(f);
	assert_int_equal(f->naudit, 2);
	assert_false(f->audit[0].allowed);
	assert_non_null(strstr(f->audit[0].why, "other.test does not match"));
	assert_true(f->audit[1].allowed);
	assert_string_equal(f->audit[1].end, "dial_failed");
	assert_non_null(strstr(f->audit[1].why, "connect:"));
	teardown(f);
}

/* CONNECT to the remote's port: 200, then bytes both ways. */
static int tunnel(struct fixture *f, int *up)
{
	int g = guest(f);
	char req[128], buf[256];
	snprintf(req, sizeof(req), "CONNECT up.test:%u HTTP/1.1\r\nHost: up.test\r\n\r\n", f->up_port);
	say(g, req);
	*up = accept_up(f);
	hear_head(g, buf, sizeof(buf));
	assert_non_null(strstr(buf, "HTTP/1.1 200 "));
	return g;
}

static void connect_tunnel(void **state)
{
	(void)state;
	struct fixture *f = setup(NULL);
	int u, g = tunnel(f, &u);
	say(g, "ping");
	char buf[16] = "";
	assert_int_equal(recv(u, buf, 4, MSG_WAITALL), 4);
	assert_memory_equal(buf, "ping", 4);
	say(u, "pong!");
	assert_int_equal(recv(g, buf, 5, MSG_WAITALL), 5);
	assert_memory_equal(buf, "pong!", 5);
	shutdown(g, SHUT_WR);
	assert_int_equal(recv(u, buf, 1, 0), 0);   /* the half-close came through */
	close(u);
	assert_int_equal(recv(g, buf, 1, 0), 0);
	close(g);
	finish(f);
	assert_int_equal(f->naudit, 1);
	assert_string_equal(f->audit[0].method, "CONNECT");
	assert_int_equal(f->audit[0].up, 4);
	assert_int_equal(f->audit[0].down, 5);
	assert_string_equal(f->audit[0].end, "closed");
	teardown(f);
}

static void small_caps(struct proxy_caps *k)
{
	k->tunnels = 2;
	k->max_up = 1000;
	k->max_down = 1000;
	k->idle_ms = 300;
	k->connect_ms = 300;
}

static void caps(void **state)
{
	(void)state;
	struct fixture *f = setup(small_caps);
	char big[2000], buf[4096];
	memset(big, 'x', sizeof(big));
	/* bytes up */
	int u, g = tunnel(f, &u);
	assert_int_equal(send(g, big, sizeof(big), MSG_NOSIGNAL), (ssize_t)sizeof(big));
	hear(u, buf, sizeof(buf));
	hear(g, buf, sizeof(buf));
	close(u);
	close(g);
	/* bytes down */
	g = tunnel(f, &u);
	assert_int_equal(send(u, big, sizeof(big), MSG_NOSIGNAL), (ssize_t)sizeof(big));
	assert_true(hear(g, buf, sizeof(buf)) <= 1000);
	close(u);
	close(g);
	/* idle */
	g = tunnel(f, &u);
	hear(g, buf, sizeof(buf));   /* the proxy closes it after 300 ms */
	close(u);
	close(g);
	/* a head that never completes */
	g = guest(f);
	say(g, "GET http://up.test/ HTTP/1.1\r\n");
	hear(g, buf, sizeof(buf));
	assert_non_null(strstr(buf, "HTTP/1.1 408 "));
	close(g);
	/* tunnels at once: two held open, the third refused */
	int h1 = guest(f), h2 = guest(f);
	usleep(100000);
	g = guest(f);
	hear(g, buf, sizeof(buf));
	assert_non_null(strstr(buf, "HTTP/1.1 503 "));
	close(g);
	close(h1);
	close(h2);
	finish(f);
	assert_true(f->naudit >= 5);
	assert_string_equal(f->audit[0].end, "up_cap");
	assert_string_equal(f->audit[1].end, "down_cap");
	assert_string_equal(f->audit[2].end, "idle");
	assert_non_null(strstr(f->audit[3].why, "no complete request"));
	assert_non_null(strstr(f->audit[4].why, "more than 2 tunnels"));
	teardown(f);
}

/* Issue 38, finding 7: what the policy allows (address rules for
 * loopback, metadata, link-local; a name that resolves to the host's
 * own address, which net_decide was not told of) is still refused on
 * the socket address at connect(), and the remote never sees a dial. */
static void guarded_rules(struct fixture *f)
{
	char line[128];
	const char *ranges[] = { "[::1/128]", "169.254.169.254/32", "[fe80::/10]", "198.51.100.7/32" };
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		snprintf(line, sizeof(line), "rule-addr %s:%u", ranges[i], f->up_port);
		rule(f, line);
	}
	snprintf(line, sizeof(line), "rule-host host.test:%u", f->up_port);
	rule(f, line);
}

static void dial_guard_after_decide(void **state)
{
	(void)state;
	struct fixture *f = setup_with(NULL, dial_guard_refusal, guarded_rules);
	const struct {
		const char *target, *why;
	} cases[] = {
		{ "127.0.0.1", "127.0.0.1 is loopback" },   { "up.test", "127.0.0.1 is loopback" },
		{ "[::1]", "::1 is loopback" },             { "[::ffff:127.0.0.1]", "127.0.0.1 is loopback" },
		{ "169.254.169.254", "169.254.169.254 is link-local" },
		{ "[fe80::1]", "fe80::1 is link-local" },   { "host.test", "198.51.100.7 is the host's own address" },
	};
	size_t n = sizeof(cases) / sizeof(cases[0]);
	for (size_t i = 0; i < n; i++) {
		int g = guest(f);
		char req[160], buf[1024];
		snprintf(req, sizeof(req), "CONNECT %s:%u HTTP/1.1\r\n\r\n", cases[i].target, f->up_port);
		say(g, req);
		hear(g, buf, sizeof(buf));
		close(g);
		if (strncmp(buf, "HTTP/1.1 403", 12) || !strstr(buf, cases[i].why))
			fail_msg("%s: got \"%.160s\"", cases[i].target, buf);
	}
	struct pollfd p = { f->up_fd, POLLIN, 0 };
	assert_int_equal(poll(&p, 1, 0), 0);   /* no connection reached the remote */
	finish(f);
	assert_int_equal(f->naudit, n);
	for (size_t i = 0; i < n; i++) {
		assert_false(f->audit[i].allowed);
		if (!strstr(f->audit[i].why, cases[i].why))
			fail_msg("%s: audit why \"%s\"", cases[i].target, f->audit[i].why);
	}
	teardown(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plain_http_allowed), cmocka_unit_test(refusals), cmocka_unit_test(sni),
		cmocka_unit_test(connect_tunnel), cmocka_unit_test(caps), cmocka_unit_test(dial_guard_after_decide),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
