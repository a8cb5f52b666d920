#include "virtio_vsock.h"

#include "proto.h"   /* the socket naming vmrun relies on */

#include <errno.h>
#include <linux/virtio_ids.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "args.h"
#include "device.h"
#include "log.h"
#include "snapshot.h"
#include "vm.h"

#define HDR_LEN sizeof(struct virtio_vsock_hdr)
_Static_assert(sizeof(struct virtio_vsock_hdr) == 44, "packet header of virtio 1.2, 5.10.6");
_Static_assert(VSOCK_QUEUE_SIZE <= VQ_MAX_SIZE, "queue fits the chain arrays");
_Static_assert(VSOCK_MAX_PKT <= VSOCK_BUF_ALLOC, "one packet fits a connection's buffer");

/* Control packets a connection owes the guest, sent in this order. */
enum {
	OWE_REQUEST = 1u << 0,
	OWE_RESPONSE = 1u << 1,
	OWE_SHUTDOWN = 1u << 2,
	OWE_CREDIT = 1u << 3,
};

#define CONN_EVENTS (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)

static void conn_event(void *ctx, uint32_t events);
static void rx_pump(struct virtio_vsock *vs);

/* ---- connections --------------------------------------------------------- */

static struct vsock_conn *conn_find(struct virtio_vsock *vs, uint32_t local, uint32_t peer)
{
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++) {
		struct vsock_conn *c = &vs->conns[i];
		if (c->state >= VSOCK_CONNECTING && c->local_port == local && c->peer_port == peer)
			return c;
	}
	return NULL;
}

/* Take a free slot for fd and watch it. Returns NULL (fd left open) when
 * every slot is used or epoll refuses it. */
static struct vsock_conn *conn_new(struct virtio_vsock *vs, int fd, enum vsock_conn_state state)
{
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++) {
		struct vsock_conn *c = &vs->conns[i];
		if (c->state != VSOCK_FREE)
			continue;
		*c = (struct vsock_conn){ .h = { .fn = conn_event, .ctx = c, .fd = fd }, .vs = vs, .state = state };
		if (evl_add(vs->evl, &c->h, CONN_EVENTS)) {
			c->state = VSOCK_FREE;
			return NULL;
		}
		return c;
	}
	return NULL;
}

static void conn_free(struct vsock_conn *c)
{
	if (c->state == VSOCK_FREE)
		return;
	evl_del(c->vs->evl, &c->h);
	close(c->h.fd);
	free(c->buf);
	/* The handler stays callable: the loop drops events taken before
	 * this evl_del, but a call it had already begun when a vCPU thread's
	 * reset got here still runs; conn_event then finds the slot free. */
	*c = (struct vsock_conn){ .vs = c->vs, .h = { .fn = conn_event, .ctx = c, .fd = -1 } };
}

/* Owe the guest a reset for (local, peer). Resets need no connection, so
 * they wait in their own bounded backlog. */
static void send_rst(struct virtio_vsock *vs, uint32_t local, uint32_t peer)
{
	if (vs->rst_len == VSOCK_RST_BACKLOG) {
		vs->stats.resets_dropped++;
		return;
	}
	unsigned i = (vs->rst_head + vs->rst_len++) % VSOCK_RST_BACKLOG;
	vs->rst[i].local = local;
	vs->rst[i].peer = peer;
}

/* End a connection: the guest gets a reset, the host socket is closed. */
static void conn_reset(struct vsock_conn *c)
{
	if (c->state >= VSOCK_CONNECTING)
		send_rst(c->vs, c->local_port, c->peer_port);
	conn_free(c);
}

/* Free space the guest believes we have, from what we last reported. */
static uint32_t guest_view_free(const struct vsock_conn *c)
{
	return VSOCK_BUF_ALLOC - (c->rx_cnt - c->fwd_reported);
}

static void maybe_owe_credit(struct vsock_conn *c)
{
	/* The guest sends while it has credit and stops at zero: tell it about
	 * freed space before its view runs low, but not after every byte. */
	if (c->fwd_cnt != c->fwd_reported && guest_view_free(c) < VSOCK_BUF_ALLOC / 2)
		c->pending |= OWE_CREDIT;
}

/* ---- guest -> host data -------------------------------------------------- */

/* Write as much of the ring buffer to the socket as it takes. Returns 0, or
 * -1 when the socket failed. */
