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
	"       vmrun --runtime NAME [OPTIONS] --source FILE [FILE...] [-- ARG...]\n"
	"       vmrun runtimes [--json]\n"
	"       vmrun snapshot [--runtime NAME | --rootfs FILE] [-m MIB] [-c N]   (see its --help)\n"
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
	"      --allow-net HOST[:PORT]\n"
	"                          let the command reach HOST (\"*.example.com\": its subdomains;\n"
	"                          \"*\": any host name, public addresses only)\n"
	"                          on PORT, else 80 and 443, through the run's proxy at\n"
	"                          127.0.0.1:3128 (repeatable; default: no network at all)\n"
	"      --allow-net-addr CIDR[:PORT]\n"
	"                          also allow an address range the proxy refuses by default\n"
	"                          (private, loopback, link-local), within the policy's ceiling\n"
	"      --secret-header HOST:HEADER=@FILE\n"
	"                          plain http://HOST/ requests go out over TLS to HOST:443 with\n"
	"                          HEADER: FILE's contents added by the proxy; the guest never\n"
	"                          sees the value (repeatable)\n"
	"      --secret-ca FILE    verify those TLS servers against FILE's CAs (PEM), not the\n"
	"                          system's\n"
	"      --policy FILE       allowlist and limit ceilings (default built in; see docs/cli.md)\n"
	"      --json              print the result object instead of streaming output\n"
	"      --kernel FILE       guest kernel (default: the built one)\n"
	"      --rootfs FILE       guest root image (default: the built one)\n"
	"      --runtime NAME      a language runtime's image and allowlist (see `vmrun runtimes`)\n"
	"      --source FILE...    source mode: copy the files into /workspace, run the runtime's\n"
	"                          compile stage (if it has one), then its run stage with ARGs\n"
	"      --compile-timeout SEC, --compile-memory MIB, --compile-cpu-time SEC\n"
	"      --run-timeout SEC, --run-memory MIB, --run-cpu-time SEC\n"
	"                          a stage's own limits (default: the runtime's); in source\n"
	"                          mode --timeout defaults to 10 s plus the stages' timeouts\n"
	"                          and --memory to the largest stage memory plus 64 MiB\n"
	"      --cold              boot the VM from scratch instead of restoring the snapshot\n"
	"                          of its kernel, root image, memory and vCPUs (made on\n"
	"                          first use; `vmrun snapshot` remakes it)\n"
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

static int seconds(char *err, size_t errlen, const char *opt, const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || !*s || !isfinite(v) || v <= 0 || v > 86400)
		return bad(err, errlen, opt, s, "a number of seconds above 0 and at most 86400");
	*out = v;
	return 0;
}

static bool valid_grant(const char *s)
{
	size_t n = strlen(s);
	return n <= PROTO_MAX_STR && proto_valid_env(s, n);
}

enum {
	O_DISK = 256, O_MAX_OUTPUT, O_POLICY, O_JSON, O_KERNEL, O_ROOTFS, O_WEAKER, O_RUNTIME, O_HELP, O_VERSION,
	O_SOURCE, O_C_TIMEOUT, O_C_MEMORY, O_C_CPU, O_R_TIMEOUT, O_R_MEMORY, O_R_CPU, O_NET, O_NET_ADDR, O_SECRET,
	O_SECRET_CA, O_COLD,
};

/* --allow-net and --allow-net-addr: parsed now, into the spec; each
 * rule's ceiling when the run is planned. */
static int net_option(bool addr, const char *v, struct vmrun_opts *o, char *err, size_t errlen)
{
	const char *opt = addr ? "--allow-net-addr" : "--allow-net";
	struct net_rule r;
	char why[256], shown[120];
	if (net_rule_parse(v, addr, &r, why, sizeof(why)) < 0)
		return errf(err, errlen, "%s %s: %s", opt, errmsg_printable(shown, sizeof(shown), v), why);
	if (run_spec_add_rule(&o->spec, &r) < 0)
		return errno == ENOSPC ? errf(err, errlen, "%s: at most %u rules in all", opt, RUN_SPEC_MAX_NET_RULES)
				       : errf(err, errlen, "out of memory");
	return 0;
}

/* A stage limit option: which stage, which limit. */
static int stage_option(int c, const char *name, const char *v, struct vmrun_opts *o, char *err, size_t errlen)
{
	struct run_stage_limits *st = c <= O_C_CPU ? &o->spec.compile : &o->spec.run;
	double sec;
	switch (c) {
	case O_C_TIMEOUT:
	case O_R_TIMEOUT:
		return seconds(err, errlen, name, v, &st->timeout_s);
	case O_C_MEMORY:
	case O_R_MEMORY:
		return number(err, errlen, name, v, 16, 65536, &st->memory_mib);
	default:
		if (seconds(err, errlen, name, v, &sec))
			return -1;
		st->cpu_time_ms = (uint64_t)(sec * 1000.0 + 0.5);
		return 0;
	}
}

