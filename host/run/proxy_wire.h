/* The contract between a run (host/run/run.c) and its network proxy
 * (vmrun-proxy, host/proxy/): written once, compiled into both.
 *
 * A run that allows network starts one vmrun-proxy with
 *   fd PROXY_FD_LISTEN   the listening Unix socket that vmm connects to
 *                        for each guest connection to vsock port
 *                        PROTO_NET_VSOCK_PORT ("<uds>_3128")
 *   fd PROXY_FD_CONTROL  one end of a SOCK_SEQPACKET socketpair
 *   fd PROXY_FD_CA       the caller's CA file, for secret headers' TLS
 *                        (only with the "ca-fd" record)
 * and argv[1] the empty directory it makes its root. Over the control
 * socket the run first sends the configuration, one text line per
 * record ("rule-host example.com:443", ..., "end"), which the proxy
 * reads before it jails itself. When the run ends, the run shuts its
 * side down; the proxy then stops every tunnel and answers with one
 * struct proxy_audit record per decision, in order, then one struct
 * proxy_audit_end, and exits. The proxy processes guest input, so the
 * run treats what it sends back as untrusted (proxy_audit_valid). */
#ifndef VMRUN_PROXY_WIRE_H
#define VMRUN_PROXY_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "netpolicy.h"

#define PROXY_FD_LISTEN  3
#define PROXY_FD_CONTROL 4
#define PROXY_PROGRAM    "vmrun-proxy"   /* next to vmm */
#define PROXY_RULES_MAX  64
#define PROXY_AUDIT_MAX  256             /* decisions recorded; the rest are counted */
#define PROXY_LINE_MAX   8192            /* one configuration record */
#define PROXY_FD_CA      5               /* the caller's CA file, when given */
#define PROXY_SECRETS_MAX 8
#define PROXY_SECRET_MAX 4096            /* a secret header's value, bytes */
#define PROXY_SYSTEM_CAS "/etc/ssl/certs/ca-certificates.crt"

/* The proxy's caps; the run's policy bounds them. */
struct proxy_caps {
	unsigned tunnels;          /* tunnels at once; one more is answered 503 */
	uint64_t max_up, max_down; /* bytes a tunnel carries from the guest, to it */
	int64_t idle_ms;           /* a tunnel in which nothing moved this long ends */
	int64_t connect_ms;        /* reading the request head, and dialing */
};

#define PROXY_DEFAULT_TUNNELS    16u
#define PROXY_DEFAULT_MAX_UP     (64ull << 20)
#define PROXY_DEFAULT_MAX_DOWN   (1024ull << 20)
#define PROXY_DEFAULT_IDLE_MS    30000
#define PROXY_DEFAULT_CONNECT_MS 10000

/* A header the proxy adds to plain HTTP requests for host, which it
 * sends on over TLS to host:443 (the guest never holds the value). */
struct proxy_secret {
	char host[NET_HOST_MAX + 1];   /* normalized */
	char name[64];                 /* an HTTP token */
	char value[PROXY_SECRET_MAX + 1];
};

struct proxy_config {
	struct net_rule rules[PROXY_RULES_MAX];
	unsigned nrules;
	struct proxy_caps caps;
	struct proxy_secret secrets[PROXY_SECRETS_MAX];
	unsigned nsecrets;
	bool ca_fd;                /* verify against the CA file on PROXY_FD_CA, not the system's */
	char dns[128];             /* DNS servers, "IP[:PORT],..." (c-ares's form); "": /etc/resolv.conf's */
	bool set_ids;              /* the proxy is root: become uid/gid */
	uid_t uid;
	gid_t gid;
};

/* A configuration with no rules and the default caps. */
void proxy_config_init(struct proxy_config *c);

/* Apply one record to c: 1 for "end", 0 for a record taken, -1 with a
 * one-line reason in err (an unknown record, a bad number, a bad rule,
 * too many rules). */
int proxy_config_line(struct proxy_config *c, const char *line, char *err, size_t errlen);

/* Parse "HOST:HEADER=VALUE" (the value already read from its file) into
 * s: 0, or -1 with why. HOST is normalized; HEADER must be a token and
 * not one the proxy itself sets (Host, Connection, ...); VALUE printable
 * ASCII, no CR or LF, at most PROXY_SECRET_MAX bytes. */
int proxy_secret_parse(const char *host_header, const char *value, struct proxy_secret *s, char *err, size_t errlen);

/* Write c as records, "end" last: each into buf and passed to emit,
 * which returns 0 or -1 (then so does this). */
int proxy_config_emit(const struct proxy_config *c, int (*emit)(void *ctx, const char *line), void *ctx);

/* One decision, as the proxy recorded it. Strings NUL-terminated,
 * printable; addr only when has_addr. */
struct proxy_audit {
	char host[NET_HOST_MAX + 1];  /* normalized, or the literal or text as asked */
	char method[16];              /* "CONNECT", "GET", ...; "" when the head did not parse */
	char why[160];                /* denied: why; allowed: "" or how the dial failed */
	char end[24];                 /* how the tunnel ended (relay_end_name); "" when none ran */
	uint8_t addr[16];             /* the address dialed (or refused) */
	uint16_t port;
	uint8_t allowed, has_addr;
	uint32_t zero;
	uint64_t up, down;            /* bytes from the guest, to it */
	int64_t ms;                   /* the tunnel's life, from accept */
};

/* The last record: how many decisions were not recorded. */
struct proxy_audit_end {
	uint32_t magic;               /* PROXY_AUDIT_END_MAGIC */
	uint32_t dropped;
};
#define PROXY_AUDIT_END_MAGIC 0x646e6521u

_Static_assert(sizeof(struct proxy_audit) != sizeof(struct proxy_audit_end), "records told apart by length");

/* Whether a record from the proxy holds what the contract says: every
 * string terminated and printable, flags 0 or 1. */
bool proxy_audit_valid(const struct proxy_audit *a);

#endif