static int flush_buf(struct vsock_conn *c)
{
	while (c->buf_len) {
		uint32_t first = VSOCK_BUF_ALLOC - c->buf_head;
		if (first > c->buf_len)
			first = c->buf_len;
		struct iovec iov[2] = { { c->buf + c->buf_head, first }, { c->buf, c->buf_len - first } };
		ssize_t k = writev(c->h.fd, iov, iov[1].iov_len ? 2 : 1);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
		}
		c->buf_head = (c->buf_head + (uint32_t)k) % VSOCK_BUF_ALLOC;
		c->buf_len -= (uint32_t)k;
		c->fwd_cnt += (uint32_t)k;
	}
	return 0;
}

/* After progress on the host side: finish a half-close or a close the guest
 * asked for once everything it sent has been delivered. */
static void after_flush(struct vsock_conn *c)
{
	if (c->buf_len)
		return;
	if (c->closing) {
		conn_reset(c);
		return;
	}
	if (c->guest_shut_send)
		shutdown(c->h.fd, SHUT_WR);
	maybe_owe_credit(c);
}

/* Deliver len payload bytes at offset in the chain's readable part. Writes
 * straight from guest memory while nothing is queued; the rest goes to the
 * buffer, which the guest's credit keeps from overflowing. */
static int deliver(struct vsock_conn *c, const struct vq_chain *ch, uint32_t len)
{
	size_t off = HDR_LEN, got;
	if (c->buf_len == 0) {
		struct iovec iov[VQ_MAX_SIZE];
		unsigned n = iov_slice(ch->out, ch->nout, HDR_LEN, len, iov, VQ_MAX_SIZE, &got);
		ssize_t k;
		do
			k = writev(c->h.fd, iov, (int)n);
		while (k < 0 && errno == EINTR);
		if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		if (k > 0) {
			c->fwd_cnt += (uint32_t)k;
			off += (size_t)k;
			len -= (uint32_t)k;
		}
	}
	if (len == 0)
		return 0;
	if (!c->buf && !(c->buf = malloc(VSOCK_BUF_ALLOC)))
		return -1;
	uint32_t tail = (c->buf_head + c->buf_len) % VSOCK_BUF_ALLOC;
	uint32_t first = VSOCK_BUF_ALLOC - tail < len ? VSOCK_BUF_ALLOC - tail : len;
	iov_read(ch->out, ch->nout, off, c->buf + tail, first);
	iov_read(ch->out, ch->nout, off + first, c->buf, len - first);
	c->buf_len += len;
	return 0;
}

/* ---- guest -> host packets ----------------------------------------------- */

/* Connect to "<uds>_<port>" for a guest REQUEST. Returns the socket or -1. */
static int connect_host_port(struct virtio_vsock *vs, uint32_t port)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int n = snprintf(a.sun_path, sizeof(a.sun_path), PROTO_VSOCK_UDS_PORT_FMT, vs->uds, port);
	if (n < 0 || (size_t)n >= sizeof(a.sun_path))
		return -1;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void guest_request(struct virtio_vsock *vs, const struct virtio_vsock_hdr *h)
{
	if (vs->ready_port && h->dst_port == vs->ready_port && vs->on_ready) {
		vs->ready_peer = h->src_port;
		vs->on_ready(vs->ready_ctx);
		return;
	}
	int fd = connect_host_port(vs, h->dst_port);
	struct vsock_conn *c = fd >= 0 ? conn_new(vs, fd, VSOCK_ESTABLISHED) : NULL;
	if (!c) {
		if (fd >= 0)
			close(fd);
		send_rst(vs, h->dst_port, h->src_port);
		return;
	}
	c->local_port = h->dst_port;
	c->peer_port = h->src_port;
	c->peer_buf_alloc = h->buf_alloc;
	c->peer_fwd_cnt = h->fwd_cnt;
	c->pending |= OWE_RESPONSE;
}

static void guest_response(struct vsock_conn *c)
{
	char line[24];
	int n = snprintf(line, sizeof(line), "OK %u\n", c->local_port);
	/* Nothing else was written to this fresh socket, so a short line
	 * means the host side is gone. */
	if (c->state != VSOCK_CONNECTING || write(c->h.fd, line, (size_t)n) != n) {
		conn_reset(c);
		return;
	}
	c->state = VSOCK_ESTABLISHED;
	/* The host may have written already; its edge was seen while we
	 * waited for the guest, so look again. */
	c->host_readable = true;
}

