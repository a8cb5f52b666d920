/* Split virtqueues, device side: what vq_activate accepts, how vq_pop walks
 * good chains into host iovecs, how hostile chains and rings are contained,
 * and the iovec copy helpers. The rings are built by hand in fake guest RAM
 * (tests/common/fake_virtio.h) without any transport in between. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "fake_virtio.h"
#include "guest_mem.h"
#include "virtqueue.h"

#define QSIZE 8

struct fx {
	struct guest_mem gm;
	struct fv_queue fq;   /* the driver's view, for the fv_* helpers */
	struct virtq q;       /* the device's view */
	struct vq_chain c;
};

/* A queue of QSIZE entries at the fake driver's layout, activated. */
static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (fv_mem_init(&f->gm)) {
		free(f);
		return -1;
	}
	f->fq = (struct fv_queue){ .size = QSIZE, .desc = FV_RING_BASE, .avail = FV_RING_BASE + 0x1000,
				   .used = FV_RING_BASE + 0x2000 };
	f->q.max_size = QSIZE;
	f->q.size = QSIZE;
	f->q.desc_gpa = f->fq.desc;
	f->q.avail_gpa = f->fq.avail;
	f->q.used_gpa = f->fq.used;
	if (vq_activate(&f->q, &f->gm)) {
		guest_mem_release(&f->gm);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	guest_mem_release(&f->gm);
	free(f);
	return 0;
}

static void *host(struct fx *f, uint64_t gpa, uint64_t len)
{
	void *p = fv_ptr(&f->gm, gpa, len);
	assert_non_null(p);
	return p;
}

/* The used element at slot i of the used ring. */
static void used_elem(struct fx *f, uint16_t i, uint32_t *id, uint32_t *len)
{
	struct vring_used_elem e;
	memcpy(&e, host(f, f->fq.used + 4 + 8ull * (i % QSIZE), 8), 8);
	*id = e.id;
	*len = e.len;
}

/* A fresh, unactivated queue over the fixture's RAM with the given layout. */
static struct virtq raw_queue(uint16_t max, uint16_t size, uint64_t desc, uint64_t avail, uint64_t used)
{
	return (struct virtq){ .max_size = max, .size = size, .desc_gpa = desc, .avail_gpa = avail,
			       .used_gpa = used };
}

/* ---- vq_activate ----------------------------------------------------------- */

static void activate_sizes(void **state)
{
	struct fx *f = *state;
	uint64_t d = FV_RING_BASE, a = d + 0x1000, u = d + 0x2000;
	struct virtq q = raw_queue(QSIZE, 0, d, a, u);
	assert_int_equal(vq_activate(&q, &f->gm), -1);
	assert_null(q.desc);
	q = raw_queue(QSIZE, 6, d, a, u);   /* not a power of two */
	assert_int_equal(vq_activate(&q, &f->gm), -1);
	q = raw_queue(QSIZE, 3, d, a, u);
	assert_int_equal(vq_activate(&q, &f->gm), -1);
	q = raw_queue(QSIZE, 16, d, a, u);   /* above what the device offers */
	assert_int_equal(vq_activate(&q, &f->gm), -1);
	q = raw_queue(QSIZE, 0x8000, d, a, u);
	assert_int_equal(vq_activate(&q, &f->gm), -1);
	assert_null(q.desc);
	assert_null(q.avail);
	assert_null(q.used);
	/* every power of two up to the maximum is fine, 1 included */
	for (uint16_t n = 1; n <= QSIZE; n *= 2) {
		q = raw_queue(QSIZE, n, d, a, u);
		assert_int_equal(vq_activate(&q, &f->gm), 0);
		assert_ptr_equal(q.desc, host(f, d, 16));
		assert_ptr_equal(q.avail, host(f, a, 2));
		assert_ptr_equal(q.used, host(f, u, 4));
		assert_ptr_equal(q.mem, &f->gm);
	}
}

static void activate_alignment(void **state)
{
	struct fx *f = *state;
	uint64_t d = FV_RING_BASE, a = d + 0x1000, u = d + 0x2000;
	/* descriptors 16-byte aligned */
	for (uint64_t off = 1; off < 16; off++) {
		struct virtq q = raw_queue(QSIZE, QSIZE, d + off, a, u);
		assert_int_equal(vq_activate(&q, &f->gm), -1);
	}
	/* available ring 2-byte aligned */
	struct virtq q = raw_queue(QSIZE, QSIZE, d, a + 1, u);
	assert_int_equal(vq_activate(&q, &f->gm), -1);
	q = raw_queue(QSIZE, QSIZE, d, a + 2, u);
	assert_int_equal(vq_activate(&q, &f->gm), 0);
	/* used ring 4-byte aligned */
	for (uint64_t off = 1; off < 4; off++) {
		q = raw_queue(QSIZE, QSIZE, d, a, u + off);
		assert_int_equal(vq_activate(&q, &f->gm), -1);
	}
	q = raw_queue(QSIZE, QSIZE, d, a, u + 4);
	assert_int_equal(vq_activate(&q, &f->gm), 0);
	q = raw_queue(QSIZE, QSIZE, d + 16, a, u);
	assert_int_equal(vq_activate(&q, &f->gm), 0);
}

