/* Whether bytes are well-formed UTF-8. Names and messages that reach JSON,
 * PostgreSQL's text columns or a pax header must be, or they are changed
 * on the way (U+FFFD) or refused there: a guest's file name that is not
 * UTF-8 would be listed as another name, or wedge a store that refuses it. */
#ifndef VMRUN_UTF8_H
#define VMRUN_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* True when the n bytes at s are UTF-8 as RFC 3629 has it: no overlong
 * forms, no surrogates, nothing past U+10FFFF. A NUL byte is valid
 * UTF-8; callers that cannot hold one check for it themselves. */
bool utf8_valid(const void *s, size_t n);

/* The length of the longest prefix of s's first n bytes that is at most
 * cap bytes and does not end inside a character: where to cut text that
 * must stay UTF-8 (s itself valid UTF-8). */
size_t utf8_cut(const char *s, size_t n, size_t cap);

#endif
