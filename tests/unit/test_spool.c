/* A run's directory (host/vmrund/spool.c): output records appended and
 * read back (whole, split across reads, over SPOOL_RECORD_MAX), malformed
 * headers, the state a run ended in from its result object, and removing
 * the directory without following a symlink, keeping artifacts/ when
 * asked. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto.h"
#include "spool.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_spool.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[96];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

/* What spool_parse handed fn: the records, their data concatenated. */
struct seen {
	unsigned n;
	unsigned stage[16], stream[16];
	size_t len[16];
	uint8_t *data;
	size_t total;
};

static void collect(void *ctx, unsigned stage, unsigned stream, const uint8_t *data, size_t n)
{
	struct seen *s = ctx;
	assert_true(s->n < 16);
	s->stage[s->n] = stage;
	s->stream[s->n] = stream;
	s->len[s->n++] = n;
	s->data = realloc(s->data, s->total + n + 1);
	assert_non_null(s->data);
	memcpy(s->data + s->total, data, n);
	s->total += n;
}

static void never(void *ctx, unsigned stage, unsigned stream, const uint8_t *data, size_t n)
{
	(void)ctx, (void)stage, (void)stream, (void)data, (void)n;
	fail_msg("a record from a malformed buffer");
}

/* The whole file at path, its length in *len. */
static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static int open_output(char *path, size_t cap)
{
	snprintf(path, cap, "%s/%s", dir, SPOOL_OUTPUT);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	return fd;
}

static void append_and_parse(void **state)
{
	(void)state;
	char path[128];
	int fd = open_output(path, sizeof(path));
	const uint8_t bin[] = { 0, 1, 2, 0xff, '\n' };
	assert_int_equal(spool_append(fd, PROTO_STAGE_COMPILE, PROTO_STDERR, (const uint8_t *)"warning\n", 8), 0);
	assert_int_equal(spool_append(fd, PROTO_STAGE_RUN, PROTO_STDOUT, (const uint8_t *)"hello ", 6), 0);
	assert_int_equal(spool_append(fd, PROTO_STAGE_RUN, PROTO_STDOUT, bin, sizeof(bin)), 0);
	assert_int_equal(spool_append(fd, PROTO_STAGE_RUN, PROTO_STDERR, (const uint8_t *)"oops", 4), 0);
	assert_int_equal(spool_append(fd, PROTO_STAGE_RUN, PROTO_STDOUT, NULL, 0), 0);   /* nothing: no record */
	close(fd);

	size_t len;
	uint8_t *buf = slurp(path, &len);
	assert_int_equal(len, 4 * sizeof(struct spool_record) + 8 + 6 + sizeof(bin) + 4);
	/* the header as the contract lays it out */
	struct spool_record h;
	memcpy(&h, buf, sizeof(h));
	assert_int_equal(h.stage, PROTO_STAGE_COMPILE);
	assert_int_equal(h.stream, PROTO_STDERR);
	assert_int_equal(h.zero, 0);
	assert_int_equal(h.len, 8);

	struct seen s = { 0 };
	assert_int_equal(spool_parse(buf, len, collect, &s), (long)len);
	assert_int_equal(s.n, 4);
	assert_int_equal(s.stage[0], PROTO_STAGE_COMPILE);
	assert_int_equal(s.stream[0], PROTO_STDERR);
	assert_int_equal(s.len[0], 8);
	assert_int_equal(s.stage[1], PROTO_STAGE_RUN);
	assert_int_equal(s.stream[1], PROTO_STDOUT);
	assert_int_equal(s.len[1], 6);
	assert_int_equal(s.stream[2], PROTO_STDOUT);
	assert_int_equal(s.len[2], sizeof(bin));
	assert_int_equal(s.stream[3], PROTO_STDERR);
	assert_int_equal(s.total, 8 + 6 + sizeof(bin) + 4);
	assert_memory_equal(s.data, "warning\nhello \0\1\2\xff\noops", s.total);
	free(s.data);

	/* an empty buffer, or less than a header: nothing, nothing consumed */
	memset(&s, 0, sizeof(s));
	assert_int_equal(spool_parse(buf, 0, collect, &s), 0);
	assert_int_equal(spool_parse(buf, sizeof(struct spool_record) - 1, collect, &s), 0);
	assert_int_equal(s.n, 0);
	free(buf);
}

