/* vmrund's durable state: the runs, by id, with their state, request and
 * result. An ops table, so that the SQLite backend (store_sqlite.c, one
 * machine) and the PostgreSQL one (many machines) are interchangeable; the
 * daemon sees only these calls. Every call that changes a run is durable
 * when it returns (the API answers only after it).
 *
 * States: queued -> running -> succeeded | failed | timed_out | cancelled
 * | lost; and queued -> cancelled. Times are Unix ms. Calls are not
 * thread-safe: the daemon serializes them. */
#ifndef VMRUND_STORE_H
#define VMRUND_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* One run's row. request and result are JSON text (malloc'd, owned by the
 * row; result NULL until the run ends); message a one-line reason. */
struct store_run {
	char id[STORE_ID_LEN + 1];
	char tenant[STORE_TENANT_MAX];
	enum run_state state;
	int64_t created_ms, started_ms, finished_ms;   /* 0: not yet */
	char *request;
	char *result;
	char message[512];
	int64_t seq;                                    /* order of acceptance */
};

struct store;

struct store_ops {
	/* Insert a new run (state queued): only id, tenant, created_ms and
	 * request are taken from run; the store assigns seq. 0 done, -1 with
	 * a reason on failure (a duplicate id is one). */
	int (*insert)(struct store *s, const struct store_run *run, char *err, size_t errlen);
	/* The run with this id and tenant into *out (the caller frees it with
	 * store_run_free): 1 found, 0 not (another tenant's is not found),
	 * -1 error; *out is zeroed unless found. tenant NULL: any tenant's. */
	int (*get)(struct store *s, const char *id, const char *tenant, struct store_run *out, char *err, size_t errlen);
	/* queued -> running at started_ms. 1 done, 0 the run was not queued
	 * (or does not exist), -1 error. */
	int (*start)(struct store *s, const char *id, int64_t started_ms, char *err, size_t errlen);
	/* Any non-terminal state -> a terminal one, with result (NULL: none)
	 * and message (NULL: none). 1 done, 0 the run was already terminal
	 * (or does not exist), -1 error (a state that is not terminal is
	 * one). */
	int (*finish)(struct store *s, const char *id, enum run_state state, int64_t finished_ms, const char *result,
		      const char *message, char *err, size_t errlen);
	/* Call fn for every run in state, oldest (seq) first; fn returns 0 to
	 * go on. The row passed is a copy, valid only during the call, and no
	 * query is open while fn runs, so fn may call the store (to finish
	 * the run it was given, say; what it changes is durable at once).
	 * Runs that enter state during the walk may be visited. 0 when every
	 * run was visited, fn's value when it stopped the walk, -1 error. */
	int (*each)(struct store *s, enum run_state state, int (*fn)(void *ctx, const struct store_run *run),
		    void *ctx, char *err, size_t errlen);
	/* How many runs are in each state, into count[RS_COUNT]. 0 done, -1
	 * error. */
	int (*count)(struct store *s, uint64_t count[RS_COUNT], char *err, size_t errlen);
	/* Close and free (store_close is the call that is safe on NULL). */
	void (*close)(struct store *s);
};

struct store {
	const struct store_ops *ops;
};

/* Open (creating, with its schema) the SQLite store at path, whose
 * directory must exist. NULL with a one-line reason on failure (a file
 * that is not SQLite, or a schema newer than this vmrund's, is one). */
struct store *store_sqlite_open(const char *path, char *err, size_t errlen);

/* s->ops->close(s), and nothing for NULL, so that cleanup paths need not
 * check. */
void store_close(struct store *s);

/* Free what a row holds (request, result) and zero it; safe twice. */
void store_run_free(struct store_run *run);

/* The state's name as the API spells it ("timed_out"), NULL for a value
 * that is no state; and back: -1 for an unknown name (or NULL). */
const char *store_state_name(enum run_state st);
int store_state_parse(const char *name);

/* Whether st is terminal (succeeded and after). */
bool store_state_terminal(enum run_state st);

#endif
