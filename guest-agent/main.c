/* The guest agent as PID 1: bring up the guest's base filesystems (and
 * cgroup2 for per-stage memory limits, where the kernel has it), announce
 * readiness (where a snapshot is taken, when one is), mount the
 * workspace, connect to the host over vsock, serve one run (agent.c),
 * then sync, unmount the workspace and reset the VM. Whatever fails is
 * reported to the host as an ERROR frame when the connection exists, and
 * on the console otherwise; the VM is reset in every case, never left
 * hanging. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
/* After sys/socket.h: glibc's, unlike musl's, leaves struct sockaddr to it. */
#include <linux/vm_sockets.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "cgroup.h"
#include "proto.h"

/* /tmp is RAM: capped so a command cannot take the guest's memory with it. */
#define STR_(x) #x
#define STR(x) STR_(x)
/* A bare test boot has no workspace disk: an empty one in RAM. */
#define WORKSPACE_TMPFS "size=64m,mode=0755,uid=" STR(PROTO_SANDBOX_UID) ",gid=" STR(PROTO_SANDBOX_GID)
#define TMP_OPTIONS    "size=64m,mode=1777,nr_inodes=16k"
/* How long a workspace disk of no capacity is waited for, in 1 ms polls
 * (counted, not timed: a restored guest's clock may jump). */
#define WORKSPACE_WAIT_POLLS 5000
/* The kernel RNG the agent reseeds for each run. */
#define RANDOM_DEV     "/dev/urandom"
/* Whom commands run as. The test-only build (make's guest-agent-root,
 * never in a root image vmrun ships) keeps guest root, so the evaluation
 * can attack the devices as a compromised guest kernel would. */
#ifdef VMRUN_AGENT_GUEST_ROOT
#define RUN_UID ((uid_t)-1)
#define RUN_GID ((gid_t)-1)
#else
#define RUN_UID PROTO_SANDBOX_UID
#define RUN_GID PROTO_SANDBOX_GID
#endif

static void console(const char *fmt, const char *arg)
{
	fprintf(stderr, "vmrun-agent: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
}

/* The kernel's filesystems and /tmp: what is the same in every run, so
 * up before a snapshot is taken. Returns NULL, or what failed. */
static const char *mount_base(char *why, size_t len)
{
	struct { const char *src, *dst, *type; unsigned long flags; const char *data; } m[] = {
		{ "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL },
		{ "sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL },
		{ "devtmpfs", "/dev", "devtmpfs", MS_NOSUID | MS_NOEXEC, NULL },
		{ "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, TMP_OPTIONS },
	};
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		/* The kernel may have mounted devtmpfs already (DEVTMPFS_MOUNT). */
		if (mount(m[i].src, m[i].dst, m[i].type, m[i].flags, m[i].data) < 0 && errno != EBUSY) {
			snprintf(why, len, "mount %s: %s", m[i].dst, strerror(errno));
			return why;
		}
	/* terminals for the commands that ask for one (a sandbox's pty):
	 * /dev/ptmx opens the instance mounted at /dev/pts */
	if ((mkdir("/dev/pts", 0755) < 0 && errno != EEXIST) ||
	    (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "ptmxmode=0666,mode=0620") < 0 && errno != EBUSY)) {
		snprintf(why, len, "mount /dev/pts: %s", strerror(errno));
		return why;
	}
	return NULL;
}

/* Tell a vmm that takes a snapshot that the guest is ready: it takes it
 * while this connect is pending (PROTO_READY_VSOCK_PORT). In every other
 * boot, and in a guest restored from that snapshot, the connect is
 * refused or reset: the expected outcome, so nothing is printed, nothing
 * retried, and whatever connect says the agent goes on. */
static void announce_ready(void)
{
	struct sockaddr_vm a = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST, .svm_port = PROTO_READY_VSOCK_PORT };
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;   /* no vsock: connect_host says so */
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != ECONNRESET && errno != ECONNREFUSED &&
	    errno != ETIMEDOUT && errno != EINTR)
		console("announcing readiness: %s", strerror(errno));
	close(fd);
}

/* The disk's capacity in sectors from sysfs (path), or -1 with errno. */
static long long disk_sectors(const char *path)
{
	char buf[32];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int saved = errno;
	close(fd);
	if (n < 0) {
		errno = saved;
		return -1;
	}
	buf[n] = '\0';
	char *end;
	errno = 0;
	long long v = strtoll(buf, &end, 10);
	if (errno || end == buf || v < 0) {
		errno = EINVAL;
		return -1;
	}
	return v;
}

/* A guest restored from a snapshot gets its workspace disk from the vmm
 * just after the restore (a config-change interrupt), and its kernel
 * updates the disk's capacity asynchronously: until then the device is
 * there with no sectors. Wait for them. Returns NULL, or what failed. */
static const char *wait_workspace_capacity(char *why, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/sys/block/%s/size", strrchr(PROTO_WORKSPACE_DEV, '/') + 1);
	for (int i = 0; i < WORKSPACE_WAIT_POLLS; i++) {
		long long sectors = disk_sectors(path);
		if (sectors < 0) {
			snprintf(why, len, "reading %s: %s", path, strerror(errno));
			return why;
		}
		if (sectors > 0)
			return NULL;
		nanosleep(&(struct timespec){ 0, 1000 * 1000 }, NULL);
	}
	snprintf(why, len, "workspace disk %s has no capacity", PROTO_WORKSPACE_DEV);
	return why;
}

/* The run's workspace: its disk, else (a bare test boot, no disk) an
 * empty one in RAM. Returns NULL, or what failed. */
static const char *mount_workspace(bool *disk, char *why, size_t len)
{
	struct stat st;
	*disk = false;
	if (stat(PROTO_WORKSPACE_DEV, &st) < 0) {
		if (mount("tmpfs", PROTO_WORKSPACE_DIR, "tmpfs", MS_NOSUID | MS_NODEV, WORKSPACE_TMPFS) < 0) {
			snprintf(why, len, "mount tmpfs on %s: %s", PROTO_WORKSPACE_DIR, strerror(errno));
			return why;
		}
		return NULL;
	}
	if (wait_workspace_capacity(why, len))
		return why;
	if (mount(PROTO_WORKSPACE_DEV, PROTO_WORKSPACE_DIR, "ext4", MS_NOSUID | MS_NODEV, NULL) < 0) {
		snprintf(why, len, "mount %s on %s: %s", PROTO_WORKSPACE_DEV, PROTO_WORKSPACE_DIR, strerror(errno));
		return why;
	}
	*disk = true;
	return NULL;
}

static int connect_host(void)
{
	struct sockaddr_vm a = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST, .svm_port = PROTO_VSOCK_PORT };
	for (int attempt = 0; attempt < 20; attempt++) {
		int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			return fd;
		close(fd);
		/* The host listens before the VM starts; retry only briefly
		 * in case its socket is still being set up. */
		nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
	}
	return -1;
}

