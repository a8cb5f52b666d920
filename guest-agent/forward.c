#include "forward.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include "proto.h"

/* ---- setup, in the agent ---------------------------------------------------- */

int forward_loopback_up(char *err, size_t errlen)
{
	int rc = -1;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return proto_errf(err, errlen, "socket for loopback: %s", strerror(errno));
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
		proto_errf(err, errlen, "reading lo's flags: %s", strerror(errno));
		goto out;
	}
	/* Already up (a test on an ordinary host): nothing to change, and
	 * changing it would need privileges such a test lacks. */
	if (!(ifr.ifr_flags & IFF_UP)) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0) {
			proto_errf(err, errlen, "bringing lo up: %s", strerror(errno));
			goto out;
		}
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

int forward_listen(uint16_t port, char *err, size_t errlen)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return proto_errf(err, errlen, "socket for the proxy forwarder: %s", strerror(errno));
	int one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, PROTO_NET_PROXY_ADDR, &a.sin_addr);
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, FORWARD_BACKLOG) < 0) {
		int e = errno;
		close(fd);
		return proto_errf(err, errlen, "listening on %s:%u: %s", PROTO_NET_PROXY_ADDR, port, strerror(e));
	}
	return fd;
}

/* ---- the relay ---------------------------------------------------------------- */

void forward_init(struct forward *f, int listen_fd, forward_dial_fn dial, void *dial_arg)
{
	f->listen_fd = listen_fd;
	f->dial = dial;
	f->dial_arg = dial_arg;
	for (unsigned i = 0; i < FORWARD_MAX_CONNS; i++)
		f->conn[i].guest = f->conn[i].host = -1;
}

static void conn_close(struct forward_conn *c)
{
	if (c->guest >= 0)
		close(c->guest);
	if (c->host >= 0)
		close(c->host);
	c->guest = c->host = -1;
}

void forward_close_all(struct forward *f)
{
	for (unsigned i = 0; i < FORWARD_MAX_CONNS; i++)
		conn_close(&f->conn[i]);
}

unsigned forward_active(const struct forward *f)
{
	unsigned n = 0;
	for (unsigned i = 0; i < FORWARD_MAX_CONNS; i++)
		n += f->conn[i].guest >= 0;
	return n;
}

static void dir_reset(struct forward_dir *d)
{
	d->off = d->len = 0;
	d->eof = d->shut = false;
}

/* Take every pending connection (bounded, so that a flood cannot starve
 * the ones already relayed): into a free slot with its host side dialled,
 * or closed when there is no slot or no host. */
