/* The sandbox's commands over HTTP (host/sandbox/supervisor.h): start,
 * list, one, stdin, signals, and a command's output as Server-Sent
 * Events. */
#include "api.h"

#include "hex.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "sse.h"
#include "spool.h"

#define PING_MS 10000   /* an idle event stream's comment */

static bool cmd_ended(void *arg) { return ((struct sbx_cmd *)arg)->ended; }

/* ---- commands ------------------------------------------------------------------------- */

/* A terminal's size, {"cols", "rows"}, each 1..PROTO_PTY_MAX: 0, or -1. */
static int pty_size(const json_t *v, uint16_t *cols, uint16_t *rows)
{
	json_int_t c = json_integer_value(json_object_get(v, "cols")), r = json_integer_value(json_object_get(v, "rows"));
	if (!json_is_object(v) || json_object_size(v) != 2 || c < 1 || r < 1 || c > PROTO_PTY_MAX || r > PROTO_PTY_MAX)
		return -1;
	*cols = (uint16_t)c;
	*rows = (uint16_t)r;
	return 0;
}

/* A command's own limits, {"memory_mib", "cpu_time_ms"}, each optional:
 * 0, or -1 with why. */
static int cmd_limits(const json_t *v, struct proto_cmd *c, char *err, size_t errlen)
{
	const char *key;
	const json_t *x;
	if (!json_is_object(v))
		return snprintf(err, errlen, "limits: {\"memory_mib\", \"cpu_time_ms\"}"), -1;
	json_object_foreach((json_t *)v, key, x) {
		json_int_t n = json_integer_value(x);
		bool mem = !strcmp(key, "memory_mib");
		if (!mem && strcmp(key, "cpu_time_ms"))
			return snprintf(err, errlen, "limits: unknown field %.64s", key), -1;
		if (!json_is_integer(x) || n < 1 || n > (mem ? SBX_CMD_MEMORY_MIB_MAX : SBX_CMD_CPU_MS_MAX))
			return snprintf(err, errlen, "limits.%s: an integer, 1 to %lld", key,
					mem ? (long long)SBX_CMD_MEMORY_MIB_MAX : (long long)SBX_CMD_CPU_MS_MAX), -1;
		if (mem)
			c->memory_kib = (uint64_t)n * 1024;
		else
			c->cpu_ms = (uint64_t)n;
	}
	return 0;
}

/* The proto command from a body: argv, cwd, env, timeout_s, pty. Strings
 * point into body. 0, or -1 with why. */
static int parse_cmd(json_t *body, struct proto_cmd *c, char *err, size_t errlen)
{
	const char *known[] = { "argv", "cwd", "env", "stdin", "timeout_s", "background", "pty", "limits" };
	const char *key;
	json_t *v;
	json_object_foreach(body, key, v) {
		bool ok = false;
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			ok |= !strcmp(key, known[i]);
		if (!ok)
			return snprintf(err, errlen, "unknown field %.64s", key), -1;
	}
	json_t *argv = json_object_get(body, "argv");
	if (!json_is_array(argv) || !json_array_size(argv) || json_array_size(argv) > PROTO_SB_MAX_ARGS)
		return snprintf(err, errlen, "argv: an array of 1 to %u strings", PROTO_SB_MAX_ARGS), -1;
	size_t i;
	json_array_foreach(argv, i, v) {
		const char *a = json_string_value(v);
		if (!a || strlen(a) != json_string_length(v) || strlen(a) > PROTO_MAX_STR || (i == 0 && !*a))
			return snprintf(err, errlen, "argv[%zu]: a string without NUL, at most %u bytes", i, PROTO_MAX_STR), -1;
		c->argv[c->argc++] = (char *)a;
	}
	if ((v = json_object_get(body, "cwd"))) {
		const char *cwd = json_string_value(v);
		if (!cwd || !*cwd || strlen(cwd) != json_string_length(v) || strlen(cwd) > PROTO_MAX_STR)
			return snprintf(err, errlen, "cwd: a non-empty path"), -1;
		c->cwd = (char *)cwd;
	}
	json_t *env = json_object_get(body, "env");
	if (env && (!json_is_object(env) || json_object_size(env) > PROTO_SB_MAX_ENV))
		return snprintf(err, errlen, "env: an object of at most %u strings", PROTO_SB_MAX_ENV), -1;
	json_object_foreach(env, key, v) {
		/* the pair is made in the body's own storage by the caller */
		(void)key;
		if (!json_is_string(v))
			return snprintf(err, errlen, "env.%.64s: a string", key), -1;
	}
	double t = SBX_DEFAULT_CMD_TIMEOUT_S;
	if ((v = json_object_get(body, "timeout_s")) && (!json_is_number(v) || (t = json_number_value(v)) <= 0 ||
							 t > 86400))
		return snprintf(err, errlen, "timeout_s: more than 0 and at most 86400"), -1;
	c->timeout_ms = (uint64_t)(t * 1000.0);
	if (!c->timeout_ms)
		c->timeout_ms = 1;
	if ((v = json_object_get(body, "stdin")) && !json_is_string(v))
		return snprintf(err, errlen, "stdin: a string"), -1;
	if ((v = json_object_get(body, "background")) && !json_is_boolean(v))
		return snprintf(err, errlen, "background: true or false"), -1;
	if ((v = json_object_get(body, "pty")) && pty_size(v, &c->pty_cols, &c->pty_rows))
		return snprintf(err, errlen, "pty: {\"cols\", \"rows\"}, each 1..%u", PROTO_PTY_MAX), -1;
	if ((v = json_object_get(body, "limits")) && cmd_limits(v, c, err, errlen))
		return -1;
	return 0;
}

