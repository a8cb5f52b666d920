/* A sandbox's checkpoints (supervisor.h): the VM paused as for a pause,
 * its saved files and workspace copied into DIR/checkpoints/NAME while it
 * is stopped, and the VM resumed at once. A checkpoint is immutable: its
 * files are links to, or copies of, what the pause wrote and the snapshot
 * it was taken against, and the workspace a copy (a reflink where the
 * file system has them). */
#include "api.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errmsg.h"
#include "run_pause.h"
#include "spool.h"
#include "tree.h"
#include "wsdiff.h"
#include "../../vmm/snapshot.h"

#define META_FILE RUN_CHECKPOINT_META

static void checkpoints_dir(const struct sbx *s, char *out, size_t len)
{
	snprintf(out, len, "%s/" RUN_CHECKPOINTS_DIR, s->keep);
}

/* The disk a checkpoint holds of its own: its state, pages and workspace
 * copy, not the snapshot (base/) and start it shares with others. */
static int64_t own_bytes(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int64_t total = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		struct stat st;
		char p[PATH_MAX];
		if (e->d_name[0] == '.' || !strcmp(e->d_name, RUN_CHECKPOINT_BASE) || !strcmp(e->d_name, RUN_CHECKPOINT_START))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (lstat(p, &st) == 0)
			total += S_ISDIR(st.st_mode) ? own_bytes(p) : (int64_t)st.st_blocks * 512;
	}
	closedir(d);
	return total;
}

int sbx_checkpoint_save(const struct sbx *s, const char *name, uint32_t next_cmd, const struct run_saved *saved,
			json_t **meta, char *err, size_t errlen)
{
	char top[PATH_MAX], tmp[PATH_MAX + 100], dst[PATH_MAX + 200], src[PATH_MAX + 200], final[PATH_MAX + 100];
	checkpoints_dir(s, top, sizeof(top));
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", top, name);
	snprintf(final, sizeof(final), "%s/%s", top, name);
	if ((mkdir(top, 0700) < 0 && errno != EEXIST) || mkdir(tmp, 0700) < 0)
		return snprintf(err, errlen, "%s: %s", tmp, strerror(errno)), -1;
	snprintf(dst, sizeof(dst), "%s/" RUN_CHECKPOINT_BASE, tmp);
	int rc = run_pause_keep_base(saved->snapshot, dst);
	if (rc)
		snprintf(err, errlen, "%s: %s", saved->snapshot, strerror(errno));
	struct { const char *from, *name, *to; } files[] = {
		{ saved->dir, SNAP_STATE_FILE, SNAP_STATE_FILE },
		{ saved->dir, SNAP_PAGES_FILE, SNAP_PAGES_FILE },
		{ saved->dir, RUN_PAUSE_SUM_FILE, RUN_PAUSE_SUM_FILE },
		{ s->keep, RUN_CHECKPOINT_START, RUN_CHECKPOINT_START },
	};
	for (size_t i = 0; rc == 0 && i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(src, sizeof(src), "%s/%s", files[i].from, files[i].name);
		snprintf(dst, sizeof(dst), "%s/%s", tmp, files[i].to);
		if ((rc = run_pause_link_or_copy(src, dst)))
			snprintf(err, errlen, "%s: %s", src, strerror(errno));
	}
	snprintf(dst, sizeof(dst), "%s/" RUN_CHECKPOINT_IMAGE, tmp);
	if (rc == 0 && (rc = run_pause_copy(saved->image, dst)))
		snprintf(err, errlen, "copying the workspace: %s", strerror(errno));
	int64_t now = sbx_realtime_ms(), bytes = own_bytes(tmp);
	uint64_t kept = 0;
	sbx_checkpoint_count(s, &kept);
	if (rc == 0 && kept + (uint64_t)bytes > s->max_checkpoint_bytes) {
		snprintf(err, errlen, "it takes %lld MiB, and with the sandbox's other checkpoints (%llu MiB) that passes "
			 "their most (max_checkpoint_mib %llu): delete one first", (long long)(bytes >> 20),
			 (unsigned long long)(kept >> 20), (unsigned long long)(s->max_checkpoint_bytes >> 20));
		rc = 1;
	}
	json_t *m = rc ? NULL : json_pack("{s:s,s:I,s:I,s:I}", "name", name, "created_ms", (json_int_t)now, "bytes",
					  (json_int_t)bytes, "next_cmd", (json_int_t)next_cmd);
	char *text = m ? json_dumps(m, JSON_COMPACT) : NULL;
	snprintf(dst, sizeof(dst), "%s/" META_FILE, tmp);
	if (rc == 0 && (!text || spool_write_file(dst, text, strlen(text), true, 0600) < 0 || rename(tmp, final) < 0)) {
		snprintf(err, errlen, "%s: %s", final, text ? strerror(errno) : "out of memory");
		rc = -1;
	}
	free(text);
	if (rc) {
		spool_clean(tmp, false);
		json_decref(m);
		return rc;
	}
	*meta = m;
	return 0;
}

json_t *sbx_checkpoint_view(const json_t *meta)
{
	json_t *dig = json_object_get(meta, "digest"), *complete = json_object_get(meta, "complete");
	return json_pack("{s:O,s:o,s:O,s:O,s:O}", "name", json_object_get(meta, "name"), "created_at",
			 spool_iso_time(json_integer_value(json_object_get(meta, "created_ms"))), "bytes",
			 json_object_get(meta, "bytes"), "digest", dig ? dig : json_null(), "complete",
			 complete ? complete : json_null());
}

