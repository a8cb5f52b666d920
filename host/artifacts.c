#include "artifacts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <et/com_err.h>
#include <ext2fs/ext2fs.h>

#include "artifacts_sandbox.h"
#include "clock.h"
#include "errmsg.h"
#include "session.h"   /* vmrun's clock */
#include "utf8.h"

/* The helper lists at most this many skipped entries; the last line says
 * that later ones went unlisted. The parent accepts no more. */
#define SKIP_CAP 10000
/* Longest report line: "F", a size, a path escaped 4 bytes per byte. */
#define LINE_MAX_LEN 8192
#define COPY_CHUNK (64 * 1024)
/* Fds the helper may hold besides one per open directory level. */
#define FD_SLACK 16
/* Every directory level adds at least "x/" to the path, so no walk goes
 * deeper than this whatever max_depth says. */
#define DEPTH_HARD_CAP (ARTIFACT_PATH_MAX / 2)
/* What the parent keeps of the helper's stderr (the rest is read and
 * dropped, so the helper never blocks on it). */
#define STDERR_KEEP 4096
/* Entries the ownership walk accepts beyond the helper's caps (files and
 * directories, max_files each). */
#define CHOWN_SLACK 64

#ifdef ARTIFACTS_TEST_HOOKS
/* Test builds only (the test includes this file): runs in the helper once
 * the sandbox is in place, with the destination's fd, to show what the
 * sandbox forbids. */
static void (*artifacts_test_sandboxed)(int destfd);
#endif
/* ---- report lines ------------------------------------------------------- */

/* The helper writes "F <size> <path>", "S <path>\t<reason>", "E <reason>"
 * (fatal) and "END", one per line. Paths and reasons are escaped so that
 * the line holds only printable ASCII: every byte outside 0x20..0x7e, and
 * the backslash, becomes \xNN; so does '/' when slash is set (a name that
 * contains one must not read as a path). dst gets at most cap-1 bytes and
 * a NUL, never half an escape; *cut says whether src did not fit. */
static size_t escape(char *dst, size_t cap, const char *src, size_t n, bool slash, bool *cut)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	*cut = false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)src[i];
		bool plain = c >= 0x20 && c <= 0x7e && c != '\\' && !(slash && c == '/');
		size_t need = plain ? 1 : 4;
		if (o + need >= cap) {
			*cut = true;
			break;
		}
		if (plain) {
			dst[o++] = (char)c;
		} else {
			dst[o++] = '\\';
			dst[o++] = 'x';
			dst[o++] = hex[c >> 4];
			dst[o++] = hex[c & 15];
		}
	}
	dst[o] = 0;
	return o;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Undo escape() into dst (cap bytes with the NUL); -1 on a malformed or
 * too long input. */
static int unescape(char *dst, size_t cap, const char *src, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)src[i];
		if (c < 0x20 || c > 0x7e || o + 1 >= cap)
			return -1;
		if (c == '\\') {
			if (n - i < 4 || src[i + 1] != 'x' || hexval(src[i + 2]) < 0 || hexval(src[i + 3]) < 0)
				return -1;
			c = (unsigned char)(hexval(src[i + 2]) << 4 | hexval(src[i + 3]));
			i += 3;
		}
		dst[o++] = (char)c;
	}
	dst[o] = 0;
	return 0;
}

/* a + b as a limit; past INT64_MAX unlimited (the kernel compares file
 * limits as signed). */
static uint64_t lim_add(uint64_t a, uint64_t b)
{
	return a > (uint64_t)INT64_MAX - b ? RLIM_INFINITY : a + b;
}

/* ---- the helper: walk ----------------------------------------------------- */

struct walk {
	ext2_filsys fs;
	const struct artifacts_limits *lim;
	unsigned max_depth, max_path;
	ext2fs_inode_bitmap copied, visited;
	uint64_t files, dirs, bytes;
	size_t nskipped;
	char path[ARTIFACT_PATH_MAX + 256 + 2];   /* raw relative path */
	size_t pathlen, namelen;                  /* namelen: its last part */
	unsigned level;                           /* parts in path; 0: artifacts/ */
	char out[16384];                          /* unsent report */
	size_t outlen;
	char *chunk;                              /* COPY_CHUNK bytes */
};

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* A report that cannot be sent ends the helper: the parent sees no END. */
static void flush_report(struct walk *w)
{
	if (write_all(SANDBOX_REPORT_FD, w->out, w->outlen) < 0)
		_exit(3);
	w->outlen = 0;
}

static void emit(struct walk *w, const char *line, size_t n)
{
	if (w->outlen + n > sizeof(w->out))
		flush_report(w);
	memcpy(w->out + w->outlen, line, n);
	w->outlen += n;
}

static void vfmt_line(char *buf, size_t cap, const char *prefix, const char *fmt, va_list ap)
{
	char raw[256];
	bool cut;
	vsnprintf(raw, sizeof(raw), fmt, ap);
	size_t n = strlen(prefix);
	memcpy(buf, prefix, n);
	escape(buf + n, cap - n - 1, raw, strlen(raw), false, &cut);
	strcat(buf, "\n");
}

