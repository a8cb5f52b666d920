/* One tunnel of the host proxy (host/proxy/relay.h), between two
 * socketpairs that play the guest and the remote: bytes both ways with
 * what came after the head sent first, half-closes passed on, each cap,
 * idling out, back-pressure, and a remote that is gone. Time is passed
 * in, so nothing here waits on a clock. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "relay.h"

/* The guest's end and the remote's end the test holds, and the tunnel's. */
struct pair {
	int guest_peer, remote_peer;
	int guest, remote;
};

static void pairs(struct pair *p)
{
	int a[2], b[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, a), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, b), 0);
	*p = (struct pair){ a[0], b[0], a[1], b[1] };
}

static void close_all(struct pair *p)
{
	int fds[4] = { p->guest_peer, p->remote_peer, p->guest, p->remote };
	for (int i = 0; i < 4; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* Poll the tunnel's two descriptors once, without waiting, and step. */
static enum relay_end pump(struct relay *r, int64_t now)
{
	enum relay_end e = RELAY_RUNNING;
	for (int i = 0; i < 64 && e == RELAY_RUNNING; i++) {
		struct pollfd p[2] = { { r->fd[0], relay_events(r, RELAY_GUEST), 0 },
				       { r->fd[1], relay_events(r, RELAY_REMOTE), 0 } };
		if (poll(p, 2, 0) <= 0)
			break;
		short rev[2] = { p[0].revents, p[1].revents };
		e = relay_step(r, rev, now);
	}
	return e;
}

static const struct relay_limits roomy = { 1 << 20, 1 << 20, 10000 };

static void both_ways(void **state)
{
	(void)state;
	struct pair p;
	pairs(&p);
	struct relay *r = test_malloc(sizeof(*r));
	relay_init(r, p.guest, p.remote, (const uint8_t *)"GET / ", 6, &roomy, 0);
	assert_int_equal(write(p.guest_peer, "HTTP/1.1", 8), 8);
	assert_int_equal(pump(r, 1), RELAY_RUNNING);
	char buf[64] = "";
	assert_int_equal(read(p.remote_peer, buf, sizeof(buf)), 14);
	assert_memory_equal(buf, "GET / HTTP/1.1", 14);   /* what came after the head, first */
	assert_int_equal(write(p.remote_peer, "answer", 6), 6);
	assert_int_equal(pump(r, 2), RELAY_RUNNING);
	assert_int_equal(read(p.guest_peer, buf, sizeof(buf)), 6);
	/* The guest is done sending: the remote reads its end, and can
	 * still answer. */
	shutdown(p.guest_peer, SHUT_WR);
	assert_int_equal(pump(r, 3), RELAY_RUNNING);
	assert_int_equal(read(p.remote_peer, buf, sizeof(buf)), 0);
	assert_int_equal(write(p.remote_peer, "more", 4), 4);
	close(p.remote_peer);
	p.remote_peer = -1;
	assert_int_equal(pump(r, 4), RELAY_CLOSED);
	assert_int_equal(read(p.guest_peer, buf, sizeof(buf)), 4);
	assert_int_equal(read(p.guest_peer, buf, sizeof(buf)), 0);
	assert_int_equal(r->moved[RELAY_GUEST], 14);
	assert_int_equal(r->moved[RELAY_REMOTE], 10);
	assert_string_equal(relay_end_name(r->end), "closed");
	test_free(r);
	close_all(&p);
}

static void caps(void **state)
{
	(void)state;
	struct relay_limits lim = { 10, 5, 10000 };
	struct relay *r = test_malloc(sizeof(*r));
	struct pair p;
	/* Exactly the cap each way is fine; one byte more ends it. */
	pairs(&p);
	relay_init(r, p.guest, p.remote, (const uint8_t *)"abc", 3, &lim, 0);
	assert_int_equal(write(p.guest_peer, "defghij", 7), 7);
	assert_int_equal(write(p.remote_peer, "12345", 5), 5);
	assert_int_equal(pump(r, 1), RELAY_RUNNING);
	assert_int_equal(write(p.guest_peer, "k", 1), 1);
	assert_int_equal(pump(r, 2), RELAY_UP_CAP);
	assert_int_equal(relay_events(r, RELAY_GUEST), 0);   /* ended: nothing more to wait for */
	close_all(&p);
	pairs(&p);
	relay_init(r, p.guest, p.remote, NULL, 0, &lim, 0);
	assert_int_equal(write(p.remote_peer, "123456", 6), 6);
	assert_int_equal(pump(r, 1), RELAY_DOWN_CAP);
	assert_string_equal(relay_end_name(r->end), "down_cap");
	close_all(&p);
	/* What came after the head counts too. */
	pairs(&p);
	relay_init(r, p.guest, p.remote, (const uint8_t *)"0123456789x", 11, &lim, 0);
	assert_int_equal(r->end, RELAY_UP_CAP);
	close_all(&p);
	test_free(r);
}

static void idle(void **state)
{
	(void)state;
	struct relay_limits lim = { 100, 100, 5000 };
	struct relay *r = test_malloc(sizeof(*r));
	struct pair p;
	pairs(&p);
	relay_init(r, p.guest, p.remote, NULL, 0, &lim, 1000);
	assert_int_equal(relay_timeout_ms(r, 1000), 5000);
	assert_int_equal(write(p.guest_peer, "x", 1), 1);
	assert_int_equal(pump(r, 3000), RELAY_RUNNING);
	assert_int_equal(relay_timeout_ms(r, 3000), 5000);   /* a byte moved: the clock starts again */
	short none[2] = { 0, 0 };
	assert_int_equal(relay_step(r, none, 7999), RELAY_RUNNING);
	assert_int_equal(relay_step(r, none, 8000), RELAY_IDLE);
	assert_int_equal(relay_timeout_ms(r, 9000), 0);
	close_all(&p);
	test_free(r);
}

static void back_pressure(void **state)
{
	(void)state;
	struct relay *r = test_malloc(sizeof(*r));
	struct pair p;
	pairs(&p);
	relay_init(r, p.guest, p.remote, NULL, 0, &roomy, 0);
	/* The remote reads nothing: once its socket and the tunnel's buffer
	 * are full, the tunnel stops reading the guest. */
	static uint8_t chunk[65536];
	size_t sent = 0;
	bool stopped = false;
	for (int i = 0; i < 400 && !stopped; i++) {
		ssize_t n = write(p.guest_peer, chunk, sizeof(chunk));
		if (n > 0)
			sent += (size_t)n;
		assert_int_equal(pump(r, 1), RELAY_RUNNING);
		stopped = !(relay_events(r, RELAY_GUEST) & POLLIN) && (relay_events(r, RELAY_REMOTE) & POLLOUT);
	}
	assert_true(stopped);
	assert_true(r->len[RELAY_GUEST] > 0);
	/* The remote reads: it all arrives, in order of size at least. */
	size_t got = 0;
	for (int i = 0; i < 10000 && got < sent; i++) {
		ssize_t n = read(p.remote_peer, chunk, sizeof(chunk));
		if (n > 0)
			got += (size_t)n;
		pump(r, 2);
	}
	assert_int_equal(got, sent);
	close_all(&p);
	test_free(r);
}

static void remote_gone(void **state)
{
	(void)state;
	struct relay *r = test_malloc(sizeof(*r));
	struct pair p;
	pairs(&p);
	relay_init(r, p.guest, p.remote, NULL, 0, &roomy, 0);
	close(p.remote_peer);
	p.remote_peer = -1;
	assert_int_equal(write(p.guest_peer, "x", 1), 1);
	/* Its end of file is read, and the guest's byte finds it gone. */
	assert_int_equal(pump(r, 1), RELAY_ERROR);
	assert_int_equal(r->err, EPIPE);
	close_all(&p);
	test_free(r);
	assert_string_equal(relay_end_name((enum relay_end)99), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(both_ways), cmocka_unit_test(caps), cmocka_unit_test(idle),
		cmocka_unit_test(back_pressure), cmocka_unit_test(remote_gone),
	};
	return cmocka_run_group_tests_name("proxy_relay", tests, NULL, NULL);
}
