#include "virtio_mmio.h"

#include <errno.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"

#define MMIO_MAGIC   0x74726976u   /* "virt" */
#define MMIO_VERSION 2u            /* modern only; legacy (1) is never offered */

_Static_assert(VIRTIO_MMIO_WINDOW == 4096, "the command-line fragment says 4K");
_Static_assert(VIRTIO_MMIO_CONFIG + VIRTIO_MMIO_CONFIG_MAX <= VIRTIO_MMIO_WINDOW,
	       "config space inside the register window");

/* The four driver-set status bits, in the order virtio 1.2, 3.1.1 sets them. */
#define STATUS_STEPS (VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | \
		      VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK)

int virtio_mmio_init(struct virtio_mmio *t, const struct virtio_dev_ops *ops, void *dev,
		     const struct guest_mem *mem, uint64_t base, unsigned irq, uint64_t features,
		     const void *config, uint32_t config_len)
{
	memset(t, 0, sizeof(*t));
	t->irq_fd = -1;
	for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++)
		t->kick_fd[i] = -1;
	if (ops->nqueues == 0 || ops->nqueues > VIRTIO_MMIO_MAX_QUEUES || ops->queue_max == 0 ||
	    ops->queue_max > VQ_MAX_SIZE || (ops->queue_max & (ops->queue_max - 1)) ||
	    config_len > VIRTIO_MMIO_CONFIG_MAX) {
		vmm_err("virtio-%s: invalid device description", ops->name);
		return -1;
	}
	t->ops = ops;
	t->dev = dev;
	t->mem = mem;
	t->base = base;
	t->irq = irq;
	t->device_features = features | (1ull << VIRTIO_F_VERSION_1);
	if (config_len)
		memcpy(t->config, config, config_len);
	t->config_len = config_len;
	for (unsigned i = 0; i < ops->nqueues; i++)
		t->queues[i].max_size = ops->queue_max;
	int e = pthread_mutex_init(&t->lock, NULL);
	if (e) {
		errno = e;
		vmm_perr("virtio-%s: mutex", ops->name);
		t->ops = NULL;
		return -1;
	}
	t->irq_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	for (unsigned i = 0; i < ops->nqueues && t->irq_fd >= 0; i++)
		if ((t->kick_fd[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
			break;
	if (t->irq_fd < 0 || t->kick_fd[ops->nqueues - 1] < 0) {
		vmm_perr("virtio-%s: eventfd", ops->name);
		virtio_mmio_release(t);
		return -1;
	}
	return 0;
}

void virtio_mmio_release(struct virtio_mmio *t)
{
	if (!t->ops)
		return;   /* never initialised, or already released */
	if (t->irq_fd >= 0)
		close(t->irq_fd);
	for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++)
		if (t->kick_fd[i] >= 0)
			close(t->kick_fd[i]);
	pthread_mutex_destroy(&t->lock);
	t->ops = NULL;
	t->irq_fd = -1;
	for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++)
		t->kick_fd[i] = -1;
}

void virtio_mmio_lock(struct virtio_mmio *t)
{
	pthread_mutex_lock(&t->lock);
}

void virtio_mmio_unlock(struct virtio_mmio *t)
{
	pthread_mutex_unlock(&t->lock);
}

bool virtio_mmio_live(const struct virtio_mmio *t)
{
	return (t->status & VIRTIO_CONFIG_S_DRIVER_OK) && !(t->status & VIRTIO_CONFIG_S_NEEDS_RESET) &&
	       !(t->status & VIRTIO_CONFIG_S_FAILED);
}

static void raise_irq(struct virtio_mmio *t, uint32_t why)
{
	atomic_fetch_or(&t->interrupt_status, why);
	/* Fails only when the counter would overflow, i.e. the interrupt is
	 * already pending many times over. */
	(void)eventfd_write(t->irq_fd, 1);
}

/* The device can no longer work until the driver resets it (virtio 1.2,
 * 2.1.2): say so and tell the driver through a config interrupt. */
static void needs_reset(struct virtio_mmio *t)
{
	if (t->status & VIRTIO_CONFIG_S_NEEDS_RESET)
		return;
	t->status |= VIRTIO_CONFIG_S_NEEDS_RESET;
	t->resets_needed++;
	if (t->status & VIRTIO_CONFIG_S_DRIVER_OK)
		raise_irq(t, VIRTIO_MMIO_INT_CONFIG);
}

