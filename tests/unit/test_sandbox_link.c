/* The supervisor's side of a hostile guest (host/sandbox/link.c): what
 * the agent sends is checked and bounded before it is kept. Output past
 * max_output, for a command that is not running, or with a bad stream;
 * exits twice; a READ past its window, a LIST past its most or with a bad
 * entry (it ends EIO); an entry where none belongs, or a forged one (its
 * operation ends EIO); sizes, names and counts that lie;
 * an ERROR. Each is counted in guest_faults (or cut), and the sandbox's
 * state goes on. Also the idempotency keys and command records' room. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor.h"

static char dir[64];
static struct sbx S;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_sandbox_link.XXXXXX");
	if (!mkdtemp(dir) || sbx_init(&S, dir))
		return -1;
	S.max_output = 100;
	S.state = SBX_RUNNING;
	pthread_mutex_lock(&S.mu);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	pthread_mutex_unlock(&S.mu);
	sbx_release(&S);
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	return 0;
}

static uint8_t frame[PROTO_MAX_PAYLOAD];

static void output(uint32_t id, uint32_t stream, const char *data, size_t n)
{
	proto_encode_output_hdr(frame, id, (uint16_t)stream);
	memcpy(frame + 8, data, n);
	assert_int_equal(sbx_agent_frame(&S, PROTO_CMD_OUTPUT, frame, (uint32_t)(8 + n)), 0);
}

static void cmd_exit(uint32_t id, const struct proto_exit *e)
{
	proto_encode_cmd_exit(frame, id, e);
	assert_int_equal(sbx_agent_frame(&S, PROTO_CMD_EXIT, frame, PROTO_CMD_EXIT_LEN), 0);
}

static void data(uint32_t id, const void *p, size_t n)
{
	uint32_t len = proto_sb_put_id(frame, id, p, (uint32_t)n);
	assert_int_equal(sbx_agent_frame(&S, PROTO_FILE_DATA, frame, len), 0);
}

static void end(uint32_t id, int32_t error, const struct proto_entry *e)
{
	size_t n = proto_encode_file_end(frame, sizeof(frame), id, error, 0, e);
	assert_int_equal(sbx_agent_frame(&S, PROTO_FILE_END, frame, (uint32_t)n), 0);
}

static void commands(void **state)
{
	(void)state;
	char err[128];
	struct sbx_cmd *c = sbx_cmd_new(&S, err, sizeof(err));
	assert_non_null(c);
	static char big[300];
	memset(big, 'x', sizeof(big));
	output(c->id, PROTO_STDOUT, big, 60);
	output(c->id, PROTO_STDOUT, big, 60);   /* 20 of it past max_output */
	output(c->id, PROTO_STDERR, "e", 1);
	assert_int_equal(c->kept[0], 100);
	assert_int_equal(c->kept[1], 1);
	assert_int_equal(S.guest_faults, 0);
	/* a stream that is not one, a command that is not there */
	proto_encode_output_hdr(frame, c->id, 3);
	assert_int_equal(sbx_agent_frame(&S, PROTO_CMD_OUTPUT, frame, 9), 0);
	output(999, PROTO_STDOUT, "x", 1);
	assert_int_equal(S.guest_faults, 2);
	/* the exit: its counts say more came than was kept, so it is flagged */
	struct proto_exit e = { .kind = PROTO_END_EXITED, .code = 0, .stdout_bytes = 5000, .stderr_bytes = 1 };
	cmd_exit(c->id, &e);
	assert_true(c->ended);
	assert_true(c->exit.flags & PROTO_EXIT_STDOUT_TRUNCATED);
	assert_false(c->exit.flags & PROTO_EXIT_STDERR_TRUNCATED);
	assert_int_equal(S.running, 0);
	/* a second exit, output after the end, a malformed exit */
	cmd_exit(c->id, &e);
	output(c->id, PROTO_STDOUT, "late", 4);
	e.code = 300;
	cmd_exit(c->id, &e);
	assert_int_equal(S.guest_faults, 5);
	assert_int_equal(S.running, 0);
	/* an unknown type, a frame type of the run's */
	assert_int_equal(sbx_agent_frame(&S, PROTO_HELLO, frame, 0), 0);
	assert_int_equal(S.guest_faults, 6);
	/* ERROR ends the sandbox, with the agent's words made printable */
	assert_int_equal(sbx_agent_frame(&S, PROTO_ERROR, (const uint8_t *)"bad\x1b[31m", 8), -1);
	assert_int_equal(S.state, SBX_STOPPING);
	assert_string_equal(S.reason, "the agent failed: bad?[31m");
}

