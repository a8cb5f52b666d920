/* A run's spec: everything a client may ask of a run, the one set of
 * defaults, and the one canonical form (JSON) that the store and the
 * spool keep. Every front end only maps its input onto it: vmrun's
 * options (host/cli/cli.c), POST /v1/runs (this module's JSON reader), and
 * Piston's /api/v2/execute (host/vmrund/piston.c, onto the native body).
 * The per-run worker reads the stored form back with the same function,
 * so a queued run that outlives a restart of vmrund means exactly what
 * was accepted. Network rules are parsed once, here, and travel parsed.
 *
 * Native body (every field optional unless said):
 *   {"runtime": "python",               a runtime's name or alias
 *    "argv": ["python3", "-c", "..."],  argv mode: the command
 *    "files": [{"name": "main.c", "content": "...",
 *               "encoding": "utf8" | "base64" | "hex",
 *               "executable": false}],      mode 0755 when true, else 0644
 *                                       argv mode: copied into /workspace;
 *                                       without argv (source mode, needs
 *                                       runtime): the program's sources
 *    "workspace_files": [{"name": "data/in.txt", "content": "...",
 *                         "encoding": ...}],
 *                                       either mode: put into /workspace as
 *                                       they are, at their paths (a
 *                                       relative path, directories made);
 *                                       never named in a runtime's commands
 *                                       (Judge0's additional_files)
 *    "args": ["a", "b"],                source mode: the run stage's {args}
 *    "stdin": "...", "stdin_encoding": "utf8" | "base64" | "hex",
 *    "env": {"NAME": "VALUE"},          grants, checked by the policy
 *    "limits": {"timeout_s": 10, "memory_mib": 256, "cpus": 1,
 *               "disk_mib": 64, "max_output": 65536},
 *    "compile": {"timeout_s", "memory_mib", "cpu_time_ms",
 *                "args": ["-O3"]},      source mode; args go into the
 *                                       compile command before the sources
 *                                       (Judge0's compiler_options)
 *    "run":     {"timeout_s", "memory_mib", "cpu_time_ms"},   source mode
 *    "run":     {"command": ["bash", "run"]},
 *    "compile": {"command": ["bash", "compile"]},
 *                                       source mode: the stages' commands
 *                                       instead of the runtime's templates
 *                                       (run.command replaces both; no
 *                                       compile.command, no compile stage;
 *                                       args follow run.command; files may
 *                                       then be empty). The runtime is the
 *                                       image. Judge0's "Multi-file program"
 *    "keep_artifacts": false,
 *    "repeat": 1,                       the run made this many times, each
 *                                       in a fresh VM from the same inputs,
 *                                       until one does not succeed; the
 *                                       result is the last one's, its CPU
 *                                       time and memory the means of those
 *                                       made (Judge0's number_of_runs); not
 *                                       with keep_artifacts
 *    "client": {...},                    what the API that accepted the run
 *                                       keeps with it for its own answers
 *                                       (Judge0's language id and expected
 *                                       output): any object, stored with
 *                                       the request, never seen by the run
 *    "network": {"allow": ["pypi.org", "*.pythonhosted.org:443"],
 *                "allow_addr": ["10.1.2.0/24:3128"]}}
 *                                       what the run's proxy may dial, as
 *                                       vmrun's --allow-net and
 *                                       --allow-net-addr (host/run/netpolicy.h);
 *                                       none: no network. Each rule within
 *                                       the tenant's ceiling (tenants.h)
 *                                       and the system policy's
 *
 * Nothing in a request is a host path. Unknown fields are refused, so a
 * typo never silently drops a limit. */
#ifndef VMRUN_RUN_SPEC_H
#define VMRUN_RUN_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "netpolicy.h"

/* What a run gets where its spec does not say: the only place defaults
 * live (the CLI, the APIs, admission and the run library all read these). */
