#include "tenants.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "errmsg.h"
#include "run_spec.h"

static bool name_ok(const char *s)
{
	size_t n = strlen(s);
	if (!n || n >= TENANT_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}

static bool key_ok(const char *s)
{
	size_t n = strlen(s);
	return n >= 16 && n <= TENANT_KEY_MAX && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
						    "0123456789._-") == n;
}

/* How many of r's rules are of the kind net= (addr false) or net_addr= takes. */
static unsigned count_kind(const struct tenant_reach *r, bool addr)
{
	unsigned n = 0;
	for (unsigned i = 0; i < r->n; i++)
		n += (r->rules[i].kind == NET_RULE_ADDR) == addr;
	return n;
}

static int add_net_rule(struct tenant_reach *r, const char *key, const char *text, bool addr, char *err, size_t errlen)
{
	char why[200], q[72];
	if (count_kind(r, addr) == TENANT_NET_RULES_MAX)
		return errf(err, errlen, "%s: at most %d rules", key, TENANT_NET_RULES_MAX);
	/* Room for both kinds at once: a tenant's rules are few and fixed. */
	if (!r->rules && !(r->rules = calloc(2 * TENANT_NET_RULES_MAX, sizeof(*r->rules))))
		return errf(err, errlen, "out of memory");
	if (net_rule_parse(text, addr, &r->rules[r->n], why, sizeof(why)))
		return errf(err, errlen, "%s: \"%s\": %s", key, errmsg_printable(q, sizeof(q), text), why);
	r->n++;
	return 0;
}

/* net=none|any|RULE,... and net_addr=none|RULE,... (the tenant's network
 * ceiling), or callback= and callback_addr= likewise. list is the text
 * after '=', cut up in place. */
static int net_option(struct tenant_reach *r, const char *key, char *list, bool addr, char *err, size_t errlen)
{
	if (!strcmp(list, "none"))
		return 0;
	if (!addr && !strcmp(list, "any")) {
		r->any = true;
		return 0;
	}
	/* net_addr has no "any": a private range needs naming */
	if (addr && !strcmp(list, "any"))
		return errf(err, errlen, "%s: \"any\" is for host names; name the address ranges", key);
	for (char *rule = list;;) {
		char *comma = strchr(rule, ',');
		if (comma)
			*comma = '\0';
		/* "none" and "any" stand alone: in a list they would read as
		 * host names nobody meant */
		if (!strcmp(rule, "none") || !strcmp(rule, "any"))
			return errf(err, errlen, "%s: \"%s\" only on its own, not in a list", key, rule);
		if (add_net_rule(r, key, rule, addr, err, errlen))
			return -1;
		if (!comma)
			return 0;
		rule = comma + 1;
	}
}

/* NAME=NUMBER options of a tenant line, and the rule lists (net=,
 * net_addr=, callback=, callback_addr=), each at most once (*seen). */
static int tenant_option(struct tenant *t, char *opt, unsigned *seen, char *err, size_t errlen)
{
	static const struct {
		const char *key;
		bool addr, callback;
	} lists[] = {
		{ "net", false, false }, { "net_addr", true, false },
		{ "callback", false, true }, { "callback_addr", true, true },
	};
	char *eq = strchr(opt, '=');
	char *end;
	if (!eq)
		return errf(err, errlen, "expected OPTION=NUMBER, not \"%.64s\"", opt);
	for (unsigned i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		if (strlen(lists[i].key) != (size_t)(eq - opt) || strncmp(opt, lists[i].key, (size_t)(eq - opt)))
			continue;
		if (*seen & 1u << i)
			return errf(err, errlen, "%s: given twice", lists[i].key);
		*seen |= 1u << i;
		return net_option(lists[i].callback ? &t->callback : &t->net, lists[i].key, eq + 1, lists[i].addr, err,
				  errlen);
	}
	errno = 0;
	double v = strtod(eq + 1, &end);
	/* !(in range), so that a NaN (strtod takes "nan") is refused here too:
	 * converting one to unsigned below would be undefined */
	if (errno || *end || eq[1] == '\0' || !(v >= 0 && v <= 1e6))
		return errf(err, errlen, "%.*s: a number from 0 to 1000000", (int)(eq - opt), opt);
	size_t kl = (size_t)(eq - opt);
	bool whole = v == (double)(unsigned)v;
	if (kl == 10 && !strncmp(opt, "concurrent", kl) && whole && v >= 1)
		t->concurrent = (unsigned)v;
	else if (kl == 6 && !strncmp(opt, "queued", kl) && whole)
		t->queued = (unsigned)v;
	else if (kl == 4 && !strncmp(opt, "rate", kl) && v > 0)
		t->rate = v;
	else if (kl == 5 && !strncmp(opt, "burst", kl) && v >= 1)
		t->burst = v;
	else if (kl == 14 && !strncmp(opt, "max_memory_mib", kl) && whole)
		t->max_memory_mib = (uint64_t)v;
	else if (kl == 12 && !strncmp(opt, "max_disk_mib", kl) && whole)
		t->max_disk_mib = (uint64_t)v;
	else if (kl == 9 && !strncmp(opt, "sandboxes", kl) && whole)
		t->sandboxes = (unsigned)v;
	else if (kl == 18 && !strncmp(opt, "sandbox_memory_mib", kl) && whole)
		t->sandbox_memory_mib = (uint64_t)v;
	else if (kl == 16 && !strncmp(opt, "sandbox_disk_mib", kl) && whole)
		t->sandbox_disk_mib = (uint64_t)v;
	else if (kl == 21 && !strncmp(opt, "max_sandbox_timeout_s", kl) && whole && v >= 1)
		t->max_sandbox_timeout_s = (unsigned)v;
	else if (kl == 15 && !strncmp(opt, "max_pause_ttl_s", kl) && whole && v >= 1)
		t->max_pause_ttl_s = (unsigned)v;
	else if (kl == 15 && !strncmp(opt, "max_checkpoints", kl) && whole && v >= 1)
		t->max_checkpoints = (unsigned)v;
	else if (kl == 18 && !strncmp(opt, "max_checkpoint_mib", kl) && whole && v >= 1)
		t->max_checkpoint_mib = (uint64_t)v;
	else
		return errf(err, errlen,
			    "unknown or out-of-range option \"%.64s\" (concurrent>=1, queued, rate>0, burst>=1, "
			    "max_memory_mib, max_disk_mib, sandboxes, sandbox_memory_mib, sandbox_disk_mib, "
			    "max_sandbox_timeout_s>=1, max_pause_ttl_s>=1, max_checkpoints>=1, max_checkpoint_mib>=1, net, net_addr, "
			    "callback, callback_addr)",
			    opt);
	return 0;
}

