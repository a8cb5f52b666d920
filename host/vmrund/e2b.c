/* E2B's control API onto vmrund's sandboxes (e2b.h). */
#include "e2b.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "clock.h"
#include "errmsg.h"
#include "netpolicy.h"
#include "run_pause.h"

static int fail(int status, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(int status, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return status;
}

/* ---- create --------------------------------------------------------------------- */

/* A string array of at most 64, or absent: 0, else 400. */
static int strings_of(const json_t *v, const char *what, char *err, size_t errlen)
{
	if (!v)
		return 0;
	if (!json_is_array(v) || json_array_size(v) > 64)
		return fail(400, err, errlen, "%s: must be an array of at most 64 strings", what);
	size_t i;
	const json_t *s;
	json_array_foreach(v, i, s)
	if (!json_is_string(s))
		return fail(400, err, errlen, "%s: must be an array of at most 64 strings", what);
	return 0;
}

/* Whether denyOut says "everything": vmrun's network allows by rule
 * only, so that is the one denial it can keep. */
static bool deny_all(const json_t *deny)
{
	size_t i;
	const json_t *s;
	json_array_foreach(deny, i, s)
	if (strcmp(json_string_value(s), "0.0.0.0/0") && strcmp(json_string_value(s), "::/0"))
		return false;
	return json_array_size(deny) > 0;
}

/* One of the tenant's host rules (tenant_host_rules) into allow, as the
 * native body writes it. */
static int add_host_rule(void *allow, const struct net_rule *r)
{
	char buf[NET_HOST_MAX + 64];
	net_rule_format(r, buf, sizeof(buf));
	json_array_append_new(allow, json_string(buf));
	return 0;
}

/* allowOut's entries: an address or a range is an address rule, anything
 * else a host rule (checked as such by the native create). */
static void add_allow_out(const json_t *out, json_t *allow, json_t *allow_addr)
{
	size_t i;
	const json_t *s;
	json_array_foreach(out, i, s) {
		const char *t = json_string_value(s);
		uint8_t addr[16];
		bool is_addr = strchr(t, '/') || net_ip_literal(t, addr);
		json_array_append_new(is_addr ? allow_addr : allow, json_string(t));
	}
}

static int network_of(const json_t *in, const struct tenant_reach *reach, json_t *native, char *err, size_t errlen)
{
	const json_t *inet = json_object_get(in, "allow_internet_access"), *net = json_object_get(in, "network");
	const json_t *out = json_object_get(net, "allowOut"), *deny = json_object_get(net, "denyOut");
	if (inet && !json_is_boolean(inet))
		return fail(400, err, errlen, "allow_internet_access: must be true or false");
	if (net && !json_is_object(net))
		return fail(400, err, errlen, "network: must be an object");
	int st = strings_of(out, "network.allowOut", err, errlen);
	if (!st)
		st = strings_of(deny, "network.denyOut", err, errlen);
	if (st)
		return st;
	if (json_array_size(deny) && !deny_all(deny))
		return fail(400, err, errlen,
			    "network.denyOut: vmrun allows by rule and denies the rest, so only 0.0.0.0/0 (with allowOut) "
			    "can be said");
	static const char *const unsupported[] = { "egressProxy", "rules", "allowPublicTraffic", "maskRequestHost",
						   "httpsPorts" };
	for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++)
		if (json_object_get(net, unsupported[i]))
			return fail(400, err, errlen, "network.%s: not available in vmrun (docs/e2b.md)", unsupported[i]);
	json_t *allow = json_array(), *allow_addr = json_array();
	/* E2B's sandboxes reach the internet unless told not to: ours reach
	 * what the tenant may, by name */
	bool internet = !json_is_false(inet) && !json_array_size(deny);
	if (internet)
		tenant_host_rules(reach, add_host_rule, allow);
	if (json_is_true(inet) && internet && !json_array_size(allow)) {
		json_decref(allow);
		json_decref(allow_addr);
		return fail(403, err, errlen, "allow_internet_access: this tenant's runs may reach no host (its net= rules)");
	}
	add_allow_out(out, allow, allow_addr);
	json_t *n = json_object();
	if (json_array_size(allow))
		json_object_set(n, "allow", allow);
	if (json_array_size(allow_addr))
		json_object_set(n, "allow_addr", allow_addr);
	json_decref(allow);
	json_decref(allow_addr);
	if (json_object_size(n))
		json_object_set(native, "network", n);
	json_decref(n);
	return 0;
}

