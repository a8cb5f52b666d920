/* Records of live runs and the sweeper (host/run/run_record.c), without KVM or
 * cgroups: where records go, what a record may say, and a sweep that
 * reclaims a dead run's directory (following no link out of it) while
 * leaving a live run's record and directory alone. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_record.h"

static void dir_follows_the_uid(void **state)
{
	(void)state;
	char d[PATH_MAX];
	assert_int_equal(run_record_dir_choose(0, "/run/user/1000", d, sizeof(d)), 0);
	assert_string_equal(d, RUN_RECORD_DIR);
	assert_int_equal(run_record_dir_choose(1000, "/run/user/1000", d, sizeof(d)), 0);
	assert_string_equal(d, "/run/user/1000/vmrun/runs");
	assert_int_equal(run_record_dir_choose(1000, NULL, d, sizeof(d)), -1);
	assert_int_equal(run_record_dir_choose(1000, "relative", d, sizeof(d)), -1);
	assert_int_equal(run_record_dir_choose(1000, "/run/user/1000", d, 10), -1);
}

static int parse(const char *text, struct run_record_facts *f)
{
	return run_record_parse(text, strlen(text), f);
}

static void parse_takes_what_a_run_writes(void **state)
{
	(void)state;
	struct run_record_facts f;
	assert_int_equal(parse("dir /tmp/vmrun-abc-XyZ123\ncgroup 2 /sys/fs/cgroup/vmrun/abc\n"
			       "cgroup 1 /sys/fs/cgroup/memory/vmrun-abc\ncgroup 1 /sys/fs/cgroup/pids/vmrun-abc\n", &f), 0);
	assert_string_equal(f.dir, "/tmp/vmrun-abc-XyZ123");
	assert_int_equal(f.ncgroups, 3);
	assert_int_equal(f.cgroup[0].version, 2);
	assert_string_equal(f.cgroup[0].path, "/sys/fs/cgroup/vmrun/abc");
	assert_int_equal(f.cgroup[2].version, 1);
	assert_string_equal(f.cgroup[2].path, "/sys/fs/cgroup/pids/vmrun-abc");
	/* a writer that died mid-line had not made what the line names */
	assert_int_equal(parse("dir /tmp/vmrun-a-1\ncgroup 2 /sys/fs/cg", &f), 0);
	assert_int_equal(f.ncgroups, 0);
	assert_int_equal(parse("", &f), 0);
	assert_string_equal(f.dir, "");
}

static void parse_refuses_what_no_run_writes(void **state)
{
	(void)state;
	struct run_record_facts f;
	const char *bad[] = {
		"dir tmp/vmrun-a\n",                      /* relative */
		"dir /tmp/../etc/vmrun-a\n",              /* a .. component */
		"dir /tmp/./vmrun-a\n",                   /* a . component */
		"dir /tmp//vmrun-a\n",                    /* an empty one */
		"dir /etc\n",                             /* not a run directory's name */
		"dir /tmp/vmrun-a\ndir /tmp/vmrun-b\n",   /* two */
		"cgroup 2 /etc/vmrun\n",                  /* not a cgroup */
		"cgroup 2 /sys/fs/cgroup/../../etc\n",
		"cgroup 3 /sys/fs/cgroup/vmrun/a\n",      /* no such version */
		"cgroup 2/sys/fs/cgroup/vmrun/a\n",
		"pid 12\n",                               /* an unknown line */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(parse(bad[i], &f), -1);
	char many[4096] = "";
	for (int i = 0; i <= RUN_RECORD_MAX_CGROUPS; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "cgroup 2 /sys/fs/cgroup/vmrun/a%d\n", i);
	assert_int_equal(parse(many, &f), -1);
	assert_int_equal(run_record_parse("dir /tmp/vmrun-a\0x\n", 19, &f), -1);   /* a NUL inside */
}

/* A scratch directory for one test. */
static char *scratch(void)
{
	char *d = strdup("/tmp/test_run_record.XXXXXX");
	assert_non_null(mkdtemp(d));
	return d;
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void rm_rf(const char *d)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	assert_int_equal(system(cmd), 0);
}

/* A run directory like a run's, with a link out of it. */
static void fake_run_dir(const char *dir, const char *outside)
{
	char p[PATH_MAX + 64];
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(p, sizeof(p), "%s/workspace.ext4", dir);
	put(p, "image");
	snprintf(p, sizeof(p), "%s/sock", dir);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/sock/deep", dir);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/sock/deep/f", dir);
	put(p, "x");
	snprintf(p, sizeof(p), "%s/sock/out", dir);
	assert_int_equal(symlink(outside, p), 0);
}

