/* virtio-rng (virtio 1.2, 5.4): fills the guest's buffers from the host's
 * getrandom(), so the guest kernel has entropy from its first seconds. */
#ifndef VMM_VIRTIO_RNG_H
#define VMM_VIRTIO_RNG_H

#include <stdint.h>

#include "virtio_mmio.h"
#include "virtqueue.h"

/* Bytes given per request at most: the Linux driver asks for small amounts,
 * and a guest asking for gigabytes must not keep the event loop busy. */
#define RNG_MAX_PER_REQUEST 4096u

struct virtio_rng {
	struct virtio_mmio t;
	struct vq_chain chain;
	uint64_t bytes;       /* given to the guest */
};

/* Set up the device at base/irq. Returns 0, or -1 after one error line. */
int virtio_rng_init(struct virtio_rng *r, const struct guest_mem *mem, uint64_t base, unsigned irq);

/* Release the transport; safe after a failed init. */
void virtio_rng_release(struct virtio_rng *r);

#endif
