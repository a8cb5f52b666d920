#include "files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stage.h"

void files_init(struct files *f, const char *cwd, uid_t uid, gid_t gid)
{
	*f = (struct files){ .cwd = cwd, .uid = uid, .gid = gid };
	for (unsigned i = 0; i < FILES_MAX_OPEN; i++)
		f->open[i].fd = -1;
}

/* Look paths up as the sandbox user from now until as_agent: the kernel
 * checks them against the user's ids, root's file capabilities off. */
static void as_user(const struct files *f)
{
	if (f->uid == (uid_t)-1)
		return;
	setfsgid(f->gid);
	setfsuid(f->uid);
}

static void as_agent(const struct files *f)
{
	if (f->uid == (uid_t)-1)
		return;
	setfsuid(0);
	setfsgid(0);
}

/* path, made absolute from f->cwd, into out. Returns 0, or ENAMETOOLONG. */
static int full_path(const struct files *f, const char *path, char *out, size_t len)
{
	int n = path[0] == '/' ? snprintf(out, len, "%s", path) : snprintf(out, len, "%s/%s", f->cwd, path);
	return n < 0 || (size_t)n >= len ? ENAMETOOLONG : 0;
}

static int end(struct outq *q, uint32_t id, int error, uint32_t flags, const struct proto_entry *e)
{
	uint8_t buf[PROTO_FILE_END_LEN + PROTO_ENTRY_HDR + PROTO_NAME_MAX];
	size_t n = proto_encode_file_end(buf, sizeof(buf), id, error > 4095 ? EIO : error, flags, e);
	return outq_put(q, PROTO_FILE_END, buf, (uint32_t)n, NULL, 0);
}

/* st as an entry named name (its last component; "/" for the root). */
static void to_entry(const struct stat *st, const char *name, struct proto_entry *e)
{
	e->mode = st->st_mode;
	e->size = (uint64_t)st->st_size;
	e->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	snprintf(e->name, sizeof(e->name), "%s", name);
}

static const char *base_name(const char *path)
{
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	const char *b = path + n;
	while (b > path && b[-1] != '/')
		b--;
	return *b && *b != '/' ? b : "/";
}

/* ---- the one-shot operations ---------------------------------------------------- */

static int op_stat(const char *path, struct proto_entry *e)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno;
	const char *b = base_name(path);
	size_t n = strcspn(b, "/");
	char name[PROTO_NAME_MAX + 1] = "-";   /* "/" and ".." have no name of their own to give */
	if (proto_valid_name(b, n)) {
		memcpy(name, b, n);
		name[n] = '\0';
	}
	to_entry(&st, name, e);
	return 0;
}

/* LIST: entries packed into FILE_DATA frames, then FILE_END. */
static int op_list(uint32_t id, const char *path, struct outq *q, int *error, uint32_t *flags)
{
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return (*error = errno), 0;
	DIR *d = fdopendir(dfd);
	if (!d) {
		*error = errno;
		close(dfd);
		return 0;
	}
	uint8_t buf[PROTO_MAX_PAYLOAD];
	size_t at = PROTO_SB_ID_LEN;
	unsigned count = 0;
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		if (!proto_valid_name(de->d_name, n))
			continue;   /* . and .. */
		if (count == FILES_LIST_MAX) {
			*flags |= PROTO_FILE_TRUNCATED;
			break;
		}
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;   /* gone since readdir */
		struct proto_entry e;
		to_entry(&st, de->d_name, &e);
		size_t next = proto_put_entry(buf, sizeof(buf), at, &e);
		if (!next) {
			if ((rc = outq_put(q, PROTO_FILE_DATA, &id, PROTO_SB_ID_LEN, buf + PROTO_SB_ID_LEN,
					   (uint32_t)(at - PROTO_SB_ID_LEN))) < 0)
				break;
			at = proto_put_entry(buf, sizeof(buf), PROTO_SB_ID_LEN, &e);
		} else {
			at = next;
		}
		count++;
	}
	if (!rc && at > PROTO_SB_ID_LEN)
		rc = outq_put(q, PROTO_FILE_DATA, &id, PROTO_SB_ID_LEN, buf + PROTO_SB_ID_LEN, (uint32_t)(at - PROTO_SB_ID_LEN));
	closedir(d);
	return rc;
}

