/* The guest agent's session (guest-agent/agent.c) as an ordinary process:
 * a forked child serves one session over a socketpair with the real
 * programs of this machine, the test plays the host with host/session.c
 * (or, for hostile hosts, by hand). Also agent_resolve, agent_allowed and
 * agent_environment directly.
 *
 * The test process is a child subreaper, so whatever a command leaves
 * behind ends up as its child: each test ends by checking that no process
 * is left (and reaping the ones killed). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "proto.h"
#include "session.h"

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
	return session_now_ms();
}

/* The request the host sends; request() resets it. */
static struct proto_request rq;

static void allow(const char *path)
{
	rq.allow[rq.nallow++] = (char *)path;
}

static void request_v(const char *const *argv)
{
	memset(&rq, 0, sizeof(rq));
	for (; *argv; argv++)
		rq.argv[rq.argc++] = (char *)*argv;
	rq.max_output = 4 * MIB;
	rq.nproc = 4096;
	rq.nofile = 256;
	rq.fsize = 64 * MIB;
	const char *const defaults[] = { p_printf, p_env, p_sh, p_cat, p_wc, p_head, p_pwd, p_true };
	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
		allow(defaults[i]);
}

#define REQUEST(...)                                                   \
	do {                                                           \
		const char *const argv_[] = { __VA_ARGS__, NULL };        \
		request_v(argv_);                                      \
	} while (0)

/* What one run produced. */
struct run {
	enum session_status st;
	struct session_result res;
	int agent_rc;
	char agent_err[512];
	int64_t ms;
	size_t out_len, err_len;
	size_t out_frames, max_frame;
};

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

/* A memfd holding the command's stdin. */
static int stdin_fd(const void *data, size_t len)
{
	int fd = memfd_create("stdin", MFD_CLOEXEC);
	assert_true(fd >= 0);
	size_t off = 0;
	while (off < len) {
		ssize_t k = write(fd, (const uint8_t *)data + off, len - off);
		assert_true(k > 0);
		off += (size_t)k;
	}
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

/* One run of rq through session_run with output going to fn: in == NULL
 * means no stdin at all. */
static void run_output_to(const void *in, size_t inlen, session_output_fn fn)
{
	memset(&R, 0, sizeof(R));
	int host, report;
	int64_t t0 = now_ms();
	pid_t pid = start_agent(&host, &report);
	struct session_io io = { .cancel_fd = -1, .stdin_fd = in ? stdin_fd(in, inlen) : -1, .output = fn, .ctx = &R };
	R.st = session_run(host, &rq, &io, t0 + DEADLINE_MS, &R.res);
	R.ms = now_ms() - t0;
	close(host);
	if (io.stdin_fd >= 0)
		close(io.stdin_fd);
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
	if (R.st != SESSION_DONE)
		fail_msg("session status %d: %s (agent: %d %s)", R.st, R.res.error, R.agent_rc, R.agent_err);
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

static void assert_stderr(const char *want)
{
	if (R.err_len != strlen(want) || memcmp(err_buf, want, R.err_len) != 0)
		fail_msg("stderr \"%s\" (%zu bytes), want \"%s\"", (char *)err_buf, R.err_len, want);
	assert_int_equal(R.res.exit.stderr_bytes, strlen(want));
}

/* Our children, from /proc (for killing leftovers). */
static int children(pid_t *out, int max)
{
	DIR *d = opendir("/proc");
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) && n < max) {
		char p[64], buf[512];
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(p, sizeof(p), "/proc/%d/stat", atoi(e->d_name));
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t k = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (k <= 0)
			continue;
		buf[k] = '\0';
		char *rp = strrchr(buf, ')');
		int ppid;
		char state;
		if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == getpid())
			out[n++] = atoi(e->d_name);
	}
	if (d)
		closedir(d);
	return n;
}

