#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/fs.h>

#include "cgroup.h"
#include "files.h"
#include "forward.h"
#include "proto_sandbox.h"
#include "stage.h"

/* The room a command's environment gets (agent.c's sizes for a run, with
 * the command's own grants besides the sandbox's). */
#define CMD_ENV_STORE (2 * PROTO_MAX_PAYLOAD + PATH_MAX + 1024)
#define CMD_ENV_MAX   (PROTO_MAX_ENV + PROTO_SB_MAX_ENV + 5 + AGENT_NET_ENV + 1)

/* One output pipe of a command. */
struct pipe_out {
	int fd;             /* -1 once at EOF, or cut off */
	uint16_t type;      /* PROTO_STDOUT or PROTO_STDERR */
	uint64_t bytes;     /* produced */
	bool truncated;
};

/* One command, from CMD_START to its CMD_EXIT. */
struct cmd {
	bool used;
	uint32_t id;
	pid_t pid;
	int pidfd;
	bool exited;                 /* its main process: status and usage below */
	int status;
	struct rusage ru;
	struct pipe_out out, err;
	int in;                      /* its stdin's write end, -1 once closed */
	uint8_t *inbuf;              /* stdin the pipe has not taken yet */
	size_t inlen;
	bool in_close;               /* close stdin once inbuf is written */
	struct cgroup group;
	bool has_group;
	int64_t deadline_ms;         /* 0: none */
	int64_t drain_until_ms;      /* after the exit: how long the pipes are read */
	bool timed_out;
	bool tty;                    /* on a terminal: out is its master, in a second descriptor of it */
	bool in_nl;                  /* the last byte of stdin taken was a newline (or none was) */
	uint64_t cpu_ms;             /* its own CPU limit; 0: none */
	bool oom_killed;             /* its cgroup's memory.max killed something of it */
};

struct sandbox {
	int fd;
	struct proto_reader *rd;
	const struct proto_request *req;
	const struct agent_config *cfg;
	struct outq q;
	struct files files;
	struct cmd cmd[SANDBOX_MAX_CMDS];
	unsigned seq;                /* names the commands' cgroups: ids may come back */
	pid_t fwd;                   /* the network forwarder; -1: none, or it died and was reaped */
	bool host_eof;
	bool pausing;                /* PAUSE came: nothing is produced until RESUME */
	bool paused_sent;            /* PAUSED is queued: the host may stop the VM from here on */
	int frozen;                  /* cfg->freeze_dir while frozen (FIFREEZE), else -1 */
	char *err;
	size_t errlen;
};

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ---- the queue to the host ------------------------------------------------------- */

int outq_put(struct outq *q, uint16_t type, const void *a, uint32_t alen, const void *b, uint32_t blen)
{
	size_t need = PROTO_HDR_LEN + (size_t)alen + blen;
	if (alen + (size_t)blen > PROTO_MAX_PAYLOAD || q->len + need > SANDBOX_QUEUE_MAX)
		return -1;
	if (q->head && q->head + q->len + need > q->cap) {
		memmove(q->buf, q->buf + q->head, q->len);
		q->head = 0;
	}
	if (q->len + need > q->cap) {
		size_t cap = q->cap ? q->cap : 64 * 1024;
		while (cap < q->len + need)
			cap *= 2;
		uint8_t *nb = realloc(q->buf, cap);
		if (!nb)
			return -1;
		q->buf = nb;
		q->cap = cap;
	}
	uint8_t *at = q->buf + q->head + q->len;
	proto_header(at, type, alen + blen);
	if (alen)
		memcpy(at + PROTO_HDR_LEN, a, alen);
	if (blen)
		memcpy(at + PROTO_HDR_LEN + alen, b, blen);
	q->len += need;
	return 0;
}

bool outq_full(const struct outq *q)
{
	return q->len > SANDBOX_QUEUE_HIGH;
}

/* Write what the socket takes now. Returns 0, or -1 when it failed. */
static int outq_flush(struct outq *q, int fd)
{
	while (q->len) {
		ssize_t k = write(fd, q->buf + q->head, q->len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN)
			return 0;
		if (k <= 0)
			return -1;
		q->head += (size_t)k;
		q->len -= (size_t)k;
	}
	q->head = 0;
	return 0;
}

/* ---- commands -------------------------------------------------------------------- */

