/* Sandboxes in vmrund (host/vmrund/sandboxes.h): the pure parts,
 * admission and the API's calls, the loop's look at the supervisors,
 * adoption at vmrund's start; their processes and this node's table are
 * sandbox_node.c's, parked ones sandbox_park.c's. */
#include "sandbox_node.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "clock.h"
#include "daemon.h"
#include "errmsg.h"
#include "hex.h"
#include "run_pause.h"
#include "run_spec.h"
#include "runtime.h"
#include "sandbox_http.h"
#include "snapshot_cache.h"
#include "spool.h"


/* ---- pure parts ----------------------------------------------------------------- */

static bool meta_key_ok(const char *k)
{
	size_t n = strlen(k);
	return n >= 1 && n <= VMRUND_SBX_META_KEY &&
	       strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static int metadata_check(const json_t *m, char *err, size_t errlen)
{
	if (!json_is_object(m))
		return errf(err, errlen, "metadata: an object of strings");
	if (json_object_size(m) > VMRUND_SBX_META_MAX)
		return errf(err, errlen, "metadata: at most %d entries", VMRUND_SBX_META_MAX);
	const char *k;
	const json_t *v;
	json_object_foreach((json_t *)m, k, v) {
		if (!meta_key_ok(k))
			return errf(err, errlen, "metadata: a key of 1 to %d characters of [A-Za-z0-9._-]",
				    VMRUND_SBX_META_KEY);
		if (!json_is_string(v) || json_string_length(v) > VMRUND_SBX_META_VAL)
			return errf(err, errlen, "metadata.%s: a string of at most %d bytes", k, VMRUND_SBX_META_VAL);
	}
	return 0;
}

int sandbox_body_split(const json_t *body, unsigned max_timeout_s, unsigned max_pause_ttl_s, json_t **spec,
		       struct sbx_life *life, char *err, size_t errlen)
{
	*spec = NULL;
	if (!json_is_object(body))
		return errf(err, errlen, "the body must be a JSON object");
	const json_t *t = json_object_get(body, "timeout_s"), *m = json_object_get(body, "metadata"),
		     *ot = json_object_get(body, "on_timeout"), *ttl = json_object_get(body, "pause_ttl_s"),
		     *from = json_object_get(body, "from_checkpoint"), *expect = json_object_get(body, "expect_digest");
	*life = (struct sbx_life){ .timeout_s = VMRUND_SBX_TIMEOUT_S < max_timeout_s ? VMRUND_SBX_TIMEOUT_S : max_timeout_s,
				   .pause_ttl_s = max_pause_ttl_s };
	if (t) {
		life->timeout_s = json_number_value(t);
		if (!json_is_number(t) || !(life->timeout_s > 0) || life->timeout_s > (double)max_timeout_s)
			return errf(err, errlen, "timeout_s: seconds, more than 0 and at most %u (the tenant's "
				    "max_sandbox_timeout_s)", max_timeout_s);
	}
	if (ot) {
		const char *v = json_string_value(ot);
		if (!v || (strcmp(v, "stop") && strcmp(v, "pause")))
			return errf(err, errlen, "on_timeout: \"stop\" or \"pause\"");
		life->on_timeout_pause = !strcmp(v, "pause");
	}
	if (ttl) {
		life->pause_ttl_s = json_number_value(ttl);
		if (!json_is_number(ttl) || !(life->pause_ttl_s > 0) || life->pause_ttl_s > (double)max_pause_ttl_s)
			return errf(err, errlen, "pause_ttl_s: seconds, more than 0 and at most %u (the tenant's "
				    "max_pause_ttl_s)", max_pause_ttl_s);
	}
	if (m && metadata_check(m, err, errlen))
		return -1;
	if (from && !json_is_string(from))
		return errf(err, errlen, "from_checkpoint: \"SANDBOX_ID/NAME\"");
	life->from_checkpoint = json_string_value(from);
	if (expect && (!from || !hex_is_sha256(json_string_value(expect))))
		return errf(err, errlen, "expect_digest: the 64 hex digits of a diff's digest, with from_checkpoint");
	life->expect_digest = json_string_value(expect);
	const char *spec_keys[] = { "runtime", "env", "limits", "network" };
	for (size_t i = 0; from && i < sizeof(spec_keys) / sizeof(spec_keys[0]); i++)
		if (json_object_get(body, spec_keys[i]))
			return errf(err, errlen, "%s: a fork runs its checkpoint's runtime, env, limits and network",
				    spec_keys[i]);
	json_t *s = json_deep_copy(body);
	if (!s)
		return errf(err, errlen, "out of memory");
	const char *own[] = { "timeout_s", "metadata", "on_timeout", "pause_ttl_s", "from_checkpoint", "count",
			      "expect_digest" };
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		json_object_del(s, own[i]);
	*spec = s;
	return 0;
}

bool sandbox_resumable_from(const struct store_sandbox *sb, char *out, size_t len)
{
	size_t p = strlen(VMRUND_SBX_RESUMABLE), n = strspn(sb->reason + (strncmp(sb->reason, VMRUND_SBX_RESUMABLE, p) ? 0 : p),
			   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-");
	if (strncmp(sb->reason, VMRUND_SBX_RESUMABLE, p) || !n || n > RUN_CHECKPOINT_NAME_MAX)
		return false;
	return snprintf(out, len, "%s/%.*s", sb->id, (int)n, sb->reason + p) < (int)len;
}

json_t *sandbox_view(const struct store_sandbox *sb, int64_t now_ms)
{
	json_t *req = sb->request ? json_loads(sb->request, 0, NULL) : NULL;
	const json_t *rt = json_object_get(req, "runtime"), *lim = json_object_get(req, "limits");
	json_t *limits = json_pack("{s:I,s:I}", "memory_mib", (json_int_t)sb->memory_mib, "disk_mib",
				   (json_int_t)sb->disk_mib);
	const json_t *cpus = json_object_get(lim, "cpus");
	if (json_is_integer(cpus))
		json_object_set(limits, "cpus", (json_t *)cpus);
	json_object_set_new(limits, "timeout_s", json_object_get(req, "timeout_s")
							 ? json_deep_copy(json_object_get(req, "timeout_s"))
							 : json_null());
	bool open = sb->state == SBS_STARTING || sb->state == SBS_RUNNING || sb->state == SBS_STOPPING;
	int64_t left = open && sb->timeout_at_ms > now_ms ? sb->timeout_at_ms - now_ms : 0;
	json_t *meta = json_object_get(req, "metadata");
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:f,s:o,s:o}", "id", sb->id, "state",
			      store_sbx_state_name(sb->state) ? store_sbx_state_name(sb->state) : "?", "reason",
			      sb->reason, "tenant", sb->tenant, "node", sb->node[0] ? json_string(sb->node) : json_null(),
			      "runtime",
			      json_is_string(rt) ? json_deep_copy(rt) : json_null(), "created_at", spool_iso_time(sb->created_ms),
			      "started_at", spool_iso_time(sb->started_ms), "ended_at", spool_iso_time(sb->ended_ms), "timeout_at",
			      spool_iso_time(sb->timeout_at_ms), "time_left_s", (double)left / 1000.0, "limits", limits, "metadata",
			      json_is_object(meta) ? json_incref(meta) : json_object());
	const json_t *ot = json_object_get(req, "on_timeout");
	json_object_set_new(o, "on_timeout", json_string(json_is_string(ot) ? json_string_value(ot) : "stop"));
	json_decref(req);
	char from[STORE_ID_LEN + RUN_CHECKPOINT_NAME_MAX + 2];
	if (sb->state == SBS_RESUMABLE && sandbox_resumable_from(sb, from, sizeof(from)))
		json_object_set_new(o, "resumable_from", json_string(from));
	return o;
}

