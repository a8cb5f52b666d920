/* The proxy's last check before every connect(), on the exact socket
 * address about to be dialed, after and apart from net_decide: an
 * address rule cannot open these, and a memory bug in what runs before
 * the dial (http-parser, OpenSSL, c-ares, the policy's own code) that
 * gets another address to connect() still meets this check.
 *
 *   loopback     127.0.0.0/8, ::1: vmrund's API, the host's services
 *   unspecified  0.0.0.0/8, ::: connect() to them reaches the host itself
 *   link-local   169.254.0.0/16 (cloud metadata), fe80::/10
 *   own          every address of the host's interfaces when the proxy
 *                started (read before its jail closes netlink off)
 *
 * IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) forms are
 * judged as the IPv4 address. Pure. */
#ifndef VMRUN_PROXY_DIAL_GUARD_H
#define VMRUN_PROXY_DIAL_GUARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct dial_guard {
	const uint8_t (*self)[16];   /* the host's own addresses, as netpolicy.h keeps them */
	size_t nself;
};

/* Why sa (len bytes; ctx a struct dial_guard) must not be dialed
 * (a reason naming the address, into why[cap]), or NULL to dial it;
 * anything but a whole AF_INET or AF_INET6 address is refused. The
 * shape of proxy_dial_check_fn (server.h). */
const char *dial_guard_refusal(const void *ctx, const struct sockaddr *sa, socklen_t len, char *why, size_t cap);

#endif
