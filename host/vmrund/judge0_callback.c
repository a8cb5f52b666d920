/* Where a Judge0 callback may go (judge0.h): the URL's parts, and what
 * the tenant's callback rules admit before anything is resolved. The
 * call itself is judge0_runs.c's, which judges each resolved address
 * again (net_decide) and dials only the one it chose. */
#include "judge0.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"

int judge0_url_parse(const char *url, struct judge0_url *u, char *err, size_t errlen)
{
	size_t n = strlen(url);
	memset(u, 0, sizeof(*u));
	if (n > JUDGE0_URL_MAX)
		return errf(err, errlen, "longer than %d bytes", JUDGE0_URL_MAX);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)url[i] <= ' ' || url[i] == 0x7f)
			return errf(err, errlen, "a space or control character in the URL");
	const char *p;
	if (!strncmp(url, "http://", 7)) {
		p = url + 7;
	} else if (!strncmp(url, "https://", 8)) {
		p = url + 8;
		u->https = true;
	} else {
		return errf(err, errlen, "not an http:// or https:// URL");
	}
	size_t alen = strcspn(p, "/?#");
	const char *host = p, *port = NULL;
	size_t hlen;
	if (memchr(p, '@', alen))
		return errf(err, errlen, "user information in the URL");
	if (*p == '[') {
		const char *close = memchr(p, ']', alen);
		if (!close)
			return errf(err, errlen, "an IPv6 address without its ']'");
		host = p + 1;
		hlen = (size_t)(close - host);
		if (close + 1 < p + alen) {
			if (close[1] != ':')
				return errf(err, errlen, "text after the IPv6 address's ']'");
			port = close + 2;
		}
	} else {
		const char *colon = memchr(p, ':', alen);
		hlen = colon ? (size_t)(colon - p) : alen;
		port = colon ? colon + 1 : NULL;
	}
	if (!hlen || hlen > NET_HOST_MAX)
		return errf(err, errlen, "no host, or one too long");
	memcpy(u->host, host, hlen);
	u->host[hlen] = '\0';
	u->port = u->https ? 443 : 80;
	if (port) {
		size_t plen = (size_t)(p + alen - port);
		unsigned long v = 0;
		if (!plen || plen > 5 || strspn(port, "0123456789") < plen)
			return errf(err, errlen, "a port of 1 to 65535 digits' worth");
		for (size_t i = 0; i < plen; i++)
			v = v * 10 + (unsigned long)(port[i] - '0');
		if (!v || v > 65535)
			return errf(err, errlen, "a port from 1 to 65535");
		u->port = (uint16_t)v;
	}
	return 0;
}

const char *judge0_callback_refusal(const struct tenant_reach *r, const struct judge0_url *u, char *why,
				    size_t cap)
{
	uint8_t addr[16];
	char host[NET_HOST_MAX + 1], err[160];
	if (!r || (!r->any && !r->n))
		return "setting callback is not allowed";
	if (net_ip_literal(u->host, addr)) {
		if (net_addr_allowed(r->rules, r->n, addr, u->port))
			return NULL;
		const char *denied = net_addr_denied(addr);
		snprintf(why, cap, "%s: %s%s", u->host, denied ? denied : "an IP address",
			 denied ? ", and no callback_addr rule of this tenant names it"
				: ", and no callback_addr rule of this tenant allows it");
		return why;
	}
	if (net_host_normalize(u->host, host, sizeof(host), err, sizeof(err))) {
		snprintf(why, cap, "%s", err);
		return why;
	}
	if (r->any || net_host_allowed(r->rules, r->n, host, u->port))
		return NULL;
	snprintf(why, cap, "%s port %u: not a destination this tenant's callbacks may reach", host, u->port);
	return why;
}
