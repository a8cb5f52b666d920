/* The PostgreSQL store's sandboxes (store.h's sbx_* calls): their rows
 * and their idempotency keys, over the connection layer (store_pg.h).
 * sbx_create is one transaction under a per-tenant advisory lock
 * (LOCK_SANDBOX), so that two nodes cannot both count a tenant's last
 * place free; every other call is one statement, whose row locks order
 * it against the others (an UPDATE that waited on a row looks again at
 * the row it waited for, read committed), so that a terminal row is
 * never changed. */
#include "store_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "store_sandbox.h"

static struct store_pg *backend(struct store *s)
{
	return (struct store_pg *)s;
}

/* A size or a sum (numeric, from sum()) as what it takes; NULL reads as 0. */
static uint64_t get_u64(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return 0;
	const char *v = PQgetvalue(res, row, col);
	return *v == '-' ? 0 : strtoull(v, NULL, 10);
}

/* A time parameter: 0 is NULL, which the rows read as "not yet" and
 * sbx_set as "unchanged". */
static const char *time_param(char *buf, size_t cap, int64_t v)
{
	if (!v)
		return NULL;
	pg_fmt_i64(buf, cap, v);
	return buf;
}

/* Row row of a result whose first columns are STORE_SBX_COLS into *out,
 * which owns its request. */
static int read_sbx(const PGresult *res, int row, struct store_sandbox *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (PQnfields(res) < SBC_N)
		return errf(err, errlen, "store: a sandbox's row has %d columns, not %d", PQnfields(res), SBC_N);
	store_copy_text(out->id, sizeof(out->id), PQgetvalue(res, row, SBC_ID));
	store_copy_text(out->tenant, sizeof(out->tenant), PQgetvalue(res, row, SBC_TENANT));
	store_copy_text(out->node, sizeof(out->node), PQgetvalue(res, row, SBC_NODE));
	int state = store_sbx_state_parse(PQgetvalue(res, row, SBC_STATE));
	if (state < 0)
		return errf(err, errlen, "store: sandbox %s has an unknown state", out->id);
	out->state = (enum sbx_row_state)state;
	out->created_ms = pg_get_i64(res, row, SBC_CREATED);
	out->started_ms = pg_get_i64(res, row, SBC_STARTED);
	out->ended_ms = pg_get_i64(res, row, SBC_ENDED);
	out->timeout_at_ms = pg_get_i64(res, row, SBC_TIMEOUT_AT);
	out->memory_mib = get_u64(res, row, SBC_MEMORY);
	out->disk_mib = get_u64(res, row, SBC_DISK);
	if (!PQgetisnull(res, row, SBC_REQUEST) && !(out->request = strdup(PQgetvalue(res, row, SBC_REQUEST)))) {
		store_sandbox_free(out);
		return errf(err, errlen, "store: out of memory reading sandbox");
	}
	store_copy_text(out->reason, sizeof(out->reason), PQgetvalue(res, row, SBC_REASON));   /* NULL: "" */
	out->seq = pg_get_i64(res, row, SBC_SEQ);
	return 0;
}

/* idem's key as the tenant used it for a sandbox within its time:
 * STORE_REPLAYED (the sandbox into idem->id) or STORE_KEY_REUSED, 0 when
 * it was not, -1 error. Under sbx_create's lock, which is the tenant's,
 * as the key is: two nodes cannot both find it unused. */
