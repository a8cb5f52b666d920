/* One stage of a session, agent side: start its program (pipes, limits,
 * its cgroup), relay its output (and, in the run stage, the host's
 * stdin), wait for it and kill what it left behind. Internal to the agent:
 * agent.c checks each stage's program and sends the EXIT frames. */
#ifndef VMRUN_STAGE_H
#define VMRUN_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent.h"
#include "proto.h"

struct cgroup;

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

/* What a process the agent starts becomes, in the forked child: a run's
 * stage, or a sandbox's command. */
struct stage_exec {
	const char *path;             /* resolved and checked against the allowlist */
	char *const *argv, *const *env;
	const char *cwd;
	uid_t uid;                    /* (uid_t)-1: keep ours */
	gid_t gid;
	uint64_t nproc, nofile, fsize;   /* rlimits */
	uint64_t cpu_ms;              /* RLIMIT_CPU, rounded up to seconds; 0: none */
	const struct cgroup *group;   /* joined first; NULL: none */
	int in, out, err;             /* become 0, 1, 2 */
	bool tty;                     /* they are a terminal's, which becomes its controlling tty */
	int errfd;                    /* CLOEXEC: {step, errno} when it fails */
};

/* The steps stage_exec_child reports a failure of. */
enum { STAGE_STEP_SETUP = 1, STAGE_STEP_EXEC = 2 };

/* In a forked child: its own session, the cgroup, cwd, rlimits, the ids,
 * the pipes, then execve. Never returns: a failure is written as two ints
 * {step, errno} on errfd and the child exits 127. */
void stage_exec_child(const struct stage_exec *k) __attribute__((noreturn));

/* The parent's side of a started process. */
struct stage_proc {
	pid_t pid;
	int pidfd;        /* -1 where the kernel lacks pidfd_open */
	int in;           /* stdin's write end, non-blocking; -1 when it reads /dev/null */
	int out, err;     /* stdout's and stderr's read ends */
};

/* Fork a process that becomes x (its in, out, err and errfd are made
 * here: pipes, and /dev/null for stdin without with_stdin) and wait until
 * it has exec'd. Returns 0 with p filled, 1 when it could not become the
 * command (failed[] = {step, errno}; it was reaped, nothing runs), or -1
 * with errno set. */
int stage_spawn(struct stage_exec *x, bool with_stdin, struct stage_proc *p, int failed[2]);

/* Whether a process under a CPU limit of limit_ms (0: none) that ended
 * with wait status after cpu_ms of CPU time was ended by that limit:
 * SIGXCPU at RLIMIT_CPU's soft limit, or SIGKILL at its hard one. */
bool stage_cpu_exceeded(uint64_t limit_ms, int status, uint64_t cpu_ms);

/* stage_spawn on a terminal of cols x rows (a pseudo-terminal's slave as
 * its 0, 1 and 2, its controlling tty): p->out is the master, read for
 * all it writes, p->in a second descriptor of the master, written for
 * its input (non-blocking, both), p->err -1. The same returns. */
int stage_spawn_pty(struct stage_exec *x, uint16_t cols, uint16_t rows, struct stage_proc *p, int failed[2]);

/* The EXIT kind of a child that could not become the command, from the
 * {step, errno} it reported. Pure. */
uint32_t stage_exec_failed(const int failed[2]);

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
