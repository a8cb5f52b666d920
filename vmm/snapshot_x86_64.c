/* x86_64 state in a snapshot: each vCPU's registers, special registers,
 * XSAVE area, XCRs, debug registers, local APIC, pending events, MP state
 * and every MSR KVM lists as saveable; the VM's PIC pair, IOAPIC, PIT and
 * kvmclock. The structures are KVM's UAPI ones, written as they are: a
 * snapshot is only ever restored by the same vmm build on the same host. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "kvm_arch.h"
#include "snapshot.h"

enum {
	TAG_REGS = SNAP_TAG_ARCH,
	TAG_SREGS,
	TAG_XSAVE,
	TAG_XCRS,
	TAG_DEBUGREGS,
	TAG_LAPIC,
	TAG_EVENTS,
	TAG_MP_STATE,
	TAG_MSRS,
	TAG_IRQCHIP,
	TAG_PIT,
	TAG_CLOCK,
};

#define XSAVE_MIN   sizeof(struct kvm_xsave)
#define XSAVE_MAX   (64u * 1024)
#define MSRS_MAX    1024u
#define NIRQCHIPS   3u   /* PIC master, PIC slave, IOAPIC */

const uint32_t snap_arch = SNAP_ARCH_X86_64;
const char *const kvm_arch_no_snapshots = NULL;

const unsigned long kvm_arch_snapshot_reads[] = {
	KVM_GET_REGS, KVM_GET_SREGS, KVM_GET_XSAVE, KVM_GET_XSAVE2, KVM_GET_XCRS, KVM_GET_DEBUGREGS,
	KVM_GET_LAPIC, KVM_GET_VCPU_EVENTS, KVM_GET_MP_STATE, KVM_GET_MSRS, KVM_GET_MSR_INDEX_LIST,
	KVM_GET_IRQCHIP, KVM_GET_PIT2, KVM_GET_CLOCK, KVM_CHECK_EXTENSION,
};
const size_t kvm_arch_nsnapshot_reads = sizeof(kvm_arch_snapshot_reads) / sizeof(kvm_arch_snapshot_reads[0]);

const struct snap_tag_desc snap_arch_tags[] = {
	{ TAG_REGS, SNAP_MAX_INDEX, sizeof(struct kvm_regs), 0, "regs" },
	{ TAG_SREGS, SNAP_MAX_INDEX, sizeof(struct kvm_sregs), 0, "sregs" },
	/* 4 KiB, or KVM_CAP_XSAVE2's size where the host has larger state. */
	{ TAG_XSAVE, SNAP_MAX_INDEX, 4, XSAVE_MAX, "xsave" },
	{ TAG_XCRS, SNAP_MAX_INDEX, sizeof(struct kvm_xcrs), 0, "xcrs" },
	{ TAG_DEBUGREGS, SNAP_MAX_INDEX, sizeof(struct kvm_debugregs), 0, "debugregs" },
	{ TAG_LAPIC, SNAP_MAX_INDEX, sizeof(struct kvm_lapic_state), 0, "lapic" },
	{ TAG_EVENTS, SNAP_MAX_INDEX, sizeof(struct kvm_vcpu_events), 0, "vcpu-events" },
	{ TAG_MP_STATE, SNAP_MAX_INDEX, sizeof(struct kvm_mp_state), 0, "mp-state" },
	{ TAG_MSRS, SNAP_MAX_INDEX, sizeof(struct kvm_msr_entry), MSRS_MAX * sizeof(struct kvm_msr_entry), "msrs" },
	{ TAG_IRQCHIP, NIRQCHIPS, sizeof(struct kvm_irqchip), 0, "irqchip" },
	{ TAG_PIT, 1, sizeof(struct kvm_pit_state2), 0, "pit" },
	{ TAG_CLOCK, 1, sizeof(struct kvm_clock_data), 0, "kvmclock" },
	{ 0, 0, 0, 0, NULL },
};
_Static_assert((int)TAG_CLOCK < (int)SNAP_TAG_MAX, "arch tags fit the view");
_Static_assert(VM_MAX_VCPUS <= SNAP_MAX_INDEX, "every vCPU has an index");

/* One vCPU ioctl and the record it fills or reads. */
struct vcpu_step {
	unsigned long req;
	uint32_t tag;
	size_t size;
	const char *name;
};

