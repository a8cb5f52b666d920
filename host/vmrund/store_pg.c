/* The PostgreSQL store: one server that any number of vmrund nodes share.
 * Two connections: one for the calls, one that LISTENs on channel vmrun
 * for what other nodes did (note_fd, notes). Every call is one
 * transaction (one statement, or BEGIN ... COMMIT), so a call's change is
 * durable, and its notification sent, when it returns; the decisions that
 * must hold for the whole cluster (admission, which runs start, which
 * node holds one) are taken inside that transaction, under an advisory
 * lock where two nodes must not decide at once. Leases are measured on
 * the server's clock. A connection that broke is reset by the next call;
 * the call that found it broken returns -1. The sandboxes' calls are
 * store_pg_sandbox.c's. */
#include "store_pg.h"

#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "errmsg.h"
#include "run_spec.h"
#include "scheduler.h"

static struct store_pg *backend(struct store *s)
{
	return (struct store_pg *)s;
}

/* ---- the calls --------------------------------------------------------- */

/* Admissions serialize on LOCK_SUBMIT, so that two nodes cannot both
 * count the last place free: the counts are a statement after the lock,
 * so that (read committed) they see every admission committed before it. */
/* idem's key as the tenant used it within its time: STORE_REPLAYED (the
 * run into idem->id) or STORE_KEY_REUSED, 0 when it was not, -1 error.
 * Under submit's lock, so two nodes cannot both find it unused. */
static int idem_lookup(struct store_pg *s, const struct store_run *run, struct store_idem *idem, char *err,
		       size_t errlen)
{
	char since[24];
	pg_fmt_i64(since, sizeof(since), run->created_ms - STORE_IDEM_TTL_MS);
	const char *const v[] = { run->tenant, idem->key, since };
	PGresult *res = pg_exec_sql(s, "looking up an idempotency key",
				    "SELECT hash, id FROM idem WHERE tenant = $1 AND key = $2 AND created_ms > $3::bigint",
				    3, v, err, errlen);
	if (!res)
		return -1;
	int rc = 0;
	if (PQntuples(res) == 1) {
		store_copy_text(idem->id, sizeof(idem->id), PQgetvalue(res, 0, 1));
		rc = strcmp(PQgetvalue(res, 0, 0), idem->hash) ? STORE_KEY_REUSED : STORE_REPLAYED;
	}
	PQclear(res);
	return rc;
}

static int pg_submit(struct store *base, const struct store_run *run, struct store_idem *idem,
		     const struct tenant *lim, unsigned queue_max, char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	if (pg_ensure(s, err, errlen) < 0 || pg_begin(s, err, errlen) < 0)
		return -1;
	int rc = -1;
	if (pg_exec_cmd(s, "admission lock", "SELECT pg_advisory_xact_lock(" LOCK_SUBMIT ")", 0, NULL, err, errlen) < 0)
		goto out;
	if (idem && (rc = idem_lookup(s, run, idem, err, errlen)) != 0)
		goto out;   /* a replay or a reuse: nothing written */
	rc = -1;
	const char *const cv[] = { run->tenant };
	PGresult *res = pg_exec_sql(s, "counting open runs",
				    "SELECT count(*) FILTER (WHERE tenant = $1),"
				    " count(*) FILTER (WHERE state = 'queued')"
				    " FROM runs WHERE state IN ('queued', 'running')",
				    1, cv, err, errlen);
	if (!res)
		goto out;
	unsigned open = pg_get_count(res, 0, 0), queued = pg_get_count(res, 0, 1);
	PQclear(res);
	rc = (int)sched_admit(lim, open, queued, queue_max);
	if (rc != SCHED_ACCEPT)
		goto out;
	char created[24];
	pg_fmt_i64(created, sizeof(created), run->created_ms);
	const char *const iv[] = { run->id, run->tenant, created, run->request };
	PGresult *failed;
	res = pg_exec_full(s, "queueing run",
			   "WITH r AS (INSERT INTO runs (id, tenant, state, created_ms, request)"
			   " VALUES ($1, $2, 'queued', $3, $4) RETURNING id)"
			   " SELECT pg_notify('" CHANNEL "', 'queued:' || id) FROM r",
			   4, iv, NULL, NULL, 0, &failed, err, errlen);
	if (!res) {
		if (pg_sqlstate_is(failed, "23505"))   /* unique_violation: the id */
			errf(err, errlen, "store: run %s exists already", run->id);
		PQclear(failed);
		rc = -1;
		goto out;
	}
	PQclear(res);
	if (idem) {
		/* a row past its time is taken over */
		const char *const kv[] = { run->tenant, idem->key, idem->hash, run->id, created };
		if (pg_exec_cmd(s, "keeping an idempotency key",
				"INSERT INTO idem (tenant, key, hash, id, created_ms) VALUES ($1, $2, $3, $4, $5)"
				" ON CONFLICT (tenant, key) DO UPDATE SET hash = excluded.hash, id = excluded.id,"
				" created_ms = excluded.created_ms",
				5, kv, err, errlen) < 0) {
			rc = -1;
			goto out;
		}
	}
out:
	return pg_end_tx(s, rc, err, errlen);
}