static void activate_rings_outside_ram(void **state)
{
	struct fx *f = *state;
	uint64_t d = FV_RING_BASE, a = d + 0x1000, u = d + 0x2000;
	const uint64_t end = FV_MEM_SIZE;
	/* Ring byte sizes for QSIZE entries: 16n, 6 + 2n, 6 + 8n. */
	const uint64_t db = 16 * QSIZE, ab = 6 + 2 * QSIZE;

	/* wholly past the end */
	struct virtq q = raw_queue(QSIZE, QSIZE, end, a, u);
	assert_int_equal(vq_activate(&q, &f->gm), -1);
	q = raw_queue(QSIZE, QSIZE, d, end, u);
	assert_int_equal(vq_activate(&q, &f->gm), -1);
	q = raw_queue(QSIZE, QSIZE, d, a, end);
	assert_int_equal(vq_activate(&q, &f->gm), -1);
	/* in the MMIO gap, and above 4 GiB where this guest has no RAM */
	q = raw_queue(QSIZE, QSIZE, 0xd0000000ull, a, u);
	assert_int_equal(vq_activate(&q, &f->gm), -1);
	q = raw_queue(QSIZE, QSIZE, d, a, 0x100000000ull);
	assert_int_equal(vq_activate(&q, &f->gm), -1);

	/* straddling the end by one entry, then exactly at the end */
	q = raw_queue(QSIZE, QSIZE, end - db + 16, a, u);
	assert_int_equal(vq_activate(&q, &f->gm), -1);
	q = raw_queue(QSIZE, QSIZE, end - db, a, u);
	assert_int_equal(vq_activate(&q, &f->gm), 0);
	q = raw_queue(QSIZE, QSIZE, d, end - ab + 2, u);
	assert_int_equal(vq_activate(&q, &f->gm), -1);
	q = raw_queue(QSIZE, QSIZE, d, end - ab, u);
	assert_int_equal(vq_activate(&q, &f->gm), 0);
	q = raw_queue(QSIZE, QSIZE, d, a, end - 72);   /* 70 bytes needed, 4-aligned start */
	assert_int_equal(vq_activate(&q, &f->gm), 0);
	q = raw_queue(QSIZE, QSIZE, d, a, end - 68);
	assert_int_equal(vq_activate(&q, &f->gm), -1);

	/* rings whose end would wrap past 2^64 */
	q = raw_queue(QSIZE, QSIZE, UINT64_MAX - 15, a, u);
	assert_int_equal(vq_activate(&q, &f->gm), -1);
	q = raw_queue(QSIZE, QSIZE, d, UINT64_MAX - 1, u);
	assert_int_equal(vq_activate(&q, &f->gm), -1);
	q = raw_queue(QSIZE, QSIZE, d, a, UINT64_MAX - 3);
	assert_int_equal(vq_activate(&q, &f->gm), -1);
	assert_null(q.desc);
	assert_null(q.avail);
	assert_null(q.used);
}

/* A failed activation leaves nothing a later vq_pop could use. */
static void pop_on_unactivated_queue(void **state)
{
	struct fx *f = *state;
	struct virtq q = raw_queue(QSIZE, 0, FV_RING_BASE, FV_RING_BASE + 0x1000, FV_RING_BASE + 0x2000);
	assert_int_equal(vq_activate(&q, &f->gm), -1);
	assert_int_equal(vq_pop(&q, &f->c), VQ_BROKEN);
	assert_false(vq_has_avail(&q));
	assert_false(vq_should_interrupt(&q));
}

/* ---- good chains ------------------------------------------------------------ */

static void empty_queue(void **state)
{
	struct fx *f = *state;
	assert_false(vq_has_avail(&f->q));
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_EMPTY);
	assert_int_equal(fv_used_idx(&f->gm, &f->fq), 0);
	assert_false(f->q.broken);
}

static void one_descriptor(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 3, FV_BUF_BASE + 0x100, 512, 0, 0);
	fv_avail(&f->gm, &f->fq, 3);
	assert_true(vq_has_avail(&f->q));
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
	assert_int_equal(f->c.head, 3);
	assert_int_equal(f->c.nout, 1);
	assert_int_equal(f->c.nin, 0);
	assert_int_equal(f->c.out_len, 512);
	assert_int_equal(f->c.in_len, 0);
	assert_ptr_equal(f->c.out[0].iov_base, host(f, FV_BUF_BASE + 0x100, 512));
	assert_int_equal(f->c.out[0].iov_len, 512);
	assert_false(vq_has_avail(&f->q));
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_EMPTY);
	assert_int_equal(f->q.bad_chains, 0);
	/* nothing is returned until the device pushes */
	assert_int_equal(fv_used_idx(&f->gm, &f->fq), 0);
}

