#include "virtio_blk.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/virtio_ids.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "device.h"
#include "log.h"
#include "snapshot.h"
#include "vm.h"

_Static_assert(sizeof(struct virtio_blk_outhdr) == 16, "request header of virtio 1.2, 5.2.6");
_Static_assert(BLK_QUEUE_SIZE <= VQ_MAX_SIZE, "queue fits the chain arrays");

uint8_t blk_parse(const struct vq_chain *c, uint64_t capacity, bool ro, struct blk_req *r)
{
	struct virtio_blk_outhdr h;
	size_t got;
	r->niov = 0;
	r->len = 0;
	r->has_status = c->in_len >= 1;
	if (!r->has_status || iov_read(c->out, c->nout, 0, &h, sizeof(h)) != sizeof(h))
		return VIRTIO_BLK_S_IOERR;
	r->type = h.type;
	switch (h.type) {
	case VIRTIO_BLK_T_IN:
		r->niov = iov_slice(c->in, c->nin, 0, c->in_len - 1, r->iov, VQ_MAX_SIZE, &got);
		break;
	case VIRTIO_BLK_T_OUT:
		if (ro)
			return VIRTIO_BLK_S_IOERR;
		r->niov = iov_slice(c->out, c->nout, sizeof(h), c->out_len - sizeof(h), r->iov, VQ_MAX_SIZE, &got);
		break;
	case VIRTIO_BLK_T_FLUSH:
		return VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_GET_ID:
		r->niov = iov_slice(c->in, c->nin, 0, c->in_len - 1, r->iov, VQ_MAX_SIZE, &got);
		r->len = got < VIRTIO_BLK_ID_BYTES ? got : VIRTIO_BLK_ID_BYTES;
		return VIRTIO_BLK_S_OK;
	default:
		return VIRTIO_BLK_S_UNSUPP;
	}
	/* Data requests: whole sectors, all of them inside the disk. A read
	 * reports its data and status byte as the used ring's 32-bit length,
	 * so one of 4 GiB or more is refused: its length would wrap. */
	r->len = got;
	if (got == 0 || got % BLK_SECTOR || h.sector > capacity || got / BLK_SECTOR > capacity - h.sector)
		return VIRTIO_BLK_S_IOERR;
	if (h.type == VIRTIO_BLK_T_IN && got > UINT32_MAX - 1u)
		return VIRTIO_BLK_S_IOERR;
	r->offset = h.sector * BLK_SECTOR;
	return VIRTIO_BLK_S_OK;
}

/* preadv/pwritev until done; a short transfer at the end of the file is an
 * error (the image shrank under us). */
