/* vmrund's own calls to a tenant's sandboxes (sandbox_calls.h): HTTP/1.0
 * to each supervisor's socket, as a client's requests are passed
 * through, with sandboxes made and deleted as the API makes them. */
#include "sandbox_calls.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "sandboxes.h"

#define ANSWER_MAX (16u << 20)        /* a command's answer: its output twice over, as JSON */

/* Connect to sandbox id's supervisor and send a request: 0, or -1 with
 * u->err. */
static int ask(struct sbx_user *u, const char *id, const char *method, const char *target, const char *type,
	       const void *body, size_t len, int timeout_ms, struct sbxc *c)
{
	char dir[PATH_MAX];
	vmrund_sbx_dir(u->d, id, dir, sizeof(dir));
	if (sbxc_connect(c, dir, timeout_ms) || sbxc_send_head(c, method, target, type, NULL, len) ||
	    sbxc_send(c, body ? body : "", len) || sbxc_read_head(c)) {
		snprintf(u->err, sizeof(u->err), "sandbox %s: %s %s: %s", id, method, target, strerror(errno));
		sbxc_close(c);
		return -1;
	}
	return 0;
}

/* The rest of c's answer, at most max bytes: malloc'd and NUL-terminated,
 * its length in *n; NULL with u->err. */
static char *body_of(struct sbx_user *u, struct sbxc *c, const char *what, size_t max, size_t *n)
{
	char *buf = NULL;
	*n = 0;
	for (size_t cap = 0;;) {
		if (*n + 1 >= cap) {
			/* room for max bytes and one more, which says there are more */
			size_t want = cap ? 2 * cap : 65536;
			want = want < max + 2 ? want : max + 2;
			char *more = *n <= max ? realloc(buf, want) : NULL;
			if (!more) {
				snprintf(u->err, sizeof(u->err), "%s: %s", what,
					 *n > max ? "the answer is too long" : "out of memory");
				free(buf);
				return NULL;
			}
			buf = more;
			cap = want;
		}
		ssize_t k = sbxc_read_body(c, buf + *n, cap - *n - 1);
		if (k == 0)
			break;
		if (k < 0) {
			snprintf(u->err, sizeof(u->err), "%s: reading: %s", what, strerror(errno));
			free(buf);
			return NULL;
		}
		*n += (size_t)k;
	}
	if (*n > max) {
		snprintf(u->err, sizeof(u->err), "%s: the answer is too long", what);
		free(buf);
		return NULL;
	}
	buf[*n] = '\0';
	return buf;
}

/* One call: its status, and its body as JSON into *out (NULL when it is
 * none). -1 with u->err when the call failed. */
static int call(struct sbx_user *u, const char *id, const char *method, const char *target, const char *type,
		const void *body, size_t len, int timeout_ms, json_t **out)
{
	struct sbxc c = { .fd = -1 };
	char what[128];
	size_t n;
	*out = NULL;
	if (ask(u, id, method, target, type, body, len, timeout_ms, &c))
		return -1;
	snprintf(what, sizeof(what), "sandbox %s: %s %.60s", id, method, target);
	char *buf = body_of(u, &c, what, ANSWER_MAX, &n);
	int status = buf ? (int)c.head.status : -1;
	if (buf)
		*out = json_loadb(buf, n, 0, NULL);
	free(buf);
	sbxc_close(&c);
	return status;
}

int sbxu_call(struct sbx_user *u, const char *id, const char *method, const char *target, const json_t *body,
	      int timeout_ms, json_t **out)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	*out = NULL;
	if (body && !text) {
		snprintf(u->err, sizeof(u->err), "out of memory");
		return -1;
	}
	int status = call(u, id, method, target, "application/json", text, text ? strlen(text) : 0, timeout_ms, out);
	free(text);
	return status;
}

