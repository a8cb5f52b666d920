/* The one-line messages' helpers (host/run/errmsg.h): errf's -1 and its
 * truncation, and hostile text made printable for quoting. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "errmsg.h"

static void formats(void **state)
{
	(void)state;
	char err[8];
	assert_int_equal(errf(err, sizeof(err), "%s %d", "value", 12345), -1);
	assert_string_equal(err, "value 1");   /* cut to the buffer, still a string */
}

static void printable(void **state)
{
	(void)state;
	char out[16];
	assert_string_equal(errmsg_printable(out, sizeof(out), "plain text"), "plain text");
	assert_string_equal(errmsg_printable(out, sizeof(out), "a\nb\rc\x1b[2J"), "a?b?c?[2J");
	assert_string_equal(errmsg_printable(out, sizeof(out), "\x7f\xc3\xa9"), "???");   /* DEL, UTF-8 bytes */
	assert_string_equal(errmsg_printable(out, 5, "longer than that"), "long");
	assert_string_equal(errmsg_printable(out, 1, "x"), "");
	out[0] = 'z';
	errmsg_printable(out, 0, "x");   /* no room: nothing written */
	assert_int_equal(out[0], 'z');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(formats),
		cmocka_unit_test(printable),
	};
	return cmocka_run_group_tests_name("errmsg", tests, NULL, NULL);
}
