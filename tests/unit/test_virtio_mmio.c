/* The virtio-mmio transport, driven through its register callbacks as a
 * guest would, with a fake device that only counts what the transport asks
 * of it: identification registers, feature negotiation, the status state
 * machine, queue configuration windows, activation failures, resets,
 * malformed accesses, config space, interrupts and notifications. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fake_virtio.h"
#include "guest_mem.h"
#include "virtio_mmio.h"
#include "virtqueue.h"

#define NQ      2
#define QMAX    8
#define DEV_ID  42u
#define BASE    0xd0000000ull
#define IRQ     5u
/* Offered besides VERSION_1: one low bit and one high bit. */
#define OFFERED ((1ull << 5) | (1ull << 35))

#define S_ACK   VIRTIO_CONFIG_S_ACKNOWLEDGE
#define S_DRV   VIRTIO_CONFIG_S_DRIVER
#define S_FOK   VIRTIO_CONFIG_S_FEATURES_OK
#define S_DOK   VIRTIO_CONFIG_S_DRIVER_OK
#define S_RESET VIRTIO_CONFIG_S_NEEDS_RESET
#define S_FAIL  VIRTIO_CONFIG_S_FAILED

struct fake_dev {
	unsigned activates, notifies, resets;
	unsigned last_notify_q;
	int activate_ret;
	uint32_t written;      /* used length for every chain the device returns */
	unsigned chains;       /* chains taken and returned */
	struct vq_chain c;
};

struct fx {
	struct guest_mem gm;
	struct fake_dev d;
	struct virtio_mmio t;
	struct fv_queue qs[NQ];
};

static const uint8_t config_bytes[12] = { 0x10, 0x11, 0x12, 0x13, 0x14, 0x15,
					  0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b };

static int dev_activate(void *dev, struct virtio_mmio *t)
{
	(void)t;
	struct fake_dev *d = dev;
	d->activates++;
	return d->activate_ret;
}

/* What a real device does: drain the queue and return every chain; the
 * transport signals afterwards. */
static void dev_notify(void *dev, struct virtio_mmio *t, unsigned qi)
{
	struct fake_dev *d = dev;
	d->notifies++;
	d->last_notify_q = qi;
	struct virtq *q = &t->queues[qi];
	while (vq_pop(q, &d->c) == VQ_CHAIN) {
		vq_push(q, d->c.head, d->written);
		d->chains++;
	}
}

static void dev_reset(void *dev)
{
	struct fake_dev *d = dev;
	d->resets++;
}

static const struct virtio_dev_ops fake_ops = {
	.name = "fake",
	.device_id = DEV_ID,
	.nqueues = NQ,
	.queue_max = QMAX,
	.activate = dev_activate,
	.notify = dev_notify,
	.reset = dev_reset,
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (fv_mem_init(&f->gm)) {
		free(f);
		return -1;
	}
	if (virtio_mmio_init(&f->t, &fake_ops, &f->d, &f->gm, BASE, IRQ, OFFERED, config_bytes,
			     sizeof(config_bytes))) {
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
	virtio_mmio_release(&f->t);
	guest_mem_release(&f->gm);
	free(f);
	return 0;
}

static uint32_t status(struct fx *f)
{
	return fv_read(&f->t, VIRTIO_MMIO_STATUS);
}

static unsigned long ignored(struct fx *f)
{
	return atomic_load(&f->t.ignored_writes);
}

/* Eventfd counter, or 0 when it was not readable (nonblocking fds). */
static uint64_t drain(int fd)
{
	eventfd_t v = 0;
	if (eventfd_read(fd, &v) < 0) {
		assert_int_equal(errno, EAGAIN);
		return 0;
	}
	return v;
}

/* ACKNOWLEDGE, DRIVER, all offered features, FEATURES_OK. */
static void up_to_features_ok(struct fx *f)
{
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV);
	for (uint32_t sel = 0; sel < 2; sel++) {
		fv_write(&f->t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, sel);
		uint32_t v = fv_read(&f->t, VIRTIO_MMIO_DEVICE_FEATURES);
		fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, sel);
		fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES, v);
	}
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK);
	assert_int_equal(status(f), S_ACK | S_DRV | S_FOK);
}

static void bring_up(struct fx *f)
{
	assert_int_equal(fv_bring_up(&f->t, NQ, QMAX, f->qs), S_ACK | S_DRV | S_FOK | S_DOK);
	assert_true(virtio_mmio_live(&f->t));
}

/* ---- identification and features ------------------------------------------------ */

static void identification(void **state)
{
	struct fx *f = *state;
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_MAGIC_VALUE), 0x74726976);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_VERSION), 2);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_DEVICE_ID), DEV_ID);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_VENDOR_ID), 0);
	assert_int_equal(status(f), 0);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_CONFIG_GENERATION), 0);
	/* no shared memory regions: all-ones length */
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_SHM_LEN_LOW), 0xffffffffu);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_SHM_LEN_HIGH), 0xffffffffu);
	/* write-only and unknown registers read as zero */
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_QUEUE_NOTIFY), 0);
	assert_int_equal(fv_read(&f->t, 0x0f0), 0);
}