/* Fatal: tell the parent why, in one line, and stop. */
static void __attribute__((noreturn, format(printf, 2, 3))) die(struct walk *w, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vfmt_line(line, 256, "E ", fmt, ap);
	va_end(ap);
	emit(w, line, strlen(line));
	flush_report(w);
	_exit(1);
}

/* Report the entry w->path names as skipped. Its path is escaped and cut
 * with "..." to fit an artifact_skip; the artifacts directory itself is
 * ".". Returns 0, the "entry done" of the visit functions below. */
static int skip_entry(struct walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int skip_entry(struct walk *w, const char *fmt, ...)
{
	char line[ARTIFACT_PATH_MAX + 160];
	char reason[256];
	bool cut;
	va_list ap;
	if (w->nskipped >= SKIP_CAP)
		return 0;
	if (++w->nskipped == SKIP_CAP) {
		snprintf(reason, sizeof(reason), "too many skipped entries; later ones not listed");
	} else {
		va_start(ap, fmt);
		vsnprintf(reason, sizeof(reason), fmt, ap);
		va_end(ap);
	}
	strcpy(line, "S ");
	if (w->level == 0) {
		strcat(line, ".");
	} else {
		size_t dir = w->pathlen - w->namelen, cap = ARTIFACT_PATH_MAX - 3;
		size_t n = escape(line + 2, cap, w->path, dir, false, &cut);
		if (!cut)
			n += escape(line + 2 + n, cap - n, w->path + dir, w->namelen, true, &cut);
		if (cut)
			strcpy(line + 2 + n, "...");
	}
	size_t n = strlen(line);
	line[n++] = '\t';
	escape(line + n, 127, reason, strlen(reason), false, &cut);
	strcat(line, "\n");
	emit(w, line, strlen(line));
	return 0;
}

static void report_file(struct walk *w, uint64_t size)
{
	char line[4 * ARTIFACT_PATH_MAX + 64];
	bool cut;
	int n = snprintf(line, sizeof(line), "F %llu ", (unsigned long long)size);
	escape(line + n, sizeof(line) - (size_t)n - 1, w->path, w->pathlen, false, &cut);
	strcat(line, "\n");
	emit(w, line, strlen(line));
}

/* NULL for a name we would write, else why not. ext2 names are at most
 * 255 bytes on disk; the length check guards the buffers anyway. */
static const char *bad_name(const char *name, size_t len)
{
	if (len == 0)
		return "invalid name: empty";
	if (len > 255)
		return "invalid name: longer than 255 bytes";
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return "invalid name: \".\" or \"..\"";
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c == '/')
			return "invalid name: contains '/'";
		if (c < 0x20 || c == 0x7f)
			return "invalid name: contains a control byte";
	}
	/* The result lists names as JSON strings and vmrund keeps them in
	 * text columns: a name that is not UTF-8 would be listed as another
	 * (U+FFFD for its bytes) or refused by the store. */
	if (!utf8_valid(name, len))
		return "invalid name: not UTF-8";
	return NULL;
}

static const char *kind_name(uint16_t mode)
{
	if (LINUX_S_ISLNK(mode))
		return "symbolic link";
	if (LINUX_S_ISCHR(mode))
		return "character device";
	if (LINUX_S_ISBLK(mode))
		return "block device";
	if (LINUX_S_ISFIFO(mode))
		return "FIFO";
	if (LINUX_S_ISSOCK(mode))
		return "socket";
	return "unknown file type";
}

struct backing {
	e2_blkcnt_t need, have, last;
};

static int count_block(ext2_filsys fs, blk64_t *blk, e2_blkcnt_t cnt, blk64_t ref_blk, int ref_off,
		       void *priv)
{
	struct backing *b = priv;
	(void)fs, (void)blk, (void)ref_blk, (void)ref_off;
	if (cnt < 0 || cnt >= b->need)
		return 0;
	if (cnt <= b->last)      /* a corrupt map listing a block twice */
		return BLOCK_ABORT;
	b->last = cnt;
	return ++b->have >= b->need ? BLOCK_ABORT : 0;
}

/* Whether every block below i_size is mapped. i_blocks cannot tell: the
 * guest wrote it too, and it counts metadata. Mapped blocks are counted
 * (each logical block once, in order), stopping at ceil(size/blocksize),
 * so the cost is bounded by the byte cap checked before. */
static bool size_backed(struct walk *w, ext2_ino_t ino, struct ext2_inode *in, uint64_t size)
{
	if (size == 0)
		return true;
	if (in->i_flags & EXT4_INLINE_DATA_FL) {
		size_t inl = 0;
		return ext2fs_inline_data_size(w->fs, ino, &inl) == 0 && size <= inl;
	}
	struct backing b = { (e2_blkcnt_t)((size - 1) / w->fs->blocksize + 1), 0, -1 };
	errcode_t err = ext2fs_block_iterate3(w->fs, ino, BLOCK_FLAG_READ_ONLY | BLOCK_FLAG_DATA_ONLY,
					      NULL, count_block, &b);
	return err == 0 && b.have == b.need;
}

