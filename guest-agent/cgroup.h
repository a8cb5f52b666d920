/* Per-stage cgroups (v2) for the guest agent's memory limits: the
 * hierarchy mounted at boot, one group per memory-limited stage, its OOM
 * count, and its removal once the stage is over. The file work needs PID 1
 * of a guest with CONFIG_MEMCG; the parsing is pure, for the unit tests. */
#ifndef VMRUN_CGROUP_H
#define VMRUN_CGROUP_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* Where the guest agent mounts cgroup2 (sysfs provides the directory). */
#define CGROUP_DIR "/sys/fs/cgroup"

/* One stage's group while it exists. */
struct cgroup {
	char path[PATH_MAX];   /* its directory */
	int procs_fd;          /* its cgroup.procs, open for writing; -1 when closed */
};

/* Mount cgroup2 on dir and enable the memory controller for the groups
 * made under it. Once, by PID 1 at boot, because only a mounted hierarchy
 * with +memory in its subtree_control gives groups a memory.max. Returns
 * 0, or -1 with why in err (an old kernel: no cgroup2, no memcg), after
 * which the agent runs without cgroups. */
int cgroup_init(const char *dir, char *err, size_t errlen);

/* Make the group root/name for one stage: memory.max from memory_kib
 * (cgroup_memory_max), memory.oom.group 1 so that an OOM kills the whole
 * stage rather than one process of it, and no swap where the kernel has
 * it. Opens cgroup.procs for cgroup_join, because the child joins before
 * it drops its privileges and must not have to build a path after fork.
 * Returns 0, or -1 with why in err and nothing left behind. */
int cgroup_create(const char *root, const char *name, uint64_t memory_kib, struct cgroup *g, char *err,
		  size_t errlen);

/* In the forked child, before it gives up root: move the calling process
 * into g (writes "0" to its cgroup.procs), so that everything the stage
 * starts is counted against the limit. Nothing but write(2), so it is
 * safe after fork. Returns 0, or -1 with errno set. */
int cgroup_join(const struct cgroup *g);

/* The number of OOM kills in g (memory.events' oom_kill), read after the
 * stage so that its EXIT can say the memory limit ended it. Returns 0, or
 * -1 with why in err. */
int cgroup_oom_kills(const struct cgroup *g, uint64_t *count, char *err, size_t errlen);

/* Kill every process in g at once (cgroup.kill), so that nothing of a
 * stage outlives it, wherever in the process tree it went. Returns 0 (also
 * on kernels without cgroup.kill: the caller kills by session too), or -1
 * with why in err. */
int cgroup_kill(const struct cgroup *g, char *err, size_t errlen);

/* The end of a stage's group: cgroup_kill, wait at most timeout_ms for
 * cgroup.events to say "populated 0" (killed processes take a moment to
 * go), then remove it, so that the next stage starts with nothing of this
 * one left. Closes g's procs fd in every case. Returns 0, or -1 with why
 * in err. */
int cgroup_destroy(struct cgroup *g, int timeout_ms, char *err, size_t errlen);

/* Pure: the value of key in the text of a flat keyed file ("key value"
 * lines, as memory.events and cgroup.events are), because those files are
 * how the kernel reports OOM kills and emptiness. Returns 0, or -1 when the
 * key is missing or its value is not a decimal number that fits u64. */
int cgroup_keyed_value(const char *text, const char *key, uint64_t *value);

/* Pure: what to write to memory.max for a limit of kib KiB: its bytes in
 * decimal, or "max" (no limit) when they do not fit u64, because the wire
 * format's limit is KiB and the kernel's is bytes. Writes at most len
 * bytes with the NUL; returns 0, or -1 when len is too small. */
int cgroup_memory_max(uint64_t kib, char *buf, size_t len);

#endif
