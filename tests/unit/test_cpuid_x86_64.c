/* CPUID patching: per-vCPU topology, hypervisor bit, KVM signature and the
 * timing leaf, within the caller's capacity. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <string.h>

#include "cpuid_x86_64.h"

#define HYPERVISOR (1u << 31)
#define HTT        (1u << 28)
#define CAP        16

static const char kvm_sig[12] = { 'K', 'V', 'M', 'K', 'V', 'M', 'K', 'V', 'M', 0, 0, 0 };

static uint32_t sig_word(const char *s, unsigned i)
{
	uint32_t v;
	memcpy(&v, s + 4 * i, 4);
	return v;
}

/* What KVM_GET_SUPPORTED_CPUID looks like, in brief: the entries this module
 * touches, with subleaves flagged as index-significant. Returns the count. */
static unsigned kvm_list(struct kvm_cpuid_entry2 *e, bool with_kvm_leaves)
{
	unsigned n = 0;
	memset(e, 0, CAP * sizeof(*e));
	e[n++] = (struct kvm_cpuid_entry2){ .function = 0, .eax = 0x1f, .ebx = 0x756e6547 };
	e[n++] = (struct kvm_cpuid_entry2){ .function = 1, .eax = 0x000806f8,
					    .ebx = 0xab000800,   /* stale APIC id/count */
					    .ecx = 0x7ffafbff, .edx = 0xbfebfbff };
	e[n++] = (struct kvm_cpuid_entry2){ .function = 0xb, .index = 0,
					    .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX,
					    .eax = 1, .ebx = 1, .ecx = 0x100, .edx = 0x55 };
	e[n++] = (struct kvm_cpuid_entry2){ .function = 0xb, .index = 1,
					    .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX,
					    .eax = 7, .ebx = 1, .ecx = 0x201, .edx = 0x55 };
	e[n++] = (struct kvm_cpuid_entry2){ .function = 0x1f, .index = 0,
					    .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX, .edx = 0x66 };
	e[n++] = (struct kvm_cpuid_entry2){ .function = 0x80000000, .eax = 0x80000008 };
	if (with_kvm_leaves) {
		e[n++] = (struct kvm_cpuid_entry2){ .function = KVM_CPUID_SIGNATURE_LEAF,
						    .eax = KVM_CPUID_FEATURES_LEAF,
						    .ebx = sig_word(kvm_sig, 0),
						    .ecx = sig_word(kvm_sig, 1),
						    .edx = sig_word(kvm_sig, 2) };
		e[n++] = (struct kvm_cpuid_entry2){ .function = KVM_CPUID_FEATURES_LEAF,
						    .eax = 0x01007efb };
	}
	return n;
}

static void assert_kvm_signature(const struct kvm_cpuid_entry2 *s, uint32_t max_leaf)
{
	assert_non_null(s);
	assert_int_equal(s->eax, max_leaf);
	assert_int_equal(s->ebx, sig_word(kvm_sig, 0));
	assert_int_equal(s->ecx, sig_word(kvm_sig, 1));
	assert_int_equal(s->edx, sig_word(kvm_sig, 2));
}

static void leaf1_apic_id(void **state)
{
	(void)state;
	struct kvm_cpuid_entry2 e[CAP];
	for (unsigned idx = 0; idx < 4; idx++) {
		unsigned n = kvm_list(e, true);
		cpuid_patch(e, n, CAP, idx, 4, 0, false);
		struct kvm_cpuid_entry2 *l1 = cpuid_find(e, n, 1, 0);
		assert_non_null(l1);
		assert_int_equal(l1->ebx >> 24, idx);
		assert_int_equal((l1->ebx >> 16) & 0xff, 4);
		assert_int_equal(l1->ebx & 0xffff, 0x0800);    /* CLFLUSH size etc. kept */
		assert_true(l1->ecx & HYPERVISOR);
		assert_int_equal(l1->ecx & ~HYPERVISOR, 0x7ffafbff & ~HYPERVISOR);
		assert_true(l1->edx & HTT);
		assert_int_equal(l1->eax, 0x000806f8);
	}
	/* the last of 32 */
	unsigned n = kvm_list(e, true);
	cpuid_patch(e, n, CAP, 31, 32, 0, false);
	assert_int_equal(cpuid_find(e, n, 1, 0)->ebx >> 24, 31);
	assert_int_equal((cpuid_find(e, n, 1, 0)->ebx >> 16) & 0xff, 32);
}

/* With KVM's TSC-deadline emulation, leaf 1 advertises it (Linux then
 * skips its LAPIC timer calibration); without, KVM's own bit is left. */
