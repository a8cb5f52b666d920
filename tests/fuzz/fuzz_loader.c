/* libFuzzer harness for the kernel image loaders (ELF vmlinux and bzImage).
 *
 * Every input is handed to kernel_load_x86_64 on one small guest. Beyond the
 * sanitizers, the harness checks the loader's promises:
 *   - nothing below 1 MiB is ever touched: that part of guest RAM is mapped
 *     PROT_NONE, so any read or write there faults;
 *   - nothing past the end of guest RAM is touched: a PROT_NONE guard page
 *     sits right after the mapping;
 *   - a refused image leaves *out zeroed; an accepted one is described
 *     consistently (entry inside what was loaded, all of it inside RAM).
 *
 * Build and run: make fuzz-smoke (short) or make fuzz (FUZZ_TIME seconds). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guest_mem.h"
#include "layout_x86_64.h"
#include "loader_x86_64.h"

#define FUZZ_GUEST_SIZE (32ULL << 20)

static struct guest_mem gm;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* vmm_err writes one line per refused image through the stdio stream
	 * stderr. Point that stream at /dev/null; fd 2 stays open, so
	 * libFuzzer's own output (it keeps its own FILE on fd 2) and sanitizer
	 * reports (written to fd 2 directly) are still seen. A freopen of
	 * stderr would silence those too. glibc lets stderr be assigned. */
	FILE *null = fopen("/dev/null", "w");
	if (null)
		stderr = null;

	if (guest_mem_init(&gm, FUZZ_GUEST_SIZE, MMIO_GAP_START, MMIO_GAP_END) != 0)
		abort();
	if (mprotect(gm.base, HIGH_MEM_START, PROT_NONE) != 0)
		abort();
	/* Guard page after guest RAM, if that address is free (it usually is;
	 * without it the check is merely weaker). */
	long page = sysconf(_SC_PAGESIZE);
	void *guard = mmap(gm.base + gm.size, (size_t)page, PROT_NONE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	(void)guard;
	return 0;
}

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stdout, "fuzz_loader: invariant violated: %s\n", what);
		fflush(stdout);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kernel_image k;
	memset(&k, 0x5a, sizeof(k));
	int rc = kernel_load_x86_64(&gm, data, size, &k);
	if (rc != 0) {
		static const struct kernel_image zero;
		check(rc == -1, "return value is 0 or -1");
		check(memcmp(&k, &zero, sizeof(k)) == 0, "a refused image leaves *out zeroed");
		return 0;
	}
	check(k.load_start >= HIGH_MEM_START, "nothing loaded below 1 MiB");
	check(k.load_start < k.load_end, "something was loaded");
	check(k.load_end <= gm.size, "everything loaded lies in guest RAM");
	check(k.cmdline_max >= 1 && k.cmdline_max <= COMMAND_LINE_MAX,
	      "command line limit within 1..COMMAND_LINE_MAX");
	if (k.is_bzimage) {
		check(k.entry == HIGH_MEM_START + 0x200, "bzImage entered at startup_64");
		check(k.load_start == HIGH_MEM_START, "bzImage loaded at 1 MiB");
		check(k.load_end - k.load_start < size, "bzImage part loaded is smaller than the file");
		check(k.hdr.init_size != 0, "bzImage init_size is set");
		check(k.hdr.pref_address >= HIGH_MEM_START &&
		      k.hdr.pref_address + k.hdr.init_size <= gm.size,
		      "bzImage decompression area lies in guest RAM above 1 MiB");
	} else {
		check(k.entry >= k.load_start && k.entry < k.load_end, "ELF entry inside loaded range");
		check(k.cmdline_max == COMMAND_LINE_MAX, "ELF command line limit");
	}
	return 0;
}
