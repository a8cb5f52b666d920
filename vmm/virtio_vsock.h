/* virtio-vsock (virtio 1.2, 5.10) with its host side in the VMM, speaking
 * Firecracker's Unix-socket protocol:
 *   - a guest connection to host port P is forwarded to the Unix socket
 *     "<uds>_P", which a host process listens on;
 *   - a host process connecting to "<uds>" and sending "CONNECT P\n" gets
 *     "OK <port>\n" and then a stream to guest port P, or EOF when nothing
 *     in the guest listens there.
 * The guest is CID 3, the host CID 2. Streams only (no SEQPACKET).
 *
 * Flow control is virtio's credit scheme both ways: the guest may have at
 * most VSOCK_BUF_ALLOC bytes in flight to each connection, which bounds the
 * per-connection buffer; the host side is read only as far as the guest's
 * advertised credit allows. A guest that breaks the protocol (over-credit
 * data, unknown operations, data for unknown connections, malformed
 * packets) gets its connection reset; nothing it sends can grow host memory
 * beyond VSOCK_MAX_CONNS buffers. */
#ifndef VMM_VIRTIO_VSOCK_H
#define VMM_VIRTIO_VSOCK_H

#include <linux/virtio_vsock.h>
#include <stdbool.h>
#include <stdint.h>

#include "event_loop.h"
#include "virtio_mmio.h"
#include "virtqueue.h"

#define VSOCK_HOST_CID     2u
#define VSOCK_GUEST_CID    3u
#define VSOCK_QUEUE_SIZE   256u
#define VSOCK_MAX_CONNS    64u            /* connections and pending host handshakes */
#define VSOCK_BUF_ALLOC    (256u * 1024)  /* per-connection receive space given to the guest */
#define VSOCK_MAX_PKT      (64u * 1024)   /* largest payload in one packet */
#define VSOCK_RST_BACKLOG  64u            /* resets waiting for a guest RX buffer */
#define VSOCK_HOST_PORT_BASE (1u << 30)   /* local ports for host-initiated streams */
#define VSOCK_CONNECT_LINE 32u            /* longest "CONNECT <port>\n" accepted */

enum vsock_queue { VSOCK_RXQ = 0, VSOCK_TXQ = 1, VSOCK_EVQ = 2 };

enum vsock_conn_state {
	VSOCK_FREE = 0,
	VSOCK_HANDSHAKE,    /* host socket accepted, its CONNECT line not read yet */
	VSOCK_CONNECTING,   /* REQUEST sent to the guest, waiting for RESPONSE */
	VSOCK_ESTABLISHED,
};

struct virtio_vsock;

struct vsock_conn {
	struct evl_handler h;        /* the host-side Unix stream socket */
	struct virtio_vsock *vs;
	enum vsock_conn_state state;
	uint32_t local_port;         /* host side */
	uint32_t peer_port;          /* guest side */
	uint32_t pending;            /* control packets owed to the guest (bits) */
	bool host_readable;          /* the socket may have data we have not read */
	bool host_eof;               /* the host side will send no more */
	bool guest_shut_send;        /* the guest will send no more */
	bool guest_shut_rcv;         /* the guest wants no more data */
	bool closing;                /* reset once the buffer is flushed */

	/* guest -> host */
	uint32_t rx_cnt;             /* bytes received from the guest */
	uint32_t fwd_cnt;            /* of those, bytes written to the socket */
	uint32_t fwd_reported;       /* fwd_cnt last told to the guest */
	uint8_t *buf;                /* VSOCK_BUF_ALLOC ring, allocated on first need */
	uint32_t buf_head, buf_len;

	/* host -> guest */
	uint32_t tx_cnt;             /* bytes sent to the guest */
	uint32_t peer_buf_alloc, peer_fwd_cnt;
};

struct vsock_stats {
	uint64_t bad_packets;        /* malformed or misaddressed, dropped */
	uint64_t resets_sent;
	uint64_t resets_dropped;     /* reset backlog full */
	uint64_t to_host, to_guest;  /* payload bytes */
};

struct virtio_vsock {
	struct virtio_mmio t;
	struct event_loop *evl;
	char uds[108];               /* the listening socket's path */
	struct evl_handler listener;
	struct vsock_conn conns[VSOCK_MAX_CONNS];
	unsigned rr;                 /* round-robin start for RX service */
	uint32_t next_local_port;
	struct { uint32_t local, peer; } rst[VSOCK_RST_BACKLOG];
	unsigned rst_head, rst_len;
	struct vq_chain chain;
	struct vsock_stats stats;

	/* --snapshot-out: the guest agent's connection to ready_port says it
	 * is ready for a run. It is neither answered nor forwarded: on_ready
	 * stops the VM with the connection pending (ready_peer its guest
	 * port), and a restore resets it. ready_port 0: an ordinary port. */
	uint32_t ready_port, ready_peer;
	void (*on_ready)(void *ctx);
	void *ready_ctx;
};

/* Set up the device at base/irq and listen on uds (which must not exist).
 * Its sockets are served by evl. Returns 0, or -1 after one error line. */
int virtio_vsock_init(struct virtio_vsock *vs, const char *uds, struct event_loop *evl,
		      const struct guest_mem *mem, uint64_t base, unsigned irq);

/* After a restore (lock not held, vCPUs not yet running): reset the
 * guest's pending connection to ready_port from ready_peer (when not 0)
 * and every other it may hold (a TRANSPORT_RESET event), and serve the
 * queues once, since notifications the snapshot's vmm had not read were
 * lost with it. */
void virtio_vsock_restored(struct virtio_vsock *vs, uint32_t ready_port, uint32_t ready_peer);

/* Close every connection and the listener, remove the socket file, release
 * the transport; safe after a failed init. */
void virtio_vsock_release(struct virtio_vsock *vs);

#endif
