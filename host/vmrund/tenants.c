#include "tenants.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errmsg.h"

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

/* NAME=NUMBER options of a tenant line. */
static int tenant_option(struct tenant *t, const char *opt, char *err, size_t errlen)
{
	const char *eq = strchr(opt, '=');
	char *end;
	if (!eq)
		return errf(err, errlen, "expected OPTION=NUMBER, not \"%.64s\"", opt);
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
	else
		return errf(err, errlen, "unknown or out-of-range option \"%.64s\" (concurrent>=1, queued, rate>0, burst>=1)",
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
	struct tenant t = { .concurrent = 4, .queued = 64, .rate = 10, .burst = 0 };
	snprintf(t.name, sizeof(t.name), "%s", name);
	for (char *opt; (opt = strtok_r(NULL, " \t", &save));)
		if (tenant_option(&t, opt, err, errlen))
			return -1;
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
	snprintf(ts->keys[ts->nkeys].key, sizeof(ts->keys[0].key), "%s", key);
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
	char line[512], why[256];
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
static bool same_key(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;
	for (size_t i = 0; i < la && i < lb; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

int tenants_by_key(const struct tenants *ts, const char *key)
{
	int found = -1;
	for (size_t i = 0; i < ts->nkeys; i++)
		if (same_key(ts->keys[i].key, key) && found < 0)
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

void tenants_free(struct tenants *ts)
{
	free(ts->t);
	free(ts->keys);
	memset(ts, 0, sizeof(*ts));
}
