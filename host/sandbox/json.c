/* What the sandbox's API says (host/sandbox/supervisor.h): commands, the
 * sandbox, file entries, as JSON. */
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jail.h"
#include "spool.h"

static const char *end_name(uint32_t kind)
{
	switch (kind) {
	case PROTO_END_EXITED: return "exited";
	case PROTO_END_SIGNALED: return "signaled";
	case PROTO_END_DENIED: return "denied";
	case PROTO_END_NOT_FOUND: return "not_found";
	default: return "error";
	}
}

void sbx_cmd_output(const struct sbx *s, uint32_t id, json_t *o)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" SBX_CMDS_DIR "/%u.out", s->dir, id);
	uint8_t *raw = NULL;
	size_t len = 0;
	/* the worst a guest can make of it: a record per byte of each stream */
	uint64_t cap = 2 * s->max_output * (1 + sizeof(struct spool_record)) + 4096;
	char *text[2] = { NULL, NULL };
	size_t tlen[2] = { 0, 0 };
	if (spool_read_file(AT_FDCWD, path, cap, &raw, &len) == 0) {
		/* the records of each stream, concatenated, then made text */
		uint8_t *bytes[2] = { malloc(len + 1), malloc(len + 1) };
		size_t n[2] = { 0, 0 };
		for (size_t at = 0; bytes[0] && bytes[1] && at + sizeof(struct spool_record) <= len;) {
			struct spool_record h;
			memcpy(&h, raw + at, sizeof(h));
			at += sizeof(h);
			if (h.len > len - at)
				break;
			int i = h.stream == PROTO_STDERR;
			memcpy(bytes[i] + n[i], raw + at, h.len);
			n[i] += h.len;
			at += h.len;
		}
		for (int i = 0; i < 2; i++)
			if (bytes[i])
				text[i] = spool_utf8(bytes[i], n[i], &tlen[i]);
		free(bytes[0]);
		free(bytes[1]);
		free(raw);
	}
	json_object_set_new(o, "stdout", json_stringn(text[0] ? text[0] : "", tlen[0]));
	json_object_set_new(o, "stderr", json_stringn(text[1] ? text[1] : "", tlen[1]));
	free(text[0]);
	free(text[1]);
}

json_t *sbx_cmd_json(const struct sbx *s, const struct sbx_cmd *c)
{
	(void)s;
	json_t *o = json_object();
	json_object_set_new(o, "id", json_integer(c->id));
	json_object_set(o, "request", c->request);
	json_object_set_new(o, "state", json_string(c->ended ? "ended" : "running"));
	json_object_set_new(o, "started_at", spool_iso_time(c->started_ms));
	json_object_set_new(o, "ended_at", spool_iso_time(c->ended_ms));
	if (c->ended) {
		const struct proto_exit *e = &c->exit;
		json_object_set_new(o, "end", json_string(end_name(e->kind)));
		json_object_set_new(o, "exit_code", e->kind == PROTO_END_EXITED ? json_integer(e->code) : json_null());
		json_object_set_new(o, "signal", e->kind == PROTO_END_SIGNALED ? json_integer(e->signal) : json_null());
		json_object_set_new(o, "timed_out", json_boolean(e->flags & PROTO_EXIT_TIMED_OUT));
		json_object_set_new(o, "stdout_truncated", json_boolean(e->flags & PROTO_EXIT_STDOUT_TRUNCATED));
		json_object_set_new(o, "stderr_truncated", json_boolean(e->flags & PROTO_EXIT_STDERR_TRUNCATED));
		json_object_set_new(o, "oom_killed", json_boolean(e->flags & PROTO_EXIT_OOM_KILLED));
		json_object_set_new(o, "cpu_time_exceeded", json_boolean(e->flags & PROTO_EXIT_CPU_EXCEEDED));
		json_object_set_new(o, "usage", json_pack("{s:I,s:I,s:I,s:I}", "cpu_ms", (json_int_t)e->cpu_ms,
							 "max_rss_kib", (json_int_t)e->max_rss_kib, "stdout_bytes",
							 (json_int_t)e->stdout_bytes, "stderr_bytes",
							 (json_int_t)e->stderr_bytes));
	}
	return o;
}

/* The bytes of path that hold data: the workspace image is allocated
 * whole up front (posix_fallocate, so that the guest never meets ENOSPC
 * of the host's), so st_blocks says its size; its unwritten extents are
 * holes to SEEK_DATA (ext4, xfs, tmpfs), so the data segments are what
 * the guest has written. -1 when it cannot be read. */
