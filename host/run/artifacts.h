/* Copying /workspace/artifacts out of a workspace image after the run. The
 * image is hostile input: the guest wrote it. Our own tree walk with
 * libext2fs runs in a forked helper that is never host root: a fresh
 * unprivileged uid (when vmrun is root), in user, mount, network, IPC and
 * UTS namespaces of its own, whose whole file system is a read-only tmpfs
 * holding the destination as /dest; no capabilities, Landlock (required:
 * no kernel without it is trusted with a hostile image) and seccomp; the
 * image through an fd it cannot write; fd 2 a pipe the parent reads;
 * rlimits and a wall-clock timeout. The details are in artifacts_sandbox.c. */
#ifndef VMRUN_ARTIFACTS_H
#define VMRUN_ARTIFACTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ARTIFACT_PATH_MAX 1024   /* longest relative path reported */

struct artifacts_limits {
	uint64_t max_bytes;      /* total bytes copied (a manifest's: read and summed) */
	uint64_t max_files;      /* files copied (a manifest's: entries listed) */
	unsigned max_depth;      /* directory levels below artifacts/ */
	unsigned max_path;       /* bytes of a relative path */
	int timeout_ms;          /* the helper is killed after this */
	/* A manifest (artifacts_manifest) instead of a copy: the whole image
	 * from its root is listed, and regular files of at most copy_max
	 * bytes are also copied, flat, into the destination, while the
	 * copies take no more than copy_total together. */
	bool manifest;
	uint64_t copy_max, copy_total;
};

struct artifact {
	char path[ARTIFACT_PATH_MAX];   /* relative to artifacts/ */
	uint64_t size;
};

struct artifact_skip {
	char path[ARTIFACT_PATH_MAX];   /* relative to artifacts/, made printable */
	char reason[128];
};

/* One entry of a manifest: what it is, and for a regular file its data's
 * SHA-256. */
struct artifact_entry {
	char path[ARTIFACT_PATH_MAX];   /* relative to the image's root: checked names, UTF-8 */
	char kind;                      /* 'f' regular file, 'd' directory, 'l' symbolic link,
					   'c' 'b' 'p' 's' devices, FIFO, socket */
	uint16_t mode;                  /* permission bits (07777) */
	uint64_t size;                  /* a file's or a link's */
	char sha256[65];                /* a file's data, hex; "" for others */
	long copy;                      /* a file's copy in the destination, named by this number; -1 none */
	char *target;                   /* a link's target, escaped (\xNN) to printable ASCII; else NULL */
};

struct artifacts_result {
	struct artifact *files;
	size_t nfiles;
	struct artifact_entry *entries;   /* a manifest's, in the walk's order */
	size_t nentries;
	struct artifact_skip *skipped;
	size_t nskipped;
};

/* Who the helper is, and who owns what it copied. */
struct artifacts_ids {
	/* The helper's host identity: when vmrun is root, a fresh uid and
	 * gid reserved for this run (never 0) that own nothing on the host;
	 * when it is not, vmrun's own. */
	uid_t helper_uid;
	gid_t helper_gid;
	/* Who owns the copied tree afterwards (the invoking user). When it
	 * differs from the helper's (vmrun root only), the parent gives the
	 * tree to it once the helper is gone. */
	uid_t owner_uid;
	gid_t owner_gid;
};

/* Copy the regular files and directories under /artifacts of the ext4
 * image on image_fd (a regular file opened O_RDONLY; it is never opened by
 * path) into the directory on dest_fd, which must be empty (created by the
 * caller as the invoking user; opened O_RDONLY|O_DIRECTORY). When vmrun is
 * root and dest's owner is not helper_uid, dest is first given to
 * helper_uid:helper_gid; afterwards, whether or not the helper succeeded,
 * everything in dest and dest itself go to owner_uid:owner_gid (a walk by
 * fds, bounded by the caps). Without root, the helper ids must be vmrun's
 * own and the owner the same.
 *
 * Skipped, each with a reason: symbolic links, devices, sockets, FIFOs,
 * names that are empty, ".", "..", contain '/' or control bytes or are
 * longer than 255 bytes; entries past the depth, path, file or byte caps;
 * files whose size is not backed by their allocated blocks (sparse or
 * inconsistent inodes); hard links to an already copied inode; files whose
 * data cannot be read, which stay in dest emptied (the helper may not
 * unlink: a hijacked one could then delete), "(left empty)". Files are
 * created with O_EXCL|O_NOFOLLOW, modes reduced to 0644 or 0755 (0755 when
 * any execute bit was set), no setuid/setgid/sticky bits; directories 0755.
 * A missing artifacts/ gives an empty result. Returns 0 with res filled
 * (free with artifacts_result_free), or -1 with a one-line reason in err,
 * starting "artifacts: " (bad arguments, unreadable image, no Landlock or
 * user namespaces, helper killed or timed out, with the first line of its
 * stderr when it has one; what it copied stays). */
int artifacts_extract(int image_fd, int dest_fd, const struct artifacts_ids *ids,
		      const struct artifacts_limits *lim, struct artifacts_result *res, char *err, size_t errlen);

/* A manifest of the whole ext4 image on image_fd (lim->manifest set),
 * by the same confined helper as artifacts_extract and with its rules for
 * image_fd, dest_fd, ids and names: every directory, regular file,
 * symbolic link and special file from the root down within the caps
 * (bad names and what is past a cap skipped, with reasons), regular files
 * summed with SHA-256 (holes read as zeros), and those of at most
 * lim->copy_max bytes copied into dest as files named by their entry's
 * copy number. Returns 0 with res->entries and res->skipped filled, or
 * -1 with a one-line reason in err ("artifacts: ..."). */
int artifacts_manifest(int image_fd, int dest_fd, const struct artifacts_ids *ids,
		       const struct artifacts_limits *lim, struct artifacts_result *res, char *err, size_t errlen);

/* The helper's manifest line for one entry, without its letter and space
 * ("D", "R", "L", "O"), parsed into e: the format artifacts_walk.c
 * writes. Pure; 0, or -1 when the line is malformed or breaks a cap
 * (copies' numbers only grow: *next_copy is the least the next may be). */
int artifacts_parse_entry(char letter, const char *s, size_t n, const struct artifacts_limits *lim,
			  long *next_copy, struct artifact_entry *e);

/* Free what artifacts_extract allocated. */
void artifacts_result_free(struct artifacts_result *res);

#endif
