/* envd's Connect messages onto a vmrun sandbox's supervisor API
 * (envd.h). The message shapes are protobuf's JSON mapping of E2B's
 * process.proto and filesystem.proto: lowerCamelCase fields, enums by
 * name, bytes as base64, a oneof as the one field that is set. */
#include "envd.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "hex.h"
#include "proto_sandbox.h"
#include "utf8.h"

/* ---- Connect ------------------------------------------------------------------------ */

static const struct {
	const char *name;
	unsigned status;
} codes[] = {
	[ENVD_OK] = { "ok", 200 },
	[ENVD_CANCELED] = { "canceled", 499 },
	[ENVD_UNKNOWN] = { "unknown", 500 },
	[ENVD_INVALID_ARGUMENT] = { "invalid_argument", 400 },
	[ENVD_DEADLINE_EXCEEDED] = { "deadline_exceeded", 504 },
	[ENVD_NOT_FOUND] = { "not_found", 404 },
	[ENVD_ALREADY_EXISTS] = { "already_exists", 409 },
	[ENVD_PERMISSION_DENIED] = { "permission_denied", 403 },
	[ENVD_RESOURCE_EXHAUSTED] = { "resource_exhausted", 429 },
	[ENVD_FAILED_PRECONDITION] = { "failed_precondition", 400 },
	[ENVD_UNIMPLEMENTED] = { "unimplemented", 501 },
	[ENVD_INTERNAL] = { "internal", 500 },
	[ENVD_UNAVAILABLE] = { "unavailable", 503 },
	[ENVD_UNAUTHENTICATED] = { "unauthenticated", 401 },
};

const char *envd_code_name(enum envd_code c)
{
	return (unsigned)c < sizeof(codes) / sizeof(codes[0]) ? codes[c].name : "unknown";
}

unsigned envd_code_status(enum envd_code c)
{
	return (unsigned)c < sizeof(codes) / sizeof(codes[0]) ? codes[c].status : 500;
}

enum envd_code envd_code_of_status(unsigned status)
{
	switch (status) {
	case 200: case 201: case 202: case 204: return ENVD_OK;
	case 400: case 413: case 414: case 422: return ENVD_INVALID_ARGUMENT;
	case 401: return ENVD_UNAUTHENTICATED;
	case 403: return ENVD_PERMISSION_DENIED;
	case 404: return ENVD_NOT_FOUND;
	case 409: return ENVD_ALREADY_EXISTS;
	case 429: case 507: return ENVD_RESOURCE_EXHAUSTED;
	case 501: return ENVD_UNIMPLEMENTED;
	case 502: case 503: return ENVD_UNAVAILABLE;
	case 504: return ENVD_DEADLINE_EXCEEDED;
	default: return status >= 500 ? ENVD_INTERNAL : ENVD_UNKNOWN;
	}
}

json_t *envd_error(enum envd_code c, const char *message)
{
	return json_pack("{s:s, s:s}", "code", envd_code_name(c), "message", message ? message : "");
}

json_t *envd_end(enum envd_code c, const char *message)
{
	return c == ENVD_OK ? json_object() : json_pack("{s:o}", "error", envd_error(c, message));
}

json_t *envd_unwrap(const char *body, size_t len, char *err, size_t errlen)
{
	if (len < ENVD_FRAME_HEAD) {
		snprintf(err, errlen, "the request is not one Connect envelope (%zu bytes)", len);
		return NULL;
	}
	const unsigned char *p = (const unsigned char *)body;
	uint32_t n = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
	if (p[0] & ENVD_FLAG_COMPRESSED) {
		snprintf(err, errlen, "a compressed message (vmrun's envd takes none: send no Connect-Content-Encoding)");
		return NULL;
	}
	if (p[0] != 0 || n > ENVD_MSG_MAX || n != len - ENVD_FRAME_HEAD) {
		snprintf(err, errlen, "the request is not one Connect envelope of its body's length");
		return NULL;
	}
	json_error_t je;
	json_t *v = json_loadb(body + ENVD_FRAME_HEAD, n, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(v)) {
		snprintf(err, errlen, "the message is not a JSON object%s%s", v ? "" : ": ", v ? "" : je.text);
		json_decref(v);
		return NULL;
	}
	return v;
}

