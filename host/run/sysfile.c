#include "sysfile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int sysfile_write(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = strlen(text);
	ssize_t n = write(fd, text, len);
	int e = n < 0 ? errno : EIO;
	close(fd);
	if (n == (ssize_t)len)
		return 0;
	errno = e;
	return -1;
}
