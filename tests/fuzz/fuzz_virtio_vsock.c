/* libFuzzer harness for virtio-vsock (vmm/virtio_vsock.c): the guest's
 * packets and the host's sockets, interleaved.
 *
 * Set up once: a temporary directory, an event loop, the fake guest of
 * tests/common/fake_virtio.h, the device listening on "<dir>/v.sock", and a
 * host service listening (non-blocking) on "<dir>/v.sock_5000" so that guest
 * REQUESTs to port 5000 connect; nothing listens on port 1234. Each input
 * brings the device up (queue size 256, or 16 to wrap the rings often) and
 * is a sequence of operations, each chosen by one byte:
 *   guest: post RX buffers (of many sizes, some too small, some split, some
 *   with a readable part); queue a TX packet whose 44-byte header comes from
 *   the input (any operation, ports mostly 5000 / 1234 / the host's local
 *   ports so that connections exist, CIDs mostly right, a length field that
 *   sometimes lies, the header and payload cut over several descriptors);
 *   send on one of the device's connections as a well-behaved guest would
 *   (mostly data, up to VSOCK_MAX_PKT a packet); answer the device's last
 *   REQUEST; kick a queue (directly, or by a QUEUE_NOTIFY write that the
 *   event loop delivers, as in the VMM); break a ring; reset the device;
 *   host: connect to v.sock and send a CONNECT line, garbage, half a line,
 *   an over-long line or nothing; accept from the port-5000 service; write
 *   to, read from, half-close or close any host socket;
 *   and evl_run_once(&evl, 0), which runs the device's socket handlers.
 * After every operation the used rings are reaped and checked. At the end
 * of the input every host socket is closed, the event loop drained and the
 * device reset, so inputs are independent and no fd survives one.
 *
 * Promises checked (abort() on violation), besides the sanitizers:
 *   - at most VSOCK_MAX_CONNS connections; each live one has an open fd
 *     that no other connection (nor the harness, listener or epoll set)
 *     uses; a free slot holds no buffer;
 *   - buf_len <= VSOCK_BUF_ALLOC, buf_head inside the buffer, a buffer
 *     exists when buf_len > 0, and rx_cnt - fwd_cnt == buf_len (what the
 *     guest sent is either written to the socket or buffered);
 *   - rst_len <= VSOCK_RST_BACKLOG; no two connections share (local, peer);
 *   - RX: the device only returns buffers it was given, never writes more
 *     than a buffer holds, and every packet it writes is well formed: host
 *     to guest CIDs, a stream, a known operation, buf_alloc as advertised,
 *     used length = 44 + len, 0 < len <= VSOCK_MAX_PKT for RW only,
 *     SHUTDOWN flags RCV and/or SEND, no flags on anything else;
 *   - RX data never exceeds the credit the guest gave (tx_cnt - fwd_cnt <=
 *     buf_alloc after the sends) and never follows the guest's SHUTDOWN of
 *     its receive side;
 *   - TX buffers come back with length 0; a broken TX ring puts the device
 *     in DEVICE_NEEDS_RESET;
 *   - after a device reset no connection, reset or fd remains (the process
 *     holds the same number of sockets, eventfds and epoll sets after
 *     every input). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sanitizer/common_interface_defs.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "event_loop.h"
#include "fake_virtio.h"
#include "guest_mem.h"
#include "virtio_mmio.h"
#include "virtio_vsock.h"
#include "virtqueue.h"

#define HDR        44u
#define SERVICE    5000u    /* the host port with a listener */
#define NOBODY     1234u    /* a host port without one */
#define GUEST_PORT 1000u    /* guest ports used: 1000..1003 */
#define RX_BASE    FV_BUF_BASE                /* 4 KiB per RX descriptor */
#define SLOT       4096u
#define TX_BASE    (FV_BUF_BASE + 256ull * SLOT)
#define TX_END     (FV_MEM_SIZE - 0x10000)
#define MAX_HOST   96u      /* host-side sockets the harness holds: more than the device takes */
#define MAX_OPS    96u
#define MAX_SEGS   8u

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], uds[108], service_path[108];
static struct event_loop evl;
static struct guest_mem gm;
static struct virtio_vsock vs;
static int service_fd = -1;
static int host[MAX_HOST];
static unsigned nhost;
static uint8_t iobuf[256 * 1024];              /* what host sockets read into */
static uint8_t pattern[256 * 1024];            /* what the guest and host send */
static int baseline_fds = -1;

static void reap(void);

/* Queue notifications as the VMM delivers them: the guest's QUEUE_NOTIFY
 * write signals the queue's eventfd, the event loop runs the queue. */
