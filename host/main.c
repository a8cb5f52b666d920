/* vmrun: run one command in a fresh microVM.
 *
 * main is straight-line: parse, check the request against the policy,
 * prepare (run directory, workspace image, the agent's socket), run (start
 * vmm, talk to the agent, enforce the deadline), tear down, extract the
 * artifacts, report, clean up. Every path, a denial, a timeout, a dead VM
 * or Ctrl-C included, ends in the same cleanup. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
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

#include "artifacts.h"
#include "cli.h"
#include "jail.h"
#include "policy.h"
#include "result.h"
#include "session.h"
#include "workspace.h"

#define SANDBOX_UID      1000
#define SANDBOX_GID      1000
#define CONSOLE_LIMIT    "262144"
#define TEARDOWN_GRACE_MS 5000   /* after EXIT, how long vmm gets to reset the guest */
#define EXTRACT_TIMEOUT_MS 30000
#define REAP_AFTER_KILL_MS 10000 /* after the cgroup was killed, how long vmm gets to die */

/* State the signal handler reaches: only this file's. Killing vmm is all
 * it does; the session then sees the VM gone (its pidfd or its socket) and
 * the run ends through the normal path. */
static volatile sig_atomic_t g_signal, g_vmm_pid;

static void on_signal(int sig)
{
	g_signal = sig;
	if (g_vmm_pid > 0)
		kill((pid_t)g_vmm_pid, SIGKILL);
}

struct paths {
	char dir[PATH_MAX];         /* the run directory */
	char sock_dir[PATH_MAX + 32];   /* becomes /run in the jail */
	char image[PATH_MAX + 64], uds[PATH_MAX + 64], agent_sock[PATH_MAX + 64];
	char console[PATH_MAX + 64], vmm_err[PATH_MAX + 64];
	char vmm[PATH_MAX], kernel[PATH_MAX], rootfs[PATH_MAX], manifest[PATH_MAX];
};

static void message(struct run_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void message(struct run_result *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->message, sizeof(r->message), fmt, ap);
	va_end(ap);
}

