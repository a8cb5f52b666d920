/* The host side of a run (host/run/session.c) against scripted, hostile
 * agents: guest text (the HELLO name, an ERROR frame's text) reaches the
 * result only made printable, and session_printable itself; scripted
 * agents' good and malformed streams, stages, deadlines with idle stdin,
 * and an agent that goes away mid-stdin. The agent's side is tested in
 * test_agent.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "proto.h"
#include "proto_sandbox.h"
#include "session.h"

static struct proto_request rq;
static struct session_result res;

/* The run id sessions send, as long as vmrun's. */
#define RUN_ID "0123456789abcdef0123456789abcdef"

static size_t put_frame(uint8_t *buf, uint16_t type, const void *p, uint32_t len)
{
	proto_header(buf, type, len);
	if (len)
		memcpy(buf + PROTO_HDR_LEN, p, len);
	return PROTO_HDR_LEN + len;
}

/* session_run on a socket where the "agent" already wrote script and
 * closed its end. */
static enum session_status scripted(const uint8_t *script, size_t n)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(write(sv[1], script, n), (ssize_t)n);
	close(sv[1]);
	memset(&rq, 0, sizeof(rq));
	rq.nstages = 1;
	rq.stage[0] = (struct proto_stage){ .kind = PROTO_STAGE_RUN, .argc = 1, .argv = { "true" } };
	struct session_io io = { .cancel_fd = -1, .stdin_fd = -1, .run_id = RUN_ID };
	enum session_status st = session_run(sv[0], &rq, &io, clock_mono_ms() + 5000, &res);
	close(sv[0]);
	return st;
}

static void assert_printable(const char *s)
{
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
			fail_msg("byte 0x%02x at %zu of \"%s\"", (unsigned char)*c, (size_t)(c - s), s);
}

static void printable_helper(void **state)
{
	(void)state;
	char all[256], out[300];
	for (int i = 0; i < 256; i++)
		all[i] = (char)i;
	assert_ptr_equal(session_printable(out, sizeof(out), all, sizeof(all)), out);
	assert_int_equal(strlen(out), 256);
	for (int i = 0; i < 256; i++)
		assert_int_equal(out[i], i >= 0x20 && i <= 0x7e ? i : '?');
	/* escapes, CR, DEL, C1 controls, UTF-8 and a NUL that would end the text */
	static const char evil[] = "\x1b]0;owned\x07 a\r\n\x7f\x9b" "31m \xc3\xa9\0tail";
	session_printable(out, sizeof(out), evil, sizeof(evil) - 1);
	assert_string_equal(out, "?]0;owned? a????31m ???tail");
	/* cut to fit, always terminated; nothing at all */
	session_printable(out, 4, "abcdef", 6);
	assert_string_equal(out, "abc");
	session_printable(out, 1, "abc", 3);
	assert_string_equal(out, "");
	memset(out, 'z', sizeof(out));
	session_printable(out, sizeof(out), "abc", 0);
	assert_string_equal(out, "");
	out[0] = 'z';
	session_printable(out, 0, "abc", 3);   /* no room: nothing written */
	assert_int_equal(out[0], 'z');
}

static void hostile_hello_and_error(void **state)
{
	(void)state;
	static uint8_t s[2 * PROTO_MAX_PAYLOAD];
	uint8_t hello[128];
	static const char name[] = "\x1b[2J\x1b]0;pwned\x07" "agent\r\n\x9b" "1m";
	uint32_t v = PROTO_VERSION;
	memcpy(hello, &v, 4);
	memcpy(hello + 4, name, sizeof(name) - 1);
	static const char text[] = "\x1b[31mfailed\x1b[0m\0hidden\n";
	size_t n = put_frame(s, PROTO_HELLO, hello, 4 + sizeof(name) - 1);
	n += put_frame(s + n, PROTO_ERROR, text, sizeof(text) - 1);
	assert_int_equal(scripted(s, n), SESSION_FAILED);
	assert_string_equal(res.agent, "?[2J?]0;pwned?agent???1m");
	assert_string_equal(res.error, "agent: ?[31mfailed?[0m?hidden?");

	/* a long ERROR: 400 bytes of it, all printable */
	static uint8_t longmsg[1000];
	for (size_t i = 0; i < sizeof(longmsg); i++)
		longmsg[i] = (uint8_t)(i % 3 ? 'm' : 0x1b);
	n = put_frame(s, PROTO_HELLO, hello, 4 + sizeof(name) - 1);
	n += put_frame(s + n, PROTO_ERROR, longmsg, sizeof(longmsg));
	assert_int_equal(scripted(s, n), SESSION_FAILED);
	assert_int_equal(strlen(res.error), strlen("agent: ") + 400);
	assert_printable(res.error);
	assert_printable(res.agent);
}

