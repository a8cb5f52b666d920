/* Reading line-oriented text files that vmrun trusts no more than their
 * writer: policy files, program manifests, runtime manifests. */
#ifndef VMRUN_TEXTFILE_H
#define VMRUN_TEXTFILE_H

#include <stddef.h>
#include <stdio.h>

enum textfile_line { TEXTFILE_EOF = 0, TEXTFILE_OK = 1, TEXTFILE_LONG = -1, TEXTFILE_NUL = -2 };

/* Read one line of at most len - 1 bytes into buf, without its newline
 * (the last line needs none). A longer line, or one holding a NUL byte, is
 * refused whole: cut at the buffer's size, its tail would read as a line of
 * its own ("# xxx...allow /bin/sh"), and a NUL would hide the rest of it. */
enum textfile_line textfile_read_line(FILE *f, char *buf, size_t len);

/* Why textfile_read_line refused line no of file (what: the kind of file),
 * as one line in err; returns -1. */
int textfile_bad_line(char *err, size_t errlen, const char *what, const char *file, unsigned no,
		      enum textfile_line r, size_t len);

#endif
