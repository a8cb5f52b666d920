/* This node's sandboxes and their supervisors (sandbox_node.h): the
 * table, a supervisor's start, its state file, its end. */
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

#include <sys/random.h>

#include "clock.h"
#include "hex.h"
#include "errmsg.h"
#include "run_pause.h"
#include "sandbox_http.h"
#include "snapshot_cache.h"
#include "spool.h"

void vmrund_sbx_dir(const struct vmrund *d, const char *id, char *buf, size_t len)
{
	if (snprintf(buf, len, "%s/" VMRUND_SBX_DIR "/%s", d->cfg.run_dir, id) >= (int)len)
		buf[0] = '\0';
}

void vmrund_sbx_shared(const struct vmrund *d, const char *id, char *buf, size_t len)
{
	if (!d->cfg.snapshot_dir[0] ||
	    snprintf(buf, len, "%s/" VMRUND_SBX_DIR "/%s", d->cfg.snapshot_dir, id) >= (int)len)
		buf[0] = '\0';
}

struct vmrund_sbx *sbx_slot_of(struct vmrund *d, const char *id)
{
	for (unsigned i = 0; d->sbx && i < VMRUND_SBX_MAX; i++)
		if (d->sbx[i].used && !strcmp(d->sbx[i].id, id))
			return &d->sbx[i];
	return NULL;
}

struct vmrund_sbx *sbx_slot_new(struct vmrund *d)
{
	for (unsigned i = 0; i < VMRUND_SBX_MAX; i++)
		if (!d->sbx[i].used)
			return &d->sbx[i];
	return NULL;
}

void sbx_slot_free(struct vmrund_sbx *x)
{
	if (x->pidfd >= 0)
		close(x->pidfd);
	*x = (struct vmrund_sbx){ .pidfd = -1 };
}

struct sched_size vmrund_sbx_size(const struct vmrund *d)
{
	struct sched_size s = { 0, 0 };
	for (unsigned i = 0; d->sbx && i < VMRUND_SBX_MAX; i++)
		if (d->sbx[i].used) {
			s.memory_mib += d->sbx[i].size.memory_mib;
			s.disk_mib += d->sbx[i].size.disk_mib;
		}
	return s;
}

bool vmrund_sbx_here(struct vmrund *d, const char *id)
{
	pthread_mutex_lock(&d->lock);
	struct vmrund_sbx *x = sbx_slot_of(d, id);
	bool here = x && x->pid > 0;
	pthread_mutex_unlock(&d->lock);
	return here;
}

static int pidfd_of(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Whether the supervisor behind pidfd has exited (or wait_ms passed). */
bool sbx_exited(int pidfd, int wait_ms)
{
	struct pollfd p = { pidfd, POLLIN, 0 };
	return pidfd < 0 || (poll(&p, 1, wait_ms) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)));
}


int sbx_read_state(const char *dir, struct sbx_file_state *st)
{
	char path[PATH_MAX];
	memset(st, 0, sizeof(*st));
	snprintf(path, sizeof(path), "%s/" SBX_STATE, dir);
	json_t *j = json_load_file(path, 0, NULL);
	const char *s = json_string_value(json_object_get(j, "state")),
		   *r = json_string_value(json_object_get(j, "reason"));
	json_int_t pid = json_integer_value(json_object_get(j, "pid"));
	if (!s || pid <= 1 || pid > INT32_MAX) {
		json_decref(j);
		return -1;
	}
	snprintf(st->state, sizeof(st->state), "%s", s);
	snprintf(st->reason, sizeof(st->reason), "%s", r ? r : "");
	st->pid = (pid_t)pid;
	st->timeout_at_ms = json_integer_value(json_object_get(j, "timeout_at_ms"));
	json_decref(j);
	return 0;
}

/* Whether the command line of pid has the argument arg. */
static bool has_arg(pid_t pid, const char *arg)
{
	char path[64], buf[8192];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	for (char *p = buf; p < buf + n; p += strlen(p) + 1)
		if (!strcmp(p, arg))
			return true;
	return false;
}

/* A pidfd of pid when it is the supervisor of dir (its command line
 * names d->sbx_bin and dir), else -1: a pid from a file is not trusted
 * alone. */
