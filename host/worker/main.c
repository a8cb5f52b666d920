/* vmrund-worker: one run of vmrund, in its own process, so that one run's
 * failure cannot take down the others or the daemon.
 *
 *   vmrund-worker RUN_DIR VMM GUEST_DIR POLICY
 *
 * POLICY: root's policy file, as vmrund read it ("" for none).
 * Reads RUN_DIR/request.json (host/vmrund/spool.h), writes the request's
 * files and stdin next to it, runs it through the run library with the
 * output streamed to RUN_DIR/output and kept for the result, and writes
 * the result to RUN_DIR/result.json. SIGTERM (vmrund cancelling the run,
 * or vmrund dying: it is our parent-death signal) stops the run through
 * its cancel fd: the VM is killed and everything cleaned up as always.
 * Plan, acquire, run, tear down; every message gets "vmrund-worker: ". */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "errmsg.h"
#include "lines.h"
#include "run_spec.h"
#include "result.h"
#include "run.h"
#include "run_pause.h"
#include "spool.h"
#include "wsdiff.h"

#define WORKER_LOG_LINES 16
#define WORKER_LOG_LINE_MAX 512
/* The largest request file the worker reads back (the canonical request
 * vmrund wrote): four times max_body's default. */
#define REQUEST_MAX_BYTES (64u << 20)

struct worker {
	const char *dir, *vmm, *guest, *policy;
	struct run_spec rq;
	int output_fd, sigfd;
	char files_dir[PATH_MAX], stdin_path[PATH_MAX], artifacts[PATH_MAX];
	char tree_dir[PATH_MAX];                /* source mode's workspace_files; "" none */
	char checkpoint_image[PATH_MAX + 64];   /* a verification run's workspace; "" none */
	char *source_paths[RUN_SPEC_MAX_FILES];
	bool output_failed;
	/* the run library's last progress and guest console lines, said for
	 * a run that went wrong (vmrund copies what we say into its log): a
	 * run that hung has no other trace once its run directory is gone;
	 * long enough for vmm's vsock state line (VM_STATE_LINE_MAX) whole */
	char log[WORKER_LOG_LINES][WORKER_LOG_LINE_MAX];
	unsigned nlog;
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("vmrund-worker: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int read_request(struct worker *w, char *err, size_t errlen)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" SPOOL_REQUEST, w->dir);
	uint8_t *buf;
	size_t len;
	errno = 0;
	if (spool_read_file(AT_FDCWD, path, REQUEST_MAX_BYTES, &buf, &len) < 0)
		return errf(err, errlen, "%.300s: %s", path,
			    errno ? strerror(errno) : "not a regular file of at most 64 MiB"), -1;
	char why[400];
	int rc = run_spec_from_text((const char *)buf, len, &w->rq, why, sizeof(why));
	free(buf);
	if (rc)
		errf(err, errlen, "%.300s: %s", path, why);
	return rc;
}

/* A verification run's checkpoint (vmrund wrote where it is): its start
 * and workspace copied into RUN_DIR first, then, with expect_digest, the
 * change between the copies walked and summed again, and the run made
 * from the copy that was checked: what is checked is what runs. */
static int find_checkpoint(struct worker *w, char *err, size_t errlen)
{
	char path[PATH_MAX], dir[PATH_MAX], from[PATH_MAX + 64], start[PATH_MAX + 64], scratch[PATH_MAX + 64];
	char digest[65];
	uint8_t *buf;
	size_t len;
	bool complete = false;
	if (!w->rq.from_checkpoint[0])
		return 0;
	snprintf(path, sizeof(path), "%s/" SPOOL_CHECKPOINT, w->dir);
	errno = 0;
	if (spool_read_file(AT_FDCWD, path, PATH_MAX - 1, &buf, &len) < 0)
		return errf(err, errlen, "%.300s: %s", path, strerror(errno ? errno : EINVAL)), -1;
	snprintf(dir, sizeof(dir), "%.*s", (int)len, (const char *)buf);
	free(buf);
	snprintf(from, sizeof(from), "%s/" RUN_CHECKPOINT_IMAGE, dir);
	snprintf(w->checkpoint_image, sizeof(w->checkpoint_image), "%s/checkpoint.ext4", w->dir);
	if (run_pause_copy(from, w->checkpoint_image) < 0)
		return errf(err, errlen, "checkpoint %s: %s", w->rq.from_checkpoint,
			    errno == ENOENT ? "it is gone" : strerror(errno)), -1;
	if (!w->rq.expect_digest[0])
		return 0;
	snprintf(from, sizeof(from), "%s/" RUN_CHECKPOINT_START, dir);
	snprintf(start, sizeof(start), "%s/start.ext4", w->dir);
	snprintf(scratch, sizeof(scratch), "%s/diff", w->dir);
	if (run_pause_copy(from, start) < 0)
		return errf(err, errlen, "checkpoint %s: its start: %s", w->rq.from_checkpoint, strerror(errno)), -1;
	int rc = wsdiff_images(start, w->checkpoint_image, scratch, NULL, digest, &complete, err, errlen);
	unlink(start);
	if (rc)
		return -1;
	if (!complete || strcmp(digest, w->rq.expect_digest))
		return errf(err, errlen, "expect_digest: the checkpoint's change is %s%s, not the one approved", digest,
			    complete ? "" : " and not complete"), -1;
	return 0;
}

