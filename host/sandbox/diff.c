/* A sandbox's workspace diff (supervisor.h, wsdiff.h): GET /diff lists
 * what changed between two of its workspace images. The start and the
 * checkpoints never change; the workspace now is read while the agent
 * is held, its file system frozen, so that nothing changes under the
 * walk, or as it is while the sandbox is paused. */
#include "api.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
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
		snprintf(path, len, "%s/" RUN_CHECKPOINT_START, s->dir);
	else if (run_checkpoint_name_ok(which))
		snprintf(path, len, "%s/" RUN_CHECKPOINTS_DIR "/%s/" RUN_CHECKPOINT_IMAGE, s->dir, which);
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
	api_wait_until(s, hold_settled, &h, t0 + HOLD_WAIT_MS);
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

enum MHD_Result api_diff(struct sbx *s, struct MHD_Connection *conn)
{
	const char *from = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "from");
	const char *to = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "to");
	char fimg[PATH_MAX + 200], timg[PATH_MAX + 200], scratch[PATH_MAX], a[PATH_MAX + 8], b[PATH_MAX + 8];
	char err[600] = "";
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
	snprintf(scratch, sizeof(scratch), "%s/.diff", s->dir);
	snprintf(a, sizeof(a), "%s/from", scratch);
	snprintf(b, sizeof(b), "%s/to", scratch);
	struct artifacts_result ma = { 0 }, mb = { 0 };
	struct wsdiff d = { 0 };
	json_t *o = NULL;
	unsigned status = 500;
	int64_t held_ms = -1;
	tree_remove(scratch, 3);   /* a crashed diff's */
	if (mkdir(scratch, 0700) < 0)
		snprintf(err, sizeof(err), "%.300s: %s", scratch, strerror(errno));
	else if (wsdiff_walk(fimg, a, &ma, err, sizeof(err)) == 0) {
		if (to) {
			status = wsdiff_walk(timg, b, &mb, err, sizeof(err)) ? 500 : 0;
		} else {
			pthread_mutex_lock(&s->mu);
			status = walk_now(s, b, &mb, &held_ms, err, sizeof(err));
			pthread_mutex_unlock(&s->mu);
		}
	}
	if (status == 0 && (wsdiff_compare(&ma, &mb, &d) || !(o = wsdiff_json(&d, &ma, a, &mb, b)))) {
		snprintf(err, sizeof(err), "out of memory");
		status = 500;
	}
	wsdiff_free(&d);
	artifacts_result_free(&ma);
	artifacts_result_free(&mb);
	tree_remove(scratch, 3);
	pthread_mutex_lock(&s->mu);
	s->diffing = false;
	pthread_mutex_unlock(&s->mu);
	if (!o)
		return api_answer_error(conn, status, "no diff: %s", err);
	json_object_set_new(o, "from", json_string(from));
	json_object_set_new(o, "to", json_string(to ? to : "now"));
	json_object_set_new(o, "held_ms", held_ms >= 0 ? json_integer(held_ms) : json_null());
	return api_answer_json(conn, 200, o);
}
