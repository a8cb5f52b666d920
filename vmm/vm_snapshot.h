/* Warm starts: save a booted VM whose agent is ready for a run, and start
 * another VM from it instead of booting.
 *
 * Saving (--snapshot-out DIR): before the vCPUs start, the output files
 * are opened and what the snapshot was made from is recorded (the
 * kernel's and each disk's identity); the vsock device stops the VM when
 * the agent connects to its ready port; the vCPU threads finish the exit
 * they were in; the main thread then writes guest memory (zero pages as
 * holes) and the state file.
 *
 * Restoring (--restore DIR): the state file is parsed (snapshot.h) and
 * checked against this vmm's build, kernel, disks, memory, vCPUs and CPU
 * before anything else; memory is the memory file mapped copy-on-write;
 * the devices are created as for a boot and given their saved state; a
 * workspace slot that was empty gets its file with a config interrupt;
 * the agent's pending vsock connection and any other are reset. */
#ifndef VMM_VM_SNAPSHOT_H
#define VMM_VM_SNAPSHOT_H

#include <stdint.h>

#include "args.h"
#include "snapshot.h"
#include "vm.h"

/* A snapshot being written. */
struct snapshot_out {
	int state_fd, mem_fd;
	struct snap_meta meta;
};

/* A snapshot being restored: the state file, parsed. */
struct snapshot_in {
	uint8_t *buf;
	size_t len;
	struct snap_view view;
	struct snap_meta meta;
	int mem_fd;
};

/* Open DIR's files, record the inputs, arm the vsock ready port (after
 * the devices exist, before the vCPUs start). Returns 0, or -1 after one
 * error line. */
int vm_snapshot_prepare(struct vm *vm, const struct vmm_config *cfg, struct snapshot_out *out);

/* After the VM stopped with VM_STOP_SNAPSHOT and every vCPU was joined:
 * write memory and state, durably. Returns 0, or -1 after one error line. */
int vm_snapshot_write(struct vm *vm, struct snapshot_out *out);

/* Close what prepare opened; safe on a zeroed or released struct. */
void vm_snapshot_out_release(struct snapshot_out *out);

/* The state file of the stopped VM (meta, pause when not NULL, the
 * arch's records, the devices') into w, finished. Returns 0, or -1 after
 * one error line (w is the caller's to release either way). */
int vm_snapshot_state(struct vm *vm, const struct snap_meta *meta, const struct snap_pause *pause,
		      struct snap_writer *w);

/* Create (truncate) DIR/name for writing, mode 0644, before the seccomp
 * filter. Returns the fd, or -1 after one error line naming opt. */
int vm_snapshot_open_out(const char *opt, const char *dir, const char *name);

/* pwrite len bytes of p at offset at, whole. Returns 0, or -1 with errno. */
int vm_snapshot_write_all(int fd, const uint8_t *p, size_t len, off_t at);

/* pread len bytes at offset at into p, whole. Returns 0, or -1 with errno
 * (0 at end of file). */
int vm_snapshot_read_all(int fd, uint8_t *p, size_t len, off_t at);

/* Read DIR/state into in->buf (a regular file of 1..SNAP_MAX_STATE
 * bytes). Returns 0, or -1 after one error line. */
int vm_snapshot_read_state(const char *dir, struct snapshot_in *in);

/* Read and check cfg->restore's state file against cfg (build, kernel,
 * memory, vCPUs, disks): before /dev/kvm is touched. Returns 0, or -1
 * after one error line ("vmm: snapshot DIR: ..."). */
int vm_restore_load(const struct vmm_config *cfg, struct snapshot_in *in);

/* Once the VM, its memory (from in->mem_fd) and devices exist as for a
 * boot and the host probe ran and was reverted (kvm_arch_probe_revert),
 * with a paused VM's pages laid over: the saved state into KVM and the devices,
 * the workspace announced, vsock reset. Returns 0, or -1 after one error
 * line. */
int vm_restore_apply(struct vm *vm, const struct vmm_config *cfg, struct snapshot_in *in);

/* Free the state file and close the memory fd; safe twice. */
void vm_restore_release(struct snapshot_in *in);

#endif