int envd_frame(struct pending *q, uint8_t flags, json_t *msg)
{
	char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	size_t n = text ? strlen(text) : 0;
	if (!text || !pending_room(q, ENVD_FRAME_HEAD + n)) {
		free(text);
		return -1;
	}
	unsigned char h[ENVD_FRAME_HEAD] = { flags, (unsigned char)(n >> 24), (unsigned char)(n >> 16),
					     (unsigned char)(n >> 8), (unsigned char)n };
	pending_put(q, h, sizeof(h));
	pending_put(q, text, n);
	free(text);
	return 0;
}

int envd_out_frame(struct envd_out *o, json_t *msg)
{
	if (o->done) {
		json_decref(msg);
		return 0;
	}
	return envd_frame(&o->q, 0, msg);
}

void envd_out_end(struct envd_out *o, enum envd_code code, const char *message)
{
	if (!o->done)
		envd_frame(&o->q, ENVD_FLAG_END, envd_end(code, message));
	o->done = true;
}

void envd_out_free(struct envd_out *o)
{
	pending_free(&o->q);
	o->done = false;
}

int envd_bytes(const char *text, size_t len, char **out, size_t *n)
{
	/* protobuf's JSON reader takes both alphabets, padded or not */
	unsigned char *d = NULL;
	*out = NULL;
	*n = 0;
	if (base64_decode(text, len, true, ENVD_MSG_MAX, &d, n, NULL) != BASE64_OK)
		return -1;
	*out = d ? (char *)d : strdup("");
	return *out ? 0 : -1;
}

/* ---- process.Process ------------------------------------------------------------------- */

static enum envd_code fail(char *err, size_t errlen, enum envd_code c, const char *fmt, const char *what)
{
	snprintf(err, errlen, fmt, what);
	return c;
}

enum envd_code envd_start_body(const json_t *req, double timeout_s, json_t **native, bool *stdin_open, char *err,
			       size_t errlen)
{
	*native = NULL;
	const char *known[] = { "process", "pty", "tag", "stdin" }, *key;
	json_t *v;
	json_object_foreach((json_t *)req, key, v) {
		bool ok = false;
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			ok |= !strcmp(key, known[i]);
		if (!ok)
			return fail(err, errlen, ENVD_INVALID_ARGUMENT, "unknown field %.64s", key);
	}
	json_t *pty = json_object_get(req, "pty"), *size = json_object_get(pty, "size");
	if (pty && !json_is_null(pty) && !json_is_object(size))
		return fail(err, errlen, ENVD_INVALID_ARGUMENT, "%s: {\"size\": {\"cols\", \"rows\"}}", "pty");
	if (json_object_get(req, "tag") && !json_is_null(json_object_get(req, "tag")))
		return fail(err, errlen, ENVD_UNIMPLEMENTED, "%s: vmrun names a process by its pid alone", "tag");
	json_t *in = json_object_get(req, "stdin");
	if (in && !json_is_boolean(in) && !json_is_null(in))
		return fail(err, errlen, ENVD_INVALID_ARGUMENT, "%s: true or false", "stdin");
	*stdin_open = json_is_true(in) || json_is_object(size);   /* a terminal's input is its stdin */
	json_t *p = json_object_get(req, "process"), *cmd = json_object_get(p, "cmd");
	if (!json_is_object(p) || !json_string_length(cmd))
		return fail(err, errlen, ENVD_INVALID_ARGUMENT, "%s: a process with its cmd", "process");
	json_t *argv = json_array(), *args = json_object_get(p, "args"), *envs = json_object_get(p, "envs"),
	       *cwd = json_object_get(p, "cwd");
	json_array_append(argv, cmd);
	if (args && !json_is_array(args) && !json_is_null(args)) {
		json_decref(argv);
		return fail(err, errlen, ENVD_INVALID_ARGUMENT, "%s: an array of strings", "process.args");
	}
	size_t i;
	json_array_foreach(args, i, v) {
		if (!json_is_string(v)) {
			json_decref(argv);
			return fail(err, errlen, ENVD_INVALID_ARGUMENT, "%s: an array of strings", "process.args");
		}
		json_array_append(argv, v);
	}
	if ((envs && !json_is_object(envs) && !json_is_null(envs)) || (cwd && !json_is_string(cwd) && !json_is_null(cwd))) {
		json_decref(argv);
		return fail(err, errlen, ENVD_INVALID_ARGUMENT, "%s: envs an object of strings, cwd a string", "process");
	}
	*native = json_pack("{s:o, s:b, s:f}", "argv", argv, "background", 1, "timeout_s", timeout_s);
	if (*native && json_object_size(envs))
		json_object_set(*native, "env", envs);
	if (*native && json_string_length(cwd))
		json_object_set(*native, "cwd", cwd);
	if (*native && json_is_object(size)) {
		json_t *n = json_pack("{s:O?, s:O?}", "cols", json_object_get(size, "cols"), "rows", json_object_get(size, "rows"));
		if (!n || json_object_set_new(*native, "pty", n)) {
			json_decref(*native);
			*native = NULL;
		}
	}
	return *native ? ENVD_OK : fail(err, errlen, ENVD_INTERNAL, "%s", "out of memory");
}

