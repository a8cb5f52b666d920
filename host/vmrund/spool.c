#include "spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "proto.h"

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
		if (h.zero || h.len > SPOOL_RECORD_MAX || (h.stream != PROTO_STDOUT && h.stream != PROTO_STDERR) ||
		    (h.stage != PROTO_STAGE_COMPILE && h.stage != PROTO_STAGE_RUN))
			return -1;
		if (len - pos - sizeof(h) < h.len)
			break;
		fn(ctx, h.stage, h.stream, buf + pos + sizeof(h), h.len);
		pos += sizeof(h) + h.len;
	}
	return (long)pos;
}

static bool stage_timed_out(const json_t *stage)
{
	return json_is_true(json_object_get(stage, "timed_out"));
}

enum run_state spool_state_of(const json_t *result, bool cancelled)
{
	if (cancelled)
		return RS_CANCELLED;
	if (!json_is_object(result))
		return RS_FAILED;
	const char *term = json_string_value(json_object_get(result, "termination"));
	if (!term)
		return RS_FAILED;
	if (!strcmp(term, "timeout") || stage_timed_out(result) || stage_timed_out(json_object_get(result, "compile")))
		return RS_TIMED_OUT;
	json_t *code = json_object_get(result, "exit_code");
	if (!strcmp(term, "exited") && json_is_integer(code) && json_integer_value(code) == 0)
		return RS_SUCCEEDED;
	return RS_FAILED;
}

/* Remove name in dirfd and, for a directory, everything under it. */
static int remove_at(int dirfd, const char *name, int depth)
{
	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if ((errno != EISDIR && errno != EPERM) || depth > 64)
		return -1;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int rc = 0;
	for (struct dirent *e; (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && remove_at(fd, e->d_name, depth + 1))
			rc = -1;
	closedir(d);
	return unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? rc : -1;
}

int spool_clean(const char *dir, bool keep_artifacts)
{
	if (!keep_artifacts)
		return remove_at(AT_FDCWD, dir, 0);
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
		    remove_at(fd, e->d_name, 1))
			rc = -1;
	closedir(d);
	return rc;
}