int e2b_snapshot_ref(const char *text, char ref[E2B_SNAPSHOT_MAX + 1])
{
	const char *sep = strchr(text, E2B_SNAPSHOT_SEP);
	char id[RUN_CHECKPOINT_SANDBOX_MAX + 1];
	const char *name;
	if (!sep || strlen(text) > E2B_SNAPSHOT_MAX)
		return 0;
	snprintf(ref, E2B_SNAPSHOT_MAX + 1, "%.*s/%s", (int)(sep - text), text, sep + 1);
	return run_checkpoint_ref(ref, id, &name) && !strchr(name, '/') ? 1 : 0;
}

/* templateID: a runtime's name or alias, the base template, or a
 * snapshot (*snapshot set: the sandbox is a fork of its checkpoint). */
static int template_of(const json_t *in, const struct runtime *rts, size_t n, json_t *native, char *template,
		       size_t tlen, bool *snapshot, char *err, size_t errlen)
{
	const json_t *t = json_object_get(in, "templateID");
	if (t && !json_is_string(t))
		return fail(400, err, errlen, "templateID: must be a string");
	const char *name = t ? json_string_value(t) : E2B_BASE_TEMPLATE;
	char ref[E2B_SNAPSHOT_MAX + 1];
	*snapshot = false;
	if (!strcmp(name, E2B_BASE_TEMPLATE)) {
		snprintf(template, tlen, "%s", E2B_BASE_TEMPLATE);
		return 0;
	}
	if (e2b_snapshot_ref(name, ref)) {
		snprintf(template, tlen, "%s", name);
		json_object_set_new(native, "from_checkpoint", json_string(ref));
		*snapshot = true;
		return 0;
	}
	const struct runtime *rt = runtime_pick(rts, n, name);
	if (!rt) {
		char q[80];
		return fail(404, err, errlen, "template '%s' not found: the templates are the runtimes and '%s'",
			    errmsg_printable(q, sizeof(q), name), E2B_BASE_TEMPLATE);
	}
	snprintf(template, tlen, "%s", rt->name);
	json_object_set_new(native, "runtime", json_string(rt->name));
	return 0;
}

static int body_of(const json_t *in, const struct runtime *rts, size_t n, const struct tenant_reach *reach,
		   json_t *native, char *template, size_t tlen, char *err, size_t errlen)
{
	static const char *const known[] = { "templateID",	      "timeout", "metadata", "envVars",
					     "allow_internet_access", "network", "autoPause", "secure" };
	const char *k;
	const json_t *v;
	json_object_foreach((json_t *)in, k, v) {
		size_t i = 0;
		while (i < sizeof(known) / sizeof(known[0]) && strcmp(k, known[i]))
			i++;
		if (i == sizeof(known) / sizeof(known[0])) {
			char q[64];
			return fail(400, err, errlen, "%s: not available in vmrun (docs/e2b.md)",
				    errmsg_printable(q, sizeof(q), k));
		}
	}
	bool snapshot;
	int st = template_of(in, rts, n, native, template, tlen, &snapshot, err, errlen);
	if (st)
		return st;
	/* a fork is its checkpoint's VM: its environment and network too */
	static const char *const own[] = { "envVars", "network", "allow_internet_access" };
	for (size_t i = 0; snapshot && i < sizeof(own) / sizeof(own[0]); i++)
		if (json_object_get(in, own[i]))
			return fail(400, err, errlen, "%s: a sandbox from a snapshot has the snapshot's", own[i]);
	if ((v = json_object_get(in, "timeout"))) {
		if (!json_is_integer(v) || json_integer_value(v) < 1)
			return fail(400, err, errlen, "timeout: must be a whole number of seconds, at least 1");
		json_object_set(native, "timeout_s", (json_t *)v);
	}
	if ((v = json_object_get(in, "metadata")))
		json_object_set(native, "metadata", (json_t *)v);   /* checked by the native create */
	if ((v = json_object_get(in, "envVars")))
		json_object_set(native, "env", (json_t *)v);
	if ((v = json_object_get(in, "autoPause"))) {
		if (!json_is_boolean(v))
			return fail(400, err, errlen, "autoPause: must be true or false");
		json_object_set_new(native, "on_timeout", json_string(json_is_true(v) ? "pause" : "stop"));
	}
	return snapshot ? 0 : network_of(in, reach, native, err, errlen);
}

