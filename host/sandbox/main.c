/* vmrund-sandbox: one sandbox (host/sandbox/supervisor.h).
 *
 *   vmrund-sandbox [--timeout S] [--max-timeout S] [--on-timeout stop|pause]
 *                  [--pause-ttl S] [--max-checkpoints N] [--max-checkpoint-mib M]
 *                  [--from-checkpoint CP | --from-paused P [--resume-timeout S]]
 *                  [--shared SHARED [--owner TOKEN]] DIR VMM GUEST_DIR POLICY
 *
 * DIR holds the sandbox's run spec (request.json: runtime, env, limits,
 * network); POLICY is root's policy file as vmrund read it ("" for none).
 * Its life is S seconds (default 300), extendable through the API up to
 * --max-timeout (default S); --on-timeout pause pauses it when that runs
 * out, --pause-ttl bounds a pause. --from-checkpoint starts it from a
 * checkpoint directory (another sandbox's DIR/checkpoints/NAME): a fork,
 * running what the checkpoint ran. --shared keeps its start, checkpoints
 * and, at a pause, the parked VM in SHARED (a cluster's snapshot_dir/
 * sandboxes/ID), and this process then ends; --from-paused SHARED/paused
 * starts that sandbox again where it was parked, on any node, its life
 * --resume-timeout S or what it had left; --owner is its token in SHARED,
 * without which (another node took the sandbox meanwhile) it parks
 * nothing. It starts a session of its own, so that the
 * vmrund that started it may stop or die without taking the sandbox with
 * it; SIGTERM stops the sandbox. Parse, plan, serve, run, tear down;
 * every message gets "vmrund-sandbox: ". */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "errmsg.h"
#include "run.h"
#include "run_spec.h"
#include "supervisor.h"
#include "spool.h"

#define SPEC_MAX_BYTES (64u << 20)

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("vmrund-sandbox: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void on_log(void *ctx, bool console, const char *text)
{
	(void)ctx;
	say("%s%s", console ? "guest console: " : "", text);
}

struct args {
	double timeout_s, max_timeout_s, pause_ttl_s, max_checkpoints, max_checkpoint_mib;
	bool on_timeout_pause;
	const char *from;            /* --from-checkpoint DIR: a fork; --from-paused DIR: a parked VM */
	bool parked;                 /* from is --from-paused's */
	double resume_timeout_s;     /* --resume-timeout: a parked VM's life from its resume (0: what it had left) */
	const char *shared;          /* --shared */
	const char *owner;           /* --owner */
	const char *dir, *vmm, *guest, *policy;
};

#define USAGE "usage: vmrund-sandbox [--timeout S] [--max-timeout S] [--on-timeout stop|pause] [--pause-ttl S] " \
	      "[--max-checkpoints N] [--max-checkpoint-mib M] [--from-checkpoint DIR | --from-paused DIR " \
	      "[--resume-timeout S]] [--shared DIR [--owner TOKEN]] DIR VMM GUEST_DIR POLICY"

static int parse(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = { { "timeout", required_argument, NULL, 't' },
					      { "max-timeout", required_argument, NULL, 'm' },
					      { "pause-ttl", required_argument, NULL, 'p' },
					      { "on-timeout", required_argument, NULL, 'o' },
					      { "max-checkpoints", required_argument, NULL, 'c' },
					      { "max-checkpoint-mib", required_argument, NULL, 'b' },
					      { "from-checkpoint", required_argument, NULL, 'f' },
					      { "from-paused", required_argument, NULL, 'P' },
					      { "resume-timeout", required_argument, NULL, 'R' },
					      { "shared", required_argument, NULL, 's' },
					      { "owner", required_argument, NULL, 'O' }, { NULL, 0, NULL, 0 } };
	*a = (struct args){ .timeout_s = 300, .max_checkpoints = SBX_DEFAULT_MAX_CHECKPOINTS,
			    .max_checkpoint_mib = SBX_DEFAULT_MAX_CHECKPOINT_MIB };
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if ((c == 'f' || c == 'P') && optarg[0] == '/' && !a->from) {
			a->from = optarg;
			a->parked = c == 'P';
			continue;
		}
		if (c == 's' && optarg[0] == '/') {
			a->shared = optarg;
			continue;
		}
		if (c == 'O' && strlen(optarg) == RUN_OWNER_LEN && strspn(optarg, "0123456789abcdef") == RUN_OWNER_LEN) {
			a->owner = optarg;
			continue;
		}
		if (c == 'b') {
			char *end;
			unsigned long long v = strtoull(optarg, &end, 10);
			if (*end || !v || v > (1ull << 40))
				return say(USAGE), -1;
			a->max_checkpoint_mib = (double)v;
			continue;
		}
		if (c == 'o' && (!strcmp(optarg, "stop") || !strcmp(optarg, "pause"))) {
			a->on_timeout_pause = !strcmp(optarg, "pause");
			continue;
		}
		char *end;
		double v = strchr("tmpcR", c) ? strtod(optarg, &end) : 0;
		if (!strchr("tmpcR", c) || *end || !(v > 0) || v > 366.0 * 86400)
			return say(USAGE), -1;
		*(c == 't' ? &a->timeout_s : c == 'm' ? &a->max_timeout_s : c == 'p' ? &a->pause_ttl_s
						     : c == 'R' ? &a->resume_timeout_s : &a->max_checkpoints) = v;
	}
	if (a->resume_timeout_s && !a->parked)
		return say("--resume-timeout: only with --from-paused"), -1;
	if (argc - optind != 4)
		return say(USAGE), -1;
	if (a->max_timeout_s < a->timeout_s)
		a->max_timeout_s = a->timeout_s;
	a->dir = argv[optind];
	a->vmm = argv[optind + 1];
	a->guest = argv[optind + 2];
	a->policy = argv[optind + 3];
	return 0;
}

