#include "run_stages.h"

#include <string.h>

#include "errmsg.h"

/* One stage's limits: asked for, else the runtime's, else the default. */
static void stage_limits(struct run_stage *st, const struct run_stage_request *asked, uint64_t rt_timeout_s,
			 uint64_t rt_memory_mib, double fallback_timeout_s)
{
	st->limits.timeout_s = asked->timeout_s > 0 ? asked->timeout_s :
			       rt_timeout_s ? (double)rt_timeout_s : fallback_timeout_s;
	st->limits.memory_mib = asked->memory_mib ? asked->memory_mib : rt_memory_mib;
	st->limits.cpu_time_ms = asked->cpu_time_ms;
}

/* Expand one template into the next stage of the request. */
static int add_stage(struct run_stages *out, size_t *used, uint32_t kind, const char *tmpl, const char *const *files,
		     unsigned nfiles, const struct run_request *req, const struct run_stage *limits, char *err,
		     size_t errlen)
{
	struct proto_request *p = out->proto;
	struct proto_stage *st = &p->stage[p->nstages];
	int n = runtime_expand(tmpl, files, nfiles, kind == PROTO_STAGE_RUN ? req->argv : NULL,
			       kind == PROTO_STAGE_RUN ? (unsigned)req->argc : 0, st->argv, PROTO_MAX_ARGS + 1,
			       out->store + *used, out->storelen - *used, err, errlen);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++)
		*used += strlen(st->argv[i]) + 1;
	st->kind = kind;
	st->argc = (unsigned)n;
	st->cpu_ms = limits->limits.cpu_time_ms;
	st->memory_kib = limits->limits.memory_mib * 1024;
	out->stage_timeout_ms[p->nstages] = (int64_t)(limits->limits.timeout_s * 1000.0);
	p->nstages++;
	return 0;
}

int run_stages_build(struct run_stages *out, const struct run_request *req, const struct runtime *rt,
		     const char *const *files, unsigned nfiles, struct run_result *r, char *err, size_t errlen)
{
	struct proto_request *p = out->proto;
	size_t used = 0;
	p->nstages = 0;
	out->compiled = NULL;
	r->source = true;
	r->nstages = rt->compile[0] ? 2 : 1;
	struct run_stage *run = &r->stage[r->nstages - 1], *compile = r->nstages > 1 ? &r->stage[0] : NULL;
	char why[256];
	stage_limits(run, &req->run, rt->run_timeout_s, rt->run_memory_mib, RUN_DEFAULT_RUN_TIMEOUT_S);
	if (compile) {
		stage_limits(compile, &req->compile, rt->compile_timeout_s, rt->compile_memory_mib,
			     RUN_DEFAULT_COMPILE_TIMEOUT_S);
		if (add_stage(out, &used, PROTO_STAGE_COMPILE, rt->compile, files, nfiles, req, compile, why, sizeof(why)))
			return errf(err, errlen, "%s's compile template: %s", rt->name, why);
	} else if (req->compile.timeout_s > 0 || req->compile.memory_mib || req->compile.cpu_time_ms) {
		return errf(err, errlen, "%s has no compile stage: its limits cannot be set", rt->name);
	}
	if (add_stage(out, &used, PROTO_STAGE_RUN, rt->run, files, nfiles, req, run, why, sizeof(why)))
		return errf(err, errlen, "%s's run template: %s", rt->name, why);
	/* The run program that the compile stage writes: named by one of its words. */
	const char *prog = p->stage[p->nstages - 1].argv[0];
	for (unsigned i = 1; compile && prog[0] == '/' && i < p->stage[0].argc; i++)
		if (!strcmp(p->stage[0].argv[i], prog))
			out->compiled = prog;
	double timeout = RUN_BOOT_ALLOWANCE_S;
	uint64_t memory = 0;
	for (unsigned i = 0; i < r->nstages; i++) {
		timeout += r->stage[i].limits.timeout_s;
		if (r->stage[i].limits.memory_mib > memory)
			memory = r->stage[i].limits.memory_mib;
	}
	out->timeout_s = req->timeout_s > 0 ? req->timeout_s : timeout;
	out->memory_mib = req->memory_mib ? req->memory_mib :
			  memory + RUN_STAGE_MEMORY_SLACK_MIB > RUN_DEFAULT_MEMORY_MIB ? memory + RUN_STAGE_MEMORY_SLACK_MIB :
			  RUN_DEFAULT_MEMORY_MIB;
	for (unsigned i = 0; i < r->nstages; i++)
		if (r->stage[i].limits.memory_mib > out->memory_mib)
			return errf(err, errlen, "the %s stage's memory limit of %llu MiB exceeds the VM's %llu MiB (--memory)",
				    i + 1 < r->nstages ? "compile" : "run",
				    (unsigned long long)r->stage[i].limits.memory_mib,
				    (unsigned long long)out->memory_mib);
	return 0;
}