/* Copy the data of ino into fd. 0 when all size bytes were copied, 1 when
 * the image's data could not be read (why in reason), -1 on a host write
 * error (errno set). */
static int copy_data(struct walk *w, ext2_ino_t ino, struct ext2_inode *in, uint64_t size, int fd,
		     char *reason, size_t rlen)
{
	ext2_file_t f;
	errcode_t err = ext2fs_file_open2(w->fs, ino, in, 0, &f);
	uint64_t done = 0;
	int rc = 0;
	if (err) {
		snprintf(reason, rlen, "unreadable file: %s", error_message(err));
		return 1;
	}
	while (done < size) {
		unsigned int got = 0;
		unsigned int want = size - done < COPY_CHUNK ? (unsigned)(size - done) : COPY_CHUNK;
		err = ext2fs_file_read(f, w->chunk, want, &got);
		if (err || got == 0) {
			snprintf(reason, rlen, "unreadable file data: %s",
				 err ? error_message(err) : "shorter than its size");
			rc = 1;
			break;
		}
		if (write_all(fd, w->chunk, got) < 0) {
			rc = -1;
			break;
		}
		done += got;
	}
	int saved = errno;
	ext2fs_file_close(f);
	errno = saved;
	return rc;
}

static int visit_file(struct walk *w, int dirfd, const char *name, ext2_ino_t ino, struct ext2_inode *in)
{
	uint64_t size = EXT2_I_SIZE(in);
	char reason[128];
	if (ext2fs_test_inode_bitmap2(w->copied, ino))
		return skip_entry(w, "hard link to an already copied file");
	if (w->files >= w->lim->max_files)
		return skip_entry(w, "over the file cap (%llu files)", (unsigned long long)w->lim->max_files);
	if (size > w->lim->max_bytes - w->bytes)
		return skip_entry(w, "%llu bytes would pass the byte cap (%llu bytes)", (unsigned long long)size,
			    (unsigned long long)w->lim->max_bytes);
	if (!size_backed(w, ino, in, size))
		return skip_entry(w, "size not backed by allocated blocks (sparse or inconsistent)");
	mode_t mode = (in->i_mode & 0111) ? 0755 : 0644;
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0 && errno == EEXIST)
		return skip_entry(w, "duplicate name");
	if (fd < 0)
		die(w, "creating %.*s: %s", (int)w->pathlen, w->path, strerror(errno));
	ext2fs_mark_inode_bitmap2(w->copied, ino);
	w->files++;
	int rc = copy_data(w, ino, in, size, fd, reason, sizeof(reason));
	if (rc < 0)
		die(w, "writing %.*s: %s", (int)w->pathlen, w->path, strerror(errno));
	if (rc > 0) {
		/* Leave no half copy that looks complete. */
		if (ftruncate(fd, 0) < 0)
			die(w, "emptying %.*s: %s", (int)w->pathlen, w->path, strerror(errno));
		skip_entry(w, "%s (left empty)", reason);
	} else {
		w->bytes += size;
		report_file(w, size);
	}
	close(fd);
	return 0;
}

static void walk_dir(struct walk *w, ext2_ino_t ino, int dirfd, unsigned depth);

static int visit_dir(struct walk *w, int dirfd, const char *name, ext2_ino_t ino, unsigned depth)
{
	if (depth > w->max_depth)
		return skip_entry(w, "deeper than the depth cap (%u)", w->lim->max_depth);
	if (ext2fs_test_inode_bitmap2(w->visited, ino))
		return skip_entry(w, "directory already visited (loop or hard link)");
	if (w->dirs >= w->lim->max_files)
		return skip_entry(w, "over the directory cap (%llu, the file cap)",
			    (unsigned long long)w->lim->max_files);
	ext2fs_mark_inode_bitmap2(w->visited, ino);
	if (mkdirat(dirfd, name, 0755) < 0) {
		if (errno == EEXIST)
			return skip_entry(w, "duplicate name");
		die(w, "creating %.*s: %s", (int)w->pathlen, w->path, strerror(errno));
	}
	w->dirs++;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		die(w, "opening %.*s: %s", (int)w->pathlen, w->path, strerror(errno));
	walk_dir(w, ino, fd, depth);
	close(fd);
	return 0;
}

/* One entry of a directory at depth-1; w->path already names it. */
static int visit(struct walk *w, int dirfd, const char *name, size_t len, ext2_ino_t ino, unsigned depth)
{
	struct ext2_inode in;
	const char *why = bad_name(name, len);
	if (why)
		return skip_entry(w, "%s", why);
	if (w->pathlen > w->max_path)
		return skip_entry(w, "path longer than the path cap (%u bytes)", w->max_path);
	if (ino < EXT2_FIRST_INODE(w->fs->super) && ino != EXT2_ROOT_INO)
		return skip_entry(w, "reserved inode %u", ino);
	errcode_t err = ext2fs_read_inode(w->fs, ino, &in);
	if (err)
		return skip_entry(w, "unreadable inode: %s", error_message(err));
	if (LINUX_S_ISDIR(in.i_mode))
		return visit_dir(w, dirfd, name, ino, depth);
	if (LINUX_S_ISREG(in.i_mode))
		return visit_file(w, dirfd, name, ino, &in);
	return skip_entry(w, "%s", kind_name(in.i_mode));
}

