/* The SQLite store's sandboxes (store.h's sbx_* calls): their rows and
 * their idempotency keys, over the connection and the statement helpers
 * of the runs' calls (store_sqlite.h). As there, sbx_create holds BEGIN
 * IMMEDIATE from its first read, so that another connection to the file
 * cannot take the tenant's last place between the count and the insert;
 * every other call is one statement, or one transaction (sbx_drop). */
#include "store_sqlite.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "store_sandbox.h"

const char *const store_sqlite_sbx_sql[SB_N] = {
	[SB_IDEM_GET] = "SELECT hash, id FROM sandbox_idem WHERE tenant = ?1 AND key = ?2 AND created_ms > ?3",
	/* a row past its time is taken over */
	[SB_IDEM_PUT] = "INSERT INTO sandbox_idem (tenant, key, hash, id, created_ms) VALUES (?1, ?2, ?3, ?4, ?5)"
			" ON CONFLICT (tenant, key) DO UPDATE SET hash = excluded.hash, id = excluded.id,"
			" created_ms = excluded.created_ms",
	/* The tenant's open sandboxes and what they take, on the (tenant,
	 * state) index. */
	[SB_ADMIT] = "SELECT count(*), coalesce(sum(memory_mib), 0), coalesce(sum(disk_mib), 0) FROM sandboxes"
		     " WHERE tenant = ?1 AND state IN " STORE_SBX_OPEN,
	[SB_INSERT] = "INSERT INTO sandboxes (id, tenant, node, state, created_ms, memory_mib, disk_mib, request)"
		      " VALUES (?1, ?2, ?3, 'starting', ?4, ?5, ?6, ?7)",
	[SB_GET] = "SELECT " STORE_SBX_COLS " FROM sandboxes WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)",
	/* NULL (a zero or NULL argument) keeps the column as it is. */
	[SB_SET] = "UPDATE sandboxes SET state = ?3, started_ms = coalesce(?4, started_ms),"
		   " ended_ms = coalesce(?5, ended_ms), timeout_at_ms = coalesce(?6, timeout_at_ms),"
		   " reason = coalesce(?7, reason)"
		   " WHERE id = ?1 AND state IN " STORE_SBX_OPEN " AND (?2 IS NULL OR node = ?2)",
	[SB_MOVE] = "UPDATE sandboxes SET node = ?4, state = ?5, reason = coalesce(?6, reason),"
		    " timeout_at_ms = coalesce(?7, timeout_at_ms) WHERE id = ?1 AND node = ?2 AND state = ?3",
	/* One row per query, after the last one seen, as the runs' ST_EACH:
	 * no read is open while the walk's callback runs. */
	[SB_NEXT] = "SELECT " STORE_SBX_COLS " FROM sandboxes WHERE seq > ?1 AND (?2 IS NULL OR tenant = ?2)"
		    " AND (?3 IS NULL OR node = ?3) AND (?4 = 0 OR state IN " STORE_SBX_OPEN ")"
		    " ORDER BY seq LIMIT 1",
	/* ?3 is STORE_MSG_SBX_LOST, so that the reason reads as store.h
	 * spells it; the dead nodes as the runs' ST_DEAD finds them. */
	[SB_LOST] = "UPDATE sandboxes SET state = 'lost', ended_ms = ?2, reason = printf(?3, node)"
		    " WHERE state IN " STORE_SBX_OPEN " AND (node = ?1 OR (?1 IS NULL AND node IN"
		    " (SELECT name FROM nodes WHERE lease_until_ms < ?4))) RETURNING " STORE_SBX_COLS,
	/* The keys first, since nothing ties them to their sandbox here. */
	[SB_DROP_IDEM] = "DELETE FROM sandbox_idem WHERE id IN (SELECT id FROM sandboxes WHERE ended_ms < ?1"
			 " AND state IN " STORE_SBX_TERMINAL ")",
	[SB_DROP] = "DELETE FROM sandboxes WHERE ended_ms < ?1 AND state IN " STORE_SBX_TERMINAL,
};

static struct store_sqlite *backend(struct store *s)
{
	return (struct store_sqlite *)s;
}

