/* Sandboxes on no node (sandbox_node.h, docs/sandboxes.md "Resume on
 * any node"): parked in the snapshot dir at a pause, or resumable from a
 * checkpoint there after their node died; claimed by the node that is
 * asked to resume them, deleted, or ended past their pause_ttl_s. */
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
#include <limits.h>

#include "clock.h"
#include "errmsg.h"
#include "run_pause.h"
#include "sandbox_http.h"
#include "snapshot_cache.h"
#include "spool.h"
#include "hex.h"
#include "tree.h"
#include "../../vmm/snapshot.h"

bool sbx_is_parked(const struct vmrund *d, const char *id)
{
	char dir[PATH_MAX], sum[65];
	vmrund_sbx_shared(d, id, dir, sizeof(dir));
	size_t n = strlen(dir);
	if (!n || n + sizeof("/" RUN_PARKED_DIR "/" RUN_PARKED_SUM) > sizeof(dir))
		return false;
	memcpy(dir + n, "/" RUN_PARKED_DIR "/" RUN_PARKED_SUM, sizeof("/" RUN_PARKED_DIR "/" RUN_PARKED_SUM));
	return sha256_read_sum(dir, sum) == 0;
}

bool sbx_record_park(struct vmrund *d, struct vmrund_sbx *x, const char *id, const struct sbx_file_state *st)
{
	char err[300], dir[PATH_MAX];
	int64_t until = st->timeout_at_ms > 0 ? st->timeout_at_ms : INT64_MAX;
	/* only while the row is this node's: one that another node took
	 * since (its lease ran out) is that node's now */
	int n = d->store->ops->sbx_set(d->store, id, d->node, SBS_PAUSED, 0, 0, until, NULL, err, sizeof(err));
	if (n < 0 || (n == 1 && (n = d->store->ops->sbx_move(d->store, id, d->node, SBS_PAUSED, "", SBS_PAUSED, 0, st->reason,
								 err, sizeof(err))) < 0)) {
		vmrund_store_failed(d, "recording a parked sandbox", err);
		return false;
	}
	vmrund_store_ok(d);
	if (n)
		vmrund_say("sandbox %s parked: any node may resume it", id);
	vmrund_sbx_dir(d, id, dir, sizeof(dir));
	spool_clean(dir, false);
	if (x)
		sbx_slot_free(x);
	pthread_cond_broadcast(&d->changed);
	return true;
}

/* A row's life (its request's timeout_s, on_timeout, pause_ttl_s) into
 * *life, and *spec the supervisor's part of it (a new reference; NULL
 * when the request is not an object). */
static void row_life(const struct store_sandbox *sb, struct sbx_life *life, json_t **spec)
{
	json_t *rq = sb->request ? json_loads(sb->request, 0, NULL) : NULL;
	*life = (struct sbx_life){ .timeout_s = json_number_value(json_object_get(rq, "timeout_s")),
				   .pause_ttl_s = json_number_value(json_object_get(rq, "pause_ttl_s")) };
	const char *ot = json_string_value(json_object_get(rq, "on_timeout"));
	life->on_timeout_pause = ot && !strcmp(ot, "pause");
	if (!(life->timeout_s > 0))
		life->timeout_s = VMRUND_SBX_TIMEOUT_S;
	const char *own[] = { "timeout_s", "metadata", "on_timeout", "pause_ttl_s" };
	for (size_t i = 0; json_is_object(rq) && i < sizeof(own) / sizeof(own[0]); i++)
		json_object_del(rq, own[i]);
	*spec = json_is_object(rq) ? rq : NULL;
	if (!*spec)
		json_decref(rq);
}

/* Resume tenant's sandbox id, parked in the snapshot dir (sb, its row):
 * claimed for this node (of two nodes one wins: 409 for the other), its
 * supervisor started from the parked VM, and running in the store once
 * it answers; a parked VM that does not start again leaves the sandbox
 * failed with why (nothing half-restored runs). */
