/* libFuzzer harness for vmrund's E2B control API (host/vmrund/e2b.c): a
 * create body and the listing's metadata and state filters are client
 * input. Each input is tried as a create body under three tenants'
 * reaches (none, net=any, rules of both kinds); a body that is accepted
 * must be an object that the native sandbox spec reads (or refuses with
 * a reason) once vmrund's own keys are taken off. It is also a metadata
 * query and a state list against a sandbox's view. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "e2b.h"
#include "run_spec.h"

static const struct runtime rts[] = {
	{ .name = "python", .version = "3.11.2", .extension = "py", .run = "python3 {file} {args}" },
};

static void create(const char *text, size_t len, const struct tenant_reach *reach)
{
	json_t *in = json_loadb(text, len, 0, NULL), *native = NULL;
	if (!in)
		return;
	char tmpl[80], err[400];
	int st = e2b_create_body(in, rts, 1, reach, &native, tmpl, sizeof(tmpl), err, sizeof(err));
	json_decref(in);
	if (st) {
		if (native || !err[0] || (st != 400 && st != 403 && st != 404))
			abort();
		return;
	}
	if (!json_is_object(native))
		abort();
	const char *own[] = { "timeout_s", "metadata", "on_timeout" };
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		json_object_del(native, own[i]);
	struct run_spec rq;
	if (run_spec_sandbox_from_json(native, &rq, err, sizeof(err)) && !err[0])
		abort();
	run_spec_free(&rq);
	json_decref(native);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	struct net_rule rules[2];
	char err[200];
	if (net_rule_parse("pypi.org", false, &rules[0], err, sizeof(err)) ||
	    net_rule_parse("10.0.0.0/8", true, &rules[1], err, sizeof(err)))
		abort();
	const struct tenant_reach reaches[] = { { 0 }, { .any = true }, { .rules = rules, .n = 2 } };
	for (size_t i = 0; i < sizeof(reaches) / sizeof(reaches[0]); i++)
		create(text, size, &reaches[i]);
	json_t *view = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", "0123456789abcdef0123456789abcdef", "state", "running",
				 "metadata", "a", "b c", "n", "1");
	/* up to the first NUL, as libmicrohttpd hands a query value over */
	e2b_metadata_match(view, text);
	e2b_state_match(view, text);
	json_decref(view);
	free(text);
	return 0;
}
