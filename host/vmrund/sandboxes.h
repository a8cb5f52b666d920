/* Sandboxes in vmrund (docs/sandboxes.md): each one a supervisor process
 * (vmrund-sandbox, host/sandbox/) that this node starts in a session of
 * its own and that owns the VM, its row in the store (store.h's
 * store_sandbox), and its directory run_dir/sandboxes/ID, where the
 * supervisor keeps request.json, state.json and its API's socket. vmrund
 * admits a sandbox (the policy's ceilings and the tenant's, the node's
 * room), starts its supervisor, records every change in the store before
 * the API answers, notices its end, and passes every other call through
 * to its socket (api_sandboxes.c). A vmrund that stops, or is killed,
 * leaves its supervisors running: the next one on this node adopts them
 * from the store and their state files. Their checkpoints, as a fork's or
 * a verification run's source, are found and checked in checkpoints.c.
 * With a snapshot_dir (every node mounts it) a sandbox keeps its start
 * and checkpoints in SNAPSHOT_DIR/sandboxes/ID, a pause parks its VM
 * there and its supervisor exits, and any node resumes it
 * (sandbox_park.c). */
#ifndef VMRUND_SANDBOXES_H
#define VMRUND_SANDBOXES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "run_pause.h"
#include "run_spec.h"

#include "scheduler.h"
#include "store.h"

struct vmrund;
struct vmrund_answer;

#define VMRUND_SBX_DIR       "sandboxes"      /* under run_dir */
#define VMRUND_SBX_BIN       "vmrund-sandbox" /* beside vmrund */
#define VMRUND_SBX_MAX       256              /* sandboxes one node holds at once */
#define VMRUND_SBX_TIMEOUT_S 300              /* a sandbox's life when the body names none */
#define VMRUND_SBX_META_MAX  32               /* metadata entries */
#define VMRUND_SBX_META_KEY  64               /* bytes of a metadata key */
#define VMRUND_SBX_META_VAL  512              /* bytes of a metadata value */
/* From the supervisor's start to its answer that the VM is ready: its
 * own boot limit (SBX_BOOT_TIMEOUT_S) and some. */
#define VMRUND_SBX_READY_MS  75000

/* A sandbox this node holds. */
struct vmrund_sbx {
	bool used;
	bool busy;                    /* a create or a delete is under way: the watch leaves it be */
	char id[STORE_ID_LEN + 1];
	pid_t pid;                    /* its supervisor */
	int pidfd;                    /* readable once the supervisor has exited; -1 none */
	bool paused;                  /* as the store last heard it */
	struct sched_size size;       /* what it takes of the node's room */
};

/* The most forks one create makes ("count"); the tenant's sandboxes bound
 * them too. */
#define VMRUND_SBX_FORKS_MAX 8

/* A sandbox's life as its create asked for it. */
struct sbx_life {
	double timeout_s;             /* its life */
	bool on_timeout_pause;        /* "on_timeout": "pause" (default "stop") */
	double pause_ttl_s;           /* the longest it stays paused */
	const char *from_checkpoint;  /* "SANDBOX/NAME": a fork of that checkpoint (in the body); NULL none */
	const char *expect_digest;    /* with from_checkpoint: the digest its change must have; NULL none */
};

/* A create's body split (pure): *spec, the run spec part the supervisor
 * reads (runtime, env, limits, network; a new reference), and its life:
 * timeout_s (VMRUND_SBX_TIMEOUT_S, or max_timeout_s when that is less,
 * when absent), on_timeout, pause_ttl_s (max_pause_ttl_s when absent,
 * never more), from_checkpoint (a string; a fork takes no runtime, env,
 * limits or network of its own), expect_digest (64 hex digits, with
 * from_checkpoint only), metadata checked (an object of at most
 * VMRUND_SBX_META_MAX strings). 0, or -1 with the field and reason in err. */
int sandbox_body_split(const json_t *body, unsigned max_timeout_s, unsigned max_pause_ttl_s, json_t **spec,
		       struct sbx_life *life, char *err, size_t errlen);

/* The checkpoint from names ("SANDBOX_ID/NAME"): one of tenant's
 * sandboxes', held by this node (any, with a snapshot_dir), whose
 * checkpoint directory goes into
 * dir, and (request not NULL) that sandbox's stored request (a new
 * reference). The answer's status 0, or 400, 404, 409 (held by another
 * node, named), 503 with why. */
struct vmrund_answer vmrund_checkpoint_of(struct vmrund *d, unsigned tenant, const char *from, char *dir, size_t len,
					  json_t **request);

/* Where sandbox id keeps its checkpoint name: in the snapshot dir, or
 * (none) in its directory on its node. 0, or -1 when that does not fit
 * in len. */
int vmrund_checkpoint_dir(const struct vmrund *d, const char *id, const char *name, char *out, size_t len);

/* The newest of sandbox id's checkpoints in the snapshot dir (by its
 * created_ms) into name: true, or false when it has none there (or the
 * node has no snapshot_dir). */
bool vmrund_checkpoint_newest(const struct vmrund *d, const char *id, char name[RUN_CHECKPOINT_NAME_MAX + 1]);

/* A verification run's spec (rq->from_checkpoint set): its checkpoint
 * found (vmrund_checkpoint_of), its expect_digest checked, its disk the
 * checkpoint workspace's size and its node this one (the only node that
 * may start it, which has the checkpoint), or with a snapshot_dir any. The answer's status 0, or why
 * not. */