static void multi_descriptor(void **state)
{
	struct fx *f = *state;
	/* 2 readable, then 3 writable, linked out of order: 5 -> 2 -> 7 -> 0 -> 4 */
	fv_desc(&f->gm, &f->fq, 5, FV_BUF_BASE, 16, VRING_DESC_F_NEXT, 2);
	fv_desc(&f->gm, &f->fq, 2, FV_BUF_BASE + 0x1000, 100, VRING_DESC_F_NEXT, 7);
	fv_desc(&f->gm, &f->fq, 7, FV_BUF_BASE + 0x2000, 1, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 0);
	fv_desc(&f->gm, &f->fq, 0, FV_BUF_BASE + 0x3000, 4096, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 4);
	/* the last descriptor's next is junk, and ignored without F_NEXT */
	fv_desc(&f->gm, &f->fq, 4, FV_BUF_BASE + 0x5000, 7, VRING_DESC_F_WRITE, 0xffff);
	fv_avail(&f->gm, &f->fq, 5);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
	assert_int_equal(f->c.head, 5);
	assert_int_equal(f->c.nout, 2);
	assert_int_equal(f->c.nin, 3);
	assert_int_equal(f->c.out_len, 116);
	assert_int_equal(f->c.in_len, 4104);
	assert_ptr_equal(f->c.out[0].iov_base, host(f, FV_BUF_BASE, 16));
	assert_int_equal(f->c.out[0].iov_len, 16);
	assert_ptr_equal(f->c.out[1].iov_base, host(f, FV_BUF_BASE + 0x1000, 100));
	assert_int_equal(f->c.out[1].iov_len, 100);
	assert_ptr_equal(f->c.in[0].iov_base, host(f, FV_BUF_BASE + 0x2000, 1));
	assert_int_equal(f->c.in[0].iov_len, 1);
	assert_ptr_equal(f->c.in[1].iov_base, host(f, FV_BUF_BASE + 0x3000, 4096));
	assert_int_equal(f->c.in[1].iov_len, 4096);
	assert_ptr_equal(f->c.in[2].iov_base, host(f, FV_BUF_BASE + 0x5000, 7));
	assert_int_equal(f->c.in[2].iov_len, 7);
	assert_int_equal(f->q.bad_chains, 0);
}

/* A chain may use every descriptor of the table once: size is the limit. */
static void chain_of_exactly_size(void **state)
{
	struct fx *f = *state;
	for (uint16_t i = 0; i < QSIZE; i++)
		fv_desc(&f->gm, &f->fq, i, FV_BUF_BASE + 0x100ull * i, 0x10,
			i + 1 < QSIZE ? VRING_DESC_F_NEXT : 0, (uint16_t)(i + 1));
	fv_avail(&f->gm, &f->fq, 0);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
	assert_int_equal(f->c.nout, QSIZE);
	assert_int_equal(f->c.out_len, 0x10 * QSIZE);
	assert_ptr_equal(f->c.out[QSIZE - 1].iov_base, host(f, FV_BUF_BASE + 0x100ull * (QSIZE - 1), 0x10));
	assert_int_equal(f->q.bad_chains, 0);
}

static void zero_length_skipped(void **state)
{
	struct fx *f = *state;
	/* Zero-length descriptors are not translated: even a wild address is
	 * fine since nothing will be read or written there. */
	fv_desc(&f->gm, &f->fq, 0, UINT64_MAX, 0, VRING_DESC_F_NEXT, 1);
	fv_desc(&f->gm, &f->fq, 1, FV_BUF_BASE, 10, VRING_DESC_F_NEXT, 2);
	fv_desc(&f->gm, &f->fq, 2, FV_BUF_BASE + 0x100, 0, VRING_DESC_F_NEXT, 3);
	fv_desc(&f->gm, &f->fq, 3, FV_BUF_BASE + 0x200, 0, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 4);
	fv_desc(&f->gm, &f->fq, 4, FV_BUF_BASE + 0x300, 20, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 5);
	fv_desc(&f->gm, &f->fq, 5, 0xdead0000000ull, 0, VRING_DESC_F_WRITE, 0);
	fv_avail(&f->gm, &f->fq, 0);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
	assert_int_equal(f->c.nout, 1);
	assert_int_equal(f->c.nin, 1);
	assert_int_equal(f->c.out_len, 10);
	assert_int_equal(f->c.in_len, 20);
	assert_ptr_equal(f->c.out[0].iov_base, host(f, FV_BUF_BASE, 10));
	assert_ptr_equal(f->c.in[0].iov_base, host(f, FV_BUF_BASE + 0x300, 20));

	/* a chain of nothing but one empty descriptor is valid and empty */
	fv_desc(&f->gm, &f->fq, 6, 0, 0, 0, 0);
	fv_avail(&f->gm, &f->fq, 6);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
	assert_int_equal(f->c.head, 6);
	assert_int_equal(f->c.nout, 0);
	assert_int_equal(f->c.nin, 0);
	assert_int_equal(f->c.out_len, 0);
	assert_int_equal(f->c.in_len, 0);
	assert_int_equal(f->q.bad_chains, 0);
}

