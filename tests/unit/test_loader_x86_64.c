/* Kernel loaders: well-formed ELF vmlinux and bzImage images load where the
 * boot protocol says; hostile images are refused before a single byte of
 * guest RAM is written. Images are built in memory with hand-made headers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "guest_mem.h"
#include "layout_x86_64.h"
#include "loader_x86_64.h"

#define GUEST_SIZE (32ULL << 20)
#define PAGE 4096ULL

/* ---- fixture: a fresh guest per test, so "untouched" means "no page of
 * guest RAM became resident" ------------------------------------------- */

struct fx {
	struct guest_mem gm;
	struct kernel_image k;
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f || guest_mem_init(&f->gm, GUEST_SIZE, MMIO_GAP_START, MMIO_GAP_END) != 0) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	guest_mem_release(&f->gm);
	free(f);
	return 0;
}

/* A refused load must not have written (or even touched) guest RAM. */
static void assert_untouched(const struct guest_mem *gm)
{
	assert_int_equal(guest_mem_resident(gm), 0);
}

/* A refused load leaves *out zeroed. */
static void assert_out_zero(const struct kernel_image *k)
{
	static const struct kernel_image zero;
	assert_memory_equal(k, &zero, sizeof(zero));
}

static int load(struct fx *f, const uint8_t *img, size_t len)
{
	memset(&f->k, 0xa5, sizeof(f->k));
	return kernel_load_x86_64(&f->gm, img, len, &f->k);
}

static void assert_refused(struct fx *f, const uint8_t *img, size_t len)
{
	assert_int_equal(load(f, img, len), -1);
	assert_out_zero(&f->k);
	assert_untouched(&f->gm);
}

/* ---- ELF images --------------------------------------------------------- */

#define ELF_LEN      0x4000
#define ELF_PH_OFF   sizeof(Elf64_Ehdr)
#define SEG0_OFF     0x1000
#define SEG0_PADDR   0x200000ULL
#define SEG0_FILESZ  0x800
#define SEG0_MEMSZ   0x1000
#define SEG1_OFF     0x2000
#define SEG1_PADDR   0x400000ULL
#define SEG1_FILESZ  0x1000
#define SEG1_MEMSZ   0x3000
#define ELF_ENTRY    (SEG0_PADDR + 0x10)

struct elf_img {
	uint8_t buf[ELF_LEN];
	Elf64_Ehdr *eh;
	Elf64_Phdr *ph;
};

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + 3);
}

/* An x86_64 ET_EXEC image with nph program headers; the first is a PT_LOAD
 * with a bss tail, the second (if any) a PT_LOAD with a larger bss, the rest
 * PT_NOTE. File bytes are a pattern so copies can be checked. */
static void make_elf(struct elf_img *e, unsigned nph)
{
	for (size_t i = 0; i < sizeof(e->buf); i++)
		e->buf[i] = pattern(i);
	memset(e->buf, 0, ELF_PH_OFF + 8 * sizeof(Elf64_Phdr));
	e->eh = (Elf64_Ehdr *)e->buf;
	e->ph = (Elf64_Phdr *)(e->buf + ELF_PH_OFF);
	Elf64_Ehdr *h = e->eh;
	memcpy(h->e_ident, ELFMAG, SELFMAG);
	h->e_ident[EI_CLASS] = ELFCLASS64;
	h->e_ident[EI_DATA] = ELFDATA2LSB;
	h->e_ident[EI_VERSION] = EV_CURRENT;
	h->e_type = ET_EXEC;
	h->e_machine = EM_X86_64;
	h->e_version = EV_CURRENT;
	h->e_entry = ELF_ENTRY;
	h->e_phoff = ELF_PH_OFF;
	h->e_ehsize = sizeof(Elf64_Ehdr);
	h->e_phentsize = sizeof(Elf64_Phdr);
	h->e_phnum = (Elf64_Half)nph;
	for (unsigned i = 0; i < nph && i < 8; i++)
		e->ph[i] = (Elf64_Phdr){ .p_type = PT_NOTE, .p_offset = 0x3000, .p_paddr = 0x10,
					 .p_filesz = 0x10, .p_memsz = 0x10, .p_align = 4 };
	if (nph >= 1)
		e->ph[0] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_flags = PF_R | PF_X,
					 .p_offset = SEG0_OFF, .p_vaddr = 0xffffffff80000000ULL,
					 .p_paddr = SEG0_PADDR, .p_filesz = SEG0_FILESZ,
					 .p_memsz = SEG0_MEMSZ, .p_align = 0x1000 };
	if (nph >= 2)
		e->ph[1] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_flags = PF_R | PF_W,
					 .p_offset = SEG1_OFF, .p_vaddr = 0xffffffff80200000ULL,
					 .p_paddr = SEG1_PADDR, .p_filesz = SEG1_FILESZ,
					 .p_memsz = SEG1_MEMSZ, .p_align = 0x1000 };
}

