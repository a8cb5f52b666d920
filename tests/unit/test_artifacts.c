/* Artifact extraction from hostile workspace images: regular files and
 * directories copied byte-exact with reduced modes; links, devices, FIFOs,
 * sockets, bad names, loops, hard links and lying sizes skipped with
 * reasons; every cap; bad images and fds, a non-empty destination, the
 * timeout; the helper's sandbox (its uid, user and mount namespaces, its
 * view of the file system, Landlock required, fd 2 a pipe, no user
 * namespace refused); the copy given to its owner; vmrun without root; the
 * parent's parsing of the helper's report.
 *
 * Images are built without mounting: mke2fs -d from a staging directory,
 * then debugfs or libext2fs itself for what mke2fs cannot express. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "artifacts.h"

/* A second copy of the implementation, with its test hooks compiled in and
 * its public functions renamed so that it links beside the real one
 * (build/asan/host/artifacts.o, artifacts_walk.o, artifacts_sandbox.o),
 * which the other tests use. */
int hooked_artifacts_extract(int image_fd, int dest_fd, const struct artifacts_ids *ids,
			     const struct artifacts_limits *lim, struct artifacts_result *res, char *err,
			     size_t errlen);
void hooked_artifacts_result_free(struct artifacts_result *res);
#define ARTIFACTS_TEST_HOOKS
#define artifacts_extract hooked_artifacts_extract
#define artifacts_result_free hooked_artifacts_result_free
#define artifacts_sandbox_start hooked_artifacts_sandbox_start
#define artifacts_sandbox_enter hooked_artifacts_sandbox_enter
#define artifacts_sandbox_filter hooked_artifacts_sandbox_filter
#define artifacts_walk_main hooked_artifacts_walk_main
#define artifacts_escape hooked_artifacts_escape
#define artifacts_unescape hooked_artifacts_unescape
#define artifacts_valid_path hooked_artifacts_valid_path
#define artifacts_manifest hooked_artifacts_manifest
#include "artifacts_sandbox.c"
#include "artifacts_walk.c"
#include "artifacts.c"
#undef artifacts_extract
#undef artifacts_result_free

/* The helper's host uid and gid in these tests (the range of per-run ids,
 * which nothing on the host owns), and another owner for the copy. */
#define HELPER_ID 2999990u
#define OWNER_ID  12345u

#include <cmocka.h>

struct tmp {
	char dir[64];
	char stage[96], art[112], img[96], out[96];
	struct artifacts_limits lim;
	struct artifacts_ids ids;
	struct artifacts_result res;
	char err[256];
};

static int remove_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(p);
}

static int setup(void **state)
{
	struct tmp *t = calloc(1, sizeof(*t));
	if (!t)
		return -1;
	strcpy(t->dir, "/tmp/vmrun-artifacts-XXXXXX");
	if (!mkdtemp(t->dir)) {
		free(t);
		return -1;
	}
	snprintf(t->stage, sizeof(t->stage), "%s/stage", t->dir);
	snprintf(t->art, sizeof(t->art), "%s/artifacts", t->stage);
	snprintf(t->img, sizeof(t->img), "%s/img", t->dir);
	snprintf(t->out, sizeof(t->out), "%s/out", t->dir);
	if (mkdir(t->stage, 0755) < 0 || mkdir(t->art, 0755) < 0)
		return -1;
	t->lim = (struct artifacts_limits){ 1 << 30, 1000, 16, 512, 20000, false, 0, 0 };
	t->ids = (struct artifacts_ids){ HELPER_ID, HELPER_ID, HELPER_ID, HELPER_ID };
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct tmp *t = *state;
	artifacts_result_free(&t->res);
	nftw(t->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(t);
	return 0;
}

/* ---- building images ------------------------------------------------------ */

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int rc = system(cmd);
	if (rc != 0)
		fail_msg("command failed (%d): %s", rc, cmd);
}

static void put(struct tmp *t, const char *rel, const void *data, size_t len, mode_t mode)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", t->art, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
	assert_int_equal(chmod(p, mode), 0);
}

static void put_str(struct tmp *t, const char *rel, const char *s)
{
	put(t, rel, s, strlen(s), 0644);
}

static void put_dir(struct tmp *t, const char *rel)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", t->art, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static void mkimg_opts(struct tmp *t, const char *opts, const char *size)
{
	sh("mke2fs -q -F -t ext4 %s -d %s %s %s >/dev/null 2>&1", opts, t->stage, t->img, size);
}

static void mkimg(struct tmp *t)
{
	mkimg_opts(t, "", "16M");
}

static void debugfs(struct tmp *t, const char *req)
{
	sh("debugfs -w -R '%s' %s >/dev/null 2>&1", req, t->img);
}

static ext2_filsys open_rw(struct tmp *t)
{
	ext2_filsys fs;
	assert_int_equal(ext2fs_open(t->img, EXT2_FLAG_RW | EXT2_FLAG_64BITS, 0, 0, unix_io_manager, &fs), 0);
	assert_int_equal(ext2fs_read_bitmaps(fs), 0);
	return fs;
}

static ext2_ino_t ino_of(ext2_filsys fs, const char *path)
{
	ext2_ino_t ino = 0;
	assert_int_equal(ext2fs_namei(fs, EXT2_ROOT_INO, EXT2_ROOT_INO, path, &ino), 0);
	return ino;
}

/* A directory entry exactly as given, which no kernel would write. */
static void add_link(ext2_filsys fs, ext2_ino_t dir, const char *name, ext2_ino_t ino, int ft)
{
	errcode_t e = ext2fs_link(fs, dir, name, ino, ft);
	if (e == EXT2_ET_DIR_NO_SPACE) {
		assert_int_equal(ext2fs_expand_dir(fs, dir), 0);
		e = ext2fs_link(fs, dir, name, ino, ft);
	}
	assert_int_equal(e, 0);
}

/* A new data-less inode of the given mode, linked as dir/name. */
static ext2_ino_t add_inode(ext2_filsys fs, ext2_ino_t dir, const char *name, uint16_t mode, int ft)
{
	ext2_ino_t ino;
	struct ext2_inode in;
	memset(&in, 0, sizeof(in));
	assert_int_equal(ext2fs_new_inode(fs, dir, mode, NULL, &ino), 0);
	ext2fs_inode_alloc_stats2(fs, ino, +1, 0);
	in.i_mode = mode;
	in.i_links_count = 1;
	assert_int_equal(ext2fs_write_new_inode(fs, ino, &in), 0);
	add_link(fs, dir, name, ino, ft);
	return ino;
}

/* ---- checking results ----------------------------------------------------- */

/* As a caller does it: the destination made (here when missing) and
 * opened, the image opened read-only. */