enum envd_code envd_pid(const json_t *req, unsigned *pid, char *err, size_t errlen)
{
	json_t *sel = json_object_get(req, "process"), *v = json_object_get(sel, "pid");
	/* protobuf's JSON reads null as a field not set */
	if (json_object_get(sel, "tag") && !json_is_null(json_object_get(sel, "tag")))
		return fail(err, errlen, ENVD_UNIMPLEMENTED, "%s: vmrun names a process by its pid alone", "process.tag");
	json_int_t n = json_is_integer(v) ? json_integer_value(v) : 0;
	if (json_is_string(v)) {
		/* uint32 may come as a string in protobuf's JSON */
		char *end;
		n = (json_int_t)strtoll(json_string_value(v), &end, 10);
		if (*end || end == json_string_value(v))
			n = 0;
	}
	if (n <= 0 || n > UINT32_MAX)
		return fail(err, errlen, ENVD_INVALID_ARGUMENT, "%s: a process's pid", "process.pid");
	*pid = (unsigned)n;
	return ENVD_OK;
}

enum envd_code envd_signal(const json_t *req, int *signo, char *err, size_t errlen)
{
	json_t *v = json_object_get(req, "signal");
	const char *name = json_string_value(v);
	json_int_t n = json_is_integer(v) ? json_integer_value(v) : -1;
	if (name && !strcmp(name, "SIGNAL_SIGKILL"))
		n = SIGKILL;
	else if (name && !strcmp(name, "SIGNAL_SIGTERM"))
		n = SIGTERM;
	if (n != SIGKILL && n != SIGTERM)
		return fail(err, errlen, ENVD_INVALID_ARGUMENT, "%s: SIGNAL_SIGKILL or SIGNAL_SIGTERM", "signal");
	*signo = (int)n;
	return ENVD_OK;
}

enum envd_code envd_input(const json_t *req, char **data, size_t *n, char *err, size_t errlen)
{
	json_t *in = json_object_get(req, "input");
	*data = NULL;
	*n = 0;
	json_t *s = json_object_get(in, "stdin");
	if (!s || json_is_null(s))
		s = json_object_get(in, "pty");   /* a terminal's input goes to its stdin */
	if (!json_is_string(s))
		return fail(err, errlen, ENVD_INVALID_ARGUMENT, "%s: base64 bytes", "input.stdin or input.pty");
	if (envd_bytes(json_string_value(s), json_string_length(s), data, n))
		return fail(err, errlen, ENVD_INVALID_ARGUMENT, "%s: base64 bytes", "input.stdin");
	if (!utf8_valid(*data, *n)) {
		free(*data);
		*data = NULL;
		*n = 0;
		return fail(err, errlen, ENVD_INVALID_ARGUMENT, "%s: text (UTF-8): a sandbox command's stdin takes text",
			    "input.stdin");
	}
	return ENVD_OK;
}