static struct cmd *cmd_of(struct sandbox *sb, uint32_t id)
{
	for (unsigned i = 0; i < SANDBOX_MAX_CMDS; i++)
		if (sb->cmd[i].used && sb->cmd[i].id == id)
			return &sb->cmd[i];
	return NULL;
}

static int send_exit(struct sandbox *sb, uint32_t id, const struct proto_exit *e)
{
	uint8_t buf[PROTO_CMD_EXIT_LEN];
	proto_encode_cmd_exit(buf, id, e);
	return outq_put(&sb->q, PROTO_CMD_EXIT, buf, sizeof(buf), NULL, 0);
}

/* A command refused before it ran: its EXIT says why. */
static int refuse(struct sandbox *sb, uint32_t id, uint32_t kind, int code)
{
	struct proto_exit e = { .kind = kind, .code = code };
	return send_exit(sb, id, &e);
}

/* Everything of c dies: its process group, and its cgroup wherever its
 * processes went. */
static void kill_cmd(struct cmd *c)
{
	char why[256];
	if (!c->exited)
		kill(-c->pid, SIGKILL);
	if (c->has_group && cgroup_kill(&c->group, why, sizeof(why)) < 0)
		fprintf(stderr, "vmrun-agent: %s\n", why);   /* the process group was killed all the same */
}

/* The environment for cmd: the sandbox's grants, then the command's. */
static int cmd_env(const struct sandbox *sb, const struct proto_cmd *pc, char **env, char *store)
{
	char *grants[PROTO_MAX_ENV + PROTO_SB_MAX_ENV];
	unsigned n = 0;
	for (unsigned i = 0; i < sb->req->envc; i++)
		grants[n++] = sb->req->env[i];
	for (unsigned i = 0; i < pc->envc; i++)
		grants[n++] = pc->env[i];
	return agent_environment(sb->cfg->home, grants, n, sb->req->net_port != 0, sb->req->run_id, env, CMD_ENV_MAX,
				 store, CMD_ENV_STORE);
}

/* Start c's process from path: 0, 1 with failed[] when the child could
 * not become the command, -1 with errno. */
static int spawn(struct sandbox *sb, struct cmd *c, const struct proto_cmd *pc, const char *path, const char *cwd,
		 char **env, int failed[2])
{
	struct stage_exec x = {
		.path = path, .argv = pc->argv, .env = env, .cwd = cwd, .uid = sb->cfg->uid, .gid = sb->cfg->gid,
		.nproc = sb->req->nproc, .nofile = sb->req->nofile, .fsize = sb->req->fsize, .cpu_ms = pc->cpu_ms,
		.group = c->has_group ? &c->group : NULL,
	};
	struct stage_proc p;
	/* on a terminal, everything it writes is its stdout: a terminal has one stream */
	int rc = pc->pty_cols ? stage_spawn_pty(&x, pc->pty_cols, pc->pty_rows, &p, failed)
			      : stage_spawn(&x, true, &p, failed);
	if (rc)
		return rc;
	c->pid = p.pid;
	c->pidfd = p.pidfd;
	c->in = p.in;
	c->tty = pc->pty_cols != 0;
	fcntl(p.out, F_SETFL, O_NONBLOCK);
	if (p.err >= 0)
		fcntl(p.err, F_SETFL, O_NONBLOCK);
	c->out = (struct pipe_out){ .fd = p.out, .type = PROTO_STDOUT };
	c->err = (struct pipe_out){ .fd = p.err, .type = PROTO_STDERR };
	return 0;
}

static void free_cmd(struct cmd *c)
{
	close_fd(&c->out.fd);
	close_fd(&c->err.fd);
	close_fd(&c->in);
	close_fd(&c->pidfd);
	free(c->inbuf);
	*c = (struct cmd){ .pidfd = -1, .in = -1, .out.fd = -1, .err.fd = -1 };
}

/* Release c's cgroup (its processes were killed at its exit). */
static void drop_group(struct cmd *c)
{
	char why[256];
	if (c->has_group && cgroup_destroy(&c->group, STAGE_CGROUP_EMPTY_MS, why, sizeof(why)) < 0)
		fprintf(stderr, "vmrun-agent: %s\n", why);
	c->has_group = false;
}

