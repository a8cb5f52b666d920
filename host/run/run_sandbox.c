/* A sandbox's pauses, the run library's side (run_exec.h, run_pause.h):
 * vmm saves the VM when the agent has paused and exits; the files are
 * committed; a new vmm in the same jail resumes it when the sandbox goes
 * on, everything checked first. */
#include "run_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../vmm/log.h"
#include "clock.h"
#include "errmsg.h"
#include "run_pause.h"
#include "workspace.h"
#include "../../vmm/snapshot.h"

/* The agent sent PAUSED: vmm saves the VM into p.pause and exits; the
 * files are committed, and the snapshot pinned (once). Returns 0, or -1
 * with why (the VM is gone either way). */
static int pause_vm(struct exec *x, char *why, size_t len)
{
	struct reaped rp = { 0 };
	char said[400], err[512];
	int64_t t0 = clock_mono_ms();
	if (kill(x->jail.pid, VMM_PAUSE_SIGNAL) < 0)
		return errf(why, len, "pausing: signalling vmm: %s", strerror(errno));
	run_reap(&x->jail, x->plan, t0 + RUN_PAUSE_TIMEOUT_MS, &rp);
	run_read_err(x, x->p.vmm_err, said, sizeof(said), NULL, 0);
	if (rp.killed || rp.lost || !WIFEXITED(rp.status) || WEXITSTATUS(rp.status)) {
		if (said[0] || rp.killed)
			return errf(why, len, "pausing: %s", said[0] ? said : "vmm did not finish in time");
		if (WIFSIGNALED(rp.status))
			return errf(why, len, "pausing: vmm died of SIG%s", sigabbrev_np(WTERMSIG(rp.status)) ?: "?");
		return errf(why, len, "pausing: vmm exited with status %d", WEXITSTATUS(rp.status));
	}
	if (run_pause_commit(x->p.pause, x->p.image, err, sizeof(err)))
		return errf(why, len, "pausing: %s", err);
	if (!x->pinned && run_pause_pin(x->snap.path, x->p.pin) == 0)
		x->pinned = true;
	else if (!x->pinned)
		run_log(x, "the snapshot is not pinned (%s): a new one made meanwhile would refuse the resume",
		      strerror(errno));
	run_log(x, "paused in %lld ms", (long long)(clock_mono_ms() - t0));
	return 0;
}

/* Connections that reached the agent's socket while nothing expected
 * one: only the resumed agent's may be taken. */
