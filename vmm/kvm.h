/* The arch-neutral half of talking to /dev/kvm: open and check it, create
 * the VM, register guest memory, create vCPUs. Arch code lives in
 * kvm_<arch>.c behind kvm_arch.h. */
#ifndef VMM_KVM_H
#define VMM_KVM_H

#include "vm.h"

/* A capability the VMM cannot run without, with its name for the error. */
struct kvm_cap_req {
	int cap;
	const char *name;
};

/* Open /dev/kvm (or take the already open kvm_fd, >= 0, that a jail
 * passed in), check the API version and every required capability
 * (generic and arch), and learn the kvm_run size. Names all missing
 * capabilities in one error line. Returns 0 or -1. */
int kvm_open(struct vm *vm, int kvm_fd);

/* KVM_CREATE_VM. Returns 0 or -1 after one error line. */
int kvm_create_vm(struct vm *vm);

/* Register each guest RAM region as a memory slot. Returns 0 or -1. */
int kvm_map_memory(struct vm *vm);

/* Create vCPU index and map its kvm_run. Returns 0 or -1. */
int kvm_create_vcpu(struct vm *vm, unsigned index);

/* Have KVM signal fd on 4-byte guest writes of datamatch to MMIO addr
 * (a queue notification) instead of exiting to a vCPU thread. Returns 0 or
 * -1 after one error line. */
int kvm_ioeventfd(struct vm *vm, uint64_t addr, uint32_t datamatch, int fd);

/* Have KVM raise interrupt line gsi whenever fd is written. Returns 0 or -1
 * after one error line. */
int kvm_irqfd(struct vm *vm, int fd, unsigned gsi);

/* Unmap and close every vCPU, then the VM and /dev/kvm fds. */
void kvm_release(struct vm *vm);

#endif
