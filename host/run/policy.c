#include "policy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "textfile.h"

/* Append path to a list of at most PROTO_MAX_ALLOW entries. */
static int add_path(char (**list)[POLICY_PATH_MAX], unsigned *n, const char *path)
{
	if (*n == PROTO_MAX_ALLOW || path[0] != '/' || strlen(path) >= POLICY_PATH_MAX)
		return -1;
	if (!*list && !(*list = calloc(PROTO_MAX_ALLOW, POLICY_PATH_MAX)))
		return -1;
	strcpy((*list)[(*n)++], path);
	return 0;
}

static int load_manifest(struct policy *p, FILE *f, const char *file, char *err, size_t errlen)
{
	char line[POLICY_PATH_MAX + 2];
	enum textfile_line r;
	if (!f)
		return 0;   /* ceilings only (run_policy_ceilings): no program to allow */
	for (unsigned no = 1; (r = textfile_read_line(f, line, sizeof(line))) != TEXTFILE_EOF; no++) {
		if (r != TEXTFILE_OK)
			return textfile_bad_line(err, errlen, "program manifest", file, no, r, sizeof(line));
		if (!line[0])
			continue;
		if (add_path(&p->manifest, &p->nmanifest, line))
			return errf(err, errlen, "program manifest %s line %u: bad or too many entries at '%.60s'", file,
				    no, line);
	}
	if (ferror(f))
		return errf(err, errlen, "program manifest %s: read error", file);
	return 0;
}

/* The state of one file being applied. */
struct apply_ctx {
	struct policy *p;
	enum policy_trust trust;
	bool own_allow;                        /* the file's allow lines have begun */
	char (*base)[POLICY_PATH_MAX];         /* the allowlist before them */
	unsigned nbase;
	bool own_ceiling_host, own_ceiling_addr;   /* the file's ceiling lines of each kind have begun */
	bool base_taken;                       /* base_* hold the network ceiling before them */
	bool base_any_host;
	struct net_rule *base_ceiling;
	unsigned nbase_ceiling;
};

/* Append a rule to a list of at most POLICY_NET_RULES_MAX. */
static int add_rule(struct net_rule **list, unsigned *n, const struct net_rule *r)
{
	if (*n == POLICY_NET_RULES_MAX)
		return -1;
	if (!*list && !(*list = calloc(POLICY_NET_RULES_MAX, sizeof(**list))))
		return -1;
	(*list)[(*n)++] = *r;
	return 0;
}

bool policy_net_admits(const struct policy *p, const struct net_rule *r)
{
	return net_ceiling_admits(r, p->net.any_host, p->net.ceiling, p->net.nceiling);
}

/* Drop the rules of one kind (addresses or names) from the ceiling. */
static void drop_kind(struct policy *p, bool addr)
{
	unsigned k = 0;
	for (unsigned i = 0; i < p->net.nceiling; i++)
		if ((p->net.ceiling[i].kind == NET_RULE_ADDR) != addr)
			p->net.ceiling[k++] = p->net.ceiling[i];
	p->net.nceiling = k;
	if (!addr)
		p->net.any_host = false;
}

/* net_ceiling and net_ceiling_addr: a file's lines of either kind replace
 * the ceiling of that kind before them, which a lower-only file may
 * narrow but never widen. */
static int apply_ceiling(struct apply_ctx *a, const char *val, bool addr, char *why, size_t len)
{
	struct policy *p = a->p;
	if (!a->base_taken) {
		a->base_any_host = p->net.any_host;
		a->nbase_ceiling = p->net.nceiling;
		if (p->net.nceiling && !(a->base_ceiling = malloc(p->net.nceiling * sizeof(*a->base_ceiling))))
			return errf(why, len, "out of memory");
		if (p->net.nceiling)
			memcpy(a->base_ceiling, p->net.ceiling, p->net.nceiling * sizeof(*a->base_ceiling));
		a->base_taken = true;
	}
	bool *own = addr ? &a->own_ceiling_addr : &a->own_ceiling_host;
	if (!*own) {
		drop_kind(p, addr);
		*own = true;
	}
	if (!addr && !strcmp(val, "none"))
		return 0;
	struct net_rule r;
	if (net_rule_parse(val, addr, &r, why, len) < 0)
		return -1;
	bool was = net_ceiling_admits(&r, a->base_any_host, a->base_ceiling, a->nbase_ceiling);
	if (a->trust == POLICY_LOWER_ONLY && !was)
		return errf(why, len, "widens the network ceiling; only root's policy may");
	if (add_rule(&p->net.ceiling, &p->net.nceiling, &r))
		return errf(why, len, "more than %u network ceiling rules", POLICY_NET_RULES_MAX);
	return 0;
}

