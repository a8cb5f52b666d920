/* The snapshot file format: one state file of typed records behind a
 * versioned, checksummed header (guest memory is a second, raw file).
 *
 * The snapshot directory belongs to the host, but the state file is parsed
 * as if it did not: the header's magic, format version, architecture and
 * build are checked, the length and checksum cover every byte after it,
 * every record's tag must be known, its index in range, its length the
 * one its tag allows, and no record may appear twice. Only then does
 * anything read a record's payload (as a copy: payloads are not aligned).
 *
 * Layout (host byte order; the file never leaves the host that made it):
 *   header  struct snap_header
 *   record  struct snap_record, then len payload bytes, padded to 8
 *   ...     until header.length bytes after the header */
#ifndef VMM_SNAPSHOT_H
#define VMM_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SNAP_MAGIC        "VMRUNSNP"
#define SNAP_VERSION      1u
#define SNAP_BUILD_LEN    32u
#define SNAP_STATE_FILE   "state"
#define SNAP_MEMORY_FILE  "memory"
#define SNAP_PAGES_FILE   "pages"
/* A pause's files are written under these names and renamed into place
 * by the host once vmm exited 0: a pause that failed half-way leaves the
 * state it would have replaced intact. */
#define SNAP_NEW_SUFFIX   ".new"
#define SNAP_MAX_STATE    (16u << 20)   /* a state file is ~10 KiB per vCPU: far below */
#define SNAP_MAX_INDEX    32u           /* vCPUs, virtio slots, irqchips: below this */

enum snap_arch {
	SNAP_ARCH_X86_64 = 1,
	SNAP_ARCH_AARCH64 = 2,
};

struct snap_header {
	char magic[8];
	uint32_t version;
	uint32_t arch;                  /* enum snap_arch */
	char build[SNAP_BUILD_LEN];     /* the vmm build that wrote it, NUL-padded */
	uint64_t length;                /* bytes after the header */
	uint64_t checksum;              /* snap_checksum of those bytes */
};
_Static_assert(sizeof(struct snap_header) == 64, "the header has no padding");

struct snap_record {
	uint32_t tag;                   /* enum snap_tag */
	uint32_t index;                 /* which vCPU, slot or chip */
	uint64_t len;                   /* payload bytes, before padding */
};
_Static_assert(sizeof(struct snap_record) == 16, "the record header has no padding");

/* Record tags. The generic ones are below SNAP_TAG_ARCH; the architecture's
 * (vCPU and VM state) from there, described by snap_arch_tags. */
enum snap_tag {
	SNAP_TAG_META = 1,              /* struct snap_meta, index 0 */
	SNAP_TAG_SERIAL = 2,            /* struct serial_8250_state, index 0 */
	SNAP_TAG_VIRTIO = 3,            /* struct virtio_mmio_state, index = slot */
	SNAP_TAG_PAUSE = 4,             /* struct snap_pause, index 0: a paused VM's state */
	SNAP_TAG_ARCH = 16,
	SNAP_TAG_MAX = 48,
};

/* What a tag's records may be: their length is exactly size, or, when
 * max_size is not 0, a multiple of size up to max_size; index below max_index. */
struct snap_tag_desc {
	uint32_t tag;
	uint32_t max_index;
	uint64_t size, max_size;
	const char *name;
};

/* The architecture's tags, ending with a { 0 } entry (snapshot_<arch>.c). */
extern const struct snap_tag_desc snap_arch_tags[];
/* This build's architecture, as written in the header. */
extern const uint32_t snap_arch;

#define SNAP_MAX_DISKS 8u

/* What the snapshot was made from: checked against a restore's own. */
struct snap_meta {
	uint64_t memory_bytes;
	uint32_t ncpus;
	uint32_t ndisks;
	uint32_t nvirtio;
	uint32_t has_vsock;
	uint64_t host_cpu;              /* KVM's supported CPUID and TSC rate (another CPU: refused) */
	uint64_t kernel_size, kernel_ino, kernel_mtime_ns;   /* the kernel file's identity */
	struct snap_disk {
		uint32_t ro, empty;         /* empty: a "none" slot at snapshot time */
		uint64_t size, ino, mtime_ns;
	} disks[SNAP_MAX_DISKS];
	uint32_t ready_peer;            /* the agent's pending vsock port, reset on restore */
	uint32_t pad;
};

/* A paused VM (vmm --pause-out) is saved against the snapshot it was
 * restored from: its state file has every record a snapshot has, meta as
 * the snapshot's, and this record; its guest memory is the snapshot's
 * memory file with the pages file laid over it. */
