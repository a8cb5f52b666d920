/* Exercises the boot path (ELF load, long-mode entry, rsi -> zero page),
 * port I/O exits and the console, then resets. */
#include "payload.h"
	.text
	.globl _start
_start:
	/* The boot protocol hands us boot_params in rsi: its "HdrS" magic at
	 * 0x202 proves the zero page was written and rsi points at it. */
	cmpl $0x53726448, 0x202(%rsi)
	jne bad
	PUTS msg_ok
	RESET
bad:
	PUTS msg_bad
	RESET
	DEFINE_PUTS
msg_ok:	.asciz "payload: hello from the guest\n"
msg_bad: .asciz "payload: FAIL boot_params not found via rsi\n"