/* ---- the table of this node's sandboxes (lock held) ----------------------------- */

int vmrund_sbx_get(struct vmrund *d, const char *tenant, const char *id, struct store_sandbox *out, char *err,
		   size_t errlen)
{
	pthread_mutex_lock(&d->lock);
	int found = d->store->ops->sbx_get(d->store, id, tenant, out, err, errlen);
	pthread_mutex_unlock(&d->lock);
	return found;
}

/* ---- a supervisor ----------------------------------------------------------------- */

/* ---- ends (lock held) ---------------------------------------------------------------- */

void vmrund_sbx_audit(struct vmrund *d, const struct store_sandbox *sb)
{
	if (!d->audit)
		return;
	json_t *line = vmrund_audit_begin(), *rq = sb->request ? json_loads(sb->request, 0, NULL) : NULL;
	json_object_set_new(line, "tenant", json_string(sb->tenant));
	json_object_set_new(line, "sandbox_id", json_string(sb->id));
	json_object_set_new(line, "state", json_string(store_sbx_state_name(sb->state) ?: "?"));
	json_object_set_new(line, "node", json_string(sb->node));
	/* what it was given, for whoever reviews: its image, sizes, egress, the platform's tags */
	const char *keys[] = { "runtime", "limits", "network", "metadata", "timeout_s" };
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (json_object_get(rq, keys[i]))
			json_object_set(line, keys[i], json_object_get(rq, keys[i]));
	json_object_set_new(line, "created_at", spool_iso_time(sb->created_ms));
	json_object_set_new(line, "ended_at", spool_iso_time(sb->ended_ms));
	json_object_set_new(line, "reason", json_string(sb->reason));
	json_decref(rq);
	vmrund_audit_end(d, line);
}

