#include "vm_pause.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "vmm_build_id.h"

#define PAGE SNAP_PAGE_SIZE
/* Residency is asked for this many pages at a time: a small vector
 * whatever the guest's size. */
#define MINCORE_PAGES 16384u
/* The most one read or write moves: progress on a huge run stays visible
 * to the retry loop. */
#define IO_CHUNK (64u << 20)
/* Runs of pages mapped from the pages file at most: each is a mapping of
 * vmm's, far below the kernel's 65530 with guest memory's own. */
#define MAX_PAGE_MAPS 8192u

_Static_assert(PAGE % 8 == 0, "pages keep the checksum's words aligned");

/* ---- pausing ----------------------------------------------------------------- */

int vm_pause_prepare(struct vm *vm, const struct vmm_config *cfg, const struct snapshot_in *base,
		     struct pause_out *out)
{
	out->state_fd = out->pages_fd = -1;
	out->base_mem_fd = base->mem_fd;
	out->meta = base->meta;
	out->meta.ready_peer = 0;   /* nothing pending: the agent's connection is reset on resume */
	out->base_checksum = base->view.hdr.checksum;
	if (sysconf(_SC_PAGESIZE) != PAGE) {
		vmm_err("--pause-out: host pages of %ld bytes, the pages file has %u", sysconf(_SC_PAGESIZE), PAGE);
		return -1;
	}
	if ((out->state_fd = vm_snapshot_open_out("--pause-out", cfg->pause_out, SNAP_STATE_FILE SNAP_NEW_SUFFIX)) < 0 ||
	    (out->pages_fd = vm_snapshot_open_out("--pause-out", cfg->pause_out, SNAP_PAGES_FILE SNAP_NEW_SUFFIX)) < 0)
		return -1;
	vm->snapshotting = true;
	vm->pausable = true;
	return 0;
}

/* Whether offset off of the snapshot's memory file lies in a hole, with
 * *hole_end the first offset past it that may not; *data_end likewise for
 * data. Asked at most once per extent: lseek(SEEK_DATA/SEEK_HOLE). A hole
 * reads as zeros, compared as such: mapped, it would be faulted in, and on
 * a tmpfs each page of it allocated and charged to this vmm. */
static bool base_hole(int fd, uint64_t off, uint64_t size, uint64_t *hole_end, uint64_t *data_end)
{
	if (off < *hole_end)
		return true;
	if (off < *data_end)
		return false;
	off_t d = lseek(fd, (off_t)off, SEEK_DATA);
	if (d < 0 || (uint64_t)d > off) {   /* ENXIO: a hole to the end; or one before data */
		*hole_end = d < 0 ? size : (uint64_t)d;
		return true;
	}
	off_t h = lseek(fd, (off_t)off, SEEK_HOLE);
	*data_end = h < 0 ? size : (uint64_t)h;
	return false;
}

/* The offsets of the guest pages that differ from the snapshot's memory
 * (base, mapped; base_fd its file), into a new array. A page that is not
 * resident in the guest's mapping was never touched since the restore, so
 * it is the snapshot's. Returns the count, or -1 (out of memory). */
static int64_t changed_pages(const struct guest_mem *gm, const uint8_t *base, int base_fd, uint64_t **out)
{
	uint64_t hole_end = 0, data_end = 0;
	uint64_t npages = gm->size / PAGE, n = 0;
	uint64_t *idx = malloc((npages ? npages : 1) * sizeof(*idx));
	unsigned char *vec = malloc(MINCORE_PAGES);
	if (!idx || !vec) {
		free(idx);
		free(vec);
		return -1;
	}
	for (uint64_t first = 0; first < npages; first += MINCORE_PAGES) {
		uint64_t k = npages - first < MINCORE_PAGES ? npages - first : MINCORE_PAGES;
		bool known = mincore(gm->base + first * PAGE, (size_t)(k * PAGE), vec) == 0;
		for (uint64_t i = 0; i < k; i++) {
			uint64_t off = (first + i) * PAGE;
			if (known && !(vec[i] & 1))
				continue;
			bool differs = base_hole(base_fd, off, gm->size, &hole_end, &data_end) ? !snap_page_zero(gm->base + off)
												: memcmp(gm->base + off, base + off, PAGE) != 0;
			if (differs)
				idx[n++] = off;
		}
	}
	free(vec);
	*out = idx;
	return (int64_t)n;
}

