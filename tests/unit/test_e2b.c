/* E2B's control API translated onto vmrund's sandboxes (host/vmrund/e2b.c):
 * a create body to the native one (templates, timeout, metadata, envVars,
 * autoPause, the network within the tenant's reach), a native view as
 * E2B's Sandbox and SandboxDetail, the listing's filters, the error body. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b.h"

static const struct runtime rts[] = {
	{ .name = "python", .version = "3.11.2", .extension = "py", .run = "python3 {file} {args}" },
	{ .name = "c", .version = "12.2.0", .extension = "c", .run = "/tmp/prog {args}" },
};
#define NRTS 2

static char err[400], tmpl[80];

/* body through e2b_create_body under reach: its status, *out the native body. */
static int create(const char *body, const struct tenant_reach *reach, json_t **out)
{
	json_t *in = json_loads(body, 0, NULL);
	assert_non_null(in);
	err[0] = '\0';
	int st = e2b_create_body(in, rts, NRTS, reach, out, tmpl, sizeof(tmpl), err, sizeof(err));
	json_decref(in);
	assert_true(st ? *out == NULL && err[0] : *out != NULL);
	return st;
}

static void assert_native(const json_t *native, const char *want)
{
	json_t *w = json_loads(want, 0, NULL);
	assert_non_null(w);
	if (!json_equal(native, w)) {
		char *got = json_dumps(native, JSON_COMPACT | JSON_SORT_KEYS);
		fail_msg("native body %s, wanted %s", got, want);
	}
	json_decref(w);
}

static const struct tenant_reach none = { 0 };