static int pg_get(struct store *base, const char *id, const char *tenant, struct store_run *out, char *err,
		  size_t errlen)
{
	struct store_pg *s = backend(base);
	memset(out, 0, sizeof(*out));
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	const char *const v[] = { id, tenant };
	PGresult *res = pg_exec_sql(s, "reading run",
				    "SELECT " STORE_COLS " FROM runs"
				    " WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)",
				    2, v, err, errlen);
	if (!res)
		return -1;
	int rc = PQntuples(res) == 0 ? 0 : pg_read_row(res, 0, out, err, errlen) < 0 ? -1 : 1;
	PQclear(res);
	return rc;
}

static int by_seq(const void *a, const void *b)
{
	int64_t x = ((const struct store_run *)a)->seq, y = ((const struct store_run *)b)->seq;
	return (x > y) - (x < y);
}

/* The sizes of the oldest queued runs of each tenant that the choice may
 * look at (sched_want) and node may take (a verification run only on the
 * node with its checkpoint), into one array *out that the stats point into
 * (free it). Locked as the claim's own pick locks them, skipping rows a
 * cancel holds, so that the runs sized are the runs then taken. */
static int pg_sizes(struct store_pg *s, const struct tenants *ts, const char *node, struct sched_stat *st, unsigned n,
		    struct sched_size **out, char *err, size_t errlen)
{
	size_t total = 0;
	for (size_t i = 0; i < ts->n; i++)
		total += sched_want(&st[i], n);
	struct sched_size *sz = *out = calloc(total ? total : 1, sizeof(*sz));
	if (!sz)
		return errf(err, errlen, "store: out of memory claiming runs");
	char mem[24], disk[24];
	snprintf(mem, sizeof(mem), "%d", RUN_SPEC_DEFAULT_MEMORY_MIB);
	snprintf(disk, sizeof(disk), "%d", RUN_SPEC_DEFAULT_DISK_MIB);
	for (size_t i = 0; i < ts->n; i++) {
		unsigned want = sched_want(&st[i], n);
		st[i].next = sz;
		st[i].nnext = 0;
		if (!want)
			continue;
		char limit[16];
		snprintf(limit, sizeof(limit), "%u", want);
		const char *const v[] = { ts->t[i].name, limit, mem, disk, node };
		PGresult *res = pg_exec_sql(s, "sizing queued runs",
					    "SELECT coalesce((request::json #>> '{limits,memory_mib}')::bigint, $3::bigint),"
					    " coalesce((request::json #>> '{limits,disk_mib}')::bigint, $4::bigint)"
					    " FROM runs WHERE state = 'queued' AND tenant = $1"
					    " AND coalesce(request::json ->> 'checkpoint_node', $5) = $5 ORDER BY seq LIMIT $2"
					    " FOR UPDATE SKIP LOCKED",
					    5, v, err, errlen);
		if (!res)
			return -1;
		for (int r = 0; r < PQntuples(res) && st[i].nnext < want; r++) {
			int64_t m = pg_get_i64(res, r, 0), d = pg_get_i64(res, r, 1);
			if (m <= 0 || d <= 0)
				break;   /* not a size: the run is not started here */
			sz[st[i].nnext++] = (struct sched_size){ (uint64_t)m, (uint64_t)d };
		}
		PQclear(res);
		sz += st[i].nnext;
	}
	return 0;
}

/* Claims serialize on LOCK_CLAIM across every node: the counts the
 * choice is made over are read after the lock, so no two nodes both see
 * a tenant one under its concurrency and both start a run of it; a
 * tenant's concurrency holds for the whole cluster. Claims are short (a
 * few statements), so the lock is too, but a claim may still wait on
 * another node's: started_ms is now_ms plus that wait, the moment the
 * run was counted, so that it never falls before the end of a run whose
 * place it took (finished on another node while this one waited). */
