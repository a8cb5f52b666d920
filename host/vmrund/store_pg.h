/* The PostgreSQL store's insides, shared by its three files: the runs'
 * calls (store_pg.c, the ops table), the sandboxes' calls
 * (store_pg_sandbox.c), and the connection layer under them
 * (store_pg_conn.c). Nothing else includes this; the daemon sees only
 * store.h. */
#ifndef VMRUN_STORE_PG_H
#define VMRUN_STORE_PG_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "store.h"

/* The advisory locks, 64-bit keys of their own ("vmrun" in ASCII, then
 * which lock) so that they collide with nothing else using the server:
 * the schema's (session-level, held while open migrates), and the
 * transaction-level ones that serialize admissions and claims across
 * nodes. */
#define LOCK_SCHEMA "8537592029633331201"   /* 0x766d72756e000001 */
#define LOCK_SUBMIT "8537592029633331202"   /* 0x766d72756e000002 */
#define LOCK_CLAIM  "8537592029633331203"   /* 0x766d72756e000003 */

/* sbx_create's, per tenant: this key plus the low 16 bits of hashtext of
 * the tenant's name (0x766d72756e01xxxx), so that a tenant's count and
 * insert are serialized across nodes while two tenants' creations seldom
 * wait on each other (two that share a key only take turns). */
#define LOCK_SANDBOX "8537592029633396736"   /* 0x766d72756e010000 */

/* The channel every node listens on; payloads "queued:ID", "cancel:ID",
 * "ended:ID", sent by pg_notify in the transaction of the change, so that
 * they go out when (and only if) it commits. */
#define CHANNEL "vmrun"

/* Now, in Unix ms, on the server's clock (clock_timestamp: the moment of
 * the call, not the start of the transaction): what leases are kept on. */
#define NOW_MS "(extract(epoch from clock_timestamp()) * 1000)::bigint"

/* Columns 0..15 of a row are STORE_COLS, in this order. */
enum col {
	C_ID, C_TENANT, C_STATE, C_CREATED, C_STARTED, C_COMMAND, C_FINISHED, C_REQUEST, C_RESULT, C_MESSAGE, C_SEQ,
	C_NODE, C_CANCEL, C_OUTCOME, C_TERMINATION, C_LIMITS_HIT, C_N
};

struct store_pg {
	struct store base;   /* first: the daemon's struct store * points here */
	PGconn *db;          /* the calls */
	PGconn *listen;      /* LISTEN vmrun; NULL until open made it */
};

/* ---- connections (store_pg_conn.c) -------------------------------------- */

/* Connect to uri with our options (timeouts, keepalives) under what the
 * URI says. Always a connection object, libpq's failure in it; NULL only
 * out of memory. */
PGconn *pg_connect(const char *uri);

/* A connection made or reset: its session set up (isolation, timeouts).
 * Whether it is usable. */
bool pg_session_ok(PGconn *c);

/* "store: WHAT: " and the first line of c's last error into err: -1. */
int pg_conn_err(PGconn *c, const char *what, char *err, size_t errlen);

/* LISTEN on CHANNEL: 0, -1. */
int pg_listen(PGconn *c, char *err, size_t errlen);

/* Before each call: the command connection up (reset when it broke) and
 * outside any transaction: 0, -1 when the server cannot be reached. */
int pg_ensure(struct store_pg *s, char *err, size_t errlen);

/* ---- statements (store_pg_conn.c) --------------------------------------- */

/* Why a statement failed (the connection's reason when it broke, else
 * the server's primary message) into err: -1. */
int pg_stmt_err(struct store_pg *s, const PGresult *res, const char *what, char *err, size_t errlen);

/* Whether a failed statement's SQLSTATE is code. */
bool pg_sqlstate_is(const PGresult *res, const char *code);

/* Run one statement with n parameters (text unless fmt says binary;
 * NULL values are SQL NULL), results in text unless binary_out. The
 * result when it ran; else NULL with the reason in err, and the failed
 * result in *failed when failed is non-NULL (the caller clears it). */
PGresult *pg_exec_full(struct store_pg *s, const char *what, const char *sql, int n, const char *const *val,
		       const int *len, const int *fmt, int binary_out, PGresult **failed, char *err, size_t errlen);

/* pg_exec_full with text parameters and results. */
PGresult *pg_exec_sql(struct store_pg *s, const char *what, const char *sql, int n, const char *const *val,
		      char *err, size_t errlen);

/* A statement whose result is not needed: 0, -1. */
int pg_exec_cmd(struct store_pg *s, const char *what, const char *sql, int n, const char *const *val, char *err,
		size_t errlen);

/* BEGIN: 0, -1. */
int pg_begin(struct store_pg *s, char *err, size_t errlen);

/* The end of a call's transaction: COMMIT when rc >= 0 (rc stays, or -1
 * when the commit failed), else ROLLBACK. */
int pg_end_tx(struct store_pg *s, int rc, char *err, size_t errlen);

/* ---- rows (store_pg_conn.c) --------------------------------------------- */

/* v in decimal into buf (cap bytes; 24 hold any), a parameter's text. */
void pg_fmt_i64(char *buf, size_t cap, int64_t v);

/* An integer column in text (a count, a time); NULL reads as 0. */
int64_t pg_get_i64(const PGresult *res, int row, int col);

/* A count column, clamped to unsigned. */
unsigned pg_get_count(const PGresult *res, int row, int col);

/* Row row of a result whose first columns are STORE_COLS into *out,
 * which owns copies of everything (store_run_free): 0, -1. */
int pg_read_row(const PGresult *res, int row, struct store_run *out, char *err, size_t errlen);

/* ---- the sandboxes' calls (store_pg_sandbox.c), store.h's sbx_* -------- */

int pg_sbx_create(struct store *s, const struct store_sandbox *sb, struct store_idem *idem, const struct tenant *lim,
		  char *err, size_t errlen);
int pg_sbx_get(struct store *s, const char *id, const char *tenant, struct store_sandbox *out, char *err,
	       size_t errlen);
int pg_sbx_set(struct store *s, const char *id, const char *node, enum sbx_row_state state, int64_t started_ms,
	       int64_t ended_ms, int64_t timeout_at_ms, const char *reason, char *err, size_t errlen);
int pg_sbx_move(struct store *s, const char *id, const char *from, enum sbx_row_state st, const char *to,
		enum sbx_row_state to_st, int64_t timeout_at_ms, const char *reason, char *err, size_t errlen);
int pg_sbx_each(struct store *s, const char *tenant, const char *node, bool open_only,
		int (*fn)(void *ctx, const struct store_sandbox *sb), void *ctx, char *err, size_t errlen);
int pg_sbx_lost(struct store *s, const char *node, int64_t now_ms,
		void (*fn)(void *ctx, const struct store_sandbox *sb), void *ctx, char *err, size_t errlen);
long pg_sbx_drop(struct store *s, int64_t before_ms, char *err, size_t errlen);
int pg_set_address(struct store *s, const char *node, const char *address, char *err, size_t errlen);
int pg_address_of(struct store *s, const char *node, char *out, size_t cap, char *err, size_t errlen);

/* ---- the schema (store_pg_conn.c) --------------------------------------- */

/* Bring the database's schema to this vmrund's version, one node at a
 * time (a session advisory lock); refuse a newer one: 0, -1. */
int pg_migrate(struct store_pg *s, char *err, size_t errlen);

#endif
