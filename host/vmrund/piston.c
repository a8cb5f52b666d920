#include "piston.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "semver.h"

/* ---- the execute request --------------------------------------------------- */

/* JavaScript's falsiness, which Piston's checks ("if (!value)") go by. */
static bool falsy(const json_t *j)
{
	return !j || json_is_null(j) || json_is_false(j) || (json_is_number(j) && json_number_value(j) == 0) ||
	       (json_is_string(j) && json_string_length(j) == 0);
}

static bool is_string_eq(const json_t *j, const char *s)
{
	return json_is_string(j) && !strcmp(json_string_value(j), s);
}

/* Piston's get_latest_runtime_matching_language_version: by name or alias,
 * the newest version the selector accepts. */
static const struct runtime *choose(const struct runtime *rts, size_t n, const char *language, const char *selector)
{
	const struct runtime *best = NULL;
	struct semver best_v = { { 0 } };
	for (size_t i = 0; i < n; i++) {
		struct semver v;
		if (!runtime_answers_to(&rts[i], language) ||
		    !semver_match(rts[i].version, selector) || !semver_parse(rts[i].version, &v))
			continue;
		if (!best || semver_cmp(&v, &best_v) > 0) {
			best = &rts[i];
			best_v = v;
		}
	}
	return best;
}

/* Whether Piston counts a file as utf8: no encoding given, or "utf8". */
static bool utf8_file(const json_t *f)
{
	const json_t *e = json_object_get(f, "encoding");
	return falsy(e) || is_string_eq(e, "utf8");
}

/* Piston's checks on the body before it looks for a runtime. */
static int check_shape(const json_t *body, char *err, size_t errlen)
{
	const json_t *v = json_object_get(body, "language");
	if (falsy(v) || !json_is_string(v))
		return errf(err, errlen, "language is required as a string");
	v = json_object_get(body, "version");
	if (falsy(v) || !json_is_string(v))
		return errf(err, errlen, "version is required as a string");
	v = json_object_get(body, "files");
	if (!json_is_array(v))
		return errf(err, errlen, "files is required as an array");
	for (size_t i = 0; i < json_array_size(v); i++)
		if (!json_is_string(json_object_get(json_array_get(v, i), "content")))
			return errf(err, errlen, "files[%zu].content is required as a string", i);
	return 0;
}

/* Set key to v (stolen); false when v is NULL or it could not be set. */
static bool put(json_t *o, const char *key, json_t *v)
{
	return v && json_object_set_new(o, key, v) == 0;
}

/* One Piston file as a native one. Piston names a nameless file
 * file<i>.code; we give it the runtime's extension instead, since our
 * compilers go by it (gcc, javac). An unknown encoding is utf8 in Piston. */
static json_t *native_file(const json_t *f, size_t i, const struct runtime *rt, char *err, size_t errlen)
{
	const json_t *name = json_object_get(f, "name"), *enc = json_object_get(f, "encoding");
	char gen[48];
	if (!falsy(name) && !json_is_string(name)) {
		errf(err, errlen, "files[%zu].name must be a string", i);
		return NULL;
	}
	snprintf(gen, sizeof(gen), "file%zu.%s", i, rt->extension[0] ? rt->extension : "code");
	const char *encoding = is_string_eq(enc, "base64") ? "base64" : is_string_eq(enc, "hex") ? "hex" : "utf8";
	json_t *o = json_object();
	if (o && (falsy(name) ? put(o, "name", json_string(gen)) : json_object_set(o, "name", (json_t *)name) == 0) &&
	    json_object_set(o, "content", json_object_get(f, "content")) == 0 &&
	    put(o, "encoding", json_string(encoding)))
		return o;
	json_decref(o);
	errf(err, errlen, "out of memory");
	return NULL;
}

static int native_files(json_t *native, const json_t *files, const struct runtime *rt, char *err, size_t errlen)
{
	json_t *a = json_array();
	if (!put(native, "files", a))
		return errf(err, errlen, "out of memory");
	for (size_t i = 0; i < json_array_size(files); i++) {
		json_t *f = native_file(json_array_get(files, i), i, rt, err, errlen);
		if (!f || json_array_append_new(a, f))
			return -1;
	}
	return 0;
}

