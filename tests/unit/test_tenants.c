/* Tenants and their API keys (host/vmrund/tenants.c): tenant lines with
 * options and defaults, keys, refusals as "LINE: reason", lookups by key
 * and by name, and tenants_load's refusal of a file anyone but root could
 * write or read. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tenants.h"

#define KEY_A  "aaaaaaaaaaaaaaaa0001"
#define KEY_A2 "Aa0._-Zz9aaaaaaaaaaaaaaa"
#define KEY_B  "bbbbbbbbbbbbbbbb0002"

static char err[512];

static int parse(struct tenants *ts, const char *text)
{
	err[0] = '\0';
	return tenants_parse(ts, text, strlen(text), err, sizeof(err));
}

/* text is refused with err exactly want, and ts left empty. */
static void refused(const char *text, const char *want)
{
	struct tenants ts;
	memset(&ts, 0x5a, sizeof(ts));
	if (parse(&ts, text) != -1)
		fail_msg("accepted: %s", text);
	if (strcmp(err, want))
		fail_msg("%s: err \"%s\", wanted \"%s\"", text, err, want);
	assert_null(ts.t);
	assert_null(ts.keys);
	assert_int_equal(ts.n, 0);
	assert_int_equal(ts.nkeys, 0);
	tenants_free(&ts);
}

static void tenant_lines(void **state)
{
	(void)state;
	struct tenants ts;
	assert_int_equal(parse(&ts, "# tenants\n"
				    "\n"
				    "tenant alice concurrent=2 queued=32 rate=10 burst=25\n"
				    "  tenant bob\r\n"
				    "tenant c.d_e-1 rate=0.25\n"
				    "tenant zed   rate=3\t queued=0   \n"
				    "tenant big concurrent=1000000 rate=1000000 burst=1000000\n"),
			 0);
	assert_int_equal(ts.n, 5);
	assert_int_equal(ts.nkeys, 0);
	assert_string_equal(ts.t[0].name, "alice");
	assert_int_equal(ts.t[0].concurrent, 2);
	assert_int_equal(ts.t[0].queued, 32);
	assert_true(ts.t[0].rate == 10);
	assert_true(ts.t[0].burst == 25);
	/* the defaults, burst twice the rate */
	assert_string_equal(ts.t[1].name, "bob");
	assert_int_equal(ts.t[1].concurrent, 4);
	assert_int_equal(ts.t[1].queued, 64);
	assert_true(ts.t[1].rate == 10);
	assert_true(ts.t[1].burst == 20);
	/* a rate under 0.5 still gets a burst of 1 */
	assert_string_equal(ts.t[2].name, "c.d_e-1");
	assert_true(ts.t[2].rate == 0.25);
	assert_true(ts.t[2].burst == 1);
	assert_string_equal(ts.t[3].name, "zed");
	assert_true(ts.t[3].rate == 3);
	assert_true(ts.t[3].burst == 6);
	assert_int_equal(ts.t[3].queued, 0);
	assert_int_equal(ts.t[4].concurrent, 1000000);
	assert_int_equal(tenants_by_name(&ts, "alice"), 0);
	assert_int_equal(tenants_by_name(&ts, "zed"), 3);
	assert_int_equal(tenants_by_name(&ts, "Alice"), -1);
	assert_int_equal(tenants_by_name(&ts, "alic"), -1);
	assert_int_equal(tenants_by_name(&ts, "alicee"), -1);
	assert_int_equal(tenants_by_name(&ts, ""), -1);
	tenants_free(&ts);

	/* a name of 63 characters fits, 64 does not */
	char line[160];
	snprintf(line, sizeof(line), "tenant %063d\n", 5);
	assert_int_equal(parse(&ts, line), 0);
	assert_int_equal(ts.n, 1);
	tenants_free(&ts);
	snprintf(line, sizeof(line), "tenant %064d\n", 5);
	refused(line, "1: tenant: a name of [A-Za-z0-9._-], 1 to 63 characters");

	/* an empty file: no tenants, no error */
	assert_int_equal(parse(&ts, ""), 0);
	assert_int_equal(ts.n, 0);
	assert_int_equal(tenants_by_name(&ts, "alice"), -1);
	assert_int_equal(tenants_by_key(&ts, KEY_A), -1);
	tenants_free(&ts);
}