static void device_features(void **state)
{
	struct fx *f = *state;
	fv_write(&f->t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_DEVICE_FEATURES), 1u << 5);
	fv_write(&f->t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	/* VIRTIO_F_VERSION_1 is bit 32: bit 0 of the high half */
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_DEVICE_FEATURES), (1u << 0) | (1u << 3));
	fv_write(&f->t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 2);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_DEVICE_FEATURES), 0);
	fv_write(&f->t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0xffffffffu);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_DEVICE_FEATURES), 0);
	assert_int_equal(f->t.device_features, OFFERED | (1ull << VIRTIO_F_VERSION_1));
	assert_int_equal(ignored(f), 0);
}

/* A device that offers nothing still offers VERSION_1. */
static void version_1_always_offered(void **state)
{
	(void)state;
	struct guest_mem gm;
	struct virtio_mmio t;
	struct fake_dev d = { 0 };
	assert_int_equal(fv_mem_init(&gm), 0);
	assert_int_equal(virtio_mmio_init(&t, &fake_ops, &d, &gm, BASE, IRQ, 0, NULL, 0), 0);
	fv_write(&t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	uint32_t lo = fv_read(&t, VIRTIO_MMIO_DEVICE_FEATURES);
	fv_write(&t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	uint32_t hi = fv_read(&t, VIRTIO_MMIO_DEVICE_FEATURES);
	virtio_mmio_release(&t);
	guest_mem_release(&gm);
	assert_int_equal(lo, 0);
	assert_int_equal(hi, 1);
}

static void driver_features_masked(void **state)
{
	struct fx *f = *state;
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV);
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES, 0xffffffffu);
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES, 0xffffffffu);
	assert_int_equal(f->t.driver_features, OFFERED | (1ull << VIRTIO_F_VERSION_1));
	/* a half can be rewritten, to less */
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES, 0);
	assert_int_equal(f->t.driver_features, (1ull << 35) | (1ull << VIRTIO_F_VERSION_1));
	/* there is no third half */
	unsigned long before = ignored(f);
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 2);
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES, 0xffffffffu);
	assert_int_equal(ignored(f), before + 1);
	assert_int_equal(f->t.driver_features, (1ull << 35) | (1ull << VIRTIO_F_VERSION_1));
	/* accepted features are fixed once FEATURES_OK is set */
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK);
	assert_int_equal(status(f), S_ACK | S_DRV | S_FOK);
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES, 1u << 5);
	assert_int_equal(ignored(f), before + 2);
	assert_int_equal(f->t.driver_features, (1ull << 35) | (1ull << VIRTIO_F_VERSION_1));
}

/* Before DRIVER the driver has no business writing features. */
static void driver_features_before_driver(void **state)
{
	struct fx *f = *state;
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES, 1);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK);
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES, 1);
	assert_int_equal(f->t.driver_features, 0);
	assert_int_equal(ignored(f), 2);
}

static void features_ok_needs_version_1(void **state)
{
	struct fx *f = *state;
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV);
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES, 0xffffffffu);
	/* a legacy driver: everything but VERSION_1 */
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES, 0xfffffffeu);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK);
	assert_int_equal(status(f), S_ACK | S_DRV);
	/* and so no queue can be configured, nor the device started */
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NUM, QMAX);
	assert_int_equal(f->t.queues[0].size, 0);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK | S_DOK);
	assert_int_equal(status(f), S_ACK | S_DRV);
	assert_int_equal(f->d.activates, 0);
	/* accepting VERSION_1 then makes FEATURES_OK stick */
	fv_write(&f->t, VIRTIO_MMIO_DRIVER_FEATURES, 1);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK);
	assert_int_equal(status(f), S_ACK | S_DRV | S_FOK);
}

/* ---- the status state machine ------------------------------------------------------ */

static void status_out_of_order(void **state)
{
	struct fx *f = *state;
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_DOK);   /* straight to DRIVER_OK */
	assert_int_equal(status(f), 0);
	assert_int_equal(ignored(f), 1);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK | S_DOK);
	assert_int_equal(status(f), 0);
	assert_int_equal(ignored(f), 2);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_DRV);   /* DRIVER without ACKNOWLEDGE */
	assert_int_equal(status(f), 0);
	assert_int_equal(ignored(f), 3);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK);
	assert_int_equal(status(f), S_ACK);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_FOK);   /* FEATURES_OK before DRIVER */
	assert_int_equal(status(f), S_ACK);
	assert_int_equal(ignored(f), 4);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_DRV);   /* dropping ACKNOWLEDGE */
	assert_int_equal(status(f), S_ACK);
	assert_int_equal(ignored(f), 5);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK);   /* two steps at once */
	assert_int_equal(status(f), S_ACK);
	assert_int_equal(ignored(f), 6);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | 0x100);   /* the right step, plus an unknown bit */
	assert_int_equal(status(f), S_ACK);
	assert_int_equal(ignored(f), 7);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV);
	assert_int_equal(status(f), S_ACK | S_DRV);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_DOK);   /* skipping FEATURES_OK */
	assert_int_equal(status(f), S_ACK | S_DRV);
	assert_int_equal(ignored(f), 8);
	assert_int_equal(f->d.activates, 0);
}

