/* ringattack: what a compromised guest kernel could do to the host through
 * the virtio rings, done from guest root (the evaluation's test image: the
 * guest-root agent, a kernel with /dev/mem). It takes a device away from
 * its kernel driver (unbinding its virtio-mmio platform device), then
 * drives the device itself: its registers through /dev/mem, its rings in
 * this process's own locked pages, whose guest-physical addresses
 * /proc/self/pagemap gives.
 *
 *   ringattack rng      malformed queues and descriptor chains at virtio-rng,
 *                       then one valid request (does the device recover?)
 *   ringattack blk-ro   requests the guest kernel would never send to the
 *                       read-only root disk (vda): writes, out-of-range
 *                       sectors, bad chains; then a read of sector 0
 *
 * One line per attempt, "ra CASE key=value...", for the evaluation's judge;
 * then "ra done N". Exits 0 when every attempt was made, 1 when the setup
 * failed (the line says why). */
#include <errno.h>
#include <fcntl.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PAGE       4096u
#define QSIZE      8u
#define POLL_MS    300
#define MAX_DEVS   16
#define GUARD      0xa5
#define ATTACK_TAG "VMRUN-RINGATTACK"

struct page {
	uint8_t *va;
	uint64_t gpa;
};

/* One virtio-mmio window, from the kernel command line. */
struct dev {
	uint64_t base;
	unsigned index;       /* its platform device is virtio-mmio.<index> */
	uint32_t id;
	volatile uint32_t *reg;
};

/* A queue of our own: each part in its own page. */
struct ring {
	struct page desc, avail, used;
	uint16_t avail_idx, used_seen;
};

struct attack {
	int mem_fd, pagemap_fd;
	struct dev devs[MAX_DEVS];
	unsigned ndevs;
	struct ring q;
	struct page data[4];
	unsigned attempts;
};

static int fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("ra setup-failed ");
	vprintf(fmt, ap);
	printf(": %s\n", strerror(errno));
	va_end(ap);
	return 1;
}

static void barrier(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static uint32_t rd(const struct dev *d, unsigned off)
{
	return d->reg[off / 4];
}

static void wr(const struct dev *d, unsigned off, uint32_t v)
{
	barrier();
	d->reg[off / 4] = v;
	barrier();
}

/* ---- memory ---------------------------------------------------------------- */

/* A locked page of our own and its guest-physical address. */
static int page_get(struct attack *a, struct page *p)
{
	p->va = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_LOCKED | MAP_POPULATE, -1, 0);
	if (p->va == MAP_FAILED)
		return -1;
	memset(p->va, 0, PAGE);
	uint64_t e;
	if (pread(a->pagemap_fd, &e, sizeof(e), (off_t)((uintptr_t)p->va / PAGE * 8)) != sizeof(e))
		return -1;
	uint64_t pfn = e & ((1ull << 55) - 1);
	if (!(e >> 63) || !pfn) {
		errno = EPERM;   /* not present, or the PFN hidden: not root */
		return -1;
	}
	p->gpa = pfn * PAGE;
	return 0;
}

/* ---- devices --------------------------------------------------------------- */

/* The windows vmm gave the kernel: virtio_mmio.device=4K@0xBASE:IRQ. */
static int find_devices(struct attack *a)
{
	FILE *f = fopen("/proc/cmdline", "re");
	char line[4096];
	if (!f || !fgets(line, sizeof(line), f)) {
		if (f)
			fclose(f);
		return fail("/proc/cmdline");
	}
	fclose(f);
	for (char *p = line; (p = strstr(p, "virtio_mmio.device=")) && a->ndevs < MAX_DEVS; p++) {
		unsigned long long base;
		if (sscanf(p, "virtio_mmio.device=4K@%llx", &base) != 1)
			continue;
		struct dev *d = &a->devs[a->ndevs];
		void *m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, a->mem_fd, (off_t)base);
		if (m == MAP_FAILED)
			return fail("mmap /dev/mem at 0x%llx", base);
		d->reg = m;
		d->base = base;
		d->index = a->ndevs++;
		d->id = rd(d, VIRTIO_MMIO_MAGIC_VALUE) == 0x74726976 ? rd(d, VIRTIO_MMIO_DEVICE_ID) : 0;
	}
	return 0;
}

