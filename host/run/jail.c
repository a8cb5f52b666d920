#include "jail.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "errmsg.h"
#include "jail_cgroup.h"
#include "sysfile.h"

#define CHILD_STACK  (256 * 1024)

static int draw_getrandom(void *ctx, uint32_t *r)
{
	(void)ctx;
	return getrandom(r, sizeof(*r), 0) == (ssize_t)sizeof(*r) ? 0 : -1;
}

/* The reservations live in a directory only root (vmrun) may write, so no
 * run, nor anything it left behind, can hold or forge another's uid. */
static int uid_dir_ready(const char *dir, char *err, size_t errlen)
{
	if (!strcmp(dir, JAIL_UID_DIR) && mkdir("/run/vmrun", 0755) < 0 && errno != EEXIST)
		return errf(err, errlen, "jail: /run/vmrun: %s", strerror(errno));
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return errf(err, errlen, "jail: %s: %s", dir, strerror(errno));
	struct stat st;
	if (lstat(dir, &st) < 0)
		return errf(err, errlen, "jail: %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return errf(err, errlen, "jail: %s must be a directory of uid %u writable by it alone", dir,
			    (unsigned)geteuid());
	return 0;
}

/* Lock path for uid: 1 when held (fd returned in *fd), 0 when another run
 * holds it, -1 on error. A holder unlinks its file before closing it, so a
 * lock won on a file no longer at path is no reservation: it counts as
 * taken. */
static int uid_try(const char *path, int *fd)
{
	*fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (*fd < 0)
		return -1;
	struct stat held, now;
	if (flock(*fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		close(*fd);
		errno = e;
		return e == EWOULDBLOCK ? 0 : -1;
	}
	if (fstat(*fd, &held) == 0 && stat(path, &now) == 0 && held.st_dev == now.st_dev &&
	    held.st_ino == now.st_ino)
		return 1;
	close(*fd);
	return 0;
}

int jail_reserve_uid(const struct jail_spec *s, struct jail *j, char *err, size_t errlen)
{
	const char *dir = s->uid_dir ? s->uid_dir : JAIL_UID_DIR;
	jail_draw_fn draw = s->draw ? s->draw : draw_getrandom;
	if (uid_dir_ready(dir, err, errlen))
		return -1;
	for (unsigned i = 0; i < JAIL_UID_TRIES; i++) {
		uint32_t r;
		if (draw(s->draw_ctx, &r) < 0)
			return errf(err, errlen, "jail: drawing a uid: %s", strerror(errno));
		uid_t uid = JAIL_ID_BASE + r % JAIL_ID_COUNT;
		int n = snprintf(j->uid_lock, sizeof(j->uid_lock), "%s/%u", dir, (unsigned)uid);
		if (n < 0 || (size_t)n >= sizeof(j->uid_lock))
			return errf(err, errlen, "jail: %s: path too long", dir);
		int fd, got = uid_try(j->uid_lock, &fd);
		if (got < 0)
			return errf(err, errlen, "jail: %s: %s", j->uid_lock, strerror(errno));
		if (got) {
			j->uid = uid;
			j->uid_fd = fd;
			j->uid_held = true;
			return 0;
		}
	}
	j->uid_lock[0] = '\0';
	return errf(err, errlen, "jail: no free uid after %u tries (runs hold them under %s)", JAIL_UID_TRIES,
		    dir);
}

void jail_release_uid(struct jail *j)
{
	if (!j->uid_held)
		return;
	/* Unlink before unlocking: a run that locks the file after this finds
	 * it gone from the directory and draws again. */
	unlink(j->uid_lock);
	close(j->uid_fd);
	j->uid_held = false;
	j->uid_lock[0] = '\0';
}

int jail_prepare(const struct jail_spec *s, struct jail *j, char *err, size_t errlen)
{
	memset(j, 0, sizeof(*j));
	j->uid_fd = -1;
	snprintf(j->root, sizeof(j->root), "%s/root", s->run_dir);
	if (geteuid() != 0) {
		/* Rootless: there are no ids to hand out, so vmm keeps ours,
		 * mapped to itself in a user namespace of its own. */
		j->rootless = true;
		j->uid = getuid();
		j->gid = getgid();
	} else {
		/* One id for both: nothing on the host owns ids in this range,
		 * so the jailed vmm can reach nothing but what is handed to it
		 * here. */
		if (jail_reserve_uid(s, j, err, errlen))
			return -1;
		j->gid = j->uid;
	}
	if (mkdir(j->root, 0755) < 0) {
		j->root[0] = '\0';
		return errf(err, errlen, "jail: %s: %s", s->run_dir, strerror(errno));
	}
	if (!j->rootless && ((s->snapshot && s->snapshot_rw && chown(s->snapshot, j->uid, j->gid) < 0) ||
			     chown(s->sock_dir, j->uid, j->gid) < 0))
		return errf(err, errlen, "jail: giving the run's files to uid %u: %s", j->uid, strerror(errno));
	return 0;
}

uint64_t jail_fsize_limit(const struct jail_spec *s)
{
	uint64_t mib = s->disk_mib;
	if (s->snapshot && s->snapshot_rw && s->memory_mib > mib)
		mib = s->memory_mib;
	/* a pause's pages file: every page of the guest's at most, with its
	 * 8-byte index entry */
	if (s->may_pause && s->memory_mib + s->memory_mib / 512 + 1 > mib)
		mib = s->memory_mib + s->memory_mib / 512 + 1;
	return (mib + 16) << 20;
}

void jail_cleanup(struct jail *j)
{
	jail_cgroup_remove(j);
	if (j->root[0]) {
		const char *names[] = { JAIL_VMM, JAIL_KERNEL, JAIL_ROOTFS, JAIL_IMAGE };
		char path[PATH_MAX + 32];
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			snprintf(path, sizeof(path), "%s%s", j->root, names[i]);
			unlink(path);
		}
		const char *dirs[] = { JAIL_RUN, JAIL_SNAPSHOT };
		for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
			snprintf(path, sizeof(path), "%s%s", j->root, dirs[i]);
			rmdir(path);
		}
		rmdir(j->root);
		j->root[0] = '\0';
	}
	/* Last: the uid is free only once nothing of the run can still use it. */
	jail_release_uid(j);
}

