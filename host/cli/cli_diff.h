/* `vmrun sandbox diff`'s printing: vmrund's diff of a workspace (GET
 * /v1/sandboxes/ID/diff, wsdiff.h) as `git diff --stat` and `git diff`
 * show a change. */
#ifndef VMRUN_CLI_DIFF_H
#define VMRUN_CLI_DIFF_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

/* Print diff to out: a line per changed path (its lines added and removed,
 * or what else changed: binary, a link's target, a mode, a type), the
 * totals and the digest; then, unless stat_only, each text file's unified
 * diff. Pure but for the writes. */
void cli_print_diff(FILE *out, const json_t *diff, bool stat_only);

#endif
