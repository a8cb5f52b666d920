/* Judge0's additional_files (host/vmrund/judge0_files.c): zips written
 * here with libarchive, read into a run spec's workspace_files; what
 * `unzip -n` would skip skipped; a bomb, a path out of the workspace, a
 * link, too many files, a file that is also a directory and bytes that
 * are not a zip each refused with one line, the spec left as it was. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "judge0.h"

struct zentry {
	const char *name;
	const char *data;    /* NULL: len zero bytes */
	size_t len;
	mode_t type;         /* 0: a regular file of mode 0644; else a type, and permissions (0: 0644) */
};

static unsigned char zip[1 << 20];
static char why[300];

/* The entries as one zip, into zip: its length. */
static size_t make_zip(const struct zentry *e, size_t n)
{
	struct archive *a = archive_write_new();
	size_t used = 0;
	assert_int_equal(archive_write_set_format_zip(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_memory(a, zip, sizeof(zip), &used), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *en = archive_entry_new();
		mode_t type = e[i].type ? e[i].type & AE_IFMT : AE_IFREG, perm = e[i].type & 07777;
		archive_entry_set_pathname(en, e[i].name);
		archive_entry_set_filetype(en, type);
		archive_entry_set_perm(en, perm ? perm : 0644);
		if (type == AE_IFLNK)
			archive_entry_set_symlink(en, "/etc/passwd");
		archive_entry_set_size(en, type == AE_IFREG ? (la_int64_t)e[i].len : 0);
		assert_int_equal(archive_write_header(a, en), ARCHIVE_OK);
		if (type == AE_IFREG && e[i].len) {
			char *zeros = e[i].data ? NULL : calloc(1, e[i].len);
			assert_int_equal(archive_write_data(a, e[i].data ? e[i].data : zeros, e[i].len), (la_ssize_t)e[i].len);
			free(zeros);
		}
		archive_entry_free(en);
	}
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	return used;
}

/* A spec as Judge0's C submission starts: main.c alone. */
static void c_spec(struct run_spec *rq)
{
	memset(rq, 0, sizeof(*rq));
	rq->source = true;
	rq->files = calloc(1, sizeof(*rq->files));
	rq->nfiles = 1;
	strcpy(rq->files[0].name, "main.c");
}

static void extracts(void **state)
{
	(void)state;
	static const struct zentry e[] = {
		{ "data/", NULL, 0, AE_IFDIR }, { "data/in.txt", "hello", 5, 0 }, { "main.c", "evil", 4, 0 },
		{ "lib/util.h", "#define X 1\n", 12, 0 },  { "data/in.txt", "second", 6, 0 }, { "empty", NULL, 0, 0 },
		{ "bin/run.sh", "#!/bin/sh\n", 10, AE_IFREG | 0755 },
	};
	struct run_spec rq;
	c_spec(&rq);
	size_t n = make_zip(e, sizeof(e) / sizeof(e[0]));
	assert_int_equal(judge0_unzip(zip, n, 10240 * 1024, &rq, why, sizeof(why)), 0);
	/* main.c is the source's (unzip -n); the first data/in.txt wins */
	assert_int_equal(rq.nwfiles, 4);
	assert_string_equal(rq.wfiles[0].name, "data/in.txt");
	assert_int_equal(rq.wfiles[0].len, 5);
	assert_memory_equal(rq.wfiles[0].data, "hello", 5);
	assert_string_equal(rq.wfiles[1].name, "lib/util.h");
	assert_string_equal(rq.wfiles[2].name, "empty");
	assert_int_equal(rq.wfiles[2].len, 0);
	assert_null(rq.wfiles[2].data);
	/* the owner's execute bit kept, as unzip keeps it */
	assert_false(rq.wfiles[0].executable);
	assert_string_equal(rq.wfiles[3].name, "bin/run.sh");
	assert_true(rq.wfiles[3].executable);
	/* the spec as extracted is one the worker reads back */
	json_t *j = run_spec_to_json(&rq);
	struct run_spec back;
	char err[200];
	json_object_set_new(j, "runtime", json_string("c"));
	assert_int_equal(run_spec_from_json(j, &back, err, sizeof(err)), 0);
	assert_int_equal(back.nwfiles, 4);
	assert_true(back.wfiles[3].executable);
	run_spec_free(&back);
	json_decref(j);
	run_spec_free(&rq);
	/* an empty archive holds nothing */
	c_spec(&rq);
	n = make_zip(NULL, 0);
	assert_int_equal(judge0_unzip(zip, n, 1024, &rq, why, sizeof(why)), 0);
	assert_int_equal(rq.nwfiles, 0);
	run_spec_free(&rq);
}

/* zip's entries are refused with want in why, and rq keeps what it had */
static void refused(const struct zentry *e, size_t ne, uint64_t max, const char *want)
{
	struct run_spec rq;
	c_spec(&rq);
	size_t n = make_zip(e, ne);
	why[0] = '\0';
	int rc = judge0_unzip(zip, n, max, &rq, why, sizeof(why));
	if (rc != -1 || !strstr(why, want))
		fail_msg("rc %d, \"%s\"; wanted \"%s\"", rc, why, want);
	assert_null(strchr(why, '\n'));
	assert_int_equal(rq.nwfiles, 0);
	assert_int_equal(rq.nfiles, 1);
	run_spec_free(&rq);
}

static void refusals(void **state)
{
	(void)state;
	/* a bomb: 11 MiB of zeros, a few KB zipped; and many small files
	 * that add up past the cap */
	const struct zentry bomb[] = { { "a.txt", "x", 1, 0 }, { "zeros", NULL, 11u << 20, 0 } };
	refused(bomb, 2, 10240 * 1024, "\"zeros\" extracts to more than 8192 KB");
	refused(bomb, 2, 4096 * 1024, "extracts to more than 4096 KB");
	struct zentry many[40];
	char names[40][16];
	for (int i = 0; i < 40; i++) {
		snprintf(names[i], sizeof(names[i]), "f%d", i);
		many[i] = (struct zentry){ names[i], NULL, 300 << 10, 0 };
	}
	refused(many, 40, 10240 * 1024, "extracts to more than 10240 KB");
	const struct zentry out[] = { { "ok", "1", 1, 0 }, { "../../etc/cron.d/x", "2", 1, 0 } };
	refused(out, 2, 1 << 20, "\"../../etc/cron.d/x\" is not a path inside the workspace: has a \"..\" component");
	const struct zentry abs[] = { { "/etc/passwd", "2", 1, 0 } };
	refused(abs, 1, 1 << 20, "must be a relative path");
	const struct zentry mid[] = { { "a/../../b", "2", 1, 0 } };
	refused(mid, 1, 1 << 20, "has a \"..\" component");
	const struct zentry link[] = { { "passwd", NULL, 0, AE_IFLNK } };
	refused(link, 1, 1 << 20, "\"passwd\" is not a file or a directory");
	const struct zentry both[] = { { "a", "1", 1, 0 }, { "a/b", "2", 1, 0 } };
	refused(both, 2, 1 << 20, "\"a/b\" would be a file and a directory at once");
	const struct zentry both2[] = { { "a/b", "1", 1, 0 }, { "a", "2", 1, 0 } };
	refused(both2, 2, 1 << 20, "would be a file and a directory at once");
	const struct zentry under_src[] = { { "main.c/x", "1", 1, 0 } };
	refused(under_src, 1, 1 << 20, "would be a file and a directory at once");
	const struct zentry art[] = { { "artifacts/x", "1", 1, 0 } };
	refused(art, 1, 1 << 20, "is the artifacts directory");
	struct zentry lots[RUN_SPEC_MAX_WORKSPACE_FILES + 1];
	static char lnames[RUN_SPEC_MAX_WORKSPACE_FILES + 1][16];
	for (int i = 0; i <= RUN_SPEC_MAX_WORKSPACE_FILES; i++) {
		snprintf(lnames[i], sizeof(lnames[i]), "f%d", i);
		lots[i] = (struct zentry){ lnames[i], "x", 1, 0 };
	}
	refused(lots, RUN_SPEC_MAX_WORKSPACE_FILES + 1, 1 << 20, "holds more than 256 files");
	/* bytes that are not a zip */
	struct run_spec rq;
	c_spec(&rq);
	assert_int_equal(judge0_unzip((const unsigned char *)"not a zip at all", 16, 1024, &rq, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "is not a zip archive"));
	/* a zip cut short */
	const struct zentry one[] = { { "a.txt", "some text to cut", 16, 0 } };
	size_t n = make_zip(one, 1);
	assert_int_equal(judge0_unzip(zip, n / 2, 1024, &rq, why, sizeof(why)), -1);
	assert_int_equal(rq.nwfiles, 0);
	run_spec_free(&rq);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(extracts),
		cmocka_unit_test(refusals),
	};
	return cmocka_run_group_tests_name("judge0_files", tests, NULL, NULL);
}
