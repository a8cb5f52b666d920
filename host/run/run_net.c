/* A run's network proxy, from the run's side (run_net.h). */
#include "run_net.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "errmsg.h"
#include "proto.h"

#define RUN_NET_AUDIT_WAIT_MS 3000   /* for the audit, once told to stop */
#define RUN_NET_EXIT_WAIT_MS  2000   /* for the proxy to exit after it */

/* One rule into c, within the ceiling. */
static int plan_rule(const struct policy *p, struct proxy_config *c, const struct net_rule *r, const char *what,
		     const char *text, char *err, size_t errlen)
{
	if (!policy_net_admits(p, r))
		return errf(err, errlen, "%s %.200s: beyond the policy's network ceiling", what, text);
	if (c->nrules >= PROXY_RULES_MAX)
		return errf(err, errlen, "%s: more than %u network rules in all", what, PROXY_RULES_MAX);
	c->rules[c->nrules++] = *r;
	return 0;
}

int run_net_plan(const struct policy *p, const struct run_request *req, struct proxy_config *c, char *err,
		 size_t errlen)
{
	char text[NET_HOST_MAX + 64];
	for (unsigned i = 0; i < p->net.nallow; i++) {
		net_rule_format(&p->net.allow[i], text, sizeof(text));
		if (plan_rule(p, c, &p->net.allow[i], "policy allow_net", text, err, errlen) < 0)
			return -1;
	}
	/* the spec's, parsed once where the run was asked for */
	for (unsigned i = 0; i < req->spec->nnet; i++) {
		const struct net_rule *r = &req->spec->net[i];
		net_rule_format(r, text, sizeof(text));
		if (plan_rule(p, c, r, r->kind == NET_RULE_ADDR ? "--allow-net-addr" : "--allow-net", text, err,
			      errlen) < 0)
			return -1;
	}
	c->caps.tunnels = (unsigned)p->net.tunnels;
	c->caps.max_up = p->net.max_up;
	c->caps.max_down = p->net.max_down;
	c->caps.idle_ms = (int64_t)p->net.idle_s * 1000;
	snprintf(c->dns, sizeof(c->dns), "%s", p->net.resolver);
	return c->nrules > 0;
}

/* The guest's way out: vmm connects here for each guest connection to
 * the proxy's vsock port, as the jail's uid. */
