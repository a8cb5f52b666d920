/* The sandbox's HTTP API (host/sandbox/supervisor.h) on libmicrohttpd, one
 * thread per connection so that a handler may wait for the guest: the
 * server, the answers, routing, and the sandbox's own endpoints; commands
 * are api_commands.c, files api_files.c. */
#include "api.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/sha.h>
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

#include "clock.h"
#include "sse.h"
#include "spool.h"


struct sbx_http {
	struct MHD_Daemon *mhd;
	struct sbx *s;
	int fd;
	char path[PATH_MAX];
};


/* ---- answers ---------------------------------------------------------------------- */

enum MHD_Result api_answer_bytes(struct MHD_Connection *conn, unsigned status, const char *type, const void *p,
				    size_t n)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)p, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	enum MHD_Result rc = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return rc;
}

enum MHD_Result api_answer_json(struct MHD_Connection *conn, unsigned status, json_t *v)
{
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	if (!text)
		return api_answer_bytes(conn, 500, "application/json", "{\"message\":\"out of memory\"}\n", 28);
	size_t n = strlen(text);
	char *line = realloc(text, n + 2);
	if (!line) {
		free(text);
		return MHD_NO;
	}
	line[n] = '\n';
	enum MHD_Result rc = api_answer_bytes(conn, status, "application/json", line, n + 1);
	free(line);
	return rc;
}

enum MHD_Result api_answer_error(struct MHD_Connection *conn, unsigned status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return api_answer_json(conn, status, json_pack("{s:s}", "message", msg));
}

/* The HTTP status for a guest's errno from a file operation. */
unsigned api_errno_status(int e)
{
	switch (e) {
	case ENOENT: return 404;
	case EACCES: case EPERM: case EROFS: return 403;
	case EEXIST: case ENOTEMPTY: case EBUSY: return 409;
	case ENOSPC: case EDQUOT: case EFBIG: return 507;
	case EISDIR: case ENOTDIR: case EINVAL: case ENAMETOOLONG: case ELOOP: case EXDEV: return 400;
	default: return 500;
	}
}

/* ---- waiting ---------------------------------------------------------------------- */

/* Wait (mu held) until done(arg) or until_ms (CLOCK_REALTIME). */
void api_wait_for(struct sbx *s, bool (*done)(void *), void *arg, int64_t wait_ms)
{
	int64_t until = wait_ms == INT64_MAX ? INT64_MAX : clock_mono_ms() + wait_ms;
	while (!done(arg)) {
		int64_t now = clock_mono_ms();
		if (now >= until)
			return;
		/* the condition variable's clock is the wall clock: a step of a
		 * second at most, so that a clock set meanwhile costs a step */
		int64_t step = until - now > 1000 ? 1000 : until - now;
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec += step / 1000;
		t.tv_nsec += (long)(step % 1000) * 1000000;
		if (t.tv_nsec >= 1000000000) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&s->cv, &s->mu, &t);
	}
}

/* ?wait=S: seconds, 0 when absent; -1 when not a number in 0..WAIT_MAX_S. */
long api_wait_arg(struct MHD_Connection *conn)
{
	const char *w = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "wait");
	if (!w)
		return 0;
	if (!*w || !strcmp(w, "true"))
		return WAIT_MAX_S;
	char *end;
	long v = strtol(w, &end, 10);
	return *end || v < 0 || v > WAIT_MAX_S ? -1 : v;
}

/* Give back a reference on c (command_of, post_command). */
void api_command_put(struct sbx *s, struct sbx_cmd *c)
{
	pthread_mutex_lock(&s->mu);
	c->refs--;
	pthread_mutex_unlock(&s->mu);
}

/* ---- the sandbox itself -------------------------------------------------------------- */

static bool not_starting(void *arg)
{
	enum sbx_state st = ((struct sbx *)arg)->state;
	return st != SBX_STARTING && st != SBX_RESUMING;
}

