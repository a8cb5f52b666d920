/* The run spec (run_spec.h): built field by field (the CLI), every
 * default applied once (run_spec_effective), and held to the policy's
 * ceilings (run_spec_check). Its JSON is run_spec_json.c. */
#include "run_spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "policy.h"
#include "proto.h"
#include "proxy_wire.h"
#include "runtime.h"

/* A run's rules all travel to its proxy, which holds no more. */
_Static_assert(RUN_SPEC_MAX_NET_RULES == PROXY_RULES_MAX, "a request's network rules must fit the proxy's");
_Static_assert(RUN_SPEC_MAX_ENV <= PROTO_MAX_ENV, "a spec's grants must fit the agent's REQUEST");

/* ---- built field by field --------------------------------------------------- */

/* A copy of s appended to (*v)[*n], which stays NULL-terminated as
 * run_spec_from_json's arrays are. */
static int add_string(char ***v, unsigned *n, const char *s)
{
	char **more = realloc(*v, (*n + 2) * sizeof(*more));
	if (!more)
		return -1;
	*v = more;
	if (!(more[*n] = strdup(s)))
		return -1;
	more[++*n] = NULL;
	return 0;
}

int run_spec_add_arg(struct run_spec *rq, const char *s)
{
	return add_string(&rq->argv, &rq->argc, s);
}

int run_spec_add_compile_arg(struct run_spec *rq, const char *s)
{
	return add_string(&rq->compile_args, &rq->ncompile_args, s);
}

int run_spec_add_run_cmd(struct run_spec *rq, const char *s)
{
	return add_string(&rq->run_cmd, &rq->nrun_cmd, s);
}

int run_spec_add_compile_cmd(struct run_spec *rq, const char *s)
{
	return add_string(&rq->compile_cmd, &rq->ncompile_cmd, s);
}

int run_spec_add_env(struct run_spec *rq, const char *s)
{
	return add_string(&rq->env, &rq->nenv, s);
}

int run_spec_add_rule(struct run_spec *rq, const struct net_rule *r)
{
	if (rq->nnet >= RUN_SPEC_MAX_NET_RULES)
		return errno = ENOSPC, -1;
	struct net_rule *more = realloc(rq->net, (rq->nnet + 1) * sizeof(*more));
	if (!more)
		return errno = ENOMEM, -1;
	rq->net = more;
	rq->net[rq->nnet++] = *r;
	return 0;
}

/* ---- what a run gets ------------------------------------------------------ */

/* One stage's limits: asked for, else the runtime's, else the default. */
static struct run_stage_limits stage_effective(const struct run_stage_limits *asked, uint64_t rt_timeout_s,
					       uint64_t rt_memory_mib, double fallback_timeout_s)
{
	return (struct run_stage_limits){
		.timeout_s = asked->timeout_s > 0 ? asked->timeout_s
			     : rt_timeout_s     ? (double)rt_timeout_s
						: fallback_timeout_s,
		.memory_mib = asked->memory_mib ? asked->memory_mib : rt_memory_mib,
		.cpu_time_ms = asked->cpu_time_ms,
	};
}

void run_spec_effective(const struct run_spec *rq, const struct runtime *rt, struct run_effective *e)
{
	*e = (struct run_effective){
		.timeout_s = rq->timeout_s > 0 ? rq->timeout_s : RUN_SPEC_DEFAULT_TIMEOUT_S,
		.memory_mib = rq->memory_mib ? rq->memory_mib : RUN_SPEC_DEFAULT_MEMORY_MIB,
		.cpus = rq->cpus ? rq->cpus : RUN_SPEC_DEFAULT_CPUS,
		.disk_mib = rq->disk_mib ? rq->disk_mib : RUN_SPEC_DEFAULT_DISK_MIB,
		.max_output = rq->max_output ? rq->max_output : RUN_SPEC_DEFAULT_MAX_OUTPUT,
	};
	if (!rq->source || !rt)
		return;
	/* its own commands replace the runtime's both: a compile stage only
	 * when it names one */
	if (rq->nrun_cmd ? rq->ncompile_cmd > 0 : rt->compile[0] != '\0')
		e->stage[e->nstages++] = stage_effective(&rq->compile, rt->compile_timeout_s, rt->compile_memory_mib,
							 RUN_SPEC_DEFAULT_COMPILE_TIMEOUT_S);
	e->stage[e->nstages++] =
		stage_effective(&rq->run, rt->run_timeout_s, rt->run_memory_mib, RUN_SPEC_DEFAULT_RUN_TIMEOUT_S);
	double timeout = RUN_SPEC_BOOT_ALLOWANCE_S;
	uint64_t memory = 0;
	for (unsigned i = 0; i < e->nstages; i++) {
		timeout += e->stage[i].timeout_s;
		if (e->stage[i].memory_mib > memory)
			memory = e->stage[i].memory_mib;
	}
	if (rq->timeout_s <= 0)
		e->timeout_s = timeout;
	if (!rq->memory_mib && memory + RUN_SPEC_STAGE_MEMORY_SLACK_MIB > e->memory_mib)
		e->memory_mib = memory + RUN_SPEC_STAGE_MEMORY_SLACK_MIB;
}

