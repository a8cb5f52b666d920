/* The snapshot cache: its directory, the key, and the files of one
 * snapshot, made and replaced so that a reader never sees half of one. */
#include "snapshot_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "errmsg.h"
#include "proto.h"

#define FNV_PRIME 0x100000001b3ull
#define LOCK_POLL_MS 20

uint64_t snapshot_fnv1a(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= FNV_PRIME;
	}
	return h;
}

/* A number's bytes, little-endian whatever the host: the key is the same
 * for the same facts on any build. */
static uint64_t mix(uint64_t h, uint64_t v)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	return snapshot_fnv1a(h, b, sizeof(b));
}

static uint64_t mix_file(uint64_t h, const struct snapshot_file_id *id)
{
	uint64_t v[] = { id->dev, id->ino, id->size, (uint64_t)id->mtime_sec, (uint64_t)id->mtime_nsec,
			 (uint64_t)id->ctime_sec, (uint64_t)id->ctime_nsec };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		h = mix(h, v[i]);
	return h;
}

uint64_t snapshot_key(const struct snapshot_facts *f)
{
	uint64_t h = SNAPSHOT_FNV_BASIS;
	h = mix_file(h, &f->vmm);
	h = mix_file(h, &f->kernel);
	h = mix_file(h, &f->rootfs);
	h = mix(h, f->memory_mib);
	h = mix(h, f->cpus);
	h = mix(h, f->proto_version);
	return mix(h, f->cpu_flags);
}

void snapshot_key_text(uint64_t key, char out[SNAPSHOT_KEY_CHARS + 1])
{
	snprintf(out, SNAPSHOT_KEY_CHARS + 1, "%016llx", (unsigned long long)key);
}

/* One line of cpuinfo: when it is a "flags" line, its value's hash into
 * *h and true. */
static bool flags_line(const char *line, size_t n, uint64_t *h)
{
	if (n < 5 || strncmp(line, "flags", 5))
		return false;
	size_t i = 5;
	while (i < n && (line[i] == ' ' || line[i] == '\t'))
		i++;
	if (i == n || line[i] != ':')
		return false;
	for (i++; i < n && line[i] == ' '; i++)
		;
	*h = snapshot_fnv1a(SNAPSHOT_FNV_BASIS, line + i, n - i);
	return true;
}

uint64_t snapshot_cpu_flags_text(const char *cpuinfo)
{
	uint64_t h = 0;
	for (const char *p = cpuinfo; *p;) {
		size_t n = strcspn(p, "\n");
		if (flags_line(p, n, &h))
			return h;
		p += n + (p[n] == '\n');
	}
	return 0;
}

/* The first flags line of the file cpuinfo, read a line at a time: the
 * whole file is long on a many-core host. */
static int cpu_flags_file(const char *cpuinfo, uint64_t *h, char *err, size_t errlen)
{
	FILE *f = fopen(cpuinfo, "re");
	if (!f)
		return errf(err, errlen, "%s: %s", cpuinfo, strerror(errno));
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	*h = 0;
	while ((n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] == '\n')
			n--;
		if (flags_line(line, (size_t)n, h))
			break;
	}
	free(line);
	fclose(f);
	return 0;
}

static void file_id(const struct stat *st, struct snapshot_file_id *id)
{
	*id = (struct snapshot_file_id){
		.dev = st->st_dev, .ino = st->st_ino, .size = (uint64_t)st->st_size,
		.mtime_sec = st->st_mtim.tv_sec, .mtime_nsec = st->st_mtim.tv_nsec,
		.ctime_sec = st->st_ctim.tv_sec, .ctime_nsec = st->st_ctim.tv_nsec,
	};
}