/* GET /[?wait=S]: with wait, once it is no longer starting or resuming
 * (a parked VM's start, a resume) or S passed. */
static enum MHD_Result get_sandbox(struct sbx *s, struct MHD_Connection *conn)
{
	long w = api_wait_arg(conn);
	if (w < 0)
		return api_answer_error(conn, 400, "wait: seconds, 0 to %d", WAIT_MAX_S);
	pthread_mutex_lock(&s->mu);
	if (w > 0)
		api_wait_for(s, not_starting, s, w * 1000);
	json_t *j = sbx_json(s);
	pthread_mutex_unlock(&s->mu);
	return api_answer_json(conn, 200, j);
}

static enum MHD_Result stop_sandbox(struct sbx *s, struct MHD_Connection *conn)
{
	pthread_mutex_lock(&s->mu);
	/* while it boots, the run library is told as SIGTERM tells it */
	if (s->state == SBX_STARTING)
		kill(getpid(), SIGTERM);
	if (s->state == SBX_STARTING || s->state == SBX_RUNNING || s->state == SBX_PAUSING ||
	    s->state == SBX_PAUSED || s->state == SBX_RESUMING)
		sbx_set_state(s, SBX_STOPPING, "deleted");
	json_t *j = sbx_json(s);
	pthread_mutex_unlock(&s->mu);
	return api_answer_json(conn, 202, j);
}

static enum MHD_Result set_timeout(struct sbx *s, struct MHD_Connection *conn, json_t *body)
{
	json_t *v = json_object_get(body, "timeout_s");
	double t = json_number_value(v);
	if (!json_is_number(v) || t <= 0 || t > (double)s->max_timeout_s)
		return api_answer_error(conn, 400, "timeout_s: a number of seconds, more than 0 and at most %llu",
				    (unsigned long long)s->max_timeout_s);
	pthread_mutex_lock(&s->mu);
	if (s->state != SBX_RUNNING && s->state != SBX_STARTING) {
		pthread_mutex_unlock(&s->mu);
		return api_answer_error(conn, 409, "the sandbox is not running");
	}
	s->deadline_ms = sbx_realtime_ms() + (int64_t)(t * 1000.0);
	sbx_set_state(s, s->state, NULL);
	json_t *j = sbx_json(s);
	pthread_mutex_unlock(&s->mu);
	return api_answer_json(conn, 200, j);
}

static bool not_pausing(void *arg) { return ((struct sbx *)arg)->state != SBX_PAUSING; }
static bool not_resuming(void *arg) { return ((struct sbx *)arg)->state != SBX_RESUMING; }

/* The longest a pause or a resume request waits for its end: the
 * agent's PAUSED, then vmm's save (or its start and the agent's READY). */
#define PAUSE_ANSWER_MS (SBX_PAUSE_WAIT_MS + RUN_PAUSE_TIMEOUT_MS + 10000)

/* POST /pause: answered once the VM is saved (200, paused), or the pause
 * was called off (409 with why; it goes on) or failed (500). */
static enum MHD_Result pause_sandbox(struct sbx *s, struct MHD_Connection *conn)
{
	pthread_mutex_lock(&s->mu);
	if (s->state != SBX_RUNNING || !s->pausable) {
		const char *why = s->state == SBX_PAUSED   ? "the sandbox is paused already"
				  : s->state != SBX_RUNNING ? "the sandbox is not running"
							    : "the sandbox booted without a snapshot: it cannot pause";
		pthread_mutex_unlock(&s->mu);
		return api_answer_error(conn, 409, "%s", why);
	}
	sbx_pause_begin(s, "");
	api_wait_for(s, not_pausing, s, PAUSE_ANSWER_MS);
	enum sbx_state st = s->state;
	char why[256];
	snprintf(why, sizeof(why), "%s", st == SBX_RUNNING ? s->pause_error : s->reason);
	json_t *j = sbx_json(s);
	pthread_mutex_unlock(&s->mu);
	if (st == SBX_PAUSED)
		return api_answer_json(conn, 200, j);
	json_decref(j);
	return api_answer_error(conn, st == SBX_RUNNING ? 409 : 500, "not paused: %s",
				why[0] ? why : sbx_state_name(st));
}

