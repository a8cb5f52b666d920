#include "caller.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "errmsg.h"

/* A decimal id as sudo writes it: digits only, below (uid_t)-1. */
static int parse_id(const char *s, unsigned *out)
{
	if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 10)
		return -1;
	unsigned long long v = strtoull(s, NULL, 10);
	if (v >= 0xffffffffull)
		return -1;
	*out = (unsigned)v;
	return 0;
}

int caller_decide(uid_t ruid, gid_t rgid, uid_t euid, const char *sudo_uid, const char *sudo_gid,
		  struct caller *c, char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	c->uid = ruid;
	c->gid = rgid;
	if (euid != 0)
		return 0;   /* not root: the kernel checks our own rights anyway */
	if (ruid != 0) {
		c->switch_ids = true;   /* a set-uid root vmrun acts for its real user */
		return 0;
	}
	if (!sudo_uid && !sudo_gid)
		return 0;   /* root itself */
	unsigned u, g;
	if (!sudo_uid || !sudo_gid)
		return errf(err, errlen, "SUDO_UID and SUDO_GID must be set together (or neither)");
	if (parse_id(sudo_uid, &u) || parse_id(sudo_gid, &g))
		return errf(err, errlen, "SUDO_UID '%.20s' or SUDO_GID '%.20s' is not a numeric id", sudo_uid, sudo_gid);
	c->uid = u;
	c->gid = g;
	c->via_sudo = true;
	c->switch_ids = u != 0 || g != 0;
	return 0;
}

int caller_identify(struct caller *c, char *err, size_t errlen)
{
	if (caller_decide(getuid(), getgid(), geteuid(), getenv("SUDO_UID"), getenv("SUDO_GID"), c, err, errlen))
		return -1;
	if (!c->switch_ids)
		return 0;
	if (!c->via_sudo) {
		c->ngroups = getgroups(CALLER_MAX_GROUPS, c->groups);
		if (c->ngroups < 0)
			return errf(err, errlen, "getgroups: %s", strerror(errno));
		return 0;
	}
	/* sudo reset our groups to root's: the caller's come from the group
	 * database; a user it does not know gets just the primary group. */
	struct passwd pwd, *pw = NULL;
	char buf[4096];
	c->ngroups = CALLER_MAX_GROUPS;
	if (getpwuid_r(c->uid, &pwd, buf, sizeof(buf), &pw) != 0 || !pw ||
	    getgrouplist(pw->pw_name, c->gid, c->groups, &c->ngroups) < 0) {
		c->groups[0] = c->gid;
		c->ngroups = 1;
	}
	return 0;
}

/* Set this thread's capabilities to caps, with the effective set emptied
 * when drop. capset(2) raw: it is per thread, as the ids are. */
static int set_caps(const struct __user_cap_data_struct *caps, bool drop)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	memcpy(d, caps, sizeof(d));
	for (size_t i = 0; drop && i < _LINUX_CAPABILITY_U32S_3; i++)
		d[i].effective = 0;
	return (int)syscall(SYS_capset, &h, d);
}

int caller_enter(const struct caller *c, struct caller_saved *s)
{
	memset(s, 0, sizeof(*s));
	if (!c->switch_ids)
		return 0;
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	if (syscall(SYS_capget, &h, s->caps) < 0)
		return -1;
	/* Raw system calls: the kernel's are per thread, glibc's setgroups
	 * would change every thread of the process. */
	s->ngroups = (int)syscall(SYS_getgroups, CALLER_MAX_GROUPS, s->groups);
	if (s->ngroups < 0)
		return -1;
	s->fsuid = (uid_t)setfsuid((uid_t)-1);
	s->fsgid = (gid_t)setfsgid((gid_t)-1);
	if (syscall(SYS_setgroups, (size_t)c->ngroups, c->groups) < 0)
		return -1;
	/* setfsuid reports the old id, not failure: check that it took. */
	setfsgid(c->gid);
	setfsuid(c->uid);
	s->active = true;
	/* Last, since the switch above needs CAP_SETUID and CAP_SETGID: no
	 * capability at all, so that nothing but the caller's ids decides
	 * (CAP_SYS_PTRACE would pass /proc's ptrace checks, for one). */
	if ((uid_t)setfsuid((uid_t)-1) != c->uid || (gid_t)setfsgid((gid_t)-1) != c->gid ||
	    set_caps(s->caps, true) < 0) {
		int e = errno ? errno : EPERM;
		caller_leave(s);
		errno = e;
		return -1;
	}
	return 0;
}