static void fill_guest(struct fx *f, uint64_t gpa, uint64_t len, uint8_t v)
{
	uint8_t *p = guest_mem_ptr(&f->gm, gpa, len);
	assert_non_null(p);
	memset(p, v, len);
}

static void assert_guest_bytes(struct fx *f, uint64_t gpa, const uint8_t *want, uint64_t len)
{
	uint8_t *p = guest_mem_ptr(&f->gm, gpa, len);
	assert_non_null(p);
	assert_memory_equal(p, want, len);
}

static void assert_guest_fill(struct fx *f, uint64_t gpa, uint64_t len, uint8_t v)
{
	uint8_t *p = guest_mem_ptr(&f->gm, gpa, len);
	assert_non_null(p);
	for (uint64_t i = 0; i < len; i++)
		if (p[i] != v)
			fail_msg("guest byte 0x%llx is 0x%02x, expected 0x%02x",
				 (unsigned long long)(gpa + i), p[i], v);
}

static void elf_good(void **state)
{
	struct fx *f = *state;
	struct elf_img e;
	make_elf(&e, 3);
	/* Old contents where the bss goes must be cleared. */
	fill_guest(f, SEG0_PADDR, SEG0_MEMSZ + PAGE, 0xcc);
	fill_guest(f, SEG1_PADDR, SEG1_MEMSZ + PAGE, 0xcc);

	assert_int_equal(load(f, e.buf, sizeof(e.buf)), 0);
	assert_guest_bytes(f, SEG0_PADDR, e.buf + SEG0_OFF, SEG0_FILESZ);
	assert_guest_fill(f, SEG0_PADDR + SEG0_FILESZ, SEG0_MEMSZ - SEG0_FILESZ, 0);
	assert_guest_fill(f, SEG0_PADDR + SEG0_MEMSZ, PAGE, 0xcc);   /* nothing beyond */
	assert_guest_bytes(f, SEG1_PADDR, e.buf + SEG1_OFF, SEG1_FILESZ);
	assert_guest_fill(f, SEG1_PADDR + SEG1_FILESZ, SEG1_MEMSZ - SEG1_FILESZ, 0);
	assert_guest_fill(f, SEG1_PADDR + SEG1_MEMSZ, PAGE, 0xcc);
	/* The PT_NOTEs (paddr 0x10) were not loaded. */
	assert_guest_fill(f, 0, 0x100, 0);

	assert_int_equal(f->k.entry, ELF_ENTRY);
	assert_int_equal(f->k.load_start, SEG0_PADDR);
	assert_int_equal(f->k.load_end, SEG1_PADDR + SEG1_MEMSZ);
	assert_false(f->k.is_bzimage);
	assert_int_equal(f->k.cmdline_max, COMMAND_LINE_MAX);
}

/* Entry in the second segment, bss-only segment, PT_LOAD of size 0 ignored. */
static void elf_good_variants(void **state)
{
	struct fx *f = *state;
	struct elf_img e;
	make_elf(&e, 4);
	e.eh->e_entry = SEG1_PADDR + SEG1_MEMSZ - 1;   /* last byte of a segment (bss) */
	e.ph[2] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_offset = 0, .p_paddr = 0x800000,
				.p_filesz = 0, .p_memsz = 0x2000 };
	/* memsz 0: ignored entirely, even though its address is below 1 MiB */
	e.ph[3] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_offset = 0, .p_paddr = 0x7000,
				.p_filesz = 0, .p_memsz = 0 };
	fill_guest(f, 0x800000, 0x2000, 0xcc);
	assert_int_equal(load(f, e.buf, sizeof(e.buf)), 0);
	assert_guest_fill(f, 0x800000, 0x2000, 0);
	assert_int_equal(f->k.entry, SEG1_PADDR + SEG1_MEMSZ - 1);
	assert_int_equal(f->k.load_start, SEG0_PADDR);
	assert_int_equal(f->k.load_end, 0x802000);
}

