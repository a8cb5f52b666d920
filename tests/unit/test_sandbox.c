/* The guest agent's sandbox mode (guest-agent/sandbox.c, files.c) as an
 * ordinary process: a forked child serves a session over a socketpair,
 * the test plays the host frame by frame. Commands one after another and
 * at once, stdin, signals, timeouts, output caps, back-pressure, the file
 * operations, a host that goes away, and malformed frames.
 *
 * The test process is a child subreaper: each test ends by checking that
 * no process of a command is left. */
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
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "files.h"
#include "leftovers.h"
#include "proto.h"
#include "proto_sandbox.h"

#define DEADLINE_MS 20000
#define MIB (1u << 20)
#define RUN_ID "00112233445566778899aabbccddeeff"

static char tmpdir[128];
static struct agent_config cfg;
static char p_printf[PATH_MAX], p_sh[PATH_MAX], p_cat[PATH_MAX], p_head[PATH_MAX], p_true[PATH_MAX];

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ---- the test's host --------------------------------------------------------- */

/* What came back for one id. */
struct rec {
	uint32_t id;
	uint8_t *out, *err, *data;
	size_t nout, nerr, ndata;
	bool exited, ended;
	struct proto_exit ex;
	int32_t ferr;
	uint32_t fflags;
	bool has_entry;
	struct proto_entry entry;
};

#define MAX_RECS 32

struct host {
	pid_t agent;
	int fd, report;
	struct proto_reader rd;
	struct rec rec[MAX_RECS];
	unsigned nrec;
	char error[512];   /* an ERROR frame's text */
	bool eof;
	unsigned paused, ready;   /* PAUSED and READY frames */
};

static struct host H;

static struct rec *rec_of(uint32_t id)
{
	for (unsigned i = 0; i < H.nrec; i++)
		if (H.rec[i].id == id)
			return &H.rec[i];
	assert_true(H.nrec < MAX_RECS);
	H.rec[H.nrec] = (struct rec){ .id = id };
	return &H.rec[H.nrec++];
}

/* Append to a buffer that grows by doubling (16 MiB arrive in 16 KiB
 * frames); its capacity is the power of two at or above its length. */
static void append(uint8_t **buf, size_t *n, const uint8_t *p, size_t len)
{
	size_t cap = 64;
	while (cap < *n + 1)
		cap *= 2;
	if (!*buf || *n + len + 1 > cap) {
		while (cap < *n + len + 1)
			cap *= 2;
		*buf = realloc(*buf, cap);
		assert_non_null(*buf);
	}
	memcpy(*buf + *n, p, len);
	*n += len;
	(*buf)[*n] = 0;
}

static void send_frame(uint16_t type, const void *p, uint32_t len)
{
	assert_int_equal(proto_send(H.fd, type, p, len), 0);
}

/* Take one frame the agent sent into the records. */
static void take(uint16_t type, const uint8_t *p, uint32_t len)
{
	char err[256];
	uint32_t id, n;
	const uint8_t *data;
	uint16_t stream;
	struct proto_exit ex;
	switch (type) {
	case PROTO_CMD_OUTPUT:
		assert_int_equal(proto_decode_output(p, len, &id, &stream, &data, &n, err, sizeof(err)), 0);
		if (stream == PROTO_STDOUT)
			append(&rec_of(id)->out, &rec_of(id)->nout, data, n);
		else
			append(&rec_of(id)->err, &rec_of(id)->nerr, data, n);
		break;
	case PROTO_CMD_EXIT:
		if (proto_decode_cmd_exit(p, len, &id, &ex, err, sizeof(err)))
			fail_msg("CMD_EXIT: %s", err);
		rec_of(id)->exited = true;
		rec_of(id)->ex = ex;
		break;
	case PROTO_FILE_DATA: {
		assert_int_equal(proto_sb_split(p, len, &id, &data, &n), 0);
		append(&rec_of(id)->data, &rec_of(id)->ndata, data, n);
		/* a READ's credit for what was taken (a LIST's is ignored) */
		uint8_t credit[8];
		proto_sb_put_id(credit, id, &n, sizeof(n));
		assert_int_equal(proto_send(H.fd, PROTO_FILE_DATA, credit, sizeof(credit)), 0);
		break;
	}
	case PROTO_FILE_END: {
		struct rec *r;
		int32_t e;
		uint32_t flags;
		struct proto_entry entry;
		bool has;
		if (proto_decode_file_end(p, len, &id, &e, &flags, &entry, &has, err, sizeof(err)))
			fail_msg("FILE_END: %s", err);
		r = rec_of(id);
		r->ended = true;
		r->ferr = e;
		r->fflags = flags;
		r->has_entry = has;
		r->entry = entry;
		break;
	}
	case PROTO_ERROR:
		snprintf(H.error, sizeof(H.error), "%.*s", (int)len, (const char *)p);
		break;
	case PROTO_PAUSED:
		assert_int_equal(len, 0);
		H.paused++;
		break;
	case PROTO_READY:
		H.ready++;
		break;
	default:
		fail_msg("unexpected frame type %u from the agent", type);
	}
}

