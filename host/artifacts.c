#include "artifacts.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/landlock.h>
#include <sys/syscall.h>

#include <et/com_err.h>
#include <ext2fs/ext2fs.h>
#include <seccomp.h>

#include "session.h"   /* vmrun's clock */

/* The helper lists at most this many skipped entries; the last line says
 * that later ones went unlisted. The parent accepts no more. */
#define SKIP_CAP 10000
/* Longest report line: "F", a size, a path escaped 4 bytes per byte. */
#define LINE_MAX_LEN 8192
#define COPY_CHUNK (64 * 1024)
/* Address space the helper may add to what the forked copy already maps:
 * libext2fs, the copy buffer and the report need a few MiB. */
#define AS_SLACK (256ULL << 20)
/* Fds the helper may hold besides one per open directory level. */
#define FD_SLACK 16
/* Every directory level adds at least "x/" to the path, so no walk goes
 * deeper than this whatever max_depth says. */
#define DEPTH_HARD_CAP (ARTIFACT_PATH_MAX / 2)
#define REPORT_FD 3

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#ifdef ARTIFACTS_TEST_HOOKS
/* Test builds only (the test includes this file): runs in the helper once
 * the sandbox is in place, to show what the filter forbids. */
static void (*artifacts_test_sandboxed)(void);
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

/* ---- the helper: sandbox ------------------------------------------------ */

/* a + b as a limit; past INT64_MAX unlimited (the kernel compares file
 * limits as signed). */
static uint64_t lim_add(uint64_t a, uint64_t b)
{
	return a > (uint64_t)INT64_MAX - b ? RLIM_INFINITY : a + b;
}

/* Bytes of address space mapped now, from /proc/self/statm (0 if unknown). */
static uint64_t mapped_bytes(void)
{
	unsigned long long pages = 0;
	FILE *f = fopen("/proc/self/statm", "re");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &pages) != 1)
		pages = 0;
	fclose(f);
	return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

static int set_limit(int what, uint64_t v)
{
	struct rlimit r = { v, v };
	return setrlimit(what, &r);
}

/* RLIMIT_FSIZE backs up the byte cap (no single file may pass it; writes
 * past it fail with EFBIG since SIGXFSZ is ignored). RLIMIT_AS counts from
 * what the forked copy of the parent already maps, which under ASan is
 * terabytes of reserved shadow: a fixed figure would break those builds. */
static int limit_resources(const struct artifacts_limits *lim, unsigned depth)
{
	uint64_t as = mapped_bytes();
	if (set_limit(RLIMIT_CORE, 0) < 0 ||
	    set_limit(RLIMIT_FSIZE, lim_add(lim->max_bytes, 4096)) < 0 ||
	    set_limit(RLIMIT_NOFILE, REPORT_FD + 1 + FD_SLACK + depth) < 0)
		return -1;
	if (as && set_limit(RLIMIT_AS, lim_add(as, AS_SLACK)) < 0)
		return -1;
	return 0;
}

/* Only fd 3 (the report pipe) survives, plus stderr for diagnostics:
 * whatever else the parent had open (sockets, other runs' files) must not
 * reach code that parses a hostile image. */
static int keep_only_report_fd(int report)
{
	if (report != REPORT_FD && dup2(report, REPORT_FD) < 0)
		return -1;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0)
		return -1;
	if (close_range(REPORT_FD + 1, ~0U, 0) < 0) {
		for (int fd = REPORT_FD + 1; fd < 1024; fd++)
			close(fd);
	}
	return 0;
}

/* vmrun's handlers and blocked signals are not the helper's: Ctrl-C or a
 * SIGTERM to the group ends it, and writes past RLIMIT_FSIZE fail with
 * EFBIG instead of killing it. */
