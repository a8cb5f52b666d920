#include "runtime.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "textfile.h"

int runtime_valid_name(const char *s)
{
	size_t n = strlen(s);
	return n > 0 && n < RUNTIME_NAME_MAX && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789+._-") == n &&
	       s[0] != '.' && s[0] != '-';
}

static int copy_value(char *dst, size_t cap, const char *v)
{
	size_t n = strlen(v);
	if (n >= cap)
		return -1;
	memcpy(dst, v, n + 1);
	return 0;
}

static int number(uint64_t *dst, const char *v, uint64_t max)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (errno || *end || v[0] < '0' || v[0] > '9' || x == 0 || x > max)
		return -1;
	*dst = x;
	return 0;
}

/* Apply one "key: value"; unknown keys are the build's. */
static int apply(struct runtime *rt, const char *key, const char *v)
{
	struct { const char *key; char *dst; size_t cap; } text[] = {
		{ "name", rt->name, sizeof(rt->name) },         { "version", rt->version, sizeof(rt->version) },
		{ "aliases", rt->aliases, sizeof(rt->aliases) }, { "extension", rt->extension, sizeof(rt->extension) },
		{ "compile", rt->compile, sizeof(rt->compile) }, { "run", rt->run, sizeof(rt->run) },
	};
	struct { const char *key; uint64_t *dst, max; } nums[] = {
		{ "run-timeout", &rt->run_timeout_s, 86400 },         { "run-memory", &rt->run_memory_mib, 65536 },
		{ "compile-timeout", &rt->compile_timeout_s, 86400 }, { "compile-memory", &rt->compile_memory_mib, 65536 },
	};
	for (size_t i = 0; i < sizeof(text) / sizeof(text[0]); i++)
		if (!strcmp(key, text[i].key))
			return copy_value(text[i].dst, text[i].cap, v);
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
		if (!strcmp(key, nums[i].key))
			return number(nums[i].dst, v, nums[i].max);
	return 0;
}

/* Every alias must be a valid name too. */
static int valid_aliases(const char *list)
{
	char copy[sizeof(((struct runtime *)0)->aliases)], *save = NULL;
	snprintf(copy, sizeof(copy), "%s", list);
	for (char *a = strtok_r(copy, " ", &save); a; a = strtok_r(NULL, " ", &save))
		if (!runtime_valid_name(a))
			return 0;
	return 1;
}

int runtime_load(const char *path, struct runtime *rt, char *err, size_t errlen)
{
	memset(rt, 0, sizeof(*rt));
	FILE *f = fopen(path, "re");
	if (!f)
		return errf(err, errlen, "runtime %s: %s", path, strerror(errno));
	char line[1024];
	int rc = 0;
	enum textfile_line r;
	for (unsigned no = 1; (r = textfile_read_line(f, line, sizeof(line))) != TEXTFILE_EOF; no++) {
		if (r != TEXTFILE_OK) {
			rc = textfile_bad_line(err, errlen, "runtime", path, no, r, sizeof(line));
			break;
		}
		char *colon = strchr(line, ':');
		if (line[0] == '#' || !line[0])
			continue;
		if (!colon) {
			rc = errf(err, errlen, "runtime %s line %u: not \"key: value\"", path, no);
			break;
		}
		*colon = '\0';
		const char *v = colon + 1 + strspn(colon + 1, " \t");
		if (apply(rt, line, v) < 0) {
			rc = errf(err, errlen, "runtime %s line %u: bad %s", path, no, line);
			break;
		}
	}
	fclose(f);
	if (rc)
		return rc;
	if (!runtime_valid_name(rt->name) || !rt->version[0] || !rt->run[0] || !valid_aliases(rt->aliases))
		return errf(err, errlen, "runtime %s: needs a valid name and aliases, a version and a run template", path);
	/* The image and its allowlist sit beside the file, under its name. */
	size_t n = strlen(path);
	if (n < 8 || strcmp(path + n - 8, ".runtime") || n - 8 + 9 >= sizeof(rt->image))
		return errf(err, errlen, "runtime %s: not a NAME.runtime path", path);
	snprintf(rt->image, sizeof(rt->image), "%.*s.ext4", (int)(n - 8), path);
	snprintf(rt->programs, sizeof(rt->programs), "%.*s.programs", (int)(n - 8), path);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct runtime *)a)->name, ((const struct runtime *)b)->name);
}

int runtime_list(const char *dir, struct runtime *list, size_t max, char *err, size_t errlen)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : errf(err, errlen, "runtimes %s: %s", dir, strerror(errno));
	size_t n = 0;
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		if (len <= 8 || strcmp(de->d_name + len - 8, ".runtime"))
			continue;
		if (n == max) {
			rc = errf(err, errlen, "runtimes %s: more than %zu", dir, max);
			break;
		}
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%.3800s/%s", dir, de->d_name);
		if ((rc = runtime_load(path, &list[n], err, errlen)))
			break;
		n++;
	}
	closedir(d);
	if (rc)
		return -1;
	qsort(list, n, sizeof(*list), by_name);
	return (int)n;
}

static int answers_to(const struct runtime *rt, const char *name)
{
	if (!strcmp(rt->name, name))
		return 1;
	for (const char *a = rt->aliases; *a; a += strspn(a, " ")) {
		size_t k = strcspn(a, " ");
		if (k == strlen(name) && !strncmp(a, name, k))
			return 1;
		a += k;
	}
	return 0;
}

int runtime_find(const char *dir, const char *name, struct runtime *rt, char *err, size_t errlen)
{
	if (!runtime_valid_name(name))
		return errf(err, errlen, "--runtime: '%.80s' is not a runtime name", name);
	struct runtime *list = calloc(RUNTIME_MAX, sizeof(*list));
	if (!list)
		return errf(err, errlen, "out of memory");
	int n = runtime_list(dir, list, RUNTIME_MAX, err, errlen), rc = -1;
	for (int i = 0; i < n; i++)
		if (answers_to(&list[i], name)) {
			*rt = list[i];
			rc = 0;
			break;
		}
	if (rc && n >= 0) {
		char names[512] = "";
		for (int i = 0; i < n; i++)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", i ? ", " : "", list[i].name);
		errf(err, errlen, "--runtime %s: no such runtime (installed: %s)", name, n ? names : "none");
	}
	free(list);
	return rc;
}
