/* The guest agent's session (guest-agent/agent.c, stage.c) as an ordinary
 * process: a forked child serves one session over a socketpair with the
 * real programs of this machine, the test plays the host, with a small
 * host of its own (host_converse: the REQUEST, stdin, each stage's output
 * and EXIT; the agent is tested apart from vmrun's host/run/session.c) or,
 * for hostile hosts, frame by frame. Sessions of one stage and of two
 * (compile, then run), with per-stage limits. Also agent_resolve,
 * agent_allowed, agent_environment, and the pure parts of cgroup.c (the
 * rest needs PID 1 of a guest).
 *
 * The test process is a child subreaper, so whatever a command leaves
 * behind ends up as its child: each test ends by checking that no process
 * is left (and reaping the ones killed). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "leftovers.h"
#include "cgroup.h"
#include "proto.h"

#define DEADLINE_MS 30000
#define MIB (1u << 20)

static char tmpdir[128];   /* canonical */
static struct agent_config cfg;
static char errbuf[512];

/* Canonical paths of the programs used, as the agent resolves them. */
static char p_printf[PATH_MAX], p_env[PATH_MAX], p_sh[PATH_MAX], p_cat[PATH_MAX], p_wc[PATH_MAX],
	p_head[PATH_MAX], p_pwd[PATH_MAX], p_true[PATH_MAX], p_touch[PATH_MAX];

/* ---- helpers -------------------------------------------------------------- */

static void path_in_tmp(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", tmpdir, name);
}