/* Read frames until done(arg) or the deadline. */
static void pump_until(bool (*done)(void *), void *arg)
{
	int64_t until = now_ms() + DEADLINE_MS;
	while (!done(arg)) {
		char err[256];
		uint16_t type;
		const uint8_t *p;
		uint32_t len;
		int r;
		while ((r = proto_reader_next(&H.rd, &type, &p, &len, err, sizeof(err))) == 1) {
			take(type, p, len);
			if (done(arg))
				return;
		}
		assert_int_equal(r, 0);
		if (H.eof)
			fail_msg("the agent closed the connection (%s)", H.error);
		struct pollfd pf = { H.fd, POLLIN, 0 };
		int left = (int)(until - now_ms());
		if (left <= 0)
			fail_msg("no answer from the agent in time (command 1: %zu bytes out)", rec_of(1)->nout);
		if (poll(&pf, 1, left) <= 0)
			continue;
		size_t room;
		uint8_t *dst = proto_reader_space(&H.rd, &room);
		ssize_t k = read(H.fd, dst, room);
		if (k <= 0)
			H.eof = true;
		else
			proto_reader_fed(&H.rd, (size_t)k);
	}
}

static bool exited(void *arg) { return rec_of(*(uint32_t *)arg)->exited; }
static bool ended(void *arg) { return rec_of(*(uint32_t *)arg)->ended; }
static bool got_eof(void *arg) { (void)arg; return H.eof; }
static bool printed(void *arg) { (void)arg; return rec_of(1)->nout >= 7; }

static struct rec *wait_exit(uint32_t id)
{
	pump_until(exited, &id);
	return rec_of(id);
}

static struct rec *wait_end(uint32_t id)
{
	pump_until(ended, &id);
	return rec_of(id);
}

/* The sandbox's REQUEST: the programs the tests use, output capped at cap. */
static void start_sandbox(uint64_t cap)
{
	int sv[2], rp[2];
	memset(&H, 0, sizeof(H));
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(pipe2(rp, O_CLOEXEC), 0);
	fflush(NULL);
	H.agent = fork();
	assert_true(H.agent >= 0);
	if (H.agent == 0) {
		close(sv[0]);
		close(rp[0]);
		signal(SIGPIPE, SIG_IGN);
		char err[512] = "";
		int rc = agent_session(sv[1], &cfg, err, sizeof(err));
		(void)!write(rp[1], &rc, sizeof(rc));
		(void)!write(rp[1], err, strlen(err));
		_exit(0);
	}
	close(sv[1]);
	close(rp[1]);
	H.fd = sv[0];
	H.report = rp[0];
	proto_reader_init(&H.rd);
	static struct proto_request rq;
	memset(&rq, 0, sizeof(rq));
	rq.sandbox = true;
	rq.max_output = cap;
	rq.nproc = 4096;
	rq.nofile = 256;
	rq.fsize = 256 * MIB;
	memset(rq.seed, 0x5a, sizeof(rq.seed));
	rq.time_ns = 1700000000000000000ull;
	snprintf(rq.run_id, sizeof(rq.run_id), "%s", RUN_ID);
	rq.env[rq.envc++] = "SANDBOX_WIDE=1";
	char *progs[] = { p_printf, p_sh, p_cat, p_head, p_true };
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++)
		rq.allow[rq.nallow++] = progs[i];
	static uint8_t buf[PROTO_MAX_PAYLOAD];
	size_t n = proto_encode_request(&rq, buf, sizeof(buf));
	assert_true(n > 0);
	send_frame(PROTO_REQUEST, buf, (uint32_t)n);
	/* HELLO, then READY */
	char err[256];
	uint16_t type = 0;
	const uint8_t *p;
	uint32_t len;
	for (int want = 0; want < 2;) {
		int r = proto_reader_next(&H.rd, &type, &p, &len, err, sizeof(err));
		assert_true(r >= 0);
		if (r == 1) {
			assert_int_equal(type, want == 0 ? PROTO_HELLO : PROTO_READY);
			want++;
			continue;
		}
		size_t room;
		uint8_t *dst = proto_reader_space(&H.rd, &room);
		struct pollfd pf = { H.fd, POLLIN, 0 };
		assert_true(poll(&pf, 1, DEADLINE_MS) == 1);
		ssize_t k = read(H.fd, dst, room);
		assert_true(k > 0);
		proto_reader_fed(&H.rd, (size_t)k);
	}
}