int e2b_create_body(const json_t *in, const struct runtime *rts, size_t n, const struct tenant_reach *reach,
		    json_t **native, char *template, size_t tlen, char *err, size_t errlen)
{
	*native = NULL;
	if (!json_is_object(in))
		return fail(400, err, errlen, "the body must be a JSON object");
	json_t *o = json_object();
	if (!o)
		return fail(500, err, errlen, "out of memory");
	int st = body_of(in, rts, n, reach, o, template, tlen, err, errlen);
	if (st) {
		json_decref(o);
		return st;
	}
	*native = o;
	return 0;
}

/* ---- views ---------------------------------------------------------------------- */

const char *e2b_state(const json_t *view)
{
	const char *s = json_string_value(json_object_get(view, "state"));
	if (!s)
		return NULL;
	if (!strcmp(s, "starting") || !strcmp(s, "running") || !strcmp(s, "stopping"))
		return "running";
	return !strcmp(s, "paused") ? "paused" : NULL;
}

static const char *template_name(const json_t *view)
{
	const char *rt = json_string_value(json_object_get(view, "runtime"));
	return rt ? rt : E2B_BASE_TEMPLATE;
}

json_t *e2b_sandbox(const json_t *view, const char *token)
{
	const json_t *node = json_object_get(view, "node");
	json_t *s = json_pack("{s:O,s:s,s:s,s:O,s:s,s:n,s:n}", "sandboxID", json_object_get(view, "id"), "templateID",
			      template_name(view), "alias", template_name(view), "clientID",
			      json_is_string(node) ? node : json_null(), "envdVersion", E2B_ENVD_VERSION, "domain",
			      "trafficAccessToken");
	if (s && token)
		json_object_set_new(s, "envdAccessToken", json_string(token));
	return s;
}

json_t *e2b_detail(const json_t *view)
{
	const char *state = e2b_state(view);
	if (!state)
		return NULL;
	const json_t *lim = json_object_get(view, "limits"), *cpus = json_object_get(lim, "cpus");
	const char *ot = json_string_value(json_object_get(view, "on_timeout"));
	/* E2B's end: when its timeout ends it; a paused one's clock is
	 * stopped, so its start stands in for it as E2B's does */
	const json_t *end = json_object_get(view, "timeout_at");
	return json_pack("{s:O,s:s,s:s,s:O,s:O,s:s,s:O,s:O,s:I,s:O,s:O,s:s,s:{s:s,s:b},s:[]}", "sandboxID",
			 json_object_get(view, "id"), "templateID", template_name(view), "alias", template_name(view),
			 "clientID", json_object_get(view, "node"), "metadata", json_object_get(view, "metadata"), "state",
			 state, "startedAt", json_object_get(view, "started_at"), "endAt",
			 json_is_string(end) ? end : json_object_get(view, "started_at"), "cpuCount",
			 json_is_integer(cpus) ? json_integer_value(cpus) : (json_int_t)1, "memoryMB",
			 json_object_get(lim, "memory_mib"), "diskSizeMB", json_object_get(lim, "disk_mib"), "envdVersion",
			 E2B_ENVD_VERSION, "lifecycle", "onTimeout", ot && !strcmp(ot, "pause") ? "pause" : "kill",
			 "autoResume", false, "volumeMounts");
}

/* An API time ("2026-12-06T10:00:00.000Z") in Unix ms, or -1. */
static int64_t time_ms(const json_t *t)
{
	struct tm tm = { 0 };
	const char *s = json_string_value(t), *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	if (!end)
		return -1;
	return (int64_t)timegm(&tm) * 1000;
}

json_t *e2b_metric(const json_t *view, const json_t *usage, int64_t now_ms)
{
	const json_t *lim = json_object_get(view, "limits"), *cpus = json_object_get(lim, "cpus");
	json_int_t ncpu = json_is_integer(cpus) && json_integer_value(cpus) > 0 ? json_integer_value(cpus) : 1;
	int64_t started = time_ms(json_object_get(view, "started_at"));
	double cpu_ms = json_number_value(json_object_get(usage, "cpu_ms"));
	double pct = started >= 0 && now_ms > started ? cpu_ms * 100.0 / (double)(now_ms - started) / (double)ncpu : 0;
	char when[CLOCK_ISO8601_MAX];
	const char *at = clock_iso8601(now_ms, when);
	return json_pack("{s:s,s:I,s:f,s:I,s:I,s:I,s:I,s:I,s:I}", "timestamp", at ? at : "", "timestampUnix",
			 (json_int_t)(now_ms / 1000), "cpuUsedPct", pct > 100 ? 100.0 : pct, "cpuCount", ncpu, "memUsed",
			 (json_int_t)json_number_value(json_object_get(usage, "memory_bytes")), "memTotal",
			 json_integer_value(json_object_get(lim, "memory_mib")) * 1048576, "memCache", (json_int_t)0,
			 "diskUsed", (json_int_t)json_number_value(json_object_get(usage, "disk_bytes")), "diskTotal",
			 json_integer_value(json_object_get(lim, "disk_mib")) * 1048576);
}

