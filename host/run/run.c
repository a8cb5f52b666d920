/* Executing a run plan: the run directory and workspace image, the jail
 * and vmm, the conversation with the agent under the deadline, teardown,
 * the artifacts, cleanup (run_classify, which decides how it ended from
 * the facts gathered here, is run_classify.c; warm starts are
 * run_snapshot.c, a sandbox's pauses run_sandbox.c). Every path, a
 * refusal, a timeout, a dead VM or a cancel included, ends in the same
 * cleanup. All state is the execution's own (struct exec, run_exec.h). */
#include "run_exec.h"

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
#include "run_pause.h"
#include "run_record.h"
#include "snapshot_cache.h"
#include "workspace.h"

void run_log(const struct exec *x, const char *fmt, ...)
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

bool run_cancelled(const struct run_plan *plan)
{
	struct pollfd p = { plan->cancel_fd, POLLIN, 0 };
	return plan->cancel_fd >= 0 && poll(&p, 1, 0) > 0;
}

/* ---- the run directory --------------------------------------------------- */

/* Reclaim what the runs of supervisors that died left behind, and keep
 * this run's record from now on (run_record.h), naming its run directory,
 * made just before. Neither fails the run: without a record, only this
 * supervisor's own crash would go unswept. */
void run_track(struct exec *x)
{
	char dir[PATH_MAX], err[512];
	struct run_sweep st;
	x->rec.fd = -1;
	if (run_record_dir(dir, sizeof(dir), err, sizeof(err))) {
		run_log(x, "%s", err);
		return;
	}
	if (run_record_sweep(dir, &st, err, sizeof(err)))
		run_log(x, "%s", err);
	else if (st.runs)
		run_log(x, "swept %u runs whose supervisor died: %u cgroups and %u run directories removed, %u kept",
		      st.runs, st.cgroups, st.dirs, st.failed);
	if (run_record_open(&x->rec, dir, x->plan->run_id, x->p.dir, err, sizeof(err)))
		run_log(x, "%s", err);
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
int run_dir_make(struct run_paths *p, const struct caller *c, const char *run_id, char *err, size_t errlen)
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
	snprintf(p->pause, sizeof(p->pause), "%s/pause", p->sock_dir);
	snprintf(p->pin, sizeof(p->pin), "%s/base", p->dir);
	if (mkdir(p->sock_dir, 0700) < 0)
		return errf(err, errlen, "%.300s: %s", p->sock_dir, strerror(errno));
	if (strlen(p->agent_sock) >= sizeof(((struct sockaddr_un *)0)->sun_path) - 1)
		return errf(err, errlen, "run directory path %.300s is too long for a Unix socket", p->dir);
	return 0;
}

