/* Unit tests for vmm/device.c, the table of device kinds that the
 * command line, the VM's devices and the restore walk: each kind whole,
 * its options apart from vmm's and from every other kind's, and its
 * options reaching it through vmm_args_parse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "args.h"
#include "device.h"

static unsigned nkinds(void)
{
	unsigned n = 0;
	while (vmm_device_kinds[n])
		n++;
	return n;
}

/* The order a snapshot keeps: disks, vsock, rng. */
static void kinds_in_slot_order(void **state)
{
	(void)state;
	assert_int_equal(nkinds(), 3);
	assert_ptr_equal(vmm_device_kinds[0], &virtio_blk_kind);
	assert_ptr_equal(vmm_device_kinds[1], &virtio_vsock_kind);
	assert_ptr_equal(vmm_device_kinds[2], &virtio_rng_kind);
}

/* Every op the walkers call without looking is there; a kind with
 * options parses them, and its help names each. */
static void each_kind_whole(void **state)
{
	(void)state;
	for (unsigned k = 0; k < nkinds(); k++) {
		const struct vmm_device_kind *d = vmm_device_kinds[k];
		assert_non_null(d->name);
		assert_non_null(d->options);
		assert_non_null(d->synopsis);
		assert_non_null(d->usage);
		assert_non_null(d->count);
		assert_non_null(d->create);
		assert_non_null(d->faults);
		assert_non_null(d->release);
		for (const struct option *o = d->options; o->name; o++) {
			char flag[64];
			snprintf(flag, sizeof(flag), "--%s", o->name);
			assert_non_null(d->option);
			assert_non_null(strstr(d->usage, flag));
			assert_non_null(strstr(d->synopsis, flag));
		}
	}
}

/* No two options of any kinds share a name or a value, and every value is
 * past vmm's own. */
static void options_apart(void **state)
{
	(void)state;
	for (unsigned k = 0; k < nkinds(); k++)
		for (const struct option *o = vmm_device_kinds[k]->options; o->name; o++) {
			assert_true(o->val >= VMM_DEVICE_OPT_BASE);
			assert_null(o->flag);
			for (unsigned j = 0; j < nkinds(); j++)
				for (const struct option *p = vmm_device_kinds[j]->options; p->name; p++)
					if (o != p) {
						assert_int_not_equal(o->val, p->val);
						assert_string_not_equal(o->name, p->name);
					}
		}
}

/* A kind's options reach it through vmm's parser, and its check runs
 * once every option is read (--disk none needs a snapshot). */
static void options_reach_their_kind(void **state)
{
	(void)state;
	struct vmm_config cfg;
	char *ok[] = { "vmm", "--kernel", "k", "--disk", "a.img,ro", "--vsock-uds", "/v", "--disk", "b.img", NULL };
	assert_int_equal(vmm_args_parse(9, ok, &cfg), 0);
	assert_int_equal(virtio_blk_kind.count(&cfg), 2);
	assert_int_equal(virtio_vsock_kind.count(&cfg), 1);
	assert_int_equal(virtio_rng_kind.count(&cfg), 1);
	assert_true(cfg.disks[0].ro);
	assert_string_equal(cfg.disks[1].path, "b.img");
	char *none[] = { "vmm", "--kernel", "k", "--disk", "none", NULL };
	assert_int_equal(vmm_args_parse(5, none, &cfg), -1);
	char *snap[] = { "vmm", "--kernel", "k", "--disk", "none", "--snapshot-out", "/s", NULL };
	assert_int_equal(vmm_args_parse(7, snap, &cfg), 0);
	char *empty[] = { "vmm", "--kernel", "k", "--vsock-uds", "", NULL };
	assert_int_equal(vmm_args_parse(5, empty, &cfg), -1);
	char *plain[] = { "vmm", "--kernel", "k", NULL };
	assert_int_equal(vmm_args_parse(3, plain, &cfg), 0);
	assert_int_equal(virtio_blk_kind.count(&cfg), 0);
	assert_int_equal(virtio_vsock_kind.count(&cfg), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kinds_in_slot_order),
		cmocka_unit_test(each_kind_whole),
		cmocka_unit_test(options_apart),
		cmocka_unit_test(options_reach_their_kind),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
