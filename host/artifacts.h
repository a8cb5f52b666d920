/* Copying /workspace/artifacts out of a workspace image after the run. The
 * image is hostile input: the guest wrote it. Our own tree walk with
 * libext2fs runs in a forked helper sandboxed with seccomp (no network, no
 * new files except under the destination, which it reaches only through an
 * already open directory fd), rlimits and a wall-clock timeout. */
#ifndef VMRUN_ARTIFACTS_H
#define VMRUN_ARTIFACTS_H

#include <stddef.h>
#include <stdint.h>

#define ARTIFACT_PATH_MAX 1024   /* longest relative path reported */

struct artifacts_limits {
	uint64_t max_bytes;      /* total bytes copied */
	uint64_t max_files;      /* files copied */
	unsigned max_depth;      /* directory levels below artifacts/ */
	unsigned max_path;       /* bytes of a relative path */
	int timeout_ms;          /* the helper is killed after this */
};

struct artifact {
	char path[ARTIFACT_PATH_MAX];   /* relative to artifacts/ */
	uint64_t size;
};

struct artifact_skip {
	char path[ARTIFACT_PATH_MAX];   /* relative to artifacts/, made printable */
	char reason[128];
};

struct artifacts_result {
	struct artifact *files;
	size_t nfiles;
	struct artifact_skip *skipped;
	size_t nskipped;
};

/* Copy the regular files and directories under /artifacts of the ext4
 * image into dest, which is created and must not exist (its parent must).
 * Skipped, each with a reason: symbolic links, devices, sockets, FIFOs,
 * names that are empty, ".", "..", contain '/' or control bytes or are
 * longer than 255 bytes; entries past the depth, path, file or byte caps;
 * files whose size is not backed by their allocated blocks (sparse or
 * inconsistent inodes); hard links to an already copied inode. Files are
 * created with O_EXCL|O_NOFOLLOW, modes reduced to 0644 or 0755 (0755 when
 * any execute bit was set), no setuid/setgid/sticky bits; directories 0755.
 * A missing artifacts/ gives an empty result. Returns 0 with res filled
 * (free with artifacts_result_free), or -1 with a one-line reason in err
 * (unreadable image, helper killed or timed out; what it copied stays). */
int artifacts_extract(const char *image, const char *dest, const struct artifacts_limits *lim,
		      struct artifacts_result *res, char *err, size_t errlen);

/* Free what artifacts_extract allocated. */
void artifacts_result_free(struct artifacts_result *res);

#endif