int snapshot_facts_gather(struct snapshot_facts *f, const char *vmm, int kernel_fd, int rootfs_fd,
			  uint64_t memory_mib, uint64_t cpus, const char *cpuinfo, char *err, size_t errlen)
{
	struct stat st;
	memset(f, 0, sizeof(*f));
	if (stat(vmm, &st) < 0)
		return errf(err, errlen, "%.300s: %s", vmm, strerror(errno));
	file_id(&st, &f->vmm);
	if (fstat(kernel_fd, &st) < 0)
		return errf(err, errlen, "the kernel: %s", strerror(errno));
	file_id(&st, &f->kernel);
	if (fstat(rootfs_fd, &st) < 0)
		return errf(err, errlen, "the root image: %s", strerror(errno));
	file_id(&st, &f->rootfs);
	f->memory_mib = memory_mib;
	f->cpus = cpus;
	f->proto_version = PROTO_VERSION;
	return cpu_flags_file(cpuinfo ? cpuinfo : "/proc/cpuinfo", &f->cpu_flags, err, errlen);
}

int snapshot_cache_choose(const struct snapshot_env *e, char *dir, size_t len, char *err, size_t errlen)
{
	const char *base, *below;
	if (e->ruid == 0 && e->vmrun_cache && *e->vmrun_cache) {
		if (e->vmrun_cache[0] != '/')
			return errf(err, errlen, "VMRUN_CACHE %.300s: not an absolute path", e->vmrun_cache);
		base = e->vmrun_cache;
		below = "/snapshots";
	} else if (e->euid == 0) {
		base = SNAPSHOT_SYSTEM_CACHE;
		below = "/snapshots";
	} else if (e->xdg_cache_home && e->xdg_cache_home[0] == '/') {
		base = e->xdg_cache_home;   /* the XDG rule: a relative value is ignored */
		below = "/vmrun/snapshots";
	} else if (e->home && e->home[0] == '/') {
		base = e->home;
		below = "/.cache/vmrun/snapshots";
	} else {
		return errf(err, errlen, "no cache directory: neither XDG_CACHE_HOME nor HOME is an absolute path");
	}
	int n = snprintf(dir, len, "%s%s", base, below);
	if (n < 0 || (size_t)n >= len)
		return errf(err, errlen, "cache directory %.200s%s: path too long", base, below);
	return 0;
}

