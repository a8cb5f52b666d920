/* The proxy's check before connect() (dial_guard.h). */
#include "dial_guard.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "netpolicy.h"

/* A range the guard refuses, as netpolicy.h keeps addresses. */
struct guarded {
	uint8_t addr[16];
	unsigned prefix;
	const char *what;
};

#define V4(a, b, bits, what) { { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b }, 96 + (bits), what }

static const struct guarded guarded[] = {
	V4(127, 0, 8, "loopback"),
	V4(0, 0, 8, "this host (0.0.0.0/8)"),
	V4(169, 254, 16, "link-local"),
	{ { [15] = 1 }, 128, "loopback" },
	{ { 0 }, 128, "this host (::)" },
	{ { 0xfe, 0x80 }, 10, "link-local" },
};

static bool in_range(const uint8_t a[16], const struct guarded *g)
{
	unsigned whole = g->prefix / 8, rest = g->prefix % 8;
	if (memcmp(a, g->addr, whole))
		return false;
	return !rest || ((a[whole] ^ g->addr[whole]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

/* ::a.b.c.d (not :: or ::1) as ::ffff:a.b.c.d, in place. */
static void compat_to_mapped(uint8_t a[16])
{
	static const uint8_t zero[12];
	if (memcmp(a, zero, sizeof(zero)) || !(a[12] | a[13] | a[14] || a[15] > 1))
		return;
	a[10] = a[11] = 0xff;
}

const char *dial_guard_refusal(const void *ctx, const struct sockaddr *sa, socklen_t len, char *why, size_t cap)
{
	const struct dial_guard *g = ctx;
	uint8_t a[16];
	bool whole = (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) ||
		     (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6));
	if (!whole || !net_addr_from_sockaddr(sa, a)) {
		snprintf(why, cap, "refused at connect: not an IPv4 or IPv6 address (family %d)", sa->sa_family);
		return why;
	}
	compat_to_mapped(a);
	char text[64];
	net_addr_format(a, text, sizeof(text));
	for (size_t i = 0; i < sizeof(guarded) / sizeof(guarded[0]); i++) {
		if (in_range(a, &guarded[i])) {
			snprintf(why, cap, "refused at connect: %s is %s", text, guarded[i].what);
			return why;
		}
	}
	for (size_t i = 0; i < g->nself; i++) {
		uint8_t own[16];
		memcpy(own, g->self[i], 16);
		compat_to_mapped(own);
		if (!memcmp(a, own, 16)) {
			snprintf(why, cap, "refused at connect: %s is the host's own address", text);
			return why;
		}
	}
	return NULL;
}