/* The file read in pieces of every size: a record cut anywhere waits for
 * the rest, and the records come out the same. */
static void split_reads(void **state)
{
	(void)state;
	char path[128];
	int fd = open_output(path, sizeof(path));
	assert_int_equal(spool_append(fd, PROTO_STAGE_RUN, PROTO_STDOUT, (const uint8_t *)"first", 5), 0);
	assert_int_equal(spool_append(fd, PROTO_STAGE_RUN, PROTO_STDERR, (const uint8_t *)"second!", 7), 0);
	assert_int_equal(spool_append(fd, PROTO_STAGE_RUN, PROTO_STDOUT, (const uint8_t *)"3", 1), 0);
	close(fd);
	size_t len;
	uint8_t *file = slurp(path, &len);
	size_t first = sizeof(struct spool_record) + 5, second = first + sizeof(struct spool_record) + 7;

	/* cut inside the second record's header, then inside its data */
	struct seen s = { 0 };
	assert_int_equal(spool_parse(file, first + 3, collect, &s), (long)first);
	assert_int_equal(s.n, 1);
	assert_int_equal(spool_parse(file, second - 1, collect, &s), (long)first);
	assert_int_equal(s.n, 2);   /* the first again: the caller re-reads from what was consumed */
	free(s.data);

	for (size_t chunk = 1; chunk <= len; chunk++) {
		/* like a reader of a growing file: a buffer of what is not consumed yet */
		uint8_t buf[256];
		size_t have = 0, off = 0;
		memset(&s, 0, sizeof(s));
		while (off < len || have) {
			size_t n = len - off < chunk ? len - off : chunk;
			memcpy(buf + have, file + off, n);
			have += n;
			off += n;
			long used = spool_parse(buf, have, collect, &s);
			assert_true(used >= 0 && (size_t)used <= have);
			memmove(buf, buf + used, have - (size_t)used);
			have -= (size_t)used;
			if (off == len && have) {
				fail_msg("chunk %zu: %zu bytes left unparsed", chunk, have);
			}
		}
		assert_int_equal(s.n, 3);
		assert_int_equal(s.len[0], 5);
		assert_int_equal(s.stream[1], PROTO_STDERR);
		assert_int_equal(s.len[2], 1);
		assert_memory_equal(s.data, "firstsecond!3", 13);
		free(s.data);
	}
	free(file);
}

