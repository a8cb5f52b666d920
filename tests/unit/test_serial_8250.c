/* 16550A UART: the registers Linux's 8250 autoconfig probes, the
 * transmit-empty interrupt, and output to the console. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "console.h"
#include "serial_8250.h"

#define RBR 0
#define THR 0
#define DLL 0
#define IER 1
#define DLM 1
#define IIR 2
#define FCR 2
#define LCR 3
#define MCR 4
#define LSR 5
#define MSR 6
#define SCR 7

struct irq_log {
	unsigned calls;
	unsigned irq[16];
	int level[16];
	void *ctx;
};

static void record_irq(void *ctx, unsigned irq, int level)
{
	struct irq_log *l = ctx;
	if (l->calls < 16) {
		l->irq[l->calls] = irq;
		l->level[l->calls] = level;
	}
	l->calls++;
	l->ctx = ctx;
}

struct fx {
	struct serial_8250 s;
	struct console con;
	struct irq_log log;
	char dir[64];
	char path[128];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	strcpy(f->dir, "/tmp/vmrun-serial-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/console", f->dir);
	if (console_open(&f->con, f->path, 1 << 20) != 0 ||
	    serial_init(&f->s, &f->con, SERIAL_COM1_IRQ, record_irq, &f->log) != 0) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	serial_release(&f->s);
	console_close(&f->con);
	unlink(f->path);
	rmdir(f->dir);
	free(f);
	return 0;
}

static uint8_t rd(struct fx *f, unsigned reg)
{
	uint8_t v = 0xee;
	serial_read(&f->s, reg, &v, 1);
	return v;
}

static void wr(struct fx *f, unsigned reg, uint8_t v)
{
	serial_write(&f->s, reg, &v, 1);
}

static void scratch(void **state)
{
	struct fx *f = *state;
	wr(f, SCR, 0x5a);
	assert_int_equal(rd(f, SCR), 0x5a);
	wr(f, SCR, 0xa5);
	assert_int_equal(rd(f, SCR), 0xa5);
	wr(f, SCR, 0x00);
	assert_int_equal(rd(f, SCR), 0x00);
}

static void power_on_state(void **state)
{
	struct fx *f = *state;
	assert_int_equal(rd(f, IER), 0);
	assert_int_equal(rd(f, IIR), 0x01);
	assert_int_equal(rd(f, LCR), 0);
	assert_int_equal(rd(f, MCR), 0x08);          /* OUT2 */
	assert_int_equal(rd(f, LSR), 0x60);          /* THRE | TEMT, no data */
	assert_int_equal(rd(f, MSR), 0xb0);          /* DCD | DSR | CTS */
	assert_int_equal(rd(f, RBR), 0);
	assert_int_equal(f->log.calls, 0);
}

static void dlab_divisor_latch(void **state)
{
	struct fx *f = *state;
	wr(f, LCR, 0x80);
	assert_int_equal(rd(f, DLL), 12);            /* 9600 baud at power-on */
	assert_int_equal(rd(f, DLM), 0);
	wr(f, DLL, 0x01);
	wr(f, DLM, 0x02);
	assert_int_equal(rd(f, DLL), 0x01);
	assert_int_equal(rd(f, DLM), 0x02);
	/* divisor writes are not transmitted, nor do they change IER */
	wr(f, LCR, 0x03);
	assert_int_equal(rd(f, LCR), 0x03);
	assert_int_equal(rd(f, RBR), 0);
	assert_int_equal(rd(f, IER), 0);
	assert_int_equal(f->s.dll, 0x01);
	assert_int_equal(f->s.dlm, 0x02);
	console_flush(&f->con);
	assert_int_equal(f->con.written, 0);
	assert_int_equal(f->log.calls, 0);
	/* and back again */
	wr(f, LCR, 0x83);
	assert_int_equal(rd(f, DLL), 0x01);
	assert_int_equal(rd(f, DLM), 0x02);
}

static void loopback_msr(void **state)
{
	struct fx *f = *state;
	wr(f, MCR, 0x1a);   /* LOOP | OUT2 | RTS */
	assert_int_equal(rd(f, MCR), 0x1a);
	assert_int_equal(rd(f, MSR), 0x90);   /* DCD | CTS */
	wr(f, MCR, 0x1f);
	assert_int_equal(rd(f, MSR), 0xf0);
	wr(f, MCR, 0x10);
	assert_int_equal(rd(f, MSR), 0x00);
	wr(f, MCR, 0x11);   /* DTR -> DSR */
	assert_int_equal(rd(f, MSR), 0x20);
	wr(f, MCR, 0x14);   /* OUT1 -> RI */
	assert_int_equal(rd(f, MSR), 0x40);
	/* bits above loop are not kept */
	wr(f, MCR, 0xff);
	assert_int_equal(rd(f, MCR), 0x1f);
	/* out of loopback: idle lines */
	wr(f, MCR, 0x0b);
	assert_int_equal(rd(f, MSR), 0xb0);
}

