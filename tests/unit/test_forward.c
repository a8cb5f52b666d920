/* The guest's proxy forwarder (guest-agent/forward.c): its relay loop
 * driven step by step, with the guest side a real TCP listener on this
 * machine's loopback (an ephemeral port) and the host side a socketpair
 * the dial callback hands out in place of vsock: bytes both ways, each
 * half-close passed on, a dial or a connect that fails, the connection
 * cap, back-pressure with both directions busy, a side that is gone. Then
 * the forwarder process itself: it keeps none of the agent's other fds,
 * closes what it cannot take to the host, and dies with its agent. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "forward.h"

#define DEADLINE_MS 10000

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* What the dial callback does, and the host-side ends it handed out. */
enum dial_mode { DIAL_PAIR, DIAL_FAIL, DIAL_REFUSED };

struct fixture {
	struct forward *f;
	uint16_t port;              /* the listener's */
	enum dial_mode mode;
	uint16_t closed_port;       /* DIAL_REFUSED: a loopback port nothing listens on */
	int peers[FORWARD_MAX_CONNS + 2];   /* the test's ends of the host sides, in dial order */
	unsigned npeers, dials;
	int clients[FORWARD_MAX_CONNS + 2];
	unsigned nclients;
};

static struct fixture F;
static char err[256];

static int dial(void *arg)
{
	struct fixture *x = arg;
	x->dials++;
	if (x->mode == DIAL_FAIL)
		return -1;
	if (x->mode == DIAL_REFUSED) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(x->closed_port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
			close(fd);
			return -1;
		}
		return fd;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	x->peers[x->npeers++] = sv[0];
	return sv[1];
}

static uint16_t port_of(int fd)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	return ntohs(a.sin_port);
}

static int setup(void **state)
{
	(void)state;
	memset(&F, 0, sizeof(F));
	F.f = malloc(sizeof(*F.f));
	if (!F.f)
		return -1;
	int fd = forward_listen(0, err, sizeof(err));
	if (fd < 0) {
		fprintf(stderr, "test_forward: %s\n", err);
		return -1;
	}
	F.port = port_of(fd);
	forward_init(F.f, fd, dial, &F);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	forward_close_all(F.f);
	close(F.f->listen_fd);
	for (unsigned i = 0; i < F.npeers; i++)
		if (F.peers[i] >= 0)
			close(F.peers[i]);
	for (unsigned i = 0; i < F.nclients; i++)
		if (F.clients[i] >= 0)
			close(F.clients[i]);
	free(F.f);
	return 0;
}

/* A guest client connected to the listener (the kernel completes it from
 * the backlog; the forwarder accepts on its next step). Non-blocking. */
