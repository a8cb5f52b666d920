/* Where warm-start snapshots live, and which one a run may restore.
 *
 *   directory  $VMRUN_CACHE/snapshots, VMRUN_CACHE honoured only for a
 *              real uid of 0 (a setuid or sudo'ed vmrun acts for others,
 *              whose environment must not choose root's files); else
 *              /var/cache/vmrun/snapshots for an effective uid of 0, else
 *              $XDG_CACHE_HOME/vmrun/snapshots or ~/.cache/vmrun/snapshots.
 *              Each level made here is 0700; the last must be ours and
 *              writable by us alone.
 *   key        16 hex digits of a 64-bit FNV-1a hash over what vmm checks
 *              on a restore and more: the vmm binary's, the kernel's and
 *              the root image's identity (device, inode, size, mtime,
 *              ctime), guest memory, vCPUs, the wire format's version and
 *              the CPU's feature flags. Any change is another key, so a
 *              stale snapshot is never found rather than refused.
 *   layout     <dir>/<key>/{state,memory}, made in <dir>/<key>.tmp-XXXXXX
 *              and renamed into place, so a reader sees a whole snapshot
 *              or none; <dir>/<key>.lock is flock'ed while one is made;
 *              <dir>/<key>.failed says why vmm could not make it, so that
 *              runs do not each pay for a boot that fails (a changed
 *              input is another key; `vmrun snapshot` tries again).
 *              A made directory is 0755 and its files 0644, ours: the
 *              jailed vmm of any later run (a uid of its own) reads them
 *              through a read-only bind mount. */
#ifndef VMRUN_SNAPSHOT_CACHE_H
#define VMRUN_SNAPSHOT_CACHE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SNAPSHOT_STATE     "state"
#define SNAPSHOT_MEMORY    "memory"
#define SNAPSHOT_KEY_CHARS 16
#define SNAPSHOT_SYSTEM_CACHE "/var/cache/vmrun"

/* One file's identity as the key sees it. */
struct snapshot_file_id {
	uint64_t dev, ino, size;
	int64_t mtime_sec, mtime_nsec, ctime_sec, ctime_nsec;
};

/* Everything the key is made of. */
struct snapshot_facts {
	struct snapshot_file_id vmm, kernel, rootfs;
	uint64_t memory_mib, cpus;
	uint32_t proto_version;
	uint64_t cpu_flags;           /* hash of /proc/cpuinfo's first "flags" line */
};

/* The process facts the cache directory is chosen from (NULL: unset). */
struct snapshot_env {
	uid_t ruid, euid;
	const char *vmrun_cache, *xdg_cache_home, *home;
};

/* One snapshot's paths in the cache, and its lock while held. */
struct snapshot_slot {
	char dir[PATH_MAX];           /* the cache directory */
	char key[SNAPSHOT_KEY_CHARS + 1];
	char path[PATH_MAX];          /* dir/key */
	char lock[PATH_MAX];          /* dir/key.lock */
	char failed[PATH_MAX + 16];   /* dir/key.failed */
	char tmp[PATH_MAX + 16];      /* dir/key.tmp-XXXXXX while one is made; "" otherwise */
	int lock_fd;                  /* -1 unless locked */
	dev_t dev;                    /* the directory found by snapshot_exists */
	ino_t ino;
};

/* FNV-1a over n bytes, continuing from h (start with SNAPSHOT_FNV_BASIS). */
#define SNAPSHOT_FNV_BASIS 0xcbf29ce484222325ull
uint64_t snapshot_fnv1a(uint64_t h, const void *p, size_t n);

/* The key of facts f. Pure: every field counts, padding never does. */
uint64_t snapshot_key(const struct snapshot_facts *f);

/* The key as SNAPSHOT_KEY_CHARS lower-case hex digits and a NUL. */
void snapshot_key_text(uint64_t key, char out[SNAPSHOT_KEY_CHARS + 1]);

/* The hash of the first "flags" line's value in the text of a
 * /proc/cpuinfo (0 when there is none). Pure. */
uint64_t snapshot_cpu_flags_text(const char *cpuinfo);

