/* Guest RAM: mapping, the split around the MMIO gap, and the one checked
 * guest-physical-to-host translation. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest_mem.h"
#include "layout_aarch64.h"
#include "layout_x86_64.h"

#define MIB (1ULL << 20)
#define PAGE 4096ULL

static void init_small(void **state)
{
	(void)state;
	struct guest_mem gm;
	assert_int_equal(guest_mem_init(&gm, 32 * MIB, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_non_null(gm.base);
	assert_int_equal(gm.size, 32 * MIB);
	assert_int_equal(gm.nregions, 1);
	assert_int_equal(gm.regions[0].gpa, 0);
	assert_int_equal(gm.regions[0].size, 32 * MIB);
	assert_ptr_equal(gm.regions[0].hva, gm.base);
	assert_int_equal(guest_mem_low_end(&gm), 32 * MIB);
	/* zeroed, and nothing resident until touched */
	assert_int_equal(guest_mem_resident(&gm), 0);
	const uint8_t *p = guest_mem_ptr(&gm, 0, 32 * MIB);
	assert_ptr_equal(p, gm.base);
	for (uint64_t i = 0; i < 32 * MIB; i += PAGE * 97)
		assert_int_equal(p[i], 0);
	guest_mem_release(&gm);
}

static void init_refused(void **state)
{
	(void)state;
	struct guest_mem gm;
	memset(&gm, 0x5a, sizeof(gm));
	assert_int_equal(guest_mem_init(&gm, 0, MMIO_GAP_START, MMIO_GAP_END), -1);
	assert_null(gm.base);
	assert_int_equal(gm.nregions, 0);
	guest_mem_release(&gm);   /* safe after a failed init */
	assert_int_equal(guest_mem_init(&gm, PAGE + 1, MMIO_GAP_START, MMIO_GAP_END), -1);
	assert_int_equal(guest_mem_init(&gm, 2 * MIB - 512, MMIO_GAP_START, MMIO_GAP_END), -1);
	assert_int_equal(guest_mem_init(&gm, 2 * MIB, MMIO_GAP_END, MMIO_GAP_START), -1);
	assert_null(gm.base);
	/* larger than any address space: mmap fails */
	assert_int_equal(guest_mem_init(&gm, 1ULL << 62, MMIO_GAP_START, MMIO_GAP_END), -1);
	assert_null(gm.base);
	guest_mem_release(&gm);
}

static void release_twice(void **state)
{
	(void)state;
	struct guest_mem gm;
	memset(&gm, 0, sizeof(gm));
	guest_mem_release(&gm);
	assert_int_equal(guest_mem_low_end(&gm), 0);
	assert_null(guest_mem_ptr(&gm, 0, 1));
	assert_int_equal(guest_mem_init(&gm, 4 * MIB, MMIO_GAP_START, MMIO_GAP_END), 0);
	guest_mem_release(&gm);
	assert_null(gm.base);
	assert_int_equal(gm.nregions, 0);
	assert_null(guest_mem_ptr(&gm, 0, 1));
	guest_mem_release(&gm);
}