/* Write the pages file: the index, then each run of consecutive pages in
 * one write, summed in file order; the header last. */
static int write_pages(const struct guest_mem *gm, int fd, const uint64_t *idx, uint64_t n, uint64_t *checksum)
{
	struct snap_sum sum;
	snap_sum_init(&sum);
	off_t at = sizeof(struct snap_pages_header);
	size_t ilen = (size_t)(n * sizeof(*idx));
	if (n && vm_snapshot_write_all(fd, (const uint8_t *)idx, ilen, at))
		return -1;
	snap_sum_add(&sum, (const uint8_t *)idx, ilen);
	at = (off_t)snap_pages_data(n);
	for (uint64_t i = 0; i < n;) {
		uint64_t j = i + 1;
		while (j < n && idx[j] == idx[j - 1] + PAGE && (j - i) * PAGE < IO_CHUNK)
			j++;
		size_t len = (size_t)((j - i) * PAGE);
		if (vm_snapshot_write_all(fd, gm->base + idx[i], len, at))
			return -1;
		snap_sum_add(&sum, gm->base + idx[i], len);
		at += (off_t)len;
		i = j;
	}
	struct snap_pages_header h = { .version = SNAP_PAGES_VERSION, .page_size = PAGE, .count = n,
				       .memory_bytes = gm->size, .checksum = snap_sum_final(&sum) };
	memcpy(h.magic, SNAP_PAGES_MAGIC, sizeof(h.magic));
	*checksum = h.checksum;
	return vm_snapshot_write_all(fd, (const uint8_t *)&h, sizeof(h), 0);
}

int vm_pause_write(struct vm *vm, struct pause_out *out)
{
	int rc = -1;
	uint64_t *idx = NULL;
	struct snap_writer w = { 0 };
	uint8_t *base = mmap(NULL, (size_t)vm->mem.size, PROT_READ, MAP_PRIVATE, out->base_mem_fd, 0);
	if (base == MAP_FAILED) {
		vmm_perr("pause: mapping the snapshot's memory");
		return -1;
	}
	int64_t n = changed_pages(&vm->mem, base, out->base_mem_fd, &idx);
	if (n < 0) {
		vmm_err("pause: out of memory for the page index");
		goto out;
	}
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	struct snap_pause p = { .base_checksum = out->base_checksum, .pages = (uint64_t)n,
				.paused_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec };
	if (write_pages(&vm->mem, out->pages_fd, idx, (uint64_t)n, &p.pages_checksum) || fsync(out->pages_fd) < 0) {
		vmm_perr("pause: writing the pages file");
		goto out;
	}
	if (vm_snapshot_state(vm, &out->meta, &p, &w))
		goto out;
	if (vm_snapshot_write_all(out->state_fd, w.buf, w.len, 0) || fsync(out->state_fd) < 0) {
		vmm_perr("pause: writing the state file");
		goto out;
	}
	rc = 0;
out:
	snap_writer_release(&w);
	free(idx);
	munmap(base, (size_t)vm->mem.size);
	return rc;
}

void vm_pause_out_release(struct pause_out *out)
{
	if (out->state_fd >= 0)
		close(out->state_fd);
	if (out->pages_fd >= 0)
		close(out->pages_fd);
	out->state_fd = out->pages_fd = -1;
}

/* ---- resuming ---------------------------------------------------------------- */

static int bad(const char *dir, const char *what)
{
	vmm_err("paused state %s: %s", dir, what);
	return -1;
}

/* DIR2/state: a state file of this build whose meta is the snapshot's and
 * whose pause record names the snapshot's state. */
static int load_state(const char *dir, const struct snapshot_in *base, struct resume_in *r)
{
	char err[256];
	if (vm_snapshot_read_state(dir, &r->state))
		return -1;
	if (snap_parse(r->state.buf, r->state.len, VMM_BUILD_ID, snap_arch, &r->state.view, err, sizeof(err)))
		return bad(dir, err);
	if (snap_get(&r->state.view, SNAP_TAG_META, 0, &r->state.meta, sizeof(r->state.meta)) ||
	    snap_get(&r->state.view, SNAP_TAG_PAUSE, 0, &r->pause, sizeof(r->pause)))
		return bad(dir, "not a paused VM's state (no pause record)");
	if (r->pause.base_checksum != base->view.hdr.checksum)
		return bad(dir, "paused from another snapshot than the one given to --restore");
	struct snap_meta want = base->meta;
	want.ready_peer = 0;
	if (memcmp(&want, &r->state.meta, sizeof(want)))
		return bad(dir, "its VM is not the snapshot's (memory, vCPUs, kernel or disks differ)");
	return 0;
}