/* env's pairs as NAME=VALUE in store (room for len bytes), into c. */
static int cmd_env(json_t *body, struct proto_cmd *c, char *store, size_t len, char *err, size_t errlen)
{
	const char *key;
	json_t *v;
	size_t used = 0;
	json_object_foreach(json_object_get(body, "env"), key, v) {
		int n = snprintf(store + used, len - used, "%s=%s", key, json_string_value(v));
		if (n < 0 || (size_t)n >= len - used || !proto_valid_env(store + used, (size_t)n) || (size_t)n > PROTO_MAX_STR)
			return snprintf(err, errlen, "env.%.64s: a variable name and a value without NUL", key), -1;
		c->env[c->envc++] = store + used;
		used += (size_t)n + 1;
	}
	return 0;
}

/* What is kept of a command's request: not env's values (secrets). */
static json_t *kept_request(json_t *body)
{
	json_t *k = json_deep_copy(body);
	json_t *env = json_object_get(k, "env");
	if (json_is_object(env)) {
		json_t *names = json_array();
		const char *key;
		json_t *v;
		json_object_foreach(env, key, v) json_array_append_new(names, json_string(key));
		json_object_set_new(k, "env", names);
	}
	json_object_del(k, "stdin");
	return k;
}

/* Send a command's stdin (n bytes), in frames; close it too when close. */
static int send_stdin(struct sbx *s, uint32_t id, const char *p, size_t n, bool close)
{
	for (size_t at = 0; at < n;) {
		uint32_t k = n - at > PROTO_SB_CHUNK ? PROTO_SB_CHUNK : (uint32_t)(n - at);
		if (sbx_send(s, PROTO_CMD_STDIN, &id, PROTO_SB_ID_LEN, p + at, k) < 0)
			return -1;
		at += k;
	}
	return close ? sbx_send(s, PROTO_CMD_STDIN, &id, PROTO_SB_ID_LEN, NULL, 0) : 0;
}

/* Answer with command c: once it ended or wait_s passed when wait_s. */
enum MHD_Result api_answer_cmd(struct sbx *s, struct MHD_Connection *conn, struct sbx_cmd *c, long wait_s,
				  unsigned status)
{
	pthread_mutex_lock(&s->mu);
	if (wait_s > 0)
		api_wait_for(s, cmd_ended, c, wait_s * 1000);
	json_t *j = sbx_cmd_json(s, c);
	uint32_t id = c->id;
	pthread_mutex_unlock(&s->mu);
	sbx_cmd_output(s, id, j);
	return api_answer_json(conn, status, j);
}

