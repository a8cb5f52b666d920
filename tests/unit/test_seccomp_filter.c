/* The vmm's seccomp filters: a forked child loads one role's filter, makes
 * one call, and either survives it (the role needs that call, with those
 * arguments) or is killed with SIGSYS. After loading, the child makes raw
 * syscalls only and ends with a raw exit, so neither libc nor the
 * sanitizers' runtime make calls of their own (LeakSanitizer's exit-time
 * check would need ptrace and clone). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/kvm.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "event_loop.h"
#include "fake_virtio.h"
#include "guest_mem.h"
#include "kvm_arch.h"
#include "seccomp_filter.h"
#include "virtio_vsock.h"
#include "vm.h"

/* The fds the vCPU filter is built for: stand-ins for the VM and the vCPU
 * (the filter compares fd numbers, so any open fds do). */
#define VM_FD   100
#define VCPU_FD 101
#define OTHER_FD 102

/* Exit codes of a child that survived. */
#define CHILD_OK       0
#define CHILD_NO_LOAD  90   /* the filter did not load */
#define CHILD_BAD      91   /* an allowed call did not do its job */

static volatile sig_atomic_t kicked;
/* Learnt before the filter is loaded: getppid and gettid are not allowed. */
static pid_t parent_pid, child_tid;

static void on_kick(int sig)
{
	(void)sig;
	kicked = 1;
}

static long sys(long nr, long a, long b, long c, long d, long e, long f)
{
	return syscall(nr, a, b, c, d, e, f);
}

/* ---- calls, each returning CHILD_OK when it did what the role expects --- */

static int vcpu_ioctl_run(void)
{
	/* Not a real vCPU: KVM_RUN fails (ENOTTY), but the filter let it by. */
	return sys(SYS_ioctl, VCPU_FD, KVM_RUN, 0, 0, 0, 0) == -1 && errno == ENOTTY ? CHILD_OK : CHILD_BAD;
}

/* The arch's request for a fault's program counter (x86_64 KVM_GET_REGS,
 * aarch64 KVM_GET_ONE_REG); not a vCPU fd, so it fails, with nothing read. */
static int vcpu_ioctl_get_pc(void)
{
	uint64_t buf[128] = { 0 };
	return sys(SYS_ioctl, VCPU_FD, (long)kvm_arch_pc_ioctl, (long)buf, 0, 0, 0) == -1 ? CHILD_OK : CHILD_BAD;
}

static int vcpu_ioctl_get_sregs(void)
{
	struct kvm_sregs r;
	return sys(SYS_ioctl, VCPU_FD, KVM_GET_SREGS, (long)&r, 0, 0, 0) == -1 ? CHILD_OK : CHILD_BAD;
}

static int vcpu_ioctl_set_regs(void)
{
	struct kvm_regs r = { 0 };
	return sys(SYS_ioctl, VCPU_FD, KVM_SET_REGS, (long)&r, 0, 0, 0) == -1 ? CHILD_OK : CHILD_BAD;
}

static int vcpu_ioctl_irq_line(void)
{
	struct kvm_irq_level l = { .irq = 4, .level = 1 };
	return sys(SYS_ioctl, VM_FD, KVM_IRQ_LINE, (long)&l, 0, 0, 0) == -1 ? CHILD_OK : CHILD_BAD;
}

/* KVM_RUN's number with garbage in the upper half the kernel ignores. */
static int vcpu_ioctl_run_high_bits(void)
{
	sys(SYS_ioctl, VCPU_FD, (long)(0xdead00000000ull | KVM_RUN), 0, 0, 0, 0);
	return CHILD_OK;
}

static int ioctl_run_on_vm_fd(void)
{
	sys(SYS_ioctl, VM_FD, KVM_RUN, 0, 0, 0, 0);
	return CHILD_OK;
}

static int ioctl_run_other_fd(void)
{
	sys(SYS_ioctl, OTHER_FD, KVM_RUN, 0, 0, 0, 0);
	return CHILD_OK;
}

static int ioctl_irq_line_on_vcpu_fd(void)
{
	struct kvm_irq_level l = { .irq = 4, .level = 1 };
	sys(SYS_ioctl, VCPU_FD, KVM_IRQ_LINE, (long)&l, 0, 0, 0);
	return CHILD_OK;
}

static int ioctl_set_regs(void)
{
	struct kvm_regs r = { 0 };
	sys(SYS_ioctl, VCPU_FD, KVM_SET_REGS, (long)&r, 0, 0, 0);
	return CHILD_OK;
}

