/* Artifact extraction, the parent's side (artifacts.h): check the
 * destination, fork the sandboxed helper (artifacts_walk.c), read its
 * report under the deadline and believe none of it unchecked, and give
 * the copied tree to its owner. */
#include "artifacts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "artifacts_report.h"
#include "artifacts_sandbox.h"
#include "clock.h"
#include "errmsg.h"
#include "session.h"   /* vmrun's clock */
#include "utf8.h"

/* Fds the helper may hold besides one per open directory level. */
#define FD_SLACK 16
/* What the parent keeps of the helper's stderr (the rest is read and
 * dropped, so the helper never blocks on it). */
#define STDERR_KEEP 4096
/* Entries the ownership walk accepts beyond the helper's caps (files and
 * directories, max_files each). */
#define CHOWN_SLACK 64

/* ---- report lines, read ------------------------------------------------ */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int artifacts_unescape(char *dst, size_t cap, const char *src, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)src[i];
		if (c < 0x20 || c > 0x7e || o + 1 >= cap)
			return -1;
		if (c == '\\') {
			if (n - i < 4 || src[i + 1] != 'x' || hexval(src[i + 2]) < 0 || hexval(src[i + 3]) < 0)
				return -1;
			c = (unsigned char)(hexval(src[i + 2]) << 4 | hexval(src[i + 3]));
			i += 3;
		}
		dst[o++] = (char)c;
	}
	dst[o] = 0;
	return 0;
}

/* a + b as a limit; past INT64_MAX unlimited (the kernel compares file
 * limits as signed). */
static uint64_t lim_add(uint64_t a, uint64_t b)
{
	return a > (uint64_t)INT64_MAX - b ? RLIM_INFINITY : a + b;
}

/* ---- the parent ----------------------------------------------------------- */

struct parser {
	const struct artifacts_limits *lim;
	struct artifacts_result *res;
	size_t capfiles, capskipped, capentries;
	long next_copy;
	uint64_t copied;                /* a manifest's copies' bytes */
	uint64_t bytes;
	bool ended, failed;
	char helper_err[256];   /* the helper's own "E" line */
};

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 16;
	void *p = realloc(*arr, c * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = c;
	return 0;
}

bool artifacts_valid_path(const char *p, unsigned max_path)
{
	size_t n = strlen(p);
	if (n == 0 || n > max_path || n >= ARTIFACT_PATH_MAX)
		return false;
	for (const char *c = p; *c;) {
		const char *end = strchr(c, '/');
		size_t len = end ? (size_t)(end - c) : strlen(c);
		if (len == 0 || len > 255 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		for (size_t i = 0; i < len; i++)
			if ((unsigned char)c[i] < 0x20 || c[i] == 0x7f)
				return false;
		c += len + (end ? 1 : 0);
		if (end && !*c)
			return false;
	}
	return true;
}

static int parse_file(struct parser *p, const char *s, size_t n)
{
	struct artifacts_result *r = p->res;
	uint64_t size = 0;
	size_t i = 0;
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
		if (size > (UINT64_MAX - 9) / 10)
			return -1;
		size = size * 10 + (uint64_t)(s[i] - '0');
	}
	if (i == 0 || i >= n || s[i] != ' ')
		return -1;
	if (r->nfiles >= p->lim->max_files || size > p->lim->max_bytes - p->bytes)
		return -1;
	if (grow((void **)&r->files, &p->capfiles, r->nfiles, sizeof(*r->files)) < 0)
		return -1;
	struct artifact *a = &r->files[r->nfiles];
	unsigned max_path = p->lim->max_path;
	if (artifacts_unescape(a->path, sizeof(a->path), s + i + 1, n - i - 1) < 0 || !artifacts_valid_path(a->path, max_path))
		return -1;
	a->size = size;
	p->bytes += size;
	r->nfiles++;
	return 0;
}

