#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"


static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Write text to dir/file (which must exist: a cgroup's files do). Returns
 * 0, or -1 with errno set. */
static int put(const char *dir, const char *file, const char *text)
{
	char p[PATH_MAX];
	int n = snprintf(p, sizeof(p), "%s/%s", dir, file);
	if (n < 0 || (size_t)n >= sizeof(p)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = strlen(text);
	ssize_t k = write(fd, text, len);
	int e = errno;
	close(fd);
	if (k == (ssize_t)len)
		return 0;
	errno = k < 0 ? e : EIO;
	return -1;
}

/* The value of key in dir/file, a flat keyed file. */
static int get_keyed(const char *dir, const char *file, const char *key, uint64_t *value, char *err,
		     size_t errlen)
{
	char p[PATH_MAX], text[4096];
	int n = snprintf(p, sizeof(p), "%s/%s", dir, file);
	if (n < 0 || (size_t)n >= sizeof(p))
		return proto_errf(err, errlen, "cgroup path %s/%s too long", dir, file);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return proto_errf(err, errlen, "reading %s: %s", p, strerror(errno));
	size_t have = 0;
	ssize_t k;
	while (have < sizeof(text) - 1 && (k = read(fd, text + have, sizeof(text) - 1 - have)) > 0)
		have += (size_t)k;
	close(fd);
	text[have] = '\0';
	if (cgroup_keyed_value(text, key, value) < 0)
		return proto_errf(err, errlen, "%s has no number for %s", p, key);
	return 0;
}

int cgroup_keyed_value(const char *text, const char *key, uint64_t *value)
{
	size_t kl = strlen(key);
	for (const char *line = text; *line; line += strcspn(line, "\n"), line += *line == '\n') {
		if (strncmp(line, key, kl) != 0 || line[kl] != ' ')
			continue;
		const char *d = line + kl + 1;
		uint64_t v = 0;
		if (*d < '0' || *d > '9')
			return -1;
		for (; *d >= '0' && *d <= '9'; d++) {
			unsigned digit = (unsigned)(*d - '0');
			if (v > (UINT64_MAX - digit) / 10)
				return -1;
			v = v * 10 + digit;
		}
		if (*d != '\n' && *d != '\0')
			return -1;
		*value = v;
		return 0;
	}
	return -1;
}

int cgroup_memory_max(uint64_t kib, char *buf, size_t len)
{
	int n = kib > UINT64_MAX / 1024 ? snprintf(buf, len, "max") : snprintf(buf, len, "%" PRIu64, kib * 1024);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int cgroup_init(const char *dir, char *err, size_t errlen)
{
	if (mount("cgroup2", dir, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return proto_errf(err, errlen, "mount cgroup2 on %s: %s", dir, strerror(errno));
	if (put(dir, "cgroup.subtree_control", "+memory") < 0)
		return proto_errf(err, errlen, "enabling the memory controller in %s: %s", dir, strerror(errno));
	return 0;
}

int cgroup_create(const char *root, const char *name, uint64_t memory_kib, struct cgroup *g, char *err,
		  size_t errlen)
{
	g->procs_fd = -1;
	int n = snprintf(g->path, sizeof(g->path), "%s/%s", root, name);
	if (n < 0 || (size_t)n >= sizeof(g->path))
		return proto_errf(err, errlen, "cgroup path %s/%s too long", root, name);
	if (mkdir(g->path, 0755) < 0)
		return proto_errf(err, errlen, "creating cgroup %s: %s", g->path, strerror(errno));
	char max[32];
	const char *step = "memory.max";
	if (cgroup_memory_max(memory_kib, max, sizeof(max)) < 0 || put(g->path, step, max) < 0 ||
	    put(g->path, (step = "memory.oom.group"), "1") < 0)
		goto undo;
	/* Without CONFIG_MEMCG_SWAP (or swap) there is no such file: fine. */
	if (put(g->path, (step = "memory.swap.max"), "0") < 0 && errno != ENOENT)
		goto undo;
	step = "cgroup.procs";
	char procs[PATH_MAX + 16];
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", g->path);
	if ((g->procs_fd = open(procs, O_WRONLY | O_CLOEXEC)) < 0)
		goto undo;
	return 0;
undo:
	proto_errf(err, errlen, "setting %s of cgroup %s: %s", step, g->path, strerror(errno));
	rmdir(g->path);
	return -1;
}

int cgroup_join(const struct cgroup *g)
{
	return write(g->procs_fd, "0", 1) == 1 ? 0 : -1;
}

int cgroup_oom_kills(const struct cgroup *g, uint64_t *count, char *err, size_t errlen)
{
	return get_keyed(g->path, "memory.events", "oom_kill", count, err, errlen);
}

int cgroup_kill(const struct cgroup *g, char *err, size_t errlen)
{
	/* cgroup.kill is Linux 5.14 and later */
	if (put(g->path, "cgroup.kill", "1") < 0 && errno != ENOENT)
		return proto_errf(err, errlen, "killing cgroup %s: %s", g->path, strerror(errno));
	return 0;
}

int cgroup_destroy(struct cgroup *g, int timeout_ms, char *err, size_t errlen)
{
	close_fd(&g->procs_fd);
	if (cgroup_kill(g, err, errlen) < 0)
		return -1;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		uint64_t populated = 1;
		if (get_keyed(g->path, "cgroup.events", "populated", &populated, err, errlen) < 0)
			return -1;
		if (!populated)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		/* from the nanosecond difference, or the wait can end 1 ms short */
		int64_t ms = ((int64_t)(t.tv_sec - t0.tv_sec) * 1000000000 + (t.tv_nsec - t0.tv_nsec)) / 1000000;
		if (ms >= timeout_ms)
			return proto_errf(err, errlen, "cgroup %s still has processes %d ms after they were killed", g->path,
				    timeout_ms);
		nanosleep(&(struct timespec){ 0, 2 * 1000 * 1000 }, NULL);
	}
	if (rmdir(g->path) < 0)
		return proto_errf(err, errlen, "removing cgroup %s: %s", g->path, strerror(errno));
	return 0;
}
