#include "snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serial_8250.h"
#include "virtio_mmio.h"

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME  0x100000001b3ull

static const struct snap_tag_desc generic_tags[] = {
	{ SNAP_TAG_META, 1, sizeof(struct snap_meta), 0, "meta" },
	{ SNAP_TAG_SERIAL, 1, sizeof(struct serial_8250_state), 0, "serial" },
	{ SNAP_TAG_VIRTIO, SNAP_MAX_INDEX, sizeof(struct virtio_mmio_state), 0, "virtio" },
	{ SNAP_TAG_PAUSE, 1, sizeof(struct snap_pause), 0, "pause" },
	{ 0, 0, 0, 0, NULL },
};

static int fail(char *err, size_t errlen, const char *what, unsigned long long at);

void snap_sum_init(struct snap_sum *s)
{
	s->h = FNV_OFFSET;
	s->len = 0;
}

void snap_sum_add(struct snap_sum *s, const uint8_t *p, size_t len)
{
	uint64_t h = s->h;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = (h ^ w) * FNV_PRIME;
	}
	if (i < len) {
		uint64_t w = 0;
		memcpy(&w, p + i, len - i);
		h = (h ^ w) * FNV_PRIME;
	}
	s->h = h;
	s->len += len;
}

uint64_t snap_sum_final(const struct snap_sum *s)
{
	return s->h ^ s->len;
}

uint64_t snap_checksum(const uint8_t *p, size_t len)
{
	struct snap_sum s;
	snap_sum_init(&s);
	snap_sum_add(&s, p, len);
	return snap_sum_final(&s);
}

int snap_pages_check_header(const struct snap_pages_header *h, uint64_t file_size, uint64_t memory_bytes,
			    char *err, size_t errlen)
{
	if (file_size < sizeof(*h))
		return fail(err, errlen, "pages file truncated: shorter than its header", (unsigned long long)file_size);
	if (memcmp(h->magic, SNAP_PAGES_MAGIC, sizeof(h->magic)))
		return fail(err, errlen, "not a pages file (bad magic)", 0);
	if (h->version != SNAP_PAGES_VERSION) {
		snprintf(err, errlen, "pages file format version %u, this vmm reads %u", h->version, SNAP_PAGES_VERSION);
		return -1;
	}
	if (h->page_size != SNAP_PAGE_SIZE || h->memory_bytes != memory_bytes) {
		snprintf(err, errlen, "pages file of %u-byte pages over %llu bytes, this guest has %u-byte pages and %llu",
			 h->page_size, (unsigned long long)h->memory_bytes, SNAP_PAGE_SIZE, (unsigned long long)memory_bytes);
		return -1;
	}
	uint64_t max = memory_bytes / SNAP_PAGE_SIZE;
	if (h->count > max) {
		snprintf(err, errlen, "pages file claims %llu pages, the guest has %llu", (unsigned long long)h->count,
			 (unsigned long long)max);
		return -1;
	}
	/* count <= max keeps this far from overflowing */
	uint64_t want = snap_pages_data(h->count) + h->count * SNAP_PAGE_SIZE;
	if (file_size != want) {
		snprintf(err, errlen, "pages file truncated or extended: %llu bytes, its header says %llu",
			 (unsigned long long)file_size, (unsigned long long)want);
		return -1;
	}
	return 0;
}

int snap_pages_check_index(const uint64_t *index, uint64_t count, uint64_t memory_bytes, char *err, size_t errlen)
{
	for (uint64_t i = 0; i < count; i++) {
		uint64_t o = index[i];
		if (o % SNAP_PAGE_SIZE || o >= memory_bytes || (i && o <= index[i - 1])) {
			snprintf(err, errlen, "pages file index entry %llu (0x%llx) is not a new page of the guest's",
				 (unsigned long long)i, (unsigned long long)o);
			return -1;
		}
	}
	return 0;
}

static const struct snap_tag_desc *find_tag(uint32_t tag)
{
	const struct snap_tag_desc *tables[] = { generic_tags, snap_arch_tags };
	for (size_t t = 0; t < 2; t++)
		for (const struct snap_tag_desc *d = tables[t]; d->name; d++)
			if (d->tag == tag)
				return d;
	return NULL;
}

static int fail(char *err, size_t errlen, const char *what, unsigned long long at)
{
	snprintf(err, errlen, "%s (at byte %llu)", what, at);
	return -1;
}

static int check_header(const uint8_t *buf, size_t len, const char *build, uint32_t arch, struct snap_header *h,
			char *err, size_t errlen)
{
	if (len < sizeof(*h))
		return fail(err, errlen, "truncated: shorter than its header", (unsigned long long)len);
	memcpy(h, buf, sizeof(*h));
	if (memcmp(h->magic, SNAP_MAGIC, sizeof(h->magic)))
		return fail(err, errlen, "not a vmm snapshot (bad magic)", 0);
	if (h->version != SNAP_VERSION) {
		snprintf(err, errlen, "format version %u, this vmm reads %u", h->version, SNAP_VERSION);
		return -1;
	}
	if (h->arch != arch) {
		snprintf(err, errlen, "made for another architecture (%u, this vmm is %u)", h->arch, arch);
		return -1;
	}
	char want[SNAP_BUILD_LEN] = { 0 };
	strncpy(want, build, sizeof(want) - 1);
	if (memcmp(h->build, want, sizeof(want))) {
		/* The file's bytes reach the error line only when they are a
		 * build id's hex digits. */
		size_t n = strnlen(h->build, SNAP_BUILD_LEN);
		bool hex = n > 0;
		for (size_t i = 0; i < n; i++)
			hex = hex && strchr("0123456789abcdef", h->build[i]);
		snprintf(err, errlen, "made by another vmm build (%.*s, this is %s)", hex ? (int)n : 10,
			 hex ? h->build : "unreadable", want);
		return -1;
	}
	if (h->length != len - sizeof(*h))
		return fail(err, errlen, "truncated or extended: the header's length does not match", (unsigned long long)len);
	if (h->checksum != snap_checksum(buf + sizeof(*h), len - sizeof(*h)))
		return fail(err, errlen, "corrupt: checksum mismatch", sizeof(*h));
	return 0;
}

