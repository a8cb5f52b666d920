#include "artifacts_sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/landlock.h>

#include <seccomp.h>

#include "sysfile.h"

/* Address space the helper may add to what the forked copy already maps:
 * libext2fs, the copy buffer and the report need a few MiB. */
#define AS_SLACK (256ULL << 20)
/* A directory of the host that exists everywhere: the helper's own tmpfs
 * root is mounted on it (in its own mount namespace only) before the
 * pivot_root. */
#define ROOT_AT "/tmp"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#ifdef ARTIFACTS_TEST_HOOKS
/* Test builds only (the test includes this file): the errno the Landlock
 * probe fails with instead of asking the kernel, to show that a kernel
 * without Landlock is refused. 0: ask the kernel. */
static int artifacts_test_landlock_errno;
#endif

static int why_errno(char *why, size_t whylen, const char *what)
{
	snprintf(why, whylen, "%s: %s", what, strerror(errno));
	return -1;
}

/* ---- fds, signals, rlimits ------------------------------------------------ */

/* Only the fds the helper needs, at fixed numbers: 0 and 1 /dev/null; 2 a
 * pipe the parent drains, not vmrun's stderr (a terminal or a log file
 * that a hijacked helper could write or truncate); the report; the image;
 * the destination. Whatever else the parent had open (sockets, other runs'
 * files) must not reach code that parses a hostile image. The sources are
 * first copied above the targets, so no dup2 overwrites one not yet moved. */
static int move_fds(const struct artifacts_sandbox *s)
{
	/* Indexed by the fd each becomes. */
	const int from[SANDBOX_DEST_FD + 1] = {
		s->devnull, s->devnull, s->errpipe,
		[SANDBOX_REPORT_FD] = s->report, [SANDBOX_IMAGE_FD] = s->image, [SANDBOX_DEST_FD] = s->dest,
	};
	int high[SANDBOX_DEST_FD + 1];
	for (int i = 0; i <= SANDBOX_DEST_FD; i++)
		if ((high[i] = fcntl(from[i], F_DUPFD_CLOEXEC, SANDBOX_DEST_FD + 1)) < 0)
			return -1;
	for (int i = 0; i <= SANDBOX_DEST_FD; i++)
		if (dup2(high[i], i) < 0)
			return -1;
	if (close_range(SANDBOX_DEST_FD + 1, ~0U, 0) < 0) {
		for (int fd = SANDBOX_DEST_FD + 1; fd < 1024; fd++)
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

int artifacts_sandbox_start(const struct artifacts_sandbox *s)
{
	/* No helper outlives vmrun. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != s->parent)
		return -1;
	if (move_fds(s) < 0)
		return -1;
	/* The destination's way into the new mount namespace: unshare moves
	 * the cwd onto that namespace's copy of its mount, while a bind from
	 * an fd of the old namespace (/proc/self/fd/N) is refused (EINVAL). */
	if (fchdir(SANDBOX_DEST_FD) < 0)
		return -1;
	reset_signals();
	umask(022);   /* modes come out exactly 0644 and 0755 */
	return 0;
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
static int limit_resources(const struct artifacts_sandbox *s)
{
	uint64_t as = mapped_bytes();
	if (set_limit(RLIMIT_CORE, 0) < 0 || set_limit(RLIMIT_FSIZE, s->max_file) < 0 ||
	    set_limit(RLIMIT_NOFILE, SANDBOX_DEST_FD + 1 + (uint64_t)s->extra_fds) < 0)
		return -1;
	if (as && set_limit(RLIMIT_AS, as > UINT64_MAX - AS_SLACK ? RLIM_INFINITY : as + AS_SLACK) < 0)
		return -1;
	return 0;
}

/* ---- identity and namespaces ---------------------------------------------- */

/* vmrun as root: the run's fresh uid, which owns nothing on the host,
 * before anything else; a helper that stayed root would be root on the
 * host the moment a libext2fs bug let it out of the rest. */
static int switch_ids(const struct artifacts_sandbox *s, char *why, size_t whylen)
{
	if (setgroups(0, NULL) < 0 || setresgid(s->gid, s->gid, s->gid) < 0 ||
	    setresuid(s->uid, s->uid, s->uid) < 0) {
		snprintf(why, whylen, "switching to uid %u: %s", (unsigned)s->uid, strerror(errno));
		return -1;
	}
	return 0;
}

/* Its own user namespace, entered the unprivileged way (mapping only its
 * own ids, as root 0 inside), so that it works the same whether vmrun is
 * root or not; and with it new mount, network, IPC and UTS namespaces. */
static int enter_namespaces(const struct artifacts_sandbox *s, char *why, size_t whylen)
{
	char map[64];
	/* Writing its own maps needs a dumpable process; the uid switch made
	 * it not one. */
	if (prctl(PR_SET_DUMPABLE, 1) < 0)
		return why_errno(why, whylen, "prctl(PR_SET_DUMPABLE)");
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) < 0) {
		/* No fallback: without the namespaces the helper would see the
		 * host's whole tree. */
		int e = errno;
		snprintf(why, whylen, "cannot create the helper's user namespace (%s%s); refusing to parse the image outside one",
			 strerror(e),
			 e == EPERM    ? ": user namespaces disabled, or vmrun in a chroot" :
			 e == ENOSPC   ? ": user.max_user_namespaces reached" :
			 e == EINVAL   ? ": a kernel without user namespaces" : "");
		return -1;
	}
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)s->uid);
	if (sysfile_write("/proc/self/uid_map", map) < 0)
		return why_errno(why, whylen, "writing /proc/self/uid_map");
	if (sysfile_write("/proc/self/setgroups", "deny") < 0)
		return why_errno(why, whylen, "writing /proc/self/setgroups");
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)s->gid);
	if (sysfile_write("/proc/self/gid_map", map) < 0)
		return why_errno(why, whylen, "writing /proc/self/gid_map");
	if (prctl(PR_SET_DUMPABLE, 0) < 0)   /* no ptrace by its own uid, no core */
		return why_errno(why, whylen, "prctl(PR_SET_DUMPABLE)");
	return 0;
}

