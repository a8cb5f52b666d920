/* A workspace's change between two images (wsdiff.h). */
#include "wsdiff.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "clock.h"
#include "errmsg.h"
#include "hex.h"
#include "utf8.h"

extern char **environ;

/* How long diff(1) may take over two files of at most WSDIFF_TEXT_MAX. */
#define DIFF_TIMEOUT_MS 10000

/* ---- the comparison (pure) -------------------------------------------------- */

/* Entries in one order whatever the walk's: by path, then (a hostile
 * image may list a name twice) by everything else that is compared. */
static int by_entry(const void *pa, const void *pb)
{
	const struct artifact_entry *a = *(const struct artifact_entry *const *)pa, *b = *(const struct artifact_entry *const *)pb;
	int c = strcmp(a->path, b->path);
	if (c)
		return c;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	if (a->mode != b->mode)
		return a->mode < b->mode ? -1 : 1;
	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	if ((c = strcmp(a->sha256, b->sha256)))
		return c;
	return strcmp(a->target ? a->target : "", b->target ? b->target : "");
}

static const struct artifact_entry **sorted(const struct artifacts_result *m)
{
	const struct artifact_entry **v = malloc((m->nentries ? m->nentries : 1) * sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < m->nentries; i++)
		v[i] = &m->entries[i];
	qsort(v, m->nentries, sizeof(*v), by_entry);
	return v;
}

static bool same(const struct artifact_entry *a, const struct artifact_entry *b)
{
	if (a->kind != b->kind || a->mode != b->mode)
		return false;
	if (a->kind == 'f')
		return a->size == b->size && !strcmp(a->sha256, b->sha256);
	if (a->kind == 'l')
		return !strcmp(a->target ? a->target : "", b->target ? b->target : "");
	return true;
}

/* The digest's input is a sequence of fields, each its length (8 bytes,
 * little-endian) and its bytes: no field's content can pass for another
 * field or end one early, however long or odd it is. */
static void field(EVP_MD_CTX *md, const void *p, size_t n)
{
	unsigned char len[8];
	for (int i = 0; i < 8; i++)
		len[i] = (unsigned char)((uint64_t)n >> (8 * i));
	EVP_DigestUpdate(md, len, sizeof(len));
	EVP_DigestUpdate(md, p, n);
}

static void field_str(EVP_MD_CTX *md, const char *s)
{
	field(md, s, strlen(s));
}

/* An entry as the digest knows it (absent: one empty field): what a
 * reviewer approved of it. */
static void field_entry(EVP_MD_CTX *md, const struct artifact_entry *e)
{
	char head[64];
	if (!e) {
		field(md, "", 0);
		return;
	}
	snprintf(head, sizeof(head), "%c %04o %llu", e->kind, e->mode, (unsigned long long)e->size);
	field_str(md, head);
	field_str(md, e->kind == 'f' ? e->sha256 : "");
	field_str(md, e->kind == 'l' && e->target ? e->target : "");
}

static void digest_skips(EVP_MD_CTX *md, const char *side, const struct artifacts_result *m)
{
	for (size_t i = 0; i < m->nskipped; i++) {
		field_str(md, side);
		field_str(md, m->skipped[i].path);
		field_str(md, m->skipped[i].reason);
	}
}