void run_spec_rule_field(const struct run_spec *rq, unsigned i, char *buf, size_t cap)
{
	bool addr = rq->net[i].kind == NET_RULE_ADDR;
	unsigned n = 0;
	for (unsigned k = 0; k < i; k++)
		n += (rq->net[k].kind == NET_RULE_ADDR) == addr;
	snprintf(buf, cap, "network.%s[%u]", addr ? "allow_addr" : "allow", n);
}

int run_spec_check(const struct run_spec *rq, const struct run_effective *e, const struct policy *pol,
		   enum run_spec_words words, char *err, size_t errlen)
{
	bool cli = words == RUN_SPEC_WORDS_CLI;
	struct { const char *cli, *api; uint64_t v, max; } c[] = {
		{ "--memory ", "limits.memory_mib: ", e->memory_mib, pol->max_memory_mib },
		{ "--cpus ", "limits.cpus: ", e->cpus, pol->max_cpus },
		{ "--disk ", "limits.disk_mib: ", e->disk_mib, pol->max_disk_mib },
		{ "--max-output ", "limits.max_output: ", e->max_output, pol->max_output },
	};
	if (e->timeout_s > (double)pol->max_timeout_s)
		return errf(err, errlen, "%s%g exceeds the policy's ceiling of %llu s",
			    cli ? "--timeout " : "limits.timeout_s: ", e->timeout_s,
			    (unsigned long long)pol->max_timeout_s);
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		if (c[i].v > c[i].max)
			return errf(err, errlen, "%s%llu exceeds the policy's ceiling of %llu", cli ? c[i].cli : c[i].api,
				    (unsigned long long)c[i].v, (unsigned long long)c[i].max);
	for (unsigned i = 0; i < rq->nnet; i++) {
		const struct net_rule *r = &rq->net[i];
		if (policy_net_admits(pol, r))
			continue;
		char text[NET_HOST_MAX + 64], field[48];
		net_rule_format(r, text, sizeof(text));
		if (cli)
			return errf(err, errlen, "%s %s: beyond the policy's network ceiling",
				    r->kind == NET_RULE_ADDR ? "--allow-net-addr" : "--allow-net", text);
		run_spec_rule_field(rq, i, field, sizeof(field));
		return errf(err, errlen, "%s: %s is beyond the policy's network ceiling", field, text);
	}
	return 0;
}

static void free_strings(char **v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void run_spec_free(struct run_spec *rq)
{
	free_strings(rq->argv, rq->argc);
	free_strings(rq->compile_args, rq->ncompile_args);
	free_strings(rq->compile_cmd, rq->ncompile_cmd);
	free_strings(rq->run_cmd, rq->nrun_cmd);
	for (unsigned i = 0; i < rq->nfiles; i++)
		free(rq->files[i].data);
	free(rq->files);
	for (unsigned i = 0; i < rq->nwfiles; i++)
		free(rq->wfiles[i].data);
	free(rq->wfiles);
	free(rq->stdin_data);
	free(rq->repeat_expect);
	free_strings(rq->env, rq->nenv);
	free(rq->net);
	json_decref(rq->client);
	memset(rq, 0, sizeof(*rq));
}
