/* libFuzzer harness for the split-ring walker (vmm/virtqueue.c).
 *
 * Each input is the guest's side of one queue: its size and ring placement,
 * the available ring and index, and the descriptor table, copied into a
 * small guest (two RAM regions around a gap, a PROT_NONE guard page right
 * after the mapping). The harness activates the queue and calls vq_pop until
 * it says VQ_EMPTY or VQ_BROKEN (at most 2 * size + 2 times), touching every
 * byte of every chain (reading out[], writing in[], which may land on the
 * rings themselves, as a hostile guest may arrange) and vq_push-ing it.
 *
 * Promises checked (abort() on violation), besides the sanitizers:
 *   - vq_activate accepts exactly: size a power of two, 1..max_size; rings
 *     aligned (16/2/4) and each wholly inside one RAM region;
 *   - every VQ_CHAIN: head < size; nout + nin <= size; out_len and in_len are
 *     the sums of the iovec lengths; no zero-length iovec; every iovec lies
 *     inside one RAM region of the mapping (so never across the gap, never
 *     past the end);
 *   - vq_pop agrees exactly with an independent model of virtio 1.2, 2.7 as
 *     virtqueue.h states it (run on a snapshot of guest RAM taken before
 *     each call): same result, same chain, same number of bad chains, and
 *     guest RAM afterwards identical to the model's (a bad chain is returned
 *     as a used element {head, 0}; nothing else is written);
 *   - a broken queue stays broken; VQ_EMPTY means the available index was
 *     caught up with; vq_has_avail agrees;
 *   - vq_unpop then vq_pop returns the same chain again;
 *   - iov_slice / iov_read / iov_write cover exactly min(len, total -
 *     offset) bytes and slices lie inside the iovecs they were cut from.
 *
 * Input: byte 0 options, bytes 1-2 available index, 3-4 starting ring
 * index, [placement], then the available ring (2 * size bytes) and the
 * descriptor table (16 * size bytes); missing bytes are zero. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guest_mem.h"
#include "virtqueue.h"

#define LOW_SIZE  0x8000ull                 /* RAM below the gap */
#define HIGH_GPA  0x100000ull               /* where the rest is placed */
#define HIGH_SIZE 0x8000ull
#define RAM_SIZE  (LOW_SIZE + HIGH_SIZE)

/* Past this many bytes touched in one input, only one byte per page (and
 * the last) is touched: enough to fault on anything unmapped, and it keeps
 * chains of 256 x 32 KiB descriptors from timing out. */
#define TOUCH_BUDGET (8u << 20)

static struct guest_mem gm;
static uint8_t shadow[RAM_SIZE];            /* the model's copy of guest RAM */
static uint8_t scratch[HIGH_SIZE];
static struct vq_chain chain, again, model;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* Silence vmm_err without closing fd 2 (see fuzz_loader.c). */
	FILE *null = fopen("/dev/null", "w");
	if (null)
		stderr = null;
	if (guest_mem_init(&gm, RAM_SIZE, LOW_SIZE, HIGH_GPA) != 0 || gm.nregions != 2)
		abort();
	long page = sysconf(_SC_PAGESIZE);
	void *guard = mmap(gm.base + gm.size, (size_t)page, PROT_NONE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	(void)guard;
	return 0;
}

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stdout, "fuzz_virtqueue: invariant violated: %s\n", what);
		fflush(stdout);
		abort();
	}
}

/* ---- input reader: zeros once the input runs out ------------------------- */

struct rd {
	const uint8_t *p;
	size_t n;
};

static uint8_t rd8(struct rd *r)
{
	if (!r->n)
		return 0;
	r->n--;
	return *r->p++;
}

static uint16_t rd16(struct rd *r)
{
	uint16_t v = rd8(r);
	return (uint16_t)(v | rd8(r) << 8);
}

static uint32_t rd32(struct rd *r)
{
	uint32_t v = rd16(r);
	return v | (uint32_t)rd16(r) << 16;
}

/* ---- the model -------------------------------------------------------------
 * Written from virtqueue.h's rules, not from virtqueue.c. */

