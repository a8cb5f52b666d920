/* Versions and node-semver's range selectors, as Piston picks a runtime
 * by them (semver.h). Pure. */
#include "semver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Digits in one part at most, so that bumping one never overflows. */
#define VER_DIGITS 15

/* A selector's version: k parts given (0: "*" or "x"), the rest 0. */
struct partial {
	struct semver v;
	int k;
};

int semver_cmp(const struct semver *a, const struct semver *b)
{
	for (int i = 0; i < SEMVER_PARTS; i++)
		if (a->c[i] != b->c[i])
			return a->c[i] < b->c[i] ? -1 : 1;
	return 0;
}

/* One number of at most VER_DIGITS digits at *s, moving *s past it. */
static bool read_number(const char **s, const char *end, uint64_t *out)
{
	const char *p = *s;
	uint64_t v = 0;
	while (p < end && *p >= '0' && *p <= '9' && p - *s < VER_DIGITS)
		v = v * 10 + (uint64_t)(*p++ - '0');
	if (p == *s || (p < end && *p >= '0' && *p <= '9'))
		return false;
	*s = p;
	*out = v;
	return true;
}

/* A runtime's version: 1 to 4 dot-separated numbers and nothing else. */
bool semver_parse(const char *s, struct semver *v)
{
	const char *end = s + strlen(s);
	memset(v, 0, sizeof(*v));
	for (int i = 0; i < SEMVER_PARTS; i++) {
		if (!read_number(&s, end, &v->c[i]))
			return false;
		if (s == end)
			return true;
		if (*s++ != '.')
			return false;
	}
	return false;
}

static bool wildcard(char c)
{
	return c == 'x' || c == 'X' || c == '*';
}

/* A partial version [s, end): "v"? then parts, each a number or a wildcard;
 * after a wildcard the rest is ignored as node-semver does ("1.x.3" is 1.x). */
static bool partial_parse(const char *s, const char *end, struct partial *p)
{
	memset(p, 0, sizeof(*p));
	if (s < end && (*s == 'v' || *s == 'V'))
		s++;
	if (s == end)
		return false;
	bool wild = false;
	for (int i = 0; i < SEMVER_PARTS; i++) {
		uint64_t n = 0;
		if (wildcard(*s))
			s++, wild = true;
		else if (!read_number(&s, end, &n))
			return false;
		if (!wild) {
			p->v.c[i] = n;
			p->k = i + 1;
		}
		if (s == end)
			return true;
		if (*s++ != '.' || s == end)
			return false;
	}
	return false;
}

/* p with part i raised by one and the later parts zeroed: the first
 * version past everything p's first i + 1 parts cover. */
static struct semver bump(const struct partial *p, int i)
{
	struct semver v = p->v;
	v.c[i]++;
	for (int j = i + 1; j < SEMVER_PARTS; j++)
		v.c[j] = 0;
	return v;
}

/* lo <= v < hi */
static bool in_range(const struct semver *v, const struct semver *lo, const struct semver *hi)
{
	return semver_cmp(v, lo) >= 0 && semver_cmp(v, hi) < 0;
}

/* The part a caret range may not change: the first non-zero one given,
 * or the last given when all are zero (^0.0 is <0.1.0, ^0.0.3 <0.0.4). */
static int caret_part(const struct partial *p)
{
	for (int i = 0; i < p->k; i++)
		if (p->v.c[i])
			return i;
	return p->k - 1;
}

/* Whether v satisfies one comparator: op ("", "=", "<", "<=", ">", ">=",
 * "~", "^") and a partial version, by node-semver's desugaring of each. */