/* A sandbox that paused or resumed on its own (its time ran out with
 * on_timeout pause) into the store, as its supervisor's state file says.
 * Lock held. */
static void sync_paused(struct vmrund *d, struct vmrund_sbx *x, const char *dir)
{
	struct sbx_file_state st;
	if (sbx_read_state(dir, &st))
		return;
	bool paused = !strcmp(st.state, "paused"), running = !strcmp(st.state, "running");
	if ((!paused && !running) || x->paused == paused)
		return;
	char err[300];
	if (d->store->ops->sbx_set(d->store, x->id, d->node, paused ? SBS_PAUSED : SBS_RUNNING, 0, 0,
				   running ? st.timeout_at_ms : 0, paused ? st.reason : NULL, err, sizeof(err)) < 0)
		vmrund_store_failed(d, "recording a sandbox's pause", err);
	else
		x->paused = paused;
}

void vmrund_sbx_watch(struct vmrund *d)
{
	pthread_mutex_lock(&d->lock);
	for (unsigned i = 0; d->sbx && i < VMRUND_SBX_MAX; i++) {
		struct vmrund_sbx *x = &d->sbx[i];
		if (!x->used || x->busy)
			continue;
		char dir[PATH_MAX], id[STORE_ID_LEN + 1];
		struct sbx_file_state st;
		snprintf(id, sizeof(id), "%s", x->id);
		vmrund_sbx_dir(d, id, dir, sizeof(dir));
		if (!sbx_exited(x->pidfd, 0)) {
			sync_paused(d, x, dir);
			continue;
		}
		bool read = !sbx_read_state(dir, &st), said = read && st.reason[0];
		if (read && !strcmp(st.state, "paused") && sbx_is_parked(d, id))
			sbx_record_park(d, x, id, &st);
		else
			sbx_record_end(d, x, id, said ? st.reason : "its supervisor exited", read ? &st : NULL);
	}
	pthread_mutex_unlock(&d->lock);
}

/* ---- the API's calls ----------------------------------------------------------------- */