/* Offset into the mapping of [gpa, gpa + len), or -1 unless it lies inside
 * one region. */
static int64_t model_xlate(uint64_t gpa, uint64_t len)
{
	if (len == 0)
		return -1;
	if (gpa < LOW_SIZE && len <= LOW_SIZE - gpa)
		return (int64_t)gpa;
	if (gpa >= HIGH_GPA && gpa - HIGH_GPA < HIGH_SIZE && len <= HIGH_SIZE - (gpa - HIGH_GPA))
		return (int64_t)(LOW_SIZE + gpa - HIGH_GPA);
	return -1;
}

static uint16_t sh16(uint64_t off)
{
	uint16_t v;
	memcpy(&v, shadow + off, 2);
	return v;
}

struct model_q {
	uint16_t size;
	int64_t desc, avail, used;   /* offsets in the mapping */
	uint16_t last_avail, used_idx;
	int broken;
	uint64_t bad;
};

static void model_push(struct model_q *m, uint16_t head, uint32_t len)
{
	uint64_t e = (uint64_t)m->used + 4 + 8ull * (m->used_idx & (m->size - 1));
	uint32_t h32 = head;
	memcpy(shadow + e, &h32, 4);
	memcpy(shadow + e + 4, &len, 4);
	m->used_idx++;
	memcpy(shadow + m->used + 2, &m->used_idx, 2);
}

static int model_walk(const struct model_q *m, uint16_t head, struct vq_chain *c)
{
	c->head = head;
	c->nout = c->nin = 0;
	c->out_len = c->in_len = 0;
	uint16_t i = head;
	for (unsigned count = 0; count < m->size; count++) {
		if (i >= m->size)
			return -1;
		uint64_t d = (uint64_t)m->desc + 16ull * i;
		uint64_t addr;
		uint32_t len;
		uint16_t flags, next;
		memcpy(&addr, shadow + d, 8);
		memcpy(&len, shadow + d + 8, 4);
		memcpy(&flags, shadow + d + 12, 2);
		memcpy(&next, shadow + d + 14, 2);
		if (flags & 4)                      /* INDIRECT: never offered */
			return -1;
		int w = flags & 2;
		if (!w && c->nin)                   /* readable after writable */
			return -1;
		if (len) {
			int64_t off = model_xlate(addr, len);
			if (off < 0)
				return -1;
			struct iovec v = { gm.base + off, len };
			if (w) {
				c->in[c->nin++] = v;
				c->in_len += len;
			} else {
				c->out[c->nout++] = v;
				c->out_len += len;
			}
		}
		if (!(flags & 1))
			return 0;
		i = next;
	}
	return -1;                                  /* longer than the table: a loop */
}

static enum vq_pop_result model_pop(struct model_q *m, struct vq_chain *c)
{
	if (m->broken)
		return VQ_BROKEN;
	for (;;) {
		uint16_t idx = sh16((uint64_t)m->avail + 2);
		uint16_t pending = (uint16_t)(idx - m->last_avail);
		if (pending == 0)
			return VQ_EMPTY;
		if (pending > m->size) {
			m->broken = 1;
			return VQ_BROKEN;
		}
		uint16_t head = sh16((uint64_t)m->avail + 4 + 2ull * (m->last_avail & (m->size - 1)));
		if (head >= m->size) {
			m->broken = 1;
			return VQ_BROKEN;
		}
		m->last_avail++;
		if (model_walk(m, head, c) == 0)
			return VQ_CHAIN;
		m->bad++;
		model_push(m, head, 0);
	}
}

/* ---- checks on one chain ------------------------------------------------- */

static int in_one_region(const struct iovec *v)
{
	uintptr_t b = (uintptr_t)v->iov_base;
	for (unsigned i = 0; i < gm.nregions; i++) {
		uintptr_t s = (uintptr_t)gm.regions[i].hva;
		if (b >= s && v->iov_len <= gm.regions[i].size && b - s <= gm.regions[i].size - v->iov_len)
			return 1;
	}
	return 0;
}

