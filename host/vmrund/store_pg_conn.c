/* The PostgreSQL store's connection layer (store_pg.h): connecting and
 * reconnecting, running statements, reading rows, and the schema's
 * migrations. What the calls do with them is store_pg.c's. */
#include "store_pg.h"

#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "store_sandbox.h"

/* The schema, one migration per version (migrations[0] makes version 1);
 * a database gets every one it lacks, in order, each in a transaction of
 * its own with its row in vmrun_schema. Append only: a vmrund that finds
 * a version past the last here refuses the database. */
static const char *const migrations[] = {
	/* 1: the whole schema. seq orders acceptance (submit takes it under
	 * its lock, so seq order is also commit order). (state, tenant, seq):
	 * the counts of open runs, a tenant's oldest queued runs. (tenant,
	 * started_ms): a tenant's last start, for fairness. node '': none. */
	"CREATE TABLE runs ("
	" seq bigserial PRIMARY KEY,"
	" id text NOT NULL UNIQUE,"
	" tenant text NOT NULL,"
	" state text NOT NULL CHECK (state IN"
	"  ('queued','running','succeeded','failed','timed_out','cancelled','lost')),"
	" created_ms bigint NOT NULL,"
	" started_ms bigint,"
	" command_ms bigint,"
	" finished_ms bigint,"
	" request text NOT NULL,"
	" result text,"
	" message text,"
	" node text NOT NULL DEFAULT '',"
	" cancel boolean NOT NULL DEFAULT false);"
	"CREATE INDEX runs_state_seq ON runs (state, seq);"
	"CREATE INDEX runs_state_tenant_seq ON runs (state, tenant, seq);"
	"CREATE INDEX runs_tenant_started ON runs (tenant, started_ms);"
	"CREATE TABLE nodes ("
	" name text PRIMARY KEY,"
	" lease_until_ms bigint NOT NULL);"
	"CREATE TABLE blobs ("
	" id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,"
	" name text NOT NULL,"
	" data bytea NOT NULL,"
	" PRIMARY KEY (id, name));",
	/* 2: the tenants' request-rate buckets, one per tenant for the whole
	 * cluster (pg_rate). UNLOGGED: no WAL, so that the write every API
	 * request makes costs no disk flush; a crash of the server empties
	 * the table, which refills every bucket, as a restarted single node
	 * does. taken: whether the last update took a token, for RETURNING,
	 * which sees only the row after. */
	"CREATE UNLOGGED TABLE rates ("
	" tenant text PRIMARY KEY,"
	" tokens double precision NOT NULL,"
	" at_ms bigint NOT NULL,"
	" taken boolean NOT NULL);",
	/* 3: how a run's command ended (store.h's outcome), so that no reader
	 * parses the result again; limits_hit is result.h's LIMIT_* bits.
	 * Runs that ended before keep none (their results still say it). */
	"ALTER TABLE runs"
	" ADD COLUMN outcome text CHECK (outcome IN ('succeeded','failed','timed_out')),"
	" ADD COLUMN termination text,"
	" ADD COLUMN limits_hit integer NOT NULL DEFAULT 0;",
	/* 4: the tenants' idempotency keys (store.h), each with the run it
	 * made; they go with that run. */
	"CREATE TABLE idem ("
	" tenant text NOT NULL,"
	" key text NOT NULL,"
	" hash text NOT NULL,"
	" id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,"
	" created_ms bigint NOT NULL,"
	" PRIMARY KEY (tenant, key));",
	/* 5: the sandboxes (store.h), each held by the node that started it,
	 * and their idempotency keys, a namespace apart from the runs'; the
	 * keys go with their sandbox. (tenant, state): a tenant's open ones,
	 * counted and summed at each create; (node, state): a node's open
	 * ones, lost with it; sandbox_idem (id): the cascade's lookup when a
	 * sandbox is dropped. Times NULL: not yet. */
	"CREATE TABLE sandboxes ("
	" seq bigserial PRIMARY KEY,"
	" id text NOT NULL UNIQUE,"
	" tenant text NOT NULL,"
	" node text NOT NULL,"
	" state text NOT NULL CHECK (state IN ('starting','running','stopping','stopped','lost')),"
	" created_ms bigint NOT NULL,"
	" started_ms bigint,"
	" ended_ms bigint,"
	" timeout_at_ms bigint,"
	" memory_mib bigint NOT NULL CHECK (memory_mib >= 0),"
	" disk_mib bigint NOT NULL CHECK (disk_mib >= 0),"
	" request text NOT NULL,"
	" reason text);"
	"CREATE INDEX sandboxes_tenant_state ON sandboxes (tenant, state);"
	"CREATE INDEX sandboxes_node_state ON sandboxes (node, state);"
	"CREATE TABLE sandbox_idem ("
	" tenant text NOT NULL,"
	" key text NOT NULL,"
	" hash text NOT NULL,"
	" id text NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,"
	" created_ms bigint NOT NULL,"
	" PRIMARY KEY (tenant, key));"
	"CREATE INDEX sandbox_idem_id ON sandbox_idem (id);",
	/* 6: where each node answers, for the others to forward a sandbox's
	 * calls to the node that holds it (store.h's set_address). */
	"CREATE TABLE node_addresses ("
	" name text PRIMARY KEY,"
	" address text NOT NULL);",
	/* 7: a sandbox may be paused, or failed (store.h). */
	"ALTER TABLE sandboxes DROP CONSTRAINT sandboxes_state_check,"
	" ADD CONSTRAINT sandboxes_state_check CHECK (state IN " STORE_SBX_STATES ");",
	/* 8: a lost sandbox may be resumable from its checkpoints (store.h):
	 * the same statement, over STORE_SBX_STATES as it is now. */
	"ALTER TABLE sandboxes DROP CONSTRAINT sandboxes_state_check,"
	" ADD CONSTRAINT sandboxes_state_check CHECK (state IN " STORE_SBX_STATES ");",
	/* 9: a tenant's runs, newest first (store.h's list). */
	"CREATE INDEX IF NOT EXISTS runs_tenant_seq ON runs (tenant, seq);",
};
#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

