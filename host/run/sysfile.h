/* Writing the kernel's control files (/proc/PID/uid_map, cgroup files):
 * one write of the whole text, as the kernel wants them. */
#ifndef VMRUN_SYSFILE_H
#define VMRUN_SYSFILE_H

/* Write text to the existing file path in one write(2). Returns 0, or -1
 * with errno set (a short write is EIO). */
int sysfile_write(const char *path, const char *text);

#endif
