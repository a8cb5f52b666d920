/* Boot tables: GDT encoding, identity page tables, the zero page and its
 * e820 map, the command line, and the special registers for 64-bit entry. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "boot_x86_64.h"
#include "guest_mem.h"
#include "layout_x86_64.h"
#include "loader_x86_64.h"

#define MIB (1ULL << 20)
#define GIB (1ULL << 30)

#define CR0_PE   0x1ULL
#define CR0_PG   0x80000000ULL
#define CR4_PAE  0x20ULL
#define EFER_LME 0x100ULL
#define EFER_LMA 0x400ULL

/* The well-known flat descriptors Linux itself uses for __BOOT_CS/__BOOT_DS. */
#define DESC_CODE64 0x00af9b000000ffffULL
#define DESC_DATA   0x00cf93000000ffffULL
#define DESC_TSS    0x008f8b000000ffffULL

static struct kernel_image elf_kernel(void)
{
	return (struct kernel_image){ .entry = 0x1000000, .load_start = 0x1000000,
				      .load_end = 0x2000000, .cmdline_max = COMMAND_LINE_MAX };
}

/* ---- GDT ---------------------------------------------------------------- */

static void gdt_encoding(void **state)
{
	(void)state;
	assert_int_equal(gdt_entry(0xa09b, 0, 0xfffff), DESC_CODE64);
	assert_int_equal(gdt_entry(0xc093, 0, 0xfffff), DESC_DATA);
	assert_int_equal(gdt_entry(0x808b, 0, 0xfffff), DESC_TSS);
	/* base and limit bits land in their split fields */
	assert_int_equal(gdt_entry(0, 0x12345678, 0), 0x1200003456780000ULL);
	assert_int_equal(gdt_entry(0, 0, 0xabcde), 0x000a00000000bcdeULL);
	/* limit bits above 20 and flag bits 8-11 (limit 19:16) are ignored */
	assert_int_equal(gdt_entry(0x0f00, 0, 0xfff00000), 0);
	assert_int_equal(gdt_entry(0xffff, 0xffffffff, 0xffffffff), UINT64_MAX);
}

static void gdt_round_trip(void **state)
{
	(void)state;
	struct kvm_segment s = gdt_to_segment(DESC_CODE64, 0x10);
	assert_int_equal(s.base, 0);
	assert_int_equal(s.limit, 0xffffffff);
	assert_int_equal(s.selector, 0x10);
	assert_int_equal(s.type, 0xb);
	assert_int_equal(s.present, 1);
	assert_int_equal(s.dpl, 0);
	assert_int_equal(s.db, 0);
	assert_int_equal(s.s, 1);
	assert_int_equal(s.l, 1);
	assert_int_equal(s.g, 1);
	assert_int_equal(s.avl, 0);

	s = gdt_to_segment(DESC_DATA, 0x18);
	assert_int_equal(s.type, 0x3);
	assert_int_equal(s.db, 1);
	assert_int_equal(s.l, 0);
	assert_int_equal(s.s, 1);
	assert_int_equal(s.limit, 0xffffffff);

	s = gdt_to_segment(DESC_TSS, 0x20);
	assert_int_equal(s.type, 0xb);
	assert_int_equal(s.s, 0);
	assert_int_equal(s.present, 1);

	/* every field, byte granular */
	s = gdt_to_segment(gdt_entry(0x70fa, 0xdeadbeef, 0x54321), 0x2b);
	assert_int_equal(s.base, 0xdeadbeef);
	assert_int_equal(s.limit, 0x54321);
	assert_int_equal(s.selector, 0x2b);
	assert_int_equal(s.type, 0xa);
	assert_int_equal(s.s, 1);
	assert_int_equal(s.dpl, 3);
	assert_int_equal(s.present, 1);
	assert_int_equal(s.avl, 1);
	assert_int_equal(s.l, 1);
	assert_int_equal(s.db, 1);
	assert_int_equal(s.g, 0);

	/* page granular: limit scaled to bytes */
	s = gdt_to_segment(gdt_entry(0x8093, 0x1000, 0x00002), 0x18);
	assert_int_equal(s.g, 1);
	assert_int_equal(s.limit, 0x2fff);
	assert_int_equal(s.base, 0x1000);
	assert_int_equal(s.present, 1);
	assert_int_equal(s.dpl, 0);

	/* not present */
	s = gdt_to_segment(gdt_entry(0x0013, 0, 0), 0x8);
	assert_int_equal(s.present, 0);
}

