/* The SQLite store's insides, shared by its three files: the runs' calls
 * (store_sqlite.c, the ops table, and the statement helpers below), the
 * sandboxes' calls (store_sqlite_sandbox.c), and the file's setup under
 * them (store_sqlite_file.c). Nothing else includes this; the daemon sees
 * only store.h. */
#ifndef VMRUN_STORE_SQLITE_H
#define VMRUN_STORE_SQLITE_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* A file just opened as db, made ready for the calls: WAL with
 * synchronous=FULL, a busy timeout, and the schema at this vmrund's
 * version (created, migrated, or checked; a newer one is refused).
 * Messages name path: 0, -1. */
int store_sqlite_setup(sqlite3 *db, const char *path, char *err, size_t errlen);

/* ---- the open store (store_sqlite.c) ------------------------------------ */

/* The runs' statements, prepared once at open; their SQL is
 * store_sqlite.c's stmt_sql. */
enum stmt_id {
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_ADMIT,
	ST_INSERT,
	ST_IDEM_GET,
	ST_IDEM_PUT,
	ST_DROP_RUN_IDEM,
	ST_GET,
	ST_STAT,
	ST_TAKE,
	ST_SIZES,
	ST_COMMAND,
	ST_FINISH,
	ST_PEEK,
	ST_MARK,
	ST_LEASE,
	ST_ASKED,
	ST_DEAD,
	ST_REQUEUE,
	ST_EACH,
	ST_COUNT,
	ST_PUT_BLOB,
	ST_BLOB,
	ST_DROP_BLOBS,
	ST_DROP_RUN_BLOBS,
	ST_DROP_RUNS,
	ST_N
};

/* The sandboxes' statements, prepared with the runs' (their transactions
 * are the runs' ST_BEGIN, ST_COMMIT, ST_ROLLBACK); their SQL is
 * store_sqlite_sandbox.c's. */
enum sbx_stmt_id {
	SB_IDEM_GET,
	SB_IDEM_PUT,
	SB_ADMIT,
	SB_INSERT,
	SB_GET,
	SB_SET,
	SB_MOVE,
	SB_NEXT,
	SB_LOST,
	SB_DROP_IDEM,
	SB_DROP,
	SB_N
};
extern const char *const store_sqlite_sbx_sql[SB_N];

struct store_sqlite {
	struct store base;   /* first: the daemon's struct store * points here */
	sqlite3 *db;
	sqlite3_stmt *stmt[ST_N];
	sqlite3_stmt *sbx[SB_N];
};

/* ---- statements (store_sqlite.c) ---------------------------------------- */

/* "state db: " and the connection's last error into err: -1. */
int sq_db_err(struct store_sqlite *s, char *err, size_t errlen);

/* Done with a statement: reset and bindings cleared, so that it holds no
 * lock, no open read and no pointer into the caller's memory. */
void sq_release(sqlite3_stmt *st);

/* A bind failed: say why, release st: -1. */
int sq_bind_err(struct store_sqlite *s, sqlite3_stmt *st, char *err, size_t errlen);

/* Bind text that the statement only reads before release (no copy);
 * NULL binds NULL. SQLite's code (0: bound). */
int sq_bind_text(sqlite3_stmt *st, int i, const char *text);

/* A malloc'd copy of a text column into *out; NULL stays NULL. 0, -1 out
 * of memory. */
int sq_dup_column(sqlite3_stmt *st, int col, char **out);

/* Run a bound write to its end and release it: the rows it changed, or
 * -1. */
int sq_step_write(struct store_sqlite *s, sqlite3_stmt *st, char *err, size_t errlen);

/* Keep an Idempotency-Key of tenant's (idem's key and the hash of its
 * body) for id, made at created_ms, with st, a statement that inserts
 * (tenant, key, hash, id, created_ms): runs' and sandboxes' keys have
 * tables of their own. 0, -1. */
int sq_idem_put(struct store_sqlite *s, sqlite3_stmt *st, const char *tenant, const struct store_idem *idem,
		const char *id, int64_t created_ms, char *err, size_t errlen);

/* BEGIN IMMEDIATE: 0, -1. */
int sq_begin(struct store_sqlite *s, char *err, size_t errlen);

/* Undo the open transaction, if one is open. */
void sq_rollback(struct store_sqlite *s);

/* COMMIT (rolled back when it fails): 0, -1. */
int sq_commit(struct store_sqlite *s, char *err, size_t errlen);

/* The clock leases are measured on: this machine's wall clock, Unix ms. */
int64_t sq_backend_now_ms(void);

/* Whether node is a name a row may keep (1 to STORE_NODE_MAX - 1 bytes):
 * 0, or -1 with why. */
int sq_node_ok(const char *node, char *err, size_t errlen);

/* Room for element n in the list *p of *cap elements of size bytes,
 * grown when full: 0, -1 out of memory. */
int sq_grow(void **p, size_t *cap, size_t n, size_t size);

/* ---- the sandboxes' calls (store_sqlite_sandbox.c), store.h's sbx_* ----- */

int sq_sbx_create(struct store *s, const struct store_sandbox *sb, struct store_idem *idem, const struct tenant *lim,
		  char *err, size_t errlen);
int sq_sbx_get(struct store *s, const char *id, const char *tenant, struct store_sandbox *out, char *err,
	       size_t errlen);
int sq_sbx_set(struct store *s, const char *id, const char *node, enum sbx_row_state state, int64_t started_ms,
	       int64_t ended_ms, int64_t timeout_at_ms, const char *reason, char *err, size_t errlen);
int sq_sbx_move(struct store *s, const char *id, const char *from, enum sbx_row_state st, const char *to,
		enum sbx_row_state to_st, int64_t timeout_at_ms, const char *reason, char *err, size_t errlen);
int sq_sbx_each(struct store *s, const char *tenant, const char *node, bool open_only,
		int (*fn)(void *ctx, const struct store_sandbox *sb), void *ctx, char *err, size_t errlen);
int sq_sbx_lost(struct store *s, const char *node, int64_t now_ms,
		void (*fn)(void *ctx, const struct store_sandbox *sb), void *ctx, char *err, size_t errlen);
long sq_sbx_drop(struct store *s, int64_t before_ms, char *err, size_t errlen);

#endif