static void leaf1_tsc_deadline(void **state)
{
	(void)state;
	struct kvm_cpuid_entry2 e[CAP];
	unsigned n = kvm_list(e, true);
	struct kvm_cpuid_entry2 *l1 = cpuid_find(e, n, 1, 0);
	l1->ecx &= ~(1u << 24);
	cpuid_patch(e, n, CAP, 0, 1, 0, false);
	assert_false(l1->ecx & (1u << 24));
	cpuid_patch(e, n, CAP, 0, 1, 0, true);
	assert_true(l1->ecx & (1u << 24));
	assert_true(l1->ecx & HYPERVISOR);
}

static void leaf1_single_cpu_clears_htt(void **state)
{
	(void)state;
	struct kvm_cpuid_entry2 e[CAP];
	unsigned n = kvm_list(e, true);
	cpuid_patch(e, n, CAP, 0, 1, 0, false);
	struct kvm_cpuid_entry2 *l1 = cpuid_find(e, n, 1, 0);
	assert_int_equal(l1->ebx >> 24, 0);
	assert_int_equal((l1->ebx >> 16) & 0xff, 1);
	assert_false(l1->edx & HTT);
	assert_true(l1->ecx & HYPERVISOR);
}

static void leaf_b_edx(void **state)
{
	(void)state;
	struct kvm_cpuid_entry2 e[CAP];
	unsigned n = kvm_list(e, true);
	cpuid_patch(e, n, CAP, 7, 8, 0, false);
	struct kvm_cpuid_entry2 *b0 = cpuid_find(e, n, 0xb, 0);
	struct kvm_cpuid_entry2 *b1 = cpuid_find(e, n, 0xb, 1);
	struct kvm_cpuid_entry2 *x = cpuid_find(e, n, 0x1f, 0);
	assert_non_null(b0);
	assert_non_null(b1);
	assert_ptr_not_equal(b0, b1);
	assert_int_equal(b0->edx, 7);
	assert_int_equal(b1->edx, 7);
	assert_int_equal(x->edx, 7);
	/* the other registers are KVM's */
	assert_int_equal(b0->ecx, 0x100);
	assert_int_equal(b1->ecx, 0x201);
	/* unrelated leaves untouched */
	assert_int_equal(cpuid_find(e, n, 0, 0)->eax, 0x1f);
	assert_int_equal(cpuid_find(e, n, 0x80000000, 0)->eax, 0x80000008);
}

static void find_index_semantics(void **state)
{
	(void)state;
	struct kvm_cpuid_entry2 e[CAP];
	unsigned n = kvm_list(e, true);
	/* leaf 1 has no significant index: any index finds it */
	assert_non_null(cpuid_find(e, n, 1, 0));
	assert_ptr_equal(cpuid_find(e, n, 1, 5), cpuid_find(e, n, 1, 0));
	/* leaf 0xb does: only existing subleaves */
	assert_null(cpuid_find(e, n, 0xb, 2));
	assert_null(cpuid_find(e, n, 0x1234, 0));
	assert_null(cpuid_find(e, 0, 1, 0));
}

static void kvm_signature_present_max_raised(void **state)
{
	(void)state;
	struct kvm_cpuid_entry2 e[CAP];
	unsigned n = kvm_list(e, true);
	unsigned m = cpuid_patch(e, n, CAP, 0, 1, 2400000, false);
	assert_int_equal(m, n + 1);   /* only the timing leaf is new */
	assert_kvm_signature(cpuid_find(e, m, KVM_CPUID_SIGNATURE_LEAF, 0), CPUID_TIMING_LEAF);
	/* KVM's feature bits are kept */
	assert_int_equal(cpuid_find(e, m, KVM_CPUID_FEATURES_LEAF, 0)->eax, 0x01007efb);
	struct kvm_cpuid_entry2 *t = cpuid_find(e, m, CPUID_TIMING_LEAF, 0);
	assert_non_null(t);
	assert_int_equal(t->eax, 2400000);
	assert_int_equal(t->ebx, 1000000);
	/* a second patch (e.g. the next vCPU's copy) adds nothing more */
	assert_int_equal(cpuid_patch(e, m, CAP, 0, 1, 2400000, false), m);
	/* a higher max leaf is not lowered */
	cpuid_find(e, m, KVM_CPUID_SIGNATURE_LEAF, 0)->eax = 0x40000020;
	cpuid_patch(e, m, CAP, 0, 1, 2400000, false);
	assert_int_equal(cpuid_find(e, m, KVM_CPUID_SIGNATURE_LEAF, 0)->eax, 0x40000020);
}

static void kvm_signature_present_no_tsc(void **state)
{
	(void)state;
	struct kvm_cpuid_entry2 e[CAP];
	unsigned n = kvm_list(e, true);
	unsigned m = cpuid_patch(e, n, CAP, 0, 1, 0, false);
	assert_int_equal(m, n);
	assert_kvm_signature(cpuid_find(e, m, KVM_CPUID_SIGNATURE_LEAF, 0), KVM_CPUID_FEATURES_LEAF);
	assert_null(cpuid_find(e, m, CPUID_TIMING_LEAF, 0));
}

