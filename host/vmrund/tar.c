/* The artifacts' tar (host/vmrund/tar.h): pax extended headers for the
 * names and sizes ustar cannot hold, every header sized from its records
 * and bounded before it is written. */
#include "tar.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ustar's fields (POSIX.1-1988, pax's ustar interchange format). */
#define USTAR_NAME     0
#define USTAR_NAME_LEN 100
#define USTAR_MODE     100
#define USTAR_UID      108
#define USTAR_GID      116
#define USTAR_SIZE     124
#define USTAR_MTIME    136
#define USTAR_CHKSUM   148
#define USTAR_TYPE     156
#define USTAR_MAGIC    257
#define USTAR_VERSION  263
/* The largest value 11 octal digits hold (a 12-byte field and its NUL). */
#define USTAR_OCTAL11_MAX 077777777777ULL

/* A record's LEN has 4 digits at most: the path record is the longer. */
_Static_assert(TAR_PAX_PATH_MAX < 10000, "a pax path record's length fits 4 digits");
_Static_assert(TAR_HDR_MAX % TAR_BLOCK == 0, "headers are whole blocks");

int tar_name_ok(const char *name, size_t namelen)
{
	if (namelen == 0 || namelen > TAR_NAME_MAX || memchr(name, '\0', namelen) || name[0] == '/')
		return 0;
	for (size_t i = 0; i <= namelen;) {
		const char *c = name + i;
		const char *end = memchr(c, '/', namelen - i);
		size_t len = end ? (size_t)(end - c) : namelen - i;
		if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		i += len + 1;
	}
	return 1;
}

