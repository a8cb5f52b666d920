/* The host-agent wire format: the one definition that vmrun (host) and the
 * guest agent both compile.
 *
 * A stream of frames over one vsock connection (the agent connects to the
 * host, CID 2, port PROTO_VSOCK_PORT). Every frame is an 8-byte header and
 * a payload:
 *
 *   u32 len    payload bytes, at most PROTO_MAX_PAYLOAD
 *   u16 type   enum proto_type
 *   u16 zero   must be 0
 *
 * All integers are little-endian. A session:
 *
 *   agent -> host   HELLO    u32 version, then the agent's name (text)
 *   host  -> agent  REQUEST  u32 version, then the run: fields as TLVs
 *   host  -> agent  STDIN    data for the run stage; an empty STDIN frame
 *                   is end of input
 *   then for each stage, in order:
 *   agent -> host   STDOUT / STDERR  the stage's output, at most max_output
 *                   bytes per stream and stage; the rest is dropped and
 *                   flagged in its EXIT
 *   agent -> host   EXIT     struct proto_exit of that stage
 *   agent -> host   ERROR    text: the agent failed; ends the session
 * The session ends after the last stage's EXIT, or after the EXIT of a
 * stage that did not succeed (proto_stage_continues). Each side refuses a
 * version other than its own: the host a HELLO's, the agent a REQUEST's.
 *
 * REQUEST fields, each u16 tag, u16 len, len bytes:
 *   STAGE (1..PROTO_MAX_STAGES)  u32 enum proto_stage_kind: starts a stage;
 *                          COMPILE stages come first, the RUN stage last
 *   of the stage it follows:
 *     ARG (repeated, >= 1) one argv element, no NUL, at most PROTO_MAX_STR
 *     CPU_MS               u64 CPU time limit in ms (RLIMIT_CPU, rounded up
 *                          to whole seconds), at most once, not 0
 *     MEMORY_KIB           u64 memory limit (a cgroup's memory.max), at most
 *                          once, not 0 (no field: no limit)
 *   of the whole run:
 *     ENV (repeated)       "NAME=VALUE" granted to the command
 *     ALLOW (repeated)     an absolute program path a stage may start
 *     MAX_OUTPUT, NPROC, NOFILE, FSIZE   u64 limits (len 8), each once
 *     NET                  u32 (len 4) PROTO_NET_VSOCK_PORT, at most once:
 *                          the run may use the network, through the host's
 *                          proxy; the agent starts its forwarder (no field:
 *                          no network, the guest's loopback stays down)
 *   what makes this guest unique, each exactly once (since protocol 4:
 *   the VM may be one of many restored from the same snapshot, with the
 *   same RNG state and a clock stopped when the snapshot was taken):
 *     SEED                 PROTO_SEED_LEN bytes of host randomness, which
 *                          the agent adds to the kernel RNG and reseeds it
 *     TIME                 u64 (len 8) the host's CLOCK_REALTIME in ns when
 *                          the request was sent, not 0: the guest's clock
 *     RUN_ID               the run's id, 1..PROTO_RUN_ID_MAX chars of
 *                          [0-9a-f]: VMRUN_RUN_ID in every stage's env
 *   SANDBOX (len 0, since protocol 5) instead of any STAGE: a sandbox,
 *   which serves commands and file operations until the host closes the
 *   connection (proto_sandbox.h); the limits apply to each command
 * with at most PROTO_MAX_ARGS args per stage, PROTO_MAX_ENV envs,
 * PROTO_MAX_ALLOW allow entries. Only the RUN stage reads stdin; a
 * COMPILE stage's is empty. Either side treats anything else (an unknown
 * type or tag, a bad length, a missing or repeated field) as the end of
 * the run, with a reason. */
#ifndef VMRUN_PROTO_H
#define VMRUN_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROTO_VERSION       5u
#define PROTO_VSOCK_PORT    10000u
/* Readiness: the agent connects here (CID 2) once its base filesystems
 * and cgroup2 are up, before it mounts the workspace. The vmm, when asked
 * to take a snapshot (--snapshot-out), takes it while this connect is
 * pending; in every other boot, and after a restore, the connect is
 * refused or reset, and the agent goes on (no retry, nothing printed).
 * Nothing is ever sent on it. */
