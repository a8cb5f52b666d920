/* Judge0 on vmrund's side (judge0.h is the translation, pure): a stored
 * run shown as its submission, for the API and for callbacks; and the
 * callbacks, a PUT of the submission when it ends, made by vmrund (never
 * the guest) from threads of their own, to an address the tenant's
 * callback rules admit, judged again once resolved (docs/judge0.md). */
#ifndef VMRUND_JUDGE0_RUNS_H
#define VMRUND_JUDGE0_RUNS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "store.h"

struct vmrund;

/* Run id of tenant (NULL: anyone's) as Judge0's submission, the fields of
 * mask, texts base64 when b64: the view, or NULL with *status 404 (no
 * such run of the tenant's), 400 (a text is not UTF-8 and !b64) or 500. */
json_t *judge0_run_view(struct vmrund *d, const char *id, const char *tenant, uint64_t mask, bool b64,
			unsigned *status);

/* A row the store gave as Judge0's submission (output: each stage's
 * interleaved streams, or NULL: stdout then stderr): NULL when out of
 * memory; *not_utf8 as judge0_view's. */
json_t *judge0_row_view(struct vmrund *d, const struct store_run *run, char *const output[2], uint64_t mask,
			bool b64, bool *not_utf8);

#define JUDGE0_STATS_ROWS 10000   /* GET /statistics counts a tenant's newest submissions, this many at most */
#define JUDGE0_STATS_PAGE 100     /* rows read in one hold of the lock */
#define JUDGE0_STATS_MIN_MS 1000  /* invalidate_cache counts again only past this age */

/* GET /statistics's last answer for a tenant. */
struct judge0_stats_cache {
	json_t *v;
	int64_t made_ms, until_ms;    /* monotonic */
	bool counting;                /* a request is counting: the others take the last answer */
};

/* GET /statistics for tenant: its answer of the last JUDGE0_STATS_CACHE_MS
 * (Judge0 keeps one that long) unless invalidate (heeded once it is
 * JUDGE0_STATS_MIN_MS old), else counted again over its newest
 * JUDGE0_STATS_ROWS submissions and kept. While one request counts, the
 * tenant's others take the last answer, so a loop of them makes one count
 * at a time. A new reference, or NULL with err (the store could not be
 * read; another count is under way and there is no answer yet). */
json_t *judge0_stats_of(struct vmrund *d, unsigned tenant, bool invalidate, char *err, size_t errlen);

/* Free the kept answers; safe when none. */
void judge0_stats_free(struct vmrund *d);

#define JUDGE0_CALLBACK_THREADS 2
#define JUDGE0_CALLBACK_QUEUE 1024      /* ended runs waiting for their callback */
#define JUDGE0_CALLBACK_TRIES 3         /* Judge0's CALLBACKS_MAX_TRIES */
#define JUDGE0_CALLBACK_TIMEOUT_MS 5000 /* Judge0's CALLBACKS_TIMEOUT, each try */

/* Start the callback threads (d->callbacks): 0, or -1 with err. */
int judge0_callbacks_start(struct vmrund *d, char *err, size_t errlen);

/* Stop them: no new callback; the one each thread is making ends within
 * a try's timeout; those queued are dropped (said in the log). Safe when
 * never started. */
void judge0_callbacks_stop(struct vmrund *d);

/* A run ended on this node (under d->lock): its callback queued when its
 * submission has a callback_url (dropped, and counted, when the queue is
 * full). */
void judge0_callbacks_ended(struct vmrund *d, const struct store_run *run);

#endif
