/* Guest-physical memory layout of an aarch64 vmrun guest (the low 2 GiB
 * for devices and RAM above, as Firecracker keeps it; the device windows
 * are where QEMU's virt machine puts them):
 *
 *   0x08000000  GIC distributor (64 KiB), then its redistributors (GICv3:
 *               128 KiB per vCPU) or its CPU interface (GICv2: 8 KiB)
 *   0x09000000  16550A UART, MMIO, registers 1 byte apart (SPI 1)
 *   0x0a000000  virtio-mmio windows of 4 KiB (SPI 16 upward)
 *   0x80000000  RAM: the kernel Image 2 MiB aligned plus its text_offset,
 *               the device tree in the last 2 MiB below RAM's end
 *
 * SPI numbers here are the device tree's (GIC INTID minus 32); KVM's irqfd
 * GSI for an SPI is that number too (KVM_IRQ_LINE wants INTID-based
 * numbers, irqfd routing on arm64 maps GSI n to SPI n). */
#ifndef VMM_LAYOUT_AARCH64_H
#define VMM_LAYOUT_AARCH64_H

#define AARCH64_GIC_DIST_BASE     0x08000000ULL
#define AARCH64_GIC_DIST_SIZE     0x10000ULL
#define AARCH64_GIC_REDIST_BASE   (AARCH64_GIC_DIST_BASE + AARCH64_GIC_DIST_SIZE)
#define AARCH64_GIC_REDIST_SIZE   0x20000ULL   /* per vCPU: RD_base and SGI_base frames */
#define AARCH64_GIC_CPU_BASE      (AARCH64_GIC_DIST_BASE + AARCH64_GIC_DIST_SIZE)   /* GICv2 */
#define AARCH64_GIC_CPU_SIZE      0x2000ULL
#define AARCH64_MAX_VCPUS         32u
/* GICv2 targets CPUs by an 8-bit mask: KVM caps its VMs at 8 vCPUs. */
#define AARCH64_GICV2_MAX_VCPUS   8u
/* SPIs a GIC can have: INTIDs 32 to 1019. */
#define AARCH64_GIC_MAX_SPIS      988u
#define AARCH64_UART_BASE         0x09000000ULL
#define AARCH64_UART_SIZE         0x1000ULL
#define AARCH64_UART_SPI          1u
#define AARCH64_UART_CLOCK_HZ     1843200u   /* the 8250's classic crystal: divisors as on a PC */
#define AARCH64_VIRTIO_MMIO_BASE  0x0a000000ULL
#define AARCH64_VIRTIO_SLOT_SIZE  0x1000ULL
#define AARCH64_VIRTIO_SPI_BASE   16u
#define AARCH64_VIRTIO_SLOTS      32u
#define AARCH64_RAM_BASE          0x80000000ULL
/* The Image's base is 2 MiB aligned (arm64 booting.rst). */
#define AARCH64_IMAGE_ALIGN       0x200000ULL
/* Where the device tree goes: the top 2 MiB of RAM, at most this big
 * (arm64 booting.rst: 8-byte aligned, within 2 MiB, at most 2 MiB). */
#define AARCH64_FDT_MAX           0x200000ULL
/* The smallest guest the loader accepts: an Image and the tree. */
#define AARCH64_GUEST_MEM_MIN     (8ULL << 20)

/* GIC interrupt-specifier cells (bindings/interrupt-controller/arm,gic):
 * type, number, flags. */
#define AARCH64_GIC_SPI           0u
#define AARCH64_GIC_PPI           1u
#define AARCH64_IRQ_EDGE_RISING   1u
#define AARCH64_IRQ_LEVEL_HIGH    4u
#define AARCH64_IRQ_LEVEL_LOW     8u
/* The arch timer's PPIs as the device tree numbers them (INTID - 16):
 * secure and non-secure physical, virtual, hypervisor. */
#define AARCH64_TIMER_PPI_SEC     13u
#define AARCH64_TIMER_PPI_NONSEC  14u
#define AARCH64_TIMER_PPI_VIRT    11u
#define AARCH64_TIMER_PPI_HYP     10u

_Static_assert(AARCH64_GIC_REDIST_BASE + AARCH64_MAX_VCPUS * AARCH64_GIC_REDIST_SIZE <= AARCH64_UART_BASE,
	       "the redistributors of every vCPU fit below the UART");
_Static_assert(AARCH64_UART_BASE + AARCH64_UART_SIZE <= AARCH64_VIRTIO_MMIO_BASE, "UART overlaps virtio");
_Static_assert(AARCH64_VIRTIO_MMIO_BASE + AARCH64_VIRTIO_SLOTS * AARCH64_VIRTIO_SLOT_SIZE <= AARCH64_RAM_BASE,
	       "virtio windows sit below RAM");
_Static_assert(AARCH64_VIRTIO_SPI_BASE + AARCH64_VIRTIO_SLOTS <= AARCH64_GIC_MAX_SPIS, "SPIs within the GIC's");
_Static_assert(AARCH64_UART_SPI < AARCH64_VIRTIO_SPI_BASE, "UART's SPI apart from virtio's");
_Static_assert(AARCH64_GUEST_MEM_MIN >= 2 * AARCH64_IMAGE_ALIGN + AARCH64_FDT_MAX, "minimum guest holds an Image and the tree");

#endif