/* Close the connection and collect the agent's result. */
static int stop_sandbox(char *err, size_t errlen)
{
	close(H.fd);
	int64_t until = now_ms() + DEADLINE_MS;
	int status = 0;
	while (waitpid(H.agent, &status, WNOHANG) == 0) {
		if (now_ms() > until) {
			kill(H.agent, SIGKILL);
			waitpid(H.agent, &status, 0);
			fail_msg("the agent did not end");
		}
		usleep(2000);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fail_msg("the agent ended with status 0x%x (a sanitizer report?)", status);
	int rc = 12345;
	assert_int_equal(read(H.report, &rc, sizeof(rc)), (ssize_t)sizeof(rc));
	ssize_t k = read(H.report, err, errlen - 1);
	err[k > 0 ? k : 0] = '\0';
	close(H.report);
	for (unsigned i = 0; i < H.nrec; i++) {
		free(H.rec[i].out);
		free(H.rec[i].err);
		free(H.rec[i].data);
	}
	return rc;
}

static void stop_ok(void)
{
	char err[512];
	int rc = stop_sandbox(err, sizeof(err));
	if (rc)
		fail_msg("the agent failed: %s", err);
}

/* CMD_START id with argv (NULL-terminated), cwd (NULL: the workspace),
 * timeout_ms (0: none) and one grant (NULL: none). */
static void start_cmd_full(uint32_t id, const char *const *argv, const char *cwd, uint64_t timeout_ms,
			   const char *grant)
{
	static struct proto_cmd c;
	memset(&c, 0, sizeof(c));
	c.id = id;
	for (; *argv; argv++)
		c.argv[c.argc++] = (char *)*argv;
	if (grant)
		c.env[c.envc++] = (char *)grant;
	c.cwd = (char *)cwd;
	c.timeout_ms = timeout_ms;
	static uint8_t buf[PROTO_MAX_PAYLOAD];
	size_t n = proto_encode_cmd(&c, buf, sizeof(buf));
	assert_true(n > 0);
	send_frame(PROTO_CMD_START, buf, (uint32_t)n);
}

#define CMD(id, ...)                                                   \
	do {                                                           \
		const char *const argv_[] = { __VA_ARGS__, NULL };        \
		start_cmd_full(id, argv_, NULL, 0, NULL);              \
	} while (0)

static void send_stdin(uint32_t id, const char *s)
{
	uint8_t buf[256];
	uint32_t n = proto_sb_put_id(buf, id, s, (uint32_t)strlen(s));
	send_frame(PROTO_CMD_STDIN, buf, n);
}

static void send_signal(uint32_t id, uint32_t sig)
{
	uint8_t buf[8];
	proto_encode_signal(buf, id, sig);
	send_frame(PROTO_CMD_SIGNAL, buf, sizeof(buf));
}

static void file_op(uint32_t id, uint32_t op, const char *path, const char *path2, uint32_t mode)
{
	static struct proto_file_req r;
	memset(&r, 0, sizeof(r));
	r.id = id;
	r.op = op;
	r.mode = mode;
	snprintf(r.path, sizeof(r.path), "%s", path);
	snprintf(r.path2, sizeof(r.path2), "%s", path2 ? path2 : "");
	uint8_t buf[2 * PROTO_MAX_STR + 64];
	size_t n = proto_encode_file_req(&r, buf, sizeof(buf));
	assert_true(n > 0);
	send_frame(PROTO_FILE_OP, buf, (uint32_t)n);
}

static void file_data(uint32_t id, const void *p, uint32_t n)
{
	static uint8_t buf[PROTO_MAX_PAYLOAD];
	send_frame(PROTO_FILE_DATA, buf, proto_sb_put_id(buf, id, p, n));
}

static void assert_exit_code(const struct rec *r, int code)
{
	if (r->ex.kind != PROTO_END_EXITED || r->ex.code != code)
		fail_msg("command %u: kind %u code %d signal %d, wanted exit %d (stderr: %s)", r->id, r->ex.kind,
			 r->ex.code, r->ex.signal, code, r->err ? (char *)r->err : "");
}

/* ---- pausing ---------------------------------------------------------------------- */

static char host_sock[100];   /* within sun_path */

/* The agent's reconnect hook in the tests: the test's listener. */
static int reconnect_test(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	memcpy(a.sun_path, host_sock, strlen(host_sock) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
		return fd;
	if (fd >= 0)
		close(fd);
	return -1;
}

static bool printed_one(void *arg) { (void)arg; return rec_of(1)->nout >= 3; }
static bool paused(void *arg) { return H.paused >= *(unsigned *)arg; }
static bool ready(void *arg) { return H.ready >= *(unsigned *)arg; }

static void send_resume(void)
{
	uint64_t none = 0;   /* the test's clock is not the agent's to set */
	send_frame(PROTO_RESUME, &none, sizeof(none));
}

/* PAUSE: everything queued, then PAUSED, then nothing; the connection
 * goes (the VM's vsock reset), the agent connects again and RESUME goes
 * on where it stopped: the command's output is whole. A pause called off
 * (RESUME on the same connection) goes on too. */
static void pause_and_resume(void **state)
{
	(void)state;
	assert_true((size_t)snprintf(host_sock, sizeof(host_sock), "%.80s/host.sock", tmpdir) < sizeof(host_sock));
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	memcpy(a.sun_path, host_sock, strlen(host_sock) + 1);
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lfd, 1), 0);
	cfg.reconnect = reconnect_test;
	start_sandbox(1 << 20);
	CMD(1, p_sh, "-c", "printf one; sleep 1; printf two");
	pump_until(printed_one, NULL);
	unsigned one = 1, two = 2;
	send_frame(PROTO_PAUSE, NULL, 0);
	pump_until(paused, &one);
	size_t before = rec_of(1)->nout;
	/* paused: the command's "two" waits in its pipe, its exit unsent */
	usleep(1500 * 1000);
	struct pollfd pf = { H.fd, POLLIN, 0 };
	assert_int_equal(poll(&pf, 1, 0), 0);
	assert_int_equal(rec_of(1)->nout, before);
	assert_false(rec_of(1)->exited);
	/* the VM's vsock is reset: the agent comes back on a new connection */
	close(H.fd);
	H.fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(H.fd >= 0);
	proto_reader_init(&H.rd);
	send_resume();
	pump_until(ready, &one);
	struct rec *r = wait_exit(1);
	assert_exit_code(r, 0);
	assert_string_equal((char *)r->out, "onetwo");
	/* called off: RESUME on the same connection */
	send_frame(PROTO_PAUSE, NULL, 0);
	pump_until(paused, &two);
	send_resume();
	pump_until(ready, &two);
	CMD(2, p_printf, "after");
	r = wait_exit(2);
	assert_string_equal((char *)r->out, "after");
	/* a fork's RESUME carries a seed after the time */
	unsigned three = 3;
	send_frame(PROTO_PAUSE, NULL, 0);
	pump_until(paused, &three);
	uint8_t fork_resume[PROTO_RESUME_LEN + PROTO_SEED_LEN] = { 0 };
	send_frame(PROTO_RESUME, fork_resume, sizeof(fork_resume));
	pump_until(ready, &three);
	/* a RESUME while not paused breaks the protocol */
	send_resume();
	pump_until(got_eof, NULL);
	char err[512];
	assert_int_equal(stop_sandbox(err, sizeof(err)), -1);
	assert_non_null(strstr(err, "while not paused"));
	cfg.reconnect = NULL;
	close(lfd);
	unlink(host_sock);
}

