/* The SQLite store's file (store_sqlite.h): its connection's settings,
 * and the schema, created in a new file or migrated in an older one.
 * What the calls do with it is store_sqlite.c's. */
#include "store_sqlite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "store_sandbox.h"

#define SCHEMA_VERSION  8
#define BUSY_TIMEOUT_MS 5000

/* What version 2 added beside runs' columns, shared by a new file's
 * schema and the migration so that both files end up alike. */
#define SCHEMA_2_ADDED \
	"CREATE INDEX runs_state_tenant_seq ON runs (state, tenant, seq);" \
	"CREATE INDEX runs_tenant_started ON runs (tenant, started_ms);" \
	"CREATE TABLE nodes (name TEXT PRIMARY KEY, lease_until_ms INTEGER NOT NULL) STRICT, WITHOUT ROWID;" \
	"CREATE TABLE blobs (id TEXT NOT NULL, name TEXT NOT NULL, data BLOB NOT NULL," \
	" PRIMARY KEY (id, name)) STRICT, WITHOUT ROWID;"

/* What version 3 added: the outcome's columns (store.h), so that the
 * metrics, the audit log and the API read how a run ended without parsing
 * its result. limits_hit is result.h's LIMIT_* bits. */
#define COL_OUTCOME     "outcome TEXT CHECK (outcome IN ('succeeded','failed','timed_out'))"
#define COL_TERMINATION "termination TEXT"
#define COL_LIMITS_HIT  "limits_hit INTEGER NOT NULL DEFAULT 0"

/* What version 4 added: the tenants' idempotency keys (store.h), each
 * with the run it made; they go with that run. */
#define SCHEMA_4_ADDED                                                                                   \
	"CREATE TABLE idem (tenant TEXT NOT NULL, key TEXT NOT NULL, hash TEXT NOT NULL, id TEXT NOT NULL," \
	" created_ms INTEGER NOT NULL, PRIMARY KEY (tenant, key)) STRICT, WITHOUT ROWID;"

/* The sandboxes' table named name, its states' CHECK the SQL list states:
 * version 5's, and version 6's with paused and failed. */
#define SANDBOXES_TABLE(name, states)                                                                              \
	"CREATE TABLE " name " ("                                                                                   \
	" seq INTEGER PRIMARY KEY AUTOINCREMENT,"                                                                   \
	" id TEXT NOT NULL UNIQUE,"                                                                                 \
	" tenant TEXT NOT NULL,"                                                                                    \
	" node TEXT NOT NULL,"                                                                                      \
	" state TEXT NOT NULL CHECK (state IN " states "),"                                                        \
	" created_ms INTEGER NOT NULL,"                                                                             \
	" started_ms INTEGER,"                                                                                      \
	" ended_ms INTEGER,"                                                                                        \
	" timeout_at_ms INTEGER,"                                                                                   \
	" memory_mib INTEGER NOT NULL CHECK (memory_mib >= 0),"                                                     \
	" disk_mib INTEGER NOT NULL CHECK (disk_mib >= 0),"                                                         \
	" request TEXT NOT NULL,"                                                                                   \
	" reason TEXT"                                                                                              \
	") STRICT;"

/* What version 5 added: the sandboxes (store.h), each held by the node
 * that started it, and their idempotency keys, a namespace apart from the
 * runs'. seq AUTOINCREMENT as the runs' (creation order never goes back,
 * whatever sbx_drop deleted); times NULL: not yet. The indexes are the
 * lookups the calls make: (tenant, state) for a tenant's open ones,
 * counted and summed at each create; (node, state) for a node's open
 * ones, lost with it. The keys go with their sandbox (sbx_drop). */
#define SCHEMA_5_ADDED                                                                                              \
	SANDBOXES_TABLE("sandboxes", "('starting','running','stopping','stopped','lost')")                          \
	"CREATE INDEX sandboxes_tenant_state ON sandboxes (tenant, state);"                                         \
	"CREATE INDEX sandboxes_node_state ON sandboxes (node, state);"                                             \
	"CREATE TABLE sandbox_idem (tenant TEXT NOT NULL, key TEXT NOT NULL, hash TEXT NOT NULL, id TEXT NOT NULL," \
	" created_ms INTEGER NOT NULL, PRIMARY KEY (tenant, key)) STRICT, WITHOUT ROWID;"

/* Version 6: a sandbox may be paused, or failed (store.h): the CHECK on
 * its state widens, which SQLite does by building the table anew. */
