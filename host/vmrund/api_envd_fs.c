/* filesystem.Filesystem and envd's /files (api_envd.h), as calls on the
 * sandbox's supervisor's /files API: Stat, ListDir (walked level by
 * level), MakeDir, Move, Remove, WatchDir (the directory listed again
 * every ENVD_WATCH_MS and the listings compared: vmrun's agent has no
 * watch of its own), and uploads and downloads of whole files. */
#include "api.h"

#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api_envd.h"
#include "clock.h"
#include "daemon.h"
#include "errmsg.h"

#define ENVD_UPLOAD_PARTS 64      /* files in one multipart upload */
#define ENVD_WATCH_MS 250         /* a watched directory listed again */

/* ---- filesystem.Filesystem ---------------------------------------------------------------- */

/* The request's "path" (or another field) as an absolute path into abs:
 * 0, or -1 after answering 400. */
static int path_of(struct call *c, const json_t *req, const char *field, char abs[PATH_MAX])
{
	const char *p = json_string_value(json_object_get(req, field));
	if (!p || strlen(p) != json_string_length(json_object_get(req, field)) || envd_abs_path(p, abs, PATH_MAX) ||
	    strlen(abs) > SBXU_PATH_MAX) {
		call_fail(c, ENVD_INVALID_ARGUMENT, "%s: a path of at most %d bytes", field, SBXU_PATH_MAX);
		return -1;
	}
	return 0;
}

/* "/files/OP?path=" with abs percent-encoded. */
static void op_target(const char *op, const char *abs, char *out, size_t cap)
{
	size_t n = (size_t)snprintf(out, cap, "/files/%s?path=", op);
	sbxc_query_encode(abs, out + n, cap - n);
}

/* The entry at abs: its status (200 with *entry an EntryInfo), or -1. */
static int stat_of(struct call *c, const char *abs, json_t **entry, json_t **out)
{
	char target[SBXC_TARGET_MAX];
	op_target("stat", abs, target, sizeof(target));
	*entry = NULL;
	int st = sbxu_call(&c->u, c->id, "GET", target, NULL, SBXU_CALL_MS, out);
	if (st == 200 && !(*entry = envd_entry(*out, abs, true)))
		st = 415;   /* neither file, directory nor symlink */
	return st;
}

static enum MHD_Result answer_entry(struct call *c, const char *abs)
{
	json_t *entry, *out;
	int st = stat_of(c, abs, &entry, &out);
	enum MHD_Result rc = st == 200 ? call_unary(c, json_pack("{s:o}", "entry", entry))
		: st == 404 ? call_fail(c, ENVD_NOT_FOUND, "path '%s' does not exist", abs)
		: st == 415 ? call_fail(c, ENVD_INVALID_ARGUMENT, "path '%s' is neither a file, a directory nor a symlink", abs)
			    : call_failed(c, st, out, abs);
	json_decref(out);
	return rc;
}