static int load_pages(const char *dir, struct resume_in *r)
{
	char path[4096], err[256];
	snprintf(path, sizeof(path), "%s/%s", dir, SNAP_PAGES_FILE);
	r->pages_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (r->pages_fd < 0 || fstat(r->pages_fd, &st) < 0) {
		vmm_perr("paused state %s: %s", dir, SNAP_PAGES_FILE);
		return -1;
	}
	if (!S_ISREG(st.st_mode))
		return bad(dir, "pages is not a regular file");
	if ((uint64_t)st.st_size < sizeof(r->hdr) || vm_snapshot_read_all(r->pages_fd, (uint8_t *)&r->hdr, sizeof(r->hdr), 0))
		return bad(dir, "pages file truncated: shorter than its header");
	if (snap_pages_check_header(&r->hdr, (uint64_t)st.st_size, r->state.meta.memory_bytes, err, sizeof(err)))
		return bad(dir, err);
	if (r->hdr.count != r->pause.pages || r->hdr.checksum != r->pause.pages_checksum)
		return bad(dir, "pages file is not the one its state was saved with");
	r->index = malloc(r->hdr.count ? r->hdr.count * sizeof(*r->index) : 1);
	if (!r->index)
		return bad(dir, "out of memory for the page index");
	if (r->hdr.count &&
	    vm_snapshot_read_all(r->pages_fd, (uint8_t *)r->index, (size_t)(r->hdr.count * sizeof(*r->index)), sizeof(r->hdr)))
		return bad(dir, "pages file: short read of its index");
	if (snap_pages_check_index(r->index, r->hdr.count, r->state.meta.memory_bytes, err, sizeof(err)))
		return bad(dir, err);
	return 0;
}

int vm_resume_load(const struct vmm_config *cfg, const struct snapshot_in *base, struct resume_in *r)
{
	return load_state(cfg->resume, base, r) || load_pages(cfg->resume, r) ? -1 : 0;
}

/* Lay len bytes of the pages file at at over guest memory at dst: mapped
 * copy-on-write, so that VMs resumed from one file (a checkpoint's forks)
 * share its page cache until they write; read (a copy) once maps would
 * be too many. Returns 0, or -1 with errno. */
static int lay_pages(int fd, uint8_t *dst, size_t len, off_t at, unsigned *maps)
{
	if (*maps < MAX_PAGE_MAPS) {
		void *m = mmap(dst, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, fd, at);
		if (m != MAP_FAILED) {
			(*maps)++;
			return 0;
		}
	}
	return vm_snapshot_read_all(fd, dst, len, at);
}

int vm_resume_pages(const struct vmm_config *cfg, struct guest_mem *gm, struct resume_in *r)
{
	struct snap_sum sum;
	snap_sum_init(&sum);
	uint64_t n = r->hdr.count;
	unsigned maps = 0;
	snap_sum_add(&sum, (const uint8_t *)r->index, (size_t)(n * sizeof(*r->index)));
	off_t at = (off_t)snap_pages_data(n);
	for (uint64_t i = 0; i < n;) {
		uint64_t j = i + 1;
		while (j < n && r->index[j] == r->index[j - 1] + PAGE && (j - i) * PAGE < IO_CHUNK)
			j++;
		size_t len = (size_t)((j - i) * PAGE);
		if (r->index[i] + len > gm->size)
			return bad(cfg->resume, "pages file: a page outside guest memory");
		if (lay_pages(r->pages_fd, gm->base + r->index[i], len, at, &maps)) {
			vmm_perr("paused state %s: reading its pages", cfg->resume);
			return -1;
		}
		snap_sum_add(&sum, gm->base + r->index[i], len);
		at += (off_t)len;
		i = j;
	}
	if (snap_sum_final(&sum) != r->hdr.checksum)
		return bad(cfg->resume, "pages file corrupt: checksum mismatch");
	return 0;
}

void vm_resume_release(struct resume_in *r)
{
	vm_restore_release(&r->state);
	free(r->index);
	r->index = NULL;
	if (r->pages_fd >= 0)
		close(r->pages_fd);
	r->pages_fd = -1;
}
