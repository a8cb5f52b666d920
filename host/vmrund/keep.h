/* What a run left (its output and artifacts), between the run directory
 * of the node that ran it and the store's blobs, so that any node can
 * serve any run: the node that ran it puts them (keep_put) before it
 * records the end, and a node asked for a run it did not run fetches
 * them into a run directory of its own (keep_fetch), which the API then
 * serves as if the run had been here. */
#ifndef VMRUND_KEEP_H
#define VMRUND_KEEP_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* Put dir's output and each regular file under dir/artifacts (no symlink
 * followed) into the store as run id's blobs, the output first, until
 * max_bytes: files past it are left out (said in err's place on stderr,
 * the run goes on). 0, or -1 with a reason when the store failed (then
 * call again: a put replaces). */
int keep_put(struct store *s, const char *id, const char *dir, uint64_t max_bytes, char *err, size_t errlen);

/* When dir is not there, make it (beneath run_dir, atomically: a
 * temporary directory renamed into place) from run id's blobs. 1 fetched,
 * 0 dir was there already, -1 with a reason (no blobs, or the store or
 * the disk failed). */
int keep_fetch(struct store *s, const char *id, const char *run_dir, const char *dir, char *err, size_t errlen);

#endif
