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
	pid_t tar;          /* TAR_OUT, TAR_IN: the tar whose stdout or stdin fd is; 0: none */
	int tar_err;        /* its stderr, read and dropped so that it never blocks on it */
};

/* What makes and extracts a directory's tar: busybox's, in every image,
 * run as the sandbox user, so that the guest kernel decides what it may
 * read and write, as for every file operation. */
#define FILES_TAR "/bin/busybox"

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

/* Whether a read of a file under way has credit left (more to send at
 * once when q has room). */
bool files_reading(const struct files *f);

/* Whether a TAR_OUT under way has credit left: its tar's output comes
 * when tar writes it, so look again soon. */
bool files_waiting(const struct files *f);

/* Whether pid is one of the tars under way (PID 1's sweep of orphans
 * must leave it to files.c). */
bool files_owns(const struct files *f, pid_t pid);

/* Close everything under way. */
void files_release(struct files *f);

#endif
