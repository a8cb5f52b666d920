/* An interactive test (judge_run.h): the contestant's program and the
 * interactor, each in a fork of its compiled checkpoint, started as
 * background commands with their stdin open; vmrund follows both
 * commands' events and writes what one prints to the other's stdin, as
 * it comes. When one ends, the other's stdin is closed, so that it sees
 * the end of the talk instead of waiting for its own time to run out.
 * The host is in the middle on purpose: the two VMs share nothing, and
 * everything between them is what vmrund saw and bounded. It passes as
 * text, as the commands' events carry it: bytes that are not UTF-8 (a
 * NUL among them) arrive as U+FFFD, which interactive problems, whose
 * protocols are lines of text, do not send. */
#include "judge_run.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "sse.h"

#define SLACK_S 15                    /* past both programs' time: the VMs' own ends and the host's calls */

/* One of the two programs, as the relay sees it. */
struct side {
	const char *who;              /* "contestant" or "interactor", for errors */
	char sbx[SCHED_ID_MAX];       /* its fork; "" none */
	unsigned cid;                 /* its command; 0 none */
	struct sbxc ev;               /* its events */
	char *buf;                    /* events read and not yet whole */
	size_t len;
	bool ended;                   /* its exit event came, or its stream closed */
	bool broken;                  /* a write to its peer's stdin failed, not for the peer's end */
	int64_t deadline_ms;          /* the relay's (monotonic): no write to the peer outlives it */
	struct side *peer;
	struct sbx_user *u;
};

/* How long a write to the peer may take: what is left of the relay's
 * time, at most a call's. One read of events may hold many of them, each
 * a write: without this a peer whose stdin stalls would hold the relay a
 * call's time per event, far past its deadline. 0: none left. */
static int write_ms(const struct side *s)
{
	int64_t left = s->deadline_ms - clock_mono_ms();
	return left <= 0 ? 0 : left < SBXU_CALL_MS ? (int)left : SBXU_CALL_MS;
}

/* An event of s's command: its stdout to the peer's stdin; its exit
 * closes the peer's stdin. A peer that ended takes nothing more (its
 * stdin answers 409), which is no error of the relay's. Past the relay's
 * deadline nothing more is passed on. */
static int on_event(void *ctx, const char *name, const char *data, size_t len)
{
	struct side *s = ctx;
	struct side *p = s->peer;
	int ms = write_ms(s);
	if (!strcmp(name, "exit")) {
		s->ended = true;
		if (!p->ended && ms)
			s->broken |= sbxu_stdin(s->u, p->sbx, p->cid, "", 0, true, ms) < 0;
		return 0;
	}
	if (strcmp(name, "stdout") || p->ended || !ms)
		return 0;
	json_t *o = json_loadb(data, len, 0, NULL);
	const json_t *text = json_object_get(o, "text");
	if (json_string_length(text))
		s->broken |= sbxu_stdin(s->u, p->sbx, p->cid, json_string_value(text), json_string_length(text), false,
					ms) < 0;
	json_decref(o);
	return 0;
}

/* Relay between a and b until both ended or deadline_ms (monotonic). */
static void relay(struct side *a, struct side *b, int64_t deadline_ms)
{
	struct side *sides[2] = { a, b };
	while (!(a->ended && b->ended)) {
		int64_t left = deadline_ms - clock_mono_ms();
		if (left <= 0)
			return;
		struct pollfd pfd[2];
		for (int i = 0; i < 2; i++) {
			/* bytes that came with the head are read before any poll */
			bool held = sides[i]->ev.off < sides[i]->ev.len;
			pfd[i] = (struct pollfd){ .fd = sides[i]->ended ? -1 : sides[i]->ev.fd, .events = POLLIN,
						  .revents = held && !sides[i]->ended ? POLLIN : 0 };
		}
		if (!pfd[0].revents && !pfd[1].revents && poll(pfd, 2, left > 1000 ? 1000 : (int)left) < 0 &&
		    errno != EINTR)
			return;
		for (int i = 0; i < 2; i++)
			if (pfd[i].revents && !sides[i]->ended)
				/* over: its exit came, or the sandbox went */
				sides[i]->ended |= !sbxu_events_read(&sides[i]->ev, &sides[i]->buf, &sides[i]->len,
								       on_event, sides[i]);
	}
}