json_t *sbxu_expect(struct sbx_user *u, const char *id, const char *method, const char *target, const json_t *body,
		    int timeout_ms, int want)
{
	json_t *out;
	int status = sbxu_call(u, id, method, target, body, timeout_ms, &out);
	if (status == want)
		return out ? out : json_object();
	if (status > 0)
		snprintf(u->err, sizeof(u->err), "sandbox %s: %s %s: %d %.300s", id, method, target, status,
			 json_string_value(json_object_get(out, "message")) ?: "");
	json_decref(out);
	return NULL;
}

int sbxu_create(struct sbx_user *u, json_t *body, char id[SCHED_ID_MAX])
{
	struct vmrund_answer a = vmrund_sbx_create(u->d, u->tenant, body, NULL, id);
	json_decref(body);
	if (a.status == 201)
		return 0;
	snprintf(u->err, sizeof(u->err), "a sandbox: %d %s", a.status, a.message);
	return -1;
}

void sbxu_destroy(struct sbx_user *u, const char *id)
{
	struct vmrund_answer a = vmrund_sbx_delete(u->d, u->tenant, id);
	if (a.status != 200)
		vmrund_say("sandbox %s: delete: %d %s", id, a.status, a.message);
}

_Static_assert(3 * SBXU_PATH_MAX + 32 < SBXC_TARGET_MAX, "a file's target fits");

/* "/files?path=" and path percent-encoded ("a b.c" -> "a%20b.c"). */
static void file_target(const char *path, char *out, size_t cap)
{
	size_t o = (size_t)snprintf(out, cap, "/files?path=");
	sbxc_query_encode(path, out + o, cap - o);
}

int sbxu_put_file(struct sbx_user *u, const char *id, const char *path, const void *data, size_t n)
{
	char target[SBXC_TARGET_MAX];
	json_t *out;
	file_target(path, target, sizeof(target));
	if (strlen(path) > SBXU_PATH_MAX) {
		snprintf(u->err, sizeof(u->err), "putting a file: its path is over %d bytes", SBXU_PATH_MAX);
		return 400;
	}
	int st = call(u, id, "PUT", target, "application/octet-stream", data, n, SBXU_CALL_MS, &out);
	if (st >= 200 && st <= 299) {
		json_decref(out);
		return 0;
	}
	if (st > 0)
		snprintf(u->err, sizeof(u->err), "putting %.300s: %d %.200s", path, st,
			 json_string_value(json_object_get(out, "message")) ?: "");
	json_decref(out);
	return st > 0 ? st : -1;
}

int sbxu_get_file(struct sbx_user *u, const char *id, const char *path, size_t max, char **out, size_t *n)
{
	char target[SBXC_TARGET_MAX];
	struct sbxc c = { .fd = -1 };
	*out = NULL;
	file_target(path, target, sizeof(target));
	if (ask(u, id, "GET", target, NULL, NULL, 0, SBXU_CALL_MS, &c))
		return -1;
	int rc = c.head.status == 404 ? 1 : -1;
	if (c.head.status == 200)
		rc = (*out = body_of(u, &c, path, max, n)) ? 0 : -1;
	else if (rc < 0)
		snprintf(u->err, sizeof(u->err), "getting %s: %u", path, c.head.status);
	sbxc_close(&c);
	return rc;
}

json_t *sbxu_command(struct sbx_user *u, const char *id, json_t *argv, const char *in, size_t in_len,
		     double timeout_s, const json_t *limits)
{
	char target[64];
	unsigned wait = (unsigned)ceil(timeout_s) + 10;
	snprintf(target, sizeof(target), "/commands?wait=%u", wait);
	json_t *body = argv ? json_pack("{so ss% sf}", "argv", argv, "stdin", in, in_len, "timeout_s", timeout_s) : NULL;
	if (body && limits && json_object_size(limits) && json_object_set(body, "limits", (json_t *)limits)) {
		json_decref(body);
		body = NULL;
	}
	json_t *cmd = body ? sbxu_expect(u, id, "POST", target, body, (int)(wait + 10) * 1000, 201) : NULL;
	json_decref(body);
	return cmd;
}

