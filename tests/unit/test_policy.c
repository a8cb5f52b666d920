/* The policy (host/run/policy.c): the manifest as the default allowlist, a
 * --policy file's allow lines and ceilings, and what it refuses: unknown
 * keys, bad values, and lines too long for the reader, which must fail the
 * load as a whole (never be split into a second line), as must a NUL byte.
 * Also the program check as the agent resolves names, and the network
 * lines: the ceiling of each kind replaced (and under a caller's file only
 * narrowed), allow_net grants, the proxy's caps and DNS servers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy.h"

struct fx {
	char dir[256];
	char manifest[300];
	char file[300];
	char err[512];
	struct policy p;
};

static void write_bytes(const char *path, const char *data, size_t n)
{
	FILE *f = fopen(path, "we");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

static void write_text(const char *path, const char *text)
{
	write_bytes(path, text, strlen(text));
}

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	const char *tmp = getenv("TMPDIR");
	snprintf(f->dir, sizeof(f->dir), "%s/test_policy.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->manifest, sizeof(f->manifest), "%s/programs.txt", f->dir);
	snprintf(f->file, sizeof(f->file), "%s/policy", f->dir);
	write_text(f->manifest, "/usr/bin/python3\n/usr/bin/sh\n/bin/sh\n/usr/bin/env\n");
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	policy_free(&f->p);
	unlink(f->manifest);
	unlink(f->file);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* policy_load from the manifest file, then policy_apply of file (NULL:
 * none) with the given trust. */
static int load_paths(struct policy *p, const char *manifest, const char *file, enum policy_trust trust, char *err,
		      size_t errlen)
{
	FILE *m = fopen(manifest, "re");
	if (!m)
		return -1;
	int rc = policy_load(p, m, manifest, err, errlen);
	fclose(m);
	if (rc || !file)
		return rc;
	FILE *f = fopen(file, "re");
	if (!f)
		return -1;
	rc = policy_apply(p, f, file, trust, err, errlen);
	fclose(f);
	return rc;
}

/* Load with the policy file holding text, as root's; returns the result. */
static int load(struct fx *f, const char *text)
{
	policy_free(&f->p);
	write_text(f->file, text);
	f->err[0] = '\0';
	return load_paths(&f->p, f->manifest, f->file, POLICY_MAY_RAISE, f->err, sizeof(f->err));
}

/* The same as a caller's --policy, which may only lower. */
static int load_lower(struct fx *f, const char *text)
{
	policy_free(&f->p);
	write_text(f->file, text);
	f->err[0] = '\0';
	return load_paths(&f->p, f->manifest, f->file, POLICY_LOWER_ONLY, f->err, sizeof(f->err));
}

static enum policy_verdict check(struct fx *f, const char *prog)
{
	char resolved[POLICY_PATH_MAX];
	return policy_check_program(&f->p, prog, resolved, sizeof(resolved));
}

/* Apply text on top of what f->p holds now, as one more file (named
 * "more") with the given trust. */
static int apply_more(struct fx *f, const char *text, enum policy_trust trust)
{
	FILE *g = fmemopen((void *)text, strlen(text), "r");
	assert_non_null(g);
	f->err[0] = '\0';
	int rc = policy_apply(&f->p, g, "more", trust, f->err, sizeof(f->err));
	fclose(g);
	return rc;
}

/* Whether f's network ceiling admits the rule text (of --allow-net, or
 * with addr of --allow-net-addr). */
static bool admits(struct fx *f, const char *text, bool addr)
{
	struct net_rule r;
	char why[256] = "";
	if (net_rule_parse(text, addr, &r, why, sizeof(why)) != 0)
		fail_msg("rule %s does not parse: %s", text, why);
	return policy_net_admits(&f->p, &r);
}

static void assert_err_has(struct fx *f, const char *part)
{
	if (!strstr(f->err, part))
		fail_msg("error \"%s\" does not say \"%s\"", f->err, part);
}

/* A refusal: one line, naming the file's line. */
static void assert_refused_at(struct fx *f, int rc, const char *line_no)
{
	if (rc != -1)
		fail_msg("policy accepted (allow list of %u); want a refusal at %s", f->p.nallow, line_no);
	if (!strstr(f->err, line_no) || strchr(f->err, '\n'))
		fail_msg("error \"%s\" does not name %s on one line", f->err, line_no);
}

