/* The virtio-mmio transport (virtio 1.2, 4.2, version 2 registers only).
 *
 * It alone decodes the register window, runs the device status state
 * machine, masks the features a driver may accept to those the device
 * offered, owns the queues' configuration, and says where the device is on
 * the kernel command line. Devices see only their ops: activate, a queue
 * notification, reset.
 *
 * Threads: vCPU threads call the bus callbacks; queue notifications reach
 * the device on the event-loop thread through one eventfd per queue (a KVM
 * ioeventfd in the VMM); the device interrupts through one eventfd (a KVM
 * irqfd). The transport lock serialises the two sides; the interrupt status
 * is atomic so that the guest's interrupt handler never waits for I/O. */
#ifndef VMM_VIRTIO_MMIO_H
#define VMM_VIRTIO_MMIO_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "guest_mem.h"
#include "virtqueue.h"

#define VIRTIO_MMIO_WINDOW     0x1000   /* bytes of register space per device */
#define VIRTIO_MMIO_MAX_QUEUES 3        /* vsock has the most: rx, tx, event */
#define VIRTIO_MMIO_CONFIG_MAX 64       /* bytes of device config space we keep */

struct virtio_mmio;

/* What a device supplies. The transport calls these with its lock held;
 * activate and reset may be NULL for a device with nothing to do then. */
struct virtio_dev_ops {
	const char *name;        /* for messages: "blk", "vsock", "rng" */
	uint32_t device_id;      /* VIRTIO_ID_* */
	unsigned nqueues;
	uint16_t queue_max;      /* offered size of every queue, <= VQ_MAX_SIZE */

	/* The driver set DRIVER_OK and every queue is valid. Returns 0, or -1
	 * to refuse (the transport then sets DEVICE_NEEDS_RESET). */
	int (*activate)(void *dev, struct virtio_mmio *t);

	/* The driver made buffers available on queue q (event-loop thread). */
	void (*notify)(void *dev, struct virtio_mmio *t, unsigned q);

	/* The driver reset the device: drop every in-flight state. */
	void (*reset)(void *dev);

	/* Optional: the device's own state in words (its connections, its
	 * counters) into buf, for vmm's state line; the lock is held. */
	void (*describe)(void *dev, char *buf, size_t len);
};

struct virtio_mmio {
	pthread_mutex_t lock;
	const struct virtio_dev_ops *ops;
	void *dev;
	const struct guest_mem *mem;
	uint64_t base;
	unsigned irq;

	uint64_t device_features;  /* offered; VIRTIO_F_VERSION_1 always */
	uint64_t driver_features;  /* accepted, always a subset of the offer */
	uint32_t device_features_sel, driver_features_sel, queue_sel;
	uint32_t status;
	_Atomic uint32_t interrupt_status;
	struct virtq queues[VIRTIO_MMIO_MAX_QUEUES];
	uint16_t signalled[VIRTIO_MMIO_MAX_QUEUES];   /* used index at the last signal */
	uint8_t config[VIRTIO_MMIO_CONFIG_MAX];
	uint32_t config_len;
	uint32_t config_generation;   /* bumped by every config change after start */

	int irq_fd;                               /* written to raise the interrupt */
	int kick_fd[VIRTIO_MMIO_MAX_QUEUES];      /* readable when a queue was notified */

	atomic_ulong ignored_writes;  /* out-of-state or malformed register writes */
	uint64_t resets_needed;       /* times the device entered DEVICE_NEEDS_RESET */
};

/* Set up a transport for dev at base/irq: create its eventfds and lock.
 * features is what the device offers besides VIRTIO_F_VERSION_1; config
 * (config_len bytes, at most VIRTIO_MMIO_CONFIG_MAX) is its config space.
 * Returns 0, or -1 after one error line. */
int virtio_mmio_init(struct virtio_mmio *t, const struct virtio_dev_ops *ops, void *dev,
		     const struct guest_mem *mem, uint64_t base, unsigned irq, uint64_t features,
		     const void *config, uint32_t config_len);

/* Close the eventfds and the lock; safe on a zeroed transport. */
void virtio_mmio_release(struct virtio_mmio *t);

