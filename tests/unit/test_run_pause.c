/* A paused sandbox's files on the host (host/run/run_pause.c), without
 * KVM: the workspace image's sum (the same contents however its holes lie,
 * another for one changed byte), the commit of vmm's ".new" files, the
 * check before a resume (a file missing, the image changed), and the
 * snapshot's pin. */
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

#include "../../vmm/snapshot.h"
#include "run_pause.h"

static char dir[64];

static void path(char *out, const char *name)
{
	snprintf(out, PATH_MAX, "%s/%s", dir, name);
}

static void put(const char *name, off_t at, const char *text)
{
	char p[PATH_MAX];
	path(p, name);
	int fd = open(p, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	if (text)
		assert_int_equal(pwrite(fd, text, strlen(text), at), (ssize_t)strlen(text));
	close(fd);
}

static void sized(const char *name, off_t size)
{
	char p[PATH_MAX];
	path(p, name);
	assert_int_equal(truncate(p, size), 0);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_run_pause.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* The same bytes give the same sum: sparse, allocated or written zeros. */
static void sum_is_of_contents(void **state)
{
	(void)state;
	char a[65], b[65], c[65], err[256], p[PATH_MAX];
	put("sparse", 1 << 20, "hello");
	sized("sparse", 4 << 20);
	assert_int_equal(run_pause_image_sum((path(p, "sparse"), p), a, err, sizeof(err)), 0);

	/* the same, allocated whole and written with zeros around it */
	path(p, "dense");
	int fd = open(p, O_WRONLY | O_CREAT, 0600);
	assert_int_equal(posix_fallocate(fd, 0, 4 << 20), 0);
	char *zeros = calloc(1, 1 << 20);
	assert_int_equal(pwrite(fd, zeros, 1 << 20, 2 << 20), 1 << 20);
	free(zeros);
	close(fd);
	put("dense", 1 << 20, "hello");
	assert_int_equal(run_pause_image_sum(p, b, err, sizeof(err)), 0);
	assert_string_equal(a, b);

	/* one byte more, or the same byte elsewhere, or another size: another sum */
	put("dense", (1 << 20) + 4096, "x");
	assert_int_equal(run_pause_image_sum(p, c, err, sizeof(err)), 0);
	assert_string_not_equal(a, c);
	put("moved", 2 << 20, "hello");
	sized("moved", 4 << 20);
	assert_int_equal(run_pause_image_sum((path(p, "moved"), p), c, err, sizeof(err)), 0);
	assert_string_not_equal(a, c);
	sized("sparse", 8 << 20);
	assert_int_equal(run_pause_image_sum((path(p, "sparse"), p), c, err, sizeof(err)), 0);
	assert_string_not_equal(a, c);

	assert_int_equal(run_pause_image_sum("/nonexistent/image", c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent/image"));
}

/* vmm's files are committed, the image summed; a resume checks it all. */
static void commit_then_check(void **state)
{
	(void)state;
	char err[256], image[PATH_MAX], p[PATH_MAX];
	put("image", 0, "workspace");
	sized("image", 1 << 20);
	path(image, "image");
	assert_int_equal(run_pause_commit(dir, image, err, sizeof(err)), -1);   /* vmm wrote nothing */
	assert_non_null(strstr(err, SNAP_PAGES_FILE));
	put(SNAP_PAGES_FILE SNAP_NEW_SUFFIX, 0, "pages");
	put(SNAP_STATE_FILE SNAP_NEW_SUFFIX, 0, "state");
	assert_int_equal(run_pause_commit(dir, image, err, sizeof(err)), 0);
	struct stat st;
	assert_int_equal(stat((path(p, SNAP_STATE_FILE), p), &st), 0);
	assert_int_equal(stat((path(p, SNAP_PAGES_FILE), p), &st), 0);
	assert_int_equal(stat((path(p, SNAP_STATE_FILE SNAP_NEW_SUFFIX), p), &st), -1);
	assert_int_equal(run_pause_check(dir, image, err, sizeof(err)), 0);

	put("image", 4096, "changed while paused");
	assert_int_equal(run_pause_check(dir, image, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "workspace image changed"));

	assert_int_equal(run_pause_commit(dir, image, err, sizeof(err)), -1);   /* no .new files again */
	put(SNAP_PAGES_FILE SNAP_NEW_SUFFIX, 0, "pages");
	put(SNAP_STATE_FILE SNAP_NEW_SUFFIX, 0, "state");
	assert_int_equal(run_pause_commit(dir, image, err, sizeof(err)), 0);
	assert_int_equal(run_pause_check(dir, image, err, sizeof(err)), 0);

	put(RUN_PAUSE_SUM_FILE, 3, "zz");
	assert_int_equal(run_pause_check(dir, image, err, sizeof(err)), -1);
	sized(RUN_PAUSE_SUM_FILE, 10);
	assert_int_equal(run_pause_check(dir, image, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "checksum is missing or damaged"));

	unlink((path(p, SNAP_PAGES_FILE), p));
	assert_int_equal(run_pause_check(dir, image, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "pages is missing"));
}

/* The pin holds the snapshot's files when the snapshot goes. */
static void pin_keeps_the_snapshot(void **state)
{
	(void)state;
	char snap[PATH_MAX], pin[PATH_MAX], p[PATH_MAX];
	path(snap, "snap");
	path(pin, "pin");
	assert_int_equal(mkdir(snap, 0755), 0);
	put("snap/" SNAP_STATE_FILE, 0, "state");
	put("snap/" SNAP_MEMORY_FILE, 0, "memory");
	assert_int_equal(run_pause_pin(snap, pin), 0);
	assert_int_equal(run_pause_pin(snap, pin), 0);   /* pinned already */
	unlink((path(p, "snap/" SNAP_STATE_FILE), p));
	unlink((path(p, "snap/" SNAP_MEMORY_FILE), p));
	struct stat st;
	assert_int_equal(stat((path(p, "pin/" SNAP_MEMORY_FILE), p), &st), 0);
	assert_int_equal(st.st_size, 6);
	run_pause_remove(NULL, pin);
	assert_int_equal(stat(pin, &st), -1);
	/* nothing to link: nothing left */
	assert_int_equal(run_pause_pin(snap, pin), -1);
	assert_int_equal(stat(pin, &st), -1);
}

/* A checkpoint's name comes from a client and becomes a path's last
 * part: nothing that could leave its directory passes. */
static void checkpoint_names(void **state)
{
	(void)state;
	const char *good[] = { "c1", "before-refactor", "v1.2_final", "A", "x.." };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(run_checkpoint_name_ok(good[i]));
	char longest[RUN_CHECKPOINT_NAME_MAX + 2];
	memset(longest, 'a', sizeof(longest));
	longest[RUN_CHECKPOINT_NAME_MAX] = '\0';
	assert_true(run_checkpoint_name_ok(longest));
	longest[RUN_CHECKPOINT_NAME_MAX] = 'a';
	longest[RUN_CHECKPOINT_NAME_MAX + 1] = '\0';
	assert_false(run_checkpoint_name_ok(longest));
	const char *bad[] = { NULL, "", ".", "..", ".hidden", "../up", "a/b", "a b", "a\nb", "caf\xc3\xa9", "a\\b" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(run_checkpoint_name_ok(bad[i]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(sum_is_of_contents, setup, teardown),
		cmocka_unit_test_setup_teardown(commit_then_check, setup, teardown),
		cmocka_unit_test_setup_teardown(pin_keeps_the_snapshot, setup, teardown),
		cmocka_unit_test(checkpoint_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