/* The spec's checks, as a run's (vmrund_submit): *size what it takes. */
static struct vmrund_answer admit(struct vmrund *d, unsigned tenant, const struct run_spec *rq,
				  struct sched_size *size)
{
	char why[sizeof(((struct vmrund_answer *)0)->message)];
	const struct runtime *rt = rq->runtime[0] ? runtime_pick(d->rts, d->nrts, rq->runtime) : NULL;
	if (rq->runtime[0] && !rt)
		return vmrund_answer_of(400, 0, "runtime: no runtime %s here", rq->runtime);
	struct run_effective e;
	run_spec_effective(rq, rt, &e);
	if (tenant_net_check(&d->ts.t[tenant], rq, why, sizeof(why)))
		return vmrund_answer_of(403, 0, "%s", why);
	if (run_spec_check(rq, &e, &d->pol, RUN_SPEC_WORDS_API, why, sizeof(why)))
		return vmrund_answer_of(400, 0, "%s", why);
	*size = (struct sched_size){ e.memory_mib, e.disk_mib };
	if (tenant_size_check(&d->ts.t[tenant], size->memory_mib, size->disk_mib, why, sizeof(why)) ||
	    sched_size_check(size, &d->size, why, sizeof(why)))
		return vmrund_answer_of(400, 0, "%s", why);
	return vmrund_answer_of(0, 0, "ok");
}

/* Store the new row and take a slot for it: the answer (status 0: go
 * on). Lock held. */
static struct vmrund_answer reserve(struct vmrund *d, unsigned tenant, struct store_sandbox *sb,
				    struct store_idem *idem, struct vmrund_sbx **slot)
{
	const struct tenant *t = &d->ts.t[tenant];
	struct sched_size left = vmrund_room_left(d);
	if (d->stopping)
		return vmrund_answer_of(503, 5, "vmrund is stopping");
	if (!(*slot = sbx_slot_new(d)))
		return vmrund_answer_of(503, 5, "this node holds %d sandboxes, its most", VMRUND_SBX_MAX);
	if (sb->memory_mib > left.memory_mib || sb->disk_mib > left.disk_mib)
		return vmrund_answer_of(503, 5, "this node has no room for it now (%llu MiB of memory and %llu MiB of disk free)",
					(unsigned long long)left.memory_mib, (unsigned long long)left.disk_mib);
	char err[300];
	int v = d->store->ops->sbx_create(d->store, sb, idem, t, err, sizeof(err));
	if (v < 0)
		return vmrund_answer_of(503, 2, "the store: %s", err);
	if (v == STORE_REPLAYED)
		return vmrund_answer_of(200, 0, "replayed");
	if (v == STORE_KEY_REUSED)
		return vmrund_answer_of(422, 0, "Idempotency-Key %s was used within a day for sandbox %s with another body",
					idem->key, idem->id);
	if (v == STORE_SBX_OVER_COUNT)
		return vmrund_answer_of(429, 5, "tenant %s has %u sandboxes open, its limit (sandboxes)", t->name,
					t->sandboxes);
	if (v == STORE_SBX_OVER_MEMORY)
		return vmrund_answer_of(429, 5, "tenant %s's open sandboxes would take more than %llu MiB of memory "
					"(sandbox_memory_mib)", t->name, (unsigned long long)t->sandbox_memory_mib);
	if (v == STORE_SBX_OVER_DISK)
		return vmrund_answer_of(429, 5, "tenant %s's open sandboxes would take more than %llu MiB of disk "
					"(sandbox_disk_mib)", t->name, (unsigned long long)t->sandbox_disk_mib);
	**slot = (struct vmrund_sbx){ .used = true, .busy = true, .pidfd = -1,
				      .size = { sb->memory_mib, sb->disk_mib } };
	snprintf((*slot)->id, sizeof((*slot)->id), "%s", sb->id);
	return vmrund_answer_of(0, 0, "ok");
}

/* A fork's: its checkpoint "ID/NAME" (vmrund_checkpoint_of), whose
 * sandbox's spec (runtime, env, limits, network) replaces *spec, and
 * whose directory goes into dir. The answer's status 0, or why not. */
static struct vmrund_answer fork_of(struct vmrund *d, unsigned tenant, const char *from, json_t **spec, char *dir,
				    size_t len)
{
	json_t *rq;
	struct vmrund_answer a = vmrund_checkpoint_of(d, tenant, from, dir, len, &rq);
	if (a.status)
		return a;
	if (!json_is_object(rq)) {
		json_decref(rq);
		return vmrund_answer_of(500, 0, "%s: its sandbox's request is not an object", from);
	}
	const char *own[] = { "timeout_s", "metadata", "on_timeout", "pause_ttl_s" };
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		json_object_del(rq, own[i]);
	json_decref(*spec);
	*spec = rq;
	return a;
}