/* ---- leftovers ------------------------------------------------------------------ */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	if (ftw->level > 0)
		remove(path);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return no_leftovers();
}

static int group_setup(void **state)
{
	(void)state;
	char t[] = "/tmp/test_sandbox.XXXXXX", real[PATH_MAX];
	if (!mkdtemp(t) || !realpath(t, real) || strlen(real) >= sizeof(tmpdir))
		return -1;
	strcpy(tmpdir, real);
	cfg = (struct agent_config){ .cwd = tmpdir, .home = tmpdir, .uid = (uid_t)-1, .gid = (gid_t)-1 };
	signal(SIGPIPE, SIG_IGN);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		return -1;
	struct { const char *name; char *out; } progs[] = {
		{ "printf", p_printf }, { "sh", p_sh }, { "cat", p_cat }, { "head", p_head }, { "true", p_true },
	};
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++)
		if (agent_resolve(progs[i].name, tmpdir, PROTO_PATH, progs[i].out, PATH_MAX) < 0)
			return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	rmdir(tmpdir);
	return 0;
}

/* ---- commands ---------------------------------------------------------------- */

/* What one command leaves, the next one sees: the sandbox lives on. */
static void commands_share_state(void **state)
{
	(void)state;
	start_sandbox(MIB);
	CMD(1, "sh", "-c", "echo one > kept; printf '%s' \"$SANDBOX_WIDE $VMRUN_RUN_ID\"");
	struct rec *r = wait_exit(1);
	assert_exit_code(r, 0);
	assert_string_equal((char *)r->out, "1 " RUN_ID);
	CMD(2, "cat", "kept");
	r = wait_exit(2);
	assert_exit_code(r, 0);
	assert_string_equal((char *)r->out, "one\n");
	const char *const argv[] = { "sh", "-c", "pwd; printf %s \"$MINE\"; exit 3", NULL };
	char sub[PATH_MAX];
	snprintf(sub, sizeof(sub), "%s/sub", tmpdir);
	assert_int_equal(mkdir(sub, 0755), 0);
	start_cmd_full(3, argv, "sub", 0, "MINE=granted");
	r = wait_exit(3);
	assert_exit_code(r, 3);
	char want[PATH_MAX + 16];
	snprintf(want, sizeof(want), "%s\ngranted", sub);
	assert_string_equal((char *)r->out, want);
	stop_ok();
}