/* secret_header and secret_ca: root's alone, since vmrun reads their
 * files with its own rights. */
static int apply_secret(struct apply_ctx *a, const char *key, const char *val, char *why, size_t len)
{
	struct policy *p = a->p;
	if (a->trust == POLICY_LOWER_ONLY)
		return errf(why, len, "only root's policy may name a secret");
	const char *at = strstr(val, "=@");
	if (strlen(val) >= POLICY_PATH_MAX)
		return errf(why, len, "longer than %d bytes", POLICY_PATH_MAX - 1);
	if (!strcmp(key, "secret_ca")) {
		if (val[0] != '/' || strlen(val) >= sizeof(p->net.secret_ca))
			return errf(why, len, "not an absolute path");
		memcpy(p->net.secret_ca, val, strlen(val) + 1);   /* length checked above */
		return 0;
	}
	if (!at || at[2] != '/' || !strchr(val, ':') || strchr(val, ':') > at)
		return errf(why, len, "not HOST:HEADER=@/ABSOLUTE/FILE");
	if (p->net.nsecret == POLICY_SECRETS_MAX)
		return errf(why, len, "more than %d secret headers", POLICY_SECRETS_MAX);
	if (!p->net.secret && !(p->net.secret = calloc(POLICY_SECRETS_MAX, POLICY_PATH_MAX)))
		return errf(why, len, "out of memory");
	memcpy(p->net.secret[p->net.nsecret++], val, strlen(val) + 1);
	return 0;
}

/* One more DNS server for the proxy: "A.B.C.D", "[V6]", either with
 * ":PORT", in the strict spelling c-ares reads. */
static int apply_resolver(struct apply_ctx *a, const char *val, char *why, size_t len)
{
	if (a->trust == POLICY_LOWER_ONLY)
		return errf(why, len, "only root's policy may name the proxy's DNS server");
	char host[64];
	const char *port = NULL;
	uint8_t addr[16];
	size_t hl;
	if (val[0] == '[') {
		const char *e = strchr(val, ']');
		hl = e ? (size_t)(e - val - 1) : sizeof(host);
		port = e && e[1] == ':' ? e + 2 : NULL;
		if (e && e[1] && !port)
			hl = sizeof(host);
	} else {
		hl = strcspn(val, ":");
		port = val[hl] ? val + hl + 1 : NULL;
	}
	if (hl >= sizeof(host))
		return errf(why, len, "not an IP address with an optional :PORT");
	snprintf(host, sizeof(host), "%.*s", (int)hl, val + (val[0] == '['));
	int fam = val[0] == '[' ? AF_INET6 : AF_INET;
	char *end = NULL;
	unsigned long pn = port ? strtoul(port, &end, 10) : 53;
	if (inet_pton(fam, host, addr) != 1 || (port && (*port < '0' || *port > '9' || *end || pn < 1 || pn > 65535)))
		return errf(why, len, "not an IP address with an optional :PORT");
	char *list = a->p->net.resolver;
	size_t have = strlen(list), vl = strlen(val), cap = sizeof(a->p->net.resolver);
	if (have + (have ? 1 : 0) + vl + 1 > cap)
		return errf(why, len, "too many DNS servers");
	if (have)
		list[have++] = ',';
	memcpy(list + have, val, vl + 1);
	return 0;
}