static int by_path(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* What walk met that ends it. */
enum walk_end {
	WALK_OK = 0,
	WALK_GONE,                    /* the root is not there */
	WALK_OVER,                    /* more than ENVD_LIST_MAX entries */
	WALK_LONG,                    /* a path past SBXU_PATH_MAX */
	WALK_FAILED,                  /* the supervisor: its status in *status (-1: none came, u->err) */
};

/* depth levels under root, breadth first: each entry's native answer
 * (name, type, size, mode, mtime) under its absolute path into found.
 * A directory below the root that went while it was walked is passed
 * over. */
static enum walk_end walk(struct sbx_user *u, const char *id, const char *root, unsigned depth, json_t *found,
			  int *status)
{
	json_t *dirs = json_pack("[s]", root);
	enum walk_end end = dirs ? WALK_OK : WALK_FAILED;
	*status = -1;
	for (unsigned level = 0; level < depth && json_array_size(dirs) && !end; level++) {
		json_t *next = json_array(), *v;
		size_t i;
		json_array_foreach(dirs, i, v) {
			char target[SBXC_TARGET_MAX], path[PATH_MAX];
			const char *dir = json_string_value(v);
			if (strlen(dir) > SBXU_PATH_MAX) {
				end = WALK_LONG;
				break;
			}
			op_target("list", dir, target, sizeof(target));
			json_t *out, *e;
			int st = sbxu_call(u, id, "GET", target, NULL, SBXU_CALL_MS, &out);
			/* one below the root that went (or is no directory now) while
			 * it was walked is passed over; any other failure is the walk's,
			 * or a watch would see everything under it removed */
			if ((st == 404 || st == 400) && level > 0) {
				json_decref(out);
				continue;
			}
			if (st != 200 || json_is_true(json_object_get(out, "truncated")))
				end = st == 200 ? WALK_OVER : st == 404 ? WALK_GONE : WALK_FAILED;
			*status = st;
			size_t k;
			json_array_foreach(end ? NULL : json_object_get(out, "entries"), k, e) {
				const char *name = json_string_value(json_object_get(e, "name"));
				if (!name || snprintf(path, sizeof(path), "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", name) >=
						     (int)sizeof(path))
					continue;
				const char *type = json_string_value(json_object_get(e, "type"));
				if (type && !strcmp(type, "dir"))
					json_array_append_new(next, json_string(path));
				json_object_set(found, path, e);
			}
			json_decref(out);
			if (!end && json_object_size(found) > ENVD_LIST_MAX)
				end = WALK_OVER;
			if (end)
				break;
		}
		json_decref(dirs);
		dirs = next;
	}
	json_decref(dirs);
	return end;
}

/* walk's end, answered. */
static enum MHD_Result walk_failed(struct call *c, enum walk_end end, int status, const char *root)
{
	switch (end) {
	case WALK_GONE: return call_fail(c, ENVD_NOT_FOUND, "path '%s' does not exist", root);
	case WALK_OVER: return call_fail(c, ENVD_RESOURCE_EXHAUSTED, "%s: more than %d entries", root, ENVD_LIST_MAX);
	case WALK_LONG: return call_fail(c, ENVD_INVALID_ARGUMENT, "%.100s...: a path under it is over %d bytes", root,
					 SBXU_PATH_MAX);
	default: return call_failed(c, status, NULL, root);
	}
}

/* The request's depth (1 when absent or 0, protobuf's default): 0, or -1
 * after answering 400. */
static int depth_of(struct call *c, const json_t *req, unsigned *depth)
{
	json_t *d = json_object_get(req, "depth");
	json_int_t n = d ? json_integer_value(d) : 1;
	if ((d && !json_is_integer(d)) || n < 0 || n > ENVD_DEPTH_MAX) {
		call_fail(c, ENVD_INVALID_ARGUMENT, "depth: 1 to %d", ENVD_DEPTH_MAX);
		return -1;
	}
	*depth = n ? (unsigned)n : 1;
	return 0;
}

/* ListDir: depth levels under abs, in the order of their paths (as Go's
 * filepath.WalkDir gives them, envd's walk), at most ENVD_LIST_MAX
 * entries (past them, resource_exhausted: E2B gives all or nothing). */
static enum MHD_Result list_dir(struct call *c, const json_t *req, const char *abs)
{
	unsigned depth;
	if (depth_of(c, req, &depth))
		return MHD_YES;
	json_t *found = json_object(), *entries = json_array();
	int st = -1;
	enum walk_end end = found && entries ? walk(&c->u, c->id, abs, depth, found, &st) : WALK_FAILED;
	enum MHD_Result rc = end ? walk_failed(c, end, st, abs) : MHD_YES;
	if (!end) {
		/* jansson keeps an object's keys in the order they came: sorted here */
		size_t n = json_object_size(found), k = 0;
		const char **paths = n ? calloc(n, sizeof(*paths)) : NULL;
		const char *path;
		json_t *e;
		json_object_foreach(found, path, e) {
			if (paths)
				paths[k++] = path;
		}
		if (paths)
			qsort(paths, n, sizeof(*paths), by_path);
		for (k = 0; paths && k < n; k++) {
			json_t *info = envd_entry(json_object_get(found, paths[k]), paths[k], true);
			if (info)
				json_array_append_new(entries, info);
		}
		rc = n && !paths ? call_fail(c, ENVD_INTERNAL, "out of memory")
				 : call_unary(c, json_pack("{s:O}", "entries", entries));
		free(paths);
	}
	json_decref(found);
	json_decref(entries);
	return rc;
}

/* ---- WatchDir ---------------------------------------------------------------------------- */

/* A directory watched: listed every ENVD_WATCH_MS, the changes sent as
 * FilesystemEvents. */
struct watch {
	struct vmrund *d;
	unsigned tenant;              /* whose stream place it holds */
	struct sbx_user u;
	char id[STORE_ID_LEN + 1];
	char root[PATH_MAX];
	unsigned depth;               /* 1, or ENVD_DEPTH_MAX when recursive */
	bool entries;                 /* includeEntry */
	json_t *last;                 /* the last listing */
	struct pace pace;             /* frames not yet sent, the client's deadline, keepalives */
	int64_t next_look_ms;         /* monotonic */
};

/* List the directory again, and frame what changed. */
static void look(struct watch *w)
{
	json_t *now = json_object();
	int st = -1;
	enum walk_end end = now ? walk(&w->u, w->id, w->root, w->depth, now, &st) : WALK_FAILED;
	if (end == WALK_FAILED && st > 0 && st != 409) {
		/* the supervisor was busy (429: its file operations) or slow:
		 * the last listing stands, and the next look tries again */
		json_decref(now);
		return;
	}
	if (end) {
		json_decref(now);
		char why[160];
		snprintf(why, sizeof(why), "%s", end == WALK_GONE ? "the watched directory is gone"
			 : end == WALK_OVER ? "the watched directory holds more entries than a listing gives"
			 : end == WALK_LONG ? "a path under the watched directory is too long to list"
					    : "the sandbox stopped while its directory was watched");
		envd_out_end(&w->pace.out, end == WALK_GONE ? ENVD_NOT_FOUND : end == WALK_OVER ? ENVD_RESOURCE_EXHAUSTED
				      : end == WALK_LONG ? ENVD_INVALID_ARGUMENT : ENVD_UNAVAILABLE, why);
		return;
	}
	json_t *events = envd_watch_events(w->last, now, w->root, w->entries), *ev;
	size_t i;
	json_array_foreach(events, i, ev)
		envd_out_frame(&w->pace.out, json_pack("{s:O}", "filesystem", ev));
	json_decref(events);
	json_decref(w->last);
	w->last = now;
}

/* Look again when it is time, else wait until then at most. */
static void watch_step(void *ctx, int64_t now, int64_t until)
{
	struct watch *w = ctx;
	if (now >= w->next_look_ms) {
		look(w);
		/* from the walk's end: a long walk is not followed by another at once */
		w->next_look_ms = clock_mono_ms() + ENVD_WATCH_MS;
	} else {
		poll(NULL, 0, (int)((w->next_look_ms < until ? w->next_look_ms : until) - now));
	}
}

static ssize_t watch_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct watch *w = cls;
	return pace_read(&w->pace, buf, max, watch_step, w);
}