/* Skipped paths and reasons stay in their escaped, printable form. */
static int parse_skip(struct parser *p, const char *s, size_t n)
{
	struct artifacts_result *r = p->res;
	const char *tab = memchr(s, '\t', n);
	if (!tab || r->nskipped >= SKIP_CAP)
		return -1;
	size_t plen = (size_t)(tab - s), rlen = n - plen - 1;
	/* An empty path is the entry with an empty name in artifacts/. */
	if (plen >= ARTIFACT_PATH_MAX || rlen == 0 || rlen >= sizeof(r->skipped->reason))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (i != plen && (s[i] < 0x20 || s[i] > 0x7e))
			return -1;
	if (grow((void **)&r->skipped, &p->capskipped, r->nskipped, sizeof(*r->skipped)) < 0)
		return -1;
	struct artifact_skip *k = &r->skipped[r->nskipped++];
	memcpy(k->path, s, plen);
	k->path[plen] = 0;
	memcpy(k->reason, tab + 1, rlen);
	k->reason[rlen] = 0;
	return 0;
}

static int parse_entry(struct parser *p, char letter, const char *s, size_t n)
{
	struct artifacts_result *r = p->res;
	if (r->nentries >= p->lim->max_files + p->lim->max_files ||
	    grow((void **)&r->entries, &p->capentries, r->nentries, sizeof(*r->entries)) < 0)
		return -1;
	struct artifact_entry *e = &r->entries[r->nentries];
	if (artifacts_parse_entry(letter, s, n, p->lim, &p->next_copy, e) < 0 ||
	    (e->kind == 'f' && e->size > p->lim->max_bytes - p->bytes) ||
	    (e->copy >= 0 && e->size > p->lim->copy_total - p->copied)) {
		free(e->target);
		return -1;
	}
	if (e->kind == 'f')
		p->bytes += e->size;
	if (e->copy >= 0)
		p->copied += e->size;
	r->nentries++;
	return 0;
}

static int parse_line(struct parser *p, const char *s, size_t n)
{
	if (p->ended || p->failed)
		return -1;
	if (n == 3 && memcmp(s, "END", 3) == 0) {
		p->ended = true;
		return 0;
	}
	if (n < 2 || s[1] != ' ')
		return -1;
	if (p->lim->manifest && strchr("DRLO", s[0]))
		return parse_entry(p, s[0], s + 2, n - 2);
	switch (s[0]) {
	case 'F':
		if (p->lim->manifest)
			return -1;
		return parse_file(p, s + 2, n - 2);
	case 'S':
		return parse_skip(p, s + 2, n - 2);
	case 'E':
		for (size_t i = 2; i < n; i++)
			if (s[i] < 0x20 || s[i] > 0x7e)
				return -1;
		snprintf(p->helper_err, sizeof(p->helper_err), "%.*s", (int)(n - 2), s + 2);
		p->failed = true;
		return 0;
	}
	return -1;
}

/* The start of what the helper wrote on its stderr, to explain a failure. */
struct errtail {
	char buf[STDERR_KEEP];
	size_t len;
};

/* Read what the (non-blocking) stderr pipe holds, keeping the first
 * STDERR_KEEP bytes. 0 at EOF or on an error, 1 when more may come. */
static int drain_stderr(int fd, struct errtail *t)
{
	char chunk[4096];
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 1;
		if (n <= 0)
			return 0;
		size_t keep = sizeof(t->buf) - t->len < (size_t)n ? sizeof(t->buf) - t->len : (size_t)n;
		memcpy(t->buf + t->len, chunk, keep);
		t->len += keep;
	}
}

/* Append the helper's first stderr line that says something to err, made
 * printable (bytes outside 0x20..0x7e become '?'). Blank lines and ASan's
 * "=====" banner above its report are passed over. */
