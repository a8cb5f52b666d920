/* The run library without KVM: run_classify (how a run ended, from the
 * facts execute gathers) for every branch, and run_plan_build: the policy's
 * ceilings and allowlist, root's policy file against a caller's, and every
 * path the caller names opened with the caller's rights (finding 1 of
 * issue 12), here as root acting for SUDO_UID 12345. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run.h"

#define CALLER 12345

/* ---- run_classify ---------------------------------------------------------- */

static struct run_result r;
static struct session_result sr;

static struct run_facts facts(enum session_status st)
{
	memset(&r, 0, sizeof(r));
	memset(&sr, 0, sizeof(sr));
	r.nstages = 1;
	for (unsigned i = 0; i < PROTO_MAX_STAGES; i++)
		r.stage[i].term = TERM_ERROR;   /* as run_result_init leaves them */
	return (struct run_facts){ .session = st, .sr = &sr, .timeout_s = 2.5, .vmm_pid = 77, .vmm_said = "" };
}

/* The agent's one EXIT, of the run stage. */
static void one_exit(struct proto_exit e)
{
	sr.stages = sr.exits = 1;
	sr.exit[0] = e;
}

static void classify_exited_and_signaled(void **state)
{
	(void)state;
	struct run_facts f = facts(SESSION_DONE);
	one_exit((struct proto_exit){ .kind = PROTO_END_EXITED, .code = 3, .cpu_ms = 12, .max_rss_kib = 900,
				      .flags = PROTO_EXIT_STDERR_TRUNCATED });
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_EXITED);
	assert_int_equal(r.stage[0].exit_code, 3);
	assert_int_equal(result_exit_status(&r), 3);
	assert_int_equal(r.stage[0].cpu_ms, 12);
	assert_int_equal(r.stage[0].max_rss_kib, 900);
	assert_false(r.stage[0].out_truncated);
	assert_true(r.stage[0].err_truncated);
	assert_string_equal(r.message, "");
	f = facts(SESSION_DONE);
	one_exit((struct proto_exit){ .kind = PROTO_END_SIGNALED, .signal = SIGKILL });
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_SIGNALED);
	assert_int_equal(result_exit_status(&r), 128 + SIGKILL);
}

static void classify_agent_refusals(void **state)
{
	(void)state;
	struct { uint32_t kind; int32_t code; enum termination want; int status; const char *msg; } c[] = {
		{ PROTO_END_DENIED, 0, TERM_DENIED, 126, "the agent refused the program" },
		{ PROTO_END_NOT_FOUND, 0, TERM_NOT_FOUND, 127, "no such program in the guest" },
		{ PROTO_END_ERROR, ENOEXEC, TERM_ERROR, 125, "the agent could not start the program: Exec format error" },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct run_facts f = facts(SESSION_DONE);
		one_exit((struct proto_exit){ .kind = c[i].kind, .code = c[i].code });
		run_classify(&f, &r);
		assert_int_equal(r.term, c[i].want);
		assert_int_equal(result_exit_status(&r), c[i].status);
		assert_string_equal(r.message, c[i].msg);
	}
}

static void classify_no_reset_and_lost(void **state)
{
	(void)state;
	struct run_facts f = facts(SESSION_DONE);
	one_exit((struct proto_exit){ .kind = PROTO_END_EXITED });
	f.vmm_killed = true;
	f.vmm_lost = true;
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_EXITED);   /* the command's result stands */
	assert_string_equal(r.message, "the VM did not reset after the run and was killed; vmm (pid 77) did not die "
				       "within 10000 ms of SIGKILL and was left behind");
}

static void classify_timeout(void **state)
{
	(void)state;
	struct run_facts f = facts(SESSION_TIMEOUT);
	f.vmm_killed = true;
	f.vmm_status = SIGKILL;   /* as wait reports a kill */
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_TIMEOUT);
	assert_int_equal(result_exit_status(&r), 124);
	assert_string_equal(r.message, "the run exceeded its 2.5 s limit; the VM was killed");
}

