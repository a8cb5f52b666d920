/* The run spec's JSON (run_spec.h): the native body read and checked
 * field by field, with jansson. The canonical form written back is
 * run_spec_canon.c; the contents' encodings, run_spec_decode.c. */
#include "run_spec.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "hex.h"
#include "proto.h"
#include "run_pause.h"
#include "runtime.h"
#include "workspace.h"

/* Ceilings past which a number is a mistake, not a wish; the policy and
 * the run library hold the real limits. */
#define MAX_TIMEOUT_S    86400.0
#define MAX_MEMORY_MIB   (UINT64_C(1) << 20)
#define MAX_CPUS         1024u
#define MAX_DISK_MIB     (UINT64_C(1) << 20)
#define MAX_OUTPUT_BYTES (UINT64_C(1) << 40)
#define MAX_CPU_TIME_MS  UINT64_C(86400000)
/* A network rule as sent: room for an international name in UTF-8,
 * which is longer than the punycode it becomes (under netpolicy.c's own
 * cap on text before normalizing). */
#define MAX_NET_RULE_TEXT 1000

/* ---- field helpers -------------------------------------------------------- */

/* Refuse a key of obj not in keys (NULL-terminated); where names obj in
 * the message ("files[2]"), "" for the top level. */
static int known_keys(const json_t *obj, const char *const *keys, const char *where, char *err, size_t errlen)
{
	const char *k;
	json_t *v;
	json_object_foreach ((json_t *)obj, k, v) {
		size_t i = 0;
		while (keys[i] && strcmp(keys[i], k))
			i++;
		if (!keys[i]) {
			char q[72];
			return errf(err, errlen, "%s%sunknown field \"%s\"", where, *where ? ": " : "",
				    errmsg_printable(q, sizeof(q), k));
		}
	}
	return 0;
}

/* Whether j nests objects or arrays deeper than RUN_SPEC_MAX_DEPTH, j itself
 * at depth. Recursion stops one level past the limit. */
static bool too_deep(const json_t *j, int depth)
{
	if (!json_is_object(j) && !json_is_array(j))
		return false;
	if (depth > RUN_SPEC_MAX_DEPTH)
		return true;
	if (json_is_array(j)) {
		for (size_t i = 0; i < json_array_size(j); i++)
			if (too_deep(json_array_get(j, i), depth + 1))
				return true;
		return false;
	}
	const char *k;
	json_t *v;
	json_object_foreach ((json_t *)j, k, v)
		if (too_deep(v, depth + 1))
			return true;
	return false;
}

/* A whole number from 0 to max: a JSON integer, or a real without a
 * fraction (clients written in JavaScript may send 1e6). */
static int get_whole(const json_t *v, const char *path, uint64_t max, uint64_t *out, char *err, size_t errlen)
{
	if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);
		if (i < 0)
			return errf(err, errlen, "%s: must not be negative", path);
		if ((uint64_t)i > max)
			return errf(err, errlen, "%s: must be at most %llu", path, (unsigned long long)max);
		*out = (uint64_t)i;
		return 0;
	}
	if (!json_is_real(v))
		return errf(err, errlen, "%s: must be a whole number", path);
	double d = json_real_value(v);
	if (d < 0)
		return errf(err, errlen, "%s: must not be negative", path);
	if (d > (double)max)
		return errf(err, errlen, "%s: must be at most %llu", path, (unsigned long long)max);
	if (d != (double)(uint64_t)d)
		return errf(err, errlen, "%s: must be a whole number", path);
	*out = (uint64_t)d;
	return 0;
}

static int get_seconds(const json_t *v, const char *path, double *out, char *err, size_t errlen)
{
	if (!json_is_number(v))
		return errf(err, errlen, "%s: must be a number", path);
	double d = json_number_value(v);
	if (!isfinite(d) || d <= 0 || d > MAX_TIMEOUT_S)
		return errf(err, errlen, "%s: must be above 0 and at most %g seconds", path, MAX_TIMEOUT_S);
	*out = d;
	return 0;
}

