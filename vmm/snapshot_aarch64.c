/* aarch64 state in a snapshot: none yet. Saving an arm64 VM needs its
 * core, system and timer registers (KVM_GET_REG_LIST), the GIC's
 * distributor and redistributor state through its device attributes, and
 * the virtual counter's offset; until those are written, --snapshot-out
 * and --restore are refused in one line (kvm_arch_no_snapshots) before
 * any of this is reached, and vmrun boots cold. */
#include <stdio.h>

#include "kvm_arch.h"
#include "snapshot.h"

const uint32_t snap_arch = SNAP_ARCH_AARCH64;
const char *const kvm_arch_no_snapshots = "snapshots are not supported on aarch64 yet (boot without one)";

const struct snap_tag_desc snap_arch_tags[] = {
	{ 0, 0, 0, 0, NULL },
};

/* No request: nothing is saved. The array holds one unused entry since C
 * has no empty arrays. */
const unsigned long kvm_arch_snapshot_reads[1];
const size_t kvm_arch_nsnapshot_reads = 0;

int kvm_arch_snapshot_save(struct vm *vm, struct snap_writer *w, char *err, size_t errlen)
{
	(void)vm;
	(void)w;
	snprintf(err, errlen, "%s", kvm_arch_no_snapshots);
	return -1;
}

int kvm_arch_snapshot_restore(struct vm *vm, const struct snap_view *v, char *err, size_t errlen)
{
	(void)vm;
	(void)v;
	snprintf(err, errlen, "%s", kvm_arch_no_snapshots);
	return -1;
}

void kvm_arch_vcpu_quiesce(struct vcpu *v)
{
	(void)v;   /* never snapshotting: see kvm_arch_no_snapshots */
}

uint64_t kvm_arch_host_cpu(struct vm *vm)
{
	(void)vm;
	return 0;
}