/* mkdir -p: each missing directory from the top, mode for all of them. */
static int op_mkdir(char *path, mode_t mode)
{
	for (char *p = path + 1;; p++) {
		if (*p != '/' && *p)
			continue;
		char c = *p;
		*p = '\0';
		int e = mkdir(path, mode) < 0 && errno != EEXIST ? errno : 0;
		*p = c;
		if (e)
			return e;
		if (!c)
			break;
	}
	struct stat st;
	if (stat(path, &st) < 0)
		return errno;
	return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

/* Remove name in the directory dfd, with everything in it when it is a
 * directory (never following a symlink), at most depth levels down. */
static int remove_at(int dfd, const char *name, unsigned depth)
{
	if (unlinkat(dfd, name, 0) == 0)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return errno;
	if (depth == 0)
		return ELOOP;
	int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return errno == ENOTDIR ? EPERM : errno;   /* EPERM was unlink's own answer */
	DIR *d = fdopendir(sub);
	if (!d) {
		int e = errno;
		close(sub);
		return e;
	}
	int e = 0;
	struct dirent *de;
	while (!e && (de = readdir(d)))
		if (proto_valid_name(de->d_name, strlen(de->d_name)))
			e = remove_at(dirfd(d), de->d_name, depth - 1);
	closedir(d);
	if (!e && unlinkat(dfd, name, AT_REMOVEDIR) < 0)
		e = errno;
	return e;
}

static int op_remove(const char *path)
{
	return remove_at(AT_FDCWD, path, FILES_REMOVE_DEPTH);
}

/* ---- streams --------------------------------------------------------------------- */

static struct file_stream *stream_of(struct files *f, uint32_t id)
{
	for (unsigned i = 0; i < FILES_MAX_OPEN; i++)
		if (f->open[i].used && f->open[i].id == id)
			return &f->open[i];
	return NULL;
}

/* TAR_OUT, TAR_IN on the directory dir (checked to be one, as the
 * sandbox user): busybox tar started as that user, its stdout (creating)
 * or its stdin (extracting) the stream's fd. Returns 0, or an errno. */
static int open_tar(struct files *f, struct file_stream *s, const struct proto_file_req *r, const char *dir)
{
	struct stat st;
	if (stat(dir, &st) < 0)
		return errno;
	if (!S_ISDIR(st.st_mode))
		return ENOTDIR;
	bool in = r->op == PROTO_FILE_TAR_IN;
	char *const out_argv[] = { "tar", "-c", "-f", "-", "-C", (char *)dir, ".", NULL };
	char *const in_argv[] = { "tar", "-x", "-f", "-", "-C", (char *)dir, NULL };
	char *const env[] = { "PATH=" PROTO_PATH, NULL };
	/* the agent's own ceilings: tar is the host's errand, not a command */
	struct rlimit nproc, fsize;
	getrlimit(RLIMIT_NPROC, &nproc);
	getrlimit(RLIMIT_FSIZE, &fsize);
	struct stage_exec x = {
		.path = FILES_TAR, .argv = in ? in_argv : out_argv, .env = env, .cwd = "/", .uid = f->uid, .gid = f->gid,
		.nproc = nproc.rlim_max, .nofile = 256, .fsize = fsize.rlim_max,
	};
	struct stage_proc p;
	int failed[2] = { 0, 0 };
	int rc = stage_spawn(&x, in, &p, failed);
	if (rc)
		return rc < 0 ? errno : failed[1] ? failed[1] : EIO;
	if (p.pidfd >= 0)
		close(p.pidfd);
	if (in) {
		fcntl(p.in, F_SETFL, 0);   /* written as WRITE's data comes, whole */
		close(p.out);
	} else {
		fcntl(p.out, F_SETFL, O_NONBLOCK);
	}
	fcntl(p.err, F_SETFL, O_NONBLOCK);
	*s = (struct file_stream){ .used = true, .writing = in, .id = r->id, .fd = in ? p.in : p.out,
				   .credit = in ? 0 : PROTO_READ_WINDOW, .tar = p.pid, .tar_err = p.err };
	return 0;
}

/* Its tar's end: 0 when it exited 0, else EINVAL (not a tar, or what it
 * could not read or write). */
static int tar_status(struct file_stream *s)
{
	int status = 0;
	if (waitpid(s->tar, &status, 0) != s->tar)
		status = 1;
	s->tar = 0;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : EINVAL;
}

static int open_stream(struct files *f, const struct proto_file_req *r, const char *path)
{
	if (stream_of(f, r->id))
		return EEXIST;
	struct file_stream *s = NULL;
	for (unsigned i = 0; i < FILES_MAX_OPEN && !s; i++)
		if (!f->open[i].used)
			s = &f->open[i];
	if (!s)
		return EMFILE;
	if (r->op == PROTO_FILE_TAR_OUT || r->op == PROTO_FILE_TAR_IN)
		return open_tar(f, s, r, path);
	bool writing = r->op == PROTO_FILE_WRITE;
	/* O_NONBLOCK: a FIFO in its place must not hang the agent (refused below) */
	/* O_NOCTTY: a terminal's slave (/dev/pts/N) never becomes PID 1's */
	int fd = writing ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, r->mode ? r->mode : 0644)
			 : open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return errno;
	struct stat st;
	struct statfs fs;
	int e = fstat(fd, &st) < 0 || fstatfs(fd, &fs) < 0 ? errno
		/* /proc/self is PID 1, which the kernel lets read itself
		 * whatever the file-system ids: no file of procfs, named or
		 * reached through a link */
		: fs.f_type == PROC_SUPER_MAGIC ? EACCES
		: S_ISDIR(st.st_mode) ? EISDIR : !S_ISREG(st.st_mode) ? EINVAL : 0;
	if (e) {
		close(fd);
		return e;
	}
	*s = (struct file_stream){ .used = true, .writing = writing, .id = r->id, .fd = fd,
				   .credit = writing ? 0 : PROTO_READ_WINDOW };
	return 0;
}

