/* The snapshot state file's parser (vmm/snapshot.c) on arbitrary bytes:
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
	return 0;
}
