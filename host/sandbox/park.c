/* A pause that outlives its supervisor (supervisor.h's park.c): with
 * --shared, the paused VM, its workspace, its command outputs and the
 * sandbox's own table go into SHARED/paused, a directory every node of a
 * cluster mounts, and this process ends. Any node then resumes it with
 * --from-paused: the same VM (not reseeded, unlike a fork), the same
 * command ids, a running command's output still coming to its record.
 * Everything is checked before the VM starts: vmm checks the state and
 * pages against their checksums and the base they name, the run library
 * the workspace against its sum, and here the table against its own
 * SHA-256 and each output against the one the table gives it. */
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errmsg.h"
#include "hex.h"
#include "run_pause.h"
#include "spool.h"
#include "tree.h"
#include "../../vmm/snapshot.h"

#define PARK_META_MAX (16u << 20)   /* 256 commands' requests and 64 Ki keys fit well below */

/* ---- the table, as SBX_PARK_META says it ----------------------------------------- */

static json_t *exit_json(const struct proto_exit *e)
{
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "kind", (json_int_t)e->kind, "code", (json_int_t)e->code,
			 "signal", (json_int_t)e->signal, "flags", (json_int_t)e->flags, "cpu_ms", (json_int_t)e->cpu_ms,
			 "max_rss_kib", (json_int_t)e->max_rss_kib, "stdout_bytes", (json_int_t)e->stdout_bytes,
			 "stderr_bytes", (json_int_t)e->stderr_bytes);
}

json_t *sbx_park_meta(const struct sbx *s)
{
	json_t *cmds = json_array(), *keys = json_array();
	for (unsigned i = 0; i < s->ncmd; i++) {
		const struct sbx_cmd *c = s->cmd[i];
		json_array_append_new(cmds, json_pack("{s:I,s:O?,s:b,s:o,s:I,s:I,s:[I,I],s:b}", "id", (json_int_t)c->id,
						      "request", c->request, "ended", c->ended, "exit",
						      c->ended ? exit_json(&c->exit) : json_null(), "started_ms",
						      (json_int_t)c->started_ms, "ended_ms", (json_int_t)c->ended_ms, "kept",
						      (json_int_t)c->kept[0], (json_int_t)c->kept[1], "stdin_closed",
						      c->stdin_closed));
	}
	for (unsigned i = 0; i < s->nkeys; i++)
		json_array_append_new(keys, json_pack("{s:s,s:s,s:I}", "key", s->keys[i].key, "hash", s->keys[i].hash,
						      "id", (json_int_t)s->keys[i].id));
	return json_pack("{s:i,s:I,s:I,s:I,s:I,s:f,s:I,s:I,s:I,s:o,s:o}", "version", SBX_PARK_VERSION, "created_ms",
			 (json_int_t)s->created_ms, "started_ms", (json_int_t)s->started_ms, "stopped_ms",
			 (json_int_t)s->stopped_ms, "left_ms",
			 (json_int_t)s->left_ms, "timeout_s", s->timeout_s, "pauses", (json_int_t)s->pauses, "next_cmd",
			 (json_int_t)s->next_cmd, "inherited_below", (json_int_t)s->inherited_below, "commands", cmds,
			 "keys", keys);
}

/* o.name as an integer in [lo, hi] into *v: 0, or -1. */
static int get_int(const json_t *o, const char *name, json_int_t lo, json_int_t hi, json_int_t *v)
{
	const json_t *j = json_object_get(o, name);
	if (!json_is_integer(j) || json_integer_value(j) < lo || json_integer_value(j) > hi)
		return -1;
	*v = json_integer_value(j);
	return 0;
}

