/* libFuzzer harness for vmrund's request bodies (host/run/run_spec_json.c,
 * host/vmrund/piston.c): both are client input. Each input is parsed as a
 * native body; one that parses must come back the same from its canonical
 * form (run_spec_to_json, dumped and parsed again), since the store keeps that
 * form and the worker runs what it reads. The same input is then tried as
 * a Piston execute body against three runtimes. Beyond the sanitizers it
 * checks that every refusal is one non-empty line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "piston.h"

static void one_line(int rc, const char *err)
{
	if (rc && (!err[0] || strchr(err, '\n')))
		abort();
}

static bool same_bytes(const unsigned char *a, size_t na, const unsigned char *b, size_t nb)
{
	return na == nb && (!na || !memcmp(a, b, na));
}

/* Rules that allow the same: a rule written again and parsed back is
 * the rule it was. */
static bool same_rules(const struct net_rule *a, unsigned na, const struct net_rule *b, unsigned nb)
{
	if (na != nb)
		return false;
	for (unsigned i = 0; i < na; i++)
		if (a[i].kind != b[i].kind || strcmp(a[i].host, b[i].host) || memcmp(a[i].addr, b[i].addr, 16) ||
		    a[i].prefix != b[i].prefix || a[i].port != b[i].port)
			return false;
	return true;
}

static bool same_req(const struct run_spec *a, const struct run_spec *b)
{
	if (strcmp(a->runtime, b->runtime) || a->source != b->source || a->argc != b->argc ||
	    a->nfiles != b->nfiles || a->has_stdin != b->has_stdin || a->nenv != b->nenv ||
	    a->timeout_s != b->timeout_s || a->memory_mib != b->memory_mib || a->cpus != b->cpus ||
	    a->disk_mib != b->disk_mib || a->max_output != b->max_output || a->keep_artifacts != b->keep_artifacts ||
	    memcmp(&a->compile, &b->compile, sizeof(a->compile)) || memcmp(&a->run, &b->run, sizeof(a->run)) ||
	    !same_bytes(a->stdin_data, a->stdin_len, b->stdin_data, b->stdin_len))
		return false;
	for (unsigned i = 0; i < a->argc; i++)
		if (strcmp(a->argv[i], b->argv[i]))
			return false;
	for (unsigned i = 0; i < a->nfiles; i++)
		if (strcmp(a->files[i].name, b->files[i].name) ||
		    !same_bytes(a->files[i].data, a->files[i].len, b->files[i].data, b->files[i].len))
			return false;
	for (unsigned i = 0; i < a->nenv; i++)
		if (strcmp(a->env[i], b->env[i]))
			return false;
	return same_rules(a->net, a->nnet, b->net, b->nnet);
}

static void native(const uint8_t *data, size_t len)
{
	char err[512] = "";
	struct run_spec a, b;
	int rc = run_spec_from_text((const char *)data, len, &a, err, sizeof(err));
	one_line(rc, err);
	if (rc)
		return;
	json_t *j = run_spec_to_json(&a);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (!text)
		abort();
	if (run_spec_from_text(text, strlen(text), &b, err, sizeof(err)) || !same_req(&a, &b))
		abort();   /* the canonical form means something else */
	free(text);
	json_decref(j);
	run_spec_free(&a);
	run_spec_free(&b);
}

static void piston(const uint8_t *data, size_t len)
{
	static const struct runtime rts[] = {
		{ .name = "python", .version = "3.11.2", .aliases = "py py3", .extension = "py",
		  .run = "python3 {file} {args}" },
		{ .name = "c", .version = "12.2.0", .aliases = "gcc", .extension = "c", .compile = "gcc {files}",
		  .run = "./a.out {args}" },
		{ .name = "java", .version = "17.0.21.1", .aliases = "jdk", .compile = "javac {files}",
		  .run = "java {stem} {args}" },
	};
	json_t *body = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, NULL);
	if (!body)
		return;
	char err[512] = "";
	struct run_spec rq;
	const struct runtime *rt;
	int rc = piston_parse(body, rts, sizeof(rts) / sizeof(rts[0]), &rq, &rt, err, sizeof(err));
	one_line(rc, err);
	if (!rc && (!rt || !rq.source || strcmp(rq.runtime, rt->name)))
		abort();
	run_spec_free(&rq);
	json_decref(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	native(data, len);
	piston(data, len);
	return 0;
}
