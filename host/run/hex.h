/* Bytes as lowercase hex, and SHA-256 sums so written: run ids, the
 * workspace's sums and a diff's digest, an Idempotency-Key's body hash. */
#ifndef VMRUN_HEX_H
#define VMRUN_HEX_H

#include <stdbool.h>
#include <stddef.h>

/* The n bytes at p as lowercase hex into out (2n + 1 bytes with the
 * NUL). Pure. */
void hex_of(const void *p, size_t n, char *out);

/* The SHA-256 of the n bytes at p, as hex (65 bytes with the NUL). */
void sha256_hex(const void *p, size_t n, char out[65]);

/* The SHA-256 of the file at path, as hex, read in pieces. 0, or -1
 * with errno. */
int sha256_file_hex(const char *path, char out[65]);

/* A sum file (a SHA-256 as sha256_hex writes it, then a newline: the
 * paused workspace's, a parked sandbox's table's) read into out. 0, or -1
 * when it is missing or not exactly that. */
int sha256_read_sum(const char *path, char out[65]);

/* Whether s is a SHA-256 as sha256_hex writes one: exactly 64 lowercase
 * hex digits. NULL: no. Pure. */
bool hex_is_sha256(const char *s);

#endif
