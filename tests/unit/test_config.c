/* vmrund's configuration (host/vmrund/config.c): the defaults, every key
 * with its forms and ranges, comments and blank lines, refusals as
 * "LINE: reason", config_load on a missing file, and the slots derived
 * from the host's CPUs and memory. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

static char err[1024];

/* Parse text over the defaults into c: config_parse's value. */
static int parse(struct vmrund_config *c, const char *text)
{
	config_defaults(c);
	err[0] = '\0';
	return config_parse(c, text, strlen(text), err, sizeof(err));
}

/* Whether text, a single line, is refused with line 1's "1: " and want in the reason. */
static void refused(const char *text, const char *want)
{
	struct vmrund_config c;
	if (parse(&c, text) != -1)
		fail_msg("accepted: %s", text);
	if (strncmp(err, "1: ", 3) || !strstr(err, want))
		fail_msg("%s: err \"%s\", wanted \"1: ...%s...\"", text, err, want);
}

static void defaults(void **state)
{
	(void)state;
	struct vmrund_config c;
	memset(&c, 0x5a, sizeof(c));
	config_defaults(&c);
	assert_string_equal(c.listen_host, "127.0.0.1");
	assert_int_equal(c.listen_port, 8080);
	assert_string_equal(c.state_db, "/var/lib/vmrun/state.db");
	assert_string_equal(c.run_dir, "/var/lib/vmrun/runs");
	assert_string_equal(c.keys, "/etc/vmrun/keys");
	assert_string_equal(c.audit_log, "/var/log/vmrun/audit.jsonl");
	assert_string_equal(c.worker, "");
	assert_string_equal(c.guest_dir, "");
	assert_string_equal(c.policy, "/etc/vmrun/policy");   /* root's, as vmrun reads it */
	assert_int_equal(c.slots, 0);
	assert_int_equal(c.queue_max, 256);
	assert_int_equal(c.max_body, 16u << 20);
	assert_int_equal(c.max_connections, 256);
	assert_int_equal(c.connection_timeout_s, 30);
	assert_int_equal(c.wait_max_s, 300);
	assert_int_equal(c.retention_s, 86400);
	assert_int_equal(c.max_connections_per_address, 64);
	assert_int_equal(c.request_head_timeout_s, 10);
	assert_int_equal(c.max_streams_per_tenant, 32);
	assert_int_equal(c.run_retention_s, 7 * 86400);
	assert_false(c.snapshot_per_tenant);
	assert_string_equal(c.anonymous_tenant, "");
	assert_false(c.anonymous_any);
	assert_int_equal(c.slot_memory_mib, 512);
	/* an empty text changes nothing */
	assert_int_equal(parse(&c, ""), 0);
	assert_int_equal(c.listen_port, 8080);
}

/* --local: one user's service in its own directory, no keys, its tenant. */
static void local(void **state)
{
	(void)state;
	struct vmrund_config c;
	config_defaults(&c);
	config_local(&c, "/run/user/1000/vmrun");
	assert_string_equal(c.listen_unix, "/run/user/1000/vmrun/vmrund.sock");
	assert_string_equal(c.state_db, "/run/user/1000/vmrun/state.db");
	assert_string_equal(c.run_dir, "/run/user/1000/vmrun/runs");
	assert_string_equal(c.keys, "");
	assert_string_equal(c.audit_log, "");
	assert_string_equal(c.anonymous_tenant, CONFIG_LOCAL_TENANT);
	assert_true(c.anonymous_any);
}

/* advertise: what the node publishes for its peers; by default its
 * listen address, none for a wildcard or a Unix socket. */
