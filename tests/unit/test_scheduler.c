/* vmrund's scheduler (host/vmrund/scheduler.c): admission against the
 * tenant's and the queue's bounds, picks within slots and per-tenant
 * concurrency, fairness between a tenant flooding the queue and one that
 * comes after it, dequeue, the rate's token bucket on an injected clock,
 * and the queue growing past its bound for recovered runs. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

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

static void enqueue(struct sched *s, unsigned tenant, const char *id)
{
	assert_int_equal(sched_enqueue(s, tenant, id), 0);
}

/* Pick one and check it is id of tenant. */
static void picks(struct sched *s, const char *id, unsigned tenant)
{
	char got[SCHED_ID_MAX];
	unsigned t = 99;
	if (sched_pick(s, got, &t) != 1)
		fail_msg("nothing picked, wanted %s", id);
	if (strcmp(got, id) || t != tenant)
		fail_msg("picked %s of %u, wanted %s of %u", got, t, id, tenant);
}

static void picks_none(struct sched *s)
{
	char got[SCHED_ID_MAX];
	unsigned t;
	if (sched_pick(s, got, &t) != 0)
		fail_msg("picked %s", got);
}

static void init_and_free(void **state)
{
	(void)state;
	struct tenants ts;
	load(&ts, "tenant a rate=2 burst=5\ntenant b\n");
	struct sched s;
	assert_int_equal(sched_init(&s, &ts, 0, 8), 0);
	assert_int_equal(s.slots, 1);   /* 0 slots would never start anything */
	assert_int_equal(s.queue_max, 8);
	assert_int_equal(s.nq, 0);
	assert_int_equal(s.running, 0);
	assert_true(s.t[0].tokens == 5);   /* every bucket full */
	assert_true(s.t[1].tokens == 20);
	assert_int_equal(s.t[0].last_start, 0);
	picks_none(&s);
	sched_free(&s);
	assert_null(s.t);
	assert_null(s.q);
	sched_free(&s);

	/* no tenants at all */
	struct tenants none = { 0 };
	assert_int_equal(sched_init(&s, &none, 2, 4), 0);
	assert_int_equal(sched_enqueue(&s, 0, "x"), -1);   /* no such tenant */
	picks_none(&s);
	sched_free(&s);
	tenants_free(&ts);
}

static void admission(void **state)
{
	(void)state;
	struct tenants ts;
	/* a: 2 at once and 3 waiting; b: 1 and 0 */
	load(&ts, "tenant a concurrent=2 queued=3\ntenant b concurrent=1 queued=0\n");
	struct sched s;
	assert_int_equal(sched_init(&s, &ts, 8, 100), 0);
	char id[16];
	for (int i = 0; i < 5; i++) {
		assert_int_equal(sched_admit(&s, 0), SCHED_ACCEPT);
		snprintf(id, sizeof(id), "a%d", i);
		enqueue(&s, 0, id);
	}
	/* 5 queued: concurrent + queued */
	assert_int_equal(sched_admit(&s, 0), SCHED_TENANT_FULL);
	/* running or queued, they count the same */
	picks(&s, "a0", 0);
	picks(&s, "a1", 0);
	picks_none(&s);   /* a at its concurrency, slots free */
	assert_int_equal(s.t[0].running, 2);
	assert_int_equal(s.t[0].queued, 3);
	assert_int_equal(sched_admit(&s, 0), SCHED_TENANT_FULL);
	sched_finished(&s, 0);
	assert_int_equal(sched_admit(&s, 0), SCHED_ACCEPT);
	assert_true(sched_dequeue(&s, "a4"));
	enqueue(&s, 0, "a5");
	enqueue(&s, 0, "a6");
	assert_int_equal(sched_admit(&s, 0), SCHED_TENANT_FULL);
	/* another tenant is not held by a's */
	assert_int_equal(sched_admit(&s, 1), SCHED_ACCEPT);
	enqueue(&s, 1, "b0");
	assert_int_equal(sched_admit(&s, 1), SCHED_TENANT_FULL);   /* 1 + 0 */
	sched_free(&s);

	/* the queue's bound counts only runs that would wait */
	assert_int_equal(sched_init(&s, &ts, 2, 1), 0);
	assert_int_equal(sched_admit(&s, 0), SCHED_ACCEPT);   /* would start at once */
	enqueue(&s, 0, "a0");
	assert_int_equal(sched_admit(&s, 0), SCHED_QUEUE_FULL);   /* behind a0 */
	assert_int_equal(sched_admit(&s, 1), SCHED_QUEUE_FULL);
	picks(&s, "a0", 0);
	assert_int_equal(sched_admit(&s, 0), SCHED_ACCEPT);   /* a slot and a's concurrency free */
	enqueue(&s, 0, "a1");
	picks(&s, "a1", 0);
	/* a at its concurrency: its next run waits, and the queue has room for one */
	assert_int_equal(sched_admit(&s, 0), SCHED_ACCEPT);
	enqueue(&s, 0, "a2");
	assert_int_equal(sched_admit(&s, 0), SCHED_QUEUE_FULL);
	/* slots full: every run waits */
	assert_int_equal(sched_admit(&s, 1), SCHED_QUEUE_FULL);
	assert_true(sched_dequeue(&s, "a2"));
	assert_int_equal(s.running, 2);
	assert_int_equal(sched_admit(&s, 1), SCHED_ACCEPT);   /* waits, and there is room */
	enqueue(&s, 1, "b0");
	picks_none(&s);   /* no slot */
	assert_int_equal(sched_admit(&s, 1), SCHED_TENANT_FULL);   /* before the queue's verdict */
	sched_finished(&s, 0);
	picks(&s, "b0", 1);
	sched_free(&s);
	tenants_free(&ts);
}