static struct kick {
	struct evl_handler h;
	unsigned q;
} kicks[3];

static void kick_event(void *ctx, uint32_t events)
{
	struct kick *k = ctx;
	eventfd_t n;
	(void)events;
	if (eventfd_read(k->h.fd, &n) == 0) {
		if (k->q == VSOCK_TXQ)
			reap();   /* see kick() */
		virtio_mmio_kick(&vs.t, k->q);
	}
}

/* On the way out, even a crash's: leave no directory behind in /tmp. */
static void remove_dir(void)
{
	unlink(uds);
	unlink(service_path);
	rmdir(dir);
}

static void cleanup_dir(void)
{
	virtio_vsock_release(&vs);
	if (service_fd >= 0)
		close(service_fd);
	remove_dir();
}

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stdout, "fuzz_virtio_vsock: invariant violated: %s\n", what);
		fflush(stdout);
		remove_dir();
		abort();
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* Silence vmm_err without closing fd 2 (see fuzz_loader.c). */
	FILE *null = fopen("/dev/null", "w");
	if (null)
		stderr = null;
	signal(SIGPIPE, SIG_IGN);   /* as the VMM does */
	for (size_t i = 0; i < sizeof(pattern); i++)
		pattern[i] = (uint8_t)(i * 13 + 7 + (i >> 8));
	snprintf(dir, sizeof(dir), "/tmp/fuzz_vsock.XXXXXX");
	if (!mkdtemp(dir))
		abort();
	snprintf(uds, sizeof(uds), "%s/v.sock", dir);
	snprintf(service_path, sizeof(service_path), "%s_%u", uds, SERVICE);
	if (evl_init(&evl) || fv_mem_init(&gm) || virtio_vsock_init(&vs, uds, &evl, &gm, 0xd0000000ull, 5))
		abort();
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	strcpy(a.sun_path, service_path);
	service_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (service_fd < 0 || bind(service_fd, (struct sockaddr *)&a, sizeof(a)) || listen(service_fd, 256))
		abort();
	for (unsigned q = 0; q < 3; q++) {
		kicks[q] = (struct kick){ .h = { .fn = kick_event, .ctx = &kicks[q], .fd = vs.t.kick_fd[q] }, .q = q };
		if (evl_add(&evl, &kicks[q].h, EPOLLIN))
			abort();
	}
	atexit(cleanup_dir);
	__sanitizer_set_death_callback(remove_dir);
	return 0;
}

/* ---- input reader: zeros once the input runs out ------------------------- */

struct rd {
	const uint8_t *p;
	size_t n;
};

static uint8_t rd8(struct rd *r)
{
	if (!r->n)
		return 0;
	r->n--;
	return *r->p++;
}

static uint16_t rd16(struct rd *r)
{
	uint16_t v = rd8(r);
	return (uint16_t)(v | rd8(r) << 8);
}

static uint32_t rd32(struct rd *r)
{
	uint32_t v = rd16(r);
	return v | (uint32_t)rd16(r) << 16;
}

static uint64_t rd64(struct rd *r)
{
	uint64_t v = rd32(r);
	return v | (uint64_t)rd32(r) << 32;
}

/* ---- the guest's queues -------------------------------------------------- */

struct gq {
	struct fv_queue fq;
	uint16_t free[VQ_MAX_SIZE];
	unsigned nfree;
	uint8_t nseg[VQ_MAX_SIZE];                 /* per head: its descriptors */
	uint16_t segs[VQ_MAX_SIZE][MAX_SEGS];
	bool busy[VQ_MAX_SIZE];                     /* head given to the device */
	unsigned outstanding;
	bool broken;                                /* the harness broke this ring */
};

static struct gq gq[3];
static uint16_t qsize;
static uint64_t tx_bump;

/* Per (host port, guest port): RW bytes the guest received, for honest
 * fwd_cnt values. */
static struct pair {
	uint32_t local, peer, rx;
} pairs[32];
static unsigned npairs;
static bool have_req;
static uint32_t req_local, req_peer;        /* the device's last REQUEST */

static struct pair *pair_get(uint32_t local, uint32_t peer)
{
	for (unsigned i = 0; i < npairs; i++)
		if (pairs[i].local == local && pairs[i].peer == peer)
			return &pairs[i];
	if (npairs == sizeof(pairs) / sizeof(pairs[0]))
		return NULL;
	pairs[npairs] = (struct pair){ local, peer, 0 };
	return &pairs[npairs++];
}

