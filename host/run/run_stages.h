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
	const char *compiled;                   /* the run stage's program when the compile
						 * stage makes it (it names it as a word), else NULL */
};

/* The stages of spec in runtime rt, for the source files named files (as
 * they are called in the workspace): a compile stage when rt has a compile
 * template, then the run stage with spec's argv as {args}, each with its
 * limits from e (run_spec_effective of spec and rt). r gets source,
 * nstages and each stage's limits. Returns 0, or -1 with a one-line
 * reason in err (a template that does not expand, compile limits for a
 * runtime without a compile stage, a stage memory above the VM's). */
/* The program rt's compile command writes and its run command runs (the
 * run template's program, an absolute path that a word of the compile
 * template names: "/tmp/prog"), into out: true, or false when rt has
 * none. A sandbox of rt may run it, as a source-mode run's stages may.
 * Pure. */
bool run_stages_compiled(const struct runtime *rt, char *out, size_t cap);

int run_stages_build(struct run_stages *out, const struct run_spec *spec, const struct run_effective *e,
		     const struct runtime *rt, const char *const *files, unsigned nfiles, struct run_result *r,
		     char *err, size_t errlen);

#endif
