/* Judge0 CE 1.13.1 compatibility (https://github.com/judge0/judge0 at tag
 * v1.13.1: app/controllers/submissions_controller.rb, app/models/
 * submission.rb, app/jobs/isolate_job.rb, app/helpers/config.rb): a
 * submission translated to the run spec's native form, and a stored run
 * shown back as Judge0's submission, with its status chosen as Judge0
 * chooses it. Pure: no I/O, no globals; api_judge0.c does the HTTP.
 *
 * What Judge0 keeps with a submission that a run does not need (the
 * language id, the expected output, the limits as given) travels in the
 * run spec's "client" object, under "judge0", so that any node shows the
 * submission from the stored run alone. */
#ifndef VMRUND_JUDGE0_H
#define VMRUND_JUDGE0_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "netpolicy.h"
#include "run_spec.h"
#include "runtime.h"
#include "tenants.h"

#define JUDGE0_VERSION "1.13.1"
#define JUDGE0_TOKEN_LEN 36           /* a UUID's text: 8-4-4-4-12 hex */
#define JUDGE0_PREFIX_MAX 64

/* Judge0's configuration variables that a submission's defaults and
 * checks read (Judge0's own defaults from config_defaults; the vmrund
 * config's judge0_* keys set them). Units as Judge0's: seconds, KB. */
struct judge0_config {
	double cpu_time_limit, max_cpu_time_limit;
	double cpu_extra_time, max_cpu_extra_time;
	double wall_time_limit, max_wall_time_limit;
	long memory_limit, max_memory_limit;
	long stack_limit, max_stack_limit;
	long max_processes_and_or_threads, max_max_processes_and_or_threads;
	long max_file_size, max_max_file_size;
	long number_of_runs, max_number_of_runs;
	long max_submission_batch_size;
	bool redirect_stderr_to_stdout;
	bool enable_wait_result;
	bool enable_batched_submissions;
	/* Judge0 1.13.1 reads base64_encoded as true unless it is "false"
	 * (submissions_controller.rb's set_base64_encoded), whatever its
	 * documentation says; this restores the documented default */
	bool disable_implicit_base64_encoding;
};

/* What an additional_files archive may be: the zip as sent (it is kept
 * with the run, in client.judge0, for GET's additional_files), and what
 * it may extract to (Judge0's MAX_EXTRACT_SIZE, KB). */
#define JUDGE0_ZIP_MAX (1u << 20)
#define JUDGE0_MAX_EXTRACT_SIZE 10240

/* Judge0's "Multi-file program": no source, an archive whose run (or
 * run.sh) script runs it, after its compile (or compile.sh) script if
 * it has one. Its scripts run with bash, as Judge0 runs them, in the C
 * and C++ image (gcc, g++, and bash for them). */
#define JUDGE0_PROJECT_LANGUAGE 89
#define JUDGE0_PROJECT_RUNTIME "c++"

/* Judge0's additional_files (a zip, decoded) into rq's workspace_files:
 * regular files at their paths (executable when the owner's execute bit
 * is set, as unzip keeps it), directories implied by them; an entry
 * whose name is taken already (the source, an earlier entry) skipped, as
 * Judge0's `unzip -n` skips it. At most max_bytes extracted in all,
 * counted as they come out (never taken from the headers), and
 * RUN_SPEC_MAX_WORKSPACE_FILES files; a link, an encrypted entry or a
 * path outside the workspace refuses the archive. 0, or -1 with the
 * reason for Judge0's 422 in why ("extracts to more than 10240 KB") and
 * rq as it was. */
int judge0_unzip(const unsigned char *zip, size_t n, uint64_t max_bytes, struct run_spec *rq, char *why, size_t cap);

/* Judge0's defaults (config.rb). */
void judge0_config_defaults(struct judge0_config *c);

/* Apply one vmrund config key: "judge0_" and a config_info name
 * ("judge0_cpu_time_limit = 2.5"). 1 applied, 0 not a key of ours, -1 a
 * bad value (the reason in err). */
int judge0_config_set(struct judge0_config *c, const char *key, const char *value, char *err, size_t errlen);

/* GET /config_info: every key Judge0 1.13.1 has, typed as it types them;
 * queue_max is vmrund's queue_max (Judge0's max_queue_size), network
 * whether the asking tenant may enable_network (allow_enable_network). */