#define SCHEMA_6_CHANGED                                                                                            \
	SANDBOXES_TABLE("sandboxes_6", STORE_SBX_STATES)                                                            \
	"INSERT INTO sandboxes_6 (" STORE_SBX_COLS ") SELECT " STORE_SBX_COLS " FROM sandboxes;"                    \
	"DROP TABLE sandboxes;"                                                                                     \
	"ALTER TABLE sandboxes_6 RENAME TO sandboxes;"                                                              \
	"CREATE INDEX sandboxes_tenant_state ON sandboxes (tenant, state);"                                         \
	"CREATE INDEX sandboxes_node_state ON sandboxes (node, state);"

/* Version 7: a lost sandbox may be resumable from its checkpoints
 * (store.h): the table built anew once more, over STORE_SBX_STATES as it
 * is now. */
#define SCHEMA_7_CHANGED                                                                                            \
	SANDBOXES_TABLE("sandboxes_7", STORE_SBX_STATES)                                                            \
	"INSERT INTO sandboxes_7 (" STORE_SBX_COLS ") SELECT " STORE_SBX_COLS " FROM sandboxes;"                    \
	"DROP TABLE sandboxes;"                                                                                     \
	"ALTER TABLE sandboxes_7 RENAME TO sandboxes;"                                                              \
	"CREATE INDEX sandboxes_tenant_state ON sandboxes (tenant, state);"                                         \
	"CREATE INDEX sandboxes_node_state ON sandboxes (node, state);"

/* Version 8: a tenant's runs, newest first (store.h's list). */
#define SCHEMA_8_ADDED "CREATE INDEX IF NOT EXISTS runs_tenant_seq ON runs (tenant, seq);"

/* seq is the rowid; AUTOINCREMENT so that it never goes back even if the
 * newest rows are deleted one day, as the order of acceptance must not.
 * STRICT: a value of the wrong type is refused rather than kept. The CHECK
 * lists store.c's names, which is also what the rows hold. node NULL: no
 * node holds or held it. The indexes are the lookups the calls make:
 * (state, seq) for each and the whole queue's count, (state, tenant, seq)
 * for a tenant's open runs and its oldest queued, (tenant, started_ms)
 * for when a tenant last started a run. */
static const char schema_sql[] =
	"CREATE TABLE runs ("
	" seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	" id TEXT NOT NULL UNIQUE,"
	" tenant TEXT NOT NULL,"
	" state TEXT NOT NULL CHECK (state IN"
	"  ('queued','running','succeeded','failed','timed_out','cancelled','lost')),"
	" created_ms INTEGER NOT NULL,"
	" started_ms INTEGER,"
	" command_ms INTEGER,"
	" finished_ms INTEGER,"
	" request TEXT NOT NULL,"
	" result TEXT,"
	" message TEXT,"
	" node TEXT,"
	" cancel INTEGER NOT NULL DEFAULT 0 CHECK (cancel IN (0, 1)),"
	" " COL_OUTCOME ", " COL_TERMINATION ", " COL_LIMITS_HIT
	") STRICT;"
	"CREATE INDEX runs_state_seq ON runs (state, seq);"
	SCHEMA_2_ADDED
	SCHEMA_4_ADDED
	SCHEMA_5_ADDED
	SCHEMA_6_CHANGED
	SCHEMA_7_CHANGED
	SCHEMA_8_ADDED
	"PRAGMA user_version = 8;";   /* SCHEMA_VERSION */

/* Version 1 (one node, no blobs) to 2, in the transaction that read the
 * version. The added columns land after message in a migrated file, which
 * nothing notices: rows are read by name (STORE_COLS). runs_tenant goes
 * because runs_tenant_started serves every lookup it did. A v1 run left
 * running belonged to a vmrund that has stopped (this one is starting),
 * and whether its command had started is not known: it ends lost, as v1
 * itself would have ended it. */
static const char migrate_1_sql[] =
	"ALTER TABLE runs ADD COLUMN command_ms INTEGER;"
	"ALTER TABLE runs ADD COLUMN node TEXT;"
	"ALTER TABLE runs ADD COLUMN cancel INTEGER NOT NULL DEFAULT 0 CHECK (cancel IN (0, 1));"
	"DROP INDEX runs_tenant;"
	"UPDATE runs SET state = 'lost', finished_ms = CAST(strftime('%s', 'now') AS INTEGER) * 1000,"
	" message = 'lost: vmrund stopped while the run was running; its VM was destroyed' WHERE state = 'running';"
	SCHEMA_2_ADDED
	"PRAGMA user_version = 2;";

/* Version 2 to 3. The runs that ended before keep no outcome in the new
 * columns (their results still hold it); the readers take that as none. */
