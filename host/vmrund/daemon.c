/* vmrund's core (host/vmrund/daemon.h), the API's side: admission,
 * cancel, waits, and recording how runs ended. The node's loop is
 * loop.c; start and recovery recover.c. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "errmsg.h"
#include "hex.h"
#include "judge0_runs.h"
#include "keep.h"
#include "run.h"
#include "sandboxes.h"
#include "spool.h"

void vmrund_run_path(const struct vmrund *d, const char *id, const char *file, char *buf, size_t len)
{
	/* Every path here is well under PATH_MAX (run_dir is checked at load,
	 * ids are 32 characters); one that did not fit would be empty. */
	if (snprintf(buf, len, "%s/%s%s%s", d->cfg.run_dir, id, file ? "/" : "", file ? file : "") >= (int)len)
		buf[0] = '\0';
}

void vmrund_closing(struct vmrund *d)
{
	pthread_mutex_lock(&d->lock);
	d->closing = true;
	pthread_cond_broadcast(&d->changed);
	pthread_mutex_unlock(&d->lock);
}

void vmrund_wake(struct vmrund *d)
{
	uint64_t one = 1;
	if (write(d->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return;   /* the loop polls on a timer too */
}

void vmrund_new_id(char id[SCHED_ID_MAX])
{
	uint8_t b[16];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		memcpy(b, &ts, sizeof(b) < sizeof(ts) ? sizeof(b) : sizeof(ts));
	}
	hex_of(b, sizeof(b), id);
}

struct vmrund_answer vmrund_answer_of(unsigned status, unsigned retry, const char *fmt, ...)
{
	struct vmrund_answer a = { .status = status, .retry_after_s = retry };
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(a.message, sizeof(a.message), fmt, ap);
	va_end(ap);
	return a;
}

/* ---- the API's side ------------------------------------------------------ */

struct vmrund_answer vmrund_submit(struct vmrund *d, unsigned tenant, const struct run_spec *rq,
				   struct store_idem *idem, char id[SCHED_ID_MAX])
{
	/* The policy's ceilings and the tenant's, before anything is
	 * stored: a spec beyond one is the client's to fix, never a run
	 * that fails later. */
	char why[sizeof(((struct vmrund_answer *)0)->message)];
	struct run_spec sized = *rq;   /* a shallow copy: it owns nothing */
	if (rq->from_checkpoint[0]) {
		struct vmrund_answer a = vmrund_run_checkpoint(d, tenant, &sized);
		if (a.status)
			return a;
		rq = &sized;
	}
	const struct runtime *rt = rq->runtime[0] ? runtime_pick(d->rts, d->nrts, rq->runtime) : NULL;
	struct run_effective e;
	run_spec_effective(rq, rt, &e);
	if (tenant_net_check(&d->ts.t[tenant], rq, why, sizeof(why)))
		return vmrund_answer_of(403, 0, "%s", why);
	if (run_spec_check(rq, &e, &d->pol, RUN_SPEC_WORDS_API, why, sizeof(why)))
		return vmrund_answer_of(400, 0, "%s", why);
	/* Its size, within the tenant's ceilings and this node's size: a run
	 * that could never start is refused now rather than queued forever.
	 * The sizes go into the stored spec, so that the run gets what it
	 * was admitted with and the claim reads them back (store.h). */
	struct sched_size size = { e.memory_mib, e.disk_mib };
	if (tenant_size_check(&d->ts.t[tenant], size.memory_mib, size.disk_mib, why, sizeof(why)) ||
	    sched_size_check(&size, &d->size, why, sizeof(why)))
		return vmrund_answer_of(400, 0, "%s", why);
	sized = *rq;
	sized.memory_mib = e.memory_mib;
	sized.disk_mib = e.disk_mib;
	json_t *j = run_spec_to_json(&sized);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return vmrund_answer_of(500, 0, "out of memory");
	vmrund_new_id(id);
	struct store_run run = { .tenant = "", .state = RS_QUEUED, .created_ms = clock_wall_ms(), .request = text };
	snprintf(run.id, sizeof(run.id), "%s", id);
	snprintf(run.tenant, sizeof(run.tenant), "%s", d->ts.t[tenant].name);
	char err[300];
	struct vmrund_answer a = vmrund_answer_of(202, 0, "queued");
	pthread_mutex_lock(&d->lock);
	int v = d->stopping ? SCHED_QUEUE_FULL
			    : d->store->ops->submit(d->store, &run, idem, &d->ts.t[tenant], d->cfg.queue_max, err,
						    sizeof(err));
	if (v < 0) {
		/* Nothing was stored: the client may send it again. */
		a = vmrund_answer_of(503, 2, "the store: %s", err);
	} else if (v == STORE_REPLAYED) {
		snprintf(id, SCHED_ID_MAX, "%s", idem->id);   /* the first request's run; nothing new to wake for */
		a = vmrund_answer_of(202, 0, "replayed");
	} else if (v == STORE_KEY_REUSED) {
		a = vmrund_answer_of(422, 0, "Idempotency-Key %s was used within a day for run %s with another body", idem->key,
			   idem->id);
	} else if (v == SCHED_TENANT_FULL) {
		d->m.refused_tenant++;
		a = vmrund_answer_of(429, 1, "tenant %s has %u runs running or queued, its limit", d->ts.t[tenant].name,
			   d->ts.t[tenant].concurrent + d->ts.t[tenant].queued);
	} else if (v == SCHED_QUEUE_FULL) {
		d->m.refused_queue++;
		a = vmrund_answer_of(503, d->stopping ? 5 : 2, d->stopping ? "vmrund is stopping" : "the queue is full (%u runs)",
			   d->cfg.queue_max);
	} else {
		d->m.accepted++;
	}
	pthread_mutex_unlock(&d->lock);
	free(text);
	if (a.status == 202 && v == SCHED_ACCEPT)
		vmrund_wake(d);
	return a;
}

static bool ended(struct vmrund *d, const char *id)
{
	struct store_run run;
	char err[300];
	int found = d->store->ops->get(d->store, id, NULL, &run, err, sizeof(err));
	/* A store that is away cannot say: keep waiting, the deadline ends it. */
	bool done = found == 0 || (found == 1 && store_state_terminal(run.state));
	if (found == 1)
		store_run_free(&run);
	return done;
}

/* Wait on the condition until the run ended or deadline; lock held. The
 * condition is broadcast on every end this node sees, its own and those
 * the store notifies; the store is read again at least each second for
 * those it cannot (one node's SQLite has no notifications to miss). */
static bool wait_locked(struct vmrund *d, const char *id, int64_t deadline_ms)
{
	for (;;) {
		if (ended(d, id))
			return true;
		if (d->closing)
			return false;
		int64_t left = deadline_ms - clock_mono_ms();
		if (left <= 0)
			return false;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		int64_t step = left < 1000 ? left : 1000;
		ts.tv_sec += step / 1000;
		ts.tv_nsec += (step % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&d->changed, &d->lock, &ts);
	}
}

bool vmrund_wait(struct vmrund *d, const char *id, int64_t deadline_ms)
{
	pthread_mutex_lock(&d->lock);
	bool done = wait_locked(d, id, deadline_ms);
	pthread_mutex_unlock(&d->lock);
	return done;
}

void vmrund_stop(struct vmrund *d, const char *id)
{
	for (unsigned i = 0; i < d->slots; i++) {
		struct vmrund_active *x = &d->active[i];
		if (x->used && !strcmp(x->id, id) && x->pid == -1) {
			/* a Judge0 batch's thread holds it: it looks before the
			 * command starts, and the run ends cancelled */
			x->cancel = true;
			continue;
		}
		/* one already reaped ended on its own: its end stands */
		if (!x->used || strcmp(x->id, id) || x->cancel || x->pid <= 0)
			continue;
		x->cancel = true;
		kill(x->pid, SIGTERM);   /* the worker's cancel: it destroys the VM and cleans up */
	}
}

struct vmrund_answer vmrund_cancel(struct vmrund *d, unsigned tenant, const char *id, int64_t wait_ms)
{
	struct store_run run = { 0 };
	char err[300], node[STORE_NODE_MAX] = "";
	struct vmrund_answer a;
	pthread_mutex_lock(&d->lock);
	int rc = d->store->ops->cancel(d->store, id, d->ts.t[tenant].name, clock_wall_ms(), node, err, sizeof(err));
	int found = rc == 1 || rc == 3 ? d->store->ops->get(d->store, id, NULL, &run, err, sizeof(err)) : 0;
	if (rc < 0) {
		a = vmrund_answer_of(503, 2, "the store: %s", err);
	} else if (rc == 0) {
		a = vmrund_answer_of(404, 0, "no run %s", id);
	} else if (rc == 3) {
		a = vmrund_answer_of(409, 0, "run %s already ended: %s", id, found == 1 ? store_state_name(run.state) : "?");
	} else if (rc == 1) {
		if (found == 1)
			vmrund_ended(d, &run);
		a = vmrund_answer_of(200, 0, "cancelled");
	} else {
		/* Running: ours to stop now, or its node's, which the store
		 * told (and whose heartbeat finds it again if it missed it). */
		if (!strcmp(node, d->node))
			vmrund_stop(d, id);
		a = wait_locked(d, id, clock_mono_ms() + wait_ms) ? vmrund_answer_of(200, 0, "cancelled")
								   : vmrund_answer_of(202, 0, "cancelling: the VM is being destroyed");
	}
	if (found == 1)
		store_run_free(&run);
	pthread_mutex_unlock(&d->lock);
	return a;
}

void vmrund_store_failed(struct vmrund *d, const char *what, const char *err)
{
	if (!d->store_down)
		vmrund_say("%s: %s; retrying", what, err);
	d->store_down = true;
}

void vmrund_store_ok(struct vmrund *d)
{
	if (d->store_down) {
		vmrund_say("the store answers again");
		d->expire_from_ms = clock_mono_ms() + (int64_t)d->cfg.lease_s * 1000;
	}
	d->store_down = false;
}

unsigned vmrund_rate(struct vmrund *d, unsigned tenant)
{
	pthread_mutex_lock(&d->lock);
	int64_t wait = -1;
	if (d->store->ops->rate) {
		char err[300];
		if (d->store->ops->rate(d->store, &d->ts.t[tenant], &wait, err, sizeof(err)) < 0) {
			vmrund_store_failed(d, "taking from a tenant's request rate", err);
			wait = -1;
		} else {
			vmrund_store_ok(d);
		}
	}
	/* One node, or a store that is down: this node's own bucket, so
	 * that each node still holds the rate while it cannot ask. */
	if (wait < 0)
		wait = sched_rate_take(&d->rate, tenant, clock_mono_ms());
	if (wait)
		d->m.refused_rate++;
	pthread_mutex_unlock(&d->lock);
	return wait ? (unsigned)((wait + 999) / 1000) : 0;
}

bool vmrund_stream_begin(struct vmrund *d, unsigned tenant)
{
	pthread_mutex_lock(&d->lock);
	bool room = d->streams[tenant] < d->cfg.max_streams_per_tenant;
	if (room)
		d->streams[tenant]++;
	else
		d->m.refused_streams++;
	pthread_mutex_unlock(&d->lock);
	return room;
}

void vmrund_stream_end(struct vmrund *d, unsigned tenant)
{
	pthread_mutex_lock(&d->lock);
	if (d->streams[tenant])
		d->streams[tenant]--;
	pthread_mutex_unlock(&d->lock);
}

/* ---- the HTTP side's reads and counts ------------------------------------- */

int vmrund_get_run(struct vmrund *d, const char *id, const char *tenant, struct store_run *run, char *err,
		   size_t errlen)
{
	pthread_mutex_lock(&d->lock);
	int found = d->store->ops->get(d->store, id, tenant, run, err, errlen);
	pthread_mutex_unlock(&d->lock);
	return found;
}

int vmrund_get_run_fetched(struct vmrund *d, const char *id, struct store_run *run, char *err, size_t errlen)
{
	pthread_mutex_lock(&d->lock);
	int found = d->store->ops->get(d->store, id, NULL, run, err, errlen);
	if (found == 1)
		vmrund_fetch(d, id);   /* it may have run on another node */
	pthread_mutex_unlock(&d->lock);
	return found;
}

int vmrund_get_run_output(struct vmrund *d, const char *id, bool want_output, struct store_run *run, bool *fetched)
{
	char err[300], path[PATH_MAX];
	vmrund_run_path(d, id, SPOOL_OUTPUT, path, sizeof(path));
	pthread_mutex_lock(&d->lock);
	int found = d->store->ops->get(d->store, id, NULL, run, err, sizeof(err));
	/* A run that ran on another node: its output file from the store,
	 * in the order its streams interleaved (the caller replays the
	 * result's when there is none). */
	*fetched = want_output && found == 1 && store_state_terminal(run->state) && vmrund_fetch(d, id) == 0 &&
		   access(path, R_OK) == 0;
	pthread_mutex_unlock(&d->lock);
	return found;
}

int vmrund_fetch_run(struct vmrund *d, const char *id)
{
	pthread_mutex_lock(&d->lock);
	int rc = vmrund_fetch(d, id);
	pthread_mutex_unlock(&d->lock);
	return rc;
}

int vmrund_list_runs(struct vmrund *d, const char *tenant, const char *client, uint64_t offset, unsigned limit,
		     struct store_run **rows, unsigned *n, uint64_t *total, char *err, size_t errlen)
{
	pthread_mutex_lock(&d->lock);
	int rc = d->store->ops->list(d->store, tenant, client, offset, limit, rows, n, total, err, errlen);
	pthread_mutex_unlock(&d->lock);
	return rc;
}

int vmrund_count_runs(struct vmrund *d, uint64_t states[RS_COUNT], unsigned *running_here, char *err,
		      size_t errlen)
{
	pthread_mutex_lock(&d->lock);
	int rc = d->store->ops->count(d->store, states, err, errlen);
	*running_here = vmrund_running_here(d);
	pthread_mutex_unlock(&d->lock);
	return rc < 0 ? -1 : 0;
}

char *vmrund_metrics_text(struct vmrund *d, char *err, size_t errlen)
{
	uint64_t states[RS_COUNT] = { 0 };
	pthread_mutex_lock(&d->lock);
	int rc = d->store->ops->count(d->store, states, err, errlen);
	char *text = rc < 0 ? NULL : metrics_render(&d->m, states[RS_QUEUED], vmrund_running_here(d), d->slots, states);
	pthread_mutex_unlock(&d->lock);
	if (!text && rc >= 0)
		snprintf(err, errlen, "out of memory");
	return text;
}

void vmrund_count_answer(struct vmrund *d, unsigned status)
{
	pthread_mutex_lock(&d->lock);
	metrics_http(&d->m, status);
	pthread_mutex_unlock(&d->lock);
}

void vmrund_count_cut(struct vmrund *d, unsigned n)
{
	pthread_mutex_lock(&d->lock);
	d->m.cut_head += n;
	pthread_mutex_unlock(&d->lock);
}

unsigned vmrund_running_here(struct vmrund *d)
{
	unsigned n = 0;
	for (unsigned i = 0; i < d->slots; i++)
		n += d->active[i].used;
	return n;
}

bool vmrund_ready(struct vmrund *d, char *why, size_t whylen)
{
	if (!d->kvm_ok) {
		snprintf(why, whylen, "%s", d->kvm_why);
		return false;
	}
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, whylen, "/dev/kvm: %s", strerror(errno));
		return false;
	}
	close(fd);
	const char *need[] = { d->worker, d->vmm };
	for (size_t i = 0; i < 2; i++)
		if (access(need[i], X_OK) < 0) {
			snprintf(why, whylen, "%s: %s", need[i], strerror(errno));
			return false;
		}
	char path[PATH_MAX + 32];
	const char *images[] = { RUN_GUEST_KERNEL, "rootfs.ext4" };
	for (size_t i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", d->guest, images[i]);
		if (access(path, R_OK) < 0) {
			snprintf(why, whylen, "%s: %s", path, strerror(errno));
			return false;
		}
	}
	return true;
}

