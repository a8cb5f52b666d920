/* libFuzzer harness for a manifest's lines as the parent reads them
 * (artifacts_parse_entry, host/run/artifacts_manifest.c: the helper that
 * writes them read a hostile image and may be taken over), and for the
 * diff of two manifests made of what parsed (wsdiff_compare, wsdiff_json:
 * its JSON must be whole and its digest 64 hex digits).
 *
 * Input: lines ("R 644 5 <sum> - path", ...: the letter, a space, the
 * rest); a line that is exactly "--" starts the second manifest. The
 * whole input is also a file's content, added and then removed, whose
 * diff is written as diff -u writes it (the file's text is the guest's). */
#include <jansson.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#include "artifacts.h"
#include "hex.h"
#include "wsdiff.h"

#define MAX_ENTRIES 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* data as a copy (number 0 in a directory of this process's) and the
 * entry that names it; the diff of its adding and of its removal must be
 * whole JSON, and its text, when it is one, a unified diff's. */
static void one_file(const uint8_t *data, size_t size)
{
	static char dir[64];
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/fuzz-manifest-XXXXXX");
		if (!mkdtemp(dir))
			abort();
	}
	char path[96];
	snprintf(path, sizeof(path), "%s/0", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size) || close(fd) < 0)
		abort();
	struct artifact_entry e = { .path = "t.txt", .kind = 'f', .mode = 0644, .size = size, .copy = 0 };
	sha256_hex(data, size, e.sha256);
	struct artifacts_result none = { 0 }, one = { .entries = &e, .nentries = 1 };
	for (int k = 0; k < 2; k++) {
		struct wsdiff d;
		if (wsdiff_compare(k ? &one : &none, k ? &none : &one, &d))
			abort();
		json_t *o = wsdiff_json(&d, k ? &one : &none, dir, k ? &none : &one, dir);
		const char *diff = json_string_value(json_object_get(json_array_get(json_object_get(o, "files"), 0), "diff"));
		if (!o || (diff && *diff && strncmp(diff, k ? "--- a/t.txt\n+++ /dev/null\n@@ -1" : "--- /dev/null\n+++ b/t.txt\n@@ -0,0 +1", 30)))
			abort();
		json_decref(o);
		wsdiff_free(&d);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct artifacts_limits lim = { .max_bytes = 1 << 20, .max_files = MAX_ENTRIES, .max_path = 200,
					.manifest = true, .copy_max = 4096, .copy_total = 16384 };
	struct artifact_entry *e = calloc(2 * MAX_ENTRIES, sizeof(*e));
	struct artifacts_result m[2] = { { .entries = e }, { .entries = e + MAX_ENTRIES } };
	long next[2] = { 0, 0 };
	int side = 0;
	const char *s = (const char *)data, *end = s + size;
	while (e && s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
		if (n == 2 && s[0] == '-' && s[1] == '-')
			side = 1;
		else if (n >= 2 && s[1] == ' ' && m[side].nentries < MAX_ENTRIES &&
			 artifacts_parse_entry(s[0], s + 2, n - 2, &lim, &next[side],
					       &m[side].entries[m[side].nentries]) == 0) {
			struct artifact_entry *got = &m[side].entries[m[side].nentries++];
			if (strlen(got->path) == 0 || strlen(got->path) > lim.max_path)
				abort();
		}
		s += n + 1;
	}
	struct wsdiff d;
	if (e && wsdiff_compare(&m[0], &m[1], &d) == 0) {
		/* no copies exist under these names: every text diff is omitted */
		json_t *o = wsdiff_json(&d, &m[0], "/nonexistent", &m[1], "/nonexistent");
		if (!o || strlen(d.digest) != 64 || json_array_size(json_object_get(o, "files")) != d.n)
			abort();
		char *text = json_dumps(o, JSON_COMPACT);
		if (!text)
			abort();
		free(text);
		json_decref(o);
		wsdiff_free(&d);
	}
	if (size <= 4096)
		one_file(data, size);
	for (int k = 0; e && k < 2; k++)
		for (size_t i = 0; i < m[k].nentries; i++)
			free(m[k].entries[i].target);
	free(e);
	return 0;
}
