/* `vmrun sandbox`'s command line (host/cli/cli_sandbox.c): each verb's
 * request as it goes to vmrund, and each refusal in one line; the
 * server chosen when none is named. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_diff.h"
#include "cli_sandbox.h"

static char err[600];

static int parse(struct sbx_cli *c, ...)
{
	char *argv[32] = { "vmrun", "sandbox" };
	int argc = 2;
	va_list ap;
	va_start(ap, c);
	for (char *a; (a = va_arg(ap, char *));)
		argv[argc++] = a;
	va_end(ap);
	err[0] = '\0';
	return sbx_cli_parse(argc, argv, c, err, sizeof(err));
}

static void body_is(const struct sbx_cli *c, const char *want)
{
	char *t = json_dumps(c->body, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(t, want);
	free(t);
}

static void create(void **state)
{
	(void)state;
	struct sbx_cli c;
	assert_int_equal(parse(&c, "--server", "unix:/s", "create", "--runtime", "python", "--timeout", "600", "-m",
			       "512", "-c", "2", "--disk", "128", "-e", "A=1", "-e", "B=x=y", "--meta", "task=t-7",
			       "--json", NULL), 0);
	assert_int_equal(c.verb, SV_CREATE);
	assert_string_equal(c.server, "unix:/s");
	assert_true(c.json);
	body_is(&c, "{\"env\":{\"A\":\"1\",\"B\":\"x=y\"},\"limits\":{\"cpus\":2,\"disk_mib\":128,\"memory_mib\":512},"
		    "\"metadata\":{\"task\":\"t-7\"},\"runtime\":\"python\",\"timeout_s\":600.0}");
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "create", "-m", "0", NULL), -1);
	assert_string_equal(err, "-m 0: a number more than 0 and at most 16777216");
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "create", "-e", "=x", NULL), -1);
	assert_string_equal(err, "-e =x: KEY=VALUE");
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "create", "extra", NULL), -1);
	assert_string_equal(err, "sandbox create: unexpected extra");
	sbx_cli_free(&c);
}

static void exec(void **state)
{
	(void)state;
	struct sbx_cli c;
	assert_int_equal(parse(&c, "exec", "-t", "30", "-w", "src", "-e", "K=V", "-i", "ID1", "--", "python3", "-c",
			       "print(1)", NULL), 0);
	assert_int_equal(c.verb, SV_EXEC);
	assert_string_equal(c.id, "ID1");
	assert_true(c.stdin_in);
	body_is(&c, "{\"argv\":[\"python3\",\"-c\",\"print(1)\"],\"cwd\":\"src\",\"env\":{\"K\":\"V\"},\"timeout_s\":30.0}");
	sbx_cli_free(&c);
	/* without "--": the program's own options stay its own */
	assert_int_equal(parse(&c, "exec", "ID1", "ls", "-la", NULL), 0);
	body_is(&c, "{\"argv\":[\"ls\",\"-la\"]}");
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "exec", "ID1", NULL), -1);
	assert_string_equal(err, "sandbox exec: no program to run");
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "exec", NULL), -1);
	assert_string_equal(err, "sandbox exec: which sandbox? (exec ID PROGRAM [ARG...])");
	sbx_cli_free(&c);
}

static void others(void **state)
{
	(void)state;
	struct sbx_cli c;
	assert_int_equal(parse(&c, "cp", "main.py", "ID1:/workspace/main.py", NULL), 0);
	assert_int_equal(c.verb, SV_CP);
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "cp", "ID1:out", "-", NULL), 0);
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "cp", "a", "b", NULL), -1);
	assert_string_equal(err, "sandbox cp: one of SRC and DST is ID:PATH, the other a local path or -");
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "cp", "A:a", "B:b", NULL), -1);
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "timeout", "ID1", "90", NULL), 0);
	assert_true(c.seconds == 90);
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "timeout", "ID1", "-5", NULL), -1);
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "kill", "ID1", NULL), 0);
	assert_int_equal(c.verb, SV_KILL);
	assert_string_equal(c.id, "ID1");
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "kill", NULL), -1);
	assert_string_equal(err, "usage: vmrun sandbox kill ID");
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "pause", "ID2", NULL), 0);
	assert_int_equal(c.verb, SV_PAUSE);
	assert_string_equal(c.id, "ID2");
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "resume", "ID2", NULL), 0);
	assert_int_equal(c.verb, SV_RESUME);
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "resume", "ID2", "more", NULL), -1);
	assert_string_equal(err, "usage: vmrun sandbox resume ID");
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "ls", "--json", NULL), 0);
	assert_true(c.json);
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "frobnicate", NULL), -1);
	assert_string_equal(err, "sandbox: no command frobnicate (vmrun sandbox --help)");
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, NULL), -1);
	sbx_cli_free(&c);
}

