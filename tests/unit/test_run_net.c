/* A run's network plan (run_net_plan in host/run/run_net.c): the policy's
 * allow_net rules, then the request's --allow-net and --allow-net-addr,
 * each within the policy's network ceiling, and the policy's caps and DNS
 * servers, into the proxy's configuration. Pure: a policy from a tiny
 * manifest and policy text in memory, no proxy started.
 *
 * And one test that does start one: the real vmrun-proxy (next to this
 * binary, build/bin/), through run_net_start and run_net_finish, made to
 * fail after it has jailed itself, to show that its error line reaches
 * the result and does not kill it (issue 38, finding 7). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_net.h"

struct fx {
	struct policy p;
	struct run_spec spec;
	struct run_request req;
	struct proxy_config c;
	char err[512];
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	policy_free(&f->p);
	run_spec_free(&f->spec);
	free(f);
	return 0;
}

/* f's policy: the built-in one over a one-program manifest, then text
 * (NULL: none) as root's file. */
static void policy(struct fx *f, const char *text)
{
	static const char manifest[] = "/bin/sh\n";
	policy_free(&f->p);
	FILE *m = fmemopen((void *)manifest, sizeof(manifest) - 1, "r");
	assert_non_null(m);
	assert_int_equal(policy_load(&f->p, m, "manifest", f->err, sizeof(f->err)), 0);
	fclose(m);
	if (!text)
		return;
	FILE *t = fmemopen((void *)text, strlen(text), "r");
	assert_non_null(t);
	if (policy_apply(&f->p, t, "policy", POLICY_MAY_RAISE, f->err, sizeof(f->err)) != 0)
		fail_msg("policy refused: %s", f->err);
	fclose(t);
}

/* run_net_plan of f's policy and a request with these rules. */
static int plan(struct fx *f, const char *const *net, unsigned nnet, const char *const *addr, unsigned naddr)
{
	/* the rules as a front end parses them into the spec (vmrun's
	 * options, test_cli.c; the API's fields, test_run_spec.c) */
	run_spec_free(&f->spec);
	for (unsigned i = 0; i < nnet + naddr; i++) {
		struct net_rule r;
		assert_int_equal(net_rule_parse(i < nnet ? net[i] : addr[i - nnet], i >= nnet, &r, f->err, sizeof(f->err)),
				 0);
		assert_int_equal(run_spec_add_rule(&f->spec, &r), 0);
	}
	f->req = (struct run_request){ .spec = &f->spec };
	proxy_config_init(&f->c);
	f->err[0] = '\0';
	return run_net_plan(&f->p, &f->req, &f->c, f->err, sizeof(f->err));
}

/* The i-th rule of the plan, as it would be written again. */
static const char *rule(struct fx *f, unsigned i)
{
	static char text[NET_HOST_MAX + 64];
	assert_true(i < f->c.nrules);
	net_rule_format(&f->c.rules[i], text, sizeof(text));
	return text;
}

static void assert_err(struct fx *f, int rc, const char *want)
{
	assert_int_equal(rc, -1);
	assert_string_equal(f->err, want);
}

/* No rule anywhere: no network, and nothing in the configuration. */
static void no_rules_no_network(void **state)
{
	struct fx *f = *state;
	policy(f, NULL);
	assert_int_equal(plan(f, NULL, 0, NULL, 0), 0);
	assert_int_equal(f->c.nrules, 0);
	/* a ceiling alone grants nothing */
	policy(f, "net_ceiling example.com\nnet_ceiling_addr 10.0.0.0/8\nnet_tunnels 3\n");
	assert_int_equal(plan(f, NULL, 0, NULL, 0), 0);
	assert_int_equal(f->c.nrules, 0);
}

/* The policy's grants first (in its order, names and addresses mixed),
 * then --allow-net, then --allow-net-addr; names normalized. */