static void slots_and_concurrency(void **state)
{
	(void)state;
	struct tenants ts;
	load(&ts, "tenant a concurrent=1\ntenant b concurrent=2\n");
	struct sched s;
	assert_int_equal(sched_init(&s, &ts, 3, 100), 0);
	enqueue(&s, 0, "a0");
	enqueue(&s, 0, "a1");
	enqueue(&s, 1, "b0");
	enqueue(&s, 1, "b1");
	enqueue(&s, 1, "b2");
	picks(&s, "a0", 0);   /* tie on 0 running, never started: the first */
	picks(&s, "b0", 1);
	picks(&s, "b1", 1);   /* a is at its concurrency */
	picks_none(&s);
	sched_finished(&s, 1);   /* b at 1 of 2: b2 may start, a may not */
	picks(&s, "b2", 1);
	picks_none(&s);
	sched_finished(&s, 0);
	picks(&s, "a1", 0);
	assert_int_equal(s.nq, 0);
	picks_none(&s);
	assert_int_equal(s.running, 3);
	assert_int_equal(s.starts, 5);
	sched_finished(&s, 0);
	assert_int_equal(s.t[0].running, 0);
	assert_int_equal(s.running, 2);
	sched_finished(&s, 1);
	sched_finished(&s, 1);
	assert_int_equal(s.running, 0);
	assert_int_equal(s.t[1].running, 0);
	/* finishing more than ran does not wrap */
	sched_finished(&s, 0);
	sched_finished(&s, 1);
	assert_int_equal(s.running, 0);
	assert_int_equal(s.t[0].running, 0);
	assert_int_equal(s.t[1].running, 0);
	sched_free(&s);
	tenants_free(&ts);
}

static void fairness(void **state)
{
	(void)state;
	struct tenants ts;
	load(&ts, "tenant a concurrent=4 queued=100\ntenant b concurrent=4 queued=100\n");
	struct sched s;
	assert_int_equal(sched_init(&s, &ts, 2, 1000), 0);
	char id[SCHED_ID_MAX];
	for (int i = 0; i < 20; i++) {
		snprintf(id, sizeof(id), "a%02d", i);
		enqueue(&s, 0, id);
	}
	for (int i = 0; i < 3; i++) {
		snprintf(id, sizeof(id), "b%02d", i);
		enqueue(&s, 1, id);
	}
	/* Simulate: fill the slots, then end the oldest running run and fill
	 * again, until the queue is empty. */
	struct {
		char id[SCHED_ID_MAX];
		unsigned tenant;
	} running[2], started[23];
	size_t nrun = 0, nstarted = 0;
	while (nstarted < 23) {
		unsigned t;
		while (sched_pick(&s, id, &t) == 1) {
			assert_true(nrun < 2);   /* never past the slots */
			assert_true(nstarted < 23);
			memcpy(running[nrun].id, id, SCHED_ID_MAX);
			running[nrun++].tenant = t;
			memcpy(started[nstarted].id, id, SCHED_ID_MAX);
			started[nstarted++].tenant = t;
		}
		assert_true(nrun == 2 || nstarted == 23);   /* the slots kept full */
		assert_int_equal(s.running, nrun);
		if (nstarted == 23)
			break;
		sched_finished(&s, running[0].tenant);
		running[0] = running[1];
		nrun--;
	}
	assert_int_equal(s.nq, 0);
	/* b's 3 all within the first 6 starts */
	unsigned b_early = 0;
	for (size_t i = 0; i < 6; i++)
		b_early += started[i].tenant == 1;
	assert_int_equal(b_early, 3);
	/* FIFO within each tenant */
	int next[2] = { 0, 0 };
	for (size_t i = 0; i < 23; i++) {
		unsigned t = started[i].tenant;
		snprintf(id, sizeof(id), "%c%02d", t ? 'b' : 'a', next[t]++);
		assert_string_equal(started[i].id, id);
	}
	assert_int_equal(next[0], 20);
	assert_int_equal(next[1], 3);
	sched_free(&s);

	/* with the slots all free, the tenant that started least recently goes first */
	assert_int_equal(sched_init(&s, &ts, 1, 100), 0);
	enqueue(&s, 0, "a0");
	enqueue(&s, 0, "a1");
	enqueue(&s, 1, "b0");
	enqueue(&s, 1, "b1");
	picks(&s, "a0", 0);
	sched_finished(&s, 0);
	picks(&s, "b0", 1);   /* both at 0 running: b never started */
	sched_finished(&s, 1);
	picks(&s, "a1", 0);   /* a started longer ago */
	sched_finished(&s, 0);
	picks(&s, "b1", 1);
	sched_free(&s);
	tenants_free(&ts);
}

