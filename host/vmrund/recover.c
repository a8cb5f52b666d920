/* vmrund_open and vmrund_close (host/vmrund/daemon.h): the daemon's
 * resources, and recovery from what this node's previous life left
 * behind, which may have been killed at any instant: its runs' workers,
 * VMs, cgroups and directories are swept, and the store takes the runs
 * back (queued again when their command had not started, else lost).
 * Queued runs need nothing: they are the store's, for any node. */
#include "daemon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "clock.h"
#include "errmsg.h"
#include "judge0_runs.h"
#include "run.h"
#include "sandboxes.h"
#include "spool.h"

#define SWEEP_GRACE_MS 15000   /* a worker left running gets this long to destroy its VM itself */
#define CGROUP_PARENT "/sys/fs/cgroup/vmrun"

/* The ids of one node's runs in one state (each's rows are valid only in
 * the call). */
struct idlist {
	const char *node;
	char (*id)[SCHED_ID_MAX];
	size_t n, cap;
};

static int collect(void *ctx, const struct store_run *run)
{
	struct idlist *l = ctx;
	if (strcmp(run->node, l->node))
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		void *a = realloc(l->id, cap * sizeof(*l->id));
		if (!a)
			return 1;
		l->id = a;
		l->cap = cap;
	}
	snprintf(l->id[l->n++], SCHED_ID_MAX, "%s", run->id);
	return 0;
}

static int list_state(struct vmrund *d, enum run_state st, struct idlist *l, char *err, size_t errlen)
{
	*l = (struct idlist){ .node = d->node };
	int rc = d->store->ops->each(d->store, st, collect, l, err, errlen);
	if (rc > 0)
		errf(err, errlen, "out of memory listing %s runs", store_state_name(st));
	return rc ? -1 : 0;
}

static void idlist_free(struct idlist *l)
{
	free(l->id);
}

/* Whether pid is a worker of this run directory: its command line is
 * "WORKER DIR ...", so a pid reused by anything else is left alone. */
static bool is_worker(struct vmrund *d, pid_t pid, const char *dir)
{
	char path[64], cmd[2 * PATH_MAX + 2];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, cmd, sizeof(cmd) - 1);
	close(fd);
	if (n <= 0)
		return false;
	cmd[n] = '\0';
	size_t wl = strlen(cmd);
	return !strcmp(cmd, d->worker) && (size_t)n > wl + 1 && !strcmp(cmd + wl + 1, dir);
}

static void sweep_worker(struct vmrund *d, const char *dir)
{
	char path[PATH_MAX + 16], text[24] = "";
	snprintf(path, sizeof(path), "%s/worker.pid", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
	if (fd >= 0)
		close(fd);
	pid_t pid = n > 0 ? (pid_t)atoi(text) : 0;
	if (pid <= 1 || !is_worker(d, pid, dir))
		return;
	/* SIGTERM is its cancel: it kills its VM and cleans up as always. */
	kill(pid, SIGTERM);
	for (int64_t end = clock_mono_ms() + SWEEP_GRACE_MS; clock_mono_ms() < end && is_worker(d, pid, dir);)
		usleep(20000);
	if (is_worker(d, pid, dir))
		kill(pid, SIGKILL);
}

/* The run library's cgroup for the run, if its worker left one. */
static void sweep_cgroup(const struct vmrund *d, const char *dir)
{
	char lib[SPOOL_LIB_TMP_MAX + 1];
	if (spool_lib_tmp(d->cfg.run_dir, lib, sizeof(lib)) < 0)
		return;   /* vmrund_open refused it already */
	char path[PATH_MAX + 16], id[40] = "";
	snprintf(path, sizeof(path), "%s/" SPOOL_VM_ID, dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n = fd >= 0 ? read(fd, id, sizeof(id) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n != 32 || strspn(id, "0123456789abcdef") != 32)
		return;
	char cg[PATH_MAX];
	snprintf(cg, sizeof(cg), CGROUP_PARENT "/%s", id);
	snprintf(path, sizeof(path), "%s/cgroup.kill", cg);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) >= 0) {
		if (write(fd, "1", 1) < 0)
			vmrund_say("%s: %s", path, strerror(errno));
		close(fd);
	}
	for (int i = 0; i < 100 && rmdir(cg) < 0 && errno == EBUSY; i++)
		usleep(20000);
	/* and the run library's own run directory, named for the same id */
	char prefix[24];
	snprintf(prefix, sizeof(prefix), "vmrun-%.12s-", id);
	DIR *t = opendir(lib);
	for (struct dirent *e; t && (e = readdir(t));)
		if (!strncmp(e->d_name, prefix, strlen(prefix))) {
			snprintf(path, sizeof(path), "%s/%s", lib, e->d_name);
			spool_clean(path, false);
		}
	if (t)
		closedir(t);
}

