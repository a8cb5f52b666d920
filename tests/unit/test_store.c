/* vmrund's store (host/vmrund/store.h) as a conformance suite that every
 * backend must pass: the store opened is VMRUN_TEST_STORE when it is set
 * (a postgresql:// URI), else a SQLite file in a new directory per test.
 * A PostgreSQL store is shared by every test and every run of the suite,
 * so each test names its own tenants, nodes and ids (a random prefix per
 * test), reads count() as deltas, and looks only at its own tenants' rows
 * in each() and expire()'s calls. The tests of the SQLite file itself
 * (its schema, migration, the files it refuses, its descriptors) skip
 * themselves when VMRUN_TEST_STORE is set. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "scheduler.h"
#include "store.h"

static bool pg;             /* VMRUN_TEST_STORE is set: a shared store */
static char dir[64];
static char spec[1024];
static char err[512];
static char pfx[16];        /* this test's tenants and nodes start with it */
static uint64_t idbase;     /* and its ids */

static uint64_t random64(void)
{
	uint64_t v = 0;
	FILE *f = fopen("/dev/urandom", "rb");
	if (!f || fread(&v, sizeof(v), 1, f) != 1)
		v = (uint64_t)time(NULL) * 6364136223846793005ull ^ (uint64_t)getpid();
	if (f)
		fclose(f);
	return v;
}

static int setup(void **state)
{
	(void)state;
	const char *env = getenv("VMRUN_TEST_STORE");
	pg = env && *env;
	uint64_t r = random64();
	snprintf(pfx, sizeof(pfx), "t%08" PRIx32, (uint32_t)r);
	idbase = random64();
	err[0] = '\0';
	if (pg) {
		snprintf(spec, sizeof(spec), "%s", env);
		return 0;
	}
	snprintf(dir, sizeof(dir), "/tmp/test_store.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(spec, sizeof(spec), "%s/state.db", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (pg)
		return 0;
	char cmd[96];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

static struct store *open_store(void)
{
	struct store *s = store_open(spec, err, sizeof(err));
	if (!s)
		fail_msg("open: %s", err);
	return s;
}

/* Names by value, so that no buffer is shared: nm("a").s lives to the end
 * of the expression that uses it. */
struct text {
	char s[STORE_TENANT_MAX];
};

/* This test's tenant or node what. */
static struct text nm(const char *what)
{
	struct text t;
	snprintf(t.s, sizeof(t.s), "%s-%s", pfx, what);
	return t;
}

/* This test's run n. */
static struct text id_of(unsigned n)
{
	struct text t;
	snprintf(t.s, sizeof(t.s), "%016" PRIx64 "%016x", idbase, n);
	return t;
}

/* Whether a row is this test's (its tenant has the test's prefix). */
static bool mine(const struct store_run *run)
{
	return !strncmp(run->tenant, pfx, strlen(pfx)) && run->tenant[strlen(pfx)] == '-';
}

/* Which of this test's runs an id is. */
static unsigned num_of(const char *id)
{
	return (unsigned)strtoul(id + 16, NULL, 16);
}

/* Tenants as the daemon's file would give them; x is not copied around
 * (ts.t points into it). */
struct tset {
	struct tenant t[4];
	struct tenants ts;
};

static void tset_add(struct tset *x, const char *what, unsigned concurrent, unsigned queued)
{
	assert_true(x->ts.n < 4);
	struct tenant *t = &x->t[x->ts.n++];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", nm(what).s);
	t->concurrent = concurrent;
	t->queued = queued;
	t->rate = 10;
	t->burst = 20;
	x->ts.t = x->t;
}

static struct tenant limits(unsigned concurrent, unsigned queued)
{
	struct tenant t = { .concurrent = concurrent, .queued = queued, .rate = 10, .burst = 20 };
	return t;
}

/* A run as the daemon would submit it; the fields a new run does not
 * take from its caller hold values the store must ignore. */
static struct store_run new_run(unsigned n, const char *tenant, const char *request)
{
	struct store_run r;
	memset(&r, 0, sizeof(r));
	memcpy(r.id, id_of(n).s, sizeof(r.id));   /* 32 hex and the NUL */
	snprintf(r.tenant, sizeof(r.tenant), "%s", tenant);
	r.state = RS_SUCCEEDED;
	r.created_ms = 1000 + n;
	r.started_ms = 77;
	r.command_ms = 78;
	r.request = (char *)request;
	r.seq = 12345;
	snprintf(r.node, sizeof(r.node), "nobody");
	r.cancel = true;
	return r;
}

static int submit(struct store *s, unsigned n, const char *tenant, const char *request, unsigned concurrent,
		  unsigned queued, unsigned queue_max)
{
	struct store_run r = new_run(n, tenant, request);
	struct tenant lim = limits(concurrent, queued);
	return s->ops->submit(s, &r, NULL, &lim, queue_max, err, sizeof(err));
}

/* Submitted with room to spare. */
static void put(struct store *s, unsigned n, const char *tenant, const char *request)
{
	if (submit(s, n, tenant, request, 100000, 100000, UINT_MAX) != SCHED_ACCEPT)
		fail_msg("submit %u: %s", n, err);
}

static struct store_run get(struct store *s, unsigned n)
{
	struct store_run r;
	if (s->ops->get(s, id_of(n).s, NULL, &r, err, sizeof(err)) != 1)
		fail_msg("get %u: not found (%s)", n, err);
	return r;
}

static enum run_state state_of(struct store *s, unsigned n)
{
	struct store_run r = get(s, n);
	enum run_state st = r.state;
	store_run_free(&r);
	return st;
}

static int by_num(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return (x > y) - (x < y);
}

/* A claim's started_ms is the now it was given, plus, on PostgreSQL, the
 * time it waited for the cluster's claim lock (rounded up), so that it
 * never falls before the end of a run it took the place of. */
#define CLAIM_WAIT_MAX_MS 5000

/* Claim and keep only the numbers, sorted: store.h gives claim's rows no
 * order, and a test's numbers grow with seq within each tenant. */
static int claim_nums(struct store *s, const char *node, unsigned n, const struct tenants *ts, int64_t now,
		      unsigned *nums)
{
	struct store_run out[16];
	assert_true(n <= 16);
	int got = s->ops->claim(s, node, n, ts, NULL, NULL, now, out, err, sizeof(err));
	if (got < 0)
		fail_msg("claim: %s", err);
	assert_true((unsigned)got <= n);
	for (int i = 0; i < got; i++) {
		assert_int_equal(out[i].state, RS_RUNNING);
		assert_string_equal(out[i].node, node);
		assert_in_range(out[i].started_ms, now, now + CLAIM_WAIT_MAX_MS);
		assert_true(tenants_by_name(ts, out[i].tenant) >= 0);   /* only ts's */
		nums[i] = num_of(out[i].id);
		store_run_free(&out[i]);
	}
	qsort(nums, (size_t)got, sizeof(*nums), by_num);
	return got;
}

/* Claim and check that the runs are want's (ascending). */
static void claims(struct store *s, const char *node, unsigned n, const struct tenants *ts, int64_t now,
		   unsigned want_n, const unsigned *want)
{
	unsigned got[16];
	int k = claim_nums(s, node, n, ts, now, got);
	if ((unsigned)k != want_n)
		fail_msg("claimed %d, wanted %u", k, want_n);
	for (unsigned i = 0; i < want_n; i++)
		if (got[i] != want[i])
			fail_msg("claim %u: got run %u, wanted %u", i, got[i], want[i]);
}

static void finish_ok(struct store *s, unsigned n, const char *node, enum run_state st)
{
	if (s->ops->finish(s, id_of(n).s, node, st, 5000, NULL, NULL, NULL, err, sizeof(err)) != 1)
		fail_msg("finish %u: %s", n, err);
}

static uint64_t counted(struct store *s, enum run_state st)
{
	uint64_t c[RS_COUNT];
	if (s->ops->count(s, c, err, sizeof(err)))
		fail_msg("count: %s", err);
	return c[st];
}

static void one_line(void)
{
	assert_true(err[0] != '\0');
	assert_null(strchr(err, '\n'));
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts))
		;
}

/* ---- The SQLite file, read past the store as an operator would. ---- */

static long long raw_int(const char *sql)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_open_v2(spec, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	long long v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return v;
}

/* The names of path's tables and indexes, sorted, into out. */
static void raw_names(const char *path, char *out, size_t cap)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h,
					    "SELECT group_concat(type || ':' || name, ' ') FROM (SELECT type, name"
					    " FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY name)",
					    -1, &st, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	snprintf(out, cap, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(h);
}

static int raw_exec_rc(const char *sql)
{
	sqlite3 *h;
	assert_int_equal(sqlite3_open_v2(spec, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL), SQLITE_OK);
	int rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
	sqlite3_close(h);
	return rc;
}

static void raw_exec(const char *sql)
{
	assert_int_equal(raw_exec_rc(sql), SQLITE_OK);
}

static void sqlite_creates_schema(void **state)
{
	(void)state;
	if (pg)
		skip();
	struct store *s = open_store();
	assert_int_equal(access(spec, F_OK), 0);
	uint64_t count[RS_COUNT];
	assert_int_equal(s->ops->count(s, count, err, sizeof(err)), 0);
	for (int i = 0; i < RS_COUNT; i++)
		assert_int_equal(count[i], 0);
	store_close(s);
	assert_int_equal(raw_int("PRAGMA user_version"), 8);
	char names[512];
	raw_names(spec, names, sizeof(names));
	assert_string_equal(names, "table:blobs table:idem table:nodes table:runs index:runs_state_seq"
				   " index:runs_state_tenant_seq index:runs_tenant_seq index:runs_tenant_started table:sandbox_idem"
				   " table:sandboxes index:sandboxes_node_state index:sandboxes_tenant_state");
	/* WAL is a property of the file: it stays after close. */
	assert_int_equal(raw_int("SELECT journal_mode = 'wal' FROM pragma_journal_mode"), 1);
	/* The CHECKs keep values the code does not know out of the file. */
	assert_int_not_equal(raw_exec_rc("INSERT INTO runs (id, tenant, state, created_ms, request)"
					 " VALUES ('x', 't', 'paused', 1, '{}')"),
			     SQLITE_OK);
	assert_int_not_equal(raw_exec_rc("INSERT INTO runs (id, tenant, state, created_ms, request, cancel)"
					 " VALUES ('x', 't', 'queued', 1, '{}', 2)"),
			     SQLITE_OK);
	assert_int_not_equal(raw_exec_rc("INSERT INTO runs (id, tenant, state, created_ms, request, outcome)"
					 " VALUES ('x', 't', 'failed', 1, '{}', 'paused')"),
			     SQLITE_OK);
	assert_int_not_equal(raw_exec_rc("INSERT INTO sandboxes (id, tenant, node, state, created_ms, memory_mib,"
					 " disk_mib, request) VALUES ('x', 't', 'n', 'sleeping', 1, 1, 1, '{}')"),
			     SQLITE_OK);
	assert_int_not_equal(raw_exec_rc("INSERT INTO sandboxes (id, tenant, node, state, created_ms, memory_mib,"
					 " disk_mib, request) VALUES ('x', 't', 'n', 'running', 1, -1, 1, '{}')"),
			     SQLITE_OK);
	/* Opening again an existing file keeps it. */
	s = open_store();
	store_close(s);
	store_close(NULL);
	assert_int_equal(raw_int("PRAGMA user_version"), 8);
}

/* Version 1's schema exactly as vmrund 1 created it. */
static const char v1_schema[] =
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
	"PRAGMA user_version = 1;";

static void write_v1(const char *extra)
{
	char sql[4096];
	snprintf(sql, sizeof(sql),
		 "%s INSERT INTO runs (id, tenant, state, created_ms, request)"
		 " VALUES ('%s', 'alice', 'queued', 10, '{\"q\":1}');"
		 "INSERT INTO runs (id, tenant, state, created_ms, started_ms, finished_ms, request, result, message)"
		 " VALUES ('%s', 'bob', 'failed', 20, 21, 22, '{}', '{\"exit\":1}', 'exit status 1');"
		 "INSERT INTO runs (id, tenant, state, created_ms, started_ms, request)"
		 " VALUES ('%s', 'bob', 'running', 30, 31, '{}');"
		 "%s",
		 v1_schema, id_of(1).s, id_of(2).s, id_of(3).s, extra);
	raw_exec(sql);
}

static void sqlite_migrates_v1(void **state)
{
	(void)state;
	if (pg)
		skip();
	/* A migration that fails half-way (here: an index it drops is not
	 * there) leaves the file as it was, still version 1. */
	write_v1("DROP INDEX runs_tenant;");
	assert_null(store_open(spec, err, sizeof(err)));
	one_line();
	assert_non_null(strstr(err, spec));
	assert_int_equal(raw_int("PRAGMA user_version"), 1);
	assert_int_equal(raw_int("SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'node'"), 0);
	assert_int_equal(raw_int("SELECT count(*) FROM sqlite_schema WHERE name IN ('nodes', 'blobs')"), 0);
	unlink(spec);

	write_v1("");
	struct store *s = open_store();
	assert_int_equal(raw_int("PRAGMA user_version"), 8);
	struct store_run r = get(s, 1);
	assert_string_equal(r.tenant, "alice");
	assert_int_equal(r.state, RS_QUEUED);
	assert_int_equal(r.created_ms, 10);
	assert_string_equal(r.request, "{\"q\":1}");
	assert_int_equal(r.command_ms, 0);
	assert_string_equal(r.node, "");
	assert_false(r.cancel);
	store_run_free(&r);
	r = get(s, 2);
	assert_int_equal(r.state, RS_FAILED);
	assert_int_equal(r.started_ms, 21);
	assert_int_equal(r.finished_ms, 22);
	assert_string_equal(r.result, "{\"exit\":1}");
	assert_string_equal(r.message, "exit status 1");
	assert_false(r.has_outcome);   /* ended before the outcome's columns */
	int64_t seq2 = r.seq;
	store_run_free(&r);
	/* A v1 run left running was a stopped vmrund's, its command
	 * perhaps started: it ends lost, as v1 would have ended it. */
	r = get(s, 3);
	assert_int_equal(r.state, RS_LOST);
	assert_true(r.finished_ms > 0);
	assert_non_null(strstr(r.message, "stopped while the run was running"));
	store_run_free(&r);
	/* It works as a new file does: the old queued run is claimed first. */
	struct tset x = { 0 };
	tset_add(&x, "a", 4, 64);
	snprintf(x.t[0].name, sizeof(x.t[0].name), "alice");
	put(s, 4, "alice", "{}");
	claims(s, nm("n").s, 4, &x.ts, 100, 2, (unsigned[]){ 1, 4 });
	r = get(s, 4);
	assert_true(r.seq > seq2);
	store_run_free(&r);
	assert_int_equal(s->ops->put_blob(s, id_of(2).s, "output", (const uint8_t *)"x", 1, err, sizeof(err)), 0);
	store_close(s);
	/* The same tables and indexes as a new file's. */
	char migrated[512], fresh[512], path[160];
	raw_names(spec, migrated, sizeof(migrated));
	snprintf(path, sizeof(path), "%s/fresh.db", dir);
	s = store_open(path, err, sizeof(err));
	assert_non_null(s);
	store_close(s);
	raw_names(path, fresh, sizeof(fresh));
	assert_string_equal(migrated, fresh);
	/* Once. */
	s = open_store();
	store_close(s);
	assert_int_equal(raw_int("PRAGMA user_version"), 8);

	/* Version 4 (this file as it was before the sandboxes) to 5: a
	 * migration that fails half-way (a table it creates is there) leaves
	 * it as it was; one that runs adds the sandboxes' tables and keeps the
	 * runs. */
	raw_exec("DROP TABLE sandboxes; DROP TABLE sandbox_idem; PRAGMA user_version = 4;"
		 "CREATE TABLE sandbox_idem (x INTEGER) STRICT;");
	assert_null(store_open(spec, err, sizeof(err)));
	one_line();
	assert_non_null(strstr(err, spec));
	assert_int_equal(raw_int("PRAGMA user_version"), 4);
	assert_int_equal(raw_int("SELECT count(*) FROM sqlite_schema WHERE name = 'sandboxes'"), 0);
	raw_exec("DROP TABLE sandbox_idem;");
	s = open_store();
	assert_int_equal(raw_int("PRAGMA user_version"), 8);
	raw_names(spec, migrated, sizeof(migrated));
	assert_string_equal(migrated, fresh);
	r = get(s, 4);
	assert_string_equal(r.tenant, "alice");
	store_run_free(&r);
	struct tenant lim = { .sandboxes = 1 };
	struct store_sandbox sb = { .tenant = "alice", .node = "n", .created_ms = 10, .memory_mib = 512,
				    .disk_mib = 256, .request = "{}" };
	memcpy(sb.id, id_of(9).s, sizeof(sb.id));
	assert_int_equal(s->ops->sbx_create(s, &sb, NULL, &lim, err, sizeof(err)), 0);
	assert_int_equal(s->ops->sbx_create(s, &sb, NULL, &lim, err, sizeof(err)), STORE_SBX_OVER_COUNT);
	store_close(s);

	/* Version 5 (its sandboxes' states without paused and failed) to 6:
	 * the table is built anew with its rows, and a row may then pause. */
	raw_exec("CREATE TABLE v5 (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL,"
		 " node TEXT NOT NULL, state TEXT NOT NULL CHECK (state IN ('starting','running','stopping','stopped','lost')),"
		 " created_ms INTEGER NOT NULL, started_ms INTEGER, ended_ms INTEGER, timeout_at_ms INTEGER,"
		 " memory_mib INTEGER NOT NULL CHECK (memory_mib >= 0), disk_mib INTEGER NOT NULL CHECK (disk_mib >= 0),"
		 " request TEXT NOT NULL, reason TEXT) STRICT;"
		 "INSERT INTO v5 SELECT * FROM sandboxes; DROP TABLE sandboxes; ALTER TABLE v5 RENAME TO sandboxes;"
		 "CREATE INDEX sandboxes_tenant_state ON sandboxes (tenant, state);"
		 "CREATE INDEX sandboxes_node_state ON sandboxes (node, state); PRAGMA user_version = 5;");
	assert_int_not_equal(raw_exec_rc("UPDATE sandboxes SET state = 'paused'"), SQLITE_OK);
	s = open_store();
	assert_int_equal(raw_int("PRAGMA user_version"), 8);
	raw_names(spec, migrated, sizeof(migrated));
	assert_string_equal(migrated, fresh);
	assert_int_equal(s->ops->sbx_set(s, sb.id, "n", SBS_PAUSED, 0, 0, 0, NULL, err, sizeof(err)), 1);
	struct store_sandbox got;
	assert_int_equal(s->ops->sbx_get(s, sb.id, NULL, &got, err, sizeof(err)), 1);
	assert_int_equal(got.state, SBS_PAUSED);
	assert_int_equal(got.memory_mib, 512);
	store_sandbox_free(&got);
	store_close(s);

	/* Version 6 (without resumable) to 7: built anew, and a lost row may
	 * then become resumable. */
	raw_exec("CREATE TABLE v6 (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL,"
		 " node TEXT NOT NULL, state TEXT NOT NULL CHECK (state IN"
		 " ('starting','running','stopping','stopped','lost','paused','failed')),"
		 " created_ms INTEGER NOT NULL, started_ms INTEGER, ended_ms INTEGER, timeout_at_ms INTEGER,"
		 " memory_mib INTEGER NOT NULL CHECK (memory_mib >= 0), disk_mib INTEGER NOT NULL CHECK (disk_mib >= 0),"
		 " request TEXT NOT NULL, reason TEXT) STRICT;"
		 "INSERT INTO v6 SELECT * FROM sandboxes; DROP TABLE sandboxes; ALTER TABLE v6 RENAME TO sandboxes;"
		 "CREATE INDEX sandboxes_tenant_state ON sandboxes (tenant, state);"
		 "CREATE INDEX sandboxes_node_state ON sandboxes (node, state); PRAGMA user_version = 6;");
	assert_int_not_equal(raw_exec_rc("UPDATE sandboxes SET state = 'resumable'"), SQLITE_OK);
	s = open_store();
	assert_int_equal(raw_int("PRAGMA user_version"), 8);
	raw_names(spec, migrated, sizeof(migrated));
	assert_string_equal(migrated, fresh);
	assert_int_equal(s->ops->sbx_set(s, sb.id, "n", SBS_LOST, 0, 20, 0, "lost", err, sizeof(err)), 1);
	assert_int_equal(s->ops->sbx_move(s, sb.id, "n", SBS_LOST, "", SBS_RESUMABLE, 0, "from cp", err, sizeof(err)), 1);
	assert_int_equal(s->ops->sbx_get(s, sb.id, NULL, &got, err, sizeof(err)), 1);
	assert_int_equal(got.state, SBS_RESUMABLE);
	store_sandbox_free(&got);
	store_close(s);
}

