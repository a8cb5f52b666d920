/* envd's API on a vmrun sandbox (host/vmrund/envd.c): Connect's codes,
 * error bodies and envelopes; protobuf JSON's bytes; StartRequest,
 * the pid, signal and input requests and ProcessEvent and ProcessInfo
 * as the e2b SDK sends and reads them; EntryInfo and the paths it
 * names; and the access token that opens one sandbox for one tenant.
 * The exact values matter: the SDK reads them, so a drift here is a
 * client that breaks, not a cosmetic difference. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "envd.h"

static char err[400];

static json_t *parse(const char *text)
{
	json_error_t je;
	json_t *v = json_loads(text, 0, &je);
	if (!v)
		fail_msg("test JSON %s: %s", text, je.text);
	return v;
}

/* got (not taken) equals the JSON text want. */
static void assert_json(const json_t *got, const char *want)
{
	json_t *w = parse(want);
	if (!json_equal(got, w)) {
		char *g = got ? json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
		fail_msg("got %s, wanted %s", g ? g : "NULL", want);
	}
	json_decref(w);
}

/* ---- Connect ------------------------------------------------------------------------ */

static void codes(void **state)
{
	(void)state;
	assert_string_equal(envd_code_name(ENVD_OK), "ok");
	assert_string_equal(envd_code_name(ENVD_NOT_FOUND), "not_found");
	assert_string_equal(envd_code_name(ENVD_DEADLINE_EXCEEDED), "deadline_exceeded");
	assert_string_equal(envd_code_name(ENVD_INVALID_ARGUMENT), "invalid_argument");
	assert_string_equal(envd_code_name(ENVD_UNAUTHENTICATED), "unauthenticated");
	/* a code past the table is still a name on the wire, never a crash */
	assert_string_equal(envd_code_name((enum envd_code)99), "unknown");
	assert_int_equal(envd_code_status(ENVD_OK), 200);
	assert_int_equal(envd_code_status(ENVD_NOT_FOUND), 404);
	assert_int_equal(envd_code_status(ENVD_INVALID_ARGUMENT), 400);
	assert_int_equal(envd_code_status(ENVD_UNIMPLEMENTED), 501);
	assert_int_equal(envd_code_status(ENVD_UNAVAILABLE), 503);
	assert_int_equal(envd_code_status(ENVD_DEADLINE_EXCEEDED), 504);
	assert_int_equal(envd_code_status(ENVD_UNAUTHENTICATED), 401);
	assert_int_equal(envd_code_status((enum envd_code)99), 500);
	assert_int_equal(envd_code_of_status(200), ENVD_OK);
	assert_int_equal(envd_code_of_status(204), ENVD_OK);
	assert_int_equal(envd_code_of_status(400), ENVD_INVALID_ARGUMENT);
	assert_int_equal(envd_code_of_status(401), ENVD_UNAUTHENTICATED);
	assert_int_equal(envd_code_of_status(403), ENVD_PERMISSION_DENIED);
	assert_int_equal(envd_code_of_status(404), ENVD_NOT_FOUND);
	assert_int_equal(envd_code_of_status(409), ENVD_ALREADY_EXISTS);
	assert_int_equal(envd_code_of_status(429), ENVD_RESOURCE_EXHAUSTED);
	assert_int_equal(envd_code_of_status(507), ENVD_RESOURCE_EXHAUSTED);
	assert_int_equal(envd_code_of_status(502), ENVD_UNAVAILABLE);
	assert_int_equal(envd_code_of_status(503), ENVD_UNAVAILABLE);
	assert_int_equal(envd_code_of_status(504), ENVD_DEADLINE_EXCEEDED);
	assert_int_equal(envd_code_of_status(500), ENVD_INTERNAL);
	assert_int_equal(envd_code_of_status(418), ENVD_UNKNOWN);
}

static void errors(void **state)
{
	(void)state;
	json_t *e = envd_error(ENVD_NOT_FOUND, "process 7 not found");
	assert_json(e, "{\"code\":\"not_found\",\"message\":\"process 7 not found\"}");
	json_decref(e);
	e = envd_error(ENVD_INTERNAL, NULL);
	assert_json(e, "{\"code\":\"internal\",\"message\":\"\"}");
	json_decref(e);
	e = envd_end(ENVD_OK, "ignored");
	assert_json(e, "{}");
	json_decref(e);
	e = envd_end(ENVD_DEADLINE_EXCEEDED, "the command ran past its timeout");
	assert_json(e, "{\"error\":{\"code\":\"deadline_exceeded\",\"message\":\"the command ran past its timeout\"}}");
	json_decref(e);
}

/* An envelope of flags, the length field len_field and the n bytes of
 * msg, malloc'd into *body (5 + n bytes). */
static size_t envelope(uint8_t flags, uint32_t len_field, const char *msg, size_t n, char **body)
{
	unsigned char *b = malloc(ENVD_FRAME_HEAD + n + 1);
	assert_non_null(b);
	b[0] = flags;
	b[1] = (unsigned char)(len_field >> 24);
	b[2] = (unsigned char)(len_field >> 16);
	b[3] = (unsigned char)(len_field >> 8);
	b[4] = (unsigned char)len_field;
	memcpy(b + ENVD_FRAME_HEAD, msg, n);
	*body = (char *)b;
	return ENVD_FRAME_HEAD + n;
}

/* body refused by envd_unwrap with a reason that says why. */
static void unwrap_refused(const char *body, size_t len, const char *why)
{
	err[0] = '\0';
	json_t *v = envd_unwrap(body, len, err, sizeof(err));
	if (v || !strstr(err, why))
		fail_msg("%zu bytes: %s \"%s\", wanted refused with \"%s\"", len, v ? "accepted" : "refused", err, why);
}