/* Once no data can flow either way, the connection ends with our reset
 * (which a closing guest waits for), after what it sent is delivered. */
static void maybe_finish(struct vsock_conn *c)
{
	if (c->guest_shut_send && (c->guest_shut_rcv || c->host_eof))
		c->closing = true;
	after_flush(c);
}

static void guest_shutdown(struct vsock_conn *c, uint32_t flags)
{
	if (flags & VIRTIO_VSOCK_SHUTDOWN_RCV)
		c->guest_shut_rcv = true;
	if (flags & VIRTIO_VSOCK_SHUTDOWN_SEND)
		c->guest_shut_send = true;
	maybe_finish(c);
}

static void guest_rw(struct vsock_conn *c, const struct vq_chain *ch, uint32_t len)
{
	if (c->state != VSOCK_ESTABLISHED || c->guest_shut_send ||
	    len > VSOCK_BUF_ALLOC - (c->rx_cnt - c->fwd_cnt)) {
		conn_reset(c);   /* data it had no right to send */
		return;
	}
	c->rx_cnt += len;
	c->vs->stats.to_host += len;
	if (deliver(c, ch, len)) {
		conn_reset(c);
		return;
	}
	maybe_owe_credit(c);
}

/* Handle one packet from the TX queue. */
static void guest_packet(struct virtio_vsock *vs, const struct vq_chain *ch)
{
	struct virtio_vsock_hdr h;
	if (iov_read(ch->out, ch->nout, 0, &h, HDR_LEN) != HDR_LEN || h.src_cid != VSOCK_GUEST_CID ||
	    h.dst_cid != VSOCK_HOST_CID || h.len > VSOCK_MAX_PKT || h.len > ch->out_len - HDR_LEN) {
		vs->stats.bad_packets++;
		return;
	}
	struct vsock_conn *c = conn_find(vs, h.dst_port, h.src_port);
	if (h.type != VIRTIO_VSOCK_TYPE_STREAM) {
		if (c)
			conn_reset(c);
		else if (h.op != VIRTIO_VSOCK_OP_RST)
			send_rst(vs, h.dst_port, h.src_port);
		return;
	}
	if (!c) {
		if (h.op == VIRTIO_VSOCK_OP_REQUEST)
			guest_request(vs, &h);
		else if (h.op != VIRTIO_VSOCK_OP_RST)
			send_rst(vs, h.dst_port, h.src_port);
		return;
	}
	c->peer_buf_alloc = h.buf_alloc;
	c->peer_fwd_cnt = h.fwd_cnt;
	switch (h.op) {
	case VIRTIO_VSOCK_OP_RESPONSE: guest_response(c); break;
	case VIRTIO_VSOCK_OP_RST: conn_free(c); break;
	case VIRTIO_VSOCK_OP_SHUTDOWN: guest_shutdown(c, h.flags); break;
	case VIRTIO_VSOCK_OP_RW: guest_rw(c, ch, h.len); break;
	case VIRTIO_VSOCK_OP_CREDIT_UPDATE: break;
	case VIRTIO_VSOCK_OP_CREDIT_REQUEST: c->pending |= OWE_CREDIT; break;
	default: conn_reset(c); break;   /* a second REQUEST, or nonsense */
	}
}

static void tx_process(struct virtio_vsock *vs)
{
	struct virtq *q = &vs->t.queues[VSOCK_TXQ];
	while (vq_pop(q, &vs->chain) == VQ_CHAIN) {
		guest_packet(vs, &vs->chain);
		vq_push(q, vs->chain.head, 0);
	}
}

/* ---- host -> guest ------------------------------------------------------- */

static void fill_hdr(struct virtio_vsock_hdr *h, uint32_t local, uint32_t peer, uint16_t op)
{
	*h = (struct virtio_vsock_hdr){
		.src_cid = VSOCK_HOST_CID, .dst_cid = VSOCK_GUEST_CID, .src_port = local, .dst_port = peer,
		.type = VIRTIO_VSOCK_TYPE_STREAM, .op = op, .buf_alloc = VSOCK_BUF_ALLOC,
	};
}

static uint32_t peer_credit(const struct vsock_conn *c)
{
	uint32_t used = c->tx_cnt - c->peer_fwd_cnt;
	return used >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - used;
}

static bool wants_rx(const struct vsock_conn *c)
{
	if (c->state < VSOCK_CONNECTING)
		return false;
	if (c->pending)
		return true;
	return c->state == VSOCK_ESTABLISHED && c->host_readable && !c->host_eof && !c->guest_shut_rcv &&
	       peer_credit(c) > 0;
}

