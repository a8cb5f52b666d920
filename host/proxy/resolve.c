/* The proxy's c-ares resolver (resolve.h). */
#include "resolve.h"

#include <ares.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "clock.h"
#include "errmsg.h"

/* One lookup's answer, filled by the callback. */
struct lookup {
	bool done;
	int status;
	uint8_t (*addrs)[16];
	int n;
};

int resolver_init(struct resolver *r, int timeout_ms, const char *servers, char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r));
	r->timeout_ms = timeout_ms;
	int st = ares_library_init(ARES_LIB_INIT_ALL);
	if (st != ARES_SUCCESS)
		return errf(err, errlen, "proxy: c-ares: %s", ares_strerror(st));
	struct ares_options o = { 0 };
	/* DNS only: the hosts file would need a file system the jailed
	 * proxy does not have, and its names are the host's, not the
	 * guest's to reach. */
	o.lookups = (char *)"b";
	o.timeout = timeout_ms / 2 > 0 ? timeout_ms / 2 : 1;
	o.tries = 2;
	ares_channel ch;
	st = ares_init_options(&ch, &o, ARES_OPT_LOOKUPS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
	if (st != ARES_SUCCESS) {
		ares_library_cleanup();
		return errf(err, errlen, "proxy: c-ares: %s", ares_strerror(st));
	}
	r->channel = ch;
	if (*servers && (st = ares_set_servers_ports_csv(ch, servers)) != ARES_SUCCESS) {
		resolver_free(r);
		return errf(err, errlen, "proxy: DNS servers %.100s: %s", servers, ares_strerror(st));
	}
	return 0;
}

static void on_answer(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
	(void)timeouts;
	struct lookup *l = arg;
	l->done = true;
	l->status = status;
	for (struct ares_addrinfo_node *n = res ? res->nodes : NULL; n && l->n < NET_ADDRS_MAX; n = n->ai_next) {
		if (!net_addr_from_sockaddr(n->ai_addr, l->addrs[l->n]))
			continue;
		l->n++;
	}
	if (res)
		ares_freeaddrinfo(res);
}

/* Drive the channel until the lookup is done or deadline passes. */
static void wait_answer(ares_channel ch, struct lookup *l, int64_t deadline)
{
	while (!l->done) {
		int64_t left = deadline - clock_mono_ms();
		if (left <= 0) {
			ares_cancel(ch);   /* the callback runs, with ARES_ECANCELLED */
			return;
		}
		ares_socket_t socks[ARES_GETSOCK_MAXNUM];
		int bits = ares_getsock(ch, socks, ARES_GETSOCK_MAXNUM);
		struct pollfd p[ARES_GETSOCK_MAXNUM];
		int n = 0;
		for (int i = 0; i < ARES_GETSOCK_MAXNUM; i++) {
			short ev = (ARES_GETSOCK_READABLE(bits, i) ? POLLIN : 0) |
				   (ARES_GETSOCK_WRITABLE(bits, i) ? POLLOUT : 0);
			if (ev)
				p[n++] = (struct pollfd){ socks[i], ev, 0 };
		}
		struct timeval max = { left / 1000, (left % 1000) * 1000 }, tv;
		struct timeval *t = ares_timeout(ch, &max, &tv);
		int ms = (int)(t->tv_sec * 1000 + t->tv_usec / 1000);
		if (poll(p, (nfds_t)n, ms > 0 ? ms : 1) <= 0) {
			ares_process_fd(ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);   /* timeouts and retries */
			continue;
		}
		for (int i = 0; i < n; i++)
			ares_process_fd(ch, p[i].revents & (POLLIN | POLLERR | POLLHUP) ? p[i].fd : ARES_SOCKET_BAD,
					p[i].revents & POLLOUT ? p[i].fd : ARES_SOCKET_BAD);
	}
}

int resolver_lookup(void *ctx, const char *host, uint8_t addrs[][16], char *err, size_t errlen)
{
	struct resolver *r = ctx;
	struct lookup l = { .addrs = addrs };
	/* No sorting: RFC 6724 sorting probes each address with a connect();
	 * the resolver's order is kept, and the policy picks. */
	struct ares_addrinfo_hints h = { .ai_flags = ARES_AI_NOSORT, .ai_family = AF_UNSPEC };
	ares_getaddrinfo(r->channel, host, NULL, &h, on_answer, &l);
	wait_answer(r->channel, &l, clock_mono_ms() + r->timeout_ms);
	if (l.status == ARES_ECANCELLED)
		return errf(err, errlen, "no answer within %d ms", r->timeout_ms);
	if (l.status == ARES_ENOTFOUND || l.status == ARES_ENODATA)
		return 0;
	if (l.status != ARES_SUCCESS)
		return errf(err, errlen, "%s", ares_strerror(l.status));
	return l.n;
}

void resolver_free(struct resolver *r)
{
	if (!r->channel)
		return;
	ares_destroy(r->channel);
	ares_library_cleanup();
	r->channel = NULL;
}
