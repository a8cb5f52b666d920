#include "virtio_rng.h"

#include <errno.h>
#include <linux/virtio_ids.h>
#include <string.h>
#include <sys/random.h>

#include "device.h"
#include "vm.h"

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

/* ---- the kind: always one, no options ------------------------------------ */

static unsigned rng_count(const struct vmm_config *cfg)
{
	(void)cfg;
	return 1;
}

static int rng_create(struct vm *vm, const struct vmm_config *cfg, unsigned i, uint64_t base, unsigned irq,
		      struct virtio_mmio **t)
{
	(void)cfg;
	(void)i;
	if (virtio_rng_init(&vm->rng, &vm->mem, base, irq))
		return -1;
	vm->has_rng = true;
	*t = &vm->rng.t;
	return 0;
}

static void rng_faults(const struct vm *vm, char *buf, size_t len, size_t *used)
{
	if (vm->has_rng)
		virtio_mmio_faults(&vm->rng.t, "rng", buf, len, used);
}

static void rng_release_all(struct vm *vm)
{
	if (vm->has_rng)
		virtio_rng_release(&vm->rng);
	vm->has_rng = false;
}

static const struct option rng_options[] = {
	{ NULL, 0, NULL, 0 },
};

const struct vmm_device_kind virtio_rng_kind = {
	.name = "rng",
	.options = rng_options,
	.synopsis = "",
	.usage = "A virtio-rng device fed from the host's getrandom() is always present.\n",
	.count = rng_count,
	.create = rng_create,
	.faults = rng_faults,
	.release = rng_release_all,
};
