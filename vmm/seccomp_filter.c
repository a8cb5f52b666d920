#include "seccomp_filter.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kvm_arch.h"
#include "vm.h"

/* Compare only the low 32 bits of an argument the kernel reads as an int
 * or unsigned int (fds, ioctl requests, families, signals): whatever a
 * caller leaves in the upper half, the kernel ignores it, so the filter
 * must too, in both directions. */
#define ARG32(n, v) SCMP_CMP((n), SCMP_CMP_MASKED_EQ, 0xffffffffu, (scmp_datum_t)(uint32_t)(v))
/* Protections without PROT_EXEC: no thread of vmm ever maps or makes
 * memory executable after startup, so injected code can never be run. */
#define NO_EXEC(n) SCMP_CMP((n), SCMP_CMP_MASKED_EQ, PROT_EXEC, 0)

struct rules {
	scmp_filter_ctx ctx;
	unsigned n;
	int err;     /* first seccomp_rule_add failure, negative errno */
};

static void allow(struct rules *r, int nr, unsigned nargs, const struct scmp_arg_cmp *args)
{
	if (r->err)
		return;
	int rc = seccomp_rule_add_array(r->ctx, SCMP_ACT_ALLOW, nr, nargs, args);
	if (rc)
		r->err = rc;
	else
		r->n++;
}

#define ALLOW(r, sys) allow((r), SCMP_SYS(sys), 0, NULL)
#define ALLOW_IF(r, sys, ...)                                                                   \
	do {                                                                                        \
		const struct scmp_arg_cmp a_[] = { __VA_ARGS__ };                                       \
		allow((r), SCMP_SYS(sys), sizeof(a_) / sizeof(a_[0]), a_);                              \
	} while (0)

/* What both roles need from glibc and the kernel, whatever the thread does. */
static void common_rules(struct rules *r)
{
	/* pthread mutexes (serial, virtio transports), the start gate's
	 * condition variable, and pthread_join (main) sleep and wake here. */
	ALLOW(r, futex);
	/* Kicking a vCPU out of KVM_RUN (vm_request_stop on any thread, and
	 * teardown): pthread_kill is getpid + tgkill, with every signal
	 * blocked around it. tgkill is pinned to this process and to the
	 * kick signal, so no other process or signal can be reached. */
	ALLOW(r, getpid);
	ALLOW_IF(r, tgkill, ARG32(0, (uint32_t)getpid()), ARG32(2, VCPU_KICK_SIGNAL));
	ALLOW(r, rt_sigprocmask);
	/* Returning from the kick signal's (empty) handler; the main thread
	 * keeps it too, since a SIGUSR1 sent to the process from outside may
	 * be delivered to it. */
	ALLOW(r, rt_sigreturn);
	/* malloc and free: brk for the main arena, mmap/munmap for large blocks
	 * (vsock's 256 KiB connection buffers, the --stats residency vector)
	 * and thread arenas, mprotect to grow a thread arena, madvise
	 * MADV_DONTNEED when an arena shrinks or an exiting thread drops its
	 * stack. Never executable memory, never other madvise advice. */
	ALLOW(r, brk);
	ALLOW_IF(r, mmap, NO_EXEC(2));
	ALLOW_IF(r, mprotect, NO_EXEC(2));
	ALLOW(r, munmap);
	ALLOW_IF(r, madvise, ARG32(2, MADV_DONTNEED));
	/* vm_request_stop stamps the stop time; clock_gettime is normally
	 * served by the vDSO, this is its fallback. */
	ALLOW(r, clock_gettime);
	/* Console output (the UART on vCPU threads, the final flush on main),
	 * "vmm: ..." lines on stderr, eventfd signals (the stop eventfd,
	 * irqfds, queue kicks without an ioeventfd) and vsock's "OK <port>". */
	ALLOW(r, write);
	/* vsock: data for the guest is read from host sockets. The RX pump
	 * runs on the main loop, and on a vCPU thread when the driver sets
	 * DRIVER_OK (vsock_activate). */
	ALLOW(r, readv);
	/* vsock: a connection ends (conn_free: epoll_ctl DEL + close) or is
	 * half-closed (shutdown SHUT_WR) from the main loop, and from a vCPU
	 * thread when the driver resets the device (vsock_reset) or the
	 * activation's RX pump finishes a connection. */
	ALLOW(r, epoll_ctl);
	ALLOW(r, close);
	ALLOW(r, shutdown);
}

/* The vCPU thread: KVM_RUN and what an exit's MMIO/PIO dispatch reaches. */
static void vcpu_rules(struct rules *r, int vm_fd, int vcpu_fd)
{
	/* The run loop, on this thread's own vCPU fd only. */
	ALLOW_IF(r, ioctl, ARG32(0, vcpu_fd), ARG32(1, KVM_RUN));
	/* The program counter of a guest fault for the stop message
	 * (guest_fault_at; the request is the arch's). */
	ALLOW_IF(r, ioctl, ARG32(0, vcpu_fd), ARG32(1, kvm_arch_pc_ioctl));
	/* The 8250 raises and lowers its line (x86 IRQ 4, aarch64 SPI 1) from
	 * the register access that changed its interrupt state, on the VM fd. */
	ALLOW_IF(r, ioctl, ARG32(0, vm_fd), ARG32(1, KVM_IRQ_LINE));
	/* A vCPU thread ends by returning from its start routine. */
	ALLOW(r, exit);
}

