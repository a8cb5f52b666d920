/* Unit tests for vmm/virtio_devices.c: the guest-faults summary vmm
 * prints at exit, from the devices' own counters (no KVM). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake_virtio.h"
#include "virtio_devices.h"

struct fx {
	char path[64];
	struct vm vm;
	struct vmm_config cfg;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	snprintf(f->path, sizeof(f->path), "/tmp/vdevXXXXXX");
	int fd = mkstemp(f->path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	close(fd);
	f->vm.evl.epfd = -1;
	assert_int_equal(fv_mem_init(&f->vm.mem), 0);
	f->cfg.ndisks = 2;
	snprintf(f->cfg.disks[0].path, sizeof(f->cfg.disks[0].path), "%s", f->path);
	f->cfg.disks[0].ro = true;
	snprintf(f->cfg.disks[1].path, sizeof(f->cfg.disks[1].path), "%s", f->path);
	assert_int_equal(virtio_devices_init(&f->vm, &f->cfg), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	virtio_devices_release(&f->vm);
	guest_mem_release(&f->vm.mem);
	unlink(f->path);
	free(f);
	return 0;
}

static void nothing_counted_is_empty(void **state)
{
	struct fx *f = *state;
	char buf[200] = "x";
	virtio_devices_faults(&f->vm, buf, sizeof(buf));
	assert_string_equal(buf, "");
}

static void each_counter_named_by_device(void **state)
{
	struct fx *f = *state;
	f->vm.disks[0].errors = 2;
	f->vm.disks[1].t.queues[0].bad_chains = 3;
	f->vm.disks[1].t.resets_needed = 1;
	atomic_store(&f->vm.rng.t.ignored_writes, 4);
	f->vm.rng.t.queues[0].bad_chains = 9;
	char buf[300];
	virtio_devices_faults(&f->vm, buf, sizeof(buf));
	assert_string_equal(buf, "vda: 2 requests failed, vdb: 3 bad chains, vdb: 1 times needing a reset, "
				 "rng: 4 register writes ignored, rng: 9 bad chains");
}

static void a_short_buffer_is_cut_not_overrun(void **state)
{
	struct fx *f = *state;
	f->vm.disks[0].errors = 2;
	f->vm.rng.t.queues[0].bad_chains = 9;
	char buf[16 + 8];
	memset(buf, 'Z', sizeof(buf));
	virtio_devices_faults(&f->vm, buf, 16);
	assert_int_equal(strlen(buf), 15);
	assert_memory_equal(buf, "vda: 2 requests", 15);
	for (size_t i = 16; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 'Z');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(nothing_counted_is_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(each_counter_named_by_device, setup, teardown),
		cmocka_unit_test_setup_teardown(a_short_buffer_is_cut_not_overrun, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
