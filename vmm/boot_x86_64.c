#include "boot_x86_64.h"

#include <string.h>

#include "layout_x86_64.h"
#include "log.h"

/* Descriptor access/flags words (SDM vol. 3, 3.4.5): present, ring 0. */
#define GDT_FLAGS_CODE64 0xa09b  /* L=1, execute/read, accessed */
#define GDT_FLAGS_DATA   0xc093  /* D/B=1, G=1, read/write, accessed */
#define GDT_FLAGS_TSS    0x808b  /* busy 64-bit TSS; VMX entry needs a usable TR */

#define PTE_PRESENT 0x1ULL
#define PTE_WRITE   0x2ULL
#define PTE_PS      0x80ULL      /* 2 MiB page in a PD entry */

#define CR0_PE   0x1ULL
#define CR0_ET   0x10ULL
#define CR0_NE   0x20ULL
#define CR0_PG   0x80000000ULL
#define CR4_PAE  0x20ULL
#define EFER_LME 0x100ULL
#define EFER_LMA 0x400ULL

#define LINUX_LOADER_UNDEFINED 0xff  /* type_of_loader: "other" */
#define E820_RAM 1

uint64_t gdt_entry(uint16_t flags, uint32_t base, uint32_t limit)
{
	return ((uint64_t)(base & 0xff000000u) << 32) | ((uint64_t)(flags & 0xf0ffu) << 40) |
	       ((uint64_t)(limit & 0x000f0000u) << 32) | ((uint64_t)(base & 0x00ffffffu) << 16) |
	       (uint64_t)(limit & 0x0000ffffu);
}

struct kvm_segment gdt_to_segment(uint64_t e, uint16_t selector)
{
	uint32_t limit = (uint32_t)((e & 0xffff) | ((e >> 32) & 0xf0000));
	uint8_t g = (e >> 55) & 1;
	return (struct kvm_segment){
		.base = (uint32_t)(((e >> 16) & 0xffffff) | ((e >> 32) & 0xff000000)),
		.limit = g ? (limit << 12) | 0xfff : limit,
		.selector = selector,
		.type = (e >> 40) & 0xf,
		.present = (e >> 47) & 1,
		.dpl = (e >> 45) & 3,
		.db = (e >> 54) & 1,
		.s = (e >> 44) & 1,
		.l = (e >> 53) & 1,
		.g = g,
		.avl = (e >> 52) & 1,
	};
}

static int write_gdt(const struct guest_mem *gm)
{
	uint64_t *gdt = guest_mem_ptr(gm, GDT_ADDR, GDT_ENTRIES * sizeof(uint64_t));
	if (!gdt)
		return -1;
	memset(gdt, 0, GDT_ENTRIES * sizeof(uint64_t));
	gdt[GDT_SEL_CODE / 8] = gdt_entry(GDT_FLAGS_CODE64, 0, 0xfffff);
	gdt[GDT_SEL_DATA / 8] = gdt_entry(GDT_FLAGS_DATA, 0, 0xfffff);
	gdt[GDT_SEL_TSS / 8] = gdt_entry(GDT_FLAGS_TSS, 0, 0xfffff);
	return 0;
}

/* Identity-map the low 4 GiB with 2 MiB pages: the kernel's startup code
 * needs itself and the zero page mapped and builds its own tables at once;
 * the MMIO gap is mapped too so that early code (and test payloads) can
 * reach devices. */
static int write_page_tables(const struct guest_mem *gm)
{
	uint64_t *pml4 = guest_mem_ptr(gm, PML4_ADDR, 0x1000);
	uint64_t *pdpt = guest_mem_ptr(gm, PDPT_ADDR, 0x1000);
	uint64_t *pd = guest_mem_ptr(gm, PD_ADDR, PD_PAGES * 0x1000);
	if (!pml4 || !pdpt || !pd)
		return -1;
	memset(pml4, 0, 0x1000);
	memset(pdpt, 0, 0x1000);
	pml4[0] = PDPT_ADDR | PTE_PRESENT | PTE_WRITE;
	for (uint64_t i = 0; i < PD_PAGES; i++)
		pdpt[i] = (PD_ADDR + i * 0x1000) | PTE_PRESENT | PTE_WRITE;
	for (uint64_t i = 0; i < PD_PAGES * 512; i++)
		pd[i] = (i << 21) | PTE_PRESENT | PTE_WRITE | PTE_PS;
	return 0;
}