#define PROTO_READY_VSOCK_PORT 10001u
#define PROTO_HDR_LEN       8u
#define PROTO_MAX_PAYLOAD   (64u * 1024)
#define PROTO_MAX_STR       4096u
#define PROTO_MAX_ARGS      256u
#define PROTO_MAX_ENV       64u
#define PROTO_MAX_ALLOW     512u
#define PROTO_MAX_STAGES    2u
#define PROTO_SEED_LEN      32u   /* 256 bits, what the kernel RNG credits at most */
#define PROTO_RUN_ID_MAX    32u   /* vmrun's ids: 32 hex digits */

/* Conventions the host and the guest must agree on, beyond the frames:
 * defined here once, compiled into vmrun, the agent and vmm. */
/* The per-run workspace: the second virtio-blk device (vmrun attaches the
 * root image first), mounted at PROTO_WORKSPACE_DIR, the command's cwd. */
#define PROTO_WORKSPACE_DEV "/dev/vdb"
#define PROTO_WORKSPACE_DIR "/workspace"
/* Under the workspace: what vmrun copies out after the run. */
#define PROTO_ARTIFACTS_DIR "artifacts"
/* The guest user the command runs as, who owns the workspace's files. */
#define PROTO_SANDBOX_UID   1000   /* no suffix: also spelled into mount options */
#define PROTO_SANDBOX_GID   1000
/* The command's PATH, which the host's allowlist check searches too. */
#define PROTO_PATH          "/usr/local/bin:/usr/bin:/bin"
/* Host side: vmm's vsock Unix socket, and the one it connects to for a
 * guest connection to port P: PROTO_VSOCK_UDS_PORT_FMT of (uds, P), as
 * Firecracker names them. */
#define PROTO_VSOCK_UDS     "v.sock"
#define PROTO_VSOCK_UDS_PORT_FMT "%s_%u"
/* Network by policy (REQUEST's NET field): the host's proxy listens on this
 * vsock port (vmm's PROTO_VSOCK_UDS_PORT_FMT socket for it), the only
 * value NET may carry, so that a request cannot point the guest's
 * forwarder at some other host service. */
#define PROTO_NET_VSOCK_PORT 3128u
/* Where the forwarder listens in the guest, and what the command's proxy
 * variables name: loopback only, since the guest has no NIC. */
#define PROTO_NET_PROXY_ADDR "127.0.0.1"
#define PROTO_NET_PROXY_PORT 3128   /* no suffix: also spelled into the proxy URL */

enum proto_type {
	PROTO_HELLO = 1,
	PROTO_REQUEST = 2,
	PROTO_STDIN = 3,
	PROTO_STDOUT = 4,
	PROTO_STDERR = 5,
	PROTO_EXIT = 6,
	PROTO_ERROR = 7,
	/* sandbox mode: proto_sandbox.h */
	PROTO_READY = 8,
	PROTO_CMD_START = 9,
	PROTO_CMD_STDIN = 10,
	PROTO_CMD_SIGNAL = 11,
	PROTO_CMD_OUTPUT = 12,
	PROTO_CMD_EXIT = 13,
	PROTO_FILE_OP = 14,
	PROTO_FILE_DATA = 15,
	PROTO_FILE_END = 16,
	PROTO_PAUSE = 17,
	PROTO_PAUSED = 18,
	PROTO_RESUME = 19,
	PROTO_CMD_RESIZE = 20,
};
#define PROTO_TYPE_LAST PROTO_CMD_RESIZE