/* Append to r's message, after "; " when it already says something. */
static void add_message(struct run_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_message(struct run_result *r, const char *fmt, ...)
{
	size_t used = strlen(r->message);
	if (used && used + 2 < sizeof(r->message)) {
		memcpy(r->message + used, "; ", 3);
		used += 2;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->message + used, sizeof(r->message) - used, fmt, ap);
	va_end(ap);
}

static void verbose(const struct vmrun_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void verbose(const struct vmrun_opts *o, const char *fmt, ...)
{
	if (!o->verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	fputs("vmrun: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* The built binaries and images sit next to each other: build/bin/vmrun,
 * build/bin/vmm, build/guest/{vmlinux,rootfs.ext4,programs.txt}. */
static int locate(const struct vmrun_opts *o, struct paths *p, char *err, size_t errlen)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0) {
		snprintf(err, errlen, "cannot find our own binary: %s", strerror(errno));
		return -1;
	}
	exe[n] = '\0';
	char *bindir = dirname(exe);
	snprintf(p->vmm, sizeof(p->vmm), "%s/vmm", bindir);
	snprintf(p->kernel, sizeof(p->kernel), "%s", o->kernel ? o->kernel : "");
	if (!o->kernel)
		snprintf(p->kernel, sizeof(p->kernel), "%s/../guest/vmlinux", bindir);
	if (o->rootfs)
		snprintf(p->rootfs, sizeof(p->rootfs), "%s", o->rootfs);
	else
		snprintf(p->rootfs, sizeof(p->rootfs), "%s/../guest/rootfs.ext4", bindir);
	char root[PATH_MAX];
	snprintf(root, sizeof(root), "%s", p->rootfs);
	snprintf(p->manifest, sizeof(p->manifest), "%s/programs.txt", dirname(root));
	const char *need[] = { p->vmm, p->kernel, p->rootfs };
	for (size_t i = 0; i < 3; i++)
		if (access(need[i], R_OK) < 0) {
			snprintf(err, errlen, "%s: %s", need[i], strerror(errno));
			return -1;
		}
	return 0;
}

/* Limits asked for against the policy's ceilings. */
static int check_limits(const struct vmrun_opts *o, const struct policy *pol, char *err, size_t errlen)
{
	struct { const char *opt; uint64_t v, max; } c[] = {
		{ "--memory", o->memory_mib, pol->max_memory_mib }, { "--cpus", o->cpus, pol->max_cpus },
		{ "--disk", o->disk_mib, pol->max_disk_mib },       { "--max-output", o->max_output, pol->max_output },
	};
	if (o->timeout_s > (double)pol->max_timeout_s) {
		snprintf(err, errlen, "--timeout %g exceeds the policy's ceiling of %llu s", o->timeout_s,
			 (unsigned long long)pol->max_timeout_s);
		return -1;
	}
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		if (c[i].v > c[i].max) {
			snprintf(err, errlen, "%s %llu exceeds the policy's ceiling of %llu", c[i].opt,
				 (unsigned long long)c[i].v, (unsigned long long)c[i].max);
			return -1;
		}
	return 0;
}

static int make_run_dir(struct paths *p, const char *run_id, char *err, size_t errlen)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(p->dir, sizeof(p->dir), "%s/vmrun-%.12s-XXXXXX", tmp && *tmp ? tmp : "/tmp", run_id);
	if (!mkdtemp(p->dir)) {
		snprintf(err, errlen, "run directory %.300s: %s", p->dir, strerror(errno));
		p->dir[0] = '\0';
		return -1;
	}
	snprintf(p->image, sizeof(p->image), "%s/workspace.ext4", p->dir);
	snprintf(p->sock_dir, sizeof(p->sock_dir), "%s/sock", p->dir);
	snprintf(p->uds, sizeof(p->uds), "%s/v.sock", p->sock_dir);
	snprintf(p->agent_sock, sizeof(p->agent_sock), "%s/v.sock_%u", p->sock_dir, PROTO_VSOCK_PORT);
	snprintf(p->console, sizeof(p->console), "%s/console", p->sock_dir);
	if (mkdir(p->sock_dir, 0700) < 0) {
		snprintf(err, errlen, "%.300s: %s", p->sock_dir, strerror(errno));
		return -1;
	}
	snprintf(p->vmm_err, sizeof(p->vmm_err), "%s/vmm.err", p->dir);
	if (strlen(p->agent_sock) >= sizeof(((struct sockaddr_un *)0)->sun_path) - 1) {
		snprintf(err, errlen, "run directory path %.300s is too long for a Unix socket", p->dir);
		return -1;
	}
	return 0;
}

/* Remove what this run created: the files we know, then the directory. */
static void remove_run_dir(const struct paths *p)
{
	if (!p->dir[0])
		return;
	const char *files[] = { p->image, p->uds, p->agent_sock, p->console, p->vmm_err };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		unlink(files[i]);
	rmdir(p->sock_dir);
	rmdir(p->dir);
}

/* The agent's socket, connectable by the jailed vmm's uid. */
static int listen_agent(const struct paths *p, const struct jail *j, char *err, size_t errlen)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	memcpy(a.sun_path, p->agent_sock, strlen(p->agent_sock) + 1);   /* length checked in make_run_dir */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1) < 0 ||
	    chown(p->agent_sock, j->uid, j->gid) < 0) {
		snprintf(err, errlen, "agent socket %s: %s", p->agent_sock, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* What the jail needs to know, with vmm's arguments as seen inside; vmm's
 * stderr is set when it is opened, just before the start. */
static void jail_spec_for(const struct vmrun_opts *o, const struct policy *pol, const struct paths *p,
			  const char *run_id, struct jail_spec *s)
{
	static char mem[24], cpus[24];
	snprintf(mem, sizeof(mem), "%llu", (unsigned long long)o->memory_mib);
	snprintf(cpus, sizeof(cpus), "%llu", (unsigned long long)o->cpus);
	static char *argv[] = { "vmm", "--kvm-fd", "3", "--kernel", JAIL_KERNEL, "--memory", mem, "--cpus", cpus,
				"--disk", JAIL_ROOTFS ",ro", "--disk", JAIL_IMAGE, "--vsock-uds", JAIL_RUN "/v.sock",
				"--console", JAIL_RUN "/console", "--console-limit", CONSOLE_LIMIT,
				"--cmdline", "root=/dev/vda ro init=/init", NULL };
	*s = (struct jail_spec){
		.run_dir = p->dir, .vmm = p->vmm, .kernel = p->kernel, .rootfs = p->rootfs, .image = p->image,
		.sock_dir = p->sock_dir, .run_id = run_id, .memory_mib = o->memory_mib, .cpus = o->cpus,
		.disk_mib = o->disk_mib, .cpu_quota_pct = (unsigned)pol->cpu_quota_pct, .stderr_fd = -1,
		.argv = argv,
	};
}

/* Read vmm's stderr once: the last line vmm wrote (for the message) into
 * why, and the jail's clone-to-exec time, returned in us (-1 if absent). */
static long read_vmm_err(const struct paths *p, char *why, size_t len)
{
	why[0] = '\0';
	long ready_us = -1;
	FILE *f = fopen(p->vmm_err, "re");
	if (!f)
		return -1;
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, JAIL_READY_PREFIX, strlen(JAIL_READY_PREFIX)))
			ready_us = atol(line + strlen(JAIL_READY_PREFIX));
		else if (line[0] != '\n')
			session_printable(why, len, line, strcspn(line, "\n"));   /* vmm runs the guest: its words too */
	}
	fclose(f);
	return ready_us;
}