static int load_exit(const json_t *e, struct proto_exit *x)
{
	json_int_t v[8];
	const char *names[] = { "kind", "code", "signal", "flags", "cpu_ms", "max_rss_kib", "stdout_bytes", "stderr_bytes" };
	for (size_t i = 0; i < 8; i++)
		if (get_int(e, names[i], i == 1 ? -1 : 0, i < 4 ? INT32_MAX : INT64_MAX, &v[i]))
			return -1;
	*x = (struct proto_exit){ .kind = (uint32_t)v[0], .code = (int32_t)v[1], .signal = (int32_t)v[2],
				  .flags = (uint32_t)v[3], .cpu_ms = (uint64_t)v[4], .max_rss_kib = (uint64_t)v[5],
				  .stdout_bytes = (uint64_t)v[6], .stderr_bytes = (uint64_t)v[7] };
	return 0;
}

/* One command's record from c (its id below next). NULL when c is not one. */
static struct sbx_cmd *load_cmd(const json_t *c, uint32_t next)
{
	json_int_t id, started, ended_ms, k0, k1;
	const json_t *kept = json_object_get(c, "kept"), *rq = json_object_get(c, "request"),
		     *ended = json_object_get(c, "ended"), *e = json_object_get(c, "exit");
	if (get_int(c, "id", 1, (json_int_t)next - 1, &id) || get_int(c, "started_ms", 0, INT64_MAX, &started) ||
	    get_int(c, "ended_ms", 0, INT64_MAX, &ended_ms) || !json_is_array(kept) || json_array_size(kept) != 2 ||
	    !json_is_integer(json_array_get(kept, 0)) || !json_is_integer(json_array_get(kept, 1)) ||
	    !(json_is_object(rq) || json_is_null(rq)) || !json_is_boolean(ended) || !hex_is_sha256(json_string_value(json_object_get(c, "sha256"))))
		return NULL;
	k0 = json_integer_value(json_array_get(kept, 0));
	k1 = json_integer_value(json_array_get(kept, 1));
	struct sbx_cmd *r = calloc(1, sizeof(*r));
	if (!r || k0 < 0 || k1 < 0 || (json_is_true(ended) && (!json_is_object(e) || load_exit(e, &r->exit)))) {
		free(r);
		return NULL;
	}
	r->id = (uint32_t)id;
	r->request = json_is_null(rq) ? NULL : json_incref((json_t *)rq);   /* a refused command's record has none */
	r->ended = json_is_true(ended);
	r->started_ms = started;
	r->ended_ms = ended_ms;
	r->kept[0] = (uint64_t)k0;
	r->kept[1] = (uint64_t)k1;
	r->stdin_closed = json_is_true(json_object_get(c, "stdin_closed"));
	r->out_fd = -1;
	return r;
}

int sbx_park_load(struct sbx *s, const json_t *meta, char *err, size_t errlen)
{
	json_int_t version, created, started, stopped, left, pauses, next, below;
	const json_t *cmds = json_object_get(meta, "commands"), *keys = json_object_get(meta, "keys"),
		     *timeout = json_object_get(meta, "timeout_s");
	if (get_int(meta, "version", 0, INT32_MAX, &version) || version != SBX_PARK_VERSION)
		return errf(err, errlen, "the parked sandbox's table is of another version (this supervisor reads %d)",
			    SBX_PARK_VERSION);
	if (get_int(meta, "created_ms", 0, INT64_MAX, &created) || get_int(meta, "started_ms", 0, INT64_MAX, &started) ||
	    get_int(meta, "stopped_ms", 0, INT64_MAX, &stopped) || get_int(meta, "left_ms", 0, INT64_MAX, &left) || get_int(meta, "pauses", 0, UINT32_MAX, &pauses) ||
	    get_int(meta, "next_cmd", 1, UINT32_MAX / 2, &next) || get_int(meta, "inherited_below", 0, next, &below) ||
	    !json_is_number(timeout) || !json_is_array(cmds) || json_array_size(cmds) > SBX_MAX_CMDS ||
	    !json_is_array(keys) || json_array_size(keys) > SBX_MAX_KEYS)
		return errf(err, errlen, "the parked sandbox's table is not one");
	size_t i;
	const json_t *v;
	json_array_foreach(cmds, i, v) {
		struct sbx_cmd *c = load_cmd(v, (uint32_t)next);
		if (!c || sbx_cmd_of(s, c->id)) {
			if (c) {
				json_decref(c->request);
				free(c);
			}
			return errf(err, errlen, "the parked sandbox's command %zu is not one", i);
		}
		s->cmd[s->ncmd++] = c;
		s->running += !c->ended;
	}
	json_array_foreach(keys, i, v) {
		const char *k = json_string_value(json_object_get(v, "key")), *h = json_string_value(json_object_get(v, "hash"));
		json_int_t id;
		if (!k || !*k || strlen(k) > SBX_IDEM_KEY_MAX || !hex_is_sha256(h) || get_int(v, "id", 1, next - 1, &id))
			return errf(err, errlen, "the parked sandbox's Idempotency-Key %zu is not one", i);
		if (sbx_key_add(s, k, h, (uint32_t)id))
			return errf(err, errlen, "out of memory");
	}
	s->created_ms = created;
	s->started_ms = started;
	s->stopped_ms = stopped;
	s->left_ms = left;
	s->pauses = (unsigned)pauses;
	s->next_cmd = (uint32_t)next;
	s->inherited_below = (uint32_t)below;
	return 0;
}

