#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "policy.h"
#include "store.h"

void config_defaults(struct vmrund_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->listen_host, sizeof(c->listen_host), "127.0.0.1");
	c->listen_port = 8080;
	snprintf(c->state_db, sizeof(c->state_db), "/var/lib/vmrun/state.db");
	snprintf(c->run_dir, sizeof(c->run_dir), "/var/lib/vmrun/runs");
	snprintf(c->keys, sizeof(c->keys), "/etc/vmrun/keys");
	snprintf(c->policy, sizeof(c->policy), "%s", POLICY_SYSTEM_FILE);
	snprintf(c->audit_log, sizeof(c->audit_log), "/var/log/vmrun/audit.jsonl");
	c->queue_max = 256;
	c->max_body = 16u << 20;
	c->max_connections = 256;
	/* a quarter of the connections: one client cannot hold them all,
	 * and a frontend that puts every tenant behind one address raises it */
	c->max_connections_per_address = 64;
	c->connection_timeout_s = 30;
	/* a head is a few hundred bytes that come in one packet; 10 s is
	 * generous for a slow link and short for a slowloris */
	c->request_head_timeout_s = 10;
	/* an eighth of the connections: a tenant's streams and waits can
	 * hold no more than that many of their threads */
	c->max_streams_per_tenant = 32;
	c->wait_max_s = 300;
	snprintf(c->judge0_prefix, sizeof(c->judge0_prefix), "/judge0");
	snprintf(c->e2b_prefix, sizeof(c->e2b_prefix), "/e2b");
	judge0_config_defaults(&c->judge0);
	c->retention_s = 86400;
	/* A week: clients read a result within minutes, the audit log keeps
	 * every run's record for good, and the store stays bounded by a
	 * week of output rather than growing forever. */
	c->run_retention_s = 7 * 86400;
	c->slot_memory_mib = 512;
	c->lease_s = 10;
	c->blob_max_mib = 64;
}

static int parse_uint(const char *v, unsigned long long max, unsigned long long *out)
{
	char *end;
	errno = 0;
	if (*v < '0' || *v > '9')
		return -1;
	unsigned long long n = strtoull(v, &end, 10);
	if (errno || *end || n > max)
		return -1;
	*out = n;
	return 0;
}

/* HOST:PORT, [V6]:PORT; the host numeric, so that what we bind is what
 * the file says, with no resolver in between. */
static int parse_listen(struct vmrund_config *c, const char *v)
{
	if (!strncmp(v, "unix:", 5)) {
		/* an absolute path that fits a socket's address */
		if (v[5] != '/' || strlen(v + 5) >= 108)
			return -1;
		snprintf(c->listen_unix, sizeof(c->listen_unix), "%s", v + 5);
		return 0;
	}
	c->listen_unix[0] = '\0';
	const char *colon = strrchr(v, ':');
	if (!colon || colon == v)
		return -1;
	char host[64];
	size_t hl = (size_t)(colon - v);
	if (v[0] == '[') {
		if (hl < 3 || v[hl - 1] != ']')
			return -1;
		v++;
		hl -= 2;
	}
	if (hl >= sizeof(host))
		return -1;
	memcpy(host, v, hl);
	host[hl] = '\0';
	unsigned char buf[16];
	unsigned long long port;
	if ((inet_pton(AF_INET, host, buf) != 1 && inet_pton(AF_INET6, host, buf) != 1) ||
	    parse_uint(colon + 1, 65535, &port) || port == 0)
		return -1;
	snprintf(c->listen_host, sizeof(c->listen_host), "%s", host);
	c->listen_port = (unsigned)port;
	return 0;
}

static int set_path(char *dst, size_t cap, const char *v, bool empty_ok)
{
	if ((!*v && !empty_ok) || (*v && *v != '/') || strlen(v) >= cap)
		return -1;
	snprintf(dst, cap, "%s", v);
	return 0;
}

