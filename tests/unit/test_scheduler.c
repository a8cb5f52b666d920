/* vmrund's scheduler (host/vmrund/scheduler.c), as the pure decisions the
 * store calls: admission against the tenant's and the queue's bounds (and
 * which verdict wins), how slots are shared (fewest running first, ties
 * to the least recent start, within each tenant's concurrency, its queue
 * and the slots), fairness between a tenant flooding the queue and one
 * that comes after it over many rounds, and the rate's token bucket on an
 * injected clock. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler.h"

static char err[256];

static void load(struct tenants *ts, const char *text)
{
	if (tenants_parse(ts, text, strlen(text), err, sizeof(err)))
		fail_msg("tenants: %s", err);
}

static struct tenant lim(unsigned concurrent, unsigned queued)
{
	struct tenant t = { .name = "t", .concurrent = concurrent, .queued = queued, .rate = 1, .burst = 1 };
	return t;
}

static void admit_tenant_bound(void **state)
{
	(void)state;
	/* 2 at once and 3 waiting: 5 open at most, running or queued alike
	 * (the caller counts both as open). */
	struct tenant t = lim(2, 3);
	for (unsigned open = 0; open < 5; open++)
		assert_int_equal(sched_admit(&t, open, 0, 100), SCHED_ACCEPT);
	assert_int_equal(sched_admit(&t, 5, 0, 100), SCHED_TENANT_FULL);
	assert_int_equal(sched_admit(&t, 6, 0, 100), SCHED_TENANT_FULL);   /* past it: recovered runs */
	/* No waiting room: only what may run at once. */
	t = lim(1, 0);
	assert_int_equal(sched_admit(&t, 0, 0, 100), SCHED_ACCEPT);
	assert_int_equal(sched_admit(&t, 1, 0, 100), SCHED_TENANT_FULL);
	/* Limits whose sum is past unsigned's: no wrap to a small bound. */
	t = lim(UINT_MAX, UINT_MAX);
	assert_int_equal(sched_admit(&t, UINT_MAX, 0, 100), SCHED_ACCEPT);
	t = lim(UINT_MAX, 1);
	assert_int_equal(sched_admit(&t, UINT_MAX - 1, 0, 100), SCHED_ACCEPT);
	assert_int_equal(sched_admit(&t, UINT_MAX, 0, 100), SCHED_ACCEPT);
}

static void admit_queue_bound(void **state)
{
	(void)state;
	struct tenant t = lim(100, 100);
	/* Every run passes through the queue, even one a slot is free for. */
	assert_int_equal(sched_admit(&t, 0, 0, 1), SCHED_ACCEPT);
	assert_int_equal(sched_admit(&t, 0, 1, 1), SCHED_QUEUE_FULL);
	assert_int_equal(sched_admit(&t, 0, 7, 8), SCHED_ACCEPT);
	assert_int_equal(sched_admit(&t, 0, 8, 8), SCHED_QUEUE_FULL);
	assert_int_equal(sched_admit(&t, 0, 9, 8), SCHED_QUEUE_FULL);   /* past it: recovered runs */
	assert_int_equal(sched_admit(&t, 0, 0, 0), SCHED_QUEUE_FULL);    /* no queue at all */
	/* The tenant's verdict comes first, when both would refuse. */
	t = lim(1, 1);
	assert_int_equal(sched_admit(&t, 2, 8, 8), SCHED_TENANT_FULL);
	assert_int_equal(sched_admit(&t, 2, 0, 8), SCHED_TENANT_FULL);
	assert_int_equal(sched_admit(&t, 1, 8, 8), SCHED_QUEUE_FULL);
	assert_int_equal(sched_admit(&t, 1, 7, 8), SCHED_ACCEPT);
}

static struct sched_stat stat(unsigned running, unsigned queued, unsigned concurrent, int64_t last)
{
	struct sched_stat s = { .running = running, .queued = queued, .concurrent = concurrent, .last_start_ms = last };
	return s;
}

/* sched_choose over st, checking the sum it returns against picks. */
static unsigned choose(const struct sched_stat *st, size_t n, unsigned slots, unsigned *picks)
{
	memset(picks, 0xff, n * sizeof(*picks));   /* every one must be written */
	unsigned total = sched_choose(st, n, slots, picks);
	unsigned sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += picks[i];
	assert_int_equal(total, sum);
	assert_true(total <= slots);
	return total;
}

