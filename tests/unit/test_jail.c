/* The jail's per-run uid reservation (issue 12, finding 6): no root and no
 * KVM needed, the lock files go to a temporary directory and the random
 * draw is replaced by a scripted one, so collisions are forced. Two live
 * reservations never share a uid, a released one can be taken again, and
 * running out of tries fails with one clear line. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail.h"

/* Replays vals, then repeats the last one forever. */
struct script {
	const uint32_t *vals;
	size_t n, next;
	unsigned draws;
};

static int scripted(void *ctx, uint32_t *r)
{
	struct script *sc = ctx;
	*r = sc->vals[sc->next < sc->n ? sc->next : sc->n - 1];
	if (sc->next < sc->n)
		sc->next++;
	sc->draws++;
	return 0;
}

struct fx {
	char dir[64];
	struct jail_spec s;
	struct script sc;
	struct jail a, b;
	char err[512];
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_jail.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	f->s = (struct jail_spec){ .uid_dir = f->dir, .draw = scripted, .draw_ctx = &f->sc };
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	jail_release_uid(&f->a);
	jail_release_uid(&f->b);
	rmdir(f->dir);
	free(f);
	return 0;
}

static void reserve(struct fx *f, struct jail *j)
{
	memset(j, 0, sizeof(*j));
	f->err[0] = '\0';
	int rc = jail_reserve_uid(&f->s, j, f->err, sizeof(f->err));
	if (rc)
		fail_msg("reserve: %s", f->err);
}

/* The random source repeats: the second run must not get the first's uid,
 * it draws again. */
static void same_draw_gives_different_uids(void **state)
{
	struct fx *f = *state;
	static const uint32_t vals[] = { 7, 7, 7, 9 };
	f->sc = (struct script){ .vals = vals, .n = 4 };
	reserve(f, &f->a);
	reserve(f, &f->b);
	assert_int_equal(f->a.uid, JAIL_ID_BASE + 7);
	assert_int_not_equal(f->a.uid, f->b.uid);
	assert_int_equal(f->b.uid, JAIL_ID_BASE + 9);
	/* held in the directory while live */
	char path[128];
	snprintf(path, sizeof(path), "%s/%u", f->dir, JAIL_ID_BASE + 7);
	assert_int_equal(access(path, F_OK), 0);
}

/* Released, the uid is free again and its lock file is gone. */
static void released_uid_taken_again(void **state)
{
	struct fx *f = *state;
	static const uint32_t vals[] = { 42 };
	f->sc = (struct script){ .vals = vals, .n = 1 };
	reserve(f, &f->a);
	uid_t uid = f->a.uid;
	jail_release_uid(&f->a);
	jail_release_uid(&f->a);   /* twice is harmless */
	char path[128];
	snprintf(path, sizeof(path), "%s/%u", f->dir, (unsigned)uid);
	assert_int_equal(access(path, F_OK), -1);
	reserve(f, &f->b);
	assert_int_equal(f->b.uid, uid);
}

/* Every draw lands on a held uid: a bounded number of tries, then one line
 * saying so, and nothing held. */
static void exhaustion_fails_cleanly(void **state)
{
	struct fx *f = *state;
	static const uint32_t vals[] = { 5 };
	f->sc = (struct script){ .vals = vals, .n = 1 };
	reserve(f, &f->a);
	unsigned before = f->sc.draws;
	memset(&f->b, 0, sizeof(f->b));
	assert_int_equal(jail_reserve_uid(&f->s, &f->b, f->err, sizeof(f->err)), -1);
	assert_int_equal(f->sc.draws - before, JAIL_UID_TRIES);
	assert_non_null(strstr(f->err, "no free uid"));
	assert_null(strchr(f->err, '\n'));
	assert_false(f->b.uid_held);
	/* the holder is untouched */
	assert_true(f->a.uid_held);
	assert_int_equal(f->a.uid, JAIL_ID_BASE + 5);
}

/* A directory others may write is refused: they could hold or forge
 * reservations. */
static void writable_dir_refused(void **state)
{
	struct fx *f = *state;
	static const uint32_t vals[] = { 1 };
	f->sc = (struct script){ .vals = vals, .n = 1 };
	assert_int_equal(chmod(f->dir, 0777), 0);
	assert_int_equal(jail_reserve_uid(&f->s, &f->a, f->err, sizeof(f->err)), -1);
	assert_non_null(strstr(f->err, f->dir));
	assert_int_equal(chmod(f->dir, 0700), 0);
}

/* vmm's file-size limit covers what it writes: the workspace image, and
 * while it makes a snapshot the guest's whole memory (not a restore's,
 * which only reads it). */