json_t *judge0_config_info(const struct judge0_config *c, unsigned queue_max, bool network);

/* ---- languages and statuses ------------------------------------------------ */

/* GET /languages ([{id, name}] of the installed runtimes that have a
 * Judge0 id), /languages/all (with is_archived), /languages/ID ({id, name,
 * is_archived, source_file, compile_cmd, run_cmd}; NULL when id is none of
 * them), GET /statuses ([{id, description}], 1 to 14). */
json_t *judge0_languages(const struct runtime *rts, size_t n, bool all);
json_t *judge0_language(const struct runtime *rts, size_t n, long id);
json_t *judge0_statuses(void);

/* Whether language id's compiler takes Judge0's compiler_options (before
 * its sources): C, C++, Go and Rust; not Java, whose vmrun-javac takes
 * file names alone. */
bool judge0_language_takes_options(long id);
#define JUDGE0_COMPILER_OPTIONS_LANGUAGES "C, C++, Go and Rust"

/* The runtime of language id among rts, and the name Judge0 gives its
 * source file (*source_file, may be NULL): NULL when none. */
const struct runtime *judge0_language_runtime(long id, const struct runtime *rts, size_t n, const char **source_file);

/* Status ids (app/enumerations/status.rb). */
enum judge0_status {
	J0_IN_QUEUE = 1,
	J0_PROCESSING,
	J0_ACCEPTED,
	J0_WRONG_ANSWER,
	J0_TIME_LIMIT,
	J0_COMPILATION_ERROR,
	J0_SIGSEGV,
	J0_SIGXFSZ,
	J0_SIGFPE,
	J0_SIGABRT,
	J0_NZEC,
	J0_OTHER,
	J0_INTERNAL_ERROR,
	J0_EXEC_FORMAT_ERROR,
};

/* A status id's description ("Runtime Error (SIGSEGV)"), NULL for none. */
const char *judge0_status_name(int id);

/* ---- GET /statistics (judge0_stats.c) ---------------------------------------- */

#define JUDGE0_STATS_DAYS 30           /* last_30_days */
#define JUDGE0_STATS_CACHE_MS (10 * 60 * 1000)   /* Judge0's 10 minutes */
#define JUDGE0_STATS_LANG_IDS 128      /* language ids counted (Judge0's are below 100) */

/* The counts GET /statistics shows, as info_controller.rb makes them. */
struct judge0_tally {
	uint64_t total;
	uint64_t by_language[JUDGE0_STATS_LANG_IDS];
	uint64_t by_status[J0_EXEC_FORMAT_ERROR + 1];
	uint64_t by_day[JUDGE0_STATS_DAYS + 1];   /* [0] today (UTC), [k] k days before */
};

/* Count one submission of language id, status id, made at created_ms,
 * the day being now_ms's (UTC). */
void judge0_tally_add(struct judge0_tally *t, long language, int status, int64_t created_ms, int64_t now_ms);

/* The body: {created_at, cached_until (Rails' DateTime JSON),
 * submissions {total, today, last_30_days (the 30 days before today,
 * newest first, today not among them, as Judge0's exclusive range has
 * it)}, languages and statuses ([{language|status {id, name}, count}],
 * most first), database {size_pretty (as pg_size_pretty writes it),
 * size_in_bytes}, its size -1 when unknown (null)}. Pure. */
json_t *judge0_statistics(const struct judge0_tally *t, int64_t now_ms, int64_t until_ms,
			  const struct runtime *rts, size_t n, int64_t db_bytes);

/* ---- tokens and base64 ------------------------------------------------------ */

/* A run id (32 hex digits) as a token (its UUID text), and back: false
 * when token is not one. */
void judge0_token(const char *id, char token[JUDGE0_TOKEN_LEN + 1]);
bool judge0_token_id(const char *token, char id[33]);

/* Ruby's Base64.encode64, which Judge0 writes: a newline after every 60
 * characters and after the last. malloc'd, NUL-terminated, its length in
 * *outlen (may be NULL); NULL when out of memory. */
char *judge0_encode64(const void *p, size_t n, size_t *outlen);

/* Ruby's Base64.decode64, which Judge0 reads with: lenient, as Ruby is
 * (characters outside the alphabet are skipped; the first '=' ends it; a
 * last group of 2 or 3 characters gives its 1 or 2 bytes). malloc'd with
 * a NUL after (*out NULL: out of memory). */
