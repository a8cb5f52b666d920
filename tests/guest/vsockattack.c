/* vsockattack: what guest root can try on the host through vsock, for the
 * evaluation's test image (the guest-root agent).
 *
 *   vsockattack flood N      N connections to the host at once (the agent's
 *                            port, the readiness port, ports nothing serves),
 *                            then N connect-and-close in a row
 *   vsockattack impersonate  a second agent: connect to the agent's port,
 *                            say HELLO, and send a forged STDOUT and EXIT of
 *                            status 0; then print "genuine" and exit 7
 *
 * One line per attempt, "va CASE key=value...", for the evaluation's judge.
 * Exits 0 (impersonate: 7) when every attempt was made, 1 when the setup
 * failed. */
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"

#define FLOOD_MAX      4096
#define FLOOD_WAIT_MS  5000
#define FORGED_OUTPUT  "forged-output-from-an-impostor"

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int vsock_socket(unsigned port, int nonblock)
{
	struct sockaddr_vm a = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST, .svm_port = port };
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && !(nonblock && errno == EINPROGRESS)) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Which host port flood connection i goes to. */
static unsigned flood_port(int i)
{
	switch (i % 3) {
	case 0: return PROTO_VSOCK_PORT;
	case 1: return PROTO_READY_VSOCK_PORT;
	default: return 20000u + (unsigned)i;
	}
}

static int flood(int n)
{
	if (n < 1 || n > FLOOD_MAX) {
		fprintf(stderr, "vsockattack: flood: 1..%d connections\n", FLOOD_MAX);
		return 2;
	}
	struct rlimit nofile = { (rlim_t)n + 64, (rlim_t)n + 64 };
	if (setrlimit(RLIMIT_NOFILE, &nofile) < 0) {
		printf("va setup-failed setrlimit: %s\n", strerror(errno));
		return 1;
	}
	struct pollfd *p = calloc((size_t)n, sizeof(*p));
	if (!p) {
		printf("va setup-failed calloc: %s\n", strerror(errno));
		return 1;
	}
	int opened = 0, failed_at_once = 0;
	long t0 = now_ms();
	for (int i = 0; i < n; i++) {
		p[i] = (struct pollfd){ .fd = vsock_socket(flood_port(i), 1), .events = POLLOUT };
		if (p[i].fd < 0)
			failed_at_once++;
		else
			opened++;
	}
	/* Until each has connected or failed, or the wait is over. */
	int connected = 0, refused = 0, pending = 0;
	for (long left = FLOOD_WAIT_MS; left > 0 && connected + refused < opened;
	     left = FLOOD_WAIT_MS - (now_ms() - t0)) {
		int k = poll(p, (nfds_t)n, (int)left);
		if (k <= 0)
			break;
		for (int i = 0; i < n; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			int err = 0;
			socklen_t len = sizeof(err);
			getsockopt(p[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
			if (err)
				refused++;
			else
				connected++;
			close(p[i].fd);
			p[i].fd = -1;   /* poll skips it from now on */
		}
	}
	for (int i = 0; i < n; i++)
		if (p[i].fd >= 0) {
			pending++;
			close(p[i].fd);
		}
	free(p);
	printf("va flood_at_once tried=%d opened=%d failed_at_once=%d connected=%d refused=%d pending=%d ms=%ld\n", n,
	       opened, failed_at_once, connected, refused, pending, now_ms() - t0);
	/* Churn: connect and close, one after another. */
	int ok = 0, bad = 0;
	t0 = now_ms();
	for (int i = 0; i < n; i++) {
		int fd = vsock_socket(flood_port(i), 0);
		if (fd < 0) {
			bad++;
			continue;
		}
		ok++;
		close(fd);
	}
	printf("va flood_churn tried=%d connected=%d refused=%d ms=%ld\n", n, ok, bad, now_ms() - t0);
	printf("va done 2\n");
	return 0;
}

/* Whether the host sends anything on fd within ms: it would be a REQUEST,
 * the impostor taken for the agent. */
static int host_answers(int fd, int ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	if (poll(&p, 1, ms) <= 0)
		return 0;
	uint8_t b[PROTO_HDR_LEN];
	return read(fd, b, sizeof(b)) > 0;
}

static int impersonate(void)
{
	int fd = vsock_socket(PROTO_VSOCK_PORT, 0);
	printf("va impersonate_connect connected=%d%s%s\n", fd >= 0, fd < 0 ? " error=" : "",
	       fd < 0 ? strerror(errno) : "");
	int answered = 0, sent = 0;
	if (fd >= 0) {
		uint8_t hello[256];
		size_t hl = proto_encode_hello(hello, sizeof(hello), "impostor");
		struct proto_exit ex = { .kind = PROTO_END_EXITED, .code = 0, .stdout_bytes = sizeof(FORGED_OUTPUT) - 1 };
		sent = proto_send(fd, PROTO_HELLO, hello, (uint32_t)hl) == 0 &&
		       proto_send(fd, PROTO_STDOUT, FORGED_OUTPUT, sizeof(FORGED_OUTPUT) - 1) == 0 &&
		       proto_send(fd, PROTO_EXIT, &ex, sizeof(ex)) == 0;
		answered = host_answers(fd, 2000);
		close(fd);
	}
	printf("va impersonate_session frames_sent=%d host_answered=%d\n", sent, answered);
	/* The readiness port: a snapshot boot's signal, nothing in a run. */
	int rfd = vsock_socket(PROTO_READY_VSOCK_PORT, 0);
	printf("va impersonate_ready connected=%d\n", rfd >= 0);
	if (rfd >= 0)
		close(rfd);
	printf("va done 3\n");
	printf("genuine\n");
	return 7;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("va uid=%u\n", (unsigned)getuid());
	if (argc == 3 && !strcmp(argv[1], "flood"))
		return flood(atoi(argv[2]));
	if (argc == 2 && !strcmp(argv[1], "impersonate"))
		return impersonate();
	fprintf(stderr, "usage: vsockattack flood N | impersonate\n");
	return 2;
}
