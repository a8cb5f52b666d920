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
 * the counts, so the limits hold across every node.
 *
 * Room: a node also starts a run only when its guest memory and its
 * workspace fit what the node has left (node_memory_mib, node_disk_mib
 * less what its running runs take). A tenant's runs start in the order
 * they were queued. When the run whose turn it is (the fairest tenant's
 * oldest) does not fit what is left, nothing else starts on this node
 * until it does: a smaller run of another tenant never overtakes it, so a
 * large run is not starved by a stream of small ones; the node's room
 * frees as its runs end, and a run larger than the whole node is refused
 * at submission (sched_size_check). In a cluster the room is each node's
 * own, the fairness the cluster's: a run that fits no room now waits for
 * whichever node frees enough first; one larger than a node (nodes of
 * different sizes) is passed over by that node, never waited for. */
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

/* What a run takes of a node, or what a node has: guest memory (the VM's,
 * defaults applied) and workspace (its image's size), MiB. */
struct sched_size {
	uint64_t memory_mib, disk_mib;
};

/* One tenant's standing, cluster-wide, as the store counted it. */
struct sched_stat {
	unsigned running, queued;
	unsigned concurrent;          /* its limit */
	int64_t last_start_ms;        /* when it last started a run; 0 never */
	/* The sizes of its oldest queued runs, oldest first (nnext of them, at
	 * most queued): read by the store when the node counts room. */
	const struct sched_size *next;
	unsigned nnext;
};

/* Share slots among the n tenants of st: picks[i] is how many queued runs
 * of tenant i to start now (each its oldest). With room (NULL: slots
 * alone count), what this node has left, and node, all it has: each pick
 * must fit what is left after the picks before it; the run whose turn it
 * is and does not fit ends the choice (the room is held for it), unless it
 * is larger than node, when its tenant is passed over on this node; a
 * tenant whose next size is not in st (nnext) is passed over too. Returns
 * the picks' sum (at most slots). Pure. */
unsigned sched_choose(const struct sched_stat *st, size_t n, unsigned slots, const struct sched_size *room,
		      const struct sched_size *node, unsigned *picks);

/* How many of a tenant's oldest queued runs' sizes sched_choose may look
 * at when slots are free: its queued runs, within the slots and what its
 * concurrency leaves. What the store reads. Pure. */
unsigned sched_want(const struct sched_stat *st, unsigned slots);

/* Whether a run of size run can ever start on a node of size node: 0, or
 * -1 with the reason for the client in err ("limits.memory_mib: 3000 MiB
 * is more than this node has for runs (node_memory_mib = 2048)"). Pure. */
int sched_size_check(const struct sched_size *run, const struct sched_size *node, char *err, size_t errlen);

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
