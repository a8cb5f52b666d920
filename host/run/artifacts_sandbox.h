/* The artifact helper's confinement, internal to artifacts.c (and its
 * test): what the forked helper does to itself before it reads the image.
 * In order: its fds, signals and rlimits; a fresh uid when vmrun is root;
 * its own user, mount, network, IPC and UTS namespaces, with a read-only
 * root that holds nothing but the destination; no capabilities,
 * no_new_privs and Landlock (required); then, once the image is open, the
 * seccomp filter. */
#ifndef VMRUN_ARTIFACTS_SANDBOX_H
#define VMRUN_ARTIFACTS_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The helper's fds once artifacts_sandbox_start has run. 0 and 1 are
 * /dev/null, 2 a pipe the parent drains. */
#define SANDBOX_REPORT_FD 3
#define SANDBOX_IMAGE_FD  4
#define SANDBOX_DEST_FD   5   /* after artifacts_sandbox_enter: /dest in its own root */

struct artifacts_sandbox {
	/* The parent's fds, as the fork inherited them. */
	int report, image, dest, errpipe, devnull;
	pid_t parent;          /* vmrun: the helper dies with it */
	bool switch_ids;       /* vmrun is root: become uid:gid before anything else */
	uid_t uid;             /* the helper's host ids (its own when not switching) */
	gid_t gid;
	uint64_t max_file;     /* RLIMIT_FSIZE */
	unsigned extra_fds;    /* fds beyond the fixed ones: one per directory level and slack */
};

/* Parent-death signal, fds, signals, umask. -1 when that failed; there is
 * no report channel to say why until it succeeded. */
int artifacts_sandbox_start(const struct artifacts_sandbox *s);

/* Everything else but the seccomp filter. Returns 0, or -1 with a one-line
 * reason in why. */
int artifacts_sandbox_enter(const struct artifacts_sandbox *s, char *why, size_t whylen);

/* The seccomp filter for the walk; the image must be open already. */
int artifacts_sandbox_filter(void);

#endif
