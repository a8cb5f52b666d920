/* One tunnel of the host proxy: bytes both ways between the guest's
 * connection and the remote one, non-blocking, so that one event loop
 * serves every tunnel of a run. The caps the issue asks of a tunnel are
 * enforced here: bytes each way and idle time. The owner polls the two
 * descriptors for what relay_events asks, calls relay_step with what
 * came back, and closes both once relay_step says the tunnel ended. */
#ifndef VMRUN_PROXY_RELAY_H
#define VMRUN_PROXY_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RELAY_BUF 131072  /* also what a request head and a ClientHello must fit in */

enum relay_side { RELAY_GUEST, RELAY_REMOTE };

enum relay_end {
	RELAY_RUNNING,      /* not ended */
	RELAY_CLOSED,       /* both sides finished sending, and all was delivered */
	RELAY_UP_CAP,       /* the guest sent more than max_up */
	RELAY_DOWN_CAP,     /* the remote sent more than max_down */
	RELAY_IDLE,         /* nothing moved for idle_ms */
	RELAY_ERROR,        /* a read or write failed (errno in err) */
};

struct relay_limits {
	uint64_t max_up, max_down;   /* bytes from the guest, from the remote */
	int64_t idle_ms;
};

struct relay {
	int fd[2];                     /* by enum relay_side */
	struct relay_limits lim;
	/* buf[s]: what side s sent, not yet written to the other side. */
	uint8_t buf[2][RELAY_BUF];
	size_t len[2], off[2];
	bool eof[2];                   /* side s finished sending */
	bool shut[2];                  /* side s was told (SHUT_WR) that the other finished */
	uint64_t moved[2];             /* bytes side s sent, delivered or not */
	int64_t last_ms;               /* when a byte last moved */
	enum relay_end end;
	int err;
};

/* Start a tunnel between guest and remote (non-blocking descriptors,
 * still the caller's), with first[n]: what the guest sent after its
 * request head, to go to the remote first (counted in max_up). */
void relay_init(struct relay *r, int guest, int remote, const uint8_t *first, size_t n, const struct relay_limits *lim,
		int64_t now_ms);

/* The poll events each side's descriptor waits for now (0: none). */
short relay_events(const struct relay *r, enum relay_side s);

/* Ms until the tunnel idles out (0: it has). */
int64_t relay_timeout_ms(const struct relay *r, int64_t now_ms);

/* Move what can be moved, given each side's revents: the tunnel's end
 * (RELAY_RUNNING while it goes on). */
enum relay_end relay_step(struct relay *r, const short revents[2], int64_t now_ms);

/* The end's name for the audit ("closed", "up_cap", ...). */
const char *relay_end_name(enum relay_end e);

#endif
