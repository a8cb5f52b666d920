/* Sandbox mode, agent side (proto_sandbox.h): one connection that serves
 * many commands and file operations at once for the VM's whole life. A
 * poll loop over the host's socket, each command's pipes and pidfd, and
 * the file reads under way. What goes to the host waits in one queue:
 * while it holds more than SANDBOX_QUEUE_HIGH bytes, commands' pipes are
 * not read, so a command that writes faster than the host reads blocks in
 * its write (back-pressure) instead of growing the agent, and the host's
 * frames wait too (what they ask for would add to the queue). */
#ifndef VMRUN_SANDBOX_H
#define VMRUN_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent.h"
#include "proto.h"

#define SANDBOX_MAX_CMDS     64                 /* commands running at once */
#define SANDBOX_QUEUE_HIGH   (256u * 1024)      /* pipes and file reads wait above this */
#define SANDBOX_QUEUE_MAX    (4u * 1024 * 1024) /* past this the agent has a bug: the session ends */
#define SANDBOX_STDIN_MAX    (1024u * 1024)     /* a command's unwritten stdin; past it the rest is dropped
						      and its stdin closed */

/* Frames waiting for the host's socket. */
struct outq {
	uint8_t *buf;
	size_t head, len, cap;
};

/* Queue one frame of type whose payload is a (alen bytes) then b (blen).
 * Returns 0, or -1 when the queue would pass SANDBOX_QUEUE_MAX or memory
 * ran out. */
int outq_put(struct outq *q, uint16_t type, const void *a, uint32_t alen, const void *b, uint32_t blen);

/* Whether the queue is past SANDBOX_QUEUE_HIGH: time to stop producing. */
bool outq_full(const struct outq *q);

/* Serve sandbox mode on fd after its REQUEST req (already decoded, the
 * guest made unique): READY, then every frame until the host closes the
 * connection, which ends every command still running (0). listen_fd is
 * the network forwarder's socket when req has NET (else -1): one
 * forwarder serves the sandbox's whole life. Returns -1 with a reason in
 * err when the agent fails or the host breaks the protocol. */
int sandbox_serve(int fd, struct proto_reader *rd, const struct proto_request *req, const struct agent_config *cfg,
		  int listen_fd, char *err, size_t errlen);

#endif
