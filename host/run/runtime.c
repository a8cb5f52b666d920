#include "runtime.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
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

bool runtime_answers_to(const struct runtime *rt, const char *name)
{
	if (!strcmp(rt->name, name))
		return true;
	size_t n = strlen(name);
	for (const char *a = rt->aliases + strspn(rt->aliases, " "); *a; a += strspn(a, " ")) {
		size_t k = strcspn(a, " ");
		if (k == n && !memcmp(a, name, n))
			return true;
		a += k;
	}
	return false;
}

const struct runtime *runtime_pick(const struct runtime *list, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (runtime_answers_to(&list[i], name))
			return &list[i];
	return NULL;
}

int runtime_find(const char *dir, const char *name, struct runtime *rt, char *err, size_t errlen)
{
	if (!runtime_valid_name(name))
		return errf(err, errlen, "--runtime: '%.80s' is not a runtime name", name);
	struct runtime *list = calloc(RUNTIME_MAX, sizeof(*list));
	if (!list)
		return errf(err, errlen, "out of memory");
	int n = runtime_list(dir, list, RUNTIME_MAX, err, errlen), rc = -1;
	const struct runtime *found = n > 0 ? runtime_pick(list, (size_t)n, name) : NULL;
	if (found) {
		*rt = *found;
		rc = 0;
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

/* Append n bytes of text to the word being built. */
static int put_text(char *store, size_t storelen, size_t *used, const char *t, size_t n)
{
	if (n >= storelen - *used)
		return -1;
	memcpy(store + *used, t, n);
	*used += n;
	return 0;
}

/* One template word, with {file} and {stem} replaced, into store as a
 * NUL-terminated string. */
static int expand_word(const char *w, size_t wl, const char *file, char *store, size_t storelen, size_t *used,
		       char *err, size_t errlen)
{
	const char *stem_end = file ? strrchr(file, '.') : NULL;
	size_t stem = file ? (stem_end && stem_end != file ? (size_t)(stem_end - file) : strlen(file)) : 0;
	for (size_t i = 0; i < wl;) {
		const char *ph = w[i] == '{' ? memchr(w + i, '}', wl - i) : NULL;
		size_t pl = ph ? (size_t)(ph - (w + i)) + 1 : 0;
		int rc;
		if (pl == 6 && !memcmp(w + i, "{file}", 6) && file)
			rc = put_text(store, storelen, used, file, strlen(file));
		else if (pl == 6 && !memcmp(w + i, "{stem}", 6) && file)
			rc = put_text(store, storelen, used, file, stem);
		else if (pl)
			return errf(err, errlen, "template word '%.*s': %.*s is not {file} or {stem} here (or no file)",
				    (int)wl, w, (int)pl, w + i);
		else
			rc = put_text(store, storelen, used, w + i, 1);
		if (rc)
			return errf(err, errlen, "template expands past %zu bytes", storelen);
		i += pl ? pl : 1;
	}
	if (put_text(store, storelen, used, "", 1))
		return errf(err, errlen, "template expands past %zu bytes", storelen);
	return 0;
}

int runtime_expand(const char *tmpl, const char *const *files, unsigned nfiles, char *const *args, unsigned nargs,
		   char **argv, unsigned max, char *store, size_t storelen, char *err, size_t errlen)
{
	unsigned n = 0;
	size_t used = 0;
	for (const char *p = tmpl; *p;) {
		p += strspn(p, " ");
		size_t wl = strcspn(p, " ");
		if (!wl)
			break;
		bool all_files = wl == 7 && !memcmp(p, "{files}", 7), all_args = wl == 6 && !memcmp(p, "{args}", 6);
		unsigned k = all_files ? nfiles : all_args ? nargs : 1;
		if (k > max - 1 - n)
			return errf(err, errlen, "template '%.200s' expands to more than %u words", tmpl, max - 1);
		for (unsigned i = 0; i < k; i++) {
			const char *whole = all_files ? files[i] : all_args ? args[i] : NULL;
			argv[n] = store + used;
			if (whole ? put_text(store, storelen, &used, whole, strlen(whole) + 1) :
				    expand_word(p, wl, nfiles ? files[0] : NULL, store, storelen, &used, err, errlen)) {
				if (whole)
					errf(err, errlen, "template expands past %zu bytes", storelen);
				return -1;
			}
			n++;
		}
		p += wl;
	}
	argv[n] = NULL;
	if (!n || !argv[0][0])
		return errf(err, errlen, "template '%.200s' names no program", tmpl);
	return (int)n;
}
