/* /v1/judge's runs (judge.h has the request and the verdicts): one
 * compile in a sandbox of the tenant's, checkpointed; each test in a fork
 * of that checkpoint; every sandbox deleted at the end. */
#ifndef VMRUND_JUDGE_RUN_H
#define VMRUND_JUDGE_RUN_H

#include <jansson.h>

#include "judge.h"

struct vmrund;

/* Judge jr for tenant, waiting for every test: {verdict, compile, tests,
 * summary} (*status 200), or NULL with *status (400: no such runtime;
 * 503: a sandbox could not be made or reached, the tenant's ceilings
 * among the reasons; 500) and why in err. */
json_t *judge_run(struct vmrund *d, unsigned tenant, const struct judge_request *jr, unsigned *status, char *err,
		  size_t errlen);

#endif