void virtio_mmio_signal(struct virtio_mmio *t)
{
	bool irq = false;
	for (unsigned i = 0; i < t->ops->nqueues; i++) {
		struct virtq *q = &t->queues[i];
		if (q->broken) {
			needs_reset(t);
			return;
		}
		if (q->used_idx == t->signalled[i])
			continue;
		t->signalled[i] = q->used_idx;
		irq |= vq_should_interrupt(q);
	}
	if (irq)
		raise_irq(t, VIRTIO_MMIO_INT_VRING);
}

void virtio_mmio_kick(struct virtio_mmio *t, unsigned q)
{
	pthread_mutex_lock(&t->lock);
	if (q < t->ops->nqueues && virtio_mmio_live(t)) {
		t->ops->notify(t->dev, t, q);
		virtio_mmio_signal(t);
	}
	pthread_mutex_unlock(&t->lock);
}

static void device_reset(struct virtio_mmio *t)
{
	if ((t->status & VIRTIO_CONFIG_S_DRIVER_OK) && t->ops->reset)
		t->ops->reset(t->dev);
	for (unsigned i = 0; i < t->ops->nqueues; i++) {
		vq_reset(&t->queues[i]);
		t->signalled[i] = 0;
	}
	t->driver_features = 0;
	t->device_features_sel = t->driver_features_sel = t->queue_sel = 0;
	t->status = 0;
	atomic_store(&t->interrupt_status, 0);
}

static void activate(struct virtio_mmio *t)
{
	for (unsigned i = 0; i < t->ops->nqueues; i++) {
		struct virtq *q = &t->queues[i];
		if (!q->ready || vq_activate(q, t->mem)) {
			needs_reset(t);
			return;
		}
	}
	if (t->ops->activate && t->ops->activate(t->dev, t))
		needs_reset(t);
	else
		virtio_mmio_signal(t);
}

/* Status writes may only add the next step (or FAILED); anything else is
 * ignored, as is FEATURES_OK without VIRTIO_F_VERSION_1, which the driver
 * then sees missing when it reads the status back. */
static void write_status(struct virtio_mmio *t, uint32_t v)
{
	if (v == 0) {
		device_reset(t);
		return;
	}
	if (t->status & VIRTIO_CONFIG_S_FAILED) {
		atomic_fetch_add(&t->ignored_writes, 1);   /* only a reset follows FAILED */
		return;
	}
	uint32_t cur = t->status & STATUS_STEPS;
	uint32_t want = v & STATUS_STEPS;
	if ((v & VIRTIO_CONFIG_S_FAILED) && (want & cur) == cur) {
		t->status |= VIRTIO_CONFIG_S_FAILED;
		return;
	}
	uint32_t next;
	if (cur == 0)
		next = VIRTIO_CONFIG_S_ACKNOWLEDGE;
	else if (cur == VIRTIO_CONFIG_S_ACKNOWLEDGE)
		next = VIRTIO_CONFIG_S_DRIVER;
	else if (cur == (VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER))
		next = VIRTIO_CONFIG_S_FEATURES_OK;
	else if (cur == (STATUS_STEPS & ~(uint32_t)VIRTIO_CONFIG_S_DRIVER_OK))
		next = VIRTIO_CONFIG_S_DRIVER_OK;
	else
		next = 0;
	if (!next || want != (cur | next) || (v & ~(STATUS_STEPS | VIRTIO_CONFIG_S_NEEDS_RESET))) {
		atomic_fetch_add(&t->ignored_writes, 1);
		return;
	}
	if (next == VIRTIO_CONFIG_S_FEATURES_OK && !(t->driver_features & (1ull << VIRTIO_F_VERSION_1)))
		return;
	t->status |= next;
	if (next == VIRTIO_CONFIG_S_DRIVER_OK)
		activate(t);
}

static struct virtq *selected_queue(struct virtio_mmio *t)
{
	return t->queue_sel < t->ops->nqueues ? &t->queues[t->queue_sel] : NULL;
}

