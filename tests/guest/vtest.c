/* vtest: a static test program run inside the guest by tests/vm/virtio.sh.
 *
 *   vtest echo PORT BYTES   connect to host (CID 2) PORT, send BYTES of a
 *                           pattern, half-close, read it all back, compare
 *   vtest listen PORT       accept one host connection on PORT and echo it
 *   vtest send PORT MIB     stream MIB MiB to host PORT (throughput)
 *   vtest read DEV MIB      read MIB MiB of block device DEV sequentially
 *
 * Prints one "vtest: ..." line; exits 0 on success. */
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
	printf("vtest: FAIL %s: %s\n", what, strerror(errno));
	return 1;
}

static int vsock_connect(unsigned port)
{
	struct sockaddr_vm a = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST, .svm_port = port };
	int fd = socket(AF_VSOCK, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return -1;
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

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + (i >> 9));
}

static int do_echo(unsigned port, size_t bytes)
{
	uint8_t *out = malloc(bytes), *in = malloc(bytes + 1);
	for (size_t i = 0; i < bytes; i++)
		out[i] = pattern(i);
	int fd = vsock_connect(port);
	if (fd < 0)
		return fail("connect");
	/* Write and read interleaved so a small echo window cannot deadlock. */
	size_t sent = 0, got = 0;
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
		if (k == 0)
			break;
		got += (size_t)k;
		if (got > bytes)
			break;
	}
	close(fd);
	if (got != bytes || memcmp(in, out, bytes)) {
		printf("vtest: FAIL echo: got %zu of %zu bytes back%s\n", got, bytes,
		       got == bytes ? ", different" : "");
		return 1;
	}
	printf("vtest: echo ok %zu bytes round trip through host port %u\n", bytes, port);
	return 0;
}

static int do_listen(unsigned port)
{
	struct sockaddr_vm a = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = port };
	int l = socket(AF_VSOCK, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0)
		return fail("listen");
	printf("vtest: listening on %u\n", port);
	fflush(stdout);
	int fd = accept(l, NULL, NULL);
	if (fd < 0)
		return fail("accept");
	uint8_t buf[65536];
	size_t total = 0;
	for (;;) {
		ssize_t k = read(fd, buf, sizeof(buf));
		if (k < 0)
			return fail("read");
		if (k == 0)
			break;
		if (write_all(fd, buf, (size_t)k))
			return fail("write");
		total += (size_t)k;
	}
	close(fd);
	close(l);
	printf("vtest: listen ok, echoed %zu bytes to the host\n", total);
	return 0;
}

static int do_send(unsigned port, size_t mib)
{
	static uint8_t buf[1 << 20];
	memset(buf, 0x5a, sizeof(buf));
	int fd = vsock_connect(port);
	if (fd < 0)
		return fail("connect");
	double t0 = now();
	for (size_t i = 0; i < mib; i++)
		if (write_all(fd, buf, sizeof(buf)))
			return fail("write");
	close(fd);
	double s = now() - t0;
	printf("vtest: sent %zu MiB in %.3f s = %.1f MiB/s (guest clock)\n", mib, s, (double)mib / s);
	return 0;
}

static int do_read(const char *dev, size_t mib)
{
	static uint8_t buf[1 << 20];
	int fd = open(dev, O_RDONLY);
	if (fd < 0)
		return fail(dev);
	double t0 = now();
	size_t total = 0;
	while (total < (mib << 20)) {
		ssize_t k = read(fd, buf, sizeof(buf));
		if (k < 0)
			return fail("read");
		if (k == 0)
			break;
		total += (size_t)k;
	}
	double s = now() - t0;
	close(fd);
	printf("vtest: read %zu MiB of %s in %.3f s = %.1f MiB/s (guest clock)\n", total >> 20, dev, s,
	       (double)(total >> 20) / s);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "echo"))
		return do_echo((unsigned)atoi(argv[2]), (size_t)atol(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "listen"))
		return do_listen((unsigned)atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "send"))
		return do_send((unsigned)atoi(argv[2]), (size_t)atol(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "read"))
		return do_read(argv[2], (size_t)atol(argv[3]));
	fprintf(stderr, "usage: vtest echo PORT BYTES | listen PORT | send PORT MIB | read DEV MIB\n");
	return 2;
}
