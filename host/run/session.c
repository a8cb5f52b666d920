#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "errmsg.h"
#include "proto_sandbox.h"

char *session_printable(char *dst, size_t cap, const void *src, size_t n)
{
	const unsigned char *s = src;
	size_t i = 0;
	for (; i < n && i + 1 < cap; i++)
		dst[i] = s[i] >= 0x20 && s[i] <= 0x7e ? (char)s[i] : '?';
	if (cap)
		dst[i] = '\0';
	return dst;
}

int session_left_ms(int64_t deadline)
{
	int64_t l = deadline - clock_mono_ms();
	return l < 0 ? 0 : l > 60000 ? 60000 : (int)l;
}

int session_accept(int listen_fd, int watch_fd, int cancel_fd, int64_t deadline_ms, char *err, size_t errlen)
{
	for (;;) {
		if (clock_mono_ms() >= deadline_ms) {
			errf(err, errlen, "the agent did not connect in time");
			return -1;
		}
		/* A negative fd is ignored by poll: no watch, no cancel. */
		struct pollfd p[3] = { { listen_fd, POLLIN, 0 }, { watch_fd, POLLIN, 0 }, { cancel_fd, POLLIN, 0 } };
		int n = poll(p, 3, session_left_ms(deadline_ms));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			errf(err, errlen, "poll: %s", strerror(errno));
			return -1;
		}
		if (p[2].revents) {
			errf(err, errlen, "cancelled");
			return -1;
		}
		if (watch_fd >= 0 && p[1].revents) {
			errf(err, errlen, "the VM exited before the agent connected");
			return -1;
		}
		if (p[0].revents & (POLLHUP | POLLERR | POLLNVAL)) {
			errf(err, errlen, "the agent's socket failed");
			return -1;
		}
		if (!p[0].revents)
			continue;
		int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd >= 0 || (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)) {
			if (fd < 0)
				errf(err, errlen, "accept: %s", strerror(errno));
			return fd;
		}
	}
}

/* What the host still has to send: the REQUEST, stdin frames, the final
 * empty STDIN frame. */
struct outbox {
	uint8_t buf[PROTO_HDR_LEN + PROTO_MAX_PAYLOAD];
	size_t len, off;
	bool stdin_done;
};

