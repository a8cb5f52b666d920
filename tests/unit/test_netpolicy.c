/* The network policy's decisions (host/run/netpolicy.h): host names
 * normalized, IP literals in every spelling refused as names, rules
 * parsed and written back, matching, the deny set, ceilings. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "netpolicy.h"

static char err[256];

static struct net_rule rule(const char *text, bool addr)
{
	struct net_rule r;
	if (net_rule_parse(text, addr, &r, err, sizeof(err)) < 0)
		fail_msg("%s: %s", text, err);
	return r;
}

static void refused(const char *text, bool addr, const char *why)
{
	struct net_rule r;
	err[0] = '\0';
	assert_int_equal(net_rule_parse(text, addr, &r, err, sizeof(err)), -1);
	if (!strstr(err, why))
		fail_msg("%s: \"%s\" does not say \"%s\"", text, err, why);
	assert_null(strchr(err, '\n'));
}

static void ip(const char *text, uint8_t a[16])
{
	if (!net_ip_literal(text, a))
		fail_msg("%s is not an address", text);
}

static void normalize(void **state)
{
	(void)state;
	char out[NET_HOST_MAX + 1];
	const struct {
		const char *in, *out;
	} ok[] = {
		{ "Example.COM", "example.com" },
		{ "pypi.org.", "pypi.org" },
		{ "b\xc3\xbc" "cher.example", "xn--bcher-kva.example" },   /* bücher */
		{ "B\xc3\x9c" "CHER.example", "xn--bcher-kva.example" },   /* BÜCHER: mapped to lowercase */
		{ "xn--bcher-kva.example", "xn--bcher-kva.example" },
		{ "a-b_c.example", "a-b_c.example" },
		{ "localhost", "localhost" },   /* a name; what it resolves to is judged after */
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		if (net_host_normalize(ok[i].in, out, sizeof(out), err, sizeof(err)) < 0)
			fail_msg("%s: %s", ok[i].in, err);
		assert_string_equal(out, ok[i].out);
	}
	const char *bad[] = {
		"", ".", "a..b", "-a.example", "a-.example", "a b.example", "a/b", "a:b", "*.example",
		"host.123",        /* ends in a number: a URL parser reads an IPv4 address */
		"host.0x1f",
		"\xff\xfe.example", /* not UTF-8 */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (net_host_normalize(bad[i], out, sizeof(out), err, sizeof(err)) == 0)
			fail_msg("\"%s\" was taken as %s", bad[i], out);
	}
	char label[80];
	memset(label, 'a', 64);
	strcpy(label + 64, ".example");
	assert_int_equal(net_host_normalize(label, out, sizeof(out), err, sizeof(err)), -1);   /* a 64-byte label */
	char lng[300] = "";
	for (int i = 0; i < 42; i++)
		strcat(lng, "abcde.");
	strcat(lng, "com");   /* 255 bytes */
	assert_int_equal(net_host_normalize(lng, out, sizeof(out), err, sizeof(err)), -1);
}

static void ip_literals(void **state)
{
	(void)state;
	uint8_t a[16], want[16];
	const char *loopback[] = { "127.0.0.1", "127.1", "0x7f.0.0.1", "0177.0.0.1", "2130706433", "0x7f000001" };
	ip("127.0.0.1", want);
	for (size_t i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++) {
		ip(loopback[i], a);
		assert_memory_equal(a, want, 16);
		char out[NET_HOST_MAX + 1];
		assert_int_equal(net_host_normalize(loopback[i], out, sizeof(out), err, sizeof(err)), -1);
		assert_non_null(strstr(err, "IP address"));
	}
	ip("[::1]", a);
	assert_int_equal(a[15], 1);
	ip("::ffff:169.254.169.254", a);
	assert_string_equal(net_addr_denied(a), "link-local, where cloud metadata lives (169.254.0.0/16)");
	assert_false(net_ip_literal("example.com", NULL));
	assert_false(net_ip_literal("[example.com]", NULL));
	assert_false(net_ip_literal("", NULL));
	refused("127.0.0.1", false, "--allow-net-addr");
	refused("2130706433:443", false, "--allow-net-addr");
	refused("[::1]:443", false, "--allow-net-addr");
}