static void test_defaults_and_manifest(void **state)
{
	struct fx *f = *state;
	assert_int_equal(load_paths(&f->p, f->manifest, NULL, POLICY_MAY_RAISE, f->err, sizeof(f->err)), 0);
	assert_int_equal(f->p.nallow, 4);
	assert_int_equal(f->p.max_timeout_s, 300);
	assert_int_equal(f->p.max_output, 64u << 20);
	assert_int_equal(check(f, "python3"), POLICY_ALLOWED);
	assert_int_equal(check(f, "/bin/sh"), POLICY_ALLOWED);
	assert_int_equal(check(f, "perl"), POLICY_NOT_FOUND);
	assert_int_equal(check(f, "./x"), POLICY_DENIED);
}

static void test_file_replaces_allowlist(void **state)
{
	struct fx *f = *state;
	assert_int_equal(load(f, "# a comment\n\n  allow /usr/bin/python3\nmax_output 1000\n\tnproc 7\n"), 0);
	assert_int_equal(f->p.nallow, 1);
	assert_int_equal(f->p.max_output, 1000);
	assert_int_equal(f->p.nproc, 7);
	assert_int_equal(check(f, "python3"), POLICY_ALLOWED);
	assert_int_equal(check(f, "sh"), POLICY_DENIED);
	/* the last line needs no newline */
	assert_int_equal(load(f, "max_cpus 2"), 0);
	assert_int_equal(f->p.max_cpus, 2);
}

static void test_bad_lines(void **state)
{
	struct fx *f = *state;
	assert_refused_at(f, load(f, "max_cpus 2\nmax_cpus 99\n"), "line 2");
	assert_refused_at(f, load(f, "frobnicate 1\n"), "line 1");
	assert_refused_at(f, load(f, "\n\nallow relative/path\n"), "line 3");
	assert_refused_at(f, load(f, "max_output 10 20\n"), "line 1");
	assert_refused_at(f, load(f, "max_output -1\n"), "line 1");
}

/* The finding of issue 12: a comment longer than the reader's buffer must
 * not end early and let its tail read as an allow line. */
static void test_long_line_refused_not_split(void **state)
{
	struct fx *f = *state;
	char text[1200];
	snprintf(text, sizeof(text), "# %0509d%s\n", 0, "allow /bin/sh");
	memset(text + 2, 'x', 509);
	assert_refused_at(f, load(f, text), "line 1");
	/* a long line after good ones: its own number */
	snprintf(text, sizeof(text), "max_cpus 2\n# ok\n# %0600d\nallow /bin/sh\n", 0);
	assert_refused_at(f, load(f, text), "line 3");
	/* the longest line the reader takes is 511 bytes; one more is refused,
	 * with or without its newline */
	memset(text, ' ', 511);
	memcpy(text + 500, "max_cpus 3", 10);
	text[511] = '\0';
	assert_int_equal(load(f, text), 0);
	assert_int_equal(f->p.max_cpus, 3);
	text[511] = '\n';
	text[512] = '\0';
	assert_int_equal(load(f, text), 0);
	memmove(text + 1, text, 513);
	text[0] = ' ';
	assert_refused_at(f, load(f, text), "line 1");
	text[512] = '\0';
	assert_refused_at(f, load(f, text), "line 1");
}

/* A NUL byte would hide the rest of its line from a string reader. */
static void test_nul_byte_refused(void **state)
{
	struct fx *f = *state;
	static const char text[] = "# comment\0allow /bin/sh\nmax_cpus 2\n";
	policy_free(&f->p);
	write_bytes(f->file, text, sizeof(text) - 1);
	assert_refused_at(f, load_paths(&f->p, f->manifest, f->file, POLICY_MAY_RAISE, f->err, sizeof(f->err)), "line 1");
}

/* The manifest is read the same way: a long entry is refused, not split. */
static void test_long_manifest_line_refused(void **state)
{
	struct fx *f = *state;
	char text[700];
	snprintf(text, sizeof(text), "/usr/bin/sh\n/%0299d/usr/bin/perl\n", 0);
	memset(text + 13, 'x', 299);
	write_text(f->manifest, text);
	assert_refused_at(f, load_paths(&f->p, f->manifest, NULL, POLICY_MAY_RAISE, f->err, sizeof(f->err)), "line 2");
}