static void bad_tenant_lines(void **state)
{
	(void)state;
	const char *range = "unknown or out-of-range option";
	struct {
		const char *text, *want;
	} bad[] = {
		{ "tenant alice concurrent=0", range },
		{ "tenant alice concurrent=1.5", range },
		{ "tenant alice queued=2.5", range },
		{ "tenant alice rate=0", range },
		{ "tenant alice burst=0.5", range },
		{ "tenant alice color=3", range },
		{ "tenant alice Rate=3", range },
		{ "tenant alice concurrent=nan", "concurrent: a number from 0 to 1000000" },
		{ "tenant alice rate=nan", "rate: a number from 0 to 1000000" },
		{ "tenant alice burst=-nan", "burst: a number from 0 to 1000000" },
		{ "tenant alice rate=-1", "rate: a number from 0 to 1000000" },
		{ "tenant alice queued=1000001", "queued: a number from 0 to 1000000" },
		{ "tenant alice concurrent=inf", "concurrent: a number from 0 to 1000000" },
		{ "tenant alice rate=", "rate: a number from 0 to 1000000" },
		{ "tenant alice rate=ten", "rate: a number from 0 to 1000000" },
		{ "tenant alice rate=10x", "rate: a number from 0 to 1000000" },
		{ "tenant alice concurrent", "expected OPTION=NUMBER, not \"concurrent\"" },
		{ "tenant", "expected a tenant or a key line" },
		{ "tenant ", "tenant: a name of [A-Za-z0-9._-], 1 to 63 characters" },
		{ "tenant al/ice", "tenant: a name of [A-Za-z0-9._-], 1 to 63 characters" },
		{ "tenant al:ice rate=1", "tenant: a name of [A-Za-z0-9._-], 1 to 63 characters" },
		{ "tenants alice", "expected a tenant or a key line" },
		{ "alice", "expected a tenant or a key line" },
	};
	char text[128], want[256];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		/* on line 2, after a good one */
		snprintf(text, sizeof(text), "tenant ok\n%s\n", bad[i].text);
		struct tenants ts;
		if (parse(&ts, text) != -1)
			fail_msg("accepted: %s", bad[i].text);
		snprintf(want, sizeof(want), "2: %s", bad[i].want);
		if (strncmp(err, want, strlen(want)))
			fail_msg("%s: err \"%s\", wanted \"%s...\"", bad[i].text, err, want);
		assert_null(ts.t);
		assert_int_equal(ts.n, 0);
	}
	refused("tenant alice\ntenant bob\ntenant alice rate=1\n", "3: tenant alice: named twice");
	/* a NUL in a line */
	struct tenants ts;
	const char nul[] = "tenant a\0b\n";
	assert_int_equal(tenants_parse(&ts, nul, sizeof(nul) - 1, err, sizeof(err)), -1);
	assert_string_equal(err, "1: line too long or not text");
	/* a line of 512 bytes or more */
	char *big = malloc(700);
	assert_non_null(big);
	memset(big, ' ', 699);
	memcpy(big, "tenant x", 8);
	big[699] = '\0';
	refused(big, "1: line too long or not text");
	free(big);
}

static void keys(void **state)
{
	(void)state;
	struct tenants ts;
	assert_int_equal(parse(&ts, "tenant alice\n"
				    "key " KEY_A " alice\n"
				    "tenant bob concurrent=1\n"
				    "key " KEY_B " bob\n"
				    "\tkey  " KEY_A2 "\talice  \r\n"),
			 0);
	assert_int_equal(ts.n, 2);
	assert_int_equal(ts.nkeys, 3);
	assert_string_equal(ts.keys[0].key, KEY_A);
	assert_int_equal(ts.keys[0].tenant, 0);
	assert_int_equal(ts.keys[1].tenant, 1);
	assert_string_equal(ts.keys[2].key, KEY_A2);

	assert_int_equal(tenants_by_key(&ts, KEY_A), 0);
	assert_int_equal(tenants_by_key(&ts, KEY_A2), 0);
	assert_int_equal(tenants_by_key(&ts, KEY_B), 1);
	/* wrong: one character off, first, last */
	assert_int_equal(tenants_by_key(&ts, "aaaaaaaaaaaaaaaa0003"), -1);
	assert_int_equal(tenants_by_key(&ts, "baaaaaaaaaaaaaaa0001"), -1);
	assert_int_equal(tenants_by_key(&ts, "AAAAAAAAAAAAAAAA0001"), -1);
	/* a prefix of a real key, and a real key with more after it */
	assert_int_equal(tenants_by_key(&ts, "aaaaaaaaaaaaaaaa000"), -1);
	assert_int_equal(tenants_by_key(&ts, "aaaaaaaaaaaaaaaa"), -1);
	assert_int_equal(tenants_by_key(&ts, KEY_A "1"), -1);
	assert_int_equal(tenants_by_key(&ts, KEY_A " "), -1);
	assert_int_equal(tenants_by_key(&ts, ""), -1);
	/* the name is not a key */
	assert_int_equal(tenants_by_key(&ts, "alice"), -1);
	assert_int_equal(tenants_by_name(&ts, "bob"), 1);
	tenants_free(&ts);

	/* 16 and 128 characters fit */
	char k16[17], k128[129], k15[16], k129[130], text[400];
	memset(k16, 'k', 16), k16[16] = '\0';
	memset(k128, 'q', 128), k128[128] = '\0';
	memset(k15, 'k', 15), k15[15] = '\0';
	memset(k129, 'q', 129), k129[129] = '\0';
	snprintf(text, sizeof(text), "tenant t\nkey %s t\nkey %s t\n", k16, k128);
	assert_int_equal(parse(&ts, text), 0);
	assert_int_equal(tenants_by_key(&ts, k16), 0);
	assert_int_equal(tenants_by_key(&ts, k128), 0);
	assert_int_equal(tenants_by_key(&ts, k129), -1);
	k128[127] = '\0';
	assert_int_equal(tenants_by_key(&ts, k128), -1);
	tenants_free(&ts);

	const char *shape = "2: key: 16 to 128 characters of [A-Za-z0-9._-]";
	snprintf(text, sizeof(text), "tenant t\nkey %s t\n", k15);
	refused(text, shape);
	snprintf(text, sizeof(text), "tenant t\nkey %s t\n", k129);
	refused(text, shape);
	refused("tenant t\nkey aaaaaaaaaaaaaaa!0001 t\n", shape);
	refused("tenant t\nkey aaaaaaaa/aaaaaaaa0001 t\n", shape);
	refused("tenant t\nkey aaaaaaaaaaaaaaaa0001\n", "2: expected: key KEY TENANT");
	refused("tenant t\nkey aaaaaaaaaaaaaaaa0001 t extra\n", "2: expected: key KEY TENANT");
	refused("tenant t\nkey\n", "2: expected a tenant or a key line");
	/* a key before its tenant, or for one never named */
	refused("key " KEY_A " alice\ntenant alice\n", "1: key: tenant alice is not named above");
	refused("tenant bob\nkey " KEY_A " alice\n", "2: key: tenant alice is not named above");
	/* the same key twice, for the same tenant or another */
	refused("tenant alice\nkey " KEY_A " alice\nkey " KEY_A " alice\n", "3: key: given twice");
	refused("tenant alice\ntenant bob\nkey " KEY_A " alice\n#\nkey " KEY_A " bob\n", "5: key: given twice");
}

