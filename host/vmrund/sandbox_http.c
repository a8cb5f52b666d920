/* A sandbox supervisor's API, from vmrund's side (sandbox_http.h). */
#include "sandbox_http.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define SBXC_SOCK "api.sock"

/* The value of header line [p, end) when it is name's, else NULL; *vlen
 * its length with the spaces around it gone. */
static const char *header_value(const char *p, const char *end, const char *name, size_t *vlen)
{
	size_t nl = strlen(name);
	if ((size_t)(end - p) <= nl || strncasecmp(p, name, nl) || p[nl] != ':')
		return NULL;
	const char *v = p + nl + 1;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	const char *e = end;
	while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*vlen = (size_t)(e - v);
	return v;
}

static void copy_field(char *dst, size_t cap, const char *v, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	/* only printable ASCII goes on into an answer's header */
	for (size_t i = 0; i < n; i++)
		dst[i] = v[i] >= 0x20 && v[i] < 0x7f ? v[i] : '?';
	dst[n] = '\0';
}

static int parse_length(const char *v, size_t n, int64_t *out)
{
	if (!n || n > 18)
		return -1;
	int64_t x = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (v[i] - '0');
	}
	*out = x;
	return 0;
}

long sbxc_parse_head(const char *buf, size_t n, struct sbxc_head *h)
{
	*h = (struct sbxc_head){ .length = -1 };
	const char *end = NULL;
	if (n > SBXC_HEAD_MAX)
		n = SBXC_HEAD_MAX;
	for (size_t i = 0; i + 3 < n; i++)
		if (!memcmp(buf + i, "\r\n\r\n", 4)) {
			end = buf + i + 2;   /* after the last header's CRLF */
			break;
		}
	if (!end)
		return n >= SBXC_HEAD_MAX ? -1 : 0;
	/* "HTTP/1.x SSS" and a reason */
	if (end - buf < 14 || memcmp(buf, "HTTP/1.", 7) || (buf[7] != '0' && buf[7] != '1') || buf[8] != ' ')
		return -1;
	unsigned st = 0;
	for (int i = 9; i < 12; i++) {
		if (buf[i] < '0' || buf[i] > '9')
			return -1;
		st = st * 10 + (unsigned)(buf[i] - '0');
	}
	if (st < 100 || st > 599 || (buf[12] != ' ' && buf[12] != '\r'))
		return -1;
	h->status = st;
	const char *p = memchr(buf, '\n', (size_t)(end - buf));
	for (p = p ? p + 1 : end; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol || eol == p || eol[-1] != '\r')
			return -1;
		const char *le = eol - 1;
		if (!memchr(p, ':', (size_t)(le - p)))
			return -1;
		size_t vl;
		const char *v;
		if ((v = header_value(p, le, "Content-Length", &vl))) {
			if (parse_length(v, vl, &h->length))
				return -1;
		} else if ((v = header_value(p, le, "Content-Type", &vl))) {
			copy_field(h->type, sizeof(h->type), v, vl);
		} else if ((v = header_value(p, le, "Retry-After", &vl))) {
			copy_field(h->retry_after, sizeof(h->retry_after), v, vl);
		}
		p = eol + 1;
	}
	return (long)(end - buf) + 2;
}

