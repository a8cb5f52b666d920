#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "device.h"
#include "log.h"

#ifndef VMRUN_VERSION
#define VMRUN_VERSION "0.1.0"
#endif

/* The synopsis's devices part and the devices' lines come from their
 * kinds (device.h), between these. */
static const char usage_head[] =
	"usage: vmm --kernel FILE [--cmdline STR] [--no-default-cmdline] [--memory MIB]\n"
	"           [--cpus N] [--console stdout|FILE|none] [--console-limit BYTES]\n"
	"           [--kvm-fd N] [--accept-emulated-kvm] [--stats] [--probe]\n"
	"           [--snapshot-out DIR | --restore DIR [--resume DIR2] [--pause-out DIR2]]";
static const char usage_body[] =
	"\nBoots one microVM on /dev/kvm and exits when the guest resets or powers off.\n"
	"  --kernel FILE          x86_64: ELF vmlinux or bzImage (64-bit boot protocol);\n"
	"                         aarch64: an arm64 Image\n"
	"  --cmdline STR          appended to the default kernel command line:\n"
	"                         \"" VMM_DEFAULT_CMDLINE "\"\n"
	"  --no-default-cmdline   use --cmdline alone\n"
	"  --memory MIB           guest RAM (default 256)\n"
	"  --cpus N               vCPUs, 1-32 (default 1)\n"
	"  --kvm-fd N             use this already open /dev/kvm descriptor (vmrun's jail\n"
	"                         opens it before dropping privileges)\n"
	"  --console DEST         guest serial console: stdout (default), a file, or none\n"
	"  --console-limit BYTES  keep at most this much console output (default 1048576)\n"
	"  --accept-emulated-kvm  run even where KVM emulates guest kernel code (PVM hosts;\n"
	"                         only tiny test payloads are usable there)\n"
	"  --stats                print timing and memory figures on stderr at exit\n"
	"  --probe                check that this host's KVM runs a Linux guest (the kernel\n"
	"                         is loaded, the guest never starts): exit 0 if it does\n"
	"  --snapshot-out DIR     boot until the guest agent is ready for a run, then write\n"
	"                         the VM to DIR/state and DIR/memory and exit 0\n"
	"  --restore DIR          start from DIR's snapshot instead of booting: the same\n"
	"                         kernel, memory, vCPUs and disks (a \"none\" slot may now\n"
	"                         name a file); memory is mapped copy-on-write\n"
	"  --pause-out DIR2       with --restore: on " VMM_PAUSE_SIGNAL_NAME " stop the vCPUs, write the\n"
	"                         VM's state and the pages that differ from DIR's memory to\n"
	"                         DIR2/state.new and DIR2/pages.new, and exit 0\n"
	"  --resume DIR2          with --restore: start from the paused VM in DIR2 (its\n"
	"                         state, and its pages laid over DIR's memory), all of it\n"
	"                         checked before the guest runs\n";
static const char usage_tail[] =
	"exit status: 0 guest reset or powered off; 1 setup failure; 2 guest failure\n"
	"             (triple fault, emulation failure); 3 stopped by SIGTERM/SIGINT/SIGHUP\n";

static void print_usage(void)
{
	fputs(usage_head, stdout);
	for (const struct vmm_device_kind *const *k = vmm_device_kinds; *k; k++)
		if (*(*k)->synopsis)
			printf("\n           %s", (*k)->synopsis);
	fputs(usage_body, stdout);
	for (const struct vmm_device_kind *const *k = vmm_device_kinds; *k; k++)
		fputs((*k)->usage, stdout);
	fputs(usage_tail, stdout);
}

int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

enum { OPT_CONSOLE_LIMIT = 256, OPT_KVM_FD, OPT_NO_DEFAULT_CMDLINE, OPT_ACCEPT_EMULATED, OPT_STATS, OPT_PROBE, OPT_VERSION,
       OPT_SNAPSHOT_OUT, OPT_RESTORE, OPT_PAUSE_OUT, OPT_RESUME };
