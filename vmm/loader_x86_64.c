#include "loader_x86_64.h"

#include <elf.h>
#include <string.h>

#include "layout_x86_64.h"
#include "log.h"

#define SETUP_HEADER_OFFSET 0x1f1
#define HDRS_MAGIC          0x53726448u  /* "HdrS" */
#define BOOT_FLAG_MAGIC     0xaa55
#define BZ_MIN_VERSION      0x020c       /* 2.12: xloadflags and the 64-bit entry */
#define BZ_64BIT_ENTRY      0x200        /* startup_64 offset in the protected-mode code */

/* Check that [gpa, gpa+len) is RAM at or above 1 MiB and return it. */
static uint8_t *high_ram(const struct guest_mem *gm, uint64_t gpa, uint64_t len)
{
	if (gpa < HIGH_MEM_START)
		return NULL;
	return guest_mem_ptr(gm, gpa, len);
}

static int load_elf(const struct guest_mem *gm, const uint8_t *img, size_t len,
		    struct kernel_image *out)
{
	Elf64_Ehdr eh;
	if (len < sizeof(eh)) {
		vmm_err("kernel: ELF image truncated (%zu bytes)", len);
		return -1;
	}
	memcpy(&eh, img, sizeof(eh));
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh.e_machine != EM_X86_64) {
		vmm_err("kernel: ELF image is not x86_64 (class %u, machine %u)",
			eh.e_ident[EI_CLASS], eh.e_machine);
		return -1;
	}
	if (eh.e_type != ET_EXEC) {
		vmm_err("kernel: ELF image is not an executable (type %u)", eh.e_type);
		return -1;
	}
	if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > ELF_MAX_PHDRS) {
		vmm_err("kernel: ELF program header table is malformed (%u entries of %u bytes)",
			eh.e_phnum, eh.e_phentsize);
		return -1;
	}
	uint64_t ph_bytes = (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr);
	if (eh.e_phoff > len || ph_bytes > len - eh.e_phoff) {
		vmm_err("kernel: ELF program headers lie past the end of the image");
		return -1;
	}

	/* Validate every segment before copying any, so a bad image leaves
	 * guest RAM untouched. */
	Elf64_Phdr ph[ELF_MAX_PHDRS];
	memcpy(ph, img + eh.e_phoff, ph_bytes);
	uint64_t lo = UINT64_MAX, hi = 0;
	bool entry_ok = false;
	unsigned nload = 0;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		const Elf64_Phdr *p = &ph[i];
		if (p->p_type != PT_LOAD || p->p_memsz == 0)
			continue;
		if (p->p_filesz > p->p_memsz || p->p_offset > len || p->p_filesz > len - p->p_offset) {
			vmm_err("kernel: ELF segment %u lies past the end of the image", i);
			return -1;
		}
		if (!high_ram(gm, p->p_paddr, p->p_memsz)) {
			vmm_err("kernel: ELF segment %u (0x%llx, %llu bytes) does not fit in guest RAM above 1 MiB",
				i, (unsigned long long)p->p_paddr, (unsigned long long)p->p_memsz);
			return -1;
		}
		if (eh.e_entry >= p->p_paddr && eh.e_entry - p->p_paddr < p->p_memsz)
			entry_ok = true;
		lo = p->p_paddr < lo ? p->p_paddr : lo;
		hi = p->p_paddr + p->p_memsz > hi ? p->p_paddr + p->p_memsz : hi;
		nload++;
	}
	if (nload == 0) {
		vmm_err("kernel: ELF image has no loadable segment");
		return -1;
	}
	if (!entry_ok) {
		vmm_err("kernel: ELF entry point 0x%llx is outside the loaded segments",
			(unsigned long long)eh.e_entry);
		return -1;
	}
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		const Elf64_Phdr *p = &ph[i];
		if (p->p_type != PT_LOAD || p->p_memsz == 0)
			continue;
		uint8_t *dst = high_ram(gm, p->p_paddr, p->p_memsz);
		if (p->p_filesz)
			memcpy(dst, img + p->p_offset, p->p_filesz);
		memset(dst + p->p_filesz, 0, p->p_memsz - p->p_filesz);
	}
	out->entry = eh.e_entry;
	out->load_start = lo;
	out->load_end = hi;
	out->is_bzimage = false;
	out->cmdline_max = COMMAND_LINE_MAX;
	return 0;
}