/* Bus callbacks for the register window. */
void virtio_mmio_read(void *opaque, uint64_t offset, uint8_t *data, uint32_t len);
void virtio_mmio_write(void *opaque, uint64_t offset, const uint8_t *data, uint32_t len);

/* Run the device for queue q after a notification (the event loop calls
 * this when kick_fd[q] fires; tests call it directly). Does nothing unless
 * the device is live. */
void virtio_mmio_kick(struct virtio_mmio *t, unsigned q);

/* Take and release the transport lock, for device work that does not start
 * with a queue notification (a socket becoming readable). */
void virtio_mmio_lock(struct virtio_mmio *t);
void virtio_mmio_unlock(struct virtio_mmio *t);

/* Whether the driver set DRIVER_OK and the device does not need a reset. */
bool virtio_mmio_live(const struct virtio_mmio *t);

/* After device work (lock held): interrupt the guest for every queue whose
 * used ring moved since the last call (chains the walker returned unused
 * included), unless it suppressed interrupts; a queue that went broken puts
 * the device in DEVICE_NEEDS_RESET. The transport calls it after notify and
 * activate; a device calls it after work of its own (socket events). */
void virtio_mmio_signal(struct virtio_mmio *t);

/* The device's config space changed (a restored VM's workspace disk got
 * its file): new contents, a new generation, and a config interrupt when
 * the driver is live. Takes the lock. */
void virtio_mmio_config_changed(struct virtio_mmio *t, const void *config, uint32_t len);

/* A transport's state as a snapshot keeps it: what the driver configured,
 * the queues' positions and the interrupt status. The device's own state
 * (config space, back-ends) is the device's. Fixed layout. */
struct virtio_mmio_state {
	uint32_t device_id;                 /* checked against the device on restore */
	uint32_t status;
	uint64_t driver_features;
	uint32_t device_features_sel, driver_features_sel, queue_sel;
	uint32_t interrupt_status;
	uint32_t config_generation;
	uint32_t nqueues;
	struct virtio_mmio_queue_state {
		uint16_t size, last_avail, used_idx, signalled;
		uint32_t ready;
		uint32_t pad;
		uint64_t desc_gpa, avail_gpa, used_gpa;
	} queues[VIRTIO_MMIO_MAX_QUEUES];
};

/* Copy t's state into *s (lock held by the caller, or the VM stopped). */
void virtio_mmio_save(const struct virtio_mmio *t, struct virtio_mmio_state *s);

/* Put a saved state back into a freshly initialised t: the same device,
 * every field checked as the register writes would have (features within
 * the offer, queue sizes within the maximum), rings mapped again when the
 * driver was live. Devices are not told (their own restore follows).
 * Returns 0, or -1 with a reason in err. */
int virtio_mmio_restore(struct virtio_mmio *t, const struct virtio_mmio_state *s, char *err, size_t errlen);

/* Write this device's "virtio_mmio.device=4K@0x...:IRQ" kernel parameter
 * into buf. Returns 0, or -1 when it does not fit. */
int virtio_mmio_cmdline(const struct virtio_mmio *t, char *buf, size_t len);

/* What the device is doing now, in one line into buf, taken under its lock:
 * "vsock: irq 7, status 0xf isr 0x0, q0 avail 64 next 64 used 64 signalled
 * 64, ..., " (the irq tells two disks apart) then the
 * device's describe op. For vmm's state line, which says whether a guest
 * that seems stuck still has buffers, interrupts and data in flight. */
void virtio_mmio_describe(struct virtio_mmio *t, char *buf, size_t len);

/* Append ", NAME: N WHAT" (without the comma when buf is empty so far) to
 * buf, which has len bytes and *used of them taken, when n is not 0; a
 * buf that fills up is cut, never overrun. For the devices' fault ops. */
void virtio_faults_append(char *buf, size_t len, size_t *used, const char *name, uint64_t n, const char *what);

/* The transport's own counts of t (register writes ignored, bad chains,
 * resets needed) appended as virtio_faults_append does, under name. */
void virtio_mmio_faults(const struct virtio_mmio *t, const char *name, char *buf, size_t len, size_t *used);

#endif