static void sqlite_refuses_not_sqlite(void **state)
{
	(void)state;
	if (pg)
		skip();
	FILE *f = fopen(spec, "w");
	assert_non_null(f);
	for (int i = 0; i < 512; i++)
		fputs("this is not a database, only text. ", f);
	fclose(f);
	assert_null(store_open(spec, err, sizeof(err)));
	assert_non_null(strstr(err, spec));
	assert_non_null(strstr(err, "not a database"));
	one_line();
}

static void sqlite_refuses_newer_schema(void **state)
{
	(void)state;
	if (pg)
		skip();
	store_close(open_store());
	raw_exec("PRAGMA user_version = 9");
	assert_null(store_open(spec, err, sizeof(err)));
	assert_non_null(strstr(err, spec));
	assert_non_null(strstr(err, "schema version 9 is newer"));
	one_line();
	assert_int_equal(raw_int("PRAGMA user_version"), 9);
}

static void sqlite_missing_directory(void **state)
{
	(void)state;
	if (pg)
		skip();
	char path[160];
	snprintf(path, sizeof(path), "%s/no-such-dir/state.db", dir);
	assert_null(store_open(path, err, sizeof(err)));
	assert_non_null(strstr(err, "state db "));
	assert_non_null(strstr(err, path));
	assert_int_not_equal(access(path, F_OK), 0);
}

/* vmrund forks its workers: they must not inherit the database. */
static void sqlite_not_inherited(void **state)
{
	(void)state;
	if (pg)
		skip();
	struct store *s = open_store();
	char real[PATH_MAX];
	assert_non_null(realpath(spec, real));
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int found = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(dirfd(d), e->d_name, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (strncmp(target, real, strlen(real)))
			continue;   /* also matches -wal and -shm */
		found++;
		int flags = fcntl(atoi(e->d_name), F_GETFD);
		assert_true(flags >= 0 && (flags & FD_CLOEXEC));
	}
	closedir(d);
	assert_true(found >= 1);
	store_close(s);
}

/* One node: nothing to be told. */
static void sqlite_no_notes(void **state)
{
	(void)state;
	if (pg)
		skip();
	struct store *s = open_store();
	assert_int_equal(s->ops->note_fd(s), -1);
	assert_int_equal(s->ops->notes(s, NULL, NULL, err, sizeof(err)), 0);
	store_close(s);
}

/* ---- Every backend. ---- */

static void survives_reopen(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "b", 4, 64);
	struct store *s = open_store();
	put(s, 1, nm("a").s, "{\"runtime\":\"python\"}");
	put(s, 2, nm("b").s, "{\"runtime\":\"bash\"}");
	claims(s, nm("n").s, 1, &x.ts, 5000, 1, (unsigned[]){ 2 });
	assert_int_equal(s->ops->command(s, id_of(2).s, nm("n").s, 5500, err, sizeof(err)), 1);
	assert_int_equal(s->ops->finish(s, id_of(2).s, nm("n").s, RS_FAILED, 6000, "{\"exit\":1}", NULL, "exit status 1", err,
					sizeof(err)),
			 1);
	assert_int_equal(s->ops->put_blob(s, id_of(2).s, "output", (const uint8_t *)"out", 3, err, sizeof(err)), 0);
	store_close(s);

	s = open_store();
	struct store_run r;
	assert_int_equal(s->ops->get(s, id_of(1).s, nm("a").s, &r, err, sizeof(err)), 1);
	assert_string_equal(r.request, "{\"runtime\":\"python\"}");
	assert_int_equal(r.state, RS_QUEUED);
	store_run_free(&r);
	r = get(s, 2);
	assert_int_equal(r.state, RS_FAILED);
	assert_in_range(r.started_ms, 5000, 5000 + CLAIM_WAIT_MAX_MS);
	assert_int_equal(r.command_ms, 5500);
	assert_int_equal(r.finished_ms, 6000);
	assert_string_equal(r.node, nm("n").s);
	assert_string_equal(r.result, "{\"exit\":1}");
	assert_string_equal(r.message, "exit status 1");
	int64_t seq2 = r.seq;
	store_run_free(&r);
	/* New runs come after the old ones. */
	put(s, 3, nm("a").s, "{}");
	r = get(s, 3);
	assert_true(r.seq > seq2);
	store_run_free(&r);
	store_close(s);
}

static void submit_and_get(void **state)
{
	(void)state;
	struct store *s = open_store();
	put(s, 7, nm("a").s, "{\"argv\":[\"true\"]}");
	struct store_run r;
	assert_int_equal(s->ops->get(s, id_of(7).s, nm("a").s, &r, err, sizeof(err)), 1);
	assert_string_equal(r.id, id_of(7).s);
	assert_string_equal(r.tenant, nm("a").s);
	assert_int_equal(r.state, RS_QUEUED);
	assert_int_equal(r.created_ms, 1007);
	assert_int_equal(r.started_ms, 0);
	assert_int_equal(r.command_ms, 0);
	assert_int_equal(r.finished_ms, 0);
	assert_string_equal(r.request, "{\"argv\":[\"true\"]}");
	assert_null(r.result);
	assert_string_equal(r.message, "");
	assert_int_not_equal(r.seq, 12345);
	assert_true(r.seq > 0);
	assert_string_equal(r.node, "");
	assert_false(r.cancel);
	store_run_free(&r);
	store_run_free(&r);   /* safe twice */

	/* Another tenant's run is not found, and *out is left empty. */
	memset(&r, 0x5a, sizeof(r));
	assert_int_equal(s->ops->get(s, id_of(7).s, nm("b").s, &r, err, sizeof(err)), 0);
	assert_null(r.request);
	assert_string_equal(r.id, "");
	assert_int_equal(s->ops->get(s, id_of(7).s, NULL, &r, err, sizeof(err)), 1);
	assert_string_equal(r.tenant, nm("a").s);
	store_run_free(&r);
	assert_int_equal(s->ops->get(s, id_of(8).s, NULL, &r, err, sizeof(err)), 0);
	store_close(s);
}

static void submit_admission(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 1, 2);
	struct store *s = open_store();
	struct text a_ = nm("a");
	const char *a = a_.s;
	/* a: 1 at once and 2 waiting, so 3 open at most. */
	for (unsigned i = 1; i <= 3; i++)
		assert_int_equal(submit(s, i, a, "{}", 1, 2, UINT_MAX), SCHED_ACCEPT);
	assert_int_equal(submit(s, 4, a, "{}", 1, 2, UINT_MAX), SCHED_TENANT_FULL);
	struct store_run r;
	assert_int_equal(s->ops->get(s, id_of(4).s, NULL, &r, err, sizeof(err)), 0);   /* refused: not stored */
	/* Running or queued, they count the same. */
	claims(s, nm("n").s, 2, &x.ts, 100, 1, (unsigned[]){ 1 });
	assert_int_equal(submit(s, 4, a, "{}", 1, 2, UINT_MAX), SCHED_TENANT_FULL);
	finish_ok(s, 1, nm("n").s, RS_SUCCEEDED);
	assert_int_equal(submit(s, 4, a, "{}", 1, 2, UINT_MAX), SCHED_ACCEPT);
	assert_int_equal(state_of(s, 4), RS_QUEUED);
	/* Another tenant is not held by a's. */
	assert_int_equal(submit(s, 5, nm("b").s, "{}", 1, 0, UINT_MAX), SCHED_ACCEPT);
	assert_int_equal(submit(s, 6, nm("b").s, "{}", 1, 0, UINT_MAX), SCHED_TENANT_FULL);

	/* The queue's bound counts every tenant's queued runs. */
	unsigned base = (unsigned)counted(s, RS_QUEUED);
	struct text c_ = nm("c");
	const char *c = c_.s;
	assert_int_equal(submit(s, 10, c, "{}", 100, 100, base + 2), SCHED_ACCEPT);
	assert_int_equal(submit(s, 11, c, "{}", 100, 100, base + 2), SCHED_ACCEPT);
	assert_int_equal(submit(s, 12, c, "{}", 100, 100, base + 2), SCHED_QUEUE_FULL);
	assert_int_equal(submit(s, 12, nm("d").s, "{}", 100, 100, base + 2), SCHED_QUEUE_FULL);
	assert_int_equal(s->ops->get(s, id_of(12).s, NULL, &r, err, sizeof(err)), 0);
	/* The tenant's verdict comes first. */
	assert_int_equal(submit(s, 12, a, "{}", 1, 2, base + 2), SCHED_TENANT_FULL);
	/* A run cancelled while queued leaves room. */
	char node[STORE_NODE_MAX];
	assert_int_equal(s->ops->cancel(s, id_of(10).s, c, 200, node, err, sizeof(err)), 1);
	assert_int_equal(submit(s, 12, c, "{}", 100, 100, base + 2), SCHED_ACCEPT);
	store_close(s);
}

static void submit_duplicate(void **state)
{
	(void)state;
	struct store *s = open_store();
	put(s, 1, nm("a").s, "{\"first\":1}");
	err[0] = '\0';
	assert_int_equal(submit(s, 1, nm("b").s, "{\"second\":1}", 100, 100, UINT_MAX), -1);
	one_line();
	/* The first is untouched, and the store still works. */
	struct store_run got = get(s, 1);
	assert_string_equal(got.tenant, nm("a").s);
	assert_string_equal(got.request, "{\"first\":1}");
	store_run_free(&got);
	/* A run without a request is refused too. */
	err[0] = '\0';
	assert_int_equal(submit(s, 2, nm("b").s, NULL, 100, 100, UINT_MAX), -1);
	one_line();
	put(s, 3, nm("b").s, "{}");
	store_close(s);
}

/* A submit with an Idempotency-Key (store.h): keyed with the same tenant,
 * key and hash within a day, nothing is stored and the first run is named,
 * even when admission would now refuse; another hash is a reuse; another
 * tenant's key, a key past its day, and a key whose run was dropped make
 * new runs. */
static bool exists(struct store *s, unsigned n);

static int submit_keyed(struct store *s, unsigned n, const char *tenant, const char *key, const char *hash,
			int64_t now_ms, unsigned concurrent, char replay[STORE_ID_LEN + 1])
{
	struct store_run r = new_run(n, tenant, "{}");
	r.created_ms = now_ms;
	struct tenant lim = limits(concurrent, 0);
	struct store_idem idem = { .key = key, .hash = hash };
	int v = s->ops->submit(s, &r, &idem, &lim, UINT_MAX, err, sizeof(err));
	memcpy(replay, idem.id, STORE_ID_LEN + 1);
	return v;
}

static void submit_idempotent(void **state)
{
	(void)state;
	struct store *s = open_store();
	struct text a_ = nm("a"), b_ = nm("b");
	const char *a = a_.s, *b = b_.s;
	char h1[STORE_IDEM_HASH_LEN + 1], h2[STORE_IDEM_HASH_LEN + 1], id[STORE_ID_LEN + 1];
	memset(h1, '1', STORE_IDEM_HASH_LEN);
	memset(h2, '2', STORE_IDEM_HASH_LEN);
	h1[STORE_IDEM_HASH_LEN] = h2[STORE_IDEM_HASH_LEN] = '\0';
	const int64_t t0 = 10LL * STORE_IDEM_TTL_MS;
	assert_int_equal(submit_keyed(s, 1, a, "k", h1, t0, 100, id), SCHED_ACCEPT);
	/* again, the same body: the first run, nothing new, though the
	 * tenant is now full (concurrent 1) */
	assert_int_equal(submit_keyed(s, 2, a, "k", h1, t0 + 1000, 1, id), STORE_REPLAYED);
	assert_string_equal(id, id_of(1).s);
	assert_false(exists(s, 2));
	/* another body: refused, nothing stored */
	assert_int_equal(submit_keyed(s, 3, a, "k", h2, t0 + 2000, 100, id), STORE_KEY_REUSED);
	assert_string_equal(id, id_of(1).s);
	assert_false(exists(s, 3));
	/* the same key is another tenant's own */
	assert_int_equal(submit_keyed(s, 4, b, "k", h2, t0 + 3000, 100, id), SCHED_ACCEPT);
	/* a refused submit keeps no key: sent again with room, it runs */
	assert_int_equal(submit_keyed(s, 5, a, "full", h1, t0 + 4000, 1, id), SCHED_TENANT_FULL);
	assert_int_equal(submit_keyed(s, 5, a, "full", h1, t0 + 5000, 100, id), SCHED_ACCEPT);
	/* past its day the key is free again, and names the new run */
	assert_int_equal(submit_keyed(s, 6, a, "k", h2, t0 + STORE_IDEM_TTL_MS + 1, 100, id), SCHED_ACCEPT);
	assert_int_equal(submit_keyed(s, 7, a, "k", h2, t0 + STORE_IDEM_TTL_MS + 2, 100, id), STORE_REPLAYED);
	assert_string_equal(id, id_of(6).s);
	/* a run dropped by retention takes its key with it */
	assert_int_equal(s->ops->finish(s, id_of(6).s, NULL, RS_CANCELLED, 100, NULL, NULL, "x", err, sizeof(err)), 1);
	assert_true(s->ops->drop_runs(s, 200, err, sizeof(err)) >= 1);
	assert_false(exists(s, 6));
	assert_int_equal(submit_keyed(s, 8, a, "k", h2, t0 + STORE_IDEM_TTL_MS + 3, 100, id), SCHED_ACCEPT);
	store_close(s);
}