/* Several at once: one waits on its stdin while another comes and goes. */
static void commands_at_once(void **state)
{
	(void)state;
	start_sandbox(MIB);
	CMD(1, "cat");
	CMD(2, "printf", "second");
	struct rec *r = wait_exit(2);
	assert_exit_code(r, 0);
	assert_string_equal((char *)r->out, "second");
	if (rec_of(1)->exited)
		fail_msg("cat: kind %u code %d sig %d err %s", rec_of(1)->ex.kind, rec_of(1)->ex.code, rec_of(1)->ex.signal, rec_of(1)->err ? (char*)rec_of(1)->err : "");
	send_stdin(1, "to the ");
	send_stdin(1, "first");
	send_stdin(1, "");
	r = wait_exit(1);
	assert_exit_code(r, 0);
	assert_string_equal((char *)r->out, "to the first");
	stop_ok();
}

/* A signal reaches the command's process group; what it left dies too. */
static void signal_and_leftovers(void **state)
{
	(void)state;
	start_sandbox(MIB);
	CMD(1, "sh", "-c", "sh -c 'sleep 60' & printf started; wait");
	pump_until(printed, NULL);
	struct rec *r;
	send_signal(1, SIGTERM);
	r = wait_exit(1);
	assert_int_equal(r->ex.kind, PROTO_END_SIGNALED);
	assert_int_equal(r->ex.signal, SIGTERM);
	assert_false(r->ex.flags & PROTO_EXIT_TIMED_OUT);
	stop_ok();
}

static void timeout_kills(void **state)
{
	(void)state;
	start_sandbox(MIB);
	const char *const argv[] = { "sh", "-c", "sleep 60", NULL };
	int64_t t0 = now_ms();
	start_cmd_full(1, argv, NULL, 300, NULL);
	struct rec *r = wait_exit(1);
	assert_int_equal(r->ex.kind, PROTO_END_SIGNALED);
	assert_int_equal(r->ex.signal, SIGKILL);
	assert_true(r->ex.flags & PROTO_EXIT_TIMED_OUT);
	assert_true(now_ms() - t0 >= 300);
	/* the sandbox goes on */
	CMD(2, "true");
	assert_exit_code(wait_exit(2), 0);
	stop_ok();
}

static void refusals(void **state)
{
	(void)state;
	start_sandbox(MIB);
	CMD(1, "ls");   /* on this machine, not on the allowlist */
	assert_int_equal(wait_exit(1)->ex.kind, PROTO_END_DENIED);
	CMD(2, "no-such-program-here");
	assert_int_equal(wait_exit(2)->ex.kind, PROTO_END_NOT_FOUND);
	const char *const argv[] = { "true", NULL };
	start_cmd_full(3, argv, "no/such/dir", 0, NULL);
	assert_int_equal(wait_exit(3)->ex.kind, PROTO_END_ERROR);
	stop_ok();
}

