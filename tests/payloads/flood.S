/* Prints 20000 bytes to the console, then resets: the console cap must hold. */
#include "payload.h"
	.text
	.globl _start
_start:
	mov $20000, %ecx
	mov $COM1, %dx
	mov $'x', %al
1:	outb %al, %dx
	dec %ecx
	jnz 1b
	RESET
