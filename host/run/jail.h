/* The jail around every vmm that vmrun starts: defence in depth behind
 * KVM, in the manner of Firecracker's jailer.
 *
 *   namespaces   new mount, PID (vmm is PID 1 of its own), IPC, UTS and
 *                network (empty: no interface but a downed lo)
 *   file system  pivot_root into <run>/root, which holds only bind mounts
 *                of the vmm binary, the kernel and root image (read-only),
 *                the workspace image (none while a snapshot is made), the
 *                snapshot directory as /snapshot when there is one
 *                (read-only to restore from it, writable to make it), and
 *                <run>/sock as /run (the vsock sockets and the console);
 *                the root itself is read-only
 *   /dev/kvm     opened by vmrun and handed over as fd 3 (--kvm-fd): no
 *                device node is reachable in the jail
 *   identity     a uid and gid of their own from JAIL_ID_BASE upward, no
 *                supplementary groups, no_new_privs, no capabilities
 *   resources    rlimits (files, file size: the workspace's, or the guest
 *                memory's while a snapshot is made; processes, no core
 *                dumps) and
 *                a cgroup (v2 where mounted, else v1) with a memory
 *                ceiling of guest memory + JAIL_MEMORY_OVERHEAD_MIB +
 *                the workspace (written into the run's cgroup by
 *                jail_charged, so that its page cache, or its pages on a
 *                tmpfs, are the run's), a pids ceiling and an optional
 *                CPU quota; killing the run kills the whole cgroup
 *   process      an empty environment, only fds 0-3 */
#ifndef VMRUN_JAIL_H
#define VMRUN_JAIL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define JAIL_ID_BASE   2000000u    /* per-run uids/gids: base + random below JAIL_ID_COUNT */
#define JAIL_ID_COUNT  1000000u
#define JAIL_MEMORY_OVERHEAD_MIB 64u   /* vmm's own memory beyond the guest's */
#define JAIL_PIDS_EXTRA 8u            /* threads beyond one per vCPU */
#define JAIL_UID_DIR   "/run/vmrun/uids"   /* one lock file per uid in use */
#define JAIL_UID_TRIES 64u            /* draws before giving up on a free uid */

/* Draws one random number into *r; returns 0, or -1 with errno set. */
typedef int (*jail_draw_fn)(void *ctx, uint32_t *r);

struct jail_spec {
	const char *run_dir;          /* the run directory (host path) */
	const char *vmm;              /* host path */
	const char *image;            /* the workspace image's host path; NULL: none */
	/* A snapshot directory bound at JAIL_SNAPSHOT (NULL: none): read-only
	 * for a restore; writable, and given to the run's uid, for vmm
	 * --snapshot-out to write into. */
	const char *snapshot;
	bool snapshot_rw;
	bool may_pause;               /* a sandbox's vmm: --pause-out writes the guest's changed pages */
	int kernel_fd, rootfs_fd;     /* opened with the caller's rights, bound into the jail from the fd */
	const char *sock_dir;         /* host path of the directory that becomes /run */
	const char *run_id;
	uint64_t memory_mib, cpus, disk_mib;
	unsigned cpu_quota_pct;       /* 0: no CPU quota */
	bool allow_weaker;            /* rootless: run without cgroup limits where none are delegated */
	int stderr_fd;                /* vmm's stderr */
	char *const *argv;            /* vmm's arguments, paths as seen inside */
	/* Where uids are reserved (NULL: JAIL_UID_DIR) and how they are drawn
	 * (NULL: getrandom); set by tests only. */
	const char *uid_dir;
	jail_draw_fn draw;
	void *draw_ctx;
	/* Told of each cgroup directory the moment it is made, before any
	 * process is in it, so a record of the run can name it (NULL: none). */
	void (*on_cgroup)(void *ctx, int version, const char *path);
	void *on_cgroup_ctx;
};

struct jail {
	pid_t pid;                    /* vmm, as seen from vmrun */
	uid_t uid;
	gid_t gid;
	bool rootless;                /* built without root: a user namespace, our own ids */
	bool cgroup_delegated;        /* rootless: under a cgroup v2 subtree delegated to us */
	int cgroup_version;           /* 2, 1, or 0 before setup (rootless: none to be had) */
	bool cgroup_made;             /* its creation was tried (by jail_charged or jail_start) */
	char cgroup[PATH_MAX];        /* v2: the run's cgroup; v1: the memory one */
	char cgroup_pids[PATH_MAX];   /* v1 only */
	char root[PATH_MAX];
	/* The uid's reservation: RLIMIT_NPROC counts per uid across the host,
	 * so two runs sharing one could starve each other's threads. */
	bool uid_held;
	int uid_fd;                   /* flock'ed while uid_held */
	char uid_lock[PATH_MAX];
};