/* The ioctl what failed (errno says why), for vCPU index or the VM (-1): the
 * message into err. Returns -1. */
static int ioctl_failed(char *err, size_t errlen, const char *what, int index)
{
	if (index >= 0)
		snprintf(err, errlen, "%s (vCPU %d): %s", what, index, strerror(errno));
	else
		snprintf(err, errlen, "%s: %s", what, strerror(errno));
	return -1;
}

/* The XSAVE area's size on this host: what KVM_GET_XSAVE2 fills, never
 * less than the 4 KiB of struct kvm_xsave (so it also holds every other
 * state structure of a vCPU). */
static size_t xsave_size(const struct vm *vm)
{
	int n = ioctl(vm->vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE2);
	return n > (int)XSAVE_MIN ? (size_t)n : XSAVE_MIN;
}

/* Every MSR KVM lists, read in one pass: an MSR the vCPU cannot read is
 * left out (KVM_GET_MSRS stops at the first failure, so go on after it). */
static int save_msrs(struct vm *vm, struct vcpu *v, struct snap_writer *w, char *err, size_t errlen)
{
	struct kvm_msr_list probe = { .nmsrs = 0 };
	if (ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, &probe) < 0 && errno != E2BIG)
		return ioctl_failed(err, errlen, "KVM_GET_MSR_INDEX_LIST", -1);
	uint32_t n = probe.nmsrs > MSRS_MAX ? MSRS_MAX : probe.nmsrs;
	struct kvm_msr_list *list = calloc(1, sizeof(*list) + n * sizeof(uint32_t));
	struct kvm_msrs *m = calloc(1, sizeof(*m) + n * sizeof(struct kvm_msr_entry));
	struct kvm_msr_entry *out = calloc(n ? n : 1, sizeof(*out));
	int rc = -1;
	if (!list || !m || !out) {
		snprintf(err, errlen, "out of memory for MSRs");
		goto out;
	}
	list->nmsrs = n;
	if (ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, list) < 0) {
		rc = ioctl_failed(err, errlen, "KVM_GET_MSR_INDEX_LIST", -1);
		goto out;
	}
	uint32_t kept = 0;
	for (uint32_t at = 0; at < list->nmsrs;) {
		m->nmsrs = list->nmsrs - at;
		for (uint32_t i = 0; i < m->nmsrs; i++)
			m->entries[i] = (struct kvm_msr_entry){ .index = list->indices[at + i] };
		int got = ioctl(v->fd, KVM_GET_MSRS, m);
		if (got < 0) {
			rc = ioctl_failed(err, errlen, "KVM_GET_MSRS", (int)v->index);
			goto out;
		}
		memcpy(out + kept, m->entries, (size_t)got * sizeof(*out));
		kept += (uint32_t)got;
		at += (uint32_t)got + 1;   /* past the one it could not read */
	}
	snap_add(w, TAG_MSRS, v->index, out, kept * sizeof(*out));
	rc = 0;
out:
	free(out);
	free(m);
	free(list);
	return rc;
}

static int save_vcpu(struct vm *vm, struct vcpu *v, struct snap_writer *w, char *err, size_t errlen)
{
	const struct vcpu_step fixed[] = {
		{ KVM_GET_REGS, TAG_REGS, sizeof(struct kvm_regs), "KVM_GET_REGS" },
		{ KVM_GET_SREGS, TAG_SREGS, sizeof(struct kvm_sregs), "KVM_GET_SREGS" },
		{ KVM_GET_XCRS, TAG_XCRS, sizeof(struct kvm_xcrs), "KVM_GET_XCRS" },
		{ KVM_GET_DEBUGREGS, TAG_DEBUGREGS, sizeof(struct kvm_debugregs), "KVM_GET_DEBUGREGS" },
		{ KVM_GET_LAPIC, TAG_LAPIC, sizeof(struct kvm_lapic_state), "KVM_GET_LAPIC" },
		{ KVM_GET_VCPU_EVENTS, TAG_EVENTS, sizeof(struct kvm_vcpu_events), "KVM_GET_VCPU_EVENTS" },
		{ KVM_GET_MP_STATE, TAG_MP_STATE, sizeof(struct kvm_mp_state), "KVM_GET_MP_STATE" },
	};
	size_t xs = xsave_size(vm);
	uint8_t *buf = calloc(1, xs);
	if (!buf) {
		snprintf(err, errlen, "out of memory for vCPU state");
		return -1;
	}
	int rc = -1;
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		if (ioctl(v->fd, fixed[i].req, buf) < 0) {
			ioctl_failed(err, errlen, fixed[i].name, (int)v->index);
			goto out;
		}
		snap_add(w, fixed[i].tag, v->index, buf, fixed[i].size);
	}
	if (ioctl(v->fd, xs > XSAVE_MIN ? KVM_GET_XSAVE2 : KVM_GET_XSAVE, buf) < 0) {
		ioctl_failed(err, errlen, "KVM_GET_XSAVE", (int)v->index);
		goto out;
	}
	snap_add(w, TAG_XSAVE, v->index, buf, xs);
	rc = save_msrs(vm, v, w, err, errlen);