static int add_source(struct vmrun_opts *o, const char *path, char *err, size_t errlen)
{
	if (o->nsources == RUN_MAX_SOURCES)
		return errf(err, errlen, "--source: at most %d files", RUN_MAX_SOURCES);
	o->sources[o->nsources++] = path;
	return 0;
}

/* PROGRAM ARG... (or source mode's ARGs) into the spec, each checked
 * against the agent's bounds. */
static int run_args(struct vmrun_opts *o, char **args, int n, char *err, size_t errlen)
{
	if (n > (int)PROTO_MAX_ARGS)
		return errf(err, errlen, "at most %u program arguments", PROTO_MAX_ARGS);
	for (int i = 0; i < n; i++) {
		if (strlen(args[i]) > PROTO_MAX_STR)
			return errf(err, errlen, "argument %d is longer than %u bytes", i, PROTO_MAX_STR);
		if (run_spec_add_arg(&o->spec, args[i]) < 0)
			return errf(err, errlen, "out of memory");
	}
	return 0;
}

/* Source mode's operands: more files up to "--" (unless getopt took it
 * already), then the run stage's arguments. */
static int source_operands(int argc, char **argv, int at, struct vmrun_opts *o, char *err, size_t errlen)
{
	bool args = at > 0 && !strcmp(argv[at - 1], "--");
	for (; !args && at < argc; at++) {
		if (!strcmp(argv[at], "--")) {
			at++;
			break;
		}
		if (add_source(o, argv[at], err, errlen))
			return -1;
	}
	return run_args(o, argv + at, argc - at, err, errlen);
}

/* An option that both a run and `vmrun snapshot` take (they make the
 * same VM): 1 when c is one, stored in o; 0 when it is not; -1 on a bad
 * value, with why. */
