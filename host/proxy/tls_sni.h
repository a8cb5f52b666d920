/* The server name that a TLS ClientHello asks for (RFC 8446 4.1.2, RFC
 * 6066 3), read off the first bytes a guest sends into a CONNECT tunnel
 * to port 443, so that the host proxy can hold it to the CONNECT host
 * (DESIGN: SNI must match on 443). The proxy only reads it: the TLS
 * session stays the guest's, end to end. Guest input: a hello that is
 * malformed, ambiguous (two server names) or split over records is
 * refused, not guessed at. */
#ifndef VMRUN_TLS_SNI_H
#define VMRUN_TLS_SNI_H

#include <stddef.h>
#include <stdint.h>

#define TLS_RECORD_MAX 16384   /* a record's payload, at most (RFC 8446 5.1) */

enum tls_sni_result {
	TLS_SNI_FOUND = 1,      /* out holds the name */
	TLS_SNI_MORE = 0,       /* the first record is not all here yet */
	TLS_SNI_BAD = -1,       /* not one whole, well-formed ClientHello record */
	TLS_SNI_NONE = -2,      /* a ClientHello that names no server */
};

/* Read the server name from the first TLS record at buf[len] into out
 * (cap bytes, NUL-terminated; the name as sent, printable ASCII of at
 * most 253 bytes). *why (when non-NULL) says what was wrong for BAD. */
enum tls_sni_result tls_sni(const uint8_t *buf, size_t len, char *out, size_t cap, const char **why);

#endif
