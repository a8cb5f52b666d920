/* The vmm command line: defaults, each option, and everything refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "args.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])) - 1)

/* Parse a NULL-terminated argument list (argv[0] included). */
#define PARSE(cfg, ...)                                          \
	({                                                       \
		char *argv_[] = { "vmm", __VA_ARGS__, NULL };    \
		vmm_args_parse(ARGC(argv_), argv_, (cfg));       \
	})

static void defaults(void **state)
{
	(void)state;
	struct vmm_config cfg;
	memset(&cfg, 0xcc, sizeof(cfg));
	assert_int_equal(PARSE(&cfg, "--kernel", "vmlinux"), 0);
	assert_string_equal(cfg.kernel, "vmlinux");
	assert_null(cfg.cmdline_extra);
	assert_false(cfg.no_default_cmdline);
	assert_int_equal(cfg.memory_mib, VMM_DEFAULT_MEMORY_MIB);
	assert_int_equal(cfg.memory_mib, 256);
	assert_int_equal(cfg.cpus, 1);
	assert_string_equal(cfg.console, "stdout");
	assert_int_equal(cfg.console_limit, VMM_DEFAULT_CONSOLE_LIMIT);
	assert_false(cfg.accept_emulated);
	assert_false(cfg.stats);
}

static void each_option(void **state)
{
	(void)state;
	struct vmm_config cfg;
	assert_int_equal(PARSE(&cfg, "--kernel", "bzImage", "--cmdline", "init=/bin/sh",
			       "--no-default-cmdline", "--memory", "1024", "--cpus", "4",
			       "--console", "/tmp/out", "--console-limit", "0",
			       "--accept-emulated-kvm", "--stats"), 0);
	assert_string_equal(cfg.kernel, "bzImage");
	assert_string_equal(cfg.cmdline_extra, "init=/bin/sh");
	assert_true(cfg.no_default_cmdline);
	assert_int_equal(cfg.memory_mib, 1024);
	assert_int_equal(cfg.cpus, 4);
	assert_string_equal(cfg.console, "/tmp/out");
	assert_int_equal(cfg.console_limit, 0);
	assert_true(cfg.accept_emulated);
	assert_true(cfg.stats);

	/* --opt=value form, and options in any order */
	assert_int_equal(PARSE(&cfg, "--memory=64", "--console=none", "--cpus=32",
			       "--console-limit=18446744073709551615", "--kernel=k"), 0);
	assert_int_equal(cfg.memory_mib, 64);
	assert_string_equal(cfg.console, "none");
	assert_int_equal(cfg.cpus, 32);
	assert_int_equal(cfg.console_limit, UINT64_MAX);
	assert_string_equal(cfg.kernel, "k");
	/* the last of a repeated option wins */
	assert_int_equal(PARSE(&cfg, "--kernel", "a", "--kernel", "b", "--cpus", "2", "--cpus", "3"), 0);
	assert_string_equal(cfg.kernel, "b");
	assert_int_equal(cfg.cpus, 3);
}

static void memory_bounds(void **state)
{
	(void)state;
	struct vmm_config cfg;
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--memory", "2"), 0);
	assert_int_equal(cfg.memory_mib, VMM_MIN_MEMORY_MIB);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--memory", "65536"), 0);
	assert_int_equal(cfg.memory_mib, VMM_MAX_MEMORY_MIB);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--memory", "1"), -1);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--memory", "0"), -1);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--memory", "65537"), -1);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--memory", "4294967296"), -1);
}

static void cpus_bounds(void **state)
{
	(void)state;
	struct vmm_config cfg;
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--cpus", "1"), 0);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--cpus", "32"), 0);
	assert_int_equal(cfg.cpus, 32);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--cpus", "0"), -1);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--cpus", "33"), -1);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--cpus", "4294967297"), -1);   /* 1 mod 2^32 */
}

static void bad_numbers(void **state)
{
	(void)state;
	static const char *bad[] = {
		"12x", "-1", "", "99999999999999999999", " 12", "+12", "0x10", "1e3", "12 ", "1.5",
		"18446744073709551616", "-0", "x",
	};
	static const char *opts[] = { "--memory", "--cpus", "--console-limit" };
	struct vmm_config cfg;
	for (size_t o = 0; o < sizeof(opts) / sizeof(opts[0]); o++) {
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char *argv[] = { "vmm", "--kernel", "k", (char *)opts[o], (char *)bad[i], NULL };
			if (vmm_args_parse(5, argv, &cfg) != -1)
				fail_msg("%s '%s' was accepted", opts[o], bad[i]);
		}
	}
}

