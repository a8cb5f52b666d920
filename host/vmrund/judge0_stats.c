/* Judge0's GET /statistics (judge0.h; info_controller.rb): the counts
 * of a tenant's submissions by language, status and day, in Judge0's
 * shape. Pure: the caller counts the rows. */
#include "judge0.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"

#define DAY_MS (86400 * INT64_C(1000))

void judge0_tally_add(struct judge0_tally *t, long language, int status, int64_t created_ms, int64_t now_ms)
{
	t->total++;
	if (language >= 0 && language < JUDGE0_STATS_LANG_IDS)
		t->by_language[language]++;
	if (status > 0 && status <= J0_EXEC_FORMAT_ERROR)
		t->by_status[status]++;
	/* whole UTC days between them; a time to come counts nowhere */
	int64_t ago = now_ms / DAY_MS - (created_ms >= 0 ? created_ms / DAY_MS : -1);
	if (ago >= 0 && ago <= JUDGE0_STATS_DAYS)
		t->by_day[ago]++;
}

/* Rails' DateTime#to_json: "2026-12-06T16:20:00.123+00:00". */
static json_t *rails_time(int64_t ms)
{
	char buf[CLOCK_ISO8601_MAX];
	if (!clock_iso8601(ms, buf))
		return json_null();
	size_t n = strlen(buf);
	snprintf(buf + n - 1, sizeof(buf) - n + 1, "+00:00");   /* in place of its "Z" */
	return json_string(buf);
}

/* {"id": id, "name": name} under key, with its count. */
static json_t *counted(const char *key, long id, const char *name, uint64_t count)
{
	return json_pack("{s{sI so} sI}", key, "id", (json_int_t)id, "name", name ? json_string(name) : json_null(),
			 "count", (json_int_t)count);
}

/* counts[0..n) as [{key: {id, name}, count}], most first (ties: the
 * lower id first), none of the zero ones. */
static json_t *ranked(const uint64_t *counts, size_t n, const char *key, const struct runtime *rts, size_t nrts)
{
	json_t *a = json_array();
	bool taken[JUDGE0_STATS_LANG_IDS] = { false };
	for (;;) {
		size_t best = n;
		for (size_t i = 0; i < n; i++)
			if (counts[i] && !taken[i] && (best == n || counts[i] > counts[best]))
				best = i;
		if (best == n || !a)
			return a;
		taken[best] = true;
		const char *name = NULL;
		json_t *lang = NULL;
		if (!strcmp(key, "status")) {
			name = judge0_status_name((int)best);
		} else if ((lang = judge0_language(rts, nrts, (long)best))) {
			name = json_string_value(json_object_get(lang, "name"));
		}
		json_array_append_new(a, counted(key, (long)best, name, counts[best]));
		json_decref(lang);
	}
}

/* pg_size_pretty's text of bytes: "8192 bytes", "16 kB", "12 MB", each
 * unit until the number reaches 10240 of it, rounded half up. */
static void size_pretty(int64_t bytes, char out[32])
{
	static const char *const units[] = { "bytes", "kB", "MB", "GB", "TB", "PB" };
	if (bytes < 10 * 1024) {
		snprintf(out, 32, "%lld bytes", (long long)bytes);
		return;
	}
	/* halves of the unit, as PostgreSQL counts them, to round half up */
	int64_t half = bytes >> 9;
	size_t u = 1;
	while (u + 1 < sizeof(units) / sizeof(units[0]) && half >= 2 * 10 * 1024 - 1) {
		half >>= 10;
		u++;
	}
	snprintf(out, 32, "%lld %s", (long long)((half + 1) / 2), units[u]);
}

json_t *judge0_statistics(const struct judge0_tally *t, int64_t now_ms, int64_t until_ms,
			  const struct runtime *rts, size_t n, int64_t db_bytes)
{
	json_t *days = json_object();   /* newest first: jansson keeps the order keys came in */
	for (int k = 1; days && k <= JUDGE0_STATS_DAYS; k++) {
		time_t day = (time_t)((now_ms / DAY_MS - k) * 86400);
		struct tm tm;
		char key[16];
		gmtime_r(&day, &tm);
		strftime(key, sizeof(key), "%Y-%m-%d", &tm);
		json_object_set_new(days, key, json_integer((json_int_t)t->by_day[k]));
	}
	char pretty[32];
	if (db_bytes >= 0)
		size_pretty(db_bytes, pretty);
	return json_pack("{so so s{sI sI so} so so s{so so}}", "created_at", rails_time(now_ms), "cached_until",
			 rails_time(until_ms), "submissions", "total", (json_int_t)t->total, "today",
			 (json_int_t)t->by_day[0], "last_30_days", days, "languages",
			 ranked(t->by_language, JUDGE0_STATS_LANG_IDS, "language", rts, n), "statuses",
			 ranked(t->by_status, J0_EXEC_FORMAT_ERROR + 1, "status", rts, n), "database", "size_pretty",
			 db_bytes >= 0 ? json_string(pretty) : json_null(), "size_in_bytes",
			 db_bytes >= 0 ? json_integer(db_bytes) : json_null());
}
