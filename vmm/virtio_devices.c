#include "virtio_devices.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <linux/virtio_mmio.h>

#include "kvm.h"
#include "kvm_arch.h"
#include "log.h"

_Static_assert(VM_MAX_DISKS == VMM_MAX_DISKS, "the VM holds every disk the command line allows");

static void kick_event(void *ctx, uint32_t events)
{
	struct virtio_kick *k = ctx;
	eventfd_t n;
	(void)events;
	if (eventfd_read(k->h.fd, &n) == 0)
		virtio_mmio_kick(k->t, k->q);
}

/* Put t in the VM: bus window, queue ioeventfds, irqfd, event loop. */
static int attach(struct vm *vm, struct virtio_mmio *t)
{
	if (bus_register(&vm->mmio, t->base, VIRTIO_MMIO_WINDOW, virtio_mmio_read, virtio_mmio_write, t) ||
	    kvm_irqfd(vm, t->irq_fd, t->irq))
		return -1;
	for (unsigned q = 0; q < t->ops->nqueues; q++) {
		struct virtio_kick *k = &vm->kicks[vm->nkicks];
		*k = (struct virtio_kick){ .h = { .fn = kick_event, .ctx = k, .fd = t->kick_fd[q] }, .t = t, .q = q };
		if (kvm_ioeventfd(vm, t->base + VIRTIO_MMIO_QUEUE_NOTIFY, q, t->kick_fd[q]))
			return -1;
		if (evl_add(&vm->evl, &k->h, EPOLLIN)) {
			vmm_perr("virtio-%s: epoll", t->ops->name);
			return -1;
		}
		vm->nkicks++;
	}
	return 0;
}

/* The next free slot, or -1 after an error line. */
static int next_slot(const struct vm *vm, uint64_t *base, unsigned *irq)
{
	if (kvm_arch_virtio_slot(vm->nvirtio, base, irq)) {
		vmm_err("too many virtio devices");
		return -1;
	}
	return 0;
}

int virtio_devices_init(struct vm *vm, const struct vmm_config *cfg)
{
	uint64_t base;
	unsigned irq;
	for (unsigned i = 0; i < cfg->ndisks; i++) {
		if (next_slot(vm, &base, &irq) ||
		    virtio_blk_init(&vm->disks[i], cfg->disks[i].none ? NULL : cfg->disks[i].path, cfg->disks[i].ro, &vm->mem, base, irq))
			return -1;
		vm->ndisks++;
		vm->virtio[vm->nvirtio++] = &vm->disks[i].t;
	}
	if (cfg->vsock_uds) {
		if (next_slot(vm, &base, &irq) ||
		    virtio_vsock_init(&vm->vsock, cfg->vsock_uds, &vm->evl, &vm->mem, base, irq))
			return -1;
		vm->has_vsock = true;
		vm->virtio[vm->nvirtio++] = &vm->vsock.t;
	}
	if (next_slot(vm, &base, &irq) || virtio_rng_init(&vm->rng, &vm->mem, base, irq))
		return -1;
	vm->has_rng = true;
	vm->virtio[vm->nvirtio++] = &vm->rng.t;
	return 0;
}

int virtio_devices_attach(struct vm *vm)
{
	for (unsigned i = 0; i < vm->nvirtio; i++)
		if (attach(vm, vm->virtio[i]))
			return -1;
	return 0;
}

int virtio_devices_cmdline(const struct vm *vm, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (unsigned i = 0; i < vm->nvirtio; i++) {
		if (i) {
			if (used + 1 >= len)
				return -1;
			buf[used++] = ' ';
			buf[used] = '\0';
		}
		if (virtio_mmio_cmdline(vm->virtio[i], buf + used, len - used))
			return -1;
		used += strlen(buf + used);
	}
	return 0;
}

/* Append ", what" (or "what" first) to buf when n is not 0. */
static void fault(char *buf, size_t len, size_t *used, const char *name, uint64_t n, const char *what)
{
	if (!n || *used >= len)
		return;
	int k = snprintf(buf + *used, len - *used, "%s%s: %llu %s", *used ? ", " : "", name, (unsigned long long)n, what);
	*used = k < 0 ? len : *used + (size_t)k;
}

static void transport_faults(const struct virtio_mmio *t, const char *name, char *buf, size_t len, size_t *used)
{
	uint64_t bad = 0;
	for (unsigned i = 0; i < t->ops->nqueues; i++)
		bad += t->queues[i].bad_chains;
	fault(buf, len, used, name, atomic_load(&t->ignored_writes), "register writes ignored");
	fault(buf, len, used, name, bad, "bad chains");
	fault(buf, len, used, name, t->resets_needed, "times needing a reset");
}

void virtio_devices_faults(const struct vm *vm, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (unsigned i = 0; i < vm->ndisks; i++) {
		char name[8] = "vd?";
		name[2] = (char)('a' + i);
		transport_faults(&vm->disks[i].t, name, buf, len, &used);
		fault(buf, len, &used, name, vm->disks[i].errors, "requests failed");
	}
	if (vm->has_vsock) {
		transport_faults(&vm->vsock.t, "vsock", buf, len, &used);
		fault(buf, len, &used, "vsock", vm->vsock.stats.bad_packets, "bad packets");
	}
	if (vm->has_rng)
		transport_faults(&vm->rng.t, "rng", buf, len, &used);
}

void virtio_devices_release(struct vm *vm)
{
	for (unsigned i = 0; i < vm->nkicks; i++)
		evl_del(&vm->evl, &vm->kicks[i].h);
	vm->nkicks = 0;
	for (unsigned i = 0; i < vm->ndisks; i++)
		virtio_blk_release(&vm->disks[i]);
	vm->ndisks = 0;
	if (vm->has_vsock)
		virtio_vsock_release(&vm->vsock);
	if (vm->has_rng)
		virtio_rng_release(&vm->rng);
	vm->has_vsock = vm->has_rng = false;
	vm->nvirtio = 0;
}
