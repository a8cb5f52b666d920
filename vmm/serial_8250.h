/* A 16550A-compatible UART for the guest console at 0x3f8, IRQ 4.
 *
 * It answers Linux's autoconfig (scratch, IER, FIFO and loopback checks) the
 * way real hardware does, so the driver identifies it at once, and it raises
 * the transmit-empty interrupt so tty writes do not fall back to polling.
 * Transmit is instant: THR is always empty. There is no receive path. */
#ifndef VMM_SERIAL_8250_H
#define VMM_SERIAL_8250_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "console.h"

#define SERIAL_COM1_BASE 0x3f8
#define SERIAL_COM1_IRQ  4
#define SERIAL_NREGS     8

/* Drive the device's interrupt line to level (0 or 1). */
typedef void (*serial_irq_fn)(void *ctx, unsigned irq, int level);

struct serial_8250 {
	pthread_mutex_t lock;   /* vCPUs may write concurrently */
	uint8_t ier, lcr, mcr, scr, fcr, dll, dlm;
	bool thri_pending;      /* THR emptied since IIR last reported it */
	int irq_level;
	unsigned irq;
	serial_irq_fn set_irq;
	void *irq_ctx;
	struct console *out;
};

/* Initialise a UART that prints to out and signals irq through set_irq.
 * Returns 0, or -1 if its lock cannot be created. */
int serial_init(struct serial_8250 *s, struct console *out, unsigned irq, serial_irq_fn set_irq,
		void *irq_ctx);

/* Release the UART's lock. */
void serial_release(struct serial_8250 *s);

/* The registers a snapshot keeps. Fixed layout. */
struct serial_8250_state {
	uint8_t ier, lcr, mcr, scr, fcr, dll, dlm, thri_pending;
	int32_t irq_level;
};

/* Copy s's registers into *st (takes the lock). */
void serial_save(struct serial_8250 *s, struct serial_8250_state *st);

/* Put saved registers back and drive the interrupt line to the saved
 * level (takes the lock). */
void serial_restore(struct serial_8250 *s, const struct serial_8250_state *st);

/* Bus callbacks for the 8 registers; accesses wider than a byte touch only
 * the first register, as on an ISA UART. */
void serial_read(void *opaque, uint64_t offset, uint8_t *data, uint32_t len);
void serial_write(void *opaque, uint64_t offset, const uint8_t *data, uint32_t len);

#endif