enum MHD_Result api_post_command(struct sbx *s, struct MHD_Connection *conn, const char *text, size_t len,
				    json_t *body)
{
	long wait_s = api_wait_arg(conn);
	if (wait_s < 0)
		return api_answer_error(conn, 400, "wait: seconds, 0 to %d", WAIT_MAX_S);
	struct proto_cmd *pc = calloc(1, sizeof(*pc));
	char *env_store = malloc(PROTO_MAX_PAYLOAD);
	char err[256];
	enum MHD_Result rc;
	if (!pc || !env_store) {
		rc = api_answer_error(conn, 500, "out of memory");
		goto out;
	}
	if (parse_cmd(body, pc, err, sizeof(err)) || cmd_env(body, pc, env_store, PROTO_MAX_PAYLOAD, err, sizeof(err))) {
		rc = api_answer_error(conn, 400, "%s", err);
		goto out;
	}
	const char *key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key");
	if (key && (!*key || strlen(key) > SBX_IDEM_KEY_MAX)) {
		rc = api_answer_error(conn, 400, "Idempotency-Key: 1 to %d characters", SBX_IDEM_KEY_MAX);
		goto out;
	}
	char hash[65];
	sha256_hex(text, len, hash);   /* what an Idempotency-Key is held to */
	pthread_mutex_lock(&s->mu);
	const struct sbx_key *known = key ? sbx_key_of(s, key) : NULL;
	if (known) {
		struct sbx_cmd *c = strcmp(known->hash, hash) ? NULL : sbx_cmd_of(s, known->id);
		bool same = !strcmp(known->hash, hash);
		uint32_t id = known->id;
		if (c)
			c->refs++;
		pthread_mutex_unlock(&s->mu);
		rc = !same ? api_answer_error(conn, 422, "Idempotency-Key was used with another body")
		     : c   ? api_answer_cmd(s, conn, c, wait_s, 200)
			   : api_answer_error(conn, 410, "command %u, which this key started, is no longer kept", id);
		if (c)
			api_command_put(s, c);
		goto out;
	}
	if (s->state != SBX_RUNNING) {
		pthread_mutex_unlock(&s->mu);
		rc = api_answer_error(conn, 409, "the sandbox is not running");
		goto out;
	}
	struct sbx_cmd *c = sbx_cmd_new(s, err, sizeof(err));
	if (!c) {
		pthread_mutex_unlock(&s->mu);
		rc = api_answer_error(conn, 429, "%s", err);
		goto out;
	}
	if (key && sbx_key_add(s, key, hash, c->id)) {
		/* the record goes again: no command runs without its key kept */
		c->ended = true;
		s->running--;
		pthread_mutex_unlock(&s->mu);
		rc = api_answer_error(conn, 429, "%d idempotency keys are kept already", SBX_MAX_KEYS);
		goto out;
	}
	c->request = kept_request(body);
	c->refs++;
	pc->id = c->id;
	bool background = json_is_true(json_object_get(body, "background"));
	c->stdin_closed = !background;
	pthread_mutex_unlock(&s->mu);
	uint8_t *frame = malloc(PROTO_MAX_PAYLOAD);
	size_t n = frame ? proto_encode_cmd(pc, frame, PROTO_MAX_PAYLOAD) : 0;
	json_t *in = json_object_get(body, "stdin");
	int sent = n ? sbx_send(s, PROTO_CMD_START, frame, (uint32_t)n, NULL, 0) : -1;
	if (!sent)
		sent = send_stdin(s, c->id, json_string_value(in) ? json_string_value(in) : "", json_string_length(in),
				  !background);
	free(frame);
	if (sent < 0) {
		pthread_mutex_lock(&s->mu);
		if (!c->ended) {
			c->ended = true;
			c->exit = (struct proto_exit){ .kind = PROTO_END_ERROR, .code = n ? EPIPE : E2BIG };
			s->running--;
		}
		pthread_mutex_unlock(&s->mu);
	}
	rc = api_answer_cmd(s, conn, c, wait_s, 201);
	api_command_put(s, c);
out:
	free(pc);
	free(env_store);
	return rc;
}

enum MHD_Result api_list_commands(struct sbx *s, struct MHD_Connection *conn)
{
	json_t *a = json_array();
	pthread_mutex_lock(&s->mu);
	for (unsigned i = 0; i < s->ncmd; i++)
		json_array_append_new(a, sbx_cmd_json(s, s->cmd[i]));
	pthread_mutex_unlock(&s->mu);
	return api_answer_json(conn, 200, json_pack("{s:o}", "commands", a));
}

enum MHD_Result api_cmd_stdin(struct sbx *s, struct MHD_Connection *conn, struct sbx_cmd *c, json_t *body)
{
	json_t *data = json_object_get(body, "data"), *close = json_object_get(body, "close");
	if ((data && !json_is_string(data)) || (close && !json_is_boolean(close)))
		return api_answer_error(conn, 400, "a body of {\"data\": string, \"close\": bool}");
	pthread_mutex_lock(&s->mu);
	bool open = !c->ended && !c->stdin_closed;
	if (open && json_is_true(close))
		c->stdin_closed = true;
	pthread_mutex_unlock(&s->mu);
	if (!open)
		return api_answer_error(conn, 409, "command %u's stdin is closed", c->id);
	if (send_stdin(s, c->id, json_string_value(data) ? json_string_value(data) : "", json_string_length(data),
		       json_is_true(close)) < 0)
		return api_answer_error(conn, 409, "the sandbox is not running");
	return api_answer_json(conn, 200, json_pack("{s:b}", "ok", 1));
}