static void gdt_in_memory(void **state)
{
	(void)state;
	struct guest_mem gm;
	struct kernel_image k = elf_kernel();
	assert_int_equal(guest_mem_init(&gm, 64 * MIB, MMIO_GAP_START, MMIO_GAP_END), 0);
	memset(guest_mem_ptr(&gm, GDT_ADDR, GDT_ENTRIES * 8), 0xcc, GDT_ENTRIES * 8);
	assert_int_equal(boot_write_tables_x86_64(&gm, &k, "console=ttyS0", 1), 0);
	const uint64_t *gdt = guest_mem_ptr(&gm, GDT_ADDR, GDT_ENTRIES * 8);
	assert_int_equal(gdt[0], 0);
	assert_int_equal(gdt[1], 0);
	assert_int_equal(gdt[GDT_SEL_CODE / 8], DESC_CODE64);
	assert_int_equal(gdt[GDT_SEL_DATA / 8], DESC_DATA);
	assert_int_equal(gdt[GDT_SEL_TSS / 8], DESC_TSS);
	assert_int_equal(gdt[5], 0);   /* upper half of the 16-byte TSS descriptor */
	guest_mem_release(&gm);
}

/* ---- page tables --------------------------------------------------------- */

static void page_tables(void **state)
{
	(void)state;
	struct guest_mem gm;
	struct kernel_image k = elf_kernel();
	assert_int_equal(guest_mem_init(&gm, 64 * MIB, MMIO_GAP_START, MMIO_GAP_END), 0);
	/* stale data everywhere the tables go */
	memset(guest_mem_ptr(&gm, PML4_ADDR, 0x6000), 0xcc, 0x6000);
	assert_int_equal(boot_write_tables_x86_64(&gm, &k, "", 1), 0);
	const uint64_t *pml4 = guest_mem_ptr(&gm, PML4_ADDR, 0x1000);
	const uint64_t *pdpt = guest_mem_ptr(&gm, PDPT_ADDR, 0x1000);
	const uint64_t *pd = guest_mem_ptr(&gm, PD_ADDR, PD_PAGES * 0x1000);
	assert_int_equal(pml4[0], PDPT_ADDR | 0x3);
	for (unsigned i = 1; i < 512; i++)
		assert_int_equal(pml4[i], 0);
	for (unsigned i = 0; i < PD_PAGES; i++)
		assert_int_equal(pdpt[i], (PD_ADDR + i * 0x1000) | 0x3);
	for (unsigned i = PD_PAGES; i < 512; i++)
		assert_int_equal(pdpt[i], 0);
	/* 2048 2 MiB pages: identity map of 0..4 GiB, present, writable, PS */
	for (uint64_t i = 0; i < PD_PAGES * 512; i++)
		assert_int_equal(pd[i], (i << 21) | 0x83);
	assert_int_equal(pd[PD_PAGES * 512 - 1], 0xffe00083ULL);
	/* the LAPIC page is mapped by PD entry 0xfee00000 >> 21 */
	assert_int_equal(pd[LAPIC_ADDR >> 21] & ~0xfffULL, LAPIC_ADDR & ~((2 * MIB) - 1));
	guest_mem_release(&gm);
}

/* ---- zero page and command line ----------------------------------------- */

