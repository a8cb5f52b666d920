/* The SQLite store: one file on one machine, one connection, every call a
 * transaction of its own (autocommit), and the statements prepared once at
 * open. WAL with synchronous=FULL makes each commit reach the disk before
 * the call returns, so an accepted run survives kill -9 and power loss. */
#include "store.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"

#define SCHEMA_VERSION  1
#define BUSY_TIMEOUT_MS 5000

/* seq is the rowid; AUTOINCREMENT so that it never goes back even if the
 * newest rows are deleted one day, as the order of acceptance must not.
 * STRICT: a value of the wrong type is refused rather than kept. The CHECK
 * lists store.c's names, which is also what the rows hold. */
static const char schema_sql[] =
	"CREATE TABLE runs ("
	" seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	" id TEXT NOT NULL UNIQUE,"
	" tenant TEXT NOT NULL,"
	" state TEXT NOT NULL CHECK (state IN"
	"  ('queued','running','succeeded','failed','timed_out','cancelled','lost')),"
	" created_ms INTEGER NOT NULL,"
	" started_ms INTEGER,"
	" finished_ms INTEGER,"
	" request TEXT NOT NULL,"
	" result TEXT,"
	" message TEXT"
	") STRICT;"
	"CREATE INDEX runs_state_seq ON runs (state, seq);"
	"CREATE INDEX runs_tenant ON runs (tenant);"
	"PRAGMA user_version = 1;";   /* SCHEMA_VERSION */

/* The columns read_row reads, in its order. */
#define COLS "id, tenant, state, created_ms, started_ms, finished_ms, request, result, message, seq"

enum stmt_id { ST_INSERT, ST_GET, ST_START, ST_FINISH, ST_EACH, ST_COUNT, ST_N };

static const char *const stmt_sql[ST_N] = {
	[ST_INSERT] = "INSERT INTO runs (id, tenant, state, created_ms, request) VALUES (?1, ?2, 'queued', ?3, ?4)",
	[ST_GET] = "SELECT " COLS " FROM runs WHERE id = ?1 AND (?2 IS NULL OR tenant = ?2)",
	[ST_START] = "UPDATE runs SET state = 'running', started_ms = ?2 WHERE id = ?1 AND state = 'queued'",
	[ST_FINISH] = "UPDATE runs SET state = ?2, finished_ms = ?3, result = ?4, message = ?5"
		      " WHERE id = ?1 AND state IN ('queued', 'running')",
	/* One row per query, after the last one seen, so that no query is
	 * open while each's callback runs (see each). */
	[ST_EACH] = "SELECT " COLS " FROM runs WHERE state = ?1 AND seq > ?2 ORDER BY seq LIMIT 1",
	[ST_COUNT] = "SELECT state, count(*) FROM runs GROUP BY state",
};

struct store_sqlite {
	struct store base;   /* first: the daemon's struct store * points here */
	sqlite3 *db;
	sqlite3_stmt *stmt[ST_N];
};

static struct store_sqlite *backend(struct store *s)
{
	return (struct store_sqlite *)s;
}

static int db_err(struct store_sqlite *s, char *err, size_t errlen)
{
	return errf(err, errlen, "state db: %s", sqlite3_errmsg(s->db));
}

/* Done with a statement: reset so that it holds no lock and no open read
 * (which would also keep the next write from committing), and clear its
 * bindings so that it keeps no pointer into the caller's memory. */
