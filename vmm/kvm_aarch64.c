/* aarch64 side of the VMM: the in-kernel GIC (v3, else v2) and arch timer,
 * vCPUs initialised for KVM's preferred target with PSCI, the boot register
 * state of arm64 booting.rst, the Image and its device tree in guest RAM,
 * and the UART on the MMIO bus. Secondary vCPUs start powered off; the
 * guest starts them with PSCI CPU_ON, which KVM answers in the kernel, as
 * it does SYSTEM_OFF and SYSTEM_RESET (they reach vm.c as system events). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <asm/ptrace.h>

#include "args.h"
#include "fdt_aarch64.h"
#include "kvm_arch.h"
#include "layout_aarch64.h"
#include "loader_aarch64.h"
#include "log.h"

const struct kvm_cap_req kvm_arch_caps[] = {
	{ KVM_CAP_ARM_PSCI_0_2, "KVM_CAP_ARM_PSCI_0_2" },
	{ KVM_CAP_DEVICE_CTRL, "KVM_CAP_DEVICE_CTRL" },
	{ KVM_CAP_ONE_REG, "KVM_CAP_ONE_REG" },
	{ 0, NULL },
};

/* Devices below 2 GiB, RAM from there: all of RAM lies above the "gap". */
const uint64_t kvm_arch_ram_gap_start = 0, kvm_arch_ram_gap_end = AARCH64_RAM_BASE;
const bool kvm_arch_virtio_on_cmdline = false;
/* 2 MiB: with the mapping unaligned, KVM mapped the guest's RAM a 4 KiB
 * page per stage-2 fault though the host backs it with huge pages, and
 * the guest kernel's boot to its root mount took ~830 ms of its own
 * clock on the emulated aarch64 host against ~355 aligned (BENCHMARKS.md). */
const uint64_t kvm_arch_ram_align = 2u << 20;

_Static_assert(VMM_MAX_CPUS <= AARCH64_MAX_VCPUS, "the GIC's redistributors cover every vCPU --cpus allows");

/* GIC INTIDs: SPI n is INTID 32 + n. The GIC gets as many as the highest
 * SPI here needs, rounded up to KVM's multiple of 32. */
#define GIC_SPI_INTID(spi) (32u + (spi))
#define GIC_NR_IRQS (((GIC_SPI_INTID(AARCH64_VIRTIO_SPI_BASE + AARCH64_VIRTIO_SLOTS) + 31u) / 32u) * 32u)

/* The id of one 64-bit core register for KVM_{GET,SET}_ONE_REG. */
#define CORE_REG(field) \
	(KVM_REG_ARM64 | KVM_REG_SIZE_U64 | KVM_REG_ARM_CORE | KVM_REG_ARM_CORE_REG(field))

static int gic_attr(int fd, uint32_t group, uint64_t attr, const void *value, const char *what)
{
	struct kvm_device_attr a = { .group = group, .attr = attr, .addr = (uint64_t)(uintptr_t)value };
	if (ioctl(fd, KVM_SET_DEVICE_ATTR, &a) < 0) {
		vmm_perr("GIC: %s", what);
		return -1;
	}
	return 0;
}

/* Create the GIC of type and place its frames; -1 with errno set, and
 * nothing printed, when the host has no GIC of that type. */
static int gic_create(struct vm *vm, uint32_t type)
{
	struct kvm_create_device d = { .type = type };
	if (ioctl(vm->vm_fd, KVM_CREATE_DEVICE, &d) < 0)
		return -1;
	vm->irqchip_fd = (int)d.fd;
	vm->irqchip_version = type == KVM_DEV_TYPE_ARM_VGIC_V3 ? 3 : 2;
	return 0;
}

