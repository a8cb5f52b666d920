/* The workspace diff: the comparison and its digest (pure), the manifest
 * line parser, and two real ext4 images (mke2fs -d) listed by the
 * confined helper and diffed: added, modified, removed, binary, a
 * symbolic link, a mode change, a file over the text cap. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <fcntl.h>
#include <pthread.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "artifacts.h"
#include "wsdiff.h"

static struct artifact_entry file(const char *path, unsigned mode, uint64_t size, char sum)
{
	struct artifact_entry e = { .kind = 'f', .mode = (uint16_t)mode, .size = size, .copy = -1 };
	snprintf(e.path, sizeof(e.path), "%s", path);
	memset(e.sha256, sum, 64);
	return e;
}

static void test_compare(void **state)
{
	(void)state;
	struct artifact_entry a[] = { file("same", 0644, 1, 'a'), file("changed", 0644, 1, 'a'), file("gone", 0644, 1, 'a'),
				      file("mode", 0644, 1, 'a') };
	struct artifact_entry b[] = { file("new", 0644, 1, 'b'), file("mode", 0755, 1, 'a'), file("changed", 0644, 1, 'c'),
				      file("same", 0644, 1, 'a') };
	struct artifacts_result from = { .entries = a, .nentries = 4 }, to = { .entries = b, .nentries = 4 };
	struct wsdiff d, again;
	assert_int_equal(wsdiff_compare(&from, &to, &d), 0);
	assert_int_equal(d.n, 4);
	assert_int_equal(d.added, 1);
	assert_int_equal(d.modified, 2);
	assert_int_equal(d.removed, 1);
	assert_true(d.complete);
	/* by path */
	assert_string_equal(d.c[0].from->path, "changed");
	assert_int_equal(d.c[0].status, WSDIFF_MODIFIED);
	assert_int_equal(d.c[1].status, WSDIFF_REMOVED);
	assert_int_equal(d.c[2].status, WSDIFF_MODIFIED);   /* mode */
	assert_int_equal(d.c[3].status, WSDIFF_ADDED);
	/* the same change listed in another order: the same digest */
	struct artifact_entry b2[] = { b[3], b[2], b[1], b[0] };
	struct artifacts_result to2 = { .entries = b2, .nentries = 4 };
	assert_int_equal(wsdiff_compare(&from, &to2, &again), 0);
	assert_string_equal(d.digest, again.digest);
	wsdiff_free(&again);
	/* one byte of one sum: another digest */
	b2[1].sha256[10] = 'd';
	assert_int_equal(wsdiff_compare(&from, &to2, &again), 0);
	assert_string_not_equal(d.digest, again.digest);
	wsdiff_free(&again);
	/* a skipped entry: incomplete, and in the digest */
	struct artifact_skip sk = { "hidden", "over the byte cap" };
	to.skipped = &sk;
	to.nskipped = 1;
	assert_int_equal(wsdiff_compare(&from, &to, &again), 0);
	assert_false(again.complete);
	assert_string_not_equal(d.digest, again.digest);
	wsdiff_free(&again);
	/* the same change made on another base: another digest */
	struct artifact_entry a3[] = { a[0], a[1], a[2], a[3], file("other", 0644, 1, 'e') };
	struct artifact_entry b3[] = { b[0], b[1], b[2], b[3], file("other", 0644, 1, 'e') };
	struct artifacts_result from3 = { .entries = a3, .nentries = 5 }, to3 = { .entries = b3, .nentries = 5 };
	assert_int_equal(wsdiff_compare(&from3, &to3, &again), 0);
	assert_int_equal(again.n, 4);
	assert_string_not_equal(d.digest, again.digest);
	wsdiff_free(&again);
	/* link targets that differ only past a thousand bytes: other digests */
	char t1[2000], t2[2000];
	memset(t1, 'x', sizeof(t1) - 1);
	t1[sizeof(t1) - 1] = '\0';
	memcpy(t2, t1, sizeof(t1));
	t2[1990] = 'y';
	struct artifact_entry l0 = { .path = "l", .kind = 'l', .mode = 0777, .copy = -1, .target = "z" };
	struct artifact_entry l1 = l0, l2 = l0;
	l1.target = t1;
	l2.target = t2;
	struct artifacts_result lf = { .entries = &l0, .nentries = 1 }, lt1 = { .entries = &l1, .nentries = 1 },
				lt2 = { .entries = &l2, .nentries = 1 };
	struct wsdiff d1, d2;
	assert_int_equal(wsdiff_compare(&lf, &lt1, &d1), 0);
	assert_int_equal(wsdiff_compare(&lf, &lt2, &d2), 0);
	assert_string_not_equal(d1.digest, d2.digest);
	wsdiff_free(&d1);
	wsdiff_free(&d2);
	/* no change: nothing listed */
	assert_int_equal(wsdiff_compare(&from, &from, &again), 0);
	assert_int_equal(again.n, 0);
	assert_string_not_equal(d.digest, again.digest);
	wsdiff_free(&again);
	wsdiff_free(&d);
}

