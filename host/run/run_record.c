/* Records of live runs and the sweeper of dead ones (see run_record.h). */
#include "run_record.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errmsg.h"
#include "jail.h"
#include "tree.h"

#define RECORD_MAX_BYTES  (16 * 1024)   /* far more than RUN_RECORD_MAX_CGROUPS + 1 lines */
#define TREE_MAX_DEPTH    16            /* deeper than any run directory vmrun makes */

int run_record_dir_choose(uid_t euid, const char *runtime_dir, char *out, size_t len)
{
	int n;
	if (euid == 0)
		n = snprintf(out, len, "%s", RUN_RECORD_DIR);
	else if (runtime_dir && runtime_dir[0] == '/')
		n = snprintf(out, len, "%s/vmrun/runs", runtime_dir);
	else
		return -1;
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* One level of the records directory: made if missing, then it must be a
 * directory (not a link) of ours that nobody else may write. */
static int level_ready(const char *path, mode_t mode, char *err, size_t errlen)
{
	struct stat st;
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return errf(err, errlen, "run records: %s: %s", path, strerror(errno));
	if (lstat(path, &st) < 0)
		return errf(err, errlen, "run records: %s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return errf(err, errlen, "run records: %s must be a directory of uid %u writable by it alone", path,
			    (unsigned)geteuid());
	return 0;
}

int run_record_dir(char *out, size_t len, char *err, size_t errlen)
{
	if (run_record_dir_choose(geteuid(), getenv("XDG_RUNTIME_DIR"), out, len))
		return errf(err, errlen, "run records: no directory for uid %u (no $XDG_RUNTIME_DIR)",
			    (unsigned)geteuid());
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", out);
	*strrchr(parent, '/') = '\0';   /* .../vmrun: 0755 for root, as jail's uid directory wants it */
	if (level_ready(parent, geteuid() == 0 ? 0755 : 0700, err, errlen) || level_ready(out, 0700, err, errlen))
		return -1;
	return 0;
}

/* Append one line to r's record in a single write. */
static int record_line(struct run_record *r, const char *line)
{
	size_t n = strlen(line);
	ssize_t w = write(r->fd, line, n);
	if (w < 0)
		return -1;
	if ((size_t)w != n) {
		errno = ENOSPC;
		return -1;
	}
	return 0;
}

int run_record_open(struct run_record *r, const char *dir, const char *run_id, const char *run_dir, char *err,
		    size_t errlen)
{
	char line[PATH_MAX + 16], proc[64];
	r->fd = -1;
	int n = snprintf(r->path, sizeof(r->path), "%s/%s", dir, run_id);
	if (n < 0 || (size_t)n >= sizeof(r->path) || strchr(run_id, '/'))
		return errf(err, errlen, "run record: a bad name for run %.64s", run_id);
	/* Unnamed until it is locked and names the run directory: a sweeper
	 * never sees a record whose lock it could take from its live run. */
	int fd = open(dir, O_TMPFILE | O_WRONLY | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return errf(err, errlen, "run record: %s: %s", dir, strerror(errno));
	snprintf(line, sizeof(line), "dir %s\n", run_dir);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	r->fd = fd;
	if (flock(fd, LOCK_EX) < 0 || record_line(r, line) < 0 ||
	    linkat(AT_FDCWD, proc, AT_FDCWD, r->path, AT_SYMLINK_FOLLOW) < 0) {
		int e = errno;
		close(fd);
		r->fd = -1;
		return errf(err, errlen, "run record: %s: %s", r->path, strerror(e));
	}
	return 0;
}

int run_record_add_cgroup(struct run_record *r, int version, const char *path)
{
	if (r->fd < 0)
		return 0;
	char line[PATH_MAX + 32];
	snprintf(line, sizeof(line), "cgroup %d %s\n", version, path);
	return record_line(r, line);
}

void run_record_close(struct run_record *r)
{
	if (r->fd < 0)
		return;
	unlink(r->path);
	close(r->fd);
	r->fd = -1;
}

/* ---- parsing ---------------------------------------------------------------- */

/* Whether path is absolute and has no "", "." or ".." component. */
static bool path_plain(const char *path)
{
	if (path[0] != '/')
		return false;
	for (const char *c = path + 1;;) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!c[n])
			return true;
		c += n + 1;
	}
}

