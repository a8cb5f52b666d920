/* Sandbox mode of the host-agent wire format (proto.h): one VM that
 * serves many commands and file operations for its whole life. Compiled
 * into vmrun's sandbox supervisor and the guest agent, like proto.h.
 *
 * A REQUEST with the SANDBOX field (and no STAGE) starts it. The agent
 * makes the guest unique (SEED, TIME), then answers READY and serves
 * frames until the host closes the connection. Every frame below begins
 * with a u32 id that the host chose: a command's, or a file operation's.
 * Ids are the host's to keep unique among what is running; an id the
 * agent does not know (a command that already ended) is not an error,
 * since the host may write to a command as it ends.
 *
 *   agent -> host  READY       (empty) sandbox mode is up
 *   host -> agent  CMD_START   id, then fields: ARG (>= 1), ENV, CWD,
 *                              TIMEOUT_MS (u64, not 0), PTY (u16 cols,
 *                              u16 rows, each 1..PROTO_PTY_MAX: the
 *                              command runs on a terminal of that size,
 *                              its controlling tty; all it writes is
 *                              its STDOUT, its STDIN goes to the
 *                              terminal), CPU_MS and MEMORY_KIB (u64
 *                              each, not 0: the command's own limits,
 *                              as a run stage's: RLIMIT_CPU, and its
 *                              cgroup's memory.max; its EXIT says
 *                              PROTO_EXIT_CPU_EXCEEDED and
 *                              PROTO_EXIT_OOM_KILLED)
 *   host -> agent  CMD_RESIZE  id, u16 cols, u16 rows: a terminal's new
 *                              size (a command without one ignores it)
 *   host -> agent  CMD_STDIN   id, data; empty data closes its stdin
 *   host -> agent  CMD_SIGNAL  id, u32 signal (1..PROTO_MAX_SIGNAL), to
 *                              the command's process group; SIGKILL kills
 *                              its whole cgroup
 *   agent -> host  CMD_OUTPUT  id, u32 PROTO_STDOUT or PROTO_STDERR, data
 *   agent -> host  CMD_EXIT    id, then a struct proto_exit (stage 0): the
 *                              command and every process it left are gone
 *   host -> agent  FILE_OP     id, u32 enum proto_file_op, then fields:
 *                              PATH (always), PATH2 (RENAME's target),
 *                              MODE (u32, WRITE and MKDIR; default 0644
 *                              and 0755)
 *   both           FILE_DATA   id, data: WRITE's bytes from the host (an
 *                              empty one ends them); READ's bytes and
 *                              LIST's entries from the agent; on a READ
 *                              from the host, a u32 of credit: the host
 *                              took that many bytes. A READ (TAR_OUT
 *                              too) sends at most
 *                              PROTO_READ_WINDOW bytes beyond what the host
 *                              granted, so the host holds no more than that
 *   agent -> host  FILE_END    id, i32 error (0 or an errno value), u32
 *                              flags (PROTO_FILE_TRUNCATED), then STAT's
 *                              entry when error is 0
 *
 * Pausing (the host saves the whole VM and starts it again later, maybe
 * after days; proto_sandbox's only frames without an id):
 *   host -> agent  PAUSE       (empty) the agent stops reading commands'
 *                              pipes and file data, sends what it has
 *                              queued, then PAUSED, and waits
 *   agent -> host  PAUSED      (empty) the last frame before the pause:
 *                              everything sent before it reached the host
 *   host -> agent  RESUME      u64 CLOCK_REALTIME in ns (0: leave the
 *                              clock), then (a fork of a checkpoint) a
 *                              SEED for the kernel RNG, PROTO_SEED_LEN
 *                              bytes: go on, answered READY. Sent on the
 *                              same connection when the pause was called
 *                              off; after a real pause the VM's vsock
 *                              was reset, and the paused agent connects
 *                              to PROTO_VSOCK_PORT again, where RESUME is
 *                              the host's first frame. Commands, their
 *                              pipes and deadlines (on the guest's
 *                              monotonic clock, which a pause stops) go on.
 *
 * A command's argv[0] must be on the REQUEST's allowlist (the host sends
 * its runtime's whole manifest in sandbox mode). The REQUEST's limits
 * apply as rlimits of each command: NPROC counts the sandbox user's
 * processes, all commands together; the REQUEST's CPU_MS and MEMORY_KIB
 * are a stage's and do not apply (the VM's memory is the sandbox's; a
 * command's own CPU_MS and MEMORY_KIB hold it alone). Paths are absolute, or
 * relative to the workspace; file operations run with the sandbox user's
 * file-system ids, so the guest kernel decides what they may touch.
 *
 * An entry (STAT's, and LIST's, packed one after another in FILE_DATA):
 *   u32 mode (st_mode: type and permissions, no bit past
 *   PROTO_ENTRY_MODE_BITS), u32 zero, u64 size (at most INT64_MAX, an
 *   off_t's), i64 mtime_ns, u16 name length, name (1..PROTO_NAME_MAX
 *   bytes, no '/' and no NUL, not "." or "..") */