/* Its whole file system: a read-only tmpfs holding only /dest, the
 * destination bound from the cwd (see artifacts_sandbox_start). The host's
 * tree is detached, so a hijacked helper has no path to /etc, the image, or
 * anything but the destination, whatever Landlock does. */
static int build_root(char *why, size_t whylen)
{
	struct statvfs sv;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return why_errno(why, whylen, "making mounts private");
	if (mount("vmrun-artifacts", ROOT_AT, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "size=16k,nr_inodes=8,mode=0755") < 0)
		return why_errno(why, whylen, "mounting the helper's root on " ROOT_AT);
	if (mkdir(ROOT_AT "/dest", 0755) < 0 || mount(".", ROOT_AT "/dest", NULL, MS_BIND, NULL) < 0)
		return why_errno(why, whylen, "binding the destination");
	if (chdir(ROOT_AT) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 ||
	    chdir("/") < 0)
		return why_errno(why, whylen, "pivot_root");
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return why_errno(why, whylen, "making the helper's root read-only");
	/* A flag the host's mount has and locked (read-only, say) must be
	 * kept, or the remount fails with EPERM; atime flags are kept by
	 * naming none. */
	if (statvfs("/dest", &sv) < 0 ||
	    mount(NULL, "/dest", NULL,
		  MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC | ((sv.f_flag & ST_RDONLY) ? MS_RDONLY : 0),
		  NULL) < 0)
		return why_errno(why, whylen, "remounting /dest nosuid, nodev, noexec");
	int fd = open("/dest", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || dup2(fd, SANDBOX_DEST_FD) < 0)
		return why_errno(why, whylen, "opening /dest");
	close(fd);   /* the host's fd for it is gone with the dup2 */
	return 0;
}

/* Root only inside its own namespace, and not even that: with every set
 * empty it cannot mount, change ids or ignore file modes there either. The
 * bounding set does not matter: the filter allows no exec. */
static int drop_capabilities(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	memset(d, 0, sizeof(d));
	return (int)syscall(SYS_capset, &h, d);
}

/* ---- Landlock ------------------------------------------------------------- */

/* Landlock (Linux 5.13+), required: from here on no path outside dest can
 * be opened or created, which seccomp, blind to path strings, cannot say.
 * It is the second wall around the host's files after the namespaces, and
 * the one that does not depend on the mounts being right. Rights beyond ABI
 * 2 (truncate, device ioctls) are left unhandled: the filter forbids
 * truncate(2) and ioctl. */
