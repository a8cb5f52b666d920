/* The arm64 kernel Image (Documentation/arch/arm64/booting.rst): its
 * 64-byte header checked against the file and guest RAM, and where the
 * Image, its BSS and the device tree go. Pure, on bytes, so it is tested
 * and fuzzed without files or KVM. */
#ifndef VMM_LOADER_AARCH64_H
#define VMM_LOADER_AARCH64_H

#include <stddef.h>
#include <stdint.h>

#include "layout_aarch64.h"

#define ARM64_IMAGE_MAGIC   0x644d5241u   /* "ARM\x64", little-endian */
#define ARM64_IMAGE_HDR_LEN 64u
/* What an Image of before Linux 3.17 (image_size 0) is assumed to have. */
#define ARM64_OLD_TEXT_OFFSET 0x80000ULL

/* The header as booting.rst lays it out, little-endian. */
struct arm64_image_header {
	uint32_t code0, code1;
	uint64_t text_offset;    /* from a 2 MiB aligned base */
	uint64_t image_size;     /* what the kernel occupies, BSS included; 0: unknown (old) */
	uint64_t flags;          /* bit 0: big-endian; bits 1-2: page size; bit 3: placement */
	uint64_t res2, res3, res4;
	uint32_t magic;
	uint32_t res5;
};
_Static_assert(sizeof(struct arm64_image_header) == ARM64_IMAGE_HDR_LEN, "booting.rst's header");

struct arm64_image_plan {
	uint64_t load;     /* guest-physical address of the Image's first byte, and its entry */
	uint64_t end;      /* one past what the kernel occupies (its file or image_size, the larger) */
	uint64_t fdt;      /* where the device tree goes: the last AARCH64_FDT_MAX of RAM */
};

/* Where the device tree of a guest with ram_size bytes of RAM goes: its
 * last AARCH64_FDT_MAX bytes (page aligned, as RAM's size is; booting.rst
 * asks for 8 bytes). */
static inline uint64_t arm64_fdt_addr(uint64_t ram_size)
{
	return AARCH64_RAM_BASE + ram_size - AARCH64_FDT_MAX;
}

/* Check the Image img (len bytes) for a guest whose RAM is ram_size bytes
 * at AARCH64_RAM_BASE, and plan where it goes: the lowest 2 MiB aligned
 * base, plus text_offset; the tree at RAM's top. Returns 0, or -1 with a
 * one-line reason in err (truncated, no magic, big-endian, a text_offset
 * or image_size that does not fit, an Image overlapping the tree). */
int arm64_image_plan(const uint8_t *img, size_t len, uint64_t ram_size, struct arm64_image_plan *out, char *err,
		     size_t errlen);

#endif
