/* One run as a library: a plan built once from a request, then executed
 * into a run_result. The CLI (host/cli/main.c) is parse, plan, run, print; a
 * service drives many runs at once, one thread each: everything a run owns
 * hangs off its plan and its execution, nothing is global.
 *
 *   plan     check the request against the policy, open what the caller
 *            named with the caller's rights (host/run/caller.h), build the
 *            agent's REQUEST and vmm's argv (from the JAIL_* paths) once
 *   execute  run directory, workspace image, jail, vmm, the session with
 *            the agent, the deadline, teardown, artifacts, cleanup
 *   classify how the run ended, from the facts execute gathered: a pure
 *            function (run_classify), tested without KVM */
#ifndef VMRUN_RUN_H
#define VMRUN_RUN_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "caller.h"
#include "policy.h"
#include "proto.h"
#include "proxy_wire.h"
#include "result.h"
#include "run_spec.h"
#include "runtime.h"
#include "session.h"

/* The built kernel's name in a guest directory: the file each arch's vmm
 * boots (x86_64 an ELF vmlinux, aarch64 an arm64 Image). */
#if defined(__aarch64__)
#define RUN_GUEST_KERNEL "Image"
#else
#define RUN_GUEST_KERNEL "vmlinux"
#endif
#define RUN_CONSOLE_LIMIT     "262144"   /* bytes of guest console vmm keeps */
#define RUN_TEARDOWN_GRACE_MS 5000       /* after EXIT, how long vmm gets to reset the guest */
#define RUN_EXTRACT_TIMEOUT_MS 30000
#define RUN_REAP_AFTER_KILL_MS 10000     /* after the cgroup was killed, how long vmm gets to die */
#define RUN_STATE_WAIT_MS 50             /* a timed-out vmm's answer to VMM_STATE_SIGNAL, logged runs only */
#define RUN_VMM_ARGC_MAX      32
#define RUN_PAUSE_TIMEOUT_MS  60000      /* vmm writing a paused VM (the emulated KVM host is slow) */
#define RUN_RESUME_TIMEOUT_MS 60000      /* a resumed VM's agent back with READY */
#define RUN_SNAPSHOT_TIMEOUT_MS 60000    /* a boot that makes a snapshot (the emulated KVM host is slow) */
#define RUN_SNAPSHOT_WAIT_MS  (RUN_SNAPSHOT_TIMEOUT_MS + 15000)   /* for another run making the same one */

#define RUN_MAX_SOURCES       RUN_SPEC_MAX_FILES

/* One run: what the client asked (spec: the contract every front end maps
 * onto, host/run/run_spec.h), and what only the host names, as paths of the
 * caller's, opened with the caller's rights (NULL for none). */
struct run_request {
	const struct run_spec *spec;
	/* Source mode's files as the caller's paths (vmrun --source, and the
	 * worker's copies of spec->files), each copied into the workspace's
	 * top directory under its base name. */
	const char *const *sources;
	unsigned nsources;
	const char *workspace;       /* directory copied into the workspace */
	const char *artifacts;       /* directory created for the artifacts */
	const char *stdin_file;
	const char *policy;          /* the caller's policy file: may only lower ceilings unless root */
	const char *system_policy;   /* root's policy file; NULL: POLICY_SYSTEM_FILE; "" for none */
	const char *kernel, *rootfs; /* NULL: the built ones next to vmm */
	const char *vmm;             /* vmm's path (trusted: ours) */
	const char *guest_dir;       /* where the built kernel, rootfs and manifest are */
	bool allow_weaker_jail;      /* rootless: run without cgroup limits when none are delegated */
	bool cold;                   /* boot from scratch; else restore the snapshot for this
				      * kernel, root image, memory and vCPUs (made on first use) */
	/* --secret-header HOST:HEADER=@FILE: FILE read as the caller; plain
	 * HTTP to HOST goes out over TLS with the header added, verified
	 * against secret_ca (the caller's PEM file) or the system's CAs. */
	const char *const *secret_headers;
	unsigned nsecret_headers;
	const char *secret_ca;
	/* A sandbox: no command of its own (spec's argv and source mode are
	 * not read); the VM serves commands until the plan's serve hook says
	 * it is over. The runtime's whole manifest is its allowlist. */
	bool sandbox;
	/* A sandbox's: start from this checkpoint (a directory as
	 * host/sandbox/checkpoint.c keeps one) instead of the runtime's
	 * snapshot: its VM, processes included, with a copy of its workspace,
	 * the guest's RNG reseeded and its clock set. NULL: none. */
	const char *from_checkpoint;
	/* With from_checkpoint: it is the sandbox's own VM, parked (host/
	 * sandbox/park.c), not a fork: the RNG is not reseeded, and the
	 * workspace is checked against the sum saved with it before vmm
	 * starts. */
	bool resume_parked;
	/* A run's workspace: a copy of this image (a checkpoint's, for a
	 * verification run: its files, not its memory), instead of sources or
	 * a workspace directory. NULL: none. */
	const char *workspace_image;
};


