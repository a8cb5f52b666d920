#include "textfile.h"

#include "errmsg.h"

enum textfile_line textfile_read_line(FILE *f, char *buf, size_t len)
{
	size_t n = 0;
	int c;
	while ((c = getc(f)) != EOF && c != '\n') {
		if (c == '\0')
			return TEXTFILE_NUL;
		if (n + 1 >= len)
			return TEXTFILE_LONG;
		buf[n++] = (char)c;
	}
	buf[n] = '\0';
	return c == EOF && n == 0 ? TEXTFILE_EOF : TEXTFILE_OK;
}

int textfile_bad_line(char *err, size_t errlen, const char *what, const char *file, unsigned no,
		      enum textfile_line r, size_t len)
{
	if (r == TEXTFILE_NUL)
		return errf(err, errlen, "%s %s line %u: holds a NUL byte", what, file, no);
	return errf(err, errlen, "%s %s line %u: longer than %zu bytes", what, file, no, len - 1);
}