static void gq_init(unsigned qi)
{
	struct gq *g = &gq[qi];
	struct fv_queue keep = g->fq;
	memset(g, 0, sizeof(*g));
	g->fq = keep;
	for (unsigned i = 0; i < qsize; i++)
		g->free[i] = (uint16_t)(qsize - 1 - i);
	g->nfree = qsize;
}

static void bring_up(void)
{
	memset(gm.base + FV_RING_BASE, 0, 3 * FV_RING_STRIDE);
	struct fv_queue fqs[3];
	uint32_t st = fv_bring_up(&vs.t, 3, qsize, fqs);
	check(st == (VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK |
		     VIRTIO_CONFIG_S_DRIVER_OK),
	      "the device comes up");
	for (unsigned q = 0; q < 3; q++) {
		gq[q].fq = fqs[q];
		gq_init(q);
	}
	tx_bump = TX_BASE;
}

/* Descriptors for a chain of n segments, or false when too few are free. */
static bool take(struct gq *g, unsigned n, uint16_t *idx)
{
	if (g->broken || g->nfree < n)
		return false;
	for (unsigned i = 0; i < n; i++)
		idx[i] = g->free[--g->nfree];
	return true;
}

static void publish(struct gq *g, const uint16_t *idx, unsigned n, const uint64_t *gpa, const uint32_t *len,
		    const uint16_t *flags)
{
	for (unsigned i = 0; i < n; i++)
		fv_desc(&gm, &g->fq, idx[i], gpa[i], len[i],
			(uint16_t)(flags[i] | (i + 1 < n ? VRING_DESC_F_NEXT : 0)), i + 1 < n ? idx[i + 1] : 0);
	uint16_t head = idx[0];
	g->nseg[head] = (uint8_t)n;
	memcpy(g->segs[head], idx, n * sizeof(*idx));
	g->busy[head] = true;
	g->outstanding++;
	fv_avail(&gm, &g->fq, head);
}

static void give_back(struct gq *g, uint16_t head)
{
	for (unsigned i = 0; i < g->nseg[head]; i++)
		g->free[g->nfree++] = g->segs[head][i];
	g->busy[head] = false;
	g->outstanding--;
}

/* Bytes of the chain at head from offset off, as the device wrote them. */
static void chain_read(struct gq *g, uint16_t head, uint64_t off, void *dst, uint64_t len)
{
	uint8_t *out = dst;
	for (unsigned i = 0; i < g->nseg[head] && len; i++) {
		struct vring_desc d;
		memcpy(&d, gm.base + g->fq.desc + 16ull * g->segs[head][i], 16);
		if (!(d.flags & VRING_DESC_F_WRITE))
			continue;
		if (off >= d.len) {
			off -= d.len;
			continue;
		}
		uint64_t k = d.len - off < len ? d.len - off : len;
		memcpy(out, gm.base + d.addr + off, k);
		out += k;
		len -= k;
		off = 0;
	}
}

static uint64_t chain_in_len(struct gq *g, uint16_t head)
{
	uint64_t n = 0;
	for (unsigned i = 0; i < g->nseg[head]; i++) {
		struct vring_desc d;
		memcpy(&d, gm.base + g->fq.desc + 16ull * g->segs[head][i], 16);
		if (d.flags & VRING_DESC_F_WRITE)
			n += d.len;
	}
	return n;
}

static struct vsock_conn *find_conn(uint32_t local, uint32_t peer)
{
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++) {
		struct vsock_conn *c = &vs.conns[i];
		if (c->state == VSOCK_ESTABLISHED && c->local_port == local && c->peer_port == peer)
			return c;
	}
	return NULL;
}

