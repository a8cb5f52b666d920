/* vmrund's store (host/vmrund/store.c, store_sqlite.c): the schema a new
 * file gets, rows that outlive a close, the state machine's guards (start
 * only from queued, finish once), the walk in acceptance order, counts, and
 * the files it refuses (not SQLite, a newer schema) as one line. Each test
 * gets a new directory. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"

static char dir[64];
static char db[128];
static char err[512];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_store.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(db, sizeof(db), "%s/state.db", dir);
	err[0] = '\0';
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[96];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

static struct store *open_db(void)
{
	struct store *s = store_sqlite_open(db, err, sizeof(err));
	if (!s)
		fail_msg("open: %s", err);
	return s;
}

/* A run as the daemon would insert it; n picks the id. */
static struct store_run new_run(unsigned n, const char *tenant, const char *request)
{
	struct store_run r;
	memset(&r, 0, sizeof(r));
	snprintf(r.id, sizeof(r.id), "%032x", n);
	snprintf(r.tenant, sizeof(r.tenant), "%s", tenant);
	r.state = RS_SUCCEEDED;     /* ignored: a new run is queued */
	r.created_ms = 1000 + n;
	r.request = (char *)request;
	r.seq = 12345;              /* ignored: the store assigns it */
	return r;
}

static void put(struct store *s, unsigned n, const char *tenant, const char *request)
{
	struct store_run r = new_run(n, tenant, request);
	if (s->ops->insert(s, &r, err, sizeof(err)) != 0)
		fail_msg("insert %u: %s", n, err);
}

/* Run n's id, by value so that no buffer is shared: id_of(n).s lives to
 * the end of the expression that uses it. */
struct id_text {
	char s[STORE_ID_LEN + 1];
};

static struct id_text id_of(unsigned n)
{
	struct id_text id;
	snprintf(id.s, sizeof(id.s), "%032x", n);
	return id;
}

/* One value from the file, read past the store, as an operator would. */
static long long raw_int(const char *sql)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	long long v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return v;
}

static void raw_exec(const char *sql)
{
	sqlite3 *h;
	assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
}

static void creates_schema(void **state)
{
	(void)state;
	struct store *s = open_db();
	assert_int_equal(access(db, F_OK), 0);
	uint64_t count[RS_COUNT];
	assert_int_equal(s->ops->count(s, count, err, sizeof(err)), 0);
	for (int i = 0; i < RS_COUNT; i++)
		assert_int_equal(count[i], 0);
	store_close(s);
	assert_int_equal(raw_int("PRAGMA user_version"), 1);
	assert_int_equal(raw_int("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'runs'"), 1);
	assert_int_equal(raw_int("SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'runs'"
				 " AND name IN ('runs_state_seq', 'runs_tenant')"),
			 2);
	/* WAL is a property of the file: it stays after close. */
	assert_int_equal(raw_int("SELECT journal_mode = 'wal' FROM pragma_journal_mode"), 1);
	/* The CHECK keeps names the code does not know out of the file. */
	sqlite3 *h;
	assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	assert_int_not_equal(sqlite3_exec(h, "INSERT INTO runs (id, tenant, state, created_ms, request)"
					     " VALUES ('x', 't', 'paused', 1, '{}')", NULL, NULL, NULL),
			     SQLITE_OK);
	sqlite3_close(h);
	/* Opening again an existing file keeps it. */
	s = open_db();
	store_close(s);
	store_close(NULL);
}

