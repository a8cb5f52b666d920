#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "errmsg.h"

/* The longest wait sched_rate_take reports: about 68 years. */
#define SCHED_WAIT_MAX_MS ((int64_t)INT32_MAX * 1000)

enum sched_verdict sched_admit(const struct tenant *lim, unsigned open, unsigned queued, unsigned queue_max)
{
	if ((uint64_t)open >= (uint64_t)lim->concurrent + lim->queued)
		return SCHED_TENANT_FULL;
	/* Every run passes through the shared queue, even one a free slot
	 * will take at once: no node can know that another will not take
	 * the slot first. */
	if (queued >= queue_max)
		return SCHED_QUEUE_FULL;
	return SCHED_ACCEPT;
}

/* The tenant the next slot goes to: fewest running, then least recent;
 * -1 when none may start one. Tenants marked in pass are left out. */
static int fairest(const struct sched_stat *st, size_t n, const unsigned *picks, const int64_t *last, const bool *pass)
{
	int best = -1;
	for (size_t i = 0; i < n; i++) {
		unsigned running = st[i].running + picks[i];
		if (pass[i] || picks[i] >= st[i].queued || running >= st[i].concurrent)
			continue;
		unsigned brun = best < 0 ? 0 : st[best].running + picks[best];
		if (best < 0 || running < brun || (running == brun && last[i] < last[best]))
			best = (int)i;
	}
	return best;
}

static bool fits(const struct sched_size *run, const struct sched_size *room)
{
	return run->memory_mib <= room->memory_mib && run->disk_mib <= room->disk_mib;
}

/* Whether tenant t's next run may start in *left, taking it from there:
 * 1 yes, 0 pass the tenant over on this node, -1 hold (nothing more
 * starts). */
static int take_room(const struct sched_stat *t, unsigned k, struct sched_size *left, const struct sched_size *node)
{
	if (k >= t->nnext)
		return 0;   /* its size was not read: not this round */
	const struct sched_size *run = &t->next[k];
	if (!fits(run, node))
		return 0;   /* never here: another node's, its later runs wait behind it */
	if (!fits(run, left))
		return -1;
	left->memory_mib -= run->memory_mib;
	left->disk_mib -= run->disk_mib;
	return 1;
}

unsigned sched_choose(const struct sched_stat *st, size_t n, unsigned slots, const struct sched_size *room,
		      const struct sched_size *node, unsigned *picks)
{
	int64_t *last = calloc(n ? n : 1, sizeof(*last));
	bool *pass = calloc(n ? n : 1, sizeof(*pass));
	memset(picks, 0, n * sizeof(*picks));
	unsigned total = 0;
	if (!last || !pass)
		goto out;   /* nothing starts this round; the next one tries again */
	int64_t newest = 0;
	for (size_t i = 0; i < n; i++) {
		last[i] = st[i].last_start_ms;
		newest = last[i] > newest ? last[i] : newest;
	}
	struct sched_size left = room ? *room : (struct sched_size){ 0 };
	struct sched_size whole = node ? *node : left;
	for (int t; total < slots && (t = fairest(st, n, picks, last, pass)) >= 0;) {
		int r = room ? take_room(&st[t], picks[t], &left, &whole) : 1;
		if (r < 0)
			break;
		if (r == 0) {
			pass[t] = true;
			continue;
		}
		picks[t]++;
		total++;
		last[t] = ++newest;   /* it just started one: the most recent */
	}
out:
	free(last);
	free(pass);
	return total;
}

unsigned sched_want(const struct sched_stat *st, unsigned slots)
{
	unsigned left = st->running < st->concurrent ? st->concurrent - st->running : 0;
	unsigned want = st->queued < slots ? st->queued : slots;
	return want < left ? want : left;
}

int sched_size_check(const struct sched_size *run, const struct sched_size *node, char *err, size_t errlen)
{
	if (run->memory_mib > node->memory_mib)
		return errf(err, errlen, "limits.memory_mib: %llu MiB is more than this node has for runs (node_memory_mib = %llu)",
			    (unsigned long long)run->memory_mib, (unsigned long long)node->memory_mib);
	if (run->disk_mib > node->disk_mib)
		return errf(err, errlen, "limits.disk_mib: %llu MiB is more than this node has for workspaces (node_disk_mib = %llu)",
			    (unsigned long long)run->disk_mib, (unsigned long long)node->disk_mib);
	return 0;
}

int sched_rate_init(struct sched_rate *r, const struct tenants *ts)
{
	r->ts = ts;
	if (!(r->b = calloc(ts->n ? ts->n : 1, sizeof(*r->b))))
		return -1;
	for (size_t i = 0; i < ts->n; i++)
		r->b[i].tokens = ts->t[i].burst;
	return 0;
}

void sched_rate_free(struct sched_rate *r)
{
	free(r->b);
	memset(r, 0, sizeof(*r));
}

int64_t sched_rate_take(struct sched_rate *r, unsigned tenant, int64_t now_ms)
{
	const struct tenant *lim = &r->ts->t[tenant];
	struct sched_bucket *t = &r->b[tenant];
	if (now_ms > t->ms) {
		t->tokens += (double)(now_ms - t->ms) * lim->rate / 1000.0;
		if (t->tokens > lim->burst)
			t->tokens = lim->burst;
	}
	t->ms = now_ms > t->ms ? now_ms : t->ms;
	if (t->tokens >= 1) {
		t->tokens -= 1;
		return 0;
	}
	return sched_rate_wait_ms(t->tokens, lim->rate);
}

int64_t sched_rate_wait_ms(double tokens, double rate)
{
	/* A rate low enough (tenants allow any above 0) puts the wait past
	 * what int64 holds: converting that would be undefined. Capped, so
	 * that the caller's seconds still fit an unsigned too. */
	double w = (1 - tokens) * 1000.0 / rate;
	if (!(w < (double)SCHED_WAIT_MAX_MS))
		return SCHED_WAIT_MAX_MS;
	int64_t wait = (int64_t)w + 1;
	return wait > 0 ? wait : 1;
}