static void close_stream(struct file_stream *s)
{
	if (s->fd >= 0)
		close(s->fd);
	if (s->tar > 0) {
		kill(s->tar, SIGKILL);
		waitpid(s->tar, NULL, 0);
	}
	if (s->tar > 0 || s->tar_err > 0)
		close(s->tar_err);
	*s = (struct file_stream){ .fd = -1 };
}

int files_request(struct files *f, const struct proto_file_req *r, struct outq *q)
{
	char path[PATH_MAX], path2[PATH_MAX];
	struct proto_entry e;
	const struct proto_entry *ep = NULL;
	uint32_t flags = 0;
	int error = full_path(f, r->path, path, sizeof(path));
	if (!error && r->op == PROTO_FILE_RENAME)
		error = full_path(f, r->path2, path2, sizeof(path2));
	if (error)
		return end(q, r->id, error, 0, NULL);
	as_user(f);
	int rc = 0;
	switch (r->op) {
	case PROTO_FILE_STAT:
		if (!(error = op_stat(path, &e)))
			ep = &e;
		break;
	case PROTO_FILE_LIST:
		rc = op_list(r->id, path, q, &error, &flags);
		break;
	case PROTO_FILE_MKDIR:
		error = op_mkdir(path, r->mode ? r->mode : 0755);
		break;
	case PROTO_FILE_REMOVE:
		error = op_remove(path);
		break;
	case PROTO_FILE_RENAME:
		error = rename(path, path2) < 0 ? errno : 0;
		break;
	default:   /* READ, WRITE, TAR_OUT, TAR_IN: under way until their end */
		error = open_stream(f, r, path);
		as_agent(f);
		return error ? end(q, r->id, error, 0, NULL) : 0;
	}
	as_agent(f);
	return rc < 0 ? -1 : end(q, r->id, error, flags, ep);
}

int files_data(struct files *f, uint32_t id, const uint8_t *p, uint32_t n, struct outq *q)
{
	struct file_stream *s = stream_of(f, id);
	if (s && !s->writing) {   /* a READ's credit: the host took that many more bytes */
		uint32_t more;
		if (n == sizeof(more)) {
			memcpy(&more, p, sizeof(more));
			s->credit = s->credit + more > PROTO_READ_WINDOW ? PROTO_READ_WINDOW : s->credit + more;
		}
		return 0;
	}
	if (!s)
		return 0;
	if (n == 0) {
		int error = s->error;
		if (close(s->fd) < 0 && !error)
			error = errno;
		s->fd = -1;
		if (s->tar > 0) {   /* extracted once tar has read the end */
			int e = tar_status(s);
			error = error ? error : e;
		}
		close_stream(s);
		return end(q, id, error, 0, NULL);
	}
	as_user(f);   /* no root file capabilities for the write either (CAP_FSETID, reserved blocks) */
	while (n && !s->error) {
		ssize_t k = write(s->fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			s->error = k < 0 ? errno : EIO;
			break;
		}
		p += k;
		n -= (uint32_t)k;
	}
	as_agent(f);
	return 0;
}

int files_pump(struct files *f, struct outq *q)
{
	for (unsigned i = 0; i < FILES_MAX_OPEN && !outq_full(q); i++) {
		struct file_stream *s = &f->open[i];
		char drop[512];
		while (s->used && s->tar > 0 && read(s->tar_err, drop, sizeof(drop)) > 0)
			;   /* tar's words about what it skipped: not the host's */
		if (!s->used || s->writing || !s->credit)
			continue;
		uint8_t buf[PROTO_SB_CHUNK];
		ssize_t k = read(s->fd, buf, s->credit < sizeof(buf) ? (size_t)s->credit : sizeof(buf));
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k > 0) {
			s->credit -= (uint64_t)k;
			if (outq_put(q, PROTO_FILE_DATA, &s->id, PROTO_SB_ID_LEN, buf, (uint32_t)k) < 0)
				return -1;
			continue;
		}
		uint32_t id = s->id;
		int error = k < 0 ? errno : 0;
		if (!error && s->tar > 0)
			error = tar_status(s);
		close_stream(s);
		if (end(q, id, error, 0, NULL) < 0)
			return -1;
	}
	return 0;
}

bool files_reading(const struct files *f)
{
	for (unsigned i = 0; i < FILES_MAX_OPEN; i++)
		if (f->open[i].used && !f->open[i].writing && f->open[i].credit && !f->open[i].tar)
			return true;
	return false;
}

bool files_waiting(const struct files *f)
{
	for (unsigned i = 0; i < FILES_MAX_OPEN; i++)
		if (f->open[i].used && !f->open[i].writing && f->open[i].credit && f->open[i].tar)
			return true;
	return false;
}

bool files_owns(const struct files *f, pid_t pid)
{
	for (unsigned i = 0; i < FILES_MAX_OPEN; i++)
		if (f->open[i].used && f->open[i].tar == pid)
			return true;
	return false;
}

void files_release(struct files *f)
{
	for (unsigned i = 0; i < FILES_MAX_OPEN; i++)
		if (f->open[i].used)
			close_stream(&f->open[i]);
}
