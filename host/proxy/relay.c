/* One tunnel's bytes (proxy_relay.h). Each direction has one buffer: a
 * side is read only when what it sent before has been written on, so a
 * slow reader slows its writer (back-pressure) and memory stays two
 * buffers per tunnel. */
#include "relay.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *const end_names[] = {
	[RELAY_RUNNING] = "running", [RELAY_CLOSED] = "closed", [RELAY_UP_CAP] = "up_cap",
	[RELAY_DOWN_CAP] = "down_cap", [RELAY_IDLE] = "idle",    [RELAY_ERROR] = "error",
};

const char *relay_end_name(enum relay_end e)
{
	return (unsigned)e < sizeof(end_names) / sizeof(end_names[0]) ? end_names[e] : "unknown";
}

static uint64_t cap_of(const struct relay *r, int s)
{
	return s == RELAY_GUEST ? r->lim.max_up : r->lim.max_down;
}

static enum relay_end fail(struct relay *r, int err)
{
	r->err = err;
	return r->end = RELAY_ERROR;
}

void relay_init(struct relay *r, int guest, int remote, const uint8_t *first, size_t n, const struct relay_limits *lim,
		int64_t now_ms)
{
	memset(r, 0, sizeof(*r));
	r->fd[RELAY_GUEST] = guest;
	r->fd[RELAY_REMOTE] = remote;
	r->lim = *lim;
	r->last_ms = now_ms;
	if (n > RELAY_BUF) {
		fail(r, EMSGSIZE);
		return;
	}
	if (n)
		memcpy(r->buf[RELAY_GUEST], first, n);
	r->len[RELAY_GUEST] = n;
	r->moved[RELAY_GUEST] = n;
	if (n > lim->max_up)
		r->end = RELAY_UP_CAP;
}

short relay_events(const struct relay *r, enum relay_side s)
{
	if (r->end != RELAY_RUNNING)
		return 0;
	int other = 1 - (int)s;
	short ev = 0;
	if (!r->eof[s] && r->len[s] == 0)
		ev |= POLLIN;
	if (r->len[other] > r->off[other])
		ev |= POLLOUT;
	return ev;
}

int64_t relay_timeout_ms(const struct relay *r, int64_t now_ms)
{
	int64_t left = r->last_ms + r->lim.idle_ms - now_ms;
	return left > 0 ? left : 0;
}

/* Read what side s sent, when its buffer is free: -1 when the tunnel
 * ended (a cap, an error), else whether bytes came. */
static int pull(struct relay *r, int s)
{
	if (r->eof[s] || r->len[s])
		return 0;
	uint64_t cap = cap_of(r, s), left = cap - r->moved[s];
	/* One byte past the cap is how a side is found to be over it. */
	size_t want = left + 1 < RELAY_BUF ? (size_t)left + 1 : RELAY_BUF;
	ssize_t n = read(r->fd[s], r->buf[s], want);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : (fail(r, errno), -1);
	if (n == 0) {
		r->eof[s] = true;
		return 0;
	}
	r->moved[s] += (uint64_t)n;
	if (r->moved[s] > cap) {
		r->end = s == RELAY_GUEST ? RELAY_UP_CAP : RELAY_DOWN_CAP;
		return -1;
	}
	r->len[s] = (size_t)n;
	r->off[s] = 0;
	return 1;
}

/* Write on what side s sent to the other side; when s has finished and
 * all of it is delivered, tell the other side (SHUT_WR). -1 ended, else
 * whether bytes went. */
static int push(struct relay *r, int s)
{
	int d = 1 - s, moved = 0;
	while (r->off[s] < r->len[s]) {
		ssize_t n = send(r->fd[d], r->buf[s] + r->off[s], r->len[s] - r->off[s], MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return moved;
			return fail(r, errno), -1;
		}
		r->off[s] += (size_t)n;
		moved = 1;
	}
	r->len[s] = r->off[s] = 0;
	if (r->eof[s] && !r->shut[d]) {
		/* ENOTCONN: the other side is gone already; the close says it. */
		if (shutdown(r->fd[d], SHUT_WR) < 0 && errno != ENOTCONN)
			return fail(r, errno), -1;
		r->shut[d] = true;
	}
	return moved;
}

enum relay_end relay_step(struct relay *r, const short revents[2], int64_t now_ms)
{
	if (r->end != RELAY_RUNNING)
		return r->end;
	bool moved = false;
	for (int s = 0; s < 2; s++) {
		if (revents[s] & (POLLIN | POLLHUP | POLLERR)) {
			int got = pull(r, s);
			if (got < 0)
				return r->end;
			moved |= got > 0;
		}
	}
	/* Written at once, not on the next POLLOUT: most writes fit. */
	for (int s = 0; s < 2; s++) {
		int went = push(r, s);
		if (went < 0)
			return r->end;
		moved |= went > 0;
	}
	if (moved)
		r->last_ms = now_ms;
	if (r->eof[0] && r->eof[1] && !r->len[0] && !r->len[1])
		return r->end = RELAY_CLOSED;
	if (now_ms - r->last_ms >= r->lim.idle_ms)
		return r->end = RELAY_IDLE;
	return RELAY_RUNNING;
}