/* Piston's stdin always ends in a newline (it adds one); an empty one is
 * left out here, as no stdin at all. */
static int native_stdin(json_t *native, const json_t *in, char *err, size_t errlen)
{
	if (!in || json_is_null(in))
		return 0;
	if (!json_is_string(in))
		return errf(err, errlen, "stdin must be a string");
	size_t n = json_string_length(in);
	if (!n)
		return 0;
	const char *s = json_string_value(in);
	if (s[n - 1] == '\n')
		return json_object_set(native, "stdin", (json_t *)in) ? errf(err, errlen, "out of memory") : 0;
	char *t = malloc(n + 1);
	if (!t)
		return errf(err, errlen, "out of memory");
	memcpy(t, s, n);
	t[n] = '\n';
	int rc = put(native, "stdin", json_stringn(t, n + 1)) ? 0 : errf(err, errlen, "out of memory");
	free(t);
	return rc;
}

void piston_number_text(double d, char out[PISTON_NUMBER_MAX])
{
	if (d == 0) {   /* -0 too */
		snprintf(out, PISTON_NUMBER_MAX, "0");
		return;
	}
	/* the fewest significant digits that read back as d (17 always do) */
	char e[40];
	for (int p = 0; p < 17; p++) {
		snprintf(e, sizeof(e), "%.*e", p, fabs(d));
		if (strtod(e, NULL) == fabs(d))
			break;
	}
	char digits[24];
	int k = 0;
	const char *c = e;
	for (; *c && *c != 'e'; c++)
		if (*c != '.')
			digits[k++] = *c;
	while (k > 1 && digits[k - 1] == '0')
		k--;
	int n = atoi(c + 1) + 1;   /* |d| = 0.DIGITS x 10^n */
	/* then laid out as ECMAScript's Number::toString does */
	char *o = out;
	if (d < 0)
		*o++ = '-';
	if (k <= n && n <= 21) {
		memcpy(o, digits, (size_t)k);
		o += k;
		for (int i = k; i < n; i++)
			*o++ = '0';
	} else if (0 < n && n <= 21) {
		memcpy(o, digits, (size_t)n);
		o += n;
		*o++ = '.';
		memcpy(o, digits + n, (size_t)(k - n));
		o += k - n;
	} else if (-6 < n && n <= 0) {
		*o++ = '0';
		*o++ = '.';
		for (int i = 0; i < -n; i++)
			*o++ = '0';
		memcpy(o, digits, (size_t)k);
		o += k;
	} else {
		*o++ = digits[0];
		if (k > 1) {
			*o++ = '.';
			memcpy(o, digits + 1, (size_t)(k - 1));
			o += k - 1;
		}
		o += snprintf(o, 8, "e%c%d", n - 1 > 0 ? '+' : '-', abs(n - 1));
	}
	*o = '\0';
}

/* args as Piston takes them: strings, and numbers as their text (its
 * CLI sends `piston run python main.py 1 2` as [1, 2], and Node passes
 * each to the program as JavaScript writes it). */
static int native_args(json_t *native, const json_t *args, char *err, size_t errlen)
{
	if (!args || json_is_null(args))
		return 0;
	if (!json_is_array(args))
		return errf(err, errlen, "args must be an array of strings");
	json_t *out = json_array();
	for (size_t i = 0; out && i < json_array_size(args); i++) {
		const json_t *a = json_array_get(args, i);
		char text[PISTON_NUMBER_MAX];
		if (json_is_number(a))
			piston_number_text(json_number_value(a), text);
		else if (!json_is_string(a)) {
			json_decref(out);
			return errf(err, errlen, "args must be an array of strings");
		}
		if (json_array_append_new(out, json_is_string(a) ? json_copy((json_t *)a) : json_string(text))) {
			json_decref(out);
			out = NULL;
		}
	}
	return put(native, "args", out) ? 0 : errf(err, errlen, "out of memory");
}

/* Piston's constraint value for stage's limit: false when absent, falsy
 * or -1 (the runtime's default), else a non-negative number up to max. */