static void output_capped(void **state)
{
	(void)state;
	start_sandbox(1000);
	CMD(1, "head", "-c", "100000", "/dev/zero");
	struct rec *r = wait_exit(1);
	assert_exit_code(r, 0);
	assert_int_equal(r->nout, 1000);
	assert_int_equal(r->ex.stdout_bytes, 100000);
	assert_true(r->ex.flags & PROTO_EXIT_STDOUT_TRUNCATED);
	stop_ok();
}

/* A host that stops reading holds the command in its write: nothing is
 * lost, and the command cannot finish until the host reads again. */
static void back_pressure(void **state)
{
	(void)state;
	start_sandbox(64 * MIB);
	CMD(1, "head", "-c", "16777216", "/dev/zero");
	usleep(500 * 1000);
	char err[256];
	uint16_t type;
	const uint8_t *p;
	uint32_t len;
	while (proto_reader_next(&H.rd, &type, &p, &len, err, sizeof(err)) == 1)
		take(type, p, len);
	assert_false(rec_of(1)->exited);
	struct rec *r = wait_exit(1);
	assert_exit_code(r, 0);
	assert_int_equal(r->nout, 16 * MIB);
	assert_int_equal(r->ex.stdout_bytes, 16 * MIB);
	assert_int_equal(r->ex.flags, 0);
	stop_ok();
}

/* The host goes away while a command runs: it is killed, the agent ends. */
static void host_gone(void **state)
{
	(void)state;
	start_sandbox(MIB);
	CMD(1, "sh", "-c", "sleep 60");
	usleep(100 * 1000);
	stop_ok();
}

