/* Judge0's configuration, languages, statuses, tokens and base64, and a
 * submission read into a run spec (judge0.h). The view of a stored run is
 * judge0_view.c's. */
#include "judge0.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "errmsg.h"
#include "run_spec.h"

/* ---- configuration --------------------------------------------------------- */

void judge0_config_defaults(struct judge0_config *c)
{
	*c = (struct judge0_config){
		.cpu_time_limit = 5, .max_cpu_time_limit = 15,
		.cpu_extra_time = 1, .max_cpu_extra_time = 5,
		.wall_time_limit = 10, .max_wall_time_limit = 20,
		.memory_limit = 128000, .max_memory_limit = 512000,
		.stack_limit = 64000, .max_stack_limit = 128000,
		.max_processes_and_or_threads = 60, .max_max_processes_and_or_threads = 120,
		.max_file_size = 1024, .max_max_file_size = 4096,
		.number_of_runs = 1, .max_number_of_runs = RUN_SPEC_MAX_REPEAT,
		.max_submission_batch_size = 20,
		.enable_wait_result = true,
		.enable_batched_submissions = true,
	};
}

/* The numeric keys: which field, and the range a value may take. */
struct num_key {
	const char *name;
	size_t off;
	bool integer;
	double min, max;
};

#define DKEY(f, lo, hi) { #f, offsetof(struct judge0_config, f), false, lo, hi }
#define LKEY(f, lo, hi) { #f, offsetof(struct judge0_config, f), true, lo, hi }
static const struct num_key num_keys[] = {
	DKEY(cpu_time_limit, 0, 3600), DKEY(max_cpu_time_limit, 0, 3600),
	DKEY(cpu_extra_time, 0, 3600), DKEY(max_cpu_extra_time, 0, 3600),
	DKEY(wall_time_limit, 1, 3600), DKEY(max_wall_time_limit, 1, 3600),
	LKEY(memory_limit, 2048, 64L << 20), LKEY(max_memory_limit, 2048, 64L << 20),
	LKEY(stack_limit, 0, 64L << 20), LKEY(max_stack_limit, 0, 64L << 20),
	LKEY(max_processes_and_or_threads, 1, 1 << 20), LKEY(max_max_processes_and_or_threads, 1, 1 << 20),
	LKEY(max_file_size, 0, 1L << 30), LKEY(max_max_file_size, 0, 1L << 30),
	/* each run is a whole run of the spec's repeat */
	LKEY(number_of_runs, 1, RUN_SPEC_MAX_REPEAT), LKEY(max_number_of_runs, 1, RUN_SPEC_MAX_REPEAT),
	LKEY(max_submission_batch_size, 1, 1000),
};

static const struct {
	const char *name;
	size_t off;
} bool_keys[] = {
	{ "redirect_stderr_to_stdout", offsetof(struct judge0_config, redirect_stderr_to_stdout) },
	{ "enable_wait_result", offsetof(struct judge0_config, enable_wait_result) },
	{ "enable_batched_submissions", offsetof(struct judge0_config, enable_batched_submissions) },
	{ "disable_implicit_base64_encoding", offsetof(struct judge0_config, disable_implicit_base64_encoding) },
};

int judge0_config_set(struct judge0_config *c, const char *key, const char *value, char *err, size_t errlen)
{
	if (strncmp(key, "judge0_", 7))
		return 0;
	const char *k = key + 7;
	for (size_t i = 0; i < sizeof(num_keys) / sizeof(num_keys[0]); i++) {
		const struct num_key *nk = &num_keys[i];
		if (strcmp(k, nk->name))
			continue;
		char *end;
		errno = 0;
		double d = strtod(value, &end);
		if (errno || end == value || *end || !(d >= nk->min && d <= nk->max) || (nk->integer && d != floor(d)))
			return errf(err, errlen, "%s: %s from %.15g to %.15g, not \"%.64s\"", key,
				    nk->integer ? "a whole number" : "a number", nk->min, nk->max, value);
		char *field = (char *)c + nk->off;
		if (nk->integer)
			*(long *)field = (long)d;
		else
			*(double *)field = d;
		return 1;
	}
	for (size_t i = 0; i < sizeof(bool_keys) / sizeof(bool_keys[0]); i++) {
		if (strcmp(k, bool_keys[i].name))
			continue;
		if (strcmp(value, "true") && strcmp(value, "false"))
			return errf(err, errlen, "%s: true or false", key);
		*(bool *)((char *)c + bool_keys[i].off) = !strcmp(value, "true");
		return 1;
	}
	return 0;
}