static void choose_shares(void **state)
{
	(void)state;
	unsigned p[3];
	/* Nobody running, nobody ever started: the slots go round. */
	struct sched_stat st[3] = { stat(0, 10, 4, 0), stat(0, 10, 4, 0), stat(0, 10, 4, 0) };
	assert_int_equal(choose(st, 3, 7, p), 7);
	assert_int_equal(p[0], 3);   /* ties among equals to the first */
	assert_int_equal(p[1], 2);
	assert_int_equal(p[2], 2);
	/* Fewest running first, until they are even. */
	st[0] = stat(3, 10, 8, 0);
	st[1] = stat(0, 10, 8, 0);
	st[2] = stat(1, 10, 8, 0);
	assert_int_equal(choose(st, 3, 3, p), 3);
	assert_int_equal(p[0], 0);
	assert_int_equal(p[1], 2);
	assert_int_equal(p[2], 1);
	/* Once even, round by round, the least recent first (a: never). */
	assert_int_equal(choose(st, 3, 6, p), 6);
	assert_int_equal(p[0], 1);
	assert_int_equal(p[1], 3);
	assert_int_equal(p[2], 2);
	assert_int_equal(choose(st, 3, 9, p), 9);
	assert_int_equal(p[0], 2);
	assert_int_equal(p[1], 4);
	assert_int_equal(p[2], 3);
}

static void choose_caps(void **state)
{
	(void)state;
	unsigned p[4];
	/* Each tenant's concurrency: 0 has none left, 1 one more, and the
	 * rest of the slots stay free rather than going past it. */
	struct sched_stat st[4] = { stat(2, 5, 2, 0), stat(1, 5, 2, 0), stat(0, 5, 1, 0), stat(0, 0, 9, 0) };
	assert_int_equal(choose(st, 4, 10, p), 2);
	assert_int_equal(p[0], 0);
	assert_int_equal(p[1], 1);
	assert_int_equal(p[2], 1);
	assert_int_equal(p[3], 0);   /* none queued: nothing */
	/* Each tenant's queue: no more than it has queued. */
	st[0] = stat(0, 1, 10, 0);
	st[1] = stat(0, 2, 10, 0);
	st[2] = stat(0, 0, 10, 0);
	st[3] = stat(0, 3, 10, 0);
	assert_int_equal(choose(st, 4, 100, p), 6);
	assert_int_equal(p[0], 1);
	assert_int_equal(p[1], 2);
	assert_int_equal(p[2], 0);
	assert_int_equal(p[3], 3);
	/* The slots. */
	assert_int_equal(choose(st, 4, 2, p), 2);
	assert_int_equal(choose(st, 4, 0, p), 0);
	assert_int_equal(p[0] + p[1] + p[2] + p[3], 0);
	/* Running past a concurrency that was lowered since: none, not a
	 * wrap to many. */
	st[0] = stat(5, 5, 2, 0);
	assert_int_equal(choose(st, 1, 10, p), 0);
	/* No tenants. */
	assert_int_equal(choose(st, 0, 10, p), 0);
}

static void choose_least_recent(void **state)
{
	(void)state;
	unsigned p[3];
	/* Even on running: the one whose last start is oldest; never (0)
	 * before any. */
	struct sched_stat st[3] = { stat(1, 5, 4, 3000), stat(1, 5, 4, 1000), stat(1, 5, 4, 2000) };
	assert_int_equal(choose(st, 3, 1, p), 1);
	assert_int_equal(p[1], 1);
	st[0].last_start_ms = 0;
	assert_int_equal(choose(st, 3, 1, p), 1);
	assert_int_equal(p[0], 1);
	/* One that just started is the most recent: the next slot goes on
	 * to the others, least recent first. */
	st[0] = stat(0, 5, 4, 3000);
	st[1] = stat(0, 5, 4, 1000);
	st[2] = stat(0, 5, 4, 2000);
	assert_int_equal(choose(st, 3, 2, p), 2);
	assert_int_equal(p[0], 0);
	assert_int_equal(p[1], 1);
	assert_int_equal(p[2], 1);
	assert_int_equal(choose(st, 3, 4, p), 4);
	assert_int_equal(p[0], 1);
	assert_int_equal(p[1], 2);   /* the first round's first goes first again */
	assert_int_equal(p[2], 1);
	/* Fewer running beats a less recent start. */
	st[0] = stat(0, 5, 4, 9000);
	st[1] = stat(1, 5, 4, 1);
	assert_int_equal(choose(st, 2, 1, p), 1);
	assert_int_equal(p[0], 1);
}

/* A tenant flooding the queue and one that comes after it, over rounds
 * in which the store's counts are updated the way it would: 2 slots, the
 * oldest running run ends each round. */
static void fairness_over_rounds(void **state)
{
	(void)state;
	struct sched_stat st[2] = { stat(0, 20, 4, 0), stat(0, 3, 4, 0) };
	unsigned started[23], running[2], nrun = 0, nstarted = 0;
	for (int64_t now = 1000; nstarted < 23; now += 1000) {
		unsigned p[2];
		unsigned k = choose(st, 2, 2 - nrun, p);
		assert_true(nrun + k <= 2);
		for (unsigned t = 0; t < 2; t++) {
			st[t].running += p[t];
			st[t].queued -= p[t];
			if (p[t])
				st[t].last_start_ms = now;
			for (unsigned i = 0; i < p[t]; i++)
				running[nrun++] = started[nstarted++] = t;
		}
		assert_true(nrun == 2 || nstarted == 23);   /* the slots kept full */
		st[running[0]].running--;
		running[0] = running[1];
		nrun--;
	}
	assert_int_equal(st[0].queued + st[1].queued, 0);
	/* b's 3 all within the first 6 starts */
	unsigned b_early = 0;
	for (unsigned i = 0; i < 6; i++)
		b_early += started[i] == 1;
	assert_int_equal(b_early, 3);
}