/* The next control packet c owes; *flags gets its flags. */
static uint16_t owed_op(struct vsock_conn *c, uint32_t *flags)
{
	*flags = 0;
	if (c->pending & OWE_REQUEST) {
		c->pending &= ~OWE_REQUEST;
		return VIRTIO_VSOCK_OP_REQUEST;
	}
	if (c->pending & OWE_RESPONSE) {
		c->pending &= ~OWE_RESPONSE;
		return VIRTIO_VSOCK_OP_RESPONSE;
	}
	if (c->pending & OWE_SHUTDOWN) {
		/* EOF on a Unix stream says only that the host stopped sending
		 * (it may have shut just its write side): the guest may still
		 * send until the host's socket refuses. */
		c->pending &= ~(OWE_SHUTDOWN | OWE_CREDIT);
		*flags = VIRTIO_VSOCK_SHUTDOWN_SEND;
		return VIRTIO_VSOCK_OP_SHUTDOWN;
	}
	c->pending &= ~OWE_CREDIT;
	return VIRTIO_VSOCK_OP_CREDIT_UPDATE;
}

/* Fill one RX chain for c: a control packet it owes, or data read from its
 * socket. Returns the bytes written to the chain, 0 when nothing was (the
 * chain is then unused). */
static uint32_t rx_one(struct vsock_conn *c, const struct vq_chain *ch)
{
	struct virtio_vsock_hdr h;
	uint32_t len = 0;
	if (c->pending) {
		uint32_t flags;
		uint16_t op = owed_op(c, &flags);
		fill_hdr(&h, c->local_port, c->peer_port, op);
		h.flags = flags;
	} else {
		uint64_t room = ch->in_len - HDR_LEN;
		uint32_t want = peer_credit(c);
		if (want > VSOCK_MAX_PKT)
			want = VSOCK_MAX_PKT;
		if (want > room)
			want = (uint32_t)room;
		struct iovec iov[VQ_MAX_SIZE];
		size_t got;
		unsigned n = iov_slice(ch->in, ch->nin, HDR_LEN, want, iov, VQ_MAX_SIZE, &got);
		ssize_t k;
		do
			k = readv(c->h.fd, iov, (int)n);
		while (k < 0 && errno == EINTR);
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			c->host_readable = false;
			return 0;
		}
		if (k <= 0) {
			/* The host stopped sending (or its socket broke): once
			 * the guest has everything, tell it so. */
			c->host_eof = true;
			if (c->guest_shut_send)
				maybe_finish(c);
			else
				c->pending |= OWE_SHUTDOWN;
			return 0;
		}
		len = (uint32_t)k;
		fill_hdr(&h, c->local_port, c->peer_port, VIRTIO_VSOCK_OP_RW);
		h.len = len;
		c->tx_cnt += len;
		c->vs->stats.to_guest += len;
	}
	h.fwd_cnt = c->fwd_cnt;
	c->fwd_reported = c->fwd_cnt;
	iov_write(ch->in, ch->nin, 0, &h, HDR_LEN);
	return (uint32_t)HDR_LEN + len;
}

static uint32_t rx_rst(struct virtio_vsock *vs, const struct vq_chain *ch)
{
	struct virtio_vsock_hdr h;
	fill_hdr(&h, vs->rst[vs->rst_head].local, vs->rst[vs->rst_head].peer, VIRTIO_VSOCK_OP_RST);
	vs->rst_head = (vs->rst_head + 1) % VSOCK_RST_BACKLOG;
	vs->rst_len--;
	vs->stats.resets_sent++;
	iov_write(ch->in, ch->nin, 0, &h, HDR_LEN);
	return (uint32_t)HDR_LEN;
}

static struct vsock_conn *next_rx_conn(struct virtio_vsock *vs)
{
	for (unsigned k = 0; k < VSOCK_MAX_CONNS; k++) {
		struct vsock_conn *c = &vs->conns[(vs->rr + k) % VSOCK_MAX_CONNS];
		if (wants_rx(c)) {
			vs->rr = (vs->rr + k + 1) % VSOCK_MAX_CONNS;
			return c;
		}
	}
	return NULL;
}

