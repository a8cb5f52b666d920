/* `vmrun sandbox` (host/cli/cli_sandbox.h): parse, then one exchange or
 * two with vmrund through the sandbox API's client (sandbox_http.h). */
#include "cli_sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_diff.h"
#include "errmsg.h"
#include "sandbox_http.h"

#define CALL_MS     60000         /* each read of an answer (a wait asks for less) */
#define WAIT_STEP_S 240           /* one ?wait= of a long command */
#define JSON_MAX    (64u << 20)   /* an answer read whole: a command's output at most */

static const char usage[] =
	"usage: vmrun sandbox [--server URL] COMMAND ...\n"
	"  create [--runtime NAME] [--timeout S] [-m MIB] [-c CPUS] [--disk MIB] [-e K=V]... [--meta K=V]... [--json]\n"
	"  ls [--json]\n"
	"  exec [-t S] [-w DIR] [-e K=V]... [-i] ID [--] PROGRAM [ARG...]\n"
	"  cp SRC DST          one side ID:PATH; \"-\" is a tar on stdin or stdout (a directory)\n"
	"  cat ID PATH\n"
	"  kill ID\n"
	"  timeout ID SECONDS\n"
	"  pause ID            save its VM to disk (its processes too) and free its memory\n"
	"  resume ID           start it again where it stopped\n"
	"  diff [--from F] [--to T] [--stat] [--json] ID\n"
	"                      what changed in its workspace: from \"start\" (the default) or a\n"
	"                      checkpoint, to a checkpoint or now (the default)\n"
	"The server: --server, $VMRUN_SERVER (http://HOST:PORT or unix:PATH), vmrund --local's\n"
	"socket when it runs, else http://127.0.0.1:8080; the key: $VMRUN_API_KEY.\n";

/* ---- parsing ----------------------------------------------------------------------- */

static int positive(const char *opt, const char *v, double max, double *out, char *err, size_t errlen)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (errno || end == v || *end || !(x > 0) || x > max)
		return errf(err, errlen, "%s %s: a number more than 0 and at most %.0f", opt, v, max);
	*out = x;
	return 0;
}

/* K=V into obj[K] (created at *obj when NULL). */
static int pair(json_t **obj, const char *opt, const char *kv, char *err, size_t errlen)
{
	const char *eq = strchr(kv, '=');
	if (!eq || eq == kv)
		return errf(err, errlen, "%s %s: KEY=VALUE", opt, kv);
	if (!*obj)
		*obj = json_object();
	char *k = strndup(kv, (size_t)(eq - kv));
	json_t *v = json_string(eq + 1);
	int rc = k && v ? json_object_set_new(*obj, k, v) : -1;
	free(k);
	if (rc)
		return errf(err, errlen, "%s %s: not UTF-8", opt, kv);
	return 0;
}

static void set_limit(json_t *body, const char *name, double v)
{
	json_t *l = json_object_get(body, "limits");
	if (!l)
		json_object_set_new(body, "limits", l = json_object());
	json_object_set_new(l, name, json_integer((json_int_t)v));
}

static int parse_create(int argc, char **argv, struct sbx_cli *c, char *err, size_t errlen)
{
	static const struct option opts[] = { { "runtime", required_argument, NULL, 'r' },
					      { "timeout", required_argument, NULL, 't' },
					      { "memory", required_argument, NULL, 'm' },
					      { "cpus", required_argument, NULL, 'c' },
					      { "disk", required_argument, NULL, 'd' },
					      { "env", required_argument, NULL, 'e' },
					      { "meta", required_argument, NULL, 'M' },
					      { "json", no_argument, NULL, 'j' },
					      { NULL, 0, NULL, 0 } };
	json_t *env = NULL, *meta = NULL;
	c->body = json_object();
	int o;
	double v;
	while ((o = getopt_long(argc, argv, "+m:c:e:", opts, NULL)) != -1) {
		int rc = 0;
		if (o == 'r')
			json_object_set_new(c->body, "runtime", json_string(optarg));
		else if (o == 't')
			rc = positive("--timeout", optarg, 366.0 * 86400, &v, err, errlen) ||
			     json_object_set_new(c->body, "timeout_s", json_real(v));
		else if (o == 'm' || o == 'c' || o == 'd')
			rc = positive(o == 'm' ? "-m" : o == 'c' ? "-c" : "--disk", optarg, 1 << 24, &v, err, errlen) ||
			     (set_limit(c->body, o == 'm' ? "memory_mib" : o == 'c' ? "cpus" : "disk_mib", v), 0);
		else if (o == 'e' || o == 'M')
			rc = pair(o == 'e' ? &env : &meta, o == 'e' ? "-e" : "--meta", optarg, err, errlen);
		else if (o == 'j')
			c->json = true;
		else
			rc = errf(err, errlen, "sandbox create: unknown option (vmrun sandbox --help)");
		if (rc) {
			json_decref(env);
			json_decref(meta);
			return -1;
		}
	}
	if (env)
		json_object_set_new(c->body, "env", env);
	if (meta)
		json_object_set_new(c->body, "metadata", meta);
	if (optind != argc)
		return errf(err, errlen, "sandbox create: unexpected %s", argv[optind]);
	return 0;
}

