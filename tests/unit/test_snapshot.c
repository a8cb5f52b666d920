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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(refuses_wrong_record_size),
		cmocka_unit_test(refuses_corrupt_truncated_foreign),
		cmocka_unit_test(refuses_duplicates_unknown_and_missing_meta),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
