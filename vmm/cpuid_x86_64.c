#include "cpuid_x86_64.h"

#include <stdbool.h>
#include <string.h>

#define CPUID_1_ECX_TSC_DEADLINE (1u << 24)
#define CPUID_1_ECX_HYPERVISOR (1u << 31)
#define CPUID_1_EDX_HTT        (1u << 28)
/* KVM's local APIC timer runs on a 1 GHz bus. */
#define KVM_APIC_BUS_KHZ       1000000u

struct kvm_cpuid_entry2 *cpuid_find(struct kvm_cpuid_entry2 *e, unsigned n, uint32_t function,
				    uint32_t index)
{
	for (unsigned i = 0; i < n; i++) {
		bool indexed = e[i].flags & KVM_CPUID_FLAG_SIGNIFCANT_INDEX;
		if (e[i].function == function && (!indexed || e[i].index == index))
			return &e[i];
	}
	return NULL;
}

static unsigned add(struct kvm_cpuid_entry2 *e, unsigned n, unsigned cap, uint32_t function,
		    uint32_t eax, uint32_t ebx, uint32_t ecx, uint32_t edx)
{
	struct kvm_cpuid_entry2 *x = cpuid_find(e, n, function, 0);
	if (!x) {
		if (n == cap)
			return n;
		x = &e[n++];
	}
	*x = (struct kvm_cpuid_entry2){ .function = function, .eax = eax, .ebx = ebx, .ecx = ecx, .edx = edx };
	return n;
}

unsigned cpuid_patch(struct kvm_cpuid_entry2 *e, unsigned n, unsigned cap, unsigned index,
		     unsigned ncpus, uint32_t tsc_khz, bool tsc_deadline)
{
	for (unsigned i = 0; i < n; i++) {
		struct kvm_cpuid_entry2 *x = &e[i];
		switch (x->function) {
		case 1:
			/* Initial APIC id, logical CPU count, running under a hypervisor. */
			x->ebx = (x->ebx & 0x0000ffffu) | (index << 24) | ((ncpus & 0xff) << 16);
			x->ecx |= CPUID_1_ECX_HYPERVISOR;
			/* KVM emulates the TSC-deadline timer but leaves the bit
			 * to us (as QEMU and Firecracker set it). With it, Linux
			 * skips calibrating the LAPIC timer, a busy wait for
			 * timer ticks that costs boot time and that a nested
			 * emulated host can starve forever (issue 11). */
			if (tsc_deadline)
				x->ecx |= CPUID_1_ECX_TSC_DEADLINE;
			if (ncpus > 1)
				x->edx |= CPUID_1_EDX_HTT;
			else
				x->edx &= ~CPUID_1_EDX_HTT;
			break;
		case 0xb:
		case 0x1f:
			/* Extended topology: x2APIC id of this vCPU. */
			x->edx = index;
			break;
		default:
			break;
		}
	}
	/* The KVM signature lets Linux find kvmclock and the other PV features. */
	uint32_t sig[3];
	memcpy(sig, "KVMKVMKVM\0\0\0", 12);
	struct kvm_cpuid_entry2 *s = cpuid_find(e, n, KVM_CPUID_SIGNATURE_LEAF, 0);
	uint32_t max_leaf = tsc_khz ? CPUID_TIMING_LEAF : KVM_CPUID_FEATURES_LEAF;
	if (!s || s->ebx != sig[0] || s->ecx != sig[1] || s->edx != sig[2])
		n = add(e, n, cap, KVM_CPUID_SIGNATURE_LEAF, max_leaf, sig[0], sig[1], sig[2]);
	else if (s->eax < max_leaf)
		s->eax = max_leaf;
	if (!cpuid_find(e, n, KVM_CPUID_FEATURES_LEAF, 0))
		n = add(e, n, cap, KVM_CPUID_FEATURES_LEAF, 0, 0, 0, 0);
	if (tsc_khz)
		n = add(e, n, cap, CPUID_TIMING_LEAF, tsc_khz, KVM_APIC_BUS_KHZ, 0, 0);
	return n;
}
