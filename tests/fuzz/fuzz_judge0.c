/* libFuzzer harness for vmrund's Judge0 API (host/vmrund/judge0*.c): a
 * submission body, ?fields= and a token are client input, and Ruby's
 * base64 is read from clients and written into answers. Each input is
 * tried as a submission (base64 and not); one that is accepted must
 * survive the canonical form the store keeps, and is then shown with
 * every field, the same input standing in as the run's result (a shape
 * no worker writes must not crash the view). The input is also a fields
 * list, a token and base64 text, whose decoding must come back from
 * Ruby's encoding unchanged; and as a /v1/judge request (judge.c), whose
 * tests are then judged against the input standing in as each command's
 * end, under every checker; and as the zip of additional_files. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "judge.h"
#include "judge0.h"

static const struct runtime rts[] = {
	{ .name = "python", .version = "3.11.2", .extension = "py", .run = "python3 {file} {args}" },
	{ .name = "c", .version = "12.2.0", .extension = "c", .compile = "gcc {files}", .run = "./a.out {args}" },
};

static void view_all(const json_t *request, const json_t *result)
{
	uint64_t all;
	char invalid[8];
	if (judge0_fields("*", &all, invalid, sizeof(invalid)))
		abort();
	for (int b64 = 0; b64 < 2; b64++) {
		struct judge0_run run = { .id = "0123456789abcdef0123456789abcdef", .state = 2, .request = request,
					  .result = json_is_object(result) ? result : NULL, .rts = rts, .nrts = 2,
					  .created_ms = 1, .message = "m", .node = "n" };
		bool bad;
		json_t *v = judge0_view(&run, all, b64, &bad);
		if (!v || (b64 && bad))
			abort();
		char *text = json_dumps(v, JSON_COMPACT);
		if (!text)
			abort();
		free(text);
		json_decref(v);
	}
}

static void submission(const json_t *body, bool b64, const json_t *result)
{
	struct judge0_config c;
	struct run_spec rq, back;
	json_t *errors = NULL;
	char err[300];
	/* callbacks to any name, and to one private range */
	struct net_rule rule;
	struct tenant t = { .callback = { .any = true, .rules = &rule, .n = 1 }, .net = { .any = true } };
	if (net_rule_parse("10.9.0.0/16:8080", true, &rule, err, sizeof(err)))
		abort();
	judge0_config_defaults(&c);
	if (judge0_submission(body, b64, &c, rts, 2, &t, &rq, &errors)) {
		if (!json_is_object(errors) || !json_object_size(errors))
			abort();   /* a refusal always says why */
		json_decref(errors);
		return;
	}
	if (errors || !rq.source || rq.nfiles != 1 || !rq.client)
		abort();
	json_t *canon = run_spec_to_json(&rq);
	char *text = canon ? json_dumps(canon, JSON_COMPACT) : NULL;
	if (!text || run_spec_from_text(text, strlen(text), &back, err, sizeof(err)) ||
	    !json_equal(back.client, rq.client) || back.files[0].len != rq.files[0].len)
		abort();   /* the stored form means another submission */
	view_all(canon, result);
	free(text);
	json_decref(canon);
	run_spec_free(&back);
	run_spec_free(&rq);
}

static void base64_round_trip(const uint8_t *data, size_t len)
{
	unsigned char *a, *b;
	size_t na, nb;
	if (judge0_decode64((const char *)data, len, &a, &na))
		return;
	char *e = judge0_encode64(a, na, NULL);
	if (e && !judge0_decode64(e, strlen(e), &b, &nb)) {
		if (nb != na || (na && memcmp(a, b, na)))
			abort();
		free(b);
	}
	free(e);
	free(a);
}

/* The input as additional_files: what is taken must be a spec the worker
 * reads back, every path one the workspace may hold; a refusal is one
 * line and leaves the spec as it was. */
static void unzip(const uint8_t *data, size_t len)
{
	struct run_spec rq = { .source = true, .runtime = "c", .nrun_cmd = 0 };
	char why[300] = "", err[300];
	if (judge0_unzip(data, len, 64 << 10, &rq, why, sizeof(why))) {
		if (rq.nwfiles || !why[0] || strchr(why, '\n'))
			abort();
		run_spec_free(&rq);
		return;
	}
	uint64_t total = 0;
	for (unsigned i = 0; i < rq.nwfiles; i++) {
		if (run_spec_path_check(rq.wfiles[i].name, err, sizeof(err)))
			abort();
		total += rq.wfiles[i].len;
	}
	if (total > 64 << 10)
		abort();   /* never past the cap, whatever the headers said */
	if (run_spec_add_run_cmd(&rq, "true"))
		abort();
	json_t *j = run_spec_to_json(&rq);
	struct run_spec back;
	if (!j || run_spec_from_json(j, &back, err, sizeof(err)) || back.nwfiles != rq.nwfiles)
		abort();
	run_spec_free(&back);
	json_decref(j);
	run_spec_free(&rq);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	char text[256], id[33], invalid[128];
	size_t n = len < sizeof(text) - 1 ? len : sizeof(text) - 1;
	uint64_t mask;
	memcpy(text, data, n);
	text[n] = '\0';
	judge0_fields(text, &mask, invalid, sizeof(invalid));
	if (judge0_token_id(text, id) && strlen(id) != 32)
		abort();
	base64_round_trip(data, len);
	unzip(data, len);
	json_t *body = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, NULL);
	if (!body)
		return 0;
	submission(body, false, body);
	submission(body, true, body);
	struct judge_request jr;
	char err[512] = "";
	if (!judge_parse(body, &jr, err, sizeof(err))) {
		if (!jr.ntests || !jr.src.source)
			abort();
		for (unsigned i = 0; i < jr.ntests; i++) {
			char why[300];
			jr.checker = (enum judge_checker)(i % 4);
			if (!judge_verdict_name(judge_test_verdict(&jr, &jr.tests[i], body, why, sizeof(why))))
				abort();
		}
		judge_free(&jr);
	} else if (!err[0] || strchr(err, '\n')) {
		abort();   /* a refusal is one line */
	}
	char why[300];
	if (!judge_verdict_name(judge_checker_verdict(body, why, sizeof(why))) || strchr(why, '\n'))
		abort();   /* a checker's stderr is cut at its first line */
	struct judge0_verdict v;
	judge0_verdict(body, json_object_get(body, "judge0"), &v);
	if (!judge0_status_name(v.status))
		abort();
	json_decref(body);
	return 0;
}
