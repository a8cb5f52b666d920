/* The network policy's decisions (netpolicy.h). */
#include "netpolicy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <idn2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"

#define TEXT_MAX 1024   /* what any rule or name may be before normalizing */

/* Text from a caller or a guest, for a message (errmsg_printable): at
 * most max bytes, by value so that it can stand in errf's arguments. */
struct shown {
	char s[68];
};

static struct shown show(const char *text, size_t max)
{
	struct shown v;
	errmsg_printable(v.s, max < sizeof(v.s) ? max + 1 : sizeof(v.s), text);
	return v;
}

static const uint8_t mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

bool net_addr_is_v4(const uint8_t a[16])
{
	return !memcmp(a, mapped_prefix, sizeof(mapped_prefix));
}

static void map_v4(const struct in_addr *in, uint8_t a[16])
{
	memcpy(a, mapped_prefix, sizeof(mapped_prefix));
	memcpy(a + 12, &in->s_addr, 4);
}

bool net_addr_from_sockaddr(const struct sockaddr *sa, uint8_t a[16])
{
	if (sa->sa_family == AF_INET)
		map_v4(&((const struct sockaddr_in *)(const void *)sa)->sin_addr, a);
	else if (sa->sa_family == AF_INET6)
		memcpy(a, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
	else
		return false;
	return true;
}

socklen_t net_addr_to_sockaddr(const uint8_t a[16], uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (net_addr_is_v4(a)) {
		struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
		v4->sin_family = AF_INET;
		v4->sin_port = htons(port);
		memcpy(&v4->sin_addr, a + 12, 4);
		return sizeof(*v4);
	}
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	v6->sin6_family = AF_INET6;
	v6->sin6_port = htons(port);
	memcpy(&v6->sin6_addr, a, 16);
	return sizeof(*v6);
}

/* Whether a and b agree on their first bits bits. */
static bool same_prefix(const uint8_t a[16], const uint8_t b[16], unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;
	if (memcmp(a, b, whole))
		return false;
	if (!rest)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (a[whole] & mask) == (b[whole] & mask);
}

bool net_ip_literal(const char *text, uint8_t addr[16])
{
	char buf[64];
	size_t n = strlen(text);
	if (n >= 2 && text[0] == '[' && text[n - 1] == ']') {
		text++;
		n -= 2;
	}
	if (n == 0 || n >= sizeof(buf))
		return false;
	memcpy(buf, text, n);
	buf[n] = '\0';
	uint8_t tmp[16];
	uint8_t *out = addr ? addr : tmp;
	if (inet_pton(AF_INET6, buf, out) == 1)
		return true;
	/* inet_aton, not inet_pton: it takes "127.1", "0x7f.1" and
	 * "2130706433" as the resolver does, and each is an address. */
	struct in_addr in;
	if (inet_aton(buf, &in)) {
		map_v4(&in, out);
		return true;
	}
	return false;
}

/* Whether a label is a number (decimal, or 0x hex): a name that ends in
 * one reads as an IPv4 address to URL parsers, so it is not a name. */
static bool numeric_label(const char *s, size_t n)
{
	size_t i = 0;
	if (n >= 2 && s[0] == '0' && s[1] == 'x') {
		for (i = 2; i < n && isxdigit((unsigned char)s[i]); i++)
			;
		return i == n;
	}
	for (; i < n && isdigit((unsigned char)s[i]); i++)
		;
	return i == n;
}

/* Letters, digits, '-' and '_' in labels of 1-63, none starting or ending
 * with '-', at most NET_HOST_MAX in all, the last not a number. */
static bool valid_name(const char *s)
{
	size_t total = strlen(s);
	if (total == 0 || total > NET_HOST_MAX)
		return false;
	const char *label = s;
	for (;;) {
		size_t n = strcspn(label, ".");
		if (n == 0 || n > 63 || label[0] == '-' || label[n - 1] == '-')
			return false;
		for (size_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)label[i];
			if (!(islower(c) || isdigit(c) || c == '-' || c == '_'))
				return false;
		}
		if (!label[n])
			return !numeric_label(label, n);
		label += n + 1;
	}
}

