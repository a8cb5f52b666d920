/* The guest agent as PID 1: bring up the guest's filesystems (and cgroup2
 * for per-stage memory limits, where the kernel has it), connect to the
 * host over vsock, serve one run (agent.c), then sync, unmount the
 * workspace and reset the VM. Whatever fails is reported to the host as an
 * ERROR frame when the connection exists, and on the console otherwise;
 * the VM is reset in every case, never left hanging. */
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

static void console(const char *fmt, const char *arg)
{
	fprintf(stderr, "vmrun-agent: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
}

/* Returns NULL, or what failed. */
static const char *mount_all(char *why, size_t len)
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
	struct stat st;
	if (stat(PROTO_WORKSPACE_DEV, &st) == 0) {
		if (mount(PROTO_WORKSPACE_DEV, PROTO_WORKSPACE_DIR, "ext4", MS_NOSUID | MS_NODEV, NULL) < 0) {
			snprintf(why, len, "mount %s on %s: %s", PROTO_WORKSPACE_DEV, PROTO_WORKSPACE_DIR, strerror(errno));
			return why;
		}
	} else if (mount("tmpfs", PROTO_WORKSPACE_DIR, "tmpfs", MS_NOSUID | MS_NODEV, WORKSPACE_TMPFS) < 0) {
		/* No workspace disk (a bare test boot): an empty one in RAM. */
		snprintf(why, len, "mount tmpfs on %s: %s", PROTO_WORKSPACE_DIR, strerror(errno));
		return why;
	}
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
	const char *mount_err = mount_all(why, sizeof(why));
	/* Without cgroup2 (an old kernel) everything but memory limits works:
	 * not an error until a request asks for one, so nothing on the console. */
	const char *cgroup_root = NULL;
	if (!mount_err && getpid() == 1 && cgroup_init(CGROUP_DIR, cgroup_why, sizeof(cgroup_why)) == 0)
		cgroup_root = CGROUP_DIR;
	int fd = connect_host();
	if (fd < 0) {
		console("cannot reach the host over vsock: %s", strerror(errno));
	} else if (mount_err) {
		(void)proto_send(fd, PROTO_ERROR, mount_err, (uint32_t)strlen(mount_err));
		console("%s", mount_err);
	} else {
		const struct agent_config cfg = {
			.cwd = PROTO_WORKSPACE_DIR, .home = PROTO_WORKSPACE_DIR, .uid = PROTO_SANDBOX_UID, .gid = PROTO_SANDBOX_GID, .kill_all = true,
			.cgroup_root = cgroup_root, .cgroup_error = cgroup_root ? NULL : cgroup_why,
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