/* ---- the listing's filters ------------------------------------------------------- */

#define META_TEXT_MAX 1024   /* a metadata key or value, decoded: longer than a sandbox's may be */

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decode [p, p+n) into out (cap bytes, NUL-terminated): false
 * when malformed or too long. */
static bool unescape(const char *p, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (c == '%') {
			if (i + 2 >= n)
				return false;
			int hi = hexval(p[i + 1]), lo = hexval(p[i + 2]);
			if (hi < 0 || lo < 0)
				return false;
			c = (char)(hi * 16 + lo);
			i += 2;
		} else if (c == '+') {
			c = ' ';
		}
		if (c == '\0' || o + 1 >= cap)
			return false;
		out[o++] = c;
	}
	out[o] = '\0';
	return true;
}

/* A key or value of the metadata query, [p, p+n): decoded twice, as the
 * SDK encoded it (each part, then the pairs as a query string). */
static bool part_of(const char *p, size_t n, char *out, size_t cap)
{
	char once[META_TEXT_MAX];
	return unescape(p, n, once, sizeof(once)) && unescape(once, strlen(once), out, cap);
}

bool e2b_metadata_match(const json_t *view, const char *query)
{
	const json_t *meta = json_object_get(view, "metadata");
	const char *p = query;
	while (*p) {
		size_t len = strcspn(p, "&");
		const char *eq = memchr(p, '=', len);
		char k[META_TEXT_MAX], v[META_TEXT_MAX];
		if (!eq || !part_of(p, (size_t)(eq - p), k, sizeof(k)) ||
		    !part_of(eq + 1, len - (size_t)(eq + 1 - p), v, sizeof(v)))
			return false;
		const char *have = json_string_value(json_object_get(meta, k));
		if (!have || strcmp(have, v))
			return false;
		p += len;
		if (*p == '&')
			p++;
	}
	return true;
}

bool e2b_state_match(const json_t *view, const char *states)
{
	const char *s = e2b_state(view);
	if (!s)
		return false;
	if (!states || !*states)
		return true;
	size_t n = strlen(s);
	for (const char *p = states; *p;) {
		size_t len = strcspn(p, ",");
		if (len == n && !strncmp(p, s, n))
			return true;
		p += len;
		if (*p == ',')
			p++;
	}
	return false;
}

bool e2b_domain_ok(const char *name)
{
	size_t n = strlen(name), label = 0;
	if (!n || n >= E2B_DOMAIN_MAX || name[0] == '.' || name[n - 1] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = name[i];
		if (ch == '.') {
			if (!label || name[i - 1] == '-')
				return false;
			label = 0;
		} else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
			   (ch == '-' && label)) {
			if (++label > 63)
				return false;
		} else {
			return false;
		}
	}
	return name[n - 1] != '-';
}

int e2b_host_sandbox(const char *host, const char *domain, char id[33])
{
	if (!host || !*domain)
		return 0;
	size_t n = strcspn(host, ":"), dn = strlen(domain);
	const char *dash = memchr(host, '-', n);
	/* PORT-ID.DOMAIN: digits, a hyphen, 32 hex digits, a dot, the domain */
	if (!dash || dash == host || (size_t)(dash - host) > 5 || strspn(host, "0123456789") != (size_t)(dash - host))
		return 0;
	const char *sid = dash + 1;
	if ((size_t)(host + n - sid) != 32 + 1 + dn || sid[32] != '.' || strncasecmp(sid + 33, domain, dn))
		return 0;
	for (int i = 0; i < 32; i++) {
		char ch = (char)tolower((unsigned char)sid[i]);
		if (!strchr("0123456789abcdef", ch) || !ch)
			return 0;
		id[i] = ch;
	}
	id[32] = '\0';
	return 1;
}

json_t *e2b_error(unsigned status, const char *message)
{
	return json_pack("{s:I,s:s}", "code", (json_int_t)status, "message", message);
}