static void rules(void **state)
{
	(void)state;
	char buf[128];
	const struct {
		const char *in;
		bool addr;
		const char *out;
	} ok[] = {
		{ "pypi.org", false, "pypi.org" },
		{ "PyPI.org.:443", false, "pypi.org:443" },
		{ "*.Example.com", false, "*.example.com" },
		{ "*.example.com:8443", false, "*.example.com:8443" },
		{ "10.1.0.0/16", true, "10.1.0.0/16" },
		{ "10.1.2.3", true, "10.1.2.3/32" },
		{ "10.1.0.0/16:3128", true, "10.1.0.0/16:3128" },
		{ "fd00::/8", true, "fd00::/8" },
		{ "[fd00::/8]:8080", true, "[fd00::/8]:8080" },
		{ "[fd00::1]:80", true, "[fd00::1/128]:80" },
		{ "0.0.0.0/0", true, "0.0.0.0/0" },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct net_rule r = rule(ok[i].in, ok[i].addr);
		net_rule_format(&r, buf, sizeof(buf));
		assert_string_equal(buf, ok[i].out);
		struct net_rule again = rule(buf, ok[i].addr);   /* what is written reads back the same */
		assert_memory_equal(&again, &r, sizeof(r));
	}
	refused("", false, "empty");
	refused("pypi.org:0", false, "1 to 65535");
	refused("pypi.org:65536", false, "1 to 65535");
	refused("pypi.org:", false, "1 to 65535");
	refused("pypi.org:+80", false, "1 to 65535");
	refused("*.", false, "host name");
	refused("**", false, "host name");   /* "*" alone is any host (any_host) */
	refused("a.*.example.com", false, "host name");
	refused("10.1.2.3/16", true, "the range is 10.1.0.0/16");
	refused("10.0.0.0/33", true, "0 to 32");
	refused("fd00::/129", true, "0 to 128");
	refused("10.0.0.0/x", true, "not a number");
	refused("example.com", true, "not an IP address");
	refused("127.1", true, "not an IP address");   /* rules are written plainly */
	refused("[fd00::/8", true, "bracket");
	refused("[fd00::/8]x", true, "bracket");
	refused("[fd00::/8]:99999", true, "1 to 65535");
}

static void matching(void **state)
{
	(void)state;
	struct net_rule r[] = {
		rule("pypi.org", false),
		rule("*.example.com", false),
		rule("api.test:8080", false),
		rule("10.9.0.0/16", true),
		rule("[fd12::/16]:3128", true),
	};
	size_t n = sizeof(r) / sizeof(r[0]);
	assert_true(net_host_allowed(r, n, "pypi.org", 443));
	assert_true(net_host_allowed(r, n, "pypi.org", 80));
	assert_false(net_host_allowed(r, n, "pypi.org", 22));
	assert_false(net_host_allowed(r, n, "files.pypi.org", 443));   /* an exact name is exact */
	assert_true(net_host_allowed(r, n, "a.example.com", 443));
	assert_true(net_host_allowed(r, n, "a.b.example.com", 80));
	assert_false(net_host_allowed(r, n, "example.com", 443));      /* subdomains only */
	assert_false(net_host_allowed(r, n, "badexample.com", 443));
	assert_false(net_host_allowed(r, n, "example.com.evil", 443));
	assert_true(net_host_allowed(r, n, "api.test", 8080));
	assert_false(net_host_allowed(r, n, "api.test", 443));
	uint8_t a[16];
	ip("10.9.200.1", a);
	assert_true(net_addr_allowed(r, n, a, 443));
	assert_false(net_addr_allowed(r, n, a, 8080));
	ip("10.10.0.1", a);
	assert_false(net_addr_allowed(r, n, a, 443));
	ip("fd12:3::1", a);
	assert_true(net_addr_allowed(r, n, a, 3128));
	assert_false(net_addr_allowed(r, n, a, 443));
	ip("::ffff:10.9.0.1", a);   /* the mapped form is the IPv4 address */
	assert_true(net_addr_allowed(r, n, a, 80));
	assert_false(net_addr_allowed(r, 3, a, 80));   /* host rules never allow an address */
}