struct vmrund_answer vmrund_sbx_create(struct vmrund *d, unsigned tenant, const json_t *body,
				       struct store_idem *idem, char id[SCHED_ID_MAX])
{
	char why[sizeof(((struct vmrund_answer *)0)->message)];
	const struct tenant *t = &d->ts.t[tenant];
	json_t *spec = NULL;
	struct sbx_life life;
	struct run_spec rq = { 0 };
	struct store_sandbox sb = { .state = SBS_STARTING };
	struct vmrund_answer a;
	char from[PATH_MAX] = "";
	if (sandbox_body_split(body, t->max_sandbox_timeout_s, t->max_pause_ttl_s, &spec, &life, why, sizeof(why))) {
		a = vmrund_answer_of(400, 0, "%s", why);
		goto out;
	}
	if (life.from_checkpoint && (a = fork_of(d, tenant, life.from_checkpoint, &spec, from, sizeof(from))).status)
		goto out;
	if (life.expect_digest && (a = vmrund_checkpoint_expect(from, life.expect_digest)).status)
		goto out;
	if (run_spec_sandbox_from_json(spec, &rq, why, sizeof(why))) {
		a = vmrund_answer_of(400, 0, "%s", why);
		goto out;
	}
	struct sched_size size;
	if ((a = admit(d, tenant, &rq, &size)).status)
		goto out;
	/* the sizes admitted are the sizes the supervisor plans with */
	json_t *lim = json_object_get(spec, "limits");
	if (!lim)
		json_object_set_new(spec, "limits", lim = json_object());
	json_object_set_new(lim, "memory_mib", json_integer((json_int_t)size.memory_mib));
	json_object_set_new(lim, "disk_mib", json_integer((json_int_t)size.disk_mib));
	json_t *row = json_deep_copy(spec);
	json_object_set_new(row, "timeout_s", json_real(life.timeout_s));
	json_object_set_new(row, "on_timeout", json_string(life.on_timeout_pause ? "pause" : "stop"));
	json_object_set_new(row, "pause_ttl_s", json_real(life.pause_ttl_s));
	if (json_object_get(body, "metadata"))
		json_object_set(row, "metadata", json_object_get(body, "metadata"));
	sb.request = json_dumps(row, JSON_COMPACT);
	json_decref(row);
	vmrund_new_id(sb.id);
	snprintf(sb.tenant, sizeof(sb.tenant), "%s", t->name);
	snprintf(sb.node, sizeof(sb.node), "%s", d->node);
	sb.created_ms = clock_wall_ms();
	sb.memory_mib = size.memory_mib;
	sb.disk_mib = size.disk_mib;
	struct vmrund_sbx *x = NULL;
	pthread_mutex_lock(&d->lock);
	a = sb.request ? reserve(d, tenant, &sb, idem, &x) : vmrund_answer_of(500, 0, "out of memory");
	pthread_mutex_unlock(&d->lock);
	if (a.status == 200)
		snprintf(id, SCHED_ID_MAX, "%s", idem->id);
	if (a.status)
		goto out;
	snprintf(id, SCHED_ID_MAX, "%s", sb.id);
	struct sbx_from sf = { .checkpoint = from[0] ? from : NULL };
	bool ok = sbx_launch(d, x, t, spec, &life, &sf, clock_wall_ms(), NULL, why, sizeof(why));
	if (ok) {
		x->busy = false;
		a = vmrund_answer_of(201, 0, "running");
		vmrund_say("sandbox %s of tenant %s running", sb.id, t->name);
	} else {
		a = vmrund_answer_of(500, 0, "the sandbox did not start: %s", why);
		if (!sbx_record_end(d, x, sb.id, why, NULL))
			x->busy = false;   /* the watch records it once the store is back */
	}
	pthread_mutex_unlock(&d->lock);
out:
	json_decref(spec);
	run_spec_free(&rq);
	free(sb.request);
	return a;
}

/* This node's slot of tenant's sandbox id, taken (busy) for a call that
 * changes it: the answer (status 0: go on, *x set). Lock held. */