static void check_chain_promises(const struct vq_chain *c, uint16_t size)
{
	check(c->head < size, "head < size");
	check(c->nout + c->nin <= size, "nout + nin <= size");
	uint64_t o = 0, n = 0;
	for (unsigned i = 0; i < c->nout; i++) {
		check(c->out[i].iov_len > 0, "no zero-length out iovec");
		check(in_one_region(&c->out[i]), "out iovec inside one RAM region");
		o += c->out[i].iov_len;
	}
	for (unsigned i = 0; i < c->nin; i++) {
		check(c->in[i].iov_len > 0, "no zero-length in iovec");
		check(in_one_region(&c->in[i]), "in iovec inside one RAM region");
		n += c->in[i].iov_len;
	}
	check(o == c->out_len, "out_len is the sum of the out iovecs");
	check(n == c->in_len, "in_len is the sum of the in iovecs");
}

static int same_chain(const struct vq_chain *a, const struct vq_chain *b)
{
	if (a->head != b->head || a->nout != b->nout || a->nin != b->nin || a->out_len != b->out_len ||
	    a->in_len != b->in_len)
		return 0;
	for (unsigned i = 0; i < a->nout; i++)
		if (a->out[i].iov_base != b->out[i].iov_base || a->out[i].iov_len != b->out[i].iov_len)
			return 0;
	for (unsigned i = 0; i < a->nin; i++)
		if (a->in[i].iov_base != b->in[i].iov_base || a->in[i].iov_len != b->in[i].iov_len)
			return 0;
	return 1;
}

/* iov_slice and iov_read over c's readable part, iov_write over its
 * writable part, at offsets and lengths derived from the chain. */
static void check_iov_helpers(const struct vq_chain *c, uint32_t salt)
{
	if (c->in_len && c->in_len <= sizeof(scratch)) {
		size_t total = (size_t)c->in_len;
		size_t off = (salt >> 4) % (total + 1);
		size_t len = (salt >> 12) % (total + 2);
		size_t want = len < total - off ? len : total - off;
		check(iov_write(c->in, c->nin, off, scratch, len) == want, "iov_write copies min(len, total - offset)");
	}
	if (c->out_len == 0 || c->out_len > sizeof(scratch))
		return;
	size_t total = (size_t)c->out_len;
	size_t off = salt % (total + 1);
	size_t len = (salt >> 8) % (total + 2);
	size_t want = len < total - off ? len : total - off;
	static struct iovec sl[VQ_MAX_SIZE];
	size_t got = (size_t)-1;
	unsigned n = iov_slice(c->out, c->nout, off, len, sl, VQ_MAX_SIZE, &got);
	check(got == want, "iov_slice covers min(len, total - offset)");
	size_t sum = 0;
	for (unsigned i = 0; i < n; i++) {
		sum += sl[i].iov_len;
		int inside = 0;
		for (unsigned j = 0; j < c->nout && !inside; j++) {
			uintptr_t b = (uintptr_t)c->out[j].iov_base, s = (uintptr_t)sl[i].iov_base;
			inside = s >= b && sl[i].iov_len <= c->out[j].iov_len &&
				 s - b <= c->out[j].iov_len - sl[i].iov_len;
		}
		check(inside, "a slice lies inside one source iovec");
	}
	check(sum == got, "slice lengths add up to got");
	check(iov_read(c->out, c->nout, off, scratch, len) == want, "iov_read copies min(len, total - offset)");
}

static size_t touched;

static void touch(const struct vq_chain *c)
{
	for (unsigned i = 0; i < c->nout; i++) {
		uint8_t *p = c->out[i].iov_base;
		size_t len = c->out[i].iov_len;
		if (touched < TOUCH_BUDGET) {
			for (size_t k = 0; k < len; k += sizeof(scratch))
				memcpy(scratch, p + k, len - k < sizeof(scratch) ? len - k : sizeof(scratch));
			touched += len;
		} else {
			for (size_t k = 0; k < len; k += 4096)
				(void)*(volatile uint8_t *)(p + k);
			(void)*(volatile uint8_t *)(p + len - 1);
		}
	}
	for (unsigned i = 0; i < c->nin; i++) {
		uint8_t *p = c->in[i].iov_base;
		size_t len = c->in[i].iov_len;
		if (touched < TOUCH_BUDGET) {
			memset(p, 0xa5, len);
			touched += len;
		} else {
			for (size_t k = 0; k < len; k += 4096)
				*(volatile uint8_t *)(p + k) = 0xa5;
			*(volatile uint8_t *)(p + len - 1) = 0xa5;
		}
	}
}