struct dir_ctx {
	struct walk *w;
	int dirfd;
	unsigned depth;   /* of the directory being read */
	unsigned seen;    /* entries passed to on_entry so far */
};

static int on_entry(ext2_ino_t dir, int entry, struct ext2_dir_entry *de, int offset, int blocksize,
		    char *buf, void *priv)
{
	struct dir_ctx *d = priv;
	struct walk *w = d->w;
	size_t len = (size_t)ext2fs_dirent_name_len(de);
	unsigned index = d->seen++;
	(void)dir, (void)entry, (void)offset, (void)blocksize, (void)buf;
	/* The directory's own "." and ".." (its first two entries) are not
	 * content; any other entry with those names is reported below. The
	 * count is ours: libext2fs's DIRENT_DOT_DOT_FILE misses the ".." it
	 * makes up for an inline-data directory. */
	if ((index == 0 && len == 1 && de->name[0] == '.') ||
	    (index == 1 && len == 2 && de->name[0] == '.' && de->name[1] == '.'))
		return 0;
	size_t saved = w->pathlen, saved_name = w->namelen;
	if (saved)
		w->path[w->pathlen++] = '/';
	memcpy(w->path + w->pathlen, de->name, len);
	w->pathlen += len;
	w->namelen = len;
	w->level++;
	char name[256];
	memcpy(name, de->name, len);
	name[len] = 0;
	visit(w, d->dirfd, name, len, de->inode, d->depth + 1);
	w->pathlen = saved;
	w->namelen = saved_name;
	w->level--;
	return 0;
}

static void walk_dir(struct walk *w, ext2_ino_t ino, int dirfd, unsigned depth)
{
	struct dir_ctx d = { w, dirfd, depth, 0 };
	errcode_t err = ext2fs_dir_iterate2(w->fs, ino, 0, NULL, on_entry, &d);
	if (err)
		skip_entry(w, "unreadable directory: %s", error_message(err));
}

/* The artifacts directory by inode number, looked up in the root without
 * following anything. */
static int walk_artifacts(struct walk *w, int destfd)
{
	ext2_ino_t ino;
	struct ext2_inode in;
	errcode_t err = ext2fs_lookup(w->fs, EXT2_ROOT_INO, "artifacts", 9, NULL, &ino);
	if (err == EXT2_ET_FILE_NOT_FOUND)
		return 0;   /* none: nothing to copy */
	if (err)
		return skip_entry(w, "artifacts: unreadable root directory: %s", error_message(err));
	err = ext2fs_read_inode(w->fs, ino, &in);
	if (err)
		return skip_entry(w, "artifacts: unreadable inode: %s", error_message(err));
	if (!LINUX_S_ISDIR(in.i_mode))
		return skip_entry(w, "artifacts is a %s, not a directory",
			    LINUX_S_ISREG(in.i_mode) ? "regular file" : kind_name(in.i_mode));
	ext2fs_mark_inode_bitmap2(w->visited, ino);
	walk_dir(w, ino, destfd, 0);
	return 0;
}

static void __attribute__((noreturn)) helper(const struct artifacts_sandbox *s, const struct artifacts_limits *lim)
{
	/* The walk's state, the helper's own (one per forked helper). */
	struct walk *w = calloc(1, sizeof(*w));
	char why[256], image[16];
	if (!w)
		_exit(2);
	w->lim = lim;
	w->max_depth = lim->max_depth < DEPTH_HARD_CAP ? lim->max_depth : DEPTH_HARD_CAP;
	w->max_path = lim->max_path < ARTIFACT_PATH_MAX - 1 ? lim->max_path : ARTIFACT_PATH_MAX - 1;
	if (artifacts_sandbox_start(s) < 0)
		_exit(2);
	initialize_ext2_error_table();
	if (artifacts_sandbox_enter(s, why, sizeof(why)) < 0)
		die(w, "%s", why);
	/* Opened before the filter, which allows no opening of existing
	 * files, and through the fd: the helper has no path to the image.
	 * EXT2_FLAG_RW is not set, and the fd is read-only anyway. */
	snprintf(image, sizeof(image), "%d", SANDBOX_IMAGE_FD);
	errcode_t err = ext2fs_open(image, EXT2_FLAG_64BITS, 0, 0, unixfd_io_manager, &w->fs);
	if (err)
		die(w, "the image: %s", error_message(err));
	w->fs->default_bitmap_type = EXT2FS_BMAP64_RBTREE;   /* memory ~ bits set */
	if (ext2fs_allocate_inode_bitmap(w->fs, "copied", &w->copied) ||
	    ext2fs_allocate_inode_bitmap(w->fs, "visited", &w->visited) || !(w->chunk = malloc(COPY_CHUNK)))
		die(w, "out of memory");
	if (artifacts_sandbox_filter() < 0)
		die(w, "cannot install the seccomp filter");
#ifdef ARTIFACTS_TEST_HOOKS
	if (artifacts_test_sandboxed)
		artifacts_test_sandboxed(SANDBOX_DEST_FD);
#endif
	walk_artifacts(w, SANDBOX_DEST_FD);
	emit(w, "END\n", 4);
	flush_report(w);
	_exit(0);
}