/* Reap what ended; fail if anything is still running after a while. */
static int no_leftovers(void)
{
	int64_t until = now_ms() + 3000;
	for (;;) {
		pid_t r = waitpid(-1, NULL, WNOHANG);
		if (r > 0)
			continue;
		if (r < 0 && errno == ECHILD)
			return 0;
		if (now_ms() > until)
			break;
		usleep(5000);
	}
	pid_t left[64];
	int n = children(left, 64);
	for (int i = 0; i < n; i++) {
		char p[64], comm[64] = "?";
		snprintf(p, sizeof(p), "/proc/%d/comm", left[i]);
		FILE *f = fopen(p, "re");
		if (f) {
			if (fgets(comm, sizeof(comm), f))
				comm[strcspn(comm, "\n")] = '\0';
			fclose(f);
		}
		fprintf(stderr, "test_agent: process %d (%s) left behind\n", left[i], comm);
		kill(left[i], SIGKILL);
	}
	while (waitpid(-1, NULL, 0) > 0)
		;
	return -1;
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
	assert_int_equal(agent_environment("/h", NULL, 0, env, 8, store, sizeof(store)), 4);
	assert_string_equal(env[0], "PATH=" PROTO_PATH);
	assert_string_equal(env[0], "PATH=/usr/local/bin:/usr/bin:/bin");
	assert_string_equal(env[1], "HOME=/h");
	assert_string_equal(env[2], "LANG=C.UTF-8");
	assert_string_equal(env[3], "PYTHONIOENCODING=utf-8");
	assert_null(env[4]);

	/* grants: replace in place, or append; names are whole names */
	char *g[] = { "X=1", "LANG=fr_FR.UTF-8", "LAN=2", "LANGX=3", "HOME=/other", "X=4", "PATH2=p", "E=" };
	assert_int_equal(agent_environment("/h", g, 8, env, 16, store, sizeof(store)), 9);
	static const char *const want[] = { "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/other", "LANG=fr_FR.UTF-8",
					    "PYTHONIOENCODING=utf-8", "X=4", "LAN=2", "LANGX=3", "PATH2=p", "E=" };
	for (int i = 0; i < 9; i++)
		assert_string_equal(env[i], want[i]);
	assert_null(env[9]);

	/* room for the pointers: max counts the NULL */
	assert_int_equal(agent_environment("/h", NULL, 0, env, 5, store, sizeof(store)), 4);
	assert_int_equal(agent_environment("/h", NULL, 0, env, 4, store, sizeof(store)), -1);
	assert_int_equal(agent_environment("/h", g, 1, env, 5, store, sizeof(store)), -1);
	assert_int_equal(agent_environment("/h", g, 1, env, 6, store, sizeof(store)), 5);
	assert_int_equal(agent_environment("/h", g + 1, 1, env, 5, store, sizeof(store)), 4);   /* a replacement */

	/* room for the strings: 34 + 8 + 13 + 23 bytes */
	static char small[100];
	memset(small, 0x7f, sizeof(small));
	assert_int_equal(agent_environment("/h", NULL, 0, env, 8, small, 78), 4);
	assert_string_equal(env[3], "PYTHONIOENCODING=utf-8");
	assert_int_equal(small[78], 0x7f);
	memset(small, 0x7f, sizeof(small));
	assert_int_equal(agent_environment("/h", NULL, 0, env, 8, small, 77), -1);
	for (size_t i = 77; i < sizeof(small); i++)
		assert_int_equal(small[i], 0x7f);
	assert_int_equal(agent_environment("/h", g, 1, env, 8, small, 78 + 3), -1);
	assert_int_equal(agent_environment("/h", g, 1, env, 8, small, 78 + 4), 5);

	/* the most the agent allows: 64 grants */
	static char names[PROTO_MAX_ENV][16];
	char *many[PROTO_MAX_ENV];
	for (unsigned i = 0; i < PROTO_MAX_ENV; i++) {
		snprintf(names[i], sizeof(names[i]), "V%u=%u", i, i);
		many[i] = names[i];
	}
	assert_int_equal(agent_environment("/h", many, PROTO_MAX_ENV, env, PROTO_MAX_ENV + 5, store, sizeof(store)),
			 PROTO_MAX_ENV + 4);
	assert_string_equal(env[PROTO_MAX_ENV + 3], "V63=63");
	assert_null(env[PROTO_MAX_ENV + 4]);
}