enum proto_tag {
	PROTO_T_ARG = 1,
	PROTO_T_ENV = 2,
	PROTO_T_ALLOW = 3,
	PROTO_T_MAX_OUTPUT = 4,
	PROTO_T_NPROC = 5,
	PROTO_T_NOFILE = 6,
	PROTO_T_FSIZE = 7,
	PROTO_T_STAGE = 8,
	PROTO_T_CPU_MS = 9,
	PROTO_T_MEMORY_KIB = 10,
	PROTO_T_NET = 11,
	PROTO_T_SEED = 12,
	PROTO_T_TIME = 13,
	PROTO_T_RUN_ID = 14,
	PROTO_T_SANDBOX = 15,     /* REQUEST: sandbox mode (len 0) */
	/* sandbox mode's frames' fields (proto_sandbox.h) */
	PROTO_T_CWD = 16,
	PROTO_T_TIMEOUT_MS = 17,
	PROTO_T_PATH = 18,
	PROTO_T_PATH2 = 19,
	PROTO_T_MODE = 20,
	PROTO_T_PTY = 21,         /* CMD_START: a terminal (u16 cols, u16 rows) */
};

/* What a stage is for: a COMPILE stage that does not exit 0 ends the
 * session (a compile error); the RUN stage is the command. */
enum proto_stage_kind {
	PROTO_STAGE_COMPILE = 1,
	PROTO_STAGE_RUN = 2,
};

/* How the command ended (EXIT.kind). */
enum proto_end {
	PROTO_END_EXITED = 1,     /* code is its exit status */
	PROTO_END_SIGNALED = 2,   /* signal killed it */
	PROTO_END_DENIED = 3,     /* not in the allowlist, or not executable */
	PROTO_END_NOT_FOUND = 4,  /* no such program */
	PROTO_END_ERROR = 5,      /* the agent could not start it */
};

/* A stream is flagged truncated when bytes of it were dropped at the cap,
 * or when it had not ended by the end of the drain after the command
 * exited (the rest was never read). */
#define PROTO_EXIT_STDOUT_TRUNCATED 1u
#define PROTO_EXIT_STDERR_TRUNCATED 2u
/* The stage's memory limit was hit: its cgroup saw an OOM kill. */
#define PROTO_EXIT_OOM_KILLED       4u
/* The stage was killed for using up its CPU time limit. */
#define PROTO_EXIT_CPU_EXCEEDED     8u
#define PROTO_EXIT_FLAGS            15u
#define PROTO_EXIT_LEN 56u
#define PROTO_MAX_SIGNAL 64       /* Linux's highest signal number */

/* cpu_ms and max_rss_kib are the command's own wait4() usage: the process
 * the agent started, plus the descendants it waited for itself. Processes
 * it left behind (killed after it exited) are not counted, and
 * max_rss_kib is the largest single process's peak, not a sum. */
struct proto_exit {
	uint32_t kind;            /* enum proto_end */
	int32_t code;             /* exit status when EXITED: 0..255 (else the frame is malformed) */
	int32_t signal;           /* signal number when SIGNALED: 1..PROTO_MAX_SIGNAL */
	uint32_t flags;           /* PROTO_EXIT_* */
	uint32_t stage;           /* which stage of the REQUEST this ends: 0.. */
	uint32_t zero;            /* must be 0 */
	uint64_t cpu_ms;          /* user + system time, ms (see above) */
	uint64_t max_rss_kib;     /* peak resident set, KiB (see above) */
	uint64_t stdout_bytes, stderr_bytes;   /* produced, including dropped */
};

/* One stage of a request. */
struct proto_stage {
	uint32_t kind;                     /* enum proto_stage_kind */
	unsigned argc;
	char *argv[PROTO_MAX_ARGS + 1];    /* NULL-terminated */
	uint64_t cpu_ms;                   /* 0: no CPU time limit */
	uint64_t memory_kib;               /* 0: no memory limit but the VM's */
};

/* A decoded request. Strings point into storage and are NUL-terminated. */
struct proto_request {
	unsigned nstages, envc, nallow;
	struct proto_stage stage[PROTO_MAX_STAGES];
	char *env[PROTO_MAX_ENV + 1];      /* NULL-terminated */
	char *allow[PROTO_MAX_ALLOW];
	uint64_t max_output, nproc, nofile, fsize;
	uint32_t net_port;                 /* 0: no network; else PROTO_NET_VSOCK_PORT */
	bool sandbox;                      /* SANDBOX: no stages, commands come later */
	uint8_t seed[PROTO_SEED_LEN];      /* host randomness for the guest's RNG */
	uint64_t time_ns;                  /* host CLOCK_REALTIME when sent, ns; not 0 */
	char run_id[PROTO_RUN_ID_MAX + 1]; /* NUL-terminated, proto_valid_run_id */
	char storage[PROTO_MAX_PAYLOAD + PROTO_MAX_STAGES * PROTO_MAX_ARGS + PROTO_MAX_ENV + PROTO_MAX_ALLOW];
};

