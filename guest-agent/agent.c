#include "agent.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto.h"
#include "stage.h"

/* The room agent_environment gets: every grant (at most a payload), HOME,
 * the other defaults. */
#define ENV_STORE (PROTO_MAX_PAYLOAD + PATH_MAX + 128)
#define ENV_MAX   (PROTO_MAX_ENV + 5)

/* One session's state: large (the reader, the request, the environment),
 * so allocated per session. */
struct session {
	int fd;
	const struct agent_config *cfg;
	struct proto_reader rd;
	struct proto_request req;
	char *env[ENV_MAX];
	char env_store[ENV_STORE];
	char *err;
	size_t errlen;
};

static int fail(struct session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct session *s, const char *fmt, ...)
{
	char msg[512];   /* the arguments may point into s->err */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(s->err, s->errlen, "%s", msg);
	/* Tell the host why, if the socket still works. */
	(void)proto_send(s->fd, PROTO_ERROR, s->err, (uint32_t)strnlen(s->err, PROTO_MAX_STR));
	return -1;
}

/* Block until one frame arrives. Returns 1 with the frame, 0 at EOF, -1 on a
 * read error or a malformed stream (reason in s->err). */
static int read_frame(struct session *s, uint16_t *type, const uint8_t **p, uint32_t *len)
{
	for (;;) {
		int r = proto_reader_next(&s->rd, type, p, len, s->err, s->errlen);
		if (r)
			return r;
		size_t room;
		uint8_t *dst = proto_reader_space(&s->rd, &room);
		ssize_t k = read(s->fd, dst, room);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			snprintf(s->err, s->errlen, "reading from the host: %s", strerror(errno));
			return -1;
		}
		if (k == 0)
			return 0;
		proto_reader_fed(&s->rd, (size_t)k);
	}
}

/* ---- program checks ------------------------------------------------------ */

int agent_resolve(const char *prog, const char *cwd, const char *path, char *out, size_t outlen)
{
	char cand[PATH_MAX];
	struct stat st;
	int n;
	if (!*prog)
		return -1;
	if (strchr(prog, '/')) {
		n = prog[0] == '/' ? snprintf(cand, sizeof(cand), "%s", prog)
				   : snprintf(cand, sizeof(cand), "%s/%s", cwd, prog);
		if (n < 0 || (size_t)n >= sizeof(cand) || lstat(cand, &st) < 0)
			return -1;
	} else {
		const char *p = path;
		for (;;) {
			size_t dl = strcspn(p, ":");
			n = snprintf(cand, sizeof(cand), "%.*s/%s", (int)dl, p, prog);
			if (dl && n > 0 && (size_t)n < sizeof(cand) && lstat(cand, &st) == 0)
				break;
			if (!p[dl])
				return -1;
			p += dl + 1;
		}
	}
	/* Canonicalise the directory only: "/usr/bin/../../workspace/x" and
	 * symlinked directories resolve, the final name stays as given. */
	char *slash = strrchr(cand, '/');
	*slash = '\0';
	char dir[PATH_MAX];
	if (!realpath(cand[0] ? cand : "/", dir))
		return -1;
	n = snprintf(out, outlen, "%s/%s", strcmp(dir, "/") ? dir : "", slash + 1);
	return (n < 0 || (size_t)n >= outlen) ? -1 : 0;
}

bool agent_allowed(const char *resolved, char *const *allow, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(resolved, allow[i]) == 0)
			return true;
	return false;
}

int agent_environment(const char *home, char *const *grants, unsigned ngrants, char **env, unsigned max,
		      char *store, size_t storelen)
{
	unsigned n = 0;
	size_t used = 0;
	const char *defaults[4] = { "PATH=" PROTO_PATH, NULL, "LANG=C.UTF-8", "PYTHONIOENCODING=utf-8" };
	char homevar[PATH_MAX + 8];
	snprintf(homevar, sizeof(homevar), "HOME=%s", home);
	defaults[1] = homevar;
	for (unsigned i = 0; i < 4 + ngrants; i++) {
		const char *v = i < 4 ? defaults[i] : grants[i - 4];
		size_t name = strcspn(v, "=");
		unsigned slot = n;
		for (unsigned j = 0; j < n; j++)
			if (strncmp(env[j], v, name + 1) == 0)
				slot = j;   /* a grant replaces a default of the same name */
		size_t len = strlen(v) + 1;
		if ((slot == n && n + 1 >= max) || len > storelen - used)
			return -1;
		env[slot] = memcpy(store + used, v, len);
		used += len;
		if (slot == n)
			n++;
	}
	env[n] = NULL;
	return (int)n;
}

