/* Versions and node-semver's selectors (host/vmrund/semver.c), as Piston's
 * clients name a runtime's version: exact, partial, wildcards, the
 * comparators, caret, tilde, hyphen ranges, alternatives, four-part
 * versions, and what is no version or no selector. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "semver.h"

static void versions(void **state)
{
	(void)state;
	static const struct {
		const char *v, *sel;
		bool want;
	} cases[] = {
		{ "3.11.2", "3.11.2", true },
		{ "3.11.2", "3.11.3", false },
		{ "3.11.2", "3.11", true },
		{ "3.11.2", "3.10", false },
		{ "3.11.2", "3", true },
		{ "3.11.2", "3.x", true },
		{ "3.11.2", "3.11.x", true },
		{ "3.11.2", "3.X.X", true },
		{ "3.11.2", "*", true },
		{ "3.11.2", "x", true },
		{ "3.11.2", "", true },
		{ "3.11.2", "4", false },
		{ "3.11.2", ">=3.10", true },
		{ "3.11.2", ">=3.12", false },
		{ "3.11.2", ">3.11", false },
		{ "3.12.0", ">3.11", true },
		{ "3.11.2", ">3.11.1", true },
		{ "3.11.2", "<3.11.2", false },
		{ "3.11.2", "<3.12", true },
		{ "3.11.2", "<=3.11", true },
		{ "3.12.0", "<=3.11", false },
		{ "3.11.2", "=3.11.2", true },
		{ "3.11.2", "v3.11.2", true },
		{ "3.11.2", ">=3.10 <4", true },
		{ "4.0.0", ">=3.10 <4", false },
		{ "3.11.2", ">= 3.10 < 4", true },
		{ "3.11.2", "^3.9", true },
		{ "4.0.0", "^3.9", false },
		{ "3.8.9", "^3.9", false },
		{ "0.2.5", "^0.2.3", true },
		{ "0.3.0", "^0.2.3", false },
		{ "0.0.3", "^0.0.3", true },
		{ "0.0.4", "^0.0.3", false },
		{ "0.1.0", "^0.0", false },
		{ "0.0.9", "^0.0", true },
		{ "3.11.2", "~3.11", true },
		{ "3.12.0", "~3.11", false },
		{ "3.11.9", "~3.11.2", true },
		{ "3.11.1", "~3.11.2", false },
		{ "3.99.0", "~3", true },
		{ "3.11.2", "~>3.11", true },
		{ "3.11.2", "3.9 - 3.11", true },
		{ "3.12.0", "3.9 - 3.11", false },
		{ "3.9.0", "3.9.0 - 3.11.1", true },
		{ "3.11.2", "3.9.0 - 3.11.1", false },
		{ "3.11.2", "2 || 3", true },
		{ "3.11.2", "2 || 4", false },
		{ "3.11.2", "2 ||", true },
		{ "3.11.2", "1 || 3 garbage", false },
		{ "3.11.2", "3.11.2-beta", false },
		{ "3.11.2", ">=", false },
		{ "3.11.2", "3..1", false },
		{ "3.11.2", "<*", false },
		{ "3.11.2", ">=*", true },
		/* four parts: the fourth breaks ties */
		{ "17.0.21.1", "17", true },
		{ "17.0.21.1", "17.0.21", true },
		{ "17.0.21.1", "17.0.21.1", true },
		{ "17.0.21.1", "17.0.21.2", false },
		{ "17.0.21.1", ">17.0.21", false },
		{ "17.0.21.1", ">17.0.21.0", true },
		{ "17.0.21.1", "^17", true },
		{ "17.0.21.1", "<=17.0.21", true },
		{ "17.0.21.1", "17.0.21.1.1", false },
		/* short versions: missing parts are 0 */
		{ "5.2", "5.2.0", true },
		{ "5", ">=4.9", true },
		/* not versions */
		{ "abc", "*", false },
		{ "1.2.3-rc1", "*", false },
		{ "", "*", false },
		{ "1234567890123456", "*", false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (semver_match(cases[i].v, cases[i].sel) != cases[i].want)
			fail_msg("%s against \"%s\": wanted %s", cases[i].v, cases[i].sel,
				 cases[i].want ? "a match" : "none");
}

/* Parse and order, as the newest matching runtime is chosen. */
static void order(void **state)
{
	(void)state;
	struct semver a, b;
	assert_true(semver_parse("3.9.2", &a));
	assert_true(semver_parse("3.11.2", &b));
	assert_int_equal(semver_cmp(&a, &b), -1);
	assert_int_equal(semver_cmp(&b, &a), 1);
	assert_true(semver_parse("3.11.2.0", &a));
	assert_int_equal(semver_cmp(&a, &b), 0);
	assert_false(semver_parse("3.11.2-rc1", &a));
	assert_false(semver_parse("", &a));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(versions),
		cmocka_unit_test(order),
	};
	return cmocka_run_group_tests_name("semver", tests, NULL, NULL);
}