struct vmrund_answer sbx_unpark_row(struct vmrund *d, unsigned tenant, const struct store_sandbox *sb, const json_t *body)
{
	const struct tenant *t = &d->ts.t[tenant];
	const json_t *v = json_object_get(body, "timeout_s");
	struct sbx_from from = { .resume_timeout_s = json_number_value(v) };
	if (v && (!json_is_number(v) || !(from.resume_timeout_s > 0) || from.resume_timeout_s > t->max_sandbox_timeout_s))
		return vmrund_answer_of(400, 0, "timeout_s: seconds, more than 0 and at most %u (the tenant's "
					"max_sandbox_timeout_s)", t->max_sandbox_timeout_s);
	char why[sizeof(((struct vmrund_answer *)0)->message)], err[300], shared[PATH_MAX], paused[PATH_MAX + 16];
	struct sbx_life life;
	json_t *spec;
	row_life(sb, &life, &spec);
	if (!spec)
		return vmrund_answer_of(500, 0, "sandbox %s: its request cannot be read", sb->id);
	vmrund_sbx_shared(d, sb->id, shared, sizeof(shared));
	snprintf(paused, sizeof(paused), "%s/" RUN_PARKED_DIR, shared);
	char ref[STORE_ID_LEN + RUN_CHECKPOINT_NAME_MAX + 2], checkpoint[PATH_MAX], cid[STORE_ID_LEN + 1];
	const char *name;
	bool resumable = sb->state == SBS_RESUMABLE;
	if (resumable && (!sandbox_resumable_from(sb, ref, sizeof(ref)) || !run_checkpoint_ref(ref, cid, &name) ||
			  vmrund_checkpoint_dir(d, sb->id, name, checkpoint, sizeof(checkpoint)))) {
		json_decref(spec);
		return vmrund_answer_of(500, 0, "sandbox %s: its reason names no checkpoint", sb->id);
	}
	if (resumable)   /* its own checkpoint, as a fork starts from one: its whole life again */
		from = (struct sbx_from){ .checkpoint = checkpoint };
	else
		from.paused = paused;
	struct vmrund_sbx *x = NULL;
	struct vmrund_answer a = vmrund_answer_of(0, 0, "ok");
	pthread_mutex_lock(&d->lock);
	struct sched_size left = vmrund_room_left(d);
	int moved = 0;
	if (d->stopping)
		a = vmrund_answer_of(503, 5, "vmrund is stopping");
	else if (!(x = sbx_slot_new(d)))
		a = vmrund_answer_of(503, 5, "this node holds %d sandboxes, its most", VMRUND_SBX_MAX);
	else if (sb->memory_mib > left.memory_mib || sb->disk_mib > left.disk_mib)
		a = vmrund_answer_of(503, 5, "this node has no room for it now (%llu MiB of memory and %llu MiB of disk free)",
				     (unsigned long long)left.memory_mib, (unsigned long long)left.disk_mib);
	else if ((moved = d->store->ops->sbx_move(d->store, sb->id, "", sb->state, d->node, SBS_PAUSED, 0, NULL, err,
						  sizeof(err))) < 0)
		a = vmrund_answer_of(503, 2, "the store: %s", err);
	else if (!moved)
		a = vmrund_answer_of(409, 0, "sandbox %s is being resumed by another node", sb->id);
	if (!a.status) {
		*x = (struct vmrund_sbx){ .used = true, .busy = true, .pidfd = -1, .paused = true,
					  .size = { sb->memory_mib, sb->disk_mib } };
		snprintf(x->id, sizeof(x->id), "%s", sb->id);
	}
	pthread_mutex_unlock(&d->lock);
	if (a.status) {
		json_decref(spec);
		return a;
	}
	char sum[65] = "", now[65] = "", sumfile[PATH_MAX + 64], dir[PATH_MAX];
	snprintf(sumfile, sizeof(sumfile), "%s/" RUN_PARKED_SUM, paused);
	if (!resumable)
		(void)sha256_read_sum(sumfile, sum);
	bool ok = sbx_launch(d, x, t, spec, &life, &from, 0, "", why, sizeof(why)), clean = false;
	json_decref(spec);
	struct sbx_file_state st;
	vmrund_sbx_dir(d, sb->id, dir, sizeof(dir));
	if (ok) {
		x->busy = false;
		x->paused = false;
		/* the VM runs on its own copies now; a park it made since is not this one */
		clean = !resumable && sha256_read_sum(sumfile, now) == 0 && !strcmp(now, sum);
		vmrund_say("sandbox %s of tenant %s resumed on this node from %s", sb->id, t->name,
			   resumable ? ref : "where it was parked");
		a = vmrund_answer_of(200, 0, "running");
	} else if (!sbx_read_state(dir, &st) && !strcmp(st.state, "failed")) {
		/* what was kept was refused: nothing of it runs, anywhere */
		a = vmrund_answer_of(500, 0, "not resumed: %s", why);
		if (!sbx_record_end(d, x, sb->id, why, &st))
			x->busy = false;
	} else {
		/* this node could not (no supervisor, no time): another may */
		int n = d->store->ops->sbx_move(d->store, sb->id, d->node, SBS_PAUSED, "", sb->state, 0, NULL, err, sizeof(err));
		if (n < 0)
			vmrund_store_failed(d, "giving a sandbox back to the cluster", err);
		spool_clean(dir, false);
		sbx_slot_free(x);
		a = vmrund_answer_of(503, 5, "not resumed on node %s: %s; it stays %s on no node, for any node to resume",
				     d->node, why, resumable ? "resumable" : "parked");
	}
	pthread_mutex_unlock(&d->lock);
	if (clean)
		spool_clean(paused, false);
	return a;
}