static int pg_claim(struct store *base, const char *node, unsigned n, const struct tenants *ts,
		    const struct sched_size *room, const struct sched_size *size, int64_t now_ms, struct store_run *out,
		    char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	if (n == 0 || ts->n == 0)
		return 0;
	if (n > INT_MAX)
		n = INT_MAX;
	struct sched_stat *st = calloc(ts->n, sizeof(*st));
	unsigned *picks = calloc(ts->n, sizeof(*picks));
	struct sched_size *sizes = NULL;
	if (!st || !picks) {
		free(st);
		free(picks);
		return errf(err, errlen, "store: out of memory claiming runs");
	}
	int got = 0, rc = -1;
	int64_t asked_us = clock_mono_us();
	if (pg_ensure(s, err, errlen) < 0 || pg_begin(s, err, errlen) < 0)
		goto out;
	if (pg_exec_cmd(s, "claim lock", "SELECT pg_advisory_xact_lock(" LOCK_CLAIM ")", 0, NULL, err, errlen) < 0)
		goto out;
	now_ms += (clock_mono_us() - asked_us + 999) / 1000;   /* up: never before the lock */
	/* Per tenant with runs open: running, queued, and its last start over
	 * all its runs (an index lookup each, on (tenant, started_ms)). */
	PGresult *res = pg_exec_sql(s, "counting runs",
				    "SELECT o.tenant, o.running, o.queued,"
				    " (SELECT max(started_ms) FROM runs r WHERE r.tenant = o.tenant)"
				    " FROM (SELECT tenant, count(*) FILTER (WHERE state = 'running') AS running,"
				    " count(*) FILTER (WHERE state = 'queued') AS queued"
				    " FROM runs WHERE state IN ('queued', 'running') GROUP BY tenant) o",
				    0, NULL, err, errlen);
	if (!res)
		goto out;
	for (size_t i = 0; i < ts->n; i++)
		st[i].concurrent = ts->t[i].concurrent;
	for (int r = 0; r < PQntuples(res); r++) {
		int t = tenants_by_name(ts, PQgetvalue(res, r, 0));
		if (t < 0)
			continue;   /* a tenant this node does not know: never claimed */
		st[t].running = pg_get_count(res, r, 1);
		st[t].queued = pg_get_count(res, r, 2);
		st[t].last_start_ms = pg_get_i64(res, r, 3);
	}
	PQclear(res);
	if (room && pg_sizes(s, ts, node, st, n, &sizes, err, errlen) < 0)
		goto out;
	sched_choose(st, ts->n, n, room, size, picks);
	char started[24];
	pg_fmt_i64(started, sizeof(started), now_ms);
	for (size_t i = 0; i < ts->n; i++) {
		if (!picks[i])
			continue;
		char limit[16];
		snprintf(limit, sizeof(limit), "%u", picks[i]);
		const char *const v[] = { ts->t[i].name, node, started, limit };
		/* SKIP LOCKED: a queued row that a cancel holds is passed over
		 * (it is ending) rather than waited on. MATERIALIZED so that the
		 * pick is made once, whatever the plan. */
		res = pg_exec_sql(s, "claiming runs",
				  "WITH picked AS MATERIALIZED (SELECT seq AS pick FROM runs"
				  " WHERE state = 'queued' AND tenant = $1"
				  " AND coalesce(request::json ->> 'checkpoint_node', $2) = $2 ORDER BY seq LIMIT $4"
				  " FOR UPDATE SKIP LOCKED),"
				  " claimed AS (UPDATE runs SET state = 'running', node = $2, started_ms = $3,"
				  " command_ms = NULL, cancel = false FROM picked"
				  " WHERE runs.seq = picked.pick AND runs.state = 'queued' RETURNING " STORE_COLS ")"
				  " SELECT " STORE_COLS " FROM claimed ORDER BY seq",
				  4, v, err, errlen);
		if (!res)
			goto out;
		for (int r = 0; r < PQntuples(res) && got < (int)n; r++) {
			if (pg_read_row(res, r, &out[got], err, errlen) < 0) {
				PQclear(res);
				goto out;
			}
			got++;
		}
		PQclear(res);
	}
	rc = 0;
out:
	rc = pg_end_tx(s, rc, err, errlen);
	if (rc < 0) {
		for (int i = 0; i < got; i++)
			store_run_free(&out[i]);
	} else {
		qsort(out, (size_t)got, sizeof(*out), by_seq);
		rc = got;
	}
	free(st);
	free(picks);
	free(sizes);
	return rc;
}

/* One statement: it waits on a cancel or expire that holds the row, then
 * looks at the row they left (read committed), so that a cancel asked or
 * a requeue first means no. */
