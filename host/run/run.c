/* Executing a run plan: the run directory and workspace image, the jail
 * and vmm, the conversation with the agent under the deadline, teardown,
 * the artifacts, cleanup (run_classify, which decides how it ended from
 * the facts gathered here, is run_classify.c). Every path, a refusal, a timeout, a dead VM or a cancel included, ends
 * in the same cleanup. All state is the execution's own (struct exec). */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../vmm/log.h"
#include "artifacts.h"
#include "clock.h"
#include "errmsg.h"
#include "jail.h"
#include "run_net.h"
#include "run_record.h"
#include "snapshot_cache.h"
#include "workspace.h"

struct run_paths {
	char dir[PATH_MAX];             /* the run directory */
	char sock_dir[PATH_MAX + 32];   /* becomes /run in the jail */
	char image[PATH_MAX + 64], agent_sock[PATH_MAX + 96];
	char uds[PATH_MAX + 64], console[PATH_MAX + 64], vmm_err[PATH_MAX + 64];
	char snap_err[PATH_MAX + 64];   /* the stderr of the vmm that makes a snapshot */
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
};

/* How a jailed vmm ended, as reap saw it. */
struct reaped {
	int status;                  /* wait status */
	bool killed;                 /* we killed its cgroup (deadline, or cancel) */
	bool lost;                   /* it did not die after SIGKILL */
	bool cancelled;              /* the kill was the plan's cancel */
};

