/* The aarch64 device tree (vmm/fdt_aarch64.c), read back with libfdt's own
 * look-ups: the header checks, every node the guest needs is where the
 * kernel looks, with the values it was built from (memory, cpus and their
 * PSCI enable method, the GIC of either version, the timer's four PPIs,
 * chosen, the UART, the virtio-mmio nodes); bad inputs and a buffer too
 * small are refused with a line. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <libfdt.h>
#include <stdio.h>
#include <string.h>

#include "fdt_aarch64.h"

static uint8_t tree[AARCH64_FDT_MAX];
static char err[256];

static const struct fdt_virtio three[] = {
	{ AARCH64_VIRTIO_MMIO_BASE, AARCH64_VIRTIO_SPI_BASE },
	{ AARCH64_VIRTIO_MMIO_BASE + AARCH64_VIRTIO_SLOT_SIZE, AARCH64_VIRTIO_SPI_BASE + 1 },
	{ AARCH64_VIRTIO_MMIO_BASE + 2 * AARCH64_VIRTIO_SLOT_SIZE, AARCH64_VIRTIO_SPI_BASE + 2 },
};

static struct fdt_vm vm_of(unsigned ncpus, unsigned gic)
{
	return (struct fdt_vm){ .mem_base = AARCH64_RAM_BASE, .mem_size = 256ULL << 20, .ncpus = ncpus,
				.gic_version = gic, .bootargs = "console=ttyS0 root=/dev/vda ro",
				.virtio = three, .nvirtio = 3 };
}

static int node(const char *path)
{
	int off = fdt_path_offset(tree, path);
	if (off < 0)
		fail_msg("no node %s: %s", path, fdt_strerror(off));
	return off;
}

static const char *str(int off, const char *name)
{
	int len;
	const char *v = fdt_getprop(tree, off, name, &len);
	if (!v || len < 1 || v[len - 1])
		fail_msg("no string property %s", name);
	return v;
}

/* Property name of off as big-endian cells, into out (at most max). */
static int cells(int off, const char *name, uint32_t *out, int max)
{
	int len;
	const fdt32_t *v = fdt_getprop(tree, off, name, &len);
	assert_non_null(v);
	assert_int_equal(len % 4, 0);
	int n = len / 4;
	assert_true(n <= max);
	for (int i = 0; i < n; i++)
		out[i] = fdt32_to_cpu(v[i]);
	return n;
}

static uint64_t u64(const uint32_t *c)
{
	return (uint64_t)c[0] << 32 | c[1];
}

static void build(const struct fdt_vm *vm)
{
	long n = fdt_aarch64_build(vm, tree, sizeof(tree), err, sizeof(err));
	if (n < 0)
		fail_msg("build: %s", err);
	assert_int_equal(fdt_check_header(tree), 0);
	assert_int_equal((long)fdt_totalsize(tree), n);
}