/* POST /resume {"timeout_s": N}: answered once the VM runs again (200),
 * or failed (500: the sandbox is failed, with why). */
static enum MHD_Result resume_sandbox(struct sbx *s, struct MHD_Connection *conn, json_t *body)
{
	json_t *v = json_object_get(body, "timeout_s");
	double t = v ? json_number_value(v) : 0;
	if (v && (!json_is_number(v) || t <= 0 || t > (double)s->max_timeout_s))
		return api_answer_error(conn, 400, "timeout_s: a number of seconds, more than 0 and at most %llu",
				    (unsigned long long)s->max_timeout_s);
	pthread_mutex_lock(&s->mu);
	if (s->state != SBX_PAUSED || s->diffing || s->parked) {
		enum sbx_state st = s->state;
		bool parked = s->parked;
		pthread_mutex_unlock(&s->mu);
		if (parked)   /* this process is ending: the VM is resumed from what it parked */
			return api_answer_error(conn, 409, "the sandbox is parked: resume it through vmrund, on any node");
		if (st == SBX_PAUSED)
			return api_answer_error(conn, 409, "a diff is reading the workspace: try again when it is done");
		return api_answer_error(conn, 409, "the sandbox is not paused (%s)", sbx_state_name(st));
	}
	s->resume_timeout_s = t;
	sbx_set_state(s, SBX_RESUMING, "");
	api_wait_for(s, not_resuming, s, PAUSE_ANSWER_MS);
	enum sbx_state st = s->state;
	char why[256];
	snprintf(why, sizeof(why), "%s", s->reason);
	json_t *j = sbx_json(s);
	pthread_mutex_unlock(&s->mu);
	if (st == SBX_RUNNING)
		return api_answer_json(conn, 200, j);
	json_decref(j);
	return api_answer_error(conn, 500, "not resumed: %s", why[0] ? why : sbx_state_name(st));
}

static bool settled(void *arg)
{
	const struct sbx *s = arg;
	return s->state != SBX_PAUSING && s->state != SBX_RESUMING;
}

/* POST /checkpoints {"name": N}: the VM paused, its state kept as
 * checkpoint N, resumed at once; answered 201 with the checkpoint and how
 * long the VM was stopped, once it runs again. */
