/* The SQLite store: one file on one machine, one connection, and the
 * statements prepared once at open. A call that only reads, or changes one
 * row in one statement, is a transaction of its own (autocommit); a call
 * that decides from what it counts (submit, claim) or changes several rows
 * (cancel, expire) holds BEGIN IMMEDIATE from its first read, so that
 * another connection to the file (a second vmrund, an operator's tool)
 * cannot change the counts between the read and the write. WAL with
 * synchronous=FULL makes each commit reach the disk before the call
 * returns, so an accepted run survives kill -9 and power loss. The
 * sandboxes' calls are store_sqlite_sandbox.c's, over the helpers here
 * (store_sqlite.h). */
#include "store_sqlite.h"

#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "errmsg.h"
#include "run_spec.h"
#include "scheduler.h"

static const char *const stmt_sql[ST_N] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	/* The tenant's open runs, and the whole queue. */
	[ST_ADMIT] = "SELECT (SELECT count(*) FROM runs WHERE state IN ('queued', 'running') AND tenant = ?1),"
		     " (SELECT count(*) FROM runs WHERE state = 'queued')",
	[ST_INSERT] = "INSERT INTO runs (id, tenant, state, created_ms, request) VALUES (?1, ?2, 'queued', ?3, ?4)",
	[ST_IDEM_GET] = "SELECT hash, id FROM idem WHERE tenant = ?1 AND key = ?2 AND created_ms > ?3",
	/* a row past its time is taken over */
	[ST_IDEM_PUT] = "INSERT INTO idem (tenant, key, hash, id, created_ms) VALUES (?1, ?2, ?3, ?4, ?5)"
			" ON CONFLICT (tenant, key) DO UPDATE SET hash = excluded.hash, id = excluded.id,"
			" created_ms = excluded.created_ms",
	[ST_DROP_RUN_IDEM] = "DELETE FROM idem WHERE id IN (SELECT id FROM runs WHERE finished_ms < ?1"
			     " AND state NOT IN ('queued', 'running'))",
	[ST_GET] = "SELECT " STORE_COLS " FROM runs WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)",
	/* A tenant's standing for sched_choose; max over every run it ever
	 * started, which the (tenant, started_ms) index answers in one step. */
	[ST_STAT] = "SELECT (SELECT count(*) FROM runs WHERE state = 'running' AND tenant = ?1),"
		    " (SELECT count(*) FROM runs WHERE state = 'queued' AND tenant = ?1),"
		    " (SELECT max(started_ms) FROM runs WHERE tenant = ?1)",
	/* A verification run names the node that holds its checkpoint
	 * (run_spec.h's checkpoint_node): no other node takes it. */
	[ST_TAKE] = "UPDATE runs SET state = 'running', node = ?2, started_ms = ?3"
		    " WHERE seq IN (SELECT seq FROM runs WHERE state = 'queued' AND tenant = ?1"
		    " AND coalesce(json_extract(request, '$.checkpoint_node'), ?2) = ?2 ORDER BY seq LIMIT ?4)"
		    " RETURNING " STORE_COLS,
	/* A tenant's oldest queued runs' sizes, as their canonical requests
	 * pin them (run_spec.h's run_spec_size_json, defaults ?3 and ?4), in the
	 * order ST_TAKE takes them (for node ?5). */
	[ST_SIZES] = "SELECT coalesce(json_extract(request, '$.limits.memory_mib'), ?3),"
		     " coalesce(json_extract(request, '$.limits.disk_mib'), ?4)"
		     " FROM runs WHERE state = 'queued' AND tenant = ?1"
		     " AND coalesce(json_extract(request, '$.checkpoint_node'), ?5) = ?5 ORDER BY seq LIMIT ?2",
	/* A second call keeps the first time: the command may have had
	 * effects since then. */
	[ST_COMMAND] = "UPDATE runs SET command_ms = coalesce(command_ms, ?3)"
		       " WHERE id = ?1 AND state = 'running' AND node = ?2 AND cancel = 0",
	[ST_FINISH] = "UPDATE runs SET state = ?2, finished_ms = ?3, result = ?4, message = ?5,"
		      " outcome = ?7, termination = ?8, limits_hit = coalesce(?9, 0)"
		      " WHERE id = ?1 AND state IN ('queued', 'running') AND (?6 IS NULL OR node = ?6)",
	[ST_PEEK] = "SELECT state, node FROM runs WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)",
	[ST_MARK] = "UPDATE runs SET cancel = 1 WHERE id = ?1 AND state = 'running'",
	[ST_LEASE] = "INSERT INTO nodes (name, lease_until_ms) VALUES (?1, ?2)"
		     " ON CONFLICT (name) DO UPDATE SET lease_until_ms = excluded.lease_until_ms",
	[ST_ASKED] = "SELECT id FROM runs WHERE state = 'running' AND node = ?1 AND cancel = 1 ORDER BY seq",
	[ST_DEAD] = "SELECT " STORE_COLS " FROM runs WHERE state = 'running' AND (node = ?1 OR (?1 IS NULL AND node IN"
		    " (SELECT name FROM nodes WHERE lease_until_ms < ?2))) ORDER BY seq",
	/* started_ms goes too: the run has not started anywhere now. */
	[ST_REQUEUE] = "UPDATE runs SET state = 'queued', node = NULL, started_ms = NULL"
		       " WHERE id = ?1 AND state = 'running' AND node = ?2",
	/* One row per query, after the last one seen, so that no query is
	 * open while each's callback runs (see each). */
	[ST_EACH] = "SELECT " STORE_COLS " FROM runs WHERE state = ?1 AND seq > ?2 ORDER BY seq LIMIT 1",
	[ST_COUNT] = "SELECT state, count(*) FROM runs GROUP BY state",
	/* Only for a run that exists: a blob of no run would never be
	 * dropped, since drop_blobs goes by the runs' ends. */
	[ST_PUT_BLOB] = "INSERT INTO blobs (id, name, data) SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM runs WHERE id = ?1)"
			" ON CONFLICT (id, name) DO UPDATE SET data = excluded.data",
	/* One per query, as ST_EACH, for the same reason. */
	[ST_BLOB] = "SELECT name, data FROM blobs WHERE id = ?1 AND name > ?2 ORDER BY name LIMIT 1",
	[ST_DROP_BLOBS] = "DELETE FROM blobs WHERE id IN (SELECT id FROM runs WHERE finished_ms < ?1)",
	/* Run retention: blobs first, since no key ties them to their run
	 * here; terminal runs only, though only those have finished_ms. */
	[ST_DROP_RUN_BLOBS] = "DELETE FROM blobs WHERE id IN (SELECT id FROM runs WHERE finished_ms < ?1"
			      " AND state NOT IN ('queued', 'running'))",
	[ST_DROP_RUNS] = "DELETE FROM runs WHERE finished_ms < ?1 AND state NOT IN ('queued', 'running')",
};