/* ---- the child -------------------------------------------------------------- */

struct child_args {
	const struct jail_spec *s;
	struct jail *j;
	int kvm_fd;
	int sync_fd;   /* rootless: a byte here once the parent set up our ids and cgroup */
	int sync_wr;   /* its other end, the parent's: closed at once */
	/* Where the kernel and root image fds were opened, as the parent's
	 * mount namespace names them (the child's could not). */
	char kernel[PATH_MAX], rootfs[PATH_MAX];
};

/* The child runs after a raw clone of a process that may have other
 * threads (vmrund): glibc's locks may be held by threads that are not
 * there, so it formats on the stack, writes with write(2), and makes the
 * id changes as raw system calls (glibc's would wait for every thread). */
static void say(int fd, const char *text)
{
	size_t n = strlen(text);
	while (n) {
		ssize_t k = write(fd, text, n);
		if (k <= 0)
			return;
		text += k;
		n -= (size_t)k;
	}
}

static int die(int fd, const char *what)
{
	char line[512];
	const char *why = strerrordesc_np(errno);   /* no locale: no lock */
	snprintf(line, sizeof(line), "vmrun-jail: %s: %s\n", what, why ? why : "unknown error");
	say(fd, line);
	return 1;
}

/* The flags a remount of the bind at path must keep: in a user namespace
 * the kernel refuses to clear what the source's mount locked (noexec,
 * the atime mode, ...). */