out:
	free(buf);
	return rc;
}

int kvm_arch_snapshot_save(struct vm *vm, struct snap_writer *w, char *err, size_t errlen)
{
	for (unsigned i = 0; i < vm->ncpus; i++)
		if (save_vcpu(vm, &vm->vcpus[i], w, err, errlen))
			return -1;
	for (uint32_t c = 0; c < NIRQCHIPS; c++) {
		struct kvm_irqchip chip = { .chip_id = c };
		if (ioctl(vm->vm_fd, KVM_GET_IRQCHIP, &chip) < 0)
			return ioctl_failed(err, errlen, "KVM_GET_IRQCHIP", -1);
		snap_add(w, TAG_IRQCHIP, c, &chip, sizeof(chip));
	}
	struct kvm_pit_state2 pit;
	if (ioctl(vm->vm_fd, KVM_GET_PIT2, &pit) < 0)
		return ioctl_failed(err, errlen, "KVM_GET_PIT2", -1);
	snap_add(w, TAG_PIT, 0, &pit, sizeof(pit));
	struct kvm_clock_data clock = { 0 };
	if (ioctl(vm->vm_fd, KVM_GET_CLOCK, &clock) < 0)
		return ioctl_failed(err, errlen, "KVM_GET_CLOCK", -1);
	snap_add(w, TAG_CLOCK, 0, &clock, sizeof(clock));
	return 0;
}

static int missing(char *err, size_t errlen, const char *what, unsigned index)
{
	snprintf(err, errlen, "no %s record for vCPU %u", what, index);
	return -1;
}

static int restore_msrs(struct vcpu *v, const struct snap_view *sv, char *err, size_t errlen)
{
	const uint8_t *p = sv->rec[TAG_MSRS][v->index].p;
	if (!p)
		return missing(err, errlen, "msrs", v->index);
	uint32_t n = (uint32_t)(sv->rec[TAG_MSRS][v->index].len / sizeof(struct kvm_msr_entry));
	struct kvm_msrs *m = calloc(1, sizeof(*m) + n * sizeof(struct kvm_msr_entry));
	if (!m) {
		snprintf(err, errlen, "out of memory for MSRs");
		return -1;
	}
	m->nmsrs = n;
	memcpy(m->entries, p, n * sizeof(struct kvm_msr_entry));
	int set = ioctl(v->fd, KVM_SET_MSRS, m);
	int rc = 0;
	if (set < 0)
		rc = ioctl_failed(err, errlen, "KVM_SET_MSRS", (int)v->index);
	else if ((uint32_t)set != n) {
		snprintf(err, errlen, "KVM_SET_MSRS (vCPU %u): MSR 0x%x refused", v->index, m->entries[set].index);
		rc = -1;
	}
	free(m);
	return rc;
}

/* In the order KVM wants them: the MP state first, the registers before
 * the APIC (its base is in sregs), the MSRs after the APIC (the TSC
 * deadline needs the APIC's timer mode), the events last. */
