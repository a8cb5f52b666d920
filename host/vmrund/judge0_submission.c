/* A Judge0 submission read into a run spec (judge0.h), with Rails' own
 * casts and messages: Judge0 clients show its 422 bodies to their users
 * as they are, so the checks are its model's (app/models/submission.rb),
 * in its order, each failed one listed. */
#include "judge0.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of one of the submission's texts: decoded, or as given. */
struct text {
	unsigned char *p;   /* malloc'd, NUL after; NULL: nil */
	size_t n;
};

struct parse {
	const json_t *body;
	bool b64;
	json_t *errors;     /* field -> [message, ...] */
	bool oom;
};

static void add_error(struct parse *ps, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void add_error(struct parse *ps, const char *field, const char *fmt, ...)
{
	char msg[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *a = json_object_get(ps->errors, field);
	if (!a && (!(a = json_array()) || json_object_set_new(ps->errors, field, a))) {
		ps->oom = true;
		return;
	}
	if (json_array_append_new(a, json_string(msg)))
		ps->oom = true;
}

/* A parameter as Rails' permit leaves it: a scalar, or nothing. */
static const json_t *param(const struct parse *ps, const char *key)
{
	const json_t *v = json_object_get(ps->body, key);
	return v && !json_is_object(v) && !json_is_array(v) && !json_is_null(v) ? v : NULL;
}

/* A text parameter (a number or boolean as Ruby's to_s writes it),
 * decoded from base64 when decode. */
static void text_param(struct parse *ps, const char *key, bool decode, struct text *t)
{
	const json_t *v = param(ps, key);
	char num[64];
	const char *s = NULL;
	size_t n = 0;
	*t = (struct text){ 0 };
	if (json_is_string(v)) {
		s = json_string_value(v);
		n = json_string_length(v);
	} else if (json_is_integer(v)) {
		n = (size_t)snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
		s = num;
	} else if (json_is_real(v)) {
		n = (size_t)snprintf(num, sizeof(num), "%.17g", json_real_value(v));
		s = num;
	} else if (json_is_boolean(v)) {
		s = json_is_true(v) ? "true" : "false";
		n = strlen(s);
	}
	if (!s)
		return;
	if (decode) {
		if (judge0_decode64(s, n, &t->p, &t->n))
			ps->oom = true;
		return;
	}
	if (!(t->p = malloc(n + 1))) {
		ps->oom = true;
		return;
	}
	memcpy(t->p, s, n);
	t->p[n] = '\0';
	t->n = n;
}

/* Ruby's blank?: nil, or only white space. */
static bool blank(const struct text *t)
{
	for (size_t i = 0; t->p && i < t->n; i++)
		if (!strchr(" \t\n\v\f\r", t->p[i]))
			return false;
	return true;
}

/* A bound as Ruby prints it in a message: a Float with its ".0". */
static void ruby_number(double d, bool is_float, char *out, size_t len)
{
	if (is_float && d == floor(d) && fabs(d) < 1e15)
		snprintf(out, len, "%.1f", d);
	else
		snprintf(out, len, "%.15g", d);
}

/* One numericality check. */
struct bound {
	const char *field;
	double *value;          /* in: the default; out: the value */
	bool integer;           /* an integer column: the value is truncated */
	double min;             /* the lower bound */
	bool min_inclusive;     /* greater_than_or_equal_to, else greater_than */
	double max;
	bool max_is_float;      /* the maximum is a Float of the config */
};

/* Rails' numericality on the raw parameter: nil and "" keep the default;
 * anything that is not a number is "is not a number". */
static void number_param(struct parse *ps, const struct bound *b)
{
	const json_t *v = param(ps, b->field);
	double d;
	if (!v || (json_is_string(v) && !json_string_length(v)))
		return;
	if (json_is_number(v)) {
		d = json_number_value(v);
	} else if (json_is_string(v)) {
		const char *s = json_string_value(v);
		char *end;
		/* Kernel.Float's forms only: no hex, no inf or nan */
		if (strspn(s, "0123456789+-.eE \t") != strlen(s)) {
			add_error(ps, b->field, "is not a number");
			return;
		}
		d = strtod(s, &end);
		while (*end == ' ' || *end == '\t')
			end++;
		if (end == s || *end) {
			add_error(ps, b->field, "is not a number");
			return;
		}
	} else {
		add_error(ps, b->field, "is not a number");
		return;
	}
	char lo[40], hi[40];
	ruby_number(b->min, false, lo, sizeof(lo));
	ruby_number(b->max, b->max_is_float, hi, sizeof(hi));
	if (b->min_inclusive ? d < b->min : d <= b->min)
		add_error(ps, b->field, "must be greater than %s%s", b->min_inclusive ? "or equal to " : "", lo);
	if (d > b->max)
		add_error(ps, b->field, "must be less than or equal to %s", hi);
	*b->value = b->integer ? trunc(d) : d;
}

/* ActiveModel's boolean cast: nil and "" the default. */
static bool bool_param(const struct parse *ps, const char *key, bool dflt)
{
	static const char *const falses[] = { "0", "f", "F", "false", "FALSE", "off", "OFF" };
	const json_t *v = param(ps, key);
	if (!v || (json_is_string(v) && !json_string_length(v)))
		return dflt;
	if (json_is_boolean(v))
		return json_is_true(v);
	if (json_is_number(v))
		return json_number_value(v) != 0;
	for (size_t i = 0; i < sizeof(falses) / sizeof(falses[0]); i++)
		if (json_is_string(v) && !strcmp(json_string_value(v), falses[i]))
			return false;
	return true;
}

/* ---- command_line_arguments, as bash splits Judge0's run line ----------------- */

/* Judge0 strips $&;<>|` and the ends, then bash splits the rest into
 * words; quotes group, a backslash escapes (as bash's do). Each word to
 * add (run_spec_add_arg or run_spec_add_compile_arg). */
static int split_args(const struct text *t, struct run_spec *rq, int (*add)(struct run_spec *, const char *))
{
	size_t n = t->p ? t->n : 0;
	char *w = malloc(n + 1);
	if (!w)
		return -1;
	size_t len = 0;
	bool in_word = false;
	char quote = 0;
	for (size_t i = 0; i < n; i++) {
		char c = (char)t->p[i];
		if (strchr("$&;<>|`", c) || c == '\0')
			continue;
		if (quote == '\'' ? c == '\'' : quote == '"' ? c == '"' : false) {
			quote = 0;
			continue;
		}
		if (!quote && (c == '\'' || c == '"')) {
			quote = c;
			in_word = true;
			continue;
		}
		if (quote != '\'' && c == '\\' && i + 1 < n) {
			w[len++] = (char)t->p[++i];
			in_word = true;
			continue;
		}
		if (!quote && strchr(" \t\n\r\v\f", c)) {
			if (in_word) {
				w[len] = '\0';
				if (add(rq, w)) {
					free(w);
					return -1;
				}
			}
			len = 0;
			in_word = false;
			continue;
		}
		w[len++] = c;
		in_word = true;
	}
	w[len] = '\0';
	int rc = in_word ? add(rq, w) : 0;
	free(w);
	return rc;
}

/* ---- the whole submission ------------------------------------------------------ */

struct limits {
	double cpu_time_limit, cpu_extra_time, wall_time_limit, memory_limit, stack_limit,
		max_processes_and_or_threads, max_file_size, number_of_runs;
};

static void check_limits(struct parse *ps, const struct judge0_config *c, struct limits *l)
{
	*l = (struct limits){
		.cpu_time_limit = c->cpu_time_limit, .cpu_extra_time = c->cpu_extra_time,
		.wall_time_limit = c->wall_time_limit, .memory_limit = (double)c->memory_limit,
		.stack_limit = (double)c->stack_limit,
		.max_processes_and_or_threads = (double)c->max_processes_and_or_threads,
		.max_file_size = (double)c->max_file_size, .number_of_runs = (double)c->number_of_runs,
	};
	const struct bound bounds[] = {
		{ "number_of_runs", &l->number_of_runs, true, 0, false, (double)c->max_number_of_runs, false },
		{ "cpu_time_limit", &l->cpu_time_limit, false, 0, true, c->max_cpu_time_limit, true },
		{ "cpu_extra_time", &l->cpu_extra_time, false, 0, true, c->max_cpu_extra_time, true },
		{ "wall_time_limit", &l->wall_time_limit, false, 1, true, c->max_wall_time_limit, true },
		{ "memory_limit", &l->memory_limit, true, 2048, true, (double)c->max_memory_limit, false },
		{ "stack_limit", &l->stack_limit, true, 0, true, (double)c->max_stack_limit, false },
		{ "max_processes_and_or_threads", &l->max_processes_and_or_threads, true, 0, false,
		  (double)c->max_max_processes_and_or_threads, false },
		{ "max_file_size", &l->max_file_size, true, 0, true, (double)c->max_max_file_size, false },
	};
	for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++)
		number_param(ps, &bounds[i]);
}

/* callback_url: a URL the tenant's callback rules admit. */
static void check_callback(struct parse *ps, const struct text *callback, const struct tenant_reach *reach)
{
	struct judge0_url u;
	char why[300];
	const char *refusal;
	if (blank(callback))
		return;
	if (strlen((const char *)callback->p) != callback->n ||
	    judge0_url_parse((const char *)callback->p, &u, why, sizeof(why)))
		add_error(ps, "callback_url", "is not a valid URL: %s", strlen((const char *)callback->p) != callback->n
									? "a NUL byte in it" : why);
	else if ((refusal = judge0_callback_refusal(reach, &u, why, sizeof(why))))
		add_error(ps, "callback_url", "%s", refusal);
}

/* compiler_options: for the compilers that take them before the
 * sources (judge0_language_takes_options). */
static void check_compiler_options(struct parse *ps, const struct text *opts, const struct runtime *rt, long id)
{
	if (opts->p && opts->n > 512)
		add_error(ps, "compiler_options", "is too long (maximum is 512 characters)");
	if (blank(opts) || !rt)
		return;
	if (!rt->compile[0] || id == JUDGE0_PROJECT_LANGUAGE)
		add_error(ps, "compiler_options", "setting compiler options is only allowed for compiled languages");
	else if (!judge0_language_takes_options(id))
		add_error(ps, "compiler_options", "setting compiler options is only allowed for %s",
			  JUDGE0_COMPILER_OPTIONS_LANGUAGES);
}

/* What Judge0 allows and vmrun does not do (yet): refused as a Judge0
 * configured without it refuses it. */
static void check_settings(struct parse *ps, const struct text *args)
{
	if (args->p && args->n > 512)
		add_error(ps, "command_line_arguments", "is too long (maximum is 512 characters)");
	if (bool_param(ps, "enable_per_process_and_thread_time_limit", false))
		add_error(ps, "enable_per_process_and_thread_time_limit", "this option cannot be enabled");
	if (bool_param(ps, "enable_per_process_and_thread_memory_limit", false))
		add_error(ps, "enable_per_process_and_thread_memory_limit", "this option cannot be enabled");
}

/* The language's id as Rails casts it to an integer ("71" and 71.0 are
 * 71, anything else 0); *blank when there is none. */
static long language_id_of(const struct parse *ps, bool *blank)
{
	const json_t *v = param(ps, "language_id");
	*blank = !v || (json_is_string(v) && !json_string_length(v));
	if (*blank)
		return 0;
	double d = json_is_number(v) ? json_number_value(v) : json_is_string(v) ? strtod(json_string_value(v), NULL) : 0;
	return d > -1e9 && d < 1e9 ? (long)d : 0;
}

/* The language, its runtime and its source file's name. */
static const struct runtime *check_language(struct parse *ps, const struct runtime *rts, size_t n, long *id,
					    const char **source_file)
{
	bool none;
	*id = language_id_of(ps, &none);
	if (none) {
		add_error(ps, "language_id", "can't be blank");
		return NULL;
	}
	const struct runtime *rt = judge0_language_runtime(*id, rts, n, source_file);
	if (!rt)
		add_error(ps, "language_id", "language with id %ld doesn't exist", *id);
	return rt;
}

static bool put(json_t *o, const char *key, json_t *v)
{
	return v && json_object_set_new(o, key, v) == 0;
}

static json_t *text_json(const struct text *t)
{
	return t->p ? json_stringn((const char *)t->p, t->n) : json_null();
}

/* What the view shows back and run_spec does not keep: "client.judge0". */
static json_t *client_json(long language_id, const struct limits *l, bool redirect, bool network,
			   const struct text *expected,
			   const struct text *args, const struct text *callback, const struct text *opts,
			   const struct text *files)
{
	json_t *o = json_object(), *c = json_object();
	char *exp = expected->p ? judge0_encode64(expected->p, expected->n, NULL) : NULL;
	char *zip = files->n ? judge0_encode64(files->p, files->n, NULL) : NULL;
	bool ok = o && c && (!expected->p || exp) && (!files->n || zip) && put(c, "judge0", json_incref(o)) &&
		  put(o, "language_id", json_integer(language_id)) &&
		  put(o, "number_of_runs", json_integer((json_int_t)l->number_of_runs)) &&
		  put(o, "cpu_time_limit", json_real(l->cpu_time_limit)) &&
		  put(o, "cpu_extra_time", json_real(l->cpu_extra_time)) &&
		  put(o, "wall_time_limit", json_real(l->wall_time_limit)) &&
		  put(o, "memory_limit", json_integer((json_int_t)l->memory_limit)) &&
		  put(o, "stack_limit", json_integer((json_int_t)l->stack_limit)) &&
		  put(o, "max_processes_and_or_threads", json_integer((json_int_t)l->max_processes_and_or_threads)) &&
		  put(o, "max_file_size", json_integer((json_int_t)l->max_file_size)) &&
		  put(o, "redirect_stderr_to_stdout", json_boolean(redirect)) &&
		  put(o, "enable_network", json_boolean(network)) &&
		  /* Judge0 keeps it as it keeps every text: Ruby's base64 */
		  put(o, "expected_output", exp ? json_string(exp) : json_null()) &&
		  put(o, "command_line_arguments", args->p ? text_json(args) : json_null()) &&
		  put(o, "callback_url", blank(callback) ? json_null() : text_json(callback)) &&
		  put(o, "compiler_options", opts->p ? text_json(opts) : json_null()) &&
		  /* the archive as sent, for GET's additional_files */
		  (!zip || put(o, "additional_files", json_string(zip)));
	free(exp);
	free(zip);
	json_decref(o);
	if (ok)
		return c;
	json_decref(c);
	return NULL;
}

/* rq from what passed the checks. */
static int build(const struct runtime *rt, const char *source_file, const struct text *src, const struct text *in,
		 const struct text *args, const struct text *opts, const struct limits *l, const struct text *expected,
		 bool redirect, json_t *client, struct run_spec *rq)
{
	memset(rq, 0, sizeof(*rq));
	snprintf(rq->runtime, sizeof(rq->runtime), "%s", rt->name);
	rq->source = true;
	if (source_file && !(rq->files = calloc(1, sizeof(*rq->files))))
		return -1;
	if (source_file) {
		rq->nfiles = 1;
		snprintf(rq->files[0].name, sizeof(rq->files[0].name), "%s", source_file);
		if (src->n && !(rq->files[0].data = malloc(src->n)))
			return -1;
		if (src->n)
			memcpy(rq->files[0].data, src->p, src->n);
		rq->files[0].len = src->n;
	}
	if (in->p) {
		rq->has_stdin = true;
		if (in->n && !(rq->stdin_data = malloc(in->n)))
			return -1;
		if (in->n)
			memcpy(rq->stdin_data, in->p, in->n);
		rq->stdin_len = in->n;
	}
	/* a Multi-file program's scripts run as they are (isolate_job.rb) */
	if (source_file && (split_args(args, rq, run_spec_add_arg) || split_args(opts, rq, run_spec_add_compile_arg)))
		return -1;
	/* isolate's -t and -x: the program is stopped at the limit and the
	 * extra time, and judged against the limit alone (judge0_verdict) */
	if (l->cpu_time_limit > 0)
		rq->run.cpu_time_ms = (uint64_t)ceil((l->cpu_time_limit + l->cpu_extra_time) * 1000);
	rq->run.timeout_s = l->wall_time_limit;
	rq->run.memory_mib = (uint64_t)ceil(l->memory_limit / 1024);
	/* isolate's -f: each of the program's files, its stdout too; 0 would
	 * be our "default", so the least is a byte */
	rq->max_output = l->max_file_size > 0 ? (uint64_t)l->max_file_size * 1024 : 1;
	/* isolate_job.rb's loop: a fresh box each time, until one is not
	 * accepted (a wrong answer too: the expected stdout is the worker's
	 * to compare, unless stderr joins it, which only the view can); time
	 * and memory averaged */
	rq->repeat = (unsigned)l->number_of_runs;
	if (rq->repeat > 1 && expected->p && !redirect) {
		if (!(rq->repeat_expect = malloc(expected->n ? expected->n : 1)))
			return -1;
		if (expected->n)
			memcpy(rq->repeat_expect, expected->p, expected->n);
		rq->repeat_expect_len = expected->n;
		rq->has_repeat_expect = true;
	}
	rq->client = json_incref(client);
	return 0;
}

/* How many host rules (names, suffixes) the tenant's ceiling has: its
 * address rules (net_addr=, ranges the deny set refuses) are for runs
 * that name them, never given by a switch. */
static unsigned host_rules(const struct tenant_reach *net)
{
	unsigned n = 0;
	for (unsigned i = 0; i < net->n; i++)
		n += net->rules[i].kind != NET_RULE_ADDR;
	return n;
}

/* enable_network: the run may reach the host names its tenant's ceiling
 * holds, the egress proxy's deny set applying as to any run (isolate's
 * --share-net gives the whole network; a guest here has none but the
 * proxy). 0, or -1 with the error added. */
static int add_rule(void *rq, const struct net_rule *r)
{
	return run_spec_add_rule(rq, r);
}

static int add_network(struct parse *ps, const struct tenant_reach *net, struct run_spec *rq)
{
	if (!tenant_host_rules(net, add_rule, rq))
		return 0;
	if (errno == ENOMEM)
		ps->oom = true;
	else
		add_error(ps, "enable_network", "the tenant's network rules are more than a run takes (%d)",
			  RUN_SPEC_MAX_NET_RULES);
	return -1;
}

/* The first of a and b that is a file at the archive's top, or NULL. */
static const char *top_file(const struct run_spec *rq, const char *a, const char *b)
{
	for (unsigned i = 0; i < rq->nwfiles; i++)
		if (!strcmp(rq->wfiles[i].name, a))
			return a;
	for (unsigned i = 0; i < rq->nwfiles; i++)
		if (!strcmp(rq->wfiles[i].name, b))
			return b;
	return NULL;
}

/* additional_files into rq's workspace, beside the source (used: its and
 * stdin's bytes); a Multi-file program's scripts as its stages. 0, or -1
 * with the error added. */
static int add_files(struct parse *ps, const struct text *files, size_t used, bool project, struct run_spec *rq)
{
	char why[200];
	if (judge0_unzip(files->p, files->n, (uint64_t)JUDGE0_MAX_EXTRACT_SIZE * 1024, rq, why, sizeof(why))) {
		add_error(ps, "additional_files", "%s", why);
		return -1;
	}
	size_t total = used;
	for (unsigned i = 0; i < rq->nwfiles; i++)
		total += rq->wfiles[i].len;
	if (total > RUN_SPEC_MAX_TOTAL_BYTES) {
		add_error(ps, "additional_files", "extracts to more than %u bytes with source_code and stdin",
			  RUN_SPEC_MAX_TOTAL_BYTES);
		return -1;
	}
	if (!project)
		return 0;
	/* isolate_job.rb: compile.sh or compile when there is one, then
	 * run.sh or run, each run by /bin/bash */
	const char *run = top_file(rq, "run.sh", "run"), *comp = top_file(rq, "compile.sh", "compile");
	if (!run) {
		add_error(ps, "additional_files", "a Multi-file program needs a run or run.sh script at the top");
		return -1;
	}
	if (run_spec_add_run_cmd(rq, "bash") || run_spec_add_run_cmd(rq, run) ||
	    (comp && (run_spec_add_compile_cmd(rq, "bash") || run_spec_add_compile_cmd(rq, comp)))) {
		ps->oom = true;
		return -1;
	}
	return 0;
}

int judge0_submission(const json_t *body, bool b64, const struct judge0_config *c, const struct runtime *rts,
		      size_t n, const struct tenant *t, struct run_spec *rq, json_t **errors)
{
	struct parse ps = { .body = body, .b64 = b64, .errors = json_object() };
	struct text src, in, expected, opts, args, callback, files;
	struct limits l;
	long language_id = 0;
	const char *source_file = NULL;
	json_t *client = NULL;
	int rc = -1;
	memset(rq, 0, sizeof(*rq));
	text_param(&ps, "source_code", b64, &src);
	text_param(&ps, "stdin", b64, &in);
	text_param(&ps, "expected_output", b64, &expected);
	text_param(&ps, "compiler_options", false, &opts);
	text_param(&ps, "command_line_arguments", false, &args);
	text_param(&ps, "callback_url", false, &callback);
	/* always base64, whatever base64_encoded says (Judge0's controller) */
	text_param(&ps, "additional_files", true, &files);
	if (!json_is_object(body)) {
		add_error(&ps, "submission", "must be an object");
		goto out;
	}
	bool no_language;
	bool project = language_id_of(&ps, &no_language) == JUDGE0_PROJECT_LANGUAGE;
	if (project && !blank(&src))
		add_error(&ps, "source_code", "must be blank");
	else if (!project && blank(&src))
		add_error(&ps, "source_code", "can't be blank");
	else if (src.n > RUN_SPEC_MAX_FILE_BYTES)
		add_error(&ps, "source_code", "is too long (maximum is %u bytes)", RUN_SPEC_MAX_FILE_BYTES);
	if (in.n > RUN_SPEC_MAX_TOTAL_BYTES - (src.n < RUN_SPEC_MAX_TOTAL_BYTES ? src.n : 0))
		add_error(&ps, "stdin", "is too long (source and stdin at most %u bytes)", RUN_SPEC_MAX_TOTAL_BYTES);
	if (expected.n > RUN_SPEC_MAX_CLIENT_BYTES / 2)
		add_error(&ps, "expected_output", "is too long (maximum is %u bytes)", RUN_SPEC_MAX_CLIENT_BYTES / 2);
	if (project && !files.n)
		add_error(&ps, "additional_files", "can't be blank");
	else if (files.n > JUDGE0_ZIP_MAX)
		add_error(&ps, "additional_files", "is too long (maximum is %u bytes as a zip)", JUDGE0_ZIP_MAX);
	const struct runtime *rt = check_language(&ps, rts, n, &language_id, &source_file);
	check_limits(&ps, c, &l);
	check_compiler_options(&ps, &opts, rt, language_id);
	check_settings(&ps, &args);
	check_callback(&ps, &callback, t ? &t->callback : NULL);
	bool network = bool_param(&ps, "enable_network", false);
	if (network && !(t && (t->net.any || host_rules(&t->net))))
		add_error(&ps, "enable_network", "enabling network is not allowed");
	if (ps.oom || json_object_size(ps.errors))
		goto out;
	bool redirect = bool_param(&ps, "redirect_stderr_to_stdout", c->redirect_stderr_to_stdout);
	if (!(client = client_json(language_id, &l, redirect, network, &expected, &args, &callback, &opts, &files)) ||
	    build(rt, source_file, &src, &in, &args, &opts, &l, &expected, redirect, client, rq)) {
		ps.oom = true;
		goto out;
	}
	if (network && add_network(&ps, &t->net, rq))
		goto out;
	if (json_dumpb(client, NULL, 0, JSON_COMPACT) > RUN_SPEC_MAX_CLIENT_BYTES) {
		add_error(&ps, "expected_output", "is too long with additional_files (%u bytes kept in all)",
			  RUN_SPEC_MAX_CLIENT_BYTES);
		goto out;
	}
	if (files.n && add_files(&ps, &files, src.n + in.n, project, rq))
		goto out;
	rc = 0;
out:
	if (ps.oom) {
		json_object_clear(ps.errors);
		add_error(&ps, "error", "out of memory");
	}
	if (rc)
		run_spec_free(rq);
	*errors = rc ? ps.errors : NULL;
	if (!rc)
		json_decref(ps.errors);
	json_decref(client);
	free(src.p);
	free(in.p);
	free(expected.p);
	free(opts.p);
	free(args.p);
	free(callback.p);
	free(files.p);
	return rc;
}