/* ---- connections ------------------------------------------------------- */

/* The server's notices (CREATE ... IF NOT EXISTS that skipped, say) are
 * not the daemon's to print. */
static void quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

/* The length of text's first line: libpq's messages run over several
 * ("...\n\tIs the server running..."), the daemon's are one. */
static int line_len(const char *text)
{
	size_t n = strcspn(text, "\n");
	while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == '\t' || text[n - 1] == '\r'))
		n--;
	return n > INT_MAX ? INT_MAX : (int)n;
}

/* Connect to uri. connect_timeout and application_name come before
 * dbname, which expands the URI, so that what the URI says wins; the
 * keepalives find a server that vanished without closing the
 * connection (the LISTEN connection waits on it for hours otherwise).
 * Always a connection object (libpq's failures are in it), or NULL out of
 * memory. */
PGconn *pg_connect(const char *uri)
{
	static const char *const keys[] = { "connect_timeout", "application_name", "keepalives_idle",
					    "keepalives_interval", "keepalives_count", "dbname", NULL };
	const char *const vals[] = { "3", "vmrund", "30", "10", "3", uri, NULL };
	PGconn *c = PQconnectdbParams(keys, vals, 1);
	if (c)
		PQsetNoticeProcessor(c, quiet, NULL);
	return c;
}

/* What every session of ours runs with, whatever the server's defaults:
 * read committed, which the calls' locking is written for (each statement
 * sees what committed before it, and an UPDATE that waited on a row looks
 * at the row it waited for); a transaction left open by a node that
 * stopped mid-call is ended by the server after a while, so that the
 * locks it held (the claim lock, say) are not held for every other node
 * until TCP notices; and the server's keepalives find such a node's
 * connection dead (the session lock of a migration goes with it). */
static const char session_sql[] =
	"SET default_transaction_isolation = 'read committed';"
	"SET idle_in_transaction_session_timeout = '10s';"
	"SET tcp_keepalives_idle = 30; SET tcp_keepalives_interval = 10; SET tcp_keepalives_count = 3";

/* A connection made or reset: its session set up. Whether it is usable. */
bool pg_session_ok(PGconn *c)
{
	if (!c || PQstatus(c) != CONNECTION_OK)
		return false;
	PGresult *res = PQexec(c, session_sql);
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
	PQclear(res);
	return ok;
}

int pg_conn_err(PGconn *c, const char *what, char *err, size_t errlen)
{
	const char *m = c ? PQerrorMessage(c) : "out of memory";
	if (!*m)
		m = "unknown error";
	return errf(err, errlen, "store: %s: %.*s", what, line_len(m), m);
}

int pg_listen(PGconn *c, char *err, size_t errlen)
{
	PGresult *res = PQexec(c, "LISTEN " CHANNEL);
	int rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : pg_conn_err(c, "LISTEN", err, errlen);
	PQclear(res);
	return rc;
}

/* A server that closed this connection since the last call (a restart, a
 * crash, an administrator's kill) left it readable at end of file: find
 * that now, without a round trip, so that the call reconnects instead of
 * failing on it. At most a few reads: an idle connection has nothing
 * else to read. */