static void queue_writes_before_features_ok(void **state)
{
	struct fx *f = *state;
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV);
	unsigned long before = ignored(f);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_SEL, 0);   /* selecting is always allowed */
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NUM, QMAX);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_DESC_LOW, 0x10000);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_DESC_HIGH, 1);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_AVAIL_LOW, 0x11000);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_AVAIL_HIGH, 1);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_USED_LOW, 0x12000);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_USED_HIGH, 1);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_READY, 1);
	assert_int_equal(ignored(f), before + 8);
	const struct virtq *q = &f->t.queues[0];
	assert_int_equal(q->size, 0);
	assert_int_equal(q->desc_gpa, 0);
	assert_int_equal(q->avail_gpa, 0);
	assert_int_equal(q->used_gpa, 0);
	assert_false(q->ready);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_QUEUE_READY), 0);
}

static void queue_registers(void **state)
{
	struct fx *f = *state;
	up_to_features_ok(f);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_SEL, 1);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_QUEUE_NUM_MAX), QMAX);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NUM, 4);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_DESC_LOW, 0x89abcdf0u);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_DESC_HIGH, 0x1);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_AVAIL_LOW, 0x2222);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_AVAIL_HIGH, 0x3);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_USED_LOW, 0x4444);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_USED_HIGH, 0x5);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_READY, 1);
	assert_int_equal(ignored(f), 0);
	const struct virtq *q = &f->t.queues[1];
	assert_int_equal(q->size, 4);
	assert_int_equal(q->desc_gpa, 0x189abcdf0ull);
	assert_int_equal(q->avail_gpa, 0x300002222ull);
	assert_int_equal(q->used_gpa, 0x500004444ull);
	assert_true(q->ready);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_QUEUE_READY), 1);
	/* the other queue untouched */
	assert_int_equal(f->t.queues[0].size, 0);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_SEL, 0);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_QUEUE_READY), 0);
	/* the low half rewritten keeps the high half */
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_SEL, 1);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_DESC_LOW, 0x1000);
	assert_int_equal(q->desc_gpa, 0x100001000ull);
	/* READY takes exactly 1; anything else clears it */
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_READY, 2);
	assert_false(q->ready);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_READY, 1);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_READY, 0);
	assert_false(q->ready);
}

static void queue_num_above_max(void **state)
{
	struct fx *f = *state;
	up_to_features_ok(f);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_SEL, 0);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NUM, 4);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NUM, QMAX + 1);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NUM, 16);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NUM, 0x10008);   /* 8 after truncation to 16 bits */
	assert_int_equal(f->t.queues[0].size, 4);
	assert_int_equal(ignored(f), 3);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NUM, QMAX);
	assert_int_equal(f->t.queues[0].size, QMAX);
}

static void queue_num_max_per_index(void **state)
{
	struct fx *f = *state;
	static const uint32_t sel[] = { 0, 1, 2, 3, 0xffffffffu };
	static const uint32_t want[] = { QMAX, QMAX, 0, 0, 0 };
	for (unsigned i = 0; i < 5; i++) {
		fv_write(&f->t, VIRTIO_MMIO_QUEUE_SEL, sel[i]);
		assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_QUEUE_NUM_MAX), want[i]);
		assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_QUEUE_READY), 0);
	}
	/* a queue that does not exist cannot be configured */
	up_to_features_ok(f);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_SEL, 2);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NUM, 1);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_READY, 1);
	assert_int_equal(ignored(f), 2);
	assert_int_equal(f->t.queues[2].size, 0);
	assert_false(f->t.queues[2].ready);
}

/* ---- activation ----------------------------------------------------------------------- */

static void good_bring_up(void **state)
{
	struct fx *f = *state;
	bring_up(f);
	assert_int_equal(f->d.activates, 1);
	assert_int_equal(f->d.notifies, 0);
	assert_int_equal(f->d.resets, 0);
	assert_int_equal(ignored(f), 0);
	for (unsigned i = 0; i < NQ; i++) {
		const struct virtq *q = &f->t.queues[i];
		assert_int_equal(q->size, QMAX);
		assert_true(q->ready);
		assert_ptr_equal(q->desc, fv_ptr(&f->gm, f->qs[i].desc, 16));
		assert_ptr_equal(q->avail, fv_ptr(&f->gm, f->qs[i].avail, 2));
		assert_ptr_equal(q->used, fv_ptr(&f->gm, f->qs[i].used, 4));
	}
	/* no interrupt for coming up */
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	assert_int_equal(drain(f->t.irq_fd), 0);
	/* DRIVER_OK again does nothing more */
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK | S_DOK);
	assert_int_equal(f->d.activates, 1);
	assert_int_equal(ignored(f), 1);
}

static void post_activation_queue_writes(void **state)
{
	struct fx *f = *state;
	bring_up(f);
	unsigned long before = ignored(f);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_SEL, 0);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NUM, 4);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_DESC_LOW, 0x20000);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_DESC_HIGH, 1);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_AVAIL_LOW, 0x21000);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_USED_LOW, 0x22000);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_READY, 0);
	assert_int_equal(ignored(f), before + 6);
	const struct virtq *q = &f->t.queues[0];
	assert_int_equal(q->size, QMAX);
	assert_int_equal(q->desc_gpa, f->qs[0].desc);
	assert_int_equal(q->avail_gpa, f->qs[0].avail);
	assert_int_equal(q->used_gpa, f->qs[0].used);
	assert_true(q->ready);
	assert_ptr_equal(q->desc, fv_ptr(&f->gm, f->qs[0].desc, 16));
	assert_true(virtio_mmio_live(&f->t));
}