static int constraint(const json_t *body, const char *stage, const char *limit, double max, double *out,
		      bool *given, char *err, size_t errlen)
{
	char name[40];
	snprintf(name, sizeof(name), "%s_%s", stage, limit);
	const json_t *v = json_object_get(body, name);
	*given = false;
	if (falsy(v))
		return 0;
	if (!json_is_number(v))
		return errf(err, errlen, "If specified, %s must be a number", name);
	double d = json_number_value(v);
	if (d == -1)
		return 0;
	if (d < 0)
		return errf(err, errlen, "%s must be non-negative", name);
	if (d > max)
		return errf(err, errlen, "%s cannot exceed the configured limit of %.0f", name, max);
	*out = d;
	*given = true;
	return 0;
}

/* A stage's limits from Piston's ms and bytes: {timeout_s, cpu_time_ms,
 * memory_mib}, rounded up so that a limit is never tightened. */
static int native_stage(json_t *native, const json_t *body, const char *stage, char *err, size_t errlen)
{
	double timeout = 0, cpu = 0, mem = 0;
	bool t, c, m;
	if (constraint(body, stage, "timeout", 86400e3, &timeout, &t, err, errlen) ||
	    constraint(body, stage, "cpu_time", 86400e3, &cpu, &c, err, errlen) ||
	    constraint(body, stage, "memory_limit", (double)(UINT64_C(1) << 40), &mem, &m, err, errlen))
		return -1;
	if (!t && !c && !m)
		return 0;
	json_t *o = json_object();
	/* both within uint64_t: constraint() capped them */
	uint64_t cpu_ms = (uint64_t)cpu, mib = (uint64_t)(mem / (1 << 20));
	cpu_ms += (double)cpu_ms < cpu;
	mib += (double)mib * (1 << 20) < mem;
	if (!put(native, stage, o) || (t && !put(o, "timeout_s", json_real(timeout / 1000.0))) ||
	    (c && !put(o, "cpu_time_ms", json_integer((json_int_t)cpu_ms))) ||
	    (m && !put(o, "memory_mib", json_integer((json_int_t)mib))))
		return errf(err, errlen, "out of memory");
	return 0;
}

/* Piston's body as a native one for rt, which run_spec_from_json then checks. */
static int native_body(json_t *native, const json_t *body, const struct runtime *rt, char *err, size_t errlen)
{
	if (!put(native, "runtime", json_string(rt->name)))
		return errf(err, errlen, "out of memory");
	if (native_files(native, json_object_get(body, "files"), rt, err, errlen) ||
	    native_args(native, json_object_get(body, "args"), err, errlen) ||
	    native_stdin(native, json_object_get(body, "stdin"), err, errlen))
		return -1;
	/* Piston's clients send compile limits whatever the language; a runtime
	 * without a compile stage has no use for them. */
	if (rt->compile[0] && native_stage(native, body, "compile", err, errlen))
		return -1;
	return native_stage(native, body, "run", err, errlen);
}

/* Whether Piston's job decodes a file as utf8: any encoding but base64
 * and hex (unlike utf8_file, which is v2.js's check on the raw body). */
static bool decoded_as_utf8(const json_t *f)
{
	const json_t *e = json_object_get(f, "encoding");
	return !is_string_eq(e, "base64") && !is_string_eq(e, "hex");
}

/* Piston runs its first utf8 file (the others are data): put the utf8
 * files first, in their order, since the run library runs the first. */
static void utf8_first(struct run_spec *rq, const json_t *files)
{
	unsigned at = 0;
	for (unsigned i = 0; i < rq->nfiles; i++) {
		if (!decoded_as_utf8(json_array_get(files, i)))
			continue;
		struct run_spec_file f = rq->files[i];
		memmove(&rq->files[at + 1], &rq->files[at], (i - at) * sizeof(f));
		rq->files[at++] = f;
	}
}