static void release(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* Copy text into a fixed field, cut at a character boundary so that what
 * the API later writes out of it is still valid UTF-8. */
static void copy_text(char *dst, size_t cap, const unsigned char *src)
{
	size_t n = src ? strlen((const char *)src) : 0;
	if (n >= cap) {
		n = cap - 1;
		while (n > 0 && (src[n] & 0xc0) == 0x80)
			n--;
	}
	if (n)
		memcpy(dst, src, n);
	dst[n] = '\0';
}

/* A malloc'd copy of a text column; NULL stays NULL. */
static int dup_column(sqlite3_stmt *st, int col, char **out)
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

/* The current row (COLS) into *out, which owns copies of everything. */
static int read_row(sqlite3_stmt *st, struct store_run *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	copy_text(out->id, sizeof(out->id), sqlite3_column_text(st, 0));
	copy_text(out->tenant, sizeof(out->tenant), sqlite3_column_text(st, 1));
	int state = store_state_parse((const char *)sqlite3_column_text(st, 2));
	if (state < 0)
		return errf(err, errlen, "state db: run %s has an unknown state", out->id);
	out->state = (enum run_state)state;
	out->created_ms = sqlite3_column_int64(st, 3);
	out->started_ms = sqlite3_column_int64(st, 4);   /* NULL reads as 0, "not yet" */
	out->finished_ms = sqlite3_column_int64(st, 5);
	if (dup_column(st, 6, &out->request) < 0 || dup_column(st, 7, &out->result) < 0) {
		store_run_free(out);
		return errf(err, errlen, "state db: out of memory reading run");
	}
	copy_text(out->message, sizeof(out->message), sqlite3_column_text(st, 8));
	out->seq = sqlite3_column_int64(st, 9);
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
		rc = db_err(s, err, errlen);
	release(st);
	return rc;
}

/* Run a bound write to its end (its commit): the rows it changed, or -1. */
static int step_write(struct store_sqlite *s, sqlite3_stmt *st, char *err, size_t errlen)
{
	int rc = sqlite3_step(st) == SQLITE_DONE ? sqlite3_changes(s->db) : db_err(s, err, errlen);
	release(st);
	return rc;
}

/* Bind text that the statement only reads before release (SQLITE_STATIC:
 * no copy); NULL binds NULL. */
static int bind_text(sqlite3_stmt *st, int i, const char *text)
{
	return sqlite3_bind_text(st, i, text, -1, SQLITE_STATIC);
}

static int sq_insert(struct store *base, const struct store_run *run, char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *st = s->stmt[ST_INSERT];
	if (bind_text(st, 1, run->id) || bind_text(st, 2, run->tenant) || sqlite3_bind_int64(st, 3, run->created_ms) ||
	    bind_text(st, 4, run->request)) {
		db_err(s, err, errlen);
		release(st);
		return -1;
	}
	return step_write(s, st, err, errlen) < 0 ? -1 : 0;
}

static int sq_get(struct store *base, const char *id, const char *tenant, struct store_run *out, char *err,
		  size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *st = s->stmt[ST_GET];
	if (bind_text(st, 1, id) || bind_text(st, 2, tenant)) {
		memset(out, 0, sizeof(*out));
		db_err(s, err, errlen);
		release(st);
		return -1;
	}
	return fetch_one(s, st, out, err, errlen);
}

static int sq_start(struct store *base, const char *id, int64_t started_ms, char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *st = s->stmt[ST_START];
	if (bind_text(st, 1, id) || sqlite3_bind_int64(st, 2, started_ms)) {
		db_err(s, err, errlen);
		release(st);
		return -1;
	}
	int n = step_write(s, st, err, errlen);
	return n < 0 ? -1 : n == 1;
}

static int sq_finish(struct store *base, const char *id, enum run_state state, int64_t finished_ms,
		     const char *result, const char *message, char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *st = s->stmt[ST_FINISH];
	const char *name = store_state_name(state);
	if (!store_state_terminal(state))
		return errf(err, errlen, "state db: run %s: %s is not a terminal state", id, name ? name : "(invalid)");
	if (bind_text(st, 1, id) || bind_text(st, 2, name) || sqlite3_bind_int64(st, 3, finished_ms) ||
	    bind_text(st, 4, result) || bind_text(st, 5, message)) {
		db_err(s, err, errlen);
		release(st);
		return -1;
	}
	int n = step_write(s, st, err, errlen);
	return n < 0 ? -1 : n == 1;
}

/* The oldest run in state after seq: 1 and a copy in *out, 0 none, -1. */
static int next_in_state(struct store_sqlite *s, const char *state, int64_t after, struct store_run *out, char *err,
			 size_t errlen)
{
	sqlite3_stmt *st = s->stmt[ST_EACH];
	if (bind_text(st, 1, state) || sqlite3_bind_int64(st, 2, after)) {
		memset(out, 0, sizeof(*out));
		db_err(s, err, errlen);
		release(st);
		return -1;
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

static int sq_count(struct store *base, uint64_t count[RS_COUNT], char *err, size_t errlen)
{
	struct store_sqlite *s = backend(base);
	sqlite3_stmt *st = s->stmt[ST_COUNT];
	memset(count, 0, RS_COUNT * sizeof(count[0]));
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int state = store_state_parse((const char *)sqlite3_column_text(st, 0));
		if (state < 0) {
			release(st);
			return errf(err, errlen, "state db: a run has an unknown state");
		}
		count[state] += (uint64_t)sqlite3_column_int64(st, 1);
	}
	rc = rc == SQLITE_DONE ? 0 : db_err(s, err, errlen);
	release(st);
	return rc;
}

/* Also the cleanup of a half-done open: every field may still be NULL. */
static void sq_close(struct store *base)
{
	struct store_sqlite *s = backend(base);
	for (int i = 0; i < ST_N; i++)
		sqlite3_finalize(s->stmt[i]);
	sqlite3_close(s->db);
	free(s);
}

static const struct store_ops sqlite_ops = {
	.insert = sq_insert,
	.get = sq_get,
	.start = sq_start,
	.finish = sq_finish,
	.each = sq_each,
	.count = sq_count,
	.close = sq_close,
};

/* Open's failures name the file, which the daemon's operator must find. */
static int open_err(struct store_sqlite *s, const char *path, char *err, size_t errlen)
{
	return errf(err, errlen, "state db %s: %s", path, sqlite3_errmsg(s->db));
}

static int exec(struct store_sqlite *s, const char *sql, const char *path, char *err, size_t errlen)
{
	return sqlite3_exec(s->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : open_err(s, path, err, errlen);
}

/* A PRAGMA's one value, as text. */
static int pragma(struct store_sqlite *s, const char *sql, char *out, size_t cap, const char *path, char *err,
		  size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc = -1;
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
		open_err(s, path, err, errlen);
		goto out;
	}
	int step = sqlite3_step(st);
	if (step != SQLITE_ROW) {
		if (step == SQLITE_DONE)
			errf(err, errlen, "state db %s: %s gave no value", path, sql);
		else
			open_err(s, path, err, errlen);
		goto out;
	}
	copy_text(out, cap, sqlite3_column_text(st, 0));
	rc = 0;
out:
	sqlite3_finalize(st);
	return rc;
}

/* The connection's settings; journal_mode is the first read of the file,
 * so it is also where a file that is not SQLite is found. */
static int configure(struct store_sqlite *s, const char *path, char *err, size_t errlen)
{
	char mode[16];
	sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
	if (pragma(s, "PRAGMA journal_mode = WAL", mode, sizeof(mode), path, err, errlen) < 0)
		return -1;
	/* Not WAL (a file system without shared memory, say): FULL below
	 * would still be durable, but the file would be in a mode nobody
	 * tested, so say so instead. */
	if (strcmp(mode, "wal"))
		return errf(err, errlen, "state db %s: journal mode is %s, not wal", path, mode);
	return exec(s, "PRAGMA synchronous = FULL", path, err, errlen);
}

/* Create the schema in a new file, or check an existing file's version.
 * In one write transaction, so that two daemons started at once on a new
 * file do not both create it. */
static int schema(struct store_sqlite *s, const char *path, char *err, size_t errlen)
{
	char text[32];
	int rc = -1;
	if (exec(s, "BEGIN IMMEDIATE", path, err, errlen) < 0)
		return -1;
	if (pragma(s, "PRAGMA user_version", text, sizeof(text), path, err, errlen) < 0)
		goto out;
	long version = strtol(text, NULL, 10);
	if (version > SCHEMA_VERSION) {
		errf(err, errlen, "state db %s: schema version %ld is newer than this vmrund's (%d); use a newer vmrund",
		     path, version, SCHEMA_VERSION);
		goto out;
	}
	if (version < 0) {
		errf(err, errlen, "state db %s: unknown schema version %ld", path, version);
		goto out;
	}
	if (version == 0 && exec(s, schema_sql, path, err, errlen) < 0)
		goto out;
	rc = exec(s, "COMMIT", path, err, errlen);
out:
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

static int prepare_all(struct store_sqlite *s, const char *path, char *err, size_t errlen)
{
	for (int i = 0; i < ST_N; i++)
		if (sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->stmt[i], NULL) != SQLITE_OK)
			return open_err(s, path, err, errlen);
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
	if (configure(s, path, err, errlen) < 0 || schema(s, path, err, errlen) < 0 ||
	    prepare_all(s, path, err, errlen) < 0)
		goto fail;
	return &s->base;
fail:
	sq_close(&s->base);
	return NULL;
}
