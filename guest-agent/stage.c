#include "stage.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"


static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ---- the child ------------------------------------------------------------- */

/* RLIMIT_CPU for a limit of cpu_ms: whole seconds, rounded up (without
 * overflowing), then SIGKILL a second later for a process that ignores
 * SIGXCPU. */
static struct rlimit cpu_rlimit(uint64_t cpu_ms)
{
	rlim_t soft = cpu_ms / 1000 + (cpu_ms % 1000 != 0);
	return (struct rlimit){ soft, soft + 1 };
}

void stage_exec_child(const struct stage_exec *k)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);   /* ignored dispositions survive exec */
	struct rlimit core = { 0, 0 }, nproc = { k->nproc, k->nproc }, nofile = { k->nofile, k->nofile },
		      fsize = { k->fsize, k->fsize }, cpu = cpu_rlimit(k->cpu_ms);
	int e = 0, step = STAGE_STEP_SETUP;
	/* The cgroup first, while still root: what the command starts is in it. */
	if (setsid() < 0 || (k->group && cgroup_join(k->group) < 0) || chdir(k->cwd) < 0 ||
	    setrlimit(RLIMIT_CORE, &core) < 0 || setrlimit(RLIMIT_NPROC, &nproc) < 0 ||
	    setrlimit(RLIMIT_NOFILE, &nofile) < 0 || setrlimit(RLIMIT_FSIZE, &fsize) < 0 ||
	    (k->cpu_ms && setrlimit(RLIMIT_CPU, &cpu) < 0))
		e = errno;
	if (!e && k->gid != (gid_t)-1 && (setgroups(0, NULL) < 0 || setgid(k->gid) < 0))
		e = errno;
	if (!e && k->uid != (uid_t)-1 && setuid(k->uid) < 0)
		e = errno;
	/* Above 2 first: a pipe end that is itself 0, 1 or 2 (an agent
	 * started without them) would be clobbered by, or keep CLOEXEC
	 * through, a dup2 onto its own number. */
	int in = -1, out = -1, err = -1;
	if (!e && ((in = fcntl(k->in, F_DUPFD_CLOEXEC, 3)) < 0 || (out = fcntl(k->out, F_DUPFD_CLOEXEC, 3)) < 0 ||
		   (err = fcntl(k->err, F_DUPFD_CLOEXEC, 3)) < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 ||
		   dup2(err, 2) < 0))
		e = errno;
	/* a session leader (setsid above) takes its terminal as its controlling tty */
	if (!e && k->tty && ioctl(0, TIOCSCTTY, 0) < 0)
		e = errno;
	if (!e) {
		/* Only 0, 1, 2 and the CLOEXEC error pipe cross exec. */
		for (int fd = 3; fd < 1024; fd++)
			if (fd != k->errfd)
				close(fd);
		execve(k->path, k->argv, k->env);
		e = errno;
		step = STAGE_STEP_EXEC;
	}
	int msg[2] = { step, e };
	(void)!write(k->errfd, msg, sizeof(msg));
	_exit(127);
}

uint32_t stage_exec_failed(const int failed[2])
{
	/* Only exec's own answer says anything about the program; a failed
	 * setup step is the agent's failure. */
	int e = failed[1];
	return failed[0] != STAGE_STEP_EXEC ? PROTO_END_ERROR
		: e == ENOENT ? PROTO_END_NOT_FOUND
		: (e == EACCES || e == ENOEXEC) ? PROTO_END_DENIED : PROTO_END_ERROR;
}

/* Fork a child that becomes x (its in, out and err set: the child's ends)
 * and wait until it has exec'd: 0 with p->pid and p->pidfd, 1 when it
 * could not (failed[] = {step, errno}; reaped), -1 with errno. */
