/* The run-to-proxy configuration records and the audit's validity check
 * (host/run/proxy_wire.h). */
#include "proxy_wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "errmsg.h"

void proxy_config_init(struct proxy_config *c)
{
	memset(c, 0, sizeof(*c));
	c->caps = (struct proxy_caps){
		.tunnels = PROXY_DEFAULT_TUNNELS, .max_up = PROXY_DEFAULT_MAX_UP, .max_down = PROXY_DEFAULT_MAX_DOWN,
		.idle_ms = PROXY_DEFAULT_IDLE_MS, .connect_ms = PROXY_DEFAULT_CONNECT_MS,
	};
}

/* A whole decimal number of at most max, at least 1. */
static int number(const char *s, uint64_t max, uint64_t *out)
{
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v < 1 || v > max)
		return -1;
	*out = v;
	return 0;
}

static int add_rule(struct proxy_config *c, const char *text, bool addr, char *err, size_t errlen)
{
	if (c->nrules >= PROXY_RULES_MAX)
		return errf(err, errlen, "more than %u network rules", PROXY_RULES_MAX);
	if (net_rule_parse(text, addr, &c->rules[c->nrules], err, errlen) < 0)
		return -1;
	c->nrules++;
	return 0;
}

static int ids(struct proxy_config *c, const char *s)
{
	unsigned long u, g;
	char tail;
	if (sscanf(s, "%lu %lu%c", &u, &g, &tail) != 2 || u == 0 || g == 0 || u > UINT32_MAX - 1 || g > UINT32_MAX - 1)
		return -1;
	c->set_ids = true;
	c->uid = (uid_t)u;
	c->gid = (gid_t)g;
	return 0;
}

/* An HTTP token (RFC 9110 5.6.2). */
static bool token(const char *s, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		      strchr("!#$%&'*+-.^_`|~", s[i])))
			return false;
	return true;
}

int proxy_secret_parse(const char *host_header, const char *value, struct proxy_secret *s, char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	const char *colon = strchr(host_header, ':'), *name = colon ? colon + 1 : NULL;
	char host[NET_HOST_MAX + 2], why[200];
	if (!colon || (size_t)(colon - host_header) >= sizeof(host))
		return errf(err, errlen, "not HOST:HEADER");
	snprintf(host, sizeof(host), "%.*s", (int)(colon - host_header), host_header);
	if (net_host_normalize(host, s->host, sizeof(s->host), why, sizeof(why)) < 0)
		return errf(err, errlen, "%s", why);
	size_t nl = strlen(name);
	if (!token(name, nl) || nl >= sizeof(s->name))
		return errf(err, errlen, "the header name must be an HTTP token of at most %zu bytes", sizeof(s->name) - 1);
	static const char *const own[] = { "host", "connection", "content-length", "transfer-encoding", "te",
					   "upgrade", "trailer", "keep-alive", "proxy-connection" };
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (!strcasecmp(name, own[i]))
			return errf(err, errlen, "%s is a header the proxy sets itself", name);
	size_t vl = strlen(value);
	if (vl > PROXY_SECRET_MAX)
		return errf(err, errlen, "the value is longer than %d bytes", PROXY_SECRET_MAX);
	for (size_t i = 0; i < vl; i++)
		if ((unsigned char)value[i] < 0x20 || (unsigned char)value[i] > 0x7e)
			return errf(err, errlen, "the value must be printable ASCII on one line");
	memcpy(s->name, name, nl + 1);
	memcpy(s->value, value, vl + 1);
	return 0;
}

/* "secret HOST:HEADER VALUE" */
static int secret(struct proxy_config *c, const char *v, char *err, size_t errlen)
{
	if (c->nsecrets >= PROXY_SECRETS_MAX)
		return errf(err, errlen, "more than %u secret headers", PROXY_SECRETS_MAX);
	const char *sp = strchr(v, ' ');
	char hh[NET_HOST_MAX + 80], why[200];
	if (!sp || (size_t)(sp - v) >= sizeof(hh))
		return errf(err, errlen, "proxy configuration: bad secret");
	snprintf(hh, sizeof(hh), "%.*s", (int)(sp - v), v);
	if (proxy_secret_parse(hh, sp + 1, &c->secrets[c->nsecrets], why, sizeof(why)) < 0)
		return errf(err, errlen, "proxy configuration: secret: %s", why);
	c->nsecrets++;
	return 0;
}

