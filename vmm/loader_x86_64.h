/* Kernel image loaders for the Linux x86_64 64-bit boot protocol: an ELF
 * vmlinux (segments to their physical addresses) or a bzImage (protected-mode
 * part to 1 MiB, entered at its 64-bit entry). Both take the image as bytes
 * so they can be tested and fuzzed without files. */
#ifndef VMM_LOADER_X86_64_H
#define VMM_LOADER_X86_64_H

#include <asm/bootparam.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "guest_mem.h"

struct kernel_image {
	uint64_t entry;            /* guest-physical 64-bit entry point */
	uint64_t load_start;       /* lowest guest-physical byte written */
	uint64_t load_end;         /* one past the highest byte written */
	bool is_bzimage;
	struct setup_header hdr;   /* the bzImage's own header (bzImage only) */
	uint32_t cmdline_max;      /* longest command line it takes, NUL included */
};

/* Most program headers an ELF image may have; vmlinux has five. */
#define ELF_MAX_PHDRS 64

/* Load a vmlinux ELF or a bzImage (detected by magic, never guessed) into
 * guest RAM and describe it in *out. Every offset, size and address is
 * checked against the image length and guest RAM before anything is copied,
 * and nothing may land below 1 MiB where the boot tables live. Returns 0, or
 * -1 after one error line (truncated, wrong architecture, too old a boot
 * protocol, too big for guest RAM, unknown format). */
int kernel_load_x86_64(const struct guest_mem *gm, const uint8_t *img, size_t len,
		       struct kernel_image *out);

#endif