static int client(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(F.port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	F.clients[F.nclients++] = fd;
	return fd;
}

/* Step the relay until cond holds; fail at the deadline. */
#define STEP_UNTIL(cond)                                                          \
	do {                                                                      \
		int64_t until_ = now_ms() + DEADLINE_MS;                          \
		while (!(cond)) {                                                 \
			if (now_ms() > until_)                                    \
				fail_msg("timed out waiting for %s", #cond);      \
			assert_int_equal(forward_step(F.f, 10), 0);               \
		}                                                                 \
	} while (0)

/* Read what fd has into buf at *have (non-blocking): 1 with bytes, 0 at
 * EOF, -1 with none yet, -2 on an error (a reset). */
static int take(int fd, char *buf, size_t cap, size_t *have)
{
	ssize_t k = recv(fd, buf + *have, cap - *have, 0);
	if (k > 0) {
		*have += (size_t)k;
		return 1;
	}
	if (k == 0)
		return 0;
	return (errno == EAGAIN || errno == EWOULDBLOCK) ? -1 : -2;
}

/* Step until fd has all of want, then check it. */
static void expect_bytes(int fd, const char *want)
{
	char buf[256];
	size_t have = 0, n = strlen(want);
	STEP_UNTIL(take(fd, buf, n, &have) >= 0 && have == n);
	assert_memory_equal(buf, want, n);
}

/* Step until fd reads EOF (or a reset: the forwarder closed it). */
static void expect_closed(int fd)
{
	char buf[64];
	size_t have = 0;
	int r = -1;
	STEP_UNTIL((r = take(fd, buf, sizeof(buf), &have)) == 0 || r == -2);
	assert_int_equal(have, 0);
}

/* ---- the relay -------------------------------------------------------------- */

static void relays_both_ways(void **state)
{
	(void)state;
	assert_int_equal(forward_active(F.f), 0);
	int c = client();
	STEP_UNTIL(F.npeers == 1);
	assert_int_equal(forward_active(F.f), 1);
	int h = F.peers[0];
	assert_int_equal(send(c, "hello", 5, 0), 5);
	expect_bytes(h, "hello");
	assert_int_equal(send(h, "world!", 6, 0), 6);
	expect_bytes(c, "world!");
	/* several rounds each way, interleaved */
	for (int i = 0; i < 20; i++) {
		char m[32];
		snprintf(m, sizeof(m), "up %d", i);
		assert_int_equal(send(c, m, strlen(m), 0), (ssize_t)strlen(m));
		expect_bytes(h, m);
		snprintf(m, sizeof(m), "down %d", i);
		assert_int_equal(send(h, m, strlen(m), 0), (ssize_t)strlen(m));
		expect_bytes(c, m);
	}
	/* both closing: the connection's slot is free again */
	close(c);
	F.clients[0] = -1;
	expect_closed(h);
	assert_int_equal(forward_active(F.f), 1);   /* the host may still answer */
	close(h);
	F.peers[0] = -1;
	STEP_UNTIL(forward_active(F.f) == 0);
}

/* Each EOF is passed on as a half-close; the other way keeps going until
 * it ends too. */
static void half_close_guest_first(void **state)
{
	(void)state;
	int c = client();
	STEP_UNTIL(F.npeers == 1);
	int h = F.peers[0];
	assert_int_equal(send(c, "request", 7, 0), 7);
	assert_int_equal(shutdown(c, SHUT_WR), 0);
	expect_bytes(h, "request");
	expect_closed(h);                     /* the guest's EOF reached the host */
	assert_int_equal(forward_active(F.f), 1);
	assert_int_equal(send(h, "late reply", 10, 0), 10);
	expect_bytes(c, "late reply");        /* and the host still reaches the guest */
	assert_int_equal(shutdown(h, SHUT_WR), 0);
	expect_closed(c);
	STEP_UNTIL(forward_active(F.f) == 0);
}

static void half_close_host_first(void **state)
{
	(void)state;
	int c = client();
	STEP_UNTIL(F.npeers == 1);
	int h = F.peers[0];
	assert_int_equal(send(h, "banner", 6, 0), 6);
	assert_int_equal(shutdown(h, SHUT_WR), 0);
	expect_bytes(c, "banner");
	expect_closed(c);
	assert_int_equal(forward_active(F.f), 1);
	assert_int_equal(send(c, "still", 5, 0), 5);
	expect_bytes(h, "still");
	assert_int_equal(shutdown(c, SHUT_WR), 0);
	expect_closed(h);
	STEP_UNTIL(forward_active(F.f) == 0);
}

/* No host side: the guest's connection is closed, nothing is kept. */
static void dial_fails(void **state)
{
	(void)state;
	F.mode = DIAL_FAIL;
	int c = client();
	STEP_UNTIL(F.dials == 1);
	expect_closed(c);
	assert_int_equal(forward_active(F.f), 0);
	/* and the forwarder goes on: the next one may succeed */
	F.mode = DIAL_PAIR;
	int c2 = client();
	STEP_UNTIL(F.npeers == 1);
	assert_int_equal(send(c2, "x", 1, 0), 1);
	expect_bytes(F.peers[0], "x");
}

/* A connect that fails after it started (SO_ERROR): the same, even with
 * the guest's bytes already buffered. */
static void connect_fails(void **state)
{
	(void)state;
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	F.closed_port = port_of(s);
	close(s);   /* bound, never listening, now closed: connects are refused */
	F.mode = DIAL_REFUSED;
	int c = client();
	assert_int_equal(send(c, "early", 5, 0), 5);
	STEP_UNTIL(F.dials == 1);
	expect_closed(c);
	STEP_UNTIL(forward_active(F.f) == 0);
}

/* FORWARD_MAX_CONNS at once; one more is closed at once, and takes a slot
 * once one is free. */
static void connection_cap(void **state)
{
	(void)state;
	for (unsigned i = 0; i < FORWARD_MAX_CONNS; i++)
		client();
	STEP_UNTIL(F.npeers == FORWARD_MAX_CONNS);
	assert_int_equal(forward_active(F.f), FORWARD_MAX_CONNS);
	int extra = client();
	expect_closed(extra);
	assert_int_equal(F.npeers, FORWARD_MAX_CONNS);   /* never dialled */
	/* every one of the others still relays, each to its own host side */
	for (unsigned i = 0; i < FORWARD_MAX_CONNS; i++) {
		char m[32];
		snprintf(m, sizeof(m), "conn %u", i);
		assert_int_equal(send(F.clients[i], m, strlen(m), 0), (ssize_t)strlen(m));
	}
	for (unsigned i = 0; i < FORWARD_MAX_CONNS; i++) {
		char m[32];
		snprintf(m, sizeof(m), "conn %u", i);
		expect_bytes(F.peers[i], m);
	}
	/* one ends; a new one gets its slot */
	close(F.clients[3]);
	F.clients[3] = -1;
	close(F.peers[3]);
	F.peers[3] = -1;
	STEP_UNTIL(forward_active(F.f) == FORWARD_MAX_CONNS - 1);
	int late = client();
	STEP_UNTIL(F.npeers == FORWARD_MAX_CONNS + 1);
	assert_int_equal(send(late, "late", 4, 0), 4);
	expect_bytes(F.peers[FORWARD_MAX_CONNS], "late");
}

/* Megabytes each way at once, neither side reading until it has to:
 * everything arrives in order, with the forwarder's buffers fixed. */
static void both_ways_under_pressure(void **state)
{
	(void)state;
	enum { N = 3 << 20 };
	static char up[N], down[N], got_up[N], got_down[N];
	for (size_t i = 0; i < N; i++) {
		up[i] = (char)(i * 7 + i / 251);
		down[i] = (char)(i * 13 + i / 509);
	}
	int c = client();
	STEP_UNTIL(F.npeers == 1);
	int h = F.peers[0];
	size_t sent_up = 0, sent_down = 0, have_up = 0, have_down = 0;
	unsigned round = 0;
	int64_t until = now_ms() + 4 * DEADLINE_MS;
	while (have_up < N || have_down < N) {
		if (now_ms() > until)
			fail_msg("stalled: up %zu/%d, down %zu/%d", have_up, N, have_down, N);
		ssize_t k;
		if (sent_up < N && (k = send(c, up + sent_up, N - sent_up, MSG_NOSIGNAL)) > 0)
			sent_up += (size_t)k;
		if (sent_down < N && (k = send(h, down + sent_down, N - sent_down, MSG_NOSIGNAL)) > 0)
			sent_down += (size_t)k;
		if (sent_up == N && sent_down == N) {
			shutdown(c, SHUT_WR);
			shutdown(h, SHUT_WR);
		}
		assert_int_equal(forward_step(F.f, 1), 0);
		/* read only now and then, so that the buffers fill up */
		if (++round % 4 == 0) {
			take(h, got_up, N, &have_up);
			take(c, got_down, N, &have_down);
		}
	}
	assert_memory_equal(got_up, up, N);
	assert_memory_equal(got_down, down, N);
	expect_closed(c);
	expect_closed(h);
	STEP_UNTIL(forward_active(F.f) == 0);
}

/* A host side that goes away with bytes to deliver: the guest's
 * connection ends too. */
static void host_gone(void **state)
{
	(void)state;
	int c = client();
	STEP_UNTIL(F.npeers == 1);
	close(F.peers[0]);
	F.peers[0] = -1;
	static char big[1 << 20];
	ssize_t k = send(c, big, sizeof(big), MSG_NOSIGNAL);
	assert_true(k > 0);
	expect_closed(c);
	STEP_UNTIL(forward_active(F.f) == 0);
}

/* A guest that resets its connection: the host side is closed. */
static void guest_reset(void **state)
{
	(void)state;
	int c = client();
	STEP_UNTIL(F.npeers == 1);
	int h = F.peers[0];
	struct linger lg = { 1, 0 };
	assert_int_equal(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	assert_int_equal(send(h, "unread", 6, 0), 6);
	for (int i = 0; i < 5; i++)
		assert_int_equal(forward_step(F.f, 10), 0);
	close(c);   /* with SO_LINGER 0: a reset */
	F.clients[0] = -1;
	expect_closed(h);
	STEP_UNTIL(forward_active(F.f) == 0);
}

/* ---- the process -------------------------------------------------------------- */

/* Connect to port on loopback: whether the forwarder closed it (EOF or a
 * reset) within the deadline. No cmocka here: a forked child calls it. */
static bool closed_by_forwarder(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	bool closed = false;
	if (fd < 0)
		return false;
	struct pollfd pf = { fd, POLLIN, 0 };
	char c;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && poll(&pf, 1, DEADLINE_MS) == 1)
		closed = read(fd, &c, 1) <= 0;
	close(fd);
	return closed;
}

/* The forwarder keeps nothing of the agent but the listener (a pipe's
 * write end it inherited is closed: the read end sees EOF while it runs),
 * closes what it cannot take to the host (no vsock host at this port
 * here), and is gone once stopped. */
static void forwarder_process(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);   /* not CLOEXEC: the forwarder does not exec anyway */
	pid_t pid = forward_spawn(F.f->listen_fd, 0xfffffff0u, err, sizeof(err));
	assert_true(pid > 0);
	close(p[1]);
	struct pollfd pf = { p[0], POLLIN, 0 };
	assert_int_equal(poll(&pf, 1, DEADLINE_MS), 1);
	char c;
	assert_int_equal(read(p[0], &c, 1), 0);   /* every writer gone: the forwarder closed its copy */
	close(p[0]);
	assert_true(closed_by_forwarder(F.port));
	assert_true(closed_by_forwarder(F.port));
	assert_int_equal(kill(pid, 0), 0);   /* still running */
	forward_stop(pid);
	assert_int_equal(kill(pid, 0), -1);
	assert_int_equal(errno, ESRCH);
	forward_stop(pid);   /* again, already reaped: harmless */
}

/* The forwarder dies with the agent that started it. */
static void forwarder_dies_with_agent(void **state)
{
	(void)state;
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	fflush(NULL);
	pid_t agent = fork();
	assert_true(agent >= 0);
	if (agent == 0) {
		pid_t fwd = forward_spawn(F.f->listen_fd, 0xfffffff0u, err, sizeof(err));
		/* Once it closed a connection it is in its loop, past its
		 * prctl: only then may this agent die. */
		bool ready = fwd > 0 && closed_by_forwarder(F.port);
		(void)!write(p[1], &fwd, sizeof(fwd));
		_exit(ready ? 0 : 1);   /* without stopping it */
	}
	close(p[1]);
	pid_t fwd = -1;
	assert_int_equal(read(p[0], &fwd, sizeof(fwd)), (ssize_t)sizeof(fwd));
	close(p[0]);
	assert_true(fwd > 0);
	int st;
	assert_int_equal(waitpid(agent, &st, 0), agent);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* orphaned to this subreaper, killed by its death signal */
	assert_int_equal(waitpid(fwd, &st, 0), fwd);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGKILL);
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
}