/* RAM exactly up to the gap: one region. */
static void init_exactly_gap(void **state)
{
	(void)state;
	struct guest_mem gm;
	assert_int_equal(guest_mem_init(&gm, MMIO_GAP_START, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_int_equal(gm.nregions, 1);
	assert_int_equal(guest_mem_low_end(&gm), MMIO_GAP_START);
	assert_null(guest_mem_ptr(&gm, MMIO_GAP_START, 1));
	assert_null(guest_mem_ptr(&gm, MMIO_GAP_END, 1));
	guest_mem_release(&gm);
}

/* aarch64: devices below RAM, so a gap from 0 leaves one region, at the
 * gap's end, and no empty one at 0 (KVM refuses an empty memory slot). */
static void init_above_gap_from_zero(void **state)
{
	(void)state;
	struct guest_mem gm;
	assert_int_equal(guest_mem_init(&gm, 64 * MIB, 0, AARCH64_RAM_BASE), 0);
	assert_int_equal(gm.nregions, 1);
	assert_int_equal(gm.regions[0].gpa, AARCH64_RAM_BASE);
	assert_int_equal(gm.regions[0].size, 64 * MIB);
	assert_ptr_equal(gm.regions[0].hva, gm.base);
	assert_int_equal(guest_mem_low_end(&gm), 0);
	assert_ptr_equal(guest_mem_ptr(&gm, AARCH64_RAM_BASE, 64 * MIB), gm.base);
	assert_null(guest_mem_ptr(&gm, 0, 1));
	assert_null(guest_mem_ptr(&gm, AARCH64_RAM_BASE - 1, 2));
	assert_null(guest_mem_ptr(&gm, AARCH64_RAM_BASE + 64 * MIB - 1, 2));
	guest_mem_release(&gm);
}

/* An aligned mapping starts at a multiple of the alignment, holds the
 * whole size, and is released whole; a non-power-of-two is refused. */
static void init_aligned(void **state)
{
	(void)state;
	struct guest_mem gm;
	for (int i = 0; i < 4; i++) {
		assert_int_equal(guest_mem_init_aligned(&gm, 66 * MIB + PAGE * (uint64_t)i, 0, AARCH64_RAM_BASE, 2 * MIB), 0);
		assert_int_equal((uintptr_t)gm.base % (2 * MIB), 0);
		uint8_t *p = guest_mem_ptr(&gm, AARCH64_RAM_BASE, gm.size);
		assert_ptr_equal(p, gm.base);
		p[0] = 1;
		p[gm.size - 1] = 2;
		guest_mem_release(&gm);
	}
	assert_int_equal(guest_mem_init_aligned(&gm, 64 * MIB, 0, AARCH64_RAM_BASE, 3 * MIB), -1);
	assert_null(gm.base);
}

/* RAM beyond the gap start continues at the gap end. */
static void init_two_regions(void **state)
{
	(void)state;
	struct guest_mem gm;
	uint64_t size = MMIO_GAP_START + 64 * MIB;
	assert_int_equal(guest_mem_init(&gm, size, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_int_equal(gm.nregions, 2);
	assert_int_equal(gm.size, size);
	assert_int_equal(gm.regions[0].gpa, 0);
	assert_int_equal(gm.regions[0].size, MMIO_GAP_START);
	assert_ptr_equal(gm.regions[0].hva, gm.base);
	assert_int_equal(gm.regions[1].gpa, MMIO_GAP_END);
	assert_int_equal(gm.regions[1].size, 64 * MIB);
	assert_ptr_equal(gm.regions[1].hva, gm.base + MMIO_GAP_START);
	assert_int_equal(guest_mem_low_end(&gm), MMIO_GAP_START);

	/* translation in each region */
	assert_ptr_equal(guest_mem_ptr(&gm, MMIO_GAP_START - 1, 1), gm.base + MMIO_GAP_START - 1);
	assert_ptr_equal(guest_mem_ptr(&gm, MMIO_GAP_END, 1), gm.base + MMIO_GAP_START);
	assert_ptr_equal(guest_mem_ptr(&gm, MMIO_GAP_END + 64 * MIB - 8, 8),
			 gm.base + size - 8);
	/* the gap is not RAM */
	assert_null(guest_mem_ptr(&gm, MMIO_GAP_START, 1));
	assert_null(guest_mem_ptr(&gm, IOAPIC_ADDR, 4));
	assert_null(guest_mem_ptr(&gm, MMIO_GAP_END - 1, 1));
	/* nor is anything spanning from one region into the gap or across it */
	assert_null(guest_mem_ptr(&gm, MMIO_GAP_START - 1, 2));
	assert_null(guest_mem_ptr(&gm, MMIO_GAP_END - 1, 2));
	assert_null(guest_mem_ptr(&gm, MMIO_GAP_START - 4096, MMIO_GAP_END - MMIO_GAP_START + 8192));
	/* past the end of the high region */
	assert_null(guest_mem_ptr(&gm, MMIO_GAP_END + 64 * MIB, 1));
	assert_null(guest_mem_ptr(&gm, MMIO_GAP_END + 64 * MIB - 8, 9));
	/* the host offset of the high end must not be reachable at its own gpa */
	assert_null(guest_mem_ptr(&gm, size - 1, 1));

	/* a write through the high region lands in the mapping after the low one */
	uint8_t *p = guest_mem_ptr(&gm, MMIO_GAP_END + 4096, 1);
	*p = 0x42;
	assert_int_equal(gm.base[MMIO_GAP_START + 4096], 0x42);
	guest_mem_release(&gm);
}

static void ptr_bounds(void **state)
{
	(void)state;
	struct guest_mem gm;
	const uint64_t size = 4 * MIB;
	assert_int_equal(guest_mem_init(&gm, size, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_ptr_equal(guest_mem_ptr(&gm, 0, size), gm.base);
	assert_ptr_equal(guest_mem_ptr(&gm, 0, 1), gm.base);
	assert_ptr_equal(guest_mem_ptr(&gm, size - 1, 1), gm.base + size - 1);
	assert_ptr_equal(guest_mem_ptr(&gm, 4096, size - 4096), gm.base + 4096);
	assert_null(guest_mem_ptr(&gm, 0, size + 1));
	assert_null(guest_mem_ptr(&gm, size, 1));
	assert_null(guest_mem_ptr(&gm, size - 1, 2));
	assert_null(guest_mem_ptr(&gm, 4096, size - 4095));
	/* len 0 is refused, even at a valid address */
	assert_null(guest_mem_ptr(&gm, 0, 0));
	assert_null(guest_mem_ptr(&gm, 100, 0));
	/* sums that would wrap 2^64 */
	assert_null(guest_mem_ptr(&gm, UINT64_MAX, 1));
	assert_null(guest_mem_ptr(&gm, UINT64_MAX, 2));
	assert_null(guest_mem_ptr(&gm, 1, UINT64_MAX));
	assert_null(guest_mem_ptr(&gm, 0, UINT64_MAX));
	assert_null(guest_mem_ptr(&gm, UINT64_MAX, UINT64_MAX));
	assert_null(guest_mem_ptr(&gm, size - 1, UINT64_MAX));
	assert_null(guest_mem_ptr(&gm, UINT64_MAX - size + 2, size));
	guest_mem_release(&gm);
}

static void resident_counts_touched_pages(void **state)
{
	(void)state;
	struct guest_mem gm;
	long page = sysconf(_SC_PAGESIZE);
	assert_int_equal(guest_mem_init(&gm, 16 * MIB, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_int_equal(guest_mem_resident(&gm), 0);
	uint8_t *p = guest_mem_ptr(&gm, 8 * MIB, 1);
	*p = 1;
	int64_t r = guest_mem_resident(&gm);
	/* one page, or one transparent huge page */
	assert_true(r >= page && r <= (int64_t)(2 * MIB));
	assert_int_equal(r % page, 0);
	guest_mem_release(&gm);
}

/* A memory file's holes read as zeros and writing them gives the file no
 * pages (on tmpfs, as a memfd is, those pages would count against the run's
 * memory limit and stay in the file); its data reads back and the file is
 * never written. */
static void file_holes_cost_no_file_pages(void **state)
{
	(void)state;
	const uint64_t size = 4 * MIB, data_off = 1 * MIB;
	int fd = memfd_create("guest_mem_test", 0);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	uint8_t page[4096];
	memset(page, 0x5a, sizeof(page));
	assert_int_equal(pwrite(fd, page, sizeof(page), (off_t)data_off), (ssize_t)sizeof(page));
	struct stat before;
	assert_int_equal(fstat(fd, &before), 0);

	struct guest_mem gm;
	assert_int_equal(guest_mem_init_file(&gm, size, MMIO_GAP_START, MMIO_GAP_END, fd), 0);
	assert_int_equal(gm.base[data_off], 0x5a);
	assert_int_equal(gm.base[data_off + 4095], 0x5a);
	assert_int_equal(gm.base[0], 0);
	assert_int_equal(gm.base[size - 1], 0);
	/* write every page: the holes and the data page */
	for (uint64_t off = 0; off < size; off += 4096)
		gm.base[off] = 1;
	assert_int_equal(gm.base[data_off + 1], 0x5a);

	struct stat after;
	assert_int_equal(fstat(fd, &after), 0);
	assert_int_equal(after.st_blocks, before.st_blocks);
	uint8_t back[4096];
	assert_int_equal(pread(fd, back, sizeof(back), (off_t)data_off), (ssize_t)sizeof(back));
	assert_memory_equal(back, page, sizeof(page));
	assert_int_equal(pread(fd, back, 1, 0), 1);
	assert_int_equal(back[0], 0);

	/* reverting a written hole page reads zero again */
	assert_int_equal(guest_mem_revert(&gm, 8192, 4096), 0);
	assert_int_equal(gm.base[8192], 0);
	guest_mem_release(&gm);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(init_small),
		cmocka_unit_test(init_refused),
		cmocka_unit_test(release_twice),
		cmocka_unit_test(init_exactly_gap),
		cmocka_unit_test(init_above_gap_from_zero),
		cmocka_unit_test(init_aligned),
		cmocka_unit_test(init_two_regions),
		cmocka_unit_test(ptr_bounds),
		cmocka_unit_test(resident_counts_touched_pages),
		cmocka_unit_test(file_holes_cost_no_file_pages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