/* The guest kernel sends vsock data from a worker: make sure the host has
 * the last frame before the reset by waiting (briefly) for it to close. */
static void wait_host_close(int fd)
{
	char buf[256];
	shutdown(fd, SHUT_WR);
	struct pollfd p = { fd, POLLIN, 0 };
	while (poll(&p, 1, 2000) > 0 && read(fd, buf, sizeof(buf)) > 0)
		;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	char why[256], err[512], cgroup_why[256] = "not PID 1";
	const char *mount_err = mount_base(why, sizeof(why));
	bool disk = false;
	/* Without cgroup2 (an old kernel) everything but memory limits works:
	 * not an error until a request asks for one, so nothing on the console. */
	const char *cgroup_root = NULL;
	if (!mount_err && getpid() == 1 && cgroup_init(CGROUP_DIR, cgroup_why, sizeof(cgroup_why)) == 0)
		cgroup_root = CGROUP_DIR;
	/* Only a guest whose base is up is worth a snapshot: one that failed
	 * would fail every run restored from it. */
	if (!mount_err) {
		announce_ready();
		mount_err = mount_workspace(&disk, why, sizeof(why));
	}
	int fd = connect_host();
	if (fd < 0) {
		console("cannot reach the host over vsock: %s", strerror(errno));
	} else if (mount_err) {
		(void)proto_send(fd, PROTO_ERROR, mount_err, (uint32_t)strlen(mount_err));
		console("%s", mount_err);
	} else {
		const struct agent_config cfg = {
			.cwd = PROTO_WORKSPACE_DIR, .home = PROTO_WORKSPACE_DIR, .uid = RUN_UID, .gid = RUN_GID, .kill_all = true,
			.cgroup_root = cgroup_root, .cgroup_error = cgroup_root ? NULL : cgroup_why,
			.random_dev = RANDOM_DEV, .reconnect = connect_host,
			.freeze_dir = disk ? PROTO_WORKSPACE_DIR : NULL,
		};
		if (agent_session(fd, &cfg, err, sizeof(err)))
			console("%s", err);
	}
	if (fd >= 0)
		wait_host_close(fd);
	sync();
	if (umount2(PROTO_WORKSPACE_DIR, 0) < 0 && errno != EINVAL)
		console("unmounting the workspace: %s", strerror(errno));
	sync();
	if (fd >= 0)
		close(fd);
	reboot(RB_AUTOBOOT);   /* reboot=k: the VM resets and vmm exits */
	return 1;
}
