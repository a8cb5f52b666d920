/* Pause and resume: a VM restored from a snapshot saved as its difference
 * from that snapshot, and started again from it (vmrun's sandbox pause).
 *
 * Pausing (--restore DIR --pause-out DIR2): before the vCPUs start, the
 * output files are opened (the seccomp filter allows no open later);
 * VMM_PAUSE_SIGNAL stops the VM as a snapshot does; the main thread then
 * writes DIR2/pages.new (each guest page that differs from DIR's memory
 * file: only resident pages are compared, and untouched ones cannot
 * differ) and DIR2/state.new (the vCPUs and devices, the snapshot's meta
 * and a pause record that names the snapshot's state checksum and the
 * pages file's), both made durable, and vmm exits 0. The host renames
 * them into place.
 *
 * Resuming (--restore DIR --resume DIR2): DIR2/state is parsed and
 * checked as a snapshot's is, and must name DIR's state checksum; the
 * pages file's header and index are checked before /dev/kvm is touched;
 * guest memory is DIR's memory file mapped copy-on-write, and the pages
 * are read over it, their checksum verified, before any vCPU runs. Then
 * the VM goes on as a restore does (vsock is reset: the agent reconnects). */
#ifndef VMM_VM_PAUSE_H
#define VMM_VM_PAUSE_H

#include <stdint.h>

#include "args.h"
#include "snapshot.h"
#include "vm.h"
#include "vm_snapshot.h"

/* A pause being prepared and written. */
struct pause_out {
	int state_fd, pages_fd;
	int base_mem_fd;                /* the snapshot's memory, to compare against (not owned) */
	struct snap_meta meta;          /* the snapshot's */
	uint64_t base_checksum;
};

/* A paused VM being resumed. */
struct resume_in {
	struct snapshot_in state;       /* DIR2/state, parsed (its mem_fd unused: -1) */
	struct snap_pause pause;
	int pages_fd;
	struct snap_pages_header hdr;
	uint64_t *index;
};

/* With cfg->pause_out, after the devices exist and before the vCPUs
 * start: open DIR2's .new files and arm VMM_PAUSE_SIGNAL. base is the
 * restored snapshot. Returns 0, or -1 after one error line. */
int vm_pause_prepare(struct vm *vm, const struct vmm_config *cfg, const struct snapshot_in *base,
		     struct pause_out *out);

/* After the VM stopped with VM_STOP_PAUSE and every vCPU was joined: write
 * the pages and the state, durably. Returns 0, or -1 after one error line. */
int vm_pause_write(struct vm *vm, struct pause_out *out);

/* Close what prepare opened; safe on a zeroed or released struct. */
void vm_pause_out_release(struct pause_out *out);

/* With cfg->resume, after vm_restore_load read the snapshot (base):
 * read and check DIR2's state and the pages file's header and index.
 * Returns 0, or -1 after one error line ("vmm: paused state DIR2: ..."). */
int vm_resume_load(const struct vmm_config *cfg, const struct snapshot_in *base, struct resume_in *r);

/* Lay the pages over guest memory (mapped from the snapshot's memory
 * file) and verify their checksum. Returns 0, or -1 after one error
 * line; then the VM must not run. */
int vm_resume_pages(const struct vmm_config *cfg, struct guest_mem *gm, struct resume_in *r);

/* Free and close what load took; safe on a zeroed struct with pages_fd -1. */
void vm_resume_release(struct resume_in *r);

#endif