/* ---- the parent ----------------------------------------------------------- */

struct parser {
	const struct artifacts_limits *lim;
	struct artifacts_result *res;
	size_t capfiles, capskipped;
	uint64_t bytes;
	bool ended, failed;
	char helper_err[256];   /* the helper's own "E" line */
};

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 16;
	void *p = realloc(*arr, c * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = c;
	return 0;
}

/* A copied file's path, as the helper could only have written it: relative,
 * no empty, "." or ".." component, no control byte, within the path cap. */
static bool valid_path(const char *p, unsigned max_path)
{
	size_t n = strlen(p);
	if (n == 0 || n > max_path || n >= ARTIFACT_PATH_MAX)
		return false;
	for (const char *c = p; *c;) {
		const char *end = strchr(c, '/');
		size_t len = end ? (size_t)(end - c) : strlen(c);
		if (len == 0 || len > 255 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		for (size_t i = 0; i < len; i++)
			if ((unsigned char)c[i] < 0x20 || c[i] == 0x7f)
				return false;
		c += len + (end ? 1 : 0);
		if (end && !*c)
			return false;
	}
	return true;
}

static int parse_file(struct parser *p, const char *s, size_t n)
{
	struct artifacts_result *r = p->res;
	uint64_t size = 0;
	size_t i = 0;
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
		if (size > (UINT64_MAX - 9) / 10)
			return -1;
		size = size * 10 + (uint64_t)(s[i] - '0');
	}
	if (i == 0 || i >= n || s[i] != ' ')
		return -1;
	if (r->nfiles >= p->lim->max_files || size > p->lim->max_bytes - p->bytes)
		return -1;
	if (grow((void **)&r->files, &p->capfiles, r->nfiles, sizeof(*r->files)) < 0)
		return -1;
	struct artifact *a = &r->files[r->nfiles];
	unsigned max_path = p->lim->max_path;
	if (unescape(a->path, sizeof(a->path), s + i + 1, n - i - 1) < 0 || !valid_path(a->path, max_path))
		return -1;
	a->size = size;
	p->bytes += size;
	r->nfiles++;
	return 0;
}

/* Skipped paths and reasons stay in their escaped, printable form. */
static int parse_skip(struct parser *p, const char *s, size_t n)
{
	struct artifacts_result *r = p->res;
	const char *tab = memchr(s, '\t', n);
	if (!tab || r->nskipped >= SKIP_CAP)
		return -1;
	size_t plen = (size_t)(tab - s), rlen = n - plen - 1;
	/* An empty path is the entry with an empty name in artifacts/. */
	if (plen >= ARTIFACT_PATH_MAX || rlen == 0 || rlen >= sizeof(r->skipped->reason))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (i != plen && (s[i] < 0x20 || s[i] > 0x7e))
			return -1;
	if (grow((void **)&r->skipped, &p->capskipped, r->nskipped, sizeof(*r->skipped)) < 0)
		return -1;
	struct artifact_skip *k = &r->skipped[r->nskipped++];
	memcpy(k->path, s, plen);
	k->path[plen] = 0;
	memcpy(k->reason, tab + 1, rlen);
	k->reason[rlen] = 0;
	return 0;
}

static int parse_line(struct parser *p, const char *s, size_t n)
{
	if (p->ended || p->failed)
		return -1;
	if (n == 3 && memcmp(s, "END", 3) == 0) {
		p->ended = true;
		return 0;
	}
	if (n < 2 || s[1] != ' ')
		return -1;
	switch (s[0]) {
	case 'F':
		return parse_file(p, s + 2, n - 2);
	case 'S':
		return parse_skip(p, s + 2, n - 2);
	case 'E':
		for (size_t i = 2; i < n; i++)
			if (s[i] < 0x20 || s[i] > 0x7e)
				return -1;
		snprintf(p->helper_err, sizeof(p->helper_err), "%.*s", (int)(n - 2), s + 2);
		p->failed = true;
		return 0;
	}
	return -1;
}

/* The start of what the helper wrote on its stderr, to explain a failure. */
struct errtail {
	char buf[STDERR_KEEP];
	size_t len;
};

/* Read what the (non-blocking) stderr pipe holds, keeping the first
 * STDERR_KEEP bytes. 0 at EOF or on an error, 1 when more may come. */
static int drain_stderr(int fd, struct errtail *t)
{
	char chunk[4096];
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 1;
		if (n <= 0)
			return 0;
		size_t keep = sizeof(t->buf) - t->len < (size_t)n ? sizeof(t->buf) - t->len : (size_t)n;
		memcpy(t->buf + t->len, chunk, keep);
		t->len += keep;
	}
}