static int ioctl_memory_region(void)
{
	struct kvm_userspace_memory_region m = { 0 };
	sys(SYS_ioctl, VM_FD, KVM_SET_USER_MEMORY_REGION, (long)&m, 0, 0, 0);
	return CHILD_OK;
}

static int ioctl_tty(void)
{
	sys(SYS_ioctl, 0, TIOCSTI, (long)"x", 0, 0, 0);
	return CHILD_OK;
}

static int socket_inet(void)
{
	sys(SYS_socket, AF_INET, SOCK_STREAM, 0, 0, 0, 0);
	return CHILD_OK;
}

static int socket_inet6(void)
{
	sys(SYS_socket, AF_INET6, SOCK_DGRAM, 0, 0, 0, 0);
	return CHILD_OK;
}

static int socket_netlink(void)
{
	sys(SYS_socket, AF_NETLINK, SOCK_RAW, 0, 0, 0, 0);
	return CHILD_OK;
}

static int socket_unix(void)
{
	long fd = sys(SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, 0, 0, 0);
	if (fd < 0)
		return CHILD_BAD;
	return sys(SYS_close, fd, 0, 0, 0, 0, 0) == 0 ? CHILD_OK : CHILD_BAD;
}

static int open_file(void)
{
	sys(SYS_openat, AT_FDCWD, (long)"/etc/passwd", O_RDONLY, 0, 0, 0);
	return CHILD_OK;
}

static int exec_true(void)
{
	char *argv[] = { "true", NULL };
	char *envp[] = { NULL };
	sys(SYS_execve, (long)"/bin/true", (long)argv, (long)envp, 0, 0, 0);
	return CHILD_OK;
}

static int do_fork(void)
{
	sys(SYS_clone, SIGCHLD, 0, 0, 0, 0, 0);
	return CHILD_OK;
}

static int do_ptrace(void)
{
	sys(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0, 0, 0);
	return CHILD_OK;
}

static int mmap_rw(void)
{
	long p = sys(SYS_mmap, 0, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == -1)
		return CHILD_BAD;
	((volatile char *)p)[0] = 1;
	if (sys(SYS_mprotect, p, 4096, PROT_READ, 0, 0, 0) || sys(SYS_madvise, p, 1 << 20, MADV_DONTNEED, 0, 0, 0) ||
	    sys(SYS_munmap, p, 1 << 20, 0, 0, 0, 0))
		return CHILD_BAD;
	return CHILD_OK;
}

