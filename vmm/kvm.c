#include "kvm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kvm_arch.h"
#include "log.h"

#define KVM_DEVICE "/dev/kvm"
/* The only stable KVM API version there has ever been. */
#define KVM_API_EXPECTED 12

static const struct kvm_cap_req generic_caps[] = {
	{ KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY" },
	{ KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP" },
	{ KVM_CAP_IRQFD, "KVM_CAP_IRQFD" },
	{ KVM_CAP_IOEVENTFD, "KVM_CAP_IOEVENTFD" },
	{ KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT" },
	{ 0, NULL },
};

/* Append the names of the capabilities in reqs that KVM lacks to buf. */
static void missing_caps(int fd, const struct kvm_cap_req *reqs, char *buf, size_t len)
{
	for (; reqs->name; reqs++) {
		if (ioctl(fd, KVM_CHECK_EXTENSION, reqs->cap) > 0)
			continue;
		size_t used = strlen(buf);
		snprintf(buf + used, len - used, "%s%s", used ? ", " : "", reqs->name);
	}
}

int kvm_open(struct vm *vm, int kvm_fd)
{
	vm->kvm_fd = kvm_fd >= 0 ? kvm_fd : open(KVM_DEVICE, O_RDWR | O_CLOEXEC);
	if (vm->kvm_fd < 0) {
		vmm_perr("%s", KVM_DEVICE);
		return -1;
	}
	if (kvm_fd >= 0)
		fcntl(kvm_fd, F_SETFD, FD_CLOEXEC);
	int api = ioctl(vm->kvm_fd, KVM_GET_API_VERSION, 0);
	if (api != KVM_API_EXPECTED) {
		vmm_err("KVM_GET_API_VERSION: %d, expected %d", api, KVM_API_EXPECTED);
		return -1;
	}
	char missing[512] = "";
	missing_caps(vm->kvm_fd, generic_caps, missing, sizeof(missing));
	missing_caps(vm->kvm_fd, kvm_arch_caps, missing, sizeof(missing));
	if (missing[0]) {
		vmm_err("KVM lacks required capabilities: %s", missing);
		return -1;
	}
	int size = ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (size < (int)sizeof(struct kvm_run)) {
		vmm_perr("KVM_GET_VCPU_MMAP_SIZE");
		return -1;
	}
	vm->run_size = (size_t)size;
	return 0;
}

int kvm_create_vm(struct vm *vm)
{
	do
		vm->vm_fd = ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
	while (vm->vm_fd < 0 && errno == EINTR);
	if (vm->vm_fd < 0) {
		vmm_perr("KVM_CREATE_VM");
		return -1;
	}
	return 0;
}

int kvm_map_memory(struct vm *vm)
{
	for (unsigned i = 0; i < vm->mem.nregions; i++) {
		const struct guest_region *r = &vm->mem.regions[i];
		struct kvm_userspace_memory_region slot = {
			.slot = i,
			.guest_phys_addr = r->gpa,
			.memory_size = r->size,
			.userspace_addr = (uintptr_t)r->hva,
		};
		if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &slot) < 0) {
			vmm_perr("KVM_SET_USER_MEMORY_REGION (slot %u)", i);
			return -1;
		}
	}
	return 0;
}

int kvm_create_vcpu(struct vm *vm, unsigned index)
{
	struct vcpu *v = &vm->vcpus[index];
	v->vm = vm;
	v->index = index;
	v->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, (unsigned long)index);
	if (v->fd < 0) {
		vmm_perr("KVM_CREATE_VCPU %u", index);
		return -1;
	}
	void *run = mmap(NULL, vm->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
	if (run == MAP_FAILED) {
		vmm_perr("mmap of vCPU %u kvm_run", index);
		return -1;
	}
	v->run = run;
	return 0;
}

int kvm_ioeventfd(struct vm *vm, uint64_t addr, uint32_t datamatch, int fd)
{
	struct kvm_ioeventfd io = { .datamatch = datamatch, .addr = addr, .len = 4, .fd = fd,
				    .flags = KVM_IOEVENTFD_FLAG_DATAMATCH };
	if (ioctl(vm->vm_fd, KVM_IOEVENTFD, &io) < 0) {
		vmm_perr("KVM_IOEVENTFD at 0x%llx", (unsigned long long)addr);
		return -1;
	}
	return 0;
}

int kvm_irqfd(struct vm *vm, int fd, unsigned gsi)
{
	struct kvm_irqfd irq = { .fd = (uint32_t)fd, .gsi = gsi };
	if (ioctl(vm->vm_fd, KVM_IRQFD, &irq) < 0) {
		vmm_perr("KVM_IRQFD for IRQ %u", gsi);
		return -1;
	}
	return 0;
}

void kvm_release(struct vm *vm)
{
	for (unsigned i = 0; i < VM_MAX_VCPUS; i++) {
		struct vcpu *v = &vm->vcpus[i];
		if (v->run)
			munmap(v->run, vm->run_size);
		if (v->fd >= 0)
			close(v->fd);
		v->run = NULL;
		v->fd = -1;
	}
	if (vm->irqchip_fd >= 0)
		close(vm->irqchip_fd);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->kvm_fd >= 0)
		close(vm->kvm_fd);
	vm->vm_fd = vm->kvm_fd = vm->irqchip_fd = -1;
}
