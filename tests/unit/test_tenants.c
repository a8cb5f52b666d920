/* Tenants and their API keys (host/vmrund/tenants.c): tenant lines with
 * options and defaults, keys, refusals as "LINE: reason", lookups by key
 * and by name, the network ceiling and the check of a request against it,
 * and tenants_load's refusal of a file anyone but root could write or
 * read. */
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

#include <openssl/sha.h>

#include "run_spec.h"
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
	unsigned char d[SHA256_DIGEST_LENGTH];
	assert_memory_equal(ts.keys[0].digest, SHA256((const unsigned char *)KEY_A, strlen(KEY_A), d), sizeof(d));
	assert_int_equal(ts.keys[0].tenant, 0);
	assert_int_equal(ts.keys[1].tenant, 1);
	assert_memory_equal(ts.keys[2].digest, SHA256((const unsigned char *)KEY_A2, strlen(KEY_A2), d), sizeof(d));

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

/* Keys are held as SHA-256 digests and compared in time that depends on
 * neither a stored key's length nor where a wrong key differs: the table
 * holds no key text at all, and keys of every length that share a prefix
 * with a stored one are told apart from it. */
static void keys_as_digests(void **state)
{
	(void)state;
	const char *stored[] = { KEY_A, "aaaaaaaaaaaaaaaa00010001", KEY_B };
	char text[400];
	snprintf(text, sizeof(text), "tenant alice\ntenant bob\nkey %s alice\nkey %s bob\nkey %s alice\n", stored[0],
		 stored[1], stored[2]);
	struct tenants ts;
	assert_int_equal(parse(&ts, text), 0);
	assert_int_equal(ts.nkeys, 3);
	for (size_t i = 0; i < 3; i++)
		if (memmem(ts.keys, ts.nkeys * sizeof(*ts.keys), stored[i], strlen(stored[i])))
			fail_msg("key %zu is held as text", i);
	assert_int_equal(tenants_by_key(&ts, KEY_A), 0);
	assert_int_equal(tenants_by_key(&ts, "aaaaaaaaaaaaaaaa00010001"), 1);
	assert_int_equal(tenants_by_key(&ts, KEY_B), 0);
	/* every prefix of the longer key, and the longer key grown by one */
	char k[64];
	for (size_t n = 0; n < strlen(stored[1]); n++) {
		snprintf(k, sizeof(k), "%.*s", (int)n, stored[1]);
		assert_int_equal(tenants_by_key(&ts, k), n == strlen(KEY_A) ? 0 : -1);
	}
	snprintf(k, sizeof(k), "%s0", stored[1]);
	assert_int_equal(tenants_by_key(&ts, k), -1);
	tenants_free(&ts);
}

/* max_memory_mib= and max_disk_mib=: a tenant's ceilings per run (0, the
 * default: none of its own), and the check of a run's sizes against them. */
static void size_ceilings(void **state)
{
	(void)state;
	struct tenants ts;
	if (parse(&ts, "tenant small max_memory_mib=512 max_disk_mib=128\ntenant big\n"))
		fail_msg("%s", err);
	assert_int_equal(ts.t[0].max_memory_mib, 512);
	assert_int_equal(ts.t[0].max_disk_mib, 128);
	assert_int_equal(ts.t[1].max_memory_mib, 0);
	assert_int_equal(ts.t[1].max_disk_mib, 0);
	assert_int_equal(tenant_size_check(&ts.t[0], 512, 128, err, sizeof(err)), 0);
	assert_int_equal(tenant_size_check(&ts.t[0], 513, 128, err, sizeof(err)), -1);
	assert_string_equal(err, "limits.memory_mib: 513 MiB is over tenant small's ceiling of 512 MiB (max_memory_mib)");
	assert_int_equal(tenant_size_check(&ts.t[0], 64, 129, err, sizeof(err)), -1);
	assert_string_equal(err, "limits.disk_mib: 129 MiB is over tenant small's ceiling of 128 MiB (max_disk_mib)");
	assert_int_equal(tenant_size_check(&ts.t[1], UINT64_C(1) << 20, UINT64_C(1) << 20, err, sizeof(err)), 0);
	tenants_free(&ts);
	refused("tenant a max_memory_mib=1.5\n",
		"1: unknown or out-of-range option \"max_memory_mib=1.5\" (concurrent>=1, queued, rate>0, burst>=1, "
		"max_memory_mib, max_disk_mib, sandboxes, sandbox_memory_mib, sandbox_disk_mib, "
		"max_sandbox_timeout_s>=1, max_pause_ttl_s>=1, max_checkpoints>=1, max_checkpoint_mib>=1, net, net_addr, callback, callback_addr)");
	refused("tenant a max_disk_mib=-1\n", "1: max_disk_mib: a number from 0 to 1000000");
}

