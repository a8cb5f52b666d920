/* libFuzzer harness for virtio-blk (vmm/virtio_blk.c): the request parser
 * and executor, reached the way a guest reaches them.
 *
 * Two disks are set up once, a read-write and a read-only one, 64 sectors
 * each, in files under /dev/shm (or /tmp) that are unlinked at once. Each
 * input picks a disk and a queue size, brings the device up afresh with the
 * fake driver of tests/common/fake_virtio.h, and then describes descriptor
 * chains to build and make available, with kicks in between: headers with
 * a type and sector from the input, data and status descriptors of chosen
 * sizes and directions, and hostile variations (a header split or cut short,
 * descriptors flipped, chained anywhere, marked INDIRECT, placed anywhere in
 * guest memory or outside it, a missing or long status descriptor, heads
 * and available indices out of range). Inputs whose first byte says so
 * instead call blk_parse directly on a chain built from the input.
 *
 * Promises checked (abort() on violation), besides the sanitizers:
 *   - blk_parse: an IN/OUT answered OK is len > 0 bytes, a multiple of 512,
 *     at a sector-aligned offset, offset + len <= capacity * 512; its iovecs
 *     total len and are exactly the data part of the chain (after the
 *     16-byte header for OUT, before the status byte for IN); OUT on a
 *     read-only disk is never OK; GET_ID asks at most 20 bytes; the status
 *     returned is the one virtio 1.2, 5.2.6 prescribes, computed here
 *     independently;
 *   - through the transport, for every kick whose chains write nothing into
 *     the rings: the used elements are the available heads in order (a chain
 *     the walker refuses gets length 0); a request without a writable byte
 *     gets length 0; any other gets 1 <= length <= its writable bytes, and
 *     when no two buffers of the kick overlap, exactly the length, status
 *     byte, data read, and disk contents written that the request calls for
 *     (checked against a shadow copy of the disk);
 *   - a queue the driver broke puts the device in DEVICE_NEEDS_RESET;
 *   - neither disk file ever changes size; the read-only one never changes.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_virtio.h"
#include "guest_mem.h"
#include "virtio_blk.h"
#include "virtio_mmio.h"
#include "virtqueue.h"

#define DISK_SECTORS 64u
#define DISK_BYTES   (DISK_SECTORS * BLK_SECTOR)
#define RING_END     (FV_RING_BASE + FV_RING_STRIDE)   /* queue 0's rings */
#define BUF_END      FV_MEM_SIZE
#define MAX_SEGS     8

static struct guest_mem gm;
static struct virtio_blk blk[2];             /* [0] read-write, [1] read-only */
static uint8_t disk_shadow[2][DISK_BYTES];   /* what each disk should hold */
static uint8_t disk_now[DISK_BYTES];
static uint8_t ro_content[DISK_BYTES];     /* the read-only disk, forever */
static struct fv_queue fq;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stdout, "fuzz_virtio_blk: invariant violated: %s\n", what);
		fflush(stdout);
		abort();
	}
}