static void deny_set(void **state)
{
	(void)state;
	const struct {
		const char *addr, *why;   /* why: NULL for a public address */
	} cases[] = {
		{ "0.1.2.3", "this network" },          { "10.200.0.1", "private" },
		{ "100.64.0.1", "shared" },             { "100.127.255.255", "shared" },
		{ "100.128.0.1", NULL },                { "127.0.0.1", "loopback" },
		{ "127.255.0.9", "loopback" },          { "169.254.169.254", "cloud metadata" },
		{ "172.16.0.1", "private" },            { "172.31.255.255", "private" },
		{ "172.32.0.1", NULL },                 { "192.0.0.8", "IETF" },
		{ "192.0.2.10", "documentation" },      { "192.168.1.1", "private" },
		{ "198.18.0.1", "benchmarking" },       { "198.19.255.255", "benchmarking" },
		{ "198.20.0.1", NULL },                 { "198.51.100.7", "documentation" },
		{ "203.0.113.9", "documentation" },     { "224.0.0.1", "multicast" },
		{ "239.255.255.250", "multicast" },     { "240.0.0.1", "reserved" },
		{ "255.255.255.255", "broadcast" },     { "8.8.8.8", NULL },
		{ "93.184.216.34", NULL },              { "::", "unspecified" },
		{ "::1", "loopback" },                  { "::ffff:127.0.0.1", "loopback" },
		{ "::ffff:8.8.8.8", NULL },             { "64:ff9b::a9fe:a9fe", "NAT64" },
		{ "2001::1", "Teredo" },                { "2001:db8::1", "documentation" },
		{ "2002:a9fe:a9fe::1", "6to4" },        { "fc00::1", "unique local" },
		{ "fdff::1", "unique local" },          { "fe80::1", "link-local" },
		{ "febf::1", "link-local" },            { "ff02::1", "multicast" },
		{ "2606:4700::1111", NULL },            { "2001:4860::8888", NULL },
		/* issue 38, finding 6: IPv4-compatible ::/96 is judged as the
		 * IPv4 address inside; the local-use NAT64 prefix, site-local,
		 * discard-only and the cloud host endpoint are refused */
		{ "::127.0.0.1", "loopback" },          { "::169.254.169.254", "cloud metadata" },
		{ "::10.1.2.3", "private" },            { "::0.0.0.2", "this network" },
		{ "::168.63.129.16", "cloud host" },    { "::8.8.8.8", NULL },
		{ "64:ff9b:1::1", "NAT64" },            { "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "NAT64" },
		{ "64:ff9b:1::a9fe:a9fe", "NAT64" },    { "64:ff9b:2::1", NULL },
		{ "fec0::1", "site-local" },            { "feff:ffff::1", "site-local" },
		{ "100::1", "discard-only" },           { "100::ffff:ffff:ffff:ffff", "discard-only" },
		{ "100:0:0:1::", NULL },                { "168.63.129.16", "cloud host" },
		{ "::ffff:168.63.129.16", "cloud host" }, { "168.63.129.15", NULL },
		{ "168.63.129.17", NULL },
	};
	int wrong = 0;   /* every wrong case is named, then the test fails */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t a[16];
		ip(cases[i].addr, a);
		const char *why = net_addr_denied(a);
		if ((!cases[i].why && why) || (cases[i].why && (!why || !strstr(why, cases[i].why)))) {
			print_error("%s: \"%s\", want \"%s\"\n", cases[i].addr, why ? why : "(allowed)",
				    cases[i].why ? cases[i].why : "(allowed)");
			wrong++;
		}
		char text[64];
		net_addr_format(a, text, sizeof(text));
		uint8_t back[16];
		ip(text, back);
		assert_memory_equal(back, a, 16);
	}
	assert_int_equal(wrong, 0);
}

