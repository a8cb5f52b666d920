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

#endif
