#include "console.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

int console_open(struct console *c, const char *spec, uint64_t limit)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->limit = limit;
	if (strcmp(spec, "none") == 0)
		return 0;
	if (strcmp(spec, "stdout") == 0) {
		c->fd = STDOUT_FILENO;
		return 0;
	}
	c->fd = open(spec, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (c->fd < 0) {
		vmm_perr("console: %s", spec);
		return -1;
	}
	c->own_fd = true;
	return 0;
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;   /* a closed reader loses console output, not the VM */
		p += w;
		n -= (size_t)w;
	}
}

void console_flush(struct console *c)
{
	if (c->fd >= 0 && c->len)
		write_all(c->fd, c->buf, c->len);
	c->len = 0;
}

void console_put(struct console *c, uint8_t ch)
{
	if (c->written >= c->limit) {
		if (c->dropped++ == 0 && c->fd >= 0) {
			char note[96];
			int n = snprintf(note, sizeof(note),
					 "\n[vmm: console limit of %llu bytes reached; output dropped]\n",
					 (unsigned long long)c->limit);
			console_flush(c);
			write_all(c->fd, note, (size_t)n);
		}
		return;
	}
	c->written++;
	if (c->fd < 0)
		return;
	c->buf[c->len++] = (char)ch;
	if (ch == '\n' || c->len == sizeof(c->buf))
		console_flush(c);
}

void console_close(struct console *c)
{
	console_flush(c);
	if (c->own_fd && c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->own_fd = false;
}