int sbx_supervisor_pidfd(struct vmrund *d, pid_t pid, const char *dir)
{
	int fd = pidfd_of(pid);
	if (fd < 0)
		return -1;
	/* read after the pidfd was taken: the pid cannot be another's now */
	if (!has_arg(pid, dir) || !has_arg(pid, d->sbx_bin) || sbx_exited(fd, 0)) {
		close(fd);
		return -1;
	}
	return fd;
}


/* Start the supervisor of dir (run_dir/sandboxes/ID): no death signal (it
 * must outlive us), its own session (it calls setsid). */
static pid_t spawn(struct vmrund *d, const char *dir, const struct tenant *tn, const struct sbx_life *life,
		   const struct sbx_from *from, const char *owner, char *err, size_t errlen)
{
	const char *tenant = tn->name;
	char log[PATH_MAX + 32], cache[PATH_MAX], t[32], m[32], ttl[32], cp[32], cpm[32], rt[32], shared[PATH_MAX];
	snprintf(log, sizeof(log), "%s/" SBX_LOG, dir);
	bool own_cache = d->cfg.snapshot_per_tenant;
	if (own_cache && snapshot_cache_tenant(SNAPSHOT_SYSTEM_CACHE, tenant, cache, sizeof(cache), err, errlen))
		return -1;
	snprintf(t, sizeof(t), "%.3f", life->timeout_s);
	snprintf(m, sizeof(m), "%u", tn->max_sandbox_timeout_s);
	snprintf(ttl, sizeof(ttl), "%.3f", life->pause_ttl_s);
	snprintf(cp, sizeof(cp), "%u", tn->max_checkpoints);
	snprintf(cpm, sizeof(cpm), "%llu", (unsigned long long)tn->max_checkpoint_mib);
	snprintf(rt, sizeof(rt), "%.3f", from->resume_timeout_s);
	vmrund_sbx_shared(d, strrchr(dir, '/') + 1, shared, sizeof(shared));
	char *argv[32];
	int n = 0;
	/* options first: the supervisor's getopt stops at its first operand */
	const char *opts[] = { "--timeout", t, "--max-timeout", m, "--on-timeout", life->on_timeout_pause ? "pause" : "stop",
			       "--pause-ttl", ttl, "--max-checkpoints", cp, "--max-checkpoint-mib", cpm };
	argv[n++] = d->sbx_bin;
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		argv[n++] = (char *)opts[i];
	if (from->checkpoint) {
		argv[n++] = "--from-checkpoint";
		argv[n++] = (char *)from->checkpoint;
	}
	if (from->paused) {
		argv[n++] = "--from-paused";
		argv[n++] = (char *)from->paused;
	}
	if (from->paused && from->resume_timeout_s > 0) {
		argv[n++] = "--resume-timeout";
		argv[n++] = rt;
	}
	if (shared[0]) {
		argv[n++] = "--shared";
		argv[n++] = shared;
		argv[n++] = "--owner";
		argv[n++] = (char *)owner;
	}
	const char *operands[] = { dir, d->vmm, d->guest, d->cfg.policy };
	for (size_t i = 0; i < 4; i++)
		argv[n++] = (char *)operands[i];
	argv[n] = NULL;
	return vmrund_spawn(d, argv, log, own_cache ? cache : NULL, -1, false, err, errlen);
}

/* Wait for the supervisor of dir to say its VM is ready: 0 with its
 * state file read, or -1 with the reason it did not start. */