static void claim_fair_across_tenants(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 2, 100);
	tset_add(&x, "b", 2, 100);
	tset_add(&x, "c", 1, 100);
	struct store *s = open_store();
	struct text node_ = nm("n");
	const char *node = node_.s;
	/* Interleaved, so that only seq orders what a claim returns. */
	const unsigned order[] = { 1, 2, 11, 3, 21, 4, 12, 5, 22 };
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		put(s, order[i], nm(order[i] > 20 ? "c" : order[i] > 10 ? "b" : "a").s, "{}");
	/* One each, then a second for a (it comes first among equals), none
	 * more for c (its concurrency): each tenant's oldest. */
	claims(s, node, 4, &x.ts, 100, 4, (unsigned[]){ 1, 2, 11, 21 });
	/* a and c at their concurrency: only b's next. */
	claims(s, node, 10, &x.ts, 200, 1, (unsigned[]){ 12 });
	claims(s, node, 10, &x.ts, 300, 0, NULL);
	/* A slot of a's frees: its oldest queued. */
	finish_ok(s, 1, node, RS_SUCCEEDED);
	claims(s, node, 10, &x.ts, 400, 1, (unsigned[]){ 3 });
	/* a at 1 running, c at 0: the one with fewer goes first. */
	finish_ok(s, 2, node, RS_SUCCEEDED);
	finish_ok(s, 21, node, RS_SUCCEEDED);
	claims(s, node, 1, &x.ts, 500, 1, (unsigned[]){ 22 });
	claims(s, node, 1, &x.ts, 600, 1, (unsigned[]){ 4 });
	store_close(s);
}

static void claim_least_recent(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "x", 4, 100);
	tset_add(&x, "y", 4, 100);
	struct store *s = open_store();
	struct text node_ = nm("n");
	const char *node = node_.s;
	put(s, 1, nm("x").s, "{}");
	put(s, 2, nm("x").s, "{}");
	put(s, 3, nm("y").s, "{}");
	put(s, 4, nm("y").s, "{}");
	/* Both at 0 running each time: the one that started a run least
	 * recently (as the store remembers it, from started_ms) goes first. */
	claims(s, node, 1, &x.ts, 1000, 1, (unsigned[]){ 1 });
	finish_ok(s, 1, node, RS_SUCCEEDED);
	claims(s, node, 1, &x.ts, 2000, 1, (unsigned[]){ 3 });
	finish_ok(s, 3, node, RS_SUCCEEDED);
	claims(s, node, 1, &x.ts, 3000, 1, (unsigned[]){ 2 });
	finish_ok(s, 2, node, RS_SUCCEEDED);
	claims(s, node, 1, &x.ts, 4000, 1, (unsigned[]){ 4 });
	store_close(s);
}

/* A tenant flooding the queue and one that comes after it, on a node of
 * 2 slots that ends its oldest run each round: the second is not kept
 * waiting behind the first's queue. */
static void claim_flood(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 4, 100);
	tset_add(&x, "b", 4, 100);
	struct store *s = open_store();
	struct text node_ = nm("n");
	const char *node = node_.s;
	for (unsigned i = 0; i < 20; i++)
		put(s, i, nm("a").s, "{}");
	for (unsigned i = 100; i < 103; i++)
		put(s, i, nm("b").s, "{}");
	unsigned running[2], started[23], nrun = 0, nstarted = 0;
	for (int64_t now = 1000; nstarted < 23; now += 1000) {
		unsigned got[2];
		int k = claim_nums(s, node, 2 - nrun, &x.ts, now, got);
		for (int i = 0; i < k; i++)
			running[nrun++] = started[nstarted++] = got[i];
		assert_true(nrun == 2 || nstarted == 23);   /* the slots kept full */
		finish_ok(s, running[0], node, RS_SUCCEEDED);
		running[0] = running[1];
		nrun--;
	}
	unsigned b_early = 0;
	for (unsigned i = 0; i < 6; i++)
		b_early += started[i] >= 100;
	assert_int_equal(b_early, 3);
	/* FIFO within each tenant. */
	unsigned next_a = 0, next_b = 100;
	for (unsigned i = 0; i < 23; i++)
		assert_int_equal(started[i], started[i] >= 100 ? next_b++ : next_a++);
	store_close(s);
}

static void claim_limits(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 2, 100);
	tset_add(&x, "b", 100, 100);
	struct store *s = open_store();
	struct text node_ = nm("n");
	const char *node = node_.s;
	put(s, 1, nm("z").s, "{}");   /* a tenant not in ts */
	put(s, 2, nm("a").s, "{}");
	put(s, 3, nm("a").s, "{}");
	put(s, 4, nm("a").s, "{}");
	put(s, 5, nm("b").s, "{}");
	claims(s, node, 0, &x.ts, 100, 0, NULL);
	/* More asked than may start: a's concurrency, b's one queued. */
	claims(s, node, 10, &x.ts, 100, 3, (unsigned[]){ 2, 3, 5 });
	claims(s, node, 10, &x.ts, 200, 0, NULL);
	assert_int_equal(state_of(s, 1), RS_QUEUED);
	assert_int_equal(state_of(s, 4), RS_QUEUED);
	struct tenants none = { 0 };
	claims(s, node, 10, &none, 300, 0, NULL);
	store_close(s);
}

/* Claim with the node's room (issue 38): sizes from the requests'
 * limits.memory_mib and limits.disk_mib, defaults where absent, read in
 * the claim's own transaction. */
static int claim_room(struct store *s, const char *node, unsigned n, const struct tenants *ts, struct sched_size room,
		      struct sched_size size, unsigned *nums)
{
	struct store_run out[16];
	assert_true(n <= 16);
	int got = s->ops->claim(s, node, n, ts, &room, &size, 100, out, err, sizeof(err));
	if (got < 0)
		fail_msg("claim: %s", err);
	for (int i = 0; i < got; i++) {
		nums[i] = num_of(out[i].id);
		store_run_free(&out[i]);
	}
	qsort(nums, (size_t)got, sizeof(*nums), by_num);
	return got;
}

static void claim_by_room(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 10, 100);
	tset_add(&x, "b", 10, 100);
	struct store *s = open_store();
	struct text node_ = nm("n");
	const char *node = node_.s;
	put(s, 1, nm("a").s, "{\"argv\":[\"x\"],\"limits\":{\"memory_mib\":1536,\"disk_mib\":64}}");
	put(s, 2, nm("a").s, "{\"argv\":[\"x\"],\"limits\":{\"memory_mib\":1536,\"disk_mib\":64}}");
	put(s, 3, nm("b").s, "{\"argv\":[\"x\"]}");   /* defaults: 256 and 64 */
	struct sched_size node_size = { 2048, 4096 };
	unsigned got[16];
	/* a first (the first among equals), then b's default-sized run fits
	 * the 512 left; a's second waits */
	assert_int_equal(claim_room(s, node, 8, &x.ts, node_size, node_size, got), 2);
	assert_int_equal(got[0], 1);
	assert_int_equal(got[1], 3);
	assert_int_equal(state_of(s, 2), RS_QUEUED);
	/* 256 left: still not */
	assert_int_equal(claim_room(s, node, 8, &x.ts, (struct sched_size){ 256, 3968 }, node_size, got), 0);
	/* the room is back: it runs */
	assert_int_equal(claim_room(s, node, 8, &x.ts, node_size, node_size, got), 1);
	assert_int_equal(got[0], 2);
	/* a run larger than the node is passed over, never claimed here */
	put(s, 4, nm("a").s, "{\"argv\":[\"x\"],\"limits\":{\"memory_mib\":1536,\"disk_mib\":9000}}");
	put(s, 5, nm("b").s, "{\"argv\":[\"x\"],\"limits\":{\"disk_mib\":4096}}");
	assert_int_equal(claim_room(s, node, 8, &x.ts, node_size, node_size, got), 1);
	assert_int_equal(got[0], 5);
	assert_int_equal(state_of(s, 4), RS_QUEUED);
	store_close(s);
}

/* A verification run names the node that holds its checkpoint
 * (checkpoint_node): only that node takes it, with the node's room or
 * without, and the other nodes take the runs behind it. */
static void claim_checkpoint_node(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 100, 100);
	struct store *s = open_store();
	char pinned[128];
	snprintf(pinned, sizeof(pinned), "{\"argv\":[\"x\"],\"from_checkpoint\":\"a/b\",\"checkpoint_node\":\"%s\"}",
		 nm("n2").s);
	put(s, 1, nm("a").s, pinned);
	put(s, 2, nm("a").s, "{\"argv\":[\"x\"]}");
	put(s, 3, nm("a").s, pinned);
	unsigned got[16];
	struct sched_size node_size = { 8192, 8192 };
	assert_int_equal(claim_room(s, nm("n1").s, 8, &x.ts, node_size, node_size, got), 1);
	assert_int_equal(got[0], 2);
	claims(s, nm("n1").s, 8, &x.ts, 100, 0, NULL);
	assert_int_equal(state_of(s, 1), RS_QUEUED);
	claims(s, nm("n2").s, 8, &x.ts, 100, 2, (unsigned[]){ 1, 3 });
	store_close(s);
}

static void claim_two_nodes(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 100, 100);
	struct store *s1 = open_store(), *s2 = open_store();
	for (unsigned i = 1; i <= 5; i++)
		put(s1, i, nm("a").s, "{}");
	claims(s1, nm("n1").s, 3, &x.ts, 100, 3, (unsigned[]){ 1, 2, 3 });
	claims(s2, nm("n2").s, 3, &x.ts, 100, 2, (unsigned[]){ 4, 5 });
	claims(s1, nm("n1").s, 3, &x.ts, 100, 0, NULL);
	struct store_run r = get(s2, 2);
	assert_string_equal(r.node, nm("n1").s);
	store_run_free(&r);
	r = get(s1, 5);
	assert_string_equal(r.node, nm("n2").s);
	store_run_free(&r);
	store_close(s1);
	store_close(s2);
}

/* Read exactly len bytes: 1, 0 at EOF first, -1. */
static int read_all(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n == 0 && got == 0)
			return 0;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 1;
}

/* A child's life: its own connection, one run at a time until none. */
static int claim_loop(const char *node, const struct tenants *ts, int fd)
{
	char e[512];
	struct store *s = store_open(spec, e, sizeof(e));
	if (!s)
		return 2;
	int rc = 0;
	for (;;) {
		struct store_run r;
		int n = s->ops->claim(s, node, 1, ts, NULL, NULL, 100, &r, e, sizeof(e));
		if (n < 0) {
			fprintf(stderr, "%s: %s\n", node, e);
			rc = 3;
			break;
		}
		if (n == 0)
			break;
		/* One record under PIPE_BUF: written whole. */
		ssize_t w = write(fd, r.id, sizeof(r.id));
		store_run_free(&r);
		if (w != (ssize_t)sizeof(r.id)) {
			rc = 4;
			break;
		}
	}
	store_close(s);
	return rc;
}

/* Nodes claiming at once, each its own process and connection: every run
 * is claimed, and by one of them only. */
static void claim_race(void **state)
{
	(void)state;
	enum { RUNS = 40, PROCS = 4 };
	struct tset x = { 0 };
	tset_add(&x, "a", 1000, 1000);
	struct store *s = open_store();
	for (unsigned i = 0; i < RUNS; i++)
		put(s, i, nm("a").s, "{}");
	/* Closed across the fork: a child must not hold the parent's
	 * connection. */
	store_close(s);
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pids[PROCS];
	for (int p = 0; p < PROCS; p++) {
		char what[16];
		snprintf(what, sizeof(what), "n%d", p);
		struct text node = nm(what);
		fflush(NULL);
		pids[p] = fork();
		assert_true(pids[p] >= 0);
		if (pids[p] == 0) {
			close(fds[0]);
			_exit(claim_loop(node.s, &x.ts, fds[1]));
		}
	}
	close(fds[1]);
	unsigned seen[RUNS] = { 0 }, total = 0;
	char id[STORE_ID_LEN + 1];
	int rc;
	while ((rc = read_all(fds[0], id, sizeof(id))) == 1) {
		assert_int_equal(id[STORE_ID_LEN], '\0');
		assert_memory_equal(id, id_of(0).s, 16);
		unsigned n = num_of(id);
		assert_true(n < RUNS);
		seen[n]++;
		total++;
	}
	assert_int_equal(rc, 0);
	close(fds[0]);
	for (int p = 0; p < PROCS; p++) {
		int status;
		assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	assert_int_equal(total, RUNS);
	for (unsigned i = 0; i < RUNS; i++)
		assert_int_equal(seen[i], 1);
	s = open_store();
	for (unsigned i = 0; i < RUNS; i++)
		assert_int_equal(state_of(s, i), RS_RUNNING);
	store_close(s);
}

static void command_guard(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 100, 100);
	struct store *s = open_store();
	struct text n_ = nm("n");
	const char *n = n_.s;
	struct text m_ = nm("m");
	const char *m = m_.s;
	for (unsigned i = 1; i <= 4; i++)
		put(s, i, nm("a").s, "{}");
	claims(s, n, 3, &x.ts, 100, 3, (unsigned[]){ 1, 2, 3 });
	assert_int_equal(s->ops->command(s, id_of(1).s, n, 500, err, sizeof(err)), 1);
	struct store_run r = get(s, 1);
	assert_int_equal(r.command_ms, 500);
	assert_int_equal(r.state, RS_RUNNING);
	store_run_free(&r);
	/* Not another node's run. */
	assert_int_equal(s->ops->command(s, id_of(2).s, m, 500, err, sizeof(err)), 0);
	r = get(s, 2);
	assert_int_equal(r.command_ms, 0);
	store_run_free(&r);
	/* Not once a cancel was asked. */
	char holder[STORE_NODE_MAX];
	assert_int_equal(s->ops->cancel(s, id_of(3).s, NULL, 600, holder, err, sizeof(err)), 2);
	assert_int_equal(s->ops->command(s, id_of(3).s, n, 700, err, sizeof(err)), 0);
	r = get(s, 3);
	assert_int_equal(r.command_ms, 0);
	store_run_free(&r);
	/* Not a run that is not running: queued, ended, none. */
	assert_int_equal(s->ops->command(s, id_of(4).s, n, 700, err, sizeof(err)), 0);
	assert_int_equal(state_of(s, 4), RS_QUEUED);
	finish_ok(s, 2, n, RS_SUCCEEDED);
	assert_int_equal(s->ops->command(s, id_of(2).s, n, 700, err, sizeof(err)), 0);
	assert_int_equal(s->ops->command(s, id_of(9).s, n, 700, err, sizeof(err)), 0);
	store_close(s);
}

static void finish_guard(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 100, 100);
	struct store *s = open_store();
	struct text n_ = nm("n");
	const char *n = n_.s;
	struct text m_ = nm("m");
	const char *m = m_.s;
	for (unsigned i = 1; i <= 4; i++)
		put(s, i, nm("a").s, "{}");
	claims(s, n, 2, &x.ts, 100, 2, (unsigned[]){ 1, 2 });
	/* Another node's run is not this node's to end. */
	assert_int_equal(s->ops->finish(s, id_of(1).s, m, RS_LOST, 900, NULL, NULL, "x", err, sizeof(err)), 0);
	assert_int_equal(state_of(s, 1), RS_RUNNING);
	assert_int_equal(s->ops->finish(s, id_of(1).s, n, RS_SUCCEEDED, 1000, "{\"stdout\":\"hi\"}", NULL, NULL, err,
					sizeof(err)),
			 1);
	struct store_run r = get(s, 1);
	assert_int_equal(r.state, RS_SUCCEEDED);
	assert_int_equal(r.finished_ms, 1000);
	assert_string_equal(r.result, "{\"stdout\":\"hi\"}");
	assert_string_equal(r.message, "");
	assert_string_equal(r.node, n);   /* the node that last held it */
	store_run_free(&r);
	/* Not twice: the first ending stands. */
	assert_int_equal(s->ops->finish(s, id_of(1).s, n, RS_LOST, 2000, NULL, NULL, "lost", err, sizeof(err)), 0);
	assert_int_equal(s->ops->finish(s, id_of(1).s, NULL, RS_LOST, 2000, NULL, NULL, "lost", err, sizeof(err)), 0);
	r = get(s, 1);
	assert_int_equal(r.state, RS_SUCCEEDED);
	assert_int_equal(r.finished_ms, 1000);
	store_run_free(&r);
	/* node NULL: whoever holds it. */
	assert_int_equal(s->ops->finish(s, id_of(2).s, NULL, RS_TIMED_OUT, 1100, NULL, NULL, "timed out", err, sizeof(err)), 1);
	/* A queued run is no node's: only NULL ends it. */
	assert_int_equal(s->ops->finish(s, id_of(3).s, n, RS_CANCELLED, 1200, NULL, NULL, "x", err, sizeof(err)), 0);
	assert_int_equal(s->ops->finish(s, id_of(3).s, NULL, RS_CANCELLED, 1200, NULL, NULL, "by hand", err, sizeof(err)), 1);
	r = get(s, 3);
	assert_int_equal(r.state, RS_CANCELLED);
	assert_int_equal(r.started_ms, 0);
	assert_string_equal(r.message, "by hand");
	assert_null(r.result);
	store_run_free(&r);
	assert_int_equal(s->ops->finish(s, id_of(9).s, NULL, RS_FAILED, 1300, NULL, NULL, "x", err, sizeof(err)), 0);
	/* A run requeued and claimed elsewhere is the new holder's. */
	claims(s, n, 1, &x.ts, 1400, 1, (unsigned[]){ 4 });
	assert_int_equal(s->ops->expire(s, n, 1500, NULL, NULL, err, sizeof(err)), 1);
	claims(s, m, 1, &x.ts, 1600, 1, (unsigned[]){ 4 });
	assert_int_equal(s->ops->finish(s, id_of(4).s, n, RS_FAILED, 1700, NULL, NULL, "x", err, sizeof(err)), 0);
	assert_int_equal(s->ops->finish(s, id_of(4).s, m, RS_FAILED, 1700, NULL, NULL, "x", err, sizeof(err)), 1);
	/* Only to a terminal state. */
	put(s, 5, nm("a").s, "{}");
	err[0] = '\0';
	assert_int_equal(s->ops->finish(s, id_of(5).s, NULL, RS_RUNNING, 1800, NULL, NULL, "x", err, sizeof(err)), -1);
	one_line();
	assert_int_equal(s->ops->finish(s, id_of(5).s, NULL, (enum run_state)RS_COUNT, 1800, NULL, NULL, "x", err, sizeof(err)),
			 -1);
	assert_int_equal(state_of(s, 5), RS_QUEUED);
	store_close(s);
}