int snapshot_cache_tenant(const char *base, const char *tenant, char *out, size_t len, char *err, size_t errlen)
{
	size_t n = strlen(tenant);
	/* one component, never one that climbs: the name becomes a path */
	if (!n || !strcmp(tenant, ".") || !strcmp(tenant, "..") ||
	    strspn(tenant, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != n)
		return errf(err, errlen, "tenant %.64s: not a name for a snapshot directory", tenant);
	int k = snprintf(out, len, "%s/tenants/%s", base, tenant);
	if (k < 0 || (size_t)k >= len)
		return errf(err, errlen, "cache directory %.200s/tenants/%.64s: path too long", base, tenant);
	return 0;
}

/* mkdir -p with 0700 for each level made: a cache under a fresh HOME
 * must not be readable by others on the way. */
static int make_levels(char *path)
{
	for (char *p = path + 1;; p++) {
		if (*p && *p != '/')
			continue;
		char c = *p;
		*p = '\0';
		int rc = mkdir(path, 0700);
		*p = c;
		if (rc < 0 && errno != EEXIST)
			return -1;
		if (!c)
			return 0;
	}
}

int snapshot_cache_dir(char *dir, size_t len, char *err, size_t errlen)
{
	struct snapshot_env e = { .ruid = getuid(), .euid = geteuid(), .vmrun_cache = getenv("VMRUN_CACHE"),
				  .xdg_cache_home = getenv("XDG_CACHE_HOME"), .home = getenv("HOME") };
	if (snapshot_cache_choose(&e, dir, len, err, errlen))
		return -1;
	if (make_levels(dir) < 0)
		return errf(err, errlen, "cache directory %.300s: %s", dir, strerror(errno));
	/* What is restored from here runs as the guest of later runs: nobody
	 * else may put a snapshot here. */
	struct stat st;
	if (lstat(dir, &st) < 0)
		return errf(err, errlen, "cache directory %.300s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return errf(err, errlen, "cache directory %.300s must be a directory of uid %u writable by it alone",
			    dir, (unsigned)geteuid());
	return 0;
}

int snapshot_slot_init(struct snapshot_slot *s, const char *dir, const struct snapshot_facts *f, char *err,
		       size_t errlen)
{
	memset(s, 0, sizeof(*s));
	s->lock_fd = -1;
	snapshot_key_text(snapshot_key(f), s->key);
	int a = snprintf(s->dir, sizeof(s->dir), "%s", dir);
	int b = snprintf(s->path, sizeof(s->path), "%s/%s", dir, s->key);
	int c = snprintf(s->lock, sizeof(s->lock), "%s/%s.lock", dir, s->key);
	snprintf(s->failed, sizeof(s->failed), "%s/%s.failed", dir, s->key);
	/* the longest name made below it: key.tmp-XXXXXX */
	if (a < 0 || b < 0 || c < 0 || (size_t)c + 8 >= sizeof(s->lock))
		return errf(err, errlen, "cache directory %.200s: path too long", dir);
	return 0;
}

/* A regular, non-empty file name in the directory dfd. */
static bool whole_file(int dfd, const char *name)
{
	struct stat st;
	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

bool snapshot_exists(struct snapshot_slot *s)
{
	int dfd = open(s->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return false;
	struct stat st;
	bool ok = fstat(dfd, &st) == 0 && whole_file(dfd, SNAPSHOT_STATE) && whole_file(dfd, SNAPSHOT_MEMORY);
	if (ok) {
		s->dev = st.st_dev;
		s->ino = st.st_ino;
	}
	close(dfd);
	return ok;
}

int snapshot_lock(struct snapshot_slot *s, int cancel_fd, int64_t timeout_ms, char *err, size_t errlen)
{
	int fd = open(s->lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return errf(err, errlen, "%.300s: %s", s->lock, strerror(errno));
	/* Polled, not a blocking flock: the run's cancel must still stop a
	 * run waiting for another's snapshot. */
	int64_t until = clock_mono_ms() + timeout_ms;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		struct pollfd p = { cancel_fd, POLLIN, 0 };
		int e = errno;
		if (e != EWOULDBLOCK && e != EINTR) {
			close(fd);
			return errf(err, errlen, "%.300s: %s", s->lock, strerror(e));
		}
		if (clock_mono_ms() >= until || poll(&p, 1, LOCK_POLL_MS) > 0) {
			close(fd);
			return errf(err, errlen, "%s while another run makes it",
				    clock_mono_ms() >= until ? "gave up waiting" : "cancelled");
		}
	}
	s->lock_fd = fd;
	return 0;
}

void snapshot_unlock(struct snapshot_slot *s)
{
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	s->lock_fd = -1;
}

int snapshot_remove_dir(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return -1;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			(void)unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	return rmdir(path);
}

/* Under the lock nobody else makes this key, so a key.tmp-* or key.old-*
 * is what a killed run left: it may hold a whole guest's memory. */
static void remove_leftovers(const struct snapshot_slot *s)
{
	DIR *d = opendir(s->dir);
	if (!d)
		return;
	char tmp[SNAPSHOT_KEY_CHARS + 8], old[SNAPSHOT_KEY_CHARS + 8], path[PATH_MAX + 300];
	snprintf(tmp, sizeof(tmp), "%s.tmp-", s->key);
	snprintf(old, sizeof(old), "%s.old-", s->key);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, tmp, strlen(tmp)) && strncmp(e->d_name, old, strlen(old)))
			continue;
		snprintf(path, sizeof(path), "%s/%s", s->dir, e->d_name);
		(void)snapshot_remove_dir(path);
	}
	closedir(d);
}

int snapshot_tmp_make(struct snapshot_slot *s, char *err, size_t errlen)
{
	remove_leftovers(s);
	snprintf(s->tmp, sizeof(s->tmp), "%s.tmp-XXXXXX", s->path);
	if (!mkdtemp(s->tmp)) {
		int e = errno;
		s->tmp[0] = '\0';
		return errf(err, errlen, "%.300s.tmp-XXXXXX: %s", s->path, strerror(e));
	}
	return 0;
}