static int read_spec(const char *dir, struct run_spec *spec, char *err, size_t errlen)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" SPOOL_REQUEST, dir);
	uint8_t *buf;
	size_t len;
	errno = 0;
	if (spool_read_file(AT_FDCWD, path, SPEC_MAX_BYTES, &buf, &len) < 0)
		return errf(err, errlen, "%.300s: %s", path, errno ? strerror(errno) : "not a regular file of at most 64 MiB");
	char why[400];
	int rc = run_spec_sandbox_from_text((const char *)buf, len, spec, why, sizeof(why));
	free(buf);
	return rc ? errf(err, errlen, "%.300s: %s", path, why) : 0;
}

/* What the plan settled, for GET / and the caps on what the guest sends. */
static void adopt_plan(struct sbx *s, const struct run_plan *plan, const struct args *a)
{
	snprintf(s->id, sizeof(s->id), "%s", plan->run_id);
	s->max_output = plan->max_output;
	s->max_upload = plan->disk_mib << 20;
	s->max_timeout_s = (uint64_t)a->max_timeout_s;
	s->deadline_ms = s->created_ms + (int64_t)(a->timeout_s * 1000.0);
	s->timeout_s = a->timeout_s;
	s->on_timeout_pause = a->on_timeout_pause;
	s->pause_ttl_s = (uint64_t)a->pause_ttl_s;
	s->max_checkpoints = (unsigned)a->max_checkpoints;
	s->max_checkpoint_bytes = (uint64_t)a->max_checkpoint_mib << 20;
	s->limits = json_pack("{s:I,s:I,s:I,s:I,s:f,s:f,s:s}", "memory_mib", (json_int_t)plan->memory_mib, "cpus",
			      (json_int_t)plan->cpus, "disk_mib", (json_int_t)plan->disk_mib, "max_output",
			      (json_int_t)plan->max_output, "timeout_s", a->timeout_s, "max_timeout_s", a->max_timeout_s,
			      "runtime", plan->runtime);
}

