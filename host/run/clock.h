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
#define CLOCK_ISO8601_MAX 96   /* 25 are written; the compiler reckons every %d at an int's widest */

/* The times clock_iso8601 writes: years 0001 to 9999, as ISO 8601 has
 * them in four digits. */
#define CLOCK_ISO8601_FIRST_MS (-62135596800000LL)   /* 0001-01-01T00:00:00.000Z */
#define CLOCK_ISO8601_LAST_MS  253402300799999LL     /* 9999-12-31T23:59:59.999Z */

/* wall_ms (clock_wall_ms terms) as UTC ISO 8601 with milliseconds,
 * "2026-12-01T19:34:46.973Z", into buf; returns buf, or NULL when wall_ms
 * is outside CLOCK_ISO8601_FIRST_MS..LAST_MS (a guest's forged mtime). */
static inline char *clock_iso8601(int64_t wall_ms, char buf[CLOCK_ISO8601_MAX])
{
	if (wall_ms < CLOCK_ISO8601_FIRST_MS || wall_ms > CLOCK_ISO8601_LAST_MS)
		return NULL;
	/* floored: a time before 1970 has its milliseconds after its second */
	int64_t secs = wall_ms / 1000, ms = wall_ms % 1000;
	if (ms < 0) {
		secs--;
		ms += 1000;
	}
	time_t t = (time_t)secs;
	struct tm tm;
	if (!gmtime_r(&t, &tm))
		return NULL;
	/* not strftime's %Y: glibc writes year 1 as "1", not "0001" */
	snprintf(buf, CLOCK_ISO8601_MAX, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)ms);
	return buf;
}

#endif
