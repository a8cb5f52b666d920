/* Language runtimes: each a read-only root image with its own allowlist,
 * described by the NAME.runtime file the image build writes beside
 * NAME.ext4 and NAME.programs (rootfs/build.sh; the manifests are in
 * rootfs/runtimes/). Lines are "key: value"; the keys read here:
 *
 *   name: python                  [a-z0-9+._-], at most 63 bytes
 *   version: 3.11.2               read from the package by the build
 *   aliases: py py3 python3       names it is also found by (Piston's)
 *   extension: py                 its source files'
 *   compile: gcc -o prog {files}  optional
 *   run: python3 {file} {args}
 *   (templates: words split at spaces, no shell; see runtime_expand)
 *   run-timeout: 10, run-memory: 256, compile-timeout:, compile-memory:
 *
 * Other keys (packages, check, ...) are the build's and are skipped. */
#ifndef VMRUN_RUNTIME_H
#define VMRUN_RUNTIME_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define RUNTIME_NAME_MAX 64
#define RUNTIME_MAX      64     /* runtimes listed from one directory at most */

struct runtime {
	char name[RUNTIME_NAME_MAX];
	char version[RUNTIME_NAME_MAX];
	char aliases[256];          /* space-separated */
	char extension[16];
	char compile[512], run[512];
	uint64_t run_timeout_s, run_memory_mib, compile_timeout_s, compile_memory_mib;   /* 0: not set */
	char image[PATH_MAX], programs[PATH_MAX];   /* NAME.ext4 and NAME.programs beside it */
};

/* Most words one template expands to, and bytes of their text. */
#define RUNTIME_ARGV_MAX  PROTO_MAX_ARGS
#define RUNTIME_STORE_MAX (PROTO_MAX_PAYLOAD / 2)

/* Expand a compile or run template into argv (at most max words and a
 * NULL), the words' text in store (storelen bytes). Words are split at
 * spaces; in each, {file} is the first source file's name and {stem} that
 * name without its last extension; a word that is exactly {files} becomes
 * every file's name, and exactly {args} every argument (no other word may
 * hold those two). Nothing is run through a shell. Returns the word count,
 * or -1 with a one-line reason in err (an unknown placeholder, no program,
 * too many or too long words). Pure. */
int runtime_expand(const char *tmpl, const char *const *files, unsigned nfiles, char *const *args, unsigned nargs,
		   char **argv, unsigned max, char *store, size_t storelen, char *err, size_t errlen);

/* Whether s is a valid runtime name or alias. Pure. */
int runtime_valid_name(const char *s);

/* Parse the NAME.runtime file at path into rt. Returns 0, or -1 with a
 * one-line reason (a missing name, version or run template, a bad value,
 * an over-long line). */
int runtime_load(const char *path, struct runtime *rt, char *err, size_t errlen);

/* The runtimes installed in dir (its *.runtime files), sorted by name, at
 * most max of them into list. Returns how many, or -1 with a reason. */
int runtime_list(const char *dir, struct runtime *list, size_t max, char *err, size_t errlen);

/* Whether rt is called name: its name, or one of its aliases. Pure. */
bool runtime_answers_to(const struct runtime *rt, const char *name);

/* The runtime of list[n] that answers to name; NULL when none does. Pure. */
const struct runtime *runtime_pick(const struct runtime *list, size_t n, const char *name);

/* Find the runtime called name (its name or one of its aliases) in dir.
 * Returns 0, or -1 with a reason naming the installed ones. */
int runtime_find(const char *dir, const char *name, struct runtime *rt, char *err, size_t errlen);

#endif