/* Set key to v (stolen); false when v is NULL or it could not be set. */
static bool put(json_t *o, const char *key, json_t *v)
{
	return v && json_object_set_new(o, key, v) == 0;
}

json_t *judge0_config_info(const struct judge0_config *c, unsigned queue_max, bool network)
{
	json_t *o = json_object();
	/* config.rb's order; what vmrun does not do is false, so that a
	 * client reads what will be refused before it asks */
	bool ok = o && put(o, "maintenance_mode", json_false()) &&
		  put(o, "enable_wait_result", json_boolean(c->enable_wait_result)) &&
		  put(o, "enable_compiler_options", json_true()) &&
		  put(o, "allowed_languages_for_compile_options", json_pack("[ssss]", "C", "C++", "Go", "Rust")) &&
		  put(o, "enable_command_line_arguments", json_true()) &&
		  put(o, "enable_submission_delete", json_false()) && put(o, "enable_callbacks", json_true()) &&
		  put(o, "callbacks_max_tries", json_integer(3)) && put(o, "callbacks_timeout", json_real(5)) &&
		  put(o, "enable_additional_files", json_true()) &&
		  put(o, "max_queue_size", json_integer(queue_max)) &&
		  put(o, "cpu_time_limit", json_real(c->cpu_time_limit)) &&
		  put(o, "max_cpu_time_limit", json_real(c->max_cpu_time_limit)) &&
		  put(o, "cpu_extra_time", json_real(c->cpu_extra_time)) &&
		  put(o, "max_cpu_extra_time", json_real(c->max_cpu_extra_time)) &&
		  put(o, "wall_time_limit", json_real(c->wall_time_limit)) &&
		  put(o, "max_wall_time_limit", json_real(c->max_wall_time_limit)) &&
		  put(o, "memory_limit", json_integer(c->memory_limit)) &&
		  put(o, "max_memory_limit", json_integer(c->max_memory_limit)) &&
		  put(o, "stack_limit", json_integer(c->stack_limit)) &&
		  put(o, "max_stack_limit", json_integer(c->max_stack_limit)) &&
		  put(o, "max_processes_and_or_threads", json_integer(c->max_processes_and_or_threads)) &&
		  put(o, "max_max_processes_and_or_threads", json_integer(c->max_max_processes_and_or_threads)) &&
		  put(o, "enable_per_process_and_thread_time_limit", json_false()) &&
		  put(o, "allow_enable_per_process_and_thread_time_limit", json_false()) &&
		  put(o, "enable_per_process_and_thread_memory_limit", json_false()) &&
		  put(o, "allow_enable_per_process_and_thread_memory_limit", json_false()) &&
		  put(o, "max_file_size", json_integer(c->max_file_size)) &&
		  put(o, "max_max_file_size", json_integer(c->max_max_file_size)) &&
		  put(o, "number_of_runs", json_integer(c->number_of_runs)) &&
		  put(o, "max_number_of_runs", json_integer(c->max_number_of_runs)) &&
		  put(o, "redirect_stderr_to_stdout", json_boolean(c->redirect_stderr_to_stdout)) &&
		  put(o, "max_extract_size", json_integer(JUDGE0_MAX_EXTRACT_SIZE)) &&
		  put(o, "enable_batched_submissions", json_boolean(c->enable_batched_submissions)) &&
		  put(o, "max_submission_batch_size", json_integer(c->max_submission_batch_size)) &&
		  put(o, "submission_cache_duration", json_real(1)) && put(o, "use_docs_as_homepage", json_false()) &&
		  put(o, "allow_enable_network", json_boolean(network)) && put(o, "enable_network", json_false()) &&
		  put(o, "disable_implicit_base64_encoding", json_boolean(c->disable_implicit_base64_encoding));
	if (ok)
		return o;
	json_decref(o);
	return NULL;
}

/* ---- languages ---------------------------------------------------------------- */

