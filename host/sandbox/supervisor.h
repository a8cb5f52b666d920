/* vmrund-sandbox: one sandbox's VM and everything it holds, in a process
 * of its own that outlives the vmrund that started it (a restart adopts
 * it by its directory). Its API is HTTP on a Unix socket in the
 * sandbox's directory, the sandbox's part of vmrund's /v1/sandboxes/ID
 * (vmrund adds tenants, the store and the way in):
 *
 *   GET    /[?wait=S]                 the sandbox: state, times, limits; with
 *                                    wait, once it is not starting or resuming
 *   DELETE /                          stop it (the VM is destroyed)
 *   POST   /timeout                   {"timeout_s": N}: its life from now
 *   POST   /pause                     its VM saved to disk and freed (pause.c)
 *   POST   /resume                    {"timeout_s": N}: started again from it
 *   POST   /checkpoints               {"name": N}: paused, kept, resumed (checkpoint.c)
 *   GET    /checkpoints[/NAME]        kept ones: name, created_at, bytes, digest, complete
 *   DELETE /checkpoints/NAME
 *   GET    /diff?from=F&to=T          what changed in the workspace from F
 *                                     ("start", the default, or a checkpoint)
 *                                     to T (a checkpoint; the default: now) (diff.c)
 *   POST   /commands[?wait=S]         start a command (below); with wait,
 *                                     answer once it ended or S seconds
 *   GET    /commands                  running and recent ones
 *   GET    /commands/CID[?wait=S]     one, its output and how it ended
 *   GET    /commands/CID/events       its output as Server-Sent Events,
 *                                     from the start, live, then "exit"
 *   POST   /commands/CID/stdin        {"data": "...", "close": bool}
 *   POST   /commands/CID/signal       {"signal": "TERM" | 15}
 *   GET    /files?path=P              a file's bytes
 *   PUT    /files?path=P[&mode=0644]  a file's bytes, streamed to the guest
 *   GET    /files/tar?path=D          the directory D as a tar (made in the guest)
 *   PUT    /files/tar?path=D          a tar, extracted into D in the guest
 *   GET    /files/list?path=P         {"entries": [{name, type, size, mode, mtime}]}
 *   GET    /files/stat?path=P         one entry
 *   POST   /files/mkdir               {"path": P}: with its parents
 *   POST   /files/remove              {"path": P}: a directory with its contents
 *   POST   /files/rename              {"from": P, "to": Q}
 *
 * A command: {"argv": [...], "cwd": "dir", "env": {...}, "stdin": "...",
 * "timeout_s": 60, "background": false}. A foreground command's stdin is
 * closed after "stdin"; a background one's stays open for .../stdin.
 * Commands are numbered from 1; an Idempotency-Key on POST /commands
 * names one command for the sandbox's life: the same key and body again
 * answer with that command, never a second run; another body is 422.
 *
 * Files and the state live in the sandbox's directory DIR:
 *   DIR/request.json   the sandbox's run spec (vmrund writes it)
 *   DIR/api.sock       the API
 *   DIR/state.json     {"state", "reason", "pid", "timeout_at"}, replaced
 *                      whole at every change
 *   DIR/cmds/CID.out   each command's output (spool records, capped at
 *                      the spec's max_output per stream)
 *   KEEP/start.ext4    the workspace as it was before the VM started
 *   KEEP/checkpoints/NAME  a checkpoint: the paused VM's state, pages and
 *                      workspace sum, its workspace image, the snapshot
 *                      it is against (base/), the sandbox's start.ext4,
 *                      checkpoint.json
 * KEEP is DIR, or with --shared SHARED (a cluster's snapshot_dir, which
 * every node mounts) SHARED: there its checkpoints and start outlive the
 * node, and a pause parks the VM in SHARED/paused (park.c) for any node
 * to resume.
 * Everything that comes from the guest is bounded and checked before it
 * is kept or shown. */
#ifndef VMRUN_SANDBOX_SUPERVISOR_H
#define VMRUN_SANDBOX_SUPERVISOR_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "proto.h"
#include "proto_sandbox.h"
#include "run.h"
#include "run_pause.h"