/* Append the helper's first stderr line that says something to err, made
 * printable (bytes outside 0x20..0x7e become '?'). Blank lines and ASan's
 * "=====" banner above its report are passed over. */
static void add_stderr_line(char *err, size_t errlen, const struct errtail *t)
{
	char line[160];
	size_t i = 0;
	while (i < t->len) {
		size_t o = 0;
		bool says = false;
		for (; i < t->len && t->buf[i] != '\n'; i++) {
			unsigned char c = (unsigned char)t->buf[i];
			says |= c != '=' && c != ' ' && c != '\r';
			if (o + 1 < sizeof(line))
				line[o++] = c >= 0x20 && c <= 0x7e ? (char)c : '?';
		}
		i++;   /* past the newline */
		line[o] = 0;
		if (says) {
			size_t n = strlen(err);
			if (n < errlen)
				snprintf(err + n, errlen - n, "; its stderr: %s", line);
			return;
		}
	}
}

/* Read and parse the report until EOF, draining stderr meanwhile. 0 at
 * EOF, 1 on timeout, -1 on a malformed report or read error (reason in
 * err). */
static int read_report(int fd, int errfd, int64_t deadline, struct parser *p, struct errtail *t, char *err,
		       size_t errlen)
{
	char buf[LINE_MAX_LEN];
	size_t len = 0;
	struct pollfd pfd[2] = { { fd, POLLIN, 0 }, { errfd, POLLIN, 0 } };
	for (;;) {
		int n = poll(pfd, 2, session_left_ms(deadline));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errf(err, errlen, "artifacts: poll: %s", strerror(errno));
		if (n == 0) {
			if (clock_mono_ms() >= deadline)
				return 1;
			continue;
		}
		if (pfd[1].revents && drain_stderr(errfd, t) == 0)
			pfd[1].fd = -1;   /* at EOF: poll passes over negative fds */
		if (!pfd[0].revents)
			continue;
		ssize_t got = read(fd, buf + len, sizeof(buf) - len);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got < 0)
			return errf(err, errlen, "artifacts: reading the helper's report: %s", strerror(errno));
		if (got == 0)
			break;
		len += (size_t)got;
		char *start = buf, *nl;
		while ((nl = memchr(start, '\n', len - (size_t)(start - buf)))) {
			if (parse_line(p, start, (size_t)(nl - start)) < 0)
				return errf(err, errlen, "artifacts: malformed report from the helper");
			start = nl + 1;
		}
		len -= (size_t)(start - buf);
		memmove(buf, start, len);
		if (len == sizeof(buf))
			return errf(err, errlen, "artifacts: malformed report from the helper (line too long)");
	}
	if (len)
		return errf(err, errlen, "artifacts: malformed report from the helper (unterminated line)");
	return 0;
}

/* Wait for the helper until the deadline, then kill it. 0 with its
 * status, or -1 when it had to be killed. */
static int reap(pid_t pid, int64_t deadline, int *status)
{
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR) {
			/* Reaped already (SIGCHLD ignored): the report decides. */
			*status = 0;
			return 0;
		}
		if (clock_mono_ms() >= deadline) {
			kill(pid, SIGKILL);
			while (waitpid(pid, status, 0) < 0 && errno == EINTR)
				;
			return -1;
		}
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
}


/* 1 when the directory holds nothing but "." and "..", 0 when it holds
 * more, -1 on an error. */
static int dir_empty(int dirfd)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	int rc = 1;
	struct dirent *e;
	errno = 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			rc = 0;
			break;
		}
	if (!e && errno)
		rc = -1;
	closedir(d);
	return rc;
}

/* The image must be read-only: the filter cannot tell the helper's fds
 * apart, so a writable one would let a hijacked helper write the image. */
static int check_args(int image_fd, int dest_fd, const struct artifacts_ids *ids,
		      const struct artifacts_limits *lim, struct stat *dest, char *err, size_t errlen)
{
	struct stat st;
	if (!ids || !lim)
		return errf(err, errlen, "artifacts: missing ids or limits");
	if (lim->timeout_ms <= 0)
		return errf(err, errlen, "artifacts: the timeout must be positive");
	int fl = image_fd < 0 ? -1 : fcntl(image_fd, F_GETFL);
	if (fl < 0 || fstat(image_fd, &st) < 0 || !S_ISREG(st.st_mode))
		return errf(err, errlen, "artifacts: the image is not an open regular file");
	if ((fl & O_ACCMODE) != O_RDONLY)
		return errf(err, errlen, "artifacts: the image must be opened read-only");
	if (dest_fd < 0 || fstat(dest_fd, dest) < 0 || !S_ISDIR(dest->st_mode))
		return errf(err, errlen, "artifacts: the destination is not an open directory");
	if (geteuid() == 0) {
		/* Root hands dest to the helper and, afterwards, to the owner:
		 * only a directory the owner already has, never one of root's
		 * (a swapped path must not give away /usr/local/bin). */
		if (dest->st_uid != ids->owner_uid)
			return errf(err, errlen, "artifacts: the destination belongs to uid %u, not to its owner %u",
				    (unsigned)dest->st_uid, (unsigned)ids->owner_uid);
		if (ids->helper_uid == 0 || ids->helper_gid == 0)
			return errf(err, errlen, "artifacts: the helper must not run as uid or gid 0");
	} else if (ids->helper_uid != geteuid() || ids->helper_gid != getegid()) {
		return errf(err, errlen, "artifacts: without root the helper runs as vmrun's own uid and gid (%u:%u)",
			    (unsigned)geteuid(), (unsigned)getegid());
	} else if (ids->owner_uid != ids->helper_uid || ids->owner_gid != ids->helper_gid) {
		return errf(err, errlen, "artifacts: without root the copy cannot be given to another owner");
	}
	return 0;
}