/* ---- ends ---------------------------------------------------------------- */

static void audit(struct vmrund *d, const char *id, const char *tenant, enum run_state st, const json_t *result,
		  const struct run_outcome *o, const char *request, int64_t queue_ms, const char *message)
{
	if (!d->audit)
		return;
	json_t *rq = request ? json_loads(request, 0, NULL) : NULL;
	json_t *line = vmrund_audit_begin();
	json_object_set_new(line, "tenant", json_string(tenant));
	json_object_set_new(line, "run_id", json_string(id));
	json_object_set_new(line, "state", json_string(store_state_name(st)));
	if (rq) {
		/* network: the rules the run was granted, for whoever reviews egress */
		const char *keys[] = { "runtime", "argv", "args", "limits", "compile", "run", "network" };
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			json_t *v = json_object_get(rq, keys[i]);
			if (v)
				json_object_set(line, keys[i], v);
		}
		/* the names of both lists of files, never their contents */
		const char *lists[] = { "files", "workspace_files" };
		for (size_t k = 0; k < sizeof(lists) / sizeof(lists[0]); k++) {
			json_t *names = json_array(), *files = json_object_get(rq, lists[k]);
			size_t i;
			json_t *f;
			json_array_foreach(files, i, f) json_array_append(names, json_object_get(f, "name"));
			if (k == 0 || json_array_size(names))
				json_object_set_new(line, lists[k], names);
			else
				json_decref(names);
		}
	}
	json_t *hits = json_array();
	for (unsigned b = 0; o && b < OUTCOME_LIMITS; b++)
		if (o->limits & (1u << b))
			json_array_append_new(hits, json_string(result_limit_name(1u << b)));
	json_object_set_new(line, "limits_hit", hits);
	if (result) {
		json_object_set(line, "termination", json_object_get(result, "termination"));
		json_object_set(line, "exit_code", json_object_get(result, "exit_code"));
		json_object_set(line, "durations_ms", json_object_get(result, "durations_ms"));
		/* every egress decision of the run's proxy, as its result has them */
		json_t *decisions = json_object_get(result, "network");
		if (decisions)
			json_object_set(line, "network_decisions", decisions);
	}
	json_object_set_new(line, "queue_ms", json_integer(queue_ms));
	json_object_set_new(line, "message", json_string(message ? message : ""));
	vmrund_audit_end(d, line);
	json_decref(rq);
}