/* ---- the files ---------------------------------------------------------------------- */

/* SNAPSHOT_DIR/bases (shared is SNAPSHOT_DIR/sandboxes/ID) into out. */
static int bases_dir(const char *shared, char *out, size_t len)
{
	if (snprintf(out, len, "%s", shared) >= (int)len)
		return -1;
	for (int up = 0; up < 2; up++) {
		char *slash = strrchr(out, '/');
		if (!slash || slash == out)
			return -1;
		*slash = '\0';
	}
	size_t n = strlen(out);
	return n + sizeof("/" SBX_BASES_DIR) <= len ? (memcpy(out + n, "/" SBX_BASES_DIR, sizeof("/" SBX_BASES_DIR)), 0) : -1;
}

/* The base snapshot at snap, kept once in bases/SUM (SUM its state's
 * SHA-256): made whole under a name of its own and renamed, so that two
 * nodes that park at once do not meet half a base. Its path into out. */
static int keep_base(const char *bases, const char *snap, char *out, size_t len, char *err, size_t errlen)
{
	char path[PATH_MAX + 256], tmp[PATH_MAX + 128], sum[65];
	snprintf(path, sizeof(path), "%s/" SNAP_STATE_FILE, snap);
	if (sha256_file_hex(path, sum))
		return errf(err, errlen, "the base snapshot's state: %s", strerror(errno));
	snprintf(out, len, "%s/%s", bases, sum);
	snprintf(path, sizeof(path), "%s/" SNAP_MEMORY_FILE, out);
	if (access(path, F_OK) == 0)
		return 0;
	/* a name of its own on any node (a pid is not): vmrund sweeps one left behind */
	snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", bases, sum);
	if ((mkdir(bases, 0700) < 0 && errno != EEXIST) || !mkdtemp(tmp) || run_pause_keep_base(snap, tmp)) {
		int e = errno;
		tree_remove(tmp, 1);
		return errf(err, errlen, "keeping the base snapshot in %s: %s", tmp, strerror(e));
	}
	/* another node's rename first: its base is the same bytes by its sum */
	if (rename(tmp, out) < 0 && access(path, F_OK) < 0) {
		int e = errno;
		tree_remove(tmp, 1);
		return errf(err, errlen, "%s: %s", out, strerror(e));
	}
	tree_remove(tmp, 1);
	return 0;
}

/* Each command's output into to/cmds, its SHA-256 into its entry of meta. */
static int keep_outputs(const struct sbx *s, json_t *meta, const char *to, char *err, size_t errlen)
{
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(meta, "commands"), i, c) {
		char from[PATH_MAX + 64], dst[PATH_MAX + 64], sum[65];
		json_int_t id = json_integer_value(json_object_get(c, "id"));
		snprintf(from, sizeof(from), "%s/" SBX_CMDS_DIR "/%lld.out", s->dir, (long long)id);
		snprintf(dst, sizeof(dst), "%s/" SBX_CMDS_DIR "/%lld.out", to, (long long)id);
		if (run_pause_copy(from, dst) || sha256_file_hex(dst, sum))
			return errf(err, errlen, "keeping command %lld's output: %s", (long long)id, strerror(errno));
		json_object_set_new(c, "sha256", json_string(sum));
	}
	return 0;
}