static void malformed(void **state)
{
	(void)state;
	uint8_t buf[64] = { 0 };
	struct spool_record good = { .stage = PROTO_STAGE_RUN, .stream = PROTO_STDOUT, .len = 2 };
	struct spool_record bad[] = {
		{ .stage = PROTO_STAGE_RUN, .stream = PROTO_STDOUT, .zero = 1, .len = 2 },
		{ .stage = 0, .stream = PROTO_STDOUT, .len = 2 },
		{ .stage = 3, .stream = PROTO_STDOUT, .len = 2 },
		{ .stage = PROTO_STAGE_RUN, .stream = 0, .len = 2 },
		{ .stage = PROTO_STAGE_RUN, .stream = PROTO_EXIT, .len = 2 },
		{ .stage = PROTO_STAGE_COMPILE, .stream = PROTO_STDERR, .len = SPOOL_RECORD_MAX + 1 },
		{ .stage = 0xff, .stream = 0xff, .zero = 0xffff, .len = 0xffffffff },
		/* a next run's mark: its number alone, and only the run stage's */
		{ .stage = PROTO_STAGE_RUN, .stream = SPOOL_NEXT_RUN, .len = 2 },
		{ .stage = PROTO_STAGE_COMPILE, .stream = SPOOL_NEXT_RUN, .len = 4 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(buf, &bad[i], sizeof(bad[i]));
		assert_int_equal(spool_parse(buf, sizeof(buf), never, NULL), -1);
		/* a header whose data is not all there is still judged */
		assert_int_equal(spool_parse(buf, sizeof(struct spool_record), never, NULL), -1);
		/* behind a good record: still the file is not ours */
		memcpy(buf, &good, sizeof(good));
		memcpy(buf + sizeof(good) + 2, &bad[i], sizeof(bad[i]));
		struct seen s = { 0 };
		assert_int_equal(spool_parse(buf, sizeof(buf), collect, &s), -1);
		free(s.data);
		memset(buf, 0, sizeof(buf));
	}
	/* SPOOL_RECORD_MAX itself is a header's largest length: it waits for its data */
	struct spool_record max = { .stage = PROTO_STAGE_RUN, .stream = PROTO_STDERR, .len = SPOOL_RECORD_MAX };
	memcpy(buf, &max, sizeof(max));
	assert_int_equal(spool_parse(buf, sizeof(buf), never, NULL), 0);
}

static void big_record_split(void **state)
{
	(void)state;
	char path[128];
	int fd = open_output(path, sizeof(path));
	size_t n = 2 * SPOOL_RECORD_MAX + 12345;
	uint8_t *data = malloc(n);
	assert_non_null(data);
	for (size_t i = 0; i < n; i++)
		data[i] = (uint8_t)(i * 31 + (i >> 16));
	assert_int_equal(spool_append(fd, PROTO_STAGE_RUN, PROTO_STDERR, data, n), 0);
	assert_int_equal(spool_append(fd, PROTO_STAGE_RUN, PROTO_STDOUT, data, SPOOL_RECORD_MAX), 0);   /* exactly one */
	close(fd);
	size_t len;
	uint8_t *buf = slurp(path, &len);
	assert_int_equal(len, 4 * sizeof(struct spool_record) + n + SPOOL_RECORD_MAX);
	struct seen s = { 0 };
	assert_int_equal(spool_parse(buf, len, collect, &s), (long)len);
	assert_int_equal(s.n, 4);
	assert_int_equal(s.len[0], SPOOL_RECORD_MAX);
	assert_int_equal(s.len[1], SPOOL_RECORD_MAX);
	assert_int_equal(s.len[2], 12345);
	assert_int_equal(s.len[3], SPOOL_RECORD_MAX);
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(s.stage[i], PROTO_STAGE_RUN);
		assert_int_equal(s.stream[i], PROTO_STDERR);
	}
	assert_int_equal(s.stream[3], PROTO_STDOUT);
	assert_memory_equal(s.data, data, n);
	assert_memory_equal(s.data + n, data, SPOOL_RECORD_MAX);
	free(s.data);
	free(buf);
	free(data);

	/* a write error is -1 with errno */
	assert_int_equal(spool_append(-1, PROTO_STAGE_RUN, PROTO_STDOUT, (const uint8_t *)"x", 1), -1);
}

/* As the daemon does: the result's outcome read once, then the state. */
static enum run_state state_from(const json_t *result, bool cancelled)
{
	struct run_outcome o;
	return spool_state_of(result_outcome_parse(result, &o) == 0 ? &o : NULL, cancelled);
}

/* The state a run's result gives it: the outcome the run decided
 * (result_outcome, tested in test_result.c), a cancel over anything, and
 * a failure for a result that says none. */