static int mmap_exec(void)
{
	sys(SYS_mmap, 0, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return CHILD_OK;
}

static int mprotect_exec(void)
{
	long p = sys(SYS_mmap, 0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == -1)
		return CHILD_BAD;
	sys(SYS_mprotect, p, 4096, PROT_READ | PROT_EXEC, 0, 0, 0);
	return CHILD_OK;
}

static int madvise_other(void)
{
	long p = sys(SYS_mmap, 0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == -1)
		return CHILD_BAD;
	sys(SYS_madvise, p, 4096, MADV_DOFORK, 0, 0, 0);
	return CHILD_OK;
}

/* The kick: tgkill of this process's own thread with the kick signal, its
 * handler, and the return from it. */
static int kick_self(void)
{
	long pid = sys(SYS_getpid, 0, 0, 0, 0, 0, 0);
	if (sys(SYS_tgkill, pid, child_tid, VCPU_KICK_SIGNAL, 0, 0, 0) || !kicked)
		return CHILD_BAD;
	return CHILD_OK;
}

static int tgkill_other_signal(void)
{
	long pid = sys(SYS_getpid, 0, 0, 0, 0, 0, 0);
	sys(SYS_tgkill, pid, pid, SIGUSR2, 0, 0, 0);
	return CHILD_OK;
}

static int tgkill_other_process(void)
{
	sys(SYS_tgkill, 1, 1, VCPU_KICK_SIGNAL, 0, 0, 0);
	return CHILD_OK;
}

static int kill_parent(void)
{
	sys(SYS_kill, parent_pid, 0, 0, 0, 0, 0);
	return CHILD_OK;
}

/* getpid through the i386 ABI (int 0x80, call 20): allowed as a native
 * call, but another ABI's numbers mean other calls, so the filter kills. */
static int getpid_i386(void)
{
#if defined(__x86_64__)
	long ret = 20;
	__asm__ volatile("int $0x80" : "+a"(ret) : : "memory");
#else
	sys(-1, 0, 0, 0, 0, 0, 0);   /* no second ABI: any unknown call kills */
#endif
	return CHILD_OK;
}

/* getpid through the x32 ABI (the __X32_SYSCALL_BIT numbers). */
static int getpid_x32(void)
{
	sys(0x40000000L | SYS_getpid, 0, 0, 0, 0, 0, 0);
	return CHILD_OK;
}

static int getpid_native(void)
{
	return sys(SYS_getpid, 0, 0, 0, 0, 0, 0) > 0 ? CHILD_OK : CHILD_BAD;
}

static int futex_wake(void)
{
	static int word;
	return sys(SYS_futex, (long)&word, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0) == 0 ? CHILD_OK : CHILD_BAD;
}

/* lseek on stdin's fd: a pause looks for the snapshot's holes (any answer
 * will do, the filter is what is tested). */
static int lseek_fd(void)
{
	(void)sys(SYS_lseek, 0, 0, SEEK_SET, 0, 0, 0);
	return CHILD_OK;
}

/* write on a pipe and, for the main role, read it back (a fresh pipe per
 * child). */
static int pipe_fds[2];

static int write_pipe(void)
{
	return sys(SYS_write, pipe_fds[1], (long)"x", 1, 0, 0, 0) == 1 ? CHILD_OK : CHILD_BAD;
}

static int read_pipe(void)
{
	char c;
	if (sys(SYS_write, pipe_fds[1], (long)"y", 1, 0, 0, 0) != 1)
		return CHILD_BAD;
	return sys(SYS_read, pipe_fds[0], (long)&c, 1, 0, 0, 0) == 1 && c == 'y' ? CHILD_OK : CHILD_BAD;
}

static int random_bytes(void)
{
	char b[16];
	return sys(SYS_getrandom, (long)b, sizeof(b), GRND_NONBLOCK, 0, 0, 0) == sizeof(b) ? CHILD_OK : CHILD_BAD;
}

static int rusage(void)
{
	struct rusage ru;
	return sys(SYS_getrusage, RUSAGE_SELF, (long)&ru, 0, 0, 0, 0) == 0 && ru.ru_maxrss > 0 ? CHILD_OK : CHILD_BAD;
}

static int epoll_new(void)
{
	sys(SYS_epoll_create1, 0, 0, 0, 0, 0, 0);
	return CHILD_OK;
}

static int exit_group_call(void)
{
	sys(SYS_exit_group, CHILD_OK, 0, 0, 0, 0, 0);
	return CHILD_BAD;
}

/* ---- the harness -------------------------------------------------------- */

/* Fork a child that loads role's filter, makes call and exits with its
 * result (raw exit: the vCPU role allows exit, the main role exit_group).
 * Returns the wait status. */
static int in_child(enum seccomp_role role, int (*call)(void))
{
	parent_pid = getpid();
	int pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		if (null < 0 || dup2(null, VM_FD) < 0 || dup2(null, VCPU_FD) < 0 || dup2(null, OTHER_FD) < 0 ||
		    pipe(pipe_fds))
			_exit(CHILD_NO_LOAD);
		child_tid = gettid();
		struct sigaction sa = { .sa_handler = on_kick };
		sigemptyset(&sa.sa_mask);
		sigaction(VCPU_KICK_SIGNAL, &sa, NULL);
		if (seccomp_filter_load(role, VM_FD, VCPU_FD))
			_exit(CHILD_NO_LOAD);
		int rc = call();
		sys(role == SECCOMP_ROLE_VCPU ? SYS_exit : SYS_exit_group, rc, 0, 0, 0, 0, 0);
		for (;;)
			;
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return st;
}

static void expect_allowed(enum seccomp_role role, int (*call)(void), const char *what)
{
	int st = in_child(role, call);
	if (WIFSIGNALED(st))
		fail_msg("%s: killed by signal %d", what, WTERMSIG(st));
	if (!WIFEXITED(st) || WEXITSTATUS(st) != CHILD_OK)
		fail_msg("%s: exit status %d", what, WEXITSTATUS(st));
}

static void expect_killed(enum seccomp_role role, int (*call)(void), const char *what)
{
	int st = in_child(role, call);
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGSYS)
		fail_msg("%s: not killed with SIGSYS (%s %d)", what, WIFSIGNALED(st) ? "signal" : "exit",
			 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

#define ALLOWED(role, call) expect_allowed(role, call, #role " " #call)
#define KILLED(role, call) expect_killed(role, call, #role " " #call)

static void vcpu_allows_what_the_run_loop_needs(void **state)
{
	(void)state;
	ALLOWED(SECCOMP_ROLE_VCPU, vcpu_ioctl_run);
	ALLOWED(SECCOMP_ROLE_VCPU, vcpu_ioctl_get_pc);
	ALLOWED(SECCOMP_ROLE_VCPU, vcpu_ioctl_irq_line);
	ALLOWED(SECCOMP_ROLE_VCPU, vcpu_ioctl_run_high_bits);
	ALLOWED(SECCOMP_ROLE_VCPU, write_pipe);
	ALLOWED(SECCOMP_ROLE_VCPU, futex_wake);
	ALLOWED(SECCOMP_ROLE_VCPU, kick_self);
	ALLOWED(SECCOMP_ROLE_VCPU, mmap_rw);
	ALLOWED(SECCOMP_ROLE_VCPU, getpid_native);
}

static void vcpu_kills_other_ioctls(void **state)
{
	(void)state;
	KILLED(SECCOMP_ROLE_VCPU, ioctl_run_on_vm_fd);
	KILLED(SECCOMP_ROLE_VCPU, ioctl_run_other_fd);
	KILLED(SECCOMP_ROLE_VCPU, ioctl_irq_line_on_vcpu_fd);
	KILLED(SECCOMP_ROLE_VCPU, ioctl_set_regs);
	KILLED(SECCOMP_ROLE_VCPU, ioctl_memory_region);
	KILLED(SECCOMP_ROLE_VCPU, ioctl_tty);
}

static void vcpu_kills_the_rest(void **state)
{
	(void)state;
	KILLED(SECCOMP_ROLE_VCPU, socket_inet);
	KILLED(SECCOMP_ROLE_VCPU, socket_unix);     /* no socket code runs on vCPU threads */
	KILLED(SECCOMP_ROLE_VCPU, open_file);
	KILLED(SECCOMP_ROLE_VCPU, exec_true);
	KILLED(SECCOMP_ROLE_VCPU, do_fork);
	KILLED(SECCOMP_ROLE_VCPU, do_ptrace);
	KILLED(SECCOMP_ROLE_VCPU, mmap_exec);
	KILLED(SECCOMP_ROLE_VCPU, mprotect_exec);
	KILLED(SECCOMP_ROLE_VCPU, madvise_other);
	KILLED(SECCOMP_ROLE_VCPU, tgkill_other_signal);
	KILLED(SECCOMP_ROLE_VCPU, tgkill_other_process);
	KILLED(SECCOMP_ROLE_VCPU, kill_parent);
	KILLED(SECCOMP_ROLE_VCPU, read_pipe);       /* eventfds and signalfd are read on main */
	KILLED(SECCOMP_ROLE_VCPU, random_bytes);
	KILLED(SECCOMP_ROLE_VCPU, exit_group_call);
	KILLED(SECCOMP_ROLE_VCPU, getpid_i386);
	KILLED(SECCOMP_ROLE_VCPU, getpid_x32);
}

static void main_allows_what_the_event_loop_needs(void **state)
{
	(void)state;
	ALLOWED(SECCOMP_ROLE_MAIN, socket_unix);
	ALLOWED(SECCOMP_ROLE_MAIN, read_pipe);
	ALLOWED(SECCOMP_ROLE_MAIN, write_pipe);
	ALLOWED(SECCOMP_ROLE_MAIN, random_bytes);
	ALLOWED(SECCOMP_ROLE_MAIN, futex_wake);
	ALLOWED(SECCOMP_ROLE_MAIN, kick_self);
	ALLOWED(SECCOMP_ROLE_MAIN, mmap_rw);
	ALLOWED(SECCOMP_ROLE_MAIN, rusage);
	ALLOWED(SECCOMP_ROLE_MAIN, exit_group_call);
}

static void main_kills_the_rest(void **state)
{
	(void)state;
	KILLED(SECCOMP_ROLE_MAIN, socket_inet);
	KILLED(SECCOMP_ROLE_MAIN, socket_inet6);
	KILLED(SECCOMP_ROLE_MAIN, socket_netlink);
	KILLED(SECCOMP_ROLE_MAIN, mmap_exec);
	KILLED(SECCOMP_ROLE_MAIN, mprotect_exec);
	KILLED(SECCOMP_ROLE_MAIN, madvise_other);
	KILLED(SECCOMP_ROLE_MAIN, open_file);
	KILLED(SECCOMP_ROLE_MAIN, exec_true);
	KILLED(SECCOMP_ROLE_MAIN, do_fork);
	KILLED(SECCOMP_ROLE_MAIN, do_ptrace);
	KILLED(SECCOMP_ROLE_MAIN, vcpu_ioctl_run);   /* main makes no ioctl at all */
	KILLED(SECCOMP_ROLE_MAIN, vcpu_ioctl_irq_line);
	KILLED(SECCOMP_ROLE_MAIN, tgkill_other_signal);
	KILLED(SECCOMP_ROLE_MAIN, kill_parent);
	KILLED(SECCOMP_ROLE_MAIN, epoll_new);        /* the epoll set exists before */
	KILLED(SECCOMP_ROLE_MAIN, getpid_i386);
	KILLED(SECCOMP_ROLE_MAIN, getpid_x32);
	/* Reading vCPU state is only for a vmm taking a snapshot. */
	KILLED(SECCOMP_ROLE_MAIN, vcpu_ioctl_get_sregs);
}

/* --snapshot-out's (and --pause-out's) main thread reads state and looks
 * for holes, and nothing else is added: setting state, running a vCPU or
 * opening files stays forbidden. */
static void snapshot_role_reads_only(void **state)
{
	(void)state;
	if (kvm_arch_no_snapshots) {
		/* No snapshot on this arch: its role reads nothing either. */
		KILLED(SECCOMP_ROLE_MAIN_SNAPSHOT, vcpu_ioctl_get_pc);
		KILLED(SECCOMP_ROLE_MAIN_SNAPSHOT, vcpu_ioctl_get_sregs);
		KILLED(SECCOMP_ROLE_MAIN_SNAPSHOT, vcpu_ioctl_run);
		return;
	}
	ALLOWED(SECCOMP_ROLE_MAIN_SNAPSHOT, vcpu_ioctl_get_sregs);
	ALLOWED(SECCOMP_ROLE_MAIN_SNAPSHOT, vcpu_ioctl_get_pc);
	ALLOWED(SECCOMP_ROLE_MAIN_SNAPSHOT, futex_wake);
	ALLOWED(SECCOMP_ROLE_MAIN_SNAPSHOT, lseek_fd);
	KILLED(SECCOMP_ROLE_MAIN, lseek_fd);
	KILLED(SECCOMP_ROLE_MAIN_SNAPSHOT, vcpu_ioctl_set_regs);
	KILLED(SECCOMP_ROLE_MAIN_SNAPSHOT, vcpu_ioctl_run);
	KILLED(SECCOMP_ROLE_MAIN_SNAPSHOT, open_file);
	KILLED(SECCOMP_ROLE_MAIN_SNAPSHOT, socket_inet);
	KILLED(SECCOMP_ROLE_MAIN_SNAPSHOT, exec_true);
}

/* ---- real device code under a filter --------------------------------------- */

/* virtio-vsock with its host side, in a child: host clients connect (one
 * sends its CONNECT line, one is left mid-handshake), then the filter of
 * role is loaded and the device code runs as on that thread. vCPU: the
 * driver resets the device (vsock_reset closes every connection) and
 * brings it up again (vsock_activate pumps RX), as a guest's status
 * writes do from a vCPU thread. Main: the event loop accepts and reads
 * handshakes, then teardown closes everything and unlinks the socket. */
static int vsock_child(enum seccomp_role role, const char *dir)
{
	static struct event_loop evl;
	static struct guest_mem gm;
	static struct virtio_vsock vs;
	static struct fv_queue q[3];
	char uds[96];
	snprintf(uds, sizeof(uds), "%s/v.sock", dir);
	if (evl_init(&evl) || fv_mem_init(&gm) || virtio_vsock_init(&vs, uds, &evl, &gm, 0xd0000000, 5))
		return CHILD_NO_LOAD;
	fv_bring_up(&vs.t, 3, VSOCK_QUEUE_SIZE, q);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", uds);
	int h1 = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int h2 = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (h1 < 0 || h2 < 0 || connect(h1, (struct sockaddr *)&a, sizeof(a)) ||
	    connect(h2, (struct sockaddr *)&a, sizeof(a)) || write(h1, "CONNECT 5\n", 10) != 10)
		return CHILD_NO_LOAD;
	if (role == SECCOMP_ROLE_VCPU) {
		for (int i = 0; i < 10 && evl_run_once(&evl, 10) >= 0; i++)
			;
		if (seccomp_filter_load(role, VM_FD, VCPU_FD))
			return CHILD_NO_LOAD;
		fv_write(&vs.t, VIRTIO_MMIO_STATUS, 0);
		fv_bring_up(&vs.t, 3, VSOCK_QUEUE_SIZE, q);
		for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++)
			if (vs.conns[i].state != VSOCK_FREE)
				return CHILD_BAD;
		return CHILD_OK;
	}
	if (seccomp_filter_load(role, VM_FD, VCPU_FD))
		return CHILD_NO_LOAD;
	for (int i = 0; i < 10 && evl_run_once(&evl, 10) >= 0; i++)
		;
	unsigned connecting = 0, handshake = 0;
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++) {
		connecting += vs.conns[i].state == VSOCK_CONNECTING;
		handshake += vs.conns[i].state == VSOCK_HANDSHAKE;
	}
	virtio_vsock_release(&vs);
	evl_release(&evl);
	guest_mem_release(&gm);
	return connecting == 1 && handshake == 1 ? CHILD_OK : CHILD_BAD;
}