void caller_leave(struct caller_saved *s)
{
	if (!s->active)
		return;
	int e = errno;
	(void)set_caps(s->caps, false);   /* first: setgroups needs CAP_SETGID */
	setfsuid(s->fsuid);   /* then back to root's file-system capabilities */
	setfsgid(s->fsgid);
	(void)syscall(SYS_setgroups, (size_t)s->ngroups, s->groups);
	s->active = false;
	errno = e;
}

/* One component of a path: n bytes at p. */
struct comp {
	const char *p;
	size_t n;
};

static bool is(const struct comp *c, const char *s)
{
	return c->n == strlen(s) && !memcmp(c->p, s, c->n);
}

static bool is_id(const struct comp *c)
{
	if (is(c, "self") || is(c, "thread-self"))
		return true;
	for (size_t i = 0; i < c->n; i++)
		if (c->p[i] < '0' || c->p[i] > '9')
			return false;
	return c->n > 0;
}

/* Whether the n components at c name /proc/PID[/task/TID]/(root|cwd|fd)
 * anywhere along them. */
static bool names_link(const struct comp *c, size_t n)
{
	for (size_t i = 0; i + 2 < n; i++) {
		if (!is(&c[i], "proc") || !is_id(&c[i + 1]))
			continue;
		size_t j = i + 2;
		if (is(&c[j], "task") && j + 2 < n && is_id(&c[j + 1]))
			j += 2;
		if (is(&c[j], "root") || is(&c[j], "cwd") || is(&c[j], "fd"))
			return true;
	}
	return false;
}

bool caller_proc_link(const char *path)
{
	struct comp raw[PATH_MAX / 2 + 1], norm[PATH_MAX / 2 + 1];
	size_t nraw = 0, nnorm = 0;
	if (strlen(path) >= PATH_MAX)
		return true;   /* open would refuse it anyway */
	for (const char *p = path; *p;) {
		size_t len = strcspn(p, "/");
		struct comp c = { p, len };
		p += len + (p[len] == '/');
		if (!len || is(&c, "."))
			continue;
		raw[nraw++] = c;
		if (is(&c, ".."))
			nnorm -= nnorm > 0;
		else
			norm[nnorm++] = c;
	}
	/* Both: "/proc/1/root/.." is the other namespace's root as open walks
	 * it, "/proc/1/../1/root" only once ".." is taken back. */
	return names_link(raw, nraw) || names_link(norm, nnorm);
}

bool caller_path_refused(const char *path)
{
	char cwd[PATH_MAX], full[2 * PATH_MAX + 2];
	if (caller_proc_link(path))
		return true;
	if (path[0] == '/' || !getcwd(cwd, sizeof(cwd)))
		return false;   /* without a working directory, open would not get far */
	snprintf(full, sizeof(full), "%s/%s", cwd, path);
	return caller_proc_link(full);
}

/* open(2) of path at dfd for c, already entered: acting for someone else,
 * through no /proc link at all, however reached (a symlink to
 * /proc/PID/root included). A kernel before openat2 (5.6) gets a plain
 * openat: the emptied capabilities still hold the line there. */
static int open_entered(const struct caller *c, int dfd, const char *path, int flags)
{
	if (c->switch_ids) {
		struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC), .resolve = RESOLVE_NO_MAGICLINKS };
		int fd = (int)syscall(SYS_openat2, dfd, path, &how, sizeof(how));
		if (fd >= 0 || errno != ENOSYS)
			return fd;
	}
	return openat(dfd, path, flags | O_CLOEXEC);
}

