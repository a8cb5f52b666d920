/* How a run ended, decided once (result.h): which stage ends it, the
 * terminations' names, the outcome and its limits, and the outcome read
 * back from a result's JSON. Pure, and apart from result.c's writer so
 * that a reader (vmrund's spool, its metrics) links only this. */
#include "result.h"

#include <string.h>

#include <jansson.h>

struct run_stage *result_final_mut(struct run_result *r)
{
	unsigned n = r->nstages ? r->nstages : 1;
	for (unsigned i = n; i-- > 0;)
		if (r->stage[i].started)
			return &r->stage[i];
	return &r->stage[n - 1];
}

const struct run_stage *result_final(const struct run_result *r)
{
	return result_final_mut((struct run_result *)r);
}

const char *result_termination_name(enum termination t)
{
	static const char *const names[] = { "exited",    "signaled", "timeout", "denied",
					     "not_found", "vm_failed", "error",  "compile_error" };
	_Static_assert(sizeof(names) / sizeof(names[0]) == TERM_COUNT, "a name per termination");
	return names[t];
}

int result_termination_from_name(const char *name)
{
	for (int t = 0; name && t < TERM_COUNT; t++)
		if (!strcmp(name, result_termination_name((enum termination)t)))
			return t;
	return -1;
}

static bool stage_ran_out(const struct run_stage *s)
{
	return s->started && s->term == TERM_TIMEOUT;
}

void result_outcome(const struct run_result *r, struct run_outcome *o)
{
	const struct run_stage *fin = result_final(r);
	*o = (struct run_outcome){ .state = OUTCOME_FAILED, .term = r->term };
	bool timed_out = r->term == TERM_TIMEOUT || fin->term == TERM_TIMEOUT;
	for (unsigned i = 0; i < r->nstages && i < PROTO_MAX_STAGES; i++) {
		const struct run_stage *s = &r->stage[i];
		timed_out = timed_out || stage_ran_out(s);
		if (s->oom_killed)
			o->limits |= LIMIT_MEMORY;
		if (s->cpu_exceeded)
			o->limits |= LIMIT_CPU_TIME;
		if (s->out_truncated || s->out.truncated || s->err_truncated || s->err.truncated)
			o->limits |= LIMIT_OUTPUT;
	}
	if (timed_out) {
		o->state = OUTCOME_TIMED_OUT;
		o->limits |= LIMIT_TIMEOUT;
	} else if (r->term == TERM_EXITED && fin->term == TERM_EXITED && fin->exit_code == 0) {
		o->state = OUTCOME_SUCCEEDED;
	}
}

const char *result_outcome_name(enum outcome_state st)
{
	static const char *const names[] = { "succeeded", "failed", "timed_out" };
	_Static_assert(sizeof(names) / sizeof(names[0]) == OUTCOME_STATE_COUNT, "a name per outcome");
	return (unsigned)st < OUTCOME_STATE_COUNT ? names[st] : NULL;
}

int result_outcome_from_name(const char *name)
{
	for (int i = 0; name && i < OUTCOME_STATE_COUNT; i++)
		if (!strcmp(name, result_outcome_name((enum outcome_state)i)))
			return i;
	return -1;
}

const char *result_limit_name(unsigned bit)
{
	static const char *const names[] = { "timeout", "memory", "cpu_time", "output" };
	_Static_assert(sizeof(names) / sizeof(names[0]) == OUTCOME_LIMITS, "a name per limit");
	for (unsigned i = 0; i < OUTCOME_LIMITS; i++)
		if (bit == 1u << i)
			return names[i];
	return NULL;
}

int result_outcome_parse(const json_t *result, struct run_outcome *o)
{
	*o = (struct run_outcome){ .state = OUTCOME_FAILED, .term = TERM_ERROR };
	const json_t *out = json_object_get(result, "outcome");
	const char *state = json_string_value(json_object_get(out, "state"));
	int term = result_termination_from_name(json_string_value(json_object_get(result, "termination")));
	const json_t *hit = json_object_get(out, "limits_hit");
	if (!state || term < 0 || !json_is_array(hit))
		return -1;
	int st = result_outcome_from_name(state);
	unsigned limits = 0;
	for (size_t i = 0; i < json_array_size(hit); i++) {
		const char *name = json_string_value(json_array_get(hit, i));
		unsigned bit = 0;
		for (unsigned b = 0; name && b < OUTCOME_LIMITS; b++)
			if (!strcmp(name, result_limit_name(1u << b)))
				bit = 1u << b;
		if (!bit)
			return -1;
		limits |= bit;
	}
	if (st < 0)
		return -1;
	*o = (struct run_outcome){ .state = (enum outcome_state)st, .term = (enum termination)term, .limits = limits };
	return 0;
}

