/* x86_64 side of the VMM: in-kernel irqchip and PIT, vCPU CPUID, MSRs and
 * local APIC, the boot register state, the emulation probe and the legacy
 * devices (COM1, i8042 reset). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#include "args.h"
#include "boot_x86_64.h"
#include "cpuid_x86_64.h"
#include "kvm_arch.h"
#include "layout_x86_64.h"
#include "loader_x86_64.h"
#include "log.h"

const struct kvm_cap_req kvm_arch_caps[] = {
	{ KVM_CAP_PIT2, "KVM_CAP_PIT2" },
	{ KVM_CAP_EXT_CPUID, "KVM_CAP_EXT_CPUID" },
	{ KVM_CAP_SET_TSS_ADDR, "KVM_CAP_SET_TSS_ADDR" },
	{ KVM_CAP_GET_TSC_KHZ, "KVM_CAP_GET_TSC_KHZ" },
	{ 0, NULL },
};

const uint64_t kvm_arch_ram_gap_start = MMIO_GAP_START, kvm_arch_ram_gap_end = MMIO_GAP_END;
const bool kvm_arch_virtio_on_cmdline = true;
/* Not aligned: on the emulated x86 KVM host aligned guest memory made
 * restores 3-4x slower (each first write to a 2 MiB page zeroes all of it
 * under TCG; BENCHMARKS.md, session 24). */
const uint64_t kvm_arch_ram_align = 0;

_Static_assert(VMM_MAX_CPUS <= MPTABLE_MAX_CPUS, "the MP table lists every vCPU --cpus allows");
_Static_assert(VMM_CMDLINE_MAX <= COMMAND_LINE_MAX, "every command line vmm builds fits its guest page");

int kvm_arch_load_kernel(struct vm *vm, const uint8_t *img, size_t len, const char *cmdline, unsigned ncpus,
			 uint64_t *entry)
{
	struct kernel_image k;
	if (kernel_load_x86_64(&vm->mem, img, len, &k) || boot_write_tables_x86_64(&vm->mem, &k, cmdline, ncpus))
		return -1;
	*entry = k.entry;
	return 0;
}

int kvm_arch_boot_finish(struct vm *vm, const char *cmdline)
{
	(void)vm;
	(void)cmdline;   /* the zero page has it already: nothing here depends on KVM */
	return 0;
}

const char kvm_arch_pc_name[] = "rip";
const unsigned long kvm_arch_pc_ioctl = KVM_GET_REGS;

int kvm_arch_vcpu_pc(struct vcpu *v, uint64_t *pc)
{
	struct kvm_regs regs;
	if (ioctl(v->fd, KVM_GET_REGS, &regs) < 0)
		return -1;
	*pc = regs.rip;
	return 0;
}

/* MSR numbers (Intel SDM vol. 4); not part of the kernel UAPI. */
#define MSR_IA32_SYSENTER_CS  0x174
#define MSR_IA32_SYSENTER_ESP 0x175
#define MSR_IA32_SYSENTER_EIP 0x176
#define MSR_IA32_MISC_ENABLE  0x1a0
#define MSR_MTRR_DEF_TYPE     0x2ff
#define MSR_STAR              0xc0000081
#define MSR_LSTAR             0xc0000082
#define MSR_CSTAR             0xc0000083
#define MSR_SYSCALL_MASK      0xc0000084
#define MSR_KERNEL_GS_BASE    0xc0000102
#define MISC_ENABLE_FAST_STRING 0x1ULL
#define MTRR_ENABLE_WRITEBACK ((1ULL << 11) | 6)

/* Local APIC register offsets and LVT delivery modes (SDM vol. 3, 10.5.1). */
#define APIC_LVT0 0x350
#define APIC_LVT1 0x360
#define APIC_DM_MASK   0x700u
#define APIC_DM_NMI    0x400u
#define APIC_DM_EXTINT 0x700u

#define CPUID_MAX_ENTRIES  256

/* A port nothing else uses; only the probe writes it, before boot. */
#define PROBE_PORT 0x0e10

int kvm_arch_vm_init(struct vm *vm)
{
	if (ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, (unsigned long)KVM_TSS_ADDR) < 0) {
		vmm_perr("KVM_SET_TSS_ADDR");
		return -1;
	}
	if (ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0) {
		vmm_perr("KVM_CREATE_IRQCHIP");
		return -1;
	}
	/* No KVM_PIT_SPEAKER_DUMMY: port 0x61 must gate PIT channel 2, or
	 * the guest's TSC calibration against the PIT can hang. */
	struct kvm_pit_config pit = { .flags = 0 };
	if (ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pit) < 0) {
		vmm_perr("KVM_CREATE_PIT2");
		return -1;
	}
	return 0;
}

