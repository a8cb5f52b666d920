/* The workspace image: made from source trees of every shape, then read
 * back with e2fsprogs (e2fsck -fn must find it clean, which stands in for
 * the guest kernel mounting it; debugfs for contents, owners, modes and
 * times), and every refusal: an existing image, sizes out of range, links,
 * FIFOs, sockets, too deep, too large, a missing source, a file named
 * artifacts. A refused image leaves nothing behind. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/capability.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "workspace.h"

#define UID 1000
#define GID 1000

extern char **environ;

struct fx {
	char dir[256];     /* the test's scratch directory */
	char src[300];     /* source tree, made by the test */
	char image[300];   /* image path, not yet there */
	char err[512];
	struct workspace_stats st;
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	const char *tmp = getenv("TMPDIR");
	snprintf(f->dir, sizeof(f->dir), "%s/test_workspace.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->src, sizeof(f->src), "%s/src", f->dir);
	snprintf(f->image, sizeof(f->image), "%s/ws.ext4", f->dir);
	if (mkdir(f->src, 0755)) {
		rmdir(f->dir);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int rm_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (type == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	nftw(f->dir, rm_one, 32, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/* ---- helpers ------------------------------------------------------------- */

static void put_file(const struct fx *f, const char *rel, const void *data, size_t len, mode_t mode)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/%s", f->src, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	for (size_t off = 0; off < len;) {
		ssize_t k = write(fd, (const char *)data + off, len - off);
		assert_true(k > 0);
		off += (size_t)k;
	}
	assert_int_equal(fchmod(fd, mode), 0);
	assert_int_equal(close(fd), 0);
}

static void put_dir(const struct fx *f, const char *rel, mode_t mode)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/%s", f->src, rel);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(chmod(p, mode), 0);
}

/* workspace_create from the directory src (NULL: none), read as who
 * (NULL: as ourselves), the way vmrun opens it for its caller. */
static int create_as(struct fx *f, uint64_t mib, const char *src, const struct caller *who, uid_t uid, gid_t gid)
{
	memset(f->err, 0, sizeof(f->err));
	struct workspace_source ws = { .dirfd = -1, .name = src, .as = who };
	if (src) {
		ws.dirfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		assert_true(ws.dirfd >= 0);
	}
	int rc = workspace_create(f->image, mib, src ? &ws : NULL, uid, gid, &f->st, f->err, sizeof(f->err));
	if (src)
		close(ws.dirfd);
	return rc;
}

static int create(struct fx *f, uint64_t mib, const char *src)
{
	return create_as(f, mib, src, NULL, UID, GID);
}

/* Run argv, stderr dropped; returns its exit status and, when out is not
 * NULL, its stdout (NUL-terminated, to free). */
static int run(char *const argv[], char **out, size_t *outlen)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addclose(&fa, p[0]);
	posix_spawn_file_actions_addclose(&fa, p[1]);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	assert_int_equal(e, 0);
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	assert_non_null(buf);
	for (;;) {
		if (cap - len < 4096) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		ssize_t k = read(p[0], buf + len, cap - len - 1);
		if (k < 0 && errno == EINTR)
			continue;
		assert_true(k >= 0);
		if (k == 0)
			break;
		len += (size_t)k;
	}
	close(p[0]);
	buf[len] = '\0';
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (out) {
		*out = buf;
		if (outlen)
			*outlen = len;
	} else {
		free(buf);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The output of debugfs -R request on the image. */
static char *debugfs(const struct fx *f, const char *request, size_t *len)
{
	char *out;
	char *argv[] = { "debugfs", "-R", (char *)request, (char *)f->image, NULL };
	assert_int_equal(run(argv, &out, len), 0);
	return out;
}

static void assert_fsck_clean(const struct fx *f)
{
	char *out;
	char *argv[] = { "e2fsck", "-fn", (char *)f->image, NULL };
	int st = run(argv, &out, NULL);
	if (st != 0)
		print_error("e2fsck -fn exited %d:\n%s\n", st, out);
	free(out);
	assert_int_equal(st, 0);
}

/* The file's bytes in the image equal data. */
static void assert_content(const struct fx *f, const char *path, const void *data, size_t len)
{
	char req[1200];
	snprintf(req, sizeof(req), "cat \"%s\"", path);
	size_t got;
	char *out = debugfs(f, req, &got);
	assert_int_equal(got, len);
	assert_memory_equal(out, data, len);
	free(out);
}

struct istat {
	char type[16];
	unsigned mode, uid, gid, links;
	unsigned long long size;
	unsigned long mtime, mtime_extra;
};

/* debugfs's stat of path; returns false when it is not there. */
static bool istat(const struct fx *f, const char *path, struct istat *s)
{
	char req[1200];
	snprintf(req, sizeof(req), "stat \"%s\"", path);
	char *out = debugfs(f, req, NULL);
	memset(s, 0, sizeof(*s));
	const char *t = strstr(out, "Type: ");
	const char *m = strstr(out, "Mode: ");
	const char *u = strstr(out, "User: ");
	const char *l = strstr(out, "Links: ");
	const char *z = strstr(out, "Size: ");
	const char *mt = strstr(out, "mtime: 0x");
	bool ok = t && m && u && l && z && mt;
	if (ok) {
		ok = sscanf(t, "Type: %15s", s->type) == 1 && sscanf(m, "Mode: %o", &s->mode) == 1 &&
		     sscanf(u, "User: %u Group: %u", &s->uid, &s->gid) == 2 &&
		     sscanf(l, "Links: %u", &s->links) == 1 && sscanf(z, "Size: %llu", &s->size) == 1 &&
		     sscanf(mt, "mtime: 0x%lx:%lx", &s->mtime, &s->mtime_extra) == 2;
	}
	free(out);
	return ok;
}

static void assert_inode(const struct fx *f, const char *path, const char *type, unsigned mode, unsigned uid,
			 unsigned gid)
{
	struct istat s;
	if (!istat(f, path, &s))
		fail_msg("%s is not in the image", path);
	assert_string_equal(s.type, type);
	assert_int_equal(s.mode, mode);
	assert_int_equal(s.uid, uid);
	assert_int_equal(s.gid, gid);
}

/* The entries of directory path but . and .., from debugfs ls. */
static int count_entries(const struct fx *f, const char *path)
{
	char req[1200];
	snprintf(req, sizeof(req), "ls \"%s\"", path);
	char *out = debugfs(f, req, NULL);
	/* ls prints "ino (rec_len) name" groups; count the "(" that open each. */
	int n = 0;
	for (const char *p = out; (p = strchr(p, '(')); p++)
		n++;
	free(out);
	return n - 2;
}

static void assert_no_image(const struct fx *f)
{
	assert_int_equal(access(f->image, F_OK), -1);
	assert_int_equal(errno, ENOENT);
}

static void assert_refused(const struct fx *f, int rc, const char *needle)
{
	assert_int_equal(rc, -1);
	assert_true(strncmp(f->err, "workspace: ", 11) == 0);
	assert_null(strchr(f->err, '\n'));
	if (!strstr(f->err, needle))
		fail_msg("error \"%s\" does not say \"%s\"", f->err, needle);
	assert_int_equal(f->st.files + f->st.dirs + f->st.bytes, 0);
	assert_no_image(f);
}

/* The bytes of path covered by extents, in one run from offset 0, as
 * FIEMAP reports them (unwritten ones included); -1 where the host's file
 * system has no FIEMAP. */
static int64_t mapped_bytes(const char *path)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	enum { N = 64 };
	struct fiemap *fm = calloc(1, sizeof(*fm) + N * sizeof(struct fiemap_extent));
	assert_non_null(fm);
	uint64_t next = 0;
	bool last = false;
	while (!last) {
		memset(fm, 0, sizeof(*fm));
		fm->fm_start = next;
		fm->fm_length = FIEMAP_MAX_OFFSET - next;
		fm->fm_extent_count = N;
		if (ioctl(fd, FS_IOC_FIEMAP, fm)) {
			free(fm);
			close(fd);
			return -1;
		}
		if (fm->fm_mapped_extents == 0)
			break;
		for (unsigned i = 0; i < fm->fm_mapped_extents && !last; i++) {
			const struct fiemap_extent *e = &fm->fm_extents[i];
			if (e->fe_logical != next)
				last = true;   /* a hole: stop counting */
			else
				next += e->fe_length;
			last |= (e->fe_flags & FIEMAP_EXTENT_LAST) != 0;
		}
	}
	free(fm);
	close(fd);
	return (int64_t)next;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

/* ---- images made --------------------------------------------------------- */

static void test_empty_workspace(void **state)
{
	struct fx *f = *state;
	assert_int_equal(create(f, 64, NULL), 0);
	assert_int_equal(f->st.files + f->st.dirs + f->st.bytes, 0);

	struct stat sb;
	assert_int_equal(stat(f->image, &sb), 0);
	assert_true(S_ISREG(sb.st_mode));
	assert_int_equal(sb.st_mode & 07777, 0600);
	assert_int_equal(sb.st_size, 64ll << 20);
	/* Every block allocated: at least the size in blocks (the host's own
	 * file system may add its extent-tree blocks: one 4 KiB block on ext4
	 * once our writes split the fallocated extent), and no hole anywhere.
	 * SEEK_HOLE cannot tell: ext4 reports unwritten extents as holes. */
	assert_true((uint64_t)sb.st_blocks * 512 >= 64ull << 20);
	assert_true((uint64_t)sb.st_blocks * 512 <= (64ull << 20) + (64 << 10));
	int64_t mapped = mapped_bytes(f->image);
	if (mapped >= 0)
		assert_int_equal(mapped, 64ll << 20);

	assert_fsck_clean(f);
	assert_inode(f, "/", "directory", 0755, UID, GID);
	assert_inode(f, "/artifacts", "directory", 0755, UID, GID);
	assert_int_equal(count_entries(f, "/artifacts"), 0);
	assert_inode(f, "/lost+found", "directory", 0700, 0, 0);
	assert_int_equal(count_entries(f, "/"), 2);   /* lost+found, artifacts */

	/* what the guest's ext4 driver is given */
	char *out = debugfs(f, "features", NULL);
	const char *want[] = { "extent", "filetype", "sparse_super", "large_file", "dir_nlink", "extra_isize",
			       "flex_bg", "huge_file" };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(out, want[i]))
			fail_msg("feature %s missing: %s", want[i], out);
	free(out);
}

static void test_copies_tree(void **state)
{
	struct fx *f = *state;
	const char *hello = "print('hello')\n";
	const char *utf = "caf\xc3\xa9 \xe2\x98\x95\n";
	put_file(f, "main.py", hello, strlen(hello), 0644);
	put_file(f, "run.sh", "#!/bin/sh\n", 10, 0755);
	put_file(f, "secret", "s", 1, 0600);
	put_file(f, "setuid", "x", 1, 04755);   /* the special bits are dropped */
	put_file(f, "empty", "", 0, 0644);
	put_dir(f, "lib", 0750);
	put_dir(f, "lib/pkg", 0755);
	put_dir(f, "lib/pkg/deep", 0500);   /* the owner gets rwx on directories */
	put_file(f, "lib/pkg/mod.py", utf, strlen(utf), 0444);
	put_dir(f, "with space", 0755);
	put_file(f, "with space/caf\xc3\xa9 \xe2\x98\x95.txt", utf, strlen(utf), 0640);
	put_dir(f, "emptydir", 0755);
	char p[1024];
	snprintf(p, sizeof(p), "%s/main.py", f->src);
	struct timespec ts[2] = { { 1600000000, 123456789 }, { 1600000000, 123456789 } };
	assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);

	assert_int_equal(create(f, 64, f->src), 0);
	assert_int_equal(f->st.files, 7);
	assert_int_equal(f->st.dirs, 5);
	assert_int_equal(f->st.bytes, strlen(hello) + 10 + 1 + 1 + 0 + 2 * strlen(utf));
	assert_fsck_clean(f);

	assert_content(f, "/main.py", hello, strlen(hello));
	assert_content(f, "/run.sh", "#!/bin/sh\n", 10);
	assert_content(f, "/empty", "", 0);
	assert_content(f, "/lib/pkg/mod.py", utf, strlen(utf));
	assert_content(f, "/with space/caf\xc3\xa9 \xe2\x98\x95.txt", utf, strlen(utf));

	assert_inode(f, "/main.py", "regular", 0644, UID, GID);
	assert_inode(f, "/run.sh", "regular", 0755, UID, GID);
	assert_inode(f, "/secret", "regular", 0600, UID, GID);
	assert_inode(f, "/setuid", "regular", 0755, UID, GID);
	assert_inode(f, "/empty", "regular", 0644, UID, GID);
	assert_inode(f, "/lib", "directory", 0750, UID, GID);
	assert_inode(f, "/lib/pkg/deep", "directory", 0700, UID, GID);
	assert_inode(f, "/lib/pkg/mod.py", "regular", 0444, UID, GID);
	assert_inode(f, "/with space", "directory", 0755, UID, GID);
	assert_inode(f, "/artifacts", "directory", 0755, UID, GID);
	assert_int_equal(count_entries(f, "/artifacts"), 0);
	assert_int_equal(count_entries(f, "/emptydir"), 0);
	assert_int_equal(count_entries(f, "/lib/pkg"), 2);

	/* link counts: a directory has 2 plus its subdirectories */
	struct istat s;
	assert_true(istat(f, "/lib", &s));
	assert_int_equal(s.links, 3);
	assert_true(istat(f, "/", &s));
	assert_int_equal(s.links, 2 + 5);   /* lost+found, artifacts, lib, with space, emptydir */
	/* the source's mtime, to the nanosecond (ext4 keeps nsec << 2) */
	assert_true(istat(f, "/main.py", &s));
	assert_int_equal(s.mtime, 1600000000);
	assert_int_equal(s.mtime_extra, 123456789ul << 2);
	assert_int_equal(s.size, strlen(hello));
}