/* A time or a size column; NULL reads as 0, "not yet". */
static uint64_t column_u64(sqlite3_stmt *st, int col)
{
	sqlite3_int64 v = sqlite3_column_int64(st, col);
	return v < 0 ? 0 : (uint64_t)v;
}

/* 0 as NULL, which SB_SET reads as "unchanged" and the rows as "not yet". */
static int bind_time(sqlite3_stmt *st, int i, int64_t v)
{
	return v ? sqlite3_bind_int64(st, i, v) : sqlite3_bind_null(st, i);
}

/* The current row (STORE_SBX_COLS) into *out, which owns its request. */
static int read_sbx(sqlite3_stmt *st, struct store_sandbox *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	store_copy_text(out->id, sizeof(out->id), (const char *)sqlite3_column_text(st, SBC_ID));
	store_copy_text(out->tenant, sizeof(out->tenant), (const char *)sqlite3_column_text(st, SBC_TENANT));
	store_copy_text(out->node, sizeof(out->node), (const char *)sqlite3_column_text(st, SBC_NODE));
	int state = store_sbx_state_parse((const char *)sqlite3_column_text(st, SBC_STATE));
	if (state < 0)
		return errf(err, errlen, "state db: sandbox %s has an unknown state", out->id);
	out->state = (enum sbx_row_state)state;
	out->created_ms = sqlite3_column_int64(st, SBC_CREATED);
	out->started_ms = sqlite3_column_int64(st, SBC_STARTED);
	out->ended_ms = sqlite3_column_int64(st, SBC_ENDED);
	out->timeout_at_ms = sqlite3_column_int64(st, SBC_TIMEOUT_AT);
	out->memory_mib = column_u64(st, SBC_MEMORY);
	out->disk_mib = column_u64(st, SBC_DISK);
	if (sq_dup_column(st, SBC_REQUEST, &out->request) < 0) {
		store_sandbox_free(out);
		return errf(err, errlen, "state db: out of memory reading sandbox");
	}
	store_copy_text(out->reason, sizeof(out->reason), (const char *)sqlite3_column_text(st, SBC_REASON));
	out->seq = sqlite3_column_int64(st, SBC_SEQ);
	return 0;
}

/* Step a bound SELECT once and release it: 1 and the row in *out, 0 no
 * row, -1 error. */
static int fetch_sbx(struct store_sqlite *s, sqlite3_stmt *st, struct store_sandbox *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		rc = read_sbx(st, out, err, errlen) < 0 ? -1 : 1;
	else if (rc == SQLITE_DONE)
		rc = 0;
	else
		rc = sq_db_err(s, err, errlen);
	sq_release(st);
	return rc;
}

/* idem's key as the tenant used it for a sandbox within its time:
 * STORE_REPLAYED (the sandbox into idem->id) or STORE_KEY_REUSED, 0 when
 * it was not, -1 error. In sbx_create's transaction. */
static int idem_lookup(struct store_sqlite *s, const struct store_sandbox *sb, struct store_idem *idem, char *err,
		       size_t errlen)
{
	sqlite3_stmt *st = s->sbx[SB_IDEM_GET];
	if (sq_bind_text(st, 1, sb->tenant) || sq_bind_text(st, 2, idem->key) ||
	    sqlite3_bind_int64(st, 3, sb->created_ms - STORE_IDEM_TTL_MS))
		return sq_bind_err(s, st, err, errlen);
	int step = sqlite3_step(st), rc = 0;
	if (step == SQLITE_ROW) {
		bool same = !strcmp((const char *)sqlite3_column_text(st, 0), idem->hash);
		store_copy_text(idem->id, sizeof(idem->id), (const char *)sqlite3_column_text(st, 1));
		rc = same ? STORE_REPLAYED : STORE_KEY_REUSED;
	} else if (step != SQLITE_DONE) {
		rc = sq_db_err(s, err, errlen);
	}
	sq_release(st);
	return rc;
}

/* The tenant's open sandboxes against lim, in the open transaction: 0 or
 * the verdict that refuses sb, -1 error. */
