/* Shared macros for the tiny guest payloads (GNU as, 64-bit, ring 0). */
#define COM1      0x3f8
#define I8042_CMD 0x64

/* Write the NUL-terminated string at label to COM1 (clobbers rax, rdx, rsi). */
.macro PUTS label
	lea \label(%rip), %rsi
	call puts
.endm

/* Pulse the i8042 reset line: the VMM ends the VM as a clean reset. */
.macro RESET
	mov $0xfe, %al
	mov $I8042_CMD, %dx
	outb %al, %dx
	hlt
.endm

/* puts: rsi -> NUL-terminated string, written byte by byte to COM1. */
.macro DEFINE_PUTS
puts:
	mov $COM1, %dx
1:	lodsb
	test %al, %al
	jz 2f
	outb %al, %dx
	jmp 1b
2:	ret
.endm