static void unwrap(void **state)
{
	(void)state;
	char *b;
	const char *msg = "{\"process\":{\"pid\":7}}";
	size_t len = envelope(0, (uint32_t)strlen(msg), msg, strlen(msg), &b);
	json_t *v = envd_unwrap(b, len, err, sizeof(err));
	assert_json(v, msg);
	json_decref(v);
	/* the end flag is the server's; compression was never offered */
	b[0] = ENVD_FLAG_COMPRESSED;
	unwrap_refused(b, len, "compressed");
	b[0] = ENVD_FLAG_END;
	unwrap_refused(b, len, "not one Connect envelope");
	b[0] = 0;
	/* a length that is not the body's, either way: a second message, or a cut one */
	unwrap_refused(b, len - 1, "not one Connect envelope");
	char *two = malloc(2 * len);
	assert_non_null(two);
	memcpy(two, b, len);
	memcpy(two + len, b, len);
	unwrap_refused(two, 2 * len, "not one Connect envelope");
	free(two);
	for (size_t n = 0; n < ENVD_FRAME_HEAD; n++)
		unwrap_refused(b, n, "not one Connect envelope");
	free(b);
	len = envelope(0, 2, "[]", 2, &b);
	unwrap_refused(b, len, "not a JSON object");
	free(b);
	len = envelope(0, 3, "{x}", 3, &b);
	unwrap_refused(b, len, "not a JSON object: ");
	free(b);
	len = envelope(0, 0, "", 0, &b);
	unwrap_refused(b, len, "not a JSON object");
	free(b);
	/* a duplicate key is two answers to one question */
	len = envelope(0, 15, "{\"a\":1,\"a\":2}  ", 15, &b);
	unwrap_refused(b, len, "not a JSON object");
	free(b);
	/* ENVD_MSG_MAX bytes exactly is taken, one more is not */
	char *big = malloc(ENVD_MSG_MAX + 1);
	assert_non_null(big);
	memset(big, 'x', ENVD_MSG_MAX + 1);
	memcpy(big, "{\"a\":\"", 6);
	memcpy(big + ENVD_MSG_MAX - 2, "\"}", 2);
	len = envelope(0, ENVD_MSG_MAX, big, ENVD_MSG_MAX, &b);
	v = envd_unwrap(b, len, err, sizeof(err));
	assert_non_null(v);
	assert_int_equal(json_string_length(json_object_get(v, "a")), ENVD_MSG_MAX - 8);
	json_decref(v);
	free(b);
	big[ENVD_MSG_MAX - 2] = 'x';
	memcpy(big + ENVD_MSG_MAX - 1, "\"}", 2);
	len = envelope(0, ENVD_MSG_MAX + 1, big, ENVD_MSG_MAX + 1, &b);
	unwrap_refused(b, len, "not one Connect envelope");
	free(b);
	free(big);
}

static void frames(void **state)
{
	(void)state;
	struct pending q = { 0 };
	assert_int_equal(envd_frame(&q, 0, parse("{\"a\":1}")), 0);
	assert_int_equal(envd_frame(&q, ENVD_FLAG_END, envd_end(ENVD_OK, NULL)), 0);
	static const unsigned char want[] = { 0, 0, 0, 0, 7, '{', '"', 'a', '"', ':', '1', '}',
					      ENVD_FLAG_END, 0, 0, 0, 2, '{', '}' };
	assert_int_equal(q.len, sizeof(want));
	assert_true(q.cap >= q.len);
	assert_memory_equal(q.p, want, sizeof(want));
	/* nothing to write (out of memory making it): -1, the buffer as it was */
	char *was = q.p;
	assert_int_equal(envd_frame(&q, 0, NULL), -1);
	assert_ptr_equal(q.p, was);
	assert_int_equal(q.len, sizeof(want));
	/* a frame past the first allocation grows the buffer and keeps what was there */
	json_t *s = json_object();
	char *text = malloc(10000);
	assert_non_null(text);
	memset(text, 'y', 9999);
	text[9999] = '\0';
	json_object_set_new(s, "t", json_string(text));
	free(text);
	assert_int_equal(envd_frame(&q, 0x80, s), 0);
	assert_int_equal(q.len, sizeof(want) + ENVD_FRAME_HEAD + 10007);
	assert_memory_equal(q.p, want, sizeof(want));
	const unsigned char *h = (const unsigned char *)q.p + sizeof(want);
	assert_int_equal(h[0], 0x80);
	assert_int_equal((uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4], 10007);
	assert_memory_equal(h + ENVD_FRAME_HEAD, "{\"t\":\"yyy", 9);
	pending_free(&q);
}

/* text (NUL-terminated) decodes to the n bytes want. */
static void bytes_ok(const char *text, const char *want, size_t n)
{
	char *out = (char *)"sentinel";
	size_t got = 99;
	if (envd_bytes(text, strlen(text), &out, &got))
		fail_msg("\"%s\" refused", text);
	assert_non_null(out);
	assert_int_equal(got, n);
	assert_memory_equal(out, want, n);
	assert_int_equal(out[n], '\0');
	free(out);
}

static void bytes(void **state)
{
	(void)state;
	bytes_ok("aGkK", "hi\n", 3);
	bytes_ok("aGk=", "hi", 2);
	bytes_ok("aGk", "hi", 2);
	bytes_ok("aA==", "h", 1);
	bytes_ok("aA", "h", 1);
	bytes_ok("", "", 0);
	bytes_ok("aGVsbG8gd29ybGQ=", "hello world", 11);
	/* both alphabets: 0xfb 0xff 0xbf is "+/+/" in one, "-_-_" in the other */
	bytes_ok("+/+/", "\xfb\xff\xbf", 3);
	bytes_ok("-_-_", "\xfb\xff\xbf", 3);
	bytes_ok("+_-/", "\xfb\xff\xbf", 3);
	/* binary, NULs included: the length is *n, not strlen */
	bytes_ok("AAEA", "\0\1\0", 3);
	bytes_ok("AP8AAA==", "\0\xff\0\0", 4);
	const char *bad[] = { "aG!K", "aG K", "aGk\n", "a=Gk", "aGk=K", "A", "A===", "AAAAA", "aGkKa", "\xc3\xa9" "AA" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *out = (char *)"sentinel";
		size_t n = 99;
		if (envd_bytes(bad[i], strlen(bad[i]), &out, &n) != -1)
			fail_msg("\"%s\" taken as base64", bad[i]);
		assert_null(out);
		assert_int_equal(n, 0);
	}
	/* a NUL inside the text is no base64 character: len, not strlen, counts */
	char *out;
	size_t n;
	assert_int_equal(envd_bytes("aG\0K", 4, &out, &n), -1);
}

