/* Removing a directory tree that someone else may have filled (a run's
 * directory, a vmrund spool entry with a guest's artifacts): by file
 * descriptors, never following a symbolic link, never crossing a mount. */
#ifndef VMRUN_TREE_H
#define VMRUN_TREE_H

/* Remove name under dirfd (AT_FDCWD: the working directory) and, when it
 * is a directory, everything in it, depth levels at most (1: its entries
 * but no directory among them). A symbolic link is removed, not followed;
 * a directory on another device than dirfd's (a mount point) or deeper
 * than depth is left. Returns 0 when name is gone or was never there,
 * else -1 with what could not be removed left in place. */
int tree_remove_at(int dirfd, const char *name, int depth);

/* tree_remove_at for a path: the last component under its parent. A path
 * that ends in "/" or "." is refused (-1). */
int tree_remove(const char *path, int depth);

#endif
