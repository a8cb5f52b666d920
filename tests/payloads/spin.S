/* Announces itself, then loops forever: only a signal to the VMM ends it. */
#include "payload.h"
	.text
	.globl _start
_start:
	PUTS msg
1:	pause
	jmp 1b
	DEFINE_PUTS
msg:	.asciz "spin: spinning\n"
