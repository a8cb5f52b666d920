#include "serial_8250.h"

#include <string.h>

/* Register offsets and bits, as in Linux's include/uapi/linux/serial_reg.h. */
#include <linux/serial_reg.h>

#define IIR_FIFO_BITS 0xc0           /* "FIFOs enabled": identifies a 16550A */
#define MSR_IDLE (UART_MSR_DCD | UART_MSR_DSR | UART_MSR_CTS)

int serial_init(struct serial_8250 *s, struct console *out, unsigned irq, serial_irq_fn set_irq,
		void *irq_ctx)
{
	memset(s, 0, sizeof(*s));
	if (pthread_mutex_init(&s->lock, NULL) != 0)
		return -1;
	s->out = out;
	s->irq = irq;
	s->set_irq = set_irq;
	s->irq_ctx = irq_ctx;
	s->mcr = UART_MCR_OUT2;
	s->dll = 12;   /* 9600 baud, the power-on divisor */
	return 0;
}

void serial_release(struct serial_8250 *s)
{
	pthread_mutex_destroy(&s->lock);
}

static uint8_t iir(const struct serial_8250 *s)
{
	uint8_t fifo = (s->fcr & UART_FCR_ENABLE_FIFO) ? IIR_FIFO_BITS : 0;
	if ((s->ier & UART_IER_THRI) && s->thri_pending)
		return UART_IIR_THRI | fifo;
	return UART_IIR_NO_INT | fifo;
}

static void update_irq(struct serial_8250 *s)
{
	int level = !(iir(s) & UART_IIR_NO_INT);
	if (level != s->irq_level && s->set_irq)
		s->set_irq(s->irq_ctx, s->irq, level);
	s->irq_level = level;
}

/* In loopback the modem inputs mirror the outputs (16550 datasheet):
 * RTS->CTS, DTR->DSR, OUT1->RI, OUT2->DCD. Linux checks this. */
static uint8_t msr(const struct serial_8250 *s)
{
	if (!(s->mcr & UART_MCR_LOOP))
		return MSR_IDLE;
	uint8_t m = 0;
	m |= (s->mcr & UART_MCR_RTS) ? UART_MSR_CTS : 0;
	m |= (s->mcr & UART_MCR_DTR) ? UART_MSR_DSR : 0;
	m |= (s->mcr & UART_MCR_OUT1) ? UART_MSR_RI : 0;
	m |= (s->mcr & UART_MCR_OUT2) ? UART_MSR_DCD : 0;
	return m;
}

void serial_read(void *opaque, uint64_t offset, uint8_t *data, uint32_t len)
{
	struct serial_8250 *s = opaque;
	uint8_t v = 0;
	bool dlab;
	pthread_mutex_lock(&s->lock);
	dlab = s->lcr & UART_LCR_DLAB;
	switch (offset) {
	case UART_RX:  v = dlab ? s->dll : 0; break;
	case UART_IER: v = dlab ? s->dlm : s->ier; break;
	case UART_IIR:
		v = iir(s);
		/* Reading IIR acknowledges a transmit-empty interrupt. */
		if ((v & 0x0f) == UART_IIR_THRI)
			s->thri_pending = false;
		update_irq(s);
		break;
	case UART_LCR: v = s->lcr; break;
	case UART_MCR: v = s->mcr; break;
	case UART_LSR: v = UART_LSR_THRE | UART_LSR_TEMT; break;
	case UART_MSR: v = msr(s); break;
	case UART_SCR: v = s->scr; break;
	default: break;
	}
	pthread_mutex_unlock(&s->lock);
	memset(data, 0, len);
	data[0] = v;
}

void serial_write(void *opaque, uint64_t offset, const uint8_t *data, uint32_t len)
{
	struct serial_8250 *s = opaque;
	uint8_t v = data[0];
	(void)len;
	pthread_mutex_lock(&s->lock);
	bool dlab = s->lcr & UART_LCR_DLAB;
	switch (offset) {
	case UART_TX:
		if (dlab) {
			s->dll = v;
		} else {
			if (!(s->mcr & UART_MCR_LOOP))
				console_put(s->out, v);
			s->thri_pending = true;
		}
		break;
	case UART_IER:
		if (dlab) {
			s->dlm = v;
		} else {
			/* Enabling THRI with THR empty raises it at once. */
			if ((v & UART_IER_THRI) && !(s->ier & UART_IER_THRI))
				s->thri_pending = true;
			s->ier = v & 0x0f;
		}
		break;
	case UART_FCR: s->fcr = v; break;
	case UART_LCR: s->lcr = v; break;
	case UART_MCR: s->mcr = v & 0x1f; break;
	case UART_SCR: s->scr = v; break;
	default: break;  /* LSR and MSR are read-only */
	}
	update_irq(s);
	pthread_mutex_unlock(&s->lock);
}

void serial_save(struct serial_8250 *s, struct serial_8250_state *st)
{
	pthread_mutex_lock(&s->lock);
	*st = (struct serial_8250_state){
		.ier = s->ier, .lcr = s->lcr, .mcr = s->mcr, .scr = s->scr, .fcr = s->fcr, .dll = s->dll, .dlm = s->dlm,
		.thri_pending = s->thri_pending, .irq_level = s->irq_level,
	};
	pthread_mutex_unlock(&s->lock);
}

void serial_restore(struct serial_8250 *s, const struct serial_8250_state *st)
{
	pthread_mutex_lock(&s->lock);
	s->ier = st->ier;
	s->lcr = st->lcr;
	s->mcr = st->mcr;
	s->scr = st->scr;
	s->fcr = st->fcr;
	s->dll = st->dll;
	s->dlm = st->dlm;
	s->thri_pending = st->thri_pending != 0;
	/* The in-kernel irqchip's line state came back with its own state;
	 * this one is only what update_irq compares against. */
	s->irq_level = st->irq_level ? 1 : 0;
	update_irq(s);
	pthread_mutex_unlock(&s->lock);
}
