/* A kind of device, described in the file of its code, as Solo5's hvt
 * modules are: its command-line options and their help, how many devices
 * of it a configuration asks for and how each is made, what a restore
 * tells them, what they counted of the guest's misbehaviour, and their
 * release. The command line (args.c), the VM's devices
 * (virtio_devices.c) and the restore (vm_snapshot.c) walk
 * vmm_device_kinds and name no device. A device's state in a snapshot is
 * its transport's (virtio_mmio_save), which the restore puts back before
 * the kind's restored op runs. */
#ifndef VMM_DEVICE_H
#define VMM_DEVICE_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

struct vm;
struct vmm_config;
struct snap_meta;
struct virtio_mmio;

/* The first getopt value a kind's options may use: above every value of
 * args.c's own options. Each kind takes its own range of 16. */
#define VMM_DEVICE_OPT_BASE 0x1000

struct vmm_device_kind {
	const char *name;
	/* getopt_long's entries, ended by a zeroed one; each val in
	 * [VMM_DEVICE_OPT_BASE, ...), unique over every kind */
	const struct option *options;
	const char *synopsis;   /* its part of the usage line */
	const char *usage;      /* its lines of --help, each ending in '\n' */
	/* Option val with its argument into cfg: 0, or -1 after one error line. */
	int (*option)(struct vmm_config *cfg, int val, const char *arg);
	/* The whole command line, once parsed: 0, or -1 after one error
	 * line. NULL: nothing to check. */
	int (*check)(const struct vmm_config *cfg);
	/* How many devices of this kind cfg asks for. */
	unsigned (*count)(const struct vmm_config *cfg);
	/* Make the i-th of them in vm, its registers at base and its
	 * interrupt irq, its transport into *t: 0, or -1 after one error line
	 * (release is still safe). Needs guest memory and the event loop, not
	 * KVM. */
	int (*create)(struct vm *vm, const struct vmm_config *cfg, unsigned i, uint64_t base, unsigned irq,
		      struct virtio_mmio **t);
	/* A restored VM's devices, told what differs from the snapshot they
	 * came from (meta, what it was made with). NULL: nothing to tell. */
	void (*restored)(struct vm *vm, const struct vmm_config *cfg, const struct snap_meta *meta);
	/* What its devices counted, appended to buf (len bytes, *used so far)
	 * with virtio_faults_append. */
	void (*faults)(const struct vm *vm, char *buf, size_t len, size_t *used);
	/* Release every device of this kind made so far; safe after a failed
	 * create and when none was made. */
	void (*release)(struct vm *vm);
};

extern const struct vmm_device_kind virtio_blk_kind, virtio_vsock_kind, virtio_rng_kind;

/* Every kind, in the order their devices take slots (which a snapshot
 * keeps: a restore must make them in the same order), NULL-terminated. */
extern const struct vmm_device_kind *const vmm_device_kinds[];

#endif
