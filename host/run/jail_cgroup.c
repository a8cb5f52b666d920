/* The run's cgroup: root's under /sys/fs/cgroup/vmrun (v2) or the v1
 * memory and pids hierarchies, or, rootless, under a subtree delegated to
 * us; its limits, killing everything in it, and removing it. */
#include "jail_cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "errmsg.h"
#include "sysfile.h"

#define CGROUP_ROOT  "/sys/fs/cgroup"

/* Tell the spec's owner of a cgroup just made. */
static void made(const struct jail_spec *s, int version, const char *path)
{
	if (s->on_cgroup)
		s->on_cgroup(s->on_cgroup_ctx, version, path);
}

/* Bytes the run may hold: the guest, vmm's own, and the workspace, which
 * jail_charged writes into the run's cgroup (on a disk it is page cache,
 * reclaimed under the ceiling before anything is killed; on a tmpfs it is
 * memory outright, so it must fit); a sandbox's, the pages its pause
 * writes too, as large as its guest at most and charged alike. */
static uint64_t memory_ceiling(const struct jail_spec *s)
{
	return (s->memory_mib + JAIL_MEMORY_OVERHEAD_MIB + (s->image ? s->disk_mib : 0) +
		(s->may_pause ? s->memory_mib : 0)) << 20;
}

/* The run's cgroup v2 under parent (which holds no processes, so its
 * controllers can be given to children), with the run's limits. */
