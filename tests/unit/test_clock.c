/* The host's clocks (host/run/clock.h): the monotonic ones agree and never go
 * back, and the ISO 8601 text is what the API and the audit log print. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "clock.h"

static void monotonic(void **state)
{
	(void)state;
	int64_t ms = clock_mono_ms(), us = clock_mono_us();
	assert_true(ms > 0);
	/* Read a microsecond later, the µs clock is the ms one's, scaled. */
	assert_true(us / 1000 >= ms && us / 1000 - ms < 1000);
	int64_t last = clock_mono_ms();
	for (int i = 0; i < 1000; i++) {
		int64_t now = clock_mono_ms();
		assert_true(now >= last);
		last = now;
	}
	/* The wall clock is after 2020 and on another scale than the uptime. */
	assert_true(clock_wall_ms() > 1577836800000LL);
}

static void iso8601(void **state)
{
	(void)state;
	char buf[CLOCK_ISO8601_MAX];
	assert_string_equal(clock_iso8601(1764617686973LL, buf), "2025-12-01T19:34:46.973Z");
	assert_string_equal(clock_iso8601(5, buf), "1970-01-01T00:00:00.005Z");
	assert_string_equal(clock_iso8601(253402300799999LL, buf), "9999-12-31T23:59:59.999Z");
	assert_true(strlen(buf) < CLOCK_ISO8601_MAX);
	/* before 1970: the milliseconds count on from the second before */
	assert_string_equal(clock_iso8601(-1, buf), "1969-12-31T23:59:59.999Z");
	assert_string_equal(clock_iso8601(-9223372036855LL, buf), "1677-09-21T00:12:43.145Z");
	assert_string_equal(clock_iso8601(CLOCK_ISO8601_FIRST_MS, buf), "0001-01-01T00:00:00.000Z");
	/* outside years 1..9999 (a guest's forged mtime): none */
	assert_null(clock_iso8601(CLOCK_ISO8601_FIRST_MS - 1, buf));
	assert_null(clock_iso8601(CLOCK_ISO8601_LAST_MS + 1, buf));
	assert_null(clock_iso8601(INT64_MIN, buf));
	assert_null(clock_iso8601(INT64_MAX, buf));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(monotonic),
		cmocka_unit_test(iso8601),
	};
	return cmocka_run_group_tests_name("clock", tests, NULL, NULL);
}
