/* One virtual machine: its KVM handles, guest memory, buses, devices and
 * vCPU threads, and how it stops. The first stop reason wins; every vCPU is
 * then kicked out of KVM_RUN and the main thread tears down. */
#ifndef VMM_VM_H
#define VMM_VM_H

#include <linux/kvm.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "bus.h"
#include "console.h"
#include "event_loop.h"
#include "guest_mem.h"
#include "i8042.h"
#include "serial_8250.h"
#include "virtio_blk.h"
#include "virtio_rng.h"
#include "virtio_vsock.h"

/* Kicks a vCPU thread out of KVM_RUN; the handler has nothing to do, the
 * interrupted ioctl returning EINTR is the point. */
#define VCPU_KICK_SIGNAL SIGUSR1

#define VM_MAX_VCPUS 32
#define VM_MAX_DISKS 8
/* Every virtio device: the disks, vsock and rng. */
#define VM_MAX_VIRTIO (VM_MAX_DISKS + 2)
#define VM_STATE_LINE_MAX 400   /* one device's VMM_STATE_TAG line */

enum vm_stop {
	VM_RUNNING = 0,
	VM_STOP_RESET,        /* guest reset: a clean end */
	VM_STOP_POWEROFF,     /* guest powered off: a clean end */
	VM_STOP_GUEST_FAULT,  /* triple fault, emulation failure, bad entry state */
	VM_STOP_SIGNAL,       /* SIGTERM/SIGINT/SIGHUP to vmm */
	VM_STOP_ERROR,        /* the vmm itself failed while running */
	VM_STOP_SNAPSHOT,     /* --snapshot-out: the agent is ready, save the VM */
	VM_STOP_PAUSE,        /* --pause-out: VMM_PAUSE_SIGNAL came, save the VM */
};

/* Exit statuses of the vmm process (documented in docs/vmm.md). */
enum vmm_exit {
	VMM_EXIT_CLEAN = 0,
	VMM_EXIT_SETUP = 1,
	VMM_EXIT_GUEST = 2,
	VMM_EXIT_SIGNAL = 3,
};

struct vm;

/* An ioeventfd of one queue, watched by the event loop. */
struct virtio_kick {
	struct evl_handler h;
	struct virtio_mmio *t;
	unsigned q;
};

struct vcpu {
	struct vm *vm;
	unsigned index;
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	bool started;
};

struct vm {
	int kvm_fd;
	int vm_fd;
	size_t run_size;
	struct guest_mem mem;
	struct bus pio;
	struct bus mmio;
	struct console console;
	struct serial_8250 serial;
	struct i8042 i8042;
	unsigned ncpus;
	struct vcpu vcpus[VM_MAX_VCPUS];
	/* aarch64's in-kernel GIC: its device fd until it is initialised
	 * (-1 after, and on x86_64, whose irqchip has none), and its
	 * version, which the device tree names. */
	int irqchip_fd;
	unsigned irqchip_version;

	/* The start gate: vCPU threads count themselves in once their seccomp
	 * filter is loaded, then wait until the main thread has loaded its own
	 * and opened the gate; only then does any guest code run. */
	pthread_mutex_t gate_lock;
	pthread_cond_t gate_cond;
	unsigned gate_arrived;
	bool gate_open;

	struct event_loop evl;    /* the main thread's: queues, sockets, stop, signals */
	struct virtio_blk disks[VM_MAX_DISKS];
	unsigned ndisks;          /* initialised disks */
	struct virtio_vsock vsock;
	bool has_vsock;
	struct virtio_rng rng;
	bool has_rng;
	struct virtio_mmio *virtio[VM_MAX_VIRTIO];   /* in slot order */
	unsigned nvirtio;
	struct virtio_kick kicks[VM_MAX_VIRTIO * VIRTIO_MMIO_MAX_QUEUES];
	unsigned nkicks;          /* kicks watched by the event loop */

	bool snapshotting;        /* --snapshot-out, --pause-out: the main thread may read KVM state */
	bool pausable;            /* --pause-out: VMM_PAUSE_SIGNAL stops the VM with VM_STOP_PAUSE */
	uint64_t probe_cycles_per_loop; /* host probe: TSC cycles per ring-0 loop iteration */

	_Atomic int stop;         /* enum vm_stop */
	char stop_msg[256];       /* written once, by whoever set stop */
	struct timespec stop_at;  /* CLOCK_MONOTONIC when stop was first requested */
	int stop_efd;             /* eventfd the main loop waits on */
};

/* Record why the VM stops (only the first call counts), wake the main loop
 * and kick every vCPU out of KVM_RUN. Safe from any thread. */
void vm_request_stop(struct vm *vm, enum vm_stop why, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Current stop reason, VM_RUNNING while the guest runs. */
enum vm_stop vm_stopped(struct vm *vm);

/* Start one thread per vCPU running the exit loop. Each thread loads the
 * vCPU seccomp filter before anything else; once all have, the calling
 * (main) thread loads the main filter, and only then may the vCPUs enter
 * the guest. From here on the caller runs under that filter: no new
 * threads, files or network. Returns 0, or -1 after one error line or
 * with the stop reason set (threads already started are stopped by
 * vm_join_vcpus). */
int vm_start_vcpus(struct vm *vm);

/* How often vm_join_vcpus kicks a vCPU that has not yet stopped. */
#define VCPU_KICK_INTERVAL_MS 100

/* Kick and join every started vCPU thread, waiting at most timeout_ms in
 * all; call after a stop was requested. Returns -1 when every thread was
 * joined, else the index of the first vCPU that did not leave KVM_RUN in
 * time (its thread still runs, so nothing it may touch can be released:
 * the caller should exit without tearing down). */
int vm_join_vcpus(struct vm *vm, long timeout_ms);

/* Run the event loop until the VM stops or a termination signal arrives
 * (signals must be blocked in every thread and handed in as a signalfd,
 * VMM_STATE_SIGNAL too: it writes the devices' state to stderr, a
 * "vmm: state: " line each, and the VM runs on). Returns the stop reason. */
enum vm_stop vm_wait(struct vm *vm, int sig_fd);

/* Handle one KVM exit of v (exported for the run loop and the host probe).
 * Returns false when the vCPU should stop running. */
bool vcpu_handle_exit(struct vcpu *v);

/* Map a stop reason to the vmm exit status. */
int vm_exit_status(enum vm_stop why);

#endif