int judge0_decode64(const char *s, size_t n, unsigned char **out, size_t *outlen);

/* ---- a submission ------------------------------------------------------------ */

/* Translate a submission (one object of a POST /submissions body, or of a
 * batch's) into rq, reading source_code, stdin and expected_output as
 * base64 when b64. t is the tenant (NULL: one with no callbacks and no
 * network): its callback rules say where callbacks may go, and its
 * network ceiling is what enable_network gives the run (a tenant with
 * neither "any" nor a rule may not enable it). 0; or -1 with *errors
 * Judge0's 422 body ({"language_id": ["can't be blank"], ...}, every
 * failed check) and rq empty. What Judge0 does not run the way we do is
 * refused with Judge0's own message for a setting it does not allow
 * ("setting compiler options is not allowed"), as a Judge0 configured so
 * would refuse it. */
int judge0_submission(const json_t *body, bool b64, const struct judge0_config *c, const struct runtime *rts,
		      size_t n, const struct tenant *t, struct run_spec *rq, json_t **errors);

/* ---- callbacks ---------------------------------------------------------------- */

#define JUDGE0_URL_MAX 1024

/* A callback_url's parts: http or https, the host as given (a name, or an
 * address literal without its brackets), the port (80 or 443 unless
 * given). */
struct judge0_url {
	bool https;
	char host[NET_HOST_MAX + 1];
	uint16_t port;
};

/* Split url: 0, or -1 with why in err ("not an http:// or https://
 * URL"). No user information, no spaces or control characters, at most
 * JUDGE0_URL_MAX bytes. Pure. */
int judge0_url_parse(const char *url, struct judge0_url *u, char *err, size_t errlen);

/* At submission, what can be judged without resolving: whether r admits
 * u's host (a name by r's host rules, or any name when r->any; an
 * address only by an address rule, or outside the deny set when r->any).
 * NULL, or the reason. The addresses a name resolves to are judged when
 * the callback is made (net_decide with r's rules and r->any). Pure. */
const char *judge0_callback_refusal(const struct tenant_reach *r, const struct judge0_url *u, char *why,
				    size_t cap);

/* The fields a client asked for (?fields=a,b or "*"; NULL or "" the
 * default ones) as a mask of JUDGE0_FIELD_* bits: 0, or -1 with the
 * unknown ones in invalid ("foo, bar"), as Judge0's 400 lists them. */
int judge0_fields(const char *list, uint64_t *mask, char *invalid, size_t len);
uint64_t judge0_fields_default(void);
uint64_t judge0_field_bit(const char *name);   /* 0: no such field */

/* What the view of a submission reads: its stored run. */
struct judge0_run {
	const char *id;               /* the run's id (32 hex) */
	int state;                    /* 0 queued, 1 running, 2 ended */
	const json_t *request;        /* the stored native request (files, stdin, client) */
	const json_t *result;         /* the run's result JSON; NULL: none (not ended, or ended without) */
	const char *output[2];        /* each stage's streams interleaved (compile, run), or NULL */
	const char *message;          /* the run's own message, for one that ended without a result */
	int64_t created_ms, started_ms, finished_ms;   /* Unix ms; 0: not yet */
	const char *node;             /* the node that ran it; "" none */
	const struct runtime *rts;    /* the installed runtimes: the language's name */
	size_t nrts;
};

/* The submission as Judge0 shows it, the fields in mask: texts base64
 * (Ruby's) when b64. NULL when out of memory; *not_utf8 set when !b64 and
 * a text is not UTF-8 (Judge0 answers 400 then). */
json_t *judge0_view(const struct judge0_run *run, uint64_t mask, bool b64, bool *not_utf8);

/* The verdict (status id) and isolate's message for a result, as Judge0
 * decides it (isolate_job.rb's determine_status and its compile step),
 * what vmrun knows more added to the message ("memory limit exceeded").
 * j0 is the run's stored "judge0" object (expected output, cpu time
 * limit). */
struct judge0_verdict {
	int status;
	char message[300];            /* "": null */
	bool has_exit_code, has_signal;
	int exit_code, signal;
};
void judge0_verdict(const json_t *result, const json_t *j0, struct judge0_verdict *v);


#endif
