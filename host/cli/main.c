/* vmrun: run one command in a fresh microVM. Parse, plan, run, print; the
 * run itself is the run library's (host/run/run.h). This file owns only what
 * a command-line program owns: its options, its signals (taken through a
 * signalfd, which is the run's cancel fd), its output streams, and its one
 * error formatter: every message gets "vmrun: " here and nowhere else. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli.h"
#include "cli_sandbox.h"
#include "sandbox_http.h"
#include "clock.h"
#include "result.h"
#include "run.h"
#include "runtime.h"

struct cli_run {
	char bindir[PATH_MAX], vmm[PATH_MAX + 8], guest[PATH_MAX + 16];
	int sigfd;
};

/* One line on stderr, the program's prefix first. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("vmrun: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void on_log(void *ctx, bool console, const char *text)
{
	bool *console_begun = ctx;
	if (!console) {
		say("%s", text);
		return;
	}
	if (!*console_begun)
		say("guest console:");
	*console_begun = true;
	fprintf(stderr, "  | %s\n", text);
}

/* Streamed output goes straight to our stdout and stderr; a compile
 * stage's, both streams, to stderr, as a compiler's diagnostics would. */
static void on_output(void *ctx, uint32_t kind, uint16_t type, const uint8_t *data, size_t len)
{
	(void)ctx;
	int fd = type == PROTO_STDOUT && kind == PROTO_STAGE_RUN ? 1 : 2;
	while (len) {
		ssize_t k = write(fd, data, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return;   /* our reader went away: the run goes on, output is lost */
		data += k;
		len -= (size_t)k;
	}
}

/* The built binaries and images sit next to each other: build/bin/vmrun,
 * build/bin/vmm, build/guest/{vmlinux,rootfs.ext4,programs.txt} (Image for
 * vmlinux on aarch64, where build/aarch64/ holds the cross-built ones). */
static int locate(struct cli_run *c)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0) {
		say("cannot find our own binary: %s", strerror(errno));
		return -1;
	}
	exe[n] = '\0';
	snprintf(c->bindir, sizeof(c->bindir), "%s", dirname(exe));
	snprintf(c->vmm, sizeof(c->vmm), "%s/vmm", c->bindir);
	snprintf(c->guest, sizeof(c->guest), "%s/../guest", c->bindir);
	return 0;
}