static void test_large_file(void **state)
{
	struct fx *f = *state;
	/* several MiB, not a whole number of blocks: crosses the copy buffer,
	 * many blocks and more than one extent's worth of allocation calls */
	size_t n = (5u << 20) + 12345;
	uint8_t *data = malloc(n);
	assert_non_null(data);
	fill(data, n, 7);
	put_dir(f, "data", 0755);
	put_file(f, "data/blob.bin", data, n, 0644);
	assert_int_equal(create(f, 64, f->src), 0);
	assert_int_equal(f->st.bytes, n);
	assert_fsck_clean(f);
	assert_content(f, "/data/blob.bin", data, n);
	struct istat s;
	assert_true(istat(f, "/data/blob.bin", &s));
	assert_int_equal(s.size, n);
	free(data);
}

static void test_hundred_files(void **state)
{
	struct fx *f = *state;
	char name[128], body[64];
	/* Long names: 100 entries take several directory blocks. */
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "a_rather_long_file_name_to_fill_directory_blocks_quickly_%03d.txt", i);
		int len = snprintf(body, sizeof(body), "file %d\n", i);
		put_file(f, name, body, (size_t)len, 0644);
	}
	assert_int_equal(create(f, 64, f->src), 0);
	assert_int_equal(f->st.files, 100);
	assert_fsck_clean(f);
	assert_int_equal(count_entries(f, "/"), 102);
	for (int i = 0; i < 100; i += 33) {
		snprintf(name, sizeof(name), "/a_rather_long_file_name_to_fill_directory_blocks_quickly_%03d.txt", i);
		int len = snprintf(body, sizeof(body), "file %d\n", i);
		assert_content(f, name, body, (size_t)len);
	}
}

