/* One stage of a session, agent side: start its program (pipes, limits,
 * its cgroup), relay its output (and, in the run stage, the host's
 * stdin), wait for it and kill what it left behind. Internal to the agent:
 * agent.c checks each stage's program and sends the EXIT frames. */
#ifndef VMRUN_STAGE_H
#define VMRUN_STAGE_H

#include <stddef.h>

#include "agent.h"
#include "proto.h"

/* After a stage's main process exits and what it left is killed, output
 * still in the pipes is drained for at most this long (a process that left
 * the session may hold them open). */
#define STAGE_DRAIN_MS 200
/* How long a stage's cgroup may take to empty once killed. */
#define STAGE_CGROUP_EMPTY_MS 2000

/* What the stages of one session share. */
struct stage_ctx {
	int fd;                           /* the connection to the host */
	struct proto_reader *rd;          /* its frames; STDIN frames read ahead wait here for the run stage */
	const struct proto_request *req;
	const struct agent_config *cfg;
	char **env;                       /* the command's environment, the same in every stage */
	char *err;                        /* why, when stage_run fails */
	size_t errlen;
};

/* Run stage i of c->req from path, which the caller resolved and checked
 * against the allowlist, and fill *ex (.stage = i) for its EXIT frame,
 * which the caller sends: it decides whether the session goes on. Only the
 * last stage (RUN) reads the host's socket, for its stdin; a COMPILE
 * stage's stdin is /dev/null and STDIN frames stay queued. Returns 0 (also
 * when the program could not be started: ex says why), or -1 when the
 * agent failed (reason in c->err; nothing of the stage is left running
 * that the agent could kill). */
int stage_run(const struct stage_ctx *c, unsigned i, const char *path, struct proto_exit *ex);

#endif
