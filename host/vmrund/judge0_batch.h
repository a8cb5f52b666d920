/* A Judge0 batch judged from one compile (docs/judge0.md, "Batches"):
 * the submissions of one POST /submissions/batch that share their
 * program (everything but stdin, expected_output and callback_url) are
 * marked when queued; the node that claims one compiles that program once
 * in a sandbox of the tenant's, checkpoints it, and runs each marked
 * submission in a fork of the checkpoint, as /v1/judge runs its tests.
 * Each stays an ordinary run of the queue (its tenant's fairness, the
 * node's slots, the gate, its end recorded by loop.c from the result this
 * writes in its directory), so the store, the cluster and a restart treat
 * it as any run; what the fork path cannot do is done by a worker.
 *
 * judge0_batch.c is the pure part (which runs may, their shared key, the
 * result written); judge0_batch_run.c the node's side (the compiled
 * programs it keeps, a thread per run). */
#ifndef VMRUND_JUDGE0_BATCH_H
#define VMRUND_JUDGE0_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "result.h"
#include "run_spec.h"

struct vmrund;
struct vmrund_active;
struct store_run;
struct proto_stage;

#define JUDGE0_BATCH_KEY_LEN 64          /* hex SHA-256 */
#define JUDGE0_BATCH_LINGER_MS 15000     /* a compiled program kept this long past its last run, for the next */
#define JUDGE0_BATCH_LIFE_S 1800         /* the compiled sandbox's life */
#define JUDGE0_BATCH_JOIN_S 900          /* runs join a compiled program this young only */

/* The key of what a run's request (canonical, as stored) shares with its
 * batch's others: the SHA-256 of the tenant's name and the request
 * without stdin, stdin_encoding and client (Judge0's own fields:
 * expected_output and callback_url among them), keys sorted. 0, or -1
 * (out of memory). Pure. */
int judge0_batch_key(const json_t *request, const char *tenant, char key[JUDGE0_BATCH_KEY_LEN + 1]);

/* Whether rq (request, the same parsed) may be judged from a shared
 * compile: a Judge0 submission marked as one of a batch's that share a
 * program, in source mode with a compile stage (has_compile), and
 * nothing a sandbox's command does otherwise than a run: no network, no
 * environment, no workspace files (additional_files), no repeat
 * (number_of_runs), no stderr merged into stdout, stdin that is UTF-8.
 * Else why, in words. Pure. */
bool judge0_batch_eligible(const struct run_spec *rq, const json_t *request, bool has_compile, char *why, size_t cap);

/* In POST /submissions/batch: mark the runs of rq[0..n) (NULL entries:
 * submissions refused) that share a program with another of them
 * (judge0_batch_key, over run_spec_to_json) and are eligible: their
 * client.judge0 gets "batch", how many share it. 0, or -1 (out of
 * memory; nothing need be undone: unmarked runs are run as ever). */
int judge0_batch_mark(struct run_spec *const *rq, size_t n, const char *tenant);

/* A stage of a result from a sandbox command's answer cmd (NULL: it did
 * not run; why in the stage's stderr) under the stage's proto limits ps
 * and timeout, wall_ms long. Its outbufs point into cmd's strings: valid
 * while cmd is. Pure. */
void judge0_batch_stage(struct run_stage *s, const json_t *cmd, const struct proto_stage *ps, int64_t timeout_ms,
			int64_t wall_ms);

/* r's outcome from its stages: the compile stage's failure (not exited
 * 0) is COMPILE_ERROR, else the run stage's. Pure. */
void judge0_batch_term(struct run_result *r);

/* ---- the node's side (judge0_batch_run.c) ---- */

/* A run this node claimed (lock held; x its slot, its directory and
 * request written, no worker yet): true when it is marked, eligible and
 * a thread of ours took it (x's pid is then -1 until the thread wrote its
 * result and set it to 0, reaped); false: start its worker. */
bool judge0_batch_take(struct vmrund *d, struct vmrund_active *x, const struct store_run *run);

/* Delete the compiled programs whose batch's runs were all made here, or
 * that no run used for JUDGE0_BATCH_LINGER_MS (all, when all), without
 * the lock held. */
void judge0_batch_sweep(struct vmrund *d, bool all);

#endif
