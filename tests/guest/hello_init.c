/* hello_init: /init of the aarch64 test guest (tests/vm/aarch64.sh). It
 * shows, on the console, that the guest got this far on its own devices:
 * the root disk (it was loaded from it, over virtio-blk and its
 * interrupts), the CPUs the kernel brought up (PSCI CPU_ON), and virtio-rng
 * (16 bytes read from /dev/hwrng); then it powers the VM off, which arm64
 * does through PSCI SYSTEM_OFF.
 *
 * Prints "hello_init: ..." lines; a failure is printed and still powers off,
 * so the test reads what went wrong instead of waiting for a panic. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <unistd.h>

static void rng(void)
{
	unsigned char b[16];
	int fd = open("/dev/hwrng", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, b, sizeof(b)) : -1;
	if (n != (ssize_t)sizeof(b)) {
		printf("hello_init: FAIL /dev/hwrng: %s\n", n < 0 ? strerror(errno) : "short read");
	} else {
		printf("hello_init: hwrng ");
		for (size_t i = 0; i < sizeof(b); i++)
			printf("%02x", b[i]);
		printf("\n");
	}
	if (fd >= 0)
		close(fd);
}

int main(void)
{
	/* The kernel mounts devtmpfs only when told to; mount it ourselves. */
	if (mount("devtmpfs", "/dev", "devtmpfs", 0, NULL) < 0 && errno != EBUSY)
		printf("hello_init: FAIL mount /dev: %s\n", strerror(errno));
	/* With no /sys mounted, glibc counts the CPUs this process may run
	 * on (sched_getaffinity): every CPU the kernel brought up. */
	printf("hello_init: running on %ld CPUs\n", sysconf(_SC_NPROCESSORS_ONLN));
	rng();
	fflush(stdout);
	sync();
	reboot(RB_POWER_OFF);
	printf("hello_init: FAIL reboot: %s\n", strerror(errno));
	return 1;
}