enum envd_code envd_resize_body(const json_t *req, json_t **native, char *err, size_t errlen)
{
	json_t *size = json_object_get(json_object_get(req, "pty"), "size");
	json_int_t cols = json_integer_value(json_object_get(size, "cols")), rows = json_integer_value(json_object_get(size, "rows"));
	*native = NULL;
	if (cols < 1 || rows < 1 || cols > PROTO_PTY_MAX || rows > PROTO_PTY_MAX)
		return fail(err, errlen, ENVD_INVALID_ARGUMENT, "%s: {\"size\": {\"cols\", \"rows\"}}, each 1..4096", "pty");
	*native = json_pack("{s:I, s:I}", "cols", cols, "rows", rows);
	return *native ? ENVD_OK : fail(err, errlen, ENVD_INTERNAL, "%s", "out of memory");
}

/* Go's names for the signals a command may end by, as os.ProcessState
 * says them ("signal: killed"), which E2B's status field carries. */
static const char *signal_word(long sig)
{
	switch (sig) {
	case SIGHUP: return "hangup";
	case SIGINT: return "interrupt";
	case SIGQUIT: return "quit";
	case SIGILL: return "illegal instruction";
	case SIGTRAP: return "trace/breakpoint trap";
	case SIGABRT: return "aborted";
	case SIGBUS: return "bus error";
	case SIGFPE: return "floating point exception";
	case SIGKILL: return "killed";
	case SIGUSR1: return "user defined signal 1";
	case SIGSEGV: return "segmentation fault";
	case SIGUSR2: return "user defined signal 2";
	case SIGPIPE: return "broken pipe";
	case SIGALRM: return "alarm clock";
	case SIGTERM: return "terminated";
	case SIGXCPU: return "CPU time limit exceeded";
	case SIGXFSZ: return "file size limit exceeded";
	default: return NULL;
	}
}

/* The end event of a command whose native exit is x. */
static json_t *end_event(const json_t *x)
{
	const char *how = json_string_value(json_object_get(x, "end"));
	json_int_t code = json_integer_value(json_object_get(x, "exit_code"));
	json_int_t sig = json_integer_value(json_object_get(x, "signal"));
	char status[64];
	json_t *e = json_object();
	if (how && !strcmp(how, "exited")) {
		snprintf(status, sizeof(status), "exit status %lld", (long long)code);
		json_object_set_new(e, "exitCode", json_integer(code));
		json_object_set_new(e, "exited", json_true());
	} else if (how && !strcmp(how, "signaled")) {
		const char *w = signal_word((long)sig);
		if (w)
			snprintf(status, sizeof(status), "signal: %s", w);
		else
			snprintf(status, sizeof(status), "signal: signal %lld", (long long)sig);
		json_object_set_new(e, "exitCode", json_integer(-1));   /* Go's ExitCode() of a signaled process */
		json_object_set_new(e, "exited", json_false());
	} else {
		/* it never ran: the image has no such program, or the manifest does not allow it */
		snprintf(status, sizeof(status), "%s", how && !strcmp(how, "not_found") ? "not found" : "not started");
		json_object_set_new(e, "exitCode", json_integer(-1));
		json_object_set_new(e, "exited", json_false());
		json_object_set_new(e, "error", json_string(how && !strcmp(how, "denied")
							  ? "the program is not on the sandbox image's manifest"
							  : how && !strcmp(how, "not_found") ? "no such program in the sandbox"
											      : "the process could not start"));
	}
	json_object_set_new(e, "status", json_string(status));
	return e;
}

json_t *envd_event(const char *name, const char *data, size_t len, bool pty, bool *end, enum envd_code *code)
{
	*end = false;
	*code = ENVD_OK;
	bool out = !strcmp(name, "stdout"), err = !strcmp(name, "stderr");
	if (!out && !err && strcmp(name, "exit"))
		return NULL;
	json_t *v = json_loadb(data, len, 0, NULL), *msg = NULL;
	if (out || err) {
		json_t *text = json_object_get(v, "text");
		char *b = json_string_length(text) ? base64_encode(json_string_value(text), json_string_length(text), 0, NULL)
						   : NULL;
		if (b)
			msg = json_pack("{s:{s:{s:s}}}", "event", "data", pty ? "pty" : out ? "stdout" : "stderr", b);
		free(b);
	} else if (json_is_object(v)) {
		*end = true;
		if (json_is_true(json_object_get(v, "timed_out")))
			*code = ENVD_DEADLINE_EXCEEDED;
		else
			msg = json_pack("{s:{s:o}}", "event", "end", end_event(v));
	}
	json_decref(v);
	return msg;
}

