/* One-line diagnostics for the vmm process.
 *
 * Setup failures are reported once, by the function that saw them, as
 * "vmm: <what>: <why>" on stderr; the caller unwinds and main exits non-zero.
 * Nothing here exits: device paths must never end the process. */
#ifndef VMM_LOG_H
#define VMM_LOG_H

/* Print "vmm: " followed by the formatted message and a newline to stderr. */
void vmm_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Like vmm_err, with ": strerror(errno)" appended (errno read at entry). */
void vmm_perr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