_Static_assert(OPT_RESUME < VMM_DEVICE_OPT_BASE, "the devices' option values are apart from these");

/* The most options the devices add, over every kind. */
#define DEVICE_OPTIONS_MAX 16

/* The device kind whose option val is, or NULL. */
static const struct vmm_device_kind *kind_of(int val)
{
	for (const struct vmm_device_kind *const *k = vmm_device_kinds; *k; k++)
		for (const struct option *o = (*k)->options; o->name; o++)
			if (o->val == val)
				return *k;
	return NULL;
}

int vmm_args_parse(int argc, char **argv, struct vmm_config *cfg)
{
	static const struct option own[] = {
		{ "kernel", required_argument, NULL, 'k' },
		{ "cmdline", required_argument, NULL, 'c' },
		{ "no-default-cmdline", no_argument, NULL, OPT_NO_DEFAULT_CMDLINE },
		{ "memory", required_argument, NULL, 'm' },
		{ "cpus", required_argument, NULL, 'n' },
		{ "console", required_argument, NULL, 'o' },
		{ "console-limit", required_argument, NULL, OPT_CONSOLE_LIMIT },
		{ "accept-emulated-kvm", no_argument, NULL, OPT_ACCEPT_EMULATED },
		{ "stats", no_argument, NULL, OPT_STATS },
		{ "probe", no_argument, NULL, OPT_PROBE },
		{ "kvm-fd", required_argument, NULL, OPT_KVM_FD },
		{ "snapshot-out", required_argument, NULL, OPT_SNAPSHOT_OUT },
		{ "restore", required_argument, NULL, OPT_RESTORE },
		{ "pause-out", required_argument, NULL, OPT_PAUSE_OUT },
		{ "resume", required_argument, NULL, OPT_RESUME },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
	};
	/* vmm's own options, then each device kind's, then the end */
	struct option opts[sizeof(own) / sizeof(own[0]) + DEVICE_OPTIONS_MAX + 1];
	size_t nopts = 0;
	for (; nopts < sizeof(own) / sizeof(own[0]); nopts++)
		opts[nopts] = own[nopts];
	for (const struct vmm_device_kind *const *k = vmm_device_kinds; *k; k++)
		for (const struct option *o = (*k)->options; o->name; o++) {
			if (nopts == sizeof(own) / sizeof(own[0]) + DEVICE_OPTIONS_MAX) {
				vmm_err("the devices have more than %d options", DEVICE_OPTIONS_MAX);
				return -1;
			}
			opts[nopts++] = *o;
		}
	opts[nopts] = (struct option){ NULL, 0, NULL, 0 };
	*cfg = (struct vmm_config){
		.memory_mib = VMM_DEFAULT_MEMORY_MIB,
		.cpus = 1,
		.console = "stdout",
		.console_limit = VMM_DEFAULT_CONSOLE_LIMIT,
		.kvm_fd = -1,
	};
	uint64_t n;
	int c;
	optind = 0;   /* glibc: a full reset, so parsing twice starts clean */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		switch (c) {
		case 'k': cfg->kernel = optarg; break;
		case 'c': cfg->cmdline_extra = optarg; break;
		case OPT_NO_DEFAULT_CMDLINE: cfg->no_default_cmdline = true; break;
		case 'm':
			if (parse_u64(optarg, VMM_MIN_MEMORY_MIB, VMM_MAX_MEMORY_MIB, &n)) {
				vmm_err("--memory: '%s' is not a number of MiB between %d and %d", optarg,
					VMM_MIN_MEMORY_MIB, VMM_MAX_MEMORY_MIB);
				return -1;
			}
			cfg->memory_mib = n;
			break;
		case 'n':
			if (parse_u64(optarg, 1, VMM_MAX_CPUS, &n)) {
				vmm_err("--cpus: '%s' is not a number between 1 and %d", optarg, VMM_MAX_CPUS);
				return -1;
			}
			cfg->cpus = (unsigned)n;
			break;
		case 'o':
			if (!*optarg) {
				vmm_err("--console: empty destination");
				return -1;
			}
			cfg->console = optarg;
			break;
		case OPT_CONSOLE_LIMIT:
			if (parse_u64(optarg, 0, UINT64_MAX, &n)) {
				vmm_err("--console-limit: '%s' is not a number of bytes", optarg);
				return -1;
			}
			cfg->console_limit = n;
			break;
		case OPT_ACCEPT_EMULATED: cfg->accept_emulated = true; break;
		case OPT_STATS: cfg->stats = true; break;
		case OPT_PROBE: cfg->probe_only = true; break;
		case OPT_KVM_FD:
			if (parse_u64(optarg, 3, 65535, &n)) {
				vmm_err("--kvm-fd: '%s' is not a descriptor number from 3 to 65535", optarg);
				return -1;
			}
			cfg->kvm_fd = (int)n;
			break;
		case OPT_SNAPSHOT_OUT:
		case OPT_RESTORE:
			if (!*optarg) {
				vmm_err("%s: empty directory", c == OPT_RESTORE ? "--restore" : "--snapshot-out");
				return -1;
			}
			*(c == OPT_RESTORE ? &cfg->restore : &cfg->snapshot_out) = optarg;
			break;
		case OPT_PAUSE_OUT:
		case OPT_RESUME:
			if (!*optarg) {
				vmm_err("%s: empty directory", c == OPT_RESUME ? "--resume" : "--pause-out");
				return -1;
			}
			*(c == OPT_RESUME ? &cfg->resume : &cfg->pause_out) = optarg;
			break;
		case 'h': print_usage(); return 1;
		case OPT_VERSION: printf("vmm %s\n", VMRUN_VERSION); return 1;
		case ':':
			vmm_err("%s needs a value (see --help)", argv[optind - 1]);
			return -1;
		default: {
			const struct vmm_device_kind *kind = kind_of(c);   /* a device's option, or none */
			if (kind) {
				if (kind->option(cfg, c, optarg))
					return -1;
				break;
			}
			if (optopt)
				vmm_err("unknown option '-%c' (see --help)", optopt);
			else
				vmm_err("unknown option '%s' (see --help)", argv[optind - 1]);
			return -1;
		}
		}
	}
	if (optind < argc) {
		vmm_err("unexpected argument '%s' (see --help)", argv[optind]);
		return -1;
	}
	if (!cfg->kernel) {
		vmm_err("--kernel FILE is required (see --help)");
		return -1;
	}
	if (cfg->snapshot_out && (cfg->restore || cfg->probe_only)) {
		vmm_err("--snapshot-out boots from scratch: not with %s", cfg->restore ? "--restore" : "--probe");
		return -1;
	}
	if ((cfg->pause_out || cfg->resume) && !cfg->restore) {
		/* a pause saves only what differs from a snapshot */
		vmm_err("%s needs --restore: a paused VM is kept as its difference from a snapshot",
			cfg->resume ? "--resume" : "--pause-out");
		return -1;
	}
	if (cfg->pause_out && !cfg->vsock_uds) {
		vmm_err("--pause-out needs --vsock-uds: the agent is told of the pause over vsock");
		return -1;
	}
	for (const struct vmm_device_kind *const *k = vmm_device_kinds; *k; k++)
		if ((*k)->check && (*k)->check(cfg))
			return -1;
	if (cfg->no_default_cmdline && !cfg->cmdline_extra) {
		vmm_err("--no-default-cmdline needs --cmdline");
		return -1;
	}
	return 0;
}

int vmm_build_cmdline(const struct vmm_config *cfg, const char *devices, char *buf, size_t len)
{
	const char *base = cfg->no_default_cmdline ? "" : VMM_DEFAULT_CMDLINE;
	const char *extra = cfg->cmdline_extra ? cfg->cmdline_extra : "";
	const char *sep1 = (*base && *devices) ? " " : "";
	const char *sep2 = ((*base || *devices) && *extra) ? " " : "";
	int n = snprintf(buf, len, "%s%s%s%s%s", base, sep1, devices, sep2, extra);
	return (n < 0 || (size_t)n >= len) ? -1 : 0;
}
