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
#include "hex.h"
#include "jail.h"
#include "run_net.h"
#include "run_stages.h"
#include "runtime.h"

static void new_run_id(char *id)
{
	uint8_t b[16];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		memset(b, 0, sizeof(b));
	hex_of(b, sizeof(b), id);
}

void run_result_init(struct run_result *r, const struct run_request *req)
{
	struct run_effective e;
	run_spec_effective(req->spec, NULL, &e);
	memset(r, 0, sizeof(*r));
	new_run_id(r->run_id);
	r->term = TERM_ERROR;
	r->nstages = 1;
	for (unsigned i = 0; i < PROTO_MAX_STAGES; i++) {
		r->stage[i].term = TERM_ERROR;
		r->stage[i].out.limit = r->stage[i].err.limit = e.max_output;
	}
	r->limits.timeout_s = e.timeout_s;
	r->limits.memory_mib = e.memory_mib;
	r->limits.cpus = e.cpus;
	r->limits.disk_mib = e.disk_mib;
	r->limits.max_output = e.max_output;
}

/* A path through /proc/PID/root, cwd or fd leads into another process's
 * files or mount namespace: refused by name, with a line that says so
 * (caller_open refuses it too, and with no capability held). */
static int proc_link(const char *opt, const char *path, char *err, size_t errlen)
{
	if (!caller_path_refused(path))
		return 0;
	return errf(err, errlen, "%s%s%.300s: a path through /proc/PID/root, cwd or fd is refused", opt,
		    *opt ? " " : "", path);
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
	if (proc_link(opt, path, err, errlen))
		return -1;
	int fd = caller_open(&plan->caller, path, flags);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		/* Acting for someone else, openat2 refuses /proc's links with
		 * ELOOP: say so, the symlink that led there being the caller's. */
		bool link = fd < 0 && errno == ELOOP && plan->caller.switch_ids;
		errf(err, errlen, "%s%s%.300s: %s", opt, *opt ? " " : "", path,
		     link ? "too many levels of symbolic links, or one to /proc's links into a process (refused)"
			  : strerror(errno));
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
static int open_guest(struct run_plan *plan, const struct run_request *req, struct runtime *rt, FILE **manifest,
		      char *manifest_name, size_t namelen, char *err, size_t errlen)
{
	char kernel[PATH_MAX], rootfs[PATH_MAX], runtimes[PATH_MAX];
	snprintf(kernel, sizeof(kernel), "%s", req->kernel ? req->kernel : "");
	snprintf(rootfs, sizeof(rootfs), "%s", req->rootfs ? req->rootfs : "");
	if (!req->kernel)
		snprintf(kernel, sizeof(kernel), "%.4000s/%s", req->guest_dir, RUN_GUEST_KERNEL);
	if (req->spec->runtime[0]) {
		if (req->rootfs)
			return errf(err, errlen, "--runtime and --rootfs name two root images; give one");
		snprintf(runtimes, sizeof(runtimes), "%.4000s/runtimes", req->guest_dir);
		if (runtime_find(runtimes, req->spec->runtime, rt, err, errlen))
			return -1;
		snprintf(rootfs, sizeof(rootfs), "%s", rt->image);
		snprintf(plan->runtime, sizeof(plan->runtime), "%s", rt->name);
		snprintf(plan->runtime_version, sizeof(plan->runtime_version), "%s", rt->version);
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
	if (req->spec->runtime[0])
		snprintf(manifest_name, namelen, "%s", rt->programs);
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
	    apply_system_policy(&plan->pol, req->system_policy ? req->system_policy : POLICY_SYSTEM_FILE, err, errlen))
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

int run_policy_ceilings(struct policy *pol, const char *path, char *err, size_t errlen)
{
	if (policy_load(pol, NULL, NULL, err, errlen))
		return -1;
	if (apply_system_policy(pol, path, err, errlen)) {
		policy_free(pol);
		return -1;
	}
	return 0;
}

/* A stage's program against the allowlist: 0, or -1 with r's termination
 * and message set. The program a compile stage writes (compiled) is not
 * in the image; it is allowed as the compile stage's output. */
static int check_program(const struct run_plan *plan, const char *prog, const char *compiled, struct run_result *r)
{
	char resolved[POLICY_PATH_MAX];
	if (compiled && !strcmp(prog, compiled))
		return 0;
	switch (policy_check_program(&plan->pol, prog, resolved, sizeof(resolved))) {
	case POLICY_DENIED:
		r->term = TERM_DENIED;
		result_message(r, "%s is not in the allowlist", resolved[0] ? resolved : prog);
		return -1;
	case POLICY_NOT_FOUND:
		r->term = TERM_NOT_FOUND;
		result_message(r, "%s: no such program in the guest image", prog);
		return -1;
	case POLICY_ALLOWED:
		break;
	}
	return 0;
}

/* What a source file is called in the workspace: its path's last part. */
static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* Source mode's files, as the caller, each under its base name. */
static int open_sources(struct run_plan *plan, const struct run_request *req, char *err, size_t errlen)
{
	for (unsigned i = 0; i < req->nsources; i++) {
		const char *path = req->sources[i], *base = base_name(path);
		if (!*base || strlen(base) > NAME_MAX || !strcmp(base, ".") || !strcmp(base, "..") ||
		    !strcmp(base, PROTO_ARTIFACTS_DIR))
			return errf(err, errlen, "--source %.300s: not a file name the workspace can hold", path);
		/* It becomes a word of the compile or run command. */
		if (base[0] == '-')
			return errf(err, errlen, "--source %.300s: a name starting with '-' would read as an option", path);
		for (unsigned j = 0; j < i; j++)
			if (!strcmp(plan->source_name[j], base))
				return errf(err, errlen, "--source: two files named %.300s", base);
		snprintf(plan->source_name[i], sizeof(plan->source_name[i]), "%s", base);
		if ((plan->source_fd[i] = open_as_caller(plan, "--source", path, WANT_FILE, err, errlen)) < 0)
			return -1;
		plan->nsources = i + 1;
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
	if (open_sources(plan, req, err, errlen))
		return -1;
	if (!req->artifacts)
		return 0;
	if (strlen(req->artifacts) >= sizeof(plan->artifacts))
		return errf(err, errlen, "--artifacts: path too long");
	if (proc_link("--artifacts", req->artifacts, err, errlen))
		return -1;
	plan->artifacts_fd = caller_mkdir(&plan->caller, req->artifacts);
	if (plan->artifacts_fd < 0)
		return errf(err, errlen, "--artifacts %.300s: %s", req->artifacts,
			    errno == EEXIST ? "already exists (artifacts go to a fresh directory)" : strerror(errno));
	snprintf(plan->artifacts, sizeof(plan->artifacts), "%s", req->artifacts);
	return 0;
}

/* The agent's REQUEST: argv mode's one stage (source mode's were built by
 * run_stages_build), the grants, the allowlist and the limits. */
static void build_request(struct run_plan *plan, const struct run_request *req, const char *compiled)
{
	struct proto_request *p = &plan->proto;
	p->sandbox = plan->sandbox;
	if (!plan->nstages_built && !plan->sandbox) {
		p->nstages = 1;
		p->stage[0] = (struct proto_stage){ .kind = PROTO_STAGE_RUN, .argc = req->spec->argc };
		for (unsigned i = 0; i < req->spec->argc; i++)
			p->stage[0].argv[i] = req->spec->argv[i];
	}
	p->envc = req->spec->nenv;
	for (unsigned i = 0; i < req->spec->nenv; i++)
		p->env[i] = req->spec->env[i];
	p->nallow = plan->pol.nallow;
	for (unsigned i = 0; i < plan->pol.nallow; i++)
		p->allow[i] = plan->pol.allow[i];
	if (compiled && p->nallow < PROTO_MAX_ALLOW)
		p->allow[p->nallow++] = (char *)compiled;
	p->max_output = plan->max_output;
	p->nproc = plan->pol.nproc;
	p->nofile = plan->pol.nofile;
	p->fsize = plan->pol.fsize;
}

/* Source mode: the stages from the runtime's templates, with e's limits,
 * into plan and r. */
static int plan_stages(struct run_plan *plan, const struct run_request *req, const struct runtime *rt,
		       const struct run_effective *e, const char **compiled, struct run_result *r, char *err,
		       size_t errlen)
{
	if (!req->spec->runtime[0])
		return errf(err, errlen, "--source needs --runtime (see `vmrun runtimes`)");
	if (req->nsources > RUN_MAX_SOURCES)
		return errf(err, errlen, "--source: at most %d files", RUN_MAX_SOURCES);
	const char *names[RUN_MAX_SOURCES];
	for (unsigned i = 0; i < req->nsources; i++)
		names[i] = base_name(req->sources[i]);
	struct run_stages st = { .proto = &plan->proto, .store = plan->stage_store, .storelen = sizeof(plan->stage_store) };
	if (run_stages_build(&st, req->spec, e, rt, names, req->nsources, r, err, errlen))
		return -1;
	memcpy(plan->stage_timeout_ms, st.stage_timeout_ms, sizeof(plan->stage_timeout_ms));
	*compiled = st.compiled;
	plan->nstages_built = true;
	return 0;
}

/* A secret header's value: FILE's contents, read as the caller (or with
 * vmrun's own rights for root's policy: own), without one trailing
 * newline. 0, or -1 with why. */
static int read_secret(const struct run_plan *plan, const char *what, const char *file, bool own, char *value,
		       size_t cap, char *err, size_t errlen)
{
	int fd = own ? open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
		     : open_as_caller(plan, what, file, WANT_FILE, err, errlen);
	if (own && fd < 0)
		return errf(err, errlen, "%s %.200s: %s", what, file, strerror(errno));
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, value, cap - 1);
	char extra;
	bool more = n >= 0 && read(fd, &extra, 1) > 0;
	close(fd);
	if (n < 0 || more)
		return errf(err, errlen, "%s %.200s: %s", what, file, n < 0 ? strerror(errno) : "longer than allowed");
	value[n] = '\0';
	if (n && value[n - 1] == '\n')
		value[--n] = '\0';
	return 0;
}

/* --secret-header HOST:HEADER=@FILE (or root's policy's secret_header:
 * own) into c, with the rule that lets the proxy reach HOST:443 (within
 * the ceiling). */
static int plan_secret(const struct run_plan *plan, const char *spec, bool own, struct proxy_config *c, char *err,
		       size_t errlen)
{
	const char *what = own ? "policy secret_header" : "--secret-header";
	char hh[NET_HOST_MAX + 80], why[256], shown[120];
	const char *at = strstr(spec, "=@");
	if (!at || (size_t)(at - spec) >= sizeof(hh))
		return errf(err, errlen, "%s %s: not HOST:HEADER=@FILE", what, errmsg_printable(shown, sizeof(shown), spec));
	if (c->nsecrets >= PROXY_SECRETS_MAX || c->nrules >= PROXY_RULES_MAX)
		return errf(err, errlen, "%s: at most %u secret headers in all", what, PROXY_SECRETS_MAX);
	snprintf(hh, sizeof(hh), "%.*s", (int)(at - spec), spec);
	char *value = malloc(PROXY_SECRET_MAX + 2);
	if (!value)
		return errf(err, errlen, "out of memory");
	int rc = read_secret(plan, what, at + 2, own, value, PROXY_SECRET_MAX + 2, err, errlen);
	struct proxy_secret *s = &c->secrets[c->nsecrets];
	if (!rc && proxy_secret_parse(hh, value, s, why, sizeof(why)) < 0)
		rc = errf(err, errlen, "%s %s: %s", what, errmsg_printable(shown, sizeof(shown), hh), why);
	explicit_bzero(value, PROXY_SECRET_MAX + 2);
	free(value);
	if (rc)
		return -1;
	struct net_rule r = { .kind = NET_RULE_HOST, .port = 443 };
	snprintf(r.host, sizeof(r.host), "%s", s->host);
	if (!policy_net_admits(&plan->pol, &r))
		return errf(err, errlen, "%s %s: %s:443 is beyond the policy's network ceiling", what,
			    errmsg_printable(shown, sizeof(shown), hh), s->host);
	c->rules[c->nrules++] = r;
	c->nsecrets++;
	return 0;
}

/* The run's network, when it has any: plan->net and the agent's NET
 * field. 0, or -1 with r's message set. */
static int plan_net(struct run_plan *plan, const struct run_request *req, struct run_result *r)
{
	char err[512];
	struct proxy_config *c = malloc(sizeof(*c));
	if (!c) {
		result_message(r, "out of memory");
		return -1;
	}
	proxy_config_init(c);
	int has = run_net_plan(&plan->pol, req, c, err, sizeof(err));
	const struct policy *p = &plan->pol;
	for (unsigned i = 0; has >= 0 && i < p->net.nsecret; i++)
		has = plan_secret(plan, p->net.secret[i], true, c, err, sizeof(err)) < 0 ? -1 : 1;
	for (unsigned i = 0; has >= 0 && i < req->nsecret_headers; i++)
		has = plan_secret(plan, req->secret_headers[i], false, c, err, sizeof(err)) < 0 ? -1 : 1;
	/* One CA file for the run's secrets: root's, when root's policy has
	 * secrets (a caller's CA must not vouch for the platform's hosts). */
	if (has >= 0 && req->secret_ca && p->net.nsecret)
		has = errf(err, sizeof(err), "--secret-ca: the policy's secret headers use its own CAs");
	else if (has >= 0 && req->secret_ca && !req->nsecret_headers)
		has = errf(err, sizeof(err), "--secret-ca needs --secret-header");
	else if (has > 0 && (req->secret_ca || (p->net.nsecret && p->net.secret_ca[0]))) {
		plan->secret_ca_fd = req->secret_ca
					     ? open_as_caller(plan, "--secret-ca", req->secret_ca, WANT_FILE, err, sizeof(err))
					     : open(p->net.secret_ca, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (plan->secret_ca_fd < 0 && !req->secret_ca)
			errf(err, sizeof(err), "policy secret_ca %.200s: %s", p->net.secret_ca, strerror(errno));
		c->ca_fd = true;
		has = plan->secret_ca_fd < 0 ? -1 : 1;
	}
	if (has <= 0) {
		explicit_bzero(c, sizeof(*c));
		free(c);
		if (has < 0)
			result_message(r, "%s", err);
		return has;
	}
	plan->net = c;
	plan->proto.net_port = PROTO_NET_VSOCK_PORT;
	return 0;
}

/* One vmm command line into out, every path as the jail shows it, with
 * workspace as the second disk; then opt and its dir when opt is set
 * (NULL ends the list there). */
static void vmm_argv_into(struct run_plan *plan, char **out, const char *workspace, const char *opt, const char *dir,
			  const char *opt2, const char *dir2, const char *opt3, const char *dir3)
{
	char *const argv[] = { "vmm", "--kvm-fd", "3", "--kernel", JAIL_KERNEL, "--memory", plan->vmm_memory,
			       "--cpus", plan->vmm_cpus, "--disk", JAIL_ROOTFS ",ro", "--disk", (char *)workspace,
			       "--vsock-uds", JAIL_RUN "/" PROTO_VSOCK_UDS, "--console", JAIL_RUN "/console",
			       "--console-limit", RUN_CONSOLE_LIMIT, "--cmdline", "root=/dev/vda ro init=/init",
			       (char *)opt, (char *)dir, (char *)opt2, (char *)dir2, (char *)opt3, (char *)dir3, NULL };
	_Static_assert(sizeof(argv) / sizeof(argv[0]) <= RUN_VMM_ARGC_MAX, "vmm's argv outgrew the plan");
	memcpy(out, argv, sizeof(argv));
}

/* vmm's command lines: a cold boot, a restore, and the boot that makes
 * the snapshot. The snapshot's VM is the run's but for the workspace, an
 * empty slot there (the restore puts the run's image in it). */
static void build_vmm_argv(struct run_plan *plan)
{
	snprintf(plan->vmm_memory, sizeof(plan->vmm_memory), "%llu", (unsigned long long)plan->memory_mib);
	snprintf(plan->vmm_cpus, sizeof(plan->vmm_cpus), "%llu", (unsigned long long)plan->cpus);
	/* a sandbox's may pause, into the socket directory (/run), its own */
	const char *pause = plan->sandbox ? "--pause-out" : NULL;
	vmm_argv_into(plan, plan->vmm_argv, JAIL_IMAGE, NULL, NULL, NULL, NULL, NULL, NULL);
	vmm_argv_into(plan, plan->restore_argv, JAIL_IMAGE, "--restore", JAIL_SNAPSHOT, pause, JAIL_PAUSE_DIR, NULL,
		      NULL);
	vmm_argv_into(plan, plan->resume_argv, JAIL_IMAGE, "--restore", JAIL_SNAPSHOT, "--pause-out", JAIL_PAUSE_DIR,
		      "--resume", JAIL_PAUSE_DIR);
	vmm_argv_into(plan, plan->snap_argv, "none", "--snapshot-out", JAIL_SNAPSHOT, NULL, NULL, NULL, NULL);
}

/* What every plan starts from: nothing open, nothing owned. */
static void plan_init(struct run_plan *plan, const struct run_request *req)
{
	memset(plan, 0, sizeof(*plan));
	plan->kernel_fd = plan->rootfs_fd = plan->stdin_fd = plan->workspace_fd = plan->artifacts_fd = -1;
	for (unsigned i = 0; i < RUN_MAX_SOURCES; i++)
		plan->source_fd[i] = -1;
	plan->cancel_fd = -1;
	plan->secret_ca_fd = -1;
	plan->live = true;
	snprintf(plan->vmm, sizeof(plan->vmm), "%s", req->vmm);
	plan->allow_weaker_jail = req->allow_weaker_jail;
	plan->cold = req->cold;
	plan->sandbox = req->sandbox;
	if (req->sandbox && req->from_checkpoint)
		snprintf(plan->from_checkpoint, sizeof(plan->from_checkpoint), "%s", req->from_checkpoint);
	plan->resume_parked = req->sandbox && req->from_checkpoint && req->resume_parked;
	if (req->workspace_image)
		snprintf(plan->workspace_image, sizeof(plan->workspace_image), "%s", req->workspace_image);
}

int run_plan_snapshot(struct run_plan *plan, const struct run_request *req, char *err, size_t errlen)
{
	plan_init(plan, req);
	new_run_id(plan->run_id);
	struct run_effective e;
	run_spec_effective(req->spec, NULL, &e);
	char manifest_name[PATH_MAX + 16];
	struct runtime rt = { 0 };
	FILE *manifest = NULL;
	int rc = -1;
	if (caller_identify(&plan->caller, err, errlen) ||
	    open_guest(plan, req, &rt, &manifest, manifest_name, sizeof(manifest_name), err, errlen) ||
	    load_policy(plan, req, manifest, manifest_name, err, errlen) ||
	    run_spec_check(req->spec, &e, &plan->pol, RUN_SPEC_WORDS_CLI, err, errlen))
		goto out;
	plan->memory_mib = e.memory_mib;
	plan->cpus = e.cpus;
	build_vmm_argv(plan);
	rc = 0;
out:
	if (manifest)
		fclose(manifest);
	if (rc)
		run_plan_release(plan);
	return rc;
}

int run_plan_build(struct run_plan *plan, const struct run_request *req, struct run_result *r)
{
	plan_init(plan, req);
	memcpy(plan->run_id, r->run_id, sizeof(plan->run_id));
	struct run_effective e;   /* every default applied, source mode's from the runtime */
	char err[512], manifest_name[PATH_MAX + 16];
	struct runtime rt = { 0 };
	const char *compiled = NULL;
	FILE *manifest = NULL;
	int rc = -1;
	int ok = !caller_identify(&plan->caller, err, sizeof(err)) &&
		 !open_guest(plan, req, &rt, &manifest, manifest_name, sizeof(manifest_name), err, sizeof(err));
	if (ok)
		run_spec_effective(req->spec, req->spec->source ? &rt : NULL, &e);
	if (ok && req->sandbox && req->spec->source) {
		ok = 0;
		snprintf(err, sizeof(err), "a sandbox runs no program of its own: no source files");
	}
	/* a sandbox of a runtime that compiles may run what its compiler
	 * writes, as a run's stages may (POST /v1/judge compiles in one) */
	if (ok && req->sandbox && run_stages_compiled(&rt, plan->compiled, sizeof(plan->compiled)))
		compiled = plan->compiled;
	if (!ok || (req->spec->source && plan_stages(plan, req, &rt, &e, &compiled, r, err, sizeof(err))) ||
	    load_policy(plan, req, manifest, manifest_name, err, sizeof(err)) ||
	    run_spec_check(req->spec, &e, &plan->pol, RUN_SPEC_WORDS_CLI, err, sizeof(err))) {
		result_message(r, "%s", err);
		goto out;
	}
	snprintf(r->runtime, sizeof(r->runtime), "%s", plan->runtime);
	snprintf(r->runtime_version, sizeof(r->runtime_version), "%s", plan->runtime_version);
	plan->timeout_s = r->limits.timeout_s = e.timeout_s;
	plan->memory_mib = r->limits.memory_mib = e.memory_mib;
	plan->cpus = e.cpus;
	plan->disk_mib = e.disk_mib;
	plan->max_output = e.max_output;
	r->limits.nproc = plan->pol.nproc;
	r->limits.nofile = plan->pol.nofile;
	r->limits.fsize = plan->pol.fsize;
	for (unsigned i = 0; plan->nstages_built && i < plan->proto.nstages; i++)
		if (check_program(plan, plan->proto.stage[i].argv[0], compiled, r))
			goto out;
	if (!plan->nstages_built && !plan->sandbox && check_program(plan, req->spec->argv[0], NULL, r))
		goto out;
	if (open_io(plan, req, err, sizeof(err))) {
		result_message(r, "%s", err);
		goto out;
	}
	if (plan_net(plan, req, r) < 0)
		goto out;
	build_request(plan, req, compiled);
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
	for (unsigned i = 0; i < plan->nsources; i++) {
		if (plan->source_fd[i] >= 0)
			close(plan->source_fd[i]);
		plan->source_fd[i] = -1;
	}
	plan->nsources = 0;
	/* A destination made for a run that never got to extraction goes
	 * again (rmdir: only while it is empty). */
	if (plan->artifacts[0] && !plan->extracted)
		(void)caller_rmdir(&plan->caller, plan->artifacts);
	plan->artifacts[0] = '\0';
	policy_free(&plan->pol);
	if (plan->net)
		explicit_bzero(plan->net, sizeof(*plan->net));   /* secret header values */
	free(plan->net);
	plan->net = NULL;
	if (plan->secret_ca_fd >= 0)
		close(plan->secret_ca_fd);
	plan->secret_ca_fd = -1;
	plan->live = false;
}