static struct vmrund_answer take(struct vmrund *d, unsigned tenant, const char *id, struct store_sandbox *sb,
				 struct vmrund_sbx **x)
{
	char err[300];
	int found = d->store->ops->sbx_get(d->store, id, d->ts.t[tenant].name, sb, err, sizeof(err));
	if (found < 0)
		return vmrund_answer_of(503, 2, "the store: %s", err);
	if (!found)
		return vmrund_answer_of(404, 0, "no sandbox %s", id);
	if (sb->state == SBS_STOPPED || sb->state == SBS_LOST || sb->state == SBS_FAILED)
		return vmrund_answer_of(409, 0, "sandbox %s is %s already", id, store_sbx_state_name(sb->state));
	if (!(*x = sbx_slot_of(d, id)))
		return vmrund_answer_of(409, 0, "sandbox %s is held by node %s", id, sb->node);
	if ((*x)->busy)
		return vmrund_answer_of(409, 1, "sandbox %s is starting or stopping", id);
	(*x)->busy = true;
	return vmrund_answer_of(0, 0, "ok");
}

/* sbx_parked_row, once the loop's look has recorded a supervisor that
 * parked its VM and exited; one that has parked and is still ending (its
 * VM and jail going) is waited for, 10 s at most. */
static int parked_now(struct vmrund *d, unsigned tenant, const char *id, struct store_sandbox *sb,
		      struct vmrund_answer *a)
{
	char dir[PATH_MAX];
	struct sbx_file_state st;
	vmrund_sbx_dir(d, id, dir, sizeof(dir));
	for (int i = 0;; i++) {
		vmrund_sbx_watch(d);
		int p = sbx_parked_row(d, tenant, id, sb, a);
		if (p || i == 100 || sbx_read_state(dir, &st) || strcmp(st.state, "paused") || !sbx_is_parked(d, id))
			return p;
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

struct vmrund_answer vmrund_sbx_delete(struct vmrund *d, unsigned tenant, const char *id)
{
	struct store_sandbox sb;
	struct vmrund_sbx *x = NULL;
	char err[300], dir[PATH_MAX];
	struct vmrund_answer a;
	int p = parked_now(d, tenant, id, &sb, &a);
	if (p < 0)
		return a;
	if (p) {
		store_sandbox_free(&sb);
		return sbx_delete_parked(d, id);
	}
	pthread_mutex_lock(&d->lock);
	a = take(d, tenant, id, &sb, &x);
	if (!a.status && d->store->ops->sbx_set(d->store, id, d->node, SBS_STOPPING, 0, 0, 0, NULL, err,
						sizeof(err)) < 0) {
		x->busy = false;
		a = vmrund_answer_of(503, 2, "the store: %s", err);
	}
	store_sandbox_free(&sb);
	pthread_mutex_unlock(&d->lock);
	if (a.status)
		return a;
	/* the supervisor destroys the VM and exits; SIGTERM if its API is away */
	vmrund_sbx_dir(d, id, dir, sizeof(dir));
	unsigned status;
	char *out = NULL;
	if (sbxc_call(dir, "DELETE", "/", NULL, SBX_CALL_MS, 65536, &status, &out) < 0)
		syscall(SYS_pidfd_send_signal, x->pidfd, SIGTERM, NULL, 0);
	free(out);
	sbx_reap(x, SBX_EXIT_MS);
	pthread_mutex_lock(&d->lock);
	if (sbx_record_end(d, x, id, "deleted", NULL))
		a = vmrund_answer_of(200, 0, "deleted");
	else {
		x->busy = false;
		a = vmrund_answer_of(503, 2, "its VM is gone, but the store could not record it yet");
	}
	pthread_mutex_unlock(&d->lock);
	return a;
}

/* A POST of body to path of the supervisor of tenant's sandbox id, one
 * that changes it, answered within timeout_ms: once it answers 200, the
 * store has it in state (with its timeout_at from its state file when
 * running); another answer is passed on with its message. */
static struct vmrund_answer post_change(struct vmrund *d, unsigned tenant, const char *id, const char *path,
					const char *body, int timeout_ms, enum sbx_row_state state)
{
	struct store_sandbox sb;
	struct vmrund_sbx *x = NULL;
	pthread_mutex_lock(&d->lock);
	struct vmrund_answer a = take(d, tenant, id, &sb, &x);
	store_sandbox_free(&sb);
	pthread_mutex_unlock(&d->lock);
	if (a.status)
		return a;
	char dir[PATH_MAX], err[300];
	vmrund_sbx_dir(d, id, dir, sizeof(dir));
	unsigned status = 0;
	char *out = NULL;
	struct sbx_file_state st;
	int rc = sbxc_call(dir, "POST", path, body, timeout_ms, 65536, &status, &out);
	json_t *said = rc == 0 ? json_loads(out, 0, NULL) : NULL;
	free(out);
	bool running = state == SBS_RUNNING;
	pthread_mutex_lock(&d->lock);
	x->busy = false;
	if (rc < 0)
		a = vmrund_answer_of(502, 0, "sandbox %s: its supervisor did not answer", id);
	else if (status != 200)
		a = vmrund_answer_of(status, 0, "%s", json_string_value(json_object_get(said, "message")) ?: "failed");
	else if (sbx_read_state(dir, &st))
		a = vmrund_answer_of(500, 0, "sandbox %s: its state cannot be read", id);
	else if (d->store->ops->sbx_set(d->store, id, d->node, state, 0, 0, running ? st.timeout_at_ms : 0, NULL, err,
					sizeof(err)) < 0)
		a = vmrund_answer_of(503, 2, "the store: %s", err);
	else {
		x->paused = state == SBS_PAUSED;
		a = vmrund_answer_of(200, 0, "ok");
	}
	pthread_mutex_unlock(&d->lock);
	json_decref(said);
	return a;
}

struct vmrund_answer vmrund_sbx_timeout(struct vmrund *d, unsigned tenant, const char *id, const json_t *body)
{
	const struct tenant *t = &d->ts.t[tenant];
	const json_t *v = json_object_get(body, "timeout_s");
	double s = json_number_value(v);
	if (!json_is_number(v) || !(s > 0) || s > (double)t->max_sandbox_timeout_s)
		return vmrund_answer_of(400, 0, "timeout_s: seconds, more than 0 and at most %u (the tenant's "
					"max_sandbox_timeout_s)", t->max_sandbox_timeout_s);
	char text[64];
	snprintf(text, sizeof(text), "{\"timeout_s\":%.3f}", s);
	return post_change(d, tenant, id, "/timeout", text, SBX_CALL_MS, SBS_RUNNING);
}

struct vmrund_answer vmrund_sbx_pause(struct vmrund *d, unsigned tenant, const char *id, const json_t *body,
				      bool resume)
{
	struct store_sandbox sb;
	struct vmrund_answer a;
	int p = parked_now(d, tenant, id, &sb, &a);
	if (p < 0)
		return a;
	if (p) {
		a = resume ? sbx_unpark_row(d, tenant, &sb, body) : vmrund_answer_of(409, 0, "sandbox %s is paused already", id);
		store_sandbox_free(&sb);
		return a;
	}
	char *text = json_dumps(body, JSON_COMPACT);
	if (!text)
		return vmrund_answer_of(500, 0, "out of memory");
	a = post_change(d, tenant, id, resume ? "/resume" : "/pause", text, SBX_PAUSE_CALL_MS,
					     resume ? SBS_RUNNING : SBS_PAUSED);
	free(text);
	return a;
}

/* ---- start and stop of vmrund ------------------------------------------------------- */

struct adopt_ctx {
	struct vmrund *d;
	unsigned n, ended;
};

/* One of this node's open sandboxes, at start: adopted when its
 * supervisor still runs it, else ended. */
static int adopt_one(void *ctx, const struct store_sandbox *sb)
{
	struct adopt_ctx *a = ctx;
	struct vmrund *d = a->d;
	char dir[PATH_MAX];
	vmrund_sbx_dir(d, sb->id, dir, sizeof(dir));
	struct sbx_file_state st;
	int fd = -1;
	struct vmrund_sbx *x = sbx_slot_new(d);
	bool live = !sbx_read_state(dir, &st) && strcmp(st.state, "stopped") && x && (fd = sbx_supervisor_pidfd(d, st.pid, dir)) >= 0;
	if (live) {
		*x = (struct vmrund_sbx){ .used = true, .pid = st.pid, .pidfd = fd,
					  .size = { sb->memory_mib, sb->disk_mib }, .paused = sb->state == SBS_PAUSED };
		snprintf(x->id, sizeof(x->id), "%s", sb->id);
		a->n++;
		/* a create that was under way when vmrund stopped */
		if (sb->state == SBS_STARTING && !strcmp(st.state, "running"))
			(void)d->store->ops->sbx_set(d->store, sb->id, d->node, SBS_RUNNING, clock_wall_ms(), 0,
						     st.timeout_at_ms, NULL, (char[300]){ 0 }, 300);
		return 0;
	}
	/* it parked its VM while vmrund was away (its time ran out: on_timeout pause) */
	if (!sbx_read_state(dir, &st) && !strcmp(st.state, "paused") && sbx_is_parked(d, sb->id)) {
		sbx_record_park(d, NULL, sb->id, &st);
		return 0;
	}
	a->ended++;
	char reason[300];
	snprintf(reason, sizeof(reason), "%s", st.reason[0] ? st.reason : "its supervisor was gone when vmrund started");
	sbx_record_end(d, NULL, sb->id, reason, NULL);
	return 0;
}

/* Directories no open sandbox of this node owns: their supervisors are
 * stopped, the directories go. */
static void sweep_dirs(struct vmrund *d)
{
	char root[PATH_MAX];
	snprintf(root, sizeof(root), "%.4000s/" VMRUND_SBX_DIR, d->cfg.run_dir);
	DIR *dir = opendir(root);
	for (struct dirent *e; dir && (e = readdir(dir));) {
		if (e->d_name[0] == '.' || sbx_slot_of(d, e->d_name))
			continue;
		char path[PATH_MAX];
		struct sbx_file_state st;
		vmrund_sbx_dir(d, e->d_name, path, sizeof(path));
		int fd = sbx_read_state(path, &st) ? -1 : sbx_supervisor_pidfd(d, st.pid, path);
		if (fd >= 0) {
			struct vmrund_sbx x = { .pidfd = fd };
			syscall(SYS_pidfd_send_signal, fd, SIGTERM, NULL, 0);
			sbx_reap(&x, SBX_EXIT_MS);
			close(fd);
		}
		spool_clean(path, false);
	}
	if (dir)
		closedir(dir);
}

int vmrund_sbx_open(struct vmrund *d, char *err, size_t errlen)
{
	if (!(d->sbx = calloc(VMRUND_SBX_MAX, sizeof(*d->sbx))))
		return errf(err, errlen, "out of memory");
	for (unsigned i = 0; i < VMRUND_SBX_MAX; i++)
		d->sbx[i].pidfd = -1;
	/* the operator's mount: made here, it would be this node's alone */
	struct stat sd;
	if (d->cfg.snapshot_dir[0] && (stat(d->cfg.snapshot_dir, &sd) < 0 || !S_ISDIR(sd.st_mode)))
		return errf(err, errlen, "snapshot_dir %s: %s", d->cfg.snapshot_dir, strerror(errno ? errno : ENOTDIR));
	struct adopt_ctx a = { .d = d };
	if (d->store->ops->sbx_each(d->store, NULL, d->node, true, adopt_one, &a, err, errlen) < 0)
		return -1;
	if (a.n || a.ended)
		vmrund_say("sandboxes of this node's last life: %u adopted, %u ended", a.n, a.ended);
	sweep_dirs(d);
	return 0;
}

void vmrund_sbx_close(struct vmrund *d)
{
	for (unsigned i = 0; d->sbx && i < VMRUND_SBX_MAX; i++)
		if (d->sbx[i].pidfd >= 0)
			close(d->sbx[i].pidfd);
	free(d->sbx);
	d->sbx = NULL;
}
