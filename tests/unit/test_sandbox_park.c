/* A parked sandbox's own table (host/sandbox/park.c): its times, its
 * commands (running and ended, their exits and kept bytes) and its
 * Idempotency-Keys survive sbx_park_meta then sbx_park_load; a table of
 * another version, with a command id past next_cmd, twice the same id, a
 * key of no command or a bad hash is refused; and sbx_unpark checks the
 * table's SHA-256 and each output's before it takes anything. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hex.h"
#include "spool.h"
#include "supervisor.h"
#include "tree.h"

#define HASH "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

/* A sandbox in a new directory with two commands: 1 ended (exit 3), 2
 * running, with output in their files, and a key for 1. */
static void fill(struct sbx *s, char *dir)
{
	assert_non_null(mkdtemp(dir));
	assert_int_equal(sbx_init(s, dir), 0);
	char err[128];
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < 2; i++) {
		struct sbx_cmd *c = sbx_cmd_new(s, err, sizeof(err));
		assert_non_null(c);
		c->request = json_pack("{s:[s,s]}", "argv", "echo", i ? "two" : "one");
		assert_int_equal(spool_append(c->out_fd, PROTO_STAGE_RUN, PROTO_STDOUT, (const uint8_t *)(i ? "two\n" : "one\n"), 4), 0);
		c->kept[0] = 4;
	}
	struct sbx_cmd *none = sbx_cmd_new(s, err, sizeof(err));   /* a record with no request */
	assert_non_null(none);
	none->ended = true;
	close(none->out_fd);
	none->out_fd = -1;
	s->cmd[0]->ended = true;
	s->cmd[0]->ended_ms = 5000;
	s->cmd[0]->exit = (struct proto_exit){ .kind = PROTO_END_EXITED, .code = 3, .cpu_ms = 7, .stdout_bytes = 4 };
	close(s->cmd[0]->out_fd);
	s->cmd[0]->out_fd = -1;
	s->running = 1;   /* 2 */
	assert_int_equal(sbx_key_add(s, "k-1", HASH, 1), 0);
	s->created_ms = 1000;
	s->started_ms = 2000;
	s->stopped_ms = 6000;
	s->left_ms = 123000;
	s->pauses = 2;
	pthread_mutex_unlock(&s->mu);
}

/* meta with every command's sha256 (which sbx_park adds as it copies). */
static json_t *meta_of(struct sbx *s)
{
	pthread_mutex_lock(&s->mu);
	json_t *m = sbx_park_meta(s);
	pthread_mutex_unlock(&s->mu);
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(m, "commands"), i, c)
		json_object_set_new(c, "sha256", json_string(HASH));
	return m;
}

static void round_trip(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_sandbox_park.XXXXXX", err[300];
	static struct sbx s, t;
	fill(&s, dir);
	json_t *m = meta_of(&s);
	assert_int_equal(sbx_init(&t, dir), 0);
	assert_int_equal(sbx_park_load(&t, m, err, sizeof(err)), 0);
	assert_int_equal(t.ncmd, 3);
	assert_int_equal(t.running, 1);
	assert_int_equal(t.next_cmd, 4);
	assert_int_equal(t.created_ms, 1000);
	assert_int_equal(t.started_ms, 2000);
	assert_int_equal(t.stopped_ms, 6000);
	assert_int_equal(t.left_ms, 123000);
	assert_int_equal(t.pauses, 2);
	struct sbx_cmd *one = sbx_cmd_of(&t, 1), *two = sbx_cmd_of(&t, 2);
	assert_true(one->ended);
	assert_int_equal(one->exit.kind, PROTO_END_EXITED);
	assert_int_equal(one->exit.code, 3);
	assert_int_equal(one->exit.cpu_ms, 7);
	assert_int_equal(one->ended_ms, 5000);
	assert_int_equal(one->kept[0], 4);
	assert_int_equal(one->out_fd, -1);
	assert_false(two->ended);
	assert_true(json_equal(two->request, s.cmd[1]->request));
	assert_null(sbx_cmd_of(&t, 3)->request);   /* a refused one's record, kept without one */
	const struct sbx_key *k = sbx_key_of(&t, "k-1");
	assert_non_null(k);
	assert_int_equal(k->id, 1);
	json_decref(m);
	sbx_release(&t);
	sbx_release(&s);
	tree_remove(dir, 3);
}