int snapshot_mark_failed(const struct snapshot_slot *s, const char *why)
{
	int fd = open(s->failed, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	size_t n = strcspn(why, "\n");
	int rc = write(fd, why, n) == (ssize_t)n ? 0 : -1;
	close(fd);
	return rc;
}

bool snapshot_failed(const struct snapshot_slot *s, char *why, size_t len)
{
	int fd = open(s->failed, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, why, len - 1);
	close(fd);
	why[n > 0 ? n : 0] = '\0';
	return true;
}

void snapshot_tmp_remove(struct snapshot_slot *s)
{
	if (s->tmp[0])
		(void)snapshot_remove_dir(s->tmp);
	s->tmp[0] = '\0';
}

/* The files the jailed vmm wrote (as a uid that is released after the run)
 * become ours, readable by any later run's vmm. */
static int adopt_files(int dfd, char *err, size_t errlen)
{
	const char *names[] = { SNAPSHOT_STATE, SNAPSHOT_MEMORY };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!whole_file(dfd, names[i]))
			return errf(err, errlen, "vmm wrote no %s file", names[i]);
		if (fchownat(dfd, names[i], geteuid(), getegid(), AT_SYMLINK_NOFOLLOW) < 0 ||
		    fchmodat(dfd, names[i], 0644, 0) < 0)
			return errf(err, errlen, "%s: %s", names[i], strerror(errno));
	}
	if (fchown(dfd, geteuid(), getegid()) < 0 || fchmod(dfd, 0755) < 0)
		return errf(err, errlen, "the snapshot directory: %s", strerror(errno));
	return 0;
}

/* tmp into path's place when a snapshot is there already: the old one is
 * moved aside first (rename replaces only an empty directory), so the
 * path is without a snapshot for two renames only. */
static int replace_into(const struct snapshot_slot *s, char *err, size_t errlen)
{
	char aside[PATH_MAX + 16];
	snprintf(aside, sizeof(aside), "%s.old-XXXXXX", s->path);
	if (!mkdtemp(aside))
		return errf(err, errlen, "%.300s: %s", aside, strerror(errno));
	if (rename(s->path, aside) < 0 || rename(s->tmp, s->path) < 0) {
		int e = errno;
		(void)rmdir(aside);
		return errf(err, errlen, "%.300s: %s", s->path, strerror(e));
	}
	(void)snapshot_remove_dir(aside);
	return 0;
}

int snapshot_commit(struct snapshot_slot *s, char *err, size_t errlen)
{
	int dfd = open(s->tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return errf(err, errlen, "%.300s: %s", s->tmp, strerror(errno));
	struct stat st;
	int rc = adopt_files(dfd, err, errlen);
	if (!rc && fstat(dfd, &st) < 0)
		rc = errf(err, errlen, "%.300s: %s", s->tmp, strerror(errno));
	close(dfd);
	if (rc)
		return -1;
	if (rename(s->tmp, s->path) < 0) {
		if (errno != ENOTEMPTY && errno != EEXIST)
			return errf(err, errlen, "%.300s: %s", s->path, strerror(errno));
		if (replace_into(s, err, errlen))
			return -1;
	}
	(void)unlink(s->failed);
	s->tmp[0] = '\0';
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	return 0;
}

int snapshot_discard(struct snapshot_slot *s, int64_t timeout_ms, char *err, size_t errlen)
{
	if (snapshot_lock(s, -1, timeout_ms, err, errlen))
		return -1;
	/* Another run may have remade it since: only the one found goes. */
	struct stat st;
	int rc = 0;
	if (lstat(s->path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_dev == s->dev && st.st_ino == s->ino &&
	    snapshot_remove_dir(s->path) < 0)
		rc = errf(err, errlen, "%.300s: %s", s->path, strerror(errno));
	snapshot_unlock(s);
	return rc;
}