static int extract_with(struct tmp *t, bool hooked)
{
	if (mkdir(t->out, 0755) < 0 && errno != EEXIST)
		fail_msg("%s: %s", t->out, strerror(errno));
	/* vmrun makes it as its owner (caller_mkdir) */
	if (geteuid() == 0 && chown(t->out, t->ids.owner_uid, t->ids.owner_gid) < 0)
		fail_msg("chown %s: %s", t->out, strerror(errno));
	int img = open(t->img, O_RDONLY | O_CLOEXEC);
	int dest = open(t->out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (img < 0 || dest < 0)
		fail_msg("opening %s or %s: %s", t->img, t->out, strerror(errno));
	int rc = (hooked ? hooked_artifacts_extract : artifacts_extract)(img, dest, &t->ids, &t->lim, &t->res, t->err,
									  sizeof(t->err));
	close(img);
	close(dest);
	return rc;
}

static int extract(struct tmp *t)
{
	return extract_with(t, false);
}

static void extract_ok(struct tmp *t)
{
	int rc = extract(t);
	if (rc != 0)
		fail_msg("artifacts_extract: %s", t->err);
}

static const struct artifact *file_in(const struct tmp *t, const char *path)
{
	for (size_t i = 0; i < t->res.nfiles; i++)
		if (strcmp(t->res.files[i].path, path) == 0)
			return &t->res.files[i];
	return NULL;
}

/* The reason path was skipped for; fails when it was not. */
static const char *skipped(const struct tmp *t, const char *path)
{
	for (size_t i = 0; i < t->res.nskipped; i++)
		if (strcmp(t->res.skipped[i].path, path) == 0)
			return t->res.skipped[i].reason;
	for (size_t i = 0; i < t->res.nskipped; i++)
		print_error("skipped: \"%s\": %s\n", t->res.skipped[i].path, t->res.skipped[i].reason);
	fail_msg("not skipped: \"%s\"", path);
	return NULL;
}

static void assert_skipped(const struct tmp *t, const char *path, const char *why)
{
	const char *r = skipped(t, path);
	if (!strstr(r, why))
		fail_msg("%s skipped for \"%s\", expected \"%s\"", path, r, why);
}

static size_t count_skips(const struct tmp *t, const char *why)
{
	size_t n = 0;
	for (size_t i = 0; i < t->res.nskipped; i++)
		n += strstr(t->res.skipped[i].reason, why) != NULL;
	return n;
}

static mode_t mode_at(const struct tmp *t, const char *rel)
{
	char p[512];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", t->out, rel);
	if (lstat(p, &st) < 0)
		return 0;
	return st.st_mode;
}

static bool exists_out(const struct tmp *t, const char *rel)
{
	return mode_at(t, rel) != 0;
}

/* The copy of rel is a regular file with the staged bytes and mode. */
static void assert_copied(const struct tmp *t, const char *rel, mode_t mode)
{
	char a[512], b[512];
	snprintf(a, sizeof(a), "%s/%s", t->art, rel);
	snprintf(b, sizeof(b), "%s/%s", t->out, rel);
	const struct artifact *f = file_in(t, rel);
	if (!f)
		fail_msg("not reported as copied: %s", rel);
	assert_int_equal(mode_at(t, rel), S_IFREG | mode);
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	assert_non_null(fa);
	assert_non_null(fb);
	uint64_t n = 0;
	for (;;) {
		int ca = fgetc(fa), cb = fgetc(fb);
		assert_int_equal(ca, cb);
		if (ca == EOF)
			break;
		n++;
	}
	fclose(fa);
	fclose(fb);
	assert_int_equal(f->size, n);
}

static int out_bad;

static int check_out_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)p, (void)flag, (void)ftw;
	mode_t m = st->st_mode;
	if (!(m == (S_IFDIR | 0755) || m == (S_IFREG | 0644) || m == (S_IFREG | 0755)))
		out_bad++;
	return 0;
}

/* Nothing but img, stage and out beside each other, and out holding only
 * directories (0755) and regular files (0644 or 0755). */
static void assert_contained(const struct tmp *t)
{
	DIR *d = opendir(t->dir);
	struct dirent *e;
	assert_non_null(d);
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		if (strcmp(n, ".") && strcmp(n, "..") && strcmp(n, "img") && strcmp(n, "stage") && strcmp(n, "out"))
			fail_msg("written outside the destination: %s", n);
	}
	closedir(d);
	out_bad = 0;
	assert_int_equal(nftw(t->out, check_out_entry, 16, FTW_PHYS), 0);
	assert_int_equal(out_bad, 0);
}

/* ---- copying -------------------------------------------------------------- */

static void test_copies_files_and_dirs(void **state)
{
	struct tmp *t = *state;
	static char rnd[100000];
	for (size_t i = 0; i < sizeof(rnd); i++)
		rnd[i] = (char)(i * 7919 + (i >> 8));
	put_str(t, "a.txt", "hello\n");
	put(t, "empty", "", 0, 0644);
	put(t, "suid", "#!/bin/sh\n", 10, 04755);
	put(t, "private", "secret", 6, 0600);
	put(t, "ownerexec", "x", 1, 0700);
	put(t, "caf\xc3\xa9", "utf8", 4, 0644);
	put_dir(t, "sub");
	put(t, "sub/bin", rnd, sizeof(rnd), 0644);
	put_dir(t, "sub/deeper");
	put_str(t, "sub/deeper/x", "x\n");
	put_dir(t, "odd");
	char p[512];
	snprintf(p, sizeof(p), "%s/odd", t->art);
	chmod(p, 03777);   /* setgid, sticky, world-writable */
	mkimg(t);
	extract_ok(t);
	assert_int_equal(t->res.nskipped, 0);
	assert_int_equal(t->res.nfiles, 8);
	assert_copied(t, "a.txt", 0644);
	assert_copied(t, "empty", 0644);
	assert_copied(t, "suid", 0755);
	assert_copied(t, "private", 0644);
	assert_copied(t, "ownerexec", 0755);
	assert_copied(t, "caf\xc3\xa9", 0644);
	assert_copied(t, "sub/bin", 0644);
	assert_copied(t, "sub/deeper/x", 0644);
	assert_int_equal(mode_at(t, "odd"), S_IFDIR | 0755);
	assert_int_equal(mode_at(t, "sub/deeper"), S_IFDIR | 0755);
	assert_int_equal(mode_at(t, ""), S_IFDIR | 0755);
	assert_contained(t);
}

/* Small files and directories stored in the inode (inline_data). */
static void test_inline_data(void **state)
{
	struct tmp *t = *state;
	put_str(t, "tiny", "inline bytes");
	put_dir(t, "d");
	put_str(t, "d/also", "more");
	mkimg_opts(t, "-O inline_data", "16M");
	extract_ok(t);
	assert_int_equal(t->res.nskipped, 0);
	assert_copied(t, "tiny", 0644);
	assert_copied(t, "d/also", 0644);
}

static void test_skips_non_regular_files(void **state)
{
	struct tmp *t = *state;
	char p[512];
	put_str(t, "keep", "k");
	snprintf(p, sizeof(p), "%s/link", t->art);
	assert_int_equal(symlink("/etc/passwd", p), 0);
	snprintf(p, sizeof(p), "%s/dirlink", t->art);
	assert_int_equal(symlink("/etc", p), 0);
	snprintf(p, sizeof(p), "%s/fifo", t->art);
	assert_int_equal(mkfifo(p, 0644), 0);
	mkimg(t);
	ext2_filsys fs = open_rw(t);
	ext2_ino_t art = ino_of(fs, "artifacts");
	add_inode(fs, art, "cdev", LINUX_S_IFCHR | 0666, EXT2_FT_CHRDEV);
	add_inode(fs, art, "bdev", LINUX_S_IFBLK | 0666, EXT2_FT_BLKDEV);
	add_inode(fs, art, "sock", LINUX_S_IFSOCK | 0777, EXT2_FT_SOCK);
	assert_int_equal(ext2fs_close(fs), 0);
	extract_ok(t);
	assert_int_equal(t->res.nfiles, 1);
	assert_copied(t, "keep", 0644);
	assert_skipped(t, "link", "symbolic link");
	assert_skipped(t, "dirlink", "symbolic link");
	assert_skipped(t, "fifo", "FIFO");
	assert_skipped(t, "cdev", "character device");
	assert_skipped(t, "bdev", "block device");
	assert_skipped(t, "sock", "socket");
	assert_int_equal(t->res.nskipped, 6);
	assert_false(exists_out(t, "link"));
	assert_false(exists_out(t, "dirlink"));
	assert_false(exists_out(t, "fifo"));
	assert_contained(t);
}