static int transfer(int fd, bool write, struct iovec *iov, unsigned n, uint64_t off, uint64_t len)
{
	while (len) {
		ssize_t k = write ? pwritev(fd, iov, (int)n, (off_t)off) : preadv(fd, iov, (int)n, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		off += (uint64_t)k;
		len -= (uint64_t)k;
		while (n && (size_t)k >= iov->iov_len) {
			k -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n) {
			iov->iov_base = (uint8_t *)iov->iov_base + k;
			iov->iov_len -= (size_t)k;
		}
	}
	return 0;
}

static uint8_t execute(struct virtio_blk *b, struct blk_req *r, uint32_t *written)
{
	switch (r->type) {
	case VIRTIO_BLK_T_IN:
		if (transfer(b->fd, false, r->iov, r->niov, r->offset, r->len))
			return VIRTIO_BLK_S_IOERR;
		*written = (uint32_t)r->len;   /* below 4 GiB: blk_parse refused more */
		return VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_OUT:
		return transfer(b->fd, true, r->iov, r->niov, r->offset, r->len) ? VIRTIO_BLK_S_IOERR
										   : VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_FLUSH:
		return (b->ro || fdatasync(b->fd) == 0) ? VIRTIO_BLK_S_OK : VIRTIO_BLK_S_IOERR;
	case VIRTIO_BLK_T_GET_ID:
		*written = (uint32_t)iov_write(r->iov, r->niov, 0, b->id, r->len);
		return VIRTIO_BLK_S_OK;
	default:
		return VIRTIO_BLK_S_UNSUPP;
	}
}

static void blk_notify(void *dev, struct virtio_mmio *t, unsigned qi)
{
	struct virtio_blk *b = dev;
	struct virtq *q = &t->queues[qi];
	struct vq_chain *c = &b->chain;
	(void)t;
	while (vq_pop(q, c) == VQ_CHAIN) {
		uint32_t written = 0;
		uint8_t status = blk_parse(c, b->capacity, b->ro, &b->req);
		if (status == VIRTIO_BLK_S_OK)
			status = execute(b, &b->req, &written);
		b->requests++;
		if (status != VIRTIO_BLK_S_OK)
			b->errors++;
		if (b->req.has_status) {
			iov_write(c->in, c->nin, c->in_len - 1, &status, 1);
			written++;
		}
		vq_push(q, c->head, written);
	}
}

static const struct virtio_dev_ops blk_ops = {
	.name = "blk",
	.device_id = VIRTIO_ID_BLOCK,
	.nqueues = 1,
	.queue_max = BLK_QUEUE_SIZE,
	.notify = blk_notify,
};

/* The device's config space for its current capacity. */
static void blk_config(const struct virtio_blk *b, struct virtio_blk_config *cfg, uint32_t *len)
{
	*cfg = (struct virtio_blk_config){ .capacity = b->capacity, .seg_max = BLK_SEG_MAX };
	/* Only the fields up to seg_max are offered; the rest reads as zero. */
	*len = offsetof(struct virtio_blk_config, seg_max) + sizeof(cfg->seg_max);
}

/* Open path as b's backing: fd, capacity and id. Returns 0, or -1 after
 * one error line naming the file. */
static int open_backing(struct virtio_blk *b, const char *path)
{
	b->fd = open(path, (b->ro ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOFOLLOW);
	if (b->fd < 0) {
		vmm_perr("disk %s", path);
		return -1;
	}
	struct stat st;
	if (fstat(b->fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)BLK_SECTOR) {
		vmm_err("disk %s: not a regular file of at least one sector", path);
		close(b->fd);
		b->fd = -1;
		return -1;
	}
	b->capacity = (uint64_t)st.st_size / BLK_SECTOR;
	/* A stable serial for /dev/disk/by-id: the image's device and inode. */
	char id[32];
	snprintf(id, sizeof(id), "vmrun%llx-%llx", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	memset(b->id, 0, sizeof(b->id));
	memcpy(b->id, id, strnlen(id, sizeof(b->id)));
	return 0;
}

int virtio_blk_init(struct virtio_blk *b, const char *path, bool ro, const struct guest_mem *mem,
		    uint64_t base, unsigned irq)
{
	memset(b, 0, sizeof(*b));
	b->ro = ro;
	b->fd = -1;
	if (path && open_backing(b, path))
		return -1;
	struct virtio_blk_config cfg;
	uint32_t cfg_len;
	blk_config(b, &cfg, &cfg_len);
	uint64_t features = (1ull << VIRTIO_BLK_F_SEG_MAX) | (1ull << VIRTIO_BLK_F_FLUSH) |
			    (ro ? 1ull << VIRTIO_BLK_F_RO : 0);
	if (virtio_mmio_init(&b->t, &blk_ops, b, mem, base, irq, features, &cfg, cfg_len)) {
		if (b->fd >= 0)
			close(b->fd);
		b->fd = -1;
		return -1;
	}
	return 0;
}

void virtio_blk_announce_capacity(struct virtio_blk *b)
{
	struct virtio_blk_config cfg;
	uint32_t cfg_len;
	blk_config(b, &cfg, &cfg_len);
	virtio_mmio_config_changed(&b->t, &cfg, cfg_len);
}

void virtio_blk_release(struct virtio_blk *b)
{
	virtio_mmio_release(&b->t);
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
}

/* ---- the kind: --disk, the VM's disks, a restore's new capacity ----------- */

enum { OPT_DISK = VMM_DEVICE_OPT_BASE };

/* "FILE" or "FILE,ro"; a FILE that itself ends in ",ro" needs "FILE,ro,ro". */
static int blk_option(struct vmm_config *cfg, int val, const char *arg)
{
	(void)val;
	size_t n = strlen(arg);
	bool ro = n >= 3 && strcmp(arg + n - 3, ",ro") == 0;
	if (ro)
		n -= 3;
	bool none = !ro && strcmp(arg, "none") == 0;
	if (cfg->ndisks == VMM_MAX_DISKS) {
		vmm_err("--disk: at most %d disks", VMM_MAX_DISKS);
		return -1;
	}
	if (n == 0 || n >= VMM_DISK_PATH_MAX) {
		vmm_err("--disk: '%s' is not FILE or FILE,ro", arg);
		return -1;
	}
	struct vmm_disk *d = &cfg->disks[cfg->ndisks++];
	memcpy(d->path, arg, n);
	d->path[n] = '\0';
	d->ro = ro;
	d->none = none;
	if (none)
		d->path[0] = '\0';
	return 0;
}

static int blk_check(const struct vmm_config *cfg)
{
	for (unsigned i = 0; !cfg->restore && !cfg->snapshot_out && i < cfg->ndisks; i++)
		if (cfg->disks[i].none) {
			vmm_err("--disk none: an empty slot is only for --snapshot-out and --restore");
			return -1;
		}
	return 0;
}

static unsigned blk_count(const struct vmm_config *cfg)
{
	return cfg->ndisks;
}

static int blk_create(struct vm *vm, const struct vmm_config *cfg, unsigned i, uint64_t base, unsigned irq,
		      struct virtio_mmio **t)
{
	const struct vmm_disk *d = &cfg->disks[i];
	if (virtio_blk_init(&vm->disks[i], d->none ? NULL : d->path, d->ro, &vm->mem, base, irq))
		return -1;
	vm->ndisks++;
	*t = &vm->disks[i].t;
	return 0;
}

/* A slot the snapshot had empty that this run fills: the driver still
 * thinks it has capacity 0. */
static void blk_restored(struct vm *vm, const struct vmm_config *cfg, const struct snap_meta *meta)
{
	for (unsigned i = 0; i < vm->ndisks && i < SNAP_MAX_DISKS; i++)
		if (meta->disks[i].empty && !cfg->disks[i].none)
			virtio_blk_announce_capacity(&vm->disks[i]);
}

static void blk_faults(const struct vm *vm, char *buf, size_t len, size_t *used)
{
	for (unsigned i = 0; i < vm->ndisks; i++) {
		char name[8] = "vd?";
		name[2] = (char)('a' + i);
		virtio_mmio_faults(&vm->disks[i].t, name, buf, len, used);
		virtio_faults_append(buf, len, used, name, vm->disks[i].errors, "requests failed");
	}
}

static void blk_release_all(struct vm *vm)
{
	for (unsigned i = 0; i < vm->ndisks; i++)
		virtio_blk_release(&vm->disks[i]);
	vm->ndisks = 0;
}

static const struct option blk_options[] = {
	{ "disk", required_argument, NULL, OPT_DISK },
	{ NULL, 0, NULL, 0 },
};

_Static_assert(VM_MAX_DISKS == VMM_MAX_DISKS, "the VM holds every disk the command line allows");
_Static_assert(SNAP_MAX_DISKS == VMM_MAX_DISKS, "a snapshot records every disk the command line allows");

const struct vmm_device_kind virtio_blk_kind = {
	.name = "blk",
	.options = blk_options,
	.synopsis = "[--disk FILE[,ro]]...",
	.usage = "  --disk FILE[,ro]       a raw disk image as virtio-blk (vda, vdb, ... in order; at\n"
		 "                         most 8); ,ro makes it read-only at the device; \"none\" is\n"
		 "                         an empty slot (capacity 0) that a restore may fill\n",
	.option = blk_option,
	.check = blk_check,
	.count = blk_count,
	.create = blk_create,
	.restored = blk_restored,
	.faults = blk_faults,
	.release = blk_release_all,
};
