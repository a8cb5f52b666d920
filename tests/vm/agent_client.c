/* agent_client: the host side of one agent session, for the agent's VM
 * tests (tests/vm/agent.sh) until vmrun drives sessions itself. Listens on
 * "<uds>_<PROTO_VSOCK_PORT>", where vmm forwards the agent's connection,
 * and runs host/session.c.
 *
 *   agent_client UDS ALLOWLIST_FILE [-o MAX_OUTPUT] [-i STDIN_FILE]
 *                [-e NAME=VALUE]... [-t SECONDS] [-c CPU_MS] [-m MEMORY_KIB]
 *                -- PROGRAM [ARG...]
 *
 * The request has one stage, RUN, with the CPU and memory limits given
 * (none by default), and a run id of the time and our pid. The command's stdout and stderr go to ours; one
 * "agent_client: ..." line on stderr reports the end. Exit status as vmrun's: the command's status,
 * 128+N for signal N, 126 denied, 127 not found, 124 timeout, 125 failure. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "session.h"

static void output(void *ctx, unsigned stage, uint16_t type, const uint8_t *data, uint32_t len)
{
	(void)ctx;
	(void)stage;
	(void)!write(type == PROTO_STDOUT ? 1 : 2, data, len);
}

static int load_allowlist(const char *file, struct proto_request *r)
{
	static char lines[PROTO_MAX_ALLOW][256];
	FILE *f = fopen(file, "re");
	if (!f)
		return -1;
	while (r->nallow < PROTO_MAX_ALLOW && fgets(lines[r->nallow], sizeof(lines[0]), f)) {
		lines[r->nallow][strcspn(lines[r->nallow], "\n")] = '\0';
		if (lines[r->nallow][0] == '/')
			r->allow[r->nallow] = lines[r->nallow], r->nallow++;
	}
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	static struct proto_request req = { .nstages = 1, .stage = { { .kind = PROTO_STAGE_RUN } },
					    .max_output = 1 << 20, .nproc = 256, .nofile = 256, .fsize = 64 << 20 };
	struct proto_stage *run = &req.stage[0];
	int64_t start = clock_mono_ms();
	signal(SIGPIPE, SIG_IGN);   /* a closed connection is an error return, as in vmrun */
	if (argc < 5) {
		fprintf(stderr, "usage: agent_client UDS ALLOWLIST [-o N] [-i FILE] [-e N=V]... [-t S] [-c MS] [-m KIB] "
				"-- PROG [ARG...]\n");
		return 125;
	}
	const char *uds = argv[1];
	if (load_allowlist(argv[2], &req)) {
		perror(argv[2]);
		return 125;
	}
	/* 32 hex digits, like vmrun's, unique enough for a test */
	char run_id[PROTO_RUN_ID_MAX + 1];
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	snprintf(run_id, sizeof(run_id), "%016llx%016llx", (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec,
		 (unsigned long long)getpid());
	struct session_io io = { .cancel_fd = -1, .stdin_fd = -1, .output = output, .run_id = run_id };
	int timeout = 60, i = 3;
	for (; i < argc && strcmp(argv[i], "--"); i += 2) {
		if (i + 1 >= argc)
			return 125;
		if (!strcmp(argv[i], "-o"))
			req.max_output = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "-i") && (io.stdin_fd = open(argv[i + 1], O_RDONLY | O_CLOEXEC)) < 0)
			return perror(argv[i + 1]), 125;
		else if (!strcmp(argv[i], "-e") && req.envc < PROTO_MAX_ENV)
			req.env[req.envc++] = argv[i + 1];
		else if (!strcmp(argv[i], "-t"))
			timeout = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-c"))
			run->cpu_ms = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "-m"))
			run->memory_kib = strtoull(argv[i + 1], NULL, 10);
	}
	for (i++; i < argc && run->argc < PROTO_MAX_ARGS; i++)
		run->argv[run->argc++] = argv[i];

	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s_%u", uds, PROTO_VSOCK_PORT);
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	unlink(a.sun_path);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0) {
		perror(a.sun_path);
		return 125;
	}
	int64_t deadline = start + timeout * 1000;
	char err[256];
	int fd = session_accept(l, -1, -1, deadline, err, sizeof(err));
	close(l);
	unlink(a.sun_path);
	if (fd < 0) {
		fprintf(stderr, "agent_client: %s\n", err);
		return 125;
	}
	static struct session_result res;
	enum session_status st = session_run(fd, &req, &io, deadline, &res);
	close(fd);
	if (res.hello_ms)
		fprintf(stderr, "agent_client: hello from \"%s\" %lld ms after listening\n", res.agent,
			(long long)(res.hello_ms - start));
	if (st == SESSION_TIMEOUT) {
		fprintf(stderr, "agent_client: timeout\n");
		return 124;
	}
	if (st == SESSION_FAILED) {
		fprintf(stderr, "agent_client: failed: %s\n", res.error);
		return 125;
	}
	const struct proto_exit *e = &res.exit[0];
	static const char *kinds[] = { "?", "exited", "signaled", "denied", "not_found", "error" };
	fprintf(stderr,
		"agent_client: %s code=%d signal=%d cpu_ms=%llu max_rss_kib=%llu stdout_bytes=%llu stderr_bytes=%llu "
		"stdout_truncated=%d stderr_truncated=%d oom_killed=%d cpu_exceeded=%d\n",
		kinds[e->kind], e->code, e->signal, (unsigned long long)e->cpu_ms, (unsigned long long)e->max_rss_kib,
		(unsigned long long)e->stdout_bytes, (unsigned long long)e->stderr_bytes,
		!!(e->flags & PROTO_EXIT_STDOUT_TRUNCATED), !!(e->flags & PROTO_EXIT_STDERR_TRUNCATED),
		!!(e->flags & PROTO_EXIT_OOM_KILLED), !!(e->flags & PROTO_EXIT_CPU_EXCEEDED));
	switch (e->kind) {
	case PROTO_END_EXITED: return e->code;
	case PROTO_END_SIGNALED: return 128 + e->signal;
	case PROTO_END_DENIED: return 126;
	case PROTO_END_NOT_FOUND: return 127;
	default: return 125;
	}
}