/* s's fork of pg, with test t's files when t: 0, or -1 with u->err. */
static int side_fork(struct judge_job *job, struct side *s, const struct program *pg, double time_s,
		     const struct judge_test *t)
{
	if (judge_fork(job, pg, time_s + SLACK_S + 60, s->sbx))
		return -1;
	/* the interactor's files: the test's input (its secret) and answer */
	if (t && (sbxu_put_file(&job->u, s->sbx, judge_testlib_args[0], t->in, t->in_len) ||
		  sbxu_put_file(&job->u, s->sbx, judge_testlib_args[2], t->expected ? t->expected : "",
				t->expected_len)))
		return -1;
	return 0;
}

/* s's command started with argv (taken) and its events followed: 0, or
 * -1 with u->err. */
static int side_start(struct judge_job *job, struct side *s, json_t *argv, double time_s)
{
	if (!(s->cid = sbxu_start(&job->u, s->sbx, argv, time_s)) || sbxu_events(&job->u, s->sbx, s->cid, &s->ev))
		return -1;
	return 0;
}

/* s's command as it ended, with its output: its answer, or NULL with
 * u->err (also when it has not ended: the relay's deadline passed). */
static json_t *side_end(struct sbx_user *u, const struct side *s)
{
	json_t *cmd = s->cid ? sbxu_command_get(u, s->sbx, s->cid) : NULL;
	if (cmd && !strcmp(json_string_value(json_object_get(cmd, "state")) ?: "", "running")) {
		snprintf(u->err, sizeof(u->err), "the %s's command did not end in time", s->who);
		json_decref(cmd);
		return NULL;
	}
	return cmd;
}

int judge_interact(struct judge_job *job, const struct judge_test *t, struct judge_talk *talk)
{
	const struct judge_request *jr = job->jr;
	struct side c = { .who = "contestant", .ev = { .fd = -1 }, .u = &job->u },
		    i = { .who = "interactor", .ev = { .fd = -1 }, .u = &job->u };
	c.peer = &i;
	i.peer = &c;
	int rc = -1;
	memset(talk, 0, sizeof(*talk));
	double itime = jr->timeout_s + JUDGE_INTERACTOR_GRACE_S;
	/* both forks made first, so that both clocks start together; the
	 * interactor first: what the contestant prints at its start has
	 * somewhere to go */
	if (side_fork(job, &i, &job->interactor, itime, t) || side_fork(job, &c, &job->contestant, jr->timeout_s, NULL) ||
	    side_start(job, &i, judge_argv(job, &job->interactor, judge_testlib_args, 3), itime) ||
	    side_start(job, &c, judge_argv(job, &job->contestant, NULL, 0), jr->timeout_s))
		goto out;
	c.deadline_ms = i.deadline_ms = clock_mono_ms() + (int64_t)((itime + SLACK_S) * 1000);
	relay(&c, &i, c.deadline_ms);
	if (c.broken || i.broken) {
		snprintf(job->u.err + strlen(job->u.err), sizeof(job->u.err) - strlen(job->u.err), " (the relay)");
		goto out;
	}
	if (!(talk->contestant = side_end(&job->u, &c)) || !(talk->interactor = side_end(&job->u, &i)))
		goto out;
	/* what the interactor wrote for a checker; none written is empty */
	if ((jr->checker == JUDGE_PROGRAM || t->expected) &&
	    sbxu_get_file(&job->u, i.sbx, judge_testlib_args[1], jr->max_output, &talk->output, &talk->output_len) < 0)
		goto out;
	rc = 0;
out:
	for (struct side *s[] = { &c, &i }, **p = s; p < s + 2; p++) {
		sbxc_close(&(*p)->ev);
		free((*p)->buf);
		if ((*p)->sbx[0])
			sbxu_destroy(&job->u, (*p)->sbx);
	}
	if (rc)
		judge_talk_free(talk);
	return rc;
}

void judge_talk_free(struct judge_talk *talk)
{
	json_decref(talk->contestant);
	json_decref(talk->interactor);
	free(talk->output);
	memset(talk, 0, sizeof(*talk));
}