static void ceilings(void **state)
{
	(void)state;
	struct net_rule c[] = {
		rule("*.pypi.org", false),
		rule("pypi.org", false),
		rule("api.test:8080", false),
		rule("10.0.0.0/8", true),
	};
	size_t n = sizeof(c) / sizeof(c[0]);
	const struct {
		const char *rule;
		bool addr, within;
	} cases[] = {
		{ "pypi.org", false, true },          { "files.pypi.org", false, true },
		{ "*.pypi.org", false, true },        { "*.a.pypi.org", false, true },
		{ "files.pypi.org:443", false, true }, { "files.pypi.org:22", false, false },
		{ "*.org", false, false },            { "example.com", false, false },
		{ "api.test:8080", false, true },     { "api.test", false, false },   /* 80 and 443 are more */
		{ "api.test:443", false, false },     { "10.1.0.0/16", true, true },
		{ "10.0.0.0/8:3128", true, false },   { "10.2.0.0/16:443", true, true },
		{ "0.0.0.0/0", true, false },
		{ "11.0.0.0/8", true, false },        { "fd00::/8", true, false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct net_rule r = rule(cases[i].rule, cases[i].addr);
		if (net_rule_within(&r, c, n) != cases[i].within)
			fail_msg("%s within the ceiling: %d, want %d", cases[i].rule, !cases[i].within, cases[i].within);
	}
	struct net_rule r = rule("pypi.org", false);
	assert_false(net_rule_within(&r, NULL, 0));   /* no ceiling lines: nothing */
	/* any host: every name, no address beyond the rules */
	assert_true(net_ceiling_admits(&r, true, NULL, 0));
	struct net_rule a = rule("10.1.0.0/16", true), b = rule("11.0.0.0/8", true);
	assert_false(net_ceiling_admits(&b, true, NULL, 0));
	assert_true(net_ceiling_admits(&a, true, c, n));
	assert_false(net_ceiling_admits(&b, true, c, n));
	assert_false(net_ceiling_admits(&r, false, NULL, 0));
	assert_true(net_ceiling_admits(&r, false, c, n));
}

/* A resolver from a table, counting its calls. */
struct names {
	unsigned calls;
};

static int table_resolve(void *ctx, const char *host, uint8_t addrs[][16], char *e, size_t elen)
{
	static const struct {
		const char *name, *addrs[3];
	} table[] = {
		{ "www.example.com", { "169.254.169.254", "93.184.216.34", "2606:2800:220:1::1" } },
		{ "meta.example.com", { "169.254.169.254" } },
		{ "loop.example.com", { "127.0.0.1", "::1" } },
		{ "mirror.example.com", { "10.9.0.5" } },
		{ "self.example.com", { "198.100.0.7" } },
		{ "mapped.example.com", { "::ffff:10.1.1.1" } },
	};
	struct names *x = ctx;
	x->calls++;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (strcmp(table[i].name, host))
			continue;
		int k = 0;
		for (; k < 3 && table[i].addrs[k]; k++)
			ip(table[i].addrs[k], addrs[k]);
		return k;
	}
	snprintf(e, elen, "no such name");
	return -1;
}

static struct net_decision decide(const struct net_rule *r, size_t n, const char *host, uint16_t port,
				  struct names *x)
{
	uint8_t self[1][16];
	ip("198.100.0.7", self[0]);
	struct net_decision d;
	net_decide(r, n, false, host, port, table_resolve, x, self, 1, &d);
	assert_null(strchr(d.why, '\n'));
	assert_true(d.allowed == !d.why[0]);
	return d;
}

