/* The per-run workspace image: ext4 written with libext2fs, no mount and
 * no root privileges needed. */
#ifndef VMRUN_WORKSPACE_H
#define VMRUN_WORKSPACE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "caller.h"

#define WORKSPACE_MIN_MIB 8
#define WORKSPACE_MAX_MIB (64 * 1024)
/* The directory every workspace has at its top, as mke2fs makes it: no
 * file of a request may take its name. */
#define WORKSPACE_LOST_FOUND "lost+found"

/* One file the caller opened, copied into the workspace's top directory
 * under name (a plain name: no '/', not "." or ".."). */
struct workspace_file {
	int fd;
	const char *name;
};

/* What is copied in: a directory the caller opened, read with the rights
 * of as (NULL: ours), and files already opened (source mode's). */
struct workspace_source {
	int dirfd;                 /* -1: no directory */
	const char *name;          /* how the caller named it, for messages */
	const struct caller *as;
	const struct workspace_file *files;
	unsigned nfiles;
};

struct workspace_stats {
	uint64_t files, dirs, bytes;   /* copied from the source directory */
};

/* Create image (which must not exist; mode 0600) as an ext4 file system of
 * size_mib MiB with every block of the file allocated up front (so a guest
 * filling the disk cannot grow the host's disk use past it), its root
 * directory owned by uid:gid with mode 0755, the contents of src's
 * directory (NULL: nothing) copied in, each entry opened as src->as and
 * owned by uid:gid in the image, then src's files (a name the directory
 * already holds is refused), and an empty "artifacts" directory (kept if
 * the source has one). Only regular files and directories are copied; a
 * symbolic link, device, socket or FIFO in the source is refused with an
 * error naming it. Returns 0, or -1 with a one-line reason in err, which
 * starts "workspace: "; on failure the image file is removed. */
int workspace_create(const char *image, uint64_t size_mib, const struct workspace_source *src, uid_t uid,
		     gid_t gid, struct workspace_stats *st, char *err, size_t errlen);

#endif
