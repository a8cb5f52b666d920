#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"

#ifndef VMRUN_VERSION
#define VMRUN_VERSION "0.1.0"
#endif

static const char usage[] =
	"usage: vmrun [OPTIONS] [--] PROGRAM [ARG...]\n"
	"       vmrun runtimes [--json]\n"
	"Runs PROGRAM in a fresh microVM and reports how it ended.\n"
	"  -w, --workspace DIR     copy DIR's contents into /workspace (the command's cwd)\n"
	"  -a, --artifacts DIR     copy /workspace/artifacts out into DIR (created) after the run\n"
	"  -t, --timeout SEC       wall-clock limit for the whole run, boot included (default 10)\n"
	"  -m, --memory MIB        guest memory (default 256)\n"
	"  -c, --cpus N            vCPUs (default 1)\n"
	"      --disk MIB          workspace disk size (default 64)\n"
	"      --max-output BYTES  cap per output stream; the rest is dropped and flagged\n"
	"                          (default 1048576)\n"
	"  -e, --env NAME=VALUE    grant one variable to the command (repeatable)\n"
	"  -i, --stdin FILE        the command's stdin (default empty)\n"
	"      --policy FILE       allowlist and limit ceilings (default built in; see README)\n"
	"      --json              print the result object instead of streaming output\n"
	"      --kernel FILE       guest kernel (default: the built one)\n"
	"      --rootfs FILE       guest root image (default: the built one)\n"
	"      --runtime NAME      a language runtime's image and allowlist (see `vmrun runtimes`)\n"
	"      --allow-weaker-jail without root, run even where no cgroup v2 subtree is\n"
	"                          delegated to you (no memory or pids limit for vmm)\n"
	"  -v, --verbose           phases and the guest console on stderr\n"
	"      --help, --version\n"
	"exit status: the command's own; 128+N when killed by signal N; 124 timeout;\n"
	"126 not allowed or not executable; 127 not found; 125 vmrun or the VM failed\n";

static int bad(char *err, size_t errlen, const char *opt, const char *val, const char *what)
{
	return errf(err, errlen, "%s: '%.200s' is not %s", opt, val, what);
}

static int number(char *err, size_t errlen, const char *opt, const char *s, uint64_t min, uint64_t max,
		  uint64_t *out)
{
	char *end;
	errno = 0;
	if (*s < '0' || *s > '9')
		return bad(err, errlen, opt, s, "a whole number");
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return errf(err, errlen, "%s: '%.200s' is not a whole number from %llu to %llu", opt, s,
			    (unsigned long long)min, (unsigned long long)max);
	*out = v;
	return 0;
}

static bool valid_grant(const char *s)
{
	size_t n = strlen(s);
	return n <= PROTO_MAX_STR && proto_valid_env(s, n);
}

enum { O_DISK = 256, O_MAX_OUTPUT, O_POLICY, O_JSON, O_KERNEL, O_ROOTFS, O_WEAKER, O_RUNTIME, O_HELP, O_VERSION };