/* A caller's --policy (finding 1 of issue 12): lowering works, raising
 * any ceiling, removing a CPU quota or extending the allowlist is refused,
 * naming the line. Root's file may raise. */
static void test_caller_policy_only_lowers(void **state)
{
	struct fx *f = *state;
	assert_int_equal(load_lower(f, "max_memory 1024\nmax_timeout 60\ncpu_quota 50\nallow /bin/sh\n"), 0);
	assert_int_equal(f->p.max_memory_mib, 1024);
	assert_int_equal(f->p.max_timeout_s, 60);
	assert_int_equal(f->p.cpu_quota_pct, 50);
	assert_int_equal(f->p.nallow, 1);
	const char *raises[] = { "max_memory 8192\n", "# x\nmax_timeout 301\n", "nproc 100000\n",
				 "max_output 67108865\n", "artifacts_max_files 1001\n" };
	for (size_t i = 0; i < sizeof(raises) / sizeof(raises[0]); i++) {
		assert_refused_at(f, load_lower(f, raises[i]), i == 1 ? "line 2" : "line 1");
		assert_non_null(strstr(f->err, "only root's policy may"));
	}
	assert_int_equal(load(f, "max_memory 8192\nmax_timeout 3600\n"), 0);   /* root's own may */
	assert_int_equal(f->p.max_memory_mib, 8192);
	/* The allowlist may be narrowed, not extended past what it narrows. */
	assert_refused_at(f, load_lower(f, "allow /bin/sh\nallow /usr/bin/perl\n"), "line 2");
	assert_non_null(strstr(f->err, "/usr/bin/perl is not allowed"));
}

/* A CPU quota, once set by root, can be lowered but never lifted. */
static void test_caller_policy_keeps_quota(void **state)
{
	struct fx *f = *state;
	assert_int_equal(load(f, "cpu_quota 100\n"), 0);
	FILE *g = fmemopen((void *)"cpu_quota 200\n", 14, "r");
	assert_non_null(g);
	assert_int_equal(policy_apply(&f->p, g, "mine", POLICY_LOWER_ONLY, f->err, sizeof(f->err)), -1);
	fclose(g);
	assert_non_null(strstr(f->err, "raises the ceiling of 100"));
	g = fmemopen((void *)"cpu_quota 20\n", 13, "r");
	assert_int_equal(policy_apply(&f->p, g, "mine", POLICY_LOWER_ONLY, f->err, sizeof(f->err)), 0);
	fclose(g);
	assert_int_equal(f->p.cpu_quota_pct, 20);
}

/* The network defaults: any host name under the ceiling, no address
 * range (private ranges need root's word), nothing granted, the caps. */
static void test_net_defaults(void **state)
{
	struct fx *f = *state;
	assert_int_equal(load_paths(&f->p, f->manifest, NULL, POLICY_MAY_RAISE, f->err, sizeof(f->err)), 0);
	assert_true(f->p.net.any_host);
	assert_int_equal(f->p.net.nceiling, 0);
	assert_int_equal(f->p.net.nallow, 0);
	assert_int_equal(f->p.net.tunnels, 16);
	assert_int_equal(f->p.net.max_up, 64u << 20);
	assert_int_equal(f->p.net.max_down, 1u << 30);
	assert_int_equal(f->p.net.idle_s, 30);
	assert_string_equal(f->p.net.resolver, "");
	assert_true(admits(f, "example.com", false));
	assert_true(admits(f, "*.example.com:8443", false));
	assert_false(admits(f, "10.0.0.0/8", true));
	assert_false(admits(f, "203.0.113.7", true));
	/* a file without network lines changes none of it */
	assert_int_equal(load(f, "max_cpus 2\n"), 0);
	assert_true(f->p.net.any_host);
	assert_false(admits(f, "10.0.0.0/8", true));
}

/* Root's file: net_ceiling lines replace the host ceiling (any host no
 * longer), net_ceiling_addr lines the address ceiling, each leaving the
 * other kind as it was. */
