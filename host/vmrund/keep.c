#include "keep.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errmsg.h"
#include "say.h"
#include "spool.h"

struct putter {
	struct store *s;
	const char *id;
	uint64_t left;
	char *err;
	size_t errlen;
};

/* Every regular file beneath dirfd (rel its path under artifacts/). */
static int put_tree(struct putter *p, int dirfd, const char *rel)
{
	DIR *dir = fdopendir(dirfd);
	if (!dir) {
		close(dirfd);
		return 0;
	}
	int rc = 0;
	for (struct dirent *e; !rc && (e = readdir(dir));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char name[PATH_MAX];
		if (snprintf(name, sizeof(name), "%s/%s", rel, e->d_name) >= (int)sizeof(name))
			continue;
		struct stat st;
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				rc = put_tree(p, sub, name);
			continue;
		}
		uint8_t *data;
		size_t len;
		if (!S_ISREG(st.st_mode) || !store_blob_name_ok(name))
			continue;
		if ((uint64_t)st.st_size > p->left || spool_read_file(dirfd, e->d_name, p->left, &data, &len)) {
			vmrund_say("run %s: %s is not kept in the store (past blob_max_mib)", p->id, name);
			continue;
		}
		rc = p->s->ops->put_blob(p->s, p->id, name, data, len, p->err, p->errlen);
		p->left -= len;
		free(data);
	}
	closedir(dir);
	return rc;
}

int keep_put(struct store *s, const char *id, const char *dir, uint64_t max_bytes, char *err, size_t errlen)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return 0;   /* nothing was left */
	struct putter p = { s, id, max_bytes, err, errlen };
	uint8_t *data;
	size_t len;
	int rc = 0;
	if (spool_read_file(dfd, SPOOL_OUTPUT, max_bytes, &data, &len) == 0) {
		rc = s->ops->put_blob(s, id, SPOOL_OUTPUT, data, len, err, errlen);
		p.left -= len;
		free(data);
	}
	int afd = rc ? -1 : openat(dfd, SPOOL_ARTIFACTS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (afd >= 0)
		rc = put_tree(&p, afd, SPOOL_ARTIFACTS);
	close(dfd);
	return rc;
}

struct fetcher {
	char root[PATH_MAX];
	unsigned n;
	char *err;
	size_t errlen;
};

/* One blob into the temporary directory, its parents made. */
static int fetch_one(void *ctx, const char *name, const uint8_t *data, size_t len)
{
	struct fetcher *f = ctx;
	char path[PATH_MAX * 2];
	if (!store_blob_name_ok(name))
		return 0;   /* not one we wrote: passed over */
	snprintf(path, sizeof(path), "%s/%s", f->root, name);
	for (char *s = path + strlen(f->root) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			return errf(f->err, f->errlen, "%s: %s", path, strerror(errno)), 1;
		*s = '/';
	}
	if (spool_write_file(path, data, len, true, 0600) < 0)
		return errf(f->err, f->errlen, "%s: %s", path, strerror(errno)), 1;
	f->n++;
	return 0;
}

int keep_fetch(struct store *s, const char *id, const char *run_dir, const char *dir, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(dir, &st) == 0)
		return 0;
	struct fetcher f = { .err = err, .errlen = errlen };
	snprintf(f.root, sizeof(f.root), "%.4000s/.fetch-XXXXXX", run_dir);
	if (!mkdtemp(f.root))
		return errf(err, errlen, "%s: %s", f.root, strerror(errno));
	int rc = s->ops->blobs(s, id, fetch_one, &f, err, errlen);
	if (rc == 0 && f.n == 0)
		rc = errf(err, errlen, "the store keeps nothing of run %s", id);
	/* Another request may have fetched it meanwhile: theirs stays. */
	if (rc == 0 && rename(f.root, dir) < 0 && errno != EEXIST && errno != ENOTEMPTY)
		rc = errf(err, errlen, "%s: %s", dir, strerror(errno));
	if (lstat(f.root, &st) == 0)
		spool_clean(f.root, false);
	return rc ? -1 : 1;
}
