/* vmrund's durable state, which is also its queue: the runs, by id, with
 * their state, request, result, the node that holds each running one, and
 * what the run left (output, artifacts) as blobs. An ops table, so that
 * the SQLite backend (store_sqlite.c, one machine) and the PostgreSQL one
 * (store_pg.c, any number of nodes sharing one server) are
 * interchangeable; the daemon sees only these calls. Every call that
 * changes a run is durable when it returns (the API answers only after
 * it), and every decision that must hold for the whole cluster (a
 * tenant's limits, which run starts next, which node holds a run) is
 * taken inside the backend's transaction, by scheduler.h's pure
 * functions over the counts it read there.
 *
 * States: queued -> running -> succeeded | failed | timed_out | cancelled
 * | lost; queued -> cancelled; and running -> queued when the node that
 * held it died before the run's command started (expire). A run is
 * "running" from its claim by a node; its command_ms is set when that
 * node lets the command start, which is the line between "may run again
 * elsewhere" and "may have had effects: ends lost".
 *
 * Times are Unix ms from the calling node's clock, except leases, which
 * the backend measures on one clock of its own (the database server's),
 * so that nodes whose clocks disagree still agree on who is alive. Calls
 * on one struct store are not thread-safe: the daemon serializes them.
 * A backend that loses its server reconnects on the next call; a call
 * that fails for that returns -1 and changes nothing. */
#ifndef VMRUND_STORE_H
#define VMRUND_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "result.h"
#include "scheduler.h"
#include "tenants.h"

enum run_state {
	RS_QUEUED,
	RS_RUNNING,
	RS_SUCCEEDED,
	RS_FAILED,
	RS_TIMED_OUT,
	RS_CANCELLED,
	RS_LOST,
};
#define RS_COUNT 7

#define STORE_ID_LEN     32        /* hex */
#define STORE_TENANT_MAX 64
#define STORE_NODE_MAX   64

/* One run's row. request and result are JSON text (malloc'd, owned by the
 * row; result NULL until the run ends); message a one-line reason. */
struct store_run {
	char id[STORE_ID_LEN + 1];
	char tenant[STORE_TENANT_MAX];
	enum run_state state;
	int64_t created_ms, started_ms, command_ms, finished_ms;   /* 0: not yet */
	char *request;
	char *result;
	char message[512];
	int64_t seq;                  /* order of acceptance */
	char node[STORE_NODE_MAX];    /* the node that holds it (running), or last held it; "" none */
	bool cancel;                  /* a cancel was asked while it ran */
	/* How its command ended, as the run decided it (result.h), kept in
	 * columns of their own so that no reader parses the result again;
	 * has_outcome false for a run that ended with none (cancelled while
	 * queued, lost, a worker that left no readable result) and before
	 * the end. */
	bool has_outcome;
	struct run_outcome outcome;
};

/* An Idempotency-Key on a submit: within STORE_IDEM_TTL_MS of its first
 * use, and while that run is kept, the same tenant's same key makes no
 * second run. The key is checked by the API (1 to STORE_IDEM_KEY_MAX
 * visible ASCII characters); hash is what the first request asked (the
 * hex SHA-256 of its body), so a key sent again with another body is
 * told apart. */
#define STORE_IDEM_KEY_MAX 255
#define STORE_IDEM_HASH_LEN 64
#define STORE_IDEM_TTL_MS (24LL * 60 * 60 * 1000)
struct store_idem {
	const char *key;
	const char *hash;
	char id[STORE_ID_LEN + 1];   /* out, with STORE_REPLAYED: the run the key made */
};

/* What submit answers besides enum sched_verdict's: the key was used
 * before with this body (nothing stored; the run is idem->id), or with
 * another body (nothing stored). */
#define STORE_REPLAYED   100
#define STORE_KEY_REUSED 101