static void vsock_under(enum seccomp_role role)
{
	char dir[] = "/tmp/vseccompXXXXXX";
	assert_non_null(mkdtemp(dir));
	int pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int rc = vsock_child(role, dir);
		sys(role == SECCOMP_ROLE_VCPU ? SYS_exit : SYS_exit_group, rc, 0, 0, 0, 0, 0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	char uds[96];
	snprintf(uds, sizeof(uds), "%s/v.sock", dir);
	/* Main's teardown removed the socket file (a vCPU thread never does). */
	bool left = access(uds, F_OK) == 0;
	unlink(uds);
	rmdir(dir);
	if (role == SECCOMP_ROLE_MAIN && left)
		fail_msg("the vsock socket file was not removed");
	if (WIFSIGNALED(st))
		fail_msg("killed by signal %d", WTERMSIG(st));
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), CHILD_OK);
}

static void vcpu_vsock_reset_and_activate(void **state)
{
	(void)state;
	vsock_under(SECCOMP_ROLE_VCPU);
}

static void main_vsock_handshakes_and_teardown(void **state)
{
	(void)state;
	vsock_under(SECCOMP_ROLE_MAIN);
}

/* Both filters build, default to killing the process, and say how many
 * rules they have (docs/vmm.md quotes the counts). */
