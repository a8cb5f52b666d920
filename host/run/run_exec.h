/* The run library's execution of a plan, inside: what run.c (the run
 * directory, vmm, the conversation, the artifacts), run_snapshot.c (warm
 * starts) and run_sandbox.c (a sandbox's pauses) share. Nothing outside
 * host/run/ includes this; the API is run.h. */
#ifndef VMRUN_RUN_EXEC_H
#define VMRUN_RUN_EXEC_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "jail.h"
#include "run.h"
#include "run_net.h"
#include "run_record.h"
#include "session.h"
#include "snapshot_cache.h"

struct run_paths {
	char dir[PATH_MAX];             /* the run directory */
	char sock_dir[PATH_MAX + 32];   /* becomes /run in the jail */
	char image[PATH_MAX + 64], agent_sock[PATH_MAX + 96];
	char uds[PATH_MAX + 64], console[PATH_MAX + 64], vmm_err[PATH_MAX + 64];
	char snap_err[PATH_MAX + 64];   /* the stderr of the vmm that makes a snapshot */
	char pause[PATH_MAX + 64];      /* a sandbox's paused VM (JAIL_PAUSE_DIR in the jail) */
	char pin[PATH_MAX + 64];        /* the snapshot it was restored from, linked */
};

/* One execution of a plan. */
struct exec {
	struct run_plan *plan;
	struct run_result *r;
	struct run_paths p;
	struct run_record rec;       /* names the run directory and cgroups while the run lives */
	struct jail_spec js;
	struct jail jail;
	int listen_fd;
	struct run_net net;          /* the network proxy, when the plan allows network */
	struct session_result sr;
	struct run_facts facts;
	char start_error[512];
	char vmm_said[400];
	char vmm_faults[400];   /* vmm's count of the guest's device faults, for -v */
	/* Warm start: the snapshot this run restores (restoring), and the id
	 * that names the cgroup of the boot that makes one. */
	struct snapshot_slot snap;
	bool restoring;
	char snap_id[48];
	int64_t ended_ms;            /* when the command ended or its deadline passed (0: never started) */
	bool pinned;                 /* a sandbox's snapshot is linked at p.pin */
};

/* How a jailed vmm ended, as reap saw it. */
struct reaped {
	int status;                  /* wait status */
	bool killed;                 /* we killed its cgroup (deadline, or cancel) */
	bool lost;                   /* it did not die after SIGKILL */
	bool cancelled;              /* the kill was the plan's cancel */
};

/* Log a line through the plan's log hook (nothing without one). */
void run_log(const struct exec *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Whether the plan's cancel fd is readable. */
bool run_cancelled(const struct run_plan *plan);

/* Reclaim what runs of dead supervisors left, and keep x's record from
 * now on (run_record.h); neither fails the run. */
void run_track(struct exec *x);

/* Make the run directory "vmrun-ID-XXXXXX" in $TMPDIR, as c may (see
 * run.c) and fill p's paths. 0, or -1 with why in err. */
int run_dir_make(struct run_paths *p, const struct caller *c, const char *run_id, char *err, size_t errlen);

/* Remove what the run created in p, then the directory. */
void run_dir_remove(const struct run_paths *p);

/* A jail spec for one vmm of x: the run's files and limits, with image
 * and snapshot as given (NULL: none), id naming its cgroup, argv vmm's. */
void run_spec_for(struct exec *x, struct jail_spec *js, const char *id, const char *image, const char *snapshot,
		  bool snapshot_rw, char *const *argv);

/* Start vmm in its jail with its stderr into errpath (made now, O_EXCL).
 * 0, or -1 with why in err. */
int run_start_vmm(struct jail_spec *js, struct jail *j, const char *errpath, char *err, size_t errlen);

/* Wait for j's vmm until deadline_ms (at once when the plan is cancelled),
 * then kill its cgroup and wait RUN_REAP_AFTER_KILL_MS more; into out. */
void run_reap(struct jail *j, const struct run_plan *plan, int64_t deadline_ms, struct reaped *out);

/* Read a vmm's stderr file: its words into said, its guest-faults line
 * into faults (when not NULL), its state lines to x's log; returns the
 * jail's clone-to-exec time in us, or -1. */
long run_read_err(const struct exec *x, const char *path, char *said, size_t len, char *faults, size_t faults_len);

/* ---- run_snapshot.c ---- */

/* Warm start: the snapshot for x's VM, made first if there is none
 * (x->restoring says whether there is one; -v says why not). */
void run_warm(struct exec *x);

/* vmm refused the snapshot before HELLO: it goes, so that the next run
 * makes it again. */
void run_discard_refused(struct exec *x);

/* ---- run_sandbox.c ---- */

/* A sandbox's VM from READY to its end: served (the plan's serve hook),
 * and at each pause saved by vmm, freed and started again from what was
 * saved when the sandbox goes on. Returns the agent's connection to
 * close, or -1 when none is open (vmm is gone then). */
int run_sandbox_life(struct exec *x, int conn);

/* A fork of a checkpoint (run_plan.from_checkpoint): the snapshot it is
 * against, linked into p.pin (copied there from another file system;
 * else used where it is), as x's snapshot.
 * 0, or -1 with why in err. */
int run_fork_snapshot(struct exec *x, char *err, size_t errlen);

/* Its saved VM (state, pages, the workspace's sum) linked into p.pause,
 * once the jail's directories exist. 0, or -1 with why in err. */
int run_fork_saved(struct exec *x, char *err, size_t errlen);

/* The run's workspace image (x->p.image) as a copy of from (a
 * checkpoint's: a fork's, a verification run's), allocated whole; out is
 * the workspace_stats make_workspace reports (zeros). 0, or -1 with why
 * (an image larger than the run's disk too). */
int run_copy_workspace(struct exec *x, const char *from, void *out, char *err, size_t errlen);

/* Its first conversation: the agent, which was paused, connects; RESUME
 * with a fresh seed (none for a parked VM: it is the same sandbox); READY. SESSION_DONE, or SESSION_FAILED with why in
 * x->sr.error. */
enum session_status run_fork_session(struct exec *x, int conn, int64_t deadline_ms);

#endif