/* The audit log's line for sandbox id, which just ended. Lock held. */
static void audit(struct vmrund *d, const char *id)
{
	char err[300];
	struct store_sandbox sb;
	if (d->audit && d->store->ops->sbx_get(d->store, id, NULL, &sb, err, sizeof(err)) == 1) {
		vmrund_sbx_audit(d, &sb);
		store_sandbox_free(&sb);
	}
}

/* Whether the row is of a sandbox on no node: parked in the snapshot dir,
 * or resumable from a checkpoint there. */
static bool parked(const struct store_sandbox *sb)
{
	return (sb->state == SBS_PAUSED || sb->state == SBS_RESUMABLE) && !sb->node[0];
}

/* DELETE of a parked sandbox: stopped in the store (on no node: of two
 * deletes, or a delete and a resume, one wins), its directory in the
 * snapshot dir removed. */
struct vmrund_answer sbx_delete_parked(struct vmrund *d, const char *id)
{
	char err[300];
	pthread_mutex_lock(&d->lock);
	int n = d->store->ops->sbx_set(d->store, id, "", SBS_STOPPED, 0, clock_wall_ms(), 0, "deleted", err, sizeof(err));
	if (n == 1) {
		sbx_discard_shared(d, id);
		vmrund_say("sandbox %s stopped: deleted while parked", id);
		audit(d, id);
	}
	pthread_mutex_unlock(&d->lock);
	if (n < 0)
		return vmrund_answer_of(503, 2, "the store: %s", err);
	if (!n)
		return vmrund_answer_of(409, 1, "sandbox %s is being resumed or deleted meanwhile", id);
	return vmrund_answer_of(200, 0, "deleted");
}

struct expire_ctx {
	struct vmrund *d;
	int64_t now_ms;
};

static int expire_one(void *ctx, const struct store_sandbox *sb)
{
	struct expire_ctx *e = ctx;
	struct vmrund *d = e->d;
	char err[300];
	if (sb->state != SBS_PAUSED || sb->node[0] || sb->timeout_at_ms <= 0 || sb->timeout_at_ms > e->now_ms)
		return 0;   /* a resumable one waits for a resume or a delete */
	const char *why = "it stayed paused longer than its pause_ttl_s";
	int n = d->store->ops->sbx_set(d->store, sb->id, "", SBS_STOPPED, 0, e->now_ms, 0, why, err, sizeof(err));
	if (n < 0)
		vmrund_store_failed(d, "ending a parked sandbox", err);
	if (n != 1)
		return 0;   /* another node did, or resumed it first */
	sbx_discard_shared(d, sb->id);
	vmrund_say("sandbox %s stopped: %s", sb->id, why);
	audit(d, sb->id);
	return 0;
}

/* Whether base (SNAPSHOT_DIR/bases/SUM) is no parked VM's any more: its
 * files have no link but their own, and none came or went for
 * SBX_BASE_GRACE_S (a link's change sets st_ctime), so that a park that
 * has just found it there links it first. */
#define SBX_BASE_GRACE_S 600
static bool base_unused(int dirfd, const char *base, time_t now)
{
	const char *names[] = { SNAP_STATE_FILE, SNAP_MEMORY_FILE };
	for (size_t i = 0; i < 2; i++) {
		char p[NAME_MAX + 16];
		struct stat st;
		snprintf(p, sizeof(p), "%s/%s", base, names[i]);
		if (fstatat(dirfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_nlink > 1 || now - st.st_ctime < SBX_BASE_GRACE_S))
			return false;
	}
	return true;
}

