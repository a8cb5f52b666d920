/* bench_vmm VMM PAYLOAD [RUNS]: start-up, teardown and memory figures of the
 * vmm on the local /dev/kvm, printed as min/median/max over RUNS (default
 * 30). The payload should reset at once (build/payloads/reset.elf).
 *
 *   exec -> first KVM_RUN : from just before execve in the child to the
 *                           vmm's own timestamp of its first KVM_RUN
 *   reset -> exit         : from the vmm's timestamp of the guest's reset
 *                           to wait4() returning in this process
 *   RSS beyond guest      : peak RSS (VmHWM) minus the guest pages resident
 *                           at exit, both reported by the vmm (--stats)
 * All timestamps are CLOCK_MONOTONIC, which is system-wide. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void report(const char *name, double *v, int n, const char *unit, const char *target)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	printf("%-26s min %8.3f  median %8.3f  max %8.3f %-4s  (target %s)\n", name, v[0], v[n / 2],
	       v[n - 1], unit, target);
}

static uint64_t field(const char *line, const char *key)
{
	const char *p = strstr(line, key);
	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: bench_vmm VMM PAYLOAD [RUNS]\n");
		return 2;
	}
	int runs = argc > 3 ? atoi(argv[3]) : 30;
	if (runs < 1 || runs > 10000)
		runs = 30;
	double *start = calloc((size_t)runs, sizeof(double));
	double *reset = calloc((size_t)runs, sizeof(double));
	double *rss = calloc((size_t)runs, sizeof(double));
	if (!start || !reset || !rss)
		return 2;
	uint64_t probe = 0;
	for (int i = 0; i < runs; i++) {
		int tpipe[2], epipe[2];
		if (pipe(tpipe) || pipe(epipe))
			return 2;
		pid_t pid = fork();
		if (pid == 0) {
			dup2(epipe[1], 2);
			close(epipe[0]);
			close(tpipe[0]);
			uint64_t t0 = now_ns();
			if (write(tpipe[1], &t0, sizeof(t0)) != sizeof(t0))
				_exit(127);
			close(tpipe[1]);
			execl(argv[1], argv[1], "--kernel", argv[2], "--memory", "16", "--console", "none",
			      "--accept-emulated-kvm", "--stats", (char *)NULL);
			_exit(127);
		}
		close(tpipe[1]);
		close(epipe[1]);
		uint64_t t0 = 0;
		if (read(tpipe[0], &t0, sizeof(t0)) != sizeof(t0))
			return 2;
		close(tpipe[0]);
		char buf[2048] = "";
		size_t got = 0;
		ssize_t r;
		while (got < sizeof(buf) - 1 && (r = read(epipe[0], buf + got, sizeof(buf) - 1 - got)) > 0)
			got += (size_t)r;
		buf[got] = 0;
		close(epipe[0]);
		int st;
		struct rusage ru;
		if (wait4(pid, &st, 0, &ru) != pid)
			return 2;
		uint64_t t_exit = now_ns();
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !strstr(buf, "vmm-stats")) {
			fprintf(stderr, "bench: vmm failed (status 0x%x): %s\n", st, buf);
			return 1;
		}
		probe = field(buf, "probe_cycles_per_loop=");
		start[i] = (double)(field(buf, "first_kvm_run_ns=") - t0) / 1e6;
		reset[i] = (double)(t_exit - field(buf, "stop_ns=")) / 1e6;
		rss[i] = (double)(field(buf, "rss_hwm_kib=") - field(buf, "guest_resident_kib=")) / 1024.0;
	}
	printf("vmm benchmark: %d runs of %s on the local /dev/kvm (host probe: %llu cycles per loop%s)\n",
	       runs, argv[2], (unsigned long long)probe,
	       probe > 1000 ? "; KVM emulates guest kernel code here, figures are not hardware's" : "");
	report("exec -> first KVM_RUN", start, runs, "ms", "<= 2 ms");
	report("guest reset -> exit", reset, runs, "ms", "<= 2 ms");
	report("RSS beyond guest pages", rss, runs, "MiB", "<= 3 MiB");
	free(start);
	free(reset);
	free(rss);
	return 0;
}
