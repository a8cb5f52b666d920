/* A sandbox's workspace diff (supervisor.h, wsdiff.h): GET /diff lists
 * what changed between two of its workspace images. The start and the
 * checkpoints never change; the workspace now is read while the agent
 * is held, its file system frozen, so that nothing changes under the
 * walk, or as it is while the sandbox is paused. */
#include "api.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "run_pause.h"
#include "tree.h"
#include "wsdiff.h"

/* The longest a diff waits for the agent to be held. */
#define HOLD_WAIT_MS (SBX_PAUSE_WAIT_MS + 5000)

/* The image that which names ("start", a checkpoint) into path: 0, or -1
 * when there is none. */
static int image_of(const struct sbx *s, const char *which, char *path, size_t len)
{
	if (!strcmp(which, "start"))
		snprintf(path, len, "%s/" RUN_CHECKPOINT_START, s->keep);
	else if (run_checkpoint_name_ok(which))
		snprintf(path, len, "%s/" RUN_CHECKPOINTS_DIR "/%s/" RUN_CHECKPOINT_IMAGE, s->keep, which);
	else
		return -1;
	return access(path, R_OK);
}

struct hold {
	struct sbx *s;
	unsigned gen;
};

/* The hold came (the agent paused), or will not: called off, or the
 * sandbox is another pause's or stopping. */
static bool hold_settled(void *arg)
{
	const struct hold *h = arg;
	const struct sbx *s = h->s;
	return s->pause_gen != h->gen || !s->hold || s->state != SBX_PAUSING || s->agent_paused;
}

/* The workspace as it is now, walked into m: with mu held (dropped while
 * it walks). 0, or an HTTP status with why; *held_ms how long the agent
 * was held (-1: it was not: the sandbox is paused). */
static unsigned walk_now(struct sbx *s, const char *dir, struct artifacts_result *m, int64_t *held_ms, char *err,
			 size_t errlen)
{
	*held_ms = -1;
	char image[PATH_MAX];
	snprintf(image, sizeof(image), "%s", s->workspace_image);
	if (s->state == SBX_PAUSED) {
		pthread_mutex_unlock(&s->mu);
		int rc = wsdiff_walk(image, dir, m, err, errlen);
		pthread_mutex_lock(&s->mu);
		return rc ? 500 : 0;
	}
	if (s->state != SBX_RUNNING || !image[0]) {
		snprintf(err, errlen, "the sandbox is %s: only its checkpoints can be compared", sbx_state_name(s->state));
		return 409;
	}
	int64_t t0 = sbx_realtime_ms();
	struct hold h = { s, sbx_hold_begin(s) };
	api_wait_for(s, hold_settled, &h, HOLD_WAIT_MS);
	if (s->pause_gen != h.gen || !s->hold || s->state != SBX_PAUSING || !s->agent_paused) {
		snprintf(err, errlen, "the agent could not be held to read the workspace: %s",
			 s->pause_error[0] ? s->pause_error : s->reason);
		sbx_hold_end(s, h.gen);
		return 409;
	}
	pthread_mutex_unlock(&s->mu);
	int rc = wsdiff_walk(image, dir, m, err, errlen);
	pthread_mutex_lock(&s->mu);
	sbx_hold_end(s, h.gen);
	*held_ms = sbx_realtime_ms() - t0;   /* to the RESUME sent; its READY follows */
	return rc ? 500 : 0;
}

/* The "now" side of a diff (wsdiff_side.walk): walk_now with mu taken,
 * its status and hold kept for the answer. */
struct now {
	struct sbx *s;
	unsigned status;   /* 0, or walk_now's */
	int64_t held_ms;
};

static int walk_now_side(void *ctx, const char *dir, struct artifacts_result *m, char *err, size_t errlen)
{
	struct now *n = ctx;
	pthread_mutex_lock(&n->s->mu);
	n->status = walk_now(n->s, dir, m, &n->held_ms, err, errlen);
	pthread_mutex_unlock(&n->s->mu);
	return n->status ? -1 : 0;
}

enum MHD_Result api_diff(struct sbx *s, struct MHD_Connection *conn)
{
	const char *from = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "from");
	const char *to = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "to");
	char fimg[PATH_MAX + 200], timg[PATH_MAX + 200], scratch[PATH_MAX], err[600] = "";
	from = from ? from : "start";
	if (to && !strcmp(to, "now"))
		to = NULL;
	if (image_of(s, from, fimg, sizeof(fimg)))
		return api_answer_error(conn, 404, "from: no checkpoint %.64s", from);
	if (to && image_of(s, to, timg, sizeof(timg)))
		return api_answer_error(conn, 404, "to: no checkpoint %.64s", to);
	pthread_mutex_lock(&s->mu);
	if (s->diffing) {
		pthread_mutex_unlock(&s->mu);
		return api_answer_error(conn, 409, "another diff is under way: try again when it is done");
	}
	s->diffing = true;
	pthread_mutex_unlock(&s->mu);
	struct now now = { s, 0, -1 };
	struct wsdiff_side a = { .image = fimg }, b = { .image = timg };
	if (!to)
		b = (struct wsdiff_side){ .walk = walk_now_side, .ctx = &now };
	json_t *o = NULL;
	snprintf(scratch, sizeof(scratch), "%s/.diff", s->dir);
	tree_remove(scratch, 3);   /* a crashed diff's */
	int rc = wsdiff_sides(&a, &b, scratch, &o, NULL, NULL, err, sizeof(err));
	pthread_mutex_lock(&s->mu);
	s->diffing = false;
	pthread_mutex_unlock(&s->mu);
	if (rc)
		return api_answer_error(conn, now.status ? now.status : 500, "no diff: %s", err);
	json_object_set_new(o, "from", json_string(from));
	json_object_set_new(o, "to", json_string(to ? to : "now"));
	json_object_set_new(o, "held_ms", now.held_ms >= 0 ? json_integer(now.held_ms) : json_null());
	return api_answer_json(conn, 200, o);
}
