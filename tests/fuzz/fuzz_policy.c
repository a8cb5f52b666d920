/* libFuzzer harness for the --policy parser (host/policy.c): a caller's
 * policy file is client input. Each input is written to a memfd and loaded
 * over a fixed two-line manifest. Beyond the sanitizers it checks what a
 * load promises: on success every allowlist entry is a NUL-terminated
 * absolute path, and a refusal is one line. */
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
	if (len && write(fd, data, len) != (ssize_t)len)
		abort();
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static const char manifest[] = "/usr/bin/python3\n/bin/sh\n";
	int mfd = memfd_with("manifest", (const uint8_t *)manifest, sizeof(manifest) - 1);
	int pfd = memfd_with("policy", data, len);
	char mpath[64], ppath[64], err[512];
	snprintf(mpath, sizeof(mpath), "/proc/self/fd/%d", mfd);
	snprintf(ppath, sizeof(ppath), "/proc/self/fd/%d", pfd);
	struct policy p;
	memset(&p, 0, sizeof(p));
	err[0] = '\0';
	if (policy_load(&p, mpath, ppath, err, sizeof(err)) == 0) {
		for (unsigned i = 0; i < p.nallow; i++)
			if (p.allow[i][0] != '/' || !memchr(p.allow[i], '\0', POLICY_PATH_MAX))
				abort();
	} else if (!err[0] || strchr(err, '\n')) {
		abort();
	}
	policy_free(&p);
	close(pfd);
	close(mfd);
	return 0;
}