static void test_many_dirs(void **state)
{
	struct fx *f = *state;
	char name[160];
	/* a directory grown while directories are made in it */
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "a_rather_long_directory_name_to_fill_directory_blocks_%03d", i);
		put_dir(f, name, 0755);
		strcat(name, "/x");
		put_file(f, name, name, strlen(name), 0644);
	}
	assert_int_equal(create(f, 64, f->src), 0);
	assert_int_equal(f->st.dirs, 100);
	assert_int_equal(f->st.files, 100);
	assert_fsck_clean(f);
	struct istat s;
	assert_true(istat(f, "/", &s));
	assert_int_equal(s.links, 2 + 100 + 2);
	snprintf(name, sizeof(name), "a_rather_long_directory_name_to_fill_directory_blocks_%03d/x", 99);
	char path[200];
	snprintf(path, sizeof(path), "/%s", name);
	assert_content(f, path, name, strlen(name));
}

static void test_source_artifacts_kept(void **state)
{
	struct fx *f = *state;
	put_dir(f, "artifacts", 0700);
	put_file(f, "artifacts/previous.txt", "old\n", 4, 0644);
	assert_int_equal(create(f, 16, f->src), 0);
	assert_int_equal(f->st.dirs, 1);
	assert_fsck_clean(f);
	assert_inode(f, "/artifacts", "directory", 0700, UID, GID);
	assert_content(f, "/artifacts/previous.txt", "old\n", 4);
	assert_int_equal(count_entries(f, "/"), 2);
}

