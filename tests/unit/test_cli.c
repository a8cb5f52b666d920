/* The vmrun command line (host/cli/cli.c): defaults, options, and every
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
	cli_free(&o);   /* the last parse's spec */
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
	assert_int_equal(o.spec.memory_mib, 0);   /* not given: the run library decides */
	assert_true(o.spec.timeout_s == 0);
	assert_false(o.allow_weaker_jail);
	assert_int_equal(parse("-m", "512", "--allow-weaker-jail", "--json", "-e", "A=1", "--", "sh", "-c", "x", NULL), 0);
	assert_int_equal(o.spec.memory_mib, 512);
	assert_true(o.allow_weaker_jail && o.json);
	assert_int_equal(o.spec.nenv, 1);
	assert_int_equal(o.spec.argc, 3);
	assert_string_equal(o.spec.argv[0], "sh");
	/* PROGRAM's own options are its own */
	assert_int_equal(parse("ls", "-m", "x", NULL), 0);
	assert_int_equal(o.spec.argc, 3);
}

static void refusals_are_one_line_without_prefix(void **state)
{
	(void)state;
	assert_refused(parse("-m", "huge", "true", NULL), "--memory: 'huge' is not a whole number");
	assert_refused(parse("-m", "8", "true", NULL), "--memory: '8' is not a whole number from 16 to 65536");
	/* 0 is a spec's "not given": no cap of 0 bytes that would read as the default */
	assert_refused(parse("--max-output", "0", "true", NULL),
		       "--max-output: '0' is not a whole number from 1 to 18446744073709551615");
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
	assert_int_equal(o.spec.argc, 2);
	assert_string_equal(o.spec.argv[1], "-y");
	assert_int_equal(o.spec.run.cpu_time_ms, 1500);
	assert_int_equal(o.spec.compile.memory_mib, 512);
	/* getopt took the "--" itself: everything after it is ARGs */
	assert_int_equal(parse("--runtime", "c", "--source", "a.c", "--", "b.c", NULL), 0);
	assert_int_equal(o.nsources, 1);
	assert_int_equal(o.spec.argc, 1);
	assert_string_equal(o.spec.argv[0], "b.c");
	/* repeated --source, no ARGs */
	assert_int_equal(parse("--runtime", "py", "--source", "a.py", "--source", "b.py", "--run-timeout", "3", NULL), 0);
	assert_int_equal(o.nsources, 2);
	assert_int_equal(o.spec.argc, 0);
	assert_true(o.spec.run.timeout_s == 3);
	assert_refused(parse("--source", "a.c", NULL), "--source needs --runtime (see `vmrun runtimes`)");
	assert_refused(parse("--run-timeout", "3", "true", NULL), "--run-timeout is a source-mode limit: it needs --source");
	assert_refused(parse("--runtime", "c", "--compile-memory", "8", "--source", "a.c", NULL),
		       "--compile-memory: '8' is not a whole number from 16 to 65536");
	assert_refused(parse("--runtime", "c", "--run-cpu-time", "-1", "--source", "a.c", NULL),
		       "--run-cpu-time: '-1' is not a number of seconds above 0 and at most 86400");
}

/* rules of o's spec of one kind (addr: address rules), as written again,
 * joined by spaces. */
static const char *rules(bool addr)
{
	static char out[1024];
	out[0] = '\0';
	for (unsigned i = 0; i < o.spec.nnet; i++) {
		char text[300];
		if ((o.spec.net[i].kind == NET_RULE_ADDR) != addr)
			continue;
		net_rule_format(&o.spec.net[i], text, sizeof(text));
		snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", out[0] ? " " : "", text);
	}
	return out;
}

/* --allow-net and --allow-net-addr: repeatable, parsed here once into the
 * spec, normalized (the ceiling comes with the plan). */