int kvm_arch_vm_init(struct vm *vm)
{
	/* GICv3 where the host has it (every Graviton, any GICv3 host); a
	 * GICv2-only host (older Cortex-A57/A72 boards) gets a GICv2. KVM
	 * says ENODEV for a type it lacks: any other failure is the one to
	 * report. */
	if (gic_create(vm, KVM_DEV_TYPE_ARM_VGIC_V3) < 0) {
		int v3_errno = errno;
		if (v3_errno != ENODEV || gic_create(vm, KVM_DEV_TYPE_ARM_VGIC_V2) < 0) {
			if (v3_errno != ENODEV)
				errno = v3_errno;
			vmm_perr("KVM_CREATE_DEVICE (GICv3%s)", v3_errno == ENODEV ? ", then GICv2" : "");
			return -1;
		}
	}
	/* Creating a GICv2 capped the VM at 8 vCPUs: say so before
	 * KVM_CREATE_VCPU fails with a bare EINVAL. */
	if (vm->irqchip_version == 2 && vm->ncpus > AARCH64_GICV2_MAX_VCPUS) {
		vmm_err("this host's KVM has only a GICv2, which takes at most %u vCPUs", AARCH64_GICV2_MAX_VCPUS);
		return -1;
	}
	uint64_t dist = AARCH64_GIC_DIST_BASE;
	uint32_t nr_irqs = GIC_NR_IRQS;
	if (vm->irqchip_version == 3) {
		uint64_t redist = AARCH64_GIC_REDIST_BASE;
		if (gic_attr(vm->irqchip_fd, KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V3_ADDR_TYPE_DIST, &dist,
			     "distributor address") ||
		    gic_attr(vm->irqchip_fd, KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V3_ADDR_TYPE_REDIST, &redist,
			     "redistributor address"))
			return -1;
	} else {
		uint64_t cpu = AARCH64_GIC_CPU_BASE;
		if (gic_attr(vm->irqchip_fd, KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V2_ADDR_TYPE_DIST, &dist,
			     "distributor address") ||
		    gic_attr(vm->irqchip_fd, KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V2_ADDR_TYPE_CPU, &cpu,
			     "CPU interface address"))
			return -1;
	}
	return gic_attr(vm->irqchip_fd, KVM_DEV_ARM_VGIC_GRP_NR_IRQS, 0, &nr_irqs, "number of interrupts");
}

int kvm_arch_vcpus_init(struct vm *vm)
{
	struct kvm_vcpu_init init;
	if (ioctl(vm->vm_fd, KVM_ARM_PREFERRED_TARGET, &init) < 0) {
		vmm_perr("KVM_ARM_PREFERRED_TARGET");
		return -1;
	}
	init.features[0] |= 1u << KVM_ARM_VCPU_PSCI_0_2;
	for (unsigned i = 0; i < vm->ncpus; i++) {
		struct kvm_vcpu_init vi = init;
		/* Secondaries wait, powered off, for the guest's PSCI CPU_ON. */
		if (i > 0)
			vi.features[0] |= 1u << KVM_ARM_VCPU_POWER_OFF;
		if (ioctl(vm->vcpus[i].fd, KVM_ARM_VCPU_INIT, &vi) < 0) {
			vmm_perr("KVM_ARM_VCPU_INIT (vCPU %u)", i);
			return -1;
		}
	}
	/* The GIC sizes its redistributors by the vCPUs, so it is
	 * initialised only once every vCPU is; then its fd is no longer
	 * needed (the GIC lives as long as the VM). */
	int rc = gic_attr(vm->irqchip_fd, KVM_DEV_ARM_VGIC_GRP_CTRL, KVM_DEV_ARM_VGIC_CTRL_INIT, NULL, "init");
	close(vm->irqchip_fd);
	vm->irqchip_fd = -1;
	return rc;
}

static int set_core_reg(struct vcpu *v, uint64_t id, uint64_t value, const char *name)
{
	struct kvm_one_reg r = { .id = id, .addr = (uint64_t)(uintptr_t)&value };
	if (ioctl(v->fd, KVM_SET_ONE_REG, &r) < 0) {
		vmm_perr("KVM_SET_ONE_REG %s", name);
		return -1;
	}
	return 0;
}

/* booting.rst: x0 the tree's physical address, x1-x3 zero, MMU off, at
 * the Image's first byte in EL1h with every exception masked. KVM resets
 * a vCPU with its MMU and caches off and x1-x3 zero. */
int kvm_arch_boot_vcpu(struct vm *vm, uint64_t entry)
{
	struct vcpu *v = &vm->vcpus[0];
	return set_core_reg(v, CORE_REG(regs.pstate), PSR_MODE_EL1h | PSR_D_BIT | PSR_A_BIT | PSR_I_BIT | PSR_F_BIT,
			    "pstate") ||
	       set_core_reg(v, CORE_REG(regs.regs[0]), arm64_fdt_addr(vm->mem.size), "x0") ||
	       set_core_reg(v, CORE_REG(regs.pc), entry, "pc");
}