/* One key: 0, or -1 with the reason in err (without the line number). */
static int apply(struct vmrund_config *c, const char *k, const char *v, char *err, size_t errlen)
{
	unsigned long long n;
	struct {
		const char *key;
		unsigned *dst;
		unsigned long long min, max;
	} nums[] = {
		{ "slots", &c->slots, 0, 4096 },
		{ "queue_max", &c->queue_max, 1, 1000000 },
		{ "max_connections", &c->max_connections, 1, 100000 },
		{ "max_connections_per_address", &c->max_connections_per_address, 0, 100000 },
		{ "connection_timeout_s", &c->connection_timeout_s, 1, 3600 },
		{ "request_head_timeout_s", &c->request_head_timeout_s, 1, 3600 },
		{ "max_streams_per_tenant", &c->max_streams_per_tenant, 1, 100000 },
		{ "wait_max_s", &c->wait_max_s, 0, 86400 },
		{ "retention_s", &c->retention_s, 0, 100u * 86400 },
		{ "run_retention_s", &c->run_retention_s, 0, 3650u * 86400 },
		{ "slot_memory_mib", &c->slot_memory_mib, 64, 1u << 20 },
		{ "lease_s", &c->lease_s, 2, 3600 },
		{ "blob_max_mib", &c->blob_max_mib, 1, 4096 },
		/* admission by size (issue 38): 0 is "from the machine" */
		{ "node_memory_mib", &c->node_memory_mib, 0, 1u << 30 },
		{ "node_disk_mib", &c->node_disk_mib, 0, 1u << 30 },
	};
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		if (strcmp(k, nums[i].key))
			continue;
		if (parse_uint(v, nums[i].max, &n) || n < nums[i].min)
			return errf(err, errlen, "%s: a whole number from %llu to %llu, not \"%.64s\"", k, nums[i].min,
				    nums[i].max, v);
		*nums[i].dst = (unsigned)n;
		return 0;
	}
	struct {
		const char *key;
		char *dst;
		size_t cap;
		bool empty_ok;
	} paths[] = {
		{ "state_db", c->state_db, sizeof(c->state_db), false },
		{ "run_dir", c->run_dir, sizeof(c->run_dir), false },
		{ "keys", c->keys, sizeof(c->keys), false },
		{ "audit_log", c->audit_log, sizeof(c->audit_log), true },
		{ "worker", c->worker, sizeof(c->worker), true },
		{ "sandbox_supervisor", c->sandbox_supervisor, sizeof(c->sandbox_supervisor), true },
		{ "guest_dir", c->guest_dir, sizeof(c->guest_dir), true },
		{ "policy", c->policy, sizeof(c->policy), true },
		{ "snapshot_dir", c->snapshot_dir, sizeof(c->snapshot_dir), true },
	};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		if (strcmp(k, paths[i].key))
			continue;
		if (set_path(paths[i].dst, paths[i].cap, v, paths[i].empty_ok))
			return errf(err, errlen, "%s: an absolute path%s", k, paths[i].empty_ok ? ", or nothing" : "");
		return 0;
	}
	if (!strcmp(k, "listen"))
		return parse_listen(c, v) ? errf(err, errlen, "listen: a numeric ADDRESS:PORT or unix:PATH, not \"%.64s\"", v)
					  : 0;
	if (!strcmp(k, "advertise")) {
		/* an http:// URL with a host, no path but "/", nothing that would end a header */
		size_t hl = strncmp(v, "http://", 7) ? 0 : strcspn(v + 7, "/");
		if (*v && (!hl || strlen(v) >= sizeof(c->advertise) || (v[7 + hl] && strcmp(v + 7 + hl, "/")) ||
			   v[strcspn(v, " \t\r\n")]))
			return errf(err, errlen, "advertise: http://HOST:PORT, or nothing");
		snprintf(c->advertise, sizeof(c->advertise), "%s", v);
		return 0;
	}
	if (!strcmp(k, "max_body")) {
		if (parse_uint(v, 1u << 30, &n) || n < 1024)
			return errf(err, errlen, "max_body: bytes from 1024 to %u", 1u << 30);
		c->max_body = (size_t)n;
		return 0;
	}
	if (!strcmp(k, "store")) {
		/* the URI carries what libpq takes (host, port, user,
		 * dbname, sslmode...); libpq itself parses it at open */
		if (!store_is_pg(v) || strlen(v) >= sizeof(c->store))
			return errf(err, errlen, "store: a postgresql:// URI (SQLite is state_db)");
		snprintf(c->store, sizeof(c->store), "%s", v);
		return 0;
	}
	if (!strcmp(k, "node")) {
		/* a name other nodes see in the store and messages: kept
		 * printable and short */
		size_t n = strlen(v);
		if (!n || n >= sizeof(c->node) || strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_") != n)
			return errf(err, errlen, "node: 1 to 63 of [A-Za-z0-9._-]");
		snprintf(c->node, sizeof(c->node), "%s", v);
		return 0;
	}
	if (!strcmp(k, "anonymous_tenant")) {
		if (strlen(v) >= sizeof(c->anonymous_tenant))
			return errf(err, errlen, "anonymous_tenant: too long");
		snprintf(c->anonymous_tenant, sizeof(c->anonymous_tenant), "%s", v);
		return 0;
	}
	if (!strcmp(k, "snapshot_scope")) {
		if (strcmp(v, "shared") && strcmp(v, "tenant"))
			return errf(err, errlen, "snapshot_scope: shared or tenant");
		c->snapshot_per_tenant = !strcmp(v, "tenant");
		return 0;
	}
	if (!strcmp(k, "judge0_prefix") || !strcmp(k, "e2b_prefix")) {
		bool j0 = !strcmp(k, "judge0_prefix");
		char *dst = j0 ? c->judge0_prefix : c->e2b_prefix;
		const char *other = j0 ? c->e2b_prefix : c->judge0_prefix;
		/* a path of its own: not one another API answers under */
		size_t n = strlen(v), on = strlen(other);
		if (n && (v[0] != '/' || n >= JUDGE0_PREFIX_MAX || v[n - 1] == '/' ||
			  strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/_-.") != n ||
			  strstr(v, "//") || !strncmp(v, "/v1", 3) || !strncmp(v, "/api", 4) ||
			  !strcmp(v, "/metrics") || !strncmp(v, "/healthz", 8) || !strncmp(v, "/readyz", 7) ||
			  (on && !strncmp(v, other, n < on ? n : on))))
			return errf(err, errlen, "%s: a path such as %s (not /v1, /api..., nor the other API's), or nothing",
				    k, j0 ? "/judge0" : "/e2b");
		snprintf(dst, JUDGE0_PREFIX_MAX, "%s", v);
		return 0;
	}
	if (!strcmp(k, "e2b_domain")) {
		if (*v && !e2b_domain_ok(v))
			return errf(err, errlen, "e2b_domain: a DNS name such as sandboxes.example.com, or nothing");
		snprintf(c->e2b_domain, sizeof(c->e2b_domain), "%s", v);
		return 0;
	}
	int j = judge0_config_set(&c->judge0, k, v, err, errlen);
	if (j)
		return j < 0 ? -1 : 0;
	if (!strcmp(k, "anonymous_from")) {
		if (strcmp(v, "loopback") && strcmp(v, "any"))
			return errf(err, errlen, "anonymous_from: loopback or any");
		c->anonymous_any = !strcmp(v, "any");
		return 0;
	}
	return errf(err, errlen, "unknown key \"%.64s\"", k);
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		s[--n] = '\0';
	return s;
}