static void survives_reopen(void **state)
{
	(void)state;
	struct store *s = open_db();
	put(s, 1, "alice", "{\"runtime\":\"python\"}");
	put(s, 2, "bob", "{\"runtime\":\"bash\"}");
	assert_int_equal(s->ops->start(s, id_of(2).s, 5000, err, sizeof(err)), 1);
	assert_int_equal(s->ops->finish(s, id_of(2).s, RS_FAILED, 6000, "{\"exit\":1}", "exit status 1", err, sizeof(err)),
			 1);
	store_close(s);

	s = open_db();
	struct store_run r;
	assert_int_equal(s->ops->get(s, id_of(1).s, "alice", &r, err, sizeof(err)), 1);
	assert_string_equal(r.request, "{\"runtime\":\"python\"}");
	assert_int_equal(r.state, RS_QUEUED);
	store_run_free(&r);
	assert_int_equal(s->ops->get(s, id_of(2).s, NULL, &r, err, sizeof(err)), 1);
	assert_int_equal(r.state, RS_FAILED);
	assert_int_equal(r.started_ms, 5000);
	assert_int_equal(r.finished_ms, 6000);
	assert_string_equal(r.result, "{\"exit\":1}");
	assert_string_equal(r.message, "exit status 1");
	store_run_free(&r);
	/* New runs come after the old ones. */
	put(s, 3, "alice", "{}");
	assert_int_equal(s->ops->get(s, id_of(3).s, NULL, &r, err, sizeof(err)), 1);
	assert_true(r.seq > 2);
	store_run_free(&r);
	store_close(s);
}

static void insert_and_get(void **state)
{
	(void)state;
	struct store *s = open_db();
	put(s, 7, "alice", "{\"argv\":[\"true\"]}");
	struct store_run r;
	assert_int_equal(s->ops->get(s, id_of(7).s, "alice", &r, err, sizeof(err)), 1);
	assert_string_equal(r.id, id_of(7).s);
	assert_string_equal(r.tenant, "alice");
	assert_int_equal(r.state, RS_QUEUED);
	assert_int_equal(r.created_ms, 1007);
	assert_int_equal(r.started_ms, 0);
	assert_int_equal(r.finished_ms, 0);
	assert_string_equal(r.request, "{\"argv\":[\"true\"]}");
	assert_null(r.result);
	assert_string_equal(r.message, "");
	assert_int_not_equal(r.seq, 12345);
	assert_true(r.seq > 0);
	store_run_free(&r);
	store_run_free(&r);   /* safe twice */

	/* Another tenant's run is not found, and *out is left empty. */
	memset(&r, 0x5a, sizeof(r));
	assert_int_equal(s->ops->get(s, id_of(7).s, "bob", &r, err, sizeof(err)), 0);
	assert_null(r.request);
	assert_string_equal(r.id, "");
	assert_int_equal(s->ops->get(s, id_of(7).s, NULL, &r, err, sizeof(err)), 1);
	assert_string_equal(r.tenant, "alice");
	store_run_free(&r);
	assert_int_equal(s->ops->get(s, id_of(8).s, NULL, &r, err, sizeof(err)), 0);
	store_close(s);
}

static void duplicate_id(void **state)
{
	(void)state;
	struct store *s = open_db();
	put(s, 1, "alice", "{\"first\":1}");
	struct store_run r = new_run(1, "bob", "{\"second\":1}");
	err[0] = '\0';
	assert_int_equal(s->ops->insert(s, &r, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "state db: "));
	assert_non_null(strstr(err, "UNIQUE"));
	assert_null(strchr(err, '\n'));
	/* The first is untouched, and the store still works. */
	struct store_run got;
	assert_int_equal(s->ops->get(s, id_of(1).s, NULL, &got, err, sizeof(err)), 1);
	assert_string_equal(got.tenant, "alice");
	assert_string_equal(got.request, "{\"first\":1}");
	store_run_free(&got);
	/* A run without a request is refused too. */
	r = new_run(2, "bob", NULL);
	assert_int_equal(s->ops->insert(s, &r, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "NOT NULL"));
	put(s, 3, "bob", "{}");
	store_close(s);
}

