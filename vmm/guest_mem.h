/* Guest RAM: one host mapping (anonymous, or a snapshot's memory file) split into at most two
 * guest-physical regions around an MMIO gap, and the one checked
 * guest-physical-to-host translation that every other module uses. */
#ifndef VMM_GUEST_MEM_H
#define VMM_GUEST_MEM_H

#include <stddef.h>
#include <stdint.h>

#define GUEST_MEM_MAX_REGIONS 2

struct guest_region {
	uint64_t gpa;   /* first guest-physical address */
	uint64_t size;  /* bytes */
	uint8_t *hva;   /* host address of gpa */
};

struct guest_mem {
	uint8_t *base;          /* the whole host mapping */
	uint64_t size;          /* total guest RAM in bytes */
	unsigned nregions;
	struct guest_region regions[GUEST_MEM_MAX_REGIONS];
};

/* Map size bytes of zeroed guest RAM. RAM that would fall in
 * [gap_start, gap_end) is placed at gap_end instead. Returns 0, or -1 after
 * one error line (size zero, not page-aligned, or mmap failure). */
int guest_mem_init(struct guest_mem *gm, uint64_t size, uint64_t gap_start, uint64_t gap_end);

/* guest_mem_init with the host mapping starting at a multiple of align (a
 * power of two; 0 as guest_mem_init): KVM maps guest memory to the guest
 * in blocks as large as the host's pages only where host and guest
 * addresses agree modulo the block (kvm_arch_ram_align says what it
 * was measured to be worth). */
int guest_mem_init_aligned(struct guest_mem *gm, uint64_t size, uint64_t gap_start, uint64_t gap_end, uint64_t align);

/* The same over fd's first size bytes, mapped copy-on-write (a snapshot's
 * memory file, opened read-only: it is never written); fd -1 is zeroed
 * anonymous memory. The file's holes (the guest's zero pages) are mapped
 * as anonymous memory, so that touching them costs no page of the file.
 * fd may be closed afterwards. */
int guest_mem_init_file(struct guest_mem *gm, uint64_t size, uint64_t gap_start, uint64_t gap_end, int fd);

/* Drop what the host wrote to the page-aligned len bytes at gpa, so that
 * they read from the backing file again (zero when anonymous): undoes the
 * host probe's use of a restored guest's page. Returns 0 or -1. */
int guest_mem_revert(struct guest_mem *gm, uint64_t gpa, uint64_t len);

/* Unmap guest RAM; safe on a zeroed or already released struct. */
void guest_mem_release(struct guest_mem *gm);

/* Host pointer to the len bytes at gpa, or NULL unless all of them lie inside
 * one RAM region. Overflow-safe for any gpa and len; len 0 is refused. This is
 * the only way any module reaches guest memory. */
void *guest_mem_ptr(const struct guest_mem *gm, uint64_t gpa, uint64_t len);

/* End of the RAM region that starts at gpa 0 (the RAM below the gap), 0
 * where RAM starts above the gap. */
uint64_t guest_mem_low_end(const struct guest_mem *gm);

/* Bytes of guest RAM currently resident in the host (pages the guest or the
 * loaders touched), measured with mincore; -1 on failure. */
int64_t guest_mem_resident(const struct guest_mem *gm);

#endif
