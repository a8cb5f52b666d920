#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Each message is built in one buffer and written with one fputs, so lines
 * from concurrent vCPU threads do not interleave. */
static void emit(const char *suffix, const char *fmt, va_list ap)
{
	char line[512];
	int n = snprintf(line, sizeof(line), VMM_LOG_PREFIX);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = (int)sizeof(line) - 1;
	snprintf(line + n, sizeof(line) - (size_t)n, "%s%s\n", suffix ? ": " : "", suffix ? suffix : "");
	fputs(line, stderr);
}

void vmm_err(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit(NULL, fmt, ap);
	va_end(ap);
}

void vmm_perr(const char *fmt, ...)
{
	int e = errno;
	va_list ap;
	va_start(ap, fmt);
	emit(strerror(e), fmt, ap);
	va_end(ap);
}