/* A file at its path under dir (into path), the directories above it
 * made (run_spec_path_check has refused "..", empty parts and absolute
 * paths; dir is this worker's own, where nothing else writes). */
static int write_at_path(const char *dir, const struct run_spec_file *f, char path[PATH_MAX], char *err,
			 size_t errlen)
{
	if (snprintf(path, PATH_MAX, "%s/%s", dir, f->name) >= PATH_MAX)
		return errf(err, errlen, "%.300s: path too long", dir), -1;
	for (char *slash = path + strlen(dir) + 1; (slash = strchr(slash, '/')); *slash++ = '/') {
		*slash = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return errf(err, errlen, "%.300s: %s", path, strerror(errno)), -1;
	}
	if (spool_write_file(path, f->data, f->len, true, f->executable ? 0755 : 0644) < 0)
		return errf(err, errlen, "%.300s: %s", path, strerror(errno)), -1;
	return 0;
}

/* workspace_files: beside the files in argv mode, where RUN_DIR/files is
 * the workspace; in source mode, whose files are the sources, in a tree
 * of their own, RUN_DIR/workspace, copied in beside the sources. */
static int write_tree(struct worker *w, char *err, size_t errlen)
{
	const char *dir = w->files_dir;
	if (w->rq.source && w->rq.nwfiles) {
		snprintf(w->tree_dir, sizeof(w->tree_dir), "%s/" SPOOL_WORKSPACE, w->dir);
		if (mkdir(w->tree_dir, 0755) < 0)
			return errf(err, errlen, "%.300s: %s", w->tree_dir, strerror(errno)), -1;
		dir = w->tree_dir;
	}
	char path[PATH_MAX];
	for (unsigned i = 0; i < w->rq.nwfiles; i++)
		if (write_at_path(dir, &w->rq.wfiles[i], path, err, errlen))
			return -1;
	return 0;
}

/* The request's files into RUN_DIR/files, its stdin beside them. */
static int write_inputs(struct worker *w, char *err, size_t errlen)
{
	snprintf(w->files_dir, sizeof(w->files_dir), "%s/" SPOOL_FILES, w->dir);
	if (mkdir(w->files_dir, 0755) < 0)
		return errf(err, errlen, "%.300s: %s", w->files_dir, strerror(errno)), -1;
	for (unsigned i = 0; i < w->rq.nfiles; i++) {
		char path[PATH_MAX];
		/* a file's name is one part: no directory is made for it */
		if (write_at_path(w->files_dir, &w->rq.files[i], path, err, errlen))
			return -1;
		if (!(w->source_paths[i] = strdup(path)))
			return errf(err, errlen, "out of memory"), -1;
	}
	if (write_tree(w, err, errlen))
		return -1;
	if (w->rq.has_stdin) {
		snprintf(w->stdin_path, sizeof(w->stdin_path), "%s/stdin", w->dir);
		if (spool_write_file(w->stdin_path, w->rq.stdin_data, w->rq.stdin_len, true, 0644) < 0)
			return errf(err, errlen, "%.300s: %s", w->stdin_path, strerror(errno)), -1;
	}
	return 0;
}

/* The run: the spec as stored, and the host's side (this run's files
 * and directories in RUN_DIR, vmm, the guest, root's policy file: the
 * one vmrund checked the spec against). */
