/* The policy (host/policy.c): the manifest as the default allowlist, a
 * --policy file's allow lines and ceilings, and what it refuses: unknown
 * keys, bad values, and lines too long for the reader, which must fail the
 * load as a whole (never be split into a second line), as must a NUL byte.
 * Also the program check as the agent resolves names. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy.h"

struct fx {
	char dir[256];
	char manifest[300];
	char file[300];
	char err[512];
	struct policy p;
};

static void write_bytes(const char *path, const char *data, size_t n)
{
	FILE *f = fopen(path, "we");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

static void write_text(const char *path, const char *text)
{
	write_bytes(path, text, strlen(text));
}

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	const char *tmp = getenv("TMPDIR");
	snprintf(f->dir, sizeof(f->dir), "%s/test_policy.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->manifest, sizeof(f->manifest), "%s/programs.txt", f->dir);
	snprintf(f->file, sizeof(f->file), "%s/policy", f->dir);
	write_text(f->manifest, "/usr/bin/python3\n/usr/bin/sh\n/bin/sh\n/usr/bin/env\n");
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	policy_free(&f->p);
	unlink(f->manifest);
	unlink(f->file);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* policy_load from the manifest file, then policy_apply of file (NULL:
 * none) with the given trust. */
static int load_paths(struct policy *p, const char *manifest, const char *file, enum policy_trust trust, char *err,
		      size_t errlen)
{
	FILE *m = fopen(manifest, "re");
	if (!m)
		return -1;
	int rc = policy_load(p, m, manifest, err, errlen);
	fclose(m);
	if (rc || !file)
		return rc;
	FILE *f = fopen(file, "re");
	if (!f)
		return -1;
	rc = policy_apply(p, f, file, trust, err, errlen);
	fclose(f);
	return rc;
}

/* Load with the policy file holding text, as root's; returns the result. */
static int load(struct fx *f, const char *text)
{
	policy_free(&f->p);
	write_text(f->file, text);
	f->err[0] = '\0';
	return load_paths(&f->p, f->manifest, f->file, POLICY_MAY_RAISE, f->err, sizeof(f->err));
}

/* The same as a caller's --policy, which may only lower. */
static int load_lower(struct fx *f, const char *text)
{
	policy_free(&f->p);
	write_text(f->file, text);
	f->err[0] = '\0';
	return load_paths(&f->p, f->manifest, f->file, POLICY_LOWER_ONLY, f->err, sizeof(f->err));
}

static enum policy_verdict check(struct fx *f, const char *prog)
{
	char resolved[POLICY_PATH_MAX];
	return policy_check_program(&f->p, prog, resolved, sizeof(resolved));
}

/* A refusal: one line, naming the file's line. */
static void assert_refused_at(struct fx *f, int rc, const char *line_no)
{
	if (rc != -1)
		fail_msg("policy accepted (allow list of %u); want a refusal at %s", f->p.nallow, line_no);
	if (!strstr(f->err, line_no) || strchr(f->err, '\n'))
		fail_msg("error \"%s\" does not name %s on one line", f->err, line_no);
}

static void test_defaults_and_manifest(void **state)
{
	struct fx *f = *state;
	assert_int_equal(load_paths(&f->p, f->manifest, NULL, POLICY_MAY_RAISE, f->err, sizeof(f->err)), 0);
	assert_int_equal(f->p.nallow, 4);
	assert_int_equal(f->p.max_timeout_s, 300);
	assert_int_equal(f->p.max_output, 64u << 20);
	assert_int_equal(check(f, "python3"), POLICY_ALLOWED);
	assert_int_equal(check(f, "/bin/sh"), POLICY_ALLOWED);
	assert_int_equal(check(f, "perl"), POLICY_NOT_FOUND);
	assert_int_equal(check(f, "./x"), POLICY_DENIED);
}

static void test_file_replaces_allowlist(void **state)
{
	struct fx *f = *state;
	assert_int_equal(load(f, "# a comment\n\n  allow /usr/bin/python3\nmax_output 1000\n\tnproc 7\n"), 0);
	assert_int_equal(f->p.nallow, 1);
	assert_int_equal(f->p.max_output, 1000);
	assert_int_equal(f->p.nproc, 7);
	assert_int_equal(check(f, "python3"), POLICY_ALLOWED);
	assert_int_equal(check(f, "sh"), POLICY_DENIED);
	/* the last line needs no newline */
	assert_int_equal(load(f, "max_cpus 2"), 0);
	assert_int_equal(f->p.max_cpus, 2);
}

static void test_bad_lines(void **state)
{
	struct fx *f = *state;
	assert_refused_at(f, load(f, "max_cpus 2\nmax_cpus 99\n"), "line 2");
	assert_refused_at(f, load(f, "frobnicate 1\n"), "line 1");
	assert_refused_at(f, load(f, "\n\nallow relative/path\n"), "line 3");
	assert_refused_at(f, load(f, "max_output 10 20\n"), "line 1");
	assert_refused_at(f, load(f, "max_output -1\n"), "line 1");
}

/* The finding of issue 12: a comment longer than the reader's buffer must
 * not end early and let its tail read as an allow line. */
