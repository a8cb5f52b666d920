/* libFuzzer harness for the --policy parser (host/run/policy.c): a caller's
 * policy file is client input. Each input is written to a memfd and loaded
 * over a fixed two-line manifest, once as root's file and once as a
 * caller's (which may only lower ceilings). Beyond the sanitizers it checks what a
 * load promises: on success every allowlist entry is a NUL-terminated
 * absolute path, a caller's file raised no ceiling, and a refusal is one
 * line. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "policy.h"

static int memfd_with(const char *name, const uint8_t *data, size_t len)
{
	int fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0)
		abort();
	if ((len && write(fd, data, len) != (ssize_t)len) || lseek(fd, 0, SEEK_SET) != 0)
		abort();
	return fd;
}

/* One load of the input as a file of the given trust. */
static void one(const uint8_t *data, size_t len, enum policy_trust trust)
{
	static const char manifest[] = "/usr/bin/python3\n/bin/sh\n";
	FILE *m = fmemopen((void *)manifest, sizeof(manifest) - 1, "r");
	int pfd = memfd_with("policy", data, len);
	FILE *f = fdopen(pfd, "r");
	if (!m || !f)
		abort();
	char err[512] = "";
	struct policy p;
	memset(&p, 0, sizeof(p));
	if (policy_load(&p, m, "manifest", err, sizeof(err)))
		abort();
	uint64_t mem = p.max_memory_mib;
	if (policy_apply(&p, f, "policy", trust, err, sizeof(err)) == 0) {
		for (unsigned i = 0; i < p.nallow; i++)
			if (p.allow[i][0] != '/' || !memchr(p.allow[i], '\0', POLICY_PATH_MAX))
				abort();
		if (trust == POLICY_LOWER_ONLY && p.max_memory_mib > mem)
			abort();   /* a caller's file raised a ceiling */
	} else if (!err[0] || strchr(err, '\n')) {
		abort();
	}
	policy_free(&p);
	fclose(f);
	fclose(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	one(data, len, POLICY_MAY_RAISE);
	one(data, len, POLICY_LOWER_ONLY);
	return 0;
}