static void open_and_close(void **state)
{
	(void)state;
	char *d = scratch();
	struct run_record r;
	char err[256], text[512];
	assert_int_equal(run_record_open(&r, d, "run1", "/tmp/vmrun-run1-x", err, sizeof(err)), 0);
	assert_int_equal(run_record_add_cgroup(&r, 2, "/sys/fs/cgroup/vmrun/run1"), 0);
	int fd = open(r.path, O_RDONLY);
	assert_true(fd >= 0);
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	assert_true(n > 0);
	text[n] = '\0';
	assert_string_equal(text, "dir /tmp/vmrun-run1-x\ncgroup 2 /sys/fs/cgroup/vmrun/run1\n");
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", r.path);
	run_record_close(&r);
	assert_int_equal(r.fd, -1);
	assert_int_equal(access(path, F_OK), -1);
	run_record_close(&r);   /* twice: harmless */
	assert_int_equal(run_record_add_cgroup(&r, 2, "/sys/fs/cgroup/vmrun/x"), 0);   /* no record: a no-op */
	assert_int_equal(run_record_open(&r, d, "a/b", "/tmp/vmrun-x", err, sizeof(err)), -1);
	assert_int_equal(r.fd, -1);
	rm_rf(d);
	free(d);
}

static void sweep_reclaims_the_dead_only(void **state)
{
	(void)state;
	char *d = scratch();
	char recs[PATH_MAX], live_dir[PATH_MAX], dead_dir[PATH_MAX], p[PATH_MAX + 64], err[256];
	snprintf(recs, sizeof(recs), "%s/runs", d);
	assert_int_equal(mkdir(recs, 0700), 0);
	snprintf(live_dir, sizeof(live_dir), "%s/vmrun-live-1", d);
	snprintf(dead_dir, sizeof(dead_dir), "%s/vmrun-dead-1", d);
	fake_run_dir(live_dir, "/etc");
	fake_run_dir(dead_dir, "/etc");
	struct run_record live;
	assert_int_equal(run_record_open(&live, recs, "live", live_dir, err, sizeof(err)), 0);
	/* the dead: a record nobody holds, as a killed supervisor leaves it */
	snprintf(p, sizeof(p), "%s/dead", recs);
	char text[PATH_MAX + 8];
	snprintf(text, sizeof(text), "dir %s\n", dead_dir);
	put(p, text);
	snprintf(p, sizeof(p), "%s/junk", recs);
	put(p, "dir /etc\n");

	struct run_sweep st;
	assert_int_equal(run_record_sweep(recs, &st, err, sizeof(err)), 0);
	assert_int_equal(st.runs, 2);
	assert_int_equal(st.dirs, 1);
	assert_int_equal(st.cgroups, 0);
	assert_int_equal(st.failed, 1);   /* junk: refused, removed, nothing acted on */
	assert_int_equal(access(dead_dir, F_OK), -1);
	assert_int_equal(access(live_dir, F_OK), 0);
	assert_int_equal(access(live.path, F_OK), 0);
	snprintf(p, sizeof(p), "%s/dead", recs);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(access("/etc/passwd", F_OK), 0);

	/* once its supervisor is gone, the live one is swept too */
	int fd = live.fd;
	live.fd = -1;
	close(fd);   /* the lock goes with the fd, as with a SIGKILL; the file stays */
	assert_int_equal(run_record_sweep(recs, &st, err, sizeof(err)), 0);
	assert_int_equal(st.runs, 1);
	assert_int_equal(st.dirs, 1);
	assert_int_equal(access(live_dir, F_OK), -1);
	assert_int_equal(access(live.path, F_OK), -1);

	snprintf(p, sizeof(p), "%s/none", d);
	assert_int_equal(run_record_sweep(p, &st, err, sizeof(err)), 0);   /* no directory yet: nothing to do */
	assert_int_equal(st.runs, 0);
	rm_rf(d);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(dir_follows_the_uid),
		cmocka_unit_test(parse_takes_what_a_run_writes),
		cmocka_unit_test(parse_refuses_what_no_run_writes),
		cmocka_unit_test(open_and_close),
		cmocka_unit_test(sweep_reclaims_the_dead_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
