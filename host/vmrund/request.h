/* A run as the API asks for it (POST /v1/runs, and /api/v2/execute after
 * host/vmrund/piston.c translated it): parsed from JSON with jansson,
 * checked once, and written back in one canonical JSON form. The store
 * keeps the canonical form, and the per-run worker (host/vmrund/worker.c)
 * parses it again with the same function, so a queued run that outlives a
 * restart of vmrund means exactly what was accepted.
 *
 * Native body (every field optional unless said):
 *   {"runtime": "python",               a runtime's name or alias
 *    "argv": ["python3", "-c", "..."],  argv mode: the command
 *    "files": [{"name": "main.c", "content": "...",
 *               "encoding": "utf8" | "base64" | "hex"}],
 *                                       argv mode: copied into /workspace;
 *                                       without argv (source mode, needs
 *                                       runtime): the program's sources
 *    "args": ["a", "b"],                source mode: the run stage's {args}
 *    "stdin": "...", "stdin_encoding": "utf8" | "base64" | "hex",
 *    "env": {"NAME": "VALUE"},          grants, checked by the policy
 *    "limits": {"timeout_s": 10, "memory_mib": 256, "cpus": 1,
 *               "disk_mib": 64, "max_output": 65536},
 *    "compile": {"timeout_s", "memory_mib", "cpu_time_ms"},   source mode
 *    "run":     {"timeout_s", "memory_mib", "cpu_time_ms"},   source mode
 *    "keep_artifacts": false,
 *    "network": {"allow": ["pypi.org", "*.pythonhosted.org:443"],
 *                "allow_addr": ["10.1.2.0/24:3128"]}}
 *                                       what the run's proxy may dial, as
 *                                       vmrun's --allow-net and
 *                                       --allow-net-addr (host/netpolicy.h);
 *                                       none: no network. Each rule within
 *                                       the tenant's ceiling (tenants.h)
 *                                       and the system policy's
 *
 * Nothing in a request is a host path. Unknown fields are refused, so a
 * typo never silently drops a limit. */
#ifndef VMRUND_REQUEST_H
#define VMRUND_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* What a run takes when its request does not say: the run library's
 * RUN_DEFAULT_MEMORY_MIB and vmrun's VMRUN_DEFAULT_DISK_MIB (asserted in
 * request.c), for admission by size. */
#define REQ_DEFAULT_MEMORY_MIB 256
#define REQ_DEFAULT_DISK_MIB   64

/* Caps on what one request may hold (the body's own cap is the server's). */
#define REQ_MAX_ARGS       256
#define REQ_MAX_ARG_LEN    4096
#define REQ_MAX_FILES      64          /* the run library's RUN_MAX_SOURCES */
#define REQ_MAX_FILE_NAME  255
#define REQ_MAX_FILE_BYTES (8u << 20)  /* one file, decoded */
#define REQ_MAX_TOTAL_BYTES (12u << 20) /* all files and stdin, decoded */
#define REQ_MAX_ENV        64
#define REQ_MAX_ENV_LEN    4096        /* NAME=VALUE */
#define REQ_MAX_DEPTH      8           /* JSON nesting */
#define REQ_NAME_MAX       64          /* a runtime's name or version selector */
#define REQ_MAX_NET_RULES  64          /* allow and allow_addr in all: the proxy's PROXY_RULES_MAX */

struct req_file {
	char name[REQ_MAX_FILE_NAME + 1];   /* one path component: no '/', not "." or "..", no NUL */
	unsigned char *data;                /* decoded bytes (malloc'd; NULL when empty) */
	size_t len;
};

/* A stage's limits; 0: the runtime's default. */
struct req_stage {
	double timeout_s;
	uint64_t memory_mib, cpu_time_ms;
};

struct req {
	char runtime[REQ_NAME_MAX];   /* "" for the default image */
	bool source;                  /* source mode: files and no argv */
	char **argv;                  /* argv mode: the command; source mode: the run's args */
	unsigned argc;
	struct req_file *files;
	unsigned nfiles;
	unsigned char *stdin_data;    /* NULL: none */
	size_t stdin_len;
	bool has_stdin;
	char **env;                   /* "NAME=VALUE" */
	unsigned nenv;
	double timeout_s;             /* 0: the run library's default */
	uint64_t memory_mib, cpus, disk_mib, max_output;
	struct req_stage compile, run;
	bool keep_artifacts;
	/* network.allow and network.allow_addr, each rule checked and kept in
	 * its normalized form (net_rule_format), so that the store, the
	 * tenant's check and the worker all read the same rule */
	char **allow_net, **allow_net_addr;
	unsigned nallow_net, nallow_net_addr;
};

/* Parse a native body into rq (zeroed first). Returns 0, or -1 with a
 * one-line reason for the client in err ("argv: must be an array of
 * strings"), and rq left empty (req_free is still safe). Checks what can
 * be checked without the policy or the runtimes: types, caps, names
 * (unique, not "artifacts", not starting with '-'), argv or source mode.
 * Pure. */
int req_parse(const json_t *body, struct req *rq, char *err, size_t errlen);

/* req_parse on text (len bytes, not NUL-terminated necessarily): malformed
 * JSON, a depth past REQ_MAX_DEPTH, or a top level that is not an object
 * is a reason in err too. */
int req_parse_text(const char *text, size_t len, struct req *rq, char *err, size_t errlen);

/* The canonical JSON of rq (files and stdin base64, every field that is
 * set): req_parse reads it back into the same req. NULL when out of
 * memory. The caller json_decref()s it. */
json_t *req_to_json(const struct req *rq);


struct runtime;

/* The installed runtime named name, by its name or one of its aliases,
 * among rts[n]; NULL when none is. Pure. */
const struct runtime *req_runtime(const struct runtime *rts, size_t n, const char *name);

/* What a run of rq takes of a node, as the run library will size it:
 * *memory_mib the VM's memory (limits.memory_mib; else in source mode the
 * largest stage limit, the request's or rt's, plus the run library's
 * slack, at least its default; else REQ_DEFAULT_MEMORY_MIB), *disk_mib
 * its workspace (limits.disk_mib, else REQ_DEFAULT_DISK_MIB). rt: the
 * runtime rq names (NULL: none). Pure. */
void req_size(const struct req *rq, const struct runtime *rt, uint64_t *memory_mib, uint64_t *disk_mib);

/* The sizes a stored request's canonical JSON text says (vmrund writes
 * req_size's into limits at submission, so that a run gets what it was
 * admitted with): limits.memory_mib and limits.disk_mib, each its default
 * above when absent (a run queued by an older vmrund). 0, or -1 when text
 * is not a JSON object. */
int req_size_json(const char *text, uint64_t *memory_mib, uint64_t *disk_mib);

/* Free what rq holds and zero it; safe on a zeroed or failed one, twice. */
void req_free(struct req *rq);

/* Decode s (n bytes) in encoding "utf8" (as is), "base64" or "hex" into a
 * malloc'd buffer (*out NULL when empty). Returns 0, or -1 with a reason
 * (a bad encoding name or bad data, over max bytes). Pure. */
int req_decode(const char *s, size_t n, const char *encoding, size_t max, unsigned char **out, size_t *outlen,
	       char *err, size_t errlen);

#endif
