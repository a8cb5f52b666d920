/* CPUID as each vCPU sees it: what KVM supports, with per-vCPU topology,
 * the hypervisor bit, the KVM signature and the TSC frequency filled in. */
#ifndef VMM_CPUID_X86_64_H
#define VMM_CPUID_X86_64_H

#include <linux/kvm.h>
#include <stdbool.h>
#include <stdint.h>

#define KVM_CPUID_SIGNATURE_LEAF 0x40000000u
#define KVM_CPUID_FEATURES_LEAF  0x40000001u
/* The hypervisor timing leaf (VMware's convention, also read by Linux):
 * EAX = TSC kHz, EBX = local APIC bus kHz. */
#define CPUID_TIMING_LEAF        0x40000010u

/* Entries cpuid_patch may add beyond KVM's list. */
#define CPUID_EXTRA_ENTRIES 3

/* Patch n entries of e (with room for cap) for vCPU index of ncpus, on a
 * host TSC of tsc_khz (0: unknown, leaf left out); tsc_deadline: KVM
 * emulates the TSC-deadline timer (KVM_CAP_TSC_DEADLINE_TIMER), so leaf 1
 * advertises it. Returns the new count. */
unsigned cpuid_patch(struct kvm_cpuid_entry2 *e, unsigned n, unsigned cap, unsigned index,
		     unsigned ncpus, uint32_t tsc_khz, bool tsc_deadline);

/* The entry for function/index in e[0..n), or NULL. */
struct kvm_cpuid_entry2 *cpuid_find(struct kvm_cpuid_entry2 *e, unsigned n, uint32_t function,
				    uint32_t index);

#endif