/* ---- one input ----------------------------------------------------------- */

static int aligned_inside(uint64_t gpa, uint64_t len, uint64_t align, int64_t *off)
{
	*off = model_xlate(gpa, len);
	return !(gpa & (align - 1)) && *off >= 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r = { data, size };
	uint8_t opt = rd8(&r);
	uint16_t avail_idx = rd16(&r);
	uint16_t start = rd16(&r);

	/* Queue size: mostly a power of two (1..256), sometimes anything. */
	uint16_t qsize = (opt & 15) <= 8 ? (uint16_t)(1u << (opt & 15)) : rd16(&r);
	uint16_t max_size = (opt & 0x80) ? 16 : VQ_MAX_SIZE;
	uint16_t n = qsize && qsize <= VQ_MAX_SIZE ? qsize : 1;   /* bytes laid out for */

	/* Ring placement: fixed in the low region; packed against the end of
	 * RAM (the available ring's last byte is the mapping's last byte, the
	 * guard page follows); or taken from the input. */
	uint64_t desc, avail, used;
	switch ((opt >> 4) & 3) {
	case 0:
	case 1:
		desc = 0x1000;
		avail = 0x2000;
		used = 0x3000;
		break;
	case 2:
		avail = HIGH_GPA + HIGH_SIZE - (6 + 2ull * n);
		used = (avail - (6 + 8ull * n)) & ~3ull;
		desc = (used - 16ull * n) & ~15ull;
		break;
	default: {
		uint32_t a = rd32(&r), b = rd32(&r), c = rd32(&r);
		/* Offsets up to 64 KiB in either region: mostly inside, sometimes
		 * across an end, sometimes misaligned. */
		desc = (a & 0x10000 ? HIGH_GPA : 0) + (a & 0xffff);
		avail = (b & 0x10000 ? HIGH_GPA : 0) + (b & 0xffff);
		used = (c & 0x10000 ? HIGH_GPA : 0) + (c & 0xffff);
		break;
	}
	}

	memset(gm.base, 0, RAM_SIZE);
	int64_t doff = -1, aoff = -1, uoff = -1;
	int ok_desc = aligned_inside(desc, 16ull * n, 16, &doff);
	int ok_avail = aligned_inside(avail, 6 + 2ull * n, 2, &aoff);
	int ok_used = aligned_inside(used, 6 + 8ull * n, 4, &uoff);
	int valid = qsize != 0 && qsize <= max_size && !(qsize & (qsize - 1)) && ok_desc && ok_avail && ok_used;

	/* Guest state: available ring, then the descriptor table (written
	 * after, so a table overlapping the ring wins, as it would in memory). */
	if (ok_avail) {
		memcpy(gm.base + aoff + 2, &avail_idx, 2);
		for (unsigned i = 0; i < n; i++) {
			uint16_t h = rd16(&r);
			memcpy(gm.base + aoff + 4 + 2 * i, &h, 2);
		}
	}
	if (ok_desc) {
		int tame = opt & 0x40;
		for (unsigned i = 0; i < n; i++) {
			uint8_t d[16];
			for (unsigned k = 0; k < 16; k++)
				d[k] = rd8(&r);
			if (tame) {
				/* Addresses within 64 KiB of either region's start,
				 * lengths up to 8 KiB: most land in RAM. */
				uint64_t addr;
				uint32_t len;
				memcpy(&addr, d, 8);
				memcpy(&len, d + 8, 4);
				addr = (addr & 0x10000 ? HIGH_GPA : 0) + (addr & 0xffff);
				len &= 0x1fff;
				memcpy(d, &addr, 8);
				memcpy(d + 8, &len, 4);
			}
			memcpy(gm.base + doff + 16 * i, d, 16);
		}
	}
	if (ok_avail)   /* the index as the guest last wrote it */
		memcpy(gm.base + aoff + 2, &avail_idx, 2);

	struct virtq q;
	memset(&q, 0x5a, sizeof(q));
	q.max_size = max_size;
	q.bad_chains = avail_idx;
	vq_reset(&q);
	check(q.max_size == max_size && q.bad_chains == avail_idx && q.size == 0 && !q.ready && !q.desc &&
	      q.last_avail == 0 && q.used_idx == 0 && !q.broken,
	      "vq_reset keeps max_size and the bad-chain count only");
	q.bad_chains = 0;   /* the model counts from here */
	q.size = qsize;
	q.desc_gpa = desc;
	q.avail_gpa = avail;
	q.used_gpa = used;
	q.ready = true;
	int rc = vq_activate(&q, &gm);
	check(rc == 0 || rc == -1, "vq_activate returns 0 or -1");
	check((rc == 0) == valid, "vq_activate accepts exactly the valid configurations");
	if (rc != 0) {
		check(!q.desc && !q.avail && !q.used, "a refused queue maps nothing");
		struct vq_chain *c = &chain;
		check(vq_pop(&q, c) == VQ_BROKEN, "a refused queue pops nothing");
		return 0;
	}
	check(q.desc == gm.base + doff && q.avail == gm.base + aoff && q.used == gm.base + uoff,
	      "rings mapped where the driver put them");

	/* Resume from an arbitrary point of the ring's life. */
	q.last_avail = q.used_idx = start;
	struct model_q m = { .size = qsize, .desc = doff, .avail = aoff, .used = uoff,
			     .last_avail = start, .used_idx = start };

	touched = 0;
	int unpop_done = !(opt & 0x80) && (avail_idx & 1);   /* test vq_unpop on some inputs */
	unsigned limit = 2u * qsize + 2;
	for (unsigned it = 0; it < limit; it++) {
		memcpy(shadow, gm.base, RAM_SIZE);
		enum vq_pop_result want = model_pop(&m, &model);
		enum vq_pop_result got = vq_pop(&q, &chain);
		check(got == want, "vq_pop result matches the model");
		check(q.bad_chains == m.bad, "bad chain count matches the model");
		check(q.last_avail == m.last_avail && q.used_idx == m.used_idx, "ring indices match the model");
		check(memcmp(shadow, gm.base, RAM_SIZE) == 0,
		      "vq_pop writes exactly the used elements of bad chains");
		if (got == VQ_BROKEN) {
			check(q.broken, "VQ_BROKEN marks the queue broken");
			check(vq_pop(&q, &chain) == VQ_BROKEN, "a broken queue stays broken");
			check(!vq_has_avail(&q), "a broken queue has nothing available");
			break;
		}
		if (got == VQ_EMPTY) {
			uint16_t idx;
			memcpy(&idx, gm.base + aoff + 2, 2);
			check(idx == q.last_avail, "VQ_EMPTY: the available index was caught up with");
			check(!vq_has_avail(&q), "VQ_EMPTY: nothing available");
			break;
		}
		check(got == VQ_CHAIN, "vq_pop returns a known result");
		check_chain_promises(&chain, qsize);
		check(same_chain(&chain, &model), "the chain matches the model");
		if (!unpop_done) {
			unpop_done = 1;
			uint64_t bad = q.bad_chains;
			vq_unpop(&q);
			check(vq_has_avail(&q), "an unpopped chain is available again");
			check(vq_pop(&q, &again) == VQ_CHAIN && same_chain(&chain, &again) && q.bad_chains == bad,
			      "vq_unpop then vq_pop returns the same chain");
		}
		check_iov_helpers(&chain, (uint32_t)it * 2654435761u ^ avail_idx);
		touch(&chain);
		uint32_t written = chain.in_len > UINT32_MAX ? UINT32_MAX : (uint32_t)chain.in_len;
		vq_push(&q, chain.head, written);
		m.used_idx++;
		uint16_t uidx;
		memcpy(&uidx, gm.base + uoff + 2, 2);
		check(uidx == q.used_idx, "vq_push publishes the used index");
		(void)vq_should_interrupt(&q);
	}
	return 0;
}