static void test_long_line_refused_not_split(void **state)
{
	struct fx *f = *state;
	char text[1200];
	snprintf(text, sizeof(text), "# %0509d%s\n", 0, "allow /bin/sh");
	memset(text + 2, 'x', 509);
	assert_refused_at(f, load(f, text), "line 1");
	/* a long line after good ones: its own number */
	snprintf(text, sizeof(text), "max_cpus 2\n# ok\n# %0600d\nallow /bin/sh\n", 0);
	assert_refused_at(f, load(f, text), "line 3");
	/* the longest line the reader takes is 511 bytes; one more is refused,
	 * with or without its newline */
	memset(text, ' ', 511);
	memcpy(text + 500, "max_cpus 3", 10);
	text[511] = '\0';
	assert_int_equal(load(f, text), 0);
	assert_int_equal(f->p.max_cpus, 3);
	text[511] = '\n';
	text[512] = '\0';
	assert_int_equal(load(f, text), 0);
	memmove(text + 1, text, 513);
	text[0] = ' ';
	assert_refused_at(f, load(f, text), "line 1");
	text[512] = '\0';
	assert_refused_at(f, load(f, text), "line 1");
}

/* A NUL byte would hide the rest of its line from a string reader. */
static void test_nul_byte_refused(void **state)
{
	struct fx *f = *state;
	static const char text[] = "# comment\0allow /bin/sh\nmax_cpus 2\n";
	policy_free(&f->p);
	write_bytes(f->file, text, sizeof(text) - 1);
	assert_refused_at(f, load_paths(&f->p, f->manifest, f->file, POLICY_MAY_RAISE, f->err, sizeof(f->err)), "line 1");
}

/* The manifest is read the same way: a long entry is refused, not split. */
static void test_long_manifest_line_refused(void **state)
{
	struct fx *f = *state;
	char text[700];
	snprintf(text, sizeof(text), "/usr/bin/sh\n/%0299d/usr/bin/perl\n", 0);
	memset(text + 13, 'x', 299);
	write_text(f->manifest, text);
	assert_refused_at(f, load_paths(&f->p, f->manifest, NULL, POLICY_MAY_RAISE, f->err, sizeof(f->err)), "line 2");
}

/* A caller's --policy (finding 1 of issue 12): lowering works, raising
 * any ceiling, removing a CPU quota or extending the allowlist is refused,
 * naming the line. Root's file may raise. */
static void test_caller_policy_only_lowers(void **state)
{
	struct fx *f = *state;
	assert_int_equal(load_lower(f, "max_memory 1024\nmax_timeout 60\ncpu_quota 50\nallow /bin/sh\n"), 0);
	assert_int_equal(f->p.max_memory_mib, 1024);
	assert_int_equal(f->p.max_timeout_s, 60);
	assert_int_equal(f->p.cpu_quota_pct, 50);
	assert_int_equal(f->p.nallow, 1);
	const char *raises[] = { "max_memory 8192\n", "# x\nmax_timeout 301\n", "nproc 100000\n",
				 "max_output 67108865\n", "artifacts_max_files 1001\n" };
	for (size_t i = 0; i < sizeof(raises) / sizeof(raises[0]); i++) {
		assert_refused_at(f, load_lower(f, raises[i]), i == 1 ? "line 2" : "line 1");
		assert_non_null(strstr(f->err, "only root's policy may"));
	}
	assert_int_equal(load(f, "max_memory 8192\nmax_timeout 3600\n"), 0);   /* root's own may */
	assert_int_equal(f->p.max_memory_mib, 8192);
	/* The allowlist may be narrowed, not extended past what it narrows. */
	assert_refused_at(f, load_lower(f, "allow /bin/sh\nallow /usr/bin/perl\n"), "line 2");
	assert_non_null(strstr(f->err, "/usr/bin/perl is not allowed"));
}

/* A CPU quota, once set by root, can be lowered but never lifted. */
static void test_caller_policy_keeps_quota(void **state)
{
	struct fx *f = *state;
	assert_int_equal(load(f, "cpu_quota 100\n"), 0);
	FILE *g = fmemopen((void *)"cpu_quota 200\n", 14, "r");
	assert_non_null(g);
	assert_int_equal(policy_apply(&f->p, g, "mine", POLICY_LOWER_ONLY, f->err, sizeof(f->err)), -1);
	fclose(g);
	assert_non_null(strstr(f->err, "raises the ceiling of 100"));
	g = fmemopen((void *)"cpu_quota 20\n", 13, "r");
	assert_int_equal(policy_apply(&f->p, g, "mine", POLICY_LOWER_ONLY, f->err, sizeof(f->err)), 0);
	fclose(g);
	assert_int_equal(f->p.cpu_quota_pct, 20);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_defaults_and_manifest, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_file_replaces_allowlist, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_bad_lines, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_long_line_refused_not_split, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_nul_byte_refused, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_long_manifest_line_refused, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_caller_policy_only_lowers, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_caller_policy_keeps_quota, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests_name("policy", tests, NULL, NULL);
}
