/* The node's loop (vmrund_loop in host/vmrund/daemon.h): claims, one
 * worker process per run, the gate, reaping and recording ends, the
 * node's lease, taking back dead nodes' runs, notifications, retention. */
#include "daemon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "errmsg.h"
#include "judge0_batch.h"
#include "keep.h"
#include "run_spec.h"
#include "sandboxes.h"
#include "snapshot_cache.h"
#include "run_pause.h"
#include "spool.h"

#define EXPIRE_EVERY_MS    1000    /* how often a node looks for dead nodes' runs */

/* In a child of fork (only async-signal-safe calls: vmrund is
 * multi-threaded): stdin from in, stdout and stderr to out, gate (-1:
 * none) as SPOOL_GATE_FD, no other descriptor, every signal's default
 * and none blocked, then execve; never returns. */
static void exec_child(int in, int out, int gate, char *const argv[], char *const envp[]) __attribute__((noreturn));
static void exec_child(int in, int out, int gate, char *const argv[], char *const envp[])
{
	dup2(in, 0);
	dup2(out, 1);
	dup2(out, 2);
	/* dup2 onto itself would keep close-on-exec */
	if (gate == SPOOL_GATE_FD)
		fcntl(gate, F_SETFD, 0);
	else if (gate >= 0)
		dup2(gate, SPOOL_GATE_FD);
	close_range(gate >= 0 ? SPOOL_GATE_FD + 1 : 3, ~0U, 0);
	for (int s = 1; s < 32; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(argv[0], argv, envp);
	_exit(127);
}

pid_t vmrund_spawn(struct vmrund *d, char *const argv[], const char *log, const char *cache, int gate, bool die_with_us,
		   char *err, size_t errlen)
{
	char tmpdir[PATH_MAX + 16], lib[PATH_MAX], cachevar[PATH_MAX + 16];
	/* checked at start (vmrund_open): it fits */
	(void)spool_lib_tmp(d->cfg.run_dir, lib, sizeof(lib));
	snprintf(tmpdir, sizeof(tmpdir), "TMPDIR=%s", lib);
	/* a node-wide cache vmrund was started with is its children's too */
	const char *own = getenv("VMRUN_CACHE");
	if (!cache && own && own[0] == '/')
		cache = own;
	snprintf(cachevar, sizeof(cachevar), "VMRUN_CACHE=%s", cache ? cache : "");
	char *envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", tmpdir, cache ? cachevar : NULL, NULL };
	int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	pid_t pid = -1;
	if (logfd < 0 || nullfd < 0) {
		errf(err, errlen, "%s: %s", log, strerror(errno));
		goto out;
	}
	pid_t parent = getpid();
	if ((pid = fork()) < 0) {
		errf(err, errlen, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		if (die_with_us && (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent))
			_exit(127);
		exec_child(nullfd, logfd, gate, argv, envp);
	}
out:
	if (logfd >= 0)
		close(logfd);
	if (nullfd >= 0)
		close(nullfd);
	return pid;
}

static struct vmrund_active *free_slot(struct vmrund *d)
{
	for (unsigned i = 0; i < d->slots; i++)
		if (!d->active[i].used)
			return &d->active[i];
	return NULL;
}

/* A verification run's checkpoint, where the worker finds it: its path
 * into RUN_DIR/SPOOL_CHECKPOINT. The request was checked at its submit
 * (the tenant's sandbox, on this node: the store lets no other claim it).
 * 0 (nothing to do for another run), or -1 with why. */
static int checkpoint_path(struct vmrund *d, const struct store_run *run, const char *dir, char *err, size_t errlen)
{
	json_t *rq = json_loads(run->request, 0, NULL);
	const char *from = json_string_value(json_object_get(rq, "from_checkpoint")), *name;
	char id[RUN_CHECKPOINT_SANDBOX_MAX + 1], line[PATH_MAX], path[PATH_MAX + 64];
	int rc = 0;
	if (from && run_checkpoint_ref(from, id, &name)) {
		vmrund_checkpoint_dir(d, id, name, line, sizeof(line));
		snprintf(path, sizeof(path), "%s/" SPOOL_CHECKPOINT, dir);
		if (spool_write_file(path, line, strlen(line), false, 0600) < 0)
			rc = errf(err, errlen, "%s: %s", path, strerror(errno));
	} else if (from) {
		rc = errf(err, errlen, "from_checkpoint: \"SANDBOX_ID/NAME\"");
	}
	json_decref(rq);
	return rc;
}

void vmrund_worker_start(struct vmrund *d, struct vmrund_active *x)
{
	char err[400], dir[PATH_MAX], path[PATH_MAX], log[PATH_MAX], cache[PATH_MAX];
	int sv[2] = { -1, -1 };
	pid_t pid = -1;
	vmrund_run_path(d, x->id, NULL, dir, sizeof(dir));
	vmrund_run_path(d, x->id, SPOOL_LOG, log, sizeof(log));
	char *argv[] = { d->worker, dir, d->vmm, d->guest, d->cfg.policy, NULL };
	/* snapshot_scope = tenant: the worker's snapshots are the tenant's
	 * own (the worker runs as root, so the run library takes VMRUN_CACHE);
	 * a tenant whose name cannot be one fails rather than shares */
	bool own_cache = d->cfg.snapshot_per_tenant;
	if (own_cache && snapshot_cache_tenant(SNAPSHOT_SYSTEM_CACHE, x->tenant, cache, sizeof(cache), err, sizeof(err)))
		;   /* err says why */
	else if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		errf(err, sizeof(err), "socketpair: %s", strerror(errno));
	else   /* the worker dies with vmrund (SIGTERM): a restart finds its run lost */
		pid = vmrund_spawn(d, argv, log, own_cache ? cache : NULL, sv[1], true, err, sizeof(err));
	if (sv[1] >= 0)
		close(sv[1]);
	if (pid < 0) {
		if (sv[0] >= 0)
			close(sv[0]);
		spool_clean(dir, false);
		vmrund_end_run(d, x->id, d->node, RS_FAILED, NULL, NULL, err);
		x->used = false;
		pthread_cond_broadcast(&d->changed);
		return;
	}
	char pidtext[24];
	snprintf(pidtext, sizeof(pidtext), "%d", (int)pid);
	vmrund_run_path(d, x->id, "worker.pid", path, sizeof(path));
	/* For a sweep after a crash; the pid alone is not trusted. */
	(void)spool_write_file(path, pidtext, strlen(pidtext), false, 0600);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	x->pid = pid;
	x->gate_fd = sv[0];
	pthread_cond_broadcast(&d->changed);
}

/* Start a run this node claimed; lock held. A failure here ends it failed:
 * nothing of it has run. */
static void start_run(struct vmrund *d, const struct store_run *run)
{
	char err[400], dir[PATH_MAX], path[PATH_MAX];
	struct vmrund_active *x = free_slot(d);
	vmrund_run_path(d, run->id, NULL, dir, sizeof(dir));
	vmrund_run_path(d, run->id, SPOOL_REQUEST, path, sizeof(path));
	spool_clean(dir, false);   /* a stale one, from a life before this one's sweep */
	if (!x)
		errf(err, sizeof(err), "no free slot record");
	else if (mkdir(dir, 0700) < 0)
		errf(err, sizeof(err), "%s: %s", dir, strerror(errno));
	else if (spool_write_file(path, run->request, strlen(run->request), false, 0600) < 0)
		errf(err, sizeof(err), "%s: %s", path, strerror(errno));
	else if (checkpoint_path(d, run, dir, err, sizeof(err)) < 0)
		;   /* err says why */
	else
		err[0] = '\0';
	if (err[0]) {
		spool_clean(dir, false);
		vmrund_end_run(d, run->id, d->node, RS_FAILED, NULL, NULL, err);
		return;
	}
	/* What it takes of the node's room until it ends: as admitted (the
	 * store sized it from the same request's limits). */
	struct sched_size size;
	(void)run_spec_size_json(run->request, &size.memory_mib, &size.disk_mib);
	*x = (struct vmrund_active){ .used = true, .pid = -1, .gate_fd = -1, .created_ms = run->created_ms,
				     .started_ms = run->started_ms, .size = size };
	snprintf(x->id, sizeof(x->id), "%s", run->id);
	snprintf(x->tenant, sizeof(x->tenant), "%s", run->tenant);
	if (judge0_batch_take(d, x, run))
		pthread_cond_broadcast(&d->changed);
	else
		vmrund_worker_start(d, x);
}

/* What the node has left for runs: its size less what every run it
 * holds takes, until that run is recorded (its VM and workspace are gone
 * by then). Lock held. */
static void take_room(struct sched_size *left, const struct sched_size *s)
{
	left->memory_mib -= s->memory_mib < left->memory_mib ? s->memory_mib : left->memory_mib;
	left->disk_mib -= s->disk_mib < left->disk_mib ? s->disk_mib : left->disk_mib;
}

struct sched_size vmrund_room_left(const struct vmrund *d)
{
	struct sched_size left = d->size, sbx = vmrund_sbx_size(d);
	for (unsigned i = 0; i < d->slots; i++)
		if (d->active[i].used)
			take_room(&left, &d->active[i].size);
	take_room(&left, &sbx);
	return left;
}

/* Claim what the free slots and the node's room can take, and start it;
 * lock held. */
static void claim(struct vmrund *d)
{
	unsigned room = d->slots - vmrund_running_here(d);
	if (d->stopping || !room)
		return;
	struct store_run *rows = calloc(room, sizeof(*rows));
	char err[300];
	if (!rows)
		return;
	struct sched_size left = vmrund_room_left(d);
	int n = d->store->ops->claim(d->store, d->node, room, &d->ts, &left, &d->size, clock_wall_ms(), rows, err,
				     sizeof(err));
	if (n < 0)
		vmrund_store_failed(d, "claiming runs", err);
	else
		vmrund_store_ok(d);
	for (int i = 0; i < n; i++) {
		start_run(d, &rows[i]);
		store_run_free(&rows[i]);
	}
	free(rows);
}

/* ---- the gate ------------------------------------------------------------ */

static void gate_answer(struct vmrund_active *x, const char *word)
{
	if (send(x->gate_fd, word, strlen(word), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		return;   /* the worker is gone: its reap says how the run ended */
	x->gate_asked = false;
}

/* Answer every worker that asked: the store records first that the
 * command may now have effects, then it may start. While the store is
 * away the worker waits, until its run's deadline at most (the run then
 * ends timed out, its command never started). Lock held. */
static void answer_gates(struct vmrund *d)
{
	for (unsigned i = 0; i < d->slots; i++) {
		struct vmrund_active *x = &d->active[i];
		if (!x->used || !x->gate_asked)
			continue;
		char err[300];
		int ok = x->cancel ? 0 : d->store->ops->command(d->store, x->id, d->node, clock_wall_ms(), err, sizeof(err));
		if (ok < 0) {
			vmrund_store_failed(d, "letting a command start", err);
			continue;
		}
		x->refused = !ok;
		gate_answer(x, ok ? SPOOL_GATE_GO : SPOOL_GATE_NO);
	}
}

/* A gate is readable: the worker asked, or closed it. Lock held. */
static void read_gate(struct vmrund_active *x)
{
	char msg[16];
	ssize_t n = recv(x->gate_fd, msg, sizeof(msg) - 1, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		close(x->gate_fd);
		x->gate_fd = -1;
		return;
	}
	msg[n] = '\0';
	if (!strcmp(msg, SPOOL_GATE_ASK))
		x->gate_asked = true;
}

/* ---- ends ---------------------------------------------------------------- */

/* A whole small file of the run directory (the result, the log) as a
 * string, or NULL. */
static char *slurp(const char *path, size_t max)
{
	uint8_t *text;
	size_t len;
	return spool_read_file(AT_FDCWD, path, max, &text, &len) < 0 ? NULL : (char *)text;
}

/* The worker's last line of stderr, for a run it left no result for. */
static void last_log_line(const char *path, char *out, size_t len)
{
	char *text = slurp(path, 65536);
	out[0] = '\0';
	if (!text)
		return;
	size_t n = strlen(text);
	while (n && text[n - 1] == '\n')
		text[--n] = '\0';
	char *nl = strrchr(text, '\n');
	snprintf(out, len, "%s", nl ? nl + 1 : text);
	free(text);
}

/* What a worker said (worker.log: problems only, and for a run that went
 * wrong the run library's last progress and console lines) into our log,
 * under its run's id: the run directory it lies in is removed once the
 * run is recorded. */
static void relay_log(const char *id, const char *path)
{
	char *text = slurp(path, 65536);
	for (char *line = text, *next; line && *line; line = next) {
		next = line + strcspn(line, "\n");
		if (*next)
			*next++ = '\0';
		if (*line)
			vmrund_say("run %s: %s", id, line);
	}
	free(text);
}

/* A reaped worker's run: what it left into the store's blobs, then its
 * end; the slot frees only when both are written, so a store that is
 * away is tried again each tick. Lock held. */
static void record(struct vmrund *d, struct vmrund_active *x)
{
	char dir[PATH_MAX], path[PATH_MAX], message[512] = "", err[300];
	vmrund_run_path(d, x->id, NULL, dir, sizeof(dir));
	vmrund_run_path(d, x->id, SPOOL_RESULT, path, sizeof(path));
	char *text = slurp(path, 64u << 20);
	json_t *result = spool_result_parse(text);
	bool stopped = x->cancel || x->refused;
	struct run_outcome o;   /* read here once; the store keeps it in columns */
	const struct run_outcome *out = result_outcome_parse(result, &o) == 0 ? &o : NULL;
	enum run_state st = spool_state_of(out, stopped);
	if (x->refused && !x->cancel)
		snprintf(message, sizeof(message), "not started: this node no longer held the run when its VM was up");
	else if (stopped)
		snprintf(message, sizeof(message), "cancelled while running; the VM was destroyed");
	else if (result)   /* cut between characters: the store's text columns take only UTF-8 */
		store_copy_text(message, sizeof(message), json_string_value(json_object_get(result, "message")));
	if (!result && !stopped) {
		char line[400];
		int status = x->status;
		vmrund_run_path(d, x->id, SPOOL_LOG, path, sizeof(path));
		last_log_line(path, line, sizeof(line));
		snprintf(message, sizeof(message), "the worker ended (%s %d) with no result%s%s",
			 WIFSIGNALED(status) ? "signal" : "status",
			 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), *line ? ": " : "", line);
	}
	int done = 0;
	if (st != RS_CANCELLED && keep_put(d->store, x->id, dir, (uint64_t)d->cfg.blob_max_mib << 20, err, sizeof(err))) {
		vmrund_store_failed(d, "keeping a run's output", err);
		goto out;
	}
	if ((done = vmrund_end_run(d, x->id, d->node, st, result ? text : NULL, out, message)) < 0) {
		vmrund_store_failed(d, "recording a run's end", "see above");
		goto out;
	}
	if (done == 0)
		vmrund_say("run %s: ended here after this node's lease ran out; what it did is not recorded",
			x->id);
	/* once only: a store that is away has us here again next tick */
	vmrund_run_path(d, x->id, SPOOL_LOG, path, sizeof(path));
	relay_log(x->id, path);
	if (spool_clean(dir, st != RS_CANCELLED) < 0)
		vmrund_say("run %s: cleaning %s: %s", x->id, dir, strerror(errno));
	if (x->gate_fd >= 0)
		close(x->gate_fd);
	x->used = false;
out:
	json_decref(result);
	free(text);
}

static void reap_all(struct vmrund *d)
{
	int status;
	for (pid_t pid; (pid = waitpid(-1, &status, WNOHANG)) > 0;) {
		pthread_mutex_lock(&d->lock);
		for (unsigned i = 0; i < d->slots; i++)
			if (d->active[i].used && d->active[i].pid == pid) {
				d->active[i].pid = 0;
				d->active[i].status = status;
			}
		pthread_mutex_unlock(&d->lock);
	}
	pthread_mutex_lock(&d->lock);
	for (unsigned i = 0; i < d->slots; i++) {
		struct vmrund_active *x = &d->active[i];
		if (x->used && x->pid == 0)
			record(d, x);
		else if (x->used && x->need_worker) {
			/* a Judge0 batch's thread gave its run back (judge0_batch.h) */
			x->need_worker = false;
			vmrund_worker_start(d, x);
		}
	}
	pthread_mutex_unlock(&d->lock);
}

/* ---- the cluster --------------------------------------------------------- */

static void on_cancel_asked(void *ctx, const char *id)
{
	vmrund_stop(ctx, id);
}

static void on_taken_back(void *ctx, const struct store_run *run)
{
	struct vmrund *d = ctx;
	if (store_state_terminal(run->state))
		vmrund_ended(d, run);
	else
		vmrund_say("run %s queued again: the node that held it stopped before its command started",
			run->id);
}

static void on_sandbox_lost(void *ctx, const struct store_sandbox *sb)
{
	vmrund_say("sandbox %s lost: %s", sb->id, sb->reason);
	vmrund_sbx_audit(ctx, sb);
	vmrund_sbx_lost(ctx, sb);
}

static void on_note(void *ctx, enum store_note note, const char *id)
{
	struct vmrund *d = ctx;
	if (note == STORE_NOTE_CANCEL)
		vmrund_stop(d, id);
	else if (note == STORE_NOTE_ENDED)
		pthread_cond_broadcast(&d->changed);
}

/* The lease, dead nodes, notifications; lock held. */
static void cluster(struct vmrund *d, int64_t *next_beat, int64_t *next_expiry, bool note_ready)
{
	char err[300];
	int64_t now = clock_mono_ms();
	/* Also on each beat: a backend that lost its listening connection
	 * has no descriptor to poll, and reconnects only in notes. */
	if ((note_ready || now >= *next_beat) && d->store->ops->notes(d->store, on_note, d, err, sizeof(err)) < 0) {
		/* Some may be lost: the heartbeat finds cancels, waiters look. */
		*next_beat = 0;
		pthread_cond_broadcast(&d->changed);
	}
	if (now >= *next_beat) {
		int64_t lease = (int64_t)d->cfg.lease_s * 1000;
		if (d->store->ops->heartbeat(d->store, d->node, lease, on_cancel_asked, d, err, sizeof(err)) < 0) {
			vmrund_store_failed(d, "renewing this node's lease", err);
			*next_beat = now + 500;
		} else {
			vmrund_store_ok(d);
			*next_beat = now + lease / 4;
		}
	}
	/* Not while the store is down either: the call that would find it
	 * back must not be the one that takes runs (vmrund_store_ok). */
	if (now >= *next_expiry && !d->store_down && now >= d->expire_from_ms) {
		if (d->store->ops->expire(d->store, NULL, clock_wall_ms(), on_taken_back, d, err, sizeof(err)) < 0)
			vmrund_store_failed(d, "taking back dead nodes' runs", err);
		else if (d->store->ops->sbx_lost(d->store, NULL, clock_wall_ms(), on_sandbox_lost, d, err, sizeof(err)) < 0)
			vmrund_store_failed(d, "ending dead nodes' sandboxes lost", err);
		else
			vmrund_sbx_expire_parked(d);
		*next_expiry = now + EXPIRE_EVERY_MS;
	}
}

/* Kept output and artifacts past retention_s: removed here and from the
 * store, the run's row staying; whole runs past run_retention_s: their
 * rows and blobs from the store, and their directories here (a run the
 * store no longer has is one that went). The audit log keeps their
 * lines. */
static void expire_kept(struct vmrund *d)
{
	int64_t now = clock_wall_ms(), before = now - (int64_t)d->cfg.retention_s * 1000;
	char err[300];
	pthread_mutex_lock(&d->lock);
	if (d->store->ops->drop_blobs(d->store, before, err, sizeof(err)) < 0)
		vmrund_store_failed(d, "removing kept output past its retention", err);
	else if (d->cfg.run_retention_s &&
		 d->store->ops->drop_runs(d->store, now - (int64_t)d->cfg.run_retention_s * 1000, err, sizeof(err)) < 0)
		vmrund_store_failed(d, "removing runs past run_retention_s", err);
	else if (d->cfg.run_retention_s &&
		 d->store->ops->sbx_drop(d->store, now - (int64_t)d->cfg.run_retention_s * 1000, err, sizeof(err)) < 0)
		vmrund_store_failed(d, "removing sandboxes past run_retention_s", err);
	pthread_mutex_unlock(&d->lock);
	DIR *dir = opendir(d->cfg.run_dir);
	if (!dir)
		return;
	for (struct dirent *e; (e = readdir(dir));) {
		if (strlen(e->d_name) != STORE_ID_LEN)
			continue;
		pthread_mutex_lock(&d->lock);
		struct store_run run;
		char path[PATH_MAX];
		int found = d->store->ops->get(d->store, e->d_name, NULL, &run, err, sizeof(err));
		/* a directory is made only for a run the store has (start_run,
		 * keep_fetch), under this lock: one with no run is a leftover */
		bool gone = found == 0 || (found == 1 && store_state_terminal(run.state) && run.finished_ms < before);
		if (gone) {
			vmrund_run_path(d, e->d_name, NULL, path, sizeof(path));
			spool_clean(path, false);
		}
		if (found == 1)
			store_run_free(&run);
		pthread_mutex_unlock(&d->lock);
	}
	closedir(dir);
}

/* The descriptors to wait on: signals, wake, the store's notifications,
 * every open gate. Lock held. */
static nfds_t poll_set(struct vmrund *d, struct pollfd *p, int sfd)
{
	nfds_t n = 0;
	p[n++] = (struct pollfd){ sfd, POLLIN, 0 };
	p[n++] = (struct pollfd){ d->wake_fd, POLLIN, 0 };
	p[n++] = (struct pollfd){ d->store->ops->note_fd(d->store), POLLIN, 0 };
	for (unsigned i = 0; i < d->slots; i++)
		p[n++] = (struct pollfd){ d->active[i].used ? d->active[i].gate_fd : -1, POLLIN, 0 };
	return n;
}

int vmrund_loop(struct vmrund *d, char *err, size_t errlen)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	struct pollfd *p = calloc(d->slots + 3, sizeof(*p));
	if (sfd < 0 || !p) {
		if (sfd >= 0)
			close(sfd);
		free(p);
		return errf(err, errlen, "signalfd: %s", strerror(errno));
	}
	int64_t next_retention = 0, next_beat = 0, next_expiry = 0;
	bool note_ready = false;
	for (;;) {
		reap_all(d);
		vmrund_sbx_watch(d);
		judge0_batch_sweep(d, false);
		pthread_mutex_lock(&d->lock);
		cluster(d, &next_beat, &next_expiry, note_ready);
		answer_gates(d);
		claim(d);
		bool done = d->stopping && !vmrund_running_here(d);
		nfds_t n = poll_set(d, p, sfd);
		pthread_mutex_unlock(&d->lock);
		if (done)
			break;
		if (clock_mono_ms() >= next_retention) {
			expire_kept(d);
			vmrund_sbx_sweep(d);
			next_retention = clock_mono_ms() + config_retention_every_ms(&d->cfg);
		}
		if (poll(p, n, d->store_down ? 250 : 1000) < 0 && errno != EINTR)
			break;
		note_ready = p[2].revents != 0;
		pthread_mutex_lock(&d->lock);
		for (unsigned i = 0; i < d->slots; i++)
			if (d->active[i].used && d->active[i].gate_fd >= 0 && p[3 + i].revents)
				read_gate(&d->active[i]);
		pthread_mutex_unlock(&d->lock);
		struct signalfd_siginfo si;
		while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
				pthread_mutex_lock(&d->lock);
				d->stopping = true;
				pthread_mutex_unlock(&d->lock);
			}
		uint64_t one;
		if (read(d->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			break;
	}
	judge0_batch_sweep(d, true);
	free(p);
	close(sfd);
	return 0;
}