int proxy_config_line(struct proxy_config *c, const char *line, char *err, size_t errlen)
{
	if (!strcmp(line, "ca-fd")) {
		c->ca_fd = true;
		return 0;
	}
	char q[48];   /* a value, shown in a message */
	if (!strcmp(line, "end"))
		return 1;
	const char *sp = strchr(line, ' ');
	if (!sp)
		return errf(err, errlen, "proxy configuration: no value in \"%s\"", errmsg_printable(q, sizeof(q), line));
	size_t kl = (size_t)(sp - line);
	const char *v = sp + 1;
	uint64_t n;
	struct {
		const char *key;
		uint64_t max;
	} nums[] = {
		{ "tunnels", 1024 }, { "max-up", UINT64_MAX / 2 }, { "max-down", UINT64_MAX / 2 },
		{ "idle-ms", 86400000 }, { "connect-ms", 600000 },
	};
	if (kl == 9 && !memcmp(line, "rule-host", 9))
		return add_rule(c, v, false, err, errlen);
	if (kl == 9 && !memcmp(line, "rule-addr", 9))
		return add_rule(c, v, true, err, errlen);
	if (kl == 6 && !memcmp(line, "secret", 6))
		return secret(c, v, err, errlen);
	if (kl == 3 && !memcmp(line, "dns", 3)) {
		if (strlen(v) >= sizeof(c->dns) || strspn(v, "0123456789abcdefABCDEF.:[],") != strlen(v))
			return errf(err, errlen, "proxy configuration: bad dns \"%s\"", errmsg_printable(q, sizeof(q), v));
		snprintf(c->dns, sizeof(c->dns), "%s", v);
		return 0;
	}
	if (kl == 3 && !memcmp(line, "ids", 3))
		return ids(c, v) < 0 ? errf(err, errlen, "proxy configuration: bad ids \"%s\"",
							 errmsg_printable(q, sizeof(q), v)) : 0;
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		if (strlen(nums[i].key) != kl || memcmp(line, nums[i].key, kl))
			continue;
		if (number(v, nums[i].max, &n) < 0)
			return errf(err, errlen, "proxy configuration: bad %s \"%s\"", nums[i].key,
				    errmsg_printable(q, sizeof(q), v));
		switch (i) {
		case 0: c->caps.tunnels = (unsigned)n; break;
		case 1: c->caps.max_up = n; break;
		case 2: c->caps.max_down = n; break;
		case 3: c->caps.idle_ms = (int64_t)n; break;
		default: c->caps.connect_ms = (int64_t)n; break;
		}
		return 0;
	}
	char key[48];
	snprintf(key, sizeof(key), "%.*s", (int)(kl < sizeof(key) ? kl : sizeof(key) - 1), line);
	return errf(err, errlen, "proxy configuration: unknown record \"%s\"", errmsg_printable(q, sizeof(q), key));
}

int proxy_config_emit(const struct proxy_config *c, int (*emit)(void *ctx, const char *line), void *ctx)
{
	char line[PROXY_LINE_MAX], rule[PROXY_LINE_MAX - 16];
	for (unsigned i = 0; i < c->nrules; i++) {
		net_rule_format(&c->rules[i], rule, sizeof(rule));
		snprintf(line, sizeof(line), "%s %s", c->rules[i].kind == NET_RULE_ADDR ? "rule-addr" : "rule-host", rule);
		if (emit(ctx, line) < 0)
			return -1;
	}
	const struct proxy_caps *k = &c->caps;
	snprintf(line, sizeof(line), "tunnels %u", k->tunnels);
	if (emit(ctx, line) < 0)
		return -1;
	snprintf(line, sizeof(line), "max-up %" PRIu64, k->max_up);
	if (emit(ctx, line) < 0)
		return -1;
	snprintf(line, sizeof(line), "max-down %" PRIu64, k->max_down);
	if (emit(ctx, line) < 0)
		return -1;
	snprintf(line, sizeof(line), "idle-ms %" PRId64, k->idle_ms);
	if (emit(ctx, line) < 0)
		return -1;
	snprintf(line, sizeof(line), "connect-ms %" PRId64, k->connect_ms);
	if (emit(ctx, line) < 0)
		return -1;
	for (unsigned i = 0; i < c->nsecrets; i++) {
		const struct proxy_secret *s = &c->secrets[i];
		snprintf(line, sizeof(line), "secret %s:%s %s", s->host, s->name, s->value);
		if (emit(ctx, line) < 0)
			return -1;
	}
	if (c->ca_fd && emit(ctx, "ca-fd") < 0)
		return -1;
	if (c->dns[0]) {
		snprintf(line, sizeof(line), "dns %s", c->dns);
		if (emit(ctx, line) < 0)
			return -1;
	}
	if (c->set_ids) {
		snprintf(line, sizeof(line), "ids %u %u", (unsigned)c->uid, (unsigned)c->gid);
		if (emit(ctx, line) < 0)
			return -1;
	}
	return emit(ctx, "end");
}

/* Terminated within cap, and printable ASCII before that. */
static bool text_ok(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);
	if (n == cap)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

bool proxy_audit_valid(const struct proxy_audit *a)
{
	return text_ok(a->host, sizeof(a->host)) && text_ok(a->method, sizeof(a->method)) &&
	       text_ok(a->why, sizeof(a->why)) && text_ok(a->end, sizeof(a->end)) && a->allowed <= 1 &&
	       a->has_addr <= 1 && a->zero == 0;
}