static void logf_(const struct exec *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(const struct exec *x, const char *fmt, ...)
{
	if (!x->plan->log)
		return;
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	x->plan->log(x->plan->ctx, false, line);
}

static bool cancelled(const struct run_plan *plan)
{
	struct pollfd p = { plan->cancel_fd, POLLIN, 0 };
	return plan->cancel_fd >= 0 && poll(&p, 1, 0) > 0;
}

/* ---- the run directory --------------------------------------------------- */

/* Reclaim what the runs of supervisors that died left behind, and keep
 * this run's record from now on (run_record.h), naming its run directory,
 * made just before. Neither fails the run: without a record, only this
 * supervisor's own crash would go unswept. */
static void track(struct exec *x)
{
	char dir[PATH_MAX], err[512];
	struct run_sweep st;
	x->rec.fd = -1;
	if (run_record_dir(dir, sizeof(dir), err, sizeof(err))) {
		logf_(x, "%s", err);
		return;
	}
	if (run_record_sweep(dir, &st, err, sizeof(err)))
		logf_(x, "%s", err);
	else if (st.runs)
		logf_(x, "swept %u runs whose supervisor died: %u cgroups and %u run directories removed, %u kept",
		      st.runs, st.cgroups, st.dirs, st.failed);
	if (run_record_open(&x->rec, dir, x->plan->run_id, x->p.dir, err, sizeof(err)))
		logf_(x, "%s", err);
}

/* Make the run directory "vmrun-ID-XXXXXX" (mode 0700) in the directory
 * open as dfd, named dir, as mkdtemp would but through the fd: the name
 * into p->dir. Returns 0, or -1 with errno set. */
static int mkdtempat(int dfd, const char *dir, const char *run_id, struct run_paths *p)
{
	for (int tries = 0; tries < 100; tries++) {
		uint8_t b[3];
		char name[40];
		if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
			return -1;
		snprintf(name, sizeof(name), "vmrun-%.12s-%02x%02x%02x", run_id, b[0], b[1], b[2]);
		if (mkdirat(dfd, name, 0700) == 0) {
			snprintf(p->dir, sizeof(p->dir), "%.3000s/%s", dir, name);
			return 0;
		}
		if (errno != EEXIST)
			return -1;
	}
	return -1;
}

/* The run directory, in $TMPDIR. Acting for someone else, only where they
 * cannot rename it, or any directory above it, away from under root's
 * path-based work (chown, bind mounts, unlink): caller_work_dir checks
 * every directory from / down, and the path used is the one it resolved
 * once; the run directory is made through the fd of the one checked. */
static int make_run_dir(struct run_paths *p, const struct caller *c, const char *run_id, char *err, size_t errlen)
{
	const char *tmp = getenv("TMPDIR");
	char why[512], dir[PATH_MAX];
	tmp = tmp && *tmp ? tmp : "/tmp";
	int dfd = caller_work_dir(c, tmp, dir, sizeof(dir), why, sizeof(why));
	if (dfd < 0)
		return errf(err, errlen, "TMPDIR %s", why);
	int rc = mkdtempat(dfd, dir, run_id, p);
	int e = errno;
	close(dfd);
	if (rc < 0) {
		errf(err, errlen, "run directory in %.300s: %s", dir, strerror(e));
		p->dir[0] = '\0';
		return -1;
	}
	snprintf(p->image, sizeof(p->image), "%s/workspace.ext4", p->dir);
	snprintf(p->sock_dir, sizeof(p->sock_dir), "%s/sock", p->dir);
	snprintf(p->uds, sizeof(p->uds), "%s/" PROTO_VSOCK_UDS, p->sock_dir);
	snprintf(p->agent_sock, sizeof(p->agent_sock), PROTO_VSOCK_UDS_PORT_FMT, p->uds, PROTO_VSOCK_PORT);
	snprintf(p->console, sizeof(p->console), "%s/console", p->sock_dir);
	snprintf(p->vmm_err, sizeof(p->vmm_err), "%s/vmm.err", p->dir);
	snprintf(p->snap_err, sizeof(p->snap_err), "%s/snapshot.err", p->dir);
	if (mkdir(p->sock_dir, 0700) < 0)
		return errf(err, errlen, "%.300s: %s", p->sock_dir, strerror(errno));
	if (strlen(p->agent_sock) >= sizeof(((struct sockaddr_un *)0)->sun_path) - 1)
		return errf(err, errlen, "run directory path %.300s is too long for a Unix socket", p->dir);
	return 0;
}

/* Remove what this run created: the files we know, then the directory. */
static void remove_run_dir(const struct run_paths *p)
{
	if (!p->dir[0])
		return;
	const char *files[] = { p->image, p->uds, p->agent_sock, p->console, p->vmm_err, p->snap_err };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		unlink(files[i]);
	rmdir(p->sock_dir);
	rmdir(p->dir);
}

/* The agent's socket, connectable by the jailed vmm's uid. */
static int listen_agent(const struct run_paths *p, const struct jail *j, char *err, size_t errlen)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	memcpy(a.sun_path, p->agent_sock, strlen(p->agent_sock) + 1);   /* length checked in make_run_dir */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1) < 0 ||
	    chown(p->agent_sock, j->uid, j->gid) < 0) {
		errf(err, errlen, "agent socket %s: %s", p->agent_sock, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static void record_cgroup(void *ctx, int version, const char *path)
{
	(void)run_record_add_cgroup(ctx, version, path);   /* no record: only a sweep after a crash misses it */
}

/* A jail spec for one vmm of this execution: the run's files and limits,
 * with the workspace image and the snapshot directory as given (NULL:
 * none), and id naming its cgroup. */
static void spec_for(struct exec *x, struct jail_spec *js, const char *id, const char *image,
		     const char *snapshot, bool snapshot_rw, char *const *argv)
{
	const struct run_plan *plan = x->plan;
	*js = (struct jail_spec){
		.run_dir = x->p.dir, .vmm = plan->vmm, .kernel_fd = plan->kernel_fd, .rootfs_fd = plan->rootfs_fd,
		.image = image, .snapshot = snapshot, .snapshot_rw = snapshot_rw, .sock_dir = x->p.sock_dir,
		.run_id = id, .memory_mib = plan->memory_mib, .cpus = plan->cpus, .disk_mib = plan->disk_mib,
		.cpu_quota_pct = (unsigned)plan->pol.cpu_quota_pct, .stderr_fd = -1, .argv = argv,
		.allow_weaker = plan->allow_weaker_jail, .on_cgroup = record_cgroup, .on_cgroup_ctx = &x->rec,
	};
}

/* Start vmm in its jail with its stderr going to errpath (made now, so
 * it holds this vmm's words only). */
static int start_vmm(struct jail_spec *js, struct jail *j, const char *errpath, char *err, size_t errlen)
{
	int errfd = open(errpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (errfd < 0)
		return errf(err, errlen, "%.300s: %s", errpath, strerror(errno));
	js->stderr_fd = errfd;
	int rc = jail_start(js, j, err, errlen);
	close(errfd);
	js->stderr_fd = -1;
	return rc;
}

/* Wait for the vmm of j until deadline_ms (at once when the plan is
 * cancelled), then kill its whole cgroup and wait at most
 * RUN_REAP_AFTER_KILL_MS more: a vmm that SIGKILL cannot end (a thread
 * held in the host kernel) must not hold the run forever. */
static void reap(struct jail *j, const struct run_plan *plan, int64_t deadline_ms, struct reaped *out)
{
	for (;;) {
		pid_t r = waitpid(j->pid, &out->status, WNOHANG);
		if (r == j->pid || (r < 0 && errno != EINTR))
			return;
		int64_t now = clock_mono_ms();
		if (!out->killed && (now >= deadline_ms || cancelled(plan))) {
			jail_kill(j);
			out->killed = true;
			out->cancelled = cancelled(plan);
			deadline_ms = now + RUN_REAP_AFTER_KILL_MS;
		} else if (out->killed && now >= deadline_ms) {
			out->lost = true;
			return;
		}
		usleep(2000);
	}
}

/* Read a vmm's stderr file once: what vmm said into said, never its
 * guest-faults line (which vmm writes last, after any error) nor its state
 * lines, the faults line into faults when not NULL, the state lines to x's
 * log, and the jail's clone-to-exec time, returned in us (-1 if absent). */
static long read_err(const struct exec *x, const char *path, char *said, size_t len, char *faults, size_t faults_len)
{
	said[0] = '\0';
	if (faults)
		faults[0] = '\0';
	long ready_us = -1;
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char line[512];
	const char *tag = VMM_LOG_PREFIX VMM_FAULTS_TAG, *state = VMM_LOG_PREFIX VMM_STATE_TAG;
	while (fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\n");
		if (!strncmp(line, JAIL_READY_PREFIX, strlen(JAIL_READY_PREFIX)))
			ready_us = atol(line + strlen(JAIL_READY_PREFIX));
		else if (!strncmp(line, tag, strlen(tag))) {
			if (faults)
				session_printable(faults, faults_len, line + strlen(tag), n - strlen(tag));
		} else if (!strncmp(line, state, strlen(state))) {
			char shown[sizeof(line)];
			logf_(x, "vmm's %s", session_printable(shown, sizeof(shown), line + strlen(VMM_LOG_PREFIX),
							      n - strlen(VMM_LOG_PREFIX)));
		} else if (line[0] != '\n') {   /* vmm runs the guest: its words too */
			session_printable(said, len, line, n);
		}
	}
	fclose(f);
	return ready_us;
}

/* A run that timed out after its agent said HELLO, logged (-v, vmrund's
 * worker): ask vmm for its devices' state before it is killed, and wait
 * (RUN_STATE_WAIT_MS at most) for the lines, which read_err logs. They say
 * whether the guest still had buffers and interrupts and what data was in
 * flight, which tells a stuck guest from a stuck device. */
static void ask_state(const struct exec *x)
{
	struct stat st;
	if (!x->plan->log || stat(x->p.vmm_err, &st) < 0 || kill(x->jail.pid, VMM_STATE_SIGNAL) < 0)
		return;
	off_t before = st.st_size;
	for (int64_t until = clock_mono_ms() + RUN_STATE_WAIT_MS; clock_mono_ms() < until;) {
		if (stat(x->p.vmm_err, &st) == 0 && st.st_size > before)
			return;
		usleep(1000);
	}
}

/* ---- the snapshot ---------------------------------------------------------- */

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
	spec_for(x, &js, x->snap_id, NULL, dir, true, x->plan->snap_argv);
	if (jail_prepare(&js, &j, err, errlen) || start_vmm(&js, &j, x->p.snap_err, err, errlen))
		goto out;
	reap(&j, x->plan, clock_mono_ms() + RUN_SNAPSHOT_TIMEOUT_MS, &rp);
	read_err(x, x->p.snap_err, said, sizeof(said), NULL, 0);
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
static void warm(struct exec *x)
{
	char why[512];
	int64_t t0 = clock_mono_ms();
	int got = snapshot_ready(x, false, why, sizeof(why));
	if (got < 0) {
		logf_(x, "snapshot: %s; booting cold", why);
		return;
	}
	x->restoring = true;
	if (got)
		logf_(x, "snapshot %s made in %lld ms", x->snap.path, (long long)(clock_mono_ms() - t0));
	else
		logf_(x, "snapshot %s found", x->snap.path);
}

/* vmm refused the snapshot before the agent said HELLO (another vmm
 * build, kernel, image or CPU than the key knew of, or damaged files):
 * it goes, so that the next run makes it again. */
static void discard_refused(struct exec *x)
{
	const struct run_facts *f = &x->facts;
	if (!x->restoring || f->start_error || x->sr.hello_ms || !WIFEXITED(f->vmm_status) ||
	    WEXITSTATUS(f->vmm_status) != 1 || !strstr(x->vmm_said, "snapshot"))
		return;
	char err[512];
	if (snapshot_discard(&x->snap, RUN_SNAPSHOT_WAIT_MS, err, sizeof(err)))
		logf_(x, "snapshot %s refused, not removed: %s", x->snap.path, err);
	else
		logf_(x, "snapshot %s refused by vmm: removed", x->snap.path);
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
	if (!make_run_dir(&x->p, &plan->caller, plan->run_id, err, errlen)) {
		track(x);
		if (snapshot_ready(x, true, err, errlen) > 0) {
			snprintf(dir, dirlen, "%s", x->snap.path);
			rc = 0;
		}
	}
	remove_run_dir(&x->p);
	run_record_close(&x->rec);
	free(x);
	return rc;
}

/* ---- the run ---------------------------------------------------------------- */

/* The workspace image, made in the run's cgroup by jail_charged. */
static int make_workspace(void *ctx, void *out, char *err, size_t errlen)
{
	struct exec *x = ctx;
	struct run_plan *plan = x->plan;
	struct workspace_file files[RUN_MAX_SOURCES];
	for (unsigned i = 0; i < plan->nsources; i++)
		files[i] = (struct workspace_file){ plan->source_fd[i], plan->source_name[i] };
	struct workspace_source src = { .dirfd = plan->workspace_fd, .as = &plan->caller, .files = files,
					.nfiles = plan->nsources,
					.name = plan->workspace_fd >= 0 ? "--workspace" : "the source files" };
	bool copy = plan->workspace_fd >= 0 || plan->nsources;
	return workspace_create(x->p.image, plan->disk_mib, copy ? &src : NULL, PROTO_SANDBOX_UID, PROTO_SANDBOX_GID,
				out, err, errlen);
}

/* Run directory, jail, workspace image (charged to the run), the agent's
 * socket. */
static int prepare(struct exec *x, char *err, size_t errlen)
{
	struct run_plan *plan = x->plan;
	struct workspace_stats ws;
	if (make_run_dir(&x->p, &plan->caller, plan->run_id, err, errlen))
		return -1;
	track(x);
	if (!plan->cold)
		warm(x);
	spec_for(x, &x->js, plan->run_id, x->p.image, x->restoring ? x->snap.path : NULL, false,
		 x->restoring ? plan->restore_argv : plan->vmm_argv);
	if (jail_prepare(&x->js, &x->jail, err, errlen) ||
	    jail_charged(&x->js, &x->jail, make_workspace, x, &ws, sizeof(ws), err, errlen) ||
	    (x->listen_fd = listen_agent(&x->p, &x->jail, err, errlen)) < 0 ||
	    (plan->net && run_net_start(&x->net, plan->net, plan->secret_ca_fd, plan->vmm, x->p.dir, x->p.uds, &x->js, &x->jail, err, errlen)))
		return -1;
	logf_(x, "prepared: %s, %llu files, %llu dirs, %llu bytes", x->p.image, (unsigned long long)ws.files,
	      (unsigned long long)ws.dirs, (unsigned long long)ws.bytes);
	return 0;
}

/* ---- vmm ------------------------------------------------------------------ */

/* The run's vmm's stderr: its last line into the facts, and the jail's
 * clone-to-exec time in us (-1 if absent). */
static long read_vmm_err(struct exec *x)
{
	long ready_us = read_err(x, x->p.vmm_err, x->vmm_said, sizeof(x->vmm_said), x->vmm_faults, sizeof(x->vmm_faults));
	x->facts.vmm_said = x->vmm_said;
	if (x->vmm_faults[0])
		logf_(x, "the guest's device faults, as vmm counted them: %s", x->vmm_faults);
	return ready_us;
}

/* Wait for the run's vmm (see reap), into the facts. */
static void reap_vmm(struct exec *x, int64_t deadline_ms)
{
	struct reaped rp = { 0 };
	reap(&x->jail, x->plan, deadline_ms, &rp);
	x->facts.vmm_status = rp.status;
	x->facts.vmm_killed = rp.killed;
	x->facts.vmm_lost = rp.lost;
	x->facts.oom_kills = jail_oom_kills(&x->jail);
	x->facts.cancelled |= rp.cancelled;
}

/* The command's output: capped here per stream at max_output whoever
 * reads it (outbuf_take), since a guest need not honour the cap it was
 * sent; streamed through the plan's output, kept for the result, or both
 * (vmrund's worker streams it and keeps it). */
static void on_output(void *ctx, unsigned stage, uint16_t type, const uint8_t *data, uint32_t len)
{
	struct exec *x = ctx;
	if (stage >= x->r->nstages)
		return;   /* the session refuses a stage past the request's first */
	struct run_stage *st = &x->r->stage[stage];
	struct outbuf *b = type == PROTO_STDOUT ? &st->out : &st->err;
	size_t n;
	if (!x->plan->output || x->plan->keep_output) {
		uint64_t before = b->passed;
		outbuf_append(b, data, len);
		n = (size_t)(b->passed - before);
	} else {
		n = outbuf_take(b, len);
	}
	if (n && x->plan->output)
		x->plan->output(x->plan->ctx, x->plan->proto.stage[stage].kind, type, data, n);
}

/* The plan's gate, in the session's terms. */
static int on_gate(void *ctx, int64_t deadline_ms)
{
	struct exec *x = ctx;
	return x->plan->gate(x->plan->ctx, deadline_ms);
}

/* From vmm's start in its jail to its exit: the facts for run_classify. */
static void run_vm(struct exec *x)
{
	struct run_plan *plan = x->plan;
	struct run_result *r = x->r;
	struct run_facts *f = &x->facts;
	int64_t start = clock_mono_ms();
	int64_t deadline = start + (int64_t)(plan->timeout_s * 1000.0);
	if (start_vmm(&x->js, &x->jail, x->p.vmm_err, x->start_error, sizeof(x->start_error))) {
		f->start_error = x->start_error;
		return;
	}
	f->vmm_pid = x->jail.pid;
	r->restored = x->restoring;
	r->jail.built = true;
	r->jail.rootless = x->jail.rootless;
	r->jail.own_uid = x->jail.uid_held;
	r->jail.cgroup_version = x->jail.cgroup_version;
	r->jail.cgroup_delegated = x->jail.cgroup_delegated;
	logf_(x, "vmm started (pid %d%s), deadline in %g s", (int)x->jail.pid, x->restoring ? ", restoring" : "",
	      plan->timeout_s);
	struct session_io io = { .stdin_fd = plan->stdin_fd, .cancel_fd = plan->cancel_fd, .output = on_output,
				 .gate = plan->gate ? on_gate : NULL, .ctx = x };
	memcpy(io.stage_timeout_ms, plan->stage_timeout_ms, sizeof(io.stage_timeout_ms));
	io.run_id = plan->run_id;
	int64_t exit_at = 0;
	int pidfd = (int)syscall(SYS_pidfd_open, x->jail.pid, 0);
	int conn = session_accept(x->listen_fd, pidfd, plan->cancel_fd, deadline, x->sr.error, sizeof(x->sr.error));
	if (pidfd >= 0)
		close(pidfd);
	f->session = SESSION_FAILED;
	if (conn >= 0) {
		f->session = session_run(conn, &plan->proto, &io, deadline, &x->sr);
		if (plan->sandbox && f->session == SESSION_DONE) {
			logf_(x, "sandbox ready in %lld ms", (long long)(clock_mono_ms() - start));
			struct run_serving where = { x->jail.cgroup_version == 2 ? x->jail.cgroup : "", x->p.image };
			plan->serve(plan->ctx, conn, &where);
		}
		exit_at = clock_mono_ms();
		/* before the close, which vmm would pass on to the guest */
		if (f->session == SESSION_TIMEOUT && x->sr.hello_ms)
			ask_state(x);
		close(conn);   /* the agent waits for this before it resets the VM */
	} else if (cancelled(plan)) {
		f->session = SESSION_CANCELLED;
	} else if (clock_mono_ms() >= deadline) {
		f->session = SESSION_TIMEOUT;
	}
	f->cancelled = f->session == SESSION_CANCELLED;
	f->ended_ms = exit_at ? exit_at : clock_mono_ms();
	r->boot = (x->sr.hello_ms ? x->sr.hello_ms : clock_mono_ms()) - start;
	r->run = x->sr.hello_ms ? (exit_at ? exit_at : clock_mono_ms()) - x->sr.hello_ms : 0;
	/* from the session's end: asking vmm's state delays the kill, so it
	 * is part of the teardown's time */
	int64_t teardown_from = exit_at ? exit_at : clock_mono_ms();
	x->ended_ms = teardown_from;
	reap_vmm(x, f->session == SESSION_DONE ? teardown_from + RUN_TEARDOWN_GRACE_MS : teardown_from);
	r->teardown = clock_mono_ms() - teardown_from;
	long ready_us = read_vmm_err(x);
	logf_(x, "jail (uid %u, cgroup v%d) ready in %ld us; agent \"%s\", boot %lld ms, run %lld ms, "
	      "teardown %lld ms, vmm status %d", x->jail.uid, x->jail.cgroup_version, ready_us, x->sr.agent,
	      (long long)r->boot, (long long)r->run, (long long)r->teardown, f->vmm_status);
}

/* ---- after the run ------------------------------------------------------ */

/* The guest console, line by line, for -v. */
static void log_console(const struct exec *x)
{
	if (!x->plan->log)
		return;
	FILE *f = fopen(x->p.console, "re");
	if (!f)
		return;
	char line[1024], shown[1024];
	while (fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\n");
		if (n && line[n - 1] == '\r')
			n--;   /* the serial console ends its lines with CR LF */
		x->plan->log(x->plan->ctx, true, session_printable(shown, sizeof(shown), line, n));
	}
	fclose(f);
}

/* Copy the artifacts out, only after the guest finished normally: an
 * image cut short by a timeout or a crash is not read. The helper runs as
 * a uid of its own, reserved like the jail's, and what it copies becomes
 * the caller's. */
static void extract(struct exec *x)
{
	struct run_plan *plan = x->plan;
	struct run_result *r = x->r;
	if (plan->artifacts_fd < 0 ||
	    (r->term != TERM_EXITED && r->term != TERM_SIGNALED && r->term != TERM_COMPILE_ERROR) ||
	    x->facts.vmm_lost || cancelled(plan))
		return;
	int64_t t0 = clock_mono_ms();
	char err[512];
	struct artifacts_limits lim = {
		.max_bytes = plan->pol.artifacts_max_bytes, .max_files = plan->pol.artifacts_max_files,
		.max_depth = (unsigned)plan->pol.artifacts_max_depth, .max_path = ARTIFACT_PATH_MAX - 1,
		.timeout_ms = RUN_EXTRACT_TIMEOUT_MS,
	};
	struct artifacts_ids ids = { getuid(), getgid(), plan->caller.uid, plan->caller.gid };
	struct jail helper = { .uid_fd = -1 };
	int image = -1;
	plan->extracted = true;
	if (geteuid() == 0) {
		if (jail_reserve_uid(&x->js, &helper, err, sizeof(err))) {
			result_add_message(r, "%s", err);
			goto out;
		}
		ids.helper_uid = helper.uid;
		ids.helper_gid = (gid_t)helper.uid;
	}
	if ((image = open(x->p.image, O_RDONLY | O_CLOEXEC)) < 0) {
		result_add_message(r, "artifacts: %s: %s", x->p.image, strerror(errno));
		goto out;
	}
	if (artifacts_extract(image, plan->artifacts_fd, &ids, &lim, &r->artifacts, err, sizeof(err)))
		result_add_message(r, "%s", err);   /* it says "artifacts: ..." itself */
out:
	if (image >= 0)
		close(image);
	jail_release_uid(&helper);
	r->extract = clock_mono_ms() - t0;
}

void run_execute(struct run_plan *plan, struct run_result *r)
{
	int64_t t0 = clock_mono_ms();
	struct exec *x = calloc(1, sizeof(*x));
	if (!x) {
		r->term = TERM_ERROR;
		result_message(r, "out of memory");
		return;
	}
	x->plan = plan;
	x->r = r;
	x->listen_fd = -1;
	x->net.control = -1;
	x->net.helper.uid_fd = -1;
	x->snap.lock_fd = -1;
	x->rec.fd = -1;
	x->facts.timeout_s = plan->timeout_s;
	x->facts.sr = &x->sr;
	char err[512];
	if (cancelled(plan)) {
		r->cancelled = true;
		result_message(r, "cancelled before the VM started");
		goto cleanup;
	}
	if (prepare(x, err, sizeof(err))) {
		r->term = TERM_ERROR;
		result_message(r, "%s", err);
		goto cleanup;
	}
	r->prepare = clock_mono_ms() - t0;
	if (cancelled(plan)) {
		x->facts.cancelled = true;
		x->facts.start_error = "cancelled before the VM started";
	} else {
		run_vm(x);
	}
	run_classify(&x->facts, r);
	discard_refused(x);
	if (plan->net)
		run_net_finish(&x->net, r);
	log_console(x);
	extract(x);
cleanup:
	if (x->listen_fd >= 0)
		close(x->listen_fd);
	run_net_release(&x->net);
	jail_cleanup(&x->jail);
	remove_run_dir(&x->p);
	run_record_close(&x->rec);
	if (x->ended_ms)   /* the figure make eval's destruction times are made of */
		logf_(x, "torn down %lld ms after the command ended or its deadline passed",
		      (long long)(clock_mono_ms() - x->ended_ms));
	free(x);
}

int run_cancel_signals(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	signal(SIGPIPE, SIG_IGN);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -1;
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}
