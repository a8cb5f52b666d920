/* A run's directory under the config's run_dir: the contract between
 * vmrund and its per-run worker (vmrund-worker), the one place both read
 * their file names and formats from.
 *
 *   ID/request.json   the run's spec in its canonical JSON (host/run/run_spec.h); vmrund
 *   ID/output         the output as it arrives: records (below); worker
 *   ID/result.json    vmrun's result object, renamed into place; worker
 *   ID/vm-id          the run library's run id (its cgroup's name); worker
 *   ID/worker.log     the worker's own stderr
 *   ID/files/         the request's files, written out by the worker (argv
 *                     mode: its workspace_files too, at their paths)
 *   ID/workspace/     source mode's workspace_files, at their paths
 *   ID/artifacts/     what the run left, when the request keeps it
 *
 * When the run ends vmrund keeps output (the order in which the streams
 * interleaved, for replays and Piston's "output") and artifacts/, removes
 * them after the retention time, and deletes the rest at once; a
 * cancelled run keeps nothing. */
#ifndef VMRUND_SPOOL_H
#define VMRUND_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "store.h"

#define SPOOL_REQUEST   "request.json"
#define SPOOL_OUTPUT    "output"
#define SPOOL_RESULT    "result.json"
#define SPOOL_VM_ID     "vm-id"
#define SPOOL_LOG       "worker.log"
/* The worker's TMPDIR, where the run library makes its own run
 * directory (vmrun-IDPREFIX-XXXXXX) with the workspace image in it:
 * SPOOL_LIB_TMP under the config's run_dir, on disk (never a tmpfs such
 * as /run, whose pages a workspace would pin in memory), root's, mode
 * 0700. At most SPOOL_LIB_TMP_MAX bytes, since the vsock Unix sockets'
 * paths inside it (DIR/vmrun-ID12-XXXXXX/sock/v.sock_PORT) must fit
 * sun_path. */
#define SPOOL_LIB_TMP     "vm"
#define SPOOL_LIB_TMP_MAX 56
#define SPOOL_FILES     "files"
#define SPOOL_WORKSPACE "workspace"   /* source mode's workspace_files, at their paths */
#define SPOOL_ARTIFACTS "artifacts"
/* A verification run's (a request with from_checkpoint): the path of the
 * checkpoint's directory on this node, one line that vmrund writes. The
 * worker checks its expect_digest again and runs in a copy of its
 * workspace. */
#define SPOOL_CHECKPOINT "checkpoint"

/* The gate: the worker's descriptor SPOOL_GATE_FD is a SOCK_SEQPACKET
 * socket to vmrund. When the VM has booted and the command is about to
 * start, the worker sends SPOOL_GATE_ASK and waits; vmrund records in the
 * store that the command may now have effects (so a node's death after
 * this ends the run lost rather than running it again elsewhere) and
 * answers SPOOL_GATE_GO, or SPOOL_GATE_NO when the run is no longer this
 * node's to run (cancelled, or taken back): then nothing starts. A socket
 * that closes is a no. */
#define SPOOL_GATE_FD  3
#define SPOOL_GATE_ASK "command"
#define SPOOL_GATE_GO  "go"
#define SPOOL_GATE_NO  "no"

/* One output record's header, then len bytes of data. */
struct spool_record {
	uint8_t stage;     /* enum proto_stage_kind */
	uint8_t stream;    /* PROTO_STDOUT or PROTO_STDERR */
	uint16_t zero;
	uint32_t len;
};
_Static_assert(sizeof(struct spool_record) == 8, "the output file's record header is 8 bytes");

#define SPOOL_RECORD_MAX (1u << 20)   /* data bytes in one record at most */

/* A repeated run's (run_spec's repeat) next run starts: a record of this
 * stream (stage PROTO_STAGE_RUN) whose data is the run's number, from 2,
 * a uint32_t in host order. What follows it is that run's output; a
 * reader that keeps the output as text keeps the last run's. */
#define SPOOL_NEXT_RUN 0xffu

/* The worker's TMPDIR for run_dir into out: 0, or -1 when the path is
 * longer than SPOOL_LIB_TMP_MAX. Pure. */
int spool_lib_tmp(const char *run_dir, char *out, size_t len);

/* Append one record to fd (O_APPEND) in one write, so that a reader never
 * sees half a header. 0, or -1 with errno. */
int spool_append(int fd, unsigned stage, unsigned stream, const uint8_t *data, size_t len);

/* A file of the run directory written whole: len bytes of data into
 * path, which must not be a symlink; excl: a new file (it must not exist),
 * else one made or truncated; with mode. 0, or -1 with errno set (EIO
 * for a write that made no progress). */
int spool_write_file(const char *path, const void *data, size_t len, bool excl, mode_t mode);

/* A file of the run directory read whole: name at dirfd (AT_FDCWD for a
 * path), which must be a regular file, not a symlink, of at most max
 * bytes. 0 with *out malloc'd (*len bytes, and a NUL after them, so text
 * is a string), or -1. */
int spool_read_file(int dirfd, const char *name, uint64_t max, uint8_t **out, size_t *len);

/* The complete records at the start of buf (len bytes), each to fn
 * (stream PROTO_STDOUT, PROTO_STDERR or SPOOL_NEXT_RUN); stops at a
 * partial one. Returns the bytes consumed, or -1 when a header is
 * malformed (the file is not ours). Pure. */
long spool_parse(const uint8_t *buf, size_t len,
		 void (*fn)(void *ctx, unsigned stage, unsigned stream, const uint8_t *data, size_t n), void *ctx);

/* The state a run ended in, from the outcome its result said (NULL: the
 * worker left none readable) and whether it was cancelled. Pure. */
enum run_state spool_state_of(const struct run_outcome *o, bool cancelled);

/* A result's JSON text (result.json, as stored) parsed: NULL when it is
 * not JSON. Output that held a NUL byte is "\u0000" there, which jansson
 * takes only when told: every reader of a result parses it here. */
json_t *spool_result_parse(const char *text);

/* A time (Unix ms) as the APIs show it: UTC ISO 8601 with milliseconds,
 * or null for 0 (not yet) and for one outside years 1..9999 (a guest's
 * forged mtime). */
json_t *spool_iso_time(int64_t ms);


/* Remove the run directory dir, or when keep everything in it but output
 * and artifacts/ (then dir stays for them). No symlink is followed. 0, or
 * -1 with errno when something could not be removed. */
int spool_clean(const char *dir, bool keep);

/* Text of n bytes with every invalid UTF-8 sequence (and NUL) replaced by
 * U+FFFD, NUL-terminated, in a malloc'd buffer (NULL: out of memory), its
 * length in *outlen: what jansson, which takes only valid UTF-8, may
 * carry. Pure. */
char *spool_utf8(const uint8_t *p, size_t n, size_t *outlen);

/* The output file's text per stage, its streams interleaved as they
 * arrived (invalid UTF-8 as U+FFFD), the last run's of a repeated run:
 * out[0] the compile stage's, out[1]
 * the run stage's, each malloc'd (NULL when the file is not there or
 * memory ran out; free both). */
void spool_output_text(const char *path, char *out[2]);

#endif