static struct kvm_cpuid2 *supported_cpuid(int kvm_fd)
{
	size_t bytes = sizeof(struct kvm_cpuid2) +
		       (CPUID_MAX_ENTRIES + CPUID_EXTRA_ENTRIES) * sizeof(struct kvm_cpuid_entry2);
	struct kvm_cpuid2 *c = calloc(1, bytes);
	if (!c) {
		vmm_err("out of memory for CPUID");
		return NULL;
	}
	c->nent = CPUID_MAX_ENTRIES;
	if (ioctl(kvm_fd, KVM_GET_SUPPORTED_CPUID, c) < 0) {
		vmm_perr("KVM_GET_SUPPORTED_CPUID");
		free(c);
		return NULL;
	}
	return c;
}

uint64_t kvm_arch_host_cpu(struct vm *vm)
{
	struct kvm_cpuid2 *c = supported_cpuid(vm->kvm_fd);
	if (!c)
		return 0;
	uint64_t h = snap_checksum((const uint8_t *)c->entries, c->nent * sizeof(c->entries[0]));
	free(c);
	/* A TSC of another frequency would make the restored guest's clock
	 * run at the wrong speed: part of "another CPU". */
	int khz = vm->vcpus[0].fd >= 0 ? ioctl(vm->vcpus[0].fd, KVM_GET_TSC_KHZ, 0) : -1;
	return (h ^ (khz > 0 ? (uint64_t)khz : 0)) * 0x100000001b3ull;
}

static int set_cpuid(struct vcpu *v, const struct kvm_cpuid2 *base, struct kvm_cpuid2 *scratch, bool tsc_deadline)
{
	int khz = ioctl(v->fd, KVM_GET_TSC_KHZ, 0);
	memcpy(scratch->entries, base->entries, base->nent * sizeof(base->entries[0]));
	scratch->nent = cpuid_patch(scratch->entries, base->nent, CPUID_MAX_ENTRIES + CPUID_EXTRA_ENTRIES,
				    v->index, v->vm->ncpus, khz > 0 ? (uint32_t)khz : 0, tsc_deadline);
	if (ioctl(v->fd, KVM_SET_CPUID2, scratch) < 0) {
		vmm_perr("KVM_SET_CPUID2 (vCPU %u)", v->index);
		return -1;
	}
	return 0;
}

static int set_msrs(struct vcpu *v)
{
	static const uint32_t zeroed[] = {
		MSR_IA32_SYSENTER_CS, MSR_IA32_SYSENTER_ESP, MSR_IA32_SYSENTER_EIP, MSR_STAR,
		MSR_LSTAR, MSR_CSTAR, MSR_SYSCALL_MASK, MSR_KERNEL_GS_BASE,
	};
	enum { N = sizeof(zeroed) / sizeof(zeroed[0]) + 2 };
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e[N];
	} m = { .hdr.nmsrs = N };
	unsigned i = 0;
	for (; i < N - 2; i++)
		m.e[i].index = zeroed[i];
	m.e[i++] = (struct kvm_msr_entry){ .index = MSR_IA32_MISC_ENABLE, .data = MISC_ENABLE_FAST_STRING };
	m.e[i++] = (struct kvm_msr_entry){ .index = MSR_MTRR_DEF_TYPE, .data = MTRR_ENABLE_WRITEBACK };
	int set = ioctl(v->fd, KVM_SET_MSRS, &m);
	if (set != N) {
		if (set < 0)
			vmm_perr("KVM_SET_MSRS (vCPU %u)", v->index);
		else
			vmm_err("KVM_SET_MSRS (vCPU %u): MSR 0x%x refused", v->index, m.e[set].index);
		return -1;
	}
	return 0;
}

static uint32_t lvt_mode(const struct kvm_lapic_state *l, unsigned reg, uint32_t mode)
{
	uint32_t v;
	memcpy(&v, &l->regs[reg], sizeof(v));
	return (v & ~APIC_DM_MASK) | mode;
}

/* LINT0 carries the 8259's ExtINT and LINT1 the NMI, as on a PC. */
static int set_lint(struct vcpu *v)
{
	struct kvm_lapic_state l;
	if (ioctl(v->fd, KVM_GET_LAPIC, &l) < 0) {
		vmm_perr("KVM_GET_LAPIC (vCPU %u)", v->index);
		return -1;
	}
	uint32_t lvt0 = lvt_mode(&l, APIC_LVT0, APIC_DM_EXTINT);
	uint32_t lvt1 = lvt_mode(&l, APIC_LVT1, APIC_DM_NMI);
	memcpy(&l.regs[APIC_LVT0], &lvt0, sizeof(lvt0));
	memcpy(&l.regs[APIC_LVT1], &lvt1, sizeof(lvt1));
	if (ioctl(v->fd, KVM_SET_LAPIC, &l) < 0) {
		vmm_perr("KVM_SET_LAPIC (vCPU %u)", v->index);
		return -1;
	}
	return 0;
}

