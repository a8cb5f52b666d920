/* Writes a seed corpus for fuzz_loader into the directory given: small
 * well-formed ELF vmlinux and bzImage images, so the fuzzer starts from
 * inputs that get past the magic checks. Built and run by `make fuzz-smoke`
 * and `make fuzz`; the corpus lives under build/, never in the tree. */
#include <asm/bootparam.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int write_file(const char *dir, const char *name, const void *buf, size_t len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *fp = fopen(path, "wb");
	if (!fp || fwrite(buf, 1, len, fp) != len || fclose(fp) != 0) {
		perror(path);
		return -1;
	}
	return 0;
}

/* ELF64 x86_64 executable: nload PT_LOAD segments (the last with a bss
 * tail) and optionally a PT_NOTE, entry at the start of the first. */
static size_t make_elf(uint8_t *buf, size_t cap, unsigned nload, int note)
{
	unsigned nph = nload + (note ? 1 : 0);
	size_t data = sizeof(Elf64_Ehdr) + nph * sizeof(Elf64_Phdr);
	size_t seg = 32;
	size_t len = data + nload * seg;
	if (len > cap)
		return 0;
	memset(buf, 0, len);
	Elf64_Ehdr *h = (Elf64_Ehdr *)buf;
	Elf64_Phdr *ph = (Elf64_Phdr *)(buf + sizeof(*h));
	memcpy(h->e_ident, ELFMAG, SELFMAG);
	h->e_ident[EI_CLASS] = ELFCLASS64;
	h->e_ident[EI_DATA] = ELFDATA2LSB;
	h->e_ident[EI_VERSION] = EV_CURRENT;
	h->e_type = ET_EXEC;
	h->e_machine = EM_X86_64;
	h->e_version = EV_CURRENT;
	h->e_entry = 0x200000;
	h->e_phoff = sizeof(*h);
	h->e_ehsize = sizeof(*h);
	h->e_phentsize = sizeof(Elf64_Phdr);
	h->e_phnum = (Elf64_Half)nph;
	for (unsigned i = 0; i < nload; i++) {
		ph[i] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_flags = PF_R | PF_X,
				      .p_offset = data + i * seg, .p_vaddr = 0x200000 + i * 0x100000ULL,
				      .p_paddr = 0x200000 + i * 0x100000ULL, .p_filesz = seg,
				      .p_memsz = i + 1 == nload ? 0x2000 : seg, .p_align = 0x1000 };
		memset(buf + data + i * seg, 0xf4, seg);   /* hlt */
	}
	if (note)
		ph[nload] = (Elf64_Phdr){ .p_type = PT_NOTE, .p_offset = data, .p_filesz = 8,
					  .p_memsz = 8, .p_align = 4 };
	return len;
}

/* bzImage: setup_sects sectors of setup after the boot sector, then a small
 * protected-mode part. */
static size_t make_bz(uint8_t *buf, size_t cap, uint8_t setup_sects, uint32_t cmdline_size)
{
	size_t setup = ((size_t)(setup_sects ? setup_sects : 4) + 1) * 512;
	size_t len = setup + 512;
	if (len > cap)
		return 0;
	memset(buf, 0, len);
	struct setup_header *h = (struct setup_header *)(buf + 0x1f1);
	h->setup_sects = setup_sects;
	h->boot_flag = 0xaa55;
	h->header = 0x53726448;
	h->version = 0x020f;
	h->loadflags = LOADED_HIGH;
	h->xloadflags = XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G;
	h->relocatable_kernel = 1;
	h->kernel_alignment = 0x200000;
	h->cmdline_size = cmdline_size;
	h->pref_address = 0x1000000;
	h->init_size = 0x100000;
	memset(buf + setup, 0x90, 512);
	return len;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	static uint8_t buf[8192];
	size_t n;
	int rc = 0;
	n = make_elf(buf, sizeof(buf), 1, 0);
	rc |= write_file(argv[1], "elf-one-segment", buf, n);
	n = make_elf(buf, sizeof(buf), 3, 1);
	rc |= write_file(argv[1], "elf-three-segments-note", buf, n);
	n = make_bz(buf, sizeof(buf), 1, 2047);
	rc |= write_file(argv[1], "bzimage-setup1", buf, n);
	n = make_bz(buf, sizeof(buf), 0, 255);
	rc |= write_file(argv[1], "bzimage-setup0", buf, n);
	return rc ? 1 : 0;
}
