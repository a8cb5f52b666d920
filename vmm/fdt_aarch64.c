#include "fdt_aarch64.h"

#include <libfdt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The GIC's phandle: every interrupt in the tree refers to it. */
#define GIC_PHANDLE 1u

/* A tree being written: the first libfdt error stops every later call, so
 * the builders stay straight-line and the error is checked once. */
struct tree {
	void *fdt;
	int err;
	const char *what;   /* the call that failed */
};

static void check(struct tree *t, int r, const char *what)
{
	if (r < 0 && !t->err) {
		t->err = r;
		t->what = what;
	}
}

static void begin(struct tree *t, const char *name)
{
	if (!t->err)
		check(t, fdt_begin_node(t->fdt, name), name);
}

static void end(struct tree *t)
{
	if (!t->err)
		check(t, fdt_end_node(t->fdt), "end node");
}

static void prop_str(struct tree *t, const char *name, const char *v)
{
	if (!t->err)
		check(t, fdt_property_string(t->fdt, name, v), name);
}

static void prop_u32(struct tree *t, const char *name, uint32_t v)
{
	if (!t->err)
		check(t, fdt_property_u32(t->fdt, name, v), name);
}

static void prop_empty(struct tree *t, const char *name)
{
	if (!t->err)
		check(t, fdt_property(t->fdt, name, NULL, 0), name);
}

/* A property of n big-endian 32-bit cells. */
static void prop_cells(struct tree *t, const char *name, const uint32_t *cells, unsigned n)
{
	fdt32_t be[16];
	for (unsigned i = 0; i < n && i < 16; i++)
		be[i] = cpu_to_fdt32(cells[i]);
	if (!t->err)
		check(t, fdt_property(t->fdt, name, be, (int)(n * sizeof(be[0]))), name);
}

/* reg of (address, size) pairs, two cells each (the root's #address-cells
 * and #size-cells). */
static void prop_reg(struct tree *t, const uint64_t *pairs, unsigned npairs)
{
	uint32_t c[16];
	for (unsigned i = 0; i < 2 * npairs && i < 8; i++) {
		c[2 * i] = (uint32_t)(pairs[i] >> 32);
		c[2 * i + 1] = (uint32_t)pairs[i];
	}
	prop_cells(t, "reg", c, 4 * npairs);
}

static void node_name(char *buf, size_t len, const char *name, uint64_t addr)
{
	snprintf(buf, len, "%s@%llx", name, (unsigned long long)addr);
}

static void cpus(struct tree *t, unsigned n)
{
	begin(t, "cpus");
	prop_u32(t, "#address-cells", 1);
	prop_u32(t, "#size-cells", 0);
	for (unsigned i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof(name), "cpu@%x", i);
		begin(t, name);
		prop_str(t, "device_type", "cpu");
		prop_str(t, "compatible", "arm,arm-v8");
		/* MPIDR affinity 0: vCPU i is Aff0 i, as KVM numbers them */
		prop_u32(t, "reg", i);
		prop_str(t, "enable-method", "psci");
		end(t);
	}
	end(t);
}

/* PSCI 0.2 and later through HVC: KVM implements it (CPU_ON for the
 * secondaries, SYSTEM_RESET and SYSTEM_OFF as system events). */
static void psci(struct tree *t)
{
	static const char compat[] = "arm,psci-1.0\0arm,psci-0.2";
	begin(t, "psci");
	if (!t->err)
		check(t, fdt_property(t->fdt, "compatible", compat, sizeof(compat)), "psci compatible");
	prop_str(t, "method", "hvc");
	end(t);
}

static void gic(struct tree *t, const struct fdt_vm *vm)
{
	char name[40];
	node_name(name, sizeof(name), "intc", AARCH64_GIC_DIST_BASE);
	begin(t, name);
	if (vm->gic_version == 3) {
		prop_str(t, "compatible", "arm,gic-v3");
		const uint64_t reg[] = { AARCH64_GIC_DIST_BASE, AARCH64_GIC_DIST_SIZE, AARCH64_GIC_REDIST_BASE,
					 AARCH64_GIC_REDIST_SIZE * vm->ncpus };
		prop_reg(t, reg, 2);
	} else {
		prop_str(t, "compatible", "arm,cortex-a15-gic");
		const uint64_t reg[] = { AARCH64_GIC_DIST_BASE, AARCH64_GIC_DIST_SIZE, AARCH64_GIC_CPU_BASE,
					 AARCH64_GIC_CPU_SIZE };
		prop_reg(t, reg, 2);
	}
	prop_u32(t, "#interrupt-cells", 3);
	/* an interrupt provider's own address cells (dtc checks them): as the
	 * root's, for an ITS or v2m frame a later tree may put below it */
	prop_u32(t, "#address-cells", 2);
	prop_u32(t, "#size-cells", 2);
	prop_empty(t, "ranges");
	prop_empty(t, "interrupt-controller");
	prop_u32(t, "phandle", GIC_PHANDLE);
	end(t);
}

/* The arch timer's four PPIs, level low as KVM raises them; GICv2 wants
 * the PPIs' CPU mask in the flags too. */
