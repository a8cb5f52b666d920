/* Source mode's stages: a runtime's compile and run templates expanded
 * into the agent's REQUEST, each stage with its limits, and the run's own
 * limits derived from them. Pure: no file is opened, nothing is run. */
#ifndef VMRUN_RUN_STAGES_H
#define VMRUN_RUN_STAGES_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "result.h"
#include "run.h"
#include "runtime.h"

/* What run_stages_build makes. */
struct run_stages {
	struct proto_request *proto;            /* its stages are filled (nstages, argv, limits) */
	char *store;                            /* the argv words' text */
	size_t storelen;
	int64_t stage_timeout_ms[PROTO_MAX_STAGES];
	double timeout_s;                       /* the whole run's */
	uint64_t memory_mib;                    /* the VM's */
	const char *compiled;                   /* the run stage's program when the compile
						 * stage makes it (it names it as a word), else NULL */
};

/* The stages of req in runtime rt, for the source files named files (as
 * they are called in the workspace): a compile stage when rt has a compile
 * template, then the run stage with req's argv as {args}. Stage limits are
 * req's, else rt's defaults, else RUN_DEFAULT_*; the run's timeout and
 * memory are req's, else derived (RUN_BOOT_ALLOWANCE_S plus the stages'
 * timeouts; the largest stage memory plus RUN_STAGE_MEMORY_SLACK_MIB, at
 * least RUN_DEFAULT_MEMORY_MIB). r gets source, nstages and each stage's
 * limits. Returns 0, or -1 with a one-line reason in err (a template that
 * does not expand, a stage memory above the VM's). */
int run_stages_build(struct run_stages *out, const struct run_request *req, const struct runtime *rt,
		     const char *const *files, unsigned nfiles, struct run_result *r, char *err, size_t errlen);

#endif
