#include "virtqueue.h"

#include <linux/virtio_ring.h>
#include <stdio.h>
#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "rings are little-endian and read in place");
_Static_assert(sizeof(struct vring_desc) == 16 && sizeof(struct vring_used_elem) == 8,
	       "split ring layout of virtio 1.2, 2.7");
_Static_assert((VQ_MAX_SIZE & (VQ_MAX_SIZE - 1)) == 0, "queue sizes are powers of two");

/* Ring sizes in bytes: flags and idx, the ring, and the event word. */
static uint64_t desc_bytes(uint16_t n) { return 16ull * n; }
static uint64_t avail_bytes(uint16_t n) { return 6ull + 2ull * n; }
static uint64_t used_bytes(uint16_t n) { return 6ull + 8ull * n; }

/* The guest writes the rings concurrently: every field is loaded exactly
 * once, with a single access, into a local. */
static uint16_t ld16(volatile uint8_t *p)
{
	return __atomic_load_n((volatile uint16_t *)p, __ATOMIC_ACQUIRE);
}
static uint32_t ld32(volatile uint8_t *p)
{
	return __atomic_load_n((volatile uint32_t *)p, __ATOMIC_RELAXED);
}
static uint64_t ld64(volatile uint8_t *p)
{
	return __atomic_load_n((volatile uint64_t *)p, __ATOMIC_RELAXED);
}

void vq_reset(struct virtq *q)
{
	uint16_t max = q->max_size;
	uint64_t bad = q->bad_chains;
	memset(q, 0, sizeof(*q));
	q->max_size = max;
	q->bad_chains = bad;
}

int vq_activate(struct virtq *q, const struct guest_mem *mem)
{
	uint16_t n = q->size;
	if (n == 0 || n > q->max_size || n > VQ_MAX_SIZE || (n & (n - 1)))
		return -1;
	if ((q->desc_gpa & (VRING_DESC_ALIGN_SIZE - 1)) || (q->avail_gpa & (VRING_AVAIL_ALIGN_SIZE - 1)) ||
	    (q->used_gpa & (VRING_USED_ALIGN_SIZE - 1)))
		return -1;
	q->desc = guest_mem_ptr(mem, q->desc_gpa, desc_bytes(n));
	q->avail = guest_mem_ptr(mem, q->avail_gpa, avail_bytes(n));
	q->used = guest_mem_ptr(mem, q->used_gpa, used_bytes(n));
	if (!q->desc || !q->avail || !q->used) {
		q->desc = q->avail = q->used = NULL;
		return -1;
	}
	q->mem = mem;
	q->last_avail = q->used_idx = 0;
	q->broken = false;
	return 0;
}

/* Walk the chain at head into c. Returns 0 when every descriptor is valid. */
static int parse_chain(struct virtq *q, uint16_t head, struct vq_chain *c)
{
	c->head = head;
	c->nout = c->nin = 0;
	c->out_len = c->in_len = 0;
	uint16_t i = head;
	for (unsigned count = 0;; count++) {
		if (i >= q->size || count >= q->size)
			return -1;   /* out of range, or a loop */
		volatile uint8_t *d = q->desc + 16u * i;
		uint64_t addr = ld64(d);
		uint32_t len = ld32(d + 8);
		uint16_t flags = ld16(d + 12);
		uint16_t next = ld16(d + 14);
		bool writable = flags & VRING_DESC_F_WRITE;
		if (flags & VRING_DESC_F_INDIRECT)
			return -1;   /* never offered */
		if (!writable && c->nin)
			return -1;   /* readable after writable */
		if (len) {
			void *p = guest_mem_ptr(q->mem, addr, len);
			if (!p)
				return -1;
			if (writable) {
				c->in[c->nin++] = (struct iovec){ p, len };
				c->in_len += len;
			} else {
				c->out[c->nout++] = (struct iovec){ p, len };
				c->out_len += len;
			}
		}
		if (!(flags & VRING_DESC_F_NEXT))
			return 0;
		i = next;
	}
}

