/* The snapshot state file's parser (vmm/snapshot.c) on arbitrary bytes,
 * and the checks of a paused VM's pages file (header, then index): an
 * accepted header's count fits the bytes given, and an accepted index
 * names only pages inside guest memory, in order.
 *
 * The state file:
 * whatever the file holds, it is refused in one line or every record it
 * accepted lies inside the buffer with a length its tag allows. The
 * header's checksum is recomputed over the input, so the fuzzer reaches
 * the records instead of stopping at a mismatch. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot.h"

#define BUILD "fuzzbuild"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct snap_view v;
	uint8_t *buf = malloc(size + sizeof(struct snap_header));
	if (!buf)
		return 0;
	struct snap_header h = { .version = SNAP_VERSION, .arch = snap_arch, .length = size };
	memcpy(h.magic, SNAP_MAGIC, sizeof(h.magic));
	strncpy(h.build, BUILD, sizeof(h.build) - 1);
	h.checksum = snap_checksum(data, size);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), data, size);
	char err[256];
	size_t len = size + sizeof(h);
	if (snap_parse(buf, len, BUILD, snap_arch, &v, err, sizeof(err)) == 0)
		for (unsigned t = 0; t < SNAP_TAG_MAX; t++)
			for (unsigned i = 0; i < SNAP_MAX_INDEX; i++)
				if (v.rec[t][i].p && (v.rec[t][i].p < buf || v.rec[t][i].p + v.rec[t][i].len > buf + len))
					abort();
	/* The raw input too, as a whole file. */
	(void)snap_parse(data, size, BUILD, snap_arch, &v, err, sizeof(err));
	free(buf);

	/* As a pages file over 1 MiB of guest memory, and over what it claims. */
	struct snap_pages_header ph;
	if (size < sizeof(ph))
		return 0;
	memcpy(&ph, data, sizeof(ph));
	uint64_t mems[2] = { 1u << 20, ph.memory_bytes };
	for (int m = 0; m < 2; m++) {
		if (snap_pages_check_header(&ph, size, mems[m], err, sizeof(err)))
			continue;
		if (ph.count > (size - sizeof(ph)) / 8)
			abort();
		uint64_t *idx = malloc(ph.count ? ph.count * 8 : 1);
		if (!idx)
			return 0;
		memcpy(idx, data + sizeof(ph), ph.count * 8);
		if (snap_pages_check_index(idx, ph.count, mems[m], err, sizeof(err)) == 0)
			for (uint64_t i = 0; i < ph.count; i++)
				if (idx[i] % SNAP_PAGE_SIZE || idx[i] >= mems[m] || (i && idx[i] <= idx[i - 1]))
					abort();
		free(idx);
	}
	return 0;
}
