/* The run plan without KVM (host/run/run_plan.c; run_classify's tests are
 * test_run_classify.c): run_plan_build: the policy's ceilings and allowlist, root's policy file against a caller's, and every
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

/* The result a plan fills in (its refusals' termination and message). */
static struct run_result r;

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