static int start_child(struct stage_exec *x, struct stage_proc *p, int failed[2])
{
	int pex[2];
	if (pipe2(pex, O_CLOEXEC))
		return -1;
	p->pid = fork();
	if (p->pid == 0) {
		x->errfd = pex[1];
		stage_exec_child(x);
	}
	int e = errno, rc = p->pid < 0 ? -1 : 0;
	close_fd(&pex[1]);   /* so the read below sees EOF once exec succeeded */
	if (!rc && read(pex[0], failed, 2 * sizeof(int)) == (ssize_t)(2 * sizeof(int))) {
		waitpid(p->pid, NULL, 0);
		rc = 1;
	}
	close_fd(&pex[0]);
	if (!rc)
		p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	errno = e;
	return rc;
}

int stage_spawn(struct stage_exec *x, bool with_stdin, struct stage_proc *p, int failed[2])
{
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
	int rc = -1;
	if ((!with_stdin && (pin[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) ||
	    (with_stdin && pipe2(pin, O_CLOEXEC)) || pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC))
		goto out;
	x->in = pin[0];
	x->out = pout[1];
	x->err = perr[1];
	if ((rc = start_child(x, p, failed)))
		goto out;
	if (pin[1] >= 0)
		fcntl(pin[1], F_SETFL, O_NONBLOCK);
	p->in = pin[1];
	p->out = pout[0];
	p->err = perr[0];
	pout[0] = perr[0] = pin[1] = -1;
out:;
	int e = errno;
	for (int i = 0; i < 2; i++) {
		close_fd(&pin[i]);
		close_fd(&pout[i]);
		close_fd(&perr[i]);
	}
	errno = e;
	return rc;
}

int stage_spawn_pty(struct stage_exec *x, uint16_t cols, uint16_t rows, struct stage_proc *p, int failed[2])
{
	int master = -1, slave = -1, in = -1, rc = -1;
	struct winsize ws = { .ws_col = cols, .ws_row = rows };
	char name[64];
	if ((master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 || grantpt(master) < 0 || unlockpt(master) < 0 ||
	    ptsname_r(master, name, sizeof(name)) || ioctl(master, TIOCSWINSZ, &ws) < 0 ||
	    (slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 ||
	    /* the command's own, as a login's terminal is: what opens it again by name (tty, ssh) may */
	    (x->uid != (uid_t)-1 && fchown(slave, x->uid, (gid_t)-1) < 0) ||
	    (in = fcntl(master, F_DUPFD_CLOEXEC, 3)) < 0)
		goto out;
	x->in = x->out = x->err = slave;
	x->tty = true;
	if ((rc = start_child(x, p, failed)))
		goto out;
	fcntl(master, F_SETFL, O_NONBLOCK);
	fcntl(in, F_SETFL, O_NONBLOCK);
	p->out = master;
	p->in = in;
	p->err = -1;
	master = in = -1;
out:;
	int e = errno;
	close_fd(&master);
	close_fd(&slave);
	close_fd(&in);
	errno = e;
	return rc;
}

/* ---- output and input ------------------------------------------------------ */

struct stream {
	int fd;             /* read end of the command's pipe, -1 when closed */
	uint16_t type;      /* PROTO_STDOUT or PROTO_STDERR */
	uint64_t bytes;     /* produced */
	bool truncated;
};

/* Host stdin, forwarded to the command's pipe. */
struct input {
	int pipe;            /* write end, -1 once closed */
	bool eof;            /* the host sent end of input; set from the start in a
				compile stage, which does not read the host */
	const uint8_t *p;    /* unwritten part of the current STDIN frame */
	uint32_t left;
};

/* The running stage and the agent's ends of its pipes. */
struct child_proc {
	pid_t pid;
	int pidfd;            /* readable once it exits; -1 if the kernel lacks pidfd_open */
	struct stream out, err;
	struct input in;
	const struct cgroup *group;
};

static int send_output(const struct stage_ctx *c, struct stream *st, const uint8_t *buf, size_t n)
{
	uint64_t cap = c->req->max_output;   /* per stream and stage */
	uint64_t room = st->bytes >= cap ? 0 : cap - st->bytes;
	st->bytes += n;
	if (n > room) {
		st->truncated = true;
		n = (size_t)room;
	}
	return n ? proto_send(c->fd, st->type, buf, (uint32_t)n) : 0;
}

/* Read what the pipe has. Returns 0, or -1 when the host socket failed. */
static int pump_output(const struct stage_ctx *c, struct stream *st)
{
	uint8_t buf[AGENT_CHUNK];
	ssize_t k = read(st->fd, buf, sizeof(buf));
	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (k <= 0) {
		close_fd(&st->fd);
		return 0;
	}
	return send_output(c, st, buf, (size_t)k);
}

/* Take the next frame already buffered from the host; while the command
 * runs only STDIN may come. Its payload stays in the reader, so this is
 * called again only once that data went to the pipe. Returns 1 when a frame
 * was taken, 0 when none is complete, -1 on a protocol error (reason in
 * c->err). */
static int buffered_frame(const struct stage_ctx *c, struct input *in)
{
	uint16_t type;
	const uint8_t *p;
	uint32_t len;
	int r = proto_reader_next(c->rd, &type, &p, &len, c->err, c->errlen);
	if (r <= 0)
		return r;
	if (type != PROTO_STDIN)
		return proto_errf(c->err, c->errlen, "unexpected frame type %u during the run", type);
	if (len == 0) {
		in->eof = true;
		close_fd(&in->pipe);
	} else if (in->pipe >= 0) {
		in->p = p;
		in->left = len;
	}
	return 1;
}

/* Read what the host sent into the reader. Returns 0, or -1 when the
 * connection ended (reason in c->err). */
static int host_read(const struct stage_ctx *c)
{
	ssize_t k = proto_reader_fill(c->rd, c->fd);
	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (k <= 0)
		return proto_errf(c->err, c->errlen, "the host closed the connection during the run");
	return 0;
}

static void feed_input(struct input *in)
{
	ssize_t k = write(in->pipe, in->p, in->left);
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (k < 0) {   /* the command closed its stdin: drop the rest */
		close_fd(&in->pipe);
		in->left = 0;
		return;
	}
	in->p += k;
	in->left -= (uint32_t)k;
}

/* ---- supervision ------------------------------------------------------------ */

/* Whole ms since t0 (CLOCK_MONOTONIC), from the nanosecond difference:
 * whole seconds plus a truncated nanosecond part would read up to 1 ms
 * short, and end a wait early. */
static long ms_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)(((int64_t)(t.tv_sec - t0->tv_sec) * 1000000000 + (t.tv_nsec - t0->tv_nsec)) / 1000000);
}

/* Kill what is left of the stage: its session, its cgroup, and as PID 1
 * every other process. Returns 0, or -1 when the cgroup could not be told
 * (reason in c->err). */
static int kill_leftovers(const struct stage_ctx *c, const struct child_proc *p)
{
	int rc = 0;
	kill(-p->pid, SIGKILL);
	if (p->group && cgroup_kill(p->group, c->err, c->errlen) < 0)
		rc = -1;
	if (c->cfg->kill_all)
		kill(-1, SIGKILL);   /* PID 1 is spared: everything else was the command's */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	return rc;
}

/* Fork and exec the stage. Returns 0 with p filled, 1 when the child
 * could not become the command (failed[] = {step, errno}; nothing runs),
 * or -1 (reason in c->err). */
static int start(const struct stage_ctx *c, unsigned i, const char *path, const struct cgroup *group,
		 struct child_proc *p, int failed[2])
{
	const struct proto_request *r = c->req;
	struct stage_exec x = {
		.path = path, .argv = r->stage[i].argv, .env = c->env, .cwd = c->cfg->cwd, .uid = c->cfg->uid,
		.gid = c->cfg->gid, .nproc = r->nproc, .nofile = r->nofile, .fsize = r->fsize, .cpu_ms = r->stage[i].cpu_ms,
		.group = group,
	};
	/* A compile stage reads /dev/null; the host's stdin is the run stage's. */
	bool run_stage = i + 1 == r->nstages;
	struct stage_proc sp;
	int rc = stage_spawn(&x, run_stage, &sp, failed);
	if (rc < 0)
		return proto_errf(c->err, c->errlen, "starting stage %u: %s", i, strerror(errno));
	if (rc == 1)
		return 1;
	p->pid = sp.pid;
	p->pidfd = sp.pidfd;
	p->out = (struct stream){ sp.out, PROTO_STDOUT, 0, false };
	p->err = (struct stream){ sp.err, PROTO_STDERR, 0, false };
	p->in = (struct input){ .pipe = sp.in, .eof = !run_stage };
	return 0;
}

/* The drain ended before st did (a process outside the command's session
 * holds the pipe): what it still had to say is cut off, as at the cap.
 * Bytes already in the pipe count as produced. */
static void cut_off(struct stream *st)
{
	int pending = 0;
	if (st->fd < 0)
		return;
	if (ioctl(st->fd, FIONREAD, &pending) == 0 && pending > 0)
		st->bytes += (uint64_t)pending;
	st->truncated = true;
}

/* Relay stdin (run stage only: in.eof is set from the start otherwise, so
 * neither the reader nor the socket is touched) and output until the
 * stage's process has exited and its pipes are drained. Returns 0 with its
 * wait status and usage, or -1 (reason in c->err; the stage is killed). */
static int supervise(const struct stage_ctx *c, struct child_proc *p, int *status, struct rusage *ru)
{
	bool exited = false;
	struct timespec drain_from = { 0 };
	while (p->out.fd >= 0 || p->err.fd >= 0 || !exited) {
		int r;
		while (!exited && p->in.left == 0 && !p->in.eof && (r = buffered_frame(c, &p->in)) != 0)
			if (r < 0)
				goto killed;
		struct pollfd fds[5];
		int n = 0, i_out = -1, i_err = -1, i_sock = -1, i_in = -1;
		if (p->out.fd >= 0) { i_out = n; fds[n++] = (struct pollfd){ p->out.fd, POLLIN, 0 }; }
		if (p->err.fd >= 0) { i_err = n; fds[n++] = (struct pollfd){ p->err.fd, POLLIN, 0 }; }
		if (!exited && p->in.left == 0 && !p->in.eof) { i_sock = n; fds[n++] = (struct pollfd){ c->fd, POLLIN, 0 }; }
		if (p->in.left && p->in.pipe >= 0) { i_in = n; fds[n++] = (struct pollfd){ p->in.pipe, POLLOUT, 0 }; }
		if (!exited && p->pidfd >= 0) fds[n++] = (struct pollfd){ p->pidfd, POLLIN, 0 };
		/* Without a pidfd, poll in short rounds to notice the exit. */
		int timeout = exited ? (int)(STAGE_DRAIN_MS - ms_since(&drain_from)) : (p->pidfd >= 0 ? -1 : 50);
		if (exited && timeout <= 0) {
			cut_off(&p->out);
			cut_off(&p->err);
			break;
		}
		if (poll(fds, (nfds_t)n, timeout) < 0 && errno != EINTR) {
			proto_errf(c->err, c->errlen, "poll: %s", strerror(errno));
			goto killed;
		}
		if ((i_out >= 0 && fds[i_out].revents && pump_output(c, &p->out) < 0) ||
		    (i_err >= 0 && fds[i_err].revents && pump_output(c, &p->err) < 0)) {
			proto_errf(c->err, c->errlen, "sending output to the host: %s", strerror(errno));
			goto killed;
		}
		if (i_in >= 0 && fds[i_in].revents)
			feed_input(&p->in);
		if (i_sock >= 0 && fds[i_sock].revents && host_read(c) < 0)
			goto killed;
		if (!exited && wait4(p->pid, status, WNOHANG, ru) == p->pid) {
			exited = true;
			if (kill_leftovers(c, p) < 0)
				return -1;
			clock_gettime(CLOCK_MONOTONIC, &drain_from);
			close_fd(&p->in.pipe);
		}
	}
	return 0;
killed:
	if (!exited) {
		kill(-p->pid, SIGKILL);
		waitpid(p->pid, NULL, 0);
	}
	char why[256];   /* kill_leftovers may overwrite c->err: keep the first reason */
	snprintf(why, sizeof(why), "%s", c->err);
	kill_leftovers(c, p);
	snprintf(c->err, c->errlen, "%s", why);
	return -1;
}

/* The stage's process, from fork to its end, into ex. */
static int run_process(const struct stage_ctx *c, unsigned i, const char *path, const struct cgroup *group,
		       struct proto_exit *ex)
{
	const struct proto_stage *st = &c->req->stage[i];
	struct child_proc p = { .pidfd = -1, .group = group };
	int failed[2] = { 0, 0 };
	int r = start(c, i, path, group, &p, failed);
	if (r < 0)
		return -1;
	if (r == 1) {
		ex->kind = stage_exec_failed(failed);
		ex->code = failed[1];
		return 0;
	}
	int status = 0;
	struct rusage ru = { 0 };
	r = supervise(c, &p, &status, &ru);
	close_fd(&p.out.fd);
	close_fd(&p.err.fd);
	close_fd(&p.in.pipe);
	close_fd(&p.pidfd);
	if (r < 0)
		return -1;
	if (WIFSIGNALED(status)) {
		ex->kind = PROTO_END_SIGNALED;
		ex->signal = WTERMSIG(status);
	} else {
		ex->kind = PROTO_END_EXITED;
		ex->code = WEXITSTATUS(status);
	}
	ex->cpu_ms = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
		     (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
	ex->max_rss_kib = (uint64_t)ru.ru_maxrss;
	ex->stdout_bytes = p.out.bytes;
	ex->stderr_bytes = p.err.bytes;
	ex->flags = (p.out.truncated ? PROTO_EXIT_STDOUT_TRUNCATED : 0) |
		    (p.err.truncated ? PROTO_EXIT_STDERR_TRUNCATED : 0);
	if (stage_cpu_exceeded(st->cpu_ms, status, ex->cpu_ms))
		ex->flags |= PROTO_EXIT_CPU_EXCEEDED;
	return 0;
}

bool stage_cpu_exceeded(uint64_t limit_ms, int status, uint64_t cpu_ms)
{
	/* SIGXCPU at the soft limit; SIGKILL at the hard one, for a process
	 * that ignored SIGXCPU (its time then is past the limit) */
	return limit_ms && WIFSIGNALED(status) &&
	       (WTERMSIG(status) == SIGXCPU || (WTERMSIG(status) == SIGKILL && cpu_ms >= limit_ms));
}

int stage_run(const struct stage_ctx *c, unsigned i, const char *path, struct proto_exit *ex)
{
	const struct proto_stage *st = &c->req->stage[i];
	*ex = (struct proto_exit){ .stage = i };
	if (!st->memory_kib)
		return run_process(c, i, path, NULL, ex);
	if (!c->cfg->cgroup_root)
		return proto_errf(c->err, c->errlen, "stage %u has a memory limit, but the agent has no cgroups", i);
	struct cgroup g;
	char name[32];
	snprintf(name, sizeof(name), "vmrun-stage%u", i);
	if (cgroup_create(c->cfg->cgroup_root, name, st->memory_kib, &g, c->err, c->errlen) < 0)
		return proto_errf(c->err, c->errlen, "stage %u's memory limit: %s", i, c->err);
	int r = run_process(c, i, path, &g, ex);
	uint64_t kills = 0;
	if (r == 0 && cgroup_oom_kills(&g, &kills, c->err, c->errlen) < 0)
		r = -1;
	if (kills)
		ex->flags |= PROTO_EXIT_OOM_KILLED;
	char why[256];   /* the first failure is the one to report */
	snprintf(why, sizeof(why), "%s", c->err);
	if (cgroup_destroy(&g, STAGE_CGROUP_EMPTY_MS, c->err, c->errlen) < 0 && r == 0)
		return -1;
	if (r < 0)
		snprintf(c->err, c->errlen, "%s", why);
	return r;
}