/* ---- sessions --------------------------------------------------------------- */

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
	for (unsigned i = rq.argc; i < PROTO_MAX_ARGS; i++)
		rq.argv[i] = i % 2 ? "a" : "b";
	rq.argc = PROTO_MAX_ARGS;
	rq.argv[PROTO_MAX_ARGS - 1] = longest;
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
	snprintf(want, sizeof(want), "PATH=/usr/local/bin:/usr/bin:/bin\nHOME=%s\nLANG=C.UTF-8\nPYTHONIOENCODING=utf-8\n",
		 tmpdir);
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
		 "X=granted\nEMPTY=\nSPACES=a b  c\n", tmpdir);
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
	assert_int_equal(lines, 4 + PROTO_MAX_ENV);
	assert_non_null(strstr((char *)out_buf, "\nG0=0\n"));
	assert_non_null(strstr((char *)out_buf, "\nG63=63\n"));
	assert_null(strstr((char *)out_buf, "SECRET"));
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
	if (type == PROTO_STDOUT)
		r->out_len += len;
	else
		on_output(ctx, type, data, len);
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
	buf[n] = 9;
	buf[n + 1] = 0;
	buf[n + 2] = 0;
	buf[n + 3] = 0;
	pid = hostile_start(&fd, &report);
	assert_int_equal(proto_send(fd, PROTO_REQUEST, buf, (uint32_t)n + 4), 0);
	expect_error(fd, pid, report, "malformed request: unknown field 9");
	/* an empty request */
	pid = hostile_start(&fd, &report);
	assert_int_equal(proto_send(fd, PROTO_REQUEST, NULL, 0), 0);
	expect_error(fd, pid, report, "malformed request: no program");
	/* a limit missing (cut off the last field) */
	pid = hostile_start(&fd, &report);
	assert_int_equal(proto_send(fd, PROTO_REQUEST, buf, (uint32_t)n - 12), 0);
	expect_error(fd, pid, report, "malformed request: a limit is missing");
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

/* session_run's promise: never blocks past deadline_ms. Here its stdin is
 * a pipe that stays open and empty; the run must end in SESSION_TIMEOUT
 * about when the deadline passes. (Run in a child with an alarm, so that a
 * session_run that blocks cannot hang the test.) */
static void host_deadline_with_idle_stdin(void **state)
{
	(void)state;
	int fd, report;
	REQUEST("cat");
	pid_t agent = start_agent(&fd, &report);
	int sp[2];
	assert_int_equal(pipe2(sp, O_CLOEXEC), 0);
	fflush(NULL);
	pid_t host = fork();
	assert_true(host >= 0);
	if (host == 0) {
		close(sp[1]);
		alarm(5);
		static struct session_result res;
		struct session_io io = { .cancel_fd = -1, .stdin_fd = sp[0], .output = NULL };
		enum session_status st = session_run(fd, &rq, &io, now_ms() + 300, &res);
		_exit(st == SESSION_TIMEOUT ? 0 : 10 + (int)st);
	}
	close(sp[0]);
	close(fd);
	int64_t t0 = now_ms();
	bool to;
	int status = wait_child(host, 10000, &to);
	int64_t ms = now_ms() - t0;
	close(sp[1]);
	finish_agent(agent, report, &R);
	assert_false(to);
	if (WIFSIGNALED(status))
		fail_msg("session_run was still blocked %lld ms after a 300 ms deadline (signal %d)", (long long)ms,
			 WTERMSIG(status));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(ms < 3000);
}

/* The agent goes away without reading all stdin: session_run comes back
 * with SESSION_FAILED and why. Here the agent reads the REQUEST and closes
 * while the host still has most of 1 MiB of stdin to send. The host
 * ignores SIGPIPE, as vmrun's main does: session_run writes with write(),
 * so a caller that does not would die of it. */