/* A segment ending exactly at the end of RAM and the image (inclusive bounds). */
static void elf_good_exact_fit(void **state)
{
	struct fx *f = *state;
	struct elf_img e;
	make_elf(&e, 1);
	e.ph[0].p_offset = ELF_LEN - 0x1000;
	e.ph[0].p_filesz = 0x1000;
	e.ph[0].p_memsz = 0x2000;
	e.ph[0].p_paddr = GUEST_SIZE - 0x2000;
	e.eh->e_entry = GUEST_SIZE - 0x2000;
	assert_int_equal(load(f, e.buf, sizeof(e.buf)), 0);
	assert_guest_bytes(f, GUEST_SIZE - 0x2000, e.buf + ELF_LEN - 0x1000, 0x1000);
	assert_int_equal(f->k.load_end, GUEST_SIZE);
	/* lowest allowed address: exactly 1 MiB */
	make_elf(&e, 1);
	e.ph[0].p_paddr = HIGH_MEM_START;
	e.eh->e_entry = HIGH_MEM_START;
	assert_int_equal(load(f, e.buf, sizeof(e.buf)), 0);
	assert_int_equal(f->k.load_start, HIGH_MEM_START);
}

static void elf_truncated_header(void **state)
{
	struct fx *f = *state;
	struct elf_img e;
	make_elf(&e, 1);
	assert_refused(f, e.buf, SELFMAG);
	assert_refused(f, e.buf, sizeof(Elf64_Ehdr) - 1);
	/* header complete but program headers cut off */
	assert_refused(f, e.buf, sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr) - 1);
	/* headers complete, segment data cut off */
	assert_refused(f, e.buf, SEG0_OFF + SEG0_FILESZ - 1);
}

static void elf_wrong_class_data_machine(void **state)
{
	struct fx *f = *state;
	struct elf_img e;
	make_elf(&e, 1);
	e.eh->e_ident[EI_CLASS] = ELFCLASS32;
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.eh->e_ident[EI_CLASS] = ELFCLASSNONE;
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.eh->e_ident[EI_DATA] = ELFDATA2MSB;
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.eh->e_machine = EM_AARCH64;
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.eh->e_machine = EM_386;
	assert_refused(f, e.buf, sizeof(e.buf));
}

static void elf_not_exec(void **state)
{
	struct fx *f = *state;
	struct elf_img e;
	static const Elf64_Half types[] = { ET_DYN, ET_REL, ET_CORE, ET_NONE };
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		make_elf(&e, 1);
		e.eh->e_type = types[i];
		assert_refused(f, e.buf, sizeof(e.buf));
	}
}

static void elf_phnum_bad(void **state)
{
	struct fx *f = *state;
	struct elf_img e;
	make_elf(&e, 1);
	e.eh->e_phnum = 0;
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.eh->e_phnum = ELF_MAX_PHDRS + 1;
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.eh->e_phnum = 0xffff;   /* PN_XNUM */
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.eh->e_phentsize = sizeof(Elf64_Phdr) - 1;
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.eh->e_phentsize = 0;
	assert_refused(f, e.buf, sizeof(e.buf));
}

/* ELF_MAX_PHDRS entries is the limit and accepted (the rest are PT_NULL). */
static void elf_phnum_max(void **state)
{
	struct fx *f = *state;
	static uint8_t big[sizeof(Elf64_Ehdr) + ELF_MAX_PHDRS * sizeof(Elf64_Phdr) + 0x1000];
	memset(big, 0, sizeof(big));
	Elf64_Ehdr *h = (Elf64_Ehdr *)big;
	Elf64_Phdr *ph = (Elf64_Phdr *)(big + sizeof(*h));
	memcpy(h->e_ident, ELFMAG, SELFMAG);
	h->e_ident[EI_CLASS] = ELFCLASS64;
	h->e_ident[EI_DATA] = ELFDATA2LSB;
	h->e_type = ET_EXEC;
	h->e_machine = EM_X86_64;
	h->e_entry = 0x300000;
	h->e_phoff = sizeof(*h);
	h->e_phentsize = sizeof(Elf64_Phdr);
	h->e_phnum = ELF_MAX_PHDRS;
	ph[ELF_MAX_PHDRS - 1] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_offset = sizeof(big) - 0x1000,
					      .p_paddr = 0x300000, .p_filesz = 0x1000, .p_memsz = 0x1000 };
	assert_int_equal(load(f, big, sizeof(big)), 0);
	assert_int_equal(f->k.entry, 0x300000);
}