static void advertise(void **state)
{
	(void)state;
	struct vmrund_config c;
	char a[256];
	assert_int_equal(parse(&c, "listen = 10.0.0.5:8080\n"), 0);
	config_advertise(&c, a, sizeof(a));
	assert_string_equal(a, "http://10.0.0.5:8080");
	assert_int_equal(parse(&c, "listen = [fd00::5]:80\n"), 0);
	config_advertise(&c, a, sizeof(a));
	assert_string_equal(a, "http://[fd00::5]:80");
	assert_int_equal(parse(&c, "listen = 0.0.0.0:8080\n"), 0);
	config_advertise(&c, a, sizeof(a));
	assert_string_equal(a, "");
	assert_int_equal(parse(&c, "listen = 0.0.0.0:8080\nadvertise = http://node1.internal:8080\n"), 0);
	config_advertise(&c, a, sizeof(a));
	assert_string_equal(a, "http://node1.internal:8080");
	assert_int_equal(parse(&c, "listen = unix:/run/v.sock\n"), 0);
	config_advertise(&c, a, sizeof(a));
	assert_string_equal(a, "");
	const char *bad[] = { "advertise = https://x:1", "advertise = http://", "advertise = http://x/path",
			      "advertise = node1:8080" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse(&c, bad[i]) != -1)
			fail_msg("accepted: %s", bad[i]);
}

static void listen_forms(void **state)
{
	(void)state;
	struct vmrund_config c;
	assert_int_equal(parse(&c, "listen = 0.0.0.0:9000\n"), 0);
	assert_string_equal(c.listen_host, "0.0.0.0");
	assert_int_equal(c.listen_port, 9000);
	assert_int_equal(parse(&c, "listen = [::1]:443\n"), 0);
	assert_string_equal(c.listen_host, "::1");
	assert_int_equal(c.listen_port, 443);
	assert_int_equal(parse(&c, "listen=[2001:db8::7]:65535"), 0);
	assert_string_equal(c.listen_host, "2001:db8::7");
	assert_int_equal(c.listen_port, 65535);
	assert_int_equal(parse(&c, "listen = 10.1.2.3:1"), 0);
	assert_string_equal(c.listen_host, "10.1.2.3");
	assert_int_equal(c.listen_port, 1);
	assert_string_equal(c.listen_unix, "");
	/* a Unix socket instead; a later TCP listen replaces it */
	assert_int_equal(parse(&c, "listen = unix:/run/vmrund.sock"), 0);
	assert_string_equal(c.listen_unix, "/run/vmrund.sock");
	assert_int_equal(parse(&c, "listen = unix:/run/a.sock\nlisten = 127.0.0.1:80"), 0);
	assert_string_equal(c.listen_unix, "");

	const char *bad[] = {
		"listen = unix:relative.sock", /* not absolute */
		"listen = unix:/a/path/far/too/long/for/a/unix/socket/address/to/hold/it/whole/and/so/it/is/refused/here/at/once/more/than/108.sock",
		"listen = 127.0.0.1",          /* no port */
		"listen = :8080",              /* no host */
		"listen = 127.0.0.1:",         /* empty port */
		"listen = 127.0.0.1:0",        /* port 0 */
		"listen = 127.0.0.1:65536",    /* past 65535 */
		"listen = 127.0.0.1:-1",
		"listen = 127.0.0.1:+80",
		"listen = 127.0.0.1:80x",
		"listen = localhost:8080",     /* not numeric */
		"listen = 256.0.0.1:80",
		"listen = []:80",
		"listen = [::1:80",            /* no closing bracket */
		"listen = [::1]80",            /* no colon after it */
		"listen = [127.0.0.1:80",
		"listen = [zz::1]:80",
		"listen = ",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		refused(bad[i], "listen: a numeric ADDRESS:PORT");
	/* a refused listen leaves line 1's number in the message */
	assert_int_equal(parse(&c, "\n\nlisten = nowhere\n"), -1);
	assert_string_equal(err, "3: listen: a numeric ADDRESS:PORT or unix:PATH, not \"nowhere\"");
}

static void numbers(void **state)
{
	(void)state;
	struct vmrund_config c;
	struct {
		const char *key;
		unsigned long long min, max;
	} keys[] = {
		{ "slots", 0, 4096 },
		{ "queue_max", 1, 1000000 },
		{ "max_connections", 1, 100000 },
		{ "connection_timeout_s", 1, 3600 },
		{ "wait_max_s", 0, 86400 },
		{ "retention_s", 0, 100ull * 86400 },
		{ "slot_memory_mib", 64, 1ull << 20 },
		{ "lease_s", 2, 3600 },
		{ "blob_max_mib", 1, 4096 },
		{ "max_connections_per_address", 0, 100000 },
		{ "request_head_timeout_s", 1, 3600 },
		{ "max_streams_per_tenant", 1, 100000 },
		{ "run_retention_s", 0, 3650ull * 86400 },
	};
	char line[128], want[128];
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *k = keys[i].key;
		unsigned long long edge[2] = { keys[i].min, keys[i].max };
		for (int e = 0; e < 2; e++) {
			snprintf(line, sizeof(line), "%s = %llu\n", k, edge[e]);
			assert_int_equal(parse(&c, line), 0);
			unsigned got = !strcmp(k, "slots")                  ? c.slots
				       : !strcmp(k, "queue_max")            ? c.queue_max
				       : !strcmp(k, "max_connections")      ? c.max_connections
				       : !strcmp(k, "connection_timeout_s") ? c.connection_timeout_s
				       : !strcmp(k, "wait_max_s")           ? c.wait_max_s
				       : !strcmp(k, "retention_s")          ? c.retention_s
				       : !strcmp(k, "lease_s")              ? c.lease_s
				       : !strcmp(k, "blob_max_mib")         ? c.blob_max_mib
				       : !strcmp(k, "max_connections_per_address") ? c.max_connections_per_address
				       : !strcmp(k, "request_head_timeout_s") ? c.request_head_timeout_s
				       : !strcmp(k, "max_streams_per_tenant") ? c.max_streams_per_tenant
				       : !strcmp(k, "run_retention_s")      ? c.run_retention_s
									    : c.slot_memory_mib;
			assert_int_equal(got, edge[e]);
		}
		snprintf(want, sizeof(want), "%s: a whole number from %llu to %llu", k, keys[i].min, keys[i].max);
		snprintf(line, sizeof(line), "%s = %llu", k, keys[i].max + 1);
		refused(line, want);
		if (keys[i].min > 0) {
			snprintf(line, sizeof(line), "%s = %llu", k, keys[i].min - 1);
			refused(line, want);
		}
		const char *junk[] = { "-1", "+1", "1.5", "12abc", "abc", "", " 7x", "0x10", "99999999999999999999999" };
		for (size_t j = 0; j < sizeof(junk) / sizeof(junk[0]); j++) {
			snprintf(line, sizeof(line), "%s = %s", k, junk[j]);
			refused(line, want);
		}
	}
	/* max_body: bytes, from 1 KiB to 1 GiB */
	assert_int_equal(parse(&c, "max_body = 1024"), 0);
	assert_int_equal(c.max_body, 1024);
	assert_int_equal(parse(&c, "max_body = 1073741824"), 0);
	assert_int_equal(c.max_body, 1u << 30);
	refused("max_body = 1023", "max_body: bytes from 1024 to 1073741824");
	refused("max_body = 1073741825", "max_body: bytes from 1024");
	refused("max_body = 1k", "max_body: bytes from 1024");
	refused("max_body =", "max_body: bytes from 1024");
}