static void host_survives_agent_closing(void **state)
{
	(void)state;
	fill_big_in();
	REQUEST("cat");
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fflush(NULL);
	pid_t host = fork();
	assert_true(host >= 0);
	if (host == 0) {
		close(sv[1]);
		alarm(10);
		static struct session_result res;
		struct session_io io = { .cancel_fd = -1, .stdin_fd = stdin_fd(big_in, sizeof(big_in)), .output = NULL };
		enum session_status st = session_run(sv[0], &rq, &io, now_ms() + 5000, &res);
		if (st != SESSION_FAILED)
			_exit(10 + (int)st);
		if (strcmp(res.error, "the agent's connection ended before EXIT") != 0 || strcmp(res.agent, "fake") != 0)
			_exit(20);
		_exit(0);
	}
	close(sv[0]);
	/* a minimal agent: HELLO, the REQUEST, then gone */
	uint8_t hello[64];
	size_t n = proto_encode_hello(hello, sizeof(hello), "fake");
	assert_int_equal(proto_send(sv[1], PROTO_HELLO, hello, (uint32_t)n), 0);
	proto_reader_init(&hrd);
	uint16_t type;
	const uint8_t *p;
	uint32_t len;
	assert_int_equal(host_frame(sv[1], &type, &p, &len), 1);
	assert_int_equal(type, PROTO_REQUEST);
	usleep(100000);   /* let the host fill the socket */
	close(sv[1]);
	bool to;
	int status = wait_child(host, 15000, &to);
	assert_false(to);
	if (WIFSIGNALED(status))
		fail_msg("session_run's process was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- session_run against scripted agents ----------------------------------- */

static size_t put_frame(uint8_t *buf, uint16_t type, const void *p, uint32_t len)
{
	proto_header(buf, type, len);
	if (len)
		memcpy(buf + PROTO_HDR_LEN, p, len);
	return PROTO_HDR_LEN + len;
}

/* session_run on a socket where the "agent" already wrote `script` (and
 * closed its end when `close_after`). */
static enum session_status scripted(const uint8_t *script, size_t n, bool close_after, int64_t deadline_ms)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	if (n)
		send_raw(sv[1], script, n);
	if (close_after)
		close(sv[1]);
	memset(&R, 0, sizeof(R));
	struct session_io io = { .cancel_fd = -1, .stdin_fd = -1, .output = on_output, .ctx = &R };
	enum session_status st = session_run(sv[0], &rq, &io, now_ms() + deadline_ms, &R.res);
	close(sv[0]);
	if (!close_after)
		close(sv[1]);
	out_buf[R.out_len] = '\0';
	err_buf[R.err_len] = '\0';
	return st;
}

static void session_run_scripted_agents(void **state)
{
	(void)state;
	static uint8_t s[4 * PROTO_MAX_PAYLOAD];
	uint8_t hello[64], ex[PROTO_EXIT_LEN];
	uint32_t hn = (uint32_t)proto_encode_hello(hello, sizeof(hello), "fake agent");
	struct proto_exit e = { .kind = PROTO_END_EXITED, .code = 7, .cpu_ms = 5, .stdout_bytes = 3, .stderr_bytes = 4 };
	proto_encode_exit(&e, ex);
	size_t n;
	REQUEST("true");

	/* a good run: output, then EXIT; what follows EXIT is not read */
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_STDOUT, "out", 3);
	n += put_frame(s + n, PROTO_STDERR, "errs", 4);
	n += put_frame(s + n, PROTO_EXIT, ex, sizeof(ex));
	n += put_frame(s + n, 99, NULL, 0);
	assert_int_equal(scripted(s, n, true, 5000), SESSION_DONE);
	assert_string_equal(R.res.agent, "fake agent");
	assert_true(R.res.hello_ms > 0);
	assert_memory_equal(&R.res.exit, &e, sizeof(e));
	assert_string_equal((char *)out_buf, "out");
	assert_string_equal((char *)err_buf, "errs");

	/* the first frame must be HELLO, of this version */
	n = put_frame(s, PROTO_STDOUT, "out", 3);
	assert_int_equal(scripted(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(R.res.error, "the agent's first frame is type 4, not HELLO");
	assert_int_equal(R.out_len, 0);
	uint8_t v2[8] = { 2, 0, 0, 0, 'x' };
	n = put_frame(s, PROTO_HELLO, v2, 5);
	assert_int_equal(scripted(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(R.res.error, "bad HELLO: agent speaks protocol version 2, this host 1");
	assert_int_equal(R.res.hello_ms, 0);

	/* ERROR ends the run, its text (up to 400 bytes) kept */
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_STDOUT, "partial", 7);
	n += put_frame(s + n, PROTO_ERROR, "boom", 4);
	assert_int_equal(scripted(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(R.res.error, "agent: boom");
	assert_string_equal((char *)out_buf, "partial");
	static char longmsg[1000], want[500];
	memset(longmsg, 'm', sizeof(longmsg));
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_ERROR, longmsg, sizeof(longmsg));
	assert_int_equal(scripted(s, n, false, 5000), SESSION_FAILED);
	snprintf(want, sizeof(want), "agent: %.400s", longmsg);
	assert_string_equal(R.res.error, want);

	/* a bad EXIT, a frame the agent does not send, a malformed stream */
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_EXIT, ex, sizeof(ex) - 1);
	assert_int_equal(scripted(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(R.res.error, "bad EXIT: EXIT of 47 bytes");
	/* an exit status vmrun could not pass on: 128 + signal would overflow */
	struct proto_exit bad = { .kind = PROTO_END_SIGNALED, .signal = INT32_MAX };
	uint8_t badex[PROTO_EXIT_LEN];
	proto_encode_exit(&bad, badex);
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_EXIT, badex, sizeof(badex));
	assert_int_equal(scripted(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(R.res.error, "bad EXIT: EXIT with signal 2147483647 outside 1..64");
	bad = (struct proto_exit){ .kind = PROTO_END_EXITED, .code = 256 };
	proto_encode_exit(&bad, badex);
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_EXIT, badex, sizeof(badex));
	assert_int_equal(scripted(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(R.res.error, "bad EXIT: EXIT with exit code 256 outside 0..255");
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_REQUEST, "", 0);
	assert_int_equal(scripted(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(R.res.error, "unexpected frame type 2 from the agent");
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_STDIN, "in", 2);
	assert_int_equal(scripted(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(R.res.error, "unexpected frame type 3 from the agent");
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, 9, NULL, 0);
	assert_int_equal(scripted(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(R.res.error, "unknown frame type 9");
	n = put_frame(s, PROTO_HELLO, hello, hn);
	proto_header(s + n, PROTO_STDOUT, PROTO_MAX_PAYLOAD + 1);
	n += PROTO_HDR_LEN;
	assert_int_equal(scripted(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(R.res.error, "frame of 65537 bytes exceeds the 65536-byte maximum");

	/* the connection ends: before HELLO, after it, in the middle of EXIT */
	assert_int_equal(scripted(s, 0, true, 5000), SESSION_FAILED);
	assert_string_equal(R.res.error, "the agent's connection ended before HELLO");
	n = put_frame(s, PROTO_HELLO, hello, hn);
	assert_int_equal(scripted(s, n, true, 5000), SESSION_FAILED);
	assert_string_equal(R.res.error, "the agent's connection ended before EXIT");
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_EXIT, ex, sizeof(ex)) - 1;
	assert_int_equal(scripted(s, n, true, 5000), SESSION_FAILED);
	assert_string_equal(R.res.error, "the agent's connection ended before EXIT");

	/* silence: the deadline, on time */
	n = put_frame(s, PROTO_HELLO, hello, hn);
	int64_t t0 = now_ms();
	assert_int_equal(scripted(s, n, false, 200), SESSION_TIMEOUT);
	int64_t ms = now_ms() - t0;
	assert_true(ms >= 200 && ms < 1500);
	t0 = now_ms();
	assert_int_equal(scripted(s, 0, false, 0), SESSION_TIMEOUT);
	assert_true(now_ms() - t0 < 500);

	/* a request that cannot be encoded is not sent */
	rq.argc = 0;
	n = put_frame(s, PROTO_HELLO, hello, hn);
	assert_int_equal(scripted(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(R.res.error, "the request does not fit one frame");
}

int main(void)
{
#define T(f) cmocka_unit_test_teardown(f, per_test_teardown)
	const struct CMUnitTest tests[] = {
		T(resolve_path_search),
		T(resolve_with_slash),
		T(allowed),
		T(environment),
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
		T(garbage_instead_of_request),
		T(bad_request),
		T(bad_frame_during_run),
		T(host_closes_early),
		T(host_closes_during_run),
		T(host_deadline_with_idle_stdin),
		T(host_survives_agent_closing),
		T(session_run_scripted_agents),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