static size_t decimal_digits(size_t v)
{
	size_t d = 1;
	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

/* "LEN KEY=VALUE\n" into out, which has room for cap bytes: the record's
 * length, or 0 (nothing written) when it would not fit. LEN counts its own
 * digits, so it is found by trying each digit count in turn. */
static size_t pax_record(char *out, size_t cap, const char *key, const char *val, size_t vlen)
{
	size_t klen = strlen(key);
	size_t body = 1 + klen + 1 + vlen + 1;   /* " KEY=VALUE\n" */
	size_t digits = 1;
	while (decimal_digits(digits + body) != digits)
		digits++;
	size_t len = digits + body;
	if (len > cap)
		return 0;
	char num[24];
	snprintf(num, sizeof(num), "%zu", len);
	char *p = out;
	memcpy(p, num, digits);
	p += digits;
	*p++ = ' ';
	memcpy(p, key, klen);
	p += klen;
	*p++ = '=';
	memcpy(p, val, vlen);
	p += vlen;
	*p = '\n';
	return len;
}

/* v as width - 1 octal digits and a NUL; v fits (the callers clamp). */
static void octal(char *field, size_t width, uint64_t v)
{
	field[width - 1] = '\0';
	for (size_t i = width - 1; i-- > 0; v >>= 3)
		field[i] = (char)('0' + (v & 7));
}

/* A ustar header block; name is cut at 100 bytes, size and mtime clamped
 * to 11 octal digits (a pax header before it says the whole of each). */
static void ustar_block(char *h, const char *name, size_t namelen, char type, uint64_t size, int64_t mtime)
{
	memset(h, 0, TAR_BLOCK);
	memcpy(h + USTAR_NAME, name, namelen < USTAR_NAME_LEN ? namelen : USTAR_NAME_LEN);
	octal(h + USTAR_MODE, 8, 0644);
	octal(h + USTAR_UID, 8, 0);
	octal(h + USTAR_GID, 8, 0);
	octal(h + USTAR_SIZE, 12, size > USTAR_OCTAL11_MAX ? 0 : size);
	uint64_t mt = mtime < 0 ? 0 : (uint64_t)mtime;
	octal(h + USTAR_MTIME, 12, mt > USTAR_OCTAL11_MAX ? USTAR_OCTAL11_MAX : mt);
	h[USTAR_TYPE] = type;
	memcpy(h + USTAR_MAGIC, "ustar", 6);
	memcpy(h + USTAR_VERSION, "00", 2);
	/* The checksum is summed with its own field as eight spaces, then
	 * written as six octal digits, a NUL and a space. */
	memset(h + USTAR_CHKSUM, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < TAR_BLOCK; i++)
		sum += (unsigned char)h[i];
	octal(h + USTAR_CHKSUM, 7, sum);
	h[USTAR_CHKSUM + 7] = ' ';
}

size_t tar_file_header(char *out, const char *name, size_t namelen, uint64_t size, int64_t mtime)
{
	if (!tar_name_ok(name, namelen))
		return 0;
	/* The pax records first, into their own buffer: their length decides
	 * the header's size, which is checked before out is touched. */
	char pax[TAR_PAX_CHARSET_LEN + TAR_PAX_PATH_MAX + TAR_PAX_SIZE_MAX];
	size_t plen = 0;
	if (namelen > USTAR_NAME_LEN) {
		/* BINARY even for UTF-8 names: a reader then keeps the bytes as
		 * the guest wrote them, as it does a short name in the ustar
		 * field, where a UTF-8 path may be re-encoded (libarchive turns
		 * decomposed characters into their NFC form). */
		plen = pax_record(pax, TAR_PAX_CHARSET_LEN, "hdrcharset", "BINARY", 6);
		size_t n = pax_record(pax + plen, TAR_PAX_PATH_MAX, "path", name, namelen);
		if (!plen || !n)
			return 0;
		plen += n;
	}
	if (size > USTAR_OCTAL11_MAX) {
		char num[24];
		int nlen = snprintf(num, sizeof(num), "%llu", (unsigned long long)size);
		size_t n = pax_record(pax + plen, sizeof(pax) - plen, "size", num, (size_t)nlen);
		if (!n)
			return 0;
		plen += n;
	}
	size_t hlen = (plen ? TAR_BLOCK + TAR_ROUND(plen) : 0) + TAR_BLOCK;
	if (hlen > TAR_HDR_MAX)
		return 0;   /* unreachable by the sizes above; kept as the last guard */
	size_t off = 0;
	if (plen) {
		ustar_block(out, "././@PaxHeader", 14, 'x', plen, mtime);
		memcpy(out + TAR_BLOCK, pax, plen);
		memset(out + TAR_BLOCK + plen, 0, TAR_ROUND(plen) - plen);
		off = TAR_BLOCK + TAR_ROUND(plen);
	}
	ustar_block(out + off, name, namelen, '0', size, mtime);
	return hlen;
}

/* ---- the stream ---------------------------------------------------------- */

struct tar_stream {
	json_t *list;
	size_t next;
	int dirfd, fd;
	uint64_t left;                /* data bytes of the current file to send */
	size_t pad;                   /* zeros after them */
	char hdr[TAR_HDR_MAX];
	size_t hoff, hlen;
	size_t trailer;               /* zeros at the end */
};

struct tar_stream *tar_stream_new(int dirfd, json_t *list)
{
	struct tar_stream *t = calloc(1, sizeof(*t));
	if (!t) {
		close(dirfd);
		return NULL;
	}
	t->dirfd = dirfd;
	t->fd = -1;
	t->trailer = 2 * TAR_BLOCK;
	t->list = json_incref(list);
	return t;
}

void tar_stream_free(struct tar_stream *t)
{
	if (!t)
		return;
	if (t->fd >= 0)
		close(t->fd);
	if (t->dirfd >= 0)
		close(t->dirfd);
	json_decref(t->list);
	free(t);
}

/* The listed file's descriptor, beneath dirfd and through no link, if it
 * is a regular file: -1 otherwise. */
static int open_listed(int dirfd, const char *name, struct stat *st)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	int fd = (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
	if (fd >= 0 && (fstat(fd, st) < 0 || !S_ISREG(st->st_mode))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* The next file's headers: false at the end of the list. */
static bool tar_next(struct tar_stream *t)
{
	while (t->next < json_array_size(t->list)) {
		json_t *path = json_object_get(json_array_get(t->list, t->next++), "path");
		const char *name = json_string_value(path);
		size_t namelen = json_string_length(path);
		struct stat st;
		int fd = name && tar_name_ok(name, namelen) ? open_listed(t->dirfd, name, &st) : -1;
		if (fd < 0)
			continue;
		t->hlen = tar_file_header(t->hdr, name, namelen, (uint64_t)st.st_size, st.st_mtime);
		if (!t->hlen) {
			close(fd);
			continue;
		}
		t->hoff = 0;
		t->fd = fd;
		t->left = (uint64_t)st.st_size;
		t->pad = (size_t)(TAR_ROUND(t->left) - t->left);
		return true;
	}
	return false;
}

static size_t zeros(char *buf, size_t *count, size_t max)
{
	size_t n = *count < max ? *count : max;
	memset(buf, 0, n);
	*count -= n;
	return n;
}

size_t tar_stream_read(struct tar_stream *t, char *buf, size_t max)
{
	if (!max)
		return 0;
	for (;;) {
		if (t->hoff < t->hlen) {
			size_t n = t->hlen - t->hoff < max ? t->hlen - t->hoff : max;
			memcpy(buf, t->hdr + t->hoff, n);
			t->hoff += n;
			return n;
		}
		if (t->left) {
			size_t want = t->left < max ? (size_t)t->left : max;
			ssize_t n = t->fd >= 0 ? read(t->fd, buf, want) : 0;
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				/* Shorter than its header said: zeros keep the archive whole. */
				memset(buf, 0, want);
				n = (ssize_t)want;
			}
			t->left -= (uint64_t)n;
			return (size_t)n;
		}
		if (t->pad)
			return zeros(buf, &t->pad, max);
		if (t->fd >= 0) {
			close(t->fd);
			t->fd = -1;
		}
		if (tar_next(t))
			continue;
		return zeros(buf, &t->trailer, max);
	}
}