static void paths(void **state)
{
	(void)state;
	struct vmrund_config c;
	assert_int_equal(parse(&c, "state_db = /srv/state.db\nrun_dir = /srv/runs\nkeys = /srv/keys\n"
				   "audit_log = /srv/audit.jsonl\nworker = /opt/vmrun/bin/vmrund-worker\n"
				   "guest_dir = /opt/vmrun/guest\npolicy = /srv/policy\n"),
			 0);
	assert_string_equal(c.policy, "/srv/policy");
	assert_string_equal(c.state_db, "/srv/state.db");
	assert_string_equal(c.run_dir, "/srv/runs");
	assert_string_equal(c.keys, "/srv/keys");
	assert_string_equal(c.audit_log, "/srv/audit.jsonl");
	assert_string_equal(c.worker, "/opt/vmrun/bin/vmrund-worker");
	assert_string_equal(c.guest_dir, "/opt/vmrun/guest");

	/* relative paths refused everywhere; empty only where it means something */
	const char *required[] = { "state_db", "run_dir", "keys" };
	const char *optional[] = { "audit_log", "worker", "guest_dir", "policy" };
	char line[128], want[128];
	for (size_t i = 0; i < 3; i++) {
		snprintf(want, sizeof(want), "%s: an absolute path", required[i]);
		snprintf(line, sizeof(line), "%s = relative/path", required[i]);
		refused(line, want);
		snprintf(line, sizeof(line), "%s =", required[i]);
		refused(line, want);
		snprintf(line, sizeof(line), "%s = ", required[i]);
		refused(line, want);
		assert_null(strstr(err, "or nothing"));
	}
	for (size_t i = 0; i < 4; i++) {
		snprintf(want, sizeof(want), "%s: an absolute path, or nothing", optional[i]);
		snprintf(line, sizeof(line), "%s = ./x", optional[i]);
		refused(line, want);
		snprintf(line, sizeof(line), "%s =", optional[i]);
		assert_int_equal(parse(&c, line), 0);
	}
	assert_int_equal(parse(&c, "audit_log =\nworker =\nguest_dir=\npolicy =\n"), 0);
	assert_string_equal(c.policy, "");   /* none: the built-in ceilings */
	assert_string_equal(c.audit_log, "");
	assert_string_equal(c.worker, "");
	assert_string_equal(c.guest_dir, "");
	/* a path as long as PATH_MAX does not fit */
	char *longline = malloc(PATH_MAX + 64);
	assert_non_null(longline);
	int n = snprintf(longline, PATH_MAX + 64, "run_dir = /");
	memset(longline + n, 'a', PATH_MAX - 1);
	longline[n + PATH_MAX - 1] = '\0';
	assert_int_equal(parse(&c, longline), -1);
	assert_non_null(strstr(err, "run_dir: an absolute path"));
	longline[n + PATH_MAX - 2] = '\0';   /* PATH_MAX - 1 bytes: fits */
	assert_int_equal(parse(&c, longline), 0);
	assert_int_equal(strlen(c.run_dir), PATH_MAX - 1);
	free(longline);
}

