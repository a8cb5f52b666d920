/* One-line diagnostics for the vmm process.
 *
 * Setup failures are reported once, by the function that saw them, as
 * "vmm: <what>: <why>" on stderr; the caller unwinds and main exits non-zero.
 * Nothing here exits: device paths must never end the process. */
#ifndef VMM_LOG_H
#define VMM_LOG_H

/* vmm's stderr as vmrun reads it (host/run/run.c includes this header): each
 * line starts with VMM_LOG_PREFIX. One that goes on with VMM_FAULTS_TAG is
 * no error: it counts, at exit, what the guest did wrong to the devices. */
#define VMM_LOG_PREFIX "vmm: "
#define VMM_FAULTS_TAG "guest faults: "
/* Nor is one that goes on with VMM_STATE_TAG: a device's state (queue
 * indices, interrupts, vsock connections and counters), written when vmm
 * gets VMM_STATE_SIGNAL, as vmrun sends it when a run times out, so that
 * a guest that seems stuck can be told from a device that is. */
#define VMM_STATE_TAG "state: "
#define VMM_STATE_SIGNAL SIGUSR2
/* With --pause-out: save the VM and exit (vmrun's sandbox pause). A signal
 * no one else sends a vmm, never a termination one: a pause that is not
 * armed is ignored, never mistaken for a stop. */
#define VMM_PAUSE_SIGNAL SIGPWR
#define VMM_PAUSE_SIGNAL_NAME "SIGPWR"

/* Print "vmm: " followed by the formatted message and a newline to stderr. */
void vmm_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Like vmm_err, with ": strerror(errno)" appended (errno read at entry). */
void vmm_perr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