static void zero_page_elf(void **state)
{
	(void)state;
	struct guest_mem gm;
	struct kernel_image k = elf_kernel();
	const char *cmdline = "console=ttyS0 reboot=k panic=1";
	assert_int_equal(guest_mem_init(&gm, 256 * MIB, MMIO_GAP_START, MMIO_GAP_END), 0);
	memset(guest_mem_ptr(&gm, ZERO_PAGE_ADDR, 0x1000), 0xcc, 0x1000);
	memset(guest_mem_ptr(&gm, CMDLINE_ADDR, COMMAND_LINE_MAX), 'x', COMMAND_LINE_MAX);
	assert_int_equal(boot_write_tables_x86_64(&gm, &k, cmdline, 2), 0);

	const struct boot_params *bp = guest_mem_ptr(&gm, ZERO_PAGE_ADDR, sizeof(*bp));
	assert_int_equal(bp->hdr.boot_flag, 0xaa55);
	assert_int_equal(bp->hdr.header, 0x53726448);
	assert_true(bp->hdr.version >= 0x020c);
	assert_int_equal(bp->hdr.type_of_loader, 0xff);
	assert_true(bp->hdr.loadflags & CAN_USE_HEAP);
	assert_int_equal(bp->hdr.heap_end_ptr, 0xfe00);
	assert_int_equal(bp->hdr.ramdisk_image, 0);
	assert_int_equal(bp->hdr.ramdisk_size, 0);
	assert_int_equal(bp->hdr.cmd_line_ptr, CMDLINE_ADDR);
	assert_int_equal(bp->hdr.cmdline_size, strlen(cmdline));
	assert_int_equal(bp->hdr.kernel_alignment, 0x1000000);
	assert_int_equal(bp->ext_cmd_line_ptr, 0);
	/* e820 for 256 MiB: base memory below the MP table, then 1 MiB up */
	assert_int_equal(bp->e820_entries, 2);
	assert_int_equal(bp->e820_table[0].addr, 0);
	assert_int_equal(bp->e820_table[0].size, MPTABLE_ADDR);
	assert_int_equal(bp->e820_table[0].type, 1);
	assert_int_equal(bp->e820_table[1].addr, HIGH_MEM_START);
	assert_int_equal(bp->e820_table[1].size, 256 * MIB - HIGH_MEM_START);
	assert_int_equal(bp->e820_table[1].type, 1);
	/* the rest of the zero page is cleared */
	assert_int_equal(bp->e820_table[2].size, 0);
	assert_int_equal(bp->screen_info.orig_video_isVGA, 0);

	/* command line, NUL-terminated, the rest of its area zeroed */
	const char *cl = guest_mem_ptr(&gm, CMDLINE_ADDR, COMMAND_LINE_MAX);
	assert_string_equal(cl, cmdline);
	for (uint64_t i = strlen(cmdline); i < COMMAND_LINE_MAX; i++)
		assert_int_equal(cl[i], 0);
	guest_mem_release(&gm);
}