static void classify_vm_failures(void **state)
{
	(void)state;
	/* vmm exited non-zero: its last line says why */
	struct run_facts f = facts(SESSION_FAILED);
	f.vmm_status = 1 << 8;
	f.vmm_said = "vmm: KVM_CREATE_VM: Permission denied";
	snprintf(sr.error, sizeof(sr.error), "the VM exited before the agent connected");
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_VM_FAILED);
	assert_int_equal(result_exit_status(&r), 125);
	assert_string_equal(r.message, "vmm: KVM_CREATE_VM: Permission denied");
	/* killed by a signal we did not send: its seccomp filter, say */
	f = facts(SESSION_FAILED);
	f.vmm_status = SIGSYS;
	run_classify(&f, &r);
	assert_string_equal(r.message, "vmm died of SIGSYS");
	/* SIGKILL from the host's OOM killer in the run's cgroup: said so,
	 * even when the teardown killed the cgroup too (vmm was still dying
	 * when the session ended); a SIGKILL with no OOM kill counted is only
	 * a SIGKILL */
	f = facts(SESSION_FAILED);
	f.vmm_status = SIGKILL;
	f.oom_kills = 1;
	snprintf(sr.error, sizeof(sr.error), "the agent's connection ended before EXIT");
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_VM_FAILED);
	assert_string_equal(r.message, "the host's OOM killer killed vmm: the run's cgroup reached its memory limit");
	f.vmm_killed = true;
	run_classify(&f, &r);
	assert_string_equal(r.message, "the host's OOM killer killed vmm: the run's cgroup reached its memory limit");
	f.vmm_killed = false;
	f.oom_kills = 0;
	run_classify(&f, &r);
	assert_string_equal(r.message, "vmm died of SIGKILL");
	/* we killed it: the session's own reason */
	f = facts(SESSION_FAILED);
	f.vmm_status = SIGKILL;
	f.vmm_killed = true;
	snprintf(sr.error, sizeof(sr.error), "agent: mount /workspace: No such device");
	run_classify(&f, &r);
	assert_string_equal(r.message, "agent: mount /workspace: No such device");
	f = facts(SESSION_FAILED);
	run_classify(&f, &r);
	assert_string_equal(r.message, "the VM ended without a result");
}

static void classify_cancel_and_start_error(void **state)
{
	(void)state;
	struct run_facts f = facts(SESSION_CANCELLED);
	f.cancelled = true;
	f.vmm_killed = true;
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_ERROR);
	assert_true(r.cancelled);
	assert_string_equal(r.message, "cancelled; the VM was killed");
	f = facts(SESSION_FAILED);
	f.start_error = "jail: clone: Operation not permitted";
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_ERROR);
	assert_false(r.cancelled);
	assert_string_equal(r.message, "jail: clone: Operation not permitted");
}

/* ---- run_plan_build --------------------------------------------------------- */

struct fx {
	char dir[64], vmm[128], guest[128], kernel[160], rootfs[160], manifest[160], sys_policy[128];
	char priv[128], file[160];
	struct run_spec spec;   /* borrows argv and the tests' arrays: never freed */
	struct run_request req;
	struct run_plan plan;
	char *argv[4];
};

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_run.XXXXXX");
	if (!f || !mkdtemp(f->dir) || chmod(f->dir, 0755))
		return -1;
	snprintf(f->vmm, sizeof(f->vmm), "%s/vmm", f->dir);
	snprintf(f->guest, sizeof(f->guest), "%s/guest", f->dir);
	snprintf(f->kernel, sizeof(f->kernel), "%s/vmlinux", f->guest);
	snprintf(f->rootfs, sizeof(f->rootfs), "%s/rootfs.ext4", f->guest);
	snprintf(f->manifest, sizeof(f->manifest), "%s/programs.txt", f->guest);
	snprintf(f->sys_policy, sizeof(f->sys_policy), "%s/system-policy", f->dir);
	snprintf(f->priv, sizeof(f->priv), "%s/private", f->dir);   /* root's, 0700 */
	if (mkdir(f->guest, 0755) || mkdir(f->priv, 0700))
		return -1;
	write_file(f->vmm, "#!/bin/false\n", 0755);
	write_file(f->kernel, "kernel", 0644);
	write_file(f->rootfs, "rootfs", 0644);
	write_file(f->manifest, "/bin/sh\n/usr/bin/true\n/usr/bin/python3\n", 0644);
	f->argv[0] = "true";
	f->spec = (struct run_spec){
		.argv = f->argv, .argc = 1, .timeout_s = 10, .memory_mib = 256, .cpus = 1, .disk_mib = 64,
		.max_output = 1 << 20,
	};
	f->req = (struct run_request){ .spec = &f->spec, .vmm = f->vmm, .guest_dir = f->guest, .system_policy = "" };
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	unsetenv("SUDO_UID");
	unsetenv("SUDO_GID");
	free(f);
	return 0;
}

