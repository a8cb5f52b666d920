/* libFuzzer harness for envd's API on a vmrun sandbox
 * (host/vmrund/envd.c): a Connect envelope, the process and filesystem
 * requests, paths, base64 bytes and the access token are client input,
 * and a command's events, its listing and a file entry come from the
 * sandbox's supervisor, which the guest feeds. The whole input is tried
 * as an envelope, as base64 and as JSON through every request parser;
 * split at its first NUL or newline, the head is a path, an event's name
 * and a sandbox id, and the rest the data, native entry and token that go
 * with them. Every message made is framed, so that what the SDK would
 * read is always one envelope of its own JSON. Violated invariants
 * abort(). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <limits.h>

#include "base64.h"
#include "envd.h"
#include "utf8.h"

/* msg (taken) framed after what is in the buffer: its header must carry
 * the length of msg's compact JSON and the flags, followed by that JSON. */
static void frame(struct pending *q, uint8_t flags, json_t *msg)
{
	char *want = json_dumps(msg, JSON_COMPACT);
	size_t at = q->len;
	if (envd_frame(q, flags, msg)) {
		free(want);
		if (q->len != at)
			abort();
		return;
	}
	if (!want)
		abort();
	size_t n = strlen(want);
	const unsigned char *h = (const unsigned char *)q->p + at;
	uint32_t hl = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
	if (q->len != at + ENVD_FRAME_HEAD + n || q->cap < q->len || h[0] != flags || hl != n ||
	    memcmp(h + ENVD_FRAME_HEAD, want, n))
		abort();
	free(want);
}

static void check_bytes(const char *text, size_t len)
{
	char *out;
	size_t n;
	if (envd_bytes(text, len, &out, &n)) {
		if (out || n)
			abort();
		return;
	}
	if (!out || n > len * 3 / 4 + 3 || out[n] != '\0')
		abort();
	/* what was read is what base64.c's writer writes back, and reads again the same */
	size_t elen;
	char *enc = base64_encode(out, n, 0, &elen), *again;
	size_t m;
	if (!enc || envd_bytes(enc, elen, &again, &m) || m != n || memcmp(again, out, n))
		abort();
	free(again);
	free(enc);
	free(out);
}

/* path as envd_abs_path reads it, into a buffer of len bytes: out
 * (PATH_MAX bytes) holds it when it fits. */
static int check_path(const char *path, size_t len, char *out)
{
	if (envd_abs_path(path, out, len))
		return -1;
	size_t n = strlen(out);
	if (out[0] != '/' || n >= len || (n > 1 && out[n - 1] == '/'))
		abort();
	/* clean, as Go's filepath.Clean: no empty, "." or ".." part, and
	 * cleaning it again changes nothing */
	if (strstr(out, "//") || strstr(out, "/./") || strstr(out, "/../") || (n >= 2 && !strcmp(out + n - 2, "/.")) ||
	    (n >= 3 && !strcmp(out + n - 3, "/..")))
		abort();
	char *again = malloc(n + 1);
	if (again && (envd_abs_path(out, again, n + 1) || strcmp(again, out)))
		abort();
	free(again);
	return 0;
}

static void check_requests(const json_t *req, struct pending *q)
{
	char err[300];
	json_t *native;
	bool open = false;
	enum envd_code c = envd_start_body(req, ENVD_NO_TIMEOUT_S, &native, &open, err, sizeof(err));
	if (c == ENVD_OK) {
		json_t *argv = json_object_get(native, "argv");
		if (!json_is_object(native) || !json_array_size(argv) || !json_string_length(json_array_get(argv, 0)) ||
		    !json_is_true(json_object_get(native, "background")))
			abort();
		size_t i;
		json_t *a;
		json_array_foreach(argv, i, a)
			if (!json_is_string(a))
				abort();
		frame(q, 0, native);
	} else if (native || !err[0] ||
		   (c != ENVD_INVALID_ARGUMENT && c != ENVD_UNIMPLEMENTED && c != ENVD_INTERNAL)) {
		abort();
	}

	unsigned pid = 0;
	err[0] = '\0';
	c = envd_pid(req, &pid, err, sizeof(err));
	if ((c == ENVD_OK && pid == 0) || (c != ENVD_OK && !err[0]))
		abort();

	int signo = 0;
	err[0] = '\0';
	c = envd_signal(req, &signo, err, sizeof(err));
	if ((c == ENVD_OK && signo != 9 && signo != 15) || (c != ENVD_OK && !err[0]))
		abort();

	char *data = (char *)"unset";
	size_t n = 99;
	err[0] = '\0';
	c = envd_input(req, &data, &n, err, sizeof(err));
	if (c == ENVD_OK) {
		if (!data || data[n] != '\0' || !utf8_valid(data, n))
			abort();
		free(data);
	} else if (data || !err[0]) {
		abort();
	}

	json_t *info = envd_process_info(req);
	if (info) {
		json_t *config = json_object_get(info, "config");
		if (!json_is_object(config) || !json_object_get(config, "cmd") ||
		    !json_is_array(json_object_get(config, "args")) || !json_is_object(json_object_get(config, "envs")) ||
		    json_integer_value(json_object_get(info, "pid")) <= 0)
			abort();
		frame(q, 0, info);
	}
}