static int load_bzimage(const struct guest_mem *gm, const uint8_t *img, size_t len,
			struct kernel_image *out)
{
	struct setup_header h;
	if (len < SETUP_HEADER_OFFSET + sizeof(h)) {
		vmm_err("kernel: bzImage truncated (%zu bytes)", len);
		return -1;
	}
	memcpy(&h, img + SETUP_HEADER_OFFSET, sizeof(h));
	if (h.version < BZ_MIN_VERSION) {
		vmm_err("kernel: bzImage boot protocol %u.%02u is too old (need 2.12)",
			h.version >> 8, h.version & 0xff);
		return -1;
	}
	if (!(h.xloadflags & XLF_KERNEL_64)) {
		vmm_err("kernel: bzImage has no 64-bit entry point (not an x86_64 kernel)");
		return -1;
	}
	if (!(h.loadflags & LOADED_HIGH)) {
		vmm_err("kernel: zImage (loaded low) is not supported");
		return -1;
	}
	uint64_t setup_sects = h.setup_sects ? h.setup_sects : 4;
	uint64_t setup_bytes = (setup_sects + 1) * 512;
	if (setup_bytes >= len) {
		vmm_err("kernel: bzImage truncated: setup is %llu bytes, image %zu",
			(unsigned long long)setup_bytes, len);
		return -1;
	}
	uint64_t pm_len = len - setup_bytes;
	if (h.init_size == 0 || !high_ram(gm, h.pref_address, h.init_size)) {
		vmm_err("kernel: bzImage needs %u bytes at 0x%llx to decompress; guest RAM is too small",
			h.init_size, (unsigned long long)h.pref_address);
		return -1;
	}
	uint8_t *dst = high_ram(gm, HIGH_MEM_START, pm_len);
	if (!dst) {
		vmm_err("kernel: bzImage (%llu bytes) does not fit in guest RAM",
			(unsigned long long)pm_len);
		return -1;
	}
	memcpy(dst, img + setup_bytes, pm_len);
	out->entry = HIGH_MEM_START + BZ_64BIT_ENTRY;
	out->load_start = HIGH_MEM_START;
	out->load_end = HIGH_MEM_START + pm_len;
	out->is_bzimage = true;
	out->hdr = h;
	uint64_t max = (uint64_t)h.cmdline_size + 1;
	out->cmdline_max = (uint32_t)(max < COMMAND_LINE_MAX ? max : COMMAND_LINE_MAX);
	return 0;
}

int kernel_load_x86_64(const struct guest_mem *gm, const uint8_t *img, size_t len,
		       struct kernel_image *out)
{
	memset(out, 0, sizeof(*out));
	if (len >= SELFMAG && memcmp(img, ELFMAG, SELFMAG) == 0)
		return load_elf(gm, img, len, out);
	uint32_t magic = 0;
	uint16_t flag = 0;
	if (len >= SETUP_HEADER_OFFSET + sizeof(struct setup_header)) {
		memcpy(&magic, img + SETUP_HEADER_OFFSET + offsetof(struct setup_header, header), 4);
		memcpy(&flag, img + SETUP_HEADER_OFFSET + offsetof(struct setup_header, boot_flag), 2);
	}
	if (magic == HDRS_MAGIC && flag == BOOT_FLAG_MAGIC)
		return load_bzimage(gm, img, len, out);
	vmm_err("kernel: image is neither an ELF vmlinux nor a bzImage (%zu bytes)", len);
	return -1;
}
