/* The per-run workspace image: an ext4 file system made and filled with
 * libext2fs in an image file we create ourselves, so no mke2fs, no mount
 * and no root. The source tree is walked through directory fds with
 * O_NOFOLLOW, so a path component swapped for a symbolic link mid-copy
 * cannot pull in anything outside it. */
#include "workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ext2fs/ext2fs.h>

#include "errmsg.h"

#define BLOCK_LOG       2           /* 1024 << 2: 4 KiB blocks */
#define BLOCK_SIZE      4096u
#define INODE_SIZE      256         /* room for extra_isize: nanosecond times, crtime */
#define FLEX_BG_LOG     4           /* 16 groups' metadata packed together, as mke2fs does */
#define SMALL_FS_MIB    512         /* below this, one inode per 4 KiB (mke2fs's "small") */
#define LPF_BLOCKS      4           /* lost+found is pre-sized to 16 KiB, as mke2fs does */
#define MAX_DEPTH       64          /* directory levels below src_dir */
#define MAX_NAME        255
#define REL_MAX         4096        /* bytes of a relative path */
#define COPY_BUF        (256u << 10)

struct ws {
	ext2_filsys fs;
	const struct workspace_source *src;   /* NULL: nothing to copy */
	char name[REL_MAX];            /* the source's name, printable, for messages */
	uint64_t size_mib;
	uid_t uid;
	gid_t gid;
	struct timespec now;
	struct workspace_stats *st;
	char *err;
	size_t errlen;
	char *buf;                     /* file copy buffer */
	bool has_artifacts;
	size_t rlen;
	char rel[REL_MAX];             /* the entry being copied, relative to src */
	char shown[REL_MAX];
};