static void build_request(const struct worker *w, struct run_request *req)
{
	const struct run_spec *rq = &w->rq;
	*req = (struct run_request){
		.spec = rq, .vmm = w->vmm, .guest_dir = w->guest, .system_policy = w->policy,
		.stdin_file = rq->has_stdin ? w->stdin_path : NULL,
		.artifacts = rq->keep_artifacts ? w->artifacts : NULL,
		.workspace_image = w->checkpoint_image[0] ? w->checkpoint_image : NULL,
	};
	if (rq->source) {
		req->sources = (const char *const *)w->source_paths;
		req->nsources = rq->nfiles;
		req->workspace = w->tree_dir[0] ? w->tree_dir : NULL;
	} else if (rq->nfiles || rq->nwfiles) {
		req->workspace = w->files_dir;
	}
}

static void on_output(void *ctx, uint32_t kind, uint16_t type, const uint8_t *data, size_t len)
{
	struct worker *w = ctx;
	if (!w->output_failed && spool_append(w->output_fd, kind, type, data, len) < 0) {
		say("%s/" SPOOL_OUTPUT ": %s; the rest of the output is in the result only", w->dir, strerror(errno));
		w->output_failed = true;
	}
}

static void on_log(void *ctx, bool console, const char *text)
{
	struct worker *w = ctx;
	snprintf(w->log[w->nlog++ % WORKER_LOG_LINES], sizeof(w->log[0]), "%s%s", console ? "guest console: " : "",
		 text);
}

/* Said only for a run that went wrong: a good run's trace is its result. */
static void say_log(const struct worker *w, const struct run_result *r)
{
	if (r->cancelled || (r->term != TERM_TIMEOUT && r->term != TERM_VM_FAILED && r->term != TERM_ERROR))
		return;
	unsigned n = w->nlog < WORKER_LOG_LINES ? w->nlog : WORKER_LOG_LINES;
	for (unsigned i = w->nlog - n; i < w->nlog; i++)
		say("%s", w->log[i % WORKER_LOG_LINES]);
}

/* The gate (spool.h): ask vmrund, and wait for its answer, our cancel, or
 * the run's deadline (vmrund answers only while its store works); the
 * signalfd is left unread, so the run library sees the cancel too. */
