/* What a run may ask for: the program allowlist and the ceilings on its
 * limits. Built in by default (the allowlist is the root image's program
 * manifest), or read from a --policy file:
 *
 *   # comment
 *   allow /usr/bin/python3        one program (absolute path in the guest);
 *                                 any "allow" line replaces the manifest
 *   max_timeout 300               seconds
 *   max_memory 4096               MiB
 *   max_cpus 8
 *   max_disk 4096                 MiB
 *   max_output 67108864           bytes per stream
 *   nproc 256                     the command's process limit
 *   nofile 1024                   its open-file limit
 *   fsize 1073741824              its largest file, bytes
 *   artifacts_max_bytes 67108864
 *   artifacts_max_files 1000
 *   artifacts_max_depth 16
 *   cpu_quota 150                 vmm's CPU time in % of one CPU (none by default)
 *
 * Network (none unless a run asks, and then only through its proxy):
 *   net_ceiling HOST[:PORT]       what --allow-net may name; the first such
 *                                 line replaces the default, any host name
 *                                 (public addresses only); "none": nothing
 *   net_ceiling_addr CIDR[:PORT]  what --allow-net-addr may name (by default
 *                                 nothing: private ranges need root's word)
 *   allow_net HOST[:PORT]         allowed to every run, as --allow-net
 *   allow_net_addr CIDR[:PORT]    as --allow-net-addr
 *   net_tunnels 16                the proxy's tunnels at once
 *   net_max_up 67108864           bytes a tunnel carries from the guest
 *   net_max_down 1073741824       bytes a tunnel carries to it
 *   net_idle 30                   seconds a tunnel may sit idle
 *   secret_header HOST:HEADER=@FILE  as --secret-header, FILE read with
 *                                 vmrun's own rights when the run starts
 *                                 (root's policy only: a platform's secret
 *                                 its callers may not read)
 *   secret_ca FILE                the CA file for those (root's only)
 *   net_resolver IP[:PORT]        the proxy's DNS server (repeatable; by
 *                                 default the host's resolv.conf); root's
 *                                 policy only, since it decides what every
 *                                 allowed name means
 *
 * A line is at most 511 bytes; a longer one, or one holding a NUL byte,
 * fails the load with its line number (it is never split or cut short).
 * Requests beyond a ceiling are refused before any VM starts. Root's own
 * file (/etc/vmrun/policy) may raise ceilings; a caller's --policy may
 * only lower them (enum policy_trust). */
#ifndef VMRUN_POLICY_H
#define VMRUN_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "netpolicy.h"
#include "proto.h"

/* Root's policy file, which vmrun, vmrund and its workers read unless
 * told another (vmrund's "policy" setting). */
#define POLICY_SYSTEM_FILE "/etc/vmrun/policy"

#define POLICY_PATH_MAX 256
#define POLICY_NET_RULES_MAX 64   /* ceiling rules, and allow rules, each */
#define POLICY_SECRETS_MAX 8

struct policy {
	char (*manifest)[POLICY_PATH_MAX];   /* every program the image offers */
	unsigned nmanifest;
	char (*allow)[POLICY_PATH_MAX];      /* what a run may start */
	unsigned nallow;
	uint64_t max_timeout_s, max_memory_mib, max_cpus, max_disk_mib, max_output;
	uint64_t nproc, nofile, fsize;
	uint64_t artifacts_max_bytes, artifacts_max_files, artifacts_max_depth;
	uint64_t cpu_quota_pct;              /* vmm's CPU quota in % of one CPU; 0: none */
	struct {
		bool any_host;                   /* the ceiling admits every host name */
		struct net_rule *ceiling;        /* and these */
		unsigned nceiling;
		struct net_rule *allow;          /* granted to every run */
		unsigned nallow;
		uint64_t tunnels, max_up, max_down, idle_s;
		char resolver[128];              /* "IP[:PORT],..."; "": the host's */
		char (*secret)[POLICY_PATH_MAX]; /* "HOST:HEADER=@FILE" */
		unsigned nsecret;
		char secret_ca[POLICY_PATH_MAX];
	} net;
};

/* Load the built-in policy, with the program manifest (one absolute path
 * per line, read from manifest; name for messages) as its allowlist
 * (manifest NULL: none, for a policy read for its ceilings only).
 * Returns 0, or -1 with a one-line reason in err. */
int policy_load(struct policy *p, FILE *manifest, const char *manifest_name, char *err, size_t errlen);

/* How far a policy file may go. */
enum policy_trust {
	POLICY_MAY_RAISE,     /* root's: any ceiling, any program of the image */
	POLICY_LOWER_ONLY,    /* anyone else's: ceilings only lowered, a CPU quota
			       * only added or lowered, the allowlist only narrowed */
};

/* Apply a policy file (read from f; name for messages) on top of p.
 * Returns 0, or -1 with a one-line reason naming the line in err. */
int policy_apply(struct policy *p, FILE *f, const char *name, enum policy_trust trust, char *err, size_t errlen);

/* Whether the policy's network ceiling admits rule r. */
bool policy_net_admits(const struct policy *p, const struct net_rule *r);

/* Free what policy_load allocated. */
void policy_free(struct policy *p);

enum policy_verdict {
	POLICY_ALLOWED = 0,
	POLICY_DENIED,       /* exists in the image, not allowed (or a path we cannot vouch for) */
	POLICY_NOT_FOUND,    /* no such program in the image */
};

/* Resolve prog as the agent will (a name with '/' as given, else the first
 * of PATH's directories whose manifest entry matches) and judge it.
 * *resolved gets the path when there is one. */
enum policy_verdict policy_check_program(const struct policy *p, const char *prog, char *resolved, size_t len);

#endif
