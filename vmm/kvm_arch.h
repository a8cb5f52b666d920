/* What each architecture supplies to the arch-neutral VMM code. */
#ifndef VMM_KVM_ARCH_H
#define VMM_KVM_ARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "kvm.h"
#include "snapshot.h"
#include "vm.h"

/* Arch capabilities checked by kvm_open; terminated by a {0, NULL} entry. */
extern const struct kvm_cap_req kvm_arch_caps[];

/* VM-wide arch setup after KVM_CREATE_VM and before any vCPU: on x86, the
 * TSS area, the in-kernel irqchip and the PIT. Returns 0 or -1. */
int kvm_arch_vm_init(struct vm *vm);

/* Per-vCPU arch setup (CPUID, MSRs, local APIC) for every vCPU. Returns 0 or -1. */
int kvm_arch_vcpus_init(struct vm *vm);

/* Put the boot vCPU at the kernel's entry point with the boot protocol's
 * register state. Returns 0 or -1. */
int kvm_arch_boot_vcpu(struct vm *vm, uint64_t entry);

/* Time a short ring-0 loop on the boot vCPU and report whether the host runs
 * guest kernel code in KVM's instruction emulator (*emulated, as on PVM
 * hosts) rather than in hardware; vm->probe_cycles_per_loop gets the fastest
 * of up to a few rounds, as preemption only slows a round.
 * Leaves the probe page zeroed. Returns 0, or -1 after one error line when
 * the probe itself could not run. */
int kvm_arch_probe_emulation(struct vm *vm, bool *emulated);

/* Give a restored guest back the page the probe ran in (it zeroes it). Returns 0 or -1. */
int kvm_arch_probe_revert(struct vm *vm);

/* Register the arch's legacy devices (UART, reset line) on the buses. Returns 0 or -1. */
int kvm_arch_devices_init(struct vm *vm);

/* Where virtio-mmio device number i (0-based) lives: its register window
 * and its interrupt line. Returns 0, or -1 when i is past the last slot. */
int kvm_arch_virtio_slot(unsigned i, uint64_t *base, unsigned *irq);

/* Append every vCPU's and the VM's arch state to w; the vCPU threads have
 * stopped (and were quiesced). Returns 0, or -1 with a reason in err. */
int kvm_arch_snapshot_save(struct vm *vm, struct snap_writer *w, char *err, size_t errlen);

/* Put the saved arch state back into a VM whose vCPUs were created and
 * initialised as for a boot. Returns 0, or -1 with a reason in err. */
int kvm_arch_snapshot_restore(struct vm *vm, const struct snap_view *v, char *err, size_t errlen);

/* On a vCPU thread stopping for a snapshot: finish the exit it was in,
 * so that its saved state is between two instructions. */
void kvm_arch_vcpu_quiesce(struct vcpu *v);

/* A hash of what the host's CPU offers guests (a snapshot is refused on
 * another). Needs the vCPUs created. */
uint64_t kvm_arch_host_cpu(struct vm *vm);

#endif
