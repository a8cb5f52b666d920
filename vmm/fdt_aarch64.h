/* The device tree an aarch64 guest boots with, built by libfdt: memory,
 * cpus (PSCI enable method), psci, the GIC (v3, or v2 where that is all
 * the host has), the arch timer, chosen (bootargs, stdout-path), the 16550A
 * UART and one virtio-mmio node per device. Pure: no KVM, so it is built
 * and unit-tested on any host. */
#ifndef VMM_FDT_AARCH64_H
#define VMM_FDT_AARCH64_H

#include <stddef.h>
#include <stdint.h>

#include "layout_aarch64.h"

struct fdt_virtio {
	uint64_t base;   /* its 4 KiB register window */
	unsigned spi;    /* its interrupt, as the tree numbers SPIs */
};

/* What the tree describes. */
struct fdt_vm {
	uint64_t mem_base, mem_size;
	unsigned ncpus;                 /* 1..AARCH64_MAX_VCPUS */
	unsigned gic_version;           /* 2 or 3 */
	const char *bootargs;
	const struct fdt_virtio *virtio;
	unsigned nvirtio;
};

/* Write the tree for vm into buf (len bytes, at most AARCH64_FDT_MAX are
 * used) and check it with fdt_check_header. Returns the tree's size, or -1
 * with a one-line reason in err (a bad vm, or buf too small). */
long fdt_aarch64_build(const struct fdt_vm *vm, void *buf, size_t len, char *err, size_t errlen);

#endif
