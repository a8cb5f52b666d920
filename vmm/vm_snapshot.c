#include "vm_snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "kvm_arch.h"
#include "log.h"
#include "proto.h"
#include "virtio_devices.h"
#include "vmm_build_id.h"

#define PAGE SNAP_PAGE_SIZE

/* ---- what a snapshot is made from ----------------------------------------- */

/* The kernel file's identity (size, inode, mtime, as for disks): a
 * snapshot of another kernel would resume code that is not there. Not a
 * hash of its contents: reading the whole kernel on every restore would
 * cost more than the rest of vmm's start-up, and vmrun keys its snapshots
 * by the same identity. */
static int kernel_identity(const char *path, struct snap_meta *m)
{
	struct stat st;
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
		vmm_err("kernel %s: not a readable, non-empty file", path);
		return -1;
	}
	m->kernel_size = (uint64_t)st.st_size;
	m->kernel_ino = (uint64_t)st.st_ino;
	m->kernel_mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
	return 0;
}

/* What the snapshot's meta records about cfg: everything but the CPU and
 * the ready port, which need the VM. */
static int inputs_meta(const struct vmm_config *cfg, struct snap_meta *m)
{
	memset(m, 0, sizeof(*m));
	m->memory_bytes = cfg->memory_mib << 20;
	m->ncpus = cfg->cpus;
	m->ndisks = cfg->ndisks;
	m->has_vsock = cfg->vsock_uds != NULL;
	if (kernel_identity(cfg->kernel, m))
		return -1;
	for (unsigned i = 0; i < cfg->ndisks && i < SNAP_MAX_DISKS; i++) {
		struct snap_disk *d = &m->disks[i];
		d->ro = cfg->disks[i].ro;
		d->empty = cfg->disks[i].none;
		struct stat st;
		if (d->empty)
			continue;
		if (stat(cfg->disks[i].path, &st) < 0) {
			vmm_perr("disk %s", cfg->disks[i].path);
			return -1;
		}
		d->size = (uint64_t)st.st_size;
		d->ino = (uint64_t)st.st_ino;
		d->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
	}
	return 0;
}

/* ---- saving --------------------------------------------------------------- */

static void on_ready(void *ctx)
{
	vm_request_stop(ctx, VM_STOP_SNAPSHOT, "the agent is ready: snapshot");
}