/* A string without NUL bytes (jansson's may hold them) of at most max bytes. */
static int get_text(const json_t *v, const char *path, size_t max, const char **out, char *err, size_t errlen)
{
	if (!json_is_string(v))
		return errf(err, errlen, "%s: must be a string", path);
	size_t n = json_string_length(v);
	if (n > max)
		return errf(err, errlen, "%s: longer than %zu bytes", path, max);
	if (memchr(json_string_value(v), '\0', n))
		return errf(err, errlen, "%s: must not contain a NUL byte", path);
	*out = json_string_value(v);
	return 0;
}

static char *dup_text(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = malloc(n);
	return d ? memcpy(d, s, n) : NULL;
}

/* Decode content (a string) in encoding (a string, or NULL: utf8). */
static int get_data(const json_t *content, const json_t *encoding, const char *what, const char *enc_what,
		    unsigned char **out, size_t *len, char *err, size_t errlen)
{
	const char *enc = "utf8";
	if (encoding && get_text(encoding, enc_what, 16, &enc, err, errlen))
		return -1;
	if (!run_spec_encoding_known(enc))
		return errf(err, errlen, "%s: must be utf8, base64 or hex", enc_what);
	if (!json_is_string(content))
		return errf(err, errlen, "%s: must be a string", what);
	char why[160];
	if (run_spec_decode(json_string_value(content), json_string_length(content), enc, RUN_SPEC_MAX_FILE_BYTES, out, len, why,
		       sizeof(why)))
		return errf(err, errlen, "%s: %s", what, why);
	return 0;
}

/* ---- the request's parts -------------------------------------------------- */

/* An array of strings into a NULL-terminated vector. */
static int get_strings(const json_t *a, const char *what, bool is_argv, char ***out, unsigned *n, char *err,
		       size_t errlen)
{
	if (!json_is_array(a))
		return errf(err, errlen, "%s: must be an array of strings", what);
	size_t size = json_array_size(a);
	if (is_argv && !size)
		return errf(err, errlen, "%s: must not be empty", what);
	if (size > RUN_SPEC_MAX_ARGS)
		return errf(err, errlen, "%s: at most %d arguments", what, RUN_SPEC_MAX_ARGS);
	if (!(*out = calloc(size + 1, sizeof(char *))))
		return errf(err, errlen, "out of memory");
	for (size_t i = 0; i < size; i++) {
		char path[32];
		const char *s;
		snprintf(path, sizeof(path), "%s[%zu]", what, i);
		if (get_text(json_array_get(a, i), path, RUN_SPEC_MAX_ARG_LEN, &s, err, errlen))
			return -1;
		if (is_argv && i == 0 && !*s)
			return errf(err, errlen, "%s: must not be empty", path);
		if (!((*out)[i] = dup_text(s)))
			return errf(err, errlen, "out of memory");
		(*n)++;
	}
	return 0;
}

/* What a file's name must be: it lands in /workspace's top directory and
 * becomes a word of the runtime's compile or run command. */