static void gicv3_tree(void **state)
{
	(void)state;
	struct fdt_vm vm = vm_of(2, 3);
	build(&vm);
	uint32_t c[16];
	int root = node("/");
	assert_string_equal(str(root, "compatible"), "linux,dummy-virt");
	assert_int_equal(cells(root, "#address-cells", c, 1), 1);
	assert_int_equal(c[0], 2);

	int chosen = node("/chosen");
	assert_string_equal(str(chosen, "bootargs"), "console=ttyS0 root=/dev/vda ro");
	assert_string_equal(str(chosen, "stdout-path"), "/uart@9000000");
	assert_true(node(str(chosen, "stdout-path")) > 0);   /* it names a node that exists */

	int mem = node("/memory@80000000");
	assert_string_equal(str(mem, "device_type"), "memory");
	assert_int_equal(cells(mem, "reg", c, 16), 4);
	assert_true(u64(c) == AARCH64_RAM_BASE && u64(c + 2) == 256ULL << 20);

	for (unsigned i = 0; i < 2; i++) {
		char path[32];
		snprintf(path, sizeof(path), "/cpus/cpu@%x", i);
		int cpu = node(path);
		assert_string_equal(str(cpu, "enable-method"), "psci");
		assert_int_equal(cells(cpu, "reg", c, 1), 1);
		assert_int_equal(c[0], i);
	}
	assert_true(fdt_path_offset(tree, "/cpus/cpu@2") < 0);
	int psci = node("/psci");
	assert_int_equal(fdt_node_check_compatible(tree, psci, "arm,psci-0.2"), 0);
	assert_string_equal(str(psci, "method"), "hvc");

	int gic = node("/intc@8000000");
	assert_int_equal(fdt_node_check_compatible(tree, gic, "arm,gic-v3"), 0);
	assert_non_null(fdt_getprop(tree, gic, "interrupt-controller", NULL));
	assert_int_equal(cells(gic, "reg", c, 16), 8);
	assert_true(u64(c) == AARCH64_GIC_DIST_BASE && u64(c + 4) == AARCH64_GIC_REDIST_BASE &&
		    u64(c + 6) == 2 * AARCH64_GIC_REDIST_SIZE);
	/* the root's interrupt-parent is the GIC */
	assert_int_equal(cells(root, "interrupt-parent", c, 1), 1);
	assert_int_equal(fdt_node_offset_by_phandle(tree, c[0]), gic);

	int timer = node("/timer");
	assert_int_equal(fdt_node_check_compatible(tree, timer, "arm,armv8-timer"), 0);
	assert_int_equal(cells(timer, "interrupts", c, 16), 12);
	assert_true(c[0] == AARCH64_GIC_PPI && c[1] == 13 && c[4] == 14 && c[7] == 11 && c[10] == 10);
	assert_int_equal(c[2], AARCH64_IRQ_LEVEL_LOW);   /* GICv3: no CPU mask */

	int uart = node("/uart@9000000");
	assert_int_equal(fdt_node_check_compatible(tree, uart, "ns16550a"), 0);
	assert_int_equal(cells(uart, "interrupts", c, 3), 3);
	assert_true(c[0] == AARCH64_GIC_SPI && c[1] == AARCH64_UART_SPI);

	int found = 0;
	for (int off = fdt_node_offset_by_compatible(tree, -1, "virtio,mmio"); off >= 0;
	     off = fdt_node_offset_by_compatible(tree, off, "virtio,mmio"), found++) {
		assert_int_equal(cells(off, "reg", c, 4), 4);
		assert_true(u64(c) == three[found].base && u64(c + 2) == AARCH64_VIRTIO_SLOT_SIZE);
		assert_int_equal(cells(off, "interrupts", c, 3), 3);
		assert_true(c[0] == AARCH64_GIC_SPI && c[1] == three[found].spi && c[2] == AARCH64_IRQ_EDGE_RISING);
	}
	assert_int_equal(found, 3);
}

static void gicv2_tree(void **state)
{
	(void)state;
	struct fdt_vm vm = vm_of(4, 2);
	build(&vm);
	uint32_t c[16];
	int gic = node("/intc@8000000");
	assert_int_equal(fdt_node_check_compatible(tree, gic, "arm,cortex-a15-gic"), 0);
	assert_int_equal(cells(gic, "reg", c, 16), 8);
	assert_true(u64(c + 4) == AARCH64_GIC_CPU_BASE && u64(c + 6) == AARCH64_GIC_CPU_SIZE);
	/* GICv2's PPI flags carry the mask of the CPUs that get them */
	assert_int_equal(cells(node("/timer"), "interrupts", c, 16), 12);
	assert_int_equal(c[2], AARCH64_IRQ_LEVEL_LOW | 0xf00);
	assert_true(fdt_path_offset(tree, "/cpus/cpu@3") >= 0);
}

static void refused(void **state)
{
	(void)state;
	struct fdt_vm vm = vm_of(0, 3);
	assert_int_equal(fdt_aarch64_build(&vm, tree, sizeof(tree), err, sizeof(err)), -1);
	assert_string_equal(err, "device tree: vCPU count out of range");
	vm = vm_of(9, 2);
	assert_int_equal(fdt_aarch64_build(&vm, tree, sizeof(tree), err, sizeof(err)), -1);
	assert_string_equal(err, "device tree: GICv2 serves at most 8 vCPUs");
	vm = vm_of(1, 4);
	assert_int_equal(fdt_aarch64_build(&vm, tree, sizeof(tree), err, sizeof(err)), -1);
	assert_string_equal(err, "device tree: GIC version is neither 2 nor 3");
	vm = vm_of(1, 3);
	vm.mem_size = 0;
	assert_int_equal(fdt_aarch64_build(&vm, tree, sizeof(tree), err, sizeof(err)), -1);
	assert_string_equal(err, "device tree: memory range is empty or wraps");
	/* a buffer too small: libfdt's reason, in one line */
	vm = vm_of(1, 3);
	uint8_t small[256];
	assert_int_equal(fdt_aarch64_build(&vm, small, sizeof(small), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "FDT_ERR_NOSPACE"));
	assert_null(strchr(err, '\n'));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(gicv3_tree),
		cmocka_unit_test(gicv2_tree),
		cmocka_unit_test(refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