int vm_snapshot_open_out(const char *opt, const char *dir, const char *name)
{
	char path[4096];
	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) {
		vmm_err("%s: path too long", opt);
		return -1;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	/* Readable by the jailed vmm of every run that restores it, whatever
	 * the umask. */
	if (fd < 0 || fchmod(fd, 0644) < 0) {
		vmm_perr("%s %s", opt, path);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

int vm_snapshot_prepare(struct vm *vm, const struct vmm_config *cfg, struct snapshot_out *out)
{
	out->state_fd = out->mem_fd = -1;
	if (!vm->has_vsock) {
		vmm_err("--snapshot-out needs --vsock-uds: the agent says it is ready over vsock");
		return -1;
	}
	if (inputs_meta(cfg, &out->meta))
		return -1;
	out->meta.host_cpu = kvm_arch_host_cpu(vm);
	out->meta.nvirtio = vm->nvirtio;
	if ((out->state_fd = vm_snapshot_open_out("--snapshot-out", cfg->snapshot_out, SNAP_STATE_FILE)) < 0 ||
	    (out->mem_fd = vm_snapshot_open_out("--snapshot-out", cfg->snapshot_out, SNAP_MEMORY_FILE)) < 0)
		return -1;
	/* Full size now, holes where the guest's pages are zero later. */
	if (ftruncate(out->mem_fd, (off_t)vm->mem.size) < 0) {
		vmm_perr("--snapshot-out: sizing the memory file");
		return -1;
	}
	vm->snapshotting = true;
	vm->vsock.ready_port = PROTO_READY_VSOCK_PORT;
	vm->vsock.on_ready = on_ready;
	vm->vsock.ready_ctx = vm;
	return 0;
}

int vm_snapshot_write_all(int fd, const uint8_t *p, size_t len, off_t at)
{
	while (len) {
		struct iovec iov = { .iov_base = (void *)p, .iov_len = len };
		ssize_t n = pwritev(fd, &iov, 1, at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
		at += n;
	}
	return 0;
}

/* Runs of non-zero pages, each with one write; zero pages stay holes. */
static int write_memory(const struct guest_mem *gm, int fd)
{
	uint64_t run = 0, n = 0;
	for (uint64_t off = 0; off <= gm->size; off += PAGE) {
		bool data = off < gm->size && !snap_page_zero(gm->base + off);
		if (data) {
			if (!n)
				run = off;
			n += PAGE;
			continue;
		}
		if (n && vm_snapshot_write_all(fd, gm->base + run, (size_t)n, (off_t)run))
			return -1;
		n = 0;
	}
	return 0;
}

static void save_devices(struct vm *vm, struct snap_writer *w)
{
	struct serial_8250_state ss;
	serial_save(&vm->serial, &ss);
	snap_add(w, SNAP_TAG_SERIAL, 0, &ss, sizeof(ss));
	for (unsigned i = 0; i < vm->nvirtio; i++) {
		struct virtio_mmio_state ts;
		virtio_mmio_lock(vm->virtio[i]);
		virtio_mmio_save(vm->virtio[i], &ts);
		virtio_mmio_unlock(vm->virtio[i]);
		snap_add(w, SNAP_TAG_VIRTIO, i, &ts, sizeof(ts));
	}
}

int vm_snapshot_state(struct vm *vm, const struct snap_meta *meta, const struct snap_pause *pause,
		      struct snap_writer *w)
{
	char err[256];
	if (snap_writer_init(w)) {
		vmm_err("snapshot: out of memory");
		return -1;
	}
	snap_add(w, SNAP_TAG_META, 0, meta, sizeof(*meta));
	if (pause)
		snap_add(w, SNAP_TAG_PAUSE, 0, pause, sizeof(*pause));
	if (kvm_arch_snapshot_save(vm, w, err, sizeof(err))) {
		vmm_err("snapshot: %s", err);
		return -1;
	}
	save_devices(vm, w);
	if (snap_finish(w, VMM_BUILD_ID, snap_arch)) {
		vmm_err("snapshot: out of memory for the state file");
		return -1;
	}
	return 0;
}

int vm_snapshot_write(struct vm *vm, struct snapshot_out *out)
{
	struct snap_writer w;
	int rc = -1;
	out->meta.ready_peer = vm->vsock.ready_peer;
	if (vm_snapshot_state(vm, &out->meta, NULL, &w))
		goto out;
	if (write_memory(&vm->mem, out->mem_fd) || vm_snapshot_write_all(out->state_fd, w.buf, w.len, 0) ||
	    fsync(out->mem_fd) < 0 || fsync(out->state_fd) < 0) {
		vmm_perr("snapshot: writing the files");
		goto out;
	}
	rc = 0;
out:
	snap_writer_release(&w);
	return rc;
}

void vm_snapshot_out_release(struct snapshot_out *out)
{
	if (out->state_fd >= 0)
		close(out->state_fd);
	if (out->mem_fd >= 0)
		close(out->mem_fd);
	out->state_fd = out->mem_fd = -1;
}

/* ---- restoring ------------------------------------------------------------ */

int vm_snapshot_read_all(int fd, uint8_t *p, size_t len, off_t at)
{
	while (len) {
		ssize_t n = pread(fd, p, len, at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = 0;
			return -1;
		}
		p += n;
		len -= (size_t)n;
		at += n;
	}
	return 0;
}

int vm_snapshot_read_state(const char *dir, struct snapshot_in *in)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, SNAP_STATE_FILE);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		vmm_perr("snapshot %s: %s", dir, SNAP_STATE_FILE);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int rc = -1;
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 || (uint64_t)st.st_size > SNAP_MAX_STATE) {
		vmm_err("snapshot %s: %s is not a regular file of 1 to %u bytes", dir, SNAP_STATE_FILE, SNAP_MAX_STATE);
		goto out;
	}
	in->len = (size_t)st.st_size;
	in->buf = malloc(in->len);
	if (!in->buf) {
		vmm_err("snapshot %s: out of memory", dir);
		goto out;
	}
	if (vm_snapshot_read_all(fd, in->buf, in->len, 0)) {
		vmm_err("snapshot %s: %s: short read", dir, SNAP_STATE_FILE);
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

/* A disk as the run names it against the disk as the snapshot saw it. */
static int check_disk(const char *dir, unsigned i, const struct snap_disk *was, const struct snap_disk *now)
{
	if (was->ro != now->ro) {
		vmm_err("snapshot %s: disk %u was %s, this run's is %s", dir, i, was->ro ? "read-only" : "writable",
			now->ro ? "read-only" : "writable");
		return -1;
	}
	if (was->empty)
		return 0;   /* the workspace slot: any file, or still none */
	if (now->empty || was->size != now->size || was->ino != now->ino || was->mtime_ns != now->mtime_ns) {
		vmm_err("snapshot %s: disk %u is not the image the snapshot was made with (size, inode or mtime differ)",
			dir, i);
		return -1;
	}
	return 0;
}

static int check_meta(const struct vmm_config *cfg, const struct snap_meta *was)
{
	const char *dir = cfg->restore;
	struct snap_meta now;
	if (inputs_meta(cfg, &now))
		return -1;
	if (was->memory_bytes != now.memory_bytes || was->ncpus != now.ncpus) {
		vmm_err("snapshot %s: made with %llu MiB and %u vCPUs, this run asks for %llu MiB and %u", dir,
			(unsigned long long)(was->memory_bytes >> 20), was->ncpus,
			(unsigned long long)(now.memory_bytes >> 20), now.ncpus);
		return -1;
	}
	if (was->kernel_size != now.kernel_size || was->kernel_ino != now.kernel_ino ||
	    was->kernel_mtime_ns != now.kernel_mtime_ns) {
		vmm_err("snapshot %s: made with another kernel than %s", dir, cfg->kernel);
		return -1;
	}
	if (was->ndisks != now.ndisks || was->has_vsock != now.has_vsock) {
		vmm_err("snapshot %s: made with %u disks%s, this run has %u%s", dir, was->ndisks,
			was->has_vsock ? " and vsock" : "", now.ndisks, now.has_vsock ? " and vsock" : "");
		return -1;
	}
	for (unsigned i = 0; i < now.ndisks && i < SNAP_MAX_DISKS; i++)
		if (check_disk(dir, i, &was->disks[i], &now.disks[i]))
			return -1;
	return 0;
}

int vm_restore_load(const struct vmm_config *cfg, struct snapshot_in *in)
{
	memset(in, 0, sizeof(*in));
	in->mem_fd = -1;
	const char *dir = cfg->restore;
	char err[256];
	if (vm_snapshot_read_state(dir, in))
		return -1;
	if (snap_parse(in->buf, in->len, VMM_BUILD_ID, snap_arch, &in->view, err, sizeof(err)) ||
	    snap_get(&in->view, SNAP_TAG_META, 0, &in->meta, sizeof(in->meta))) {
		vmm_err("snapshot %s: %s", dir, err);
		return -1;
	}
	if (check_meta(cfg, &in->meta))
		return -1;
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, SNAP_MEMORY_FILE);
	in->mem_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (in->mem_fd < 0 || fstat(in->mem_fd, &st) < 0) {
		vmm_perr("snapshot %s: %s", dir, SNAP_MEMORY_FILE);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != in->meta.memory_bytes) {
		vmm_err("snapshot %s: %s is not %llu bytes of guest memory", dir, SNAP_MEMORY_FILE,
			(unsigned long long)in->meta.memory_bytes);
		return -1;
	}
	return 0;
}

static int restore_devices(struct vm *vm, const struct snapshot_in *in, char *err, size_t errlen)
{
	struct serial_8250_state ss;
	if (snap_get(&in->view, SNAP_TAG_SERIAL, 0, &ss, sizeof(ss))) {
		snprintf(err, errlen, "no serial record");
		return -1;
	}
	serial_restore(&vm->serial, &ss);
	if (in->meta.nvirtio != vm->nvirtio) {
		snprintf(err, errlen, "made with %u virtio devices, this run has %u", in->meta.nvirtio, vm->nvirtio);
		return -1;
	}
	for (unsigned i = 0; i < vm->nvirtio; i++) {
		struct virtio_mmio_state ts;
		if (snap_get(&in->view, SNAP_TAG_VIRTIO, i, &ts, sizeof(ts))) {
			snprintf(err, errlen, "no state for virtio slot %u", i);
			return -1;
		}
		virtio_mmio_lock(vm->virtio[i]);
		int rc = virtio_mmio_restore(vm->virtio[i], &ts, err, errlen);
		virtio_mmio_unlock(vm->virtio[i]);
		if (rc)
			return -1;
	}
	return 0;
}

int vm_restore_apply(struct vm *vm, const struct vmm_config *cfg, struct snapshot_in *in)
{
	char err[256];
	const char *dir = cfg->restore;
	if (in->meta.host_cpu != kvm_arch_host_cpu(vm)) {
		vmm_err("snapshot %s: made on a host whose CPU offers guests other features", dir);
		return -1;
	}
	if (kvm_arch_snapshot_restore(vm, &in->view, err, sizeof(err)) ||
	    restore_devices(vm, in, err, sizeof(err))) {
		vmm_err("snapshot %s: %s", dir, err);
		return -1;
	}
	virtio_devices_restored(vm, cfg, &in->meta);
	/* Notifications the snapshot's vmm had not read yet went with it. */
	for (unsigned i = 0; i < vm->nvirtio; i++)
		for (unsigned q = 0; q < vm->virtio[i]->ops->nqueues; q++)
			virtio_mmio_kick(vm->virtio[i], q);
	return 0;
}

void vm_restore_release(struct snapshot_in *in)
{
	free(in->buf);
	in->buf = NULL;
	if (in->mem_fd >= 0)
		close(in->mem_fd);
	in->mem_fd = -1;
}
