/* Sandbox mode's frames (guest-agent/proto_sandbox.c): each encoder's
 * bytes decode back to what was encoded, and each decoder refuses what
 * proto_sandbox.h says it refuses, with a reason. Also the REQUEST's
 * SANDBOX field (guest-agent/proto.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "proto.h"
#include "proto_sandbox.h"

static char err[512];
static uint8_t buf[PROTO_MAX_PAYLOAD + 64];

static void sandbox_request(void **state)
{
	(void)state;
	static struct proto_request r, back;
	memset(&r, 0, sizeof(r));
	r.sandbox = true;
	r.max_output = r.nproc = r.nofile = r.fsize = 1;
	r.time_ns = 1;
	snprintf(r.run_id, sizeof(r.run_id), "ab");
	r.allow[r.nallow++] = "/bin/sh";
	size_t n = proto_encode_request(&r, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(proto_decode_request(buf, (uint32_t)n, &back, err, sizeof(err)), 0);
	assert_true(back.sandbox);
	assert_int_equal(back.nstages, 0);
	assert_string_equal(back.allow[0], "/bin/sh");
	/* a sandbox with a stage: refused both ways */
	r.nstages = 1;
	r.stage[0] = (struct proto_stage){ .kind = PROTO_STAGE_RUN, .argc = 1, .argv = { "x" } };
	assert_int_equal(proto_encode_request(&r, buf, sizeof(buf)), 0);
	r.sandbox = false;
	n = proto_encode_request(&r, buf, sizeof(buf));
	memcpy(buf + n, (const uint8_t[]){ PROTO_T_SANDBOX, 0, 0, 0 }, 4);
	assert_int_equal(proto_decode_request(buf, (uint32_t)n + 4, &back, err, sizeof(err)), -1);
	assert_string_equal(err, "a sandbox with 1 stages (none)");
	/* SANDBOX with a length, or twice */
	r.nstages = 0;
	r.sandbox = true;
	n = proto_encode_request(&r, buf, sizeof(buf));
	memcpy(buf + n, (const uint8_t[]){ PROTO_T_SANDBOX, 0, 1, 0, 'x' }, 5);
	assert_int_equal(proto_decode_request(buf, (uint32_t)n + 5, &back, err, sizeof(err)), -1);
	assert_string_equal(err, "SANDBOX field: bad length or repeated");
	memcpy(buf + n, (const uint8_t[]){ PROTO_T_SANDBOX, 0, 0, 0 }, 4);
	assert_int_equal(proto_decode_request(buf, (uint32_t)n + 4, &back, err, sizeof(err)), -1);
	/* neither stages nor SANDBOX */
	r.sandbox = false;
	assert_int_equal(proto_encode_request(&r, buf, sizeof(buf)), 0);
}

static struct proto_cmd cmd, cmd2;