/* DRIVER_OK with every queue set up, then one of them spoiled by tamper. */
static void driver_ok_with(struct fx *f, void (*tamper)(struct fx *f))
{
	up_to_features_ok(f);
	for (unsigned i = 0; i < NQ; i++)
		fv_queue_setup(&f->t, i, QMAX, &f->qs[i]);
	tamper(f);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK | S_DOK);
	assert_int_equal(status(f), S_ACK | S_DRV | S_FOK | S_DOK | S_RESET);
	assert_false(virtio_mmio_live(&f->t));
	assert_int_equal(f->d.activates, 0);
	/* the driver hears of it through a config change interrupt */
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_CONFIG);
	assert_int_equal(drain(f->t.irq_fd), 1);
	/* and a dead device is never notified */
	virtio_mmio_kick(&f->t, 0);
	assert_int_equal(f->d.notifies, 0);
}

static void tamper_not_ready(struct fx *f)
{
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_SEL, 1);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_READY, 0);
}

static void tamper_size_not_pow2(struct fx *f)
{
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_SEL, 1);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NUM, 6);
}

static void tamper_size_zero(struct fx *f)
{
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_SEL, 0);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NUM, 0);
}

static void tamper_ring_outside(struct fx *f)
{
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_SEL, 0);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)FV_MEM_SIZE);
}

static void tamper_ring_high(struct fx *f)
{
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_SEL, 1);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_DESC_HIGH, 0xffffffffu);
}

static void tamper_ring_misaligned(struct fx *f)
{
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_SEL, 1);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)f->qs[1].desc + 8);
}

static void driver_ok_queue_not_ready(void **state) { driver_ok_with(*state, tamper_not_ready); }
static void driver_ok_queue_bad_size(void **state) { driver_ok_with(*state, tamper_size_not_pow2); }
static void driver_ok_queue_size_zero(void **state) { driver_ok_with(*state, tamper_size_zero); }
static void driver_ok_ring_outside_ram(void **state) { driver_ok_with(*state, tamper_ring_outside); }
static void driver_ok_ring_above_4g(void **state) { driver_ok_with(*state, tamper_ring_high); }
static void driver_ok_ring_misaligned(void **state) { driver_ok_with(*state, tamper_ring_misaligned); }

static void activate_refused(void **state)
{
	struct fx *f = *state;
	f->d.activate_ret = -1;
	assert_int_equal(fv_bring_up(&f->t, NQ, QMAX, f->qs), S_ACK | S_DRV | S_FOK | S_DOK | S_RESET);
	assert_int_equal(f->d.activates, 1);
	assert_false(virtio_mmio_live(&f->t));
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_CONFIG);
	virtio_mmio_kick(&f->t, 0);
	assert_int_equal(f->d.notifies, 0);
	/* a reset and a second try, which the device accepts */
	f->d.activate_ret = 0;
	bring_up(f);
	assert_int_equal(f->d.activates, 2);
	assert_int_equal(f->d.resets, 1);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
}

/* ---- kicks, reset, FAILED --------------------------------------------------------------- */

static void kick_only_when_live(void **state)
{
	struct fx *f = *state;
	virtio_mmio_kick(&f->t, 0);
	up_to_features_ok(f);
	virtio_mmio_kick(&f->t, 0);
	assert_int_equal(f->d.notifies, 0);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, 0);
	bring_up(f);
	virtio_mmio_kick(&f->t, 1);
	assert_int_equal(f->d.notifies, 1);
	assert_int_equal(f->d.last_notify_q, 1);
	virtio_mmio_kick(&f->t, 0);
	assert_int_equal(f->d.notifies, 2);
	assert_int_equal(f->d.last_notify_q, 0);
	/* no such queue */
	virtio_mmio_kick(&f->t, NQ);
	virtio_mmio_kick(&f->t, VIRTIO_MMIO_MAX_QUEUES);
	virtio_mmio_kick(&f->t, 1000);
	assert_int_equal(f->d.notifies, 2);
	/* nothing was made available, so nothing came back and no interrupt */
	assert_int_equal(f->d.chains, 0);
	assert_int_equal(drain(f->t.irq_fd), 0);
	/* after a reset, dead again */
	fv_write(&f->t, VIRTIO_MMIO_STATUS, 0);
	virtio_mmio_kick(&f->t, 0);
	assert_int_equal(f->d.notifies, 2);
}