static void rules_merged_in_order(void **state)
{
	struct fx *f = *state;
	policy(f, "net_ceiling_addr 10.0.0.0/8\nnet_ceiling_addr 192.168.0.0/16:8080\n"
		  "allow_net a.test\nallow_net_addr 10.0.0.0/8\nallow_net *.z.test:8443\n");
	static const char *const net[] = { "B.Test:8443", "*.c.test" };
	static const char *const addr[] = { "192.168.1.0/24:8080" };
	assert_int_equal(plan(f, net, 2, addr, 1), 1);
	assert_int_equal(f->c.nrules, 6);
	assert_string_equal(rule(f, 0), "a.test");
	assert_string_equal(rule(f, 1), "10.0.0.0/8");
	assert_string_equal(rule(f, 2), "*.z.test:8443");
	assert_string_equal(rule(f, 3), "b.test:8443");
	assert_string_equal(rule(f, 4), "*.c.test");
	assert_string_equal(rule(f, 5), "192.168.1.0/24:8080");
	assert_int_equal(f->c.rules[3].kind, NET_RULE_HOST);
	assert_int_equal(f->c.rules[4].kind, NET_RULE_SUFFIX);
	assert_int_equal(f->c.rules[5].kind, NET_RULE_ADDR);
	/* the policy's grants alone are network too */
	assert_int_equal(plan(f, NULL, 0, NULL, 0), 1);
	assert_int_equal(f->c.nrules, 3);
	/* the request's alone, under the default ceiling (any host name) */
	policy(f, NULL);
	static const char *const one[] = { "example.com:8080" };
	assert_int_equal(plan(f, one, 1, NULL, 0), 1);
	assert_int_equal(f->c.nrules, 1);
	assert_string_equal(rule(f, 0), "example.com:8080");
}

/* A rule beyond the ceiling, from the spec or the policy's own grants,
 * refuses the plan, naming it as written again (normalized). */
static void beyond_ceiling(void **state)
{
	struct fx *f = *state;
	policy(f, "net_ceiling example.com\n");
	static const char *const other[] = { "example.com", "Other.COM" };
	assert_err(f, plan(f, other, 2, NULL, 0), "--allow-net other.com: beyond the policy's network ceiling");
	static const char *const port[] = { "example.com:22" };
	assert_err(f, plan(f, port, 1, NULL, 0), "--allow-net example.com:22: beyond the policy's network ceiling");
	/* the default ceiling has no address range */
	policy(f, NULL);
	static const char *const priv[] = { "10.0.0.0/8" };
	assert_err(f, plan(f, NULL, 0, priv, 1), "--allow-net-addr 10.0.0.0/8: beyond the policy's network ceiling");
	/* within root's range, but wider than it */
	policy(f, "net_ceiling_addr 10.1.0.0/16\n");
	assert_err(f, plan(f, NULL, 0, priv, 1), "--allow-net-addr 10.0.0.0/8: beyond the policy's network ceiling");
	static const char *const inside[] = { "10.1.2.3" };
	assert_int_equal(plan(f, NULL, 0, inside, 1), 1);
	/* "none": not even a name */
	policy(f, "net_ceiling none\n");
	static const char *const any[] = { "example.com" };
	assert_err(f, plan(f, any, 1, NULL, 0), "--allow-net example.com: beyond the policy's network ceiling");
	/* a policy granting past its own ceiling */
	policy(f, "net_ceiling example.com\nallow_net Other.com:8080\n");
	assert_err(f, plan(f, NULL, 0, NULL, 0), "policy allow_net other.com:8080: beyond the policy's network ceiling");
}

/* The caps and DNS servers come from the policy. */
static void caps_and_dns_from_policy(void **state)
{
	struct fx *f = *state;
	static const char *const one[] = { "a.test" };
	policy(f, NULL);
	assert_int_equal(plan(f, one, 1, NULL, 0), 1);
	assert_int_equal(f->c.caps.tunnels, 16);
	assert_int_equal(f->c.caps.max_up, 64u << 20);
	assert_int_equal(f->c.caps.max_down, 1u << 30);
	assert_int_equal(f->c.caps.idle_ms, 30000);
	assert_int_equal(f->c.caps.connect_ms, PROXY_DEFAULT_CONNECT_MS);
	assert_string_equal(f->c.dns, "");
	assert_false(f->c.set_ids);
	policy(f, "net_tunnels 4\nnet_max_up 1000\nnet_max_down 2000\nnet_idle 7\nnet_resolver 1.2.3.4\n"
		  "net_resolver [fd00::1]:53\n");
	assert_int_equal(plan(f, one, 1, NULL, 0), 1);
	assert_int_equal(f->c.caps.tunnels, 4);
	assert_int_equal(f->c.caps.max_up, 1000);
	assert_int_equal(f->c.caps.max_down, 2000);
	assert_int_equal(f->c.caps.idle_ms, 7000);
	assert_int_equal(f->c.caps.connect_ms, PROXY_DEFAULT_CONNECT_MS);
	assert_string_equal(f->c.dns, "1.2.3.4,[fd00::1]:53");
	/* the largest the policy takes, in milliseconds */
	policy(f, "net_idle 86400\nnet_tunnels 1024\n");
	assert_int_equal(plan(f, one, 1, NULL, 0), 1);
	assert_int_equal(f->c.caps.idle_ms, 86400000);
	assert_int_equal(f->c.caps.tunnels, 1024);
}

