/* libFuzzer harness for the ClientHello's server name (host/proxy/tls_sni.c):
 * the first bytes of a guest's tunnel. Beyond the sanitizers it checks
 * what the reader promises: a name found is 1 to 253 printable ASCII
 * bytes; a refusal says why; and a prefix of the input never reads as
 * more than "wait for more" or the same answer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tls_sni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	char name[300];
	const char *why = NULL;
	enum tls_sni_result r = tls_sni(data, len, name, sizeof(name), &why);
	if (r == TLS_SNI_FOUND) {
		size_t n = strlen(name);
		if (n == 0 || n > 253)
			abort();
		for (size_t i = 0; i < n; i++)
			if (name[i] < 0x21 || name[i] > 0x7e)
				abort();
	} else if (r == TLS_SNI_BAD && !why) {
		abort();
	}
	if (len > 0) {
		char again[300];
		enum tls_sni_result p = tls_sni(data, len - 1, again, sizeof(again), NULL);
		if (p != TLS_SNI_MORE && p != r)
			abort();
		if (p == TLS_SNI_FOUND && strcmp(again, name))
			abort();
	}
	return 0;
}