static void dequeue(void **state)
{
	(void)state;
	struct tenants ts;
	load(&ts, "tenant a\ntenant b\n");
	struct sched s;
	assert_int_equal(sched_init(&s, &ts, 1, 10), 0);
	enqueue(&s, 0, "r1");
	enqueue(&s, 1, "r2");
	enqueue(&s, 0, "r3");
	enqueue(&s, 0, "r4");
	assert_int_equal(s.t[0].queued, 3);
	assert_true(sched_dequeue(&s, "r3"));
	assert_int_equal(s.nq, 3);
	assert_int_equal(s.t[0].queued, 2);
	assert_false(sched_dequeue(&s, "r3"));   /* not twice */
	assert_false(sched_dequeue(&s, "nope"));
	assert_false(sched_dequeue(&s, "r"));    /* a prefix is not the id */
	assert_true(sched_dequeue(&s, "r2"));
	assert_int_equal(s.t[1].queued, 0);
	picks(&s, "r1", 0);
	assert_false(sched_dequeue(&s, "r1"));   /* running: not queued */
	sched_finished(&s, 0);
	picks(&s, "r4", 0);   /* r3 is gone */
	sched_finished(&s, 0);
	picks_none(&s);
	assert_int_equal(s.nq, 0);
	assert_int_equal(s.t[0].queued, 0);
	assert_int_equal(s.t[0].running, 0);

	/* ids: up to 32 characters */
	char id[40];
	memset(id, 'x', 32);
	id[32] = '\0';
	assert_int_equal(sched_enqueue(&s, 0, id), 0);
	id[32] = 'x', id[33] = '\0';
	assert_int_equal(sched_enqueue(&s, 0, id), -1);
	assert_int_equal(sched_enqueue(&s, 2, "r9"), -1);   /* no tenant 2 */
	assert_int_equal(s.nq, 1);
	id[32] = '\0';
	char got[SCHED_ID_MAX];
	unsigned t;
	assert_int_equal(sched_pick(&s, got, &t), 1);
	assert_string_equal(got, id);
	sched_free(&s);
	tenants_free(&ts);
}

