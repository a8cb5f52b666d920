/* vmm: boot one microVM on /dev/kvm.
 *
 * main is straight-line: parse, acquire (memory, devices, kernel and boot
 * tables, then KVM, the vCPUs, the devices' KVM wiring and what the boot
 * needs from KVM), probe the host, run until the guest or a signal stops
 * it, tear down. Every acquisition is released on the way out, whatever failed. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "kvm.h"
#include "kvm_arch.h"
#include "log.h"
#include "virtio_devices.h"
#include "vm.h"
#include "vm_pause.h"
#include "vm_snapshot.h"

_Static_assert(VMM_MAX_CPUS <= VM_MAX_VCPUS, "the VM holds every vCPU --cpus allows");

/* How long the vCPU threads get to leave KVM_RUN once the VM stops: a
 * kicked vCPU leaves in microseconds on hardware and in milliseconds on an
 * emulated KVM host, so this is only reached by a vCPU the host kernel
 * does not give back. */
#define VCPU_JOIN_TIMEOUT_MS 2000

/* Monotonic stamps for --stats: where a start-up's time goes. */
struct timings {
	struct timespec start, first_run, guest_start, joined, end;
};

static uint64_t ns(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * 1000000000ull + (uint64_t)t->tv_nsec;
}

/* Map the kernel file, load it into guest RAM with what the arch writes
 * beside it, unmap it. */
static int load_kernel_file(struct vm *vm, const struct vmm_config *cfg, const char *cmdline, uint64_t *entry)
{
	int rc = -1;
	int fd = open(cfg->kernel, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		vmm_perr("kernel %s", cfg->kernel);
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
		vmm_err("kernel %s: not a non-empty regular file", cfg->kernel);
		goto out;
	}
	void *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (img == MAP_FAILED) {
		vmm_perr("kernel %s: mmap", cfg->kernel);
		goto out;
	}
	rc = kvm_arch_load_kernel(vm, img, (size_t)st.st_size, cmdline, cfg->cpus, entry);
	munmap(img, (size_t)st.st_size);
out:
	close(fd);
	return rc;
}

/* The VM, its devices and vCPUs, created alike for a boot and a restore;
 * before this, guest memory is in place and (booting) the kernel and what
 * needs no KVM of its boot tables are in it. The virtio devices' irqfds
 * come last: arm64 KVM takes an irqfd only once its GIC is initialised,
 * which needs every vCPU. */
static int create_vm(struct vm *vm, const struct vmm_config *cfg)
{
	vm->ncpus = cfg->cpus;   /* the arch's VM-wide setup may depend on it (aarch64's GICv2) */
	if (kvm_open(vm, cfg->kvm_fd) || kvm_create_vm(vm) || kvm_arch_vm_init(vm) || kvm_map_memory(vm) ||
	    kvm_arch_devices_init(vm))
		return -1;
	for (unsigned i = 0; i < vm->ncpus; i++)
		if (kvm_create_vcpu(vm, i))
			return -1;
	return kvm_arch_vcpus_init(vm) || virtio_devices_attach(vm) ? -1 : 0;
}

/* Everything from the arguments' files to vCPUs created, with the kernel,
 * the boot tables and the devices in place. What the command line names
 * (console file, guest memory size, disks, vsock socket, command line
 * length, kernel) is checked before /dev/kvm is touched, so those errors
 * read the same on a host with no KVM, an emulating one and a hardware
 * one. */
static int acquire(struct vm *vm, const struct vmm_config *cfg, uint64_t *entry)
{
	char devices[VMM_CMDLINE_MAX] = "", cmdline[VMM_CMDLINE_MAX];
	if (console_open(&vm->console, cfg->console, cfg->console_limit) ||
	    guest_mem_init_aligned(&vm->mem, cfg->memory_mib << 20, kvm_arch_ram_gap_start, kvm_arch_ram_gap_end,
				   kvm_arch_ram_align) ||
	    evl_init(&vm->evl) || virtio_devices_init(vm, cfg))
		return -1;
	if ((kvm_arch_virtio_on_cmdline && virtio_devices_cmdline(vm, devices, sizeof(devices))) ||
	    vmm_build_cmdline(cfg, devices, cmdline, sizeof(cmdline))) {
		vmm_err("kernel command line is longer than %d bytes", VMM_CMDLINE_MAX - 1);
		return -1;
	}
	if (load_kernel_file(vm, cfg, cmdline, entry) || create_vm(vm, cfg))
		return -1;
	return kvm_arch_boot_finish(vm, cmdline);
}

/* The same for a restore: the snapshot (and a paused VM's state and page
 * index) is read and checked first, memory is its memory file, and no
 * kernel is loaded (it is in that memory). */
