/* Removing a tree by descriptors (host/run/tree.h): everything under the
 * named directory goes, nothing a symbolic link points at does, and a
 * tree deeper than asked is left and reported. */
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

#include "tree.h"

struct scratch {
	char dir[64];
};

static int setup(void **state)
{
	struct scratch *s = calloc(1, sizeof(*s));
	assert_non_null(s);
	snprintf(s->dir, sizeof(s->dir), "/tmp/test_tree.XXXXXX");
	assert_non_null(mkdtemp(s->dir));
	*state = s;
	return 0;
}

static int teardown(void **state)
{
	struct scratch *s = *state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->dir);
	assert_int_equal(system(cmd), 0);
	free(s);
	return 0;
}

/* path = dir/rel, made as a directory (rel ending in "/") or a file. */
static void make(const struct scratch *s, const char *rel, char *path, size_t len)
{
	snprintf(path, len, "%s/%s", s->dir, rel);
	size_t n = strlen(path);
	if (path[n - 1] == '/') {
		path[n - 1] = '\0';
		assert_int_equal(mkdir(path, 0700), 0);
		return;
	}
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("x", f);
	fclose(f);
}

static void follows_no_link(void **state)
{
	struct scratch *s = *state;
	char keep[PATH_MAX], keepfile[PATH_MAX], run[PATH_MAX], p[PATH_MAX], link[PATH_MAX];
	make(s, "keep/", keep, sizeof(keep));
	make(s, "keep/f", keepfile, sizeof(keepfile));
	make(s, "run/", run, sizeof(run));
	make(s, "run/a/", p, sizeof(p));
	make(s, "run/a/b/", p, sizeof(p));
	make(s, "run/a/b/f", p, sizeof(p));
	make(s, "run/g", p, sizeof(p));
	snprintf(link, sizeof(link), "%s/run/a/out", s->dir);
	assert_int_equal(symlink(keep, link), 0);
	assert_int_equal(tree_remove(run, 16), 0);
	assert_int_equal(access(run, F_OK), -1);
	assert_int_equal(access(keepfile, F_OK), 0);
	assert_int_equal(tree_remove(run, 16), 0);   /* gone already: fine */
}

static void deeper_than_asked_is_left(void **state)
{
	struct scratch *s = *state;
	char top[PATH_MAX], deep[PATH_MAX], p[PATH_MAX];
	make(s, "t/", top, sizeof(top));
	make(s, "t/f", p, sizeof(p));
	make(s, "t/d/", p, sizeof(p));
	make(s, "t/d/e/", deep, sizeof(deep));
	make(s, "t/d/e/f", p, sizeof(p));
	/* 2 levels: t and t/d are opened, t/d/e is one too many */
	assert_int_equal(tree_remove(top, 2), -1);
	assert_int_equal(access(deep, F_OK), 0);
	snprintf(p, sizeof(p), "%s/t/f", s->dir);
	assert_int_equal(access(p, F_OK), -1);   /* what could go, went */
	assert_int_equal(tree_remove(top, 3), 0);
	assert_int_equal(access(top, F_OK), -1);
}

static void entries_by_descriptor(void **state)
{
	struct scratch *s = *state;
	char p[PATH_MAX];
	make(s, "x/", p, sizeof(p));
	make(s, "x/y/", p, sizeof(p));
	make(s, "x/y/z", p, sizeof(p));
	make(s, "x/file", p, sizeof(p));
	int fd = open(s->dir, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(tree_remove_at(fd, "x/file", 1), 0);   /* a file: no depth needed */
	assert_int_equal(tree_remove_at(fd, "x", 4), 0);
	assert_int_equal(faccessat(fd, "x", F_OK, 0), -1);
	close(fd);
}

static void refuses_what_names_no_entry(void **state)
{
	struct scratch *s = *state;
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/", s->dir);
	assert_int_equal(tree_remove(p, 4), -1);
	snprintf(p, sizeof(p), "%s/.", s->dir);
	assert_int_equal(tree_remove(p, 4), -1);
	snprintf(p, sizeof(p), "%s/..", s->dir);
	assert_int_equal(tree_remove(p, 4), -1);
	assert_int_equal(access(s->dir, F_OK), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(follows_no_link, setup, teardown),
		cmocka_unit_test_setup_teardown(deeper_than_asked_is_left, setup, teardown),
		cmocka_unit_test_setup_teardown(entries_by_descriptor, setup, teardown),
		cmocka_unit_test_setup_teardown(refuses_what_names_no_entry, setup, teardown),
	};
	return cmocka_run_group_tests_name("tree", tests, NULL, NULL);
}