static void write_file(const char *name, const char *content, mode_t mode)
{
	char p[PATH_MAX];
	path_in_tmp(p, sizeof(p), name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static bool exists_in_tmp(const char *name)
{
	char p[PATH_MAX];
	struct stat st;
	path_in_tmp(p, sizeof(p), name);
	return lstat(p, &st) == 0;
}

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The request the host sends; REQUEST() resets it to one RUN stage,
 * COMPILE() then puts a compile stage before that. */
static struct proto_request rq;

/* The run id the requests carry, as long as vmrun's. */
#define RUN_ID "0123456789abcdef0123456789abcdef"
#define RUN_ID_VAR "VMRUN_RUN_ID=" RUN_ID

/* The run stage (the last). */
#define RUN_STAGE (rq.stage[rq.nstages - 1])

static void allow(const char *path)
{
	rq.allow[rq.nallow++] = (char *)path;
}

static void request_v(const char *const *argv)
{
	memset(&rq, 0, sizeof(rq));
	rq.nstages = 1;
	rq.stage[0].kind = PROTO_STAGE_RUN;
	for (; *argv; argv++)
		rq.stage[0].argv[rq.stage[0].argc++] = (char *)*argv;
	rq.max_output = 4 * MIB;
	rq.nproc = 4096;
	rq.nofile = 256;
	rq.fsize = 64 * MIB;
	memset(rq.seed, 0xa5, sizeof(rq.seed));
	rq.time_ns = 1700000000000000000ull;   /* not set: cfg has no random_dev */
	snprintf(rq.run_id, sizeof(rq.run_id), "%s", RUN_ID);
	const char *const defaults[] = { p_printf, p_env, p_sh, p_cat, p_wc, p_head, p_pwd, p_true };
	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
		allow(defaults[i]);
}

#define REQUEST(...)                                                   \
	do {                                                           \
		const char *const argv_[] = { __VA_ARGS__, NULL };        \
		request_v(argv_);                                      \
	} while (0)

/* Make the request compile-then-run: argv becomes stage 0. */
static void compile_v(const char *const *argv)
{
	assert_int_equal(rq.nstages, 1);
	rq.stage[1] = rq.stage[0];
	rq.stage[0] = (struct proto_stage){ .kind = PROTO_STAGE_COMPILE };
	for (; *argv; argv++)
		rq.stage[0].argv[rq.stage[0].argc++] = (char *)*argv;
	rq.nstages = 2;
}

#define COMPILE(...)                                                   \
	do {                                                           \
		const char *const argv_[] = { __VA_ARGS__, NULL };        \
		compile_v(argv_);                                      \
	} while (0)

/* How a session ended, for the host. */
enum host_status {
	HOST_DONE,     /* the EXIT of the last stage, or of one that did not continue */
	HOST_FAILED,   /* an ERROR frame, or the connection ended first */
};

struct host_result {
	struct proto_exit exit;                    /* the last EXIT */
	struct proto_exit exits[PROTO_MAX_STAGES]; /* each stage's, in order */
	unsigned nexits;
	char agent[64];                            /* HELLO's name */
	int64_t hello_ms;                          /* when HELLO came; 0: never */
	char error[PROTO_MAX_STR + 1];             /* the ERROR's text, or why the host gave up */
};

/* What one run produced. */
struct run {
	enum host_status st;
	struct host_result res;
	int agent_rc;
	char agent_err[512];
	int64_t ms;
	size_t out_len, err_len;                   /* all stages' output */
	size_t stage_out[PROTO_MAX_STAGES], stage_err[PROTO_MAX_STAGES];   /* each stage's part */
	size_t out_frames, max_frame;
	unsigned frames_after;                     /* frames sent after the session's end */
};

typedef void (*output_fn)(void *ctx, uint16_t type, const uint8_t *data, uint32_t len);

static struct run R;
static uint8_t out_buf[3 * MIB], err_buf[3 * MIB];

static void on_output(void *ctx, uint16_t type, const uint8_t *data, uint32_t len)
{
	struct run *r = ctx;
	uint8_t *b = type == PROTO_STDOUT ? out_buf : err_buf;
	size_t *n = type == PROTO_STDOUT ? &r->out_len : &r->err_len;
	if (type != PROTO_STDOUT && type != PROTO_STDERR)
		fail_msg("output frame of type %u", type);
	if (*n + len > sizeof(out_buf))
		fail_msg("more output than the test expects");
	memcpy(b + *n, data, len);
	*n += len;
	r->out_frames += type == PROTO_STDOUT;
	if (len > r->max_frame)
		r->max_frame = len;
}

/* Fork the agent on one end of a socketpair; its result comes back on
 * *report. */
static pid_t start_agent(int *host_fd, int *report)
{
	int sv[2], rp[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(pipe2(rp, O_CLOEXEC), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		close(rp[0]);
		signal(SIGPIPE, SIG_IGN);   /* as guest-agent/main.c */
		char err[512] = "";
		int rc = agent_session(sv[1], &cfg, err, sizeof(err));
		(void)!write(rp[1], &rc, sizeof(rc));
		(void)!write(rp[1], err, strlen(err));
		_exit(0);
	}
	close(sv[1]);
	close(rp[1]);
	*host_fd = sv[0];
	*report = rp[0];
	return pid;
}

/* Wait (bounded) for a child; returns its wait status, killing it first if
 * it would not end. */
static int wait_child(pid_t pid, int timeout_ms, bool *timed_out)
{
	int64_t until = now_ms() + timeout_ms;
	int status = 0;
	*timed_out = false;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return status;
		assert_int_equal(r, 0);
		if (now_ms() > until) {
			*timed_out = true;
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return status;
		}
		usleep(2000);
	}
}

static void finish_agent(pid_t pid, int report, struct run *r)
{
	bool to;
	int status = wait_child(pid, DEADLINE_MS, &to);
	if (to)
		fail_msg("the agent did not end");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("the agent process ended with status 0x%x (a sanitizer report?)", status);
	r->agent_rc = 12345;
	assert_int_equal(read(report, &r->agent_rc, sizeof(r->agent_rc)), (ssize_t)sizeof(r->agent_rc));
	ssize_t k = read(report, r->agent_err, sizeof(r->agent_err) - 1);
	r->agent_err[k > 0 ? k : 0] = '\0';
	close(report);
}

/* ---- the host --------------------------------------------------------------- */

static uint8_t host_out[2 * MIB];   /* what the host sends after HELLO */
static struct proto_reader crd;

static size_t put_frame(uint8_t *buf, uint16_t type, const void *p, uint32_t len)
{
	proto_header(buf, type, len);
	if (len)
		memcpy(buf + PROTO_HDR_LEN, p, len);
	return PROTO_HDR_LEN + len;
}

/* The host's side of the conversation into host_out: the REQUEST, then in
 * (in == NULL: none) as STDIN frames, then end of input. */
static size_t host_script(const void *in, size_t inlen)
{
	static uint8_t req[PROTO_MAX_PAYLOAD];
	size_t n = proto_encode_request(&rq, req, sizeof(req));
	assert_int_not_equal(n, 0);
	size_t at = put_frame(host_out, PROTO_REQUEST, req, (uint32_t)n);
	for (size_t off = 0; in && off < inlen;) {
		size_t k = inlen - off < PROTO_MAX_PAYLOAD ? inlen - off : PROTO_MAX_PAYLOAD;
		assert_true(at + PROTO_HDR_LEN + k + PROTO_HDR_LEN <= sizeof(host_out));
		at += put_frame(host_out + at, PROTO_STDIN, (const uint8_t *)in + off, (uint32_t)k);
		off += k;
	}
	return at + put_frame(host_out + at, PROTO_STDIN, NULL, 0);
}

/* One frame from the agent. Returns true when it ended the session. */
static bool host_takes(uint16_t type, const uint8_t *p, uint32_t len, output_fn fn)
{
	struct host_result *res = &R.res;
	uint32_t version;
	if (type != PROTO_HELLO && !res->hello_ms)
		fail_msg("frame of type %u before HELLO", type);
	switch (type) {
	case PROTO_HELLO:
		if (res->hello_ms)
			fail_msg("a second HELLO");
		if (proto_decode_hello(p, len, &version, errbuf, sizeof(errbuf)))
			fail_msg("bad HELLO: %s", errbuf);
		snprintf(res->agent, sizeof(res->agent), "%.*s", (int)(len - 4), (const char *)p + 4);
		res->hello_ms = now_ms();
		return false;
	case PROTO_STDOUT:
	case PROTO_STDERR:
		if (res->nexits >= rq.nstages)
			fail_msg("output after the last stage's EXIT");
		(type == PROTO_STDOUT ? R.stage_out : R.stage_err)[res->nexits] += len;
		fn(&R, type, p, len);
		return false;
	case PROTO_EXIT: {
		struct proto_exit e;
		if (proto_decode_exit(p, len, &e, errbuf, sizeof(errbuf)))
			fail_msg("bad EXIT: %s", errbuf);
		if (e.stage != res->nexits)
			fail_msg("EXIT of stage %u where stage %u's was due", e.stage, res->nexits);
		res->exits[res->nexits++] = e;
		res->exit = e;
		R.st = HOST_DONE;
		return !proto_stage_continues(&rq, &e);
	}
	case PROTO_ERROR:
		snprintf(res->error, sizeof(res->error), "%.*s", (int)len, (const char *)p);
		R.st = HOST_FAILED;
		return true;
	default:
		fail_msg("the agent sent a frame of type %u", type);
	}
	return true;
}

/* Play the host on fd (nonblocking, so that stdin and output move at
 * once) until the session ends, then count what else comes until the
 * agent closes. */
static void host_converse(int fd, const void *in, size_t inlen, output_fn fn)
{
	size_t total = host_script(in, inlen), sent = 0;
	bool done = false, sending = true;
	int64_t until = now_ms() + DEADLINE_MS;
	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	proto_reader_init(&crd);
	R.st = HOST_FAILED;
	for (;;) {
		bool want_out = !done && sending && R.res.hello_ms && sent < total;
		struct pollfd pf = { fd, (short)(POLLIN | (want_out ? POLLOUT : 0)), 0 };
		int64_t left = until - now_ms();
		if (left <= 0)
			fail_msg("the session did not end within %d ms", DEADLINE_MS);
		if (poll(&pf, 1, (int)left) < 0 && errno != EINTR)
			fail_msg("poll: %s", strerror(errno));
		if (want_out && (pf.revents & POLLOUT)) {
			ssize_t k = send(fd, host_out + sent, total - sent, MSG_NOSIGNAL);
			if (k > 0)
				sent += (size_t)k;
			else if (k < 0 && errno != EAGAIN && errno != EINTR)
				sending = false;   /* the agent is gone; its frames may still be there */
		}
		if (!(pf.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		size_t room;
		uint8_t *dst = proto_reader_space(&crd, &room);
		ssize_t k = read(fd, dst, room);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (k <= 0) {   /* EOF, or ECONNRESET: the agent closed with stdin unread */
			if (!done) {
				snprintf(R.res.error, sizeof(R.res.error), "the agent's connection ended before EXIT");
				R.st = HOST_FAILED;
			}
			return;
		}
		proto_reader_fed(&crd, (size_t)k);
		uint16_t type;
		const uint8_t *p;
		uint32_t len;
		int r;
		while ((r = proto_reader_next(&crd, &type, &p, &len, errbuf, sizeof(errbuf))) == 1) {
			if (done)
				R.frames_after++;
			else
				done = host_takes(type, p, len, fn);
		}
		if (r < 0)
			fail_msg("the agent sent a malformed stream: %s", errbuf);
	}
}

/* One run of rq with output going to fn: in == NULL means no stdin at
 * all. */
static void run_output_to(const void *in, size_t inlen, output_fn fn)
{
	memset(&R, 0, sizeof(R));
	int host, report;
	int64_t t0 = now_ms();
	pid_t pid = start_agent(&host, &report);
	host_converse(host, in, inlen, fn);
	R.ms = now_ms() - t0;
	close(host);
	finish_agent(pid, report, &R);
	out_buf[R.out_len < sizeof(out_buf) ? R.out_len : 0] = '\0';
	err_buf[R.err_len] = '\0';
}

static void run_with(const void *in, size_t inlen)
{
	run_output_to(in, inlen, on_output);
}

static void run(void)
{
	run_with(NULL, 0);
}

/* A run that reached EXIT, the agent content. */
static void assert_done(void)
{
	if (R.st != HOST_DONE)
		fail_msg("session status %d: %s (agent: %d %s)", R.st, R.res.error, R.agent_rc, R.agent_err);
	assert_int_equal(R.frames_after, 0);
	assert_int_equal(R.agent_rc, 0);
	assert_string_equal(R.res.agent, AGENT_NAME);
	assert_true(R.res.hello_ms > 0);
}

static void assert_exited(int code)
{
	assert_done();
	if (R.res.exit.kind != PROTO_END_EXITED || R.res.exit.code != code)
		fail_msg("kind %u code %d signal %d (want exited %d); stderr: %s", R.res.exit.kind, R.res.exit.code,
			 R.res.exit.signal, code, (char *)err_buf);
	assert_int_equal(R.res.exit.signal, 0);
}

/* A run refused before anything started: no output, nothing counted. */
static void assert_refused_run(uint32_t kind, int32_t code)
{
	assert_done();
	assert_int_equal(R.res.exit.kind, kind);
	assert_int_equal(R.res.exit.code, code);
	assert_int_equal(R.res.exit.signal, 0);
	assert_int_equal(R.res.exit.flags, 0);
	assert_int_equal(R.res.exit.stdout_bytes, 0);
	assert_int_equal(R.res.exit.stderr_bytes, 0);
	assert_int_equal(R.res.exit.cpu_ms, 0);
	assert_int_equal(R.out_len, 0);
	assert_int_equal(R.err_len, 0);
}

static void assert_stdout(const char *want)
{
	if (R.out_len != strlen(want) || memcmp(out_buf, want, R.out_len) != 0)
		fail_msg("stdout \"%s\" (%zu bytes), want \"%s\"", (char *)out_buf, R.out_len, want);
	assert_int_equal(R.res.exit.stdout_bytes, strlen(want));
}

/* All of stdout, every stage's. */
static void assert_stdout_all(const char *want)
{
	if (R.out_len != strlen(want) || memcmp(out_buf, want, R.out_len) != 0)
		fail_msg("stdout \"%s\" (%zu bytes), want \"%s\"", (char *)out_buf, R.out_len, want);
}

static void assert_stderr(const char *want)
{
	if (R.err_len != strlen(want) || memcmp(err_buf, want, R.err_len) != 0)
		fail_msg("stderr \"%s\" (%zu bytes), want \"%s\"", (char *)err_buf, R.err_len, want);
	assert_int_equal(R.res.exit.stderr_bytes, strlen(want));
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	if (ftw->level > 0)
		remove(path);
	return 0;
}

static void empty_tmpdir(void)
{
	nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int per_test_teardown(void **state)
{
	(void)state;
	cfg.random_dev = NULL;   /* a test that set it and failed */
	empty_tmpdir();
	return no_leftovers();
}

static int group_setup(void **state)
{
	(void)state;
	char t[] = "/tmp/test_agent.XXXXXX", real[PATH_MAX];
	if (!mkdtemp(t))
		return -1;
	if (!realpath(t, real) || strlen(real) >= sizeof(tmpdir)) {
		rmdir(t);
		return -1;
	}
	strcpy(tmpdir, real);
	cfg = (struct agent_config){ .cwd = tmpdir, .home = tmpdir, .uid = (uid_t)-1, .gid = (gid_t)-1,
				     .kill_all = false };
	/* Something the command must not see. */
	setenv("SECRET", "leaked", 1);
	signal(SIGPIPE, SIG_IGN);   /* as a host must */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		return -1;
	struct { const char *name; char *out; } progs[] = {
		{ "printf", p_printf }, { "env", p_env }, { "sh", p_sh }, { "cat", p_cat }, { "wc", p_wc },
		{ "head", p_head }, { "pwd", p_pwd }, { "true", p_true }, { "touch", p_touch },
	};
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++)
		if (agent_resolve(progs[i].name, tmpdir, PROTO_PATH, progs[i].out, PATH_MAX) < 0) {
			fprintf(stderr, "test_agent: no %s on this machine\n", progs[i].name);
			return -1;
		}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	empty_tmpdir();
	rmdir(tmpdir);
	unsetenv("SECRET");
	return 0;
}

/* ---- agent_resolve, agent_allowed, agent_environment ------------------------ */

static void resolve_path_search(void **state)
{
	(void)state;
	char out[PATH_MAX];
	/* this machine is usr-merged: sh is found in /usr/bin first */
	assert_int_equal(agent_resolve("sh", "/", PROTO_PATH, out, sizeof(out)), 0);
	assert_string_equal(out, p_sh);
	assert_string_equal(p_sh, "/usr/bin/sh");   /* the symlink to dash is kept */

	/* a PATH of our own: first entry holding the name wins, empty and
	 * missing entries are skipped */
	assert_int_equal(mkdir(strcat(strcpy(out, tmpdir), "/a"), 0755), 0);
	assert_int_equal(mkdir(strcat(strcpy(out, tmpdir), "/b"), 0755), 0);
	write_file("b/prog", "", 0755);
	write_file("b/other", "", 0644);
	char path[3 * PATH_MAX], want[PATH_MAX];
	snprintf(path, sizeof(path), "::/nonexistent:%s/a:%s/b:", tmpdir, tmpdir);
	assert_int_equal(agent_resolve("prog", "/", path, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "%s/b/prog", tmpdir);
	assert_string_equal(out, want);
	write_file("a/prog", "", 0755);
	assert_int_equal(agent_resolve("prog", "/", path, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "%s/a/prog", tmpdir);
	assert_string_equal(out, want);
	/* existence is what counts, not the mode (the session checks that) */
	assert_int_equal(agent_resolve("other", "/", path, out, sizeof(out)), 0);
	/* not on the PATH; an empty PATH; an empty name */
	assert_int_equal(agent_resolve("missing", "/", path, out, sizeof(out)), -1);
	assert_int_equal(agent_resolve("prog", "/", "", out, sizeof(out)), -1);
	assert_int_equal(agent_resolve("prog", "/", ":::", out, sizeof(out)), -1);
	assert_int_equal(agent_resolve("", "/", PROTO_PATH, out, sizeof(out)), -1);
	assert_int_equal(agent_resolve("no-such-program-here", tmpdir, PROTO_PATH, out, sizeof(out)), -1);
	/* a name on the PATH through a symlinked directory: canonical */
	snprintf(path, sizeof(path), "%s/alink", tmpdir);
	snprintf(want, sizeof(want), "%s/a", tmpdir);
	assert_int_equal(symlink(want, path), 0);
	snprintf(path, sizeof(path), "%s/alink", tmpdir);
	assert_int_equal(agent_resolve("prog", "/", path, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "%s/a/prog", tmpdir);
	assert_string_equal(out, want);
}

static void resolve_with_slash(void **state)
{
	(void)state;
	char out[PATH_MAX], want[PATH_MAX], rel[PATH_MAX];
	/* absolute: the directory canonicalised */
	assert_int_equal(agent_resolve("/bin/sh", tmpdir, PROTO_PATH, out, sizeof(out)), 0);
	assert_string_equal(out, "/usr/bin/sh");
	assert_int_equal(agent_resolve("/usr/bin/../bin/printf", tmpdir, PROTO_PATH, out, sizeof(out)), 0);
	assert_string_equal(out, "/usr/bin/printf");
	assert_int_equal(agent_resolve("/usr/../usr/./bin//printf", tmpdir, PROTO_PATH, out, sizeof(out)), 0);
	assert_string_equal(out, "/usr/bin/printf");
	assert_int_equal(agent_resolve("/../../usr/bin/printf", tmpdir, PROTO_PATH, out, sizeof(out)), 0);
	assert_string_equal(out, "/usr/bin/printf");
	/* a file in the root directory: no doubled slash */
	assert_int_equal(agent_resolve("/tmp", tmpdir, PROTO_PATH, out, sizeof(out)), 0);
	assert_string_equal(out, "/tmp");

	/* relative to cwd */
	write_file("x", "", 0755);
	assert_int_equal(mkdir(strcat(strcpy(out, tmpdir), "/sub"), 0755), 0);
	write_file("sub/y", "", 0755);
	snprintf(want, sizeof(want), "%s/x", tmpdir);
	assert_int_equal(agent_resolve("./x", tmpdir, PROTO_PATH, out, sizeof(out)), 0);
	assert_string_equal(out, want);
	assert_int_equal(agent_resolve("sub/../x", tmpdir, PROTO_PATH, out, sizeof(out)), 0);
	assert_string_equal(out, want);
	snprintf(rel, sizeof(rel), "../%s/x", strrchr(tmpdir, '/') + 1);
	assert_int_equal(agent_resolve(rel, tmpdir, PROTO_PATH, out, sizeof(out)), 0);
	assert_string_equal(out, want);
	snprintf(want, sizeof(want), "%s/sub/y", tmpdir);
	assert_int_equal(agent_resolve("sub/y", tmpdir, PROTO_PATH, out, sizeof(out)), 0);
	assert_string_equal(out, want);
	/* a name without '/' is not looked up in cwd */
	assert_int_equal(agent_resolve("x", tmpdir, PROTO_PATH, out, sizeof(out)), -1);

	/* the final symlink kept, a symlinked directory resolved */
	char link[PATH_MAX];
	path_in_tmp(link, sizeof(link), "link");
	assert_int_equal(symlink("/usr/bin/printf", link), 0);
	assert_int_equal(agent_resolve("./link", tmpdir, PROTO_PATH, out, sizeof(out)), 0);
	assert_string_equal(out, link);
	path_in_tmp(link, sizeof(link), "dirlink");
	path_in_tmp(rel, sizeof(rel), "sub");
	assert_int_equal(symlink(rel, link), 0);
	assert_int_equal(agent_resolve("dirlink/y", tmpdir, PROTO_PATH, out, sizeof(out)), 0);
	assert_string_equal(out, want);

	/* missing: the file, a directory on the way */
	assert_int_equal(agent_resolve("./nope", tmpdir, PROTO_PATH, out, sizeof(out)), -1);
	assert_int_equal(agent_resolve("/usr/bin/no-such-program-here", tmpdir, PROTO_PATH, out, sizeof(out)), -1);
	assert_int_equal(agent_resolve("/nonexistent/dir/x", tmpdir, PROTO_PATH, out, sizeof(out)), -1);
	assert_int_equal(agent_resolve("nosub/x", tmpdir, PROTO_PATH, out, sizeof(out)), -1);

	/* out: exactly enough, one short */
	assert_int_equal(agent_resolve("/usr/bin/printf", tmpdir, PROTO_PATH, out, 16), 0);
	assert_string_equal(out, "/usr/bin/printf");
	assert_int_equal(agent_resolve("/usr/bin/printf", tmpdir, PROTO_PATH, out, 15), -1);
}

static void allowed(void **state)
{
	(void)state;
	char *list[] = { "/usr/bin/sh", "/usr/bin/printf", "/opt/x y", "/usr/bin/env" };
	assert_true(agent_allowed("/usr/bin/sh", list, 4));
	assert_true(agent_allowed("/usr/bin/printf", list, 4));
	assert_true(agent_allowed("/opt/x y", list, 4));
	assert_true(agent_allowed("/usr/bin/env", list, 4));
	/* only the first n entries count */
	assert_false(agent_allowed("/usr/bin/env", list, 3));
	assert_false(agent_allowed("/usr/bin/sh", list, 0));
	/* exact matches only */
	static const char *const no[] = {
		"/usr/bin/s", "/usr/bin/sh2", "/usr/bin/sh/", "/usr/bin//sh", "/bin/sh", "usr/bin/sh", "/USR/BIN/SH",
		"", "/usr/bin/sh ", "/opt/x",
	};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (agent_allowed(no[i], list, 4))
			fail_msg("\"%s\" allowed", no[i]);
}

static void environment(void **state)
{
	(void)state;
	char *env[PROTO_MAX_ENV + 5];
	static char store[4096];
	/* defaults only */
	assert_int_equal(agent_environment("/h", NULL, 0, false, NULL, env, 8, store, sizeof(store)), 4);
	assert_string_equal(env[0], "PATH=" PROTO_PATH);
	assert_string_equal(env[0], "PATH=/usr/local/bin:/usr/bin:/bin");
	assert_string_equal(env[1], "HOME=/h");
	assert_string_equal(env[2], "LANG=C.UTF-8");
	assert_string_equal(env[3], "PYTHONIOENCODING=utf-8");
	assert_null(env[4]);

	/* grants: replace in place, or append; names are whole names */
	char *g[] = { "X=1", "LANG=fr_FR.UTF-8", "LAN=2", "LANGX=3", "HOME=/other", "X=4", "PATH2=p", "E=" };
	assert_int_equal(agent_environment("/h", g, 8, false, NULL, env, 16, store, sizeof(store)), 9);
	static const char *const want[] = { "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/other", "LANG=fr_FR.UTF-8",
					    "PYTHONIOENCODING=utf-8", "X=4", "LAN=2", "LANGX=3", "PATH2=p", "E=" };
	for (int i = 0; i < 9; i++)
		assert_string_equal(env[i], want[i]);
	assert_null(env[9]);

	/* room for the pointers: max counts the NULL */
	assert_int_equal(agent_environment("/h", NULL, 0, false, NULL, env, 5, store, sizeof(store)), 4);
	assert_int_equal(agent_environment("/h", NULL, 0, false, NULL, env, 4, store, sizeof(store)), -1);
	assert_int_equal(agent_environment("/h", g, 1, false, NULL, env, 5, store, sizeof(store)), -1);
	assert_int_equal(agent_environment("/h", g, 1, false, NULL, env, 6, store, sizeof(store)), 5);
	assert_int_equal(agent_environment("/h", g + 1, 1, false, NULL, env, 5, store, sizeof(store)), 4);   /* a replacement */

	/* room for the strings: 34 + 8 + 13 + 23 bytes */
	static char small[100];
	memset(small, 0x7f, sizeof(small));
	assert_int_equal(agent_environment("/h", NULL, 0, false, NULL, env, 8, small, 78), 4);
	assert_string_equal(env[3], "PYTHONIOENCODING=utf-8");
	assert_int_equal(small[78], 0x7f);
	memset(small, 0x7f, sizeof(small));
	assert_int_equal(agent_environment("/h", NULL, 0, false, NULL, env, 8, small, 77), -1);
	for (size_t i = 77; i < sizeof(small); i++)
		assert_int_equal(small[i], 0x7f);
	assert_int_equal(agent_environment("/h", g, 1, false, NULL, env, 8, small, 78 + 3), -1);
	assert_int_equal(agent_environment("/h", g, 1, false, NULL, env, 8, small, 78 + 4), 5);

	/* the most the agent allows: 64 grants */
	static char names[PROTO_MAX_ENV][16];
	char *many[PROTO_MAX_ENV];
	for (unsigned i = 0; i < PROTO_MAX_ENV; i++) {
		snprintf(names[i], sizeof(names[i]), "V%u=%u", i, i);
		many[i] = names[i];
	}
	assert_int_equal(agent_environment("/h", many, PROTO_MAX_ENV, false, NULL, env, PROTO_MAX_ENV + 5, store, sizeof(store)),
			 PROTO_MAX_ENV + 4);
	assert_string_equal(env[PROTO_MAX_ENV + 3], "V63=63");
	assert_null(env[PROTO_MAX_ENV + 4]);
}

/* A run with NET: the proxy variables after the grants, replacing a
 * grant of the same name (the proxy is the only way out). */
static void environment_network(void **state)
{
	(void)state;
	char *env[PROTO_MAX_ENV + 5 + AGENT_NET_ENV];
	static char store[8192];
	static const char *const want[] = {
		"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/h", "LANG=C.UTF-8", "PYTHONIOENCODING=utf-8",
		"HTTP_PROXY=http://127.0.0.1:3128", "HTTPS_PROXY=http://127.0.0.1:3128",
		"http_proxy=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
		"ALL_PROXY=http://127.0.0.1:3128", "all_proxy=http://127.0.0.1:3128",
		"NO_PROXY=localhost,127.0.0.1", "no_proxy=localhost,127.0.0.1", "PIP_PROXY=http://127.0.0.1:3128",
		"npm_config_proxy=http://127.0.0.1:3128", "npm_config_https_proxy=http://127.0.0.1:3128",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.proxy", "GIT_CONFIG_VALUE_0=http://127.0.0.1:3128",
	};
	_Static_assert(sizeof(want) / sizeof(want[0]) == 4 + AGENT_NET_ENV, "every proxy variable");
	assert_int_equal(agent_environment("/h", NULL, 0, true, NULL, env, 4 + AGENT_NET_ENV + 1, store, sizeof(store)),
			 4 + AGENT_NET_ENV);
	for (unsigned i = 0; i < 4 + AGENT_NET_ENV; i++)
		assert_string_equal(env[i], want[i]);
	assert_null(env[4 + AGENT_NET_ENV]);
	/* one pointer short */
	assert_int_equal(agent_environment("/h", NULL, 0, true, NULL, env, 4 + AGENT_NET_ENV, store, sizeof(store)), -1);

	/* a grant of a proxy name is replaced in place, the others stay */
	char *g[] = { "https_proxy=http://evil:1", "X=1", "GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_1=a.b" };
	assert_int_equal(agent_environment("/h", g, 4, true, NULL, env, 32, store, sizeof(store)), 4 + AGENT_NET_ENV + 2);
	assert_string_equal(env[4], "https_proxy=http://127.0.0.1:3128");
	assert_string_equal(env[5], "X=1");
	assert_string_equal(env[6], "GIT_CONFIG_COUNT=1");
	assert_string_equal(env[7], "GIT_CONFIG_KEY_1=a.b");
	assert_string_equal(env[8], "HTTP_PROXY=http://127.0.0.1:3128");
	assert_string_equal(env[4 + AGENT_NET_ENV + 1], "GIT_CONFIG_VALUE_0=http://127.0.0.1:3128");
	assert_null(env[4 + AGENT_NET_ENV + 2]);

	/* without NET, none of them (a grant of one is just a grant) */
	assert_int_equal(agent_environment("/h", g, 1, false, NULL, env, 32, store, sizeof(store)), 5);
	assert_string_equal(env[4], "https_proxy=http://evil:1");

	/* the most grants and every proxy variable: what the agent makes room for */
	static char names[PROTO_MAX_ENV][PROTO_MAX_STR / 64];
	char *many[PROTO_MAX_ENV];
	for (unsigned i = 0; i < PROTO_MAX_ENV; i++) {
		snprintf(names[i], sizeof(names[i]), "V%u=%u", i, i);
		many[i] = names[i];
	}
	assert_int_equal(agent_environment("/h", many, PROTO_MAX_ENV, true, NULL, env, PROTO_MAX_ENV + 5 + AGENT_NET_ENV,
					   store, sizeof(store)), PROTO_MAX_ENV + 4 + AGENT_NET_ENV);
}

/* The run id, last: after the grants and the proxy variables, over a
 * grant of its name (it is the host's name for the run, not the
 * caller's); none without one. */
static void environment_run_id(void **state)
{
	(void)state;
	char *env[PROTO_MAX_ENV + 5 + AGENT_NET_ENV + 1];
	static char store[8192];
	assert_string_equal(AGENT_RUN_ID_VAR, "VMRUN_RUN_ID");
	assert_int_equal(agent_environment("/h", NULL, 0, false, RUN_ID, env, 6, store, sizeof(store)), 5);
	assert_string_equal(env[4], RUN_ID_VAR);
	assert_null(env[5]);
	/* one pointer short */
	assert_int_equal(agent_environment("/h", NULL, 0, false, RUN_ID, env, 5, store, sizeof(store)), -1);
	/* a granted one is replaced in place */
	char *g[] = { "A=1", "VMRUN_RUN_ID=spoofed", "B=2" };
	assert_int_equal(agent_environment("/h", g, 3, false, RUN_ID, env, 16, store, sizeof(store)), 7);
	assert_string_equal(env[5], RUN_ID_VAR);
	assert_string_equal(env[6], "B=2");
	assert_null(env[7]);
	/* with NET: after the proxy variables */
	assert_int_equal(agent_environment("/h", NULL, 0, true, "f", env, 32, store, sizeof(store)), 5 + AGENT_NET_ENV);
	assert_string_equal(env[4 + AGENT_NET_ENV], "VMRUN_RUN_ID=f");
	/* the most of everything: what the agent makes room for */
	static char names[PROTO_MAX_ENV][16];
	char *many[PROTO_MAX_ENV];
	for (unsigned i = 0; i < PROTO_MAX_ENV; i++) {
		snprintf(names[i], sizeof(names[i]), "V%u=%u", i, i);
		many[i] = names[i];
	}
	assert_int_equal(agent_environment("/h", many, PROTO_MAX_ENV, true, RUN_ID, env,
					   PROTO_MAX_ENV + 5 + AGENT_NET_ENV + 1, store, sizeof(store)),
			 PROTO_MAX_ENV + 4 + AGENT_NET_ENV + 1);
	/* an id longer than any run id does not fit */
	assert_int_equal(agent_environment("/h", NULL, 0, false, RUN_ID "0", env, 8, store, sizeof(store)), -1);
}

/* ---- sessions --------------------------------------------------------------- */

/* A helper process playing a client in the guest: connect to the
 * forwarder (retrying while the agent starts), then wait for it to close
 * the connection, which it must once its vsock dial fails (this machine
 * is no guest with a host at PROTO_NET_VSOCK_PORT). Then it creates
 * "done" in tmpdir, which ends the command, and exits 0 when all went so. */
static void forwarder_client(void)
{
	int rc = 1;
	int64_t until = now_ms() + 10000;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(PROTO_NET_PROXY_PORT),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	while (now_ms() < until) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			break;
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
			close(fd);
			usleep(10000);
			continue;
		}
		char c;
		struct pollfd pf = { fd, POLLIN, 0 };
		if (poll(&pf, 1, (int)(until - now_ms())) == 1 && read(fd, &c, 1) <= 0)
			rc = 0;   /* EOF, or a reset */
		close(fd);
		break;
	}
	write_file("done", "", 0644);
	_exit(rc);
}

/* A run with NET: its environment names the proxy (over a grant of the
 * same name), the forwarder listens and closes a connection it cannot
 * take to the host, and nothing of it is left afterwards (the teardown
 * checks). */
static void network_session(void **state)
{
	(void)state;
	/* The real port, on this machine's loopback: skipped where it is
	 * taken, or where this process has no loopback it may use. */
	int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(PROTO_NET_PROXY_PORT),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	assert_true(probe >= 0);
	setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	int free_port = bind(probe, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(probe);
	if (!free_port) {
		fprintf(stderr, "test_agent: 127.0.0.1:%d not available (%s): network_session skipped\n",
			PROTO_NET_PROXY_PORT, strerror(errno));
		skip();
	}
	REQUEST("sh", "-c",
		"printf '%s|%s|%s' \"$HTTP_PROXY\" \"$GIT_CONFIG_VALUE_0\" \"$no_proxy\"; "
		"while [ ! -e done ]; do sleep 0.01; done");
	rq.net_port = PROTO_NET_VSOCK_PORT;
	rq.env[rq.envc++] = "HTTP_PROXY=http://elsewhere:1";
	fflush(NULL);
	pid_t client = fork();
	assert_true(client >= 0);
	if (client == 0)
		forwarder_client();
	run();
	int st = -1;
	assert_int_equal(waitpid(client, &st, 0), client);
	assert_exited(0);
	assert_stdout("http://127.0.0.1:3128|http://127.0.0.1:3128|localhost,127.0.0.1");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("the client did not see the forwarder close its connection (status %#x)", st);
}

static void hello_and_run(void **state)
{
	(void)state;
	REQUEST("printf", "hello");
	run();
	assert_exited(0);
	assert_stdout("hello");
	assert_stderr("");
	assert_int_equal(R.res.exit.flags, 0);
	assert_true(R.res.exit.max_rss_kib > 0);
	assert_string_equal(R.agent_err, "");
}

static void denied_runs_nothing(void **state)
{
	(void)state;
	char marker[PATH_MAX];
	path_in_tmp(marker, sizeof(marker), "marker");
	/* allowed, touch makes the marker: the proof that it would */
	REQUEST(p_touch, marker);
	allow(p_touch);
	run();
	assert_exited(0);
	assert_true(exists_in_tmp("marker"));
	assert_int_equal(unlink(marker), 0);

	/* not allowed: DENIED, and nothing ran */
	REQUEST(p_touch, marker);
	run();
	assert_refused_run(PROTO_END_DENIED, 0);
	assert_false(exists_in_tmp("marker"));
	REQUEST("touch", marker);   /* by name */
	run();
	assert_refused_run(PROTO_END_DENIED, 0);
	assert_false(exists_in_tmp("marker"));
	/* through sh: sh is not allowed either */
	REQUEST(p_sh, "-c", "touch marker");
	rq.nallow = 0;
	run();
	assert_refused_run(PROTO_END_DENIED, 0);
	assert_false(exists_in_tmp("marker"));

	/* the allowlist names resolved programs: a symlink's target does not
	 * allow the link, nor the link its target */
	REQUEST("sh", "-c", "touch marker");
	rq.nallow = 0;
	allow("/usr/bin/dash");
	run();
	assert_refused_run(PROTO_END_DENIED, 0);
	REQUEST("/usr/bin/dash", "-c", "touch marker");
	rq.nallow = 0;
	allow(p_sh);
	run();
	assert_refused_run(PROTO_END_DENIED, 0);
	assert_false(exists_in_tmp("marker"));
}

/* Allowed, but not something to run. */
static void denied_not_runnable(void **state)
{
	(void)state;
	char p[PATH_MAX];
	/* not executable */
	write_file("plain", "#!/usr/bin/sh\ntouch marker\n", 0644);
	path_in_tmp(p, sizeof(p), "plain");
	REQUEST("./plain");
	allow(p);
	run();
	assert_refused_run(PROTO_END_DENIED, 0);
	/* a directory */
	path_in_tmp(p, sizeof(p), "dir");
	assert_int_equal(mkdir(p, 0755), 0);
	REQUEST(p);
	allow(p);
	run();
	assert_refused_run(PROTO_END_DENIED, 0);
	/* executable, but no format the kernel runs: ENOEXEC from exec */
	write_file("garbage", "touch marker\n", 0755);
	path_in_tmp(p, sizeof(p), "garbage");
	REQUEST("./garbage");
	allow(p);
	run();
	assert_refused_run(PROTO_END_DENIED, ENOEXEC);
	/* a dangling symlink */
	path_in_tmp(p, sizeof(p), "dangling");
	assert_int_equal(symlink("/nonexistent/prog", p), 0);
	REQUEST("./dangling");
	allow(p);
	run();
	assert_refused_run(PROTO_END_DENIED, 0);
	assert_false(exists_in_tmp("marker"));
}

static void not_found(void **state)
{
	(void)state;
	REQUEST("no-such-program-here");
	run();
	assert_refused_run(PROTO_END_NOT_FOUND, 0);
	REQUEST("/usr/bin/no-such-program-here");
	allow("/usr/bin/no-such-program-here");
	run();
	assert_refused_run(PROTO_END_NOT_FOUND, 0);
	REQUEST("./missing");
	run();
	assert_refused_run(PROTO_END_NOT_FOUND, 0);
	REQUEST("/nonexistent/dir/x");
	run();
	assert_refused_run(PROTO_END_NOT_FOUND, 0);
	/* found and allowed, but its interpreter is missing: ENOENT from exec */
	char p[PATH_MAX];
	write_file("script", "#!/nonexistent/interpreter\n", 0755);
	path_in_tmp(p, sizeof(p), "script");
	REQUEST("./script");
	allow(p);
	run();
	assert_refused_run(PROTO_END_NOT_FOUND, ENOENT);
}

/* Relative names, '..', symlinked directories: what runs is what was
 * allowed. */
static void resolved_names_run(void **state)
{
	(void)state;
	char p[PATH_MAX];
	write_file("script", "#!/usr/bin/sh\nprintf 'script %s' \"$1\"\n", 0755);
	path_in_tmp(p, sizeof(p), "script");
	assert_int_equal(mkdir(strcat(strcpy(p, tmpdir), "/sub"), 0755), 0);
	path_in_tmp(p, sizeof(p), "script");
	REQUEST("sub/../script", "arg");
	allow(p);
	run();
	assert_exited(0);
	assert_stdout("script arg");
	/* /bin is a symlink to usr/bin here: /bin/sh runs as /usr/bin/sh,
	 * with argv[0] as given */
	REQUEST("/bin/sh", "-c", "printf '%s' \"$0\"");
	run();
	assert_exited(0);
	assert_stdout("/bin/sh");
	REQUEST("/usr/bin/../bin/printf", "x");
	run();
	assert_exited(0);
	assert_stdout("x");
}

static void argv_verbatim(void **state)
{
	(void)state;
	REQUEST("printf", "%s|", "two words", "", "'single' \"double\"", "new\nline", "tab\there", "$HOME", "*",
		"`id`", "$(id)", "back\\slash", ";", "h\xc3\xa9llo \xe2\x9c\x93", "", " ", "-n", "--");
	run();
	assert_exited(0);
	assert_stdout("two words||'single' \"double\"|new\nline|tab\there|$HOME|*|`id`|$(id)|back\\slash|;|"
		      "h\xc3\xa9llo \xe2\x9c\x93|| |-n|--|");
	assert_stderr("");

	/* the most arguments, and the longest one */
	static char longest[PROTO_MAX_STR + 1];
	memset(longest, 'L', PROTO_MAX_STR);
	REQUEST("printf", "%.1s");
	for (unsigned i = RUN_STAGE.argc; i < PROTO_MAX_ARGS; i++)
		RUN_STAGE.argv[i] = i % 2 ? "a" : "b";
	RUN_STAGE.argc = PROTO_MAX_ARGS;
	RUN_STAGE.argv[PROTO_MAX_ARGS - 1] = longest;
	run();
	assert_exited(0);
	assert_int_equal(R.out_len, PROTO_MAX_ARGS - 2);
	for (unsigned i = 2; i < PROTO_MAX_ARGS - 1; i++)
		assert_int_equal(out_buf[i - 2], i % 2 ? 'a' : 'b');
	assert_int_equal(out_buf[PROTO_MAX_ARGS - 3], 'L');
	REQUEST("printf", "%s", longest);
	run();
	assert_exited(0);
	assert_stdout(longest);
}

static void environment_exact(void **state)
{
	(void)state;
	char want[2 * PATH_MAX];
	/* the defaults only: SECRET (set in this process) is not there */
	assert_string_equal(getenv("SECRET"), "leaked");
	REQUEST("env");
	run();
	assert_exited(0);
	snprintf(want, sizeof(want),
		 "PATH=/usr/local/bin:/usr/bin:/bin\nHOME=%s\nLANG=C.UTF-8\nPYTHONIOENCODING=utf-8\n" RUN_ID_VAR "\n", tmpdir);
	assert_stdout(want);

	/* grants: appended, or replacing a default in place */
	REQUEST("env");
	rq.env[rq.envc++] = "X=granted";
	rq.env[rq.envc++] = "LANG=fr_FR.UTF-8";
	rq.env[rq.envc++] = "EMPTY=";
	rq.env[rq.envc++] = "SPACES=a b  c";
	run();
	assert_exited(0);
	snprintf(want, sizeof(want),
		 "PATH=/usr/local/bin:/usr/bin:/bin\nHOME=%s\nLANG=fr_FR.UTF-8\nPYTHONIOENCODING=utf-8\n"
		 "X=granted\nEMPTY=\nSPACES=a b  c\n" RUN_ID_VAR "\n", tmpdir);
	assert_stdout(want);

	/* HOME and PATH may be granted too; the command sees them */
	REQUEST("sh", "-c", "printf '%s %s' \"$HOME\" \"$PATH\"");
	rq.env[rq.envc++] = "HOME=/elsewhere";
	rq.env[rq.envc++] = "PATH=/nowhere";
	run();
	assert_exited(0);
	assert_stdout("/elsewhere /nowhere");

	/* the most grants */
	REQUEST("env");
	static char names[PROTO_MAX_ENV][16];
	for (unsigned i = 0; i < PROTO_MAX_ENV; i++) {
		snprintf(names[i], sizeof(names[i]), "G%u=%u", i, i);
		rq.env[rq.envc++] = names[i];
	}
	run();
	assert_exited(0);
	size_t lines = 0;
	for (size_t i = 0; i < R.out_len; i++)
		lines += out_buf[i] == '\n';
	assert_int_equal(lines, 4 + PROTO_MAX_ENV + 1);
	assert_non_null(strstr((char *)out_buf, "\nG0=0\n"));
	assert_non_null(strstr((char *)out_buf, "\nG63=63\n"));
	assert_null(strstr((char *)out_buf, "SECRET"));
	assert_non_null(strstr((char *)out_buf, "\n" RUN_ID_VAR "\n"));

	/* the run id is the host's: a grant of its name does not change it */
	REQUEST("sh", "-c", "printf '%s' \"$VMRUN_RUN_ID\"");
	rq.env[rq.envc++] = "VMRUN_RUN_ID=spoofed";
	run();
	assert_exited(0);
	assert_stdout(RUN_ID);
}

static void cwd_and_limits(void **state)
{
	(void)state;
	REQUEST("pwd");
	run();
	assert_exited(0);
	char want[PATH_MAX + 2];
	snprintf(want, sizeof(want), "%s\n", tmpdir);
	assert_stdout(want);

	REQUEST("cat", "/proc/self/limits");
	rq.nproc = 4000;
	rq.nofile = 77;
	rq.fsize = 123456;
	run();
	assert_exited(0);
	static const struct { const char *name; const char *value; } lim[] = {
		{ "Max processes", "4000" }, { "Max open files", "77" }, { "Max file size", "123456" },
		{ "Max core file size", "0" },
	};
	for (size_t i = 0; i < sizeof(lim) / sizeof(lim[0]); i++) {
		char *l = strstr((char *)out_buf, lim[i].name);
		assert_non_null(l);
		char soft[32], hard[32];
		assert_int_equal(sscanf(l + strlen(lim[i].name), " %31s %31s", soft, hard), 2);
		assert_string_equal(soft, lim[i].value);
		assert_string_equal(hard, lim[i].value);
	}
	/* and they bite: a write past FSIZE fails (SIGXFSZ) */
	REQUEST("sh", "-c", "head -c 200000 /dev/zero > big; echo $?");
	rq.fsize = 100000;
	run();
	assert_exited(0);
	assert_stdout("153\n");   /* 128 + SIGXFSZ */
}

static uint8_t big_in[MIB];

static void fill_big_in(void)
{
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < sizeof(big_in); i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		big_in[i] = (uint8_t)x;
	}
}

static void stdin_delivered(void **state)
{
	(void)state;
	fill_big_in();
	REQUEST("wc", "-c");
	run_with(big_in, sizeof(big_in));
	assert_exited(0);
	assert_stdout("1048576\n");
	/* byte for byte, both ways, in frames of at most AGENT_CHUNK */
	REQUEST("cat");
	run_with(big_in, sizeof(big_in));
	assert_exited(0);
	assert_int_equal(R.out_len, sizeof(big_in));
	assert_memory_equal(out_buf, big_in, sizeof(big_in));
	assert_int_equal(R.res.exit.stdout_bytes, sizeof(big_in));
	assert_int_equal(R.res.exit.flags, 0);
	assert_true(R.max_frame <= AGENT_CHUNK);
	assert_true(R.out_frames >= sizeof(big_in) / AGENT_CHUNK);
	/* small */
	REQUEST("cat");
	run_with("one\ntwo\n", 8);
	assert_exited(0);
	assert_stdout("one\ntwo\n");
}

static void stdin_empty(void **state)
{
	(void)state;
	REQUEST("wc", "-c");
	run();
	assert_exited(0);
	assert_stdout("0\n");
	REQUEST("cat");
	run_with("", 0);
	assert_exited(0);
	assert_stdout("");
	assert_stderr("");
}

/* The command does not read all its stdin: the run still ends normally. */
static void stdin_not_read(void **state)
{
	(void)state;
	fill_big_in();
	REQUEST("true");
	run_with(big_in, sizeof(big_in));
	assert_exited(0);
	assert_stdout("");
	REQUEST("head", "-c", "10");
	run_with(big_in, sizeof(big_in));
	assert_exited(0);
	assert_int_equal(R.out_len, 10);
	assert_memory_equal(out_buf, big_in, 10);
	/* stdin closed at once */
	REQUEST("sh", "-c", "exec <&-; printf done");
	run_with(big_in, sizeof(big_in));
	assert_exited(0);
	assert_stdout("done");
}

static void stdout_stderr_separate(void **state)
{
	(void)state;
	REQUEST("sh", "-c", "printf out1; printf err1 >&2; printf out2; printf err22 >&2; exit 4");
	run();
	assert_exited(4);
	assert_stdout("out1out2");
	assert_stderr("err1err22");
	assert_int_equal(R.res.exit.flags, 0);
}

static void output_caps(void **state)
{
	(void)state;
	static char want[200001];
	/* stdout over the cap, stderr under it */
	REQUEST("sh", "-c", "head -c 1000 /dev/zero | tr '\\0' o; head -c 50 /dev/zero | tr '\\0' e >&2");
	rq.max_output = 100;
	run();
	assert_exited(0);
	memset(want, 'o', 100);
	want[100] = '\0';
	assert_int_equal(R.out_len, 100);
	assert_memory_equal(out_buf, want, 100);
	assert_int_equal(R.res.exit.stdout_bytes, 1000);
	assert_int_equal(R.res.exit.flags, PROTO_EXIT_STDOUT_TRUNCATED);
	memset(want, 'e', 50);
	want[50] = '\0';
	assert_stderr(want);

	/* exactly the cap is not truncated */
	REQUEST("sh", "-c", "head -c 100 /dev/zero | tr '\\0' o; head -c 100 /dev/zero | tr '\\0' e >&2");
	rq.max_output = 100;
	run();
	assert_exited(0);
	assert_int_equal(R.res.exit.flags, 0);
	assert_int_equal(R.out_len, 100);
	assert_int_equal(R.err_len, 100);

	/* a cap of 0: nothing comes, both flagged, counts still right */
	REQUEST("sh", "-c", "printf abc; printf defg >&2");
	rq.max_output = 0;
	run();
	assert_exited(0);
	assert_int_equal(R.out_len, 0);
	assert_int_equal(R.err_len, 0);
	assert_int_equal(R.res.exit.stdout_bytes, 3);
	assert_int_equal(R.res.exit.stderr_bytes, 4);
	assert_int_equal(R.res.exit.flags, PROTO_EXIT_STDOUT_TRUNCATED | PROTO_EXIT_STDERR_TRUNCATED);

	/* a cap across several chunks, on stderr */
	REQUEST("sh", "-c", "head -c 200000 /dev/zero >&2");
	rq.max_output = 150001;
	run();
	assert_exited(0);
	assert_int_equal(R.err_len, 150001);
	assert_int_equal(R.res.exit.stderr_bytes, 200000);
	assert_int_equal(R.res.exit.stdout_bytes, 0);
	assert_int_equal(R.res.exit.flags, PROTO_EXIT_STDERR_TRUNCATED);
}

static void exit_codes(void **state)
{
	(void)state;
	static const int codes[] = { 0, 1, 3, 126, 127, 255 };
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		char script[32];
		snprintf(script, sizeof(script), "exit %d", codes[i]);
		REQUEST("sh", "-c", script);
		run();
		assert_exited(codes[i]);
	}
}

static void killed_by_signal(void **state)
{
	(void)state;
	REQUEST("sh", "-c", "printf before; kill -TERM $$; printf after");
	run();
	assert_done();
	assert_int_equal(R.res.exit.kind, PROTO_END_SIGNALED);
	assert_int_equal(R.res.exit.signal, SIGTERM);
	assert_int_equal(R.res.exit.code, 0);
	assert_stdout("before");
	REQUEST("sh", "-c", "kill -KILL $$");
	run();
	assert_done();
	assert_int_equal(R.res.exit.kind, PROTO_END_SIGNALED);
	assert_int_equal(R.res.exit.signal, SIGKILL);
	/* SIGPIPE is the default again in the command, though the agent ignores it */
	REQUEST("sh", "-c", "kill -PIPE $$");
	run();
	assert_done();
	assert_int_equal(R.res.exit.kind, PROTO_END_SIGNALED);
	assert_int_equal(R.res.exit.signal, SIGPIPE);
}

static void orphans_killed(void **state)
{
	(void)state;
	REQUEST("sh", "-c", "sleep 1000 & echo $$ $!");
	run();
	assert_exited(0);
	int sid = 0, sleeper = 0;
	assert_int_equal(sscanf((char *)out_buf, "%d %d", &sid, &sleeper), 2);
	assert_true(sid > 0 && sleeper > 0);
	assert_true(R.ms < 5000);
	/* the sleeper was re-parented to us (subreaper) and killed */
	int status = 0;
	int64_t until = now_ms() + 3000;
	pid_t r;
	while ((r = waitpid(sleeper, &status, WNOHANG)) == 0 && now_ms() < until)
		usleep(2000);
	if (r != sleeper) {
		kill(sleeper, SIGKILL);
		fail_msg("the background sleep survived the run");
	}
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
	assert_int_equal(kill(-sid, 0), -1);
	assert_int_equal(errno, ESRCH);

	/* the same with its output still open: the run does not wait for it */
	REQUEST("sh", "-c", "(sleep 1000; echo late) & echo started");
	run();
	assert_exited(0);
	assert_stdout("started\n");
	assert_true(R.ms < 5000);
}

/* stdout only counted (for output without end), stderr kept. */
static void on_output_counted(void *ctx, uint16_t type, const uint8_t *data, uint32_t len)
{
	struct run *r = ctx;
	if (type == PROTO_STDOUT) {
		r->out_len += len;
		/* A slow host, so that the agent waits on the socket while the
		 * writer refills the pipe: the drain's cut-off then surely finds
		 * bytes in it (a fast host can empty it just before). */
		usleep(2000);
	} else {
		on_output(ctx, type, data, len);
	}
}

/* Kill the process whose pid the command wrote first on stderr. */
static void kill_reported(void)
{
	int pid = 0;
	if (sscanf((char *)err_buf, "%d", &pid) == 1 && pid > 1)
		kill(pid, SIGKILL);
}

/* When the command has exited, its pipes are drained for at most 200 ms.
 * A stream that has not ended by then (a process outside the command's
 * session still holds it) is cut off there, and flagged truncated like
 * output past the cap; bytes still in the pipe count as produced. */
static void drain_cut_off_flagged(void **state)
{
	(void)state;
	/* endless output from a process that left the session (stderr closed,
	 * so only stdout is cut) */
	REQUEST("sh", "-c", "setsid sh -c 'echo $$ >&2; exec 2>&-; exec cat /dev/zero' & sleep 0.3");
	rq.max_output = UINT64_MAX;
	run_output_to(NULL, 0, on_output_counted);
	kill_reported();
	assert_exited(0);
	assert_true(R.out_len > 0);
	if (R.res.exit.flags != PROTO_EXIT_STDOUT_TRUNCATED)
		fail_msg("flags %#x after %zu bytes of stdout cut off by the drain (want stdout truncated)",
			 R.res.exit.flags, R.out_len);
	assert_true(R.res.exit.stdout_bytes > R.out_len);   /* what was left in the pipe */
	assert_true(R.ms < 5000);

	/* a quiet holder: the stream never ended either */
	REQUEST("sh", "-c", "setsid sh -c 'echo $$ >&2; exec 2>&-; printf some; exec sleep 30' & sleep 0.3");
	run();
	kill_reported();
	assert_exited(0);
	assert_stdout("some");
	assert_int_equal(R.res.exit.flags, PROTO_EXIT_STDOUT_TRUNCATED);

	/* streams that end within the drain are whole */
	REQUEST("sh", "-c", "(sleep 0.05; printf late; printf err >&2) & printf early");
	run();
	assert_exited(0);
	assert_int_equal(R.res.exit.flags, 0);
}

static void cpu_time(void **state)
{
	(void)state;
	REQUEST("sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo $i");
	run();
	assert_exited(0);
	assert_stdout("300000\n");
	uint64_t busy = R.res.exit.cpu_ms;
	if (busy < 20 || busy > (uint64_t)R.ms + 50)
		fail_msg("cpu_ms %llu for a busy loop of %lld ms", (unsigned long long)busy, (long long)R.ms);
	/* a child's time counts too */
	REQUEST("sh", "-c", "sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'");
	run();
	assert_exited(0);
	assert_true(R.res.exit.cpu_ms >= 20);
	REQUEST("true");
	run();
	assert_exited(0);
	assert_true(R.res.exit.cpu_ms < busy);
}

/* As root (the guest agent is PID 1), the command runs as the configured
 * user and group, with no supplementary groups. */
static void runs_as_user(void **state)
{
	(void)state;
	if (getuid() != 0)
		skip();
	cfg.uid = 65534;
	cfg.gid = 65534;
	REQUEST("sh", "-c", "id -u; id -g; id -G");
	run();
	cfg.uid = (uid_t)-1;
	cfg.gid = (gid_t)-1;
	assert_exited(0);
	assert_stdout("65534\n65534\n65534\n");
}

/* The agent could not start the command although it exists and is
 * allowed: PROTO_END_ERROR with the errno ("the agent could not start
 * it"), not DENIED or NOT_FOUND. */
static void start_failures(void **state)
{
	(void)state;
	/* a limit the kernel refuses (RLIMIT_NOFILE above fs.nr_open) */
	REQUEST("true");
	rq.nofile = UINT64_MAX;
	run();
	assert_refused_run(PROTO_END_ERROR, EPERM);
	/* the working directory is gone */
	char gone[PATH_MAX];
	path_in_tmp(gone, sizeof(gone), "gone");
	cfg.cwd = gone;
	REQUEST("true");
	run();
	cfg.cwd = tmpdir;
	assert_done();
	if (R.res.exit.kind != PROTO_END_ERROR)
		fail_msg("a missing working directory reported as kind %u code %d, not ERROR", R.res.exit.kind,
			 R.res.exit.code);
	assert_int_equal(R.res.exit.code, ENOENT);
}

/* ---- hostile or broken hosts ---------------------------------------------- */

static struct proto_reader hrd;

/* Read one frame from the agent (blocking, bounded). 0 at EOF. */
static int host_frame(int fd, uint16_t *type, const uint8_t **p, uint32_t *len)
{
	for (;;) {
		int r = proto_reader_next(&hrd, type, p, len, errbuf, sizeof(errbuf));
		if (r < 0)
			fail_msg("the agent sent a malformed stream: %s", errbuf);
		if (r)
			return 1;
		struct pollfd pf = { fd, POLLIN, 0 };
		if (poll(&pf, 1, 10000) != 1)
			fail_msg("the agent went silent");
		size_t room;
		uint8_t *dst = proto_reader_space(&hrd, &room);
		ssize_t k = read(fd, dst, room);
		if (k < 0 && errno == ECONNRESET)
			return 0;
		assert_true(k >= 0);
		if (k == 0)
			return 0;
		proto_reader_fed(&hrd, (size_t)k);
	}
}

/* Start an agent and take its HELLO. */
static pid_t hostile_start(int *fd, int *report)
{
	memset(&R, 0, sizeof(R));
	proto_reader_init(&hrd);
	pid_t pid = start_agent(fd, report);
	uint16_t type;
	const uint8_t *p;
	uint32_t len, version;
	assert_int_equal(host_frame(*fd, &type, &p, &len), 1);
	assert_int_equal(type, PROTO_HELLO);
	assert_int_equal(proto_decode_hello(p, len, &version, errbuf, sizeof(errbuf)), 0);
	return pid;
}

/* After the host misbehaved: the agent sends one ERROR (after any output)
 * saying why, closes, and returns -1 with the same reason. */
static void expect_error(int fd, pid_t pid, int report, const char *why)
{
	uint16_t type;
	const uint8_t *p;
	uint32_t len;
	char msg[PROTO_MAX_STR + 1] = "";
	int frames_after = 0;
	bool got_error = false;
	while (host_frame(fd, &type, &p, &len) == 1) {
		if (got_error) {
			frames_after++;
			continue;
		}
		if (type == PROTO_STDOUT || type == PROTO_STDERR)
			continue;
		if (type != PROTO_ERROR)
			fail_msg("frame of type %u instead of ERROR", type);
		got_error = true;
		snprintf(msg, sizeof(msg), "%.*s", (int)len, (const char *)p);
	}
	close(fd);
	finish_agent(pid, report, &R);
	assert_true(got_error);
	assert_int_equal(frames_after, 0);
	assert_string_equal(msg, why);
	assert_int_equal(R.agent_rc, -1);
	assert_string_equal(R.agent_err, why);
}

static void send_raw(int fd, const void *p, size_t n)
{
	assert_int_equal(write(fd, p, n), (ssize_t)n);
}

static void send_request(int fd)
{
	static uint8_t buf[PROTO_MAX_PAYLOAD];
	size_t n = proto_encode_request(&rq, buf, sizeof(buf));
	assert_int_not_equal(n, 0);
	assert_int_equal(proto_send(fd, PROTO_REQUEST, buf, (uint32_t)n), 0);
}

static void garbage_instead_of_request(void **state)
{
	(void)state;
	int fd, report;
	pid_t pid;
	uint8_t h[PROTO_HDR_LEN];

	pid = hostile_start(&fd, &report);
	send_raw(fd, "GET / HTTP/1.1\r\n\r\n", 18);   /* len 0x20544547: too long */
	expect_error(fd, pid, report, "frame of 542393671 bytes exceeds the 65536-byte maximum");

	pid = hostile_start(&fd, &report);
	proto_header(h, 99, 0);
	send_raw(fd, h, sizeof(h));
	expect_error(fd, pid, report, "unknown frame type 99");

	pid = hostile_start(&fd, &report);
	proto_header(h, PROTO_REQUEST, 0);
	h[7] = 0x80;   /* reserved */
	send_raw(fd, h, sizeof(h));
	expect_error(fd, pid, report, "unknown frame type 2");

	pid = hostile_start(&fd, &report);
	assert_int_equal(proto_send(fd, PROTO_STDIN, "data", 4), 0);
	expect_error(fd, pid, report, "expected a REQUEST frame, got type 3");

	pid = hostile_start(&fd, &report);
	assert_int_equal(proto_send(fd, PROTO_HELLO, "\1\0\0\0x", 5), 0);
	expect_error(fd, pid, report, "expected a REQUEST frame, got type 1");
}

static void bad_request(void **state)
{
	(void)state;
	int fd, report;
	pid_t pid;
	/* an unknown field after a good request */
	REQUEST("true");
	static uint8_t buf[PROTO_MAX_PAYLOAD];
	size_t n = proto_encode_request(&rq, buf, sizeof(buf));
	buf[n] = 99;
	buf[n + 1] = 0;
	buf[n + 2] = 0;
	buf[n + 3] = 0;
	pid = hostile_start(&fd, &report);
	assert_int_equal(proto_send(fd, PROTO_REQUEST, buf, (uint32_t)n + 4), 0);
	expect_error(fd, pid, report, "malformed request: unknown field 99");
	/* NET naming another port: refused before anything runs or listens */
	uint32_t other = PROTO_VSOCK_PORT;
	memcpy(buf + n, (const uint8_t[]){ PROTO_T_NET, 0, 4, 0 }, 4);
	memcpy(buf + n + 4, &other, 4);
	pid = hostile_start(&fd, &report);
	assert_int_equal(proto_send(fd, PROTO_REQUEST, buf, (uint32_t)n + 8), 0);
	expect_error(fd, pid, report, "malformed request: NET field names port 10000, not 3128");
	/* an empty request, one with only the version */
	pid = hostile_start(&fd, &report);
	assert_int_equal(proto_send(fd, PROTO_REQUEST, NULL, 0), 0);
	expect_error(fd, pid, report, "malformed request: REQUEST of 0 bytes has no version");
	pid = hostile_start(&fd, &report);
	assert_int_equal(proto_send(fd, PROTO_REQUEST, buf, 4), 0);
	expect_error(fd, pid, report, "malformed request: no program");
	/* another version: refused, naming both */
	uint32_t v1 = 1;
	memcpy(buf, &v1, 4);
	pid = hostile_start(&fd, &report);
	assert_int_equal(proto_send(fd, PROTO_REQUEST, buf, (uint32_t)n), 0);
	expect_error(fd, pid, report, "malformed request: host speaks protocol version 1, this agent 5");
	n = proto_encode_request(&rq, buf, sizeof(buf));
	/* the run id missing (cut off the last field: 4 + 32 bytes) */
	pid = hostile_start(&fd, &report);
	assert_int_equal(proto_send(fd, PROTO_REQUEST, buf, (uint32_t)n - 36), 0);
	expect_error(fd, pid, report, "malformed request: the RUN_ID field is missing");
	/* a TIME of 0 (its 8 bytes come right before RUN_ID's field) */
	memset(buf + n - 36 - 8, 0, 8);
	pid = hostile_start(&fd, &report);
	assert_int_equal(proto_send(fd, PROTO_REQUEST, buf, (uint32_t)n), 0);
	expect_error(fd, pid, report, "malformed request: TIME field of 0");
	/* the request split over several writes still works */
	REQUEST("printf", "split");
	n = proto_encode_request(&rq, buf, sizeof(buf));
	pid = hostile_start(&fd, &report);
	uint8_t h[PROTO_HDR_LEN];
	proto_header(h, PROTO_REQUEST, (uint32_t)n);
	send_raw(fd, h, 3);
	usleep(20000);
	send_raw(fd, h + 3, 5);
	usleep(20000);
	send_raw(fd, buf, 7);
	usleep(20000);
	send_raw(fd, buf + 7, n - 7);
	assert_int_equal(proto_send(fd, PROTO_STDIN, NULL, 0), 0);
	uint16_t type;
	const uint8_t *p;
	uint32_t len;
	assert_int_equal(host_frame(fd, &type, &p, &len), 1);
	assert_int_equal(type, PROTO_STDOUT);
	assert_int_equal(len, 5);
	assert_memory_equal(p, "split", 5);
	assert_int_equal(host_frame(fd, &type, &p, &len), 1);
	assert_int_equal(type, PROTO_EXIT);
	struct proto_exit e;
	assert_int_equal(proto_decode_exit(p, len, &e, errbuf, sizeof(errbuf)), 0);
	assert_int_equal(e.kind, PROTO_END_EXITED);
	assert_int_equal(host_frame(fd, &type, &p, &len), 0);
	close(fd);
	finish_agent(pid, report, &R);
	assert_int_equal(R.agent_rc, 0);
}

/* An agent that cannot make its guest unique (reseed the RNG, set the
 * clock) refuses the run before anything of it starts. Only the failures
 * are tested here: this process must not reseed its host's RNG or set its
 * clock, and a device that is no RNG fails at the first ioctl, before the
 * clock. */
static void unique_guest_refused(void **state)
{
	(void)state;
	int fd, report;
	pid_t pid;
	char dev[PATH_MAX], want[2 * PATH_MAX];
	/* agent_unique itself */
	write_file("not-an-rng", "", 0644);
	path_in_tmp(dev, sizeof(dev), "not-an-rng");
	REQUEST("touch", "ran");
	allow(p_touch);
	assert_int_equal(agent_unique(dev, &rq, errbuf, sizeof(errbuf)), -1);
	snprintf(want, sizeof(want), "reseeding the RNG: RNDADDENTROPY on %s: %s", dev, strerror(ENOTTY));
	assert_string_equal(errbuf, want);
	/* in a session: an ERROR, nothing run */
	cfg.random_dev = dev;
	pid = hostile_start(&fd, &report);
	send_request(fd);
	expect_error(fd, pid, report, want);
	assert_false(exists_in_tmp("ran"));
	path_in_tmp(dev, sizeof(dev), "no-such-device");
	snprintf(want, sizeof(want), "opening %s: %s", dev, strerror(ENOENT));
	pid = hostile_start(&fd, &report);
	send_request(fd);
	expect_error(fd, pid, report, want);
	cfg.random_dev = NULL;
	assert_false(exists_in_tmp("ran"));
	/* and without a random_dev the same request runs */
	run();
	assert_exited(0);
	assert_true(exists_in_tmp("ran"));
}

static void bad_frame_during_run(void **state)
{
	(void)state;
	int fd, report;
	pid_t pid;
	/* cat waits on its stdin; the host sends something else */
	REQUEST("cat");
	pid = hostile_start(&fd, &report);
	send_request(fd);
	assert_int_equal(proto_send(fd, PROTO_STDIN, "abc", 3), 0);
	assert_int_equal(proto_send(fd, PROTO_STDOUT, "xyz", 3), 0);
	expect_error(fd, pid, report, "unexpected frame type 4 during the run");

	pid = hostile_start(&fd, &report);
	send_request(fd);
	uint8_t h[PROTO_HDR_LEN];
	proto_header(h, 0, 0);
	send_raw(fd, h, sizeof(h));
	expect_error(fd, pid, report, "unknown frame type 0");

	pid = hostile_start(&fd, &report);
	send_request(fd);
	assert_int_equal(proto_send(fd, PROTO_REQUEST, "", 0), 0);
	expect_error(fd, pid, report, "unexpected frame type 2 during the run");
}

static void host_closes_early(void **state)
{
	(void)state;
	int fd, report;
	pid_t pid;
	/* half-closed: the agent can still say why */
	pid = hostile_start(&fd, &report);
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	expect_error(fd, pid, report, "the host closed the connection before the request");
	/* closed outright: the ERROR goes nowhere, the agent still returns */
	pid = hostile_start(&fd, &report);
	close(fd);
	finish_agent(pid, report, &R);
	assert_int_equal(R.agent_rc, -1);
	assert_string_equal(R.agent_err, "the host closed the connection before the request");
	/* the host closes in the middle of a frame */
	pid = hostile_start(&fd, &report);
	send_raw(fd, "\x10\0\0\0\2\0", 6);
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	expect_error(fd, pid, report, "the host closed the connection before the request");
}

static void host_closes_during_run(void **state)
{
	(void)state;
	int fd, report;
	REQUEST("cat");
	pid_t pid = hostile_start(&fd, &report);
	send_request(fd);
	assert_int_equal(proto_send(fd, PROTO_STDIN, "abc", 3), 0);
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	/* cat's echo of abc, then the ERROR; cat is killed */
	expect_error(fd, pid, report, "the host closed the connection during the run");
}

/* ---- stages ------------------------------------------------------------------ */

/* The output of stage i (out_buf holds every stage's, in order). */
static const uint8_t *stage_stdout(unsigned i)
{
	size_t at = 0;
	for (unsigned k = 0; k < i; k++)
		at += R.stage_out[k];
	return out_buf + at;
}

static void assert_stage_exited(unsigned i, int code)
{
	assert_true(R.res.nexits > i);
	const struct proto_exit *e = &R.res.exits[i];
	if (e->kind != PROTO_END_EXITED || e->code != code)
		fail_msg("stage %u: kind %u code %d signal %d (want exited %d); stderr: %s", i, e->kind, e->code,
			 e->signal, code, (char *)err_buf);
	assert_int_equal(e->stage, i);
}

/* Compile exits 0: the run stage follows in the same session, with the
 * host's stdin and what the compile stage left in the working directory. */
static void two_stages_in_order(void **state)
{
	(void)state;
	REQUEST("sh", "-c", "printf run:; cat; cat artifact");
	COMPILE("sh", "-c", "printf compiled; printf cerr >&2; printf built > artifact");
	run_with("input;", 6);
	assert_done();
	assert_int_equal(R.res.nexits, 2);
	assert_stage_exited(0, 0);
	assert_stage_exited(1, 0);
	assert_int_equal(R.res.exits[0].stdout_bytes, 8);
	assert_int_equal(R.res.exits[0].stderr_bytes, 4);
	assert_int_equal(R.res.exits[1].stdout_bytes, 15);
	assert_int_equal(R.res.exits[1].stderr_bytes, 0);
	assert_int_equal(R.stage_out[0], 8);
	assert_int_equal(R.stage_out[1], 15);
	assert_int_equal(R.stage_err[0], 4);
	assert_memory_equal(stage_stdout(1), "run:input;built", 15);
	assert_stdout_all("compiledrun:input;built");
	assert_string_equal((char *)err_buf, "cerr");
	assert_int_equal(R.agent_rc, 0);
}

/* Compile fails, is refused or is killed: its EXIT ends the session, the
 * run stage's program never starts. */
static void compile_failure_ends_session(void **state)
{
	(void)state;
	char marker[PATH_MAX];
	path_in_tmp(marker, sizeof(marker), "marker");
	/* the proof that the run stage would make the marker */
	REQUEST(p_touch, marker);
	allow(p_touch);
	COMPILE("true");
	run();
	assert_int_equal(R.res.nexits, 2);
	assert_stage_exited(1, 0);
	assert_true(exists_in_tmp("marker"));
	assert_int_equal(unlink(marker), 0);

	/* exit 1: a compile error */
	REQUEST(p_touch, marker);
	allow(p_touch);
	COMPILE("sh", "-c", "printf 'error: x' >&2; exit 1");
	run_with("stdin for the run stage", 23);
	assert_done();
	assert_int_equal(R.res.nexits, 1);
	assert_stage_exited(0, 1);
	assert_int_equal(R.res.exit.stage, 0);
	assert_string_equal((char *)err_buf, "error: x");
	assert_int_equal(R.agent_rc, 0);
	assert_false(exists_in_tmp("marker"));

	/* killed by a signal */
	REQUEST(p_touch, marker);
	allow(p_touch);
	COMPILE("sh", "-c", "kill -TERM $$");
	run();
	assert_done();
	assert_int_equal(R.res.nexits, 1);
	assert_int_equal(R.res.exit.kind, PROTO_END_SIGNALED);
	assert_int_equal(R.res.exit.signal, SIGTERM);
	assert_false(exists_in_tmp("marker"));

	/* the compiler is not allowed, or not there: refused as stage 0 */
	REQUEST(p_touch, marker);
	rq.nallow = 0;
	allow(p_touch);   /* one allowlist for the whole request: sh is not on it */
	COMPILE(p_sh, "-c", "touch compiler-ran");
	run();
	assert_done();
	assert_int_equal(R.res.nexits, 1);
	assert_int_equal(R.res.exit.kind, PROTO_END_DENIED);
	assert_int_equal(R.res.exit.stage, 0);
	assert_false(exists_in_tmp("compiler-ran"));
	assert_false(exists_in_tmp("marker"));
	REQUEST(p_touch, marker);
	allow(p_touch);
	COMPILE("no-such-compiler-here");
	run();
	assert_done();
	assert_int_equal(R.res.nexits, 1);
	assert_int_equal(R.res.exit.kind, PROTO_END_NOT_FOUND);
	assert_int_equal(R.res.exit.stage, 0);
	assert_false(exists_in_tmp("marker"));

	/* compile fine, the run stage's program refused: its EXIT is stage 1's */
	REQUEST(p_touch, marker);
	COMPILE("true");
	run();
	assert_done();
	assert_int_equal(R.res.nexits, 2);
	assert_stage_exited(0, 0);
	assert_int_equal(R.res.exits[1].kind, PROTO_END_DENIED);
	assert_int_equal(R.res.exits[1].stage, 1);
	assert_false(exists_in_tmp("marker"));
}

/* A compile stage's stdin is /dev/null although the host sent its STDIN
 * frames right behind the REQUEST (in the agent's first read with it):
 * they wait, whole, for the run stage. */
static void compile_stdin_is_dev_null(void **state)
{
	(void)state;
	fill_big_in();
	REQUEST("cat");
	COMPILE("sh", "-c", "wc -c; readlink /proc/self/fd/0");
	run_with(big_in, sizeof(big_in));
	assert_done();
	assert_stage_exited(0, 0);
	assert_stage_exited(1, 0);
	assert_int_equal(R.stage_out[0], 12);
	assert_memory_equal(stage_stdout(0), "0\n/dev/null\n", 12);
	assert_int_equal(R.stage_out[1], sizeof(big_in));
	assert_memory_equal(stage_stdout(1), big_in, sizeof(big_in));
	assert_int_equal(R.res.exits[1].stdout_bytes, sizeof(big_in));
	/* small stdin, surely in the same read as the REQUEST */
	REQUEST("cat");
	COMPILE("wc", "-c");
	run_with("abc", 3);
	assert_done();
	assert_memory_equal(stage_stdout(0), "0\n", 2);
	assert_int_equal(R.stage_out[1], 3);
	assert_memory_equal(stage_stdout(1), "abc", 3);
}

/* The agent does not read the host while a compile stage runs: what the
 * host sends then (here a frame the agent refuses, or the end of the
 * connection) is only seen once the run stage starts, after stage 0's
 * EXIT. */
static void compile_does_not_read_host(void **state)
{
	(void)state;
	for (int variant = 0; variant < 2; variant++) {
		int fd, report;
		REQUEST("cat");
		COMPILE("sh", "-c", "sleep 0.2; printf compiled");
		pid_t pid = hostile_start(&fd, &report);
		send_request(fd);
		if (variant == 0)
			assert_int_equal(proto_send(fd, PROTO_STDOUT, "xyz", 3), 0);
		else
			assert_int_equal(shutdown(fd, SHUT_WR), 0);
		uint16_t type;
		const uint8_t *p;
		uint32_t len;
		assert_int_equal(host_frame(fd, &type, &p, &len), 1);
		assert_int_equal(type, PROTO_STDOUT);
		assert_int_equal(len, 8);
		assert_memory_equal(p, "compiled", 8);
		assert_int_equal(host_frame(fd, &type, &p, &len), 1);
		if (type != PROTO_EXIT)
			fail_msg("frame of type %u before stage 0's EXIT (%.*s)", type, (int)len, (const char *)p);
		struct proto_exit e;
		assert_int_equal(proto_decode_exit(p, len, &e, errbuf, sizeof(errbuf)), 0);
		assert_int_equal(e.stage, 0);
		assert_int_equal(e.kind, PROTO_END_EXITED);
		assert_int_equal(e.code, 0);
		expect_error(fd, pid, report,
			     variant == 0 ? "unexpected frame type 4 during the run"
					  : "the host closed the connection during the run");
	}
}

/* max_output holds for each stream of each stage. */
static void per_stage_output_caps(void **state)
{
	(void)state;
	REQUEST("sh", "-c", "head -c 150 /dev/zero | tr '\\0' r; head -c 100 /dev/zero | tr '\\0' s >&2");
	COMPILE("sh", "-c", "head -c 150 /dev/zero | tr '\\0' c; head -c 30 /dev/zero | tr '\\0' d >&2");
	rq.max_output = 100;
	run();
	assert_done();
	assert_stage_exited(0, 0);
	assert_stage_exited(1, 0);
	const struct proto_exit *c = &R.res.exits[0], *r = &R.res.exits[1];
	assert_int_equal(c->flags, PROTO_EXIT_STDOUT_TRUNCATED);
	assert_int_equal(c->stdout_bytes, 150);
	assert_int_equal(c->stderr_bytes, 30);
	assert_int_equal(R.stage_out[0], 100);
	assert_int_equal(R.stage_err[0], 30);
	/* the run stage starts with its own full allowance */
	assert_int_equal(r->flags, PROTO_EXIT_STDOUT_TRUNCATED);
	assert_int_equal(r->stdout_bytes, 150);
	assert_int_equal(r->stderr_bytes, 100);
	assert_int_equal(R.stage_out[1], 100);
	assert_int_equal(R.stage_err[1], 100);
	for (size_t i = 0; i < 200; i++)
		assert_int_equal(out_buf[i], i < 100 ? 'c' : 'r');
}

/* What a compile stage leaves running is dead before the run stage
 * starts. */
static void leftovers_killed_between_stages(void **state)
{
	(void)state;
	/* a zombie (not reaped yet: it is the test's, as subreaper) or no
	 * process at all is dead */
	REQUEST("sh", "-c", "p=$(cat pid); s=$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null); "
			    "if [ -z \"$s\" ] || [ \"$s\" = Z ]; then echo dead; else echo alive $s; fi");
	COMPILE("sh", "-c", "sleep 1000 & echo $! > pid");
	run();
	assert_done();
	assert_stage_exited(0, 0);
	assert_stage_exited(1, 0);
	assert_int_equal(R.stage_out[1], 5);
	assert_memory_equal(stage_stdout(1), "dead\n", 5);
}

/* /proc/self/limits' "Max cpu time" soft and hard values. */
static void assert_cpu_limits_at(const uint8_t *text, const char *soft_want, const char *hard_want)
{
	char *l = strstr((const char *)text, "Max cpu time");
	assert_non_null(l);
	char soft[32], hard[32];
	assert_int_equal(sscanf(l + strlen("Max cpu time"), " %31s %31s", soft, hard), 2);
	assert_string_equal(soft, soft_want);
	assert_string_equal(hard, hard_want);
}

/* cpu_ms: RLIMIT_CPU of whole seconds rounded up, hard a second later,
 * each stage its own. */
static void cpu_limit_set(void **state)
{
	(void)state;
	REQUEST("cat", "/proc/self/limits");
	COMPILE("cat", "/proc/self/limits");
	rq.stage[0].cpu_ms = 1;
	rq.stage[1].cpu_ms = 1500;
	run();
	assert_done();
	assert_stage_exited(0, 0);
	assert_stage_exited(1, 0);
	assert_cpu_limits_at(stage_stdout(1), "2", "3");
	out_buf[R.stage_out[0]] = '\0';   /* stage 0's part alone */
	assert_cpu_limits_at(stage_stdout(0), "1", "2");
	REQUEST("cat", "/proc/self/limits");
	RUN_STAGE.cpu_ms = 3000;
	run();
	assert_exited(0);
	assert_cpu_limits_at(out_buf, "3", "4");
	REQUEST("cat", "/proc/self/limits");
	run();
	assert_exited(0);
	assert_cpu_limits_at(out_buf, "unlimited", "unlimited");
}

/* A stage that uses up its CPU time ends by SIGXCPU, or by SIGKILL at the
 * hard limit when it ignores SIGXCPU, and its EXIT says so. */
static void cpu_limit_exceeded(void **state)
{
	(void)state;
	REQUEST("sh", "-c", "while :; do :; done");
	RUN_STAGE.cpu_ms = 1000;
	run();
	assert_done();
	assert_int_equal(R.res.exit.kind, PROTO_END_SIGNALED);
	assert_int_equal(R.res.exit.signal, SIGXCPU);
	assert_int_equal(R.res.exit.flags, PROTO_EXIT_CPU_EXCEEDED);
	/* (wait4's usage may read up to ~50 ms under the kernel's own sample) */
	if (R.res.exit.cpu_ms < 900 || R.res.exit.cpu_ms > 1500)
		fail_msg("cpu_ms %llu for a limit of 1000", (unsigned long long)R.res.exit.cpu_ms);

	/* SIGXCPU ignored: SIGKILL a second later */
	REQUEST("sh", "-c", "trap '' XCPU; while :; do :; done");
	RUN_STAGE.cpu_ms = 1000;
	run();
	assert_done();
	assert_int_equal(R.res.exit.kind, PROTO_END_SIGNALED);
	assert_int_equal(R.res.exit.signal, SIGKILL);
	assert_int_equal(R.res.exit.flags, PROTO_EXIT_CPU_EXCEEDED);
	/* the hard limit is at 2 s; past the 1 s asked for, whatever the slop */
	if (R.res.exit.cpu_ms < 1000 || R.res.exit.cpu_ms > 2500)
		fail_msg("cpu_ms %llu when killed at the hard limit", (unsigned long long)R.res.exit.cpu_ms);

	/* a SIGKILL well under the limit is not the limit's doing */
	REQUEST("sh", "-c", "kill -KILL $$");
	RUN_STAGE.cpu_ms = 60000;
	run();
	assert_done();
	assert_int_equal(R.res.exit.signal, SIGKILL);
	assert_int_equal(R.res.exit.flags, 0);
	/* nor is a SIGXCPU in a stage without a limit */
	REQUEST("sh", "-c", "kill -XCPU $$");
	run();
	assert_done();
	assert_int_equal(R.res.exit.signal, SIGXCPU);
	assert_int_equal(R.res.exit.flags, 0);
	/* and a stage within its limit is not flagged */
	REQUEST("true");
	RUN_STAGE.cpu_ms = 1000;
	run();
	assert_exited(0);
	assert_int_equal(R.res.exit.flags, 0);
}

/* A memory limit without cgroups (an agent run as an ordinary process, or
 * a kernel without cgroup2): an ERROR before anything runs. */
static void memory_limit_without_cgroups(void **state)
{
	(void)state;
	char marker[PATH_MAX];
	path_in_tmp(marker, sizeof(marker), "marker");
	REQUEST(p_touch, marker);
	allow(p_touch);
	RUN_STAGE.memory_kib = 65536;
	run();
	assert_int_equal(R.st, HOST_FAILED);
	assert_int_equal(R.res.nexits, 0);
	const char *want = "stage 0 has a memory limit, but the agent has no cgroups (none configured)";
	assert_string_equal(R.res.error, want);
	assert_int_equal(R.agent_rc, -1);
	assert_string_equal(R.agent_err, want);
	assert_false(exists_in_tmp("marker"));

	/* on the run stage only: the compile stage does not run either */
	REQUEST(p_touch, marker);
	allow(p_touch);
	COMPILE(p_touch, marker);
	RUN_STAGE.memory_kib = 1;
	cfg.cgroup_error = "mount cgroup2 on /sys/fs/cgroup: No such device";
	run();
	cfg.cgroup_error = NULL;
	assert_int_equal(R.st, HOST_FAILED);
	assert_int_equal(R.res.nexits, 0);
	assert_string_equal(R.res.error, "stage 1 has a memory limit, but the agent has no cgroups "
					 "(mount cgroup2 on /sys/fs/cgroup: No such device)");
	assert_false(exists_in_tmp("marker"));
}

/* A cgroup root that is not one (here a plain directory, or none): the
 * stage that needs it ends the session with an ERROR saying what failed,
 * after the stages before it ran; nothing is left in the directory. */
static void memory_limit_unusable_cgroup(void **state)
{
	(void)state;
	char root[PATH_MAX], want[2 * PATH_MAX];
	path_in_tmp(root, sizeof(root), "notcg");
	assert_int_equal(mkdir(root, 0755), 0);
	cfg.cgroup_root = root;
	REQUEST("true");
	COMPILE("sh", "-c", "printf compiled");
	RUN_STAGE.memory_kib = 1024;
	run();
	assert_int_equal(R.st, HOST_FAILED);
	assert_int_equal(R.res.nexits, 1);
	assert_stage_exited(0, 0);
	assert_stdout_all("compiled");
	snprintf(want, sizeof(want), "stage 1's memory limit: setting memory.max of cgroup %s/vmrun-stage1: %s", root,
		 strerror(ENOENT));
	assert_string_equal(R.res.error, want);
	assert_string_equal(R.agent_err, want);
	assert_int_equal(rmdir(root), 0);   /* empty: the group was removed */

	path_in_tmp(root, sizeof(root), "nonexistent");
	REQUEST("true");
	RUN_STAGE.memory_kib = 1024;
	run();
	cfg.cgroup_root = NULL;
	assert_int_equal(R.st, HOST_FAILED);
	snprintf(want, sizeof(want), "stage 0's memory limit: creating cgroup %s/vmrun-stage0: %s", root,
		 strerror(ENOENT));
	assert_string_equal(R.res.error, want);
}

/* ---- cgroup.c: the parts that need no cgroup ---------------------------------- */

static void cgroup_keyed_values(void **state)
{
	(void)state;
	const char *events = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 1\n";
	uint64_t v = 99;
	assert_int_equal(cgroup_keyed_value(events, "oom_kill", &v), 0);
	assert_int_equal(v, 2);
	assert_int_equal(cgroup_keyed_value(events, "oom", &v), 0);   /* not oom_kill's line */
	assert_int_equal(v, 3);
	assert_int_equal(cgroup_keyed_value(events, "low", &v), 0);   /* the first line */
	assert_int_equal(v, 0);
	assert_int_equal(cgroup_keyed_value(events, "oom_group_kill", &v), 0);   /* the last */
	assert_int_equal(v, 1);
	assert_int_equal(cgroup_keyed_value("populated 1\nfrozen 0\n", "populated", &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(cgroup_keyed_value("populated 0", "populated", &v), 0);   /* no newline at the end */
	assert_int_equal(v, 0);
	assert_int_equal(cgroup_keyed_value("x 18446744073709551615\n", "x", &v), 0);
	assert_true(v == UINT64_MAX);
	/* missing, a prefix or suffix of the key, no number, trailing junk, too big */
	v = 77;
	static const struct { const char *text, *key; } bad[] = {
		{ "", "oom_kill" }, { "oom 3\n", "oom_kill" }, { "oom_kil 3\n", "oom_kill" }, { "xoom_kill 5\n", "oom_kill" },
		{ "oom_killer 5\n", "oom_kill" }, { "oom_kill\n", "oom_kill" }, { "oom_kill \n", "oom_kill" },
		{ "oom_kill x\n", "oom_kill" }, { "oom_kill -1\n", "oom_kill" }, { "oom_kill 5x\n", "oom_kill" },
		{ "oom_kill 5 6\n", "oom_kill" }, { "oom_kill 18446744073709551616\n", "oom_kill" },
		{ "oom_kill 99999999999999999999\n", "oom_kill" }, { " oom_kill 1\n", "oom_kill" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (cgroup_keyed_value(bad[i].text, bad[i].key, &v) != -1)
			fail_msg("\"%s\" gave %s = %llu", bad[i].text, bad[i].key, (unsigned long long)v);
	assert_int_equal(v, 77);
	/* a bad line before the key's does not matter */
	assert_int_equal(cgroup_keyed_value("junk\n\nmax x\noom_kill 4\n", "oom_kill", &v), 0);
	assert_int_equal(v, 4);
}

static void cgroup_memory_max_text(void **state)
{
	(void)state;
	char buf[32];
	assert_int_equal(cgroup_memory_max(1, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "1024");
	assert_int_equal(cgroup_memory_max(65536, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "67108864");
	assert_int_equal(cgroup_memory_max(UINT64_MAX / 1024, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "18446744073709550592");
	assert_int_equal(cgroup_memory_max(UINT64_MAX / 1024 + 1, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "max");
	assert_int_equal(cgroup_memory_max(UINT64_MAX, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "max");
	/* room: exactly, one short */
	assert_int_equal(cgroup_memory_max(1, buf, 5), 0);
	assert_string_equal(buf, "1024");
	assert_int_equal(cgroup_memory_max(1, buf, 4), -1);
}

/* The file work on a directory that only looks like a group: reading
 * memory.events, joining through the procs fd, the bounded wait for an
 * empty group, refusing a root that is not a cgroup. */
static void cgroup_files(void **state)
{
	(void)state;
	struct cgroup g = { .procs_fd = -1 };
	char err[512];
	path_in_tmp(g.path, sizeof(g.path), "fake");
	assert_int_equal(mkdir(g.path, 0755), 0);
	uint64_t n = 99;
	assert_int_equal(cgroup_oom_kills(&g, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "memory.events"));
	write_file("fake/memory.events", "low 0\nhigh 0\nmax 5\noom 2\noom_kill 2\noom_group_kill 1\n", 0644);
	assert_int_equal(cgroup_oom_kills(&g, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	write_file("fake/memory.events", "oom 0\noom_kill 0\n", 0644);
	assert_int_equal(cgroup_oom_kills(&g, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);

	/* joining writes "0" (the writer) to cgroup.procs */
	write_file("fake/cgroup.procs", "", 0644);
	char procs[PATH_MAX];
	path_in_tmp(procs, sizeof(procs), "fake/cgroup.procs");
	g.procs_fd = open(procs, O_WRONLY | O_CLOEXEC);
	assert_true(g.procs_fd >= 0);
	assert_int_equal(cgroup_join(&g), 0);
	char got[8] = "";
	int fd = open(procs, O_RDONLY | O_CLOEXEC);
	assert_int_equal(read(fd, got, sizeof(got)), 1);
	close(fd);
	assert_int_equal(got[0], '0');

	/* still populated: the wait ends at its bound, and says so */
	write_file("fake/cgroup.events", "populated 1\nfrozen 0\n", 0644);
	int64_t t0 = now_ms();
	assert_int_equal(cgroup_destroy(&g, 100, err, sizeof(err)), -1);
	int64_t ms = now_ms() - t0;
	assert_int_equal(g.procs_fd, -1);   /* closed either way */
	/* at its bound, not forever: the upper limit is loose, since a loaded
	 * CI machine once took over a second here */
	assert_true(ms >= 100 && ms < 10000);
	assert_non_null(strstr(err, "still has processes 100 ms after they were killed"));
	/* empty: on to rmdir (which a real group allows with its files in it) */
	write_file("fake/cgroup.events", "populated 0\nfrozen 0\n", 0644);
	assert_int_equal(cgroup_destroy(&g, 100, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "removing cgroup"));

	/* cgroup_create on what is not a cgroup: refused, nothing left */
	char root[PATH_MAX];
	path_in_tmp(root, sizeof(root), "plain");
	assert_int_equal(mkdir(root, 0755), 0);
	struct cgroup h;
	assert_int_equal(cgroup_create(root, "g", 1024, &h, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "memory.max"));
	assert_int_equal(h.procs_fd, -1);
	assert_int_equal(rmdir(root), 0);   /* g was removed */
	assert_int_equal(cgroup_create(root, "g", 1024, &h, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "creating cgroup"));
}

int main(void)
{
#define T(f) cmocka_unit_test_teardown(f, per_test_teardown)
	const struct CMUnitTest tests[] = {
		T(resolve_path_search),
		T(resolve_with_slash),
		T(allowed),
		T(environment),
		T(environment_network),
		T(environment_run_id),
		T(hello_and_run),
		T(denied_runs_nothing),
		T(denied_not_runnable),
		T(not_found),
		T(resolved_names_run),
		T(argv_verbatim),
		T(environment_exact),
		T(cwd_and_limits),
		T(stdin_delivered),
		T(stdin_empty),
		T(stdin_not_read),
		T(stdout_stderr_separate),
		T(output_caps),
		T(exit_codes),
		T(killed_by_signal),
		T(orphans_killed),
		T(drain_cut_off_flagged),
		T(cpu_time),
		T(runs_as_user),
		T(start_failures),
		T(two_stages_in_order),
		T(compile_failure_ends_session),
		T(compile_stdin_is_dev_null),
		T(per_stage_output_caps),
		T(leftovers_killed_between_stages),
		T(cpu_limit_set),
		T(cpu_limit_exceeded),
		T(memory_limit_without_cgroups),
		T(memory_limit_unusable_cgroup),
		T(cgroup_keyed_values),
		T(cgroup_memory_max_text),
		T(cgroup_files),
		T(garbage_instead_of_request),
		T(bad_request),
		T(unique_guest_refused),
		T(bad_frame_during_run),
		T(host_closes_early),
		T(host_closes_during_run),
		T(compile_does_not_read_host),
		T(network_session),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