static void add_stderr_line(char *err, size_t errlen, const struct errtail *t)
{
	char line[160];
	size_t i = 0;
	while (i < t->len) {
		size_t o = 0;
		bool says = false;
		for (; i < t->len && t->buf[i] != '\n'; i++) {
			unsigned char c = (unsigned char)t->buf[i];
			says |= c != '=' && c != ' ' && c != '\r';
			if (o + 1 < sizeof(line))
				line[o++] = c >= 0x20 && c <= 0x7e ? (char)c : '?';
		}
		i++;   /* past the newline */
		line[o] = 0;
		if (says) {
			size_t n = strlen(err);
			if (n < errlen)
				snprintf(err + n, errlen - n, "; its stderr: %s", line);
			return;
		}
	}
}

/* Read and parse the report until EOF, draining stderr meanwhile. 0 at
 * EOF, 1 on timeout, -1 on a malformed report or read error (reason in
 * err). */
static int read_report(int fd, int errfd, int64_t deadline, struct parser *p, struct errtail *t, char *err,
		       size_t errlen)
{
	char buf[LINE_MAX_LEN];
	size_t len = 0;
	struct pollfd pfd[2] = { { fd, POLLIN, 0 }, { errfd, POLLIN, 0 } };
	for (;;) {
		int n = poll(pfd, 2, session_left_ms(deadline));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errf(err, errlen, "artifacts: poll: %s", strerror(errno));
		if (n == 0) {
			if (clock_mono_ms() >= deadline)
				return 1;
			continue;
		}
		if (pfd[1].revents && drain_stderr(errfd, t) == 0)
			pfd[1].fd = -1;   /* at EOF: poll passes over negative fds */
		if (!pfd[0].revents)
			continue;
		ssize_t got = read(fd, buf + len, sizeof(buf) - len);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got < 0)
			return errf(err, errlen, "artifacts: reading the helper's report: %s", strerror(errno));
		if (got == 0)
			break;
		len += (size_t)got;
		char *start = buf, *nl;
		while ((nl = memchr(start, '\n', len - (size_t)(start - buf)))) {
			if (parse_line(p, start, (size_t)(nl - start)) < 0)
				return errf(err, errlen, "artifacts: malformed report from the helper");
			start = nl + 1;
		}
		len -= (size_t)(start - buf);
		memmove(buf, start, len);
		if (len == sizeof(buf))
			return errf(err, errlen, "artifacts: malformed report from the helper (line too long)");
	}
	if (len)
		return errf(err, errlen, "artifacts: malformed report from the helper (unterminated line)");
	return 0;
}

/* Wait for the helper until the deadline, then kill it. 0 with its
 * status, or -1 when it had to be killed. */
static int reap(pid_t pid, int64_t deadline, int *status)
{
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR) {
			/* Reaped already (SIGCHLD ignored): the report decides. */
			*status = 0;
			return 0;
		}
		if (clock_mono_ms() >= deadline) {
			kill(pid, SIGKILL);
			while (waitpid(pid, status, 0) < 0 && errno == EINTR)
				;
			return -1;
		}
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
}


/* 1 when the directory holds nothing but "." and "..", 0 when it holds
 * more, -1 on an error. */
static int dir_empty(int dirfd)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	int rc = 1;
	struct dirent *e;
	errno = 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			rc = 0;
			break;
		}
	if (!e && errno)
		rc = -1;
	closedir(d);
	return rc;
}

/* The image must be read-only: the filter cannot tell the helper's fds
 * apart, so a writable one would let a hijacked helper write the image. */
