/* make bench-queue: vmrund's queue on its own, through the store
 * interface the daemon uses (host/vmrund/store.h), with a stand-in run and
 * no VM: RUNS runs are submitted (4 tenants, round-robin), then NODES
 * threads, each a node with its own connection, claim SLOTS at a time and
 * end each claimed run at once (the gate's command, then finish). Prints
 * submit and claim latency p50/p99 and runs claimed per second; asserts
 * nothing but that every run was claimed exactly once.
 *
 *   bench_queue SPEC NODES RUNS SLOTS
 *
 * SPEC: a SQLite file's path or a postgresql:// URI (tests/bench/queue.sh
 * starts a server). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store.h"
#include "tenants.h"

#define TENANTS 4

struct node {
	const char *spec;
	char name[48];
	unsigned slots;
	const struct tenants *ts;
	double *lat;                  /* ms per claim call that claimed something */
	size_t nlat, cap;
	unsigned claimed;
	int failed;
};

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int64_t wall_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp);
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);
	return v[i];
}

static void *node_main(void *arg)
{
	struct node *nd = arg;
	char err[400];
	struct store *s = store_open(nd->spec, err, sizeof(err));
	struct store_run *rows = calloc(nd->slots, sizeof(*rows));
	if (!s || !rows) {
		fprintf(stderr, "bench_queue: %s: %s\n", nd->name, s ? "out of memory" : err);
		nd->failed = 1;
		goto out;
	}
	for (unsigned idle = 0; idle < 3;) {
		double t0 = now_ms();
		int n = s->ops->claim(s, nd->name, nd->slots, nd->ts, NULL, NULL, wall_ms(), rows, err, sizeof(err));
		double t1 = now_ms();
		if (n < 0) {
			fprintf(stderr, "bench_queue: claim: %s\n", err);
			nd->failed = 1;
			break;
		}
		if (n == 0) {
			idle++;   /* the others may still hold a few: look again */
			continue;
		}
		idle = 0;
		if (nd->nlat == nd->cap) {
			nd->cap = nd->cap ? nd->cap * 2 : 1024;
			double *l = realloc(nd->lat, nd->cap * sizeof(*l));
			if (!l)
				break;
			nd->lat = l;
		}
		nd->lat[nd->nlat++] = t1 - t0;
		for (int i = 0; i < n; i++) {
			if (s->ops->command(s, rows[i].id, nd->name, wall_ms(), err, sizeof(err)) != 1 ||
			    s->ops->finish(s, rows[i].id, nd->name, RS_SUCCEEDED, wall_ms(), "{}", NULL, "", err,
					   sizeof(err)) != 1)
				nd->failed = 1;
			store_run_free(&rows[i]);
		}
		nd->claimed += (unsigned)n;
	}
out:
	free(rows);
	store_close(s);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: bench_queue SPEC NODES RUNS SLOTS\n");
		return 2;
	}
	const char *spec = argv[1];
	unsigned nodes = (unsigned)atoi(argv[2]), runs = (unsigned)atoi(argv[3]), slots = (unsigned)atoi(argv[4]);
	if (!nodes || !runs || !slots) {
		fprintf(stderr, "bench_queue: NODES, RUNS and SLOTS are whole numbers above 0\n");
		return 2;
	}
	struct tenant t[TENANTS];
	struct tenants ts = { .t = t, .n = TENANTS };
	char prefix[16];
	snprintf(prefix, sizeof(prefix), "%08x", (unsigned)wall_ms());
	for (unsigned i = 0; i < TENANTS; i++) {
		t[i] = (struct tenant){ .concurrent = 1000000, .queued = 1000000, .rate = 1, .burst = 1 };
		snprintf(t[i].name, sizeof(t[i].name), "bench%.8s-%u", prefix, i);
	}
	char err[400];
	struct store *s = store_open(spec, err, sizeof(err));
	if (!s) {
		fprintf(stderr, "bench_queue: %s\n", err);
		return 1;
	}
	double *sub = calloc(runs, sizeof(*sub));
	struct node *nd = calloc(nodes, sizeof(*nd));
	pthread_t *th = calloc(nodes, sizeof(*th));
	if (!sub || !nd || !th)
		return 1;
	for (unsigned i = 0; i < runs; i++) {
		struct store_run r = { .state = RS_QUEUED, .created_ms = wall_ms(), .request = "{\"argv\":[\"true\"]}" };
		snprintf(r.id, sizeof(r.id), "%.8s%024x", prefix, i);
		snprintf(r.tenant, sizeof(r.tenant), "%s", t[i % TENANTS].name);
		double t0 = now_ms();
		int v = s->ops->submit(s, &r, NULL, &t[i % TENANTS], runs + 1, err, sizeof(err));
		sub[i] = now_ms() - t0;
		if (v != 0) {
			fprintf(stderr, "bench_queue: submit: %s\n", v < 0 ? err : "refused");
			return 1;
		}
	}
	double t0 = now_ms();
	for (unsigned i = 0; i < nodes; i++) {
		nd[i] = (struct node){ .spec = spec, .slots = slots, .ts = &ts };
		snprintf(nd[i].name, sizeof(nd[i].name), "bench%.8s-n%u", prefix, i);
		pthread_create(&th[i], NULL, node_main, &nd[i]);
	}
	unsigned claimed = 0, calls = 0;
	int failed = 0;
	for (unsigned i = 0; i < nodes; i++) {
		pthread_join(th[i], NULL);
		claimed += nd[i].claimed;
		calls += (unsigned)nd[i].nlat;
		failed |= nd[i].failed;
	}
	double secs = (now_ms() - t0) / 1e3;
	double *lat = calloc(calls ? calls : 1, sizeof(*lat));
	size_t k = 0;
	for (unsigned i = 0; i < nodes; i++) {
		memcpy(lat + k, nd[i].lat, nd[i].nlat * sizeof(*lat));
		k += nd[i].nlat;
		free(nd[i].lat);
	}
	printf("%-10s nodes=%u runs=%u slots=%u: submit p50 %.2f ms p99 %.2f ms; claim p50 %.2f ms p99 %.2f ms "
	       "(%u calls); %.0f runs claimed and ended per second\n",
	       store_is_pg(spec) ? "postgresql" : "sqlite", nodes, runs, slots, pct(sub, runs, 0.5), pct(sub, runs, 0.99),
	       pct(lat, calls, 0.5), pct(lat, calls, 0.99), calls, claimed / secs);
	store_close(s);
	free(lat);
	free(sub);
	free(nd);
	free(th);
	if (failed || claimed != runs) {
		fprintf(stderr, "bench_queue: %u of %u runs claimed%s\n", claimed, runs, failed ? ", with errors" : "");
		return 1;
	}
	return 0;
}