static void diff(void **state)
{
	(void)state;
	struct sbx_cli c;
	assert_int_equal(parse(&c, "diff", "--from", "cp1", "--stat", "ID3", NULL), 0);
	assert_int_equal(c.verb, SV_DIFF);
	assert_string_equal(c.from, "cp1");
	assert_null(c.to);
	assert_true(c.stat_only);
	assert_string_equal(c.id, "ID3");
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "diff", "--to", "cp2", "--json", "ID3", NULL), 0);
	assert_string_equal(c.to, "cp2");
	assert_true(c.json);
	sbx_cli_free(&c);
	assert_int_equal(parse(&c, "diff", NULL), -1);
	assert_string_equal(err, "usage: vmrun sandbox diff [--from F] [--to T] [--stat] [--json] ID");
	sbx_cli_free(&c);
	/* the print: a stat line per path, the totals and the digest, then the diffs */
	json_t *d = json_loads(
		"{\"files\": [{\"path\": \"a.txt\", \"status\": \"modified\", \"type\": \"file\", \"mode\": \"0644\","
		" \"size\": 4, \"insertions\": 2, \"deletions\": 1, \"diff\": \"--- a/a.txt\\n+++ b/a.txt\\n@@ -1 +1,2 @@\\n-x\\n+y\\n+z\\n\","
		" \"old\": {\"type\": \"file\", \"mode\": \"0644\", \"size\": 2}},"
		" {\"path\": \"b.bin\", \"status\": \"added\", \"type\": \"file\", \"mode\": \"0644\", \"size\": 9, \"binary\": true},"
		" {\"path\": \"l\", \"status\": \"modified\", \"type\": \"symlink\", \"mode\": \"0777\", \"target\": \"b\","
		" \"old\": {\"type\": \"symlink\", \"mode\": \"0777\", \"target\": \"a\"}},"
		" {\"path\": \"d\", \"status\": \"removed\", \"type\": \"directory\", \"mode\": \"0755\"}],"
		" \"summary\": {\"added\": 1, \"modified\": 2, \"removed\": 1, \"insertions\": 2, \"deletions\": 1},"
		" \"skipped\": [], \"digest\": \"ab12\"}", 0, NULL);
	assert_non_null(d);
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	cli_print_diff(out, d, false);
	fclose(out);
	assert_string_equal(text, " a.txt | 3 ++-\n"
				  " b.bin | Bin 0 -> 9 bytes\n"
				  " l     | symlink a -> b\n"
				  " d/    | directory removed\n"
				  " 4 paths changed, 2 insertions(+), 1 deletion(-)\n"
				  " digest ab12\n"
				  "\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1,2 @@\n-x\n+y\n+z\n");
	free(text);
	json_decref(d);
}

static void server(void **state)
{
	(void)state;
	struct sbx_cli c = { .server = "http://h:1" };
	assert_string_equal(sbx_cli_server(&c, "/nonexistent"), "http://h:1");
	c.server = NULL;
	setenv("VMRUN_SERVER", "unix:/x", 1);
	assert_string_equal(sbx_cli_server(&c, "/nonexistent"), "unix:/x");
	unsetenv("VMRUN_SERVER");
	assert_string_equal(sbx_cli_server(&c, "/nonexistent"), "http://127.0.0.1:8080");
	/* a local socket that is not a socket is not taken */
	assert_string_equal(sbx_cli_server(&c, "/etc/hostname"), "http://127.0.0.1:8080");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(create),
		cmocka_unit_test(exec),
		cmocka_unit_test(others),
		cmocka_unit_test(diff),
		cmocka_unit_test(server),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
