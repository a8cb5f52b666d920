/* How a run ended, and its JSON form (DESIGN.md, "The result object"). */
#ifndef VMRUN_RESULT_H
#define VMRUN_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "artifacts.h"
#include "proto.h"
#include "proxy_wire.h"

enum termination {
	TERM_EXITED,
	TERM_SIGNALED,
	TERM_TIMEOUT,
	TERM_DENIED,
	TERM_NOT_FOUND,
	TERM_VM_FAILED,
	TERM_ERROR,
	TERM_COMPILE_ERROR,   /* the run as a whole: its compile stage failed */
};
/* How many terminations there are: the size of a table indexed by one. */
#define TERM_COUNT (TERM_COMPILE_ERROR + 1)

/* One output stream of the command, on the host. vmrun caps each stream
 * at limit bytes itself, streamed or collected for --json, whatever the
 * agent does with the max_output it was sent: past the limit, bytes are
 * dropped and truncated is set. data holds what --json keeps. */
struct outbuf {
	uint8_t *data;
	size_t len, cap, limit;
	uint64_t passed;          /* bytes let through so far */
	bool truncated;           /* the host dropped some */
};

/* One stage of a run: source mode's compile stage, or the run stage (the
 * command; the only stage outside source mode). */
struct run_stage {
	bool started;             /* the agent was asked to start it */
	enum termination term;    /* how this stage ended (never COMPILE_ERROR) */
	int exit_code;            /* when EXITED */
	int signal;               /* when SIGNALED */
	struct outbuf out, err;
	bool out_truncated, err_truncated;   /* the agent's flags; the JSON's also count out/err.truncated */
	bool oom_killed;          /* its memory limit was hit */
	bool cpu_exceeded;        /* its CPU time limit was hit */
	int64_t wall_ms;          /* from its start to its EXIT (or the run's end) */
	uint64_t cpu_ms, max_rss_kib;
	struct {
		double timeout_s;     /* 0: only the run's own */
		uint64_t memory_mib;  /* 0: only the VM's */
		uint64_t cpu_time_ms; /* 0: none */
	} limits;
};

struct run_result {
	char run_id[33];
	enum termination term;    /* how the run ended: the final stage's, or COMPILE_ERROR */
	bool source;              /* source mode: stages from a runtime's templates */
	unsigned nstages;         /* 1, or 2 with a compile stage; the run stage is last */
	struct run_stage stage[PROTO_MAX_STAGES];
	char runtime[64], runtime_version[64];   /* "" without --runtime */
	/* durations in ms */
	int64_t prepare, boot, run, teardown, extract, total;
	struct artifacts_result artifacts;
	struct {
		double timeout_s;
		uint64_t memory_mib, cpus, disk_mib, max_output, nproc, nofile, fsize;
	} limits;
	bool cancelled;           /* stopped by its caller (Ctrl-C, a cancel) */
	bool restored;            /* vmm started from a snapshot, not a cold boot ("boot") */
	/* A repeated run's (run_spec's repeat), said in "repeat" when more
	 * than one was asked: runs made and asked. */
	struct {
		unsigned made, asked;
		uint64_t max_cpu_ms;  /* the final stage's highest CPU time of the runs made */
	} repeat;
	/* The jail's layers in force for vmm, once it was built (DESIGN's
	 * "jail" object): namespaces are always mount, PID, network, IPC and
	 * UTS, plus user when rootless; seccomp and no_new_privs always. */
	struct {
		bool built;
		bool rootless;        /* a user namespace mapping our ids, not root's */
		bool own_uid;         /* a uid reserved for this run alone (root only) */
		int cgroup_version;   /* 2, 1, or 0: no cgroup limits (accepted rootless) */
		bool cgroup_delegated;
	} jail;
	/* A run allowed network (DESIGN's "network" array): each decision
	 * of its proxy, in order, as the proxy reported them. */
	struct {
		bool on;
		struct proxy_audit *entry;
		unsigned n;
		unsigned unrecorded;  /* decisions past PROXY_AUDIT_MAX */
	} network;
	char message[512];
};

/* A repeated run's sums (run_spec's repeat): each run made is added as it
 * ends, and the last one's result reports their means, as Judge0 does
 * for number_of_runs. */
struct run_repeat {
	unsigned made, asked;
	uint64_t cpu_ms, max_rss_kib;
	uint64_t max_cpu_ms;          /* one run's highest: a limit is judged on it, not on the mean */
};

/* Count r into rep, one more run made: its final stage's CPU time and
 * memory. Pure. */
void result_repeat_add(struct run_repeat *rep, const struct run_result *r);