static int admit(struct store_sqlite *s, const struct store_sandbox *sb, const struct tenant *lim, char *err,
		 size_t errlen)
{
	sqlite3_stmt *st = s->sbx[SB_ADMIT];
	if (sq_bind_text(st, 1, sb->tenant))
		return sq_bind_err(s, st, err, errlen);
	if (sqlite3_step(st) != SQLITE_ROW) {
		sq_db_err(s, err, errlen);
		sq_release(st);
		return -1;
	}
	int v = store_sbx_admit(lim, column_u64(st, 0), column_u64(st, 1), column_u64(st, 2), sb);
	sq_release(st);
	return v;
}

int sq_sbx_create(struct store *base, const struct store_sandbox *sb, struct store_idem *idem, const struct tenant *lim,
		  char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	if (sq_node_ok(sb->node, err, errlen) < 0)
		return -1;
	/* INTEGER is signed: a larger size would read back negative */
	if (sb->memory_mib > INT64_MAX || sb->disk_mib > INT64_MAX)
		return errf(err, errlen, "state db: sandbox %s: a size over %lld MiB", sb->id, (long long)INT64_MAX);
	if (sq_begin(s, err, errlen) < 0)
		return -1;
	if (idem) {
		int seen = idem_lookup(s, sb, idem, err, errlen);
		if (seen < 0)
			goto fail;
		if (seen) {
			sq_rollback(s);   /* nothing was written */
			return seen;
		}
	}
	int v = admit(s, sb, lim, err, errlen);
	if (v < 0)
		goto fail;
	if (v) {
		sq_rollback(s);
		return v;
	}
	sqlite3_stmt *st = s->sbx[SB_INSERT];
	if (sq_bind_text(st, 1, sb->id) || sq_bind_text(st, 2, sb->tenant) || sq_bind_text(st, 3, sb->node) ||
	    sqlite3_bind_int64(st, 4, sb->created_ms) || sqlite3_bind_int64(st, 5, (sqlite3_int64)sb->memory_mib) ||
	    sqlite3_bind_int64(st, 6, (sqlite3_int64)sb->disk_mib) || sq_bind_text(st, 7, sb->request)) {
		sq_bind_err(s, st, err, errlen);
		goto fail;
	}
	if (sq_step_write(s, st, err, errlen) < 0)
		goto fail;
	if (idem && sq_idem_put(s, s->sbx[SB_IDEM_PUT], sb->tenant, idem, sb->id, sb->created_ms, err, errlen))
		goto fail;
	if (sq_commit(s, err, errlen) < 0)
		goto fail;
	return 0;
fail:
	sq_rollback(s);
	return -1;
}

int sq_sbx_get(struct store *base, const char *id, const char *tenant, struct store_sandbox *out, char *err,
	       size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *st = s->sbx[SB_GET];
	if (sq_bind_text(st, 1, id) || sq_bind_text(st, 2, tenant)) {
		memset(out, 0, sizeof(*out));
		return sq_bind_err(s, st, err, errlen);
	}
	return fetch_sbx(s, st, out, err, errlen);
}

int sq_sbx_set(struct store *base, const char *id, const char *node, enum sbx_row_state state, int64_t started_ms,
	       int64_t ended_ms, int64_t timeout_at_ms, const char *reason, char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	const char *name = store_sbx_state_name(state);
	if (!name)
		return errf(err, errlen, "state db: sandbox %s: no state %d", id, (int)state);
	sqlite3_stmt *st = s->sbx[SB_SET];
	if (sq_bind_text(st, 1, id) || sq_bind_text(st, 2, node) || sq_bind_text(st, 3, name) ||
	    bind_time(st, 4, started_ms) || bind_time(st, 5, ended_ms) || bind_time(st, 6, timeout_at_ms) ||
	    sq_bind_text(st, 7, reason))
		return sq_bind_err(s, st, err, errlen);
	int n = sq_step_write(s, st, err, errlen);
	return n < 0 ? -1 : n == 1;
}