static void elf_phoff_bad(void **state)
{
	struct fx *f = *state;
	struct elf_img e;
	make_elf(&e, 1);
	e.eh->e_phoff = ELF_LEN;
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.eh->e_phoff = ELF_LEN - sizeof(Elf64_Phdr) + 1;   /* last header one byte short */
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 2);
	e.eh->e_phoff = ELF_LEN - sizeof(Elf64_Phdr);      /* first fits, second does not */
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.eh->e_phoff = UINT64_MAX;
	assert_refused(f, e.buf, sizeof(e.buf));
}

/* phoff + phnum * phentsize wraps 2^64: must not read before the image. */
static void elf_phoff_overflow(void **state)
{
	struct fx *f = *state;
	struct elf_img e;
	make_elf(&e, 1);
	e.eh->e_phnum = ELF_MAX_PHDRS;
	e.eh->e_phoff = UINT64_MAX - 2 * sizeof(Elf64_Phdr) + 1;
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.eh->e_phnum = 2;
	e.eh->e_phoff = (uint64_t)0 - sizeof(Elf64_Phdr);
	assert_refused(f, e.buf, sizeof(e.buf));
}

static void elf_filesz_gt_memsz(void **state)
{
	struct fx *f = *state;
	struct elf_img e;
	make_elf(&e, 1);
	e.ph[0].p_filesz = e.ph[0].p_memsz + 1;
	assert_refused(f, e.buf, sizeof(e.buf));
}

static void elf_segment_past_file(void **state)
{
	struct fx *f = *state;
	struct elf_img e;
	make_elf(&e, 1);
	e.ph[0].p_offset = ELF_LEN - SEG0_FILESZ + 1;
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.ph[0].p_offset = ELF_LEN + 1;
	e.ph[0].p_filesz = 0;   /* even with nothing to copy, the offset is bogus */
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.ph[0].p_offset = UINT64_MAX - 0x10;   /* p_offset + filesz wraps */
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.ph[0].p_offset = 0x10;
	e.ph[0].p_filesz = UINT64_MAX;
	e.ph[0].p_memsz = UINT64_MAX;
	assert_refused(f, e.buf, sizeof(e.buf));
}

/* Nothing may land below 1 MiB, where GDT, page tables, zero page, command
 * line and MP table live. */
static void elf_paddr_below_1mib(void **state)
{
	struct fx *f = *state;
	static const uint64_t addrs[] = { 0, GDT_ADDR, ZERO_PAGE_ADDR, PML4_ADDR, CMDLINE_ADDR,
					  MPTABLE_ADDR, HIGH_MEM_START - 1 };
	struct elf_img e;
	for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		make_elf(&e, 1);
		e.ph[0].p_paddr = addrs[i];
		e.eh->e_entry = addrs[i];
		assert_refused(f, e.buf, sizeof(e.buf));
	}
	/* straddling 1 MiB from below */
	make_elf(&e, 1);
	e.ph[0].p_paddr = HIGH_MEM_START - 0x800;
	e.eh->e_entry = HIGH_MEM_START;
	assert_refused(f, e.buf, sizeof(e.buf));
}

static void elf_paddr_past_ram(void **state)
{
	struct fx *f = *state;
	struct elf_img e;
	make_elf(&e, 1);
	e.ph[0].p_paddr = GUEST_SIZE - SEG0_MEMSZ + 1;
	e.eh->e_entry = e.ph[0].p_paddr;
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.ph[0].p_paddr = GUEST_SIZE;
	e.eh->e_entry = GUEST_SIZE;
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.ph[0].p_memsz = GUEST_SIZE;   /* bss alone larger than RAM */
	assert_refused(f, e.buf, sizeof(e.buf));
	/* in the MMIO gap, where no RAM is */
	make_elf(&e, 1);
	e.ph[0].p_paddr = MMIO_GAP_START;
	e.eh->e_entry = MMIO_GAP_START;
	assert_refused(f, e.buf, sizeof(e.buf));
}

static void elf_paddr_wraps(void **state)
{
	struct fx *f = *state;
	struct elf_img e;
	make_elf(&e, 1);
	e.ph[0].p_paddr = UINT64_MAX - 0x7ff;   /* + memsz 0x1000 wraps to 0x800 */
	e.eh->e_entry = UINT64_MAX - 0x7ff;
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.ph[0].p_memsz = UINT64_MAX - SEG0_PADDR + 0x1001;   /* paddr + memsz wraps to 0x1000 */
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.ph[0].p_memsz = UINT64_MAX;
	assert_refused(f, e.buf, sizeof(e.buf));
}