int caller_open(const struct caller *c, const char *path, int flags)
{
	if (caller_path_refused(path)) {
		errno = EACCES;
		return -1;
	}
	struct caller_saved s;
	if (caller_enter(c, &s) < 0)
		return -1;
	int fd = open_entered(c, AT_FDCWD, path, flags);
	caller_leave(&s);
	return fd;
}

/* The directory part and the last name of path, for *at() calls. */
static int split(const char *path, char *dir, size_t len, const char **name)
{
	const char *slash = strrchr(path, '/');
	*name = slash ? slash + 1 : path;
	if (!**name || !strcmp(*name, ".") || !strcmp(*name, "..")) {
		errno = EINVAL;
		return -1;
	}
	int n = slash ? snprintf(dir, len, "%.*s", slash == path ? 1 : (int)(slash - path), path)
		      : snprintf(dir, len, ".");
	if (n < 0 || (size_t)n >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

int caller_mkdir(const struct caller *c, const char *path)
{
	char dir[PATH_MAX];
	const char *name;
	if (caller_path_refused(path)) {
		errno = EACCES;
		return -1;
	}
	if (split(path, dir, sizeof(dir), &name) < 0)
		return -1;
	struct caller_saved s;
	if (caller_enter(c, &s) < 0)
		return -1;
	/* Made and opened through one fd of the parent, so that no rename or
	 * link of a directory above can put another directory there; and the
	 * result must be a directory of the caller's, just made. */
	int fd = -1, e = 0;
	int parent = open_entered(c, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY);
	if (parent < 0 || mkdirat(parent, name, 0755) < 0) {
		e = errno;
		goto out;
	}
	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != c->uid || st.st_nlink != 2) {
		e = fd < 0 ? errno : EEXIST;
		if (fd >= 0)
			close(fd);
		fd = -1;
		(void)unlinkat(parent, name, AT_REMOVEDIR);
	}
out:
	if (parent >= 0)
		close(parent);
	caller_leave(&s);
	if (fd < 0)
		errno = e;
	return fd;
}

int caller_rmdir(const struct caller *c, const char *path)
{
	struct caller_saved s;
	if (caller_enter(c, &s) < 0)
		return -1;
	int rc = rmdir(path);
	caller_leave(&s);
	return rc;
}

/* Whether root may work by path in the directory st, acting for c: no
 * one else may rename or replace what is in it. */
static bool root_only(const struct caller *c, const struct stat *st)
{
	return !c->switch_ids || (st->st_uid == 0 && (!(st->st_mode & 022) || (st->st_mode & S_ISVTX)));
}

int caller_work_dir(const struct caller *c, const char *path, char *resolved, size_t len, char *err,
		    size_t errlen)
{
	char real[PATH_MAX], name[NAME_MAX + 1];
	if (!realpath(path, real))
		return errf(err, errlen, "%.300s: %s", path, strerror(errno));
	if (snprintf(resolved, len, "%s", real) >= (int)len)
		return errf(err, errlen, "%.300s: path too long", path);
	/* Walked down from / by fd, following no symlink (realpath took them
	 * all), so that each directory checked is the one the next is opened
	 * in, and the last is the one returned. */
	int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (const char *p = real + 1;;) {
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0) {
			errf(err, errlen, "%.300s: %.*s: %s", path, (int)(p - real), real, strerror(errno));
			break;
		}
		if (!root_only(c, &st)) {
			errf(err, errlen, "%.300s: acting for uid %u, vmrun works only in a directory whose every "
				"parent is root's and writable by root alone or sticky; %.*s is not", path,
				(unsigned)c->uid, p > real + 1 ? (int)(p - real - 1) : 1, real);
			break;
		}
		size_t n = strcspn(p, "/");
		if (!n)
			return fd;
		snprintf(name, sizeof(name), "%.*s", (int)n, p);
		int next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
		p += n + (p[n] == '/');
	}
	if (fd >= 0)
		close(fd);
	return -1;
}