static int guest_option(int c, const char *arg, struct vmrun_opts *o, char *err, size_t errlen)
{
	switch (c) {
	case O_RUNTIME:
		/* runtime_find judges the name; one that cannot fit is none */
		if (strlen(arg) >= sizeof(o->spec.runtime))
			return bad(err, errlen, "--runtime", arg, "a runtime name"), -1;
		memcpy(o->spec.runtime, arg, strlen(arg) + 1);
		return 1;
	case O_ROOTFS: o->rootfs = arg; return 1;
	case O_KERNEL: o->kernel = arg; return 1;
	case O_POLICY: o->policy = arg; return 1;
	case O_WEAKER: o->allow_weaker_jail = true; return 1;
	case 'v': o->verbose = true; return 1;
	case 'm': return number(err, errlen, "--memory", arg, 16, 65536, &o->spec.memory_mib) ? -1 : 1;
	case 'c': return number(err, errlen, "--cpus", arg, 1, 32, &o->spec.cpus) ? -1 : 1;
	default: return 0;
	}
}

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
		{ "version", no_argument, NULL, O_VERSION },   { "source", required_argument, NULL, O_SOURCE },
		{ "compile-timeout", required_argument, NULL, O_C_TIMEOUT },
		{ "compile-memory", required_argument, NULL, O_C_MEMORY },
		{ "compile-cpu-time", required_argument, NULL, O_C_CPU },
		{ "run-timeout", required_argument, NULL, O_R_TIMEOUT },
		{ "run-memory", required_argument, NULL, O_R_MEMORY },
		{ "run-cpu-time", required_argument, NULL, O_R_CPU },
		{ "allow-net", required_argument, NULL, O_NET },
		{ "allow-net-addr", required_argument, NULL, O_NET_ADDR },
		{ "secret-header", required_argument, NULL, O_SECRET },
		{ "secret-ca", required_argument, NULL, O_SECRET_CA }, { "cold", no_argument, NULL, O_COLD },
		{ NULL, 0, NULL, 0 },
	};
	*o = (struct vmrun_opts){ 0 };
	const char *stage_opt = NULL;   /* a stage limit given, for the message without --source */
	int oi = -1;
	optind = 0;
	opterr = 0;
	int c;
	/* '+': options end at PROGRAM, so its own options are its own. */
	while ((c = getopt_long(argc, argv, "+:w:a:t:m:c:e:i:v", opts, &oi)) != -1) {
		if (c >= O_C_TIMEOUT && c <= O_R_CPU) {
			stage_opt = opts[oi].name;
			char name[40];
			snprintf(name, sizeof(name), "--%s", opts[oi].name);
			if (stage_option(c, name, optarg, o, err, errlen))
				return -1;
			continue;
		}
		int shared = guest_option(c, optarg, o, err, errlen);
		if (shared < 0)
			return -1;
		if (shared)
			continue;
		switch (c) {
		case O_SOURCE:
			if (add_source(o, optarg, err, errlen))
				return -1;
			break;
		case O_NET:
		case O_NET_ADDR:
			if (net_option(c == O_NET_ADDR, optarg, o, err, errlen))
				return -1;
			break;
		case O_SECRET:
			if (o->nsecret_headers == PROXY_SECRETS_MAX)
				return errf(err, errlen, "--secret-header: at most %u", PROXY_SECRETS_MAX);
			if (!strstr(optarg, "=@") || !strchr(optarg, ':'))
				return bad(err, errlen, "--secret-header", optarg, "HOST:HEADER=@FILE");
			o->secret_headers[o->nsecret_headers++] = optarg;
			break;
		case O_SECRET_CA: o->secret_ca = optarg; break;
		case 'w': o->workspace = optarg; break;
		case 'a': o->artifacts = optarg; break;
		case 'i': o->stdin_file = optarg; break;
		case O_JSON: o->json = true; break;
		case O_COLD: o->cold = true; break;
		case 't':
			if (seconds(err, errlen, "--timeout", optarg, &o->spec.timeout_s))
				return -1;
			break;
		case O_DISK:
			if (number(err, errlen, "--disk", optarg, 8, 65536, &o->spec.disk_mib))
				return -1;
			break;
		case O_MAX_OUTPUT:
			if (number(err, errlen, "--max-output", optarg, 1, UINT64_MAX, &o->spec.max_output))
				return -1;
			break;
		case 'e':
			if (!valid_grant(optarg))
				return bad(err, errlen, "--env", optarg, "NAME=VALUE");
			if (o->spec.nenv == PROTO_MAX_ENV)
				return errf(err, errlen, "--env: at most %u grants", PROTO_MAX_ENV);
			if (run_spec_add_env(&o->spec, optarg) < 0)
				return errf(err, errlen, "out of memory");
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
	if (o->nsources) {
		if (!o->spec.runtime[0])
			return errf(err, errlen, "--source needs --runtime (see `vmrun runtimes`)");
		o->spec.source = true;
		return source_operands(argc, argv, optind, o, err, errlen);
	}
	if (stage_opt)
		return errf(err, errlen, "--%s is a source-mode limit: it needs --source", stage_opt);
	if (optind >= argc)
		return errf(err, errlen, "no PROGRAM given (see --help)");
	return run_args(o, argv + optind, argc - optind, err, errlen);
}

void cli_free(struct vmrun_opts *o)
{
	run_spec_free(&o->spec);
}

static const char snapshot_usage[] =
	"usage: vmrun snapshot [--runtime NAME | --rootfs FILE] [--kernel FILE] [--memory MIB] [--cpus N]\n"
	"                      [--policy FILE] [--allow-weaker-jail] [-v]\n"
	"(Re)makes the warm-start snapshot for runs with that root image (default: the built\n"
	"one), kernel, memory (default 256) and vCPUs (default 1), and prints its directory.\n";

int cli_parse_snapshot(int argc, char **argv, struct vmrun_opts *o, char *err, size_t errlen)
{
	static const struct option opts[] = {
		{ "runtime", required_argument, NULL, O_RUNTIME }, { "rootfs", required_argument, NULL, O_ROOTFS },
		{ "kernel", required_argument, NULL, O_KERNEL },   { "memory", required_argument, NULL, 'm' },
		{ "cpus", required_argument, NULL, 'c' },          { "policy", required_argument, NULL, O_POLICY },
		{ "allow-weaker-jail", no_argument, NULL, O_WEAKER }, { "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, O_HELP },             { NULL, 0, NULL, 0 },
	};
	*o = (struct vmrun_opts){ 0 };
	optind = 0;
	opterr = 0;
	int c;
	/* argv + 1: "snapshot" is getopt's program name */
	while ((c = getopt_long(argc - 1, argv + 1, ":m:c:v", opts, NULL)) != -1) {
		int shared = guest_option(c, optarg, o, err, errlen);
		if (shared < 0)
			return -1;
		if (shared)
			continue;
		switch (c) {
		case O_HELP: fputs(snapshot_usage, stdout); return 1;
		case ':': return errf(err, errlen, "snapshot: %.200s needs a value", argv[optind]);
		default:
			if (optopt)
				return errf(err, errlen, "snapshot: unknown option '-%c' (see vmrun snapshot --help)", optopt);
			return errf(err, errlen, "snapshot: unknown option '%.200s' (see vmrun snapshot --help)",
				    argv[optind]);
		}
	}
	if (optind + 1 < argc)
		return errf(err, errlen, "snapshot: unexpected '%.200s' (it takes options only)", argv[optind + 1]);
	if (o->spec.runtime[0] && o->rootfs)
		return errf(err, errlen, "snapshot: --runtime and --rootfs name two root images; give one");
	return 0;
}