/* Wait for vmm until deadline_ms, then kill its whole cgroup and wait at
 * most REAP_AFTER_KILL_MS more: a vmm that SIGKILL cannot end (a thread
 * held in the host kernel) must not hold the run forever. Returns its wait
 * status; *lost is set when it never ended. */
static int reap_vmm(struct jail *j, int64_t deadline_ms, bool *killed, bool *lost)
{
	int st = 0;
	*killed = *lost = false;
	for (;;) {
		pid_t r = waitpid(j->pid, &st, WNOHANG);
		if (r == j->pid || (r < 0 && errno != EINTR))
			return st;
		int64_t now = session_now_ms();
		if (!*killed && now >= deadline_ms) {
			jail_kill(j);
			*killed = true;
			deadline_ms = now + REAP_AFTER_KILL_MS;
		} else if (*killed && now >= deadline_ms) {
			*lost = true;
			return st;
		}
		usleep(2000);
	}
}

static void print_console(const struct paths *p)
{
	FILE *f = fopen(p->console, "re");
	if (!f)
		return;
	char line[1024], shown[1024];
	fputs("vmrun: guest console:\n", stderr);
	while (fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\n");
		if (n && line[n - 1] == '\r')
			n--;   /* the serial console ends its lines with CR LF */
		fprintf(stderr, "  | %s\n", session_printable(shown, sizeof(shown), line, n));
	}
	fclose(f);
}

struct output_ctx {
	const struct vmrun_opts *o;
	struct run_result *r;
};

/* The command's output: capped here per stream at --max-output in both
 * modes (outbuf_take), since a guest need not honour the cap it was sent. */
