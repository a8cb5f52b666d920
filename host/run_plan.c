/* The run plan: the request checked against the policy, what the caller
 * named opened with the caller's rights, the agent's REQUEST and vmm's
 * command line built once. Nothing here needs KVM or starts a process. */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errmsg.h"
#include "jail.h"
#include "runtime.h"

static void new_run_id(char *id)
{
	uint8_t b[16];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		memset(b, 0, sizeof(b));
	for (int i = 0; i < 16; i++)
		snprintf(id + 2 * i, 3, "%02x", b[i]);
}

void run_result_init(struct run_result *r, const struct run_request *req)
{
	memset(r, 0, sizeof(*r));
	new_run_id(r->run_id);
	r->term = TERM_ERROR;
	r->out.limit = r->err.limit = req->max_output;
	r->limits.timeout_s = req->timeout_s;
	r->limits.memory_mib = req->memory_mib;
	r->limits.cpus = req->cpus;
	r->limits.disk_mib = req->disk_mib;
	r->limits.max_output = req->max_output;
}

/* What a caller-named path must be. */
enum want { WANT_FILE, WANT_STREAM, WANT_DIR };

/* Open a path the caller named, read-only, with the caller's rights: the
 * fd, or -1 with "OPTION PATH: reason" in err. O_NONBLOCK: a FIFO (or a
 * device) must not hang the open, which no signal could interrupt here;
 * only a stream (stdin) may be other than a regular file, and it reads
 * blocking again (the session polls it first). */