static void filters_build(void **state)
{
	(void)state;
	unsigned nmain = 0, nvcpu = 0;
	scmp_filter_ctx m = seccomp_filter_build(SECCOMP_ROLE_MAIN, VM_FD, -1, &nmain);
	scmp_filter_ctx v = seccomp_filter_build(SECCOMP_ROLE_VCPU, VM_FD, VCPU_FD, &nvcpu);
	assert_non_null(m);
	assert_non_null(v);
	uint32_t def = 0;
	assert_int_equal(seccomp_attr_get(m, SCMP_FLTATR_ACT_DEFAULT, &def), 0);
	assert_int_equal(def, SCMP_ACT_KILL_PROCESS);
	assert_int_equal(seccomp_attr_get(v, SCMP_FLTATR_ACT_DEFAULT, &def), 0);
	assert_int_equal(def, SCMP_ACT_KILL_PROCESS);
	assert_int_equal(seccomp_attr_get(v, SCMP_FLTATR_ACT_BADARCH, &def), 0);
	assert_int_equal(def, SCMP_ACT_KILL_PROCESS);
	print_message("seccomp rules: main %u, vCPU %u\n", nmain, nvcpu);
	assert_true(nmain > 0 && nvcpu > 0);
	seccomp_release(m);
	seccomp_release(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(filters_build),
		cmocka_unit_test(vcpu_allows_what_the_run_loop_needs),
		cmocka_unit_test(vcpu_kills_other_ioctls),
		cmocka_unit_test(vcpu_kills_the_rest),
		cmocka_unit_test(main_allows_what_the_event_loop_needs),
		cmocka_unit_test(main_kills_the_rest),
		cmocka_unit_test(snapshot_role_reads_only),
		cmocka_unit_test(vcpu_vsock_reset_and_activate),
		cmocka_unit_test(main_vsock_handshakes_and_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