static void on_taken_back(void *ctx, const struct store_run *run)
{
	if (store_state_terminal(run->state))
		vmrund_ended(ctx, run);
}

/* This node's previous life: the runs it held are swept here (worker,
 * VM, cgroup, directory), then taken back in the store like a dead
 * node's (queued again if their command had not started, else lost). */
static int recover_own(struct vmrund *d, char *err, size_t errlen)
{
	struct idlist l;
	if (list_state(d, RS_RUNNING, &l, err, errlen))
		return -1;
	for (size_t i = 0; i < l.n; i++) {
		char dir[PATH_MAX];
		vmrund_run_path(d, l.id[i], NULL, dir, sizeof(dir));
		sweep_worker(d, dir);
		sweep_cgroup(d, dir);
		spool_clean(dir, false);
	}
	idlist_free(&l);
	int n = d->store->ops->expire(d->store, d->node, clock_wall_ms(), on_taken_back, d, err, errlen);
	if (n < 0)
		return -1;
	if (n)
		vmrund_say("%d runs were running when this node stopped: taken back", n);
	return 0;
}

/* Directories in run_dir that no live run owns: a terminal run keeps its
 * artifacts only, anything else goes. */
static void sweep_run_dir(struct vmrund *d)
{
	DIR *dir = opendir(d->cfg.run_dir);
	if (!dir)
		return;
	for (struct dirent *e; (e = readdir(dir));) {
		/* the worker's TMPDIR stays; what a dead run left in it goes
		 * with that run (sweep_cgroup) or at the run library's sweep */
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, SPOOL_LIB_TMP) ||
		    !strcmp(e->d_name, VMRUND_SBX_DIR))
			continue;
		struct store_run run;
		char err[300], path[PATH_MAX];
		vmrund_run_path(d, e->d_name, NULL, path, sizeof(path));
		int found = strlen(e->d_name) == STORE_ID_LEN
				    ? d->store->ops->get(d->store, e->d_name, NULL, &run, err, sizeof(err)) : 0;
		spool_clean(path, found == 1 && store_state_terminal(run.state));
		if (found == 1)
			store_run_free(&run);
	}
	closedir(dir);
}

static int mkdirs(const char *path, mode_t mode)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return mkdir(p, mode) < 0 && errno != EEXIST ? -1 : 0;
}

static void parent_dir(const char *path, char *out, size_t len)
{
	snprintf(out, len, "%s", path);
	char *slash = strrchr(out, '/');
	if (slash && slash != out)
		*slash = '\0';
}

static unsigned host_slots(const struct vmrund_config *cfg)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN), pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t mem_mib = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz >> 20 : 1024;
	return config_slots(cfg, cpus > 0 ? (unsigned)cpus : 1, mem_mib);
}

/* The node's room for runs (config_node_size): the machine's memory, and
 * the free space of run_dir's file system, where the workspaces go. */
static void node_size(struct vmrund *d)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t mem_mib = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz >> 20 : 1024;
	struct statvfs fs;
	uint64_t free_mib = statvfs(d->cfg.run_dir, &fs) == 0 ? (uint64_t)fs.f_bavail * fs.f_frsize >> 20 : 0;
	config_node_size(&d->cfg, mem_mib, free_mib, &d->size.memory_mib, &d->size.disk_mib);
	vmrund_say("room for runs: %llu MiB of guest memory%s, %llu MiB of workspaces%s",
		(unsigned long long)d->size.memory_mib, d->cfg.node_memory_mib ? "" : " (from the machine)",
		(unsigned long long)d->size.disk_mib, d->cfg.node_disk_mib ? "" : " (from run_dir's free space)");
}