/* ---- process.Process ------------------------------------------------------------------- */

/* req through envd_start_body with timeout t: its code; *native and
 * *stdin_open as it left them. */
static enum envd_code start(const char *req, double t, json_t **native, bool *stdin_open)
{
	json_t *r = parse(req);
	err[0] = '\0';
	enum envd_code c = envd_start_body(r, t, native, stdin_open, err, sizeof(err));
	json_decref(r);
	assert_true(c ? *native == NULL && err[0] : *native != NULL);
	return c;
}

static void start_body(void **state)
{
	(void)state;
	json_t *n;
	bool open = true;
	/* the SDK's commands.run("echo hi", envs=..., cwd=...) */
	assert_int_equal(start("{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"echo hi\"],"
			       "\"envs\":{\"A\":\"1\"},\"cwd\":\"/workspace\"},\"stdin\":false}",
			       30, &n, &open),
			 ENVD_OK);
	assert_json(n, "{\"argv\":[\"/bin/bash\",\"-l\",\"-c\",\"echo hi\"],\"background\":true,\"timeout_s\":30.0,"
		       "\"env\":{\"A\":\"1\"},\"cwd\":\"/workspace\"}");
	assert_false(open);
	json_decref(n);
	open = false;
	assert_int_equal(start("{\"process\":{\"cmd\":\"cat\"},\"stdin\":true}", ENVD_NO_TIMEOUT_S, &n, &open), ENVD_OK);
	assert_json(n, "{\"argv\":[\"cat\"],\"background\":true,\"timeout_s\":86400.0}");
	assert_true(open);
	json_decref(n);
	/* stdin absent is closed, as the SDK means it; empty envs and cwd, null
	 * args and a null pty or tag are not there at all */
	open = true;
	assert_int_equal(start("{\"process\":{\"cmd\":\"ls\",\"args\":null,\"envs\":{},\"cwd\":\"\"},\"pty\":null,"
			       "\"tag\":null}",
			       1.5, &n, &open),
			 ENVD_OK);
	assert_json(n, "{\"argv\":[\"ls\"],\"background\":true,\"timeout_s\":1.5}");
	assert_false(open);
	json_decref(n);
	/* a terminal: its size as the native pty, and its input always open */
	open = false;
	assert_int_equal(start("{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-i\",\"-l\"]},"
			       "\"pty\":{\"size\":{\"cols\":80,\"rows\":24}}}", 60, &n, &open),
			 ENVD_OK);
	assert_json(n, "{\"argv\":[\"/bin/bash\",\"-i\",\"-l\"],\"background\":true,\"timeout_s\":60.0,"
		       "\"pty\":{\"cols\":80,\"rows\":24}}");
	assert_true(open);
	json_decref(n);
	const struct { const char *req; enum envd_code code; const char *why; } bad[] = {
		{ "{\"process\":{\"cmd\":\"sh\"},\"pty\":{\"cols\":80}}", ENVD_INVALID_ARGUMENT, "pty: {\"size\"" },
		{ "{\"process\":{\"cmd\":\"sh\"},\"tag\":\"t1\"}", ENVD_UNIMPLEMENTED, "tag: vmrun names a process" },
		{ "{\"process\":{\"cmd\":\"sh\"},\"cols\":80}", ENVD_INVALID_ARGUMENT, "unknown field cols" },
		{ "{\"process\":{\"args\":[\"-c\"]}}", ENVD_INVALID_ARGUMENT, "process: a process with its cmd" },
		{ "{\"process\":{\"cmd\":\"\"}}", ENVD_INVALID_ARGUMENT, "process: a process with its cmd" },
		{ "{\"process\":{\"cmd\":7}}", ENVD_INVALID_ARGUMENT, "process: a process with its cmd" },
		{ "{\"process\":\"sh\"}", ENVD_INVALID_ARGUMENT, "process: a process with its cmd" },
		{ "{}", ENVD_INVALID_ARGUMENT, "process: a process with its cmd" },
		{ "{\"process\":{\"cmd\":\"sh\",\"args\":[\"-c\",1]}}", ENVD_INVALID_ARGUMENT, "process.args: an array" },
		{ "{\"process\":{\"cmd\":\"sh\",\"args\":\"-c\"}}", ENVD_INVALID_ARGUMENT, "process.args: an array" },
		{ "{\"process\":{\"cmd\":\"sh\",\"envs\":[]}}", ENVD_INVALID_ARGUMENT, "process: envs an object" },
		{ "{\"process\":{\"cmd\":\"sh\",\"cwd\":1}}", ENVD_INVALID_ARGUMENT, "process: envs an object" },
		{ "{\"process\":{\"cmd\":\"sh\"},\"stdin\":\"yes\"}", ENVD_INVALID_ARGUMENT, "stdin: true or false" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		enum envd_code c = start(bad[i].req, 30, &n, &open);
		if (c != bad[i].code || !strstr(err, bad[i].why))
			fail_msg("%s: %s \"%s\", wanted %s \"%s\"", bad[i].req, envd_code_name(c), err,
				 envd_code_name(bad[i].code), bad[i].why);
	}
}

static enum envd_code pid_of(const char *req, unsigned *pid)
{
	json_t *r = parse(req);
	err[0] = '\0';
	enum envd_code c = envd_pid(r, pid, err, sizeof(err));
	json_decref(r);
	return c;
}

static void pids(void **state)
{
	(void)state;
	unsigned pid = 0;
	assert_int_equal(pid_of("{\"process\":{\"pid\":7}}", &pid), ENVD_OK);
	assert_int_equal(pid, 7);
	/* uint32 may come as a string in protobuf's JSON */
	pid = 0;
	assert_int_equal(pid_of("{\"process\":{\"pid\":\"7\"}}", &pid), ENVD_OK);
	assert_int_equal(pid, 7);
	assert_int_equal(pid_of("{\"process\":{\"pid\":4294967295}}", &pid), ENVD_OK);
	assert_int_equal(pid, 4294967295u);
	const char *bad[] = { "{\"process\":{\"pid\":0}}",   "{\"process\":{\"pid\":-1}}",
			      "{\"process\":{}}",            "{}",
			      "{\"process\":{\"pid\":\"\"}}", "{\"process\":{\"pid\":\"7x\"}}",
			      "{\"process\":{\"pid\":\"-7\"}}", "{\"process\":{\"pid\":4294967296}}",
			      "{\"process\":{\"pid\":true}}", "{\"process\":7}" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pid = 12345;
		enum envd_code c = pid_of(bad[i], &pid);
		if (c != ENVD_INVALID_ARGUMENT || !strstr(err, "process.pid") || pid != 12345)
			fail_msg("%s: %s \"%s\" pid %u", bad[i], envd_code_name(c), err, pid);
	}
	assert_int_equal(pid_of("{\"process\":{\"tag\":\"t1\"}}", &pid), ENVD_UNIMPLEMENTED);
	assert_non_null(strstr(err, "process.tag"));
}

static enum envd_code signal_of(const char *req, int *signo)
{
	json_t *r = parse(req);
	err[0] = '\0';
	enum envd_code c = envd_signal(r, signo, err, sizeof(err));
	json_decref(r);
	return c;
}

static void signals(void **state)
{
	(void)state;
	int s = 0;
	assert_int_equal(signal_of("{\"process\":{\"pid\":1},\"signal\":\"SIGNAL_SIGKILL\"}", &s), ENVD_OK);
	assert_int_equal(s, 9);
	assert_int_equal(signal_of("{\"process\":{\"pid\":1},\"signal\":\"SIGNAL_SIGTERM\"}", &s), ENVD_OK);
	assert_int_equal(s, 15);
	/* an enum by its number, as protobuf's JSON allows */
	s = 0;
	assert_int_equal(signal_of("{\"signal\":9}", &s), ENVD_OK);
	assert_int_equal(s, 9);
	assert_int_equal(signal_of("{\"signal\":15}", &s), ENVD_OK);
	assert_int_equal(s, 15);
	const char *bad[] = { "{\"signal\":\"SIGNAL_UNSPECIFIED\"}", "{\"signal\":2}", "{\"signal\":0}", "{}",
			      "{\"signal\":\"SIGKILL\"}", "{\"signal\":\"9\"}", "{\"signal\":9.5}", "{\"signal\":null}" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s = 12345;
		enum envd_code c = signal_of(bad[i], &s);
		if (c != ENVD_INVALID_ARGUMENT || !strstr(err, "signal: SIGNAL_SIGKILL or SIGNAL_SIGTERM") || s != 12345)
			fail_msg("%s: %s \"%s\" signal %d", bad[i], envd_code_name(c), err, s);
	}
}

static enum envd_code input_of(const char *req, char **data, size_t *n)
{
	json_t *r = parse(req);
	err[0] = '\0';
	enum envd_code c = envd_input(r, data, n, err, sizeof(err));
	json_decref(r);
	if (c)
		assert_null(*data);
	return c;
}

static void inputs(void **state)
{
	(void)state;
	char *d;
	size_t n;
	assert_int_equal(input_of("{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"aGkK\"}}", &d, &n), ENVD_OK);
	assert_int_equal(n, 3);
	assert_memory_equal(d, "hi\n", 3);
	free(d);
	/* UTF-8 beyond ASCII is text too */
	assert_int_equal(input_of("{\"input\":{\"stdin\":\"w6k=\"}}", &d, &n), ENVD_OK);
	assert_int_equal(n, 2);
	assert_memory_equal(d, "\xc3\xa9", 2);
	free(d);
	assert_int_equal(input_of("{\"input\":{\"stdin\":\"\"}}", &d, &n), ENVD_OK);
	assert_int_equal(n, 0);
	free(d);
	/* a terminal's input is its command's stdin */
	assert_int_equal(input_of("{\"process\":{\"pid\":1},\"input\":{\"pty\":\"aGkK\"}}", &d, &n), ENVD_OK);
	assert_int_equal(n, 3);
	assert_memory_equal(d, "hi\n", 3);
	free(d);
	/* 0xff is no UTF-8 byte: the supervisor's stdin takes text */
	assert_int_equal(input_of("{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"/w==\"}}", &d, &n),
			 ENVD_INVALID_ARGUMENT);
	assert_non_null(strstr(err, "input.stdin: text (UTF-8)"));
	const char *bad[] = { "{\"input\":{\"stdin\":\"a!b=\"}}", "{\"input\":{\"stdin\":\"A\"}}", "{\"input\":{\"stdin\":7}}",
			      "{\"input\":{}}", "{}" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		enum envd_code c = input_of(bad[i], &d, &n);
		if (c != ENVD_INVALID_ARGUMENT || !strstr(err, "base64 bytes"))
			fail_msg("%s: %s \"%s\"", bad[i], envd_code_name(c), err);
	}
}

/* The supervisor's event name, data through envd_event: the message
 * (the caller's), *end and *code. Both start as the answer that would
 * be wrong for most events of that name, so that one envd_event left
 * unset shows. */
static json_t *event(const char *name, const char *data, bool *end, enum envd_code *code)
{
	*end = strcmp(name, "exit") != 0;
	*code = ENVD_UNAVAILABLE;
	return envd_event(name, data, strlen(data), false, end, code);
}

static void events(void **state)
{
	(void)state;
	bool end;
	enum envd_code code;
	json_t *m = event("stdout", "{\"stage\":\"run\",\"text\":\"hi\\n\"}", &end, &code);
	assert_json(m, "{\"event\":{\"data\":{\"stdout\":\"aGkK\"}}}");
	assert_false(end);
	assert_int_equal(code, ENVD_OK);
	json_decref(m);
	/* a terminal's command: its stdout is pty data */
	const char *hi = "{\"stage\":\"run\",\"text\":\"hi\\n\"}";
	m = envd_event("stdout", hi, strlen(hi), true, &end, &code);
	assert_json(m, "{\"event\":{\"data\":{\"pty\":\"aGkK\"}}}");
	json_decref(m);
	m = event("stderr", "{\"stage\":\"run\",\"text\":\"oops\"}", &end, &code);
	assert_json(m, "{\"event\":{\"data\":{\"stderr\":\"b29wcw==\"}}}");
	assert_false(end);
	json_decref(m);
	/* no text, no message: a data event carries bytes or nothing */
	assert_null(event("stdout", "{\"stage\":\"run\",\"text\":\"\"}", &end, &code));
	assert_false(end);
	m = event("exit", "{\"end\":\"exited\",\"exit_code\":3,\"signal\":null,\"timed_out\":false}", &end, &code);
	assert_json(m, "{\"event\":{\"end\":{\"exitCode\":3,\"exited\":true,\"status\":\"exit status 3\"}}}");
	assert_true(end);
	assert_int_equal(code, ENVD_OK);
	json_decref(m);
	m = event("exit", "{\"end\":\"exited\",\"exit_code\":0,\"signal\":null,\"timed_out\":false}", &end, &code);
	assert_json(m, "{\"event\":{\"end\":{\"exitCode\":0,\"exited\":true,\"status\":\"exit status 0\"}}}");
	json_decref(m);
	/* Go's ProcessState: a signaled process has ExitCode() -1 */
	m = event("exit", "{\"end\":\"signaled\",\"exit_code\":null,\"signal\":9,\"timed_out\":false}", &end, &code);
	assert_json(m, "{\"event\":{\"end\":{\"exitCode\":-1,\"exited\":false,\"status\":\"signal: killed\"}}}");
	assert_true(end);
	assert_int_equal(code, ENVD_OK);
	json_decref(m);
	m = event("exit", "{\"end\":\"signaled\",\"signal\":15}", &end, &code);
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(m, "event"), "end"), "status")),
			    "signal: terminated");
	json_decref(m);
	m = event("exit", "{\"end\":\"signaled\",\"signal\":40}", &end, &code);
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(m, "event"), "end"), "status")),
			    "signal: signal 40");
	json_decref(m);
	/* past its timeout: no end event, the stream ends with deadline_exceeded as E2B's does */
	m = event("exit", "{\"end\":\"signaled\",\"exit_code\":null,\"signal\":9,\"timed_out\":true}", &end, &code);
	assert_null(m);
	assert_true(end);
	assert_int_equal(code, ENVD_DEADLINE_EXCEEDED);
	/* it never ran: an end event with the reason */
	m = event("exit", "{\"end\":\"not_found\",\"exit_code\":null,\"signal\":null,\"timed_out\":false}", &end, &code);
	assert_json(m, "{\"event\":{\"end\":{\"exitCode\":-1,\"exited\":false,\"status\":\"not found\","
		       "\"error\":\"no such program in the sandbox\"}}}");
	assert_true(end);
	assert_int_equal(code, ENVD_OK);
	json_decref(m);
	m = event("exit", "{\"end\":\"denied\"}", &end, &code);
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(m, "event"), "end"), "error")),
			    "the program is not on the sandbox image's manifest");
	json_decref(m);
	/* events with no message of their own */
	const char *names[] = { "start", "ping", "", "stdoutx" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		assert_null(event(names[i], "{\"text\":\"hi\"}", &end, &code));
		assert_false(end);
		assert_int_equal(code, ENVD_OK);
	}
	/* malformed data: no message and no crash, whatever the name */
	const char *junk[] = { "", "{", "[1,2]", "\"text\"", "{\"text\":7}", "{\"end\":7,\"exit_code\":\"x\"}" };
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		assert_null(event("stdout", junk[i], &end, &code));
		assert_false(end);
		assert_null(event("stderr", junk[i], &end, &code));
		assert_false(end);
		/* an object is an exit however odd its fields; anything else is none */
		m = event("exit", junk[i], &end, &code);
		assert_int_equal(end, m != NULL);
		if (m) {
			assert_true(json_is_object(json_object_get(json_object_get(m, "event"), "end")));
			json_decref(m);
		}
	}
}