/* ---- hostile chains ----------------------------------------------------------- */

/* Make the hostile chain at bad available, then a valid one-descriptor chain
 * at good; vq_pop must skip the first (returning it with length 0) and
 * hand out the second. */
static void expect_bad_then_good(struct fx *f, uint16_t bad, uint16_t good)
{
	fv_desc(&f->gm, &f->fq, good, FV_BUF_BASE + 0x8000, 64, VRING_DESC_F_WRITE, 0);
	fv_avail(&f->gm, &f->fq, bad);
	fv_avail(&f->gm, &f->fq, good);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
	assert_int_equal(f->c.head, good);
	assert_int_equal(f->c.nout, 0);
	assert_int_equal(f->c.nin, 1);
	assert_int_equal(f->c.in_len, 64);
	assert_ptr_equal(f->c.in[0].iov_base, host(f, FV_BUF_BASE + 0x8000, 64));
	assert_int_equal(f->q.bad_chains, 1);
	assert_false(f->q.broken);
	/* the bad chain went back unused, and only it so far */
	assert_int_equal(fv_used_idx(&f->gm, &f->fq), 1);
	uint32_t id = 0xffff, len = 0xffff;
	assert_true(fv_used(&f->gm, &f->fq, &id, &len));
	assert_int_equal(id, bad);
	assert_int_equal(len, 0);
	assert_false(fv_used(&f->gm, &f->fq, &id, &len));
	/* the good one is the device's to return */
	vq_push(&f->q, good, 5);
	assert_true(fv_used(&f->gm, &f->fq, &id, &len));
	assert_int_equal(id, good);
	assert_int_equal(len, 5);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_EMPTY);
}

static void hostile_loop(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 0, FV_BUF_BASE, 8, VRING_DESC_F_NEXT, 1);
	fv_desc(&f->gm, &f->fq, 1, FV_BUF_BASE, 8, VRING_DESC_F_NEXT, 0);
	expect_bad_then_good(f, 0, 2);
}

/* What the guest did stays counted after it resets the queue. */
static void reset_keeps_bad_chain_count(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 0, FV_BUF_BASE, 8, VRING_DESC_F_NEXT, 1);
	fv_desc(&f->gm, &f->fq, 1, FV_BUF_BASE, 8, VRING_DESC_F_NEXT, 0);
	expect_bad_then_good(f, 0, 2);
	assert_int_equal(f->q.bad_chains, 1);
	uint16_t max = f->q.max_size;
	vq_reset(&f->q);
	assert_int_equal(f->q.bad_chains, 1);
	assert_int_equal(f->q.max_size, max);
	assert_int_equal(f->q.size, 0);
	assert_false(f->q.ready);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_BROKEN);
}

static void hostile_self_loop(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 4, FV_BUF_BASE, 8, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 4);
	expect_bad_then_good(f, 4, 1);
}

static void hostile_next_out_of_range(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 0, FV_BUF_BASE, 8, VRING_DESC_F_NEXT, QSIZE);
	expect_bad_then_good(f, 0, 1);
}

static void hostile_next_far_out_of_range(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 0, FV_BUF_BASE, 8, VRING_DESC_F_NEXT, 1);
	fv_desc(&f->gm, &f->fq, 1, FV_BUF_BASE, 8, VRING_DESC_F_NEXT, 0xffff);
	expect_bad_then_good(f, 0, 2);
}

/* A chain that never ends without revisiting a descriptor: 0 -> 1 -> ...
 * -> 6 -> 2 -> 3 ... is longer than the table as soon as it passes size
 * descriptors. Descriptor 7 is left for the good chain. */
static void hostile_longer_than_size(void **state)
{
	struct fx *f = *state;
	for (uint16_t i = 0; i < QSIZE - 1; i++)
		fv_desc(&f->gm, &f->fq, i, FV_BUF_BASE + 0x100ull * i, 0x10, VRING_DESC_F_NEXT,
			i + 1 < QSIZE - 1 ? (uint16_t)(i + 1) : 2);
	expect_bad_then_good(f, 0, QSIZE - 1);
}

static void hostile_addr_outside_ram(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 0, FV_BUF_BASE, 8, VRING_DESC_F_NEXT, 1);
	fv_desc(&f->gm, &f->fq, 1, FV_MEM_SIZE, 1, VRING_DESC_F_WRITE, 0);
	expect_bad_then_good(f, 0, 2);
}

static void hostile_addr_straddles_end(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 3, FV_MEM_SIZE - 8, 9, 0, 0);
	expect_bad_then_good(f, 3, 2);
}

static void hostile_addr_in_gap(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 3, 0xd0000000ull, 4, 0, 0);
	expect_bad_then_good(f, 3, 2);
}

