/* vmrund's core (host/vmrund/daemon.h): admission, the scheduler loop,
 * one worker process per run, recovery at start. */
#include "daemon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "errmsg.h"
#include "spool.h"

#define RECOVER_GRACE_MS 15000   /* a worker left by a dead vmrund gets this long to clean up */

int64_t vmrund_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t vmrund_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

static void new_id(char id[SCHED_ID_MAX])
{
	uint8_t b[16];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		memcpy(b, &ts, sizeof(b) < sizeof(ts) ? sizeof(b) : sizeof(ts));
	}
	for (int i = 0; i < 16; i++)
		snprintf(id + 2 * i, 3, "%02x", b[i]);
}

static struct vmrund_answer answer(unsigned status, unsigned retry, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static struct vmrund_answer answer(unsigned status, unsigned retry, const char *fmt, ...)
{
	struct vmrund_answer a = { .status = status, .retry_after_s = retry };
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(a.message, sizeof(a.message), fmt, ap);
	va_end(ap);
	return a;
}

/* ---- the API's side ------------------------------------------------------ */

struct vmrund_answer vmrund_submit(struct vmrund *d, unsigned tenant, const struct req *rq, char id[SCHED_ID_MAX])
{
	json_t *j = req_to_json(rq);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return answer(500, 0, "out of memory");
	new_id(id);
	struct store_run run = { .tenant = "", .state = RS_QUEUED, .created_ms = vmrund_wall_ms(), .request = text };
	snprintf(run.id, sizeof(run.id), "%s", id);
	snprintf(run.tenant, sizeof(run.tenant), "%s", d->ts.t[tenant].name);
	char err[300];
	struct vmrund_answer a = answer(202, 0, "queued");
	pthread_mutex_lock(&d->lock);
	enum sched_verdict v = d->stopping ? SCHED_QUEUE_FULL : sched_admit(&d->sched, tenant);
	if (v == SCHED_TENANT_FULL) {
		d->m.refused_tenant++;
		a = answer(429, 1, "tenant %s has %u runs running or queued, its limit", d->ts.t[tenant].name,
			   d->ts.t[tenant].concurrent + d->ts.t[tenant].queued);
	} else if (v == SCHED_QUEUE_FULL) {
		d->m.refused_queue++;
		a = answer(503, d->stopping ? 5 : 2, d->stopping ? "vmrund is stopping" : "the queue is full (%u runs)",
			   d->cfg.queue_max);
	} else if (d->store->ops->insert(d->store, &run, err, sizeof(err))) {
		a = answer(500, 0, "%s", err);
	} else if (sched_enqueue(&d->sched, tenant, id)) {
		/* Stored but not queued: end it rather than leave it hanging. */
		d->store->ops->finish(d->store, id, RS_FAILED, vmrund_wall_ms(), NULL, "out of memory", err, sizeof(err));
		a = answer(500, 0, "out of memory");
	} else {
		d->m.accepted++;
	}
	pthread_mutex_unlock(&d->lock);
	free(text);
	if (a.status == 202)
		vmrund_wake(d);
	return a;
}

static struct vmrund_active *active_by_id(struct vmrund *d, const char *id)
{
	for (unsigned i = 0; i < d->sched.slots; i++)
		if (d->active[i].used && !strcmp(d->active[i].id, id))
			return &d->active[i];
	return NULL;
}

static bool ended(struct vmrund *d, const char *id)
{
	struct store_run run;
	char err[300];
	int found = d->store->ops->get(d->store, id, NULL, &run, err, sizeof(err));
	bool done = found != 1 || store_state_terminal(run.state);
	if (found == 1)
		store_run_free(&run);
	return done;
}

/* Wait on the condition until the run ended or deadline; lock held. */
static bool wait_locked(struct vmrund *d, const char *id, int64_t deadline_ms)
{
	for (;;) {
		if (ended(d, id))
			return true;
		if (d->closing)
			return false;
		int64_t left = deadline_ms - vmrund_now_ms();
		if (left <= 0)
			return false;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		int64_t step = left < 1000 ? left : 1000;   /* and look again: a store read is cheap */
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

struct vmrund_answer vmrund_cancel(struct vmrund *d, unsigned tenant, const char *id, int64_t wait_ms)
{
	struct store_run run;
	char err[300];
	struct vmrund_answer a;
	pthread_mutex_lock(&d->lock);
	int found = d->store->ops->get(d->store, id, d->ts.t[tenant].name, &run, err, sizeof(err));
	if (found < 0) {
		a = answer(500, 0, "%s", err);
	} else if (found == 0) {
		a = answer(404, 0, "no run %s", id);
	} else if (store_state_terminal(run.state)) {
		a = answer(409, 0, "run %s already ended: %s", id, store_state_name(run.state));
	} else if (sched_dequeue(&d->sched, id)) {
		vmrund_end_run(d, id, RS_CANCELLED, NULL, "cancelled while queued; it never started");
		a = answer(200, 0, "cancelled");
	} else {
		struct vmrund_active *x = active_by_id(d, id);
		if (x && !x->cancel) {
			x->cancel = true;
			kill(x->pid, SIGTERM);   /* the worker's cancel: it destroys the VM and cleans up */
		}
		a = wait_locked(d, id, vmrund_now_ms() + wait_ms) ? answer(200, 0, "cancelled")
								   : answer(202, 0, "cancelling: the VM is being destroyed");
	}
	if (found == 1)
		store_run_free(&run);
	pthread_mutex_unlock(&d->lock);
	return a;
}

unsigned vmrund_rate(struct vmrund *d, unsigned tenant)
{
	pthread_mutex_lock(&d->lock);
	int64_t wait = sched_rate_take(&d->sched, tenant, vmrund_now_ms());
	if (wait)
		d->m.refused_rate++;
	pthread_mutex_unlock(&d->lock);
	return wait ? (unsigned)((wait + 999) / 1000) : 0;
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
	const char *images[] = { "vmlinux", "rootfs.ext4" };
	for (size_t i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", d->guest, images[i]);
		if (access(path, R_OK) < 0) {
			snprintf(why, whylen, "%s: %s", path, strerror(errno));
			return false;
		}
	}
	return true;
}

/* ---- starting and ending runs -------------------------------------------- */

static int write_all(const char *path, const char *text, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	while (len) {
		ssize_t k = write(fd, text, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			close(fd);
			return -1;
		}
		text += k;
		len -= (size_t)k;
	}
	return close(fd);
}

/* The worker's process: its own stderr in the run directory, no fd of
 * ours, a fixed environment, and SIGTERM when vmrund dies. Only
 * async-signal-safe calls between fork and exec: we are multi-threaded. */
static pid_t spawn_worker(struct vmrund *d, const char *dir, char *err, size_t errlen)
{
	char log[PATH_MAX + 16], tmpdir[PATH_MAX + 16];
	snprintf(log, sizeof(log), "%s/" SPOOL_LOG, dir);
	snprintf(tmpdir, sizeof(tmpdir), "TMPDIR=" SPOOL_LIB_TMP);
	char *argv[] = { d->worker, (char *)dir, d->vmm, d->guest, NULL };
	char *envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", tmpdir, NULL };
	int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (logfd < 0 || nullfd < 0) {
		errf(err, errlen, "%s: %s", log, strerror(errno));
		goto fail;
	}
	pid_t parent = getpid();
	sigset_t none;
	sigemptyset(&none);
	pid_t pid = fork();
	if (pid < 0) {
		errf(err, errlen, "fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
			_exit(127);
		dup2(nullfd, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		close_range(3, ~0U, 0);
		for (int s = 1; s < 32; s++)
			if (s != SIGKILL && s != SIGSTOP)
				signal(s, SIG_DFL);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execve(argv[0], argv, envp);
		_exit(127);
	}
	close(logfd);
	close(nullfd);
	return pid;
fail:
	if (logfd >= 0)
		close(logfd);
	if (nullfd >= 0)
		close(nullfd);
	return -1;
}


/* Start the run the scheduler picked; lock held. */
static void start_run(struct vmrund *d, const char *id, unsigned tenant)
{
	struct store_run run;
	char err[400], dir[PATH_MAX], path[PATH_MAX];
	int found = d->store->ops->get(d->store, id, NULL, &run, err, sizeof(err));
	if (found != 1) {
		sched_finished(&d->sched, tenant);
		return;   /* gone (cancelled meanwhile): nothing to start */
	}
	struct vmrund_active *x = NULL;
	for (unsigned i = 0; i < d->sched.slots && !x; i++)
		if (!d->active[i].used)
			x = &d->active[i];
	vmrund_run_path(d, id, NULL, dir, sizeof(dir));
	if (d->store->ops->start(d->store, id, vmrund_wall_ms(), err, sizeof(err)) != 1) {
		sched_finished(&d->sched, tenant);
		goto out;
	}
	pid_t pid = -1;
	vmrund_run_path(d, id, SPOOL_REQUEST, path, sizeof(path));
	if (!x)
		errf(err, sizeof(err), "no free slot record");
	else if (mkdir(dir, 0700) < 0)
		errf(err, sizeof(err), "%s: %s", dir, strerror(errno));
	else if (write_all(path, run.request, strlen(run.request)) < 0)
		errf(err, sizeof(err), "%s: %s", path, strerror(errno));
	else
		pid = spawn_worker(d, dir, err, sizeof(err));
	if (pid < 0) {
		sched_finished(&d->sched, tenant);
		spool_clean(dir, false);
		vmrund_end_run(d, id, RS_FAILED, NULL, err);
		goto out;
	}
	char pidtext[24];
	snprintf(pidtext, sizeof(pidtext), "%d", (int)pid);
	vmrund_run_path(d, id, "worker.pid", path, sizeof(path));
	(void)write_all(path, pidtext, strlen(pidtext));   /* for a sweep after a crash; the pid alone is not trusted */
	*x = (struct vmrund_active){ .used = true, .tenant = tenant, .pid = pid, .created_ms = run.created_ms,
				     .started_ms = vmrund_wall_ms() };
	snprintf(x->id, sizeof(x->id), "%s", id);
	pthread_cond_broadcast(&d->changed);
out:
	store_run_free(&run);
}

/* Read a whole small file (the result) into a malloc'd string. */
static char *slurp(const char *path, size_t max)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char *buf = malloc(max + 1);
	size_t n = buf ? fread(buf, 1, max, f) : 0;
	bool full = buf && n == max && fgetc(f) != EOF;
	fclose(f);
	if (!buf || full) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
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

static void audit(struct vmrund *d, const char *id, const char *tenant, enum run_state st, const json_t *result,
		  const char *request, int64_t queue_ms, const char *message)
{
	if (!d->audit)
		return;
	json_t *rq = request ? json_loads(request, 0, NULL) : NULL;
	json_t *line = json_object();
	char when[40];
	int64_t now = vmrund_wall_ms();
	time_t secs = (time_t)(now / 1000);
	struct tm tm;
	gmtime_r(&secs, &tm);
	size_t k = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + k, sizeof(when) - k, ".%03dZ", (int)(now % 1000));
	json_object_set_new(line, "time", json_string(when));
	json_object_set_new(line, "tenant", json_string(tenant));
	json_object_set_new(line, "run_id", json_string(id));
	json_object_set_new(line, "state", json_string(store_state_name(st)));
	if (rq) {
		const char *keys[] = { "runtime", "argv", "args", "limits", "compile", "run" };
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			json_t *v = json_object_get(rq, keys[i]);
			if (v)
				json_object_set(line, keys[i], v);
		}
		json_t *names = json_array(), *files = json_object_get(rq, "files");
		size_t i;
		json_t *f;
		json_array_foreach(files, i, f) json_array_append(names, json_object_get(f, "name"));
		json_object_set_new(line, "files", names);
	}
	const char *hit[4];
	unsigned nhit = result ? metrics_limits_hit(result, hit) : 0;
	json_t *hits = json_array();
	for (unsigned i = 0; i < nhit; i++)
		json_array_append_new(hits, json_string(hit[i]));
	json_object_set_new(line, "limits_hit", hits);
	if (result) {
		json_object_set(line, "termination", json_object_get(result, "termination"));
		json_object_set(line, "exit_code", json_object_get(result, "exit_code"));
		json_object_set(line, "durations_ms", json_object_get(result, "durations_ms"));
	}
	json_object_set_new(line, "queue_ms", json_integer(queue_ms));
	json_object_set_new(line, "message", json_string(message ? message : ""));
	char *text = json_dumps(line, JSON_COMPACT);
	if (text) {
		fprintf(d->audit, "%s\n", text);
		fflush(d->audit);
	}
	free(text);
	json_decref(line);
	json_decref(rq);
}

void vmrund_end_run(struct vmrund *d, const char *id, enum run_state st, const char *result, const char *message)
{
	char err[300];
	struct store_run run = { 0 };
	int found = d->store->ops->get(d->store, id, NULL, &run, err, sizeof(err));
	int done = d->store->ops->finish(d->store, id, st, vmrund_wall_ms(), result, message, err, sizeof(err));
	if (done < 0)
		fprintf(stderr, "vmrund: run %s: %s\n", id, err);
	if (done == 1) {
		json_t *r = result ? json_loads(result, 0, NULL) : NULL;
		int64_t queue_ms = found == 1 && run.started_ms ? run.started_ms - run.created_ms : 0;
		metrics_run_ended(&d->m, st, r, queue_ms);
		audit(d, id, found == 1 ? run.tenant : "", st, r, found == 1 ? run.request : NULL, queue_ms, message);
		json_decref(r);
	}
	if (found == 1)
		store_run_free(&run);
	pthread_cond_broadcast(&d->changed);
}

/* A worker exited: how its run ended; lock held. */
static void reap(struct vmrund *d, struct vmrund_active *x, int status)
{
	char dir[PATH_MAX], path[PATH_MAX], message[512] = "";
	vmrund_run_path(d, x->id, NULL, dir, sizeof(dir));
	vmrund_run_path(d, x->id, SPOOL_RESULT, path, sizeof(path));
	char *text = slurp(path, 64u << 20);
	json_t *result = text ? json_loads(text, 0, NULL) : NULL;
	enum run_state st = spool_state_of(result, x->cancel);
	if (result) {
		snprintf(message, sizeof(message), "%s", json_string_value(json_object_get(result, "message")) ?: "");
		if (x->cancel)
			snprintf(message, sizeof(message), "cancelled while running; the VM was destroyed");
	} else {
		char line[400];
		vmrund_run_path(d, x->id, SPOOL_LOG, path, sizeof(path));
		last_log_line(path, line, sizeof(line));
		snprintf(message, sizeof(message), "the worker ended (%s %d) with no result%s%s",
			 WIFSIGNALED(status) ? "signal" : "status",
			 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), *line ? ": " : "", line);
	}
	if (spool_clean(dir, st != RS_CANCELLED) < 0)
		fprintf(stderr, "vmrund: run %s: cleaning %s: %s\n", x->id, dir, strerror(errno));
	vmrund_end_run(d, x->id, st, result ? text : NULL, message);
	sched_finished(&d->sched, x->tenant);
	json_decref(result);
	free(text);
	x->used = false;
}

static void reap_all(struct vmrund *d)
{
	int status;
	for (pid_t pid; (pid = waitpid(-1, &status, WNOHANG)) > 0;) {
		pthread_mutex_lock(&d->lock);
		for (unsigned i = 0; i < d->sched.slots; i++)
			if (d->active[i].used && d->active[i].pid == pid)
				reap(d, &d->active[i], status);
		pthread_mutex_unlock(&d->lock);
	}
}

static void start_queued(struct vmrund *d)
{
	pthread_mutex_lock(&d->lock);
	char id[SCHED_ID_MAX];
	unsigned tenant;
	while (!d->stopping && sched_pick(&d->sched, id, &tenant))
		start_run(d, id, tenant);
	pthread_mutex_unlock(&d->lock);
}

/* Kept output and artifacts past the retention: removed, the run's row
 * stays. */
static void expire_artifacts(struct vmrund *d)
{
	DIR *dir = opendir(d->cfg.run_dir);
	if (!dir)
		return;
	int64_t now = vmrund_wall_ms();
	for (struct dirent *e; (e = readdir(dir));) {
		if (strlen(e->d_name) != STORE_ID_LEN)
			continue;
		pthread_mutex_lock(&d->lock);
		struct store_run run;
		char err[300], path[PATH_MAX];
		if (d->store->ops->get(d->store, e->d_name, NULL, &run, err, sizeof(err)) == 1) {
			if (store_state_terminal(run.state) &&
			    now - run.finished_ms > (int64_t)d->cfg.retention_s * 1000) {
				vmrund_run_path(d, e->d_name, NULL, path, sizeof(path));
				spool_clean(path, false);
			}
			store_run_free(&run);
		}
		pthread_mutex_unlock(&d->lock);
	}
	closedir(dir);
}

static bool any_active(struct vmrund *d)
{
	bool any = false;
	pthread_mutex_lock(&d->lock);
	for (unsigned i = 0; i < d->sched.slots; i++)
		any |= d->active[i].used;
	pthread_mutex_unlock(&d->lock);
	return any;
}

int vmrund_loop(struct vmrund *d, char *err, size_t errlen)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		return errf(err, errlen, "signalfd: %s", strerror(errno));
	int64_t next_expiry = 0;
	for (;;) {
		reap_all(d);
		start_queued(d);
		if (d->stopping && !any_active(d))
			break;
		if (vmrund_now_ms() >= next_expiry) {
			expire_artifacts(d);
			next_expiry = vmrund_now_ms() + 60000;
		}
		struct pollfd p[2] = { { sfd, POLLIN, 0 }, { d->wake_fd, POLLIN, 0 } };
		if (poll(p, 2, 1000) < 0 && errno != EINTR)
			break;
		struct signalfd_siginfo si;
		while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
				pthread_mutex_lock(&d->lock);
				d->stopping = true;
				pthread_mutex_unlock(&d->lock);
			}
		uint64_t n;
		if (read(d->wake_fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
			break;
	}
	close(sfd);
	return 0;
}
