/* The proxy's own jail (sandbox.h). */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <linux/capability.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "errmsg.h"

/* Rootless: a user namespace mapping our own ids, where chroot is ours. */
static int own_namespace(char *err, size_t errlen)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	if (unshare(CLONE_NEWUSER) < 0)
		return errf(err, errlen, "proxy: unshare(CLONE_NEWUSER): %s", strerror(errno));
	char map[64];
	struct {
		const char *path, *text;
	} w[3] = { { "/proc/self/setgroups", "deny" }, { "/proc/self/uid_map", NULL }, { "/proc/self/gid_map", NULL } };
	char um[32], gm[32];
	snprintf(um, sizeof(um), "%u %u 1", (unsigned)uid, (unsigned)uid);
	snprintf(gm, sizeof(gm), "%u %u 1", (unsigned)gid, (unsigned)gid);
	w[1].text = um;
	w[2].text = gm;
	for (int i = 0; i < 3; i++) {
		int fd = open(w[i].path, O_WRONLY | O_CLOEXEC);
		snprintf(map, sizeof(map), "%s", w[i].text);
		if (fd < 0 || write(fd, map, strlen(map)) != (ssize_t)strlen(map)) {
			int e = errno;
			if (fd >= 0)
				close(fd);
			return errf(err, errlen, "proxy: %s: %s", w[i].path, strerror(e));
		}
		close(fd);
	}
	return 0;
}

static int limits(const struct proxy_config *c, char *err, size_t errlen)
{
	/* each tunnel holds two sockets; the rest: the two given, stderr,
	 * the resolver's sockets */
	rlim_t files = 2 * (rlim_t)c->caps.tunnels + 32;
	struct {
		int res;
		rlim_t v;
		const char *name;
	} l[] = { { RLIMIT_NOFILE, files, "RLIMIT_NOFILE" }, { RLIMIT_FSIZE, 0, "RLIMIT_FSIZE" },
		  { RLIMIT_CORE, 0, "RLIMIT_CORE" } };
	for (size_t i = 0; i < sizeof(l) / sizeof(l[0]); i++) {
		struct rlimit r = { l[i].v, l[i].v };
		if (setrlimit(l[i].res, &r) < 0)
			return errf(err, errlen, "proxy: %s: %s", l[i].name, strerror(errno));
	}
	return 0;
}

static int drop_ids(const struct proxy_config *c, char *err, size_t errlen)
{
	if (setgroups(0, NULL) < 0 || setresgid(c->gid, c->gid, c->gid) < 0 || setresuid(c->uid, c->uid, c->uid) < 0)
		return errf(err, errlen, "proxy: becoming uid %u: %s", (unsigned)c->uid, strerror(errno));
	return 0;
}

/* Where the proxy may connect to is checked in userspace, twice: by
 * net_decide, and by the dial guard (dial_guard.h) on the exact socket
 * address right before connect(). No kernel rule backs it, because none
 * that fits is to be had:
 *   seccomp      sees connect()'s sockaddr only as a pointer; it cannot
 *                read the address (and user notification would be racy
 *                against the proxy's own threads' writes, and slow)
 *   Landlock     network rules need Linux 6.7 (ABI 4; Debian 12 runs
 *                6.1) and match TCP ports only, not addresses: loopback
 *                on 443 stays open
 *   cgroup BPF   connect4/connect6 programs can judge the address, but
 *                need root (CAP_BPF and CAP_NET_ADMIN) to load and attach,
 *                a cgroup of the proxy's own (rootless runs may have none
 *                delegated), and a BPF loader this project does not have
 *   nftables     "meta skuid" rules would judge the reserved uid, but
 *                they change the host's firewall for every run
 * The DNS queries (c-ares) go to the servers the policy names, which may
 * well be on loopback (127.0.0.53), so a kernel rule would also have to
 * make an exception for them. */
#define ALLOW(name) { SCMP_SYS(name), SCMP_ACT_ALLOW }
#define REFUSE(name) { SCMP_SYS(name), SCMP_ACT_ERRNO(EACCES) }

