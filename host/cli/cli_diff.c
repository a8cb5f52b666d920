/* `vmrun sandbox diff`'s printing (cli_diff.h). */
#include "cli_diff.h"

#include <string.h>

#define BAR_MAX 40   /* the widest +/- bar, as git's at 80 columns */

static const char *str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

static long long num(const json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

/* What a line says of a change that is not (only) lines of text. */
static void what_changed(const json_t *f, char *out, size_t len)
{
	const json_t *old = json_object_get(f, "old");
	const char *st = str(f, "status"), *type = str(f, "type");
	if (old && strcmp(str(old, "type"), type))
		snprintf(out, len, "%s -> %s", str(old, "type"), type);
	else if (!strcmp(type, "symlink"))
		snprintf(out, len, "symlink %s%s%s", old ? str(old, "target") : "", old ? " -> " : "", str(f, "target"));
	else if (!strcmp(type, "file") && json_is_true(json_object_get(f, "binary")))
		snprintf(out, len, "Bin %lld -> %lld bytes", !strcmp(st, "added") ? 0 : old ? num(old, "size") : num(f, "size"),
			 !strcmp(st, "removed") ? 0 : num(f, "size"));
	else if (!strcmp(type, "file") && json_object_get(f, "diff_omitted"))
		snprintf(out, len, "%lld bytes, not diffed: %s", num(f, "size"), str(f, "diff_omitted"));
	else if (old && strcmp(str(old, "mode"), str(f, "mode")))
		snprintf(out, len, "mode %s -> %s", str(old, "mode"), str(f, "mode"));
	else
		snprintf(out, len, "%s %s", type, st);
}

void cli_print_diff(FILE *out, const json_t *diff, bool stat_only)
{
	const json_t *files = json_object_get(diff, "files"), *f;
	size_t i, width = 0;
	long long most = 0;
	json_array_foreach(files, i, f) {
		size_t n = strlen(str(f, "path")) + (!strcmp(str(f, "type"), "directory") ? 1 : 0);
		width = n > width ? n : width;
		long long lines = num(f, "insertions") + num(f, "deletions");
		most = lines > most ? lines : most;
	}
	json_array_foreach(files, i, f) {
		bool dir = !strcmp(str(f, "type"), "directory");
		fprintf(out, " %s%s%*s | ", str(f, "path"), dir ? "/" : "",
			(int)(width - strlen(str(f, "path")) - (dir ? 1 : 0)), "");
		if (json_object_get(f, "diff")) {
			long long ins = num(f, "insertions"), del = num(f, "deletions");
			long long scale = most > BAR_MAX ? most : BAR_MAX;
			long long pi = ins * BAR_MAX / scale + (ins && ins * BAR_MAX < scale), pd = del * BAR_MAX / scale + (del && del * BAR_MAX < scale);
			fprintf(out, "%lld ", ins + del);
			for (long long k = 0; k < pi; k++)
				fputc('+', out);
			for (long long k = 0; k < pd; k++)
				fputc('-', out);
			fputc('\n', out);
		} else {
			char what[4200];
			what_changed(f, what, sizeof(what));
			fprintf(out, "%s\n", what);
		}
	}
	const json_t *sum = json_object_get(diff, "summary");
	long long n = num(sum, "added") + num(sum, "modified") + num(sum, "removed");
	long long ins = num(sum, "insertions"), del = num(sum, "deletions");
	fprintf(out, " %lld path%s changed, %lld insertion%s(+), %lld deletion%s(-)\n", n, n == 1 ? "" : "s", ins,
		ins == 1 ? "" : "s", del, del == 1 ? "" : "s");
	size_t nskip = json_array_size(json_object_get(diff, "skipped"));
	if (nskip)
		fprintf(out, " %zu entr%s not compared (see --json)\n", nskip, nskip == 1 ? "y" : "ies");
	fprintf(out, " digest %s\n", str(diff, "digest"));
	if (stat_only)
		return;
	json_array_foreach(files, i, f) {
		const char *d = str(f, "diff");
		if (*d)
			fprintf(out, "\n%s", d);
	}
}
