#include "policy.h"

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
};

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
	struct { const char *key; uint64_t *dst; uint64_t max; } nums[] = {
		{ "max_timeout", &p->max_timeout_s, 86400 }, { "max_memory", &p->max_memory_mib, 65536 },
		{ "max_cpus", &p->max_cpus, 32 },            { "max_disk", &p->max_disk_mib, 65536 },
		{ "max_output", &p->max_output, UINT64_MAX }, { "nproc", &p->nproc, 1u << 20 },
		{ "nofile", &p->nofile, 1u << 20 },          { "fsize", &p->fsize, UINT64_MAX },
		{ "artifacts_max_bytes", &p->artifacts_max_bytes, UINT64_MAX },
		{ "artifacts_max_files", &p->artifacts_max_files, 1u << 20 },
		{ "artifacts_max_depth", &p->artifacts_max_depth, 256 },
		{ "cpu_quota", &p->cpu_quota_pct, 3200 },
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
	return rc;
}

int policy_load(struct policy *p, FILE *manifest, const char *manifest_name, char *err, size_t errlen)
{
	*p = (struct policy){
		.max_timeout_s = 300, .max_memory_mib = 4096, .max_cpus = 8, .max_disk_mib = 4096,
		.max_output = 64u << 20, .nproc = 256, .nofile = 1024, .fsize = 1u << 30,
		.artifacts_max_bytes = 64u << 20, .artifacts_max_files = 1000, .artifacts_max_depth = 16,
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
