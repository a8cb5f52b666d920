/* One run, agent side: the session logic of the guest agent, apart from
 * PID 1's duties (mounts, the vsock connection, the reset) so that it runs
 * as an ordinary process over any stream socket in tests. */
#ifndef VMRUN_AGENT_H
#define VMRUN_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct proto_request;

#define AGENT_NAME      "vmrun-agent 0.1.0"
#define AGENT_CHUNK     16384u   /* bytes of output per STDOUT/STDERR frame at most */

struct agent_config {
	const char *cwd;      /* the command's working directory */
	const char *home;     /* its HOME */
	uid_t uid;            /* user to run as; (uid_t)-1 keeps ours */
	gid_t gid;
	/* PID 1: after each stage kill every other process; in a sandbox,
	 * reap the processes that commands left to it */
	bool kill_all;
	/* A mounted cgroup2 hierarchy with the memory controller enabled for
	 * its children, where a memory-limited stage gets its group; NULL: no
	 * cgroups, and a request with a memory limit ends in an ERROR. */
	const char *cgroup_root;
	const char *cgroup_error;   /* why cgroup_root is NULL, for that ERROR; may be NULL */
	/* PID 1: the kernel RNG's device (/dev/urandom), reseeded from each
	 * request's SEED before the clock is set to its TIME (agent_unique).
	 * NULL: neither; an agent that is not the guest's init (the tests)
	 * must leave its host's RNG and clock alone. */
	const char *random_dev;
	/* A sandbox's agent after a pause (proto_sandbox.h): connect to the
	 * host again, returning the new stream fd or -1. NULL: a connection
	 * that ends, paused or not, ends the sandbox. */
	int (*reconnect)(void);
	/* A sandbox's workspace file system, frozen (FIFREEZE) from PAUSE to
	 * RESUME so that its disk holds everything written before the pause
	 * and nothing changes under the host while it reads or copies it.
	 * NULL: none (the tests, a workspace in RAM). */
	const char *freeze_dir;
};

/* Serve one session on the connected stream fd: HELLO, read the REQUEST;
 * a sandbox's (SANDBOX) is served by sandbox.c until the host closes the
 * connection; a run's goes on: for each stage in order check its program, run it, stream its
 * output and send its EXIT, going on while proto_stage_continues. Any
 * failure of the agent itself, a malformed frame included, is sent as an
 * ERROR frame (when the socket still works). Returns 0 when the session's
 * last EXIT was sent, -1 otherwise with the reason in err. */
int agent_session(int fd, const struct agent_config *cfg, char *err, size_t errlen);

/* Find prog as execve would be given it: a name with a '/' relative to cwd,
 * else the first PATH entry holding it. Writes the absolute path, its
 * directory canonicalised (symlinks in the name itself are kept, so busybox
 * applets stay distinct), into out. Returns 0, or -1 when there is no such
 * file. */
int agent_resolve(const char *prog, const char *cwd, const char *path, char *out, size_t outlen);

/* Whether the resolved path is one of the n allowlist entries. */
bool agent_allowed(const char *resolved, char *const *allow, unsigned n);

/* Resolve prog (agent_resolve, from cwd) into path and check it: on the
 * allowlist, a regular file, executable. Returns 0 when it may run, else
 * the EXIT kind that refuses it (PROTO_END_NOT_FOUND, PROTO_END_DENIED). */
uint32_t agent_check_program(const char *prog, const char *cwd, char *const *allow, unsigned nallow, char *path,
			     size_t len);

/* The variables agent_environment adds for a run with the network. */
#define AGENT_NET_ENV   14u
/* The run's id (the REQUEST's RUN_ID) in every stage's environment. */
#define AGENT_RUN_ID_VAR "VMRUN_RUN_ID"

/* Build the command's environment into env (room for max pointers, the
 * strings in store of storelen bytes): PATH, HOME, LANG=C.UTF-8,
 * PYTHONIOENCODING=utf-8, then each grant, which replaces a default of the
 * same name; then, when network is set (the request has NET), the
 * AGENT_NET_ENV variables that point the usual clients (curl, pip, npm,
 * git, Python's urllib) at the forwarder: HTTP(S)_PROXY, ALL_PROXY and
 * their lowercase forms, NO_PROXY/no_proxy, PIP_PROXY,
 * npm_config_(https_)proxy, and GIT_CONFIG_COUNT/KEY_0/VALUE_0 for
 * http.proxy. These replace a grant of the same name: the proxy is the
 * only way out, so a granted one could only break the run's network.
 * Last, when run_id is not NULL, AGENT_RUN_ID_VAR=run_id, which replaces
 * a grant of that name too: it is the host's name for the run, what the
 * command's own logs are matched to the run by, so not the caller's to
 * choose. Returns the count, or -1 when it does not fit. */
int agent_environment(const char *home, char *const *grants, unsigned ngrants, bool network, const char *run_id,
		      char **env, unsigned max, char *store, size_t storelen);

/* Make this guest unique from a decoded request: add its seed to the
 * kernel RNG behind random_dev (RNDADDENTROPY, all PROTO_SEED_LEN * 8 bits
 * credited), force the RNG to reseed (RNDRESEEDCRNG), then set
 * CLOCK_REALTIME to its time_ns. Returns 0, or -1 with what failed in
 * err. */
int agent_unique(const char *random_dev, const struct proto_request *r, char *err, size_t errlen);

/* agent_unique's work: reseed the kernel RNG of random_dev from seed
 * (PROTO_SEED_LEN bytes; NULL: not) and set CLOCK_REALTIME to time_ns (0:
 * not). Also a sandbox's on RESUME. Returns 0, or -1 with why in err. */
int agent_reseed(const char *random_dev, const uint8_t *seed, uint64_t time_ns, char *err, size_t errlen);

#endif
