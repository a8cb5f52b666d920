/* vmrund's one logger (see say.h). */
#include "say.h"

#include <stdarg.h>
#include <stdio.h>

void vmrund_say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	flockfile(stderr);   /* the API's threads and the loop log at once: whole lines */
	fputs("vmrund: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	funlockfile(stderr);
	va_end(ap);
}
