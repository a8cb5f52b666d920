/* A guest that faults with no IDT: the fault cannot be delivered, which
 * escalates to a triple fault. The VMM must end the VM as a guest failure. */
#include "payload.h"
	.text
	.globl _start
_start:
	PUTS msg
	lidt idt_null(%rip)
	ud2
	DEFINE_PUTS
msg:	.asciz "triple: faulting now\n"
	.balign 8
idt_null: .word 0
	.quad 0
