/* Runtime descriptions (host/run/runtime.c): loading NAME.runtime files, the
 * list of installed runtimes, lookup by name or alias, and refusals (bad
 * names, missing keys, over-long lines) as one line. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"

static char dir[64];
static char err[512];

static void put(const char *name, const char *text)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_runtime.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	put("python.runtime", "name: python\naliases: py py3 python3\npackages: python3-minimal\nextension: py\n"
			      "run: python3 {file} {args}\nrun-timeout: 10\nrun-memory: 256\nversion: 3.11.2\n");
	put("bash.runtime", "# comment\nname: bash\naliases: sh\nrun: bash {file} {args}\nversion: 5.2.15\n");
	put("notes.txt", "not a runtime\n");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[96];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

static void loads_and_lists(void **state)
{
	(void)state;
	struct runtime list[4];
	assert_int_equal(runtime_list(dir, list, 4, err, sizeof(err)), 2);
	assert_string_equal(list[0].name, "bash");   /* sorted */
	assert_string_equal(list[1].name, "python");
	assert_string_equal(list[1].version, "3.11.2");
	assert_string_equal(list[1].aliases, "py py3 python3");
	assert_string_equal(list[1].run, "python3 {file} {args}");
	assert_int_equal(list[1].run_timeout_s, 10);
	assert_int_equal(list[1].run_memory_mib, 256);
	assert_int_equal(list[0].run_timeout_s, 0);   /* not set */
	char want[160];
	snprintf(want, sizeof(want), "%s/python.ext4", dir);
	assert_string_equal(list[1].image, want);
	snprintf(want, sizeof(want), "%s/python.programs", dir);
	assert_string_equal(list[1].programs, want);
	assert_int_equal(runtime_list("/nonexistent-runtimes", list, 4, err, sizeof(err)), 0);
	assert_int_equal(runtime_list(dir, list, 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "more than 1"));
}

static void finds_by_name_or_alias(void **state)
{
	(void)state;
	struct runtime rt;
	const char *names[] = { "python", "py", "py3", "python3" };
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(runtime_find(dir, names[i], &rt, err, sizeof(err)), 0);
		assert_string_equal(rt.name, "python");
	}
	assert_int_equal(runtime_find(dir, "sh", &rt, err, sizeof(err)), 0);
	assert_string_equal(rt.name, "bash");
	assert_int_equal(runtime_find(dir, "pyt", &rt, err, sizeof(err)), -1);   /* no prefix match */
	assert_string_equal(err, "--runtime pyt: no such runtime (installed: bash, python)");
	assert_int_equal(runtime_find(dir, "../python", &rt, err, sizeof(err)), -1);
	assert_string_equal(err, "--runtime: '../python' is not a runtime name");
	assert_int_equal(runtime_find(dir, "", &rt, err, sizeof(err)), -1);
}

/* Name or alias, whole words only, whatever the spaces around them. */
static void answers_to_name_or_alias(void **state)
{
	(void)state;
	struct runtime rt = { .name = "python", .aliases = "  py py3  python3 " };
	assert_true(runtime_answers_to(&rt, "python"));
	assert_true(runtime_answers_to(&rt, "py"));
	assert_true(runtime_answers_to(&rt, "py3"));
	assert_true(runtime_answers_to(&rt, "python3"));
	assert_false(runtime_answers_to(&rt, "p"));
	assert_false(runtime_answers_to(&rt, "py3 "));
	assert_false(runtime_answers_to(&rt, "python33"));
	assert_false(runtime_answers_to(&rt, ""));
	struct runtime bare = { .name = "c" };
	assert_true(runtime_answers_to(&bare, "c"));
	assert_false(runtime_answers_to(&bare, "c++"));
}

