/* The jail's cgroup (host/run/jail_cgroup.c), for host/run/jail.c: the rest of
 * the jail module's interface is jail.h. */
#ifndef VMRUN_JAIL_CGROUP_H
#define VMRUN_JAIL_CGROUP_H

#include <stddef.h>

#include "jail.h"

/* Create the run's cgroup with its memory, pids and CPU limits: v2 under
 * /sys/fs/cgroup/vmrun, else v1; rootless, under the delegated subtree,
 * or none at all when there is none and the spec allows a weaker jail.
 * Once per jail: a second call does nothing (j->cgroup_made). Sets
 * j->cgroup*, j->cgroup_version. Returns 0, or -1 with a reason. */
int jail_cgroup_create(const struct jail_spec *s, struct jail *j, char *err, size_t errlen);

/* After jail_kill: remove the cgroup (retrying while it empties); safe
 * when none was made. */
void jail_cgroup_remove(struct jail *j);

#endif
