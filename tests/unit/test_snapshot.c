/* The snapshot state file: a round trip, and every way a corrupt,
 * truncated or foreign file is refused before any record is used. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "snapshot.h"

#define BUILD "testbuild0123456"

static struct snap_view view;   /* large: off the stack */

/* A state file with a meta record and one virtio-sized record. */
static void make(struct snap_writer *w, const char *build)
{
	struct snap_meta m = { .memory_bytes = 256u << 20, .ncpus = 2, .ndisks = 2 };
	assert_int_equal(snap_writer_init(w), 0);
	snap_add(w, SNAP_TAG_META, 0, &m, sizeof(m));
	snap_add(w, SNAP_TAG_VIRTIO, 3, &m, sizeof(m) > 8 ? 8 : sizeof(m));
	assert_int_equal(snap_finish(w, build, snap_arch), 0);
}

static int parse(const uint8_t *p, size_t len, char *err, size_t errlen)
{
	return snap_parse(p, len, BUILD, snap_arch, &view, err, errlen);
}

static void round_trip(void **state)
{
	(void)state;
	struct snap_writer w;
	struct snap_meta m = { .memory_bytes = 256u << 20, .ncpus = 2, .ndisks = 2 }, got;
	assert_int_equal(snap_writer_init(&w), 0);
	snap_add(&w, SNAP_TAG_META, 0, &m, sizeof(m));
	assert_int_equal(snap_finish(&w, BUILD, snap_arch), 0);
	char err[256] = "";
	assert_int_equal(parse(w.buf, w.len, err, sizeof(err)), 0);
	assert_int_equal(snap_get(&view, SNAP_TAG_META, 0, &got, sizeof(got)), 0);
	assert_memory_equal(&got, &m, sizeof(m));
	/* another length, or a record it does not hold */
	assert_int_equal(snap_get(&view, SNAP_TAG_META, 0, &got, sizeof(got) - 8), -1);
	assert_int_equal(snap_get(&view, SNAP_TAG_SERIAL, 0, &got, 12), -1);
	snap_writer_release(&w);
	snap_writer_release(&w);   /* twice is safe */
}

static void refuses_wrong_record_size(void **state)
{
	(void)state;
	struct snap_writer w;
	char err[256] = "";
	make(&w, BUILD);   /* its virtio record is 8 bytes, not a transport's state */
	assert_int_equal(parse(w.buf, w.len, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "virtio record of 8 bytes"));
	snap_writer_release(&w);
}

static void refuses_corrupt_truncated_foreign(void **state)
{
	(void)state;
	struct snap_writer w;
	struct snap_meta m = { .ncpus = 1 };
	assert_int_equal(snap_writer_init(&w), 0);
	snap_add(&w, SNAP_TAG_META, 0, &m, sizeof(m));
	assert_int_equal(snap_finish(&w, BUILD, snap_arch), 0);
	char err[256];
	uint8_t *copy = malloc(w.len);
	assert_non_null(copy);

	memcpy(copy, w.buf, w.len);
	copy[w.len - 3] ^= 0x40;
	assert_int_equal(parse(copy, w.len, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "checksum"));

	assert_int_equal(parse(w.buf, w.len - 8, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "truncated"));
	assert_int_equal(parse(w.buf, 10, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "truncated"));

	memcpy(copy, w.buf, w.len);
	copy[0] = 'X';
	assert_int_equal(parse(copy, w.len, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "magic"));

	assert_int_equal(snap_parse(w.buf, w.len, "otherbuild", snap_arch, &view, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "another vmm build"));
	assert_int_equal(snap_parse(w.buf, w.len, BUILD, snap_arch + 1, &view, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "another architecture"));

	struct snap_header h;
	memcpy(&h, w.buf, sizeof(h));
	h.version++;
	memcpy(copy, w.buf, w.len);
	memcpy(copy, &h, sizeof(h));
	assert_int_equal(parse(copy, w.len, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "format version"));
	free(copy);
	snap_writer_release(&w);
}