static int parse_exec(int argc, char **argv, struct sbx_cli *c, char *err, size_t errlen)
{
	json_t *env = NULL;
	c->body = json_object();
	int o;
	double v;
	while ((o = getopt(argc, argv, "+t:w:e:i")) != -1) {
		int rc = 0;
		if (o == 't')
			rc = positive("-t", optarg, 86400, &v, err, errlen) ||
			     json_object_set_new(c->body, "timeout_s", json_real(v));
		else if (o == 'w')
			json_object_set_new(c->body, "cwd", json_string(optarg));
		else if (o == 'e')
			rc = pair(&env, "-e", optarg, err, errlen);
		else if (o == 'i')
			c->stdin_in = true;
		else
			rc = errf(err, errlen, "sandbox exec: unknown option (vmrun sandbox --help)");
		if (rc) {
			json_decref(env);
			return -1;
		}
	}
	if (env)
		json_object_set_new(c->body, "env", env);
	if (optind >= argc)
		return errf(err, errlen, "sandbox exec: which sandbox? (exec ID PROGRAM [ARG...])");
	c->id = argv[optind++];
	if (optind < argc && !strcmp(argv[optind], "--"))
		optind++;
	if (optind >= argc)
		return errf(err, errlen, "sandbox exec: no program to run");
	json_t *a = json_array();
	for (int i = optind; i < argc; i++)
		if (json_array_append_new(a, json_string(argv[i]))) {
			json_decref(a);
			return errf(err, errlen, "sandbox exec: argument %d is not UTF-8", i - optind);
		}
	json_object_set_new(c->body, "argv", a);
	return 0;
}

