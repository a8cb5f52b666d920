/* The proxy's request head (proxy_request.h), over http_parser. */
#include "request.h"

#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "errmsg.h"

/* What the callbacks gather; the parse's outcome is decided after. */
struct gather {
	struct proxy_request *r;
	char *url;
	size_t url_len;
	bool url_long;
	bool in_value;      /* the last callback was a value: a field starts a new header */
	unsigned too_many;  /* headers past PROXY_HEADERS_MAX */
	bool oom;
};

/* Append at[n] to *s (NUL-terminated, malloc'd). */
static int append(char **s, const char *at, size_t n)
{
	size_t have = *s ? strlen(*s) : 0;
	char *p = realloc(*s, have + n + 1);
	if (!p)
		return -1;
	memcpy(p + have, at, n);
	p[have + n] = '\0';
	*s = p;
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
	struct gather *g = p->data;
	if (g->url_len + n > PROXY_TARGET_MAX) {
		g->url_long = true;
		return 1;
	}
	if (append(&g->url, at, n) < 0) {
		g->oom = true;
		return 1;
	}
	g->url_len += n;
	return 0;
}

static int on_field(http_parser *p, const char *at, size_t n)
{
	struct gather *g = p->data;
	struct proxy_request *r = g->r;
	if (g->in_value || r->nh == 0) {
		if (r->nh == PROXY_HEADERS_MAX) {
			g->too_many++;
			return 1;
		}
		r->nh++;
		g->in_value = false;
	}
	if (append(&r->h[r->nh - 1].name, at, n) < 0) {
		g->oom = true;
		return 1;
	}
	return 0;
}

static int on_value(http_parser *p, const char *at, size_t n)
{
	struct gather *g = p->data;
	struct proxy_request *r = g->r;
	struct proxy_header *h = &r->h[r->nh - 1];
	/* A folded line arrives as a second piece, its indent with it: one
	 * space joins them instead. */
	if (h->value && g->in_value) {
		while (n && (*at == ' ' || *at == '\t')) {
			at++;
			n--;
		}
		if (append(&h->value, " ", 1) < 0)
			g->oom = true;
	}
	g->in_value = true;
	if (!g->oom && append(&h->value, at, n) < 0)
		g->oom = true;
	return g->oom;
}

static int on_headers_complete(http_parser *p)
{
	/* 1: no body to look for; what follows the head is the caller's. */
	(void)p;
	return 1;
}

/* Where the head ends (the byte after its empty line), or 0 when the
 * empty line has not come yet. Bare LF line ends count, as the parser
 * takes them. */
static size_t head_end(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (i + 1 < len && buf[i + 1] == '\n')
			return i + 2;
		if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/* RFC 9110's token characters: what a header name may hold. */
static bool token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!(((*s | 0x20) >= 'a' && (*s | 0x20) <= 'z') || (*s >= '0' && *s <= '9') || strchr("!#$%&'*+-.^_`|~", *s)))
			return false;
	return true;
}

/* Whether a header is the proxy's to drop rather than send on. */
static bool hop_by_hop(const char *name, const char *connection)
{
	static const char *const fixed[] = { "connection", "proxy-connection", "keep-alive", "proxy-authorization",
					     "proxy-authenticate", "te", "trailer", "upgrade", "host" };
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (!strcasecmp(name, fixed[i]))
			return true;
	/* And every header Connection names (comma-separated tokens). */
	for (const char *c = connection; c && *c;) {
		c += strspn(c, " \t,");
		size_t n = strcspn(c, " \t,");
		if (n && strlen(name) == n && !strncasecmp(name, c, n))
			return true;
		c += n;
	}
	return false;
}