static int gate(void *ctx, int64_t deadline_ms)
{
	struct worker *w = ctx;
	if (send(SPOOL_GATE_FD, SPOOL_GATE_ASK, strlen(SPOOL_GATE_ASK), MSG_NOSIGNAL) < 0) {
		say("gate: %s", strerror(errno));
		return -1;
	}
	for (;;) {
		if (clock_mono_ms() >= deadline_ms) {
			say("gate: vmrund did not let the command start before the run's deadline");
			return SESSION_GATE_LATE;
		}
		struct pollfd p[2] = { { SPOOL_GATE_FD, POLLIN, 0 }, { w->sigfd, POLLIN, 0 } };
		if (poll(p, 2, session_left_ms(deadline_ms)) < 0 && errno != EINTR)
			return -1;
		if (p[1].revents)
			return -1;
		if (!p[0].revents)
			continue;
		char answer[8];
		ssize_t n = recv(SPOOL_GATE_FD, answer, sizeof(answer) - 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;   /* vmrund went away: a no */
		answer[n] = '\0';
		return strcmp(answer, SPOOL_GATE_GO) ? -1 : 0;
	}
}

static int write_result(const struct worker *w, const struct run_result *r)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s/" SPOOL_RESULT ".tmp", w->dir);
	snprintf(path, sizeof(path), "%s/" SPOOL_RESULT, w->dir);
	FILE *f = fopen(tmp, "we");
	if (!f) {
		say("%s: %s", tmp, strerror(errno));
		return -1;
	}
	result_print_json(f, r);
	if (fflush(f) || fsync(fileno(f)) || fclose(f) || rename(tmp, path)) {
		say("%s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* The run's VM id, replaced whole (a repeated run has one per run): what
 * vmrund's sweep reads after a worker died must be the live VM's. */
static void write_vm_id(const struct worker *w, const char *id)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s/" SPOOL_VM_ID ".tmp", w->dir);
	snprintf(path, sizeof(path), "%s/" SPOOL_VM_ID, w->dir);
	if (spool_write_file(tmp, id, strlen(id), false, 0644) < 0 || rename(tmp, path) < 0)
		say("%s: %s", path, strerror(errno));
}

/* One run made: plan, execute, release; r as run_result_init left it. */
static void run_once(struct worker *w, const struct run_request *req, struct run_plan *plan, bool first,
		     struct run_result *r)
{
	if (run_plan_build(plan, req, r))
		return;
	write_vm_id(w, plan->run_id);
	plan->output = on_output;
	plan->keep_output = true;
	/* vmrund let the first run's command have effects: the next are
	 * the same run's */
	plan->gate = first ? gate : NULL;
	plan->log = on_log;
	plan->ctx = w;
	plan->cancel_fd = w->sigfd;
	run_execute(plan, r);
	say_log(w, r);
	run_plan_release(plan);
}

/* Whether r's stdout is what the spec's repeat_expect asks of each run
 * (true without one). */
static bool repeat_expected(const struct run_spec *rq, const struct run_result *r)
{
	const struct run_stage *s = result_final(r);
	return !rq->has_repeat_expect || lines_match((const char *)rq->repeat_expect, rq->repeat_expect_len,
						     s->out.len ? (const char *)s->out.data : NULL, s->out.len);
}

/* The run, made as many times as the spec's repeat asks, each in a fresh
 * VM, until one does not succeed (or, with repeat_expect, does not give
 * the output expected): r is the last one's result, with the
 * means of those made (result_repeat_apply). Each next run is marked in
 * the output file (SPOOL_NEXT_RUN). */
static void run_repeated(struct worker *w, const struct run_request *req, struct run_plan *plan,
			 struct run_result *r)
{
	struct run_repeat rep = { .asked = w->rq.repeat > 1 ? w->rq.repeat : 1 };
	for (;;) {
		run_once(w, req, plan, rep.made == 0, r);
		result_repeat_add(&rep, r);
		/* a cancel that came as a run ended starts no other */
		struct pollfd p = { w->sigfd, POLLIN, 0 };
		if (!result_repeat_more(&rep, r) || !repeat_expected(&w->rq, r) || poll(&p, 1, 0) > 0)
			break;
		uint32_t next = rep.made + 1;
		on_output(w, PROTO_STAGE_RUN, SPOOL_NEXT_RUN, (const uint8_t *)&next, sizeof(next));
		result_free(r);
		run_result_init(r, req);
	}
	if (rep.asked > 1)
		result_repeat_apply(r, &rep);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		say("usage: vmrund-worker RUN_DIR VMM GUEST_DIR POLICY (vmrund starts it)");
		return 2;
	}
	struct worker w = { .dir = argv[1], .vmm = argv[2], .guest = argv[3], .policy = argv[4], .output_fd = -1 };
	if ((w.sigfd = run_cancel_signals()) < 0 || prctl(PR_SET_PDEATHSIG, SIGTERM) < 0) {
		say("signals: %s", strerror(errno));
		return 1;
	}
	char err[600], path[PATH_MAX];
	snprintf(w.artifacts, sizeof(w.artifacts), "%s/" SPOOL_ARTIFACTS, w.dir);
	snprintf(path, sizeof(path), "%s/" SPOOL_OUTPUT, w.dir);
	w.output_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	struct run_result *r = malloc(sizeof(*r));
	struct run_plan *plan = malloc(sizeof(*plan));
	if (w.output_fd < 0 || !r || !plan) {
		say("%s: %s", path, w.output_fd < 0 ? strerror(errno) : "out of memory");
		return 1;
	}
	int status = 1;
	if (read_request(&w, err, sizeof(err))) {
		say("%s", err);
		goto out;
	}
	struct run_request req;
	int inputs = write_inputs(&w, err, sizeof(err));
	if (!inputs)
		inputs = find_checkpoint(&w, err, sizeof(err));
	build_request(&w, &req);
	int64_t t0 = clock_mono_ms();
	run_result_init(r, &req);
	if (inputs)
		result_message(r, "%s", err);
	else
		run_repeated(&w, &req, plan, r);
	r->total = clock_mono_ms() - t0;
	status = write_result(&w, r) ? 1 : 0;
	result_free(r);
out:
	for (unsigned i = 0; i < RUN_SPEC_MAX_FILES; i++)
		free(w.source_paths[i]);
	run_spec_free(&w.rq);
	free(r);
	free(plan);
	close(w.output_fd);
	close(w.sigfd);
	return status;
}
