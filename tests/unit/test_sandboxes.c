/* vmrund's sandboxes (host/vmrund/sandboxes.c), the parts that need no
 * supervisor: a create's body split into the supervisor's spec, its life
 * and its metadata (each refusal with its field), and a sandbox's view
 * from its row. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxes.h"

static char err[300];

static struct sbx_life full;   /* the last split's whole life */

static int split(const char *text, unsigned max, json_t **spec, double *life)
{
	json_t *b = json_loads(text, 0, NULL);
	assert_non_null(b);
	int rc = sandbox_body_split(b, max, 7200, spec, &full, err, sizeof(err));
	*life = full.timeout_s;
	json_decref(b);
	return rc;
}

static void body_split(void **state)
{
	(void)state;
	json_t *spec;
	double life;
	assert_int_equal(split("{\"runtime\":\"python\",\"timeout_s\":120,\"metadata\":{\"user\":\"u1\"},"
			       "\"limits\":{\"memory_mib\":512}}", 3600, &spec, &life), 0);
	assert_true(life == 120);
	char *t = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(t, "{\"limits\":{\"memory_mib\":512},\"runtime\":\"python\"}");
	free(t);
	json_decref(spec);
	/* no timeout_s: the default, or the tenant's ceiling when less */
	assert_int_equal(split("{}", 3600, &spec, &life), 0);
	assert_true(life == VMRUND_SBX_TIMEOUT_S);
	json_decref(spec);
	assert_int_equal(split("{}", 60, &spec, &life), 0);
	assert_true(life == 60);
	assert_false(full.on_timeout_pause);
	assert_true(full.pause_ttl_s == 7200);   /* the tenant's max_pause_ttl_s */
	json_decref(spec);
	/* its pause's: taken out of the spec */
	assert_int_equal(split("{\"runtime\":\"python\",\"on_timeout\":\"pause\",\"pause_ttl_s\":60}", 3600, &spec, &life), 0);
	assert_true(full.on_timeout_pause && full.pause_ttl_s == 60);
	t = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(t, "{\"runtime\":\"python\"}");
	free(t);
	json_decref(spec);
	/* a fork: its checkpoint named, nothing of the spec its own */
	const char *dig = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	json_t *b = json_pack("{s:s,s:i,s:s}", "from_checkpoint", "abc/cp-1", "count", 2, "expect_digest", dig);
	assert_int_equal(sandbox_body_split(b, 600, 7200, &spec, &full, err, sizeof(err)), 0);
	assert_string_equal(full.from_checkpoint, "abc/cp-1");
	assert_string_equal(full.expect_digest, dig);
	assert_int_equal(json_object_size(spec), 0);
	json_decref(spec);
	json_decref(b);
}