static void notice_close(PGconn *c)
{
	for (int i = 0; i < 4 && PQstatus(c) == CONNECTION_OK; i++) {
		struct pollfd p = { .fd = PQsocket(c), .events = POLLIN };
		if (p.fd < 0 || poll(&p, 1, 0) <= 0)
			return;
		if (!PQconsumeInput(c))
			return;
	}
}

/* Before each call: the command connection up (reset when it broke) and
 * outside any transaction. A server that is down fails here at once
 * (refused) or within connect_timeout. */
int pg_ensure(struct store_pg *s, char *err, size_t errlen)
{
	notice_close(s->db);
	if (PQstatus(s->db) != CONNECTION_OK) {
		PQreset(s->db);
		if (!pg_session_ok(s->db))
			return pg_conn_err(s->db, "cannot reach the server", err, errlen);
	}
	if (PQtransactionStatus(s->db) != PQTRANS_IDLE)
		PQclear(PQexec(s->db, "ROLLBACK"));
	return 0;
}

/* ---- statements -------------------------------------------------------- */

/* The reason a statement failed: the connection's, when it broke (the
 * next call reconnects), else the server's primary message. */
int pg_stmt_err(struct store_pg *s, const PGresult *res, const char *what, char *err, size_t errlen)
{
	if (PQstatus(s->db) != CONNECTION_OK)
		return pg_conn_err(s->db, "lost the connection to the server", err, errlen);
	const char *m = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	if (!m || !*m)
		m = PQerrorMessage(s->db);
	if (!*m)
		m = "unknown error";
	return errf(err, errlen, "store: %s: %.*s", what, line_len(m), m);
}

/* Whether a failed statement's SQLSTATE is code. */
bool pg_sqlstate_is(const PGresult *res, const char *code)
{
	const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	return st && !strcmp(st, code);
}

/* Run one statement: n parameters, text (NULL: SQL NULL) unless fmt says
 * binary, and results in text unless binary_out. The result when it ran
 * (rows or a command done); else NULL with the reason in err, and *failed
 * (when non-NULL) receives the failed result to look at (the caller
 * clears it). */
PGresult *pg_exec_full(struct store_pg *s, const char *what, const char *sql, int n, const char *const *val,
		       const int *len, const int *fmt, int binary_out, PGresult **failed, char *err, size_t errlen)
{
	PGresult *res = PQexecParams(s->db, sql, n, NULL, val, len, fmt, binary_out);
	ExecStatusType st = PQresultStatus(res);   /* NULL reads as a fatal error */
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
		if (failed)
			*failed = NULL;
		return res;
	}
	pg_stmt_err(s, res, what, err, errlen);
	if (failed)
		*failed = res;
	else
		PQclear(res);
	return NULL;
}

PGresult *pg_exec_sql(struct store_pg *s, const char *what, const char *sql, int n, const char *const *val,
		      char *err, size_t errlen)
{
	return pg_exec_full(s, what, sql, n, val, NULL, NULL, 0, NULL, err, errlen);
}

/* A statement whose result is not needed: 0, -1. */
int pg_exec_cmd(struct store_pg *s, const char *what, const char *sql, int n, const char *const *val, char *err,
		size_t errlen)
{
	PGresult *res = pg_exec_sql(s, what, sql, n, val, err, errlen);
	PQclear(res);
	return res ? 0 : -1;
}

int pg_begin(struct store_pg *s, char *err, size_t errlen)
{
	return pg_exec_cmd(s, "BEGIN", "BEGIN", 0, NULL, err, errlen);
}

/* The end of a call's transaction: COMMIT when rc >= 0 (rc stays, or -1
 * when the commit failed), else ROLLBACK. */
int pg_end_tx(struct store_pg *s, int rc, char *err, size_t errlen)
{
	if (rc >= 0 && pg_exec_cmd(s, "COMMIT", "COMMIT", 0, NULL, err, errlen) < 0)
		rc = -1;
	if (PQstatus(s->db) == CONNECTION_OK && PQtransactionStatus(s->db) != PQTRANS_IDLE)
		PQclear(PQexec(s->db, "ROLLBACK"));
	return rc;
}

void pg_fmt_i64(char *buf, size_t cap, int64_t v)
{
	snprintf(buf, cap, "%lld", (long long)v);
}