/* Judge0's ids for our runtimes (db/languages/active.rb), its names with
 * our versions, and the file name it gives the source (none for the
 * Multi-file program); in the order of their names, as Judge0 lists. */
static const struct language {
	long id;
	const char *runtime, *name, *source_file;
} languages[] = {
	{ 46, "bash", "Bash (", "script.sh" },
	{ 50, "c", "C (GCC ", "main.c" },
	{ 54, "c++", "C++ (GCC ", "main.cpp" },
	{ 60, "go", "Go (", "main.go" },
	{ 62, "java", "Java (OpenJDK ", "Main.java" },
	{ 63, "javascript", "JavaScript (Node.js ", "script.js" },
	{ JUDGE0_PROJECT_LANGUAGE, JUDGE0_PROJECT_RUNTIME, "Multi-file program", NULL },
	{ 71, "python", "Python (", "script.py" },
	{ 73, "rust", "Rust (", "main.rs" },
};

static const struct language *language_of(long id, const struct runtime *rts, size_t n,
					  const struct runtime **rt)
{
	for (size_t i = 0; i < sizeof(languages) / sizeof(languages[0]); i++)
		if (languages[i].id == id && (*rt = runtime_pick(rts, n, languages[i].runtime)))
			return &languages[i];
	return NULL;
}

/* "C (GCC 12.2.0)", "Bash (5.2.15)": Judge0's pattern with our version;
 * "Multi-file program" as it is. */
static json_t *language_name(const struct language *l, const struct runtime *rt)
{
	if (!l->source_file)
		return json_string(l->name);
	char name[160];
	snprintf(name, sizeof(name), "%s%s)", l->name, rt->version);
	return json_string(name);
}

/* A template as Judge0 shows a command: the source file's name in place
 * of {file} and {files}, {stem} its stem, no {args}. */
static json_t *command_of(const char *tmpl, const char *source_file)
{
	if (!*tmpl)
		return json_null();
	char out[1024], stem[64];
	snprintf(stem, sizeof(stem), "%s", source_file);
	char *dot = strrchr(stem, '.');
	if (dot)
		*dot = '\0';
	size_t o = 0;
	for (const char *p = tmpl; *p && o < sizeof(out) - 1;) {
		const char *with = NULL;
		size_t skip = 0;
		if (!strncmp(p, "{files}", 7))
			with = source_file, skip = 7;
		else if (!strncmp(p, "{file}", 6))
			with = source_file, skip = 6;
		else if (!strncmp(p, "{stem}", 6))
			with = stem, skip = 6;
		else if (!strncmp(p, " {args}", 7))
			with = "", skip = 7;
		if (!with) {
			out[o++] = *p++;
			continue;
		}
		o += (size_t)snprintf(out + o, sizeof(out) - o, "%s", with);
		if (o >= sizeof(out))
			o = sizeof(out) - 1;
		p += skip;
	}
	out[o] = '\0';
	return json_string(out);
}

bool judge0_language_takes_options(long id)
{
	return id == 50 || id == 54 || id == 60 || id == 73;
}

const struct runtime *judge0_language_runtime(long id, const struct runtime *rts, size_t n, const char **source_file)
{
	const struct runtime *rt = NULL;
	const struct language *l = language_of(id, rts, n, &rt);
	if (l && source_file)
		*source_file = l->source_file;
	return l ? rt : NULL;
}

