/* The proxy's tunnels (server.h). */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "errmsg.h"
#include "relay.h"
#include "request.h"
#include "tls_relay.h"
#include "tls_sni.h"

enum tunnel_state { T_HEAD, T_HELLO, T_DIAL, T_RELAY };

struct tunnel {
	enum tunnel_state st;
	int guest, remote;
	int64_t start_ms, deadline_ms;    /* HEAD, HELLO, DIAL: when it gives up */
	int rec;                          /* its audit record, -1 past the cap */
	char host[NET_HOST_MAX + 1];      /* the decided host (SNI is held to it) */
	uint8_t addr[16];
	uint16_t port;
	bool ok_after_dial;               /* CONNECT: answer 200 once connected */
	bool answered;                    /* the guest got a status line already */
	uint8_t in[RELAY_BUF];            /* from the guest, before the relay */
	size_t inlen;
	uint8_t *first;                   /* what goes upstream first */
	size_t firstlen;
	bool first_owned;
	const struct proxy_secret *secret;   /* plain HTTP to its host: over TLS, the header added */
	union {
		struct relay relay;
		struct tls_relay tls;
	} io;
};

/* ---- the audit ------------------------------------------------------------ */

static struct proxy_audit *rec_new(struct proxy_server *s, int *index)
{
	*index = -1;
	if (s->naudit >= PROXY_AUDIT_MAX) {
		s->dropped++;
		return NULL;
	}
	*index = (int)s->naudit;
	struct proxy_audit *a = &s->audit[s->naudit++];
	memset(a, 0, sizeof(*a));
	return a;
}

static struct proxy_audit *rec_of(struct proxy_server *s, const struct tunnel *t)
{
	return t->rec >= 0 ? &s->audit[t->rec] : NULL;
}

static void set_text(char *dst, size_t cap, const char *text)
{
	errmsg_printable(dst, cap, text);
}

/* The tunnel's decision is overturned (or its dial failed): why. */
static void rec_why(struct proxy_server *s, const struct tunnel *t, bool allowed, const char *why)
{
	struct proxy_audit *a = rec_of(s, t);
	if (!a)
		return;
	a->allowed = allowed;
	set_text(a->why, sizeof(a->why), why);
}

/* ---- answering the guest -------------------------------------------------- */

static const char *status_text(int status)
{
	switch (status) {
	case 200: return "Connection established";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 408: return "Request Timeout";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	default: return "Gateway Timeout";
	}
}

/* A status line (and for an error, the reason as the body), sent at once:
 * the guest has read nothing yet, so its socket has room for this much.
 * Returns 0, or -1 when it did not all go. */
static int answer(int fd, int status, const char *why)
{
	char body[256], msg[512];
	int n;
	if (status == 200) {
		n = snprintf(msg, sizeof(msg), "HTTP/1.1 200 %s\r\n\r\n", status_text(200));
	} else {
		/* why may quote the guest: a long one is cut, and Content-Length
		 * must count what is sent, not what snprintf would have written */
		int bl = snprintf(body, sizeof(body), "vmrun proxy: %s\n", why);
		if (bl < 0 || (size_t)bl >= sizeof(body)) {
			body[sizeof(body) - 2] = '\n';
			bl = (int)sizeof(body) - 1;
		}
		n = snprintf(msg, sizeof(msg),
			     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			     status, status_text(status), bl, body);
	}
	if (n < 0 || (size_t)n >= sizeof(msg))
		return -1;   /* cannot happen with the sizes above; never send a cut head */
	return send(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) == n ? 0 : -1;
}

/* ---- a tunnel's life ---------------------------------------------------- */

static void tunnel_close(struct proxy_server *s, unsigned i)
{
	struct tunnel *t = s->t[i];
	if (!t)
		return;
	struct proxy_audit *a = rec_of(s, t);
	if (a)
		a->ms = clock_mono_ms() - t->start_ms;
	if (t->guest >= 0)
		close(t->guest);
	if (t->remote >= 0)
		close(t->remote);
	if (t->first_owned)
		free(t->first);
	if (t->secret && t->st == T_RELAY)
		tls_relay_free(&t->io.tls);
	free(t);
	s->t[i] = NULL;
}

