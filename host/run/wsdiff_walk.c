/* A workspace's images walked for a diff (wsdiff.h): each by the confined
 * artifacts helper, as a reserved uid when we are root. */
#include "wsdiff.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errmsg.h"
#include "jail.h"
#include "tree.h"

int wsdiff_walk(const char *image, const char *dir, struct artifacts_result *m, char *err, size_t errlen)
{
	struct artifacts_limits lim = {
		.max_bytes = WSDIFF_MAX_BYTES, .max_files = WSDIFF_MAX_ENTRIES, .max_depth = WSDIFF_MAX_DEPTH,
		.max_path = ARTIFACT_PATH_MAX - 1, .timeout_ms = WSDIFF_TIMEOUT_MS, .manifest = true,
		.copy_max = WSDIFF_TEXT_MAX, .copy_total = WSDIFF_COPY_TOTAL,
	};
	struct artifacts_ids ids = { getuid(), getgid(), getuid(), getgid() };
	struct jail helper = { .uid_fd = -1 };
	int fd = -1, dfd = -1, rc = -1;
	memset(m, 0, sizeof(*m));
	if (mkdir(dir, 0700) < 0) {
		errf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	if (geteuid() == 0) {
		struct jail_spec js = { 0 };
		if (jail_reserve_uid(&js, &helper, err, errlen))
			goto out;
		ids.helper_uid = helper.uid;
		ids.helper_gid = (gid_t)helper.uid;
	}
	if ((fd = open(image, O_RDONLY | O_CLOEXEC)) < 0 || (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		errf(err, errlen, "%s: %s", fd < 0 ? image : dir, strerror(errno));
		goto out;
	}
	rc = artifacts_manifest(fd, dfd, &ids, &lim, m, err, errlen);
out:
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	jail_release_uid(&helper);
	return rc;
}

static int walk_side(const struct wsdiff_side *s, const char *dir, struct artifacts_result *m, char *err,
		     size_t errlen)
{
	if (s->walk) {
		memset(m, 0, sizeof(*m));
		return s->walk(s->ctx, dir, m, err, errlen);
	}
	return wsdiff_walk(s->image, dir, m, err, errlen);
}

int wsdiff_sides(const struct wsdiff_side *from, const struct wsdiff_side *to, const char *scratch, json_t **out,
		 char digest[65], bool *complete, char *err, size_t errlen)
{
	char a[PATH_MAX], b[PATH_MAX];
	struct artifacts_result ma = { 0 }, mb = { 0 };
	struct wsdiff d = { 0 };
	int rc = -1;
	if (out)
		*out = NULL;
	snprintf(a, sizeof(a), "%s/from", scratch);
	snprintf(b, sizeof(b), "%s/to", scratch);
	if (mkdir(scratch, 0700) < 0)
		return errf(err, errlen, "%s: %s", scratch, strerror(errno));
	if (walk_side(from, a, &ma, err, errlen) || walk_side(to, b, &mb, err, errlen))
		goto out;
	if (wsdiff_compare(&ma, &mb, &d) || (out && !(*out = wsdiff_json(&d, &ma, a, &mb, b)))) {
		errf(err, errlen, "out of memory");
		goto out;
	}
	if (digest)
		memcpy(digest, d.digest, 65);
	if (complete)
		*complete = d.complete;
	rc = 0;
out:
	wsdiff_free(&d);
	artifacts_result_free(&ma);
	artifacts_result_free(&mb);
	tree_remove(scratch, 3);
	return rc;
}

int wsdiff_images(const char *from_image, const char *to_image, const char *scratch, json_t **out,
		  char digest[65], bool *complete, char *err, size_t errlen)
{
	struct wsdiff_side from = { .image = from_image }, to = { .image = to_image };
	return wsdiff_sides(&from, &to, scratch, out, digest, complete, err, errlen);
}
