/* libFuzzer harness for the host proxy's request parser
 * (host/proxy/request.c over http_parser): every byte of it comes from
 * the guest. Beyond the sanitizers it checks what the parse promises: a
 * refusal is 400, 414, 431 or 501 with a one-line reason; a head taken
 * has a host, ends within the input, and the head it writes upstream
 * (with a secret header added) ends at its one empty line, every line
 * ended by CRLF, so that nothing the guest sent can start a second
 * request or a header of its own making. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"

static void check_upstream(const struct proxy_request *r)
{
	size_t len;
	char *up = proxy_request_upstream(r, "authorization", "Authorization", "Bearer x", &len);
	if (!up)
		abort();
	if (len < 4 || strlen(up) != len || strcmp(up + len - 4, "\r\n\r\n"))
		abort();
	for (size_t i = 0; i < len; i++) {
		if (up[i] == '\n' && (i == 0 || up[i - 1] != '\r'))
			abort();
		if (up[i] == '\r' && up[i + 1] != '\n')
			abort();
	}
	char *blank = strstr(up, "\r\n\r\n");
	if (blank != up + len - 4)
		abort();
	/* The secret is added once, at the end: the guest's own is dropped. */
	char *auth = strstr(up, "\r\nAuthorization: ");
	if (!auth || strstr(auth + 1, "\r\nAuthorization: ") || strcasestr(up, "\r\nauthorization: ") != auth)
		abort();
	free(up);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	char err[256] = "";
	struct proxy_request r;
	int rc = proxy_request_parse((const char *)data, len, &r, err, sizeof(err));
	if (rc == 1) {
		if (!r.host[0] || r.head_len > len || r.port == 0)
			abort();
		if (!r.connect)
			check_upstream(&r);
		proxy_request_free(&r);
	} else if (rc != 0) {
		if ((rc != 400 && rc != 414 && rc != 431 && rc != 501) || !err[0] || strchr(err, '\n'))
			abort();
	}
	return 0;
}