static void body_refused(void **state)
{
	(void)state;
	struct { const char *body, *why; } c[] = {
		{ "[]", "the body must be a JSON object" },
		{ "{\"timeout_s\":0}", "timeout_s: seconds, more than 0 and at most 600 (the tenant's max_sandbox_timeout_s)" },
		{ "{\"timeout_s\":601}", "timeout_s: seconds, more than 0 and at most 600 (the tenant's max_sandbox_timeout_s)" },
		{ "{\"timeout_s\":\"5\"}", "timeout_s: seconds, more than 0 and at most 600 (the tenant's max_sandbox_timeout_s)" },
		{ "{\"metadata\":[]}", "metadata: an object of strings" },
		{ "{\"on_timeout\":\"sleep\"}", "on_timeout: \"stop\" or \"pause\"" },
		{ "{\"from_checkpoint\":1}", "from_checkpoint: \"SANDBOX_ID/NAME\"" },
		{ "{\"from_checkpoint\":\"a/b\",\"limits\":{}}", "limits: a fork runs its checkpoint's runtime, env, limits and network" },
		{ "{\"on_timeout\":1}", "on_timeout: \"stop\" or \"pause\"" },
		{ "{\"expect_digest\":\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}",
		  "expect_digest: the 64 hex digits of a diff's digest, with from_checkpoint" },
		{ "{\"from_checkpoint\":\"a/b\",\"expect_digest\":\"0123\"}",
		  "expect_digest: the 64 hex digits of a diff's digest, with from_checkpoint" },
		{ "{\"pause_ttl_s\":0}", "pause_ttl_s: seconds, more than 0 and at most 7200 (the tenant's max_pause_ttl_s)" },
		{ "{\"pause_ttl_s\":7201}", "pause_ttl_s: seconds, more than 0 and at most 7200 (the tenant's max_pause_ttl_s)" },
		{ "{\"metadata\":{\"a\":1}}", "metadata.a: a string of at most 512 bytes" },
		{ "{\"metadata\":{\"a b\":\"x\"}}", "metadata: a key of 1 to 64 characters of [A-Za-z0-9._-]" },
		{ "{\"metadata\":{\"\":\"x\"}}", "metadata: a key of 1 to 64 characters of [A-Za-z0-9._-]" },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		json_t *spec = (json_t *)1;
		struct sbx_life life;
		json_t *b = json_loads(c[i].body, JSON_DECODE_ANY, NULL);
		assert_int_equal(sandbox_body_split(b, 600, 7200, &spec, &life, err, sizeof(err)), -1);
		assert_null(spec);
		assert_string_equal(err, c[i].why);
		json_decref(b);
	}
	/* too many entries, too long a value */
	json_t *b = json_object(), *m = json_object();
	for (int i = 0; i <= VMRUND_SBX_META_MAX; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%d", i);
		json_object_set_new(m, k, json_string("v"));
	}
	json_object_set_new(b, "metadata", m);
	json_t *spec;
	struct sbx_life life;
	assert_int_equal(sandbox_body_split(b, 600, 7200, &spec, &life, err, sizeof(err)), -1);
	assert_string_equal(err, "metadata: at most 32 entries");
	char longv[VMRUND_SBX_META_VAL + 2];
	memset(longv, 'x', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	json_object_set_new(b, "metadata", json_pack("{s:s}", "k", longv));
	assert_int_equal(sandbox_body_split(b, 600, 7200, &spec, &life, err, sizeof(err)), -1);
	assert_string_equal(err, "metadata.k: a string of at most 512 bytes");
	json_decref(b);
}

static void view(void **state)
{
	(void)state;
	struct store_sandbox sb = { .id = "0123456789abcdef0123456789abcdef", .tenant = "alice", .node = "n1",
				    .state = SBS_RUNNING, .created_ms = 1000, .started_ms = 2000,
				    .timeout_at_ms = 62000, .memory_mib = 512, .disk_mib = 256 };
	sb.request = strdup("{\"runtime\":\"python\",\"limits\":{\"cpus\":2,\"memory_mib\":512},\"timeout_s\":60.0,"
			    "\"metadata\":{\"user\":\"u1\"}}");
	json_t *v = sandbox_view(&sb, 32000);
	assert_string_equal(json_string_value(json_object_get(v, "state")), "running");
	assert_string_equal(json_string_value(json_object_get(v, "runtime")), "python");
	assert_string_equal(json_string_value(json_object_get(v, "created_at")), "1970-01-01T00:00:01.000Z");
	assert_true(json_is_null(json_object_get(v, "ended_at")));
	assert_true(json_real_value(json_object_get(v, "time_left_s")) == 30.0);
	json_t *lim = json_object_get(v, "limits");
	assert_int_equal(json_integer_value(json_object_get(lim, "cpus")), 2);
	assert_int_equal(json_integer_value(json_object_get(lim, "disk_mib")), 256);
	assert_string_equal(json_string_value(json_object_get(json_object_get(v, "metadata"), "user")), "u1");
	json_decref(v);
	/* stopped: no time left, whatever its timeout said */
	sb.state = SBS_STOPPED;
	snprintf(sb.reason, sizeof(sb.reason), "deleted");
	v = sandbox_view(&sb, 32000);
	assert_true(json_real_value(json_object_get(v, "time_left_s")) == 0.0);
	assert_string_equal(json_string_value(json_object_get(v, "reason")), "deleted");
	json_decref(v);
	/* a request that is not JSON still gives a view */
	free(sb.request);
	sb.request = strdup("not json");
	v = sandbox_view(&sb, 0);
	assert_true(json_is_null(json_object_get(v, "runtime")));
	assert_int_equal(json_object_size(json_object_get(v, "metadata")), 0);
	json_decref(v);
	store_sandbox_free(&sb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(body_split),
		cmocka_unit_test(body_refused),
		cmocka_unit_test(view),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