static unsigned long kept_flags(const char *path)
{
	struct statvfs v;
	if (statvfs(path, &v) < 0)
		return 0;
	struct { unsigned long st, ms; } map[] = {
		{ ST_RDONLY, MS_RDONLY }, { ST_NOEXEC, MS_NOEXEC }, { ST_NOATIME, MS_NOATIME },
		{ ST_NODIRATIME, MS_NODIRATIME }, { ST_RELATIME, MS_RELATIME },
	};
	unsigned long ms = 0;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (v.f_flag & map[i].st)
			ms |= map[i].ms;
	return ms;
}

/* Bind src onto root/name (created empty: a file, or a directory when dir);
 * read-only unless rw, never executable unless exec. Never follows a link
 * at the target. */
static int bind_into(const char *root, const char *name, const char *src, bool dir, bool rw, bool exec)
{
	char dst[PATH_MAX + 32];
	snprintf(dst, sizeof(dst), "%s%s", root, name);
	/* a paused sandbox's jail starts its vmm again: the mount points are there */
	if ((dir ? mkdir(dst, 0755) < 0 : mknod(dst, S_IFREG | 0644, 0) < 0) && errno != EEXIST)
		return -1;
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		return -1;
	unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | (rw ? 0 : MS_RDONLY) |
			      (exec ? 0 : MS_NOEXEC) | kept_flags(dst);
	return mount(NULL, dst, NULL, flags, NULL);
}

/* The path fd was opened by, as this mount namespace names it; 0 or -1. */
static int fd_path(int fd, char *path, size_t len)
{
	char link[32];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, len - 1);
	if (n < 0 || (size_t)n >= len - 1)
		return -1;
	path[n] = '\0';
	return 0;
}

/* Bind the file open as fd (read-only, not executable) onto root/name. A
 * mount cannot be bound from an fd of another mount namespace, so the path
 * the parent found for the fd is bound instead, then checked to be the
 * very file of the fd: the caller could open that one, and a path swapped
 * since then is refused. */
static int bind_fd_into(const char *root, const char *name, int fd, const char *path)
{
	char dst[PATH_MAX + 32];
	if (bind_into(root, name, path, false, false, false) < 0)
		return -1;
	struct stat want, got;
	snprintf(dst, sizeof(dst), "%s%s", root, name);
	if (fstat(fd, &want) < 0 || stat(dst, &got) < 0)
		return -1;
	if (want.st_dev != got.st_dev || want.st_ino != got.st_ino) {
		errno = ESTALE;   /* "changed since it was opened" */
		return -1;
	}
	return 0;
}