static void refuses_bad_files(void **state)
{
	(void)state;
	struct runtime rt;
	char path[128];
	snprintf(path, sizeof(path), "%s/bad.runtime", dir);
	const char *bad[] = {
		"name: Bad\nversion: 1\nrun: x\n",            /* upper case */
		"name: ok\nrun: x\n",                           /* no version */
		"name: ok\nversion: 1\n",                       /* no run */
		"name: ok\nversion: 1\nrun: x\naliases: a/b\n", /* bad alias */
		"name: ok\nversion: 1\nrun: x\nrun-timeout: 0\n",
		"name: ok\nversion: 1\nrun: x\nno colon here\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		put("bad.runtime", bad[i]);
		err[0] = '\0';
		assert_int_equal(runtime_load(path, &rt, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "bad.runtime"));
		assert_null(strchr(err, '\n'));
	}
	char longline[2100];
	memset(longline, 'x', sizeof(longline) - 2);
	memcpy(longline, "run: ", 5);
	longline[sizeof(longline) - 2] = '\n';
	longline[sizeof(longline) - 1] = '\0';
	put("bad.runtime", longline);
	assert_int_equal(runtime_load(path, &rt, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "longer than 1023 bytes"));
	/* and a bad file in the directory fails the list, naming it */
	struct runtime list[4];
	assert_int_equal(runtime_list(dir, list, 4, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "bad.runtime"));
	unlink(path);
}

/* runtime_expand: {files} and {args} as whole words, {file} and {stem}
 * anywhere in one; nothing else is a placeholder, no shell. */
static void expands_templates(void **state)
{
	(void)state;
	const char *files[] = { "Main.java", "util.java" };
	char *args[] = { "a b", "$(x)" };
	char *argv[16], store[256], err[256];
	assert_int_equal(runtime_expand("javac -d /tmp/c {files}", files, 2, NULL, 0, argv, 16, store, sizeof(store), err,
					sizeof(err)), 5);
	assert_string_equal(argv[3], "Main.java");
	assert_string_equal(argv[4], "util.java");
	assert_null(argv[5]);
	assert_int_equal(runtime_expand("java  -cp /tmp/c {stem} {args}", files, 2, args, 2, argv, 16, store, sizeof(store),
					err, sizeof(err)), 6);
	assert_string_equal(argv[3], "Main");
	assert_string_equal(argv[4], "a b");
	assert_string_equal(argv[5], "$(x)");
	assert_int_equal(runtime_expand("rustc -o/tmp/{stem}.bin {file} {args}", files, 1, args, 0, argv, 16, store,
					sizeof(store), err, sizeof(err)), 3);
	assert_string_equal(argv[1], "-o/tmp/Main.bin");
	const char *dotless[] = { "Makefile" };
	assert_int_equal(runtime_expand("x {stem}", dotless, 1, NULL, 0, argv, 16, store, sizeof(store), err, sizeof(err)), 2);
	assert_string_equal(argv[1], "Makefile");
	/* refusals */
	assert_int_equal(runtime_expand("x {nope}", files, 1, NULL, 0, argv, 16, store, sizeof(store), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "{nope} is not {file} or {stem}"));
	assert_int_equal(runtime_expand("x -{files}", files, 1, NULL, 0, argv, 16, store, sizeof(store), err, sizeof(err)), -1);
	assert_int_equal(runtime_expand("x {file}", NULL, 0, NULL, 0, argv, 16, store, sizeof(store), err, sizeof(err)), -1);
	assert_int_equal(runtime_expand("  ", NULL, 0, NULL, 0, argv, 16, store, sizeof(store), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "names no program"));
	assert_int_equal(runtime_expand("x {args}", files, 1, args, 2, argv, 3, store, sizeof(store), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "more than 2 words"));
	assert_int_equal(runtime_expand("x {files}", files, 2, NULL, 0, argv, 16, store, 12, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "expands past 12 bytes"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(loads_and_lists, setup, teardown),
		cmocka_unit_test_setup_teardown(finds_by_name_or_alias, setup, teardown),
		cmocka_unit_test(answers_to_name_or_alias),
		cmocka_unit_test_setup_teardown(refuses_bad_files, setup, teardown),
		cmocka_unit_test(expands_templates),
	};
	return cmocka_run_group_tests_name("runtime", tests, NULL, NULL);
}