/* Check one packet the device wrote into an RX buffer. */
static void check_rx_packet(uint16_t head, uint32_t len)
{
	struct gq *g = &gq[VSOCK_RXQ];
	check(len <= chain_in_len(g, head), "RX: never more than the buffer holds");
	if (len == 0)
		return;   /* a buffer too small, handed back */
	check(len >= HDR, "RX: a packet has a whole header");
	struct virtio_vsock_hdr h;
	chain_read(g, head, 0, &h, HDR);
	check(h.src_cid == VSOCK_HOST_CID && h.dst_cid == VSOCK_GUEST_CID, "RX: host-to-guest CIDs");
	check(h.type == VIRTIO_VSOCK_TYPE_STREAM, "RX: a stream packet");
	check(h.buf_alloc == VSOCK_BUF_ALLOC, "RX: buf_alloc as advertised");
	switch (h.op) {
	case VIRTIO_VSOCK_OP_RW: {
		check(h.len > 0 && h.len <= VSOCK_MAX_PKT && len == HDR + h.len, "RX: RW length");
		check(h.flags == 0, "RX: RW flags");
		struct pair *p = pair_get(h.src_port, h.dst_port);
		if (p)
			p->rx += h.len;
		struct vsock_conn *c = find_conn(h.src_port, h.dst_port);
		if (c) {
			check((uint32_t)(c->tx_cnt - c->peer_fwd_cnt) <= c->peer_buf_alloc,
			      "RX: data within the guest's credit");
			/* RX is reaped before every TX kick, so a shutdown seen
			 * now came before these data. */
			check(!c->guest_shut_rcv, "RX: no data after the guest shut its receive side");
		}
		return;
	}
	case VIRTIO_VSOCK_OP_SHUTDOWN:
		check(h.flags && !(h.flags & ~(uint32_t)(VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND)),
		      "RX: SHUTDOWN flags: RCV and/or SEND");
		break;
	case VIRTIO_VSOCK_OP_REQUEST: {
		check(h.src_port >= VSOCK_HOST_PORT_BASE, "RX: host-initiated streams use the host port range");
		have_req = true;
		req_local = h.src_port;
		req_peer = h.dst_port;
		struct pair *p = pair_get(h.src_port, h.dst_port);
		if (p)
			p->rx = 0;
		check(h.flags == 0, "RX: control packet flags");
		break;
	}
	case VIRTIO_VSOCK_OP_RESPONSE:
	case VIRTIO_VSOCK_OP_RST:
	case VIRTIO_VSOCK_OP_CREDIT_UPDATE:
		check(h.flags == 0, "RX: control packet flags");
		break;
	default:
		check(0, "RX: a known operation");
	}
	check(h.len == 0 && len == HDR, "RX: control packets carry no payload");
}

static void reap(void)
{
	uint32_t id, len;
	struct gq *rx = &gq[VSOCK_RXQ], *tx = &gq[VSOCK_TXQ];
	if (!rx->broken)
		while (fv_used(&gm, &rx->fq, &id, &len)) {
			check(id < qsize && rx->busy[id], "RX: only buffers given are returned");
			check_rx_packet((uint16_t)id, len);
			give_back(rx, (uint16_t)id);
		}
	if (!tx->broken)
		while (fv_used(&gm, &tx->fq, &id, &len)) {
			check(id < qsize && tx->busy[id], "TX: only buffers given are returned");
			check(len == 0, "TX: buffers come back with length 0");
			give_back(tx, (uint16_t)id);
		}
	uint32_t d;
	check(!fv_used(&gm, &gq[VSOCK_EVQ].fq, &d, &len), "the event queue is never used");
}

/* ---- guest operations ---------------------------------------------------- */

static void post_rx(struct rd *r)
{
	struct gq *g = &gq[VSOCK_RXQ];
	unsigned count = 1 + rd8(r) % 4;
	for (unsigned k = 0; k < count; k++) {
		uint8_t v = rd8(r);
		uint32_t len[3];
		uint16_t flags[3] = { VRING_DESC_F_WRITE, VRING_DESC_F_WRITE, VRING_DESC_F_WRITE };
		unsigned n = 1;
		switch (v & 7) {
		case 0: len[0] = SLOT; break;
		case 1: len[0] = HDR; break;                 /* no room for data */
		case 2: len[0] = rd8(r) % HDR; break;        /* too small */
		case 3: n = 2; len[0] = 20; len[1] = SLOT - 20; break;
		case 4: n = 3; len[0] = HDR; len[1] = 1000; len[2] = SLOT - HDR - 1000; break;
		case 5: n = 2; len[0] = 64; flags[0] = 0; len[1] = SLOT; break;   /* a readable part */
		case 6: len[0] = rd16(r) % (SLOT + 1); break;
		default: n = 2; len[0] = 0; len[1] = HDR + 1 + rd8(r); break;
		}
		uint16_t idx[3];
		uint64_t gpa[3];
		if (!take(g, n, idx))
			return;
		for (unsigned i = 0; i < n; i++) {
			gpa[i] = RX_BASE + (uint64_t)idx[i] * SLOT;
			memset(gm.base + gpa[i], 0xcc, len[i]);
		}
		publish(g, idx, n, gpa, len, flags);
	}
}

static uint32_t pick_dst_port(struct rd *r, unsigned sel)
{
	switch (sel & 3) {
	case 0: return SERVICE;
	case 1: return NOBODY;
	case 2: return VSOCK_HOST_PORT_BASE + (rd8(r) & 3);
	default: return rd32(r);
	}
}

