/* Sandbox mode's file operations, agent side (proto_sandbox.h's FILE_*).
 * Every path is looked up with the sandbox user's file-system ids
 * (setfsuid/setfsgid, which also drop root's file capabilities while they
 * are not 0), so the guest kernel alone decides what an operation may
 * touch; the agent adds one rule of its own: no file of procfs is read or
 * written (/proc/self is PID 1 itself, which the kernel lets read its own
 * memory whatever the ids). Reads are streamed as the host's queue has
 * room and as the host grants credit; writes arrive in FILE_DATA frames. */
#ifndef VMRUN_FILES_H
#define VMRUN_FILES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto_sandbox.h"
#include "sandbox.h"

#define FILES_MAX_OPEN     16      /* reads and writes under way at once */
#define FILES_LIST_MAX     4096    /* entries of one LIST; past them it is flagged truncated */
#define FILES_REMOVE_DEPTH 128     /* how deep REMOVE goes */

/* A READ or WRITE under way. */
struct file_stream {
	bool used, writing;
	uint32_t id;
	int fd;
	int error;          /* a write's first failure (errno), reported at its end */
	uint64_t credit;    /* a read's bytes the host has room for (PROTO_READ_WINDOW at most) */
};

struct files {
	const char *cwd;    /* what relative paths are relative to */
	uid_t uid;          /* whose file-system ids; (uid_t)-1: the agent's own (tests) */
	gid_t gid;
	struct file_stream open[FILES_MAX_OPEN];
};

/* Start with nothing open. */
void files_init(struct files *f, const char *cwd, uid_t uid, gid_t gid);

/* Serve one FILE_OP: STAT, LIST, MKDIR, REMOVE and RENAME at once (their
 * FILE_DATA and FILE_END queued on q), READ and WRITE started (READ's
 * data follows from files_pump, WRITE's from files_data). Returns 0, or
 * -1 when q refused a frame. */
int files_request(struct files *f, const struct proto_file_req *r, struct outq *q);

/* WRITE's data for id (n 0: the end, answered with FILE_END), or a READ's
 * credit (4 bytes). Data for an id with nothing under way is dropped (the
 * write failed at its start, and said so). Returns 0, or -1 when q
 * refused a frame. */
int files_data(struct files *f, uint32_t id, const uint8_t *p, uint32_t n, struct outq *q);

/* Move the reads under way on while q has room. Returns 0, or -1 when q
 * refused a frame. */
int files_pump(struct files *f, struct outq *q);

/* Whether a read under way has credit left (more to send when q has room). */
bool files_reading(const struct files *f);

/* Close everything under way. */
void files_release(struct files *f);

#endif
