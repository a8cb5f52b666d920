/* i8042: the reset pulse (0xfe on the command port) and nothing else. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "bus.h"
#include "i8042.h"

struct resets {
	unsigned count;
	void *ctx;
};

static void on_reset(void *ctx)
{
	struct resets *r = ctx;
	r->count++;
	r->ctx = ctx;
}

static void reset_command(void **state)
{
	(void)state;
	struct resets r = { 0 };
	struct i8042 k = { .reset = on_reset, .ctx = &r };
	uint8_t v = I8042_CMD_RESET;
	i8042_write_command(&k, 0, &v, 1);
	assert_int_equal(r.count, 1);
	assert_ptr_equal(r.ctx, &r);
	i8042_write_command(&k, 0, &v, 1);
	assert_int_equal(r.count, 2);
}

static void other_commands_ignored(void **state)
{
	(void)state;
	struct resets r = { 0 };
	struct i8042 k = { .reset = on_reset, .ctx = &r };
	for (unsigned c = 0; c < 256; c++) {
		if (c == I8042_CMD_RESET)
			continue;
		uint8_t v = (uint8_t)c;
		i8042_write_command(&k, 0, &v, 1);
	}
	assert_int_equal(r.count, 0);
	/* 0xfe on the data port is just data */
	uint8_t v = I8042_CMD_RESET;
	i8042_write_data(&k, 0, &v, 1);
	assert_int_equal(r.count, 0);
}

static void reset_without_handler(void **state)
{
	(void)state;
	struct i8042 k = { 0 };
	uint8_t v = I8042_CMD_RESET;
	i8042_write_command(&k, 0, &v, 1);   /* must not crash */
}

static void reads_are_zero(void **state)
{
	(void)state;
	struct i8042 k = { 0 };
	uint8_t buf[8];
	memset(buf, 0xff, sizeof(buf));
	i8042_read(&k, 0, buf, 1);
	assert_int_equal(buf[0], 0);
	assert_int_equal(buf[1], 0xff);
	memset(buf, 0xff, sizeof(buf));
	i8042_read(&k, 0, buf, 4);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(buf[i], 0);
	assert_int_equal(buf[4], 0xff);
}

/* Registered on a bus the way the VM does: status reads 0 (input buffer
 * empty, so Linux's reboot=k proceeds), 0xfe at 0x64 resets. */
static void via_bus(void **state)
{
	(void)state;
	static struct bus b;
	memset(&b, 0, sizeof(b));
	struct resets r = { 0 };
	struct i8042 k = { .reset = on_reset, .ctx = &r };
	assert_int_equal(bus_register(&b, I8042_DATA_PORT, 1, i8042_read, i8042_write_data, &k), 0);
	assert_int_equal(bus_register(&b, I8042_COMMAND_PORT, 1, i8042_read, i8042_write_command, &k), 0);
	uint8_t v = 0xff;
	assert_true(bus_read(&b, I8042_COMMAND_PORT, &v, 1));
	assert_int_equal(v, 0);
	v = 0xff;
	assert_true(bus_read(&b, I8042_DATA_PORT, &v, 1));
	assert_int_equal(v, 0);
	v = I8042_CMD_RESET;
	assert_true(bus_write(&b, I8042_DATA_PORT, &v, 1));
	assert_int_equal(r.count, 0);
	assert_true(bus_write(&b, I8042_COMMAND_PORT, &v, 1));
	assert_int_equal(r.count, 1);
	v = 0xd1;
	assert_true(bus_write(&b, I8042_COMMAND_PORT, &v, 1));
	assert_int_equal(r.count, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reset_command),
		cmocka_unit_test(other_commands_ignored),
		cmocka_unit_test(reset_without_handler),
		cmocka_unit_test(reads_are_zero),
		cmocka_unit_test(via_bus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