/* What the backend tells a node without being asked (notifications). */
enum store_note {
	STORE_NOTE_QUEUED,            /* a run was queued: claim */
	STORE_NOTE_CANCEL,            /* a cancel was asked for a running run: its holder stops it */
	STORE_NOTE_ENDED,             /* a run ended: its waiters look */
};

typedef void (*store_note_fn)(void *ctx, enum store_note note, const char *id);

/* A sandbox's row (docs/sandboxes.md): a VM that lives across many
 * commands, held by the node that started it, whose supervisor process
 * (vmrund-sandbox) owns it. States: starting -> running -> stopping ->
 * stopped; running <-> paused (its VM saved to disk); any open one ->
 * stopped (its supervisor ended: killed, timed out), failed (a pause or
 * resume lost it) or lost (its node died). stopped, failed and lost are
 * terminal: a terminal row never changes again, but for one move: lost
 * -> resumable (on no node), when its checkpoints outlived its node in
 * the cluster's snapshot dir; a resumable one is resumed from one by any
 * node (-> paused, then running) or deleted. */
enum sbx_row_state {
	SBS_STARTING,
	SBS_RUNNING,
	SBS_STOPPING,
	SBS_STOPPED,
	SBS_LOST,
	SBS_PAUSED,
	SBS_FAILED,
	SBS_RESUMABLE,
};
#define SBS_COUNT 8

struct store_sandbox {
	char id[STORE_ID_LEN + 1];
	char tenant[STORE_TENANT_MAX];
	char node[STORE_NODE_MAX];    /* the node that holds it */
	enum sbx_row_state state;
	int64_t created_ms, started_ms, ended_ms;   /* Unix ms; 0: not yet */
	int64_t timeout_at_ms;        /* Unix ms its life ends at; 0 while unknown (starting) */
	uint64_t memory_mib, disk_mib;   /* what it takes, counted against the tenant's ceilings */
	char *request;                /* the create body as accepted, JSON text (malloc'd, owned) */
	char reason[512];             /* why it stopped (or was lost); "" */
	int64_t seq;                  /* order of creation (the store assigns it) */
};

/* What sbx_create answers besides SCHED_ACCEPT (0: stored), STORE_REPLAYED
 * and STORE_KEY_REUSED: the tenant's ceiling that refused it. */
#define STORE_SBX_OVER_COUNT  110   /* tenant's sandboxes open at once */
#define STORE_SBX_OVER_MEMORY 111   /* sandbox_memory_mib, all open ones together */
#define STORE_SBX_OVER_DISK   112   /* sandbox_disk_mib, likewise */

struct store;