static enum session_status failed(struct session_result *res, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static enum session_status failed(struct session_result *res, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(res->error, sizeof(res->error), fmt, ap);
	va_end(ap);
	return SESSION_FAILED;
}

static void queue_frame(struct outbox *o, uint16_t type, const uint8_t *p, uint32_t len)
{
	proto_header(o->buf, type, len);
	if (len)
		memmove(o->buf + PROTO_HDR_LEN, p, len);
	o->len = PROTO_HDR_LEN + len;
	o->off = 0;
}

/* Refill the outbox with the next stdin chunk: called when it is empty and
 * stdin is readable (or there is none). */
static void next_stdin(struct outbox *o, const struct session_io *io)
{
	ssize_t k = 0;
	if (io->stdin_fd >= 0) {
		k = read(io->stdin_fd, o->buf + PROTO_HDR_LEN, PROTO_MAX_PAYLOAD);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			return;
	}
	if (k <= 0) {   /* end of input (a read error ends it too) */
		o->stdin_done = true;
		k = 0;
	}
	queue_frame(o, PROTO_STDIN, o->buf + PROTO_HDR_LEN, (uint32_t)k);
}

/* An EXIT: the current stage's, then the next stage starts or the
 * session is done. Returns -1 to continue, else a status. */
static int stage_exit(const struct proto_request *req, const uint8_t *p, uint32_t len, struct session_result *res)
{
	char err[256];
	struct proto_exit e;
	if (proto_decode_exit(p, len, &e, err, sizeof(err)))
		return failed(res, "bad EXIT: %s", err);
	if (e.stage != res->exits || res->exits >= req->nstages)
		return failed(res, "EXIT for stage %u while stage %u runs", e.stage, res->exits);
	res->exit[res->exits] = e;
	res->stage_end_ms[res->exits++] = clock_mono_ms();
	if (!proto_stage_continues(req, &e))
		return SESSION_DONE;
	res->stage_start_ms[res->stages++] = clock_mono_ms();
	return -1;
}

/* Handle one frame from the agent. Returns -1 to continue, else a status. */
static int agent_frame(uint16_t type, const uint8_t *p, uint32_t len, bool *hello, const struct proto_request *req,
		       const struct session_io *io, struct session_result *res)
{
	char err[256];
	if (!*hello) {
		uint32_t version;
		if (type != PROTO_HELLO)
			return failed(res, "the agent's first frame is type %u, not HELLO", type);
		if (proto_decode_hello(p, len, &version, err, sizeof(err)))
			return failed(res, "bad HELLO: %s", err);
		session_printable(res->agent, sizeof(res->agent), p + 4, len - 4);
		res->hello_ms = clock_mono_ms();
		*hello = true;
		return -1;
	}
	switch (type) {
	case PROTO_READY:
		/* a sandbox is up: what follows is the sandbox's own conversation */
		return req->sandbox && res->stages ? SESSION_DONE : failed(res, "READY from the agent in a run");
	case PROTO_STDOUT:
	case PROTO_STDERR:
		if (!res->stages)
			return failed(res, "output from the agent before the request");
		if (io->output)
			io->output(io->ctx, res->stages - 1, type, p, len);
		return -1;
	case PROTO_EXIT:
		return stage_exit(req, p, len, res);
	case PROTO_ERROR: {
		char text[401];
		return failed(res, "agent: %s", session_printable(text, sizeof(text), p, len));
	}
	default:
		return failed(res, "unexpected frame type %u from the agent", type);
	}
}

/* The deadline in force: the session's, or the current stage's own limit
 * when that comes first. */
static int64_t deadline_now(int64_t deadline_ms, const struct session_io *io, const struct session_result *res)
{
	if (!res->stages)
		return deadline_ms;
	unsigned i = res->stages - 1;
	int64_t lim = io->stage_timeout_ms[i];
	if (lim > 0 && res->stage_start_ms[i] + lim < deadline_ms)
		return res->stage_start_ms[i] + lim;
	return deadline_ms;
}

/* The conversation's buffers: 128 KiB and the request as sent, so on the
 * heap, one set per session, which is what lets runs go on side by side. */
struct conv {
	struct proto_reader rd;
	struct outbox out;
	struct proto_request sent;   /* the caller's request, its strings shared, plus the unique fields */
};

/* Fill in what makes this guest unique, taken now, as the REQUEST is sent
 * (not when the plan was made): a guest restored from a snapshot starts
 * with the RNG state and the stopped clock of every other guest restored
 * from it, and sets them from these. Returns 0, or -1 (reason in res). */
static int make_unique(struct proto_request *r, const char *run_id, struct session_result *res)
{
	if (!run_id || !proto_valid_run_id(run_id, strlen(run_id))) {
		failed(res, "the run has no valid id for its request");
		return -1;
	}
	ssize_t k;
	while ((k = getrandom(r->seed, PROTO_SEED_LEN, 0)) < 0 && errno == EINTR)
		;
	if (k != (ssize_t)PROTO_SEED_LEN) {
		failed(res, "getrandom for the guest's seed: %s", k < 0 ? strerror(errno) : "short read");
		return -1;
	}
	struct timespec now;
	if (clock_gettime(CLOCK_REALTIME, &now) < 0) {
		failed(res, "clock_gettime for the guest's clock: %s", strerror(errno));
		return -1;
	}
	r->time_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	snprintf(r->run_id, sizeof(r->run_id), "%s", run_id);
	return 0;
}

/* The REQUEST into the (empty) outbox: req as the caller built it (a
 * shallow copy, its strings still the caller's), made unique; the first
 * stage starts now. */
static int queue_request(struct conv *c, const struct proto_request *req, const struct session_io *io,
			 struct session_result *res)
{
	c->sent = *req;
	if (make_unique(&c->sent, io->run_id, res))
		return -1;
	struct outbox *out = &c->out;
	size_t n = proto_encode_request(&c->sent, out->buf + PROTO_HDR_LEN, PROTO_MAX_PAYLOAD);
	if (!n) {
		failed(res, "the request does not fit one frame");
		return -1;
	}
	queue_frame(out, PROTO_REQUEST, out->buf + PROTO_HDR_LEN, (uint32_t)n);
	res->stage_start_ms[res->stages++] = clock_mono_ms();
	return 0;
}

static enum session_status converse(int fd, const struct proto_request *req, const struct session_io *io,
				    int64_t deadline_ms, struct session_result *res, struct conv *c);

enum session_status session_run(int fd, const struct proto_request *req, const struct session_io *io,
				int64_t deadline_ms, struct session_result *res)
{
	memset(res, 0, sizeof(*res));
	struct conv *c = malloc(sizeof(*c));
	if (!c)
		return failed(res, "out of memory");
	proto_reader_init(&c->rd);
	c->out.len = c->out.off = 0;
	c->out.stdin_done = false;
	enum session_status st = converse(fd, req, io, deadline_ms, res, c);
	free(c);
	return st;
}

static enum session_status converse(int fd, const struct proto_request *req, const struct session_io *io,
				    int64_t deadline_ms, struct session_result *res, struct conv *c)
{
	struct proto_reader *rd = &c->rd;
	struct outbox *out = &c->out;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	bool hello = false, request_sent = false;
	out->stdin_done = req->sandbox;   /* a sandbox's commands take stdin of their own */
	for (;;) {
		bool want_stdin = request_sent && !out->len && !out->stdin_done;
		if (want_stdin && io->stdin_fd < 0)
			next_stdin(out, io);   /* no stdin: end of input at once */
		want_stdin = request_sent && !out->len && !out->stdin_done;
		/* stdin is read only when it has data, so an idle pipe never
		 * holds up the agent's output or the deadline; a negative fd
		 * is skipped by poll */
		struct pollfd fds[3] = { { fd, POLLIN | (out->len ? POLLOUT : 0), 0 },
					 { io->cancel_fd, POLLIN, 0 },
					 { want_stdin ? io->stdin_fd : -1, POLLIN, 0 } };
		int64_t due = deadline_now(deadline_ms, io, res);
		if (clock_mono_ms() >= due) {
			res->stage_timeout = due < deadline_ms;
			return SESSION_TIMEOUT;
		}
		int n = poll(fds, 3, session_left_ms(due));
		if (n < 0 && errno != EINTR)
			return failed(res, "poll: %s", strerror(errno));
		if (n <= 0)
			continue;
		if (fds[1].revents)
			return SESSION_CANCELLED;
		if (want_stdin && fds[2].revents)
			next_stdin(out, io);
		struct pollfd p = fds[0];
		if (p.revents & POLLOUT) {
			ssize_t k = send(fd, out->buf + out->off, out->len - out->off, MSG_NOSIGNAL);
			if (k < 0 && errno != EAGAIN && errno != EINTR) {
				/* The agent may have finished without reading all
				 * stdin: its EXIT can still be waiting. */
				out->len = out->off = 0;
				out->stdin_done = true;
			} else if (k > 0 && (out->off += (size_t)k) == out->len) {
				out->len = out->off = 0;
			}
		}
		if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		ssize_t k = proto_reader_fill(rd, fd);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (k <= 0)
			return failed(res, hello ? "the agent's connection ended before EXIT"
						 : "the agent's connection ended before HELLO");
		uint16_t type;
		const uint8_t *payload;
		uint32_t len;
		int r;
		while ((r = proto_reader_next(rd, &type, &payload, &len, res->error, sizeof(res->error))) == 1) {
			int st = agent_frame(type, payload, len, &hello, req, io, res);
			if (st == SESSION_DONE && req->sandbox && (rd->have != rd->consumed || out->len))
				return failed(res, "the agent sent more after READY");
			if (st >= 0)
				return (enum session_status)st;
			/* Queued at HELLO, before any other frame read with it:
			 * the first stage starts with the request. */
			if (hello && !request_sent) {
				int g = io->gate ? io->gate(io->ctx, deadline_ms) : 0;
				if (g)
					return g == SESSION_GATE_LATE ? SESSION_TIMEOUT : SESSION_CANCELLED;
				if (queue_request(c, req, io, res))
					return SESSION_FAILED;
				request_sent = true;
			}
		}
		if (r < 0)
			return SESSION_FAILED;
	}
}

int session_resume(int fd, bool reseed, int64_t deadline_ms, int cancel_fd, char *err, size_t errlen)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	uint8_t msg[PROTO_RESUME_LEN + PROTO_SEED_LEN];
	uint64_t ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	memcpy(msg, &ns, sizeof(ns));
	if (reseed && getrandom(msg + PROTO_RESUME_LEN, PROTO_SEED_LEN, 0) != (ssize_t)PROTO_SEED_LEN) {
		snprintf(err, errlen, "getrandom: %s", strerror(errno));
		return -1;
	}
	if (proto_send(fd, PROTO_RESUME, msg, reseed ? sizeof(msg) : PROTO_RESUME_LEN) < 0) {
		snprintf(err, errlen, "sending RESUME: %s", strerror(errno));
		return -1;
	}
	struct proto_reader *rd = malloc(sizeof(*rd));
	if (!rd) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	proto_reader_init(rd);
	int rc = -1;
	for (;;) {
		struct pollfd p[2] = { { fd, POLLIN, 0 }, { cancel_fd, POLLIN, 0 } };
		if (clock_mono_ms() >= deadline_ms) {
			snprintf(err, errlen, "the resumed agent did not answer in time");
			break;
		}
		int n = poll(p, 2, session_left_ms(deadline_ms));
		if (n < 0 && errno != EINTR) {
			snprintf(err, errlen, "poll: %s", strerror(errno));
			break;
		}
		if (n > 0 && p[1].revents) {
			snprintf(err, errlen, "cancelled");
			break;
		}
		if (n <= 0 || !p[0].revents)
			continue;
		ssize_t k = proto_reader_fill(rd, fd);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (k <= 0) {
			snprintf(err, errlen, "the resumed agent's connection ended");
			break;
		}
		uint16_t type;
		const uint8_t *payload;
		uint32_t len;
		int r = proto_reader_next(rd, &type, &payload, &len, err, errlen);
		if (r == 0)
			continue;
		if (r == 1 && type == PROTO_READY && rd->have == rd->consumed)
			rc = 0;
		else if (r == 1)
			snprintf(err, errlen, "the resumed agent sent frame type %u%s", type,
				 type == PROTO_READY ? " and more" : " instead of READY");
		break;
	}
	free(rd);
	return rc;
}