/* CMD_START: check, then run. Anything refused is a CMD_EXIT saying why. */
static int start_cmd(struct sandbox *sb, const uint8_t *p, uint32_t len)
{
	struct proto_cmd *pc = malloc(sizeof(*pc));
	char *store = malloc(CMD_ENV_STORE);
	char **env = malloc(CMD_ENV_MAX * sizeof(*env));
	int rc = -1;
	if (!pc || !store || !env) {
		proto_errf(sb->err, sb->errlen, "out of memory for a command");
		goto out;
	}
	if (proto_decode_cmd(p, len, pc, sb->err, sb->errlen)) {
		proto_errf(sb->err, sb->errlen, "malformed CMD_START: %s", sb->err);
		goto out;
	}
	if (cmd_of(sb, pc->id)) {
		proto_errf(sb->err, sb->errlen, "CMD_START of command %u, which is running", pc->id);
		goto out;
	}
	struct cmd *c = NULL;
	for (unsigned i = 0; i < SANDBOX_MAX_CMDS && !c; i++)
		if (!sb->cmd[i].used)
			c = &sb->cmd[i];
	char cwd[PATH_MAX], path[PATH_MAX];
	const char *dir = pc->cwd ? pc->cwd : sb->cfg->cwd;
	if (!c) {
		rc = refuse(sb, pc->id, PROTO_END_ERROR, EAGAIN);
		goto out;
	}
	if (snprintf(cwd, sizeof(cwd), "%s%s%s", dir[0] == '/' ? "" : sb->cfg->cwd, dir[0] == '/' ? "" : "/", dir) >=
	    (int)sizeof(cwd)) {
		rc = refuse(sb, pc->id, PROTO_END_ERROR, ENAMETOOLONG);
		goto out;
	}
	uint32_t kind = agent_check_program(pc->argv[0], cwd, sb->req->allow, sb->req->nallow, path, sizeof(path));
	if (kind) {
		rc = refuse(sb, pc->id, kind, 0);
		goto out;
	}
	if (cmd_env(sb, pc, env, store) < 0) {
		rc = refuse(sb, pc->id, PROTO_END_ERROR, E2BIG);
		goto out;
	}
	if (pc->memory_kib && !sb->cfg->cgroup_root) {
		rc = refuse(sb, pc->id, PROTO_END_ERROR, ENOSYS);   /* a limit that cannot hold is refused */
		goto out;
	}
	*c = (struct cmd){ .used = true, .id = pc->id, .pidfd = -1, .in = -1, .out.fd = -1, .err.fd = -1, .in_nl = true,
			   .cpu_ms = pc->cpu_ms };
	if (sb->cfg->cgroup_root) {
		char name[32];
		snprintf(name, sizeof(name), "vmrun-cmd%u", sb->seq++);
		/* without a limit of its own (the VM's memory is the
		 * sandbox's) the group is there so that a kill reaches
		 * everything it started */
		char why[256];
		if (cgroup_create(sb->cfg->cgroup_root, name, pc->memory_kib ? pc->memory_kib : UINT64_MAX, &c->group, why,
				  sizeof(why)) < 0) {
			int e = errno;
			fprintf(stderr, "vmrun-agent: %s\n", why);
			free_cmd(c);
			rc = refuse(sb, pc->id, PROTO_END_ERROR, e);
			goto out;
		}
		c->has_group = true;
	}
	int failed[2] = { 0, 0 };
	int r = spawn(sb, c, pc, path, cwd, env, failed);
	if (r) {
		int e = r < 0 ? errno : failed[1];
		drop_group(c);
		free_cmd(c);
		rc = refuse(sb, pc->id, r < 0 ? PROTO_END_ERROR : stage_exec_failed(failed), e);
		goto out;
	}
	if (pc->timeout_ms)
		c->deadline_ms = now_ms() + (int64_t)(pc->timeout_ms > INT32_MAX ? INT32_MAX : pc->timeout_ms);
	rc = 0;
out:
	free(pc);
	free(store);
	free(env);
	return rc;
}

