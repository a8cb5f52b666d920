/* A sandbox's pause and resume, the supervisor's side (supervisor.h): the
 * agent is asked to stop sending (PAUSE, answered PAUSED), the serve hook
 * hands the VM to the run library, which has vmm save it and exit; the
 * paused hook then waits for POST /resume, a DELETE, SIGTERM or the
 * pause's time to live; the serve hook takes the resumed VM's connection. */
#include "supervisor.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Whether a file operation is still under way: its frames would be lost
 * with the VM's vsock connections. */
static bool file_ops_busy(const struct sbx *s)
{
	for (unsigned i = 0; i < SBX_MAX_FILE_OPS; i++)
		if (s->fop[i].used && !s->fop[i].ended)
			return true;
	return false;
}

void sbx_pause_begin(struct sbx *s, const char *reason)
{
	int64_t now = sbx_realtime_ms();
	s->left_ms = s->deadline_ms > now ? s->deadline_ms - now : 0;
	s->pause_asked_ms = now;
	s->pause_sent = s->agent_paused = false;
	s->pause_error[0] = '\0';
	s->pause_gen++;
	sbx_set_state(s, SBX_PAUSING, reason);
}

/* Call the pause off: the agent goes on (RESUME on this connection,
 * answered READY), and so does the sandbox. */
static void call_off(struct sbx *s, const char *why)
{
	snprintf(s->pause_error, sizeof(s->pause_error), "%s", why);
	bool sent = s->pause_sent;
	s->pause_sent = false;
	s->hold = false;   /* a hold called off is over: a later pause saves the VM */
	s->expect_ready = sent;
	sbx_set_state(s, SBX_RUNNING, "");
	if (!sent)
		return;
	uint64_t none = 0;   /* the guest's clock did not stop */
	pthread_mutex_unlock(&s->mu);
	int rc = sbx_send(s, PROTO_RESUME, &none, sizeof(none), NULL, 0);
	pthread_mutex_lock(&s->mu);
	if (rc < 0)
		sbx_set_state(s, SBX_STOPPING, "the agent's link failed while a pause was called off");
}

unsigned sbx_hold_begin(struct sbx *s)
{
	sbx_pause_begin(s, "held while its workspace is read");
	s->hold = true;
	return s->pause_gen;
}

void sbx_hold_end(struct sbx *s, unsigned gen)
{
	if (s->pause_gen != gen || !s->hold)
		return;
	s->hold = false;
	if (s->state == SBX_PAUSING)
		call_off(s, "");
}

void sbx_pause_step(struct sbx *s)
{
	int64_t waited = sbx_realtime_ms() - s->pause_asked_ms;
	if (s->pause_sent) {
		if (waited > SBX_PAUSE_WAIT_MS)
			call_off(s, "the agent did not pause within 30 s: the sandbox goes on");
		return;
	}
	if (file_ops_busy(s)) {
		if (waited > SBX_PAUSE_WAIT_MS)
			call_off(s, "file operations under way did not end within 30 s: the sandbox goes on");
		return;
	}
	s->pause_sent = true;
	pthread_mutex_unlock(&s->mu);
	int rc = sbx_send(s, PROTO_PAUSE, NULL, 0, NULL, 0);
	pthread_mutex_lock(&s->mu);
	if (rc < 0 && s->state == SBX_PAUSING)
		sbx_set_state(s, SBX_STOPPING, "the agent's link failed while pausing");
}

void sbx_resumed(struct sbx *s)
{
	int64_t life = s->resume_timeout_s > 0 ? (int64_t)(s->resume_timeout_s * 1000.0)
		       : s->left_ms > 0          ? s->left_ms
						 : (int64_t)(s->timeout_s * 1000.0);
	s->deadline_ms = sbx_realtime_ms() + life;
	s->resume_timeout_s = 0;
	s->pauses++;
}

/* Paused: wait (mu held, dropped while waiting) until the sandbox is to
 * resume (0) or end (-1). */
