/* Guest-physical memory layout of an x86_64 vmrun guest.
 *
 *   0x00000500  GDT (6 entries)
 *   0x00001000  host-probe code, used once before the kernel runs, then zeroed
 *   0x00007000  zero page (struct boot_params)
 *   0x00008ff0  initial stack pointer (grows down inside 0x8000-0x8fff)
 *   0x00009000  PML4, 0x0000a000 PDPT, 0x0000b000 four PDs: identity map
 *               of the low 4 GiB (RAM and the MMIO gap) with 2 MiB pages
 *   0x00020000  kernel command line (COMMAND_LINE_MAX bytes)
 *   0x0009fc00  MP floating pointer and table (last KiB of base memory,
 *               where Linux scans for it)
 *   0x00100000  high memory: bzImage protected-mode code is loaded here;
 *               an ELF vmlinux goes to its own p_paddr (16 MiB for Linux)
 *   0xc0000000  MMIO gap up to 4 GiB: virtio-mmio windows of 4 KiB from
 *               0xd0000000 (IRQ 5 upward), IOAPIC, LAPIC
 *   0x100000000 RAM above 3 GiB continues here
 *
 * The _Static_asserts below keep the fixed areas from overlapping. */
#ifndef VMM_LAYOUT_X86_64_H
#define VMM_LAYOUT_X86_64_H

#include <asm/bootparam.h>

#define GDT_ADDR         0x500ULL
#define GDT_ENTRIES      6
#define PROBE_CODE_ADDR  0x1000ULL
#define PROBE_CODE_SIZE  0x1000ULL
#define ZERO_PAGE_ADDR   0x7000ULL
#define BOOT_STACK_TOP   0x8ff0ULL
#define PML4_ADDR        0x9000ULL
#define PDPT_ADDR        0xa000ULL
#define PD_ADDR          0xb000ULL
#define PD_PAGES         4
#define CMDLINE_ADDR     0x20000ULL
/* Linux x86 COMMAND_LINE_SIZE, including the terminating NUL. */
#define COMMAND_LINE_MAX 2048ULL
#define MPTABLE_ADDR     0x9fc00ULL
#define MPTABLE_MAX      0x400ULL
#define EBDA_END         0xa0000ULL
#define HIGH_MEM_START   0x100000ULL
#define MMIO_GAP_START   0xc0000000ULL
#define MMIO_GAP_END     0x100000000ULL
#define IOAPIC_ADDR      0xfec00000ULL
#define LAPIC_ADDR       0xfee00000ULL
#define VIRTIO_MMIO_BASE  0xd0000000ULL
#define VIRTIO_SLOT_SIZE  0x1000ULL
/* IRQ 4 is COM1; virtio devices take 5..23, the rest of KVM's IOAPIC pins,
 * all of which the MP table routes. */
#define VIRTIO_IRQ_BASE   5u
#define VIRTIO_SLOTS      19u
/* Intel VMX needs three pages for its real-mode TSS; keep them in the gap. */
#define KVM_TSS_ADDR     0xfffbd000ULL

/* The smallest guest the loaders accept: room for the fixed areas. */
#define GUEST_MEM_MIN    (2ULL << 20)

_Static_assert(GDT_ADDR + GDT_ENTRIES * 8 <= PROBE_CODE_ADDR, "GDT overlaps probe page");
_Static_assert(PROBE_CODE_ADDR + PROBE_CODE_SIZE <= ZERO_PAGE_ADDR, "probe page overlaps zero page");
_Static_assert(sizeof(struct boot_params) == 0x1000, "boot_params is one page");
_Static_assert(ZERO_PAGE_ADDR + sizeof(struct boot_params) <= BOOT_STACK_TOP - 0xff0, "zero page overlaps stack");
_Static_assert(BOOT_STACK_TOP < PML4_ADDR, "stack overlaps page tables");
_Static_assert(PML4_ADDR + 0x1000 == PDPT_ADDR && PDPT_ADDR + 0x1000 == PD_ADDR, "page tables are contiguous");
_Static_assert(PD_ADDR + PD_PAGES * 0x1000 <= CMDLINE_ADDR, "page tables overlap command line");
_Static_assert(CMDLINE_ADDR + COMMAND_LINE_MAX <= MPTABLE_ADDR, "command line overlaps MP table");
_Static_assert(MPTABLE_ADDR + MPTABLE_MAX <= EBDA_END, "MP table leaves base memory");
_Static_assert(EBDA_END <= HIGH_MEM_START, "base memory overlaps high memory");
_Static_assert(IOAPIC_ADDR >= MMIO_GAP_START && LAPIC_ADDR < MMIO_GAP_END, "APICs sit in the MMIO gap");
_Static_assert(VIRTIO_MMIO_BASE >= MMIO_GAP_START &&
	       VIRTIO_MMIO_BASE + VIRTIO_SLOTS * VIRTIO_SLOT_SIZE <= IOAPIC_ADDR, "virtio windows sit in the gap");
_Static_assert(VIRTIO_IRQ_BASE + VIRTIO_SLOTS <= 24, "virtio IRQs are IOAPIC pins");
_Static_assert(GUEST_MEM_MIN >= HIGH_MEM_START, "minimum guest holds the fixed areas");

#endif
