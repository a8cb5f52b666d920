/* virtio-vsock with its host side: the test is the guest (hand-built
 * packets on the TX queue, RX buffers it posts and reads back) and the host
 * processes (Unix sockets), with the device's event loop run in between.
 * Covers both connection directions, data and credit, the CONNECT
 * handshake, every kind of hostile packet, the connection cap, shutdown and
 * close in both directions, driver reset and the socket file's lifetime. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/virtio_ids.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake_virtio.h"
#include "virtio_vsock.h"

#define HDR 44u

/* RX buffers: one writable descriptor each, header and a page of data,
 * descriptor i always describing buffer i. */
#define RX_BUFS   64u
#define RX_DATA   4096u
#define RX_LEN    (HDR + RX_DATA)
#define RX_GPA(i) (FV_BUF_BASE + (uint64_t)(i) * 0x1100)
/* TX packets are laid out from here; the device consumes them before the
 * kick returns, so every packet reuses the space. */
#define TX_GPA    0x200000ull

#define GPORT 1234u   /* the guest's port for guest-initiated streams */
#define HPORT 5000u   /* the host port it connects to */

struct vfx {
	char dir[32];
	char uds[64];
	struct event_loop evl;
	struct guest_mem gm;
	struct virtio_vsock vs;
	bool released;
	struct fv_queue q[3];
	uint16_t tx_head;
	int fds[256];   /* host sockets the test opened, closed at teardown */
	unsigned nfds;
};

struct pkt {
	struct virtio_vsock_hdr h;
	uint32_t used;
	uint8_t data[RX_DATA];
};

/* ---- fixture --------------------------------------------------------------- */

static int hold(struct vfx *f, int fd)
{
	assert_true(fd >= 0);
	assert_true(f->nfds < sizeof(f->fds) / sizeof(f->fds[0]));
	f->fds[f->nfds++] = fd;
	return fd;
}

static void drop(struct vfx *f, int fd)
{
	for (unsigned i = 0; i < f->nfds; i++)
		if (f->fds[i] == fd) {
			close(fd);
			f->fds[i] = -1;
			return;
		}
	fail_msg("fd %d not held", fd);
}

static uint8_t *gp(struct vfx *f, uint64_t gpa, uint64_t len)
{
	uint8_t *p = fv_ptr(&f->gm, gpa, len);
	assert_non_null(p);
	return p;
}

static void rx_post(struct vfx *f, uint16_t id)
{
	fv_desc(&f->gm, &f->q[0], id, RX_GPA(id), RX_LEN, VRING_DESC_F_WRITE, 0);
	fv_avail(&f->gm, &f->q[0], id);
}

/* Bring the device up on fresh (zeroed) rings, as a new driver would
 * allocate them. */
static uint32_t bring_up_bare(struct vfx *f)
{
	memset(gp(f, FV_RING_BASE, 3 * FV_RING_STRIDE), 0, 3 * FV_RING_STRIDE);
	f->tx_head = 0;
	return fv_bring_up(&f->vs.t, 3, VSOCK_QUEUE_SIZE, f->q);
}

/* ... and give it RX_BUFS receive buffers. */
static void bring_up(struct vfx *f)
{
	uint32_t s = bring_up_bare(f);
	assert_int_equal(s, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK |
				    VIRTIO_CONFIG_S_DRIVER_OK);
	for (uint16_t i = 0; i < RX_BUFS; i++)
		rx_post(f, i);
	virtio_mmio_kick(&f->vs.t, VSOCK_RXQ);
}

static int setup(void **state)
{
	struct vfx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/vvskXXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->uds, sizeof(f->uds), "%s/v.sock", f->dir);
	assert_int_equal(evl_init(&f->evl), 0);
	assert_int_equal(fv_mem_init(&f->gm), 0);
	assert_int_equal(virtio_vsock_init(&f->vs, f->uds, &f->evl, &f->gm, 0xd0000000, 5), 0);
	bring_up(f);
	*state = f;
	return 0;
}

static void rm_tree(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	char p[PATH_MAX];
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	closedir(d);
	rmdir(dir);
}

static int teardown(void **state)
{
	struct vfx *f = *state;
	if (!f->released)
		virtio_vsock_release(&f->vs);
	for (unsigned i = 0; i < f->nfds; i++)
		if (f->fds[i] >= 0)
			close(f->fds[i]);
	evl_release(&f->evl);
	guest_mem_release(&f->gm);
	rm_tree(f->dir);
	free(f);
	return 0;
}

/* ---- the guest's side ------------------------------------------------------ */

static struct virtio_vsock_hdr ghdr(uint16_t op, uint32_t src_port, uint32_t dst_port)
{
	return (struct virtio_vsock_hdr){
		.src_cid = VSOCK_GUEST_CID, .dst_cid = VSOCK_HOST_CID, .src_port = src_port, .dst_port = dst_port,
		.type = VIRTIO_VSOCK_TYPE_STREAM, .op = op, .buf_alloc = VSOCK_BUF_ALLOC,
	};
}

struct tseg {
	const void *p;
	uint32_t len;
};

/* Put segs in guest memory as one readable chain on TX, kick, and check the
 * chain came back at once with nothing written. */
static void tx_segs(struct vfx *f, const struct tseg *s, unsigned n)
{
	uint16_t head = f->tx_head;
	f->tx_head = (uint16_t)((f->tx_head + 8) % VSOCK_QUEUE_SIZE);
	uint64_t gpa = TX_GPA;
	for (unsigned i = 0; i < n; i++) {
		if (s[i].len)
			memcpy(gp(f, gpa, s[i].len), s[i].p, s[i].len);
		fv_desc(&f->gm, &f->q[1], (uint16_t)(head + i), gpa, s[i].len,
			i + 1 < n ? VRING_DESC_F_NEXT : 0, (uint16_t)(head + i + 1));
		gpa += (s[i].len + 0x3fu) & ~0x3fu;
		gpa += 0x40;
	}
	fv_avail(&f->gm, &f->q[1], head);
	virtio_mmio_kick(&f->vs.t, VSOCK_TXQ);
	uint32_t id, len;
	assert_true(fv_used(&f->gm, &f->q[1], &id, &len));
	assert_int_equal(id, head);
	assert_int_equal(len, 0);
	assert_false(fv_used(&f->gm, &f->q[1], &id, &len));
	assert_false(f->vs.t.status & VIRTIO_CONFIG_S_NEEDS_RESET);
}

/* A packet: header, and the payload in its own descriptor when there is one. */
static void tx(struct vfx *f, const struct virtio_vsock_hdr *h, const void *data, uint32_t len)
{
	struct tseg s[2] = { { h, HDR }, { data, len } };
	tx_segs(f, s, len ? 2 : 1);
}

static void tx_op(struct vfx *f, uint16_t op, uint32_t src_port, uint32_t dst_port)
{
	struct virtio_vsock_hdr h = ghdr(op, src_port, dst_port);
	tx(f, &h, NULL, 0);
}

static void tx_rw(struct vfx *f, uint32_t src_port, uint32_t dst_port, const void *data, uint32_t len)
{
	struct virtio_vsock_hdr h = ghdr(VIRTIO_VSOCK_OP_RW, src_port, dst_port);
	h.len = len;
	tx(f, &h, data, len);
}

/* Take the next packet the device put on RX, running the host side (20 ms
 * at a time, at most rounds times) while there is none. The buffer goes
 * back to the device. Checks what every packet from the host must be. */