json_t *vmrund_audit_begin(void)
{
	json_t *line = json_object();
	json_object_set_new(line, "time", spool_iso_time(clock_wall_ms()));
	return line;
}

void vmrund_audit_end(struct vmrund *d, json_t *line)
{
	char *text = d->audit ? json_dumps(line, JSON_COMPACT) : NULL;
	if (text) {
		fprintf(d->audit, "%s\n", text);
		fflush(d->audit);
	}
	free(text);
	json_decref(line);
}

void vmrund_ended(struct vmrund *d, const struct store_run *run)
{
	json_t *r = spool_result_parse(run->result);
	int64_t queue_ms = run->started_ms ? run->started_ms - run->created_ms : 0;
	const struct run_outcome *out = run->has_outcome ? &run->outcome : NULL;   /* the store's columns */
	metrics_run_ended(&d->m, run->state, r, out, queue_ms);
	audit(d, run->id, run->tenant, run->state, r, out, run->request, queue_ms, run->message);
	judge0_callbacks_ended(d, run);
	json_decref(r);
	pthread_cond_broadcast(&d->changed);
}

int vmrund_end_run(struct vmrund *d, const char *id, const char *node, enum run_state st, const char *result,
		   const struct run_outcome *outcome, const char *message)
{
	char err[300];
	int done = d->store->ops->finish(d->store, id, node, st, clock_wall_ms(), result, outcome, message, err,
					 sizeof(err));
	if (done < 0) {
		vmrund_say("run %s: %s", id, err);
		return -1;
	}
	struct store_run run;
	if (done == 1 && d->store->ops->get(d->store, id, NULL, &run, err, sizeof(err)) == 1) {
		vmrund_ended(d, &run);   /* which wakes the waiters */
		store_run_free(&run);
	} else {
		pthread_cond_broadcast(&d->changed);
	}
	return done;
}

int vmrund_fetch(struct vmrund *d, const char *id)
{
	char dir[PATH_MAX], err[300];
	vmrund_run_path(d, id, NULL, dir, sizeof(dir));
	int rc = keep_fetch(d->store, id, d->cfg.run_dir, dir, err, sizeof(err));
	if (rc < 0)
		vmrund_say("run %s: %s", id, err);
	return rc < 0 ? -1 : 0;
}
