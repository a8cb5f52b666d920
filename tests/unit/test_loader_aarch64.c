/* The arm64 Image header check and placement (vmm/loader_aarch64.c): a
 * good Image goes to RAM's base plus its text_offset with the device tree
 * in RAM's last 2 MiB; an old Image (image_size 0) gets the 0x80000 offset
 * booting.rst prescribes; a truncated file, a missing magic, a big-endian
 * Image, a bad text_offset, too little RAM and an Image that would reach
 * the tree are each refused with their own line. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <endian.h>
#include <string.h>

#include "loader_aarch64.h"

static uint8_t img[1 << 20];
static char err[256];
static struct arm64_image_plan plan;

static void header(uint64_t text_offset, uint64_t image_size, uint64_t flags)
{
	struct arm64_image_header h = { .text_offset = htole64(text_offset), .image_size = htole64(image_size),
					.flags = htole64(flags), .magic = htole32(ARM64_IMAGE_MAGIC) };
	memset(img, 0, sizeof(img));
	memcpy(img, &h, sizeof(h));
}

static void refused(size_t len, uint64_t ram, const char *why)
{
	assert_int_equal(arm64_image_plan(img, len, ram, &plan, err, sizeof(err)), -1);
	assert_string_equal(err, why);
}

static void placed(void **state)
{
	(void)state;
	header(0, 4 << 20, 2 << 1);   /* 4 KiB pages, BSS past the file */
	assert_int_equal(arm64_image_plan(img, sizeof(img), 256ULL << 20, &plan, err, sizeof(err)), 0);
	assert_true(plan.load == AARCH64_RAM_BASE);
	assert_true(plan.end == AARCH64_RAM_BASE + (4 << 20));   /* image_size, larger than the file */
	assert_true(plan.fdt == AARCH64_RAM_BASE + (256ULL << 20) - AARCH64_FDT_MAX);

	header(0x10000, 1000, 0);   /* a file larger than its image_size: the file counts */
	assert_int_equal(arm64_image_plan(img, sizeof(img), 256ULL << 20, &plan, err, sizeof(err)), 0);
	assert_true(plan.load == AARCH64_RAM_BASE + 0x10000 && plan.end == plan.load + sizeof(img));

	header(0x1234, 0, 0);   /* before 3.17: text_offset is 0x80000 whatever it says */
	assert_int_equal(arm64_image_plan(img, sizeof(img), 256ULL << 20, &plan, err, sizeof(err)), 0);
	assert_true(plan.load == AARCH64_RAM_BASE + ARM64_OLD_TEXT_OFFSET);
}

static void refusals(void **state)
{
	(void)state;
	header(0, 4 << 20, 0);
	refused(ARM64_IMAGE_HDR_LEN - 1, 256ULL << 20, "kernel: shorter than an arm64 Image header");
	img[56] ^= 1;
	refused(sizeof(img), 256ULL << 20, "kernel: not an arm64 Image (no \"ARM\\x64\" magic)");
	header(0, 4 << 20, 1);
	refused(sizeof(img), 256ULL << 20, "kernel: a big-endian Image");
	header(AARCH64_IMAGE_ALIGN, 4 << 20, 0);
	refused(sizeof(img), 256ULL << 20, "kernel: text_offset is not within 2 MiB and 8-byte aligned");
	header(0x1001, 4 << 20, 0);
	refused(sizeof(img), 256ULL << 20, "kernel: text_offset is not within 2 MiB and 8-byte aligned");
	header(0, 4 << 20, 0);
	refused(sizeof(img), AARCH64_GUEST_MEM_MIN - 1, "kernel: guest RAM out of range for an arm64 guest");
	/* an image_size reaching into the tree's 2 MiB, then one that wraps */
	header(0, AARCH64_GUEST_MEM_MIN - AARCH64_FDT_MAX + 1, 0);
	refused(sizeof(img), AARCH64_GUEST_MEM_MIN, "kernel: the Image does not fit in guest RAM below the device tree");
	header(0x80000, UINT64_MAX, 0);
	refused(sizeof(img), 256ULL << 20, "kernel: the Image does not fit in guest RAM below the device tree");
	/* exactly up to the tree fits */
	header(0, AARCH64_GUEST_MEM_MIN - AARCH64_FDT_MAX, 0);
	assert_int_equal(arm64_image_plan(img, sizeof(img), AARCH64_GUEST_MEM_MIN, &plan, err, sizeof(err)), 0);
	assert_true(plan.end == plan.fdt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(placed),
		cmocka_unit_test(refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