static void reset_by_zero(void **state)
{
	struct fx *f = *state;
	bring_up(f);
	f->d.written = 3;
	fv_desc(&f->gm, &f->qs[0], 0, FV_BUF_BASE, 16, VRING_DESC_F_WRITE, 0);
	fv_avail(&f->gm, &f->qs[0], 0);
	virtio_mmio_kick(&f->t, 0);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_VRING);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_SEL, 1);

	fv_write(&f->t, VIRTIO_MMIO_STATUS, 0);
	assert_int_equal(f->d.resets, 1);
	assert_int_equal(status(f), 0);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	assert_int_equal(f->t.driver_features, 0);
	assert_int_equal(f->t.queue_sel, 0);
	assert_int_equal(f->t.device_features_sel, 0);
	assert_int_equal(f->t.driver_features_sel, 0);
	for (unsigned i = 0; i < NQ; i++) {
		const struct virtq *q = &f->t.queues[i];
		assert_int_equal(q->max_size, QMAX);
		assert_int_equal(q->size, 0);
		assert_false(q->ready);
		assert_int_equal(q->desc_gpa, 0);
		assert_int_equal(q->avail_gpa, 0);
		assert_int_equal(q->used_gpa, 0);
		assert_null(q->desc);
		assert_null(q->avail);
		assert_null(q->used);
		assert_int_equal(q->last_avail, 0);
		assert_int_equal(q->used_idx, 0);
		assert_false(q->broken);
	}
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_QUEUE_NUM_MAX), QMAX);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_QUEUE_READY), 0);
	assert_false(virtio_mmio_live(&f->t));
	/* a reset of a device never started is not passed on */
	fv_write(&f->t, VIRTIO_MMIO_STATUS, 0);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, 0);
	assert_int_equal(f->d.resets, 1);
	assert_int_equal(ignored(f), 0);
	/* and it comes up again from scratch: the ring memory is zeroed */
	memset(fv_ptr(&f->gm, FV_RING_BASE, 3 * FV_RING_STRIDE), 0, 3 * FV_RING_STRIDE);
	bring_up(f);
	assert_int_equal(f->d.activates, 2);
	fv_desc(&f->gm, &f->qs[0], 0, FV_BUF_BASE, 16, VRING_DESC_F_WRITE, 0);
	fv_avail(&f->gm, &f->qs[0], 0);
	virtio_mmio_kick(&f->t, 0);
	uint32_t id, len;
	assert_true(fv_used(&f->gm, &f->qs[0], &id, &len));
	assert_int_equal(id, 0);
	assert_int_equal(len, 3);
}

static void failed_can_be_set(void **state)
{
	struct fx *f = *state;
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FAIL);
	assert_int_equal(status(f), S_ACK | S_DRV | S_FAIL);
	assert_int_equal(ignored(f), 0);
	/* FAILED while clearing a step already set is not a way to go back */
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_FAIL);
	assert_int_equal(status(f), S_ACK | S_DRV | S_FAIL);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, 0);
	assert_int_equal(status(f), 0);

	/* FAILED after FEATURES_OK closes the queue configuration window */
	up_to_features_ok(f);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK | S_FAIL);
	assert_int_equal(status(f), S_ACK | S_DRV | S_FOK | S_FAIL);
	unsigned long before = ignored(f);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_SEL, 0);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NUM, QMAX);
	assert_int_equal(ignored(f), before + 1);
	assert_int_equal(f->t.queues[0].size, 0);

	/* FAILED on a live device stops it */
	fv_write(&f->t, VIRTIO_MMIO_STATUS, 0);
	bring_up(f);
	fv_write(&f->t, VIRTIO_MMIO_STATUS, S_ACK | S_DRV | S_FOK | S_DOK | S_FAIL);
	assert_int_equal(status(f), S_ACK | S_DRV | S_FOK | S_DOK | S_FAIL);
	assert_false(virtio_mmio_live(&f->t));
	virtio_mmio_kick(&f->t, 0);
	assert_int_equal(f->d.notifies, 0);
}

/* ---- malformed accesses, config space ---------------------------------------------------- */

static void malformed_register_access(void **state)
{
	struct fx *f = *state;
	uint8_t buf[8];
	/* narrow and wide reads of a register return zeros */
	for (uint32_t len = 1; len <= 8; len++) {
		if (len == 4)
			continue;
		memset(buf, 0xee, sizeof(buf));
		virtio_mmio_read(&f->t, VIRTIO_MMIO_MAGIC_VALUE, buf, len);
		for (uint32_t i = 0; i < len; i++)
			assert_int_equal(buf[i], 0);
		assert_int_equal(buf[len < 8 ? len : 7], len < 8 ? 0xee : 0);
	}
	/* misaligned */
	for (uint64_t off = 1; off < 4; off++) {
		memset(buf, 0xee, sizeof(buf));
		virtio_mmio_read(&f->t, VIRTIO_MMIO_MAGIC_VALUE + off, buf, 4);
		assert_int_equal(buf[0] | buf[1] | buf[2] | buf[3], 0);
	}
	memset(buf, 0xee, sizeof(buf));
	virtio_mmio_read(&f->t, VIRTIO_MMIO_INTERRUPT_STATUS, buf, 2);
	assert_int_equal(buf[0] | buf[1], 0);
	assert_int_equal(buf[2], 0xee);

	/* writes: counted, and without effect */
	const uint8_t one[8] = { S_ACK, 0, 0, 0, 0, 0, 0, 0 };
	virtio_mmio_write(&f->t, VIRTIO_MMIO_STATUS, one, 1);
	virtio_mmio_write(&f->t, VIRTIO_MMIO_STATUS, one, 2);
	virtio_mmio_write(&f->t, VIRTIO_MMIO_STATUS, one, 8);
	virtio_mmio_write(&f->t, VIRTIO_MMIO_STATUS + 1, one, 4);
	virtio_mmio_write(&f->t, VIRTIO_MMIO_STATUS - 2, one, 4);
	assert_int_equal(ignored(f), 5);
	assert_int_equal(status(f), 0);
	virtio_mmio_write(&f->t, VIRTIO_MMIO_QUEUE_SEL + 2, one, 2);
	assert_int_equal(f->t.queue_sel, 0);
	/* a narrow INTERRUPT_ACK does not clear anything either */
	bring_up(f);
	fv_desc(&f->gm, &f->qs[0], 0, FV_BUF_BASE, 16, VRING_DESC_F_WRITE, 0);
	fv_avail(&f->gm, &f->qs[0], 0);
	virtio_mmio_kick(&f->t, 0);
	const uint8_t all[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	virtio_mmio_write(&f->t, VIRTIO_MMIO_INTERRUPT_ACK, all, 1);
	virtio_mmio_write(&f->t, VIRTIO_MMIO_INTERRUPT_ACK + 1, all, 4);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_VRING);
	assert_int_equal(ignored(f), 8);
	/* registers that are not there, or read-only */
	fv_write(&f->t, 0x0f0, 1);
	fv_write(&f->t, VIRTIO_MMIO_MAGIC_VALUE, 1);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NUM_MAX, 1);
	assert_int_equal(ignored(f), 11);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_MAGIC_VALUE), 0x74726976);
}

