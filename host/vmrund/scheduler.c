#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

/* The longest wait sched_rate_take reports: about 68 years. */
#define SCHED_WAIT_MAX_MS ((int64_t)INT32_MAX * 1000)

int sched_init(struct sched *s, const struct tenants *ts, unsigned slots, unsigned queue_max)
{
	memset(s, 0, sizeof(*s));
	s->ts = ts;
	s->slots = slots ? slots : 1;
	s->queue_max = queue_max;
	s->t = calloc(ts->n ? ts->n : 1, sizeof(*s->t));
	s->q = calloc(queue_max ? queue_max : 1, sizeof(*s->q));
	if (!s->t || !s->q) {
		sched_free(s);
		return -1;
	}
	for (size_t i = 0; i < ts->n; i++)
		s->t[i].tokens = ts->t[i].burst;
	return 0;
}

void sched_free(struct sched *s)
{
	free(s->t);
	free(s->q);
	memset(s, 0, sizeof(*s));
}

int64_t sched_rate_take(struct sched *s, unsigned tenant, int64_t now_ms)
{
	const struct tenant *lim = &s->ts->t[tenant];
	struct sched_tenant *t = &s->t[tenant];
	if (now_ms > t->tokens_ms) {
		t->tokens += (double)(now_ms - t->tokens_ms) * lim->rate / 1000.0;
		if (t->tokens > lim->burst)
			t->tokens = lim->burst;
	}
	t->tokens_ms = now_ms > t->tokens_ms ? now_ms : t->tokens_ms;
	if (t->tokens >= 1) {
		t->tokens -= 1;
		return 0;
	}
	/* A rate low enough (tenants allow any above 0) puts the wait past
	 * what int64 holds: converting that would be undefined. Capped, so
	 * that the caller's seconds still fit an unsigned too. */
	double w = (1 - t->tokens) * 1000.0 / lim->rate;
	if (!(w < (double)SCHED_WAIT_MAX_MS))
		return SCHED_WAIT_MAX_MS;
	int64_t wait = (int64_t)w + 1;
	return wait > 0 ? wait : 1;
}

enum sched_verdict sched_admit(const struct sched *s, unsigned tenant)
{
	const struct tenant *lim = &s->ts->t[tenant];
	const struct sched_tenant *t = &s->t[tenant];
	if ((uint64_t)t->running + t->queued >= (uint64_t)lim->concurrent + lim->queued)
		return SCHED_TENANT_FULL;
	/* A run that can start at once still passes through the queue, so
	 * the queue's bound counts only runs that would wait. */
	bool waits = t->running >= lim->concurrent || s->running >= s->slots || s->nq > 0;
	if (waits && s->nq >= s->queue_max)
		return SCHED_QUEUE_FULL;
	return SCHED_ACCEPT;
}

int sched_enqueue(struct sched *s, unsigned tenant, const char *id)
{
	if (strlen(id) >= SCHED_ID_MAX || tenant >= s->ts->n)
		return -1;
	if (s->nq >= s->queue_max) {
		/* Only recovery queues past the bound (runs accepted before a
		 * restart): grow rather than lose one. The bound itself stays,
		 * so admission refuses at it again once the queue drains. */
		struct sched_entry *q = realloc(s->q, (s->nq + 1) * sizeof(*q));
		if (!q)
			return -1;
		s->q = q;
	}
	memcpy(s->q[s->nq].id, id, strlen(id) + 1);
	s->q[s->nq++].tenant = tenant;
	s->t[tenant].queued++;
	return 0;
}

static void remove_at(struct sched *s, size_t i)
{
	s->t[s->q[i].tenant].queued--;
	memmove(&s->q[i], &s->q[i + 1], (s->nq - i - 1) * sizeof(*s->q));
	s->nq--;
}

/* The tenant that should start next: fewest running, then least recent. */
static int fairest(const struct sched *s)
{
	int best = -1;
	for (size_t i = 0; i < s->ts->n; i++) {
		const struct sched_tenant *t = &s->t[i];
		if (!t->queued || t->running >= s->ts->t[i].concurrent)
			continue;
		if (best < 0 || t->running < s->t[best].running ||
		    (t->running == s->t[best].running && t->last_start < s->t[best].last_start))
			best = (int)i;
	}
	return best;
}

int sched_pick(struct sched *s, char id[SCHED_ID_MAX], unsigned *tenant)
{
	if (s->running >= s->slots)
		return 0;
	int t = fairest(s);
	if (t < 0)
		return 0;
	for (size_t i = 0; i < s->nq; i++) {
		if (s->q[i].tenant != (unsigned)t)
			continue;
		memcpy(id, s->q[i].id, SCHED_ID_MAX);
		*tenant = (unsigned)t;
		remove_at(s, i);
		s->t[t].running++;
		s->t[t].last_start = ++s->starts;
		s->running++;
		return 1;
	}
	return 0;
}

bool sched_dequeue(struct sched *s, const char *id)
{
	for (size_t i = 0; i < s->nq; i++)
		if (!strcmp(s->q[i].id, id)) {
			remove_at(s, i);
			return true;
		}
	return false;
}

void sched_finished(struct sched *s, unsigned tenant)
{
	if (s->t[tenant].running)
		s->t[tenant].running--;
	if (s->running)
		s->running--;
}
