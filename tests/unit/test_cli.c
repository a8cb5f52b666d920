/* The vmrun command line (host/cli.c): defaults, options, and every
 * refusal as one line in the caller's buffer, without a prefix (main adds
 * "vmrun: ", the only layer that does). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "cli.h"

static struct vmrun_opts o;
static char err[512];

/* cli_parse on a NULL-terminated list of words after "vmrun". */
static int parse(const char *first, ...)
{
	char *argv[64] = { "vmrun" };
	int argc = 1;
	va_list ap;
	va_start(ap, first);
	for (const char *w = first; w && argc < 63; w = va_arg(ap, const char *))
		argv[argc++] = (char *)w;
	va_end(ap);
	err[0] = '\0';
	return cli_parse(argc, argv, &o, err, sizeof(err));
}

static void assert_refused(int rc, const char *want)
{
	assert_int_equal(rc, -1);
	assert_string_equal(err, want);
}

static void defaults_and_options(void **state)
{
	(void)state;
	assert_int_equal(parse("true", NULL), 0);
	assert_int_equal(o.memory_mib, VMRUN_DEFAULT_MEMORY_MIB);
	assert_false(o.allow_weaker_jail);
	assert_int_equal(parse("-m", "512", "--allow-weaker-jail", "--json", "-e", "A=1", "--", "sh", "-c", "x", NULL), 0);
	assert_int_equal(o.memory_mib, 512);
	assert_true(o.allow_weaker_jail && o.json);
	assert_int_equal(o.nenv, 1);
	assert_int_equal(o.argc, 3);
	assert_string_equal(o.argv[0], "sh");
	/* PROGRAM's own options are its own */
	assert_int_equal(parse("ls", "-m", "x", NULL), 0);
	assert_int_equal(o.argc, 3);
}

static void refusals_are_one_line_without_prefix(void **state)
{
	(void)state;
	assert_refused(parse("-m", "huge", "true", NULL), "--memory: 'huge' is not a whole number");
	assert_refused(parse("-m", "8", "true", NULL), "--memory: '8' is not a whole number from 16 to 65536");
	assert_refused(parse("-t", "0", "true", NULL), "--timeout: '0' is not a number of seconds above 0 and at most 86400");
	assert_refused(parse("--bogus", "true", NULL), "unknown option '--bogus' (see --help)");
	assert_refused(parse("-x", "true", NULL), "unknown option '-x' (see --help)");
	assert_refused(parse("-w", NULL), "-w needs a value (see --help)");
	assert_refused(parse("-m", "64", NULL), "no PROGRAM given (see --help)");
	assert_refused(parse("-e", "no-equals", "true", NULL), "--env: 'no-equals' is not NAME=VALUE");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults_and_options),
		cmocka_unit_test(refusals_are_one_line_without_prefix),
	};
	return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
