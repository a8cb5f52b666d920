/* virtio-blk over a raw image file (virtio 1.2, 5.2). No format is ever
 * probed: the file's bytes are the disk's bytes. Requests: read, write,
 * flush, get-id; everything else is answered UNSUPP. A read-only disk
 * offers VIRTIO_BLK_F_RO and answers writes with IOERR whatever the driver
 * does. The capacity is the file's size in whole sectors, fixed at start, so
 * a guest can never grow the file. */
#ifndef VMM_VIRTIO_BLK_H
#define VMM_VIRTIO_BLK_H

#include <linux/virtio_blk.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "virtio_mmio.h"
#include "virtqueue.h"

#define BLK_SECTOR     512u
#define BLK_QUEUE_SIZE 256u
/* Segments per request offered to the driver: the queue minus the header
 * and status descriptors. */
#define BLK_SEG_MAX    (BLK_QUEUE_SIZE - 2)

/* A parsed request: what to do, where, and the guest buffers to use. */
struct blk_req {
	uint32_t type;           /* VIRTIO_BLK_T_* */
	uint64_t offset;         /* byte offset in the image (IN/OUT) */
	uint64_t len;            /* data bytes */
	unsigned niov;
	struct iovec iov[VQ_MAX_SIZE];
	bool has_status;         /* the chain has a writable byte for the status */
};

struct virtio_blk {
	struct virtio_mmio t;
	int fd;
	bool ro;
	uint64_t capacity;       /* sectors */
	char id[VIRTIO_BLK_ID_BYTES];
	struct vq_chain chain;
	struct blk_req req;
	uint64_t requests, errors;
};

/* Open path (read-only when ro) and set up the device at base/irq; a NULL
 * path is an empty slot of capacity 0 (every request fails with IOERR,
 * since every sector is past the end).
 * Returns 0, or -1 after one error line naming the file. */
int virtio_blk_init(struct virtio_blk *b, const char *path, bool ro, const struct guest_mem *mem,
		    uint64_t base, unsigned irq);

/* Tell a driver that saw another capacity (a restored VM whose snapshot
 * had this slot empty) about the current one: new config space and a
 * config-change interrupt. */
void virtio_blk_announce_capacity(struct virtio_blk *b);

/* Close the image and the transport; safe after a failed init. */
void virtio_blk_release(struct virtio_blk *b);

/* Check one chain as a virtio-blk request against a disk of capacity
 * sectors. Returns VIRTIO_BLK_S_OK when r describes I/O to do, or the status
 * to answer without I/O (IOERR, UNSUPP). Pure: touches no file. */
uint8_t blk_parse(const struct vq_chain *c, uint64_t capacity, bool ro, struct blk_req *r);

#endif