static void rate(void **state)
{
	(void)state;
	struct tenants ts;
	load(&ts, "tenant a rate=10 burst=20\ntenant b rate=0.5\n");
	struct sched_rate r;
	assert_int_equal(sched_rate_init(&r, &ts), 0);
	assert_true(r.b[0].tokens == 20);   /* every bucket full */
	assert_true(r.b[1].tokens == 1);
	int64_t now = 1700000000000;
	/* the burst, then refusal until a token is there: 100 ms at 10/s */
	for (int i = 0; i < 20; i++)
		assert_int_equal(sched_rate_take(&r, 0, now), 0);
	int64_t wait = sched_rate_take(&r, 0, now);
	assert_in_range(wait, 100, 101);
	assert_in_range(sched_rate_take(&r, 0, now), 100, 101);   /* a refusal takes nothing */
	/* half a token later: half the wait */
	wait = sched_rate_take(&r, 0, now + 50);
	assert_in_range(wait, 50, 51);
	assert_int_equal(sched_rate_take(&r, 0, now + 100), 0);
	assert_true(sched_rate_take(&r, 0, now + 100) > 0);
	/* a clock that goes back refills nothing and takes nothing */
	assert_true(sched_rate_take(&r, 0, now) > 0);
	assert_int_equal(sched_rate_take(&r, 0, now + 200), 0);
	/* after a long time, the bucket is full again and no fuller */
	now += 3600 * 1000;
	for (int i = 0; i < 20; i++)
		assert_int_equal(sched_rate_take(&r, 0, now), 0);
	assert_true(sched_rate_take(&r, 0, now) > 0);
	/* over 1 s at 10/s: 10 more */
	now += 1000;
	for (int i = 0; i < 10; i++)
		assert_int_equal(sched_rate_take(&r, 0, now), 0);
	assert_true(sched_rate_take(&r, 0, now) > 0);

	/* b: 0.5/s, burst 1 (the default, 2 * rate); its own bucket */
	assert_int_equal(sched_rate_take(&r, 1, now), 0);
	wait = sched_rate_take(&r, 1, now);
	assert_in_range(wait, 2000, 2001);
	assert_true(sched_rate_take(&r, 1, now + 1999) > 0);   /* 0.9995 of a token */
	assert_int_equal(sched_rate_take(&r, 1, now + 2001), 0);
	sched_rate_free(&r);
	assert_null(r.b);
	assert_null(r.ts);
	sched_rate_free(&r);   /* safe twice */
	tenants_free(&ts);

	/* a rate so low that the wait is past int64's ms: a long wait (whose
	 * seconds fit an unsigned), not an undefined conversion */
	struct tenant slow = { .name = "slow", .concurrent = 1, .queued = 1, .rate = 1e-300, .burst = 1 };
	struct tenants one = { .t = &slow, .n = 1 };
	assert_int_equal(sched_rate_init(&r, &one), 0);
	assert_int_equal(sched_rate_take(&r, 0, 1000), 0);
	wait = sched_rate_take(&r, 0, 1000);
	assert_true(wait >= 1000ll * 86400 * 365 * 50);
	assert_true((wait + 999) / 1000 <= UINT32_MAX);
	sched_rate_free(&r);

	/* no tenants at all */
	struct tenants none = { 0 };
	assert_int_equal(sched_rate_init(&r, &none), 0);
	sched_rate_free(&r);

	/* The wait alone, as the cluster's bucket asks for it: what is
	 * missing of one token at the rate, at least 1 ms, capped. */
	assert_int_equal(sched_rate_wait_ms(0.5, 10), 51);
	assert_int_equal(sched_rate_wait_ms(0, 1), 1001);
	assert_int_equal(sched_rate_wait_ms(0.9999999, 1000), 1);
	assert_true(sched_rate_wait_ms(0, 1e-300) >= 1000ll * 86400 * 365 * 50);
	assert_true((sched_rate_wait_ms(-5, 1e-300) + 999) / 1000 <= UINT32_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(admit_tenant_bound),
		cmocka_unit_test(admit_queue_bound),
		cmocka_unit_test(choose_shares),
		cmocka_unit_test(choose_caps),
		cmocka_unit_test(choose_least_recent),
		cmocka_unit_test(fairness_over_rounds),
		cmocka_unit_test(rate),
	};
	return cmocka_run_group_tests_name("scheduler", tests, NULL, NULL);
}