static void kick(unsigned q)
{
	/* Check what RX holds before TX packets change the connections: the
	 * RX checks compare with the state the packets were sent in. */
	if (q == VSOCK_TXQ)
		reap();
	bool live = virtio_mmio_live(&vs.t);
	virtio_mmio_kick(&vs.t, q);
	if (q == VSOCK_TXQ && live && gq[q].broken)
		check(fv_read(&vs.t, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET,
		      "a broken TX ring puts the device in NEEDS_RESET");
}

/* Queue one TX packet: header h, payload plen bytes, cut as layout says. */
static void send_tx(struct rd *r, const struct virtio_vsock_hdr *h, uint32_t plen, unsigned layout,
		    bool writable_tail)
{
	struct gq *g = &gq[VSOCK_TXQ];
	uint64_t total = HDR + (uint64_t)plen;
	if (g->broken)
		return;
	if (total + 64 > TX_END - tx_bump) {
		/* Out of room: let the device finish what it has. */
		if (g->outstanding && virtio_mmio_live(&vs.t)) {
			kick(VSOCK_TXQ);
			reap();
		}
		if (g->outstanding)
			return;
		tx_bump = TX_BASE;
	}
	uint64_t base = tx_bump;
	tx_bump += (total + 64 + 15) & ~15ull;
	memcpy(gm.base + base, h, HDR);
	memcpy(gm.base + base + HDR, pattern, plen);

	uint64_t gpa[MAX_SEGS];
	uint32_t len[MAX_SEGS];
	uint16_t flags[MAX_SEGS] = { 0 };
	unsigned n = 0;
	switch (layout & 3) {
	case 0:
		gpa[n] = base, len[n++] = (uint32_t)total;
		break;
	case 1:
		gpa[n] = base, len[n++] = HDR;
		if (plen)
			gpa[n] = base + HDR, len[n++] = plen;
		break;
	case 2: {
		uint32_t cut = 1 + rd8(r) % (HDR - 1);
		gpa[n] = base, len[n++] = cut;
		gpa[n] = base + cut, len[n++] = HDR - cut;
		unsigned parts = 1 + rd8(r) % 4;
		uint32_t each = plen / parts, done = 0;
		for (unsigned i = 0; i < parts && done < plen; i++) {
			uint32_t k = i + 1 == parts ? plen - done : each;
			if (k)
				gpa[n] = base + HDR + done, len[n++] = k;
			done += k;
		}
		break;
	}
	default:
		gpa[n] = base, len[n++] = rd8(r) % HDR;   /* a cut-off header */
		break;
	}
	if (writable_tail) {
		gpa[n] = base + total, len[n] = 64;
		flags[n++] = VRING_DESC_F_WRITE;
	}
	uint16_t idx[MAX_SEGS];
	if (!take(g, n, idx))
		return;
	publish(g, idx, n, gpa, len, flags);
}

static void guest_tx(struct rd *r)
{
	uint8_t a = rd8(r), b = rd8(r), c = rd8(r), e = rd8(r);
	struct virtio_vsock_hdr h = {
		.src_cid = VSOCK_GUEST_CID,
		.dst_cid = VSOCK_HOST_CID,
		.type = VIRTIO_VSOCK_TYPE_STREAM,
	};
	static const uint16_t ops[7] = {
		VIRTIO_VSOCK_OP_REQUEST, VIRTIO_VSOCK_OP_RESPONSE, VIRTIO_VSOCK_OP_RST,
		VIRTIO_VSOCK_OP_SHUTDOWN, VIRTIO_VSOCK_OP_RW, VIRTIO_VSOCK_OP_CREDIT_UPDATE,
		VIRTIO_VSOCK_OP_CREDIT_REQUEST,
	};
	h.op = (a & 7) < 7 ? ops[a & 7] : rd16(r);
	h.dst_port = pick_dst_port(r, a >> 3);
	h.src_port = (a & 0x20) ? rd32(r) : GUEST_PORT + (a >> 6);   /* 1000..1003 */
	switch (b & 3) {
	case 0: break;
	case 1: h.src_cid = rd64(r); break;
	case 2: h.dst_cid = rd64(r); break;
	default: h.type = rd16(r); break;
	}
	uint32_t plen;
	switch ((b >> 2) & 3) {
	case 0: plen = 0; break;
	case 1: plen = rd8(r); break;
	case 2: plen = SLOT * (1 + rd8(r) % 16); break;   /* up to VSOCK_MAX_PKT */
	default: plen = VSOCK_MAX_PKT + (rd8(r) & 1); break;
	}
	if (h.op != VIRTIO_VSOCK_OP_RW && !(e & 0x08))
		plen = 0;   /* control packets mostly carry nothing */
	switch ((b >> 4) & 3) {
	case 0: case 1: h.len = plen; break;
	case 2: h.len = plen + 1 + rd8(r); break;   /* more than was sent */
	default: h.len = rd32(r); break;
	}
	struct pair *p = pair_get(h.dst_port, h.src_port);
	switch (c & 3) {
	case 0: h.buf_alloc = VSOCK_BUF_ALLOC; break;
	case 1: h.buf_alloc = rd32(r); break;
	case 2: h.buf_alloc = 0; break;
	default: h.buf_alloc = rd16(r); break;
	}
	switch ((c >> 2) & 3) {
	case 0: case 1: h.fwd_cnt = p ? p->rx : 0; break;   /* honest */
	case 2: h.fwd_cnt = 0; break;
	default: h.fwd_cnt = rd32(r); break;
	}
	if (h.op == VIRTIO_VSOCK_OP_SHUTDOWN)
		h.flags = (c >> 4) & 3;
	if (c & 0x40)
		h.flags = rd32(r);
	if (h.op == VIRTIO_VSOCK_OP_REQUEST && p)
		p->rx = 0;
	send_tx(r, &h, plen, e & 3, e & 0x04);
	if (e & 0x10)
		kick(VSOCK_TXQ);
}

/* A packet on one of the device's connections, as a guest that keeps
 * track of its connections would send: right ports and CIDs, honest
 * lengths and credit. Mostly data, so that it reaches the host socket and,
 * when that is full, the connection's buffer. */
static void guest_on_conn(struct rd *r)
{
	uint8_t a = rd8(r), b = rd8(r);
	const struct vsock_conn *live[VSOCK_MAX_CONNS];
	unsigned n = 0;
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++)
		if (vs.conns[i].state >= VSOCK_CONNECTING)
			live[n++] = &vs.conns[i];
	if (!n)
		return;
	const struct vsock_conn *c = live[b % n];
	static const uint16_t ops[8] = {
		VIRTIO_VSOCK_OP_RW, VIRTIO_VSOCK_OP_RW, VIRTIO_VSOCK_OP_RW, VIRTIO_VSOCK_OP_SHUTDOWN,
		VIRTIO_VSOCK_OP_CREDIT_UPDATE, VIRTIO_VSOCK_OP_CREDIT_REQUEST, VIRTIO_VSOCK_OP_RST,
		VIRTIO_VSOCK_OP_RESPONSE,
	};
	struct pair *p = pair_get(c->local_port, c->peer_port);
	struct virtio_vsock_hdr h = {
		.src_cid = VSOCK_GUEST_CID, .dst_cid = VSOCK_HOST_CID, .src_port = c->peer_port,
		.dst_port = c->local_port, .type = VIRTIO_VSOCK_TYPE_STREAM, .op = ops[a & 7],
		.buf_alloc = VSOCK_BUF_ALLOC, .fwd_cnt = p ? p->rx : 0,
	};
	uint32_t plen = 0;
	if (h.op == VIRTIO_VSOCK_OP_RW) {
		static const uint32_t sizes[4] = { 0, SLOT, 16 * 1024, VSOCK_MAX_PKT };
		plen = (a >> 3) & 3 ? sizes[(a >> 3) & 3] : 1u + rd8(r);
		h.len = plen;
	} else if (h.op == VIRTIO_VSOCK_OP_SHUTDOWN) {
		h.flags = 1 + ((a >> 3) % 3);
	}
	/* A burst fills the host socket and then the connection's buffer. */
	unsigned times = (a & 0x80) && h.op == VIRTIO_VSOCK_OP_RW ? 2 + rd8(r) % 7 : 1;
	for (unsigned i = 0; i < times; i++)
		send_tx(r, &h, plen, (a >> 5) & 1, false);
	if (a & 0x40)
		kick(VSOCK_TXQ);
}