static void accept_new(struct forward *f)
{
	for (unsigned tries = 0; tries < FORWARD_MAX_CONNS + 1; tries++) {
		int g = accept4(f->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (g < 0)
			return;   /* EAGAIN: none left; anything else: try next round */
		struct forward_conn *c = NULL;
		for (unsigned i = 0; i < FORWARD_MAX_CONNS && !c; i++)
			if (f->conn[i].guest < 0)
				c = &f->conn[i];
		int h = c ? f->dial(f->dial_arg) : -1;
		if (h < 0) {
			close(g);
			continue;
		}
		c->guest = g;
		c->host = h;
		c->connecting = true;
		dir_reset(&c->up);
		dir_reset(&c->down);
	}
}

/* Read from src into d when d is empty and src was ready. Returns 0, or
 * -1 on a read error (the connection is closed by the caller). */
static int dir_read(struct forward_dir *d, int src, short revents)
{
	if (!revents || d->len || d->eof)
		return 0;
	ssize_t k = recv(src, d->buf, sizeof(d->buf), 0);
	if (k < 0)
		return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -1;
	if (k == 0)
		d->eof = true;
	d->off = 0;
	d->len = (size_t)k;
	return 0;
}

/* Write what d holds to dst (tried at once, not only when dst polled
 * writable, which saves a round per chunk), then pass an EOF on once all
 * is written. Returns 0, or -1 on a write error. */
static int dir_write(struct forward_dir *d, int dst)
{
	if (d->len) {
		ssize_t k = send(dst, d->buf + d->off, d->len, MSG_NOSIGNAL);
		if (k < 0)
			return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -1;
		d->off += (size_t)k;
		d->len -= (size_t)k;
	}
	if (d->eof && !d->len && !d->shut) {
		/* Half-close: the other direction may still have bytes to carry. */
		if (shutdown(dst, SHUT_WR) < 0 && errno != ENOTCONN)
			return -1;
		d->shut = true;
	}
	return 0;
}

/* The host side's connect, once it polled ready: its outcome. Returns 0
 * when connected, -1 when it failed. */
static int finish_connect(struct forward_conn *c)
{
	int e = 0;
	socklen_t elen = sizeof(e);
	if (getsockopt(c->host, SOL_SOCKET, SO_ERROR, &e, &elen) < 0 || e)
		return -1;
	c->connecting = false;
	return 0;
}

/* Move what can be moved on c, given what poll said of each side; close
 * it when both directions are done or anything failed. */
static void conn_service(struct forward_conn *c, short grev, short hrev)
{
	if (c->connecting) {
		if (!hrev)
			goto read_guest;
		if (finish_connect(c) < 0)
			goto fail;
	}
	if (dir_read(&c->down, c->host, hrev) < 0 || dir_write(&c->down, c->guest) < 0)
		goto fail;
read_guest:
	if (dir_read(&c->up, c->guest, grev) < 0 || (!c->connecting && dir_write(&c->up, c->host) < 0))
		goto fail;
	if (c->up.shut && c->down.shut)
		conn_close(c);
	return;
fail:
	conn_close(c);
}

/* What to poll a connection's sides for: reads only into an empty buffer,
 * writes only with bytes waiting (a side with nothing asked is left out,
 * so that a hung-up socket cannot spin the loop). */
static void conn_events(const struct forward_conn *c, struct pollfd *g, struct pollfd *h)
{
	short ge = 0, he = 0;
	if (!c->up.len && !c->up.eof)
		ge |= POLLIN;
	if (c->down.len)
		ge |= POLLOUT;
	if (c->connecting) {
		he = POLLOUT;
	} else {
		if (!c->down.len && !c->down.eof)
			he |= POLLIN;
		if (c->up.len)
			he |= POLLOUT;
	}
	*g = (struct pollfd){ ge ? c->guest : -1, ge, 0 };
	*h = (struct pollfd){ he ? c->host : -1, he, 0 };
}

int forward_step(struct forward *f, int timeout_ms)
{
	/* Slot i's sides at 1 + 2i and 2 + 2i; poll skips negative fds. */
	struct pollfd fds[1 + 2 * FORWARD_MAX_CONNS];
	fds[0] = (struct pollfd){ f->listen_fd, POLLIN, 0 };
	for (unsigned i = 0; i < FORWARD_MAX_CONNS; i++) {
		const struct forward_conn *c = &f->conn[i];
		if (c->guest >= 0)
			conn_events(c, &fds[1 + 2 * i], &fds[2 + 2 * i]);
		else
			fds[1 + 2 * i] = fds[2 + 2 * i] = (struct pollfd){ -1, 0, 0 };
	}
	if (poll(fds, sizeof(fds) / sizeof(fds[0]), timeout_ms) < 0)
		return errno == EINTR ? 0 : -1;
	for (unsigned i = 0; i < FORWARD_MAX_CONNS; i++) {
		short grev = fds[1 + 2 * i].revents, hrev = fds[2 + 2 * i].revents;
		if (f->conn[i].guest >= 0 && (grev || hrev))
			conn_service(&f->conn[i], grev, hrev);
	}
	if (fds[0].revents)
		accept_new(f);
	return 0;
}

/* ---- the forwarder process ------------------------------------------------- */

int forward_dial_vsock(void *arg)
{
	struct sockaddr_vm a = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST, .svm_port = *(uint32_t *)arg };
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* In the forked child: shed the agent's fds and signals, then relay until
 * killed. Never returns. */
static void forwarder_main(int listen_fd, uint32_t vsock_port, pid_t agent)
{
	/* The agent's death ends the forwarder; checked again after the
	 * prctl in case the agent died before it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != agent)
		_exit(1);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* Not the session socket, not the console: only the listener. */
	for (int fd = 0; fd < 1024; fd++)
		if (fd != listen_fd)
			close(fd);
	struct forward *f = malloc(sizeof(*f));
	if (!f)
		_exit(1);
	forward_init(f, listen_fd, forward_dial_vsock, &vsock_port);
	while (forward_step(f, -1) == 0)
		;
	_exit(1);
}

pid_t forward_spawn(int listen_fd, uint32_t vsock_port, char *err, size_t errlen)
{
	pid_t agent = getpid();
	pid_t pid = fork();
	if (pid < 0)
		return proto_errf(err, errlen, "forking the proxy forwarder: %s", strerror(errno));
	if (pid == 0)
		forwarder_main(listen_fd, vsock_port, agent);
	return pid;
}

void forward_stop(pid_t pid)
{
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}