static void watch_free(void *cls)
{
	struct watch *w = cls;
	vmrund_stream_end(w->d, w->tenant);
	json_decref(w->last);
	pace_free(&w->pace);
	free(w);
}

/* WatchDir {path, recursive, includeEntry}: the directory's first
 * listing (its errors answered as the call's), then its changes. */
static enum MHD_Result watch_dir(struct call *c, const json_t *req, const char *abs)
{
	if (json_is_true(json_object_get(req, "allowNetworkMounts")))
		return call_fail(c, ENVD_UNIMPLEMENTED, "allowNetworkMounts: a sandbox has no network mounts");
	if (!call_place(c))
		return MHD_YES;
	struct http_req *r = c->r;
	struct watch *w = calloc(1, sizeof(*w));
	if (!w) {
		vmrund_stream_end(r->d, (unsigned)r->tenant);
		return MHD_NO;
	}
	*w = (struct watch){ .d = r->d, .tenant = (unsigned)r->tenant, .u = c->u,
			     .depth = json_is_true(json_object_get(req, "recursive")) ? ENVD_DEPTH_MAX : 1,
			     .entries = json_is_true(json_object_get(req, "includeEntry")),
			     .next_look_ms = clock_mono_ms() + ENVD_WATCH_MS };
	pace_start(&w->pace, r, 0, "the watch's timeout (timeoutMs) passed", json_pack("{s:{}}", "keepalive"));
	snprintf(w->id, sizeof(w->id), "%s", c->id);
	snprintf(w->root, sizeof(w->root), "%s", abs);
	int st = -1;
	enum walk_end end = (w->last = json_object()) ? walk(&w->u, w->id, w->root, w->depth, w->last, &st) : WALK_FAILED;
	if (end) {
		watch_free(w);
		return walk_failed(c, end, st, abs);
	}
	struct MHD_Response *resp = NULL;
	if (!envd_out_frame(&w->pace.out, json_pack("{s:{}}", "start")))
		resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 65536, watch_read, w, watch_free);
	if (!resp) {
		watch_free(w);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/connect+json");
	return http_queue(r, 200, resp);
}

/* A change (mkdir, remove, rename) by the supervisor: its status, with
 * what it said in *out. */
static int change(struct call *c, const char *op, json_t *body, json_t **out)
{
	char target[32];
	snprintf(target, sizeof(target), "/files/%s", op);
	int st = sbxu_call(&c->u, c->id, "POST", target, body, SBXU_CALL_MS, out);
	json_decref(body);
	return st;
}