/* Accept the device's last REQUEST, as a guest listening there would. */
static void guest_answer(void)
{
	if (!have_req)
		return;
	struct pair *p = pair_get(req_local, req_peer);
	struct virtio_vsock_hdr h = {
		.src_cid = VSOCK_GUEST_CID, .dst_cid = VSOCK_HOST_CID, .src_port = req_peer,
		.dst_port = req_local, .type = VIRTIO_VSOCK_TYPE_STREAM, .op = VIRTIO_VSOCK_OP_RESPONSE,
		.buf_alloc = VSOCK_BUF_ALLOC, .fwd_cnt = p ? p->rx : 0,
	};
	have_req = false;
	send_tx(NULL, &h, 0, 0, false);
	kick(VSOCK_TXQ);
}

static void guest_break(struct rd *r)
{
	unsigned q = rd8(r) % 3;
	struct gq *g = &gq[q];
	if (g->broken)
		return;
	/* More than a ring's worth ahead of what the device has seen. */
	fv_avail_idx(&gm, &g->fq, (uint16_t)(g->fq.avail_idx + qsize + 1 + rd8(r) % 64));
	g->broken = true;
}

/* ---- host operations ----------------------------------------------------- */

static void host_add(int fd)
{
	if (nhost < MAX_HOST)
		host[nhost++] = fd;
	else
		close(fd);
}