json_t *judge0_languages(const struct runtime *rts, size_t n, bool all)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < sizeof(languages) / sizeof(languages[0]); i++) {
		const struct runtime *rt;
		if (!language_of(languages[i].id, rts, n, &rt))
			continue;
		json_t *o = json_object();
		if (!(o && put(o, "id", json_integer(languages[i].id)) &&
		      put(o, "name", language_name(&languages[i], rt)) &&
		      (!all || put(o, "is_archived", json_false())) && json_array_append_new(a, o) == 0)) {
			json_decref(o);
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

json_t *judge0_language(const struct runtime *rts, size_t n, long id)
{
	const struct runtime *rt;
	const struct language *l = language_of(id, rts, n, &rt);
	if (!l)
		return NULL;
	json_t *o = json_object();
	if (o && put(o, "id", json_integer(id)) && put(o, "name", language_name(l, rt)) &&
	    put(o, "is_archived", json_false()) &&
	    put(o, "source_file", l->source_file ? json_string(l->source_file) : json_null()) &&
	    put(o, "compile_cmd", l->source_file ? command_of(rt->compile, l->source_file) : json_null()) &&
	    put(o, "run_cmd", l->source_file ? command_of(rt->run, l->source_file) : json_null()))
		return o;
	json_decref(o);
	return NULL;
}

/* ---- statuses ------------------------------------------------------------------ */

static const char *const status_names[] = {
	[J0_IN_QUEUE] = "In Queue",
	[J0_PROCESSING] = "Processing",
	[J0_ACCEPTED] = "Accepted",
	[J0_WRONG_ANSWER] = "Wrong Answer",
	[J0_TIME_LIMIT] = "Time Limit Exceeded",
	[J0_COMPILATION_ERROR] = "Compilation Error",
	[J0_SIGSEGV] = "Runtime Error (SIGSEGV)",
	[J0_SIGXFSZ] = "Runtime Error (SIGXFSZ)",
	[J0_SIGFPE] = "Runtime Error (SIGFPE)",
	[J0_SIGABRT] = "Runtime Error (SIGABRT)",
	[J0_NZEC] = "Runtime Error (NZEC)",
	[J0_OTHER] = "Runtime Error (Other)",
	[J0_INTERNAL_ERROR] = "Internal Error",
	[J0_EXEC_FORMAT_ERROR] = "Exec Format Error",
};

const char *judge0_status_name(int id)
{
	return id >= J0_IN_QUEUE && id <= J0_EXEC_FORMAT_ERROR ? status_names[id] : NULL;
}

json_t *judge0_statuses(void)
{
	json_t *a = json_array();
	for (int id = J0_IN_QUEUE; a && id <= J0_EXEC_FORMAT_ERROR; id++) {
		json_t *o = json_object();
		if (!(o && put(o, "id", json_integer(id)) && put(o, "description", json_string(status_names[id])) &&
		      json_array_append_new(a, o) == 0)) {
			json_decref(o);
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* ---- tokens ---------------------------------------------------------------------- */

void judge0_token(const char *id, char token[JUDGE0_TOKEN_LEN + 1])
{
	snprintf(token, JUDGE0_TOKEN_LEN + 1, "%.8s-%.4s-%.4s-%.4s-%.12s", id, id + 8, id + 12, id + 16, id + 20);
}

bool judge0_token_id(const char *token, char id[33])
{
	size_t o = 0;
	if (strlen(token) != JUDGE0_TOKEN_LEN)
		return false;
	for (size_t i = 0; i < JUDGE0_TOKEN_LEN; i++) {
		char c = (char)tolower((unsigned char)token[i]);
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? c != '-' : !strchr("0123456789abcdef", c) || !c)
			return false;
		if (!dash)
			id[o++] = c;
	}
	id[o] = '\0';
	return true;
}

/* ---- base64 as Ruby has it -------------------------------------------------------- */

char *judge0_encode64(const void *p, size_t n, size_t *outlen)
{
	return base64_encode(p, n, 60, outlen);   /* pack("m"): 45 bytes (60 characters) a line */
}

int judge0_decode64(const char *s, size_t n, unsigned char **out, size_t *outlen)
{
	unsigned char *o = malloc(n / 4 * 3 + 3);
	*outlen = 0;
	if (!(*out = o))
		return -1;
	uint32_t acc = 0;
	unsigned k = 0;
	size_t len = 0;
	for (size_t i = 0; i < n && s[i] != '='; i++) {
		int v = base64_value((unsigned char)s[i], false);
		if (v < 0)
			continue;
		acc = acc << 6 | (uint32_t)v;
		if (++k == 4) {
			o[len++] = (unsigned char)(acc >> 16);
			o[len++] = (unsigned char)(acc >> 8);
			o[len++] = (unsigned char)acc;
			acc = 0;
			k = 0;
		}
	}
	if (k == 2) {
		o[len++] = (unsigned char)(acc >> 4);
	} else if (k == 3) {
		o[len++] = (unsigned char)(acc >> 10);
		o[len++] = (unsigned char)(acc >> 2);
	}
	o[len] = '\0';
	*outlen = len;
	return 0;
}