static int apply_allow_net(struct apply_ctx *a, const char *val, bool addr, char *why, size_t len)
{
	struct net_rule r;
	if (net_rule_parse(val, addr, &r, why, len) < 0)
		return -1;
	if (add_rule(&a->p->net.allow, &a->p->net.nallow, &r))
		return errf(why, len, "more than %u allow_net rules", POLICY_NET_RULES_MAX);
	return 0;
}

static bool listed(char (*list)[POLICY_PATH_MAX], unsigned n, const char *path)
{
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(list[i], path))
			return true;
	return false;
}

static int apply_allow(struct apply_ctx *a, const char *val, char *why, size_t len)
{
	if (!a->own_allow) {
		/* The file's list replaces the one before it, which a
		 * lower-only file may narrow but never extend. */
		a->base = a->p->allow;
		a->nbase = a->p->nallow;
		a->p->allow = NULL;
		a->p->nallow = 0;
		a->own_allow = true;
	}
	if (a->trust == POLICY_LOWER_ONLY && !listed(a->base, a->nbase, val))
		return errf(why, len, "%.200s is not allowed by the policy it narrows", val);
	if (add_path(&a->p->allow, &a->p->nallow, val))
		return errf(why, len, "not an absolute path, too long, or too many entries");
	return 0;
}

/* Apply one "key value" line; why gets the reason when it cannot. */
static int apply(struct apply_ctx *a, const char *key, const char *val, char *why, size_t len)
{
	struct policy *p = a->p;
	if (!strcmp(key, "allow"))
		return apply_allow(a, val, why, len);
	if (!strcmp(key, "net_ceiling") || !strcmp(key, "net_ceiling_addr"))
		return apply_ceiling(a, val, !strcmp(key, "net_ceiling_addr"), why, len);
	if (!strcmp(key, "secret_header") || !strcmp(key, "secret_ca"))
		return apply_secret(a, key, val, why, len);
	if (!strcmp(key, "net_resolver"))
		return apply_resolver(a, val, why, len);
	if (!strcmp(key, "allow_net") || !strcmp(key, "allow_net_addr"))
		return apply_allow_net(a, val, !strcmp(key, "allow_net_addr"), why, len);
	struct { const char *key; uint64_t *dst; uint64_t max; } nums[] = {
		{ "max_timeout", &p->max_timeout_s, 86400 }, { "max_memory", &p->max_memory_mib, 65536 },
		{ "max_cpus", &p->max_cpus, 32 },            { "max_disk", &p->max_disk_mib, 65536 },
		{ "max_output", &p->max_output, UINT64_MAX }, { "nproc", &p->nproc, 1u << 20 },
		{ "nofile", &p->nofile, 1u << 20 },          { "fsize", &p->fsize, UINT64_MAX },
		{ "artifacts_max_bytes", &p->artifacts_max_bytes, UINT64_MAX },
		{ "artifacts_max_files", &p->artifacts_max_files, 1u << 20 },
		{ "artifacts_max_depth", &p->artifacts_max_depth, 256 },
		{ "cpu_quota", &p->cpu_quota_pct, 3200 },
		{ "net_tunnels", &p->net.tunnels, 1024 }, { "net_max_up", &p->net.max_up, UINT64_MAX / 2 },
		{ "net_max_down", &p->net.max_down, UINT64_MAX / 2 }, { "net_idle", &p->net.idle_s, 86400 },
	};
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		if (strcmp(key, nums[i].key))
			continue;
		char *end;
		errno = 0;
		unsigned long long v = strtoull(val, &end, 10);
		if (errno || *end || val[0] < '0' || val[0] > '9' || v == 0 || v > nums[i].max)
			return errf(why, len, "not a number from 1 to %llu", (unsigned long long)nums[i].max);
		/* A CPU quota of 0 is none at all, the highest there is. */
		bool quota = nums[i].dst == &p->cpu_quota_pct;
		bool raises = quota ? *nums[i].dst && v > *nums[i].dst : v > *nums[i].dst;
		if (a->trust == POLICY_LOWER_ONLY && raises)
			return errf(why, len, "raises the ceiling of %llu; only root's policy may", (unsigned long long)*nums[i].dst);
		*nums[i].dst = v;
		return 0;
	}
	return errf(why, len, "unknown key");
}

