/* The caller's rights (issue 38): what root acting for a sudo caller opens
 * as that caller holds no capability, so another root process's
 * /proc/PID/maps and /proc/PID/root stay closed, also behind a symlink
 * and in the workspace walk (caller_enter); the /proc links are refused
 * by name too; and the run directory's parent is used only when no part
 * of its path is the caller's to change (finding 5).
 *
 * As root (the sudo case, and CI's) every test runs in full; as anyone
 * else, the parts that need root are replaced by what an unprivileged
 * caller can check (the name check, an own process's links), never
 * skipped. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caller.h"

#define NOBODY 65534

/* sudo's nobody, as caller_identify makes it from SUDO_UID/SUDO_GID. */
static struct caller sudo_nobody(void)
{
	struct caller c = { .uid = NOBODY, .gid = NOBODY, .ngroups = 1, .switch_ids = true, .via_sudo = true };
	c.groups[0] = NOBODY;
	return c;
}

/* This thread's effective capabilities (the low 64 bits). */
static uint64_t effective(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	assert_int_equal(syscall(SYS_capget, &h, d), 0);
	return d[0].effective | (uint64_t)d[1].effective << 32;
}

/* A process of ours that waits to be killed: a root one when we are root. */
static pid_t sleeper(void)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);   /* a failed assertion leaves no sleeper behind */
		pause();
		_exit(0);
	}
	return pid;
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void scratch(char *dir, size_t len)
{
	snprintf(dir, len, "/tmp/test_caller.XXXXXX");
	assert_non_null(mkdtemp(dir));
	assert_int_equal(chmod(dir, 0755), 0);
}

static void remove_tree(const char *dir)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* caller_open of path for c: -1, whatever the reason, else fail. */
static void assert_closed(const struct caller *c, const char *path, int flags)
{
	int fd = caller_open(c, path, flags);
	if (fd >= 0) {
		close(fd);
		fail_msg("%s opened for uid %u", path, (unsigned)c->uid);
	}
}

/* Finding 2: another root process's memory map and mount namespace, for
 * sudo's nobody, by caller_open and by the workspace walk's caller_enter.
 * Root itself can open them (the premise), so only the capabilities
 * dropped for the caller close them. */
static void no_capability_as_the_caller(void **state)
{
	(void)state;
	if (geteuid() != 0)
		return;   /* covered as anyone else by own_links_refused_by_name */
	pid_t pid = sleeper();
	char maps[64], root_etc[64], dir[64], link[128], via_link[160];
	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	snprintf(root_etc, sizeof(root_etc), "/proc/%d/root/etc", (int)pid);
	scratch(dir, sizeof(dir));
	snprintf(link, sizeof(link), "%s/into", dir);
	snprintf(via_link, sizeof(via_link), "%s/etc", link);
	char target[64];
	snprintf(target, sizeof(target), "/proc/%d/root", (int)pid);
	assert_int_equal(symlink(target, link), 0);

	int fd = open(maps, O_RDONLY | O_CLOEXEC);   /* root may */
	assert_true(fd >= 0);
	close(fd);

	uint64_t before = effective();
	struct caller c = sudo_nobody();
	assert_closed(&c, maps, O_RDONLY);
	assert_closed(&c, root_etc, O_RDONLY | O_DIRECTORY);
	assert_closed(&c, via_link, O_RDONLY | O_DIRECTORY);

	/* The workspace walk's way: caller_enter around openat. */
	struct caller_saved s;
	assert_int_equal(caller_enter(&c, &s), 0);
	assert_true(effective() == 0);
	fd = openat(AT_FDCWD, maps, O_RDONLY | O_CLOEXEC);
	int e = errno;
	caller_leave(&s);
	if (fd >= 0)
		close(fd);
	assert_int_equal(fd, -1);
	assert_true(e == EACCES || e == EPERM);

	/* root's capabilities are back, and what the caller may read opens */
	assert_true(effective() == before);
	fd = open(maps, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	close(fd);
	char mine[96];
	snprintf(mine, sizeof(mine), "%s/readable", dir);
	fd = open(mine, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	fd = caller_open(&c, mine, O_RDONLY);
	assert_true(fd >= 0);
	close(fd);
	reap(pid);
	remove_tree(dir);
}

/* The belt: /proc/PID/root, cwd and fd refused by name, however spelled,
 * and nothing else of /proc or elsewhere. */
static void proc_links_by_name(void **state)
{
	(void)state;
	const char *refused[] = {
		"/proc/1/root", "/proc/1/root/etc", "/proc/1/cwd", "/proc/1/fd/3", "/proc/self/root/etc/passwd",
		"/proc/thread-self/cwd/x", "/proc/self/fd", "/proc/1/task/1/root/", "/proc/self/task/77/fd/0",
		"//proc//1//root", "/proc/./1/./root", "/proc/1/../1/root", "/proc/1/root/..", "proc/1/cwd",
		"/a/../proc/1/root/etc", "/mnt/proc/1/root",
	};
	const char *fine[] = {
		"/proc/1/maps", "/proc/self/status", "/proc/1/fdinfo/3", "/proc/1/rootx", "/proc/x1/root",
		"/proc/1/task/root", "/home/u/proc/files/root", "/proc", "/proc/1", "/dev/stdin", "root", "",
		"/proc/1/task/1/maps",
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (!caller_proc_link(refused[i]))
			fail_msg("%s not refused", refused[i]);
	for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++)
		if (caller_proc_link(fine[i]))
			fail_msg("%s refused", fine[i]);
	/* relative to where we are */
	char cwd[PATH_MAX];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir("/proc/self"), 0);
	bool under_proc = caller_path_refused("root/etc") && caller_path_refused("fd") && !caller_path_refused("maps");
	assert_int_equal(chdir(cwd), 0);
	assert_true(under_proc);
	/* and caller_open refuses them for anyone, before any open */
	struct caller self = { .uid = getuid(), .gid = getgid() };
	errno = 0;
	assert_int_equal(caller_open(&self, "/proc/self/root/etc", O_RDONLY | O_DIRECTORY), -1);
	assert_int_equal(errno, EACCES);
	errno = 0;
	assert_int_equal(caller_mkdir(&self, "/proc/self/cwd/new"), -1);
	assert_int_equal(errno, EACCES);
}

/* Not root: our own process's links would open for us (same uid), so
 * only the name check holds them. */
static void own_links_refused_by_name(void **state)
{
	(void)state;
	pid_t pid = sleeper();
	char maps[64], root[64];
	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	snprintf(root, sizeof(root), "/proc/%d/root/", (int)pid);
	struct caller self = { .uid = getuid(), .gid = getgid() };
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);   /* the kernel lets us */
	assert_true(fd >= 0);
	close(fd);
	assert_closed(&self, root, O_RDONLY | O_DIRECTORY);
	fd = caller_open(&self, maps, O_RDONLY);   /* not a link: ours to read */
	assert_true(fd >= 0);
	close(fd);
	reap(pid);
}

