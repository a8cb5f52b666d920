/* Judge0's comparison of outputs (host/run/lines.h). */
#include "lines.h"

#include <stdlib.h>
#include <string.h>

/* Ruby's rstrip: white space and NUL. */
static bool rstrip_char(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r' || c == '\0';
}

/* strip(text) of isolate_job.rb into out (room for n bytes): the length. */
static size_t strip(const char *s, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i <= n;) {
		size_t k = 0;
		while (i + k < n && s[i + k] != '\n')
			k++;
		size_t end = k;
		while (end && rstrip_char(s[i + end - 1]))
			end--;
		memcpy(out + o, s + i, end);
		o += end;
		if (i + k < n)
			out[o++] = '\n';
		i += k + 1;
	}
	while (o && rstrip_char(out[o - 1]))
		o--;
	return o;
}

bool lines_match(const char *expected, size_t elen, const char *out, size_t olen)
{
	/* Judge0 keeps an empty stdout as nil, and strip(nil) is nil */
	if (!out)
		return false;
	char *a = malloc(elen + 1), *b = malloc(olen + 1);
	bool same = false;
	if (a && b) {
		size_t na = strip(expected, elen, a), nb = strip(out, olen, b);
		same = na == nb && !memcmp(a, b, na);
	}
	free(a);
	free(b);
	return same;
}