/* Loopback already up (as on this machine): left as it is, which needs
 * no privilege. Skipped where it is down, so that the test never changes
 * the machine's network. */
static void loopback_already_up(void **state)
{
	(void)state;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	assert_int_equal(ioctl(fd, SIOCGIFFLAGS, &ifr), 0);
	close(fd);
	if (!(ifr.ifr_flags & IFF_UP))
		skip();
	assert_int_equal(forward_loopback_up(err, sizeof(err)), 0);
}

/* The listener: the one address, and a port that is taken is an error
 * that says which. */
static void listen_errors(void **state)
{
	(void)state;
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	assert_int_equal(getsockname(F.f->listen_fd, (struct sockaddr *)&a, &len), 0);
	assert_int_equal(ntohl(a.sin_addr.s_addr), INADDR_LOOPBACK);
	assert_true(fcntl(F.f->listen_fd, F_GETFD) & FD_CLOEXEC);
	assert_true(fcntl(F.f->listen_fd, F_GETFL) & O_NONBLOCK);
	assert_int_equal(forward_listen(F.port, err, sizeof(err)), -1);
	char want[64];
	snprintf(want, sizeof(want), "listening on 127.0.0.1:%u: ", F.port);
	assert_non_null(strstr(err, want));
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);   /* as the agent */
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(relays_both_ways),
		T(half_close_guest_first),
		T(half_close_host_first),
		T(dial_fails),
		T(connect_fails),
		T(connection_cap),
		T(both_ways_under_pressure),
		T(host_gone),
		T(guest_reset),
		T(forwarder_process),
		T(forwarder_dies_with_agent),
		T(loopback_already_up),
		T(listen_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
