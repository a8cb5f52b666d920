#include "virtio_rng.h"

#include <errno.h>
#include <linux/virtio_ids.h>
#include <string.h>
#include <sys/random.h>

/* Fill up to RNG_MAX_PER_REQUEST bytes of the chain's writable part.
 * Returns the bytes written. */
static uint32_t fill(struct vq_chain *c)
{
	uint32_t done = 0;
	for (unsigned i = 0; i < c->nin && done < RNG_MAX_PER_REQUEST; i++) {
		size_t want = c->in[i].iov_len;
		if (want > RNG_MAX_PER_REQUEST - done)
			want = RNG_MAX_PER_REQUEST - done;
		/* Never block the event loop: the host pool is initialised long
		 * before any VM starts, and if not, the guest gets fewer bytes. */
		ssize_t k = getrandom(c->in[i].iov_base, want, GRND_NONBLOCK);
		if (k < 0 && errno == EINTR)
			k = getrandom(c->in[i].iov_base, want, GRND_NONBLOCK);
		if (k <= 0)
			break;
		done += (uint32_t)k;
		if ((size_t)k < want)
			break;
	}
	return done;
}

static void rng_notify(void *dev, struct virtio_mmio *t, unsigned qi)
{
	struct virtio_rng *r = dev;
	struct virtq *q = &t->queues[qi];
	while (vq_pop(q, &r->chain) == VQ_CHAIN) {
		uint32_t n = fill(&r->chain);
		r->bytes += n;
		vq_push(q, r->chain.head, n);
	}
}

static const struct virtio_dev_ops rng_ops = {
	.name = "rng",
	.device_id = VIRTIO_ID_RNG,
	.nqueues = 1,
	.queue_max = 64,
	.notify = rng_notify,
};

int virtio_rng_init(struct virtio_rng *r, const struct guest_mem *mem, uint64_t base, unsigned irq)
{
	memset(r, 0, sizeof(*r));
	return virtio_mmio_init(&r->t, &rng_ops, r, mem, base, irq, 0, NULL, 0);
}

void virtio_rng_release(struct virtio_rng *r)
{
	virtio_mmio_release(&r->t);
}
