/* What changed in a workspace between two of its images (a sandbox's
 * start, a checkpoint, now): each image is listed by the confined
 * artifacts helper (artifacts_manifest: modes, sizes, SHA-256s, link
 * targets, small files copied out), the two lists are compared here, and
 * text files get a unified diff from diff(1). One digest covers the whole
 * change, so that an approval can name exactly what it approved. */
#ifndef VMRUN_WSDIFF_H
#define VMRUN_WSDIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "artifacts.h"

/* Entries one image may list, bytes it may sum, and the walk's time. */
#define WSDIFF_MAX_ENTRIES  20000
#define WSDIFF_MAX_BYTES    (4ull << 30)
#define WSDIFF_MAX_DEPTH    64
#define WSDIFF_TIMEOUT_MS   120000
/* A file larger than this is named, never diffed; the diffs of one
 * answer stop at DIFF_MAX bytes (later files are named only). */
#define WSDIFF_TEXT_MAX     (256u << 10)
#define WSDIFF_COPY_TOTAL   (128u << 20)   /* what one walk copies out for diffing */
#define WSDIFF_DIFF_MAX     (1u << 20)

enum wsdiff_status { WSDIFF_ADDED, WSDIFF_MODIFIED, WSDIFF_REMOVED };

struct wsdiff_change {
	enum wsdiff_status status;
	const struct artifact_entry *from, *to;   /* NULL: absent on that side */
};

struct wsdiff {
	struct wsdiff_change *c;   /* by path, bytewise */
	size_t n;
	size_t added, modified, removed;
	bool complete;             /* neither walk skipped anything */
	char digest[65];           /* SHA-256, hex, of the change (wsdiff_compare) */
};

/* The change from one manifest to another: entries that are on one side
 * only, or differ in kind, mode, size, data or target. The digest is over
 * a canonical text of every change (and of every skipped entry, which a
 * change may hide), so two equal changes have equal digests whatever the
 * images' layout. Pure; 0, or -1 when out of memory. */
int wsdiff_compare(const struct artifacts_result *from, const struct artifacts_result *to, struct wsdiff *d);

/* Free what wsdiff_compare allocated. */
void wsdiff_free(struct wsdiff *d);

/* List image (read-only) into m with the limits above, its small files
 * copied into dir (made here, 0700; it must not exist). The helper runs
 * as a reserved uid when we are root, else as ourselves. 0, or -1 with a
 * one-line reason in err. */
int wsdiff_walk(const char *image, const char *dir, struct artifacts_result *m, char *err, size_t errlen);

/* The change as the API shows it: "files" (path, status, type, mode,
 * size, sha256 or target, "old" for a modified one; for text files
 * insertions, deletions and a unified diff, from the copies in from_dir
 * and to_dir), "summary", "skipped", "complete" and "digest". A new
 * reference, or NULL when out of memory. */
json_t *wsdiff_json(const struct wsdiff *d, const struct artifacts_result *from, const char *from_dir,
		    const struct artifacts_result *to, const char *to_dir);

/* One side of a diff: its image, walked (wsdiff_walk); or, walk set,
 * walk(ctx, dir, m, err, errlen) lists it into dir and m as wsdiff_walk
 * does (a workspace held while it is read), returning 0 or -1 with why. */
struct wsdiff_side {
	const char *image;
	int (*walk)(void *ctx, const char *dir, struct artifacts_result *m, char *err, size_t errlen);
	void *ctx;
};

/* Both sides listed (into scratch/from and scratch/to; scratch is made
 * here, must not exist, and is removed after) and compared: the change
 * as JSON into *out (out NULL: not made), its digest into digest and
 * whether the walks skipped nothing into *complete (either NULL: not
 * wanted). 0, or -1 with why. */
int wsdiff_sides(const struct wsdiff_side *from, const struct wsdiff_side *to, const char *scratch, json_t **out,
		 char digest[65], bool *complete, char *err, size_t errlen);

/* wsdiff_sides of two images that do not change meanwhile (a
 * checkpoint's, a start), both walked; out NULL runs no diff(1). Not from
 * a process that reaps any child (waitpid(-1)): the helper is its own
 * child. */
int wsdiff_images(const char *from_image, const char *to_image, const char *scratch, json_t **out,
		  char digest[65], bool *complete, char *err, size_t errlen);

#endif