static int check_args(int image_fd, int dest_fd, const struct artifacts_ids *ids,
		      const struct artifacts_limits *lim, struct stat *dest, char *err, size_t errlen)
{
	struct stat st;
	if (!ids || !lim)
		return errf(err, errlen, "artifacts: missing ids or limits");
	if (lim->timeout_ms <= 0)
		return errf(err, errlen, "artifacts: the timeout must be positive");
	int fl = image_fd < 0 ? -1 : fcntl(image_fd, F_GETFL);
	if (fl < 0 || fstat(image_fd, &st) < 0 || !S_ISREG(st.st_mode))
		return errf(err, errlen, "artifacts: the image is not an open regular file");
	if ((fl & O_ACCMODE) != O_RDONLY)
		return errf(err, errlen, "artifacts: the image must be opened read-only");
	if (dest_fd < 0 || fstat(dest_fd, dest) < 0 || !S_ISDIR(dest->st_mode))
		return errf(err, errlen, "artifacts: the destination is not an open directory");
	if (geteuid() == 0) {
		/* Root hands dest to the helper and, afterwards, to the owner:
		 * only a directory the owner already has, never one of root's
		 * (a swapped path must not give away /usr/local/bin). */
		if (dest->st_uid != ids->owner_uid)
			return errf(err, errlen, "artifacts: the destination belongs to uid %u, not to its owner %u",
				    (unsigned)dest->st_uid, (unsigned)ids->owner_uid);
		if (ids->helper_uid == 0 || ids->helper_gid == 0)
			return errf(err, errlen, "artifacts: the helper must not run as uid or gid 0");
	} else if (ids->helper_uid != geteuid() || ids->helper_gid != getegid()) {
		return errf(err, errlen, "artifacts: without root the helper runs as vmrun's own uid and gid (%u:%u)",
			    (unsigned)geteuid(), (unsigned)getegid());
	} else if (ids->owner_uid != ids->helper_uid || ids->owner_gid != ids->helper_gid) {
		return errf(err, errlen, "artifacts: without root the copy cannot be given to another owner");
	}
	return 0;
}

/* dest must be empty, checked once its owner can no longer add to it (as
 * root: after it went to the helper's uid). */
static int check_empty(int dest_fd, char *err, size_t errlen)
{
	int empty = dir_empty(dest_fd);
	if (empty < 0)
		return errf(err, errlen, "artifacts: reading the destination: %s", strerror(errno));
	if (!empty)
		return errf(err, errlen, "artifacts: the destination is not empty");
	return 0;
}

/* Turn how the helper ended into 0 or -1 with a reason. */
static int verdict(const struct parser *p, int how, int status, int timeout_ms, char *err, size_t errlen)
{
	if (p->failed)
		return errf(err, errlen, "artifacts: %s", p->helper_err);
	if (how > 0)
		return errf(err, errlen, "artifacts: the helper timed out after %d ms", timeout_ms);
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		return errf(err, errlen, "artifacts: the helper was killed by signal %d (%s)%s", sig, strsignal(sig),
			    sig == SIGSYS ? ": a system call its sandbox forbids" : "");
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !p->ended)
		return errf(err, errlen, "artifacts: the helper failed without a complete report");
	return 0;
}

