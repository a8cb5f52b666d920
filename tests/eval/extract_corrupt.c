/* The eval's corrupt-workspace case, one image at a time: feed IMAGE (a
 * hostile ext4 image, e.g. one of e2fsprogs' corrupt test images) to the
 * artifact extractor exactly as vmrun does after a run (the same limits,
 * a uid reserved by the jail when root, the invoking user as the owner)
 * and print one JSON object of what was observed on stdout:
 *   {"image":..,"rc":0|-1,"message":..,"files":N,"skipped":N,"bytes":N,
 *    "ms":N,"violations":[..]}
 * It judges nothing beyond listing what broke the extractor's contract
 * (artifacts.h): a reason that is not one line starting "artifacts: ",
 * anything in the destination but plain files and directories with the
 * promised modes and owner, more than the caps, the image changed, a
 * helper left running, a helper killed by a signal (a crash on the
 * image), the timeout overrun. tests/eval/judge.py decides the verdict.
 *   eval-extract IMAGE [NAME]     (NAME: what the output calls it) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "artifacts.h"
#include "clock.h"
#include "jail.h"
#include "policy.h"
#include "result.h"
#include "run.h"
#include "session.h"
#include "tree.h"

#define MAX_VIOLATIONS 8

struct observed {
	char violations[MAX_VIOLATIONS][160];
	int nviolations;
	uint64_t files, dirs, bytes;
	uid_t owner_uid;
	gid_t owner_gid;
};

static void violation(struct observed *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(struct observed *o, const char *fmt, ...)
{
	if (o->nviolations == MAX_VIOLATIONS)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(o->violations[o->nviolations++], sizeof(o->violations[0]), fmt, ap);
	va_end(ap);
}

static void check_entry(struct observed *o, const char *path, const struct stat *st)
{
	mode_t perm = st->st_mode & 07777;
	if (S_ISREG(st->st_mode)) {
		o->files++;
		o->bytes += (uint64_t)st->st_size;
		if (perm != 0644 && perm != 0755)
			violation(o, "%s: file mode %04o", path, (unsigned)perm);
	} else if (S_ISDIR(st->st_mode)) {
		o->dirs++;
		if (perm != 0755)
			violation(o, "%s: directory mode %04o", path, (unsigned)perm);
	} else {
		violation(o, "%s: not a file or directory (mode %06o)", path, (unsigned)st->st_mode);
	}
	if (st->st_uid != o->owner_uid || st->st_gid != o->owner_gid)
		violation(o, "%s: owned by %u:%u", path, (unsigned)st->st_uid, (unsigned)st->st_gid);
}

/* Every entry below dir (no link followed; the extractor's depth cap is 16,
 * so the recursion is bounded by what it may have made). */