#define RUN_SPEC_DEFAULT_TIMEOUT_S    10          /* argv mode, boot included */
#define RUN_SPEC_DEFAULT_MEMORY_MIB   256
#define RUN_SPEC_DEFAULT_CPUS         1
#define RUN_SPEC_DEFAULT_DISK_MIB     64
#define RUN_SPEC_DEFAULT_MAX_OUTPUT   (1024 * 1024)  /* bytes of each stream */
#define RUN_SPEC_DEFAULT_COMPILE_TIMEOUT_S 30     /* when the runtime's manifest names none */
#define RUN_SPEC_DEFAULT_RUN_TIMEOUT_S 10
#define RUN_SPEC_BOOT_ALLOWANCE_S     10          /* source mode: the run's limit is this plus the stages' */
#define RUN_SPEC_STAGE_MEMORY_SLACK_MIB 64        /* source mode: VM memory over the largest stage's limit */

/* Caps on what one spec may hold (the body's own cap is the server's). */
#define RUN_SPEC_MAX_ARGS       256
#define RUN_SPEC_MAX_ARG_LEN    4096
#define RUN_SPEC_MAX_FILES      64          /* source files, or files copied into /workspace */
#define RUN_SPEC_MAX_FILE_NAME  255         /* a name in files; a whole path in workspace_files */
#define RUN_SPEC_MAX_WORKSPACE_FILES 256    /* workspace_files */
#define RUN_SPEC_MAX_PATH_DEPTH 8           /* directories above a workspace file, plus one */
#define RUN_SPEC_MAX_FILE_BYTES (8u << 20)  /* one file, decoded */
#define RUN_SPEC_MAX_TOTAL_BYTES (12u << 20) /* all files and stdin, decoded */
#define RUN_SPEC_MAX_ENV        64
#define RUN_SPEC_MAX_ENV_LEN    4096        /* NAME=VALUE */
#define RUN_SPEC_MAX_DEPTH      8           /* JSON nesting */
#define RUN_SPEC_NAME_MAX       64          /* a runtime's name or version selector */
#define RUN_SPEC_CHECKPOINT_MAX 100         /* "SANDBOX_ID/NAME": 32 hex, '/', 64 */
#define RUN_SPEC_NODE_MAX       64          /* a node's name, as the store keeps it */
#define RUN_SPEC_MAX_CLIENT_BYTES (4u << 20) /* "client", as compact JSON */
#define RUN_SPEC_MAX_COMPILE_ARGS 64
#define RUN_SPEC_MAX_REPEAT     20          /* Judge0's max_number_of_runs */
#define RUN_SPEC_MAX_NET_RULES  64          /* allow and allow_addr in all: the proxy's PROXY_RULES_MAX */

struct run_spec_file {
	/* files: one path component (no '/', not "." or ".."); workspace_files:
	 * components of that kind joined by '/' (run_spec_path_check) */
	char name[RUN_SPEC_MAX_FILE_NAME + 1];
	unsigned char *data;                /* decoded bytes (malloc'd; NULL when empty) */
	size_t len;
	bool executable;                    /* "executable": true: mode 0755, else 0644 */
};

/* A source-mode stage's limits; 0 for each: the runtime's default. */
struct run_stage_limits {
	double timeout_s;
	uint64_t memory_mib, cpu_time_ms;
};