static int pg_command(struct store *base, const char *id, const char *node, int64_t now_ms, char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	char now[24];
	pg_fmt_i64(now, sizeof(now), now_ms);
	const char *const v[] = { id, node, now };
	PGresult *res = pg_exec_sql(s, "recording the command's start",
				    "UPDATE runs SET command_ms = $3"
				    " WHERE id = $1 AND state = 'running' AND node = $2 AND NOT cancel",
				    3, v, err, errlen);
	if (!res)
		return -1;
	int rc = !strcmp(PQcmdTuples(res), "1");
	PQclear(res);
	return rc;
}

static int pg_finish(struct store *base, const char *id, const char *node, enum run_state state, int64_t finished_ms,
		     const char *result, const struct run_outcome *outcome, const char *message, char *err,
		     size_t errlen)
{
	struct store_pg *s = backend(base);
	const char *name = store_state_name(state);
	if (!store_state_terminal(state))
		return errf(err, errlen, "store: run %s: %s is not a terminal state", id, name ? name : "(invalid)");
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	char fin[24];
	pg_fmt_i64(fin, sizeof(fin), finished_ms);
	const char *oname, *term;
	char limits[12];
	store_outcome_cols(outcome, &oname, &term, limits);
	const char *const v[] = { id, name, fin, result, message, node, oname, term, limits };
	PGresult *res = pg_exec_sql(s, "ending run",
				    "WITH e AS (UPDATE runs SET state = $2, finished_ms = $3, result = $4, message = $5,"
				    " outcome = $7, termination = $8, limits_hit = $9::integer"
				    " WHERE id = $1 AND state IN ('queued', 'running')"
				    " AND ($6::text IS NULL OR (state = 'running' AND node = $6)) RETURNING id)"
				    " SELECT pg_notify('" CHANNEL "', 'ended:' || id) FROM e",
				    9, v, err, errlen);
	if (!res)
		return -1;
	int rc = PQntuples(res) == 1;
	PQclear(res);
	return rc;
}

/* The row is locked first, so that a claim that holds it (queued) ends
 * before this decides, and this sees it running. */
static int pg_cancel(struct store *base, const char *id, const char *tenant, int64_t now_ms, char *node, char *err,
		     size_t errlen)
{
	struct store_pg *s = backend(base);
	if (node)
		node[0] = '\0';
	if (pg_ensure(s, err, errlen) < 0 || pg_begin(s, err, errlen) < 0)
		return -1;
	int rc = -1;
	const char *const v[] = { id, tenant };
	PGresult *res = pg_exec_sql(s, "reading run",
				    "SELECT state, node FROM runs WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)"
				    " FOR UPDATE",
				    2, v, err, errlen);
	if (!res)
		goto out;
	if (PQntuples(res) == 0) {
		PQclear(res);
		rc = 0;
		goto out;
	}
	int state = store_state_parse(PQgetvalue(res, 0, 0));
	char holder[STORE_NODE_MAX];
	store_copy_text(holder, sizeof(holder), PQgetvalue(res, 0, 1));
	PQclear(res);
	if (state == RS_QUEUED) {
		char now[24];
		pg_fmt_i64(now, sizeof(now), now_ms);
		const char *const qv[] = { id, now };
		rc = pg_exec_cmd(s, "cancelling run",
				 "WITH e AS (UPDATE runs SET state = 'cancelled', finished_ms = $2,"
				 " message = '" STORE_MSG_CANCELLED_QUEUED "' WHERE id = $1 RETURNING id)"
				 " SELECT pg_notify('" CHANNEL "', 'ended:' || id) FROM e",
				 2, qv, err, errlen) < 0 ? -1 : 1;
	} else if (state == RS_RUNNING) {
		const char *const rv[] = { id };
		rc = pg_exec_cmd(s, "cancelling run",
				 "WITH c AS (UPDATE runs SET cancel = true WHERE id = $1 RETURNING id)"
				 " SELECT pg_notify('" CHANNEL "', 'cancel:' || id) FROM c",
				 1, rv, err, errlen) < 0 ? -1 : 2;
		if (rc == 2 && node)
			memcpy(node, holder, sizeof(holder));
	} else if (state >= 0) {
		rc = 3;
	} else {
		errf(err, errlen, "store: run %s has an unknown state", id);
	}
out:
	rc = pg_end_tx(s, rc, err, errlen);
	if (rc != 2 && node)
		node[0] = '\0';
	return rc;
}