int cli_parse(int argc, char **argv, struct vmrun_opts *o, char *err, size_t errlen)
{
	static const struct option opts[] = {
		{ "workspace", required_argument, NULL, 'w' }, { "artifacts", required_argument, NULL, 'a' },
		{ "timeout", required_argument, NULL, 't' },   { "memory", required_argument, NULL, 'm' },
		{ "cpus", required_argument, NULL, 'c' },      { "disk", required_argument, NULL, O_DISK },
		{ "max-output", required_argument, NULL, O_MAX_OUTPUT },
		{ "env", required_argument, NULL, 'e' },       { "stdin", required_argument, NULL, 'i' },
		{ "policy", required_argument, NULL, O_POLICY }, { "json", no_argument, NULL, O_JSON },
		{ "kernel", required_argument, NULL, O_KERNEL }, { "rootfs", required_argument, NULL, O_ROOTFS },
		{ "allow-weaker-jail", no_argument, NULL, O_WEAKER }, { "runtime", required_argument, NULL, O_RUNTIME },
		{ "verbose", no_argument, NULL, 'v' },         { "help", no_argument, NULL, O_HELP },
		{ "version", no_argument, NULL, O_VERSION },   { NULL, 0, NULL, 0 },
	};
	*o = (struct vmrun_opts){
		.timeout_s = VMRUN_DEFAULT_TIMEOUT_S, .memory_mib = VMRUN_DEFAULT_MEMORY_MIB,
		.cpus = VMRUN_DEFAULT_CPUS, .disk_mib = VMRUN_DEFAULT_DISK_MIB, .max_output = VMRUN_DEFAULT_MAX_OUTPUT,
	};
	optind = 0;
	opterr = 0;
	int c;
	char *end;
	/* '+': options end at PROGRAM, so its own options are its own. */
	while ((c = getopt_long(argc, argv, "+:w:a:t:m:c:e:i:v", opts, NULL)) != -1) {
		switch (c) {
		case 'w': o->workspace = optarg; break;
		case 'a': o->artifacts = optarg; break;
		case 'i': o->stdin_file = optarg; break;
		case O_POLICY: o->policy = optarg; break;
		case O_KERNEL: o->kernel = optarg; break;
		case O_ROOTFS: o->rootfs = optarg; break;
		case O_JSON: o->json = true; break;
		case O_WEAKER: o->allow_weaker_jail = true; break;
		case O_RUNTIME: o->runtime = optarg; break;
		case 'v': o->verbose = true; break;
		case 't':
			errno = 0;
			o->timeout_s = strtod(optarg, &end);
			if (errno || *end || !*optarg || !isfinite(o->timeout_s) || o->timeout_s <= 0 ||
			    o->timeout_s > 86400)
				return bad(err, errlen, "--timeout", optarg, "a number of seconds above 0 and at most 86400");
			break;
		case 'm':
			if (number(err, errlen, "--memory", optarg, 16, 65536, &o->memory_mib))
				return -1;
			break;
		case 'c':
			if (number(err, errlen, "--cpus", optarg, 1, 32, &o->cpus))
				return -1;
			break;
		case O_DISK:
			if (number(err, errlen, "--disk", optarg, 8, 65536, &o->disk_mib))
				return -1;
			break;
		case O_MAX_OUTPUT:
			if (number(err, errlen, "--max-output", optarg, 0, UINT64_MAX, &o->max_output))
				return -1;
			break;
		case 'e':
			if (!valid_grant(optarg))
				return bad(err, errlen, "--env", optarg, "NAME=VALUE");
			if (o->nenv == PROTO_MAX_ENV) {
				return errf(err, errlen, "--env: at most %u grants", PROTO_MAX_ENV);
			}
			o->env[o->nenv++] = optarg;
			break;
		case O_HELP: fputs(usage, stdout); return 1;
		case O_VERSION: printf("vmrun %s\n", VMRUN_VERSION); return 1;
		case ':':
			return errf(err, errlen, "%.200s needs a value (see --help)", argv[optind - 1]);
		default:
			if (optopt)
				return errf(err, errlen, "unknown option '-%c' (see --help)", optopt);
			return errf(err, errlen, "unknown option '%.200s' (see --help)", argv[optind - 1]);
		}
	}
	if (optind >= argc) {
		return errf(err, errlen, "no PROGRAM given (see --help)");
	}
	o->argv = argv + optind;
	o->argc = argc - optind;
	if (o->argc > (int)PROTO_MAX_ARGS) {
		return errf(err, errlen, "at most %u program arguments", PROTO_MAX_ARGS);
	}
	for (int i = 0; i < o->argc; i++)
		if (strlen(o->argv[i]) > PROTO_MAX_STR)
			return errf(err, errlen, "argument %d is longer than %u bytes", i, PROTO_MAX_STR);
	return 0;
}
