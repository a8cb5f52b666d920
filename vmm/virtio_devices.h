/* The VM's virtio devices, from the command line to KVM: every device
 * each kind of device.h asks for (one virtio-blk per --disk, virtio-vsock
 * with --vsock-uds, virtio-rng always), each in the next arch slot, with
 * its registers on the MMIO bus, an ioeventfd per queue watched by the
 * event loop, an irqfd, and a kernel command-line parameter. */
#ifndef VMM_VIRTIO_DEVICES_H
#define VMM_VIRTIO_DEVICES_H

#include <stddef.h>

#include "args.h"
#include "vm.h"

/* Create every device cfg asks for, in its slot: open the disk files, create
 * the vsock socket. Needs guest memory and the event loop but not KVM, so a
 * bad disk or socket path is reported the same on every host. Returns 0, or
 * -1 after one error line (devices made so far are released by
 * virtio_devices_release). */
int virtio_devices_init(struct vm *vm, const struct vmm_config *cfg);

/* Wire the devices made by virtio_devices_init into KVM: register windows on
 * the MMIO bus, an ioeventfd per queue watched by the event loop, an irqfd
 * each. Returns 0, or -1 after one error line. */
int virtio_devices_attach(struct vm *vm);

/* Write the devices' kernel parameters, space-separated, into buf.
 * Returns 0, or -1 when they do not fit. */
int virtio_devices_cmdline(const struct vm *vm, char *buf, size_t len);

/* What the guest did wrong to the devices, as they counted it: register
 * writes ignored, chains returned unused, DEVICE_NEEDS_RESET entered,
 * block requests failed, vsock packets dropped. Written into buf as
 * "vda: 2 requests failed, rng: 9 bad chains, ..." (devices that counted
 * nothing left out); an empty string when nothing was counted. */
void virtio_devices_faults(const struct vm *vm, char *buf, size_t len);

struct snap_meta;

/* A restored VM's devices, each kind told what differs from the snapshot
 * (meta, what it was made with): a slot it had empty now filled, the
 * agent's vsock connection gone. After their state is back. */
void virtio_devices_restored(struct vm *vm, const struct vmm_config *cfg, const struct snap_meta *meta);

/* Stop watching the queues and release every device (removing the vsock
 * socket file). Call after the vCPUs are joined. */
void virtio_devices_release(struct vm *vm);

#endif