static struct store_sqlite *backend(struct store *s)
{
	return (struct store_sqlite *)s;
}

int sq_db_err(struct store_sqlite *s, char *err, size_t errlen)
{
	return errf(err, errlen, "state db: %s", sqlite3_errmsg(s->db));
}

/* Done with a statement: reset so that it holds no lock and no open read
 * (which would also keep the next write from committing), and clear its
 * bindings so that it keeps no pointer into the caller's memory. */
void sq_release(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* A bind failed (only out of memory or a bad index): say why, let go. */
int sq_bind_err(struct store_sqlite *s, sqlite3_stmt *st, char *err, size_t errlen)
{
	sq_db_err(s, err, errlen);
	sq_release(st);
	return -1;
}

/* A malloc'd copy of a text column; NULL stays NULL. */
int sq_dup_column(sqlite3_stmt *st, int col, char **out)
{
	*out = NULL;
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		return 0;
	const unsigned char *text = sqlite3_column_text(st, col);
	int n = sqlite3_column_bytes(st, col);
	if (!text || !(*out = malloc((size_t)n + 1)))
		return -1;
	memcpy(*out, text, (size_t)n);
	(*out)[n] = '\0';
	return 0;
}

/* The current row (STORE_COLS) into *out, which owns copies of everything. */
static int read_row(sqlite3_stmt *st, struct store_run *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	store_copy_text(out->id, sizeof(out->id), (const char *)sqlite3_column_text(st, 0));
	store_copy_text(out->tenant, sizeof(out->tenant), (const char *)sqlite3_column_text(st, 1));
	int state = store_state_parse((const char *)sqlite3_column_text(st, 2));
	if (state < 0)
		return errf(err, errlen, "state db: run %s has an unknown state", out->id);
	out->state = (enum run_state)state;
	out->created_ms = sqlite3_column_int64(st, 3);
	out->started_ms = sqlite3_column_int64(st, 4);   /* NULL reads as 0, "not yet" */
	out->command_ms = sqlite3_column_int64(st, 5);
	out->finished_ms = sqlite3_column_int64(st, 6);
	if (sq_dup_column(st, 7, &out->request) < 0 || sq_dup_column(st, 8, &out->result) < 0) {
		store_run_free(out);
		return errf(err, errlen, "state db: out of memory reading run");
	}
	store_copy_text(out->message, sizeof(out->message), (const char *)sqlite3_column_text(st, 9));
	out->seq = sqlite3_column_int64(st, 10);
	store_copy_text(out->node, sizeof(out->node), (const char *)sqlite3_column_text(st, 11));   /* NULL: "" */
	out->cancel = sqlite3_column_int(st, 12) != 0;
	store_outcome_read(out, (const char *)sqlite3_column_text(st, 13), (const char *)sqlite3_column_text(st, 14),
			   sqlite3_column_int64(st, 15));
	return 0;
}

/* Step a bound SELECT once: 1 and the row in *out, 0 no row, -1 error. */
static int fetch_one(struct store_sqlite *s, sqlite3_stmt *st, struct store_run *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		rc = read_row(st, out, err, errlen) < 0 ? -1 : 1;
	else if (rc == SQLITE_DONE)
		rc = 0;
	else
		rc = sq_db_err(s, err, errlen);
	sq_release(st);
	return rc;
}

/* Run a bound write to its end (its commit, outside a transaction): the
 * rows it changed, or -1. */
int sq_step_write(struct store_sqlite *s, sqlite3_stmt *st, char *err, size_t errlen)
{
	int rc = sqlite3_step(st) == SQLITE_DONE ? sqlite3_changes(s->db) : sq_db_err(s, err, errlen);
	sq_release(st);
	return rc;
}

int sq_idem_put(struct store_sqlite *s, sqlite3_stmt *st, const char *tenant, const struct store_idem *idem,
		const char *id, int64_t created_ms, char *err, size_t errlen)
{
	if (sq_bind_text(st, 1, tenant) || sq_bind_text(st, 2, idem->key) || sq_bind_text(st, 3, idem->hash) ||
	    sq_bind_text(st, 4, id) || sqlite3_bind_int64(st, 5, created_ms))
		return sq_bind_err(s, st, err, errlen);
	return sq_step_write(s, st, err, errlen) < 0 ? -1 : 0;
}

/* Bind text that the statement only reads before release (SQLITE_STATIC:
 * no copy); NULL binds NULL. */
int sq_bind_text(sqlite3_stmt *st, int i, const char *text)
{
	return sqlite3_bind_text(st, i, text, -1, SQLITE_STATIC);
}

/* A count column as the scheduler's unsigned: the store cannot hold more
 * runs than that in practice, but a clamp costs nothing. */
static unsigned column_count(sqlite3_stmt *st, int col)
{
	sqlite3_int64 v = sqlite3_column_int64(st, col);
	return v < 0 ? 0 : v > UINT_MAX ? UINT_MAX : (unsigned)v;
}

int sq_begin(struct store_sqlite *s, char *err, size_t errlen)
{
	return sq_step_write(s, s->stmt[ST_BEGIN], err, errlen) < 0 ? -1 : 0;
}

/* Undo whatever the open transaction did; nothing when none is open (an
 * error may have rolled it back already). */
void sq_rollback(struct store_sqlite *s)
{
	if (!sqlite3_get_autocommit(s->db)) {
		sqlite3_step(s->stmt[ST_ROLLBACK]);
		sq_release(s->stmt[ST_ROLLBACK]);
	}
}

/* A COMMIT that fails leaves the transaction open: roll it back, so that
 * the next call does not find itself inside it. */
int sq_commit(struct store_sqlite *s, char *err, size_t errlen)
{
	if (sq_step_write(s, s->stmt[ST_COMMIT], err, errlen) < 0) {
		sq_rollback(s);
		return -1;
	}
	return 0;
}

/* The backend's clock, on which leases are measured: this machine's, the
 * only one that uses the file. */
int64_t sq_backend_now_ms(void)
{
	return clock_wall_ms();
}

/* A node's name as the rows keep it: what fits the row's field, and not
 * "", which a row reads as "no node". */
int sq_node_ok(const char *node, char *err, size_t errlen)
{
	if (!node || !*node || strlen(node) >= STORE_NODE_MAX)
		return errf(err, errlen, "state db: a node's name is 1 to %d bytes", STORE_NODE_MAX - 1);
	return 0;
}

/* idem's key as the tenant used it within its time: STORE_REPLAYED (the
 * run into idem->id) or STORE_KEY_REUSED, 0 when it was not, -1 error.
 * In submit's transaction. */
static int idem_lookup(struct store_sqlite *s, const struct store_run *run, struct store_idem *idem, char *err,
		       size_t errlen)
{
	sqlite3_stmt *st = s->stmt[ST_IDEM_GET];
	if (sq_bind_text(st, 1, run->tenant) || sq_bind_text(st, 2, idem->key) ||
	    sqlite3_bind_int64(st, 3, run->created_ms - STORE_IDEM_TTL_MS))
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

static int sq_submit(struct store *base, const struct store_run *run, struct store_idem *idem,
		     const struct tenant *lim, unsigned queue_max, char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *st = s->stmt[ST_ADMIT];
	if (sq_begin(s, err, errlen) < 0)
		return -1;
	if (idem) {
		int seen = idem_lookup(s, run, idem, err, errlen);
		if (seen < 0)
			goto fail;
		if (seen) {
			sq_rollback(s);
			return seen;
		}
	}
	if (sq_bind_text(st, 1, run->tenant)) {
		sq_bind_err(s, st, err, errlen);
		goto fail;
	}
	if (sqlite3_step(st) != SQLITE_ROW) {
		sq_db_err(s, err, errlen);
		sq_release(st);
		goto fail;
	}
	enum sched_verdict v = sched_admit(lim, column_count(st, 0), column_count(st, 1), queue_max);
	sq_release(st);
	if (v != SCHED_ACCEPT) {
		sq_rollback(s);   /* nothing was written: nothing to make durable */
		return (int)v;
	}
	st = s->stmt[ST_INSERT];
	if (sq_bind_text(st, 1, run->id) || sq_bind_text(st, 2, run->tenant) ||
	    sqlite3_bind_int64(st, 3, run->created_ms) || sq_bind_text(st, 4, run->request)) {
		sq_bind_err(s, st, err, errlen);
		goto fail;
	}
	if (sq_step_write(s, st, err, errlen) < 0)
		goto fail;
	if (idem && sq_idem_put(s, s->stmt[ST_IDEM_PUT], run->tenant, idem, run->id, run->created_ms, err, errlen))
		goto fail;
	if (sq_commit(s, err, errlen) < 0)
		goto fail;
	return SCHED_ACCEPT;
fail:
	sq_rollback(s);
	return -1;
}

static int sq_get(struct store *base, const char *id, const char *tenant, struct store_run *out, char *err,
		  size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *st = s->stmt[ST_GET];
	if (sq_bind_text(st, 1, id) || sq_bind_text(st, 2, tenant)) {
		memset(out, 0, sizeof(*out));
		return sq_bind_err(s, st, err, errlen);
	}
	return fetch_one(s, st, out, err, errlen);
}

/* Every tenant's standing into st[ts->n]. */
static int read_stats(struct store_sqlite *s, const struct tenants *ts, struct sched_stat *stat, char *err,
		      size_t errlen)
{
	sqlite3_stmt *st = s->stmt[ST_STAT];
	for (size_t i = 0; i < ts->n; i++) {
		if (sq_bind_text(st, 1, ts->t[i].name))
			return sq_bind_err(s, st, err, errlen);
		if (sqlite3_step(st) != SQLITE_ROW) {
			sq_db_err(s, err, errlen);
			sq_release(st);
			return -1;
		}
		stat[i].running = column_count(st, 0);
		stat[i].queued = column_count(st, 1);
		stat[i].concurrent = ts->t[i].concurrent;
		stat[i].last_start_ms = sqlite3_column_int64(st, 2);   /* none: NULL, 0 "never" */
		sq_release(st);
	}
	return 0;
}

/* The sizes of the oldest queued runs of each tenant that the choice may
 * look at (sched_want), into one array *out that the stats point into
 * (free it). */
static int read_sizes(struct store_sqlite *s, const struct tenants *ts, const char *node, struct sched_stat *stat,
		      unsigned n, struct sched_size **out, char *err, size_t errlen)
{
	size_t total = 0;
	for (size_t i = 0; i < ts->n; i++)
		total += sched_want(&stat[i], n);
	struct sched_size *sz = *out = calloc(total ? total : 1, sizeof(*sz));
	if (!sz)
		return errf(err, errlen, "state db: out of memory claiming runs");
	sqlite3_stmt *st = s->stmt[ST_SIZES];
	for (size_t i = 0; i < ts->n; i++) {
		unsigned want = sched_want(&stat[i], n);
		stat[i].next = sz;
		stat[i].nnext = 0;
		if (!want)
			continue;
		if (sq_bind_text(st, 1, ts->t[i].name) || sqlite3_bind_int64(st, 2, want) ||
		    sqlite3_bind_int64(st, 3, RUN_SPEC_DEFAULT_MEMORY_MIB) || sqlite3_bind_int64(st, 4, RUN_SPEC_DEFAULT_DISK_MIB) ||
		    sq_bind_text(st, 5, node))
			return sq_bind_err(s, st, err, errlen);
		int rc;
		while ((rc = sqlite3_step(st)) == SQLITE_ROW && stat[i].nnext < want) {
			sqlite3_int64 m = sqlite3_column_int64(st, 0), d = sqlite3_column_int64(st, 1);
			/* not a positive number: the run is not started here */
			if (m <= 0 || d <= 0)
				break;
			sz[stat[i].nnext++] = (struct sched_size){ (uint64_t)m, (uint64_t)d };
		}
		if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
			sq_db_err(s, err, errlen);
			sq_release(st);
			return -1;
		}
		sq_release(st);
		sz += stat[i].nnext;
	}
	return 0;
}

/* Tenant's oldest k queued runs -> running, held by node, appended to
 * out[*got..]. */
static int take(struct store_sqlite *s, const char *tenant, unsigned k, const char *node, int64_t now_ms,
		struct store_run *out, unsigned *got, unsigned cap, char *err, size_t errlen)
{
	sqlite3_stmt *st = s->stmt[ST_TAKE];
	if (sq_bind_text(st, 1, tenant) || sq_bind_text(st, 2, node) || sqlite3_bind_int64(st, 3, now_ms) ||
	    sqlite3_bind_int64(st, 4, k))
		return sq_bind_err(s, st, err, errlen);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (*got == cap) {   /* LIMIT makes this impossible; the bound is out's */
			sq_release(st);
			return errf(err, errlen, "state db: claimed more runs than asked");
		}
		if (read_row(st, &out[*got], err, errlen) < 0) {
			sq_release(st);
			return -1;
		}
		(*got)++;
	}
	rc = rc == SQLITE_DONE ? 0 : sq_db_err(s, err, errlen);
	sq_release(st);
	return rc;
}