static int fail(struct ws *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct ws *w, const char *fmt, ...)
{
	char msg[REL_MAX + 256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	errf(w->err, w->errlen, "workspace: %s", msg);
	return -1;
}

/* s made printable, so that a hostile name cannot break the one-line
 * message or drive the terminal. */
static const char *printable(char *dst, size_t size, const char *s)
{
	size_t i = 0;
	for (; s[i] && i + 1 < size; i++) {
		unsigned char c = (unsigned char)s[i];
		dst[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	dst[i] = '\0';
	return dst;
}

static const char *rel(struct ws *w)
{
	return printable(w->shown, sizeof(w->shown), w->rlen ? w->rel : ".");
}

static bool is_full(errcode_t e)
{
	return e == EXT2_ET_BLOCK_ALLOC_FAIL || e == EXT2_ET_INODE_ALLOC_FAIL || e == EXT2_ET_DIR_NO_SPACE ||
	       e == ENOSPC;
}

static int no_room(struct ws *w)
{
	return fail(w, "%s does not fit in a %llu MiB disk", w->src ? w->name : "the workspace",
		    (unsigned long long)w->size_mib);
}

/* A libext2fs error while copying the current entry. */
static int fs_fail(struct ws *w, errcode_t e)
{
	if (is_full(e))
		return no_room(w);
	return fail(w, "%s: %s", rel(w), error_message(e));
}

static pthread_once_t error_table_once = PTHREAD_ONCE_INIT;

static void load_error_table(void)
{
	initialize_ext2_error_table();
}

/* ---- the image file ------------------------------------------------------ */

/* Create image and allocate all of it, so that the guest filling its disk
 * can never make the host's disk use grow, and a host short of space fails
 * here rather than in the middle of a run. Returns the fd or -1. */
static int create_image(const char *image, uint64_t size_mib, char *err, size_t errlen)
{
	/* O_EXCL also refuses a symbolic link planted at the path. */
	int fd = open(image, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		if (errno == EEXIST)
			errf(err, errlen, "workspace: %s already exists", image);
		else
			errf(err, errlen, "workspace: cannot create %s: %s", image, strerror(errno));
		return -1;
	}
	int e = fchmod(fd, 0600) ? errno : 0;   /* whatever the umask */
	if (!e) {
		do
			e = posix_fallocate(fd, 0, (off_t)(size_mib << 20));
		while (e == EINTR);
	}
	if (e) {
		if (e == ENOSPC || e == EDQUOT)
			errf(err, errlen, "workspace: the host disk has no room for a %llu MiB image at %s",
			     (unsigned long long)size_mib, image);
		else
			errf(err, errlen, "workspace: cannot allocate %llu MiB for %s: %s", (unsigned long long)size_mib,
			     image, strerror(e));
		close(fd);
		unlink(image);
		return -1;
	}
	return fd;
}

/* ---- inodes -------------------------------------------------------------- */

/* ext4's encoding: seconds in 32 bits, two epoch bits and nanoseconds in
 * the extra field. */
static void put_time(__u32 *t, __u32 *extra, struct timespec ts)
{
	int64_t s = ts.tv_sec;
	*t = (__u32)s;
	*extra = (__u32)((((uint64_t)(s - (int32_t)s) >> 32) & 3) | ((uint64_t)ts.tv_nsec << 2));
}

/* Owner, mode and times of a new inode: modification (and access) time as
 * given, the source's, so that build tools in the guest see the tree's own
 * times; change and creation time now. */
static void set_owner(struct ws *w, struct ext2_inode_large *in, __u16 mode, struct timespec mtime)
{
	in->i_mode = mode;
	in->i_uid = (__u16)w->uid;
	in->i_gid = (__u16)w->gid;
	ext2fs_set_i_uid_high(*in, (__u16)(w->uid >> 16));
	ext2fs_set_i_gid_high(*in, (__u16)(w->gid >> 16));
	put_time(&in->i_mtime, &in->i_mtime_extra, mtime);
	put_time(&in->i_atime, &in->i_atime_extra, mtime);
	put_time(&in->i_ctime, &in->i_ctime_extra, w->now);
	put_time(&in->i_crtime, &in->i_crtime_extra, w->now);
}

static errcode_t read_large(ext2_filsys fs, ext2_ino_t ino, struct ext2_inode_large *in)
{
	memset(in, 0, sizeof(*in));
	return ext2fs_read_inode_full(fs, ino, (struct ext2_inode *)in, sizeof(*in));
}

static errcode_t write_large(ext2_filsys fs, ext2_ino_t ino, struct ext2_inode_large *in)
{
	return ext2fs_write_inode_full(fs, ino, (struct ext2_inode *)in, sizeof(*in));
}

/* Link, growing the directory by a block when it is full. */
static errcode_t link_in(ext2_filsys fs, ext2_ino_t dir, const char *name, ext2_ino_t ino, int type)
{
	errcode_t e = ext2fs_link(fs, dir, name, ino, type);
	if (e == EXT2_ET_DIR_NO_SPACE) {
		e = ext2fs_expand_dir(fs, dir);
		if (!e)
			e = ext2fs_link(fs, dir, name, ino, type);
	}
	return e;
}

/* Make directory name in parent; ext2fs_mkdir rolls its allocations back
 * when the link fails, so a full parent is grown and the same inode
 * number used again. */
static errcode_t make_dir(ext2_filsys fs, ext2_ino_t parent, const char *name, ext2_ino_t *ino)
{
	errcode_t e = ext2fs_new_inode(fs, parent, LINUX_S_IFDIR | 0755, NULL, ino);
	if (e)
		return e;
	e = ext2fs_mkdir(fs, parent, *ino, name);
	if (e == EXT2_ET_DIR_NO_SPACE) {
		e = ext2fs_expand_dir(fs, parent);
		if (!e)
			e = ext2fs_mkdir(fs, parent, *ino, name);
	}
	return e;
}

/* Give a directory made by make_dir our owner, mode and times. */
static errcode_t own_dir(struct ws *w, ext2_ino_t ino, __u16 perm, struct timespec mtime)
{
	struct ext2_inode_large in;
	errcode_t e = read_large(w->fs, ino, &in);
	if (e)
		return e;
	set_owner(w, &in, LINUX_S_IFDIR | perm, mtime);
	return write_large(w->fs, ino, &in);
}

/* ---- the file system ----------------------------------------------------- */

static void random_bytes(void *p, size_t n)
{
	/* Only identifiers (UUID, htree hash seed): a clock-derived fallback
	 * is good enough when the pool is not ready. */
	if (getrandom(p, n, GRND_NONBLOCK) != (ssize_t)n) {
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		uint8_t *b = p;
		for (size_t i = 0; i < n; i++)
			b[i] = (uint8_t)((uint64_t)t.tv_nsec >> (i % 4 * 8)) ^ (uint8_t)(i * 151u);
	}
}

static void random_uuid(__u8 u[16])
{
	random_bytes(u, 16);
	u[6] = (u[6] & 0x0f) | 0x40;   /* version 4 */
	u[8] = (u[8] & 0x3f) | 0x80;   /* RFC 4122 variant */
}

/* The superblock parameters: no journal (a workspace lives for one run),
 * extents, and what mkfs.ext4 turns on that a 6.1 kernel and e2fsck expect,
 * without metadata_csum (nothing it protects here: the guest can rewrite
 * any checksum it likes). */
static void fs_params(struct ext2_super_block *p, uint64_t size_mib)
{
	memset(p, 0, sizeof(*p));
	uint64_t blocks = size_mib << 20 >> 12;
	unsigned bytes_per_inode = size_mib < SMALL_FS_MIB ? 4096 : 16384;
	p->s_rev_level = EXT2_DYNAMIC_REV;
	p->s_log_block_size = BLOCK_LOG;
	p->s_log_cluster_size = BLOCK_LOG;
	ext2fs_blocks_count_set(p, blocks);
	p->s_inodes_count = (__u32)(blocks * BLOCK_SIZE / bytes_per_inode);
	p->s_inode_size = INODE_SIZE;
	p->s_log_groups_per_flex = FLEX_BG_LOG;
	p->s_max_mnt_count = (__u16)-1;
	p->s_feature_compat = EXT2_FEATURE_COMPAT_DIR_INDEX | EXT2_FEATURE_COMPAT_EXT_ATTR;
	p->s_feature_incompat = EXT2_FEATURE_INCOMPAT_FILETYPE | EXT3_FEATURE_INCOMPAT_EXTENTS |
				EXT4_FEATURE_INCOMPAT_FLEX_BG;
	p->s_feature_ro_compat = EXT2_FEATURE_RO_COMPAT_SPARSE_SUPER | EXT2_FEATURE_RO_COMPAT_LARGE_FILE |
				 EXT4_FEATURE_RO_COMPAT_HUGE_FILE | EXT4_FEATURE_RO_COMPAT_DIR_NLINK |
				 EXT4_FEATURE_RO_COMPAT_EXTRA_ISIZE;
}

/* Inodes 1..10 are the file system's own: marked used as mke2fs does, the
 * bad-blocks inode (1) written empty. */
static errcode_t reserve_inodes(ext2_filsys fs)
{
	for (ext2_ino_t i = 1; i < EXT2_FIRST_INODE(fs->super); i++)
		if (i != EXT2_ROOT_INO)
			ext2fs_inode_alloc_stats2(fs, i, +1, 0);
	return ext2fs_update_bb_inode(fs, NULL);
}

static errcode_t make_lost_found(ext2_filsys fs)
{
	ext2_ino_t ino;
	errcode_t e = make_dir(fs, EXT2_ROOT_INO, WORKSPACE_LOST_FOUND, &ino);
	for (int i = 1; !e && i < LPF_BLOCKS; i++)
		e = ext2fs_expand_dir(fs, ino);
	if (e)
		return e;
	struct ext2_inode_large in;
	if ((e = read_large(fs, ino, &in)))
		return e;
	in.i_mode = LINUX_S_IFDIR | 0700;
	return write_large(fs, ino, &in);
}

/* Make the empty file system in the image open as fd.
 *
 * Nothing is zeroed: the inode tables, bitmaps' padding and every block we
 * do not write are read as zeros because the image was just created and
 * extended with posix_fallocate, whose blocks read back as zeros (unwritten
 * extents, or zeros written by glibc's fallback). Zero inodes are free
 * inodes to the kernel and to e2fsck, so without uninit_bg the tables need
 * no lazy-init flags. */
static int make_fs(struct ws *w, int fd)
{
	char name[32];
	int io_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);   /* the io channel closes its own */
	if (io_fd < 0)
		return fail(w, "dup: %s", strerror(errno));
	snprintf(name, sizeof(name), "%d", io_fd);
	struct ext2_super_block p;
	fs_params(&p, w->size_mib);
	errcode_t e = ext2fs_initialize(name, EXT2_FLAG_64BITS, &p, unixfd_io_manager, &w->fs);
	if (e) {
		/* io_fd is the library's from the call on: every failure once
		 * its channel is open closes it. Only running out of memory
		 * before that leaves it open, and leaking it then beats closing
		 * a number another thread may have been given since. */
		w->fs = NULL;
		return fail(w, "cannot make the file system: %s", error_message(e));
	}
	ext2_filsys fs = w->fs;
	fs->now = w->now.tv_sec;
	fs->super->s_checkinterval = 0;
	fs->super->s_def_hash_version = EXT2_HASH_HALF_MD4;
	random_uuid(fs->super->s_uuid);
	random_bytes(fs->super->s_hash_seed, sizeof(fs->super->s_hash_seed));
	memcpy(fs->super->s_volume_name, "workspace", 9);
	if ((e = ext2fs_allocate_tables(fs)) || (e = ext2fs_mkdir(fs, EXT2_ROOT_INO, EXT2_ROOT_INO, NULL)) ||
	    (e = own_dir(w, EXT2_ROOT_INO, 0755, w->now)) || (e = make_lost_found(fs)) ||
	    (e = reserve_inodes(fs)))
		return fail(w, "cannot make the file system: %s", error_message(e));
	return 0;
}

/* ---- copying the source -------------------------------------------------- */

static const char *kind(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFLNK: return "symbolic link";
	case S_IFIFO: return "FIFO";
	case S_IFSOCK: return "socket";
	case S_IFCHR: return "character device";
	case S_IFBLK: return "block device";
	default: return "special file";
	}
}

static int refuse(struct ws *w, mode_t m)
{
	return fail(w, "%s: %s is not copied (only regular files and directories)", rel(w), kind(m));
}

/* Append name to the relative path; returns the old length to pop back to. */
static int push(struct ws *w, const char *name, size_t *old)
{
	size_t n = strlen(name);
	*old = w->rlen;
	size_t need = w->rlen + (w->rlen ? 1 : 0) + n;
	if (need >= sizeof(w->rel)) {
		return fail(w, "%.*s/...: path longer than %d bytes", 200,
			    printable(w->shown, sizeof(w->shown), w->rel), REL_MAX - 1);
	}
	if (w->rlen)
		w->rel[w->rlen++] = '/';
	memcpy(w->rel + w->rlen, name, n + 1);
	w->rlen += n;
	return 0;
}

static void pop(struct ws *w, size_t old)
{
	w->rlen = old;
	w->rel[old] = '\0';
}

/* Copy the regular file open as fd, of the size fstat gave, into ino.
 * Reads at most size bytes: a file growing under us cannot outrun the
 * fit check. */
static int copy_data(struct ws *w, int fd, ext2_ino_t ino, struct ext2_inode_large *in, uint64_t size)
{
	ext2_file_t f;
	errcode_t e = ext2fs_file_open2(w->fs, ino, (struct ext2_inode *)in, EXT2_FILE_WRITE, &f);
	if (e)
		return fs_fail(w, e);
	uint64_t done = 0;
	int rc = 0;
	while (done < size) {
		size_t want = size - done < COPY_BUF ? (size_t)(size - done) : COPY_BUF;
		ssize_t k = read(fd, w->buf, want);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			rc = fail(w, "%s: read: %s", rel(w), strerror(errno));
			break;
		}
		if (k == 0)
			break;   /* it shrank: what was there is copied */
		unsigned got;
		if ((e = ext2fs_file_write(f, w->buf, (unsigned)k, &got)) || got != (unsigned)k) {
			rc = fs_fail(w, e ? e : EXT2_ET_SHORT_WRITE);
			break;
		}
		done += (uint64_t)k;
	}
	e = ext2fs_file_close(f);
	if (!rc && e)
		rc = fs_fail(w, e);
	w->st->bytes += done;
	return rc;
}

