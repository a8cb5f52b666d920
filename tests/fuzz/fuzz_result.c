/* libFuzzer harness for the result object's hand-built JSON
 * (host/run/result.c): a result whose guest- and client-controlled text (the
 * streams, the message, the runtime's name, artifact paths and skip
 * reasons, the proxy's audit entries) is random bytes must print as JSON
 * that vmrund's reader (jansson with JSON_ALLOW_NUL, as
 * spool_result_parse) takes, and text that was UTF-8 must come back
 * byte for byte.
 *
 * Input: fields separated by 0xff 0xfe (a pair no UTF-8 text holds):
 * stdout, stderr, message, runtime, then artifact paths and skipped
 * entries, proxy hosts and reasons, alternating. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "result.h"
#include "utf8.h"

#define MAX_FIELDS 24

struct field {
	const uint8_t *p;
	size_t n;
};

static size_t split(const uint8_t *in, size_t len, struct field *f)
{
	size_t nf = 0, start = 0;
	for (size_t i = 0; i + 1 < len && nf < MAX_FIELDS - 1; i++)
		if (in[i] == 0xff && in[i + 1] == 0xfe) {
			f[nf++] = (struct field){ in + start, i - start };
			start = i + 2;
			i++;
		}
	f[nf++] = (struct field){ in + start, len - start };
	return nf;
}

/* A field as a C string into a fixed array, as the run library keeps it. */
static void cstr(char *dst, size_t cap, struct field f)
{
	size_t n = f.n < cap - 1 ? f.n : cap - 1;
	memcpy(dst, f.p, n);
	dst[n] = '\0';
}

static void same_if_utf8(json_t *o, const char *key, const uint8_t *p, size_t n)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_string(v))
		abort();
	if (utf8_valid(p, n) && (json_string_length(v) != n || memcmp(json_string_value(v), p, n)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len)
{
	struct field f[MAX_FIELDS] = { 0 };
	size_t nf = split(in, len, f);
	struct run_result *r = calloc(1, sizeof(*r));
	struct artifact files[4];
	struct artifact_skip skipped[4];
	struct proxy_audit audit[4];
	memset(files, 0, sizeof(files));
	memset(skipped, 0, sizeof(skipped));
	memset(audit, 0, sizeof(audit));
	r->term = TERM_EXITED;
	r->nstages = 1;
	struct run_stage *s = &r->stage[0];
	s->started = true;
	s->term = TERM_EXITED;
	s->out.data = (uint8_t *)f[0].p;
	s->out.len = f[0].n;
	s->err.data = nf > 1 ? (uint8_t *)f[1].p : NULL;
	s->err.len = nf > 1 ? f[1].n : 0;
	if (nf > 2)
		cstr(r->message, sizeof(r->message), f[2]);
	if (nf > 3)
		cstr(r->runtime, sizeof(r->runtime), f[3]);
	for (size_t i = 4; i < nf; i++) {
		size_t k = (i - 4) / 3;
		if (k >= 4)
			break;
		switch ((i - 4) % 3) {
		case 0:
			cstr(files[k].path, sizeof(files[k].path), f[i]);
			files[k].size = f[i].n;
			r->artifacts.nfiles = k + 1;
			break;
		case 1:
			cstr(skipped[k].path, sizeof(skipped[k].path), f[i]);
			cstr(skipped[k].reason, sizeof(skipped[k].reason), f[i]);
			r->artifacts.nskipped = k + 1;
			break;
		default:
			cstr(audit[k].host, sizeof(audit[k].host), f[i]);
			cstr(audit[k].why, sizeof(audit[k].why), f[i]);
			cstr(audit[k].method, sizeof(audit[k].method), f[i]);
			r->network.on = true;
			r->network.n = (unsigned)k + 1;
			break;
		}
	}
	r->artifacts.files = files;
	r->artifacts.skipped = skipped;
	r->network.entry = audit;

	char *text = NULL;
	size_t tlen = 0;
	FILE *m = open_memstream(&text, &tlen);
	if (!m)
		abort();
	result_print_json(m, r);
	fclose(m);
	json_error_t e;
	json_t *o = json_loadb(text, tlen, JSON_ALLOW_NUL, &e);
	if (!o) {
		fprintf(stderr, "not JSON: %s at %d: %.*s\n", e.text, e.position, (int)tlen, text);
		abort();
	}
	same_if_utf8(o, "stdout", f[0].p, f[0].n);
	if (nf > 1)
		same_if_utf8(o, "stderr", f[1].p, f[1].n);
	if (nf > 2 && !memchr(f[2].p, 0, f[2].n) && f[2].n < sizeof(r->message))
		same_if_utf8(o, "message", f[2].p, f[2].n);
	/* the outcome the writer decided is the one every reader gets back */
	struct run_outcome want, got;
	result_outcome(r, &want);
	if (result_outcome_parse(o, &got) || got.state != want.state || got.term != want.term ||
	    got.limits != want.limits) {
		fprintf(stderr, "outcome read back differs: %.*s\n", (int)tlen, text);
		abort();
	}
	json_decref(o);
	free(text);
	free(r);
	return 0;
}