static void test_parse_entry(void **state)
{
	(void)state;
	struct artifacts_limits lim = { .max_bytes = 1000, .max_files = 10, .max_path = 100, .manifest = true,
					.copy_max = 10, .copy_total = 100 };
	struct artifact_entry e;
	long next = 0;
	char sum[200];
	snprintf(sum, sizeof(sum), "644 5 %064d 0 dir/a\\x20b", 0);
	assert_int_equal(artifacts_parse_entry('R', sum, strlen(sum), &lim, &next, &e), 0);
	assert_string_equal(e.path, "dir/a b");
	assert_int_equal(e.mode, 0644);
	assert_int_equal(e.size, 5);
	assert_int_equal(e.copy, 0);
	assert_int_equal(next, 1);
	/* copies' numbers only grow: 0 again is refused, a gap is not; a
	 * copy of a large file is refused */
	assert_int_equal(artifacts_parse_entry('R', sum, strlen(sum), &lim, &next, &e), -1);
	snprintf(sum, sizeof(sum), "644 5 %064d 3 f", 0);
	assert_int_equal(artifacts_parse_entry('R', sum, strlen(sum), &lim, &next, &e), 0);
	assert_int_equal(e.copy, 3);
	assert_int_equal(next, 4);
	snprintf(sum, sizeof(sum), "644 50 %064d 4 big", 0);
	assert_int_equal(artifacts_parse_entry('R', sum, strlen(sum), &lim, &next, &e), -1);
	/* a path that is not UTF-8 (the helper skips such names) */
	assert_int_equal(artifacts_parse_entry('D', "755 a\\xff", 9, &lim, &next, &e), -1);
	snprintf(sum, sizeof(sum), "644 5000 %064d - big", 0);   /* past max_bytes */
	assert_int_equal(artifacts_parse_entry('R', sum, strlen(sum), &lim, &next, &e), -1);
	const char *bad[] = { "D 999 x", "D 755 ../x", "D 755 /x", "D 755 ", "O x 644 f", "L 0 l\tt", "L 3 l",
			      "L 3 l\t\x01", "R 644 5 abc - f", "Q 1 x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(artifacts_parse_entry(bad[i][0], bad[i] + 2, strlen(bad[i]) - 2, &lim, &next, &e), -1);
	assert_int_equal(artifacts_parse_entry('L', "6 l\tx\\x2fy", 10, &lim, &next, &e), 0);
	assert_string_equal(e.target, "x\\x2fy");
	free(e.target);
	assert_int_equal(artifacts_parse_entry('O', "p 600 fifo", 10, &lim, &next, &e), 0);
	assert_int_equal(e.kind, 'p');
}

/* ---- two images -------------------------------------------------------------- */

static char dir[64];

static void sh(const char *cmd)
{
	assert_int_equal(system(cmd), 0);
}

static int rm(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(p);
}

static json_t *file_of(json_t *files, const char *path)
{
	size_t i;
	json_t *o;
	json_array_foreach(files, i, o)
		if (!strcmp(json_string_value(json_object_get(o, "path")), path))
			return o;
	return NULL;
}

struct thread_walk {
	const char *from, *to, *scratch;
	char digest[65];
};

static void *walk_in_thread(void *arg)
{
	struct thread_walk *t = arg;
	void *keep[256];
	char err[512];
	json_t *o = NULL;
	for (int i = 0; i < 256; i++)   /* the thread's arena, grown */
		keep[i] = malloc(4096);
	if (wsdiff_images(t->from, t->to, t->scratch, &o, t->digest, NULL, err, sizeof(err)))
		snprintf(t->digest, sizeof(t->digest), "%.64s", err);
	json_decref(o);
	for (int i = 0; i < 256; i++)
		free(keep[i]);
	return NULL;
}

static void test_images(void **state)
{
	(void)state;
	char cmd[1024], p[256], scratch[128];
	strcpy(dir, "/tmp/vmrun-wsdiff-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd %s; mkdir a b; printf 'one\\ntwo\\n' > a/text; printf 'one\\nTWO\\nthree\\n' > b/text;"
		 "echo keep > a/keep; echo keep > b/keep; echo gone > a/gone; echo new > b/new;"
		 "printf 'x\\000y' > a/bin; printf 'x\\000z' > b/bin; ln -s text a/link; ln -s keep b/link;"
		 "echo m > a/mode; echo m > b/mode; chmod 600 a/mode; chmod 755 b/mode; mkdir b/sub;"
		 "echo deep > b/sub/deep; head -c 300000 /dev/zero | tr '\\000' 'a' > b/big; printf 'x\\n\\ny' > b/multi;"
		 "for s in a b; do mke2fs -q -F -t ext4 -d $s $s.img 8M >/dev/null 2>&1; done",
		 dir);
	sh(cmd);
	json_t *o = NULL;
	char digest[65], again[65], err[512];
	snprintf(p, sizeof(p), "%s/a.img", dir);
	snprintf(scratch, sizeof(scratch), "%s/scratch", dir);
	char q[256];
	snprintf(q, sizeof(q), "%s/b.img", dir);
	bool complete = false;
	if (wsdiff_images(p, q, scratch, &o, digest, &complete, err, sizeof(err)))
		fail_msg("%s", err);
	assert_true(complete);
	assert_int_equal(access(scratch, F_OK), -1);   /* cleaned up */
	json_t *files = json_object_get(o, "files"), *f;
	json_t *sum = json_object_get(o, "summary");
	assert_int_equal(json_integer_value(json_object_get(sum, "added")), 5);   /* new, sub, sub/deep, big, multi */
	assert_int_equal(json_integer_value(json_object_get(sum, "removed")), 1);
	assert_int_equal(json_integer_value(json_object_get(sum, "modified")), 4);   /* text, bin, link, mode */
	assert_true(json_is_true(json_object_get(o, "complete")));
	assert_non_null(f = file_of(files, "text"));
	assert_string_equal(json_string_value(json_object_get(f, "status")), "modified");
	const char *diff = json_string_value(json_object_get(f, "diff"));
	assert_non_null(diff);
	assert_non_null(strstr(diff, "--- a/text\n+++ b/text\n"));
	assert_non_null(strstr(diff, "-two\n+TWO\n+three\n"));
	assert_int_equal(json_integer_value(json_object_get(f, "insertions")), 2);
	assert_int_equal(json_integer_value(json_object_get(f, "deletions")), 1);
	assert_non_null(f = file_of(files, "new"));
	assert_non_null(strstr(json_string_value(json_object_get(f, "diff")), "--- /dev/null\n+++ b/new\n"));
	assert_non_null(f = file_of(files, "gone"));
	assert_string_equal(json_string_value(json_object_get(f, "status")), "removed");
	/* one side only: written as diff -u writes it */
	assert_string_equal(json_string_value(json_object_get(f, "diff")), "--- a/gone\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n");
	assert_int_equal(json_integer_value(json_object_get(f, "deletions")), 1);
	assert_non_null(f = file_of(files, "multi"));
	assert_string_equal(json_string_value(json_object_get(f, "diff")),
			    "--- /dev/null\n+++ b/multi\n@@ -0,0 +1,3 @@\n+x\n+\n+y\n\\ No newline at end of file\n");
	assert_int_equal(json_integer_value(json_object_get(f, "insertions")), 3);
	assert_non_null(f = file_of(files, "bin"));
	assert_true(json_is_true(json_object_get(f, "binary")));
	assert_null(json_object_get(f, "diff"));
	assert_non_null(f = file_of(files, "link"));
	assert_string_equal(json_string_value(json_object_get(f, "target")), "keep");
	assert_string_equal(json_string_value(json_object_get(json_object_get(f, "old"), "target")), "text");
	assert_non_null(f = file_of(files, "mode"));
	assert_string_equal(json_string_value(json_object_get(f, "mode")), "0755");
	assert_string_equal(json_string_value(json_object_get(json_object_get(f, "old"), "mode")), "0600");
	assert_non_null(f = file_of(files, "big"));
	assert_int_equal(json_integer_value(json_object_get(f, "size")), 300000);
	assert_non_null(json_object_get(f, "diff_omitted"));
	assert_null(file_of(files, "keep"));
	assert_string_equal(json_string_value(json_object_get(o, "digest")), digest);
	json_decref(o);
	/* the same images again: the same digest; the other way round: another */
	assert_int_equal(wsdiff_images(p, q, scratch, &o, again, NULL, err, sizeof(err)), 0);
	assert_string_equal(digest, again);
	json_decref(o);
	/* the digest alone: no JSON, the same digest */
	assert_int_equal(wsdiff_images(p, q, scratch, NULL, again, NULL, err, sizeof(err)), 0);
	assert_string_equal(digest, again);
	assert_int_equal(wsdiff_images(q, p, scratch, &o, again, NULL, err, sizeof(err)), 0);
	assert_string_not_equal(digest, again);
	json_decref(o);
	/* from a thread whose malloc arena is not the main one (a server's
	 * request thread): the helper's heap grows by mprotect there */
	struct thread_walk tw = { p, q, scratch, "" };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, walk_in_thread, &tw), 0);
	pthread_join(th, NULL);
	assert_string_equal(tw.digest, digest);
	/* not an image: one line, nothing left */
	assert_int_equal(wsdiff_images("/dev/null/x", q, scratch, &o, again, NULL, err, sizeof(err)), -1);
	assert_null(strchr(err, '\n'));
	nftw(dir, rm, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_compare),
		cmocka_unit_test(test_parse_entry),
		cmocka_unit_test(test_images),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