static int listen_proxy(struct run_net *n, const char *uds, const struct jail *vj, char *err, size_t errlen)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int len = snprintf(n->sock, sizeof(n->sock), PROTO_VSOCK_UDS_PORT_FMT, uds, PROTO_NET_VSOCK_PORT);
	if (len < 0 || (size_t)len >= sizeof(a.sun_path)) {
		n->sock[0] = '\0';
		return errf(err, errlen, "network: socket path %.200s is too long", uds);
	}
	memcpy(a.sun_path, n->sock, (size_t)len + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0 ||
	    chown(n->sock, vj->uid, vj->gid) < 0 || chmod(n->sock, 0600) < 0) {
		errf(err, errlen, "network: proxy socket %s: %s", n->sock, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int send_line(void *ctx, const char *line)
{
	return send(*(int *)ctx, line, strlen(line), MSG_NOSIGNAL) == (ssize_t)strlen(line) ? 0 : -1;
}

/* The proxy's stderr: a pipe, read when it is done (proxy_said). Both
 * ends non-blocking: the proxy never waits on a full pipe (a line past
 * 64 KiB of them is lost; it writes one when it fails), and we never
 * wait on a proxy that still holds its end. Returns the write end for
 * the child, or -1. */
static int err_pipe(struct run_net *n)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	n->err_fd = p[0];
	n->err_open = true;
	return p[1];
}

/* In the child, between fork and exec: only async-signal-safe calls.
 * fds[] become 3 (listen), 4 (control) and 2 (stderr); fds are first
 * moved above any target so that no dup2 overwrites another; ca_fd
 * (when not -1) becomes PROXY_FD_CA. */
static void exec_proxy(const char *path, char *root, int listen_fd, int control, int errfd, int ca_fd, pid_t parent)
{
	int hi[4] = { fcntl(listen_fd, F_DUPFD, 10), fcntl(control, F_DUPFD, 10), fcntl(errfd, F_DUPFD, 10),
		      ca_fd >= 0 ? fcntl(ca_fd, F_DUPFD, 10) : -1 };
	int null = open("/dev/null", O_RDWR);
	if (hi[0] < 0 || hi[1] < 0 || hi[2] < 0 || null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
	    dup2(hi[2], 2) < 0 || dup2(hi[0], PROXY_FD_LISTEN) < 0 || dup2(hi[1], PROXY_FD_CONTROL) < 0 ||
	    (ca_fd >= 0 && dup2(hi[3], PROXY_FD_CA) < 0))
		_exit(127);
	close_range(ca_fd >= 0 ? PROXY_FD_CA + 1 : PROXY_FD_CONTROL + 1, ~0u, 0);
	/* it must not outlive the run */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(127);
	char *argv[] = { (char *)path, root, NULL };
	char *envp[] = { NULL };
	execve(path, argv, envp);
	_exit(127);
}

int run_net_start(struct run_net *n, const struct proxy_config *cfg, int ca_fd, const char *vmm, const char *run_dir,
		  const char *uds, const struct jail_spec *js, const struct jail *vmm_jail, char *err, size_t errlen)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	snprintf(dir, sizeof(dir), "%s", vmm);
	snprintf(path, sizeof(path), "%s/" PROXY_PROGRAM, dirname(dir));
	if (access(path, X_OK) < 0)
		return errf(err, errlen, "network: %s: %s", path, strerror(errno));
	struct proxy_config *c = malloc(sizeof(*c));
	int listen_fd = -1, errfd = -1, sv[2] = { -1, -1 }, rc = -1;
	if (!c)
		return errf(err, errlen, "network: out of memory");
	*c = *cfg;
	if (geteuid() == 0) {
		if (jail_reserve_uid(js, &n->helper, err, errlen) < 0)
			goto out;
		c->set_ids = true;
		c->uid = n->helper.uid;
		c->gid = (gid_t)n->helper.uid;
	}
	snprintf(n->root, sizeof(n->root), "%s/proxy-root", run_dir);
	if (mkdir(n->root, 0555) < 0) {
		errf(err, errlen, "network: %s: %s", n->root, strerror(errno));
		n->root[0] = '\0';
		goto out;
	}
	if ((errfd = err_pipe(n)) < 0) {
		errf(err, errlen, "network: the proxy's stderr: %s", strerror(errno));
		goto out;
	}
	if ((listen_fd = listen_proxy(n, uds, vmm_jail, err, errlen)) < 0)
		goto out;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 || proxy_config_emit(c, send_line, &sv[0]) < 0) {
		errf(err, errlen, "network: the proxy's control socket: %s", strerror(errno));
		goto out;
	}
	pid_t parent = getpid();
	n->pid = fork();
	if (n->pid < 0) {
		n->pid = 0;
		errf(err, errlen, "network: fork: %s", strerror(errno));
		goto out;
	}
	if (n->pid == 0)
		exec_proxy(path, n->root, listen_fd, sv[1], errfd, ca_fd, parent);
	n->control = sv[0];
	sv[0] = -1;
	rc = 0;
out:
	explicit_bzero(c, sizeof(*c));   /* secret header values */
	free(c);
	int fds[] = { listen_fd, errfd, sv[0], sv[1] };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return rc;
}