static void reset_signals(void)
{
	sigset_t none;
	for (int sig = 1; sig < SIGRTMIN; sig++)
		signal(sig, SIG_DFL);   /* fails harmlessly for SIGKILL, SIGSTOP */
	signal(SIGXFSZ, SIG_IGN);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Landlock, where the kernel has it (5.13+): from here on no path outside
 * dest can be opened or created, which seccomp, blind to path strings,
 * cannot say. Rights beyond ABI 2 (truncate, device ioctls) are left
 * unhandled: the filter below already forbids truncate(2) and ioctl. 0
 * when in place or unsupported, -1 on failure. */
static int confine_to(int destfd)
{
	const uint64_t allow = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
			       LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG;
	uint64_t handled = allow | LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
			   LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
			   LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_SOCK |
			   LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
			   LANDLOCK_ACCESS_FS_MAKE_SYM;
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 1)
		return errno == ENOSYS || errno == EOPNOTSUPP ? 0 : -1;
	if (abi >= 2)
		handled |= LANDLOCK_ACCESS_FS_REFER;   /* no rename or link into dest */
	struct landlock_ruleset_attr attr = { .handled_access_fs = handled };
	struct landlock_path_beneath_attr beneath = { .allowed_access = allow, .parent_fd = destfd };
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (rs < 0)
		return -1;
	int rc = 0;
	if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) < 0 ||
	    syscall(SYS_landlock_restrict_self, rs, 0) < 0)
		rc = -1;
	int saved = errno;
	close(rs);
	errno = saved;
	return rc;
}

#define ALLOW(sys, ...) seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sys), __VA_ARGS__)

/* The filter for the walk. Default: kill the process, so a helper taken
 * over through a libext2fs bug can do no more than what is listed here.
 * What it can still do, and why that is left: create new files (never
 * replacing one, never through a final symlink) and directories, with
 * modes 0644/0755 only; seccomp cannot see path strings, and the walk
 * needs openat/mkdirat relative to the directory fds it opened. Landlock
 * keeps that beneath dest; without it (kernels before 5.13), any path its
 * uid can write. It cannot open an existing file other than a directory
 * (O_DIRECTORY), read directories (no getdents), exec, map executable
 * memory, signal, fork, or use the network. */