static void zero_page_bzimage(void **state)
{
	(void)state;
	struct guest_mem gm;
	struct kernel_image k = {
		.entry = 0x100200, .load_start = HIGH_MEM_START, .load_end = 0x300000,
		.is_bzimage = true, .cmdline_max = 256,
	};
	k.hdr.setup_sects = 31;
	k.hdr.boot_flag = 0xaa55;
	k.hdr.header = 0x53726448;
	k.hdr.version = 0x020f;
	k.hdr.loadflags = LOADED_HIGH;
	k.hdr.xloadflags = XLF_KERNEL_64;
	k.hdr.kernel_alignment = 0x200000;
	k.hdr.relocatable_kernel = 1;
	k.hdr.init_size = 0xfbd000;
	k.hdr.pref_address = 0x1000000;
	k.hdr.cmdline_size = 255;
	k.hdr.ramdisk_image = 0x1234;   /* the image's own values are not kept */
	k.hdr.ramdisk_size = 0x5678;
	k.hdr.type_of_loader = 0;
	k.hdr.code32_start = 0x12345;
	assert_int_equal(guest_mem_init(&gm, 64 * MIB, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_int_equal(boot_write_tables_x86_64(&gm, &k, "quiet", 1), 0);
	const struct boot_params *bp = guest_mem_ptr(&gm, ZERO_PAGE_ADDR, sizeof(*bp));
	assert_int_equal(bp->hdr.setup_sects, 31);
	assert_int_equal(bp->hdr.version, 0x020f);
	assert_int_equal(bp->hdr.kernel_alignment, 0x200000);
	assert_int_equal(bp->hdr.init_size, 0xfbd000);
	assert_int_equal(bp->hdr.pref_address, 0x1000000);
	assert_int_equal(bp->hdr.xloadflags, XLF_KERNEL_64);
	assert_int_equal(bp->hdr.loadflags, LOADED_HIGH | CAN_USE_HEAP);
	assert_int_equal(bp->hdr.code32_start, HIGH_MEM_START);
	assert_int_equal(bp->hdr.type_of_loader, 0xff);
	assert_int_equal(bp->hdr.ramdisk_image, 0);
	assert_int_equal(bp->hdr.ramdisk_size, 0);
	assert_int_equal(bp->hdr.cmd_line_ptr, CMDLINE_ADDR);
	assert_int_equal(bp->hdr.cmdline_size, 5);
	assert_int_equal(bp->e820_entries, 2);
	guest_mem_release(&gm);
}

static void cmdline_too_long(void **state)
{
	(void)state;
	struct guest_mem gm;
	struct kernel_image k = elf_kernel();
	char *cl = malloc(COMMAND_LINE_MAX + 1);
	assert_non_null(cl);
	assert_int_equal(guest_mem_init(&gm, 32 * MIB, MMIO_GAP_START, MMIO_GAP_END), 0);

	/* COMMAND_LINE_MAX includes the NUL */
	memset(cl, 'a', COMMAND_LINE_MAX);
	cl[COMMAND_LINE_MAX] = 0;
	assert_int_equal(boot_write_tables_x86_64(&gm, &k, cl, 1), -1);
	assert_int_equal(guest_mem_resident(&gm), 0);   /* refused before writing */
	cl[COMMAND_LINE_MAX - 1] = 0;
	assert_int_equal(boot_write_tables_x86_64(&gm, &k, cl, 1), 0);
	const char *g = guest_mem_ptr(&gm, CMDLINE_ADDR, COMMAND_LINE_MAX);
	assert_int_equal(strnlen(g, COMMAND_LINE_MAX), COMMAND_LINE_MAX - 1);
	assert_int_equal(g[COMMAND_LINE_MAX - 1], 0);

	/* a kernel that takes less (bzImage cmdline_size 255) */
	k.cmdline_max = 256;
	memset(cl, 'b', 256);
	cl[256] = 0;
	assert_int_equal(boot_write_tables_x86_64(&gm, &k, cl, 1), -1);
	cl[255] = 0;
	assert_int_equal(boot_write_tables_x86_64(&gm, &k, cl, 1), 0);
	/* cmdline_size 0: only the empty command line */
	k.cmdline_max = 1;
	assert_int_equal(boot_write_tables_x86_64(&gm, &k, "a", 1), -1);
	assert_int_equal(boot_write_tables_x86_64(&gm, &k, "", 1), 0);
	guest_mem_release(&gm);
	free(cl);
}

static void tables_refused(void **state)
{
	(void)state;
	struct guest_mem gm;
	struct kernel_image k = elf_kernel();
	/* below GUEST_MEM_MIN */
	assert_int_equal(guest_mem_init(&gm, 1 * MIB, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_int_equal(boot_write_tables_x86_64(&gm, &k, "", 1), -1);
	guest_mem_release(&gm);
	assert_int_equal(guest_mem_init(&gm, 64 * 1024, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_int_equal(boot_write_tables_x86_64(&gm, &k, "", 1), -1);
	assert_int_equal(guest_mem_resident(&gm), 0);
	guest_mem_release(&gm);
	/* vCPU counts the MP table cannot describe */
	assert_int_equal(guest_mem_init(&gm, GUEST_MEM_MIN, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_int_equal(boot_write_tables_x86_64(&gm, &k, "", 0), -1);
	assert_int_equal(boot_write_tables_x86_64(&gm, &k, "", MPTABLE_MAX_CPUS + 1), -1);
	assert_int_equal(boot_write_tables_x86_64(&gm, &k, "", MPTABLE_MAX_CPUS), 0);
	guest_mem_release(&gm);
}

/* ---- e820 ------------------------------------------------------------------ */

static void e820_small(void **state)
{
	(void)state;
	struct guest_mem gm;
	struct boot_e820_entry e[8];
	assert_int_equal(guest_mem_init(&gm, 256 * MIB, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_int_equal(boot_e820_build(&gm, e, 8), 2);
	assert_int_equal(e[0].addr, 0);
	assert_int_equal(e[0].size, MPTABLE_ADDR);
	assert_int_equal(e[0].type, 1);
	assert_int_equal(e[1].addr, HIGH_MEM_START);
	assert_int_equal(e[1].size, 256 * MIB - HIGH_MEM_START);
	assert_int_equal(e[1].type, 1);
	/* max respected */
	memset(e, 0xcc, sizeof(e));
	assert_int_equal(boot_e820_build(&gm, e, 1), 1);
	assert_int_equal(e[0].size, MPTABLE_ADDR);
	assert_int_equal(e[1].addr, 0xccccccccccccccccULL);
	memset(e, 0xcc, sizeof(e));
	assert_int_equal(boot_e820_build(&gm, e, 0), 0);
	assert_int_equal(e[0].addr, 0xccccccccccccccccULL);
	guest_mem_release(&gm);

	/* the smallest guest: base memory and exactly 1 MiB more */
	assert_int_equal(guest_mem_init(&gm, GUEST_MEM_MIN, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_int_equal(boot_e820_build(&gm, e, 8), 2);
	assert_int_equal(e[1].addr, HIGH_MEM_START);
	assert_int_equal(e[1].size, GUEST_MEM_MIN - HIGH_MEM_START);
	guest_mem_release(&gm);

	/* no RAM above 1 MiB at all: one entry, never beyond RAM */
	assert_int_equal(guest_mem_init(&gm, 512 * 1024, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_int_equal(boot_e820_build(&gm, e, 8), 1);
	assert_int_equal(e[0].size, 512 * 1024);
	guest_mem_release(&gm);
	assert_int_equal(guest_mem_init(&gm, HIGH_MEM_START, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_int_equal(boot_e820_build(&gm, e, 8), 1);
	assert_int_equal(e[0].size, MPTABLE_ADDR);
	guest_mem_release(&gm);
}

static void e820_above_3g(void **state)
{
	(void)state;
	struct guest_mem gm;
	struct boot_e820_entry e[8];
	const uint64_t size = 5 * GIB;
	assert_int_equal(guest_mem_init(&gm, size, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_int_equal(gm.nregions, 2);
	assert_int_equal(boot_e820_build(&gm, e, 8), 3);
	assert_int_equal(e[0].addr, 0);
	assert_int_equal(e[0].size, MPTABLE_ADDR);
	assert_int_equal(e[1].addr, HIGH_MEM_START);
	assert_int_equal(e[1].size, MMIO_GAP_START - HIGH_MEM_START);
	assert_int_equal(e[2].addr, MMIO_GAP_END);
	assert_int_equal(e[2].size, size - MMIO_GAP_START);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(e[i].type, 1);
	/* no entry reaches into the MMIO gap */
	for (unsigned i = 0; i < 3; i++)
		assert_true(e[i].addr + e[i].size <= MMIO_GAP_START || e[i].addr >= MMIO_GAP_END);
	/* all RAM but the legacy hole below 1 MiB is described */
	uint64_t sum = 0;
	for (unsigned i = 0; i < 3; i++)
		sum += e[i].size;
	assert_int_equal(sum, size - (HIGH_MEM_START - MPTABLE_ADDR));
	/* max 2 keeps the first two */
	assert_int_equal(boot_e820_build(&gm, e, 2), 2);

	/* and the zero page gets all three */
	struct kernel_image k = elf_kernel();
	assert_int_equal(boot_write_tables_x86_64(&gm, &k, "", 4), 0);
	const struct boot_params *bp = guest_mem_ptr(&gm, ZERO_PAGE_ADDR, sizeof(*bp));
	assert_int_equal(bp->e820_entries, 3);
	assert_int_equal(bp->e820_table[2].addr, MMIO_GAP_END);
	assert_int_equal(bp->e820_table[2].size, 2 * GIB);
	guest_mem_release(&gm);
}

/* ---- special registers ---------------------------------------------------- */

static void sregs(void **state)
{
	(void)state;
	struct kvm_sregs s;
	memset(&s, 0xcc, sizeof(s));
	boot_sregs_x86_64(&s);
	assert_int_equal(s.cs.selector, GDT_SEL_CODE);
	assert_int_equal(s.cs.base, 0);
	assert_int_equal(s.cs.limit, 0xffffffff);
	assert_int_equal(s.cs.type, 0xb);
	assert_int_equal(s.cs.present, 1);
	assert_int_equal(s.cs.s, 1);
	assert_int_equal(s.cs.l, 1);
	assert_int_equal(s.cs.db, 0);
	assert_int_equal(s.cs.dpl, 0);
	const struct kvm_segment *data[] = { &s.ds, &s.es, &s.fs, &s.gs, &s.ss };
	for (size_t i = 0; i < sizeof(data) / sizeof(data[0]); i++) {
		assert_int_equal(data[i]->selector, GDT_SEL_DATA);
		assert_int_equal(data[i]->base, 0);
		assert_int_equal(data[i]->limit, 0xffffffff);
		assert_int_equal(data[i]->type, 0x3);
		assert_int_equal(data[i]->present, 1);
		assert_int_equal(data[i]->s, 1);
		assert_int_equal(data[i]->db, 1);
		assert_int_equal(data[i]->l, 0);
		assert_int_equal(data[i]->g, 1);
	}
	assert_int_equal(s.tr.selector, GDT_SEL_TSS);
	assert_int_equal(s.tr.type, 0xb);
	assert_int_equal(s.tr.s, 0);
	assert_int_equal(s.tr.present, 1);
	/* The segments match the descriptors written to guest memory. */
	struct kvm_segment c = gdt_to_segment(DESC_CODE64, GDT_SEL_CODE);
	assert_memory_equal(&s.cs, &c, sizeof(c));
	assert_int_equal(s.gdt.base, GDT_ADDR);
	assert_int_equal(s.gdt.limit, GDT_ENTRIES * 8 - 1);
	assert_int_equal(s.idt.base, 0);
	assert_int_equal(s.idt.limit, 0);
	assert_true(s.cr0 & CR0_PE);
	assert_true(s.cr0 & CR0_PG);
	assert_int_equal(s.cr3, PML4_ADDR);
	assert_true(s.cr4 & CR4_PAE);
	assert_int_equal(s.efer & (EFER_LME | EFER_LMA), EFER_LME | EFER_LMA);
	/* other fields are left alone */
	assert_int_equal(s.apic_base, 0xccccccccccccccccULL);
	assert_int_equal(s.cr8, 0xccccccccccccccccULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(gdt_encoding),
		cmocka_unit_test(gdt_round_trip),
		cmocka_unit_test(gdt_in_memory),
		cmocka_unit_test(page_tables),
		cmocka_unit_test(zero_page_elf),
		cmocka_unit_test(zero_page_bzimage),
		cmocka_unit_test(cmdline_too_long),
		cmocka_unit_test(tables_refused),
		cmocka_unit_test(e820_small),
		cmocka_unit_test(e820_above_3g),
		cmocka_unit_test(sregs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
