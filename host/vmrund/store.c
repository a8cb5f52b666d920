/* What every store backend shares: the rows' memory and the states'
 * names. The names are the API's and also what the backends keep on disk,
 * so changing one is a schema change. */
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "utf8.h"

static const char *const state_names[RS_COUNT] = {
	[RS_QUEUED] = "queued",       [RS_RUNNING] = "running",     [RS_SUCCEEDED] = "succeeded",
	[RS_FAILED] = "failed",       [RS_TIMED_OUT] = "timed_out", [RS_CANCELLED] = "cancelled",
	[RS_LOST] = "lost",
};

static const char *const sbx_state_names[SBS_COUNT] = {
	[SBS_STARTING] = "starting", [SBS_RUNNING] = "running", [SBS_STOPPING] = "stopping",
	[SBS_STOPPED] = "stopped",   [SBS_LOST] = "lost",         [SBS_PAUSED] = "paused",
	[SBS_FAILED] = "failed",     [SBS_RESUMABLE] = "resumable",
};

void store_sandbox_free(struct store_sandbox *sb)
{
	free(sb->request);
	memset(sb, 0, sizeof(*sb));
}

const char *store_sbx_state_name(enum sbx_row_state st)
{
	if ((int)st < 0 || (int)st >= SBS_COUNT)
		return NULL;
	return sbx_state_names[st];
}

int store_sbx_state_parse(const char *name)
{
	if (!name)
		return -1;
	for (int i = 0; i < SBS_COUNT; i++)
		if (!strcmp(name, sbx_state_names[i]))
			return i;
	return -1;
}

void store_run_free(struct store_run *run)
{
	free(run->request);
	free(run->result);
	memset(run, 0, sizeof(*run));
}

void store_close(struct store *s)
{
	if (s)
		s->ops->close(s);
}

const char *store_state_name(enum run_state st)
{
	/* Cast: an enum may be unsigned, and a corrupt value must not index. */
	if ((int)st < 0 || (int)st >= RS_COUNT)
		return NULL;
	return state_names[st];
}

int store_state_parse(const char *name)
{
	if (!name)
		return -1;
	for (int i = 0; i < RS_COUNT; i++)
		if (!strcmp(name, state_names[i]))
			return i;
	return -1;
}

bool store_state_terminal(enum run_state st)
{
	return (int)st >= RS_SUCCEEDED && (int)st < RS_COUNT;
}

bool store_is_pg(const char *spec)
{
	return !strncmp(spec, "postgresql://", 13) || !strncmp(spec, "postgres://", 11);
}

struct store *store_open(const char *spec, char *err, size_t errlen)
{
	return store_is_pg(spec) ? store_pg_open(spec, err, errlen) : store_sqlite_open(spec, err, errlen);
}

bool store_blob_name_ok(const char *name)
{
	if (!strcmp(name, "output"))
		return true;
	/* names are text columns: PostgreSQL refuses bytes that are not UTF-8 */
	if (strncmp(name, "artifacts/", 10) || !utf8_valid(name, strlen(name)))
		return false;
	const char *p = name + 10;
	if (!*p)
		return false;
	for (;;) {
		size_t n = strcspn(p, "/");
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (!p[n])
			return true;
		p += n + 1;
	}
}

void store_outcome_cols(const struct run_outcome *o, const char **outcome, const char **term, char limits[12])
{
	*outcome = o ? result_outcome_name(o->state) : NULL;
	*term = o ? result_termination_name(o->term) : NULL;
	snprintf(limits, 12, "%u", o ? o->limits : 0);
}

void store_outcome_read(struct store_run *out, const char *outcome, const char *term, int64_t limits)
{
	int st = result_outcome_from_name(outcome);
	int t = result_termination_from_name(term);
	out->has_outcome = st >= 0 && t >= 0;
	out->outcome = (struct run_outcome){ 0 };
	if (out->has_outcome)
		out->outcome = (struct run_outcome){ .state = (enum outcome_state)st,
						     .term = (enum termination)t,
						     .limits = (unsigned)limits & ((1u << OUTCOME_LIMITS) - 1) };
}

void store_copy_text(char *dst, size_t cap, const char *src)
{
	const unsigned char *u = (const unsigned char *)src;
	size_t n = src ? strlen(src) : 0;
	if (n >= cap) {
		n = cap - 1;
		while (n > 0 && (u[n] & 0xc0) == 0x80)
			n--;
	}
	if (n)
		memcpy(dst, src, n);
	dst[n] = '\0';
}

bool store_run_pinned_to(const struct store_run *run, const char *node)
{
	json_t *rq = run->request ? json_loads(run->request, 0, NULL) : NULL;
	const char *pin = json_string_value(json_object_get(rq, "checkpoint_node"));
	bool pinned = pin && node && !strcmp(pin, node);
	json_decref(rq);
	return pinned;
}

int store_client_like(const char *client, char *out, size_t cap)
{
	if (!client) {
		snprintf(out, cap, "%%");
		return 0;
	}
	size_t n = strlen(client);
	if (!n || n >= STORE_CLIENT_NAME_MAX || strspn(client, "abcdefghijklmnopqrstuvwxyz0123456789_") != n)
		return -1;
	snprintf(out, cap, STORE_CLIENT_LIKE, client);
	return 0;
}

void store_runs_free(struct store_run *rows, unsigned n)
{
	for (unsigned i = 0; rows && i < n; i++)
		store_run_free(&rows[i]);
	free(rows);
}
