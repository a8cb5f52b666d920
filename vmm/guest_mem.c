#include "guest_mem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

/* Holes of a memory file smaller than this stay mapped from the file: each
 * remapped hole is one more mapping in the vmm, and a small one saves little. */
#define HOLE_MIN_BYTES (64u << 10)
/* At most this many holes are remapped, far below the kernel's default of
 * 65530 mappings per process, whatever the snapshot's layout. */
#define HOLE_MAX_REMAPS 8192u

/* Map the holes of fd's first size bytes, mapped at p, as anonymous memory.
 * A snapshot leaves the guest's zero pages as holes. Mapped from the file,
 * a hole costs twice when the guest first writes it: the file system gives
 * the hole a page, then the guest gets its own copy of it. On tmpfs that
 * page cannot be reclaimed, so it counts against the run's memory limit,
 * and it stays in the file after the run. Anonymous memory reads as the
 * same zeros and costs only the guest's page. Best effort: where the file
 * system cannot report holes (SEEK_DATA fails), everything stays file-backed.
 * Returns 0, or -1 after one error line when a remap fails. */
static int map_holes_anonymous(uint8_t *p, uint64_t size, int fd)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	unsigned remaps = 0;
	off_t off = 0;
	while ((uint64_t)off < size && remaps < HOLE_MAX_REMAPS) {
		off_t data = lseek(fd, off, SEEK_DATA);
		if (data < 0 && errno != ENXIO)
			return 0;
		uint64_t hole_end = data < 0 || (uint64_t)data > size ? size : (uint64_t)data;
		/* Only whole pages of the hole: a file system's blocks may be smaller. */
		uint64_t start = ((uint64_t)off + page - 1) / page * page, end = hole_end / page * page;
		if (end > start && end - start >= HOLE_MIN_BYTES) {
			void *m = mmap(p + start, (size_t)(end - start), PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
			if (m == MAP_FAILED) {
				vmm_perr("guest memory: mapping a hole of the memory file");
				return -1;
			}
			remaps++;
		}
		if (data < 0 || hole_end == size)
			break;
		off = lseek(fd, data, SEEK_HOLE);
		if (off < 0)
			return 0;
	}
	return 0;
}

/* Anonymous memory of size bytes starting at a multiple of align (0: any
 * page): over-mapped by align, the head and tail given back. */
static void *map_anonymous(uint64_t size, uint64_t align)
{
	int flags = MAP_PRIVATE | MAP_NORESERVE | MAP_ANONYMOUS;
	if (!align)
		return mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (size > SIZE_MAX - align)
		return MAP_FAILED;
	uint8_t *r = mmap(NULL, (size_t)(size + align), PROT_READ | PROT_WRITE, flags, -1, 0);
	if (r == MAP_FAILED)
		return MAP_FAILED;
	uint8_t *a = (uint8_t *)(((uintptr_t)r + align - 1) & ~(uintptr_t)(align - 1));
	if (a > r)
		munmap(r, (size_t)(a - r));
	if (a + size < r + size + align)
		munmap(a + size, (size_t)(r + size + align - (a + size)));
	return a;
}

static int init(struct guest_mem *gm, uint64_t size, uint64_t gap_start, uint64_t gap_end, int fd, uint64_t align);

int guest_mem_init(struct guest_mem *gm, uint64_t size, uint64_t gap_start, uint64_t gap_end)
{
	return init(gm, size, gap_start, gap_end, -1, 0);
}

int guest_mem_init_aligned(struct guest_mem *gm, uint64_t size, uint64_t gap_start, uint64_t gap_end, uint64_t align)
{
	return init(gm, size, gap_start, gap_end, -1, align);
}

int guest_mem_init_file(struct guest_mem *gm, uint64_t size, uint64_t gap_start, uint64_t gap_end, int fd)
{
	return init(gm, size, gap_start, gap_end, fd, 0);
}

static int init(struct guest_mem *gm, uint64_t size, uint64_t gap_start, uint64_t gap_end, int fd, uint64_t align)
{
	memset(gm, 0, sizeof(*gm));
	long page = sysconf(_SC_PAGESIZE);
	if (size == 0 || size % (uint64_t)page != 0 || gap_start > gap_end || (align & (align - 1))) {
		vmm_err("guest memory: invalid size %llu", (unsigned long long)size);
		return -1;
	}
	if (size > SIZE_MAX) {
		vmm_err("guest memory: %llu bytes do not fit the host address space",
			(unsigned long long)size);
		return -1;
	}
	/* NORESERVE: the guest only costs the pages it touches. PRIVATE on a
	 * file: pages come from the page cache, shared by every VM restored
	 * from it, and the guest's writes land in copies, never in the file. */
	void *p = fd < 0 ? map_anonymous(size, align)
			 : mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
	if (p == MAP_FAILED) {
		vmm_perr("guest memory: mmap of %llu MiB", (unsigned long long)(size >> 20));
		return -1;
	}
	if (fd >= 0 && map_holes_anonymous(p, size, fd) < 0) {
		munmap(p, (size_t)size);
		return -1;
	}
	/* Guest secrets have no business in a vmm core dump. */
	madvise(p, (size_t)size, MADV_DONTDUMP);
	gm->base = p;
	gm->size = size;

	/* A gap from address 0 (aarch64's devices below RAM) leaves no RAM
	 * below it, and KVM refuses an empty memory slot. */
	uint64_t low = size < gap_start ? size : gap_start;
	if (low)
		gm->regions[gm->nregions++] = (struct guest_region){ .gpa = 0, .size = low, .hva = gm->base };
	if (size > low)
		gm->regions[gm->nregions++] = (struct guest_region){
			.gpa = gap_end, .size = size - low, .hva = gm->base + low };
	return 0;
}

void guest_mem_release(struct guest_mem *gm)
{
	if (gm->base)
		munmap(gm->base, (size_t)gm->size);
	memset(gm, 0, sizeof(*gm));
}

void *guest_mem_ptr(const struct guest_mem *gm, uint64_t gpa, uint64_t len)
{
	if (len == 0)
		return NULL;
	for (unsigned i = 0; i < gm->nregions; i++) {
		const struct guest_region *r = &gm->regions[i];
		/* Written as subtractions so that no sum can wrap. */
		if (gpa < r->gpa)
			continue;
		uint64_t off = gpa - r->gpa;
		if (off >= r->size || len > r->size - off)
			continue;
		return r->hva + off;
	}
	return NULL;
}

int guest_mem_revert(struct guest_mem *gm, uint64_t gpa, uint64_t len)
{
	uint8_t *p = guest_mem_ptr(gm, gpa, len);
	long page = sysconf(_SC_PAGESIZE);
	if (!p || (uintptr_t)p % (uintptr_t)page || len % (uint64_t)page)
		return -1;
	return madvise(p, (size_t)len, MADV_DONTNEED);
}

uint64_t guest_mem_low_end(const struct guest_mem *gm)
{
	return gm->nregions && gm->regions[0].gpa == 0 ? gm->regions[0].size : 0;
}

int64_t guest_mem_resident(const struct guest_mem *gm)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t pages = (size_t)(gm->size / (uint64_t)page);
	unsigned char *vec = malloc(pages ? pages : 1);
	if (!vec)
		return -1;
	int64_t resident = -1;
	if (mincore(gm->base, (size_t)gm->size, vec) == 0) {
		resident = 0;
		for (size_t i = 0; i < pages; i++)
			resident += (vec[i] & 1) ? page : 0;
	}
	free(vec);
	return resident;
}