/* The main thread after start: the event loop, device back-ends, teardown. */
static void main_rules(struct rules *r)
{
	/* The event loop's wait (its epoll_ctl is among the shared rules).
	 * aarch64 has no epoll_wait: glibc waits with epoll_pwait there. */
#ifdef __NR_epoll_wait
	ALLOW(r, epoll_wait);
#else
	ALLOW(r, epoll_pwait);
#endif
	/* signalfd (termination signals) and eventfds (the stop eventfd, queue
	 * kicks from ioeventfds). */
	ALLOW(r, read);
	/* virtio-blk: requests are preadv/pwritev at the sector's offset,
	 * flushes are fdatasync. */
	ALLOW(r, preadv);
	ALLOW(r, pwritev);
	ALLOW(r, fdatasync);
	/* virtio-rng: bytes for the guest (GRND_NONBLOCK). */
	ALLOW(r, getrandom);
	/* vsock host side, Unix sockets only: guest connections to port P
	 * become a connect to "<uds>_P" (a socket of family AF_UNIX, nothing
	 * else: no network); host clients are accepted on the listener, their
	 * "CONNECT P" line is peeked and read with recv (recvfrom); data for
	 * the host goes out with writev. */
	ALLOW_IF(r, socket, ARG32(0, AF_UNIX));
	ALLOW(r, connect);
	ALLOW(r, accept4);
	ALLOW(r, recvfrom);
	ALLOW(r, writev);
	/* Teardown: the vsock listener's socket file is removed (with
	 * unlinkat on aarch64, which has no unlink). */
#ifdef __NR_unlink
	ALLOW(r, unlink);
#else
	ALLOW_IF(r, unlinkat, ARG32(0, AT_FDCWD), ARG32(2, 0));
#endif
	/* --stats: guest pages resident (mincore) and the peak RSS (getrusage). */
	ALLOW(r, mincore);
	ALLOW(r, getrusage);
	/* Leaving: return from main. */
	ALLOW(r, exit_group);
}

/* --snapshot-out and --pause-out only: once the vCPU threads have stopped, the main thread
 * reads their state and the VM's, and writes the state file (write, on
 * an fd opened before the filter) and guest memory (pwritev, allowed for
 * the disks). Only KVM's read-only requests; no fd is pinned since the
 * vCPU fds are many, and none of these requests changes anything. */
static void snapshot_rules(struct rules *r)
{
	for (size_t i = 0; i < kvm_arch_nsnapshot_reads; i++)
		ALLOW_IF(r, ioctl, ARG32(1, kvm_arch_snapshot_reads[i]));
	/* The files are made durable before vmm reports success. */
	ALLOW(r, fsync);
	/* --pause-out: where the snapshot's memory file has holes
	 * (SEEK_DATA/SEEK_HOLE on the fd opened before the filter), which are
	 * compared as zeros instead of being faulted in. */
	ALLOW(r, lseek);
}

scmp_filter_ctx seccomp_filter_build(enum seccomp_role role, int vm_fd, int vcpu_fd, unsigned *nrules)
{
	struct rules r = { .ctx = seccomp_init(SCMP_ACT_KILL_PROCESS) };
	if (!r.ctx) {
		errno = ENOMEM;
		return NULL;
	}
	/* A call made through another ABI (x86's x32 and i386, arm64's
	 * 32-bit compat) kills too; errors of the
	 * load itself come back as the kernel's errno. */
	int rc = seccomp_attr_set(r.ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (rc == 0)
		rc = seccomp_attr_set(r.ctx, SCMP_FLTATR_API_SYSRAWRC, 1);
	if (rc) {
		seccomp_release(r.ctx);
		errno = -rc;
		return NULL;
	}
	if (role == SECCOMP_ROLE_VCPU)
		vcpu_rules(&r, vm_fd, vcpu_fd);
	else
		main_rules(&r);
	if (role == SECCOMP_ROLE_MAIN_SNAPSHOT)
		snapshot_rules(&r);
	common_rules(&r);
	/* ioctl(KVM_RUN) is the vCPU thread's hot call: test it first. */
	if (!r.err && role == SECCOMP_ROLE_VCPU)
		r.err = seccomp_syscall_priority(r.ctx, SCMP_SYS(ioctl), 255);
	if (r.err) {
		seccomp_release(r.ctx);
		errno = -r.err;
		return NULL;
	}
	if (nrules)
		*nrules = r.n;
	return r.ctx;
}

int seccomp_filter_load(enum seccomp_role role, int vm_fd, int vcpu_fd)
{
	scmp_filter_ctx ctx = seccomp_filter_build(role, vm_fd, vcpu_fd, NULL);
	if (!ctx)
		return -errno;
	int rc = seccomp_load(ctx);
	seccomp_release(ctx);
	return rc > 0 ? -rc : rc;
}