/* A socket of family, connected to sa, with the timeouts: fd or -1. */
static int dial(int family, const struct sockaddr *sa, socklen_t len, int timeout_ms)
{
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (timeout_ms > 0) {
		struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	if (connect(fd, sa, len) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int connect_unix(struct sbxc *c, const char *path, const char *suffix, int timeout_ms)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s%s", path, suffix) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	c->fd = dial(AF_UNIX, (struct sockaddr *)&sa, sizeof(sa), timeout_ms);
	return c->fd < 0 ? -1 : 0;
}

void sbxc_local_dir(char *buf, size_t len)
{
	const char *x = getenv("XDG_RUNTIME_DIR");
	if (x && x[0] == '/')
		snprintf(buf, len, "%.200s/vmrun", x);
	else if (getuid() == 0)
		snprintf(buf, len, "/run/vmrun/local");
	else
		snprintf(buf, len, "/tmp/vmrun-%u", (unsigned)getuid());
}

void sbxc_local_socket(char *buf, size_t len)
{
	char dir[256];
	sbxc_local_dir(dir, sizeof(dir));
	snprintf(buf, len, "%s/vmrund.sock", dir);
}

int sbxc_connect(struct sbxc *c, const char *dir, int timeout_ms)
{
	return connect_unix(c, dir, "/" SBXC_SOCK, timeout_ms);
}

int sbxc_connect_server(struct sbxc *c, const char *server, int timeout_ms)
{
	if (!strncmp(server, "unix:", 5) || server[0] == '/')
		return connect_unix(c, server + (server[0] == '/' ? 0 : 5), "", timeout_ms);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	char host[256], port[8] = "80";
	const char *h = !strncmp(server, "http://", 7) ? server + 7 : NULL;
	size_t hl = h ? strcspn(h, ":/") : 0;
	if (!h || !hl || hl >= sizeof(host)) {
		errno = EINVAL;
		return -1;
	}
	snprintf(host, sizeof(host), "%.*s", (int)hl, h);
	if (h[hl] == ':') {
		size_t pl = strspn(h + hl + 1, "0123456789");
		if (!pl || pl >= sizeof(port) || (h[hl + 1 + pl] && strcmp(h + hl + 1 + pl, "/"))) {
			errno = EINVAL;
			return -1;
		}
		snprintf(port, sizeof(port), "%.*s", (int)pl, h + hl + 1);
	} else if (h[hl] && strcmp(h + hl, "/")) {
		errno = EINVAL;
		return -1;
	}
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL;
	if (getaddrinfo(host, port, &hints, &ai)) {
		errno = EHOSTUNREACH;
		return -1;
	}
	for (struct addrinfo *a = ai; a && c->fd < 0; a = a->ai_next)
		c->fd = dial(a->ai_family, a->ai_addr, a->ai_addrlen, timeout_ms);
	int e = errno;
	freeaddrinfo(ai);
	errno = e;
	return c->fd < 0 ? -1 : 0;
}

int sbxc_send(struct sbxc *c, const void *p, size_t n)
{
	const char *b = p;
	while (n) {
		ssize_t w = send(c->fd, b, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* A header's value must not end the head early: no CR, LF or NUL. */
static bool header_safe(const char *v)
{
	return !v || !v[strcspn(v, "\r\n")];
}

int sbxc_send_head(struct sbxc *c, const char *method, const char *target, const char *type, const char *idem,
		   uint64_t length)
{
	if (!header_safe(target) || !header_safe(type) || !header_safe(idem) || !header_safe(c->auth) ||
	    !header_safe(c->via) || strchr(target, ' ')) {
		errno = EINVAL;
		return -1;
	}
	char head[SBXC_TARGET_MAX + 1024];
	int n = snprintf(head, sizeof(head),
			 "%s %s HTTP/1.0\r\nHost: sandbox\r\nContent-Length: %llu\r\n%s%s%s%s%s%s%s%.300s%s%s%.100s%s\r\n",
			 method, target, (unsigned long long)length, type ? "Content-Type: " : "", type ? type : "",
			 type ? "\r\n" : "", idem ? "Idempotency-Key: " : "", idem ? idem : "", idem ? "\r\n" : "",
			 c->auth ? "Authorization: Bearer " : "", c->auth ? c->auth : "", c->auth ? "\r\n" : "",
			 c->via ? SBXC_VIA ": " : "", c->via ? c->via : "", c->via ? "\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(head)) {
		errno = E2BIG;
		return -1;
	}
	/* the extra headers go before the head's blank line */
	n -= 2;
	for (const char *const *h = c->headers; h && h[0] && h[1]; h += 2) {
		if (!header_safe(h[0]) || !header_safe(h[1]) || strchr(h[0], ':')) {
			errno = EINVAL;
			return -1;
		}
		int k = snprintf(head + n, sizeof(head) - (size_t)n, "%s: %s\r\n", h[0], h[1]);
		if (k < 0 || (size_t)k >= sizeof(head) - (size_t)n) {
			errno = E2BIG;
			return -1;
		}
		n += k;
	}
	if ((size_t)n + 3 > sizeof(head)) {
		errno = E2BIG;
		return -1;
	}
	memcpy(head + n, "\r\n", 3);
	n += 2;
	return sbxc_send(c, head, (size_t)n);
}

int sbxc_read_head(struct sbxc *c)
{
	for (;;) {
		long used = sbxc_parse_head(c->buf, c->len, &c->head);
		if (used > 0) {
			c->off = (size_t)used;
			return 0;
		}
		if (used < 0 || c->len == sizeof(c->buf)) {
			errno = EPROTO;
			return -1;
		}
		ssize_t r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = EPIPE;
			return -1;
		}
		c->len += (size_t)r;
	}
}

ssize_t sbxc_read_body(struct sbxc *c, void *p, size_t n)
{
	if (c->off < c->len) {
		size_t k = c->len - c->off < n ? c->len - c->off : n;
		memcpy(p, c->buf + c->off, k);
		c->off += k;
		return (ssize_t)k;
	}
	for (;;) {
		ssize_t r = recv(c->fd, p, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		return r;
	}
}

void sbxc_close(struct sbxc *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

int sbxc_call(const char *dir, const char *method, const char *target, const char *body, int timeout_ms,
	      size_t max, unsigned *status, char **out)
{
	struct sbxc c;
	*out = NULL;
	size_t blen = body ? strlen(body) : 0;
	if (sbxc_connect(&c, dir, timeout_ms) ||
	    sbxc_send_head(&c, method, target, body ? "application/json" : NULL, NULL, blen) ||
	    sbxc_send(&c, body ? body : "", blen) || sbxc_read_head(&c)) {
		int e = errno;
		sbxc_close(&c);
		errno = e;
		return -1;
	}
	char *b = malloc(max + 1);
	size_t len = 0;
	ssize_t r = 0;
	while (b && len <= max && (r = sbxc_read_body(&c, b + len, max + 1 - len)) > 0)
		len += (size_t)r;
	int e = !b ? ENOMEM : len > max ? EMSGSIZE : r < 0 ? errno : 0;
	sbxc_close(&c);
	if (e) {
		free(b);
		errno = e;
		return -1;
	}
	b[len] = '\0';
	*status = c.head.status;
	*out = b;
	return 0;
}

void sbxc_query_encode(const char *s, char *out, size_t len)
{
	size_t o = 0;
	out[0] = '\0';
	for (const unsigned char *p = (const unsigned char *)s; *p && o + 4 < len; p++) {
		bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
			     strchr("-._~/", *p);
		o += (size_t)snprintf(out + o, len - o, plain ? "%c" : "%%%02X", *p);
	}
}