static void reads(void **state)
{
	(void)state;
	struct sbx_fop *f = sbx_fop_new(&S, PROTO_FILE_READ);
	assert_non_null(f);
	static uint8_t chunk[PROTO_SB_CHUNK];
	for (unsigned i = 0; i < PROTO_READ_WINDOW / PROTO_SB_CHUNK; i++)
		data(f->id, chunk, sizeof(chunk));
	assert_false(f->dropping);
	size_t within = f->len;
	/* its asker takes half: that much more may come */
	f->taken = within / 2;
	data(f->id, chunk, sizeof(chunk));
	assert_false(f->dropping);
	/* past the window: cut, the read ends EIO whatever the guest says */
	for (int i = 0; i < 40 && !f->dropping; i++)
		data(f->id, chunk, sizeof(chunk));
	assert_true(f->dropping);
	assert_true(f->len - f->taken <= PROTO_READ_WINDOW);
	unsigned long faults = S.guest_faults;
	data(f->id, chunk, sizeof(chunk));   /* dropped, not kept, not counted again */
	assert_int_equal(S.guest_faults, faults);
	end(f->id, 0, NULL);
	assert_true(f->ended);
	assert_int_equal(f->error, EIO);
	sbx_fop_free(f);
	/* data for an operation that is not under way, or one that takes none */
	data(12345, "x", 1);
	struct sbx_fop *st = sbx_fop_new(&S, PROTO_FILE_STAT);
	data(st->id, "x", 1);
	assert_int_equal(S.guest_faults, faults + 2);
	/* STAT ends with no entry, or another operation with one: EIO */
	end(st->id, 0, NULL);
	assert_int_equal(st->error, EIO);
	assert_false(st->has_entry);
	sbx_fop_free(st);
	struct sbx_fop *mk = sbx_fop_new(&S, PROTO_FILE_MKDIR);
	struct proto_entry e = { .mode = 0100644, .size = 1 };
	snprintf(e.name, sizeof(e.name), "x");
	end(mk->id, 0, &e);
	assert_int_equal(mk->error, EIO);
	sbx_fop_free(mk);
	/* a STAT's forged entry (a name with a slash): the STAT ends EIO at
	 * once, and the honest end after it is a fault, not an answer */
	struct sbx_fop *fs = sbx_fop_new(&S, PROTO_FILE_STAT);
	snprintf(e.name, sizeof(e.name), "a_b");
	size_t n = proto_encode_file_end(frame, sizeof(frame), fs->id, 0, 0, &e);
	frame[PROTO_FILE_END_LEN + PROTO_ENTRY_HDR + 1] = '/';
	faults = S.guest_faults;
	assert_int_equal(sbx_agent_frame(&S, PROTO_FILE_END, frame, (uint32_t)n), 0);
	assert_true(fs->ended);
	assert_int_equal(fs->error, EIO);
	assert_false(fs->has_entry);
	end(fs->id, 0, &e);
	assert_int_equal(S.guest_faults, faults + 2);
	sbx_fop_free(fs);
	/* a second end is a fault, not a second answer */
	struct sbx_fop *rm = sbx_fop_new(&S, PROTO_FILE_REMOVE);
	uint32_t id = rm->id;
	end(id, ENOENT, NULL);
	assert_int_equal(rm->error, ENOENT);
	faults = S.guest_faults;
	end(id, 0, NULL);
	assert_int_equal(rm->error, ENOENT);
	assert_int_equal(S.guest_faults, faults + 1);
	sbx_fop_free(rm);
}

static void lists(void **state)
{
	(void)state;
	struct sbx_fop *f = sbx_fop_new(&S, PROTO_FILE_LIST);
	uint8_t buf[PROTO_MAX_PAYLOAD];
	struct proto_entry e = { .mode = 040755 };
	memset(e.name, 'n', PROTO_NAME_MAX);
	e.name[PROTO_NAME_MAX] = '\0';
	size_t at = 0, next;
	while ((next = proto_put_entry(buf, sizeof(buf), at, &e)))
		at = next;
	/* a bad entry in the middle of good ones: the frame is refused whole */
	unsigned long faults = S.guest_faults;
	uint8_t bad[PROTO_ENTRY_HDR + 3];
	memcpy(bad, buf, PROTO_ENTRY_HDR);
	uint16_t three = 3;
	memcpy(bad + 24, &three, 2);
	memcpy(bad + PROTO_ENTRY_HDR, "a/b", 3);
	data(f->id, bad, sizeof(bad));
	assert_int_equal(S.guest_faults, faults + 1);
	assert_int_equal(f->len, 0);
	assert_true(f->dropping);   /* the listing it lied in ends EIO, not short */
	end(f->id, 0, NULL);
	assert_int_equal(f->error, EIO);
	sbx_fop_free(f);
	f = sbx_fop_new(&S, PROTO_FILE_LIST);
	/* more entries than a listing may hold: cut at SBX_LIST_MAX_BYTES */
	for (int i = 0; i < 40 && !f->dropping; i++)
		data(f->id, buf, at);
	assert_true(f->dropping);
	assert_true(f->len <= SBX_LIST_MAX_BYTES);
	sbx_fop_free(f);
}