/* Source mode's files: added to the top directory beside the copied tree,
 * under their names; a name the tree holds already, or one that is not a
 * plain name, is refused and leaves no image. */
static void test_adds_files(void **state)
{
	struct fx *f = *state;
	put_file(f, "in.txt", "input\n", 6, 0644);
	char main_c[400];
	snprintf(main_c, sizeof(main_c), "%s/main.c", f->dir);
	int fd = open(main_c, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "int main;\n", 10), 10);   /* its offset now at the end */
	struct workspace_file files[] = { { fd, "main.c" } };
	struct workspace_source ws = { .dirfd = open(f->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC), .name = "src",
				       .files = files, .nfiles = 1 };
	assert_int_equal(workspace_create(f->image, 16, &ws, UID, GID, &f->st, f->err, sizeof(f->err)), 0);
	assert_fsck_clean(f);
	assert_content(f, "/main.c", "int main;\n", 10);
	assert_inode(f, "/main.c", "regular", 0640, UID, GID);
	assert_content(f, "/in.txt", "input\n", 6);
	assert_int_equal(f->st.files, 2);
	unlink(f->image);
	/* no directory, files only */
	ws.dirfd = -1;
	assert_int_equal(workspace_create(f->image, 16, &ws, UID, GID, &f->st, f->err, sizeof(f->err)), 0);
	assert_content(f, "/main.c", "int main;\n", 10);
	unlink(f->image);
	/* clashes and bad names */
	ws.dirfd = open(f->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	files[0].name = "in.txt";
	assert_refused(f, workspace_create(f->image, 16, &ws, UID, GID, &f->st, f->err, sizeof(f->err)),
		       "in.txt: the workspace already holds a file of that name");
	const char *bad[] = { "a/b", "..", "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		files[0].name = bad[i];
		assert_refused(f, workspace_create(f->image, 16, &ws, UID, GID, &f->st, f->err, sizeof(f->err)),
			       "is not a file name");
	}
	close(ws.dirfd);
	close(fd);
}

