/* A run's network policy: which destinations the per-run host proxy may
 * dial (DESIGN: no NIC in any guest; an allowlist checked by the proxy).
 * Pure decisions, shared by the CLI, the policy file, vmrund and the
 * proxy, with no I/O:
 *
 *   --allow-net HOST[:PORT]        a host name; "*.example.com" matches
 *                                  its subdomains only; "*" any host name
 *                                  (never an IP literal, and every address
 *                                  still judged by the deny set); no
 *                                  port: 80 and 443
 *   --allow-net-addr CIDR[:PORT]   an address range that the deny set
 *                                  would refuse (a platform's internal
 *                                  mirror); IPv6 in brackets with a port:
 *                                  "[fd00::/8]:8080"
 *
 * Host names are normalized before any comparison: lowercase, one
 * trailing dot dropped, IDNA 2008 converted to punycode (libidn2), and
 * checked as letters, digits and hyphens in labels of 1-63 bytes. An IP
 * literal is never a host name, in any of the spellings a resolver would
 * take for one ("127.1", "0x7f.0.0.1", "2130706433"). Addresses are
 * kept as 16 bytes, IPv4 as ::ffff:a.b.c.d, so one table judges both. */
#ifndef VMRUN_NETPOLICY_H
#define VMRUN_NETPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define NET_HOST_MAX 253   /* a DNS name's length in text, without the root's dot */

enum net_rule_kind {
	NET_RULE_HOST,     /* exactly host */
	NET_RULE_SUFFIX,   /* any name that ends in "." host, not host itself */
	NET_RULE_ADDR,     /* any address in addr/prefix */
	NET_RULE_ANY,      /* any host name ("*"): Judge0's enable_network, a tenant's net=any */
};

struct net_rule {
	enum net_rule_kind kind;
	char host[NET_HOST_MAX + 1];   /* normalized; for a suffix, without "*." */
	uint8_t addr[16];              /* NET_RULE_ADDR: the range's start, masked */
	unsigned prefix;               /* of 128 bits (an IPv4 range: 96 + its own) */
	uint16_t port;                 /* 0: the default ports, 80 and 443 */
};

/* Normalize a host name (see above) into out (NET_HOST_MAX + 1 bytes at
 * least): 0, or -1 with why in err ("an IP address is not a host name",
 * "... is not a valid host name"). */
int net_host_normalize(const char *in, char *out, size_t cap, char *err, size_t errlen);

/* Whether text is an IP address in any spelling a resolver accepts
 * (dotted, short, hex or octal IPv4; IPv6, bracketed or not). When it
 * is and addr is non-NULL, the address into addr. */
bool net_ip_literal(const char *text, uint8_t addr[16]);

/* Parse "--allow-net" (addr false) or "--allow-net-addr" (addr true)
 * text into *out: 0, or -1 with a one-line reason in err. */
int net_rule_parse(const char *text, bool addr, struct net_rule *out, char *err, size_t errlen);

/* net_rule_parse for input that spells an address rule otherwise than
 * vmrun's option: an IP address given as a host rule is refused with
 * "allow it with ADDR_WORD" ("network.allow_addr" for vmrund's API). */
int net_rule_parse_as(const char *text, bool addr, const char *addr_word, struct net_rule *out, char *err,
		      size_t errlen);

/* The rule as the user would write it again (normalized), into buf. */
void net_rule_format(const struct net_rule *r, char *buf, size_t cap);

/* Whether port is one the rule's port allows. */
bool net_port_ok(const struct net_rule *r, uint16_t port);

/* Whether the normalized host name and port match a host or suffix rule
 * of rules[n]. */
bool net_host_allowed(const struct net_rule *rules, size_t n, const char *host, uint16_t port);

/* Whether addr and port fall in an address rule of rules[n]. */
bool net_addr_allowed(const struct net_rule *rules, size_t n, const uint8_t addr[16], uint16_t port);

/* The deny set: why addr may not be dialed ("loopback", "private",
 * "link-local (cloud metadata)", ...), or NULL when it is a public
 * address. An IPv4-mapped (::ffff:a.b.c.d) or IPv4-compatible
 * (::a.b.c.d) address is judged as the IPv4 inside; NAT64 prefixes are
 * refused whole. */
const char *net_addr_denied(const uint8_t addr[16]);

/* Whether every destination r allows is allowed by one rule of
 * ceiling[n] too: how a policy file or a tenant bounds what a run asks. */
bool net_rule_within(const struct net_rule *r, const struct net_rule *ceiling, size_t n);

/* Whether a ceiling admits r: any_host (every host name, never an address
 * rule) or a rule of ceiling[n] that r is within. The one test behind the
 * policy's ceiling, a lower policy's own, and a tenant's. */
bool net_ceiling_admits(const struct net_rule *r, bool any_host, const struct net_rule *ceiling, size_t n);

/* Whether addr is an IPv4 address (::ffff:a.b.c.d). */
bool net_addr_is_v4(const uint8_t addr[16]);

/* A socket address (AF_INET or AF_INET6) as 16 bytes into addr: false
 * for another family. */
bool net_addr_from_sockaddr(const struct sockaddr *sa, uint8_t addr[16]);

/* addr and port as the socket address to dial, into *ss: its length. */
socklen_t net_addr_to_sockaddr(const uint8_t addr[16], uint16_t port, struct sockaddr_storage *ss);

/* An address as text ("192.0.2.1", "2001:db8::1"), into buf. */
void net_addr_format(const uint8_t addr[16], char *buf, size_t cap);

#define NET_ADDRS_MAX 16   /* addresses of one name that are looked at */

/* Resolve host (normalized) into addrs[NET_ADDRS_MAX], in the resolver's
 * order: how many, or -1 with why in err. The proxy's is getaddrinfo; a
 * test's is a table. */
typedef int (*net_resolve_fn)(void *ctx, const char *host, uint8_t addrs[][16], char *err, size_t errlen);

/* One destination judged: what the audit and the result's network
 * array record. */
struct net_decision {
	char host[NET_HOST_MAX + 1];   /* normalized; or the literal as asked */
	uint16_t port;
	bool allowed;
	uint8_t addr[16];              /* allowed: the one address to dial */
	char why[160];                 /* denied: the reason, one line */
};

/* Judge a request for host_text (as the guest sent it) and port: an IP
 * literal only through an address rule; else the normalized name must
 * match a host rule (any_host: any name, as a tenant's "any" ceiling
 * has it), and of its addresses (resolved once, here) the
 * first that an address rule allows, or that is outside the deny set and
 * not one of self[nself] (the proxy's own), is the one to dial, and no
 * other. Pure but for resolve. */
void net_decide(const struct net_rule *rules, size_t n, bool any_host, const char *host_text, uint16_t port,
		net_resolve_fn resolve, void *ctx, const uint8_t (*self)[16], size_t nself, struct net_decision *out);

#endif
