/* libFuzzer harness for the network policy's parsers (host/run/netpolicy.c):
 * --allow-net, --allow-net-addr and policy lines are client input, and
 * host names come from the guest through the proxy. Each input is read as
 * a host rule, an address rule and a host name. Beyond the sanitizers it
 * checks what parsing promises: a refusal is one line; a rule written
 * back (net_rule_format) parses to the same rule and is allowed by a
 * ceiling of itself; a normalized name is valid again and unchanged by a
 * second normalization; an IPv4-compatible address is refused exactly
 * when its IPv4 address is. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netpolicy.h"

static void check_rule(const char *text, bool addr)
{
	char err[256] = "";
	struct net_rule r, again;
	if (net_rule_parse(text, addr, &r, err, sizeof(err)) < 0) {
		if (!err[0] || strchr(err, '\n'))
			abort();
		return;
	}
	char buf[512];
	net_rule_format(&r, buf, sizeof(buf));
	if (net_rule_parse(buf, addr, &again, err, sizeof(err)) < 0 || memcmp(&r, &again, sizeof(r)))
		abort();
	if (!net_rule_within(&r, &r, 1))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	char text[1100];
	if (len >= sizeof(text))
		return 0;
	memcpy(text, data, len);
	text[len] = '\0';
	check_rule(text, false);
	check_rule(text, true);
	char host[NET_HOST_MAX + 1], twice[NET_HOST_MAX + 1], err[256] = "";
	if (net_host_normalize(text, host, sizeof(host), err, sizeof(err)) == 0) {
		if (net_host_normalize(host, twice, sizeof(twice), err, sizeof(err)) < 0 || strcmp(host, twice))
			abort();
	} else if (!err[0] || strchr(err, '\n')) {
		abort();
	}
	uint8_t a[16];
	if (net_ip_literal(text, a) && net_addr_is_v4(a)) {
		/* IPv4-compatible ::a.b.c.d is judged as a.b.c.d: refused
		 * exactly when the mapped form is (:: and ::1 are refused
		 * for their own reasons, as are 0.0.0.0 and 0.0.0.1) */
		uint8_t compat[16] = { 0 };
		memcpy(compat + 12, a + 12, 4);
		if (!net_addr_denied(compat) != !net_addr_denied(a))
			abort();
	} else if (net_ip_literal(text, a)) {
		(void)net_addr_denied(a);
	}
	return 0;
}