static enum MHD_Result create_checkpoint(struct sbx *s, struct MHD_Connection *conn, json_t *body)
{
	const char *name = json_string_value(json_object_get(body, "name"));
	if (!run_checkpoint_name_ok(name))
		return api_answer_error(conn, 400, "name: 1 to %d characters of [A-Za-z0-9._-], not starting with a dot",
					RUN_CHECKPOINT_NAME_MAX);
	pthread_mutex_lock(&s->mu);
	const char *refused = s->state != SBX_RUNNING ? "the sandbox is not running"
			      : !s->pausable      ? "the sandbox booted without a snapshot: it cannot checkpoint"
						  : NULL;
	char why[300] = "";
	unsigned status = 409;
	uint64_t kept = 0;
	char path[PATH_MAX + 200];
	snprintf(path, sizeof(path), "%s/" RUN_CHECKPOINTS_DIR "/%s", s->keep, name);
	char used[PATH_MAX + 200];
	snprintf(used, sizeof(used), "%s/" RUN_CHECKPOINTS_DIR "/" SBX_CHECKPOINT_USED "%s", s->keep, name);
	if (refused)
		snprintf(why, sizeof(why), "%s", refused);
	else if (access(path, F_OK) == 0)
		snprintf(why, sizeof(why), "checkpoint %s exists", name);
	else if (access(used, F_OK) == 0)
		snprintf(why, sizeof(why), "checkpoint %s was deleted: a name is not taken twice, so that a sandbox's "
			 "checkpoint name always means one state", name);
	else if (sbx_checkpoint_count(s, &kept) >= s->max_checkpoints) {
		snprintf(why, sizeof(why), "the sandbox keeps %u checkpoints, its most: delete one first", s->max_checkpoints);
		status = 429;
	} else if (kept >= s->max_checkpoint_bytes) {
		snprintf(why, sizeof(why), "the sandbox's checkpoints take %llu MiB, their most (max_checkpoint_mib): "
			 "delete one first", (unsigned long long)(kept >> 20));
		status = 429;
	}
	if (why[0]) {
		pthread_mutex_unlock(&s->mu);
		return api_answer_error(conn, status, "%s", why);
	}
	snprintf(s->checkpoint, sizeof(s->checkpoint), "%s", name);
	json_decref(s->checkpoint_meta);
	s->checkpoint_meta = NULL;
	s->checkpoint_error[0] = '\0';
	sbx_pause_begin(s, "");
	api_wait_for(s, settled, s, 2 * PAUSE_ANSWER_MS);
	json_t *meta = s->checkpoint_meta;
	s->checkpoint_meta = NULL;
	snprintf(why, sizeof(why), "%s", s->checkpoint_error[0] ? s->checkpoint_error
					 : s->state == SBX_RUNNING  ? s->pause_error
								    : s->reason);
	bool running = s->state == SBX_RUNNING, over = s->checkpoint_over;
	int64_t stopped = s->last_stop_ms;
	pthread_mutex_unlock(&s->mu);
	if (!meta)
		return api_answer_error(conn, over ? 429 : running ? 409 : 500, "no checkpoint: %s",
					why[0] ? why : "the sandbox ended");
	/* its change from the start, with the VM running again: what a fork
	 * or a verification run with expect_digest is checked against */
	char derr[300];
	if (sbx_checkpoint_digest(s, meta, derr, sizeof(derr)))
		fprintf(stderr, "vmrund-sandbox: checkpoint %s: its digest: %s\n", name, derr);
	json_t *o = sbx_checkpoint_view(meta);
	json_decref(meta);
	json_object_set_new(o, "stopped_ms", json_integer(stopped));
	json_object_set_new(o, "running", json_boolean(running));
	return api_answer_json(conn, 201, o);
}

/* ---- routing ------------------------------------------------------------------------------ */

static json_t *body_json(struct MHD_Connection *conn, const struct req_state *st, enum MHD_Result *rc)
{
	json_error_t je;
	json_t *j = json_loadb(st->body ? st->body : "{}", st->body ? st->len : 2, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(j)) {
		json_decref(j);
		*rc = api_answer_error(conn, 400, "the body is not a JSON object (%s)", je.text);
		return NULL;
	}
	return j;
}

/* "/commands/CID[/rest]": the command (a reference taken), rest into *rest. */
static struct sbx_cmd *command_of(struct sbx *s, const char *url, const char **rest)
{
	const char *p = url + strlen("/commands/");
	char *end;
	unsigned long id = strtoul(p, &end, 10);
	if (end == p || (*end && *end != '/') || id == 0 || id > UINT32_MAX)
		return NULL;
	*rest = end;
	pthread_mutex_lock(&s->mu);
	struct sbx_cmd *c = sbx_cmd_of(s, (uint32_t)id);
	if (c)
		c->refs++;
	pthread_mutex_unlock(&s->mu);
	return c;
}

