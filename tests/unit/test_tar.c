/* The artifacts' tar (host/vmrund/tar.c): every header of every name
 * length up to the cap fits its buffer exactly (ASan watches the edge);
 * the names an archive must not hold are refused; and archives of real
 * files, the 1014-byte path among them, read back through
 * libarchive (an independent reader) to the same names, sizes and bytes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tar.h"

/* A name of n bytes: components of 'A'..., each at most 255 bytes. */
static void make_name(char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (i % 256 == 255 && i + 1 < n) ? '/' : (char)('A' + i % 26);
	buf[n] = '\0';
}

static unsigned octal_field(const char *f, size_t width)
{
	unsigned v = 0;
	for (size_t i = 0; i < width && f[i] >= '0' && f[i] <= '7'; i++)
		v = v * 8 + (unsigned)(f[i] - '0');
	return v;
}

static void assert_checksum(const char *h)
{
	unsigned sum = 0;
	for (int i = 0; i < TAR_BLOCK; i++)
		sum += (i >= 148 && i < 156) ? ' ' : (unsigned char)h[i];
	assert_int_equal(octal_field(h + 148, 8), sum);
}

/* Each length from 1 to past the cap, in a heap buffer of exactly
 * TAR_HDR_MAX: the header's size is whole blocks, within the buffer,
 * and a pax header comes exactly when the name is over 100 bytes. */
static void test_every_length_fits(void **state)
{
	(void)state;
	char name[TAR_NAME_MAX + 64];
	for (size_t n = 1; n < sizeof(name) - 1; n++) {
		char *out = malloc(TAR_HDR_MAX);
		assert_non_null(out);
		make_name(name, n);
		size_t len = tar_file_header(out, name, n, 12345, 1700000000);
		if (n > TAR_NAME_MAX) {
			assert_int_equal(len, 0);
		} else {
			assert_int_not_equal(len, 0);
			assert_true(len <= TAR_HDR_MAX);
			assert_int_equal(len % TAR_BLOCK, 0);
			/* "21 hdrcharset=BINARY\n" and "LEN path=NAME\n", whose
			 * LEN has 3 digits to 999, then 4 */
			size_t rec = TAR_PAX_CHARSET_LEN + n + 10 + (n + 10 >= 1000);
			assert_int_equal(len, n > 100 ? 2 * TAR_BLOCK + TAR_ROUND(rec) : TAR_BLOCK);
			assert_checksum(out);
			assert_checksum(out + len - TAR_BLOCK);
			assert_int_equal(out[len - TAR_BLOCK + 156], '0');
		}
		free(out);
	}
}

static void test_refused_names(void **state)
{
	(void)state;
	static const char *bad[] = { "/etc/passwd", "..", ".", "a/../b", "a/./b", "a//b", "a/", "../a", "a/.." };
	char out[TAR_HDR_MAX];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_false(tar_name_ok(bad[i], strlen(bad[i])));
		assert_int_equal(tar_file_header(out, bad[i], strlen(bad[i]), 1, 0), 0);
	}
	assert_false(tar_name_ok("", 0));
	assert_false(tar_name_ok("a\0b", 3));
	assert_true(tar_name_ok("a..b/.c/..d", 11));
	assert_true(tar_name_ok("\xff\x01 \n", 4));
}

/* ---- archives read back by libarchive -------------------------------- */

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_tar.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

/* A file at rel under dir, its parents made, holding len bytes of seed. */
static void put(const char *rel, size_t len, unsigned seed)
{
	char path[2048];
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	for (char *s = path + strlen(dir) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		mkdir(path, 0755);
		*s = '/';
	}
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	for (size_t i = 0; i < len; i++)
		fputc((int)((i * 7 + seed) & 0xff), f);
	fclose(f);
}

/* The whole archive of list's files, read in pieces of step bytes. */
static char *archive_of(json_t *list, size_t step, size_t *len)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);
	struct tar_stream *t = tar_stream_new(dfd, list);
	assert_non_null(t);
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	for (size_t got;; n += got) {
		if (cap - n < step)
			buf = realloc(buf, cap *= 2);
		got = tar_stream_read(t, buf + n, step);
		if (!got)
			break;
	}
	tar_stream_free(t);
	*len = n;
	return buf;
}