/* CMD_STDIN: queued for the pipe; empty closes it once the queue is out. */
static int cmd_stdin(struct sandbox *sb, const uint8_t *p, uint32_t len)
{
	uint32_t id, n;
	const uint8_t *data;
	if (proto_sb_split(p, len, &id, &data, &n))
		return proto_errf(sb->err, sb->errlen, "CMD_STDIN of %u bytes", len);
	struct cmd *c = cmd_of(sb, id);
	if (!c || c->in < 0 || c->in_close)
		return 0;   /* it ended, or closed its stdin: the rest is dropped */
	if (n == 0 && c->tty) {
		/* a terminal is not closed by its input's writer: its end of
		 * file is the EOF character (^D), at the start of a line */
		static const uint8_t eof[2] = { 4, 4 };
		data = eof;
		n = c->in_nl ? 1 : 2;
		c->in_close = true;
	} else if (n == 0) {
		c->in_close = true;
		if (!c->inlen)
			close_fd(&c->in);
		return 0;
	} else {
		c->in_nl = data[n - 1] == '\n';
	}
	if (c->inlen + n > SANDBOX_STDIN_MAX && !c->in_close) {
		/* it does not read what it has: the rest is dropped, and its
		 * stdin closed once what is held is written (it sees EOF) */
		c->in_close = true;
		return 0;
	}
	uint8_t *nb = realloc(c->inbuf, c->inlen + n);
	if (!nb)
		return proto_errf(sb->err, sb->errlen, "out of memory for stdin");
	memcpy(nb + c->inlen, data, n);
	c->inbuf = nb;
	c->inlen += n;
	return 0;
}

static int cmd_signal(struct sandbox *sb, const uint8_t *p, uint32_t len)
{
	uint32_t id, sig;
	if (proto_decode_signal(p, len, &id, &sig, sb->err, sb->errlen))
		return -1;
	struct cmd *c = cmd_of(sb, id);
	if (!c || c->exited)
		return 0;
	if (sig == SIGKILL) {
		kill_cmd(c);
		return 0;
	}
	kill(-c->pid, (int)sig);
	/* on a terminal, a shell runs each job in a group of its own: the
	 * signal goes to the one in the foreground too, as a typed ^C would */
	pid_t fg = c->tty && c->out.fd >= 0 ? tcgetpgrp(c->out.fd) : -1;
	if (fg > 0 && fg != c->pid)
		kill(-fg, (int)sig);
	return 0;
}

/* ---- the host's frames ------------------------------------------------------------ */

/* CMD_RESIZE: a terminal's new size (SIGWINCH to its foreground group,
 * by the kernel); a command without a terminal, or one that ended, has
 * nothing to resize. */
static int cmd_resize(struct sandbox *sb, const uint8_t *p, uint32_t len)
{
	uint32_t id;
	uint16_t cols, rows;
	if (proto_decode_resize(p, len, &id, &cols, &rows, sb->err, sb->errlen))
		return proto_errf(sb->err, sb->errlen, "malformed CMD_RESIZE: %s", sb->err);
	struct cmd *c = cmd_of(sb, id);
	struct winsize ws = { .ws_col = cols, .ws_row = rows };
	if (c && c->tty && c->out.fd >= 0)
		ioctl(c->out.fd, TIOCSWINSZ, &ws);
	return 0;
}

/* PAUSE: the workspace's file system is frozen, which writes out what
 * its cache holds and holds new writers until the thaw: the disk the host
 * saves, copies or diffs is whole and still. Where it cannot be frozen
 * (it is frozen already: a command of root's froze it) it is at least
 * synced. */