/* Queue configuration is writable only between FEATURES_OK and DRIVER_OK. */
static struct virtq *writable_queue(struct virtio_mmio *t)
{
	uint32_t s = t->status;
	if (!(s & VIRTIO_CONFIG_S_FEATURES_OK) || (s & (VIRTIO_CONFIG_S_DRIVER_OK | VIRTIO_CONFIG_S_FAILED)))
		return NULL;
	return selected_queue(t);
}

static uint32_t read_reg(struct virtio_mmio *t, uint64_t off)
{
	struct virtq *q = selected_queue(t);
	switch (off) {
	case VIRTIO_MMIO_MAGIC_VALUE: return MMIO_MAGIC;
	case VIRTIO_MMIO_VERSION: return MMIO_VERSION;
	case VIRTIO_MMIO_DEVICE_ID: return t->ops->device_id;
	case VIRTIO_MMIO_VENDOR_ID: return 0;
	case VIRTIO_MMIO_DEVICE_FEATURES:
		return t->device_features_sel < 2 ? (uint32_t)(t->device_features >> (32 * t->device_features_sel)) : 0;
	case VIRTIO_MMIO_QUEUE_NUM_MAX: return q ? q->max_size : 0;
	case VIRTIO_MMIO_QUEUE_READY: return q ? q->ready : 0;
	case VIRTIO_MMIO_INTERRUPT_STATUS: return atomic_load(&t->interrupt_status);
	case VIRTIO_MMIO_STATUS: return t->status;
	/* No shared memory regions: a length of all ones says so. */
	case VIRTIO_MMIO_SHM_LEN_LOW:
	case VIRTIO_MMIO_SHM_LEN_HIGH:
	case VIRTIO_MMIO_SHM_BASE_LOW:
	case VIRTIO_MMIO_SHM_BASE_HIGH: return 0xffffffffu;
	case VIRTIO_MMIO_CONFIG_GENERATION: return t->config_generation;
	default: return 0;
	}
}

static void set_half(uint64_t *reg, bool high, uint32_t v)
{
	if (high)
		*reg = (*reg & 0xffffffffull) | ((uint64_t)v << 32);
	else
		*reg = (*reg & ~0xffffffffull) | v;
}

static bool write_reg(struct virtio_mmio *t, uint64_t off, uint32_t v)
{
	struct virtq *q;
	switch (off) {
	case VIRTIO_MMIO_DEVICE_FEATURES_SEL: t->device_features_sel = v; return true;
	case VIRTIO_MMIO_DRIVER_FEATURES_SEL: t->driver_features_sel = v; return true;
	case VIRTIO_MMIO_DRIVER_FEATURES:
		if ((t->status & (VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK)) != VIRTIO_CONFIG_S_DRIVER ||
		    t->driver_features_sel > 1)
			return false;
		/* Whatever the driver claims, it gets only what was offered. */
		set_half(&t->driver_features, t->driver_features_sel == 1,
			 v & (uint32_t)(t->device_features >> (32 * t->driver_features_sel)));
		return true;
	case VIRTIO_MMIO_QUEUE_SEL: t->queue_sel = v; return true;
	case VIRTIO_MMIO_QUEUE_NOTIFY:
		/* Reached only when no ioeventfd claimed the write. */
		if (v >= t->ops->nqueues)
			return false;
		(void)eventfd_write(t->kick_fd[v], 1);
		return true;
	case VIRTIO_MMIO_INTERRUPT_ACK: atomic_fetch_and(&t->interrupt_status, ~v); return true;
	case VIRTIO_MMIO_STATUS: write_status(t, v); return true;
	}
	if (!(q = writable_queue(t)))
		return false;
	switch (off) {
	case VIRTIO_MMIO_QUEUE_NUM:
		if (v > q->max_size)
			return false;
		q->size = (uint16_t)v;
		return true;
	case VIRTIO_MMIO_QUEUE_READY: q->ready = v == 1; return true;
	case VIRTIO_MMIO_QUEUE_DESC_LOW: set_half(&q->desc_gpa, false, v); return true;
	case VIRTIO_MMIO_QUEUE_DESC_HIGH: set_half(&q->desc_gpa, true, v); return true;
	case VIRTIO_MMIO_QUEUE_AVAIL_LOW: set_half(&q->avail_gpa, false, v); return true;
	case VIRTIO_MMIO_QUEUE_AVAIL_HIGH: set_half(&q->avail_gpa, true, v); return true;
	case VIRTIO_MMIO_QUEUE_USED_LOW: set_half(&q->used_gpa, false, v); return true;
	case VIRTIO_MMIO_QUEUE_USED_HIGH: set_half(&q->used_gpa, true, v); return true;
	default: return false;
	}
}

