#include "metrics.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Upper bounds in seconds: a denied run takes ms, a boot under emulation
 * seconds, a compile under emulation a minute. */
static const double bounds[METRICS_BUCKETS] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60 };
static const char *const phase_key[PH_COUNT] = { "queue", "prepare", "boot", "run", "teardown", "extract", "total" };

static void observe(struct histogram *h, double s)
{
	h->count++;
	h->sum += s;
	for (int i = 0; i < METRICS_BUCKETS; i++)
		if (s <= bounds[i])
			h->bucket[i]++;
}

void metrics_run_ended(struct metrics *m, enum run_state state, const json_t *result, const struct run_outcome *o,
			int64_t queue_ms)
{
	m->ended[state]++;
	observe(&m->phase[PH_QUEUE], (double)queue_ms / 1000.0);
	if (o) {
		m->term[o->term]++;
		m->limit_timeout += !!(o->limits & LIMIT_TIMEOUT);
		m->limit_memory += !!(o->limits & LIMIT_MEMORY);
		m->limit_cpu += !!(o->limits & LIMIT_CPU_TIME);
		m->limit_output += !!(o->limits & LIMIT_OUTPUT);
	}
	if (!result)
		return;
	json_t *d = json_object_get(result, "durations_ms");
	for (int p = PH_PREPARE; p < PH_COUNT; p++) {
		json_t *v = json_object_get(d, phase_key[p]);
		if (json_is_integer(v))
			observe(&m->phase[p], (double)json_integer_value(v) / 1000.0);
	}
}

void metrics_http(struct metrics *m, unsigned status)
{
	for (int i = 0; i < METRICS_CODES; i++) {
		if (m->code[i] == status || m->code[i] == 0) {
			m->code[i] = status;
			m->code_count[i]++;
			return;
		}
	}
}

/* A growing text buffer; on failure it stays NULL and writes stop. */
struct text {
	char *p;
	size_t len, cap;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
	if (!t->p)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			free(t->p);
			t->p = NULL;
			return;
		}
		if ((size_t)n < t->cap - t->len) {
			t->len += (size_t)n;
			return;
		}
		char *q = realloc(t->p, t->cap * 2 + (size_t)n);
		if (!q) {
			free(t->p);
			t->p = NULL;
			return;
		}
		t->p = q;
		t->cap = t->cap * 2 + (size_t)n;
	}
}