int net_host_normalize(const char *in, char *out, size_t cap, char *err, size_t errlen)
{
	char low[TEXT_MAX];
	size_t n = strlen(in);
	if (n == 0)
		return errf(err, errlen, "an empty host name");
	if (n >= sizeof(low))
		return errf(err, errlen, "a host name of %zu bytes is too long", n);
	bool ascii = true;
	for (size_t i = 0; i <= n; i++) {
		unsigned char c = (unsigned char)in[i];
		ascii &= c < 0x80;
		low[i] = (char)(c < 0x80 ? tolower(c) : c);
	}
	if (n > 1 && low[n - 1] == '.')
		low[--n] = '\0';
	if (net_ip_literal(low, NULL))
		return errf(err, errlen, "%s is an IP address, not a host name", show(low, 64).s);
	char *idn = NULL;
	const char *name = low;
	if (!ascii) {
		int rc = idn2_lookup_u8((const uint8_t *)low, (uint8_t **)&idn, IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL);
		if (rc != IDN2_OK)
			return errf(err, errlen, "%s is not a valid international host name: %s", show(low, 64).s,
				    idn2_strerror(rc));
		name = idn;
	}
	int rc = 0;
	if (!valid_name(name))
		rc = errf(err, errlen, "\"%s\" is not a valid host name", show(name, 64).s);
	else if (strlen(name) >= cap)
		rc = errf(err, errlen, "the host name %s... is too long", show(name, 64).s);
	else
		memcpy(out, name, strlen(name) + 1);
	idn2_free(idn);
	return rc;
}

/* The port after colon (NULL: none, *port 0), the colon cut off the
 * caller's copy of the text. 0, or -1. */
static int split_port(char *colon, uint16_t *port, char *err, size_t errlen)
{
	*port = 0;
	if (!colon)
		return 0;
	*colon = '\0';
	const char *p = colon + 1;
	char *end;
	unsigned long v = strtoul(p, &end, 10);
	if (!*p || *end || !isdigit((unsigned char)*p) || v == 0 || v > 65535)
		return errf(err, errlen, "port \"%s\" is not 1 to 65535", show(p, 16).s);
	*port = (uint16_t)v;
	return 0;
}

static int parse_host_rule(char *text, const char *addr_word, struct net_rule *out, char *err, size_t errlen)
{
	if (split_port(strrchr(text, ':'), &out->port, err, errlen) < 0)
		return -1;
	const char *name = text;
	out->kind = NET_RULE_HOST;
	if (!strcmp(text, "*")) {
		out->kind = NET_RULE_ANY;
		return 0;
	}
	if (!strncmp(text, "*.", 2)) {
		out->kind = NET_RULE_SUFFIX;
		name += 2;
	}
	if (net_ip_literal(name, NULL))
		return errf(err, errlen, "%s is an IP address: allow it with %s", show(name, 64).s, addr_word);
	return net_host_normalize(name, out->host, sizeof(out->host), err, errlen);
}

static int parse_addr_rule(char *text, struct net_rule *out, char *err, size_t errlen)
{
	char *range = text;
	out->kind = NET_RULE_ADDR;
	if (text[0] == '[') {
		char *close = strchr(text, ']');
		if (!close || (close[1] && close[1] != ':'))
			return errf(err, errlen, "\"%s\": a bracket that does not close, or junk after it", show(text, 64).s);
		*close = '\0';
		range = text + 1;
		if (split_port(close[1] ? close + 1 : NULL, &out->port, err, errlen) < 0)
			return -1;
	} else {
		char *colon = strchr(text, ':');
		/* One colon: IPv4 and a port. More: IPv6, whose port needs brackets. */
		if (colon && !strchr(colon + 1, ':') && split_port(colon, &out->port, err, errlen) < 0)
			return -1;
	}
	char *slash = strchr(range, '/');
	long bits = -1;
	if (slash) {
		*slash = '\0';
		char *end;
		bits = strtol(slash + 1, &end, 10);
		if (!slash[1] || *end || !isdigit((unsigned char)slash[1]))
			return errf(err, errlen, "prefix length \"%s\" is not a number", show(slash + 1, 8).s);
	}
	struct in_addr in;
	if (inet_pton(AF_INET, range, &in) == 1) {
		if (bits > 32)
			return errf(err, errlen, "an IPv4 prefix is 0 to 32, not %ld", bits);
		map_v4(&in, out->addr);
		out->prefix = 96 + (unsigned)(bits < 0 ? 32 : bits);
	} else if (inet_pton(AF_INET6, range, out->addr) == 1) {
		if (bits > 128)
			return errf(err, errlen, "an IPv6 prefix is 0 to 128, not %ld", bits);
		out->prefix = (unsigned)(bits < 0 ? 128 : bits);
	} else {
		return errf(err, errlen, "\"%s\" is not an IP address (a.b.c.d or IPv6, with /PREFIX)", show(range, 64).s);
	}
	uint8_t masked[16] = { 0 };
	memcpy(masked, out->addr, out->prefix / 8);
	if (out->prefix % 8)
		masked[out->prefix / 8] = out->addr[out->prefix / 8] & (uint8_t)(0xff << (8 - out->prefix % 8));
	if (memcmp(masked, out->addr, 16)) {
		char want[64];
		struct net_rule m = *out;
		memcpy(m.addr, masked, 16);
		m.port = 0;
		net_rule_format(&m, want, sizeof(want));
		return errf(err, errlen, "%s/%ld has bits set past its prefix; the range is %s", show(range, 64).s, bits, want);
	}
	return 0;
}