/* The meta and its sum, written into dir. */
static int write_meta(const json_t *meta, const char *dir, char *err, size_t errlen)
{
	char *text = json_dumps(meta, JSON_COMPACT), path[PATH_MAX + 64], sum[66];
	if (!text)
		return errf(err, errlen, "out of memory");
	sha256_hex(text, strlen(text), sum);
	sum[64] = '\n';
	snprintf(path, sizeof(path), "%s/" SBX_PARK_META, dir);
	int rc = spool_write_file(path, text, strlen(text), true, 0600);
	snprintf(path, sizeof(path), "%s/" SBX_PARK_SUM, dir);
	rc = rc ? rc : spool_write_file(path, sum, 65, true, 0600);
	free(text);
	return rc ? errf(err, errlen, "%s: %s", path, strerror(errno)) : 0;
}

/* Everything into tmp (made here), then renamed to shared/paused. */
static int park_files(const struct sbx *s, const struct run_saved *saved, json_t *meta, const char *tmp, char *err,
		      size_t errlen)
{
	char bases[PATH_MAX], base[PATH_MAX + 80], from[PATH_MAX + 64], to[PATH_MAX + 64];
	if (bases_dir(s->shared, bases, sizeof(bases)))
		return errf(err, errlen, "%s: not SNAPSHOT_DIR/sandboxes/ID", s->shared);
	snprintf(to, sizeof(to), "%s/" SBX_CMDS_DIR, tmp);
	if (mkdir(tmp, 0700) < 0 || mkdir(to, 0700) < 0)
		return errf(err, errlen, "%s: %s", to, strerror(errno));
	snprintf(to, sizeof(to), "%s/" RUN_CHECKPOINT_BASE, tmp);
	if (keep_base(bases, saved->snapshot, base, sizeof(base), err, errlen))
		return -1;
	if (run_pause_keep_base(base, to))
		return errf(err, errlen, "%s: %s", to, strerror(errno));
	struct { const char *from, *name, *to; } files[] = {
		{ saved->dir, SNAP_STATE_FILE, SNAP_STATE_FILE },
		{ saved->dir, SNAP_PAGES_FILE, SNAP_PAGES_FILE },
		{ saved->dir, RUN_PAUSE_SUM_FILE, RUN_PAUSE_SUM_FILE },
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(from, sizeof(from), "%s/%s", files[i].from, files[i].name);
		snprintf(to, sizeof(to), "%s/%s", tmp, files[i].to);
		if (run_pause_link_or_copy(from, to))
			return errf(err, errlen, "%s: %s", from, strerror(errno));
	}
	snprintf(to, sizeof(to), "%s/" RUN_CHECKPOINT_IMAGE, tmp);
	if (run_pause_copy(saved->image, to))
		return errf(err, errlen, "keeping the workspace: %s", strerror(errno));
	if (keep_outputs(s, meta, tmp, err, errlen) || write_meta(meta, tmp, err, errlen))
		return -1;
	/* the sandbox still ours: a node that took it meanwhile (ours was
	 * thought dead) has written its own token, and its VM is the one
	 * that goes on */
	char owner[RUN_OWNER_LEN + 1] = "", path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/" RUN_SHARED_OWNER, s->shared);
	int fd = s->owner ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
	ssize_t n = fd >= 0 ? read(fd, owner, RUN_OWNER_LEN) : -1;
	if (fd >= 0)
		close(fd);
	if (s->owner && (n != RUN_OWNER_LEN || strcmp(owner, s->owner)))
		return errf(err, errlen, "another node holds this sandbox now (its owner token changed): nothing is parked");
	/* the last park's files, if a resume left them, give way whole */
	char final[PATH_MAX + 16], old[PATH_MAX + 16];
	snprintf(final, sizeof(final), "%s/" SBX_PARKED_DIR, s->shared);
	snprintf(old, sizeof(old), "%s/." SBX_PARKED_DIR ".old", s->shared);
	tree_remove(old, 3);
	if ((rename(final, old) < 0 && errno != ENOENT) || rename(tmp, final) < 0)
		return errf(err, errlen, "%s: %s", final, strerror(errno));
	tree_remove(old, 3);
	return 0;
}