static void test_net_ceiling_replaces_by_kind(void **state)
{
	struct fx *f = *state;
	assert_int_equal(load(f, "net_ceiling_addr 10.0.0.0/8\nnet_ceiling_addr [fd00::/8]:8080\n"), 0);
	assert_true(f->p.net.any_host);   /* address lines leave the host ceiling */
	assert_int_equal(f->p.net.nceiling, 2);
	assert_true(admits(f, "10.1.0.0/16", true));
	assert_true(admits(f, "[fd00:1::/32]:8080", true));
	assert_false(admits(f, "fd00:1::/32", true));   /* ports 80 and 443: not within 8080 */
	assert_false(admits(f, "11.0.0.0/8", true));
	assert_false(admits(f, "0.0.0.0/0", true));
	assert_true(admits(f, "anything.test", false));
	/* host lines now: the address rules stay */
	assert_int_equal(apply_more(f, "net_ceiling example.com\nnet_ceiling *.example.org:8443\n", POLICY_MAY_RAISE), 0);
	assert_false(f->p.net.any_host);
	assert_int_equal(f->p.net.nceiling, 4);
	assert_true(admits(f, "example.com", false));
	assert_true(admits(f, "example.com:443", false));
	assert_false(admits(f, "example.com:22", false));
	assert_false(admits(f, "other.com", false));
	assert_true(admits(f, "a.example.org:8443", false));
	assert_true(admits(f, "*.b.example.org:8443", false));
	assert_false(admits(f, "a.example.org", false));
	assert_false(admits(f, "example.org:8443", false));   /* the suffix is not its own domain */
	assert_true(admits(f, "10.1.0.0/16", true));
	/* address lines again: they replace the address rules only */
	assert_int_equal(apply_more(f, "net_ceiling_addr 192.168.0.0/16\n", POLICY_MAY_RAISE), 0);
	assert_false(f->p.net.any_host);
	assert_int_equal(f->p.net.nceiling, 3);
	assert_true(admits(f, "192.168.1.0/24", true));
	assert_false(admits(f, "10.1.0.0/16", true));
	assert_true(admits(f, "example.com", false));
	assert_true(admits(f, "a.example.org:8443", false));
	/* both kinds in one file, either order */
	assert_int_equal(load(f, "net_ceiling_addr 10.0.0.0/8\nnet_ceiling example.com\nnet_ceiling_addr 172.16.0.0/12\n"),
			 0);
	assert_false(f->p.net.any_host);
	assert_int_equal(f->p.net.nceiling, 3);
	assert_true(admits(f, "10.0.0.0/8", true));
	assert_true(admits(f, "172.20.0.0/16", true));
	assert_true(admits(f, "example.com", false));
	assert_false(admits(f, "other.com", false));
}

/* A caller's file may narrow the network ceiling, never widen it; what
 * it narrows is the ceiling before its own lines. */
