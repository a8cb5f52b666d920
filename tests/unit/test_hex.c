/* Hex and SHA-256 sums (host/run/hex.c): bytes written as lowercase hex,
 * FIPS 180-2's test vectors, and what counts as a sum. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "hex.h"

static void hex(void **state)
{
	(void)state;
	char out[9];
	hex_of("\x00\x01\xab\xff", 4, out);
	assert_string_equal(out, "0001abff");
	hex_of("", 0, out);
	assert_string_equal(out, "");
}

static void sums(void **state)
{
	(void)state;
	char out[65];
	sha256_hex("abc", 3, out);
	assert_string_equal(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	sha256_hex(NULL, 0, out);
	assert_string_equal(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	assert_true(hex_is_sha256(out));
}

static void is_sum(void **state)
{
	(void)state;
	char s[66];
	memset(s, 'a', 64);
	s[64] = '\0';
	assert_true(hex_is_sha256(s));
	s[10] = 'A';   /* uppercase: not as written */
	assert_false(hex_is_sha256(s));
	s[10] = 'g';
	assert_false(hex_is_sha256(s));
	s[10] = 'a';
	s[64] = 'a';
	s[65] = '\0';   /* 65 digits */
	assert_false(hex_is_sha256(s));
	s[63] = '\0';   /* 63 */
	assert_false(hex_is_sha256(s));
	assert_false(hex_is_sha256(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hex),
		cmocka_unit_test(sums),
		cmocka_unit_test(is_sum),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