/* run_plan_build with f's request: its return, r's message and term. */
static int build(struct fx *f)
{
	run_result_init(&r, &f->req);
	return run_plan_build(&f->plan, &f->req, &r);
}

static void as_caller(void)
{
	setenv("SUDO_UID", "12345", 1);
	setenv("SUDO_GID", "12345", 1);
}

static void assert_refused(struct fx *f, const char *msg)
{
	if (build(f) != -1)
		fail_msg("the plan was built; want \"%s\"", msg);
	if (!strstr(r.message, msg))
		fail_msg("message \"%s\" does not say \"%s\"", r.message, msg);
	/* nothing left open */
	assert_int_equal(f->plan.kernel_fd, -1);
	assert_int_equal(f->plan.stdin_fd, -1);
	assert_int_equal(f->plan.artifacts_fd, -1);
}

static void plan_builds_once(void **state)
{
	struct fx *f = *state;
	char *argv[] = { "sh", "-c", "echo hi", NULL };
	char *env[] = { "A=1" };
	f->spec.argv = argv;
	f->spec.argc = 3;
	f->spec.env = env;
	f->spec.nenv = 1;
	f->spec.memory_mib = 512;
	assert_int_equal(build(f), 0);
	assert_true(f->plan.kernel_fd >= 0 && f->plan.rootfs_fd >= 0);
	assert_int_equal(f->plan.stdin_fd, -1);
	assert_int_equal(f->plan.proto.stage[0].argc, 3);
	assert_string_equal(f->plan.proto.stage[0].argv[2], "echo hi");
	assert_int_equal(f->plan.proto.envc, 1);
	assert_int_equal(f->plan.proto.nallow, 3);   /* the manifest */
	assert_int_equal(f->plan.proto.nproc, 256);
	assert_string_equal(f->plan.run_id, r.run_id);
	/* vmm's argv: the jail's paths, the asked-for memory */
	char **v = f->plan.vmm_argv;
	assert_string_equal(v[0], "vmm");
	assert_string_equal(v[4], "/vmlinux");
	assert_string_equal(v[6], "512");
	int n = 0;
	while (v[n])
		n++;
	assert_string_equal(v[n - 1], "root=/dev/vda ro init=/init");
	assert_string_equal(v[12], "/workspace.ext4");
	/* warm: the same VM restored from the jail's snapshot directory */
	assert_false(f->plan.cold);
	v = f->plan.restore_argv;
	for (int i = 0; i < n; i++)
		assert_string_equal(v[i], f->plan.vmm_argv[i]);
	assert_string_equal(v[n], "--restore");
	assert_string_equal(v[n + 1], "/snapshot");
	assert_null(v[n + 2]);
	/* and made without a workspace, into it */
	v = f->plan.snap_argv;
	assert_string_equal(v[11], "--disk");
	assert_string_equal(v[12], "none");
	assert_string_equal(v[6], "512");
	assert_string_equal(v[n], "--snapshot-out");
	assert_string_equal(v[n + 1], "/snapshot");
	assert_null(v[n + 2]);
	run_plan_release(&f->plan);
	assert_int_equal(f->plan.kernel_fd, -1);
	run_plan_release(&f->plan);   /* twice is harmless */
}

static void plan_refuses_program_and_limits(void **state)
{
	struct fx *f = *state;
	f->argv[0] = "cat";
	assert_refused(f, "cat: no such program in the guest image");
	assert_int_equal(r.term, TERM_NOT_FOUND);
	f->argv[0] = "/usr/bin/../bin/sh";
	assert_refused(f, "/usr/bin/../bin/sh is not in the allowlist");
	assert_int_equal(r.term, TERM_DENIED);
	f->argv[0] = "true";
	f->spec.memory_mib = 8192;
	assert_refused(f, "--memory 8192 exceeds the policy's ceiling of 4096");
	assert_int_equal(r.term, TERM_ERROR);
	f->spec.memory_mib = 256;
	f->spec.timeout_s = 301;
	assert_refused(f, "--timeout 301 exceeds the policy's ceiling of 300 s");
}

