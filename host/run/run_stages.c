#include "run_stages.h"

#include <string.h>

#include "errmsg.h"

/* The spec's compile args into the compile stage's argv (n words), before
 * the first source file's word (where Judge0's "%s" puts compiler
 * options, so that they come after the template's own flags and win), or
 * at the end when no word is one: the new count, or -1. */
static int insert_args(char **argv, int n, const char *const *files, unsigned nfiles, char *const *args,
		       unsigned nargs, char *store, size_t storelen, size_t *used, char *err, size_t errlen)
{
	if (!nargs)
		return n;
	if ((unsigned)n + nargs > PROTO_MAX_ARGS)
		return errf(err, errlen, "more than %d words with the compile args", PROTO_MAX_ARGS);
	int at = n;
	for (int i = 1; nfiles && i < n && at == n; i++)
		if (!strcmp(argv[i], files[0]))
			at = i;
	memmove(argv + at + nargs, argv + at, (size_t)(n - at + 1) * sizeof(*argv));   /* and the NULL */
	for (unsigned i = 0; i < nargs; i++) {
		size_t len = strlen(args[i]) + 1;
		if (len > storelen - *used)
			return errf(err, errlen, "the compile command passes %zu bytes", storelen);
		memcpy(store + *used, args[i], len);
		argv[at + i] = store + *used;
		*used += len;
	}
	return n + (int)nargs;
}

/* Whether prog is the run program that a compile command (argv, n
 * words) writes: an absolute path that one of its words names. */
static bool names_program(char *const *argv, unsigned n, const char *prog)
{
	for (unsigned i = 1; prog[0] == '/' && i < n; i++)
		if (!strcmp(argv[i], prog))
			return true;
	return false;
}

bool run_stages_compiled(const struct runtime *rt, char *out, size_t cap)
{
	static const char *const files[] = { "main" };
	char *run[RUNTIME_ARGV_MAX + 1], *comp[RUNTIME_ARGV_MAX + 1], store[2][RUNTIME_STORE_MAX], why[200];
	if (!rt->compile[0])
		return false;
	int nr = runtime_expand(rt->run, files, 1, NULL, 0, run, RUNTIME_ARGV_MAX + 1, store[0], sizeof(store[0]), why,
				sizeof(why));
	int nc = runtime_expand(rt->compile, files, 1, NULL, 0, comp, RUNTIME_ARGV_MAX + 1, store[1], sizeof(store[1]),
				why, sizeof(why));
	if (nr < 1 || nc < 1 || !names_program(comp, (unsigned)nc, run[0]) || strlen(run[0]) >= cap)
		return false;
	memcpy(out, run[0], strlen(run[0]) + 1);
	return true;
}

/* The spec's own command for a stage (cmd, ncmd words), then args, into
 * argv as a template's expansion would be: the word count, or -1. */
static int own_command(char *const *cmd, unsigned ncmd, char *const *args, unsigned nargs, char **argv,
		       char *store, size_t storelen, char *err, size_t errlen)
{
	if (ncmd + nargs > PROTO_MAX_ARGS)
		return errf(err, errlen, "more than %d words with the args", PROTO_MAX_ARGS);
	size_t used = 0;
	for (unsigned i = 0; i < ncmd + nargs; i++) {
		const char *w = i < ncmd ? cmd[i] : args[i - ncmd];
		size_t len = strlen(w) + 1;
		if (len > storelen - used)
			return errf(err, errlen, "the command passes %zu bytes", storelen);
		argv[i] = memcpy(store + used, w, len);
		used += len;
	}
	argv[ncmd + nargs] = NULL;
	return (int)(ncmd + nargs);
}

/* Expand one template (or the spec's own command, cmd) into the next
 * stage of the request. */
