/* Piston v2 compatibility (https://github.com/engineer-man/piston, its
 * api/v2): POST /api/v2/execute and GET /api/v2/runtimes, translated to and
 * from the run spec's native body (host/run/run_spec.h) and vmrun's result
 * JSON (host/run/result.h, result_print_json). Pure: no I/O, no globals.
 *
 * Piston's meaning is kept: language is a runtime's name or alias; version
 * a semver selector ("3.11.2", "3.x", "3", "*", ">=3.10 <4", "^3.9",
 * "~3.11"); compile_timeout and run_timeout are each stage's own wall-clock
 * limit in ms, cpu_time in ms, memory limits in bytes, -1 or absent for
 * the runtime's default. A runtime without a compile stage ignores the
 * compile_* fields, as Piston does. */
#ifndef VMRUND_PISTON_H
#define VMRUND_PISTON_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "run_spec.h"
#include "runtime.h"

/* Translate an execute body into rq, choosing the runtime from the n
 * installed ones in rts (the newest version that matches, by name or
 * alias); *chosen points at it. Returns 0; or -1 with Piston's message in
 * err ("python-9.x runtime is unknown", "files is required as an array"),
 * or run_spec_from_json's for what only the native request checks (a file's name),
 * and rq empty. */
int piston_parse(const json_t *body, const struct runtime *rts, size_t n, struct run_spec *rq,
		 const struct runtime **chosen, char *err, size_t errlen);

/* The execute response for rt from a run's result (result_print_json's
 * object): {language, version, run, compile?}, each stage {stdout, stderr,
 * output, code, signal, message, status, cpu_time, wall_time, memory}.
 * status: null when the stage exited 0, else RE (non-zero exit), SG
 * (signal), TO (its time limit), OL / EL (stdout / stderr over the output
 * cap), XX (anything else: the VM failed, the run was denied). output[i]
 * is stage i's (0 compile, 1 run) stdout and stderr interleaved as they
 * arrived, or NULL for stdout then stderr. NULL when out of memory. */
json_t *piston_response(const struct runtime *rt, const json_t *result, const char *const output[2]);

/* GET /api/v2/runtimes: [{language, version, aliases, runtime?}]. */
json_t *piston_runtimes(const struct runtime *rts, size_t n);

/* Room for piston_number_text's text and its NUL. */
#define PISTON_NUMBER_MAX 32

/* d as JavaScript's String(d) writes it ("1", "1.5", "1e+21", "1e-7"):
 * Piston's CLI sends numeric args as JSON numbers, and Node hands each to
 * the program as that text. */
void piston_number_text(double d, char out[PISTON_NUMBER_MAX]);

/* ---- the interactive WebSocket, /api/v2/connect ---- */

/* Piston's close codes, with its reasons (api/src/api/v2.js). */
#define PISTON_WS_ALREADY 4000          /* "Already Initialized" */
#define PISTON_WS_INIT_TIMEOUT 4001     /* "Initialization Timeout" */
#define PISTON_WS_ERROR 4002            /* "Notified Error", after an error message */
#define PISTON_WS_NOT_YET 4003          /* "Not yet initialized" */
#define PISTON_WS_STDIN_ONLY 4004       /* "Can only write to stdin" */
#define PISTON_WS_BAD_SIGNAL 4005       /* "Invalid signal" */
#define PISTON_WS_DONE 4999             /* "Job Completed" */

/* Piston's reason for its close code ("" for another). */
const char *piston_ws_reason(unsigned code);

/* What a client's message asks. */
enum piston_ws_ask {
	PISTON_ASK_INIT,              /* msg is the execute body */
	PISTON_ASK_STDIN,             /* data[0..len) to the program's stdin */
	PISTON_ASK_SIGNAL,            /* signo to the program */
	PISTON_ASK_NOTHING,           /* a type Piston ignores */
	PISTON_ASK_CLOSE,             /* close with code (and its reason) */
	PISTON_ASK_ERROR,             /* an error message (err), then close 4002 */
};

struct piston_ws_msg {
	enum piston_ws_ask ask;
	json_t *msg;                  /* the message parsed (free with json_decref), or NULL */
	const char *data;             /* STDIN: in msg */
	size_t len;
	int signo;                    /* SIGNAL: 1..64 */
	unsigned code;                /* CLOSE */
	char err[200];                /* ERROR */
};

/* Decide a text message (len bytes) as Piston's connect handler does, by
 * its type: "init" (once: 4000 after), "data" on stream "stdin" (else
 * 4004; its data a string), "signal" with a name Piston knows ("SIGINT",
 * "SIGRTMIN+3"; else 4005); data and signal before init are 4003; JSON
 * that does not parse is an error; another type is ignored. Pure. */
void piston_ws_decide(const char *text, size_t len, bool initialized, struct piston_ws_msg *m);

/* Piston's name of signal n ("SIGINT", "SIGRTMIN+1"), into out; "" when
 * none. */
void piston_signal_name(int n, char out[16]);

#endif
