/* Port I/O and MMIO dispatch: registration rules, offsets handed to devices,
 * and what unclaimed or malformed accesses do. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "bus.h"

struct dev {
	unsigned reads, writes;
	uint64_t last_off;
	uint32_t last_len;
	uint8_t last_data[8];
	uint8_t fill;
};

static void dev_read(void *opaque, uint64_t off, uint8_t *data, uint32_t len)
{
	struct dev *d = opaque;
	d->reads++;
	d->last_off = off;
	d->last_len = len;
	for (uint32_t i = 0; i < len; i++)
		data[i] = (uint8_t)(d->fill + i);
}

static void dev_write(void *opaque, uint64_t off, const uint8_t *data, uint32_t len)
{
	struct dev *d = opaque;
	d->writes++;
	d->last_off = off;
	d->last_len = len;
	memcpy(d->last_data, data, len);
}

static struct bus *new_bus(void)
{
	static struct bus b;
	memset(&b, 0, sizeof(b));
	return &b;
}

static void register_overlap_refused(void **state)
{
	(void)state;
	struct bus *b = new_bus();
	struct dev d = { 0 };
	assert_int_equal(bus_register(b, 0x100, 0x10, dev_read, dev_write, &d), 0);
	assert_int_equal(bus_register(b, 0x100, 0x10, dev_read, dev_write, &d), -1);   /* same */
	assert_int_equal(bus_register(b, 0xf8, 0x10, dev_read, dev_write, &d), -1);    /* left */
	assert_int_equal(bus_register(b, 0x10f, 0x10, dev_read, dev_write, &d), -1);   /* right */
	assert_int_equal(bus_register(b, 0x104, 0x2, dev_read, dev_write, &d), -1);    /* inside */
	assert_int_equal(bus_register(b, 0x0, 0x1000, dev_read, dev_write, &d), -1);   /* around */
	assert_int_equal(b->n, 1);
	/* adjacent ranges are fine */
	assert_int_equal(bus_register(b, 0xf0, 0x10, dev_read, dev_write, &d), 0);
	assert_int_equal(bus_register(b, 0x110, 0x10, dev_read, dev_write, &d), 0);
	assert_int_equal(b->n, 3);
}

static void register_wrap_and_empty_refused(void **state)
{
	(void)state;
	struct bus *b = new_bus();
	struct dev d = { 0 };
	assert_int_equal(bus_register(b, 0x100, 0, dev_read, dev_write, &d), -1);
	assert_int_equal(bus_register(b, UINT64_MAX, 2, dev_read, dev_write, &d), -1);
	assert_int_equal(bus_register(b, 0x1000, UINT64_MAX, dev_read, dev_write, &d), -1);
	assert_int_equal(bus_register(b, UINT64_MAX - 0xfff, 0x1001, dev_read, dev_write, &d), -1);
	assert_int_equal(b->n, 0);
	/* the last byte below 2^64 */
	assert_int_equal(bus_register(b, UINT64_MAX - 1, 1, dev_read, dev_write, &d), 0);
	uint8_t v[8] = { 0 };
	assert_true(bus_read(b, UINT64_MAX - 1, v, 1));
	assert_false(bus_read(b, UINT64_MAX - 1, v, 2));
	assert_false(bus_read(b, UINT64_MAX, v, 1));
	assert_false(bus_read(b, UINT64_MAX, v, 8));
}

static void register_full(void **state)
{
	(void)state;
	struct bus *b = new_bus();
	struct dev d = { 0 };
	for (unsigned i = 0; i < BUS_MAX_RANGES; i++)
		assert_int_equal(bus_register(b, i * 0x10, 0x10, dev_read, dev_write, &d), 0);
	assert_int_equal(bus_register(b, 0x10000, 0x10, dev_read, dev_write, &d), -1);
	assert_int_equal(b->n, BUS_MAX_RANGES);
}