static void test_deep_tree(void **state)
{
	struct fx *f = *state;
	char rel[512] = "d";
	put_dir(f, rel, 0755);
	for (int i = 1; i < 64; i++) {   /* 64 levels of directories are fine */
		strcat(rel, "/d");
		put_dir(f, rel, 0755);
	}
	strcat(rel, "/leaf");
	put_file(f, rel, "x", 1, 0644);
	assert_int_equal(create(f, 16, f->src), 0);
	assert_int_equal(f->st.dirs, 64);
	assert_fsck_clean(f);
	char path[600];
	snprintf(path, sizeof(path), "/%s", rel);
	assert_content(f, path, "x", 1);
}

static void test_large_ids(void **state)
{
	struct fx *f = *state;
	put_file(f, "a", "a", 1, 0644);
	assert_int_equal(create_as(f, 8, f->src, NULL, 200000, 300000), 0);
	assert_fsck_clean(f);
	assert_inode(f, "/", "directory", 0755, 200000, 300000);
	assert_inode(f, "/a", "regular", 0644, 200000, 300000);
}

static void test_smallest_and_sizes(void **state)
{
	struct fx *f = *state;
	put_file(f, "a", "a", 1, 0644);
	assert_int_equal(create(f, WORKSPACE_MIN_MIB, f->src), 0);
	assert_fsck_clean(f);
	struct stat sb;
	assert_int_equal(stat(f->image, &sb), 0);
	assert_int_equal(sb.st_size, (off_t)WORKSPACE_MIN_MIB << 20);
	unlink(f->image);
	/* past one block group (128 MiB) and its superblock backups */
	assert_int_equal(create(f, 300, f->src), 0);
	assert_fsck_clean(f);
	assert_content(f, "/a", "a", 1);
}

/* ---- refusals ------------------------------------------------------------ */

static void test_refuses_existing_image(void **state)
{
	struct fx *f = *state;
	int fd = open(f->image, O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "keep", 4), 4);
	close(fd);
	assert_int_equal(create(f, 64, NULL), -1);
	assert_non_null(strstr(f->err, "already exists"));
	char buf[16];
	fd = open(f->image, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "keep", 4);
	close(fd);
	unlink(f->image);
	/* a symbolic link at the path is not followed either */
	char target[400];
	snprintf(target, sizeof(target), "%s/target", f->dir);
	assert_int_equal(symlink(target, f->image), 0);
	assert_int_equal(create(f, 64, NULL), -1);
	assert_non_null(strstr(f->err, "already exists"));
	assert_int_equal(access(target, F_OK), -1);
	unlink(f->image);
}

