/* The vmm command line (see docs/vmm.md). */
#ifndef VMM_ARGS_H
#define VMM_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The i8042, PCI and module parameters are x86's: the arm64 guest kernel
 * knows none of them, and hands a parameter it does not know to init. */
#if defined(__aarch64__)
#define VMM_DEFAULT_CMDLINE "console=ttyS0 reboot=k panic=1 quiet"
#else
#define VMM_DEFAULT_CMDLINE                                                                   \
	"console=ttyS0 reboot=k panic=1 pci=off nomodule i8042.noaux i8042.nomux i8042.nopnp " \
	"i8042.dumbkbd quiet"
#endif
#define VMM_DEFAULT_MEMORY_MIB   256
#define VMM_MIN_MEMORY_MIB       2
#define VMM_MAX_MEMORY_MIB       (64 * 1024)
#define VMM_DEFAULT_CONSOLE_LIMIT (1024 * 1024)
#define VMM_MAX_DISKS            8
#define VMM_DISK_PATH_MAX        4096
/* vCPUs --cpus allows: what both arches' boot tables list (x86_64's MP
 * table, aarch64's GIC redistributors). */
#define VMM_MAX_CPUS             32
/* The longest kernel command line vmm builds, NUL included: Linux's
 * COMMAND_LINE_SIZE on x86_64 and arm64 alike. */
#define VMM_CMDLINE_MAX          2048

struct vmm_disk {
	char path[VMM_DISK_PATH_MAX];
	bool ro;                     /* ",ro": the guest can never write it */
	bool none;                   /* "none": a slot with no backing yet (capacity 0), which
				      * a restore gives a file (the workspace of a snapshot) */
};

struct vmm_config {
	const char *kernel;
	const char *cmdline_extra;   /* appended to the default, or replacing it */
	bool no_default_cmdline;
	uint64_t memory_mib;
	unsigned cpus;
	const char *console;         /* "stdout", "none" or a file */
	uint64_t console_limit;
	bool accept_emulated;        /* run even where KVM emulates guest kernel code */
	bool stats;                  /* print timing and memory figures at exit */
	bool probe_only;             /* --probe: the host check, then exit (vmrund's /readyz) */
	struct vmm_disk disks[VMM_MAX_DISKS];   /* vda, vdb, ... in order */
	unsigned ndisks;
	const char *vsock_uds;       /* NULL: no vsock device */
	int kvm_fd;                  /* an open /dev/kvm handed in by a jail; -1: open it */
	const char *snapshot_out;    /* boot until the agent is ready, save the VM there, exit */
	const char *restore;         /* start from the snapshot in this directory instead of booting */
	const char *pause_out;       /* with restore: where VMM_PAUSE_SIGNAL saves the VM */
	const char *resume;          /* with restore: the paused VM to go on from */
};

/* Parse argv into cfg. Returns 0 to run, 1 when --help or --version was
 * printed (exit 0), or -1 after one error line (exit 1). */
int vmm_args_parse(int argc, char **argv, struct vmm_config *cfg);

/* Parse a decimal number in [min, max] with nothing else around it.
 * Returns 0, or -1 on anything else (no error printed). */
int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* Build the kernel command line into buf: the default (unless replaced),
 * the device parameters (devices, may be ""), then --cmdline, which may end
 * with "-- init arguments". Returns 0, or -1 when it does not fit (no error
 * printed). */
int vmm_build_cmdline(const struct vmm_config *cfg, const char *devices, char *buf, size_t len);

#endif