struct store_ops {
	/* Queue a new run if admission lets it (sched_admit with lim, over
	 * the tenant's open runs and all queued runs, counted in the same
	 * transaction as the insert, so that two nodes cannot both take the
	 * last place): id, tenant, created_ms and request are taken from run;
	 * the store assigns seq. With idem (NULL: none) the key is looked up
	 * first, in that transaction (created_ms is now): STORE_REPLAYED or
	 * STORE_KEY_REUSED when it was used within STORE_IDEM_TTL_MS, whatever
	 * admission would say; else the key is kept with the new run. Returns
	 * the verdict (SCHED_ACCEPT: it is stored), or -1 with a reason (a
	 * duplicate id is one). */
	int (*submit)(struct store *s, const struct store_run *run, struct store_idem *idem, const struct tenant *lim,
		      unsigned queue_max, char *err, size_t errlen);
	/* The run with this id and tenant into *out (the caller frees it with
	 * store_run_free): 1 found, 0 not (another tenant's is not found),
	 * -1 error; *out is zeroed unless found. tenant NULL: any tenant's. */
	int (*get)(struct store *s, const char *id, const char *tenant, struct store_run *out, char *err, size_t errlen);
	/* Claim up to n queued runs for node: sched_choose over every
	 * tenant of ts (counts of the whole store), each tenant's oldest
	 * first; they become running, held by node, started_ms now_ms. Runs
	 * of tenants not in ts are never claimed. With room (NULL: slots
	 * alone), what node has left, and size, all it has: the runs chosen
	 * fit room by their requests' limits.memory_mib and limits.disk_mib
	 * (run_spec_size_json's defaults where absent), read in the same
	 * transaction. out[0..n) receives the claimed rows (free each).
	 * Returns how many, or -1. */
	int (*claim)(struct store *s, const char *node, unsigned n, const struct tenants *ts,
		     const struct sched_size *room, const struct sched_size *size, int64_t now_ms,
		     struct store_run *out, char *err, size_t errlen);
	/* node is about to start run id's command: records command_ms. 1 when
	 * it may (the run is running, held by node, no cancel asked), 0 when
	 * it may not, -1 error (then it may not either). */
	int (*command)(struct store *s, const char *id, const char *node, int64_t now_ms, char *err, size_t errlen);
	/* A non-terminal run -> a terminal state, with result (NULL: none),
	 * its outcome (NULL: none) and message (NULL: none). node non-NULL: only while node holds the run
	 * (a run requeued and claimed elsewhere is not this node's to end).
	 * 1 done, 0 not (already terminal, not found, another node's), -1
	 * error (a state that is not terminal is one). */
	int (*finish)(struct store *s, const char *id, const char *node, enum run_state state, int64_t finished_ms,
		      const char *result, const struct run_outcome *outcome, const char *message, char *err,
		      size_t errlen);
	/* Cancel run id of tenant (NULL: any): a queued one ends cancelled
	 * now (returns 1); a running one is marked and its holder notified
	 * (returns 2, the holder's name in node[STORE_NODE_MAX]); 3 when it
	 * had already ended, 0 no such run, -1 error. */
	int (*cancel)(struct store *s, const char *id, const char *tenant, int64_t now_ms, char *node, char *err,
		      size_t errlen);
	/* node is alive: its lease runs lease_ms from now on the backend's
	 * clock. fn (may be NULL) is called for each run node holds whose
	 * cancel was asked, in case the notification was missed. 0, -1. */
	int (*heartbeat)(struct store *s, const char *node, int64_t lease_ms, void (*fn)(void *ctx, const char *id),
			 void *ctx, char *err, size_t errlen);
	/* The running runs of dead nodes: node NULL, every node whose lease
	 * ran out; else that node, whatever its lease (itself at start, its
	 * previous life's runs). A run whose command had not started (and
	 * whose cancel was not asked) is queued again, node cleared; a
	 * cancelled one ends cancelled; the rest end lost, with a message
	 * naming the node. fn (may be NULL) is called after the change with
	 * each run that ended, and with each requeued one. Returns how many
	 * runs changed, or -1. */
	int (*expire)(struct store *s, const char *node, int64_t now_ms, void (*fn)(void *ctx, const struct store_run *run),
		      void *ctx, char *err, size_t errlen);
	/* Call fn for every run in state, oldest (seq) first; fn returns 0 to
	 * go on. The row passed is a copy, valid only during the call, and no
	 * query is open while fn runs, so fn may call the store (to finish
	 * the run it was given, say; what it changes is durable at once).
	 * Runs that enter state during the walk may be visited. 0 when every
	 * run was visited, fn's value when it stopped the walk, -1 error. */
	int (*each)(struct store *s, enum run_state state, int (*fn)(void *ctx, const struct store_run *run),
		    void *ctx, char *err, size_t errlen);
	/* Tenant's runs, newest first (by seq): at most limit of them after
	 * the first offset, into *out (malloc'd, *n rows; the caller frees
	 * each with store_run_free and the array), and how many there are
	 * into *total. client non-NULL: only the runs an API of that name
	 * accepted (their request's "client" object is {"NAME": ...}, the
	 * first key: STORE_CLIENT_LIKE). 0, or -1 (*out NULL). */
	int (*list)(struct store *s, const char *tenant, const char *client, uint64_t offset, unsigned limit,
		    struct store_run **out, unsigned *n, uint64_t *total, char *err, size_t errlen);
	/* How many runs are in each state, into count[RS_COUNT]. 0 done, -1
	 * error. */
	int (*count)(struct store *s, uint64_t count[RS_COUNT], char *err, size_t errlen);
	/* Keep len bytes as run id's blob name ("output", "artifacts/PATH"),
	 * replacing one of that name. 0, -1. */
	int (*put_blob)(struct store *s, const char *id, const char *name, const uint8_t *data, size_t len, char *err,
			size_t errlen);
	/* Call fn with each of run id's blobs, by name; fn returns 0 to go
	 * on (the data is valid only during the call). 0 done (none is
	 * done too), fn's value when it stopped, -1 error. */
	int (*blobs)(struct store *s, const char *id,
		     int (*fn)(void *ctx, const char *name, const uint8_t *data, size_t len), void *ctx, char *err,
		     size_t errlen);
	/* Remove the blobs of runs that ended before before_ms (retention);
	 * the rows stay. How many blobs went, or -1. */
	long (*drop_blobs)(struct store *s, int64_t before_ms, char *err, size_t errlen);
	/* Remove the runs that ended before before_ms (run retention): their
	 * rows, so their requests, results and messages, and their blobs, in
	 * one transaction; a queued or running run stays whatever its age,
	 * and seq never goes back for the runs that come after. How many
	 * runs went, or -1 (then nothing went). */
	long (*drop_runs)(struct store *s, int64_t before_ms, char *err, size_t errlen);
	/* A descriptor that turns readable when notifications may be waiting
	 * (poll it, then call notes), or -1 when this backend has none (one
	 * node: the daemon knows everything itself) or is not connected
	 * now. It may change after a reconnect: ask again each time. */
	int (*note_fd)(struct store *s);
	/* Deliver every notification waiting, each to fn. 0, -1 (the
	 * connection was lost: notifications may have been missed, so the
	 * caller looks at everything once more). */
	int (*notes)(struct store *s, store_note_fn fn, void *ctx, char *err, size_t errlen);
	/* Take one request from the tenant's request rate for the whole
	 * cluster: a token bucket of lim's rate and burst, kept in the store
	 * on the store's clock. 0 with *wait_ms 0 when taken, else with the
	 * ms until a token is there (refused); -1 error. NULL in a backend
	 * that one node alone uses (SQLite): that node's own bucket is the
	 * cluster's. */
	int (*rate)(struct store *s, const struct tenant *lim, int64_t *wait_ms, char *err, size_t errlen);
	/* ---- sandboxes (struct store_sandbox) ---- */
	/* Store a new sandbox (state starting) if the tenant's ceilings let it:
	 * lim's sandboxes over its open ones (starting, running, stopping), its
	 * sandbox_memory_mib and sandbox_disk_mib (0: none) over their sums
	 * with this one's, counted in the same transaction as the insert.
	 * id, tenant, node, created_ms, memory_mib, disk_mib and request are
	 * taken from sb; seq is assigned. idem (NULL: none) as in submit, in
	 * a namespace of its own (a run's key does not replay a sandbox):
	 * STORE_REPLAYED with the sandbox in idem->id, STORE_KEY_REUSED.
	 * Returns 0 (stored), STORE_SBX_OVER_*, STORE_REPLAYED,
	 * STORE_KEY_REUSED, or -1 with a reason. */
	int (*sbx_create)(struct store *s, const struct store_sandbox *sb, struct store_idem *idem,
			  const struct tenant *lim, char *err, size_t errlen);
	/* The sandbox id of tenant (NULL: anyone's) into *out (free it with
	 * store_sandbox_free): 1, 0 not found (another tenant's is not), -1. */
	int (*sbx_get)(struct store *s, const char *id, const char *tenant, struct store_sandbox *out, char *err,
		       size_t errlen);
	/* Move sandbox id to state, while it is open and, with node non-NULL,
	 * held by node; started_ms, ended_ms and timeout_at_ms are set where
	 * non-zero, reason where non-NULL. Moving to the state it is in is
	 * allowed (a new timeout_at_ms for a running one). 1 done, 0 not
	 * (unknown, terminal, another node's), -1 error. */
	int (*sbx_set)(struct store *s, const char *id, const char *node, enum sbx_row_state state, int64_t started_ms,
		       int64_t ended_ms, int64_t timeout_at_ms, const char *reason, char *err, size_t errlen);
	/* Move sandbox id from node from (held there in state st) to node to
	 * and state to_st, timeout_at_ms and reason replaced where non-zero
	 * and non-NULL: one statement, so
	 * that of two nodes that claim a parked sandbox (node "": no node
	 * holds it, any may resume it) one wins. 1 moved, 0 not (it is not
	 * there in st), -1 error. */
	int (*sbx_move)(struct store *s, const char *id, const char *from, enum sbx_row_state st, const char *to,
			enum sbx_row_state to_st, int64_t timeout_at_ms, const char *reason, char *err, size_t errlen);
	/* Call fn for each sandbox of tenant (NULL: all) held by node (NULL:
	 * any), only open ones when open_only, in creation order; the row is
	 * a copy valid during the call, no query is open while fn runs (it
	 * may call the store), fn returns 0 to go on. 0, fn's value, -1. */
	int (*sbx_each)(struct store *s, const char *tenant, const char *node, bool open_only,
			int (*fn)(void *ctx, const struct store_sandbox *sb), void *ctx, char *err, size_t errlen);
	/* The open sandboxes of node (NULL: of every node whose lease ran
	 * out, as expire) end lost at now_ms, the reason naming the node
	 * (STORE_MSG_SBX_LOST); fn (may be NULL) is called with each after
	 * the change. How many, or -1. */
	int (*sbx_lost)(struct store *s, const char *node, int64_t now_ms,
			void (*fn)(void *ctx, const struct store_sandbox *sb), void *ctx, char *err, size_t errlen);
	/* Remove the terminal sandboxes that ended before before_ms, with
	 * their idempotency keys. How many, or -1. */
	long (*sbx_drop)(struct store *s, int64_t before_ms, char *err, size_t errlen);
	/* ---- where each node answers (a cluster forwards a sandbox's calls
	 * to the node that holds it) ---- */
	/* Publish node's address (an http:// URL its peers reach it at),
	 * replacing its last; "" withdraws it. 0, -1. NULL in a backend that
	 * one node alone uses (SQLite): there is no peer to tell. */
	int (*set_address)(struct store *s, const char *node, const char *address, char *err, size_t errlen);
	/* node's published address into out (cap bytes): 1, 0 none
	 * published (or "" or longer than cap), -1 error. NULL with
	 * set_address. */
	int (*address_of)(struct store *s, const char *node, char *out, size_t cap, char *err, size_t errlen);
	/* Close and free (store_close is the call that is safe on NULL). */
	void (*close)(struct store *s);
};