static void refuses_duplicates_unknown_and_missing_meta(void **state)
{
	(void)state;
	struct snap_writer w;
	struct snap_meta m = { .ncpus = 1 };
	char err[256];
	assert_int_equal(snap_writer_init(&w), 0);
	snap_add(&w, SNAP_TAG_META, 0, &m, sizeof(m));
	snap_add(&w, SNAP_TAG_META, 0, &m, sizeof(m));
	assert_int_equal(snap_finish(&w, BUILD, snap_arch), 0);
	assert_int_equal(parse(w.buf, w.len, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "twice"));
	snap_writer_release(&w);

	assert_int_equal(snap_writer_init(&w), 0);
	snap_add(&w, SNAP_TAG_MAX - 1, 0, &m, 8);
	assert_int_equal(snap_finish(&w, BUILD, snap_arch), 0);
	assert_int_equal(parse(w.buf, w.len, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown record tag"));
	snap_writer_release(&w);

	assert_int_equal(snap_writer_init(&w), 0);
	snap_add(&w, SNAP_TAG_META, 5, &m, sizeof(m));
	assert_int_equal(snap_finish(&w, BUILD, snap_arch), 0);
	assert_int_equal(parse(w.buf, w.len, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "out of range"));
	snap_writer_release(&w);

	assert_int_equal(snap_writer_init(&w), 0);
	assert_int_equal(snap_finish(&w, BUILD, snap_arch), 0);
	assert_int_equal(parse(w.buf, w.len, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no meta record"));
	snap_writer_release(&w);
}

/* The checksum over pieces is the checksum over the whole. */
static void sum_in_pieces(void **state)
{
	(void)state;
	uint8_t buf[4096 + 13];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	struct snap_sum s;
	snap_sum_init(&s);
	snap_sum_add(&s, buf, 8);
	snap_sum_add(&s, buf + 8, 4088);
	snap_sum_add(&s, buf + 4096, 13);
	assert_true(snap_sum_final(&s) == snap_checksum(buf, sizeof(buf)));
	assert_true(snap_checksum(buf, 4096) != snap_checksum(buf, 4097));
}

static struct snap_pages_header pages_header(uint64_t count, uint64_t mem)
{
	struct snap_pages_header h = { .version = SNAP_PAGES_VERSION, .page_size = SNAP_PAGE_SIZE, .count = count,
				       .memory_bytes = mem };
	memcpy(h.magic, SNAP_PAGES_MAGIC, sizeof(h.magic));
	return h;
}

/* A pages file's header must match its size and the guest exactly. */
static void pages_header_checked(void **state)
{
	(void)state;
	char err[256];
	uint64_t mem = 1 << 20, size3 = 4096 + 3 * 4096;   /* header and index padded to a page, then the pages */
	assert_int_equal(snap_pages_data(3), 4096);
	assert_int_equal(snap_pages_data(504), 4096);   /* 64 + 504 * 8 = 4096: the index fills the first page */
	assert_int_equal(snap_pages_data(505), 8192);
	struct snap_pages_header h = pages_header(3, mem);
	assert_int_equal(snap_pages_check_header(&h, size3, mem, err, sizeof(err)), 0);
	h = pages_header(0, mem);
	assert_int_equal(snap_pages_check_header(&h, 4096, mem, err, sizeof(err)), 0);

	h = pages_header(3, mem);
	assert_int_equal(snap_pages_check_header(&h, size3 - 1, mem, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "truncated"));
	assert_int_equal(snap_pages_check_header(&h, size3 + 4096, mem, err, sizeof(err)), -1);
	assert_int_equal(snap_pages_check_header(&h, 10, mem, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "shorter than its header"));
	assert_int_equal(snap_pages_check_header(&h, size3, mem * 2, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "this guest has"));
	h.magic[0] = 'X';
	assert_int_equal(snap_pages_check_header(&h, size3, mem, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "bad magic"));
	h = pages_header(3, mem);
	h.version = 9;
	assert_int_equal(snap_pages_check_header(&h, size3, mem, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "version 9"));
	/* a count past the guest's pages, whose size would wrap */
	h = pages_header(UINT64_MAX / 8, mem);
	assert_int_equal(snap_pages_check_header(&h, size3, mem, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "claims"));
}

/* The index: page-aligned, inside memory, strictly increasing. */
static void pages_index_checked(void **state)
{
	(void)state;
	char err[256];
	uint64_t mem = 1 << 20;
	uint64_t good[] = { 0, 4096, 8192 * 4, mem - 4096 };
	assert_int_equal(snap_pages_check_index(good, 4, mem, err, sizeof(err)), 0);
	uint64_t bads[][2] = { { 4096, 4096 }, { 8192, 4096 }, { 0, 4097 }, { 0, mem }, { 0, UINT64_MAX - 4095 } };
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		assert_int_equal(snap_pages_check_index(bads[i], 2, mem, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "entry 1"));
	}
}

/* A pause record is known to the parser, once. */
static void pause_record_parsed(void **state)
{
	(void)state;
	struct snap_writer w;
	struct snap_meta m = { .memory_bytes = 1 << 20 };
	struct snap_pause p = { .base_checksum = 7, .pages = 2, .pages_checksum = 9 }, got;
	char err[256];
	assert_int_equal(snap_writer_init(&w), 0);
	snap_add(&w, SNAP_TAG_META, 0, &m, sizeof(m));
	snap_add(&w, SNAP_TAG_PAUSE, 0, &p, sizeof(p));
	assert_int_equal(snap_finish(&w, BUILD, snap_arch), 0);
	static struct snap_view v;
	assert_int_equal(snap_parse(w.buf, w.len, BUILD, snap_arch, &v, err, sizeof(err)), 0);
	assert_int_equal(snap_get(&v, SNAP_TAG_PAUSE, 0, &got, sizeof(got)), 0);
	assert_true(got.base_checksum == 7 && got.pages == 2 && got.pages_checksum == 9);
	snap_writer_release(&w);
	assert_int_equal(snap_writer_init(&w), 0);
	snap_add(&w, SNAP_TAG_META, 0, &m, sizeof(m));
	snap_add(&w, SNAP_TAG_PAUSE, 1, &p, sizeof(p));
	assert_int_equal(snap_finish(&w, BUILD, snap_arch), 0);
	assert_int_equal(snap_parse(w.buf, w.len, BUILD, snap_arch, &v, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "pause record index 1"));
	snap_writer_release(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(refuses_wrong_record_size),
		cmocka_unit_test(refuses_corrupt_truncated_foreign),
		cmocka_unit_test(refuses_duplicates_unknown_and_missing_meta),
		cmocka_unit_test(sum_in_pieces),
		cmocka_unit_test(pages_header_checked),
		cmocka_unit_test(pages_index_checked),
		cmocka_unit_test(pause_record_parsed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
