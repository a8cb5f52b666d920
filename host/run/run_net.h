/* A run's network proxy, from the run's side (host/run/proxy_wire.h is the
 * contract, host/proxy/ the program): the socket vmm connects to for
 * the guest's port PROTO_NET_VSOCK_PORT, the vmrun-proxy process in its
 * own jail, and at the end its audit into the result. Only for a run
 * whose plan allows network; without it nothing here runs and the guest
 * has no way out. */
#ifndef VMRUN_RUN_NET_H
#define VMRUN_RUN_NET_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "jail.h"
#include "policy.h"
#include "proxy_wire.h"
#include "result.h"
#include "run.h"

struct run_net {
	pid_t pid;                     /* the proxy, 0 before it starts */
	int control;                   /* our end of the control socket, -1 */
	struct jail helper;            /* the uid reserved for it (root only) */
	char sock[PATH_MAX + 96];      /* "<uds>_3128" */
	char root[PATH_MAX + 32];      /* the empty directory it makes its root */
	int err_fd;                    /* its stderr, a pipe: our end, when err_open */
	bool err_open;
};

/* What the proxy of a run of req under policy p allows, into c (from
 * proxy_config_init): the policy's allow_net rules, then the spec's,
 * each within the policy's ceiling, and the policy's caps. Returns 1
 * when the run has network, 0 when it has none (no rule at all), or -1
 * with a one-line reason naming the rule in err. Pure. */
int run_net_plan(const struct policy *p, const struct run_request *req, struct proxy_config *c, char *err,
		 size_t errlen);

/* Start the proxy for cfg (its rules, caps and secrets; the ids are
 * filled in here), with ca_fd (-1: none) as its CA file: the listening socket "<uds>_PROTO_NET_VSOCK_PORT" owned by the
 * jail's uid (vmm connects to it), the proxy program next to vmm, a uid
 * of its own when root, its stderr a pipe that run_net_finish reads (not
 * a file: the proxy may write none, RLIMIT_FSIZE 0, and a line to one
 * would kill it with SIGXFSZ). Returns 0, or -1 with a one-line reason
 * in err, with what was made left for run_net_release. */
int run_net_start(struct run_net *n, const struct proxy_config *cfg, int ca_fd, const char *vmm, const char *run_dir,
		  const char *uds, const struct jail_spec *js, const struct jail *vmm_jail, char *err, size_t errlen);

/* Stop the proxy (it ends its tunnels), take its audit into r->network,
 * and reap it; a proxy that failed or died says so in r's message. */
void run_net_finish(struct run_net *n, struct run_result *r);

/* Kill what is left, close and remove what start made; safe on a zeroed
 * struct with control -1 and helper.uid_fd -1, after a failed start, and
 * twice. */
void run_net_release(struct run_net *n);

#endif
