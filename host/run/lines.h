/* Judge0's comparison of a program's output with the one expected
 * (isolate_job.rb's strip of each): every line right-stripped of white
 * space and NULs, then the whole. Judge0's API judges by it, and so do
 * /v1/judge's "lines" checker and a repeated run that must give an
 * expected output (run_spec's repeat_expect). */
#ifndef VMRUN_LINES_H
#define VMRUN_LINES_H

#include <stdbool.h>
#include <stddef.h>

/* Whether out (olen bytes) matches expected (elen bytes). An empty
 * output is given as out NULL and never matches (Judge0 keeps an empty
 * stdout as nil, and strip(nil) is nil). False too when out of memory.
 * Pure. */
bool lines_match(const char *expected, size_t elen, const char *out, size_t olen);

#endif
