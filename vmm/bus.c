#include "bus.h"

#include <string.h>

#include "log.h"

int bus_register(struct bus *b, uint64_t base, uint64_t len, bus_read_fn rd, bus_write_fn wr,
		 void *opaque)
{
	if (len == 0 || base + len < base || b->n == BUS_MAX_RANGES) {
		vmm_err("bus: cannot register 0x%llx+%llu", (unsigned long long)base,
			(unsigned long long)len);
		return -1;
	}
	for (unsigned i = 0; i < b->n; i++) {
		const struct bus_range *r = &b->ranges[i];
		if (base < r->base + r->len && r->base < base + len) {
			vmm_err("bus: 0x%llx+%llu overlaps 0x%llx+%llu", (unsigned long long)base,
				(unsigned long long)len, (unsigned long long)r->base,
				(unsigned long long)r->len);
			return -1;
		}
	}
	b->ranges[b->n++] = (struct bus_range){ base, len, rd, wr, opaque };
	return 0;
}

static const struct bus_range *find(const struct bus *b, uint64_t addr, uint32_t len)
{
	if (len == 0 || len > 8)
		return NULL;
	for (unsigned i = 0; i < b->n; i++) {
		const struct bus_range *r = &b->ranges[i];
		if (addr >= r->base && addr - r->base < r->len && len <= r->len - (addr - r->base))
			return r;
	}
	return NULL;
}

bool bus_read(struct bus *b, uint64_t addr, uint8_t *data, uint32_t len)
{
	const struct bus_range *r = find(b, addr, len);
	if (!r || !r->read) {
		memset(data, 0xff, len > 8 ? 8 : len);
		atomic_fetch_add_explicit(&b->unhandled, 1, memory_order_relaxed);
		return false;
	}
	r->read(r->opaque, addr - r->base, data, len);
	return true;
}

bool bus_write(struct bus *b, uint64_t addr, const uint8_t *data, uint32_t len)
{
	const struct bus_range *r = find(b, addr, len);
	if (!r || !r->write) {
		atomic_fetch_add_explicit(&b->unhandled, 1, memory_order_relaxed);
		return false;
	}
	r->write(r->opaque, addr - r->base, data, len);
	return true;
}