static enum MHD_Result make_dir(struct call *c, const char *abs)
{
	json_t *entry, *out;
	/* the agent's mkdir is mkdir -p, which E2B's is too, but E2B says
	 * already_exists of one that was there (the SDK's false) */
	int st = stat_of(c, abs, &entry, &out);
	json_decref(out);
	json_decref(entry);
	if (st == 200)
		return call_fail(c, ENVD_ALREADY_EXISTS, "path '%s' already exists", abs);
	if ((st = change(c, "mkdir", json_pack("{s:s}", "path", abs), &out)) != 200) {
		enum MHD_Result rc = call_failed(c, st, out, abs);
		json_decref(out);
		return rc;
	}
	json_decref(out);
	return answer_entry(c, abs);
}

enum MHD_Result envd_filesystem(struct call *c, const char *method)
{
	c->stream = !strcmp(method, "WatchDir");
	c->r->stream = c->stream;
	/* the SDK watches by the stream; these are envd's polling watchers, which it does not call */
	if (!strcmp(method, "CreateWatcher") || !strcmp(method, "GetWatcherEvents") || !strcmp(method, "RemoveWatcher"))
		return call_fail(c, ENVD_UNIMPLEMENTED, "filesystem.Filesystem/%s: vmrun watches by WatchDir (docs/e2b.md)",
				 method);
	bool known = c->stream || !strcmp(method, "Stat") || !strcmp(method, "ListDir") || !strcmp(method, "MakeDir") ||
		     !strcmp(method, "Move") || !strcmp(method, "Remove");
	if (!known) {
		char m[80];
		return call_fail(c, ENVD_UNIMPLEMENTED, "filesystem.Filesystem/%s: no such method",
			    errmsg_printable(m, sizeof(m), method));
	}
	if (call_begin(c) != 1)
		return MHD_YES;
	json_t *req = call_message(c);
	if (!req)
		return MHD_YES;
	char abs[PATH_MAX], to[PATH_MAX];
	enum MHD_Result rc = MHD_YES;
	json_t *out = NULL;
	int st;
	if (!strcmp(method, "Move")) {
		if (path_of(c, req, "source", abs) || path_of(c, req, "destination", to))
			goto out;
		st = change(c, "rename", json_pack("{s:s, s:s}", "from", abs, "to", to), &out);
		rc = st == 200 ? answer_entry(c, to) : st == 404 ? call_fail(c, ENVD_NOT_FOUND, "path '%s' does not exist", abs)
								   : call_failed(c, st, out, abs);
		goto out;
	}
	if (path_of(c, req, "path", abs))
		goto out;
	if (!strcmp(method, "Stat")) {
		rc = answer_entry(c, abs);
	} else if (!strcmp(method, "ListDir")) {
		rc = list_dir(c, req, abs);
	} else if (c->stream) {
		rc = watch_dir(c, req, abs);
	} else if (!strcmp(method, "MakeDir")) {
		rc = make_dir(c, abs);
	} else {
		st = change(c, "remove", json_pack("{s:s}", "path", abs), &out);
		rc = st == 200 ? call_unary(c, json_object()) : st == 404 ? call_fail(c, ENVD_NOT_FOUND, "path '%s' does not exist", abs)
								     : call_failed(c, st, out, abs);
	}
out:
	json_decref(out);
	json_decref(req);
	return rc;
}

/* ---- /files and /health -------------------------------------------------------------------- */

/* A multipart upload's parts, as libmicrohttpd's post processor hands
 * them over: each "file" field's name (E2B's SDK puts the file's path
 * there) and bytes. */
struct upload {
	struct part {
		char *name;
		char *data;
		size_t len, cap;
	} part[ENVD_UPLOAD_PARTS];
	unsigned n;
	bool over;                    /* more parts than fit, or out of memory */
};

static enum MHD_Result on_part(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
			       const char *type, const char *encoding, const char *data, uint64_t off, size_t size)
{
	(void)kind;
	(void)type;
	(void)encoding;
	struct upload *u = cls;
	if (strcmp(key, "file") || u->over)
		return MHD_YES;
	struct part *p = u->n ? &u->part[u->n - 1] : NULL;
	if (!p || off == 0) {
		if (u->n == ENVD_UPLOAD_PARTS) {
			u->over = true;
			return MHD_YES;
		}
		p = &u->part[u->n++];
		if (!(p->name = strdup(filename ? filename : ""))) {
			u->over = true;
			return MHD_YES;
		}
	}
	if (p->len + size + 1 > p->cap) {
		size_t cap = (p->len + size + 1) * 2;
		char *more = realloc(p->data, cap);
		if (!more) {
			u->over = true;
			return MHD_YES;
		}
		p->data = more;
		p->cap = cap;
	}
	memcpy(p->data + p->len, data, size);
	p->len += size;
	return MHD_YES;
}