/* Where a run's output goes as it arrives (NULL: collected in the result
 * for --json). kind is the stage's (enum proto_stage_kind), type
 * PROTO_STDOUT or PROTO_STDERR; what the host's cap lets pass only. */
typedef void (*run_output_fn)(void *ctx, uint32_t kind, uint16_t type, const uint8_t *data, size_t len);

/* Progress for -v (NULL: none): one line, no newline; console is set for
 * the guest console's lines (made printable), shown after the run. */
typedef void (*run_log_fn)(void *ctx, bool console, const char *text);

/* Where a sandbox's VM is, for its usage (run_plan.serve): the cgroup
 * vmm runs in ("" with none: rootless without one) and the workspace
 * image (allocated whole; its data extents are what the guest wrote). */
struct run_serving {
	const char *cgroup;
	const char *workspace_image;
	bool pausable;               /* restored from a snapshot: serve may return RUN_SERVE_PAUSE */
};

/* What a sandbox's serve hook returns. */
enum run_serve_end {
	RUN_SERVE_END = 0,           /* the sandbox is over: its VM is torn down */
	RUN_SERVE_PAUSE = 1,         /* the agent sent PAUSED: save the VM, free it, wait (run_plan.paused) */
};

/* Where a paused sandbox's VM was saved, for its paused hook: the files
 * stay as they are until the hook returns. */
struct run_saved {
	const char *dir;             /* state, pages and the workspace's sum (run_pause.h) */
	const char *image;           /* the workspace image */
	const char *snapshot;        /* the snapshot the pages are the difference from (state, memory) */
};

/* What a sandbox's paused hook is told. */
enum run_pause_event {
	RUN_PAUSE_SAVED,             /* the VM is saved and gone: return 0 to resume it, -1 to end */
	RUN_PAUSE_FAILED,            /* saving or resuming failed (why): the sandbox is over */
};

struct run_plan {
	bool live;                           /* built and not yet released */
	char run_id[33];
	struct caller caller;
	struct policy pol;
	struct proto_request proto;          /* the agent's REQUEST, built once */
	char stage_store[RUNTIME_STORE_MAX]; /* source mode: the stages' expanded argv */
	char compiled[PATH_MAX];             /* a sandbox's: its runtime's compiled program, or "" */
	int64_t stage_timeout_ms[PROTO_MAX_STAGES];
	int source_fd[RUN_MAX_SOURCES];      /* source mode's files, opened as the caller */
	char source_name[RUN_MAX_SOURCES][NAME_MAX + 1];
	unsigned nsources;
	bool nstages_built;                  /* source mode: proto's stages came from a runtime */
	double timeout_s;
	uint64_t memory_mib, cpus, disk_mib, max_output;
	/* opened with the caller's rights; -1 for none */
	int kernel_fd, rootfs_fd, stdin_fd, workspace_fd, artifacts_fd;
	char artifacts[PATH_MAX];            /* the destination's path, for undoing it */
	bool extracted;                      /* execute copied into it: it stays */
	char vmm[PATH_MAX];
	bool allow_weaker_jail;
	bool cold;                           /* no snapshot: boot from scratch */
	struct proxy_config *net;            /* the proxy's rules and caps; NULL: no network */
	int secret_ca_fd;                    /* --secret-ca, opened as the caller; -1 */
	char runtime[64], runtime_version[64];   /* "" without --runtime */
	/* vmm's command lines, paths as seen in the jail: a cold boot, a
	 * restore from JAIL_SNAPSHOT, and the boot that makes the snapshot
	 * (no workspace: an empty slot that the restore fills) */
	char vmm_memory[24], vmm_cpus[24];
	char *vmm_argv[RUN_VMM_ARGC_MAX];
	char *restore_argv[RUN_VMM_ARGC_MAX];
	char *snap_argv[RUN_VMM_ARGC_MAX];
	char *resume_argv[RUN_VMM_ARGC_MAX]; /* a sandbox's: the restore, from its paused state */
	/* how the run reports and is stopped */
	run_output_fn output;
	bool keep_output;                    /* with output: also keep it in the result */
	run_log_fn log;
	/* Before the command starts, in the booted VM (NULL: none), with the
	 * run's deadline (clock_mono_ms terms), which it must not wait past:
	 * 0 lets it start; SESSION_GATE_LATE, the deadline passed first, ends
	 * the run timed out; else it ends cancelled; nothing started. */
	int (*gate)(void *ctx, int64_t deadline_ms);
	void *ctx;
	int cancel_fd;                       /* readable: stop the run (-1: never) */
	/* A sandbox's (required with run_request.sandbox): called once the
	 * agent is READY (within timeout_s of vmm's start), with its
	 * connection (proto_sandbox.h); the VM lives until it returns (it
	 * must watch cancel_fd itself), then it is torn down as a run's is.
	 * It does not close conn. where says what the sandbox's usage is
	 * read from, valid until it returns. */
	enum run_serve_end (*serve)(void *ctx, int conn, const struct run_serving *where);
	/* A sandbox's pause (serve returned RUN_SERVE_PAUSE): once vmm saved
	 * the VM into the run directory and exited, RUN_PAUSE_SAVED, and it
	 * blocks until the sandbox is to go on (0: a new vmm resumes the VM
	 * from what was saved, and serve is called again on the agent's new
	 * connection) or to end (-1); RUN_PAUSE_FAILED with why when the save
	 * or the resume failed: the sandbox is over, nothing of it runs.
	 * saved says where the VM is (NULL with RUN_PAUSE_FAILED). */
	int (*paused)(void *ctx, enum run_pause_event ev, const char *why, const struct run_saved *saved);
	bool sandbox;                        /* the plan is a sandbox's */
	char from_checkpoint[PATH_MAX];      /* run_request.from_checkpoint; "" none */
	bool resume_parked;                  /* run_request.resume_parked */
	/* A sandbox's: where its workspace image as it was before the VM
	 * started is kept (a diff's "start"); "" none. Set by the caller. */
	char workspace_start[PATH_MAX];
	char workspace_image[PATH_MAX];      /* run_request.workspace_image; "" none */
};