/* The proxy's records until its end record, EOF or the deadline. */
static void read_audit(struct run_net *n, struct run_result *r)
{
	int64_t deadline = clock_mono_ms() + RUN_NET_AUDIT_WAIT_MS;
	for (;;) {
		int64_t left = deadline - clock_mono_ms();
		struct pollfd p = { n->control, POLLIN, 0 };
		if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
			result_add_message(r, "network proxy: no audit within %d ms", RUN_NET_AUDIT_WAIT_MS);
			return;
		}
		union {
			struct proxy_audit a;
			struct proxy_audit_end e;
		} u;
		ssize_t k = recv(n->control, &u, sizeof(u), MSG_DONTWAIT);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (k <= 0)
			return;   /* it died: its exit says why */
		if (k == (ssize_t)sizeof(u.e) && u.e.magic == PROXY_AUDIT_END_MAGIC) {
			r->network.unrecorded += u.e.dropped;
			return;
		}
		if (k != (ssize_t)sizeof(u.a) || !proxy_audit_valid(&u.a)) {
			result_add_message(r, "network proxy: a malformed audit record");
			return;
		}
		if (r->network.n >= PROXY_AUDIT_MAX) {
			r->network.unrecorded++;
			continue;
		}
		if (!r->network.entry && !(r->network.entry = calloc(PROXY_AUDIT_MAX, sizeof(u.a)))) {
			r->network.unrecorded++;
			continue;
		}
		r->network.entry[r->network.n++] = u.a;
	}
}

/* The last line the proxy wrote to its stderr (what the pipe holds),
 * printable, into buf; a line is kept to its first 599 bytes. */
static void proxy_said(int fd, char *buf, size_t cap)
{
	buf[0] = '\0';
	char chunk[4096], line[600];
	size_t len = 0;
	ssize_t k;
	while ((k = read(fd, chunk, sizeof(chunk))) > 0 || (k < 0 && errno == EINTR)) {
		for (ssize_t i = 0; i < k; i++) {
			if (chunk[i] != '\n') {
				if (len + 1 < sizeof(line))
					line[len++] = chunk[i];
				continue;
			}
			if (len) {
				line[len] = '\0';
				errmsg_printable(buf, cap, line);
			}
			len = 0;
		}
	}
	if (len) {   /* a last line without its newline */
		line[len] = '\0';
		errmsg_printable(buf, cap, line);
	}
}

static void reap(struct run_net *n, struct run_result *r)
{
	int st = 0;
	int64_t deadline = clock_mono_ms() + RUN_NET_EXIT_WAIT_MS;
	pid_t w;
	while ((w = waitpid(n->pid, &st, WNOHANG)) == 0 && clock_mono_ms() < deadline)
		usleep(2000);
	if (w == 0) {
		kill(n->pid, SIGKILL);
		waitpid(n->pid, &st, 0);
		result_add_message(r, "network proxy: did not exit, killed");
	}
	n->pid = 0;
	if (w < 0 || (WIFEXITED(st) && WEXITSTATUS(st) == 0))
		return;
	char said[300] = "";
	if (n->err_open)
		proxy_said(n->err_fd, said, sizeof(said));
	if (WIFSIGNALED(st))
		result_add_message(r, "network proxy died of SIG%s", sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?");
	else
		result_add_message(r, "%s", said[0] ? said : "network proxy failed");
}

void run_net_finish(struct run_net *n, struct run_result *r)
{
	r->network.on = true;
	if (n->pid <= 0)
		return;
	shutdown(n->control, SHUT_WR);
	read_audit(n, r);
	reap(n, r);
}

void run_net_release(struct run_net *n)
{
	if (n->pid > 0) {
		kill(n->pid, SIGKILL);
		waitpid(n->pid, NULL, 0);
		n->pid = 0;
	}
	if (n->control >= 0)
		close(n->control);
	n->control = -1;
	if (n->sock[0])
		unlink(n->sock);
	if (n->err_open)
		close(n->err_fd);
	n->err_open = false;
	if (n->root[0])
		rmdir(n->root);
	n->sock[0] = n->root[0] = '\0';
	jail_release_uid(&n->helper);
}