static void start_only_from_queued(void **state)
{
	(void)state;
	struct store *s = open_db();
	put(s, 1, "alice", "{}");
	assert_int_equal(s->ops->start(s, id_of(1).s, 2000, err, sizeof(err)), 1);
	struct store_run r;
	assert_int_equal(s->ops->get(s, id_of(1).s, NULL, &r, err, sizeof(err)), 1);
	assert_int_equal(r.state, RS_RUNNING);
	assert_int_equal(r.started_ms, 2000);
	store_run_free(&r);
	assert_int_equal(s->ops->start(s, id_of(1).s, 3000, err, sizeof(err)), 0);   /* already running */
	assert_int_equal(s->ops->start(s, id_of(9).s, 3000, err, sizeof(err)), 0);   /* no such run */
	put(s, 2, "alice", "{}");
	assert_int_equal(s->ops->finish(s, id_of(2).s, RS_CANCELLED, 2500, NULL, "cancelled", err, sizeof(err)), 1);
	assert_int_equal(s->ops->start(s, id_of(2).s, 3000, err, sizeof(err)), 0);   /* cancelled while queued */
	assert_int_equal(s->ops->get(s, id_of(1).s, NULL, &r, err, sizeof(err)), 1);
	assert_int_equal(r.started_ms, 2000);
	store_run_free(&r);
	store_close(s);
}

