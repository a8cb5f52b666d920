#include "spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "proto.h"
#include "result.h"
#include "tree.h"

/* The run library's longest socket path under the worker's TMPDIR (its
 * run directory, vmrun-ID12-XXXXXX, then sock/v.sock_PORT) fits sun_path
 * with the NUL, as host/run/run.c requires. */
_Static_assert(SPOOL_LIB_TMP_MAX + sizeof("/vmrun-123456789012-XXXXXX/sock/" PROTO_VSOCK_UDS "_4294967295") <
		       sizeof(((struct sockaddr_un *)0)->sun_path),
	       "the worker's TMPDIR leaves room for the run library's sockets");

int spool_lib_tmp(const char *run_dir, char *out, size_t len)
{
	int n = snprintf(out, len, "%s/" SPOOL_LIB_TMP, run_dir);
	return n < 0 || (size_t)n >= len || n > SPOOL_LIB_TMP_MAX ? -1 : 0;
}

int spool_write_file(const char *path, const void *data, size_t len, bool excl, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | (excl ? O_EXCL : O_TRUNC) | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return -1;
	const uint8_t *p = data;
	while (len) {
		ssize_t k = write(fd, p, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			int e = k < 0 ? errno : EIO;
			close(fd);
			errno = e;
			return -1;
		}
		p += k;
		len -= (size_t)k;
	}
	return close(fd);
}

int spool_read_file(int dirfd, const char *name, uint64_t max, uint8_t **out, size_t *len)
{
	/* O_NONBLOCK: a FIFO put in its place must not hang the open. */
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		close(fd);
		return -1;
	}
	size_t n = (size_t)st.st_size, got = 0;
	uint8_t *buf = malloc(n + 1);
	while (buf && got < n) {
		ssize_t k = read(fd, buf + got, n - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	close(fd);
	if (!buf || got != n) {
		free(buf);
		return -1;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

int spool_append(int fd, unsigned stage, unsigned stream, const uint8_t *data, size_t len)
{
	while (len) {
		size_t n = len > SPOOL_RECORD_MAX ? SPOOL_RECORD_MAX : len;
		struct spool_record h = { .stage = (uint8_t)stage, .stream = (uint8_t)stream, .len = (uint32_t)n };
		struct iovec iov[2] = { { &h, sizeof(h) }, { (void *)data, n } };
		ssize_t k = writev(fd, iov, 2);
		if (k < 0 && errno == EINTR)
			continue;
		if (k != (ssize_t)(sizeof(h) + n)) {
			if (k >= 0)
				errno = EIO;
			return -1;
		}
		data += n;
		len -= n;
	}
	return 0;
}

long spool_parse(const uint8_t *buf, size_t len,
		 void (*fn)(void *ctx, unsigned stage, unsigned stream, const uint8_t *data, size_t n), void *ctx)
{
	size_t pos = 0;
	while (len - pos >= sizeof(struct spool_record)) {
		struct spool_record h;
		memcpy(&h, buf + pos, sizeof(h));
		bool next = h.stream == SPOOL_NEXT_RUN;
		if (h.zero || h.len > SPOOL_RECORD_MAX ||
		    (h.stream != PROTO_STDOUT && h.stream != PROTO_STDERR && !next) ||
		    (h.stage != PROTO_STAGE_COMPILE && h.stage != PROTO_STAGE_RUN) ||
		    (next && (h.len != sizeof(uint32_t) || h.stage != PROTO_STAGE_RUN)))
			return -1;
		if (len - pos - sizeof(h) < h.len)
			break;
		fn(ctx, h.stage, h.stream, buf + pos + sizeof(h), h.len);
		pos += sizeof(h) + h.len;
	}
	return (long)pos;
}

enum run_state spool_state_of(const struct run_outcome *o, bool cancelled)
{
	static const enum run_state states[] = { RS_SUCCEEDED, RS_FAILED, RS_TIMED_OUT };
	_Static_assert(sizeof(states) / sizeof(states[0]) == OUTCOME_STATE_COUNT, "a state per outcome");
	if (cancelled)
		return RS_CANCELLED;
	/* none readable: a failure */
	return o ? states[o->state] : RS_FAILED;
}

/* How deep a run's directory may go and still be removed whole: its
 * artifacts are the guest's tree. */
#define SPOOL_TREE_DEPTH 64

int spool_clean(const char *dir, bool keep)
{
	if (!keep)
		return tree_remove(dir, SPOOL_TREE_DEPTH);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return errno == ENOENT ? 0 : -1;
	}
	int rc = 0;
	for (struct dirent *e; (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, SPOOL_ARTIFACTS) &&
		    strcmp(e->d_name, SPOOL_OUTPUT) && tree_remove_at(fd, e->d_name, SPOOL_TREE_DEPTH - 1))
			rc = -1;
	closedir(d);
	return rc;
}

char *spool_utf8(const uint8_t *p, size_t n, size_t *outlen)
{
	char *out = malloc(n * 3 + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n;) {
		uint8_t c = p[i];
		size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
		bool ok = len > 0 && i + len <= n;
		uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
		for (size_t k = 1; ok && k < len; k++) {
			ok = (p[i + k] & 0xc0) == 0x80;
			cp = (cp << 6) | (p[i + k] & 0x3f);
		}
		/* Overlong forms, surrogates and past U+10FFFF are invalid too. */
		ok = ok && !(len == 2 && cp < 0x80) && !(len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) &&
		     !(len == 4 && (cp < 0x10000 || cp > 0x10ffff)) && !(len == 1 && c == 0);
		if (ok) {
			memcpy(o, p + i, len);
			o += len;
			i += len;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	*o = '\0';
	*outlen = (size_t)(o - out);
	return out;
}

struct text_pair {
	uint8_t *p[2];
	size_t len[2];
	bool failed;
};

static void add_record(void *ctx, unsigned stage, unsigned stream, const uint8_t *data, size_t n)
{
	struct text_pair *t = ctx;
	if (stream == SPOOL_NEXT_RUN) {
		t->len[0] = t->len[1] = 0;
		return;
	}
	int i = stage == PROTO_STAGE_COMPILE ? 0 : 1;
	uint8_t *q = t->failed ? NULL : realloc(t->p[i], t->len[i] + n + 1);
	if (!q) {
		t->failed = true;
		return;
	}
	memcpy(q + t->len[i], data, n);
	t->p[i] = q;
	t->len[i] += n;
}

void spool_output_text(const char *path, char *out[2])
{
	out[0] = out[1] = NULL;
	uint8_t *buf;
	size_t n;
	/* Bounded by the run's output caps; refuse anything absurd anyway. */
	if (spool_read_file(AT_FDCWD, path, (1u << 30) - 1, &buf, &n) < 0)
		return;
	struct text_pair t = { 0 };
	spool_parse(buf, n, add_record, &t);
	free(buf);
	for (int i = 0; i < 2 && !t.failed; i++) {
		size_t len;
		out[i] = spool_utf8(t.p[i] ? t.p[i] : (const uint8_t *)"", t.len[i], &len);
	}
	free(t.p[0]);
	free(t.p[1]);
}

json_t *spool_result_parse(const char *text)
{
	return text ? json_loads(text, JSON_ALLOW_NUL, NULL) : NULL;
}

json_t *spool_iso_time(int64_t ms)
{
	char buf[CLOCK_ISO8601_MAX];
	const char *t = ms ? clock_iso8601(ms, buf) : NULL;
	return t ? json_string(t) : json_null();
}