static void host_close(unsigned i)
{
	close(host[i]);
	host[i] = host[--nhost];
}

static void host_connect_one(struct rd *r, uint8_t v)
{
	if (nhost >= MAX_HOST)
		return;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	check(fd >= 0, "socket");
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	strcpy(a.sun_path, uds);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);   /* the backlog is full */
		return;
	}
	char line[64];
	int n = 0;
	switch (v & 7) {
	case 0: case 1:
		n = snprintf(line, sizeof(line), "CONNECT %u\n", GUEST_PORT + (v >> 3) % 4);
		break;
	case 2:
		n = snprintf(line, sizeof(line), "CONNECT %u\n", rd32(r));
		break;
	case 3:   /* the line and the stream's first bytes together */
		n = snprintf(line, sizeof(line), "CONNECT %u\nhello", GUEST_PORT + (v >> 3) % 4);
		break;
	case 4:
		n = snprintf(line, sizeof(line), "CONNECT %u", GUEST_PORT);   /* no newline yet */
		break;
	case 5:
		n = rd8(r) % 48;
		for (int i = 0; i < n; i++)
			line[i] = (char)rd8(r);
		break;
	case 6:
		memset(line, 'C', 40);   /* longer than any CONNECT line */
		n = 40;
		break;
	default:
		break;                   /* nothing at all */
	}
	if (n > 0)
		(void)send(fd, line, (size_t)n, MSG_DONTWAIT);
	host_add(fd);
}

/* One client, or a crowd of them (past the device's connection cap). */
static void host_connect(struct rd *r)
{
	uint8_t v = rd8(r);
	unsigned times = (v & 0x80) ? 8 + rd8(r) % 64 : 1;
	for (unsigned i = 0; i < times; i++)
		host_connect_one(r, v);
}

static void host_accept(void)
{
	for (;;) {
		int fd = accept4(service_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		host_add(fd);
	}
}

static void host_write(struct rd *r)
{
	uint8_t v = rd8(r);
	if (!nhost)
		return;
	int fd = host[rd8(r) % nhost];
	size_t n;
	switch (v & 3) {
	case 0: n = 1 + rd8(r); break;
	case 1: n = SLOT; break;
	case 2: n = 64 * 1024; break;
	default: n = sizeof(iobuf); break;
	}
	(void)send(fd, pattern, n, MSG_DONTWAIT);
}

static void run_loop(unsigned times)
{
	for (unsigned i = 0; i < times; i++)
		if (evl_run_once(&evl, 0) <= 0)
			break;
}

/* Read what one host socket holds; or, as a host that keeps reading,
 * alternate reads with the event loop so that the device can flush what it
 * buffered for this socket. */
static void host_read(struct rd *r)
{
	uint8_t v = rd8(r);
	if (!nhost)
		return;
	int fd = host[v % nhost];
	unsigned rounds = (v & 0x80) ? 4 : 1;
	for (unsigned k = 0; k < rounds; k++) {
		for (int i = 0; i < 8; i++)
			if (recv(fd, iobuf, sizeof(iobuf), MSG_DONTWAIT) <= 0)
				break;
		if (rounds > 1)
			run_loop(2);
	}
}

/* ---- invariants ---------------------------------------------------------- */

static void check_state(void)
{
	unsigned live = 0;
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++) {
		const struct vsock_conn *c = &vs.conns[i];
		check(c->state <= VSOCK_ESTABLISHED, "connection state known");
		if (c->state == VSOCK_FREE) {
			check(!c->buf && c->buf_len == 0, "a free slot holds no buffer");
			continue;
		}
		live++;
		check(c->vs == &vs && c->h.ctx == c, "connection wired to its device");
		check(c->h.fd >= 0 && fcntl(c->h.fd, F_GETFD) != -1, "a connection's fd is open");
		check(c->h.fd != vs.listener.fd && c->h.fd != service_fd && c->h.fd != evl.epfd,
		      "a connection's fd is its own");
		for (unsigned k = 0; k < nhost; k++)
			check(c->h.fd != host[k], "a connection's fd is not the harness's");
		check(c->buf_len <= VSOCK_BUF_ALLOC, "buf_len <= VSOCK_BUF_ALLOC");
		check(c->buf_head < VSOCK_BUF_ALLOC, "buf_head inside the buffer");
		check(c->buf_len == 0 || c->buf, "buffered bytes have a buffer");
		check(c->rx_cnt - c->fwd_cnt == c->buf_len, "what the guest sent is forwarded or buffered");
		for (unsigned j = i + 1; j < VSOCK_MAX_CONNS; j++) {
			const struct vsock_conn *o = &vs.conns[j];
			if (o->state == VSOCK_FREE)
				continue;
			check(o->h.fd != c->h.fd, "no two connections share an fd");
			if (c->state >= VSOCK_CONNECTING && o->state >= VSOCK_CONNECTING)
				check(o->local_port != c->local_port || o->peer_port != c->peer_port,
				      "no two connections share (local, peer)");
		}
	}
	check(live <= VSOCK_MAX_CONNS, "at most VSOCK_MAX_CONNS connections");
	check(vs.rst_len <= VSOCK_RST_BACKLOG && vs.rst_head < VSOCK_RST_BACKLOG, "rst_len <= VSOCK_RST_BACKLOG");
}