/* Refuse: record why, answer status (when the guest can still be
 * answered), close. */
static void refuse(struct proxy_server *s, unsigned i, int status, const char *why)
{
	struct tunnel *t = s->t[i];
	rec_why(s, t, false, why);
	if (!t->answered)
		answer(t->guest, status, why);
	tunnel_close(s, i);
}

/* An allowed tunnel whose dial failed. */
static void dial_failed(struct proxy_server *s, unsigned i, int status, const char *why)
{
	struct tunnel *t = s->t[i];
	rec_why(s, t, true, why);
	struct proxy_audit *a = rec_of(s, t);
	if (a)
		snprintf(a->end, sizeof(a->end), "dial_failed");
	if (!t->answered)
		answer(t->guest, status, why);
	tunnel_close(s, i);
}

static void start_relay(struct proxy_server *s, unsigned i)
{
	struct tunnel *t = s->t[i];
	if (t->ok_after_dial) {
		if (answer(t->guest, 200, NULL) < 0) {
			dial_failed(s, i, 502, "the guest went away");
			return;
		}
		t->answered = true;
	}
	const struct proxy_caps *k = &s->cfg->caps;
	struct relay_limits lim = { k->max_up, k->max_down, k->idle_ms };
	if (t->secret) {
		char why[200];
		SSL *ssl = tls_relay_session(s->tls, t->remote, t->host, why, sizeof(why));
		if (!ssl) {
			dial_failed(s, i, 502, why);
			return;
		}
		tls_relay_init(&t->io.tls, t->guest, t->remote, ssl, t->first, t->firstlen, &lim, clock_mono_ms());
	} else {
		relay_init(&t->io.relay, t->guest, t->remote, t->first, t->firstlen, &lim, clock_mono_ms());
	}
	if (t->first_owned)
		free(t->first);
	t->first = NULL;
	t->first_owned = false;
	t->st = T_RELAY;
}

static void dial(struct proxy_server *s, unsigned i)
{
	struct tunnel *t = s->t[i];
	struct sockaddr_storage ss;
	socklen_t sl = net_addr_to_sockaddr(t->addr, t->port, &ss);
	t->remote = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	char why[128];
	if (t->remote < 0) {
		snprintf(why, sizeof(why), "socket: %s", strerror(errno));
		dial_failed(s, i, 502, why);
		return;
	}
	/* The second check, on the very address connect() gets: whatever
	 * went wrong above, never loopback, link-local or the host itself. */
	char refusal[160];
	const char *no = s->dial_check(s->dial_check_ctx, (const struct sockaddr *)&ss, sl, refusal, sizeof(refusal));
	if (no) {
		refuse(s, i, 403, no);
		return;
	}
	if (connect(t->remote, (struct sockaddr *)&ss, sl) == 0) {
		start_relay(s, i);
	} else if (errno == EINPROGRESS) {
		t->st = T_DIAL;
		t->deadline_ms = clock_mono_ms() + s->cfg->caps.connect_ms;
	} else {
		snprintf(why, sizeof(why), "connect: %s", strerror(errno));
		dial_failed(s, i, 502, why);
	}
}