int main(int argc, char **argv)
{
	struct args a;
	if (parse(argc, argv, &a))
		return 2;
	(void)setsid();   /* not in vmrund's session: its end is not ours */
	int sigfd = run_cancel_signals();
	if (sigfd < 0) {
		say("signals: %s", strerror(errno));
		return 1;
	}
	static struct sbx s;
	static struct run_spec spec;
	struct run_result *r = calloc(1, sizeof(*r));
	struct run_plan *plan = calloc(1, sizeof(*plan));
	char err[600] = "";
	int status = 1;
	if (!r || !plan || sbx_init(&s, a.dir)) {
		say("%s: %s", a.dir, strerror(errno ? errno : ENOMEM));
		return 1;
	}
	pthread_mutex_lock(&s.mu);
	sbx_set_state(&s, SBX_STARTING, "");
	pthread_mutex_unlock(&s.mu);
	struct sbx_http *http = NULL;
	s.shared = a.shared;
	s.owner = a.owner;
	s.keep = a.shared ? a.shared : a.dir;
	if (read_spec(a.dir, &spec, err, sizeof(err)) ||
	    (a.from && (a.parked ? sbx_unpark(&s, a.from, err, sizeof(err)) : sbx_checkpoint_fork(&s, a.from, err, sizeof(err)))))
		goto out;
	struct run_request req = { .spec = &spec, .vmm = a.vmm, .guest_dir = a.guest, .system_policy = a.policy,
				   .sandbox = true, .from_checkpoint = a.from, .resume_parked = a.parked };
	run_result_init(r, &req);
	if (run_plan_build(plan, &req, r)) {
		snprintf(err, sizeof(err), "%s", r->message);
		goto out;
	}
	adopt_plan(&s, plan, &a);
	/* a new sandbox's start is its workspace before it runs, a fork's its
	 * checkpoint's; a parked VM, or a sandbox that goes on from a
	 * checkpoint of its own, keeps the start it has */
	size_t sl = a.shared ? strlen(a.shared) : 0;
	bool own = a.from && a.shared && !strncmp(a.from, a.shared, sl) && a.from[sl] == '/';
	if (!a.parked && !own)
		snprintf(plan->workspace_start, sizeof(plan->workspace_start), "%s/" RUN_CHECKPOINT_START, s.keep);
	if (a.parked) {   /* it goes on as a resume does: its life, its pauses counted */
		pthread_mutex_lock(&s.mu);
		s.resume_timeout_s = a.resume_timeout_s;
		sbx_set_state(&s, SBX_RESUMING, "");
		pthread_mutex_unlock(&s.mu);
	}
	if (!(http = sbx_http_start(&s, err, sizeof(err))))
		goto release;
	struct sbx_run run = { &s, sigfd };
	plan->serve = sbx_serve;
	plan->paused = sbx_paused;
	plan->ctx = &run;
	plan->log = on_log;
	plan->cancel_fd = sigfd;
	plan->timeout_s = SBX_BOOT_TIMEOUT_S;   /* to READY; its life is the sandbox's own */
	run_execute(plan, r);
	bool began = s.state != SBX_STARTING && !(a.parked && s.state == SBX_RESUMING);
	snprintf(err, sizeof(err), "%s", began ? s.reason : r->message);
	status = 0;
release:
	run_plan_release(plan);
out:
	pthread_mutex_lock(&s.mu);
	if ((s.state == SBX_STARTING || s.state == SBX_RESUMING) && !err[0])
		snprintf(err, sizeof(err), "it did not start");
	/* failed stays failed: a pause or resume lost it, and so does a
	 * parked VM that did not start again (nothing half-restored runs),
	 * unless vmrund gave up waiting (then it is stopped here, and vmrund
	 * leaves it parked); a parked one stays paused, in SHARED */
	struct pollfd told = { sigfd, POLLIN, 0 };
	bool stopped = poll(&told, 1, 0) == 1;   /* SIGTERM: vmrund gave up on it, it did not refuse it */
	if (s.parked && s.state == SBX_PAUSED)
		status = 0;
	else if (s.state == SBX_FAILED || (a.parked && !stopped && (s.state == SBX_STARTING || s.state == SBX_RESUMING)))
		sbx_set_state(&s, SBX_FAILED, err);
	else
		sbx_set_state(&s, SBX_STOPPED, err);
	pthread_mutex_unlock(&s.mu);
	if (status)
		say("%s", err);
	sbx_http_stop(http);
	sbx_release(&s);
	run_spec_free(&spec);
	result_free(r);
	free(r);
	free(plan);
	close(sigfd);
	return status;
}
