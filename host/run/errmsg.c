#include "errmsg.h"

#include <stdarg.h>
#include <stdio.h>

int errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

const char *errmsg_printable(char *dst, size_t cap, const char *text)
{
	size_t i = 0;
	for (; text[i] && i + 1 < cap; i++)
		dst[i] = text[i] >= 0x20 && text[i] < 0x7f ? text[i] : '?';
	if (cap)
		dst[i] = '\0';
	return dst;
}