static void elf_entry_outside(void **state)
{
	struct fx *f = *state;
	struct elf_img e;
	static const uint64_t entries[] = { 0, SEG0_PADDR - 1, SEG0_PADDR + SEG0_MEMSZ,
					    SEG1_PADDR + SEG1_MEMSZ, UINT64_MAX };
	for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
		make_elf(&e, 2);
		e.eh->e_entry = entries[i];
		assert_refused(f, e.buf, sizeof(e.buf));
	}
	/* inside a PT_NOTE only does not count */
	make_elf(&e, 3);
	e.eh->e_entry = 0x10;
	assert_refused(f, e.buf, sizeof(e.buf));
}

static void elf_no_pt_load(void **state)
{
	struct fx *f = *state;
	struct elf_img e;
	make_elf(&e, 1);
	e.ph[0].p_type = PT_NOTE;
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 1);
	e.ph[0].p_memsz = 0;
	e.ph[0].p_filesz = 0;
	assert_refused(f, e.buf, sizeof(e.buf));
}

/* The first segment is fine, the second is not: neither may be copied. */
static void elf_second_segment_bad_leaves_ram(void **state)
{
	struct fx *f = *state;
	struct elf_img e;
	make_elf(&e, 2);
	e.ph[1].p_paddr = GUEST_SIZE;
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 2);
	e.ph[1].p_paddr = 0x1000;
	assert_refused(f, e.buf, sizeof(e.buf));
	make_elf(&e, 2);
	e.ph[1].p_offset = ELF_LEN;
	assert_refused(f, e.buf, sizeof(e.buf));

	/* Also with RAM that already holds data: it stays as it was. */
	fill_guest(f, SEG0_PADDR, SEG0_MEMSZ, 0x5a);
	make_elf(&e, 2);
	e.ph[1].p_filesz = e.ph[1].p_memsz + 1;
	assert_int_equal(load(f, e.buf, sizeof(e.buf)), -1);
	assert_guest_fill(f, SEG0_PADDR, SEG0_MEMSZ, 0x5a);
}

/* Above 3 GiB, RAM continues at 4 GiB; a segment may go there but not
 * straddle the gap. */
static void elf_high_region(void **state)
{
	(void)state;
	struct guest_mem gm;
	struct kernel_image k;
	struct elf_img e;
	assert_int_equal(guest_mem_init(&gm, MMIO_GAP_START + (16ULL << 20), MMIO_GAP_START,
					MMIO_GAP_END), 0);
	make_elf(&e, 1);
	e.ph[0].p_paddr = MMIO_GAP_START - 0x800;
	e.eh->e_entry = MMIO_GAP_START - 0x800;
	assert_int_equal(kernel_load_x86_64(&gm, e.buf, sizeof(e.buf), &k), -1);
	assert_int_equal(guest_mem_resident(&gm), 0);
	make_elf(&e, 1);
	e.ph[0].p_paddr = MMIO_GAP_END - 0x800;
	e.eh->e_entry = MMIO_GAP_END;
	assert_int_equal(kernel_load_x86_64(&gm, e.buf, sizeof(e.buf), &k), -1);
	assert_int_equal(guest_mem_resident(&gm), 0);
	make_elf(&e, 1);
	e.ph[0].p_paddr = MMIO_GAP_END;
	e.eh->e_entry = MMIO_GAP_END + 4;
	assert_int_equal(kernel_load_x86_64(&gm, e.buf, sizeof(e.buf), &k), 0);
	assert_int_equal(k.entry, MMIO_GAP_END + 4);
	uint8_t *p = guest_mem_ptr(&gm, MMIO_GAP_END, SEG0_FILESZ);
	assert_non_null(p);
	assert_ptr_equal(p, gm.base + MMIO_GAP_START);
	assert_memory_equal(p, e.buf + SEG0_OFF, SEG0_FILESZ);
	guest_mem_release(&gm);
}

/* ---- bzImage images ----------------------------------------------------- */

#define BZ_SETUP_SECTS 4
#define BZ_SETUP_BYTES ((BZ_SETUP_SECTS + 1) * 512)
#define BZ_PM_LEN      0x3000
#define BZ_LEN         (BZ_SETUP_BYTES + BZ_PM_LEN)

static uint8_t bz_buf[BZ_LEN];

static struct setup_header *bz_hdr(uint8_t *img)
{
	return (struct setup_header *)(img + 0x1f1);
}

