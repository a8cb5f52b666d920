/* /v1/judge's runs (judge.h has the request and the verdicts): one
 * compile in a sandbox of the tenant's, checkpointed; each test in a fork
 * of that checkpoint; every sandbox deleted at the end. judge_run.c
 * drives a judge; judge_interact.c runs an interactive test. */
#ifndef VMRUND_JUDGE_RUN_H
#define VMRUND_JUDGE_RUN_H

#include <jansson.h>

#include "judge.h"
#include "runtime.h"
#include "sandbox_calls.h"

struct vmrund;

/* Judge jr for tenant, waiting for every test: {verdict, compile, tests,
 * summary} (*status 200), or NULL with *status (400: no such runtime;
 * 503: a sandbox could not be made or reached, the tenant's ceilings
 * among the reasons; 500) and why in err. */
json_t *judge_run(struct vmrund *d, unsigned tenant, const struct judge_request *jr, unsigned *status, char *err,
		  size_t errlen);

/* ---- between judge_run.c and judge_interact.c ---- */

/* A program a judge compiles once and forks for each test: the
 * contestant's, a checker or an interactor. */
struct program {
	const struct run_spec *src;   /* runtime and files */
	const struct runtime *rt;
	const char *names[RUN_SPEC_MAX_FILES];
	char base[SCHED_ID_MAX];      /* its compiled sandbox; "" none */
};

/* One judge under way. */
struct judge_job {
	struct sbx_user u;
	const struct judge_request *jr;
	struct program contestant, checker, interactor;
};

/* The files a testlib program (checker, interactor) is given, by name,
 * in its /workspace and as its arguments: the test's input, the output
 * judged, the expected answer. */
extern char *const judge_testlib_args[3];

/* pg's run command with args after it (job->u.err when it cannot be
 * made), as a command's argv. */
json_t *judge_argv(struct judge_job *job, const struct program *pg, char *const *args, unsigned nargs);

/* A fork of pg's checkpoint, living life_s: 0 with its id, or -1 with
 * job->u.err. */
int judge_fork(struct judge_job *job, const struct program *pg, double life_s, char id[SCHED_ID_MAX]);

/* What an interactive test leaves: both commands' answers (NULL where
 * there is none, why in job->u.err) and the interactor's output file
 * (NULL when no checker wants it or it could not be read). */
struct judge_talk {
	json_t *contestant, *interactor;
	char *output;
	size_t output_len;
};

/* Interactive test t: the contestant's program and the interactor, each
 * in a fork of its checkpoint, the one's stdout written to the other's
 * stdin through vmrund until both end. 0 with *talk filled, or -1 with
 * job->u.err (both forks are deleted either way). */
int judge_interact(struct judge_job *job, const struct judge_test *t, struct judge_talk *talk);

/* Free what talk holds; safe on a zeroed one. */
void judge_talk_free(struct judge_talk *talk);

#endif
