#include "loader_aarch64.h"

#include <endian.h>
#include <stdio.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *why)
{
	snprintf(err, errlen, "kernel: %s", why);
	return -1;
}

int arm64_image_plan(const uint8_t *img, size_t len, uint64_t ram_size, struct arm64_image_plan *out, char *err,
		     size_t errlen)
{
	struct arm64_image_header h;
	if (len < sizeof(h))
		return fail(err, errlen, "shorter than an arm64 Image header");
	memcpy(&h, img, sizeof(h));
	if (le32toh(h.magic) != ARM64_IMAGE_MAGIC)
		return fail(err, errlen, "not an arm64 Image (no \"ARM\\x64\" magic)");
	uint64_t text_offset = le64toh(h.text_offset), image_size = le64toh(h.image_size);
	if (image_size == 0)   /* before 3.17: the header's offset cannot be trusted */
		text_offset = ARM64_OLD_TEXT_OFFSET;
	if (le64toh(h.flags) & 1)
		return fail(err, errlen, "a big-endian Image");
	if (text_offset >= AARCH64_IMAGE_ALIGN || (text_offset & 7))
		return fail(err, errlen, "text_offset is not within 2 MiB and 8-byte aligned");
	if (ram_size < AARCH64_GUEST_MEM_MIN || ram_size > (1ULL << 40))
		return fail(err, errlen, "guest RAM out of range for an arm64 guest");
	uint64_t occupies = image_size > len ? image_size : (uint64_t)len;
	uint64_t load = AARCH64_RAM_BASE + text_offset;
	uint64_t fdt = arm64_fdt_addr(ram_size);
	if (occupies > fdt - load)
		return fail(err, errlen, "the Image does not fit in guest RAM below the device tree");
	*out = (struct arm64_image_plan){ .load = load, .end = load + occupies, .fdt = fdt };
	return 0;
}