int sbx_wait_ready(const char *dir, int pidfd, struct sbx_file_state *st, char *why, size_t whylen)
{
	int64_t until = clock_mono_ms() + VMRUND_SBX_READY_MS;
	while (clock_mono_ms() < until) {
		if (sbx_exited(pidfd, 0))
			break;
		unsigned status;
		char *out;
		int64_t left_s = (until - clock_mono_ms()) / 1000;
		char target[48];
		snprintf(target, sizeof(target), "/?wait=%lld", (long long)(left_s > 1 ? left_s : 1));
		if (sbxc_call(dir, "GET", target, NULL, VMRUND_SBX_READY_MS, 65536, &status, &out) < 0) {
			if (errno != ENOENT && errno != ECONNREFUSED)
				break;
			struct timespec ts = { 0, 20 * 1000 * 1000 };
			nanosleep(&ts, NULL);
			continue;
		}
		json_t *j = json_loads(out, 0, NULL);
		free(out);
		const char *s = json_string_value(json_object_get(j, "state"));
		bool running = s && !strcmp(s, "running"),
		     starting = s && (!strcmp(s, "starting") || !strcmp(s, "resuming"));
		json_decref(j);
		if (running && !sbx_read_state(dir, st))
			return 0;
		if (!starting)
			break;
	}
	/* its own words, once it has said them */
	sbx_exited(pidfd, 5000);
	struct sbx_file_state end;
	if (!sbx_read_state(dir, &end) && end.reason[0])
		return errf(why, whylen, "%s", end.reason);
	return errf(why, whylen, clock_mono_ms() >= until ? "its VM was not ready in %d s" : "its supervisor failed",
		    VMRUND_SBX_READY_MS / 1000);
}

/* End the supervisor behind x (already asked to stop, or dead): wait for
 * its exit, SIGKILL past SBX_EXIT_MS. */
void sbx_reap(const struct vmrund_sbx *x, int wait_ms)
{
	if (x->pidfd >= 0 && !sbx_exited(x->pidfd, wait_ms)) {
		syscall(SYS_pidfd_send_signal, x->pidfd, SIGKILL, NULL, 0);
		sbx_exited(x->pidfd, 5000);
	}
}

/* Sandbox id ended: stopped (or failed, when its supervisor's state file
 * st says so; NULL: read it here) in the store with reason, its directory
 * gone, its slot freed. false when the store failed (the slot stays, for
 * the next look). */
bool sbx_record_end(struct vmrund *d, struct vmrund_sbx *x, const char *id, const char *reason,
		       const struct sbx_file_state *st)
{
	char err[300], dir[PATH_MAX];
	struct sbx_file_state own;
	vmrund_sbx_dir(d, id, dir, sizeof(dir));
	if (!st)
		st = sbx_read_state(dir, &own) ? NULL : &own;
	bool failed = st && !strcmp(st->state, "failed");
	int ours = d->store->ops->sbx_set(d->store, id, d->node, failed ? SBS_FAILED : SBS_STOPPED, 0, clock_wall_ms(),
					  0, reason, err, sizeof(err));
	if (ours < 0) {
		vmrund_store_failed(d, "recording a sandbox's end", err);
		return false;
	}
	vmrund_store_ok(d);
	vmrund_say("sandbox %s stopped: %s", id, reason);
	struct store_sandbox sb;   /* read back only for the audit log's line */
	if (d->audit && d->store->ops->sbx_get(d->store, id, NULL, &sb, err, sizeof(err)) == 1) {
		vmrund_sbx_audit(d, &sb);
		store_sandbox_free(&sb);
	}
	spool_clean(dir, false);
	/* what it keeps in the snapshot dir only while the row was this
	 * node's: a node whose lease ran out meanwhile may see its sandbox
	 * resumed elsewhere, from there */
	if (ours)
		sbx_discard_shared(d, id);
	if (x)
		sbx_slot_free(x);
	pthread_cond_broadcast(&d->changed);
	return true;
}

bool sbx_launch(struct vmrund *d, struct vmrund_sbx *x, const struct tenant *tenant, const json_t *spec,
		const struct sbx_life *life, const struct sbx_from *from, int64_t started_ms, const char *reason, char *why,
		size_t whylen)
{
	struct sbx_file_state st = { 0 };
	char dir[PATH_MAX], err[300];
	vmrund_sbx_dir(d, x->id, dir, sizeof(dir));
	bool ok = sbx_start(d, x, tenant, spec, life, from, why, whylen) == 0 &&
		  sbx_wait_ready(dir, x->pidfd, &st, why, whylen) == 0;
	if (!ok) {
		/* nothing of it stays: the supervisor (if one started) is told to stop */
		if (x->pidfd >= 0)
			syscall(SYS_pidfd_send_signal, x->pidfd, SIGTERM, NULL, 0);
		sbx_reap(x, SBX_EXIT_MS);
	}
	pthread_mutex_lock(&d->lock);
	if (ok && d->store->ops->sbx_set(d->store, x->id, d->node, SBS_RUNNING, started_ms, 0, st.timeout_at_ms, reason,
					 err, sizeof(err)) < 0) {
		/* it runs, but the store does not say so: it is not kept */
		syscall(SYS_pidfd_send_signal, x->pidfd, SIGTERM, NULL, 0);
		sbx_reap(x, SBX_EXIT_MS);
		errf(why, whylen, "the store: %s", err);
		ok = false;
	}
	return ok;
}

