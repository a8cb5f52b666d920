/* The boot tables an x86_64 guest finds in memory at its first instruction:
 * GDT, identity page tables, command line, zero page with the e820 map, and
 * the MP table. Written once before the first KVM_RUN. */
#ifndef VMM_BOOT_X86_64_H
#define VMM_BOOT_X86_64_H

#include <asm/bootparam.h>
#include <linux/kvm.h>
#include <stdint.h>

#include "guest_mem.h"
#include "loader_x86_64.h"

/* GDT selectors, as the 64-bit boot protocol asks (__BOOT_CS, __BOOT_DS). */
#define GDT_SEL_CODE 0x10
#define GDT_SEL_DATA 0x18
#define GDT_SEL_TSS  0x20

/* Encode one GDT descriptor from its access/flags word, base and limit. */
uint64_t gdt_entry(uint16_t flags, uint32_t base, uint32_t limit);

/* The KVM segment register equivalent of a GDT descriptor and selector. */
struct kvm_segment gdt_to_segment(uint64_t entry, uint16_t selector);

/* Fill e820 from guest RAM: base memory below the MP table, then the rest of
 * the RAM regions from 1 MiB. Returns the number of entries (<= max). */
unsigned boot_e820_build(const struct guest_mem *gm, struct boot_e820_entry *e820, unsigned max);

/* Write GDT, page tables, the command line, the zero page and the MP table
 * for kernel k and ncpus vCPUs. Returns 0, or -1 after one error line (command
 * line too long for this kernel, too many vCPUs, guest RAM too small). */
int boot_write_tables_x86_64(const struct guest_mem *gm, const struct kernel_image *k,
			     const char *cmdline, unsigned ncpus);

/* Write the MP floating pointer and configuration table for ncpus vCPUs
 * (APIC ids 0..ncpus-1) and one IOAPIC. Returns 0, or -1 after one error
 * line when ncpus is 0 or above MPTABLE_MAX_CPUS. */
int mptable_write(const struct guest_mem *gm, unsigned ncpus);

/* Fill the special registers for entry in 64-bit mode as the boot protocol
 * asks: flat __BOOT_CS/__BOOT_DS segments from the GDT written here, paging
 * on with the identity map, long mode active. Other fields are left alone. */
void boot_sregs_x86_64(struct kvm_sregs *s);

/* Most vCPUs whose MP table fits in the last KiB of base memory. */
#define MPTABLE_MAX_CPUS 32

#endif
