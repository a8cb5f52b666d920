/* A Judge0 batch judged from one compile: which runs may, the key they
 * share, and the result a run from a fork leaves (judge0_batch.h). Pure. */
#include "judge0_batch.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hex.h"
#include "proto.h"
#include "utf8.h"

int judge0_batch_key(const json_t *request, const char *tenant, char key[JUDGE0_BATCH_KEY_LEN + 1])
{
	json_t *shared = json_deep_copy(request);
	char *text = NULL;
	int rc = -1;
	if (!shared)
		return -1;
	json_object_del(shared, "stdin");
	json_object_del(shared, "stdin_encoding");
	json_object_del(shared, "client");
	/* the tenant's name first, ended by a NUL that no name holds: one
	 * tenant's key is never another's */
	json_t *both = json_pack("[sO]", tenant, shared);
	if (both && (text = json_dumps(both, JSON_COMPACT | JSON_SORT_KEYS))) {
		sha256_hex(text, strlen(text), key);
		rc = 0;
	}
	free(text);
	json_decref(both);
	json_decref(shared);
	return rc;
}

static const json_t *judge0_of(const json_t *request)
{
	return json_object_get(json_object_get(request, "client"), "judge0");
}

bool judge0_batch_eligible(const struct run_spec *rq, const json_t *request, bool has_compile, char *why, size_t cap)
{
	const json_t *j0 = judge0_of(request);
	const char *no = !json_is_object(j0)				       ? "not a Judge0 submission" :
			 json_integer_value(json_object_get(j0, "batch")) < 2   ? "not one of a batch's sharing a program" :
			 json_is_true(json_object_get(j0, "redirect_stderr_to_stdout")) ?
										 "stderr merged into stdout" :
			 !rq->source || !has_compile				       ? "no compile stage" :
			 rq->nnet						       ? "a network" :
			 rq->nenv						       ? "an environment" :
			 rq->nwfiles						       ? "additional files" :
			 rq->repeat > 1						       ? "more than one run" :
			 rq->keep_artifacts || rq->from_checkpoint[0]		       ? "not a plain run" :
			 rq->stdin_len && (memchr(rq->stdin_data, '\0', rq->stdin_len) ||
					   !utf8_valid(rq->stdin_data, rq->stdin_len)) ? "stdin that is not text" :
											 NULL;
	if (no)
		snprintf(why, cap, "%s", no);
	return !no;
}

int judge0_batch_mark(struct run_spec *const *rq, size_t n, const char *tenant)
{
	char(*keys)[JUDGE0_BATCH_KEY_LEN + 1] = calloc(n ? n : 1, sizeof(*keys));
	int rc = keys ? 0 : -1;
	for (size_t i = 0; !rc && i < n; i++) {
		json_t *canon = rq[i] ? run_spec_to_json(rq[i]) : NULL;
		if (rq[i] && (!canon || judge0_batch_key(canon, tenant, keys[i])))
			rc = -1;
		json_decref(canon);
	}
	for (size_t i = 0; !rc && i < n; i++) {
		json_int_t same = 0;
		for (size_t k = 0; rq[i] && k < n; k++)
			same += rq[k] && !strcmp(keys[i], keys[k]);
		json_t *j0 = rq[i] ? json_object_get(rq[i]->client, "judge0") : NULL;
		if (same > 1 && json_is_object(j0) && json_object_set_new(j0, "batch", json_integer(same)))
			rc = -1;
	}
	free(keys);
	return rc;
}

void judge0_batch_stage(struct run_stage *s, const json_t *cmd, const struct proto_stage *ps, int64_t timeout_ms,
			int64_t wall_ms)
{
	const json_t *code = json_object_get(cmd, "exit_code"), *sig = json_object_get(cmd, "signal");
	const json_t *usage = json_object_get(cmd, "usage"), *out = json_object_get(cmd, "stdout"),
		     *err = json_object_get(cmd, "stderr");
	const char *end = json_string_value(json_object_get(cmd, "end"));
	memset(s, 0, sizeof(*s));
	s->started = true;
	s->wall_ms = wall_ms;
	s->limits.timeout_s = (double)timeout_ms / 1000;
	s->limits.memory_mib = ps->memory_kib / 1024;
	s->limits.cpu_time_ms = ps->cpu_ms;
	if (json_is_true(json_object_get(cmd, "timed_out"))) {
		s->term = TERM_TIMEOUT;
	} else if (json_is_integer(sig)) {
		s->term = TERM_SIGNALED;
		s->signal = (int)json_integer_value(sig);
	} else if (json_is_integer(code)) {
		s->term = TERM_EXITED;
		s->exit_code = (int)json_integer_value(code);
	} else {
		s->term = end && !strcmp(end, "not_found") ? TERM_NOT_FOUND :
			  end && !strcmp(end, "denied")	   ? TERM_DENIED :
							     TERM_ERROR;
	}
	s->out.data = (uint8_t *)json_string_value(out);
	s->out.len = json_string_length(out);
	s->err.data = (uint8_t *)json_string_value(err);
	s->err.len = json_string_length(err);
	s->out_truncated = json_is_true(json_object_get(cmd, "stdout_truncated"));
	s->err_truncated = json_is_true(json_object_get(cmd, "stderr_truncated"));
	s->oom_killed = json_is_true(json_object_get(cmd, "oom_killed"));
	s->cpu_exceeded = json_is_true(json_object_get(cmd, "cpu_time_exceeded"));
	s->cpu_ms = (uint64_t)json_integer_value(json_object_get(usage, "cpu_ms"));
	s->max_rss_kib = (uint64_t)json_integer_value(json_object_get(usage, "max_rss_kib"));
}

void judge0_batch_term(struct run_result *r)
{
	const struct run_stage *c = &r->stage[0];
	bool compile_failed = r->nstages > 1 && (c->term != TERM_EXITED || c->exit_code != 0);
	/* as run_classify.c decides a run's: a compile that ended badly is
	 * the run's compile error, one that did not end is the run's end */
	r->term = !compile_failed ? r->stage[r->nstages - 1].term :
		  c->term == TERM_EXITED || c->term == TERM_SIGNALED ? TERM_COMPILE_ERROR :
								       c->term;
	if (r->term != TERM_COMPILE_ERROR)
		return;
	if (c->term == TERM_EXITED)
		result_message(r, "the compile stage failed with status %d", c->exit_code);
	else
		result_message(r, "the compile stage was killed by SIG%s",
			       sigabbrev_np(c->signal) ? sigabbrev_np(c->signal) : "?");
}