static enum MHD_Result route_command(struct sbx *s, struct MHD_Connection *conn, const char *method, const char *url,
				     const struct req_state *st)
{
	const char *rest;
	struct sbx_cmd *c = command_of(s, url, &rest);
	if (!c)
		return api_answer_error(conn, 404, "no such command");
	enum MHD_Result rc;
	json_t *body = NULL;
	if (!strcmp(method, "GET") && !*rest) {
		long w = api_wait_arg(conn);
		rc = w < 0 ? api_answer_error(conn, 400, "wait: seconds, 0 to %d", WAIT_MAX_S) : api_answer_cmd(s, conn, c, w, 200);
	} else if (!strcmp(method, "GET") && !strcmp(rest, "/events")) {
		rc = api_cmd_events(s, conn, c);
		return rc;   /* the stream keeps its reference until it ends */
	} else if (!strcmp(method, "POST") && (!strcmp(rest, "/stdin") || !strcmp(rest, "/signal") ||
						!strcmp(rest, "/resize"))) {
		if ((body = body_json(conn, st, &rc)))
			rc = rest[2] == 't' ? api_cmd_stdin(s, conn, c, body)
			     : rest[1] == 's' ? api_cmd_signal(s, conn, c, body) : api_cmd_resize(s, conn, c, body);
	} else {
		rc = api_answer_error(conn, 404, "no such endpoint");
	}
	json_decref(body);
	api_command_put(s, c);
	return rc;
}

static enum MHD_Result route(struct sbx *s, struct MHD_Connection *conn, const char *method, const char *url,
			     struct req_state *st)
{
	enum MHD_Result rc;
	bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
	const char *path = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "path");
	if (!strcmp(url, "/")) {
		if (get)
			return get_sandbox(s, conn);
		if (!strcmp(method, "DELETE"))
			return stop_sandbox(s, conn);
	}
	if (!strncmp(url, "/commands/", 10))
		return route_command(s, conn, method, url, st);
	if (get && !strcmp(url, "/commands"))
		return api_list_commands(s, conn);
	if (get && (!strcmp(url, "/files") || !strcmp(url, "/files/tar")))
		return api_get_file(s, conn, path, url[6] == '/');
	if (get && !strcmp(url, "/files/list"))
		return api_list_files(s, conn, path);
	if (get && !strcmp(url, "/files/stat"))
		return api_fop_simple(s, conn, PROTO_FILE_STAT, path, NULL);
	if (get && !strcmp(url, "/checkpoints"))
		return api_list_checkpoints(s, conn);
	if (get && !strcmp(url, "/diff"))
		return api_diff(s, conn);
	if (!strncmp(url, "/checkpoints/", 13))
		return api_checkpoint(s, conn, method, url + 13);
	if (!post)
		return api_answer_error(conn, 404, "no such endpoint");
	json_t *body = body_json(conn, st, &rc);
	if (!body)
		return rc;
	const char *p = json_string_value(json_object_get(body, "path"));
	if (!strcmp(url, "/commands"))
		rc = api_post_command(s, conn, st->body ? st->body : "", st->len, body);
	else if (!strcmp(url, "/timeout"))
		rc = set_timeout(s, conn, body);
	else if (!strcmp(url, "/pause"))
		rc = pause_sandbox(s, conn);
	else if (!strcmp(url, "/resume"))
		rc = resume_sandbox(s, conn, body);
	else if (!strcmp(url, "/checkpoints"))
		rc = create_checkpoint(s, conn, body);
	else if (!strcmp(url, "/files/mkdir"))
		rc = api_fop_simple(s, conn, PROTO_FILE_MKDIR, p, NULL);
	else if (!strcmp(url, "/files/remove"))
		rc = api_fop_simple(s, conn, PROTO_FILE_REMOVE, p, NULL);
	else if (!strcmp(url, "/files/rename"))
		rc = api_fop_simple(s, conn, PROTO_FILE_RENAME, json_string_value(json_object_get(body, "from")),
				json_string_value(json_object_get(body, "to")) ? json_string_value(json_object_get(body, "to")) : "");
	else
		rc = api_answer_error(conn, 404, "no such endpoint");
	json_decref(body);
	return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	(void)version;
	struct sbx_http *h = cls;
	struct req_state *st = *con_cls;
	if (!st) {
		if (!(st = calloc(1, sizeof(*st))))
			return MHD_NO;
		*con_cls = st;
		if (!strcmp(method, "PUT") && (!strcmp(url, "/files") || !strcmp(url, "/files/tar")))
			return api_put_file(h->s, conn, st, upload, upload_size, url[6] == '/');
		const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > SBX_MAX_BODY) {
			st->answered = true;
			return api_answer_error(conn, 413, "the body is over %u bytes", SBX_MAX_BODY);
		}
		return MHD_YES;
	}
	if (!strcmp(method, "PUT") && (!strcmp(url, "/files") || !strcmp(url, "/files/tar")))
		return api_put_file(h->s, conn, st, upload, upload_size, url[6] == '/');
	if (*upload_size) {
		size_t n = *upload_size;
		*upload_size = 0;
		if (st->answered || st->too_big || st->len + n > SBX_MAX_BODY) {
			st->too_big = true;
			return MHD_YES;
		}
		if (st->len + n + 1 > st->cap) {
			size_t cap = (st->len + n + 1) * 2;
			char *b = realloc(st->body, cap);
			if (!b)
				return MHD_NO;
			st->body = b;
			st->cap = cap;
		}
		memcpy(st->body + st->len, upload, n);
		st->len += n;
		st->body[st->len] = '\0';
		return MHD_YES;
	}
	if (st->answered)
		return MHD_YES;
	if (st->too_big)
		return api_answer_error(conn, 413, "the body is over %u bytes", SBX_MAX_BODY);
	return route(h->s, conn, method, url, st);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode t)
{
	(void)conn;
	(void)t;
	struct sbx_http *h = cls;
	struct req_state *st = *con_cls;
	if (!st)
		return;
	if (st->write) {   /* a PUT cut short: its write ends, as far as it got */
		(void)sbx_send(h->s, PROTO_FILE_DATA, &st->write_id, PROTO_SB_ID_LEN, NULL, 0);
		pthread_mutex_lock(&h->s->mu);
		st->write->abandoned = true;
		if (st->write->ended)
			sbx_fop_free(st->write);
		pthread_mutex_unlock(&h->s->mu);
	}
	free(st->body);
	free(st);
	*con_cls = NULL;
}