struct run_spec {
	char runtime[RUN_SPEC_NAME_MAX];   /* a runtime's name or alias; "" for the default image */
	bool source;                  /* source mode: the runtime's templates (or run.command) make the stages */
	char **argv;                  /* argv mode: the command; source mode: the run's args */
	unsigned argc;
	struct run_spec_file *files;  /* source mode: the sources; argv mode: copied into /workspace */
	unsigned nfiles;
	struct run_spec_file *wfiles; /* workspace_files: into /workspace at their paths, in either mode */
	unsigned nwfiles;
	unsigned char *stdin_data;    /* NULL: none */
	size_t stdin_len;
	bool has_stdin;
	char **env;                   /* "NAME=VALUE" */
	unsigned nenv;
	/* 0: the default (RUN_SPEC_DEFAULT_*; in source mode the timeout and
	 * memory derive from the stages: run_spec_effective) */
	double timeout_s;
	uint64_t memory_mib, cpus, disk_mib, max_output;
	struct run_stage_limits compile, run;
	char **compile_args;          /* source mode: words for the compile command, before the sources */
	unsigned ncompile_args;
	/* Source mode: the stages' commands instead of the runtime's templates
	 * (run.command, compile.command). nrun_cmd 0: the templates. */
	char **compile_cmd, **run_cmd;
	unsigned ncompile_cmd, nrun_cmd;
	bool keep_artifacts;
	unsigned repeat;              /* runs made at most; 0 or 1: one */
	/* With repeat: the stdout each run must give (lines_match, Judge0's
	 * comparison) for another to be made, as Judge0 stops at the first
	 * run that is not accepted; without it, a run that exits 0 is enough. */
	unsigned char *repeat_expect;
	size_t repeat_expect_len;
	bool has_repeat_expect;
	/* What the run's proxy may dial, parsed and normalized once: host and
	 * suffix rules (network.allow, --allow-net) and address rules
	 * (network.allow_addr, --allow-net-addr), in the order given. */
	struct net_rule *net;
	unsigned nnet;
	/* A verification run: its workspace is a checkpoint's (a sandbox's,
	 * "SANDBOX_ID/NAME"; no files), checked against expect_digest (64 hex
	 * digits, or "") when given; checkpoint_node names the node that
	 * holds it, the only one that may start the run (vmrund sets it). */
	char from_checkpoint[RUN_SPEC_CHECKPOINT_MAX];
	char expect_digest[65];
	char checkpoint_node[RUN_SPEC_NODE_MAX];
	json_t *client;               /* "client" (a reference held), or NULL */
};

/* Parse a native body into rq (zeroed first). Returns 0, or -1 with a
 * one-line reason for the client in err ("argv: must be an array of
 * strings"), and rq left empty (run_spec_free is still safe). Checks what
 * can be checked without the policy or the runtimes: types, caps, names
 * (unique, not "artifacts", not starting with '-'), argv or source mode,
 * each network rule. Pure. */
int run_spec_from_json(const json_t *body, struct run_spec *rq, char *err, size_t errlen);

/* run_spec_from_json on text (len bytes, not NUL-terminated necessarily):
 * malformed JSON, a depth past RUN_SPEC_MAX_DEPTH, or a top level that is
 * not an object is a reason in err too. */
int run_spec_from_text(const char *text, size_t len, struct run_spec *rq, char *err, size_t errlen);

/* A sandbox's body (POST /v1/sandboxes, less what vmrund keeps itself):
 * only runtime, env, limits (no timeout_s: a sandbox's life is its own)
 * and network, as a run's; no command, and no files (its files API puts
 * them in). The same rules and results as run_spec_from_json. */
int run_spec_sandbox_from_json(const json_t *body, struct run_spec *rq, char *err, size_t errlen);
int run_spec_sandbox_from_text(const char *text, size_t len, struct run_spec *rq, char *err, size_t errlen);

/* The canonical JSON of rq (files and stdin base64, rules formatted, every
 * field that is set): run_spec_from_json reads it back into the same
 * spec. NULL when out of memory. The caller json_decref()s it. */
json_t *run_spec_to_json(const struct run_spec *rq);

/* Append rule r to rq's network rules: 0, or -1 when RUN_SPEC_MAX_NET_RULES
 * are there already or out of memory (errno ENOSPC or ENOMEM). */
int run_spec_add_rule(struct run_spec *rq, const struct net_rule *r);

/* Append a copy of s to rq's argv (or source mode's args), or to its env
 * grants ("NAME=VALUE", checked by the caller): 0, or -1 when out of
 * memory. How a front end that is not JSON builds a spec. */
