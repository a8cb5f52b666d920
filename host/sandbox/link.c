/* The supervisor's side of the agent (host/sandbox/supervisor.h): the frames
 * that come back, checked and kept; the frames that go out, one writer at
 * a time; the serve loop. */
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "session.h"
#include "spool.h"

static struct sbx_fop *fop_of(struct sbx *s, uint32_t id)
{
	for (unsigned i = 0; i < SBX_MAX_FILE_OPS; i++)
		if (s->fop[i].used && s->fop[i].id == id)
			return &s->fop[i];
	return NULL;
}

int sbx_send(struct sbx *s, uint16_t type, const void *a, uint32_t alen, const void *b, uint32_t blen)
{
	uint8_t hdr[PROTO_HDR_LEN];
	proto_header(hdr, type, alen + blen);
	struct { const uint8_t *p; size_t n; } part[3] = { { hdr, sizeof(hdr) }, { a, alen }, { b, blen } };
	int rc = 0;
	pthread_mutex_lock(&s->wmu);
	int64_t stall_until = clock_mono_ms() + SBX_SEND_STALL_MS;
	for (int i = 0; i < 3 && !rc; i++) {
		size_t off = 0;
		while (off < part[i].n) {
			int fd = __atomic_load_n(&s->conn, __ATOMIC_ACQUIRE);
			if (fd < 0) {
				rc = -1;
				break;
			}
			ssize_t k = send(fd, part[i].p + off, part[i].n - off, MSG_NOSIGNAL);
			if (k > 0) {
				off += (size_t)k;
				stall_until = clock_mono_ms() + SBX_SEND_STALL_MS;
				continue;
			}
			if (k < 0 && (errno == EAGAIN || errno == EINTR) && clock_mono_ms() < stall_until) {
				struct pollfd p = { fd, POLLOUT, 0 };
				poll(&p, 1, 1000);
				continue;
			}
			rc = -1;
			break;
		}
	}
	pthread_mutex_unlock(&s->wmu);
	return rc;
}

void sbx_fop_credit(struct sbx *s, uint32_t id, uint32_t n)
{
	(void)sbx_send(s, PROTO_FILE_DATA, &id, PROTO_SB_ID_LEN, &n, sizeof(n));
}

/* ---- what the agent says ------------------------------------------------------- */

/* A guest frame that breaks the protocol: counted and dropped; the
 * sandbox goes on (it is the guest's own sandbox that it confuses). */
static void fault(struct sbx *s, const char *what, const char *why)
{
	s->guest_faults++;
	if (s->guest_faults <= 8)
		fprintf(stderr, "vmrund-sandbox: refused a %s from the guest: %s\n", what, why);
}

static void on_output(struct sbx *s, const uint8_t *p, uint32_t len)
{
	char err[256];
	uint32_t id, n;
	uint16_t stream;
	const uint8_t *data;
	if (proto_decode_output(p, len, &id, &stream, &data, &n, err, sizeof(err))) {
		fault(s, "CMD_OUTPUT", err);
		return;
	}
	struct sbx_cmd *c = sbx_cmd_of(s, id);
	if (!c && id < s->inherited_below)
		return;   /* a fork's: a command of the sandbox it was forked from */
	if (!c || c->ended) {
		fault(s, "CMD_OUTPUT", "of no running command");
		return;
	}
	/* the guest's cap is not trusted: the host's is the same number */
	uint64_t *kept = &c->kept[stream == PROTO_STDERR];
	uint64_t room = *kept >= s->max_output ? 0 : s->max_output - *kept;
	if (n > room)
		n = (uint32_t)room;
	if (n && c->out_fd >= 0 && spool_append(c->out_fd, PROTO_STAGE_RUN, stream, data, n) == 0)
		*kept += n;
	pthread_cond_broadcast(&s->cv);
}

static void on_cmd_exit(struct sbx *s, const uint8_t *p, uint32_t len)
{
	char err[256];
	uint32_t id;
	struct proto_exit e;
	if (proto_decode_cmd_exit(p, len, &id, &e, err, sizeof(err))) {
		fault(s, "CMD_EXIT", err);
		return;
	}
	struct sbx_cmd *c = sbx_cmd_of(s, id);
	if (!c && id < s->inherited_below)
		return;
	if (!c || c->ended) {
		fault(s, "CMD_EXIT", "of no running command");
		return;
	}
	if (c->kept[0] < e.stdout_bytes && c->kept[0] >= s->max_output)
		e.flags |= PROTO_EXIT_STDOUT_TRUNCATED;
	if (c->kept[1] < e.stderr_bytes && c->kept[1] >= s->max_output)
		e.flags |= PROTO_EXIT_STDERR_TRUNCATED;
	c->exit = e;
	c->ended = true;
	c->ended_ms = sbx_realtime_ms();
	if (c->out_fd >= 0)
		close(c->out_fd);
	c->out_fd = -1;
	s->running--;
	pthread_cond_broadcast(&s->cv);
}

