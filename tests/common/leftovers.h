/* For tests whose commands may leave processes behind: the test process
 * is a child subreaper, so whatever is left ends up as its child, and
 * no_leftovers() reaps what ended and names (and kills) what did not. */
#ifndef VMRUN_TEST_LEFTOVERS_H
#define VMRUN_TEST_LEFTOVERS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

/* Our children, from /proc (for killing leftovers). */
static inline int children(pid_t *out, int max)
{
	DIR *d = opendir("/proc");
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) && n < max) {
		char p[64], buf[512];
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(p, sizeof(p), "/proc/%d/stat", atoi(e->d_name));
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t k = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (k <= 0)
			continue;
		buf[k] = '\0';
		char *rp = strrchr(buf, ')');
		int ppid;
		char state;
		if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == getpid())
			out[n++] = atoi(e->d_name);
	}
	if (d)
		closedir(d);
	return n;
}

/* Reap what ended; fail if anything is still running after a while. */
static inline int no_leftovers(void)
{
	int64_t until = clock_mono_ms() + 3000;
	for (;;) {
		pid_t r = waitpid(-1, NULL, WNOHANG);
		if (r > 0)
			continue;
		if (r < 0 && errno == ECHILD)
			return 0;
		if (clock_mono_ms() > until)
			break;
		usleep(5000);
	}
	pid_t left[64];
	int n = children(left, 64);
	for (int i = 0; i < n; i++) {
		char p[64], comm[64] = "?";
		snprintf(p, sizeof(p), "/proc/%d/comm", left[i]);
		FILE *f = fopen(p, "re");
		if (f) {
			if (fgets(comm, sizeof(comm), f))
				comm[strcspn(comm, "\n")] = '\0';
			fclose(f);
		}
		fprintf(stderr, "test: process %d (%s) left behind\n", left[i], comm);
		kill(left[i], SIGKILL);
	}
	while (waitpid(-1, NULL, 0) > 0)
		;
	return -1;
}

#endif