/* The outcome given to finish comes back from the columns, as it was
 * (every limit bit, every termination); none given reads as none, and a
 * run that has not ended has none. */
static void finish_outcome(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 100, 100);
	struct store *s = open_store();
	struct text n_ = nm("n");
	const char *n = n_.s;
	for (unsigned i = 1; i <= 3; i++)
		put(s, i, nm("a").s, "{}");
	claims(s, n, 3, &x.ts, 100, 3, (unsigned[]){ 1, 2, 3 });
	struct store_run r = get(s, 1);
	assert_false(r.has_outcome);
	store_run_free(&r);
	struct run_outcome timed = { .state = OUTCOME_TIMED_OUT, .term = TERM_COMPILE_ERROR,
				     .limits = LIMIT_TIMEOUT | LIMIT_MEMORY | LIMIT_CPU_TIME | LIMIT_OUTPUT };
	struct run_outcome ok = { .state = OUTCOME_SUCCEEDED, .term = TERM_EXITED };
	assert_int_equal(s->ops->finish(s, id_of(1).s, n, RS_TIMED_OUT, 1000, "{}", &timed, NULL, err, sizeof(err)),
			 1);
	assert_int_equal(s->ops->finish(s, id_of(2).s, n, RS_SUCCEEDED, 1000, "{}", &ok, NULL, err, sizeof(err)), 1);
	assert_int_equal(s->ops->finish(s, id_of(3).s, n, RS_FAILED, 1000, NULL, NULL, "no result", err, sizeof(err)),
			 1);
	r = get(s, 1);
	assert_true(r.has_outcome);
	assert_int_equal(r.outcome.state, OUTCOME_TIMED_OUT);
	assert_int_equal(r.outcome.term, TERM_COMPILE_ERROR);
	assert_int_equal(r.outcome.limits, timed.limits);
	store_run_free(&r);
	r = get(s, 2);
	assert_true(r.has_outcome);
	assert_int_equal(r.outcome.state, OUTCOME_SUCCEEDED);
	assert_int_equal(r.outcome.term, TERM_EXITED);
	assert_int_equal(r.outcome.limits, 0);
	store_run_free(&r);
	r = get(s, 3);
	assert_false(r.has_outcome);
	store_run_free(&r);
	store_close(s);
}

static void cancel_results(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 100, 100);
	struct store *s = open_store();
	struct text a_ = nm("a");
	const char *a = a_.s;
	struct text n_ = nm("n");
	const char *n = n_.s;
	put(s, 1, a, "{}");
	put(s, 2, a, "{}");
	put(s, 3, a, "{}");
	claims(s, n, 1, &x.ts, 100, 1, (unsigned[]){ 1 });
	char node[STORE_NODE_MAX];
	/* Running: marked, and its holder named. */
	memset(node, 'x', sizeof(node));
	assert_int_equal(s->ops->cancel(s, id_of(1).s, a, 200, node, err, sizeof(err)), 2);
	assert_string_equal(node, n);
	struct store_run r = get(s, 1);
	assert_int_equal(r.state, RS_RUNNING);
	assert_true(r.cancel);
	assert_int_equal(r.finished_ms, 0);
	store_run_free(&r);
	assert_int_equal(s->ops->cancel(s, id_of(1).s, NULL, 250, node, err, sizeof(err)), 2);   /* asked again */
	/* Queued: ended now, by the store. */
	assert_int_equal(s->ops->cancel(s, id_of(2).s, NULL, 300, node, err, sizeof(err)), 1);
	r = get(s, 2);
	assert_int_equal(r.state, RS_CANCELLED);
	assert_int_equal(r.finished_ms, 300);
	assert_int_equal(r.started_ms, 0);
	assert_string_equal(r.message, STORE_MSG_CANCELLED_QUEUED);
	store_run_free(&r);
	/* Ended, either way. */
	assert_int_equal(s->ops->cancel(s, id_of(2).s, a, 400, node, err, sizeof(err)), 3);
	finish_ok(s, 1, n, RS_CANCELLED);
	assert_int_equal(s->ops->cancel(s, id_of(1).s, a, 400, node, err, sizeof(err)), 3);
	/* None, and another tenant's is none. */
	assert_int_equal(s->ops->cancel(s, id_of(9).s, NULL, 400, node, err, sizeof(err)), 0);
	assert_int_equal(s->ops->cancel(s, id_of(3).s, nm("b").s, 400, node, err, sizeof(err)), 0);
	assert_int_equal(state_of(s, 3), RS_QUEUED);
	store_close(s);
}

struct ids {
	unsigned n[16];
	unsigned k;
};

static void note_id(void *ctx, const char *id)
{
	struct ids *l = ctx;
	assert_true(l->k < 16);
	l->n[l->k++] = num_of(id);
}

static bool has(const struct ids *l, unsigned n)
{
	for (unsigned i = 0; i < l->k; i++)
		if (l->n[i] == n)
			return true;
	return false;
}

static void heartbeat_reports_cancels(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 100, 100);
	struct store *s = open_store();
	struct text n_ = nm("n");
	const char *n = n_.s;
	struct text m_ = nm("m");
	const char *m = m_.s;
	char node[STORE_NODE_MAX];
	for (unsigned i = 1; i <= 5; i++)
		put(s, i, nm("a").s, "{}");
	claims(s, n, 3, &x.ts, 100, 3, (unsigned[]){ 1, 2, 3 });
	claims(s, m, 1, &x.ts, 100, 1, (unsigned[]){ 4 });
	assert_int_equal(s->ops->cancel(s, id_of(2).s, NULL, 200, node, err, sizeof(err)), 2);
	assert_int_equal(s->ops->cancel(s, id_of(3).s, NULL, 200, node, err, sizeof(err)), 2);
	assert_int_equal(s->ops->cancel(s, id_of(4).s, NULL, 200, node, err, sizeof(err)), 2);
	assert_int_equal(s->ops->cancel(s, id_of(5).s, NULL, 200, node, err, sizeof(err)), 1);   /* queued: ended */
	struct ids l = { 0 };
	assert_int_equal(s->ops->heartbeat(s, n, 60000, note_id, &l, err, sizeof(err)), 0);
	assert_int_equal(l.k, 2);
	assert_true(has(&l, 2) && has(&l, 3));
	memset(&l, 0, sizeof(l));
	assert_int_equal(s->ops->heartbeat(s, m, 60000, note_id, &l, err, sizeof(err)), 0);
	assert_int_equal(l.k, 1);
	assert_true(has(&l, 4));
	/* Once it ends, nothing to stop. */
	finish_ok(s, 2, n, RS_CANCELLED);
	memset(&l, 0, sizeof(l));
	assert_int_equal(s->ops->heartbeat(s, n, 60000, note_id, &l, err, sizeof(err)), 0);
	assert_int_equal(l.k, 1);
	assert_true(has(&l, 3));
	assert_int_equal(s->ops->heartbeat(s, n, 60000, NULL, NULL, err, sizeof(err)), 0);
	memset(&l, 0, sizeof(l));
	assert_int_equal(s->ops->heartbeat(s, nm("idle").s, 60000, note_id, &l, err, sizeof(err)), 0);
	assert_int_equal(l.k, 0);
	store_close(s);
}

/* What expire's fn was given, of this test's runs. */
struct expired {
	struct store_run r[16];
	unsigned k;
};

static void note_run(void *ctx, const struct store_run *run)
{
	struct expired *l = ctx;
	if (!mine(run))
		return;
	assert_true(l->k < 16);
	struct store_run *c = &l->r[l->k++];
	*c = *run;
	c->request = NULL;   /* the row's, valid only in the call */
	c->result = NULL;
}

static const struct store_run *expired_run(const struct expired *l, unsigned n)
{
	for (unsigned i = 0; i < l->k; i++)
		if (num_of(l->r[i].id) == n)
			return &l->r[i];
	fail_msg("run %u was not expired", n);
	return NULL;
}

static void expire_node(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 100, 100);
	struct store *s = open_store();
	struct text n_ = nm("n");
	const char *n = n_.s;
	struct text m_ = nm("m");
	const char *m = m_.s;
	char node[STORE_NODE_MAX], msg[512];
	for (unsigned i = 1; i <= 5; i++)
		put(s, i, nm("a").s, "{}");
	claims(s, n, 4, &x.ts, 100, 4, (unsigned[]){ 1, 2, 3, 4 });
	claims(s, m, 1, &x.ts, 100, 1, (unsigned[]){ 5 });
	/* 1: not started; 2: started; 3: started, cancel asked; 4: not
	 * started, cancel asked; 5: another node's. */
	assert_int_equal(s->ops->command(s, id_of(2).s, n, 150, err, sizeof(err)), 1);
	assert_int_equal(s->ops->command(s, id_of(3).s, n, 150, err, sizeof(err)), 1);
	assert_int_equal(s->ops->command(s, id_of(5).s, m, 150, err, sizeof(err)), 1);
	assert_int_equal(s->ops->cancel(s, id_of(3).s, NULL, 200, node, err, sizeof(err)), 2);
	assert_int_equal(s->ops->cancel(s, id_of(4).s, NULL, 200, node, err, sizeof(err)), 2);
	/* A node's own runs, whatever its lease (here: it has one). */
	assert_int_equal(s->ops->heartbeat(s, n, 60000, NULL, NULL, err, sizeof(err)), 0);
	struct expired l = { .k = 0 };
	assert_int_equal(s->ops->expire(s, n, 900, note_run, &l, err, sizeof(err)), 4);
	assert_int_equal(l.k, 4);

	const struct store_run *r = expired_run(&l, 1);
	assert_int_equal(r->state, RS_QUEUED);
	assert_string_equal(r->node, "");
	assert_string_equal(r->message, "");
	assert_int_equal(r->finished_ms, 0);
	r = expired_run(&l, 2);
	assert_int_equal(r->state, RS_LOST);
	assert_int_equal(r->finished_ms, 900);
	snprintf(msg, sizeof(msg), STORE_MSG_LOST_NODE, n);
	assert_string_equal(r->message, msg);
	snprintf(msg, sizeof(msg), STORE_MSG_CANCELLED_NODE, n);
	for (unsigned i = 3; i <= 4; i++) {
		r = expired_run(&l, i);
		assert_int_equal(r->state, RS_CANCELLED);
		assert_int_equal(r->finished_ms, 900);
		assert_string_equal(r->message, msg);
	}
	/* What fn saw is what the store holds. */
	struct store_run g = get(s, 1);
	assert_int_equal(g.state, RS_QUEUED);
	assert_string_equal(g.node, "");
	assert_int_equal(g.command_ms, 0);
	store_run_free(&g);
	g = get(s, 2);
	assert_int_equal(g.state, RS_LOST);
	snprintf(msg, sizeof(msg), STORE_MSG_LOST_NODE, n);
	assert_string_equal(g.message, msg);
	store_run_free(&g);
	assert_int_equal(state_of(s, 3), RS_CANCELLED);
	assert_int_equal(state_of(s, 4), RS_CANCELLED);
	g = get(s, 5);
	assert_int_equal(g.state, RS_RUNNING);
	assert_string_equal(g.node, m);
	store_run_free(&g);
	/* Nothing more of n's; and the requeued run is claimed again. */
	assert_int_equal(s->ops->expire(s, n, 1000, note_run, &l, err, sizeof(err)), 0);
	claims(s, m, 4, &x.ts, 1100, 1, (unsigned[]){ 1 });
	store_close(s);
}

/* A verification run taken by the node that holds its checkpoint, whose
 * node then dies, is lost, not queued again: no other node may take it. */
static void expire_pinned(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 100, 100);
	struct store *s = open_store();
	struct text n_ = nm("n2");
	const char *n = n_.s;
	char pinned[160], msg[512];
	snprintf(pinned, sizeof(pinned), "{\"argv\":[\"x\"],\"from_checkpoint\":\"a/b\",\"checkpoint_node\":\"%s\"}", n);
	put(s, 1, nm("a").s, pinned);
	put(s, 2, nm("a").s, "{\"argv\":[\"x\"]}");
	claims(s, n, 2, &x.ts, 100, 2, (unsigned[]){ 1, 2 });
	struct expired l = { .k = 0 };
	assert_int_equal(s->ops->expire(s, n, 900, note_run, &l, err, sizeof(err)), 2);
	const struct store_run *r = expired_run(&l, 1);
	assert_int_equal(r->state, RS_LOST);
	snprintf(msg, sizeof(msg), STORE_MSG_LOST_CHECKPOINT, n);
	assert_string_equal(r->message, msg);
	assert_int_equal(expired_run(&l, 2)->state, RS_QUEUED);
	assert_int_equal(state_of(s, 1), RS_LOST);
	assert_int_equal(state_of(s, 2), RS_QUEUED);
	store_close(s);
}


static void expire_lease(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 100, 100);
	struct store *s = open_store();
	struct text dead_ = nm("dead");
	const char *dead = dead_.s;
	struct text live_ = nm("live");
	const char *live = live_.s;
	struct text back_ = nm("back");
	const char *back = back_.s;
	for (unsigned i = 1; i <= 4; i++)
		put(s, i, nm("a").s, "{}");
	assert_int_equal(s->ops->heartbeat(s, dead, 1, NULL, NULL, err, sizeof(err)), 0);
	assert_int_equal(s->ops->heartbeat(s, live, 60000, NULL, NULL, err, sizeof(err)), 0);
	assert_int_equal(s->ops->heartbeat(s, back, 1, NULL, NULL, err, sizeof(err)), 0);
	claims(s, dead, 2, &x.ts, 100, 2, (unsigned[]){ 1, 2 });
	claims(s, live, 1, &x.ts, 100, 1, (unsigned[]){ 3 });
	claims(s, back, 1, &x.ts, 100, 1, (unsigned[]){ 4 });
	assert_int_equal(s->ops->command(s, id_of(2).s, dead, 150, err, sizeof(err)), 1);
	assert_int_equal(s->ops->command(s, id_of(3).s, live, 150, err, sizeof(err)), 1);
	sleep_ms(20);
	/* A lease renewed is a live node's. */
	assert_int_equal(s->ops->heartbeat(s, back, 60000, NULL, NULL, err, sizeof(err)), 0);
	struct expired l = { .k = 0 };
	/* Other nodes' runs of a shared store may go too: at least dead's. */
	int rc = s->ops->expire(s, NULL, 900, note_run, &l, err, sizeof(err));
	if (rc < 0)
		fail_msg("expire: %s", err);
	assert_true(rc >= 2);
	assert_int_equal(l.k, 2);
	assert_int_equal(expired_run(&l, 1)->state, RS_QUEUED);
	assert_int_equal(expired_run(&l, 2)->state, RS_LOST);
	char msg[512];
	snprintf(msg, sizeof(msg), STORE_MSG_LOST_NODE, dead);
	assert_string_equal(expired_run(&l, 2)->message, msg);
	assert_int_equal(state_of(s, 3), RS_RUNNING);
	assert_int_equal(state_of(s, 4), RS_RUNNING);
	memset(&l, 0, sizeof(l));
	assert_true(s->ops->expire(s, NULL, 1000, note_run, &l, err, sizeof(err)) >= 0);
	assert_int_equal(l.k, 0);
	store_close(s);
}

struct blobs_seen {
	char name[8][64];
	uint8_t data[8][16];
	size_t len[8];
	unsigned k, stop_after;
};

static int note_blob(void *ctx, const char *name, const uint8_t *data, size_t len)
{
	struct blobs_seen *b = ctx;
	assert_true(b->k < 8);
	assert_true(len <= 16);
	assert_true(data != NULL || len == 0);
	snprintf(b->name[b->k], sizeof(b->name[0]), "%s", name);
	if (len)
		memcpy(b->data[b->k], data, len);
	b->len[b->k++] = len;
	return b->stop_after && b->k == b->stop_after ? 42 : 0;
}