struct vmrund_answer vmrund_run_checkpoint(struct vmrund *d, unsigned tenant, struct run_spec *rq);

/* expect_digest against the checkpoint in dir: the digest of its change
 * (from its sandbox's start to it, wsdiff.h) that its supervisor kept in
 * its meta when it was taken; checkpoints never change and their names
 * are never taken twice. The answer's status 0 when the digests are equal,
 * 409 when not (with both), when the change was not complete or has no
 * digest. Reads a file only: vmrund reaps every child, so it walks no
 * image itself. */
struct vmrund_answer vmrund_checkpoint_expect(const char *dir, const char *expect);

/* The checkpoint a resumable sandbox resumes from, "ID/NAME" into out,
 * as its reason names it (vmrund_sbx_lost): true, or false when it names
 * none or out is too short. Pure. */
bool sandbox_resumable_from(const struct store_sandbox *sb, char *out, size_t len);

/* A sandbox as the API shows it (pure): id, state, reason, tenant, node,
 * runtime, limits, metadata, created/started/ended/timeout times and the
 * seconds left at now_ms. */
json_t *sandbox_view(const struct store_sandbox *sb, int64_t now_ms);

/* At start (vmrund_open): this node's sandboxes that the store has open
 * are adopted when their supervisor still runs, else end stopped; any
 * directory in run_dir/sandboxes that no open sandbox owns goes (its
 * supervisor, if one runs, is stopped). 0, or -1 with a reason. */
int vmrund_sbx_open(struct vmrund *d, char *err, size_t errlen);

/* Forget the supervisors (they keep running); safe after a failed open. */
void vmrund_sbx_close(struct vmrund *d);

/* Create a sandbox for tenant from body (POST /v1/sandboxes), and wait
 * until its VM is ready: 201 with its id, 200 with the id a repeated
 * Idempotency-Key made (idem NULL: none), 400 / 403 (the spec, the
 * tenant's network ceiling), 422 (the key with another body), 429 (the
 * tenant's sandbox ceilings), 503 (no room, stopping, the store), 500
 * (it did not start: the reason). */
struct vmrund_answer vmrund_sbx_create(struct vmrund *d, unsigned tenant, const json_t *body,
				       struct store_idem *idem, char id[SCHED_ID_MAX]);

/* DELETE: stop tenant's sandbox id and wait until its VM is gone: 200,
 * 404, 409 (another node holds it), 503. */
struct vmrund_answer vmrund_sbx_delete(struct vmrund *d, unsigned tenant, const char *id);

/* POST .../timeout: its life from now, timeout_s seconds (at most the
 * tenant's max_sandbox_timeout_s): 200, 400, 404, 409 (not running
 * here), 503. */
struct vmrund_answer vmrund_sbx_timeout(struct vmrund *d, unsigned tenant, const char *id, const json_t *body);

/* POST /v1/sandboxes/ID/pause, or /resume with body's timeout_s: the
 * supervisor's answer (it waits until the VM is saved, or runs again),
 * and the store's state paused or running with it. */
struct vmrund_answer vmrund_sbx_pause(struct vmrund *d, unsigned tenant, const char *id, const json_t *body,
				      bool resume);

/* Tenant's sandbox id (tenant NULL: anyone's) from the store, under the
 * lock: 1 (free *out), 0 none, -1 err. */
int vmrund_sbx_get(struct vmrund *d, const char *tenant, const char *id, struct store_sandbox *out, char *err,
		   size_t errlen);

/* Whether this node holds sandbox id and its supervisor runs. */
bool vmrund_sbx_here(struct vmrund *d, const char *id);

/* The sandbox's directory (into buf). */
void vmrund_sbx_dir(const struct vmrund *d, const char *id, char *buf, size_t len);

/* The sandbox's directory in the snapshot dir (into buf): where it keeps
 * its start and checkpoints, and parks its VM at a pause; "" when the
 * node has no snapshot_dir. */
void vmrund_sbx_shared(const struct vmrund *d, const char *id, char *buf, size_t len);

/* A sandbox that its dead node's end left lost (sb): resumable on no node
 * from its newest checkpoint, when it has one in the snapshot dir (the
 * reason VMRUND_SBX_RESUMABLE NAME, then why it was lost), else its
 * directory there goes. Lock held. */
void vmrund_sbx_lost(struct vmrund *d, const struct store_sandbox *sb);
#define VMRUND_SBX_RESUMABLE "resumable from checkpoint "

/* The loop's look at the supervisors: one that exited ends its sandbox
 * stopped in the store, with the reason its state file gives, and its
 * directory goes. Takes the lock. */
void vmrund_sbx_watch(struct vmrund *d);

/* The audit log's line for a sandbox that ended (stopped or lost): its
 * tenant, id, state, node, what it was given, times and reason. Lock
 * held. */
void vmrund_sbx_audit(struct vmrund *d, const struct store_sandbox *sb);

/* Parked sandboxes (paused on no node) past their pause_ttl_s end
 * stopped, and their directories in the snapshot dir go; whichever node
 * looks first does it. Lock held. */
void vmrund_sbx_expire_parked(struct vmrund *d);

/* What the snapshot dir holds that nothing needs any more: sandboxes'
 * directories set aside as they ended, and bases no parked VM links (one
 * that no link came to or went from for 10 minutes). Without the lock:
 * a shared file system may take its time. */
void vmrund_sbx_sweep(struct vmrund *d);

/* What this node's sandboxes take of its room, all together. Lock held. */
struct sched_size vmrund_sbx_size(const struct vmrund *d);

#endif