static void hostile_addr_wraps(void **state)
{
	struct fx *f = *state;
	/* addr + len wraps to a small address that is inside RAM */
	fv_desc(&f->gm, &f->fq, 0, UINT64_MAX - 15, 32, VRING_DESC_F_WRITE, 0);
	expect_bad_then_good(f, 0, 1);
}

static void hostile_huge_len(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 0, FV_BUF_BASE, 0xffffffffu, VRING_DESC_F_WRITE, 0);
	expect_bad_then_good(f, 0, 1);
}

static void hostile_readable_after_writable(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 0, FV_BUF_BASE, 8, VRING_DESC_F_NEXT, 1);
	fv_desc(&f->gm, &f->fq, 1, FV_BUF_BASE + 0x100, 8, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 2);
	fv_desc(&f->gm, &f->fq, 2, FV_BUF_BASE + 0x200, 8, 0, 0);
	expect_bad_then_good(f, 0, 3);
}

static void hostile_indirect(void **state)
{
	struct fx *f = *state;
	/* a well-formed indirect table is refused all the same: never offered */
	fv_desc(&f->gm, &f->fq, 0, FV_BUF_BASE + 0x4000, 16, VRING_DESC_F_INDIRECT, 0);
	struct vring_desc ind = { .addr = FV_BUF_BASE, .len = 8, .flags = 0, .next = 0 };
	memcpy(host(f, FV_BUF_BASE + 0x4000, 16), &ind, 16);
	expect_bad_then_good(f, 0, 1);
}

static void hostile_indirect_mid_chain(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 0, FV_BUF_BASE, 8, VRING_DESC_F_NEXT, 1);
	fv_desc(&f->gm, &f->fq, 1, FV_BUF_BASE + 0x4000, 16, VRING_DESC_F_INDIRECT | VRING_DESC_F_NEXT, 2);
	fv_desc(&f->gm, &f->fq, 2, FV_BUF_BASE + 0x200, 8, VRING_DESC_F_WRITE, 0);
	expect_bad_then_good(f, 0, 3);
}

/* Several bad chains in a row are all returned; a good one after them
 * still comes out. */
static void several_bad_chains(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 0, FV_BUF_BASE, 8, VRING_DESC_F_NEXT, 0);   /* self-loop */
	fv_desc(&f->gm, &f->fq, 1, FV_MEM_SIZE, 8, 0, 0);                  /* outside */
	fv_desc(&f->gm, &f->fq, 2, FV_BUF_BASE, 8, VRING_DESC_F_INDIRECT, 0);
	fv_desc(&f->gm, &f->fq, 3, FV_BUF_BASE + 0x300, 8, 0, 0);           /* good */
	for (uint16_t h = 0; h < 4; h++)
		fv_avail(&f->gm, &f->fq, h);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
	assert_int_equal(f->c.head, 3);
	assert_int_equal(f->q.bad_chains, 3);
	for (uint16_t h = 0; h < 3; h++) {
		uint32_t id, len;
		assert_true(fv_used(&f->gm, &f->fq, &id, &len));
		assert_int_equal(id, h);
		assert_int_equal(len, 0);
	}
	assert_int_equal(fv_used_idx(&f->gm, &f->fq), 3);
}

/* ---- hostile rings -------------------------------------------------------------- */

static void avail_index_jumps(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 0, FV_BUF_BASE, 8, 0, 0);
	fv_avail_idx(&f->gm, &f->fq, QSIZE + 1);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_BROKEN);
	assert_true(f->q.broken);
	/* broken stays broken, whatever the guest does next */
	fv_avail_idx(&f->gm, &f->fq, 1);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_BROKEN);
	assert_false(vq_has_avail(&f->q));
	assert_int_equal(fv_used_idx(&f->gm, &f->fq), 0);
	assert_int_equal(f->q.bad_chains, 0);
}

static void avail_index_jumps_backwards(void **state)
{
	struct fx *f = *state;
	/* "behind" the last index seen is, modulo 2^16, far ahead */
	fv_avail_idx(&f->gm, &f->fq, 0xffff);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_BROKEN);
	assert_true(f->q.broken);
}

/* Exactly size ahead is a full ring, which is legitimate. */
static void avail_index_full_ring(void **state)
{
	struct fx *f = *state;
	for (uint16_t i = 0; i < QSIZE; i++) {
		fv_desc(&f->gm, &f->fq, i, FV_BUF_BASE + 0x100ull * i, 4, 0, 0);
		fv_avail(&f->gm, &f->fq, i);
	}
	for (uint16_t i = 0; i < QSIZE; i++) {
		assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
		assert_int_equal(f->c.head, i);
	}
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_EMPTY);
	assert_false(f->q.broken);
}

static void head_out_of_range(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 1, FV_BUF_BASE, 8, 0, 0);
	fv_avail(&f->gm, &f->fq, QSIZE);
	fv_avail(&f->gm, &f->fq, 1);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_BROKEN);
	assert_true(f->q.broken);
	/* a head that cannot be named cannot be returned either */
	assert_int_equal(fv_used_idx(&f->gm, &f->fq), 0);
	assert_int_equal(f->q.bad_chains, 0);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_BROKEN);
	assert_false(vq_has_avail(&f->q));
}