static void upload_free(struct upload *u)
{
	for (unsigned i = 0; i < u->n; i++) {
		free(u->part[i].name);
		free(u->part[i].data);
	}
}

/* Put n bytes at path (from the client: made absolute here), adding its
 * WriteInfo to a: 0, or -1 after answering. */
static int put(struct call *c, const char *path, const char *data, size_t n, json_t *a)
{
	char abs[PATH_MAX];
	if (!*path || envd_abs_path(path, abs, sizeof(abs))) {
		http_error(c->r, 400, 0, "a file's path is missing or too long");
		return -1;
	}
	int rc = sbxu_put_file(&c->u, c->id, abs, data, n);
	if (rc == 404) {
		/* envd makes the directories a file is written into, as the SDK expects */
		char dir[PATH_MAX];
		snprintf(dir, sizeof(dir), "%s", abs);
		*strrchr(dir, '/') = '\0';
		json_t *out = NULL;
		if (*dir && change(c, "mkdir", json_pack("{s:s}", "path", dir), &out) == 200)
			rc = sbxu_put_file(&c->u, c->id, abs, data, n);
		json_decref(out);
	}
	if (rc) {
		http_error(c->r, rc >= 400 && rc <= 599 ? (unsigned)rc : 502, 0, "%s", c->u.err);
		return -1;
	}
	const char *slash = strrchr(abs, '/');
	json_array_append_new(a, json_pack("{s:s, s:s, s:s}", "name", slash ? slash + 1 : abs, "type", "file", "path", abs));
	return 0;
}

/* POST /files: one file (application/octet-stream, at ?path=) or several
 * (multipart/form-data, each at its part's file name, or at ?path= when
 * there is one part), each put whole (the body is held as vmrund holds
 * every body, up to max_body). */
static enum MHD_Result upload(struct call *c)
{
	struct http_req *r = c->r;
	const char *type = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	const char *path = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "path");
	const char *enc = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);
	if (enc && strcasecmp(enc, "identity"))
		return http_error(r, 415, 0, "Content-Encoding %.40s: vmrun's envd takes uploads uncompressed (gzip: false)", enc);
	json_t *a = json_array();
	if (type && !strncasecmp(type, "multipart/form-data", 19)) {
		struct upload *u = calloc(1, sizeof(*u));
		struct MHD_PostProcessor *pp = u ? MHD_create_post_processor(r->conn, 65536, on_part, u) : NULL;
		bool parsed = pp && MHD_post_process(pp, r->body, r->body_len) == MHD_YES;
		if (pp)
			MHD_destroy_post_processor(pp);
		enum MHD_Result rc = MHD_YES;
		if (!u || !parsed || u->over || !u->n) {
			rc = http_error(r, 400, 0, "the upload: %s", !u ? "out of memory"
				: !parsed ? "not a multipart/form-data body" : u->over ? "more than 64 files, or out of memory"
									  : "no \"file\" part");
			json_decref(a);
			a = NULL;
		}
		for (unsigned i = 0; a && i < u->n; i++) {
			const char *name = u->n == 1 && path && *path ? path : u->part[i].name;
			if (put(c, name, u->part[i].data ? u->part[i].data : "", u->part[i].len, a)) {
				json_decref(a);
				a = NULL;
			}
		}
		if (u)
			upload_free(u);
		free(u);
		return a ? http_json(r, 200, a) : rc;
	}
	if (!path || put(c, path, r->body, r->body_len, a)) {
		json_decref(a);
		return path ? MHD_YES : http_error(r, 400, 0, "path: the file's path is required (?path=)");
	}
	return http_json(r, 200, a);
}

enum MHD_Result envd_files(struct call *c)
{
	bool get = !strcmp(c->r->method, "GET"), post = !strcmp(c->r->method, "POST");
	if (!get && !post)
		return http_error(c->r, 405, 0, "GET or POST here");
	if (call_begin(c) != 1)
		return MHD_YES;
	if (post)
		return upload(c);
	/* the supervisor reads ?path= as envd does, relative to the home */
	const char *path = MHD_lookup_connection_value(c->r->conn, MHD_GET_ARGUMENT_KIND, "path");
	if (!path || !*path)
		return http_error(c->r, 400, 0, "path: the file's path is required (?path=)");
	return api_sandbox_pass(c->r, c->id, "/files");
}