/* native as an entry under dir, a listing's and a stat's. */
static void check_entry(const json_t *native, const char *dir, struct pending *q)
{
	for (int whole = 0; whole < 2; whole++) {
		json_t *e = envd_entry(native, dir, whole);
		if (!e)
			continue;
		const char *type = json_string_value(json_object_get(e, "type")),
			   *perm = json_string_value(json_object_get(e, "permissions")),
			   *path = json_string_value(json_object_get(e, "path"));
		if (!type || (strcmp(type, "FILE_TYPE_FILE") && strcmp(type, "FILE_TYPE_DIRECTORY") &&
			      strcmp(type, "FILE_TYPE_SYMLINK")))
			abort();
		if (!perm || strlen(perm) != 10 || !path || !json_string_value(json_object_get(e, "name")))
			abort();
		if (dir[0] == '/' && path[0] != '/')
			abort();
		json_int_t mode = json_integer_value(json_object_get(e, "mode"));
		if (mode < 0 || mode > 07777)
			abort();
		frame(q, 0, e);
	}
}

static void check_event(const char *name, const char *data, size_t size, struct pending *q)
{
	bool end = true;
	enum envd_code code = ENVD_UNAVAILABLE;
	json_t *m = envd_event(name, data, size, size % 2, &end, &code);
	if (m) {
		json_t *ev = json_object_get(m, "event");
		if (!json_is_object(m) || !json_is_object(ev) || json_object_size(ev) != 1 || code != ENVD_OK)
			abort();
		/* a data event never ends the stream, an end event always does */
		if (end != (json_object_get(ev, "end") != NULL))
			abort();
		frame(q, 0, m);
	} else if (end ? code != ENVD_DEADLINE_EXCEEDED : code != ENVD_OK) {
		abort();
	}
	if (end && strcmp(name, "exit"))
		abort();
	if (end)
		frame(q, ENVD_FLAG_END, envd_end(code, "fuzz"));
}

/* Two tenants' keys, by digests no key could have: the token checks
 * only ever see digests. */
static void check_token(const char *id, const char *token)
{
	struct tenant_key keys[2];
	memset(keys[0].digest, 0xa5, sizeof(keys[0].digest));
	memset(keys[1].digest, 0x5a, sizeof(keys[1].digest));
	keys[0].tenant = 0;
	keys[1].tenant = 1;
	struct tenants ts = { .keys = keys, .nkeys = 2 };
	int t = envd_token_tenant(&ts, id, token);
	if (t < -1 || t > 1)
		abort();
	char mine[ENVD_TOKEN_LEN + 1];
	for (unsigned k = 0; k < 2; k++) {
		envd_token(keys[k].digest, id, mine);
		if (strlen(mine) != ENVD_TOKEN_LEN || strspn(mine, "0123456789abcdef") != ENVD_TOKEN_LEN ||
		    envd_token_tenant(&ts, id, mine) != (int)k)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	char err[300];
	struct pending q = { 0 };

	/* a stream's request body */
	err[0] = '\0';
	json_t *v = envd_unwrap(in, size, err, sizeof(err));
	if (v) {
		if (!json_is_object(v) || size < ENVD_FRAME_HEAD || data[0] ||
		    ((size_t)data[1] << 24 | (size_t)data[2] << 16 | (size_t)data[3] << 8 | data[4]) != size - ENVD_FRAME_HEAD ||
		    size - ENVD_FRAME_HEAD > ENVD_MSG_MAX)
			abort();
		check_requests(v, &q);
		frame(&q, 0, v);
	} else if (!err[0]) {
		abort();
	}

	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	size_t k = strcspn(text, "\n");   /* stops at the first NUL too */
	char *head = strndup(text, k);
	if (!head) {
		free(text);
		return 0;
	}
	const char *rest = k < size ? text + k + 1 : text + size;
	size_t rlen = k < size ? size - k - 1 : 0;

	check_bytes(in, size);
	check_bytes(head, k);

	/* the whole input as a unary call's request, and as the supervisor's
	 * command and entry */
	json_t *whole = json_loadb(in, size, 0, NULL);
	if (whole) {
		check_requests(whole, &q);
		check_entry(whole, ENVD_HOME, &q);
		check_entry(whole, "/", &q);
		/* the input as a listing, against none and against itself */
		json_t *none = json_object(), *ev = json_is_object(whole) ? envd_watch_events(none, whole, "/", true) : NULL;
		if (ev && json_array_size(ev) > json_object_size(whole))
			abort();
		json_decref(ev);
		if (json_is_object(whole) && (ev = envd_watch_events(whole, whole, "/w", true)) && json_array_size(ev))
			abort();
		json_decref(ev);
		json_decref(none);
		json_decref(whole);
	}
	const char *names[] = { "stdout", "stderr", "exit", "x" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		check_event(names[i], in, size, &q);
	check_event(head, rest, rlen, &q);

	/* the head as a path, in room to spare and in a buffer its first byte
	 * sizes; the rest as an entry under it */
	char *abs = malloc(PATH_MAX);
	if (abs) {
		check_path(head, 1 + (size ? data[0] % 48 : 0), abs);
		if (!check_path(head, PATH_MAX, abs)) {
			json_t *native = json_loadb(rest, rlen, 0, NULL);
			if (native)
				check_entry(native, abs, &q);
			json_decref(native);
		}
		free(abs);
	}

	check_token(head, rest);
	check_token(head, text);

	pending_free(&q);
	free(head);
	free(text);
	return 0;
}