/* Incremental frame parser over bytes read from a stream. */
struct proto_reader {
	uint8_t buf[PROTO_HDR_LEN + PROTO_MAX_PAYLOAD];
	size_t have;
	size_t consumed;   /* bytes of buf taken by the last frame returned */
};

/* Format a one-line reason into err (errlen bytes; the arguments may point
 * into err itself) and return -1: the agent's one formatter, so that a
 * failing function ends with "return proto_errf(err, errlen, ...)". */
int proto_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Start (or restart) a reader with nothing buffered. */
void proto_reader_init(struct proto_reader *r);

/* Where the next read() may put up to *room bytes. Call proto_reader_fed
 * with what was read. */
uint8_t *proto_reader_space(struct proto_reader *r, size_t *room);
void proto_reader_fed(struct proto_reader *r, size_t n);

/* One read() from fd into the reader's space, fed: returns what read
 * returned (0 at end of file; -1 with errno, EAGAIN and EINTR included). */
ssize_t proto_reader_fill(struct proto_reader *r, int fd);

/* Take the next complete frame: returns 1 with *type, *payload (valid until
 * the next call) and *len; 0 when more bytes are needed; -1 when the stream
 * is malformed (reason in err). */
int proto_reader_next(struct proto_reader *r, uint16_t *type, const uint8_t **payload, uint32_t *len,
		      char *err, size_t errlen);

/* Write one frame to a blocking fd. Returns 0, or -1 with errno set. */
int proto_send(int fd, uint16_t type, const void *payload, uint32_t len);

/* Build the header of a frame into hdr (PROTO_HDR_LEN bytes). */
void proto_header(uint8_t *hdr, uint16_t type, uint32_t len);

/* HELLO payload: version and name. Returns its length, 0 when it does not
 * fit cap. */
size_t proto_encode_hello(uint8_t *buf, size_t cap, const char *name);

/* Check a HELLO payload; *version gets the version. Returns 0, or -1 with a
 * reason in err. */
int proto_decode_hello(const uint8_t *p, uint32_t len, uint32_t *version, char *err, size_t errlen);

/* Whether s (n bytes) is "NAME=VALUE" with NAME a valid variable name. */
bool proto_valid_env(const char *s, size_t n);

/* Whether s (n bytes) is a run id: 1..PROTO_RUN_ID_MAX chars of [0-9a-f]. */
bool proto_valid_run_id(const char *s, size_t n);

/* Encode r (its version, the stages or SANDBOX, env, allow, the limits,
 * SEED, TIME, RUN_ID and NET when net_port is not 0) into buf. Returns the payload
 * length, or 0 when r breaks a limit or a stage rule, has a net_port
 * other than 0 and PROTO_NET_VSOCK_PORT, a time_ns of 0 or a run_id that
 * is not proto_valid_run_id, or does not fit cap. */
size_t proto_encode_request(const struct proto_request *r, uint8_t *buf, size_t cap);

/* Decode and validate a REQUEST payload into r: a version other than
 * PROTO_VERSION is refused. Returns 0, or -1 with a reason in err. */
int proto_decode_request(const uint8_t *p, uint32_t len, struct proto_request *r, char *err, size_t errlen);

/* Fixed-layout EXIT payload (PROTO_EXIT_LEN bytes). Decoding checks the
 * fields' ranges, not which stage the session is at. */
void proto_encode_exit(const struct proto_exit *e, uint8_t *buf);
int proto_decode_exit(const uint8_t *p, uint32_t len, struct proto_exit *e, char *err, size_t errlen);

/* Whether the session goes on to the stage after the one e ended: there
 * is one, and e ended a stage that exited 0. The one rule both sides
 * follow. Pure. */
bool proto_stage_continues(const struct proto_request *r, const struct proto_exit *e);

#endif