/* After a cancelled run: which signal it was, for the message. */
static void name_signal(int sigfd, struct run_result *r)
{
	struct signalfd_siginfo si;
	if (!r->cancelled || read(sigfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		return;
	const char *n = sigabbrev_np((int)si.ssi_signo);
	result_message(r, "interrupted by SIG%s; %s", n ? n : "?",
		       r->jail.built ? "the VM was killed" : "no VM had started");
}

static void request_from(const struct vmrun_opts *o, const struct cli_run *c, struct run_request *req)
{
	*req = (struct run_request){
		.spec = &o->spec, .workspace = o->workspace, .artifacts = o->artifacts, .stdin_file = o->stdin_file,
		.policy = o->policy, .kernel = o->kernel, .rootfs = o->rootfs, .vmm = c->vmm, .guest_dir = c->guest,
		.allow_weaker_jail = o->allow_weaker_jail, .cold = o->cold, .secret_headers = o->secret_headers,
		.nsecret_headers = o->nsecret_headers, .secret_ca = o->secret_ca, .sources = o->sources,
		.nsources = o->nsources,
	};
}

static void print(const struct vmrun_opts *o, const struct run_result *r)
{
	if (o->json) {
		result_print_json(stdout, r);
		return;
	}
	if (r->message[0] && r->term != TERM_EXITED && r->term != TERM_SIGNALED)   /* compile_error too */
		say("%s: %s", result_termination_name(r->term), r->message);
	else if (r->message[0])
		say("%s", r->message);
	for (size_t i = 0; i < r->artifacts.nskipped; i++)
		say("artifact %s skipped: %s", r->artifacts.skipped[i].path, r->artifacts.skipped[i].reason);
}

/* `vmrun runtimes [--json]`: the installed runtimes, by name. Their
 * names, versions and aliases hold only [a-z0-9+._-] (runtime_load
 * checks), so they print into JSON as they are. */
static int list_runtimes(const struct cli_run *c, int argc, char **argv)
{
	bool json = argc == 3 && !strcmp(argv[2], "--json");
	if (argc > 3 || (argc == 3 && !json)) {
		say("usage: vmrun runtimes [--json]");
		return 125;
	}
	char dir[PATH_MAX + 32], err[512];
	snprintf(dir, sizeof(dir), "%s/runtimes", c->guest);
	struct runtime *list = calloc(RUNTIME_MAX, sizeof(*list));
	int n = list ? runtime_list(dir, list, RUNTIME_MAX, err, sizeof(err)) : -1;
	if (n < 0) {
		say("%s", list ? err : "out of memory");
		free(list);
		return 125;
	}
	if (json)
		putchar('[');
	for (int i = 0; i < n; i++) {
		const struct runtime *rt = &list[i];
		if (!json) {
			printf("%-12s %-10s %s\n", rt->name, rt->version, rt->aliases);
			continue;
		}
		printf("%s{\"name\":\"%s\",\"version\":\"%s\",\"extension\":\"%s\",\"aliases\":[", i ? "," : "", rt->name,
		       rt->version, rt->extension);
		const char *a = rt->aliases;
		for (int k = 0; *(a += strspn(a, " ")); k++) {
			size_t len = strcspn(a, " ");
			printf("%s\"%.*s\"", k ? "," : "", (int)len, a);
			a += len;
		}
		printf("]}");
	}
	if (json)
		puts("]");
	free(list);
	return 0;
}

/* `vmrun snapshot ...`: make the snapshot for those inputs anew (a run's
 * would be made on first use) and print its directory. 0, or 1 with one
 * line; its own statuses, since no command runs. */
static int make_snapshot(const struct cli_run *c, int argc, char **argv)
{
	struct vmrun_opts o;
	char err[512], dir[PATH_MAX];
	int parsed = cli_parse_snapshot(argc, argv, &o, err, sizeof(err));
	if (parsed < 0)
		say("%s", err);
	if (parsed) {
		cli_free(&o);
		return parsed > 0 ? 0 : 1;
	}
	struct run_request req;
	request_from(&o, c, &req);
	struct run_plan *plan = malloc(sizeof(*plan));
	if (!plan) {
		say("out of memory");
		cli_free(&o);
		return 1;
	}
	bool console_begun = false;
	int rc = run_plan_snapshot(plan, &req, err, sizeof(err));
	if (!rc) {
		plan->log = o.verbose ? on_log : NULL;
		plan->ctx = &console_begun;
		plan->cancel_fd = c->sigfd;
		rc = run_snapshot_make(plan, dir, sizeof(dir), err, sizeof(err));
		run_plan_release(plan);
	}
	free(plan);
	cli_free(&o);
	if (rc) {
		say("snapshot: %s", err);
		return 1;
	}
	puts(dir);
	return fflush(stdout) ? 1 : 0;
}

/* `vmrun sandbox ...`: a sandbox of vmrund's (cli_sandbox.h). */
static int sandbox(int argc, char **argv)
{
	struct sbx_cli c;
	char err[600] = "", local[300];
	int parsed = sbx_cli_parse(argc, argv, &c, err, sizeof(err));
	int status = parsed < 0 ? 125 : 0;
	if (parsed < 0)
		say("%s", err);
	if (!parsed) {
		sbxc_local_socket(local, sizeof(local));
		status = sbx_cli_run(&c, sbx_cli_server(&c, local), getenv("VMRUN_API_KEY"), err, sizeof(err));
		if (err[0])
			say("sandbox %s: %s", c.verb_name, err);
	}
	sbx_cli_free(&c);
	return status;
}

int main(int argc, char **argv)
{
	struct vmrun_opts o;
	char err[512];
	struct cli_run c;
	if (argc >= 2 && !strcmp(argv[1], "sandbox"))
		return sandbox(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "runtimes"))
		return locate(&c) ? 125 : list_runtimes(&c, argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "snapshot")) {
		if (locate(&c))
			return 1;
		if ((c.sigfd = run_cancel_signals()) < 0) {
			say("signalfd: %s", strerror(errno));
			return 1;
		}
		int status = make_snapshot(&c, argc, argv);
		close(c.sigfd);
		return status;
	}
	int parsed = cli_parse(argc, argv, &o, err, sizeof(err));
	if (parsed < 0)
		say("%s", err);
	if (parsed) {
		cli_free(&o);
		return parsed > 0 ? 0 : 125;
	}
	if (locate(&c))
		return 125;
	if ((c.sigfd = run_cancel_signals()) < 0) {
		say("signalfd: %s", strerror(errno));
		return 125;
	}
	struct run_request req;
	request_from(&o, &c, &req);
	struct run_result *r = malloc(sizeof(*r));
	struct run_plan *plan = malloc(sizeof(*plan));
	if (!r || !plan) {
		say("out of memory");
		return 125;
	}
	int64_t t0 = clock_mono_ms();
	run_result_init(r, &req);
	bool console_begun = false;
	if (run_plan_build(plan, &req, r) == 0) {
		plan->output = o.json ? NULL : on_output;
		plan->log = o.verbose ? on_log : NULL;
		plan->ctx = &console_begun;
		plan->cancel_fd = c.sigfd;
		run_execute(plan, r);
		run_plan_release(plan);
	}
	r->total = clock_mono_ms() - t0;
	name_signal(c.sigfd, r);
	print(&o, r);
	int status = result_exit_status(r);
	result_free(r);
	free(r);
	free(plan);
	cli_free(&o);
	close(c.sigfd);
	fflush(stdout);
	return status;
}
