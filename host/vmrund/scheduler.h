/* vmrund's scheduler, as data: who may queue a run (admission), which
 * queued run starts next (fair across tenants), and each tenant's request
 * rate. Pure: the daemon holds one under its lock and feeds it the time.
 *
 * Admission: a tenant holds at most concurrent + queued runs that have
 * not ended (past it: 429), and the queue holds at most queue_max runs of
 * all tenants (past it: 503). Fairness: the next run is the oldest queued
 * run of the tenant that has the fewest runs running among those under
 * their concurrency, ties to the one that started a run least recently,
 * so a tenant flooding the queue gets its share of slots and no more. */
#ifndef VMRUND_SCHED_H
#define VMRUND_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tenants.h"

#define SCHED_ID_MAX 33

struct sched_tenant {
	unsigned running, queued;
	double tokens;                /* the rate's bucket */
	int64_t tokens_ms;            /* when it was last filled */
	uint64_t last_start;          /* sched's start count when it last started a run; 0 never */
};

struct sched_entry {
	char id[SCHED_ID_MAX];
	unsigned tenant;
};

struct sched {
	const struct tenants *ts;
	struct sched_tenant *t;       /* one per tenant of ts */
	struct sched_entry *q;        /* queued, in acceptance order */
	size_t nq;
	unsigned slots, running, queue_max;
	uint64_t starts;
};

enum sched_verdict {
	SCHED_ACCEPT,
	SCHED_TENANT_FULL,            /* 429: the tenant's concurrent + queued */
	SCHED_QUEUE_FULL,             /* 503: the whole queue */
};

/* Set s up for ts's tenants (every bucket full). 0, or -1 out of memory. */
int sched_init(struct sched *s, const struct tenants *ts, unsigned slots, unsigned queue_max);

/* Free and zero; safe twice. */
void sched_free(struct sched *s);

/* Take one request from tenant's bucket at now_ms: 0 when allowed, else
 * the ms until a token is there (the request is refused: 429). */
int64_t sched_rate_take(struct sched *s, unsigned tenant, int64_t now_ms);

/* Whether tenant may queue one more run now. */
enum sched_verdict sched_admit(const struct sched *s, unsigned tenant);

/* Queue an accepted run (after the store has it). A run the daemon found
 * queued at start is queued the same way, admission or not. 0, or -1 when
 * the id is too long. */
int sched_enqueue(struct sched *s, unsigned tenant, const char *id);

/* The run to start now, if a slot is free and a tenant under its
 * concurrency has one queued: 1 with its id and tenant (it counts as
 * running from here), else 0. */
int sched_pick(struct sched *s, char id[SCHED_ID_MAX], unsigned *tenant);

/* Take a queued run out (cancelled): true when it was queued. */
bool sched_dequeue(struct sched *s, const char *id);

/* A running run of tenant ended: its slot is free. */
void sched_finished(struct sched *s, unsigned tenant);

#endif