#define SBX_API_SOCK        "api.sock"
#define SBX_STATE_FILE      "state.json"
#define SBX_CMDS_DIR        "cmds"
#define SBX_MAX_CMDS        256      /* kept (running and recent); the oldest ended go first */
#define SBX_MAX_FILE_OPS    64       /* file operations under way at once */
#define SBX_DEFAULT_CMD_TIMEOUT_S 60
/* A command's own limits ("limits" of POST /commands): its cgroup's
 * memory.max (a limit past the VM's memory is the VM's) and RLIMIT_CPU. */
#define SBX_CMD_MEMORY_MIB_MAX (1 << 20)
#define SBX_CMD_CPU_MS_MAX (86400LL * 1000)
#define SBX_MAX_BODY        (16u << 20)   /* a JSON body */
#define SBX_IDEM_KEY_MAX    255
#define SBX_BOOT_TIMEOUT_S  60       /* from vmm's start to the agent's READY */

/* The agent's limit on commands at once (guest-agent/sandbox.h). */
#define SANDBOX_MAX_CMDS_GUEST 64

/* A sandbox's states: starting -> running -> stopping -> stopped, and
 * from running, pausing -> paused -> resuming -> running; failed ends a
 * sandbox whose pause or resume failed (nothing of it runs). */
enum sbx_state {
	SBX_STARTING, SBX_RUNNING, SBX_STOPPING, SBX_STOPPED,
	SBX_PAUSING, SBX_PAUSED, SBX_RESUMING, SBX_FAILED,
};
#define SBX_PAUSE_WAIT_MS 30000      /* file operations under way, then the agent's PAUSED */
#define SBX_DEFAULT_MAX_CHECKPOINTS 16
/* DIR/checkpoints/.used-NAME: NAME was a checkpoint's, and is not taken again */
#define SBX_CHECKPOINT_USED ".used-"
#define SBX_DEFAULT_MAX_CHECKPOINT_MIB 16384

/* One command, as the supervisor keeps it. */
struct sbx_cmd {
	uint32_t id;
	json_t *request;              /* what was asked (argv, cwd, env names, timeout_s, background, pty) */
	bool ended;
	struct proto_exit exit;
	int64_t started_ms, ended_ms; /* CLOCK_REALTIME */
	int out_fd;                   /* its output file, open while it runs */
	uint64_t kept[2];             /* bytes of stdout and stderr kept (capped) */
	bool stdin_closed;
	unsigned refs;                /* API threads holding it: it is not dropped while they do */
};

/* A file operation under way: its answer, and READ's bytes as they come. */
struct sbx_fop {
	bool used, ended;
	uint32_t id;
	uint32_t op;
	int32_t error;
	uint32_t flags;
	bool has_entry;
	struct proto_entry entry;
	uint8_t *data;                /* READ's bytes and LIST's entries not yet taken */
	size_t len, cap, taken;
	uint64_t total;               /* everything that came */
	bool abandoned;               /* its asker left: its FILE_END frees it */
	bool dropping;                /* the guest sent past its cap: the rest is dropped, it ends EIO */
};

/* The most a LIST may send: FILES_LIST_MAX entries of the longest name. */
#define SBX_LIST_MAX_BYTES (4096u * (PROTO_ENTRY_HDR + PROTO_NAME_MAX))
/* A frame to the agent that makes no progress for this long fails: a
 * guest that stops reading must not hold every sender forever. */
#define SBX_SEND_STALL_MS 30000

/* An Idempotency-Key of POST /commands, kept for the sandbox's life (its
 * command's record may go before it). */
struct sbx_key {
	char key[SBX_IDEM_KEY_MAX + 1];
	char hash[65];                /* the body's SHA-256, hex */
	uint32_t id;                  /* the command it named */
};
#define SBX_MAX_KEYS 65536