static int install_filter(void)
{
	const int create = O_CREAT | O_EXCL | O_NOFOLLOW;
	const int create_mask = O_ACCMODE | create | O_TRUNC | O_DIRECTORY | O_TMPFILE;
	const int opendir = O_DIRECTORY | O_NOFOLLOW;
	const int opendir_mask = O_ACCMODE | O_CREAT | O_TRUNC | O_NOFOLLOW | O_TMPFILE;
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	if (!ctx)
		return -1;
	int rc = 0;
	/* Image reads: the unix io manager uses pread64, and lseek + read
	 * when a pread64 comes up short (a block past the image's end). */
	rc |= ALLOW(pread64, 0);
	rc |= ALLOW(read, 0);
	rc |= ALLOW(lseek, 0);
	/* File contents and report lines. */
	rc |= ALLOW(write, 0);
	/* Regular files: created, never opened: O_CREAT|O_EXCL|O_NOFOLLOW
	 * with O_WRONLY, no O_TRUNC/O_TMPFILE, and mode exactly 0644 or
	 * 0755. Masked compares express "these bits set, those clear", one
	 * comparison per argument per rule, hence one rule per mode. */
	rc |= ALLOW(openat, 2, SCMP_A2(SCMP_CMP_MASKED_EQ, create_mask, O_WRONLY | create),
		    SCMP_A3(SCMP_CMP_MASKED_EQ, 0xffffffff, 0644));
	rc |= ALLOW(openat, 2, SCMP_A2(SCMP_CMP_MASKED_EQ, create_mask, O_WRONLY | create),
		    SCMP_A3(SCMP_CMP_MASKED_EQ, 0xffffffff, 0755));
	/* Directories we just made: read-only, O_DIRECTORY, no symlink. */
	rc |= ALLOW(openat, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, opendir_mask | O_DIRECTORY, opendir));
	/* Subdirectories, mode exactly 0755. */
	rc |= ALLOW(mkdirat, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, 0xffffffff, 0755));
	rc |= ALLOW(close, 0);
	/* A file whose data turned out unreadable is emptied, not left half
	 * copied (no unlink: that would let a hijacked helper delete). */
	rc |= ALLOW(ftruncate, 0);
	/* Memory for malloc (brk; mmap, mremap and munmap for big blocks),
	 * never executable; madvise for allocators returning freed pages
	 * (ASan's does so periodically). */
	rc |= ALLOW(brk, 0);
	rc |= ALLOW(mmap, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	rc |= ALLOW(munmap, 0);
	rc |= ALLOW(mremap, 0);
	rc |= ALLOW(madvise, 0);
	/* Leaving, and returning from a signal handler (the sanitizers
	 * install some). */
	rc |= ALLOW(exit_group, 0);
	rc |= ALLOW(exit, 0);
	rc |= ALLOW(rt_sigreturn, 0);
#ifdef UNDER_ASAN
	/* ASan, before every noreturn call (_exit included), asks where the
	 * signal stack is: sigaltstack(NULL, &old), which changes nothing. */
	rc |= ALLOW(sigaltstack, 1, SCMP_A0(SCMP_CMP_EQ, 0, 0));
#endif
	if (rc == 0)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	return rc ? -1 : 0;
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
	if (write_all(REPORT_FD, w->out, w->outlen) < 0)
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

static void __attribute__((noreturn)) helper(const char *image, const char *dest,
					      const struct artifacts_limits *lim, pid_t parent, int report)
{
	static struct walk w;
	w.lim = lim;
	w.max_depth = lim->max_depth < DEPTH_HARD_CAP ? lim->max_depth : DEPTH_HARD_CAP;
	w.max_path = lim->max_path < ARTIFACT_PATH_MAX - 1 ? lim->max_path : ARTIFACT_PATH_MAX - 1;
	/* No helper outlives vmrun. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(2);
	if (keep_only_report_fd(report) < 0)
		_exit(2);
	reset_signals();
	umask(022);   /* modes come out exactly 0644 and 0755 */
	initialize_ext2_error_table();
	if (limit_resources(lim, w.max_depth) < 0)
		die(&w, "setrlimit: %s", strerror(errno));
	/* Opened before the sandbox: the filter allows no opening of
	 * existing files. EXT2_FLAG_RW is not set, so nothing is written;
	 * the unix io manager opens the file O_RDONLY. */
	errcode_t err = ext2fs_open(image, EXT2_FLAG_64BITS, 0, 0, unix_io_manager, &w.fs);
	if (err)
		die(&w, "%s: %s", image, error_message(err));
	w.fs->default_bitmap_type = EXT2FS_BMAP64_RBTREE;   /* memory ~ bits set */
	if (ext2fs_allocate_inode_bitmap(w.fs, "copied", &w.copied) ||
	    ext2fs_allocate_inode_bitmap(w.fs, "visited", &w.visited) || !(w.chunk = malloc(COPY_CHUNK)))
		die(&w, "out of memory");
	if (mkdir(dest, 0755) < 0)
		die(&w, "%s: %s", dest, strerror(errno));
	int destfd = open(dest, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (destfd < 0)
		die(&w, "%s: %s", dest, strerror(errno));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		die(&w, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
	if (confine_to(destfd) < 0)
		die(&w, "landlock: %s", strerror(errno));
	if (install_filter() < 0)
		die(&w, "cannot install the seccomp filter");
#ifdef ARTIFACTS_TEST_HOOKS
	if (artifacts_test_sandboxed)
		artifacts_test_sandboxed();
#endif
	walk_artifacts(&w, destfd);
	emit(&w, "END\n", 4);
	flush_report(&w);
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

/* Read and parse the report until EOF. 0 at EOF, 1 on timeout, -1 on a
 * malformed report or read error (reason in err). */
static int read_report(int fd, int64_t deadline, struct parser *p, char *err, size_t errlen)
{
	char buf[LINE_MAX_LEN];
	size_t len = 0;
	for (;;) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		int n = poll(&pfd, 1, session_left_ms(deadline));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, errlen, "artifacts: poll: %s", strerror(errno));
			return -1;
		}
		if (n == 0) {
			if (session_now_ms() >= deadline)
				return 1;
			continue;
		}
		ssize_t got = read(fd, buf + len, sizeof(buf) - len);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got < 0) {
			snprintf(err, errlen, "artifacts: reading the helper's report: %s", strerror(errno));
			return -1;
		}
		if (got == 0)
			break;
		len += (size_t)got;
		char *start = buf, *nl;
		while ((nl = memchr(start, '\n', len - (size_t)(start - buf)))) {
			if (parse_line(p, start, (size_t)(nl - start)) < 0) {
				snprintf(err, errlen, "artifacts: malformed report from the helper");
				return -1;
			}
			start = nl + 1;
		}
		len -= (size_t)(start - buf);
		memmove(buf, start, len);
		if (len == sizeof(buf)) {
			snprintf(err, errlen, "artifacts: malformed report from the helper (line too long)");
			return -1;
		}
	}
	if (len) {
		snprintf(err, errlen, "artifacts: malformed report from the helper (unterminated line)");
		return -1;
	}
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
		if (session_now_ms() >= deadline) {
			kill(pid, SIGKILL);
			while (waitpid(pid, status, 0) < 0 && errno == EINTR)
				;
			return -1;
		}
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
}