/* Entries only a hand-made image can hold, all pointing at one regular
 * file: names are judged before the inode is read. */
static void test_hostile_names(void **state)
{
	struct tmp *t = *state;
	put_str(t, "victim", "v");
	put_dir(t, "sub");
	mkimg(t);
	ext2_filsys fs = open_rw(t);
	ext2_ino_t art = ino_of(fs, "artifacts"), sub = ino_of(fs, "artifacts/sub");
	ext2_ino_t v = ino_of(fs, "artifacts/victim");
	add_link(fs, art, "..", v, EXT2_FT_REG_FILE);
	add_link(fs, art, ".", v, EXT2_FT_REG_FILE);
	add_link(fs, sub, "..", v, EXT2_FT_REG_FILE);
	add_link(fs, art, "a/b", v, EXT2_FT_REG_FILE);
	add_link(fs, art, "../escape", v, EXT2_FT_REG_FILE);
	add_link(fs, art, "new\nline", v, EXT2_FT_REG_FILE);
	add_link(fs, art, "tab\there", v, EXT2_FT_REG_FILE);
	add_link(fs, art, "\x01", v, EXT2_FT_REG_FILE);
	add_link(fs, art, "del\x7f", v, EXT2_FT_REG_FILE);
	add_link(fs, art, "", v, EXT2_FT_REG_FILE);
	add_link(fs, art, "lat\xe9", v, EXT2_FT_REG_FILE);
	add_link(fs, art, "\xc0\xaf", v, EXT2_FT_REG_FILE);
	assert_int_equal(ext2fs_close(fs), 0);
	extract_ok(t);
	assert_int_equal(t->res.nfiles, 1);
	assert_copied(t, "victim", 0644);
	assert_skipped(t, "..", "invalid name");
	assert_skipped(t, ".", "invalid name");
	assert_skipped(t, "sub/..", "invalid name");
	assert_skipped(t, "a\\x2fb", "contains '/'");
	assert_skipped(t, "..\\x2fescape", "contains '/'");
	assert_skipped(t, "new\\x0aline", "control byte");
	assert_skipped(t, "tab\\x09here", "control byte");
	assert_skipped(t, "\\x01", "control byte");
	assert_skipped(t, "del\\x7f", "control byte");
	assert_skipped(t, "", "invalid name: empty");
	/* listed as JSON and kept in text columns, such a name would come
	 * out as another (U+FFFD) or be refused by the store */
	assert_skipped(t, "lat\\xe9", "invalid name: not UTF-8");
	assert_skipped(t, "\\xc0\\xaf", "invalid name: not UTF-8");
	assert_int_equal(t->res.nskipped, 12);
	assert_false(exists_out(t, "a"));
	assert_contained(t);
}

static void test_directory_loops(void **state)
{
	struct tmp *t = *state;
	put_dir(t, "d");
	put_str(t, "d/f", "f");
	mkimg(t);
	ext2_filsys fs = open_rw(t);
	ext2_ino_t art = ino_of(fs, "artifacts"), d = ino_of(fs, "artifacts/d");
	add_link(fs, d, "self", d, EXT2_FT_DIR);
	add_link(fs, d, "up", art, EXT2_FT_DIR);
	add_link(fs, art, "again", d, EXT2_FT_DIR);
	assert_int_equal(ext2fs_close(fs), 0);
	extract_ok(t);
	assert_copied(t, "d/f", 0644);
	assert_int_equal(t->res.nfiles, 1);
	assert_skipped(t, "d/self", "already visited");
	assert_skipped(t, "d/up", "already visited");
	assert_skipped(t, "again", "already visited");
	assert_int_equal(t->res.nskipped, 3);
	assert_contained(t);
}

static void test_hard_links(void **state)
{
	struct tmp *t = *state;
	char a[512], b[512];
	put_str(t, "one", "shared bytes");
	snprintf(a, sizeof(a), "%s/one", t->art);
	snprintf(b, sizeof(b), "%s/two", t->art);
	assert_int_equal(link(a, b), 0);
	mkimg(t);
	extract_ok(t);
	assert_int_equal(t->res.nfiles, 1);
	assert_int_equal(t->res.nskipped, 1);
	const char *copied = file_in(t, "one") ? "one" : "two";
	assert_copied(t, copied, 0644);
	assert_skipped(t, strcmp(copied, "one") ? "one" : "two", "hard link to an already copied file");
}

/* Two entries with one name: the second cannot replace the first. */
static void test_duplicate_names(void **state)
{
	struct tmp *t = *state;
	put_str(t, "dup", "first");
	put_str(t, "other", "second");
	put_dir(t, "dir");
	mkimg(t);
	ext2_filsys fs = open_rw(t);
	ext2_ino_t art = ino_of(fs, "artifacts");
	add_inode(fs, art, "dup", LINUX_S_IFREG | 0755, EXT2_FT_REG_FILE);
	add_inode(fs, art, "dir", LINUX_S_IFREG | 0644, EXT2_FT_REG_FILE);
	add_inode(fs, art, "other", LINUX_S_IFDIR | 0755, EXT2_FT_DIR);
	assert_int_equal(ext2fs_close(fs), 0);
	extract_ok(t);
	assert_int_equal(count_skips(t, "duplicate name"), 3);
	assert_int_equal(t->res.nskipped, 3);
	assert_copied(t, "dup", 0644);
	assert_copied(t, "other", 0644);
	assert_int_equal(mode_at(t, "dir"), S_IFDIR | 0755);
	assert_contained(t);
}

static void test_sizes_not_backed(void **state)
{
	struct tmp *t = *state;
	char p[512];
	put_str(t, "liar", "only a few bytes really");
	put_str(t, "honest", "all here");
	snprintf(p, sizeof(p), "%s/holes", t->art);
	int fd = open(p, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "end", 3, 8 << 20), 3);   /* 8 MiB hole, then data */
	close(fd);
	mkimg_opts(t, "", "32M");
	debugfs(t, "sif /artifacts/liar size 0x10000000000");
	t->lim.max_bytes = UINT64_MAX / 2;
	extract_ok(t);
	assert_copied(t, "honest", 0644);
	assert_skipped(t, "liar", "size not backed by allocated blocks");
	assert_skipped(t, "holes", "size not backed by allocated blocks");
	assert_int_equal(t->res.nfiles, 1);
	assert_false(exists_out(t, "liar"));
	assert_false(exists_out(t, "holes"));
}