static void anonymous(void **state)
{
	(void)state;
	struct vmrund_config c;
	assert_int_equal(parse(&c, "anonymous_tenant = public\n"), 0);
	assert_string_equal(c.anonymous_tenant, "public");
	assert_false(c.anonymous_any);
	assert_int_equal(parse(&c, "anonymous_tenant = public\nanonymous_tenant =\n"), 0);
	assert_string_equal(c.anonymous_tenant, "");
	char line[128];
	snprintf(line, sizeof(line), "anonymous_tenant = %063d", 7);   /* 63 characters fit */
	assert_int_equal(parse(&c, line), 0);
	assert_int_equal(strlen(c.anonymous_tenant), 63);
	snprintf(line, sizeof(line), "anonymous_tenant = %064d", 7);
	refused(line, "anonymous_tenant: too long");

	assert_int_equal(parse(&c, "anonymous_from = any"), 0);
	assert_true(c.anonymous_any);
	assert_int_equal(parse(&c, "anonymous_from = any\nanonymous_from = loopback"), 0);
	assert_false(c.anonymous_any);
	refused("anonymous_from = everyone", "anonymous_from: loopback or any");
	refused("anonymous_from =", "anonymous_from: loopback or any");
	refused("anonymous_from = ANY", "anonymous_from: loopback or any");
}

/* Many machines: the store's URI and the node's name. */
static void cluster(void **state)
{
	(void)state;
	struct vmrund_config c;
	assert_int_equal(parse(&c, ""), 0);
	assert_string_equal(c.store, "");
	assert_string_equal(c.node, "");
	assert_int_equal(c.lease_s, 10);
	assert_int_equal(c.blob_max_mib, 64);
	assert_int_equal(parse(&c, "store = postgresql://vmrun@db.example:5432/vmrun?sslmode=require\n"), 0);
	assert_string_equal(c.store, "postgresql://vmrun@db.example:5432/vmrun?sslmode=require");
	assert_int_equal(parse(&c, "store = postgres://h/db"), 0);
	refused("store = /var/lib/vmrun/state.db", "store: a postgresql:// URI (SQLite is state_db)");
	refused("store = mysql://h/db", "store: a postgresql:// URI (SQLite is state_db)");
	refused("store =", "store: a postgresql:// URI (SQLite is state_db)");
	assert_int_equal(parse(&c, "node = worker-3.rack_b"), 0);
	assert_string_equal(c.node, "worker-3.rack_b");
	refused("node =", "node: 1 to 63 of [A-Za-z0-9._-]");
	refused("node = a b", "node: 1 to 63 of [A-Za-z0-9._-]");
	refused("node = n'; drop table runs", "node: 1 to 63 of [A-Za-z0-9._-]");
	char line[128];
	snprintf(line, sizeof(line), "node = %064d", 1);
	refused(line, "node: 1 to 63 of [A-Za-z0-9._-]");
}