static void test_net_ceiling_lower_only(void **state)
{
	struct fx *f = *state;
	/* from any host name to one */
	assert_int_equal(load_lower(f, "net_ceiling example.com\n"), 0);
	assert_false(f->p.net.any_host);
	assert_int_equal(f->p.net.nceiling, 1);
	assert_true(admits(f, "example.com", false));
	assert_false(admits(f, "other.com", false));
	/* several lines, each within what was before the file */
	assert_int_equal(load_lower(f, "net_ceiling *.example.com:8443\nnet_ceiling other.com\n"), 0);
	assert_int_equal(f->p.net.nceiling, 2);
	assert_false(admits(f, "example.com", false));
	/* under root's ceiling: within it, or refused naming the line */
	assert_int_equal(load(f, "net_ceiling example.com\nnet_ceiling *.example.org\n"), 0);
	assert_int_equal(apply_more(f, "# narrower\nnet_ceiling example.com:443\nnet_ceiling a.example.org\n",
				    POLICY_LOWER_ONLY), 0);
	assert_int_equal(f->p.net.nceiling, 2);
	assert_true(admits(f, "example.com:443", false));
	assert_false(admits(f, "example.com:80", false));
	assert_true(admits(f, "a.example.org", false));
	assert_false(admits(f, "b.example.org", false));
	const char *widen[] = { "net_ceiling other.com\n", "net_ceiling example.com:8080\n",
				"net_ceiling *.example.com\n", "net_ceiling a.example.com\n",
				"net_ceiling a.example.org\nnet_ceiling example.org\n" };
	for (size_t i = 0; i < sizeof(widen) / sizeof(widen[0]); i++) {
		assert_int_equal(load(f, "net_ceiling example.com\nnet_ceiling *.example.org\n"), 0);
		assert_refused_at(f, apply_more(f, widen[i], POLICY_LOWER_ONLY), i == 4 ? "more line 2" : "more line 1");
		assert_err_has(f, "widens the network ceiling");
	}
	/* root's own file may widen it */
	assert_int_equal(apply_more(f, "net_ceiling other.com\n", POLICY_MAY_RAISE), 0);
	assert_true(admits(f, "other.com", false));
	/* no address ceiling to narrow: an address line widens */
	assert_refused_at(f, load_lower(f, "net_ceiling_addr 10.0.0.0/8\n"), "line 1");
	assert_err_has(f, "widens the network ceiling");
	assert_refused_at(f, load_lower(f, "net_ceiling example.com\nnet_ceiling_addr 10.1.2.3/32\n"), "line 2");
	/* root's address ceiling: narrowed, not widened */
	assert_int_equal(load(f, "net_ceiling_addr 10.0.0.0/8\n"), 0);
	assert_int_equal(apply_more(f, "net_ceiling_addr 10.1.0.0/16:443\n", POLICY_LOWER_ONLY), 0);
	assert_true(f->p.net.any_host);
	assert_true(admits(f, "10.1.2.0/24:443", true));
	assert_false(admits(f, "10.1.2.0/24", true));   /* port 80 too: no longer */
	assert_false(admits(f, "10.2.0.0/16:443", true));
	assert_int_equal(load(f, "net_ceiling_addr 10.0.0.0/8\n"), 0);
	assert_refused_at(f, apply_more(f, "net_ceiling_addr 10.1.0.0/16:8080\n", POLICY_LOWER_ONLY), "more line 1");
	assert_err_has(f, "widens the network ceiling");
	assert_int_equal(load(f, "net_ceiling_addr 10.0.0.0/8\n"), 0);
	assert_refused_at(f, apply_more(f, "net_ceiling_addr 0.0.0.0/0\n", POLICY_LOWER_ONLY), "more line 1");
	assert_err_has(f, "widens the network ceiling");
}

/* "net_ceiling none": no host name; with no address ceiling, nothing. */
static void test_net_ceiling_none(void **state)
{
	struct fx *f = *state;
	assert_int_equal(load(f, "net_ceiling none\n"), 0);
	assert_false(f->p.net.any_host);
	assert_int_equal(f->p.net.nceiling, 0);
	assert_false(admits(f, "example.com", false));
	assert_false(admits(f, "*.example.com", false));
	assert_false(admits(f, "10.0.0.0/8", true));
	/* a caller may say it too (it only narrows) */
	assert_int_equal(load_lower(f, "net_ceiling none\n"), 0);
	assert_false(f->p.net.any_host);
	assert_false(admits(f, "example.com", false));
	/* it ends host names only: root's address rules stay */
	assert_int_equal(load(f, "net_ceiling_addr 10.0.0.0/8\n"), 0);
	assert_int_equal(apply_more(f, "net_ceiling none\n", POLICY_LOWER_ONLY), 0);
	assert_false(admits(f, "example.com", false));
	assert_true(admits(f, "10.0.0.0/8", true));
	/* and is not a host name elsewhere */
	assert_refused_at(f, load(f, "net_ceiling_addr none\n"), "line 1");
}

/* allow_net and allow_net_addr lines add up, in order, across files. */
static void test_allow_net_accumulates(void **state)
{
	struct fx *f = *state;
	assert_int_equal(load(f, "allow_net Example.COM\nallow_net_addr 10.0.0.0/8:8080\nallow_net *.example.org:8443\n"), 0);
	assert_int_equal(f->p.net.nallow, 3);
	const struct net_rule *a = f->p.net.allow;
	assert_int_equal(a[0].kind, NET_RULE_HOST);
	assert_string_equal(a[0].host, "example.com");   /* normalized */
	assert_int_equal(a[0].port, 0);
	assert_int_equal(a[1].kind, NET_RULE_ADDR);
	assert_int_equal(a[1].prefix, 96 + 8);
	assert_int_equal(a[1].addr[12], 10);
	assert_int_equal(a[1].port, 8080);
	assert_int_equal(a[2].kind, NET_RULE_SUFFIX);
	assert_string_equal(a[2].host, "example.org");
	assert_int_equal(a[2].port, 8443);
	assert_int_equal(apply_more(f, "allow_net b.test\n", POLICY_LOWER_ONLY), 0);
	assert_int_equal(f->p.net.nallow, 4);
	assert_string_equal(f->p.net.allow[3].host, "b.test");
	assert_string_equal(f->p.net.allow[0].host, "example.com");
	/* at most POLICY_NET_RULES_MAX */
	char text[(POLICY_NET_RULES_MAX + 1) * 24];
	size_t n = 0;
	for (unsigned i = 0; i <= POLICY_NET_RULES_MAX; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "allow_net h%u.test\n", i);
	assert_refused_at(f, load(f, text), "line 65");
	assert_err_has(f, "more than 64 allow_net rules");
}