/* Remove what this run created: the files we know, then the directory. */
void run_dir_remove(const struct run_paths *p)
{
	if (!p->dir[0])
		return;
	const char *files[] = { p->image, p->uds, p->agent_sock, p->console, p->vmm_err, p->snap_err };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		unlink(files[i]);
	run_pause_remove(p->pause, p->pin);
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
void run_spec_for(struct exec *x, struct jail_spec *js, const char *id, const char *image,
		     const char *snapshot, bool snapshot_rw, char *const *argv)
{
	const struct run_plan *plan = x->plan;
	*js = (struct jail_spec){
		.run_dir = x->p.dir, .vmm = plan->vmm, .kernel_fd = plan->kernel_fd, .rootfs_fd = plan->rootfs_fd,
		.image = image, .snapshot = snapshot, .snapshot_rw = snapshot_rw, .sock_dir = x->p.sock_dir,
		.run_id = id, .memory_mib = plan->memory_mib, .cpus = plan->cpus, .disk_mib = plan->disk_mib,
		.cpu_quota_pct = (unsigned)plan->pol.cpu_quota_pct, .stderr_fd = -1, .argv = argv,
		.allow_weaker = plan->allow_weaker_jail, .on_cgroup = record_cgroup, .on_cgroup_ctx = &x->rec,
		.may_pause = plan->sandbox,
	};
}

/* Start vmm in its jail with its stderr going to errpath (made now, so
 * it holds this vmm's words only). */
int run_start_vmm(struct jail_spec *js, struct jail *j, const char *errpath, char *err, size_t errlen)
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
void run_reap(struct jail *j, const struct run_plan *plan, int64_t deadline_ms, struct reaped *out)
{
	for (;;) {
		pid_t r = waitpid(j->pid, &out->status, WNOHANG);
		if (r == j->pid || (r < 0 && errno != EINTR))
			return;
		int64_t now = clock_mono_ms();
		if (!out->killed && (now >= deadline_ms || run_cancelled(plan))) {
			jail_kill(j);
			out->killed = true;
			out->cancelled = run_cancelled(plan);
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
long run_read_err(const struct exec *x, const char *path, char *said, size_t len, char *faults, size_t faults_len)
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
			run_log(x, "vmm's %s", session_printable(shown, sizeof(shown), line + strlen(VMM_LOG_PREFIX),
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
	char from[PATH_MAX + 64];
	if (plan->from_checkpoint[0]) {
		snprintf(from, sizeof(from), "%s/" RUN_CHECKPOINT_IMAGE, plan->from_checkpoint);
		return run_copy_workspace(x, from, out, err, errlen);
	}
	if (plan->workspace_image[0])
		return run_copy_workspace(x, plan->workspace_image, out, err, errlen);
	return workspace_create(x->p.image, plan->disk_mib, copy ? &src : NULL, PROTO_SANDBOX_UID, PROTO_SANDBOX_GID,
				out, err, errlen);
}

/* A sandbox's workspace as it starts, kept for its diffs: a fork's is its
 * checkpoint's (which never changes: linked where it can be), anyone
 * else's a copy of the image made before anything ran on it. */
static int run_keep_start(struct exec *x, char *err, size_t errlen)
{
	const char *dst = x->plan->workspace_start;
	char from[PATH_MAX + 64];
	unlink(dst);
	snprintf(from, sizeof(from), "%s/" RUN_CHECKPOINT_IMAGE, x->plan->from_checkpoint);
	int rc = x->plan->from_checkpoint[0] ? run_pause_link_or_copy(from, dst) : run_pause_copy(x->p.image, dst);
	return rc ? errf(err, errlen, "keeping the workspace's start in %.300s: %s", dst, strerror(errno)) : 0;
}

/* A sandbox's directory for its paused VM, the jailed vmm's to write. */
static int make_pause_dir(struct exec *x, char *err, size_t errlen)
{
	if (mkdir(x->p.pause, 0700) < 0 || (!x->jail.rootless && chown(x->p.pause, x->jail.uid, x->jail.gid) < 0))
		return errf(err, errlen, "%.300s: %s", x->p.pause, strerror(errno));
	return 0;
}

/* Run directory, jail, workspace image (charged to the run), the agent's
 * socket. */
static int prepare(struct exec *x, char *err, size_t errlen)
{
	struct run_plan *plan = x->plan;
	struct workspace_stats ws;
	if (run_dir_make(&x->p, &plan->caller, plan->run_id, err, errlen))
		return -1;
	run_track(x);
	bool fork = plan->from_checkpoint[0];
	if (!plan->cold && !fork)
		run_warm(x);
	if (fork && run_fork_snapshot(x, err, errlen))
		return -1;
	run_spec_for(x, &x->js, plan->run_id, x->p.image, x->restoring ? x->snap.path : NULL, false,
		     fork ? plan->resume_argv : x->restoring ? plan->restore_argv : plan->vmm_argv);
	if (jail_prepare(&x->js, &x->jail, err, errlen) || (plan->sandbox && make_pause_dir(x, err, errlen)) ||
	    (fork && run_fork_saved(x, err, errlen)) ||
	    jail_charged(&x->js, &x->jail, make_workspace, x, &ws, sizeof(ws), err, errlen) ||
	    (x->listen_fd = listen_agent(&x->p, &x->jail, err, errlen)) < 0 ||
	    (plan->net && run_net_start(&x->net, plan->net, plan->secret_ca_fd, plan->vmm, x->p.dir, x->p.uds, &x->js, &x->jail, err, errlen)))
		return -1;
	/* a parked VM's workspace is the one its sum was taken of, before
	 * any vmm reads it */
	if (plan->resume_parked && run_pause_check(x->p.pause, x->p.image, err, errlen))
		return -1;
	if (plan->workspace_start[0] && run_keep_start(x, err, errlen))
		return -1;
	run_log(x, "prepared: %s, %llu files, %llu dirs, %llu bytes", x->p.image, (unsigned long long)ws.files,
	      (unsigned long long)ws.dirs, (unsigned long long)ws.bytes);
	return 0;
}

/* ---- vmm ------------------------------------------------------------------ */

/* The run's vmm's stderr: its last line into the facts, and the jail's
 * clone-to-exec time in us (-1 if absent). */
static long read_vmm_err(struct exec *x)
{
	long ready_us = run_read_err(x, x->p.vmm_err, x->vmm_said, sizeof(x->vmm_said), x->vmm_faults, sizeof(x->vmm_faults));
	x->facts.vmm_said = x->vmm_said;
	if (x->vmm_faults[0])
		run_log(x, "the guest's device faults, as vmm counted them: %s", x->vmm_faults);
	return ready_us;
}

/* Wait for the run's vmm (see reap), into the facts. */
static void reap_vmm(struct exec *x, int64_t deadline_ms)
{
	struct reaped rp = { 0 };
	run_reap(&x->jail, x->plan, deadline_ms, &rp);
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
	if (run_start_vmm(&x->js, &x->jail, x->p.vmm_err, x->start_error, sizeof(x->start_error))) {
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
	run_log(x, "vmm started (pid %d%s), deadline in %g s", (int)x->jail.pid, x->restoring ? ", restoring" : "",
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
		f->session = plan->from_checkpoint[0] ? run_fork_session(x, conn, deadline)
						      : session_run(conn, &plan->proto, &io, deadline, &x->sr);
		if (plan->sandbox && f->session == SESSION_DONE) {
			run_log(x, "sandbox ready in %lld ms", (long long)(clock_mono_ms() - start));
			conn = run_sandbox_life(x, conn);
		}
		exit_at = clock_mono_ms();
		/* before the close, which vmm would pass on to the guest */
		if (f->session == SESSION_TIMEOUT && x->sr.hello_ms)
			ask_state(x);
		if (conn >= 0)
			close(conn);   /* the agent waits for this before it resets the VM */
	} else if (run_cancelled(plan)) {
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
	run_log(x, "jail (uid %u, cgroup v%d) ready in %ld us; agent \"%s\", boot %lld ms, run %lld ms, "
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
	    x->facts.vmm_lost || run_cancelled(plan))
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
	if (run_cancelled(plan)) {
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
	if (run_cancelled(plan)) {
		x->facts.cancelled = true;
		x->facts.start_error = "cancelled before the VM started";
	} else {
		run_vm(x);
	}
	run_classify(&x->facts, r);
	run_discard_refused(x);
	if (plan->net)
		run_net_finish(&x->net, r);
	log_console(x);
	extract(x);
cleanup:
	if (x->listen_fd >= 0)
		close(x->listen_fd);
	run_net_release(&x->net);
	jail_cleanup(&x->jail);
	run_dir_remove(&x->p);
	run_record_close(&x->rec);
	if (x->ended_ms)   /* the figure make eval's destruction times are made of */
		run_log(x, "torn down %lld ms after the command ended or its deadline passed",
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