static bool rx_get(struct vfx *f, struct pkt *p, int rounds)
{
	for (int i = 0;; i++) {
		uint32_t id, len;
		if (fv_used(&f->gm, &f->q[0], &id, &len)) {
			assert_true(id < RX_BUFS);
			assert_true(len >= HDR && len <= RX_LEN);
			const uint8_t *b = gp(f, RX_GPA(id), RX_LEN);
			memcpy(&p->h, b, HDR);
			memcpy(p->data, b + HDR, len - HDR);
			p->used = len;
			assert_int_equal(p->h.src_cid, VSOCK_HOST_CID);
			assert_int_equal(p->h.dst_cid, VSOCK_GUEST_CID);
			assert_int_equal(p->h.type, VIRTIO_VSOCK_TYPE_STREAM);
			assert_int_equal(p->h.buf_alloc, VSOCK_BUF_ALLOC);
			assert_int_equal(len, HDR + p->h.len);
			if (p->h.op != VIRTIO_VSOCK_OP_RW)
				assert_int_equal(p->h.len, 0);
			if (p->h.op != VIRTIO_VSOCK_OP_SHUTDOWN)
				assert_int_equal(p->h.flags, 0);
			memset(gp(f, RX_GPA(id), RX_LEN), 0xcc, RX_LEN);
			rx_post(f, (uint16_t)id);
			virtio_mmio_kick(&f->vs.t, VSOCK_RXQ);
			return true;
		}
		if (i >= rounds)
			return false;
		evl_run_once(&f->evl, 20);
	}
}

static void rx_expect(struct vfx *f, struct pkt *p, uint16_t op, uint32_t src_port, uint32_t dst_port)
{
	if (!rx_get(f, p, 50))
		fail_msg("no packet (op %u expected)", op);
	if (p->h.op != op || p->h.src_port != src_port || p->h.dst_port != dst_port)
		fail_msg("got op %u %u->%u, expected op %u %u->%u", p->h.op, p->h.src_port, p->h.dst_port, op,
			 src_port, dst_port);
}

/* Nothing more arrives on RX while the host side runs a little. */
static void rx_none(struct vfx *f)
{
	struct pkt p;
	if (rx_get(f, &p, 3))
		fail_msg("unexpected packet op %u %u->%u len %u", p.h.op, p.h.src_port, p.h.dst_port, p.h.len);
}

/* ---- the host's side --------------------------------------------------------- */

static void port_path(struct vfx *f, uint32_t port, char *buf, size_t len)
{
	assert_true(snprintf(buf, len, "%s_%u", f->uds, port) < (int)len);
}

/* A host process listening on host port `port`. */
static int host_listen(struct vfx *f, uint32_t port)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	port_path(f, port, a.sun_path, sizeof(a.sun_path));
	int fd = hold(f, socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 16), 0);
	return fd;
}

static int host_accept(struct vfx *f, int lfd)
{
	return hold(f, accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC));
}

static void host_no_pending_accept(int lfd)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd >= 0)
		close(fd);
	assert_int_equal(fd, -1);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
}

/* A host process connecting to the device's socket. */
static int host_connect(struct vfx *f)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", f->uds);
	int fd = hold(f, socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static void host_send(int fd, const void *p, size_t n)
{
	assert_int_equal(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void host_send_str(int fd, const char *s)
{
	host_send(fd, s, strlen(s));
}

/* Read exactly n bytes, running the device while none are there. */
static void host_read_exact(struct vfx *f, int fd, void *buf, size_t n)
{
	size_t got = 0;
	for (int round = 0; got < n; round++) {
		ssize_t k = recv(fd, (uint8_t *)buf + got, n - got, MSG_DONTWAIT);
		if (k > 0) {
			got += (size_t)k;
			continue;
		}
		if (k == 0)
			fail_msg("EOF after %zu of %zu bytes", got, n);
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			fail_msg("recv: %s after %zu of %zu bytes", strerror(errno), got, n);
		if (round > 50)
			fail_msg("only %zu of %zu bytes arrived", got, n);
		evl_run_once(&f->evl, 20);
	}
}

/* The device closed its end: EOF (or a reset, when it closed with our data
 * unread), and no data before it. */
static void host_expect_eof(struct vfx *f, int fd)
{
	for (int round = 0;; round++) {
		uint8_t b[64];
		ssize_t k = recv(fd, b, sizeof(b), MSG_DONTWAIT);
		if (k == 0 || (k < 0 && errno == ECONNRESET))
			return;
		if (k > 0)
			fail_msg("%zd bytes where EOF was expected", k);
		if (round > 50)
			fail_msg("the device did not close its end");
		evl_run_once(&f->evl, 20);
	}
}

/* The device's end is open and sent nothing. */
static void host_expect_open(int fd)
{
	uint8_t b[64];
	ssize_t k = recv(fd, b, sizeof(b), MSG_DONTWAIT);
	if (k >= 0)
		fail_msg("expected nothing, recv gave %zd", k);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Run the device until nothing is ready: time passing before the guest
 * answers. */
static void run_idle(struct vfx *f)
{
	for (int i = 0; i < 100 && evl_run_once(&f->evl, 0) > 0; i++)
		;
}

static unsigned conns_in_use(struct vfx *f)
{
	unsigned n = 0;
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++)
		n += f->vs.conns[i].state != VSOCK_FREE;
	return n;
}

static struct vsock_conn *find_conn(struct vfx *f, uint32_t local, uint32_t peer)
{
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++) {
		struct vsock_conn *c = &f->vs.conns[i];
		if (c->state >= VSOCK_CONNECTING && c->local_port == local && c->peer_port == peer)
			return c;
	}
	return NULL;
}

/* ---- connection helpers ------------------------------------------------------ */

/* The guest connects from gport to host port hport, offering buf_alloc
 * bytes of credit; returns the host's accepted socket. */
static int guest_connect(struct vfx *f, int lfd, uint32_t gport, uint32_t hport, uint32_t buf_alloc)
{
	struct virtio_vsock_hdr h = ghdr(VIRTIO_VSOCK_OP_REQUEST, gport, hport);
	h.buf_alloc = buf_alloc;
	tx(f, &h, NULL, 0);
	struct pkt p;
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RESPONSE, hport, gport);
	assert_int_equal(p.h.fwd_cnt, 0);
	return host_accept(f, lfd);
}

/* A host process connects to guest port gport and the guest accepts;
 * returns the host socket, *local the device's port for the stream. */
static int host_open(struct vfx *f, uint32_t gport, uint32_t *local)
{
	int fd = host_connect(f);
	char line[40];
	snprintf(line, sizeof(line), "CONNECT %u\n", gport);
	host_send_str(fd, line);
	struct pkt p;
	assert_true(rx_get(f, &p, 50));
	assert_int_equal(p.h.op, VIRTIO_VSOCK_OP_REQUEST);
	assert_int_equal(p.h.dst_port, gport);
	assert_true(p.h.src_port >= VSOCK_HOST_PORT_BASE);
	*local = p.h.src_port;
	tx_op(f, VIRTIO_VSOCK_OP_RESPONSE, gport, *local);
	char want[40], got[40];
	int n = snprintf(want, sizeof(want), "OK %u\n", *local);
	host_read_exact(f, fd, got, (size_t)n);
	assert_memory_equal(got, want, (size_t)n);
	host_expect_open(fd);
	return fd;
}

static void pattern(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 29u + i * 13u + (i >> 8));
}