static void dispatch_offsets(void **state)
{
	(void)state;
	struct bus *b = new_bus();
	struct dev a = { .fill = 0x10 }, c = { .fill = 0x80 };
	assert_int_equal(bus_register(b, 0x3f8, 8, dev_read, dev_write, &a), 0);
	assert_int_equal(bus_register(b, 0xd0000000, 0x200, dev_read, dev_write, &c), 0);

	uint8_t buf[8];
	assert_true(bus_read(b, 0x3fd, buf, 1));
	assert_int_equal(a.reads, 1);
	assert_int_equal(a.last_off, 5);
	assert_int_equal(a.last_len, 1);
	assert_int_equal(buf[0], 0x10);

	assert_true(bus_read(b, 0xd0000100, buf, 4));
	assert_int_equal(c.reads, 1);
	assert_int_equal(c.last_off, 0x100);
	assert_int_equal(c.last_len, 4);
	assert_int_equal(buf[3], 0x83);

	const uint8_t w[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	assert_true(bus_write(b, 0xd00001f8, w, 8));   /* the last 8 bytes */
	assert_int_equal(c.writes, 1);
	assert_int_equal(c.last_off, 0x1f8);
	assert_int_equal(c.last_len, 8);
	assert_memory_equal(c.last_data, w, 8);
	assert_true(bus_write(b, 0x3f8, w, 1));
	assert_int_equal(a.writes, 1);
	assert_int_equal(a.last_off, 0);
	assert_int_equal(a.last_data[0], 1);
	assert_int_equal(atomic_load(&b->unhandled), 0);
}

static void unclaimed_read(void **state)
{
	(void)state;
	struct bus *b = new_bus();
	struct dev d = { 0 };
	assert_int_equal(bus_register(b, 0x60, 1, dev_read, dev_write, &d), 0);
	uint8_t buf[8];
	for (uint32_t len = 1; len <= 8; len++) {
		memset(buf, 0, sizeof(buf));
		assert_false(bus_read(b, 0x1000, buf, len));
		for (uint32_t i = 0; i < len; i++)
			assert_int_equal(buf[i], 0xff);
		for (uint32_t i = len; i < 8; i++)
			assert_int_equal(buf[i], 0);
	}
	assert_int_equal(atomic_load(&b->unhandled), 8);
	/* partly inside a device: not claimed, device not called */
	memset(buf, 0, sizeof(buf));
	assert_false(bus_read(b, 0x60, buf, 2));
	assert_false(bus_read(b, 0x5f, buf, 2));
	assert_int_equal(buf[0], 0xff);
	assert_int_equal(buf[1], 0xff);
	assert_int_equal(d.reads, 0);
	assert_int_equal(atomic_load(&b->unhandled), 10);
}

static void unclaimed_write(void **state)
{
	(void)state;
	struct bus *b = new_bus();
	struct dev d = { 0 };
	assert_int_equal(bus_register(b, 0x60, 1, dev_read, dev_write, &d), 0);
	const uint8_t v[8] = { 0 };
	assert_false(bus_write(b, 0x61, v, 1));
	assert_false(bus_write(b, 0x60, v, 4));
	assert_int_equal(d.writes, 0);
	assert_int_equal(atomic_load(&b->unhandled), 2);
}

static void null_callbacks(void **state)
{
	(void)state;
	struct bus *b = new_bus();
	struct dev d = { 0 };
	assert_int_equal(bus_register(b, 0x80, 1, NULL, dev_write, &d), 0);   /* write-only */
	assert_int_equal(bus_register(b, 0x81, 1, dev_read, NULL, &d), 0);    /* read-only */
	uint8_t v = 0;
	assert_false(bus_read(b, 0x80, &v, 1));
	assert_int_equal(v, 0xff);
	assert_true(bus_write(b, 0x80, &v, 1));
	assert_false(bus_write(b, 0x81, &v, 1));
	assert_true(bus_read(b, 0x81, &v, 1));
	assert_int_equal(atomic_load(&b->unhandled), 2);
}

static void bad_lengths(void **state)
{
	(void)state;
	struct bus *b = new_bus();
	struct dev d = { 0 };
	assert_int_equal(bus_register(b, 0x1000, 0x100, dev_read, dev_write, &d), 0);
	uint8_t buf[32];
	memset(buf, 0x11, sizeof(buf));
	/* len 0: refused, nothing written */
	assert_false(bus_read(b, 0x1000, buf, 0));
	assert_int_equal(buf[0], 0x11);
	assert_false(bus_write(b, 0x1000, buf, 0));
	/* len > 8: refused, at most 8 bytes of ones written */
	assert_false(bus_read(b, 0x1000, buf, 9));
	for (unsigned i = 0; i < 8; i++)
		assert_int_equal(buf[i], 0xff);
	for (unsigned i = 8; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0x11);
	assert_false(bus_read(b, 0x1000, buf, UINT32_MAX));
	assert_int_equal(buf[8], 0x11);
	assert_false(bus_write(b, 0x1000, buf, 16));
	assert_int_equal(d.reads, 0);
	assert_int_equal(d.writes, 0);
	assert_int_equal(atomic_load(&b->unhandled), 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(register_overlap_refused),
		cmocka_unit_test(register_wrap_and_empty_refused),
		cmocka_unit_test(register_full),
		cmocka_unit_test(dispatch_offsets),
		cmocka_unit_test(unclaimed_read),
		cmocka_unit_test(unclaimed_write),
		cmocka_unit_test(null_callbacks),
		cmocka_unit_test(bad_lengths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
