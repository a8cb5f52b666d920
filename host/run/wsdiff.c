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
#include "utf8.h"

extern char **environ;

/* How long diff(1) may take over two files of at most WSDIFF_TEXT_MAX. */
#define DIFF_TIMEOUT_MS 10000

/* ---- the comparison (pure) -------------------------------------------------- */

static int by_path(const void *a, const void *b)
{
	return strcmp((*(const struct artifact_entry *const *)a)->path, (*(const struct artifact_entry *const *)b)->path);
}

static const struct artifact_entry **sorted(const struct artifacts_result *m)
{
	const struct artifact_entry **v = malloc((m->nentries ? m->nentries : 1) * sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < m->nentries; i++)
		v[i] = &m->entries[i];
	qsort(v, m->nentries, sizeof(*v), by_path);
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

/* An entry's side of the digest's text: what a reviewer approved of it. */
static void describe(const struct artifact_entry *e, char *out, size_t len)
{
	if (!e)
		snprintf(out, len, "-");
	else if (e->kind == 'f')
		snprintf(out, len, "f %04o %llu %s", e->mode, (unsigned long long)e->size, e->sha256);
	else if (e->kind == 'l')
		snprintf(out, len, "l %s", e->target ? e->target : "");
	else
		snprintf(out, len, "%c %04o", e->kind, e->mode);
}

static void digest_skips(EVP_MD_CTX *md, const char *side, const struct artifacts_result *m)
{
	for (size_t i = 0; i < m->nskipped; i++) {
		char line[ARTIFACT_PATH_MAX + 200];
		int n = snprintf(line, sizeof(line), "S %s\t%s\t%s\n", side, m->skipped[i].path, m->skipped[i].reason);
		EVP_DigestUpdate(md, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
	}
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
	EVP_DigestUpdate(md, "vmrun workspace diff 1\n", 23);
	while (i < from->nentries || j < to->nentries) {
		int c = i == from->nentries ? 1 : j == to->nentries ? -1 : strcmp(a[i]->path, b[j]->path);
		const struct artifact_entry *x = c <= 0 ? a[i++] : NULL, *y = c >= 0 ? b[j++] : NULL;
		if (x && y && same(x, y))
			continue;
		enum wsdiff_status st = !x ? WSDIFF_ADDED : !y ? WSDIFF_REMOVED : WSDIFF_MODIFIED;
		if (add(d, &cap, st, x, y) < 0)
			goto out;
		char line[3 * ARTIFACT_PATH_MAX + 300], dx[ARTIFACT_PATH_MAX + 100], dy[ARTIFACT_PATH_MAX + 100];
		describe(x, dx, sizeof(dx));
		describe(y, dy, sizeof(dy));
		int n = snprintf(line, sizeof(line), "%c\t%s\t%s\t%s\n", "AMR"[st], (x ? x : y)->path, dx, dy);
		EVP_DigestUpdate(md, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
	}
	digest_skips(md, "from", from);
	digest_skips(md, "to", to);
	unsigned char sum[32];
	if (!EVP_DigestFinal_ex(md, sum, NULL))
		goto out;
	for (int k = 0; k < 32; k++)
		snprintf(d->digest + 2 * k, 3, "%02x", sum[k]);
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
		return *why = "not copied", 1;
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
	if (run_diff(la, &a, lb, &b, &out, &len, &why) < 0)
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
