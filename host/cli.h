/* The vmrun command line (DESIGN.md, "Interfaces that tests rely on"). */
#ifndef VMRUN_CLI_H
#define VMRUN_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "proxy_wire.h"
#include "run.h"

struct vmrun_opts {
	const char *workspace;     /* -w: copied into /workspace */
	const char *artifacts;     /* -a: artifacts/ copied out here */
	const char *stdin_file;    /* -i */
	const char *policy;        /* --policy */
	const char *kernel, *rootfs;
	const char *runtime;       /* --runtime NAME */
	double timeout_s;          /* -t, whole run, boot included; 0: not given */
	uint64_t memory_mib;       /* -m; 0: not given */
	uint64_t cpus, disk_mib, max_output;
	const char *sources[RUN_MAX_SOURCES];   /* --source FILE... */
	unsigned nsources;
	struct run_stage_request compile, run;  /* --compile-*, --run-* */
	const char *env[PROTO_MAX_ENV];
	unsigned nenv;
	const char *allow_net[PROXY_RULES_MAX];       /* --allow-net HOST[:PORT] */
	const char *allow_net_addr[PROXY_RULES_MAX];  /* --allow-net-addr CIDR[:PORT] */
	unsigned nallow_net, nallow_net_addr;
	const char *secret_headers[PROXY_SECRETS_MAX];   /* --secret-header HOST:HEADER=@FILE */
	unsigned nsecret_headers;
	const char *secret_ca;                          /* --secret-ca FILE */
	bool json, verbose;
	bool allow_weaker_jail;    /* rootless: accept a jail without cgroup limits */
	bool cold;                 /* --cold: boot from scratch, no snapshot */
	char **argv;               /* PROGRAM ARG..., NULL-terminated; with --source, the ARGS */
	int argc;
};

#define VMRUN_DEFAULT_CPUS       1
#define VMRUN_DEFAULT_DISK_MIB   64
#define VMRUN_DEFAULT_MAX_OUTPUT (1024 * 1024)

/* Parse argv into o. Returns 0 to run, 1 when --help or --version was
 * printed, or -1 with a one-line reason in err (no prefix: main adds it).
 * Values are checked for syntax and absolute bounds here; the policy's
 * ceilings come later. */
int cli_parse(int argc, char **argv, struct vmrun_opts *o, char *err, size_t errlen);

/* Parse `vmrun snapshot [--runtime NAME | --rootfs FILE] [--kernel FILE]
 * [--memory MIB] [--cpus N] [--policy FILE] [--allow-weaker-jail] [-v]`
 * (argv[1] is "snapshot") into o's fields of those names. Returns 0 to
 * make the snapshot, 1 when --help was printed, or -1 with a one-line
 * reason in err (no prefix). */
int cli_parse_snapshot(int argc, char **argv, struct vmrun_opts *o, char *err, size_t errlen);

#endif