static int acquire_restored(struct vm *vm, const struct vmm_config *cfg, struct snapshot_in *in,
			    struct resume_in *res)
{
	if (vm_restore_load(cfg, in) || (cfg->resume && vm_resume_load(cfg, in, res)) ||
	    console_open(&vm->console, cfg->console, cfg->console_limit) ||
	    guest_mem_init_file(&vm->mem, in->meta.memory_bytes, kvm_arch_ram_gap_start, kvm_arch_ram_gap_end,
				in->mem_fd) ||
	    evl_init(&vm->evl) || virtio_devices_init(vm, cfg))
		return -1;
	return create_vm(vm, cfg);
}

/* After the host probe: the probe's page goes back to the snapshot's, a
 * paused VM's pages are laid over (all of them checked before any vCPU
 * runs), then the saved vCPU and device state goes in. */
static int restore(struct vm *vm, const struct vmm_config *cfg, struct snapshot_in *in, struct resume_in *res)
{
	if (kvm_arch_probe_revert(vm)) {
		vmm_perr("snapshot %s: restoring the probe page", cfg->restore);
		return -1;
	}
	if (cfg->resume && vm_resume_pages(cfg, &vm->mem, res))
		return -1;
	return vm_restore_apply(vm, cfg, cfg->resume ? &res->state : in);
}

/* The first KVM_RUN: refuse hosts that cannot run a Linux guest. */
static int probe_host(struct vm *vm, const struct vmm_config *cfg)
{
	bool emulated;
	if (kvm_arch_probe_emulation(vm, &emulated))
		return -1;
	if (emulated && !cfg->accept_emulated) {
		vmm_err("this host's KVM runs guest kernel code in its instruction emulator%s "
			"(probe: %llu cycles per loop, hardware ~1), so a Linux guest cannot boot here; "
			"run VM tests through tests/kvmhost/run",
			access("/sys/module/kvm_pvm", F_OK) == 0 ? " (PVM nested host: kvm_pvm)" : "",
			(unsigned long long)vm->probe_cycles_per_loop);
		return -1;
	}
	return 0;
}

/* The peak RSS in KiB. getrusage, not /proc/self/status: the main thread's
 * seccomp filter allows no open. (ru_maxrss is a maximum that also covers
 * the image before exec, i.e. the forking parent's pages, so it differs
 * from VmHWM only when that parent was the larger.) */
