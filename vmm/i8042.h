/* The part of an i8042 keyboard controller a guest uses to reset the
 * machine: Linux's reboot=k writes 0xfe (pulse reset line) to port 0x64
 * after waiting for an empty input buffer, which reads as always empty. */
#ifndef VMM_I8042_H
#define VMM_I8042_H

#include <stdint.h>

#define I8042_DATA_PORT    0x60
#define I8042_COMMAND_PORT 0x64
#define I8042_CMD_RESET    0xfe

struct i8042 {
	void (*reset)(void *ctx);   /* called when the guest pulses reset */
	void *ctx;
};

/* Bus callbacks, registered at the data port (1 byte) and the command port (1 byte). */
void i8042_read(void *opaque, uint64_t offset, uint8_t *data, uint32_t len);
void i8042_write_data(void *opaque, uint64_t offset, const uint8_t *data, uint32_t len);
void i8042_write_command(void *opaque, uint64_t offset, const uint8_t *data, uint32_t len);

#endif