/* ---- config ------------------------------------------------------------------ */

static void config_space(void **state)
{
	struct vfx *f = *state;
	struct virtio_mmio *t = &f->vs.t;
	assert_int_equal(fv_read(t, VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_VSOCK);
	assert_int_equal(fv_read(t, VIRTIO_MMIO_CONFIG), 3);
	assert_int_equal(fv_read(t, VIRTIO_MMIO_CONFIG + 4), 0);
	uint64_t cid = 0;
	virtio_mmio_read(t, VIRTIO_MMIO_CONFIG, (uint8_t *)&cid, 8);
	assert_int_equal(cid, VSOCK_GUEST_CID);
	assert_int_equal(fv_read(t, VIRTIO_MMIO_CONFIG + 8), 0);
	/* VIRTIO_F_VERSION_1 and nothing else */
	fv_write(t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	assert_int_equal(fv_read(t, VIRTIO_MMIO_DEVICE_FEATURES), 0);
	fv_write(t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	assert_int_equal(fv_read(t, VIRTIO_MMIO_DEVICE_FEATURES), 1);
	for (uint32_t q = 0; q < 3; q++) {
		fv_write(t, VIRTIO_MMIO_QUEUE_SEL, q);
		assert_int_equal(fv_read(t, VIRTIO_MMIO_QUEUE_NUM_MAX), VSOCK_QUEUE_SIZE);
	}
	struct stat st;
	assert_int_equal(stat(f->uds, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	/* nothing is sent before anything happens */
	rx_none(f);
}

/* ---- guest -> host streams ------------------------------------------------------ */

static void guest_connect_and_data(void **state)
{
	struct vfx *f = *state;
	int lfd = host_listen(f, HPORT);
	int hfd = guest_connect(f, lfd, GPORT, HPORT, VSOCK_BUF_ALLOC);
	assert_int_equal(conns_in_use(f), 1);

	/* guest -> host, the payload over two descriptors */
	uint8_t out[1000], back[1000];
	pattern(out, sizeof(out), 1);
	struct virtio_vsock_hdr h = ghdr(VIRTIO_VSOCK_OP_RW, GPORT, HPORT);
	h.len = 1000;
	struct tseg s[3] = { { &h, HDR }, { out, 300 }, { out + 300, 700 } };
	tx_segs(f, s, 3);
	host_read_exact(f, hfd, back, sizeof(back));
	assert_memory_equal(back, out, sizeof(out));
	host_expect_open(hfd);
	assert_int_equal(f->vs.stats.to_host, 1000);
	rx_none(f);   /* no credit update owed for so little */

	/* host -> guest */
	uint8_t in[3000];
	pattern(in, sizeof(in), 2);
	host_send(hfd, in, sizeof(in));
	struct pkt p;
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RW, HPORT, GPORT);
	assert_int_equal(p.h.len, 3000);
	assert_int_equal(p.used, HDR + 3000);
	assert_int_equal(p.h.fwd_cnt, 1000);   /* what it wrote to the host so far */
	assert_memory_equal(p.data, in, 3000);
	assert_int_equal(f->vs.stats.to_guest, 3000);

	/* more than one RX buffer holds: split at the buffers, in order */
	uint8_t big[5000], got[5000];
	pattern(big, sizeof(big), 3);
	host_send(hfd, big, sizeof(big));
	size_t n = 0;
	while (n < sizeof(big)) {
		rx_expect(f, &p, VIRTIO_VSOCK_OP_RW, HPORT, GPORT);
		assert_true(p.h.len > 0 && p.h.len <= RX_DATA);
		assert_true(n + p.h.len <= sizeof(big));
		memcpy(got + n, p.data, p.h.len);
		n += p.h.len;
	}
	assert_memory_equal(got, big, sizeof(big));
	rx_none(f);
	assert_int_equal(f->vs.stats.bad_packets, 0);
	assert_int_equal(f->vs.stats.resets_sent, 0);

	/* what vmm's state line says of it: the live queues, the byte
	 * counts, the connection and the guest's credit left */
	char line[400], want[128];
	virtio_mmio_describe(&f->vs.t, line, sizeof(line));
	assert_non_null(strstr(line, "vsock: irq "));
	assert_non_null(strstr(line, ", status 0xf isr "));
	assert_non_null(strstr(line, ", q0 avail "));
	assert_non_null(strstr(line, ", to host 1000, to guest 8000, resets 0 owed 0"));
	snprintf(want, sizeof(want), ", conn %u->%u established pending 0x0 credit %u buffered 0", HPORT, GPORT,
		 VSOCK_BUF_ALLOC - 8000);
	assert_non_null(strstr(line, want));
}

/* The device sends the host's data only as far as the guest's credit goes. */
static void guest_credit_limits_host_data(void **state)
{
	struct vfx *f = *state;
	int lfd = host_listen(f, HPORT);
	int hfd = guest_connect(f, lfd, GPORT, HPORT, 100);
	uint8_t in[1000], got[1000];
	pattern(in, sizeof(in), 4);
	host_send(hfd, in, sizeof(in));

	struct pkt p;
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RW, HPORT, GPORT);
	assert_int_equal(p.h.len, 100);
	memcpy(got, p.data, 100);
	rx_none(f);

	/* the guest consumed 100: 100 more */
	struct virtio_vsock_hdr h = ghdr(VIRTIO_VSOCK_OP_CREDIT_UPDATE, GPORT, HPORT);
	h.buf_alloc = 100;
	h.fwd_cnt = 100;
	tx(f, &h, NULL, 0);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RW, HPORT, GPORT);
	assert_int_equal(p.h.len, 100);
	memcpy(got + 100, p.data, 100);
	rx_none(f);

	/* consumed 50 more: 50 more */
	h.fwd_cnt = 150;
	tx(f, &h, NULL, 0);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RW, HPORT, GPORT);
	assert_int_equal(p.h.len, 50);
	memcpy(got + 200, p.data, 50);
	rx_none(f);

	/* a credit update that changes nothing: nothing */
	tx(f, &h, NULL, 0);
	rx_none(f);

	/* a larger buffer: the rest */
	h.buf_alloc = 10000;
	h.fwd_cnt = 250;
	tx(f, &h, NULL, 0);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RW, HPORT, GPORT);
	assert_int_equal(p.h.len, 750);
	memcpy(got + 250, p.data, 750);
	assert_memory_equal(got, in, sizeof(in));
	rx_none(f);
	assert_int_equal(f->vs.stats.to_guest, 1000);
}

static void guest_connect_no_listener(void **state)
{
	struct vfx *f = *state;
	struct pkt p;
	tx_op(f, VIRTIO_VSOCK_OP_REQUEST, GPORT, HPORT + 1);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT + 1, GPORT);
	assert_int_equal(f->vs.stats.resets_sent, 1);

	/* a socket file nobody listens on */
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	port_path(f, HPORT + 2, a.sun_path, sizeof(a.sun_path));
	int fd = hold(f, socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	tx_op(f, VIRTIO_VSOCK_OP_REQUEST, GPORT, HPORT + 2);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT + 2, GPORT);
	rx_none(f);
	assert_int_equal(conns_in_use(f), 0);
	assert_int_equal(f->vs.stats.resets_sent, 2);
}

/* ---- host -> guest streams ---------------------------------------------------- */

