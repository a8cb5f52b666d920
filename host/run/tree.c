/* Removing a tree by descriptors (see tree.h). */
#include "tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* name under dirfd, whose entries must be on dev. */
static int remove_on(int dirfd, const char *name, dev_t dev, int depth)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? -1 : 0;
	if (st.st_dev != dev || depth <= 0)
		return -1;   /* a mount point, or deeper than asked: left, and reported */
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	int rc = 0;
	for (struct dirent *e; (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && remove_on(fd, e->d_name, dev, depth - 1))
			rc = -1;
	closedir(d);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		rc = -1;
	return rc;
}

int tree_remove_at(int dirfd, const char *name, int depth)
{
	struct stat st;
	int rc = dirfd == AT_FDCWD ? stat(".", &st) : fstat(dirfd, &st);
	return rc < 0 ? -1 : remove_on(dirfd, name, st.st_dev, depth);
}

int tree_remove(const char *path, int depth)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(path, '/');
	const char *last = slash ? slash + 1 : path;
	if (!last[0] || !strcmp(last, ".") || !strcmp(last, "..") || strlen(path) >= sizeof(parent))
		return -1;
	if (!slash)
		return tree_remove_at(AT_FDCWD, path, depth);
	snprintf(parent, sizeof(parent), "%.*s", (int)(slash - path), path);
	int pfd = open(parent[0] ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return errno == ENOENT ? 0 : -1;
	int rc = tree_remove_at(pfd, last, depth);
	close(pfd);
	return rc;
}