/* Fork the helper, read its report and stderr, reap it. */
static int run_helper(int image_fd, int dest_fd, const struct artifacts_ids *ids,
		      const struct artifacts_limits *lim, struct artifacts_result *res, char *err, size_t errlen)
{
	struct parser p = { .lim = lim, .res = res };
	struct errtail tail;
	int rep[2] = { -1, -1 }, errp[2] = { -1, -1 }, devnull = -1, status = 0, rc = -1;
	tail.len = 0;
	if (pipe2(rep, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 || fcntl(errp[0], F_SETFL, O_NONBLOCK) < 0) {
		errf(err, errlen, "artifacts: pipe: %s", strerror(errno));
		goto out;
	}
	/* Opened here: there is no /dev in the helper's own root. */
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0) {
		errf(err, errlen, "artifacts: /dev/null: %s", strerror(errno));
		goto out;
	}
	unsigned depth = lim->max_depth < DEPTH_HARD_CAP ? lim->max_depth : DEPTH_HARD_CAP;
	struct artifacts_sandbox s = {
		.report = rep[1], .image = image_fd, .dest = dest_fd, .errpipe = errp[1], .devnull = devnull,
		.parent = getpid(), .switch_ids = geteuid() == 0, .uid = ids->helper_uid, .gid = ids->helper_gid,
		.max_file = lim_add(lim->max_bytes, 4096), .extra_fds = FD_SLACK + depth,
	};
	int64_t deadline = clock_mono_ms() + lim->timeout_ms;
	pid_t pid = fork();
	if (pid < 0) {
		errf(err, errlen, "artifacts: fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0)
		artifacts_walk_main(&s, lim);
	close(rep[1]);
	close(errp[1]);
	rep[1] = errp[1] = -1;
	int how = read_report(rep[0], errp[0], deadline, &p, &tail, err, errlen);
	if (how != 0)
		kill(pid, SIGKILL);   /* timed out, or not to be trusted further */
	if (reap(pid, deadline, &status) < 0 && how == 0)
		how = 1;
	drain_stderr(errp[0], &tail);   /* all of it now: the helper is gone */
	rc = how < 0 ? -1 : verdict(&p, how, status, lim->timeout_ms, err, errlen);
	if (rc < 0 && !p.failed)
		add_stderr_line(err, errlen, &tail);
out:
	for (int i = 0; i < 2; i++) {
		if (rep[i] >= 0)
			close(rep[i]);
		if (errp[i] >= 0)
			close(errp[i]);
	}
	if (devnull >= 0)
		close(devnull);
	return rc;
}

/* ---- the parent: the copy to its owner ------------------------------------ */

struct chown_walk {
	uid_t uid;
	gid_t gid;
	dev_t dev;            /* the destination's: no mount inside is entered */
	unsigned max_depth;
	uint64_t left;        /* entries still allowed */
	char *why;
	size_t whylen;
};

static int __attribute__((format(printf, 2, 3))) say(struct chown_walk *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why, c->whylen, fmt, ap);
	va_end(ap);
	return -1;
}

static int chown_below(struct chown_walk *c, DIR *d, unsigned depth);

/* One entry of a directory at depth-1 whose fd is dfd. A name is escaped
 * before it goes into a message: the helper chose it. */
static int chown_entry(struct chown_walk *c, int dfd, const char *name, unsigned char type, unsigned depth)
{
	char shown[64];
	bool cut;
	int fd = -1, rc = -1;
	artifacts_escape(shown, sizeof(shown), name, strlen(name), false, &cut);
	if (type == DT_DIR || type == DT_UNKNOWN) {
		fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno != ENOTDIR && errno != ELOOP)
			return say(c, "%s: %s", shown, strerror(errno));
	}
	if (fd < 0) {   /* not a directory */
		if (fchownat(dfd, name, c->uid, c->gid, AT_SYMLINK_NOFOLLOW) < 0)
			return say(c, "%s: %s", shown, strerror(errno));
		return 0;
	}
	struct stat st;
	DIR *sub = NULL;
	if (fstat(fd, &st) < 0 || !(sub = fdopendir(fd)))
		say(c, "%s: %s", shown, strerror(errno));
	else if (st.st_dev != c->dev)
		say(c, "%s: a mount point", shown);
	else if (depth > c->max_depth)
		say(c, "deeper than the depth cap (%u)", c->max_depth);
	else
		rc = chown_below(c, sub, depth);
	if (sub)
		closedir(sub);
	else
		close(fd);
	return rc;
}

/* Give everything below the directory d (at depth, artifacts/ being 0) to
 * the owner, children before their directory, then d itself. Only fds,
 * never a path, never through a symlink. Nothing can race it: the helper
 * is dead, and the invoking user owns no directory inside until the walk
 * is done with it. */
static int chown_below(struct chown_walk *c, DIR *d, unsigned depth)
{
	struct dirent *e;
	for (;;) {
		errno = 0;
		if (!(e = readdir(d)))
			break;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (c->left == 0)
			return say(c, "more entries than the helper may copy");
		c->left--;
		if (chown_entry(c, dirfd(d), e->d_name, e->d_type, depth + 1) < 0)
			return -1;
	}
	if (errno)
		return say(c, "reading a directory: %s", strerror(errno));
	if (fchown(dirfd(d), c->uid, c->gid) < 0)
		return say(c, "%s", strerror(errno));
	return 0;
}