static void create_body(void **state)
{
	(void)state;
	json_t *n;
	/* the SDK's plain Sandbox.create(): the default image */
	assert_int_equal(create("{\"templateID\":\"base\"}", &none, &n), 0);
	assert_string_equal(tmpl, "base");
	assert_native(n, "{}");
	json_decref(n);
	assert_int_equal(create("{}", &none, &n), 0);
	assert_string_equal(tmpl, "base");
	json_decref(n);
	assert_int_equal(create("{\"templateID\":\"python\",\"timeout\":120,\"metadata\":{\"a\":\"b\"},"
				"\"envVars\":{\"X\":\"1\"},\"autoPause\":true,\"secure\":true}",
				&none, &n),
			 0);
	assert_string_equal(tmpl, "python");
	assert_native(n, "{\"runtime\":\"python\",\"timeout_s\":120,\"metadata\":{\"a\":\"b\"},\"env\":{\"X\":\"1\"},"
			 "\"on_timeout\":\"pause\"}");
	json_decref(n);
	assert_int_equal(create("{\"autoPause\":false}", &none, &n), 0);
	assert_native(n, "{\"on_timeout\":\"stop\"}");
	json_decref(n);
	/* refused, each with its reason */
	const struct { const char *body; int status; const char *why; } bad[] = {
		{ "{\"templateID\":\"cobol\"}", 404, "template 'cobol' not found" },
		{ "{\"templateID\":7}", 400, "templateID: must be a string" },
		{ "{\"timeout\":0}", 400, "timeout: must be a whole number" },
		{ "{\"timeout\":1.5}", 400, "timeout: must be a whole number" },
		{ "{\"autoPause\":\"yes\"}", 400, "autoPause: must be true or false" },
		{ "{\"mcp\":{}}", 400, "mcp: not available in vmrun" },
		{ "{\"volumeMounts\":[]}", 400, "volumeMounts: not available in vmrun" },
		{ "{\"network\":{\"rules\":{}}}", 400, "network.rules: not available in vmrun" },
		{ "{\"network\":{\"denyOut\":[\"10.0.0.0/8\"]}}", 400, "network.denyOut: vmrun allows by rule" },
		{ "{\"network\":{\"allowOut\":[1]}}", 400, "network.allowOut: must be an array" },
		{ "{\"allow_internet_access\":1}", 400, "allow_internet_access: must be true or false" },
		{ "{\"allow_internet_access\":true}", 403, "may reach no host" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int st = create(bad[i].body, &none, &n);
		if (st != bad[i].status || !strstr(err, bad[i].why))
			fail_msg("%s: %d \"%s\", wanted %d \"%s\"", bad[i].body, st, err, bad[i].status, bad[i].why);
	}
	/* a snapshot's id: a fork of that checkpoint, with nothing of its own */
	assert_int_equal(create("{\"templateID\":\"0123456789abcdef0123456789abcdef:before\",\"timeout\":60}", &none, &n),
			 0);
	assert_string_equal(tmpl, "0123456789abcdef0123456789abcdef:before");
	assert_native(n, "{\"from_checkpoint\":\"0123456789abcdef0123456789abcdef/before\",\"timeout_s\":60}");
	json_decref(n);
	struct tenant_reach any = { .any = true };
	assert_int_equal(create("{\"templateID\":\"abc:x\"}", &any, &n), 0);
	assert_native(n, "{\"from_checkpoint\":\"abc/x\"}");   /* the snapshot's network, not the tenant's */
	json_decref(n);
	assert_int_equal(create("{\"templateID\":\"abc:x\",\"envVars\":{}}", &none, &n), 400);
	assert_non_null(strstr(err, "envVars: a sandbox from a snapshot has the snapshot's"));
	json_t *arr = json_loads("[]", 0, NULL);
	int st = e2b_create_body(arr, rts, NRTS, &none, &n, tmpl, sizeof(tmpl), err, sizeof(err));
	assert_int_equal(st, 400);
	json_decref(arr);
}

/* Internet access is the tenant's names, by default and when asked;
 * allowOut adds hosts and addresses; denyOut of everything leaves
 * allowOut alone. */
static void network(void **state)
{
	(void)state;
	json_t *n;
	struct tenant_reach any = { .any = true };
	assert_int_equal(create("{}", &any, &n), 0);
	assert_native(n, "{\"network\":{\"allow\":[\"*\"]}}");
	json_decref(n);
	assert_int_equal(create("{\"allow_internet_access\":false}", &any, &n), 0);
	assert_native(n, "{}");
	json_decref(n);
	struct net_rule rules[2] = { 0 };
	assert_int_equal(net_rule_parse("pypi.org", false, &rules[0], err, sizeof(err)), 0);
	assert_int_equal(net_rule_parse("10.1.2.0/24:3128", true, &rules[1], err, sizeof(err)), 0);
	struct tenant_reach some = { .rules = rules, .n = 2 };
	/* the tenant's host rules only: its address ranges are for runs that name them */
	assert_int_equal(create("{\"allow_internet_access\":true}", &some, &n), 0);
	assert_native(n, "{\"network\":{\"allow\":[\"pypi.org\"]}}");
	json_decref(n);
	assert_int_equal(create("{\"network\":{\"allowOut\":[\"1.1.1.1\",\"10.1.2.0/24\",\"example.com\"],"
				"\"denyOut\":[\"0.0.0.0/0\"]}}",
				&some, &n),
			 0);
	assert_native(n, "{\"network\":{\"allow\":[\"example.com\"],\"allow_addr\":[\"1.1.1.1\",\"10.1.2.0/24\"]}}");
	json_decref(n);
	/* internet asked for and everything denied: allowOut alone, no 403 */
	assert_int_equal(create("{\"allow_internet_access\":true,\"network\":{\"denyOut\":[\"0.0.0.0/0\"],"
				"\"allowOut\":[\"example.com\"]}}",
				&none, &n),
			 0);
	assert_native(n, "{\"network\":{\"allow\":[\"example.com\"]}}");
	json_decref(n);
	/* a tenant with no reach, by default: no network, no error */
	assert_int_equal(create("{\"network\":{}}", &none, &n), 0);
	assert_native(n, "{}");
	json_decref(n);
}

static json_t *view(const char *state, const char *runtime, const char *meta)
{
	char text[1024];
	snprintf(text, sizeof(text),
		 "{\"id\":\"0123456789abcdef0123456789abcdef\",\"state\":\"%s\",\"runtime\":%s,\"node\":\"n1\","
		 "\"started_at\":\"2026-12-06T10:00:00.000Z\",\"timeout_at\":\"2026-12-06T10:05:00.000Z\","
		 "\"limits\":{\"memory_mib\":256,\"disk_mib\":64,\"timeout_s\":300},\"metadata\":%s,"
		 "\"on_timeout\":\"pause\"}",
		 state, runtime, meta);
	json_t *v = json_loads(text, 0, NULL);
	assert_non_null(v);
	return v;
}

static void views(void **state)
{
	(void)state;
	json_t *v = view("running", "\"python\"", "{\"k\":\"v\"}");
	json_t *s = e2b_sandbox(v, "feed");
	assert_string_equal(json_string_value(json_object_get(s, "sandboxID")), "0123456789abcdef0123456789abcdef");
	assert_string_equal(json_string_value(json_object_get(s, "envdAccessToken")), "feed");
	assert_string_equal(json_string_value(json_object_get(s, "templateID")), "python");
	assert_string_equal(json_string_value(json_object_get(s, "envdVersion")), E2B_ENVD_VERSION);
	assert_true(json_is_null(json_object_get(s, "domain")));
	json_decref(s);
	json_t *d = e2b_detail(v);
	assert_string_equal(json_string_value(json_object_get(d, "state")), "running");
	assert_string_equal(json_string_value(json_object_get(d, "endAt")), "2026-12-06T10:05:00.000Z");
	assert_int_equal(json_integer_value(json_object_get(d, "cpuCount")), 1);
	assert_int_equal(json_integer_value(json_object_get(d, "memoryMB")), 256);
	assert_string_equal(json_string_value(json_object_get(json_object_get(d, "lifecycle"), "onTimeout")), "pause");
	assert_string_equal(json_string_value(json_object_get(json_object_get(d, "metadata"), "k")), "v");
	json_decref(d);
	json_decref(v);
	/* the default image is the base template; starting and stopping are running */
	v = view("starting", "null", "{}");
	s = e2b_sandbox(v, NULL);
	assert_string_equal(json_string_value(json_object_get(s, "templateID")), "base");
	assert_null(json_object_get(s, "envdAccessToken"));
	json_decref(s);
	assert_string_equal(e2b_state(v), "running");
	json_decref(v);
	v = view("paused", "null", "{}");
	assert_string_equal(e2b_state(v), "paused");
	json_decref(v);
	/* what E2B forgets once it ends */
	const char *gone[] = { "stopped", "lost", "resumable", "?" };
	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
		v = view(gone[i], "null", "{}");
		assert_null(e2b_state(v));
		assert_null(e2b_detail(v));
		assert_false(e2b_state_match(v, NULL));
		json_decref(v);
	}
}