static json_t *info_of(const char *cmd)
{
	json_t *c = parse(cmd);
	json_t *i = envd_process_info(c);
	json_decref(c);
	return i;
}

static void process_info(void **state)
{
	(void)state;
	json_t *i = info_of("{\"id\":4,\"state\":\"running\",\"request\":{\"argv\":[\"/bin/bash\",\"-c\",\"x\"],"
			    "\"env\":{\"A\":\"1\"},\"cwd\":\"d\"}}");
	assert_json(i, "{\"config\":{\"cmd\":\"/bin/bash\",\"args\":[\"-c\",\"x\"],\"envs\":{\"A\":\"1\"},\"cwd\":\"d\"},"
		       "\"pid\":4}");
	json_decref(i);
	/* List shows running processes only */
	const char *gone[] = {
		"{\"id\":4,\"state\":\"exited\",\"request\":{\"argv\":[\"/bin/bash\"]}}",
		"{\"id\":4,\"request\":{\"argv\":[\"/bin/bash\"]}}",
		"{\"id\":0,\"state\":\"running\",\"request\":{\"argv\":[\"/bin/bash\"]}}",
		"{\"id\":4,\"state\":\"running\",\"request\":{\"argv\":[]}}",
		"{\"id\":4,\"state\":\"running\"}",
	};
	for (size_t k = 0; k < sizeof(gone) / sizeof(gone[0]); k++)
		if ((i = info_of(gone[k])))
			fail_msg("%s shown", gone[k]);
}