struct store {
	const struct store_ops *ops;
};

/* Open the store spec names: "postgresql://..." or "postgres://..." (a
 * libpq connection URI), else the path of a SQLite file whose directory
 * must exist. Either is created with its schema, or migrated to this
 * vmrund's (by one node at a time). NULL with a one-line reason on
 * failure (a file that is not SQLite, a server that cannot be reached, a
 * schema newer than this vmrund's). */
struct store *store_open(const char *spec, char *err, size_t errlen);

/* The backends' own opens (store_open picks one). */
struct store *store_sqlite_open(const char *path, char *err, size_t errlen);
struct store *store_pg_open(const char *uri, char *err, size_t errlen);

/* Whether spec names a PostgreSQL server rather than a SQLite file. */
bool store_is_pg(const char *spec);

/* s->ops->close(s), and nothing for NULL, so that cleanup paths need not
 * check. */
void store_close(struct store *s);

/* Free what a row holds (request, result) and zero it; safe twice. */
void store_run_free(struct store_run *run);

/* Free what a sandbox's row holds (request) and zero it; safe twice. */
void store_sandbox_free(struct store_sandbox *sb);

/* A sandbox state's name as the API spells it ("running"), NULL for no
 * state; and back: -1 for an unknown name (or NULL). */
const char *store_sbx_state_name(enum sbx_row_state st);
int store_sbx_state_parse(const char *name);

