/* Records of live runs, and the sweeper that reclaims what a dead
 * supervisor left behind.
 *
 * A supervisor killed in the middle of a run (SIGKILL, the OOM killer, a
 * crash) takes its jailed vmm with it (PR_SET_PDEATHSIG) but leaves the
 * run's cgroup directories and its run directory (the workspace image,
 * sockets) behind. So while a run owns host resources it keeps a record:
 * one file per run in the records directory, locked (flock) for the run's
 * whole life, naming its run directory and each cgroup as it is made. A
 * record whose lock can be taken belongs to nobody: run_record_sweep,
 * called as each run starts, kills what is left in its cgroups, removes
 * them and the run directory, then the record. The record appears already
 * locked (made with O_TMPFILE and linked into place), so no sweeper can
 * take a live run's record for a dead one's. */
#ifndef VMRUN_RUN_RECORD_H
#define VMRUN_RUN_RECORD_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define RUN_RECORD_DIR          "/run/vmrun/runs"   /* root's records */
#define RUN_RECORD_MAX_CGROUPS  8   /* a run's and its snapshot boot's, v1's two hierarchies each */

struct run_record {
	int fd;                  /* locked for the run's life; -1: no record */
	char path[PATH_MAX];
};

/* What a record says, parsed. */
struct run_record_facts {
	char dir[PATH_MAX];      /* the run directory ("" if none yet) */
	unsigned ncgroups;
	struct {
		int version;     /* 1 or 2 */
		char path[PATH_MAX];
	} cgroup[RUN_RECORD_MAX_CGROUPS];
};

/* What a sweep reclaimed. */
struct run_sweep {
	unsigned runs;           /* records of dead runs handled */
	unsigned cgroups;        /* cgroups removed */
	unsigned dirs;           /* run directories removed */
	unsigned failed;         /* records kept: something could not be removed (retried next time) */
};

/* The records directory for a process of effective uid euid whose
 * $XDG_RUNTIME_DIR is runtime_dir (NULL: unset) into out: RUN_RECORD_DIR
 * for root, else vmrun/runs under runtime_dir. Pure. Returns 0, or -1
 * when there is none (not root, no runtime directory, a path too long). */
int run_record_dir_choose(uid_t euid, const char *runtime_dir, char *out, size_t len);

/* The records directory for this process, created (missing levels 0700,
 * /run/vmrun 0755) and checked: a directory of ours nobody else may write.
 * Returns 0, or -1 with a reason. */
int run_record_dir(char *out, size_t len, char *err, size_t errlen);

/* Start r's record for run run_id in dir, naming its run directory
 * run_dir: locked before it is visible. Returns 0, or -1 with a reason
 * and r->fd -1. */
int run_record_open(struct run_record *r, const char *dir, const char *run_id, const char *run_dir, char *err,
		    size_t errlen);

/* Add a cgroup of the run (version 1 or 2) to r, before anything runs in
 * it. A no-op on a record that is not open. Returns 0 or -1 (errno). */
int run_record_add_cgroup(struct run_record *r, int version, const char *path);

/* End r's record, once everything it names is gone: unlinked while still
 * locked, then closed. Safe on one never opened (fd -1). */
void run_record_close(struct run_record *r);

/* Parse a record's text (len bytes, not NUL-terminated) into f. Lines:
 * "dir PATH", "cgroup VERSION PATH". The run directory must be absolute,
 * free of "." and ".." components and named vmrun-*; each cgroup must lie
 * under /sys/fs/cgroup, free of "..". A last line without its newline (a
 * write cut short) is ignored. Pure. Returns 0, or -1 on anything else. */
int run_record_parse(const char *text, size_t len, struct run_record_facts *f);

/* Reclaim every dead run recorded in dir (see above), into st (zeroed
 * here). Live runs' records are left alone. Returns 0, or -1 with a reason
 * when dir cannot be read. */
int run_record_sweep(const char *dir, struct run_sweep *st, char *err, size_t errlen);

#endif
