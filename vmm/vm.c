#include "vm.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "kvm_arch.h"
#include "log.h"
#include "seccomp_filter.h"

#if defined(VMM_TEST_HOOK_FORBIDDEN)
#include <sys/socket.h>
#endif

static void kick_handler(int sig)
{
	(void)sig;
}

static void kick(struct vcpu *v)
{
	if (!v->run || !__atomic_load_n(&v->started, __ATOMIC_SEQ_CST) || pthread_equal(v->thread, pthread_self()))
		return;
	/* immediate_exit covers a kick that lands just before KVM_RUN. */
	__atomic_store_n(&v->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	pthread_kill(v->thread, VCPU_KICK_SIGNAL);
}

void vm_request_stop(struct vm *vm, enum vm_stop why, const char *fmt, ...)
{
	int expected = VM_RUNNING;
	if (!atomic_compare_exchange_strong(&vm->stop, &expected, (int)why))
		return;
	clock_gettime(CLOCK_MONOTONIC, &vm->stop_at);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(vm->stop_msg, sizeof(vm->stop_msg), fmt, ap);
	va_end(ap);
	eventfd_write(vm->stop_efd, 1);
	for (unsigned i = 0; i < vm->ncpus; i++)
		kick(&vm->vcpus[i]);
}

enum vm_stop vm_stopped(struct vm *vm)
{
	return (enum vm_stop)atomic_load(&vm->stop);
}

static const char *internal_error_name(uint32_t sub)
{
	switch (sub) {
	case KVM_INTERNAL_ERROR_EMULATION: return "instruction emulation failed";
	case KVM_INTERNAL_ERROR_SIMUL_EX: return "exception while delivering an exception";
	case KVM_INTERNAL_ERROR_DELIVERY_EV: return "event delivery failed";
	default: return "unknown";
	}
}

static bool handle_io(struct vcpu *v)
{
	struct kvm_run *r = v->run;
	uint64_t bytes = (uint64_t)r->io.size * r->io.count;
	if (r->io.size == 0 || r->io.size > 4 || r->io.data_offset > v->vm->run_size ||
	    bytes > v->vm->run_size - r->io.data_offset) {
		vm_request_stop(v->vm, VM_STOP_ERROR, "vCPU %u: malformed port I/O exit", v->index);
		return false;
	}
	uint8_t *data = (uint8_t *)r + r->io.data_offset;
	for (uint32_t i = 0; i < r->io.count; i++, data += r->io.size) {
		if (r->io.direction == KVM_EXIT_IO_OUT)
			bus_write(&v->vm->pio, r->io.port, data, r->io.size);
		else
			bus_read(&v->vm->pio, r->io.port, data, r->io.size);
	}
	return true;
}

static bool handle_mmio(struct vcpu *v)
{
	struct kvm_run *r = v->run;
	if (r->mmio.len == 0 || r->mmio.len > sizeof(r->mmio.data)) {
		vm_request_stop(v->vm, VM_STOP_ERROR, "vCPU %u: malformed MMIO exit", v->index);
		return false;
	}
	if (r->mmio.is_write)
		bus_write(&v->vm->mmio, r->mmio.phys_addr, r->mmio.data, r->mmio.len);
	else
		bus_read(&v->vm->mmio, r->mmio.phys_addr, r->mmio.data, r->mmio.len);
	return true;
}

static void guest_fault_at(struct vcpu *v, const char *what)
{
	uint64_t pc;
	if (kvm_arch_vcpu_pc(v, &pc) == 0)
		vm_request_stop(v->vm, VM_STOP_GUEST_FAULT, "vCPU %u: %s at %s 0x%llx", v->index, what,
				kvm_arch_pc_name, (unsigned long long)pc);
	else
		vm_request_stop(v->vm, VM_STOP_GUEST_FAULT, "vCPU %u: %s", v->index, what);
}

bool vcpu_handle_exit(struct vcpu *v)
{
	struct kvm_run *r = v->run;
	char what[128];
	switch (r->exit_reason) {
	case KVM_EXIT_IO:
		return handle_io(v);
	case KVM_EXIT_MMIO:
		return handle_mmio(v);
	case KVM_EXIT_INTR:
		return true;
	case KVM_EXIT_SYSTEM_EVENT:
		if (r->system_event.type == KVM_SYSTEM_EVENT_RESET)
			vm_request_stop(v->vm, VM_STOP_RESET, "guest reset");
		else if (r->system_event.type == KVM_SYSTEM_EVENT_SHUTDOWN)
			vm_request_stop(v->vm, VM_STOP_POWEROFF, "guest powered off");
		else
			vm_request_stop(v->vm, VM_STOP_GUEST_FAULT, "vCPU %u: guest system event %u",
					v->index, r->system_event.type);
		return false;
	case KVM_EXIT_SHUTDOWN:
		guest_fault_at(v, "guest triple fault (KVM_EXIT_SHUTDOWN)");
		return false;
	case KVM_EXIT_HLT:
		guest_fault_at(v, "guest halted with no interrupt controller to wake it");
		return false;
	case KVM_EXIT_INTERNAL_ERROR:
		snprintf(what, sizeof(what), "KVM internal error %u (%s)", r->internal.suberror,
			 internal_error_name(r->internal.suberror));
		guest_fault_at(v, what);
		return false;
	case KVM_EXIT_FAIL_ENTRY:
		vm_request_stop(v->vm, VM_STOP_GUEST_FAULT, "vCPU %u: VM entry failed (reason 0x%llx)",
				v->index, (unsigned long long)r->fail_entry.hardware_entry_failure_reason);
		return false;
	default:
		snprintf(what, sizeof(what), "unexpected KVM exit %u", r->exit_reason);
		guest_fault_at(v, what);
		return false;
	}
}

/* Count this thread in at the start gate and wait until it opens. */
static void gate_pass(struct vm *vm)
{
	pthread_mutex_lock(&vm->gate_lock);
	vm->gate_arrived++;
	pthread_cond_broadcast(&vm->gate_cond);
	while (!vm->gate_open)
		pthread_cond_wait(&vm->gate_cond, &vm->gate_lock);
	pthread_mutex_unlock(&vm->gate_lock);
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	/* First the filter: nothing this thread does from here on, guest
	 * driven or not, can leave the vCPU allowlist. */
	int rc = seccomp_filter_load(SECCOMP_ROLE_VCPU, v->vm->vm_fd, v->fd);
	if (rc)
		vm_request_stop(v->vm, VM_STOP_ERROR, "vCPU %u: seccomp filter: %s", v->index, strerror(-rc));
#if defined(VMM_TEST_HOOK_FORBIDDEN)
	/* Test build build/tests/vmm-forbidden only: a call the vCPU filter
	 * forbids, which must kill the process with SIGSYS. */
	if (rc == 0 && v->index == 0)
		(void)socket(AF_INET, SOCK_STREAM, 0);
#elif defined(VMM_TEST_HOOK_STUCK_VCPU)
	/* Test build build/tests/vmm-stuck only: vCPU 0 behaves like one that
	 * never comes back out of KVM_RUN. It blocks the kick signal and
	 * ignores the stop, so KVM_RUN returns only for the guest's own
	 * exits (a spinning guest makes none); the stop must not wait for
	 * it forever. */
	if (v->index == 0) {
		sigset_t kick_set;
		sigemptyset(&kick_set);
		sigaddset(&kick_set, VCPU_KICK_SIGNAL);
		pthread_sigmask(SIG_BLOCK, &kick_set, NULL);
		gate_pass(v->vm);
		for (;;) {
			__atomic_store_n(&v->run->immediate_exit, 0, __ATOMIC_SEQ_CST);
			if (ioctl(v->fd, KVM_RUN, 0) == 0)
				(void)vcpu_handle_exit(v);
		}
	}
#endif
	gate_pass(v->vm);
	while (vm_stopped(v->vm) == VM_RUNNING) {
		if (ioctl(v->fd, KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			vm_request_stop(v->vm, VM_STOP_ERROR, "vCPU %u: KVM_RUN: %s", v->index, strerror(errno));
			break;
		}
		if (!vcpu_handle_exit(v))
			break;
	}
	if (vm_stopped(v->vm) == VM_STOP_SNAPSHOT || vm_stopped(v->vm) == VM_STOP_PAUSE)
		kvm_arch_vcpu_quiesce(v);
	return NULL;
}

int vm_start_vcpus(struct vm *vm)
{
	struct sigaction sa = { .sa_handler = kick_handler };
	sigemptyset(&sa.sa_mask);
	if (sigaction(VCPU_KICK_SIGNAL, &sa, NULL) < 0) {
		vmm_perr("sigaction");
		return -1;
	}
	int e = pthread_mutex_init(&vm->gate_lock, NULL);
	if (e == 0 && (e = pthread_cond_init(&vm->gate_cond, NULL)) != 0)
		pthread_mutex_destroy(&vm->gate_lock);
	if (e) {
		errno = e;
		vmm_perr("vCPU start gate");
		return -1;
	}
	vm->gate_arrived = 0;
	vm->gate_open = false;
	int rc = 0;
	unsigned started = 0;
	for (; started < vm->ncpus; started++) {
		struct vcpu *v = &vm->vcpus[started];
		e = pthread_create(&v->thread, NULL, vcpu_thread, v);
		if (e) {
			errno = e;
			vmm_perr("creating vCPU %u thread", started);
			vm_request_stop(vm, VM_STOP_ERROR, "vCPU threads could not start");
			rc = -1;
			break;
		}
		__atomic_store_n(&v->started, true, __ATOMIC_SEQ_CST);
	}
	/* Every started vCPU thread has its filter (or has failed to load it
	 * and asked for a stop); now this thread's, and then the guest. */
	pthread_mutex_lock(&vm->gate_lock);
	while (vm->gate_arrived < started)
		pthread_cond_wait(&vm->gate_cond, &vm->gate_lock);
	pthread_mutex_unlock(&vm->gate_lock);
	if (rc == 0 && vm_stopped(vm) == VM_RUNNING) {
		int f = seccomp_filter_load(vm->snapshotting ? SECCOMP_ROLE_MAIN_SNAPSHOT : SECCOMP_ROLE_MAIN,
					    vm->vm_fd, -1);
		if (f) {
			vm_request_stop(vm, VM_STOP_ERROR, "main thread: seccomp filter: %s", strerror(-f));
			rc = -1;
		}
	}
	pthread_mutex_lock(&vm->gate_lock);
	vm->gate_open = true;
	pthread_cond_broadcast(&vm->gate_cond);
	pthread_mutex_unlock(&vm->gate_lock);
	return rc;
}

/* CLOCK_REALTIME + ms, the clock pthread_timedjoin_np reads. */
static struct timespec realtime_after(long ms)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

static bool before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

int vm_join_vcpus(struct vm *vm, long timeout_ms)
{
	struct timespec deadline = realtime_after(timeout_ms);
	int stuck = -1;
	for (unsigned i = 0; i < vm->ncpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		if (!v->started)
			continue;
		/* Kick again every round: one lost between a vCPU's stop check
		 * and its KVM_RUN is caught by immediate_exit, but a vCPU held
		 * in the host kernel gets another chance. */
		int e = ETIMEDOUT;
		for (;;) {
			kick(v);
			struct timespec round = realtime_after(VCPU_KICK_INTERVAL_MS);
			if (!before(&round, &deadline))
				round = deadline;
			e = pthread_timedjoin_np(v->thread, NULL, &round);
			if (e != ETIMEDOUT || !before(&round, &deadline))
				break;
		}
		if (e == 0)
			v->started = false;
		else if (stuck < 0)
			stuck = (int)i;
	}
	return stuck;
}

static void stop_event(void *ctx, uint32_t events)
{
	(void)ctx;
	(void)events;   /* the loop condition reads the stop reason */
}

struct signal_ctx {
	struct vm *vm;
	int fd;
};

/* VMM_STATE_SIGNAL: every device's state, a line each, in one write so
 * that a reader who sees the file grow sees all of it. */
static void write_state(struct vm *vm)
{
	char text[VM_MAX_VIRTIO * (VM_STATE_LINE_MAX + 16)];
	size_t used = 0;
	for (unsigned i = 0; i < vm->nvirtio; i++) {
		char line[VM_STATE_LINE_MAX];
		virtio_mmio_describe(vm->virtio[i], line, sizeof(line));
		int n = snprintf(text + used, sizeof(text) - used, VMM_LOG_PREFIX VMM_STATE_TAG "%s\n", line);
		if (n > 0 && (size_t)n < sizeof(text) - used)
			used += (size_t)n;
	}
	(void)!write(STDERR_FILENO, text, used);
}

static void signal_event(void *ctx, uint32_t events)
{
	struct signal_ctx *s = ctx;
	struct signalfd_siginfo si;
	(void)events;
	if (read(s->fd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		return;
	if (si.ssi_signo == VMM_STATE_SIGNAL)
		write_state(s->vm);
	else if (si.ssi_signo == VMM_PAUSE_SIGNAL) {
		if (s->vm->pausable)
			vm_request_stop(s->vm, VM_STOP_PAUSE, "paused by " VMM_PAUSE_SIGNAL_NAME);
	} else
		vm_request_stop(s->vm, VM_STOP_SIGNAL, "terminated by SIG%s",
				sigabbrev_np((int)si.ssi_signo) ? sigabbrev_np((int)si.ssi_signo) : "?");
}

enum vm_stop vm_wait(struct vm *vm, int sig_fd)
{
	struct signal_ctx sc = { vm, sig_fd };
	struct evl_handler stop_h = { .fn = stop_event, .ctx = vm, .fd = vm->stop_efd };
	struct evl_handler sig_h = { .fn = signal_event, .ctx = &sc, .fd = sig_fd };
	if (evl_add(&vm->evl, &stop_h, EPOLLIN) || evl_add(&vm->evl, &sig_h, EPOLLIN)) {
		vm_request_stop(vm, VM_STOP_ERROR, "epoll: %s", strerror(errno));
		return vm_stopped(vm);
	}
	while (vm_stopped(vm) == VM_RUNNING) {
		if (evl_run_once(&vm->evl, -1) < 0) {
			vm_request_stop(vm, VM_STOP_ERROR, "epoll_wait: %s", strerror(errno));
			break;
		}
	}
	evl_del(&vm->evl, &stop_h);
	evl_del(&vm->evl, &sig_h);
	return vm_stopped(vm);
}

int vm_exit_status(enum vm_stop why)
{
	switch (why) {
	case VM_STOP_RESET:
	case VM_STOP_POWEROFF:
		return VMM_EXIT_CLEAN;
	case VM_STOP_GUEST_FAULT:
		return VMM_EXIT_GUEST;
	case VM_STOP_SIGNAL:
		return VMM_EXIT_SIGNAL;
	case VM_STOP_SNAPSHOT:
	case VM_STOP_PAUSE:
		return VMM_EXIT_CLEAN;   /* once the snapshot is written */
	default:
		return VMM_EXIT_SETUP;
	}
}