static void host_connect_flow(void **state)
{
	struct vfx *f = *state;
	int fd = host_connect(f);
	host_send_str(fd, "CONNECT 52\n");
	struct pkt p;
	rx_expect(f, &p, VIRTIO_VSOCK_OP_REQUEST, VSOCK_HOST_PORT_BASE, 52);
	/* nothing said to the host until the guest answers */
	host_expect_open(fd);
	tx_op(f, VIRTIO_VSOCK_OP_RESPONSE, 52, VSOCK_HOST_PORT_BASE);
	char got[32];
	const char *want = "OK 1073741824\n";
	host_read_exact(f, fd, got, strlen(want));
	assert_memory_equal(got, want, strlen(want));
	host_expect_open(fd);

	/* both ways */
	tx_rw(f, 52, VSOCK_HOST_PORT_BASE, "ping", 4);
	host_read_exact(f, fd, got, 4);
	assert_memory_equal(got, "ping", 4);
	host_send_str(fd, "pong!");
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RW, VSOCK_HOST_PORT_BASE, 52);
	assert_int_equal(p.h.len, 5);
	assert_int_equal(p.h.fwd_cnt, 4);
	assert_memory_equal(p.data, "pong!", 5);

	/* a second stream to the same guest port gets its own local port */
	uint32_t local;
	int fd2 = host_open(f, 52, &local);
	assert_int_equal(local, VSOCK_HOST_PORT_BASE + 1);
	host_send_str(fd2, "two");
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RW, VSOCK_HOST_PORT_BASE + 1, 52);
	assert_memory_equal(p.data, "two", 3);
	rx_none(f);
	assert_int_equal(conns_in_use(f), 2);
}

/* What follows the CONNECT line in the same write is the stream's first
 * data, not part of the handshake: the guest gets it once it answers, even
 * late. Here the host reads its "OK" line first, as most clients do;
 * host_early_data_without_host_read covers one that does not. */
static void host_connect_data_in_same_write(void **state)
{
	struct vfx *f = *state;
	int fd = host_connect(f);
	host_send_str(fd, "CONNECT 52\nearly data");
	struct pkt p;
	rx_expect(f, &p, VIRTIO_VSOCK_OP_REQUEST, VSOCK_HOST_PORT_BASE, 52);
	run_idle(f);   /* the guest takes its time */
	tx_op(f, VIRTIO_VSOCK_OP_RESPONSE, 52, VSOCK_HOST_PORT_BASE);
	char got[32];
	host_read_exact(f, fd, got, 14);
	assert_memory_equal(got, "OK 1073741824\n", 14);
	if (!rx_get(f, &p, 25))
		fail_msg("the data sent with the CONNECT line never reached the guest");
	assert_int_equal(p.h.op, VIRTIO_VSOCK_OP_RW);
	assert_int_equal(p.h.len, 10);
	assert_memory_equal(p.data, "early data", 10);
}

/* Data the host sent before the guest answered (with the CONNECT line, or
 * after it) goes to the guest once it answers, whether or not the host
 * reads its "OK" line first: a client may well write its whole request
 * before it reads anything. */
static void host_early_data_without_host_read(void **state)
{
	struct vfx *f = *state;
	int fd = host_connect(f);
	host_send_str(fd, "CONNECT 52\nearly ");
	struct pkt p;
	rx_expect(f, &p, VIRTIO_VSOCK_OP_REQUEST, VSOCK_HOST_PORT_BASE, 52);
	host_send_str(fd, "data");
	run_idle(f);   /* the guest takes its time */
	tx_op(f, VIRTIO_VSOCK_OP_RESPONSE, 52, VSOCK_HOST_PORT_BASE);
	char got[16];
	size_t n = 0;
	while (n < 10) {
		if (!rx_get(f, &p, 25))
			fail_msg("%zu of the 10 bytes the host sent before the RESPONSE reached the guest", n);
		assert_int_equal(p.h.op, VIRTIO_VSOCK_OP_RW);
		assert_true(n + p.h.len <= 10);
		memcpy(got + n, p.data, p.h.len);
		n += p.h.len;
	}
	assert_memory_equal(got, "early data", 10);
	host_read_exact(f, fd, got, 14);
	assert_memory_equal(got, "OK 1073741824\n", 14);
}

static void host_connect_guest_refuses(void **state)
{
	struct vfx *f = *state;
	int fd = host_connect(f);
	host_send_str(fd, "CONNECT 52\n");
	struct pkt p;
	rx_expect(f, &p, VIRTIO_VSOCK_OP_REQUEST, VSOCK_HOST_PORT_BASE, 52);
	tx_op(f, VIRTIO_VSOCK_OP_RST, 52, VSOCK_HOST_PORT_BASE);
	host_expect_eof(f, fd);   /* no "OK" */
	assert_int_equal(conns_in_use(f), 0);
	rx_none(f);   /* no reset answers a reset */
}

/* The handshake line: what is refused, and a line that comes in pieces. */
static void host_bad_handshakes(void **state)
{
	struct vfx *f = *state;
	const char *bad[] = {
		"HELLO\n",
		"CONNECT x\n",
		"CONNECT 99999999999\n",
		"CONNECT 4294967296\n",
		"CONNECT \n",
		"CONNECT -1\n",
		"CONNECT 52 \n",
		"connect 52\n",
		"\n",
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",   /* 40 bytes, no newline */
		"CONNECT 0000000000000000000000052\n",        /* a line longer than 32 */
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int fd = host_connect(f);
		host_send_str(fd, bad[i]);
		host_expect_eof(f, fd);
		drop(f, fd);
		assert_int_equal(conns_in_use(f), 0);
	}
	rx_none(f);

	/* the line in pieces: nothing happens until the newline */
	int fd = host_connect(f);
	host_send_str(fd, "CONNECT 5");
	run_idle(f);
	host_expect_open(fd);
	assert_int_equal(conns_in_use(f), 1);
	rx_none(f);
	host_send_str(fd, "2\n");
	struct pkt p;
	rx_expect(f, &p, VIRTIO_VSOCK_OP_REQUEST, VSOCK_HOST_PORT_BASE, 52);

	/* the largest port */
	fd = host_connect(f);
	host_send_str(fd, "CONNECT 4294967295\n");
	rx_expect(f, &p, VIRTIO_VSOCK_OP_REQUEST, VSOCK_HOST_PORT_BASE + 1, UINT32_MAX);
	assert_int_equal(f->vs.stats.bad_packets, 0);
}

/* A host client that goes away before finishing its line must not keep a
 * connection slot: VSOCK_MAX_CONNS of them would lock every guest and host
 * stream out. */
static void host_handshake_abandoned(void **state)
{
	struct vfx *f = *state;
	/* gone before a byte */
	int fd = host_connect(f);
	run_idle(f);
	assert_int_equal(conns_in_use(f), 1);
	drop(f, fd);
	run_idle(f);
	assert_int_equal(conns_in_use(f), 0);

	/* gone halfway through its line */
	fd = host_connect(f);
	host_send_str(fd, "CONN");
	run_idle(f);
	assert_int_equal(conns_in_use(f), 1);
	drop(f, fd);
	for (int i = 0; i < 5; i++)
		evl_run_once(&f->evl, 20);
	assert_int_equal(conns_in_use(f), 0);
}

/* ---- hostile guest packets ---------------------------------------------------- */