static bool comparator_ok(const struct semver *v, const char *op, const struct partial *p)
{
	if (!p->k)   /* "*": every version, except past or before "all" */
		return strcmp(op, "<") && strcmp(op, ">");
	struct semver upper = bump(p, p->k - 1);
	if (!strcmp(op, ">="))
		return semver_cmp(v, &p->v) >= 0;
	if (!strcmp(op, "<"))
		return semver_cmp(v, &p->v) < 0;
	if (!strcmp(op, ">"))
		return p->k == SEMVER_PARTS ? semver_cmp(v, &p->v) > 0 : semver_cmp(v, &upper) >= 0;
	if (!strcmp(op, "<="))
		return p->k == SEMVER_PARTS ? semver_cmp(v, &p->v) <= 0 : semver_cmp(v, &upper) < 0;
	if (!strcmp(op, "~")) {
		struct semver hi = bump(p, p->k > 1 ? 1 : 0);
		return in_range(v, &p->v, &hi);
	}
	if (!strcmp(op, "^")) {
		struct semver hi = bump(p, caret_part(p));
		return in_range(v, &p->v, &hi);
	}
	/* "" or "=": an X-range; with all four parts, exactly that version. */
	return in_range(v, &p->v, &upper);
}

/* The operator at the start of [s, end) into op (at most 2 characters). */
static const char *read_op(const char *s, const char *end, char op[3])
{
	size_t n = 0;
	if (s < end && (*s == '<' || *s == '>' || *s == '=' || *s == '~' || *s == '^'))
		op[n++] = *s++;
	if (n && s < end && *s == '=' && (op[0] == '<' || op[0] == '>'))
		op[n++] = *s++;
	/* node-semver's "~>" is "~" */
	if (n && op[0] == '~' && s < end && *s == '>')
		s++;
	op[n] = '\0';
	return s;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t';
}

static const char *skip_space(const char *s, const char *end)
{
	while (s < end && is_space(*s))
		s++;
	return s;
}

static const char *word_end(const char *s, const char *end)
{
	while (s < end && !is_space(*s))
		s++;
	return s;
}

/* A hyphen range "A - B" in [s, end), if that is what it is: *is says so,
 * and the result is whether v lies within. */
static bool hyphen_ok(const struct semver *v, const char *s, const char *end, bool *is, bool *bad)
{
	const char *a_end = word_end(s, end), *dash = skip_space(a_end, end);
	*is = false;
	if (dash == a_end || dash + 1 >= end || dash[0] != '-' || !is_space(dash[1]))
		return false;
	const char *b = skip_space(dash + 1, end), *b_end = word_end(b, end);
	if (skip_space(b_end, end) != end)
		return false;
	*is = true;
	struct partial lo, hi;
	if (!partial_parse(s, a_end, &lo) || !partial_parse(b, b_end, &hi)) {
		*bad = true;
		return false;
	}
	return comparator_ok(v, ">=", &lo) && comparator_ok(v, "<=", &hi);
}

/* One alternative (between "||"): comparators separated by spaces, all
 * of which v must satisfy; *bad when one is malformed. */
static bool alternative_ok(const struct semver *v, const char *s, const char *end, bool *bad)
{
	s = skip_space(s, end);
	bool is_hyphen;
	bool ok = hyphen_ok(v, s, end, &is_hyphen, bad);
	if (is_hyphen)
		return ok;
	ok = true;
	while ((s = skip_space(s, end)) < end) {
		char op[3];
		/* node-semver allows a space after the operator (">= 3.10") */
		const char *at = skip_space(read_op(s, end, op), end), *w = word_end(at, end);
		struct partial p;
		if (!partial_parse(at, w, &p)) {
			*bad = true;
			return false;
		}
		ok = comparator_ok(v, op, &p) && ok;
		s = w;
	}
	return ok;
}

bool semver_match(const char *version, const char *selector)
{
	struct semver v;
	if (!semver_parse(version, &v))
		return false;
	bool any = false, bad = false;
	const char *s = selector, *end = s + strlen(s);
	/* Every alternative is read, so that a malformed one anywhere matches
	 * nothing rather than whatever preceded it. */
	for (;;) {
		const char *bar = strstr(s, "||");
		const char *alt_end = bar ? bar : end;
		if (alternative_ok(&v, s, alt_end, &bad))
			any = true;
		if (!bar)
			break;
		s = bar + 2;
	}
	return any && !bad;
}