static void parse_u64_direct(void **state)
{
	(void)state;
	uint64_t v = 7;
	assert_int_equal(parse_u64("0", 0, 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(parse_u64("10", 0, 10, &v), 0);
	assert_int_equal(v, 10);
	assert_int_equal(parse_u64("007", 0, 10, &v), 0);
	assert_int_equal(v, 7);
	assert_int_equal(parse_u64("18446744073709551615", 0, UINT64_MAX, &v), 0);
	assert_int_equal(v, UINT64_MAX);
	v = 42;
	assert_int_equal(parse_u64("11", 0, 10, &v), -1);
	assert_int_equal(parse_u64("4", 5, 10, &v), -1);
	assert_int_equal(parse_u64("18446744073709551616", 0, UINT64_MAX, &v), -1);
	assert_int_equal(parse_u64("99999999999999999999", 0, UINT64_MAX, &v), -1);
	assert_int_equal(parse_u64("-1", 0, UINT64_MAX, &v), -1);
	assert_int_equal(parse_u64("", 0, UINT64_MAX, &v), -1);
	assert_int_equal(parse_u64(NULL, 0, UINT64_MAX, &v), -1);
	assert_int_equal(parse_u64("12x", 0, UINT64_MAX, &v), -1);
	assert_int_equal(v, 42);   /* untouched on failure */
}

static void unknown_and_malformed(void **state)
{
	(void)state;
	struct vmm_config cfg;
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--bogus"), -1);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "-x"), -1);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "stray"), -1);
	assert_int_equal(PARSE(&cfg, "stray", "--kernel", "k"), -1);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--memory"), -1);   /* missing value */
	assert_int_equal(PARSE(&cfg, "--kernel"), -1);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--stats=yes"), -1);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--console", ""), -1);
	/* after all that, a good line still parses (getopt state reset) */
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--cpus", "2"), 0);
	assert_int_equal(cfg.cpus, 2);
}

static void missing_kernel(void **state)
{
	(void)state;
	struct vmm_config cfg;
	char *argv[] = { "vmm", NULL };
	assert_int_equal(vmm_args_parse(1, argv, &cfg), -1);
	assert_int_equal(PARSE(&cfg, "--memory", "512"), -1);
	assert_int_equal(PARSE(&cfg, "--cmdline", "x", "--cpus", "2"), -1);
}

static void no_default_cmdline_needs_cmdline(void **state)
{
	(void)state;
	struct vmm_config cfg;
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--no-default-cmdline"), -1);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--no-default-cmdline", "--cmdline", "a"), 0);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--cmdline", "", "--no-default-cmdline"), 0);
}

/* --help and --version print to stdout; keep the test log clean. */
static int quiet_stdout(void)
{
	fflush(stdout);
	int saved = dup(STDOUT_FILENO);
	int null = open("/dev/null", O_WRONLY);
	dup2(null, STDOUT_FILENO);
	close(null);
	return saved;
}

static void restore_stdout(int saved)
{
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
}

static void help_and_version(void **state)
{
	(void)state;
	struct vmm_config cfg;
	int saved = quiet_stdout();
	int help = PARSE(&cfg, "--help");
	int help2 = PARSE(&cfg, "--kernel", "k", "--help");
	int version = PARSE(&cfg, "--version");
	restore_stdout(saved);
	assert_int_equal(help, 1);
	assert_int_equal(help2, 1);
	assert_int_equal(version, 1);
}

static void disks_and_vsock(void **state)
{
	(void)state;
	struct vmm_config cfg;
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--disk", "/r.img,ro", "--disk", "w.img",
			       "--disk", "odd,ro,ro", "--vsock-uds", "/tmp/v.sock"), 0);
	assert_int_equal(cfg.ndisks, 3);
	assert_string_equal(cfg.disks[0].path, "/r.img");
	assert_true(cfg.disks[0].ro);
	assert_string_equal(cfg.disks[1].path, "w.img");
	assert_false(cfg.disks[1].ro);
	/* a file whose own name ends in ",ro" */
	assert_string_equal(cfg.disks[2].path, "odd,ro");
	assert_true(cfg.disks[2].ro);
	assert_string_equal(cfg.vsock_uds, "/tmp/v.sock");

	/* defaults: no disks, no vsock */
	assert_int_equal(PARSE(&cfg, "--kernel", "k"), 0);
	assert_int_equal(cfg.ndisks, 0);
	assert_null(cfg.vsock_uds);

	/* refused: empty names, more than the maximum, an empty socket path */
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--disk", ""), -1);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--disk", ",ro"), -1);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--vsock-uds", ""), -1);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--disk", "1", "--disk", "2", "--disk", "3", "--disk",
			       "4", "--disk", "5", "--disk", "6", "--disk", "7", "--disk", "8"), 0);
	assert_int_equal(cfg.ndisks, VMM_MAX_DISKS);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--disk", "1", "--disk", "2", "--disk", "3", "--disk",
			       "4", "--disk", "5", "--disk", "6", "--disk", "7", "--disk", "8", "--disk", "9"), -1);
	static char long_path[VMM_DISK_PATH_MAX + 1];
	memset(long_path, 'p', VMM_DISK_PATH_MAX);
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--disk", long_path), -1);
}