int sq_sbx_move(struct store *base, const char *id, const char *from, enum sbx_row_state st, const char *to,
		enum sbx_row_state to_st, int64_t timeout_at_ms, const char *reason, char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	const char *a = store_sbx_state_name(st), *b = store_sbx_state_name(to_st);
	if (!a || !b)
		return errf(err, errlen, "state db: sandbox %s: no state %d", id, (int)(a ? to_st : st));
	sqlite3_stmt *q = s->sbx[SB_MOVE];
	if (sq_bind_text(q, 1, id) || sq_bind_text(q, 2, from) || sq_bind_text(q, 3, a) || sq_bind_text(q, 4, to) ||
	    sq_bind_text(q, 5, b) || sq_bind_text(q, 6, reason) || bind_time(q, 7, timeout_at_ms))
		return sq_bind_err(s, q, err, errlen);
	int n = sq_step_write(s, q, err, errlen);
	return n < 0 ? -1 : n == 1;
}

/* A query per sandbox rather than one open over the walk, as the runs'
 * each and for its reasons: fn may call the store, and what it writes
 * commits at once. */
int sq_sbx_each(struct store *base, const char *tenant, const char *node, bool open_only,
		int (*fn)(void *ctx, const struct store_sandbox *sb), void *ctx, char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *st = s->sbx[SB_NEXT];
	int64_t after = INT64_MIN;
	for (;;) {
		struct store_sandbox row;
		if (sqlite3_bind_int64(st, 1, after) || sq_bind_text(st, 2, tenant) || sq_bind_text(st, 3, node) ||
		    sqlite3_bind_int(st, 4, open_only))
			return sq_bind_err(s, st, err, errlen);
		int rc = fetch_sbx(s, st, &row, err, errlen);
		if (rc <= 0)
			return rc;
		after = row.seq;
		rc = fn(ctx, &row);
		store_sandbox_free(&row);
		if (rc)
			return rc;
	}
}

static int by_seq(const void *a, const void *b)
{
	const struct store_sandbox *x = a, *y = b;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* One statement, so one commit: its RETURNING rows are what it changed,
 * all read (and the statement released, which commits it) before fn
 * runs. */
int sq_sbx_lost(struct store *base, const char *node, int64_t now_ms,
		void (*fn)(void *ctx, const struct store_sandbox *sb), void *ctx, char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *st = s->sbx[SB_LOST];
	struct store_sandbox *rows = NULL;
	size_t n = 0, cap = 0;
	int changed = 0, rc;
	if (sq_bind_text(st, 1, node) || sqlite3_bind_int64(st, 2, now_ms) || sq_bind_text(st, 3, STORE_MSG_SBX_LOST) ||
	    sqlite3_bind_int64(st, 4, sq_backend_now_ms()))
		return sq_bind_err(s, st, err, errlen);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		changed++;
		/* a row that cannot be read was changed all the same: only
		 * fn's report of it is lost */
		if (fn && sq_grow((void **)&rows, &cap, n, sizeof(*rows)) == 0 &&
		    read_sbx(st, &rows[n], err, errlen) == 0)
			n++;
	}
	if (rc != SQLITE_DONE)
		changed = sq_db_err(s, err, errlen);
	sq_release(st);
	if (changed >= 0 && n) {
		qsort(rows, n, sizeof(*rows), by_seq);
		for (size_t i = 0; i < n; i++)
			fn(ctx, &rows[i]);
	}
	for (size_t i = 0; i < n; i++)
		store_sandbox_free(&rows[i]);
	free(rows);
	return changed;
}

long sq_sbx_drop(struct store *base, int64_t before_ms, char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	int n = -1;
	if (sq_begin(s, err, errlen) < 0)
		return -1;
	sqlite3_stmt *st = s->sbx[SB_DROP_IDEM];
	if (sqlite3_bind_int64(st, 1, before_ms)) {
		sq_bind_err(s, st, err, errlen);
		goto fail;
	}
	if (sq_step_write(s, st, err, errlen) < 0)
		goto fail;
	st = s->sbx[SB_DROP];
	if (sqlite3_bind_int64(st, 1, before_ms)) {
		sq_bind_err(s, st, err, errlen);
		goto fail;
	}
	if ((n = sq_step_write(s, st, err, errlen)) < 0 || sq_commit(s, err, errlen) < 0)
		goto fail;
	return n;
fail:
	sq_rollback(s);
	return -1;
}