struct sbx {
	const char *dir;
	const char *keep;             /* where start.ext4 and checkpoints/ lie: dir, or shared */
	const char *shared;           /* --shared: its directory in the snapshot dir (park.c); NULL none */
	const char *owner;            /* --owner: its token there (run_pause.h's RUN_SHARED_OWNER); NULL none */
	bool parked;                  /* its paused VM lies in shared/paused: this process ends */
	char id[64];                  /* the sandbox's id (vmrun's run id) */
	pthread_mutex_t mu;           /* everything below */
	pthread_cond_t cv;            /* broadcast at every change */
	pthread_mutex_t wmu;          /* writes to the agent */
	int conn;                     /* the agent's connection; -1 before READY and after */
	int wake_fd;                  /* eventfd: the serve loop looks again (stop, timeout) */
	enum sbx_state state;
	char reason[256];             /* why it stopped */
	int64_t created_ms, started_ms;   /* CLOCK_REALTIME */
	int64_t deadline_ms;          /* CLOCK_REALTIME: its life's end */
	uint64_t max_timeout_s;       /* the longest life POST /timeout may set */
	uint64_t max_output;          /* per stream and command */
	uint64_t max_upload;          /* bytes of one file written */
	json_t *limits;               /* for GET / */
	struct sbx_cmd *cmd[SBX_MAX_CMDS];
	unsigned ncmd;
	uint32_t next_cmd;
	unsigned running;
	struct sbx_key *keys;         /* every Idempotency-Key, in the order taken */
	unsigned nkeys, keys_cap;
	struct sbx_fop fop[SBX_MAX_FILE_OPS];
	uint32_t next_fop;
	unsigned long guest_faults;   /* frames from the agent that were refused */
	/* pausing (pause.c) */
	bool pausable;                /* restored from a snapshot: it can pause */
	bool on_timeout_pause;        /* its time running out pauses it (instead of stopping it) */
	double timeout_s;             /* its life as configured: what a resume after it ran out gives */
	uint64_t pause_ttl_s;         /* how long it may stay paused; 0: for ever */
	int64_t pause_asked_ms;       /* CLOCK_REALTIME: when pausing began */
	bool pause_sent, agent_paused, expect_ready;
	int64_t left_ms;              /* its life left when it paused */
	double resume_timeout_s;      /* a resume's own timeout_s; 0: none given */
	int64_t paused_ms;            /* CLOCK_REALTIME: when it was paused (0: never) */
	unsigned pauses;              /* times it paused and resumed */
	char pause_error[256];        /* why the last pause was called off */
	int64_t stopped_ms;           /* CLOCK_REALTIME: when the agent paused (the VM stops) */
	int64_t last_stop_ms;         /* how long the last pause kept the VM stopped */
	/* a checkpoint being taken: its name ("" none), then what came of it */
	char checkpoint[RUN_CHECKPOINT_NAME_MAX + 1];
	json_t *checkpoint_meta;      /* its meta once saved */
	char checkpoint_error[300];
	bool checkpoint_over;         /* it was not kept: past max_checkpoint_bytes */
	unsigned max_checkpoints;
	uint64_t max_checkpoint_bytes; /* what they may take on disk together */
	/* a fork of a checkpoint: its commands' ids begin here, and the
	 * commands it inherited, still running in the guest, have ids below
	 * (their frames are dropped: no record of them came with the fork) */
	uint32_t inherited_below;
	/* a diff reading the workspace: while running, the agent is held
	 * (paused on its connection, its file system frozen) and given back
	 * by RESUME; while paused, a resume waits */
	bool hold, diffing;
	unsigned pause_gen;           /* counts pauses begun: a hold knows its own */
	/* where its usage is read, while it runs (run.h's run_serving) */
	char cgroup[PATH_MAX];        /* "" none */
	char workspace_image[PATH_MAX];
};

/* ---- table.c: the sandbox's table ---------------------------------------------- */

/* CLOCK_REALTIME in ms: every time the sandbox shows or waits until
 * (created, started, deadline) is on this clock. */
int64_t sbx_realtime_ms(void);

/* Set s up (no agent yet): 0, or -1 with errno. */
int sbx_init(struct sbx *s, const char *dir);

/* Free what s holds (the agent link is closed already). */
void sbx_release(struct sbx *s);

/* The name of a state, as state.json and the API say it. */
const char *sbx_state_name(enum sbx_state st);

/* With mu held: every command and file operation under way ends (the VM
 * is gone), their waiters woken. */
void sbx_end_everything(struct sbx *s);

/* With mu held: record state and reason, write DIR/state.json, wake
 * everyone. */
void sbx_set_state(struct sbx *s, enum sbx_state st, const char *reason);

/* With mu held: the command of id, or NULL. */
struct sbx_cmd *sbx_cmd_of(struct sbx *s, uint32_t id);

/* With mu held: a new command's record (its id the next one; its output
 * file made), room made by dropping the oldest ended one. NULL with why
 * in err when the sandbox has no room. */
struct sbx_cmd *sbx_cmd_new(struct sbx *s, char *err, size_t errlen);

/* With mu held: a file operation's slot with a fresh id, or NULL when
 * SBX_MAX_FILE_OPS are under way. */