static int confine_to(int destfd, char *why, size_t whylen)
{
	const uint64_t allow = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
			       LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG;
	uint64_t handled = allow | LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
			   LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
			   LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_SOCK |
			   LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
			   LANDLOCK_ACCESS_FS_MAKE_SYM;
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
#ifdef ARTIFACTS_TEST_HOOKS
	if (artifacts_test_landlock_errno) {
		errno = artifacts_test_landlock_errno;
		abi = -1;
	}
#endif
	if (abi < 1) {
		snprintf(why, whylen, "Landlock is not available (%s); refusing to parse the image without it",
			 strerror(abi < 0 ? errno : EOPNOTSUPP));
		return -1;
	}
	if (abi >= 2)
		handled |= LANDLOCK_ACCESS_FS_REFER;   /* no rename or link into dest */
	struct landlock_ruleset_attr attr = { .handled_access_fs = handled };
	struct landlock_path_beneath_attr beneath = { .allowed_access = allow, .parent_fd = destfd };
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (rs < 0)
		return why_errno(why, whylen, "landlock_create_ruleset");
	int rc = 0;
	if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) < 0 ||
	    syscall(SYS_landlock_restrict_self, rs, 0) < 0)
		rc = why_errno(why, whylen, "landlock");
	close(rs);
	return rc;
}

int artifacts_sandbox_enter(const struct artifacts_sandbox *s, char *why, size_t whylen)
{
	if (limit_resources(s) < 0)
		return why_errno(why, whylen, "setrlimit");
	if (s->switch_ids && switch_ids(s, why, whylen) < 0)
		return -1;
	if (enter_namespaces(s, why, whylen) < 0 || build_root(why, whylen) < 0)
		return -1;
	if (drop_capabilities() < 0)
		return why_errno(why, whylen, "dropping capabilities");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return why_errno(why, whylen, "prctl(PR_SET_NO_NEW_PRIVS)");
	/* The uid switch cleared the parent-death signal; vmrun may have
	 * died since it was first set. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != s->parent) {
		snprintf(why, whylen, "vmrun is gone");
		return -1;
	}
	return confine_to(SANDBOX_DEST_FD, why, whylen);
}

/* ---- seccomp ---------------------------------------------------------------- */

#define ALLOW(sys, ...) seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sys), __VA_ARGS__)

/* The filter for the walk. Default: kill the process, so a helper taken
 * over through a libext2fs bug can do no more than what is listed here.
 * What it can still do, and why that is left: create new files (never
 * replacing one, never through a final symlink) and directories, with
 * modes 0644/0755 only, since the walk needs openat/mkdirat relative to the
 * directory fds it opened and seccomp cannot see path strings. Where: only
 * beneath the destination. Its root is a read-only tmpfs that holds
 * nothing but /dest, Landlock allows nothing outside dest, and it is an
 * unprivileged uid of its own without capabilities, so no host file is in
 * its reach by any path. It can fill the destination (within the timeout;
 * RLIMIT_FSIZE bounds each file), write and ftruncate what it created, read
 * the image (opened read-only: its writes fail), and write the report and
 * its stderr, two pipes the parent reads with bounds. It cannot open an
 * existing file other than a directory (O_DIRECTORY), read directories (no
 * getdents), exec, map executable memory, signal, fork, or use the
 * network. */
int artifacts_sandbox_filter(void)
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
	/* File contents and report lines; on fd 2, what the sanitizers or a
	 * library say: a pipe now, so nothing of vmrun's is written. */
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
	 * copied (no unlink: that would let a hijacked helper delete). On its
	 * other fds (pipes, /dev/null, the read-only image) it fails. */
	rc |= ALLOW(ftruncate, 0);
	/* Memory for malloc (brk; mmap, mremap and munmap for big blocks),
	 * never executable; madvise for allocators returning freed pages
	 * (ASan's does so periodically). */
	rc |= ALLOW(brk, 0);
	rc |= ALLOW(mmap, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	rc |= ALLOW(munmap, 0);
	rc |= ALLOW(mremap, 0);
	/* A helper forked from a thread of a many-threaded parent (a
	 * sandbox's diff, asked over its API) allocates from that thread's
	 * malloc arena, whose heap grows by mprotect of memory it reserved:
	 * allowed, never to make anything executable. */
	rc |= ALLOW(mprotect, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
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