static int open_as_caller(const struct run_plan *plan, const char *opt, const char *path, enum want want,
			  char *err, size_t errlen)
{
	int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | (want == WANT_DIR ? O_DIRECTORY : 0);
	int fd = caller_open(&plan->caller, path, flags);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		errf(err, errlen, "%s%s%.300s: %s", opt, *opt ? " " : "", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (want == WANT_FILE && !S_ISREG(st.st_mode)) {
		errf(err, errlen, "%s%s%.300s: not a regular file", opt, *opt ? " " : "", path);
		close(fd);
		return -1;
	}
	if (want == WANT_STREAM)
		(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

/* The guest's files: --kernel and --rootfs as the caller gives them, else
 * the built ones (a --runtime's image), which the caller must be able to
 * read as well. The program manifest sits next to the root image. */
static int open_guest(struct run_plan *plan, const struct run_request *req, FILE **manifest, char *manifest_name,
		      size_t namelen, char *err, size_t errlen)
{
	char kernel[PATH_MAX], rootfs[PATH_MAX], runtimes[PATH_MAX];
	struct runtime rt;
	snprintf(kernel, sizeof(kernel), "%s", req->kernel ? req->kernel : "");
	snprintf(rootfs, sizeof(rootfs), "%s", req->rootfs ? req->rootfs : "");
	if (!req->kernel)
		snprintf(kernel, sizeof(kernel), "%.4000s/vmlinux", req->guest_dir);
	if (req->runtime) {
		if (req->rootfs)
			return errf(err, errlen, "--runtime and --rootfs name two root images; give one");
		snprintf(runtimes, sizeof(runtimes), "%.4000s/runtimes", req->guest_dir);
		if (runtime_find(runtimes, req->runtime, &rt, err, errlen))
			return -1;
		snprintf(rootfs, sizeof(rootfs), "%s", rt.image);
		snprintf(plan->runtime, sizeof(plan->runtime), "%s", rt.name);
		snprintf(plan->runtime_version, sizeof(plan->runtime_version), "%s", rt.version);
	} else if (!req->rootfs) {
		snprintf(rootfs, sizeof(rootfs), "%.4000s/rootfs.ext4", req->guest_dir);
	}
	if (access(plan->vmm, X_OK) < 0)
		return errf(err, errlen, "%s: %s", plan->vmm, strerror(errno));
	if ((plan->kernel_fd = open_as_caller(plan, req->kernel ? "--kernel" : "", kernel, WANT_FILE, err, errlen)) < 0 ||
	    (plan->rootfs_fd = open_as_caller(plan, req->rootfs ? "--rootfs" : "", rootfs, WANT_FILE, err, errlen)) < 0)
		return -1;
	/* The manifest is the allowlist unless a policy names one: next to
	 * the root image for root, but the built image's for anyone else,
	 * whose own --rootfs must not bring its own list along. */
	char *slash = strrchr(rootfs, '/');
	if (req->runtime)
		snprintf(manifest_name, namelen, "%s", rt.programs);
	else if (req->rootfs && plan->caller.uid == 0)
		snprintf(manifest_name, namelen, "%.*s/programs.txt", slash ? (int)(slash - rootfs) : 1,
			 slash ? rootfs : ".");
	else
		snprintf(manifest_name, namelen, "%.4000s/programs.txt", req->guest_dir);
	int fd = open_as_caller(plan, "program manifest", manifest_name, WANT_FILE, err, errlen);
	if (fd < 0)
		return -1;
	if (!(*manifest = fdopen(fd, "re"))) {
		close(fd);
		return errf(err, errlen, "program manifest %s: %s", manifest_name, strerror(errno));
	}
	return 0;
}

/* Root's policy file raises ceilings, so it counts only when nobody else
 * could have written it: a regular file owned by root, writable by root
 * alone. A missing file is no policy. */
static int apply_system_policy(struct policy *pol, const char *path, char *err, size_t errlen)
{
	if (!*path)
		return 0;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : errf(err, errlen, "policy %s: %s", path, strerror(errno));
	struct stat st;
	FILE *f = NULL;
	int rc = -1;
	if (fstat(fd, &st) < 0) {
		errf(err, errlen, "policy %s: %s", path, strerror(errno));
	} else if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) {
		errf(err, errlen, "policy %s: must be a regular file owned by root and writable by root alone", path);
	} else if (!(f = fdopen(fd, "re"))) {
		errf(err, errlen, "policy %s: %s", path, strerror(errno));
	} else {
		fd = -1;
		rc = policy_apply(pol, f, path, POLICY_MAY_RAISE, err, errlen);
	}
	if (f)
		fclose(f);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The built-in policy, root's file over it, the caller's --policy last:
 * root's may raise ceilings, anyone else's only lower them. */
static int load_policy(struct run_plan *plan, const struct run_request *req, FILE *manifest,
		       const char *manifest_name, char *err, size_t errlen)
{
	if (policy_load(&plan->pol, manifest, manifest_name, err, errlen) ||
	    apply_system_policy(&plan->pol, req->system_policy ? req->system_policy : RUN_SYSTEM_POLICY, err, errlen))
		return -1;
	if (!req->policy)
		return 0;
	int fd = open_as_caller(plan, "--policy", req->policy, WANT_FILE, err, errlen);
	if (fd < 0)
		return -1;
	FILE *f = fdopen(fd, "re");
	if (!f) {
		close(fd);
		return errf(err, errlen, "--policy %s: %s", req->policy, strerror(errno));
	}
	bool root = plan->caller.uid == 0;
	int rc = policy_apply(&plan->pol, f, req->policy, root ? POLICY_MAY_RAISE : POLICY_LOWER_ONLY, err, errlen);
	fclose(f);
	return rc;
}

int run_check_limits(const struct run_request *req, const struct policy *pol, char *err, size_t errlen)
{
	struct { const char *opt; uint64_t v, max; } c[] = {
		{ "--memory", req->memory_mib, pol->max_memory_mib }, { "--cpus", req->cpus, pol->max_cpus },
		{ "--disk", req->disk_mib, pol->max_disk_mib },       { "--max-output", req->max_output, pol->max_output },
	};
	if (req->timeout_s > (double)pol->max_timeout_s)
		return errf(err, errlen, "--timeout %g exceeds the policy's ceiling of %llu s", req->timeout_s,
			    (unsigned long long)pol->max_timeout_s);
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		if (c[i].v > c[i].max)
			return errf(err, errlen, "%s %llu exceeds the policy's ceiling of %llu", c[i].opt,
				    (unsigned long long)c[i].v, (unsigned long long)c[i].max);
	return 0;
}

/* The program against the allowlist: 0, or -1 with r's termination and
 * message set. */
static int check_program(const struct run_plan *plan, const struct run_request *req, struct run_result *r)
{
	char resolved[POLICY_PATH_MAX];
	switch (policy_check_program(&plan->pol, req->argv[0], resolved, sizeof(resolved))) {
	case POLICY_DENIED:
		r->term = TERM_DENIED;
		result_message(r, "%s is not in the allowlist", resolved[0] ? resolved : req->argv[0]);
		return -1;
	case POLICY_NOT_FOUND:
		r->term = TERM_NOT_FOUND;
		result_message(r, "%s: no such program in the guest image", req->argv[0]);
		return -1;
	case POLICY_ALLOWED:
		break;
	}
	return 0;
}

/* stdin, the workspace and the artifacts destination, as the caller. The
 * destination is made now, as theirs: where they may not create a
 * directory, neither may the run. */
static int open_io(struct run_plan *plan, const struct run_request *req, char *err, size_t errlen)
{
	if (req->stdin_file &&
	    (plan->stdin_fd = open_as_caller(plan, "--stdin", req->stdin_file, WANT_STREAM, err, errlen)) < 0)
		return -1;
	if (req->workspace &&
	    (plan->workspace_fd = open_as_caller(plan, "--workspace", req->workspace, WANT_DIR, err, errlen)) < 0)
		return -1;
	if (!req->artifacts)
		return 0;
	if (strlen(req->artifacts) >= sizeof(plan->artifacts))
		return errf(err, errlen, "--artifacts: path too long");
	plan->artifacts_fd = caller_mkdir(&plan->caller, req->artifacts);
	if (plan->artifacts_fd < 0)
		return errf(err, errlen, "--artifacts %.300s: %s", req->artifacts,
			    errno == EEXIST ? "already exists (artifacts go to a fresh directory)" : strerror(errno));
	snprintf(plan->artifacts, sizeof(plan->artifacts), "%s", req->artifacts);
	return 0;
}

static void build_request(struct run_plan *plan, const struct run_request *req)
{
	struct proto_request *p = &plan->proto;
	p->argc = (unsigned)req->argc;
	for (int i = 0; i < req->argc; i++)
		p->argv[i] = req->argv[i];
	p->envc = req->nenv;
	for (unsigned i = 0; i < req->nenv; i++)
		p->env[i] = (char *)req->env[i];
	p->nallow = plan->pol.nallow;
	for (unsigned i = 0; i < plan->pol.nallow; i++)
		p->allow[i] = plan->pol.allow[i];
	p->max_output = req->max_output;
	p->nproc = plan->pol.nproc;
	p->nofile = plan->pol.nofile;
	p->fsize = plan->pol.fsize;
}

/* vmm's command line, every path as the jail shows it. */
static void build_vmm_argv(struct run_plan *plan)
{
	snprintf(plan->vmm_memory, sizeof(plan->vmm_memory), "%llu", (unsigned long long)plan->memory_mib);
	snprintf(plan->vmm_cpus, sizeof(plan->vmm_cpus), "%llu", (unsigned long long)plan->cpus);
	char *const argv[] = { "vmm", "--kvm-fd", "3", "--kernel", JAIL_KERNEL, "--memory", plan->vmm_memory,
			       "--cpus", plan->vmm_cpus, "--disk", JAIL_ROOTFS ",ro", "--disk", JAIL_IMAGE,
			       "--vsock-uds", JAIL_RUN "/" PROTO_VSOCK_UDS, "--console", JAIL_RUN "/console",
			       "--console-limit", RUN_CONSOLE_LIMIT, "--cmdline", "root=/dev/vda ro init=/init", NULL };
	_Static_assert(sizeof(argv) / sizeof(argv[0]) <= RUN_VMM_ARGC_MAX, "vmm's argv outgrew the plan");
	memcpy(plan->vmm_argv, argv, sizeof(argv));
}

int run_plan_build(struct run_plan *plan, const struct run_request *req, struct run_result *r)
{
	memset(plan, 0, sizeof(*plan));
	plan->kernel_fd = plan->rootfs_fd = plan->stdin_fd = plan->workspace_fd = plan->artifacts_fd = -1;
	plan->cancel_fd = -1;
	plan->live = true;
	memcpy(plan->run_id, r->run_id, sizeof(plan->run_id));
	plan->timeout_s = req->timeout_s;
	plan->memory_mib = req->memory_mib;
	plan->cpus = req->cpus;
	plan->disk_mib = req->disk_mib;
	plan->max_output = req->max_output;
	snprintf(plan->vmm, sizeof(plan->vmm), "%s", req->vmm);
	plan->allow_weaker_jail = req->allow_weaker_jail;
	char err[512], manifest_name[PATH_MAX + 16];
	FILE *manifest = NULL;
	int rc = -1;
	if (caller_identify(&plan->caller, err, sizeof(err)) ||
	    open_guest(plan, req, &manifest, manifest_name, sizeof(manifest_name), err, sizeof(err)) ||
	    load_policy(plan, req, manifest, manifest_name, err, sizeof(err)) ||
	    run_check_limits(req, &plan->pol, err, sizeof(err))) {
		result_message(r, "%s", err);
		goto out;
	}
	r->limits.nproc = plan->pol.nproc;
	r->limits.nofile = plan->pol.nofile;
	r->limits.fsize = plan->pol.fsize;
	if (check_program(plan, req, r))
		goto out;
	if (open_io(plan, req, err, sizeof(err))) {
		result_message(r, "%s", err);
		goto out;
	}
	build_request(plan, req);
	build_vmm_argv(plan);
	rc = 0;
out:
	if (manifest)
		fclose(manifest);
	if (rc)
		run_plan_release(plan);
	return rc;
}

void run_plan_release(struct run_plan *plan)
{
	if (!plan->live)
		return;   /* zeroed, never built: its fds are not ours */
	int *fds[] = { &plan->kernel_fd, &plan->rootfs_fd, &plan->stdin_fd, &plan->workspace_fd, &plan->artifacts_fd };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
	/* A destination made for a run that never got to extraction goes
	 * again (rmdir: only while it is empty). */
	if (plan->artifacts[0] && !plan->extracted)
		(void)caller_rmdir(&plan->caller, plan->artifacts);
	plan->artifacts[0] = '\0';
	policy_free(&plan->pol);
	plan->live = false;
}