struct sbx_http *sbx_http_start(struct sbx *s, char *err, size_t errlen)
{
	struct sbx_http *h = calloc(1, sizeof(*h));
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	h->s = s;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int n = snprintf(h->path, sizeof(h->path), "%s/" SBX_API_SOCK, s->dir);
	if (n < 0 || (size_t)n >= sizeof(a.sun_path)) {
		snprintf(err, errlen, "%s/" SBX_API_SOCK ": too long for a Unix socket", s->dir);
		free(h);
		return NULL;
	}
	memcpy(a.sun_path, h->path, (size_t)n + 1);
	unlink(h->path);
	h->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (h->fd < 0 || bind(h->fd, (struct sockaddr *)&a, sizeof(a)) < 0 || chmod(h->path, 0600) < 0 ||
	    listen(h->fd, 64) < 0) {
		snprintf(err, errlen, "%s: %s", h->path, strerror(errno));
		if (h->fd >= 0)
			close(h->fd);
		free(h);
		return NULL;
	}
	h->mhd = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0,
				  NULL, NULL, on_request, h, MHD_OPTION_LISTEN_SOCKET, h->fd, MHD_OPTION_NOTIFY_COMPLETED,
				  on_completed, h, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)0, MHD_OPTION_END);
	if (!h->mhd) {
		snprintf(err, errlen, "%s: libmicrohttpd would not start", h->path);
		close(h->fd);
		unlink(h->path);
		free(h);
		return NULL;
	}
	return h;
}

void sbx_http_stop(struct sbx_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->mhd);
	close(h->fd);
	unlink(h->path);
	free(h);
}