static struct blobs_seen list_blobs(struct store *s, unsigned n)
{
	struct blobs_seen b;
	memset(&b, 0, sizeof(b));
	if (s->ops->blobs(s, id_of(n).s, note_blob, &b, err, sizeof(err)))
		fail_msg("blobs %u: %s", n, err);
	return b;
}

static void put_blob(struct store *s, unsigned n, const char *name, const void *data, size_t len)
{
	if (s->ops->put_blob(s, id_of(n).s, name, data, len, err, sizeof(err)))
		fail_msg("put_blob %u %s: %s", n, name, err);
}

static void blobs(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 100, 100);
	struct store *s = open_store();
	struct text n_ = nm("n");
	const char *n = n_.s;
	for (unsigned i = 1; i <= 3; i++)
		put(s, i, nm("a").s, "{}");
	claims(s, n, 3, &x.ts, 100, 3, (unsigned[]){ 1, 2, 3 });
	put_blob(s, 1, "output", "hello", 5);
	put_blob(s, 1, "artifacts/a/b.bin", "\0\1\0", 3);
	put_blob(s, 1, "artifacts/empty", "", 0);
	put_blob(s, 1, "output", "world!!", 7);   /* replaces */
	put_blob(s, 2, "output", "two", 3);
	put_blob(s, 3, "output", "three", 5);
	struct blobs_seen b = list_blobs(s, 1);
	assert_int_equal(b.k, 3);
	assert_string_equal(b.name[0], "artifacts/a/b.bin");
	assert_int_equal(b.len[0], 3);
	assert_memory_equal(b.data[0], "\0\1\0", 3);
	assert_string_equal(b.name[1], "artifacts/empty");
	assert_int_equal(b.len[1], 0);
	assert_string_equal(b.name[2], "output");
	assert_int_equal(b.len[2], 7);
	assert_memory_equal(b.data[2], "world!!", 7);
	/* Stopped early: fn's value. */
	memset(&b, 0, sizeof(b));
	b.stop_after = 1;
	assert_int_equal(s->ops->blobs(s, id_of(1).s, note_blob, &b, err, sizeof(err)), 42);
	assert_int_equal(b.k, 1);
	/* None is done too. */
	b = list_blobs(s, 9);
	assert_int_equal(b.k, 0);
	/* No blob for a run there is not. */
	err[0] = '\0';
	assert_int_equal(s->ops->put_blob(s, id_of(9).s, "output", (const uint8_t *)"x", 1, err, sizeof(err)), -1);
	one_line();

	/* Retention: the blobs of runs that ended before; the rows stay. */
	finish_ok(s, 1, n, RS_SUCCEEDED);   /* at 5000 */
	assert_int_equal(s->ops->finish(s, id_of(2).s, n, RS_FAILED, 9000, NULL, NULL, NULL, err, sizeof(err)), 1);
	long dropped = s->ops->drop_blobs(s, 6000, err, sizeof(err));
	if (dropped < 0)
		fail_msg("drop_blobs: %s", err);
	assert_true(dropped >= 3);   /* a shared store may hold others' */
	assert_int_equal(list_blobs(s, 1).k, 0);
	assert_int_equal(list_blobs(s, 2).k, 1);
	assert_int_equal(list_blobs(s, 3).k, 1);   /* still running */
	assert_int_equal(state_of(s, 1), RS_SUCCEEDED);
	store_close(s);
}

/* Whether run n is in the store (any tenant's). */
static bool exists(struct store *s, unsigned n)
{
	struct store_run r;
	int found = s->ops->get(s, id_of(n).s, NULL, &r, err, sizeof(err));
	if (found < 0)
		fail_msg("get %u: %s", n, err);
	if (found)
		store_run_free(&r);
	return found == 1;
}

/* Run retention: runs that ended before the time go whole (row and
 * blobs); queued and running ones stay whatever their age; seq goes on
 * past the runs that went. */
static void drop_runs(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 100, 100);
	struct store *s = open_store();
	struct text n_ = nm("n");
	const char *n = n_.s;
	char holder[STORE_NODE_MAX];
	for (unsigned i = 1; i <= 4; i++)
		put(s, i, nm("a").s, "{}");
	claims(s, n, 3, &x.ts, 100, 3, (unsigned[]){ 1, 2, 3 });
	put_blob(s, 1, "output", "one", 3);
	put_blob(s, 2, "output", "two", 3);
	put_blob(s, 3, "artifacts/x", "x", 1);
	finish_ok(s, 1, n, RS_SUCCEEDED);   /* at 5000 */
	finish_ok(s, 3, n, RS_FAILED);
	assert_int_equal(s->ops->cancel(s, id_of(4).s, NULL, 5000, holder, err, sizeof(err)), 1);
	struct store_run last = get(s, 4);   /* the newest seq so far */
	long dropped = s->ops->drop_runs(s, 6000, err, sizeof(err));
	if (dropped < 0)
		fail_msg("drop_runs: %s", err);
	assert_true(dropped >= 3);   /* a shared store may hold others' */
	assert_false(exists(s, 1));
	assert_false(exists(s, 3));
	assert_false(exists(s, 4));   /* cancelled while queued is ended too */
	assert_int_equal(list_blobs(s, 1).k, 0);
	assert_int_equal(list_blobs(s, 3).k, 0);
	/* running since 100: stays, with its blob */
	assert_int_equal(state_of(s, 2), RS_RUNNING);
	assert_int_equal(list_blobs(s, 2).k, 1);
	/* a new run comes after the newest that went */
	put(s, 5, nm("a").s, "{}");
	struct store_run next = get(s, 5);
	assert_true(next.seq > last.seq);
	store_run_free(&next);
	store_run_free(&last);
	/* queued: stays too, however late the time */
	assert_true(s->ops->drop_runs(s, 1000000, err, sizeof(err)) >= 0);
	assert_int_equal(state_of(s, 5), RS_QUEUED);
	assert_int_equal(state_of(s, 2), RS_RUNNING);
	/* and once it ends, it goes at its time, not before */
	assert_int_equal(s->ops->finish(s, id_of(2).s, n, RS_SUCCEEDED, 9000, "{}", NULL, NULL, err, sizeof(err)), 1);
	assert_true(s->ops->drop_runs(s, 9000, err, sizeof(err)) >= 0);
	assert_true(exists(s, 2));
	assert_true(s->ops->drop_runs(s, 9001, err, sizeof(err)) >= 1);
	assert_false(exists(s, 2));
	assert_int_equal(list_blobs(s, 2).k, 0);
	/* one that is not there is not an error: nothing to do */
	assert_true(s->ops->drop_runs(s, 9001, err, sizeof(err)) >= 0);
	store_close(s);
}

static void blob_names_refused(void **state)
{
	(void)state;
	struct store *s = open_store();
	put(s, 1, nm("a").s, "{}");
	const char *bad[] = {
		"",	       "out",	       "outputs",	 "output/x",	   "artifacts",	     "artifacts/",
		"artifacts//a", "artifacts/./a", "artifacts/../a", "artifacts/a/..", "artifacts/a/", "/artifacts/a",
		"../output",   "artifacts/a/../../b", "artifacts/lat\xe9", "artifacts/\xff",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (s->ops->put_blob(s, id_of(1).s, bad[i], (const uint8_t *)"x", 1, err, sizeof(err)) != -1)
			fail_msg("blob name \"%s\" was taken", bad[i]);
		one_line();
	}
	/* Even one whose bytes would break the message's line. */
	err[0] = '\0';
	assert_int_equal(s->ops->put_blob(s, id_of(1).s, "bad\nname", (const uint8_t *)"x", 1, err, sizeof(err)), -1);
	one_line();
	assert_int_equal(list_blobs(s, 1).k, 0);
	put_blob(s, 1, "artifacts/..x/.y/z", "ok", 2);   /* dots that are not . or .. */
	assert_int_equal(list_blobs(s, 1).k, 1);
	store_close(s);
}

struct walk {
	unsigned n[16];
	unsigned k, stop_after;
	struct store *s;      /* for callbacks that call the store */
};

static int record(void *ctx, const struct store_run *run)
{
	struct walk *w = ctx;
	if (!mine(run))
		return 0;
	assert_true(w->k < 16);
	w->n[w->k++] = num_of(run->id);
	return w->stop_after && w->k == w->stop_after ? 42 : 0;
}

/* What a daemon may do from a walk: end the run it was given. */
static int mark_lost(void *ctx, const struct store_run *run)
{
	struct walk *w = ctx;
	char e[512];
	if (!mine(run))
		return 0;
	w->k++;
	assert_int_equal(w->s->ops->finish(w->s, run->id, NULL, RS_LOST, 9000, NULL, NULL, "by hand", e, sizeof(e)), 1);
	return 0;
}

static void each_in_order(void **state)
{
	(void)state;
	struct tset ta = { 0 }, tb = { 0 };
	tset_add(&ta, "a", 100, 100);
	tset_add(&tb, "b", 100, 100);
	struct store *s = open_store();
	struct text n_ = nm("n");
	const char *n = n_.s;
	/* Ids not in the order of acceptance, so that only seq orders them. */
	const unsigned order[] = { 50, 10, 40, 20, 30 };
	for (int i = 0; i < 5; i++)
		put(s, order[i], nm(i % 2 ? "b" : "a").s, "{}");
	claims(s, n, 1, &tb.ts, 100, 1, (unsigned[]){ 10 });
	claims(s, n, 1, &ta.ts, 100, 1, (unsigned[]){ 50 });

	struct walk w = { .k = 0 };
	assert_int_equal(s->ops->each(s, RS_QUEUED, record, &w, err, sizeof(err)), 0);
	assert_int_equal(w.k, 3);
	assert_int_equal(w.n[0], 40);
	assert_int_equal(w.n[1], 20);
	assert_int_equal(w.n[2], 30);
	memset(&w, 0, sizeof(w));
	assert_int_equal(s->ops->each(s, RS_RUNNING, record, &w, err, sizeof(err)), 0);
	assert_int_equal(w.k, 2);
	assert_int_equal(w.n[0], 50);
	assert_int_equal(w.n[1], 10);
	/* Stopped early: fn's value, and no more calls. */
	memset(&w, 0, sizeof(w));
	w.stop_after = 2;
	assert_int_equal(s->ops->each(s, RS_QUEUED, record, &w, err, sizeof(err)), 42);
	assert_int_equal(w.k, 2);
	memset(&w, 0, sizeof(w));
	assert_int_equal(s->ops->each(s, RS_LOST, record, &w, err, sizeof(err)), 0);
	assert_int_equal(w.k, 0);
	assert_int_equal(s->ops->each(s, (enum run_state)RS_COUNT, record, &w, err, sizeof(err)), -1);
	/* fn may change the run it is given, and that holds at once. */
	memset(&w, 0, sizeof(w));
	w.s = s;
	assert_int_equal(s->ops->each(s, RS_RUNNING, mark_lost, &w, err, sizeof(err)), 0);
	assert_int_equal(w.k, 2);
	assert_int_equal(state_of(s, 10), RS_LOST);
	assert_int_equal(state_of(s, 50), RS_LOST);
	memset(&w, 0, sizeof(w));
	assert_int_equal(s->ops->each(s, RS_RUNNING, record, &w, err, sizeof(err)), 0);
	assert_int_equal(w.k, 0);
	store_close(s);
}

