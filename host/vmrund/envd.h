/* envd, the API inside an E2B sandbox that the `e2b` SDK's `commands`
 * and `files` call (docs/e2b.md), translated onto a vmrun sandbox's
 * supervisor API (docs/sandboxes.md): the Connect protocol's JSON form
 * (unary calls, and server streams in Connect's envelopes), the
 * process.Process and filesystem.Filesystem messages, and the access
 * token that opens one sandbox. Pure: no I/O, no globals; api_envd.c
 * does the HTTP and the supervisor's calls. */
#ifndef VMRUND_ENVD_H
#define VMRUND_ENVD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "pending.h"

#include "tenants.h"

/* Connect's envelope: a flags byte, then the message's length as a
 * big-endian uint32, then the message. */
#define ENVD_FRAME_HEAD 5
#define ENVD_FLAG_COMPRESSED 0x01
#define ENVD_FLAG_END 0x02            /* the stream's last message: EndStreamResponse */
#define ENVD_MSG_MAX (4u << 20)       /* one request message's bytes */

/* A sandbox's envd access token: hex HMAC-SHA256 of its id under the
 * digest of the API key that asked for it (tenants.h keeps only
 * digests), so every node of a cluster that reads the same keys file
 * checks it with nothing stored, and a token names its sandbox: another
 * sandbox's id under it does not match. */
#define ENVD_TOKEN_LEN 64

/* Where envd's paths begin when the SDK's host is vmrund itself; the
 * rest is the file system's, relative paths being relative to it as
 * the sandbox's commands see them. */
#define ENVD_HOME "/workspace"

/* The command timeout when the client gave no Connect-Timeout-Ms (the
 * SDK's timeoutMs 0: none): the longest a sandbox command may have. */
#define ENVD_NO_TIMEOUT_S 86400

/* ListDir's depth, and the entries one listing gives in all. */
#define ENVD_DEPTH_MAX 16
#define ENVD_LIST_MAX 4096

/* Connect's error codes that envd answers with. */
enum envd_code {
	ENVD_OK = 0,
	ENVD_CANCELED,
	ENVD_UNKNOWN,
	ENVD_INVALID_ARGUMENT,
	ENVD_DEADLINE_EXCEEDED,
	ENVD_NOT_FOUND,
	ENVD_ALREADY_EXISTS,
	ENVD_PERMISSION_DENIED,
	ENVD_RESOURCE_EXHAUSTED,
	ENVD_FAILED_PRECONDITION,
	ENVD_UNIMPLEMENTED,
	ENVD_INTERNAL,
	ENVD_UNAVAILABLE,
	ENVD_UNAUTHENTICATED,
};

/* The code's name on the wire ("not_found"), and the HTTP status a
 * unary call's error carries (Connect's table: not_found 404, ...). */
const char *envd_code_name(enum envd_code c);
unsigned envd_code_status(enum envd_code c);

/* The code for a supervisor's HTTP status (404 not_found, 409
 * already_exists, 403 permission_denied, 507 resource_exhausted, ...). */
enum envd_code envd_code_of_status(unsigned status);

/* Connect's error body {"code": NAME, "message": message}. */
json_t *envd_error(enum envd_code c, const char *message);

/* An EndStreamResponse: {} when c is ENVD_OK, else {"error": envd_error}. */
json_t *envd_end(enum envd_code c, const char *message);

/* A server stream's request body: exactly one uncompressed envelope
 * holding a JSON object, at most ENVD_MSG_MAX bytes. The object, or NULL
 * with the reason in err. */
json_t *envd_unwrap(const char *body, size_t len, char *err, size_t errlen);

/* msg (taken: decref'd) as an envelope with flags, appended to q. 0, or
 * -1 out of memory (q unchanged). */
int envd_frame(struct pending *q, uint8_t flags, json_t *msg);

/* A server stream's frames on their way to the client: p[off..len),
 * and whether its end frame is among them (nothing follows it). */
struct envd_out {
	struct pending q;
	bool done;
};

/* Frame msg (taken) onto o: 0, or -1 out of memory (o unchanged). */
int envd_out_frame(struct envd_out *o, json_t *msg);

/* The stream's end frame (envd_end of code and message), once: what
 * comes after it is dropped. Out of memory, the stream ends without it
 * (the client sees a broken stream). */
void envd_out_end(struct envd_out *o, enum envd_code code, const char *message);

/* Release o's buffer; safe on a zeroed one. (What waits is taken with
 * pending_take(&o->q, ...).) */
void envd_out_free(struct envd_out *o);