char *metrics_render(const struct metrics *m, size_t queued, unsigned running, unsigned slots,
		     const uint64_t state_count[RS_COUNT])
{
	struct text t = { malloc(8192), 0, 8192 };
	put(&t, "# HELP vmrund_runs Runs in the store, by state.\n# TYPE vmrund_runs gauge\n");
	for (int s = 0; s < RS_COUNT; s++)
		put(&t, "vmrund_runs{state=\"%s\"} %llu\n", store_state_name((enum run_state)s),
		    (unsigned long long)state_count[s]);
	put(&t, "# HELP vmrund_runs_ended_total Runs that ended since start, by state.\n"
		"# TYPE vmrund_runs_ended_total counter\n");
	for (int s = RS_SUCCEEDED; s < RS_COUNT; s++)
		put(&t, "vmrund_runs_ended_total{state=\"%s\"} %llu\n", store_state_name((enum run_state)s),
		    (unsigned long long)m->ended[s]);
	put(&t, "# HELP vmrund_terminations_total Ended runs by vmrun's termination.\n"
		"# TYPE vmrund_terminations_total counter\n");
	for (int i = 0; i < METRICS_TERMS; i++)
		put(&t, "vmrund_terminations_total{termination=\"%s\"} %llu\n", result_termination_name((enum termination)i),
		    (unsigned long long)m->term[i]);
	put(&t, "# HELP vmrund_limit_triggers_total Runs that hit a limit, by limit.\n"
		"# TYPE vmrund_limit_triggers_total counter\n"
		"vmrund_limit_triggers_total{limit=\"timeout\"} %llu\n"
		"vmrund_limit_triggers_total{limit=\"memory\"} %llu\n"
		"vmrund_limit_triggers_total{limit=\"cpu_time\"} %llu\n"
		"vmrund_limit_triggers_total{limit=\"output\"} %llu\n",
	    (unsigned long long)m->limit_timeout, (unsigned long long)m->limit_memory,
	    (unsigned long long)m->limit_cpu, (unsigned long long)m->limit_output);
	put(&t, "# HELP vmrund_requests_refused_total Runs refused at admission, by reason.\n"
		"# TYPE vmrund_requests_refused_total counter\n"
		"vmrund_requests_refused_total{reason=\"rate\"} %llu\n"
		"vmrund_requests_refused_total{reason=\"tenant_limit\"} %llu\n"
		"vmrund_requests_refused_total{reason=\"queue_full\"} %llu\n"
		"# TYPE vmrund_runs_accepted_total counter\nvmrund_runs_accepted_total %llu\n",
	    (unsigned long long)m->refused_rate, (unsigned long long)m->refused_tenant,
	    (unsigned long long)m->refused_queue, (unsigned long long)m->accepted);
	put(&t, "# HELP vmrund_streams_refused_total Output streams and waits refused: the tenant's were open "
		"(max_streams_per_tenant).\n# TYPE vmrund_streams_refused_total counter\nvmrund_streams_refused_total %llu\n"
		"# HELP vmrund_connections_cut_total Connections shut without an answer, by reason.\n"
		"# TYPE vmrund_connections_cut_total counter\n"
		"vmrund_connections_cut_total{reason=\"head_deadline\"} %llu\n",
	    (unsigned long long)m->refused_streams, (unsigned long long)m->cut_head);
	put(&t, "# HELP vmrund_judge0_callbacks_total Judge0 callbacks, by how they went.\n"
		"# TYPE vmrund_judge0_callbacks_total counter\n"
		"vmrund_judge0_callbacks_total{result=\"sent\"} %llu\n"
		"vmrund_judge0_callbacks_total{result=\"failed\"} %llu\n"
		"vmrund_judge0_callbacks_total{result=\"refused\"} %llu\n"
		"vmrund_judge0_callbacks_total{result=\"dropped\"} %llu\n",
	    (unsigned long long)m->callback[CB_SENT], (unsigned long long)m->callback[CB_FAILED],
	    (unsigned long long)m->callback[CB_REFUSED], (unsigned long long)m->callback[CB_DROPPED]);
	put(&t, "# HELP vmrund_queue_depth Runs waiting for a slot.\n# TYPE vmrund_queue_depth gauge\n"
		"vmrund_queue_depth %zu\n# HELP vmrund_slots_in_use Runs running.\n# TYPE vmrund_slots_in_use gauge\n"
		"vmrund_slots_in_use %u\n# TYPE vmrund_slots gauge\nvmrund_slots %u\n",
	    queued, running, slots);
	put(&t, "# HELP vmrund_http_responses_total Answers by status code.\n"
		"# TYPE vmrund_http_responses_total counter\n");
	for (int i = 0; i < METRICS_CODES && m->code[i]; i++)
		put(&t, "vmrund_http_responses_total{code=\"%u\"} %llu\n", m->code[i],
		    (unsigned long long)m->code_count[i]);
	put(&t, "# HELP vmrund_phase_seconds Time runs spent in each phase.\n# TYPE vmrund_phase_seconds histogram\n");
	for (int p = 0; p < PH_COUNT; p++) {
		const struct histogram *h = &m->phase[p];
		for (int i = 0; i < METRICS_BUCKETS; i++)
			put(&t, "vmrund_phase_seconds_bucket{phase=\"%s\",le=\"%g\"} %llu\n", phase_key[p], bounds[i],
			    (unsigned long long)h->bucket[i]);
		put(&t, "vmrund_phase_seconds_bucket{phase=\"%s\",le=\"+Inf\"} %llu\n", phase_key[p],
		    (unsigned long long)h->count);
		put(&t, "vmrund_phase_seconds_sum{phase=\"%s\"} %.6f\nvmrund_phase_seconds_count{phase=\"%s\"} %llu\n",
		    phase_key[p], h->sum, phase_key[p], (unsigned long long)h->count);
	}
	return t.p;
}