/* The sandbox options: how many open at once, their memory and disk all
 * together, the longest life; each with its default. */
static void sandbox_ceilings(void **state)
{
	(void)state;
	struct tenants ts;
	if (parse(&ts, "tenant a sandboxes=2 sandbox_memory_mib=4096 sandbox_disk_mib=8192 max_sandbox_timeout_s=600"
		       " max_checkpoint_mib=512\ntenant b sandboxes=0\ntenant c\n"))
		fail_msg("%s", err);
	assert_int_equal(ts.t[0].max_checkpoint_mib, 512);
	assert_int_equal(ts.t[2].max_checkpoint_mib, TENANT_DEFAULT_CHECKPOINT_MIB);
	assert_int_equal(ts.t[0].sandboxes, 2);
	assert_int_equal(ts.t[0].sandbox_memory_mib, 4096);
	assert_int_equal(ts.t[0].sandbox_disk_mib, 8192);
	assert_int_equal(ts.t[0].max_sandbox_timeout_s, 600);
	assert_int_equal(ts.t[1].sandboxes, 0);
	assert_int_equal(ts.t[2].sandboxes, TENANT_DEFAULT_SANDBOXES);
	assert_int_equal(ts.t[2].sandbox_memory_mib, 0);
	assert_int_equal(ts.t[2].max_sandbox_timeout_s, TENANT_DEFAULT_SANDBOX_TIMEOUT_S);
	tenants_free(&ts);
	refused("tenant a max_sandbox_timeout_s=0\n",
		"1: unknown or out-of-range option \"max_sandbox_timeout_s=0\" (concurrent>=1, queued, rate>0, burst>=1, "
		"max_memory_mib, max_disk_mib, sandboxes, sandbox_memory_mib, sandbox_disk_mib, "
		"max_sandbox_timeout_s>=1, max_pause_ttl_s>=1, max_checkpoints>=1, max_checkpoint_mib>=1, net, net_addr, callback, callback_addr)");
	refused("tenant a max_checkpoint_mib=0\n",
		"1: unknown or out-of-range option \"max_checkpoint_mib=0\" (concurrent>=1, queued, rate>0, burst>=1, "
		"max_memory_mib, max_disk_mib, sandboxes, sandbox_memory_mib, sandbox_disk_mib, "
		"max_sandbox_timeout_s>=1, max_pause_ttl_s>=1, max_checkpoints>=1, max_checkpoint_mib>=1, net, net_addr, callback, callback_addr)");
	refused("tenant a sandboxes=1.5\n",
		"1: unknown or out-of-range option \"sandboxes=1.5\" (concurrent>=1, queued, rate>0, burst>=1, "
		"max_memory_mib, max_disk_mib, sandboxes, sandbox_memory_mib, sandbox_disk_mib, "
		"max_sandbox_timeout_s>=1, max_pause_ttl_s>=1, max_checkpoints>=1, max_checkpoint_mib>=1, net, net_addr, callback, callback_addr)");
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

/* tenant_host_rules' fn: the rules formatted, "|" after each; stops
 * after the first when ctx's text says "stop". */
static int collect_rule(void *ctx, const struct net_rule *r)
{
	char *text = ctx, buf[300];
	net_rule_format(r, buf, sizeof(buf));
	strcat(strcat(text, buf), "|");
	return strstr(text, "stop") ? 7 : 0;
}

/* A run that may reach every name its tenant may: "*" for net=any, else
 * the host and suffix rules, never the address ranges. */
static void host_rules(void **state)
{
	(void)state;
	struct tenants ts;
	assert_int_equal(parse(&ts, "tenant none\n"
				    "tenant any net=any net_addr=10.0.0.0/8\n"
				    "tenant list net=*.pypi.org,files.pythonhosted.org:443 net_addr=10.1.2.0/24:3128\n"),
			 0);
	char text[1024] = "";
	assert_int_equal(tenant_host_rules(&ts.t[0].net, collect_rule, text), 0);
	assert_string_equal(text, "");
	assert_int_equal(tenant_host_rules(&ts.t[1].net, collect_rule, text), 0);
	assert_string_equal(text, "*|");
	text[0] = '\0';
	assert_int_equal(tenant_host_rules(&ts.t[2].net, collect_rule, text), 0);
	assert_string_equal(text, "*.pypi.org|files.pythonhosted.org:443|");
	/* fn's first non-zero ends it */
	strcpy(text, "stop:");
	assert_int_equal(tenant_host_rules(&ts.t[2].net, collect_rule, text), 7);
	assert_string_equal(text, "stop:*.pypi.org|");
	tenants_free(&ts);
}

static void net_ceiling(void **state)
{
	(void)state;
	struct tenants ts;
	assert_int_equal(parse(&ts, "tenant none\n"
				    "tenant said net=none net_addr=none\n"
				    "tenant any net=any\n"
				    "tenant list net=*.PyPI.org,files.pythonhosted.org:443 concurrent=2\n"
				    "tenant addr net_addr=10.1.2.0/24:3128,[fd00::/8]:8080 net=any\n"),
			 0);
	assert_int_equal(ts.n, 5);
	/* the default: no network */
	for (int i = 0; i < 2; i++) {
		assert_false(ts.t[i].net.any);
		assert_int_equal(ts.t[i].net.n, 0);
		assert_null(ts.t[i].net.rules);
	}
	assert_true(ts.t[2].net.any);
	assert_int_equal(ts.t[2].net.n, 0);
	assert_false(ts.t[3].net.any);
	assert_int_equal(ts.t[3].net.n, 2);
	assert_int_equal(ts.t[3].concurrent, 2);
	assert_int_equal(ts.t[3].net.rules[0].kind, NET_RULE_SUFFIX);
	assert_string_equal(ts.t[3].net.rules[0].host, "pypi.org");
	assert_int_equal(ts.t[3].net.rules[1].kind, NET_RULE_HOST);
	assert_string_equal(ts.t[3].net.rules[1].host, "files.pythonhosted.org");
	assert_int_equal(ts.t[3].net.rules[1].port, 443);
	assert_true(ts.t[4].net.any);
	assert_int_equal(ts.t[4].net.n, 2);
	assert_int_equal(ts.t[4].net.rules[0].kind, NET_RULE_ADDR);
	assert_int_equal(ts.t[4].net.rules[0].port, 3128);
	assert_int_equal(ts.t[4].net.rules[1].port, 8080);
	tenants_free(&ts);

	/* where vmrund may call for a tenant: the same words, apart */
	assert_int_equal(parse(&ts, "tenant cb net=any callback=hooks.example.com:8443 callback_addr=10.9.0.0/16:8080\n"
				    "tenant all callback=any\n"),
			 0);
	assert_true(ts.t[0].net.any);
	assert_false(ts.t[0].callback.any);
	assert_int_equal(ts.t[0].callback.n, 2);
	assert_string_equal(ts.t[0].callback.rules[0].host, "hooks.example.com");
	assert_int_equal(ts.t[0].callback.rules[1].kind, NET_RULE_ADDR);
	assert_true(ts.t[1].callback.any);
	assert_false(ts.t[1].net.any);
	tenants_free(&ts);
	assert_int_equal(parse(&ts, "tenant x callback=any callback=none\n"), -1);
	assert_int_equal(parse(&ts, "tenant x callback_addr=any\n"), -1);

	/* 16 of each fit */
	char line[512];
	int n = snprintf(line, sizeof(line), "tenant t net=");
	for (int i = 0; i < 16; i++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, "%sh%d.example", i ? "," : "", i);
	n += snprintf(line + n, sizeof(line) - (size_t)n, " net_addr=");
	for (int i = 0; i < 16; i++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, "%s10.%d.0.0/16", i ? "," : "", i);
	assert_int_equal(parse(&ts, line), 0);
	assert_int_equal(ts.t[0].net.n, 32);
	tenants_free(&ts);
	snprintf(line + n, sizeof(line) - (size_t)n, ",10.99.0.0/16");
	refused(line, "1: net_addr: at most 16 rules");
}

static void bad_net_lines(void **state)
{
	(void)state;
	/* each on line 3, after good lines: the line number and the option */
	struct {
		const char *opt, *want;
	} bad[] = {
		{ "net=127.0.0.1", "net: \"127.0.0.1\": 127.0.0.1 is an IP address" },
		{ "net=a.example,,b.example", "net: \"\": an empty network rule" },
		{ "net=", "net: \"\": an empty network rule" },
		{ "net=a.example,", "net: \"\": an empty network rule" },
		{ "net=a..example", "net: \"a..example\": " },
		{ "net=any,a.example", "net: \"any\" only on its own, not in a list" },
		{ "net=a.example,none", "net: \"none\" only on its own, not in a list" },
		{ "net_addr=any", "net_addr: \"any\" is for host names; name the address ranges" },
		{ "net_addr=10.0.0.0/8,any", "net_addr: \"any\" only on its own" },
		{ "net_addr=example.com", "net_addr: \"example.com\": " },
		{ "net_addr=10.0.0.1/8", "net_addr: \"10.0.0.1/8\": " },
		{ "net=any net=none", "net: given twice" },
		{ "net_addr=none net_addr=10.0.0.0/8", "net_addr: given twice" },
		{ "network=any", "network: a number from 0 to 1000000" },
		{ "net", "expected OPTION=NUMBER, not \"net\"" },
	};
	char text[256], want[256];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "tenant ok net=any\n# x\ntenant bad %s\n", bad[i].opt);
		struct tenants ts;
		if (parse(&ts, text) != -1)
			fail_msg("accepted: %s", bad[i].opt);
		snprintf(want, sizeof(want), "3: %s", bad[i].want);
		if (strncmp(err, want, strlen(want)))
			fail_msg("%s: err \"%s\", wanted \"%s...\"", bad[i].opt, err, want);
		assert_null(strchr(err, '\n'));
		assert_null(ts.t);
		assert_int_equal(ts.n, 0);
	}
}