/* Root's policy file raises ceilings, but only when nobody else could
 * have written it; a caller's --policy may only lower them. */
static void plan_policies(void **state)
{
	struct fx *f = *state;
	if (geteuid() != 0)
		skip();   /* root's policy file must be root's */
	as_caller();
	f->spec.memory_mib = 8192;
	f->req.system_policy = f->sys_policy;
	write_file(f->sys_policy, "max_memory 16384\n", 0644);
	assert_int_equal(build(f), 0);
	run_plan_release(&f->plan);
	write_file(f->sys_policy, "max_memory 16384\n", 0666);
	assert_refused(f, "must be a regular file owned by root and writable by root alone");
	write_file(f->sys_policy, "max_memory 16384\n", 0644);
	snprintf(f->file, sizeof(f->file), "%s/mine", f->dir);
	f->req.policy = f->file;
	write_file(f->file, "max_memory 32768\n", 0644);
	assert_refused(f, "raises the ceiling of 16384; only root's policy may");
	write_file(f->file, "max_memory 1024\n", 0644);
	assert_refused(f, "--memory 8192 exceeds the policy's ceiling of 1024");
	/* root itself may raise with --policy */
	unsetenv("SUDO_UID");
	unsetenv("SUDO_GID");
	write_file(f->file, "max_memory 32768\n", 0644);
	assert_int_equal(build(f), 0);
	run_plan_release(&f->plan);
}

/* Finding 1: "-i /etc/shadow", "-a /root/.ssh" and their kind. */
static void plan_opens_as_the_caller(void **state)
{
	struct fx *f = *state;
	if (geteuid() != 0)
		skip();
	as_caller();
	char secret[192], dest[192];
	snprintf(secret, sizeof(secret), "%s/shadow", f->dir);
	write_file(secret, "root:secret\n", 0600);
	f->req.stdin_file = secret;
	assert_refused(f, "--stdin ");
	assert_non_null(strstr(r.message, "shadow: Permission denied"));
	f->req.stdin_file = NULL;
	snprintf(dest, sizeof(dest), "%s/.ssh", f->priv);
	f->req.artifacts = dest;
	assert_refused(f, "--artifacts ");
	assert_non_null(strstr(r.message, ".ssh: Permission denied"));
	assert_int_not_equal(access(dest, F_OK), 0);
	f->req.artifacts = NULL;
	f->req.workspace = f->priv;
	assert_refused(f, "--workspace ");
	f->req.workspace = NULL;
	f->req.kernel = secret;
	assert_refused(f, "--kernel ");
	f->req.kernel = NULL;
	f->req.rootfs = secret;
	assert_refused(f, "--rootfs ");
	f->req.rootfs = NULL;
	f->req.policy = secret;
	assert_refused(f, "--policy ");
	f->req.policy = NULL;
	/* The built guest too: the caller must be able to read it. */
	assert_int_equal(chmod(f->kernel, 0600), 0);
	assert_refused(f, "vmlinux: Permission denied");
	assert_int_equal(chmod(f->kernel, 0644), 0);
	/* Where they may write, the destination is made, and is theirs. */
	snprintf(dest, sizeof(dest), "%s/out", f->dir);
	assert_int_equal(chmod(f->dir, 0777), 0);
	f->req.artifacts = dest;
	assert_int_equal(build(f), 0);
	struct stat st;
	assert_int_equal(stat(dest, &st), 0);
	assert_int_equal(st.st_uid, CALLER);
	assert_int_equal(st.st_gid, CALLER);
	/* and, the run never having filled it, goes again */
	run_plan_release(&f->plan);
	assert_int_not_equal(access(dest, F_OK), 0);
	/* root's rights are back for the next open */
	assert_int_equal(access(secret, R_OK), 0);
	int fd = open(secret, O_RDONLY);
	assert_true(fd >= 0);
	close(fd);
}

/* A caller's own --rootfs does not bring its own allowlist: the manifest
 * is the built image's (review of issue 12). Root's may. */
