/* Guest console sink: byte cap with one marker line, "none", and no
 * symlink following when opening a file. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "console.h"

struct tmp {
	char dir[64];
	char path[128];
};

static int setup(void **state)
{
	struct tmp *t = calloc(1, sizeof(*t));
	if (!t)
		return -1;
	strcpy(t->dir, "/tmp/vmrun-console-XXXXXX");
	if (!mkdtemp(t->dir)) {
		free(t);
		return -1;
	}
	snprintf(t->path, sizeof(t->path), "%s/out", t->dir);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct tmp *t = *state;
	char p[160];
	static const char *names[] = { "out", "target", "link" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", t->dir, names[i]);
		unlink(p);
	}
	rmdir(t->dir);
	free(t);
	return 0;
}

/* Read a whole file into a NUL-terminated buffer (caller frees). */
static char *slurp(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	assert_non_null(fp);
	char *buf = malloc(1 << 16);
	assert_non_null(buf);
	*len = fread(buf, 1, (1 << 16) - 1, fp);
	buf[*len] = 0;
	fclose(fp);
	return buf;
}

static void put_str(struct console *c, const char *s)
{
	while (*s)
		console_put(c, (uint8_t)*s++);
}

static void limit_exact_bytes_and_marker(void **state)
{
	struct tmp *t = *state;
	struct console c;
	assert_int_equal(console_open(&c, t->path, 10), 0);
	assert_true(c.fd >= 0);
	put_str(&c, "hello\nworld, this is longer than ten bytes\n");
	put_str(&c, "and more\n");
	assert_int_equal(c.written, 10);
	assert_int_equal(c.dropped, strlen("hello\nworld, this is longer than ten bytes\n") +
					    strlen("and more\n") - 10);
	console_close(&c);
	assert_int_equal(c.fd, -1);

	size_t len;
	char *got = slurp(t->path, &len);
	const char *want = "hello\nworl\n[vmm: console limit of 10 bytes reached; output dropped]\n";
	assert_int_equal(len, strlen(want));
	assert_string_equal(got, want);
	/* the marker appears once */
	assert_ptr_equal(strstr(got, "[vmm:"), strrchr(got, '['));
	free(got);
}

static void under_limit_kept_whole(void **state)
{
	struct tmp *t = *state;
	struct console c;
	assert_int_equal(console_open(&c, t->path, 1 << 20), 0);
	/* every byte value passes through unchanged */
	for (unsigned i = 0; i < 256; i++)
		console_put(&c, (uint8_t)i);
	console_put(&c, 'x');   /* no trailing newline: written at close */
	assert_int_equal(c.dropped, 0);
	assert_int_equal(c.written, 257);
	console_close(&c);
	size_t len;
	char *got = slurp(t->path, &len);
	assert_int_equal(len, 257);
	for (unsigned i = 0; i < 256; i++)
		assert_int_equal((uint8_t)got[i], i);
	assert_int_equal(got[256], 'x');
	free(got);
}

/* Lines go out as they end; a full buffer without a newline goes out too. */
static void flushes(void **state)
{
	struct tmp *t = *state;
	struct console c;
	struct stat st;
	assert_int_equal(console_open(&c, t->path, 1 << 20), 0);
	put_str(&c, "abc");
	assert_int_equal(stat(t->path, &st), 0);
	assert_int_equal(st.st_size, 0);
	console_put(&c, '\n');
	assert_int_equal(stat(t->path, &st), 0);
	assert_int_equal(st.st_size, 4);
	for (unsigned i = 0; i < sizeof(c.buf) + 10; i++)
		console_put(&c, 'z');
	assert_int_equal(stat(t->path, &st), 0);
	assert_int_equal(st.st_size, 4 + sizeof(c.buf));
	console_flush(&c);
	assert_int_equal(stat(t->path, &st), 0);
	assert_int_equal(st.st_size, 4 + sizeof(c.buf) + 10);
	console_close(&c);
	console_close(&c);   /* a second close is a no-op */
}

