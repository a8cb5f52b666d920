#include "i8042.h"

#include <string.h>

void i8042_read(void *opaque, uint64_t offset, uint8_t *data, uint32_t len)
{
	(void)opaque;
	(void)offset;
	/* Status 0: no output byte, input buffer empty. Data 0. */
	memset(data, 0, len);
}

void i8042_write_data(void *opaque, uint64_t offset, const uint8_t *data, uint32_t len)
{
	(void)opaque;
	(void)offset;
	(void)data;
	(void)len;
}

void i8042_write_command(void *opaque, uint64_t offset, const uint8_t *data, uint32_t len)
{
	struct i8042 *k = opaque;
	(void)offset;
	(void)len;
	if (data[0] == I8042_CMD_RESET && k->reset)
		k->reset(k->ctx);
}