static void test_refuses_sizes(void **state)
{
	struct fx *f = *state;
	assert_refused(f, create(f, 0, NULL), "outside 8..65536 MiB");
	assert_refused(f, create(f, WORKSPACE_MIN_MIB - 1, NULL), "7 MiB");
	assert_refused(f, create(f, WORKSPACE_MAX_MIB + 1, NULL), "65537 MiB");
	assert_refused(f, create(f, UINT64_MAX, NULL), "outside");
}

static void test_refuses_symlink(void **state)
{
	struct fx *f = *state;
	put_file(f, "ok.txt", "ok", 2, 0644);
	put_dir(f, "sub", 0755);
	char p[1024];
	snprintf(p, sizeof(p), "%s/sub/evil", f->src);
	assert_int_equal(symlink("/etc/passwd", p), 0);
	assert_refused(f, create(f, 64, f->src),
		       "workspace: sub/evil: symbolic link is not copied (only regular files and directories)");
}

static void test_refuses_symlinked_dir(void **state)
{
	struct fx *f = *state;
	char p[1024];
	snprintf(p, sizeof(p), "%s/etc", f->src);
	assert_int_equal(symlink("/etc", p), 0);
	assert_refused(f, create(f, 64, f->src), "etc: symbolic link is not copied");
}

static void test_refuses_fifo(void **state)
{
	struct fx *f = *state;
	put_dir(f, "d", 0755);
	char p[1024];
	snprintf(p, sizeof(p), "%s/d/pipe", f->src);
	assert_int_equal(mkfifo(p, 0644), 0);
	assert_refused(f, create(f, 64, f->src), "workspace: d/pipe: FIFO is not copied");
}

static void test_refuses_socket(void **state)
{
	struct fx *f = *state;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	assert_true(strlen(f->src) + 6 <= sizeof(a.sun_path));
	memcpy(a.sun_path, f->src, strlen(f->src));
	memcpy(a.sun_path + strlen(f->src), "/sock", 6);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	close(s);
	assert_refused(f, create(f, 64, f->src), "workspace: sock: socket is not copied");
}

static void test_refuses_too_large(void **state)
{
	struct fx *f = *state;
	size_t n = 12u << 20;
	uint8_t *data = calloc(1, n);
	assert_non_null(data);
	put_file(f, "big.bin", data, n, 0644);
	assert_refused(f, create(f, 8, f->src), "does not fit in a 8 MiB disk");
	assert_non_null(strstr(f->err, f->src));
	free(data);
}

static void test_refuses_too_large_in_total(void **state)
{
	struct fx *f = *state;
	/* each file fits on its own, together they do not: the file system
	 * runs out of blocks part way */
	size_t n = 1u << 20;
	uint8_t *data = calloc(1, n);
	assert_non_null(data);
	char name[32];
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "part%d", i);
		put_file(f, name, data, n, 0644);
	}
	assert_refused(f, create(f, 8, f->src), "does not fit in a 8 MiB disk");
	free(data);
}

static void test_refuses_too_many_files(void **state)
{
	struct fx *f = *state;
	/* an 8 MiB disk has 2048 inodes */
	char name[32];
	for (int i = 0; i < 2100; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		put_file(f, name, "", 0, 0644);
	}
	assert_refused(f, create(f, 8, f->src), "does not fit in a 8 MiB disk");
}

/* The source is opened by vmrun's plan, as its caller (test_run.c covers
 * a missing one); here, an fd that is not a directory is refused. */
static void test_refuses_source_not_a_directory(void **state)
{
	struct fx *f = *state;
	char p[400];
	put_file(f, "file", "x", 1, 0644);
	snprintf(p, sizeof(p), "%s/file", f->src);
	struct workspace_source ws = { .dirfd = open(p, O_RDONLY | O_CLOEXEC), .name = "--workspace" };
	assert_true(ws.dirfd >= 0);
	assert_refused(f, workspace_create(f->image, 64, &ws, UID, GID, &f->st, f->err, sizeof(f->err)),
		       "Not a directory");
	close(ws.dirfd);
}

static void test_refuses_artifacts_file(void **state)
{
	struct fx *f = *state;
	put_file(f, "artifacts", "not a dir", 9, 0644);
	assert_refused(f, create(f, 64, f->src), "artifacts: is a file");
}