static void rw_unknown_connection(void **state)
{
	struct vfx *f = *state;
	struct pkt p;
	tx_rw(f, GPORT, HPORT, "data", 4);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT, GPORT);
	tx_op(f, VIRTIO_VSOCK_OP_SHUTDOWN, GPORT, HPORT);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT, GPORT);
	tx_op(f, VIRTIO_VSOCK_OP_CREDIT_UPDATE, GPORT + 1, HPORT);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT, GPORT + 1);
	tx_op(f, VIRTIO_VSOCK_OP_RESPONSE, 52, VSOCK_HOST_PORT_BASE);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, VSOCK_HOST_PORT_BASE, 52);
	/* never a reset for a reset */
	tx_op(f, VIRTIO_VSOCK_OP_RST, GPORT, HPORT);
	rx_none(f);
	assert_int_equal(f->vs.stats.resets_sent, 4);
	assert_int_equal(f->vs.stats.to_host, 0);
	assert_int_equal(conns_in_use(f), 0);
}

/* A guest that sends past its credit while the host does not read is reset
 * the moment it does, not buffered without bound. */
static void rw_over_credit(void **state)
{
	struct vfx *f = *state;
	int lfd = host_listen(f, HPORT);
	int hfd = guest_connect(f, lfd, GPORT, HPORT, VSOCK_BUF_ALLOC);
	struct vsock_conn *c = find_conn(f, HPORT, GPORT);
	assert_non_null(c);
	static uint8_t stream[64u * VSOCK_MAX_PKT];
	pattern(stream, sizeof(stream), 5);

	unsigned sent = 0;
	bool reset = false;
	while (!reset) {
		assert_true(sent < 64);
		assert_int_equal(c->state, VSOCK_ESTABLISHED);
		uint32_t outstanding = c->rx_cnt - c->fwd_cnt;
		bool over = outstanding + VSOCK_MAX_PKT > VSOCK_BUF_ALLOC;
		tx_rw(f, GPORT, HPORT, stream + (size_t)sent * VSOCK_MAX_PKT, VSOCK_MAX_PKT);
		sent++;
		struct pkt p;
		while (rx_get(f, &p, 0)) {
			if (p.h.op == VIRTIO_VSOCK_OP_CREDIT_UPDATE)
				continue;
			assert_int_equal(p.h.op, VIRTIO_VSOCK_OP_RST);
			assert_int_equal(p.h.src_port, HPORT);
			assert_int_equal(p.h.dst_port, GPORT);
			reset = true;
		}
		assert_int_equal(reset, over);
	}
	/* it had all the credit it was given before it went over */
	assert_true((sent - 1) * VSOCK_MAX_PKT >= VSOCK_BUF_ALLOC);
	assert_null(find_conn(f, HPORT, GPORT));
	assert_int_equal(conns_in_use(f), 0);

	/* the host got a prefix of the stream, then the end */
	static uint8_t got[64u * VSOCK_MAX_PKT];
	size_t n = 0;
	for (;;) {
		ssize_t k = recv(hfd, got + n, sizeof(got) - n, MSG_DONTWAIT);
		if (k <= 0) {
			assert_true(k == 0 || errno == ECONNRESET);
			break;
		}
		n += (size_t)k;
	}
	assert_true(n > 0 && n < (size_t)sent * VSOCK_MAX_PKT);
	assert_memory_equal(got, stream, n);
}

static int live_conn(struct vfx *f, int *lfd)
{
	*lfd = host_listen(f, HPORT);
	return guest_connect(f, *lfd, GPORT, HPORT, VSOCK_BUF_ALLOC);
}

/* Malformed or misaddressed packets are dropped and counted; the stream
 * they name goes on as if they never came. */
static void malformed_dropped(void **state)
{
	struct vfx *f = *state;
	int lfd;
	int hfd = live_conn(f, &lfd);
	static uint8_t data[VSOCK_MAX_PKT + 1];
	pattern(data, sizeof(data), 6);
	uint64_t bad = 0;

	/* len more than the payload present */
	struct virtio_vsock_hdr h = ghdr(VIRTIO_VSOCK_OP_RW, GPORT, HPORT);
	h.len = 100;
	tx(f, &h, data, 50);
	assert_int_equal(f->vs.stats.bad_packets, ++bad);
	h.len = 1;
	tx(f, &h, NULL, 0);
	assert_int_equal(f->vs.stats.bad_packets, ++bad);
	h.len = UINT32_MAX;
	tx(f, &h, data, 64);
	assert_int_equal(f->vs.stats.bad_packets, ++bad);

	/* len over 64 KiB, all of it present */
	h.len = VSOCK_MAX_PKT + 1;
	tx(f, &h, data, VSOCK_MAX_PKT + 1);
	assert_int_equal(f->vs.stats.bad_packets, ++bad);

	/* a header short by one byte, and none at all */
	h.len = 0;
	struct tseg s1[1] = { { &h, HDR - 1 } };
	tx_segs(f, s1, 1);
	assert_int_equal(f->vs.stats.bad_packets, ++bad);
	struct tseg s0[1] = { { NULL, 0 } };
	tx_segs(f, s0, 1);
	assert_int_equal(f->vs.stats.bad_packets, ++bad);

	/* wrong addresses */
	const struct {
		uint64_t src, dst;
	} cids[] = {
		{ 4, VSOCK_HOST_CID },
		{ VSOCK_HOST_CID, VSOCK_HOST_CID },
		{ VSOCK_GUEST_CID | 1ull << 32, VSOCK_HOST_CID },
		{ VSOCK_GUEST_CID, VSOCK_GUEST_CID },
		{ VSOCK_GUEST_CID, 1 },
		{ VSOCK_GUEST_CID, VSOCK_HOST_CID | 1ull << 32 },
		{ UINT64_MAX, UINT64_MAX },
	};
	for (unsigned i = 0; i < sizeof(cids) / sizeof(cids[0]); i++) {
		h = ghdr(VIRTIO_VSOCK_OP_RW, GPORT, HPORT);
		h.src_cid = cids[i].src;
		h.dst_cid = cids[i].dst;
		h.len = 4;
		tx(f, &h, "evil", 4);
		assert_int_equal(f->vs.stats.bad_packets, ++bad);
		/* not even a request gets through */
		h.op = VIRTIO_VSOCK_OP_REQUEST;
		h.len = 0;
		h.src_port = GPORT + 1;
		tx(f, &h, NULL, 0);
		assert_int_equal(f->vs.stats.bad_packets, ++bad);
	}
	host_no_pending_accept(lfd);
	host_expect_open(hfd);
	rx_none(f);
	assert_int_equal(f->vs.stats.resets_sent, 0);
	assert_int_equal(f->vs.stats.to_host, 0);

	/* the stream is intact; a header split over two descriptors is fine */
	h = ghdr(VIRTIO_VSOCK_OP_RW, GPORT, HPORT);
	h.len = 6;
	struct tseg s2[3] = { { &h, 20 }, { (uint8_t *)&h + 20, HDR - 20 }, { "intact", 6 } };
	tx_segs(f, s2, 3);
	char got[6];
	host_read_exact(f, hfd, got, 6);
	assert_memory_equal(got, "intact", 6);
	/* as is a full 64 KiB packet */
	tx_rw(f, GPORT, HPORT, data, VSOCK_MAX_PKT);
	static uint8_t back[VSOCK_MAX_PKT];
	host_read_exact(f, hfd, back, VSOCK_MAX_PKT);
	assert_memory_equal(back, data, VSOCK_MAX_PKT);
	assert_int_equal(f->vs.stats.bad_packets, bad);
	assert_int_equal(conns_in_use(f), 1);
}