struct want {
	const char *name;
	size_t size;
	unsigned seed;
};

/* The archive holds exactly want's files, in order, with their bytes. */
static void assert_reads_back(const char *buf, size_t len, const struct want *want, size_t nwant)
{
	assert_int_equal(len % TAR_BLOCK, 0);
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	assert_int_equal(archive_read_open_memory(a, buf, len), ARCHIVE_OK);
	struct archive_entry *e;
	size_t i = 0;
	for (; archive_read_next_header(a, &e) == ARCHIVE_OK; i++) {
		assert_true(i < nwant);
		assert_string_equal(archive_entry_pathname(e), want[i].name);
		assert_int_equal(archive_entry_size(e), want[i].size);
		char *data = malloc(want[i].size + 1);
		assert_int_equal(archive_read_data(a, data, want[i].size + 1), (la_ssize_t)want[i].size);
		for (size_t k = 0; k < want[i].size; k++)
			assert_int_equal((unsigned char)data[k], (k * 7 + want[i].seed) & 0xff);
		free(data);
	}
	assert_int_equal(i, nwant);
	archive_read_free(a);
}

/* The path: A(255)/A(255)/A(255)/A(246), 1014 bytes, whose pax
 * record was over 1024 bytes and whose ustar header went 512 bytes past
 * the old header buffer; then the longest path allowed, 1023 bytes. */
static void test_longest_paths_read_back(void **state)
{
	(void)state;
	char p1014[1100], p1023[1100];
	memset(p1014, 'A', 1014);
	p1014[255] = p1014[511] = p1014[767] = '/';
	p1014[1014] = '\0';
	memset(p1023, 'B', 1023);
	p1023[255] = p1023[511] = p1023[767] = '/';
	p1023[1023] = '\0';
	put(p1014, 3000, 1);
	put(p1023, 512, 2);
	put("short.txt", 0, 3);
	json_t *list = json_pack("[{s:s},{s:s},{s:s}]", "path", p1014, "path", p1023, "path", "short.txt");
	struct want want[] = { { p1014, 3000, 1 }, { p1023, 512, 2 }, { "short.txt", 0, 3 } };
	size_t steps[] = { 1, 7, 512, 65536 };
	for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		size_t len;
		char *buf = archive_of(list, steps[s], &len);
		assert_reads_back(buf, len, want, 3);
		free(buf);
	}
	json_decref(list);
}

/* Names of every kind the guest might leave: UTF-8, spaces, exactly 100
 * and 101 bytes, over 100 and not UTF-8 (hdrcharset=BINARY keeps its
 * bytes); and entries left out: missing, a symlink, a directory, a
 * refused name, a name with a NUL, a non-string. */
static void test_odd_names_and_leftouts(void **state)
{
	(void)state;
	char n100[101], n101[102], bin[130];
	make_name(n100, 100);
	make_name(n101, 101);
	make_name(bin, 120);
	bin[3] = '\xff';
	bin[4] = '\xc0';
	put(bin, 9, 8);
	put("caf\xc3\xa9 \xe2\x82\xac/x y", 10, 4);
	put(n100, 100, 5);
	put(n101, 101, 6);
	put("real", 5, 7);
	char link[128], sub[128];
	snprintf(link, sizeof(link), "%s/link", dir);
	assert_int_equal(symlink("real", link), 0);
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	assert_int_equal(mkdir(sub, 0755), 0);
	json_t *list = json_pack("[{s:s},{s:s},{s:s},{s:s},{s:s},{s:s},{s:s},{s:s#},{s:i},{s:s}]", "path",
				 "caf\xc3\xa9 \xe2\x82\xac/x y", "path", "missing", "path", "link", "path", "sub", "path",
				 n100, "path", "sub/../real", "path", n101, "path", "real\0x", (size_t)6, "path", 3,
				 "path", "real");
	/* jansson refuses such a string unless told not to check it */
	json_t *o = json_object();
	json_object_set_new(o, "path", json_stringn_nocheck(bin, 120));
	json_array_append_new(list, o);
	assert_non_null(list);
	struct want want[] = { { "caf\xc3\xa9 \xe2\x82\xac/x y", 10, 4 }, { n100, 100, 5 }, { n101, 101, 6 },
			       { "real", 5, 7 }, { bin, 9, 8 } };
	size_t len;
	char *buf = archive_of(list, 4096, &len);
	assert_non_null(memmem(buf, len, "21 hdrcharset=BINARY\n", 21));
	assert_reads_back(buf, len, want, 5);
	free(buf);
	json_decref(list);
}