/* Give the guest everything owed and readable, while it has RX buffers. */
static void rx_pump(struct virtio_vsock *vs)
{
	if (!virtio_mmio_live(&vs->t))
		return;
	struct virtq *q = &vs->t.queues[VSOCK_RXQ];
	struct vq_chain *ch = &vs->chain;
	for (;;) {
		struct vsock_conn *c = vs->rst_len ? NULL : next_rx_conn(vs);
		if (!vs->rst_len && !c)
			break;
		if (vq_pop(q, ch) != VQ_CHAIN)
			break;
		/* A buffer too small for a header, or for any data when data is
		 * what we would send, is handed back unused. */
		if (ch->in_len < HDR_LEN || (c && !c->pending && ch->in_len == HDR_LEN)) {
			vs->stats.bad_packets++;
			vq_push(q, ch->head, 0);
			continue;
		}
		uint32_t n = c ? rx_one(c, ch) : rx_rst(vs, ch);
		if (n == 0) {
			vq_unpop(q);
			continue;
		}
		vq_push(q, ch->head, n);
	}
}

/* ---- host sockets -------------------------------------------------------- */

static uint32_t new_local_port(struct virtio_vsock *vs, uint32_t peer)
{
	for (;;) {
		uint32_t p = vs->next_local_port++;
		if (vs->next_local_port < VSOCK_HOST_PORT_BASE)
			vs->next_local_port = VSOCK_HOST_PORT_BASE;
		if (!conn_find(vs, p, peer))
			return p;
	}
}

/* Parse "CONNECT <port>\n" without reading past the newline: what follows
 * it is the stream's first data. */