static int by_seq(const void *a, const void *b)
{
	const struct store_run *x = a, *y = b;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

static int sq_claim(struct store *base, const char *node, unsigned n, const struct tenants *ts,
		    const struct sched_size *room, const struct sched_size *size, int64_t now_ms, struct store_run *out,
		    char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	if (sq_node_ok(node, err, errlen) < 0)
		return -1;
	if (!n || !ts->n)
		return 0;
	struct sched_stat *stat = calloc(ts->n, sizeof(*stat));
	unsigned *picks = calloc(ts->n, sizeof(*picks));
	struct sched_size *sizes = NULL;
	unsigned got = 0;
	int rc = -1;
	if (!stat || !picks) {
		errf(err, errlen, "state db: out of memory claiming runs");
		goto out;
	}
	if (sq_begin(s, err, errlen) < 0)
		goto out;
	if (read_stats(s, ts, stat, err, errlen) < 0)
		goto out;
	if (room && read_sizes(s, ts, node, stat, n, &sizes, err, errlen) < 0)
		goto out;
	sched_choose(stat, ts->n, n, room, size, picks);
	for (size_t i = 0; i < ts->n; i++)
		if (picks[i] && take(s, ts->t[i].name, picks[i], node, now_ms, out, &got, n, err, errlen) < 0)
			goto out;
	if (sq_commit(s, err, errlen) < 0)
		goto out;
	/* Acceptance order across tenants, as each tenant's already is. */
	qsort(out, got, sizeof(*out), by_seq);
	rc = (int)got;
out:
	if (rc < 0) {
		sq_rollback(s);
		for (unsigned i = 0; i < got; i++)
			store_run_free(&out[i]);
	}
	free(stat);
	free(picks);
	free(sizes);
	return rc;
}

static int sq_command(struct store *base, const char *id, const char *node, int64_t now_ms, char *err,
		      size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *st = s->stmt[ST_COMMAND];
	if (sq_bind_text(st, 1, id) || sq_bind_text(st, 2, node) || sqlite3_bind_int64(st, 3, now_ms))
		return sq_bind_err(s, st, err, errlen);
	int n = sq_step_write(s, st, err, errlen);
	return n < 0 ? -1 : n == 1;
}

static int sq_finish(struct store *base, const char *id, const char *node, enum run_state state, int64_t finished_ms,
		     const char *result, const struct run_outcome *outcome, const char *message, char *err,
		     size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *st = s->stmt[ST_FINISH];
	const char *name = store_state_name(state);
	if (!store_state_terminal(state))
		return errf(err, errlen, "state db: run %s: %s is not a terminal state", id, name ? name : "(invalid)");
	const char *oname, *term;
	char limits[12];
	store_outcome_cols(outcome, &oname, &term, limits);
	if (sq_bind_text(st, 1, id) || sq_bind_text(st, 2, name) || sqlite3_bind_int64(st, 3, finished_ms) ||
	    sq_bind_text(st, 4, result) || sq_bind_text(st, 5, message) || sq_bind_text(st, 6, node) ||
	    sq_bind_text(st, 7, oname) || sq_bind_text(st, 8, term) || sq_bind_text(st, 9, limits))
		return sq_bind_err(s, st, err, errlen);
	int n = sq_step_write(s, st, err, errlen);
	return n < 0 ? -1 : n == 1;
}

/* The read and the change in one transaction: a run claimed between them
 * would otherwise be ended as if still queued. */
static int sq_cancel(struct store *base, const char *id, const char *tenant, int64_t now_ms, char *node, char *err,
		     size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *st = s->stmt[ST_PEEK];
	if (node)
		node[0] = '\0';
	if (sq_begin(s, err, errlen) < 0)
		return -1;
	if (sq_bind_text(st, 1, id) || sq_bind_text(st, 2, tenant)) {
		sq_bind_err(s, st, err, errlen);
		goto fail;
	}
	int step = sqlite3_step(st);
	if (step == SQLITE_DONE) {
		sq_release(st);
		sq_rollback(s);
		return 0;
	}
	if (step != SQLITE_ROW) {
		sq_db_err(s, err, errlen);
		sq_release(st);
		goto fail;
	}
	int state = store_state_parse((const char *)sqlite3_column_text(st, 0));
	char holder[STORE_NODE_MAX];
	store_copy_text(holder, sizeof(holder), (const char *)sqlite3_column_text(st, 1));
	sq_release(st);
	int rc;
	if (state == RS_QUEUED) {
		st = s->stmt[ST_FINISH];
		if (sq_bind_text(st, 1, id) || sq_bind_text(st, 2, "cancelled") || sqlite3_bind_int64(st, 3, now_ms) ||
		    sq_bind_text(st, 4, NULL) || sq_bind_text(st, 5, STORE_MSG_CANCELLED_QUEUED) ||
		    sq_bind_text(st, 6, NULL)) {
			sq_bind_err(s, st, err, errlen);
			goto fail;
		}
		rc = 1;
	} else if (state == RS_RUNNING) {
		st = s->stmt[ST_MARK];
		if (sq_bind_text(st, 1, id)) {
			sq_bind_err(s, st, err, errlen);
			goto fail;
		}
		rc = 2;
	} else if (state >= 0) {
		sq_rollback(s);
		return 3;
	} else {
		errf(err, errlen, "state db: run %s has an unknown state", id);
		goto fail;
	}
	if (sq_step_write(s, st, err, errlen) < 0 || sq_commit(s, err, errlen) < 0)
		goto fail;
	if (rc == 2 && node)
		memcpy(node, holder, sizeof(holder));
	return rc;
fail:
	sq_rollback(s);
	return -1;
}

/* Grow a list of ids or rows by one place; -1 out of memory. */
int sq_grow(void **p, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 8;
	void *q = realloc(*p, c * size);
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

static int sq_heartbeat(struct store *base, const char *node, int64_t lease_ms, void (*fn)(void *ctx, const char *id),
			void *ctx, char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	if (sq_node_ok(node, err, errlen) < 0)
		return -1;
	int64_t now = sq_backend_now_ms();
	int64_t until = lease_ms > INT64_MAX - now ? INT64_MAX : now + lease_ms;
	sqlite3_stmt *st = s->stmt[ST_LEASE];
	if (sq_bind_text(st, 1, node) || sqlite3_bind_int64(st, 2, until))
		return sq_bind_err(s, st, err, errlen);
	if (sq_step_write(s, st, err, errlen) < 0)
		return -1;
	if (!fn)
		return 0;
	/* The ids first, fn after: fn may well call the store. */
	st = s->stmt[ST_ASKED];
	char (*ids)[STORE_ID_LEN + 1] = NULL;
	size_t n = 0, cap = 0;
	int rc;
	if (sq_bind_text(st, 1, node))
		return sq_bind_err(s, st, err, errlen);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (sq_grow((void **)&ids, &cap, n, sizeof(*ids)) < 0) {
			sq_release(st);
			free(ids);
			return errf(err, errlen, "state db: out of memory");
		}
		store_copy_text(ids[n++], sizeof(*ids), (const char *)sqlite3_column_text(st, 0));
	}
	rc = rc == SQLITE_DONE ? 0 : sq_db_err(s, err, errlen);
	sq_release(st);
	for (size_t i = 0; rc == 0 && i < n; i++)
		fn(ctx, ids[i]);
	free(ids);
	return rc;
}

/* One dead node's run to where expire sends it, in the open transaction;
 * *run becomes the row as it is now. 1 changed, 0 not, -1 error. */
static int expire_one(struct store_sqlite *s, struct store_run *run, int64_t now_ms, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	char msg[sizeof(run->message)];
	enum run_state to;
	bool pinned = store_run_pinned_to(run, run->node);
	if (!run->cancel && !run->command_ms && !pinned) {
		st = s->stmt[ST_REQUEUE];
		if (sq_bind_text(st, 1, run->id) || sq_bind_text(st, 2, run->node))
			return sq_bind_err(s, st, err, errlen);
		to = RS_QUEUED;
	} else {
		to = run->cancel ? RS_CANCELLED : RS_LOST;
		snprintf(msg, sizeof(msg),
			 run->cancel ? STORE_MSG_CANCELLED_NODE : !run->command_ms && pinned ? STORE_MSG_LOST_CHECKPOINT
											 : STORE_MSG_LOST_NODE,
			 run->node);
		st = s->stmt[ST_FINISH];
		if (sq_bind_text(st, 1, run->id) || sq_bind_text(st, 2, store_state_name(to)) ||
		    sqlite3_bind_int64(st, 3, now_ms) || sq_bind_text(st, 4, NULL) || sq_bind_text(st, 5, msg) ||
		    sq_bind_text(st, 6, run->node))
			return sq_bind_err(s, st, err, errlen);
	}
	int n = sq_step_write(s, st, err, errlen);
	if (n <= 0)
		return n;
	run->state = to;
	if (to == RS_QUEUED) {
		run->node[0] = '\0';
		run->started_ms = 0;
	} else {
		run->finished_ms = now_ms;
		free(run->result);
		run->result = NULL;
		memcpy(run->message, msg, sizeof(msg));
	}
	return 1;
}

static int sq_expire(struct store *base, const char *node, int64_t now_ms,
		     void (*fn)(void *ctx, const struct store_run *run), void *ctx, char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *st = s->stmt[ST_DEAD];
	struct store_run *runs = NULL;
	size_t n = 0, cap = 0;
	int changed = 0, rc;
	if (sq_begin(s, err, errlen) < 0)
		return -1;
	if (sq_bind_text(st, 1, node) || sqlite3_bind_int64(st, 2, sq_backend_now_ms())) {
		sq_bind_err(s, st, err, errlen);
		goto fail;
	}
	/* All of them read before any changes: ST_DEAD's own rows change. */
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (sq_grow((void **)&runs, &cap, n, sizeof(*runs)) < 0) {
			errf(err, errlen, "state db: out of memory");
			sq_release(st);
			goto fail;
		}
		if (read_row(st, &runs[n], err, errlen) < 0) {
			sq_release(st);
			goto fail;
		}
		n++;
	}
	if (rc != SQLITE_DONE) {
		sq_db_err(s, err, errlen);
		sq_release(st);
		goto fail;
	}
	sq_release(st);
	/* Changed rows first, so that fn sees only those. */
	for (size_t i = 0; i < n; i++) {
		struct store_run tmp;
		rc = expire_one(s, &runs[i], now_ms, err, errlen);
		if (rc < 0)
			goto fail;
		if (rc == 1) {
			tmp = runs[changed];
			runs[changed++] = runs[i];
			runs[i] = tmp;
		}
	}
	if (sq_commit(s, err, errlen) < 0)
		goto fail;
	for (int i = 0; fn && i < changed; i++)
		fn(ctx, &runs[i]);
	for (size_t i = 0; i < n; i++)
		store_run_free(&runs[i]);
	free(runs);
	return changed;
fail:
	sq_rollback(s);
	for (size_t i = 0; i < n; i++)
		store_run_free(&runs[i]);
	free(runs);
	return -1;
}