/* A command that has no env of its own (the common case: commands.run
 * without envs) still lists, with envs {} and no cwd. */
static void process_info_without_env(void **state)
{
	(void)state;
	json_t *i = info_of("{\"id\":9,\"state\":\"running\",\"request\":{\"argv\":[\"sleep\",\"9\"]}}");
	assert_json(i, "{\"config\":{\"cmd\":\"sleep\",\"args\":[\"9\"],\"envs\":{}},\"pid\":9}");
	json_decref(i);
}

/* ---- filesystem.Filesystem -------------------------------------------------------------- */

static void abs_paths(void **state)
{
	(void)state;
	char out[64];
	const struct { const char *in, *want; } ok[] = {
		{ "a/b", "/workspace/a/b" }, { "", "/workspace" },	 { "/tmp/", "/tmp" },
		{ "/", "/" },		     { "//", "/" },		 { "a/", "/workspace/a" },
		{ "/etc/hosts", "/etc/hosts" }, { ".", "/workspace" },
		/* cleaned as Go's filepath.Clean: no ".", no empty part, ".." walks back, never above / */
		{ "/workspace/./x//y/", "/workspace/x/y" }, { "a/../b", "/workspace/b" }, { "../../..", "/" },
		{ "/a/..", "/" }, { "x/./..", "/workspace" }, { "/a/b/../..", "/" }, { "x/y/../../z", "/workspace/z" },
		{ "/a/b/../c/../../d", "/d" },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		memset(out, 'z', sizeof(out));
		assert_int_equal(envd_abs_path(ok[i].in, out, sizeof(out)), 0);
		assert_string_equal(out, ok[i].want);
	}
	/* just fitting, and one byte short */
	assert_int_equal(envd_abs_path("abcd", out, sizeof("/workspace/abcd")), 0);
	assert_string_equal(out, "/workspace/abcd");
	assert_int_equal(envd_abs_path("abcd", out, sizeof("/workspace/abcd") - 1), -1);
	assert_int_equal(envd_abs_path("/tmp", out, 4), -1);
	assert_int_equal(envd_abs_path("", out, sizeof(ENVD_HOME) - 1), -1);
	char longer[200];
	memset(longer, 'p', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	assert_int_equal(envd_abs_path(longer, out, sizeof(out)), -1);
	longer[0] = '/';
	assert_int_equal(envd_abs_path(longer, out, sizeof(out)), -1);
}

static json_t *entry_of(const char *native, const char *dir, bool whole)
{
	json_t *n = parse(native);
	json_t *e = envd_entry(n, dir, whole);
	json_decref(n);
	return e;
}

static void entries(void **state)
{
	(void)state;
	const char *file = "{\"name\":\"f\",\"type\":\"file\",\"size\":5,\"mode\":\"0644\",\"mtime\":\"2026-12-07T00:00:00.000Z\"}";
	json_t *e = entry_of(file, "/workspace", false);
	assert_json(e, "{\"name\":\"f\",\"type\":\"FILE_TYPE_FILE\",\"path\":\"/workspace/f\",\"size\":5,\"mode\":420,"
		       "\"permissions\":\"-rw-r--r--\",\"modifiedTime\":\"2026-12-07T00:00:00.000Z\"}");
	json_decref(e);
	e = entry_of(file, "/", false);
	assert_string_equal(json_string_value(json_object_get(e, "path")), "/f");
	json_decref(e);
	e = entry_of("{\"name\":\"d\",\"type\":\"dir\",\"size\":4096,\"mode\":\"0755\"}", "/workspace/x", false);
	assert_json(e, "{\"name\":\"d\",\"type\":\"FILE_TYPE_DIRECTORY\",\"path\":\"/workspace/x/d\",\"size\":4096,"
		       "\"mode\":493,\"permissions\":\"drwxr-xr-x\"}");
	json_decref(e);
	e = entry_of("{\"name\":\"l\",\"type\":\"symlink\",\"size\":3,\"mode\":\"0777\"}", "/workspace", false);
	assert_string_equal(json_string_value(json_object_get(e, "type")), "FILE_TYPE_SYMLINK");
	assert_string_equal(json_string_value(json_object_get(e, "permissions")), "lrwxrwxrwx");
	json_decref(e);
	/* setuid and sticky bits are the mode's; the string shows rwx alone */
	e = entry_of("{\"name\":\"s\",\"type\":\"file\",\"size\":0,\"mode\":\"4750\"}", "/workspace", false);
	assert_int_equal(json_integer_value(json_object_get(e, "mode")), 04750);
	assert_string_equal(json_string_value(json_object_get(e, "permissions")), "-rwxr-x---");
	json_decref(e);
	/* no mode given: none */
	e = entry_of("{\"name\":\"m\",\"type\":\"file\",\"size\":1}", "/workspace", false);
	assert_int_equal(json_integer_value(json_object_get(e, "mode")), 0);
	assert_string_equal(json_string_value(json_object_get(e, "permissions")), "----------");
	assert_null(json_object_get(e, "modifiedTime"));
	json_decref(e);
	/* a stat: the path is the directory asked for, its name the last part */
	e = entry_of("{\"name\":\"ignored\",\"type\":\"dir\",\"size\":0,\"mode\":\"0700\"}", "/workspace/x/y", true);
	assert_json(e, "{\"name\":\"y\",\"type\":\"FILE_TYPE_DIRECTORY\",\"path\":\"/workspace/x/y\",\"size\":0,"
		       "\"mode\":448,\"permissions\":\"drwx------\"}");
	json_decref(e);
	e = entry_of("{\"type\":\"dir\",\"size\":0,\"mode\":\"0755\"}", "/", true);
	assert_string_equal(json_string_value(json_object_get(e, "name")), "/");
	assert_string_equal(json_string_value(json_object_get(e, "path")), "/");
	json_decref(e);
	/* neither file, directory nor symlink; and a listing's entry needs its name */
	assert_null(entry_of("{\"name\":\"p\",\"type\":\"other\",\"size\":0,\"mode\":\"0644\"}", "/workspace", false));
	assert_null(entry_of("{\"name\":\"p\",\"size\":0}", "/workspace", false));
	assert_null(entry_of("{\"type\":\"file\",\"size\":0}", "/workspace", false));
}

/* ---- the access token ------------------------------------------------------------------- */

#define ALICE_KEY "key-alice-0123456789abcdef"
#define BOB_KEY "key-bob-0123456789abcdef00"
#define SBX "0123456789abcdef0123456789abcdef"

static void tokens(void **state)
{
	(void)state;
	struct tenants ts;
	const char *text = "tenant alice\nkey " ALICE_KEY " alice\ntenant bob\nkey " BOB_KEY " bob\n";
	if (tenants_parse(&ts, text, strlen(text), err, sizeof(err)))
		fail_msg("tenants: %s", err);
	int alice = tenants_by_name(&ts, "alice"), bob = tenants_by_name(&ts, "bob");
	assert_true(alice >= 0 && bob >= 0 && alice != bob);
	unsigned char da[SHA256_DIGEST_LENGTH], db[SHA256_DIGEST_LENGTH];
	SHA256((const unsigned char *)ALICE_KEY, strlen(ALICE_KEY), da);
	SHA256((const unsigned char *)BOB_KEY, strlen(BOB_KEY), db);
	char ta[ENVD_TOKEN_LEN + 1], tb[ENVD_TOKEN_LEN + 1];
	memset(ta, 'z', sizeof(ta));
	envd_token(da, SBX, ta);
	envd_token(db, SBX, tb);
	assert_int_equal(strlen(ta), ENVD_TOKEN_LEN);
	assert_int_equal(strspn(ta, "0123456789abcdef"), ENVD_TOKEN_LEN);
	assert_string_not_equal(ta, tb);
	/* every node computes the same token from the same keys file: it is
	 * HMAC-SHA256 of purpose and id under the key's digest, pinned here so
	 * a change that would void the tokens clients hold is seen */
	static const char purpose[] = "vmrun envd access token\n" SBX;
	unsigned char mac[32];
	unsigned mlen = 0;
	HMAC(EVP_sha256(), da, sizeof(da), (const unsigned char *)purpose, sizeof(purpose) - 1, mac, &mlen);
	assert_int_equal(mlen, 32);
	char hex[65];
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", mac[i]);
	assert_string_equal(ta, hex);
	/* and the same inputs always give it */
	char again[ENVD_TOKEN_LEN + 1];
	envd_token(da, SBX, again);
	assert_string_equal(ta, again);

	assert_int_equal(envd_token_tenant(&ts, SBX, ta), alice);
	assert_int_equal(envd_token_tenant(&ts, SBX, tb), bob);
	/* a token names its sandbox: another id under it does not match */
	assert_int_equal(envd_token_tenant(&ts, "fedcba9876543210fedcba9876543210", ta), -1);
	assert_int_equal(envd_token_tenant(&ts, "", ta), -1);
	assert_int_equal(envd_token_tenant(&ts, NULL, ta), -1);
	assert_int_equal(envd_token_tenant(&ts, SBX, NULL), -1);
	assert_int_equal(envd_token_tenant(&ts, SBX, ""), -1);
	char cut[ENVD_TOKEN_LEN + 2];
	memcpy(cut, ta, ENVD_TOKEN_LEN - 1);
	cut[ENVD_TOKEN_LEN - 1] = '\0';
	assert_int_equal(envd_token_tenant(&ts, SBX, cut), -1);
	memcpy(cut, ta, ENVD_TOKEN_LEN);
	cut[ENVD_TOKEN_LEN] = '0';
	cut[ENVD_TOKEN_LEN + 1] = '\0';
	assert_int_equal(envd_token_tenant(&ts, SBX, cut), -1);
	/* one hex digit off at the end, and the same token in capitals */
	char off[ENVD_TOKEN_LEN + 1];
	memcpy(off, ta, sizeof(off));
	off[ENVD_TOKEN_LEN - 1] = off[ENVD_TOKEN_LEN - 1] == '0' ? '1' : '0';
	assert_int_equal(envd_token_tenant(&ts, SBX, off), -1);
	memcpy(off, ta, sizeof(off));
	for (int i = 0; i < ENVD_TOKEN_LEN; i++)
		if (off[i] >= 'a')
			off[i] = (char)(off[i] - 'a' + 'A');
	if (strcmp(off, ta))
		assert_int_equal(envd_token_tenant(&ts, SBX, off), -1);
	/* no keys, no tenant */
	struct tenants none = { 0 };
	assert_int_equal(envd_token_tenant(&none, SBX, ta), -1);
	tenants_free(&ts);
}

/* WatchDir's events from two listings: created, written (size or
 * mtime), chmod'ed, removed, in path order, named under the root. */
static void watch_events(void **state)
{
	(void)state;
	json_t *before = json_loads("{\"/w/a\":{\"name\":\"a\",\"type\":\"file\",\"size\":1,\"mode\":\"0644\",\"mtime\":\"t1\"},"
				    "\"/w/b\":{\"name\":\"b\",\"type\":\"file\",\"size\":2,\"mode\":\"0644\",\"mtime\":\"t1\"},"
				    "\"/w/c\":{\"name\":\"c\",\"type\":\"file\",\"size\":3,\"mode\":\"0644\",\"mtime\":\"t1\"},"
				    "\"/w/d\":{\"name\":\"d\",\"type\":\"dir\",\"size\":4096,\"mode\":\"0755\",\"mtime\":\"t1\"}}",
				    0, NULL);
	json_t *after = json_loads("{\"/w/a\":{\"name\":\"a\",\"type\":\"file\",\"size\":1,\"mode\":\"0644\",\"mtime\":\"t2\"},"
				   "\"/w/c\":{\"name\":\"c\",\"type\":\"file\",\"size\":3,\"mode\":\"0600\",\"mtime\":\"t1\"},"
				   "\"/w/d\":{\"name\":\"d\",\"type\":\"dir\",\"size\":4096,\"mode\":\"0755\",\"mtime\":\"t1\"},"
				   "\"/w/d/e\":{\"name\":\"e\",\"type\":\"file\",\"size\":5,\"mode\":\"0644\",\"mtime\":\"t2\"}}",
				   0, NULL);
	assert_non_null(before);
	assert_non_null(after);
	json_t *ev = envd_watch_events(before, after, "/w", false);
	assert_json(ev, "[{\"name\":\"a\",\"type\":\"EVENT_TYPE_WRITE\"},{\"name\":\"b\",\"type\":\"EVENT_TYPE_REMOVE\"},"
			"{\"name\":\"c\",\"type\":\"EVENT_TYPE_CHMOD\"},{\"name\":\"d/e\",\"type\":\"EVENT_TYPE_CREATE\"}]");
	json_decref(ev);
	/* with entries: the path's EntryInfo, none for a removal */
	ev = envd_watch_events(before, after, "/w", true);
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_array_get(ev, 3), "entry"), "path")),
			    "/w/d/e");
	assert_null(json_object_get(json_array_get(ev, 1), "entry"));
	json_decref(ev);
	/* nothing changed, nothing said; an empty directory filled from "/" */
	ev = envd_watch_events(after, after, "/w", false);
	assert_int_equal(json_array_size(ev), 0);
	json_decref(ev);
	json_t *none = json_object();
	ev = envd_watch_events(none, before, "/", false);
	assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 0), "name")), "w/a");
	json_decref(ev);
	json_decref(none);
	json_decref(before);
	json_decref(after);
}

