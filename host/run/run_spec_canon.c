/* A run spec's canonical JSON (run_spec.h), which the store and the
 * spool keep and run_spec_from_json reads back into the same spec; and
 * the sizes admission wrote into it. */
#include "run_spec.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
/* Set key to v (stolen); false when v is NULL (out of memory) or not set. */
static bool put(json_t *o, const char *key, json_t *v)
{
	return v && json_object_set_new(o, key, v) == 0;
}

static json_t *strings_json(char *const *v, unsigned n)
{
	json_t *a = json_array();
	for (unsigned i = 0; a && i < n; i++)
		if (json_array_append_new(a, json_string(v[i]))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *b64_json(const unsigned char *p, size_t n)
{
	size_t len;
	char *s = base64_encode(p, n, 0, &len);
	json_t *j = s ? json_stringn_nocheck(s, len) : NULL;
	free(s);
	return j;
}

static json_t *files_json(const struct run_spec_file *files, unsigned n)
{
	json_t *a = json_array();
	for (unsigned i = 0; a && i < n; i++) {
		json_t *f = json_object();
		bool ok = f && put(f, "name", json_string(files[i].name)) &&
			  put(f, "content", b64_json(files[i].data, files[i].len)) &&
			  (!files[i].executable || put(f, "executable", json_true())) &&
			  put(f, "encoding", json_string("base64"));
		if (!ok || json_array_append_new(a, f)) {
			if (!ok)
				json_decref(f);
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *env_json(const struct run_spec *rq)
{
	json_t *o = json_object();
	for (unsigned i = 0; o && i < rq->nenv; i++) {
		const char *eq = strchr(rq->env[i], '=');
		char name[RUN_SPEC_MAX_ENV_LEN + 1];
		size_t n = eq ? (size_t)(eq - rq->env[i]) : 0;
		memcpy(name, rq->env[i], n);
		name[n] = '\0';
		if (!eq || !put(o, name, json_string(eq + 1))) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* Set key to a whole number unless it is 0 (the default). */
static bool put_whole(json_t *o, const char *key, uint64_t v)
{
	return !v || put(o, key, json_integer((json_int_t)v));
}

static bool put_seconds(json_t *o, const char *key, double v)
{
	return v == 0 || put(o, key, json_real(v));
}

static json_t *limits_json(const struct run_spec *rq)
{
	json_t *o = json_object();
	if (o && put_seconds(o, "timeout_s", rq->timeout_s) && put_whole(o, "memory_mib", rq->memory_mib) &&
	    put_whole(o, "cpus", rq->cpus) && put_whole(o, "disk_mib", rq->disk_mib) &&
	    put_whole(o, "max_output", rq->max_output))
		return o;
	json_decref(o);
	return NULL;
}

/* A stage's object; args (the compile stage's) and its command when
 * there are any. */
static json_t *stage_json(const struct run_stage_limits *st, char *const *args, unsigned nargs, char *const *cmd,
			  unsigned ncmd)
{
	json_t *o = json_object();
	if (o && put_seconds(o, "timeout_s", st->timeout_s) && put_whole(o, "memory_mib", st->memory_mib) &&
	    put_whole(o, "cpu_time_ms", st->cpu_time_ms) && (!nargs || put(o, "args", strings_json(args, nargs))) &&
	    (!ncmd || put(o, "command", strings_json(cmd, ncmd))))
		return o;
	json_decref(o);
	return NULL;
}

static bool stage_set(const struct run_stage_limits *st)
{
	return st->timeout_s != 0 || st->memory_mib || st->cpu_time_ms;
}

/* The rules of one list (addr: allow_addr) as the user would write them. */
static json_t *rules_json(const struct run_spec *rq, bool addr)
{
	json_t *a = json_array();
	for (unsigned i = 0; a && i < rq->nnet; i++) {
		if ((rq->net[i].kind == NET_RULE_ADDR) != addr)
			continue;
		char text[NET_HOST_MAX + 64];
		net_rule_format(&rq->net[i], text, sizeof(text));
		if (json_array_append_new(a, json_string(text))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* "network", with each list that has a rule. */
static json_t *network_json(const struct run_spec *rq)
{
	json_t *o = json_object(), *allow = rules_json(rq, false), *addr = rules_json(rq, true);
	bool ok = o && allow && addr && (!json_array_size(allow) || put(o, "allow", json_incref(allow))) &&
		  (!json_array_size(addr) || put(o, "allow_addr", json_incref(addr)));
	json_decref(allow);
	json_decref(addr);
	if (ok)
		return o;
	json_decref(o);
	return NULL;
}

/* Each part that is set, so that run_spec_from_json reads the same req back. */
static bool fill_json(json_t *o, const struct run_spec *rq)
{
	if (rq->runtime[0] && !put(o, "runtime", json_string(rq->runtime)))
		return false;
	if (!rq->source && !put(o, "argv", strings_json(rq->argv, rq->argc)))
		return false;
	if (rq->source && rq->argc && !put(o, "args", strings_json(rq->argv, rq->argc)))
		return false;
	if ((rq->source || rq->nfiles) && !put(o, "files", files_json(rq->files, rq->nfiles)))
		return false;
	if (rq->nwfiles && !put(o, "workspace_files", files_json(rq->wfiles, rq->nwfiles)))
		return false;
	if (rq->has_stdin && !(put(o, "stdin", b64_json(rq->stdin_data, rq->stdin_len)) &&
			       put(o, "stdin_encoding", json_string("base64"))))
		return false;
	if (rq->nenv && !put(o, "env", env_json(rq)))
		return false;
	if ((rq->timeout_s != 0 || rq->memory_mib || rq->cpus || rq->disk_mib || rq->max_output) &&
	    !put(o, "limits", limits_json(rq)))
		return false;
	if (rq->source && (stage_set(&rq->compile) || rq->ncompile_args || rq->ncompile_cmd) &&
	    !put(o, "compile", stage_json(&rq->compile, rq->compile_args, rq->ncompile_args, rq->compile_cmd,
					  rq->ncompile_cmd)))
		return false;
	if (rq->source && (stage_set(&rq->run) || rq->nrun_cmd) &&
	    !put(o, "run", stage_json(&rq->run, NULL, 0, rq->run_cmd, rq->nrun_cmd)))
		return false;
	if (rq->repeat > 1 && !put(o, "repeat", json_integer(rq->repeat)))
		return false;
	if (rq->has_repeat_expect && !(put(o, "repeat_expect", b64_json(rq->repeat_expect, rq->repeat_expect_len)) &&
				       put(o, "repeat_expect_encoding", json_string("base64"))))
		return false;
	if (rq->nnet && !put(o, "network", network_json(rq)))
		return false;
	if (rq->from_checkpoint[0] && !put(o, "from_checkpoint", json_string(rq->from_checkpoint)))
		return false;
	if (rq->expect_digest[0] && !put(o, "expect_digest", json_string(rq->expect_digest)))
		return false;
	if (rq->checkpoint_node[0] && !put(o, "checkpoint_node", json_string(rq->checkpoint_node)))
		return false;
	if (rq->client && json_object_set(o, "client", rq->client))
		return false;
	return !rq->keep_artifacts || put(o, "keep_artifacts", json_true());
}

json_t *run_spec_to_json(const struct run_spec *rq)
{
	json_t *o = json_object();
	if (o && !fill_json(o, rq)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- the sizes admission stored ------------------------------------------ */

int run_spec_size_json(const char *text, uint64_t *memory_mib, uint64_t *disk_mib)
{
	json_t *o = json_loads(text, 0, NULL);
	*memory_mib = RUN_SPEC_DEFAULT_MEMORY_MIB;
	*disk_mib = RUN_SPEC_DEFAULT_DISK_MIB;
	if (!json_is_object(o)) {
		json_decref(o);
		return -1;
	}
	json_t *limits = json_object_get(o, "limits");
	json_int_t m = json_integer_value(json_object_get(limits, "memory_mib"));
	json_int_t d = json_integer_value(json_object_get(limits, "disk_mib"));
	if (m > 0)
		*memory_mib = (uint64_t)m;
	if (d > 0)
		*disk_mib = (uint64_t)d;
	json_decref(o);
	return 0;
}