static size_t hello_frame(uint8_t *buf)
{
	uint8_t hello[16];
	uint32_t v = PROTO_VERSION;
	memcpy(hello, &v, 4);
	memcpy(hello + 4, "test", 4);
	return put_frame(buf, PROTO_HELLO, hello, 8);
}

static size_t exit_frame(uint8_t *buf, uint32_t stage, uint32_t kind, int32_t code)
{
	struct proto_exit e = { .kind = kind, .code = code, .stage = stage };
	uint8_t p[PROTO_EXIT_LEN];
	proto_encode_exit(&e, p);
	return put_frame(buf, PROTO_EXIT, p, sizeof(p));
}

/* Collected output: "<stage><type letter>data" per frame. */
static char seen[256];
static void collect(void *ctx, unsigned stage, uint16_t type, const uint8_t *data, uint32_t len)
{
	(void)ctx;
	size_t n = strlen(seen);
	snprintf(seen + n, sizeof(seen) - n, "%u%c%.*s;", stage, type == PROTO_STDOUT ? 'o' : 'e', (int)len,
		 (const char *)data);
}

/* session_run of a two-stage request against the script; keep_open: the
 * agent's end stays open (until the deadline) instead of closing. */
static enum session_status staged(const uint8_t *script, size_t n, int64_t stage0_ms, int64_t within_ms)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(write(sv[1], script, n), (ssize_t)n);
	memset(&rq, 0, sizeof(rq));
	rq.nstages = 2;
	rq.stage[0] = (struct proto_stage){ .kind = PROTO_STAGE_COMPILE, .argc = 1, .argv = { "cc" } };
	rq.stage[1] = (struct proto_stage){ .kind = PROTO_STAGE_RUN, .argc = 1, .argv = { "/tmp/prog" } };
	seen[0] = '\0';
	struct session_io io = { .cancel_fd = -1, .stdin_fd = -1, .output = collect, .stage_timeout_ms = { stage0_ms, 0 },
				 .run_id = RUN_ID };
	enum session_status st = session_run(sv[0], &rq, &io, clock_mono_ms() + within_ms, &res);
	close(sv[0]);
	close(sv[1]);
	return st;
}

/* Stages in order: output goes to the stage that runs, each EXIT ends its
 * stage, a failed compile stage ends the session; an EXIT out of order and
 * output before any stage are the agent's fault; a stage's own limit ends
 * it as a timeout of that stage. */
static void stages(void **state)
{
	(void)state;
	static uint8_t s[4096];
	size_t n = hello_frame(s);
	n += put_frame(s + n, PROTO_STDERR, "warn", 4);
	n += exit_frame(s + n, 0, PROTO_END_EXITED, 0);
	n += put_frame(s + n, PROTO_STDOUT, "hi", 2);
	n += exit_frame(s + n, 1, PROTO_END_EXITED, 3);
	enum session_status got = staged(s, n, 0, 5000);
	if (got != SESSION_DONE)
		fail_msg("status %d: %s", got, res.error);
	assert_int_equal(res.stages, 2);
	assert_int_equal(res.exits, 2);
	assert_int_equal(res.exit[1].code, 3);
	assert_string_equal(seen, "0ewarn;1ohi;");
	assert_true(res.stage_end_ms[0] >= res.stage_start_ms[0] && res.stage_start_ms[1] >= res.stage_end_ms[0]);
	/* a compile error: done after the first EXIT, the rest unread */
	n = hello_frame(s);
	n += exit_frame(s + n, 0, PROTO_END_EXITED, 1);
	n += put_frame(s + n, PROTO_STDOUT, "never", 5);
	assert_int_equal(staged(s, n, 0, 5000), SESSION_DONE);
	assert_int_equal(res.stages, 1);
	assert_int_equal(res.exits, 1);
	assert_string_equal(seen, "");
	/* the run stage's EXIT first */
	n = hello_frame(s);
	n += exit_frame(s + n, 1, PROTO_END_EXITED, 0);
	assert_int_equal(staged(s, n, 0, 5000), SESSION_FAILED);
	assert_string_equal(res.error, "EXIT for stage 1 while stage 0 runs");
	/* the first stage's limit, well before the session's deadline */
	n = hello_frame(s);
	int64_t t0 = clock_mono_ms();
	assert_int_equal(staged(s, n, 100, 5000), SESSION_TIMEOUT);
	assert_true(res.stage_timeout);
	assert_true(clock_mono_ms() - t0 < 4000);
	/* the session's own deadline */
	assert_int_equal(staged(s, n, 0, 100), SESSION_TIMEOUT);
	assert_false(res.stage_timeout);
}