int kvm_arch_vcpus_init(struct vm *vm)
{
	struct kvm_cpuid2 *base = supported_cpuid(vm->kvm_fd);
	struct kvm_cpuid2 *scratch = base ? calloc(1, sizeof(*scratch) + (CPUID_MAX_ENTRIES + CPUID_EXTRA_ENTRIES) *
								     sizeof(struct kvm_cpuid_entry2)) : NULL;
	int rc = -1;
	if (!scratch)
		goto out;
	bool tsc_deadline = ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_TSC_DEADLINE_TIMER) > 0;
	for (unsigned i = 0; i < vm->ncpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		if (set_cpuid(v, base, scratch, tsc_deadline) || set_msrs(v) || set_lint(v))
			goto out;
	}
	rc = 0;
out:
	free(scratch);
	free(base);
	return rc;
}

static int set_regs(struct vcpu *v, uint64_t rip, uint64_t rax)
{
	struct kvm_regs r = {
		.rip = rip,
		.rax = rax,
		.rsi = ZERO_PAGE_ADDR,        /* boot protocol: rsi points at boot_params */
		.rsp = BOOT_STACK_TOP,
		.rbp = BOOT_STACK_TOP,
		.rflags = 0x2,                /* bit 1 is reserved and reads as one */
	};
	if (ioctl(v->fd, KVM_SET_REGS, &r) < 0) {
		vmm_perr("KVM_SET_REGS");
		return -1;
	}
	return 0;
}

int kvm_arch_boot_vcpu(struct vm *vm, uint64_t entry)
{
	struct vcpu *v = &vm->vcpus[0];
	struct kvm_sregs s;
	if (ioctl(v->fd, KVM_GET_SREGS, &s) < 0) {
		vmm_perr("KVM_GET_SREGS");
		return -1;
	}
	boot_sregs_x86_64(&s);
	if (ioctl(v->fd, KVM_SET_SREGS, &s) < 0) {
		vmm_perr("KVM_SET_SREGS");
		return -1;
	}
	struct kvm_fpu fpu = { .fcw = 0x37f, .mxcsr = 0x1f80 };   /* FNINIT/power-on values */
	if (ioctl(v->fd, KVM_SET_FPU, &fpu) < 0) {
		vmm_perr("KVM_SET_FPU");
		return -1;
	}
	return set_regs(v, entry, 0);
}

/* A timed ring-0 loop. On hardware virtualization it runs at ~1 cycle per
 * iteration; where KVM runs guest kernel code in its instruction emulator
 * (PVM hosts, for guests that are not PVM guests) it was measured ~2000x
 * slower. The emulator even handles popcnt and cmpxchg16b there, so timing,
 * not an instruction, is the probe:
 *   rdtsc; shl $32,%rdx; or %rdx,%rax; mov %rax,%rsi
 *   mov $PROBE_LOOPS,%ecx; 1: dec %ecx; jnz 1b
 *   rdtsc; shl $32,%rdx; or %rdx,%rax; sub %rsi,%rax
 *   movabs $PROBE_DATA,%rdi; mov %rax,(%rdi)
 *   mov $PROBE_PORT,%dx; out %al,(%dx); hlt */
#define PROBE_DATA  (PROBE_CODE_ADDR + 0x800)
#define PROBE_LOOPS 20000
/* Hardware runs ~1 cycle an iteration, a nested TCG host ~100; KVM's emulator thousands. */
#define PROBE_EMULATED_CYCLES 1000
static const uint8_t probe_code[] = {
	0x0f, 0x31, 0x48, 0xc1, 0xe2, 0x20, 0x48, 0x09, 0xd0, 0x48, 0x89, 0xc6,
	0xb9, PROBE_LOOPS & 0xff, (PROBE_LOOPS >> 8) & 0xff, 0, 0,
	0xff, 0xc9, 0x75, 0xfc,
	0x0f, 0x31, 0x48, 0xc1, 0xe2, 0x20, 0x48, 0x09, 0xd0, 0x48, 0x29, 0xf0,
	0x48, 0xbf, PROBE_DATA & 0xff, (PROBE_DATA >> 8) & 0xff, 0, 0, 0, 0, 0, 0,
	0x48, 0x89, 0x07,
	0x66, 0xba, PROBE_PORT & 0xff, PROBE_PORT >> 8,
	0xee,
	0xf4,
};
_Static_assert(sizeof(probe_code) <= PROBE_DATA - PROBE_CODE_ADDR, "probe code below its data");
_Static_assert(PROBE_DATA + 8 <= PROBE_CODE_ADDR + PROBE_CODE_SIZE, "probe data inside the probe page");
_Static_assert(PROBE_LOOPS < 0x10000, "loop count fits the encoded immediate");

