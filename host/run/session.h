/* One run, host side: the conversation with the guest agent over the
 * vsock stream that vmm forwards to a Unix socket (guest-agent/proto.h).
 * Used by vmrun and by the agent's VM tests. */
#ifndef VMRUN_SESSION_H
#define VMRUN_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

enum session_status {
	SESSION_DONE = 0,      /* EXIT received */
	SESSION_TIMEOUT = 1,   /* the deadline passed first */
	SESSION_FAILED = 2,    /* agent ERROR, malformed stream, or the connection ended */
	SESSION_CANCELLED = 3, /* the cancel fd became readable */
};

/* What a gate returns when the deadline passed while it waited. */
#define SESSION_GATE_LATE 1

/* Output as it arrives: of stage (0..), type PROTO_STDOUT or PROTO_STDERR. */
typedef void (*session_output_fn)(void *ctx, unsigned stage, uint16_t type, const uint8_t *data, uint32_t len);

struct session_io {
	int stdin_fd;                 /* the command's stdin, read to EOF; -1 for none */
	int cancel_fd;                /* readable: give up at once; -1 for never */
	session_output_fn output;
	/* Called once, after the agent's HELLO and before the REQUEST that
	 * starts the command, with the session's deadline (clock_mono_ms
	 * terms): 0 lets it start; SESSION_GATE_LATE, that the deadline came
	 * first, ends the session SESSION_TIMEOUT; anything else ends it
	 * SESSION_CANCELLED; with nothing started either way (NULL: always
	 * start). It may block, never past the deadline. vmrund records
	 * here, durably, that the command may have had effects. */
	int (*gate)(void *ctx, int64_t deadline_ms);
	void *ctx;
	/* Each stage's own wall-clock limit from its start (the REQUEST for
	 * the first, the previous stage's EXIT for the next), in ms; 0: only
	 * the session's deadline. */
	int64_t stage_timeout_ms[PROTO_MAX_STAGES];
	/* The run's id (proto_valid_run_id: vmrun's 32 hex digits), sent in
	 * the REQUEST as its RUN_ID; the session fails without one. */
	const char *run_id;
};

struct session_result {
	unsigned stages;              /* stages the agent was asked to start so far */
	unsigned exits;               /* EXIT frames received, one per stage in order */
	struct proto_exit exit[PROTO_MAX_STAGES];
	int64_t stage_start_ms[PROTO_MAX_STAGES], stage_end_ms[PROTO_MAX_STAGES];   /* monotonic */
	bool stage_timeout;           /* SESSION_TIMEOUT came from the stage's own limit */
	char agent[64];               /* the agent's name from HELLO, made printable */
	int64_t hello_ms;             /* monotonic ms when HELLO arrived, 0 if never */
	char error[512];              /* why, when SESSION_FAILED; the agent's text made printable */
};

/* Guest text made safe to print or store in a message: the first n bytes
 * of src copied into dst (cap bytes with the NUL; cut to fit), every byte
 * outside printable ASCII (0x20..0x7e) replaced by '?', so that a hostile
 * guest cannot send terminal escape sequences, break a one-line message or
 * end it early with a NUL. Returns dst. Pure. */
char *session_printable(char *dst, size_t cap, const void *src, size_t n);

/* Milliseconds left until deadline_ms, as a poll() timeout: 0 when past,
 * at most a minute (callers loop and look at the clock again). */
int session_left_ms(int64_t deadline_ms);

/* Wait for the agent's connection on listen_fd until deadline_ms, until
 * watch_fd (a pidfd of vmm; -1 for none) says the VM is gone, or until
 * cancel_fd (-1 for none) is readable. Returns the connected fd, or -1
 * (reason in err). */
int session_accept(int listen_fd, int watch_fd, int cancel_fd, int64_t deadline_ms, char *err, size_t errlen);

/* Run the conversation on fd: HELLO, REQUEST, stdin, then each stage's
 * output and EXIT until proto_stage_continues says the session is over
 * (SESSION_DONE). The REQUEST sent is req with what makes the guest
 * unique filled in as it is sent: a fresh seed (getrandom), the time
 * (CLOCK_REALTIME) and io's run_id; req's own seed, time_ns and run_id
 * are not read, and req is not changed. Never blocks past deadline_ms,
 * nor past the current stage's own limit, nor past io's cancel_fd
 * becoming readable. Does not close fd. Reentrant: its state is its own.
 * A sandbox's request (req->sandbox) sends no stdin and ends SESSION_DONE
 * at the agent's READY, with nothing of the agent's read past it: fd is
 * then the sandbox's (proto_sandbox.h), the caller's to go on with. */
enum session_status session_run(int fd, const struct proto_request *req, const struct session_io *io,
				int64_t deadline_ms, struct session_result *res);

/* A paused sandbox's agent connected again on fd: send RESUME with the
 * time (CLOCK_REALTIME) and, with reseed (a fork of a checkpoint), a fresh
 * seed (getrandom), and wait until deadline_ms (or cancel_fd, -1 for
 * none) for its READY, the only frame it may send first. Returns 0, or -1
 * with why in err. */
int session_resume(int fd, bool reseed, int64_t deadline_ms, int cancel_fd, char *err, size_t errlen);

#endif