static void filters(void **state)
{
	(void)state;
	json_t *v = view("paused", "null", "{\"user\":\"a b&c\",\"n\":\"1\"}");
	assert_true(e2b_state_match(v, NULL));
	assert_true(e2b_state_match(v, ""));
	assert_true(e2b_state_match(v, "running,paused"));
	assert_true(e2b_state_match(v, "paused"));
	assert_false(e2b_state_match(v, "running"));
	assert_false(e2b_state_match(v, "pause"));
	assert_false(e2b_state_match(v, "pausedx,running"));
	/* the SDK's metadata as libmicrohttpd hands it over: each part
	 * encodeURIComponent'd, then the pairs by URLSearchParams (so '%'
	 * again): {user: "a b&c", n: "1"} */
	assert_true(e2b_metadata_match(v, ""));
	assert_true(e2b_metadata_match(v, "n=1"));
	assert_true(e2b_metadata_match(v, "user=a%2520b%2526c&n=1"));
	assert_true(e2b_metadata_match(v, "n=1&user=a%2520b%2526c"));
	assert_false(e2b_metadata_match(v, "user=a%2520b"));
	assert_false(e2b_metadata_match(v, "n=2"));
	assert_false(e2b_metadata_match(v, "missing=1"));
	/* malformed: matches nothing, reads nothing past the text */
	const char *bad[] = { "n", "n=1&x", "n=%", "n=%1", "n=%zz", "n=%00", "%=1", "n=%25zz", "n=%2500" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (e2b_metadata_match(v, bad[i]))
			fail_msg("metadata %s matched", bad[i]);
	json_decref(v);
}

static void snapshot_ids(void **state)
{
	(void)state;
	char ref[E2B_SNAPSHOT_MAX + 1];
	assert_int_equal(e2b_snapshot_ref("0123456789abcdef0123456789abcdef:before", ref), 1);
	assert_string_equal(ref, "0123456789abcdef0123456789abcdef/before");
	const char *bad[] = { "python", "base", ":x", "abc:", "abc:.x", "abc:a/b", "abc:a b",
			      "0123456789abcdef0123456789abcdef0:x", "a:b:c" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (e2b_snapshot_ref(bad[i], ref))
			fail_msg("%s taken as a snapshot", bad[i]);
}

static void metric(void **state)
{
	(void)state;
	json_t *v = view("running", "null", "{}");
	json_t *u = json_loads("{\"cpu_ms\":30000,\"memory_bytes\":1000,\"disk_bytes\":7}", 0, NULL);
	/* a minute after its start, 30 s of CPU on its one CPU: 50% */
	int64_t now = 1796551260000;   /* 2026-12-06T10:01:00Z */
	json_t *m = e2b_metric(v, u, now);
	assert_non_null(m);
	assert_true(json_real_value(json_object_get(m, "cpuUsedPct")) == 50.0);
	assert_int_equal(json_integer_value(json_object_get(m, "cpuCount")), 1);
	assert_int_equal(json_integer_value(json_object_get(m, "memUsed")), 1000);
	assert_int_equal(json_integer_value(json_object_get(m, "memTotal")), 256 << 20);
	assert_int_equal(json_integer_value(json_object_get(m, "diskUsed")), 7);
	assert_int_equal(json_integer_value(json_object_get(m, "diskTotal")), 64 << 20);
	assert_int_equal(json_integer_value(json_object_get(m, "timestampUnix")), now / 1000);
	assert_string_equal(json_string_value(json_object_get(m, "timestamp")), "2026-12-06T10:01:00.000Z");
	json_decref(m);
	json_decref(u);
	/* nulls where the supervisor could not read: zeros, never a failure */
	u = json_loads("{\"cpu_ms\":null,\"memory_bytes\":null,\"disk_bytes\":null}", 0, NULL);
	m = e2b_metric(v, u, now);
	assert_non_null(m);
	assert_true(json_real_value(json_object_get(m, "cpuUsedPct")) == 0);
	json_decref(m);
	json_decref(u);
	json_decref(v);
}

static void errors(void **state)
{
	(void)state;
	json_t *e = e2b_error(404, "sandbox \"x\" not found");
	assert_int_equal(json_integer_value(json_object_get(e, "code")), 404);
	assert_string_equal(json_string_value(json_object_get(e, "message")), "sandbox \"x\" not found");
	json_decref(e);
}

/* E2B_DOMAIN's routing: PORT-ID.DOMAIN names a sandbox, nothing else does */
static void host_names(void **state)
{
	(void)state;
	char id[33];
	assert_true(e2b_host_sandbox("49983-0123456789ABCDEF0123456789abcdef.Sandboxes.test:8443", "sandboxes.test", id));
	assert_string_equal(id, "0123456789abcdef0123456789abcdef");
	assert_true(e2b_host_sandbox("8-0123456789abcdef0123456789abcdef.sandboxes.test", "sandboxes.test", id));
	const char *no[] = { "0123456789abcdef0123456789abcdef.sandboxes.test", "-0123456789abcdef0123456789abcdef.sandboxes.test",
			     "123456-0123456789abcdef0123456789abcdef.sandboxes.test",
			     "49983-0123456789abcdef0123456789abcde.sandboxes.test",
			     "49983-0123456789abcdef0123456789abcdeg.sandboxes.test",
			     "49983-0123456789abcdef0123456789abcdef.sandboxes.test.evil",
			     "49983-0123456789abcdef0123456789abcdef.xsandboxes.test",
			     "49983-0123456789abcdef0123456789abcdefsandboxes.test", "api.sandboxes.test", "" };
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		assert_false(e2b_host_sandbox(no[i], "sandboxes.test", id));
	assert_false(e2b_host_sandbox(NULL, "sandboxes.test", id));
	assert_false(e2b_host_sandbox("49983-0123456789abcdef0123456789abcdef.sandboxes.test", "", id));
	assert_true(e2b_domain_ok("sandboxes.example.com"));
	assert_true(e2b_domain_ok("a-b.c"));
	const char *bad[] = { "", ".a", "a.", "a..b", "-a.b", "a-.b", "a_b.c", "a b", "a/b" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(e2b_domain_ok(bad[i]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(host_names),
		cmocka_unit_test(create_body), cmocka_unit_test(network), cmocka_unit_test(views),
		cmocka_unit_test(filters),     cmocka_unit_test(errors),  cmocka_unit_test(snapshot_ids),
		cmocka_unit_test(metric),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