static void handshake(struct vsock_conn *c, uint32_t events)
{
	char line[VSOCK_CONNECT_LINE + 1];
	ssize_t n = recv(c->h.fd, line, VSOCK_CONNECT_LINE, MSG_PEEK);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	char *nl = n > 0 ? memchr(line, '\n', (size_t)n) : NULL;
	if (!nl) {
		/* Closed, failed, a line too long, or a partial line whose
		 * sender hung up (edge-triggered: no further event comes). */
		if (n <= 0 || n == VSOCK_CONNECT_LINE || (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
			conn_free(c);
		return;
	}
	size_t used = (size_t)(nl - line) + 1;
	*nl = '\0';
	uint64_t port;
	char discard[VSOCK_CONNECT_LINE];
	if (recv(c->h.fd, discard, used, 0) != (ssize_t)used || strncmp(line, "CONNECT ", 8) ||
	    parse_u64(line + 8, 0, UINT32_MAX, &port)) {
		conn_free(c);
		return;
	}
	c->peer_port = (uint32_t)port;
	c->local_port = new_local_port(c->vs, c->peer_port);
	c->state = VSOCK_CONNECTING;
	c->pending |= OWE_REQUEST;
	c->peer_buf_alloc = 0;
}

static void conn_event(void *ctx, uint32_t events)
{
	struct vsock_conn *c = ctx;
	struct virtio_vsock *vs = c->vs;
	virtio_mmio_lock(&vs->t);
	if (c->state == VSOCK_HANDSHAKE) {
		handshake(c, events);
	} else if (c->state == VSOCK_CONNECTING) {
		/* The host gave up before the guest answered. (Peeking still tells
		 * apart a call the loop began for a previous user of this slot
		 * just before a vCPU thread's reset freed and reused it.) */
		char b;
		if ((events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR)) &&
		    recv(c->h.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
			conn_reset(c);
	} else if (c->state == VSOCK_ESTABLISHED) {
		if (events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP | EPOLLERR))
			c->host_readable = true;
		if ((events & (EPOLLOUT | EPOLLERR)) && c->buf_len) {
			if (flush_buf(c))
				conn_reset(c);
			else
				after_flush(c);
		}
	}
	rx_pump(vs);
	if (virtio_mmio_live(&vs->t))
		virtio_mmio_signal(&vs->t);
	virtio_mmio_unlock(&vs->t);
}

static void listener_event(void *ctx, uint32_t events)
{
	struct virtio_vsock *vs = ctx;
	(void)events;
	virtio_mmio_lock(&vs->t);
	for (;;) {
		int fd = accept4(vs->listener.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break;
		struct vsock_conn *c = conn_new(vs, fd, VSOCK_HANDSHAKE);
		if (!c)
			close(fd);   /* over the cap: the client sees EOF */
		else
			handshake(c, 0);
	}
	rx_pump(vs);
	if (virtio_mmio_live(&vs->t))
		virtio_mmio_signal(&vs->t);
	virtio_mmio_unlock(&vs->t);
}

/* ---- device ops ---------------------------------------------------------- */

static void vsock_notify(void *dev, struct virtio_mmio *t, unsigned q)
{
	struct virtio_vsock *vs = dev;
	(void)t;
	if (q == VSOCK_TXQ)
		tx_process(vs);
	/* New RX buffers, or packets and credit from TX: either may unblock RX.
	 * The event queue is only for transport resets (after a restore). */
	rx_pump(vs);
}

static int vsock_activate(void *dev, struct virtio_mmio *t)
{
	(void)t;
	rx_pump(dev);
	return 0;
}

/* A driver reset forgets every connection; host clients see EOF. */
static void vsock_reset(void *dev)
{
	struct virtio_vsock *vs = dev;
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++)
		conn_free(&vs->conns[i]);
	vs->rst_head = vs->rst_len = 0;
}

static void vsock_describe(void *dev, char *buf, size_t len)
{
	struct virtio_vsock *vs = dev;
	int n = snprintf(buf, len, "to host %llu, to guest %llu, resets %llu owed %u", (unsigned long long)vs->stats.to_host,
			 (unsigned long long)vs->stats.to_guest, (unsigned long long)vs->stats.resets_sent, vs->rst_len);
	size_t used = n < 0 ? len : (size_t)n;
	for (unsigned i = 0; i < VSOCK_MAX_CONNS && used < len; i++) {
		const struct vsock_conn *c = &vs->conns[i];
		if (c->state == VSOCK_FREE)
			continue;
		static const char *const names[] = { [VSOCK_HANDSHAKE] = "handshake", [VSOCK_CONNECTING] = "connecting",
						     [VSOCK_ESTABLISHED] = "established" };
		n = snprintf(buf + used, len - used,
			     ", conn %u->%u %s pending 0x%x%s%s%s%s credit %u buffered %u",
			     c->local_port, c->peer_port, names[c->state], c->pending, c->host_readable ? " readable" : "",
			     c->host_eof ? " eof" : "", c->guest_shut_send ? " guest-shut-send" : "",
			     c->guest_shut_rcv ? " guest-shut-rcv" : "", peer_credit(c), c->buf_len);
		used = n < 0 ? len : used + (size_t)n;
	}
}

static const struct virtio_dev_ops vsock_ops = {
	.name = "vsock",
	.device_id = VIRTIO_ID_VSOCK,
	.nqueues = 3,
	.queue_max = VSOCK_QUEUE_SIZE,
	.activate = vsock_activate,
	.notify = vsock_notify,
	.reset = vsock_reset,
	.describe = vsock_describe,
};

/* The one event the device sends: every connection the guest holds is
 * gone (virtio 1.2, 5.10.6.6). Needs a buffer on the event queue; the
 * driver keeps it filled. */
static void transport_reset(struct virtio_vsock *vs)
{
	struct virtq *q = &vs->t.queues[VSOCK_EVQ];
	struct virtio_vsock_event ev = { .id = VIRTIO_VSOCK_EVENT_TRANSPORT_RESET };
	if (vq_pop(q, &vs->chain) != VQ_CHAIN)
		return;
	uint32_t n = (uint32_t)iov_write(vs->chain.in, vs->chain.nin, 0, &ev, sizeof(ev));
	vq_push(q, vs->chain.head, n == sizeof(ev) ? n : 0);
}

void virtio_vsock_restored(struct virtio_vsock *vs, uint32_t ready_port, uint32_t ready_peer)
{
	virtio_mmio_lock(&vs->t);
	if (virtio_mmio_live(&vs->t)) {
		if (ready_peer)
			send_rst(vs, ready_port, ready_peer);
		transport_reset(vs);
		tx_process(vs);
		rx_pump(vs);
		virtio_mmio_signal(&vs->t);
	}
	virtio_mmio_unlock(&vs->t);
}

int virtio_vsock_init(struct virtio_vsock *vs, const char *uds, struct event_loop *evl,
		      const struct guest_mem *mem, uint64_t base, unsigned irq)
{
	memset(vs, 0, sizeof(*vs));
	vs->listener.fd = -1;
	vs->evl = evl;
	vs->next_local_port = VSOCK_HOST_PORT_BASE;
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++)
		vs->conns[i] = (struct vsock_conn){ .vs = vs, .h = { .fn = conn_event, .ctx = &vs->conns[i], .fd = -1 } };
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	/* Room for "_<port>" too, or guest connections could not be forwarded. */
	if (!*uds || strlen(uds) + 11 >= sizeof(a.sun_path)) {
		vmm_err("--vsock-uds: path must be 1 to %zu bytes", sizeof(a.sun_path) - 12);
		return -1;
	}
	strcpy(vs->uds, uds);
	strcpy(a.sun_path, uds);
	uint64_t cid = VSOCK_GUEST_CID;
	if (virtio_mmio_init(&vs->t, &vsock_ops, vs, mem, base, irq, 0, &cid, sizeof(cid)))
		return -1;
	vs->listener = (struct evl_handler){ .fn = listener_event, .ctx = vs,
					     .fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) };
	if (vs->listener.fd < 0 || bind(vs->listener.fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		vmm_perr("vsock socket %s", uds);
		goto fail;
	}
	if (listen(vs->listener.fd, (int)VSOCK_MAX_CONNS) < 0 || evl_add(evl, &vs->listener, EPOLLIN)) {
		vmm_perr("vsock socket %s", uds);
		unlink(uds);
		goto fail;
	}
	return 0;
fail:
	if (vs->listener.fd >= 0)
		close(vs->listener.fd);
	vs->listener.fd = -1;
	virtio_mmio_release(&vs->t);
	return -1;
}

void virtio_vsock_release(struct virtio_vsock *vs)
{
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++)
		if (vs->conns[i].vs)
			conn_free(&vs->conns[i]);
	if (vs->listener.fd >= 0) {
		evl_del(vs->evl, &vs->listener);
		close(vs->listener.fd);
		unlink(vs->uds);
	}
	vs->listener.fd = -1;
	virtio_mmio_release(&vs->t);
}