static void cmdline_with_devices(void **state)
{
	(void)state;
	struct vmm_config cfg;
	char buf[1024];
	const char *dev = "virtio_mmio.device=4K@0xd0000000:5";
	/* devices go before --cmdline, which may end with init arguments */
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--cmdline", "root=/dev/vda -- x"), 0);
	assert_int_equal(vmm_build_cmdline(&cfg, dev, buf, sizeof(buf)), 0);
	assert_string_equal(buf, VMM_DEFAULT_CMDLINE " virtio_mmio.device=4K@0xd0000000:5 root=/dev/vda -- x");
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--no-default-cmdline", "--cmdline", "a"), 0);
	assert_int_equal(vmm_build_cmdline(&cfg, dev, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "virtio_mmio.device=4K@0xd0000000:5 a");
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--no-default-cmdline", "--cmdline", ""), 0);
	assert_int_equal(vmm_build_cmdline(&cfg, dev, buf, sizeof(buf)), 0);
	assert_string_equal(buf, dev);
}

static void build_cmdline(void **state)
{
	(void)state;
	struct vmm_config cfg;
	char buf[1024];

	/* default only */
	assert_int_equal(PARSE(&cfg, "--kernel", "k"), 0);
	assert_int_equal(vmm_build_cmdline(&cfg, "", buf, sizeof(buf)), 0);
	assert_string_equal(buf, VMM_DEFAULT_CMDLINE);

	/* append */
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--cmdline", "init=/sbin/agent"), 0);
	assert_int_equal(vmm_build_cmdline(&cfg, "", buf, sizeof(buf)), 0);
	assert_string_equal(buf, VMM_DEFAULT_CMDLINE " init=/sbin/agent");

	/* append an empty string: no trailing space */
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--cmdline", ""), 0);
	assert_int_equal(vmm_build_cmdline(&cfg, "", buf, sizeof(buf)), 0);
	assert_string_equal(buf, VMM_DEFAULT_CMDLINE);

	/* replace */
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--no-default-cmdline", "--cmdline",
			       "console=ttyS0"), 0);
	assert_int_equal(vmm_build_cmdline(&cfg, "", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "console=ttyS0");
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--no-default-cmdline", "--cmdline", ""), 0);
	assert_int_equal(vmm_build_cmdline(&cfg, "", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");

	/* overflow, at the exact boundary */
	assert_int_equal(PARSE(&cfg, "--kernel", "k", "--cmdline", "abc"), 0);
	size_t need = strlen(VMM_DEFAULT_CMDLINE " abc") + 1;
	assert_int_equal(vmm_build_cmdline(&cfg, "", buf, need), 0);
	assert_string_equal(buf, VMM_DEFAULT_CMDLINE " abc");
	assert_int_equal(vmm_build_cmdline(&cfg, "", buf, need - 1), -1);
	assert_int_equal(vmm_build_cmdline(&cfg, "", buf, 1), -1);
	assert_int_equal(vmm_build_cmdline(&cfg, "", buf, 0), -1);
	static char huge[4096];
	memset(huge, 'y', sizeof(huge) - 1);
	cfg.cmdline_extra = huge;
	assert_int_equal(vmm_build_cmdline(&cfg, "", buf, sizeof(buf)), -1);
	cfg.no_default_cmdline = true;
	assert_int_equal(vmm_build_cmdline(&cfg, "", buf, sizeof(buf)), -1);
	/* never writes past len */
	char small[8];
	memset(small, 0x7f, sizeof(small));
	assert_int_equal(vmm_build_cmdline(&cfg, "", small, 4), -1);
	assert_int_equal(small[4], 0x7f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults),
		cmocka_unit_test(each_option),
		cmocka_unit_test(memory_bounds),
		cmocka_unit_test(cpus_bounds),
		cmocka_unit_test(bad_numbers),
		cmocka_unit_test(parse_u64_direct),
		cmocka_unit_test(unknown_and_malformed),
		cmocka_unit_test(missing_kernel),
		cmocka_unit_test(no_default_cmdline_needs_cmdline),
		cmocka_unit_test(help_and_version),
		cmocka_unit_test(build_cmdline),
		cmocka_unit_test(disks_and_vsock),
		cmocka_unit_test(cmdline_with_devices),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