/* Whether to make another run after r: fewer made than asked, and r
 * succeeded (the command exited 0; not cancelled). Pure. */
bool result_repeat_more(const struct run_repeat *rep, const struct run_result *r);

/* Give r, the last run made, rep's means (rounded down) as its final
 * stage's cpu_ms and max_rss_kib, and rep's counts and highest CPU time
 * as its "repeat" {made, asked, max_cpu_ms}. Pure. */
void result_repeat_apply(struct run_result *r, const struct run_repeat *rep);

/* Set r's message, replacing what it said. */
void result_message(struct run_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Append to r's message, after "; " when it already says something. */
void result_add_message(struct run_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Count n new bytes of b's stream against its limit: returns how many of
 * them (the first ones) may pass; the rest are dropped and b->truncated
 * set. For a streamed run, which writes what passes itself. */
size_t outbuf_take(struct outbuf *b, size_t n);

/* Collect n new bytes for --json: what outbuf_take lets pass is stored (a
 * failed allocation drops it too, and sets truncated). Returns false when
 * something was dropped. */
bool outbuf_append(struct outbuf *b, const uint8_t *p, size_t n);

/* Free the stages' output buffers, the artifact lists and the network
 * decisions. */
void result_free(struct run_result *r);

/* The stage that ended the run: the last one started (the run stage when
 * none was). Its exit code, signal and output are the result's own. */
const struct run_stage *result_final(const struct run_result *r);
struct run_stage *result_final_mut(struct run_result *r);

/* vmrun's exit status for r: the command's own, 128+N, 124, 126, 127, 125;
 * on a compile error the compiler's own (or 128+N). */
int result_exit_status(const struct run_result *r);

/* The termination's name as DESIGN spells it. */
const char *result_termination_name(enum termination t);

/* The termination whose name is name (a result read back), or -1. Pure. */
int result_termination_from_name(const char *name);

/* How a run ended, decided once, by result_outcome, from the facts in
 * its result, and written into the result's JSON ("outcome"): vmrund's
 * state, its metrics and audit log only read it back
 * (result_outcome_parse), and decide nothing again. */
enum outcome_state {
	OUTCOME_SUCCEEDED,   /* the command (the run stage) exited 0 */
	OUTCOME_FAILED,      /* anything else that ran out of no limit of time */
	OUTCOME_TIMED_OUT,   /* the run's deadline, or a stage's own timeout */
};
#define OUTCOME_STATE_COUNT (OUTCOME_TIMED_OUT + 1)

/* The limits a run hit, as bits of run_outcome's limits. */
enum outcome_limit {
	LIMIT_TIMEOUT = 1u << 0,    /* wall clock: the run's or a stage's */
	LIMIT_MEMORY = 1u << 1,     /* a stage's memory limit (the OOM killer) */
	LIMIT_CPU_TIME = 1u << 2,   /* a stage's CPU time limit */
	LIMIT_OUTPUT = 1u << 3,     /* an output stream was cut */
};
#define OUTCOME_LIMITS 4

struct run_outcome {
	enum outcome_state state;
	enum termination term;      /* the run's, as its result says */
	unsigned limits;            /* LIMIT_* bits */
};

/* r's outcome: timed out when the run or any stage that started ran out
 * of time; succeeded when it exited 0 (in source mode: the run stage,
 * after its compile stage); else failed. Pure. */
void result_outcome(const struct run_result *r, struct run_outcome *o);

/* The names the JSON uses: "succeeded", "failed", "timed_out"; and for
 * one LIMIT_* bit "timeout", "memory", "cpu_time", "output" (NULL for a
 * value that is none of them). */
const char *result_outcome_name(enum outcome_state s);
const char *result_limit_name(unsigned bit);

/* The outcome state named name ("succeeded", ...), or -1 for none. */
int result_outcome_from_name(const char *name);

struct json_t;

/* The outcome a result's JSON (result_print_json's, parsed) says: 0, or
 * -1 with *o a failure with no limit hit when result is not an object
 * with a well-formed "outcome" and "termination" (no result, a garbled
 * one, one of a worker from before outcomes). Pure. */
int result_outcome_parse(const struct json_t *result, struct run_outcome *o);

/* Print r as one JSON object (valid UTF-8: invalid bytes in the output
 * become U+FFFD) and a newline: the final stage's fields at the top, and
 * in source mode a "compile" object (null without a compile stage) and a
 * "run" object (null when it never started). */
void result_print_json(FILE *f, const struct run_result *r);

/* Print s as a JSON string, as result_print_json writes strings: valid
 * UTF-8 kept, other bytes U+FFFD, control characters escaped. */
void result_json_cstr(FILE *f, const char *s);

#endif