static int open_files(struct vmrund *d, char *err, size_t errlen)
{
	char dir[PATH_MAX], lib[PATH_MAX];
	parent_dir(d->cfg.state_db, dir, sizeof(dir));
	if (spool_lib_tmp(d->cfg.run_dir, lib, sizeof(lib)) < 0)
		return errf(err, errlen, "run_dir %s: at most %d bytes, so that the run library's sockets under it fit",
			    d->cfg.run_dir, SPOOL_LIB_TMP_MAX - (int)strlen("/" SPOOL_LIB_TMP));
	/* The workspaces live in lib: on run_dir's disk, root's alone. */
	const char *dirs[] = { d->cfg.run_dir, lib, dir };
	bool pg = d->cfg.store[0] != '\0';
	for (size_t i = 0; i < (pg ? 2 : 3); i++)
		if (mkdirs(dirs[i], 0700) < 0 || (i == 1 && chmod(lib, 0700) < 0))
			return errf(err, errlen, "%s: %s", dirs[i], strerror(errno));
	if (!(d->store = store_open(pg ? d->cfg.store : d->cfg.state_db, err, errlen)))
		return -1;
	if (d->cfg.audit_log[0]) {
		parent_dir(d->cfg.audit_log, dir, sizeof(dir));
		int fd = mkdirs(dir, 0700) < 0 ? -1
						: open(d->cfg.audit_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0 || !(d->audit = fdopen(fd, "a"))) {
			if (fd >= 0)
				close(fd);
			return errf(err, errlen, "audit log %s: %s", d->cfg.audit_log, strerror(errno));
		}
	}
	return 0;
}

static int load_runtimes(struct vmrund *d, char *err, size_t errlen)
{
	char dir[PATH_MAX + 16];
	snprintf(dir, sizeof(dir), "%s/runtimes", d->guest);
	if (!(d->rts = calloc(RUNTIME_MAX, sizeof(*d->rts))))
		return errf(err, errlen, "out of memory");
	int n = runtime_list(dir, d->rts, RUNTIME_MAX, err, errlen);
	if (n < 0)
		return -1;
	d->nrts = (size_t)n;
	return 0;
}

/* Whether this host's KVM runs a Linux guest: vmm's own host check
 * (--probe loads the kernel, runs the probe, never starts the guest), once
 * at start, for /readyz; what it said when not. */
static void probe_kvm(struct vmrund *d)
{
	char kernel[PATH_MAX + 16];
	snprintf(kernel, sizeof(kernel), "%s/" RUN_GUEST_KERNEL, d->guest);
	char *argv[] = { d->vmm, "--probe", "--kernel", kernel, "--memory", "32", "--console", "none", NULL };
	char *envp[] = { NULL };
	int p[2];
	snprintf(d->kvm_why, sizeof(d->kvm_why), "vmm --probe did not run");
	if (pipe2(p, O_CLOEXEC) < 0)
		return;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 2);
	pid_t pid;
	int rc = posix_spawn(&pid, d->vmm, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	char said[512] = "";
	size_t n = 0;
	for (ssize_t k; rc == 0 && n < sizeof(said) - 1 && (k = read(p[0], said + n, sizeof(said) - 1 - n)) > 0;)
		n += (size_t)k;
	said[n] = '\0';
	close(p[0]);
	int status = 0;
	if (rc == 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		d->kvm_ok = true;
		return;
	}
	said[strcspn(said, "\n")] = '\0';
	snprintf(d->kvm_why, sizeof(d->kvm_why), "%.290s", rc ? strerror(rc) : *said ? said : "vmm --probe failed");
}

