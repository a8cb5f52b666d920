/* MP table (Intel MultiProcessor Specification 1.4): floating pointer and
 * configuration table as a guest parses them, for 1 to 32 vCPUs. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "boot_x86_64.h"
#include "guest_mem.h"
#include "layout_x86_64.h"

#define MIB (1ULL << 20)

static int setup(void **state)
{
	struct guest_mem *gm = calloc(1, sizeof(*gm));
	if (!gm || guest_mem_init(gm, 4 * MIB, MMIO_GAP_START, MMIO_GAP_END) != 0) {
		free(gm);
		return -1;
	}
	*state = gm;
	return 0;
}

static int teardown(void **state)
{
	guest_mem_release(*state);
	free(*state);
	return 0;
}

static uint8_t sum8(const uint8_t *p, size_t n)
{
	uint8_t s = 0;
	while (n--)
		s += *p++;
	return s;
}

static uint16_t rd16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return v;
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* Parse the tables the way Linux's mpparse does and check everything. */
static void check_tables(const struct guest_mem *gm, unsigned ncpus)
{
	const uint8_t *mpf = guest_mem_ptr(gm, MPTABLE_ADDR, 16);
	assert_non_null(mpf);
	/* floating pointer: signature, 16-byte aligned, 1 paragraph, checksum 0 */
	assert_memory_equal(mpf, "_MP_", 4);
	assert_int_equal(MPTABLE_ADDR % 16, 0);
	assert_int_equal(mpf[8], 1);              /* length in paragraphs */
	assert_int_equal(mpf[9], 4);              /* spec 1.4 */
	assert_int_equal(sum8(mpf, 16), 0);
	assert_int_equal(mpf[11], 0);             /* feature1 0: table present */
	uint32_t physptr = rd32(mpf + 4);
	assert_int_equal(physptr, MPTABLE_ADDR + 16);

	/* configuration table header */
	const uint8_t *mpc = guest_mem_ptr(gm, physptr, 44);
	assert_non_null(mpc);
	assert_memory_equal(mpc, "PCMP", 4);
	uint16_t length = rd16(mpc + 4);
	assert_int_equal(mpc[6], 4);
	assert_true(length >= 44);
	/* it fits the area reserved for it, and the e820 excludes that area */
	assert_true(16 + (uint64_t)length <= MPTABLE_MAX);
	assert_int_equal(sum8(mpc, length), 0);
	assert_int_equal(rd32(mpc + 36), LAPIC_ADDR);
	uint16_t count = rd16(mpc + 34);

	/* walk the entries */
	unsigned cpus = 0, buses = 0, ioapics = 0, intsrc = 0, lintsrc = 0, entries = 0;
	int ioapic_id = -1;
	const uint8_t *p = mpc + 44, *end = mpc + length;
	while (p < end) {
		entries++;
		switch (p[0]) {
		case 0:   /* processor, 20 bytes */
			assert_true(p + 20 <= end);
			assert_int_equal(p[1], cpus);                    /* APIC ids 0..n-1 */
			assert_true(p[3] & 1);                           /* enabled */
			assert_int_equal(!!(p[3] & 2), cpus == 0);      /* BSP is cpu 0 only */
			assert_true(p[2] != 0);                          /* APIC version */
			cpus++;
			p += 20;
			break;
		case 1:   /* bus */
			assert_memory_equal(p + 2, "ISA   ", 6);
			buses++;
			p += 8;
			break;
		case 2:   /* IOAPIC */
			ioapic_id = p[1];
			assert_true(p[3] & 1);
			assert_int_equal(rd32(p + 4), IOAPIC_ADDR);
			ioapics++;
			p += 8;
			break;
		case 3:   /* I/O interrupt source: identity-routed */
			assert_int_equal(p[1], 0);
			assert_int_equal(p[6], ioapic_id);
			assert_int_equal(p[5], p[7]);
			assert_int_equal(p[7], intsrc);
			intsrc++;
			p += 8;
			break;
		case 4:   /* local interrupt source, to all CPUs */
			assert_int_equal(p[6], 0xff);
			lintsrc++;
			p += 8;
			break;
		default:
			fail_msg("unknown MP entry type %u", p[0]);
		}
	}
	assert_ptr_equal(p, end);
	assert_int_equal(cpus, ncpus);
	assert_int_equal(buses, 1);
	assert_int_equal(ioapics, 1);
	assert_int_equal(intsrc, 24);
	assert_int_equal(lintsrc, 2);
	assert_int_equal(count, entries);
	/* the IOAPIC id does not collide with a CPU's */
	assert_true(ioapic_id >= (int)ncpus);
	/* the rest of the area is zero */
	const uint8_t *area = guest_mem_ptr(gm, MPTABLE_ADDR, MPTABLE_MAX);
	for (uint64_t i = 16 + length; i < MPTABLE_MAX; i++)
		assert_int_equal(area[i], 0);
}

static void one_cpu(void **state)
{
	assert_int_equal(mptable_write(*state, 1), 0);
	check_tables(*state, 1);
}

static void two_cpus(void **state)
{
	assert_int_equal(mptable_write(*state, 2), 0);
	check_tables(*state, 2);
}

static void max_cpus(void **state)
{
	assert_int_equal(MPTABLE_MAX_CPUS, 32);
	assert_int_equal(mptable_write(*state, 32), 0);
	check_tables(*state, 32);
}

static void every_count(void **state)
{
	/* a larger table written first must leave no stale bytes behind */
	for (unsigned n = MPTABLE_MAX_CPUS; n >= 1; n--) {
		assert_int_equal(mptable_write(*state, n), 0);
		check_tables(*state, n);
	}
}

static void refused_counts(void **state)
{
	struct guest_mem *gm = *state;
	assert_int_equal(mptable_write(gm, 0), -1);
	assert_int_equal(mptable_write(gm, MPTABLE_MAX_CPUS + 1), -1);
	assert_int_equal(mptable_write(gm, 255), -1);
	assert_int_equal(mptable_write(gm, 256), -1);   /* would wrap a u8 APIC id to 0 */
	assert_int_equal(mptable_write(gm, UINT32_MAX), -1);
	/* nothing was written */
	assert_int_equal(guest_mem_resident(gm), 0);
}

static void small_guest_refused(void **state)
{
	(void)state;
	struct guest_mem gm;
	/* RAM ends before the end of the MP table area */
	assert_int_equal(guest_mem_init(&gm, MPTABLE_ADDR & ~0xfffULL, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_int_equal(mptable_write(&gm, 1), -1);
	guest_mem_release(&gm);
	assert_int_equal(guest_mem_init(&gm, EBDA_END, MMIO_GAP_START, MMIO_GAP_END), 0);
	assert_int_equal(mptable_write(&gm, 1), 0);
	check_tables(&gm, 1);
	guest_mem_release(&gm);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(one_cpu),
		T(two_cpus),
		T(max_cpus),
		T(every_count),
		T(refused_counts),
		cmocka_unit_test(small_guest_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