/* A tenant's runs, newest first, a page at a time, with its total. */
static void list_pages(void **state)
{
	(void)state;
	struct store *s = open_store();
	for (unsigned i = 1; i <= 7; i++)
		put(s, 100 + i, nm(i % 3 ? "a" : "b").s, "{\"argv\":[\"x\"]}");
	struct store_run *rows;
	unsigned n;
	uint64_t total;
	assert_int_equal(s->ops->list(s, nm("a").s, NULL, 0, 3, &rows, &n, &total, err, sizeof(err)), 0);
	assert_int_equal(total, 5);
	assert_int_equal(n, 3);
	/* a's are 101 102 104 105 107: newest first */
	assert_string_equal(rows[0].id, id_of(107).s);
	assert_string_equal(rows[1].id, id_of(105).s);
	assert_string_equal(rows[2].id, id_of(104).s);
	assert_string_equal(rows[0].request, "{\"argv\":[\"x\"]}");
	for (unsigned i = 0; i < n; i++)
		store_run_free(&rows[i]);
	free(rows);
	assert_int_equal(s->ops->list(s, nm("a").s, NULL, 3, 3, &rows, &n, &total, err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	assert_string_equal(rows[1].id, id_of(101).s);
	for (unsigned i = 0; i < n; i++)
		store_run_free(&rows[i]);
	free(rows);
	/* past the end, and another tenant's (none) */
	assert_int_equal(s->ops->list(s, nm("a").s, NULL, 9, 3, &rows, &n, &total, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
	assert_int_equal(total, 5);
	free(rows);
	assert_int_equal(s->ops->list(s, nm("c").s, NULL, 0, 3, &rows, &n, &total, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
	assert_int_equal(total, 0);
	free(rows);
	/* only the runs one API accepted */
	put(s, 120, nm("a").s, "{\"argv\":[\"x\"],\"client\":{\"judge0\":{\"language_id\":71}}}");
	put(s, 121, nm("a").s, "{\"argv\":[\"x\"],\"client\":{\"other\":{}}}");
	assert_int_equal(s->ops->list(s, nm("a").s, "judge0", 0, 10, &rows, &n, &total, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	assert_int_equal(total, 1);
	assert_string_equal(rows[0].id, id_of(120).s);
	store_run_free(&rows[0]);
	free(rows);
	assert_int_equal(s->ops->list(s, nm("a").s, "ju%", 0, 10, &rows, &n, &total, err, sizeof(err)), -1);
	assert_null(rows);
	store_close(s);
}

static void counts(void **state)
{
	(void)state;
	struct tset x = { 0 };
	tset_add(&x, "a", 100, 100);
	struct store *s = open_store();
	uint64_t before[RS_COUNT], after[RS_COUNT];
	assert_int_equal(s->ops->count(s, before, err, sizeof(err)), 0);
	for (unsigned i = 1; i <= 6; i++)
		put(s, i, nm("a").s, "{}");
	claims(s, nm("n").s, 2, &x.ts, 100, 2, (unsigned[]){ 1, 2 });
	finish_ok(s, 2, nm("n").s, RS_TIMED_OUT);
	char node[STORE_NODE_MAX];
	assert_int_equal(s->ops->cancel(s, id_of(3).s, NULL, 200, node, err, sizeof(err)), 1);
	memset(after, 0xff, sizeof(after));
	assert_int_equal(s->ops->count(s, after, err, sizeof(err)), 0);
	const uint64_t want[RS_COUNT] = { [RS_QUEUED] = 3, [RS_RUNNING] = 1, [RS_TIMED_OUT] = 1, [RS_CANCELLED] = 1 };
	for (int i = 0; i < RS_COUNT; i++)
		if (after[i] - before[i] != want[i])
			fail_msg("%s: %" PRIu64 " more, wanted %" PRIu64, store_state_name((enum run_state)i),
				 after[i] - before[i], want[i]);
	store_close(s);
}

static void state_names(void **state)
{
	(void)state;
	const char *want[RS_COUNT] = { "queued", "running", "succeeded", "failed", "timed_out", "cancelled", "lost" };
	for (int i = 0; i < RS_COUNT; i++) {
		assert_string_equal(store_state_name((enum run_state)i), want[i]);
		assert_int_equal(store_state_parse(want[i]), i);
		assert_int_equal(store_state_terminal((enum run_state)i), i >= RS_SUCCEEDED);
	}
	assert_null(store_state_name((enum run_state)RS_COUNT));
	assert_null(store_state_name((enum run_state)-1));
	assert_false(store_state_terminal((enum run_state)RS_COUNT));
	assert_int_equal(store_state_parse("Queued"), -1);
	assert_int_equal(store_state_parse("timed-out"), -1);
	assert_int_equal(store_state_parse(""), -1);
	assert_int_equal(store_state_parse(NULL), -1);
	assert_true(store_is_pg("postgresql://u@h/db"));
	assert_true(store_is_pg("postgres://h"));
	assert_false(store_is_pg("/var/lib/vmrun/state.db"));
	assert_false(store_is_pg("postgresql:/x"));
}

/* A node's address for its peers: published, replaced, read by any node;
 * none for a node that published none. One node alone (SQLite) has no
 * peer to tell, and no such calls. */
static void node_addresses(void **state)
{
	(void)state;
	struct store *s = open_store();
	if (!pg) {
		assert_null(s->ops->set_address);
		assert_null(s->ops->address_of);
		store_close(s);
		return;
	}
	char n1[64], n2[64], out[64];
	snprintf(n1, sizeof(n1), "%s-n1", pfx);
	snprintf(n2, sizeof(n2), "%s-n2", pfx);
	assert_int_equal(s->ops->address_of(s, n1, out, sizeof(out), err, sizeof(err)), 0);
	assert_string_equal(out, "");
	assert_int_equal(s->ops->set_address(s, n1, "http://127.0.0.1:8080", err, sizeof(err)), 0);
	assert_int_equal(s->ops->set_address(s, n1, "http://10.0.0.1:8080", err, sizeof(err)), 0);
	struct store *other = open_store();
	assert_int_equal(other->ops->address_of(other, n1, out, sizeof(out), err, sizeof(err)), 1);
	assert_string_equal(out, "http://10.0.0.1:8080");
	assert_int_equal(other->ops->address_of(other, n2, out, sizeof(out), err, sizeof(err)), 0);
	/* one that does not fit is none, not a cut address */
	assert_int_equal(other->ops->address_of(other, n1, out, 8, err, sizeof(err)), 0);
	assert_int_equal(s->ops->set_address(s, n1, "", err, sizeof(err)), 0);
	assert_int_equal(other->ops->address_of(other, n1, out, sizeof(out), err, sizeof(err)), 0);
	store_close(other);
	store_close(s);
}

static void sbx_state_names(void **state)
{
	(void)state;
	const char *want[SBS_COUNT] = { "starting", "running", "stopping", "stopped", "lost", "paused", "failed",
					"resumable" };
	for (int i = 0; i < SBS_COUNT; i++) {
		assert_string_equal(store_sbx_state_name((enum sbx_row_state)i), want[i]);
		assert_int_equal(store_sbx_state_parse(want[i]), i);
	}
	assert_null(store_sbx_state_name((enum sbx_row_state)SBS_COUNT));
	assert_null(store_sbx_state_name((enum sbx_row_state)-1));
	assert_int_equal(store_sbx_state_parse("Running"), -1);
	assert_int_equal(store_sbx_state_parse(""), -1);
	assert_int_equal(store_sbx_state_parse(NULL), -1);
}

static int check_large(void *ctx, const struct store_run *run)
{
	if (mine(run))
		assert_string_equal(run->request, (const char *)ctx);
	return 0;
}

static void large_request(void **state)
{
	(void)state;
	size_t n = 1u << 20;
	char *big = malloc(n + 1);
	assert_non_null(big);
	for (size_t i = 0; i < n; i++)
		big[i] = (char)('a' + i % 26);
	big[0] = '"';
	big[n - 1] = '"';
	big[n] = '\0';
	struct store *s = open_store();
	put(s, 1, nm("a").s, big);
	assert_int_equal(s->ops->finish(s, id_of(1).s, NULL, RS_SUCCEEDED, 5, big, NULL, NULL, err, sizeof(err)), 1);
	store_close(s);
	s = open_store();
	struct store_run r = get(s, 1);
	assert_int_equal(strlen(r.request), n);
	assert_memory_equal(r.request, big, n);
	assert_memory_equal(r.result, big, n);
	store_run_free(&r);
	put(s, 2, nm("a").s, big);
	assert_int_equal(s->ops->each(s, RS_QUEUED, check_large, big, err, sizeof(err)), 0);
	store_close(s);
	free(big);
}

static void utf8_text(void **state)
{
	(void)state;
	const char *req = "{\"stdin\":\"h\xc3\xa9llo \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x8e\x89\"}";
	char tenant[STORE_TENANT_MAX], other[STORE_TENANT_MAX];
	snprintf(tenant, sizeof(tenant), "%s-\xc3\xa9quipe-\xe6\x97\xa5", pfx);
	snprintf(other, sizeof(other), "%s-equipe-\xe6\x97\xa5", pfx);
	struct store *s = open_store();
	put(s, 1, tenant, req);
	/* A message longer than the row's field: cut where a character
	 * starts, never inside one. */
	char msg[700];
	size_t len = 0;
	while (len + 2 < sizeof(msg)) {
		memcpy(msg + len, "\xc3\xa9", 2);
		len += 2;
	}
	msg[len] = '\0';
	assert_int_equal(s->ops->finish(s, id_of(1).s, NULL, RS_FAILED, 1, req, NULL, msg, err, sizeof(err)), 1);
	struct store_run r;
	assert_int_equal(s->ops->get(s, id_of(1).s, tenant, &r, err, sizeof(err)), 1);
	assert_string_equal(r.request, req);
	assert_string_equal(r.result, req);
	assert_string_equal(r.tenant, tenant);
	size_t got = strlen(r.message);
	assert_true(got < sizeof(r.message));
	assert_true(got >= sizeof(r.message) - 2);
	assert_int_equal(got % 2, 0);
	assert_memory_equal(r.message, msg, got);
	store_run_free(&r);
	/* Another spelling of a tenant is another tenant. */
	assert_int_equal(s->ops->get(s, id_of(1).s, other, &r, err, sizeof(err)), 0);
	store_close(s);
}

/* The request rate: one bucket per tenant for every node of a shared
 * store (two connections here, as two nodes); none in SQLite, whose one
 * node keeps its own. */
static void rate_shared(void **state)
{
	(void)state;
	struct store *s = open_store();
	if (!pg) {
		assert_null(s->ops->rate);
		store_close(s);
		return;
	}
	struct store *s2 = open_store();
	struct tenant slow = { .rate = 0.001, .burst = 3 };   /* no refill to speak of */
	snprintf(slow.name, sizeof(slow.name), "%s", nm("slow").s);
	int64_t wait = -1;
	for (int i = 0; i < 3; i++) {
		assert_int_equal((i % 2 ? s2 : s)->ops->rate(i % 2 ? s2 : s, &slow, &wait, err, sizeof(err)), 0);
		assert_int_equal(wait, 0);
	}
	/* The burst is spent on both nodes: a token is ~1000 s away. */
	assert_int_equal(s2->ops->rate(s2, &slow, &wait, err, sizeof(err)), 0);
	assert_true(wait > 900000);
	assert_int_equal(s->ops->rate(s, &slow, &wait, err, sizeof(err)), 0);
	assert_true(wait > 900000);
	/* Another tenant has a bucket of its own. */
	struct tenant other = slow;
	snprintf(other.name, sizeof(other.name), "%s", nm("other").s);
	assert_int_equal(s->ops->rate(s, &other, &wait, err, sizeof(err)), 0);
	assert_int_equal(wait, 0);
	/* A refill at 10/s: refused at once, with at most 100 ms to wait;
	 * taken again once that has passed. */
	struct tenant fast = { .rate = 10, .burst = 1 };
	snprintf(fast.name, sizeof(fast.name), "%s", nm("fast").s);
	assert_int_equal(s->ops->rate(s, &fast, &wait, err, sizeof(err)), 0);
	assert_int_equal(wait, 0);
	assert_int_equal(s2->ops->rate(s2, &fast, &wait, err, sizeof(err)), 0);
	assert_true(wait > 0 && wait <= 101);
	struct timespec pause = { 0, 150 * 1000000L };
	nanosleep(&pause, NULL);
	assert_int_equal(s2->ops->rate(s2, &fast, &wait, err, sizeof(err)), 0);
	assert_int_equal(wait, 0);
	store_close(s2);
	store_close(s);
}

/* ---- Sandboxes (store.h's sbx_* calls). ---- */

/* A sandbox as the daemon would create it; the fields a new sandbox does
 * not take from its caller hold values the store must ignore. request is
 * not copied. */
static struct store_sandbox new_sbx(unsigned n, const char *tenant, const char *node, uint64_t memory_mib,
				    uint64_t disk_mib)
{
	struct store_sandbox sb;
	memset(&sb, 0, sizeof(sb));
	memcpy(sb.id, id_of(n).s, sizeof(sb.id));
	snprintf(sb.tenant, sizeof(sb.tenant), "%s", tenant);
	snprintf(sb.node, sizeof(sb.node), "%s", node);
	sb.state = SBS_LOST;
	sb.created_ms = 1000 + n;
	sb.started_ms = 77;
	sb.ended_ms = 78;
	sb.timeout_at_ms = 79;
	sb.memory_mib = memory_mib;
	sb.disk_mib = disk_mib;
	sb.request = (char *)"{\"runtime\":\"python\"}";
	snprintf(sb.reason, sizeof(sb.reason), "not this");
	sb.seq = 12345;
	return sb;
}

static struct tenant sbx_limits(unsigned sandboxes, uint64_t memory_mib, uint64_t disk_mib)
{
	struct tenant t = limits(100, 100);
	t.sandboxes = sandboxes;
	t.sandbox_memory_mib = memory_mib;
	t.sandbox_disk_mib = disk_mib;
	return t;
}

static int sbx_create(struct store *s, unsigned n, const char *tenant, const char *node, uint64_t memory_mib,
		      uint64_t disk_mib, const struct tenant *lim)
{
	struct store_sandbox sb = new_sbx(n, tenant, node, memory_mib, disk_mib);
	return s->ops->sbx_create(s, &sb, NULL, lim, err, sizeof(err));
}

/* Created with room to spare. */
static void sbx_put(struct store *s, unsigned n, const char *tenant, const char *node)
{
	struct tenant lim = sbx_limits(1000, 0, 0);
	if (sbx_create(s, n, tenant, node, 512, 256, &lim) != 0)
		fail_msg("sbx_create %u: %s", n, err);
}

static struct store_sandbox sbx_get(struct store *s, unsigned n)
{
	struct store_sandbox sb;
	if (s->ops->sbx_get(s, id_of(n).s, NULL, &sb, err, sizeof(err)) != 1)
		fail_msg("sbx_get %u: not found (%s)", n, err);
	return sb;
}

static bool sbx_exists(struct store *s, unsigned n)
{
	struct store_sandbox sb;
	int found = s->ops->sbx_get(s, id_of(n).s, NULL, &sb, err, sizeof(err));
	if (found < 0)
		fail_msg("sbx_get %u: %s", n, err);
	store_sandbox_free(&sb);
	return found == 1;
}

static enum sbx_row_state sbx_state_of(struct store *s, unsigned n)
{
	struct store_sandbox sb = sbx_get(s, n);
	enum sbx_row_state st = sb.state;
	store_sandbox_free(&sb);
	return st;
}

static int sbx_set(struct store *s, unsigned n, const char *node, enum sbx_row_state st, int64_t started_ms,
		   int64_t ended_ms, int64_t timeout_at_ms, const char *reason)
{
	int rc = s->ops->sbx_set(s, id_of(n).s, node, st, started_ms, ended_ms, timeout_at_ms, reason, err,
				 sizeof(err));
	if (rc < 0)
		fail_msg("sbx_set %u: %s", n, err);
	return rc;
}

static void sbx_create_and_get(void **state)
{
	(void)state;
	struct store *s = open_store();
	struct text a_ = nm("a"), n_ = nm("n");
	const char *a = a_.s, *n = n_.s;
	struct tenant lim = sbx_limits(4, 0, 0);
	assert_int_equal(sbx_create(s, 7, a, n, 1024, 2048, &lim), 0);
	struct store_sandbox sb;
	memset(&sb, 0x5a, sizeof(sb));
	assert_int_equal(s->ops->sbx_get(s, id_of(7).s, a, &sb, err, sizeof(err)), 1);
	assert_string_equal(sb.id, id_of(7).s);
	assert_string_equal(sb.tenant, a);
	assert_string_equal(sb.node, n);
	assert_int_equal(sb.state, SBS_STARTING);
	assert_int_equal(sb.created_ms, 1007);
	assert_int_equal(sb.started_ms, 0);
	assert_int_equal(sb.ended_ms, 0);
	assert_int_equal(sb.timeout_at_ms, 0);
	assert_int_equal(sb.memory_mib, 1024);
	assert_int_equal(sb.disk_mib, 2048);
	assert_string_equal(sb.request, "{\"runtime\":\"python\"}");
	assert_string_equal(sb.reason, "");
	assert_true(sb.seq > 0);
	assert_int_not_equal(sb.seq, 12345);
	int64_t seq7 = sb.seq;
	store_sandbox_free(&sb);
	store_sandbox_free(&sb);   /* safe twice */

	/* Another tenant's is not found, and *out is left empty; NULL is
	 * anyone's. */
	memset(&sb, 0x5a, sizeof(sb));
	assert_int_equal(s->ops->sbx_get(s, id_of(7).s, nm("b").s, &sb, err, sizeof(err)), 0);
	assert_null(sb.request);
	assert_string_equal(sb.id, "");
	assert_int_equal(s->ops->sbx_get(s, id_of(7).s, NULL, &sb, err, sizeof(err)), 1);
	assert_string_equal(sb.tenant, a);
	store_sandbox_free(&sb);
	assert_int_equal(s->ops->sbx_get(s, id_of(8).s, NULL, &sb, err, sizeof(err)), 0);
	/* A run of the same id is another thing: not a sandbox. */
	put(s, 9, a, "{}");
	assert_false(sbx_exists(s, 9));

	/* A duplicate id, a missing request, a node without a name: refused,
	 * in one line, and the first is untouched. */
	err[0] = '\0';
	assert_int_equal(sbx_create(s, 7, nm("b").s, n, 1, 1, &lim), -1);
	one_line();
	sb = sbx_get(s, 7);
	assert_string_equal(sb.tenant, a);
	assert_int_equal(sb.memory_mib, 1024);
	store_sandbox_free(&sb);
	struct store_sandbox bad = new_sbx(8, a, n, 1, 1);
	bad.request = NULL;
	err[0] = '\0';
	assert_int_equal(s->ops->sbx_create(s, &bad, NULL, &lim, err, sizeof(err)), -1);
	one_line();
	bad = new_sbx(8, a, "", 1, 1);
	err[0] = '\0';
	assert_int_equal(s->ops->sbx_create(s, &bad, NULL, &lim, err, sizeof(err)), -1);
	one_line();
	bad = new_sbx(8, a, n, UINT64_MAX, 1);   /* more than a column holds */
	err[0] = '\0';
	assert_int_equal(s->ops->sbx_create(s, &bad, NULL, &lim, err, sizeof(err)), -1);
	one_line();
	assert_false(sbx_exists(s, 8));
	/* The store still works, in creation order; and survives a reopen. */
	assert_int_equal(sbx_create(s, 8, a, n, 1, 1, &lim), 0);
	store_close(s);
	s = open_store();
	sb = sbx_get(s, 8);
	assert_true(sb.seq > seq7);
	store_sandbox_free(&sb);
	sb = sbx_get(s, 7);
	assert_string_equal(sb.request, "{\"runtime\":\"python\"}");
	store_sandbox_free(&sb);
	store_close(s);
}

static void sbx_admission(void **state)
{
	(void)state;
	struct store *s = open_store();
	struct text a_ = nm("a"), n_ = nm("n");
	const char *a = a_.s, *n = n_.s;
	/* The count: 2 open at once; a refused one is not stored. */
	struct tenant two = sbx_limits(2, 0, 0);
	assert_int_equal(sbx_create(s, 1, a, n, 512, 256, &two), 0);
	assert_int_equal(sbx_create(s, 2, a, n, 512, 256, &two), 0);
	assert_int_equal(sbx_create(s, 3, a, n, 512, 256, &two), STORE_SBX_OVER_COUNT);
	assert_false(sbx_exists(s, 3));
	/* Running and stopping count as starting does. */
	assert_int_equal(sbx_set(s, 1, n, SBS_RUNNING, 100, 0, 0, NULL), 1);
	assert_int_equal(sbx_set(s, 2, n, SBS_STOPPING, 0, 0, 0, NULL), 1);
	assert_int_equal(sbx_create(s, 3, a, n, 512, 256, &two), STORE_SBX_OVER_COUNT);
	/* Another tenant's are not a's. */
	assert_int_equal(sbx_create(s, 4, nm("b").s, n, 512, 256, &two), 0);
	/* A stopped one leaves its place, and so does a lost one. */
	assert_int_equal(sbx_set(s, 2, n, SBS_STOPPED, 0, 500, 0, "stopped"), 1);
	assert_int_equal(sbx_create(s, 3, a, n, 512, 256, &two), 0);
	assert_int_equal(sbx_create(s, 5, a, nm("m").s, 512, 256, &two), STORE_SBX_OVER_COUNT);
	assert_int_equal(s->ops->sbx_lost(s, n, 600, NULL, NULL, err, sizeof(err)), 3);   /* 1, 3, and b's 4 */
	assert_int_equal(sbx_create(s, 5, a, nm("m").s, 512, 256, &two), 0);
	/* sandboxes=0: none at all. */
	struct tenant none = sbx_limits(0, 0, 0);
	assert_int_equal(sbx_create(s, 6, nm("z").s, n, 1, 1, &none), STORE_SBX_OVER_COUNT);
	assert_false(sbx_exists(s, 6));

	/* Memory: every open one's together, this one's with them; the
	 * ceiling itself is room enough. */
	struct text c_ = nm("c"), d_ = nm("d");
	const char *c = c_.s, *d = d_.s;
	struct tenant mem = sbx_limits(10, 1000, 0);
	assert_int_equal(sbx_create(s, 10, c, n, 600, 1u << 30, &mem), 0);
	assert_int_equal(sbx_create(s, 11, c, n, 401, 1, &mem), STORE_SBX_OVER_MEMORY);
	assert_int_equal(sbx_create(s, 11, c, n, 400, 1, &mem), 0);
	assert_int_equal(sbx_create(s, 12, c, n, 1, 1, &mem), STORE_SBX_OVER_MEMORY);
	assert_false(sbx_exists(s, 12));
	assert_int_equal(sbx_set(s, 10, NULL, SBS_STOPPED, 0, 700, 0, NULL), 1);
	assert_int_equal(sbx_create(s, 12, c, n, 600, 1, &mem), 0);
	/* One larger than the ceiling alone, whatever else is open. */
	assert_int_equal(sbx_create(s, 13, nm("e").s, n, 1001, 1, &mem), STORE_SBX_OVER_MEMORY);
	/* Disk, likewise. */
	struct tenant disk = sbx_limits(10, 0, 100);
	assert_int_equal(sbx_create(s, 20, d, n, 1u << 30, 60, &disk), 0);
	assert_int_equal(sbx_create(s, 21, d, n, 1, 50, &disk), STORE_SBX_OVER_DISK);
	assert_int_equal(sbx_create(s, 21, d, n, 1, 40, &disk), 0);
	assert_int_equal(sbx_create(s, 22, d, n, 1, 1, &disk), STORE_SBX_OVER_DISK);
	/* 0 is no ceiling: sizes far past any, many times over. */
	struct tenant open = sbx_limits(10, 0, 0);
	for (unsigned i = 30; i < 33; i++)
		assert_int_equal(sbx_create(s, i, nm("f").s, n, INT64_MAX / 4, INT64_MAX / 4, &open), 0);
	/* The count is looked at first, then memory, then disk. */
	struct tenant all = sbx_limits(2, 1000, 100);
	assert_int_equal(sbx_create(s, 40, nm("g").s, n, 1000, 100, &all), 0);
	assert_int_equal(sbx_create(s, 41, nm("g").s, n, 1, 1, &all), STORE_SBX_OVER_MEMORY);
	assert_int_equal(sbx_create(s, 41, nm("g").s, n, 0, 1, &all), STORE_SBX_OVER_DISK);
	assert_int_equal(sbx_create(s, 41, nm("g").s, n, 0, 0, &all), 0);
	assert_int_equal(sbx_create(s, 42, nm("g").s, n, 1, 1, &all), STORE_SBX_OVER_COUNT);
	store_close(s);
}

static int sbx_keyed(struct store *s, unsigned n, const char *tenant, const char *key, const char *hash,
		     int64_t now_ms, unsigned sandboxes, char replay[STORE_ID_LEN + 1])
{
	struct store_sandbox sb = new_sbx(n, tenant, nm("n").s, 512, 256);
	sb.created_ms = now_ms;
	struct tenant lim = sbx_limits(sandboxes, 0, 0);
	struct store_idem idem = { .key = key, .hash = hash };
	int v = s->ops->sbx_create(s, &sb, &idem, &lim, err, sizeof(err));
	memcpy(replay, idem.id, STORE_ID_LEN + 1);
	return v;
}

/* An Idempotency-Key on a create, as on a submit (submit_idempotent), in
 * a namespace of its own: a run's key is not a sandbox's. */
static void sbx_idempotent(void **state)
{
	(void)state;
	struct store *s = open_store();
	struct text a_ = nm("a"), b_ = nm("b");
	const char *a = a_.s, *b = b_.s;
	char h1[STORE_IDEM_HASH_LEN + 1], h2[STORE_IDEM_HASH_LEN + 1], id[STORE_ID_LEN + 1];
	memset(h1, '1', STORE_IDEM_HASH_LEN);
	memset(h2, '2', STORE_IDEM_HASH_LEN);
	h1[STORE_IDEM_HASH_LEN] = h2[STORE_IDEM_HASH_LEN] = '\0';
	const int64_t t0 = 10LL * STORE_IDEM_TTL_MS;
	assert_int_equal(sbx_keyed(s, 1, a, "k", h1, t0, 100, id), 0);
	/* again, the same body: the first, nothing new, though the tenant is
	 * now full */
	assert_int_equal(sbx_keyed(s, 2, a, "k", h1, t0 + 1000, 1, id), STORE_REPLAYED);
	assert_string_equal(id, id_of(1).s);
	assert_false(sbx_exists(s, 2));
	/* another body: refused, nothing stored */
	assert_int_equal(sbx_keyed(s, 3, a, "k", h2, t0 + 2000, 100, id), STORE_KEY_REUSED);
	assert_string_equal(id, id_of(1).s);
	assert_false(sbx_exists(s, 3));
	/* the same key is another tenant's own */
	assert_int_equal(sbx_keyed(s, 4, b, "k", h2, t0 + 3000, 100, id), 0);
	/* a refused create keeps no key: sent again with room, it is made */
	assert_int_equal(sbx_keyed(s, 5, a, "full", h1, t0 + 4000, 1, id), STORE_SBX_OVER_COUNT);
	assert_int_equal(sbx_keyed(s, 5, a, "full", h1, t0 + 5000, 100, id), 0);
	/* a stopped sandbox's key still replays, within its day */
	assert_int_equal(sbx_set(s, 1, NULL, SBS_STOPPED, 0, t0 + 6000, 0, NULL), 1);
	assert_int_equal(sbx_keyed(s, 6, a, "k", h1, t0 + 7000, 100, id), STORE_REPLAYED);
	assert_string_equal(id, id_of(1).s);
	/* past its day the key is free again, and names the new one */
	assert_int_equal(sbx_keyed(s, 6, a, "k", h2, t0 + STORE_IDEM_TTL_MS + 1, 100, id), 0);
	assert_int_equal(sbx_keyed(s, 7, a, "k", h2, t0 + STORE_IDEM_TTL_MS + 2, 100, id), STORE_REPLAYED);
	assert_string_equal(id, id_of(6).s);
	/* A run's key does not replay a sandbox, nor a sandbox's a run. */
	assert_int_equal(submit_keyed(s, 50, a, "shared", h1, t0, 100, id), SCHED_ACCEPT);
	assert_int_equal(sbx_keyed(s, 51, a, "shared", h1, t0 + 1, 100, id), 0);
	assert_int_equal(submit_keyed(s, 52, a, "shared", h1, t0 + 2, 100, id), STORE_REPLAYED);
	assert_string_equal(id, id_of(50).s);
	assert_int_equal(sbx_keyed(s, 53, a, "shared", h1, t0 + 3, 100, id), STORE_REPLAYED);
	assert_string_equal(id, id_of(51).s);
	assert_int_equal(sbx_keyed(s, 54, a, "k", h1, t0 + STORE_IDEM_TTL_MS + 3, 100, id), STORE_KEY_REUSED);
	assert_int_equal(submit_keyed(s, 54, a, "k", h1, t0 + STORE_IDEM_TTL_MS + 3, 100, id), SCHED_ACCEPT);
	/* a sandbox dropped by retention takes its key with it */
	assert_int_equal(sbx_set(s, 6, NULL, SBS_STOPPED, 0, 100, 0, NULL), 1);
	assert_true(s->ops->sbx_drop(s, 200, err, sizeof(err)) >= 1);
	assert_false(sbx_exists(s, 6));
	assert_int_equal(sbx_keyed(s, 8, a, "k", h1, t0 + STORE_IDEM_TTL_MS + 4, 100, id), 0);
	store_close(s);
}

/* A parked sandbox (node ""): no node holds it, and of two claims one wins. */
static void sbx_move_parks_and_claims(void **state)
{
	(void)state;
	struct store *s = open_store();
	struct text a_ = nm("a"), n_ = nm("n"), m_ = nm("m");
	const char *a = a_.s, *n = n_.s, *m = m_.s;
	sbx_put(s, 1, a, n);
	assert_int_equal(sbx_set(s, 1, n, SBS_PAUSED, 0, 0, 5000, NULL), 1);
	/* only from the node and the state it is in */
	assert_int_equal(s->ops->sbx_move(s, id_of(1).s, m, SBS_PAUSED, "", SBS_PAUSED, 0, "x", err, sizeof(err)), 0);
	assert_int_equal(s->ops->sbx_move(s, id_of(1).s, n, SBS_RUNNING, "", SBS_PAUSED, 0, "x", err, sizeof(err)), 0);
	assert_int_equal(s->ops->sbx_move(s, id_of(1).s, n, SBS_PAUSED, "", SBS_PAUSED, 0, "parked", err, sizeof(err)), 1);
	struct store_sandbox sb = sbx_get(s, 1);
	assert_int_equal(sb.timeout_at_ms, 5000);   /* 0: kept */
	store_sandbox_free(&sb);
	assert_int_equal(s->ops->sbx_move(s, id_of(1).s, "", SBS_PAUSED, "", SBS_PAUSED, 7000, NULL, err, sizeof(err)), 1);
	sb = sbx_get(s, 1);
	assert_int_equal(sb.timeout_at_ms, 7000);
	store_sandbox_free(&sb);
	assert_int_equal(s->ops->sbx_move(s, id_of(1).s, "", SBS_PAUSED, "", SBS_PAUSED, 5000, NULL, err, sizeof(err)), 1);
	sb = sbx_get(s, 1);
	assert_string_equal(sb.node, "");
	assert_int_equal(sb.state, SBS_PAUSED);
	assert_string_equal(sb.reason, "parked");
	assert_int_equal(sb.timeout_at_ms, 5000);
	store_sandbox_free(&sb);
	/* its old node's end does not take it */
	assert_int_equal(s->ops->sbx_lost(s, n, 1000, NULL, NULL, err, sizeof(err)), 0);
	assert_int_equal(sbx_state_of(s, 1), SBS_PAUSED);
	/* two claims: the first wins; NULL reason keeps it */
	assert_int_equal(s->ops->sbx_move(s, id_of(1).s, "", SBS_PAUSED, m, SBS_PAUSED, 0, NULL, err, sizeof(err)), 1);
	assert_int_equal(s->ops->sbx_move(s, id_of(1).s, "", SBS_PAUSED, n, SBS_PAUSED, 0, NULL, err, sizeof(err)), 0);
	sb = sbx_get(s, 1);
	assert_string_equal(sb.node, m);
	assert_string_equal(sb.reason, "parked");
	store_sandbox_free(&sb);
	/* lost, then resumable on no node: open again (its tenant's place), not lost twice */
	sbx_put(s, 2, a, n);
	assert_int_equal(s->ops->sbx_lost(s, n, 1000, NULL, NULL, err, sizeof(err)), 1);
	assert_int_equal(s->ops->sbx_move(s, id_of(2).s, n, SBS_LOST, "", SBS_RESUMABLE, 0, "resumable", err, sizeof(err)),
			 1);
	assert_int_equal(s->ops->sbx_lost(s, n, 2000, NULL, NULL, err, sizeof(err)), 0);
	sb = sbx_get(s, 2);
	assert_int_equal(sb.state, SBS_RESUMABLE);
	assert_int_equal(sb.ended_ms, 1000);
	store_sandbox_free(&sb);
	assert_int_equal(sbx_set(s, 2, "", SBS_STOPPED, 0, 3000, 0, "deleted"), 1);
	store_close(s);
}

static void sbx_set_moves(void **state)
{
	(void)state;
	struct store *s = open_store();
	struct text a_ = nm("a"), n_ = nm("n"), m_ = nm("m");
	const char *a = a_.s, *n = n_.s, *m = m_.s;
	sbx_put(s, 1, a, n);
	/* starting -> running, by its node */
	assert_int_equal(sbx_set(s, 1, n, SBS_RUNNING, 200, 0, 5000, NULL), 1);
	struct store_sandbox sb = sbx_get(s, 1);
	assert_int_equal(sb.state, SBS_RUNNING);
	assert_int_equal(sb.started_ms, 200);
	assert_int_equal(sb.ended_ms, 0);
	assert_int_equal(sb.timeout_at_ms, 5000);
	assert_string_equal(sb.reason, "");
	assert_string_equal(sb.node, n);
	store_sandbox_free(&sb);
	/* not another node's to move, nor one that is not there */
	assert_int_equal(sbx_set(s, 1, m, SBS_STOPPING, 0, 0, 0, "no"), 0);
	assert_int_equal(sbx_set(s, 99, NULL, SBS_STOPPING, 0, 0, 0, "no"), 0);
	assert_int_equal(sbx_state_of(s, 1), SBS_RUNNING);
	/* to the state it is in: a new timeout; zeros and NULL keep the rest */
	assert_int_equal(sbx_set(s, 1, n, SBS_RUNNING, 0, 0, 6000, NULL), 1);
	sb = sbx_get(s, 1);
	assert_int_equal(sb.state, SBS_RUNNING);
	assert_int_equal(sb.started_ms, 200);
	assert_int_equal(sb.timeout_at_ms, 6000);
	assert_int_equal(sb.ended_ms, 0);
	assert_string_equal(sb.reason, "");
	store_sandbox_free(&sb);
	/* NULL node: whoever holds it */
	assert_int_equal(sbx_set(s, 1, NULL, SBS_STOPPING, 0, 0, 0, "asked"), 1);
	assert_int_equal(sbx_set(s, 1, n, SBS_STOPPED, 0, 900, 0, NULL), 1);
	sb = sbx_get(s, 1);
	assert_int_equal(sb.state, SBS_STOPPED);
	assert_int_equal(sb.started_ms, 200);
	assert_int_equal(sb.ended_ms, 900);
	assert_int_equal(sb.timeout_at_ms, 6000);
	assert_string_equal(sb.reason, "asked");
	store_sandbox_free(&sb);
	/* terminal: never changes again, not even to itself, nor by sbx_lost */
	assert_int_equal(sbx_set(s, 1, n, SBS_RUNNING, 1, 1, 1, "again"), 0);
	assert_int_equal(sbx_set(s, 1, NULL, SBS_STOPPED, 1, 1, 1, "again"), 0);
	assert_int_equal(sbx_set(s, 1, NULL, SBS_LOST, 1, 1, 1, "again"), 0);
	assert_int_equal(s->ops->sbx_lost(s, n, 1000, NULL, NULL, err, sizeof(err)), 0);
	sb = sbx_get(s, 1);
	assert_int_equal(sb.state, SBS_STOPPED);
	assert_int_equal(sb.started_ms, 200);
	assert_int_equal(sb.ended_ms, 900);
	assert_int_equal(sb.timeout_at_ms, 6000);
	assert_string_equal(sb.reason, "asked");
	store_sandbox_free(&sb);
	/* lost is terminal too; any open state may end so */
	sbx_put(s, 2, a, n);
	assert_int_equal(sbx_set(s, 2, n, SBS_LOST, 0, 300, 0, "gone"), 1);
	assert_int_equal(sbx_set(s, 2, n, SBS_RUNNING, 0, 0, 0, NULL), 0);
	assert_int_equal(sbx_state_of(s, 2), SBS_LOST);
	/* "" is a reason (none) that replaces one; a long one is cut where a
	 * character starts */
	sbx_put(s, 3, a, n);
	assert_int_equal(sbx_set(s, 3, n, SBS_STOPPING, 0, 0, 0, "first"), 1);
	assert_int_equal(sbx_set(s, 3, n, SBS_STOPPING, 0, 0, 0, ""), 1);
	sb = sbx_get(s, 3);
	assert_string_equal(sb.reason, "");
	store_sandbox_free(&sb);
	char why[700];
	size_t len = 0;
	while (len + 2 < sizeof(why)) {
		memcpy(why + len, "\xc3\xa9", 2);
		len += 2;
	}
	why[len] = '\0';
	assert_int_equal(sbx_set(s, 3, n, SBS_STOPPED, 0, 400, 0, why), 1);
	sb = sbx_get(s, 3);
	size_t got = strlen(sb.reason);
	assert_true(got < sizeof(sb.reason) && got >= sizeof(sb.reason) - 2);
	assert_int_equal(got % 2, 0);
	assert_memory_equal(sb.reason, why, got);
	store_sandbox_free(&sb);
	/* a value that is no state is an error, in one line */
	sbx_put(s, 4, a, n);
	err[0] = '\0';
	assert_int_equal(s->ops->sbx_set(s, id_of(4).s, n, (enum sbx_row_state)SBS_COUNT, 0, 0, 0, NULL, err,
					 sizeof(err)),
			 -1);
	one_line();
	assert_int_equal(sbx_state_of(s, 4), SBS_STARTING);
	store_close(s);
}

/* What a walk over sandboxes saw, of this test's. */
struct sbx_walk {
	unsigned n[16];
	unsigned k, stop_after;
	struct store *s;
};

static bool sbx_mine(const struct store_sandbox *sb)
{
	return !strncmp(sb->tenant, pfx, strlen(pfx)) && sb->tenant[strlen(pfx)] == '-';
}

static int sbx_record(void *ctx, const struct store_sandbox *sb)
{
	struct sbx_walk *w = ctx;
	if (!sbx_mine(sb))
		return 0;
	assert_true(w->k < 16);
	assert_non_null(sb->request);
	w->n[w->k++] = num_of(sb->id);
	return w->stop_after && w->k == w->stop_after ? 42 : 0;
}

/* What a daemon may do from a walk: end the sandbox it was given, and
 * read it back. */
static int sbx_stop(void *ctx, const struct store_sandbox *sb)
{
	struct sbx_walk *w = ctx;
	char e[512];
	if (!sbx_mine(sb))
		return 0;
	w->k++;
	assert_int_equal(w->s->ops->sbx_set(w->s, sb->id, sb->node, SBS_STOPPED, 0, 9000, 0, "by hand", e, sizeof(e)),
			 1);
	struct store_sandbox now;
	assert_int_equal(w->s->ops->sbx_get(w->s, sb->id, NULL, &now, e, sizeof(e)), 1);
	assert_int_equal(now.state, SBS_STOPPED);
	store_sandbox_free(&now);
	return 0;
}

static void sbx_walks(struct store *s, const char *tenant, const char *node, bool open_only, unsigned want_n,
		      const unsigned *want)
{
	struct sbx_walk w = { .k = 0 };
	if (s->ops->sbx_each(s, tenant, node, open_only, sbx_record, &w, err, sizeof(err)) != 0)
		fail_msg("sbx_each: %s", err);
	if (w.k != want_n)
		fail_msg("walked %u, wanted %u", w.k, want_n);
	for (unsigned i = 0; i < want_n; i++)
		if (w.n[i] != want[i])
			fail_msg("walk %u: got sandbox %u, wanted %u", i, w.n[i], want[i]);
}

static void sbx_each_in_order(void **state)
{
	(void)state;
	struct store *s = open_store();
	struct text a_ = nm("a"), b_ = nm("b"), n_ = nm("n"), m_ = nm("m");
	const char *a = a_.s, *b = b_.s, *n = n_.s, *m = m_.s;
	/* Ids not in the order of creation, so that only seq orders them. */
	sbx_put(s, 50, a, n);
	sbx_put(s, 10, b, n);
	sbx_put(s, 40, a, m);
	sbx_put(s, 20, b, m);
	sbx_put(s, 30, a, n);
	assert_int_equal(sbx_set(s, 40, m, SBS_STOPPED, 0, 500, 0, NULL), 1);
	assert_int_equal(sbx_set(s, 10, n, SBS_RUNNING, 100, 0, 0, NULL), 1);
	sbx_walks(s, a, NULL, false, 3, (unsigned[]){ 50, 40, 30 });
	sbx_walks(s, a, NULL, true, 2, (unsigned[]){ 50, 30 });
	sbx_walks(s, NULL, n, false, 3, (unsigned[]){ 50, 10, 30 });
	sbx_walks(s, NULL, m, true, 1, (unsigned[]){ 20 });
	sbx_walks(s, b, m, false, 1, (unsigned[]){ 20 });
	sbx_walks(s, a, m, true, 0, NULL);
	sbx_walks(s, NULL, NULL, false, 5, (unsigned[]){ 50, 10, 40, 20, 30 });
	sbx_walks(s, NULL, NULL, true, 4, (unsigned[]){ 50, 10, 20, 30 });
	sbx_walks(s, nm("nobody").s, NULL, false, 0, NULL);
	/* Stopped early: fn's value, and no more calls. */
	struct sbx_walk w = { .stop_after = 2 };
	assert_int_equal(s->ops->sbx_each(s, a, NULL, false, sbx_record, &w, err, sizeof(err)), 42);
	assert_int_equal(w.k, 2);
	/* fn may change the sandbox it is given, and that holds at once. */
	memset(&w, 0, sizeof(w));
	w.s = s;
	assert_int_equal(s->ops->sbx_each(s, NULL, n, true, sbx_stop, &w, err, sizeof(err)), 0);
	assert_int_equal(w.k, 3);
	sbx_walks(s, NULL, NULL, true, 1, (unsigned[]){ 20 });
	struct store_sandbox sb = sbx_get(s, 10);
	assert_int_equal(sb.state, SBS_STOPPED);
	assert_string_equal(sb.reason, "by hand");
	store_sandbox_free(&sb);
	store_close(s);
}

/* What sbx_lost's fn was given, of this test's sandboxes. */
struct sbx_lost_seen {
	struct store_sandbox sb[16];
	unsigned k;
};

static void sbx_note_lost(void *ctx, const struct store_sandbox *sb)
{
	struct sbx_lost_seen *l = ctx;
	if (!sbx_mine(sb))
		return;
	assert_true(l->k < 16);
	l->sb[l->k] = *sb;
	l->sb[l->k++].request = NULL;   /* the row's, valid only in the call */
}

static void sbx_lost_node(void **state)
{
	(void)state;
	struct store *s = open_store();
	struct text a_ = nm("a"), n_ = nm("n"), m_ = nm("m");
	const char *a = a_.s, *n = n_.s, *m = m_.s;
	char msg[512];
	sbx_put(s, 3, a, n);
	sbx_put(s, 1, a, n);
	sbx_put(s, 2, a, m);
	sbx_put(s, 4, a, n);
	sbx_put(s, 5, a, n);
	assert_int_equal(sbx_set(s, 1, n, SBS_RUNNING, 100, 0, 5000, NULL), 1);
	assert_int_equal(sbx_set(s, 5, n, SBS_STOPPING, 0, 0, 0, "asked"), 1);
	assert_int_equal(sbx_set(s, 4, n, SBS_STOPPED, 0, 300, 0, "done"), 1);
	/* A node's own, whatever its lease (here: it has one). */
	assert_int_equal(s->ops->heartbeat(s, n, 60000, NULL, NULL, err, sizeof(err)), 0);
	struct sbx_lost_seen l = { .k = 0 };
	assert_int_equal(s->ops->sbx_lost(s, n, 900, sbx_note_lost, &l, err, sizeof(err)), 3);
	assert_int_equal(l.k, 3);
	snprintf(msg, sizeof(msg), STORE_MSG_SBX_LOST, n);
	const unsigned order[] = { 3, 1, 5 };   /* creation order */
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(num_of(l.sb[i].id), order[i]);
		assert_int_equal(l.sb[i].state, SBS_LOST);
		assert_int_equal(l.sb[i].ended_ms, 900);
		assert_string_equal(l.sb[i].reason, msg);
		assert_string_equal(l.sb[i].node, n);
	}
	assert_int_equal(l.sb[1].started_ms, 100);
	assert_int_equal(l.sb[1].timeout_at_ms, 5000);
	/* What fn saw is what the store holds. */
	struct store_sandbox sb = sbx_get(s, 5);
	assert_int_equal(sb.state, SBS_LOST);
	assert_int_equal(sb.ended_ms, 900);
	assert_string_equal(sb.reason, msg);
	store_sandbox_free(&sb);
	/* Another node's, and a stopped one, are not touched. */
	assert_int_equal(sbx_state_of(s, 2), SBS_STARTING);
	sb = sbx_get(s, 4);
	assert_int_equal(sb.state, SBS_STOPPED);
	assert_int_equal(sb.ended_ms, 300);
	assert_string_equal(sb.reason, "done");
	store_sandbox_free(&sb);
	/* Nothing more of n's; fn may be NULL. */
	memset(&l, 0, sizeof(l));
	assert_int_equal(s->ops->sbx_lost(s, n, 1000, sbx_note_lost, &l, err, sizeof(err)), 0);
	assert_int_equal(l.k, 0);
	assert_int_equal(s->ops->sbx_lost(s, m, 1000, NULL, NULL, err, sizeof(err)), 1);
	assert_int_equal(sbx_state_of(s, 2), SBS_LOST);
	store_close(s);
}

/* As expire_lease: node NULL loses the sandboxes of every node whose
 * lease ran out, and only theirs. */
static void sbx_lost_lease(void **state)
{
	(void)state;
	struct store *s = open_store();
	struct text a_ = nm("a"), dead_ = nm("dead"), live_ = nm("live"), back_ = nm("back"), never_ = nm("never");
	const char *a = a_.s, *dead = dead_.s, *live = live_.s, *back = back_.s, *never = never_.s;
	assert_int_equal(s->ops->heartbeat(s, dead, 1, NULL, NULL, err, sizeof(err)), 0);
	assert_int_equal(s->ops->heartbeat(s, live, 60000, NULL, NULL, err, sizeof(err)), 0);
	assert_int_equal(s->ops->heartbeat(s, back, 1, NULL, NULL, err, sizeof(err)), 0);
	sbx_put(s, 1, a, dead);
	sbx_put(s, 2, a, dead);
	sbx_put(s, 3, a, live);
	sbx_put(s, 4, a, back);
	sbx_put(s, 5, a, never);   /* a node with no lease at all is not known dead */
	sbx_put(s, 6, a, dead);
	assert_int_equal(sbx_set(s, 2, dead, SBS_RUNNING, 100, 0, 0, NULL), 1);
	assert_int_equal(sbx_set(s, 6, dead, SBS_STOPPED, 0, 200, 0, NULL), 1);
	sleep_ms(20);
	/* A lease renewed is a live node's. */
	assert_int_equal(s->ops->heartbeat(s, back, 60000, NULL, NULL, err, sizeof(err)), 0);
	struct sbx_lost_seen l = { .k = 0 };
	/* Other nodes' of a shared store may go too: at least dead's. */
	int rc = s->ops->sbx_lost(s, NULL, 900, sbx_note_lost, &l, err, sizeof(err));
	if (rc < 0)
		fail_msg("sbx_lost: %s", err);
	assert_true(rc >= 2);
	assert_int_equal(l.k, 2);
	assert_int_equal(num_of(l.sb[0].id), 1);
	assert_int_equal(num_of(l.sb[1].id), 2);
	char msg[512];
	snprintf(msg, sizeof(msg), STORE_MSG_SBX_LOST, dead);
	assert_string_equal(l.sb[1].reason, msg);
	assert_int_equal(sbx_state_of(s, 1), SBS_LOST);
	assert_int_equal(sbx_state_of(s, 2), SBS_LOST);
	assert_int_equal(sbx_state_of(s, 3), SBS_STARTING);
	assert_int_equal(sbx_state_of(s, 4), SBS_STARTING);
	assert_int_equal(sbx_state_of(s, 5), SBS_STARTING);
	assert_int_equal(sbx_state_of(s, 6), SBS_STOPPED);
	memset(&l, 0, sizeof(l));
	assert_true(s->ops->sbx_lost(s, NULL, 1000, sbx_note_lost, &l, err, sizeof(err)) >= 0);
	assert_int_equal(l.k, 0);
	store_close(s);
}

/* Sandbox retention: terminal ones that ended before the time go, with
 * their keys; open ones stay whatever their times; seq goes on past the
 * ones that went. */
static void sbx_drop_ended(void **state)
{
	(void)state;
	struct store *s = open_store();
	struct text a_ = nm("a"), n_ = nm("n");
	const char *a = a_.s, *n = n_.s;
	char h[STORE_IDEM_HASH_LEN + 1], id[STORE_ID_LEN + 1];
	memset(h, 'h', STORE_IDEM_HASH_LEN);
	h[STORE_IDEM_HASH_LEN] = '\0';
	const int64_t t0 = 10LL * STORE_IDEM_TTL_MS;
	assert_int_equal(sbx_keyed(s, 1, a, "one", h, t0, 100, id), 0);
	for (unsigned i = 2; i <= 5; i++)
		sbx_put(s, i, a, n);
	assert_int_equal(sbx_set(s, 1, NULL, SBS_STOPPED, 0, 5000, 0, NULL), 1);
	assert_int_equal(sbx_set(s, 2, NULL, SBS_LOST, 0, 5000, 0, NULL), 1);
	assert_int_equal(sbx_set(s, 3, NULL, SBS_STOPPED, 0, 9000, 0, NULL), 1);
	assert_int_equal(sbx_set(s, 4, NULL, SBS_STOPPING, 0, 1000, 0, NULL), 1);   /* open, an end time or not */
	struct store_sandbox last = sbx_get(s, 5);   /* the newest seq so far */
	assert_int_equal(sbx_set(s, 5, NULL, SBS_STOPPED, 0, 5000, 0, NULL), 1);
	long dropped = s->ops->sbx_drop(s, 6000, err, sizeof(err));
	if (dropped < 0)
		fail_msg("sbx_drop: %s", err);
	assert_true(dropped >= 3);   /* a shared store may hold others' */
	assert_false(sbx_exists(s, 1));
	assert_false(sbx_exists(s, 2));
	assert_false(sbx_exists(s, 5));
	assert_int_equal(sbx_state_of(s, 3), SBS_STOPPED);
	assert_int_equal(sbx_state_of(s, 4), SBS_STOPPING);
	/* the key went with its sandbox: within its day, it makes a new one */
	assert_int_equal(sbx_keyed(s, 6, a, "one", h, t0 + 1, 100, id), 0);
	struct store_sandbox next = sbx_get(s, 6);
	assert_true(next.seq > last.seq);
	store_sandbox_free(&next);
	store_sandbox_free(&last);
	/* at its time, not before */
	assert_true(s->ops->sbx_drop(s, 9000, err, sizeof(err)) >= 0);
	assert_true(sbx_exists(s, 3));
	assert_true(s->ops->sbx_drop(s, 9001, err, sizeof(err)) >= 1);
	assert_false(sbx_exists(s, 3));
	assert_true(sbx_exists(s, 4));
	assert_true(sbx_exists(s, 6));
	/* nothing to drop is not an error */
	assert_true(s->ops->sbx_drop(s, 9001, err, sizeof(err)) >= 0);
	/* the runs are not the sandboxes' to drop */
	put(s, 7, a, "{}");
	assert_int_equal(s->ops->finish(s, id_of(7).s, NULL, RS_CANCELLED, 100, NULL, NULL, "x", err, sizeof(err)), 1);
	assert_true(s->ops->sbx_drop(s, 1000000, err, sizeof(err)) >= 0);
	assert_true(exists(s, 7));
	store_close(s);
}

/* A child's life: its own connection, creates until its ids are spent;
 * how many it was let make is its exit status (or 100 and up: failed). */
static int sbx_create_loop(unsigned first, const char *tenant, const char *node, const struct tenant *lim)
{
	char e[512];
	struct store *s = store_open(spec, e, sizeof(e));
	if (!s)
		return 100;
	int made = 0;
	for (unsigned i = first; i < first + 10; i++) {
		struct store_sandbox sb = new_sbx(i, tenant, node, 100, 10);
		int v = s->ops->sbx_create(s, &sb, NULL, lim, e, sizeof(e));
		if (v == 0) {
			made++;
		} else if (v != STORE_SBX_OVER_COUNT && v != STORE_SBX_OVER_MEMORY) {
			fprintf(stderr, "%s: %d %s\n", node, v, e);
			made = 101;
			break;
		}
	}
	store_close(s);
	return made;
}

static int sbx_count_open(void *ctx, const struct store_sandbox *sb)
{
	(*(unsigned *)ctx)++;
	assert_true(sb->state == SBS_STARTING);
	return 0;
}

/* Nodes creating at once, each its own process and connection, for one
 * tenant (ids from first on): as many as lim lets are made in all, and no
 * more. */
static void sbx_race(unsigned first, const char *tenant, const struct tenant *lim, int want)
{
	enum { PROCS = 4 };
	pid_t pids[PROCS];
	for (int p = 0; p < PROCS; p++) {
		char what[16];
		snprintf(what, sizeof(what), "n%d", p);
		struct text node = nm(what);
		fflush(NULL);
		pids[p] = fork();
		assert_true(pids[p] >= 0);
		if (pids[p] == 0)
			_exit(sbx_create_loop(first + (unsigned)p * 100, tenant, node.s, lim));
	}
	int made = 0;
	for (int p = 0; p < PROCS; p++) {
		int status;
		assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
		assert_true(WIFEXITED(status));
		assert_true(WEXITSTATUS(status) < 100);
		made += WEXITSTATUS(status);
	}
	assert_int_equal(made, want);
	struct store *s = open_store();
	unsigned open = 0;
	assert_int_equal(s->ops->sbx_each(s, tenant, NULL, true, sbx_count_open, &open, err, sizeof(err)), 0);
	assert_int_equal(open, (unsigned)want);
	store_close(s);
}

/* The tenant's ceilings hold for every node together: the count (5 at
 * once) and the memory (700 MiB, 7 of 100). */
static void sbx_create_race(void **state)
{
	(void)state;
	struct tenant count = sbx_limits(5, 0, 0), memory = sbx_limits(100, 700, 0);
	sbx_race(0, nm("a").s, &count, 5);
	sbx_race(1000, nm("b").s, &memory, 7);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(sqlite_creates_schema),
		T(sqlite_migrates_v1),
		T(sqlite_refuses_not_sqlite),
		T(sqlite_refuses_newer_schema),
		T(sqlite_missing_directory),
		T(sqlite_not_inherited),
		T(sqlite_no_notes),
		T(survives_reopen),
		T(submit_and_get),
		T(submit_admission),
		T(submit_duplicate),
		T(submit_idempotent),
		T(claim_fair_across_tenants),
		T(claim_least_recent),
		T(claim_flood),
		T(claim_limits),
		T(claim_by_room),
		T(claim_two_nodes),
		T(claim_checkpoint_node),
		T(expire_pinned),
		T(claim_race),
		T(command_guard),
		T(finish_guard),
		T(finish_outcome),
		T(cancel_results),
		T(heartbeat_reports_cancels),
		T(expire_node),
		T(expire_lease),
		T(blobs),
		T(blob_names_refused),
		T(drop_runs),
		T(each_in_order),
		T(list_pages),
		T(counts),
		cmocka_unit_test(state_names),
		T(large_request),
		T(utf8_text),
		T(rate_shared),
		T(sbx_create_and_get),
		T(sbx_admission),
		T(sbx_idempotent),
		T(sbx_set_moves),
		T(sbx_move_parks_and_claims),
		T(sbx_each_in_order),
		T(sbx_lost_node),
		T(sbx_lost_lease),
		T(sbx_drop_ended),
		T(sbx_create_race),
		cmocka_unit_test(sbx_state_names),
		T(node_addresses),
	};
	return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