int vmrund_open(struct vmrund *d, const struct vmrund_config *cfg, const char *bindir, char *err, size_t errlen)
{
	memset(d, 0, sizeof(*d));
	d->cfg = *cfg;
	d->wake_fd = -1;
	d->anonymous = -1;
	pthread_mutex_init(&d->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->changed, &ca);
	pthread_condattr_destroy(&ca);
	snprintf(d->worker, sizeof(d->worker), "%.4000s%s", cfg->worker[0] ? cfg->worker : bindir,
		 cfg->worker[0] ? "" : "/vmrund-worker");
	snprintf(d->vmm, sizeof(d->vmm), "%.4000s/vmm", bindir);
	if (cfg->sandbox_supervisor[0])
		snprintf(d->sbx_bin, sizeof(d->sbx_bin), "%s", cfg->sandbox_supervisor);
	else
		snprintf(d->sbx_bin, sizeof(d->sbx_bin), "%.4000s/" VMRUND_SBX_BIN, bindir);
	snprintf(d->guest, sizeof(d->guest), "%.4000s%s", cfg->guest_dir[0] ? cfg->guest_dir : bindir,
		 cfg->guest_dir[0] ? "" : "/../guest");
	if (cfg->node[0])
		snprintf(d->node, sizeof(d->node), "%s", cfg->node);
	else if (gethostname(d->node, sizeof(d->node) - 1) < 0 || !d->node[0])
		snprintf(d->node, sizeof(d->node), "localhost");
	/* no keys file: one implicit tenant, only behind a Unix socket's mode */
	if (!cfg->keys[0] && !cfg->listen_unix[0])
		return errf(err, errlen, "keys: a keys file is required unless vmrund listens on a Unix socket");
	if (cfg->keys[0] ? tenants_load(&d->ts, cfg->keys, err, errlen)
			 : tenants_parse(&d->ts, CONFIG_LOCAL_TENANTS, strlen(CONFIG_LOCAL_TENANTS), err, errlen))
		return -1;
	if (cfg->anonymous_tenant[0] && (d->anonymous = tenants_by_name(&d->ts, cfg->anonymous_tenant)) < 0)
		return errf(err, errlen, "anonymous_tenant %s: not a tenant in %s", cfg->anonymous_tenant, cfg->keys);
	if (load_runtimes(d, err, errlen) || run_policy_ceilings(&d->pol, cfg->policy, err, errlen) ||
	    open_files(d, err, errlen))
		return -1;
	d->slots = host_slots(cfg);
	node_size(d);
	if (sched_rate_init(&d->rate, &d->ts) || !(d->active = calloc(d->slots, sizeof(*d->active))) ||
	    (d->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		return errf(err, errlen, "out of memory");
	for (unsigned i = 0; i < d->slots; i++)
		d->active[i].gate_fd = -1;
	if (recover_own(d, err, errlen) ||
	    d->store->ops->heartbeat(d->store, d->node, (int64_t)cfg->lease_s * 1000, NULL, NULL, err, errlen) < 0)
		return -1;
	sweep_run_dir(d);
	if (vmrund_sbx_open(d, err, errlen))
		return -1;
	/* where the others forward this node's sandboxes' calls */
	char addr[sizeof(cfg->advertise)];
	config_advertise(cfg, addr, sizeof(addr));
	if (d->store->ops->set_address && d->store->ops->set_address(d->store, d->node, addr, err, errlen) < 0)
		return -1;
	if (judge0_callbacks_start(d, err, errlen))
		return -1;
	probe_kvm(d);
	if (!d->kvm_ok)
		vmrund_say("not ready: %s", d->kvm_why);
	return 0;
}

void vmrund_close(struct vmrund *d)
{
	judge0_callbacks_stop(d);
	judge0_stats_free(d);
	vmrund_sbx_close(d);
	store_close(d->store);
	d->store = NULL;
	if (d->audit)
		fclose(d->audit);
	d->audit = NULL;
	if (d->wake_fd >= 0)
		close(d->wake_fd);
	d->wake_fd = -1;
	sched_rate_free(&d->rate);
	for (unsigned i = 0; d->active && i < d->slots; i++)
		if (d->active[i].gate_fd >= 0)
			close(d->active[i].gate_fd);
	free(d->active);
	d->active = NULL;
	free(d->rts);
	d->rts = NULL;
	policy_free(&d->pol);
	tenants_free(&d->ts);
	pthread_cond_destroy(&d->changed);
	pthread_mutex_destroy(&d->lock);
}