static void unknown_op_resets(void **state)
{
	struct vfx *f = *state;
	int lfd = host_listen(f, HPORT);
	const uint16_t ops[] = { VIRTIO_VSOCK_OP_INVALID, 8, 99, UINT16_MAX };
	for (unsigned i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		int hfd = guest_connect(f, lfd, GPORT, HPORT, VSOCK_BUF_ALLOC);
		tx_op(f, ops[i], GPORT, HPORT);
		struct pkt p;
		rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT, GPORT);
		host_expect_eof(f, hfd);
		assert_int_equal(conns_in_use(f), 0);
	}
	rx_none(f);
}

static void seqpacket_refused(void **state)
{
	struct vfx *f = *state;
	int lfd = host_listen(f, HPORT);
	const uint16_t types[] = { VIRTIO_VSOCK_TYPE_SEQPACKET, 0, 3, UINT16_MAX };
	for (unsigned i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		struct virtio_vsock_hdr h = ghdr(VIRTIO_VSOCK_OP_REQUEST, GPORT, HPORT);
		h.type = types[i];
		tx(f, &h, NULL, 0);
		struct pkt p;
		rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT, GPORT);
		host_no_pending_accept(lfd);
		assert_int_equal(conns_in_use(f), 0);
	}
	rx_none(f);
}

/* A non-stream packet naming a live stream is answered with a reset: the
 * guest then considers the stream gone, so the host side must go too. */
static void seqpacket_on_live_stream(void **state)
{
	struct vfx *f = *state;
	int lfd;
	int hfd = live_conn(f, &lfd);
	struct virtio_vsock_hdr h = ghdr(VIRTIO_VSOCK_OP_RW, GPORT, HPORT);
	h.type = VIRTIO_VSOCK_TYPE_SEQPACKET;
	h.len = 4;
	tx(f, &h, "seqp", 4);
	struct pkt p;
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT, GPORT);
	host_expect_eof(f, hfd);
	assert_null(find_conn(f, HPORT, GPORT));
}

static void second_request_resets(void **state)
{
	struct vfx *f = *state;
	int lfd;
	int hfd = live_conn(f, &lfd);
	tx_op(f, VIRTIO_VSOCK_OP_REQUEST, GPORT, HPORT);
	struct pkt p;
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT, GPORT);
	host_expect_eof(f, hfd);
	host_no_pending_accept(lfd);   /* no second host connection either */
	assert_int_equal(conns_in_use(f), 0);
	rx_none(f);

	/* a RESPONSE to a stream the guest itself opened is as wrong */
	hfd = guest_connect(f, lfd, GPORT, HPORT, VSOCK_BUF_ALLOC);
	tx_op(f, VIRTIO_VSOCK_OP_RESPONSE, GPORT, HPORT);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT, GPORT);
	host_expect_eof(f, hfd);
	assert_int_equal(conns_in_use(f), 0);
}

/* ---- limits -------------------------------------------------------------------- */

static void connection_cap(void **state)
{
	struct vfx *f = *state;
	int fds[VSOCK_MAX_CONNS];
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++) {
		fds[i] = host_connect(f);
		run_idle(f);
	}
	assert_int_equal(conns_in_use(f), VSOCK_MAX_CONNS);
	/* one too many: closed at once */
	int extra = host_connect(f);
	host_expect_eof(f, extra);
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++)
		host_expect_open(fds[i]);
	assert_int_equal(conns_in_use(f), VSOCK_MAX_CONNS);

	/* the guest shares the cap */
	host_listen(f, HPORT);   /* a listener, so that only the cap can refuse */
	tx_op(f, VIRTIO_VSOCK_OP_REQUEST, GPORT, HPORT);
	struct pkt p;
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT, GPORT);

	/* a slot freed is a slot to use */
	drop(f, fds[17]);
	run_idle(f);
	assert_int_equal(conns_in_use(f), VSOCK_MAX_CONNS - 1);
	int fd = host_connect(f);
	host_send_str(fd, "CONNECT 52\n");
	rx_expect(f, &p, VIRTIO_VSOCK_OP_REQUEST, VSOCK_HOST_PORT_BASE, 52);
	assert_int_equal(conns_in_use(f), VSOCK_MAX_CONNS);
}

/* An RX buffer that cannot hold a header goes back unused; the packet
 * waits for the next one. */
static void rx_buffer_too_small(void **state)
{
	struct vfx *f = *state;
	/* take every posted buffer out of the device's reach by resetting
	 * and bringing up with just one small buffer, then a good one */
	fv_write(&f->vs.t, VIRTIO_MMIO_STATUS, 0);
	assert_int_equal(bring_up_bare(f) & VIRTIO_CONFIG_S_DRIVER_OK, VIRTIO_CONFIG_S_DRIVER_OK);
	fv_desc(&f->gm, &f->q[0], 0, RX_GPA(0), HDR - 1, VRING_DESC_F_WRITE, 0);
	fv_avail(&f->gm, &f->q[0], 0);
	virtio_mmio_kick(&f->vs.t, VSOCK_RXQ);
	tx_op(f, VIRTIO_VSOCK_OP_RW, GPORT, HPORT);   /* owed: a reset */
	uint32_t id, len;
	assert_true(fv_used(&f->gm, &f->q[0], &id, &len));
	assert_int_equal(id, 0);
	assert_int_equal(len, 0);
	assert_int_equal(f->vs.stats.bad_packets, 1);
	assert_int_equal(f->vs.stats.resets_sent, 0);
	rx_post(f, 1);
	virtio_mmio_kick(&f->vs.t, VSOCK_RXQ);
	struct pkt p;
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT, GPORT);
	assert_int_equal(f->vs.stats.resets_sent, 1);
}

/* ---- shutdown and close ----------------------------------------------------------- */

static void guest_shutdown(void **state)
{
	struct vfx *f = *state;
	int lfd;
	int hfd = live_conn(f, &lfd);
	tx_rw(f, GPORT, HPORT, "bye", 3);
	struct virtio_vsock_hdr h = ghdr(VIRTIO_VSOCK_OP_SHUTDOWN, GPORT, HPORT);
	h.flags = VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND;
	tx(f, &h, NULL, 0);
	char got[3];
	host_read_exact(f, hfd, got, 3);
	assert_memory_equal(got, "bye", 3);
	host_expect_eof(f, hfd);
	struct pkt p;
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT, GPORT);
	assert_int_equal(conns_in_use(f), 0);
	rx_none(f);

	/* one way, then the other */
	hfd = guest_connect(f, lfd, GPORT, HPORT, VSOCK_BUF_ALLOC);
	h.flags = VIRTIO_VSOCK_SHUTDOWN_SEND;
	tx(f, &h, NULL, 0);
	host_expect_eof(f, hfd);   /* the guest sends no more */
	rx_none(f);
	host_send_str(hfd, "still");   /* but still receives */
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RW, HPORT, GPORT);
	assert_memory_equal(p.data, "still", 5);
	tx_rw(f, GPORT, HPORT, "late", 4);   /* data after its own shutdown */
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT, GPORT);
	assert_int_equal(conns_in_use(f), 0);

	hfd = guest_connect(f, lfd, GPORT, HPORT, VSOCK_BUF_ALLOC);
	h.flags = VIRTIO_VSOCK_SHUTDOWN_SEND;
	tx(f, &h, NULL, 0);
	h.flags = VIRTIO_VSOCK_SHUTDOWN_RCV;
	tx(f, &h, NULL, 0);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT, GPORT);
	assert_int_equal(conns_in_use(f), 0);
}