int sbx_checkpoint_digest(const struct sbx *s, json_t *meta, char *err, size_t errlen)
{
	const char *name = json_string_value(json_object_get(meta, "name"));
	char start[PATH_MAX + 64], image[PATH_MAX + 200], scratch[PATH_MAX + 100], path[PATH_MAX + 200], digest[65];
	bool complete = false;
	snprintf(start, sizeof(start), "%s/" RUN_CHECKPOINT_START, s->keep);
	snprintf(image, sizeof(image), "%s/" RUN_CHECKPOINTS_DIR "/%s/" RUN_CHECKPOINT_IMAGE, s->keep, name);
	snprintf(path, sizeof(path), "%s/" RUN_CHECKPOINTS_DIR "/%s/" META_FILE, s->keep, name);
	snprintf(scratch, sizeof(scratch), "%s/.digest-%s", s->dir, name);
	tree_remove(scratch, 3);
	if (wsdiff_images(start, image, scratch, NULL, digest, &complete, err, errlen))
		return -1;
	json_object_set_new(meta, "digest", json_string(digest));
	json_object_set_new(meta, "complete", json_boolean(complete));
	char *text = json_dumps(meta, JSON_COMPACT), tmp[PATH_MAX + 210];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	/* replaced whole: a reader sees the meta before or after, never half */
	int rc = text && spool_write_file(tmp, text, strlen(text), false, 0600) == 0 && rename(tmp, path) == 0 ? 0 : -1;
	free(text);
	return rc ? errf(err, errlen, "%s: %s", path, strerror(errno ? errno : ENOMEM)) : 0;
}

/* DIR/checkpoints/NAME's meta, or NULL. */
static json_t *load(const struct sbx *s, const char *name)
{
	char p[PATH_MAX + 300];
	snprintf(p, sizeof(p), "%s/" RUN_CHECKPOINTS_DIR "/%s/" META_FILE, s->keep, name);
	json_t *m = json_load_file(p, 0, NULL);
	if (m && (!json_is_string(json_object_get(m, "name")) || !json_is_integer(json_object_get(m, "bytes")))) {
		json_decref(m);
		m = NULL;
	}
	return m;
}

int sbx_checkpoint_fork(struct sbx *s, const char *dir, char *err, size_t errlen)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof(p), "%s/" META_FILE, dir);
	json_t *m = json_load_file(p, 0, NULL);
	json_int_t next = json_integer_value(json_object_get(m, "next_cmd"));
	json_decref(m);
	if (next < 1 || next > UINT32_MAX / 2)
		return snprintf(err, errlen, "%.300s: not a checkpoint", dir), -1;
	s->next_cmd = s->inherited_below = (uint32_t)next;
	return 0;
}

unsigned sbx_checkpoint_count(const struct sbx *s, uint64_t *bytes)
{
	char top[PATH_MAX];
	checkpoints_dir(s, top, sizeof(top));
	DIR *d = opendir(top);
	unsigned n = 0;
	struct dirent *e;
	if (bytes)
		*bytes = 0;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		n++;
		json_t *m = bytes ? load(s, e->d_name) : NULL;
		if (m)
			*bytes += (uint64_t)json_integer_value(json_object_get(m, "bytes"));
		json_decref(m);
	}
	if (d)
		closedir(d);
	return n;
}

enum MHD_Result api_list_checkpoints(struct sbx *s, struct MHD_Connection *conn)
{
	char top[PATH_MAX];
	checkpoints_dir(s, top, sizeof(top));
	json_t *list = json_array();
	DIR *d = opendir(top);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		json_t *m = e->d_name[0] != '.' ? load(s, e->d_name) : NULL;
		if (m)
			json_array_append_new(list, sbx_checkpoint_view(m));
		json_decref(m);
	}
	if (d)
		closedir(d);
	return api_answer_json(conn, 200, json_pack("{s:o}", "checkpoints", list));
}

enum MHD_Result api_checkpoint(struct sbx *s, struct MHD_Connection *conn, const char *method, const char *name)
{
	json_t *m = run_checkpoint_name_ok(name) ? load(s, name) : NULL;
	if (!m)
		return api_answer_error(conn, 404, "no checkpoint %.64s", name);
	if (!strcmp(method, "GET"))
		return api_answer_json(conn, 200, sbx_checkpoint_view(m));
	json_decref(m);
	if (strcmp(method, "DELETE"))
		return api_answer_error(conn, 405, "GET or DELETE here");
	char p[PATH_MAX + 300];
	/* the name is never taken again: SANDBOX/NAME means one state for the
	 * sandbox's life, whatever was checked against it (expect_digest) */
	snprintf(p, sizeof(p), "%s/" RUN_CHECKPOINTS_DIR "/" SBX_CHECKPOINT_USED "%s", s->keep, name);
	if (spool_write_file(p, "", 0, false, 0600) < 0)
		return api_answer_error(conn, 500, "%s: %s", p, strerror(errno));
	snprintf(p, sizeof(p), "%s/" RUN_CHECKPOINTS_DIR "/%s", s->keep, name);
	if (spool_clean(p, false) < 0)
		return api_answer_error(conn, 500, "removing checkpoint %s: %s", name, strerror(errno));
	return api_answer_json(conn, 200, json_pack("{s:s,s:b}", "name", name, "deleted", 1));
}