/* The state's name as the API spells it ("timed_out"), NULL for a value
 * that is no state; and back: -1 for an unknown name (or NULL). */
const char *store_state_name(enum run_state st);
int store_state_parse(const char *name);

/* Whether st is terminal (succeeded and after). */
bool store_state_terminal(enum run_state st);

/* Whether name is a blob name a run may have: "output", or "artifacts/"
 * and a relative path, UTF-8, with no empty, "." or ".." component. Pure. */
bool store_blob_name_ok(const char *name);

/* Copy text (NULL: "") into a fixed field of cap bytes, cut at a
 * character boundary so that what the API later writes out of it is
 * still valid UTF-8. The backends' reading of a row. */
void store_copy_text(char *dst, size_t cap, const char *src);

/* The messages the store writes itself (%s: the node's name); the
 * PostgreSQL backend spells the two with a node in SQL, as these read. */
#define STORE_MSG_CANCELLED_QUEUED "cancelled while queued; it never started"
#define STORE_MSG_CANCELLED_NODE   "cancelled; node %s stopped before it ended"
#define STORE_MSG_LOST_NODE \
	"lost: node %s stopped while the run was running; its command may have had effects, so it is not run again"

#define STORE_MSG_SBX_LOST "lost: node %s stopped while the sandbox was open"
/* A verification run, not started, whose checkpoint's node stopped: no
 * other node may take it (run_spec.h's checkpoint_node). */
