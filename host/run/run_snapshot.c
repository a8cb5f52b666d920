/* Warm starts for the run library (run_exec.h): the snapshot a run
 * restores, made by a boot of its own when there is none, and dropped
 * when vmm refuses it. */
#include "run_exec.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "errmsg.h"

/* Why a snapshot boot did not end with vmm's exit 0, into err. */
static int snapshot_boot_failed(const struct reaped *rp, const char *said, char *err, size_t errlen)
{
	if (rp->cancelled)
		return errf(err, errlen, "cancelled");
	if (rp->killed)
		return errf(err, errlen, "vmm did not finish within %d s", RUN_SNAPSHOT_TIMEOUT_MS / 1000);
	if (said[0])
		return errf(err, errlen, "%s", said);
	if (WIFSIGNALED(rp->status))
		return errf(err, errlen, "vmm died of SIG%s", sigabbrev_np(WTERMSIG(rp->status)) ?
			    sigabbrev_np(WTERMSIG(rp->status)) : "?");
	return errf(err, errlen, "vmm exited with status %d", WEXITSTATUS(rp->status));
}

/* Boot the plan's VM in a jail of its own with vmm --snapshot-out, which
 * writes it into dir (bound writable) once the agent is ready and exits.
 * The run directory's socket directory is borrowed and left empty. On
 * failure, *vmm_failed says whether vmm itself failed (or never finished),
 * which another try would repeat, rather than the jail or a cancel. */
static int snapshot_boot(struct exec *x, const char *dir, bool *vmm_failed, char *err, size_t errlen)
{
	struct jail_spec js;
	struct jail j = { .uid_fd = -1 };
	struct reaped rp = { 0 };
	char said[400] = "";
	int rc = -1;
	snprintf(x->snap_id, sizeof(x->snap_id), "%.32s-snapshot", x->plan->run_id);
	run_spec_for(x, &js, x->snap_id, NULL, dir, true, x->plan->snap_argv);
	if (jail_prepare(&js, &j, err, errlen) || run_start_vmm(&js, &j, x->p.snap_err, err, errlen))
		goto out;
	run_reap(&j, x->plan, clock_mono_ms() + RUN_SNAPSHOT_TIMEOUT_MS, &rp);
	run_read_err(x, x->p.snap_err, said, sizeof(said), NULL, 0);
	if (rp.killed || rp.lost || !WIFEXITED(rp.status) || WEXITSTATUS(rp.status)) {
		snapshot_boot_failed(&rp, said, err, errlen);
		*vmm_failed = !rp.cancelled;
	} else {
		rc = 0;
	}
out:
	jail_cleanup(&j);
	const char *left[] = { x->p.uds, x->p.console, x->p.snap_err };
	for (size_t i = 0; i < sizeof(left) / sizeof(left[0]); i++)
		unlink(left[i]);
	return rc;
}

/* Make x->snap with its lock held: a boot into a fresh temporary
 * directory, renamed into place whole. */
static int snapshot_make(struct exec *x, char *err, size_t errlen)
{
	bool vmm_failed = false;
	if (snapshot_tmp_make(&x->snap, err, errlen))
		return -1;
	int rc = snapshot_boot(x, x->snap.tmp, &vmm_failed, err, errlen) || snapshot_commit(&x->snap, err, errlen)
			 ? -1 : 0;
	snapshot_tmp_remove(&x->snap);
	if (vmm_failed)
		(void)snapshot_mark_failed(&x->snap, err);
	return rc;
}

/* The snapshot for the plan's VM into x->snap: found (0), or made (1; made
 * anew when replace), or -1 with why. Two runs never both make one: the
 * second waits for the lock and then finds it. */
static int snapshot_ready(struct exec *x, bool replace, char *err, size_t errlen)
{
	const struct run_plan *plan = x->plan;
	char dir[PATH_MAX];
	struct snapshot_facts f;
	if (snapshot_cache_dir(dir, sizeof(dir), err, errlen) ||
	    snapshot_facts_gather(&f, plan->vmm, plan->kernel_fd, plan->rootfs_fd, plan->memory_mib, plan->cpus, NULL,
				  err, errlen) ||
	    snapshot_slot_init(&x->snap, dir, &f, err, errlen))
		return -1;
	if (!replace && snapshot_exists(&x->snap))
		return 0;
	if (snapshot_lock(&x->snap, plan->cancel_fd, RUN_SNAPSHOT_WAIT_MS, err, errlen))
		return -1;
	int rc;
	char why[400];
	if (!replace && snapshot_exists(&x->snap))
		rc = 0;
	else if (!replace && snapshot_failed(&x->snap, why, sizeof(why)))
		rc = errf(err, errlen, "making it failed before (%s); `vmrun snapshot` tries again", why);
	else
		rc = snapshot_make(x, err, errlen) ? -1 : 1;
	snapshot_unlock(&x->snap);
	return rc;
}

/* Warm start: restore the snapshot for this run's VM, made first if there
 * is none. Without one the run boots cold, and -v says why. */
void run_warm(struct exec *x)
{
	char why[512];
	int64_t t0 = clock_mono_ms();
	int got = snapshot_ready(x, false, why, sizeof(why));
	if (got < 0) {
		run_log(x, "snapshot: %s; booting cold", why);
		return;
	}
	x->restoring = true;
	if (got)
		run_log(x, "snapshot %s made in %lld ms", x->snap.path, (long long)(clock_mono_ms() - t0));
	else
		run_log(x, "snapshot %s found", x->snap.path);
}

/* vmm refused the snapshot before the agent said HELLO (another vmm
 * build, kernel, image or CPU than the key knew of, or damaged files):
 * it goes, so that the next run makes it again. */
void run_discard_refused(struct exec *x)
{
	const struct run_facts *f = &x->facts;
	if (!x->restoring || f->start_error || x->sr.hello_ms || !WIFEXITED(f->vmm_status) ||
	    WEXITSTATUS(f->vmm_status) != 1 || !strstr(x->vmm_said, "snapshot"))
		return;
	char err[512];
	if (snapshot_discard(&x->snap, RUN_SNAPSHOT_WAIT_MS, err, sizeof(err)))
		run_log(x, "snapshot %s refused, not removed: %s", x->snap.path, err);
	else
		run_log(x, "snapshot %s refused by vmm: removed", x->snap.path);
}

int run_snapshot_make(struct run_plan *plan, char *dir, size_t dirlen, char *err, size_t errlen)
{
	struct exec *x = calloc(1, sizeof(*x));
	if (!x)
		return errf(err, errlen, "out of memory");
	x->plan = plan;
	x->snap.lock_fd = -1;
	x->rec.fd = -1;
	int rc = -1;
	if (!run_dir_make(&x->p, &plan->caller, plan->run_id, err, errlen)) {
		run_track(x);
		if (snapshot_ready(x, true, err, errlen) > 0) {
			snprintf(dir, dirlen, "%s", x->snap.path);
			rc = 0;
		}
	}
	run_dir_remove(&x->p);
	run_record_close(&x->rec);
	free(x);
	return rc;
}