static int pg_heartbeat(struct store *base, const char *node, int64_t lease_ms,
			void (*fn)(void *ctx, const char *id), void *ctx, char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	char lease[24];
	pg_fmt_i64(lease, sizeof(lease), lease_ms);
	const char *const v[] = { node, lease };
	if (pg_exec_cmd(s, "renewing the lease",
			"INSERT INTO nodes (name, lease_until_ms)"
			" VALUES ($1, least(" NOW_MS "::numeric + $2::bigint, 9223372036854775807)::bigint)"
			" ON CONFLICT (name) DO UPDATE SET lease_until_ms = excluded.lease_until_ms",
			2, v, err, errlen) < 0)
		return -1;
	if (!fn)
		return 0;
	PGresult *res = pg_exec_sql(s, "reading cancels",
				    "SELECT id FROM runs WHERE state = 'running' AND node = $1 AND cancel"
				    " ORDER BY seq",
				    1, v, err, errlen);
	if (!res)
		return -1;
	/* The rows are all here: no query is open while fn runs. */
	for (int r = 0; r < PQntuples(res); r++)
		fn(ctx, PQgetvalue(res, r, 0));
	PQclear(res);
	return 0;
}

/* One statement, so one snapshot and one commit: the dead nodes, and
 * every running run of theirs changed by one UPDATE, whose RETURNING is
 * what this call changed and nothing else (a node expiring at the same
 * time waits on the rows, then finds them no longer running). The
 * notifications go with it; fn runs after the commit. */
/* A verification run is never requeued from the node that holds its
 * checkpoint: no other may take it (store.h's STORE_MSG_LOST_CHECKPOINT). */
#define EXPIRE_PINNED "coalesce(request::json ->> 'checkpoint_node', '') = node"
#define EXPIRE_REQUEUE "(command_ms IS NULL AND NOT cancel AND NOT " EXPIRE_PINNED ")"
#define EXPIRE_SQL(nodes)                                                                                      \
	"WITH changed AS (UPDATE runs SET"                                                                     \
	" state = CASE WHEN " EXPIRE_REQUEUE " THEN 'queued' WHEN cancel THEN 'cancelled' ELSE 'lost' END,"  \
	" node = CASE WHEN " EXPIRE_REQUEUE " THEN '' ELSE node END,"                                        \
	" started_ms = CASE WHEN " EXPIRE_REQUEUE " THEN NULL ELSE started_ms END,"                          \
	" finished_ms = CASE WHEN " EXPIRE_REQUEUE " THEN NULL ELSE $1::bigint END,"                          \
	" message = CASE WHEN " EXPIRE_REQUEUE " THEN message"                                                \
	"  WHEN cancel THEN 'cancelled; node ' || node || ' stopped before it ended'"                         \
	"  WHEN command_ms IS NULL AND " EXPIRE_PINNED " THEN 'lost: node ' || node ||"                        \
	" ', which holds its checkpoint, stopped; no other node can run it'"                                   \
	"  ELSE 'lost: node ' || node || ' stopped while the run was running;"                                \
	" its command may have had effects, so it is not run again' END"                                      \
	" WHERE state = 'running' AND " nodes " RETURNING " STORE_COLS ")"                                     \
	" SELECT " STORE_COLS ", pg_notify('" CHANNEL "',"                                                     \
	" CASE WHEN state = 'queued' THEN 'queued:' ELSE 'ended:' END || id) FROM changed ORDER BY seq"

static int pg_expire(struct store *base, const char *node, int64_t now_ms,
		     void (*fn)(void *ctx, const struct store_run *run), void *ctx, char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	char now[24];
	pg_fmt_i64(now, sizeof(now), now_ms);
	const char *const v[] = { now, node };
	PGresult *res =
		node ? pg_exec_sql(s, "expiring runs", EXPIRE_SQL("node = $2"), 2, v, err, errlen)
		     : pg_exec_sql(s, "expiring runs",
				   EXPIRE_SQL("node IN (SELECT name FROM nodes"
					      " WHERE lease_until_ms < " NOW_MS ")"),
				   1, v, err, errlen);
	if (!res)
		return -1;
	int n = PQntuples(res);
	for (int r = 0; fn && r < n; r++) {
		struct store_run row;
		if (pg_read_row(res, r, &row, err, errlen) < 0)
			continue;   /* changed all the same; only this call's report of it is lost */
		fn(ctx, &row);
		store_run_free(&row);
	}
	PQclear(res);
	return n;
}

/* A query per run, after the last one seen, as the SQLite backend does:
 * no query is open while fn runs, so fn may call the store. */