static void plan_custom_rootfs_keeps_the_manifest(void **state)
{
	struct fx *f = *state;
	char dir[128], rootfs[192], manifest[192];
	snprintf(dir, sizeof(dir), "%s/mine", f->dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(rootfs, sizeof(rootfs), "%s/rootfs.ext4", dir);
	snprintf(manifest, sizeof(manifest), "%s/programs.txt", dir);
	write_file(rootfs, "rootfs", 0644);
	write_file(manifest, "/usr/bin/perl\n", 0644);
	f->req.rootfs = rootfs;
	f->argv[0] = "perl";
	assert_int_equal(build(f), 0);   /* root: the image's own manifest */
	run_plan_release(&f->plan);
	as_caller();
	assert_refused(f, "perl: no such program in the guest image");
}

/* A FIFO named as a file must not hang the plan, where no signal would
 * interrupt it; as --stdin it is fine. A zeroed plan releases nothing. */
static void plan_fifo_and_zeroed(void **state)
{
	struct fx *f = *state;
	char fifo[192];
	snprintf(fifo, sizeof(fifo), "%s/fifo", f->dir);
	assert_int_equal(mkfifo(fifo, 0644), 0);
	f->req.policy = fifo;
	assert_refused(f, "--policy ");
	assert_non_null(strstr(r.message, "fifo: not a regular file"));
	f->req.policy = NULL;
	f->req.kernel = fifo;
	assert_refused(f, "fifo: not a regular file");
	f->req.kernel = NULL;
	f->req.stdin_file = fifo;
	assert_int_equal(build(f), 0);
	assert_true(f->plan.stdin_fd >= 0);
	assert_int_equal(fcntl(f->plan.stdin_fd, F_GETFL) & O_NONBLOCK, 0);
	run_plan_release(&f->plan);
	struct run_plan zero;
	memset(&zero, 0, sizeof(zero));
	run_plan_release(&zero);
	assert_true(fcntl(0, F_GETFD) >= 0 || errno != EBADF);   /* stdin not closed */
}

/* `vmrun snapshot`'s plan: the guest files and limits a run would have,
 * no program; --cold carried into a run's plan. */
static void plan_snapshot(void **state)
{
	struct fx *f = *state;
	char err[512];
	f->spec.argv = NULL;
	f->spec.argc = 0;
	f->spec.memory_mib = 0;
	f->spec.cpus = 2;
	assert_int_equal(run_plan_snapshot(&f->plan, &f->req, err, sizeof(err)), 0);
	assert_true(f->plan.kernel_fd >= 0 && f->plan.rootfs_fd >= 0);
	assert_int_equal(f->plan.memory_mib, RUN_SPEC_DEFAULT_MEMORY_MIB);
	assert_string_equal(f->plan.snap_argv[6], "256");
	assert_string_equal(f->plan.snap_argv[8], "2");
	assert_string_equal(f->plan.snap_argv[12], "none");
	assert_int_equal(strlen(f->plan.run_id), 32);
	run_plan_release(&f->plan);
	assert_int_equal(f->plan.kernel_fd, -1);
	/* the policy's ceilings hold as for a run */
	f->spec.memory_mib = 8192;
	assert_int_equal(run_plan_snapshot(&f->plan, &f->req, err, sizeof(err)), -1);
	assert_string_equal(err, "--memory 8192 exceeds the policy's ceiling of 4096");
	assert_int_equal(f->plan.kernel_fd, -1);
	f->spec.memory_mib = 256;
	f->req.kernel = "/nonexistent/vmlinux";
	assert_int_equal(run_plan_snapshot(&f->plan, &f->req, err, sizeof(err)), -1);
	assert_string_equal(err, "--kernel /nonexistent/vmlinux: No such file or directory");
	/* a run's --cold */
	f->req.kernel = NULL;
	char *argv[] = { "true", NULL };
	f->spec.argv = argv;
	f->spec.argc = 1;
	f->req.cold = true;
	assert_int_equal(build(f), 0);
	assert_true(f->plan.cold);
	run_plan_release(&f->plan);
}

/* --runtime NAME: that runtime's image and its own allowlist. */
static void plan_runtime(void **state)
{
	struct fx *f = *state;
	char rt[192], path[256];
	snprintf(rt, sizeof(rt), "%s/runtimes", f->guest);
	assert_int_equal(mkdir(rt, 0755), 0);
	snprintf(path, sizeof(path), "%s/javascript.runtime", rt);
	write_file(path, "name: javascript\naliases: js node\nrun: node {file}\nversion: 18.20.4\n", 0644);
	snprintf(path, sizeof(path), "%s/javascript.ext4", rt);
	write_file(path, "image", 0644);
	snprintf(path, sizeof(path), "%s/javascript.programs", rt);
	write_file(path, "/bin/sh\n/usr/bin/node\n", 0644);
	snprintf(f->spec.runtime, sizeof(f->spec.runtime), "node");
	f->argv[0] = "node";
	assert_int_equal(build(f), 0);
	assert_string_equal(f->plan.runtime, "javascript");
	assert_string_equal(f->plan.runtime_version, "18.20.4");
	assert_int_equal(f->plan.proto.nallow, 2);   /* its own allowlist */
	run_plan_release(&f->plan);
	f->argv[0] = "python3";   /* another runtime's program */
	assert_refused(f, "python3: no such program in the guest image");
	assert_int_equal(r.term, TERM_NOT_FOUND);
	f->argv[0] = "node";
	snprintf(f->spec.runtime, sizeof(f->spec.runtime), "ruby");
	assert_refused(f, "--runtime ruby: no such runtime (installed: javascript)");
	snprintf(f->spec.runtime, sizeof(f->spec.runtime), "js");
	f->req.rootfs = f->rootfs;
	assert_refused(f, "--runtime and --rootfs name two root images; give one");
}

/* A c runtime with a compile stage, installed into f's guest directory. */
static void install_c(struct fx *f)
{
	char rt[192], path[256];
	snprintf(rt, sizeof(rt), "%s/runtimes", f->guest);
	assert_int_equal(mkdir(rt, 0755), 0);
	snprintf(path, sizeof(path), "%s/c.runtime", rt);
	write_file(path,
		   "name: c\nversion: 12.2.0\ncompile: gcc -O2 -o /tmp/prog {files}\nrun: /tmp/prog {args}\n"
		   "compile-timeout: 30\ncompile-memory: 512\nrun-timeout: 5\nrun-memory: 128\n",
		   0644);
	snprintf(path, sizeof(path), "%s/c.ext4", rt);
	write_file(path, "image", 0644);
	snprintf(path, sizeof(path), "%s/c.programs", rt);
	write_file(path, "/bin/sh\n/usr/bin/gcc\n", 0644);
}

/* --source: the runtime's templates become a compile and a run stage, with
 * their limits, and the run's own limits follow from them. */
static void plan_source_mode(void **state)
{
	struct fx *f = *state;
	install_c(f);
	char a[192], b[192];
	snprintf(a, sizeof(a), "%s/main.c", f->dir);
	snprintf(b, sizeof(b), "%s/util.c", f->priv);
	write_file(a, "int main(void){return 0;}\n", 0644);
	write_file(b, "int x;\n", 0644);
	const char *sources[] = { a, b };
	char *args[] = { "x", "y z" };
	snprintf(f->spec.runtime, sizeof(f->spec.runtime), "c");
	f->spec.source = true;
	f->req.sources = sources;
	f->req.nsources = 2;
	f->spec.argv = args;
	f->spec.argc = 2;
	f->spec.timeout_s = 0;
	f->spec.memory_mib = 0;
	f->spec.run.cpu_time_ms = 1500;
	assert_int_equal(build(f), 0);
	struct proto_request *p = &f->plan.proto;
	assert_int_equal(p->nstages, 2);
	assert_int_equal(p->stage[0].kind, PROTO_STAGE_COMPILE);
	assert_int_equal(p->stage[0].argc, 6);
	assert_string_equal(p->stage[0].argv[0], "gcc");
	assert_string_equal(p->stage[0].argv[4], "main.c");   /* as named in the workspace */
	assert_string_equal(p->stage[0].argv[5], "util.c");
	assert_int_equal(p->stage[0].memory_kib, 512 * 1024);
	assert_int_equal(p->stage[1].kind, PROTO_STAGE_RUN);
	assert_int_equal(p->stage[1].argc, 3);
	assert_string_equal(p->stage[1].argv[2], "y z");
	assert_int_equal(p->stage[1].cpu_ms, 1500);
	assert_string_equal(p->allow[p->nallow - 1], "/tmp/prog");   /* the compile stage's output */
	assert_int_equal(f->plan.stage_timeout_ms[0], 30000);
	assert_int_equal(f->plan.stage_timeout_ms[1], 5000);
	assert_true(f->plan.timeout_s == 10 + 30 + 5);   /* boot allowance plus the stages' */
	assert_int_equal(f->plan.memory_mib, 512 + 64);
	assert_int_equal(f->plan.nsources, 2);
	assert_true(r.source);
	assert_int_equal(r.nstages, 2);
	assert_int_equal(r.stage[1].limits.memory_mib, 128);
	run_plan_release(&f->plan);
	/* a stage memory above the VM's; a compile limit without a compile
	 * stage is caught by the runtime check below */
	f->spec.memory_mib = 256;
	assert_refused(f, "the compile stage's memory limit of 512 MiB exceeds the VM's 256 MiB (--memory)");
	f->spec.memory_mib = 0;
	f->spec.compile.timeout_s = 400;
	assert_refused(f, "--timeout 415 exceeds the policy's ceiling of 300 s");
	f->spec.compile.timeout_s = 0;
	/* two files of one name; one the caller cannot read; --source without
	 * --runtime */
	sources[1] = "/nonexistent/main.c";
	assert_refused(f, "--source: two files named main.c");
	sources[1] = "/nonexistent/-o";
	assert_refused(f, "--source /nonexistent/-o: a name starting with '-' would read as an option");
	sources[1] = "/nonexistent/artifacts";
	assert_refused(f, "--source /nonexistent/artifacts: not a file name the workspace can hold");
	snprintf(b, sizeof(b), "%s/main.c", f->priv);
	as_caller();
	f->req.nsources = 1;
	sources[0] = b;
	write_file(b, "secret", 0600);
	assert_refused(f, "--source ");
	assert_non_null(strstr(r.message, "Permission denied"));
	f->spec.runtime[0] = '\0';
	assert_refused(f, "--source needs --runtime");
}

/* Facts of a two-stage run: the compile stage's EXIT decides. */
static struct run_facts two_stage(enum session_status st, unsigned stages, unsigned exits)
{
	struct run_facts f = facts(st);
	r.nstages = 2;
	r.source = true;
	r.stage[0].limits.timeout_s = 30;
	r.stage[1].limits.timeout_s = 5;
	sr.stages = stages;
	sr.exits = exits;
	for (unsigned i = 0; i < 2; i++) {
		sr.stage_start_ms[i] = 1000 * (i + 1);
		sr.stage_end_ms[i] = 1000 * (i + 1) + 400;
	}
	f.ended_ms = 9000;
	return f;
}

static void classify_stages(void **state)
{
	(void)state;
	/* compiled, ran, exited 4 */
	struct run_facts f = two_stage(SESSION_DONE, 2, 2);
	sr.exit[0] = (struct proto_exit){ .kind = PROTO_END_EXITED, .stage = 0, .cpu_ms = 300 };
	sr.exit[1] = (struct proto_exit){ .kind = PROTO_END_EXITED, .code = 4, .stage = 1,
					  .flags = PROTO_EXIT_CPU_EXCEEDED };
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_EXITED);
	assert_int_equal(result_exit_status(&r), 4);
	assert_true(r.stage[0].started && r.stage[1].started);
	assert_int_equal(r.stage[0].cpu_ms, 300);
	assert_int_equal(r.stage[1].wall_ms, 400);
	assert_true(r.stage[1].cpu_exceeded);
	assert_ptr_equal(result_final(&r), &r.stage[1]);
	/* a compile error: the compiler's status, no run stage */
	f = two_stage(SESSION_DONE, 1, 1);
	sr.exit[0] = (struct proto_exit){ .kind = PROTO_END_EXITED, .code = 1, .flags = PROTO_EXIT_OOM_KILLED };
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_COMPILE_ERROR);
	assert_int_equal(r.stage[0].term, TERM_EXITED);
	assert_true(r.stage[0].oom_killed);
	assert_false(r.stage[1].started);
	assert_int_equal(result_exit_status(&r), 1);
	assert_string_equal(r.message, "the compile stage failed with status 1");
	assert_ptr_equal(result_final(&r), &r.stage[0]);
	/* the compiler killed by a signal */
	f = two_stage(SESSION_DONE, 1, 1);
	sr.exit[0] = (struct proto_exit){ .kind = PROTO_END_SIGNALED, .signal = SIGKILL };
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_COMPILE_ERROR);
	assert_int_equal(result_exit_status(&r), 128 + SIGKILL);
	/* the compiler not in the image: not a compile error */
	f = two_stage(SESSION_DONE, 1, 1);
	sr.exit[0] = (struct proto_exit){ .kind = PROTO_END_NOT_FOUND };
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_NOT_FOUND);
	assert_string_equal(r.message, "compile stage: no such program in the guest");
	/* the compile stage's own limit: a timeout of that stage, the run
	 * stage never started */
	f = two_stage(SESSION_TIMEOUT, 1, 0);
	sr.stage_timeout = true;
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_TIMEOUT);
	assert_int_equal(r.stage[0].term, TERM_TIMEOUT);
	assert_int_equal(r.stage[0].wall_ms, 9000 - 1000);
	assert_false(r.stage[1].started);
	assert_int_equal(result_exit_status(&r), 124);
	assert_string_equal(r.message, "the compile stage exceeded its 30 s limit; the VM was killed");
	/* the run stage's */
	f = two_stage(SESSION_TIMEOUT, 2, 1);
	sr.exit[0] = (struct proto_exit){ .kind = PROTO_END_EXITED };
	sr.stage_timeout = true;
	run_classify(&f, &r);
	assert_int_equal(r.stage[0].term, TERM_EXITED);
	assert_int_equal(r.stage[1].term, TERM_TIMEOUT);
	assert_string_equal(r.message, "the run stage exceeded its 5 s limit; the VM was killed");
	/* the VM died during the run stage */
	f = two_stage(SESSION_FAILED, 2, 1);
	sr.exit[0] = (struct proto_exit){ .kind = PROTO_END_EXITED };
	run_classify(&f, &r);
	assert_int_equal(r.term, TERM_VM_FAILED);
	assert_int_equal(r.stage[1].term, TERM_VM_FAILED);
	assert_int_equal(result_exit_status(&r), 125);
}

