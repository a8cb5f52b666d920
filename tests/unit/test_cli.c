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
	assert_int_equal(o.memory_mib, 0);   /* not given: the run library decides */
	assert_true(o.timeout_s == 0);
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

/* --source FILE...: more files up to "--", then the run stage's ARGs;
 * stage limits only with --source. */
static void source_mode(void **state)
{
	(void)state;
	assert_int_equal(parse("--runtime", "c", "--run-cpu-time", "1.5", "--compile-memory", "512", "--source", "a.c",
			       "b.c", "--", "x", "-y", NULL), 0);
	assert_int_equal(o.nsources, 2);
	assert_string_equal(o.sources[1], "b.c");
	assert_int_equal(o.argc, 2);
	assert_string_equal(o.argv[1], "-y");
	assert_int_equal(o.run.cpu_time_ms, 1500);
	assert_int_equal(o.compile.memory_mib, 512);
	/* getopt took the "--" itself: everything after it is ARGs */
	assert_int_equal(parse("--runtime", "c", "--source", "a.c", "--", "b.c", NULL), 0);
	assert_int_equal(o.nsources, 1);
	assert_int_equal(o.argc, 1);
	assert_string_equal(o.argv[0], "b.c");
	/* repeated --source, no ARGs */
	assert_int_equal(parse("--runtime", "py", "--source", "a.py", "--source", "b.py", "--run-timeout", "3", NULL), 0);
	assert_int_equal(o.nsources, 2);
	assert_int_equal(o.argc, 0);
	assert_true(o.run.timeout_s == 3);
	assert_refused(parse("--source", "a.c", NULL), "--source needs --runtime (see `vmrun runtimes`)");
	assert_refused(parse("--run-timeout", "3", "true", NULL), "--run-timeout is a source-mode limit: it needs --source");
	assert_refused(parse("--runtime", "c", "--compile-memory", "8", "--source", "a.c", NULL),
		       "--compile-memory: '8' is not a whole number from 16 to 65536");
	assert_refused(parse("--runtime", "c", "--run-cpu-time", "-1", "--source", "a.c", NULL),
		       "--run-cpu-time: '-1' is not a number of seconds above 0 and at most 86400");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults_and_options),
		cmocka_unit_test(refusals_are_one_line_without_prefix),
		cmocka_unit_test(source_mode),
	};
	return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
