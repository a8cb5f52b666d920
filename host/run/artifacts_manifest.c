/* A manifest's lines as the parent reads them (artifacts.h): the helper
 * that wrote them read a hostile image and may have been taken over, so
 * every field is checked here, none believed for being in its place. */
#include "artifacts.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "artifacts_report.h"
#include "hex.h"
#include "utf8.h"

/* A decimal or octal number up to a space (or the end); -1 when none. */
static int number(const char **s, const char *end, unsigned base, uint64_t max, uint64_t *out)
{
	const char *p = *s;
	uint64_t v = 0;
	for (; p < end && *p >= '0' && *p < (char)('0' + (base == 8 ? 8 : 10)); p++) {
		if (v > (max - (uint64_t)(*p - '0')) / base)
			return -1;
		v = v * base + (uint64_t)(*p - '0');
	}
	if (p == *s || (p < end && *p != ' '))
		return -1;
	*out = v;
	*s = p < end ? p + 1 : p;
	return 0;
}

static int field(const char **s, const char *end, char *out, size_t cap)
{
	const char *sp = memchr(*s, ' ', (size_t)(end - *s));
	size_t n = sp ? (size_t)(sp - *s) : 0;
	if (!sp || n == 0 || n >= cap)
		return -1;
	memcpy(out, *s, n);
	out[n] = 0;
	*s = sp + 1;
	return 0;
}

static bool printable(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return false;
	return true;
}

int artifacts_parse_entry(char letter, const char *s, size_t n, const struct artifacts_limits *lim,
			  long *next_copy, struct artifact_entry *e)
{
	const char *end = s + n, *p = s;
	uint64_t v = 0;
	char word[72];
	memset(e, 0, sizeof(*e));
	e->copy = -1;
	switch (letter) {
	case 'D':
		e->kind = 'd';
		if (number(&p, end, 8, 07777, &v))
			return -1;
		e->mode = (uint16_t)v;
		break;
	case 'R':
		e->kind = 'f';
		if (number(&p, end, 8, 07777, &v))
			return -1;
		e->mode = (uint16_t)v;
		if (number(&p, end, 10, lim->max_bytes, &e->size) || field(&p, end, e->sha256, sizeof(e->sha256)) ||
		    !hex_is_sha256(e->sha256) || field(&p, end, word, sizeof(word)))
			return -1;
		if (strcmp(word, "-")) {
			const char *w = word;
			/* copies' numbers only grow (a failed copy leaves a gap), so
			 * no two entries name one file */
			if (e->size > lim->copy_max || number(&w, word + strlen(word), 10, LONG_MAX / 2, &v) ||
			    v < (uint64_t)*next_copy)
				return -1;
			e->copy = (long)v;
			*next_copy = (long)v + 1;
		}
		break;
	case 'L': {
		e->kind = 'l';
		if (number(&p, end, 10, ARTIFACT_PATH_MAX - 1, &e->size) || e->size == 0)
			return -1;
		const char *tab = memchr(p, '\t', (size_t)(end - p));
		if (!tab || !printable(tab + 1, (size_t)(end - tab - 1)) || tab + 1 == end ||
		    !(e->target = strndup(tab + 1, (size_t)(end - tab - 1))))
			return -1;
		end = tab;
		break;
	}
	case 'O':
		if (p + 2 > end || !strchr("cbps", p[0]) || p[0] == 0 || p[1] != ' ')
			return -1;
		e->kind = p[0];
		p += 2;
		if (number(&p, end, 8, 07777, &v))
			return -1;
		e->mode = (uint16_t)v;
		break;
	default:
		return -1;
	}
	/* UTF-8 as the helper checks every name: a path is shown as JSON */
	if (artifacts_unescape(e->path, sizeof(e->path), p, (size_t)(end - p)) < 0 ||
	    !artifacts_valid_path(e->path, lim->max_path) || !utf8_valid(e->path, strlen(e->path))) {
		free(e->target);
		e->target = NULL;
		return -1;
	}
	return 0;
}