static int check_args(const char *image, const char *dest, const struct artifacts_limits *lim, char *err,
		      size_t errlen)
{
	if (!image || !dest || !lim || !*dest) {
		snprintf(err, errlen, "artifacts: missing image, destination or limits");
		return -1;
	}
	if (lim->timeout_ms <= 0) {
		snprintf(err, errlen, "artifacts: the timeout must be positive");
		return -1;
	}
	return 0;
}

/* Turn how the helper ended into 0 or -1 with a reason. */
static int verdict(const struct parser *p, int how, int status, int timeout_ms, char *err, size_t errlen)
{
	if (p->failed) {
		snprintf(err, errlen, "artifacts: %s", p->helper_err);
		return -1;
	}
	if (how > 0) {
		snprintf(err, errlen, "artifacts: the helper timed out after %d ms", timeout_ms);
		return -1;
	}
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		snprintf(err, errlen, "artifacts: the helper was killed by signal %d (%s)%s", sig,
			 strsignal(sig), sig == SIGSYS ? ": a system call its sandbox forbids" : "");
		return -1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !p->ended) {
		snprintf(err, errlen, "artifacts: the helper failed without a complete report");
		return -1;
	}
	return 0;
}

int artifacts_extract(const char *image, const char *dest, const struct artifacts_limits *lim,
		      struct artifacts_result *res, char *err, size_t errlen)
{
	struct parser p = { .lim = lim, .res = res };
	int fds[2], status = 0;
	memset(res, 0, sizeof(*res));
	if (check_args(image, dest, lim, err, errlen) < 0)
		return -1;
	if (pipe2(fds, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "artifacts: pipe: %s", strerror(errno));
		return -1;
	}
	pid_t parent = getpid();
	int64_t deadline = session_now_ms() + lim->timeout_ms;
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "artifacts: fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		close(fds[0]);
		helper(image, dest, lim, parent, fds[1]);
	}
	close(fds[1]);
	int how = read_report(fds[0], deadline, &p, err, errlen);
	close(fds[0]);
	if (how != 0)
		kill(pid, SIGKILL);   /* timed out, or not to be trusted further */
	if (reap(pid, deadline, &status) < 0 && how == 0)
		how = 1;
	int rc = how < 0 ? -1 : verdict(&p, how, status, lim->timeout_ms, err, errlen);
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
