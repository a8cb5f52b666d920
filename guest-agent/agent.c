#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/random.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "forward.h"
#include "proto.h"
#include "sandbox.h"
#include "stage.h"

/* The room agent_environment gets: every grant (at most a payload), HOME,
 * the other defaults, the proxy variables. */
#define ENV_STORE (PROTO_MAX_PAYLOAD + PATH_MAX + 128 + 1024)
#define ENV_MAX   (PROTO_MAX_ENV + 5 + AGENT_NET_ENV + 1)

/* In linux/random.h since Linux 4.17; UAPI headers older than that lack
 * only the name, the ioctl is the kernel's. */
#ifndef RNDRESEEDCRNG
#define RNDRESEEDCRNG _IO('R', 0x07)
#endif

/* One session's state: large (the reader, the request, the environment),
 * so allocated per session. */
struct session {
	int fd;
	const struct agent_config *cfg;
	struct proto_reader rd;
	struct proto_request req;
	int listen_fd;        /* the forwarder's socket when the run has NET, else -1 */
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
		ssize_t k = proto_reader_fill(&s->rd, s->fd);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			snprintf(s->err, s->errlen, "reading from the host: %s", strerror(errno));
			return -1;
		}
		if (k == 0)
			return 0;
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

#define STR_(x) #x
#define STR(x) STR_(x)
/* The forwarder, as the command's proxy variables name it. */
#define PROXY_URL "http://" PROTO_NET_PROXY_ADDR ":" STR(PROTO_NET_PROXY_PORT)

static const char *const net_env[AGENT_NET_ENV] = {
	"HTTP_PROXY=" PROXY_URL, "HTTPS_PROXY=" PROXY_URL, "http_proxy=" PROXY_URL, "https_proxy=" PROXY_URL,
	"ALL_PROXY=" PROXY_URL, "all_proxy=" PROXY_URL,
	"NO_PROXY=localhost," PROTO_NET_PROXY_ADDR, "no_proxy=localhost," PROTO_NET_PROXY_ADDR,
	"PIP_PROXY=" PROXY_URL, "npm_config_proxy=" PROXY_URL, "npm_config_https_proxy=" PROXY_URL,
	/* git reads config from the environment only with a count */
	"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.proxy", "GIT_CONFIG_VALUE_0=" PROXY_URL,
};

/* An environment being built: env's pointers (room for max, the NULL
 * included), their strings in store. */
struct env_build {
	char **env;
	unsigned n, max;
	char *store;
	size_t used, storelen;
};

/* Put "NAME=VALUE" v in place of the variable of the same name, else
 * after the others. Returns 0, or -1 when it does not fit. */
static int env_put(struct env_build *b, const char *v)
{
	size_t name = strcspn(v, "=");
	unsigned slot = b->n;
	for (unsigned j = 0; j < b->n; j++)
		if (strncmp(b->env[j], v, name + 1) == 0)
			slot = j;
	size_t len = strlen(v) + 1;
	if ((slot == b->n && b->n + 1 >= b->max) || len > b->storelen - b->used)
		return -1;
	b->env[slot] = memcpy(b->store + b->used, v, len);
	b->used += len;
	if (slot == b->n)
		b->n++;
	return 0;
}

int agent_environment(const char *home, char *const *grants, unsigned ngrants, bool network, const char *run_id,
		      char **env, unsigned max, char *store, size_t storelen)
{
	struct env_build b = { .env = env, .max = max, .store = store, .storelen = storelen };
	char homevar[PATH_MAX + 8];
	snprintf(homevar, sizeof(homevar), "HOME=%s", home);
	const char *const defaults[4] = { "PATH=" PROTO_PATH, homevar, "LANG=C.UTF-8", "PYTHONIOENCODING=utf-8" };
	for (unsigned i = 0; i < 4; i++)
		if (env_put(&b, defaults[i]) < 0)
			return -1;
	/* A grant replaces a default; the proxy variables, set last, a grant. */
	for (unsigned i = 0; i < ngrants; i++)
		if (env_put(&b, grants[i]) < 0)
			return -1;
	for (unsigned i = 0; network && i < AGENT_NET_ENV; i++)
		if (env_put(&b, net_env[i]) < 0)
			return -1;
	char idvar[sizeof(AGENT_RUN_ID_VAR "=") + PROTO_RUN_ID_MAX];
	if (run_id && (snprintf(idvar, sizeof(idvar), AGENT_RUN_ID_VAR "=%s", run_id) >= (int)sizeof(idvar) ||
		       env_put(&b, idvar) < 0))
		return -1;
	env[b.n] = NULL;
	return (int)b.n;
}

/* ---- a unique guest -------------------------------------------------------- */

/* Why: vmrun boots a guest once, snapshots it, and restores that snapshot
 * for every run, so every restored guest starts with the same kernel RNG
 * state (two runs would draw the same "random" numbers: TLS keys, UUIDs,
 * Python's hash seed) and with the clock stopped at the snapshot. The
 * host's fresh seed and its time, sent in each REQUEST, set both apart
 * before anything of the run starts. */
int agent_unique(const char *random_dev, const struct proto_request *r, char *err, size_t errlen)
{
	return agent_reseed(random_dev, r->seed, r->time_ns, err, errlen);
}

