/* Artifact extraction, the helper's side (artifacts_report.h): in its
 * sandbox, walk the image's /workspace/artifacts with libext2fs, copy
 * each regular file into the destination, and report every file and every
 * skipped entry to the parent, one escaped line each. Everything here
 * runs in the forked, jailed helper; it reads the guest's image, which is
 * hostile. */
#include "artifacts_report.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <et/com_err.h>
#include <ext2fs/ext2fs.h>
#include <openssl/evp.h>

#include "errmsg.h"
#include "hex.h"
#include "utf8.h"

#define COPY_CHUNK (64 * 1024)

#ifdef ARTIFACTS_TEST_HOOKS
/* Test builds only (the test includes this file): runs in the helper once
 * the sandbox is in place, with the destination's fd, to show what the
 * sandbox forbids. */
static void (*artifacts_test_sandboxed)(int destfd);
#endif

/* The helper writes "F <size> <path>", "S <path>\t<reason>", "E <reason>"
 * (fatal) and "END", one per line. Paths and reasons are escaped so that
 * the line holds only printable ASCII: every byte outside 0x20..0x7e, and
 * the backslash, becomes \xNN; so does '/' when slash is set (a name that
 * contains one must not read as a path). dst gets at most cap-1 bytes and
 * a NUL, never half an escape; *cut says whether src did not fit. */
size_t artifacts_escape(char *dst, size_t cap, const char *src, size_t n, bool slash, bool *cut)
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
	EVP_MD_CTX *md;                           /* a manifest's sums */
	unsigned long copies;                     /* a manifest's copy files made so far */
	uint64_t copied_bytes;                    /* and their bytes */
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
	artifacts_escape(buf + n, cap - n - 1, raw, strlen(raw), false, &cut);
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
		size_t n = artifacts_escape(line + 2, cap, w->path, dir, false, &cut);
		if (!cut)
			n += artifacts_escape(line + 2 + n, cap - n, w->path + dir, w->namelen, true, &cut);
		if (cut)
			strcpy(line + 2 + n, "...");
	}
	size_t n = strlen(line);
	line[n++] = '\t';
	artifacts_escape(line + n, 127, reason, strlen(reason), false, &cut);
	strcat(line, "\n");
	emit(w, line, strlen(line));
	return 0;
}

static void report_file(struct walk *w, uint64_t size)
{
	char line[4 * ARTIFACT_PATH_MAX + 64];
	bool cut;
	int n = snprintf(line, sizeof(line), "F %llu ", (unsigned long long)size);
	artifacts_escape(line + n, sizeof(line) - (size_t)n - 1, w->path, w->pathlen, false, &cut);
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

/* ---- the helper: a manifest (lim->manifest) --------------------------------- */

/* One manifest line: what fmt says, a space, then the entry's escaped
 * path (and after a tab, tail: a link's escaped target). */
static void __attribute__((format(printf, 2, 3))) report_entry(struct walk *w, const char *fmt, ...)
{
	char line[4 * ARTIFACT_PATH_MAX + 256];
	bool cut;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, 200, fmt, ap);
	va_end(ap);
	line[n++] = ' ';
	artifacts_escape(line + n, sizeof(line) - (size_t)n - 1, w->path, w->pathlen, false, &cut);
	strcat(line, "\n");
	emit(w, line, strlen(line));
}

/* A regular file: its data summed, and copied into dest as the next copy
 * number when it is small enough. Holes read as zeros. */
static int manifest_file(struct walk *w, int destfd, ext2_ino_t ino, struct ext2_inode *in)
{
	uint64_t size = EXT2_I_SIZE(in), done = 0;
	if (size > w->lim->max_bytes - w->bytes)
		return skip_entry(w, "%llu bytes would pass the byte cap (%llu bytes)", (unsigned long long)size,
				  (unsigned long long)w->lim->max_bytes);
	ext2_file_t f;
	errcode_t err = ext2fs_file_open2(w->fs, ino, in, 0, &f);
	if (err)
		return skip_entry(w, "unreadable file: %s", error_message(err));
	int fd = -1;
	char name[32];
	if (size <= w->lim->copy_max && size <= w->lim->copy_total - w->copied_bytes) {
		w->copied_bytes += size;
		/* a number of its own even when this copy fails below: its
		 * file stays, and the next may not take its name */
		snprintf(name, sizeof(name), "%lu", w->copies++);
		fd = openat(destfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0)
			die(w, "creating %s: %s", name, strerror(errno));
	}
	w->bytes += size;
	EVP_DigestInit_ex(w->md, EVP_sha256(), NULL);
	while (done < size) {
		unsigned int got = 0;
		unsigned int want = size - done < COPY_CHUNK ? (unsigned)(size - done) : COPY_CHUNK;
		err = ext2fs_file_read(f, w->chunk, want, &got);
		if (err || got == 0)
			break;
		EVP_DigestUpdate(w->md, w->chunk, got);
		if (fd >= 0 && write_all(fd, w->chunk, got) < 0)
			die(w, "writing %s: %s", name, strerror(errno));
		done += got;
	}
	ext2fs_file_close(f);
	if (fd >= 0)
		close(fd);
	if (done < size)
		return skip_entry(w, "unreadable file data: %s", err ? error_message(err) : "shorter than its size");
	unsigned char sum[32];
	char hex[65], copy[32] = "-";
	EVP_DigestFinal_ex(w->md, sum, NULL);
	hex_of(sum, sizeof(sum), hex);
	if (fd >= 0)
		snprintf(copy, sizeof(copy), "%s", name);
	report_entry(w, "R %o %llu %s %s", (unsigned)(in->i_mode & 07777), (unsigned long long)size, hex, copy);
	return 0;
}

