/* Judge0's additional_files (judge0.h): a zip archive, read in memory by
 * libarchive, into a run spec's workspace_files. Judge0 runs `unzip -n`
 * in its box under isolate's file size limit; here nothing is written
 * until every entry has passed, so a bad archive is the client's 422
 * and never a half-made workspace. */
#include "judge0.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "utf8.h"

#define CHUNK 65536

/* libarchive's last error as one line (its texts may end in a newline,
 * or be none). */
static const char *lib_error(struct archive *a, char *out, size_t cap)
{
	const char *e = archive_error_string(a);
	snprintf(out, cap, "%s", e ? e : "unknown error");
	out[strcspn(out, "\r\n")] = '\0';
	return out;
}

/* Where path stands against what rq holds: 1 taken already (skipped, as
 * `unzip -n` skips it: the source comes first, then the archive's first
 * of a name), -1 a file where a directory is or the reverse, 0 free. */
static int place_of(const struct run_spec *rq, const char *path, bool dir)
{
	for (unsigned i = 0; i < rq->nfiles; i++)
		if (!strcmp(rq->files[i].name, path))
			return dir ? -1 : 1;
		else if (run_spec_path_above(rq->files[i].name, path))
			return -1;
	for (unsigned i = 0; i < rq->nwfiles; i++) {
		const char *w = rq->wfiles[i].name;
		if (!strcmp(w, path))
			return dir ? -1 : 1;
		if (run_spec_path_above(w, path) || (!dir && run_spec_path_above(path, w)))
			return -1;
	}
	return 0;
}

/* The entry's bytes, read as they come out and never past left: what a
 * header claims is not trusted. The buffer doubles (an 8 MiB file costs
 * a few copies), and is cut to size at the end; an empty file has none.
 * 0, or -1 with why. */
static int read_entry(struct archive *a, const char *shown, uint64_t *left, unsigned char **out, size_t *len,
		      char *why, size_t cap, uint64_t max_bytes)
{
	unsigned char *buf = NULL;
	size_t n = 0, room = 0;
	int rc = -1;
	for (;;) {
		if (room - n < CHUNK) {
			size_t more_room = room ? room * 2 : CHUNK;
			unsigned char *more = realloc(buf, more_room);
			if (!more) {
				errf(why, cap, "out of memory");
				goto out;
			}
			buf = more;
			room = more_room;
		}
		la_ssize_t got = archive_read_data(a, buf + n, CHUNK);
		if (got < 0) {
			char e[160];
			errf(why, cap, "\"%s\" cannot be extracted: %s", shown, lib_error(a, e, sizeof(e)));
			goto out;
		}
		if (got == 0)
			break;
		if ((uint64_t)got > *left) {
			errf(why, cap, "extracts to more than %llu KB", (unsigned long long)(max_bytes / 1024));
			goto out;
		}
		*left -= (uint64_t)got;
		n += (size_t)got;
		if (n > RUN_SPEC_MAX_FILE_BYTES) {
			errf(why, cap, "\"%s\" extracts to more than %u KB", shown, RUN_SPEC_MAX_FILE_BYTES / 1024);
			goto out;
		}
	}
	unsigned char *fit = n ? realloc(buf, n) : NULL;
	*out = fit ? fit : n ? buf : NULL;
	*len = n;
	if (!n)
		free(buf);
	buf = NULL;
	rc = 0;
out:
	free(buf);
	return rc;
}

/* One more workspace file in rq (data taken). */
static int add_wfile(struct run_spec *rq, const char *path, unsigned char *data, size_t len, bool executable)
{
	struct run_spec_file *more = realloc(rq->wfiles, (rq->nwfiles + 1) * sizeof(*more));
	if (!more)
		return -1;
	rq->wfiles = more;
	struct run_spec_file *f = &rq->wfiles[rq->nwfiles++];
	memset(f, 0, sizeof(*f));
	memcpy(f->name, path, strlen(path) + 1);
	f->data = data;
	f->len = len;
	f->executable = executable;
	return 0;
}