static void layout_and_errors(void **state)
{
	(void)state;
	struct vmrund_config c;
	/* comments, blank lines, spaces and tabs around key and value, CRLF,
	 * and a last line without a newline */
	assert_int_equal(parse(&c, "# vmrund.conf\n"
				   "\n"
				   "   \t\n"
				   "  # indented comment = not a key\n"
				   "\tslots\t=\t3 \t\r\n"
				   "queue_max=9\r\n"
				   "listen = [::]:8081\n"
				   "retention_s = 60"),
			 0);
	assert_int_equal(c.slots, 3);
	assert_int_equal(c.queue_max, 9);
	assert_string_equal(c.listen_host, "::");
	assert_int_equal(c.listen_port, 8081);
	assert_int_equal(c.retention_s, 60);
	/* a later line wins */
	assert_int_equal(parse(&c, "slots = 3\nslots = 5\n"), 0);
	assert_int_equal(c.slots, 5);

	assert_int_equal(parse(&c, "# ok\nslots = 2\nfrobnicate = 1\n"), -1);
	assert_string_equal(err, "3: unknown key \"frobnicate\"");
	assert_int_equal(parse(&c, "slots = 2\njust words\n"), -1);
	assert_string_equal(err, "2: expected KEY = VALUE");
	assert_int_equal(parse(&c, "Slots = 2\n"), -1);   /* keys are case sensitive */
	assert_string_equal(err, "1: unknown key \"Slots\"");
	assert_int_equal(parse(&c, "= 2\n"), -1);
	assert_string_equal(err, "1: unknown key \"\"");
	/* a NUL inside a line is not text */
	const char nul[] = "slots = 2\nqueue_max\0 = 3\n";
	config_defaults(&c);
	assert_int_equal(config_parse(&c, nul, sizeof(nul) - 1, err, sizeof(err)), -1);
	assert_string_equal(err, "2: line too long or not text");
	/* len bounds the text: what follows is not read */
	const char *text = "slots = 2\nbogus";
	config_defaults(&c);
	assert_int_equal(config_parse(&c, text, 10, err, sizeof(err)), 0);
	assert_int_equal(c.slots, 2);
}

