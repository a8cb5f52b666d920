#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"

/* After the command exits and its session is killed, output still in the
 * pipes is drained for at most this long (a process that left the session
 * may hold them open). */
#define DRAIN_MS 200

struct session {
	int fd;
	const struct agent_config *cfg;
	struct proto_reader rd;
	struct proto_request req;
	char *err;
	size_t errlen;
};

static int fail(struct session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct session *s, const char *fmt, ...)
{
	char msg[512];   /* the arguments may point into s->err */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(s->err, s->errlen, "%s", msg);
	/* Tell the host why, if the socket still works. */
	(void)proto_send(s->fd, PROTO_ERROR, s->err, (uint32_t)strnlen(s->err, PROTO_MAX_STR));
	return -1;
}

/* Block until one frame arrives. Returns 1 with the frame, 0 at EOF, -1 on a
 * read error or a malformed stream (reason in s->err). */
static int read_frame(struct session *s, uint16_t *type, const uint8_t **p, uint32_t *len)
{
	for (;;) {
		int r = proto_reader_next(&s->rd, type, p, len, s->err, s->errlen);
		if (r)
			return r;
		size_t room;
		uint8_t *dst = proto_reader_space(&s->rd, &room);
		ssize_t k = read(s->fd, dst, room);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			snprintf(s->err, s->errlen, "reading from the host: %s", strerror(errno));
			return -1;
		}
		if (k == 0)
			return 0;
		proto_reader_fed(&s->rd, (size_t)k);
	}
}

/* ---- program checks ------------------------------------------------------ */

int agent_resolve(const char *prog, const char *cwd, const char *path, char *out, size_t outlen)
{
	char cand[PATH_MAX];
	struct stat st;
	int n;
	if (!*prog)
		return -1;
	if (strchr(prog, '/')) {
		n = prog[0] == '/' ? snprintf(cand, sizeof(cand), "%s", prog)
				   : snprintf(cand, sizeof(cand), "%s/%s", cwd, prog);
		if (n < 0 || (size_t)n >= sizeof(cand) || lstat(cand, &st) < 0)
			return -1;
	} else {
		const char *p = path;
		for (;;) {
			size_t dl = strcspn(p, ":");
			n = snprintf(cand, sizeof(cand), "%.*s/%s", (int)dl, p, prog);
			if (dl && n > 0 && (size_t)n < sizeof(cand) && lstat(cand, &st) == 0)
				break;
			if (!p[dl])
				return -1;
			p += dl + 1;
		}
	}
	/* Canonicalise the directory only: "/usr/bin/../../workspace/x" and
	 * symlinked directories resolve, the final name stays as given. */
	char *slash = strrchr(cand, '/');
	*slash = '\0';
	char dir[PATH_MAX];
	if (!realpath(cand[0] ? cand : "/", dir))
		return -1;
	n = snprintf(out, outlen, "%s/%s", strcmp(dir, "/") ? dir : "", slash + 1);
	return (n < 0 || (size_t)n >= outlen) ? -1 : 0;
}

bool agent_allowed(const char *resolved, char *const *allow, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(resolved, allow[i]) == 0)
			return true;
	return false;
}

int agent_environment(const char *home, char *const *grants, unsigned ngrants, char **env, unsigned max,
		      char *store, size_t storelen)
{
	unsigned n = 0;
	size_t used = 0;
	const char *defaults[4] = { "PATH=" PROTO_PATH, NULL, "LANG=C.UTF-8", "PYTHONIOENCODING=utf-8" };
	char homevar[PATH_MAX + 8];
	snprintf(homevar, sizeof(homevar), "HOME=%s", home);
	defaults[1] = homevar;
	for (unsigned i = 0; i < 4 + ngrants; i++) {
		const char *v = i < 4 ? defaults[i] : grants[i - 4];
		size_t name = strcspn(v, "=");
		unsigned slot = n;
		for (unsigned j = 0; j < n; j++)
			if (strncmp(env[j], v, name + 1) == 0)
				slot = j;   /* a grant replaces a default of the same name */
		size_t len = strlen(v) + 1;
		if ((slot == n && n + 1 >= max) || len > storelen - used)
			return -1;
		env[slot] = memcpy(store + used, v, len);
		used += len;
		if (slot == n)
			n++;
	}
	env[n] = NULL;
	return (int)n;
}

/* ---- running it ---------------------------------------------------------- */