#define STORE_MSG_LOST_CHECKPOINT "lost: node %s, which holds its checkpoint, stopped; no other node can run it"

/* Whether run's request names node as the one that holds its checkpoint
 * (a verification run only that node may start). Pure. */
bool store_run_pinned_to(const struct store_run *run, const char *node);

/* The SQL every backend shares where the dialects agree: the columns a
 * row is read from, in store_run's order (id, tenant, state, created_ms,
 * started_ms, command_ms, finished_ms, request, result, message, seq,
 * node, cancel, outcome, termination, limits_hit). */
/* The LIKE pattern of a request that client NAME accepted, NAME in %s
 * ([a-z0-9_], so that it needs no escaping): the canonical request is
 * compact JSON, and "client" holds one object, under its API's name. */
#define STORE_CLIENT_LIKE "%%\"client\":{\"%s\":%%"
#define STORE_CLIENT_NAME_MAX 32

/* Free rows[0..n) (store_run_free each) and the array: list's. */
void store_runs_free(struct store_run *rows, unsigned n);

/* client's LIKE pattern into out (cap at least STORE_CLIENT_NAME_MAX +
 * 24 bytes; client NULL: "%", every run): 0, or -1 for a name that is
 * not [a-z0-9_]{1,31}. Pure. */
int store_client_like(const char *client, char *out, size_t cap);

#define STORE_COLS                                                                                                \
	"id, tenant, state, created_ms, started_ms, command_ms, finished_ms, request, result, message, seq, node, " \
	"cancel, outcome, termination, limits_hit"

/* The outcome's columns: outcome and termination as result.h names them
 * (NULL: no outcome), limits_hit its LIMIT_* bits (0: none, or no
 * outcome). The values to write for o (NULL: none); limits has room for
 * 12 bytes. */
void store_outcome_cols(const struct run_outcome *o, const char **outcome, const char **term, char limits[12]);

/* The columns as read back into out's has_outcome and outcome: an outcome
 * only when both names are known (NULL or an unknown name: none). */
void store_outcome_read(struct store_run *out, const char *outcome, const char *term, int64_t limits);

#endif