static void state_of(void **state)
{
	(void)state;
	assert_int_equal(spool_state_of(NULL, false), RS_FAILED);
	assert_int_equal(spool_state_of(NULL, true), RS_CANCELLED);
	json_t *ok = json_pack("{s:s, s:{s:s, s:[]}}", "termination", "exited", "outcome", "state", "succeeded",
			       "limits_hit");
	json_t *failed = json_pack("{s:s, s:{s:s, s:[]}}", "termination", "exited", "outcome", "state", "failed",
				   "limits_hit");
	json_t *timeout = json_pack("{s:s, s:{s:s, s:[s]}}", "termination", "compile_error", "outcome", "state",
				    "timed_out", "limits_hit", "timeout");
	/* decided by the run, not again here: an exit 0 that says failed */
	json_t *said = json_pack("{s:s, s:i, s:{s:s, s:[]}}", "termination", "exited", "exit_code", 0, "outcome",
				 "state", "failed", "limits_hit");
	/* a result without an outcome (a worker from before outcomes) */
	json_t *old = json_pack("{s:s, s:i, s:b}", "termination", "exited", "exit_code", 0, "timed_out", 0);
	json_t *not_object = json_pack("[s]", "exited");
	assert_non_null(ok), assert_non_null(failed), assert_non_null(timeout), assert_non_null(said);
	assert_non_null(old), assert_non_null(not_object);
	assert_int_equal(state_from(ok, false), RS_SUCCEEDED);
	assert_int_equal(state_from(failed, false), RS_FAILED);
	assert_int_equal(state_from(timeout, false), RS_TIMED_OUT);
	assert_int_equal(state_from(said, false), RS_FAILED);
	assert_int_equal(state_from(old, false), RS_FAILED);
	assert_int_equal(state_from(not_object, false), RS_FAILED);
	/* cancelled wins over whatever the result says */
	assert_int_equal(state_from(ok, true), RS_CANCELLED);
	assert_int_equal(state_from(timeout, true), RS_CANCELLED);
	/* the result is not changed */
	assert_int_equal(json_object_size(ok), 2);
	json_t *all[] = { ok, failed, timeout, said, old, not_object };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		json_decref(all[i]);
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* A run's directory under dir/run, with a symlink to outside and one to
 * its own artifacts; outside/ with a file that must survive. */
static void make_tree(char *run, size_t cap, char *outside, size_t ocap)
{
	char p[256];
	snprintf(run, cap, "%s/run", dir);
	snprintf(outside, ocap, "%s/outside", dir);
	mkdir(outside, 0755);
	snprintf(p, sizeof(p), "%s/precious", outside);
	put(p, "keep me\n");
	assert_int_equal(mkdir(run, 0755), 0);
	const char *dirs[] = { "tmp", "tmp/run.x", "tmp/run.x/deep", "files", "files/sub", "artifacts", "artifacts/out" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", run, dirs[i]);
		assert_int_equal(mkdir(p, 0755), 0);
	}
	const char *files[] = { SPOOL_REQUEST, SPOOL_OUTPUT, SPOOL_RESULT, SPOOL_VM_ID, SPOOL_LOG,
				"tmp/run.x/deep/f", "files/main.py", "files/sub/data", "artifacts/a.txt",
				"artifacts/out/b.bin" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", run, files[i]);
		put(p, "x");
	}
	/* symlinks to a directory and a file outside the tree, and a dangling one */
	snprintf(p, sizeof(p), "%s/files/escape", run);
	assert_int_equal(symlink(outside, p), 0);
	snprintf(p, sizeof(p), "%s/tmp/run.x/deep/escape-file", run);
	char target[256];
	snprintf(target, sizeof(target), "%s/precious", outside);
	assert_int_equal(symlink(target, p), 0);
	snprintf(p, sizeof(p), "%s/dangling", run);
	assert_int_equal(symlink("/nonexistent/nowhere", p), 0);
	/* an unwritable directory: root removes it anyway */
	snprintf(p, sizeof(p), "%s/tmp/run.x", run);
	chmod(p, 0500);
}

static void clean_all(void **state)
{
	(void)state;
	char run[128], outside[128], p[256];
	make_tree(run, sizeof(run), outside, sizeof(outside));
	assert_int_equal(spool_clean(run, false), 0);
	assert_false(exists(run));
	snprintf(p, sizeof(p), "%s/precious", outside);
	assert_true(exists(p));   /* the symlinks' targets survive */
	assert_true(exists(outside));
	/* gone already: nothing to do */
	assert_int_equal(spool_clean(run, false), 0);
	assert_int_equal(spool_clean(run, true), 0);

	/* the run directory itself a symlink: the link goes, not its target */
	assert_int_equal(symlink(outside, run), 0);
	assert_int_equal(spool_clean(run, false), 0);
	assert_false(exists(run));
	assert_true(exists(p));
}

static void clean_keep(void **state)
{
	(void)state;
	char run[128], outside[128], p[256];
	make_tree(run, sizeof(run), outside, sizeof(outside));
	/* a symlink inside artifacts/ stays with it, untouched */
	snprintf(p, sizeof(p), "%s/artifacts/link", run);
	assert_int_equal(symlink(outside, p), 0);
	assert_int_equal(spool_clean(run, true), 0);
	assert_true(exists(run));
	const char *kept[] = { "artifacts", "artifacts/a.txt", "artifacts/out/b.bin", "artifacts/link", SPOOL_OUTPUT };
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", run, kept[i]);
		if (!exists(p))
			fail_msg("%s removed", kept[i]);
	}
	const char *gone[] = { SPOOL_REQUEST, SPOOL_RESULT, SPOOL_VM_ID, SPOOL_LOG, SPOOL_FILES, "dangling" };
	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", run, gone[i]);
		if (exists(p))
			fail_msg("%s kept", gone[i]);
	}
	snprintf(p, sizeof(p), "%s/precious", outside);
	assert_true(exists(p));
	/* again: only output and artifacts/ there, nothing to do */
	assert_int_equal(spool_clean(run, true), 0);
	snprintf(p, sizeof(p), "%s/artifacts/a.txt", run);
	assert_true(exists(p));
	/* then the retention time is over */
	assert_int_equal(spool_clean(run, false), 0);
	assert_false(exists(run));
	snprintf(p, sizeof(p), "%s/precious", outside);
	assert_true(exists(p));

	/* keep_artifacts on a run directory that is a symlink: not followed */
	assert_int_equal(symlink(outside, run), 0);
	assert_int_equal(spool_clean(run, true), -1);
	assert_true(exists(p));
	unlink(run);
}

