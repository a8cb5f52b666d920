/* Split virtqueues, device side: the one place that reads the guest's
 * rings. Every chain is walked once, each descriptor copied to a local
 * before use, every address translated through guest_mem_ptr, and the whole
 * chain validated before a device sees any of it.
 *
 * Rules enforced (virtio 1.2, 2.7): size non-zero, a power of two, at most
 * the device's maximum; rings aligned and wholly inside guest RAM; head and
 * next indices below the size; at most size descriptors per chain (so no
 * loops); readable descriptors before writable ones; no indirect
 * descriptors (never offered); an available index at most size ahead of the
 * last one seen. A bad chain is returned to the guest unused (length 0) and
 * counted; a bad ring marks the queue broken, which the transport turns
 * into DEVICE_NEEDS_RESET. */
#ifndef VMM_VIRTQUEUE_H
#define VMM_VIRTQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "guest_mem.h"

/* Largest queue any device offers; bounds the per-chain segment arrays. */
#define VQ_MAX_SIZE 256

struct virtq {
	/* Set by the driver through the transport. */
	uint16_t max_size;    /* what the device offers; fixed */
	uint16_t size;        /* what the driver chose */
	bool ready;
	uint64_t desc_gpa, avail_gpa, used_gpa;

	/* Set by vq_activate from the above. */
	const struct guest_mem *mem;
	volatile uint8_t *desc;    /* size * 16 bytes */
	volatile uint8_t *avail;   /* flags, idx, ring[size], used_event */
	volatile uint8_t *used;    /* flags, idx, ring[size] of {id, len}, avail_event */
	uint16_t last_avail;       /* next available entry to consume */
	uint16_t used_idx;         /* next used entry to fill */
	bool broken;               /* ring state is invalid; stop touching it */

	uint64_t bad_chains;       /* chains returned unused */
};

/* One validated chain: host views of its readable (out) and writable (in)
 * parts, in order. Zero-length descriptors contribute nothing. */
struct vq_chain {
	uint16_t head;
	unsigned nout, nin;
	uint64_t out_len, in_len;
	struct iovec out[VQ_MAX_SIZE];
	struct iovec in[VQ_MAX_SIZE];
};

enum vq_pop_result {
	VQ_EMPTY = 0,    /* nothing available */
	VQ_CHAIN = 1,    /* *c holds a valid chain */
	VQ_BROKEN = -1,  /* ring invalid: the queue is now broken */
};

/* Reset a queue to its power-on state, keeping max_size and bad_chains
 * (a count over the device's life: a guest's reset must not erase what
 * it did before). */
void vq_reset(struct virtq *q);

/* Check the driver's configuration and map the rings. Returns 0, or -1 when
 * size or any ring is invalid (the queue is then unusable). */
int vq_activate(struct virtq *q, const struct guest_mem *mem);

/* Take the next valid chain into *c. Invalid chains met on the way are
 * returned to the guest with length 0, counted in bad_chains, and skipped.
 * Returns VQ_CHAIN, VQ_EMPTY, or VQ_BROKEN. */
enum vq_pop_result vq_pop(struct virtq *q, struct vq_chain *c);

/* Give back the chain vq_pop returned last, unconsumed, so the next vq_pop
 * returns it again (a device that had nothing to put in it). */
void vq_unpop(struct virtq *q);

/* Return a chain to the guest with written bytes placed in its writable part. */
void vq_push(struct virtq *q, uint16_t head, uint32_t written);

/* After one or more vq_push: whether the guest wants an interrupt. */
bool vq_should_interrupt(struct virtq *q);

/* Whether the guest has made chains available that vq_pop has not taken. */
bool vq_has_avail(struct virtq *q);

/* The ring's indices as "avail A next N used U" (the driver's avail idx,
 * the next entry the device takes, the device's used idx), with " nointr"
 * while the driver suppresses interrupts, into buf: for vmm's state line. */
void vq_state(struct virtq *q, char *buf, size_t len);

/* Copy len bytes starting at offset within the iovecs into dst. Returns the
 * number of bytes copied (less than len when the iovecs end first). */
size_t iov_read(const struct iovec *iov, unsigned n, size_t offset, void *dst, size_t len);

/* Copy len bytes from src into the iovecs starting at offset. Returns the
 * number of bytes copied. */
size_t iov_write(const struct iovec *iov, unsigned n, size_t offset, const void *src, size_t len);

/* Build in out[] (at most max entries) the view of at most len bytes of the
 * iovecs starting at offset. Returns the number of entries; *got gets the
 * bytes covered. */
unsigned iov_slice(const struct iovec *iov, unsigned n, size_t offset, size_t len, struct iovec *out,
		   unsigned max, size_t *got);

#endif