/* dest must be empty, checked once its owner can no longer add to it (as
 * root: after it went to the helper's uid). */
static int check_empty(int dest_fd, char *err, size_t errlen)
{
	int empty = dir_empty(dest_fd);
	if (empty < 0)
		return errf(err, errlen, "artifacts: reading the destination: %s", strerror(errno));
	if (!empty)
		return errf(err, errlen, "artifacts: the destination is not empty");
	return 0;
}

/* Turn how the helper ended into 0 or -1 with a reason. */
static int verdict(const struct parser *p, int how, int status, int timeout_ms, char *err, size_t errlen)
{
	if (p->failed)
		return errf(err, errlen, "artifacts: %s", p->helper_err);
	if (how > 0)
		return errf(err, errlen, "artifacts: the helper timed out after %d ms", timeout_ms);
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		return errf(err, errlen, "artifacts: the helper was killed by signal %d (%s)%s", sig, strsignal(sig),
			    sig == SIGSYS ? ": a system call its sandbox forbids" : "");
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !p->ended)
		return errf(err, errlen, "artifacts: the helper failed without a complete report");
	return 0;
}

/* Fork the helper, read its report and stderr, reap it. */
static int run_helper(int image_fd, int dest_fd, const struct artifacts_ids *ids,
		      const struct artifacts_limits *lim, struct artifacts_result *res, char *err, size_t errlen)
{
	struct parser p = { .lim = lim, .res = res };
	struct errtail tail;
	int rep[2] = { -1, -1 }, errp[2] = { -1, -1 }, devnull = -1, status = 0, rc = -1;
	tail.len = 0;
	if (pipe2(rep, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 || fcntl(errp[0], F_SETFL, O_NONBLOCK) < 0) {
		errf(err, errlen, "artifacts: pipe: %s", strerror(errno));
		goto out;
	}
	/* Opened here: there is no /dev in the helper's own root. */
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0) {
		errf(err, errlen, "artifacts: /dev/null: %s", strerror(errno));
		goto out;
	}
	unsigned depth = lim->max_depth < DEPTH_HARD_CAP ? lim->max_depth : DEPTH_HARD_CAP;
	struct artifacts_sandbox s = {
		.report = rep[1], .image = image_fd, .dest = dest_fd, .errpipe = errp[1], .devnull = devnull,
		.parent = getpid(), .switch_ids = geteuid() == 0, .uid = ids->helper_uid, .gid = ids->helper_gid,
		.max_file = lim_add(lim->max_bytes, 4096), .extra_fds = FD_SLACK + depth,
	};
	int64_t deadline = clock_mono_ms() + lim->timeout_ms;
	pid_t pid = fork();
	if (pid < 0) {
		errf(err, errlen, "artifacts: fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0)
		helper(&s, lim);
	close(rep[1]);
	close(errp[1]);
	rep[1] = errp[1] = -1;
	int how = read_report(rep[0], errp[0], deadline, &p, &tail, err, errlen);
	if (how != 0)
		kill(pid, SIGKILL);   /* timed out, or not to be trusted further */
	if (reap(pid, deadline, &status) < 0 && how == 0)
		how = 1;
	drain_stderr(errp[0], &tail);   /* all of it now: the helper is gone */
	rc = how < 0 ? -1 : verdict(&p, how, status, lim->timeout_ms, err, errlen);
	if (rc < 0 && !p.failed)
		add_stderr_line(err, errlen, &tail);
out:
	for (int i = 0; i < 2; i++) {
		if (rep[i] >= 0)
			close(rep[i]);
		if (errp[i] >= 0)
			close(errp[i]);
	}
	if (devnull >= 0)
		close(devnull);
	return rc;
}

/* ---- the parent: the copy to its owner ------------------------------------ */

struct chown_walk {
	uid_t uid;
	gid_t gid;
	dev_t dev;            /* the destination's: no mount inside is entered */
	unsigned max_depth;
	uint64_t left;        /* entries still allowed */
	char *why;
	size_t whylen;
};

static int __attribute__((format(printf, 2, 3))) say(struct chown_walk *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why, c->whylen, fmt, ap);
	va_end(ap);
	return -1;
}

static int chown_below(struct chown_walk *c, DIR *d, unsigned depth);

/* One entry of a directory at depth-1 whose fd is dfd. A name is escaped
 * before it goes into a message: the helper chose it. */
static int chown_entry(struct chown_walk *c, int dfd, const char *name, unsigned char type, unsigned depth)
{
	char shown[64];
	bool cut;
	int fd = -1, rc = -1;
	escape(shown, sizeof(shown), name, strlen(name), false, &cut);
	if (type == DT_DIR || type == DT_UNKNOWN) {
		fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno != ENOTDIR && errno != ELOOP)
			return say(c, "%s: %s", shown, strerror(errno));
	}
	if (fd < 0) {   /* not a directory */
		if (fchownat(dfd, name, c->uid, c->gid, AT_SYMLINK_NOFOLLOW) < 0)
			return say(c, "%s: %s", shown, strerror(errno));
		return 0;
	}
	struct stat st;
	DIR *sub = NULL;
	if (fstat(fd, &st) < 0 || !(sub = fdopendir(fd)))
		say(c, "%s: %s", shown, strerror(errno));
	else if (st.st_dev != c->dev)
		say(c, "%s: a mount point", shown);
	else if (depth > c->max_depth)
		say(c, "deeper than the depth cap (%u)", c->max_depth);
	else
		rc = chown_below(c, sub, depth);
	if (sub)
		closedir(sub);
	else
		close(fd);
	return rc;
}