static void rate(void **state)
{
	(void)state;
	struct tenants ts;
	load(&ts, "tenant a rate=10 burst=20\ntenant b rate=0.5\n");
	struct sched s;
	assert_int_equal(sched_init(&s, &ts, 1, 10), 0);
	int64_t now = 1700000000000;
	/* the burst, then refusal until a token is there: 100 ms at 10/s */
	for (int i = 0; i < 20; i++)
		assert_int_equal(sched_rate_take(&s, 0, now), 0);
	int64_t wait = sched_rate_take(&s, 0, now);
	assert_in_range(wait, 100, 101);
	assert_in_range(sched_rate_take(&s, 0, now), 100, 101);   /* a refusal takes nothing */
	/* half a token later: half the wait */
	wait = sched_rate_take(&s, 0, now + 50);
	assert_in_range(wait, 50, 51);
	assert_int_equal(sched_rate_take(&s, 0, now + 100), 0);
	assert_true(sched_rate_take(&s, 0, now + 100) > 0);
	/* a clock that goes back refills nothing and takes nothing */
	assert_true(sched_rate_take(&s, 0, now) > 0);
	assert_int_equal(sched_rate_take(&s, 0, now + 200), 0);
	/* after a long time, the bucket is full again and no fuller */
	now += 3600 * 1000;
	for (int i = 0; i < 20; i++)
		assert_int_equal(sched_rate_take(&s, 0, now), 0);
	assert_true(sched_rate_take(&s, 0, now) > 0);
	/* over 1 s at 10/s: 10 more */
	now += 1000;
	for (int i = 0; i < 10; i++)
		assert_int_equal(sched_rate_take(&s, 0, now), 0);
	assert_true(sched_rate_take(&s, 0, now) > 0);

	/* b: 0.5/s, burst 1 (the default, 2 * rate); its own bucket */
	assert_int_equal(sched_rate_take(&s, 1, now), 0);
	wait = sched_rate_take(&s, 1, now);
	assert_in_range(wait, 2000, 2001);
	assert_true(sched_rate_take(&s, 1, now + 1999) > 0);   /* 0.9995 of a token */
	assert_int_equal(sched_rate_take(&s, 1, now + 2001), 0);
	sched_free(&s);
	tenants_free(&ts);

	/* a rate so low that the wait is past int64's ms: a long wait (whose
	 * seconds fit an unsigned), not an undefined conversion */
	struct tenant slow = { .name = "slow", .concurrent = 1, .queued = 1, .rate = 1e-300, .burst = 1 };
	struct tenants one = { .t = &slow, .n = 1 };
	assert_int_equal(sched_init(&s, &one, 1, 1), 0);
	assert_int_equal(sched_rate_take(&s, 0, 1000), 0);
	wait = sched_rate_take(&s, 0, 1000);
	assert_true(wait >= 1000ll * 86400 * 365 * 50);
	assert_true((wait + 999) / 1000 <= UINT32_MAX);
	sched_free(&s);
}

static void recovery_grows_queue(void **state)
{
	(void)state;
	struct tenants ts;
	load(&ts, "tenant a concurrent=1 queued=1\ntenant b concurrent=1 queued=1\n");
	struct sched s;
	assert_int_equal(sched_init(&s, &ts, 1, 2), 0);
	/* runs found queued at start: queued past both the tenant's and the queue's bounds */
	char id[SCHED_ID_MAX];
	for (int i = 0; i < 7; i++) {
		snprintf(id, sizeof(id), "r%d", i);
		enqueue(&s, (unsigned)i % 2, id);
	}
	assert_int_equal(s.nq, 7);
	assert_int_equal(s.t[0].queued, 4);
	assert_int_equal(s.t[1].queued, 3);
	assert_int_equal(sched_admit(&s, 0), SCHED_TENANT_FULL);
	/* all of them start, in turn, none lost */
	unsigned t;
	for (int i = 0; i < 7; i++) {
		assert_int_equal(sched_pick(&s, id, &t), 1);
		char want[SCHED_ID_MAX];
		snprintf(want, sizeof(want), "r%d", i);
		assert_string_equal(id, want);
		assert_int_equal(t, (unsigned)i % 2);
		sched_finished(&s, t);
	}
	assert_int_equal(s.nq, 0);
	/* drained, the queue's bound is the configured one again */
	assert_int_equal(s.queue_max, 2);
	enqueue(&s, 0, "n0");
	assert_int_equal(sched_admit(&s, 1), SCHED_ACCEPT);   /* waits behind n0; room for it */
	enqueue(&s, 1, "n1");
	assert_int_equal(s.nq, 2);
	sched_free(&s);
	tenants_free(&ts);

	/* one tenant with room of its own, so that only the queue's bound refuses */
	struct tenants ts3;
	load(&ts3, "tenant a\n");
	struct sched s3;
	assert_int_equal(sched_init(&s3, &ts3, 1, 2), 0);
	for (int i = 0; i < 5; i++) {
		snprintf(id, sizeof(id), "x%d", i);
		enqueue(&s3, 0, id);
	}
	for (int i = 0; i < 5; i++) {
		assert_int_equal(sched_pick(&s3, id, &t), 1);
		sched_finished(&s3, 0);
	}
	enqueue(&s3, 0, "y0");
	enqueue(&s3, 0, "y1");
	assert_int_equal(s3.queue_max, 2);
	assert_int_equal(sched_admit(&s3, 0), SCHED_QUEUE_FULL);   /* 2, not 5 */
	enqueue(&s3, 0, "y2");   /* recovery may still go past */
	assert_int_equal(s3.nq, 3);
	sched_free(&s3);
	tenants_free(&ts3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(init_and_free),
		cmocka_unit_test(admission),
		cmocka_unit_test(slots_and_concurrency),
		cmocka_unit_test(fairness),
		cmocka_unit_test(dequeue),
		cmocka_unit_test(rate),
		cmocka_unit_test(recovery_grows_queue),
	};
	return cmocka_run_group_tests_name("scheduler", tests, NULL, NULL);
}