static int parse_tenant(struct tenants *ts, char *rest, char *err, size_t errlen)
{
	char *save, *name = strtok_r(rest, " \t", &save);
	if (!name || !name_ok(name))
		return errf(err, errlen, "tenant: a name of [A-Za-z0-9._-], 1 to 63 characters");
	if (tenants_by_name(ts, name) >= 0)
		return errf(err, errlen, "tenant %s: named twice", name);
	if (ts->n == TENANTS_MAX)
		return errf(err, errlen, "more than %d tenants", TENANTS_MAX);
	struct tenant t = { .concurrent = 4, .queued = 64, .rate = 10, .burst = 0,
			    .sandboxes = TENANT_DEFAULT_SANDBOXES, .max_sandbox_timeout_s = TENANT_DEFAULT_SANDBOX_TIMEOUT_S,
			    .max_pause_ttl_s = TENANT_DEFAULT_PAUSE_TTL_S, .max_checkpoints = TENANT_DEFAULT_CHECKPOINTS,
			    .max_checkpoint_mib = TENANT_DEFAULT_CHECKPOINT_MIB };
	snprintf(t.name, sizeof(t.name), "%s", name);
	unsigned seen = 0;
	for (char *opt; (opt = strtok_r(NULL, " \t", &save));)
		if (tenant_option(&t, opt, &seen, err, errlen)) {
			free(t.net.rules);
			free(t.callback.rules);
			return -1;
		}
	if (t.burst == 0)
		t.burst = t.rate * 2 > 1 ? t.rate * 2 : 1;
	ts->t[ts->n++] = t;
	return 0;
}

static int parse_key(struct tenants *ts, char *rest, char *err, size_t errlen)
{
	char *save, *key = strtok_r(rest, " \t", &save), *name = strtok_r(NULL, " \t", &save);
	if (!key || !name || strtok_r(NULL, " \t", &save))
		return errf(err, errlen, "expected: key KEY TENANT");
	if (!key_ok(key))
		return errf(err, errlen, "key: 16 to %d characters of [A-Za-z0-9._-]", TENANT_KEY_MAX);
	int t = tenants_by_name(ts, name);
	if (t < 0)
		return errf(err, errlen, "key: tenant %.64s is not named above", name);
	if (tenants_by_key(ts, key) >= 0)
		return errf(err, errlen, "key: given twice");
	if (ts->nkeys == TENANT_KEYS_MAX)
		return errf(err, errlen, "more than %d keys", TENANT_KEYS_MAX);
	SHA256((const unsigned char *)key, strlen(key), ts->keys[ts->nkeys].digest);
	ts->keys[ts->nkeys++].tenant = (unsigned)t;
	return 0;
}

int tenants_parse(struct tenants *ts, const char *text, size_t len, char *err, size_t errlen)
{
	memset(ts, 0, sizeof(*ts));
	ts->t = calloc(TENANTS_MAX, sizeof(*ts->t));
	ts->keys = calloc(TENANT_KEYS_MAX, sizeof(*ts->keys));
	if (!ts->t || !ts->keys) {
		tenants_free(ts);
		return errf(err, errlen, "out of memory");
	}
	char line[512], why[400];
	unsigned lineno = 0;
	for (size_t pos = 0; pos < len;) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
		lineno++;
		if (n >= sizeof(line) || memchr(text + pos, '\0', n)) {
			tenants_free(ts);
			return errf(err, errlen, "%u: line too long or not text", lineno);
		}
		memcpy(line, text + pos, n);
		line[n] = '\0';
		pos += n + 1;
		char *l = line + strspn(line, " \t");
		l[strcspn(l, "\r")] = '\0';
		int rc = 0;
		if (!*l || *l == '#')
			continue;
		if (!strncmp(l, "tenant ", 7))
			rc = parse_tenant(ts, l + 7, why, sizeof(why));
		else if (!strncmp(l, "key ", 4))
			rc = parse_key(ts, l + 4, why, sizeof(why));
		else
			rc = errf(why, sizeof(why), "expected a tenant or a key line");
		if (rc) {
			tenants_free(ts);
			return errf(err, errlen, "%u: %s", lineno, why);
		}
	}
	return 0;
}