static void room(void **state)
{
	(void)state;
	char err[128];
	/* the agent's most at once */
	for (unsigned i = 0; i < SANDBOX_MAX_CMDS_GUEST; i++)
		assert_non_null(sbx_cmd_new(&S, err, sizeof(err)));
	assert_null(sbx_cmd_new(&S, err, sizeof(err)));
	assert_non_null(strstr(err, "running already"));
	/* the ended ones make room; one still read (a reference) does not go */
	for (unsigned i = 0; i < S.ncmd; i++) {
		S.cmd[i]->ended = true;
		close(S.cmd[i]->out_fd);
		S.cmd[i]->out_fd = -1;
	}
	S.running = 0;
	S.cmd[0]->refs = 1;
	while (S.ncmd < SBX_MAX_CMDS) {
		struct sbx_cmd *c = sbx_cmd_new(&S, err, sizeof(err));
		assert_non_null(c);
		c->ended = true;
		S.running--;
	}
	struct sbx_cmd *keep = S.cmd[0];
	struct sbx_cmd *c = sbx_cmd_new(&S, err, sizeof(err));
	assert_non_null(c);
	assert_ptr_equal(S.cmd[0], keep);   /* the second oldest went */
	assert_null(sbx_cmd_of(&S, 2));
	assert_non_null(sbx_cmd_of(&S, 1));
	keep->refs = 0;
	/* keys */
	assert_int_equal(sbx_key_add(&S, "k1", "h1", 7), 0);
	assert_int_equal(sbx_key_of(&S, "k1")->id, 7);
	assert_null(sbx_key_of(&S, "k2"));
}

/* Pausing (pause.c): PAUSED and READY only when asked for; the life
 * left kept across a pause; a pause that file operations hold up is
 * called off, the sandbox going on. */
static void pausing(void **state)
{
	(void)state;
	assert_int_equal(sbx_agent_frame(&S, PROTO_PAUSED, frame, 0), 0);
	assert_int_equal(sbx_agent_frame(&S, PROTO_READY, frame, 0), 0);
	assert_int_equal(S.guest_faults, 2);
	S.deadline_ms = sbx_realtime_ms() + 10000;
	sbx_pause_begin(&S, "");
	assert_int_equal(S.state, SBX_PAUSING);
	assert_true(S.left_ms > 9000 && S.left_ms <= 10000);
	assert_int_equal(sbx_agent_frame(&S, PROTO_PAUSED, frame, 0), 0);   /* before PAUSE went out */
	assert_int_equal(S.guest_faults, 3);
	assert_false(S.agent_paused);
	S.pause_sent = true;
	assert_int_equal(sbx_agent_frame(&S, PROTO_PAUSED, frame, 0), 0);
	assert_true(S.agent_paused);
	assert_int_equal(S.guest_faults, 3);

	/* resumed: what it had left, the resume's own timeout_s, or (its time
	 * ran out) its configured one */
	S.timeout_s = 7;
	sbx_resumed(&S);
	int64_t left = S.deadline_ms - sbx_realtime_ms();
	assert_true(left > 9000 && left <= 10000 && S.pauses == 1);
	S.resume_timeout_s = 5;
	sbx_resumed(&S);
	left = S.deadline_ms - sbx_realtime_ms();
	assert_true(left > 4000 && left <= 5000 && S.resume_timeout_s == 0);
	S.left_ms = 0;
	sbx_resumed(&S);
	left = S.deadline_ms - sbx_realtime_ms();
	assert_true(left > 6000 && left <= 7000 && S.pauses == 3);

	/* a file operation that does not end: the pause waits, then is called off */
	S.state = SBX_RUNNING;
	struct sbx_fop *f = sbx_fop_new(&S, PROTO_FILE_READ);
	assert_non_null(f);
	sbx_pause_begin(&S, "");
	sbx_pause_step(&S);
	assert_int_equal(S.state, SBX_PAUSING);
	assert_false(S.pause_sent);
	S.pause_asked_ms -= SBX_PAUSE_WAIT_MS + 1;
	sbx_pause_step(&S);
	assert_int_equal(S.state, SBX_RUNNING);
	assert_non_null(strstr(S.pause_error, "file operations"));
	sbx_fop_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(commands, setup, teardown),
		cmocka_unit_test_setup_teardown(reads, setup, teardown),
		cmocka_unit_test_setup_teardown(lists, setup, teardown),
		cmocka_unit_test_setup_teardown(room, setup, teardown),
		cmocka_unit_test_setup_teardown(pausing, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
