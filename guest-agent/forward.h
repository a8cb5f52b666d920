/* Network by policy, guest side: a run whose REQUEST has NET gets the
 * guest's loopback up and a forwarder on PROTO_NET_PROXY_ADDR:
 * PROTO_NET_PROXY_PORT that relays each TCP connection to the host's
 * proxy over vsock (CID 2, the request's port). The guest has no NIC, so
 * that is its only way out, and the host decides what goes through. A run
 * without NET leaves loopback down: every IP connect in it fails.
 *
 * The relay is a poll loop over caller-given fds (struct forward,
 * forward_step), so the unit tests drive it with socketpairs in place of
 * vsock; forward_spawn runs it in a process of its own. */
#ifndef VMRUN_FORWARD_H
#define VMRUN_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Connections relayed at once; one more is accepted and closed at once,
 * so that the client fails fast rather than waiting in the backlog. */
#define FORWARD_MAX_CONNS 64
/* The listening socket's backlog. */
#define FORWARD_BACKLOG   64
/* Bytes buffered per direction and connection: the forwarder's memory is
 * fixed (about 2 MiB at FORWARD_MAX_CONNS), whatever the command does. */
#define FORWARD_BUF       16384u

/* Open the connection to the host for one guest connection: a
 * non-blocking stream fd whose connect has started (it may still be in
 * progress; the relay waits for it to be writable, then checks SO_ERROR),
 * or -1 when it cannot even start. The forwarder's is forward_dial_vsock;
 * tests hand back one end of a socketpair. */
typedef int (*forward_dial_fn)(void *arg);

/* One direction of a connection: bytes read from one side, not yet all
 * written to the other. */
struct forward_dir {
	size_t off, len;     /* the unwritten bytes: buf[off .. off + len) */
	bool eof;            /* the source side reached EOF */
	bool shut;           /* and the destination was told (shutdown SHUT_WR) */
	uint8_t buf[FORWARD_BUF];
};

/* A relayed connection; its slot is free while guest is -1. */
struct forward_conn {
	int guest, host;
	bool connecting;           /* host's connect not yet known to have succeeded */
	struct forward_dir up;     /* guest -> host */
	struct forward_dir down;   /* host -> guest */
};

/* The relay's whole state: fixed-size, allocated once by its owner. */
struct forward {
	int listen_fd;             /* non-blocking, listening */
	forward_dial_fn dial;
	void *dial_arg;
	struct forward_conn conn[FORWARD_MAX_CONNS];
};

/* Set IFF_UP on "lo" (where it is not up already), the only interface of
 * a guest without a NIC; Linux gives it 127.0.0.1 itself. Called only for
 * a run with NET, so that other runs have no IP at all. Returns 0, or -1
 * with why in err. */
int forward_loopback_up(char *err, size_t errlen);

/* A TCP socket listening on PROTO_NET_PROXY_ADDR:port (port 0: any, for
 * tests), non-blocking and close-on-exec (the command must not inherit
 * it), with SO_REUSEADDR and FORWARD_BACKLOG. Opened by the agent, once
 * per session, so that connections queue while no forwarder runs.
 * Returns the fd, or -1 with why in err. */
int forward_listen(uint16_t port, char *err, size_t errlen);

/* Start f on listen_fd with no connection; dial opens the host side. */
void forward_init(struct forward *f, int listen_fd, forward_dial_fn dial, void *dial_arg);

/* One round of the relay: wait up to timeout_ms (-1: no limit) for any
 * of f's fds, then accept new connections, finish connects, move bytes
 * both ways, pass each EOF on as a shutdown(SHUT_WR), and close a
 * connection once both directions ended or on any error. Returns 0, or
 * -1 when poll itself failed (errno set). */
int forward_step(struct forward *f, int timeout_ms);

/* How many connections f relays now. */
unsigned forward_active(const struct forward *f);

/* Close every connection of f (not its listening socket). */
void forward_close_all(struct forward *f);

/* The forwarder's dial: AF_VSOCK to VMADDR_CID_HOST, port *(uint32_t *)arg,
 * non-blocking. */
int forward_dial_vsock(void *arg);

/* Fork the forwarder: a root process (the command, another user, cannot
 * signal it) that keeps only listen_fd of the agent's fds, relays to vsock
 * port vsock_port, and dies with the agent (PR_SET_PDEATHSIG). Returns its
 * pid, or -1 with why in err. */
pid_t forward_spawn(int listen_fd, uint32_t vsock_port, char *err, size_t errlen);

/* Kill and reap the forwarder pid. A PID 1 agent's kill of every process
 * after a stage may have ended and reaped it already: not an error. */
void forward_stop(pid_t pid);

#endif