/* Damage confined to one entry costs that entry only. */
static void test_corrupt_entries(void **state)
{
	struct tmp *t = *state;
	static char junk[4096];
	blk64_t pblk = 0;
	memset(junk, 0x5a, sizeof(junk));
	put_str(t, "fine", "fine");
	put_str(t, "badmap", "its only block lies past the image's end");
	put_dir(t, "baddir");
	put_str(t, "baddir/lost", "lost");
	mkimg(t);
	debugfs(t, "sif /artifacts/badmap block[5] 0x7ffff0");   /* first extent's start */
	ext2_filsys fs = open_rw(t);
	ext2_ino_t d = ino_of(fs, "artifacts/baddir");
	assert_int_equal(ext2fs_bmap2(fs, d, NULL, NULL, 0, 0, NULL, &pblk), 0);
	assert_int_equal(io_channel_write_blk64(fs->io, pblk, 1, junk), 0);
	assert_int_equal(ext2fs_close(fs), 0);
	extract_ok(t);
	assert_copied(t, "fine", 0644);
	assert_skipped(t, "badmap", "unreadable file data");
	assert_skipped(t, "baddir", "unreadable directory");
	assert_int_equal(mode_at(t, "badmap"), S_IFREG | 0644);   /* left empty */
	char p[512];
	struct stat st;
	snprintf(p, sizeof(p), "%s/badmap", t->out);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(t->res.nfiles, 1);
	assert_int_equal(t->res.nskipped, 2);
}

/* ---- caps ----------------------------------------------------------------- */

static void test_file_cap(void **state)
{
	struct tmp *t = *state;
	put_str(t, "a", "1");
	put_str(t, "b", "2");
	put_str(t, "c", "3");
	mkimg(t);
	t->lim.max_files = 2;
	extract_ok(t);
	assert_int_equal(t->res.nfiles, 2);
	assert_int_equal(t->res.nskipped, 1);
	assert_int_equal(count_skips(t, "over the file cap (2 files)"), 1);
	assert_false(exists_out(t, t->res.skipped[0].path));
}

/* Directories count against the cap too (as directories), so that a tree
 * of empty directories cannot make unbounded host inodes. */
static void test_directory_cap(void **state)
{
	struct tmp *t = *state;
	put_dir(t, "d1");
	put_dir(t, "d2");
	put_dir(t, "d3");
	mkimg(t);
	t->lim.max_files = 2;
	extract_ok(t);
	assert_int_equal(count_skips(t, "over the directory cap"), 1);
	assert_int_equal(t->res.nskipped, 1);
}

static void test_byte_cap(void **state)
{
	struct tmp *t = *state;
	static char buf[300];
	memset(buf, 'z', sizeof(buf));
	put(t, "f100", buf, 100, 0644);
	put(t, "f200", buf, 200, 0644);
	put(t, "f300", buf, 300, 0644);
	mkimg(t);
	t->lim.max_bytes = 350;
	extract_ok(t);
	uint64_t total = 0;
	for (size_t i = 0; i < t->res.nfiles; i++) {
		total += t->res.files[i].size;
		assert_copied(t, t->res.files[i].path, 0644);
	}
	assert_true(total <= 350);
	assert_true(t->res.nskipped >= 1);
	assert_int_equal(count_skips(t, "would pass the byte cap (350 bytes)"), t->res.nskipped);
	assert_int_equal(t->res.nfiles + t->res.nskipped, 3);
	for (size_t i = 0; i < t->res.nskipped; i++)
		assert_false(exists_out(t, t->res.skipped[i].path));   /* skipped, not truncated */
}

static void test_depth_cap(void **state)
{
	struct tmp *t = *state;
	put_str(t, "top", "0");
	put_dir(t, "a");
	put_str(t, "a/one", "1");
	put_dir(t, "a/b");
	put_str(t, "a/b/two", "2");
	put_dir(t, "a/b/c");
	put_str(t, "a/b/c/three", "3");
	mkimg(t);
	t->lim.max_depth = 2;
	extract_ok(t);
	assert_copied(t, "top", 0644);
	assert_copied(t, "a/one", 0644);
	assert_copied(t, "a/b/two", 0644);
	assert_skipped(t, "a/b/c", "deeper than the depth cap (2)");
	assert_int_equal(t->res.nskipped, 1);
	assert_false(exists_out(t, "a/b/c"));
}

static void test_path_cap(void **state)
{
	struct tmp *t = *state;
	put_str(t, "short", "s");
	put_str(t, "abcdefghijklmnop", "l");
	put_dir(t, "dir");
	put_str(t, "dir/ok", "o");
	put_str(t, "dir/toolong", "t");
	mkimg(t);
	t->lim.max_path = 10;
	extract_ok(t);
	assert_copied(t, "short", 0644);
	assert_copied(t, "dir/ok", 0644);
	assert_skipped(t, "abcdefghijklmnop", "path longer than the path cap (10 bytes)");
	assert_skipped(t, "dir/toolong", "path cap");
	assert_int_equal(t->res.nskipped, 2);
}

/* Past SKIP_CAP skipped entries, one line says the rest went unlisted. */
static void test_skip_cap(void **state)
{
	struct tmp *t = *state;
	char p[512];
	/* Spread over directories: mke2fs -d fills one directory in time
	 * quadratic in its entries. */
	for (int i = 0; i < SKIP_CAP + 50; i++) {
		if (i % 100 == 0) {
			char name[16];
			snprintf(name, sizeof(name), "d%d", i / 100);
			put_dir(t, name);
		}
		snprintf(p, sizeof(p), "%s/d%d/l%d", t->art, i / 100, i);
		assert_int_equal(symlink("x", p), 0);
	}
	put_str(t, "real", "r");
	mkimg_opts(t, "-N 12000", "32M");
	extract_ok(t);
	assert_int_equal(t->res.nskipped, SKIP_CAP);
	assert_int_equal(count_skips(t, "too many skipped entries"), 1);
	assert_copied(t, "real", 0644);
}

/* ---- refusals ------------------------------------------------------------- */

static bool dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	bool empty = true;
	assert_non_null(d);
	while ((e = readdir(d)))
		empty &= !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	closedir(d);
	return empty;
}

/* As root, only a destination its owner already has is handed on: a
 * directory of root's (a path swapped under vmrun) is refused untouched. */