static void freeze_workspace(struct sandbox *sb)
{
	if (!sb->cfg->freeze_dir || sb->frozen >= 0)
		return;
	int fd = open(sb->cfg->freeze_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (ioctl(fd, FIFREEZE, 0) == 0) {
		sb->frozen = fd;
		return;
	}
	syncfs(fd);
	close(fd);
}

static void thaw_workspace(struct sandbox *sb)
{
	if (sb->frozen < 0)
		return;
	(void)ioctl(sb->frozen, FITHAW, 0);
	close_fd(&sb->frozen);
}

/* RESUME: the pause is over (or called off). The clock is set only by
 * the guest's init, as a run's REQUEST sets it. */
static int resume(struct sandbox *sb, const uint8_t *p, uint32_t len)
{
	if ((len != PROTO_RESUME_LEN && len != PROTO_RESUME_LEN + PROTO_SEED_LEN) || !sb->pausing)
		return proto_errf(sb->err, sb->errlen, "RESUME of %u bytes%s", len, sb->pausing ? "" : " while not paused");
	uint64_t ns;
	memcpy(&ns, p, sizeof(ns));   /* host byte order, as every field */
	char why[256];
	/* a fork: the RNG apart from its siblings' before anything reads it;
	 * a guest that cannot be set apart must not go on as a copy */
	if (sb->cfg->random_dev &&
	    agent_reseed(sb->cfg->random_dev, len > PROTO_RESUME_LEN ? p + PROTO_RESUME_LEN : NULL, ns, why, sizeof(why)))
		return proto_errf(sb->err, sb->errlen, "on RESUME: %s", why);
	thaw_workspace(sb);
	sb->pausing = sb->paused_sent = false;
	return outq_put(&sb->q, PROTO_READY, NULL, 0, NULL, 0) ? proto_errf(sb->err, sb->errlen, "queue to the host full")
							       : 0;
}

static int host_frame(struct sandbox *sb, uint16_t type, const uint8_t *p, uint32_t len)
{
	if (sb->pausing && type != PROTO_RESUME)
		return proto_errf(sb->err, sb->errlen, "frame type %u while paused", type);
	switch (type) {
	case PROTO_PAUSE:
		if (len)
			return proto_errf(sb->err, sb->errlen, "PAUSE of %u bytes", len);
		sb->pausing = true;
		freeze_workspace(sb);
		return 0;
	case PROTO_RESUME:
		return resume(sb, p, len);
	case PROTO_CMD_START:
		return start_cmd(sb, p, len);
	case PROTO_CMD_STDIN:
		return cmd_stdin(sb, p, len);
	case PROTO_CMD_SIGNAL:
		return cmd_signal(sb, p, len);
	case PROTO_CMD_RESIZE:
		return cmd_resize(sb, p, len);
	case PROTO_FILE_OP: {
		struct proto_file_req r;
		if (proto_decode_file_req(p, len, &r, sb->err, sb->errlen))
			return proto_errf(sb->err, sb->errlen, "malformed FILE_OP: %s", sb->err);
		return files_request(&sb->files, &r, &sb->q) ? proto_errf(sb->err, sb->errlen, "queue to the host full") : 0;
	}
	case PROTO_FILE_DATA: {
		uint32_t id, n;
		const uint8_t *data;
		if (proto_sb_split(p, len, &id, &data, &n))
			return proto_errf(sb->err, sb->errlen, "FILE_DATA of %u bytes", len);
		return files_data(&sb->files, id, data, n, &sb->q) ? proto_errf(sb->err, sb->errlen, "queue to the host full")
								    : 0;
	}
	default:
		return proto_errf(sb->err, sb->errlen, "unexpected frame type %u in a sandbox", type);
	}
}

/* Read what the host sent and handle every whole frame. */
static int host_read(struct sandbox *sb)
{
	ssize_t k = proto_reader_fill(sb->rd, sb->fd);
	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (k <= 0) {
		sb->host_eof = true;
		return 0;
	}
	uint16_t type;
	const uint8_t *p;
	uint32_t len;
	int r;
	while ((r = proto_reader_next(sb->rd, &type, &p, &len, sb->err, sb->errlen)) == 1)
		if (host_frame(sb, type, p, len) < 0)
			return -1;
	return r;
}

/* ---- output, exits, deadlines ------------------------------------------------------ */

/* Read what o's pipe has: to the host up to the sandbox's max_output per
 * stream and command; the rest is counted and dropped. */
static int pump(struct sandbox *sb, struct cmd *c, struct pipe_out *o)
{
	uint8_t buf[AGENT_CHUNK];
	ssize_t k = read(o->fd, buf, sizeof(buf));
	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (k <= 0) {
		close_fd(&o->fd);
		return 0;
	}
	uint64_t cap = sb->req->max_output, room = o->bytes >= cap ? 0 : cap - o->bytes;
	size_t n = (size_t)k;
	o->bytes += n;
	if (n > room) {
		o->truncated = true;
		n = (size_t)room;
	}
	if (!n)
		return 0;
	uint8_t hdr[8];
	proto_encode_output_hdr(hdr, c->id, o->type);
	return outq_put(&sb->q, PROTO_CMD_OUTPUT, hdr, sizeof(hdr), buf, (uint32_t)n);
}

static void feed(struct cmd *c)
{
	ssize_t k = write(c->in, c->inbuf, c->inlen);
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (k < 0) {   /* it closed its stdin: the rest is dropped */
		c->inlen = 0;
		close_fd(&c->in);
		return;
	}
	memmove(c->inbuf, c->inbuf + k, c->inlen - (size_t)k);
	c->inlen -= (size_t)k;
	if (!c->inlen && c->in_close)
		close_fd(&c->in);
}

/* c's main process ended: what it left is killed, its pipes drain. */
static void reaped(struct cmd *c, int status, const struct rusage *ru)
{
	kill(-c->pid, SIGKILL);   /* its group, where there is no cgroup.kill */
	c->status = status;
	c->ru = *ru;
	c->exited = true;
	kill_cmd(c);
	/* memory.events counts what any OOM kill took of the group: its own
	 * limit's, or the VM's as a whole */
	uint64_t kills = 0;
	char why[256];
	if (c->has_group && cgroup_oom_kills(&c->group, &kills, why, sizeof(why)) == 0 && kills)
		c->oom_killed = true;
	close_fd(&c->pidfd);
	close_fd(&c->in);
	c->drain_until_ms = now_ms() + STAGE_DRAIN_MS;
}

/* Whether c is over: exited, and its pipes at EOF or their drain's time
 * up. Then its CMD_EXIT goes out and its slot is free. */
static int finish(struct sandbox *sb, struct cmd *c)
{
	bool piped = c->out.fd >= 0 || c->err.fd >= 0;
	/* the pipes are not read while the queue is full: that time is not the drain's */
	if (!c->exited || (piped && (now_ms() < c->drain_until_ms || outq_full(&sb->q))))
		return 0;
	struct pipe_out *o[2] = { &c->out, &c->err };
	for (int i = 0; i < 2; i++)
		if (o[i]->fd >= 0)
			o[i]->truncated = true;   /* a process outside its group held the pipe */
	struct proto_exit e = { .stdout_bytes = c->out.bytes, .stderr_bytes = c->err.bytes };
	if (WIFSIGNALED(c->status)) {
		e.kind = PROTO_END_SIGNALED;
		e.signal = WTERMSIG(c->status);
	} else {
		e.kind = PROTO_END_EXITED;
		e.code = WEXITSTATUS(c->status);
	}
	e.cpu_ms = (uint64_t)(c->ru.ru_utime.tv_sec + c->ru.ru_stime.tv_sec) * 1000 +
		   (uint64_t)(c->ru.ru_utime.tv_usec + c->ru.ru_stime.tv_usec) / 1000;
	e.max_rss_kib = (uint64_t)c->ru.ru_maxrss;
	e.flags = (c->out.truncated ? PROTO_EXIT_STDOUT_TRUNCATED : 0) | (c->err.truncated ? PROTO_EXIT_STDERR_TRUNCATED : 0) |
		  (c->timed_out ? PROTO_EXIT_TIMED_OUT : 0) | (c->oom_killed ? PROTO_EXIT_OOM_KILLED : 0) |
		  (stage_cpu_exceeded(c->cpu_ms, c->status, e.cpu_ms) ? PROTO_EXIT_CPU_EXCEEDED : 0);
	uint32_t id = c->id;
	drop_group(c);
	free_cmd(c);
	return send_exit(sb, id, &e);
}

/* Collect exits: the commands' own (by pid, with status and usage), and
 * as PID 1 any other process that ended (orphans), peeked first with
 * WNOWAIT so that a command's status is never taken by the sweep. */
static void reap(struct sandbox *sb)
{
	for (unsigned i = 0; i < SANDBOX_MAX_CMDS; i++) {
		struct cmd *c = &sb->cmd[i];
		int status;
		struct rusage ru;
		if (c->used && !c->exited && wait4(c->pid, &status, WNOHANG, &ru) == c->pid)
			reaped(c, status, &ru);
	}
	if (!sb->cfg->kill_all)
		return;
	for (;;) {
		siginfo_t si = { 0 };
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0)
			return;
		bool ours = files_owns(&sb->files, si.si_pid);   /* files.c waits for its tars */
		for (unsigned i = 0; i < SANDBOX_MAX_CMDS && !ours; i++)
			ours = sb->cmd[i].used && !sb->cmd[i].exited && sb->cmd[i].pid == si.si_pid;
		if (ours)
			return;   /* the loop above takes it next round */
		waitpid(si.si_pid, NULL, 0);
		if (si.si_pid == sb->fwd) {
			fprintf(stderr, "vmrun-agent: the network forwarder ended\n");
			sb->fwd = -1;   /* reaped: its pid is not ours to signal any more */
		}
	}
}