/* Entries of the source are looked up and opened with the rights of the
 * user it belongs to (w->src->as), never ours: a directory they cannot
 * read stays unread even when we are root. */
static int src_openat(struct ws *w, int dfd, const char *name, int flags)
{
	struct caller_saved s;
	if (w->src->as && caller_enter(w->src->as, &s) < 0)
		return -1;
	int fd = openat(dfd, name, flags);
	if (w->src->as)
		caller_leave(&s);
	return fd;
}

static int src_fstatat(struct ws *w, int dfd, const char *name, struct stat *sb)
{
	struct caller_saved s;
	if (w->src->as && caller_enter(w->src->as, &s) < 0)
		return -1;
	int rc = fstatat(dfd, name, sb, AT_SYMLINK_NOFOLLOW);
	if (w->src->as)
		caller_leave(&s);
	return rc;
}

/* A new regular file name in dir with fd's contents (fst: its fstat). */
static int add_file(struct ws *w, int fd, const char *name, ext2_ino_t dir, const struct stat *fst)
{
	/* Blocks for the data, and the extent tree's, counted generously:
	 * refusing here saves writing a large file that cannot fit. */
	uint64_t blocks = ((uint64_t)fst->st_size + BLOCK_SIZE - 1) / BLOCK_SIZE;
	if (blocks + blocks / 256 > ext2fs_free_blocks_count(w->fs->super))
		return no_room(w);
	ext2_ino_t ino;
	errcode_t e = ext2fs_new_inode(w->fs, dir, LINUX_S_IFREG | 0644, NULL, &ino);
	if (!e)
		e = link_in(w->fs, dir, name, ino, EXT2_FT_REG_FILE);
	if (e)
		return fs_fail(w, e);
	ext2fs_inode_alloc_stats2(w->fs, ino, +1, 0);
	struct ext2_inode_large in;
	memset(&in, 0, sizeof(in));
	set_owner(w, &in, LINUX_S_IFREG | (fst->st_mode & 0777), fst->st_mtim);
	in.i_links_count = 1;
	in.i_extra_isize = sizeof(in) - EXT2_GOOD_OLD_INODE_SIZE;
	/* An empty extent tree in i_block, which file writes then fill. */
	ext2_extent_handle_t h;
	if (!(e = ext2fs_extent_open2(w->fs, ino, (struct ext2_inode *)&in, &h)))
		ext2fs_extent_free(h);
	if (!e)
		e = write_large(w->fs, ino, &in);
	int rc = e ? fs_fail(w, e) : copy_data(w, fd, ino, &in, (uint64_t)fst->st_size);
	if (!rc)
		w->st->files++;
	return rc;
}

