/* What artifact extraction's two processes share (host/run/artifacts.c,
 * the parent; host/run/artifacts_walk.c, the sandboxed helper): the report
 * the helper writes on its pipe, one line per entry, and the helper's
 * entry point. Internal to the two. */
#ifndef VMRUN_ARTIFACTS_REPORT_H
#define VMRUN_ARTIFACTS_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "artifacts.h"
#include "artifacts_sandbox.h"

/* The helper lists at most this many skipped entries; the last line says
 * that later ones went unlisted. The parent accepts no more. */
#define SKIP_CAP 10000
/* Longest report line: "F", a size, a path escaped 4 bytes per byte. */
#define LINE_MAX_LEN 8192
/* Every directory level adds at least "x/" to the path, so no walk goes
 * deeper than this whatever max_depth says. */
#define DEPTH_HARD_CAP (ARTIFACT_PATH_MAX / 2)

/* The report's escaping (the parent undoes it): every byte outside
 * 0x20..0x7e, and the backslash, becomes \xNN, and '/' too when slash is
 * set. Into dst (cap bytes with the NUL), never half an escape; *cut says
 * whether src did not fit. Returns the length written. */
size_t artifacts_escape(char *dst, size_t cap, const char *src, size_t n, bool slash, bool *cut);

/* Undo artifacts_escape into dst (cap bytes with the NUL); -1 on a
 * malformed or too long input. Pure. */
int artifacts_unescape(char *dst, size_t cap, const char *src, size_t n);

/* A path as the helper could only have reported it: relative, no empty,
 * "." or ".." component, no control byte, within max_path. Pure. */
bool artifacts_valid_path(const char *p, unsigned max_path);

/* The helper, in the forked child: enter the sandbox s, walk the image
 * (SANDBOX_IMAGE_FD) into the destination (SANDBOX_DEST_FD) within lim,
 * report on SANDBOX_REPORT_FD, and exit (status 0 when the report ended
 * with END). */
void artifacts_walk_main(const struct artifacts_sandbox *s, const struct artifacts_limits *lim)
	__attribute__((noreturn));

#endif