int piston_parse(const json_t *body, const struct runtime *rts, size_t n, struct run_spec *rq,
		 const struct runtime **chosen, char *err, size_t errlen)
{
	memset(rq, 0, sizeof(*rq));
	*chosen = NULL;
	if (check_shape(body, err, errlen))
		return -1;
	const char *language = json_string_value(json_object_get(body, "language"));
	const char *version = json_string_value(json_object_get(body, "version"));
	const struct runtime *rt = choose(rts, n, language, version);
	if (!rt) {
		char l[72], v[72];
		return errf(err, errlen, "%s-%s runtime is unknown", errmsg_printable(l, sizeof(l), language),
			    errmsg_printable(v, sizeof(v), version));
	}
	const json_t *files = json_object_get(body, "files");
	bool any_utf8 = false;
	for (size_t i = 0; i < json_array_size(files); i++)
		any_utf8 = any_utf8 || utf8_file(json_array_get(files, i));
	if (!any_utf8)
		return errf(err, errlen, "files must include at least one utf8 encoded file");
	json_t *native = json_object();
	if (!native)
		return errf(err, errlen, "out of memory");
	int rc = native_body(native, body, rt, err, errlen);
	if (!rc)
		rc = run_spec_from_json(native, rq, err, errlen);
	json_decref(native);
	if (rc)
		return -1;
	utf8_first(rq, files);
	*chosen = rt;
	return 0;
}

/* ---- the execute response -------------------------------------------------- */

/* A stage's status and message, Piston's way (isolate's codes). */
struct verdict {
	const char *status;   /* NULL: it exited 0 */
	char message[600];    /* "": null */
	bool killed;          /* report SIGKILL, as Piston does for TO and a memory kill */
};

static bool flag(const json_t *s, const char *key)
{
	return json_is_true(json_object_get(s, key));
}

static const char *text(const json_t *s, const char *key)
{
	const char *v = json_string_value(json_object_get(s, key));
	return v ? v : "";
}

static void judge(const json_t *s, const json_t *top, struct verdict *v)
{
	const char *term = text(s, "termination"), *msg = text(top, "message");
	const json_t *code = json_object_get(s, "exit_code");
	bool ended = !strcmp(term, "exited") || !strcmp(term, "signaled") || !strcmp(term, "compile_error");
	memset(v, 0, sizeof(*v));
	if (!ended && strcmp(term, "timeout")) {
		/* vm_failed, error, denied, not_found: not the program's doing */
		v->status = "XX";
		snprintf(v->message, sizeof(v->message), "%s", *msg ? msg : term);
	} else if (flag(s, "stdout_truncated")) {
		v->status = "OL";
		snprintf(v->message, sizeof(v->message), "stdout length exceeded");
	} else if (flag(s, "stderr_truncated")) {
		v->status = "EL";
		snprintf(v->message, sizeof(v->message), "stderr length exceeded");
	} else if (!strcmp(term, "timeout") || flag(s, "timed_out") || flag(s, "cpu_time_exceeded")) {
		v->status = "TO";
		v->killed = true;
		/* isolate's words, unless the result says which limit it was */
		if (flag(s, "cpu_time_exceeded"))
			msg = "Time limit exceeded";
		snprintf(v->message, sizeof(v->message), "%s", *msg ? msg : "Time limit exceeded (wall clock)");
	} else if (flag(s, "oom_killed")) {
		v->status = "SG";
		v->killed = true;
		snprintf(v->message, sizeof(v->message), "Signal SIGKILL (memory limit exceeded)");
	} else if (json_is_string(json_object_get(s, "signal"))) {
		v->status = "SG";
		snprintf(v->message, sizeof(v->message), "Signal %s", text(s, "signal"));
	} else if (json_is_integer(code) && json_integer_value(code) != 0) {
		v->status = "RE";
		snprintf(v->message, sizeof(v->message), "Exited with error status %lld",
			 (long long)json_integer_value(code));
	}
}

/* An integer field of s (a path of up to two keys), or null. */
static json_t *integer_at(const json_t *s, const char *key, const char *sub, int64_t scale)
{
	const json_t *v = json_object_get(s, key);
	if (sub)
		v = json_object_get(v, sub);
	if (!json_is_integer(v))
		return json_null();
	json_int_t x = json_integer_value(v);
	if (x > INT64_MAX / scale)
		x = INT64_MAX / scale;
	if (x < INT64_MIN / scale)
		x = INT64_MIN / scale;
	return json_integer(x * scale);
}

static json_t *string_of(const json_t *s, const char *key)
{
	const json_t *v = json_object_get(s, key);
	return json_is_string(v) ? json_stringn(json_string_value(v), json_string_length(v)) : json_string("");
}