enum MHD_Result api_cmd_signal(struct sbx *s, struct MHD_Connection *conn, struct sbx_cmd *c, json_t *body)
{
	int sig = sbx_signal_number(json_object_get(body, "signal"));
	if (!sig)
		return api_answer_error(conn, 400, "signal: a name (\"TERM\") or a number 1..%d", PROTO_MAX_SIGNAL);
	uint8_t frame[8];
	proto_encode_signal(frame, c->id, (uint32_t)sig);
	pthread_mutex_lock(&s->mu);
	bool ended = c->ended;
	pthread_mutex_unlock(&s->mu);
	if (ended)
		return api_answer_error(conn, 409, "command %u has ended", c->id);
	if (sbx_send(s, PROTO_CMD_SIGNAL, frame, sizeof(frame), NULL, 0) < 0)
		return api_answer_error(conn, 409, "the sandbox is not running");
	return api_answer_json(conn, 202, json_pack("{s:b}", "ok", 1));
}

enum MHD_Result api_cmd_resize(struct sbx *s, struct MHD_Connection *conn, struct sbx_cmd *c, json_t *body)
{
	uint16_t cols, rows;
	if (pty_size(body, &cols, &rows))
		return api_answer_error(conn, 400, "a body of {\"cols\", \"rows\"}, each 1..%u", PROTO_PTY_MAX);
	pthread_mutex_lock(&s->mu);
	bool ended = c->ended, tty = json_object_get(c->request, "pty") != NULL;
	pthread_mutex_unlock(&s->mu);
	if (!tty)
		return api_answer_error(conn, 409, "command %u has no terminal (start it with \"pty\")", c->id);
	if (ended)
		return api_answer_error(conn, 409, "command %u has ended", c->id);
	uint8_t frame[8];
	proto_encode_resize(frame, c->id, cols, rows);
	if (sbx_send(s, PROTO_CMD_RESIZE, frame, sizeof(frame), NULL, 0) < 0)
		return api_answer_error(conn, 409, "the sandbox is not running");
	return api_answer_json(conn, 200, json_pack("{s:b}", "ok", 1));
}

/* ---- a command's events ------------------------------------------------------------------- */

struct events {
	struct sbx *s;
	struct sbx_cmd *c;
	int fd;
	uint8_t *raw;
	size_t rawlen;
	struct sse_buf ev;
	bool done;
	int64_t last_ms;
};

/* Read what the command's file has now into events: true when it had bytes. */
static bool events_read(struct events *e)
{
	uint8_t *raw = realloc(e->raw, e->rawlen + 65536);
	if (!raw)
		return false;
	e->raw = raw;
	ssize_t n = read(e->fd, e->raw + e->rawlen, 65536);
	if (n <= 0)
		return false;
	e->rawlen += (size_t)n;
	long used = sse_records(&e->ev, e->raw, e->rawlen);
	if (used < 0) {
		e->rawlen = 0;
		return true;
	}
	memmove(e->raw, e->raw + used, e->rawlen - (size_t)used);
	e->rawlen -= (size_t)used;
	return true;
}

static ssize_t events_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct events *e = cls;
	struct sbx *s = e->s;
	for (;;) {
		if (!sse_empty(&e->ev))
			return (ssize_t)sse_take(&e->ev, buf, max);
		if (e->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (events_read(e))
			continue;
		pthread_mutex_lock(&s->mu);
		bool ended = e->c->ended;
		if (ended) {
			pthread_mutex_unlock(&s->mu);
			if (events_read(e))   /* what came before the end */
				continue;
			pthread_mutex_lock(&s->mu);
			sse_event(&e->ev, "exit", sbx_cmd_json(s, e->c));
			pthread_mutex_unlock(&s->mu);
			e->done = true;
			continue;
		}
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_nsec += 200 * 1000000;
		if (t.tv_nsec >= 1000000000) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&s->cv, &s->mu, &t);
		pthread_mutex_unlock(&s->mu);
		if (sbx_realtime_ms() - e->last_ms >= PING_MS) {
			e->last_ms = sbx_realtime_ms();
			sse_comment(&e->ev, "ping");
		}
	}
}

static void events_free(void *cls)
{
	struct events *e = cls;
	api_command_put(e->s, e->c);
	if (e->fd >= 0)
		close(e->fd);
	free(e->raw);
	sse_free(&e->ev);
	free(e);
}

enum MHD_Result api_cmd_events(struct sbx *s, struct MHD_Connection *conn, struct sbx_cmd *c)
{
	struct events *e = calloc(1, sizeof(*e));
	if (!e) {
		api_command_put(s, c);
		return api_answer_error(conn, 500, "out of memory");
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" SBX_CMDS_DIR "/%u.out", s->dir, c->id);
	*e = (struct events){ .s = s, .c = c, .fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), .last_ms = sbx_realtime_ms() };
	if (e->fd < 0) {
		events_free(e);
		return api_answer_error(conn, 410, "command %u's output is gone", c->id);
	}
	struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 65536, events_reader, e, events_free);
	if (!r) {
		events_free(e);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	enum MHD_Result rc = MHD_queue_response(conn, 200, r);
	MHD_destroy_response(r);
	return rc;
}

