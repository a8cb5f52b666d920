/* vmrund's core: everything the service owns hangs off one struct vmrund
 * (no globals), shared by the HTTP threads and the scheduler loop under
 * one lock. The HTTP side (http.c, api_v1.c, api_piston.c, stream.c)
 * only calls the functions here, which take the lock themselves: the
 * lock's scope and the store stay this file's to reason about. The main
 * thread runs vmrund_loop, which starts a worker process per run
 * (vmrund-worker), reaps them, and records how each run ended. Every
 * state change reaches the store before anyone is told of it. */
#ifndef VMRUND_DAEMON_H
#define VMRUND_DAEMON_H

#include <limits.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "config.h"
#include "say.h"
#include "metrics.h"
#include "policy.h"
#include "run_spec.h"
#include "runtime.h"
#include "scheduler.h"
#include "store.h"
#include "tenants.h"

/* A run this node holds: its worker, and once the worker has exited, what
 * is left to record (a store that is away keeps the slot until it is
 * back, so that the result is written once it is). */
struct vmrund_active {
	bool used;
	char id[SCHED_ID_MAX];
	char tenant[STORE_TENANT_MAX];
	pid_t pid;                    /* 0 once reaped */
	int status;                   /* its wait status, once reaped */
	int gate_fd;                  /* our end of the worker's gate (spool.h); -1 closed */
	bool gate_asked;              /* the worker waits for an answer the store has not given yet */
	int64_t created_ms, started_ms;
	bool cancel;                  /* a cancel was asked: it ends cancelled */
	bool refused;                 /* the gate said no: nothing started */
	bool need_worker;             /* pid -1, a Judge0 batch's thread gave it back: the loop starts its worker */
	struct sched_size size;       /* what it takes of the node's room */
};

struct vmrund {
	struct vmrund_config cfg;
	struct tenants ts;
	int anonymous;                /* the tenant keyless requests act as, or -1 */
	struct store *store;
	char node[STORE_NODE_MAX];    /* this node's name in the store */
	struct runtime *rts;          /* installed runtimes, read at start */
	size_t nrts;
	/* The ceilings every run is held to (root's policy file over the
	 * built-in one), read at start: a spec past one is refused when it
	 * is submitted. The worker's run library reads them again. */
	struct policy pol;
	char worker[PATH_MAX], vmm[PATH_MAX], guest[PATH_MAX];
	char sbx_bin[PATH_MAX];       /* vmrund-sandbox, beside vmrund */
	bool kvm_ok;                  /* vmm --probe passed at start: KVM runs a Linux guest here */
	char kvm_why[300];            /* else what it said */

	pthread_mutex_t lock;         /* everything below, and every store call */
	pthread_cond_t changed;       /* broadcast when a run changes state */
	struct sched_rate rate;
	unsigned slots;
	struct sched_size size;       /* the node's room for runs, all of it (config_node_size) */
	struct vmrund_active *active; /* slots of them */
	struct metrics m;
	FILE *audit;
	int wake_fd;                  /* eventfd: the loop has work */
	bool store_down;              /* the last store call failed: said once, not every tick */
	/* Monotonic ms before which this node takes back no dead node's runs:
	 * a lease after the store answers again. An outage of the server
	 * let every lease run out; the live nodes renew theirs first. */
	int64_t expire_from_ms;
	/* Each tenant's output streams and waits open now (by index in ts):
	 * each holds a connection's thread, so a tenant may hold no more
	 * than max_streams_per_tenant of them. */
	unsigned streams[TENANTS_MAX];
	/* The sandboxes this node holds (sandboxes.h), VMRUND_SBX_MAX slots. */
	struct vmrund_sbx *sbx;
	/* Judge0's callbacks: their queue and threads (judge0_runs.h) */
	struct judge0_callbacks *callbacks;
	/* GET /statistics's answers, one per tenant, allocated at its first
	 * (under lock) */
	struct judge0_stats_cache *j0_stats;
	/* Programs compiled for Judge0 batches' runs (judge0_batch_run.c) */
	struct judge0_job *j0_jobs;
	unsigned j0_threads;          /* their threads alive: vmrund is not freed before they end */
	bool stopping;                /* SIGTERM: start nothing more, refuse new runs */
	bool closing;                 /* the loop is over: waits and streams end now */
};

/* What submit and cancel answer: an HTTP status, and for 429/503 the
 * seconds to wait. */
