/* The run-to-proxy contract (host/run/proxy_wire.c): the configuration
 * records the proxy reads (proxy_config_line), what the run writes
 * (proxy_config_emit) read back as the same configuration, and the check
 * of the audit records the run gets back from a proxy that handled guest
 * input (proxy_audit_valid). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy_wire.h"

static char err[256];

static int line(struct proxy_config *c, const char *text)
{
	err[0] = '\0';
	return proxy_config_line(c, text, err, sizeof(err));
}

static void assert_refused(struct proxy_config *c, const char *text, const char *part)
{
	if (line(c, text) != -1)
		fail_msg("record \"%s\" taken", text);
	if (!strstr(err, part) || strchr(err, '\n'))
		fail_msg("record \"%s\": error \"%s\" is not one line with \"%s\"", text, err, part);
}

/* What emit wrote, line by line; fail_at: the call that fails (0: none). */
struct lines {
	char text[PROXY_RULES_MAX + 16][PROXY_LINE_MAX];
	unsigned n, fail_at;
};

static int collect(void *ctx, const char *text)
{
	struct lines *l = ctx;
	assert_true(l->n < sizeof(l->text) / sizeof(l->text[0]));
	assert_true(strlen(text) < PROXY_LINE_MAX);
	if (l->fail_at && l->n + 1 == l->fail_at)
		return -1;
	snprintf(l->text[l->n++], PROXY_LINE_MAX, "%s", text);
	return 0;
}

/* Every line of l into d, from proxy_config_init; the last must be "end"
 * and the only one. */
static void read_back(const struct lines *l, struct proxy_config *d)
{
	proxy_config_init(d);
	for (unsigned i = 0; i < l->n; i++) {
		int rc = proxy_config_line(d, l->text[i], err, sizeof(err));
		if (rc != (i + 1 == l->n ? 1 : 0))
			fail_msg("record %u \"%s\": %d (%s)", i, l->text[i], rc, err);
	}
}

static bool has_line(const struct lines *l, const char *prefix)
{
	for (unsigned i = 0; i < l->n; i++)
		if (!strncmp(l->text[i], prefix, strlen(prefix)))
			return true;
	return false;
}

static void config_records(void **state)
{
	(void)state;
	struct proxy_config c;
	proxy_config_init(&c);
	assert_int_equal(c.nrules, 0);
	assert_int_equal(c.caps.tunnels, PROXY_DEFAULT_TUNNELS);
	assert_int_equal(c.caps.idle_ms, PROXY_DEFAULT_IDLE_MS);
	assert_string_equal(c.dns, "");
	assert_false(c.set_ids);
	assert_int_equal(line(&c, "rule-host *.Example.com:8443"), 0);
	assert_int_equal(line(&c, "rule-addr [fd00::/8]:8080"), 0);
	assert_int_equal(c.nrules, 2);
	assert_int_equal(c.rules[0].kind, NET_RULE_SUFFIX);
	assert_string_equal(c.rules[0].host, "example.com");
	assert_int_equal(c.rules[0].port, 8443);
	assert_int_equal(c.rules[1].kind, NET_RULE_ADDR);
	assert_int_equal(c.rules[1].prefix, 8);
	assert_int_equal(line(&c, "tunnels 3"), 0);
	assert_int_equal(c.caps.tunnels, 3);
	assert_int_equal(line(&c, "max-up 1000"), 0);
	assert_int_equal(line(&c, "max-down 9223372036854775807"), 0);
	assert_int_equal(c.caps.max_down, UINT64_MAX / 2);
	assert_int_equal(line(&c, "idle-ms 86400000"), 0);
	assert_int_equal(line(&c, "connect-ms 600000"), 0);
	assert_int_equal(c.caps.connect_ms, 600000);
	assert_int_equal(line(&c, "ids 2000001 2000002"), 0);
	assert_true(c.set_ids);
	assert_int_equal(c.uid, 2000001);
	assert_int_equal(c.gid, 2000002);
	assert_int_equal(line(&c, "end"), 1);
	/* refusals, each leaving c as it was */
	assert_refused(&c, "tunnels 0", "bad tunnels \"0\"");
	assert_refused(&c, "tunnels 1025", "bad tunnels");
	assert_refused(&c, "tunnels 3x", "bad tunnels");
	assert_refused(&c, "tunnels +3", "bad tunnels");
	assert_refused(&c, "max-up -1", "bad max-up");
	assert_refused(&c, "max-up 9223372036854775808", "bad max-up");
	assert_refused(&c, "idle-ms 86400001", "bad idle-ms");
	assert_refused(&c, "connect-ms 600001", "bad connect-ms");
	assert_int_equal(c.caps.tunnels, 3);
	assert_refused(&c, "rule-host 10.0.0.1", "is an IP address");
	assert_refused(&c, "rule-addr example.com", "not an IP address");
	assert_int_equal(c.nrules, 2);
	assert_refused(&c, "bogus 1", "unknown record \"bogus\"");
	assert_refused(&c, "end ", "unknown record");
	assert_refused(&c, "tunnels", "no value");
	assert_refused(&c, "", "no value");
	/* PROXY_RULES_MAX rules at most */
	for (unsigned i = c.nrules; i < PROXY_RULES_MAX; i++)
		assert_int_equal(line(&c, "rule-host a.test"), 0);
	assert_refused(&c, "rule-host a.test", "more than 64 network rules");
	assert_int_equal(c.nrules, PROXY_RULES_MAX);
}