/* A 64-bit boot protocol 2.15 bzImage with a pattern protected-mode part. */
static uint8_t *make_bz(void)
{
	for (size_t i = 0; i < sizeof(bz_buf); i++)
		bz_buf[i] = pattern(i);
	memset(bz_buf + 0x1f1, 0, sizeof(struct setup_header));
	struct setup_header *h = bz_hdr(bz_buf);
	h->setup_sects = BZ_SETUP_SECTS;
	h->boot_flag = 0xaa55;
	h->header = 0x53726448;
	h->version = 0x020f;
	h->loadflags = LOADED_HIGH;
	h->xloadflags = XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G;
	h->relocatable_kernel = 1;
	h->kernel_alignment = 0x200000;
	h->cmdline_size = 255;
	h->pref_address = 0x1000000;
	h->init_size = 0x400000;
	return bz_buf;
}

static void bz_good(void **state)
{
	struct fx *f = *state;
	uint8_t *img = make_bz();
	fill_guest(f, HIGH_MEM_START + BZ_PM_LEN, PAGE, 0xcc);
	assert_int_equal(load(f, img, BZ_LEN), 0);
	assert_guest_bytes(f, HIGH_MEM_START, img + BZ_SETUP_BYTES, BZ_PM_LEN);
	assert_guest_fill(f, HIGH_MEM_START + BZ_PM_LEN, PAGE, 0xcc);
	assert_int_equal(f->k.entry, 0x100200);
	assert_int_equal(f->k.load_start, HIGH_MEM_START);
	assert_int_equal(f->k.load_end, HIGH_MEM_START + BZ_PM_LEN);
	assert_true(f->k.is_bzimage);
	assert_memory_equal(&f->k.hdr, bz_hdr(img), sizeof(struct setup_header));
	assert_int_equal(f->k.cmdline_max, 256);
	/* nothing written below 1 MiB */
	uint8_t *low = guest_mem_ptr(&f->gm, 0, HIGH_MEM_START);
	for (uint64_t i = 0; i < HIGH_MEM_START; i += 64)
		assert_int_equal(low[i], 0);
}

static void bz_cmdline_max(void **state)
{
	struct fx *f = *state;
	static const struct { uint32_t size, max; } cases[] = {
		{ 0, 1 }, { 255, 256 }, { 2046, 2047 }, { 2047, 2048 }, { 2048, 2048 },
		{ 65535, 2048 }, { UINT32_MAX, 2048 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t *img = make_bz();
		bz_hdr(img)->cmdline_size = cases[i].size;
		assert_int_equal(load(f, img, BZ_LEN), 0);
		assert_int_equal(f->k.cmdline_max, cases[i].max);
	}
}

/* setup_sects 0 means 4, as in the boot protocol. */
static void bz_setup_sects_zero(void **state)
{
	struct fx *f = *state;
	uint8_t *img = make_bz();
	bz_hdr(img)->setup_sects = 0;
	assert_int_equal(load(f, img, BZ_LEN), 0);
	assert_guest_bytes(f, HIGH_MEM_START, img + 5 * 512, BZ_PM_LEN);
	/* setup_sects 1: the protected-mode part starts at 1024 */
	img = make_bz();
	bz_hdr(img)->setup_sects = 1;
	assert_int_equal(load(f, img, BZ_LEN), 0);
	assert_guest_bytes(f, HIGH_MEM_START, img + 1024, BZ_LEN - 1024);
	assert_int_equal(f->k.load_end, HIGH_MEM_START + BZ_LEN - 1024);
}

static void bz_old_version(void **state)
{
	struct fx *f = *state;
	static const uint16_t versions[] = { 0x020b, 0x0206, 0x0200, 0x0000 };
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		uint8_t *img = make_bz();
		bz_hdr(img)->version = versions[i];
		assert_refused(f, img, BZ_LEN);
	}
	uint8_t *img = make_bz();
	bz_hdr(img)->version = 0x020c;
	assert_int_equal(load(f, img, BZ_LEN), 0);
}

static void bz_not_64bit(void **state)
{
	struct fx *f = *state;
	uint8_t *img = make_bz();
	bz_hdr(img)->xloadflags = 0;
	assert_refused(f, img, BZ_LEN);
	img = make_bz();
	bz_hdr(img)->xloadflags = (uint16_t)~XLF_KERNEL_64;
	assert_refused(f, img, BZ_LEN);
}

