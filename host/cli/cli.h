/* The vmrun command line (DESIGN.md, "Interfaces that tests rely on"). */
#ifndef VMRUN_CLI_H
#define VMRUN_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "proxy_wire.h"
#include "run.h"
#include "run_spec.h"

struct vmrun_opts {
	/* What the run asks for (the contract vmrund's APIs map onto too):
	 * -t -m -c --disk --max-output, -e, --runtime, PROGRAM ARG... (with
	 * --source, the run stage's ARGs), the stage limits, and --allow-net
	 * and --allow-net-addr parsed here, once. Owned: cli_free. */
	struct run_spec spec;
	/* What only the host names: the caller's paths */
	const char *workspace;     /* -w: copied into /workspace */
	const char *artifacts;     /* -a: artifacts/ copied out here */
	const char *stdin_file;    /* -i */
	const char *policy;        /* --policy */
	const char *kernel, *rootfs;
	const char *sources[RUN_MAX_SOURCES];   /* --source FILE... */
	unsigned nsources;
	const char *secret_headers[PROXY_SECRETS_MAX];   /* --secret-header HOST:HEADER=@FILE */
	unsigned nsecret_headers;
	const char *secret_ca;                          /* --secret-ca FILE */
	bool json, verbose;
	bool allow_weaker_jail;    /* rootless: accept a jail without cgroup limits */
	bool cold;                 /* --cold: boot from scratch, no snapshot */
};

/* Parse argv into o. Returns 0 to run, 1 when --help or --version was
 * printed, or -1 with a one-line reason in err (no prefix: main adds it).
 * Values are checked for syntax and absolute bounds here; the policy's
 * ceilings come later. Release o with cli_free, whatever it returned. */
int cli_parse(int argc, char **argv, struct vmrun_opts *o, char *err, size_t errlen);

/* Free what o owns (its spec); safe twice. */
void cli_free(struct vmrun_opts *o);

/* Parse `vmrun snapshot [--runtime NAME | --rootfs FILE] [--kernel FILE]
 * [--memory MIB] [--cpus N] [--policy FILE] [--allow-weaker-jail] [-v]`
 * (argv[1] is "snapshot") into o's fields of those names (memory and
 * vCPUs into its spec). Returns 0 to
 * make the snapshot, 1 when --help was printed, or -1 with a one-line
 * reason in err (no prefix). */
int cli_parse_snapshot(int argc, char **argv, struct vmrun_opts *o, char *err, size_t errlen);

#endif