/* Each change of a good table that load must refuse. */
static void refused(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_sandbox_park.XXXXXX", err[300];
	static struct sbx s;
	fill(&s, dir);
	const char *why[] = { "version", "id past next_cmd", "same id twice", "key past next_cmd", "bad hash",
			      "a request not an object" };
	for (size_t i = 0; i < sizeof(why) / sizeof(why[0]); i++) {
		json_t *m = meta_of(&s), *cmds = json_object_get(m, "commands");
		json_t *key = json_array_get(json_object_get(m, "keys"), 0);
		switch (i) {
		case 0: json_object_set_new(m, "version", json_integer(SBX_PARK_VERSION + 1)); break;
		case 1: json_object_set_new(json_array_get(cmds, 1), "id", json_integer(3)); break;
		case 2: json_object_set_new(json_array_get(cmds, 1), "id", json_integer(1)); break;
		case 3: json_object_set_new(key, "id", json_integer(9)); break;
		case 4: json_object_set_new(key, "hash", json_string("xyz")); break;
		case 5: json_object_set_new(json_array_get(cmds, 0), "request", json_string("no")); break;
		}
		static struct sbx t;
		assert_int_equal(sbx_init(&t, dir), 0);
		err[0] = '\0';
		if (sbx_park_load(&t, m, err, sizeof(err)) != -1 || !err[0])
			fail_msg("%s: not refused", why[i]);
		json_decref(m);
		sbx_release(&t);
	}
	sbx_release(&s);
	tree_remove(dir, 3);
}

/* A parked directory as sbx_park leaves it, written by hand: the table,
 * its sum, and each output. */
static void write_parked(struct sbx *s, const char *p)
{
	char path[PATH_MAX + 64], sum[66];
	json_t *m = meta_of(s);
	snprintf(path, sizeof(path), "%s/cmds", p);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(mkdir(path, 0700), 0);
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(m, "commands"), i, c) {
		char from[PATH_MAX + 64], to[PATH_MAX + 64];
		json_int_t id = json_integer_value(json_object_get(c, "id"));
		snprintf(from, sizeof(from), "%s/cmds/%lld.out", s->dir, (long long)id);
		snprintf(to, sizeof(to), "%s/cmds/%lld.out", p, (long long)id);
		uint8_t *b;
		size_t n;
		assert_int_equal(spool_read_file(AT_FDCWD, from, 1 << 20, &b, &n), 0);
		assert_int_equal(spool_write_file(to, b, n, true, 0600), 0);
		free(b);
		assert_int_equal(sha256_file_hex(to, sum), 0);
		json_object_set_new(c, "sha256", json_string(sum));
	}
	char *text = json_dumps(m, JSON_COMPACT);
	snprintf(path, sizeof(path), "%s/" SBX_PARK_META, p);
	assert_int_equal(spool_write_file(path, text, strlen(text), true, 0600), 0);
	sha256_hex(text, strlen(text), sum);
	sum[64] = '\n';
	snprintf(path, sizeof(path), "%s/" SBX_PARK_SUM, p);
	assert_int_equal(spool_write_file(path, sum, 65, true, 0600), 0);
	free(text);
	json_decref(m);
}

static void flip_byte(const char *path, off_t at)
{
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	char b;
	if (at < 0)
		at += lseek(fd, 0, SEEK_END);
	assert_int_equal(pread(fd, &b, 1, at), 1);
	b ^= 0x20;
	assert_int_equal(pwrite(fd, &b, 1, at), 1);
	close(fd);
}

static void unpark_checks(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_sandbox_park.XXXXXX", dir2[] = "/tmp/test_sandbox_park.XXXXXX", err[300];
	char p[PATH_MAX], f[PATH_MAX + 64];
	static struct sbx s, t;
	fill(&s, dir);
	assert_non_null(mkdtemp(dir2));
	snprintf(p, sizeof(p), "%s/paused", dir2);
	write_parked(&s, p);
	/* whole: taken, the running command's output opened to go on */
	assert_int_equal(sbx_init(&t, dir2), 0);
	assert_int_equal(sbx_unpark(&t, p, err, sizeof(err)), 0);
	assert_int_equal(t.ncmd, 3);
	assert_true(sbx_cmd_of(&t, 2)->out_fd >= 0);
	snprintf(f, sizeof(f), "%s/cmds/1.out", dir2);
	assert_int_equal(access(f, F_OK), 0);
	sbx_release(&t);
	/* an output altered */
	snprintf(f, sizeof(f), "%s/cmds/2.out", p);
	flip_byte(f, -1);
	assert_int_equal(sbx_init(&t, dir2), 0);
	assert_int_equal(sbx_unpark(&t, p, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "command 2 was altered"));
	sbx_release(&t);
	flip_byte(f, -1);
	/* the table altered, then its sum gone */
	snprintf(f, sizeof(f), "%s/" SBX_PARK_META, p);
	flip_byte(f, 5);
	assert_int_equal(sbx_init(&t, dir2), 0);
	assert_int_equal(sbx_unpark(&t, p, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "altered or truncated"));
	sbx_release(&t);
	snprintf(f, sizeof(f), "%s/" SBX_PARK_SUM, p);
	unlink(f);
	assert_int_equal(sbx_init(&t, dir2), 0);
	assert_int_equal(sbx_unpark(&t, p, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no checksum"));
	sbx_release(&t);
	sbx_release(&s);
	tree_remove(dir, 3);
	tree_remove(dir2, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(refused),
		cmocka_unit_test(unpark_checks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
