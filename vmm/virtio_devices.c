/* The VM's virtio devices (virtio_devices.h): the kinds' devices in slot
 * order, wired into KVM, with their kernel parameters and their counts. */
#include "virtio_devices.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <linux/virtio_mmio.h>

#include "device.h"
#include "kvm.h"
#include "kvm_arch.h"
#include "log.h"

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
	for (const struct vmm_device_kind *const *k = vmm_device_kinds; *k; k++) {
		unsigned n = (*k)->count(cfg);
		for (unsigned i = 0; i < n; i++) {
			uint64_t base;
			unsigned irq;
			struct virtio_mmio *t;
			if (vm->nvirtio == VM_MAX_VIRTIO || next_slot(vm, &base, &irq) ||
			    (*k)->create(vm, cfg, i, base, irq, &t))
				return -1;
			vm->virtio[vm->nvirtio++] = t;
		}
	}
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

void virtio_devices_faults(const struct vm *vm, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (const struct vmm_device_kind *const *k = vmm_device_kinds; *k; k++)
		(*k)->faults(vm, buf, len, &used);
}

void virtio_devices_restored(struct vm *vm, const struct vmm_config *cfg, const struct snap_meta *meta)
{
	for (const struct vmm_device_kind *const *k = vmm_device_kinds; *k; k++)
		if ((*k)->restored)
			(*k)->restored(vm, cfg, meta);
}

void virtio_devices_release(struct vm *vm)
{
	for (unsigned i = 0; i < vm->nkicks; i++)
		evl_del(&vm->evl, &vm->kicks[i].h);
	vm->nkicks = 0;
	for (const struct vmm_device_kind *const *k = vmm_device_kinds; *k; k++)
		(*k)->release(vm);
	vm->nvirtio = 0;
}
