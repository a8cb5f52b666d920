/* What each architecture supplies to the arch-neutral VMM code. */
#ifndef VMM_KVM_ARCH_H
#define VMM_KVM_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvm.h"
#include "snapshot.h"
#include "vm.h"

/* Arch capabilities checked by kvm_open; terminated by a {0, NULL} entry. */
extern const struct kvm_cap_req kvm_arch_caps[];

/* Where guest RAM lies: RAM that would fall in [gap_start, gap_end) is
 * placed at gap_end (guest_mem_init). x86_64: the MMIO gap below 4 GiB;
 * aarch64: devices below 2 GiB, so all RAM starts there. */
extern const uint64_t kvm_arch_ram_gap_start, kvm_arch_ram_gap_end;

/* What a booted guest's host mapping is aligned to (0: a page), so that
 * KVM can map the guest's RAM in 2 MiB blocks (guest_mem_init_aligned). */
extern const uint64_t kvm_arch_ram_align;

/* Whether the guest learns its virtio devices from kernel parameters
 * (x86_64: virtio_mmio.device=) rather than from a device tree (aarch64,
 * where parameters would add each device a second time). */
extern const bool kvm_arch_virtio_on_cmdline;

/* Load the kernel image (len bytes at img) into guest RAM and write what
 * the guest finds at its first instruction that needs no KVM (x86_64: the
 * boot tables with cmdline, for ncpus vCPUs). *entry gets the entry point.
 * Returns 0, or -1 after one error line. */
int kvm_arch_load_kernel(struct vm *vm, const uint8_t *img, size_t len, const char *cmdline, unsigned ncpus,
			 uint64_t *entry);

/* Once the VM, its devices and vCPUs exist: write what depends on KVM's
 * choices (aarch64: the device tree, which names the GIC version the host
 * gave). Returns 0, or -1 after one error line. */
int kvm_arch_boot_finish(struct vm *vm, const char *cmdline);

/* VM-wide arch setup after KVM_CREATE_VM and before any vCPU: on x86, the
 * TSS area, the in-kernel irqchip and the PIT; on aarch64, the GIC
 * (created and placed, initialised once the vCPUs are). Returns 0 or -1. */
int kvm_arch_vm_init(struct vm *vm);

/* Per-vCPU arch setup for every vCPU (x86_64: CPUID, MSRs, local APIC;
 * aarch64: KVM_ARM_VCPU_INIT, then the GIC's initialisation). Returns 0 or -1. */
int kvm_arch_vcpus_init(struct vm *vm);

/* Put the boot vCPU at the kernel's entry point with the boot protocol's
 * register state. Returns 0 or -1. */
int kvm_arch_boot_vcpu(struct vm *vm, uint64_t entry);

/* Report whether the host runs guest kernel code in KVM's instruction
 * emulator (*emulated, as on x86 PVM hosts) rather than in hardware: x86
 * times a short ring-0 loop on the boot vCPU (aarch64 has no such mode); vm->probe_cycles_per_loop gets the fastest
 * of up to a few rounds, as preemption only slows a round.
 * Leaves the probe page zeroed. Returns 0, or -1 after one error line when
 * the probe itself could not run. */
int kvm_arch_probe_emulation(struct vm *vm, bool *emulated);

/* Give a restored guest back the page the probe ran in (it zeroes it). Returns 0 or -1. */
int kvm_arch_probe_revert(struct vm *vm);

/* Register the arch's own devices on the buses: the UART (and on x86 the
 * i8042 reset line). Returns 0 or -1. */
int kvm_arch_devices_init(struct vm *vm);

/* Where virtio-mmio device number i (0-based) lives: its register window
 * and its interrupt line. Returns 0, or -1 when i is past the last slot. */
int kvm_arch_virtio_slot(unsigned i, uint64_t *base, unsigned *irq);

/* Append every vCPU's and the VM's arch state to w; the vCPU threads have
 * stopped (and were quiesced). Returns 0, or -1 with a reason in err. */
int kvm_arch_snapshot_save(struct vm *vm, struct snap_writer *w, char *err, size_t errlen);

/* Every KVM request kvm_arch_snapshot_save makes, all of them reads
 * (the snapshotting main thread's seccomp filter allows these). */
extern const unsigned long kvm_arch_snapshot_reads[];
extern const size_t kvm_arch_nsnapshot_reads;

/* NULL where this arch's VMs can be snapshotted, else why not, for the
 * one-line refusal of --snapshot-out and --restore. */
extern const char *const kvm_arch_no_snapshots;

/* Put the saved arch state back into a VM whose vCPUs were created and
 * initialised as for a boot. Returns 0, or -1 with a reason in err. */
int kvm_arch_snapshot_restore(struct vm *vm, const struct snap_view *v, char *err, size_t errlen);

/* The guest program counter of v, for a fault's message (on v's own
 * thread). Returns 0, or -1 when KVM would not say. */
int kvm_arch_vcpu_pc(struct vcpu *v, uint64_t *pc);
/* What the arch calls that register ("rip", "pc"), for the same message,
 * and the one vCPU ioctl that reads it (the vCPU seccomp filter allows it). */
extern const char kvm_arch_pc_name[];
extern const unsigned long kvm_arch_pc_ioctl;

/* On a vCPU thread stopping for a snapshot: finish the exit it was in,
 * so that its saved state is between two instructions. */
void kvm_arch_vcpu_quiesce(struct vcpu *v);

/* A hash of what the host's CPU offers guests (a snapshot is refused on
 * another). Needs the vCPUs created. */
uint64_t kvm_arch_host_cpu(struct vm *vm);

#endif