static void setup_disk(unsigned i, bool ro)
{
	char path[64];
	const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(path, sizeof(path), "%s/fuzz_blk_%d_%u_XXXXXX", dir, (int)getpid(), i);
	int fd = mkstemp(path);
	if (fd < 0)
		abort();
	for (unsigned k = 0; k < DISK_BYTES; k++)
		disk_shadow[i][k] = (uint8_t)(k * 7 + i * 101 + (k >> 9));
	if (pwrite(fd, disk_shadow[i], DISK_BYTES, 0) != (ssize_t)DISK_BYTES)
		abort();
	close(fd);
	int rc = virtio_blk_init(&blk[i], path, ro, &gm, 0xd0000000ull + 0x1000ull * i, 5 + i);
	unlink(path);
	if (rc != 0 || blk[i].capacity != DISK_SECTORS)
		abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* Silence vmm_err without closing fd 2 (see fuzz_loader.c). */
	FILE *null = fopen("/dev/null", "w");
	if (null)
		stderr = null;
	if (fv_mem_init(&gm) != 0)
		abort();
	setup_disk(0, false);
	setup_disk(1, true);
	memcpy(ro_content, disk_shadow[1], DISK_BYTES);
	return 0;
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

static uint64_t rd64(struct rd *r)
{
	uint64_t v = rd32(r);
	return v | (uint64_t)rd32(r) << 32;
}

static uint32_t pick_type(struct rd *r, uint8_t sel)
{
	switch (sel & 7) {
	case 0: case 1: case 2: return VIRTIO_BLK_T_IN;
	case 3: case 4: return VIRTIO_BLK_T_OUT;
	case 5: return VIRTIO_BLK_T_FLUSH;
	case 6: return VIRTIO_BLK_T_GET_ID;
	default: return rd32(r);
	}
}

static uint64_t pick_sector(struct rd *r)
{
	uint8_t b = rd8(r);
	return b < 0xf0 ? b % (DISK_SECTORS + 8) : rd64(r);
}

static uint32_t pick_len(struct rd *r)
{
	uint8_t b = rd8(r);
	switch (b >> 6) {
	case 0: return ((b & 7) + 1) * BLK_SECTOR;
	case 1: return b & 0x3f;
	case 2: return ((b & 7) + 1) * BLK_SECTOR + ((b >> 3) & 7) - 4;
	default: return rd16(r);
	}
}

/* ---- what a request should do (virtio 1.2, 5.2.6) ------------------------ */

struct expect {
	uint8_t status;        /* meaningful when has_status */
	bool has_status;
	bool io;               /* IN/OUT that transfers data */
	uint32_t type;
	uint64_t sector;
	uint64_t data;         /* data bytes (IN/OUT/GET_ID) */
};

/* hdr: the first 16 bytes of the readable part (when out_len >= 16). */
static void model_req(const uint8_t *hdr, uint64_t out_len, uint64_t in_len, uint64_t cap, bool ro,
		      struct expect *e)
{
	memset(e, 0, sizeof(*e));
	e->has_status = in_len >= 1;
	e->status = VIRTIO_BLK_S_IOERR;
	if (!e->has_status || out_len < 16)
		return;
	struct virtio_blk_outhdr h;
	memcpy(&h, hdr, sizeof(h));
	e->type = h.type;
	e->sector = h.sector;
	switch (h.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
		if (h.type == VIRTIO_BLK_T_OUT && ro)
			return;
		e->data = h.type == VIRTIO_BLK_T_IN ? in_len - 1 : out_len - 16;
		if (e->data == 0 || e->data % BLK_SECTOR || h.sector > cap || e->data / BLK_SECTOR > cap - h.sector)
			return;
		e->io = true;
		e->status = VIRTIO_BLK_S_OK;
		return;
	case VIRTIO_BLK_T_FLUSH:
		e->status = VIRTIO_BLK_S_OK;
		return;
	case VIRTIO_BLK_T_GET_ID:
		e->data = in_len - 1 < VIRTIO_BLK_ID_BYTES ? in_len - 1 : VIRTIO_BLK_ID_BYTES;
		e->status = VIRTIO_BLK_S_OK;
		return;
	default:
		e->status = VIRTIO_BLK_S_UNSUPP;
		return;
	}
}

/* Whether slice[0..m) is exactly bytes [off, off + len) of src[0..n). */
static bool is_slice(const struct iovec *src, unsigned n, uint64_t off, uint64_t len,
		     const struct iovec *slice, unsigned m)
{
	unsigned j = 0;
	for (unsigned i = 0; i < n && len; i++) {
		if (off >= src[i].iov_len) {
			off -= src[i].iov_len;
			continue;
		}
		uint64_t k = src[i].iov_len - off;
		if (k > len)
			k = len;
		if (j >= m || slice[j].iov_base != (uint8_t *)src[i].iov_base + off || slice[j].iov_len != k)
			return false;
		j++;
		len -= k;
		off = 0;
	}
	return len == 0 && j == m;
}

/* ---- blk_parse called directly ------------------------------------------- */

static uint8_t host_buf[1u << 20];
static struct vq_chain pchain;
static struct blk_req preq;

static unsigned pick_count(struct rd *r)
{
	uint8_t b = rd8(r);
	return b >= 0xf0 ? VQ_MAX_SIZE - (b & 15) * 16 : b % 5;
}

static void fuzz_parse(struct rd *r)
{
	struct vq_chain *c = &pchain;
	size_t bump = 0;
	c->head = 0;
	c->nout = pick_count(r);
	c->nin = pick_count(r);
	if (c->nin > VQ_MAX_SIZE - c->nout)   /* the walker's promise: nout + nin <= size */
		c->nin = VQ_MAX_SIZE - c->nout;
	c->out_len = c->in_len = 0;
	for (unsigned k = 0; k < c->nout + c->nin; k++) {
		/* Many segments get small ones; zero-length never reach a device. */
		uint32_t len = c->nout + c->nin > 8 ? 1 + rd8(r) % 32 : pick_len(r);
		if (len == 0)
			len = 1;
		if (len > sizeof(host_buf) - bump)
			len = 1, bump = 0;   /* out of room: overlap, harmless for parsing */
		struct iovec v = { host_buf + bump, len };
		bump += len;
		if (k < c->nout) {
			c->out[k] = v;
			c->out_len += len;
		} else {
			c->in[k - c->nout] = v;
			c->in_len += len;
		}
	}
	/* The header at the start of the readable part: type and sector from
	 * the input, written across however the segments are cut. */
	struct virtio_blk_outhdr h = { .type = pick_type(r, rd8(r)), .ioprio = rd32(r) };
	h.sector = pick_sector(r);
	uint8_t hb[16];
	memcpy(hb, &h, 16);
	for (unsigned k = 0, done = 0; k < c->nout && done < 16; k++)
		for (size_t j = 0; j < c->out[k].iov_len && done < 16; j++)
			((uint8_t *)c->out[k].iov_base)[j] = hb[done++];
	uint8_t cb = rd8(r);
	bool ro = cb & 1;
	uint64_t cap = (cb & 2) ? 1 + (rd64(r) >> 10) : 1 + rd8(r);   /* a file's size fits off_t */

	struct blk_req *q = &preq;
	memset(q, 0x5a, sizeof(*q));
	uint8_t st = blk_parse(c, cap, ro, q);
	struct expect e;
	model_req(hb, c->out_len, c->in_len, cap, ro, &e);
	check(st == VIRTIO_BLK_S_OK || st == VIRTIO_BLK_S_IOERR || st == VIRTIO_BLK_S_UNSUPP,
	      "blk_parse returns a virtio-blk status");
	check(q->has_status == e.has_status, "has_status iff the chain has a writable byte");
	check(st == e.status, "blk_parse status is the one virtio-blk prescribes");
	check(q->niov <= VQ_MAX_SIZE, "niov within the iovec array");
	if (st != VIRTIO_BLK_S_OK)
		return;
	check(q->type == h.type, "request type is the header's");
	uint64_t sum = 0;
	for (unsigned k = 0; k < q->niov; k++)
		sum += q->iov[k].iov_len;
	switch (h.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
		check(q->len > 0 && q->len % BLK_SECTOR == 0, "data length: whole sectors, not zero");
		check(q->offset % BLK_SECTOR == 0 && q->offset / BLK_SECTOR == h.sector, "offset is the header's sector");
		check(q->offset / BLK_SECTOR + q->len / BLK_SECTOR <= cap, "offset + len <= capacity * 512");
		check(sum == q->len, "the iovecs total len");
		check(q->len == e.data, "all of the chain's data part is transferred");
		if (h.type == VIRTIO_BLK_T_IN)
			check(is_slice(c->in, c->nin, 0, c->in_len - 1, q->iov, q->niov),
			      "IN reads into the writable part before the status byte");
		else
			check(!ro && is_slice(c->out, c->nout, 16, c->out_len - 16, q->iov, q->niov),
			      "OUT writes the readable part after the header, never to a read-only disk");
		break;
	case VIRTIO_BLK_T_GET_ID:
		check(q->len == e.data && q->len <= VIRTIO_BLK_ID_BYTES && q->len <= sum, "GET_ID length");
		check(is_slice(c->in, c->nin, 0, c->in_len - 1, q->iov, q->niov),
		      "GET_ID writes the writable part before the status byte");
		break;
	case VIRTIO_BLK_T_FLUSH:
		break;
	default:
		check(0, "OK only for IN, OUT, FLUSH, GET_ID");
	}
}

/* ---- through the transport ----------------------------------------------- */

/* The walker's view of one chain, computed here from the descriptor table
 * before the kick. */
struct mseg {
	uint64_t gpa;
	uint32_t len;
};
struct mchain {
	uint16_t head;
	bool valid;
	unsigned nout, nin;
	uint64_t out_len, in_len;
	struct mseg out[VQ_MAX_SIZE], in[VQ_MAX_SIZE];
};
static struct mchain pred[VQ_MAX_SIZE];

static bool in_ram(uint64_t gpa, uint64_t len)
{
	return len && gpa < FV_MEM_SIZE && len <= FV_MEM_SIZE - gpa;
}

static void model_walk(uint16_t qsize, uint16_t head, struct mchain *c)
{
	memset(c, 0, offsetof(struct mchain, out));
	c->head = head;
	uint16_t i = head;
	for (unsigned count = 0; count < qsize; count++) {
		if (i >= qsize)
			return;
		struct vring_desc d;
		memcpy(&d, gm.base + fq.desc + 16ull * i, 16);
		if (d.flags & VRING_DESC_F_INDIRECT)
			return;
		bool w = d.flags & VRING_DESC_F_WRITE;
		if (!w && c->nin)
			return;
		if (d.len) {
			if (!in_ram(d.addr, d.len))
				return;
			if (w) {
				c->in[c->nin++] = (struct mseg){ d.addr, d.len };
				c->in_len += d.len;
			} else {
				c->out[c->nout++] = (struct mseg){ d.addr, d.len };
				c->out_len += d.len;
			}
		}
		if (!(d.flags & VRING_DESC_F_NEXT)) {
			c->valid = true;
			return;
		}
		i = d.next;
	}
}

/* The device's progress through the ring as the model sees it. */
struct mstate {
	uint16_t qsize;
	uint16_t last_avail;
	bool broken;
	bool tainted;      /* the device may have written into the rings: stop checking them */
};

static void gather(const struct mseg *s, unsigned n, uint64_t off, uint8_t *dst, uint64_t len)
{
	for (unsigned i = 0; i < n && len; i++) {
		if (off >= s[i].len) {
			off -= s[i].len;
			continue;
		}
		uint64_t k = s[i].len - off < len ? s[i].len - off : len;
		memcpy(dst, gm.base + s[i].gpa + off, k);
		dst += k;
		len -= k;
		off = 0;
	}
}

static bool overlaps_rings(const struct mseg *s)
{
	return s->gpa < RING_END && s->gpa + s->len > FV_RING_BASE;
}

struct range {
	uint64_t a, b;
};
static struct range ranges[VQ_MAX_SIZE * 2 * VQ_MAX_SIZE];

static int range_cmp(const void *x, const void *y)
{
	const struct range *p = x, *q = y;
	return p->a < q->a ? -1 : p->a > q->a;
}

/* Whether any two buffers of the predicted chains overlap. */
static bool any_overlap(unsigned npred)
{
	size_t n = 0;
	for (unsigned i = 0; i < npred; i++) {
		if (!pred[i].valid)
			continue;
		for (unsigned k = 0; k < pred[i].nout; k++)
			ranges[n++] = (struct range){ pred[i].out[k].gpa, pred[i].out[k].gpa + pred[i].out[k].len };
		for (unsigned k = 0; k < pred[i].nin; k++)
			ranges[n++] = (struct range){ pred[i].in[k].gpa, pred[i].in[k].gpa + pred[i].in[k].len };
	}
	qsort(ranges, n, sizeof(ranges[0]), range_cmp);
	for (size_t i = 1; i < n; i++)
		if (ranges[i].a < ranges[i - 1].b)
			return true;
	return false;
}

static void read_disk(unsigned d, uint8_t *dst)
{
	check(pread(blk[d].fd, dst, DISK_BYTES, 0) == (ssize_t)DISK_BYTES, "disk readable");
}

static void disk_size_unchanged(unsigned d)
{
	struct stat st;
	check(fstat(blk[d].fd, &st) == 0 && st.st_size == (off_t)DISK_BYTES, "the disk file never changes size");
}

static uint8_t hdrbuf[16];
static uint8_t databuf[DISK_BYTES];        /* data of one request: at most the disk */

/* Kick the queue and check what the device did against the model. */
static void kick_and_check(unsigned d, struct mstate *m)
{
	struct virtio_blk *b = &blk[d];
	unsigned npred = 0;
	bool will_break = false;
	if (!m->tainted && !m->broken) {
		uint16_t idx;
		memcpy(&idx, gm.base + fq.avail + 2, 2);
		uint16_t pending = (uint16_t)(idx - m->last_avail);
		if (pending > m->qsize) {
			will_break = true;
		} else {
			for (uint16_t k = 0; k < pending; k++) {
				uint16_t head;
				memcpy(&head, gm.base + fq.avail + 4 + 2ull * ((m->last_avail + k) & (m->qsize - 1)), 2);
				if (head >= m->qsize) {
					will_break = true;
					break;
				}
				model_walk(m->qsize, head, &pred[npred++]);
			}
		}
		/* A chain that writes into the rings changes what the rest of
		 * the kick sees: no more exact expectations for this input. */
		for (unsigned i = 0; i < npred && !m->tainted; i++)
			for (unsigned k = 0; pred[i].valid && k < pred[i].nin; k++)
				if (overlaps_rings(&pred[i].in[k]))
					m->tainted = true;
	}
	bool exact = !m->tainted && !m->broken && !any_overlap(npred);
	struct expect ex[VQ_MAX_SIZE];
	if (exact)
		for (unsigned i = 0; i < npred; i++) {
			const struct mchain *c = &pred[i];
			if (!c->valid)
				continue;
			memset(hdrbuf, 0, sizeof(hdrbuf));
			gather(c->out, c->nout, 0, hdrbuf, c->out_len < 16 ? c->out_len : 16);
			model_req(hdrbuf, c->out_len, c->in_len, DISK_SECTORS, b->ro, &ex[i]);
		}

	virtio_mmio_kick(&b->t, 0);

	uint32_t status = fv_read(&b->t, VIRTIO_MMIO_STATUS);
	if (b->t.queues[0].broken)
		check(status & VIRTIO_CONFIG_S_NEEDS_RESET, "a broken queue puts the device in NEEDS_RESET");
	if (m->tainted || m->broken) {
		m->broken |= b->t.queues[0].broken;
		read_disk(d, disk_shadow[d]);   /* resynchronise */
		return;
	}
	check(b->t.queues[0].broken == will_break, "the queue breaks exactly when the ring is invalid");
	m->broken = will_break;
	for (unsigned i = 0; i < npred; i++) {
		const struct mchain *c = &pred[i];
		uint32_t id, len;
		check(fv_used(&gm, &fq, &id, &len), "every available chain before a break is used");
		check(id == c->head, "used elements in available order");
		m->last_avail++;
		if (!c->valid) {
			check(len == 0, "a refused chain is returned with length 0");
			continue;
		}
		if (c->in_len == 0) {
			check(len == 0, "a request with no writable byte gets length 0");
			continue;
		}
		check(len >= 1 && len <= c->in_len, "used length: 1 .. writable bytes");
		if (!exact)
			continue;
		const struct expect *e = &ex[i];
		uint8_t st;
		gather(c->in, c->nin, c->in_len - 1, &st, 1);
		check(st == e->status, "status byte is the one virtio-blk prescribes");
		uint32_t want = 1;
		if (e->status == VIRTIO_BLK_S_OK && (e->type == VIRTIO_BLK_T_IN || e->type == VIRTIO_BLK_T_GET_ID))
			want += (uint32_t)e->data;
		check(len == want, "used length: data read plus the status byte");
		if (e->io && e->type == VIRTIO_BLK_T_IN) {
			gather(c->in, c->nin, 0, databuf, e->data);
			check(memcmp(databuf, disk_shadow[d] + e->sector * BLK_SECTOR, e->data) == 0,
			      "IN reads the disk's bytes");
		} else if (e->io) {
			gather(c->out, c->nout, 16, disk_shadow[d] + e->sector * BLK_SECTOR, e->data);
		} else if (e->type == VIRTIO_BLK_T_GET_ID && e->status == VIRTIO_BLK_S_OK) {
			gather(c->in, c->nin, 0, databuf, e->data);
			check(memcmp(databuf, b->id, e->data) == 0, "GET_ID returns the serial");
		}
	}
	uint32_t id, len;
	check(!fv_used(&gm, &fq, &id, &len), "nothing used that was not available");
	if (exact) {
		read_disk(d, disk_now);
		check(memcmp(disk_now, disk_shadow[d], DISK_BYTES) == 0, "the disk holds exactly what was written");
	} else {
		read_disk(d, disk_shadow[d]);
	}
}

/* Where the next buffer goes: mostly fresh guest memory, sometimes anywhere. */
static uint64_t bump;

static bool alloc(uint32_t len, uint64_t *gpa)
{
	uint64_t need = (len + 15ull) & ~15ull;
	if (need == 0)
		need = 16;
	if (need > BUF_END - bump)
		return false;
	*gpa = bump;
	bump += need;
	return true;
}

struct seg {
	uint64_t gpa;
	uint32_t len;
	uint16_t flags;
	uint16_t next;   /* used when next_set */
	bool next_set;
};

/* Build one chain from the input at descriptors *nd onward and make it
 * available. Returns false when the input or the room ran out. */
static bool build_chain(struct rd *r, uint16_t qsize, uint16_t *nd, bool *kick_now)
{
	if (!r->n)
		return false;
	uint8_t ctl = rd8(r);
	uint32_t type = pick_type(r, ctl);
	uint64_t sector = pick_sector(r);
	unsigned ndata = ctl >> 6;
	bool split = ctl & 0x10;
	*kick_now = ctl & 0x20;
	uint8_t fl = (ctl & 0x08) ? rd8(r) : 0;   /* hostile variations */

	struct seg s[MAX_SEGS];
	unsigned n = 0;
	struct virtio_blk_outhdr h = { .type = type, .sector = sector };
	uint32_t hlen = (fl & 0x80) ? rd8(r) % 33 : 16;
	uint8_t hb[32] = { 0 };
	memcpy(hb, &h, 16);
	uint32_t cut = split ? 1 + rd8(r) % 15 : hlen;
	if (cut > hlen)
		cut = hlen;
	s[n++] = (struct seg){ .len = cut };
	if (hlen > cut)
		s[n++] = (struct seg){ .len = hlen - cut };
	bool data_w = type == VIRTIO_BLK_T_IN || type == VIRTIO_BLK_T_GET_ID;
	for (unsigned k = 0; k < ndata; k++)
		s[n++] = (struct seg){ .len = pick_len(r), .flags = data_w ? VRING_DESC_F_WRITE : 0 };
	if (!(fl & 0x40))
		s[n++] = (struct seg){ .len = (fl & 0x20) ? rd8(r) : 1, .flags = VRING_DESC_F_WRITE };
	if (*nd + n > qsize)
		return false;
	for (unsigned k = 0; k < n; k++)
		if (!alloc(s[k].len, &s[k].gpa))
			return false;
	/* Contents: the header bytes, a pattern in readable data, a marker in
	 * writable buffers. */
	uint32_t hdone = 0;
	for (unsigned k = 0; k < n; k++) {
		uint8_t *p = gm.base + s[k].gpa;
		if (hdone < hlen) {
			memcpy(p, hb + hdone, s[k].len);
			hdone += s[k].len;
		} else if (s[k].flags & VRING_DESC_F_WRITE) {
			memset(p, 0xee, s[k].len);
		} else {
			for (uint32_t j = 0; j < s[k].len; j++)
				p[j] = (uint8_t)(s[k].gpa + j * 131);
		}
	}
	if (fl & 0x01)
		s[rd8(r) % n].flags ^= VRING_DESC_F_WRITE;
	if (fl & 0x02) {
		/* Anywhere: the rings, the other buffers, past the end of RAM. */
		unsigned k = rd8(r) % n;
		uint32_t v = rd32(r);
		s[k].gpa = (v & 0x80000000u) ? (uint64_t)v << 12 : v % (FV_MEM_SIZE + 0x1000);
		if (v & 0x40000000u)
			s[k].len = rd32(r);
	}
	if (fl & 0x04) {
		unsigned k = rd8(r) % n;
		s[k].next = rd8(r);
		s[k].next_set = true;
	}
	unsigned end = n;
	if (fl & 0x08)
		end = 1 + rd8(r) % n;   /* the chain stops early */
	if (fl & 0x10)
		s[rd8(r) % n].flags |= VRING_DESC_F_INDIRECT;
	uint16_t head = *nd;
	for (unsigned k = 0; k < n; k++) {
		uint16_t idx = (uint16_t)(*nd + k);
		uint16_t flags = s[k].flags;
		uint16_t next = s[k].next_set ? s[k].next : (uint16_t)(idx + 1);
		if (k + 1 < end || s[k].next_set)
			flags |= VRING_DESC_F_NEXT;
		fv_desc(&gm, &fq, idx, s[k].gpa, s[k].len, flags, next);
	}
	*nd = (uint16_t)(*nd + n);
	fv_avail(&gm, &fq, head);
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r = { data, size };
	uint8_t g = rd8(&r);
	if (g & 0x10) {
		fuzz_parse(&r);
		return 0;
	}
	unsigned d = g & 1;
	struct virtio_blk *b = &blk[d];
	uint16_t qsize = (uint16_t)(2u << ((g >> 1) & 7));

	/* A fresh device and fresh rings for every input. */
	memset(gm.base + FV_RING_BASE, 0, FV_RING_STRIDE);
	uint32_t st = fv_bring_up(&b->t, 1, qsize, &fq);
	check(st == (VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK |
		     VIRTIO_CONFIG_S_DRIVER_OK),
	      "the device comes up");
	struct mstate m = { .qsize = qsize };
	bump = FV_BUF_BASE;
	uint16_t nd = 0;

	if (g & 0x40)
		fv_avail(&gm, &fq, rd8(&r));   /* a head that may be out of range */
	bool kick_now;
	for (unsigned nchains = 0; nchains < 64 && build_chain(&r, qsize, &nd, &kick_now); nchains++)
		if (kick_now)
			kick_and_check(d, &m);
	if (g & 0x20) {
		fv_avail_idx(&gm, &fq, rd16(&r));   /* the index jumps */
		kick_and_check(d, &m);
	}
	kick_and_check(d, &m);

	disk_size_unchanged(0);
	disk_size_unchanged(1);
	read_disk(1, disk_now);
	check(memcmp(disk_now, ro_content, DISK_BYTES) == 0, "the read-only disk never changes");
	/* Leave the device reset: the next input may pick the other disk. */
	fv_write(&b->t, VIRTIO_MMIO_STATUS, 0);
	return 0;
}