int config_parse(struct vmrund_config *c, const char *text, size_t len, char *err, size_t errlen)
{
	char line[PATH_MAX + 128], why[256];
	unsigned lineno = 0;
	for (size_t pos = 0; pos < len;) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
		lineno++;
		if (n >= sizeof(line) || memchr(text + pos, '\0', n))
			return errf(err, errlen, "%u: line too long or not text", lineno);
		memcpy(line, text + pos, n);
		line[n] = '\0';
		pos += n + 1;
		char *l = trim(line);
		if (!*l || *l == '#')
			continue;
		char *eq = strchr(l, '=');
		if (!eq)
			return errf(err, errlen, "%u: expected KEY = VALUE", lineno);
		*eq = '\0';
		if (apply(c, trim(l), trim(eq + 1), why, sizeof(why)))
			return errf(err, errlen, "%u: %s", lineno, why);
	}
	return 0;
}

int config_load(struct vmrund_config *c, const char *path, bool optional, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return optional && errno == ENOENT ? 0 : errf(err, errlen, "%s: %s", path, strerror(errno));
	char buf[65536], why[400];
	size_t n = fread(buf, 1, sizeof(buf), f);
	bool big = n == sizeof(buf), bad = ferror(f);
	fclose(f);
	if (big || bad)
		return errf(err, errlen, "%s: %s", path, bad ? "read error" : "over 64 KiB");
	if (config_parse(c, buf, n, why, sizeof(why)))
		return errf(err, errlen, "%s:%s", path, why);
	return 0;
}