static void limit_zero(void **state)
{
	struct tmp *t = *state;
	struct console c;
	assert_int_equal(console_open(&c, t->path, 0), 0);
	put_str(&c, "abc");
	assert_int_equal(c.written, 0);
	assert_int_equal(c.dropped, 3);
	console_close(&c);
	size_t len;
	char *got = slurp(t->path, &len);
	assert_string_equal(got, "\n[vmm: console limit of 0 bytes reached; output dropped]\n");
	free(got);
}

static void none_discards(void **state)
{
	(void)state;
	struct console c;
	assert_int_equal(console_open(&c, "none", 4), 0);
	assert_int_equal(c.fd, -1);
	assert_false(c.own_fd);
	put_str(&c, "0123456789\n");
	assert_int_equal(c.written, 4);
	assert_int_equal(c.dropped, 7);
	assert_int_equal(c.len, 0);
	console_flush(&c);
	console_close(&c);
	assert_int_equal(c.fd, -1);
}

static void stdout_not_closed(void **state)
{
	(void)state;
	struct console c;
	assert_int_equal(console_open(&c, "stdout", 0), 0);
	assert_int_equal(c.fd, STDOUT_FILENO);
	assert_false(c.own_fd);
	console_close(&c);
	/* stdout still works */
	assert_true(fcntl(STDOUT_FILENO, F_GETFD) >= 0);
}

static void refuses_symlink(void **state)
{
	struct tmp *t = *state;
	char target[160], link[160];
	snprintf(target, sizeof(target), "%s/target", t->dir);
	snprintf(link, sizeof(link), "%s/link", t->dir);
	FILE *fp = fopen(target, "w");
	assert_non_null(fp);
	fputs("precious", fp);
	fclose(fp);
	assert_int_equal(symlink(target, link), 0);

	struct console c;
	assert_int_equal(console_open(&c, link, 100), -1);
	assert_int_equal(c.fd, -1);
	console_close(&c);   /* harmless after a failed open */
	/* the target was neither truncated nor written */
	size_t len;
	char *got = slurp(target, &len);
	assert_string_equal(got, "precious");
	free(got);

	/* a dangling symlink is refused too: nothing gets created at its target */
	unlink(target);
	assert_int_equal(console_open(&c, link, 100), -1);
	struct stat st;
	assert_int_equal(stat(target, &st), -1);
}

static void creates_0600_and_truncates(void **state)
{
	struct tmp *t = *state;
	FILE *fp = fopen(t->path, "w");
	assert_non_null(fp);
	fputs("old contents that must go", fp);
	fclose(fp);
	struct console c;
	assert_int_equal(console_open(&c, t->path, 100), 0);
	put_str(&c, "new\n");
	console_close(&c);
	size_t len;
	char *got = slurp(t->path, &len);
	assert_string_equal(got, "new\n");
	free(got);

	unlink(t->path);
	mode_t old = umask(0);
	assert_int_equal(console_open(&c, t->path, 100), 0);
	umask(old);
	struct stat st;
	assert_int_equal(fstat(c.fd, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_true(fcntl(c.fd, F_GETFD) & FD_CLOEXEC);
	console_close(&c);
}

static void open_failure(void **state)
{
	struct tmp *t = *state;
	char p[160];
	snprintf(p, sizeof(p), "%s/no/such/dir", t->dir);
	struct console c;
	assert_int_equal(console_open(&c, p, 100), -1);
	assert_int_equal(c.fd, -1);
	assert_int_equal(console_open(&c, "", 100), -1);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(limit_exact_bytes_and_marker),
		T(under_limit_kept_whole),
		T(flushes),
		T(limit_zero),
		T(none_discards),
		T(stdout_not_closed),
		T(refuses_symlink),
		T(creates_0600_and_truncates),
		T(open_failure),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