/* The oldest run in state after seq: 1 and a copy in *out, 0 none, -1. */
static int next_in_state(struct store_sqlite *s, const char *state, int64_t after, struct store_run *out, char *err,
			 size_t errlen)
{
	sqlite3_stmt *st = s->stmt[ST_EACH];
	if (sq_bind_text(st, 1, state) || sqlite3_bind_int64(st, 2, after)) {
		memset(out, 0, sizeof(*out));
		return sq_bind_err(s, st, err, errlen);
	}
	return fetch_one(s, st, out, err, errlen);
}

/* A query per run rather than one open over the walk: an open read would
 * hold back the commit of whatever fn writes (autocommit ends only with the
 * last open statement), so "durable when it returns" would not hold, and
 * fn could not walk again itself. With the (state, seq) index each query is
 * one lookup. */
static int sq_each(struct store *base, enum run_state state, int (*fn)(void *ctx, const struct store_run *run),
		   void *ctx, char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	const char *name = store_state_name(state);
	if (!name)
		return errf(err, errlen, "state db: no state %d", (int)state);
	int64_t after = INT64_MIN;
	for (;;) {
		struct store_run row;
		int rc = next_in_state(s, name, after, &row, err, errlen);
		if (rc <= 0)
			return rc;
		after = row.seq;
		rc = fn(ctx, &row);
		store_run_free(&row);
		if (rc)
			return rc;
	}
}