struct sbx_fop *sbx_fop_new(struct sbx *s, uint32_t op);

/* With mu held: give a finished (or abandoned) slot back. */
void sbx_fop_free(struct sbx_fop *f);

/* With mu held: the key's entry, or NULL. */
const struct sbx_key *sbx_key_of(const struct sbx *s, const char *key);

/* With mu held: keep key (with the body's hash) as command id's. 0, or -1
 * when SBX_MAX_KEYS are kept or memory ran out. */
int sbx_key_add(struct sbx *s, const char *key, const char *hash, uint32_t id);

/* ---- link.c: the agent's side ------------------------------------------------ */

/* The run library's serve hook (run.h): the sandbox is up (or resumed)
 * on conn; serve the agent's frames until the sandbox stops (DELETE, its
 * time, the agent's end, cancel_fd: RUN_SERVE_END) or the agent paused
 * (RUN_SERVE_PAUSE), with cancel_fd the run's. ctx is a struct sbx_run. */
enum run_serve_end sbx_serve(void *ctx, int conn, const struct run_serving *where);

struct sbx_run {
	struct sbx *s;
	int cancel_fd;
};

/* Write one frame to the agent (payload a then b). 0, or -1 when the
 * link is down. Takes wmu; never mu. */
int sbx_send(struct sbx *s, uint16_t type, const void *a, uint32_t alen, const void *b, uint32_t blen);

/* One frame from the agent, mu held: a command's output (kept up to
 * max_output per stream) or exit, a file operation's data (up to what it
 * may send: a READ's window, a LIST's most) or end. What breaks the
 * protocol is counted in guest_faults and dropped. Returns 0, or -1 when
 * the agent said it failed (ERROR): the sandbox is over (state
 * STOPPING). */
int sbx_agent_frame(struct sbx *s, uint16_t type, const uint8_t *p, uint32_t len);

/* Let a READ's agent send n more bytes (the asker took them). Takes wmu;
 * never call it with mu held. */
void sbx_fop_credit(struct sbx *s, uint32_t id, uint32_t n);

/* ---- pause.c: pausing and resuming -------------------------------------------------- */

/* With mu held, state SBX_PAUSING, from the serve loop: wait for the file
 * operations under way, then send PAUSE; past SBX_PAUSE_WAIT_MS call the
 * pause off (RESUME on the same connection, state running again, the
 * reason in pause_error). May drop mu while it writes to the agent. */
void sbx_pause_step(struct sbx *s);

/* With mu held: begin pausing (a request, or on_timeout): its life left
 * is kept, the serve loop is woken. */
void sbx_pause_begin(struct sbx *s, const char *reason);

/* With mu held, state running: hold the agent (PAUSE, the state
 * pausing) without saving the VM: the serve loop keeps the connection
 * once the agent paused, until sbx_hold_end. Returns the pause's number
 * (pause_gen), which names this hold. */
unsigned sbx_hold_begin(struct sbx *s);

/* With mu held: hold gen is over; the agent goes on (RESUME on the same
 * connection) when it is still held by it. A pause begun since (the hold
 * was called off meanwhile) is left alone. */
void sbx_hold_end(struct sbx *s, unsigned gen);

/* The run library's paused hook (run.h): the VM was saved (state
 * paused, until POST /resume: 0; DELETE, SIGTERM or pause_ttl_s: -1), or
 * saving or resuming failed (state failed, with why). ctx is a struct
 * sbx_run. */
int sbx_paused(void *ctx, enum run_pause_event ev, const char *why, const struct run_saved *saved);

/* ---- park.c: a pause that outlives this process (--shared) ------------------------ */

/* SHARED's layout: SHARED/paused is the parked VM (a checkpoint's files,
 * run_pause.h, with the base snapshot linked from SNAPSHOT_DIR/bases/SUM,
 * where SHARED is SNAPSHOT_DIR/sandboxes/ID, so that each base is stored
 * once), its command outputs (cmds/) and SBX_PARK_META, the sandbox's own
 * state: its times and its command table with each output's SHA-256;
 * SBX_PARK_META's own SHA-256 beside it. */
#define SBX_PARKED_DIR  RUN_PARKED_DIR
#define SBX_PARK_META   "sandbox.json"
#define SBX_PARK_SUM    RUN_PARKED_SUM
#define SBX_BASES_DIR   RUN_BASES_DIR
#define SBX_PARK_VERSION 1