void vmrund_sbx_expire_parked(struct vmrund *d)
{
	char err[300];
	struct expire_ctx e = { d, clock_wall_ms() };
	if (d->cfg.snapshot_dir[0] && d->store->ops->sbx_each(d->store, NULL, "", true, expire_one, &e, err, sizeof(err)) < 0)
		vmrund_store_failed(d, "looking at parked sandboxes", err);
}

/* A base, or one a park left half made (".SUM.XXXXXX"), that no parked
 * VM needs. */
static bool base_gone(int dirfd, const char *name, time_t now)
{
	struct stat st;
	if (name[0] == '.')
		return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && now - st.st_mtime > SBX_BASE_GRACE_S;
	return hex_is_sha256(name) && base_unused(dirfd, name, now);
}

/* A sandbox's directory that sbx_discard_shared set aside. */
static bool sandbox_gone(int dirfd, const char *name, time_t now)
{
	(void)dirfd;
	(void)now;
	return !strncmp(name, SBX_GONE, strlen(SBX_GONE));
}

/* The entries of SNAPSHOT_DIR/sub that gone says go, removed. */
static void sweep(struct vmrund *d, const char *sub, bool (*gone)(int dirfd, const char *name, time_t now))
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/%s", d->cfg.snapshot_dir, sub) >= (int)sizeof(path))
		return;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = fd < 0 ? NULL : fdopendir(fd);
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return;
	}
	time_t now = time(NULL);
	for (struct dirent *e; (e = readdir(dir));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && gone(fd, e->d_name, now))
			tree_remove_at(fd, e->d_name, 6);
	closedir(dir);
}

void vmrund_sbx_sweep(struct vmrund *d)
{
	if (!d->cfg.snapshot_dir[0])
		return;
	sweep(d, VMRUND_SBX_DIR, sandbox_gone);
	sweep(d, RUN_BASES_DIR, base_gone);
}

void vmrund_sbx_lost(struct vmrund *d, const struct store_sandbox *sb)
{
	char name[RUN_CHECKPOINT_NAME_MAX + 1], reason[sizeof(sb->reason)], err[300], dir[PATH_MAX];
	vmrund_sbx_shared(d, sb->id, dir, sizeof(dir));
	if (!dir[0])
		return;
	if (sbx_is_parked(d, sb->id)) {   /* its node died before it recorded the park */
		struct sbx_life life;
		json_t *spec;
		row_life(sb, &life, &spec);
		json_decref(spec);
		int64_t until = life.pause_ttl_s > 0 ? clock_wall_ms() + (int64_t)(life.pause_ttl_s * 1000) : INT64_MAX;
		/* with its pause's end in the same statement: the first node's
		 * look at parked ones would find the lost row's past deadline */
		int n = d->store->ops->sbx_move(d->store, sb->id, sb->node, SBS_LOST, "", SBS_PAUSED, until,
						"parked: any node of the cluster may resume it", err, sizeof(err));
		if (n < 0)
			vmrund_store_failed(d, "keeping a lost node's parked sandbox", err);
		else if (n)
			vmrund_say("sandbox %s of a lost node was parked: any node may resume it", sb->id);
		return;
	}
	if (!vmrund_checkpoint_newest(d, sb->id, name)) {
		sbx_discard_shared(d, sb->id);   /* nothing of it can go on */
		return;
	}
	snprintf(reason, sizeof(reason), VMRUND_SBX_RESUMABLE "%s (%.400s)", name, sb->reason);
	int n = d->store->ops->sbx_move(d->store, sb->id, sb->node, SBS_LOST, "", SBS_RESUMABLE, 0, reason, err, sizeof(err));
	if (n < 0)
		vmrund_store_failed(d, "making a lost sandbox resumable", err);
	else if (n)
		vmrund_say("sandbox %s is resumable from its checkpoint %s", sb->id, name);
}

/* Tenant's sandbox id's row, when it is parked: 1 (free *sb), 0 not, or
 * -1 with the answer in *a. */
int sbx_parked_row(struct vmrund *d, unsigned tenant, const char *id, struct store_sandbox *sb,
		      struct vmrund_answer *a)
{
	char err[300];
	pthread_mutex_lock(&d->lock);
	int found = d->store->ops->sbx_get(d->store, id, d->ts.t[tenant].name, sb, err, sizeof(err));
	pthread_mutex_unlock(&d->lock);
	if (found < 0) {
		*a = vmrund_answer_of(503, 2, "the store: %s", err);
		return -1;
	}
	if (found && parked(sb))
		return 1;
	if (found)
		store_sandbox_free(sb);
	return 0;
}