/* Prepared here, not kept: a listing is a client's page, not the
 * scheduler's every tick. The count and the page in one read
 * transaction, so that they agree. */
static int sq_list(struct store *base, const char *tenant, const char *client, uint64_t offset, unsigned limit,
		   struct store_run **out, unsigned *n, uint64_t *total, char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *cnt = NULL, *page = NULL;
	char like[STORE_CLIENT_NAME_MAX + 24];
	int rc = -1;
	*out = NULL;
	*n = 0;
	*total = 0;
	if (store_client_like(client, like, sizeof(like)))
		return errf(err, errlen, "state db: no client named so");
	if (offset > INT64_MAX)
		offset = INT64_MAX;
	if (sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
		return sq_db_err(s, err, errlen);
	if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM runs WHERE tenant = ?1 AND request LIKE ?4", -1, &cnt,
			       NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db,
			       "SELECT " STORE_COLS " FROM runs WHERE tenant = ?1 AND request LIKE ?4"
			       " ORDER BY seq DESC LIMIT ?2 OFFSET ?3",
			       -1, &page, NULL) != SQLITE_OK) {
		sq_db_err(s, err, errlen);
		goto out;
	}
	if (sq_bind_text(cnt, 1, tenant) || sq_bind_text(cnt, 4, like) || sq_bind_text(page, 1, tenant) ||
	    sqlite3_bind_int64(page, 2, limit) || sqlite3_bind_int64(page, 3, (int64_t)offset) ||
	    sq_bind_text(page, 4, like)) {
		sq_db_err(s, err, errlen);
		goto out;
	}
	if (sqlite3_step(cnt) != SQLITE_ROW) {
		sq_db_err(s, err, errlen);
		goto out;
	}
	*total = (uint64_t)sqlite3_column_int64(cnt, 0);
	if (limit && !(*out = calloc(limit, sizeof(**out)))) {
		errf(err, errlen, "state db: out of memory");
		goto out;
	}
	int step = SQLITE_DONE;
	while (*n < limit && (step = sqlite3_step(page)) == SQLITE_ROW) {
		if (read_row(page, &(*out)[*n], err, errlen) < 0)
			goto out;
		(*n)++;
	}
	if (*n < limit && step != SQLITE_DONE) {
		sq_db_err(s, err, errlen);
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(cnt);
	sqlite3_finalize(page);
	sqlite3_exec(s->db, rc ? "ROLLBACK" : "COMMIT", NULL, NULL, NULL);
	if (rc) {
		store_runs_free(*out, *n);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

static int sq_count(struct store *base, uint64_t count[RS_COUNT], char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *st = s->stmt[ST_COUNT];
	memset(count, 0, RS_COUNT * sizeof(count[0]));
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int state = store_state_parse((const char *)sqlite3_column_text(st, 0));
		if (state < 0) {
			sq_release(st);
			return errf(err, errlen, "state db: a run has an unknown state");
		}
		count[state] += (uint64_t)sqlite3_column_int64(st, 1);
	}
	rc = rc == SQLITE_DONE ? 0 : sq_db_err(s, err, errlen);
	sq_release(st);
	return rc;
}

static int sq_put_blob(struct store *base, const char *id, const char *name, const uint8_t *data, size_t len,
		       char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	if (!store_blob_name_ok(name)) {
		/* The name came from a guest's file list: printable only, so
		 * that the message stays one line. */
		char shown[65];
		errmsg_printable(shown, sizeof(shown), name);
		return errf(err, errlen, "state db: run %s: blob name \"%s\" is not output or artifacts/ and a relative path",
			    id, shown);
	}
	if ((uint64_t)len > INT_MAX)
		return errf(err, errlen, "state db: run %s: blob %s is over %d bytes", id, name, INT_MAX);
	sqlite3_stmt *st = s->stmt[ST_PUT_BLOB];
	/* A zero-length blob binds as one, not as NULL (which data NULL
	 * would bind, and NOT NULL refuse). */
	int brc = len ? sqlite3_bind_blob(st, 3, data, (int)len, SQLITE_STATIC) : sqlite3_bind_zeroblob(st, 3, 0);
	if (sq_bind_text(st, 1, id) || sq_bind_text(st, 2, name) || brc)
		return sq_bind_err(s, st, err, errlen);
	int n = sq_step_write(s, st, err, errlen);
	if (n < 0)
		return -1;
	if (n == 0)
		return errf(err, errlen, "state db: run %s: no such run for blob %s", id, name);
	return 0;
}

/* One blob of run id after name (NULL: the first) as malloc'd copies: 1,
 * 0 none left, -1. */
static int next_blob(struct store_sqlite *s, const char *id, const char *after, char **name, uint8_t **data,
		     size_t *len, char *err, size_t errlen)
{
	sqlite3_stmt *st = s->stmt[ST_BLOB];
	*name = NULL;
	*data = NULL;
	*len = 0;
	/* "" sorts before every name, and no name is "". */
	if (sq_bind_text(st, 1, id) || sq_bind_text(st, 2, after ? after : ""))
		return sq_bind_err(s, st, err, errlen);
	int rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		rc = rc == SQLITE_DONE ? 0 : sq_db_err(s, err, errlen);
		sq_release(st);
		return rc;
	}
	const unsigned char *text = sqlite3_column_text(st, 0);
	const void *blob = sqlite3_column_blob(st, 1);
	int n = sqlite3_column_bytes(st, 1);
	*name = text ? strdup((const char *)text) : NULL;
	*data = malloc(n > 0 ? (size_t)n : 1);
	if (!*name || !*data) {
		sq_release(st);
		free(*name);
		free(*data);
		*name = NULL;
		*data = NULL;
		return errf(err, errlen, "state db: out of memory reading blobs of run %s", id);
	}
	if (n > 0)
		memcpy(*data, blob, (size_t)n);
	*len = (size_t)(n > 0 ? n : 0);
	sq_release(st);
	return 1;
}

