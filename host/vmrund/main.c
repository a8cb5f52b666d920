/* vmrund: the run service. Parse, load, recover, serve, drain, tear down:
 * the work is the daemon's (host/vmrund/daemon.h) and the HTTP side's
 * (host/vmrund/http.h); every message of ours goes through vmrund_say
 * (host/vmrund/say.h). */
#include <curl/curl.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "daemon.h"
#include "http.h"
#include "sandbox_http.h"

static const char usage[] =
	"usage: vmrund [--local] [--config FILE]\n"
	"\n"
	"Serve vmrun's API: runs queued per tenant, each in a fresh microVM, and sandboxes.\n"
	"  --local         for this user alone: a Unix socket in $XDG_RUNTIME_DIR/vmrun (or\n"
	"                  /run/vmrun/local for root), no keys, the state beside it\n"
	"  --config FILE   key = value settings (default " VMRUND_CONFIG_PATH ", if present;\n"
	"                  with --local, none unless named)\n"
	"  --help, --version\n"
	"Endpoints: /v1/runs, /v1/sandboxes, /v1/runtimes, /api/v2/execute, /api/v2/runtimes\n"
	"(Piston), /healthz, /readyz, /metrics. See docs/vmrund.md and openapi.yaml.\n";

/* The options: 0 to go on, 1 when done (help), -1 on a bad one. */
static int parse(int argc, char **argv, const char **config, bool *local)
{
	*config = NULL;
	*local = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 1;
		}
		if (!strcmp(argv[i], "--version")) {
			printf("vmrund %s\n", VMRUN_VERSION);
			return 1;
		}
		if (!strcmp(argv[i], "--local")) {
			*local = true;
			continue;
		}
		if (!strcmp(argv[i], "--config") && i + 1 < argc) {
			*config = argv[++i];
			continue;
		}
		vmrund_say("unknown option %s (vmrund --help)", argv[i]);
		return -1;
	}
	return 0;
}

/* mkdir -p, each made 0700: a local service's directory is its user's. */
static int mkdirs(const char *path)
{
	char p[256];
	snprintf(p, sizeof(p), "%s", path);
	for (char *s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
		if (s)
			*s = '\0';
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			return -1;
		if (!s)
			return 0;
		*s = '/';
	}
}

/* Signals the loop reads from its signalfd: blocked before any thread
 * starts, so every thread inherits the mask. */
static int block_signals(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	signal(SIGPIPE, SIG_IGN);
	return sigprocmask(SIG_BLOCK, &set, NULL);
}

int main(int argc, char **argv)
{
	const char *config_path;
	bool local;
	int p = parse(argc, argv, &config_path, &local);
	if (p)
		return p > 0 ? 0 : 2;
	struct vmrund_config cfg;
	char err[800], exe[PATH_MAX], dir[256];
	config_defaults(&cfg);
	if (local) {
		sbxc_local_dir(dir, sizeof(dir));
		if (mkdirs(dir) < 0) {
			vmrund_say("%s: %s", dir, strerror(errno));
			return 1;
		}
		config_local(&cfg, dir);
	}
	if ((!local || config_path) &&
	    config_load(&cfg, config_path ? config_path : VMRUND_CONFIG_PATH, !config_path, err, sizeof(err))) {
		vmrund_say("%s", err);
		return 1;
	}
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0 || block_signals() < 0) {
		vmrund_say("%s: %s", n < 0 ? "/proc/self/exe" : "sigprocmask", strerror(errno));
		return 1;
	}
	exe[n] = '\0';
	/* libcurl's own state (Judge0's callbacks), set up before any thread */
	if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
		vmrund_say("curl_global_init failed");
		return 1;
	}
	struct vmrund *d = calloc(1, sizeof(*d));
	if (!d) {
		vmrund_say("out of memory");
		return 1;
	}
	int status = 1;
	struct http_server *h = NULL;
	if (vmrund_open(d, &cfg, dirname(exe), err, sizeof(err)) || !(h = http_start(d, err, sizeof(err)))) {
		vmrund_say("%s", err);
		goto out;
	}
	char where[160];
	if (cfg.listen_unix[0])
		snprintf(where, sizeof(where), "unix:%s", cfg.listen_unix);
	else
		snprintf(where, sizeof(where), "%s:%u", cfg.listen_host, cfg.listen_port);
	vmrund_say("node %s listening on %s, %u slots, queue of %u, %zu tenants, %zu runtimes, store %s", d->node,
		   where, d->slots, cfg.queue_max, d->ts.n, d->nrts, cfg.store[0] ? "PostgreSQL" : cfg.state_db);
	if (vmrund_loop(d, err, sizeof(err)))
		vmrund_say("%s", err);
	else
		status = 0;
	vmrund_closing(d);
	vmrund_say("stopped");
out:
	http_stop(h);
	vmrund_close(d);
	free(d);
	curl_global_cleanup();
	return status;
}
