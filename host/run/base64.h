/* Bytes as base64 (RFC 4648's alphabet, '=' padding), one encoder for
 * every writer: the run spec's canonical form (no line breaks) and
 * Judge0's views (Ruby's encode64: lines of 60). One strict reader, for
 * the run spec's contents (run_spec_decode.c) and for protobuf's JSON
 * bytes (envd.c, which takes the URL-safe alphabet too); Judge0's is
 * lenient as Ruby is (judge0.c), over the same alphabet. */
#ifndef VMRUN_BASE64_H
#define VMRUN_BASE64_H

#include <stdbool.h>
#include <stddef.h>

/* The n bytes at p as base64, malloc'd and NUL-terminated, its length in
 * *outlen (may be NULL). line > 0: a newline after every line characters
 * and after the last (none when n is 0), as Ruby's pack("m") with line
 * 60; 0: no line breaks. NULL when out of memory. Pure. */
char *base64_encode(const void *p, size_t n, size_t line, size_t *outlen);

/* The value (0..63) of base64 character c, or -1; with url, the
 * URL-safe alphabet's '-' and '_' are 62 and 63 too. Pure. */
int base64_value(unsigned char c, bool url);

/* What base64_decode found wrong. */
enum base64_error {
	BASE64_OK = 0,
	BASE64_LENGTH = -1,           /* a stray character, or padding that leaves no whole quads */
	BASE64_CHAR = -2,             /* a character outside the alphabet, at *at */
	BASE64_OVER = -3,             /* more than max bytes */
	BASE64_NOMEM = -4,
};

/* The n characters at s, strictly: base64_value's alphabet (url as it
 * says), '=' padding optional but, where there is some, whole quads.
 * BASE64_OK with the bytes in *out (malloc'd, NUL-terminated, *outlen of
 * them; NULL when there are none), or an error (*out untouched; at may
 * be NULL). Pure. */
int base64_decode(const char *s, size_t n, bool url, size_t max, unsigned char **out, size_t *outlen, size_t *at);

#endif