struct snap_pause {
	uint64_t base_checksum;         /* the snapshot's state file header checksum */
	uint64_t pages;                 /* pages in the pages file */
	uint64_t pages_checksum;        /* the pages file's header checksum */
	uint64_t paused_ns;             /* CLOCK_REALTIME when it was paused */
};

/* The pages file: the guest pages that differ from the snapshot's memory.
 *   header  struct snap_pages_header
 *   index   count u64 guest memory offsets, page-aligned, increasing
 *   (zeros to the next page boundary: the pages can be mapped)
 *   pages   count pages, in the index's order, from snap_pages_data(count)
 * The checksum covers the index and the pages. */
#define SNAP_PAGES_MAGIC   "VMRUNPGS"
#define SNAP_PAGES_VERSION 2u
#define SNAP_PAGE_SIZE     4096u
struct snap_pages_header {
	char magic[8];
	uint32_t version;
	uint32_t page_size;
	uint64_t count;
	uint64_t memory_bytes;          /* the guest memory the offsets are in */
	uint64_t checksum;
	uint64_t reserved[3];
};
_Static_assert(sizeof(struct snap_pages_header) == 64, "the pages header has no padding");

/* Whether the SNAP_PAGE_SIZE bytes at p (8-byte aligned) are all zero:
 * a snapshot's zero pages are holes, a pause's compared against one. Pure. */
static inline bool snap_page_zero(const uint8_t *p)
{
	const uint64_t *w = (const uint64_t *)(const void *)p;
	for (unsigned i = 0; i < SNAP_PAGE_SIZE / 8; i++)
		if (w[i])
			return false;
	return true;
}

/* Where a pages file of count pages has its first page. Pure. */
static inline uint64_t snap_pages_data(uint64_t count)
{
	return (sizeof(struct snap_pages_header) + count * 8 + SNAP_PAGE_SIZE - 1) / SNAP_PAGE_SIZE * SNAP_PAGE_SIZE;
}

/* Check a pages file's header against the file's size and the guest's
 * memory: magic, version, page size, a count that fits, and a size that is
 * exactly header, index and pages. Returns 0, or -1 with a reason. Pure. */
int snap_pages_check_header(const struct snap_pages_header *h, uint64_t file_size, uint64_t memory_bytes,
			    char *err, size_t errlen);

/* Check a pages file's index (count offsets): page-aligned, strictly
 * increasing, inside memory_bytes. Returns 0, or -1 with a reason. Pure. */
int snap_pages_check_index(const uint64_t *index, uint64_t count, uint64_t memory_bytes, char *err, size_t errlen);

/* A parsed state file: where each record's payload is, or NULL. */
struct snap_view {
	struct snap_header hdr;
	struct {
		const uint8_t *p;
		uint64_t len;
	} rec[SNAP_TAG_MAX][SNAP_MAX_INDEX];
};

/* The checksum of the header: 64-bit FNV-1a over 8-byte words (a final
 * partial word zero-padded), fast enough for the state file on an
 * emulated host. Not a MAC: the directory is the host's own. */
uint64_t snap_checksum(const uint8_t *p, size_t len);

/* snap_checksum over data that comes in pieces: init, add each piece (all
 * but the last a multiple of 8 bytes long), then final. */
struct snap_sum {
	uint64_t h, len;
};
void snap_sum_init(struct snap_sum *s);
void snap_sum_add(struct snap_sum *s, const uint8_t *p, size_t len);
uint64_t snap_sum_final(const struct snap_sum *s);

/* Validate buf (len bytes) as a state file written by build for arch and
 * fill v. Returns 0, or -1 with a one-line reason in err. Pure. */
int snap_parse(const uint8_t *buf, size_t len, const char *build, uint32_t arch, struct snap_view *v, char *err,
	       size_t errlen);

/* Copy record (tag, index) of exactly len bytes into dst. Returns 0, or -1
 * when the snapshot lacks it or it has another length. */
int snap_get(const struct snap_view *v, uint32_t tag, uint32_t index, void *dst, uint64_t len);

/* A growing state file being written. */
struct snap_writer {
	uint8_t *buf;
	size_t len, cap;
	bool failed;                    /* out of memory: every later add is ignored */
};

/* Start a state file with room for its header. Returns 0 or -1. */
int snap_writer_init(struct snap_writer *w);

/* Append a record; a failure sticks in w->failed. */
void snap_add(struct snap_writer *w, uint32_t tag, uint32_t index, const void *p, uint64_t len);

/* Fill in the header for build and arch over what was added. Returns 0,
 * or -1 when an add failed. */
int snap_finish(struct snap_writer *w, const char *build, uint32_t arch);

/* Free the buffer; safe twice and on a zeroed writer. */
void snap_writer_release(struct snap_writer *w);

#endif