/* In the paused hook, mu held (dropped while files are copied): keep what
 * saved names and the sandbox's table in s->shared/paused, whole or not
 * at all. 0 (s->parked), or -1 with why (nothing is parked: the VM stays
 * paused here, in this process). */
int sbx_park(struct sbx *s, const struct run_saved *saved, char *err, size_t errlen);

/* Before the VM starts from a parked dir (--from-paused): its table and
 * times checked (version, SHA-256s) and loaded into s, its command
 * outputs copied into DIR/cmds. 0, or -1 with a one-line reason. */
int sbx_unpark(struct sbx *s, const char *dir, char *err, size_t errlen);

/* The table and times of s as SBX_PARK_META says them (a new reference),
 * mu held. Pure but for the clock it does not read. */
json_t *sbx_park_meta(const struct sbx *s);

/* meta (SBX_PARK_META's text, parsed) into s: 0, or -1 with why. Pure
 * but for the command records it allocates. */
int sbx_park_load(struct sbx *s, const json_t *meta, char *err, size_t errlen);

/* ---- checkpoint.c ------------------------------------------------------------------------ */

/* A checkpoint as the API shows it, from its meta: name, created_at,
 * bytes (a new reference). */
json_t *sbx_checkpoint_view(const json_t *meta);

/* How many checkpoints s keeps, and (bytes not NULL) the disk they take
 * together, as their metas say. */
unsigned sbx_checkpoint_count(const struct sbx *s, uint64_t *bytes);

/* While the VM is saved (the paused hook): link or copy what saved names,
 * and copy the workspace image, into DIR/checkpoints/name, whole or not at
 * all. 0 with its meta (name, created_ms, bytes), or -1 with why, or 1
 * when it would take the sandbox's checkpoints past max_checkpoint_bytes
 * (not kept; why says so). */
int sbx_checkpoint_save(const struct sbx *s, const char *name, uint32_t next_cmd, const struct run_saved *saved,
			json_t **meta, char *err, size_t errlen);

/* A kept checkpoint's change from the sandbox's start (wsdiff.h): its
 * digest and whether it is complete, added to meta and its file. 0, or
 * -1 with why (meta then has neither). */
int sbx_checkpoint_digest(const struct sbx *s, json_t *meta, char *err, size_t errlen);

/* A fork's start from checkpoint dir: the command id its own begin at
 * (the checkpoint's next), into s. 0, or -1 with why. */
int sbx_checkpoint_fork(struct sbx *s, const char *dir, char *err, size_t errlen);

/* With mu held, in the serve hook on the resumed VM: its life from now,
 * resume_timeout_s when not 0, else what it had left, else (it ran out)
 * its configured timeout_s. */
void sbx_resumed(struct sbx *s);

/* ---- api.c: the HTTP side ----------------------------------------------------- */

struct sbx_http;

/* Serve the API on DIR/api.sock. NULL with why in err. */
struct sbx_http *sbx_http_start(struct sbx *s, char *err, size_t errlen);

/* Stop serving; waits for the connections' threads. NULL: nothing. */
void sbx_http_stop(struct sbx_http *h);

/* ---- json.c: what the API says --------------------------------------------------- */

/* A command as JSON: id, state, the request, times, and when it ended its
 * exit, usage and flags. mu held. */
json_t *sbx_cmd_json(const struct sbx *s, const struct sbx_cmd *c);

/* Add command id's stdout and stderr (text, from its file) to o. Reads
 * the file: without mu, so the guest's frames are not held up. */
void sbx_cmd_output(const struct sbx *s, uint32_t id, json_t *o);

/* What the sandbox uses now, from the VM's cgroup (v2: cpu.stat's
 * usage_usec as cpu_ms, memory.current, memory.peak; "" or a file
 * missing: null) and the workspace image's data (disk_bytes: what the
 * guest has written into it, its allocated but unwritten extents not
 * counted). */
json_t *sbx_usage_json(const char *cgroup, const char *image);

/* The sandbox as JSON (GET /), with its usage while it runs. mu held. */
json_t *sbx_json(const struct sbx *s);

/* An entry (STAT, LIST) as JSON: name, type, size, mode (octal text),
 * mtime (RFC 3339). */
json_t *sbx_entry_json(const struct proto_entry *e);

/* A signal's number from "TERM", "SIGTERM" or a number: 0 for none. Pure. */
int sbx_signal_number(const json_t *v);

#endif
