/* libFuzzer harness for the artifacts' tar headers (host/vmrund/tar.c):
 * an archive built from a random list of files (names of any length to
 * past the cap, any byte; sizes to 4 KiB), each header written into a
 * heap buffer of exactly TAR_HDR_MAX so ASan sees any byte past it, then
 * read back by libarchive, an independent reader: every file the writer
 * accepted comes back in order with its name, size and bytes, and the
 * writer refused exactly the names tar_name_ok refuses.
 *
 * Input: entries of [len_hi][len_lo][name bytes][size_hi][size_lo][seed],
 * the name's length taken modulo TAR_NAME_MAX + 64 and the size modulo
 * 4096, until the input runs out. */
#include <archive.h>
#include <archive_entry.h>
#include <locale.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tar.h"

#define MAX_FILES 64

struct entry {
	char name[TAR_NAME_MAX + 64 + 1];
	size_t namelen, size;
	uint8_t seed;
};

static uint8_t data_byte(const struct entry *e, size_t i)
{
	return (uint8_t)(i * 31 + e->seed);
}

/* Appends n bytes to the archive being built. */
static void put(uint8_t **buf, size_t *len, size_t *cap, const void *p, size_t n)
{
	if (*len + n > *cap) {
		*cap = (*len + n) * 2;
		*buf = realloc(*buf, *cap);
		if (!*buf)
			abort();
	}
	memcpy(*buf + *len, p, n);
	*len += n;
}

static void check_reads_back(const uint8_t *buf, size_t len, const struct entry *e, size_t n)
{
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	if (archive_read_open_memory(a, buf, len) != ARCHIVE_OK)
		abort();
	struct archive_entry *ae;
	uint8_t *data = malloc(4097);
	size_t i = 0;
	for (; archive_read_next_header(a, &ae) == ARCHIVE_OK; i++) {
		const char *name = archive_entry_pathname(ae);
		if (i >= n || !name || strlen(name) != e[i].namelen || memcmp(name, e[i].name, e[i].namelen) ||
		    archive_entry_size(ae) != (la_int64_t)e[i].size)
			abort();
		if (archive_read_data(a, data, 4097) != (la_ssize_t)e[i].size)
			abort();
		for (size_t k = 0; k < e[i].size; k++)
			if (data[k] != data_byte(&e[i], k))
				abort();
	}
	if (i != n)
		abort();
	free(data);
	archive_read_free(a);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* pax names are UTF-8; libarchive hands them back as they are only
	 * in a UTF-8 locale (else it converts and may refuse). */
	setlocale(LC_ALL, "C.UTF-8");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t inlen)
{
	struct entry *e = calloc(MAX_FILES, sizeof(*e));
	size_t n = 0, len = 0, cap = 0;
	uint8_t *buf = NULL;
	size_t pos = 0;
	while (n < MAX_FILES && pos + 2 <= inlen) {
		struct entry *x = &e[n];
		size_t want = (((size_t)in[pos] << 8) | in[pos + 1]) % (TAR_NAME_MAX + 64);
		pos += 2;
		x->namelen = want < inlen - pos ? want : inlen - pos;
		memcpy(x->name, in + pos, x->namelen);
		pos += x->namelen;
		if (pos + 3 <= inlen) {
			x->size = (((size_t)in[pos] << 8) | in[pos + 1]) % 4096;
			x->seed = in[pos + 2];
			pos += 3;
		}
		char *hdr = malloc(TAR_HDR_MAX);
		size_t hlen = tar_file_header(hdr, x->name, x->namelen, x->size, 1700000000);
		if ((hlen != 0) != (tar_name_ok(x->name, x->namelen) != 0) || hlen % TAR_BLOCK || hlen > TAR_HDR_MAX)
			abort();
		if (hlen) {
			put(&buf, &len, &cap, hdr, hlen);
			uint8_t block[TAR_BLOCK];
			for (size_t off = 0; off < x->size; off += TAR_BLOCK) {
				memset(block, 0, sizeof(block));
				for (size_t k = 0; k < TAR_BLOCK && off + k < x->size; k++)
					block[k] = data_byte(x, off + k);
				put(&buf, &len, &cap, block, TAR_BLOCK);
			}
			n++;
		}
		free(hdr);
	}
	uint8_t zero[2 * TAR_BLOCK] = { 0 };
	put(&buf, &len, &cap, zero, sizeof(zero));
	check_reads_back(buf, len, e, n);
	free(buf);
	free(e);
	return 0;
}