int sbx_park(struct sbx *s, const struct run_saved *saved, char *err, size_t errlen)
{
	json_t *meta = sbx_park_meta(s);
	if (!meta)
		return errf(err, errlen, "out of memory");
	char tmp[PATH_MAX + 16];
	snprintf(tmp, sizeof(tmp), "%s/." SBX_PARKED_DIR ".tmp", s->shared);
	/* the VM is saved and gone: nothing changes the table or the outputs meanwhile */
	pthread_mutex_unlock(&s->mu);
	tree_remove(tmp, 3);
	int rc = park_files(s, saved, meta, tmp, err, errlen);
	if (rc)
		tree_remove(tmp, 3);
	pthread_mutex_lock(&s->mu);
	json_decref(meta);
	s->parked = rc == 0;
	return rc;
}

/* Each command's output from from/cmds, checked against its SHA-256,
 * into DIR/cmds; a running one's opened to go on. */
static int take_outputs(struct sbx *s, const json_t *meta, const char *from, char *err, size_t errlen)
{
	size_t i;
	const json_t *c;
	json_array_foreach(json_object_get(meta, "commands"), i, c) {
		json_int_t id = json_integer_value(json_object_get(c, "id"));
		char src[PATH_MAX + 64], dst[PATH_MAX + 64], sum[65];
		snprintf(src, sizeof(src), "%s/" SBX_CMDS_DIR "/%lld.out", from, (long long)id);
		snprintf(dst, sizeof(dst), "%s/" SBX_CMDS_DIR "/%lld.out", s->dir, (long long)id);
		if (sha256_file_hex(src, sum))
			return errf(err, errlen, "the parked sandbox's output of command %lld: %s", (long long)id,
				    strerror(errno));
		if (strcmp(sum, json_string_value(json_object_get(c, "sha256"))))
			return errf(err, errlen, "the parked sandbox's output of command %lld was altered (checksum mismatch)",
				    (long long)id);
		unlink(dst);
		if (run_pause_copy(src, dst))
			return errf(err, errlen, "%s: %s", dst, strerror(errno));
		struct sbx_cmd *r = sbx_cmd_of(s, (uint32_t)id);
		if (r && !r->ended && (r->out_fd = open(dst, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW)) < 0)
			return errf(err, errlen, "%s: %s", dst, strerror(errno));
	}
	return 0;
}

int sbx_unpark(struct sbx *s, const char *dir, char *err, size_t errlen)
{
	char path[PATH_MAX + 64], want[65], sum[65];
	uint8_t *text = NULL;
	size_t len = 0;
	snprintf(path, sizeof(path), "%s/" SBX_PARK_SUM, dir);
	if (sha256_read_sum(path, want))
		return errf(err, errlen, "the parked sandbox's table has no checksum");
	snprintf(path, sizeof(path), "%s/" SBX_PARK_META, dir);
	errno = 0;
	if (spool_read_file(AT_FDCWD, path, PARK_META_MAX, &text, &len) < 0)
		return errf(err, errlen, "the parked sandbox's table: %s", errno ? strerror(errno) : "too large");
	sha256_hex(text, len, sum);
	json_t *meta = strcmp(sum, want) ? NULL : json_loadb((const char *)text, len, 0, NULL);
	free(text);
	if (!meta)
		return errf(err, errlen, "the parked sandbox's table was altered or truncated (checksum mismatch)");
	pthread_mutex_lock(&s->mu);
	int rc = sbx_park_load(s, meta, err, errlen);
	rc = rc ? rc : take_outputs(s, meta, dir, err, errlen);
	pthread_mutex_unlock(&s->mu);
	json_decref(meta);
	return rc;
}