int net_rule_parse(const char *text, bool addr, struct net_rule *out, char *err, size_t errlen)
{
	return net_rule_parse_as(text, addr, "--allow-net-addr", out, err, errlen);
}

int net_rule_parse_as(const char *text, bool addr, const char *addr_word, struct net_rule *out, char *err,
		      size_t errlen)
{
	char buf[TEXT_MAX];
	memset(out, 0, sizeof(*out));
	size_t n = strlen(text);
	if (n == 0)
		return errf(err, errlen, "an empty network rule");
	if (n >= sizeof(buf))
		return errf(err, errlen, "a network rule of %zu bytes is too long", n);
	memcpy(buf, text, n + 1);
	return addr ? parse_addr_rule(buf, out, err, errlen) : parse_host_rule(buf, addr_word, out, err, errlen);
}

void net_addr_format(const uint8_t addr[16], char *buf, size_t cap)
{
	char text[INET6_ADDRSTRLEN];
	if (net_addr_is_v4(addr))
		inet_ntop(AF_INET, addr + 12, text, sizeof(text));
	else
		inet_ntop(AF_INET6, addr, text, sizeof(text));
	snprintf(buf, cap, "%s", text);
}

void net_rule_format(const struct net_rule *r, char *buf, size_t cap)
{
	char port[8] = "";
	if (r->port)
		snprintf(port, sizeof(port), ":%u", (unsigned)r->port);
	if (r->kind != NET_RULE_ADDR) {
		snprintf(buf, cap, "%s%s%s", r->kind == NET_RULE_SUFFIX ? "*." : r->kind == NET_RULE_ANY ? "*" : "",
			 r->host, port);
		return;
	}
	char a[INET6_ADDRSTRLEN];
	net_addr_format(r->addr, a, sizeof(a));
	bool v4 = net_addr_is_v4(r->addr) && r->prefix >= 96;
	unsigned bits = v4 ? r->prefix - 96 : r->prefix;
	if (!v4 && r->port)
		snprintf(buf, cap, "[%s/%u]%s", a, bits, port);
	else
		snprintf(buf, cap, "%s/%u%s", a, bits, port);
}

bool net_port_ok(const struct net_rule *r, uint16_t port)
{
	return r->port ? r->port == port : port == 80 || port == 443;
}

/* Whether name is a subdomain of suffix ("a.b.example.com" of
 * "example.com"), not suffix itself. */
static bool under(const char *name, const char *suffix)
{
	size_t n = strlen(name), s = strlen(suffix);
	return n > s + 1 && name[n - s - 1] == '.' && !strcmp(name + n - s, suffix);
}

bool net_host_allowed(const struct net_rule *rules, size_t n, const char *host, uint16_t port)
{
	for (size_t i = 0; i < n; i++) {
		const struct net_rule *r = &rules[i];
		bool match = (r->kind == NET_RULE_HOST && !strcmp(host, r->host)) ||
			     (r->kind == NET_RULE_SUFFIX && under(host, r->host)) || r->kind == NET_RULE_ANY;
		if (match && net_port_ok(r, port))
			return true;
	}
	return false;
}

bool net_addr_allowed(const struct net_rule *rules, size_t n, const uint8_t addr[16], uint16_t port)
{
	for (size_t i = 0; i < n; i++)
		if (rules[i].kind == NET_RULE_ADDR && same_prefix(addr, rules[i].addr, rules[i].prefix) &&
		    net_port_ok(&rules[i], port))
			return true;
	return false;
}

