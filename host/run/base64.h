/* Bytes as base64 (RFC 4648's alphabet, '=' padding), one encoder for
 * every writer: the run spec's canonical form (no line breaks) and
 * Judge0's views (Ruby's encode64: lines of 60). The readers differ on
 * purpose and stay with their formats: the run spec's is strict
 * (run_spec_json.c), Judge0's lenient as Ruby's is (judge0.c). */
#ifndef VMRUN_BASE64_H
#define VMRUN_BASE64_H

#include <stddef.h>

/* The n bytes at p as base64, malloc'd and NUL-terminated, its length in
 * *outlen (may be NULL). line > 0: a newline after every line characters
 * and after the last (none when n is 0), as Ruby's pack("m") with line
 * 60; 0: no line breaks. NULL when out of memory. Pure. */
char *base64_encode(const void *p, size_t n, size_t line, size_t *outlen);

#endif