enum vq_pop_result vq_pop(struct virtq *q, struct vq_chain *c)
{
	if (q->broken || !q->desc)
		return VQ_BROKEN;
	for (;;) {
		uint16_t avail_idx = ld16(q->avail + 2);
		uint16_t pending = (uint16_t)(avail_idx - q->last_avail);
		if (pending == 0)
			return VQ_EMPTY;
		if (pending > q->size) {
			q->broken = true;
			return VQ_BROKEN;
		}
		uint16_t head = ld16(q->avail + 4 + 2u * (q->last_avail & (q->size - 1)));
		if (head >= q->size) {
			q->broken = true;   /* cannot even be returned */
			return VQ_BROKEN;
		}
		q->last_avail++;
		if (parse_chain(q, head, c) == 0)
			return VQ_CHAIN;
		q->bad_chains++;
		vq_push(q, head, 0);
	}
}

void vq_unpop(struct virtq *q)
{
	q->last_avail--;
}

void vq_push(struct virtq *q, uint16_t head, uint32_t written)
{
	volatile uint8_t *e = q->used + 4 + 8u * (q->used_idx & (q->size - 1));
	__atomic_store_n((volatile uint32_t *)e, (uint32_t)head, __ATOMIC_RELAXED);
	__atomic_store_n((volatile uint32_t *)(e + 4), written, __ATOMIC_RELAXED);
	q->used_idx++;
	/* The element is visible before the index that publishes it. */
	__atomic_store_n((volatile uint16_t *)(q->used + 2), q->used_idx, __ATOMIC_RELEASE);
}

bool vq_should_interrupt(struct virtq *q)
{
	if (!q->avail)
		return false;
	/* Order the used index store before reading the driver's flags, or an
	 * interrupt it asked for can be missed. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return !(ld16(q->avail) & VRING_AVAIL_F_NO_INTERRUPT);
}

bool vq_has_avail(struct virtq *q)
{
	if (q->broken || !q->avail)
		return false;
	return ld16(q->avail + 2) != q->last_avail;
}

void vq_state(struct virtq *q, char *buf, size_t len)
{
	if (!q->avail) {
		snprintf(buf, len, "not live");
		return;
	}
	snprintf(buf, len, "avail %u next %u used %u%s", ld16(q->avail + 2), q->last_avail, q->used_idx,
		 ld16(q->avail) & VRING_AVAIL_F_NO_INTERRUPT ? " nointr" : "");
}

/* Copy between a flat buffer and the iovecs, from offset within them. */
static size_t iov_copy(const struct iovec *iov, unsigned n, size_t offset, uint8_t *buf, size_t len, bool to_iov)
{
	size_t done = 0;
	for (unsigned i = 0; i < n && done < len; i++) {
		if (offset >= iov[i].iov_len) {
			offset -= iov[i].iov_len;
			continue;
		}
		size_t k = iov[i].iov_len - offset;
		if (k > len - done)
			k = len - done;
		uint8_t *seg = (uint8_t *)iov[i].iov_base + offset;
		memcpy(to_iov ? seg : buf + done, to_iov ? buf + done : seg, k);
		done += k;
		offset = 0;
	}
	return done;
}

size_t iov_read(const struct iovec *iov, unsigned n, size_t offset, void *dst, size_t len)
{
	return iov_copy(iov, n, offset, dst, len, false);
}

size_t iov_write(const struct iovec *iov, unsigned n, size_t offset, const void *src, size_t len)
{
	/* The buffer is only read in this direction. */
	return iov_copy(iov, n, offset, (uint8_t *)src, len, true);
}

unsigned iov_slice(const struct iovec *iov, unsigned n, size_t offset, size_t len, struct iovec *out,
		   unsigned max, size_t *got)
{
	unsigned m = 0;
	size_t done = 0;
	for (unsigned i = 0; i < n && done < len && m < max; i++) {
		if (offset >= iov[i].iov_len) {
			offset -= iov[i].iov_len;
			continue;
		}
		size_t k = iov[i].iov_len - offset;
		if (k > len - done)
			k = len - done;
		out[m++] = (struct iovec){ (uint8_t *)iov[i].iov_base + offset, k };
		done += k;
		offset = 0;
	}
	*got = done;
	return m;
}