static void bz_not_loaded_high(void **state)
{
	struct fx *f = *state;
	uint8_t *img = make_bz();
	bz_hdr(img)->loadflags = 0;
	assert_refused(f, img, BZ_LEN);
	img = make_bz();
	bz_hdr(img)->loadflags = (uint8_t)~LOADED_HIGH;
	assert_refused(f, img, BZ_LEN);
}

static void bz_setup_exceeds_file(void **state)
{
	struct fx *f = *state;
	uint8_t *img = make_bz();
	bz_hdr(img)->setup_sects = 255;
	assert_refused(f, img, BZ_LEN);
	/* setup exactly the whole file: no protected-mode part at all */
	img = make_bz();
	bz_hdr(img)->setup_sects = BZ_LEN / 512 - 1;
	assert_refused(f, img, BZ_LEN);
	img = make_bz();
	assert_refused(f, img, BZ_SETUP_BYTES);
	/* file ends inside the setup header area */
	img = make_bz();
	assert_refused(f, img, 0x1f1 + sizeof(struct setup_header));
	assert_refused(f, img, 0x1f1 + sizeof(struct setup_header) - 1);
}

static void bz_init_size_bad(void **state)
{
	struct fx *f = *state;
	uint8_t *img = make_bz();
	bz_hdr(img)->init_size = 0;
	assert_refused(f, img, BZ_LEN);
	img = make_bz();
	bz_hdr(img)->init_size = (uint32_t)(GUEST_SIZE - 0x1000000 + 1);
	assert_refused(f, img, BZ_LEN);
	img = make_bz();
	bz_hdr(img)->init_size = UINT32_MAX;
	assert_refused(f, img, BZ_LEN);
	img = make_bz();
	bz_hdr(img)->pref_address = GUEST_SIZE;
	assert_refused(f, img, BZ_LEN);
	img = make_bz();
	bz_hdr(img)->pref_address = UINT64_MAX - 0x1000;   /* + init_size wraps */
	assert_refused(f, img, BZ_LEN);
	img = make_bz();
	bz_hdr(img)->pref_address = 0x1000;               /* below 1 MiB */
	assert_refused(f, img, BZ_LEN);
	img = make_bz();
	bz_hdr(img)->pref_address = MMIO_GAP_START;        /* no RAM there */
	assert_refused(f, img, BZ_LEN);
	/* exactly fits */
	img = make_bz();
	bz_hdr(img)->init_size = (uint32_t)(GUEST_SIZE - 0x1000000);
	assert_int_equal(load(f, img, BZ_LEN), 0);
}

