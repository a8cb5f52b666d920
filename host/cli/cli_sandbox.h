/* `vmrun sandbox`: a sandbox driven from a shell through vmrund's
 * /v1/sandboxes, as `docker exec` and `docker cp` drive a container
 * (docs/sandboxes.md):
 *
 *   vmrun sandbox [--server URL] create [--runtime NAME] [--timeout S] [-m MIB]
 *                 [-c CPUS] [--disk MIB] [-e K=V]... [--meta K=V]... [--json]
 *   vmrun sandbox ls [--json]
 *   vmrun sandbox exec [-t S] [-w DIR] [-e K=V]... [-i] ID [--] PROGRAM [ARG...]
 *   vmrun sandbox cp SRC DST        one of them ID:PATH; "-" is a tar on
 *                                   stdin or stdout, for a directory
 *   vmrun sandbox cat ID PATH
 *   vmrun sandbox kill ID
 *   vmrun sandbox timeout ID SECONDS
 *   vmrun sandbox pause ID | resume ID
 *   vmrun sandbox diff [--from F] [--to T] [--stat] [--json] ID
 *
 * The server is --server, else $VMRUN_SERVER, else vmrund --local's socket
 * when it is there, else http://127.0.0.1:8080; the key is
 * $VMRUN_API_KEY. exec exits with the command's status (128 + its signal,
 * 124 when its timeout ended it). */
#ifndef VMRUN_CLI_SANDBOX_H
#define VMRUN_CLI_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

enum sbx_verb { SV_CREATE, SV_LS, SV_EXEC, SV_CP, SV_CAT, SV_KILL, SV_TIMEOUT, SV_PAUSE, SV_RESUME, SV_DIFF };

/* What the command line asks (argv[1] is "sandbox"). */
struct sbx_cli {
	enum sbx_verb verb;
	const char *verb_name;        /* as the command line spelled it */
	const char *server;           /* NULL: chosen at run time */
	bool json;
	json_t *body;                 /* create: the request; exec: the command (owned) */
	const char *id;
	const char *src, *dst;        /* cp; cat: dst is the path */
	double seconds;               /* timeout */
	bool stdin_in;                /* exec -i: stdin is read whole and given to the command */
	const char *from, *to;        /* diff: "start" or a checkpoint; NULL: the server's default */
	bool stat_only;               /* diff --stat */
};

/* Parse argv into c. 0 to go on, 1 when --help was printed, -1 with a
 * one-line reason in err (no prefix). Pure but for --help's print.
 * Release c with sbx_cli_free whatever it returned. */
int sbx_cli_parse(int argc, char **argv, struct sbx_cli *c, char *err, size_t errlen);

void sbx_cli_free(struct sbx_cli *c);

/* The server to use when c names none: $VMRUN_SERVER, vmrund --local's
 * socket (local, when it exists), or http://127.0.0.1:8080. */
const char *sbx_cli_server(const struct sbx_cli *c, const char *local);

/* Do what c asks: the exit status (exec: the command's), with a
 * one-line reason in err for a failure of ours or the server's. */
int sbx_cli_run(struct sbx_cli *c, const char *server, const char *key, char *err, size_t errlen);

#endif
