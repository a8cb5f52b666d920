/* libFuzzer harness for the host's side of a session (host/run/session.c):
 * what the guest agent sends is guest input. Each input is the agent's
 * whole stream, written to a socket pair whose far end is then closed;
 * session_run answers it for a two-stage request. Beyond the sanitizers it
 * checks what the session promises: output only for a stage that was
 * started, EXITs one per stage in order and never more than the request's
 * stages, DONE only after an EXIT that ends the session, and a failure's
 * reason printable on one line. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "session.h"

struct seen {
	const struct session_result *res;
};

static void output(void *ctx, unsigned stage, uint16_t type, const uint8_t *data, uint32_t len)
{
	const struct seen *s = ctx;
	(void)data;
	if (stage >= s->res->stages || stage >= PROTO_MAX_STAGES || len > PROTO_MAX_PAYLOAD ||
	    (type != PROTO_STDOUT && type != PROTO_STDERR))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	if (len > 128 * 1024)
		return 0;   /* more than the socket buffers hold before the session reads */
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	int buf = 512 * 1024;
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	if (len && write(sv[1], data, len) != (ssize_t)len)
		abort();
	close(sv[1]);
	static struct proto_request rq;
	memset(&rq, 0, sizeof(rq));
	rq.nstages = 2;
	rq.stage[0] = (struct proto_stage){ .kind = PROTO_STAGE_COMPILE, .argc = 1, .argv = { "cc" } };
	rq.stage[1] = (struct proto_stage){ .kind = PROTO_STAGE_RUN, .argc = 1, .argv = { "/tmp/prog" } };
	static struct session_result res;
	struct seen s = { &res };
	struct session_io io = { .stdin_fd = -1, .cancel_fd = -1, .output = output, .ctx = &s,
				 .run_id = "0123456789abcdef0123456789abcdef" };
	enum session_status st = session_run(sv[0], &rq, &io, clock_mono_ms() + 2000, &res);
	close(sv[0]);
	if (res.exits > rq.nstages || res.stages > rq.nstages || res.exits > res.stages)
		abort();
	for (unsigned i = 0; i < res.exits; i++)
		if (res.exit[i].stage != i)
			abort();
	if (st == SESSION_DONE &&
	    (res.exits == 0 || proto_stage_continues(&rq, &res.exit[res.exits - 1])))
		abort();
	if (st == SESSION_FAILED)
		for (const char *c = res.error; *c; c++)
			if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
				abort();
	return 0;
}