/* A rule that does not parse: the line, and the reason. */
static void test_net_bad_rules(void **state)
{
	struct fx *f = *state;
	assert_refused_at(f, load(f, "max_cpus 2\nallow_net 10.0.0.1\n"), "line 2");
	assert_err_has(f, "is an IP address");
	assert_refused_at(f, load(f, "net_ceiling bad..name\n"), "line 1");
	assert_err_has(f, "not a valid host name");
	assert_refused_at(f, load(f, "\nallow_net_addr 10.0.0.1/8\n"), "line 2");
	assert_err_has(f, "bits set past its prefix");
	assert_refused_at(f, load(f, "net_ceiling_addr example.com\n"), "line 1");
	assert_refused_at(f, load(f, "allow_net example.com:0\n"), "line 1");
	assert_err_has(f, "not 1 to 65535");
	assert_refused_at(f, load(f, "allow_net\n"), "line 1");
	assert_refused_at(f, load(f, "allow_net a.test b.test\n"), "line 1");
}

/* The proxy's DNS servers: strict IP[:PORT] forms, joined with commas;
 * root's file only. */
static void test_net_resolver(void **state)
{
	struct fx *f = *state;
	assert_int_equal(load(f, "net_resolver 1.2.3.4\nnet_resolver 1.2.3.4:5353\nnet_resolver [fd00::1]\n"
				 "net_resolver [fd00::1]:53\n"), 0);
	assert_string_equal(f->p.net.resolver, "1.2.3.4,1.2.3.4:5353,[fd00::1],[fd00::1]:53");
	const char *bad[] = { "dns.google", "1.2.3", "[fd00::1", ":53", "1.2.3.4:0", "1.2.3.4:99999", "1.2.3.4:",
			      "1.2.3.4:53x", "1.2.3.4:-53", "fd00::1", "[fd00::1]53", "[1.2.3.4]", "[]", "0x7f.0.0.1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[128];
		snprintf(text, sizeof(text), "net_resolver 8.8.8.8\nnet_resolver %s\n", bad[i]);
		assert_refused_at(f, load(f, text), "line 2");
		assert_err_has(f, "not an IP address with an optional :PORT");
	}
	assert_refused_at(f, load_lower(f, "net_resolver 1.2.3.4\n"), "line 1");
	assert_err_has(f, "only root's policy may name the proxy's DNS server");
	/* 127 bytes fit the list; 128 do not */
	char text[512] = "";
	for (int i = 0; i < 9; i++)
		strcat(text, "net_resolver 1.2.3.4:5353\n");
	char more[600];
	snprintf(more, sizeof(more), "%snet_resolver 1.2.3.4:53\n", text);
	assert_int_equal(load(f, more), 0);
	assert_int_equal(strlen(f->p.net.resolver), 127);
	assert_string_equal(f->p.net.resolver + 116, ",1.2.3.4:53");
	snprintf(more, sizeof(more), "%snet_resolver 1.2.3.4:53\nnet_resolver 1.2.3.4\n", text);
	assert_refused_at(f, load(f, more), "line 11");
	assert_err_has(f, "too many DNS servers");
	snprintf(more, sizeof(more), "%snet_resolver 1.2.3.4:535\n", text);
	assert_refused_at(f, load(f, more), "line 10");
}