/* Reactivation (after a transport reset) clears the broken state. */
static void activate_clears_broken(void **state)
{
	struct fx *f = *state;
	fv_avail_idx(&f->gm, &f->fq, QSIZE + 1);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_BROKEN);
	fv_avail_idx(&f->gm, &f->fq, 0);
	assert_int_equal(vq_activate(&f->q, &f->gm), 0);
	assert_false(f->q.broken);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_EMPTY);
}

/* ---- unpop, push, interrupts ------------------------------------------------------ */

static void unpop_returns_same_chain(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 2, FV_BUF_BASE, 8, VRING_DESC_F_NEXT, 6);
	fv_desc(&f->gm, &f->fq, 6, FV_BUF_BASE + 0x100, 32, VRING_DESC_F_WRITE, 0);
	fv_desc(&f->gm, &f->fq, 1, FV_BUF_BASE + 0x200, 4, 0, 0);
	fv_avail(&f->gm, &f->fq, 2);
	fv_avail(&f->gm, &f->fq, 1);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
	assert_int_equal(f->c.head, 2);
	vq_unpop(&f->q);
	assert_true(vq_has_avail(&f->q));
	memset(&f->c, 0, sizeof(f->c));
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
	assert_int_equal(f->c.head, 2);
	assert_int_equal(f->c.nout, 1);
	assert_int_equal(f->c.nin, 1);
	assert_int_equal(f->c.in_len, 32);
	assert_ptr_equal(f->c.in[0].iov_base, host(f, FV_BUF_BASE + 0x100, 32));
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
	assert_int_equal(f->c.head, 1);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_EMPTY);
	assert_int_equal(fv_used_idx(&f->gm, &f->fq), 0);
}

/* A bad chain skipped before the good one is not replayed by unpop. */
static void unpop_after_bad_chain(void **state)
{
	struct fx *f = *state;
	fv_desc(&f->gm, &f->fq, 0, FV_MEM_SIZE, 8, 0, 0);
	fv_desc(&f->gm, &f->fq, 1, FV_BUF_BASE, 8, 0, 0);
	fv_avail(&f->gm, &f->fq, 0);
	fv_avail(&f->gm, &f->fq, 1);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
	vq_unpop(&f->q);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
	assert_int_equal(f->c.head, 1);
	assert_int_equal(f->q.bad_chains, 1);
	assert_int_equal(fv_used_idx(&f->gm, &f->fq), 1);
}

static void push_writes_used(void **state)
{
	struct fx *f = *state;
	for (uint16_t i = 0; i < 3; i++) {
		fv_desc(&f->gm, &f->fq, i, FV_BUF_BASE, 8, VRING_DESC_F_WRITE, 0);
		fv_avail(&f->gm, &f->fq, i);
	}
	/* completed out of order, as devices may */
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
	vq_push(&f->q, 1, 0x12345678);
	assert_int_equal(fv_used_idx(&f->gm, &f->fq), 1);
	assert_int_equal(f->q.used_idx, 1);
	vq_push(&f->q, 0, 0);
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
	vq_push(&f->q, 2, 8);
	assert_int_equal(fv_used_idx(&f->gm, &f->fq), 3);
	uint32_t id, len;
	used_elem(f, 0, &id, &len);
	assert_int_equal(id, 1);
	assert_int_equal(len, 0x12345678);
	used_elem(f, 1, &id, &len);
	assert_int_equal(id, 0);
	assert_int_equal(len, 0);
	used_elem(f, 2, &id, &len);
	assert_int_equal(id, 2);
	assert_int_equal(len, 8);
	/* the used ring's flags are the device's and stay 0 */
	assert_int_equal(*(uint16_t *)host(f, f->fq.used, 2), 0);
}

static void should_interrupt(void **state)
{
	struct fx *f = *state;
	uint16_t *flags = host(f, f->fq.avail, 2);
	*flags = 0;
	assert_true(vq_should_interrupt(&f->q));
	*flags = VRING_AVAIL_F_NO_INTERRUPT;
	assert_false(vq_should_interrupt(&f->q));
	*flags = 0xffff;
	assert_false(vq_should_interrupt(&f->q));
	*flags = 0xfffe;   /* other bits mean nothing here */
	assert_true(vq_should_interrupt(&f->q));
}

static void has_avail(void **state)
{
	struct fx *f = *state;
	assert_false(vq_has_avail(&f->q));
	fv_desc(&f->gm, &f->fq, 0, FV_BUF_BASE, 8, 0, 0);
	fv_avail(&f->gm, &f->fq, 0);
	assert_true(vq_has_avail(&f->q));
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
	assert_false(vq_has_avail(&f->q));
	/* has_avail does not judge: a bad chain still counts as available */
	fv_desc(&f->gm, &f->fq, 1, FV_MEM_SIZE, 8, 0, 0);
	fv_avail(&f->gm, &f->fq, 1);
	assert_true(vq_has_avail(&f->q));
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_EMPTY);
	assert_false(vq_has_avail(&f->q));
}