static struct dev *first_of(struct attack *a, uint32_t id)
{
	for (unsigned i = 0; i < a->ndevs; i++)
		if (a->devs[i].id == id)
			return &a->devs[i];
	return NULL;
}

/* Take the device from its kernel driver: unbind virtio-mmio.<index>.
 * The agent mounts /sys read-only, and a second sysfs mount shares that
 * superblock, so guest root remounts it writable. */
static int unbind(const struct dev *d)
{
	if (mount("sysfs", "/sys", "sysfs", MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return fail("remount /sys writable");
	int fd = open("/sys/bus/platform/drivers/virtio-mmio/unbind", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return fail("open virtio-mmio's unbind");
	char name[32];
	int n = snprintf(name, sizeof(name), "virtio-mmio.%u", d->index);
	int r = write(fd, name, (size_t)n) == n ? 0 : fail("unbind %s", name);
	close(fd);
	return r;
}

/* Reset, negotiate VERSION_1 only (whatever else is offered, F_RO
 * included), and give queue 0 our ring of num entries at the given
 * addresses; then DRIVER_OK. Returns the status read back. */
static uint32_t setup_at(const struct dev *d, uint32_t num, uint64_t desc, uint64_t avail, uint64_t used)
{
	wr(d, VIRTIO_MMIO_STATUS, 0);
	wr(d, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	wr(d, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	wr(d, VIRTIO_MMIO_DRIVER_FEATURES, 0);
	wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	wr(d, VIRTIO_MMIO_DRIVER_FEATURES, 1u << (VIRTIO_F_VERSION_1 - 32));
	uint32_t s = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK;
	wr(d, VIRTIO_MMIO_STATUS, s);
	wr(d, VIRTIO_MMIO_QUEUE_SEL, 0);
	wr(d, VIRTIO_MMIO_QUEUE_NUM, num);
	wr(d, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)desc);
	wr(d, VIRTIO_MMIO_QUEUE_DESC_HIGH, (uint32_t)(desc >> 32));
	wr(d, VIRTIO_MMIO_QUEUE_AVAIL_LOW, (uint32_t)avail);
	wr(d, VIRTIO_MMIO_QUEUE_AVAIL_HIGH, (uint32_t)(avail >> 32));
	wr(d, VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)used);
	wr(d, VIRTIO_MMIO_QUEUE_USED_HIGH, (uint32_t)(used >> 32));
	wr(d, VIRTIO_MMIO_QUEUE_READY, 1);
	wr(d, VIRTIO_MMIO_STATUS, s | VIRTIO_CONFIG_S_DRIVER_OK);
	return rd(d, VIRTIO_MMIO_STATUS);
}

/* Our own ring, emptied, on a fresh device. */
static uint32_t setup(struct attack *a, const struct dev *d)
{
	struct ring *q = &a->q;
	memset(q->desc.va, 0, PAGE);
	memset(q->avail.va, 0, PAGE);
	memset(q->used.va, 0, PAGE);
	q->avail_idx = q->used_seen = 0;
	for (unsigned i = 0; i < 4; i++)
		memset(a->data[i].va, GUARD, PAGE);
	return setup_at(d, QSIZE, q->desc.gpa, q->avail.gpa, q->used.gpa);
}

static struct vring_desc *desc(struct attack *a, unsigned i)
{
	return (struct vring_desc *)a->q.desc.va + i;
}

static void set_desc(struct attack *a, unsigned i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	*desc(a, i) = (struct vring_desc){ .addr = addr, .len = len, .flags = flags, .next = next };
}

/* What the device did with a submission. */
struct answer {
	int used;          /* 1: a used entry came back */
	uint32_t len;      /* its length */
	uint32_t status;   /* device status afterwards */
};

/* Offer head (avail.idx moved by step, normally 1), notify, and wait for
 * the used ring to move. */
static struct answer submit_step(struct attack *a, const struct dev *d, uint16_t head, uint16_t step)
{
	struct ring *q = &a->q;
	volatile struct vring_avail *av = (void *)q->avail.va;
	volatile struct vring_used *us = (void *)q->used.va;
	av->ring[q->avail_idx % QSIZE] = head;
	q->avail_idx = (uint16_t)(q->avail_idx + step);
	barrier();
	av->idx = q->avail_idx;
	wr(d, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	struct answer r = { 0 };
	for (int ms = 0; ms < POLL_MS; ms++) {
		barrier();
		if (us->idx != q->used_seen) {
			r.used = 1;
			r.len = us->ring[q->used_seen % QSIZE].len;
			q->used_seen++;
			break;
		}
		usleep(1000);
	}
	r.status = rd(d, VIRTIO_MMIO_STATUS);
	wr(d, VIRTIO_MMIO_INTERRUPT_ACK, rd(d, VIRTIO_MMIO_INTERRUPT_STATUS));
	return r;
}

static struct answer submit(struct attack *a, const struct dev *d, uint16_t head)
{
	return submit_step(a, d, head, 1);
}

/* Whether our data pages past the first want bytes of data[0] are as
 * filled (the device wrote nowhere it was not given). */
static int guards_intact(const struct attack *a, size_t want)
{
	for (unsigned i = 0; i < 4; i++)
		for (size_t k = i ? 0 : want; k < PAGE; k++)
			if (a->data[i].va[k] != GUARD)
				return 0;
	return 1;
}

static void report(struct attack *a, const char *name, struct answer r, size_t given)
{
	a->attempts++;
	printf("ra %s used=%d len=%u needs_reset=%d guards=%s\n", name, r.used, r.len,
	       !!(r.status & VIRTIO_CONFIG_S_NEEDS_RESET), guards_intact(a, given) ? "intact" : "written");
}

/* ---- rng ------------------------------------------------------------------- */

/* A queue set up where the device must refuse it: DRIVER_OK must leave it
 * needing a reset. */
static void bad_queue(struct attack *a, const struct dev *d, const char *name, uint32_t num, uint64_t desc_gpa)
{
	struct ring *q = &a->q;
	uint32_t s = setup_at(d, num, desc_gpa, q->avail.gpa, q->used.gpa);
	a->attempts++;
	printf("ra %s needs_reset=%d\n", name, !!(s & VIRTIO_CONFIG_S_NEEDS_RESET));
}

static int attack_rng(struct attack *a)
{
	struct dev *d = first_of(a, VIRTIO_ID_RNG);
	if (!d) {
		errno = ENODEV;
		return fail("no virtio-rng window");
	}
	if (unbind(d))
		return 1;
	wr(d, VIRTIO_MMIO_QUEUE_SEL, 0);
	uint32_t max = rd(d, VIRTIO_MMIO_QUEUE_NUM_MAX);
	bad_queue(a, d, "queue_size_not_pow2", 3, a->q.desc.gpa);
	bad_queue(a, d, "queue_size_over_max", max * 2, a->q.desc.gpa);
	bad_queue(a, d, "queue_size_zero", 0, a->q.desc.gpa);
	bad_queue(a, d, "ring_outside_ram", QSIZE, 0xfffff000ull);
	bad_queue(a, d, "ring_misaligned", QSIZE, a->q.desc.gpa + 1);
	bad_queue(a, d, "ring_past_4g_end", QSIZE, 0xfffffffffffff000ull);

	struct page *b = &a->data[0];
	setup(a, d);
	set_desc(a, 0, 0x7ff000000000ull, 64, VRING_DESC_F_WRITE, 0);
	report(a, "desc_outside_ram", submit(a, d, 0), 0);
	setup(a, d);
	set_desc(a, 0, 0xffffffffffffff00ull, 0x200, VRING_DESC_F_WRITE, 0);
	report(a, "desc_wraps_address_space", submit(a, d, 0), 0);
	setup(a, d);
	set_desc(a, 0, b->gpa, 0xffffffffu, VRING_DESC_F_WRITE, 0);
	report(a, "desc_len_4g", submit(a, d, 0), 0);
	setup(a, d);
	set_desc(a, 0, b->gpa, 64, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
	set_desc(a, 1, b->gpa + 64, 64, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 0);
	report(a, "desc_loop", submit(a, d, 0), 0);
	setup(a, d);
	set_desc(a, 0, b->gpa, 64, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1000);
	report(a, "desc_next_out_of_range", submit(a, d, 0), 0);
	setup(a, d);
	set_desc(a, 0, a->q.desc.gpa, 16, VRING_DESC_F_INDIRECT, 0);
	report(a, "desc_indirect_self", submit(a, d, 0), 0);
	setup(a, d);
	set_desc(a, 0, b->gpa, 64, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
	set_desc(a, 1, b->gpa + 64, 64, VRING_DESC_F_NEXT, 2);   /* readable after writable */
	set_desc(a, 2, b->gpa + 128, 64, VRING_DESC_F_WRITE, 0);
	report(a, "desc_readable_after_writable", submit(a, d, 0), 0);
	setup(a, d);
	set_desc(a, 0, b->gpa, 64, VRING_DESC_F_WRITE, 0);
	report(a, "head_out_of_range", submit(a, d, 0xffff), 0);
	setup(a, d);
	set_desc(a, 0, b->gpa, 64, VRING_DESC_F_WRITE, 0);
	report(a, "avail_idx_jump", submit_step(a, d, 0, 1000), 0);

	/* Registers: sub-word and unaligned writes, read-only and unknown
	 * offsets, status steps out of order. All are ignored. */
	setup(a, d);
	volatile uint8_t *r8 = (volatile uint8_t *)d->reg;
	r8[VIRTIO_MMIO_QUEUE_NOTIFY] = 0;
	r8[VIRTIO_MMIO_STATUS + 1] = 0xff;
	wr(d, VIRTIO_MMIO_MAGIC_VALUE, 0);
	wr(d, 0x0fc, 0xffffffffu);
	wr(d, VIRTIO_MMIO_QUEUE_SEL, 0xffffffffu);
	wr(d, VIRTIO_MMIO_QUEUE_NOTIFY, 0xffffu);
	wr(d, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	wr(d, VIRTIO_MMIO_QUEUE_SEL, 0);
	set_desc(a, 0, b->gpa, 64, VRING_DESC_F_WRITE, 0);
	report(a, "register_garbage_then_request", submit(a, d, 0), 64);

	/* After all that, a reset and a valid request: the device still works. */
	setup(a, d);
	set_desc(a, 0, b->gpa, 64, VRING_DESC_F_WRITE, 0);
	report(a, "valid_after_reset", submit(a, d, 0), 64);
	return 0;
}

/* ---- blk ------------------------------------------------------------------- */

struct blk_out {
	struct answer a;
	int status;   /* the request's status byte, -1 if the device left it */
};

/* One request: header (type, sector), then len bytes in data[1] (device-
 * writable for reads), then a status byte at the end of data[0]. */
static struct blk_out blk_request(struct attack *a, const struct dev *d, uint32_t type, uint64_t sector, uint32_t len,
				  int status_readonly)
{
	struct virtio_blk_outhdr *h = (void *)a->data[0].va;
	*h = (struct virtio_blk_outhdr){ .type = type, .sector = sector };
	uint8_t *st = a->data[0].va + PAGE - 1;
	*st = 0xff;
	uint16_t n = 0;
	set_desc(a, n, a->data[0].gpa, sizeof(*h), VRING_DESC_F_NEXT, (uint16_t)(n + 1));
	n++;
	if (len) {
		uint16_t w = type == VIRTIO_BLK_T_IN ? VRING_DESC_F_WRITE : 0;
		set_desc(a, n, a->data[1].gpa, len, w | VRING_DESC_F_NEXT, (uint16_t)(n + 1));
		n++;
	}
	set_desc(a, n, a->data[0].gpa + PAGE - 1, 1, status_readonly ? 0 : VRING_DESC_F_WRITE, 0);
	struct blk_out o = { .a = submit(a, d, 0) };
	o.status = *st == 0xff ? -1 : *st;
	return o;
}

static void blk_report(struct attack *a, const char *name, struct blk_out o)
{
	a->attempts++;
	printf("ra %s used=%d status=%d needs_reset=%d\n", name, o.a.used, o.status,
	       !!(o.a.status & VIRTIO_CONFIG_S_NEEDS_RESET));
}

static int attack_blk_ro(struct attack *a)
{
	struct dev *d = first_of(a, VIRTIO_ID_BLOCK);   /* vda: the root image */
	if (!d) {
		errno = ENODEV;
		return fail("no virtio-blk window");
	}
	wr(d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	uint32_t ro = !!(rd(d, VIRTIO_MMIO_DEVICE_FEATURES) & (1u << VIRTIO_BLK_F_RO));
	uint64_t capacity = rd(d, VIRTIO_MMIO_CONFIG) | (uint64_t)rd(d, VIRTIO_MMIO_CONFIG + 4) << 32;
	printf("ra vda offers_ro=%u capacity=%llu\n", ro, (unsigned long long)capacity);
	/* Without its disk, the guest reads nothing more from the root: what we
	 * need is in memory first. */
	if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0)
		return fail("mlockall");
	if (unbind(d))
		return 1;
	setup(a, d);
	for (size_t k = 0; k < PAGE; k++)   /* the tag over and over: what a write would leave */
		a->data[1].va[k] = (uint8_t)ATTACK_TAG[k % (sizeof(ATTACK_TAG) - 1)];
	blk_report(a, "write_sector0", blk_request(a, d, VIRTIO_BLK_T_OUT, 0, 4096, 0));
	blk_report(a, "write_last_sector", blk_request(a, d, VIRTIO_BLK_T_OUT, capacity - 1, 512, 0));
	blk_report(a, "write_zeroes", blk_request(a, d, VIRTIO_BLK_T_WRITE_ZEROES, 0, 16, 0));
	blk_report(a, "discard", blk_request(a, d, VIRTIO_BLK_T_DISCARD, 0, 16, 0));
	blk_report(a, "read_past_end", blk_request(a, d, VIRTIO_BLK_T_IN, capacity - 1, 4096, 0));
	blk_report(a, "read_sector_2p64", blk_request(a, d, VIRTIO_BLK_T_IN, ~0ull >> 9, 512, 0));
	blk_report(a, "read_len_not_sectors", blk_request(a, d, VIRTIO_BLK_T_IN, 0, 100, 0));
	blk_report(a, "status_not_writable", blk_request(a, d, VIRTIO_BLK_T_IN, 0, 512, 1));
	blk_report(a, "unknown_type", blk_request(a, d, 0x7777, 0, 512, 0));
	/* Then what is on the disk: none of our writes may be there. */
	struct blk_out o = blk_request(a, d, VIRTIO_BLK_T_IN, 0, 4096, 0);
	a->attempts++;
	printf("ra read_back_sector0 used=%d status=%d tag_found=%d\n", o.a.used, o.status,
	       memmem(a->data[1].va, PAGE, ATTACK_TAG, sizeof(ATTACK_TAG) - 1) != NULL);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "rng") && strcmp(argv[1], "blk-ro"))) {
		fprintf(stderr, "usage: ringattack rng|blk-ro\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct attack a = { .mem_fd = open("/dev/mem", O_RDWR | O_SYNC | O_CLOEXEC),
			    .pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC) };
	printf("ra uid=%u\n", (unsigned)getuid());
	if (a.mem_fd < 0)
		return fail("/dev/mem");
	if (a.pagemap_fd < 0)
		return fail("/proc/self/pagemap");
	if (find_devices(&a))
		return 1;
	if (page_get(&a, &a.q.desc) || page_get(&a, &a.q.avail) || page_get(&a, &a.q.used))
		return fail("a ring page");
	for (unsigned i = 0; i < 4; i++)
		if (page_get(&a, &a.data[i]))
			return fail("a data page");
	int r = !strcmp(argv[1], "rng") ? attack_rng(&a) : attack_blk_ro(&a);
	if (!r)
		printf("ra done %u\n", a.attempts);
	return r;
}
