/* Two runs driven from one process, on two threads, through the run
 * library alone (host/run/run.h), as vmrund will drive many: run A prints
 * "started" and sleeps; the moment that line reaches its output callback,
 * A is cancelled through its own eventfd, while run B, which sleeps 8 s
 * before it prints and exits 3, is still running. Then a third run, C, on
 * A's memory. Each result must be its own: B's output and status, A
 * cancelled after its VM started (not timed out) and before B ended,
 * distinct run ids. (tests/e2e/run.sh checks that nothing is left.)
 *
 * usage: two_runs BUILD_DIR   (build/: bin/vmm and guest/ inside)
 * Prints "ok - ..." / "not ok - ..." lines; exits 0 when all passed. */
#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "run.h"

struct job {
	const char *name;
	char *argv[4];
	double timeout_s;
	int cancel_fd;
	bool watch;               /* cancel itself on its first line of output */
	char vmm[4096], guest[4096];
	struct run_spec spec;   /* borrows argv: never freed */
	struct run_request req;
	struct run_plan plan;
	struct run_result r;
	int built;
	char seen[64];            /* A: what its output callback got */
	size_t nseen;
	int64_t ended_ms;
};

/* A's output as it arrives: kept, and the first line cancels A. */
static void cancel_on_output(void *ctx, uint32_t kind, uint16_t type, const uint8_t *data, size_t len)
{
	struct job *j = ctx;
	(void)kind;
	(void)type;
	size_t n = len < sizeof(j->seen) - j->nseen ? len : sizeof(j->seen) - j->nseen;
	memcpy(j->seen + j->nseen, data, n);
	j->nseen += n;
	uint64_t one = 1;
	if (memchr(j->seen, '\n', j->nseen) && write(j->cancel_fd, &one, sizeof(one)) != sizeof(one))
		fprintf(stderr, "two_runs: eventfd: %s\n", strerror(errno));
}

static void *drive(void *arg)
{
	struct job *j = arg;
	j->spec = (struct run_spec){
		.argv = j->argv, .argc = 3, .timeout_s = j->timeout_s, .memory_mib = 256, .cpus = 1, .disk_mib = 64,
		.max_output = 1 << 20,
	};
	j->req = (struct run_request){ .spec = &j->spec, .vmm = j->vmm, .guest_dir = j->guest };
	run_result_init(&j->r, &j->req);
	j->built = run_plan_build(&j->plan, &j->req, &j->r) == 0;
	if (j->built) {
		j->plan.cancel_fd = j->cancel_fd;
		if (j->watch) {
			j->plan.output = cancel_on_output;
			j->plan.ctx = j;
		}   /* else output NULL: collected in j->r */
		run_execute(&j->plan, &j->r);
		run_plan_release(&j->plan);
	}
	j->ended_ms = clock_mono_ms();
	return NULL;
}

static int failures;

static void check(int ok, const char *what, const struct job *j)
{
	printf("%s - %s", ok ? "ok" : "not ok", what);
	if (!ok)
		printf(" (run %s: term %s, status %d, message \"%s\", stdout \"%.*s\")", j->name,
		       result_termination_name(j->r.term), result_exit_status(&j->r), j->r.message,
		       (int)result_final(&j->r)->out.len, (const char *)result_final(&j->r)->out.data);
	printf("\n");
	failures += !ok;
}

static void setup(struct job *j, const char *build, const char *name, const char *script, double timeout_s)
{
	memset(j, 0, sizeof(*j));
	j->name = name;
	j->argv[0] = "sh";
	j->argv[1] = "-c";
	j->argv[2] = (char *)script;
	j->timeout_s = timeout_s;
	j->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	snprintf(j->vmm, sizeof(j->vmm), "%s/bin/vmm", build);
	snprintf(j->guest, sizeof(j->guest), "%s/guest", build);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: two_runs BUILD_DIR\n");
		return 2;
	}
	static struct job a, b;
	setup(&a, argv[1], "A", "echo started; sleep 60", 40);
	a.watch = true;
	setup(&b, argv[1], "B", "sleep 8; echo two; exit 3", 40);
	pthread_t ta, tb;
	if (pthread_create(&ta, NULL, drive, &a) || pthread_create(&tb, NULL, drive, &b)) {
		fprintf(stderr, "two_runs: pthread_create: %s\n", strerror(errno));
		return 2;
	}
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	check(b.built && b.r.term == TERM_EXITED && b.r.stage[0].exit_code == 3, "run B exited 3 beside run A", &b);
	check(b.r.stage[0].out.len == 4 && !memcmp(b.r.stage[0].out.data, "two\n", 4), "run B's stdout is its own", &b);
	check(a.built && a.r.cancelled && a.r.term == TERM_ERROR && a.r.jail.built,
	      "run A, once its VM ran, ended cancelled (not timed out)", &a);
	check(a.nseen == 8 && !memcmp(a.seen, "started\n", 8), "run A's output reached its own callback", &a);
	check(a.ended_ms < b.ended_ms, "run A was cancelled while run B still ran", &a);
	check(strcmp(a.r.run_id, b.r.run_id) != 0, "two run ids", &a);
	/* The same thread's memory for a new run: nothing carried over. */
	struct job *c = &a;
	result_free(&a.r);
	close(a.cancel_fd);
	setup(c, argv[1], "C", "echo three", 40);
	drive(c);
	check(c->r.term == TERM_EXITED && c->r.stage[0].exit_code == 0 && c->r.stage[0].out.len == 6 &&
		      !memcmp(c->r.stage[0].out.data, "three\n", 6), "a third run after them, on reused memory", c);
	result_free(&b.r);
	result_free(&c->r);
	printf("two_runs: %d failed\n", failures);
	return failures ? 1 : 0;
}