void sbx_discard_shared(const struct vmrund *d, const char *id)
{
	char dir[PATH_MAX], gone[PATH_MAX + 64];
	vmrund_sbx_shared(d, id, dir, sizeof(dir));
	if (!dir[0])
		return;
	snprintf(gone, sizeof(gone), "%s/" VMRUND_SBX_DIR "/" SBX_GONE "%s.%lld", d->cfg.snapshot_dir, id,
		 (long long)clock_wall_ms());
	if (rename(dir, gone) < 0 && errno != ENOENT)
		spool_clean(dir, false);   /* not renamed: gone here and now, then */
}

/* SNAPSHOT_DIR/sandboxes/ID, made with its parent where it is not there:
 * 0, or -1 with why. */
static int make_shared(char *dir, char *why, size_t whylen)
{
	char *slash = strrchr(dir, '/');
	*slash = '\0';
	bool root = mkdir(dir, 0700) == 0 || errno == EEXIST;
	*slash = '/';
	if (!root || (mkdir(dir, 0700) < 0 && errno != EEXIST))
		return errf(why, whylen, "%s: %s", dir, strerror(errno));
	return 0;
}

/* A new owner's token for the sandbox whose directory in the snapshot dir
 * is dir: written there (replaced whole), and into owner. 0, or -1 with
 * why. */
static int take_ownership(const char *dir, char owner[RUN_OWNER_LEN + 1], char *why, size_t whylen)
{
	uint8_t raw[RUN_OWNER_LEN / 2];
	char path[PATH_MAX + 32], tmp[PATH_MAX + 80];
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return errf(why, whylen, "getrandom: %s", strerror(errno));
	hex_of(raw, sizeof(raw), owner);
	snprintf(path, sizeof(path), "%s/" RUN_SHARED_OWNER, dir);
	snprintf(tmp, sizeof(tmp), "%s.%s", path, owner);
	if (spool_write_file(tmp, owner, RUN_OWNER_LEN, true, 0600) < 0 || rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return errf(why, whylen, "%s: %s", path, strerror(e));
	}
	return 0;
}

/* The directory, its request.json and the supervisor: 0, or -1 with why. */
int sbx_start(struct vmrund *d, struct vmrund_sbx *x, const struct tenant *tenant, const json_t *spec,
		 const struct sbx_life *life, const struct sbx_from *from, char *why, size_t whylen)
{
	char dir[PATH_MAX], path[PATH_MAX + 32], owner[RUN_OWNER_LEN + 1] = "";
	vmrund_sbx_shared(d, x->id, dir, sizeof(dir));
	if (dir[0] && (make_shared(dir, why, whylen) || take_ownership(dir, owner, why, whylen)))
		return -1;
	vmrund_sbx_dir(d, x->id, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/" SBX_REQUEST, dir);
	char *text = json_dumps(spec, JSON_COMPACT);
	int rc = -1;
	/* run_dir/sandboxes is made with the node's first sandbox */
	char *slash = strrchr(dir, '/');
	bool root = false;
	if (slash) {
		*slash = '\0';
		root = mkdir(dir, 0700) == 0 || errno == EEXIST;
		*slash = '/';
	}
	if (!text)
		errf(why, whylen, "out of memory");
	else if (!root || mkdir(dir, 0700) < 0)
		errf(why, whylen, "%s: %s", dir, strerror(errno));
	else if (spool_write_file(path, text, strlen(text), true, 0600) < 0)
		errf(why, whylen, "%s: %s", path, strerror(errno));
	else if ((x->pid = spawn(d, dir, tenant, life, from, owner, why, whylen)) > 0 && (x->pidfd = pidfd_of(x->pid)) < 0)
		errf(why, whylen, "pidfd_open: %s", strerror(errno));
	else if (x->pid > 0)
		rc = 0;
	free(text);
	return rc;
}
