/* virtio-blk over a raw image: config space and features, every request
 * type driven through the real transport and queue with hand-built chains,
 * the bounds a hostile driver cannot cross, blk_parse on hand-built chains,
 * and the files virtio_blk_init refuses. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/virtio_ids.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_virtio.h"
#include "virtio_blk.h"

/* The image: NSECT whole sectors and a partial one the disk must not
 * include (the capacity rounds down). */
#define NSECT    300u
#define TAIL     100u
#define IMG_SIZE (NSECT * BLK_SECTOR + TAIL)

/* Guest addresses of the request parts; data buffers from DATA_GPA up. */
#define HDR_GPA    (FV_BUF_BASE)
#define STATUS_GPA (FV_BUF_BASE + 0x800)
#define DATA_GPA   (FV_BUF_BASE + 0x1000)

#define FILL       0xa5   /* guest buffers start as this, to see what the device wrote */
#define NO_STATUS  0xee   /* the status byte before the device answers */

/* Byte j of the image: every sector distinct (its number in its first 8
 * bytes), every byte of a sector different from its neighbours. */
static uint8_t img_byte(uint64_t j)
{
	uint64_t s = j / BLK_SECTOR, k = j % BLK_SECTOR;
	if (k < 8)
		return (uint8_t)(s >> (8 * k));
	return (uint8_t)(s * 131u + k * 7u + 1u);
}

struct fx {
	char dir[32];
	char path[64];
	uint8_t *shadow;    /* what the file must hold */
	struct guest_mem gm;
	struct virtio_blk b;
	struct fv_queue q;
	unsigned nreq;
};

static void write_file(const char *path, const uint8_t *data, size_t len)
{
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
}

static void make_tmpdir(char *dir, size_t len)
{
	assert_true(snprintf(dir, len, "/tmp/vblkXXXXXX") < (int)len);
	assert_non_null(mkdtemp(dir));
}