static long peak_rss_kib(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

static void print_stats(struct vm *vm, const struct timings *t)
{
	int64_t guest = guest_mem_resident(&vm->mem);
	fprintf(stderr,
		"vmm-stats probe_cycles_per_loop=%llu first_kvm_run_ns=%llu stop_ns=%llu joined_ns=%llu teardown_ns=%llu rss_hwm_kib=%ld "
		"guest_resident_kib=%lld console_bytes=%llu console_dropped=%llu unhandled_pio=%lu "
		"unhandled_mmio=%lu start_ns=%llu guest_start_ns=%llu\n",
		(unsigned long long)vm->probe_cycles_per_loop, (unsigned long long)ns(&t->first_run), (unsigned long long)ns(&vm->stop_at),
		(unsigned long long)ns(&t->joined),
		(unsigned long long)ns(&t->end), peak_rss_kib(), (long long)(guest / 1024),
		(unsigned long long)vm->console.written, (unsigned long long)vm->console.dropped,
		atomic_load(&vm->pio.unhandled), atomic_load(&vm->mmio.unhandled), (unsigned long long)ns(&t->start),
		(unsigned long long)ns(&t->guest_start));
}

int main(int argc, char **argv)
{
	struct timings t = { 0 };
	clock_gettime(CLOCK_MONOTONIC, &t.start);
	struct vmm_config cfg;
	int parsed = vmm_args_parse(argc, argv, &cfg);
	if (parsed)
		return parsed > 0 ? VMM_EXIT_CLEAN : VMM_EXIT_SETUP;

	/* Termination signals are taken synchronously by the main loop; the
	 * mask is inherited by every vCPU thread. */
	sigset_t term;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigaddset(&term, SIGINT);
	sigaddset(&term, SIGHUP);
	sigaddset(&term, VMM_STATE_SIGNAL);   /* not a termination: see vm_wait */
	sigaddset(&term, VMM_PAUSE_SIGNAL);   /* nor this */
	sigprocmask(SIG_BLOCK, &term, NULL);
	signal(SIGPIPE, SIG_IGN);

	static struct vm vm;
	vm.kvm_fd = vm.vm_fd = vm.irqchip_fd = vm.evl.epfd = -1;
	for (unsigned i = 0; i < VM_MAX_VCPUS; i++)
		vm.vcpus[i].fd = -1;
	struct snapshot_in in = { .mem_fd = -1 };
	struct snapshot_out snap = { .state_fd = -1, .mem_fd = -1 };
	struct resume_in res = { .state.mem_fd = -1, .pages_fd = -1 };
	struct pause_out pause = { .state_fd = -1, .pages_fd = -1 };
	int status = VMM_EXIT_SETUP;
	int sig_fd = signalfd(-1, &term, SFD_CLOEXEC);
	vm.stop_efd = eventfd(0, EFD_CLOEXEC);
	if (sig_fd < 0 || vm.stop_efd < 0) {
		vmm_perr("signalfd/eventfd");
		goto out;
	}

	/* Before anything is acquired: vmrun falls back to a cold boot at once. */
	if ((cfg.snapshot_out || cfg.restore) && kvm_arch_no_snapshots) {
		vmm_err("%s: %s", cfg.restore ? "--restore" : "--snapshot-out", kvm_arch_no_snapshots);
		goto out;
	}
	uint64_t entry = 0;
	if (cfg.restore ? acquire_restored(&vm, &cfg, &in, &res) : acquire(&vm, &cfg, &entry))
		goto out;
	if ((cfg.snapshot_out && vm_snapshot_prepare(&vm, &cfg, &snap)) ||
	    (cfg.pause_out && vm_pause_prepare(&vm, &cfg, &in, &pause)))
		goto out;
	clock_gettime(CLOCK_MONOTONIC, &t.first_run);
	/* After the probe (which runs on vCPU 0): the entry point, or the
	 * saved state. */
	if (probe_host(&vm, &cfg) ||
	    (cfg.restore ? restore(&vm, &cfg, &in, &res) : kvm_arch_boot_vcpu(&vm, entry)))
		goto out;
	clock_gettime(CLOCK_MONOTONIC, &t.guest_start);
	if (cfg.probe_only) {
		status = VMM_EXIT_CLEAN;
		goto out;
	}
	if (vm_start_vcpus(&vm) == 0)
		vm_wait(&vm, sig_fd);
	int stuck = vm_join_vcpus(&vm, VCPU_JOIN_TIMEOUT_MS);
	clock_gettime(CLOCK_MONOTONIC, &t.joined);

	enum vm_stop why = vm_stopped(&vm);
	status = vm_exit_status(why);
	if (stuck >= 0) {
		/* Its thread may still touch guest memory, the devices and the
		 * vsock sockets, so none of them is released: the process exit
		 * takes the thread with it. Only the socket file is ours to
		 * remove. */
		vmm_err("%s; vCPU %d did not leave KVM_RUN within %d ms, exiting without teardown",
			vm.stop_msg, stuck, VCPU_JOIN_TIMEOUT_MS);
		if (cfg.vsock_uds)
			unlink(cfg.vsock_uds);
		_exit(status == VMM_EXIT_CLEAN ? VMM_EXIT_GUEST : status);
	}
	if (why == VM_STOP_SNAPSHOT && vm_snapshot_write(&vm, &snap))
		status = VMM_EXIT_SETUP;
	else if (why == VM_STOP_PAUSE && vm_pause_write(&vm, &pause))
		status = VMM_EXIT_SETUP;
	else if (cfg.snapshot_out && why != VM_STOP_SNAPSHOT)
		vmm_err("the guest stopped before its agent was ready for a snapshot: %s", vm.stop_msg);
	else if (status != VMM_EXIT_CLEAN)
		vmm_err("%s", vm.stop_msg);
	if (cfg.snapshot_out && why != VM_STOP_SNAPSHOT)
		status = status == VMM_EXIT_CLEAN ? VMM_EXIT_GUEST : status;
	char faults[400];
	virtio_devices_faults(&vm, faults, sizeof(faults));
	if (faults[0])
		vmm_err(VMM_FAULTS_TAG "%s", faults);
out:
	vm_snapshot_out_release(&snap);
	vm_pause_out_release(&pause);
	vm_resume_release(&res);
	vm_restore_release(&in);
	virtio_devices_release(&vm);
	evl_release(&vm.evl);
	console_close(&vm.console);
	clock_gettime(CLOCK_MONOTONIC, &t.end);
	if (cfg.stats && vm.mem.base)
		print_stats(&vm, &t);
	kvm_release(&vm);
	guest_mem_release(&vm.mem);
	if (vm.serial.out)
		serial_release(&vm.serial);
	if (vm.stop_efd >= 0)
		close(vm.stop_efd);
	if (sig_fd >= 0)
		close(sig_fd);
	return status;
}