static int child(void *arg)
{
	struct child_args *a = arg;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	const struct jail_spec *s = a->s;
	const struct jail *j = a->j;
	int efd = s->stderr_fd;
	char path[PATH_MAX + 32];
	/* The supervisor may block signals it takes through a signalfd;
	 * vmm gets none of that. */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (a->sync_wr >= 0)
		close(a->sync_wr);   /* else a parent gone early would never be noticed */
	if (j->rootless) {
		/* The parent maps our ids and moves us into the cgroup from
		 * outside; nothing runs here before it is done. */
		char go;
		if (read(a->sync_fd, &go, 1) != 1)
			return die(efd, "waiting for the user namespace's ids");
		close(a->sync_fd);
	} else {
		/* Into the run's cgroup before anything else runs here. */
		snprintf(path, sizeof(path), "%s/cgroup.procs", j->cgroup);
		if (sysfile_write(path, "0") < 0)
			return die(efd, "joining the cgroup");
	}
	if (j->cgroup_pids[0]) {
		snprintf(path, sizeof(path), "%s/cgroup.procs", j->cgroup_pids);
		if (sysfile_write(path, "0") < 0)
			return die(efd, "joining the pids cgroup");
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return die(efd, "making mounts private");
	if (sethostname("vmrun", 5) < 0)
		return die(efd, "sethostname");
	/* The root: a bind of the empty directory onto itself (pivot_root
	 * needs a mount point), then only what vmm needs. */
	int null = open("/dev/null", O_RDWR);   /* vmm's stdin and stdout; there is no /dev inside */
	if (null < 0)
		return die(efd, "/dev/null");
	if (mount(j->root, j->root, NULL, MS_BIND, NULL) < 0)
		return die(efd, "binding the jail root");
	if (bind_into(j->root, JAIL_VMM, s->vmm, false, false, true) < 0)
		return die(efd, "binding " JAIL_VMM);
	if (bind_fd_into(j->root, JAIL_KERNEL, s->kernel_fd, a->kernel) < 0)
		return die(efd, "binding the kernel as " JAIL_KERNEL);
	if (bind_fd_into(j->root, JAIL_ROOTFS, s->rootfs_fd, a->rootfs) < 0)
		return die(efd, "binding the root image as " JAIL_ROOTFS);
	if (s->image && bind_into(j->root, JAIL_IMAGE, s->image, false, true, false) < 0)
		return die(efd, "binding " JAIL_IMAGE);
	if (s->snapshot && bind_into(j->root, JAIL_SNAPSHOT, s->snapshot, true, s->snapshot_rw, false) < 0)
		return die(efd, "binding " JAIL_SNAPSHOT);
	if (bind_into(j->root, JAIL_RUN, s->sock_dir, true, true, false) < 0)
		return die(efd, "binding " JAIL_RUN);
	/* The vmm binary must stay executable: its mount lacks only nosuid
	 * and nodev. */
	if (chdir(j->root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 ||
	    chdir("/") < 0)
		return die(efd, "pivot_root");
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | kept_flags("/"), NULL) < 0)
		return die(efd, "making the jail root read-only");
	struct { int res; rlim_t v; } lim[] = {
		{ RLIMIT_NOFILE, 256 },   /* vsock's 64 connections, queues, KVM fds */
		{ RLIMIT_FSIZE, jail_fsize_limit(s) },   /* the image (or snapshot), the console */
		{ RLIMIT_NPROC, s->cpus + JAIL_PIDS_EXTRA },
		{ RLIMIT_CORE, 0 },
		{ RLIMIT_MEMLOCK, 0 },
	};
	for (size_t i = 0; i < sizeof(lim) / sizeof(lim[0]); i++) {
		struct rlimit rl = { lim[i].v, lim[i].v };
		if (setrlimit(lim[i].res, &rl) < 0)
			return die(efd, "setrlimit");
	}
	/* Rootless, setgroups is denied in the namespace (so that no group
	 * can be shed to gain access), and the caller's groups stay. */
	if ((!j->rootless && syscall(SYS_setgroups, 0, NULL) < 0) ||
	    syscall(SYS_setresgid, j->gid, j->gid, j->gid) < 0 || syscall(SYS_setresuid, j->uid, j->uid, j->uid) < 0)
		return die(efd, "dropping to the run's uid");
	/* vmm dies with the thread that started it (set after the uid change,
	 * which clears it); the cgroup kill is the rule, this the backstop. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		return die(efd, "PR_SET_PDEATHSIG");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return die(efd, "no_new_privs");
	if (dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(efd, 2) < 0 || dup2(a->kvm_fd, JAIL_KVM_FD) < 0)
		return die(efd, "dup2");
	/* Nothing else crosses into vmm. */
	if (syscall(SYS_close_range, JAIL_KVM_FD + 1, ~0U, 0) < 0)
		for (int fd = JAIL_KVM_FD + 1; fd < 1024; fd++)
			close(fd);
	/* The jail's own cost, for `vmrun -v` and the benchmark. */
	clock_gettime(CLOCK_MONOTONIC, &t1);
	char ready[64];
	snprintf(ready, sizeof(ready), JAIL_READY_PREFIX "%ld us\n",
		 (long)((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000));
	say(2, ready);
	char *envp[] = { NULL };
	execve(JAIL_VMM, s->argv, envp);
	return die(2, "exec " JAIL_VMM);
}

/* Rootless, from outside the child's new user namespace: map its ids to
 * ours (one each, the only mapping an unprivileged process may write, so
 * setgroups must be denied first), move it into the cgroup, let it go.
 * Takes go_fd. */
static int rootless_setup(struct jail *j, int go_fd, char *err, size_t errlen)
{
	char path[64], map[64];
	int rc = -1;
	struct { const char *file; unsigned id; } w[] = { { "setgroups", 0 }, { "uid_map", j->uid }, { "gid_map", j->gid } };
	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)j->pid, w[i].file);
		if (i == 0)
			snprintf(map, sizeof(map), "deny");
		else
			snprintf(map, sizeof(map), "%u %u 1", w[i].id, w[i].id);
		if (sysfile_write(path, map) < 0) {
			errf(err, errlen, "jail: %s: %s", path, strerror(errno));
			goto out;
		}
	}
	if (j->cgroup_version) {
		char procs[PATH_MAX + 32], pid[24];
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", j->cgroup);
		snprintf(pid, sizeof(pid), "%d", (int)j->pid);
		if (sysfile_write(procs, pid) < 0) {
			errf(err, errlen, "jail: moving vmm into %s: %s", j->cgroup, strerror(errno));
			goto out;
		}
	}
	if (write(go_fd, "", 1) != 1) {
		errf(err, errlen, "jail: starting vmm: %s", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	close(go_fd);
	return rc;
}

int jail_start(const struct jail_spec *s, struct jail *j, char *err, size_t errlen)
{
	if (jail_cgroup_create(s, j, err, errlen))
		return -1;
	if (!j->rootless && s->image && chown(s->image, j->uid, j->gid) < 0)
		return errf(err, errlen, "jail: giving the workspace image to uid %u: %s", j->uid, strerror(errno));
	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		return errf(err, errlen, "/dev/kvm: %s", strerror(errno));
	char *stack = malloc(CHILD_STACK);
	if (!stack) {
		close(kvm);
		return errf(err, errlen, "jail: out of memory");
	}
	int sync[2] = { -1, -1 };
	if (j->rootless && pipe2(sync, O_CLOEXEC) < 0) {
		free(stack);
		close(kvm);
		return errf(err, errlen, "jail: pipe: %s", strerror(errno));
	}
	struct child_args *a = calloc(1, sizeof(*a));
	if (!a || fd_path(s->kernel_fd, a->kernel, sizeof(a->kernel)) < 0 ||
	    fd_path(s->rootfs_fd, a->rootfs, sizeof(a->rootfs)) < 0) {
		int e = a ? errno : ENOMEM;
		free(a);
		free(stack);
		close(kvm);
		if (sync[0] >= 0) {
			close(sync[0]);
			close(sync[1]);
		}
		return errf(err, errlen, "jail: the kernel's or root image's path: %s", strerror(e));
	}
	a->s = s;
	a->j = j;
	a->kvm_fd = kvm;
	a->sync_fd = sync[0];
	a->sync_wr = sync[1];
	int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET | SIGCHLD;
	j->pid = clone(child, stack + CHILD_STACK, flags | (j->rootless ? CLONE_NEWUSER : 0), a);
	int e = errno;
	free(a);
	free(stack);
	close(kvm);
	if (sync[0] >= 0)
		close(sync[0]);
	if (j->pid < 0) {
		if (sync[1] >= 0)
			close(sync[1]);
		return errf(err, errlen, "jail: clone: %s%s", strerror(e),
			    e == EPERM && j->rootless ? " (unprivileged user namespaces are off on this host; "
							 "run as root)" :
			    e == EPERM ? " (vmrun needs root, or a rootless jail's user namespace; see docs/security.md)" : "");
	}
	if (j->rootless && rootless_setup(j, sync[1], err, errlen) < 0) {
		kill(j->pid, SIGKILL);
		while (waitpid(j->pid, NULL, 0) < 0 && errno == EINTR)
			;
		j->pid = -1;
		return -1;
	}
	return 0;
}