/* ---- the session ----------------------------------------------------------- */

static int send_exit(struct session *s, const struct proto_exit *ex)
{
	uint8_t buf[PROTO_EXIT_LEN];
	proto_encode_exit(ex, buf);
	if (proto_send(s->fd, PROTO_EXIT, buf, sizeof(buf)) < 0) {
		snprintf(s->err, s->errlen, "sending EXIT: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Resolve and check stage i's program into path. Returns 0 when it may
 * run, else the EXIT kind that refuses it. */
static uint32_t check_program(struct session *s, unsigned i, char *path, size_t len)
{
	if (agent_resolve(s->req.stage[i].argv[0], s->cfg->cwd, PROTO_PATH, path, len))
		return PROTO_END_NOT_FOUND;
	struct stat st;
	if (!agent_allowed(path, s->req.allow, s->req.nallow) || stat(path, &st) < 0 || !S_ISREG(st.st_mode) ||
	    !(st.st_mode & 0111))
		return PROTO_END_DENIED;
	return 0;
}

/* Everything after HELLO: the REQUEST, then its stages in order. */
static int serve(struct session *s)
{
	uint16_t type;
	const uint8_t *p;
	uint32_t len;
	int r = read_frame(s, &type, &p, &len);
	if (r == 0)
		return fail(s, "the host closed the connection before the request");
	if (r < 0)
		return fail(s, "%s", s->err);
	if (type != PROTO_REQUEST)
		return fail(s, "expected a REQUEST frame, got type %u", type);
	if (proto_decode_request(p, len, &s->req, s->err, s->errlen))
		return fail(s, "malformed request: %s", s->err);
	/* A limit the agent cannot enforce ends the run before anything of it
	 * runs (not after a compile stage). */
	for (unsigned i = 0; i < s->req.nstages; i++)
		if (s->req.stage[i].memory_kib && !s->cfg->cgroup_root)
			return fail(s, "stage %u has a memory limit, but the agent has no cgroups (%s)", i,
				    s->cfg->cgroup_error ? s->cfg->cgroup_error : "none configured");
	if (agent_environment(s->cfg->home, s->req.env, s->req.envc, s->env, ENV_MAX, s->env_store,
			      sizeof(s->env_store)) < 0)
		return fail(s, "environment does not fit");
	const struct stage_ctx c = {
		.fd = s->fd, .rd = &s->rd, .req = &s->req, .cfg = s->cfg, .env = s->env, .err = s->err,
		.errlen = s->errlen,
	};
	for (unsigned i = 0; i < s->req.nstages; i++) {
		char path[PATH_MAX];
		struct proto_exit ex = { .stage = i };
		/* A program refused ends the session: its EXIT does not continue. */
		if (!(ex.kind = check_program(s, i, path, sizeof(path))) && stage_run(&c, i, path, &ex) < 0)
			return fail(s, "%s", s->err);
		if (send_exit(s, &ex) < 0)
			return -1;
		if (!proto_stage_continues(&s->req, &ex))
			break;
	}
	return 0;
}

int agent_session(int fd, const struct agent_config *cfg, char *err, size_t errlen)
{
	struct session *s = malloc(sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory for the session");
		(void)proto_send(fd, PROTO_ERROR, err, (uint32_t)strlen(err));
		return -1;
	}
	s->fd = fd;
	s->cfg = cfg;
	s->err = err;
	s->errlen = errlen;
	proto_reader_init(&s->rd);
	uint8_t hello[64];
	size_t hn = proto_encode_hello(hello, sizeof(hello), AGENT_NAME);
	int rc;
	if (proto_send(fd, PROTO_HELLO, hello, (uint32_t)hn) < 0) {
		snprintf(err, errlen, "sending HELLO: %s", strerror(errno));
		rc = -1;
	} else {
		rc = serve(s);
	}
	free(s);
	return rc;
}