static void free_twice(void **state)
{
	(void)state;
	struct tenants ts;
	assert_int_equal(parse(&ts, "tenant a\nkey " KEY_A " a\n"), 0);
	tenants_free(&ts);
	assert_null(ts.t);
	assert_null(ts.keys);
	assert_int_equal(ts.n, 0);
	assert_int_equal(ts.nkeys, 0);
	tenants_free(&ts);
	assert_int_equal(tenants_by_key(&ts, KEY_A), -1);
	assert_int_equal(tenants_by_name(&ts, "a"), -1);
}

static void put(const char *path, const char *text, mode_t mode)
{
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_int_equal(chmod(path, mode), 0);
}

static void load(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	char dir[] = "/tmp/test_tenants.XXXXXX", path[64], link[64];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/keys", dir);
	snprintf(link, sizeof(link), "%s/keys.link", dir);
	const char *text = "tenant alice rate=5\nkey " KEY_A " alice\n";
	struct tenants ts;

	/* root's, 0600 and 0400: read */
	put(path, text, 0600);
	assert_int_equal(tenants_load(&ts, path, err, sizeof(err)), 0);
	assert_int_equal(ts.n, 1);
	assert_int_equal(tenants_by_key(&ts, KEY_A), 0);
	assert_true(ts.t[0].burst == 10);
	tenants_free(&ts);
	assert_int_equal(chmod(path, 0400), 0);
	assert_int_equal(tenants_load(&ts, path, err, sizeof(err)), 0);
	tenants_free(&ts);

	/* readable or writable by others: refused */
	mode_t modes[] = { 0644, 0640, 0604, 0620, 0602, 0660 };
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		assert_int_equal(chmod(path, modes[i]), 0);
		assert_int_equal(tenants_load(&ts, path, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "must be a regular file owned by root with mode 0600 or 0400"));
		assert_null(ts.t);
		assert_int_equal(ts.n, 0);
	}
	/* not root's */
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(chown(path, 65534, 65534), 0);
	assert_int_equal(tenants_load(&ts, path, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "owned by root"));
	assert_int_equal(chown(path, 0, 65534), 0);   /* the group does not matter at 0600 */
	assert_int_equal(tenants_load(&ts, path, err, sizeof(err)), 0);
	tenants_free(&ts);

	/* a symlink to a good file, a directory, a missing file */
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(tenants_load(&ts, link, err, sizeof(err)), -1);
	assert_int_equal(tenants_load(&ts, dir, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "must be a regular file"));
	unlink(link);
	snprintf(link, sizeof(link), "%s/none", dir);
	assert_int_equal(tenants_load(&ts, link, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "No such file or directory"));

	/* a parse error carries the path and the line */
	put(path, "tenant alice\nkey short alice\n", 0600);
	assert_int_equal(tenants_load(&ts, path, err, sizeof(err)), -1);
	char want[160];
	snprintf(want, sizeof(want), "keys %s:2: key: 16 to 128 characters", path);
	assert_memory_equal(err, want, strlen(want));
	assert_null(ts.t);

	unlink(path);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(tenant_lines),
		cmocka_unit_test(bad_tenant_lines),
		cmocka_unit_test(keys),
		cmocka_unit_test(free_twice),
		cmocka_unit_test(load),
	};
	return cmocka_run_group_tests_name("tenants", tests, NULL, NULL);
}
