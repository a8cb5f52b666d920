/* vsock_host: the host side of tests/vm/virtio.sh and the vsock benchmark,
 * speaking vmm's Firecracker-compatible Unix-socket protocol.
 *
 *   vsock_host serve-echo PATH        accept one connection on PATH (the
 *                                     "<uds>_PORT" socket), echo until EOF
 *   vsock_host serve-sink PATH        accept one, count bytes until EOF and
 *                                     print the throughput
 *   vsock_host connect UDS PORT BYTES connect to the VM's socket, send
 *                                     "CONNECT PORT\n", expect "OK n", send
 *                                     BYTES and check they come back
 *
 * Every mode gives up after VSOCK_HOST_TIMEOUT seconds (default 60). Prints
 * one "vsock_host: ..." line; exits 0 on success. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int fail(const char *what)
{
	printf("vsock_host: FAIL %s: %s\n", what, errno ? strerror(errno) : "unexpected data");
	return 1;
}

static struct sockaddr_un addr(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	return a;
}

static int accept_one(const char *path)
{
	struct sockaddr_un a = addr(path);
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	unlink(path);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0)
		return -1;
	int fd = accept(l, NULL, NULL);
	close(l);
	unlink(path);
	return fd;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int serve(const char *path, int echo)
{
	int fd = accept_one(path);
	if (fd < 0)
		return fail(path);
	static uint8_t buf[1 << 16];
	size_t total = 0;
	double t0 = 0;
	for (;;) {
		ssize_t k = read(fd, buf, sizeof(buf));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return fail("read");
		if (k == 0)
			break;
		if (total == 0)
			t0 = now();
		total += (size_t)k;
		if (echo && write_all(fd, buf, (size_t)k))
			return fail("write");
	}
	double s = now() - t0;
	close(fd);
	if (echo)
		printf("vsock_host: echoed %zu bytes\n", total);
	else
		printf("vsock_host: received %zu bytes in %.3f s = %.1f MiB/s (host clock, first byte to EOF)\n",
		       total, s, s > 0 ? (double)total / 1048576.0 / s : 0.0);
	return 0;
}

/* One attempt: returns 0 done, 1 failed for good, 2 retry (nothing listens
 * in the guest yet: vmm closed the socket without "OK"). */
static int connect_once(const char *uds, unsigned port, size_t bytes)
{
	struct sockaddr_un a = addr(uds);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail("socket");
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return 2;   /* the VM has not created its socket yet */
	}
	char line[64];
	int n = snprintf(line, sizeof(line), "CONNECT %u\n", port);
	if (write_all(fd, (uint8_t *)line, (size_t)n))
		return close(fd), 2;
	size_t got = 0;
	while (got < sizeof(line) - 1) {
		ssize_t k = read(fd, line + got, 1);
		if (k <= 0) {
			close(fd);
			return 2;
		}
		if (line[got++] == '\n')
			break;
	}
	line[got] = '\0';
	unsigned local;
	if (sscanf(line, "OK %u\n", &local) != 1) {
		close(fd);
		errno = 0;
		return fail("handshake reply");
	}
	uint8_t *out = malloc(bytes), *in = malloc(bytes + 1);
	for (size_t i = 0; i < bytes; i++)
		out[i] = (uint8_t)(i * 13 + 1);
	size_t sent = 0;
	got = 0;
	while (sent < bytes) {
		size_t chunk = bytes - sent < 16384 ? bytes - sent : 16384;
		if (write_all(fd, out + sent, chunk))
			return fail("write");
		sent += chunk;
		while (got + 16384 < sent) {
			ssize_t k = read(fd, in + got, sent - got);
			if (k <= 0)
				return fail("read");
			got += (size_t)k;
		}
	}
	shutdown(fd, SHUT_WR);
	for (;;) {
		ssize_t k = read(fd, in + got, bytes + 1 - got);
		if (k < 0)
			return fail("read");
		if (k == 0 || (got += (size_t)k) > bytes)
			break;
	}
	close(fd);
	if (got != bytes || memcmp(in, out, bytes)) {
		printf("vsock_host: FAIL got %zu of %zu bytes back\n", got, bytes);
		return 1;
	}
	printf("vsock_host: connect ok: \"%.*s\", %zu bytes round trip to guest port %u\n",
	       (int)strcspn(line, "\n"), line, bytes, port);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	const char *t = getenv("VSOCK_HOST_TIMEOUT");
	alarm(t ? (unsigned)atoi(t) : 60);
	if (argc == 3 && !strcmp(argv[1], "serve-echo"))
		return serve(argv[2], 1);
	if (argc == 3 && !strcmp(argv[1], "serve-sink"))
		return serve(argv[2], 0);
	if (argc == 5 && !strcmp(argv[1], "connect")) {
		for (;;) {
			int r = connect_once(argv[2], (unsigned)atoi(argv[3]), (size_t)atol(argv[4]));
			if (r != 2)
				return r;
			usleep(100 * 1000);
		}
	}
	fprintf(stderr, "usage: vsock_host serve-echo PATH | serve-sink PATH | connect UDS PORT BYTES\n");
	return 2;
}