static void cmd_round_trip(void **state)
{
	(void)state;
	memset(&cmd, 0, sizeof(cmd));
	cmd.id = 0xdeadbeef;
	cmd.argv[cmd.argc++] = "python3";
	cmd.argv[cmd.argc++] = "-c";
	cmd.argv[cmd.argc++] = "";
	cmd.env[cmd.envc++] = "A=1";
	cmd.cwd = "sub dir";
	cmd.timeout_ms = 60000;
	size_t n = proto_encode_cmd(&cmd, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(proto_decode_cmd(buf, (uint32_t)n, &cmd2, err, sizeof(err)), 0);
	assert_int_equal(cmd2.id, 0xdeadbeef);
	assert_int_equal(cmd2.argc, 3);
	assert_string_equal(cmd2.argv[2], "");
	assert_null(cmd2.argv[3]);
	assert_string_equal(cmd2.env[0], "A=1");
	assert_null(cmd2.env[1]);
	assert_string_equal(cmd2.cwd, "sub dir");
	assert_int_equal(cmd2.timeout_ms, 60000);
	assert_int_equal(cmd2.pty_cols, 0);
	/* on a terminal */
	cmd.pty_cols = 80;
	cmd.pty_rows = 24;
	n = proto_encode_cmd(&cmd, buf, sizeof(buf));
	assert_int_equal(proto_decode_cmd(buf, (uint32_t)n, &cmd2, err, sizeof(err)), 0);
	assert_int_equal(cmd2.pty_cols, 80);
	assert_int_equal(cmd2.pty_rows, 24);
	cmd.pty_rows = 0;   /* a size is both, or none */
	assert_int_equal(proto_encode_cmd(&cmd, buf, sizeof(buf)), 0);
	cmd.pty_cols = PROTO_PTY_MAX + 1;
	cmd.pty_rows = 1;
	assert_int_equal(proto_encode_cmd(&cmd, buf, sizeof(buf)), 0);
	cmd.pty_cols = cmd.pty_rows = 0;
	/* its own limits */
	cmd.cpu_ms = 1500;
	cmd.memory_kib = 65536;
	n = proto_encode_cmd(&cmd, buf, sizeof(buf));
	assert_int_equal(proto_decode_cmd(buf, (uint32_t)n, &cmd2, err, sizeof(err)), 0);
	assert_int_equal(cmd2.cpu_ms, 1500);
	assert_int_equal(cmd2.memory_kib, 65536);
	cmd.cpu_ms = cmd.memory_kib = 0;
	/* without the optional fields */
	cmd.envc = 0;
	cmd.cwd = NULL;
	cmd.timeout_ms = 0;
	n = proto_encode_cmd(&cmd, buf, sizeof(buf));
	assert_int_equal(proto_decode_cmd(buf, (uint32_t)n, &cmd2, err, sizeof(err)), 0);
	assert_null(cmd2.cwd);
	assert_int_equal(cmd2.timeout_ms, 0);
	assert_int_equal(cmd2.pty_cols, 0);
	assert_int_equal(cmd2.cpu_ms, 0);
	assert_int_equal(cmd2.memory_kib, 0);
	/* what the encoder will not write */
	cmd.argv[0] = "";
	assert_int_equal(proto_encode_cmd(&cmd, buf, sizeof(buf)), 0);
	cmd.argv[0] = "x";
	cmd.env[cmd.envc++] = "1BAD=x";
	assert_int_equal(proto_encode_cmd(&cmd, buf, sizeof(buf)), 0);
	cmd.envc = 0;
	cmd.cwd = "";
	assert_int_equal(proto_encode_cmd(&cmd, buf, sizeof(buf)), 0);
	cmd.cwd = NULL;
	assert_int_equal(proto_encode_cmd(&cmd, buf, 10), 0);   /* does not fit */
}

/* A CMD_START of id 1 with the given fields. */
static uint32_t cmd_bytes(const uint8_t *fields, uint32_t n)
{
	memcpy(buf, (const uint8_t[]){ 1, 0, 0, 0 }, 4);
	memcpy(buf + 4, fields, n);
	return 4 + n;
}

#define REFUSED(why, ...)                                                                       \
	do {                                                                                    \
		static const uint8_t f_[] = { __VA_ARGS__ };                                    \
		assert_int_equal(proto_decode_cmd(buf, cmd_bytes(f_, sizeof(f_)), &cmd2, err, sizeof(err)), -1); \
		if (!strstr(err, why))                                                          \
			fail_msg("reason \"%s\" lacks \"%s\"", err, why);                       \
	} while (0)

static void cmd_refused(void **state)
{
	(void)state;
	assert_int_equal(proto_decode_cmd(buf, 3, &cmd2, err, sizeof(err)), -1);
	REFUSED("without a program");   /* no ARG */
	REFUSED("without a program", PROTO_T_ARG, 0, 0, 0);
	REFUSED("unknown CMD_START field 99", 99, 0, 0, 0);
	REFUSED("with a NUL", PROTO_T_ARG, 0, 2, 0, 'a', 0);
	REFUSED("overruns", PROTO_T_ARG, 0, 9, 0, 'a');
	REFUSED("truncated field header", PROTO_T_ARG, 0, 1);
	REFUSED("TIMEOUT_MS of 0", PROTO_T_ARG, 0, 1, 0, 'a', PROTO_T_TIMEOUT_MS, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	REFUSED("TIMEOUT_MS field", PROTO_T_ARG, 0, 1, 0, 'a', PROTO_T_TIMEOUT_MS, 0, 4, 0, 1, 0, 0, 0);
	REFUSED("repeated", PROTO_T_ARG, 0, 1, 0, 'a', PROTO_T_CWD, 0, 1, 0, 'd', PROTO_T_CWD, 0, 1, 0, 'd');
	REFUSED("of 0 (no limit", PROTO_T_ARG, 0, 1, 0, 'a', PROTO_T_CPU_MS, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	REFUSED("bad length", PROTO_T_ARG, 0, 1, 0, 'a', PROTO_T_MEMORY_KIB, 0, 4, 0, 1, 0, 0, 0);
	REFUSED("repeated", PROTO_T_ARG, 0, 1, 0, 'a', PROTO_T_MEMORY_KIB, 0, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0,
		PROTO_T_MEMORY_KIB, 0, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0);
	REFUSED("empty", PROTO_T_ARG, 0, 1, 0, 'a', PROTO_T_CWD, 0, 0, 0);
	REFUSED("not NAME=VALUE", PROTO_T_ARG, 0, 1, 0, 'a', PROTO_T_ENV, 0, 1, 0, 'A');
	/* one arg past the most */
	uint32_t at = 4;
	for (unsigned i = 0; i <= PROTO_SB_MAX_ARGS; i++) {
		memcpy(buf + at, (const uint8_t[]){ PROTO_T_ARG, 0, 1, 0, 'a' }, 5);
		at += 5;
	}
	assert_int_equal(proto_decode_cmd(buf, at, &cmd2, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "too many"));
	assert_int_equal(proto_decode_cmd(buf, at - 5, &cmd2, err, sizeof(err)), 0);
	assert_int_equal(cmd2.argc, PROTO_SB_MAX_ARGS);
}

static void signals_outputs_exits(void **state)
{
	(void)state;
	uint32_t id, sig, n;
	proto_encode_signal(buf, 7, SIGTERM);
	assert_int_equal(proto_decode_signal(buf, 8, &id, &sig, err, sizeof(err)), 0);
	assert_int_equal(id, 7);
	assert_int_equal(sig, SIGTERM);
	assert_int_equal(proto_decode_signal(buf, 7, &id, &sig, err, sizeof(err)), -1);
	proto_encode_signal(buf, 7, 0);
	assert_int_equal(proto_decode_signal(buf, 8, &id, &sig, err, sizeof(err)), -1);
	proto_encode_signal(buf, 7, PROTO_MAX_SIGNAL + 1);
	assert_int_equal(proto_decode_signal(buf, 8, &id, &sig, err, sizeof(err)), -1);

	/* a terminal's new size */
	uint16_t cols, rows;
	proto_encode_resize(buf, 9, 132, 43);
	assert_int_equal(proto_decode_resize(buf, 8, &id, &cols, &rows, err, sizeof(err)), 0);
	assert_int_equal(id, 9);
	assert_int_equal(cols, 132);
	assert_int_equal(rows, 43);
	assert_int_equal(proto_decode_resize(buf, 7, &id, &cols, &rows, err, sizeof(err)), -1);
	proto_encode_resize(buf, 9, 0, 43);
	assert_int_equal(proto_decode_resize(buf, 8, &id, &cols, &rows, err, sizeof(err)), -1);
	proto_encode_resize(buf, 9, 10, PROTO_PTY_MAX + 1);
	assert_int_equal(proto_decode_resize(buf, 8, &id, &cols, &rows, err, sizeof(err)), -1);

	uint16_t stream;
	const uint8_t *data;
	proto_encode_output_hdr(buf, 3, PROTO_STDERR);
	memcpy(buf + 8, "xyz", 3);
	assert_int_equal(proto_decode_output(buf, 11, &id, &stream, &data, &n, err, sizeof(err)), 0);
	assert_int_equal(id, 3);
	assert_int_equal(stream, PROTO_STDERR);
	assert_int_equal(n, 3);
	assert_memory_equal(data, "xyz", 3);
	assert_int_equal(proto_decode_output(buf, 7, &id, &stream, &data, &n, err, sizeof(err)), -1);
	proto_encode_output_hdr(buf, 3, PROTO_STDIN);
	assert_int_equal(proto_decode_output(buf, 8, &id, &stream, &data, &n, err, sizeof(err)), -1);
	assert_string_equal(err, "CMD_OUTPUT of stream 3");

	struct proto_exit e = { .kind = PROTO_END_SIGNALED, .signal = SIGKILL, .flags = PROTO_EXIT_TIMED_OUT | 1 },
			  back;
	proto_encode_cmd_exit(buf, 9, &e);
	assert_int_equal(proto_decode_cmd_exit(buf, PROTO_CMD_EXIT_LEN, &id, &back, err, sizeof(err)), 0);
	assert_int_equal(id, 9);
	assert_memory_equal(&back, &e, sizeof(e));
	assert_int_equal(proto_decode_cmd_exit(buf, PROTO_CMD_EXIT_LEN - 1, &id, &back, err, sizeof(err)), -1);
	e.flags = 32;
	proto_encode_cmd_exit(buf, 9, &e);
	assert_int_equal(proto_decode_cmd_exit(buf, PROTO_CMD_EXIT_LEN, &id, &back, err, sizeof(err)), -1);
	e.flags = 0;
	e.stage = 1;
	proto_encode_cmd_exit(buf, 9, &e);
	assert_int_equal(proto_decode_cmd_exit(buf, PROTO_CMD_EXIT_LEN, &id, &back, err, sizeof(err)), -1);
	assert_string_equal(err, "CMD_EXIT of stage 1");
	e = (struct proto_exit){ .kind = PROTO_END_EXITED, .code = 256 };
	proto_encode_cmd_exit(buf, 9, &e);
	assert_int_equal(proto_decode_cmd_exit(buf, PROTO_CMD_EXIT_LEN, &id, &back, err, sizeof(err)), -1);
}

static struct proto_file_req fr, fr2;

static void file_reqs(void **state)
{
	(void)state;
	fr = (struct proto_file_req){ .id = 5, .op = PROTO_FILE_RENAME };
	snprintf(fr.path, sizeof(fr.path), "a");
	snprintf(fr.path2, sizeof(fr.path2), "/workspace/b");
	size_t n = proto_encode_file_req(&fr, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(proto_decode_file_req(buf, (uint32_t)n, &fr2, err, sizeof(err)), 0);
	assert_int_equal(fr2.id, 5);
	assert_int_equal(fr2.op, PROTO_FILE_RENAME);
	assert_string_equal(fr2.path, "a");
	assert_string_equal(fr2.path2, "/workspace/b");
	fr = (struct proto_file_req){ .id = 6, .op = PROTO_FILE_WRITE, .mode = 0755 };
	snprintf(fr.path, sizeof(fr.path), "x");
	n = proto_encode_file_req(&fr, buf, sizeof(buf));
	assert_int_equal(proto_decode_file_req(buf, (uint32_t)n, &fr2, err, sizeof(err)), 0);
	assert_int_equal(fr2.mode, 0755);
	/* the encoder's rules */
	fr.op = PROTO_FILE_READ;   /* a mode on a READ */
	assert_int_equal(proto_encode_file_req(&fr, buf, sizeof(buf)), 0);
	fr.mode = 0;
	snprintf(fr.path2, sizeof(fr.path2), "y");   /* PATH2 on a READ */
	assert_int_equal(proto_encode_file_req(&fr, buf, sizeof(buf)), 0);
	fr.path2[0] = '\0';
	fr.op = PROTO_FILE_OP_LAST + 1;
	assert_int_equal(proto_encode_file_req(&fr, buf, sizeof(buf)), 0);
	fr.op = PROTO_FILE_STAT;
	fr.path[0] = '\0';
	assert_int_equal(proto_encode_file_req(&fr, buf, sizeof(buf)), 0);
	/* the decoder's */
	const struct { uint32_t op; uint8_t f[16]; uint32_t n; const char *why; } bad[] = {
		{ 0, { PROTO_T_PATH, 0, 1, 0, 'a' }, 5, "unknown op 0" },
		{ PROTO_FILE_STAT, { 0 }, 0, "without a PATH" },
		{ PROTO_FILE_STAT, { PROTO_T_PATH, 0, 0, 0 }, 4, "empty" },
		{ PROTO_FILE_STAT, { PROTO_T_PATH, 0, 1, 0, 'a', PROTO_T_PATH, 0, 1, 0, 'b' }, 10, "repeated" },
		{ PROTO_FILE_STAT, { PROTO_T_PATH, 0, 1, 0, 'a', PROTO_T_PATH2, 0, 1, 0, 'b' }, 10, "RENAME's only" },
		{ PROTO_FILE_RENAME, { PROTO_T_PATH, 0, 1, 0, 'a' }, 5, "RENAME's only" },
		{ PROTO_FILE_READ, { PROTO_T_PATH, 0, 1, 0, 'a', PROTO_T_MODE, 0, 4, 0, 0xa4, 1, 0, 0 }, 13, "MODE is" },
		{ PROTO_FILE_WRITE, { PROTO_T_PATH, 0, 1, 0, 'a', PROTO_T_MODE, 0, 4, 0, 0, 0x10, 0, 0 }, 13, "outside" },
		{ PROTO_FILE_WRITE, { PROTO_T_PATH, 0, 1, 0, 'a', PROTO_T_MODE, 0, 4, 0, 0, 0, 0, 0 }, 13, "outside" },
		{ PROTO_FILE_WRITE, { PROTO_T_PATH, 0, 2, 0, 'a', 0 }, 6, "NUL" },
		{ PROTO_FILE_WRITE, { PROTO_T_ARG, 0, 1, 0, 'a' }, 5, "unknown FILE_OP field 1" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(buf, (const uint8_t[]){ 1, 0, 0, 0 }, 4);
		memcpy(buf + 4, &bad[i].op, 4);
		memcpy(buf + 8, bad[i].f, bad[i].n);
		assert_int_equal(proto_decode_file_req(buf, 8 + bad[i].n, &fr2, err, sizeof(err)), -1);
		if (!strstr(err, bad[i].why))
			fail_msg("case %zu: reason \"%s\" lacks \"%s\"", i, err, bad[i].why);
	}
}

static void entries(void **state)
{
	(void)state;
	struct proto_entry e = { .mode = S_IFDIR | 0755, .size = 4096, .mtime_ns = -5 }, back;
	snprintf(e.name, sizeof(e.name), "dir");
	size_t at = proto_put_entry(buf, sizeof(buf), 0, &e);
	assert_int_equal(at, PROTO_ENTRY_HDR + 3);
	snprintf(e.name, sizeof(e.name), "%s", "f");
	at = proto_put_entry(buf, sizeof(buf), at, &e);
	uint32_t pos = 0;
	assert_int_equal(proto_next_entry(buf, (uint32_t)at, &pos, &back, err, sizeof(err)), 0);
	assert_string_equal(back.name, "dir");
	assert_int_equal(back.mtime_ns, -5);
	assert_int_equal(proto_next_entry(buf, (uint32_t)at, &pos, &back, err, sizeof(err)), 0);
	assert_string_equal(back.name, "f");
	assert_int_equal(pos, at);
	assert_int_equal(proto_next_entry(buf, (uint32_t)at, &pos, &back, err, sizeof(err)), -1);
	/* names */
	const char *badnames[] = { "", ".", "..", "a/b" };
	for (size_t i = 0; i < sizeof(badnames) / sizeof(badnames[0]); i++) {
		snprintf(e.name, sizeof(e.name), "%s", badnames[i]);
		assert_int_equal(proto_put_entry(buf, sizeof(buf), 0, &e), 0);
		assert_false(proto_valid_name(badnames[i], strlen(badnames[i])));
	}
	assert_true(proto_valid_name("...", 3));
	assert_false(proto_valid_name("a\0b", 3));
	char longest[PROTO_NAME_MAX + 2];
	memset(longest, 'n', sizeof(longest));
	assert_true(proto_valid_name(longest, PROTO_NAME_MAX));
	assert_false(proto_valid_name(longest, PROTO_NAME_MAX + 1));
	/* a hostile entry: a name that overruns, a reserved word set, a slash */
	snprintf(e.name, sizeof(e.name), "ok");
	at = proto_put_entry(buf, sizeof(buf), 0, &e);
	pos = 0;
	assert_int_equal(proto_next_entry(buf, (uint32_t)at - 1, &pos, &back, err, sizeof(err)), -1);
	buf[4] = 1;
	pos = 0;
	assert_int_equal(proto_next_entry(buf, (uint32_t)at, &pos, &back, err, sizeof(err)), -1);
	buf[4] = 0;
	buf[PROTO_ENTRY_HDR] = '/';
	pos = 0;
	assert_int_equal(proto_next_entry(buf, (uint32_t)at, &pos, &back, err, sizeof(err)), -1);
	pos = (uint32_t)at + 1;   /* past the end */
	assert_int_equal(proto_next_entry(buf, (uint32_t)at, &pos, &back, err, sizeof(err)), -1);
	buf[PROTO_ENTRY_HDR] = 'o';
	/* numbers no stat can give: a mode past its bits, a size past off_t */
	const uint32_t bad_mode[] = { PROTO_ENTRY_MODE_BITS + 1, UINT32_MAX };
	for (size_t i = 0; i < 2; i++) {
		e.mode = bad_mode[i];
		at = proto_put_entry(buf, sizeof(buf), 0, &e);
		pos = 0;
		assert_int_equal(proto_next_entry(buf, (uint32_t)at, &pos, &back, err, sizeof(err)), -1);
	}
	e.mode = S_IFREG | 07777;
	e.size = (uint64_t)INT64_MAX;
	at = proto_put_entry(buf, sizeof(buf), 0, &e);
	pos = 0;
	assert_int_equal(proto_next_entry(buf, (uint32_t)at, &pos, &back, err, sizeof(err)), 0);
	e.size = (uint64_t)INT64_MAX + 1;
	at = proto_put_entry(buf, sizeof(buf), 0, &e);
	pos = 0;
	assert_int_equal(proto_next_entry(buf, (uint32_t)at, &pos, &back, err, sizeof(err)), -1);
}

static void file_ends(void **state)
{
	(void)state;
	struct proto_entry e = { .mode = S_IFREG | 0644, .size = 11 }, back;
	snprintf(e.name, sizeof(e.name), "a.txt");
	uint32_t id, flags;
	int32_t error;
	bool has;
	size_t n = proto_encode_file_end(buf, sizeof(buf), 4, 0, 0, &e);
	assert_int_equal(proto_decode_file_end(buf, (uint32_t)n, &id, &error, &flags, &back, &has, err, sizeof(err)), 0);
	assert_true(has);
	assert_string_equal(back.name, "a.txt");
	assert_int_equal(back.size, 11);
	n = proto_encode_file_end(buf, sizeof(buf), 4, ENOENT, 0, &e);   /* an error sends no entry */
	assert_int_equal(n, PROTO_FILE_END_LEN);
	assert_int_equal(proto_decode_file_end(buf, (uint32_t)n, &id, &error, &flags, &back, &has, err, sizeof(err)), 0);
	assert_false(has);
	assert_int_equal(error, ENOENT);
	n = proto_encode_file_end(buf, sizeof(buf), 4, 0, PROTO_FILE_TRUNCATED, NULL);
	assert_int_equal(proto_decode_file_end(buf, (uint32_t)n, &id, &error, &flags, &back, &has, err, sizeof(err)), 0);
	assert_int_equal(flags, PROTO_FILE_TRUNCATED);
	/* hostile: a negative or huge error, unknown flags, an error with an
	 * entry, bytes after the entry, too short */
	const int32_t bad_err[] = { -1, 4096 };
	for (size_t i = 0; i < 2; i++) {
		proto_encode_file_end(buf, sizeof(buf), 4, 0, 0, NULL);
		memcpy(buf + 4, &bad_err[i], 4);
		assert_int_equal(proto_decode_file_end(buf, PROTO_FILE_END_LEN, &id, &error, &flags, &back, &has, err,
						       sizeof(err)), -1);
	}
	proto_encode_file_end(buf, sizeof(buf), 4, 0, 2, NULL);
	assert_int_equal(proto_decode_file_end(buf, PROTO_FILE_END_LEN, &id, &error, &flags, &back, &has, err, sizeof(err)),
			 -1);
	n = proto_encode_file_end(buf, sizeof(buf), 4, 0, 0, &e);
	int32_t eio = EIO;
	memcpy(buf + 4, &eio, 4);
	assert_int_equal(proto_decode_file_end(buf, (uint32_t)n, &id, &error, &flags, &back, &has, err, sizeof(err)), -1);
	n = proto_encode_file_end(buf, sizeof(buf), 4, 0, 0, &e);
	assert_int_equal(proto_decode_file_end(buf, (uint32_t)n + 1, &id, &error, &flags, &back, &has, err, sizeof(err)),
			 -1);
	id = 0;
	assert_int_equal(proto_decode_file_end(buf, PROTO_FILE_END_LEN - 1, &id, &error, &flags, &back, &has, err,
					       sizeof(err)), -1);
	assert_int_equal(id, 4);   /* refused, but its operation is known: it can end failed */
	assert_int_equal(proto_encode_file_end(buf, PROTO_FILE_END_LEN + 4, 4, 0, 0, &e), 0);   /* no room */
}

static void ids_and_types(void **state)
{
	(void)state;
	uint32_t id, n;
	const uint8_t *rest;
	assert_int_equal(proto_sb_put_id(buf, 77, "ab", 2), 6);
	assert_int_equal(proto_sb_split(buf, 6, &id, &rest, &n), 0);
	assert_int_equal(id, 77);
	assert_int_equal(n, 2);
	assert_memory_equal(rest, "ab", 2);
	assert_int_equal(proto_sb_split(buf, 3, &id, &rest, &n), -1);
	assert_false(proto_sb_type(PROTO_ERROR));
	assert_true(proto_sb_type(PROTO_READY));
	assert_true(proto_sb_type(PROTO_FILE_END));
	assert_true(proto_sb_type(PROTO_RESUME));
	assert_true(proto_sb_type(PROTO_CMD_RESIZE));
	assert_false(proto_sb_type(PROTO_TYPE_LAST + 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sandbox_request), cmocka_unit_test(cmd_round_trip), cmocka_unit_test(cmd_refused),
		cmocka_unit_test(signals_outputs_exits), cmocka_unit_test(file_reqs), cmocka_unit_test(entries),
		cmocka_unit_test(file_ends), cmocka_unit_test(ids_and_types),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