static void timer(struct tree *t, const struct fdt_vm *vm)
{
	uint32_t flags = AARCH64_IRQ_LEVEL_LOW;
	if (vm->gic_version == 2)
		flags |= ((1u << vm->ncpus) - 1) << 8;
	const uint32_t irqs[] = {
		AARCH64_GIC_PPI, AARCH64_TIMER_PPI_SEC, flags,  AARCH64_GIC_PPI, AARCH64_TIMER_PPI_NONSEC, flags,
		AARCH64_GIC_PPI, AARCH64_TIMER_PPI_VIRT, flags, AARCH64_GIC_PPI, AARCH64_TIMER_PPI_HYP, flags,
	};
	begin(t, "timer");
	prop_str(t, "compatible", "arm,armv8-timer");
	prop_cells(t, "interrupts", irqs, 12);
	prop_empty(t, "always-on");
	end(t);
}

static void uart(struct tree *t, const char *name)
{
	const uint64_t reg[] = { AARCH64_UART_BASE, AARCH64_UART_SIZE };
	const uint32_t irq[] = { AARCH64_GIC_SPI, AARCH64_UART_SPI, AARCH64_IRQ_LEVEL_HIGH };
	begin(t, name);
	prop_str(t, "compatible", "ns16550a");
	prop_reg(t, reg, 1);
	prop_cells(t, "interrupts", irq, 3);
	prop_u32(t, "clock-frequency", AARCH64_UART_CLOCK_HZ);
	end(t);
}

static void virtio(struct tree *t, const struct fdt_virtio *v)
{
	char name[40];
	node_name(name, sizeof(name), "virtio_mmio", v->base);
	const uint64_t reg[] = { v->base, AARCH64_VIRTIO_SLOT_SIZE };
	/* irqfd injects an edge */
	const uint32_t irq[] = { AARCH64_GIC_SPI, v->spi, AARCH64_IRQ_EDGE_RISING };
	begin(t, name);
	prop_str(t, "compatible", "virtio,mmio");
	prop_reg(t, reg, 1);
	prop_cells(t, "interrupts", irq, 3);
	prop_empty(t, "dma-coherent");
	end(t);
}

/* What a tree cannot describe sensibly, or NULL. */
static const char *invalid(const struct fdt_vm *vm)
{
	if (vm->ncpus < 1 || vm->ncpus > AARCH64_MAX_VCPUS)
		return "vCPU count out of range";
	if (vm->gic_version != 2 && vm->gic_version != 3)
		return "GIC version is neither 2 nor 3";
	if (vm->gic_version == 2 && vm->ncpus > AARCH64_GICV2_MAX_VCPUS)
		return "GICv2 serves at most 8 vCPUs";
	if (!vm->mem_size || vm->mem_base + vm->mem_size < vm->mem_base)
		return "memory range is empty or wraps";
	if (vm->nvirtio > AARCH64_VIRTIO_SLOTS)
		return "more virtio devices than slots";
	for (unsigned i = 0; i < vm->nvirtio; i++)
		if (vm->virtio[i].spi >= AARCH64_GIC_MAX_SPIS)
			return "a virtio SPI beyond the GIC's";
	return NULL;
}

long fdt_aarch64_build(const struct fdt_vm *vm, void *buf, size_t len, char *err, size_t errlen)
{
	const char *bad = invalid(vm);
	if (bad) {
		snprintf(err, errlen, "device tree: %s", bad);
		return -1;
	}
	if (len > AARCH64_FDT_MAX)
		len = AARCH64_FDT_MAX;
	struct tree t = { .fdt = buf };
	char uart_name[40], stdout_path[48], mem_name[40];
	node_name(uart_name, sizeof(uart_name), "uart", AARCH64_UART_BASE);
	snprintf(stdout_path, sizeof(stdout_path), "/%s", uart_name);
	node_name(mem_name, sizeof(mem_name), "memory", vm->mem_base);
	check(&t, fdt_create(buf, (int)len), "fdt_create");
	if (!t.err)
		check(&t, fdt_finish_reservemap(buf), "reserve map");
	begin(&t, "");
	prop_str(&t, "compatible", "linux,dummy-virt");
	prop_u32(&t, "#address-cells", 2);
	prop_u32(&t, "#size-cells", 2);
	prop_u32(&t, "interrupt-parent", GIC_PHANDLE);

	begin(&t, "chosen");
	prop_str(&t, "bootargs", vm->bootargs ? vm->bootargs : "");
	prop_str(&t, "stdout-path", stdout_path);
	end(&t);

	begin(&t, mem_name);
	prop_str(&t, "device_type", "memory");
	const uint64_t mem[] = { vm->mem_base, vm->mem_size };
	prop_reg(&t, mem, 1);
	end(&t);

	cpus(&t, vm->ncpus);
	psci(&t);
	gic(&t, vm);
	timer(&t, vm);
	uart(&t, uart_name);
	for (unsigned i = 0; i < vm->nvirtio; i++)
		virtio(&t, &vm->virtio[i]);
	end(&t);
	if (!t.err)
		check(&t, fdt_finish(buf), "fdt_finish");
	if (!t.err)
		check(&t, fdt_check_header(buf), "fdt_check_header");
	if (t.err) {
		snprintf(err, errlen, "device tree: %s: %s", t.what, fdt_strerror(t.err));
		return -1;
	}
	return (long)fdt_totalsize(buf);
}