static void decisions(void **state)
{
	(void)state;
	struct net_rule r[] = { rule("*.example.com", false), rule("[2606:2800::/32]:443", true) };
	struct net_rule with_mirror[] = { rule("*.example.com", false), rule("10.9.0.0/16", true),
					  rule("127.0.0.0/8:8080", true) };
	struct names x = { 0 };
	char a[64];

	/* The metadata address first, a public one after: the public one is
	 * the one to dial, the only one. */
	struct net_decision d = decide(r, 2, "WWW.Example.com.", 443, &x);
	assert_true(d.allowed);
	assert_string_equal(d.host, "www.example.com");
	net_addr_format(d.addr, a, sizeof(a));
	assert_string_equal(a, "93.184.216.34");
	/* Names that resolve only to what the deny set holds (rebinding). */
	d = decide(r, 2, "meta.example.com", 443, &x);
	assert_false(d.allowed);
	assert_non_null(strstr(d.why, "169.254.169.254 is link-local"));
	d = decide(r, 2, "loop.example.com", 80, &x);
	assert_non_null(strstr(d.why, "127.0.0.1 is loopback"));
	d = decide(r, 2, "mapped.example.com", 80, &x);
	assert_non_null(strstr(d.why, "10.1.1.1 is private"));
	d = decide(r, 2, "self.example.com", 443, &x);
	assert_non_null(strstr(d.why, "the proxy's own address"));
	d = decide(r, 2, "gone.example.com", 443, &x);
	assert_non_null(strstr(d.why, "does not resolve: no such name"));
	/* An address rule lets a private range through, for its ports. */
	d = decide(r, 2, "mirror.example.com", 80, &x);
	assert_false(d.allowed);
	d = decide(with_mirror, 3, "mirror.example.com", 80, &x);
	assert_true(d.allowed);
	net_addr_format(d.addr, a, sizeof(a));
	assert_string_equal(a, "10.9.0.5");
	/* Not allowed: never resolved at all. */
	unsigned before = x.calls;
	d = decide(r, 2, "example.com", 443, &x);
	assert_string_equal(d.why, "not in the allowlist");
	d = decide(r, 2, "www.example.com", 22, &x);
	assert_string_equal(d.why, "not in the allowlist");
	d = decide(r, 2, "bad name", 443, &x);
	assert_non_null(strstr(d.why, "not a valid host name"));
	/* IP literals: only through an address rule, never resolved. */
	d = decide(r, 2, "93.184.216.34", 443, &x);
	assert_string_equal(d.why, "an IP address, and no address rule allows it");
	d = decide(r, 2, "[2606:2800:220:1::1]", 443, &x);
	assert_true(d.allowed);
	d = decide(r, 2, "[2606:2800:220:1::1]", 80, &x);
	assert_false(d.allowed);
	d = decide(with_mirror, 3, "0x7f.1", 8080, &x);   /* loopback, allowed explicitly */
	assert_true(d.allowed);
	assert_string_equal(d.host, "127.0.0.1");
	d = decide(with_mirror, 3, "2130706433", 80, &x);
	assert_false(d.allowed);
	assert_int_equal(x.calls, before);
}

/* "*": any host name (Judge0's enable_network), on its ports; never an
 * IP literal, every address still judged by the deny set; within a
 * ceiling only of its own kind or a tenant's any. */