unsigned boot_e820_build(const struct guest_mem *gm, struct boot_e820_entry *e820, unsigned max)
{
	unsigned n = 0;
	for (unsigned i = 0; i < gm->nregions && n < max; i++) {
		const struct guest_region *r = &gm->regions[i];
		if (r->gpa == 0) {
			/* Base memory stops where the MP table starts; the
			 * legacy hole up to 1 MiB is left out of the map. */
			uint64_t base_end = r->size < MPTABLE_ADDR ? r->size : MPTABLE_ADDR;
			e820[n++] = (struct boot_e820_entry){ .addr = 0, .size = base_end, .type = E820_RAM };
			if (r->size > HIGH_MEM_START && n < max)
				e820[n++] = (struct boot_e820_entry){
					.addr = HIGH_MEM_START, .size = r->size - HIGH_MEM_START, .type = E820_RAM };
		} else {
			e820[n++] = (struct boot_e820_entry){ .addr = r->gpa, .size = r->size, .type = E820_RAM };
		}
	}
	return n;
}

static int write_zero_page(const struct guest_mem *gm, const struct kernel_image *k, size_t cmdline_len)
{
	struct boot_params *bp = guest_mem_ptr(gm, ZERO_PAGE_ADDR, sizeof(*bp));
	if (!bp)
		return -1;
	memset(bp, 0, sizeof(*bp));
	if (k->is_bzimage) {
		/* A bzImage's own header carries fields its kernel reads back
		 * (init_size, kernel_alignment); start from it. */
		bp->hdr = k->hdr;
		bp->hdr.code32_start = (uint32_t)k->load_start;
	} else {
		bp->hdr.boot_flag = 0xaa55;
		bp->hdr.header = 0x53726448;
		bp->hdr.version = 0x020c;
		bp->hdr.kernel_alignment = 0x1000000;
	}
	bp->hdr.type_of_loader = LINUX_LOADER_UNDEFINED;
	bp->hdr.loadflags |= CAN_USE_HEAP;
	bp->hdr.heap_end_ptr = 0xfe00;
	bp->hdr.ramdisk_image = 0;
	bp->hdr.ramdisk_size = 0;
	bp->hdr.cmd_line_ptr = (uint32_t)CMDLINE_ADDR;
	bp->hdr.cmdline_size = (uint32_t)cmdline_len;
	bp->e820_entries = (uint8_t)boot_e820_build(gm, bp->e820_table, E820_MAX_ENTRIES_ZEROPAGE);
	return 0;
}

int boot_write_tables_x86_64(const struct guest_mem *gm, const struct kernel_image *k,
			     const char *cmdline, unsigned ncpus)
{
	size_t len = strlen(cmdline);
	if (len + 1 > k->cmdline_max) {
		vmm_err("kernel command line is %zu bytes; this kernel takes at most %u",
			len, k->cmdline_max - 1);
		return -1;
	}
	char *dst = guest_mem_ptr(gm, CMDLINE_ADDR, COMMAND_LINE_MAX);
	if (!dst || guest_mem_low_end(gm) < GUEST_MEM_MIN) {
		vmm_err("guest RAM is too small for the boot tables");
		return -1;
	}
	memset(dst, 0, COMMAND_LINE_MAX);
	memcpy(dst, cmdline, len);
	if (write_gdt(gm) || write_page_tables(gm) || write_zero_page(gm, k, len)) {
		vmm_err("guest RAM is too small for the boot tables");
		return -1;
	}
	return mptable_write(gm, ncpus);
}

void boot_sregs_x86_64(struct kvm_sregs *s)
{
	struct kvm_segment code = gdt_to_segment(gdt_entry(GDT_FLAGS_CODE64, 0, 0xfffff), GDT_SEL_CODE);
	struct kvm_segment data = gdt_to_segment(gdt_entry(GDT_FLAGS_DATA, 0, 0xfffff), GDT_SEL_DATA);
	s->cs = code;
	s->ds = s->es = s->fs = s->gs = s->ss = data;
	s->tr = gdt_to_segment(gdt_entry(GDT_FLAGS_TSS, 0, 0xfffff), GDT_SEL_TSS);
	s->gdt.base = GDT_ADDR;
	s->gdt.limit = GDT_ENTRIES * 8 - 1;
	/* No IDT: the kernel installs its own before enabling interrupts. */
	s->idt.base = 0;
	s->idt.limit = 0;
	s->cr0 = CR0_PE | CR0_ET | CR0_NE | CR0_PG;
	s->cr3 = PML4_ADDR;
	s->cr4 = CR4_PAE;
	s->efer = EFER_LME | EFER_LMA;
}