int policy_apply(struct policy *p, FILE *f, const char *file, enum policy_trust trust, char *err, size_t errlen)
{
	char line[512];
	struct apply_ctx a = { .p = p, .trust = trust };
	int rc = 0;
	enum textfile_line r;
	for (unsigned no = 1; (r = textfile_read_line(f, line, sizeof(line))) != TEXTFILE_EOF; no++) {
		if (r != TEXTFILE_OK) {
			rc = textfile_bad_line(err, errlen, "policy", file, no, r, sizeof(line));
			break;
		}
		char *s = line + strspn(line, " \t");
		if (!*s || *s == '#')
			continue;
		char key[64], val[POLICY_PATH_MAX + 1], extra, why[256] = "not KEY VALUE";
		if (sscanf(s, "%63s %256s %c", key, val, &extra) != 2 || apply(&a, key, val, why, sizeof(why))) {
			rc = errf(err, errlen, "policy %s line %u: cannot use '%.80s': %s", file, no, s, why);
			break;
		}
	}
	if (!rc && ferror(f))
		rc = errf(err, errlen, "policy %s: read error", file);
	free(a.base);
	free(a.base_ceiling);
	return rc;
}

int policy_load(struct policy *p, FILE *manifest, const char *manifest_name, char *err, size_t errlen)
{
	*p = (struct policy){
		.max_timeout_s = 300, .max_memory_mib = 4096, .max_cpus = 8, .max_disk_mib = 4096,
		.max_output = 64u << 20, .nproc = 256, .nofile = 1024, .fsize = 1u << 30,
		.artifacts_max_bytes = 64u << 20, .artifacts_max_files = 1000, .artifacts_max_depth = 16,
		.net = { .any_host = true, .tunnels = 16, .max_up = 64u << 20, .max_down = 1u << 30, .idle_s = 30 },
	};
	if (load_manifest(p, manifest, manifest_name, err, errlen))
		return -1;
	for (unsigned i = 0; i < p->nmanifest; i++)
		add_path(&p->allow, &p->nallow, p->manifest[i]);
	return 0;
}

void policy_free(struct policy *p)
{
	free(p->manifest);
	free(p->allow);
	p->manifest = p->allow = NULL;
	p->nmanifest = p->nallow = 0;
	free(p->net.ceiling);
	free(p->net.allow);
	free(p->net.secret);
	p->net.secret = NULL;
	p->net.nsecret = 0;
	p->net.ceiling = p->net.allow = NULL;
	p->net.nceiling = p->net.nallow = 0;
}

enum policy_verdict policy_check_program(const struct policy *p, const char *prog, char *resolved, size_t len)
{
	resolved[0] = '\0';
	if (!*prog)
		return POLICY_NOT_FOUND;
	if (strchr(prog, '/')) {
		/* Only exact absolute paths can be vouched for here; anything
		 * relative or with dot components is the workspace's, which no
		 * allowlist names. */
		snprintf(resolved, len, "%s", prog);
		if (prog[0] != '/' || strstr(prog, "/./") || strstr(prog, "/../") || strstr(prog, "//"))
			return POLICY_DENIED;
		return listed(p->allow, p->nallow, prog) ? POLICY_ALLOWED : POLICY_DENIED;
	}
	/* The command's PATH in the guest, searched as the agent does. */
	for (const char *dir = PROTO_PATH; *dir; dir += strcspn(dir, ":") + (dir[strcspn(dir, ":")] != '\0')) {
		char cand[POLICY_PATH_MAX];
		int n = snprintf(cand, sizeof(cand), "%.*s/%s", (int)strcspn(dir, ":"), dir, prog);
		if (n < 0 || (size_t)n >= sizeof(cand) || !listed(p->manifest, p->nmanifest, cand))
			continue;
		snprintf(resolved, len, "%s", cand);
		return listed(p->allow, p->nallow, cand) ? POLICY_ALLOWED : POLICY_DENIED;
	}
	return POLICY_NOT_FOUND;
}