static int setup(void **state, bool ro)
{
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	make_tmpdir(f->dir, sizeof(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/disk.img", f->dir);
	f->shadow = malloc(IMG_SIZE);
	assert_non_null(f->shadow);
	for (uint64_t j = 0; j < IMG_SIZE; j++)
		f->shadow[j] = img_byte(j);
	write_file(f->path, f->shadow, IMG_SIZE);
	assert_int_equal(fv_mem_init(&f->gm), 0);
	assert_int_equal(virtio_blk_init(&f->b, f->path, ro, &f->gm, 0xd0000000, 5), 0);
	assert_int_equal(f->b.capacity, NSECT);
	uint32_t s = fv_bring_up(&f->b.t, 1, BLK_QUEUE_SIZE, &f->q);
	assert_int_equal(s, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK |
				    VIRTIO_CONFIG_S_DRIVER_OK);
	*state = f;
	return 0;
}

static int setup_rw(void **state) { return setup(state, false); }
static int setup_ro(void **state) { return setup(state, true); }

static int teardown(void **state)
{
	struct fx *f = *state;
	virtio_blk_release(&f->b);
	guest_mem_release(&f->gm);
	unlink(f->path);
	rmdir(f->dir);
	free(f->shadow);
	free(f);
	return 0;
}

static uint8_t *gp(struct fx *f, uint64_t gpa, uint64_t len)
{
	uint8_t *p = fv_ptr(&f->gm, gpa, len);
	assert_non_null(p);
	return p;
}

/* The whole file equals the shadow, size included (the guest cannot grow it). */
static void assert_file_matches(struct fx *f)
{
	struct stat st;
	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(st.st_size, IMG_SIZE);
	uint8_t *buf = malloc(IMG_SIZE);
	assert_non_null(buf);
	int fd = open(f->path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, IMG_SIZE, 0), IMG_SIZE);
	close(fd);
	assert_memory_equal(buf, f->shadow, IMG_SIZE);
	free(buf);
}

static void put_hdr(struct fx *f, uint64_t gpa, uint32_t type, uint64_t sector)
{
	struct virtio_blk_outhdr h = { .type = type, .ioprio = 0, .sector = sector };
	memcpy(gp(f, gpa, sizeof(h)), &h, sizeof(h));
}

struct seg {
	uint64_t gpa;
	uint32_t len;
	bool w;    /* device-writable */
};

/* Make segs one chain at a head that moves from request to request (so a
 * wrong id in the used ring shows), kick, and return the used length after
 * checking that exactly this chain came back. */
static uint32_t run_chain(struct fx *f, const struct seg *s, unsigned n)
{
	uint16_t head = (uint16_t)((f->nreq++ * 37u) % (BLK_QUEUE_SIZE - n + 1));
	for (unsigned i = 0; i < n; i++)
		fv_desc(&f->gm, &f->q, (uint16_t)(head + i), s[i].gpa, s[i].len,
			(uint16_t)((s[i].w ? VRING_DESC_F_WRITE : 0) | (i + 1 < n ? VRING_DESC_F_NEXT : 0)),
			(uint16_t)(head + i + 1));
	fv_avail(&f->gm, &f->q, head);
	virtio_mmio_kick(&f->b.t, 0);
	uint32_t id, len;
	assert_true(fv_used(&f->gm, &f->q, &id, &len));
	assert_int_equal(id, head);
	assert_false(fv_used(&f->gm, &f->q, &id, &len));
	/* never a reason to stop the device */
	assert_false(f->b.t.status & VIRTIO_CONFIG_S_NEEDS_RESET);
	return len;
}

static uint8_t status(struct fx *f)
{
	return *gp(f, STATUS_GPA, 1);
}

/* header + one data descriptor (writable for reads) + a status descriptor. */
static uint8_t simple_req(struct fx *f, uint32_t type, uint64_t sector, uint32_t len, uint32_t *used)
{
	put_hdr(f, HDR_GPA, type, sector);
	*gp(f, STATUS_GPA, 1) = NO_STATUS;
	struct seg s[3] = {
		{ HDR_GPA, 16, false },
		{ DATA_GPA, len, type != VIRTIO_BLK_T_OUT },
		{ STATUS_GPA, 1, true },
	};
	if (len == 0) {
		s[1] = s[2];
		*used = run_chain(f, s, 2);
	} else {
		*used = run_chain(f, s, 3);
	}
	return status(f);
}

static void fill(struct fx *f, uint64_t gpa, uint64_t len)
{
	memset(gp(f, gpa, len), FILL, len);
}

static void assert_filled(struct fx *f, uint64_t gpa, uint64_t len)
{
	const uint8_t *p = gp(f, gpa, len);
	for (uint64_t i = 0; i < len; i++)
		if (p[i] != FILL)
			fail_msg("guest byte %#llx was written", (unsigned long long)(gpa + i));
}

/* ---- config space and features ------------------------------------------ */

static void config_space(void **state)
{
	struct fx *f = *state;
	struct virtio_mmio *t = &f->b.t;
	assert_int_equal(fv_read(t, VIRTIO_MMIO_MAGIC_VALUE), 0x74726976);
	assert_int_equal(fv_read(t, VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_BLOCK);
	fv_write(t, VIRTIO_MMIO_QUEUE_SEL, 0);
	assert_int_equal(fv_read(t, VIRTIO_MMIO_QUEUE_NUM_MAX), BLK_QUEUE_SIZE);
	/* capacity in 512-byte sectors, the partial tail left out */
	assert_int_equal(fv_read(t, VIRTIO_MMIO_CONFIG), IMG_SIZE / 512);
	assert_int_equal(fv_read(t, VIRTIO_MMIO_CONFIG), NSECT);
	assert_int_equal(fv_read(t, VIRTIO_MMIO_CONFIG + 4), 0);
	uint64_t cap = 0;
	virtio_mmio_read(t, VIRTIO_MMIO_CONFIG, (uint8_t *)&cap, 8);
	assert_int_equal(cap, NSECT);
	/* size_max not offered, seg_max is the queue less header and status */
	assert_int_equal(fv_read(t, VIRTIO_MMIO_CONFIG + offsetof(struct virtio_blk_config, size_max)), 0);
	assert_int_equal(fv_read(t, VIRTIO_MMIO_CONFIG + offsetof(struct virtio_blk_config, seg_max)), 254);
	assert_int_equal(BLK_SEG_MAX, 254);
	/* nothing past seg_max is offered */
	assert_int_equal(fv_read(t, VIRTIO_MMIO_CONFIG + 16), 0);
	assert_int_equal(fv_read(t, VIRTIO_MMIO_CONFIG + 20), 0);
}

static uint64_t device_features(struct virtio_mmio *t)
{
	fv_write(t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	uint64_t lo = fv_read(t, VIRTIO_MMIO_DEVICE_FEATURES);
	fv_write(t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	uint64_t hi = fv_read(t, VIRTIO_MMIO_DEVICE_FEATURES);
	return lo | hi << 32;
}

static void features_rw(void **state)
{
	struct fx *f = *state;
	uint64_t want = (1ull << VIRTIO_BLK_F_SEG_MAX) | (1ull << VIRTIO_BLK_F_FLUSH) | (1ull << VIRTIO_F_VERSION_1);
	assert_int_equal(device_features(&f->b.t), want);
	assert_int_equal(f->b.t.driver_features, want);
	assert_false(f->b.ro);
}

static void features_ro(void **state)
{
	struct fx *f = *state;
	uint64_t want = (1ull << VIRTIO_BLK_F_SEG_MAX) | (1ull << VIRTIO_BLK_F_FLUSH) | (1ull << VIRTIO_BLK_F_RO) |
			(1ull << VIRTIO_F_VERSION_1);
	assert_int_equal(device_features(&f->b.t), want);
	assert_int_equal(f->b.t.driver_features, want);
	assert_true(f->b.ro);
}

/* ---- reads --------------------------------------------------------------- */

static void read_single(void **state)
{
	struct fx *f = *state;
	const uint64_t sectors[] = { 0, 7, 255, 256, NSECT - 1 };
	for (unsigned i = 0; i < sizeof(sectors) / sizeof(sectors[0]); i++) {
		fill(f, DATA_GPA, 512);
		uint32_t used;
		assert_int_equal(simple_req(f, VIRTIO_BLK_T_IN, sectors[i], 512, &used), VIRTIO_BLK_S_OK);
		assert_int_equal(used, 513);   /* data + status */
		assert_memory_equal(gp(f, DATA_GPA, 512), f->shadow + sectors[i] * 512, 512);
	}
	assert_int_equal(f->b.requests, 5);
	assert_int_equal(f->b.errors, 0);
}

static void read_multi(void **state)
{
	struct fx *f = *state;
	/* four sectors into four descriptors that do not follow sector
	 * boundaries, scattered and out of address order */
	const uint64_t gpa[4] = { DATA_GPA + 0x8000, DATA_GPA, DATA_GPA + 0x3000, DATA_GPA + 0x1000 };
	const uint32_t len[4] = { 100, 412, 1024, 512 };
	for (unsigned i = 0; i < 4; i++)
		fill(f, gpa[i], len[i] + 16);
	put_hdr(f, HDR_GPA, VIRTIO_BLK_T_IN, 20);
	*gp(f, STATUS_GPA, 1) = NO_STATUS;
	struct seg s[6] = {
		{ HDR_GPA, 16, false }, { gpa[0], len[0], true }, { gpa[1], len[1], true },
		{ gpa[2], len[2], true }, { gpa[3], len[3], true }, { STATUS_GPA, 1, true },
	};
	assert_int_equal(run_chain(f, s, 6), 2048 + 1);
	assert_int_equal(status(f), VIRTIO_BLK_S_OK);
	const uint8_t *want = f->shadow + 20 * 512;
	for (unsigned i = 0; i < 4; i++) {
		assert_memory_equal(gp(f, gpa[i], len[i]), want, len[i]);
		assert_filled(f, gpa[i] + len[i], 16);   /* not a byte past each buffer */
		want += len[i];
	}
}

static void read_layouts(void **state)
{
	struct fx *f = *state;

	/* header split 5 + 11, possibly across a zero-length readable one */
	put_hdr(f, HDR_GPA, VIRTIO_BLK_T_IN, 3);
	fill(f, DATA_GPA, 512);
	*gp(f, STATUS_GPA, 1) = NO_STATUS;
	struct seg a[5] = {
		{ HDR_GPA, 5, false }, { HDR_GPA + 0x100, 0, false }, { HDR_GPA + 5, 11, false },
		{ DATA_GPA, 512, true }, { STATUS_GPA, 1, true },
	};
	assert_int_equal(run_chain(f, a, 5), 513);
	assert_int_equal(status(f), VIRTIO_BLK_S_OK);
	assert_memory_equal(gp(f, DATA_GPA, 512), f->shadow + 3 * 512, 512);

	/* data and status in one 1025-byte descriptor: the last byte is the
	 * status */
	put_hdr(f, HDR_GPA, VIRTIO_BLK_T_IN, 40);
	fill(f, DATA_GPA, 1026);
	struct seg b[2] = { { HDR_GPA, 16, false }, { DATA_GPA, 1025, true } };
	assert_int_equal(run_chain(f, b, 2), 1025);
	assert_memory_equal(gp(f, DATA_GPA, 1024), f->shadow + 40 * 512, 1024);
	assert_int_equal(*gp(f, DATA_GPA + 1024, 1), VIRTIO_BLK_S_OK);
	assert_int_equal(*gp(f, DATA_GPA + 1025, 1), FILL);

	/* 511 data bytes, then one data byte and the status together, with a
	 * zero-length writable descriptor between them */
	put_hdr(f, HDR_GPA, VIRTIO_BLK_T_IN, 41);
	fill(f, DATA_GPA, 0x2000);
	struct seg c[4] = {
		{ HDR_GPA, 16, false }, { DATA_GPA, 511, true }, { DATA_GPA + 0x1000, 0, true },
		{ DATA_GPA + 0x1800, 2, true },
	};
	assert_int_equal(run_chain(f, c, 4), 513);
	assert_memory_equal(gp(f, DATA_GPA, 511), f->shadow + 41 * 512, 511);
	assert_int_equal(*gp(f, DATA_GPA + 0x1800, 1), f->shadow[41 * 512 + 511]);
	assert_int_equal(*gp(f, DATA_GPA + 0x1801, 1), VIRTIO_BLK_S_OK);
	assert_int_equal(*gp(f, DATA_GPA + 511, 1), FILL);

	/* header and a readable payload a driver should not send with a read:
	 * ignored, the read still works */
	put_hdr(f, HDR_GPA, VIRTIO_BLK_T_IN, 42);
	fill(f, DATA_GPA, 512);
	*gp(f, STATUS_GPA, 1) = NO_STATUS;
	struct seg d[3] = { { HDR_GPA, 64, false }, { DATA_GPA, 512, true }, { STATUS_GPA, 1, true } };
	assert_int_equal(run_chain(f, d, 3), 513);
	assert_int_equal(status(f), VIRTIO_BLK_S_OK);
	assert_memory_equal(gp(f, DATA_GPA, 512), f->shadow + 42 * 512, 512);
}

/* seg_max data descriptors: the longest chain the queue holds. */
static void read_seg_max(void **state)
{
	struct fx *f = *state;
	static struct seg s[BLK_QUEUE_SIZE];
	put_hdr(f, HDR_GPA, VIRTIO_BLK_T_IN, 1);
	*gp(f, STATUS_GPA, 1) = NO_STATUS;
	s[0] = (struct seg){ HDR_GPA, 16, false };
	/* every other 1 KiB slot, so that the buffers are not contiguous */
	for (unsigned i = 0; i < BLK_SEG_MAX; i++) {
		s[1 + i] = (struct seg){ DATA_GPA + 1024ull * i, 512, true };
		fill(f, DATA_GPA + 1024ull * i, 1024);
	}
	s[1 + BLK_SEG_MAX] = (struct seg){ STATUS_GPA, 1, true };
	assert_int_equal(run_chain(f, s, BLK_QUEUE_SIZE), BLK_SEG_MAX * 512 + 1);
	assert_int_equal(status(f), VIRTIO_BLK_S_OK);
	for (unsigned i = 0; i < BLK_SEG_MAX; i++) {
		assert_memory_equal(gp(f, DATA_GPA + 1024ull * i, 512), f->shadow + (1 + i) * 512, 512);
		assert_filled(f, DATA_GPA + 1024ull * i + 512, 512);
	}
}

/* ---- writes -------------------------------------------------------------- */

static void write_readback(void **state)
{
	struct fx *f = *state;
	uint32_t used;
	int fd = open(f->path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	uint8_t back[1536];

	/* one sector, one data descriptor */
	uint8_t *d = gp(f, DATA_GPA, 512);
	for (unsigned i = 0; i < 512; i++)
		d[i] = (uint8_t)(i * 3 + 0x40);
	assert_int_equal(simple_req(f, VIRTIO_BLK_T_OUT, 10, 512, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(used, 1);   /* only the status is written */
	assert_int_equal(pread(fd, back, 512, 10 * 512), 512);
	assert_memory_equal(back, d, 512);
	memcpy(f->shadow + 10 * 512, d, 512);

	/* header and two sectors of data in one readable descriptor */
	uint8_t *hd = gp(f, DATA_GPA + 0x10000, 16 + 1024);
	put_hdr(f, DATA_GPA + 0x10000, VIRTIO_BLK_T_OUT, 30);
	for (unsigned i = 0; i < 1024; i++)
		hd[16 + i] = (uint8_t)(0xff - i);
	*gp(f, STATUS_GPA, 1) = NO_STATUS;
	struct seg a[2] = { { DATA_GPA + 0x10000, 16 + 1024, false }, { STATUS_GPA, 1, true } };
	assert_int_equal(run_chain(f, a, 2), 1);
	assert_int_equal(status(f), VIRTIO_BLK_S_OK);
	assert_int_equal(pread(fd, back, 1024, 30 * 512), 1024);
	assert_memory_equal(back, hd + 16, 1024);
	memcpy(f->shadow + 30 * 512, hd + 16, 1024);

	/* the last three sectors from three descriptors of odd sizes, with
	 * the status inside a larger writable descriptor */
	const uint64_t gpa[3] = { DATA_GPA + 0x20000, DATA_GPA + 0x21000, DATA_GPA + 0x22000 };
	const uint32_t len[3] = { 300, 724, 512 };
	uint8_t src[1536];
	for (unsigned i = 0; i < 1536; i++)
		src[i] = (uint8_t)(i * 11 + 5);
	memcpy(gp(f, gpa[0], len[0]), src, len[0]);
	memcpy(gp(f, gpa[1], len[1]), src + 300, len[1]);
	memcpy(gp(f, gpa[2], len[2]), src + 1024, len[2]);
	put_hdr(f, HDR_GPA, VIRTIO_BLK_T_OUT, NSECT - 3);
	fill(f, STATUS_GPA, 8);
	struct seg b[5] = {
		{ HDR_GPA, 16, false }, { gpa[0], len[0], false }, { gpa[1], len[1], false },
		{ gpa[2], len[2], false }, { STATUS_GPA, 8, true },
	};
	assert_int_equal(run_chain(f, b, 5), 1);
	/* the status goes in the last writable byte */
	assert_int_equal(*gp(f, STATUS_GPA + 7, 1), VIRTIO_BLK_S_OK);
	assert_filled(f, STATUS_GPA, 7);
	assert_int_equal(pread(fd, back, 1536, (NSECT - 3) * 512), 1536);
	assert_memory_equal(back, src, 1536);
	memcpy(f->shadow + (NSECT - 3) * 512, src, 1536);
	close(fd);

	/* the device reads back what it wrote; the file did not grow and its
	 * partial tail is untouched */
	fill(f, DATA_GPA, 512);
	assert_int_equal(simple_req(f, VIRTIO_BLK_T_IN, NSECT - 1, 512, &used), VIRTIO_BLK_S_OK);
	assert_memory_equal(gp(f, DATA_GPA, 512), src + 1024, 512);
	assert_file_matches(f);
	assert_int_equal(f->b.errors, 0);
}

static void write_ro_refused(void **state)
{
	struct fx *f = *state;
	uint32_t used;
	memset(gp(f, DATA_GPA, 1024), 0x77, 1024);
	assert_int_equal(simple_req(f, VIRTIO_BLK_T_OUT, 0, 512, &used), VIRTIO_BLK_S_IOERR);
	assert_int_equal(used, 1);
	assert_int_equal(simple_req(f, VIRTIO_BLK_T_OUT, 5, 1024, &used), VIRTIO_BLK_S_IOERR);
	assert_int_equal(used, 1);
	assert_int_equal(f->b.errors, 2);
	assert_file_matches(f);
	/* reads still work */
	fill(f, DATA_GPA, 512);
	assert_int_equal(simple_req(f, VIRTIO_BLK_T_IN, 5, 512, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(used, 513);
	assert_memory_equal(gp(f, DATA_GPA, 512), f->shadow + 5 * 512, 512);
}

/* A driver that does not accept VIRTIO_BLK_F_RO still cannot write. */
static void write_ro_driver_without_ro(void **state)
{
	struct fx *f = *state;
	struct virtio_mmio *t = &f->b.t;
	fv_write(t, VIRTIO_MMIO_STATUS, 0);
	fv_write(t, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	fv_write(t, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	for (uint32_t sel = 0; sel < 2; sel++) {
		fv_write(t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, sel);
		uint32_t feat = fv_read(t, VIRTIO_MMIO_DEVICE_FEATURES);
		if (sel == 0)
			feat &= ~(1u << VIRTIO_BLK_F_RO);
		fv_write(t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, sel);
		fv_write(t, VIRTIO_MMIO_DRIVER_FEATURES, feat);
	}
	uint32_t s = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK;
	fv_write(t, VIRTIO_MMIO_STATUS, s);
	fv_queue_setup(t, 0, BLK_QUEUE_SIZE, &f->q);
	fv_write(t, VIRTIO_MMIO_STATUS, s | VIRTIO_CONFIG_S_DRIVER_OK);
	assert_int_equal(fv_read(t, VIRTIO_MMIO_STATUS), s | VIRTIO_CONFIG_S_DRIVER_OK);
	assert_int_equal(t->driver_features & (1ull << VIRTIO_BLK_F_RO), 0);

	uint32_t used;
	memset(gp(f, DATA_GPA, 512), 0x77, 512);
	assert_int_equal(simple_req(f, VIRTIO_BLK_T_OUT, 1, 512, &used), VIRTIO_BLK_S_IOERR);
	assert_int_equal(used, 1);
	assert_file_matches(f);
}

/* ---- other requests ------------------------------------------------------ */

static void flush_ok(void **state)
{
	struct fx *f = *state;
	uint32_t used;
	assert_int_equal(simple_req(f, VIRTIO_BLK_T_FLUSH, 0, 0, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(used, 1);
	/* a flush with a data buffer (none is needed): untouched */
	fill(f, DATA_GPA, 512);
	assert_int_equal(simple_req(f, VIRTIO_BLK_T_FLUSH, 123, 512, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(used, 1);
	assert_filled(f, DATA_GPA, 512);
	assert_int_equal(f->b.errors, 0);
	assert_file_matches(f);
}

static void expected_id(struct fx *f, uint8_t id[VIRTIO_BLK_ID_BYTES])
{
	struct stat st;
	assert_int_equal(stat(f->path, &st), 0);
	char s[64];
	snprintf(s, sizeof(s), "vmrun%llx-%llx", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	memset(id, 0, VIRTIO_BLK_ID_BYTES);
	memcpy(id, s, strnlen(s, VIRTIO_BLK_ID_BYTES));
}

static void get_id(void **state)
{
	struct fx *f = *state;
	uint8_t want[VIRTIO_BLK_ID_BYTES];
	expected_id(f, want);
	uint32_t used;

	/* exactly 20 bytes of room */
	fill(f, DATA_GPA, 64);
	assert_int_equal(simple_req(f, VIRTIO_BLK_T_GET_ID, 0, 20, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(used, 21);
	assert_memory_equal(gp(f, DATA_GPA, 20), want, 20);
	assert_filled(f, DATA_GPA + 20, 44);

	/* more room: still 20 bytes, the rest untouched */
	fill(f, DATA_GPA, 64);
	assert_int_equal(simple_req(f, VIRTIO_BLK_T_GET_ID, 0, 40, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(used, 21);
	assert_memory_equal(gp(f, DATA_GPA, 20), want, 20);
	assert_filled(f, DATA_GPA + 20, 44);

	/* less room: as much as fits */
	fill(f, DATA_GPA, 64);
	assert_int_equal(simple_req(f, VIRTIO_BLK_T_GET_ID, 0, 5, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(used, 6);
	assert_memory_equal(gp(f, DATA_GPA, 5), want, 5);
	assert_filled(f, DATA_GPA + 5, 59);

	/* the id split over two descriptors */
	fill(f, DATA_GPA, 0x200);
	*gp(f, STATUS_GPA, 1) = NO_STATUS;
	put_hdr(f, HDR_GPA, VIRTIO_BLK_T_GET_ID, 0);
	struct seg s[4] = {
		{ HDR_GPA, 16, false }, { DATA_GPA, 7, true }, { DATA_GPA + 0x100, 50, true }, { STATUS_GPA, 1, true },
	};
	assert_int_equal(run_chain(f, s, 4), 21);
	assert_int_equal(status(f), VIRTIO_BLK_S_OK);
	assert_memory_equal(gp(f, DATA_GPA, 7), want, 7);
	assert_memory_equal(gp(f, DATA_GPA + 0x100, 13), want + 7, 13);
	assert_filled(f, DATA_GPA + 7, 0x100 - 7);
	assert_filled(f, DATA_GPA + 0x100 + 13, 37);

	/* no room at all: nothing but the status */
	assert_int_equal(simple_req(f, VIRTIO_BLK_T_GET_ID, 0, 0, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(used, 1);
}

static void unknown_type(void **state)
{
	struct fx *f = *state;
	const uint32_t types[] = { 2, 3, VIRTIO_BLK_T_DISCARD, VIRTIO_BLK_T_WRITE_ZEROES, VIRTIO_BLK_T_SECURE_ERASE,
				   99, VIRTIO_BLK_T_BARRIER, VIRTIO_BLK_T_BARRIER | VIRTIO_BLK_T_OUT, UINT32_MAX };
	unsigned n = sizeof(types) / sizeof(types[0]);
	for (unsigned i = 0; i < n; i++) {
		uint32_t used;
		fill(f, DATA_GPA, 512);
		assert_int_equal(simple_req(f, types[i], 0, 512, &used), VIRTIO_BLK_S_UNSUPP);
		assert_int_equal(used, 1);
		assert_filled(f, DATA_GPA, 512);
	}
	assert_int_equal(f->b.errors, n);
	assert_file_matches(f);
}

/* ---- requests refused ---------------------------------------------------- */

static void out_of_range(void **state)
{
	struct fx *f = *state;
	const struct {
		uint64_t sector;
		uint32_t len;
	} bad[] = {
		{ NSECT, 512 },                    /* the first sector past the end */
		{ NSECT - 1, 1024 },               /* one sector in, one past */
		{ NSECT - 2, 1536 },
		{ NSECT + 1, 512 },
		{ 1ull << 55, 512 },               /* sector * 512 wraps to byte 0 */
		{ (1ull << 55) + 1, 512 },         /* ... to byte 512 */
		{ UINT64_MAX, 512 },               /* sector + count wraps */
		{ UINT64_MAX - 1, 1024 },
		{ 0, 511 },                        /* not whole sectors */
		{ 0, 513 },
		{ 3, 1000 },
		{ 0, 1 },
		{ 0, 0 },                          /* no data at all */
		{ NSECT - 1, 0 },
	};
	unsigned n = sizeof(bad) / sizeof(bad[0]);
	for (unsigned i = 0; i < n; i++) {
		uint32_t used;
		fill(f, DATA_GPA, 2048);
		assert_int_equal(simple_req(f, VIRTIO_BLK_T_IN, bad[i].sector, bad[i].len, &used), VIRTIO_BLK_S_IOERR);
		assert_int_equal(used, 1);
		assert_filled(f, DATA_GPA, 2048);
		memset(gp(f, DATA_GPA, 2048), 0x3c, 2048);
		assert_int_equal(simple_req(f, VIRTIO_BLK_T_OUT, bad[i].sector, bad[i].len, &used),
				 VIRTIO_BLK_S_IOERR);
		assert_int_equal(used, 1);
	}
	assert_int_equal(f->b.errors, 2 * n);

	/* a zero-length data descriptor is no data either */
	put_hdr(f, HDR_GPA, VIRTIO_BLK_T_OUT, 0);
	*gp(f, STATUS_GPA, 1) = NO_STATUS;
	struct seg s[3] = { { HDR_GPA, 16, false }, { DATA_GPA, 0, false }, { STATUS_GPA, 1, true } };
	assert_int_equal(run_chain(f, s, 3), 1);
	assert_int_equal(status(f), VIRTIO_BLK_S_IOERR);
	assert_file_matches(f);

	/* the last whole sector is fine, and what is past it stays unreadable */
	uint32_t used;
	fill(f, DATA_GPA, 512);
	assert_int_equal(simple_req(f, VIRTIO_BLK_T_IN, NSECT - 1, 512, &used), VIRTIO_BLK_S_OK);
	assert_memory_equal(gp(f, DATA_GPA, 512), f->shadow + (NSECT - 1) * 512, 512);
}

/* A read of 4 GiB or more cannot report its length in the used ring (a
 * u32: data + status): refused with IOERR before any I/O, used length 1.
 * A sparse disk large enough for it, and 254 data descriptors of 17 MiB
 * that all point at the same guest buffer. */
static void read_4gib_refused(void **state)
{
	(void)state;
	const uint32_t seg = 17u << 20;
	const unsigned nseg = BLK_QUEUE_SIZE - 2;
	char dir[32], path[64];
	make_tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/big.img", dir);
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)(5ull << 30)), 0);
	close(fd);
	struct guest_mem gm;
	assert_int_equal(guest_mem_init(&gm, 32ull << 20, 0xc0000000ull, 0x100000000ull), 0);
	struct virtio_blk *b = calloc(1, sizeof(*b));
	assert_non_null(b);
	assert_int_equal(virtio_blk_init(b, path, true, &gm, 0xd0000000, 5), 0);
	struct fv_queue q;
	fv_bring_up(&b->t, 1, BLK_QUEUE_SIZE, &q);

	struct virtio_blk_outhdr h = { .type = VIRTIO_BLK_T_IN, .sector = 1 };
	memcpy(fv_ptr(&gm, HDR_GPA, sizeof(h)), &h, sizeof(h));
	memset(fv_ptr(&gm, DATA_GPA, seg), FILL, seg);
	*(uint8_t *)fv_ptr(&gm, STATUS_GPA, 1) = NO_STATUS;
	fv_desc(&gm, &q, 0, HDR_GPA, 16, VRING_DESC_F_NEXT, 1);
	for (unsigned i = 1; i <= nseg; i++)
		fv_desc(&gm, &q, (uint16_t)i, DATA_GPA, seg, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, (uint16_t)(i + 1));
	fv_desc(&gm, &q, (uint16_t)(nseg + 1), STATUS_GPA, 1, VRING_DESC_F_WRITE, 0);
	fv_avail(&gm, &q, 0);
	virtio_mmio_kick(&b->t, 0);
	uint32_t id, len;
	assert_true(fv_used(&gm, &q, &id, &len));
	assert_int_equal(id, 0);
	uint8_t st = *(uint8_t *)fv_ptr(&gm, STATUS_GPA, 1);
	if (st != VIRTIO_BLK_S_IOERR || len != 1)
		fail_msg("a read of %llu bytes: status %u, used length %u (want IOERR and 1)",
			 (unsigned long long)seg * nseg, st, len);
	const uint8_t *d = fv_ptr(&gm, DATA_GPA, seg);
	for (uint32_t i = 0; i < seg; i += 4096)
		assert_int_equal(d[i], FILL);   /* nothing was read */

	virtio_blk_release(b);
	free(b);
	guest_mem_release(&gm);
	unlink(path);
	rmdir(dir);
}

/* Without a writable byte there is nowhere to put a status: the chain comes
 * back with length 0 and the request is not carried out. */
static void no_status_byte(void **state)
{
	struct fx *f = *state;
	/* a valid write, but every descriptor readable */
	put_hdr(f, HDR_GPA, VIRTIO_BLK_T_OUT, 2);
	memset(gp(f, DATA_GPA, 512), 0x11, 512);
	struct seg w[2] = { { HDR_GPA, 16, false }, { DATA_GPA, 512, false } };
	assert_int_equal(run_chain(f, w, 2), 0);
	assert_file_matches(f);

	/* a read with a header only */
	put_hdr(f, HDR_GPA, VIRTIO_BLK_T_IN, 2);
	struct seg r[1] = { { HDR_GPA, 16, false } };
	assert_int_equal(run_chain(f, r, 1), 0);

	/* a flush and a get-id with a zero-length writable descriptor */
	put_hdr(f, HDR_GPA, VIRTIO_BLK_T_FLUSH, 0);
	struct seg fl[2] = { { HDR_GPA, 16, false }, { STATUS_GPA, 0, true } };
	*gp(f, STATUS_GPA, 1) = NO_STATUS;
	assert_int_equal(run_chain(f, fl, 2), 0);
	assert_int_equal(status(f), NO_STATUS);
	put_hdr(f, HDR_GPA, VIRTIO_BLK_T_GET_ID, 0);
	assert_int_equal(run_chain(f, fl, 2), 0);
	assert_int_equal(status(f), NO_STATUS);
	assert_file_matches(f);

	/* the device goes on working */
	uint32_t used;
	fill(f, DATA_GPA, 512);
	assert_int_equal(simple_req(f, VIRTIO_BLK_T_IN, 2, 512, &used), VIRTIO_BLK_S_OK);
	assert_int_equal(used, 513);
	assert_memory_equal(gp(f, DATA_GPA, 512), f->shadow + 2 * 512, 512);
}

static void short_header(void **state)
{
	struct fx *f = *state;
	put_hdr(f, HDR_GPA, VIRTIO_BLK_T_IN, 0);   /* a valid read, if all 16 bytes were there */

	const struct seg hdrs[][2] = {
		{ { HDR_GPA, 15, false }, { 0, 0, false } },
		{ { HDR_GPA, 8, false }, { HDR_GPA + 8, 7, false } },
		{ { HDR_GPA, 1, false }, { 0, 0, false } },
	};
	const unsigned nh[] = { 1, 2, 1 };
	for (unsigned i = 0; i < 3; i++) {
		struct seg s[4];
		unsigned n = 0;
		for (unsigned k = 0; k < nh[i]; k++)
			s[n++] = hdrs[i][k];
		s[n++] = (struct seg){ DATA_GPA, 512, true };
		s[n++] = (struct seg){ STATUS_GPA, 1, true };
		fill(f, DATA_GPA, 512);
		*gp(f, STATUS_GPA, 1) = NO_STATUS;
		assert_int_equal(run_chain(f, s, n), 1);
		assert_int_equal(status(f), VIRTIO_BLK_S_IOERR);
		assert_filled(f, DATA_GPA, 512);
	}

	/* no readable part at all */
	fill(f, DATA_GPA, 512);
	*gp(f, STATUS_GPA, 1) = NO_STATUS;
	struct seg s[2] = { { DATA_GPA, 512, true }, { STATUS_GPA, 1, true } };
	assert_int_equal(run_chain(f, s, 2), 1);
	assert_int_equal(status(f), VIRTIO_BLK_S_IOERR);
	assert_filled(f, DATA_GPA, 512);
	assert_int_equal(f->b.errors, 4);
}

/* ---- blk_parse ------------------------------------------------------------ */

static struct vq_chain pc;
static struct blk_req pr;

static void chain_reset(void)
{
	memset(&pc, 0, sizeof(pc));
	memset(&pr, 0x5a, sizeof(pr));
}

static void chain_out(void *p, size_t len)
{
	pc.out[pc.nout++] = (struct iovec){ p, len };
	pc.out_len += len;
}

static void chain_in(void *p, size_t len)
{
	pc.in[pc.nin++] = (struct iovec){ p, len };
	pc.in_len += len;
}

static void hdr_at(uint8_t *p, uint32_t type, uint64_t sector)
{
	struct virtio_blk_outhdr h = { .type = type, .ioprio = 0, .sector = sector };
	memcpy(p, &h, sizeof(h));
}

static void parse_read(void **state)
{
	(void)state;
	uint8_t hdr[16], data[1025], data2[600];
	memset(data, 0x66, sizeof(data));

	chain_reset();
	hdr_at(hdr, VIRTIO_BLK_T_IN, 3);
	chain_out(hdr, 16);
	chain_in(data, 1025);   /* two sectors and the status */
	assert_int_equal(blk_parse(&pc, 10, false, &pr), VIRTIO_BLK_S_OK);
	assert_int_equal(pr.type, VIRTIO_BLK_T_IN);
	assert_int_equal(pr.offset, 3 * 512);
	assert_int_equal(pr.len, 1024);
	assert_int_equal(pr.niov, 1);
	assert_ptr_equal(pr.iov[0].iov_base, data);
	assert_int_equal(pr.iov[0].iov_len, 1024);
	assert_true(pr.has_status);
	/* pure: the buffers are untouched; a read of an ro disk is fine */
	for (unsigned i = 0; i < sizeof(data); i++)
		assert_int_equal(data[i], 0x66);
	assert_int_equal(blk_parse(&pc, 10, true, &pr), VIRTIO_BLK_S_OK);

	/* data over two buffers, the status at the end of the second */
	chain_reset();
	hdr_at(hdr, VIRTIO_BLK_T_IN, 8);
	chain_out(hdr, 16);
	chain_in(data, 600);
	chain_in(data2, 425);
	assert_int_equal(blk_parse(&pc, 10, false, &pr), VIRTIO_BLK_S_OK);
	assert_int_equal(pr.len, 1024);
	assert_int_equal(pr.offset, 8 * 512);
	assert_int_equal(pr.niov, 2);
	assert_ptr_equal(pr.iov[0].iov_base, data);
	assert_int_equal(pr.iov[0].iov_len, 600);
	assert_ptr_equal(pr.iov[1].iov_base, data2);
	assert_int_equal(pr.iov[1].iov_len, 424);
	/* one sector further would end past a 10-sector disk */
	hdr_at(hdr, VIRTIO_BLK_T_IN, 9);
	assert_int_equal(blk_parse(&pc, 10, false, &pr), VIRTIO_BLK_S_IOERR);
	assert_int_equal(blk_parse(&pc, 11, false, &pr), VIRTIO_BLK_S_OK);
	assert_int_equal(blk_parse(&pc, 0, false, &pr), VIRTIO_BLK_S_IOERR);

	/* the largest disk a file can be: no wrap in the byte offset */
	hdr_at(hdr, VIRTIO_BLK_T_IN, (1ull << 54) - 2);
	assert_int_equal(blk_parse(&pc, 1ull << 54, false, &pr), VIRTIO_BLK_S_OK);
	assert_int_equal(pr.offset, (1ull << 63) - 1024);
	hdr_at(hdr, VIRTIO_BLK_T_IN, (1ull << 54) - 1);
	assert_int_equal(blk_parse(&pc, 1ull << 54, false, &pr), VIRTIO_BLK_S_IOERR);
	hdr_at(hdr, VIRTIO_BLK_T_IN, UINT64_MAX);
	assert_int_equal(blk_parse(&pc, 1ull << 54, false, &pr), VIRTIO_BLK_S_IOERR);
}

/* A read's data and status byte must fit the used ring's u32 length: the
 * largest is 4 GiB - 512 bytes of data. Lengths only: blk_parse never
 * touches the buffers. */
static void parse_read_used_length(void **state)
{
	(void)state;
	uint8_t hdr[16], buf[1];
	const uint64_t cap = 1ull << 40;
	const struct { uint64_t data; uint8_t want; } cases[] = {
		{ (4ull << 30) - 512, VIRTIO_BLK_S_OK },
		{ 4ull << 30, VIRTIO_BLK_S_IOERR },
		{ (4ull << 30) + 512, VIRTIO_BLK_S_IOERR },
		{ 1ull << 36, VIRTIO_BLK_S_IOERR },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		chain_reset();
		hdr_at(hdr, VIRTIO_BLK_T_IN, 0);
		chain_out(hdr, 16);
		chain_in(buf, cases[i].data);   /* the status byte is the last */
		chain_in(buf, 1);
		uint8_t got = blk_parse(&pc, cap, false, &pr);
		if (got != cases[i].want)
			fail_msg("a read of %llu bytes: status %u, want %u", (unsigned long long)cases[i].data, got,
				 cases[i].want);
	}
	/* a write's used length is its status byte alone: no such limit */
	chain_reset();
	hdr_at(hdr, VIRTIO_BLK_T_OUT, 0);
	chain_out(hdr, 16);
	chain_out(buf, 4ull << 30);
	chain_in(buf, 1);
	assert_int_equal(blk_parse(&pc, cap, false, &pr), VIRTIO_BLK_S_OK);
	assert_int_equal(pr.len, 4ull << 30);
}

static void parse_write(void **state)
{
	(void)state;
	uint8_t buf[16 + 512], more[512], st[1];

	/* header and data in one buffer */
	chain_reset();
	hdr_at(buf, VIRTIO_BLK_T_OUT, 4);
	chain_out(buf, sizeof(buf));
	chain_out(more, 512);
	chain_in(st, 1);
	assert_int_equal(blk_parse(&pc, 10, false, &pr), VIRTIO_BLK_S_OK);
	assert_int_equal(pr.type, VIRTIO_BLK_T_OUT);
	assert_int_equal(pr.offset, 4 * 512);
	assert_int_equal(pr.len, 1024);
	assert_int_equal(pr.niov, 2);
	assert_ptr_equal(pr.iov[0].iov_base, buf + 16);
	assert_int_equal(pr.iov[0].iov_len, 512);
	assert_ptr_equal(pr.iov[1].iov_base, more);
	assert_int_equal(pr.iov[1].iov_len, 512);
	assert_true(pr.has_status);

	/* an ro disk refuses, whatever else is right */
	assert_int_equal(blk_parse(&pc, 10, true, &pr), VIRTIO_BLK_S_IOERR);
	assert_true(pr.has_status);

	/* no status byte: refused, and said so */
	chain_reset();
	chain_out(buf, sizeof(buf));
	assert_int_equal(blk_parse(&pc, 10, false, &pr), VIRTIO_BLK_S_IOERR);
	assert_false(pr.has_status);

	/* header only: zero data */
	chain_reset();
	chain_out(buf, 16);
	chain_in(st, 1);
	assert_int_equal(blk_parse(&pc, 10, false, &pr), VIRTIO_BLK_S_IOERR);
	/* half a sector */
	chain_reset();
	chain_out(buf, 16 + 256);
	chain_in(st, 1);
	assert_int_equal(blk_parse(&pc, 10, false, &pr), VIRTIO_BLK_S_IOERR);
}

static void parse_other(void **state)
{
	(void)state;
	uint8_t hdr[16], id[64], st[1];

	chain_reset();
	hdr_at(hdr, VIRTIO_BLK_T_FLUSH, 77);
	chain_out(hdr, 16);
	chain_in(st, 1);
	assert_int_equal(blk_parse(&pc, 10, false, &pr), VIRTIO_BLK_S_OK);
	assert_int_equal(pr.type, VIRTIO_BLK_T_FLUSH);
	assert_int_equal(pr.len, 0);
	assert_int_equal(pr.niov, 0);
	assert_int_equal(blk_parse(&pc, 10, true, &pr), VIRTIO_BLK_S_OK);

	chain_reset();
	hdr_at(hdr, VIRTIO_BLK_T_GET_ID, 0);
	chain_out(hdr, 16);
	chain_in(id, 64);
	assert_int_equal(blk_parse(&pc, 10, false, &pr), VIRTIO_BLK_S_OK);
	assert_int_equal(pr.type, VIRTIO_BLK_T_GET_ID);
	assert_int_equal(pr.len, VIRTIO_BLK_ID_BYTES);
	chain_reset();
	chain_out(hdr, 16);
	chain_in(id, 8);
	assert_int_equal(blk_parse(&pc, 10, false, &pr), VIRTIO_BLK_S_OK);
	assert_int_equal(pr.len, 7);

	chain_reset();
	hdr_at(hdr, VIRTIO_BLK_T_DISCARD, 0);
	chain_out(hdr, 16);
	chain_in(id, 64);
	assert_int_equal(blk_parse(&pc, 10, false, &pr), VIRTIO_BLK_S_UNSUPP);
	assert_true(pr.has_status);

	/* a 15-byte header */
	chain_reset();
	hdr_at(hdr, VIRTIO_BLK_T_FLUSH, 0);
	chain_out(hdr, 15);
	chain_in(st, 1);
	assert_int_equal(blk_parse(&pc, 10, false, &pr), VIRTIO_BLK_S_IOERR);
	assert_true(pr.has_status);
	/* ... but 16 bytes over two buffers is a header */
	chain_out(hdr + 15, 1);
	assert_int_equal(blk_parse(&pc, 10, false, &pr), VIRTIO_BLK_S_OK);
}

/* ---- init ------------------------------------------------------------------ */

static void init_refused(void **state)
{
	(void)state;
	char dir[32], p[96];
	make_tmpdir(dir, sizeof(dir));
	struct guest_mem gm;
	assert_int_equal(fv_mem_init(&gm), 0);
	static struct virtio_blk b;
	static uint8_t img[1024];

	/* missing */
	snprintf(p, sizeof(p), "%s/none.img", dir);
	for (int ro = 0; ro < 2; ro++) {
		assert_int_equal(virtio_blk_init(&b, p, ro, &gm, 0xd0000000, 5), -1);
		assert_int_equal(b.fd, -1);
	}
	/* a directory */
	for (int ro = 0; ro < 2; ro++) {
		assert_int_equal(virtio_blk_init(&b, dir, ro, &gm, 0xd0000000, 5), -1);
		assert_int_equal(b.fd, -1);
	}
	/* a symlink to a good image */
	char good[96], link[96];
	snprintf(good, sizeof(good), "%s/good.img", dir);
	snprintf(link, sizeof(link), "%s/link.img", dir);
	write_file(good, img, 1024);
	assert_int_equal(symlink(good, link), 0);
	for (int ro = 0; ro < 2; ro++) {
		assert_int_equal(virtio_blk_init(&b, link, ro, &gm, 0xd0000000, 5), -1);
		assert_int_equal(b.fd, -1);
	}
	/* the image itself is fine */
	assert_int_equal(virtio_blk_init(&b, good, false, &gm, 0xd0000000, 5), 0);
	assert_int_equal(b.capacity, 2);
	virtio_blk_release(&b);
	assert_int_equal(b.fd, -1);

	/* shorter than a sector, and empty */
	char small[96], empty[96], one[96];
	snprintf(small, sizeof(small), "%s/small.img", dir);
	snprintf(empty, sizeof(empty), "%s/empty.img", dir);
	snprintf(one, sizeof(one), "%s/one.img", dir);
	write_file(small, img, 511);
	write_file(empty, img, 0);
	write_file(one, img, 512);
	for (int ro = 0; ro < 2; ro++) {
		assert_int_equal(virtio_blk_init(&b, small, ro, &gm, 0xd0000000, 5), -1);
		assert_int_equal(b.fd, -1);
		assert_int_equal(virtio_blk_init(&b, empty, ro, &gm, 0xd0000000, 5), -1);
		assert_int_equal(b.fd, -1);
	}
	/* exactly one sector is a disk */
	assert_int_equal(virtio_blk_init(&b, one, true, &gm, 0xd0000000, 5), 0);
	assert_int_equal(b.capacity, 1);
	virtio_blk_release(&b);

	unlink(link);
	unlink(good);
	unlink(small);
	unlink(empty);
	unlink(one);
	assert_int_equal(rmdir(dir), 0);
	guest_mem_release(&gm);
}

/* virtio_blk.h: release is "safe after a failed init". It must then close
 * nothing it did not open, here fd 0 (stdin), which the failed init's
 * zeroed transport holds as its eventfds. */
static void release_after_failed_init(void **state)
{
	(void)state;
	int saved = dup(0);
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(null >= 0);
	assert_int_equal(dup2(null, 0), 0);
	close(null);

	static struct virtio_blk b;
	struct guest_mem gm;
	assert_int_equal(fv_mem_init(&gm), 0);
	assert_int_equal(virtio_blk_init(&b, "/nonexistent/vmrun-test.img", false, &gm, 0xd0000000, 5), -1);
	virtio_blk_release(&b);
	int still_open = fcntl(0, F_GETFD) != -1;
	guest_mem_release(&gm);

	/* put stdin back before judging */
	if (saved >= 0) {
		dup2(saved, 0);
		close(saved);
	}
	assert_true(still_open);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(config_space, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(features_rw, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(features_ro, setup_ro, teardown),
		cmocka_unit_test_setup_teardown(read_single, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(read_multi, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(read_layouts, setup_ro, teardown),
		cmocka_unit_test_setup_teardown(read_seg_max, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(write_readback, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(write_ro_refused, setup_ro, teardown),
		cmocka_unit_test_setup_teardown(write_ro_driver_without_ro, setup_ro, teardown),
		cmocka_unit_test_setup_teardown(flush_ok, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(get_id, setup_ro, teardown),
		cmocka_unit_test_setup_teardown(unknown_type, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(out_of_range, setup_rw, teardown),
		cmocka_unit_test(read_4gib_refused),
		cmocka_unit_test_setup_teardown(no_status_byte, setup_rw, teardown),
		cmocka_unit_test_setup_teardown(short_header, setup_rw, teardown),
		cmocka_unit_test(parse_read),
		cmocka_unit_test(parse_read_used_length),
		cmocka_unit_test(parse_write),
		cmocka_unit_test(parse_other),
		cmocka_unit_test(init_refused),
		cmocka_unit_test(release_after_failed_init),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
