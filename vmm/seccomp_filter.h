/* The vmm's own seccomp filters, one per thread role (DESIGN, security
 * invariant 5), built with libseccomp. Each is an allowlist whose default
 * action kills the whole process (SCMP_ACT_KILL_PROCESS): a thread taken
 * over through a device bug can make only the calls its role needs, with
 * the arguments it needs them with.
 *
 * Load order (vm_start_vcpus): every vCPU thread loads the vCPU filter
 * before its first KVM_RUN, then waits; the main thread, once every vCPU
 * thread has loaded its filter, loads the main filter and only then lets
 * the vCPUs run the guest. So no guest instruction runs while any vmm
 * thread is unfiltered, and the main filter need not allow clone. There is
 * no option to leave the filters out, in any build. */
#ifndef VMM_SECCOMP_FILTER_H
#define VMM_SECCOMP_FILTER_H

#include <seccomp.h>

enum seccomp_role {
	SECCOMP_ROLE_MAIN,   /* event loop, device back-ends, teardown */
	SECCOMP_ROLE_VCPU,   /* one vCPU: KVM_RUN and MMIO/PIO dispatch */
	/* The main thread of a vmm --snapshot-out: the main role, and reading
	 * (never setting) the VM's and vCPUs' state to save it. Restored VMs
	 * run under the plain roles. */
	SECCOMP_ROLE_MAIN_SNAPSHOT,
};

/* Build the filter of role without loading it. vm_fd is the VM's fd and
 * vcpu_fd the calling vCPU's (the vCPU role allows ioctl on those two fds
 * only; both are ignored for the main role). *nrules, when not NULL, gets
 * the number of rules added. Returns the filter (the caller releases it
 * with seccomp_release), or NULL with errno set. */
scmp_filter_ctx seccomp_filter_build(enum seccomp_role role, int vm_fd, int vcpu_fd, unsigned *nrules);

/* Build the filter of role and load it on the calling thread (other threads
 * keep theirs). Sets no_new_privs. Returns 0, or a negative errno value when
 * the filter could not be built or loaded. */
int seccomp_filter_load(enum seccomp_role role, int vm_fd, int vcpu_fd);

#endif