/* Update's pty.size as the native resize body */
static void resizes(void **state)
{
	(void)state;
	char err[200];
	json_t *req = json_loads("{\"process\":{\"pid\":3},\"pty\":{\"size\":{\"cols\":120,\"rows\":40}}}", 0, NULL), *n;
	assert_int_equal(envd_resize_body(req, &n, err, sizeof(err)), ENVD_OK);
	assert_json(n, "{\"cols\":120,\"rows\":40}");
	json_decref(n);
	json_decref(req);
	const char *bad[] = { "{}", "{\"pty\":{}}", "{\"pty\":{\"size\":{\"cols\":0,\"rows\":4}}}",
			      "{\"pty\":{\"size\":{\"cols\":5000,\"rows\":4}}}", "{\"pty\":{\"size\":{\"cols\":\"80\",\"rows\":4}}}" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		req = json_loads(bad[i], 0, NULL);
		assert_int_equal(envd_resize_body(req, &n, err, sizeof(err)), ENVD_INVALID_ARGUMENT);
		assert_null(n);
		json_decref(req);
	}
}

/* A stream's frames taken in pieces, and nothing after its end. */
static void outs(void **state)
{
	(void)state;
	struct envd_out o = { 0 };
	char buf[64];
	assert_int_equal(pending_take(&o.q, buf, sizeof(buf)), 0);
	assert_int_equal(envd_out_frame(&o, json_pack("{s:i}", "a", 1)), 0);
	assert_int_equal(pending_take(&o.q, buf, 3), 3);   /* the first bytes of the header */
	assert_int_equal(pending_take(&o.q, buf + 3, sizeof(buf) - 3), 5 + 7 - 3);
	assert_memory_equal(buf, "\0\0\0\0\7{\"a\":1}", 12);
	envd_out_end(&o, ENVD_NOT_FOUND, "gone");
	envd_out_end(&o, ENVD_OK, NULL);   /* once */
	assert_int_equal(envd_out_frame(&o, json_pack("{s:i}", "b", 2)), 0);   /* dropped */
	size_t n = pending_take(&o.q, buf, sizeof(buf));
	assert_true(o.done);
	assert_int_equal(buf[0], ENVD_FLAG_END);
	assert_int_equal(n, 5 + strlen("{\"error\":{\"code\":\"not_found\",\"message\":\"gone\"}}"));
	assert_int_equal(pending_take(&o.q, buf, sizeof(buf)), 0);
	envd_out_free(&o);
	envd_out_free(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(codes),	cmocka_unit_test(errors),	cmocka_unit_test(unwrap),
		cmocka_unit_test(frames),	cmocka_unit_test(bytes),	cmocka_unit_test(start_body),
		cmocka_unit_test(pids),		cmocka_unit_test(signals),	cmocka_unit_test(inputs),
		cmocka_unit_test(events),	cmocka_unit_test(process_info), cmocka_unit_test(process_info_without_env),
		cmocka_unit_test(abs_paths),	cmocka_unit_test(entries),	cmocka_unit_test(tokens),
		cmocka_unit_test(watch_events),	cmocka_unit_test(resizes),	cmocka_unit_test(outs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