const char kvm_arch_pc_name[] = "pc";
const unsigned long kvm_arch_pc_ioctl = KVM_GET_ONE_REG;

int kvm_arch_vcpu_pc(struct vcpu *v, uint64_t *pc)
{
	struct kvm_one_reg r = { .id = CORE_REG(regs.pc), .addr = (uint64_t)(uintptr_t)pc };
	return ioctl(v->fd, KVM_GET_ONE_REG, &r) < 0 ? -1 : 0;
}

int kvm_arch_load_kernel(struct vm *vm, const uint8_t *img, size_t len, const char *cmdline, unsigned ncpus,
			 uint64_t *entry)
{
	(void)cmdline;   /* it goes in the device tree, once KVM has said which GIC */
	(void)ncpus;
	char err[160];
	struct arm64_image_plan plan;
	if (arm64_image_plan(img, len, vm->mem.size, &plan, err, sizeof(err))) {
		vmm_err("%s", err);
		return -1;
	}
	uint8_t *dst = guest_mem_ptr(&vm->mem, plan.load, len);
	if (!dst) {
		vmm_err("kernel: the Image does not fit in guest RAM");
		return -1;
	}
	memcpy(dst, img, len);
	*entry = plan.load;
	return 0;
}

int kvm_arch_boot_finish(struct vm *vm, const char *cmdline)
{
	struct fdt_virtio virtio[VM_MAX_VIRTIO];
	for (unsigned i = 0; i < vm->nvirtio; i++)
		virtio[i] = (struct fdt_virtio){ .base = vm->virtio[i]->base, .spi = vm->virtio[i]->irq };
	struct fdt_vm fv = {
		.mem_base = AARCH64_RAM_BASE,
		.mem_size = vm->mem.size,
		.ncpus = vm->ncpus,
		.gic_version = vm->irqchip_version,
		.bootargs = cmdline,
		.virtio = virtio,
		.nvirtio = vm->nvirtio,
	};
	void *buf = guest_mem_ptr(&vm->mem, arm64_fdt_addr(vm->mem.size), AARCH64_FDT_MAX);
	char err[160];
	if (!buf || fdt_aarch64_build(&fv, buf, AARCH64_FDT_MAX, err, sizeof(err)) < 0) {
		vmm_err("%s", buf ? err : "device tree: outside guest RAM");
		return -1;
	}
	return 0;
}

/* The x86 probe exists because PVM hosts run guest kernel code in KVM's
 * instruction emulator; arm64 KVM has no such mode (a vCPU runs on the
 * CPU or not at all), so there is nothing to time. */
int kvm_arch_probe_emulation(struct vm *vm, bool *emulated)
{
	(void)vm;
	*emulated = false;
	return 0;
}

int kvm_arch_probe_revert(struct vm *vm)
{
	(void)vm;
	return 0;
}

/* The UART's interrupt is a level SPI: KVM_IRQ_LINE with the SPI's INTID. */
static void set_irq_line(void *ctx, unsigned spi, int level)
{
	struct vm *vm = ctx;
	struct kvm_irq_level l = {
		.irq = (KVM_ARM_IRQ_TYPE_SPI << KVM_ARM_IRQ_TYPE_SHIFT) | GIC_SPI_INTID(spi),
		.level = (uint32_t)level,
	};
	/* As on x86: a lost line leaves the guest's driver polling. */
	(void)ioctl(vm->vm_fd, KVM_IRQ_LINE, &l);
}

int kvm_arch_devices_init(struct vm *vm)
{
	if (serial_init(&vm->serial, &vm->console, AARCH64_UART_SPI, set_irq_line, vm)) {
		vmm_err("serial: cannot initialise its lock");
		return -1;
	}
	/* Its 8 registers one byte apart, as the tree's ns16550a node says
	 * (no reg-shift); the rest of its 4 KiB window is unclaimed. */
	return bus_register(&vm->mmio, AARCH64_UART_BASE, SERIAL_NREGS, serial_read, serial_write, &vm->serial);
}

int kvm_arch_virtio_slot(unsigned i, uint64_t *base, unsigned *irq)
{
	if (i >= AARCH64_VIRTIO_SLOTS)
		return -1;
	*base = AARCH64_VIRTIO_MMIO_BASE + i * AARCH64_VIRTIO_SLOT_SIZE;
	*irq = AARCH64_VIRTIO_SPI_BASE + i;   /* irqfd's GSI n is SPI n on arm64 */
	return 0;
}