/* Finding 5: acting for a sudo caller, $TMPDIR is used only when every
 * directory on its path is root's and closed to others (or sticky), and
 * only as it resolved then. */
static void work_dir_every_component(void **state)
{
	(void)state;
	char dir[64], theirs[96], tmp_in_theirs[128], good[96], good_tmp[128], link[96], grp[96], grp_tmp[128];
	char resolved[PATH_MAX], err[512], real[PATH_MAX];
	scratch(dir, sizeof(dir));
	snprintf(theirs, sizeof(theirs), "%s/theirs", dir);
	snprintf(tmp_in_theirs, sizeof(tmp_in_theirs), "%s/tmp", theirs);
	snprintf(good, sizeof(good), "%s/good", dir);
	snprintf(good_tmp, sizeof(good_tmp), "%s/tmp", good);
	snprintf(grp, sizeof(grp), "%s/grp", dir);
	snprintf(grp_tmp, sizeof(grp_tmp), "%s/tmp", grp);
	snprintf(link, sizeof(link), "%s/link", dir);
	assert_int_equal(mkdir(theirs, 0755), 0);
	assert_int_equal(mkdir(tmp_in_theirs, 01777), 0);
	assert_int_equal(mkdir(good, 0755), 0);
	assert_int_equal(mkdir(good_tmp, 01777), 0);
	assert_int_equal(mkdir(grp, 0775), 0);
	assert_int_equal(mkdir(grp_tmp, 0755), 0);
	assert_int_equal(chmod(tmp_in_theirs, 01777), 0);   /* past the umask */
	assert_int_equal(chmod(good_tmp, 01777), 0);
	assert_int_equal(chmod(grp, 0775), 0);
	assert_non_null(realpath(good_tmp, real));

	struct caller c = sudo_nobody();
	if (geteuid() != 0) {
		/* Not root: nobody to act for; the path still resolves once. */
		memset(&c, 0, sizeof(c));
		c.uid = getuid();
		c.gid = getgid();
	}
	int fd = caller_work_dir(&c, good_tmp, resolved, sizeof(resolved), err, sizeof(err));
	if (fd < 0)
		fail_msg("%s refused: %s", good_tmp, err);
	close(fd);
	assert_string_equal(resolved, real);
	/* A symlink to it resolves once: what swapping the link does later
	 * cannot move the run directory. */
	assert_int_equal(symlink(good_tmp, link), 0);
	fd = caller_work_dir(&c, link, resolved, sizeof(resolved), err, sizeof(err));
	if (fd < 0)
		fail_msg("%s refused: %s", link, err);
	close(fd);
	assert_string_equal(resolved, real);
	assert_int_equal(unlink(link), 0);
	if (geteuid() != 0) {
		remove_tree(dir);
		return;
	}

	/* Root's and sticky itself, but under a directory of the caller's:
	 * they could rename the parent and put their own in its place. */
	assert_int_equal(chown(theirs, NOBODY, NOBODY), 0);
	assert_int_equal(caller_work_dir(&c, tmp_in_theirs, resolved, sizeof(resolved), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "theirs"));
	/* the same through a symlink */
	assert_int_equal(symlink(tmp_in_theirs, link), 0);
	assert_int_equal(caller_work_dir(&c, link, resolved, sizeof(resolved), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "theirs"));
	/* and under a group-writable (not sticky) directory of root's */
	assert_int_equal(caller_work_dir(&c, grp_tmp, resolved, sizeof(resolved), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "grp"));
	/* Root for itself may work anywhere it likes. */
	struct caller self = { .uid = 0, .gid = 0 };
	fd = caller_work_dir(&self, tmp_in_theirs, resolved, sizeof(resolved), err, sizeof(err));
	if (fd < 0)
		fail_msg("root refused %s: %s", tmp_in_theirs, err);
	close(fd);
	remove_tree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(proc_links_by_name),
		cmocka_unit_test(own_links_refused_by_name),
		cmocka_unit_test(no_capability_as_the_caller),
		cmocka_unit_test(work_dir_every_component),
	};
	return cmocka_run_group_tests(tests, 0, NULL);
}