static int check_name(const char *name, const char *path, char *err, size_t errlen)
{
	if (!*name)
		return errf(err, errlen, "%s: must not be empty", path);
	if (strchr(name, '/'))
		return errf(err, errlen, "%s: must not contain '/'", path);
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return errf(err, errlen, "%s: must not be \".\" or \"..\"", path);
	if (!strcmp(name, PROTO_ARTIFACTS_DIR))
		return errf(err, errlen, "%s: \"%s\" is the artifacts directory", path, PROTO_ARTIFACTS_DIR);
	if (!strcmp(name, WORKSPACE_LOST_FOUND))
		return errf(err, errlen, "%s: \"%s\" is the workspace's own directory", path, WORKSPACE_LOST_FOUND);
	if (name[0] == '-')
		return errf(err, errlen, "%s: must not start with '-' (it would read as an option)", path);
	/* Not a rule of the workspace's, but names are quoted in messages and
	 * logs, where a newline would forge a line. */
	for (const char *c = name; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return errf(err, errlen, "%s: must not contain control characters", path);
	return 0;
}

int run_spec_path_check(const char *path, char *why, size_t cap)
{
	size_t n = strlen(path);
	if (!n)
		return errf(why, cap, "must not be empty");
	if (n > RUN_SPEC_MAX_FILE_NAME)
		return errf(why, cap, "longer than %d bytes", RUN_SPEC_MAX_FILE_NAME);
	if (path[0] == '/')
		return errf(why, cap, "must be a relative path");
	for (const char *c = path; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return errf(why, cap, "must not contain control characters");
	unsigned depth = 0;
	for (const char *c = path;; c++) {
		size_t len = strcspn(c, "/");
		if (!len)
			return errf(why, cap, "has an empty component ('//', or '/' at the end)");
		if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return errf(why, cap, "has a \"%.*s\" component", (int)len, c);
		if (++depth > RUN_SPEC_MAX_PATH_DEPTH)
			return errf(why, cap, "deeper than %d components", RUN_SPEC_MAX_PATH_DEPTH);
		if (depth == 1 && len == strlen(PROTO_ARTIFACTS_DIR) && !memcmp(c, PROTO_ARTIFACTS_DIR, len))
			return errf(why, cap, "\"%s\" is the artifacts directory", PROTO_ARTIFACTS_DIR);
		if (depth == 1 && len == strlen(WORKSPACE_LOST_FOUND) && !memcmp(c, WORKSPACE_LOST_FOUND, len))
			return errf(why, cap, "\"%s\" is the workspace's own directory", WORKSPACE_LOST_FOUND);
		c += len;
		if (!*c)
			return 0;
	}
}

/* files[i] or workspace_files[i] (what): a name, or with paths a path. */
static int get_file(const json_t *f, const char *what, size_t i, bool paths, struct run_spec_file *rf, char *err,
		    size_t errlen)
{
	static const char *const keys[] = { "name", "content", "encoding", "executable", NULL };
	char where[40], path[56], path2[56];
	snprintf(where, sizeof(where), "%s[%zu]", what, i);
	if (!json_is_object(f))
		return errf(err, errlen, "%s: must be an object", where);
	if (known_keys(f, keys, where, err, errlen))
		return -1;
	const json_t *name = json_object_get(f, "name"), *content = json_object_get(f, "content");
	const char *s;
	snprintf(path, sizeof(path), "%s.name", where);
	if (!name)
		return errf(err, errlen, "%s: is required", path);
	if (get_text(name, path, RUN_SPEC_MAX_FILE_NAME, &s, err, errlen))
		return -1;
	char why[96], q[72];
	if (paths && run_spec_path_check(s, why, sizeof(why)))
		return errf(err, errlen, "%s: \"%s\" %s", path, errmsg_printable(q, sizeof(q), s), why);
	if (!paths && check_name(s, path, err, errlen))
		return -1;
	memcpy(rf->name, s, strlen(s) + 1);
	const json_t *x = json_object_get(f, "executable");
	if (x && !json_is_boolean(x))
		return errf(err, errlen, "%s.executable: must be true or false", where);
	rf->executable = json_is_true(x);
	snprintf(path, sizeof(path), "%s.content", where);
	snprintf(path2, sizeof(path2), "%s.encoding", where);
	if (!content)
		return errf(err, errlen, "%s: is required", path);
	return get_data(content, json_object_get(f, "encoding"), path, path2, &rf->data, &rf->len, err, errlen);
}

/* files or workspace_files (key, at most max), each name once, their
 * bytes added to *total. */
static int get_file_list(const json_t *a, const char *key, bool paths, unsigned max, struct run_spec_file **out,
			 unsigned *n, size_t *total, char *err, size_t errlen)
{
	if (!json_is_array(a))
		return errf(err, errlen, "%s: must be an array of objects", key);
	size_t size = json_array_size(a);
	if (size > max)
		return errf(err, errlen, "%s: at most %u files", key, max);
	if (!size)
		return 0;
	if (!(*out = calloc(size, sizeof(**out))))
		return errf(err, errlen, "out of memory");
	for (size_t i = 0; i < size; i++) {
		struct run_spec_file *rf = &(*out)[(*n)++];
		if (get_file(json_array_get(a, i), key, i, paths, rf, err, errlen))
			return -1;
		for (size_t j = 0; j < i; j++)
			if (!strcmp((*out)[j].name, rf->name)) {
				char q[72];
				return errf(err, errlen, "%s[%zu].name: \"%s\" is given twice", key, i,
					    errmsg_printable(q, sizeof(q), rf->name));
			}
		*total += rf->len;
		if (*total > RUN_SPEC_MAX_TOTAL_BYTES)
			return errf(err, errlen, "%s[%zu]: files and stdin over %u bytes in all", key, i,
				    RUN_SPEC_MAX_TOTAL_BYTES);
	}
	return 0;
}

bool run_spec_path_above(const char *dir, const char *path)
{
	size_t n = strlen(dir);
	return !strncmp(dir, path, n) && path[n] == '/';
}

/* A workspace file may not take a place files (flat names in the same
 * /workspace) or another workspace file holds, as a file or as one of
 * its directories. */
static int check_places(const struct run_spec *rq, char *err, size_t errlen)
{
	char q[72];
	for (unsigned i = 0; i < rq->nwfiles; i++) {
		const char *p = rq->wfiles[i].name;
		for (unsigned j = 0; j < rq->nfiles; j++)
			if (!strcmp(rq->files[j].name, p) || run_spec_path_above(rq->files[j].name, p))
				return errf(err, errlen, "workspace_files[%u].name: \"%s\" is taken by files[%u]", i,
					    errmsg_printable(q, sizeof(q), p), j);
		for (unsigned j = 0; j < i; j++)
			if (run_spec_path_above(rq->wfiles[j].name, p) || run_spec_path_above(p, rq->wfiles[j].name))
				return errf(err, errlen,
					    "workspace_files[%u].name: \"%s\" and workspace_files[%u] make one "
					    "a file and a directory",
					    i, errmsg_printable(q, sizeof(q), p), j);
	}
	return 0;
}

static int get_files(const json_t *body, struct run_spec *rq, size_t *total, char *err, size_t errlen)
{
	const json_t *v = json_object_get(body, "files"), *w = json_object_get(body, "workspace_files");
	if (v && get_file_list(v, "files", false, RUN_SPEC_MAX_FILES, &rq->files, &rq->nfiles, total, err, errlen))
		return -1;
	if (rq->source && !rq->nfiles && !rq->nrun_cmd)
		return errf(err, errlen, "files: must not be empty without argv (source mode)");
	if (w && get_file_list(w, "workspace_files", true, RUN_SPEC_MAX_WORKSPACE_FILES, &rq->wfiles, &rq->nwfiles,
			       total, err, errlen))
		return -1;
	return check_places(rq, err, errlen);
}

static int get_stdin(const json_t *body, struct run_spec *rq, size_t total, char *err, size_t errlen)
{
	const json_t *in = json_object_get(body, "stdin"), *enc = json_object_get(body, "stdin_encoding");
	if (!in) {
		if (enc)
			return errf(err, errlen, "stdin_encoding: given without stdin");
		return 0;
	}
	if (get_data(in, enc, "stdin", "stdin_encoding", &rq->stdin_data, &rq->stdin_len, err, errlen))
		return -1;
	rq->has_stdin = true;
	if (total + rq->stdin_len > RUN_SPEC_MAX_TOTAL_BYTES)
		return errf(err, errlen, "stdin: files and stdin over %u bytes in all", RUN_SPEC_MAX_TOTAL_BYTES);
	return 0;
}

static bool env_name_ok(const char *s)
{
	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
		return false;
	for (s++; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

static int get_env(const json_t *o, struct run_spec *rq, char *err, size_t errlen)
{
	if (!json_is_object(o))
		return errf(err, errlen, "env: must be an object of NAME: \"VALUE\"");
	size_t size = json_object_size(o);
	if (size > RUN_SPEC_MAX_ENV)
		return errf(err, errlen, "env: at most %d variables", RUN_SPEC_MAX_ENV);
	if (!size)
		return 0;
	if (!(rq->env = calloc(size + 1, sizeof(char *))))
		return errf(err, errlen, "out of memory");
	const char *k;
	json_t *v;
	json_object_foreach ((json_t *)o, k, v) {
		char q[72], path[96];
		const char *s;
		if (!env_name_ok(k))
			return errf(err, errlen, "env: \"%s\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*)",
				    errmsg_printable(q, sizeof(q), k));
		snprintf(path, sizeof(path), "env.%s", errmsg_printable(q, sizeof(q), k));
		if (get_text(v, path, RUN_SPEC_MAX_ENV_LEN, &s, err, errlen))
			return -1;
		size_t kn = strlen(k), vn = strlen(s);
		if (kn + 1 + vn > RUN_SPEC_MAX_ENV_LEN)
			return errf(err, errlen, "%s: NAME=VALUE longer than %d bytes", path, RUN_SPEC_MAX_ENV_LEN);
		char *kv = malloc(kn + vn + 2);
		if (!kv)
			return errf(err, errlen, "out of memory");
		memcpy(kv, k, kn);
		kv[kn] = '=';
		memcpy(kv + kn + 1, s, vn + 1);
		rq->env[rq->nenv++] = kv;
	}
	return 0;
}

static int get_limits(const json_t *o, struct run_spec *rq, char *err, size_t errlen)
{
	static const char *const keys[] = { "timeout_s", "memory_mib", "cpus", "disk_mib", "max_output", NULL };
	if (!json_is_object(o))
		return errf(err, errlen, "limits: must be an object");
	if (known_keys(o, keys, "limits", err, errlen))
		return -1;
	const json_t *v;
	if ((v = json_object_get(o, "timeout_s")) && get_seconds(v, "limits.timeout_s", &rq->timeout_s, err, errlen))
		return -1;
	const struct { const char *key, *path; uint64_t max, *dst; } whole[] = {
		{ "memory_mib", "limits.memory_mib", MAX_MEMORY_MIB, &rq->memory_mib },
		{ "cpus", "limits.cpus", MAX_CPUS, &rq->cpus },
		{ "disk_mib", "limits.disk_mib", MAX_DISK_MIB, &rq->disk_mib },
		{ "max_output", "limits.max_output", MAX_OUTPUT_BYTES, &rq->max_output },
	};
	for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++)
		if ((v = json_object_get(o, whole[i].key)) &&
		    get_whole(v, whole[i].path, whole[i].max, whole[i].dst, err, errlen))
			return -1;
	return 0;
}

static int get_stage(const json_t *o, const char *what, struct run_stage_limits *st, char *err, size_t errlen)
{
	static const char *const keys[] = { "timeout_s", "memory_mib", "cpu_time_ms", "command", NULL };
	static const char *const compile_keys[] = { "timeout_s", "memory_mib", "cpu_time_ms", "args", "command", NULL };
	char path[32];
	if (!json_is_object(o))
		return errf(err, errlen, "%s: must be an object", what);
	if (known_keys(o, strcmp(what, "compile") ? keys : compile_keys, what, err, errlen))
		return -1;
	const json_t *v;
	snprintf(path, sizeof(path), "%s.timeout_s", what);
	if ((v = json_object_get(o, "timeout_s")) && get_seconds(v, path, &st->timeout_s, err, errlen))
		return -1;
	snprintf(path, sizeof(path), "%s.memory_mib", what);
	if ((v = json_object_get(o, "memory_mib")) && get_whole(v, path, MAX_MEMORY_MIB, &st->memory_mib, err, errlen))
		return -1;
	snprintf(path, sizeof(path), "%s.cpu_time_ms", what);
	if ((v = json_object_get(o, "cpu_time_ms")) &&
	    get_whole(v, path, MAX_CPU_TIME_MS, &st->cpu_time_ms, err, errlen))
		return -1;
	return 0;
}

static int get_runtime(const json_t *v, struct run_spec *rq, char *err, size_t errlen)
{
	if (!v)
		return 0;
	const char *s;
	if (get_text(v, "runtime", RUN_SPEC_NAME_MAX - 1, &s, err, errlen))
		return -1;
	if (!runtime_valid_name(s))
		return errf(err, errlen, "runtime: not a runtime name ([a-z0-9+._-], not starting with '.' or '-')");
	memcpy(rq->runtime, s, strlen(s) + 1);
	return 0;
}

/* One network rule, checked now so that a bad one is the client's 400
 * and never a failed run, and kept parsed. */
static int get_net_rule(const json_t *v, const char *path, bool addr, struct run_spec *rq, char *err, size_t errlen)
{
	const char *s;
	struct net_rule r;
	char why[300], q[320];
	if (get_text(v, path, MAX_NET_RULE_TEXT, &s, err, errlen))
		return -1;
	if (net_rule_parse_as(s, addr, "network.allow_addr", &r, why, sizeof(why)))
		return errf(err, errlen, "%s: %s", path, errmsg_printable(q, sizeof(q), why));
	if (run_spec_add_rule(rq, &r))
		return errf(err, errlen, "%s: %s", path,
			    errno == ENOSPC ? "too many rules in allow and allow_addr together" : "out of memory");
	return 0;
}

/* network.allow or network.allow_addr (key): an array of rules. */
static int get_net_rules(const json_t *a, const char *key, bool addr, struct run_spec *rq, size_t *total, char *err,
			 size_t errlen)
{
	if (!json_is_array(a))
		return errf(err, errlen, "network.%s: must be an array of strings", key);
	size_t size = json_array_size(a);
	*total += size;
	if (*total > RUN_SPEC_MAX_NET_RULES)
		return errf(err, errlen, "network.%s: at most %d rules in allow and allow_addr together", key,
			    RUN_SPEC_MAX_NET_RULES);
	for (size_t i = 0; i < size; i++) {
		char path[48];
		snprintf(path, sizeof(path), "network.%s[%zu]", key, i);
		if (get_net_rule(json_array_get(a, i), path, addr, rq, err, errlen))
			return -1;
	}
	return 0;
}

static int get_network(const json_t *o, struct run_spec *rq, char *err, size_t errlen)
{
	static const char *const keys[] = { "allow", "allow_addr", NULL };
	if (!json_is_object(o))
		return errf(err, errlen, "network: must be an object");
	if (known_keys(o, keys, "network", err, errlen))
		return -1;
	size_t total = 0;
	const json_t *v;
	if ((v = json_object_get(o, "allow")) && get_net_rules(v, "allow", false, rq, &total, err, errlen))
		return -1;
	if ((v = json_object_get(o, "allow_addr")) && get_net_rules(v, "allow_addr", true, rq, &total, err, errlen))
		return -1;
	return 0;
}

/* Which mode the body asks for, and the fields that belong to the other. */
static int get_mode(const json_t *body, struct run_spec *rq, char *err, size_t errlen)
{
	const json_t *argv = json_object_get(body, "argv");
	if (!argv && !json_object_get(body, "files") && !json_object_get(json_object_get(body, "run"), "command"))
		return errf(err, errlen, "argv, files or run.command is required");
	rq->source = !argv;
	if (rq->source)
		return 0;
	if (json_object_get(body, "args"))
		return errf(err, errlen, "args: only without argv (source mode); with argv, put them in argv");
	if (json_object_get(body, "compile"))
		return errf(err, errlen, "compile: only without argv (source mode)");
	if (json_object_get(body, "run"))
		return errf(err, errlen, "run: only without argv (source mode)");
	return 0;
}

/* run.command and compile.command: the stages' own commands, which
 * replace the runtime's templates together. */
static int get_commands(const json_t *body, struct run_spec *rq, char *err, size_t errlen)
{
	const json_t *comp = json_object_get(body, "compile"), *run = json_object_get(body, "run");
	const json_t *cc = json_object_get(comp, "command"), *rc = json_object_get(run, "command");
	if (rc && get_strings(rc, "run.command", true, &rq->run_cmd, &rq->nrun_cmd, err, errlen))
		return -1;
	if (!cc)
		return 0;
	if (!rc)
		return errf(err, errlen, "compile.command: only with run.command (the two replace the runtime's templates)");
	if (json_object_get(comp, "args"))
		return errf(err, errlen, "compile.args: not with compile.command (put them in the command)");
	return get_strings(cc, "compile.command", true, &rq->compile_cmd, &rq->ncompile_cmd, err, errlen);
}

/* A run's body, or a sandbox's (no command of its own, so none of what a
 * run's command takes; its files come through its own API). */
/* A string of visible ASCII into out (cap bytes with the NUL): 0, or -1
 * when it is something else or too long. */
static int get_word(const json_t *v, char *out, size_t cap)
{
	const char *t = json_string_value(v);
	size_t n = t ? json_string_length(v) : 0;
	if (!t || n == 0 || n >= cap)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (t[i] < 0x21 || t[i] > 0x7e)
			return -1;
	memcpy(out, t, n + 1);
	return 0;
}

/* from_checkpoint, expect_digest, checkpoint_node: a verification run's. */
static int get_checkpoint(const json_t *body, struct run_spec *rq, char *err, size_t errlen)
{
	const json_t *from = json_object_get(body, "from_checkpoint"), *dig = json_object_get(body, "expect_digest"),
		     *node = json_object_get(body, "checkpoint_node");
	if (!from) {
		if (dig || node)
			return errf(err, errlen, "%s: only with from_checkpoint", dig ? "expect_digest" : "checkpoint_node");
		return 0;
	}
	char id[RUN_CHECKPOINT_SANDBOX_MAX + 1];
	const char *name;
	if (get_word(from, rq->from_checkpoint, sizeof(rq->from_checkpoint)) ||
	    !run_checkpoint_ref(rq->from_checkpoint, id, &name))
		return errf(err, errlen, "from_checkpoint: \"SANDBOX_ID/NAME\"");
	if (dig && (get_word(dig, rq->expect_digest, sizeof(rq->expect_digest)) || !hex_is_sha256(rq->expect_digest)))
		return errf(err, errlen, "expect_digest: the 64 hex digits of a diff's digest");
	if (node && get_word(node, rq->checkpoint_node, sizeof(rq->checkpoint_node)))
		return errf(err, errlen, "checkpoint_node: a node's name");
	if (rq->nfiles || rq->nwfiles || rq->source)
		return errf(err, errlen, "%s: a run from a checkpoint has the checkpoint's workspace",
			    rq->nwfiles ? "workspace_files" : "files");
	return 0;
}

/* "client": the front end's own, kept whole; only its size is ours to cap. */
static int get_client(const json_t *v, struct run_spec *rq, char *err, size_t errlen)
{
	if (!json_is_object(v))
		return errf(err, errlen, "client: must be an object");
	if (json_dumpb(v, NULL, 0, JSON_COMPACT) > RUN_SPEC_MAX_CLIENT_BYTES)
		return errf(err, errlen, "client: more than %u bytes", RUN_SPEC_MAX_CLIENT_BYTES);
	rq->client = json_incref((json_t *)v);
	return 0;
}

/* "repeat": 1 to RUN_SPEC_MAX_REPEAT; a repeated run leaves no artifacts,
 * since each run would replace the last one's. */
static int get_repeat(const json_t *v, struct run_spec *rq, char *err, size_t errlen)
{
	uint64_t n;
	if (get_whole(v, "repeat", RUN_SPEC_MAX_REPEAT, &n, err, errlen))
		return -1;
	if (n < 1)
		return errf(err, errlen, "repeat: must be at least 1");
	if (n > 1 && rq->keep_artifacts)
		return errf(err, errlen, "repeat: a repeated run keeps no artifacts (keep_artifacts)");
	rq->repeat = (unsigned)n;
	return 0;
}

/* "repeat_expect" (+ "repeat_expect_encoding"): with a repeat above 1,
 * the output each run must give for another to be made. */
static int get_repeat_expect(const json_t *body, struct run_spec *rq, char *err, size_t errlen)
{
	const json_t *v = json_object_get(body, "repeat_expect"), *enc = json_object_get(body, "repeat_expect_encoding");
	if (!v)
		return enc ? errf(err, errlen, "repeat_expect_encoding: given without repeat_expect") : 0;
	if (rq->repeat < 2)
		return errf(err, errlen, "repeat_expect: only with a repeat above 1");
	if (get_data(v, enc, "repeat_expect", "repeat_expect_encoding", &rq->repeat_expect, &rq->repeat_expect_len, err,
		     errlen))
		return -1;
	rq->has_repeat_expect = true;
	if (rq->repeat_expect_len > RUN_SPEC_MAX_FILE_BYTES)
		return errf(err, errlen, "repeat_expect: more than %u bytes", RUN_SPEC_MAX_FILE_BYTES);
	return 0;
}

static int parse_body(const json_t *body, bool sandbox, struct run_spec *rq, char *err, size_t errlen)
{
	static const char *const keys[] = { "runtime", "argv",   "files",   "args", "stdin",          "stdin_encoding",
					    "env",     "limits", "compile", "run",  "keep_artifacts", "network",
					    "from_checkpoint", "expect_digest", "checkpoint_node", "client",
					    "workspace_files", "repeat", "repeat_expect", "repeat_expect_encoding", NULL };
	static const char *const sandbox_keys[] = { "runtime", "env", "limits", "network", NULL };
	if (!json_is_object(body))
		return errf(err, errlen, "the request must be a JSON object");
	if (too_deep(body, 1))
		return errf(err, errlen, "JSON nested deeper than %d", RUN_SPEC_MAX_DEPTH);
	if (known_keys(body, sandbox ? sandbox_keys : keys, "", err, errlen) ||
	    (!sandbox && get_mode(body, rq, err, errlen)) || get_runtime(json_object_get(body, "runtime"), rq, err, errlen))
		return -1;
	if (rq->source && !rq->runtime[0])
		return errf(err, errlen, "runtime: is required with files and no argv (source mode)");
	const json_t *v;
	if (!sandbox && !rq->source &&
	    get_strings(json_object_get(body, "argv"), "argv", true, &rq->argv, &rq->argc, err, errlen))
		return -1;
	if ((v = json_object_get(body, "args")) && get_strings(v, "args", false, &rq->argv, &rq->argc, err, errlen))
		return -1;
	if (get_commands(body, rq, err, errlen))
		return -1;
	size_t total = 0;
	if (get_files(body, rq, &total, err, errlen))
		return -1;
	if (get_stdin(body, rq, total, err, errlen))
		return -1;
	if ((v = json_object_get(body, "env")) && get_env(v, rq, err, errlen))
		return -1;
	if ((v = json_object_get(body, "limits")) && get_limits(v, rq, err, errlen))
		return -1;
	if ((v = json_object_get(body, "compile")) && get_stage(v, "compile", &rq->compile, err, errlen))
		return -1;
	if ((v = json_object_get(json_object_get(body, "compile"), "args")) &&
	    get_strings(v, "compile.args", false, &rq->compile_args, &rq->ncompile_args, err, errlen))
		return -1;
	if (rq->ncompile_args > RUN_SPEC_MAX_COMPILE_ARGS)
		return errf(err, errlen, "compile.args: at most %d", RUN_SPEC_MAX_COMPILE_ARGS);
	if ((v = json_object_get(body, "run")) && get_stage(v, "run", &rq->run, err, errlen))
		return -1;
	if ((v = json_object_get(body, "keep_artifacts"))) {
		if (!json_is_boolean(v))
			return errf(err, errlen, "keep_artifacts: must be true or false");
		rq->keep_artifacts = json_is_true(v);
	}
	if ((v = json_object_get(body, "repeat")) && get_repeat(v, rq, err, errlen))
		return -1;
	if (get_repeat_expect(body, rq, err, errlen))
		return -1;
	if ((v = json_object_get(body, "network")) && get_network(v, rq, err, errlen))
		return -1;
	if (get_checkpoint(body, rq, err, errlen))
		return -1;
	if ((v = json_object_get(body, "client")) && get_client(v, rq, err, errlen))
		return -1;
	if (sandbox && rq->timeout_s)
		return errf(err, errlen, "limits.timeout_s: a sandbox's life is its own timeout_s, not a run's limit");
	return 0;
}

static int from_json(const json_t *body, bool sandbox, struct run_spec *rq, char *err, size_t errlen)
{
	memset(rq, 0, sizeof(*rq));
	if (parse_body(body, sandbox, rq, err, errlen)) {
		run_spec_free(rq);
		return -1;
	}
	return 0;
}

int run_spec_from_json(const json_t *body, struct run_spec *rq, char *err, size_t errlen)
{
	return from_json(body, false, rq, err, errlen);
}

int run_spec_sandbox_from_json(const json_t *body, struct run_spec *rq, char *err, size_t errlen)
{
	return from_json(body, true, rq, err, errlen);
}

static int from_text(const char *text, size_t len, bool sandbox, struct run_spec *rq, char *err, size_t errlen)
{
	memset(rq, 0, sizeof(*rq));
	json_error_t je;
	json_t *body = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!body) {
		char q[JSON_ERROR_TEXT_LENGTH];
		return errf(err, errlen, "malformed JSON at line %d column %d: %s", je.line, je.column,
			    errmsg_printable(q, sizeof(q), je.text));
	}
	int rc = from_json(body, sandbox, rq, err, errlen);
	json_decref(body);
	return rc;
}

int run_spec_from_text(const char *text, size_t len, struct run_spec *rq, char *err, size_t errlen)
{
	return from_text(text, len, false, rq, err, errlen);
}

int run_spec_sandbox_from_text(const char *text, size_t len, struct run_spec *rq, char *err, size_t errlen)
{
	return from_text(text, len, true, rq, err, errlen);
}