static void test_dest_not_owners(void **state)
{
	struct tmp *t = *state;
	if (geteuid() != 0)
		skip();
	put_str(t, "a", "a");
	mkimg(t);
	assert_int_equal(mkdir(t->out, 0755), 0);
	t->ids.owner_uid = t->ids.owner_gid = 12345;
	int img = open(t->img, O_RDONLY | O_CLOEXEC), dest = open(t->out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(artifacts_extract(img, dest, &t->ids, &t->lim, &t->res, t->err, sizeof(t->err)), -1);
	close(img);
	close(dest);
	assert_string_equal(t->err, "artifacts: the destination belongs to uid 0, not to its owner 12345");
	struct stat st;
	assert_int_equal(stat(t->out, &st), 0);
	assert_int_equal(st.st_uid, 0);   /* never given to the helper or the owner */
}

/* The destination must be an empty directory, given as an fd. */
static void test_dest_refused(void **state)
{
	struct tmp *t = *state;
	char p[160];
	struct stat st;
	put_str(t, "a", "a");
	mkimg(t);
	assert_int_equal(mkdir(t->out, 0700), 0);
	snprintf(p, sizeof(p), "%s/there", t->out);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(extract(t), -1);
	assert_string_equal(t->err, "artifacts: the destination is not empty");
	assert_int_equal(t->res.nfiles, 0);
	assert_int_equal(lstat(t->out, &st), 0);
	assert_int_equal(st.st_mode, S_IFDIR | 0700);
	assert_int_equal(st.st_uid, t->ids.owner_uid);   /* still its owner's */
	assert_false(exists_out(t, "a"));
	int img = open(t->img, O_RDONLY), file = open(p, O_RDONLY);
	assert_int_equal(artifacts_extract(img, file, &t->ids, &t->lim, &t->res, t->err, sizeof(t->err)), -1);
	assert_string_equal(t->err, "artifacts: the destination is not an open directory");
	assert_int_equal(artifacts_extract(img, -1, &t->ids, &t->lim, &t->res, t->err, sizeof(t->err)), -1);
	assert_string_equal(t->err, "artifacts: the destination is not an open directory");
	close(img);
	close(file);
}

static void test_bad_images(void **state)
{
	struct tmp *t = *state;
	static char junk[1 << 20];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 131 + 7);
	FILE *f = fopen(t->img, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(junk, 1, sizeof(junk), f), sizeof(junk));
	fclose(f);
	assert_int_equal(extract(t), -1);
	assert_non_null(strstr(t->err, "Bad magic number"));
	assert_null(strchr(t->err, '\n'));
	assert_true(dir_is_empty(t->out));   /* nothing made for a bad image */
	/* Only a read-only fd of a regular file. */
	int dest = open(t->out, O_RDONLY | O_DIRECTORY);
	int rw = open(t->img, O_RDWR), dir = open(t->dir, O_RDONLY | O_DIRECTORY);
	assert_int_equal(artifacts_extract(rw, dest, &t->ids, &t->lim, &t->res, t->err, sizeof(t->err)), -1);
	assert_string_equal(t->err, "artifacts: the image must be opened read-only");
	assert_int_equal(artifacts_extract(dir, dest, &t->ids, &t->lim, &t->res, t->err, sizeof(t->err)), -1);
	assert_string_equal(t->err, "artifacts: the image is not an open regular file");
	assert_int_equal(artifacts_extract(-1, dest, &t->ids, &t->lim, &t->res, t->err, sizeof(t->err)), -1);
	assert_string_equal(t->err, "artifacts: the image is not an open regular file");
	close(rw);
	close(dir);
	close(dest);
	assert_true(dir_is_empty(t->out));
}

static void test_missing_artifacts(void **state)
{
	struct tmp *t = *state;
	assert_int_equal(rmdir(t->art), 0);
	mkimg(t);
	extract_ok(t);
	assert_int_equal(t->res.nfiles, 0);
	assert_int_equal(t->res.nskipped, 0);
	assert_int_equal(mode_at(t, ""), S_IFDIR | 0755);
}