/* One timed round from the probe's entry: its TSC cycles, or -1 after one
 * error line. *internal is set where KVM could not run the code at all. */
static int probe_round(struct vm *vm, uint8_t *code, uint64_t *cycles, bool *internal)
{
	struct vcpu *v = &vm->vcpus[0];
	*internal = false;
	if (kvm_arch_boot_vcpu(vm, PROBE_CODE_ADDR))
		return -1;
	memcpy(code, probe_code, sizeof(probe_code));
	int rc;
	do
		rc = ioctl(v->fd, KVM_RUN, 0);
	while (rc < 0 && (errno == EINTR || errno == EAGAIN));
	if (rc < 0) {
		vmm_perr("KVM_RUN (host probe)");
		return -1;
	}
	struct kvm_run *r = v->run;
	if (r->exit_reason == KVM_EXIT_INTERNAL_ERROR) {
		*internal = true;
		return 0;
	}
	if (r->exit_reason != KVM_EXIT_IO || r->io.direction != KVM_EXIT_IO_OUT || r->io.port != PROBE_PORT) {
		vmm_err("host probe: unexpected KVM exit %u", r->exit_reason);
		return -1;
	}
	memcpy(cycles, code + (PROBE_DATA - PROBE_CODE_ADDR), sizeof(*cycles));
	return 0;
}

/* The loop is timed by the TSC, i.e. in wall time, so a round during which
 * the host descheduled the vCPU reads slow: under load (several VMs on one
 * emulated CPU) one round was measured at 1520 cycles per loop. Preemption
 * only ever adds cycles, so a round that reads as emulated is retried and
 * the fastest kept; hardware passes the first round and pays nothing. */
#define PROBE_ROUNDS 5

int kvm_arch_probe_emulation(struct vm *vm, bool *emulated)
{
	*emulated = false;
	uint8_t *code = guest_mem_ptr(&vm->mem, PROBE_CODE_ADDR, PROBE_CODE_SIZE);
	if (!code)
		return -1;
	uint64_t best = UINT64_MAX;
	int rc = 0;
	for (int i = 0; i < PROBE_ROUNDS && best / PROBE_LOOPS > PROBE_EMULATED_CYCLES; i++) {
		uint64_t cycles;
		bool internal;
		rc = probe_round(vm, code, &cycles, &internal);
		if (rc || internal) {
			*emulated = internal;
			break;
		}
		if (cycles < best)
			best = cycles;
	}
	memset(code, 0, PROBE_CODE_SIZE);
	if (rc || *emulated)
		return rc;
	vm->probe_cycles_per_loop = best / PROBE_LOOPS;
	*emulated = vm->probe_cycles_per_loop > PROBE_EMULATED_CYCLES;
	return 0;
}
int kvm_arch_probe_revert(struct vm *vm)
{
	return guest_mem_revert(&vm->mem, PROBE_CODE_ADDR, PROBE_CODE_SIZE);
}

static void reset_line(void *ctx)
{
	vm_request_stop(ctx, VM_STOP_RESET, "guest reset");
}

static void set_irq_line(void *ctx, unsigned irq, int level)
{
	struct vm *vm = ctx;
	struct kvm_irq_level l = { .irq = irq, .level = (uint32_t)level };
	/* Failure here means KVM lost the irqchip; the guest then sees no
	 * console interrupt and falls back to polling, which is survivable. */
	(void)ioctl(vm->vm_fd, KVM_IRQ_LINE, &l);
}

int kvm_arch_devices_init(struct vm *vm)
{
	if (serial_init(&vm->serial, &vm->console, SERIAL_COM1_IRQ, set_irq_line, vm)) {
		vmm_err("serial: cannot initialise its lock");
		return -1;
	}
	vm->i8042 = (struct i8042){ .reset = reset_line, .ctx = vm };
	if (bus_register(&vm->pio, SERIAL_COM1_BASE, SERIAL_NREGS, serial_read, serial_write, &vm->serial) ||
	    bus_register(&vm->pio, I8042_DATA_PORT, 1, i8042_read, i8042_write_data, &vm->i8042) ||
	    bus_register(&vm->pio, I8042_COMMAND_PORT, 1, i8042_read, i8042_write_command, &vm->i8042))
		return -1;
	return 0;
}

int kvm_arch_virtio_slot(unsigned i, uint64_t *base, unsigned *irq)
{
	if (i >= VIRTIO_SLOTS)
		return -1;
	*base = VIRTIO_MMIO_BASE + i * VIRTIO_SLOT_SIZE;
	*irq = VIRTIO_IRQ_BASE + i;
	return 0;
}