/* output: the caller's interleaving when it is valid UTF-8, else stdout
 * then stderr. */
static json_t *output_of(const json_t *s, const char *output)
{
	json_t *o = output ? json_string(output) : NULL;
	if (o)
		return o;
	const json_t *a = json_object_get(s, "stdout"), *b = json_object_get(s, "stderr");
	size_t na = json_string_length(a), nb = json_string_length(b);
	char *t = malloc(na + nb + 1);
	if (!t)
		return NULL;
	if (na)
		memcpy(t, json_string_value(a), na);
	if (nb)
		memcpy(t + na, json_string_value(b), nb);
	o = json_stringn(t, na + nb);
	free(t);
	return o;
}

static json_t *signal_of(const json_t *s, const struct verdict *v)
{
	const json_t *sig = json_object_get(s, "signal");
	if (v->killed)
		return json_string("SIGKILL");
	return json_is_string(sig) ? json_deep_copy(sig) : json_null();
}

/* The stage's own duration, or outside source mode the result's run phase. */
static json_t *wall_of(const json_t *s, const json_t *top)
{
	if (json_object_get(s, "duration_ms"))
		return integer_at(s, "duration_ms", NULL, 1);
	return integer_at(top, "durations_ms", "run", 1);
}

/* One stage's object from s (a stage of the result, or the result's top
 * level outside source mode); top gives the message and the fallback
 * duration. */
static json_t *stage_json(const json_t *s, const json_t *top, const char *output)
{
	struct verdict v;
	judge(s, top, &v);
	json_t *o = json_object();
	bool ok = o && put(o, "stdout", string_of(s, "stdout")) && put(o, "stderr", string_of(s, "stderr")) &&
		  put(o, "output", output_of(s, output)) && put(o, "code", integer_at(s, "exit_code", NULL, 1)) &&
		  put(o, "signal", signal_of(s, &v)) &&
		  put(o, "message", v.message[0] ? json_string(v.message) : json_null()) &&
		  put(o, "status", v.status ? json_string(v.status) : json_null()) &&
		  put(o, "cpu_time", integer_at(s, "usage", "cpu_ms", 1)) && put(o, "wall_time", wall_of(s, top)) &&
		  put(o, "memory", integer_at(s, "usage", "max_rss_kib", 1024));
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *piston_response(const struct runtime *rt, const json_t *result, const char *const output[2])
{
	const json_t *compile = json_object_get(result, "compile"), *run = json_object_get(result, "run");
	const char *out0 = output ? output[0] : NULL, *out1 = output ? output[1] : NULL;
	json_t *resp = json_object(), *cst = NULL, *rst;
	if (!put(resp, "language", json_string(rt->name)) || !put(resp, "version", json_string(rt->version)))
		goto fail;
	if (json_is_object(compile) && !put(resp, "compile", cst = stage_json(compile, result, out0)))
		goto fail;
	if (json_is_object(run))
		rst = stage_json(run, result, out1);
	else if (cst)
		/* Piston, when a failed compile kept the run stage from starting:
		 * "run" is the compile stage again, for older clients. */
		rst = json_deep_copy(cst);
	else
		rst = stage_json(result, result, out1);
	if (!put(resp, "run", rst))
		goto fail;
	return resp;
fail:
	json_decref(resp);
	return NULL;
}

static json_t *aliases_json(const char *aliases)
{
	json_t *a = json_array();
	for (const char *p = aliases + strspn(aliases, " "); a && *p;) {
		size_t len = strcspn(p, " ");
		if (json_array_append_new(a, json_stringn(p, len))) {
			json_decref(a);
			return NULL;
		}
		p += len;
		p += strspn(p, " ");
	}
	return a;
}

json_t *piston_runtimes(const struct runtime *rts, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++) {
		json_t *o = json_object();
		bool ok = o && put(o, "language", json_string(rts[i].name)) &&
			  put(o, "version", json_string(rts[i].version)) &&
			  put(o, "aliases", aliases_json(rts[i].aliases));
		if (!ok)
			json_decref(o);
		/* json_array_append_new drops o itself when it fails */
		if (!ok || json_array_append_new(a, o)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}