static void plan_refuses_existing_destination(void **state)
{
	struct fx *f = *state;
	f->req.artifacts = f->priv;
	assert_refused(f, "already exists (artifacts go to a fresh directory)");
	struct stat st;
	assert_int_equal(stat(f->priv, &st), 0);   /* and it is left alone */
}

static void caller_decisions(void **state)
{
	(void)state;
	struct caller c;
	char err[256];
	assert_int_equal(caller_decide(1000, 1000, 1000, NULL, NULL, &c, err, sizeof(err)), 0);
	assert_false(c.switch_ids);   /* not root: the kernel checks our rights */
	assert_int_equal(caller_decide(0, 0, 0, NULL, NULL, &c, err, sizeof(err)), 0);
	assert_false(c.switch_ids);
	assert_int_equal(c.uid, 0);
	assert_int_equal(caller_decide(0, 0, 0, "1000", "100", &c, err, sizeof(err)), 0);
	assert_true(c.switch_ids && c.via_sudo);
	assert_int_equal(c.uid, 1000);
	assert_int_equal(c.gid, 100);
	assert_int_equal(caller_decide(1000, 1000, 0, NULL, NULL, &c, err, sizeof(err)), 0);
	assert_true(c.switch_ids);   /* set-uid root acts for its real user */
	assert_int_equal(caller_decide(0, 0, 0, "1000", NULL, &c, err, sizeof(err)), -1);
	assert_int_equal(caller_decide(0, 0, 0, "10x", "1", &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a numeric id"));
	assert_int_equal(caller_decide(0, 0, 0, "4294967295", "1", &c, err, sizeof(err)), -1);
	assert_int_equal(caller_decide(1000, 1000, 1000, "0", "0", &c, err, sizeof(err)), 0);
	assert_int_equal(c.uid, 1000);   /* sudo's variables mean nothing to a non-root vmrun */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(classify_exited_and_signaled),
		cmocka_unit_test(classify_agent_refusals),
		cmocka_unit_test(classify_no_reset_and_lost),
		cmocka_unit_test(classify_timeout),
		cmocka_unit_test(classify_vm_failures),
		cmocka_unit_test(classify_cancel_and_start_error),
		cmocka_unit_test(classify_stages),
		cmocka_unit_test(caller_decisions),
		cmocka_unit_test_setup_teardown(plan_builds_once, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(plan_refuses_program_and_limits, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(plan_policies, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(plan_opens_as_the_caller, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(plan_refuses_existing_destination, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(plan_custom_rootfs_keeps_the_manifest, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(plan_fifo_and_zeroed, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(plan_runtime, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(plan_snapshot, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(plan_source_mode, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests_name("run", tests, NULL, NULL);
}