static long long written_bytes(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	long long total = 0;
	off_t at = 0, data, hole;
	while ((data = lseek(fd, at, SEEK_DATA)) >= 0 && (hole = lseek(fd, data, SEEK_HOLE)) > data) {
		total += hole - data;
		at = hole;
	}
	bool ok = data >= 0 || errno == ENXIO;   /* ENXIO: no data past at */
	close(fd);
	return ok ? total : -1;
}

json_t *sbx_usage_json(const char *cgroup, const char *image)
{
	long long cpu_us = cgroup[0] ? jail_cgroup_read(cgroup, "cpu.stat", "usage_usec") : -1;
	long long mem = cgroup[0] ? jail_cgroup_read(cgroup, "memory.current", NULL) : -1;
	long long peak = cgroup[0] ? jail_cgroup_read(cgroup, "memory.peak", NULL) : -1;
	long long disk = image[0] ? written_bytes(image) : -1;
	return json_pack("{s:o,s:o,s:o,s:o}", "cpu_ms", cpu_us >= 0 ? json_integer(cpu_us / 1000) : json_null(),
			 "memory_bytes", mem >= 0 ? json_integer(mem) : json_null(), "memory_peak_bytes",
			 peak >= 0 ? json_integer(peak) : json_null(), "disk_bytes", disk >= 0 ? json_integer(disk) : json_null());
}

json_t *sbx_json(const struct sbx *s)
{
	int64_t left = s->deadline_ms - sbx_realtime_ms();
	json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:o,s:o,s:f,s:O,s:i,s:I,s:I}", "id", s->id, "state",
			      sbx_state_name(s->state), "reason", s->reason, "created_at", spool_iso_time(s->created_ms),
			      "started_at", spool_iso_time(s->started_ms), "timeout_at", spool_iso_time(s->deadline_ms),
			      "time_left_s", s->state == SBX_RUNNING && left > 0 ? (double)left / 1000.0 : 0.0, "limits",
			      s->limits ? s->limits : json_null(), "commands_running", (int)s->running, "commands",
			      (json_int_t)(s->next_cmd - 1), "guest_faults", (json_int_t)s->guest_faults);
	if (s->state == SBX_RUNNING)
		json_object_set_new(o, "usage", sbx_usage_json(s->cgroup, s->workspace_image));
	if (s->state == SBX_PAUSED || s->state == SBX_RESUMING)
		json_object_set_new(o, "time_left_s", json_real((double)s->left_ms / 1000.0));
	json_object_set_new(o, "paused_at", s->paused_ms ? spool_iso_time(s->paused_ms) : json_null());
	json_object_set_new(o, "pauses", json_integer(s->pauses));
	json_object_set_new(o, "on_timeout", json_string(s->on_timeout_pause ? "pause" : "stop"));
	return o;
}

json_t *sbx_entry_json(const struct proto_entry *e)
{
	const char *type = S_ISREG(e->mode) ? "file" : S_ISDIR(e->mode) ? "dir" : S_ISLNK(e->mode) ? "symlink" : "other";
	char mode[8];
	snprintf(mode, sizeof(mode), "%04o", e->mode & 07777);
	json_t *name = json_stringn(e->name, strlen(e->name));
	if (!name) {   /* not UTF-8: the guest's bytes, made text */
		size_t n;
		char *t = spool_utf8((const uint8_t *)e->name, strlen(e->name), &n);
		name = t ? json_stringn(t, n) : json_string("?");
		free(t);
	}
	return json_pack("{s:o,s:s,s:I,s:s,s:o}", "name", name, "type", type, "size", (json_int_t)e->size, "mode", mode,
			 "mtime", spool_iso_time(e->mtime_ns / 1000000));
}

int sbx_signal_number(const json_t *v)
{
	if (json_is_integer(v)) {
		json_int_t n = json_integer_value(v);
		return n >= 1 && n <= PROTO_MAX_SIGNAL ? (int)n : 0;
	}
	const char *name = json_string_value(v);
	if (!name)
		return 0;
	if (!strncasecmp(name, "SIG", 3))
		name += 3;
	for (int n = 1; n <= PROTO_MAX_SIGNAL; n++) {
		const char *abbrev = sigabbrev_np(n);
		if (abbrev && !strcasecmp(abbrev, name))
			return n;
	}
	return 0;
}