/* Secret headers and their CA file: root's policy alone, as paths. */
static void test_secret_header(void **state)
{
	struct fx *f = *state;
	assert_int_equal(load(f, "secret_header api.example.com:Authorization=@/etc/vmrun/api-token\n"
				 "secret_header b.example:X-Key=@/k\nsecret_ca /etc/vmrun/ca.pem\n"), 0);
	assert_int_equal(f->p.net.nsecret, 2);
	assert_string_equal(f->p.net.secret[0], "api.example.com:Authorization=@/etc/vmrun/api-token");
	assert_string_equal(f->p.net.secret[1], "b.example:X-Key=@/k");
	assert_string_equal(f->p.net.secret_ca, "/etc/vmrun/ca.pem");
	const char *bad[] = { "api.example.com:X=@relative", "api.example.com=@/k", "api.example.com:X/k",
			      "api.example.com:X=/k" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[128];
		snprintf(text, sizeof(text), "secret_header %s\n", bad[i]);
		assert_refused_at(f, load(f, text), "line 1");
		assert_err_has(f, "not HOST:HEADER=@/ABSOLUTE/FILE");
	}
	assert_refused_at(f, load(f, "secret_ca relative.pem\n"), "line 1");
	assert_refused_at(f, load_lower(f, "secret_header a.example:X=@/k\n"), "line 1");
	assert_err_has(f, "only root's policy may name a secret");
	assert_refused_at(f, load_lower(f, "secret_ca /etc/ssl/ca.pem\n"), "line 1");
	char nine[1024] = "";
	for (int i = 0; i < 9; i++)
		strcat(nine, "secret_header a.example:X=@/k\n");
	assert_refused_at(f, load(f, nine), "line 9");
	assert_err_has(f, "more than 8 secret headers");
}

/* The proxy's caps: lowered by anyone, raised by root's file only. */
static void test_net_caps(void **state)
{
	struct fx *f = *state;
	assert_int_equal(load_lower(f, "net_tunnels 8\nnet_max_up 1000\nnet_max_down 2000\nnet_idle 5\n"), 0);
	assert_int_equal(f->p.net.tunnels, 8);
	assert_int_equal(f->p.net.max_up, 1000);
	assert_int_equal(f->p.net.max_down, 2000);
	assert_int_equal(f->p.net.idle_s, 5);
	const char *raises[] = { "net_tunnels 17\n", "net_max_up 67108865\n", "net_max_down 1073741825\n",
				 "net_idle 31\n" };
	for (size_t i = 0; i < sizeof(raises) / sizeof(raises[0]); i++) {
		assert_refused_at(f, load_lower(f, raises[i]), "line 1");
		assert_err_has(f, "only root's policy may");
	}
	assert_int_equal(load(f, "net_tunnels 1024\nnet_idle 86400\nnet_max_down 4294967296\n"), 0);
	assert_int_equal(f->p.net.tunnels, 1024);
	assert_int_equal(f->p.net.idle_s, 86400);
	assert_int_equal(f->p.net.max_down, 4294967296ull);
	assert_refused_at(f, load(f, "net_tunnels 1025\n"), "line 1");
	assert_refused_at(f, load(f, "net_idle 0\n"), "line 1");
	assert_refused_at(f, load(f, "net_idle 86401\n"), "line 1");
	assert_refused_at(f, load(f, "net_max_up 9223372036854775808\n"), "line 1");
	/* a caller's file lowers what root's raised, and no further up */
	assert_int_equal(load(f, "net_tunnels 100\n"), 0);
	assert_int_equal(apply_more(f, "net_tunnels 50\n", POLICY_LOWER_ONLY), 0);
	assert_int_equal(f->p.net.tunnels, 50);
	assert_refused_at(f, apply_more(f, "net_tunnels 51\n", POLICY_LOWER_ONLY), "more line 1");
	assert_int_equal(f->p.net.tunnels, 50);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_defaults_and_manifest, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_file_replaces_allowlist, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_bad_lines, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_long_line_refused_not_split, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_nul_byte_refused, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_long_manifest_line_refused, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_caller_policy_only_lowers, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_caller_policy_keeps_quota, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_net_defaults, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_net_ceiling_replaces_by_kind, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_net_ceiling_lower_only, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_net_ceiling_none, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_allow_net_accumulates, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_net_bad_rules, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_net_resolver, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_net_caps, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_secret_header, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests_name("policy", tests, NULL, NULL);
}