static void load(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_config.XXXXXX", path[64], err2[1024];
	assert_non_null(mkdtemp(dir));
	struct vmrund_config c;

	/* missing: fine when optional (nothing changes), else an error naming the path */
	snprintf(path, sizeof(path), "%s/missing.conf", dir);
	config_defaults(&c);
	assert_int_equal(config_load(&c, path, true, err, sizeof(err)), 0);
	assert_int_equal(c.listen_port, 8080);
	assert_int_equal(config_load(&c, path, false, err, sizeof(err)), -1);
	snprintf(err2, sizeof(err2), "%s: No such file or directory", path);
	assert_string_equal(err, err2);
	/* a directory is not missing: refused even when optional */
	assert_int_equal(config_load(&c, dir, true, err, sizeof(err)), -1);

	snprintf(path, sizeof(path), "%s/vmrund.conf", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("# test\nlisten = 127.0.0.1:9999\nslots = 7\n", f);
	fclose(f);
	config_defaults(&c);
	assert_int_equal(config_load(&c, path, false, err, sizeof(err)), 0);
	assert_int_equal(c.listen_port, 9999);
	assert_int_equal(c.slots, 7);
	assert_int_equal(c.queue_max, 256);   /* the defaults stay under the file */

	f = fopen(path, "w");
	assert_non_null(f);
	fputs("slots = 7\n\nnope = 1\n", f);
	fclose(f);
	config_defaults(&c);
	assert_int_equal(config_load(&c, path, true, err, sizeof(err)), -1);
	snprintf(err2, sizeof(err2), "%s:3: unknown key \"nope\"", path);
	assert_string_equal(err, err2);

	/* over 64 KiB */
	f = fopen(path, "w");
	assert_non_null(f);
	for (int i = 0; i < 70000 / 16; i++)
		fputs("#..............\n", f);
	fclose(f);
	assert_int_equal(config_load(&c, path, false, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "over 64 KiB"));

	unlink(path);
	assert_int_equal(rmdir(dir), 0);
}

/* snapshot_scope: shared (the default) or tenant, nothing else. */
static void snapshot_scope(void **state)
{
	(void)state;
	struct vmrund_config c;
	assert_int_equal(parse(&c, "snapshot_scope = tenant"), 0);
	assert_true(c.snapshot_per_tenant);
	assert_int_equal(parse(&c, "snapshot_scope = tenant\nsnapshot_scope = shared"), 0);
	assert_false(c.snapshot_per_tenant);
	refused("snapshot_scope = Tenant", "snapshot_scope: shared or tenant");
	refused("snapshot_scope = run", "snapshot_scope: shared or tenant");
	refused("snapshot_scope =", "snapshot_scope: shared or tenant");
}

/* Judge0's API: its prefix, and Judge0's own configuration variables. */
static void judge0(void **state)
{
	(void)state;
	struct vmrund_config c;
	assert_int_equal(parse(&c, ""), 0);
	assert_string_equal(c.judge0_prefix, "/judge0");
	assert_true(c.judge0.cpu_time_limit == 5);
	assert_int_equal(parse(&c, "judge0_prefix = /judge/ce\njudge0_cpu_time_limit = 2\njudge0_max_file_size = 512"), 0);
	assert_string_equal(c.judge0_prefix, "/judge/ce");
	assert_true(c.judge0.cpu_time_limit == 2);
	assert_int_equal(c.judge0.max_file_size, 512);
	assert_int_equal(parse(&c, "judge0_prefix ="), 0);
	assert_string_equal(c.judge0_prefix, "");
	refused("judge0_prefix = /v1/judge0", "judge0_prefix: a path");
	refused("judge0_prefix = /api", "judge0_prefix: a path");
	refused("judge0_prefix = judge0", "judge0_prefix: a path");
	refused("judge0_prefix = /judge0/", "judge0_prefix: a path");
	refused("judge0_prefix = /a//b", "judge0_prefix: a path");
	refused("judge0_prefix = /", "judge0_prefix: a path");
	refused("judge0_wall_time_limit = 0.5", "judge0_wall_time_limit: a number from 1 to 3600");
	refused("judge0_max_number_of_runs = 21", "judge0_max_number_of_runs: a whole number from 1 to 20");
	assert_int_equal(parse(&c, "judge0_number_of_runs = 3\njudge0_max_number_of_runs = 5"), 0);
	assert_int_equal(c.judge0.number_of_runs, 3);
	refused("judge0_nonsense = 1", "unknown key");
	/* E2B's prefix: a path of its own too, never the other API's */
	assert_int_equal(parse(&c, ""), 0);
	assert_string_equal(c.e2b_prefix, "/e2b");
	assert_int_equal(parse(&c, "e2b_prefix = /sandbox-api/e2b"), 0);
	assert_string_equal(c.e2b_prefix, "/sandbox-api/e2b");
	assert_int_equal(parse(&c, "e2b_prefix ="), 0);
	assert_string_equal(c.e2b_prefix, "");
	refused("e2b_prefix = /v1/e2b", "e2b_prefix: a path");
	refused("e2b_prefix = /judge0", "e2b_prefix: a path");
	refused("judge0_prefix = /e2b", "judge0_prefix: a path");
}

/* The retention sweep: every minute, sooner for a short run_retention_s
 * (a quarter of it), never more than once a second. */
static void retention_every(void **state)
{
	(void)state;
	struct vmrund_config c;
	config_defaults(&c);
	assert_int_equal(config_retention_every_ms(&c), 60000);
	c.run_retention_s = 0;   /* kept forever: the artifacts' minute */
	assert_int_equal(config_retention_every_ms(&c), 60000);
	c.run_retention_s = 240;
	assert_int_equal(config_retention_every_ms(&c), 60000);
	c.run_retention_s = 200;
	assert_int_equal(config_retention_every_ms(&c), 50000);
	c.run_retention_s = 2;
	assert_int_equal(config_retention_every_ms(&c), 1000);
	c.run_retention_s = 1;
	assert_int_equal(config_retention_every_ms(&c), 1000);
}

static void slots(void **state)
{
	(void)state;
	struct vmrund_config c;
	config_defaults(&c);
	c.slots = 6;   /* explicit: the host does not matter */
	assert_int_equal(config_slots(&c, 1, 100), 6);
	assert_int_equal(config_slots(&c, 64, 1 << 20), 6);
	c.slots = 0;
	/* by CPUs: memory for more */
	assert_int_equal(config_slots(&c, 4, 16384), 4);
	/* by memory: 2048 MiB at 512 each */
	assert_int_equal(config_slots(&c, 16, 2048), 4);
	assert_int_equal(config_slots(&c, 16, 2047), 3);
	c.slot_memory_mib = 1024;
	assert_int_equal(config_slots(&c, 16, 8192), 8);
	/* at least 1 */
	assert_int_equal(config_slots(&c, 16, 100), 1);
	assert_int_equal(config_slots(&c, 0, 1 << 20), 1);
	assert_int_equal(config_slots(&c, 0, 0), 1);
	/* no overflow with a lot of memory */
	c.slot_memory_mib = 64;
	assert_int_equal(config_slots(&c, 4096, UINT64_MAX), 4096);
}

/* Admission by size (issue 38): node_memory_mib and node_disk_mib, and
 * the node's size from the machine where they are 0. */
static void node_size(void **state)
{
	(void)state;
	struct vmrund_config c;
	uint64_t mem, disk;
	assert_int_equal(parse(&c, ""), 0);
	assert_int_equal(c.node_memory_mib, 0);
	assert_int_equal(c.node_disk_mib, 0);
	assert_int_equal(parse(&c, "node_memory_mib = 2048\nnode_disk_mib = 4096\n"), 0);
	assert_int_equal(c.node_memory_mib, 2048);
	assert_int_equal(c.node_disk_mib, 4096);
	config_node_size(&c, 65536, 100000, &mem, &disk);
	assert_int_equal(mem, 2048);   /* as configured, whatever the machine */
	assert_int_equal(disk, 4096);
	assert_int_equal(parse(&c, "node_memory_mib = 1073741824\nnode_disk_mib = 0\n"), 0);
	refused("node_memory_mib = 1073741825", "node_memory_mib: a whole number from 0 to 1073741824");
	refused("node_disk_mib = -1", "node_disk_mib: a whole number from 0 to 1073741824");
	refused("node_disk_mib = 1.5", "node_disk_mib: a whole number");
	/* from the machine: an eighth of its memory kept back, at least 1 GiB */
	config_defaults(&c);
	config_node_size(&c, 65536, 100000, &mem, &disk);
	assert_int_equal(mem, 65536 - 8192);
	assert_int_equal(disk, 90000);   /* 90% of run_dir's free space */
	config_node_size(&c, 4096, 1000, &mem, &disk);
	assert_int_equal(mem, 3072);
	assert_int_equal(disk, 900);
	/* a small machine: still room for one run of the defaults */
	config_node_size(&c, 1024, 10, &mem, &disk);
	assert_int_equal(mem, 256);
	assert_int_equal(disk, 64);
	config_node_size(&c, 0, 0, &mem, &disk);
	assert_int_equal(mem, 256);
	assert_int_equal(disk, 64);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults),
		cmocka_unit_test(listen_forms),
		cmocka_unit_test(local),
		cmocka_unit_test(advertise),
		cmocka_unit_test(numbers),
		cmocka_unit_test(paths),
		cmocka_unit_test(anonymous),
		cmocka_unit_test(cluster),
		cmocka_unit_test(layout_and_errors),
		cmocka_unit_test(load),
		cmocka_unit_test(slots),
		cmocka_unit_test(node_size),
		cmocka_unit_test(snapshot_scope),
		cmocka_unit_test(judge0),
		cmocka_unit_test(retention_every),
	};
	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