static void config_reads(void **state)
{
	struct fx *f = *state;
	uint8_t buf[8];
	for (uint32_t len = 1; len <= 8; len++) {
		for (uint64_t off = 0; off < sizeof(config_bytes) + 4; off++) {
			memset(buf, 0xee, sizeof(buf));
			virtio_mmio_read(&f->t, VIRTIO_MMIO_CONFIG + off, buf, len);
			for (uint32_t i = 0; i < len; i++) {
				uint8_t want = off + i < sizeof(config_bytes) ? config_bytes[off + i] : 0;
				assert_int_equal(buf[i], want);
			}
			for (uint32_t i = len; i < 8; i++)
				assert_int_equal(buf[i], 0xee);
		}
	}
	/* far past the end, up to the last byte of the window */
	memset(buf, 0xee, sizeof(buf));
	virtio_mmio_read(&f->t, VIRTIO_MMIO_CONFIG + VIRTIO_MMIO_CONFIG_MAX, buf, 4);
	assert_int_equal(buf[0] | buf[1] | buf[2] | buf[3], 0);
	virtio_mmio_read(&f->t, VIRTIO_MMIO_WINDOW - 8, buf, 8);
	for (unsigned i = 0; i < 8; i++)
		assert_int_equal(buf[i], 0);
	/* the 32-bit helper reads little-endian */
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_CONFIG + 4), 0x17161514);
}

static void config_writes_ignored(void **state)
{
	struct fx *f = *state;
	const uint8_t junk[8] = { 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5 };
	virtio_mmio_write(&f->t, VIRTIO_MMIO_CONFIG, junk, 1);
	virtio_mmio_write(&f->t, VIRTIO_MMIO_CONFIG, junk, 4);
	virtio_mmio_write(&f->t, VIRTIO_MMIO_CONFIG + 3, junk, 8);
	virtio_mmio_write(&f->t, VIRTIO_MMIO_CONFIG + 0x40, junk, 4);
	assert_int_equal(ignored(f), 4);
	assert_memory_equal(f->t.config, config_bytes, sizeof(config_bytes));
	for (unsigned i = sizeof(config_bytes); i < VIRTIO_MMIO_CONFIG_MAX; i++)
		assert_int_equal(f->t.config[i], 0);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_CONFIG), 0x13121110);
}

/* ---- interrupts and notifications ---------------------------------------------------------- */

static void used_interrupt_and_ack(void **state)
{
	struct fx *f = *state;
	bring_up(f);
	f->d.written = 7;
	fv_desc(&f->gm, &f->qs[1], 2, FV_BUF_BASE, 16, VRING_DESC_F_WRITE, 0);
	fv_avail(&f->gm, &f->qs[1], 2);
	virtio_mmio_kick(&f->t, 1);
	assert_int_equal(f->d.chains, 1);
	uint32_t id, len;
	assert_true(fv_used(&f->gm, &f->qs[1], &id, &len));
	assert_int_equal(id, 2);
	assert_int_equal(len, 7);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_VRING);
	assert_int_equal(drain(f->t.irq_fd), 1);
	assert_int_equal(drain(f->t.irq_fd), 0);

	/* signalling again with no new used entries raises nothing; the
	 * status bit stays set until acknowledged */
	virtio_mmio_lock(&f->t);
	virtio_mmio_signal(&f->t);
	virtio_mmio_unlock(&f->t);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_VRING);
	assert_int_equal(drain(f->t.irq_fd), 0);
	/* a chain the device returns on its own (not after a kick) is
	 * signalled by the next virtio_mmio_signal */
	fv_desc(&f->gm, &f->qs[0], 3, FV_BUF_BASE, 16, VRING_DESC_F_WRITE, 0);
	fv_avail(&f->gm, &f->qs[0], 3);
	virtio_mmio_lock(&f->t);
	assert_int_equal(vq_pop(&f->t.queues[0], &f->d.c), VQ_CHAIN);
	vq_push(&f->t.queues[0], f->d.c.head, 1);
	virtio_mmio_signal(&f->t);
	virtio_mmio_unlock(&f->t);
	assert_int_equal(drain(f->t.irq_fd), 1);

	/* ACK clears only the bits written */
	atomic_fetch_or(&f->t.interrupt_status, VIRTIO_MMIO_INT_CONFIG);
	fv_write(&f->t, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_CONFIG);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_VRING);
	fv_write(&f->t, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_VRING);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	fv_write(&f->t, VIRTIO_MMIO_INTERRUPT_ACK, 0xffffffffu);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	assert_int_equal(ignored(f), 0);
}

