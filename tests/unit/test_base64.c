/* Base64 (host/run/base64.c): RFC 4648's test vectors without line
 * breaks (the run spec's canonical form), and the same encoder with lines
 * (Ruby's encode64, Judge0's: 60 characters a line, the last ended too). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base64.h"

/* The encoding of the n bytes at p with line, checked against want and
 * its length. */
static void encodes(const void *p, size_t n, size_t line, const char *want)
{
	size_t len = 12345;
	char *e = base64_encode(p, n, line, &len);
	assert_non_null(e);
	assert_string_equal(e, want);
	assert_int_equal(len, strlen(want));
	free(e);
}

static void unbroken(void **state)
{
	(void)state;
	encodes("", 0, 0, "");
	encodes("f", 1, 0, "Zg==");
	encodes("fo", 2, 0, "Zm8=");
	encodes("foo", 3, 0, "Zm9v");
	encodes("foob", 4, 0, "Zm9vYg==");
	encodes("fooba", 5, 0, "Zm9vYmE=");
	encodes("foobar", 6, 0, "Zm9vYmFy");
	encodes("\xfb\xff\xbf", 3, 0, "+/+/");
	/* no line breaks however long */
	char in[100];
	memset(in, 'a', sizeof(in));
	char *e = base64_encode(in, sizeof(in), 0, NULL);
	assert_non_null(e);
	assert_int_equal(strlen(e), 136);
	assert_null(strchr(e, '\n'));
	free(e);
}

static void lines(void **state)
{
	(void)state;
	unsigned char in[100];
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (unsigned char)i;
	/* Ruby's: 60 characters (45 bytes) a line, the last line ended, none
	 * for nothing */
	encodes("", 0, 60, "");
	encodes("hello", 5, 60, "aGVsbG8=\n");
	encodes(in, 45, 60, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKiss\n");
	encodes(in, 100, 60,
		"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKiss\n"
		"LS4vMDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZ\n"
		"WltcXV5fYGFiYw==\n");
	/* any length: a break mid-quad, and one newline after a full last line */
	encodes("foobar", 6, 3, "Zm9\nvYm\nFy\n");
	encodes("foobar", 6, 4, "Zm9v\nYmFy\n");
	encodes("f", 1, 1, "Z\ng\n=\n=\n");
}

/* The strict reader: both alphabets when asked, padding optional but
 * whole, and what it refuses said apart. */
static void decodes(void **state)
{
	(void)state;
	unsigned char *out = NULL;
	size_t n = 0, at = 99;
	const struct { const char *in; bool url; const char *want; size_t len; } ok[] = {
		{ "aGk=", false, "hi", 2 }, { "aGk", false, "hi", 2 }, { "aGkK", false, "hi\n", 3 },
		{ "-_8=", true, "\xfb\xff", 2 }, { "+/8=", true, "\xfb\xff", 2 }, { "AA==", false, "\0", 1 },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(base64_decode(ok[i].in, strlen(ok[i].in), ok[i].url, 16, &out, &n, &at), BASE64_OK);
		assert_int_equal(n, ok[i].len);
		assert_memory_equal(out, ok[i].want, n);
		assert_int_equal(out[n], 0);
		free(out);
	}
	out = (unsigned char *)"untouched";
	assert_int_equal(base64_decode("", 0, false, 16, &out, &n, NULL), BASE64_OK);
	assert_null(out);
	assert_int_equal(n, 0);
	assert_int_equal(base64_decode("aGkK=", 5, false, 16, &out, &n, NULL), BASE64_LENGTH);
	assert_int_equal(base64_decode("a", 1, false, 16, &out, &n, NULL), BASE64_LENGTH);
	assert_int_equal(base64_decode("aG=k", 4, false, 16, &out, &n, &at), BASE64_CHAR);
	assert_int_equal(at, 2);
	assert_int_equal(base64_decode("-_8=", 4, false, 16, &out, &n, &at), BASE64_CHAR);
	assert_int_equal(at, 0);
	assert_int_equal(base64_decode("aGkK", 4, false, 2, &out, &n, NULL), BASE64_OVER);
	assert_int_equal(base64_value('_', false), -1);
	assert_int_equal(base64_value('_', true), 63);
	assert_int_equal(base64_value('/', false), 63);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(unbroken),
		cmocka_unit_test(lines),
		cmocka_unit_test(decodes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
