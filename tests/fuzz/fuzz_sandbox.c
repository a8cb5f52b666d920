/* libFuzzer harness for sandbox mode's frames (guest-agent/proto_sandbox.c),
 * both directions: what the agent decodes from the host (CMD_START,
 * CMD_SIGNAL, FILE_OP) and what the supervisor decodes from a guest that
 * may be hostile (CMD_OUTPUT, CMD_EXIT, FILE_END, LIST's entries). The
 * input is one payload, decoded by every decoder on an exactly sized heap
 * copy (a read past it is caught). What a decoder accepts must hold the
 * promises of proto_sandbox.h:
 *   - CMD_START: 1..PROTO_SB_MAX_ARGS args with a non-empty argv[0], at
 *     most PROTO_SB_MAX_ENV NAME=VALUE grants, argv and env
 *     NULL-terminated, strings NUL-free and at most PROTO_MAX_STR, a cwd
 *     that is NULL or non-empty; re-encoding succeeds and decodes to the
 *     same command, and encodes to the same bytes again;
 *   - FILE_OP: a known op, a path, PATH2 exactly for RENAME, a mode only
 *     for WRITE and MKDIR and within 07777; the same round trip;
 *   - CMD_SIGNAL: a signal in 1..PROTO_MAX_SIGNAL; CMD_OUTPUT: stdout or
 *     stderr, its data inside the payload; CMD_EXIT: stage 0, only known
 *     flags, the code or signal in range; FILE_END: an error in 0..4095,
 *     known flags, an entry only with error 0;
 *   - entries, walked to the end: each name valid, each mode within
 *     PROTO_ENTRY_MODE_BITS and each size an off_t's, each step forward.
 * Build and run: make fuzz-smoke (short) or make fuzz (FUZZ_TIME seconds). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "proto_sandbox.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static struct proto_cmd cmd, cmd2;
static struct proto_file_req fr, fr2;
static uint8_t enc[PROTO_MAX_PAYLOAD], enc2[PROTO_MAX_PAYLOAD];

static void cmd_case(const uint8_t *p, uint32_t n)
{
	char err[256];
	if (proto_decode_cmd(p, n, &cmd, err, sizeof(err)))
		return;
	check(cmd.argc >= 1 && cmd.argc <= PROTO_SB_MAX_ARGS && cmd.argv[0][0] && !cmd.argv[cmd.argc]);
	check(cmd.envc <= PROTO_SB_MAX_ENV && !cmd.env[cmd.envc]);
	for (unsigned i = 0; i < cmd.argc; i++)
		check(strlen(cmd.argv[i]) <= PROTO_MAX_STR);
	for (unsigned i = 0; i < cmd.envc; i++)
		check(proto_valid_env(cmd.env[i], strlen(cmd.env[i])));
	check(!cmd.cwd || cmd.cwd[0]);
	size_t k = proto_encode_cmd(&cmd, enc, sizeof(enc));
	check(k > 0);
	check(proto_decode_cmd(enc, (uint32_t)k, &cmd2, err, sizeof(err)) == 0);
	check(cmd2.id == cmd.id && cmd2.argc == cmd.argc && cmd2.envc == cmd.envc && cmd2.timeout_ms == cmd.timeout_ms);
	check(cmd2.pty_cols == cmd.pty_cols && cmd2.pty_rows == cmd.pty_rows && !cmd.pty_cols == !cmd.pty_rows &&
	      cmd.pty_cols <= PROTO_PTY_MAX && cmd.pty_rows <= PROTO_PTY_MAX);
	check(!cmd.cwd == !cmd2.cwd && (!cmd.cwd || !strcmp(cmd.cwd, cmd2.cwd)));
	for (unsigned i = 0; i < cmd.argc; i++)
		check(!strcmp(cmd.argv[i], cmd2.argv[i]));
	size_t k2 = proto_encode_cmd(&cmd2, enc2, sizeof(enc2));
	check(k2 == k && !memcmp(enc, enc2, k));
}

static void file_req_case(const uint8_t *p, uint32_t n)
{
	char err[256];
	if (proto_decode_file_req(p, n, &fr, err, sizeof(err)))
		return;
	check(fr.op >= PROTO_FILE_READ && fr.op <= PROTO_FILE_OP_LAST && fr.path[0]);
	check((fr.op == PROTO_FILE_RENAME) == (fr.path2[0] != 0));
	check(!fr.mode || ((fr.op == PROTO_FILE_WRITE || fr.op == PROTO_FILE_MKDIR) && fr.mode <= 07777));
	size_t k = proto_encode_file_req(&fr, enc, sizeof(enc));
	check(k > 0);
	check(proto_decode_file_req(enc, (uint32_t)k, &fr2, err, sizeof(err)) == 0);
	check(fr2.id == fr.id && fr2.op == fr.op && fr2.mode == fr.mode && !strcmp(fr2.path, fr.path) &&
	      !strcmp(fr2.path2, fr.path2));
}

static void guest_cases(const uint8_t *p, uint32_t n)
{
	char err[256];
	uint32_t id, sig, len, flags;
	uint16_t stream;
	const uint8_t *d;
	struct proto_exit e;
	struct proto_entry entry;
	int32_t error;
	bool has;
	if (!proto_decode_signal(p, n, &id, &sig, err, sizeof(err)))
		check(sig >= 1 && sig <= PROTO_MAX_SIGNAL);
	uint16_t cols, rows;
	if (!proto_decode_resize(p, n, &id, &cols, &rows, err, sizeof(err)))
		check(cols >= 1 && rows >= 1 && cols <= PROTO_PTY_MAX && rows <= PROTO_PTY_MAX);
	if (!proto_decode_output(p, n, &id, &stream, &d, &len, err, sizeof(err)))
		check((stream == PROTO_STDOUT || stream == PROTO_STDERR) && d >= p && d + len == p + n);
	if (!proto_decode_cmd_exit(p, n, &id, &e, err, sizeof(err))) {
		check(e.stage == 0 && !(e.flags & ~(PROTO_EXIT_FLAGS | PROTO_EXIT_TIMED_OUT)));
		check(e.kind != PROTO_END_EXITED || (e.code >= 0 && e.code <= 255));
		check(e.kind != PROTO_END_SIGNALED || (e.signal >= 1 && e.signal <= PROTO_MAX_SIGNAL));
	}
	if (!proto_decode_file_end(p, n, &id, &error, &flags, &entry, &has, err, sizeof(err))) {
		check(error >= 0 && error <= 4095 && !(flags & ~PROTO_FILE_TRUNCATED));
		check(!has || (error == 0 && proto_valid_name(entry.name, strlen(entry.name))));
	}
	for (uint32_t at = 0; at < n;) {
		uint32_t before = at;
		if (proto_next_entry(p, n, &at, &entry, err, sizeof(err)))
			break;
		check(at > before && at <= n && proto_valid_name(entry.name, strlen(entry.name)) &&
		      !(entry.mode & ~PROTO_ENTRY_MODE_BITS) && entry.size <= (uint64_t)INT64_MAX);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > PROTO_MAX_PAYLOAD)
		return 0;
	uint8_t *p = malloc(size ? size : 1);
	if (!p)
		return 0;
	memcpy(p, data, size);
	cmd_case(p, (uint32_t)size);
	file_req_case(p, (uint32_t)size);
	guest_cases(p, (uint32_t)size);
	free(p);
	return 0;
}