/* Where the jailed paths are, as vmm sees them. */
#define JAIL_VMM     "/vmm"
#define JAIL_KERNEL  "/vmlinux"
#define JAIL_ROOTFS  "/rootfs.ext4"
#define JAIL_IMAGE   "/workspace.ext4"
#define JAIL_RUN     "/run"
#define JAIL_SNAPSHOT "/snapshot"
#define JAIL_PAUSE_DIR JAIL_RUN "/pause"   /* a sandbox's paused VM: in the socket directory */
#define JAIL_KVM_FD  3

/* The line the jail writes to vmm's stderr just before exec. */
#define JAIL_READY_PREFIX "vmrun-jail: ready in "

/* Draw a uid no other run holds and hold it (a lock file under the spec's
 * uid_dir) until jail_release_uid. Returns 0, or -1 with a reason. */
int jail_reserve_uid(const struct jail_spec *s, struct jail *j, char *err, size_t errlen);

/* Release and remove the uid's lock file; harmless when none is held. */
void jail_release_uid(struct jail *j);

/* RLIMIT_FSIZE for vmm under s: what it may write into one file, the
 * workspace image or (making a snapshot, or pausing) the guest's memory,
 * plus 16 MiB for the console and the snapshot's state. Pure. */
uint64_t jail_fsize_limit(const struct jail_spec *s);

/* Pick the run's uid/gid and give it the files vmm must write that exist
 * now (a writable snapshot directory, the socket directory); the
 * workspace image, which may be written after this, is given at
 * jail_start. Without root (rootless), the ids are ours and the jail is
 * built in a user namespace mapping them. Returns 0, or -1 with a
 * reason. */
int jail_prepare(const struct jail_spec *s, struct jail *j, char *err, size_t errlen);

/* What jail_charged runs: 0, or -1 with a reason in err; out is the
 * caller's, copied back from the child on success. */
typedef int (*jail_charged_fn)(void *ctx, void *out, char *err, size_t errlen);

/* After jail_prepare: run fn(ctx, out) in a child process that belongs to
 * the run's cgroup (made now), so that the memory it makes the kernel
 * take, the workspace image's page cache or its pages on a tmpfs, is
 * charged to the run and bounded by the run's ceiling, not to the
 * supervisor that serves every run. Without a cgroup (rootless with a
 * weaker jail allowed) fn runs in the child all the same. The child dies
 * with the caller. Returns fn's 0 with out (outlen bytes) filled, or -1
 * with fn's reason or why the child failed. */
int jail_charged(const struct jail_spec *s, struct jail *j, jail_charged_fn fn, void *ctx, void *out, size_t outlen,
		 char *err, size_t errlen);

/* Create the cgroup (unless jail_charged did), give vmm the workspace
 * image, and start vmm inside the jail. Returns 0 with j->pid set, or -1
 * with a reason (nothing left running). */
int jail_start(const struct jail_spec *s, struct jail *j, char *err, size_t errlen);

/* Kill everything in the run's cgroup (vmm and anything it started). */
void jail_kill(struct jail *j);

/* Kill what is left in a cgroup (version 1 or 2) that no live jail
 * holds, a dead run's, and remove it. Returns 0 when it is gone. */
int jail_reclaim_cgroup(int version, const char *path);

/* How many times the host's OOM killer killed a process of the run's
 * cgroup (cgroup v2's memory.events, v1's memory.oom_control): 0 when
 * none, or when there is no cgroup or the count cannot be read. Call
 * after vmm was reaped, before jail_cleanup. */
unsigned long jail_oom_kills(const struct jail *j);

/* The "oom_kill N" count of a memory.events or memory.oom_control text;
 * 0 when it has none. Pure. */
unsigned long jail_parse_oom_kills(const char *text);

/* The number a cgroup file's text holds: the one after "KEY " at the
 * start of a line (memory.events, cpu.stat), or the whole text's when key
 * is NULL (memory.current). -1 when it is not there or not a number.
 * Pure. */
long long jail_cgroup_number(const char *text, const char *key);

/* dir/file (a cgroup's control file) read and given to
 * jail_cgroup_number: -1 also when it cannot be read. */
long long jail_cgroup_read(const char *dir, const char *file, const char *key);

/* After vmm was reaped: kill stragglers, remove the cgroup and the jail's
 * root directory, release the uid. */
void jail_cleanup(struct jail *j);

#endif