/* One line (NUL-terminated, no newline) into f. */
static int parse_line(char *line, struct run_record_facts *f)
{
	if (!strncmp(line, "dir ", 4)) {
		const char *p = line + 4, *base = strrchr(p, '/');
		if (f->dir[0] || !path_plain(p) || strncmp(base + 1, "vmrun-", 6) || strlen(p) >= sizeof(f->dir))
			return -1;
		memcpy(f->dir, p, strlen(p) + 1);
		return 0;
	}
	if (!strncmp(line, "cgroup ", 7) && (line[7] == '1' || line[7] == '2') && line[8] == ' ') {
		const char *p = line + 9;
		if (f->ncgroups == RUN_RECORD_MAX_CGROUPS || strncmp(p, "/sys/fs/cgroup/", 15) || !path_plain(p) ||
		    strlen(p) >= sizeof(f->cgroup[0].path))
			return -1;
		f->cgroup[f->ncgroups].version = line[7] - '0';
		memcpy(f->cgroup[f->ncgroups].path, p, strlen(p) + 1);
		f->ncgroups++;
		return 0;
	}
	return -1;
}

int run_record_parse(const char *text, size_t len, struct run_record_facts *f)
{
	memset(f, 0, sizeof(*f));
	char line[PATH_MAX + 32];
	for (size_t at = 0; at < len;) {
		const char *nl = memchr(text + at, '\n', len - at);
		if (!nl)
			return 0;   /* cut short by the writer's death: nothing it named was made yet */
		size_t n = (size_t)(nl - (text + at));
		if (n >= sizeof(line) || memchr(text + at, '\0', n))
			return -1;
		memcpy(line, text + at, n);
		line[n] = '\0';
		if (parse_line(line, f))
			return -1;
		at += n + 1;
	}
	return 0;
}

/* ---- the sweep --------------------------------------------------------------- */

/* Reclaim what f names. Returns 0 when all of it is gone. */
static int reclaim(const struct run_record_facts *f, struct run_sweep *st)
{
	int rc = 0;
	for (unsigned i = 0; i < f->ncgroups; i++) {
		bool there = access(f->cgroup[i].path, F_OK) == 0;
		if (jail_reclaim_cgroup(f->cgroup[i].version, f->cgroup[i].path))
			rc = -1;
		else if (there)
			st->cgroups++;
	}
	if (f->dir[0]) {
		bool there = access(f->dir, F_OK) == 0;
		if (tree_remove(f->dir, TREE_MAX_DEPTH))
			rc = -1;
		else if (there)
			st->dirs++;
	}
	return rc;
}

/* One record, name in the records directory dirfd: left alone while its
 * run lives; else what it names reclaimed, and it removed. */
static void sweep_one(int dirfd, const char *name, struct run_sweep *st)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat held, now;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		goto out;   /* a live run's */
	/* Another sweeper may have handled it and unlinked it before we won the lock. */
	if (fstat(fd, &held) < 0 || fstatat(dirfd, name, &now, AT_SYMLINK_NOFOLLOW) < 0 || held.st_ino != now.st_ino ||
	    held.st_dev != now.st_dev || !S_ISREG(held.st_mode))
		goto out;
	char text[RECORD_MAX_BYTES];
	ssize_t n = pread(fd, text, sizeof(text), 0);
	struct run_record_facts f;
	st->runs++;
	if (n < 0 || (size_t)n == sizeof(text) || run_record_parse(text, (size_t)n, &f)) {
		/* not one of ours to act on; removed so it is not read again */
		st->failed++;
		unlinkat(dirfd, name, 0);
		goto out;
	}
	if (reclaim(&f, st))
		st->failed++;   /* kept: the next sweep tries again */
	else
		unlinkat(dirfd, name, 0);
out:
	close(fd);
}

int run_record_sweep(const char *dir, struct run_sweep *st, char *err, size_t errlen)
{
	memset(st, 0, sizeof(*st));
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : errf(err, errlen, "run records: %s: %s", dir, strerror(errno));
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			sweep_one(dirfd(d), e->d_name, st);
	closedir(d);
	return 0;
}