static int idem_lookup(struct store_pg *s, const struct store_sandbox *sb, struct store_idem *idem, char *err,
		       size_t errlen)
{
	char since[24];
	pg_fmt_i64(since, sizeof(since), sb->created_ms - STORE_IDEM_TTL_MS);
	const char *const v[] = { sb->tenant, idem->key, since };
	PGresult *res = pg_exec_sql(s, "looking up a sandbox's idempotency key",
				    "SELECT hash, id FROM sandbox_idem WHERE tenant = $1 AND key = $2"
				    " AND created_ms > $3::bigint",
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

/* The count and the sums are a statement after the lock, so that (read
 * committed) they see every creation of the tenant's that committed
 * before it; a sandbox that stops meanwhile (no lock) only frees room. */
int pg_sbx_create(struct store *base, const struct store_sandbox *sb, struct store_idem *idem, const struct tenant *lim,
		  char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	if (!*sb->node || strlen(sb->node) >= STORE_NODE_MAX)
		return errf(err, errlen, "store: a node's name is 1 to %d bytes", STORE_NODE_MAX - 1);
	/* bigint is signed: a larger size would not be stored */
	if (sb->memory_mib > INT64_MAX || sb->disk_mib > INT64_MAX)
		return errf(err, errlen, "store: sandbox %s: a size over %lld MiB", sb->id, (long long)INT64_MAX);
	if (pg_ensure(s, err, errlen) < 0 || pg_begin(s, err, errlen) < 0)
		return -1;
	int rc = -1;
	const char *const tv[] = { sb->tenant };
	if (pg_exec_cmd(s, "sandbox admission lock",
			"SELECT pg_advisory_xact_lock(" LOCK_SANDBOX " + (hashtext($1) & 65535))", 1, tv, err,
			errlen) < 0)
		goto out;
	if (idem && (rc = idem_lookup(s, sb, idem, err, errlen)) != 0)
		goto out;   /* a replay or a reuse: nothing written */
	rc = -1;
	PGresult *res = pg_exec_sql(s, "counting open sandboxes",
				    "SELECT count(*), coalesce(sum(memory_mib), 0), coalesce(sum(disk_mib), 0)"
				    " FROM sandboxes WHERE tenant = $1 AND state IN " STORE_SBX_OPEN,
				    1, tv, err, errlen);
	if (!res)
		goto out;
	rc = store_sbx_admit(lim, get_u64(res, 0, 0), get_u64(res, 0, 1), get_u64(res, 0, 2), sb);
	PQclear(res);
	if (rc)
		goto out;   /* refused: nothing written */
	char created[24], mem[24], disk[24];
	pg_fmt_i64(created, sizeof(created), sb->created_ms);
	snprintf(mem, sizeof(mem), "%llu", (unsigned long long)sb->memory_mib);
	snprintf(disk, sizeof(disk), "%llu", (unsigned long long)sb->disk_mib);
	const char *const iv[] = { sb->id, sb->tenant, sb->node, created, mem, disk, sb->request };
	PGresult *failed;
	res = pg_exec_full(s, "storing sandbox",
			   "INSERT INTO sandboxes (id, tenant, node, state, created_ms, memory_mib, disk_mib, request)"
			   " VALUES ($1, $2, $3, 'starting', $4, $5, $6, $7)",
			   7, iv, NULL, NULL, 0, &failed, err, errlen);
	if (!res) {
		if (pg_sqlstate_is(failed, "23505"))   /* unique_violation: the id */
			errf(err, errlen, "store: sandbox %s exists already", sb->id);
		PQclear(failed);
		rc = -1;
		goto out;
	}
	PQclear(res);
	if (idem) {
		/* a row past its time is taken over */
		const char *const kv[] = { sb->tenant, idem->key, idem->hash, sb->id, created };
		if (pg_exec_cmd(s, "keeping a sandbox's idempotency key",
				"INSERT INTO sandbox_idem (tenant, key, hash, id, created_ms)"
				" VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant, key) DO UPDATE SET"
				" hash = excluded.hash, id = excluded.id, created_ms = excluded.created_ms",
				5, kv, err, errlen) < 0)
			rc = -1;
	}
out:
	return pg_end_tx(s, rc, err, errlen);
}

int pg_sbx_get(struct store *base, const char *id, const char *tenant, struct store_sandbox *out, char *err,
	       size_t errlen)
{
	struct store_pg *s = backend(base);
	memset(out, 0, sizeof(*out));
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	const char *const v[] = { id, tenant };
	PGresult *res = pg_exec_sql(s, "reading sandbox",
				    "SELECT " STORE_SBX_COLS " FROM sandboxes"
				    " WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)",
				    2, v, err, errlen);
	if (!res)
		return -1;
	int rc = PQntuples(res) == 0 ? 0 : read_sbx(res, 0, out, err, errlen) < 0 ? -1 : 1;
	PQclear(res);
	return rc;
}

int pg_sbx_set(struct store *base, const char *id, const char *node, enum sbx_row_state state, int64_t started_ms,
	       int64_t ended_ms, int64_t timeout_at_ms, const char *reason, char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	const char *name = store_sbx_state_name(state);
	if (!name)
		return errf(err, errlen, "store: sandbox %s: no state %d", id, (int)state);
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	char started[24], ended[24], timeout[24];
	const char *const v[] = { id,
				  node,
				  name,
				  time_param(started, sizeof(started), started_ms),
				  time_param(ended, sizeof(ended), ended_ms),
				  time_param(timeout, sizeof(timeout), timeout_at_ms),
				  reason };
	PGresult *res = pg_exec_sql(s, "changing sandbox",
				    "UPDATE sandboxes SET state = $3, started_ms = coalesce($4::bigint, started_ms),"
				    " ended_ms = coalesce($5::bigint, ended_ms),"
				    " timeout_at_ms = coalesce($6::bigint, timeout_at_ms),"
				    " reason = coalesce($7::text, reason)"
				    " WHERE id = $1 AND state IN " STORE_SBX_OPEN
				    " AND ($2::text IS NULL OR node = $2)",
				    7, v, err, errlen);
	if (!res)
		return -1;
	int rc = !strcmp(PQcmdTuples(res), "1");
	PQclear(res);
	return rc;
}

int pg_sbx_move(struct store *base, const char *id, const char *from, enum sbx_row_state st, const char *to,
		enum sbx_row_state to_st, int64_t timeout_at_ms, const char *reason, char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	const char *a = store_sbx_state_name(st), *b = store_sbx_state_name(to_st);
	if (!a || !b)
		return errf(err, errlen, "store: sandbox %s: no state %d", id, (int)(a ? to_st : st));
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	char timeout[24];
	const char *const v[] = { id, from, a, to, b, reason, time_param(timeout, sizeof(timeout), timeout_at_ms) };
	PGresult *res = pg_exec_sql(s, "moving sandbox",
				    "UPDATE sandboxes SET node = $4, state = $5, reason = coalesce($6::text, reason),"
				    " timeout_at_ms = coalesce($7::bigint, timeout_at_ms)"
				    " WHERE id = $1 AND node = $2 AND state = $3",
				    7, v, err, errlen);
	if (!res)
		return -1;
	int rc = !strcmp(PQcmdTuples(res), "1");
	PQclear(res);
	return rc;
}

/* A query per sandbox, after the last one seen, as the runs' each: no
 * query is open while fn runs, so fn may call the store. */
int pg_sbx_each(struct store *base, const char *tenant, const char *node, bool open_only,
		int (*fn)(void *ctx, const struct store_sandbox *sb), void *ctx, char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	int64_t after = INT64_MIN;
	for (;;) {
		if (pg_ensure(s, err, errlen) < 0)
			return -1;
		char seq[24];
		pg_fmt_i64(seq, sizeof(seq), after);
		const char *const v[] = { seq, tenant, node, open_only ? "t" : "f" };
		PGresult *res = pg_exec_sql(s, "walking sandboxes",
					    "SELECT " STORE_SBX_COLS " FROM sandboxes WHERE seq > $1::bigint"
					    " AND ($2::text IS NULL OR tenant = $2) AND ($3::text IS NULL OR node = $3)"
					    " AND (NOT $4::boolean OR state IN " STORE_SBX_OPEN ")"
					    " ORDER BY seq LIMIT 1",
					    4, v, err, errlen);
		if (!res)
			return -1;
		if (PQntuples(res) == 0) {
			PQclear(res);
			return 0;
		}
		struct store_sandbox row;
		int rc = read_sbx(res, 0, &row, err, errlen);
		PQclear(res);
		if (rc < 0)
			return -1;
		after = row.seq;
		rc = fn(ctx, &row);
		store_sandbox_free(&row);
		if (rc)
			return rc;
	}
}

/* One statement, as expire: the dead nodes and every open sandbox of
 * theirs, changed by one UPDATE whose RETURNING is what this call
 * changed (a node losing them at the same time waits on the rows, then
 * finds them lost). The reason is format() of STORE_MSG_SBX_LOST, whose
 * one %s format() spells as printf does. fn runs after the commit. */
#define SBX_LOST_SQL(nodes)                                                                                     \
	"WITH lost AS (UPDATE sandboxes SET state = 'lost', ended_ms = $1::bigint, reason = format($2::text, node)" \
	" WHERE state IN " STORE_SBX_OPEN " AND " nodes " RETURNING " STORE_SBX_COLS ")"                          \
	" SELECT " STORE_SBX_COLS " FROM lost ORDER BY seq"

int pg_sbx_lost(struct store *base, const char *node, int64_t now_ms,
		void (*fn)(void *ctx, const struct store_sandbox *sb), void *ctx, char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	char now[24];
	pg_fmt_i64(now, sizeof(now), now_ms);
	const char *const v[] = { now, STORE_MSG_SBX_LOST, node };
	PGresult *res =
		node ? pg_exec_sql(s, "losing sandboxes", SBX_LOST_SQL("node = $3"), 3, v, err, errlen)
		     : pg_exec_sql(s, "losing sandboxes",
				   SBX_LOST_SQL("node IN (SELECT name FROM nodes"
						" WHERE lease_until_ms < " NOW_MS ")"),
				   2, v, err, errlen);
	if (!res)
		return -1;
	int n = PQntuples(res);
	for (int r = 0; fn && r < n; r++) {
		struct store_sandbox row;
		if (read_sbx(res, r, &row, err, errlen) < 0)
			continue;   /* lost all the same; only this call's report of it is lost */
		fn(ctx, &row);
		store_sandbox_free(&row);
	}
	PQclear(res);
	return n;
}

/* One statement: the keys go with their rows (ON DELETE CASCADE). */
long pg_sbx_drop(struct store *base, int64_t before_ms, char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	char before[24];
	pg_fmt_i64(before, sizeof(before), before_ms);
	const char *const v[] = { before };
	PGresult *res = pg_exec_sql(s, "dropping sandboxes past their retention",
				    "DELETE FROM sandboxes WHERE ended_ms < $1::bigint"
				    " AND state IN " STORE_SBX_TERMINAL,
				    1, v, err, errlen);
	if (!res)
		return -1;
	long n = strtol(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	return n;
}

int pg_set_address(struct store *base, const char *node, const char *address, char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	const char *const v[] = { node, address };
	return pg_exec_cmd(s, "publishing this node's address",
			   "INSERT INTO node_addresses (name, address) VALUES ($1, $2)"
			   " ON CONFLICT (name) DO UPDATE SET address = excluded.address",
			   2, v, err, errlen) < 0 ? -1 : 0;
}

int pg_address_of(struct store *base, const char *node, char *out, size_t cap, char *err, size_t errlen)
{
	struct store_pg *s = backend(base);
	out[0] = '\0';
	if (pg_ensure(s, err, errlen) < 0)
		return -1;
	const char *const v[] = { node };
	PGresult *res = pg_exec_sql(s, "reading a node's address", "SELECT address FROM node_addresses WHERE name = $1",
				    1, v, err, errlen);
	if (!res)
		return -1;
	const char *a = PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "";
	int found = a[0] && strlen(a) < cap;
	if (found)
		snprintf(out, cap, "%s", a);
	PQclear(res);
	return found;
}