void virtio_mmio_read(void *opaque, uint64_t offset, uint8_t *data, uint32_t len)
{
	struct virtio_mmio *t = opaque;
	memset(data, 0, len);
	if (offset >= VIRTIO_MMIO_CONFIG) {
		/* Config space: any width; what lies past the device's config
		 * reads as zero. */
		uint64_t off = offset - VIRTIO_MMIO_CONFIG;
		pthread_mutex_lock(&t->lock);
		for (uint32_t i = 0; i < len; i++)
			if (off + i < t->config_len)
				data[i] = t->config[off + i];
		pthread_mutex_unlock(&t->lock);
		return;
	}
	/* Registers are 32 bits wide and read whole (virtio 1.2, 4.2.2.2). */
	if (len != 4 || (offset & 3))
		return;
	uint32_t v;
	if (offset == VIRTIO_MMIO_INTERRUPT_STATUS) {
		v = atomic_load(&t->interrupt_status);
	} else {
		pthread_mutex_lock(&t->lock);
		v = read_reg(t, offset);
		pthread_mutex_unlock(&t->lock);
	}
	memcpy(data, &v, 4);
}

void virtio_mmio_write(void *opaque, uint64_t offset, const uint8_t *data, uint32_t len)
{
	struct virtio_mmio *t = opaque;
	uint32_t v;
	/* No device here has writable config fields; registers are written
	 * whole. */
	if (offset >= VIRTIO_MMIO_CONFIG || len != 4 || (offset & 3)) {
		atomic_fetch_add(&t->ignored_writes, 1);
		return;
	}
	memcpy(&v, data, 4);
	bool ok;
	if (offset == VIRTIO_MMIO_INTERRUPT_ACK) {
		atomic_fetch_and(&t->interrupt_status, ~v);
		ok = true;
	} else {
		pthread_mutex_lock(&t->lock);
		ok = write_reg(t, offset, v);
		pthread_mutex_unlock(&t->lock);
	}
	if (!ok)
		atomic_fetch_add(&t->ignored_writes, 1);
}