static const char migrate_2_sql[] =
	"ALTER TABLE runs ADD COLUMN " COL_OUTCOME ";"
	"ALTER TABLE runs ADD COLUMN " COL_TERMINATION ";"
	"ALTER TABLE runs ADD COLUMN " COL_LIMITS_HIT ";"
	"PRAGMA user_version = 3;";

/* Version 3 to 4. */
static const char migrate_3_sql[] = SCHEMA_4_ADDED "PRAGMA user_version = 4;";

/* Version 4 to 5. */
static const char migrate_4_sql[] = SCHEMA_5_ADDED "PRAGMA user_version = 5;";

/* Version 5 to 6. */
static const char migrate_5_sql[] = SCHEMA_6_CHANGED "PRAGMA user_version = 6;";

/* Version 6 to 7. */
static const char migrate_6_sql[] = SCHEMA_7_CHANGED "PRAGMA user_version = 7;";

/* Version 7 to 8. */
static const char migrate_7_sql[] = SCHEMA_8_ADDED "PRAGMA user_version = 8;";

/* Open's failures name the file, which the daemon's operator must find. */
static int open_err(sqlite3 *db, const char *path, char *err, size_t errlen)
{
	return errf(err, errlen, "state db %s: %s", path, sqlite3_errmsg(db));
}

static int exec(sqlite3 *db, const char *sql, const char *path, char *err, size_t errlen)
{
	return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : open_err(db, path, err, errlen);
}

/* A PRAGMA's one value, as text. */
static int pragma(sqlite3 *db, const char *sql, char *out, size_t cap, const char *path, char *err,
		  size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc = -1;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		open_err(db, path, err, errlen);
		goto out;
	}
	int step = sqlite3_step(st);
	if (step != SQLITE_ROW) {
		if (step == SQLITE_DONE)
			errf(err, errlen, "state db %s: %s gave no value", path, sql);
		else
			open_err(db, path, err, errlen);
		goto out;
	}
	store_copy_text(out, cap, (const char *)sqlite3_column_text(st, 0));
	rc = 0;
out:
	sqlite3_finalize(st);
	return rc;
}

/* The connection's settings; journal_mode is the first read of the file,
 * so it is also where a file that is not SQLite is found. */
static int configure(sqlite3 *db, const char *path, char *err, size_t errlen)
{
	char mode[16];
	sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
	if (pragma(db, "PRAGMA journal_mode = WAL", mode, sizeof(mode), path, err, errlen) < 0)
		return -1;
	/* Not WAL (a file system without shared memory, say): FULL below
	 * would still be durable, but the file would be in a mode nobody
	 * tested, so say so instead. */
	if (strcmp(mode, "wal"))
		return errf(err, errlen, "state db %s: journal mode is %s, not wal", path, mode);
	return exec(db, "PRAGMA synchronous = FULL", path, err, errlen);
}

/* Create the schema in a new file, migrate an older one, or check an
 * existing file's version. In one write transaction, so that two daemons
 * started at once on a new or old file do not both create or migrate it,
 * and a migration that fails half-way leaves the file as it was. */
static int schema(sqlite3 *db, const char *path, char *err, size_t errlen)
{
	char text[32];
	int rc = -1;
	if (exec(db, "BEGIN IMMEDIATE", path, err, errlen) < 0)
		return -1;
	if (pragma(db, "PRAGMA user_version", text, sizeof(text), path, err, errlen) < 0)
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
	if (version == 0 && exec(db, schema_sql, path, err, errlen) < 0)
		goto out;
	if (version == 1 && exec(db, migrate_1_sql, path, err, errlen) < 0)
		goto out;
	if (version >= 1 && version <= 2 && exec(db, migrate_2_sql, path, err, errlen) < 0)
		goto out;
	if (version >= 1 && version <= 3 && exec(db, migrate_3_sql, path, err, errlen) < 0)
		goto out;
	if (version >= 1 && version <= 4 && exec(db, migrate_4_sql, path, err, errlen) < 0)
		goto out;
	if (version >= 1 && version <= 5 && exec(db, migrate_5_sql, path, err, errlen) < 0)
		goto out;
	if (version >= 1 && version <= 6 && exec(db, migrate_6_sql, path, err, errlen) < 0)
		goto out;
	if (version >= 1 && version <= 7 && exec(db, migrate_7_sql, path, err, errlen) < 0)
		goto out;
	rc = exec(db, "COMMIT", path, err, errlen);
out:
	if (!sqlite3_get_autocommit(db))
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

int store_sqlite_setup(sqlite3 *db, const char *path, char *err, size_t errlen)
{
	return configure(db, path, err, errlen) < 0 ? -1 : schema(db, path, err, errlen);
}