/* Copies, one query per blob, so that no read is open while fn runs: as
 * in each, fn may then call the store and what it writes commits. */
static int sq_blobs(struct store *base, const char *id,
		    int (*fn)(void *ctx, const char *name, const uint8_t *data, size_t len), void *ctx, char *err,
		    size_t errlen)
{
	struct store_sqlite *s = backend(base);
	char *prev = NULL;
	for (;;) {
		char *name;
		uint8_t *data;
		size_t len;
		int rc = next_blob(s, id, prev, &name, &data, &len, err, errlen);
		free(prev);
		if (rc <= 0)
			return rc;
		rc = fn(ctx, name, data, len);
		free(data);
		prev = name;
		if (rc) {
			free(prev);
			return rc;
		}
	}
}

static long sq_drop_blobs(struct store *base, int64_t before_ms, char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *st = s->stmt[ST_DROP_BLOBS];
	if (sqlite3_bind_int64(st, 1, before_ms))
		return sq_bind_err(s, st, err, errlen);
	return sq_step_write(s, st, err, errlen);
}

static long sq_drop_runs(struct store *base, int64_t before_ms, char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	int n = -1;
	if (sq_begin(s, err, errlen) < 0)
		return -1;
	/* their blobs and their keys first, which name them */
	static const int with_run[] = { ST_DROP_RUN_BLOBS, ST_DROP_RUN_IDEM };
	for (size_t i = 0; i < sizeof(with_run) / sizeof(with_run[0]); i++) {
		sqlite3_stmt *st = s->stmt[with_run[i]];
		if (sqlite3_bind_int64(st, 1, before_ms)) {
			sq_bind_err(s, st, err, errlen);
			goto fail;
		}
		if (sq_step_write(s, st, err, errlen) < 0)
			goto fail;
	}
	sqlite3_stmt *st;
	st = s->stmt[ST_DROP_RUNS];
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

/* One node: the daemon itself made every change there is to hear of. */
static int sq_note_fd(struct store *base)
{
	(void)base;
	return -1;
}

static int sq_notes(struct store *base, store_note_fn fn, void *ctx, char *err, size_t errlen)
{
	(void)base, (void)fn, (void)ctx, (void)err, (void)errlen;
	return 0;
}

/* Also the cleanup of a half-done open: every field may still be NULL. */
static void sq_close(struct store *base)
{
	struct store_sqlite *s = backend(base);
	for (int i = 0; i < ST_N; i++)
		sqlite3_finalize(s->stmt[i]);
	for (int i = 0; i < SB_N; i++)
		sqlite3_finalize(s->sbx[i]);
	sqlite3_close(s->db);
	free(s);
}

static const struct store_ops sqlite_ops = {
	.submit = sq_submit,
	.get = sq_get,
	.claim = sq_claim,
	.command = sq_command,
	.finish = sq_finish,
	.cancel = sq_cancel,
	.heartbeat = sq_heartbeat,
	.expire = sq_expire,
	.each = sq_each,
	.list = sq_list,
	.count = sq_count,
	.put_blob = sq_put_blob,
	.blobs = sq_blobs,
	.drop_blobs = sq_drop_blobs,
	.drop_runs = sq_drop_runs,
	.note_fd = sq_note_fd,
	.notes = sq_notes,
	.sbx_create = sq_sbx_create,
	.sbx_get = sq_sbx_get,
	.sbx_set = sq_sbx_set,
	.sbx_move = sq_sbx_move,
	.sbx_each = sq_sbx_each,
	.sbx_lost = sq_sbx_lost,
	.sbx_drop = sq_sbx_drop,
	.close = sq_close,
};

static int prepare_all(struct store_sqlite *s, const char *path, char *err, size_t errlen)
{
	for (int i = 0; i < ST_N + SB_N; i++) {
		const char *sql = i < ST_N ? stmt_sql[i] : store_sqlite_sbx_sql[i - ST_N];
		sqlite3_stmt **st = i < ST_N ? &s->stmt[i] : &s->sbx[i - ST_N];
		if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
			return errf(err, errlen, "state db %s: %s", path, sqlite3_errmsg(s->db));
	}
	return 0;
}

struct store *store_sqlite_open(const char *path, char *err, size_t errlen)
{
	struct store_sqlite *s = calloc(1, sizeof(*s));
	if (!s) {
		errf(err, errlen, "state db %s: out of memory", path);
		return NULL;
	}
	s->base.ops = &sqlite_ops;
	int rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	if (rc != SQLITE_OK) {
		/* No handle at all only when out of memory. */
		errf(err, errlen, "state db %s: %s", path, s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		goto fail;
	}
	if (store_sqlite_setup(s->db, path, err, errlen) < 0 || prepare_all(s, path, err, errlen) < 0)
		goto fail;
	return &s->base;
fail:
	sq_close(&s->base);
	return NULL;
}
