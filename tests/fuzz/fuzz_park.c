/* libFuzzer harness for a parked sandbox's table (host/sandbox/park.c's
 * sbx_park_load): the file a supervisor reads from a cluster's snapshot
 * dir, which every node writes, so a node that was taken over could write
 * anything there (its SHA-256 beside it with it). The input is the
 * table's JSON. What load accepts must hold what the supervisor relies
 * on: at most SBX_MAX_CMDS commands, each id below next_cmd and none
 * twice, each with a request that is an object (or none), running counted
 * right, every key naming an id below next_cmd with a SHA-256 hash,
 * inherited_below at most next_cmd; and written again (sbx_park_meta)
 * and loaded, it is the same table. Build and run: make fuzz-smoke
 * (short) or make fuzz (FUZZ_TIME seconds). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hex.h"
#include "supervisor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static struct sbx a, b;

static void fresh(struct sbx *s)
{
	memset(s, 0, sizeof(*s));
	s->wake_fd = -1;
	s->next_cmd = 1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	pthread_mutex_init(&s->wmu, NULL);
}

/* What load promises of s. */
static void holds(const struct sbx *s)
{
	unsigned running = 0;
	check(s->ncmd <= SBX_MAX_CMDS && s->next_cmd >= 1 && s->inherited_below <= s->next_cmd);
	for (unsigned i = 0; i < s->ncmd; i++) {
		const struct sbx_cmd *c = s->cmd[i];
		check(c->id >= 1 && c->id < s->next_cmd && c->out_fd == -1);
		check(!c->request || json_is_object(c->request));
		for (unsigned j = 0; j < i; j++)
			check(s->cmd[j]->id != c->id);
		running += !c->ended;
	}
	check(running == s->running);
	for (unsigned i = 0; i < s->nkeys; i++)
		check(s->keys[i].id >= 1 && s->keys[i].id < s->next_cmd && hex_is_sha256(s->keys[i].hash) &&
		      s->keys[i].key[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *in = json_loadb((const char *)data, size, 0, NULL);
	if (!in)
		return 0;
	char err[300];
	fresh(&a);
	if (sbx_park_load(&a, in, err, sizeof(err)) == 0) {
		holds(&a);
		/* the same table, written as a park writes it and loaded again */
		json_t *out = sbx_park_meta(&a);
		check(out != NULL);
		size_t i;
		json_t *c;
		json_array_foreach(json_object_get(out, "commands"), i, c)
			json_object_set(c, "sha256", json_object_get(json_array_get(json_object_get(in, "commands"), i), "sha256"));
		fresh(&b);
		check(sbx_park_load(&b, out, err, sizeof(err)) == 0);
		json_t *first = sbx_park_meta(&a), *again = sbx_park_meta(&b);
		check(json_equal(first, again));
		json_decref(first);
		json_decref(again);
		json_decref(out);
		sbx_release(&b);
	} else {
		check(err[0] != '\0');
	}
	json_decref(in);
	sbx_release(&a);
	return 0;
}