/* Protobuf JSON's bytes (base64, standard or URL-safe alphabet, padding
 * optional) decoded into *out (malloc'd, NUL-terminated, *n bytes): 0,
 * or -1 for text that is not base64 (or out of memory). */
int envd_bytes(const char *text, size_t len, char **out, size_t *n);

/* A StartRequest as the native command body (POST /commands, a
 * background command): process.cmd and args as argv, envs as env, cwd,
 * timeout_s, pty.size as pty {cols, rows}; *stdin_open from its stdin
 * (false when absent, as the SDK means it; a terminal's is always open).
 * A tag is refused (a command is named by its id): ENVD_UNIMPLEMENTED.
 * 0 with *native, or a code with the reason in err. */
enum envd_code envd_start_body(const json_t *req, double timeout_s, json_t **native, bool *stdin_open, char *err,
			       size_t errlen);

/* The process a request names ({"process": {"pid": N}}; a tag is
 * ENVD_UNIMPLEMENTED): 0 with *pid, or a code with err. */
enum envd_code envd_pid(const json_t *req, unsigned *pid, char *err, size_t errlen);

/* SendSignalRequest's signal (SIGNAL_SIGKILL, SIGNAL_SIGTERM, as a name
 * or its number): 0 with *signo, or a code with err. */
enum envd_code envd_signal(const json_t *req, int *signo, char *err, size_t errlen);

/* SendInputRequest's stdin or pty bytes (a terminal's input is its
 * command's stdin) into *data (malloc'd, *n bytes); bytes that are not
 * UTF-8 are ENVD_INVALID_ARGUMENT (the supervisor's stdin takes text). 0,
 * or a code with err. */
enum envd_code envd_input(const json_t *req, char **data, size_t *n, char *err, size_t errlen);

/* UpdateRequest's pty.size as the native resize body {cols, rows} (each
 * 1..4096): 0 with *native, or a code with err (no size: invalid). */
enum envd_code envd_resize_body(const json_t *req, json_t **native, char *err, size_t errlen);

/* One event of a command's stream from its supervisor (name, data as
 * sse_parse gives them) as a ProcessEvent message ({"event": {...}}):
 * stdout and stderr as data (the text's bytes, base64; a terminal's
 * command's stdout, pty true, is pty data), exit as end
 * (exitCode, exited, status as Go's os.ProcessState says it, error).
 * NULL for an event that has no message (*end false), or for the exit
 * of a command that ran past its timeout: then *end is true with
 * *code ENVD_DEADLINE_EXCEEDED, as E2B's stream ends. *end is true after
 * an exit, with *code ENVD_OK when the message is its end event. */
json_t *envd_event(const char *name, const char *data, size_t len, bool pty, bool *end, enum envd_code *code);

/* A native command (an element of GET /commands) as a ProcessInfo, or
 * NULL for one that ended (List shows running processes). */
json_t *envd_process_info(const json_t *cmd);

/* A path of a request as the absolute path it names (relative ones
 * under ENVD_HOME; "" is ENVD_HOME), into out: 0, or -1 when it does
 * not fit. */
int envd_abs_path(const char *path, char *out, size_t len);

/* A native file entry (the supervisor's list and stat: name, type,
 * size, mode, mtime) as an EntryInfo: its path dir + "/" + name for an
 * entry of a listing (dir the absolute directory), or dir itself when
 * whole (a stat, whose name is dir's last part). NULL for an entry that
 * is neither file, directory nor symlink. */
json_t *envd_entry(const json_t *native, const char *dir, bool whole);

/* WatchDir's events between two listings of the directory root (objects
 * of absolute path -> native entry), in path order: a path only in after
 * is created, only in before removed, in both with another size or mtime
 * written, with another mode chmod'ed (both when both changed). Each a
 * FilesystemEvent {name (relative to root), type (EVENT_TYPE_*), entry
 * (an EntryInfo, when entries and the path is there)}. A new array (NULL:
 * out of memory). */
json_t *envd_watch_events(const json_t *before, const json_t *after, const char *root, bool entries);

/* The token of sandbox id under the key whose digest is given. */
void envd_token(const unsigned char digest[TENANT_DIGEST_LEN], const char *id, char out[ENVD_TOKEN_LEN + 1]);

/* The tenant whose key made token for sandbox id: its index into ts,
 * or -1. Every key's token is computed and compared in full
 * (CRYPTO_memcmp), so the time says nothing of where a wrong one
 * differs. */
int envd_token_tenant(const struct tenants *ts, const char *id, const char *token);

#endif
