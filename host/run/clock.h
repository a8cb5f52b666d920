/* The monotonic clock every deadline and duration on the host is taken
 * from. Inline, so that each program (vmrun, the worker, vmrund, the
 * proxy) and each test or fuzz harness has it without one more object to
 * link. */
#ifndef VMRUN_CLOCK_H
#define VMRUN_CLOCK_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* Milliseconds of CLOCK_MONOTONIC: deadlines, timeouts, run durations. */
static inline int64_t clock_mono_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Microseconds of CLOCK_MONOTONIC, for waits shorter than a millisecond
 * that still count (a lock wait added to a start time). */
static inline int64_t clock_mono_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

/* Milliseconds since the epoch (CLOCK_REALTIME): times kept in records
 * and shown to people, compared across machines only by a shared store. */
static inline int64_t clock_wall_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Room for clock_iso8601's text and its NUL. */
#define CLOCK_ISO8601_MAX 32

/* wall_ms (clock_wall_ms terms) as UTC ISO 8601 with milliseconds,
 * "2026-12-01T19:34:46.973Z", into buf; returns buf. */
static inline char *clock_iso8601(int64_t wall_ms, char buf[CLOCK_ISO8601_MAX])
{
	time_t secs = (time_t)(wall_ms / 1000);
	struct tm tm;
	size_t k = gmtime_r(&secs, &tm) ? strftime(buf, CLOCK_ISO8601_MAX, "%Y-%m-%dT%H:%M:%S", &tm) : 0;
	snprintf(buf + k, CLOCK_ISO8601_MAX - k, k ? ".%03dZ" : "?", (int)(wall_ms % 1000));
	return buf;
}

#endif