/* Keep n more bytes of a READ or LIST, unless its asker left. A guest
 * that sends past what it may (a READ's credit, a LIST's most) or what
 * it must not (a LIST's bad entry) has the rest of it dropped and the
 * operation ended EIO. */
static void fop_keep(struct sbx *s, struct sbx_fop *f, const uint8_t *p, size_t n)
{
	f->total += n;
	if (f->abandoned || f->dropping)
		return;
	if (f->taken && f->taken * 2 >= f->len) {   /* what was taken goes: a long read does not grow */
		memmove(f->data, f->data + f->taken, f->len - f->taken);
		f->len -= f->taken;
		f->taken = 0;
	}
	size_t most = f->op == PROTO_FILE_LIST ? SBX_LIST_MAX_BYTES : PROTO_READ_WINDOW;
	if ((f->op == PROTO_FILE_LIST ? f->total : (uint64_t)(f->len - f->taken) + n) > most) {
		fault(s, "FILE_DATA", "past what the operation may send");
		f->dropping = true;
		pthread_cond_broadcast(&s->cv);
		return;
	}
	if (f->len + n > f->cap) {
		size_t cap = f->cap ? f->cap : 65536;
		while (cap < f->len + n)
			cap *= 2;
		uint8_t *d = realloc(f->data, cap);
		if (!d) {
			f->dropping = true;   /* its asker sees the read cut short */
			pthread_cond_broadcast(&s->cv);
			return;
		}
		f->data = d;
		f->cap = cap;
	}
	memcpy(f->data + f->len, p, n);
	f->len += n;
	pthread_cond_broadcast(&s->cv);
}

static void on_file_data(struct sbx *s, const uint8_t *p, uint32_t len)
{
	uint32_t id, n;
	const uint8_t *data;
	struct sbx_fop *f;
	if (proto_sb_split(p, len, &id, &data, &n) || !(f = fop_of(s, id)) || f->ended ||
	    (f->op != PROTO_FILE_READ && f->op != PROTO_FILE_TAR_OUT && f->op != PROTO_FILE_LIST)) {
		fault(s, "FILE_DATA", "of no read or list under way");
		return;
	}
	if (f->op == PROTO_FILE_LIST) {   /* whole entries only: the API parses them */
		char err[256];
		struct proto_entry e;
		for (uint32_t at = 0; at < n;)
			if (proto_next_entry(data, n, &at, &e, err, sizeof(err))) {
				fault(s, "FILE_DATA", err);
				f->dropping = true;
				pthread_cond_broadcast(&s->cv);
				return;
			}
	}
	fop_keep(s, f, data, n);
}

static void on_file_end(struct sbx *s, const uint8_t *p, uint32_t len)
{
	char err[256];
	uint32_t id, flags;
	int32_t error;
	struct proto_entry e;
	bool has;
	bool bad = proto_decode_file_end(p, len, &id, &error, &flags, &e, &has, err, sizeof(err)) != 0;
	if (bad && len < PROTO_SB_ID_LEN) {
		fault(s, "FILE_END", err);
		return;
	}
	struct sbx_fop *f = fop_of(s, id);
	if (!f || f->ended) {
		fault(s, "FILE_END", bad ? err : "of no operation under way");
		return;
	}
	if (bad) {   /* its operation ends all the same, failed: its asker does not wait on */
		fault(s, "FILE_END", err);
		error = EIO;
		flags = 0;
		has = false;
	} else if (has != (f->op == PROTO_FILE_STAT && !error)) {
		fault(s, "FILE_END", "an entry where none belongs, or none where one does");
		error = EIO;
		has = false;
	}
	f->ended = true;
	f->error = f->dropping && !error ? EIO : error;
	f->flags = flags;
	f->has_entry = has;
	f->entry = e;
	if (f->abandoned)
		sbx_fop_free(f);
	pthread_cond_broadcast(&s->cv);
}

int sbx_agent_frame(struct sbx *s, uint16_t type, const uint8_t *p, uint32_t len)
{
	switch (type) {
	case PROTO_CMD_OUTPUT:
		on_output(s, p, len);
		return 0;
	case PROTO_CMD_EXIT:
		on_cmd_exit(s, p, len);
		return 0;
	case PROTO_FILE_DATA:
		on_file_data(s, p, len);
		return 0;
	case PROTO_FILE_END:
		on_file_end(s, p, len);
		return 0;
	case PROTO_PAUSED:
		if (s->state == SBX_PAUSING && s->pause_sent && !s->agent_paused) {
			s->agent_paused = true;
			pthread_cond_broadcast(&s->cv);   /* a diff waits for the hold */
		} else
			fault(s, "frame", "PAUSED unasked");
		return 0;
	case PROTO_READY:   /* the answer to a called-off pause's RESUME */
		if (s->expect_ready)
			s->expect_ready = false;
		else
			fault(s, "frame", "READY unasked");
		return 0;
	case PROTO_ERROR: {
		char text[200], why[256];
		snprintf(why, sizeof(why), "the agent failed: %s", session_printable(text, sizeof(text), p, len));
		sbx_set_state(s, SBX_STOPPING, why);
		return -1;
	}
	default: {
		char why[64];
		snprintf(why, sizeof(why), "type %u", type);
		fault(s, "frame", why);
		return 0;
	}
	}
}