static void check_tree(struct observed *o, const char *dir, unsigned depth)
{
	DIR *d = opendir(dir);
	if (!d) {
		violation(o, "%s: %s", dir, strerror(errno));
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char path[4096];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (lstat(path, &st) < 0) {
			violation(o, "%s: %s", path, strerror(errno));
			continue;
		}
		check_entry(o, path, &st);
		if (S_ISDIR(st.st_mode) && depth < 64)
			check_tree(o, path, depth + 1);
	}
	closedir(d);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* What vmrun's built-in policy allows (policy.h), and vmrun's timeout. */
static int default_limits(struct artifacts_limits *lim)
{
	struct policy pol;
	char err[256];
	FILE *manifest = fopen("/dev/null", "re");
	if (!manifest || policy_load(&pol, manifest, "(empty manifest)", err, sizeof(err))) {
		fprintf(stderr, "eval-extract: %s\n", manifest ? err : strerror(errno));
		if (manifest)
			fclose(manifest);
		return -1;
	}
	fclose(manifest);
	*lim = (struct artifacts_limits){
		.max_bytes = pol.artifacts_max_bytes, .max_files = pol.artifacts_max_files,
		.max_depth = (unsigned)pol.artifacts_max_depth, .max_path = ARTIFACT_PATH_MAX - 1,
		.timeout_ms = RUN_EXTRACT_TIMEOUT_MS,
	};
	policy_free(&pol);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: eval-extract IMAGE [NAME]\n");
		return 2;
	}
	struct observed o = { .owner_uid = getuid(), .owner_gid = getgid() };
	struct artifacts_limits lim;
	struct artifacts_ids ids = { getuid(), getgid(), getuid(), getgid() };
	struct artifacts_result res = { 0 };
	struct jail helper = { .uid_fd = -1 };
	struct jail_spec spec = { 0 };
	char err[512] = "";
	const char *tmpdir = getenv("TMPDIR");
	char destpath[4096];
	int image = -1, destfd = -1, rc = 2;
	struct stat before, after;

	if (default_limits(&lim))
		return 2;
	snprintf(destpath, sizeof(destpath), "%s/eval-extract-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
	if (geteuid() == 0) {
		if (jail_reserve_uid(&spec, &helper, err, sizeof(err))) {
			fprintf(stderr, "eval-extract: %s\n", err);
			goto out;
		}
		ids.helper_uid = helper.uid;
		ids.helper_gid = (gid_t)helper.uid;
	}
	if ((image = open(argv[1], O_RDONLY | O_CLOEXEC)) < 0 || fstat(image, &before) < 0) {
		fprintf(stderr, "eval-extract: %s: %s\n", argv[1], strerror(errno));
		goto out;
	}
	if (!mkdtemp(destpath) || (destfd = open(destpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "eval-extract: %s: %s\n", destpath, strerror(errno));
		goto out;
	}
	int64_t t0 = clock_mono_ms();
	int got = artifacts_extract(image, destfd, &ids, &lim, &res, err, sizeof(err));
	int64_t ms = clock_mono_ms() - t0;

	if (got < 0 && (strncmp(err, "artifacts: ", 11) != 0 || strchr(err, '\n')))
		violation(&o, "not a one-line artifacts: reason");
	if (got < 0 && strstr(err, "killed by signal"))
		violation(&o, "the helper crashed on the image");
	if (got == 0 && err[0])
		violation(&o, "a reason with success");
	if (ms > lim.timeout_ms + 5000)
		violation(&o, "took %lld ms against a %d ms timeout", (long long)ms, lim.timeout_ms);
	if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD)
		violation(&o, "a helper process outlived the extraction");
	if (fstat(image, &after) < 0 || !same_file(&before, &after))
		violation(&o, "the image changed");
	check_tree(&o, destpath, 0);
	if (o.files > lim.max_files)
		violation(&o, "%llu files over a cap of %llu", (unsigned long long)o.files,
			  (unsigned long long)lim.max_files);
	if (o.bytes > lim.max_bytes)
		violation(&o, "%llu bytes over a cap of %llu", (unsigned long long)o.bytes,
			  (unsigned long long)lim.max_bytes);
	/* A file whose data could not be read is skipped but stays, emptied
	 * (the helper may not unlink, artifacts.h). */
	size_t emptied = 0;
	for (size_t i = 0; got == 0 && i < res.nskipped; i++)
		emptied += strstr(res.skipped[i].reason, "(left empty)") != NULL;
	uint64_t reported = 0;
	for (size_t i = 0; got == 0 && i < res.nfiles; i++)
		reported += res.files[i].size;
	if (got == 0 && o.bytes != reported)
		violation(&o, "%llu bytes reported, %llu in the copy", (unsigned long long)reported,
			  (unsigned long long)o.bytes);
	if (got == 0 && o.files != res.nfiles + emptied)
		violation(&o, "%zu files reported and %zu left empty, %llu in the copy", res.nfiles, emptied,
			  (unsigned long long)o.files);

	printf("{\"image\":");
	result_json_cstr(stdout, argv[argc - 1]);
	printf(",\"rc\":%d,\"message\":", got);
	result_json_cstr(stdout, err);
	printf(",\"files\":%llu,\"dirs\":%llu,\"bytes\":%llu,\"skipped\":%zu,\"ms\":%lld,\"violations\":[",
	       (unsigned long long)o.files, (unsigned long long)o.dirs, (unsigned long long)o.bytes, res.nskipped,
	       (long long)ms);
	for (int i = 0; i < o.nviolations; i++) {
		if (i)
			putchar(',');
		result_json_cstr(stdout, o.violations[i]);
	}
	printf("]}\n");
	rc = 0;
out:
	artifacts_result_free(&res);
	if (destfd >= 0) {
		close(destfd);
		tree_remove(destpath, 64);   /* what stays is the script's leftover */
	}
	if (image >= 0)
		close(image);
	jail_release_uid(&helper);
	return rc;
}