/* An empty list: the two zero blocks alone. */
static void test_empty_archive(void **state)
{
	(void)state;
	json_t *list = json_array();
	size_t len;
	char *buf = archive_of(list, 100, &len);
	assert_int_equal(len, 2 * TAR_BLOCK);
	for (size_t i = 0; i < len; i++)
		assert_int_equal(buf[i], 0);
	free(buf);
	json_decref(list);
}

/* A size over ustar's 11 octal digits goes in a pax "size" record. */
static void test_huge_size_in_pax(void **state)
{
	(void)state;
	char out[TAR_HDR_MAX + TAR_BLOCK];
	memset(out, 0, sizeof(out));
	uint64_t size = 10ULL << 30;
	size_t len = tar_file_header(out, "big", 3, size, 1);
	assert_int_equal(len, 3 * TAR_BLOCK);
	assert_non_null(memmem(out + TAR_BLOCK, TAR_BLOCK, "20 size=10737418240\n", 20));
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	assert_int_equal(archive_read_open_memory(a, out, len + TAR_BLOCK), ARCHIVE_OK);
	struct archive_entry *e;
	assert_int_equal(archive_read_next_header(a, &e), ARCHIVE_OK);
	assert_string_equal(archive_entry_pathname(e), "big");
	assert_int_equal(archive_entry_size(e), (la_int64_t)size);
	archive_read_free(a);
}

/* A long UTF-8 name with a decomposed character ("e" and U+0301) comes
 * back with the guest's bytes: libarchive, in a UTF-8 locale, turns a pax
 * path it is told is UTF-8 into NFC ("\xc3\xa9"), which the fuzzer found. */
static void test_long_decomposed_name_kept(void **state)
{
	(void)state;
	char name[120];
	make_name(name, 110);
	memcpy(name + 110, "/e\xcc\x81", 4);
	size_t namelen = 114;
	char out[TAR_HDR_MAX + 2 * TAR_BLOCK];
	memset(out, 0, sizeof(out));
	size_t len = tar_file_header(out, name, namelen, 0, 1);
	assert_int_equal(len, 3 * TAR_BLOCK);
	assert_non_null(memmem(out + TAR_BLOCK, TAR_BLOCK, "21 hdrcharset=BINARY\n", 21));
	char *was = strdup(setlocale(LC_ALL, NULL));
	assert_non_null(setlocale(LC_ALL, "C.UTF-8"));
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	assert_int_equal(archive_read_open_memory(a, out, len + 2 * TAR_BLOCK), ARCHIVE_OK);
	struct archive_entry *e;
	assert_int_equal(archive_read_next_header(a, &e), ARCHIVE_OK);
	const char *got = archive_entry_pathname(e);
	assert_non_null(got);
	assert_int_equal(strlen(got), namelen);
	assert_memory_equal(got, name, namelen);
	archive_read_free(a);
	setlocale(LC_ALL, was);
	free(was);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_length_fits),
		cmocka_unit_test(test_refused_names),
		cmocka_unit_test_setup_teardown(test_longest_paths_read_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_odd_names_and_leftouts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_archive, setup, teardown),
		cmocka_unit_test(test_huge_size_in_pax),
		cmocka_unit_test(test_long_decomposed_name_kept),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