/* The filter. Each rule's reason:
 *   read write readv writev recvfrom recvmsg sendto sendmsg  the tunnels,
 *       the control socket, the resolver's queries, stderr
 *   accept4 connect shutdown getsockopt setsockopt getsockname
 *       getpeername  taking guest connections, dialing, half-close,
 *       a dial's result (SO_ERROR); c-ares sets socket options
 *   poll ppoll  the event loop and the resolver's waits
 *   close fcntl  descriptors; non-blocking mode (c-ares)
 *   ioctl  FIONBIO and FIONREAD only: c-ares's non-blocking mode, a
 *       datagram's size
 *   socket  IPv4 and IPv6 only: dialing and DNS; no Unix, no netlink,
 *       no packet sockets
 *   clock_gettime gettimeofday  deadlines (the vDSO's fallback)
 *   brk mmap munmap mremap madvise  malloc
 *   futex  libc's locks
 *   getrandom  c-ares's query ids
 *   rt_sigreturn rt_sigprocmask exit exit_group  ending cleanly
 *   getpid  OpenSSL's fork check
 *   openat newfstatat fstat lseek  refused, not fatal: stdio and the
 *       libraries may look for a file; there is none to be had */
static int filter(char *err, size_t errlen)
{
	struct {
		int nr;
		uint32_t act;
	} rules[] = {
		ALLOW(read), ALLOW(write), ALLOW(readv), ALLOW(writev), ALLOW(recvfrom), ALLOW(recvmsg), ALLOW(sendto),
		ALLOW(sendmsg), ALLOW(accept4), ALLOW(connect), ALLOW(shutdown), ALLOW(getsockopt), ALLOW(setsockopt),
		ALLOW(getsockname), ALLOW(getpeername), ALLOW(poll), ALLOW(ppoll), ALLOW(close), ALLOW(fcntl),
		ALLOW(clock_gettime), ALLOW(gettimeofday), ALLOW(brk), ALLOW(mmap), ALLOW(munmap), ALLOW(mremap),
		ALLOW(madvise), ALLOW(futex), ALLOW(getrandom), ALLOW(rt_sigreturn), ALLOW(rt_sigprocmask), ALLOW(getpid),
		ALLOW(exit), ALLOW(exit_group), REFUSE(openat), REFUSE(newfstatat), REFUSE(fstat), REFUSE(lseek),
	};
	scmp_filter_ctx f = seccomp_init(SCMP_ACT_KILL_PROCESS);
	if (!f)
		return errf(err, errlen, "proxy: seccomp_init failed");
	int rc = 0;
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]) && !rc; i++)
		rc = seccomp_rule_add(f, rules[i].act, rules[i].nr, 0);
	if (!rc)
		rc = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, AF_INET));
	if (!rc)
		rc = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, AF_INET6));
	if (!rc)
		rc = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_EQ, FIONBIO));
	if (!rc)
		rc = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_EQ, FIONREAD));
	if (!rc)
		rc = seccomp_load(f);
	seccomp_release(f);
	return rc ? errf(err, errlen, "proxy: seccomp: %s", strerror(-rc)) : 0;
}

int proxy_sandbox(const char *root, const struct proxy_config *c, char *err, size_t errlen)
{
	bool as_root = geteuid() == 0;
	if (!as_root && own_namespace(err, errlen) < 0)
		return -1;
	if (chroot(root) < 0 || chdir("/") < 0)
		return errf(err, errlen, "proxy: chroot %.200s: %s", root, strerror(errno));
	if (limits(c, err, errlen) < 0)
		return -1;
	if (as_root) {
		if (!c->set_ids)
			return errf(err, errlen, "proxy: running as root, and no ids to become");
		if (drop_ids(c, err, errlen) < 0)
			return -1;
	}
	/* rootless: the user namespace gave us every capability in it */
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct none[2] = { { 0, 0, 0 }, { 0, 0, 0 } };
	if (syscall(SYS_capset, &h, none) < 0)
		return errf(err, errlen, "proxy: capset: %s", strerror(errno));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return errf(err, errlen, "proxy: prctl: %s", strerror(errno));
	return filter(err, errlen);
}