static int copy_file(struct ws *w, int dfd, const char *name, ext2_ino_t dir, const struct stat *sb)
{
	/* O_NONBLOCK: a FIFO swapped in since the fstatat cannot block us. */
	int fd = src_openat(w, dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat fst;
	if (fd < 0)
		return fail(w, "%s: %s", rel(w), strerror(errno));
	int rc;
	if (fstat(fd, &fst) || !S_ISREG(fst.st_mode) || fst.st_ino != sb->st_ino || fst.st_dev != sb->st_dev)
		rc = fail(w, "%s: changed while being copied", rel(w));
	else
		rc = add_file(w, fd, name, dir, &fst);
	close(fd);
	return rc;
}

/* The caller's files, into the top directory, each once. */
static int copy_files(struct ws *w)
{
	for (unsigned i = 0; i < w->src->nfiles; i++) {
		const struct workspace_file *f = &w->src->files[i];
		char shown[MAX_NAME + 1];
		struct stat fst;
		ext2_ino_t old;
		printable(shown, sizeof(shown), f->name);
		if (!*f->name || strchr(f->name, '/') || !strcmp(f->name, ".") || !strcmp(f->name, "..") ||
		    strlen(f->name) > MAX_NAME)
			return fail(w, "'%s' is not a file name", shown);
		if (!ext2fs_lookup(w->fs, EXT2_ROOT_INO, f->name, (int)strlen(f->name), NULL, &old))
			return fail(w, "%s: the workspace already holds a file of that name", shown);
		if (fstat(f->fd, &fst) < 0)
			return fail(w, "%s: %s", shown, strerror(errno));
		if (!S_ISREG(fst.st_mode))
			return fail(w, "%s: not a regular file", shown);
		/* pread-free copy: a file given twice would share its offset */
		if (lseek(f->fd, 0, SEEK_SET) < 0)
			return fail(w, "%s: %s", shown, strerror(errno));
		snprintf(w->rel, sizeof(w->rel), "%s", f->name);
		w->rlen = strlen(w->rel);
		int rc = add_file(w, f->fd, f->name, EXT2_ROOT_INO, &fst);
		w->rel[0] = '\0';
		w->rlen = 0;
		if (rc)
			return -1;
	}
	return 0;
}

static int copy_tree(struct ws *w, int dfd, ext2_ino_t dir, unsigned depth);

static int copy_dir(struct ws *w, int dfd, const char *name, ext2_ino_t parent, const struct stat *sb,
		    unsigned depth)
{
	if (depth > MAX_DEPTH)
		return fail(w, "%s: deeper than %d directory levels", rel(w), MAX_DEPTH);
	int fd = src_openat(w, dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat fst;
	if (fd < 0)
		return fail(w, "%s: %s", rel(w), strerror(errno));
	if (fstat(fd, &fst) || fst.st_ino != sb->st_ino || fst.st_dev != sb->st_dev) {
		close(fd);
		return fail(w, "%s: changed while being copied", rel(w));
	}
	ext2_ino_t ino;
	errcode_t e = make_dir(w->fs, parent, name, &ino);
	if (!e)
		e = own_dir(w, ino, (__u16)((fst.st_mode & 0777) | 0700), fst.st_mtim);
	if (e) {
		close(fd);
		return fs_fail(w, e);
	}
	w->st->dirs++;
	return copy_tree(w, fd, ino, depth + 1);   /* takes fd */
}

static int copy_entry(struct ws *w, int dfd, const char *name, ext2_ino_t dir, unsigned depth)
{
	struct stat sb;
	if (strlen(name) > MAX_NAME)
		return fail(w, "%s: name longer than %d bytes", rel(w), MAX_NAME);
	if (src_fstatat(w, dfd, name, &sb))
		return fail(w, "%s: %s", rel(w), strerror(errno));
	bool artifacts = depth == 1 && !strcmp(name, "artifacts");
	if (S_ISDIR(sb.st_mode)) {
		w->has_artifacts |= artifacts;
		return copy_dir(w, dfd, name, dir, &sb, depth);
	}
	if (!S_ISREG(sb.st_mode))
		return refuse(w, sb.st_mode);
	if (artifacts)
		return fail(w, "artifacts: is a file; the workspace's artifacts must be a directory");
	return copy_file(w, dfd, name, dir, &sb);
}

/* Copy what the directory open as dfd holds into dir; its entries are
 * depth levels below src_dir (1: src_dir's own). Takes dfd. */
static int copy_tree(struct ws *w, int dfd, ext2_ino_t dir, unsigned depth)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return fail(w, "%s: %s", rel(w), strerror(errno));
	}
	int rc = 0;
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			if (errno)
				rc = fail(w, "%s: %s", rel(w), strerror(errno));
			break;
		}
		const char *n = de->d_name;
		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		size_t old;
		if ((rc = push(w, n, &old)))
			break;
		rc = copy_entry(w, dirfd(d), n, dir, depth);
		pop(w, old);
		if (rc)
			break;
	}
	closedir(d);
	return rc;
}