/* An integer in text (a count, a time); NULL reads as 0, "not yet". */
int64_t pg_get_i64(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return 0;
	return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

unsigned pg_get_count(const PGresult *res, int row, int col)
{
	int64_t v = pg_get_i64(res, row, col);
	return v < 0 ? 0 : v > UINT_MAX ? UINT_MAX : (unsigned)v;
}

/* A malloc'd copy of a text column; NULL stays NULL. */
static int dup_value(const PGresult *res, int row, int col, char **out)
{
	*out = NULL;
	if (PQgetisnull(res, row, col))
		return 0;
	return (*out = strdup(PQgetvalue(res, row, col))) ? 0 : -1;
}

/* Row row of a result whose first columns are STORE_COLS into *out, which
 * owns copies of everything. */
int pg_read_row(const PGresult *res, int row, struct store_run *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (PQnfields(res) < C_N)
		return errf(err, errlen, "store: a row has %d columns, not %d", PQnfields(res), C_N);
	store_copy_text(out->id, sizeof(out->id), PQgetvalue(res, row, C_ID));
	store_copy_text(out->tenant, sizeof(out->tenant), PQgetvalue(res, row, C_TENANT));
	int state = store_state_parse(PQgetvalue(res, row, C_STATE));
	if (state < 0)
		return errf(err, errlen, "store: run %s has an unknown state", out->id);
	out->state = (enum run_state)state;
	out->created_ms = pg_get_i64(res, row, C_CREATED);
	out->started_ms = pg_get_i64(res, row, C_STARTED);
	out->command_ms = pg_get_i64(res, row, C_COMMAND);
	out->finished_ms = pg_get_i64(res, row, C_FINISHED);
	if (dup_value(res, row, C_REQUEST, &out->request) < 0 || dup_value(res, row, C_RESULT, &out->result) < 0) {
		store_run_free(out);
		return errf(err, errlen, "store: out of memory reading run");
	}
	store_copy_text(out->message, sizeof(out->message), PQgetvalue(res, row, C_MESSAGE));
	out->seq = pg_get_i64(res, row, C_SEQ);
	store_copy_text(out->node, sizeof(out->node), PQgetvalue(res, row, C_NODE));
	out->cancel = !strcmp(PQgetvalue(res, row, C_CANCEL), "t");
	store_outcome_read(out, PQgetisnull(res, row, C_OUTCOME) ? NULL : PQgetvalue(res, row, C_OUTCOME),
			   PQgetisnull(res, row, C_TERMINATION) ? NULL : PQgetvalue(res, row, C_TERMINATION),
			   pg_get_i64(res, row, C_LIMITS_HIT));
	return 0;
}

/* ---- the schema -------------------------------------------------------- */

/* Bring the schema to SCHEMA_VERSION, one node at a time: the session
 * lock LOCK_SCHEMA is held from the first look at the version to the last
 * migration's commit, so two nodes started at once on a new database do
 * not both create it (the second waits, then finds it done). */
int pg_migrate(struct store_pg *s, char *err, size_t errlen)
{
	int rc = -1;
	if (pg_exec_cmd(s, "schema lock", "SELECT pg_advisory_lock(" LOCK_SCHEMA ")", 0, NULL, err, errlen) < 0)
		return -1;
	if (pg_exec_cmd(s, "schema",
			"CREATE TABLE IF NOT EXISTS vmrun_schema"
			" (version int PRIMARY KEY, applied_ms bigint NOT NULL)",
			0, NULL, err, errlen) < 0)
		goto out;
	PGresult *res =
		pg_exec_sql(s, "schema", "SELECT coalesce(max(version), 0) FROM vmrun_schema", 0, NULL, err, errlen);
	if (!res)
		goto out;
	long have = (long)pg_get_i64(res, 0, 0);
	PQclear(res);
	if (have > SCHEMA_VERSION) {
		errf(err, errlen, "store: schema version %ld is newer than this vmrund's (%d); use a newer vmrund",
		     have, SCHEMA_VERSION);
		goto out;
	}
	for (long v = have + 1; v <= SCHEMA_VERSION; v++) {
		char version[24], what[48];
		snprintf(version, sizeof(version), "%ld", v);
		snprintf(what, sizeof(what), "schema migration %ld", v);
		const char *const vv[] = { version };
		if (pg_begin(s, err, errlen) < 0)
			goto out;
		/* PQexec: a migration is several statements, with no parameters. */
		res = PQexec(s->db, migrations[v - 1]);
		int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
		if (!ok)
			pg_stmt_err(s, res, what, err, errlen);
		PQclear(res);
		if (!ok || pg_exec_cmd(s, what, "INSERT INTO vmrun_schema (version, applied_ms) VALUES ($1, " NOW_MS ")",
				       1, vv, err, errlen) < 0) {
			pg_end_tx(s, -1, err, errlen);
			goto out;
		}
		if (pg_end_tx(s, 0, err, errlen) < 0)
			goto out;
	}
	rc = 0;
out:
	/* On failure the lock goes with the connection, which open closes. */
	if (rc == 0 &&
	    pg_exec_cmd(s, "schema unlock", "SELECT pg_advisory_unlock(" LOCK_SCHEMA ")", 0, NULL, err, errlen) < 0)
		rc = -1;
	return rc;
}
