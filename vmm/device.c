/* The device kinds (device.h), in slot order: the disks first (vda is
 * the root), then vsock, then rng, as every snapshot made so far has
 * them. */
#include "device.h"

#include <stddef.h>

const struct vmm_device_kind *const vmm_device_kinds[] = {
	&virtio_blk_kind,
	&virtio_vsock_kind,
	&virtio_rng_kind,
	NULL,
};
