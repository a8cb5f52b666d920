/* libFuzzer harness for the arm64 Image header check (vmm/loader_aarch64.c).
 *
 * Every input is planned for a few guest sizes. Beyond the sanitizers, the
 * harness checks the planner's promises for an accepted Image: it starts
 * at RAM's base plus a text_offset under 2 MiB, 8-byte aligned; what it
 * occupies (the file or image_size, the larger) ends at or below the
 * device tree's place; the tree is the last 2 MiB of RAM. A refusal says
 * why in a non-empty line.
 *
 * Build and run: make fuzz-smoke (short) or make fuzz (FUZZ_TIME seconds). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_aarch64.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t rams[] = { 0, AARCH64_GUEST_MEM_MIN - 1, AARCH64_GUEST_MEM_MIN, 256ULL << 20, 1ULL << 40 };
	for (size_t i = 0; i < sizeof(rams) / sizeof(rams[0]); i++) {
		struct arm64_image_plan p;
		char err[256] = "";
		if (arm64_image_plan(data, size, rams[i], &p, err, sizeof(err)) < 0) {
			if (!err[0])
				abort();
			continue;
		}
		uint64_t off = p.load - AARCH64_RAM_BASE;
		if (p.load < AARCH64_RAM_BASE || off >= AARCH64_IMAGE_ALIGN || (off & 7) || p.end < p.load ||
		    p.end - p.load < size || p.end > p.fdt || p.fdt != AARCH64_RAM_BASE + rams[i] - AARCH64_FDT_MAX)
			abort();
	}
	return 0;
}
