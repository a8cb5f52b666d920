/* A fake virtio driver for tests and fuzz harnesses: guest RAM from
 * guest_mem_init, rings placed at fixed guest addresses, the transport
 * driven through its register callbacks exactly as a guest would, and
 * helpers to hand-build descriptor chains (hostile ones included).
 *
 * Layout of the fake guest (FV_MEM_SIZE bytes, all below the gap):
 *   queue q's rings at FV_RING_BASE + q * FV_RING_STRIDE: descriptors,
 *   then the available ring at +0x1000, the used ring at +0x2000;
 *   buffers from FV_BUF_BASE upward. */
#ifndef TESTS_FAKE_VIRTIO_H
#define TESTS_FAKE_VIRTIO_H

#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "guest_mem.h"
#include "virtio_mmio.h"

#define FV_MEM_SIZE    (4ull << 20)
#define FV_RING_BASE   0x10000ull
#define FV_RING_STRIDE 0x4000ull
#define FV_BUF_BASE    0x100000ull

struct fv_queue {
	uint16_t size;
	uint16_t avail_idx;   /* driver's next available slot */
	uint16_t used_seen;   /* used entries already consumed by the test */
	uint64_t desc, avail, used;
};

static inline int fv_mem_init(struct guest_mem *gm)
{
	return guest_mem_init(gm, FV_MEM_SIZE, 0xc0000000ull, 0x100000000ull);
}

static inline void *fv_ptr(struct guest_mem *gm, uint64_t gpa, uint64_t len)
{
	return guest_mem_ptr(gm, gpa, len);
}

static inline void fv_write(struct virtio_mmio *t, uint64_t off, uint32_t v)
{
	virtio_mmio_write(t, off, (const uint8_t *)&v, 4);
}

static inline uint32_t fv_read(struct virtio_mmio *t, uint64_t off)
{
	uint32_t v;
	virtio_mmio_read(t, off, (uint8_t *)&v, 4);
	return v;
}

/* Configure queue qi of t with size entries at the fixed layout (status must
 * be FEATURES_OK) and mark it ready. */
static inline void fv_queue_setup(struct virtio_mmio *t, unsigned qi, uint16_t size, struct fv_queue *q)
{
	q->size = size;
	q->avail_idx = q->used_seen = 0;
	q->desc = FV_RING_BASE + qi * FV_RING_STRIDE;
	q->avail = q->desc + 0x1000;
	q->used = q->desc + 0x2000;
	fv_write(t, VIRTIO_MMIO_QUEUE_SEL, qi);
	fv_write(t, VIRTIO_MMIO_QUEUE_NUM, size);
	fv_write(t, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)q->desc);
	fv_write(t, VIRTIO_MMIO_QUEUE_DESC_HIGH, (uint32_t)(q->desc >> 32));
	fv_write(t, VIRTIO_MMIO_QUEUE_AVAIL_LOW, (uint32_t)q->avail);
	fv_write(t, VIRTIO_MMIO_QUEUE_AVAIL_HIGH, (uint32_t)(q->avail >> 32));
	fv_write(t, VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)q->used);
	fv_write(t, VIRTIO_MMIO_QUEUE_USED_HIGH, (uint32_t)(q->used >> 32));
	fv_write(t, VIRTIO_MMIO_QUEUE_READY, 1);
}

/* Negotiate every offered feature and bring the device to DRIVER_OK with
 * nq queues of size entries. Returns the status read back. */
static inline uint32_t fv_bring_up(struct virtio_mmio *t, unsigned nq, uint16_t size, struct fv_queue *qs)
{
	fv_write(t, VIRTIO_MMIO_STATUS, 0);
	fv_write(t, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	fv_write(t, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	for (uint32_t sel = 0; sel < 2; sel++) {
		fv_write(t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, sel);
		uint32_t f = fv_read(t, VIRTIO_MMIO_DEVICE_FEATURES);
		fv_write(t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, sel);
		fv_write(t, VIRTIO_MMIO_DRIVER_FEATURES, f);
	}
	uint32_t s = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK;
	fv_write(t, VIRTIO_MMIO_STATUS, s);
	for (unsigned i = 0; i < nq; i++)
		fv_queue_setup(t, i, size, &qs[i]);
	fv_write(t, VIRTIO_MMIO_STATUS, s | VIRTIO_CONFIG_S_DRIVER_OK);
	return fv_read(t, VIRTIO_MMIO_STATUS);
}

/* Write descriptor idx of q (idx is not checked: tests write hostile ones
 * only inside the table). */
static inline void fv_desc(struct guest_mem *gm, const struct fv_queue *q, uint16_t idx, uint64_t addr,
			   uint32_t len, uint16_t flags, uint16_t next)
{
	struct vring_desc d = { .addr = addr, .len = len, .flags = flags, .next = next };
	memcpy(fv_ptr(gm, q->desc + 16ull * idx, 16), &d, 16);
}

/* Make head available (without notifying). */
static inline void fv_avail(struct guest_mem *gm, struct fv_queue *q, uint16_t head)
{
	uint16_t *ring = fv_ptr(gm, q->avail + 4, 2ull * q->size);
	ring[q->avail_idx % q->size] = head;
	q->avail_idx++;
	__atomic_store_n((uint16_t *)fv_ptr(gm, q->avail + 2, 2), q->avail_idx, __ATOMIC_RELEASE);
}

/* Set the available index directly (for hostile jumps). */
static inline void fv_avail_idx(struct guest_mem *gm, struct fv_queue *q, uint16_t idx)
{
	q->avail_idx = idx;
	*(uint16_t *)fv_ptr(gm, q->avail + 2, 2) = idx;
}

static inline uint16_t fv_used_idx(struct guest_mem *gm, const struct fv_queue *q)
{
	return __atomic_load_n((uint16_t *)fv_ptr(gm, q->used + 2, 2), __ATOMIC_ACQUIRE);
}

/* Take the next used element the test has not seen. Returns false when
 * there is none. */
static inline bool fv_used(struct guest_mem *gm, struct fv_queue *q, uint32_t *id, uint32_t *len)
{
	if (fv_used_idx(gm, q) == q->used_seen)
		return false;
	struct vring_used_elem e;
	memcpy(&e, fv_ptr(gm, q->used + 4 + 8ull * (q->used_seen % q->size), 8), 8);
	q->used_seen++;
	*id = e.id;
	*len = e.len;
	return true;
}

#endif