/* The deny set, first match wins; IPv4 ranges as mapped addresses. */
struct denied {
	uint8_t addr[16];
	unsigned prefix;
	const char *why;
};

#define V4(a, b, c, d, bits, why) { { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d }, 96 + (bits), why }

static const struct denied deny_set[] = {
	V4(255, 255, 255, 255, 32, "broadcast (255.255.255.255)"),
	V4(0, 0, 0, 0, 8, "this network (0.0.0.0/8)"),
	V4(10, 0, 0, 0, 8, "private (10.0.0.0/8)"),
	V4(100, 64, 0, 0, 10, "shared address space (100.64.0.0/10)"),
	V4(127, 0, 0, 0, 8, "loopback (127.0.0.0/8)"),
	V4(169, 254, 0, 0, 16, "link-local, where cloud metadata lives (169.254.0.0/16)"),
	V4(172, 16, 0, 0, 12, "private (172.16.0.0/12)"),
	V4(192, 0, 0, 0, 24, "IETF protocol assignments (192.0.0.0/24)"),
	V4(192, 0, 2, 0, 24, "documentation (192.0.2.0/24)"),
	V4(192, 168, 0, 0, 16, "private (192.168.0.0/16)"),
	V4(198, 18, 0, 0, 15, "benchmarking (198.18.0.0/15)"),
	V4(198, 51, 100, 0, 24, "documentation (198.51.100.0/24)"),
	V4(203, 0, 113, 0, 24, "documentation (203.0.113.0/24)"),
	V4(224, 0, 0, 0, 4, "multicast (224.0.0.0/4)"),
	V4(240, 0, 0, 0, 4, "reserved (240.0.0.0/4)"),
	V4(168, 63, 129, 16, 32, "a cloud host endpoint (168.63.129.16)"),
	{ { 0 }, 128, "unspecified (::)" },
	{ { [15] = 1 }, 128, "loopback (::1)" },
	/* NAT64 is refused whole, not judged by the IPv4 address inside: the
	 * translator is the network's, and what it reaches (its own
	 * loopback, the operator's private ranges) is not ours to know. The
	 * local-use prefix is more so: its operator picks where in the
	 * address the IPv4 part sits (RFC 6052: after bit 32 to 96), so
	 * there is no one IPv4 address to judge. */
	{ { 0x00, 0x64, 0xff, 0x9b }, 96, "NAT64 (64:ff9b::/96)" },
	{ { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48, "local-use NAT64 (64:ff9b:1::/48)" },
	{ { 0x01 }, 64, "discard-only (100::/64)" },
	{ { 0x20, 0x01, 0x0d, 0xb8 }, 32, "documentation (2001:db8::/32)" },
	{ { 0x20, 0x01 }, 32, "Teredo (2001::/32)" },
	{ { 0x20, 0x02 }, 16, "6to4 (2002::/16)" },
	{ { 0xfc }, 7, "unique local (fc00::/7)" },
	{ { 0xfe, 0x80 }, 10, "link-local (fe80::/10)" },
	{ { 0xfe, 0xc0 }, 10, "site-local, private as fc00::/7 is (fec0::/10)" },
	{ { 0xff }, 8, "multicast (ff00::/8)" },
};

static const char *deny_lookup(const uint8_t addr[16])
{
	for (size_t i = 0; i < sizeof(deny_set) / sizeof(deny_set[0]); i++)
		if (same_prefix(addr, deny_set[i].addr, deny_set[i].prefix))
			return deny_set[i].why;
	return NULL;
}

/* Whether addr is IPv4-compatible (::a.b.c.d, ::/96; deprecated, but a
 * host with a SIT tunnel still sends it to a.b.c.d over IPv4), not ::
 * or ::1, which have meanings of their own. */
static bool v4_compatible(const uint8_t addr[16])
{
	static const uint8_t zero[12];
	return !memcmp(addr, zero, sizeof(zero)) && (addr[12] | addr[13] | addr[14] || addr[15] > 1);
}

const char *net_addr_denied(const uint8_t addr[16])
{
	if (v4_compatible(addr)) {
		uint8_t mapped[16];
		memcpy(mapped, mapped_prefix, sizeof(mapped_prefix));
		memcpy(mapped + 12, addr + 12, 4);
		return deny_lookup(mapped);
	}
	return deny_lookup(addr);
}

/* Whether every port r allows, c allows too. */
static bool ports_within(const struct net_rule *r, const struct net_rule *c)
{
	return r->port ? net_port_ok(c, r->port) : !c->port;
}

bool net_rule_within(const struct net_rule *r, const struct net_rule *ceiling, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct net_rule *c = &ceiling[i];
		if (!ports_within(r, c))
			continue;
		bool names;
		switch (r->kind) {
		case NET_RULE_HOST:
			names = (c->kind == NET_RULE_HOST && !strcmp(r->host, c->host)) ||
				(c->kind == NET_RULE_SUFFIX && under(r->host, c->host)) || c->kind == NET_RULE_ANY;
			break;
		case NET_RULE_SUFFIX:
			names = (c->kind == NET_RULE_SUFFIX && (!strcmp(r->host, c->host) || under(r->host, c->host))) ||
				c->kind == NET_RULE_ANY;
			break;
		case NET_RULE_ANY:
			names = c->kind == NET_RULE_ANY;
			break;
		default:
			names = c->kind == NET_RULE_ADDR && c->prefix <= r->prefix &&
				same_prefix(r->addr, c->addr, c->prefix);
			break;
		}
		if (names)
			return true;
	}
	return false;
}