/* A "agent" that already wrote script, closing its end when close_after;
 * output collected into out_buf/err_buf. */
static uint8_t out_buf[1 << 16], err_buf[1 << 16];
static size_t out_len, err_len;

static void on_output(void *ctx, unsigned stage, uint16_t type, const uint8_t *data, uint32_t len)
{
	(void)ctx;
	(void)stage;
	uint8_t *b = type == PROTO_STDOUT ? out_buf : err_buf;
	size_t *n = type == PROTO_STDOUT ? &out_len : &err_len;
	if (*n + len < sizeof(out_buf)) {
		memcpy(b + *n, data, len);
		*n += len;
	}
}

static void request_true(void)
{
	memset(&rq, 0, sizeof(rq));
	rq.nstages = 1;
	rq.stage[0] = (struct proto_stage){ .kind = PROTO_STAGE_RUN, .argc = 1, .argv = { "true" } };
}

static void send_raw(int fd, const void *p, size_t n)
{
	for (size_t off = 0; off < n;) {
		ssize_t k = write(fd, (const uint8_t *)p + off, n - off);
		assert_true(k > 0);
		off += (size_t)k;
	}
}

static enum session_status scripted2(const uint8_t *script, size_t n, bool close_after, int64_t deadline_ms)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	if (n)
		send_raw(sv[1], script, n);
	if (close_after)
		close(sv[1]);
	out_len = err_len = 0;
	struct session_io io = { .cancel_fd = -1, .stdin_fd = -1, .output = on_output, .run_id = RUN_ID };
	enum session_status st = session_run(sv[0], &rq, &io, clock_mono_ms() + deadline_ms, &res);
	close(sv[0]);
	if (!close_after)
		close(sv[1]);
	out_buf[out_len] = '\0';
	err_buf[err_len] = '\0';
	return st;
}