/* What the change was made on: every entry of the from side, in order. */
static int digest_base(EVP_MD_CTX *md, const struct artifact_entry **a, size_t n)
{
	unsigned char sum[32];
	EVP_MD_CTX *base = EVP_MD_CTX_new();
	if (!base || !EVP_DigestInit_ex(base, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(base);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		field_str(base, a[i]->path);
		field_entry(base, a[i]);
	}
	int rc = EVP_DigestFinal_ex(base, sum, NULL) ? 0 : -1;
	EVP_MD_CTX_free(base);
	if (rc == 0)
		field(md, sum, sizeof(sum));
	return rc;
}

static int add(struct wsdiff *d, size_t *cap, enum wsdiff_status st, const struct artifact_entry *from,
	       const struct artifact_entry *to)
{
	if (d->n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		struct wsdiff_change *p = realloc(d->c, c * sizeof(*p));
		if (!p)
			return -1;
		d->c = p;
		*cap = c;
	}
	d->c[d->n++] = (struct wsdiff_change){ st, from, to };
	*(st == WSDIFF_ADDED ? &d->added : st == WSDIFF_REMOVED ? &d->removed : &d->modified) += 1;
	return 0;
}

int wsdiff_compare(const struct artifacts_result *from, const struct artifacts_result *to, struct wsdiff *d)
{
	memset(d, 0, sizeof(*d));
	const struct artifact_entry **a = sorted(from), **b = sorted(to);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	size_t i = 0, j = 0, cap = 0;
	int rc = -1;
	if (!a || !b || !md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
		goto out;
	field_str(md, "vmrun workspace diff 2");
	if (digest_base(md, a, from->nentries) < 0)
		goto out;
	while (i < from->nentries || j < to->nentries) {
		int c = i == from->nentries ? 1 : j == to->nentries ? -1 : strcmp(a[i]->path, b[j]->path);
		const struct artifact_entry *x = c <= 0 ? a[i++] : NULL, *y = c >= 0 ? b[j++] : NULL;
		if (x && y && same(x, y))
			continue;
		enum wsdiff_status st = !x ? WSDIFF_ADDED : !y ? WSDIFF_REMOVED : WSDIFF_MODIFIED;
		if (add(d, &cap, st, x, y) < 0)
			goto out;
		field(md, &"AMR"[st], 1);
		field_str(md, (x ? x : y)->path);
		field_entry(md, x);
		field_entry(md, y);
	}
	digest_skips(md, "from", from);
	digest_skips(md, "to", to);
	unsigned char sum[32];
	if (!EVP_DigestFinal_ex(md, sum, NULL))
		goto out;
	hex_of(sum, sizeof(sum), d->digest);
	d->complete = from->nskipped == 0 && to->nskipped == 0;
	rc = 0;
out:
	EVP_MD_CTX_free(md);
	free(a);
	free(b);
	if (rc)
		wsdiff_free(d);
	return rc;
}

void wsdiff_free(struct wsdiff *d)
{
	free(d->c);
	memset(d, 0, sizeof(*d));
}

/* ---- unified diffs ---------------------------------------------------------- */

struct text {
	char path[PATH_MAX];   /* the copy, or /dev/null for a side that is absent */
	char *data;
	size_t len;
};

/* A side's copy read whole: 0; 1 when it has no copy to diff (why in
 * why); -1 on a host error. */
static int load_side(const struct artifact_entry *e, const char *dir, struct text *t, const char **why)
{
	t->data = NULL;
	t->len = 0;
	snprintf(t->path, sizeof(t->path), "/dev/null");
	if (!e)
		return 0;
	if (e->size > WSDIFF_TEXT_MAX)
		return *why = "larger than the text cap", 1;
	if (e->copy < 0)
		return *why = "not copied: the walk's copies reached their cap", 1;
	snprintf(t->path, sizeof(t->path), "%s/%ld", dir, e->copy);
	int fd = open(t->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != e->size ||
	    !(t->data = malloc(e->size + 1))) {
		if (fd >= 0)
			close(fd);
		return *why = "its copy is missing", 1;
	}
	ssize_t got = e->size ? read(fd, t->data, e->size) : 0;
	close(fd);
	if (got != (ssize_t)e->size)
		return *why = "its copy is short", 1;
	/* what is shown must be what was summed */
	char hex[65];
	sha256_hex(t->data, e->size, hex);
	if (strcmp(hex, e->sha256))
		return *why = "its copy is not what was summed", 1;
	t->len = e->size;
	return 0;
}

static bool is_text(const struct text *t)
{
	return !memchr(t->data ? t->data : "", 0, t->len) && utf8_valid(t->data ? t->data : "", t->len);
}

/* diff -u of the two sides into *out (its length in *len): 0, or -1 with
 * why. The files are ours (the copies) and text; diff reads them only. */
static int run_diff(const char *la, const struct text *a, const char *lb, const struct text *b, char **out,
		    size_t *len, const char **why)
{
	int p[2];
	posix_spawn_file_actions_t fa;
	pid_t pid;
	char *argv[] = { "diff", "-u", "--label", (char *)la, "--label", (char *)lb, (char *)a->path, (char *)b->path,
			 NULL };
	size_t cap = 4 * (a->len + b->len) + 4096, n = 0;
	char *buf = malloc(cap);
	*why = "diff(1) failed";
	if (!buf || pipe2(p, O_CLOEXEC) < 0) {
		free(buf);
		return -1;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	int rc = posix_spawnp(&pid, "diff", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (rc) {
		close(p[0]);
		free(buf);
		return -1;
	}
	int64_t deadline = clock_mono_ms() + DIFF_TIMEOUT_MS;
	bool over = false;
	for (;;) {
		struct pollfd pf = { p[0], POLLIN, 0 };
		int left = (int)(deadline - clock_mono_ms());
		if (left <= 0 || poll(&pf, 1, left) == 0) {
			over = true;
			break;
		}
		ssize_t got = read(p[0], buf + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		n += (size_t)got;
		if (n == cap) {
			over = true;
			break;
		}
	}
	close(p[0]);
	if (over)
		kill(pid, SIGKILL);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (over || !WIFEXITED(status) || WEXITSTATUS(status) > 1) {
		free(buf);
		return -1;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* The unified diff of a file added (all of t's lines "+") or removed (all
 * "-"), as GNU diff -u writes it: its one hunk's head counts the lines,
 * and a last line without its newline is marked so. Nothing for an empty
 * file (diff has nothing to say of it). 0, or -1 out of memory. */
static int one_sided(const struct text *t, bool added, const char *la, const char *lb, char **out, size_t *len)
{
	size_t lines = 0;
	for (size_t i = 0; i < t->len; i++)
		lines += t->data[i] == '\n';
	bool open_end = t->len && t->data[t->len - 1] != '\n';
	lines += open_end;
	size_t cap = strlen(la) + strlen(lb) + 96 + t->len + lines + 32;
	char *o = malloc(cap), range[48];
	if (!o)
		return -1;
	*out = o;
	*len = 0;
	if (!lines)
		return 0;
	if (lines == 1)
		snprintf(range, sizeof(range), "1");
	else
		snprintf(range, sizeof(range), "1,%zu", lines);
	size_t n = (size_t)snprintf(o, cap, "--- %s\n+++ %s\n@@ %s%s %s%s @@\n", la, lb, added ? "-0,0" : "-", added ? "" : range,
				    added ? "+" : "+0,0", added ? range : "");
	for (size_t i = 0; i < t->len;) {
		const char *nl = memchr(t->data + i, '\n', t->len - i);
		size_t end = nl ? (size_t)(nl - t->data) + 1 : t->len;
		o[n++] = added ? '+' : '-';
		memcpy(o + n, t->data + i, end - i);
		n += end - i;
		i = end;
	}
	if (open_end)
		n += (size_t)snprintf(o + n, cap - n, "\n\\ No newline at end of file\n");
	*len = n;
	return 0;
}

/* Lines added and removed, counted in the hunks (after the first "@@"). */
static void count_lines(const char *s, size_t n, json_int_t *ins, json_int_t *del)
{
	bool hunks = false;
	*ins = *del = 0;
	for (size_t i = 0; i < n;) {
		const char *nl = memchr(s + i, '\n', n - i);
		size_t end = nl ? (size_t)(nl - s) + 1 : n;
		if (!hunks)
			hunks = s[i] == '@' && end - i > 1 && s[i + 1] == '@';
		else if (s[i] == '+')
			(*ins)++;
		else if (s[i] == '-')
			(*del)++;
		i = end;
	}
}

/* A file change's text diff into o, within what is left of *budget. */
static void text_diff(json_t *o, const struct wsdiff_change *c, const char *from_dir, const char *to_dir,
		      size_t *budget)
{
	struct text a = { .data = NULL }, b = { .data = NULL };
	const char *why = NULL;
	char la[ARTIFACT_PATH_MAX + 8], lb[ARTIFACT_PATH_MAX + 8];
	const char *path = (c->to ? c->to : c->from)->path;
	if (load_side(c->from, from_dir, &a, &why) || load_side(c->to, to_dir, &b, &why))
		goto omit;
	if (!is_text(&a) || !is_text(&b)) {
		json_object_set_new(o, "binary", json_true());
		why = "binary";
		goto omit;
	}
	if (*budget == 0) {
		why = "the answer's diffs reached their cap";
		goto omit;
	}
	snprintf(la, sizeof(la), c->from ? "a/%s" : "/dev/null", path);
	snprintf(lb, sizeof(lb), c->to ? "b/%s" : "/dev/null", path);
	char *out = NULL;
	size_t len = 0;
	/* a file on one side only is written here as diff -u writes it: one
	 * process per added file made a diff of many new files take minutes */
	if (!c->from || !c->to ? one_sided(c->from ? &a : &b, !c->from, la, lb, &out, &len) < 0
			       : run_diff(la, &a, lb, &b, &out, &len, &why) < 0)
		goto omit;
	json_int_t ins, del;
	count_lines(out, len, &ins, &del);
	json_object_set_new(o, "binary", json_false());
	json_object_set_new(o, "insertions", json_integer(ins));
	json_object_set_new(o, "deletions", json_integer(del));
	if (len > *budget) {
		why = "the answer's diffs reached their cap";
		free(out);
		goto omit;
	}
	*budget -= len;
	json_object_set_new(o, "diff", json_stringn(out, len));
	free(out);
	free(a.data);
	free(b.data);
	return;
omit:
	json_object_set_new(o, "diff_omitted", json_string(why));
	free(a.data);
	free(b.data);
}

static const char *type_name(char kind)
{
	switch (kind) {
	case 'f': return "file";
	case 'd': return "directory";
	case 'l': return "symlink";
	case 'c': return "char_device";
	case 'b': return "block_device";
	case 'p': return "fifo";
	default: return "socket";
	}
}

static json_t *entry_json(const struct artifact_entry *e)
{
	char mode[8];
	snprintf(mode, sizeof(mode), "%04o", e->mode);
	json_t *o = json_pack("{s:s,s:s}", "type", type_name(e->kind), "mode", mode);
	if (e->kind == 'f') {
		json_object_set_new(o, "size", json_integer((json_int_t)e->size));
		json_object_set_new(o, "sha256", json_string(e->sha256));
	} else if (e->kind == 'l') {
		json_object_set_new(o, "target", json_string(e->target ? e->target : ""));
	}
	return o;
}

static json_t *skipped_json(const struct artifacts_result *m, const char *side, json_t *list)
{
	for (size_t i = 0; i < m->nskipped; i++)
		json_array_append_new(list, json_pack("{s:s,s:s,s:s}", "side", side, "path", m->skipped[i].path,
						      "reason", m->skipped[i].reason));
	return list;
}

json_t *wsdiff_json(const struct wsdiff *d, const struct artifacts_result *from, const char *from_dir,
		    const struct artifacts_result *to, const char *to_dir)
{
	static const char *const names[] = { "added", "modified", "removed" };
	json_t *files = json_array();
	json_int_t ins = 0, del = 0;
	size_t budget = WSDIFF_DIFF_MAX;
	for (size_t i = 0; files && i < d->n; i++) {
		const struct wsdiff_change *c = &d->c[i];
		const struct artifact_entry *now = c->to ? c->to : c->from;
		json_t *o = entry_json(now);
		json_object_set_new(o, "path", json_string(now->path));
		json_object_set_new(o, "status", json_string(names[c->status]));
		if (c->status == WSDIFF_MODIFIED)
			json_object_set_new(o, "old", entry_json(c->from));
		bool from_file = !c->from || c->from->kind == 'f', to_file = !c->to || c->to->kind == 'f';
		if (from_file && to_file) {
			text_diff(o, c, from_dir, to_dir, &budget);
			ins += json_integer_value(json_object_get(o, "insertions"));
			del += json_integer_value(json_object_get(o, "deletions"));
		}
		json_array_append_new(files, o);
	}
	return json_pack("{s:o,s:{s:I,s:I,s:I,s:I,s:I},s:o,s:b,s:s}", "files", files, "summary", "added",
			 (json_int_t)d->added, "modified", (json_int_t)d->modified, "removed", (json_int_t)d->removed,
			 "insertions", ins, "deletions", del, "skipped",
			 skipped_json(to, "to", skipped_json(from, "from", json_array())), "complete", d->complete,
			 "digest", d->digest);
}