struct vmrund_answer {
	unsigned status;
	unsigned retry_after_s;
	char message[256];
};

/* An answer of status (Retry-After retry seconds when not 0) and a
 * message. */
struct vmrund_answer vmrund_answer_of(unsigned status, unsigned retry, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A new random id: 32 hex digits. */
void vmrund_new_id(char id[SCHED_ID_MAX]);

/* Set d up from cfg: store, keys, runtimes, slots, and recovery of what
 * this node's previous life left (its runs whose command had not started
 * queue again, the rest end lost; their workers, VMs and directories are
 * swept). 0, or -1 with one line in err. */
int vmrund_open(struct vmrund *d, const struct vmrund_config *cfg, const char *bindir, char *err, size_t errlen);

/* Release everything; safe after a failed open. */
void vmrund_close(struct vmrund *d);

/* Accept rq for tenant: admitted and queued in the store, for any node
 * to claim. 202 with its id, or 403 (a network rule beyond the tenant's
 * ceiling), 400 (a limit or rule beyond the policy's ceilings; memory or
 * workspace over the tenant's ceilings or larger than this node), 429 / 503 (Retry-After; 503 too when the store cannot be
 * reached), or 500. With idem (NULL: none), a key the tenant used within
 * a day: 202 with the first request's run in id (nothing new stored) when
 * the body is the same, 422 when it is not. */
struct vmrund_answer vmrund_submit(struct vmrund *d, unsigned tenant, const struct run_spec *rq,
				   struct store_idem *idem, char id[SCHED_ID_MAX]);

/* Cancel tenant's run id: a queued one ends cancelled now; a running
 * one's node (this one, or another told through the store) has its
 * worker destroy the VM, and this waits (at most wait_ms) for it to end.
 * 200, 202 (still ending), 404, 409 (already ended), 503, 500. */
struct vmrund_answer vmrund_cancel(struct vmrund *d, unsigned tenant, const char *id, int64_t wait_ms);

/* Wait until run id has ended or until deadline_ms (monotonic). Returns
 * true when it has ended. */
bool vmrund_wait(struct vmrund *d, const char *id, int64_t deadline_ms);

/* Take one of tenant's places for an output stream or a wait (?wait,
 * Piston execute): true, or false when it holds max_streams_per_tenant
 * already. Each true is given back once, by vmrund_stream_end, when the
 * stream is freed or the wait is over. */
bool vmrund_stream_begin(struct vmrund *d, unsigned tenant);
void vmrund_stream_end(struct vmrund *d, unsigned tenant);

/* Take one request from tenant's rate, the cluster's where the store
 * keeps one (else, or while the store is down, this node's): 0, or the
 * seconds to wait. */
unsigned vmrund_rate(struct vmrund *d, unsigned tenant);

/* The HTTP side's reads and counts: each takes the lock itself, so that
 * no handler holds it or reaches the store. */

/* Run id, tenant's (NULL: anyone's), under the lock: 1 (run filled; the caller frees it), 0 none, -1 err. */
int vmrund_get_run(struct vmrund *d, const char *id, const char *tenant, struct store_run *run, char *err,
		   size_t errlen);

/* vmrund_get_run of anyone's run id, then vmrund_fetch if found, in one hold of the lock. */
int vmrund_get_run_fetched(struct vmrund *d, const char *id, struct store_run *run, char *err, size_t errlen);

/* As vmrund_get_run_fetched, fetching only with want_output once ended (*fetched: output readable); err unsaid. */
int vmrund_get_run_output(struct vmrund *d, const char *id, bool want_output, struct store_run *run, bool *fetched);

/* vmrund_fetch, with the lock taken around it. */
int vmrund_fetch_run(struct vmrund *d, const char *id);

/* Tenant's runs (client: only those that API accepted; NULL: all), the
 * store's list, under the lock: 0, or -1 with err. */
int vmrund_list_runs(struct vmrund *d, const char *tenant, const char *client, uint64_t offset, unsigned limit,
		     struct store_run **rows, unsigned *n, uint64_t *total, char *err, size_t errlen);

/* The store's count of runs by state, and how many run on this node, in one hold of the lock: 0, -1 err. */
int vmrund_count_runs(struct vmrund *d, uint64_t states[RS_COUNT], unsigned *running_here, char *err,
		      size_t errlen);

/* /metrics' text, the store's counts and this node's, in one hold of the lock: the caller frees it; NULL, err. */
char *vmrund_metrics_text(struct vmrund *d, char *err, size_t errlen);

/* Count an answer of this HTTP status for /metrics, under the lock. */
void vmrund_count_answer(struct vmrund *d, unsigned status);

/* Count n connections cut at request_head_timeout_s for /metrics, under the lock (take no other lock around it). */
void vmrund_count_cut(struct vmrund *d, unsigned n);

/* The store failed doing what: said once in the log until it works
 * again (vmrund_store_ok). Lock held. */
void vmrund_store_failed(struct vmrund *d, const char *what, const char *err);

/* A store call worked: says so once after a failure, and holds back
 * taking dead nodes' runs for a lease (expire_from_ms). Lock held. */
void vmrund_store_ok(struct vmrund *d);

/* Whether KVM and the guest images are usable, with the reason if not:
 * vmm's host check at start passed, and /dev/kvm, vmm, the worker and
 * the images are there now. */
bool vmrund_ready(struct vmrund *d, char *why, size_t whylen);

/* The node's loop: claim queued runs for free slots, start a worker for
 * each, answer their gates, reap them and record their ends (again and
 * again while the store is away), renew the node's lease, take back the
 * runs of nodes whose lease ran out, act on notifications (cancels), and
 * remove kept output and artifacts past their retention; until SIGTERM
 * or SIGINT, then claim nothing more and wait for the running runs to
 * end. Returns 0, or -1 with a reason. */
int vmrund_loop(struct vmrund *d, char *err, size_t errlen);

/* After vmrund_loop: end every wait and stream, so the HTTP server can
 * stop. */
void vmrund_closing(struct vmrund *d);

/* Record that run id ended in st (result JSON text or NULL, its outcome
 * or NULL, a message) while this node held it (node NULL: whoever did, or none): the store,
 * then vmrund_ended. Lock held (or no other thread yet, at start). A run
 * that had already ended is left as it was. 1 recorded, 0 not ours or
 * already ended, -1 the store failed (nothing changed). */
int vmrund_end_run(struct vmrund *d, const char *id, const char *node, enum run_state st, const char *result,
		   const struct run_outcome *outcome, const char *message);

/* An audit log line: begin gives an object with its "time"; end writes
 * it as one JSON line (when there is an audit log) and frees it. Lock
 * held (or no other thread yet). */
json_t *vmrund_audit_begin(void);
void vmrund_audit_end(struct vmrund *d, json_t *line);

/* A run the store now has ended: metrics, the audit log, every waiter.
 * Lock held. */
void vmrund_ended(struct vmrund *d, const struct store_run *run);

/* Terminal run id's output and artifacts in run_dir, fetched from the
 * store's blobs when this node does not have them (the run ran on
 * another node). Lock held. 0, or -1 when there are none. */
int vmrund_fetch(struct vmrund *d, const char *id);

/* Stop run id if this node runs it: its worker is told to destroy the
 * VM, and the run ends cancelled. Lock held. */
void vmrund_stop(struct vmrund *d, const char *id);

/* Start argv[0] as a child of vmrund: stdin /dev/null, stdout and stderr
 * appended to log, gate (-1: none) as SPOOL_GATE_FD and no other fd of
 * ours, every signal's default, a fixed environment (PATH, TMPDIR under
 * run_dir, and VMRUN_CACHE=cache when not NULL: where the run library
 * keeps its snapshots), and SIGTERM when vmrund dies if die_with_us.
 * Returns its pid, or -1 with the reason in err. */
pid_t vmrund_spawn(struct vmrund *d, char *const argv[], const char *log, const char *cache, int gate, bool die_with_us,
		   char *err, size_t errlen);

/* What the node has left for runs and sandboxes: its size less what
 * every run it holds and every sandbox takes. Lock held. */
struct sched_size vmrund_room_left(const struct vmrund *d);

/* How many runs this node holds now. Lock held. */
unsigned vmrund_running_here(struct vmrund *d);

/* Wake the loop (a run was queued or cancelled). */
void vmrund_wake(struct vmrund *d);

/* The worker of a run this node claimed, into its slot x (its id, tenant
 * and directory with the request made): x's pid and gate set; or, when it
 * cannot be started, the run ended failed and the slot freed. Lock held. */
void vmrund_worker_start(struct vmrund *d, struct vmrund_active *x);

/* A run's directory: run_dir/ID (into buf). */
void vmrund_run_path(const struct vmrund *d, const char *id, const char *file, char *buf, size_t len);

#endif