/* The 16-bit indices wrap: 65535 -> 0 on both rings. */
static void index_wraparound(void **state)
{
	struct fx *f = *state;
	/* Pretend 65535 chains went round already: the driver's and the
	 * device's indices agree, the used ring says so too. */
	f->fq.avail_idx = 0xffff;
	fv_avail_idx(&f->gm, &f->fq, 0xffff);
	f->q.last_avail = 0xffff;
	f->q.used_idx = 0xffff;
	*(uint16_t *)host(f, f->fq.used + 2, 2) = 0xffff;
	f->fq.used_seen = 0xffff;
	assert_false(vq_has_avail(&f->q));

	fv_desc(&f->gm, &f->fq, 0, FV_BUF_BASE, 8, 0, 0);
	fv_desc(&f->gm, &f->fq, 1, FV_BUF_BASE + 0x100, 8, VRING_DESC_F_WRITE, 0);
	fv_desc(&f->gm, &f->fq, 2, FV_BUF_BASE + 0x200, 8, 0, 0);
	fv_avail(&f->gm, &f->fq, 0);   /* slot 7, index becomes 0 */
	fv_avail(&f->gm, &f->fq, 1);   /* slot 0, index becomes 1 */
	fv_avail(&f->gm, &f->fq, 2);
	assert_int_equal(f->fq.avail_idx, 2);
	assert_true(vq_has_avail(&f->q));
	for (uint16_t h = 0; h < 3; h++) {
		assert_int_equal(vq_pop(&f->q, &f->c), VQ_CHAIN);
		assert_int_equal(f->c.head, h);
		vq_push(&f->q, h, 100u + h);
	}
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_EMPTY);
	assert_false(f->q.broken);
	assert_int_equal(f->q.last_avail, 2);
	assert_int_equal(fv_used_idx(&f->gm, &f->fq), 2);
	for (uint16_t h = 0; h < 3; h++) {
		uint32_t id, len;
		assert_true(fv_used(&f->gm, &f->fq, &id, &len));
		assert_int_equal(id, h);
		assert_int_equal(len, 100u + h);
	}
	/* and the jump check still works across the wrap */
	fv_avail_idx(&f->gm, &f->fq, (uint16_t)(2 + QSIZE + 1));
	assert_int_equal(vq_pop(&f->q, &f->c), VQ_BROKEN);
}

/* ---- iovec helpers ---------------------------------------------------------------- */

static uint8_t seg_a[5], seg_b[3], seg_c[8];
static const struct iovec iov3[3] = {
	{ seg_a, sizeof(seg_a) }, { seg_b, sizeof(seg_b) }, { seg_c, sizeof(seg_c) },
};

static void fill_segments(void)
{
	for (unsigned i = 0; i < 5; i++)
		seg_a[i] = (uint8_t)i;
	for (unsigned i = 0; i < 3; i++)
		seg_b[i] = (uint8_t)(5 + i);
	for (unsigned i = 0; i < 8; i++)
		seg_c[i] = (uint8_t)(8 + i);
}

static void iov_read_spans(void **state)
{
	(void)state;
	fill_segments();
	uint8_t out[32];
	memset(out, 0xee, sizeof(out));
	/* from the middle of the first segment to the middle of the third */
	assert_int_equal(iov_read(iov3, 3, 3, out, 8), 8);
	for (unsigned i = 0; i < 8; i++)
		assert_int_equal(out[i], 3 + i);
	assert_int_equal(out[8], 0xee);
	/* offset at a segment boundary */
	memset(out, 0xee, sizeof(out));
	assert_int_equal(iov_read(iov3, 3, 5, out, 3), 3);
	assert_int_equal(out[0], 5);
	assert_int_equal(out[2], 7);
	assert_int_equal(out[3], 0xee);
	/* past the end: only what is there */
	memset(out, 0xee, sizeof(out));
	assert_int_equal(iov_read(iov3, 3, 10, out, 32), 6);
	for (unsigned i = 0; i < 6; i++)
		assert_int_equal(out[i], 10 + i);
	assert_int_equal(out[6], 0xee);
	assert_int_equal(iov_read(iov3, 3, 0, out, 32), 16);
	assert_int_equal(iov_read(iov3, 3, 16, out, 1), 0);
	assert_int_equal(iov_read(iov3, 3, 1000, out, 1), 0);
	assert_int_equal(iov_read(iov3, 3, 2, out, 0), 0);
	assert_int_equal(iov_read(iov3, 0, 0, out, 4), 0);
	/* a zero-length segment in the middle is harmless */
	const struct iovec gap[3] = { { seg_a, 2 }, { seg_b, 0 }, { seg_c, 2 } };
	memset(out, 0xee, sizeof(out));
	assert_int_equal(iov_read(gap, 3, 1, out, 10), 3);
	assert_int_equal(out[0], 1);
	assert_int_equal(out[1], 8);
	assert_int_equal(out[2], 9);
}

