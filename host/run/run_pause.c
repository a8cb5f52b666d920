#include "run_pause.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../vmm/snapshot.h"
#include "errmsg.h"
#include "hex.h"

#define BLOCK SNAP_PAGE_SIZE   /* a block of the image: a page's size, summed when not zero */
#define CHUNK (64u * BLOCK)
#define COPY_CHUNK (1u << 20)

/* Sum the non-zero blocks of [from, to) into md. */
static int sum_segment(int fd, off_t from, off_t to, EVP_MD_CTX *md, uint8_t *buf)
{
	for (off_t at = from; at < to;) {
		size_t want = (size_t)(to - at < (off_t)CHUNK ? to - at : (off_t)CHUNK);
		ssize_t n = pread(fd, buf, want, at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		/* a short read past a block's end is summed with zeros after it */
		size_t whole = ((size_t)n + BLOCK - 1) / BLOCK * BLOCK;
		memset(buf + n, 0, whole - (size_t)n);
		for (size_t b = 0; b < whole; b += BLOCK) {
			if (snap_page_zero(buf + b))
				continue;
			uint64_t off = (uint64_t)at + b;
			if (!EVP_DigestUpdate(md, &off, sizeof(off)) || !EVP_DigestUpdate(md, buf + b, BLOCK))
				return -1;
		}
		at += n;
	}
	return 0;
}

int run_pause_image_sum(const char *image, char hex[65], char *err, size_t errlen)
{
	int fd = open(image, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		errf(err, errlen, "%.300s: %s", image, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	uint8_t *buf = malloc(CHUNK + BLOCK);
	int rc = -1;
	if (!md || !buf || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
		errf(err, errlen, "out of memory");
		goto out;
	}
	/* Allocated but unwritten extents read as zeros: SEEK_DATA may skip
	 * them or not, and the sum is the same either way. */
	for (off_t at = 0; at < st.st_size;) {
		off_t data = lseek(fd, at, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break;
		off_t hole = data < 0 ? -1 : lseek(fd, data, SEEK_HOLE);
		if (data < 0 || hole < 0 || sum_segment(fd, data, hole, md, buf)) {
			errf(err, errlen, "reading %.300s: %s", image, strerror(errno));
			goto out;
		}
		at = hole;
	}
	uint64_t size = (uint64_t)st.st_size;
	uint8_t d[32];
	unsigned dl = 0;
	if (!EVP_DigestUpdate(md, &size, sizeof(size)) || !EVP_DigestFinal_ex(md, d, &dl) || dl != sizeof(d)) {
		errf(err, errlen, "summing %.300s failed", image);
		goto out;
	}
	hex_of(d, sizeof(d), hex);
	rc = 0;
out:
	EVP_MD_CTX_free(md);
	free(buf);
	close(fd);
	return rc;
}

static void path_of(char *out, size_t len, const char *dir, const char *name, const char *suffix)
{
	snprintf(out, len, "%s/%s%s", dir, name, suffix);
}

int run_pause_commit(const char *dir, const char *image, char *err, size_t errlen)
{
	char hex[65], from[PATH_MAX], to[PATH_MAX], tmp[PATH_MAX];
	if (run_pause_image_sum(image, hex, err, errlen))
		return -1;
	path_of(tmp, sizeof(tmp), dir, RUN_PAUSE_SUM_FILE, SNAP_NEW_SUFFIX);
	path_of(to, sizeof(to), dir, RUN_PAUSE_SUM_FILE, "");
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	bool ok = fd >= 0 && dprintf(fd, "%s\n", hex) == 65 && fsync(fd) == 0;
	if (fd >= 0)
		close(fd);
	if (!ok || rename(tmp, to) < 0)
		return errf(err, errlen, "%.300s: %s", to, strerror(errno));
	const char *names[] = { SNAP_PAGES_FILE, SNAP_STATE_FILE };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		path_of(from, sizeof(from), dir, names[i], SNAP_NEW_SUFFIX);
		path_of(to, sizeof(to), dir, names[i], "");
		if (rename(from, to) < 0)
			return errf(err, errlen, "the paused VM's %s: %s", names[i], strerror(errno));
	}
	return 0;
}

int run_pause_check(const char *dir, const char *image, char *err, size_t errlen)
{
	char path[PATH_MAX], want[65], hex[65];
	const char *names[] = { SNAP_STATE_FILE, SNAP_PAGES_FILE };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct stat st;
		path_of(path, sizeof(path), dir, names[i], "");
		if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
			return errf(err, errlen, "the paused VM's %s is missing", names[i]);
	}
	path_of(path, sizeof(path), dir, RUN_PAUSE_SUM_FILE, "");
	if (sha256_read_sum(path, want))
		return errf(err, errlen, "the paused workspace's checksum is missing or damaged");
	if (run_pause_image_sum(image, hex, err, errlen))
		return -1;
	if (strcmp(hex, want))
		return errf(err, errlen, "the workspace image changed since the pause (checksum mismatch)");
	return 0;
}

int run_pause_pin(const char *snapshot, const char *pin)
{
	char from[PATH_MAX], to[PATH_MAX];
	if (mkdir(pin, 0755) < 0 && errno != EEXIST)
		return -1;
	const char *names[] = { SNAP_STATE_FILE, SNAP_MEMORY_FILE };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		path_of(from, sizeof(from), snapshot, names[i], "");
		path_of(to, sizeof(to), pin, names[i], "");
		if (link(from, to) < 0 && errno != EEXIST) {
			int e = errno;
			run_pause_remove(NULL, pin);
			errno = e;
			return -1;
		}
	}
	return 0;
}

int run_pause_keep_base(const char *snapshot, const char *dst)
{
	char from[PATH_MAX], to[PATH_MAX];
	if (mkdir(dst, 0755) < 0 && errno != EEXIST)
		return -1;
	const char *names[] = { SNAP_STATE_FILE, SNAP_MEMORY_FILE };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		path_of(from, sizeof(from), snapshot, names[i], "");
		path_of(to, sizeof(to), dst, names[i], "");
		if (run_pause_link_or_copy(from, to) < 0 || chmod(to, 0644) < 0)
			return -1;
	}
	return 0;
}