static void test_refuses_too_deep(void **state)
{
	struct fx *f = *state;
	char rel[512] = "d";
	put_dir(f, rel, 0755);
	for (int i = 1; i < 65; i++) {
		strcat(rel, "/d");
		put_dir(f, rel, 0755);
	}
	assert_refused(f, create(f, 16, f->src), "deeper than 64 directory levels");
}

/* Root reads a mode-0000 file anyway (CAP_DAC_OVERRIDE): drop the two
 * capabilities that bypass file permissions, keeping uid 0. */
static void drop_dac_capabilities(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	assert_int_equal(syscall(SYS_capget, &h, d), 0);
	d[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
	assert_int_equal(syscall(SYS_capset, &h, d), 0);
}

static void test_refuses_unreadable(void **state)
{
	struct fx *f = *state;
	put_file(f, "locked", "x", 1, 0000);
	/* In a child, so the capabilities come back for the other tests. */
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		drop_dac_capabilities();
		int rc = create(f, 16, f->src);
		bool ok = rc == -1 && strstr(f->err, "locked: Permission denied") && access(f->image, F_OK) != 0;
		if (!ok)
			fprintf(stderr, "unreadable: rc %d, error \"%s\"\n", rc, f->err);
		_exit(ok ? 0 : 1);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* vmrun is root but reads the source as its caller (finding 1 of issue
 * 12, "-w /home"): root's own directory and file in it stay unread. */
static void test_reads_as_the_caller(void **state)
{
	struct fx *f = *state;
	if (geteuid() != 0)
		skip();
	const struct caller who = { .uid = 12345, .gid = 12345, .groups = { 12345 }, .ngroups = 1, .switch_ids = true };
	char p[1024];
	put_dir(f, "other", 0755);
	put_file(f, "other/readable", "ok", 2, 0644);
	assert_int_equal(create_as(f, 16, f->src, &who, UID, GID), 0);   /* what they may read, they get */
	unlink(f->image);
	put_dir(f, "private", 0700);
	snprintf(p, sizeof(p), "%s/private", f->src);
	assert_int_equal(chown(p, 0, 0), 0);
	assert_int_equal(create_as(f, 16, f->src, &who, UID, GID), -1);
	assert_non_null(strstr(f->err, "workspace: private: Permission denied"));
	assert_int_not_equal(access(f->image, F_OK), 0);
	/* and we are root again afterwards */
	assert_int_equal(create_as(f, 16, f->src, NULL, UID, GID), 0);
	unlink(f->image);
	rmdir(p);
	put_file(f, "shadow", "secret", 6, 0600);
	assert_int_equal(create_as(f, 16, f->src, &who, UID, GID), -1);
	assert_non_null(strstr(f->err, "workspace: shadow: Permission denied"));
}

static void test_error_names_made_printable(void **state)
{
	struct fx *f = *state;
	char p[1024];
	snprintf(p, sizeof(p), "%s/bad\nname\x1b[31m", f->src);
	assert_int_equal(mkfifo(p, 0644), 0);
	assert_refused(f, create(f, 16, f->src), "bad?name?[31m: FIFO");
}

static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void test_no_fd_left_open(void **state)
{
	struct fx *f = *state;
	int before = open_fds();
	put_dir(f, "d", 0755);
	put_file(f, "d/a", "a", 1, 0644);
	assert_int_equal(create(f, 8, f->src), 0);
	assert_int_equal(create(f, 8, f->src), -1);   /* exists */
	unlink(f->image);
	char p[1024];
	snprintf(p, sizeof(p), "%s/d/link", f->src);
	assert_int_equal(symlink("a", p), 0);
	assert_int_equal(create(f, 8, f->src), -1);   /* fails two levels down */
	assert_no_image(f);
	assert_int_equal(open_fds(), before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_empty_workspace, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_copies_tree, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_large_file, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hundred_files, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_many_dirs, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_source_artifacts_kept, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_deep_tree, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_adds_files, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_large_ids, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_smallest_and_sizes, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_refuses_existing_image, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_refuses_sizes, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_refuses_symlink, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_refuses_symlinked_dir, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_refuses_fifo, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_refuses_socket, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_refuses_too_large, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_refuses_too_large_in_total, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_refuses_too_many_files, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_refuses_source_not_a_directory, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_refuses_artifacts_file, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_refuses_too_deep, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_refuses_unreadable, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_reads_as_the_caller, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_error_names_made_printable, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_no_fd_left_open, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests_name("workspace", tests, NULL, NULL);
}