/* The target's host and port into r, from the parser's split of url. */
static int take_authority(struct proxy_request *r, const char *url, const struct http_parser_url *u, char *err,
			  size_t errlen)
{
	if (!(u->field_set & (1 << UF_HOST)) || u->field_data[UF_HOST].len == 0)
		return errf(err, errlen, "the request target names no host"), 400;
	if (u->field_set & (1 << UF_USERINFO))
		return errf(err, errlen, "a user name in the request target is refused"), 400;
	size_t hl = u->field_data[UF_HOST].len;
	if (hl >= sizeof(r->host))
		return errf(err, errlen, "the target's host name is too long"), 400;
	memcpy(r->host, url + u->field_data[UF_HOST].off, hl);
	r->host[hl] = '\0';
	r->port = u->port ? u->port : 80;
	if ((u->field_set & (1 << UF_PORT)) && u->port == 0)
		return errf(err, errlen, "the target's port is 0"), 400;
	return 0;
}

static int finish_connect(struct proxy_request *r, const char *url, char *err, size_t errlen)
{
	struct http_parser_url u;
	http_parser_url_init(&u);
	if (http_parser_parse_url(url, strlen(url), 1, &u))
		return errf(err, errlen, "CONNECT wants host:port"), 400;
	return take_authority(r, url, &u, err, errlen);
}

static int finish_plain(struct proxy_request *r, const char *url, char *err, size_t errlen)
{
	struct http_parser_url u;
	http_parser_url_init(&u);
	if (http_parser_parse_url(url, strlen(url), 0, &u) || !(u.field_set & (1 << UF_SCHEMA)))
		return errf(err, errlen, "a proxy request names its target in full: http://HOST/PATH"), 400;
	const char *schema = url + u.field_data[UF_SCHEMA].off;
	size_t sl = u.field_data[UF_SCHEMA].len;
	if (sl == 5 && !strncasecmp(schema, "https", 5))
		return errf(err, errlen, "https goes through CONNECT"), 400;
	if (sl != 4 || strncasecmp(schema, "http", 4))
		return errf(err, errlen, "only http:// targets are proxied"), 501;
	int rc = take_authority(r, url, &u, err, errlen);
	if (rc)
		return rc;
	/* Origin form: the path and query as sent, never the fragment. */
	const char *path = (u.field_set & (1 << UF_PATH)) ? url + u.field_data[UF_PATH].off : "/";
	size_t pl = (u.field_set & (1 << UF_PATH)) ? u.field_data[UF_PATH].len : 1;
	size_t ql = (u.field_set & (1 << UF_QUERY)) ? u.field_data[UF_QUERY].len + 1 : 0;
	if (!(r->path = malloc(pl + ql + 1)))
		return errf(err, errlen, "out of memory"), 400;
	memcpy(r->path, path, pl);
	if (ql)
		memcpy(r->path + pl, url + u.field_data[UF_QUERY].off - 1, ql);
	r->path[pl + ql] = '\0';
	return 0;
}

/* The headers kept for sending on: names are tokens, values have no
 * control characters but tab (no CR or LF smuggled into the upstream
 * head); the hop-by-hop ones are dropped. */
static int keep_headers(struct proxy_request *r, char *err, size_t errlen)
{
	const char *connection = NULL;
	unsigned hosts = 0;
	for (unsigned i = 0; i < r->nh; i++) {
		struct proxy_header *h = &r->h[i];
		if (!h->value && !(h->value = strdup("")))
			return errf(err, errlen, "out of memory"), 400;
		if (!token(h->name))
			return errf(err, errlen, "a header name that is not a token"), 400;
		for (const unsigned char *v = (const unsigned char *)h->value; *v; v++)
			if ((*v < 0x20 && *v != '\t') || *v == 0x7f)
				return errf(err, errlen, "a control character in header %.32s", h->name), 400;
		if (!strcasecmp(h->name, "connection"))
			connection = h->value;
		hosts += !strcasecmp(h->name, "host");
	}
	if (hosts > 1)
		return errf(err, errlen, "more than one Host header"), 400;
	/* Judged first, freed after: Connection's value names the others. */
	bool drop[PROXY_HEADERS_MAX];
	for (unsigned i = 0; i < r->nh; i++)
		drop[i] = hop_by_hop(r->h[i].name, connection);
	unsigned k = 0;
	for (unsigned i = 0; i < r->nh; i++) {
		if (drop[i]) {
			free(r->h[i].name);
			free(r->h[i].value);
			continue;
		}
		r->h[k++] = r->h[i];
	}
	for (unsigned i = k; i < r->nh; i++)
		r->h[i] = (struct proxy_header){ 0 };
	r->nh = k;
	return 0;
}