/* Give everything below the directory d (at depth, artifacts/ being 0) to
 * the owner, children before their directory, then d itself. Only fds,
 * never a path, never through a symlink. Nothing can race it: the helper
 * is dead, and the invoking user owns no directory inside until the walk
 * is done with it. */
static int chown_below(struct chown_walk *c, DIR *d, unsigned depth)
{
	struct dirent *e;
	for (;;) {
		errno = 0;
		if (!(e = readdir(d)))
			break;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (c->left == 0)
			return say(c, "more entries than the helper may copy");
		c->left--;
		if (chown_entry(c, dirfd(d), e->d_name, e->d_type, depth + 1) < 0)
			return -1;
	}
	if (errno)
		return say(c, "reading a directory: %s", strerror(errno));
	if (fchown(dirfd(d), c->uid, c->gid) < 0)
		return say(c, "%s", strerror(errno));
	return 0;
}

/* The whole copy, dest last, to owner_uid:owner_gid, bounded by the
 * helper's own caps: a hijacked helper may have made any tree. */
static int give_to_owner(int dest_fd, const struct artifacts_ids *ids, const struct artifacts_limits *lim,
			 char *why, size_t whylen)
{
	struct stat st;
	unsigned depth = lim->max_depth < DEPTH_HARD_CAP ? lim->max_depth : DEPTH_HARD_CAP;
	uint64_t cap = lim->max_files > (UINT64_MAX - CHOWN_SLACK) / 2 ? UINT64_MAX : 2 * lim->max_files + CHOWN_SLACK;
	struct chown_walk c = { ids->owner_uid, ids->owner_gid, 0, depth, cap, why, whylen };
	int fd = openat(dest_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 && fstat(fd, &st) == 0 ? fdopendir(fd) : NULL;
	if (!d) {
		snprintf(why, whylen, "the destination: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	c.dev = st.st_dev;
	int rc = chown_below(&c, d, 0);
	closedir(d);
	return rc;
}

int artifacts_extract(int image_fd, int dest_fd, const struct artifacts_ids *ids,
		      const struct artifacts_limits *lim, struct artifacts_result *res, char *err, size_t errlen)
{
	struct stat dest;
	char why[256];
	memset(res, 0, sizeof(*res));
	if (check_args(image_fd, dest_fd, ids, lim, &dest, err, errlen) < 0)
		return -1;
	bool root = geteuid() == 0;
	/* The helper writes into dest as itself. */
	if (root && dest.st_uid != ids->helper_uid && fchown(dest_fd, ids->helper_uid, ids->helper_gid) < 0)
		return errf(err, errlen, "artifacts: giving the destination to uid %u: %s", (unsigned)ids->helper_uid,
			    strerror(errno));
	int rc = check_empty(dest_fd, err, errlen);
	if (rc == 0)
		rc = run_helper(image_fd, dest_fd, ids, lim, res, err, errlen);
	/* Whether or not the helper succeeded: what it left must not stay
	 * with a uid that a later run may draw. */
	if (root && (ids->owner_uid != ids->helper_uid || ids->owner_gid != ids->helper_gid) &&
	    give_to_owner(dest_fd, ids, lim, why, sizeof(why)) < 0) {
		size_t n = rc < 0 ? strlen(err) : 0;
		if (n < errlen)
			snprintf(err + n, errlen - n, "%sgiving the copy to uid %u: %s", rc < 0 ? "; " : "artifacts: ",
				 (unsigned)ids->owner_uid, why);
		rc = -1;
	}
	if (rc < 0)
		artifacts_result_free(res);
	return rc;
}

void artifacts_result_free(struct artifacts_result *res)
{
	if (!res)
		return;
	free(res->files);
	free(res->skipped);
	memset(res, 0, sizeof(*res));
}