/* f for this run's vmm (a path), kernel and root image (open fds), memory
 * and vCPUs; cpuinfo is the file to read the CPU flags from (NULL:
 * /proc/cpuinfo). Returns 0, or -1 with a one-line reason. */
int snapshot_facts_gather(struct snapshot_facts *f, const char *vmm, int kernel_fd, int rootfs_fd,
			  uint64_t memory_mib, uint64_t cpus, const char *cpuinfo, char *err, size_t errlen);

/* The cache directory for e (the rules above) into dir. Pure. Returns 0,
 * or -1 with a reason (no HOME to put it under, a path too long). */
int snapshot_cache_choose(const struct snapshot_env *e, char *dir, size_t len, char *err, size_t errlen);

/* The cache root (what VMRUN_CACHE names) of one tenant's own snapshots,
 * for a service that keeps no snapshot page shared between tenants:
 * base/tenants/TENANT, so that the directory snapshot_cache_choose gives
 * for it is base/tenants/TENANT/snapshots, apart from the shared
 * base/snapshots and from every other tenant's. Returns 0, or -1 with a
 * reason when tenant is not one path component of [A-Za-z0-9._-] (empty,
 * ".", "..", a slash) or the path is too long. Pure. */
int snapshot_cache_tenant(const char *base, const char *tenant, char *out, size_t len, char *err, size_t errlen);

/* The cache directory for this process, created (each missing level 0700)
 * and checked to be a directory of ours that nobody else may write.
 * Returns 0, or -1 with a reason. */
int snapshot_cache_dir(char *dir, size_t len, char *err, size_t errlen);

/* s's paths for the snapshot of f in the cache directory dir; nothing is
 * touched. Returns 0, or -1 with a reason. */
int snapshot_slot_init(struct snapshot_slot *s, const char *dir, const struct snapshot_facts *f, char *err,
		       size_t errlen);

/* Whether s's snapshot is there, whole: a directory (not a link) holding
 * the regular files state and memory. Records its device and inode in s
 * for snapshot_discard. */
bool snapshot_exists(struct snapshot_slot *s);

/* Take s's lock, waiting at most timeout_ms and giving up at once when
 * cancel_fd (-1: none) becomes readable. Returns 0, or -1 with a reason. */
int snapshot_lock(struct snapshot_slot *s, int cancel_fd, int64_t timeout_ms, char *err, size_t errlen);

/* Release s's lock (kept as a file: removing it would race a waiter). */
void snapshot_unlock(struct snapshot_slot *s);

/* Create s->tmp, empty, 0700: where vmm writes a new snapshot. Returns 0,
 * or -1 with a reason. */
int snapshot_tmp_make(struct snapshot_slot *s, char *err, size_t errlen);

/* Make s->tmp the snapshot: its files must be state and memory, regular
 * and not empty; they become ours, 0644, the directory 0755, and it is
 * renamed to s->path, replacing what was there (and any failure mark). Call with the lock held.
 * Returns 0, or -1 with a reason (s->tmp is left for snapshot_tmp_remove). */
int snapshot_commit(struct snapshot_slot *s, char *err, size_t errlen);

/* Record why vmm could not make s's snapshot (one line). Returns 0 or -1. */
int snapshot_mark_failed(const struct snapshot_slot *s, const char *why);

/* Whether an earlier attempt at s's snapshot failed: true with its reason
 * in why. */
bool snapshot_failed(const struct snapshot_slot *s, char *why, size_t len);

/* Remove s->tmp and what is in it, if it is still there. */
void snapshot_tmp_remove(struct snapshot_slot *s);

/* Remove s's snapshot, if it is still the one snapshot_exists found (one
 * a restore refused), under s's lock (taken here for at most timeout_ms).
 * Returns 0, or -1 with a reason. */
int snapshot_discard(struct snapshot_slot *s, int64_t timeout_ms, char *err, size_t errlen);

/* Remove the directory path and the files in it (no subdirectories).
 * Returns 0, or -1 with errno set. */
int snapshot_remove_dir(const char *path);

#endif