static int pg_each(struct store *base, enum run_state state, int (*fn)(void *ctx, const struct store_run *run),
		   void *ctx, char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	const char *name = store_state_name(state);
	if (!name)
		return errf(err, errlen, "store: no state %d", (int)state);
	int64_t after = INT64_MIN;
	for (;;) {
		if (pg_ensure(s, err, errlen) < 0)
			return -1;
		char seq[24];
		pg_fmt_i64(seq, sizeof(seq), after);
		const char *const v[] = { name, seq };
		PGresult *res = pg_exec_sql(s, "walking runs",
					    "SELECT " STORE_COLS " FROM runs WHERE state = $1 AND seq > $2"
					    " ORDER BY seq LIMIT 1",
					    2, v, err, errlen);
		if (!res)
			return -1;
		if (PQntuples(res) == 0) {
			PQclear(res);
			return 0;
		}
		struct store_run row;
		int rc = pg_read_row(res, 0, &row, err, errlen);
		PQclear(res);
		if (rc < 0)
			return -1;
		after = row.seq;
		rc = fn(ctx, &row);
		store_run_free(&row);
		if (rc)
			return rc;
	}
}

/* The count and the page in one statement (a window over the tenant's
 * rows), so that they agree. */
static int pg_list(struct store *base, const char *tenant, const char *client, uint64_t offset, unsigned limit,
		   struct store_run **out, unsigned *n, uint64_t *total, char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	char off[24], lim[24], like[STORE_CLIENT_NAME_MAX + 24];
	*out = NULL;
	*n = 0;
	*total = 0;
	if (store_client_like(client, like, sizeof(like)))
		return errf(err, errlen, "store: no client named so");
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	pg_fmt_i64(off, sizeof(off), offset > INT64_MAX ? INT64_MAX : (int64_t)offset);
	pg_fmt_i64(lim, sizeof(lim), limit);
	const char *const v[] = { tenant, like, lim, off };
	PGresult *res = pg_exec_sql(s, "listing runs",
				    "SELECT " STORE_COLS ", (SELECT count(*) FROM runs WHERE tenant = $1 AND request LIKE $2)"
				    " FROM runs WHERE tenant = $1 AND request LIKE $2 ORDER BY seq DESC LIMIT $3 OFFSET $4",
				    4, v, err, errlen);
	if (!res)
		return -1;
	int rows = PQntuples(res), rc = 0;
	if (rows == 0) {
		/* past the last page: the count alone */
		PQclear(res);
		res = pg_exec_sql(s, "counting runs", "SELECT count(*) FROM runs WHERE tenant = $1 AND request LIKE $2", 2,
				  v, err, errlen);
		if (!res)
			return -1;
		*total = (uint64_t)strtoull(PQgetvalue(res, 0, 0), NULL, 10);
		PQclear(res);
		return 0;
	}
	*total = (uint64_t)strtoull(PQgetvalue(res, 0, PQnfields(res) - 1), NULL, 10);   /* the count, last */
	if (!(*out = calloc((size_t)rows, sizeof(**out)))) {
		PQclear(res);
		return errf(err, errlen, "store: out of memory");
	}
	for (int i = 0; i < rows && !rc; i++) {
		rc = pg_read_row(res, i, &(*out)[i], err, errlen);
		if (!rc)
			(*n)++;
	}
	PQclear(res);
	if (rc) {
		store_runs_free(*out, *n);
		*out = NULL;
		*n = 0;
		return -1;
	}
	return 0;
}

static int pg_count(struct store *base, uint64_t count[RS_COUNT], char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	memset(count, 0, RS_COUNT * sizeof(count[0]));
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	PGresult *res = pg_exec_sql(s, "counting runs", "SELECT state, count(*) FROM runs GROUP BY state", 0, NULL, err,
				    errlen);
	if (!res)
		return -1;
	int rc = 0;
	for (int r = 0; r < PQntuples(res); r++) {
		int state = store_state_parse(PQgetvalue(res, r, 0));
		if (state < 0) {
			rc = errf(err, errlen, "store: a run has an unknown state");
			memset(count, 0, RS_COUNT * sizeof(count[0]));
			break;
		}
		count[state] += (uint64_t)pg_get_i64(res, r, 1);
	}
	PQclear(res);
	return rc;
}

static int pg_put_blob(struct store *base, const char *id, const char *name, const uint8_t *data, size_t len,
		       char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	char shown[65];   /* the name, for a message */
	errmsg_printable(shown, sizeof(shown), name);
	if (!store_blob_name_ok(name))
		return errf(err, errlen, "store: run %s: \"%s\" is not a blob name", id, shown);
	if (len > INT_MAX)
		return errf(err, errlen, "store: run %s: blob %s is too large (%zu bytes)", id, shown, len);
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	/* A NULL value would be SQL NULL: an empty blob still points somewhere. */
	const char *const v[] = { id, name, data ? (const char *)data : "" };
	const int lens[] = { 0, 0, (int)len };
	const int fmts[] = { 0, 0, 1 };
	PGresult *failed;
	PGresult *res = pg_exec_full(s, "keeping blob",
				     "INSERT INTO blobs (id, name, data) VALUES ($1, $2, $3)"
				     " ON CONFLICT (id, name) DO UPDATE SET data = excluded.data",
				     3, v, lens, fmts, 0, &failed, err, errlen);
	if (!res) {
		if (pg_sqlstate_is(failed, "23503"))   /* foreign_key_violation: no such run */
			errf(err, errlen, "store: no run %s to keep blob %s for", id, shown);
		PQclear(failed);
		return -1;
	}
	PQclear(res);
	return 0;
}