static int cgroup_v2_under(const struct jail_spec *s, struct jail *j, const char *parent, char *err, size_t errlen)
{
	char path[PATH_MAX + 64], val[64];
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", parent);
	if (sysfile_write(path, "+memory +pids") < 0)
		return errf(err, errlen, "jail: enabling the memory and pids controllers in %s: %s", parent,
			    strerror(errno));
	if (s->cpu_quota_pct)
		(void)sysfile_write(path, "+cpu");
	snprintf(j->cgroup, sizeof(j->cgroup), "%s/%s", parent, s->run_id);
	if (mkdir(j->cgroup, 0755) < 0)
		return errf(err, errlen, "jail: cgroup %s: %s", j->cgroup, strerror(errno));
	j->cgroup_version = 2;
	made(s, 2, j->cgroup);
	struct { const char *file; uint64_t v; } lim[] = {
		{ "memory.max", memory_ceiling(s) },
		{ "memory.swap.max", 0 },
		{ "pids.max", s->cpus + JAIL_PIDS_EXTRA },
	};
	for (size_t i = 0; i < sizeof(lim) / sizeof(lim[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", j->cgroup, lim[i].file);
		snprintf(val, sizeof(val), "%llu", (unsigned long long)lim[i].v);
		/* swap.max is absent when the host has no swap accounting */
		if (sysfile_write(path, val) < 0 && !(errno == ENOENT && i == 1))
			return errf(err, errlen, "jail: %s: %s", path, strerror(errno));
	}
	if (s->cpu_quota_pct) {
		snprintf(path, sizeof(path), "%s/cpu.max", j->cgroup);
		snprintf(val, sizeof(val), "%u 100000", s->cpu_quota_pct * 1000);
		if (sysfile_write(path, val) < 0)
			return errf(err, errlen, "jail: %s: %s", path, strerror(errno));
	}
	return 0;
}

static int cgroup_v2(const struct jail_spec *s, struct jail *j, char *err, size_t errlen)
{
	if (mkdir(CGROUP_ROOT "/vmrun", 0755) < 0 && errno != EEXIST)
		return errf(err, errlen, "jail: cgroup " CGROUP_ROOT "/vmrun: %s", strerror(errno));
	(void)sysfile_write(CGROUP_ROOT "/cgroup.subtree_control", "+memory +pids +cpu");
	return cgroup_v2_under(s, j, CGROUP_ROOT "/vmrun", err, errlen);
}

static int cgroup_v1(const struct jail_spec *s, struct jail *j, char *err, size_t errlen)
{
	char path[PATH_MAX + 64], val[64];
	snprintf(j->cgroup, sizeof(j->cgroup), CGROUP_ROOT "/memory/vmrun-%s", s->run_id);
	snprintf(j->cgroup_pids, sizeof(j->cgroup_pids), CGROUP_ROOT "/pids/vmrun-%s", s->run_id);
	if (mkdir(j->cgroup, 0755) < 0)
		return errf(err, errlen, "jail: cgroup %s: %s", j->cgroup, strerror(errno));
	j->cgroup_version = 1;
	made(s, 1, j->cgroup);
	if (mkdir(j->cgroup_pids, 0755) < 0) {
		j->cgroup_pids[0] = '\0';
		return errf(err, errlen, "jail: cgroup %s: %s", j->cgroup_pids, strerror(errno));
	}
	made(s, 1, j->cgroup_pids);
	snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", j->cgroup);
	snprintf(val, sizeof(val), "%llu", (unsigned long long)memory_ceiling(s));
	if (sysfile_write(path, val) < 0)
		return errf(err, errlen, "jail: %s: %s", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/pids.max", j->cgroup_pids);
	snprintf(val, sizeof(val), "%llu", (unsigned long long)(s->cpus + JAIL_PIDS_EXTRA));
	if (sysfile_write(path, val) < 0)
		return errf(err, errlen, "jail: %s: %s", path, strerror(errno));
	return 0;
}

/* Rootless: the highest cgroup v2 directory above ours (ours included)
 * that belongs to us, as systemd's user delegation (Delegate=) leaves it.
 * Returns 0 with its path in dir, or -1 when there is none. */
static int delegated_root(char *dir, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return -1;
	char line[PATH_MAX], own[PATH_MAX] = "";
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::/", 4)) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(own, sizeof(own), "%s", line + 3);
		}
	fclose(f);
	if (!own[0])
		return -1;
	char path[PATH_MAX];
	dir[0] = '\0';
	for (;;) {
		struct stat st;
		snprintf(path, sizeof(path), CGROUP_ROOT "%.4000s", own);
		if (stat(path, &st) < 0 || st.st_uid != getuid() || !strcmp(own, "/"))
			break;
		snprintf(dir, len, "%s", path);
		*strrchr(own, '/') = '\0';
		if (!own[0])
			snprintf(own, sizeof(own), "/");
	}
	return dir[0] ? 0 : -1;
}

/* Rootless: the run's cgroup under <delegated>/vmrun, with the same
 * limits as root's. The delegated root must hold no process itself, or
 * its controllers cannot reach a child (cgroup v2's no-internal-process
 * rule): as under systemd's user manager, where the manager sits in
 * init.scope. */
static int cgroup_delegated(const struct jail_spec *s, struct jail *j, char *err, size_t errlen)
{
	char root[PATH_MAX], path[PATH_MAX + 64];
	if (access(CGROUP_ROOT "/cgroup.controllers", F_OK) < 0 || delegated_root(root, sizeof(root)) < 0)
		return errf(err, errlen, "jail: no cgroup v2 subtree delegated to uid %u (as systemd-run --user "
			    "--scope gives one), so no memory or pids limit for vmm; run as root, or pass "
			    "--allow-weaker-jail to run without them", (unsigned)getuid());
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", root);
	if (sysfile_write(path, "+memory +pids") < 0)
		return errf(err, errlen, "jail: enabling memory and pids in %s (it must hold no process): %s", root,
			    strerror(errno));
	snprintf(path, sizeof(path), "%s/vmrun", root);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return errf(err, errlen, "jail: cgroup %s: %s", path, strerror(errno));
	j->cgroup_delegated = true;
	return cgroup_v2_under(s, j, path, err, errlen);
}

int jail_cgroup_create(const struct jail_spec *s, struct jail *j, char *err, size_t errlen)
{
	if (j->cgroup_made)
		return 0;
	j->cgroup_made = true;
	if (j->rootless) {
		if (cgroup_delegated(s, j, err, errlen) == 0)
			return 0;
		if (!s->allow_weaker || j->cgroup_version)
			return -1;
		err[0] = '\0';
		return 0;   /* accepted: no cgroup at all */
	}
	if (access(CGROUP_ROOT "/cgroup.controllers", F_OK) == 0)
		return cgroup_v2(s, j, err, errlen);
	if (access(CGROUP_ROOT "/memory", F_OK) == 0 && access(CGROUP_ROOT "/pids", F_OK) == 0)
		return cgroup_v1(s, j, err, errlen);
	return errf(err, errlen, "jail: no cgroup v2 at " CGROUP_ROOT " and no v1 memory and pids hierarchies");
}

/* Reads or writes all of len bytes; -1 on error or end of file. */
static int io_all(int fd, void *buf, size_t len, bool wr)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = wr ? write(fd, (char *)buf + done, len - done) : read(fd, (char *)buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

/* What jail_charged's child sends back before out. */
struct charged_head {
	int rc;
	char err[512];
};

/* jail_charged's child: into the run's cgroups, then fn; its result, and
 * out when fn succeeded, back through fd. Never returns. */
static _Noreturn void charged_child(const struct jail *j, int fd, jail_charged_fn fn, void *ctx, void *out,
				    size_t outlen)
{
	struct charged_head h = { .rc = -1 };
	const char *dirs[] = { j->cgroup, j->cgroup_pids };
	/* a supervisor killed mid-copy takes its copier with it */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (size_t i = 0; j->cgroup_version && i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char path[PATH_MAX + 32];
		if (!dirs[i][0])
			continue;
		snprintf(path, sizeof(path), "%s/cgroup.procs", dirs[i]);
		if (sysfile_write(path, "0") < 0) {
			errf(h.err, sizeof(h.err), "jail: joining %s: %s", dirs[i], strerror(errno));
			goto send;
		}
	}
	h.rc = fn(ctx, out, h.err, sizeof(h.err));
send:
	_exit(io_all(fd, &h, sizeof(h), true) || (h.rc == 0 && io_all(fd, out, outlen, true)) ? 1 : 0);
}

int jail_charged(const struct jail_spec *s, struct jail *j, jail_charged_fn fn, void *ctx, void *out, size_t outlen,
		 char *err, size_t errlen)
{
	if (jail_cgroup_create(s, j, err, errlen))
		return -1;
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return errf(err, errlen, "jail: pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		charged_child(j, p[1], fn, ctx, out, outlen);
	}
	int e = errno;
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return errf(err, errlen, "jail: fork: %s", strerror(e));
	}
	struct charged_head h;
	bool got = io_all(p[0], &h, sizeof(h), false) == 0 && (h.rc != 0 || io_all(p[0], out, outlen, false) == 0);
	close(p[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!got) {
		if (WIFSIGNALED(status))
			return errf(err, errlen, "jail: the process writing the run's files in its cgroup was killed by "
				    "signal %d (%s)", WTERMSIG(status),
				    WTERMSIG(status) == SIGKILL ? "the run's memory ceiling, or a kill" : strsignal(WTERMSIG(status)));
		return errf(err, errlen, "jail: the process writing the run's files in its cgroup ended with status %d "
			    "and no answer", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	}
	if (h.rc) {
		h.err[sizeof(h.err) - 1] = '\0';
		return errf(err, errlen, "%s", h.err);
	}
	return 0;
}

/* The pids in a cgroup's procs file, each killed. Returns how many. */
static int kill_procs(const char *dir)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	int n = 0, pid;
	while (fscanf(f, "%d", &pid) == 1) {
		kill(pid, SIGKILL);
		n++;
	}
	fclose(f);
	return n;
}

void jail_kill(struct jail *j)
{
	char path[PATH_MAX + 32];
	if (j->cgroup_version == 2) {
		snprintf(path, sizeof(path), "%s/cgroup.kill", j->cgroup);
		if (sysfile_write(path, "1") == 0)
			return;
	}
	if (j->cgroup_version)
		kill_procs(j->cgroup);
	if (j->pid > 0)
		kill(j->pid, SIGKILL);
}

long long jail_cgroup_number(const char *text, const char *key)
{
	const char *p = text;
	if (key) {
		size_t kl = strlen(key);
		/* "oom_kill" must not take "oom_kill_disable 0" */
		while (p && (strncmp(p, key, kl) || p[kl] != ' '))
			if ((p = strchr(p, '\n')))
				p++;
		if (!p)
			return -1;
		p += kl + 1;
	}
	char *end;
	long long v = strtoll(p, &end, 10);
	return end == p || v < 0 ? -1 : v;
}

long long jail_cgroup_read(const char *dir, const char *file, const char *key)
{
	char path[PATH_MAX + 32], text[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = '\0';
	return jail_cgroup_number(text, key);
}

unsigned long jail_parse_oom_kills(const char *text)
{
	long long n = jail_cgroup_number(text, "oom_kill");
	return n < 0 ? 0 : (unsigned long)n;
}

unsigned long jail_oom_kills(const struct jail *j)
{
	if (!j->cgroup_version)
		return 0;
	long long n = jail_cgroup_read(j->cgroup, j->cgroup_version == 2 ? "memory.events" : "memory.oom_control",
				       "oom_kill");
	return n < 0 ? 0 : (unsigned long)n;
}

void jail_cgroup_remove(struct jail *j)
{
	if (j->cgroup_version) {
		/* The cgroup empties asynchronously after the kill; retry briefly. */
		for (int i = 0; i < 200; i++) {
			bool gone = rmdir(j->cgroup) == 0 || errno == ENOENT;
			if (j->cgroup_pids[0])
				gone = (rmdir(j->cgroup_pids) == 0 || errno == ENOENT) && gone;
			if (gone)
				break;
			jail_kill(j);
			usleep(5000);
		}
	}
	j->cgroup_version = 0;
}

int jail_reclaim_cgroup(int version, const char *path)
{
	struct jail j = { .cgroup_version = version, .uid_fd = -1 };
	snprintf(j.cgroup, sizeof(j.cgroup), "%s", path);
	jail_kill(&j);
	jail_cgroup_remove(&j);
	return access(path, F_OK) == 0 ? -1 : 0;
}