/* rq from body, which must parse. */
static void req_of(const char *body, struct run_spec *rq)
{
	char why[400];
	if (run_spec_from_text(body, strlen(body), rq, why, sizeof(why)))
		fail_msg("%s: %s", body, why);
}

/* Whether tenant t admits body's rules; err has why not. */
static bool admits(const struct tenant *t, const char *body)
{
	struct run_spec rq;
	req_of(body, &rq);
	err[0] = '\0';
	int rc = tenant_net_check(t, &rq, err, sizeof(err));
	run_spec_free(&rq);
	if (rc)
		assert_non_null(strstr(err, "beyond tenant"));
	return rc == 0;
}

#define NET(allow, addr) "{\"argv\": [\"x\"], \"network\": {\"allow\": [" allow "], \"allow_addr\": [" addr "]}}"

static void net_check(void **state)
{
	(void)state;
	struct tenants ts;
	assert_int_equal(parse(&ts, "tenant alice\n"
				    "tenant any net=any\n"
				    "tenant list net=*.pypi.org,files.pythonhosted.org:443,mirror.example\n"
				    "tenant addr net=any net_addr=10.1.2.0/24:3128,fd00::/8\n"),
			 0);
	const struct tenant *alice = &ts.t[0], *any = &ts.t[1], *list = &ts.t[2], *addr = &ts.t[3];

	/* no rules: every tenant, even one with no network */
	assert_true(admits(alice, "{\"argv\": [\"x\"]}"));
	assert_true(admits(alice, NET("", "")));
	/* the default ceiling is none */
	assert_false(admits(alice, NET("\"example.test\"", "")));
	assert_string_equal(err, "network.allow[0]: beyond tenant alice's network ceiling (its runs get no network)");
	assert_false(admits(alice, NET("", "\"10.0.0.0/8\"")));
	assert_string_equal(err,
			    "network.allow_addr[0]: beyond tenant alice's network ceiling (its runs get no network)");

	/* any: every host rule, no address rule */
	assert_true(admits(any, NET("\"example.test\", \"*.example.com\", \"a.b:8080\"", "")));
	assert_false(admits(any, NET("\"example.test\"", "\"192.0.2.0/24\"")));
	assert_string_equal(err, "network.allow_addr[0]: beyond tenant any's network ceiling");

	/* a list: within a suffix, a host with its port, default ports within default ports */
	assert_false(admits(list, NET("\"pypi.org.\"", "")));   /* *.pypi.org is not pypi.org */
	assert_string_equal(err, "network.allow[0]: beyond tenant list's network ceiling");
	assert_true(admits(list, NET("\"files.pypi.org\", \"*.x.pypi.org:443\", \"files.pythonhosted.org:443\"", "")));
	assert_true(admits(list, NET("\"mirror.example\", \"MIRROR.example:80\"", "")));
	assert_false(admits(list, NET("\"mirror.example\", \"files.pythonhosted.org\"", "")));   /* 80 too */
	assert_string_equal(err, "network.allow[1]: beyond tenant list's network ceiling");
	assert_false(admits(list, NET("\"mirror.example:22\"", "")));
	assert_false(admits(list, NET("\"*.example\"", "")));
	assert_false(admits(list, NET("\"evil.example\"", "")));

	/* address ranges: within by prefix and port */
	assert_true(
		admits(addr, NET("\"example.test\"", "\"10.1.2.7:3128\", \"10.1.2.128/25:3128\", \"fd00:1::/32\"")));
	assert_false(admits(addr, NET("", "\"[fd00:1::/32]:8080\"")));   /* fd00::/8 is for 80 and 443 */
	assert_false(admits(addr, NET("", "\"10.1.2.0/24\"")));   /* 80 and 443, not 3128 */
	assert_false(admits(addr, NET("", "\"10.1.0.0/16:3128\"")));
	assert_false(admits(addr, NET("", "\"10.1.2.7:3128\", \"fc00::/7\"")));
	assert_string_equal(err, "network.allow_addr[1]: beyond tenant addr's network ceiling");
	tenants_free(&ts);
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
		cmocka_unit_test(keys_as_digests),
		cmocka_unit_test(size_ceilings),
		cmocka_unit_test(free_twice),
		cmocka_unit_test(net_ceiling),
		cmocka_unit_test(host_rules),
		cmocka_unit_test(bad_net_lines),
		cmocka_unit_test(net_check),
		cmocka_unit_test(load),
		cmocka_unit_test(sandbox_ceilings),
	};
	return cmocka_run_group_tests_name("tenants", tests, NULL, NULL);
}