int run_spec_add_arg(struct run_spec *rq, const char *s);
int run_spec_add_compile_arg(struct run_spec *rq, const char *s);   /* source mode's compile.args */
int run_spec_add_env(struct run_spec *rq, const char *s);
int run_spec_add_run_cmd(struct run_spec *rq, const char *s);       /* run.command's next word */
int run_spec_add_compile_cmd(struct run_spec *rq, const char *s);   /* compile.command's next word */

struct runtime;

/* What a run of rq gets, every default applied: rt is the runtime rq
 * names (NULL: none, or not known). In source mode with rt, the stages'
 * limits (the spec's, else rt's, else the defaults; the compile stage
 * first when rt compiles, or with run.command when compile.command is
 * given), and the run's timeout (the spec's, else the
 * boot allowance plus the stages') and memory (the spec's, else the
 * largest stage's plus the slack, at least the default). Pure. */
struct run_effective {
	double timeout_s;
	uint64_t memory_mib, cpus, disk_mib, max_output;
	unsigned nstages;                       /* source mode with rt: 1 or 2; else 0 */
	struct run_stage_limits stage[2];       /* compile (when there is one), then run */
};
void run_spec_effective(const struct run_spec *rq, const struct runtime *rt, struct run_effective *e);

/* What the front ends call each limit, for a reason a client can act on. */
enum run_spec_words {
	RUN_SPEC_WORDS_CLI,   /* "--memory 8192" */
	RUN_SPEC_WORDS_API,   /* "limits.memory_mib: 8192" */
};

/* Rule i of rq as the API's body names it ("network.allow[1]",
 * "network.allow_addr[0]": its index in its own list), into buf. */
void run_spec_rule_field(const struct run_spec *rq, unsigned i, char *buf, size_t cap);

struct policy;

/* e's limits and rq's network rules against the policy's ceilings: 0, or
 * -1 with the first that exceeds one, named in words, in err. Pure. */
int run_spec_check(const struct run_spec *rq, const struct run_effective *e, const struct policy *pol,
		   enum run_spec_words words, char *err, size_t errlen);

/* The sizes a stored request's canonical JSON text says (vmrund writes
 * run_spec_effective's into limits at submission, so that a run gets what
 * it was admitted with): limits.memory_mib and limits.disk_mib, each its
 * default when absent (a run queued by an older vmrund). 0, or -1 when
 * text is not a JSON object. */
int run_spec_size_json(const char *text, uint64_t *memory_mib, uint64_t *disk_mib);

/* Free what rq holds and zero it; safe on a zeroed or failed one, twice. */
void run_spec_free(struct run_spec *rq);

/* Decode s (n bytes) in encoding "utf8" (as is), "base64" or "hex" into a
 * malloc'd buffer (*out NULL when empty). Returns 0, or -1 with a reason
 * (a bad encoding name or bad data, over max bytes). Pure. */
int run_spec_decode(const char *s, size_t n, const char *encoding, size_t max, unsigned char **out, size_t *outlen,
		    char *err, size_t errlen);

/* Whether path may name a workspace file: 1 to RUN_SPEC_MAX_PATH_DEPTH
 * components joined by single '/'s, none empty, "." or "..", none with a
 * control character; not absolute; the first not "artifacts" (where the
 * run's artifacts go) or "lost+found" (the file system's own); at most
 * RUN_SPEC_MAX_FILE_NAME bytes. 0, or -1 with
 * the reason ("a component is \"..\"") in why. Pure. */
int run_spec_path_check(const char *path, char *why, size_t cap);

/* Whether dir is a directory above path ("a" above "a/b", not above
 * "ab/c" or "a"): how a file and a directory would take one place. Pure. */
bool run_spec_path_above(const char *dir, const char *path);

/* Whether e names an encoding run_spec_decode knows. */
bool run_spec_encoding_known(const char *e);

#endif