static void loopback_does_not_print(void **state)
{
	struct fx *f = *state;
	wr(f, MCR, 0x10);
	wr(f, THR, 'X');
	wr(f, MCR, 0x08);
	wr(f, THR, 'Y');
	console_flush(&f->con);
	assert_int_equal(f->con.written, 1);
	char buf[8] = { 0 };
	FILE *fp = fopen(f->path, "rb");
	assert_non_null(fp);
	assert_int_equal(fread(buf, 1, sizeof(buf), fp), 1);
	fclose(fp);
	assert_string_equal(buf, "Y");
}

static void thri_interrupt(void **state)
{
	struct fx *f = *state;
	wr(f, IER, 0x02);                    /* enable THRI: THR is empty, so it fires */
	assert_int_equal(f->log.calls, 1);
	assert_int_equal(f->log.irq[0], SERIAL_COM1_IRQ);
	assert_int_equal(f->log.level[0], 1);
	assert_ptr_equal(f->log.ctx, &f->log);
	assert_int_equal(rd(f, IER), 0x02);
	assert_int_equal(rd(f, IIR), 0x02);  /* reading IIR acknowledges */
	assert_int_equal(f->log.calls, 2);
	assert_int_equal(f->log.level[1], 0);
	assert_int_equal(rd(f, IIR), 0x01);
	assert_int_equal(f->log.calls, 2);   /* no redundant edges */

	/* a transmitted byte empties THR again */
	wr(f, THR, 'a');
	assert_int_equal(f->log.calls, 3);
	assert_int_equal(f->log.level[2], 1);
	assert_int_equal(rd(f, IIR), 0x02);
	assert_int_equal(f->log.level[3], 0);

	/* disabling IER drops a pending interrupt */
	wr(f, THR, 'b');
	assert_int_equal(f->log.level[4], 1);
	wr(f, IER, 0x00);
	assert_int_equal(f->log.calls, 6);
	assert_int_equal(f->log.level[5], 0);
	assert_int_equal(rd(f, IIR), 0x01);
	/* IER keeps only its four defined bits */
	wr(f, IER, 0xf0);
	assert_int_equal(rd(f, IER), 0x00);
}

static void fifo_bits(void **state)
{
	struct fx *f = *state;
	wr(f, FCR, 0x01);
	assert_int_equal(rd(f, IIR), 0xc1);
	wr(f, IER, 0x02);
	assert_int_equal(rd(f, IIR), 0xc2);
	assert_int_equal(rd(f, IIR), 0xc1);
	wr(f, FCR, 0x00);
	assert_int_equal(rd(f, IIR), 0x01);
}

static void output_to_console(void **state)
{
	struct fx *f = *state;
	const char *msg = "Linux version 6.1\r\n";
	for (const char *p = msg; *p; p++)
		wr(f, THR, (uint8_t)*p);
	console_flush(&f->con);
	char buf[64] = { 0 };
	FILE *fp = fopen(f->path, "rb");
	assert_non_null(fp);
	size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	assert_int_equal(n, strlen(msg));
	assert_string_equal(buf, msg);
}

static void wide_access_and_unknown_offsets(void **state)
{
	struct fx *f = *state;
	wr(f, SCR, 0x77);
	uint8_t buf[8];
	memset(buf, 0xee, sizeof(buf));
	serial_read(&f->s, SCR, buf, 4);
	assert_int_equal(buf[0], 0x77);
	assert_int_equal(buf[1], 0);
	assert_int_equal(buf[3], 0);
	assert_int_equal(buf[4], 0xee);
	const uint8_t w[2] = { 0x12, 0x34 };
	serial_write(&f->s, SCR, w, 2);
	assert_int_equal(rd(f, SCR), 0x12);
	/* LSR and MSR are read-only */
	wr(f, LSR, 0x00);
	wr(f, MSR, 0x00);
	assert_int_equal(rd(f, LSR), 0x60);
	assert_int_equal(rd(f, MSR), 0xb0);
	/* offsets past the registers read as 0 and are ignored */
	assert_int_equal(rd(f, 8), 0);
	wr(f, 8, 0xff);
	assert_int_equal(rd(f, 0x1000), 0);
}

static void no_irq_callback(void **state)
{
	(void)state;
	struct serial_8250 s;
	struct console c;
	assert_int_equal(console_open(&c, "none", 0), 0);
	assert_int_equal(serial_init(&s, &c, 3, NULL, NULL), 0);
	uint8_t v = 0x02;
	serial_write(&s, IER, &v, 1);
	serial_read(&s, IIR, &v, 1);
	assert_int_equal(v, 0x02);
	v = 'q';
	serial_write(&s, THR, &v, 1);
	assert_int_equal(c.dropped, 1);
	serial_release(&s);
	console_close(&c);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(scratch),
		T(power_on_state),
		T(dlab_divisor_latch),
		T(loopback_msr),
		T(loopback_does_not_print),
		T(thri_interrupt),
		T(fifo_bits),
		T(output_to_console),
		T(wide_access_and_unknown_offsets),
		cmocka_unit_test(no_irq_callback),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