/* PROXY_RULES_MAX rules in all, the policy's counted with the request's. */
static void too_many_rules(void **state)
{
	struct fx *f = *state;
	static char names[PROXY_RULES_MAX + 1][32];
	const char *net[PROXY_RULES_MAX + 1];
	for (unsigned i = 0; i <= PROXY_RULES_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "h%u.test", i);
		net[i] = names[i];
	}
	policy(f, NULL);
	assert_int_equal(plan(f, net, PROXY_RULES_MAX, NULL, 0), 1);
	assert_int_equal(f->c.nrules, PROXY_RULES_MAX);
	assert_string_equal(rule(f, PROXY_RULES_MAX - 1), "h63.test");
	/* a 65th cannot be asked: a spec holds 64 (test_run_spec.c, builders) */
	/* one of the policy's and 63 names fill it; one address more does not */
	policy(f, "net_ceiling_addr 10.0.0.0/8\nallow_net p.test\n");
	static const char *const addr[] = { "10.0.0.0/8" };
	assert_int_equal(plan(f, net, PROXY_RULES_MAX - 1, NULL, 0), 1);
	assert_int_equal(f->c.nrules, PROXY_RULES_MAX);
	assert_string_equal(rule(f, 0), "p.test");
	assert_err(f, plan(f, net, PROXY_RULES_MAX - 1, addr, 1), "--allow-net-addr: more than 64 network rules in all");
}

/* The proxy's late error line: the run reads the audit of a proxy that
 * cannot send it (its control socket shut both ways before it got
 * there), so the proxy's one line after its jail, "sending the audit:
 * ...", must reach the result, and the proxy exit rather than die of
 * SIGXFSZ on a file it may not write (RLIMIT_FSIZE 0). As root the
 * proxy gets a uid of its own; else it makes a user namespace. */
static void proxy_late_error_reported(void **state)
{
	(void)state;
	char self[PATH_MAX], vmm[PATH_MAX + 16], dir[] = "/tmp/vmrun-run-net-XXXXXX", uds[64], uids[64], err[512];
	ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(k > 0);
	self[k] = '\0';
	snprintf(vmm, sizeof(vmm), "%s/../bin/vmm", dirname(self));   /* the proxy is found next to vmm */
	assert_non_null(mkdtemp(dir));
	assert_int_equal(chmod(dir, 0755), 0);
	snprintf(uds, sizeof(uds), "%s/v.sock", dir);
	snprintf(uids, sizeof(uids), "%s/uids", dir);
	struct jail_spec js = { .run_dir = dir, .vmm = vmm, .uid_dir = uids };
	struct jail vj = { .uid = getuid(), .gid = getgid(), .uid_fd = -1 };
	struct proxy_config c;
	proxy_config_init(&c);
	assert_int_equal(proxy_config_line(&c, "rule-host example.test", err, sizeof(err)), 0);
	snprintf(c.dns, sizeof(c.dns), "127.0.0.1");
	struct run_net n = { .control = -1, .helper.uid_fd = -1 };
	if (run_net_start(&n, &c, -1, vmm, dir, uds, &js, &vj, err, sizeof(err)) < 0)
		fail_msg("run_net_start: %s", err);
	assert_int_equal(shutdown(n.control, SHUT_RDWR), 0);
	struct run_result r;
	memset(&r, 0, sizeof(r));
	run_net_finish(&n, &r);
	run_net_release(&n);
	print_message("the run's message: %s\n", r.message);
	assert_null(strstr(r.message, "SIGXFSZ"));
	assert_non_null(strstr(r.message, "vmrun-proxy: sending the audit: "));
	result_free(&r);
	char path[128];
	snprintf(path, sizeof(path), "%s/uids", dir);
	rmdir(path);
	assert_int_equal(rmdir(dir), 0);   /* nothing of the proxy's left behind */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(no_rules_no_network, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(rules_merged_in_order, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(beyond_ceiling, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(caps_and_dns_from_policy, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(too_many_rules, fx_setup, fx_teardown),
		cmocka_unit_test(proxy_late_error_reported),
	};
	return cmocka_run_group_tests_name("run_net", tests, NULL, NULL);
}