static void deadlines(struct sandbox *sb)
{
	int64_t now = now_ms();
	for (unsigned i = 0; i < SANDBOX_MAX_CMDS; i++) {
		struct cmd *c = &sb->cmd[i];
		if (c->used && !c->exited && c->deadline_ms && now >= c->deadline_ms && !c->timed_out) {
			c->timed_out = true;
			kill_cmd(c);
		}
	}
}

/* ---- the loop ------------------------------------------------------------------------ */

#define MAX_POLL (2 + SANDBOX_MAX_CMDS * 4)

/* The poll timeout: the nearest deadline or drain, 0 with a read under
 * way that has room, and a second at most as PID 1 (orphans). */
static int next_timeout(const struct sandbox *sb)
{
	if (sb->pausing)
		return 1000;   /* only the host's socket matters */
	if (files_reading(&sb->files) && !outq_full(&sb->q))
		return 0;
	/* a tar's output comes when it writes it: look again soon */
	int64_t now = now_ms(), t = files_waiting(&sb->files) && !outq_full(&sb->q) ? 10 : sb->cfg->kill_all ? 1000 : 60000;
	for (unsigned i = 0; i < SANDBOX_MAX_CMDS; i++) {
		const struct cmd *c = &sb->cmd[i];
		int64_t at = !c->used ? 0 : c->exited ? c->drain_until_ms : c->pidfd < 0 ? now + 50 : c->deadline_ms;
		if (at && at - now < t)
			t = at - now < 0 ? 0 : at - now;
	}
	return (int)t;
}