/* "dns": c-ares's "IP[:PORT],..." characters only, and what fits. */
static void dns_record(void **state)
{
	(void)state;
	struct proxy_config c;
	proxy_config_init(&c);
	assert_int_equal(line(&c, "dns 1.2.3.4,[fd00::1]:53"), 0);
	assert_string_equal(c.dns, "1.2.3.4,[fd00::1]:53");
	assert_int_equal(line(&c, "dns 9.9.9.9:5353"), 0);   /* the last one counts */
	assert_string_equal(c.dns, "9.9.9.9:5353");
	assert_int_equal(line(&c, "dns [FD00:AB::1]"), 0);
	assert_string_equal(c.dns, "[FD00:AB::1]");
	const char *bad[] = { "dns dns.google", "dns 1.2.3.4 5.6.7.8", "dns 1.2.3.4;reboot", "dns 1.2.3.4/8",
			      "dns -1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_refused(&c, bad[i], "bad dns");
	assert_int_equal(line(&c, "dns 1.2.3.4\n"), -1);
	assert_int_equal(line(&c, "dns 1.2.3.4\t"), -1);
	assert_string_equal(c.dns, "[FD00:AB::1]");
	/* 127 bytes fit; 128 do not */
	char text[4 + 129];
	memcpy(text, "dns ", 4);
	memset(text + 4, '1', 127);
	text[4 + 127] = '\0';
	assert_int_equal(line(&c, text), 0);
	assert_int_equal(strlen(c.dns), 127);
	text[4 + 127] = '1';
	text[4 + 128] = '\0';
	assert_refused(&c, text, "bad dns");
	assert_int_equal(strlen(c.dns), 127);
}

/* "ids UID GID": both above 0 and below (uid_t)-1, nothing else. */
static void ids_record(void **state)
{
	(void)state;
	struct proxy_config c;
	proxy_config_init(&c);
	const char *bad[] = { "ids 0 1000", "ids 1000 0", "ids 0 0", "ids 1000", "ids 1000 1000 1000", "ids 1000 1000x",
			      "ids -1 1000", "ids 4294967295 1000", "ids 1000 4294967295", "ids x y" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_refused(&c, bad[i], "bad ids");
	assert_false(c.set_ids);
	assert_int_equal(line(&c, "ids 4294967294 1"), 0);
	assert_true(c.set_ids);
	assert_int_equal(c.uid, 4294967294u);
	assert_int_equal(c.gid, 1);
}

/* What emit writes, read back, is the same configuration: rules of each
 * kind, every cap, the DNS servers and the ids. */
static void emit_round_trip(void **state)
{
	(void)state;
	struct proxy_config c, d;
	static struct lines l;
	proxy_config_init(&c);
	const char *rules[] = { "rule-host Example.com", "rule-host *.pypi.org:8443", "rule-addr 10.0.0.0/8:3128",
				"rule-addr [fd00::/8]:8080", "rule-addr 2001:db8::/32", "rule-addr 192.168.1.7" };
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		assert_int_equal(line(&c, rules[i]), 0);
	c.caps = (struct proxy_caps){ .tunnels = 5, .max_up = 123456789012ull, .max_down = UINT64_MAX / 2,
				      .idle_ms = 1500, .connect_ms = 2500 };
	snprintf(c.dns, sizeof(c.dns), "1.2.3.4,[fd00::1]:53");
	c.set_ids = true;
	c.uid = 2000001;
	c.gid = 2000003;
	l.n = 0;
	assert_int_equal(proxy_config_emit(&c, collect, &l), 0);
	assert_string_equal(l.text[l.n - 1], "end");
	assert_string_equal(l.text[0], "rule-host example.com");
	assert_string_equal(l.text[1], "rule-host *.pypi.org:8443");
	assert_true(has_line(&l, "dns 1.2.3.4,[fd00::1]:53"));
	assert_true(has_line(&l, "ids 2000001 2000003"));
	read_back(&l, &d);
	assert_int_equal(d.nrules, c.nrules);
	assert_memory_equal(d.rules, c.rules, sizeof(c.rules[0]) * c.nrules);
	assert_int_equal(d.caps.tunnels, 5);
	assert_int_equal(d.caps.max_up, 123456789012ull);
	assert_int_equal(d.caps.max_down, UINT64_MAX / 2);
	assert_int_equal(d.caps.idle_ms, 1500);
	assert_int_equal(d.caps.connect_ms, 2500);
	assert_string_equal(d.dns, "1.2.3.4,[fd00::1]:53");
	assert_true(d.set_ids);
	assert_int_equal(d.uid, 2000001);
	assert_int_equal(d.gid, 2000003);
	/* no DNS servers, no ids: no such records, and none read back */
	c.dns[0] = '\0';
	c.set_ids = false;
	l.n = 0;
	assert_int_equal(proxy_config_emit(&c, collect, &l), 0);
	assert_false(has_line(&l, "dns"));
	assert_false(has_line(&l, "ids"));
	read_back(&l, &d);
	assert_string_equal(d.dns, "");
	assert_false(d.set_ids);
	assert_int_equal(d.nrules, c.nrules);
	/* over a SOCK_SEQPACKET socket, as the run sends it */
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	l.n = 0;
	assert_int_equal(proxy_config_emit(&c, collect, &l), 0);
	for (unsigned i = 0; i < l.n; i++)
		assert_int_equal(send(sv[0], l.text[i], strlen(l.text[i]), 0), (ssize_t)strlen(l.text[i]));
	proxy_config_init(&d);
	char text[PROXY_LINE_MAX + 1];
	ssize_t n;
	int rc = 0;
	while (rc == 0 && (n = recv(sv[1], text, PROXY_LINE_MAX, 0)) > 0) {
		text[n] = '\0';
		rc = proxy_config_line(&d, text, err, sizeof(err));
	}
	assert_int_equal(rc, 1);
	assert_memory_equal(d.rules, c.rules, sizeof(c.rules[0]) * c.nrules);
	close(sv[0]);
	close(sv[1]);
	/* an emit that fails stops it, and fails it */
	for (unsigned at = 1; at <= 3; at++) {
		l.n = 0;
		l.fail_at = at;
		assert_int_equal(proxy_config_emit(&c, collect, &l), -1);
		assert_int_equal(l.n, at - 1);
	}
	l.fail_at = 0;
}

/* An audit record as a well-behaved proxy writes it. */
static struct proxy_audit good(void)
{
	struct proxy_audit a;
	memset(&a, 0, sizeof(a));
	snprintf(a.host, sizeof(a.host), "example.com");
	snprintf(a.method, sizeof(a.method), "CONNECT");
	snprintf(a.why, sizeof(a.why), "connect: Connection refused");
	snprintf(a.end, sizeof(a.end), "dial_failed");
	a.port = 443;
	a.allowed = 1;
	a.has_addr = 1;
	return a;
}

static void audit_valid(void **state)
{
	(void)state;
	struct proxy_audit a = good();
	assert_true(proxy_audit_valid(&a));
	memset(&a, 0, sizeof(a));   /* all empty: valid too */
	assert_true(proxy_audit_valid(&a));
	/* a host that fills its array: no NUL */
	a = good();
	memset(a.host, 'a', sizeof(a.host));
	assert_false(proxy_audit_valid(&a));
	a.host[sizeof(a.host) - 1] = '\0';   /* the longest that is terminated */
	assert_true(proxy_audit_valid(&a));
	a = good();
	memset(a.method, 'G', sizeof(a.method));
	assert_false(proxy_audit_valid(&a));
	a = good();
	memset(a.why, 'w', sizeof(a.why));
	assert_false(proxy_audit_valid(&a));
	a = good();
	memset(a.end, 'e', sizeof(a.end));
	assert_false(proxy_audit_valid(&a));
	/* what is not printable ASCII, in any string */
	static const char bad[] = { '\n', '\r', '\x1b', '\x7f', '\x01', (char)0x80, (char)0xc3 };
	for (size_t i = 0; i < sizeof(bad); i++) {
		a = good();
		a.host[3] = bad[i];
		assert_false(proxy_audit_valid(&a));
		a = good();
		a.why[0] = bad[i];
		assert_false(proxy_audit_valid(&a));
		a = good();
		a.method[2] = bad[i];
		assert_false(proxy_audit_valid(&a));
		a = good();
		a.end[1] = bad[i];
		assert_false(proxy_audit_valid(&a));
	}
	/* past a string's NUL, anything: it is never read */
	a = good();
	a.why[sizeof(a.why) - 1] = '\n';
	assert_true(proxy_audit_valid(&a));
	/* flags 0 or 1, zero 0 */
	a = good();
	a.allowed = 2;
	assert_false(proxy_audit_valid(&a));
	a = good();
	a.has_addr = 2;
	assert_false(proxy_audit_valid(&a));
	a = good();
	a.allowed = 0xff;
	assert_false(proxy_audit_valid(&a));
	a = good();
	a.zero = 1;
	assert_false(proxy_audit_valid(&a));
	a.zero = 0x80000000u;
	assert_false(proxy_audit_valid(&a));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(config_records), cmocka_unit_test(dns_record),  cmocka_unit_test(ids_record),
		cmocka_unit_test(emit_round_trip), cmocka_unit_test(audit_valid),
	};
	return cmocka_run_group_tests_name("proxy_wire", tests, NULL, NULL);
}