int agent_reseed(const char *random_dev, const uint8_t *seed, uint64_t time_ns, char *err, size_t errlen)
{
	if (!seed)
		goto clock;
	int fd = open(random_dev, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return proto_errf(err, errlen, "opening %s: %s", random_dev, strerror(errno));
	/* rand_pool_info ends in the bytes it adds: room for them after it */
	union {
		struct rand_pool_info info;
		uint8_t raw[sizeof(struct rand_pool_info) + PROTO_SEED_LEN];
	} pool;
	pool.info.entropy_count = (int)(PROTO_SEED_LEN * 8);   /* bits: the host's getrandom is all entropy */
	pool.info.buf_size = (int)PROTO_SEED_LEN;
	memcpy(pool.raw + offsetof(struct rand_pool_info, buf), seed, PROTO_SEED_LEN);
	const char *what = NULL;
	if (ioctl(fd, RNDADDENTROPY, &pool) < 0)
		what = "RNDADDENTROPY";
	else if (ioctl(fd, RNDRESEEDCRNG) < 0)
		what = "RNDRESEEDCRNG";
	int saved = errno;
	close(fd);
	if (what)
		return proto_errf(err, errlen, "reseeding the RNG: %s on %s: %s", what, random_dev, strerror(saved));
clock:
	if (!time_ns)
		return 0;
	struct timespec t = { .tv_sec = (time_t)(time_ns / 1000000000u), .tv_nsec = (long)(time_ns % 1000000000u) };
	if (clock_settime(CLOCK_REALTIME, &t) < 0)
		return proto_errf(err, errlen, "setting the clock: %s", strerror(errno));
	return 0;
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

uint32_t agent_check_program(const char *prog, const char *cwd, char *const *allow, unsigned nallow, char *path,
			     size_t len)
{
	if (agent_resolve(prog, cwd, PROTO_PATH, path, len))
		return PROTO_END_NOT_FOUND;
	struct stat st;
	if (!agent_allowed(path, allow, nallow) || stat(path, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & 0111))
		return PROTO_END_DENIED;
	return 0;
}

/* Stage i, with a forwarder of its own when the run has the network: a
 * PID 1 agent kills every other process after each stage, the forwarder
 * included, so one per stage also means that no connection of a stage
 * outlives it. Connections made between stages wait in the listener's
 * backlog. */
static int run_stage(struct session *s, const struct stage_ctx *c, unsigned i, const char *path,
		     struct proto_exit *ex)
{
	pid_t fwd = -1;
	if (s->listen_fd >= 0 && (fwd = forward_spawn(s->listen_fd, s->req.net_port, s->err, s->errlen)) < 0)
		return -1;
	int r = stage_run(c, i, path, ex);
	if (fwd > 0)
		forward_stop(fwd);
	return r;
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
	/* First: nothing of the run may see the snapshot's RNG or clock. */
	if (s->cfg->random_dev && agent_unique(s->cfg->random_dev, &s->req, s->err, s->errlen))
		return fail(s, "%s", s->err);
	/* A limit the agent cannot enforce ends the run before anything of it
	 * runs (not after a compile stage). */
	for (unsigned i = 0; i < s->req.nstages; i++)
		if (s->req.stage[i].memory_kib && !s->cfg->cgroup_root)
			return fail(s, "stage %u has a memory limit, but the agent has no cgroups (%s)", i,
				    s->cfg->cgroup_error ? s->cfg->cgroup_error : "none configured");
	if (agent_environment(s->cfg->home, s->req.env, s->req.envc, s->req.net_port != 0, s->req.run_id, s->env,
			      ENV_MAX, s->env_store, sizeof(s->env_store)) < 0)
		return fail(s, "environment does not fit");
	/* Before any stage. A run without NET keeps loopback down; a sandbox
	 * has it up always, since its commands serve each other on it (a
	 * dev server and its tests): the guest's own, it reaches nothing else. */
	if ((s->req.net_port || s->req.sandbox) && forward_loopback_up(s->err, s->errlen) < 0)
		return fail(s, "network: %s", s->err);
	if (s->req.net_port && (s->listen_fd = forward_listen(PROTO_NET_PROXY_PORT, s->err, s->errlen)) < 0)
		return fail(s, "network: %s", s->err);
	if (s->req.sandbox)
		return sandbox_serve(s->fd, &s->rd, &s->req, s->cfg, s->listen_fd, s->err, s->errlen) ? fail(s, "%s", s->err)
										       : 0;
	const struct stage_ctx c = {
		.fd = s->fd, .rd = &s->rd, .req = &s->req, .cfg = s->cfg, .env = s->env, .err = s->err,
		.errlen = s->errlen,
	};
	for (unsigned i = 0; i < s->req.nstages; i++) {
		char path[PATH_MAX];
		struct proto_exit ex = { .stage = i };
		/* A program refused ends the session: its EXIT does not continue. */
		if (!(ex.kind = agent_check_program(s->req.stage[i].argv[0], s->cfg->cwd, s->req.allow, s->req.nallow, path,
						    sizeof(path))) &&
		    run_stage(s, &c, i, path, &ex) < 0)
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
	s->listen_fd = -1;
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
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	free(s);
	return rc;
}