static void scripted_agents(void **state)
{
	(void)state;
	static uint8_t s[4 * PROTO_MAX_PAYLOAD];
	uint8_t hello[64], ex[PROTO_EXIT_LEN];
	uint32_t hn = (uint32_t)proto_encode_hello(hello, sizeof(hello), "fake agent");
	struct proto_exit e = { .kind = PROTO_END_EXITED, .code = 7, .cpu_ms = 5, .stdout_bytes = 3, .stderr_bytes = 4 };
	proto_encode_exit(&e, ex);
	size_t n;
	request_true();

	/* a good run: output, then EXIT; what follows EXIT is not read */
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_STDOUT, "out", 3);
	n += put_frame(s + n, PROTO_STDERR, "errs", 4);
	n += put_frame(s + n, PROTO_EXIT, ex, sizeof(ex));
	n += put_frame(s + n, 99, NULL, 0);
	assert_int_equal(scripted2(s, n, true, 5000), SESSION_DONE);
	assert_string_equal(res.agent, "fake agent");
	assert_true(res.hello_ms > 0);
	assert_memory_equal(&res.exit[0], &e, sizeof(e));
	assert_int_equal(res.exits, 1);
	assert_string_equal((char *)out_buf, "out");
	assert_string_equal((char *)err_buf, "errs");

	/* the first frame must be HELLO, of this version */
	n = put_frame(s, PROTO_STDOUT, "out", 3);
	assert_int_equal(scripted2(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(res.error, "the agent's first frame is type 4, not HELLO");
	assert_int_equal(out_len, 0);
	uint8_t v3[8] = { PROTO_VERSION + 1, 0, 0, 0, 'x' };
	n = put_frame(s, PROTO_HELLO, v3, 5);
	assert_int_equal(scripted2(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(res.error, "bad HELLO: agent speaks protocol version 6, this host 5");
	assert_int_equal(res.hello_ms, 0);

	/* ERROR ends the run, its text (up to 400 bytes) kept */
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_STDOUT, "partial", 7);
	n += put_frame(s + n, PROTO_ERROR, "boom", 4);
	assert_int_equal(scripted2(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(res.error, "agent: boom");
	assert_string_equal((char *)out_buf, "partial");
	static char longmsg[1000], want[500];
	memset(longmsg, 'm', sizeof(longmsg));
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_ERROR, longmsg, sizeof(longmsg));
	assert_int_equal(scripted2(s, n, false, 5000), SESSION_FAILED);
	snprintf(want, sizeof(want), "agent: %.400s", longmsg);
	assert_string_equal(res.error, want);

	/* a bad EXIT, a frame the agent does not send, a malformed stream */
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_EXIT, ex, sizeof(ex) - 1);
	assert_int_equal(scripted2(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(res.error, "bad EXIT: EXIT of 55 bytes");
	/* an exit status vmrun could not pass on: 128 + signal would overflow */
	struct proto_exit bad = { .kind = PROTO_END_SIGNALED, .signal = INT32_MAX };
	uint8_t badex[PROTO_EXIT_LEN];
	proto_encode_exit(&bad, badex);
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_EXIT, badex, sizeof(badex));
	assert_int_equal(scripted2(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(res.error, "bad EXIT: EXIT with signal 2147483647 outside 1..64");
	bad = (struct proto_exit){ .kind = PROTO_END_EXITED, .code = 256 };
	proto_encode_exit(&bad, badex);
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_EXIT, badex, sizeof(badex));
	assert_int_equal(scripted2(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(res.error, "bad EXIT: EXIT with exit code 256 outside 0..255");
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_REQUEST, "", 0);
	assert_int_equal(scripted2(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(res.error, "unexpected frame type 2 from the agent");
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_STDIN, "in", 2);
	assert_int_equal(scripted2(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(res.error, "unexpected frame type 3 from the agent");
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_TYPE_LAST + 1, NULL, 0);
	assert_int_equal(scripted2(s, n, false, 5000), SESSION_FAILED);
	char unknown[64];
	snprintf(unknown, sizeof(unknown), "unknown frame type %d", PROTO_TYPE_LAST + 1);
	assert_string_equal(res.error, unknown);
	/* a sandbox's frame in a run */
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_READY, NULL, 0);
	assert_int_equal(scripted2(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(res.error, "READY from the agent in a run");
	n = put_frame(s, PROTO_HELLO, hello, hn);
	proto_header(s + n, PROTO_STDOUT, PROTO_MAX_PAYLOAD + 1);
	n += PROTO_HDR_LEN;
	assert_int_equal(scripted2(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(res.error, "frame of 65537 bytes exceeds the 65536-byte maximum");

	/* the connection ends: before HELLO, after it, in the middle of EXIT */
	assert_int_equal(scripted2(s, 0, true, 5000), SESSION_FAILED);
	assert_string_equal(res.error, "the agent's connection ended before HELLO");
	n = put_frame(s, PROTO_HELLO, hello, hn);
	assert_int_equal(scripted2(s, n, true, 5000), SESSION_FAILED);
	assert_string_equal(res.error, "the agent's connection ended before EXIT");
	n = put_frame(s, PROTO_HELLO, hello, hn);
	n += put_frame(s + n, PROTO_EXIT, ex, sizeof(ex)) - 1;
	assert_int_equal(scripted2(s, n, true, 5000), SESSION_FAILED);
	assert_string_equal(res.error, "the agent's connection ended before EXIT");

	/* silence: the deadline, on time */
	n = put_frame(s, PROTO_HELLO, hello, hn);
	int64_t t0 = clock_mono_ms();
	assert_int_equal(scripted2(s, n, false, 200), SESSION_TIMEOUT);
	int64_t ms = clock_mono_ms() - t0;
	assert_true(ms >= 200 && ms < 5000);
	t0 = clock_mono_ms();
	assert_int_equal(scripted2(s, 0, false, 0), SESSION_TIMEOUT);
	assert_true(clock_mono_ms() - t0 < 500);

	/* a request that cannot be encoded is not sent */
	rq.nstages = 0;
	n = put_frame(s, PROTO_HELLO, hello, hn);
	assert_int_equal(scripted2(s, n, false, 5000), SESSION_FAILED);
	assert_string_equal(res.error, "the request does not fit one frame");
}


/* The command's stdin is a pipe that stays open and empty, and the agent
 * says nothing after HELLO: session_run still ends in SESSION_TIMEOUT when
 * the deadline passes (an alarm fails the test if it blocks instead). */
static void deadline_with_idle_stdin(void **state)
{
	(void)state;
	request_true();
	int sv[2], sp[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(pipe2(sp, O_CLOEXEC), 0);
	uint8_t hello[64];
	size_t n = proto_encode_hello(hello, sizeof(hello), "fake");
	assert_int_equal(proto_send(sv[1], PROTO_HELLO, hello, (uint32_t)n), 0);
	alarm(5);
	struct session_io io = { .cancel_fd = -1, .stdin_fd = sp[0], .run_id = RUN_ID };
	int64_t t0 = clock_mono_ms();
	assert_int_equal(session_run(sv[0], &rq, &io, t0 + 300, &res), SESSION_TIMEOUT);
	alarm(0);
	int64_t ms = clock_mono_ms() - t0;
	assert_true(ms >= 300 && ms < 3000);
	close(sv[0]);
	close(sv[1]);
	close(sp[0]);
	close(sp[1]);
}

/* The gate's view: the deadline it was handed, and what it answers. */
struct gate_probe {
	int64_t deadline_ms;
	int answer;
	bool wait;   /* block until the deadline, as a gate with no answer would */
};

static int probe_gate(void *ctx, int64_t deadline_ms)
{
	struct gate_probe *g = ctx;
	g->deadline_ms = deadline_ms;
	while (g->wait && clock_mono_ms() < deadline_ms)
		usleep(1000);
	return g->answer;
}

/* A session through a gate after HELLO: its status, and whether any
 * REQUEST reached the agent's end. */
static enum session_status gated(struct gate_probe *g, int64_t deadline_ms, bool *request_sent)
{
	request_true();
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	uint8_t hello[64];
	size_t n = proto_encode_hello(hello, sizeof(hello), "fake");
	assert_int_equal(proto_send(sv[1], PROTO_HELLO, hello, (uint32_t)n), 0);
	struct session_io io = { .cancel_fd = -1, .stdin_fd = -1, .run_id = RUN_ID, .gate = probe_gate, .ctx = g };
	alarm(5);
	enum session_status st = session_run(sv[0], &rq, &io, deadline_ms, &res);
	alarm(0);
	close(sv[0]);
	uint8_t b;
	*request_sent = recv(sv[1], &b, 1, MSG_DONTWAIT) > 0;
	close(sv[1]);
	return st;
}

/* A gate that answers only at the deadline (vmrund's store away) ends the
 * session as a timeout, not later and with nothing sent; one that says no
 * ends it cancelled; either way it was told the session's deadline. */
static void gate_bounded_by_deadline(void **state)
{
	(void)state;
	bool sent = true;
	int64_t t0 = clock_mono_ms();
	struct gate_probe late = { .answer = SESSION_GATE_LATE, .wait = true };
	assert_int_equal(gated(&late, t0 + 200, &sent), SESSION_TIMEOUT);
	assert_int_equal(late.deadline_ms, t0 + 200);
	assert_false(sent);
	struct gate_probe no = { .answer = -1 };
	assert_int_equal(gated(&no, clock_mono_ms() + 5000, &sent), SESSION_CANCELLED);
	assert_false(sent);
	struct gate_probe go = { .answer = 0 };
	assert_int_equal(gated(&go, clock_mono_ms() + 300, &sent), SESSION_TIMEOUT);   /* the agent says nothing more */
	assert_true(sent);
}

/* The agent goes away without reading all stdin: session_run comes back
 * with SESSION_FAILED and why, and its process survives (SIGPIPE is
 * ignored, as vmrun's main does; session_run sends with MSG_NOSIGNAL). */
static void survives_agent_closing(void **state)
{
	(void)state;
	request_true();
	static uint8_t big[1 << 20];
	memset(big, 'x', sizeof(big));
	char path[] = "/tmp/test_session.XXXXXX";
	int in = mkstemp(path);
	assert_true(in >= 0);
	unlink(path);
	send_raw(in, big, sizeof(big));
	assert_int_equal(lseek(in, 0, SEEK_SET), 0);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	uint8_t hello[64];
	size_t n = proto_encode_hello(hello, sizeof(hello), "fake");
	assert_int_equal(proto_send(sv[1], PROTO_HELLO, hello, (uint32_t)n), 0);
	fflush(NULL);
	pid_t agent = fork();
	assert_true(agent >= 0);
	if (agent == 0) {
		/* read the REQUEST's start, let the host fill the socket, go */
		uint8_t buf[256];
		close(sv[0]);
		if (read(sv[1], buf, sizeof(buf)) <= 0)
			_exit(1);
		usleep(100000);
		_exit(0);
	}
	close(sv[1]);
	alarm(10);
	struct session_io io = { .cancel_fd = -1, .stdin_fd = in, .run_id = RUN_ID };
	assert_int_equal(session_run(sv[0], &rq, &io, clock_mono_ms() + 5000, &res), SESSION_FAILED);
	alarm(0);
	assert_string_equal(res.error, "the agent's connection ended before EXIT");
	assert_string_equal(res.agent, "fake");
	int st;
	assert_int_equal(waitpid(agent, &st, 0), agent);
	close(sv[0]);
	close(in);
}

/* An agent on a thread: HELLO, then it takes the REQUEST (decoded into
 * got) and answers with one EXIT of stage 0. */
struct request_agent {
	int fd;
	struct proto_request got;
	int decoded;     /* proto_decode_request's result */
	char err[256];
};

static void *request_agent(void *arg)
{
	struct request_agent *a = arg;
	static struct proto_reader rd;
	proto_reader_init(&rd);
	uint8_t hello[64], ex[PROTO_EXIT_LEN];
	size_t hn = proto_encode_hello(hello, sizeof(hello), "fake");
	a->decoded = -2;
	if (proto_send(a->fd, PROTO_HELLO, hello, (uint32_t)hn) < 0)
		return NULL;
	for (;;) {
		uint16_t type;
		const uint8_t *p;
		uint32_t len;
		int r = proto_reader_next(&rd, &type, &p, &len, a->err, sizeof(a->err));
		if (r < 0)
			return NULL;
		if (r == 1) {
			if (type != PROTO_REQUEST)
				return NULL;
			a->decoded = proto_decode_request(p, len, &a->got, a->err, sizeof(a->err));
			break;
		}
		size_t room;
		uint8_t *dst = proto_reader_space(&rd, &room);
		ssize_t k = read(a->fd, dst, room);
		if (k <= 0)
			return NULL;
		proto_reader_fed(&rd, (size_t)k);
	}
	struct proto_exit e = { .kind = PROTO_END_EXITED };
	proto_encode_exit(&e, ex);
	(void)proto_send(a->fd, PROTO_EXIT, ex, sizeof(ex));
	return NULL;
}

static uint64_t realtime_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* One session against request_agent with run_id; the agent's view in *a. */
static enum session_status session_with_agent(const char *run_id, struct request_agent *a)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	memset(a, 0, sizeof(*a));
	a->fd = sv[1];
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, request_agent, a), 0);
	struct session_io io = { .cancel_fd = -1, .stdin_fd = -1, .run_id = run_id };
	enum session_status st = session_run(sv[0], &rq, &io, clock_mono_ms() + 5000, &res);
	close(sv[0]);   /* ends the agent's read when the session sent nothing */
	pthread_join(t, NULL);
	close(sv[1]);
	return st;
}

/* The REQUEST is made unique as it is sent: a fresh seed each time, the
 * host's CLOCK_REALTIME of then, io's run id; the caller's request is
 * left as it was (its own seed, time and run id are not sent). */
static void request_made_unique(void **state)
{
	(void)state;
	static struct request_agent a1, a2;
	request_true();
	memset(rq.seed, 0x11, sizeof(rq.seed));
	rq.time_ns = 42;
	snprintf(rq.run_id, sizeof(rq.run_id), "dead");
	uint64_t before = realtime_ns();
	enum session_status st = session_with_agent(RUN_ID, &a1);
	uint64_t after = realtime_ns();
	if (st != SESSION_DONE)
		fail_msg("status %d: %s", st, res.error);
	if (a1.decoded != 0)
		fail_msg("the agent could not decode the request (%d): %s", a1.decoded, a1.err);
	assert_string_equal(a1.got.run_id, RUN_ID);
	assert_true(a1.got.time_ns >= before && a1.got.time_ns <= after);
	static const uint8_t caller_seed[PROTO_SEED_LEN] = {
		0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
		0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
	};
	assert_memory_not_equal(a1.got.seed, caller_seed, PROTO_SEED_LEN);
	/* the caller's request is untouched */
	assert_memory_equal(rq.seed, caller_seed, PROTO_SEED_LEN);
	assert_true(rq.time_ns == 42);
	assert_string_equal(rq.run_id, "dead");
	assert_string_equal(a1.got.stage[0].argv[0], "true");
	/* a second session of the same request: another seed, a later time */
	assert_int_equal(session_with_agent("f", &a2), SESSION_DONE);
	assert_int_equal(a2.decoded, 0);
	assert_string_equal(a2.got.run_id, "f");
	assert_memory_not_equal(a1.got.seed, a2.got.seed, PROTO_SEED_LEN);
	assert_true(a2.got.time_ns >= a1.got.time_ns);
}

/* Without a valid run id there is no request to send: the session fails,
 * nothing started. */
static void request_needs_run_id(void **state)
{
	(void)state;
	static struct request_agent a;
	request_true();
	static const char *const bad[] = { NULL, "", "ABC", "0123456789abcdef0123456789abcdef0", "12-3" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(session_with_agent(bad[i], &a), SESSION_FAILED);
		assert_string_equal(res.error, "the run has no valid id for its request");
		assert_int_equal(res.stages, 0);
		assert_int_equal(a.decoded, -2);   /* no REQUEST came */
	}
}

/* A paused sandbox's agent back: RESUME goes out with the time, and only
 * READY, alone, answers it. */
static void resume_wants_ready(void **state)
{
	(void)state;
	struct { uint16_t type; int rc; const char *err; } c[] = {
		{ PROTO_READY, 0, "" },
		{ PROTO_CMD_EXIT, -1, "frame type 13 instead of READY" },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int sv[2];
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		uint8_t buf[PROTO_HDR_LEN + PROTO_CMD_EXIT_LEN];
		static const uint8_t zeros[PROTO_CMD_EXIT_LEN];
		size_t n = put_frame(buf, c[i].type, zeros, c[i].type == PROTO_READY ? 0 : PROTO_CMD_EXIT_LEN);
		assert_int_equal(write(sv[1], buf, n), (ssize_t)n);
		char err[256] = "";
		struct timespec t0;
		clock_gettime(CLOCK_REALTIME, &t0);
		assert_int_equal(session_resume(sv[0], false, clock_mono_ms() + 5000, -1, err, sizeof(err)), c[i].rc);
		assert_non_null(strstr(err, c[i].err));
		uint8_t got[PROTO_HDR_LEN + 8];
		assert_int_equal(read(sv[1], got, sizeof(got)), (ssize_t)sizeof(got));
		uint64_t ns;
		memcpy(&ns, got + PROTO_HDR_LEN, 8);
		assert_int_equal(got[4], PROTO_RESUME);
		assert_true(ns / 1000000000u >= (uint64_t)t0.tv_sec && ns / 1000000000u <= (uint64_t)t0.tv_sec + 5);
		close(sv[0]);
		close(sv[1]);
	}
	/* nothing comes: the deadline */
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	char err[256];
	assert_int_equal(session_resume(sv[0], true, clock_mono_ms() + 100, -1, err, sizeof(err)), -1);
	uint8_t got[PROTO_HDR_LEN + PROTO_RESUME_LEN + PROTO_SEED_LEN];
	assert_int_equal(read(sv[1], got, sizeof(got)), (ssize_t)sizeof(got));   /* a fork's: with a seed */
	assert_non_null(strstr(err, "did not answer in time"));
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(resume_wants_ready),
		cmocka_unit_test(printable_helper),
		cmocka_unit_test(hostile_hello_and_error),
		cmocka_unit_test(stages),
		cmocka_unit_test(scripted_agents),
		cmocka_unit_test(deadline_with_idle_stdin),
		cmocka_unit_test(survives_agent_closing),
		cmocka_unit_test(request_made_unique),
		cmocka_unit_test(request_needs_run_id),
		cmocka_unit_test(gate_bounded_by_deadline),
	};
	return cmocka_run_group_tests_name("session", tests, NULL, NULL);
}