/* The names first, then each blob by a query of its own, so that one
 * blob at a time is in memory and no query is open while fn runs. Names
 * in byte order (COLLATE "C"), whatever the database's collation. */
static int pg_blobs(struct store *base, const char *id,
		    int (*fn)(void *ctx, const char *name, const uint8_t *data, size_t len), void *ctx, char *err,
		    size_t errlen)
{
	struct store_pg *s = backend(base);
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	const char *const v[] = { id };
	PGresult *names = pg_exec_sql(s, "listing blobs",
				      "SELECT name FROM blobs WHERE id = $1 ORDER BY name COLLATE \"C\"", 1, v, err,
				      errlen);
	if (!names)
		return -1;
	int rc = 0;
	for (int r = 0; rc == 0 && r < PQntuples(names); r++) {
		const char *name = PQgetvalue(names, r, 0);
		const char *const bv[] = { id, name };
		PGresult *res = pg_exec_full(s, "reading blob", "SELECT data FROM blobs WHERE id = $1 AND name = $2",
					     2, bv, NULL, NULL, 1, NULL, err, errlen);
		if (!res) {
			rc = -1;
			break;
		}
		if (PQntuples(res) == 1)   /* else dropped since the list: gone */
			rc = fn(ctx, name, (const uint8_t *)PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
		PQclear(res);
	}
	PQclear(names);
	return rc;
}

/* A DELETE of what ended before before_ms ($1): how many rows went, or -1. */
static long pg_delete_before(struct store *base, const char *what, const char *sql, int64_t before_ms, char *err,
			     size_t errlen)
{
	struct store_pg *s = backend(base);
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	char before[24];
	pg_fmt_i64(before, sizeof(before), before_ms);
	const char *const v[] = { before };
	PGresult *res = pg_exec_sql(s, what, sql, 1, v, err, errlen);
	if (!res)
		return -1;
	long n = strtol(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	return n;
}

static long pg_drop_blobs(struct store *base, int64_t before_ms, char *err, size_t errlen)
{
	return pg_delete_before(base, "dropping blobs",
				"DELETE FROM blobs b USING runs r WHERE b.id = r.id AND r.finished_ms < $1", before_ms,
				err, errlen);
}

/* One statement: the blobs go with their rows (ON DELETE CASCADE). */
static long pg_drop_runs(struct store *base, int64_t before_ms, char *err, size_t errlen)
{
	return pg_delete_before(base, "dropping runs past their retention",
				"DELETE FROM runs WHERE finished_ms < $1 AND state NOT IN ('queued', 'running')",
				before_ms, err, errlen);
}

/* One statement, so one round trip per request: the row's lock (the
 * upsert's) orders two nodes' takes. The refill is measured on the
 * server's clock, the same for every node; a tenant's first request
 * finds a full bucket. */
static int pg_rate(struct store *base, const struct tenant *lim, int64_t *wait_ms, char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	*wait_ms = 0;
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	char rate[32], burst[32];
	snprintf(rate, sizeof(rate), "%.17g", lim->rate);
	snprintf(burst, sizeof(burst), "%.17g", lim->burst);
	const char *const v[] = { lim->name, rate, burst };
#define REFILLED "least($3::float8, rates.tokens + greatest(0, excluded.at_ms - rates.at_ms) * $2::float8 / 1000)"
	PGresult *res = pg_exec_sql(s, "taking from a tenant's rate",
				    "INSERT INTO rates (tenant, tokens, at_ms, taken)"
				    " VALUES ($1, $3::float8 - 1, " NOW_MS ", true)"
				    " ON CONFLICT (tenant) DO UPDATE SET"
				    " tokens = " REFILLED " - CASE WHEN " REFILLED " >= 1 THEN 1 ELSE 0 END,"
				    " taken = " REFILLED " >= 1,"
				    " at_ms = greatest(rates.at_ms, excluded.at_ms)"
				    " RETURNING taken, tokens",
				    3, v, err, errlen);
#undef REFILLED
	if (!res)
		return -1;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return errf(err, errlen, "store: taking from a tenant's rate: no row");
	}
	if (strcmp(PQgetvalue(res, 0, 0), "t"))
		*wait_ms = sched_rate_wait_ms(strtod(PQgetvalue(res, 0, 1), NULL), lim->rate);
	PQclear(res);
	return 0;
}

static int pg_note_fd(struct store *base)
{
	struct store_pg *s = backend(base);
	if (!s->listen || PQstatus(s->listen) != CONNECTION_OK)
		return -1;
	return PQsocket(s->listen);
}

static const struct {
	const char *prefix;
	enum store_note note;
} note_kinds[] = {
	{ "queued:", STORE_NOTE_QUEUED },
	{ "cancel:", STORE_NOTE_CANCEL },
	{ "ended:", STORE_NOTE_ENDED },
};

/* The LISTEN connection broke: notifications sent meanwhile are gone.
 * Try once to have it back (the caller rescans either way), and say so. */
static int relisten(struct store_pg *s, char *err, size_t errlen)
{
	char why[256];
	pg_conn_err(s->listen, "lost the notification connection", why, sizeof(why));
	PQreset(s->listen);
	if (pg_session_ok(s->listen) && pg_listen(s->listen, err, errlen) == 0)
		return errf(err, errlen, "%s (reconnected)", why);
	return errf(err, errlen, "%s", why);
}

/* Read what the socket holds and deliver it, until it holds nothing more
 * (a few rounds at most: a server going down sends its last words, then
 * the end of the connection, which may be a read apart). */
static int pg_notes(struct store *base, store_note_fn fn, void *ctx, char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	for (int round = 0; round < 4; round++) {
		if (PQstatus(s->listen) != CONNECTION_OK || !PQconsumeInput(s->listen) ||
		    PQstatus(s->listen) != CONNECTION_OK)
			return relisten(s, err, errlen);
		for (PGnotify *n; (n = PQnotifies(s->listen)); PQfreemem(n)) {
			if (strcmp(n->relname, CHANNEL))
				continue;
			for (size_t i = 0; i < sizeof(note_kinds) / sizeof(note_kinds[0]); i++) {
				size_t plen = strlen(note_kinds[i].prefix);
				if (!strncmp(n->extra, note_kinds[i].prefix, plen)) {
					if (fn)
						fn(ctx, note_kinds[i].note, n->extra + plen);
					break;
				}
			}
		}
		struct pollfd p = { .fd = PQsocket(s->listen), .events = POLLIN };
		if (p.fd < 0 || poll(&p, 1, 0) <= 0)
			break;
	}
	return 0;
}

/* Also the cleanup of a half-done open: either connection may be NULL. */
static void pg_close(struct store *base)
{
	struct store_pg *s = backend(base);
	PQfinish(s->listen);
	PQfinish(s->db);
	free(s);
}

static const struct store_ops pg_ops = {
	.submit = pg_submit,
	.get = pg_get,
	.claim = pg_claim,
	.command = pg_command,
	.finish = pg_finish,
	.cancel = pg_cancel,
	.heartbeat = pg_heartbeat,
	.expire = pg_expire,
	.each = pg_each,
	.list = pg_list,
	.count = pg_count,
	.put_blob = pg_put_blob,
	.blobs = pg_blobs,
	.drop_blobs = pg_drop_blobs,
	.drop_runs = pg_drop_runs,
	.note_fd = pg_note_fd,
	.notes = pg_notes,
	.rate = pg_rate,
	.sbx_create = pg_sbx_create,
	.sbx_get = pg_sbx_get,
	.sbx_set = pg_sbx_set,
	.sbx_move = pg_sbx_move,
	.sbx_each = pg_sbx_each,
	.sbx_lost = pg_sbx_lost,
	.sbx_drop = pg_sbx_drop,
	.set_address = pg_set_address,
	.address_of = pg_address_of,
	.close = pg_close,
};

/* ---- open -------------------------------------------------------------- */

struct store *store_pg_open(const char *uri, char *err, size_t errlen)
{
	struct store_pg *s = calloc(1, sizeof(*s));
	if (!s) {
		errf(err, errlen, "store: out of memory");
		return NULL;
	}
	s->base.ops = &pg_ops;
	if (!pg_session_ok(s->db = pg_connect(uri))) {
		pg_conn_err(s->db, "cannot reach the server", err, errlen);
		goto fail;
	}
	if (pg_migrate(s, err, errlen) < 0)
		goto fail;
	if (!pg_session_ok(s->listen = pg_connect(uri))) {
		pg_conn_err(s->listen, "cannot reach the server", err, errlen);
		goto fail;
	}
	if (pg_listen(s->listen, err, errlen) < 0)
		goto fail;
	return &s->base;
fail:
	pg_close(&s->base);
	return NULL;
}