bool net_ceiling_admits(const struct net_rule *r, bool any_host, const struct net_rule *ceiling, size_t n)
{
	return (any_host && r->kind != NET_RULE_ADDR) || net_rule_within(r, ceiling, n);
}

/* Why addr may not be dialed for port under rules, or NULL: an address
 * rule lets a denied range through, never the proxy's own addresses. */
static const char *addr_refusal(const struct net_rule *rules, size_t n, const uint8_t addr[16], uint16_t port,
				const uint8_t (*self)[16], size_t nself)
{
	const char *denied = net_addr_allowed(rules, n, addr, port) ? NULL : net_addr_denied(addr);
	if (denied)
		return denied;   /* the deny set's reason says more than "own" */
	for (size_t i = 0; i < nself; i++)
		if (!memcmp(addr, self[i], 16))
			return "the proxy's own address";
	return NULL;
}

void net_decide(const struct net_rule *rules, size_t n, bool any_host, const char *host_text, uint16_t port,
		net_resolve_fn resolve, void *ctx, const uint8_t (*self)[16], size_t nself, struct net_decision *out)
{
	memset(out, 0, sizeof(*out));
	out->port = port;
	uint8_t addrs[NET_ADDRS_MAX][16];
	char why[128];
	if (net_ip_literal(host_text, addrs[0])) {
		net_addr_format(addrs[0], out->host, sizeof(out->host));
		const char *refusal = net_addr_allowed(rules, n, addrs[0], port)
					      ? addr_refusal(rules, n, addrs[0], port, self, nself)
					      : "an IP address, and no address rule allows it";
		if (refusal) {
			snprintf(out->why, sizeof(out->why), "%s", refusal);
			return;
		}
		memcpy(out->addr, addrs[0], 16);
		out->allowed = true;
		return;
	}
	if (net_host_normalize(host_text, out->host, sizeof(out->host), why, sizeof(why)) < 0) {
		snprintf(out->host, sizeof(out->host), "%s", show(host_text, 64).s);
		snprintf(out->why, sizeof(out->why), "%s", why);
		return;
	}
	if (!any_host && !net_host_allowed(rules, n, out->host, port)) {
		snprintf(out->why, sizeof(out->why), "not in the allowlist");
		return;
	}
	int k = resolve(ctx, out->host, addrs, why, sizeof(why));
	if (k <= 0) {
		snprintf(out->why, sizeof(out->why), "does not resolve: %s", k < 0 ? show(why, 100).s : "no address");
		return;
	}
	if (k > NET_ADDRS_MAX)
		k = NET_ADDRS_MAX;
	const char *first = NULL;
	int first_at = 0;
	for (int i = 0; i < k; i++) {
		const char *refusal = addr_refusal(rules, n, addrs[i], port, self, nself);
		if (!refusal) {
			memcpy(out->addr, addrs[i], 16);
			out->allowed = true;
			return;
		}
		if (!first) {
			first = refusal;
			first_at = i;
		}
	}
	char a[INET6_ADDRSTRLEN];
	net_addr_format(addrs[first_at], a, sizeof(a));
	snprintf(out->why, sizeof(out->why), "every address is refused: %s is %s", a, first);
}
