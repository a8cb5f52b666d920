/* Self-checks the UART, the virtio-mmio identification registers and the
 * unclaimed-access rules from inside the guest: prints "devices: PASS" only
 * when every check holds, else "devices: FAIL <n>" naming the first that
 * did not. */
#include "payload.h"
#define UNMAPPED_MMIO 0xe0000000
#define VIRTIO_RNG    0xd0000000   /* the only virtio device without --disk/--vsock-uds */
#define UNUSED_PORT   0x2f8

.macro CHECK n
	movb $\n, %bl
	jne fail
.endm
	.text
	.globl _start
_start:
	/* 1: the scratch register keeps what is written. */
	mov $COM1+7, %dx
	mov $0x5a, %al
	outb %al, %dx
	inb %dx, %al
	cmp $0x5a, %al
	CHECK 1
	/* 2: the line status says the transmitter is empty. */
	mov $COM1+5, %dx
	inb %dx, %al
	and $0x60, %al
	cmp $0x60, %al
	CHECK 2
	/* 3: in loopback, RTS|OUT2 read back as CTS|DCD (Linux's probe). */
	mov $COM1+4, %dx
	mov $0x1a, %al
	outb %al, %dx
	mov $COM1+6, %dx
	inb %dx, %al
	and $0xf0, %al
	cmp $0x90, %al
	CHECK 3
	mov $COM1+4, %dx
	mov $0x08, %al
	outb %al, %dx
	/* 4: IER keeps its four bits. */
	mov $COM1+1, %dx
	mov $0x0f, %al
	outb %al, %dx
	inb %dx, %al
	cmp $0x0f, %al
	CHECK 4
	/* 5: with THRI enabled and THR empty, IIR reports THRI... */
	mov $COM1+2, %dx
	inb %dx, %al
	and $0x0f, %al
	cmp $0x02, %al
	CHECK 5
	/* 6: ...and reading IIR acknowledged it. */
	inb %dx, %al
	and $0x0f, %al
	cmp $0x01, %al
	CHECK 6
	mov $COM1+1, %dx
	xor %al, %al
	outb %al, %dx
	/* 7: an unclaimed port reads as all ones (an MMIO-less port exit). */
	mov $UNUSED_PORT, %dx
	inb %dx, %al
	cmp $0xff, %al
	CHECK 7
	/* 8: an unclaimed MMIO read is all ones; a write there is dropped. */
	mov $UNMAPPED_MMIO, %rdi
	movl $0x12345678, (%rdi)
	mov (%rdi), %eax
	cmp $0xffffffff, %eax
	CHECK 8
	/* 9: a virtio-mmio v2 window answers: magic "virt", version 2, rng (4). */
	mov $VIRTIO_RNG, %rdi
	mov (%rdi), %eax
	cmp $0x74726976, %eax
	CHECK 9
	mov 4(%rdi), %eax
	cmp $2, %eax
	CHECK 9
	mov 8(%rdi), %eax
	cmp $4, %eax
	CHECK 9
	PUTS msg_pass
	RESET
fail:
	PUTS msg_fail
	mov %bl, %al
	add $'0', %al
	mov $COM1, %dx
	outb %al, %dx
	mov $'\n', %al
	outb %al, %dx
	RESET
	DEFINE_PUTS
msg_pass: .asciz "devices: PASS\n"
msg_fail: .asciz "devices: FAIL "
