/* This node's side of its sandboxes, between sandboxes.c (the API's
 * calls, the loop's look, vmrund's start) and what it uses: the table of
 * the sandboxes this node holds and their supervisor processes
 * (sandbox_node.c), and sandboxes parked in the snapshot dir or resumable
 * from it (sandbox_park.c). Nothing else includes this; the daemon sees
 * sandboxes.h. Every call named "lock held" takes d->lock from its
 * caller. */
#ifndef VMRUND_SANDBOX_NODE_H
#define VMRUND_SANDBOX_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "daemon.h"
#include "sandboxes.h"

#define SBX_REQUEST "request.json"
#define SBX_STATE   "state.json"
#define SBX_LOG     "supervisor.log"
#define SBX_CALL_MS 10000         /* vmrund's own calls to a supervisor */
#define SBX_EXIT_MS 20000         /* from DELETE to the supervisor's exit, before SIGKILL */
/* A pause or resume: the supervisor answers once the VM is saved or runs
 * again (supervisor.h's SBX_PAUSE_WAIT_MS, then vmm), within this. */
#define SBX_PAUSE_CALL_MS 110000

/* The supervisor's state file: its state's name, reason and pid, and
 * its life's end (host/sandbox/supervisor.h's DIR/state.json). */
struct sbx_file_state {
	char state[16];
	char reason[256];
	pid_t pid;
	int64_t timeout_at_ms;
};

/* Where a supervisor starts its VM from: nothing (a new one), a
 * checkpoint (a fork), or its own parked VM (resume_timeout_s its life
 * from the resume, 0: what it had left). */
struct sbx_from {
	const char *checkpoint;
	const char *paused;
	double resume_timeout_s;
};

/* ---- sandbox_node.c: the table (lock held) -------------------------------------- */

/* This node's slot of sandbox id, or NULL. */
struct vmrund_sbx *sbx_slot_of(struct vmrund *d, const char *id);

/* A free slot, or NULL when the node holds VMRUND_SBX_MAX. */
struct vmrund_sbx *sbx_slot_new(struct vmrund *d);

/* The slot free again (its pidfd closed). */
void sbx_slot_free(struct vmrund_sbx *x);

/* ---- sandbox_node.c: a supervisor --------------------------------------------------- */

/* Whether the supervisor behind pidfd has exited (or wait_ms passed). */
bool sbx_exited(int pidfd, int wait_ms);

/* The state file of the supervisor of dir into *st: 0, or -1 when there
 * is none readable. */
int sbx_read_state(const char *dir, struct sbx_file_state *st);

/* A pidfd of pid when it is the supervisor of dir (its command line
 * names d->sbx_bin and dir), else -1: a pid from a file is not trusted
 * alone. */
int sbx_supervisor_pidfd(struct vmrund *d, pid_t pid, const char *dir);

/* The sandbox of slot x: its directory, its request.json (spec) and its
 * supervisor started from from, with its directory in the snapshot dir
 * made first where the node has one. 0, or -1 with why. */
int sbx_start(struct vmrund *d, struct vmrund_sbx *x, const struct tenant *tenant, const json_t *spec,
	      const struct sbx_life *life, const struct sbx_from *from, char *why, size_t whylen);

/* sbx_start, then sbx_wait_ready: a supervisor that did not get ready is
 * stopped; one that did is running in the store (started_ms and reason
 * where non-zero and non-NULL, its timeout_at from its state file), or
 * stopped when the store cannot say so. Whether it runs, why when not.
 * Takes the lock, and returns with it held for the caller's end. */
bool sbx_launch(struct vmrund *d, struct vmrund_sbx *x, const struct tenant *tenant, const json_t *spec,
		const struct sbx_life *life, const struct sbx_from *from, int64_t started_ms, const char *reason, char *why,
		size_t whylen);

/* Wait for the supervisor of dir to say its VM is ready: 0 with its
 * state file read, or -1 with the reason it did not start. */
int sbx_wait_ready(const char *dir, int pidfd, struct sbx_file_state *st, char *why, size_t whylen);

/* End the supervisor behind x (already asked to stop, or dead): wait for
 * its exit, SIGKILL past wait_ms. */
void sbx_reap(const struct vmrund_sbx *x, int wait_ms);

/* Sandbox id ended: stopped (or failed, when its supervisor's state file
 * st says so; NULL: read it here) in the store with reason, its
 * directories (here and in the snapshot dir) gone, its slot x (NULL:
 * none) freed. false when the store failed (the slot stays, for the next
 * look). Lock held. */
bool sbx_record_end(struct vmrund *d, struct vmrund_sbx *x, const char *id, const char *reason,
		    const struct sbx_file_state *st);

/* Sandbox id's directory in the snapshot dir, if any, out of the way at
 * once (renamed to SBX_GONE...; vmrund_sbx_sweep removes it, with no
 * lock held: a shared file system may take its time). */
void sbx_discard_shared(const struct vmrund *d, const char *id);
#define SBX_GONE ".gone-"

/* ---- sandbox_park.c ----------------------------------------------------------------------- */

/* Whether sandbox id's VM is parked in the snapshot dir (its table's sum
 * is there): a supervisor that exited paused parked it, unless it died
 * while it was paused on the node (parking failed). */
bool sbx_is_parked(const struct vmrund *d, const char *id);

/* Sandbox id's supervisor exited having parked its VM in the snapshot
 * dir (its state file st): the store has it paused on no node (any may
 * resume it) until the end of its pause_ttl_s (none: INT64_MAX), if the
 * row is still this node's; its directory here goes and slot x (NULL:
 * none) is freed. false when the store failed (the slot stays, for the
 * next look). Lock held. */
bool sbx_record_park(struct vmrund *d, struct vmrund_sbx *x, const char *id, const struct sbx_file_state *st);

/* Tenant's sandbox id's row into *sb when it is on no node (parked, or
 * resumable): 1 (free *sb), 0 not, or -1 with the answer in *a. Takes
 * the lock. */
int sbx_parked_row(struct vmrund *d, unsigned tenant, const char *id, struct store_sandbox *sb, struct vmrund_answer *a);

/* POST .../resume of such a row: claimed for this node (of two nodes one
 * wins: 409 for the other), its supervisor started from the parked VM or
 * from its resumable_from checkpoint, running in the store once it
 * answers; one that does not start again is failed with why. Takes the
 * lock. */
struct vmrund_answer sbx_unpark_row(struct vmrund *d, unsigned tenant, const struct store_sandbox *sb,
				    const json_t *body);

/* DELETE of such a sandbox: stopped (of two deletes, or a delete and a
 * resume, one wins), its directory in the snapshot dir removed. Takes the
 * lock. */
struct vmrund_answer sbx_delete_parked(struct vmrund *d, const char *id);

#endif
