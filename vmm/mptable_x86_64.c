/* Intel MultiProcessor Specification 1.4 tables: how a guest without ACPI
 * learns its CPUs, the IOAPIC and the ISA interrupt routing. */
#include <stdint.h>
#include <string.h>

#include "boot_x86_64.h"
#include "layout_x86_64.h"
#include "log.h"

struct mpf_intel {
	char signature[4];
	uint32_t physptr;
	uint8_t length;          /* in 16-byte paragraphs */
	uint8_t specification;
	uint8_t checksum;
	uint8_t feature[5];
} __attribute__((packed));

struct mpc_table {
	char signature[4];
	uint16_t length;
	uint8_t spec;
	uint8_t checksum;
	char oem[8];
	char productid[12];
	uint32_t oemptr;
	uint16_t oemsize;
	uint16_t oemcount;
	uint32_t lapic;
	uint32_t reserved;
} __attribute__((packed));

struct mpc_cpu {
	uint8_t type, apicid, apicver, cpuflag;
	uint32_t cpufeature, featureflag, reserved[2];
} __attribute__((packed));

struct mpc_bus {
	uint8_t type, busid;
	char bustype[6];
} __attribute__((packed));

struct mpc_ioapic {
	uint8_t type, apicid, apicver, flags;
	uint32_t apicaddr;
} __attribute__((packed));

struct mpc_intsrc {
	uint8_t type, irqtype;
	uint16_t irqflag;
	uint8_t srcbus, srcbusirq, dstapic, dstirq;
} __attribute__((packed));

_Static_assert(sizeof(struct mpf_intel) == 16, "MP floating pointer is 16 bytes");
_Static_assert(sizeof(struct mpc_table) == 44, "MP table header is 44 bytes");
_Static_assert(sizeof(struct mpc_cpu) == 20, "processor entry is 20 bytes");
_Static_assert(sizeof(struct mpc_bus) == 8 && sizeof(struct mpc_ioapic) == 8 &&
	       sizeof(struct mpc_intsrc) == 8, "other entries are 8 bytes");

enum { MP_PROCESSOR = 0, MP_BUS = 1, MP_IOAPIC = 2, MP_INTSRC = 3, MP_LINTSRC = 4 };
enum { MP_INT = 0, MP_NMI = 1, MP_EXTINT = 3 };
#define CPU_ENABLED        1
#define CPU_BOOTPROCESSOR  2
#define MPC_APIC_USABLE    1
#define LAPIC_VERSION      0x14
#define IOAPIC_VERSION     0x11
#define IOAPIC_PINS        24   /* KVM's in-kernel IOAPIC */
#define MP_SPEC_REV        4

#define MPTABLE_BYTES(n) (sizeof(struct mpf_intel) + sizeof(struct mpc_table) +        \
			  (n) * sizeof(struct mpc_cpu) + sizeof(struct mpc_bus) +         \
			  sizeof(struct mpc_ioapic) + (IOAPIC_PINS + 2) * sizeof(struct mpc_intsrc))
_Static_assert(MPTABLE_BYTES(MPTABLE_MAX_CPUS) <= MPTABLE_MAX, "MP table fits its area");

static uint8_t checksum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint8_t sum = 0;
	while (len--)
		sum += *b++;
	return (uint8_t)-sum;
}

int mptable_write(const struct guest_mem *gm, unsigned ncpus)
{
	if (ncpus == 0 || ncpus > MPTABLE_MAX_CPUS) {
		vmm_err("%u vCPUs requested; between 1 and %d are supported", ncpus, MPTABLE_MAX_CPUS);
		return -1;
	}
	uint8_t *area = guest_mem_ptr(gm, MPTABLE_ADDR, MPTABLE_MAX);
	if (!area) {
		vmm_err("guest RAM is too small for the MP table");
		return -1;
	}
	memset(area, 0, MPTABLE_MAX);
	struct mpf_intel *mpf = (struct mpf_intel *)area;
	struct mpc_table *mpc = (struct mpc_table *)(area + sizeof(*mpf));
	uint8_t *p = (uint8_t *)(mpc + 1);
	uint8_t ioapic_id = (uint8_t)ncpus;
	uint16_t count = 0;

	for (unsigned i = 0; i < ncpus; i++, count++) {
		struct mpc_cpu c = {
			.type = MP_PROCESSOR, .apicid = (uint8_t)i, .apicver = LAPIC_VERSION,
			.cpuflag = CPU_ENABLED | (i == 0 ? CPU_BOOTPROCESSOR : 0),
			.cpufeature = 0x600,   /* family 6: what Linux expects of a modern CPU */
		};
		memcpy(p, &c, sizeof(c));
		p += sizeof(c);
	}
	struct mpc_bus bus = { .type = MP_BUS, .busid = 0, .bustype = { 'I', 'S', 'A', ' ', ' ', ' ' } };
	memcpy(p, &bus, sizeof(bus));
	p += sizeof(bus);
	count++;
	struct mpc_ioapic io = { .type = MP_IOAPIC, .apicid = ioapic_id, .apicver = IOAPIC_VERSION,
				 .flags = MPC_APIC_USABLE, .apicaddr = (uint32_t)IOAPIC_ADDR };
	memcpy(p, &io, sizeof(io));
	p += sizeof(io);
	count++;
	/* Identity routing of every IOAPIC pin, matching KVM's default GSI
	 * routing, so that device IRQs above 15 resolve too. */
	for (uint8_t pin = 0; pin < IOAPIC_PINS; pin++, count++) {
		struct mpc_intsrc s = { .type = MP_INTSRC, .irqtype = MP_INT, .srcbus = 0,
					.srcbusirq = pin, .dstapic = ioapic_id, .dstirq = pin };
		memcpy(p, &s, sizeof(s));
		p += sizeof(s);
	}
	/* LINT0 takes the PIC's ExtINT, LINT1 the NMI, on every CPU. */
	struct mpc_intsrc lint0 = { .type = MP_LINTSRC, .irqtype = MP_EXTINT, .dstapic = 0xff, .dstirq = 0 };
	struct mpc_intsrc lint1 = { .type = MP_LINTSRC, .irqtype = MP_NMI, .dstapic = 0xff, .dstirq = 1 };
	memcpy(p, &lint0, sizeof(lint0));
	p += sizeof(lint0);
	memcpy(p, &lint1, sizeof(lint1));
	p += sizeof(lint1);
	count += 2;

	memcpy(mpc->signature, "PCMP", 4);
	mpc->length = (uint16_t)(p - (uint8_t *)mpc);
	mpc->spec = MP_SPEC_REV;
	memcpy(mpc->oem, "VMRUN   ", 8);
	memcpy(mpc->productid, "MICROVM     ", 12);
	mpc->oemcount = count;
	mpc->lapic = (uint32_t)LAPIC_ADDR;
	mpc->checksum = checksum(mpc, mpc->length);

	memcpy(mpf->signature, "_MP_", 4);
	mpf->physptr = (uint32_t)(MPTABLE_ADDR + sizeof(*mpf));
	mpf->length = 1;
	mpf->specification = MP_SPEC_REV;
	mpf->checksum = checksum(mpf, sizeof(*mpf));
	return 0;
}