json_t *envd_process_info(const json_t *cmd)
{
	const char *state = json_string_value(json_object_get(cmd, "state"));
	json_int_t id = json_integer_value(json_object_get(cmd, "id"));
	json_t *rq = json_object_get(cmd, "request"), *argv = json_object_get(rq, "argv");
	if (!state || strcmp(state, "running") || id <= 0 || !json_array_size(argv))
		return NULL;
	json_t *args = json_array();
	for (size_t i = 1; i < json_array_size(argv); i++)
		json_array_append(args, json_array_get(argv, i));
	json_t *env = json_object_get(rq, "env");
	json_t *config = json_pack("{s:O, s:o, s:o}", "cmd", json_array_get(argv, 0), "args", args, "envs",
				   json_is_object(env) ? json_incref(env) : json_object());
	json_t *cwd = json_object_get(rq, "cwd");
	if (config && json_is_string(cwd))
		json_object_set(config, "cwd", cwd);
	return config ? json_pack("{s:o, s:I}", "config", config, "pid", id) : NULL;
}

/* ---- filesystem.Filesystem -------------------------------------------------------------- */

int envd_abs_path(const char *path, char *out, size_t len)
{
	char *joined = malloc(strlen(ENVD_HOME) + strlen(path) + 2);
	if (!joined || len < 2) {
		free(joined);
		return -1;
	}
	sprintf(joined, "%s%s%s", path[0] == '/' ? "" : ENVD_HOME, path[0] == '/' || !path[0] ? "" : "/", path);
	/* cleaned as Go's filepath.Clean, which envd's paths go through:
	 * no empty or "." parts, ".." takes the part before it (none above /) */
	size_t n = 0;
	int rc = 0;
	for (char *save = NULL, *part = strtok_r(joined, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
		if (!strcmp(part, "."))
			continue;
		if (!strcmp(part, "..")) {
			/* out[0..n) is the path so far, "" for /: drop its last part */
			while (n > 0 && out[n - 1] != '/')
				n--;
			if (n > 0)
				n--;
			continue;
		}
		size_t k = strlen(part);
		if (n + 1 + k + 1 > len) {
			rc = -1;
			break;
		}
		out[n] = '/';
		memcpy(out + n + 1, part, k);
		n += 1 + k;
	}
	free(joined);
	if (rc)
		return -1;
	if (!n)
		out[n++] = '/';
	out[n] = '\0';
	return 0;
}

/* ls's permission string of mode ("-rwxr-xr-x"), type letter first. */
static void permissions(const char *type, unsigned mode, char out[11])
{
	out[0] = !strcmp(type, "dir") ? 'd' : !strcmp(type, "symlink") ? 'l' : '-';
	const char *rwx = "rwxrwxrwx";
	for (int i = 0; i < 9; i++)
		out[1 + i] = mode & (0400u >> i) ? rwx[i] : '-';
	out[10] = '\0';
}

json_t *envd_entry(const json_t *native, const char *dir, bool whole)
{
	const char *type = json_string_value(json_object_get(native, "type"));
	const char *name = json_string_value(json_object_get(native, "name"));
	const char *mode_s = json_string_value(json_object_get(native, "mode"));
	const char *ft = !type ? NULL : !strcmp(type, "file") ? "FILE_TYPE_FILE" : !strcmp(type, "dir") ? "FILE_TYPE_DIRECTORY"
		: !strcmp(type, "symlink") ? "FILE_TYPE_SYMLINK" : NULL;
	if (!ft || (!whole && !name))
		return NULL;
	char path[8192], perm[11];
	if (whole) {
		snprintf(path, sizeof(path), "%s", dir);
		const char *slash = strrchr(path, '/');
		name = slash && slash[1] ? slash + 1 : path;
	} else {
		snprintf(path, sizeof(path), "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", name);
	}
	unsigned mode = mode_s ? (unsigned)strtoul(mode_s, NULL, 8) & 07777u : 0;
	permissions(type, mode, perm);
	json_t *e = json_pack("{s:s, s:s, s:s, s:I, s:i, s:s}", "name", name, "type", ft, "path", path, "size",
			      json_integer_value(json_object_get(native, "size")), "mode", (int)mode, "permissions", perm);
	json_t *mtime = json_object_get(native, "mtime");
	if (e && json_is_string(mtime))
		json_object_set(e, "modifiedTime", mtime);
	return e;
}

static int by_string(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether field is the same in a and b (absent in both too: jansson's
 * json_equal says no of two NULLs). */
static bool same(const json_t *a, const json_t *b, const char *field)
{
	const json_t *x = json_object_get(a, field), *y = json_object_get(b, field);
	return (!x && !y) || json_equal(x, y);
}

/* One event of path (under root) of type, with its entry from e when asked. */
static void watch_event(json_t *a, const char *root, const char *path, const char *type, const json_t *e,
			bool entries)
{
	size_t rl = strlen(root);
	const char *name = !strncmp(path, root, rl) && path[rl] == '/' ? path + rl + 1
			   : !strcmp(root, "/") && path[0] == '/' ? path + 1 : path;
	json_t *ev = json_pack("{s:s, s:s}", "name", name, "type", type);
	json_t *info = entries && e ? envd_entry(e, path, true) : NULL;
	if (ev && info)
		json_object_set_new(ev, "entry", info);
	else
		json_decref(info);
	if (ev)
		json_array_append_new(a, ev);
}

json_t *envd_watch_events(const json_t *before, const json_t *after, const char *root, bool entries)
{
	size_t n = json_object_size(before) + json_object_size(after), k = 0;
	const char **paths = n ? calloc(n, sizeof(*paths)) : NULL;
	json_t *a = json_array(), *e;
	const char *path;
	if (!a || (n && !paths)) {
		free(paths);
		json_decref(a);
		return NULL;
	}
	json_object_foreach((json_t *)before, path, e)
		paths[k++] = path;
	json_object_foreach((json_t *)after, path, e)
		if (!json_object_get(before, path))
			paths[k++] = path;
	if (k)
		qsort(paths, k, sizeof(*paths), by_string);
	for (size_t i = 0; i < k; i++) {
		const json_t *was = json_object_get(before, paths[i]), *is = json_object_get(after, paths[i]);
		if (!was) {
			watch_event(a, root, paths[i], "EVENT_TYPE_CREATE", is, entries);
			continue;
		}
		if (!is) {
			watch_event(a, root, paths[i], "EVENT_TYPE_REMOVE", NULL, false);
			continue;
		}
		if (!same(was, is, "size") || !same(was, is, "mtime"))
			watch_event(a, root, paths[i], "EVENT_TYPE_WRITE", is, entries);
		if (!same(was, is, "mode"))
			watch_event(a, root, paths[i], "EVENT_TYPE_CHMOD", is, entries);
	}
	free(paths);
	return a;
}

/* ---- the access token ------------------------------------------------------------------- */

/* What is signed: a purpose, so a token is never some other HMAC of
 * the same key, then the id. */
#define TOKEN_PURPOSE "vmrun envd access token\n"

void envd_token(const unsigned char digest[TENANT_DIGEST_LEN], const char *id, char out[ENVD_TOKEN_LEN + 1])
{
	unsigned char msg[sizeof(TOKEN_PURPOSE) + 64], mac[EVP_MAX_MD_SIZE];
	unsigned mlen = 0;
	size_t n = strlen(id) < 64 ? strlen(id) : 64;
	memcpy(msg, TOKEN_PURPOSE, sizeof(TOKEN_PURPOSE) - 1);
	memcpy(msg + sizeof(TOKEN_PURPOSE) - 1, id, n);
	HMAC(EVP_sha256(), digest, TENANT_DIGEST_LEN, msg, sizeof(TOKEN_PURPOSE) - 1 + n, mac, &mlen);
	hex_of(mac, 32, out);
}

int envd_token_tenant(const struct tenants *ts, const char *id, const char *token)
{
	if (!token || strlen(token) != ENVD_TOKEN_LEN || !id)
		return -1;
	int found = -1;
	for (size_t i = 0; i < ts->nkeys; i++) {
		char t[ENVD_TOKEN_LEN + 1];
		envd_token(ts->keys[i].digest, id, t);
		if (!CRYPTO_memcmp(t, token, ENVD_TOKEN_LEN) && found < 0)
			found = (int)ts->keys[i].tenant;
	}
	return found;
}