static int check_record(const struct snap_record *r, const struct snap_tag_desc *d, uint64_t room, char *err,
			size_t errlen, unsigned long long at)
{
	if (!d)
		return fail(err, errlen, "unknown record tag", at);
	if (r->index >= d->max_index || r->index >= SNAP_MAX_INDEX) {
		snprintf(err, errlen, "%s record index %u out of range (at byte %llu)", d->name, r->index, at);
		return -1;
	}
	bool ok = d->max_size ? (r->len >= d->size && r->len <= d->max_size && r->len % d->size == 0) : r->len == d->size;
	if (!ok) {
		snprintf(err, errlen, "%s record of %llu bytes (at byte %llu)", d->name, (unsigned long long)r->len, at);
		return -1;
	}
	if (r->len > room || ((r->len + 7) & ~7ull) > room)
		return fail(err, errlen, "record overruns the file", at);
	return 0;
}

int snap_parse(const uint8_t *buf, size_t len, const char *build, uint32_t arch, struct snap_view *v, char *err,
	       size_t errlen)
{
	memset(v, 0, sizeof(*v));
	if (check_header(buf, len, build, arch, &v->hdr, err, errlen))
		return -1;
	size_t at = sizeof(v->hdr);
	while (at < len) {
		struct snap_record r;
		if (len - at < sizeof(r))
			return fail(err, errlen, "truncated record header", at);
		memcpy(&r, buf + at, sizeof(r));
		at += sizeof(r);
		const struct snap_tag_desc *d = r.tag < SNAP_TAG_MAX ? find_tag(r.tag) : NULL;
		if (check_record(&r, d, len - at, err, errlen, at - sizeof(r)))
			return -1;
		if (v->rec[r.tag][r.index].p) {
			snprintf(err, errlen, "%s record %u appears twice", d->name, r.index);
			return -1;
		}
		v->rec[r.tag][r.index].p = buf + at;
		v->rec[r.tag][r.index].len = r.len;
		at += (size_t)((r.len + 7) & ~7ull);
	}
	if (!v->rec[SNAP_TAG_META][0].p)
		return fail(err, errlen, "no meta record", at);
	return 0;
}

int snap_get(const struct snap_view *v, uint32_t tag, uint32_t index, void *dst, uint64_t len)
{
	if (tag >= SNAP_TAG_MAX || index >= SNAP_MAX_INDEX || !v->rec[tag][index].p || v->rec[tag][index].len != len)
		return -1;
	memcpy(dst, v->rec[tag][index].p, len);
	return 0;
}

static int reserve(struct snap_writer *w, size_t more)
{
	if (w->failed)
		return -1;
	if (w->len + more <= w->cap)
		return 0;
	size_t cap = w->cap ? w->cap : 64 * 1024;
	while (cap < w->len + more)
		cap *= 2;
	uint8_t *p = cap <= SNAP_MAX_STATE ? realloc(w->buf, cap) : NULL;
	if (!p) {
		w->failed = true;
		return -1;
	}
	w->buf = p;
	w->cap = cap;
	return 0;
}

int snap_writer_init(struct snap_writer *w)
{
	memset(w, 0, sizeof(*w));
	if (reserve(w, sizeof(struct snap_header)))
		return -1;
	memset(w->buf, 0, sizeof(struct snap_header));
	w->len = sizeof(struct snap_header);
	return 0;
}

void snap_add(struct snap_writer *w, uint32_t tag, uint32_t index, const void *p, uint64_t len)
{
	size_t padded = (size_t)((len + 7) & ~7ull);
	if (len > SNAP_MAX_STATE || reserve(w, sizeof(struct snap_record) + padded))
		return;
	struct snap_record r = { .tag = tag, .index = index, .len = len };
	memcpy(w->buf + w->len, &r, sizeof(r));
	w->len += sizeof(r);
	memset(w->buf + w->len, 0, padded);
	memcpy(w->buf + w->len, p, (size_t)len);
	w->len += padded;
}

int snap_finish(struct snap_writer *w, const char *build, uint32_t arch)
{
	if (w->failed || !w->buf)
		return -1;
	struct snap_header h = { .version = SNAP_VERSION, .arch = arch, .length = w->len - sizeof(h) };
	memcpy(h.magic, SNAP_MAGIC, sizeof(h.magic));
	strncpy(h.build, build, sizeof(h.build) - 1);
	h.checksum = snap_checksum(w->buf + sizeof(h), w->len - sizeof(h));
	memcpy(w->buf, &h, sizeof(h));
	return 0;
}

void snap_writer_release(struct snap_writer *w)
{
	free(w->buf);
	memset(w, 0, sizeof(*w));
}