/* Sockets and other anonymous files the process holds (pipes and plain
 * files are left out: the sanitizers' symbolizer keeps pipes open). */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char path[300], target[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t k = readlink(path, target, sizeof(target) - 1);
		if (k <= 0)
			continue;
		target[k] = '\0';
		if (!strncmp(target, "socket:", 7) || !strncmp(target, "anon_inode:", 11))
			n++;
	}
	closedir(d);
	return n;
}

/* Close every host socket, let the device see it, reset the device. */
static void end_input(void)
{
	while (nhost)
		host_close(nhost - 1);
	run_loop(16);
	bring_up();   /* to DRIVER_OK, so that the reset below reaches the device */
	fv_write(&vs.t, VIRTIO_MMIO_STATUS, 0);
	for (;;) {
		int fd = accept4(service_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			break;
		close(fd);
	}
	run_loop(16);
	check(evl_run_once(&evl, 0) == 0, "nothing left for the event loop");
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++)
		check(vs.conns[i].state == VSOCK_FREE, "a reset frees every connection");
	check(vs.rst_len == 0, "a reset drops pending resets");
	/* The device's own counters, which a reset keeps: start each input
	 * from the same ones so that it replays the same. */
	vs.next_local_port = VSOCK_HOST_PORT_BASE;
	vs.rr = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r = { data, size };
	uint8_t g = rd8(&r);
	qsize = (g & 1) ? 16 : VSOCK_QUEUE_SIZE;
	npairs = 0;
	have_req = false;
	bring_up();
	for (unsigned ops = 0; ops < MAX_OPS && r.n; ops++) {
		uint8_t op = rd8(&r);
		switch (op % 16) {
		case 0: case 1: post_rx(&r); break;
		case 2: case 3: guest_tx(&r); break;
		case 4: guest_on_conn(&r); break;
		case 5: guest_answer(); break;
		case 6:
			if (op & 0x40)   /* through the register and the event loop */
				fv_write(&vs.t, VIRTIO_MMIO_QUEUE_NOTIFY, (op >> 4) % 3);
			else
				kick((op >> 4) % 3);
			break;
		case 7: case 8: run_loop(1 + (op >> 4) % 3); break;
		case 9: host_connect(&r); break;
		case 10: host_accept(); break;
		case 11: host_write(&r); break;
		case 12: host_read(&r); break;
		case 13:
			if (nhost) {
				unsigned i = rd8(&r) % nhost;
				if (op & 0x10)
					shutdown(host[i], SHUT_WR);
				else
					host_close(i);
			}
			break;
		case 14:
			if (op & 0x10) {
				guest_break(&r);
			} else {
				bring_up();   /* a driver reset */
				have_req = false;
			}
			break;
		default: kick(VSOCK_TXQ); kick(VSOCK_RXQ); break;
		}
		reap();
		check_state();
	}
	end_input();

	/* fds: the sockets, eventfds and epoll sets the process held after
	 * the first input, it holds after every one (checked now and then: it
	 * costs a directory read). */
	static unsigned long inputs;
	if (inputs++ % 64 == 0) {
		int n = count_fds();
		if (baseline_fds < 0)
			baseline_fds = n;
		check(n <= baseline_fds, "no fd outlives an input");
	}
	return 0;
}