/* A symbolic link: its target, read as the kernel would (in the inode
 * for a fast one, else its data), never followed. */
static int manifest_link(struct walk *w, ext2_ino_t ino, struct ext2_inode *in)
{
	uint64_t size = EXT2_I_SIZE(in);
	char target[ARTIFACT_PATH_MAX], esc[4 * ARTIFACT_PATH_MAX], line[8 * ARTIFACT_PATH_MAX];
	unsigned int got = 0;
	bool cut;
	if (size == 0 || size >= sizeof(target))
		return skip_entry(w, "symbolic link of %llu bytes", (unsigned long long)size);
	if (ext2fs_is_fast_symlink(in)) {
		memcpy(target, in->i_block, size < sizeof(in->i_block) ? size : sizeof(in->i_block));
		got = size < sizeof(in->i_block) ? (unsigned)size : 0;
	} else {
		ext2_file_t f;
		if (ext2fs_file_open2(w->fs, ino, in, 0, &f) == 0) {
			if (ext2fs_file_read(f, target, (unsigned)size, &got))
				got = 0;
			ext2fs_file_close(f);
		}
	}
	if (got != size)
		return skip_entry(w, "unreadable symbolic link");
	int n = snprintf(line, sizeof(line), "L %llu ", (unsigned long long)size);
	artifacts_escape(line + n, sizeof(line) - (size_t)n - 1, w->path, w->pathlen, false, &cut);
	artifacts_escape(esc, sizeof(esc), target, got, false, &cut);
	n = (int)strlen(line);
	snprintf(line + n, sizeof(line) - (size_t)n, "\t%s\n", esc);
	emit(w, line, strlen(line));
	return 0;
}

/* Anything but a directory, in a manifest. */
static int manifest_entry(struct walk *w, int destfd, ext2_ino_t ino, struct ext2_inode *in)
{
	if (w->files >= w->lim->max_files)
		return skip_entry(w, "over the entry cap (%llu)", (unsigned long long)w->lim->max_files);
	w->files++;
	if (LINUX_S_ISREG(in->i_mode))
		return manifest_file(w, destfd, ino, in);
	if (LINUX_S_ISLNK(in->i_mode))
		return manifest_link(w, ino, in);
	char kind = LINUX_S_ISCHR(in->i_mode) ? 'c' : LINUX_S_ISBLK(in->i_mode) ? 'b' : LINUX_S_ISFIFO(in->i_mode) ? 'p'
		  : LINUX_S_ISSOCK(in->i_mode) ? 's' : 0;
	if (!kind)
		return skip_entry(w, "%s", kind_name(in->i_mode));
	report_entry(w, "O %c %o", kind, (unsigned)(in->i_mode & 07777));
	return 0;
}

static int visit_dir(struct walk *w, int dirfd, const char *name, ext2_ino_t ino, uint16_t in_mode, unsigned depth)
{
	if (depth > w->max_depth)
		return skip_entry(w, "deeper than the depth cap (%u)", w->lim->max_depth);
	if (ext2fs_test_inode_bitmap2(w->visited, ino))
		return skip_entry(w, "directory already visited (loop or hard link)");
	if (w->dirs >= w->lim->max_files)
		return skip_entry(w, "over the directory cap (%llu, the file cap)",
			    (unsigned long long)w->lim->max_files);
	ext2fs_mark_inode_bitmap2(w->visited, ino);
	if (w->lim->manifest) {
		w->dirs++;
		report_entry(w, "D %o", (unsigned)(in_mode & 07777));
		walk_dir(w, ino, dirfd, depth);
		return 0;
	}
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
		return visit_dir(w, dirfd, name, ino, in.i_mode, depth);
	if (w->lim->manifest)
		return manifest_entry(w, dirfd, ino, &in);
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

void artifacts_walk_main(const struct artifacts_sandbox *s, const struct artifacts_limits *lim)
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
	if (lim->manifest) {
		/* OpenSSL sets itself up on first use (it may look for its
		 * configuration): done here, before the filter. */
		unsigned char sum[32];
		if (!(w->md = EVP_MD_CTX_new()) || !EVP_Digest("", 0, sum, NULL, EVP_sha256(), NULL))
			die(w, "cannot set up SHA-256");
	}
	if (artifacts_sandbox_filter() < 0)
		die(w, "cannot install the seccomp filter");
#ifdef ARTIFACTS_TEST_HOOKS
	if (artifacts_test_sandboxed)
		artifacts_test_sandboxed(SANDBOX_DEST_FD);
#endif
	if (lim->manifest) {
		ext2fs_mark_inode_bitmap2(w->visited, EXT2_ROOT_INO);
		walk_dir(w, EXT2_ROOT_INO, SANDBOX_DEST_FD, 0);
	} else {
		walk_artifacts(w, SANDBOX_DEST_FD);
	}
	emit(w, "END\n", 4);
	flush_report(w);
	_exit(0);
}
