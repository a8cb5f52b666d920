/* The proxy's check before connect() (host/proxy/dial_guard.h), on
 * socket addresses as the dial builds them and as a confused caller
 * might: loopback, link-local, "this host" and the host's own
 * addresses refused in every spelling; public addresses, and private
 * ones an address rule may open, dialed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "dial_guard.h"
#include "netpolicy.h"

/* text as the socket address its family takes: IPv4 literals as
 * AF_INET, anything with a colon as AF_INET6 (so "::ffff:127.0.0.1" is
 * the AF_INET6 spelling a confused dial could use). */
static socklen_t sockaddr_of(const char *text, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (strchr(text, ':')) {
		struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons(443);
		assert_int_equal(inet_pton(AF_INET6, text, &v6->sin6_addr), 1);
		return sizeof(*v6);
	}
	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	v4->sin_family = AF_INET;
	v4->sin_port = htons(443);
	assert_int_equal(inet_pton(AF_INET, text, &v4->sin_addr), 1);
	return sizeof(*v4);
}

static void guard_judges(void **state)
{
	(void)state;
	uint8_t self[2][16];
	assert_true(net_ip_literal("198.51.100.7", self[0]));   /* the host's eth0, say */
	assert_true(net_ip_literal("2001:db8:5::7", self[1]));
	struct dial_guard g = { (const uint8_t (*)[16])self, 2 };
	const struct {
		const char *addr, *why;   /* NULL: dialed */
	} cases[] = {
		{ "127.0.0.1", "loopback" },                  { "127.255.1.2", "loopback" },
		{ "::1", "loopback" },                        { "::ffff:127.0.0.1", "loopback" },
		{ "::127.0.0.1", "loopback" },                { "169.254.169.254", "link-local" },
		{ "::ffff:169.254.169.254", "link-local" },   { "fe80::1", "link-local" },
		{ "febf::1", "link-local" },                  { "0.0.0.0", "this host" },
		{ "::", "this host" },                        { "::ffff:0.0.0.0", "this host" },
		{ "198.51.100.7", "own address" },            { "::ffff:198.51.100.7", "own address" },
		{ "2001:db8:5::7", "own address" },           { "8.8.8.8", NULL },
		{ "10.9.0.2", NULL },                         { "198.51.100.8", NULL },
		{ "2606:4700::1111", NULL },                  { "fec0::1", NULL },
		{ "169.253.255.255", NULL },                  { "128.0.0.1", NULL },
	};
	int wrong = 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sockaddr_of(cases[i].addr, &ss);
		char why[160];
		const char *no = dial_guard_refusal(&g, (const struct sockaddr *)&ss, sl, why, sizeof(why));
		if ((!cases[i].why && no) || (cases[i].why && (!no || !strstr(no, cases[i].why)))) {
			print_error("%s: \"%s\", want \"%s\"\n", cases[i].addr, no ? no : "(dialed)",
				    cases[i].why ? cases[i].why : "(dialed)");
			wrong++;
		}
	}
	assert_int_equal(wrong, 0);
}

/* Not a whole IPv4 or IPv6 address: refused, never read past len. */
static void guard_odd_addresses(void **state)
{
	(void)state;
	struct dial_guard g = { NULL, 0 };
	char why[160];
	struct sockaddr_un un = { .sun_family = AF_UNIX, .sun_path = "/run/vmrund.sock" };
	assert_non_null(dial_guard_refusal(&g, (const struct sockaddr *)&un, sizeof(un), why, sizeof(why)));
	struct sockaddr_storage ss;
	sockaddr_of("8.8.8.8", &ss);
	assert_non_null(dial_guard_refusal(&g, (const struct sockaddr *)&ss, sizeof(struct sockaddr_in) - 1, why,
					   sizeof(why)));
	sockaddr_of("2606:4700::1111", &ss);
	assert_non_null(dial_guard_refusal(&g, (const struct sockaddr *)&ss, sizeof(struct sockaddr_in6) - 1, why,
					   sizeof(why)));
	assert_null(dial_guard_refusal(&g, (const struct sockaddr *)&ss, sizeof(struct sockaddr_in6), why, sizeof(why)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(guard_judges),
		cmocka_unit_test(guard_odd_addresses),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
