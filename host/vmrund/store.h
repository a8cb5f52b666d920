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
	/* Insert a new run (state queued). -1 with a reason on failure (a
	 * duplicate id is one). */
	int (*insert)(struct store *s, const struct store_run *run, char *err, size_t errlen);
	/* The run with this id and tenant into *out (the caller frees it with
	 * store_run_free): 1 found, 0 not (another tenant's is not found),
	 * -1 error. tenant NULL: any tenant's. */
	int (*get)(struct store *s, const char *id, const char *tenant, struct store_run *out, char *err, size_t errlen);
	/* queued -> running at started_ms. 1 done, 0 the run was not queued. */
	int (*start)(struct store *s, const char *id, int64_t started_ms, char *err, size_t errlen);
	/* Any non-terminal state -> a terminal one, with result (NULL: none)
	 * and message. 1 done, 0 the run was already terminal. */
	int (*finish)(struct store *s, const char *id, enum run_state state, int64_t finished_ms, const char *result,
		      const char *message, char *err, size_t errlen);
	/* Call fn for every run in state, oldest (seq) first; fn returns 0 to
	 * go on. The row passed is valid only during the call. */
	int (*each)(struct store *s, enum run_state state, int (*fn)(void *ctx, const struct store_run *run),
		    void *ctx, char *err, size_t errlen);
	/* How many runs are in each state, into count[RS_COUNT]. */
	int (*count)(struct store *s, uint64_t count[RS_COUNT], char *err, size_t errlen);
	/* Close and free; safe on NULL. */
	void (*close)(struct store *s);
};

struct store {
	const struct store_ops *ops;
};

/* Open (creating, with its schema) the SQLite store at path. NULL with a
 * one-line reason on failure. */
struct store *store_sqlite_open(const char *path, char *err, size_t errlen);

/* Free what a row holds (request, result) and zero it; safe twice. */
void store_run_free(struct store_run *run);

/* The state's name as the API spells it ("timed_out"), and back: -1 for
 * an unknown name. */
const char *store_state_name(enum run_state st);
int store_state_parse(const char *name);

/* Whether st is terminal (succeeded and after). */
bool store_state_terminal(enum run_state st);

#endif