/* Set r up for a run of req: a fresh run id, the limits asked for, the
 * host's output caps, and TERM_ERROR until the run says otherwise. The
 * plan fills in what it derives (source mode's stages and limits). */
void run_result_init(struct run_result *r, const struct run_request *req);

/* Check req against the policy and prepare to run it: into plan (zeroed
 * here). On a refusal or bad input, returns -1 with the result's
 * termination and message set in r (a denial, a missing program, an
 * unreadable file: one line), and nothing left open or created. r comes
 * from run_result_init. The caller sets output, log, ctx and cancel_fd
 * afterwards. */
int run_plan_build(struct run_plan *plan, const struct run_request *req, struct run_result *r);

/* A plan for `vmrun snapshot`: only what making the snapshot of req's
 * kernel, root image (or runtime), memory and vCPUs needs, checked against
 * the policy's ceilings as a run would be (no program, no workspace).
 * Into plan (zeroed here); returns 0, or -1 with a one-line reason and
 * nothing left open. Release it with run_plan_release. */
int run_plan_snapshot(struct run_plan *plan, const struct run_request *req, char *err, size_t errlen);

/* The ceilings every run is held to: the built-in policy with root's
 * file (path; "" for none) over it, as run_plan_build reads them, for a
 * service that checks a spec when it is submitted (run_spec_check). Into
 * pol; 0, or -1 with a one-line reason. Release it with policy_free. */
int run_policy_ceilings(struct policy *pol, const char *path, char *err, size_t errlen);

/* Close what the plan holds; remove the artifacts destination when the
 * run never got to fill it. Safe on any plan run_plan_build had (a failed
 * one included), twice, and on a zeroed one. */
void run_plan_release(struct run_plan *plan);

/* Execute the plan: everything from the run directory to cleanup. Fills r
 * (durations, output, artifacts, termination). Blocks until the run is
 * over; any number may run at once on different threads. */
void run_execute(struct run_plan *plan, struct run_result *r);

/* Make the snapshot for plan (from run_plan_snapshot, or a run's),
 * replacing the one there is, and put its directory into dir. Blocks for
 * the boot (at most RUN_SNAPSHOT_TIMEOUT_MS, stopped by the plan's
 * cancel_fd). Returns 0, or -1 with a one-line reason. */
int run_snapshot_make(struct run_plan *plan, char *dir, size_t dirlen, char *err, size_t errlen);

/* For a front end that is one run (vmrun, vmrund-worker): SIGINT, SIGTERM
 * and SIGHUP blocked and read from a signalfd, which is the run's cancel
 * fd; SIGPIPE ignored. No handler, so no state shared with one. The fd, or
 * -1 with errno. */
int run_cancel_signals(void);

/* The facts of a run's end, as execute saw them. */
struct run_facts {
	enum session_status session;         /* how the conversation ended */
	const struct session_result *sr;     /* its EXIT, or why it failed */
	bool cancelled;                      /* cancel_fd fired */
	const char *start_error;             /* vmm could not be started: why (else NULL) */
	int vmm_status;                      /* wait status */
	bool vmm_killed;                     /* we killed its cgroup (deadline, or no reset in time) */
	bool vmm_lost;                       /* it did not die after SIGKILL */
	unsigned long oom_kills;             /* the host's OOM killer in the run's cgroup */
	pid_t vmm_pid;
	const char *vmm_said;                /* the last line vmm wrote to stderr, printable, or "" */
	double timeout_s;
	int64_t ended_ms;                    /* monotonic: when the session ended */
};

/* How the run ended, into r: each stage the agent reported on (its
 * termination, exit code or signal, usage, flags, duration), the run's
 * termination (a compile stage that failed is COMPILE_ERROR) and the
 * message. r's nstages and stage limits come from the plan. Pure. */
void run_classify(const struct run_facts *f, struct run_result *r);

#endif
