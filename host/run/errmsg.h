/* One-line error messages into a caller's buffer, the way vmrun's modules
 * report failures upward. */
#ifndef VMRUN_ERRMSG_H
#define VMRUN_ERRMSG_H

#include <stddef.h>

/* Format a message into err (errlen bytes) and return -1, so that a
 * failing function can end with "return errf(err, errlen, ...);". */
int errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A caller's or a guest's text, for a message: at most cap - 1 bytes of
 * it into dst, whatever is not printable ASCII (0x20..0x7e) as '?', so
 * that it can neither end the message's one line nor drive a terminal.
 * Returns dst. */
const char *errmsg_printable(char *dst, size_t cap, const char *text);

#endif