int virtio_mmio_cmdline(const struct virtio_mmio *t, char *buf, size_t len)
{
	int n = snprintf(buf, len, "virtio_mmio.device=4K@0x%llx:%u", (unsigned long long)t->base, t->irq);
	return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

void virtio_mmio_describe(struct virtio_mmio *t, char *buf, size_t len)
{
	pthread_mutex_lock(&t->lock);
	int n = snprintf(buf, len, "%s: irq %u, status 0x%x isr 0x%x", t->ops->name, t->irq, t->status,
			 atomic_load(&t->interrupt_status));
	size_t used = n < 0 ? len : (size_t)n;
	for (unsigned i = 0; i < t->ops->nqueues && used < len; i++) {
		char q[80];
		vq_state(&t->queues[i], q, sizeof(q));
		n = snprintf(buf + used, len - used, ", q%u %s signalled %u", i, q, t->signalled[i]);
		used = n < 0 ? len : used + (size_t)n;
	}
	if (t->ops->describe && used + 2 < len) {
		memcpy(buf + used, ", ", 3);
		t->ops->describe(t->dev, buf + used + 2, len - used - 2);
	}
	pthread_mutex_unlock(&t->lock);
}

void virtio_mmio_config_changed(struct virtio_mmio *t, const void *config, uint32_t len)
{
	pthread_mutex_lock(&t->lock);
	if (len > VIRTIO_MMIO_CONFIG_MAX)
		len = VIRTIO_MMIO_CONFIG_MAX;
	memcpy(t->config, config, len);
	t->config_len = len;
	t->config_generation++;
	if (virtio_mmio_live(t))
		raise_irq(t, VIRTIO_MMIO_INT_CONFIG);
	pthread_mutex_unlock(&t->lock);
}

void virtio_mmio_save(const struct virtio_mmio *t, struct virtio_mmio_state *s)
{
	memset(s, 0, sizeof(*s));
	s->device_id = t->ops->device_id;
	s->status = t->status;
	s->driver_features = t->driver_features;
	s->device_features_sel = t->device_features_sel;
	s->driver_features_sel = t->driver_features_sel;
	s->queue_sel = t->queue_sel;
	s->interrupt_status = atomic_load(&((struct virtio_mmio *)t)->interrupt_status);
	s->config_generation = t->config_generation;
	s->nqueues = t->ops->nqueues;
	for (unsigned i = 0; i < t->ops->nqueues; i++) {
		const struct virtq *q = &t->queues[i];
		s->queues[i] = (struct virtio_mmio_queue_state){
			.size = q->size, .last_avail = q->last_avail, .used_idx = q->used_idx,
			.signalled = t->signalled[i], .ready = q->ready, .desc_gpa = q->desc_gpa,
			.avail_gpa = q->avail_gpa, .used_gpa = q->used_gpa,
		};
	}
}

static int restore_queue(struct virtio_mmio *t, unsigned i, const struct virtio_mmio_queue_state *qs, bool live,
			 char *err, size_t errlen)
{
	struct virtq *q = &t->queues[i];
	if (qs->size > q->max_size || qs->ready > 1 || qs->pad) {
		snprintf(err, errlen, "virtio-%s queue %u: size %u over the maximum %u, or a bad field", t->ops->name, i,
			 qs->size, q->max_size);
		return -1;
	}
	q->size = qs->size;
	q->ready = qs->ready;
	q->desc_gpa = qs->desc_gpa;
	q->avail_gpa = qs->avail_gpa;
	q->used_gpa = qs->used_gpa;
	/* vq_activate validates the rings as DRIVER_OK did at boot, against
	 * this VM's memory. */
	if (live && vq_activate(q, t->mem)) {
		snprintf(err, errlen, "virtio-%s queue %u: its rings are not valid in guest memory", t->ops->name, i);
		return -1;
	}
	q->last_avail = qs->last_avail;
	q->used_idx = qs->used_idx;
	t->signalled[i] = qs->signalled;
	return 0;
}

int virtio_mmio_restore(struct virtio_mmio *t, const struct virtio_mmio_state *s, char *err, size_t errlen)
{
	if (s->device_id != t->ops->device_id || s->nqueues != t->ops->nqueues) {
		snprintf(err, errlen, "virtio-%s: the snapshot has device %u with %u queues there", t->ops->name,
			 s->device_id, s->nqueues);
		return -1;
	}
	if ((s->driver_features & ~t->device_features) || (s->status & ~(STATUS_STEPS | VIRTIO_CONFIG_S_NEEDS_RESET |
									  VIRTIO_CONFIG_S_FAILED))) {
		snprintf(err, errlen, "virtio-%s: features or status the device never offered", t->ops->name);
		return -1;
	}
	t->status = s->status;
	t->driver_features = s->driver_features;
	t->device_features_sel = s->device_features_sel;
	t->driver_features_sel = s->driver_features_sel;
	t->queue_sel = s->queue_sel;
	t->config_generation = s->config_generation;
	atomic_store(&t->interrupt_status, s->interrupt_status & (VIRTIO_MMIO_INT_VRING | VIRTIO_MMIO_INT_CONFIG));
	bool live = virtio_mmio_live(t);
	for (unsigned i = 0; i < t->ops->nqueues; i++)
		if (restore_queue(t, i, &s->queues[i], live, err, errlen))
			return -1;
	return 0;
}

void virtio_faults_append(char *buf, size_t len, size_t *used, const char *name, uint64_t n, const char *what)
{
	if (!n || *used >= len)
		return;
	int k = snprintf(buf + *used, len - *used, "%s%s: %llu %s", *used ? ", " : "", name, (unsigned long long)n, what);
	*used = k < 0 ? len : *used + (size_t)k;
}

void virtio_mmio_faults(const struct virtio_mmio *t, const char *name, char *buf, size_t len, size_t *used)
{
	uint64_t bad = 0;
	for (unsigned i = 0; i < t->ops->nqueues; i++)
		bad += t->queues[i].bad_chains;
	virtio_faults_append(buf, len, used, name, atomic_load(&t->ignored_writes), "register writes ignored");
	virtio_faults_append(buf, len, used, name, bad, "bad chains");
	virtio_faults_append(buf, len, used, name, t->resets_needed, "times needing a reset");
}