static int add_stage(struct run_stages *out, size_t *used, uint32_t kind, const char *tmpl, char *const *cmd,
		     unsigned ncmd, const char *const *files, unsigned nfiles, const struct run_spec *spec,
		     const struct run_stage_limits *limits, char *err, size_t errlen)
{
	struct proto_request *p = out->proto;
	struct proto_stage *st = &p->stage[p->nstages];
	char *const *args = kind == PROTO_STAGE_RUN ? spec->argv : NULL;
	unsigned nargs = kind == PROTO_STAGE_RUN ? spec->argc : 0;
	int n = ncmd ? own_command(cmd, ncmd, args, nargs, st->argv, out->store + *used, out->storelen - *used, err,
				   errlen)
		     : runtime_expand(tmpl, files, nfiles, args, nargs, st->argv, PROTO_MAX_ARGS + 1,
				      out->store + *used, out->storelen - *used, err, errlen);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++)
		*used += strlen(st->argv[i]) + 1;
	if (kind == PROTO_STAGE_COMPILE &&
	    (n = insert_args(st->argv, n, files, nfiles, spec->compile_args, spec->ncompile_args, out->store,
			     out->storelen, used, err, errlen)) < 0)
		return -1;
	st->kind = kind;
	st->argc = (unsigned)n;
	st->cpu_ms = limits->cpu_time_ms;
	st->memory_kib = limits->memory_mib * 1024;
	out->stage_timeout_ms[p->nstages] = (int64_t)(limits->timeout_s * 1000.0);
	p->nstages++;
	return 0;
}

int run_stages_build(struct run_stages *out, const struct run_spec *spec, const struct run_effective *e,
		     const struct runtime *rt, const char *const *files, unsigned nfiles, struct run_result *r,
		     char *err, size_t errlen)
{
	struct proto_request *p = out->proto;
	size_t used = 0;
	p->nstages = 0;
	out->compiled = NULL;
	r->source = true;
	r->nstages = e->nstages;
	for (unsigned i = 0; i < e->nstages; i++) {
		r->stage[i].limits.timeout_s = e->stage[i].timeout_s;
		r->stage[i].limits.memory_mib = e->stage[i].memory_mib;
		r->stage[i].limits.cpu_time_ms = e->stage[i].cpu_time_ms;
	}
	bool compiles = e->nstages > 1;
	char why[256];
	if (compiles) {
		if (add_stage(out, &used, PROTO_STAGE_COMPILE, rt->compile, spec->compile_cmd, spec->ncompile_cmd, files,
			      nfiles, spec, &e->stage[0], why, sizeof(why)))
			return errf(err, errlen, "%s%s: %s", spec->ncompile_cmd ? "" : rt->name,
				    spec->ncompile_cmd ? "compile.command" : "'s compile template", why);
	} else if (spec->compile.timeout_s > 0 || spec->compile.memory_mib || spec->compile.cpu_time_ms ||
		   spec->ncompile_args) {
		return errf(err, errlen, "%s has no compile stage: its limits and args cannot be set",
			    spec->nrun_cmd ? "a run.command without compile.command" : rt->name);
	}
	if (add_stage(out, &used, PROTO_STAGE_RUN, rt->run, spec->run_cmd, spec->nrun_cmd, files, nfiles, spec,
		      &e->stage[e->nstages - 1], why, sizeof(why)))
		return errf(err, errlen, "%s%s: %s", spec->nrun_cmd ? "" : rt->name,
			    spec->nrun_cmd ? "run.command" : "'s run template", why);
	/* Only a runtime's templates say which program the compile writes: a
	 * spec's own commands would let a client name any path there and
	 * have it pass the allowlist as "compiled". */
	if (compiles && !spec->nrun_cmd &&
	    names_program(p->stage[0].argv, p->stage[0].argc, p->stage[p->nstages - 1].argv[0]))
		out->compiled = p->stage[p->nstages - 1].argv[0];
	for (unsigned i = 0; i < e->nstages; i++)
		if (e->stage[i].memory_mib > e->memory_mib)
			return errf(err, errlen, "the %s stage's memory limit of %llu MiB exceeds the VM's %llu MiB (--memory)",
				    i + 1 < e->nstages ? "compile" : "run", (unsigned long long)e->stage[i].memory_mib,
				    (unsigned long long)e->memory_mib);
	return 0;
}
