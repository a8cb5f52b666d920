/* Versions and node-semver's range selectors ("3.11.2", "3.x", "3", "*",
 * ">=3.10 <4", "^3.9", "~3.11", "3.9 - 3.11", "2 || 3"), as Piston's
 * clients name a runtime's version (host/vmrund/piston.c). Pure. */
#ifndef VMRUND_SEMVER_H
#define VMRUND_SEMVER_H

#include <stdbool.h>
#include <stdint.h>

/* Versions have up to four numeric parts (17.0.21.1): the first three are
 * semver's, the fourth breaks ties. Missing parts are 0. */
#define SEMVER_PARTS 4

struct semver {
	uint64_t c[SEMVER_PARTS];
};

/* Parse a version ("3.11.2", "17.0.21.1", "5") into v: false for
 * anything else (a pre-release, a part too long). */
bool semver_parse(const char *s, struct semver *v);

/* a against b: -1, 0 or 1. */
int semver_cmp(const struct semver *a, const struct semver *b);

/* Whether version satisfies selector (node-semver's range grammar for the
 * forms above: space-separated comparators ANDed, "||" alternatives
 * ORed). A malformed selector matches nothing. */
bool semver_match(const char *version, const char *selector);

#endif