static int wait_paused(struct sbx *s, int cancel_fd)
{
	for (;;) {
		if (s->state == SBX_RESUMING)
			return 0;
		if (s->state != SBX_PAUSED)
			return -1;   /* DELETE */
		int64_t wait = 60000;
		if (s->pause_ttl_s) {
			int64_t left = s->paused_ms + (int64_t)s->pause_ttl_s * 1000 - sbx_realtime_ms();
			if (left <= 0) {
				sbx_set_state(s, SBX_STOPPING, "it stayed paused longer than its pause_ttl_s");
				return -1;
			}
			wait = left < wait ? left : wait;
		}
		pthread_mutex_unlock(&s->mu);
		struct pollfd p[2] = { { cancel_fd, POLLIN, 0 }, { s->wake_fd, POLLIN, 0 } };
		int n = poll(p, 2, (int)wait);
		pthread_mutex_lock(&s->mu);
		if (n > 0 && p[0].revents) {
			sbx_set_state(s, SBX_STOPPING, "the supervisor was told to stop (SIGTERM)");
			return -1;
		}
		if (n > 0 && p[1].revents) {
			uint64_t v;
			(void)!read(s->wake_fd, &v, sizeof(v));
		}
	}
}

/* A checkpoint: what was saved is kept, with mu dropped while it is
 * copied, and the VM goes on at once (0), unless the sandbox was deleted
 * meanwhile (-1). */
static int take_checkpoint(struct sbx *s, const struct run_saved *saved)
{
	char name[sizeof(s->checkpoint)], err[sizeof(s->checkpoint_error)] = "";
	snprintf(name, sizeof(name), "%s", s->checkpoint);
	uint32_t next = s->next_cmd;
	json_t *meta = NULL;
	pthread_mutex_unlock(&s->mu);
	int rc = sbx_checkpoint_save(s, name, next, saved, &meta, err, sizeof(err));
	pthread_mutex_lock(&s->mu);
	s->checkpoint[0] = '\0';
	s->checkpoint_over = rc == 1;
	s->checkpoint_meta = rc ? NULL : meta;
	snprintf(s->checkpoint_error, sizeof(s->checkpoint_error), "%s", rc ? err : "");
	if (s->state != SBX_PAUSING)
		return -1;
	s->resume_timeout_s = 0;
	sbx_set_state(s, SBX_RESUMING, "");
	return 0;
}

/* The paused VM parked in s->shared (park.c) for any node to resume:
 * state paused, its time to live in timeout_at_ms (0: none), and this
 * process to end (0). -1 when it could not be parked: it stays paused
 * here, or was deleted meanwhile. */
static int park(struct sbx *s, const struct run_saved *saved)
{
	char why[400] = "";
	if (sbx_park(s, saved, why, sizeof(why))) {
		fprintf(stderr, "vmrund-sandbox: parking the paused VM: %s: it stays paused on this node\n", why);
		return -1;
	}
	if (s->state != SBX_PAUSING)
		return -1;   /* deleted while it was parked: vmrund removes what was parked */
	s->deadline_ms = s->pause_ttl_s ? s->paused_ms + (int64_t)s->pause_ttl_s * 1000 : 0;
	sbx_set_state(s, SBX_PAUSED, "parked: any node of the cluster may resume it");
	return 0;
}

int sbx_paused(void *ctx, enum run_pause_event ev, const char *why, const struct run_saved *saved)
{
	struct sbx_run *run = ctx;
	struct sbx *s = run->s;
	pthread_mutex_lock(&s->mu);
	int rc = -1;
	if (ev == RUN_PAUSE_FAILED) {
		sbx_end_everything(s);
		sbx_set_state(s, SBX_FAILED, why);
	} else if (s->state == SBX_PAUSING && s->checkpoint[0]) {
		rc = take_checkpoint(s, saved);
		if (rc)
			sbx_end_everything(s);
	} else if (s->state == SBX_PAUSING) {
		s->paused_ms = sbx_realtime_ms();
		if (s->shared && !park(s, saved)) {
			pthread_mutex_unlock(&s->mu);
			return -1;   /* this process ends; the VM lives on in s->shared */
		}
		if (s->state != SBX_PAUSING) {   /* deleted while it was parked */
			sbx_end_everything(s);
			pthread_mutex_unlock(&s->mu);
			return -1;
		}
		sbx_set_state(s, SBX_PAUSED, NULL);
		rc = wait_paused(s, run->cancel_fd);
		if (rc)
			sbx_end_everything(s);
	} else {
		sbx_end_everything(s);   /* deleted while vmm saved it */
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}