void run_pause_remove(const char *dir, const char *pin)
{
	char path[PATH_MAX];
	const char *names[] = { SNAP_STATE_FILE, SNAP_PAGES_FILE, RUN_PAUSE_SUM_FILE };
	for (size_t i = 0; dir && i < sizeof(names) / sizeof(names[0]); i++) {
		path_of(path, sizeof(path), dir, names[i], "");
		unlink(path);
		path_of(path, sizeof(path), dir, names[i], SNAP_NEW_SUFFIX);
		unlink(path);
	}
	if (dir)
		rmdir(dir);
	const char *pinned[] = { SNAP_STATE_FILE, SNAP_MEMORY_FILE };
	for (size_t i = 0; pin && i < sizeof(pinned) / sizeof(pinned[0]); i++) {
		path_of(path, sizeof(path), pin, pinned[i], "");
		unlink(path);
	}
	if (pin)
		rmdir(pin);
}

/* Copy src's data segments into dst (made, 0600): holes stay holes. */
static int copy_sparse(int in, int out, off_t size)
{
	uint8_t *buf = malloc(COPY_CHUNK);
	if (!buf)
		return -1;
	int rc = ftruncate(out, size);
	for (off_t at = 0; rc == 0 && at < size;) {
		off_t data = lseek(in, at, SEEK_DATA);
		if (data < 0) {
			rc = errno == ENXIO ? 0 : -1;
			break;
		}
		off_t hole = lseek(in, data, SEEK_HOLE);
		for (off_t o = data; rc == 0 && o < hole;) {
			ssize_t n = pread(in, buf, (size_t)(hole - o < COPY_CHUNK ? hole - o : COPY_CHUNK), o);
			if (n <= 0 || pwrite(out, buf, (size_t)n, o) != n)
				rc = -1;
			o += n > 0 ? n : 0;
		}
		at = hole;
	}
	free(buf);
	return rc;
}

int run_pause_copy(const char *src, const char *dst)
{
	int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), out = -1, rc = -1;
	struct stat st;
	if (in < 0 || fstat(in, &st) < 0 || !S_ISREG(st.st_mode))
		goto out;
	if ((out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0)
		goto out;
	rc = ioctl(out, FICLONE, in) == 0 ? 0 : copy_sparse(in, out, st.st_size);
	if (rc == 0)
		rc = fsync(out);
out:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return rc;
}

int run_pause_link_or_copy(const char *src, const char *dst)
{
	return link(src, dst) == 0 ? 0 : run_pause_copy(src, dst);
}