static void kvm_signature_missing_added(void **state)
{
	(void)state;
	struct kvm_cpuid_entry2 e[CAP];
	unsigned n = kvm_list(e, false);
	unsigned m = cpuid_patch(e, n, CAP, 0, 1, 1000000, false);
	assert_int_equal(m, n + 3);
	assert_kvm_signature(cpuid_find(e, m, KVM_CPUID_SIGNATURE_LEAF, 0), CPUID_TIMING_LEAF);
	assert_non_null(cpuid_find(e, m, KVM_CPUID_FEATURES_LEAF, 0));
	assert_int_equal(cpuid_find(e, m, CPUID_TIMING_LEAF, 0)->eax, 1000000);

	n = kvm_list(e, false);
	m = cpuid_patch(e, n, CAP, 0, 1, 0, false);
	assert_int_equal(m, n + 2);
	assert_kvm_signature(cpuid_find(e, m, KVM_CPUID_SIGNATURE_LEAF, 0), KVM_CPUID_FEATURES_LEAF);
	assert_null(cpuid_find(e, m, CPUID_TIMING_LEAF, 0));
}

/* A foreign signature in 0x40000000 is replaced, not duplicated. */
static void foreign_signature_replaced(void **state)
{
	(void)state;
	struct kvm_cpuid_entry2 e[CAP];
	unsigned n = kvm_list(e, false);
	const char hv[12] = { 'M', 'i', 'c', 'r', 'o', 's', 'o', 'f', 't', ' ', 'H', 'v' };
	e[n++] = (struct kvm_cpuid_entry2){ .function = KVM_CPUID_SIGNATURE_LEAF, .eax = 0x4000000a,
					    .ebx = sig_word(hv, 0), .ecx = sig_word(hv, 1),
					    .edx = sig_word(hv, 2) };
	unsigned m = cpuid_patch(e, n, CAP, 0, 1, 0, false);
	assert_int_equal(m, n + 1);   /* the features leaf */
	assert_kvm_signature(cpuid_find(e, m, KVM_CPUID_SIGNATURE_LEAF, 0), KVM_CPUID_FEATURES_LEAF);
	unsigned sigs = 0;
	for (unsigned i = 0; i < m; i++)
		sigs += e[i].function == KVM_CPUID_SIGNATURE_LEAF;
	assert_int_equal(sigs, 1);
}

static void capacity_respected(void **state)
{
	(void)state;
	struct kvm_cpuid_entry2 e[CAP + 4], guard;
	memset(&guard, 0xee, sizeof(guard));
	for (unsigned cap_extra = 0; cap_extra <= CPUID_EXTRA_ENTRIES; cap_extra++) {
		unsigned n = kvm_list(e, false);
		for (unsigned i = n; i < CAP + 4; i++)
			e[i] = guard;
		unsigned m = cpuid_patch(e, n, n + cap_extra, 0, 1, 3000000, false);
		assert_int_equal(m, n + cap_extra);
		for (unsigned i = m; i < CAP + 4; i++)
			assert_memory_equal(&e[i], &guard, sizeof(guard));
		/* what fits comes in order: signature, features, timing */
		if (cap_extra >= 1)
			assert_kvm_signature(cpuid_find(e, m, KVM_CPUID_SIGNATURE_LEAF, 0),
					     CPUID_TIMING_LEAF);
		if (cap_extra >= 2)
			assert_non_null(cpuid_find(e, m, KVM_CPUID_FEATURES_LEAF, 0));
		if (cap_extra >= 3)
			assert_non_null(cpuid_find(e, m, CPUID_TIMING_LEAF, 0));
	}
	assert_true(CPUID_EXTRA_ENTRIES >= 3);
}

static void empty_list(void **state)
{
	(void)state;
	struct kvm_cpuid_entry2 e[CPUID_EXTRA_ENTRIES];
	unsigned m = cpuid_patch(e, 0, CPUID_EXTRA_ENTRIES, 0, 1, 100, false);
	assert_int_equal(m, 3);
	assert_int_equal(cpuid_patch(e, 0, 0, 0, 1, 100, false), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(leaf1_apic_id),
		cmocka_unit_test(leaf1_single_cpu_clears_htt),
		cmocka_unit_test(leaf1_tsc_deadline),
		cmocka_unit_test(leaf_b_edx),
		cmocka_unit_test(find_index_semantics),
		cmocka_unit_test(kvm_signature_present_max_raised),
		cmocka_unit_test(kvm_signature_present_no_tsc),
		cmocka_unit_test(kvm_signature_missing_added),
		cmocka_unit_test(foreign_signature_replaced),
		cmocka_unit_test(capacity_respected),
		cmocka_unit_test(empty_list),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
