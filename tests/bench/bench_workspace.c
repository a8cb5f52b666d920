/* Workspace image creation time: a 64 MiB image with 100 small files
 * (a few hundred bytes to a few KiB, like a code-execution job's sources),
 * made 20 times; prints the median, min and max. Target: median <= 10 ms
 * (../shared/DESIGN.md). Built and run by `make bench-workspace`, or:
 *   gcc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -Ihost \
 *       tests/bench/bench_workspace.c host/run/workspace.c -lext2fs -lcom_err \
 *       -o build/tests/bench_workspace
 * Usage: bench_workspace [DIR]  (scratch space, default $TMPDIR or /tmp) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "workspace.h"

#define RUNS  20
#define FILES 100
#define MIB   64

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int make_source(const char *src)
{
	char path[4200], data[8192];
	if (mkdir(src, 0755))
		return -1;
	for (int i = 0; i < FILES; i++) {
		snprintf(path, sizeof(path), "%s/file%03d.py", src, i);
		size_t n = 200 + (size_t)i * 79 % 7800;
		for (size_t k = 0; k < n; k++)
			data[k] = (char)('a' + (k * 7 + (size_t)i) % 26);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd < 0 || write(fd, data, n) != (ssize_t)n) {
			if (fd >= 0)
				close(fd);
			return -1;
		}
		close(fd);
	}
	return 0;
}

static void remove_source(const char *src)
{
	char path[4200];
	for (int i = 0; i < FILES; i++) {
		snprintf(path, sizeof(path), "%s/file%03d.py", src, i);
		unlink(path);
	}
	rmdir(src);
}

int main(int argc, char **argv)
{
	const char *base = argc > 1 ? argv[1] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char src[4096], image[4096], err[512];
	snprintf(src, sizeof(src), "%s/bench-ws-src.%d", base, (int)getpid());
	snprintf(image, sizeof(image), "%s/bench-ws.%d.ext4", base, (int)getpid());
	if (make_source(src)) {
		fprintf(stderr, "bench_workspace: cannot make %s: %s\n", src, strerror(errno));
		remove_source(src);
		return 1;
	}
	double t[RUNS];
	struct workspace_stats st;
	for (int i = 0; i < RUNS; i++) {
		double t0 = now_ms();
		struct workspace_source ws = { .dirfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC), .name = src };
		int rc = ws.dirfd < 0 ? -1 : workspace_create(image, MIB, &ws, 1000, 1000, &st, err, sizeof(err));
		if (ws.dirfd < 0)
			snprintf(err, sizeof(err), "%.300s: %s", src, strerror(errno));
		else
			close(ws.dirfd);
		if (rc) {
			fprintf(stderr, "bench_workspace: %s\n", err);
			remove_source(src);
			return 1;
		}
		t[i] = now_ms() - t0;
		unlink(image);
	}
	remove_source(src);
	qsort(t, RUNS, sizeof(t[0]), cmp);
	printf("workspace image, %d MiB with %d files (%llu bytes): median %.2f ms, min %.2f, max %.2f over %d runs\n",
	       MIB, FILES, (unsigned long long)st.bytes, (t[RUNS / 2 - 1] + t[RUNS / 2]) / 2, t[0],
	       t[RUNS - 1], RUNS);
	return 0;
}
