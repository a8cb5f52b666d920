/* The invoking user: who asked for the run, and acting with their rights.
 *
 * vmrun runs as root to build the jail, but every path its caller names
 * (the workspace, stdin, the artifacts destination, the kernel, the root
 * image, a policy file) is opened with the caller's rights: the real uid,
 * or SUDO_UID/SUDO_GID when root's real uid came from sudo. The switch is
 * of the calling thread's file-system identity only (setfsuid, setfsgid
 * and its supplementary groups, as raw per-thread system calls), so one
 * process can open files for several callers on several threads; and the
 * thread's effective capabilities are emptied meanwhile (capset, also per
 * thread): a non-zero fsuid drops only the file-system ones, and
 * CAP_SYS_PTRACE or CAP_SYS_ADMIN would still open another root process's
 * /proc/PID/maps or walk through its /proc/PID/root (issue 38). Paths
 * through /proc/PID/root, cwd and fd are refused by name as well, and,
 * acting for someone else, through any of /proc's links (openat2's
 * RESOLVE_NO_MAGICLINKS), also behind a symlink. */
#ifndef VMRUN_CALLER_H
#define VMRUN_CALLER_H

#include <linux/capability.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define CALLER_MAX_GROUPS 256   /* more: the caller gets its primary group only (fails closed) */

struct caller {
	uid_t uid;
	gid_t gid;
	gid_t groups[CALLER_MAX_GROUPS];   /* supplementary groups */
	int ngroups;
	bool switch_ids;      /* we are root acting for someone else: switch to open */
	bool via_sudo;        /* the ids came from SUDO_UID/SUDO_GID */
};

/* The file-system identity to go back to after caller_enter. */
struct caller_saved {
	uid_t fsuid;
	gid_t fsgid;
	gid_t groups[CALLER_MAX_GROUPS];
	int ngroups;
	struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3];   /* the thread's, effective set included */
	bool active;
};

/* Decide who the caller is from our ids and the SUDO_UID/SUDO_GID values
 * (NULL when unset): a non-root real uid is the caller; root whose sudo
 * variables name another user acts for that user; plain root is itself.
 * Pure: the groups are left for caller_identify. Returns 0, or -1 with a
 * one-line reason (malformed sudo variables, only one of them set). */
int caller_decide(uid_t ruid, gid_t rgid, uid_t euid, const char *sudo_uid, const char *sudo_gid,
		  struct caller *c, char *err, size_t errlen);

/* caller_decide on this process, with the caller's supplementary groups:
 * ours when the real uid is the caller's, else from the group database.
 * Returns 0, or -1 with a reason. */
int caller_identify(struct caller *c, char *err, size_t errlen);

/* Take on the caller's file-system identity on this thread, holding no
 * effective capability (a no-op when c->switch_ids is false). Returns 0,
 * or -1 with errno set and nothing changed. Always pair with
 * caller_leave. */
int caller_enter(const struct caller *c, struct caller_saved *s);

/* Go back to the identity and capabilities saved by caller_enter;
 * harmless when it did nothing. */
void caller_leave(struct caller_saved *s);

/* Whether path names /proc/PID/root, cwd or fd or a path below them
 * (PID a number, self or thread-self, or PID/task/TID), read as open
 * would walk it, component by component with "." and empty ones skipped,
 * both as written and with ".." taken back lexically. Pure: it sees only
 * the string (a relative path as given). */
bool caller_proc_link(const char *path);

/* caller_proc_link of path and, when path is relative, of it under our
 * working directory; a path too long to check counts as true. */
bool caller_path_refused(const char *path);

/* open(2) as the caller: returns the fd or -1 with errno set (EACCES for
 * a path caller_path_refused; ELOOP, acting for someone else, for one
 * through any /proc link). */
int caller_open(const struct caller *c, const char *path, int flags);

/* Create the directory path (mode 0755, it must not exist) as the caller,
 * refusing what caller_open refuses, so that it is theirs and made where
 * they may write, and open it O_RDONLY|O_DIRECTORY through the same parent
 * fd; what opens must be an empty directory owned by the caller. Returns
 * the fd, or -1 with errno set (nothing left behind). */
int caller_mkdir(const struct caller *c, const char *path);

/* rmdir(2) as the caller: undoes caller_mkdir for a run that copied
 * nothing (only an empty directory goes). Returns 0 or -1 with errno. */
int caller_rmdir(const struct caller *c, const char *path);

/* A directory that root may work in by path (create, bind, chown, unlink)
 * while acting for c: path resolved once, its absolute form into resolved
 * (len bytes), and, when c->switch_ids, every directory on it from / down
 * owned by root and writable by root alone or sticky, so that the caller
 * can neither rename nor replace any part of it afterwards. Returns an
 * O_DIRECTORY fd of it, or -1 with "PATH: reason" in err. */
int caller_work_dir(const struct caller *c, const char *path, char *resolved, size_t len, char *err,
		    size_t errlen);

#endif