static void network_options(void **state)
{
	(void)state;
	assert_int_equal(parse("true", NULL), 0);
	assert_int_equal(o.spec.nnet, 0);
	char bucher[] = "B\xc3\xbc" "cher.Example.", up[] = "API.example.com:8443";
	assert_int_equal(parse("--allow-net", up, "--allow-net-addr", "10.0.0.0/8", "--allow-net", "*.pypi.org",
			       "--allow-net", bucher, "--allow-net-addr", "[fd00::/8]:8080", "python3", NULL), 0);
	assert_int_equal(o.spec.nnet, 5);
	/* in the order given, lowercased, IDNA converted, the port kept */
	assert_string_equal(rules(false), "api.example.com:8443 *.pypi.org xn--bcher-kva.example");
	assert_string_equal(rules(true), "10.0.0.0/8 [fd00::/8]:8080");
	assert_int_equal(o.spec.net[0].kind, NET_RULE_HOST);
	assert_int_equal(o.spec.net[1].kind, NET_RULE_ADDR);
	assert_int_equal(o.spec.net[2].kind, NET_RULE_SUFFIX);
	assert_int_equal(o.spec.argc, 1);
	assert_string_equal(o.spec.argv[0], "python3");
	/* =VALUE works too; after PROGRAM they are PROGRAM's */
	assert_int_equal(parse("--allow-net=a.test", "sh", "--allow-net", "10.0.0.1", NULL), 0);
	assert_int_equal(o.spec.nnet, 1);
	assert_string_equal(rules(false), "a.test");
	assert_int_equal(o.spec.argc, 3);
	/* each parse starts from none */
	assert_int_equal(parse("true", NULL), 0);
	assert_int_equal(o.spec.nnet, 0);
}

static void assert_refused_has(int rc, const char *part)
{
	assert_int_equal(rc, -1);
	if (!strstr(err, part) || strchr(err, '\n'))
		fail_msg("error \"%s\" is not one line with \"%s\"", err, part);
}

static void network_option_refusals(void **state)
{
	(void)state;
	assert_refused(parse("--allow-net", "10.0.0.1", "true", NULL),
		       "--allow-net 10.0.0.1: 10.0.0.1 is an IP address: allow it with --allow-net-addr");
	/* any spelling of an address, with a port or not */
	assert_refused_has(parse("--allow-net", "0x7f.1:443", "true", NULL), "--allow-net 0x7f.1:443: 0x7f.1 is an IP address");
	assert_refused_has(parse("--allow-net", "[::1]", "true", NULL), "--allow-net [::1]: ");
	assert_refused_has(parse("--allow-net", "bad..name", "true", NULL), "--allow-net bad..name: ");
	assert_refused_has(parse("--allow-net", "example.com:0", "true", NULL),
			   "--allow-net example.com:0: port \"0\" is not 1 to 65535");
	assert_refused(parse("--allow-net", "", "true", NULL), "--allow-net : an empty network rule");
	assert_refused_has(parse("--allow-net-addr", "example.com", "true", NULL), "--allow-net-addr example.com: ");
	assert_refused_has(parse("--allow-net-addr", "10.0.0.1/8", "true", NULL),
			   "--allow-net-addr 10.0.0.1/8: 10.0.0.1/8 has bits set past its prefix");
	assert_refused_has(parse("--allow-net-addr", "[fd00::/8", "true", NULL), "--allow-net-addr [fd00::/8: ");
	/* a bad one after good ones */
	assert_refused_has(parse("--allow-net", "a.test", "--allow-net", "b.test:x", "true", NULL), "--allow-net b.test:x: ");
	/* hostile text is shown printable, on one line */
	assert_refused_has(parse("--allow-net", "a\nb\x1b.test", "true", NULL), "--allow-net a?b?.test: ");
	assert_null(strchr(err, '\x1b'));
	assert_refused(parse("--allow-net", NULL), "--allow-net needs a value (see --help)");
}

/* At most RUN_SPEC_MAX_NET_RULES in all, as the run's proxy holds:
 * that many of either kind, or of both together, and not one more. */