static int parse_diff(int argc, char **argv, struct sbx_cli *c, char *err, size_t errlen)
{
	static const struct option opts[] = { { "from", required_argument, NULL, 'f' },
					      { "to", required_argument, NULL, 't' },
					      { "stat", no_argument, NULL, 's' },
					      { "json", no_argument, NULL, 'j' },
					      { NULL, 0, NULL, 0 } };
	int o;
	while ((o = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (o == 'f')
			c->from = optarg;
		else if (o == 't')
			c->to = optarg;
		else if (o == 's')
			c->stat_only = true;
		else if (o == 'j')
			c->json = true;
		else
			return errf(err, errlen, "usage: vmrun sandbox diff [--from F] [--to T] [--stat] [--json] ID");
	}
	if (argc - optind != 1)
		return errf(err, errlen, "usage: vmrun sandbox diff [--from F] [--to T] [--stat] [--json] ID");
	c->id = argv[optind];
	return 0;
}

/* The words after the verb: exactly n of them, into out. */
static int words(int argc, char **argv, int n, const char **out, const char *what, char *err, size_t errlen)
{
	if (argc - optind != n)
		return errf(err, errlen, "usage: vmrun sandbox %s", what);
	for (int i = 0; i < n; i++)
		out[i] = argv[optind + i];
	return 0;
}

int sbx_cli_parse(int argc, char **argv, struct sbx_cli *c, char *err, size_t errlen)
{
	static const struct option opts[] = { { "server", required_argument, NULL, 's' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	memset(c, 0, sizeof(*c));
	optind = 2;   /* past "vmrun sandbox" */
	int o;
	while ((o = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		if (o == 's')
			c->server = optarg;
		else if (o == 'h') {
			fputs(usage, stdout);
			return 1;
		} else
			return errf(err, errlen, "sandbox: unknown option (vmrun sandbox --help)");
	}
	if (optind >= argc)
		return errf(err, errlen, "sandbox: which command? (vmrun sandbox --help)");
	const char *verb = c->verb_name = argv[optind];
	/* each verb's own options are parsed from its own argv */
	int vargc = argc - optind;
	char **vargv = argv + optind;
	optind = 1;
	const char *w[2] = { NULL, NULL };
	if (!strcmp(verb, "create")) {
		c->verb = SV_CREATE;
		return parse_create(vargc, vargv, c, err, errlen);
	}
	if (!strcmp(verb, "exec")) {
		c->verb = SV_EXEC;
		return parse_exec(vargc, vargv, c, err, errlen);
	}
	if (!strcmp(verb, "diff")) {
		c->verb = SV_DIFF;
		return parse_diff(vargc, vargv, c, err, errlen);
	}
	if (!strcmp(verb, "ls")) {
		c->verb = SV_LS;
		c->json = vargc == 2 && !strcmp(vargv[1], "--json");
		return vargc == 1 || c->json ? 0 : errf(err, errlen, "usage: vmrun sandbox ls [--json]");
	}
	if (!strcmp(verb, "cp")) {
		c->verb = SV_CP;
		if (words(vargc, vargv, 2, w, "cp SRC DST", err, errlen))
			return -1;
		c->src = w[0];
		c->dst = w[1];
		bool rs = strchr(w[0], ':') && w[0] != strchr(w[0], ':'), rd = strchr(w[1], ':') && w[1] != strchr(w[1], ':');
		if (rs == rd)
			return errf(err, errlen, "sandbox cp: one of SRC and DST is ID:PATH, the other a local path or -");
		return 0;
	}
	if (!strcmp(verb, "cat") || !strcmp(verb, "timeout")) {
		bool cat = verb[0] == 'c';
		c->verb = cat ? SV_CAT : SV_TIMEOUT;
		if (words(vargc, vargv, 2, w, cat ? "cat ID PATH" : "timeout ID SECONDS", err, errlen))
			return -1;
		c->id = w[0];
		c->dst = w[1];
		return cat ? 0 : positive("sandbox timeout", w[1], 366.0 * 86400, &c->seconds, err, errlen);
	}
	if (!strcmp(verb, "kill") || !strcmp(verb, "pause") || !strcmp(verb, "resume")) {
		c->verb = verb[0] == 'k' ? SV_KILL : verb[0] == 'p' ? SV_PAUSE : SV_RESUME;
		return words(vargc, vargv, 1, &c->id, verb[0] == 'k' ? "kill ID" : verb[0] == 'p' ? "pause ID" : "resume ID",
			     err, errlen);
	}
	return errf(err, errlen, "sandbox: no command %s (vmrun sandbox --help)", verb);
}

void sbx_cli_free(struct sbx_cli *c)
{
	json_decref(c->body);
	c->body = NULL;
}

const char *sbx_cli_server(const struct sbx_cli *c, const char *local)
{
	const char *env = getenv("VMRUN_SERVER");
	struct stat st;
	if (c->server)
		return c->server;
	if (env && *env)
		return env;
	if (local && stat(local, &st) == 0 && S_ISSOCK(st.st_mode))
		return local;
	return "http://127.0.0.1:8080";
}

/* ---- talking to vmrund --------------------------------------------------------------- */

struct conn {
	const char *server, *key;
	struct sbxc c;
};

/* Send a request (a body of len bytes from body, or from fd when body is
 * NULL and fd >= 0) and read the answer's head. 0, or -1 with err. */
static int request(struct conn *k, const char *method, const char *target, const char *type, const void *body,
		   int fd, uint64_t len, int timeout_ms, char *err, size_t errlen)
{
	if (sbxc_connect_server(&k->c, k->server, timeout_ms) < 0)
		return errf(err, errlen, "%s: %s", k->server,
			    errno == EINVAL ? "not http://HOST:PORT or unix:PATH" : strerror(errno));
	k->c.auth = k->key;
	int rc = sbxc_send_head(&k->c, method, target, type, NULL, len);
	if (!rc && body)
		rc = sbxc_send(&k->c, body, (size_t)len);
	char buf[65536];
	for (uint64_t left = body ? 0 : len; !rc && fd >= 0 && left;) {
		ssize_t n = read(fd, buf, left < sizeof(buf) ? left : sizeof(buf));
		if (n <= 0)
			return sbxc_close(&k->c), errf(err, errlen, "reading the upload: %s", n ? strerror(errno) : "it ended early");
		rc = sbxc_send(&k->c, buf, (size_t)n);
		left -= (uint64_t)n;
	}
	if (rc || sbxc_read_head(&k->c) < 0) {
		int e = errno;
		sbxc_close(&k->c);
		return errf(err, errlen, "%s: %s", k->server, strerror(e));
	}
	return 0;
}

/* The rest of the answer, whole (at most JSON_MAX): parsed JSON, or NULL
 * with err. The connection is closed. */
static json_t *answer_json(struct conn *k, char *err, size_t errlen)
{
	size_t cap = 65536, len = 0;
	char *b = malloc(cap);
	ssize_t n = 0;
	while (b && (n = sbxc_read_body(&k->c, b + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (len + 1 == cap && cap < JSON_MAX) {
			char *nb = realloc(b, cap * 2);
			if (!nb)
				break;
			b = nb;
			cap *= 2;
		} else if (len + 1 == cap) {
			break;
		}
	}
	sbxc_close(&k->c);
	if (!b || n < 0) {
		free(b);
		errf(err, errlen, "%s: %s", k->server, b ? strerror(errno) : "out of memory");
		return NULL;
	}
	b[len] = '\0';
	json_t *j = json_loads(b, 0, NULL);
	if (!j)
		errf(err, errlen, "%s: an answer that is not JSON (%u)", k->server, k->c.head.status);
	free(b);
	return j;
}

/* A JSON call: the answer for a status of 2xx, else NULL with the
 * server's message (and its status) in err. */
static json_t *call(struct conn *k, const char *method, const char *target, const json_t *body, int timeout_ms,
		    char *err, size_t errlen)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	int rc = request(k, method, target, text ? "application/json" : NULL, text ? text : "", -1,
			 text ? strlen(text) : 0, timeout_ms, err, errlen);
	free(text);
	if (rc)
		return NULL;
	unsigned status = k->c.head.status;
	json_t *j = answer_json(k, err, errlen);
	if (j && (status < 200 || status > 299)) {
		const char *m = json_string_value(json_object_get(j, "message"));
		errf(err, errlen, "%s (%u)", m ? m : "an error", status);
		json_decref(j);
		return NULL;
	}
	return j;
}

/* A server's error answer on a stream call: its message into err. */
static int failed(struct conn *k, char *err, size_t errlen)
{
	unsigned status = k->c.head.status;
	json_t *j = answer_json(k, err, errlen);
	const char *m = json_string_value(json_object_get(j, "message"));
	errf(err, errlen, "%s (%u)", m ? m : "an error", status);
	json_decref(j);
	return 1;
}

static void print_sandbox_row(const json_t *s)
{
	printf("%-32s  %-8s  %-10s  %8.0f  %s\n", json_string_value(json_object_get(s, "id")),
	       json_string_value(json_object_get(s, "state")),
	       json_is_string(json_object_get(s, "runtime")) ? json_string_value(json_object_get(s, "runtime")) : "-",
	       json_number_value(json_object_get(s, "time_left_s")), json_string_value(json_object_get(s, "created_at")));
}

static int do_exec(struct conn *k, struct sbx_cli *c, char *err, size_t errlen)
{
	if (c->stdin_in) {
		/* the command's stdin, read whole: a sandbox's input is a request's */
		size_t cap = 65536, len = 0;
		char *b = malloc(cap);
		for (ssize_t n; b && (n = read(0, b + len, cap - len)) > 0;)
			if ((len += (size_t)n) == cap && cap < (16u << 20)) {
				char *nb = realloc(b, cap *= 2);
				if (!nb)
					break;
				b = nb;
			}
		json_t *s = b ? json_stringn(b, len) : NULL;
		free(b);
		if (!s)
			return errf(err, errlen, "stdin: not UTF-8 text, or over 16 MiB"), 125;
		json_object_set_new(c->body, "stdin", s);
	}
	char target[256];
	snprintf(target, sizeof(target), "/v1/sandboxes/%.64s/commands?wait=%d", c->id, WAIT_STEP_S);
	json_t *j = call(k, "POST", target, c->body, (WAIT_STEP_S + 30) * 1000, err, errlen);
	/* a command longer than one wait: ask again until it ended */
	while (j && strcmp(json_string_value(json_object_get(j, "state")) ?: "", "ended")) {
		json_int_t cid = json_integer_value(json_object_get(j, "id"));
		json_decref(j);
		snprintf(target, sizeof(target), "/v1/sandboxes/%.64s/commands/%lld?wait=%d", c->id, (long long)cid,
			 WAIT_STEP_S);
		j = call(k, "GET", target, NULL, (WAIT_STEP_S + 30) * 1000, err, errlen);
	}
	if (!j)
		return 125;
	const json_t *out = json_object_get(j, "stdout"), *e = json_object_get(j, "stderr");
	fwrite(json_string_value(out) ?: "", 1, json_string_length(out), stdout);
	fflush(stdout);
	fwrite(json_string_value(e) ?: "", 1, json_string_length(e), stderr);
	int status = json_is_true(json_object_get(j, "timed_out")) ? 124
		     : json_is_integer(json_object_get(j, "exit_code"))
			     ? (int)json_integer_value(json_object_get(j, "exit_code"))
			     : 128 + (int)json_integer_value(json_object_get(j, "signal"));
	json_decref(j);
	return status;
}

/* A file or a tar (dir) down into fd. */
static int download(struct conn *k, const char *target, int fd, char *err, size_t errlen)
{
	if (request(k, "GET", target, NULL, "", -1, 0, CALL_MS, err, errlen))
		return 1;
	if (k->c.head.status != 200)
		return failed(k, err, errlen);
	char buf[65536];
	ssize_t n;
	while ((n = sbxc_read_body(&k->c, buf, sizeof(buf))) > 0)
		for (ssize_t o = 0, w; o < n; o += w)
			if ((w = write(fd, buf + o, (size_t)(n - o))) <= 0) {
				sbxc_close(&k->c);
				return errf(err, errlen, "writing: %s", strerror(errno)), 1;
			}
	int e = errno;
	sbxc_close(&k->c);
	return n < 0 ? errf(err, errlen, "%s: %s", k->server, strerror(e)), 1 : 0;
}

/* A local file, or stdin (copied to a temporary file first, for its
 * length), up to target. */
static int upload(struct conn *k, const char *target, const char *local, char *err, size_t errlen)
{
	int fd = -1;
	if (!strcmp(local, "-")) {
		char tmpl[] = "/tmp/vmrun-cp.XXXXXX";
		if ((fd = mkstemp(tmpl)) < 0)
			return errf(err, errlen, "%s: %s", tmpl, strerror(errno)), 1;
		unlink(tmpl);
		char buf[65536];
		for (ssize_t n; (n = read(0, buf, sizeof(buf))) > 0;)
			if (write(fd, buf, (size_t)n) != n) {
				close(fd);
				return errf(err, errlen, "%s: %s", tmpl, strerror(errno)), 1;
			}
		lseek(fd, 0, SEEK_SET);
	} else if ((fd = open(local, O_RDONLY | O_CLOEXEC)) < 0) {
		return errf(err, errlen, "%s: %s", local, strerror(errno)), 1;
	}
	struct stat st;
	int rc = 1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		errf(err, errlen, "%s: not a regular file (a directory goes as a tar: tar -C DIR -c . | vmrun sandbox cp - ID:DIR)",
		     local);
	else if (!request(k, "PUT", target, "application/octet-stream", NULL, fd, (uint64_t)st.st_size, CALL_MS, err,
			  errlen))
		rc = k->c.head.status == 200 ? (sbxc_close(&k->c), 0) : failed(k, err, errlen);
	close(fd);
	return rc;
}

static int do_cp(struct conn *k, struct sbx_cli *c, char *err, size_t errlen)
{
	bool up = strchr(c->dst, ':') && c->dst[0] != ':';
	const char *r = up ? c->dst : c->src, *local = up ? c->src : c->dst;
	char id[80], qpath[4096], target[4400];
	snprintf(id, sizeof(id), "%.*s", (int)(strchr(r, ':') - r), r);
	sbxc_query_encode(strchr(r, ':') + 1, qpath, sizeof(qpath));
	bool tar = !strcmp(local, "-");
	snprintf(target, sizeof(target), "/v1/sandboxes/%.64s/files%s?path=%s", id, tar ? "/tar" : "", qpath);
	if (up && tar) {
		/* a tar goes into a directory: made first, as mkdir -p */
		char mk[200];
		snprintf(mk, sizeof(mk), "/v1/sandboxes/%.64s/files/mkdir", id);
		json_t *b = json_pack("{s:s}", "path", strchr(r, ':') + 1);
		json_t *j = b ? call(k, "POST", mk, b, CALL_MS, err, errlen) : NULL;
		json_decref(b);
		if (!b)
			errf(err, errlen, "%s: not UTF-8", r);
		if (!j)
			return 1;
		json_decref(j);
	}
	if (up)
		return upload(k, target, local, err, errlen);
	int fd = tar ? 1 : open(local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return errf(err, errlen, "%s: %s", local, strerror(errno)), 1;
	int rc = download(k, target, fd, err, errlen);
	if (!tar && close(fd) < 0 && !rc) {
		errf(err, errlen, "%s: %s", local, strerror(errno));
		rc = 1;
	}
	return rc;
}

int sbx_cli_run(struct sbx_cli *c, const char *server, const char *key, char *err, size_t errlen)
{
	struct conn k = { .server = server, .key = key && *key ? key : NULL };
	char target[4400], qpath[4096];
	json_t *j = NULL;
	switch (c->verb) {
	case SV_CREATE:
		if (!(j = call(&k, "POST", "/v1/sandboxes", c->body, 120000, err, errlen)))
			return 1;
		if (c->json)
			json_dumpf(j, stdout, JSON_INDENT(2)), putchar('\n');
		else
			puts(json_string_value(json_object_get(j, "id")) ?: "");
		break;
	case SV_LS:
		if (!(j = call(&k, "GET", "/v1/sandboxes", NULL, CALL_MS, err, errlen)))
			return 1;
		if (c->json) {
			json_dumpf(j, stdout, JSON_INDENT(2));
			putchar('\n');
		} else {
			printf("%-32s  %-8s  %-10s  %8s  %s\n", "ID", "STATE", "RUNTIME", "LEFT (s)", "CREATED");
			size_t i;
			json_t *s;
			json_array_foreach(json_object_get(j, "sandboxes"), i, s)
				print_sandbox_row(s);
		}
		break;
	case SV_EXEC:
		return do_exec(&k, c, err, errlen);
	case SV_CP:
		return do_cp(&k, c, err, errlen);
	case SV_CAT:
		sbxc_query_encode(c->dst, qpath, sizeof(qpath));
		snprintf(target, sizeof(target), "/v1/sandboxes/%.64s/files?path=%s", c->id, qpath);
		return download(&k, target, 1, err, errlen);
	case SV_KILL:
		snprintf(target, sizeof(target), "/v1/sandboxes/%.64s", c->id);
		if (!(j = call(&k, "DELETE", target, NULL, CALL_MS, err, errlen)))
			return 1;
		break;
	case SV_PAUSE:
	case SV_RESUME: {
		/* vmrund answers once the VM is saved, or runs again */
		snprintf(target, sizeof(target), "/v1/sandboxes/%.64s/%s", c->id, c->verb == SV_PAUSE ? "pause" : "resume");
		json_t *b = json_object();
		j = call(&k, "POST", target, b, 120000, err, errlen);
		json_decref(b);
		if (!j)
			return 1;
		puts(json_string_value(json_object_get(j, "state")) ?: "");
		break;
	}
	case SV_DIFF: {
		char qfrom[200], qto[200];
		sbxc_query_encode(c->from ? c->from : "start", qfrom, sizeof(qfrom));
		sbxc_query_encode(c->to ? c->to : "now", qto, sizeof(qto));
		snprintf(target, sizeof(target), "/v1/sandboxes/%.64s/diff?from=%s&to=%s", c->id, qfrom, qto);
		if (!(j = call(&k, "GET", target, NULL, 300000, err, errlen)))
			return 1;
		if (c->json)
			json_dumpf(j, stdout, JSON_INDENT(2)), putchar('\n');
		else
			cli_print_diff(stdout, j, c->stat_only);
		break;
	}
	case SV_TIMEOUT: {
		snprintf(target, sizeof(target), "/v1/sandboxes/%.64s/timeout", c->id);
		json_t *b = json_pack("{s:f}", "timeout_s", c->seconds);
		j = call(&k, "POST", target, b, CALL_MS, err, errlen);
		json_decref(b);
		if (!j)
			return 1;
		printf("%.0f\n", json_number_value(json_object_get(j, "time_left_s")));
		break;
	}
	}
	json_decref(j);
	return fflush(stdout) ? 1 : 0;
}