/* A protected-mode part larger than the RAM above 1 MiB. */
static void bz_too_big_for_ram(void **state)
{
	(void)state;
	struct guest_mem gm;
	struct kernel_image k;
	size_t len = BZ_SETUP_BYTES + (1 << 20) + 1;
	uint8_t *img = calloc(1, len);
	assert_non_null(img);
	memcpy(img, make_bz(), BZ_SETUP_BYTES);
	bz_hdr(img)->pref_address = HIGH_MEM_START;
	bz_hdr(img)->init_size = 0x1000;
	assert_int_equal(guest_mem_init(&gm, 2 << 20, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_int_equal(kernel_load_x86_64(&gm, img, len, &k), -1);
	assert_int_equal(guest_mem_resident(&gm), 0);
	/* one byte less fits exactly */
	assert_int_equal(kernel_load_x86_64(&gm, img, len - 1, &k), 0);
	assert_int_equal(k.load_end, 2 << 20);
	guest_mem_release(&gm);
	free(img);
}

/* ---- neither ------------------------------------------------------------ */

static void unknown_format(void **state)
{
	struct fx *f = *state;
	static uint8_t rnd[8192];
	uint32_t x = 0x12345678;
	for (size_t i = 0; i < sizeof(rnd); i++) {
		x = x * 1103515245u + 12345u;
		rnd[i] = (uint8_t)(x >> 16);
	}
	assert_refused(f, rnd, sizeof(rnd));
	assert_refused(f, rnd, 0);
	assert_refused(f, NULL, 0);
	assert_refused(f, (const uint8_t *)"\x7f" "EL", 3);
	/* HdrS without the boot flag, and the boot flag without HdrS */
	uint8_t *img = make_bz();
	bz_hdr(img)->boot_flag = 0;
	assert_refused(f, img, BZ_LEN);
	img = make_bz();
	bz_hdr(img)->header = 0x53726449;
	assert_refused(f, img, BZ_LEN);
	/* An all-zero buffer */
	static const uint8_t zeros[4096];
	assert_refused(f, zeros, sizeof(zeros));
}

/* ---- the real guest kernel, when built ---------------------------------- */

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return NULL;
	struct stat st;
	uint8_t *buf = NULL;
	if (fstat(fileno(fp), &st) == 0 && st.st_size > 0) {
		buf = malloc((size_t)st.st_size);
		if (buf && fread(buf, 1, (size_t)st.st_size, fp) != (size_t)st.st_size) {
			free(buf);
			buf = NULL;
		}
		*len = (size_t)st.st_size;
	}
	fclose(fp);
	return buf;
}

static void real_kernel(void **state)
{
	(void)state;
	size_t vlen = 0, blen = 0;
	uint8_t *vmlinux = read_file("build/guest/vmlinux", &vlen);
	uint8_t *bz = read_file("build/guest/bzImage", &blen);
	if (!vmlinux || !bz) {
		free(vmlinux);
		free(bz);
		skip();
	}
	struct guest_mem gm;
	struct kernel_image k;
	assert_int_equal(guest_mem_init(&gm, 256ULL << 20, MMIO_GAP_START, MMIO_GAP_END), 0);

	assert_int_equal(kernel_load_x86_64(&gm, vmlinux, vlen, &k), 0);
	assert_int_equal(k.entry, 0x1000000);
	assert_int_equal(k.load_start, 0x1000000);
	assert_false(k.is_bzimage);
	assert_int_equal(k.cmdline_max, COMMAND_LINE_MAX);
	/* every PT_LOAD's file bytes are at its p_paddr */
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)vmlinux;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(vmlinux + eh->e_phoff);
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD || ph[i].p_filesz == 0)
			continue;
		uint8_t *p = guest_mem_ptr(&gm, ph[i].p_paddr, ph[i].p_filesz);
		assert_non_null(p);
		assert_memory_equal(p, vmlinux + ph[i].p_offset, ph[i].p_filesz);
	}

	assert_int_equal(kernel_load_x86_64(&gm, bz, blen, &k), 0);
	const struct setup_header *h = bz_hdr(bz);
	uint64_t setup = ((uint64_t)(h->setup_sects ? h->setup_sects : 4) + 1) * 512;
	assert_true(k.is_bzimage);
	assert_int_equal(k.entry, 0x100200);
	assert_int_equal(k.load_start, HIGH_MEM_START);
	assert_int_equal(k.load_end, HIGH_MEM_START + blen - setup);
	assert_true(k.hdr.version >= 0x020c);
	assert_int_equal(k.cmdline_max, h->cmdline_size + 1 < COMMAND_LINE_MAX ?
						h->cmdline_size + 1 : COMMAND_LINE_MAX);
	uint8_t *p = guest_mem_ptr(&gm, HIGH_MEM_START, blen - setup);
	assert_non_null(p);
	assert_memory_equal(p, bz + setup, blen - setup);

	/* Too small a guest for the bzImage's decompression area. */
	guest_mem_release(&gm);
	assert_int_equal(guest_mem_init(&gm, 8ULL << 20, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_int_equal(kernel_load_x86_64(&gm, bz, blen, &k), -1);
	assert_int_equal(kernel_load_x86_64(&gm, vmlinux, vlen, &k), -1);
	assert_int_equal(guest_mem_resident(&gm), 0);

	guest_mem_release(&gm);
	free(vmlinux);
	free(bz);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(elf_good),
		T(elf_good_variants),
		T(elf_good_exact_fit),
		T(elf_truncated_header),
		T(elf_wrong_class_data_machine),
		T(elf_not_exec),
		T(elf_phnum_bad),
		T(elf_phnum_max),
		T(elf_phoff_bad),
		T(elf_phoff_overflow),
		T(elf_filesz_gt_memsz),
		T(elf_segment_past_file),
		T(elf_paddr_below_1mib),
		T(elf_paddr_past_ram),
		T(elf_paddr_wraps),
		T(elf_entry_outside),
		T(elf_no_pt_load),
		T(elf_second_segment_bad_leaves_ram),
		cmocka_unit_test(elf_high_region),
		T(bz_good),
		T(bz_cmdline_max),
		T(bz_setup_sects_zero),
		T(bz_old_version),
		T(bz_not_64bit),
		T(bz_not_loaded_high),
		T(bz_setup_exceeds_file),
		T(bz_init_size_bad),
		cmocka_unit_test(bz_too_big_for_ram),
		T(unknown_format),
		cmocka_unit_test(real_kernel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
