/* UTF-8 checks (host/run/utf8.h). */
#include "utf8.h"

bool utf8_valid(const void *p, size_t n)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n;) {
		unsigned c = s[i];
		size_t more = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 4;
		if (more == 4 || c == 0xc0 || c == 0xc1 || n - i <= more)
			return false;   /* no such lead byte, an overlong one, or cut short */
		unsigned cp = more ? c & (0x3fu >> more) : c;
		for (size_t k = 1; k <= more; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if ((more == 2 && cp < 0x800) || (more == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += more + 1;
	}
	return true;
}

size_t utf8_cut(const char *s, size_t n, size_t cap)
{
	if (n <= cap)
		return n;
	/* back over continuation bytes to the start of the character at cap */
	while (cap > 0 && ((unsigned char)s[cap] & 0xc0) == 0x80)
		cap--;
	return cap;
}
