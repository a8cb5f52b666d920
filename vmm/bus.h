/* Address-range dispatch for port I/O and MMIO exits. Devices register
 * before any vCPU runs; lookups afterwards are lock-free reads. */
#ifndef VMM_BUS_H
#define VMM_BUS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define BUS_MAX_RANGES 32

/* Device callbacks: offset is relative to the registered base; len is 1..8. */
typedef void (*bus_read_fn)(void *opaque, uint64_t offset, uint8_t *data, uint32_t len);
typedef void (*bus_write_fn)(void *opaque, uint64_t offset, const uint8_t *data, uint32_t len);

struct bus_range {
	uint64_t base, len;
	bus_read_fn read;
	bus_write_fn write;
	void *opaque;
};

struct bus {
	struct bus_range ranges[BUS_MAX_RANGES];
	unsigned n;
	atomic_ulong unhandled;   /* accesses that hit no device */
};

/* Add [base, base+len) for a device. Returns 0, or -1 after one error line
 * when it is empty, wraps, overlaps another range or the bus is full. */
int bus_register(struct bus *b, uint64_t base, uint64_t len, bus_read_fn rd, bus_write_fn wr,
		 void *opaque);

/* Dispatch a read of len (1..8) bytes at addr. An access that no device
 * claims wholly reads as all ones, is counted, and returns false. */
bool bus_read(struct bus *b, uint64_t addr, uint8_t *data, uint32_t len);

/* Dispatch a write; unclaimed writes are dropped, counted, and return false. */
bool bus_write(struct bus *b, uint64_t addr, const uint8_t *data, uint32_t len);

#endif
