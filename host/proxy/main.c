/* vmrun-proxy: one run's egress proxy (DESIGN: network by policy).
 * Started by the run (host/run/run_net.c) with the contract of
 * host/run/proxy_wire.h: read the configuration, learn the DNS servers and
 * the host's own addresses, jail itself (sandbox.h), serve the guest's
 * connections until the run says stop, send the audit, exit.
 * Usage: vmrun-proxy EMPTY-DIR (fds 3 and 4 as proxy_wire.h says). */
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dial_guard.h"
#include "proxy_wire.h"
#include "resolve.h"
#include "sandbox.h"
#include "server.h"
#include "tls_relay.h"

#define SELF_MAX 256   /* the host's own addresses kept; more are not read */
#define RESOLVE_TIMEOUT_MS 5000

/* Everything the program holds. */
struct proxy_main {
	struct proxy_config cfg;
	struct proxy_server srv;
	uint8_t self[SELF_MAX][16];
};

/* The program's one formatter: "vmrun-proxy: " and the line, to stderr
 * (a pipe the run reads), which the run reports when the proxy fails. */
static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	char line[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "vmrun-proxy: %s\n", line);
	return 1;
}

/* The configuration records, up to "end". */
static int read_config(int fd, struct proxy_config *c, char *err, size_t errlen)
{
	proxy_config_init(c);
	for (;;) {
		char line[PROXY_LINE_MAX + 1];
		ssize_t n = recv(fd, line, PROXY_LINE_MAX, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(err, errlen, "configuration: %s", n < 0 ? strerror(errno) : "ended before \"end\"");
			return -1;
		}
		line[n] = '\0';
		int rc = proxy_config_line(c, line, err, errlen);
		if (rc != 0)
			return rc > 0 ? 0 : -1;
	}
}

/* Every address of every interface of the host: the proxy never dials
 * itself, whatever a name resolves to (net_decide, and again the dial
 * guard). Read once, here: getifaddrs needs a netlink socket, which the
 * jail's filter refuses after; an address the host gains later is
 * still refused by net_decide's deny set if it is private or
 * link-local, and by the guard if loopback or link-local. */
static size_t own_addresses(uint8_t (*self)[16], size_t cap)
{
	struct ifaddrs *ifa;
	size_t n = 0;
	if (getifaddrs(&ifa) < 0)
		return 0;
	for (struct ifaddrs *i = ifa; i && n < cap; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (net_addr_from_sockaddr(i->ifa_addr, self[n]))
			n++;
	}
	freeifaddrs(ifa);
	return n;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return fail("usage: vmrun-proxy EMPTY-DIR (started by vmrun, with fds %d and %d)", PROXY_FD_LISTEN,
			    PROXY_FD_CONTROL);
	signal(SIGPIPE, SIG_IGN);
	/* Its jail lets it write no file (RLIMIT_FSIZE 0). The run gives it
	 * a pipe for stderr; should stderr be a file all the same (a
	 * harness's), a line is lost with EFBIG instead of killing it. */
	signal(SIGXFSZ, SIG_IGN);
	struct proxy_main *m = calloc(1, sizeof(*m));
	if (!m)
		return fail("out of memory");
	char err[512];
	struct resolver res = { 0 };
	SSL_CTX *tls = NULL;
	int rc = 1;
	if (read_config(PROXY_FD_CONTROL, &m->cfg, err, sizeof(err)) < 0) {
		fail("%s", err);
		goto out;
	}
	size_t nself = own_addresses(m->self, SELF_MAX);
	if (resolver_init(&res, RESOLVE_TIMEOUT_MS, m->cfg.dns, err, sizeof(err)) < 0) {
		fail("%s", err);
		goto out;
	}
	if (m->cfg.nsecrets && !(tls = tls_relay_context(m->cfg.ca_fd ? PROXY_FD_CA : -1, err, sizeof(err)))) {
		fail("%s", err);
		goto out;
	}
	if (m->cfg.ca_fd)
		close(PROXY_FD_CA);
	if (proxy_sandbox(argv[1], &m->cfg, err, sizeof(err)) < 0) {
		fail("%s", err);
		goto out;
	}
	struct dial_guard guard = { (const uint8_t (*)[16])m->self, nself };
	if (proxy_server_init(&m->srv, &m->cfg, PROXY_FD_LISTEN, PROXY_FD_CONTROL, resolver_lookup, &res,
			      (const uint8_t (*)[16])m->self, nself, dial_guard_refusal, &guard, tls) < 0) {
		fail("out of memory");
		goto out;
	}
	if (proxy_server_run(&m->srv) < 0)
		fail("poll: %s", strerror(errno));
	proxy_server_stop(&m->srv);
	rc = proxy_server_send_audit(&m->srv, PROXY_FD_CONTROL) < 0 ? fail("sending the audit: %s", strerror(errno)) : 0;
out:
	proxy_server_free(&m->srv);
	SSL_CTX_free(tls);
	resolver_free(&res);
	free(m);
	return rc;
}