static void no_interrupt_flag_honoured(void **state)
{
	struct fx *f = *state;
	bring_up(f);
	uint16_t *flags = fv_ptr(&f->gm, f->qs[0].avail, 2);
	*flags = VRING_AVAIL_F_NO_INTERRUPT;
	fv_desc(&f->gm, &f->qs[0], 0, FV_BUF_BASE, 16, VRING_DESC_F_WRITE, 0);
	fv_avail(&f->gm, &f->qs[0], 0);
	virtio_mmio_kick(&f->t, 0);
	assert_int_equal(f->d.chains, 1);
	assert_int_equal(fv_used_idx(&f->gm, &f->qs[0]), 1);
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	assert_int_equal(drain(f->t.irq_fd), 0);
}

static void broken_queue_needs_reset(void **state)
{
	struct fx *f = *state;
	bring_up(f);
	fv_avail_idx(&f->gm, &f->qs[0], QMAX + 1);
	virtio_mmio_kick(&f->t, 0);
	assert_int_equal(f->d.notifies, 1);
	assert_true(f->t.queues[0].broken);
	assert_int_equal(status(f), S_ACK | S_DRV | S_FOK | S_DOK | S_RESET);
	assert_false(virtio_mmio_live(&f->t));
	assert_int_equal(fv_read(&f->t, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_CONFIG);
	assert_int_equal(drain(f->t.irq_fd), 1);
	assert_int_equal(fv_used_idx(&f->gm, &f->qs[0]), 0);
	/* the other queue is not served either until a reset */
	fv_desc(&f->gm, &f->qs[1], 0, FV_BUF_BASE, 16, VRING_DESC_F_WRITE, 0);
	fv_avail(&f->gm, &f->qs[1], 0);
	virtio_mmio_kick(&f->t, 1);
	assert_int_equal(f->d.notifies, 1);
	assert_int_equal(drain(f->t.irq_fd), 0);
	/* the guest's NEEDS_RESET handling: reset, then up again */
	fv_write(&f->t, VIRTIO_MMIO_STATUS, 0);
	assert_int_equal(status(f), 0);
	memset(fv_ptr(&f->gm, FV_RING_BASE, 3 * FV_RING_STRIDE), 0, 3 * FV_RING_STRIDE);
	bring_up(f);
	assert_false(f->t.queues[0].broken);
}

/* A device that finds the ring broken and says nothing
 * still gets the device into NEEDS_RESET: the transport checks after every
 * notification. */
static void silent_notify(void *dev, struct virtio_mmio *t, unsigned qi)
{
	struct fake_dev *d = dev;
	d->notifies++;
	(void)vq_pop(&t->queues[qi], &d->c);
}

static void broken_queue_silent_device(void **state)
{
	(void)state;
	struct guest_mem gm;
	struct virtio_mmio t;
	struct fake_dev d = { 0 };
	struct fv_queue qs[NQ];
	struct virtio_dev_ops ops = fake_ops;
	ops.notify = silent_notify;
	assert_int_equal(fv_mem_init(&gm), 0);
	assert_int_equal(virtio_mmio_init(&t, &ops, &d, &gm, BASE, IRQ, 0, NULL, 0), 0);
	uint32_t s = fv_bring_up(&t, NQ, QMAX, qs);
	fv_avail(&gm, &qs[1], QMAX);   /* head out of range */
	virtio_mmio_kick(&t, 1);
	uint32_t s2 = fv_read(&t, VIRTIO_MMIO_STATUS);
	uint32_t isr = fv_read(&t, VIRTIO_MMIO_INTERRUPT_STATUS);
	uint64_t irqs = drain(t.irq_fd);
	virtio_mmio_release(&t);
	guest_mem_release(&gm);
	assert_int_equal(s, S_ACK | S_DRV | S_FOK | S_DOK);
	assert_int_equal(d.notifies, 1);
	assert_int_equal(s2, S_ACK | S_DRV | S_FOK | S_DOK | S_RESET);
	assert_int_equal(isr, VIRTIO_MMIO_INT_CONFIG);
	assert_int_equal(irqs, 1);
}

static void queue_notify_register(void **state)
{
	struct fx *f = *state;
	bring_up(f);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NOTIFY, 1);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NOTIFY, 1);
	assert_int_equal(drain(f->t.kick_fd[0]), 0);
	assert_int_equal(drain(f->t.kick_fd[1]), 2);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	assert_int_equal(drain(f->t.kick_fd[0]), 1);
	assert_int_equal(drain(f->t.kick_fd[1]), 0);
	/* the register only signals; the event loop runs the device */
	assert_int_equal(f->d.notifies, 0);
	assert_int_equal(ignored(f), 0);
	/* no such queue */
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NOTIFY, NQ);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NOTIFY, VIRTIO_MMIO_MAX_QUEUES);
	fv_write(&f->t, VIRTIO_MMIO_QUEUE_NOTIFY, 0xffffffffu);
	assert_int_equal(ignored(f), 3);
	assert_int_equal(drain(f->t.kick_fd[0]), 0);
	assert_int_equal(drain(f->t.kick_fd[1]), 0);
	assert_int_equal(f->t.kick_fd[2], -1);
}

/* ---- command line, init, release ------------------------------------------------------------ */

