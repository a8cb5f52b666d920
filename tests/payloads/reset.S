/* The smallest guest: reset at once. Used by the benchmark and the
 * reset-path test. */
#include "payload.h"
	.text
	.globl _start
_start:
	RESET
