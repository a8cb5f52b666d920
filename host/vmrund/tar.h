/* A POSIX (pax) tar of the regular files a run kept, written a piece at a
 * time as the client reads it (GET /v1/runs/ID/artifacts.tar). The names
 * are the guest's, so every header's size is computed from its name and
 * checked against TAR_HDR_MAX before a byte of it is written: no name can
 * make a header larger than the buffer it is built in. */
#ifndef VMRUND_TAR_H
#define VMRUND_TAR_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "artifacts.h"

#define TAR_BLOCK 512
/* The longest name archived: the artifact path cap (host/run/artifacts.h). */
#define TAR_NAME_MAX (ARTIFACT_PATH_MAX - 1)
/* A pax record is "LEN KEY=VALUE\n", LEN in decimal counting the whole
 * record; the two we write, at their longest: */
#define TAR_PAX_PATH_MAX (4 + sizeof(" path=") - 1 + TAR_NAME_MAX + 1)
#define TAR_PAX_SIZE_MAX (2 + sizeof(" size=") - 1 + 20 + 1)
/* "21 hdrcharset=BINARY\n": the path is bytes, kept as they are. */
#define TAR_PAX_CHARSET_LEN 21
#define TAR_ROUND(n) (((n) + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK)
/* One file's headers at most: the pax header, its records, the ustar one. */
#define TAR_HDR_MAX (TAR_BLOCK + TAR_ROUND(TAR_PAX_CHARSET_LEN + TAR_PAX_PATH_MAX + TAR_PAX_SIZE_MAX) + TAR_BLOCK)

/* Whether name may be archived: 1 to TAR_NAME_MAX bytes, no NUL, relative,
 * and no empty, "." or ".." component (an archive must not make its
 * reader write outside the directory it extracts into). */
int tar_name_ok(const char *name, size_t namelen);

/* One regular file's headers into out (TAR_HDR_MAX bytes of room): a pax
 * extended header when the name is over ustar's 100 bytes or the size
 * over its 11 octal digits (a long name with "hdrcharset=BINARY", so
 * readers keep its bytes as they are), then the ustar header. Returns the bytes
 * written, a multiple of TAR_BLOCK, at most TAR_HDR_MAX; 0 (nothing
 * written) for a name tar_name_ok refuses. */
size_t tar_file_header(char *out, const char *name, size_t namelen, uint64_t size, int64_t mtime);

struct tar_stream;

/* A stream of the files that list (a JSON array of {"path": ...}, the
 * result's "artifacts") names beneath dirfd, read when their turn comes;
 * a name that is refused, missing, a symlink or not a regular file is
 * left out. Takes dirfd (closed by tar_stream_free) and a reference to
 * list. NULL when out of memory (dirfd closed). */
struct tar_stream *tar_stream_new(int dirfd, json_t *list);

/* The archive's next bytes, at most max, into buf: the count; 0 once the
 * archive, its two zero blocks included, has been read whole. A file
 * that shrank since its header was written is padded with zeros, one that
 * grew cut at its header's size, so the archive stays well formed. */
size_t tar_stream_read(struct tar_stream *t, char *buf, size_t max);

/* Releases the stream; NULL is fine. */
void tar_stream_free(struct tar_stream *t);

#endif