unsigned sbxu_start(struct sbx_user *u, const char *id, json_t *argv, double timeout_s)
{
	json_t *body = argv ? json_pack("{so sb sf}", "argv", argv, "background", 1, "timeout_s", timeout_s) : NULL;
	json_t *cmd = body ? sbxu_expect(u, id, "POST", "/commands", body, SBXU_CALL_MS, 201) : NULL;
	json_int_t cid = json_integer_value(json_object_get(cmd, "id"));
	json_decref(body);
	json_decref(cmd);
	if (cmd && cid <= 0)
		snprintf(u->err, sizeof(u->err), "sandbox %s: a command without an id", id);
	return cmd && cid > 0 ? (unsigned)cid : 0;
}

int sbxu_stdin(struct sbx_user *u, const char *id, unsigned cid, const char *data, size_t n, bool close,
	       int timeout_ms)
{
	char target[64];
	snprintf(target, sizeof(target), "/commands/%u/stdin", cid);
	json_t *body = json_pack("{ss% sb}", "data", data, n, "close", close), *out = NULL;
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	int st = text ? call(u, id, "POST", target, "application/json", text, strlen(text), timeout_ms, &out) : -1;
	if (!text)
		snprintf(u->err, sizeof(u->err), "out of memory");
	else if (st != 200 && st != 409 && st > 0)
		snprintf(u->err, sizeof(u->err), "sandbox %s: POST %s: %d", id, target, st);
	json_decref(body);
	json_decref(out);
	free(text);
	return st == 200 ? 0 : st == 409 ? 1 : -1;
}

int sbxu_signal(struct sbx_user *u, const char *id, unsigned cid, int signo)
{
	char target[64];
	snprintf(target, sizeof(target), "/commands/%u/signal", cid);
	json_t *body = json_pack("{si}", "signal", signo);
	json_t *out = body ? sbxu_expect(u, id, "POST", target, body, SBXU_CALL_MS, 202) : NULL;
	json_decref(body);
	json_decref(out);
	return out ? 0 : -1;
}

json_t *sbxu_command_get(struct sbx_user *u, const char *id, unsigned cid)
{
	char target[64];
	snprintf(target, sizeof(target), "/commands/%u", cid);
	return sbxu_expect(u, id, "GET", target, NULL, SBXU_CALL_MS, 200);
}

int sbxu_events(struct sbx_user *u, const char *id, unsigned cid, struct sbxc *c)
{
	char target[64];
	snprintf(target, sizeof(target), "/commands/%u/events", cid);
	/* a timeout for the connection and the head; the stream's body is
	 * read only once poll says there is some, so its idling waits on
	 * nothing */
	if (ask(u, id, "GET", target, NULL, NULL, 0, SBXU_CALL_MS, c))
		return -1;
	if (c->head.status == 200)
		return 0;
	snprintf(u->err, sizeof(u->err), "sandbox %s: GET %s: %u", id, target, c->head.status);
	sbxc_close(c);
	return -1;
}

int sbxu_events_read(struct sbxc *c, char **buf, size_t *len, sse_on_event on, void *ctx)
{
	char chunk[65536];
	ssize_t n = sbxc_read_body(c, chunk, sizeof(chunk));
	char *more = n > 0 ? realloc(*buf, *len + (size_t)n) : NULL;
	if (!more)
		return 0;
	*buf = more;
	memcpy(*buf + *len, chunk, (size_t)n);
	*len += (size_t)n;
	long used = sse_parse(*buf, *len, SBXU_EVENTS_MAX, on, ctx);
	if (used < 0)
		return 0;
	memmove(*buf, *buf + used, *len - (size_t)used);
	*len -= (size_t)used;
	return 1;
}