/* Each stage's streams in the order they arrived, invalid bytes made
 * U+FFFD: Piston's "output". */
static void output_text(void **state)
{
	(void)state;
	char path[128], *out[2];
	snprintf(path, sizeof(path), "%s/" SPOOL_OUTPUT, dir);
	spool_output_text(path, out);
	assert_null(out[0]);
	assert_null(out[1]);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
	assert_true(fd >= 0);
	assert_int_equal(spool_append(fd, PROTO_STAGE_RUN, PROTO_STDOUT, (const uint8_t *)"a\n", 2), 0);
	assert_int_equal(spool_append(fd, PROTO_STAGE_COMPILE, PROTO_STDERR, (const uint8_t *)"warn\n", 5), 0);
	assert_int_equal(spool_append(fd, PROTO_STAGE_RUN, PROTO_STDERR, (const uint8_t *)"b\xff\n", 3), 0);
	assert_int_equal(spool_append(fd, PROTO_STAGE_RUN, PROTO_STDOUT, (const uint8_t *)"c\n", 2), 0);
	close(fd);
	spool_output_text(path, out);
	assert_string_equal(out[0], "warn\n");
	assert_string_equal(out[1], "a\nb\xef\xbf\xbd\nc\n");
	free(out[0]);
	free(out[1]);
	/* a repeated run's next run: the text is its output alone */
	fd = open(path, O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	uint32_t next = 2;
	assert_int_equal(spool_append(fd, PROTO_STAGE_RUN, SPOOL_NEXT_RUN, (const uint8_t *)&next, sizeof(next)), 0);
	assert_int_equal(spool_append(fd, PROTO_STAGE_RUN, PROTO_STDOUT, (const uint8_t *)"d\n", 2), 0);
	close(fd);
	spool_output_text(path, out);
	assert_string_equal(out[0], "");
	assert_string_equal(out[1], "d\n");
	free(out[0]);
	free(out[1]);
}

static void utf8(void **state)
{
	(void)state;
	struct {
		const char *in;
		size_t n;
		const char *out;
	} cases[] = {
		{ "plain", 5, "plain" },
		{ "\xc3\xa9t\xc3\xa9", 5, "\xc3\xa9t\xc3\xa9" },             /* valid two-byte forms */
		{ "\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80" },             /* a four-byte one */
		{ "\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd" },               /* overlong '/' */
		{ "\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* a surrogate */
		{ "\xf4\x90\x80\x80", 4,
		  "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },            /* past U+10FFFF */
		{ "ab\xe2\x82", 4, "ab\xef\xbf\xbd\xef\xbf\xbd" },            /* cut short at the end */
		{ "a\0b", 3, "a\xef\xbf\xbd" "b" },                          /* NUL */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len;
		char *t = spool_utf8((const uint8_t *)cases[i].in, cases[i].n, &len);
		assert_non_null(t);
		assert_string_equal(t, cases[i].out);
		assert_int_equal(len, strlen(cases[i].out));
		free(t);
	}
}

/* A file's whole content, for comparing. */
static void read_back(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t n = fread(buf, 1, cap - 1, f);
	buf[n] = '\0';
	fclose(f);
}

static void write_file(void **state)
{
	(void)state;
	char path[128], link[128], buf[64];
	struct stat st;
	snprintf(path, sizeof(path), "%s/f", dir);
	assert_int_equal(spool_write_file(path, "first", 5, true, 0640), 0);
	read_back(path, buf, sizeof(buf));
	assert_string_equal(buf, "first");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0640 & ~umask(umask(0)));
	/* excl: never over an existing file. */
	assert_int_equal(spool_write_file(path, "again", 5, true, 0600), -1);
	assert_int_equal(errno, EEXIST);
	read_back(path, buf, sizeof(buf));
	assert_string_equal(buf, "first");
	/* Else truncated: nothing of a longer old content stays. */
	assert_int_equal(spool_write_file(path, "2nd", 3, false, 0600), 0);
	read_back(path, buf, sizeof(buf));
	assert_string_equal(buf, "2nd");
	assert_int_equal(spool_write_file(path, "", 0, false, 0600), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 0);
	/* Never through a symlink, whichever way it is opened. */
	snprintf(link, sizeof(link), "%s/l", dir);
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(spool_write_file(link, "x", 1, false, 0600), -1);
	assert_int_equal(errno, ELOOP);
	assert_int_equal(spool_write_file(link, "x", 1, true, 0600), -1);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 0);
}

static void read_file(void **state)
{
	(void)state;
	char path[128], link[128], fifo[128];
	uint8_t *buf;
	size_t len;
	snprintf(path, sizeof(path), "%s/f", dir);
	assert_int_equal(spool_write_file(path, "abc", 3, true, 0600), 0);
	assert_int_equal(spool_read_file(AT_FDCWD, path, 3, &buf, &len), 0);
	assert_int_equal(len, 3);
	assert_string_equal((char *)buf, "abc");   /* a NUL after the bytes */
	free(buf);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);
	assert_int_equal(spool_read_file(dfd, "f", 100, &buf, &len), 0);
	free(buf);
	assert_int_equal(spool_read_file(dfd, "f", 2, &buf, &len), -1);      /* over max */
	assert_int_equal(spool_read_file(dfd, "missing", 100, &buf, &len), -1);
	assert_int_equal(spool_read_file(dfd, ".", 100, &buf, &len), -1);    /* a directory */
	snprintf(link, sizeof(link), "%s/l", dir);
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(spool_read_file(dfd, "l", 100, &buf, &len), -1);    /* never through a symlink */
	snprintf(fifo, sizeof(fifo), "%s/p", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(spool_read_file(dfd, "p", 100, &buf, &len), -1);    /* nor a FIFO, without hanging */
	assert_int_equal(spool_write_file(path, "", 0, false, 0600), 0);
	assert_int_equal(spool_read_file(dfd, "f", 0, &buf, &len), 0);
	assert_int_equal(len, 0);
	assert_int_equal(buf[0], 0);
	free(buf);
	close(dfd);
}

/* The worker's TMPDIR: under run_dir, on its disk (not /run's tmpfs), and
 * short enough for the run library's sockets. */
static void lib_tmp(void **state)
{
	(void)state;
	char out[PATH_MAX], dir[128];
	assert_int_equal(spool_lib_tmp("/var/lib/vmrun/runs", out, sizeof(out)), 0);
	assert_string_equal(out, "/var/lib/vmrun/runs/" SPOOL_LIB_TMP);
	/* the longest run_dir that fits, and one byte more */
	size_t max = SPOOL_LIB_TMP_MAX - strlen("/" SPOOL_LIB_TMP);
	memset(dir, 'a', sizeof(dir));
	dir[0] = '/';
	dir[max] = '\0';
	assert_int_equal(spool_lib_tmp(dir, out, sizeof(out)), 0);
	assert_int_equal(strlen(out), SPOOL_LIB_TMP_MAX);
	dir[max] = 'a';
	dir[max + 1] = '\0';
	assert_int_equal(spool_lib_tmp(dir, out, sizeof(out)), -1);
	/* and a buffer too small */
	assert_int_equal(spool_lib_tmp("/r", out, 4), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(append_and_parse, setup, teardown),
		cmocka_unit_test_setup_teardown(split_reads, setup, teardown),
		cmocka_unit_test(malformed),
		cmocka_unit_test_setup_teardown(big_record_split, setup, teardown),
		cmocka_unit_test(state_of),
		cmocka_unit_test_setup_teardown(clean_all, setup, teardown),
		cmocka_unit_test_setup_teardown(clean_keep, setup, teardown),
		cmocka_unit_test_setup_teardown(output_text, setup, teardown),
		cmocka_unit_test(utf8),
		cmocka_unit_test(lib_tmp),
		cmocka_unit_test_setup_teardown(write_file, setup, teardown),
		cmocka_unit_test_setup_teardown(read_file, setup, teardown),
	};
	return cmocka_run_group_tests_name("spool", tests, NULL, NULL);
}
