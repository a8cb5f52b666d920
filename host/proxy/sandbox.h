/* The proxy jails itself once it has read its configuration, its DNS
 * servers and its own addresses, before it reads a byte from the guest:
 *
 *   files     chroot into an empty directory the run made (as root), or
 *             in a user namespace of its own (rootless); and no system
 *             call that takes a path is allowed anyway
 *   identity  the uid/gid the run reserved for it (as root), no groups,
 *             no capabilities, no_new_privs, not dumpable
 *   limits    descriptors for its tunnels, no files written (stderr is
 *             a pipe; SIGXFSZ is ignored), no core
 *   syscalls  a seccomp filter of what a poll loop over TCP sockets
 *             needs; anything else kills it
 * The network namespace stays the host's: dialing out is its job. */
#ifndef VMRUN_PROXY_SANDBOX_H
#define VMRUN_PROXY_SANDBOX_H

#include <stddef.h>

#include "proxy_wire.h"

/* Jail this process (see above) with root as its root directory. Returns
 * 0, or -1 with a one-line reason in err. */
int proxy_sandbox(const char *root, const struct proxy_config *c, char *err, size_t errlen);

#endif
