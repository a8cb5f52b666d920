/* The proxy's resolver: c-ares on the host's DNS servers (read from
 * /etc/resolv.conf once, before the proxy jails itself: it has no files
 * afterwards), DNS only (no hosts file), one name at a time with a
 * deadline. A name resolves once per request; the proxy dials only an
 * address it got here and checked (host/run/netpolicy.h). */
#ifndef VMRUN_PROXY_RESOLVE_H
#define VMRUN_PROXY_RESOLVE_H

#include <stddef.h>
#include <stdint.h>

#include "netpolicy.h"

struct resolver {
	void *channel;        /* ares_channel, NULL before init */
	int timeout_ms;       /* one name's whole lookup */
};

/* Read the DNS configuration, or use servers ("IP[:PORT],...") when not
 * empty, and get ready. Returns 0, or -1 with why. */
int resolver_init(struct resolver *r, int timeout_ms, const char *servers, char *err, size_t errlen);

/* A net_resolve_fn: ctx is the struct resolver. Blocks for at most its
 * timeout. Returns how many addresses (IPv4 as ::ffff:a.b.c.d), or -1
 * with why. */
int resolver_lookup(void *ctx, const char *host, uint8_t addrs[][16], char *err, size_t errlen);

/* Release; safe after a failed init and twice. */
void resolver_free(struct resolver *r);

#endif