int tenants_load(struct tenants *ts, const char *path, char *err, size_t errlen)
{
	memset(ts, 0, sizeof(*ts));
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errf(err, errlen, "keys %s: %s", path, strerror(errno));
	struct stat st;
	char *buf = NULL, why[300];
	int rc = -1;
	if (fstat(fd, &st) < 0) {
		errf(err, errlen, "keys %s: %s", path, strerror(errno));
		goto out;
	}
	/* Keys grant runs: a file someone else could write would let them
	 * mint tenants. Others reading it would leak keys: refused too. */
	if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077)) {
		errf(err, errlen, "keys %s: must be a regular file owned by root with mode 0600 or 0400", path);
		goto out;
	}
	if (st.st_size > (1 << 20)) {
		errf(err, errlen, "keys %s: over 1 MiB", path);
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	ssize_t n = buf ? read(fd, buf, (size_t)st.st_size) : -1;
	if (n < 0) {
		errf(err, errlen, "keys %s: %s", path, buf ? strerror(errno) : "out of memory");
		goto out;
	}
	if (tenants_parse(ts, buf, (size_t)n, why, sizeof(why))) {
		errf(err, errlen, "keys %s:%s", path, why);
		goto out;
	}
	rc = 0;
out:
	free(buf);
	close(fd);
	return rc;
}

/* Equal in time that depends on the lengths only. */
_Static_assert(TENANT_DIGEST_LEN == SHA256_DIGEST_LENGTH, "a key's digest is SHA-256's");

int tenants_by_key(const struct tenants *ts, const char *key)
{
	/* Digests of one length: the compare's time says nothing of a stored
	 * key's length or content, and every stored key is compared. */
	unsigned char d[TENANT_DIGEST_LEN];
	SHA256((const unsigned char *)key, strlen(key), d);
	int found = -1;
	for (size_t i = 0; i < ts->nkeys; i++)
		if (!CRYPTO_memcmp(ts->keys[i].digest, d, sizeof(d)) && found < 0)
			found = (int)ts->keys[i].tenant;
	return found;
}

int tenants_by_name(const struct tenants *ts, const char *name)
{
	for (size_t i = 0; i < ts->n; i++)
		if (!strcmp(ts->t[i].name, name))
			return (int)i;
	return -1;
}

int tenant_host_rules(const struct tenant_reach *reach, int (*fn)(void *ctx, const struct net_rule *r), void *ctx)
{
	static const struct net_rule any = { .kind = NET_RULE_ANY };
	if (reach->any)
		return fn(ctx, &any);
	for (unsigned i = 0; i < reach->n; i++) {
		int rc = reach->rules[i].kind == NET_RULE_ADDR ? 0 : fn(ctx, &reach->rules[i]);
		if (rc)
			return rc;
	}
	return 0;
}

int tenant_net_check(const struct tenant *t, const struct run_spec *rq, char *err, size_t errlen)
{
	for (unsigned i = 0; i < rq->nnet; i++) {
		if (net_ceiling_admits(&rq->net[i], t->net.any, t->net.rules, t->net.n))
			continue;
		char field[48];
		run_spec_rule_field(rq, i, field, sizeof(field));
		return errf(err, errlen, "%s: beyond tenant %s's network ceiling%s", field, t->name,
			    t->net.n || t->net.any ? "" : " (its runs get no network)");
	}
	return 0;
}

int tenant_size_check(const struct tenant *t, uint64_t memory_mib, uint64_t disk_mib, char *err, size_t errlen)
{
	if (t->max_memory_mib && memory_mib > t->max_memory_mib)
		return errf(err, errlen, "limits.memory_mib: %llu MiB is over tenant %s's ceiling of %llu MiB (max_memory_mib)",
			    (unsigned long long)memory_mib, t->name, (unsigned long long)t->max_memory_mib);
	if (t->max_disk_mib && disk_mib > t->max_disk_mib)
		return errf(err, errlen, "limits.disk_mib: %llu MiB is over tenant %s's ceiling of %llu MiB (max_disk_mib)",
			    (unsigned long long)disk_mib, t->name, (unsigned long long)t->max_disk_mib);
	return 0;
}

void tenants_free(struct tenants *ts)
{
	for (size_t i = 0; ts->t && i < ts->n; i++) {
		free(ts->t[i].net.rules);
		free(ts->t[i].callback.rules);
	}
	free(ts->t);
	free(ts->keys);
	memset(ts, 0, sizeof(*ts));
}
