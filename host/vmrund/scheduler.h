/* vmrund's scheduler, as pure decisions over counts that the store reads
 * for the whole cluster: who may queue a run (admission), how free slots
 * are shared among the tenants with queued runs (fairness), and each
 * tenant's request rate (a token bucket this node holds).
 *
 * Admission: a tenant holds at most concurrent + queued runs that have
 * not ended (past it: 429), and the queue holds at most queue_max queued
 * runs of all tenants (past it: 503). Fairness: each free slot goes to
 * the tenant with the fewest runs running among those under their
 * concurrency that have one queued, ties to the one that started a run
 * least recently, so a tenant flooding the queue gets its share of slots
 * and no more. The store calls these inside the transaction that reads
 * the counts, so the limits hold across every node. */
#ifndef VMRUND_SCHED_H
#define VMRUND_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tenants.h"

#define SCHED_ID_MAX 33

enum sched_verdict {
	SCHED_ACCEPT,
	SCHED_TENANT_FULL,            /* 429: the tenant's concurrent + queued */
	SCHED_QUEUE_FULL,             /* 503: the whole queue */
};

/* Whether one more run of a tenant with limits lim may be queued, when
 * the tenant has open runs not ended (queued or running) and the queue
 * holds queued runs of all tenants. The tenant's verdict comes first.
 * Pure. */
enum sched_verdict sched_admit(const struct tenant *lim, unsigned open, unsigned queued, unsigned queue_max);

/* One tenant's standing, cluster-wide, as the store counted it. */
struct sched_stat {
	unsigned running, queued;
	unsigned concurrent;          /* its limit */
	int64_t last_start_ms;        /* when it last started a run; 0 never */
};

/* Share slots among the n tenants of st: picks[i] is how many queued runs
 * of tenant i to start now (each its oldest). Returns their sum (at most
 * slots). Pure. */
unsigned sched_choose(const struct sched_stat *st, size_t n, unsigned slots, unsigned *picks);

/* The request rate's buckets, one per tenant of ts. */
struct sched_bucket {
	double tokens;
	int64_t ms;                   /* when it was last filled */
};

struct sched_rate {
	const struct tenants *ts;
	struct sched_bucket *b;
};

/* Set r up for ts's tenants, every bucket full. 0, or -1 out of memory. */
int sched_rate_init(struct sched_rate *r, const struct tenants *ts);

/* Free and zero; safe twice. */
void sched_rate_free(struct sched_rate *r);

/* Take one request from tenant's bucket at now_ms: 0 when allowed, else
 * the ms until a token is there (the request is refused: 429). */
int64_t sched_rate_take(struct sched_rate *r, unsigned tenant, int64_t now_ms);

/* How long a bucket holding tokens (< 1) of a rate per second takes to
 * hold one: ms, at least 1, capped so that its seconds fit an unsigned.
 * The cluster's bucket (store.h's rate) answers with it too. Pure. */
int64_t sched_rate_wait_ms(double tokens, double rate);

#endif