static void on_output(void *ctx, uint16_t type, const uint8_t *data, uint32_t len)
{
	struct output_ctx *c = ctx;
	struct outbuf *b = type == PROTO_STDOUT ? &c->r->out : &c->r->err;
	if (c->o->json) {
		outbuf_append(b, data, len);
		return;
	}
	int fd = type == PROTO_STDOUT ? 1 : 2;
	len = (uint32_t)outbuf_take(b, len);
	while (len) {
		ssize_t k = write(fd, data, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return;   /* our reader went away: the run goes on, output is lost */
		data += k;
		len -= (uint32_t)k;
	}
}

static void fill_request(struct proto_request *req, const struct vmrun_opts *o, const struct policy *pol)
{
	req->argc = (unsigned)o->argc;
	for (int i = 0; i < o->argc; i++)
		req->argv[i] = o->argv[i];
	req->envc = o->nenv;
	for (unsigned i = 0; i < o->nenv; i++)
		req->env[i] = (char *)o->env[i];
	req->nallow = pol->nallow;
	for (unsigned i = 0; i < pol->nallow; i++)
		req->allow[i] = pol->allow[i];
	req->max_output = o->max_output;
	req->nproc = pol->nproc;
	req->nofile = pol->nofile;
	req->fsize = pol->fsize;
}

/* From vmm's start in its jail (js, j: prepared) to its exit. */
static void run_vm(const struct vmrun_opts *o, const struct policy *pol, const struct paths *p,
		   struct jail_spec *js, struct jail *j, int listen_fd, int stdin_fd, struct run_result *r)
{
	char err[512];
	int64_t start = session_now_ms();
	int64_t deadline = start + (int64_t)(o->timeout_s * 1000.0);
	int errfd = open(p->vmm_err, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	js->stderr_fd = errfd;
	if (errfd < 0 || jail_start(js, j, err, sizeof(err))) {
		if (errfd < 0)
			snprintf(err, sizeof(err), "%.300s: %s", p->vmm_err, strerror(errno));
		else
			close(errfd);
		r->term = TERM_ERROR;
		message(r, "%s", err);
		return;
	}
	close(errfd);
	pid_t pid = j->pid;
	g_vmm_pid = pid;
	if (g_signal)
		kill(pid, SIGKILL);
	verbose(o, "vmm started (pid %d), deadline in %g s", (int)pid, o->timeout_s);
	static struct proto_request req;
	fill_request(&req, o, pol);
	static struct session_result sr;
	struct output_ctx octx = { o, r };
	struct session_io io = { .stdin_fd = stdin_fd, .output = on_output, .ctx = &octx };
	enum session_status st = SESSION_FAILED;
	int64_t exit_at = 0;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	int conn = session_accept(listen_fd, pidfd, deadline, sr.error, sizeof(sr.error));
	if (pidfd >= 0)
		close(pidfd);
	if (conn >= 0) {
		st = session_run(conn, &req, &io, deadline, &sr);
		exit_at = session_now_ms();
		close(conn);   /* the agent waits for this before it resets the VM */
	} else if (session_now_ms() >= deadline) {
		st = SESSION_TIMEOUT;
	}
	r->boot = (sr.hello_ms ? sr.hello_ms : session_now_ms()) - start;
	r->run = sr.hello_ms ? (exit_at ? exit_at : session_now_ms()) - sr.hello_ms : 0;
	int64_t teardown_from = session_now_ms();
	bool killed, lost;
	int vst = reap_vmm(j, st == SESSION_DONE ? teardown_from + TEARDOWN_GRACE_MS : teardown_from, &killed, &lost);
	g_vmm_pid = 0;
	r->teardown = session_now_ms() - teardown_from;
	char why[400];
	long ready_us = read_vmm_err(p, why, sizeof(why));
	if (g_signal) {
		r->term = TERM_ERROR;
		message(r, "interrupted by SIG%s; the VM was killed", sigabbrev_np(g_signal) ? sigabbrev_np(g_signal) : "?");
	} else if (st == SESSION_TIMEOUT) {
		r->term = TERM_TIMEOUT;
		message(r, "the run exceeded its %g s limit; the VM was killed", o->timeout_s);
	} else if (st == SESSION_FAILED) {
		r->term = TERM_VM_FAILED;
		if (WIFEXITED(vst) && WEXITSTATUS(vst) != 0 && why[0])
			message(r, "%s", why);
		else if (WIFSIGNALED(vst) && !killed)
			message(r, "vmm died of SIG%s", sigabbrev_np(WTERMSIG(vst)) ? sigabbrev_np(WTERMSIG(vst)) : "?");
		else
			message(r, "%s", sr.error[0] ? sr.error : "the VM ended without a result");
	} else {
		const struct proto_exit *e = &sr.exit;
		r->cpu_ms = e->cpu_ms;
		r->max_rss_kib = e->max_rss_kib;
		r->out_truncated = e->flags & PROTO_EXIT_STDOUT_TRUNCATED;
		r->err_truncated = e->flags & PROTO_EXIT_STDERR_TRUNCATED;
		switch (e->kind) {
		case PROTO_END_EXITED: r->term = TERM_EXITED; r->exit_code = e->code; break;
		case PROTO_END_SIGNALED: r->term = TERM_SIGNALED; r->signal = e->signal; break;
		case PROTO_END_DENIED: r->term = TERM_DENIED; message(r, "the agent refused the program"); break;
		case PROTO_END_NOT_FOUND: r->term = TERM_NOT_FOUND; message(r, "no such program in the guest"); break;
		default: r->term = TERM_ERROR; message(r, "the agent could not start the program: %s", strerror(e->code));
		}
		if (killed)
			add_message(r, "the VM did not reset after the run and was killed");
	}
	if (lost)
		add_message(r, "vmm (pid %d) did not die within %d ms of SIGKILL and was left behind", (int)pid,
			    REAP_AFTER_KILL_MS);
	verbose(o, "jail (uid %u, cgroup v%d) ready in %ld us; agent \"%s\", boot %lld ms, run %lld ms, "
		"teardown %lld ms, vmm status %d", j->uid, j->cgroup_version, ready_us, sr.agent,
		(long long)r->boot, (long long)r->run, (long long)r->teardown, vst);
}

static void new_run_id(char *id)
{
	uint8_t b[16];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		memset(b, 0, sizeof(b));
	for (int i = 0; i < 16; i++)
		sprintf(id + 2 * i, "%02x", b[i]);
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int main(int argc, char **argv)
{
	static struct vmrun_opts o;
	int parsed = cli_parse(argc, argv, &o);
	if (parsed)
		return parsed > 0 ? 0 : 125;
	install_signals();
	static struct run_result r;
	static struct paths p;
	static struct policy pol;
	int64_t t0 = session_now_ms();
	new_run_id(r.run_id);
	r.term = TERM_ERROR;
	r.out.limit = r.err.limit = o.max_output;
	r.limits.timeout_s = o.timeout_s;
	r.limits.memory_mib = o.memory_mib;
	r.limits.cpus = o.cpus;
	r.limits.disk_mib = o.disk_mib;
	r.limits.max_output = o.max_output;
	char err[512], resolved[POLICY_PATH_MAX];
	int listen_fd = -1, stdin_fd = -1;

	/* check the request */
	if (locate(&o, &p, err, sizeof(err)) || policy_load(&pol, p.manifest, o.policy, err, sizeof(err)) ||
	    check_limits(&o, &pol, err, sizeof(err))) {
		message(&r, "%s", err);
		goto report;
	}
	r.limits.nproc = pol.nproc;
	r.limits.nofile = pol.nofile;
	r.limits.fsize = pol.fsize;
	switch (policy_check_program(&pol, o.argv[0], resolved, sizeof(resolved))) {
	case POLICY_DENIED:
		r.term = TERM_DENIED;
		message(&r, "%s is not in the allowlist", resolved[0] ? resolved : o.argv[0]);
		goto report;
	case POLICY_NOT_FOUND:
		r.term = TERM_NOT_FOUND;
		message(&r, "%s: no such program in the guest image", o.argv[0]);
		goto report;
	case POLICY_ALLOWED:
		break;
	}
	if (o.stdin_file && (stdin_fd = open(o.stdin_file, O_RDONLY | O_CLOEXEC)) < 0) {
		message(&r, "--stdin %s: %s", o.stdin_file, strerror(errno));
		goto report;
	}
	if (o.artifacts && access(o.artifacts, F_OK) == 0) {
		message(&r, "--artifacts %s: already exists (artifacts go to a fresh directory)", o.artifacts);
		goto report;
	}

	/* prepare */
	struct workspace_stats ws;
	static struct jail jail;
	struct jail_spec js;
	if (make_run_dir(&p, r.run_id, err, sizeof(err)) ||
	    workspace_create(p.image, o.disk_mib, o.workspace, SANDBOX_UID, SANDBOX_GID, &ws, err, sizeof(err))) {
		message(&r, "%s", err);
		goto cleanup;
	}
	jail_spec_for(&o, &pol, &p, r.run_id, &js);
	if (jail_prepare(&js, &jail, err, sizeof(err)) || (listen_fd = listen_agent(&p, &jail, err, sizeof(err))) < 0) {
		message(&r, "%s", err);
		goto cleanup;
	}
	r.prepare = session_now_ms() - t0;
	verbose(&o, "prepared in %lld ms: %s, %llu files, %llu dirs, %llu bytes", (long long)r.prepare, p.image,
		(unsigned long long)ws.files, (unsigned long long)ws.dirs, (unsigned long long)ws.bytes);

	/* run */
	run_vm(&o, &pol, &p, &js, &jail, listen_fd, stdin_fd, &r);
	close(listen_fd);
	listen_fd = -1;
	if (o.verbose)
		print_console(&p);

	/* extract: only after the guest finished normally; an image cut
	 * short by a timeout or a crash is not read */
	if (o.artifacts && (r.term == TERM_EXITED || r.term == TERM_SIGNALED)) {
		int64_t x0 = session_now_ms();
		struct artifacts_limits lim = {
			.max_bytes = pol.artifacts_max_bytes, .max_files = pol.artifacts_max_files,
			.max_depth = (unsigned)pol.artifacts_max_depth, .max_path = ARTIFACT_PATH_MAX - 1,
			.timeout_ms = EXTRACT_TIMEOUT_MS,
		};
		if (artifacts_extract(p.image, o.artifacts, &lim, &r.artifacts, err, sizeof(err)))
			snprintf(r.message + strlen(r.message), sizeof(r.message) - strlen(r.message), "%sartifacts: %.300s",
				 r.message[0] ? "; " : "", err);
		r.extract = session_now_ms() - x0;
	}

cleanup:
	if (listen_fd >= 0)
		close(listen_fd);
	jail_cleanup(&jail);
	remove_run_dir(&p);
report:
	if (stdin_fd >= 0)
		close(stdin_fd);
	policy_free(&pol);
	r.total = session_now_ms() - t0;
	if (o.json)
		result_print_json(stdout, &r);
	else if (r.message[0] && r.term != TERM_EXITED && r.term != TERM_SIGNALED)
		fprintf(stderr, "vmrun: %s: %s\n", result_termination_name(r.term), r.message);
	else if (r.message[0])
		fprintf(stderr, "vmrun: %s\n", r.message);
	if (!o.json)
		for (size_t i = 0; i < r.artifacts.nskipped; i++)
			fprintf(stderr, "vmrun: artifact %s skipped: %s\n", r.artifacts.skipped[i].path,
				r.artifacts.skipped[i].reason);
	int status = result_exit_status(&r);
	result_free(&r);
	fflush(stdout);
	return status;
}