static void fsize_limit(void **state)
{
	(void)state;
	struct jail_spec s = { .disk_mib = 64, .memory_mib = 1024 };
	assert_true(jail_fsize_limit(&s) == (64ull + 16) << 20);
	s.snapshot = "/cache/key";
	assert_true(jail_fsize_limit(&s) == (64ull + 16) << 20);
	s.snapshot_rw = true;
	s.disk_mib = 0;   /* making one: no workspace */
	assert_true(jail_fsize_limit(&s) == (1024ull + 16) << 20);
	s.disk_mib = 4096;
	assert_true(jail_fsize_limit(&s) == (4096ull + 16) << 20);
	/* a sandbox's, restoring: its pause may write every page and the index */
	s = (struct jail_spec){ .disk_mib = 64, .memory_mib = 1024, .snapshot = "/cache/key", .may_pause = true };
	assert_true(jail_fsize_limit(&s) == (1024ull + 2 + 1 + 16) << 20);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

/* What the charged child did: the file it filled, and its own cgroups. */
struct charged {
	const char *file;
	size_t bytes;
	char cgroups[1024];
};

static int fill_file(void *ctx, void *out, char *err, size_t errlen)
{
	const struct charged *c = ctx;
	struct charged *o = out;
	FILE *f = fopen("/proc/self/cgroup", "re");
	size_t n = f ? fread(o->cgroups, 1, sizeof(o->cgroups) - 1, f) : 0;
	o->cgroups[n] = '\0';
	if (f)
		fclose(f);
	if (!c->file) {
		snprintf(err, errlen, "fill: no file named");
		return -1;
	}
	FILE *w = fopen(c->file, "we");
	static const char block[65536];
	for (size_t done = 0; w && done < c->bytes; done += sizeof(block))
		fwrite(block, 1, sizeof(block), w);
	return w && fclose(w) == 0 ? 0 : -1;
}

/* The workspace's pages are the run's: what jail_charged's fn writes to a
 * tmpfs is charged to the run's cgroup, in which the child was, and a
 * reason from fn comes back whole. Needs root and a memory cgroup. */
static void charged_to_the_runs_cgroup(void **state)
{
	(void)state;
	if (geteuid() != 0 || (access("/sys/fs/cgroup/cgroup.controllers", F_OK) && access("/sys/fs/cgroup/memory", F_OK)))
		skip();
	char id[64], file[96], path[PATH_MAX + 64], err[600] = "";
	snprintf(id, sizeof(id), "test-jail-charged-%d", (int)getpid());
	snprintf(file, sizeof(file), "/dev/shm/%s", id);
	struct jail_spec s = { .run_id = id, .memory_mib = 16, .cpus = 1, .disk_mib = 32, .image = file };
	struct jail j = { .uid_fd = -1 };
	struct charged in = { .file = file, .bytes = 16u << 20 }, out;
	int rc = jail_charged(&s, &j, fill_file, &in, &out, sizeof(out), err, sizeof(err));
	if (rc)
		fail_msg("jail_charged: %s", err);
	assert_true(j.cgroup_version == 1 || j.cgroup_version == 2);
	const char *leaf = strrchr(j.cgroup, '/');
	assert_non_null(strstr(out.cgroups, leaf));
	snprintf(path, sizeof(path), "%s/%s", j.cgroup, j.cgroup_version == 2 ? "memory.current" : "memory.usage_in_bytes");
	FILE *f = fopen(path, "re");
	unsigned long long used = 0;
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%llu", &used), 1);
	fclose(f);
	assert_true(used >= in.bytes);
	/* fn's own reason, as it gave it */
	struct charged none = { 0 };
	assert_int_equal(jail_charged(&s, &j, fill_file, &none, &out, sizeof(out), err, sizeof(err)), -1);
	assert_string_equal(err, "fill: no file named");
	unlink(file);
	jail_cleanup(&j);
	assert_int_equal(access(path, F_OK), -1);
}

/* The OOM-kill count, from the files cgroup v2 and v1 keep it in. */
static void oom_kills_parsed(void **state)
{
	(void)state;
	assert_int_equal(jail_parse_oom_kills("low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n"), 1);
	assert_int_equal(jail_parse_oom_kills("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), 3);
	assert_int_equal(jail_parse_oom_kills("low 0\nmax 0\n"), 0);
	assert_int_equal(jail_parse_oom_kills(""), 0);
	struct jail none = { .cgroup_version = 0 };
	assert_int_equal(jail_oom_kills(&none), 0);
	/* the same reader serves every cgroup number: a keyed line, or the whole file */
	assert_int_equal(jail_cgroup_number("usage_usec 12345678\nuser_usec 1\n", "usage_usec"), 12345678);
	assert_int_equal(jail_cgroup_number("user_usec 1\nusage_usec 7\n", "usage_usec"), 7);
	assert_int_equal(jail_cgroup_number("usage_usec_more 5\n", "usage_usec"), -1);
	assert_int_equal(jail_cgroup_number("4096\n", NULL), 4096);
	assert_int_equal(jail_cgroup_number("max\n", NULL), -1);
	assert_int_equal(jail_cgroup_number("oom_kill -3\n", "oom_kill"), -1);
	assert_int_equal(jail_cgroup_read("/nonexistent", "memory.current", NULL), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(same_draw_gives_different_uids),
		T(released_uid_taken_again),
		T(exhaustion_fails_cleanly),
		T(writable_dir_refused),
		cmocka_unit_test(fsize_limit),
		cmocka_unit_test(oom_kills_parsed),
		cmocka_unit_test(charged_to_the_runs_cgroup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