#ifndef VMRUN_PROTO_SANDBOX_H
#define VMRUN_PROTO_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define PROTO_SB_ID_LEN      4u
#define PROTO_SB_MAX_ARGS    256u
#define PROTO_SB_MAX_ENV     64u
#define PROTO_NAME_MAX       255u    /* NAME_MAX */
#define PROTO_ENTRY_HDR      26u     /* an entry before its name */
#define PROTO_FILE_END_LEN   12u     /* FILE_END before its entry */
#define PROTO_ENTRY_MODE_BITS 0177777u /* S_IFMT and the permission bits */
#define PROTO_CMD_EXIT_LEN   (PROTO_SB_ID_LEN + PROTO_EXIT_LEN)
/* FILE_DATA's and CMD_OUTPUT's most data in one frame. */
#define PROTO_SB_CHUNK       (PROTO_MAX_PAYLOAD - 8u)
/* A READ's bytes in flight: its credit to start with, and at most. */
#define PROTO_READ_WINDOW    (1024u * 1024)
/* RESUME's payload: the time (and a fork's seed after it). */
#define PROTO_RESUME_LEN     8u

/* FILE_END flags: LIST stopped at the agent's cap on entries. */
#define PROTO_FILE_TRUNCATED 1u
/* EXIT flag in sandbox mode: the command's TIMEOUT_MS ended it. */
#define PROTO_EXIT_TIMED_OUT 16u

enum proto_file_op {
	PROTO_FILE_READ = 1,
	PROTO_FILE_WRITE = 2,     /* create or truncate, then FILE_DATA */
	PROTO_FILE_LIST = 3,
	PROTO_FILE_STAT = 4,      /* of the name itself: a symlink is not followed */
	PROTO_FILE_MKDIR = 5,     /* with its parents; one that exists is fine */
	PROTO_FILE_REMOVE = 6,    /* a directory with everything in it */
	PROTO_FILE_RENAME = 7,    /* PATH to PATH2, replacing what PATH2 names */
	PROTO_FILE_TAR_OUT = 8,   /* the directory PATH as a tar stream: FILE_DATA as a READ's */
	PROTO_FILE_TAR_IN = 9,    /* FILE_DATA as a WRITE's: a tar stream extracted into PATH */
};
#define PROTO_FILE_OP_LAST PROTO_FILE_TAR_IN

/* A decoded CMD_START. Strings point into storage, NUL-terminated. */
struct proto_cmd {
	uint32_t id;
	unsigned argc, envc;
	char *argv[PROTO_SB_MAX_ARGS + 1];   /* NULL-terminated */
	char *env[PROTO_SB_MAX_ENV + 1];     /* NULL-terminated: grants over the sandbox's */
	char *cwd;                            /* NULL: the workspace */
	uint64_t timeout_ms;                  /* 0: none */
	uint16_t pty_cols, pty_rows;          /* a terminal's size; 0: none, pipes */
	uint64_t cpu_ms, memory_kib;          /* its own limits; 0: none */
	char storage[PROTO_MAX_PAYLOAD + PROTO_SB_MAX_ARGS + PROTO_SB_MAX_ENV + 1];
};

/* A decoded FILE_OP. */
struct proto_file_req {
	uint32_t id, op;                 /* enum proto_file_op */
	uint32_t mode;                   /* permission bits (07777); 0: the default */
	char path[PROTO_MAX_STR + 1];
	char path2[PROTO_MAX_STR + 1];   /* "" unless RENAME */
};

/* One file's facts, as STAT and LIST carry them. */
struct proto_entry {
	uint32_t mode;
	uint64_t size;
	int64_t mtime_ns;
	char name[PROTO_NAME_MAX + 1];
};

/* Whether type is one of sandbox mode's frames (READY..PROTO_TYPE_LAST). */
bool proto_sb_type(uint16_t type);

/* Split a sandbox frame's payload into its id and the rest. Returns 0, or
 * -1 when it is shorter than an id. */
int proto_sb_split(const uint8_t *p, uint32_t len, uint32_t *id, const uint8_t **rest, uint32_t *restlen);

/* Build "id, then data (n bytes)" into buf (room for PROTO_SB_ID_LEN + n),
 * for CMD_STDIN and FILE_DATA. Returns the length. */
uint32_t proto_sb_put_id(uint8_t *buf, uint32_t id, const void *data, uint32_t n);