static void finish_once(void **state)
{
	(void)state;
	struct store *s = open_db();
	put(s, 1, "alice", "{}");
	put(s, 2, "alice", "{}");
	/* From queued: never started. */
	assert_int_equal(s->ops->finish(s, id_of(1).s, RS_CANCELLED, 1500, NULL, "cancelled by the caller", err,
					sizeof(err)),
			 1);
	struct store_run r;
	assert_int_equal(s->ops->get(s, id_of(1).s, NULL, &r, err, sizeof(err)), 1);
	assert_int_equal(r.state, RS_CANCELLED);
	assert_int_equal(r.started_ms, 0);
	assert_int_equal(r.finished_ms, 1500);
	assert_null(r.result);
	assert_string_equal(r.message, "cancelled by the caller");
	store_run_free(&r);
	/* From running, with a result; no message. */
	assert_int_equal(s->ops->start(s, id_of(2).s, 2000, err, sizeof(err)), 1);
	assert_int_equal(s->ops->finish(s, id_of(2).s, RS_SUCCEEDED, 3000, "{\"stdout\":\"hi\"}", NULL, err, sizeof(err)),
			 1);
	assert_int_equal(s->ops->get(s, id_of(2).s, NULL, &r, err, sizeof(err)), 1);
	assert_int_equal(r.state, RS_SUCCEEDED);
	assert_string_equal(r.result, "{\"stdout\":\"hi\"}");
	assert_string_equal(r.message, "");
	store_run_free(&r);
	/* Not twice: the first ending stands. */
	assert_int_equal(s->ops->finish(s, id_of(2).s, RS_LOST, 4000, NULL, "lost", err, sizeof(err)), 0);
	assert_int_equal(s->ops->finish(s, id_of(1).s, RS_FAILED, 4000, NULL, "x", err, sizeof(err)), 0);
	assert_int_equal(s->ops->get(s, id_of(2).s, NULL, &r, err, sizeof(err)), 1);
	assert_int_equal(r.state, RS_SUCCEEDED);
	assert_int_equal(r.finished_ms, 3000);
	store_run_free(&r);
	assert_int_equal(s->ops->finish(s, id_of(9).s, RS_FAILED, 4000, NULL, "x", err, sizeof(err)), 0);
	/* Only to a terminal state. */
	put(s, 3, "alice", "{}");
	assert_int_equal(s->ops->finish(s, id_of(3).s, RS_RUNNING, 4000, NULL, "x", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a terminal state"));
	assert_int_equal(s->ops->finish(s, id_of(3).s, (enum run_state)RS_COUNT, 4000, NULL, "x", err, sizeof(err)), -1);
	assert_int_equal(s->ops->get(s, id_of(3).s, NULL, &r, err, sizeof(err)), 1);
	assert_int_equal(r.state, RS_QUEUED);
	store_run_free(&r);
	store_close(s);
}

struct walk {
	char ids[16][STORE_ID_LEN + 1];
	int n, stop_after;
	struct store *s;      /* for callbacks that call the store */
};

static int record(void *ctx, const struct store_run *run)
{
	struct walk *w = ctx;
	assert_true(w->n < 16);
	snprintf(w->ids[w->n++], sizeof(w->ids[0]), "%s", run->id);
	return w->stop_after && w->n == w->stop_after ? 42 : 0;
}

/* What the daemon does at start: a run left running by a daemon that died
 * is lost. */
static int mark_lost(void *ctx, const struct store_run *run)
{
	struct walk *w = ctx;
	char e[256];
	w->n++;
	assert_int_equal(w->s->ops->finish(w->s, run->id, RS_LOST, 9000, NULL, "vmrund restarted", e, sizeof(e)), 1);
	return 0;
}

static void each_in_order(void **state)
{
	(void)state;
	struct store *s = open_db();
	/* Ids not in the order of acceptance, so that only seq orders them. */
	unsigned order[] = { 50, 10, 40, 20, 30 };
	for (int i = 0; i < 5; i++)
		put(s, order[i], i % 2 ? "bob" : "alice", "{}");
	assert_int_equal(s->ops->start(s, id_of(40).s, 1, err, sizeof(err)), 1);
	assert_int_equal(s->ops->start(s, id_of(10).s, 1, err, sizeof(err)), 1);

	struct walk w = { 0 };
	assert_int_equal(s->ops->each(s, RS_QUEUED, record, &w, err, sizeof(err)), 0);
	assert_int_equal(w.n, 3);
	assert_string_equal(w.ids[0], id_of(50).s);
	assert_string_equal(w.ids[1], id_of(20).s);
	assert_string_equal(w.ids[2], id_of(30).s);

	memset(&w, 0, sizeof(w));
	assert_int_equal(s->ops->each(s, RS_RUNNING, record, &w, err, sizeof(err)), 0);
	assert_int_equal(w.n, 2);
	assert_string_equal(w.ids[0], id_of(10).s);
	assert_string_equal(w.ids[1], id_of(40).s);

	/* Stopped early: fn's value, and no more calls. */
	memset(&w, 0, sizeof(w));
	w.stop_after = 2;
	assert_int_equal(s->ops->each(s, RS_QUEUED, record, &w, err, sizeof(err)), 42);
	assert_int_equal(w.n, 2);

	memset(&w, 0, sizeof(w));
	assert_int_equal(s->ops->each(s, RS_LOST, record, &w, err, sizeof(err)), 0);
	assert_int_equal(w.n, 0);
	assert_int_equal(s->ops->each(s, (enum run_state)RS_COUNT, record, &w, err, sizeof(err)), -1);

	/* fn may change the run it is given, and that is on disk at once. */
	memset(&w, 0, sizeof(w));
	w.s = s;
	assert_int_equal(s->ops->each(s, RS_RUNNING, mark_lost, &w, err, sizeof(err)), 0);
	assert_int_equal(w.n, 2);
	assert_int_equal(raw_int("SELECT count(*) FROM runs WHERE state = 'lost'"), 2);
	memset(&w, 0, sizeof(w));
	assert_int_equal(s->ops->each(s, RS_RUNNING, record, &w, err, sizeof(err)), 0);
	assert_int_equal(w.n, 0);
	store_close(s);
}

static void counts(void **state)
{
	(void)state;
	struct store *s = open_db();
	for (unsigned i = 1; i <= 6; i++)
		put(s, i, "alice", "{}");
	assert_int_equal(s->ops->start(s, id_of(1).s, 1, err, sizeof(err)), 1);
	assert_int_equal(s->ops->start(s, id_of(2).s, 1, err, sizeof(err)), 1);
	assert_int_equal(s->ops->finish(s, id_of(2).s, RS_TIMED_OUT, 2, NULL, "timed out", err, sizeof(err)), 1);
	assert_int_equal(s->ops->finish(s, id_of(3).s, RS_CANCELLED, 2, NULL, "cancelled", err, sizeof(err)), 1);
	uint64_t count[RS_COUNT];
	memset(count, 0xff, sizeof(count));
	assert_int_equal(s->ops->count(s, count, err, sizeof(err)), 0);
	assert_int_equal(count[RS_QUEUED], 3);
	assert_int_equal(count[RS_RUNNING], 1);
	assert_int_equal(count[RS_SUCCEEDED], 0);
	assert_int_equal(count[RS_FAILED], 0);
	assert_int_equal(count[RS_TIMED_OUT], 1);
	assert_int_equal(count[RS_CANCELLED], 1);
	assert_int_equal(count[RS_LOST], 0);
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
}

static void refuses_not_sqlite(void **state)
{
	(void)state;
	FILE *f = fopen(db, "w");
	assert_non_null(f);
	for (int i = 0; i < 512; i++)
		fputs("this is not a database, only text. ", f);
	fclose(f);
	assert_null(store_sqlite_open(db, err, sizeof(err)));
	assert_non_null(strstr(err, db));
	assert_non_null(strstr(err, "not a database"));
	assert_null(strchr(err, '\n'));
}

static void refuses_newer_schema(void **state)
{
	(void)state;
	store_close(open_db());
	raw_exec("PRAGMA user_version = 2");
	assert_null(store_sqlite_open(db, err, sizeof(err)));
	assert_non_null(strstr(err, db));
	assert_non_null(strstr(err, "schema version 2 is newer"));
}

static void reports_missing_directory(void **state)
{
	(void)state;
	char path[160];
	snprintf(path, sizeof(path), "%s/no-such-dir/state.db", dir);
	assert_null(store_sqlite_open(path, err, sizeof(err)));
	assert_non_null(strstr(err, "state db "));
	assert_non_null(strstr(err, path));
	assert_int_not_equal(access(path, F_OK), 0);
}

static int check_large(void *ctx, const struct store_run *run)
{
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
	struct store *s = open_db();
	put(s, 1, "alice", big);
	assert_int_equal(s->ops->finish(s, id_of(1).s, RS_SUCCEEDED, 5, big, NULL, err, sizeof(err)), 1);
	store_close(s);
	s = open_db();
	struct store_run r;
	assert_int_equal(s->ops->get(s, id_of(1).s, NULL, &r, err, sizeof(err)), 1);
	assert_int_equal(strlen(r.request), n);
	assert_memory_equal(r.request, big, n);
	assert_memory_equal(r.result, big, n);
	store_run_free(&r);
	put(s, 2, "alice", big);
	assert_int_equal(s->ops->each(s, RS_QUEUED, check_large, big, err, sizeof(err)), 0);
	store_close(s);
	free(big);
}

static void utf8_text(void **state)
{
	(void)state;
	const char *req = "{\"stdin\":\"h\xc3\xa9llo \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x8e\x89\"}";
	const char *tenant = "\xc3\xa9quipe-\xe6\x97\xa5";
	struct store *s = open_db();
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
	assert_int_equal(s->ops->finish(s, id_of(1).s, RS_FAILED, 1, req, msg, err, sizeof(err)), 1);
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
	assert_int_equal(s->ops->get(s, id_of(1).s, "equipe-\xe6\x97\xa5", &r, err, sizeof(err)), 0);
	store_close(s);
}

/* vmrund forks its workers: they must not inherit the database. */
static void db_not_inherited(void **state)
{
	(void)state;
	struct store *s = open_db();
	char real[PATH_MAX];
	assert_non_null(realpath(db, real));
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(creates_schema, setup, teardown),
		cmocka_unit_test_setup_teardown(survives_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(insert_and_get, setup, teardown),
		cmocka_unit_test_setup_teardown(duplicate_id, setup, teardown),
		cmocka_unit_test_setup_teardown(start_only_from_queued, setup, teardown),
		cmocka_unit_test_setup_teardown(finish_once, setup, teardown),
		cmocka_unit_test_setup_teardown(each_in_order, setup, teardown),
		cmocka_unit_test_setup_teardown(counts, setup, teardown),
		cmocka_unit_test(state_names),
		cmocka_unit_test_setup_teardown(refuses_not_sqlite, setup, teardown),
		cmocka_unit_test_setup_teardown(refuses_newer_schema, setup, teardown),
		cmocka_unit_test_setup_teardown(reports_missing_directory, setup, teardown),
		cmocka_unit_test_setup_teardown(large_request, setup, teardown),
		cmocka_unit_test_setup_teardown(utf8_text, setup, teardown),
		cmocka_unit_test_setup_teardown(db_not_inherited, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