/* While paused: what is queued goes out, then PAUSED after it. Nothing
 * else happens (no exit is reaped, no deadline kills, no file data is
 * read) until RESUME: whatever it would send could be lost with the
 * VM's vsock connections. */
static int pause_step(struct sandbox *sb)
{
	if (!sb->paused_sent && !sb->q.len) {
		if (outq_put(&sb->q, PROTO_PAUSED, NULL, 0, NULL, 0))
			return proto_errf(sb->err, sb->errlen, "queue to the host full");
		sb->paused_sent = true;
	}
	if (outq_flush(&sb->q, sb->fd) < 0) {
		sb->host_eof = true;
		sb->q.len = 0;
	}
	return 0;
}

static int step(struct sandbox *sb)
{
	struct pollfd fds[MAX_POLL];
	struct watch { struct cmd *c; int what; } who[MAX_POLL];
	nfds_t n = 0;
	bool producing = !outq_full(&sb->q) && !sb->pausing;
	/* the host's frames wait while the queue is full: what they ask for
	 * (a LIST) would add to it */
	if ((producing || sb->pausing) && !sb->host_eof)
		fds[n++] = (struct pollfd){ sb->fd, POLLIN, 0 };
	if (sb->q.len)
		fds[n++] = (struct pollfd){ sb->fd, POLLOUT, 0 };
	nfds_t first_cmd = n;
	for (unsigned i = 0; i < SANDBOX_MAX_CMDS; i++) {
		struct cmd *c = &sb->cmd[i];
		if (!c->used)
			continue;
		struct { int fd; short ev; bool on; } w[4] = {
			{ c->out.fd, POLLIN, producing }, { c->err.fd, POLLIN, producing },
			{ c->in, POLLOUT, c->inlen > 0 }, { c->pidfd, POLLIN, !c->exited },
		};
		for (int k = 0; k < 4; k++)
			if (w[k].fd >= 0 && w[k].on) {
				who[n] = (struct watch){ c, k };
				fds[n++] = (struct pollfd){ w[k].fd, w[k].ev, 0 };
			}
	}
	if (poll(fds, n, next_timeout(sb)) < 0 && errno != EINTR)
		return proto_errf(sb->err, sb->errlen, "poll: %s", strerror(errno));
	for (nfds_t i = first_cmd; i < n; i++) {
		if (!fds[i].revents)
			continue;
		struct cmd *c = who[i].c;
		int what = who[i].what;
		if ((what == 0 && c->out.fd >= 0 && pump(sb, c, &c->out) < 0) ||
		    (what == 1 && c->err.fd >= 0 && pump(sb, c, &c->err) < 0))
			return proto_errf(sb->err, sb->errlen, "queue to the host full");
		if (what == 2 && c->in >= 0)
			feed(c);
	}
	for (nfds_t i = 0; i < first_cmd; i++)
		if (fds[i].revents && fds[i].events == POLLIN && host_read(sb) < 0)
			return -1;
	if (sb->pausing)
		return pause_step(sb);
	reap(sb);
	deadlines(sb);
	for (unsigned i = 0; i < SANDBOX_MAX_CMDS; i++)
		if (sb->cmd[i].used && finish(sb, &sb->cmd[i]) < 0)
			return proto_errf(sb->err, sb->errlen, "queue to the host full");
	if (files_pump(&sb->files, &sb->q) < 0)
		return proto_errf(sb->err, sb->errlen, "queue to the host full");
	if (outq_flush(&sb->q, sb->fd) < 0) {
		sb->host_eof = true;   /* the host is gone: nothing more can reach it */
		sb->q.len = 0;
	}
	return 0;
}

