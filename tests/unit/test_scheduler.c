/* vmrund's scheduler (host/vmrund/scheduler.c), as the pure decisions the
 * store calls: admission against the tenant's and the queue's bounds (and
 * which verdict wins), how slots are shared (fewest running first, ties
 * to the least recent start, within each tenant's concurrency, its queue
 * and the slots), fairness between a tenant flooding the queue and one
 * that comes after it over many rounds, admission by the node's memory and
 * disk (a run that does not fit waits and is not overtaken; one larger
 * than the node is passed over there, and refused at submission), and the
 * rate's token bucket on an injected clock. */
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
	unsigned total = sched_choose(st, n, slots, NULL, NULL, picks);
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

/* sched_choose with room: the same checks as choose, and every pick within
 * what the node had left. */
static unsigned choose_room(const struct sched_stat *st, size_t n, unsigned slots, struct sched_size room,
			    struct sched_size node, unsigned *picks)
{
	memset(picks, 0xff, n * sizeof(*picks));
	unsigned total = sched_choose(st, n, slots, &room, &node, picks);
	uint64_t mem = 0, disk = 0;
	unsigned sum = 0;
	for (size_t i = 0; i < n; i++) {
		sum += picks[i];
		for (unsigned k = 0; k < picks[i]; k++) {
			assert_true(k < st[i].nnext);
			mem += st[i].next[k].memory_mib;
			disk += st[i].next[k].disk_mib;
		}
	}
	assert_int_equal(total, sum);
	assert_true(total <= slots);
	assert_true(mem <= room.memory_mib && disk <= room.disk_mib);
	return total;
}

static struct sched_size mib(uint64_t memory, uint64_t disk)
{
	struct sched_size s = { .memory_mib = memory, .disk_mib = disk };
	return s;
}

/* Room for 2 GiB: two runs of 1.5 GiB go one behind the other, though
 * slots are free; by disk the same. */
static void room_queues(void **state)
{
	(void)state;
	unsigned p[2];
	struct sched_size big[2] = { mib(1536, 64), mib(1536, 64) };
	struct sched_stat st[1] = { stat(0, 2, 4, 0) };
	st[0].next = big;
	st[0].nnext = 2;
	assert_int_equal(choose_room(st, 1, 4, mib(2048, 4096), mib(2048, 4096), p), 1);
	assert_int_equal(p[0], 1);
	/* the first runs: 512 left, the second waits */
	st[0] = stat(1, 1, 4, 1000);
	st[0].next = big + 1;
	st[0].nnext = 1;
	assert_int_equal(choose_room(st, 1, 4, mib(512, 4032), mib(2048, 4096), p), 0);
	/* it ended: the second starts */
	st[0].running = 0;
	assert_int_equal(choose_room(st, 1, 4, mib(2048, 4096), mib(2048, 4096), p), 1);
	/* workspaces: 3 GiB each with 4 GiB of disk */
	struct sched_size disk[3] = { mib(256, 3072), mib(256, 3072), mib(256, 64) };
	st[0] = stat(0, 3, 4, 0);
	st[0].next = disk;
	st[0].nnext = 3;
	assert_int_equal(choose_room(st, 1, 4, mib(8192, 4096), mib(8192, 4096), p), 1);
	/* and a tenant's runs start in order: its small third waits behind its second */
	assert_int_equal(p[0], 1);
	/* exactly what is left fits */
	assert_int_equal(choose_room(st, 1, 4, mib(512, 6144), mib(8192, 8192), p), 2);
}

/* The run whose turn it is holds the room: a smaller one of another
 * tenant does not overtake it, so a large run is not starved. */
static void room_no_overtaking(void **state)
{
	(void)state;
	unsigned p[2];
	struct sched_size a_runs[1] = { mib(1536, 64) }, b_runs[3] = { mib(256, 64), mib(256, 64), mib(256, 64) };
	/* a: nothing running, its turn; b: one running */
	struct sched_stat st[2] = { stat(0, 1, 4, 0), stat(1, 3, 4, 500) };
	st[0].next = a_runs;
	st[0].nnext = 1;
	st[1].next = b_runs;
	st[1].nnext = 3;
	assert_int_equal(choose_room(st, 2, 4, mib(1024, 4096), mib(2048, 4096), p), 0);
	/* once the room is there, a goes first, then b in the 512 left */
	assert_int_equal(choose_room(st, 2, 4, mib(2048, 4096), mib(2048, 4096), p), 3);
	assert_int_equal(p[0], 1);
	assert_int_equal(p[1], 2);
	/* when b's turn comes first, its small runs fit beside each other
	 * until a's large one is the next turn and does not fit */
	st[0] = stat(1, 1, 4, 0);
	st[0].next = a_runs;
	st[0].nnext = 1;
	st[1] = stat(0, 3, 4, 500);
	st[1].next = b_runs;
	st[1].nnext = 3;
	assert_int_equal(choose_room(st, 2, 4, mib(1024, 4096), mib(2048, 4096), p), 1);
	assert_int_equal(p[0], 0);
	assert_int_equal(p[1], 1);
}