static void drain_listener(int fd)
{
	int c;
	while ((c = accept4(fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		close(c);
}

/* A new vmm in the same jail, resuming from p.pause (everything checked
 * first, by the sum here and by vmm), and the agent's RESUME answered.
 * Returns the agent's connection, or -1 with why (nothing of the VM runs). */
static int resume_vm(struct exec *x, char *why, size_t len)
{
	struct run_plan *plan = x->plan;
	char err[512], said[400];
	int64_t t0 = clock_mono_ms(), deadline = t0 + RUN_RESUME_TIMEOUT_MS;
	if (run_pause_check(x->p.pause, x->p.image, err, sizeof(err)))
		return errf(why, len, "resuming: %s", err);
	drain_listener(x->listen_fd);
	unlink(x->p.vmm_err);
	x->js.argv = plan->resume_argv;
	if (x->pinned)
		x->js.snapshot = x->p.pin;
	if (run_start_vmm(&x->js, &x->jail, x->p.vmm_err, err, sizeof(err)))
		return errf(why, len, "resuming: %s", err);
	int pidfd = (int)syscall(SYS_pidfd_open, x->jail.pid, 0);
	int conn = session_accept(x->listen_fd, pidfd, plan->cancel_fd, deadline, err, sizeof(err));
	if (pidfd >= 0)
		close(pidfd);
	if (conn >= 0 && session_resume(conn, false, deadline, plan->cancel_fd, err, sizeof(err)) == 0) {
		run_log(x, "resumed in %lld ms (vmm pid %d)", (long long)(clock_mono_ms() - t0), (int)x->jail.pid);
		return conn;
	}
	if (conn >= 0)
		close(conn);
	struct reaped rp = { 0 };
	run_reap(&x->jail, plan, clock_mono_ms() + 2000, &rp);   /* a refusing vmm exits on its own */
	run_read_err(x, x->p.vmm_err, said, sizeof(said), NULL, 0);
	return errf(why, len, "resuming: %s", said[0] ? said : err);
}

/* ---- forks ------------------------------------------------------------------ */

int run_fork_snapshot(struct exec *x, char *err, size_t errlen)
{
	char base[PATH_MAX + 8];
	snprintf(base, sizeof(base), "%s/" RUN_CHECKPOINT_BASE, x->plan->from_checkpoint);
	struct stat st;
	if (stat(base, &st) < 0 || !S_ISDIR(st.st_mode))
		return errf(err, errlen, "checkpoint %.300s: %s", x->plan->from_checkpoint, strerror(errno ? errno : ENOTDIR));
	/* pinned by links, else (another file system: a cluster's snapshot
	 * dir) by a copy: the VM must not depend on its source, which a
	 * resume elsewhere or a new park removes */
	if (run_pause_pin(base, x->p.pin) == 0 || (errno == EXDEV && run_pause_keep_base(base, x->p.pin) == 0))
		x->pinned = true;
	const char *use = x->pinned ? x->p.pin : base;
	if (strlen(use) >= sizeof(x->snap.path))
		return errf(err, errlen, "checkpoint %.300s: path too long", x->plan->from_checkpoint);
	memcpy(x->snap.path, use, strlen(use) + 1);
	x->restoring = true;
	return 0;
}

int run_fork_saved(struct exec *x, char *err, size_t errlen)
{
	const char *names[] = { SNAP_STATE_FILE, SNAP_PAGES_FILE, RUN_PAUSE_SUM_FILE };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char from[PATH_MAX + 64], to[PATH_MAX + 128];
		snprintf(from, sizeof(from), "%s/%s", x->plan->from_checkpoint, names[i]);
		snprintf(to, sizeof(to), "%s/%s", x->p.pause, names[i]);
		if (run_pause_link_or_copy(from, to))
			return errf(err, errlen, "checkpoint %.300s: %s: %s", x->plan->from_checkpoint, names[i], strerror(errno));
	}
	return 0;
}

int run_copy_workspace(struct exec *x, const char *from, void *out, char *err, size_t errlen)
{
	struct stat st;
	memset(out, 0, sizeof(struct workspace_stats));
	if (stat(from, &st) < 0)
		return errf(err, errlen, "the workspace %.300s: %s", from, strerror(errno));
	if ((uint64_t)st.st_size > x->plan->disk_mib << 20)
		return errf(err, errlen, "the workspace %.300s (%llu MiB) is larger than the run's disk (%llu MiB)", from,
			    (unsigned long long)(st.st_size >> 20), (unsigned long long)x->plan->disk_mib);
	int fd = -1;
	/* allocated whole, as a new one is: the guest never meets the host's ENOSPC */
	if (run_pause_copy(from, x->p.image) || (fd = open(x->p.image, O_WRONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) < 0 ||
	    (errno = posix_fallocate(fd, 0, st.st_size)) != 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return errf(err, errlen, "the workspace %.300s: %s", from, strerror(e));
	}
	close(fd);
	return 0;
}

enum session_status run_fork_session(struct exec *x, int conn, int64_t deadline_ms)
{
	if (session_resume(conn, !x->plan->resume_parked, deadline_ms, x->plan->cancel_fd, x->sr.error, sizeof(x->sr.error)))
		return SESSION_FAILED;
	x->sr.hello_ms = clock_mono_ms();
	snprintf(x->sr.agent, sizeof(x->sr.agent), x->plan->resume_parked ? "resumed where it was parked"
										   : "resumed from a checkpoint");
	return SESSION_DONE;
}

/* A sandbox's VM from READY to its end: served, and at each pause saved
 * by vmm, freed, and started again from what was saved when the sandbox
 * goes on. Returns the agent's connection to close, or -1 when none is
 * open (vmm is gone then). */
int run_sandbox_life(struct exec *x, int conn)
{
	struct run_plan *plan = x->plan;
	for (;;) {
		struct run_serving where = { x->jail.cgroup_version == 2 ? x->jail.cgroup : "", x->p.image,
					     x->restoring && plan->paused };
		if (plan->serve(plan->ctx, conn, &where) != RUN_SERVE_PAUSE)
			return conn;
		char why[600];
		int rc = pause_vm(x, why, sizeof(why));
		/* only now: vmm would have passed the close on to the agent */
		close(conn);
		if (rc) {
			plan->paused(plan->ctx, RUN_PAUSE_FAILED, why, NULL);
			return -1;
		}
		struct run_saved saved = { x->p.pause, x->p.image, x->pinned ? x->p.pin : x->snap.path };
		if (plan->paused(plan->ctx, RUN_PAUSE_SAVED, NULL, &saved))
			return -1;
		if ((conn = resume_vm(x, why, sizeof(why))) < 0) {
			plan->paused(plan->ctx, RUN_PAUSE_FAILED, why, NULL);
			return -1;
		}
	}
}

