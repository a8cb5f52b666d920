/* What the sandbox supervisor's API says (host/sandbox/json.c): signal
 * names, file entries (a guest's name that is not UTF-8 is made text),
 * a command's output read back from its file, cut where a hostile
 * record would overrun it, and the usage read from a cgroup's files and
 * the workspace image. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor.h"
#include "spool.h"

static void signals(void **state)
{
	(void)state;
	json_t *v = json_string("TERM");
	assert_int_equal(sbx_signal_number(v), SIGTERM);
	json_decref(v);
	v = json_string("sigkill");
	assert_int_equal(sbx_signal_number(v), SIGKILL);
	json_decref(v);
	v = json_integer(2);
	assert_int_equal(sbx_signal_number(v), 2);
	json_decref(v);
	const char *bad[] = { "NOPE", "", "SIG" };
	for (size_t i = 0; i < 3; i++) {
		v = json_string(bad[i]);
		assert_int_equal(sbx_signal_number(v), 0);
		json_decref(v);
	}
	v = json_integer(PROTO_MAX_SIGNAL + 1);
	assert_int_equal(sbx_signal_number(v), 0);
	json_decref(v);
	v = json_integer(0);
	assert_int_equal(sbx_signal_number(v), 0);
	json_decref(v);
	assert_int_equal(sbx_signal_number(NULL), 0);
}

static void entries(void **state)
{
	(void)state;
	struct proto_entry e = { .mode = S_IFDIR | 0755, .size = 4096, .mtime_ns = 1700000000123456789ll };
	snprintf(e.name, sizeof(e.name), "dir");
	json_t *j = sbx_entry_json(&e);
	assert_string_equal(json_string_value(json_object_get(j, "name")), "dir");
	assert_string_equal(json_string_value(json_object_get(j, "type")), "dir");
	assert_string_equal(json_string_value(json_object_get(j, "mode")), "0755");
	assert_string_equal(json_string_value(json_object_get(j, "mtime")), "2023-11-14T22:13:20.123Z");
	json_decref(j);
	snprintf(e.name, sizeof(e.name), "bad\xff\xfename");
	e.mode = S_IFLNK | 0777;
	j = sbx_entry_json(&e);
	assert_string_equal(json_string_value(json_object_get(j, "name")), "bad\xef\xbf\xbd\xef\xbf\xbdname");
	assert_string_equal(json_string_value(json_object_get(j, "type")), "symlink");
	json_decref(j);
}

static void command_output(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_sandbox_json.XXXXXX";
	assert_non_null(mkdtemp(dir));
	static struct sbx s;
	assert_int_equal(sbx_init(&s, dir), 0);
	s.max_output = 1024;
	char err[128];
	pthread_mutex_lock(&s.mu);
	struct sbx_cmd *c = sbx_cmd_new(&s, err, sizeof(err));
	assert_non_null(c);
	assert_int_equal(c->id, 1);
	assert_int_equal(spool_append(c->out_fd, PROTO_STAGE_RUN, PROTO_STDOUT, (const uint8_t *)"out ", 4), 0);
	assert_int_equal(spool_append(c->out_fd, PROTO_STAGE_RUN, PROTO_STDERR, (const uint8_t *)"err", 3), 0);
	assert_int_equal(spool_append(c->out_fd, PROTO_STAGE_RUN, PROTO_STDOUT, (const uint8_t *)"\xffok", 3), 0);
	/* a record header that claims more than the file has: the text stops there */
	struct spool_record h = { .stage = PROTO_STAGE_RUN, .stream = PROTO_STDOUT, .len = 1000 };
	assert_int_equal(write(c->out_fd, &h, sizeof(h)), (ssize_t)sizeof(h));
	c->request = json_pack("{s:[s]}", "argv", "x");
	c->ended = true;
	c->exit = (struct proto_exit){ .kind = PROTO_END_EXITED, .code = 4, .flags = PROTO_EXIT_TIMED_OUT };
	json_t *j = sbx_cmd_json(&s, c);
	sbx_cmd_output(&s, c->id, j);
	assert_string_equal(json_string_value(json_object_get(j, "stdout")), "out \xef\xbf\xbdok");
	assert_string_equal(json_string_value(json_object_get(j, "stderr")), "err");
	assert_int_equal(json_integer_value(json_object_get(j, "exit_code")), 4);
	assert_true(json_is_true(json_object_get(j, "timed_out")));
	assert_true(json_is_null(json_object_get(j, "signal")));
	json_decref(j);
	pthread_mutex_unlock(&s.mu);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" SBX_CMDS_DIR "/1.out", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/" SBX_CMDS_DIR, dir);
	rmdir(path);
	rmdir(dir);
	sbx_release(&s);
}

static void put(const char *dir, const char *name, const char *text)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void usage(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_sbx_usage.XXXXXX", image[300];
	assert_non_null(mkdtemp(dir));
	put(dir, "cpu.stat", "user_usec 1\nusage_usec 12345678\nsystem_usec 2\n");
	put(dir, "memory.current", "4096\n");
	snprintf(image, sizeof(image), "%s/ws.ext4", dir);
	int fd = open(image, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	/* allocated whole, as the workspace is: only what is written counts */
	assert_int_equal(posix_fallocate(fd, 0, 64 << 20), 0);
	char block[8192] = { 1 };
	assert_int_equal(pwrite(fd, block, sizeof(block), 1 << 20), (ssize_t)sizeof(block));
	fsync(fd);
	close(fd);
	json_t *u = sbx_usage_json(dir, image);
	assert_int_equal(json_integer_value(json_object_get(u, "cpu_ms")), 12345);
	assert_int_equal(json_integer_value(json_object_get(u, "memory_bytes")), 4096);
	assert_true(json_is_null(json_object_get(u, "memory_peak_bytes")));   /* no memory.peak: unknown */
	json_int_t disk = json_integer_value(json_object_get(u, "disk_bytes"));
	assert_true(disk >= 8192 && disk < (1 << 20));
	json_decref(u);
	/* a file that is no number, and no cgroup at all */
	put(dir, "memory.current", "max\n");
	u = sbx_usage_json(dir, "");
	assert_true(json_is_null(json_object_get(u, "memory_bytes")));
	assert_true(json_is_null(json_object_get(u, "disk_bytes")));
	json_decref(u);
	u = sbx_usage_json("", "");
	assert_true(json_is_null(json_object_get(u, "cpu_ms")));
	json_decref(u);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(signals),
		cmocka_unit_test(entries),
		cmocka_unit_test(command_output),
		cmocka_unit_test(usage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