static void iov_write_spans(void **state)
{
	(void)state;
	memset(seg_a, 0, sizeof(seg_a));
	memset(seg_b, 0, sizeof(seg_b));
	memset(seg_c, 0, sizeof(seg_c));
	uint8_t src[32];
	for (unsigned i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(0x80 + i);
	assert_int_equal(iov_write(iov3, 3, 4, src, 6), 6);
	assert_int_equal(seg_a[3], 0);
	assert_int_equal(seg_a[4], 0x80);
	assert_int_equal(seg_b[0], 0x81);
	assert_int_equal(seg_b[2], 0x83);
	assert_int_equal(seg_c[0], 0x84);
	assert_int_equal(seg_c[1], 0x85);
	assert_int_equal(seg_c[2], 0);
	/* past the end: stops at the last byte, writes nothing beyond */
	assert_int_equal(iov_write(iov3, 3, 12, src, 32), 4);
	assert_int_equal(seg_c[3], 0);
	assert_int_equal(seg_c[4], 0x80);
	assert_int_equal(seg_c[7], 0x83);
	assert_int_equal(iov_write(iov3, 3, 16, src, 32), 0);
	assert_int_equal(iov_write(iov3, 3, 0, src, 0), 0);
	assert_int_equal(iov_write(iov3, 3, 0, src, 32), 16);
	assert_int_equal(seg_a[0], 0x80);
	assert_int_equal(seg_c[7], 0x8f);
}

static void iov_slice_spans(void **state)
{
	(void)state;
	fill_segments();
	struct iovec out[4];
	size_t got = 999;
	/* 2 bytes of a, all of b, 1 of c */
	assert_int_equal(iov_slice(iov3, 3, 3, 6, out, 4, &got), 3);
	assert_int_equal(got, 6);
	assert_ptr_equal(out[0].iov_base, seg_a + 3);
	assert_int_equal(out[0].iov_len, 2);
	assert_ptr_equal(out[1].iov_base, seg_b);
	assert_int_equal(out[1].iov_len, 3);
	assert_ptr_equal(out[2].iov_base, seg_c);
	assert_int_equal(out[2].iov_len, 1);
	/* inside one segment */
	assert_int_equal(iov_slice(iov3, 3, 9, 2, out, 4, &got), 1);
	assert_int_equal(got, 2);
	assert_ptr_equal(out[0].iov_base, seg_c + 1);
	assert_int_equal(out[0].iov_len, 2);
	/* past the end */
	assert_int_equal(iov_slice(iov3, 3, 6, 100, out, 4, &got), 2);
	assert_int_equal(got, 10);
	assert_ptr_equal(out[0].iov_base, seg_b + 1);
	assert_int_equal(out[0].iov_len, 2);
	assert_ptr_equal(out[1].iov_base, seg_c);
	assert_int_equal(out[1].iov_len, 8);
	got = 999;
	assert_int_equal(iov_slice(iov3, 3, 16, 4, out, 4, &got), 0);
	assert_int_equal(got, 0);
	got = 999;
	assert_int_equal(iov_slice(iov3, 3, 0, 0, out, 4, &got), 0);
	assert_int_equal(got, 0);
	/* at most max entries; got says how much they cover */
	assert_int_equal(iov_slice(iov3, 3, 0, 16, out, 2, &got), 2);
	assert_int_equal(got, 8);
	assert_int_equal(iov_slice(iov3, 3, 1, 16, out, 0, &got), 0);
	assert_int_equal(got, 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(activate_sizes),
		T(reset_keeps_bad_chain_count),
		T(activate_alignment),
		T(activate_rings_outside_ram),
		T(pop_on_unactivated_queue),
		T(empty_queue),
		T(one_descriptor),
		T(multi_descriptor),
		T(chain_of_exactly_size),
		T(zero_length_skipped),
		T(hostile_loop),
		T(hostile_self_loop),
		T(hostile_next_out_of_range),
		T(hostile_next_far_out_of_range),
		T(hostile_longer_than_size),
		T(hostile_addr_outside_ram),
		T(hostile_addr_straddles_end),
		T(hostile_addr_in_gap),
		T(hostile_addr_wraps),
		T(hostile_huge_len),
		T(hostile_readable_after_writable),
		T(hostile_indirect),
		T(hostile_indirect_mid_chain),
		T(several_bad_chains),
		T(avail_index_jumps),
		T(avail_index_jumps_backwards),
		T(avail_index_full_ring),
		T(head_out_of_range),
		T(activate_clears_broken),
		T(unpop_returns_same_chain),
		T(unpop_after_bad_chain),
		T(push_writes_used),
		T(should_interrupt),
		T(has_avail),
		T(index_wraparound),
		cmocka_unit_test(iov_read_spans),
		cmocka_unit_test(iov_write_spans),
		cmocka_unit_test(iov_slice_spans),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
