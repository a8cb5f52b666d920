/* Tenants and their API keys, from a root-owned file (the config's keys,
 * /etc/vmrun/keys by default), that nobody but root may write:
 *
 *   # a tenant, then the keys that act as it
 *   tenant alice concurrent=4 queued=32 rate=10 burst=20 max_memory_mib=2048 max_disk_mib=1024
 *   tenant bob net=*.pypi.org,files.pythonhosted.org:443 net_addr=10.1.2.0/24:3128
 *   key 6f1c...e2 alice
 *
 * concurrent: runs at once; queued: runs waiting beyond those; rate and
 * burst: requests per second, as a token bucket (every request that
 * carries the key counts, reads too; one bucket for all the nodes that
 * share a PostgreSQL store, store.h's rate). max_memory_mib and
 * max_disk_mib: the most guest memory and workspace one run of the tenant
 * may ask for (0, the default: no ceiling of the tenant's own; the node's
 * size and the system policy's still bound it). A key is 16 to 128
 * characters of [A-Za-z0-9._-]; the file names every tenant before its
 * keys, and only the keys' SHA-256 digests are kept once it is read.
 *
 * Sandboxes (docs/sandboxes.md): sandboxes, how many the tenant may have
 * open at once (starting, running or stopping; 4 by default, 0: none);
 * sandbox_memory_mib and sandbox_disk_mib, the guest memory and
 * workspaces of them all together (0: no ceiling of the tenant's own);
 * max_sandbox_timeout_s, the longest life one may be given (3600 by
 * default); max_pause_ttl_s, the longest one may stay paused (a week by
 * default: its saved VM is disk on the node); max_checkpoints, how many
 * checkpoints each sandbox keeps (16 by default), and max_checkpoint_mib
 * how much disk they may take together (16384 by default). max_memory_mib and max_disk_mib bound each sandbox as they
 * bound each run.
 *
 * The network ceiling: what a run's "network" (run_spec.h) may allow.
 *   net=none                  the default: the tenant's runs get no network
 *   net=any                   any host name (the proxy dials public
 *                             addresses only)
 *   net=RULE,RULE,...         host rules as vmrun's --allow-net takes them
 *                             ("*.pypi.org" admits its subdomains, and
 *                             rules under them; no port: 80 and 443)
 *   net_addr=CIDR[:PORT],...  address ranges, as --allow-net-addr (default
 *                             none; "none" says so)
 * At most TENANT_NET_RULES_MAX of each. The system policy's ceiling
 * (host/run/policy.h) still bounds every run: a tenant's can only narrow it.
 *
 * Where vmrund itself may call for the tenant (Judge0's callback_url: a
 * PUT from vmrund, not from a guest), in the same words:
 *   callback=none|any|RULE,...     host names (default none: no callbacks)
 *   callback_addr=CIDR[:PORT],...  ranges the deny set refuses (loopback,
 *                                  private, metadata) that may be called
 *                                  all the same */
#ifndef VMRUND_TENANTS_H
#define VMRUND_TENANTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "netpolicy.h"

struct run_spec;

#define TENANT_NAME_MAX 64
#define TENANT_KEY_MAX  128
#define TENANTS_MAX     1024
#define TENANT_KEYS_MAX 4096
#define TENANT_NET_RULES_MAX 16   /* net= rules, and net_addr= rules, each */
#define TENANT_DIGEST_LEN 32      /* SHA-256 */
#define TENANT_DEFAULT_SANDBOXES 4
#define TENANT_DEFAULT_SANDBOX_TIMEOUT_S 3600
#define TENANT_DEFAULT_PAUSE_TTL_S (7u * 86400)
#define TENANT_DEFAULT_CHECKPOINTS 16
#define TENANT_DEFAULT_CHECKPOINT_MIB 16384

/* A set of destinations: any host name, or these rules (host and suffix
 * rules; address rules for ranges the deny set would refuse). */
struct tenant_reach {
	bool any;
	struct net_rule *rules;       /* malloc'd, room for both kinds; NULL: none */
	unsigned n;
};

struct tenant {
	char name[TENANT_NAME_MAX];
	unsigned concurrent, queued;
	double rate, burst;
	uint64_t max_memory_mib, max_disk_mib;   /* per run; 0: none of the tenant's own */
	unsigned sandboxes;           /* open at once */
	uint64_t sandbox_memory_mib, sandbox_disk_mib;   /* all open ones together; 0: none of the tenant's own */
	unsigned max_sandbox_timeout_s;
	unsigned max_pause_ttl_s;
	unsigned max_checkpoints;     /* kept by each sandbox */
	uint64_t max_checkpoint_mib;  /* the disk each sandbox's checkpoints take together */
	struct tenant_reach net;      /* net= and net_addr=: what its runs' proxies may dial */
	struct tenant_reach callback; /* callback= and callback_addr=: what vmrund may call for it */
};

/* A key as its digest: the same length whatever the key's, so that
 * comparing one takes the same time for every stored key. */
struct tenant_key {
	unsigned char digest[TENANT_DIGEST_LEN];
	unsigned tenant;              /* index into tenants */
};

struct tenants {
	struct tenant *t;
	size_t n;
	struct tenant_key *keys;
	size_t nkeys;
};

/* Parse the file's text (len bytes) into ts (zeroed first). Returns 0, or
 * -1 with "LINE: reason" in err and ts empty. Pure. */
int tenants_parse(struct tenants *ts, const char *text, size_t len, char *err, size_t errlen);

/* Read path, refusing a file that is not a regular file owned by root and
 * writable by root alone (like root's policy file), and parse it. */
int tenants_load(struct tenants *ts, const char *path, char *err, size_t errlen);

/* The tenant a key acts as: its index, or -1. Compares the key's
 * SHA-256 digest with every stored one in full (CRYPTO_memcmp), so the
 * time depends on neither where a wrong key first differs nor any stored
 * key's length. */
int tenants_by_key(const struct tenants *ts, const char *key);

/* The tenant with this name: its index, or -1. */
int tenants_by_name(const struct tenants *ts, const char *name);

/* Whether every network rule of rq is within t's ceiling: 0, or -1 with
 * the first that is not in err ("network.allow[0]: beyond tenant alice's
 * network ceiling"). A request without rules always passes. Pure. */
int tenant_net_check(const struct tenant *t, const struct run_spec *rq, char *err, size_t errlen);

/* The rules of a run that may reach every host name the tenant's reach
 * holds (Judge0's enable_network, E2B's internet access): one
 * NET_RULE_ANY for net=any, else its host and suffix rules, never its
 * address ranges (those pass the deny set, for runs that name them).
 * fn(ctx, rule) for each, in order, until it returns non-zero: that
 * value, or 0. Pure. */
int tenant_host_rules(const struct tenant_reach *reach, int (*fn)(void *ctx, const struct net_rule *r), void *ctx);

/* Whether a run of memory_mib guest memory and a workspace of disk_mib
 * (both as the run will get them, defaults applied) is within t's
 * ceilings: 0, or -1 with the reason in err ("limits.memory_mib: 3000 MiB
 * is over tenant alice's ceiling of 2048 MiB (max_memory_mib)"). Pure. */
int tenant_size_check(const struct tenant *t, uint64_t memory_mib, uint64_t disk_mib, char *err, size_t errlen);

/* Free and zero; safe twice. */
void tenants_free(struct tenants *ts);

#endif