static void network_option_limit(void **state)
{
	(void)state;
	static char *argv[2 * (RUN_SPEC_MAX_NET_RULES + 1) + 3];
	for (int opt = 0; opt < 3; opt++) {   /* names, addresses, both in turn */
		for (int extra = 0; extra < 2; extra++) {
			int argc = 0;
			argv[argc++] = "vmrun";
			for (int i = 0; i < RUN_SPEC_MAX_NET_RULES + extra; i++) {
				bool addr = opt == 1 || (opt == 2 && i % 2);
				argv[argc++] = addr ? "--allow-net-addr" : "--allow-net";
				argv[argc++] = addr ? "10.0.0.0/8" : "a.test";
			}
			argv[argc++] = "true";
			argv[argc] = NULL;
			err[0] = '\0';
			cli_free(&o);
			int rc = cli_parse(argc, argv, &o, err, sizeof(err));
			if (!extra) {
				assert_int_equal(rc, 0);
				assert_int_equal(o.spec.nnet, RUN_SPEC_MAX_NET_RULES);
			} else {
				assert_refused(rc, opt == 1 ? "--allow-net-addr: at most 64 rules in all"
							    : "--allow-net: at most 64 rules in all");
			}
		}
	}
}

/* --cold: a run that boots from scratch; warm by default. */
static void cold_option(void **state)
{
	(void)state;
	assert_int_equal(parse("true", NULL), 0);
	assert_false(o.cold);
	assert_int_equal(parse("--cold", "--", "true", NULL), 0);
	assert_true(o.cold);
	/* after PROGRAM it is PROGRAM's */
	assert_int_equal(parse("true", "--cold", NULL), 0);
	assert_false(o.cold);
	assert_int_equal(o.spec.argc, 2);
}

/* cli_parse_snapshot on "vmrun snapshot" and the words given. */
static int parse_snapshot(const char *first, ...)
{
	char *argv[32] = { "vmrun", "snapshot" };
	int argc = 2;
	va_list ap;
	va_start(ap, first);
	for (const char *w = first; w && argc < 31; w = va_arg(ap, const char *))
		argv[argc++] = (char *)w;
	va_end(ap);
	err[0] = '\0';
	cli_free(&o);
	return cli_parse_snapshot(argc, argv, &o, err, sizeof(err));
}

static void snapshot_subcommand(void **state)
{
	(void)state;
	assert_int_equal(parse_snapshot(NULL), 0);
	assert_string_equal(o.spec.runtime, "");
	assert_null(o.rootfs);
	assert_int_equal(o.spec.memory_mib, 0);   /* the run library's default */
	assert_int_equal(o.spec.cpus, 0);   /* the run library's default */
	assert_int_equal(parse_snapshot("--runtime", "python", "--kernel", "/k", "-m", "512", "--cpus", "2",
					"--allow-weaker-jail", "-v", NULL), 0);
	assert_string_equal(o.spec.runtime, "python");
	assert_string_equal(o.kernel, "/k");
	assert_int_equal(o.spec.memory_mib, 512);
	assert_int_equal(o.spec.cpus, 2);
	assert_true(o.allow_weaker_jail && o.verbose);
	assert_int_equal(parse_snapshot("--rootfs", "/r.ext4", "--memory", "256", NULL), 0);
	assert_string_equal(o.rootfs, "/r.ext4");
	/* refusals: one line, no prefix */
	assert_refused(parse_snapshot("--runtime", "python", "--rootfs", "/r", NULL),
		       "snapshot: --runtime and --rootfs name two root images; give one");
	assert_refused(parse_snapshot("--cpus", "33", NULL), "--cpus: '33' is not a whole number from 1 to 32");
	assert_refused(parse_snapshot("--memory", NULL), "snapshot: --memory needs a value");
	assert_refused(parse_snapshot("--workspace", "x", NULL),
		       "snapshot: unknown option '--workspace' (see vmrun snapshot --help)");
	assert_refused(parse_snapshot("-w", "x", NULL), "snapshot: unknown option '-w' (see vmrun snapshot --help)");
	assert_refused(parse_snapshot("true", NULL), "snapshot: unexpected 'true' (it takes options only)");
	assert_refused(parse_snapshot("--cold", NULL), "snapshot: unknown option '--cold' (see vmrun snapshot --help)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults_and_options),
		cmocka_unit_test(refusals_are_one_line_without_prefix),
		cmocka_unit_test(source_mode),
		cmocka_unit_test(network_options),
		cmocka_unit_test(network_option_refusals),
		cmocka_unit_test(network_option_limit),
		cmocka_unit_test(cold_option),
		cmocka_unit_test(snapshot_subcommand),
	};
	return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