/* After a pause: a new connection to the host, whose first frame is
 * RESUME. Nothing was queued after PAUSED, so nothing is lost. */
static int reconnect(struct sandbox *sb)
{
	int fd = sb->cfg->reconnect();
	if (fd < 0) {
		fprintf(stderr, "vmrun-agent: reconnecting after a pause: %s\n", strerror(errno));
		return -1;
	}
	/* the same number: the caller closes the connection it gave us */
	int same = dup3(fd, sb->fd, O_CLOEXEC);
	close(fd);
	if (same < 0) {
		fprintf(stderr, "vmrun-agent: reconnecting after a pause: dup3: %s\n", strerror(errno));
		return -1;
	}
	fcntl(sb->fd, F_SETFL, fcntl(sb->fd, F_GETFL) | O_NONBLOCK);
	proto_reader_init(sb->rd);
	sb->q.len = sb->q.head = 0;
	sb->host_eof = false;
	return 0;
}

/* The host closed the connection: every command ends, with its group. */
static void end_all(struct sandbox *sb)
{
	for (unsigned i = 0; i < SANDBOX_MAX_CMDS; i++) {
		struct cmd *c = &sb->cmd[i];
		if (!c->used)
			continue;
		kill_cmd(c);
		if (!c->exited)
			waitpid(c->pid, NULL, 0);
		drop_group(c);
		free_cmd(c);
	}
}

int sandbox_serve(int fd, struct proto_reader *rd, const struct proto_request *req, const struct agent_config *cfg,
		  int listen_fd, char *err, size_t errlen)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb)
		return proto_errf(err, errlen, "out of memory for the sandbox");
	*sb = (struct sandbox){ .fd = fd, .rd = rd, .req = req, .cfg = cfg, .frozen = -1, .err = err, .errlen = errlen };
	for (unsigned i = 0; i < SANDBOX_MAX_CMDS; i++)   /* no fd of theirs yet: nothing to close */
		sb->cmd[i] = (struct cmd){ .pidfd = -1, .in = -1, .out.fd = -1, .err.fd = -1 };
	files_init(&sb->files, cfg->cwd, cfg->uid, cfg->gid);
	int rc = -1;
	sb->fwd = -1;
	/* One forwarder for the sandbox's life: commands come and go. */
	if (listen_fd >= 0 && (sb->fwd = forward_spawn(listen_fd, req->net_port, err, errlen)) < 0)
		goto out;
	if (proto_send(fd, PROTO_READY, NULL, 0) < 0) {
		proto_errf(err, errlen, "sending READY: %s", strerror(errno));
		goto out;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	/* Frames that came with the REQUEST are in the reader already. */
	uint16_t type;
	const uint8_t *p;
	uint32_t len;
	int r;
	while ((r = proto_reader_next(rd, &type, &p, &len, err, errlen)) == 1)
		if (host_frame(sb, type, p, len) < 0)
			goto out;
	if (r < 0)
		goto out;
	for (;;) {
		while (!sb->host_eof)
			if (step(sb) < 0)
				goto out;
		/* paused: the VM was saved with this connection open, and
		 * restored with it reset; the host waits for the next one */
		if (!sb->paused_sent || !cfg->reconnect || reconnect(sb) < 0)
			break;
	}
	rc = 0;
out:
	thaw_workspace(sb);   /* the end's sync and unmount must not wait on it */
	end_all(sb);
	files_release(&sb->files);
	if (sb->fwd > 0)
		forward_stop(sb->fwd);
	free(sb->q.buf);
	free(sb);
	return rc;
}
