/* Where the guest's serial console goes: stdout, a file, or nowhere, with a
 * byte cap so a guest printing forever costs bounded host memory and disk.
 * Not thread-safe: its one writer (the UART) serialises calls. */
#ifndef VMM_CONSOLE_H
#define VMM_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct console {
	int fd;                /* -1 for "none" */
	bool own_fd;
	uint64_t limit;        /* bytes of guest output kept */
	uint64_t written;      /* bytes of guest output accepted so far */
	uint64_t dropped;      /* bytes beyond the limit */
	size_t len;
	char buf[4096];
};

/* Open spec ("stdout", "none" or a file path, created 0600 without
 * following a symlink) with a cap of limit bytes. Returns 0, or -1 after
 * one error line. */
int console_open(struct console *c, const char *spec, uint64_t limit);

/* Add one byte of guest output; lines are written out as they end. Past the
 * limit, bytes are counted and dropped, after one marker line. */
void console_put(struct console *c, uint8_t ch);

/* Write out what is buffered. */
void console_flush(struct console *c);

/* Flush and close (a no-op on a closed console). */
void console_close(struct console *c);

#endif