/* The host closes: the guest gets everything it wrote, then a SHUTDOWN
 * saying the host sends no more (a Unix EOF may be a half-close, so only
 * SEND). */
static void host_close(void **state)
{
	struct vfx *f = *state;
	int lfd;
	int hfd = live_conn(f, &lfd);
	uint8_t in[10000], got[10000];
	pattern(in, sizeof(in), 7);
	host_send(hfd, in, sizeof(in));
	drop(f, hfd);
	size_t n = 0;
	struct pkt p;
	while (n < sizeof(in)) {
		rx_expect(f, &p, VIRTIO_VSOCK_OP_RW, HPORT, GPORT);
		assert_true(n + p.h.len <= sizeof(in));
		memcpy(got + n, p.data, p.h.len);
		n += p.h.len;
	}
	assert_memory_equal(got, in, sizeof(in));
	rx_expect(f, &p, VIRTIO_VSOCK_OP_SHUTDOWN, HPORT, GPORT);
	assert_int_equal(p.h.flags, VIRTIO_VSOCK_SHUTDOWN_SEND);
	rx_none(f);
	/* the guest finishes the close with a reset: nothing answers it */
	tx_op(f, VIRTIO_VSOCK_OP_RST, GPORT, HPORT);
	assert_int_equal(conns_in_use(f), 0);
	rx_none(f);

	/* a host-initiated stream the same way; the guest closes with a
	 * SHUTDOWN and gets the reset that ends the stream */
	uint32_t local;
	int fd = host_open(f, 52, &local);
	host_send_str(fd, "last words");
	drop(f, fd);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RW, local, 52);
	assert_int_equal(p.h.len, 10);
	assert_memory_equal(p.data, "last words", 10);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_SHUTDOWN, local, 52);
	assert_int_equal(p.h.flags, VIRTIO_VSOCK_SHUTDOWN_SEND);
	struct virtio_vsock_hdr h = ghdr(VIRTIO_VSOCK_OP_SHUTDOWN, 52, local);
	h.flags = VIRTIO_VSOCK_SHUTDOWN_SEND;
	tx(f, &h, NULL, 0);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, local, 52);
	assert_int_equal(conns_in_use(f), 0);
}

/* The host shuts only its sending side: the guest hears SHUTDOWN(SEND) but
 * may still send, and the stream ends once the guest stops sending too. */
static void host_half_close(void **state)
{
	struct vfx *f = *state;
	int lfd;
	int hfd = live_conn(f, &lfd);
	host_send_str(hfd, "question");
	assert_int_equal(shutdown(hfd, SHUT_WR), 0);
	struct pkt p;
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RW, HPORT, GPORT);
	assert_int_equal(p.h.len, 8);
	assert_memory_equal(p.data, "question", 8);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_SHUTDOWN, HPORT, GPORT);
	assert_int_equal(p.h.flags, VIRTIO_VSOCK_SHUTDOWN_SEND);
	rx_none(f);
	tx_rw(f, GPORT, HPORT, "answer", 6);
	char got[6];
	host_read_exact(f, hfd, got, 6);
	assert_memory_equal(got, "answer", 6);
	host_expect_open(hfd);
	struct virtio_vsock_hdr h = ghdr(VIRTIO_VSOCK_OP_SHUTDOWN, GPORT, HPORT);
	h.flags = VIRTIO_VSOCK_SHUTDOWN_SEND;
	tx(f, &h, NULL, 0);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT, GPORT);
	host_expect_eof(f, hfd);
	assert_int_equal(conns_in_use(f), 0);

	/* the other order: the guest stops sending first, then the host */
	hfd = guest_connect(f, lfd, GPORT, HPORT, VSOCK_BUF_ALLOC);
	tx(f, &h, NULL, 0);
	host_expect_eof(f, hfd);
	rx_none(f);
	host_send_str(hfd, "tail");
	assert_int_equal(shutdown(hfd, SHUT_WR), 0);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RW, HPORT, GPORT);
	assert_memory_equal(p.data, "tail", 4);
	rx_expect(f, &p, VIRTIO_VSOCK_OP_RST, HPORT, GPORT);
	assert_int_equal(conns_in_use(f), 0);
}

static void driver_reset_closes_all(void **state)
{
	struct vfx *f = *state;
	int lfd;
	int g = live_conn(f, &lfd);
	uint32_t local;
	int h = host_open(f, 52, &local);
	int pending = host_connect(f);   /* mid-handshake */
	run_idle(f);
	assert_int_equal(conns_in_use(f), 3);

	fv_write(&f->vs.t, VIRTIO_MMIO_STATUS, 0);
	assert_int_equal(conns_in_use(f), 0);
	host_expect_eof(f, g);
	host_expect_eof(f, h);
	host_expect_eof(f, pending);

	/* a new driver starts afresh */
	bring_up(f);
	rx_none(f);
	int g2 = guest_connect(f, lfd, GPORT, HPORT, VSOCK_BUF_ALLOC);
	tx_rw(f, GPORT, HPORT, "again", 5);
	char got[5];
	host_read_exact(f, g2, got, 5);
	assert_memory_equal(got, "again", 5);
}

/* ---- init and release ---------------------------------------------------------- */

static void release_unlinks(void **state)
{
	struct vfx *f = *state;
	int lfd;
	int hfd = live_conn(f, &lfd);
	struct stat st;
	assert_int_equal(stat(f->uds, &st), 0);
	virtio_vsock_release(&f->vs);
	f->released = true;
	assert_int_equal(stat(f->uds, &st), -1);
	assert_int_equal(errno, ENOENT);
	host_expect_eof(f, hfd);
	/* the host's own listening socket is not the device's to remove */
	char p[108];
	port_path(f, HPORT, p, sizeof(p));
	assert_int_equal(stat(p, &st), 0);
}

static void init_refused(void **state)
{
	struct vfx *f = *state;
	static struct virtio_vsock v;

	/* the device's own path, in use */
	assert_int_equal(virtio_vsock_init(&v, f->uds, &f->evl, &f->gm, 0xd0001000, 6), -1);
	virtio_vsock_release(&v);
	struct stat st;
	assert_int_equal(stat(f->uds, &st), 0);   /* not removed by the failure */

	/* a regular file there */
	char p[128];
	snprintf(p, sizeof(p), "%s/file", f->dir);
	int fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "keep", 4), 4);
	close(fd);
	assert_int_equal(virtio_vsock_init(&v, p, &f->evl, &f->gm, 0xd0001000, 6), -1);
	virtio_vsock_release(&v);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, 4);

	/* empty */
	assert_int_equal(virtio_vsock_init(&v, "", &f->evl, &f->gm, 0xd0001000, 6), -1);

	/* the longest path leaves room for "_4294967295" in sun_path */
	char lp[128];
	size_t dl = strlen(f->dir);
	memcpy(lp, f->dir, dl);
	lp[dl] = '/';
	memset(lp + dl + 1, 'L', 96 - dl - 1);
	lp[97] = '\0';   /* 97 bytes */
	lp[96] = 'L';
	assert_int_equal(strlen(lp), 97);
	assert_int_equal(virtio_vsock_init(&v, lp, &f->evl, &f->gm, 0xd0001000, 6), -1);
	assert_int_equal(stat(lp, &st), -1);
	lp[96] = '\0';   /* 96 bytes: fine */
	assert_int_equal(virtio_vsock_init(&v, lp, &f->evl, &f->gm, 0xd0001000, 6), 0);
	assert_int_equal(stat(lp, &st), 0);
	virtio_vsock_release(&v);
	assert_int_equal(stat(lp, &st), -1);
}