static void test_artifacts_not_a_dir(void **state)
{
	struct tmp *t = *state;
	assert_int_equal(rmdir(t->art), 0);
	assert_int_equal(symlink("/etc", t->art), 0);
	mkimg(t);
	extract_ok(t);
	assert_int_equal(t->res.nfiles, 0);
	assert_skipped(t, ".", "artifacts is a symbolic link, not a directory");
	artifacts_result_free(&t->res);
	nftw(t->out, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	unlink(t->art);
	FILE *f = fopen(t->art, "w");   /* artifacts itself, a regular file */
	assert_non_null(f);
	fclose(f);
	mkimg(t);
	extract_ok(t);
	assert_skipped(t, ".", "artifacts is a regular file, not a directory");
}

static void assert_no_children(void)
{
	errno = 0;
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

static void test_timeout(void **state)
{
	struct tmp *t = *state;
	char *big = malloc(12 << 20);
	assert_non_null(big);
	for (size_t i = 0; i < (12u << 20); i++)
		big[i] = (char)(i ^ (i >> 9));
	put(t, "big", big, 12 << 20, 0644);
	free(big);
	mkimg_opts(t, "", "32M");
	t->lim.timeout_ms = 1;
	assert_int_equal(extract(t), -1);
	assert_non_null(strstr(t->err, "timed out after 1 ms"));
	assert_int_equal(t->res.nfiles, 0);
	assert_no_children();
}

static void test_bad_limits(void **state)
{
	struct tmp *t = *state;
	mkimg(t);
	t->lim.timeout_ms = 0;
	assert_int_equal(extract(t), -1);
	assert_string_equal(t->err, "artifacts: the timeout must be positive");
	int img = open(t->img, O_RDONLY), dest = open(t->out, O_RDONLY | O_DIRECTORY);
	assert_int_equal(artifacts_extract(img, dest, &t->ids, NULL, &t->res, t->err, sizeof(t->err)), -1);
	assert_int_equal(artifacts_extract(img, dest, NULL, &t->lim, &t->res, t->err, sizeof(t->err)), -1);
	assert_string_equal(t->err, "artifacts: missing ids or limits");
	/* vmrun as root never runs the helper as root. */
	t->lim.timeout_ms = 20000;
	t->ids.helper_uid = 0;
	assert_int_equal(artifacts_extract(img, dest, &t->ids, &t->lim, &t->res, t->err, sizeof(t->err)), -1);
	assert_string_equal(t->err, "artifacts: the helper must not run as uid or gid 0");
	close(img);
	close(dest);
	assert_true(dir_is_empty(t->out));
}

/* ---- the sandbox, through the hooked copy --------------------------------- */

static char hook_path[128];
static int hook_fd = -1;

/* A hook's own failure: a line on the helper's stderr (which the parent
 * puts in its error), and an exit status the parent reports as a failure. */
static void __attribute__((noreturn)) hook_fail(const char *what, int e)
{
	char line[200];
	int n = e ? snprintf(line, sizeof(line), "hook: %s: errno %d (%s)\n", what, e, strerrorname_np(e))
		  : snprintf(line, sizeof(line), "hook: %s: it succeeded\n", what);
	if (write(2, line, (size_t)n) < 0)
		_exit(41);
	_exit(42);
}

static void try_socket(int destfd)
{
	(void)destfd;
	socket(AF_INET, SOCK_STREAM, 0);
}

static void try_exec(int destfd)
{
	(void)destfd;
	char *argv[] = { "/bin/true", NULL };
	execve(argv[0], argv, argv + 1);
}

static void try_read_file(int destfd)
{
	(void)destfd;
	open("/etc/passwd", O_RDONLY);
}

static void try_create_truncating(int destfd)
{
	(void)destfd;
	open(hook_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
}

static void try_create_setuid(int destfd)
{
	(void)destfd;
	open(hook_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 04755);
}

static void try_exec_memory(int destfd)
{
	(void)destfd;
	mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

/* A page made executable after the fact: forbidden, as a new one is. */
static void try_protect_exec(int destfd)
{
	(void)destfd;
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED)
		mprotect(p, 4096, PROT_READ | PROT_EXEC);
}

/* What glibc does to grow a thread arena's heap (a helper forked from a
 * server's thread): allowed, or a diff asked over an API dies. */
static void grow_like_an_arena(int destfd)
{
	(void)destfd;
	void *p = mmap(NULL, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED || mprotect(p, 4096, PROT_READ | PROT_WRITE) < 0)
		_exit(43);
}

static void try_signal(int destfd)
{
	(void)destfd;
	kill(1, 0);
}

static void try_inherited_fd(int destfd)
{
	(void)destfd;
	if (write(hook_fd, "leak", 4) != -1 || errno != EBADF)
		_exit(42);
}

static void spin(int destfd)
{
	(void)destfd;
	for (volatile unsigned i = 0;; i++)
		;
}

static void nothing(int destfd)
{
	(void)destfd;
}

static int hooked(struct tmp *t, void (*hook)(int))
{
	artifacts_test_sandboxed = hook;
	int rc = extract_with(t, true);
	artifacts_test_sandboxed = NULL;
	return rc;
}

static void assert_forbidden(struct tmp *t, void (*hook)(int))
{
	char want[32];
	nftw(t->out, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	assert_int_equal(hooked(t, hook), -1);
	snprintf(want, sizeof(want), "signal %d", SIGSYS);
	if (!strstr(t->err, want))
		fail_msg("not killed by the filter: %s", t->err);
	assert_int_equal(t->res.nfiles, 0);
	assert_no_children();
}

static void test_sandbox(void **state)
{
	struct tmp *t = *state;
	put_str(t, "a", "a");
	mkimg(t);
	snprintf(hook_path, sizeof(hook_path), "%s/evil", t->dir);
	assert_int_equal(hooked(t, nothing), 0);   /* the hooked copy works */
	assert_int_equal(t->res.nfiles, 1);
	artifacts_result_free(&t->res);
	nftw(t->out, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	assert_int_equal(hooked(t, grow_like_an_arena), 0);
	artifacts_result_free(&t->res);
	assert_forbidden(t, try_socket);
	assert_forbidden(t, try_exec);
	assert_forbidden(t, try_read_file);
	assert_forbidden(t, try_create_truncating);
	assert_forbidden(t, try_create_setuid);
	assert_forbidden(t, try_exec_memory);
	assert_forbidden(t, try_protect_exec);
	assert_forbidden(t, try_signal);
	assert_int_equal(access(hook_path, F_OK), -1);
	assert_contained(t);
}

static void assert_owned(const char *path, uid_t uid, gid_t gid)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		fail_msg("%s: %s", path, strerror(errno));
	if (st.st_uid != uid || st.st_gid != gid)
		fail_msg("%s is owned by %u:%u, not %u:%u", path, (unsigned)st.st_uid, (unsigned)st.st_gid,
			 (unsigned)uid, (unsigned)gid);
}

/* What the helper creates is its fresh uid's on the host, not root's. */
static void test_helper_uid(void **state)
{
	struct tmp *t = *state;
	char p[160];
	put_str(t, "a", "a");
	put_dir(t, "d");
	mkimg(t);
	extract_ok(t);
	snprintf(p, sizeof(p), "%s/a", t->out);
	assert_owned(p, HELPER_ID, HELPER_ID);
	snprintf(p, sizeof(p), "%s/d", t->out);
	assert_owned(p, HELPER_ID, HELPER_ID);
	assert_owned(t->out, HELPER_ID, HELPER_ID);   /* given to it to write in */
}

/* The helper's own view: no host path exists in it (its own mount
 * namespace, which it could set up unprivileged only in its own user
 * namespace), the root that does exist is closed to it (Landlock), and
 * dest is where it writes. */
static void hook_view(int destfd)
{
	if (open("/etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW) >= 0 || errno != ENOENT)
		hook_fail("/etc", errno);
	if (open(hook_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW) >= 0 || errno != ENOENT)
		hook_fail("the test's directory", errno);
	if (open("/", O_RDONLY | O_DIRECTORY | O_NOFOLLOW) >= 0 || errno != EACCES)
		hook_fail("/", errno);
	int fd = openat(destfd, "made-by-hook", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
	if (fd < 0)
		hook_fail("made-by-hook", errno);
	close(fd);
}

static void test_helper_view(void **state)
{
	struct tmp *t = *state;
	char p[160];
	put_str(t, "a", "a");
	mkimg(t);
	snprintf(hook_path, sizeof(hook_path), "%s", t->dir);
	if (hooked(t, hook_view) != 0)
		fail_msg("%s", t->err);
	snprintf(p, sizeof(p), "%s/made-by-hook", t->out);
	assert_owned(p, HELPER_ID, HELPER_ID);
	assert_copied(t, "a", 0644);
}

/* The writes that only root could make before (anywhere its uid may
 * create, when Landlock was missing) reach nothing on the host: /tmp is
 * not in the helper's view at all. */
static void hook_host_writes(int destfd)
{
	char dir[160];
	(void)destfd;
	int fd = openat(AT_FDCWD, hook_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
	if (fd >= 0 || errno != ENOENT)
		hook_fail("creating a file in the host's /tmp", fd >= 0 ? 0 : errno);
	snprintf(dir, sizeof(dir), "%s-dir", hook_path);
	if (mkdirat(AT_FDCWD, dir, 0755) == 0 || errno != ENOENT)
		hook_fail("creating a directory in the host's /tmp", errno);
	if (openat(AT_FDCWD, "/new", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644) >= 0)
		hook_fail("creating /new in its own root", 0);
}

static void test_no_host_writes(void **state)
{
	struct tmp *t = *state;
	char dir[160];
	put_str(t, "a", "a");
	mkimg(t);
	snprintf(hook_path, sizeof(hook_path), "/tmp/vmrun-artifacts-evil-%d", (int)getpid());
	snprintf(dir, sizeof(dir), "%s-dir", hook_path);
	int rc = hooked(t, hook_host_writes);
	bool file = access(hook_path, F_OK) == 0, made_dir = access(dir, F_OK) == 0;
	unlink(hook_path);
	rmdir(dir);
	if (file || made_dir)
		fail_msg("the helper wrote the host's /tmp (file %d, directory %d)", file, made_dir);
	if (rc != 0)
		fail_msg("%s", t->err);
	assert_copied(t, "a", 0644);
}

/* A kernel without Landlock (or with it disabled) is refused, before the
 * image is opened; the same hook as above would have written the host's
 * /tmp through the seccomp filter alone. */
static void test_landlock_required(void **state)
{
	struct tmp *t = *state;
	static const int errs[] = { ENOSYS, EOPNOTSUPP };
	char want[200];
	put_str(t, "a", "a");
	mkimg(t);
	snprintf(hook_path, sizeof(hook_path), "/tmp/vmrun-artifacts-evil-%d", (int)getpid());
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		artifacts_test_landlock_errno = errs[i];
		int rc = hooked(t, hook_host_writes);
		artifacts_test_landlock_errno = 0;
		bool wrote = access(hook_path, F_OK) == 0;
		unlink(hook_path);
		snprintf(want, sizeof(want),
			 "artifacts: Landlock is not available (%s); refusing to parse the image without it",
			 strerror(errs[i]));
		if (rc != -1 || strcmp(t->err, want))
			fail_msg("without Landlock (%s): rc %d, \"%s\"; the host's /tmp written: %s",
				 strerrorname_np(errs[i]), rc, rc ? t->err : "", wrote ? "yes" : "no");
		assert_false(wrote);
		assert_int_equal(t->res.nfiles, 0);
		assert_true(dir_is_empty(t->out));
	}
}

/* fd 2 of the helper is a pipe the parent reads: what it says before it
 * dies is in the error, made printable, and nothing reaches vmrun's own
 * stderr. */
static void hook_say_and_die(int destfd)
{
	static const char line[] = "helper says: \x1b[1mhello\x01\nsecond line\n";
	(void)destfd;
	if (write(2, line, sizeof(line) - 1) < 0)
		_exit(41);
	socket(AF_INET, SOCK_STREAM, 0);   /* killed by the filter */
}

static void test_stderr_pipe(void **state)
{
	struct tmp *t = *state;
	char p[160], want[64];
	struct stat st;
	mkimg(t);
	snprintf(p, sizeof(p), "%s/stderr", t->dir);
	int cap = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600), saved = dup(2);
	assert_true(cap >= 0 && saved >= 0);
	fflush(stderr);
	assert_int_equal(dup2(cap, 2), 2);
	int rc = hooked(t, hook_say_and_die);
	dup2(saved, 2);
	close(saved);
	assert_int_equal(fstat(cap, &st), 0);
	close(cap);
	unlink(p);
	snprintf(want, sizeof(want), "signal %d", SIGSYS);
	assert_int_equal(rc, -1);
	if (!strstr(t->err, want) || !strstr(t->err, "; its stderr: helper says: ?[1mhello?") ||
	    strstr(t->err, "second line"))
		fail_msg("the helper's stderr line is not in the error: %s", t->err);
	if (st.st_size != 0)
		fail_msg("%lld bytes reached vmrun's own stderr", (long long)st.st_size);
}

static int owner_bad;

static int check_owner(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)flag, (void)ftw;
	if (st->st_uid != OWNER_ID || st->st_gid != OWNER_ID) {
		if (!owner_bad++)
			print_error("%s is owned by %u:%u\n", p, (unsigned)st->st_uid, (unsigned)st->st_gid);
	}
	return 0;
}

static void assert_all_owner(const struct tmp *t)
{
	owner_bad = 0;
	assert_int_equal(nftw(t->out, check_owner, 16, FTW_PHYS), 0);
	if (owner_bad)
		fail_msg("%d entries of the copy (dest included) not owned by %u:%u", owner_bad, OWNER_ID, OWNER_ID);
}

static void hook_make_and_die(int destfd)
{
	int fd = openat(destfd, "partial", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
	if (fd < 0)
		hook_fail("partial", errno);
	socket(AF_INET, SOCK_STREAM, 0);
}

/* With another owner than the helper, the whole copy is the owner's
 * afterwards, also when the helper failed halfway. */
static void test_owner(void **state)
{
	struct tmp *t = *state;
	put_str(t, "a", "a");
	put_dir(t, "d");
	put_str(t, "d/b", "b");
	put_dir(t, "d/e");
	put(t, "d/e/x", "#!", 2, 0755);
	mkimg(t);
	t->ids.owner_uid = t->ids.owner_gid = OWNER_ID;
	extract_ok(t);
	assert_int_equal(t->res.nfiles, 3);
	assert_copied(t, "d/e/x", 0755);
	assert_all_owner(t);
	artifacts_result_free(&t->res);
	nftw(t->out, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	assert_int_equal(hooked(t, hook_make_and_die), -1);
	assert_true(exists_out(t, "partial"));
	assert_all_owner(t);
}

/* A hijacked helper may leave any tree; the walk that gives it to the
 * owner stops at the caps, with a reason. */
static void hook_many(int destfd)
{
	char name[16];
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		int fd = openat(destfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
		if (fd < 0)
			hook_fail(name, errno);
		close(fd);
	}
}

static void hook_deep(int destfd)
{
	int fd = destfd;
	for (int i = 0; i < 6; i++) {
		if (mkdirat(fd, "d", 0755) < 0)
			hook_fail("mkdirat", errno);
		fd = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
		if (fd < 0)
			hook_fail("openat", errno);
	}
}

static void test_owner_walk_bounded(void **state)
{
	struct tmp *t = *state;
	mkimg(t);
	t->ids.owner_uid = t->ids.owner_gid = OWNER_ID;
	t->lim.max_files = 10;
	if (hooked(t, hook_many) != -1 ||
	    strcmp(t->err, "artifacts: giving the copy to uid 12345: more entries than the helper may copy"))
		fail_msg("200 entries past a cap of 10 files: %s", t->err);
	nftw(t->out, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	t->lim.max_depth = 2;
	if (hooked(t, hook_deep) != -1 ||
	    strcmp(t->err, "artifacts: giving the copy to uid 12345: deeper than the depth cap (2)"))
		fail_msg("6 levels past a depth cap of 2: %s", t->err);
}

/* Where no user namespace can be made (here: in a chroot, where the
 * kernel refuses one), nothing runs unconfined. */
static void test_no_user_namespace(void **state)
{
	struct tmp *t = *state;
	char p[160];
	put_str(t, "a", "a");
	mkimg(t);
	assert_int_equal(mkdir(t->out, 0755), 0);
	snprintf(p, sizeof(p), "%s/dev", t->dir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/dev/null", t->dir);
	assert_int_equal(mknod(p, S_IFCHR | 0666, makedev(1, 3)), 0);
	char *msg = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(msg != MAP_FAILED);
	assert_int_equal(chown(t->out, t->ids.owner_uid, t->ids.owner_gid), 0);
	int img = open(t->img, O_RDONLY), dest = open(t->out, O_RDONLY | O_DIRECTORY);
	pid_t pid = fork();
	if (pid == 0) {
		if (chroot(t->dir) < 0 || chdir("/") < 0)
			_exit(2);
		int rc = artifacts_extract(img, dest, &t->ids, &t->lim, &t->res, msg, 4096);
		_exit(rc == -1 ? 0 : 1);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	close(img);
	close(dest);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
	    !strstr(msg, "artifacts: cannot create the helper's user namespace (Operation not permitted"))
		fail_msg("in a chroot (status 0x%x): %s", status, msg);
	assert_false(exists_out(t, "a"));
	munmap(msg, 4096);
}

/* vmrun without root: the helper is vmrun's own uid, in namespaces it makes
 * unprivileged; ids other than its own are refused. */
static void test_not_root(void **state)
{
	struct tmp *t = *state;
	const uid_t me = HELPER_ID + 1;
	char p[160];
	put_str(t, "a", "a");
	put_dir(t, "d");
	put_str(t, "d/b", "bb");
	mkimg(t);
	assert_int_equal(mkdir(t->out, 0755), 0);
	assert_int_equal(chown(t->out, me, me), 0);
	char *msg = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(msg != MAP_FAILED);
	int img = open(t->img, O_RDONLY), dest = open(t->out, O_RDONLY | O_DIRECTORY);
	pid_t pid = fork();
	if (pid == 0) {
		struct artifacts_ids own = { me, me, me, me }, other = { me, me, OWNER_ID, OWNER_ID };
		struct artifacts_ids notme = { HELPER_ID, HELPER_ID, HELPER_ID, HELPER_ID };
		if (setgroups(0, NULL) < 0 || setresgid(me, me, me) < 0 || setresuid(me, me, me) < 0)
			_exit(2);
		int bad = artifacts_extract(img, dest, &notme, &t->lim, &t->res, msg + 4096, 4096) != -1;
		bad |= artifacts_extract(img, dest, &other, &t->lim, &t->res, msg + 8192, 4096) != -1;
		int rc = artifacts_extract(img, dest, &own, &t->lim, &t->res, msg, 4096);
		if (rc == 0)
			snprintf(msg, 4096, "%zu files", t->res.nfiles);
		_exit(rc != 0 ? 1 : bad ? 3 : 0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	close(img);
	close(dest);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("as uid %u (status 0x%x): %s", (unsigned)me, status, msg);
	assert_string_equal(msg, "2 files");
	snprintf(p, sizeof(p), "%s/d/b", t->out);
	assert_owned(p, me, me);
	assert_string_equal(msg + 4096, "artifacts: without root the helper runs as vmrun's own uid and gid "
					"(2999991:2999991)");
	assert_string_equal(msg + 8192, "artifacts: without root the copy cannot be given to another owner");
	munmap(msg, 3 * 4096);
}

/* fds the parent had open do not reach the helper. */
static void test_sandbox_closes_fds(void **state)
{
	struct tmp *t = *state;
	char p[128];
	mkimg(t);
	snprintf(p, sizeof(p), "%s/stage/fd", t->dir);
	int fd = open(p, O_WRONLY | O_CREAT, 0644);
	assert_true(fd > 2);
	hook_fd = fcntl(fd, F_DUPFD, 100);   /* no O_CLOEXEC; clear of fds 3-5 */
	close(fd);
	assert_true(hook_fd >= 100);
	int rc = hooked(t, try_inherited_fd);
	close(hook_fd);
	if (rc != 0)
		fail_msg("%s", t->err);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, 0);
}

/* A helper stuck inside the sandbox is killed at the deadline. */
static void test_sandbox_spin_timeout(void **state)
{
	struct tmp *t = *state;
	mkimg(t);
	t->lim.timeout_ms = 300;
	assert_int_equal(hooked(t, spin), -1);
	assert_non_null(strstr(t->err, "timed out after 300 ms"));
	assert_no_children();
}

/* ---- the report parser, through the included copy ------------------------- */

static int feed(struct parser *p, const char *line)
{
	return parse_line(p, line, strlen(line));
}

static void test_report_parser(void **state)
{
	(void)state;
	struct artifacts_limits lim = { 1000, 2, 4, 20, 1000, false, 0, 0 };
	struct artifacts_result res = { 0 };
	struct parser p = { .lim = &lim, .res = &res };
	assert_int_equal(feed(&p, "F 10 a/b"), 0);
	assert_int_equal(feed(&p, "F 5 caf\\xc3\\xa9"), 0);
	assert_string_equal(res.files[1].path, "caf\xc3\xa9");
	assert_int_equal(feed(&p, "F 1 c"), -1);              /* past max_files */
	res.nfiles = 0;
	p.bytes = 0;
	static const char *bad[] = {
		"F 1001 big",                  /* past max_bytes */
		"F 99999999999999999999999 x", /* overflows */
		"F -1 x", "F 1", "F 1 ", "F x y",
		"F 1 /abs", "F 1 a//b", "F 1 a/", "F 1 ../x", "F 1 a/./b", "F 1 ..",
		"F 1 a\\x0ab",                 /* control byte once unescaped */
		"F 1 a\\x2", "F 1 a\\y41", "F 1 a\\xZZ", "F 1 a\\x4G",
		"F 1 123456789012345678901",   /* past max_path (20) */
		"F 1 a\tb", "S a", "S a\t", "S a\tb\x01", "Q x", "", "F", "END ",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (feed(&p, bad[i]) != -1)
			fail_msg("accepted: \"%s\"", bad[i]);
	assert_int_equal(feed(&p, "S a\\x0ab\tinvalid name"), 0);
	assert_string_equal(res.skipped[0].path, "a\\x0ab");    /* stays printable */
	assert_int_equal(feed(&p, "F 1000 x"), 0);
	assert_int_equal(feed(&p, "END"), 0);
	assert_int_equal(feed(&p, "F 0 y"), -1);                /* after END */
	assert_int_equal(feed(&p, "END"), -1);
	hooked_artifacts_result_free(&res);
}

static void test_skip_lines_bounded(void **state)
{
	(void)state;
	struct artifacts_limits lim = { 1000, 2, 4, 20, 1000, false, 0, 0 };
	struct artifacts_result res = { 0 };
	struct parser p = { .lim = &lim, .res = &res };
	for (int i = 0; i < SKIP_CAP; i++)
		assert_int_equal(feed(&p, "S x\ty"), 0);
	assert_int_equal(feed(&p, "S x\ty"), -1);
	assert_int_equal(feed(&p, "E the helper says no"), 0);
	assert_int_equal(feed(&p, "END"), -1);                  /* nothing after E */
	assert_string_equal(p.helper_err, "the helper says no");
	hooked_artifacts_result_free(&res);
}

static void test_escape_round_trip(void **state)
{
	(void)state;
	char raw[256], esc[1100], back[300];
	bool cut;
	for (int i = 0; i < 256; i++)
		raw[i] = (char)(255 - i);
	size_t n = artifacts_escape(esc, sizeof(esc), raw, 256, false, &cut);
	assert_false(cut);
	for (size_t i = 0; i < n; i++)
		assert_true(esc[i] >= 0x20 && esc[i] <= 0x7e);
	assert_int_equal(artifacts_unescape(back, 257, esc, n), 0);
	assert_memory_equal(back, raw, 256);
	assert_int_equal(artifacts_unescape(back, 256, esc, n), -1);      /* would not fit */
	artifacts_escape(esc, sizeof(esc), "a/b", 3, true, &cut);
	assert_string_equal(esc, "a\\x2fb");
	artifacts_escape(esc, 6, "\x01\x02", 2, false, &cut);              /* never half an escape */
	assert_string_equal(esc, "\\x01");
	assert_true(cut);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_copies_files_and_dirs),
		T(test_inline_data),
		T(test_skips_non_regular_files),
		T(test_hostile_names),
		T(test_directory_loops),
		T(test_hard_links),
		T(test_duplicate_names),
		T(test_sizes_not_backed),
		T(test_corrupt_entries),
		T(test_file_cap),
		T(test_directory_cap),
		T(test_byte_cap),
		T(test_depth_cap),
		T(test_path_cap),
		T(test_skip_cap),
		T(test_dest_not_owners),
		T(test_dest_refused),
		T(test_missing_artifacts),
		T(test_artifacts_not_a_dir),
		T(test_bad_images),
		T(test_timeout),
		T(test_bad_limits),
		T(test_sandbox),
		T(test_helper_uid),
		T(test_helper_view),
		T(test_no_host_writes),
		T(test_landlock_required),
		T(test_stderr_pipe),
		T(test_owner),
		T(test_owner_walk_bounded),
		T(test_no_user_namespace),
		T(test_not_root),
		T(test_sandbox_closes_fds),
		T(test_sandbox_spin_timeout),
		cmocka_unit_test(test_report_parser),
		cmocka_unit_test(test_skip_lines_bounded),
		cmocka_unit_test(test_escape_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