struct stream {
	int fd;             /* read end of the command's pipe, -1 when closed */
	uint16_t type;      /* PROTO_STDOUT or PROTO_STDERR */
	uint64_t bytes;     /* produced */
	bool truncated;
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* What the child reports on the error pipe when it could not become the
 * command: which step failed, and errno. */
enum { STEP_SETUP = 1, STEP_EXEC = 2 };

/* In the child: become the command. Never returns; a failure is reported
 * as {step, errno} on errfd. */
static void child(struct session *s, const char *path, char **env, int in, int out, int err, int errfd)
{
	const struct proto_request *r = &s->req;
	const struct agent_config *c = s->cfg;
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);   /* ignored dispositions survive exec */
	struct rlimit core = { 0, 0 }, nproc = { r->nproc, r->nproc }, nofile = { r->nofile, r->nofile },
		      fsize = { r->fsize, r->fsize };
	int e = 0, step = STEP_SETUP;
	if (setsid() < 0 || chdir(c->cwd) < 0 || setrlimit(RLIMIT_CORE, &core) < 0 ||
	    setrlimit(RLIMIT_NPROC, &nproc) < 0 || setrlimit(RLIMIT_NOFILE, &nofile) < 0 ||
	    setrlimit(RLIMIT_FSIZE, &fsize) < 0)
		e = errno;
	if (!e && c->gid != (gid_t)-1 && (setgroups(0, NULL) < 0 || setgid(c->gid) < 0))
		e = errno;
	if (!e && c->uid != (uid_t)-1 && setuid(c->uid) < 0)
		e = errno;
	if (!e && (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0))
		e = errno;
	if (!e) {
		/* Only 0, 1, 2 and the CLOEXEC error pipe cross exec. */
		for (int fd = 3; fd < 1024; fd++)
			if (fd != errfd)
				close(fd);
		execve(path, r->argv, env);
		e = errno;
		step = STEP_EXEC;
	}
	int msg[2] = { step, e };
	(void)!write(errfd, msg, sizeof(msg));
	_exit(127);
}

static int send_output(struct session *s, struct stream *st, const uint8_t *buf, size_t n)
{
	uint64_t cap = s->req.max_output;
	uint64_t room = st->bytes >= cap ? 0 : cap - st->bytes;
	st->bytes += n;
	if (n > room) {
		st->truncated = true;
		n = (size_t)room;
	}
	return n ? proto_send(s->fd, st->type, buf, (uint32_t)n) : 0;
}

/* Read what the pipe has. Returns 0, or -1 when the host socket failed. */
static int pump_output(struct session *s, struct stream *st)
{
	uint8_t buf[AGENT_CHUNK];
	ssize_t k = read(st->fd, buf, sizeof(buf));
	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (k <= 0) {
		close_fd(&st->fd);
		return 0;
	}
	return send_output(s, st, buf, (size_t)k);
}

/* Host stdin, forwarded to the command's pipe. */
struct input {
	int pipe;            /* write end, -1 once closed */
	bool eof;            /* the host sent end of input */
	const uint8_t *p;    /* unwritten part of the current STDIN frame */
	uint32_t left;
};

/* Take the next frame already buffered from the host; while the command
 * runs only STDIN may come. Its payload stays in the reader, so this is
 * called again only once that data went to the pipe. Returns 1 when a frame
 * was taken, 0 when none is complete, -1 on a protocol error (reason in
 * s->err). */