/* The source directory was opened by our caller, with its owner's rights;
 * a copy of its fd is walked (copy_tree takes the fd it is given). */
static int copy_source(struct ws *w)
{
	int fd = fcntl(w->src->dirfd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return fail(w, "%s: %s", w->name, strerror(errno));
	return copy_tree(w, fd, EXT2_ROOT_INO, 1);
}

static int make_artifacts(struct ws *w)
{
	if (w->has_artifacts)
		return 0;
	ext2_ino_t ino;
	errcode_t e = make_dir(w->fs, EXT2_ROOT_INO, "artifacts", &ino);
	if (!e)
		e = own_dir(w, ino, 0755, w->now);
	if (e) {
		if (is_full(e))
			return no_room(w);
		return fail(w, "cannot make artifacts/: %s", error_message(e));
	}
	return 0;
}

/* Write out what libext2fs holds and free it. No fsync: the image is read
 * back through this host's page cache moments later and deleted after the
 * run, and a host crash ends the run anyway; a sync would cost more than
 * the rest together. The io channel's last cached blocks go out when it
 * closes, unchecked; buffered writes into allocated space fail only on I/O
 * errors, which without a sync would go unseen anyway (a write-through
 * channel to check them measured 60% slower). */
static int close_fs(struct ws *w)
{
	errcode_t e = ext2fs_close2(w->fs, EXT2_FLAG_FLUSH_NO_SYNC);
	if (e) {
		ext2fs_free(w->fs);   /* ext2fs_close2 keeps it when the flush failed */
		w->fs = NULL;
		return fail(w, "cannot write the file system: %s", error_message(e));
	}
	w->fs = NULL;
	return 0;
}

int workspace_create(const char *image, uint64_t size_mib, const struct workspace_source *src, uid_t uid,
		     gid_t gid, struct workspace_stats *st, char *err, size_t errlen)
{
	memset(st, 0, sizeof(*st));
	if (size_mib < WORKSPACE_MIN_MIB || size_mib > WORKSPACE_MAX_MIB) {
		errf(err, errlen, "workspace: disk size %llu MiB is outside %d..%d MiB", (unsigned long long)size_mib,
		     WORKSPACE_MIN_MIB, WORKSPACE_MAX_MIB);
		return -1;
	}
	pthread_once(&error_table_once, load_error_table);
	struct ws *w = calloc(1, sizeof(*w));
	char *buf = malloc(COPY_BUF);
	if (!w || !buf) {
		free(w);
		free(buf);
		errf(err, errlen, "workspace: out of memory");
		return -1;
	}
	w->src = src;
	if (src)
		printable(w->name, sizeof(w->name), src->name ? src->name : "the source directory");
	w->size_mib = size_mib;
	w->uid = uid;
	w->gid = gid;
	w->st = st;
	w->err = err;
	w->errlen = errlen;
	w->buf = buf;
	clock_gettime(CLOCK_REALTIME, &w->now);
	int rc = -1;
	int fd = create_image(image, size_mib, err, errlen);
	if (fd < 0)
		goto out;
	if (make_fs(w, fd) || (src && src->dirfd >= 0 && copy_source(w)) || (src && copy_files(w)) ||
	    make_artifacts(w) || close_fs(w))
		goto out;
	rc = 0;
out:
	if (w->fs)
		ext2fs_free(w->fs);
	if (fd >= 0)
		close(fd);
	if (rc && fd >= 0)
		unlink(image);
	if (rc)
		memset(st, 0, sizeof(*st));
	free(buf);
	free(w);
	return rc;
}