static void malformed_frame(void **state)
{
	(void)state;
	start_sandbox(MIB);
	uint8_t bad[12] = { 1, 0, 0, 0, 99, 0, 0, 0, 0, 0, 0, 0 };   /* id 1, an unknown field */
	send_frame(PROTO_CMD_START, bad, sizeof(bad));
	pump_until(got_eof, NULL);
	assert_non_null(strstr(H.error, "malformed CMD_START"));
	char err[512];
	assert_int_equal(stop_sandbox(err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown CMD_START field 99"));
}

/* ---- files ------------------------------------------------------------------ */

static void files_round_trip(void **state)
{
	(void)state;
	start_sandbox(MIB);
	/* write in two pieces, then read it back */
	file_op(1, PROTO_FILE_WRITE, "notes/a.txt", NULL, 0600);
	file_data(1, "hello ", 6);
	file_data(1, "files", 5);
	file_data(1, "", 0);
	assert_int_equal(wait_end(1)->ferr, ENOENT);   /* no notes/ yet */
	file_op(2, PROTO_FILE_MKDIR, "notes/deep/er", NULL, 0);
	assert_int_equal(wait_end(2)->ferr, 0);
	file_op(3, PROTO_FILE_WRITE, "notes/a.txt", NULL, 0600);
	file_data(3, "hello ", 6);
	file_data(3, "files", 5);
	file_data(3, "", 0);
	assert_int_equal(wait_end(3)->ferr, 0);
	file_op(4, PROTO_FILE_READ, "notes/a.txt", NULL, 0);
	struct rec *r = wait_end(4);
	assert_int_equal(r->ferr, 0);
	assert_int_equal(r->ndata, 11);
	assert_memory_equal(r->data, "hello files", 11);
	char abs[PATH_MAX];
	snprintf(abs, sizeof(abs), "%s/notes/a.txt", tmpdir);
	file_op(5, PROTO_FILE_STAT, abs, NULL, 0);
	r = wait_end(5);
	assert_int_equal(r->ferr, 0);
	assert_true(r->has_entry);
	assert_string_equal(r->entry.name, "a.txt");
	assert_int_equal(r->entry.size, 11);
	assert_int_equal(r->entry.mode, S_IFREG | 0600);
	/* list: the file and the directory */
	file_op(6, PROTO_FILE_LIST, "notes", NULL, 0);
	r = wait_end(6);
	assert_int_equal(r->ferr, 0);
	uint32_t at = 0;
	unsigned files = 0, dirs = 0;
	char err[256];
	while (at < r->ndata) {
		struct proto_entry e;
		assert_int_equal(proto_next_entry(r->data, (uint32_t)r->ndata, &at, &e, err, sizeof(err)), 0);
		files += S_ISREG(e.mode) && !strcmp(e.name, "a.txt");
		dirs += S_ISDIR(e.mode) && !strcmp(e.name, "deep");
	}
	assert_int_equal(files, 1);
	assert_int_equal(dirs, 1);
	/* rename, then the old name is gone */
	file_op(7, PROTO_FILE_RENAME, "notes/a.txt", "notes/deep/b.txt", 0);
	assert_int_equal(wait_end(7)->ferr, 0);
	file_op(8, PROTO_FILE_STAT, "notes/a.txt", NULL, 0);
	assert_int_equal(wait_end(8)->ferr, ENOENT);
	/* a command sees what the files API wrote */
	CMD(9, "cat", "notes/deep/b.txt");
	assert_string_equal((char *)wait_exit(9)->out, "hello files");
	/* remove the whole tree */
	file_op(10, PROTO_FILE_REMOVE, "notes", NULL, 0);
	assert_int_equal(wait_end(10)->ferr, 0);
	file_op(11, PROTO_FILE_STAT, "notes", NULL, 0);
	assert_int_equal(wait_end(11)->ferr, ENOENT);
	/* errors come back as errno values */
	file_op(12, PROTO_FILE_READ, ".", NULL, 0);
	assert_int_equal(wait_end(12)->ferr, EISDIR);
	file_op(13, PROTO_FILE_LIST, "missing", NULL, 0);
	assert_int_equal(wait_end(13)->ferr, ENOENT);
	stop_ok();
}

/* A large file goes through in many chunks, both ways. */
static void files_large(void **state)
{
	(void)state;
	start_sandbox(MIB);
	size_t total = 3 * MIB + 123;
	uint8_t *blob = malloc(total);
	assert_non_null(blob);
	for (size_t i = 0; i < total; i++)
		blob[i] = (uint8_t)(i * 7 + i / 4096);
	file_op(1, PROTO_FILE_WRITE, "big", NULL, 0);
	for (size_t at = 0; at < total; at += PROTO_SB_CHUNK) {
		size_t n = total - at < PROTO_SB_CHUNK ? total - at : PROTO_SB_CHUNK;
		file_data(1, blob + at, (uint32_t)n);
	}
	file_data(1, "", 0);
	assert_int_equal(wait_end(1)->ferr, 0);
	file_op(2, PROTO_FILE_READ, "big", NULL, 0);
	struct rec *r = wait_end(2);
	assert_int_equal(r->ferr, 0);
	assert_int_equal(r->ndata, total);
	assert_memory_equal(r->data, blob, total);
	free(blob);
	stop_ok();
}

/* A directory out as a tar and back in, by the tar the image carries. */
static void tar_round_trip(void **state)
{
	(void)state;
	if (access(FILES_TAR, X_OK)) {
		fprintf(stderr, "test_sandbox: no %s here (make deps installs busybox)\n", FILES_TAR);
		fail();
	}
	start_sandbox(MIB);
	CMD(1, "sh", "-c", "mkdir -p src/sub && printf one > src/a && printf two > src/sub/b");
	assert_exit_code(wait_exit(1), 0);
	file_op(2, PROTO_FILE_TAR_OUT, "src", NULL, 0);
	struct rec *r = wait_end(2);
	assert_int_equal(r->ferr, 0);
	assert_true(r->ndata >= 1024 && r->ndata % 512 == 0);
	assert_non_null(memmem(r->data, r->ndata, "ustar", 5));
	assert_non_null(memmem(r->data, r->ndata, "sub/b", 5));
	file_op(3, PROTO_FILE_MKDIR, "dst", NULL, 0);
	assert_int_equal(wait_end(3)->ferr, 0);
	file_op(4, PROTO_FILE_TAR_IN, "dst", NULL, 0);
	for (size_t at = 0; at < r->ndata; at += 1000)
		file_data(4, r->data + at, (uint32_t)(r->ndata - at < 1000 ? r->ndata - at : 1000));
	file_data(4, "", 0);
	assert_int_equal(wait_end(4)->ferr, 0);
	CMD(5, "cat", "dst/a", "dst/sub/b");
	assert_string_equal((char *)wait_exit(5)->out, "onetwo");
	/* not a tar; not a directory */
	file_op(6, PROTO_FILE_TAR_IN, "dst", NULL, 0);
	file_data(6, "this is not a tar archive, not at all", 37);
	file_data(6, "", 0);
	assert_int_equal(wait_end(6)->ferr, EINVAL);
	file_op(7, PROTO_FILE_TAR_OUT, "missing", NULL, 0);
	assert_int_equal(wait_end(7)->ferr, ENOENT);
	file_op(8, PROTO_FILE_TAR_OUT, "src/a", NULL, 0);
	assert_int_equal(wait_end(8)->ferr, ENOTDIR);
	stop_ok();
}

/* A host that grants no credit gets a READ's window and no more. */
static void read_window(void **state)
{
	(void)state;
	start_sandbox(MIB);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/big", tmpdir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	static char block[4096];
	memset(block, 'x', sizeof(block));
	for (unsigned i = 0; i < 3 * PROTO_READ_WINDOW / sizeof(block); i++)
		assert_int_equal(fwrite(block, 1, sizeof(block), f), sizeof(block));
	fclose(f);
	file_op(1, PROTO_FILE_READ, "big", NULL, 0);
	/* read the frames by hand: no credit goes back */
	size_t got = 0;
	int64_t until = now_ms() + 1500;
	while (now_ms() < until) {
		struct pollfd pf = { H.fd, POLLIN, 0 };
		if (poll(&pf, 1, 100) <= 0)
			continue;
		size_t room;
		uint8_t *dst = proto_reader_space(&H.rd, &room);
		ssize_t k = read(H.fd, dst, room);
		assert_true(k > 0);
		proto_reader_fed(&H.rd, (size_t)k);
		char err[256];
		uint16_t type;
		const uint8_t *p;
		uint32_t len;
		while (proto_reader_next(&H.rd, &type, &p, &len, err, sizeof(err)) == 1) {
			assert_int_equal(type, PROTO_FILE_DATA);
			got += len - PROTO_SB_ID_LEN;
		}
	}
	assert_int_equal(got, PROTO_READ_WINDOW);
	/* credit lets the rest come */
	uint8_t credit[8];
	uint32_t more = 8 * PROTO_READ_WINDOW;
	proto_sb_put_id(credit, 1, &more, sizeof(more));
	send_frame(PROTO_FILE_DATA, credit, sizeof(credit));
	struct rec *r = wait_end(1);
	assert_int_equal(r->ferr, 0);
	assert_int_equal(got + r->ndata, 3 * PROTO_READ_WINDOW);
	stop_ok();
}

/* procfs is refused, named or through a link: /proc/self is the agent. */
static void no_procfs(void **state)
{
	(void)state;
	start_sandbox(MIB);
	char link[PATH_MAX];
	snprintf(link, sizeof(link), "%s/maps", tmpdir);
	assert_int_equal(symlink("/proc/self/maps", link), 0);
	file_op(1, PROTO_FILE_READ, "/proc/self/maps", NULL, 0);
	assert_int_equal(wait_end(1)->ferr, EACCES);
	file_op(2, PROTO_FILE_READ, "maps", NULL, 0);
	assert_int_equal(wait_end(2)->ferr, EACCES);
	file_op(3, PROTO_FILE_WRITE, "/proc/self/comm", NULL, 0);
	file_data(3, "x", 1);
	file_data(3, "", 0);
	assert_int_equal(wait_end(3)->ferr, EACCES);
	stop_ok();
}

/* Files and a command at once: a read goes on while a command runs. */
static void files_beside_command(void **state)
{
	(void)state;
	start_sandbox(MIB);
	CMD(1, "cat");
	file_op(2, PROTO_FILE_WRITE, "x", NULL, 0);
	file_data(2, "abc", 3);
	file_data(2, "", 0);
	assert_int_equal(wait_end(2)->ferr, 0);
	file_op(3, PROTO_FILE_READ, "x", NULL, 0);
	assert_string_equal((char *)wait_end(3)->data, "abc");
	assert_false(rec_of(1)->exited);
	send_signal(1, SIGKILL);
	assert_int_equal(wait_exit(1)->ex.signal, SIGKILL);
	stop_ok();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(commands_share_state, teardown),
		cmocka_unit_test_teardown(commands_at_once, teardown),
		cmocka_unit_test_teardown(signal_and_leftovers, teardown),
		cmocka_unit_test_teardown(timeout_kills, teardown),
		cmocka_unit_test_teardown(refusals, teardown),
		cmocka_unit_test_teardown(output_capped, teardown),
		cmocka_unit_test_teardown(back_pressure, teardown),
		cmocka_unit_test_teardown(host_gone, teardown),
		cmocka_unit_test_teardown(malformed_frame, teardown),
		cmocka_unit_test_teardown(files_round_trip, teardown),
		cmocka_unit_test_teardown(files_large, teardown),
		cmocka_unit_test_teardown(files_beside_command, teardown),
		cmocka_unit_test_teardown(read_window, teardown),
		cmocka_unit_test_teardown(tar_round_trip, teardown),
		cmocka_unit_test_teardown(no_procfs, teardown),
		cmocka_unit_test_teardown(pause_and_resume, teardown),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