static void cmdline(void **state)
{
	struct fx *f = *state;
	static const char want[] = "virtio_mmio.device=4K@0xd0000000:5";
	char buf[64];
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(virtio_mmio_cmdline(&f->t, buf, sizeof(buf)), 0);
	assert_string_equal(buf, want);
	/* just enough, and one byte short (no room for the NUL) */
	assert_int_equal(virtio_mmio_cmdline(&f->t, buf, sizeof(want)), 0);
	assert_string_equal(buf, want);
	assert_int_equal(virtio_mmio_cmdline(&f->t, buf, sizeof(want) - 1), -1);
	assert_int_equal(virtio_mmio_cmdline(&f->t, buf, 1), -1);
	/* a base above 4 GiB, a larger irq */
	struct virtio_mmio t = f->t;
	t.base = 0x1000000000ull;
	t.irq = 23;
	assert_int_equal(virtio_mmio_cmdline(&t, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "virtio_mmio.device=4K@0x1000000000:23");
}

static void init_refuses_bad_description(void **state)
{
	struct fx *f = *state;
	struct virtio_mmio t;
	struct virtio_dev_ops ops;
	static const uint8_t big[VIRTIO_MMIO_CONFIG_MAX + 1];
	const struct { unsigned nq; uint16_t qmax; uint32_t cfg; } bad[] = {
		{ 0, 8, 0 }, { 4, 8, 0 }, { 100, 8, 0 },
		{ 1, 0, 0 }, { 1, 6, 0 }, { 1, 3, 0 }, { 1, VQ_MAX_SIZE * 2, 0 }, { 1, 0xffff, 0 },
		{ 1, 8, VIRTIO_MMIO_CONFIG_MAX + 1 },
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ops = fake_ops;
		ops.nqueues = bad[i].nq;
		ops.queue_max = bad[i].qmax;
		memset(&t, 0x5a, sizeof(t));
		assert_int_equal(virtio_mmio_init(&t, &ops, &f->d, &f->gm, BASE, IRQ, 0, big, bad[i].cfg), -1);
		/* left safe to release */
		assert_null(t.ops);
		assert_int_equal(t.irq_fd, -1);
		for (unsigned q = 0; q < VIRTIO_MMIO_MAX_QUEUES; q++)
			assert_int_equal(t.kick_fd[q], -1);
		virtio_mmio_release(&t);
	}
	/* the limits themselves are fine */
	ops = fake_ops;
	ops.nqueues = VIRTIO_MMIO_MAX_QUEUES;
	ops.queue_max = VQ_MAX_SIZE;
	assert_int_equal(virtio_mmio_init(&t, &ops, &f->d, &f->gm, BASE, IRQ, 0, big, VIRTIO_MMIO_CONFIG_MAX), 0);
	assert_true(t.irq_fd >= 0);
	for (unsigned q = 0; q < VIRTIO_MMIO_MAX_QUEUES; q++)
		assert_true(t.kick_fd[q] >= 0);
	virtio_mmio_release(&t);
	ops.nqueues = 1;
	ops.queue_max = 1;
	assert_int_equal(virtio_mmio_init(&t, &ops, &f->d, &f->gm, BASE, IRQ, 0, NULL, 0), 0);
	assert_int_equal(t.kick_fd[1], -1);
	virtio_mmio_release(&t);
}

static void release_twice(void **state)
{
	(void)state;
	struct virtio_mmio t;
	memset(&t, 0, sizeof(t));
	t.irq_fd = -1;
	for (unsigned q = 0; q < VIRTIO_MMIO_MAX_QUEUES; q++)
		t.kick_fd[q] = -1;
	virtio_mmio_release(&t);
	struct guest_mem gm;
	struct fake_dev d = { 0 };
	assert_int_equal(fv_mem_init(&gm), 0);
	assert_int_equal(virtio_mmio_init(&t, &fake_ops, &d, &gm, BASE, IRQ, 0, NULL, 0), 0);
	int fd = t.irq_fd;
	virtio_mmio_release(&t);
	assert_int_equal(t.irq_fd, -1);
	assert_null(t.ops);
	/* the eventfd is really closed */
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	virtio_mmio_release(&t);
	guest_mem_release(&gm);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(identification),
		T(device_features),
		cmocka_unit_test(version_1_always_offered),
		T(driver_features_masked),
		T(driver_features_before_driver),
		T(features_ok_needs_version_1),
		T(status_out_of_order),
		T(queue_writes_before_features_ok),
		T(queue_registers),
		T(queue_num_above_max),
		T(queue_num_max_per_index),
		T(good_bring_up),
		T(post_activation_queue_writes),
		T(driver_ok_queue_not_ready),
		T(driver_ok_queue_bad_size),
		T(driver_ok_queue_size_zero),
		T(driver_ok_ring_outside_ram),
		T(driver_ok_ring_above_4g),
		T(driver_ok_ring_misaligned),
		T(activate_refused),
		T(kick_only_when_live),
		T(reset_by_zero),
		T(failed_can_be_set),
		T(malformed_register_access),
		T(config_reads),
		T(config_writes_ignored),
		T(used_interrupt_and_ack),
		T(no_interrupt_flag_honoured),
		T(broken_queue_needs_reset),
		cmocka_unit_test(broken_queue_silent_device),
		T(queue_notify_register),
		T(cmdline),
		T(init_refuses_bad_description),
		cmocka_unit_test(release_twice),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