static void any_host(void **state)
{
	(void)state;
	struct net_rule any = rule("*", false), any8080 = rule("*:8080", false);
	assert_int_equal(any.kind, NET_RULE_ANY);
	char text[64];
	net_rule_format(&any, text, sizeof(text));
	assert_string_equal(text, "*");
	net_rule_format(&any8080, text, sizeof(text));
	assert_string_equal(text, "*:8080");
	refused("*", true, "not an IP address");
	assert_true(net_host_allowed(&any, 1, "www.example.com", 443));
	assert_true(net_host_allowed(&any, 1, "example.org", 80));
	assert_false(net_host_allowed(&any, 1, "example.org", 22));
	assert_true(net_host_allowed(&any8080, 1, "example.org", 8080));
	struct names x = { 0 };
	struct net_decision d = decide(&any, 1, "www.example.com", 443, &x);
	assert_true(d.allowed);
	d = decide(&any, 1, "meta.example.com", 443, &x);
	assert_non_null(strstr(d.why, "169.254.169.254 is link-local"));
	d = decide(&any, 1, "loop.example.com", 80, &x);
	assert_false(d.allowed);
	d = decide(&any, 1, "93.184.216.34", 443, &x);
	assert_string_equal(d.why, "an IP address, and no address rule allows it");
	/* ceilings */
	struct net_rule named[] = { rule("*.example.com", false), rule("example.com", false) };
	assert_false(net_rule_within(&any, named, 2));
	assert_false(net_ceiling_admits(&any, false, named, 2));
	assert_true(net_ceiling_admits(&any, true, NULL, 0));
	assert_true(net_rule_within(&any, &any, 1));
	assert_false(net_rule_within(&any8080, &any, 1));
	struct net_rule host = rule("pypi.org", false), sub = rule("*.pythonhosted.org", false);
	assert_true(net_rule_within(&host, &any, 1));
	assert_true(net_rule_within(&sub, &any, 1));
	struct net_rule addr = rule("10.0.0.0/8", true);
	assert_false(net_rule_within(&addr, &any, 1));
}

/* Socket addresses to and from the 16-byte form, both families. */
static void socket_addresses(void **state)
{
	(void)state;
	struct sockaddr_in v4 = { .sin_family = AF_INET, .sin_port = htons(80) };
	inet_pton(AF_INET, "192.0.2.7", &v4.sin_addr);
	uint8_t a[16];
	assert_true(net_addr_from_sockaddr((struct sockaddr *)&v4, a));
	assert_true(net_addr_is_v4(a));
	char text[64];
	net_addr_format(a, text, sizeof(text));
	assert_string_equal(text, "192.0.2.7");
	struct sockaddr_storage ss;
	assert_int_equal(net_addr_to_sockaddr(a, 8080, &ss), sizeof(struct sockaddr_in));
	const struct sockaddr_in *back = (const struct sockaddr_in *)&ss;
	assert_int_equal(back->sin_family, AF_INET);
	assert_int_equal(ntohs(back->sin_port), 8080);
	assert_memory_equal(&back->sin_addr, &v4.sin_addr, 4);

	struct sockaddr_in6 v6 = { .sin6_family = AF_INET6 };
	inet_pton(AF_INET6, "2001:db8::5", &v6.sin6_addr);
	assert_true(net_addr_from_sockaddr((struct sockaddr *)&v6, a));
	assert_false(net_addr_is_v4(a));
	assert_int_equal(net_addr_to_sockaddr(a, 443, &ss), sizeof(struct sockaddr_in6));
	const struct sockaddr_in6 *back6 = (const struct sockaddr_in6 *)&ss;
	assert_int_equal(back6->sin6_family, AF_INET6);
	assert_int_equal(ntohs(back6->sin6_port), 443);
	assert_memory_equal(&back6->sin6_addr, &v6.sin6_addr, 16);

	struct sockaddr un = { .sa_family = AF_UNIX };
	memset(a, 0x5a, sizeof(a));
	assert_false(net_addr_from_sockaddr(&un, a));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(normalize), cmocka_unit_test(ip_literals), cmocka_unit_test(rules),
		cmocka_unit_test(matching),  cmocka_unit_test(deny_set),    cmocka_unit_test(ceilings),
		cmocka_unit_test(decisions), cmocka_unit_test(socket_addresses), cmocka_unit_test(any_host),
	};
	return cmocka_run_group_tests_name("netpolicy", tests, NULL, NULL);
}
