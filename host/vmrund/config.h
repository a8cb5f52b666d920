/* vmrund's configuration: a file of "key = value" lines (# comments),
 * every key optional, documented in docs/vmrund.md and in
 * packaging/vmrund.conf. Parsed by a pure function, so every key and every
 * error is unit tested without a daemon. */
#ifndef VMRUND_CONFIG_H
#define VMRUND_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "e2b.h"
#include "judge0.h"

#define VMRUND_CONFIG_PATH "/etc/vmrun/vmrund.conf"

struct vmrund_config {
	char listen_host[64];         /* listen = HOST:PORT; the host a numeric IPv4 or IPv6 address */
	unsigned listen_port;
	char listen_unix[108];        /* listen = unix:PATH: a Unix socket instead; "" none */
	char state_db[PATH_MAX];      /* the SQLite store */
	char run_dir[PATH_MAX];       /* one directory per running run, artifacts kept after */
	char keys[PATH_MAX];          /* the API keys: root-owned (host/vmrund/tenants.h) */
	char audit_log[PATH_MAX];     /* JSON lines; "" for none */
	char worker[PATH_MAX];        /* the per-run worker; "" for vmrund-worker beside vmrund */
	char sandbox_supervisor[PATH_MAX];   /* a sandbox's supervisor; "" for vmrund-sandbox beside vmrund */
	/* where the other nodes of a cluster reach this one, to forward a
	 * sandbox's calls to it: an http:// URL; "" for http://LISTEN when
	 * listen is a TCP address other than 0.0.0.0 or ::, else none */
	char advertise[256];
	char guest_dir[PATH_MAX];     /* kernel and images; "" for ../guest beside vmrund */
	char policy[PATH_MAX];        /* root's policy file (ceilings) for vmrund and its workers; "" for none */
	unsigned slots;               /* runs at once; 0: from the host's CPUs and memory */
	unsigned queue_max;           /* queued runs, all tenants together */
	size_t max_body;              /* bytes of a request body */
	unsigned max_connections;
	unsigned max_connections_per_address;   /* from one client address at once; 0: no cap */
	unsigned connection_timeout_s;   /* idle time before a connection is dropped */
	unsigned request_head_timeout_s; /* the whole time a request's head may take to arrive */
	unsigned max_streams_per_tenant; /* output streams and waits (?wait, Piston execute) open at once */
	unsigned wait_max_s;          /* the longest ?wait= and Piston execute */
	unsigned retention_s;         /* kept artifacts are removed this long after their run ended */
	unsigned run_retention_s;     /* whole runs (row, output, result) likewise; 0: kept forever */
	char anonymous_tenant[64];    /* requests with no key act as this tenant; "" refuses them */
	bool anonymous_any;           /* anonymous_from = any: not only from loopback */
	unsigned slot_memory_mib;     /* host memory one slot counts (slots = 0) */
	/* many machines: store = a postgresql:// URI shared by every node
	 * ("" for the SQLite file state_db); node names this machine in it */
	char store[1024];
	char node[64];                /* "" for the host's name */
	unsigned lease_s;             /* a silent node's runs are taken back after this */
	unsigned blob_max_mib;        /* output and artifacts kept in the store per run */
	/* admission by size (issue 38): what this node has for its runs'
	 * guest memory and workspaces together; 0: from the machine at start
	 * (config_node_size) */
	unsigned node_memory_mib;
	unsigned node_disk_mib;
	bool snapshot_per_tenant;     /* snapshot_scope = tenant: no snapshot page shared across tenants */
	/* a directory every node of a cluster mounts (NFS): sandboxes keep
	 * their start and checkpoints there, and a pause parks the VM there
	 * for any node to resume (docs/sandboxes.md); "" none: a sandbox
	 * lives and pauses on the node that made it */
	char snapshot_dir[PATH_MAX];
	/* Judge0's API under this prefix ("/judge0"; "" none), and its
	 * configuration variables (judge0_* keys, Judge0's names) */
	char judge0_prefix[JUDGE0_PREFIX_MAX];
	struct judge0_config judge0;
	/* E2B's control API under this prefix ("/e2b"; "" none) */
	char e2b_prefix[E2B_PREFIX_MAX];
	/* E2B's sandbox domain ("" none): a request for host PORT-ID.DOMAIN
	 * is a call on sandbox ID's envd, at the root (the SDK's own routing
	 * when E2B_DOMAIN is given and E2B_SANDBOX_URL is not) */
	char e2b_domain[E2B_DOMAIN_MAX];
};

/* The defaults, before any file. */
void config_defaults(struct vmrund_config *c);

/* Apply the text of a config file (len bytes) over c. Returns 0, or -1
 * with "LINE: reason" in err and c unspecified. Pure. */
int config_parse(struct vmrund_config *c, const char *text, size_t len, char *err, size_t errlen);

/* Read path and config_parse it; a missing file is an error unless
 * optional. Returns 0 or -1 with "PATH:LINE: reason". */
int config_load(struct vmrund_config *c, const char *path, bool optional, char *err, size_t errlen);

/* The tenant of vmrund --local (no keys file, a Unix socket): every
 * request is its. */
#define CONFIG_LOCAL_TENANT "local"
#define CONFIG_LOCAL_TENANTS \
	"tenant " CONFIG_LOCAL_TENANT " concurrent=4 queued=64 rate=1000 burst=1000 sandboxes=16 max_sandbox_timeout_s=86400\n"

/* vmrund --local (pure): one user's service in dir (its socket
 * dir/vmrund.sock, its store and runs beside it), no keys file and no
 * audit log; every request acts as CONFIG_LOCAL_TENANT, the socket's
 * mode (0600) deciding who may ask. Applied over c (a --config file may
 * come after it). */
void config_local(struct vmrund_config *c, const char *dir);

/* The address this node publishes for its peers (pure): advertise, or
 * http://LISTEN for a TCP address that is not a wildcard, else "" (none:
 * the others cannot forward to it). */
void config_advertise(const struct vmrund_config *c, char *out, size_t len);

/* Slots from the host's CPUs and memory (MiB) when c->slots is 0: one per
 * CPU, and no more than the memory holds at slot_memory_mib each, at
 * least 1. Pure. */
unsigned config_slots(const struct vmrund_config *c, unsigned cpus, uint64_t mem_mib);

/* The node's size for admission into *memory_mib and *disk_mib: the
 * config's node_memory_mib and node_disk_mib, or where 0, from the
 * machine: its memory (MiB) less a reserve for the host and the VMs' own
 * overhead (an eighth, at least 1 GiB; at least 256 MiB left), and 90% of
 * the free space of run_dir's file system (at least 64 MiB). Pure. */
void config_node_size(const struct vmrund_config *c, uint64_t mem_total_mib, uint64_t fs_free_mib,
		      uint64_t *memory_mib, uint64_t *disk_mib);
/* How often the loop looks for kept files and runs past their retention:
 * every minute, or every quarter of a short run_retention_s (at least a
 * second), so that a run goes no later than a quarter past it. Pure. */
int64_t config_retention_every_ms(const struct vmrund_config *c);

#endif