int proxy_request_parse(const char *buf, size_t len, struct proxy_request *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	size_t end = head_end(buf, len);
	if (!end)
		return len > PROXY_HEAD_MAX ? (errf(err, errlen, "the request head is over %d bytes", PROXY_HEAD_MAX), 431)
					    : 0;
	if (end > PROXY_HEAD_MAX)
		return errf(err, errlen, "the request head is over %d bytes", PROXY_HEAD_MAX), 431;
	struct gather g = { .r = out };
	http_parser p;
	http_parser_init(&p, HTTP_REQUEST);
	p.data = &g;
	http_parser_settings s = { .on_url = on_url,
				   .on_header_field = on_field,
				   .on_header_value = on_value,
				   .on_headers_complete = on_headers_complete };
	http_parser_execute(&p, &s, buf, end);
	enum http_errno e = HTTP_PARSER_ERRNO(&p);
	int rc = 0;
	if (g.oom)
		rc = (errf(err, errlen, "out of memory"), 400);
	else if (g.url_long)
		rc = (errf(err, errlen, "the request target is over %d bytes", PROXY_TARGET_MAX), 414);
	else if (g.too_many)
		rc = (errf(err, errlen, "more than %d headers", PROXY_HEADERS_MAX), 431);
	else if (e != HPE_OK && e != HPE_CB_headers_complete)
		rc = (errf(err, errlen, "not an HTTP request: %s", http_errno_description(e)), 400);
	else if (!g.url || (p.http_major != 1))
		rc = (errf(err, errlen, "not an HTTP/1 request"), 400);
	if (!rc) {
		out->connect = p.method == HTTP_CONNECT;
		out->http_minor = p.http_minor;
		snprintf(out->method, sizeof(out->method), "%s", http_method_str((enum http_method)p.method));
		rc = out->connect ? finish_connect(out, g.url, err, errlen) : finish_plain(out, g.url, err, errlen);
	}
	if (!rc)
		rc = keep_headers(out, err, errlen);
	free(g.url);
	if (rc) {
		proxy_request_free(out);
		return rc;
	}
	out->head_len = end;
	return 1;
}

void proxy_request_free(struct proxy_request *r)
{
	for (unsigned i = 0; i < r->nh && i < PROXY_HEADERS_MAX; i++) {
		free(r->h[i].name);
		free(r->h[i].value);
	}
	free(r->path);
	memset(r, 0, sizeof(*r));
}

char *proxy_request_upstream(const struct proxy_request *r, const char *drop, const char *add_name,
			     const char *add_value, size_t *len)
{
	char *s = NULL;
	size_t cap = 0;
	FILE *f = open_memstream(&s, &cap);
	if (!f)
		return NULL;
	bool v6 = strchr(r->host, ':') != NULL;
	fprintf(f, "%s %s HTTP/1.1\r\nHost: %s%s%s", r->method, r->path ? r->path : "/", v6 ? "[" : "", r->host,
		v6 ? "]" : "");
	if (r->port != 80)
		fprintf(f, ":%u", (unsigned)r->port);
	fputs("\r\n", f);
	for (unsigned i = 0; i < r->nh; i++)
		if (!drop || strcasecmp(r->h[i].name, drop))
			fprintf(f, "%s: %s\r\n", r->h[i].name, r->h[i].value);
	fputs("Connection: close\r\n", f);
	if (add_name)
		fprintf(f, "%s: %s\r\n", add_name, add_value ? add_value : "");
	fputs("\r\n", f);
	if (fclose(f)) {
		free(s);
		return NULL;
	}
	*len = cap;
	return s;
}