void config_node_size(const struct vmrund_config *c, uint64_t mem_total_mib, uint64_t fs_free_mib,
		      uint64_t *memory_mib, uint64_t *disk_mib)
{
	/* The host's own services, page cache, and each VM's vmm beyond its
	 * guest (JAIL_MEMORY_OVERHEAD_MIB) live in the reserve. */
	uint64_t reserve = mem_total_mib / 8 > 1024 ? mem_total_mib / 8 : 1024;
	uint64_t mem = mem_total_mib > reserve ? mem_total_mib - reserve : 0;
	uint64_t disk = fs_free_mib / 10 * 9;
	*memory_mib = c->node_memory_mib ? c->node_memory_mib : mem > 256 ? mem : 256;
	*disk_mib = c->node_disk_mib ? c->node_disk_mib : disk > 64 ? disk : 64;
}

unsigned config_slots(const struct vmrund_config *c, unsigned cpus, uint64_t mem_mib)
{
	if (c->slots)
		return c->slots;
	uint64_t by_mem = mem_mib / (c->slot_memory_mib ? c->slot_memory_mib : 512);
	uint64_t n = cpus < by_mem ? cpus : by_mem;
	return n ? (unsigned)n : 1;
}

int64_t config_retention_every_ms(const struct vmrund_config *c)
{
	int64_t every = 60000;
	if (c->run_retention_s && (int64_t)c->run_retention_s * 250 < every)
		every = (int64_t)c->run_retention_s * 250;
	return every < 1000 ? 1000 : every;
}

void config_local(struct vmrund_config *c, const char *dir)
{
	snprintf(c->listen_unix, sizeof(c->listen_unix), "%.90s/vmrund.sock", dir);
	snprintf(c->state_db, sizeof(c->state_db), "%.3000s/state.db", dir);
	snprintf(c->run_dir, sizeof(c->run_dir), "%.3000s/runs", dir);
	c->keys[0] = '\0';
	c->audit_log[0] = '\0';
	snprintf(c->anonymous_tenant, sizeof(c->anonymous_tenant), "%s", CONFIG_LOCAL_TENANT);
	c->anonymous_any = true;
	c->max_connections_per_address = 0;
}

void config_advertise(const struct vmrund_config *c, char *out, size_t len)
{
	bool wildcard = !strcmp(c->listen_host, "0.0.0.0") || !strcmp(c->listen_host, "::");
	if (c->advertise[0])
		snprintf(out, len, "%s", c->advertise);
	else if (c->listen_unix[0] || wildcard)
		snprintf(out, len, "%s", "");
	else
		snprintf(out, len, strchr(c->listen_host, ':') ? "http://[%s]:%u" : "http://%s:%u", c->listen_host,
			 c->listen_port);
}
