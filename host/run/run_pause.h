/* A paused sandbox's files on the host (the run library's side of vmm's
 * --pause-out and --resume, vmm/vm_pause.h): vmm writes the VM's state and
 * pages under ".new" names; here they are renamed into place once vmm
 * exited 0, the workspace image they belong to is summed, and all of it is
 * checked again before a resume. The snapshot the VM was restored from is
 * pinned by hard links where the file system allows, so that a snapshot
 * made anew meanwhile does not strand the paused VM. */
#ifndef VMRUN_RUN_PAUSE_H
#define VMRUN_RUN_PAUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RUN_PAUSE_SUM_FILE "workspace.sum"

/* A checkpoint (a sandbox's DIR/RUN_CHECKPOINTS_DIR/NAME), as the
 * supervisor keeps one and a fork starts from it: the paused VM's files
 * above, its workspace image, and the snapshot it is against in a
 * directory of its own. */
#define RUN_CHECKPOINTS_DIR     "checkpoints"
#define RUN_CHECKPOINT_IMAGE    "workspace.ext4"
#define RUN_CHECKPOINT_BASE     "base"
/* The workspace as the sandbox that took the checkpoint started: a
 * checkpoint's change (a diff, expect_digest) is from it. A sandbox keeps
 * its own under the same name in its directory. */
#define RUN_CHECKPOINT_START    "start.ext4"
/* Its meta (the supervisor's): name, created_ms, bytes, next_cmd, and the
 * digest of its change from start.ext4 and whether that is complete. */
#define RUN_CHECKPOINT_META     "checkpoint.json"
#define RUN_CHECKPOINT_NAME_MAX 64

/* A cluster's snapshot dir, as vmrund and the supervisor both lay it out
 * (host/sandbox/park.c): SNAPSHOT_DIR/sandboxes/ID/RUN_PARKED_DIR is a
 * sandbox's parked VM, SNAPSHOT_DIR/RUN_BASES_DIR/SUM each base snapshot
 * a parked VM is against, once. */
#define RUN_PARKED_DIR          "paused"
#define RUN_PARKED_SUM          "sandbox.sum"   /* in it: the table's SHA-256, written last */
/* SNAPSHOT_DIR/sandboxes/ID/RUN_SHARED_OWNER: the token of the supervisor
 * that holds the sandbox now, written by the vmrund that starts it (and
 * given to it, --owner): a supervisor whose node lost the sandbox to
 * another meanwhile finds another token there, and parks nothing. */
#define RUN_SHARED_OWNER        "owner"
#define RUN_OWNER_LEN           32      /* hex digits */
#define RUN_BASES_DIR           "bases"

/* Whether name may name a checkpoint: 1..RUN_CHECKPOINT_NAME_MAX of
 * [A-Za-z0-9._-], not starting with a dot (so never "." or ".."). Pure. */
static inline bool run_checkpoint_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n < 1 || n > RUN_CHECKPOINT_NAME_MAX || name[0] == '.')
		return false;
	return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

/* The longest sandbox id in a checkpoint's reference (vmrun's run ids). */
#define RUN_CHECKPOINT_SANDBOX_MAX 32

/* A checkpoint's reference, "SANDBOX_ID/NAME" (a fork's or a verification
 * run's from_checkpoint), split: the id (1 to RUN_CHECKPOINT_SANDBOX_MAX
 * characters before the first '/') into id, and *name the rest, which
 * must pass run_checkpoint_name_ok. false when ref is no such reference.
 * Pure. */
static inline bool run_checkpoint_ref(const char *ref, char id[RUN_CHECKPOINT_SANDBOX_MAX + 1], const char **name)
{
	const char *slash = ref ? strchr(ref, '/') : NULL;
	size_t n = slash ? (size_t)(slash - ref) : 0;
	if (!n || n > RUN_CHECKPOINT_SANDBOX_MAX || !run_checkpoint_name_ok(slash + 1))
		return false;
	memcpy(id, ref, n);
	id[n] = '\0';
	*name = slash + 1;
	return true;
}

/* SHA-256 of the workspace image as hex into hex (65 bytes): of its size
 * and of every 4 KiB block that is not zeros, with its offset, so that
 * the same contents give the same sum however the file's holes and
 * extents lie. Returns 0, or -1 with why in err. */
int run_pause_image_sum(const char *image, char hex[65], char *err, size_t errlen);

/* After vmm paused into dir: state.new and pages.new become state and
 * pages, and the image's sum is written to dir/RUN_PAUSE_SUM_FILE.
 * Returns 0, or -1 with why in err (the previous pause's files, if any,
 * are then as they were, but the sum may be the new image's). */
int run_pause_commit(const char *dir, const char *image, char *err, size_t errlen);

/* Before a resume from dir: state and pages are regular files and the
 * image's sum is the one saved with them. Returns 0, or -1 with a
 * one-line reason in err ("the workspace image changed since the pause"). */
int run_pause_check(const char *dir, const char *image, char *err, size_t errlen);

/* Hard-link snapshot's state and memory into pin (made, mode 0755).
 * Returns 0, or -1 with errno (EXDEV: another file system). */
int run_pause_pin(const char *snapshot, const char *pin);

/* dst (made, mode 0755) holds snapshot's state and memory, linked or
 * copied (run_pause_link_or_copy), mode 0644 as the snapshot cache
 * publishes them: a jailed vmm reads them where they are when no pin can
 * be linked to them (another file system). 0, or -1 with errno. */
int run_pause_keep_base(const char *snapshot, const char *dst);

/* dst (made, 0600, not there before) becomes a copy of src: a reflink
 * where the file system has them, else src's data extents, holes kept;
 * fsynced. Returns 0, or -1 with errno. */
int run_pause_copy(const char *src, const char *dst);

/* dst names src's file: a hard link (a paused VM's files never change: a
 * pause writes new files and renames them over the old names), else a
 * copy. Returns 0, or -1 with errno. */
int run_pause_link_or_copy(const char *src, const char *dst);

/* Remove what a pause left in dir and pin (either may be NULL or absent). */
void run_pause_remove(const char *dir, const char *pin);

#endif