/* ---- the kind: --vsock-uds, the VM's vsock, a restore's reset ------------- */

enum { OPT_VSOCK_UDS = VMM_DEVICE_OPT_BASE + 16 };

static int vsock_option(struct vmm_config *cfg, int val, const char *arg)
{
	(void)val;
	if (!*arg) {
		vmm_err("--vsock-uds: empty path");
		return -1;
	}
	cfg->vsock_uds = arg;
	return 0;
}

static unsigned vsock_count(const struct vmm_config *cfg)
{
	return cfg->vsock_uds ? 1 : 0;
}

static int vsock_create(struct vm *vm, const struct vmm_config *cfg, unsigned i, uint64_t base, unsigned irq,
			struct virtio_mmio **t)
{
	(void)i;
	if (virtio_vsock_init(&vm->vsock, cfg->vsock_uds, &vm->evl, &vm->mem, base, irq))
		return -1;
	vm->has_vsock = true;
	*t = &vm->vsock.t;
	return 0;
}

/* The agent's connection the snapshot's vmm held went with that vmm. */
static void vsock_restored(struct vm *vm, const struct vmm_config *cfg, const struct snap_meta *meta)
{
	(void)cfg;
	if (vm->has_vsock)
		virtio_vsock_restored(&vm->vsock, PROTO_READY_VSOCK_PORT, meta->ready_peer);
}

static void vsock_faults(const struct vm *vm, char *buf, size_t len, size_t *used)
{
	if (!vm->has_vsock)
		return;
	virtio_mmio_faults(&vm->vsock.t, "vsock", buf, len, used);
	virtio_faults_append(buf, len, used, "vsock", vm->vsock.stats.bad_packets, "bad packets");
}

static void vsock_release_all(struct vm *vm)
{
	if (vm->has_vsock)
		virtio_vsock_release(&vm->vsock);
	vm->has_vsock = false;
}

static const struct option vsock_options[] = {
	{ "vsock-uds", required_argument, NULL, OPT_VSOCK_UDS },
	{ NULL, 0, NULL, 0 },
};

const struct vmm_device_kind virtio_vsock_kind = {
	.name = "vsock",
	.options = vsock_options,
	.synopsis = "[--vsock-uds PATH]",
	.usage = "  --vsock-uds PATH       virtio-vsock (guest CID 3) with Firecracker's host side:\n"
		 "                         guest connections to port P go to PATH_P; host\n"
		 "                         connections to PATH send \"CONNECT P\\n\"\n",
	.option = vsock_option,
	.count = vsock_count,
	.create = vsock_create,
	.restored = vsock_restored,
	.faults = vsock_faults,
	.release = vsock_release_all,
};