enum run_serve_end sbx_serve(void *ctx, int conn, const struct run_serving *where)
{
	struct sbx_run *run = ctx;
	struct sbx *s = run->s;
	pthread_mutex_lock(&s->mu);
	snprintf(s->cgroup, sizeof(s->cgroup), "%s", where->cgroup);
	snprintf(s->workspace_image, sizeof(s->workspace_image), "%s", where->workspace_image);
	s->pausable = where->pausable;
	pthread_mutex_unlock(&s->mu);
	struct proto_reader *rd = malloc(sizeof(*rd));
	if (!rd) {
		pthread_mutex_lock(&s->mu);
		sbx_set_state(s, SBX_STOPPING, "out of memory");
		pthread_mutex_unlock(&s->mu);
		return RUN_SERVE_END;
	}
	proto_reader_init(rd);
	pthread_mutex_lock(&s->mu);
	if (s->state != SBX_STARTING && s->state != SBX_RESUMING) {   /* deleted while it booted */
		pthread_mutex_unlock(&s->mu);
		free(rd);
		return RUN_SERVE_END;
	}
	__atomic_store_n(&s->conn, conn, __ATOMIC_RELEASE);
	if (s->state == SBX_RESUMING) {
		sbx_resumed(s);
		s->last_stop_ms = sbx_realtime_ms() - s->stopped_ms;
	} else
		s->started_ms = sbx_realtime_ms();
	sbx_set_state(s, SBX_RUNNING, "");
	bool paused = false;
	for (;;) {
		if (s->state == SBX_PAUSING && !s->agent_paused)
			sbx_pause_step(s);
		if (s->state == SBX_PAUSING && s->agent_paused && !s->hold) {
			s->stopped_ms = sbx_realtime_ms();
			paused = true;
			break;
		}
		if (s->state != SBX_RUNNING && s->state != SBX_PAUSING)
			break;
		int64_t left = s->deadline_ms - sbx_realtime_ms();
		if (left <= 0 && s->state == SBX_RUNNING) {
			if (s->on_timeout_pause && s->pausable) {
				sbx_pause_begin(s, "its time ran out (timeout_s): paused");
				continue;
			}
			sbx_set_state(s, SBX_STOPPING, "its time ran out (timeout_s)");
			break;
		}
		int wait = s->state == SBX_PAUSING ? 100 : left > 60000 ? 60000 : (int)left;
		pthread_mutex_unlock(&s->mu);
		struct pollfd p[3] = { { conn, POLLIN, 0 }, { run->cancel_fd, POLLIN, 0 }, { s->wake_fd, POLLIN, 0 } };
		int n = poll(p, 3, wait);
		pthread_mutex_lock(&s->mu);
		if (n < 0 && errno != EINTR) {
			sbx_set_state(s, SBX_STOPPING, "poll failed");
			break;
		}
		if (n <= 0)
			continue;
		if (p[1].revents) {
			sbx_set_state(s, SBX_STOPPING, "the supervisor was told to stop (SIGTERM)");
			break;
		}
		if (p[2].revents) {
			uint64_t v;
			(void)!read(s->wake_fd, &v, sizeof(v));
		}
		if (!p[0].revents)
			continue;
		ssize_t k = proto_reader_fill(rd, conn);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (k <= 0) {
			sbx_set_state(s, SBX_STOPPING, "the guest ended the connection (it died or reset)");
			break;
		}
		uint16_t type;
		const uint8_t *payload;
		uint32_t len;
		int r;
		char err[256];
		while ((r = proto_reader_next(rd, &type, &payload, &len, err, sizeof(err))) == 1)
			if (sbx_agent_frame(s, type, payload, len) < 0)
				break;
		if (r < 0) {
			char why[300];
			snprintf(why, sizeof(why), "the guest broke the protocol: %s", err);
			sbx_set_state(s, SBX_STOPPING, why);
		}
	}
	__atomic_store_n(&s->conn, -1, __ATOMIC_RELEASE);
	/* paused, its commands live on in the saved VM */
	if (!paused)
		sbx_end_everything(s);
	pthread_mutex_unlock(&s->mu);
	/* no writer is mid-frame once wmu is ours: the run library closes conn */
	pthread_mutex_lock(&s->wmu);
	pthread_mutex_unlock(&s->wmu);
	free(rd);
	return paused ? RUN_SERVE_PAUSE : RUN_SERVE_END;
}