/* A run larger than the whole node is passed over on this node (another
 * may be larger), never waited for; one whose size the store did not read
 * is not started either. */
static void room_larger_than_node(void **state)
{
	(void)state;
	unsigned p[3];
	struct sched_size huge[1] = { mib(4096, 64) }, wide[1] = { mib(256, 8192) }, small[2] = { mib(256, 64), mib(256, 64) };
	struct sched_stat st[3] = { stat(0, 1, 4, 0), stat(0, 1, 4, 0), stat(0, 5, 4, 100) };
	st[0].next = huge;
	st[0].nnext = 1;
	st[1].next = wide;
	st[1].nnext = 1;
	st[2].next = small;
	st[2].nnext = 2;   /* 5 queued, 2 sizes read */
	assert_int_equal(choose_room(st, 3, 8, mib(2048, 4096), mib(2048, 4096), p), 2);
	assert_int_equal(p[0], 0);
	assert_int_equal(p[1], 0);
	assert_int_equal(p[2], 2);
	/* no room at all, no run: nothing */
	assert_int_equal(choose_room(st, 3, 8, mib(0, 0), mib(2048, 4096), p), 0);
}

/* A large run behind a tenant that keeps queueing small ones starts once
 * the small ones running end: over rounds, with the store's counts. */
static void room_large_run_not_starved(void **state)
{
	(void)state;
	struct sched_size big[1] = { mib(1536, 64) }, small[64];
	for (unsigned i = 0; i < 64; i++)
		small[i] = mib(512, 64);
	struct sched_stat st[2] = { stat(0, 64, 4, 0), stat(0, 0, 4, 0) };
	st[0].next = small;
	st[0].nnext = 64;
	st[1].next = big;
	unsigned p[2], running_small = 0, round;
	uint64_t used = 0;
	for (round = 0; round < 20; round++) {
		if (round == 1) {   /* b queues its large run after a's flood began */
			st[1].queued = 1;
			st[1].nnext = 1;
		}
		choose_room(st, 2, 4, mib(2048 - used, 4096), mib(2048, 4096), p);
		if (p[1])
			break;
		st[0].running += p[0];
		st[0].queued -= p[0];
		st[0].next += p[0];
		st[0].nnext -= p[0];
		running_small += p[0];
		used += 512ull * p[0];
		st[0].last_start_ms = 1000 * (round + 1);
		if (running_small) {   /* one small run ends each round */
			running_small--;
			st[0].running--;
			used -= 512;
		}
	}
	assert_true(round < 6);
}

static void size_check(void **state)
{
	(void)state;
	char e[200];
	struct sched_size node = mib(2048, 4096);
	assert_int_equal(sched_size_check(&(struct sched_size){ 2048, 4096 }, &node, e, sizeof(e)), 0);
	assert_int_equal(sched_size_check(&(struct sched_size){ 3000, 64 }, &node, e, sizeof(e)), -1);
	assert_string_equal(e, "limits.memory_mib: 3000 MiB is more than this node has for runs (node_memory_mib = 2048)");
	assert_int_equal(sched_size_check(&(struct sched_size){ 256, 5000 }, &node, e, sizeof(e)), -1);
	assert_string_equal(e, "limits.disk_mib: 5000 MiB is more than this node has for workspaces (node_disk_mib = 4096)");
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
		cmocka_unit_test(room_queues),
		cmocka_unit_test(room_no_overtaking),
		cmocka_unit_test(room_larger_than_node),
		cmocka_unit_test(room_large_run_not_starved),
		cmocka_unit_test(size_check),
		cmocka_unit_test(rate),
	};
	return cmocka_run_group_tests_name("scheduler", tests, NULL, NULL);
}