/* The whole copy, dest last, to owner_uid:owner_gid, bounded by the
 * helper's own caps: a hijacked helper may have made any tree. */
static int give_to_owner(int dest_fd, const struct artifacts_ids *ids, const struct artifacts_limits *lim,
			 char *why, size_t whylen)
{
	struct stat st;
	unsigned depth = lim->max_depth < DEPTH_HARD_CAP ? lim->max_depth : DEPTH_HARD_CAP;
	uint64_t cap = lim->max_files > (UINT64_MAX - CHOWN_SLACK) / 2 ? UINT64_MAX : 2 * lim->max_files + CHOWN_SLACK;
	struct chown_walk c = { ids->owner_uid, ids->owner_gid, 0, depth, cap, why, whylen };
	int fd = openat(dest_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 && fstat(fd, &st) == 0 ? fdopendir(fd) : NULL;
	if (!d) {
		snprintf(why, whylen, "the destination: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	c.dev = st.st_dev;
	int rc = chown_below(&c, d, 0);
	closedir(d);
	return rc;
}

static int walk_image(int image_fd, int dest_fd, const struct artifacts_ids *ids,
		      const struct artifacts_limits *lim, struct artifacts_result *res, char *err, size_t errlen)
{
	struct stat dest;
	char why[256];
	memset(res, 0, sizeof(*res));
	if (check_args(image_fd, dest_fd, ids, lim, &dest, err, errlen) < 0)
		return -1;
	bool root = geteuid() == 0;
	/* The helper writes into dest as itself. */
	if (root && dest.st_uid != ids->helper_uid && fchown(dest_fd, ids->helper_uid, ids->helper_gid) < 0)
		return errf(err, errlen, "artifacts: giving the destination to uid %u: %s", (unsigned)ids->helper_uid,
			    strerror(errno));
	int rc = check_empty(dest_fd, err, errlen);
	if (rc == 0)
		rc = run_helper(image_fd, dest_fd, ids, lim, res, err, errlen);
	/* Whether or not the helper succeeded: what it left must not stay
	 * with a uid that a later run may draw. */
	if (root && (ids->owner_uid != ids->helper_uid || ids->owner_gid != ids->helper_gid) &&
	    give_to_owner(dest_fd, ids, lim, why, sizeof(why)) < 0) {
		size_t n = rc < 0 ? strlen(err) : 0;
		if (n < errlen)
			snprintf(err + n, errlen - n, "%sgiving the copy to uid %u: %s", rc < 0 ? "; " : "artifacts: ",
				 (unsigned)ids->owner_uid, why);
		rc = -1;
	}
	if (rc < 0)
		artifacts_result_free(res);
	return rc;
}

int artifacts_extract(int image_fd, int dest_fd, const struct artifacts_ids *ids,
		      const struct artifacts_limits *lim, struct artifacts_result *res, char *err, size_t errlen)
{
	if (lim && lim->manifest)
		return errf(err, errlen, "artifacts: a manifest's limits for a copy");
	return walk_image(image_fd, dest_fd, ids, lim, res, err, errlen);
}

int artifacts_manifest(int image_fd, int dest_fd, const struct artifacts_ids *ids,
		       const struct artifacts_limits *lim, struct artifacts_result *res, char *err, size_t errlen)
{
	if (lim && !lim->manifest)
		return errf(err, errlen, "artifacts: a copy's limits for a manifest");
	return walk_image(image_fd, dest_fd, ids, lim, res, err, errlen);
}

void artifacts_result_free(struct artifacts_result *res)
{
	if (!res)
		return;
	for (size_t i = 0; i < res->nentries; i++)
		free(res->entries[i].target);
	free(res->entries);
	free(res->files);
	free(res->skipped);
	memset(res, 0, sizeof(*res));
}