/* Encode c (its id, argv, env, cwd when set, timeout_ms, cpu_ms and
 * memory_kib when not 0) as a
 * CMD_START payload into buf. Returns its length, or 0 when c breaks a
 * rule decoding holds it to, or does not fit cap. */
size_t proto_encode_cmd(const struct proto_cmd *c, uint8_t *buf, size_t cap);

/* Decode and check a CMD_START payload into c: 1..PROTO_SB_MAX_ARGS args
 * with a non-empty argv[0], at most PROTO_SB_MAX_ENV NAME=VALUE grants,
 * CWD, TIMEOUT_MS, PTY, CPU_MS and MEMORY_KIB at most once (the numbers
 * not 0), no NUL in any string. Returns 0, or -1
 * with a reason in err. */
int proto_decode_cmd(const uint8_t *p, uint32_t len, struct proto_cmd *c, char *err, size_t errlen);

/* CMD_RESIZE's payload (8 bytes) and its check (cols and rows each
 * 1..PROTO_PTY_MAX). */
#define PROTO_PTY_MAX 4096u
void proto_encode_resize(uint8_t *buf, uint32_t id, uint16_t cols, uint16_t rows);
int proto_decode_resize(const uint8_t *p, uint32_t len, uint32_t *id, uint16_t *cols, uint16_t *rows, char *err,
			size_t errlen);

/* CMD_SIGNAL's payload (8 bytes) and its check. */
void proto_encode_signal(uint8_t *buf, uint32_t id, uint32_t sig);
int proto_decode_signal(const uint8_t *p, uint32_t len, uint32_t *id, uint32_t *sig, char *err, size_t errlen);

/* CMD_OUTPUT: "id, stream" (8 bytes) before the data, into hdr. */
void proto_encode_output_hdr(uint8_t *hdr, uint32_t id, uint16_t stream);
/* Check a CMD_OUTPUT payload: *stream is PROTO_STDOUT or PROTO_STDERR,
 * *data its bytes. Returns 0, or -1 with a reason. */
int proto_decode_output(const uint8_t *p, uint32_t len, uint32_t *id, uint16_t *stream, const uint8_t **data,
			uint32_t *n, char *err, size_t errlen);

/* CMD_EXIT (PROTO_CMD_EXIT_LEN bytes). Decoding holds the exit to
 * proto_decode_exit's rules, with PROTO_EXIT_TIMED_OUT also allowed and
 * stage 0. */
void proto_encode_cmd_exit(uint8_t *buf, uint32_t id, const struct proto_exit *e);
int proto_decode_cmd_exit(const uint8_t *p, uint32_t len, uint32_t *id, struct proto_exit *e, char *err,
			  size_t errlen);

/* FILE_OP: encode r (a known op, a path of 1..PROTO_MAX_STR bytes, path2
 * for RENAME only, mode only for WRITE and MKDIR). Returns the length, or 0
 * when r breaks those rules or does not fit cap. */
size_t proto_encode_file_req(const struct proto_file_req *r, uint8_t *buf, size_t cap);
int proto_decode_file_req(const uint8_t *p, uint32_t len, struct proto_file_req *r, char *err, size_t errlen);

/* Append entry e at buf + at (cap bytes in all). Returns the new length,
 * or 0 when it does not fit or e's name is not a valid name. */
size_t proto_put_entry(uint8_t *buf, size_t cap, size_t at, const struct proto_entry *e);
/* Take the entry at p + *at (len bytes in all) into e, moving *at past
 * it. Returns 0, or -1 with a reason (a short entry, a bad name, the
 * reserved word not 0, a mode or size no stat can have). */
int proto_next_entry(const uint8_t *p, uint32_t len, uint32_t *at, struct proto_entry *e, char *err, size_t errlen);

/* Whether name (n bytes) is a directory entry's name: 1..PROTO_NAME_MAX
 * bytes, no '/' or NUL, not "." or "..". */
bool proto_valid_name(const char *name, size_t n);

/* FILE_END: id, error, flags, and e when error is 0 and e is not NULL.
 * Returns the length, 0 when e does not fit cap. */
size_t proto_encode_file_end(uint8_t *buf, size_t cap, uint32_t id, int32_t error, uint32_t flags,
			     const struct proto_entry *e);
/* Check a FILE_END payload: error 0..4095, only known flags, and an entry
 * exactly when *has_entry comes back true (error 0 and more bytes). *id
 * is set whenever the payload holds one, refused or not, so that the
 * operation it ends can end failed. */
int proto_decode_file_end(const uint8_t *p, uint32_t len, uint32_t *id, int32_t *error, uint32_t *flags,
			  struct proto_entry *e, bool *has_entry, char *err, size_t errlen);

#endif