static void on_dial(struct proxy_server *s, unsigned i)
{
	struct tunnel *t = s->t[i];
	int e = 0;
	socklen_t el = sizeof(e);
	if (getsockopt(t->remote, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
		e = errno;
	if (e) {
		char why[128];
		snprintf(why, sizeof(why), "connect: %s", strerror(e));
		dial_failed(s, i, 502, why);
		return;
	}
	start_relay(s, i);
}

/* The guest's bytes after the head, moved to the start of in. */
static void keep_rest(struct tunnel *t, size_t head_len)
{
	memmove(t->in, t->in + head_len, t->inlen - head_len);
	t->inlen -= head_len;
}

/* Read what the guest sent into in: 1 with more, 0 at EOF, -1 error
 * (EAGAIN: 1 with nothing new). */
static int take_in(struct tunnel *t)
{
	if (t->inlen == sizeof(t->in))
		return 1;
	ssize_t n = recv(t->guest, t->in + t->inlen, sizeof(t->in) - t->inlen, MSG_DONTWAIT);
	if (n > 0)
		t->inlen += (size_t)n;
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 1;
	return n > 0 ? 1 : n == 0 ? 0 : -1;
}

static void check_hello(struct proxy_server *s, unsigned i)
{
	struct tunnel *t = s->t[i];
	char name[NET_HOST_MAX + 1], norm[NET_HOST_MAX + 1], why[NET_HOST_MAX + 160], err[128];
	const char *bad = NULL;
	enum tls_sni_result r = tls_sni(t->in, t->inlen, name, sizeof(name), &bad);
	bool literal = net_ip_literal(t->host, NULL);
	if (r == TLS_SNI_MORE && t->inlen < sizeof(t->in))
		return;
	if (r == TLS_SNI_MORE || r == TLS_SNI_BAD) {
		snprintf(why, sizeof(why), "not a TLS ClientHello on port 443: %s", bad ? bad : "too long");
		refuse(s, i, 0, why);
		return;
	}
	if (r == TLS_SNI_NONE && !literal) {
		refuse(s, i, 0, "the TLS ClientHello names no server");
		return;
	}
	if (r == TLS_SNI_FOUND) {
		if (net_host_normalize(name, norm, sizeof(norm), err, sizeof(err)) < 0 || strcmp(norm, t->host)) {
			snprintf(why, sizeof(why), "TLS server name %s does not match the CONNECT host", name);
			refuse(s, i, 0, why);
			return;
		}
	}
	t->first = t->in;
	t->firstlen = t->inlen;
	dial(s, i);
}

/* The secret header for a plain HTTP request to its host on port 80,
 * or NULL. */
static const struct proxy_secret *secret_for(const struct proxy_server *s, const struct proxy_request *req)
{
	char host[NET_HOST_MAX + 1], why[128];
	if (!s->tls || req->port != 80 || net_host_normalize(req->host, host, sizeof(host), why, sizeof(why)) < 0)
		return NULL;
	for (unsigned i = 0; i < s->cfg->nsecrets; i++)
		if (!strcmp(s->cfg->secrets[i].host, host))
			return &s->cfg->secrets[i];
	return NULL;
}

/* A parsed head: the decision, and what follows from it. */
static void decide(struct proxy_server *s, unsigned i, struct proxy_request *req)
{
	struct tunnel *t = s->t[i];
	const struct proxy_config *c = s->cfg;
	struct net_decision d;
	t->secret = req->connect ? NULL : secret_for(s, req);
	uint16_t port = t->secret ? 443 : req->port;
	net_decide(c->rules, c->nrules, false, req->host, port, s->resolve, s->resolve_ctx, s->self, s->nself, &d);
	struct proxy_audit *a = rec_new(s, &t->rec);
	if (a) {
		set_text(a->host, sizeof(a->host), d.host);
		set_text(a->method, sizeof(a->method), req->method);
		a->port = d.port;
		a->allowed = d.allowed;
		a->has_addr = d.allowed;
		memcpy(a->addr, d.addr, 16);
		set_text(a->why, sizeof(a->why), d.why);
	}
	if (!d.allowed) {
		refuse(s, i, 403, d.why);
		return;
	}
	snprintf(t->host, sizeof(t->host), "%s", d.host);
	memcpy(t->addr, d.addr, 16);
	t->port = d.port;
	if (req->connect) {
		keep_rest(t, req->head_len);
		if (t->port == 443) {
			if (answer(t->guest, 200, NULL) < 0) {
				refuse(s, i, 0, "the guest went away");
				return;
			}
			t->answered = true;
			t->st = T_HELLO;
			t->deadline_ms = clock_mono_ms() + c->caps.connect_ms;
			check_hello(s, i);
			return;
		}
		t->ok_after_dial = true;
		t->first = t->in;
		t->firstlen = t->inlen;
		dial(s, i);
		return;
	}
	size_t hl, body = t->inlen - req->head_len;
	const struct proxy_secret *sec = t->secret;
	char *head = proxy_request_upstream(req, sec ? sec->name : NULL, sec ? sec->name : NULL, sec ? sec->value : NULL, &hl);
	if (!head || hl + body > RELAY_BUF) {
		free(head);
		refuse(s, i, 431, "the request head is too large");
		return;
	}
	t->first = malloc(hl + body);
	if (!t->first) {
		free(head);
		refuse(s, i, 503, "out of memory");
		return;
	}
	memcpy(t->first, head, hl);
	memcpy(t->first + hl, t->in + req->head_len, body);
	free(head);
	t->first_owned = true;
	t->firstlen = hl + body;
	dial(s, i);
}

static void on_head(struct proxy_server *s, unsigned i)
{
	struct tunnel *t = s->t[i];
	int got = take_in(t);
	if (got <= 0) {
		if (t->inlen) {
			int ix;
			struct proxy_audit *a = rec_new(s, &ix);
			t->rec = ix;
			if (a)
				set_text(a->why, sizeof(a->why), "the guest closed before its request was complete");
		}
		tunnel_close(s, i);
		return;
	}
	struct proxy_request req;
	char err[200];
	int rc = proxy_request_parse((const char *)t->in, t->inlen, &req, err, sizeof(err));
	if (rc == 0)
		return;
	if (rc != 1) {
		int ix;
		struct proxy_audit *a = rec_new(s, &ix);
		t->rec = ix;
		(void)a;
		refuse(s, i, rc, err);
		return;
	}
	decide(s, i, &req);
	proxy_request_free(&req);
}

static void on_hello(struct proxy_server *s, unsigned i)
{
	struct tunnel *t = s->t[i];
	if (take_in(t) <= 0) {
		refuse(s, i, 0, "the guest closed before its TLS ClientHello");
		return;
	}
	check_hello(s, i);
}

static void end_relay(struct proxy_server *s, unsigned i, const char *end)
{
	struct tunnel *t = s->t[i];
	struct proxy_audit *a = rec_of(s, t);
	if (a && t->secret) {
		a->up = t->io.tls.moved[RELAY_GUEST];
		a->down = t->io.tls.moved[RELAY_REMOTE];
		snprintf(a->end, sizeof(a->end), "%s", end);
		set_text(a->why, sizeof(a->why), t->io.tls.why);
		if (!t->io.tls.handshaken && t->io.tls.down_len == 0 && !t->answered)
			answer(t->guest, 502, t->io.tls.why);   /* the guest sent plain HTTP: tell it */
	} else if (a) {
		a->up = t->io.relay.moved[RELAY_GUEST];
		a->down = t->io.relay.moved[RELAY_REMOTE];
		snprintf(a->end, sizeof(a->end), "%s", end);
		if (t->io.relay.end == RELAY_ERROR)
			snprintf(a->why, sizeof(a->why), "%s", strerror(t->io.relay.err));
	}
	tunnel_close(s, i);
}

static void accept_one(struct proxy_server *s)
{
	int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	unsigned k = s->cfg->caps.tunnels;
	unsigned i = 0;
	while (i < k && s->t[i])
		i++;
	struct tunnel *t = i < k ? calloc(1, sizeof(*t)) : NULL;
	if (!t) {
		char why[96];
		snprintf(why, sizeof(why), "more than %u tunnels at once", k);
		int ix;
		struct proxy_audit *a = rec_new(s, &ix);
		if (a)
			set_text(a->why, sizeof(a->why), why);
		answer(fd, 503, why);
		close(fd);
		return;
	}
	t->guest = fd;
	t->remote = -1;
	t->rec = -1;
	t->start_ms = clock_mono_ms();
	t->deadline_ms = t->start_ms + s->cfg->caps.connect_ms;
	s->t[i] = t;
}

/* ---- the loop ------------------------------------------------------------- */

/* What tunnel i waits for: its two pollfds (fd -1: none). */
static void tunnel_poll(const struct tunnel *t, struct pollfd *g, struct pollfd *r)
{
	*g = (struct pollfd){ -1, 0, 0 };
	*r = (struct pollfd){ -1, 0, 0 };
	switch (t->st) {
	case T_HEAD:
	case T_HELLO: *g = (struct pollfd){ t->guest, POLLIN, 0 }; break;
	case T_DIAL: *r = (struct pollfd){ t->remote, POLLOUT, 0 }; break;
	case T_RELAY:
		*g = (struct pollfd){ t->guest, t->secret ? tls_relay_events(&t->io.tls, RELAY_GUEST)
							  : relay_events(&t->io.relay, RELAY_GUEST), 0 };
		*r = (struct pollfd){ t->remote, t->secret ? tls_relay_events(&t->io.tls, RELAY_REMOTE)
							   : relay_events(&t->io.relay, RELAY_REMOTE), 0 };
		if (!g->events)
			g->fd = -1;
		if (!r->events)
			r->fd = -1;
		break;
	}
}

static int64_t tunnel_wait_ms(const struct tunnel *t, int64_t now)
{
	if (t->st == T_RELAY)
		return t->secret ? tls_relay_timeout_ms(&t->io.tls, now) : relay_timeout_ms(&t->io.relay, now);
	return t->deadline_ms > now ? t->deadline_ms - now : 0;
}

static void tunnel_timeout(struct proxy_server *s, unsigned i, int64_t now)
{
	struct tunnel *t = s->t[i];
	char why[96];
	switch (t->st) {
	case T_HEAD: {
		int ix;
		struct proxy_audit *a = rec_new(s, &ix);
		t->rec = ix;
		(void)a;
		snprintf(why, sizeof(why), "no complete request within %lld ms", (long long)s->cfg->caps.connect_ms);
		refuse(s, i, 408, why);
		break;
	}
	case T_HELLO:
		snprintf(why, sizeof(why), "no TLS ClientHello within %lld ms", (long long)s->cfg->caps.connect_ms);
		refuse(s, i, 0, why);
		break;
	case T_DIAL:
		snprintf(why, sizeof(why), "connect: no answer within %lld ms", (long long)s->cfg->caps.connect_ms);
		dial_failed(s, i, 504, why);
		break;
	case T_RELAY: {
		short none[2] = { 0, 0 };
		enum relay_end e = t->secret ? tls_relay_step(&t->io.tls, none, now) : relay_step(&t->io.relay, none, now);
		if (e != RELAY_RUNNING)
			end_relay(s, i, relay_end_name(e));
		break;
	}
	}
}

static void tunnel_ready(struct proxy_server *s, unsigned i, short gev, short rev)
{
	struct tunnel *t = s->t[i];
	switch (t->st) {
	case T_HEAD: if (gev) on_head(s, i); break;
	case T_HELLO: if (gev) on_hello(s, i); break;
	case T_DIAL: if (rev) on_dial(s, i); break;
	case T_RELAY: {
		short ev[2] = { gev, rev };
		enum relay_end e = t->secret ? tls_relay_step(&t->io.tls, ev, clock_mono_ms()) : relay_step(&t->io.relay, ev, clock_mono_ms());
		if (e != RELAY_RUNNING)
			end_relay(s, i, relay_end_name(e));
		break;
	}
	}
}

int proxy_server_init(struct proxy_server *s, const struct proxy_config *cfg, int listen_fd, int control_fd,
		      net_resolve_fn resolve, void *resolve_ctx, const uint8_t (*self)[16], size_t nself,
		      proxy_dial_check_fn dial_check, const void *dial_check_ctx, SSL_CTX *tls)
{
	memset(s, 0, sizeof(*s));
	if (!dial_check)
		return -1;
	s->dial_check = dial_check;
	s->dial_check_ctx = dial_check_ctx;
	s->cfg = cfg;
	s->listen_fd = listen_fd;
	s->control_fd = control_fd;
	s->resolve = resolve;
	s->resolve_ctx = resolve_ctx;
	s->self = self;
	s->nself = nself;
	s->tls = tls;
	s->t = calloc(cfg->caps.tunnels ? cfg->caps.tunnels : 1, sizeof(*s->t));
	return s->t ? 0 : -1;
}

int proxy_server_run(struct proxy_server *s)
{
	unsigned k = s->cfg->caps.tunnels;
	struct pollfd *p = calloc(2 + 2 * (size_t)k, sizeof(*p));
	if (!p)
		return -1;
	int rc = 0;
	for (;;) {
		int64_t now = clock_mono_ms(), wait = -1;
		p[0] = (struct pollfd){ s->control_fd, POLLIN, 0 };
		p[1] = (struct pollfd){ s->listen_fd, POLLIN, 0 };
		for (unsigned i = 0; i < k; i++) {
			if (!s->t[i]) {
				p[2 + 2 * i] = p[3 + 2 * i] = (struct pollfd){ -1, 0, 0 };
				continue;
			}
			tunnel_poll(s->t[i], &p[2 + 2 * i], &p[3 + 2 * i]);
			int64_t w = tunnel_wait_ms(s->t[i], now);
			if (wait < 0 || w < wait)
				wait = w;
		}
		if (poll(p, 2 + 2 * (nfds_t)k, wait > 60000 ? 60000 : (int)wait) < 0) {
			if (errno == EINTR)
				continue;
			rc = -1;
			break;
		}
		if (p[0].revents) {
			char c;
			ssize_t n = recv(s->control_fd, &c, 1, MSG_DONTWAIT);
			if (n <= 0 && !(n < 0 && errno == EAGAIN))
				break;
		}
		now = clock_mono_ms();
		for (unsigned i = 0; i < k; i++) {
			if (!s->t[i])
				continue;
			short g = p[2 + 2 * i].revents, r = p[3 + 2 * i].revents;
			if (g || r)
				tunnel_ready(s, i, g, r);
			else if (tunnel_wait_ms(s->t[i], now) == 0)
				tunnel_timeout(s, i, now);
		}
		if (p[1].revents)
			accept_one(s);
	}
	free(p);
	return rc;
}

void proxy_server_stop(struct proxy_server *s)
{
	for (unsigned i = 0; s->t && i < s->cfg->caps.tunnels; i++) {
		struct tunnel *t = s->t[i];
		if (!t)
			continue;
		if (t->st == T_RELAY) {
			end_relay(s, i, "run_ended");
		} else {
			rec_why(s, t, false, "the run ended first");
			tunnel_close(s, i);
		}
	}
}

int proxy_server_send_audit(const struct proxy_server *s, int fd)
{
	for (unsigned i = 0; i < s->naudit; i++)
		if (send(fd, &s->audit[i], sizeof(s->audit[i]), MSG_NOSIGNAL) != (ssize_t)sizeof(s->audit[i]))
			return -1;
	struct proxy_audit_end e = { PROXY_AUDIT_END_MAGIC, s->dropped };
	return send(fd, &e, sizeof(e), MSG_NOSIGNAL) == (ssize_t)sizeof(e) ? 0 : -1;
}

void proxy_server_free(struct proxy_server *s)
{
	if (!s->t)
		return;
	proxy_server_stop(s);
	free(s->t);
	s->t = NULL;
}