static int buffered_frame(struct session *s, struct input *in)
{
	uint16_t type;
	const uint8_t *p;
	uint32_t len;
	int r = proto_reader_next(&s->rd, &type, &p, &len, s->err, s->errlen);
	if (r <= 0)
		return r;
	if (type != PROTO_STDIN) {
		snprintf(s->err, s->errlen, "unexpected frame type %u during the run", type);
		return -1;
	}
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
 * connection ended (reason in s->err). */
static int host_read(struct session *s)
{
	size_t room;
	uint8_t *dst = proto_reader_space(&s->rd, &room);
	ssize_t k = read(s->fd, dst, room);
	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (k <= 0) {
		snprintf(s->err, s->errlen, "the host closed the connection during the run");
		return -1;
	}
	proto_reader_fed(&s->rd, (size_t)k);
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

static long ms_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static void kill_leftovers(struct session *s, pid_t pid)
{
	kill(-pid, SIGKILL);
	if (s->cfg->kill_all)
		kill(-1, SIGKILL);   /* PID 1 is spared: everything else was the command's */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/* The running command and the agent's ends of its pipes. */
struct child_proc {
	pid_t pid;
	int pidfd;            /* readable once it exits; -1 if the kernel lacks pidfd_open */
	struct stream out, err;
	struct input in;
};

/* Fork and exec the command. Returns 0 with c filled, 1 when the child
 * could not become the command (failed[] = {step, errno}; nothing runs),
 * or -1 after an ERROR frame. */
static int start(struct session *s, const char *path, char **env, struct child_proc *c, int failed[2])
{
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 }, pex[2] = { -1, -1 };
	int rc = -1;
	if (pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC) || pipe2(pex, O_CLOEXEC)) {
		rc = fail(s, "pipe: %s", strerror(errno));
		goto out;
	}
	c->pid = fork();
	if (c->pid < 0) {
		rc = fail(s, "fork: %s", strerror(errno));
		goto out;
	}
	if (c->pid == 0)
		child(s, path, env, pin[0], pout[1], perr[1], pex[1]);
	close_fd(&pex[1]);   /* so the read below sees EOF once exec succeeded */
	if (read(pex[0], failed, 2 * sizeof(int)) == (ssize_t)(2 * sizeof(int))) {
		waitpid(c->pid, NULL, 0);
		rc = 1;
		goto out;
	}
	c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
	fcntl(pin[1], F_SETFL, O_NONBLOCK);
	c->out = (struct stream){ pout[0], PROTO_STDOUT, 0, false };
	c->err = (struct stream){ perr[0], PROTO_STDERR, 0, false };
	c->in = (struct input){ .pipe = pin[1] };
	pout[0] = perr[0] = pin[1] = -1;
	rc = 0;
out:
	for (int i = 0; i < 2; i++) {
		close_fd(&pin[i]);
		close_fd(&pout[i]);
		close_fd(&perr[i]);
		close_fd(&pex[i]);
	}
	return rc;
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

/* Relay stdin and output until the command has exited and its pipes are
 * drained. Returns 0 with its wait status and usage, or -1 (reason in
 * s->err; the command is killed). */
static int supervise(struct session *s, struct child_proc *c, int *status, struct rusage *ru)
{
	bool exited = false;
	struct timespec drain_from = { 0 };
	while (c->out.fd >= 0 || c->err.fd >= 0 || !exited) {
		int r;
		while (!exited && c->in.left == 0 && !c->in.eof && (r = buffered_frame(s, &c->in)) != 0)
			if (r < 0)
				goto killed;
		struct pollfd fds[5];
		int n = 0, i_out = -1, i_err = -1, i_sock = -1, i_in = -1;
		if (c->out.fd >= 0) { i_out = n; fds[n++] = (struct pollfd){ c->out.fd, POLLIN, 0 }; }
		if (c->err.fd >= 0) { i_err = n; fds[n++] = (struct pollfd){ c->err.fd, POLLIN, 0 }; }
		if (!exited && c->in.left == 0 && !c->in.eof) { i_sock = n; fds[n++] = (struct pollfd){ s->fd, POLLIN, 0 }; }
		if (c->in.left && c->in.pipe >= 0) { i_in = n; fds[n++] = (struct pollfd){ c->in.pipe, POLLOUT, 0 }; }
		if (!exited && c->pidfd >= 0) fds[n++] = (struct pollfd){ c->pidfd, POLLIN, 0 };
		/* Without a pidfd, poll in short rounds to notice the exit. */
		int timeout = exited ? (int)(DRAIN_MS - ms_since(&drain_from)) : (c->pidfd >= 0 ? -1 : 50);
		if (exited && timeout <= 0) {
			cut_off(&c->out);
			cut_off(&c->err);
			break;
		}
		if (poll(fds, (nfds_t)n, timeout) < 0 && errno != EINTR) {
			snprintf(s->err, s->errlen, "poll: %s", strerror(errno));
			goto killed;
		}
		if ((i_out >= 0 && fds[i_out].revents && pump_output(s, &c->out) < 0) ||
		    (i_err >= 0 && fds[i_err].revents && pump_output(s, &c->err) < 0)) {
			snprintf(s->err, s->errlen, "sending output to the host: %s", strerror(errno));
			goto killed;
		}
		if (i_in >= 0 && fds[i_in].revents)
			feed_input(&c->in);
		if (i_sock >= 0 && fds[i_sock].revents && host_read(s) < 0)
			goto killed;
		if (!exited && wait4(c->pid, status, WNOHANG, ru) == c->pid) {
			exited = true;
			kill_leftovers(s, c->pid);
			clock_gettime(CLOCK_MONOTONIC, &drain_from);
			close_fd(&c->in.pipe);
		}
	}
	return 0;
killed:
	if (!exited) {
		kill(-c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
	}
	kill_leftovers(s, c->pid);
	return -1;
}

static int send_exit(struct session *s, const struct proto_exit *ex)
{
	uint8_t buf[PROTO_EXIT_LEN];
	proto_encode_exit(ex, buf);
	if (proto_send(s->fd, PROTO_EXIT, buf, sizeof(buf)) < 0) {
		snprintf(s->err, s->errlen, "sending EXIT: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Everything from fork to the EXIT frame. */
static int run(struct session *s, const char *path, char **env)
{
	struct child_proc c = { .pidfd = -1 };
	struct proto_exit ex = { 0 };
	int failed[2] = { 0, 0 };
	int r = start(s, path, env, &c, failed);
	if (r < 0)
		return -1;
	if (r == 1) {
		/* Only exec's own answer says anything about the program; a
		 * failed setup step is the agent's failure. */
		int e = failed[1];
		ex.kind = failed[0] != STEP_EXEC ? PROTO_END_ERROR
			: e == ENOENT ? PROTO_END_NOT_FOUND
			: (e == EACCES || e == ENOEXEC) ? PROTO_END_DENIED : PROTO_END_ERROR;
		ex.code = e;
		return send_exit(s, &ex);
	}
	int status = 0;
	struct rusage ru = { 0 };
	r = supervise(s, &c, &status, &ru);
	close_fd(&c.out.fd);
	close_fd(&c.err.fd);
	close_fd(&c.in.pipe);
	close_fd(&c.pidfd);
	if (r < 0)
		return fail(s, "%s", s->err);
	if (WIFSIGNALED(status)) {
		ex.kind = PROTO_END_SIGNALED;
		ex.signal = WTERMSIG(status);
	} else {
		ex.kind = PROTO_END_EXITED;
		ex.code = WEXITSTATUS(status);
	}
	ex.cpu_ms = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
		    (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
	ex.max_rss_kib = (uint64_t)ru.ru_maxrss;
	ex.stdout_bytes = c.out.bytes;
	ex.stderr_bytes = c.err.bytes;
	ex.flags = (c.out.truncated ? PROTO_EXIT_STDOUT_TRUNCATED : 0) |
		   (c.err.truncated ? PROTO_EXIT_STDERR_TRUNCATED : 0);
	return send_exit(s, &ex);
}

/* The command never starts: report why. */
static int refuse(struct session *s, uint32_t kind)
{
	struct proto_exit ex = { .kind = kind };
	return send_exit(s, &ex);
}

int agent_session(int fd, const struct agent_config *cfg, char *err, size_t errlen)
{
	static struct session s;   /* large: the request and the reader */
	s.fd = fd;
	s.cfg = cfg;
	s.err = err;
	s.errlen = errlen;
	proto_reader_init(&s.rd);
	uint8_t hello[64];
	size_t hn = proto_encode_hello(hello, sizeof(hello), AGENT_NAME);
	if (proto_send(fd, PROTO_HELLO, hello, (uint32_t)hn) < 0) {
		snprintf(err, errlen, "sending HELLO: %s", strerror(errno));
		return -1;
	}
	uint16_t type;
	const uint8_t *p;
	uint32_t len;
	int r = read_frame(&s, &type, &p, &len);
	if (r == 0)
		return fail(&s, "the host closed the connection before the request");
	if (r < 0)
		return fail(&s, "%s", err);
	if (type != PROTO_REQUEST)
		return fail(&s, "expected a REQUEST frame, got type %u", type);
	if (proto_decode_request(p, len, &s.req, err, errlen))
		return fail(&s, "malformed request: %s", err);

	char path[PATH_MAX];
	if (agent_resolve(s.req.argv[0], cfg->cwd, PROTO_PATH, path, sizeof(path)))
		return refuse(&s, PROTO_END_NOT_FOUND);
	struct stat st;
	if (!agent_allowed(path, s.req.allow, s.req.nallow) || stat(path, &st) < 0 || !S_ISREG(st.st_mode) ||
	    !(st.st_mode & 0111))
		return refuse(&s, PROTO_END_DENIED);
	static char store[PROTO_MAX_PAYLOAD + PATH_MAX + 128];
	char *env[PROTO_MAX_ENV + 5];
	if (agent_environment(cfg->home, s.req.env, s.req.envc, env, PROTO_MAX_ENV + 5, store, sizeof(store)) < 0)
		return fail(&s, "environment does not fit");
	return run(&s, path, env);
}
