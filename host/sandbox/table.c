/* The sandbox's table (host/sandbox/supervisor.h): its state and state
 * file, its commands' records, its file operations' slots and its
 * Idempotency-Keys, which the agent's side (link.c), the API (api*.c) and
 * a park (park.c) keep. */
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "spool.h"

int64_t sbx_realtime_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int sbx_init(struct sbx *s, const char *dir)
{
	memset(s, 0, sizeof(*s));
	s->dir = dir;
	s->keep = dir;
	s->conn = -1;
	s->next_cmd = 1;
	s->next_fop = 1;
	s->created_ms = sbx_realtime_ms();
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	pthread_mutex_init(&s->wmu, NULL);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" SBX_CMDS_DIR, dir);
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -1;
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return s->wake_fd < 0 ? -1 : 0;
}

static void cmd_free(struct sbx_cmd *c)
{
	if (c->out_fd >= 0)
		close(c->out_fd);
	json_decref(c->request);
	free(c);
}

void sbx_release(struct sbx *s)
{
	for (unsigned i = 0; i < s->ncmd; i++)
		cmd_free(s->cmd[i]);
	for (unsigned i = 0; i < SBX_MAX_FILE_OPS; i++)
		free(s->fop[i].data);
	json_decref(s->limits);
	json_decref(s->checkpoint_meta);
	free(s->keys);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->wmu);
}

const char *sbx_state_name(enum sbx_state st)
{
	static const char *const names[] = { "starting", "running", "stopping", "stopped",
					     "pausing",  "paused",  "resuming", "failed" };
	return (unsigned)st < sizeof(names) / sizeof(names[0]) ? names[st] : "?";
}

void sbx_set_state(struct sbx *s, enum sbx_state st, const char *reason)
{
	s->state = st;
	if (reason)
		snprintf(s->reason, sizeof(s->reason), "%s", reason);
	json_t *j = json_pack("{s:s,s:s,s:i,s:I}", "state", sbx_state_name(st), "reason", s->reason, "pid", (int)getpid(),
			      "timeout_at_ms", (json_int_t)s->deadline_ms);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	char path[PATH_MAX], tmp[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" SBX_STATE_FILE, s->dir);
	snprintf(tmp, sizeof(tmp), "%s/" SBX_STATE_FILE ".tmp", s->dir);
	/* the state file is what a restarted vmrund reads: never half written */
	if (!text || spool_write_file(tmp, text, strlen(text), false, 0600) < 0 || rename(tmp, path) < 0)
		fprintf(stderr, "vmrund-sandbox: %s: %s\n", path, text ? strerror(errno) : "out of memory");
	free(text);
	pthread_cond_broadcast(&s->cv);
	uint64_t one = 1;
	(void)!write(s->wake_fd, &one, sizeof(one));
}

struct sbx_cmd *sbx_cmd_of(struct sbx *s, uint32_t id)
{
	for (unsigned i = 0; i < s->ncmd; i++)
		if (s->cmd[i]->id == id)
			return s->cmd[i];
	return NULL;
}

struct sbx_cmd *sbx_cmd_new(struct sbx *s, char *err, size_t errlen)
{
	if (s->running >= SANDBOX_MAX_CMDS_GUEST) {
		snprintf(err, errlen, "%d commands are running already", SANDBOX_MAX_CMDS_GUEST);
		return NULL;
	}
	if (s->ncmd == SBX_MAX_CMDS) {   /* the oldest that ended, and no one reads, makes room */
		unsigned i = 0;
		while (i < s->ncmd && (!s->cmd[i]->ended || s->cmd[i]->refs))
			i++;
		if (i == s->ncmd) {
			snprintf(err, errlen, "%d commands are kept, none of them can go yet", SBX_MAX_CMDS);
			return NULL;
		}
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/" SBX_CMDS_DIR "/%u.out", s->dir, s->cmd[i]->id);
		unlink(path);
		cmd_free(s->cmd[i]);
		memmove(&s->cmd[i], &s->cmd[i + 1], (s->ncmd - i - 1) * sizeof(s->cmd[0]));
		s->ncmd--;
	}
	struct sbx_cmd *c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->id = s->next_cmd;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" SBX_CMDS_DIR "/%u.out", s->dir, c->id);
	c->out_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (c->out_fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		free(c);
		return NULL;
	}
	s->next_cmd++;
	c->started_ms = sbx_realtime_ms();
	s->cmd[s->ncmd++] = c;
	s->running++;
	return c;
}

struct sbx_fop *sbx_fop_new(struct sbx *s, uint32_t op)
{
	for (unsigned i = 0; i < SBX_MAX_FILE_OPS; i++)
		if (!s->fop[i].used) {
			s->fop[i] = (struct sbx_fop){ .used = true, .id = s->next_fop++, .op = op };
			return &s->fop[i];
		}
	return NULL;
}

void sbx_fop_free(struct sbx_fop *f)
{
	free(f->data);
	*f = (struct sbx_fop){ 0 };
}

const struct sbx_key *sbx_key_of(const struct sbx *s, const char *key)
{
	for (unsigned i = 0; i < s->nkeys; i++)
		if (!strcmp(s->keys[i].key, key))
			return &s->keys[i];
	return NULL;
}

int sbx_key_add(struct sbx *s, const char *key, const char *hash, uint32_t id)
{
	if (s->nkeys == SBX_MAX_KEYS)
		return -1;
	if (s->nkeys == s->keys_cap) {
		unsigned cap = s->keys_cap ? 2 * s->keys_cap : 64;
		struct sbx_key *k = realloc(s->keys, cap * sizeof(*k));
		if (!k)
			return -1;
		s->keys = k;
		s->keys_cap = cap;
	}
	struct sbx_key *k = &s->keys[s->nkeys++];
	snprintf(k->key, sizeof(k->key), "%s", key);
	snprintf(k->hash, sizeof(k->hash), "%s", hash);
	k->id = id;
	return 0;
}

void sbx_end_everything(struct sbx *s)
{
	for (unsigned i = 0; i < s->ncmd; i++) {
		struct sbx_cmd *c = s->cmd[i];
		if (c->ended)
			continue;
		c->ended = true;
		c->ended_ms = sbx_realtime_ms();
		c->exit = (struct proto_exit){ .kind = PROTO_END_SIGNALED, .signal = 9 };
		if (c->out_fd >= 0)
			close(c->out_fd);
		c->out_fd = -1;
	}
	s->running = 0;
	for (unsigned i = 0; i < SBX_MAX_FILE_OPS; i++)
		if (s->fop[i].used && !s->fop[i].ended) {
			s->fop[i].ended = true;
			s->fop[i].error = EIO;
		}
	pthread_cond_broadcast(&s->cv);
}