/* virtio_vsock.h: release is "safe after a failed init". A path refused
 * before the transport was set up leaves it zeroed; releasing it must not
 * close fd 0 (stdin), which zeroed eventfd fields name. */
static void release_after_failed_init(void **state)
{
	struct vfx *f = *state;
	int saved = dup(0);
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(null >= 0);
	assert_int_equal(dup2(null, 0), 0);
	close(null);
	static struct virtio_vsock v;
	int rc = virtio_vsock_init(&v, "", &f->evl, &f->gm, 0xd0001000, 6);
	virtio_vsock_release(&v);
	int still_open = fcntl(0, F_GETFD) != -1;
	if (saved >= 0) {
		dup2(saved, 0);
		close(saved);
	}
	assert_int_equal(rc, -1);
	assert_true(still_open);
}

/* ---- the event loop's batches ------------------------------------------------------ */

/* As vmm/virtio_devices.c wires queue notifications into the event loop. */
struct kick {
	struct evl_handler h;
	struct virtio_mmio *t;
	unsigned q;
};

static void kick_event(void *ctx, uint32_t events)
{
	struct kick *k = ctx;
	eventfd_t n;
	(void)events;
	if (eventfd_read(k->h.fd, &n) == 0)
		virtio_mmio_kick(k->t, k->q);
}

/* Run in a child, without cmocka (whose failures would jump into the
 * parent's test runner): returns 0, or the line of the failed check. */
#define CHILD_CHECK(x)                  \
	do {                            \
		if (!(x))               \
			return __LINE__; \
	} while (0)

static int batch_child(const char *dir)
{
	signal(SIGSEGV, SIG_DFL);
	signal(SIGBUS, SIG_DFL);
	signal(SIGILL, SIG_DFL);
	static struct virtio_vsock vs;
	struct event_loop evl;
	struct guest_mem gm;
	struct fv_queue q[3];
	char uds[64];
	snprintf(uds, sizeof(uds), "%s/v.sock", dir);
	CHILD_CHECK(evl_init(&evl) == 0);
	CHILD_CHECK(fv_mem_init(&gm) == 0);
	CHILD_CHECK(virtio_vsock_init(&vs, uds, &evl, &gm, 0xd0000000, 5) == 0);
	CHILD_CHECK(fv_bring_up(&vs.t, 3, VSOCK_QUEUE_SIZE, q) & VIRTIO_CONFIG_S_DRIVER_OK);
	for (uint16_t i = 0; i < 4; i++) {
		fv_desc(&gm, &q[0], i, RX_GPA(i), RX_LEN, VRING_DESC_F_WRITE, 0);
		fv_avail(&gm, &q[0], i);
	}
	struct kick k[3];
	for (unsigned i = 0; i < 3; i++) {
		k[i] = (struct kick){ .h = { .fn = kick_event, .ctx = &k[i], .fd = vs.t.kick_fd[i] }, .t = &vs.t, .q = i };
		CHILD_CHECK(evl_add(&evl, &k[i].h, EPOLLIN) == 0);
	}
	fv_write(&vs.t, VIRTIO_MMIO_QUEUE_NOTIFY, 0);

	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s_%u", uds, HPORT);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	CHILD_CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(lfd, 4) == 0);

	/* the guest connects: a REQUEST on TX, notified as a guest does */
	struct virtio_vsock_hdr h = ghdr(VIRTIO_VSOCK_OP_REQUEST, GPORT, HPORT);
	memcpy(fv_ptr(&gm, TX_GPA, HDR), &h, HDR);
	fv_desc(&gm, &q[1], 0, TX_GPA, HDR, 0, 0);
	fv_avail(&gm, &q[1], 0);
	fv_write(&vs.t, VIRTIO_MMIO_QUEUE_NOTIFY, 1);
	for (int i = 0; i < 100 && evl_run_once(&evl, 0) > 0; i++)
		;
	int hfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	CHILD_CHECK(hfd >= 0);
	for (int i = 0; i < 100 && evl_run_once(&evl, 0) > 0; i++)
		;

	/* In one wakeup: the guest resets the stream (its queue notification
	 * first), and the host sends on it. */
	h = ghdr(VIRTIO_VSOCK_OP_RST, GPORT, HPORT);
	memcpy(fv_ptr(&gm, TX_GPA, HDR), &h, HDR);
	fv_desc(&gm, &q[1], 1, TX_GPA, HDR, 0, 0);
	fv_avail(&gm, &q[1], 1);
	fv_write(&vs.t, VIRTIO_MMIO_QUEUE_NOTIFY, 1);
	CHILD_CHECK(send(hfd, "x", 1, MSG_NOSIGNAL) == 1);
	/* Two events are ready; when the notification runs first, the freed
	 * connection's event is dropped from the batch and one handler runs. */
	int ran = evl_run_once(&evl, 100);
	CHILD_CHECK(ran == 1 || ran == 2);
	for (int i = 0; i < 100 && evl_run_once(&evl, 0) > 0; i++)
		;

	for (unsigned i = 0; i < 3; i++)
		evl_del(&evl, &k[i].h);
	virtio_vsock_release(&vs);
	close(hfd);
	close(lfd);
	evl_release(&evl);
	guest_mem_release(&gm);
	return 0;
}

/* A queue notification that frees a connection must not leave an event for
 * that connection, already taken from epoll in the same wakeup, to run on
 * the freed slot. */
static void freed_conn_event_in_same_batch(void **state)
{
	(void)state;
	char dir[32];
	snprintf(dir, sizeof(dir), "/tmp/vvskXXXXXX");
	assert_non_null(mkdtemp(dir));
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(batch_child(dir));
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	rm_tree(dir);
	if (WIFSIGNALED(st))
		fail_msg("the event loop died of signal %d (%s) running a freed connection's event", WTERMSIG(st),
			 strsignal(WTERMSIG(st)));
	if (WEXITSTATUS(st))
		fail_msg("child check failed at line %d", WEXITSTATUS(st));
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);   /* as the VMM does: a closed host socket is an error return */
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(config_space),
		T(guest_connect_and_data),
		T(guest_credit_limits_host_data),
		T(guest_connect_no_listener),
		T(host_connect_flow),
		T(host_connect_data_in_same_write),
		T(host_early_data_without_host_read),
		T(host_connect_guest_refuses),
		T(host_bad_handshakes),
		T(host_handshake_abandoned),
		T(rw_unknown_connection),
		T(rw_over_credit),
		T(malformed_dropped),
		T(unknown_op_resets),
		T(seqpacket_refused),
		T(seqpacket_on_live_stream),
		T(second_request_resets),
		T(connection_cap),
		T(rx_buffer_too_small),
		T(guest_shutdown),
		T(host_close),
		T(host_half_close),
		T(driver_reset_closes_all),
		T(release_unlinks),
		T(init_refused),
		T(release_after_failed_init),
		cmocka_unit_test(freed_conn_event_in_same_batch),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