static int restore_vcpu(struct vm *vm, struct vcpu *v, const struct snap_view *sv, char *err, size_t errlen)
{
	size_t xs = xsave_size(vm);
	const struct vcpu_step steps[] = {
		{ KVM_SET_MP_STATE, TAG_MP_STATE, sizeof(struct kvm_mp_state), "KVM_SET_MP_STATE" },
		{ KVM_SET_REGS, TAG_REGS, sizeof(struct kvm_regs), "KVM_SET_REGS" },
		{ KVM_SET_SREGS, TAG_SREGS, sizeof(struct kvm_sregs), "KVM_SET_SREGS" },
		{ KVM_SET_XSAVE, TAG_XSAVE, xs, "KVM_SET_XSAVE" },
		{ KVM_SET_XCRS, TAG_XCRS, sizeof(struct kvm_xcrs), "KVM_SET_XCRS" },
		{ KVM_SET_DEBUGREGS, TAG_DEBUGREGS, sizeof(struct kvm_debugregs), "KVM_SET_DEBUGREGS" },
		{ KVM_SET_LAPIC, TAG_LAPIC, sizeof(struct kvm_lapic_state), "KVM_SET_LAPIC" },
		{ 0, TAG_MSRS, 0, "msrs" },
		{ KVM_SET_VCPU_EVENTS, TAG_EVENTS, sizeof(struct kvm_vcpu_events), "KVM_SET_VCPU_EVENTS" },
	};
	uint8_t *buf = calloc(1, xs);
	if (!buf) {
		snprintf(err, errlen, "out of memory for vCPU state");
		return -1;
	}
	int rc = -1;
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		if (steps[i].tag == TAG_MSRS) {
			if (restore_msrs(v, sv, err, errlen))
				goto out;
			continue;
		}
		if (snap_get(sv, steps[i].tag, v->index, buf, steps[i].size)) {
			if (steps[i].tag == TAG_XSAVE && sv->rec[TAG_XSAVE][v->index].p)
				snprintf(err, errlen, "the XSAVE area of vCPU %u is %llu bytes, this host's %zu: another CPU",
					 v->index, (unsigned long long)sv->rec[TAG_XSAVE][v->index].len, steps[i].size);
			else
				missing(err, errlen, steps[i].name, v->index);
			goto out;
		}
		if (ioctl(v->fd, steps[i].req, buf) < 0) {
			ioctl_failed(err, errlen, steps[i].name, (int)v->index);
			goto out;
		}
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

int kvm_arch_snapshot_restore(struct vm *vm, const struct snap_view *sv, char *err, size_t errlen)
{
	for (uint32_t c = 0; c < NIRQCHIPS; c++) {
		struct kvm_irqchip chip;
		if (snap_get(sv, TAG_IRQCHIP, c, &chip, sizeof(chip)) || chip.chip_id != c) {
			snprintf(err, errlen, "irqchip record %u missing or mislabelled", c);
			return -1;
		}
		if (ioctl(vm->vm_fd, KVM_SET_IRQCHIP, &chip) < 0)
			return ioctl_failed(err, errlen, "KVM_SET_IRQCHIP", -1);
	}
	struct kvm_pit_state2 pit;
	if (snap_get(sv, TAG_PIT, 0, &pit, sizeof(pit))) {
		snprintf(err, errlen, "no pit record");
		return -1;
	}
	if (ioctl(vm->vm_fd, KVM_SET_PIT2, &pit) < 0)
		return ioctl_failed(err, errlen, "KVM_SET_PIT2", -1);
	for (unsigned i = 0; i < vm->ncpus; i++)
		if (restore_vcpu(vm, &vm->vcpus[i], sv, err, errlen))
			return -1;
	for (unsigned i = vm->ncpus; i < SNAP_MAX_INDEX; i++)
		if (sv->rec[TAG_REGS][i].p) {
			snprintf(err, errlen, "state for vCPU %u, past the snapshot's %u", i, vm->ncpus);
			return -1;
		}
	/* Last, after the TSC MSRs: the guest's clock goes on from where it
	 * stopped (the agent sets the wall clock from the host). */
	struct kvm_clock_data clock;
	if (snap_get(sv, TAG_CLOCK, 0, &clock, sizeof(clock))) {
		snprintf(err, errlen, "no kvmclock record");
		return -1;
	}
	struct kvm_clock_data set = { .clock = clock.clock };
	if (ioctl(vm->vm_fd, KVM_SET_CLOCK, &set) < 0)
		return ioctl_failed(err, errlen, "KVM_SET_CLOCK", -1);
	return 0;
}

/* Complete an exit the vCPU was in when it stopped (an MMIO read's data
 * is only delivered by the next KVM_RUN): immediate_exit makes that run
 * return at once, with the instruction finished and no guest code run. */
void kvm_arch_vcpu_quiesce(struct vcpu *v)
{
	__atomic_store_n(&v->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	(void)ioctl(v->fd, KVM_RUN, 0);
}
