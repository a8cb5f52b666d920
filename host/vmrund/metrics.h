/* vmrund's counters and histograms, rendered in Prometheus' text format
 * at /metrics. Plain data under the daemon's lock; the gauges (queue
 * depth, slots) are read from the scheduler when rendered. */
#ifndef VMRUND_METRICS_H
#define VMRUND_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "result.h"
#include "store.h"

#define METRICS_BUCKETS 12
#define METRICS_TERMS   TERM_COUNT   /* vmrun's terminations */
#define METRICS_CODES   16

struct histogram {
	uint64_t count, bucket[METRICS_BUCKETS];
	double sum;               /* seconds */
};

/* The phases a run's result times (its "durations_ms" keys), histograms. */
enum metrics_phase { PH_QUEUE, PH_PREPARE, PH_BOOT, PH_RUN, PH_TEARDOWN, PH_EXTRACT, PH_TOTAL, PH_COUNT };

/* How a Judge0 callback went: answered; every try failed (no answer);
 * refused before any try (its address, its tenant's rules); dropped (the
 * queue of them was full). */
enum metrics_callback { CB_SENT, CB_FAILED, CB_REFUSED, CB_DROPPED };
#define METRICS_CALLBACKS 4

struct metrics {
	uint64_t ended[RS_COUNT];           /* runs by final state */
	uint64_t term[METRICS_TERMS];       /* by termination */
	uint64_t limit_timeout, limit_memory, limit_cpu, limit_output;
	uint64_t accepted, refused_rate, refused_tenant, refused_queue;
	uint64_t refused_streams;           /* 429: max_streams_per_tenant */
	uint64_t cut_head;                  /* connections cut at request_head_timeout_s */
	uint64_t callback[METRICS_CALLBACKS];   /* Judge0 callbacks by how they went (enum metrics_callback) */
	unsigned code[METRICS_CODES];       /* the status codes below */
	uint64_t code_count[METRICS_CODES];
	struct histogram phase[PH_COUNT];
};

/* Count a run that ended in state, with its result and the outcome read
 * from it (each NULL: none) and how long it queued. */
void metrics_run_ended(struct metrics *m, enum run_state state, const json_t *result, const struct run_outcome *o,
		       int64_t queue_ms);

/* Count one HTTP answer. */
void metrics_http(struct metrics *m, unsigned status);


/* The text for /metrics (malloc'd; NULL out of memory), with the gauges. */
char *metrics_render(const struct metrics *m, size_t queued, unsigned running, unsigned slots,
		     const uint64_t state_count[RS_COUNT]);

#endif