/* One entry: a regular file taken, a directory checked (made with the
 * files under it), anything else refused. */
static int take_entry(struct archive *a, struct archive_entry *e, struct run_spec *rq, uint64_t *left,
		      uint64_t max_bytes, char *why, size_t cap)
{
	const char *name = archive_entry_pathname(e);
	char path[RUN_SPEC_MAX_FILE_NAME + 2], shown[80], reason[96];
	errmsg_printable(shown, sizeof(shown), name ? name : "");
	if (!name || strlen(name) > RUN_SPEC_MAX_FILE_NAME + 1)
		return errf(why, cap, "holds an entry without a name of at most %d bytes", RUN_SPEC_MAX_FILE_NAME);
	memcpy(path, name, strlen(name) + 1);
	mode_t type = archive_entry_filetype(e);
	size_t n = strlen(path);
	if (type == AE_IFDIR && n > 1 && path[n - 1] == '/')
		path[n - 1] = '\0';
	if (type != AE_IFREG && type != AE_IFDIR)
		return errf(why, cap, "\"%s\" is not a file or a directory (a link?)", shown);
	if (archive_entry_is_encrypted(e))
		return errf(why, cap, "\"%s\" is encrypted", shown);
	/* the spec is JSON: a name in another encoding (zip's old CP437)
	 * could not be kept */
	if (!utf8_valid(path, strlen(path)))
		return errf(why, cap, "\"%s\" is not a UTF-8 name", shown);
	if (run_spec_path_check(path, reason, sizeof(reason)))
		return errf(why, cap, "\"%s\" is not a path inside the workspace: %s", shown, reason);
	int place = place_of(rq, path, type == AE_IFDIR);
	if (place < 0)
		return errf(why, cap, "\"%s\" would be a file and a directory at once", shown);
	if (type == AE_IFDIR || place > 0)
		return 0;
	if (rq->nwfiles == RUN_SPEC_MAX_WORKSPACE_FILES)
		return errf(why, cap, "holds more than %d files", RUN_SPEC_MAX_WORKSPACE_FILES);
	unsigned char *data = NULL;
	size_t len = 0;
	if (read_entry(a, shown, left, &data, &len, why, cap, max_bytes))
		return -1;
	/* unzip keeps an entry's execute bits: a script or a binary the
	 * program runs as ./name */
	if (add_wfile(rq, path, data, len, (archive_entry_perm(e) & 0100) != 0)) {
		free(data);
		return errf(why, cap, "out of memory");
	}
	return 0;
}

int judge0_unzip(const unsigned char *zip, size_t n, uint64_t max_bytes, struct run_spec *rq, char *why, size_t cap)
{
	struct archive *a = archive_read_new();
	if (!a)
		return errf(why, cap, "out of memory");
	int rc = -1;
	char e[160];
	unsigned had = rq->nwfiles;
	uint64_t left = max_bytes;
	if (archive_read_support_format_zip(a) != ARCHIVE_OK ||
	    archive_read_open_memory(a, zip, n) != ARCHIVE_OK) {
		errf(why, cap, "is not a zip archive (%s)", lib_error(a, e, sizeof(e)));
		goto out;
	}
	for (;;) {
		struct archive_entry *en;
		int r = archive_read_next_header(a, &en);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			errf(why, cap, "is not a zip archive that can be read (%s)", lib_error(a, e, sizeof(e)));
			goto out;
		}
		if (take_entry(a, en, rq, &left, max_bytes, why, cap))
			goto out;
	}
	rc = 0;
out:
	if (rc) {
		/* what this call added goes: the spec is as it was */
		for (unsigned i = had; i < rq->nwfiles; i++)
			free(rq->wfiles[i].data);
		rq->nwfiles = had;
	}
	archive_read_free(a);
	return rc;
}
