#include "proto_sandbox.h"

#include <string.h>
#include <sys/stat.h>

_Static_assert((S_IFMT | 07777) == PROTO_ENTRY_MODE_BITS, "an entry's mode is st_mode's type and permission bits");

_Static_assert(PROTO_CMD_EXIT_LEN <= PROTO_MAX_PAYLOAD, "CMD_EXIT fits a frame");
_Static_assert(PROTO_SB_ID_LEN + PROTO_SB_CHUNK + 4 <= PROTO_MAX_PAYLOAD, "a chunk and its header fit a frame");
_Static_assert(PROTO_EXIT_TIMED_OUT > PROTO_EXIT_FLAGS, "TIMED_OUT is a flag of its own");

static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

bool proto_sb_type(uint16_t type)
{
	return type >= PROTO_READY && type <= PROTO_TYPE_LAST;
}

int proto_sb_split(const uint8_t *p, uint32_t len, uint32_t *id, const uint8_t **rest, uint32_t *restlen)
{
	if (len < PROTO_SB_ID_LEN)
		return -1;
	*id = get32(p);
	*rest = p + PROTO_SB_ID_LEN;
	*restlen = len - PROTO_SB_ID_LEN;
	return 0;
}

uint32_t proto_sb_put_id(uint8_t *buf, uint32_t id, const void *data, uint32_t n)
{
	put32(buf, id);
	if (n)
		memcpy(buf + PROTO_SB_ID_LEN, data, n);
	return PROTO_SB_ID_LEN + n;
}

/* ---- fields ------------------------------------------------------------------ */

static size_t put_field(uint8_t *buf, size_t cap, size_t at, uint16_t tag, const void *v, size_t n)
{
	if (!at || n > PROTO_MAX_STR || cap < at || cap - at < 4 + n)
		return 0;
	uint16_t len = (uint16_t)n;
	memcpy(buf + at, &tag, 2);
	memcpy(buf + at + 2, &len, 2);
	if (n)
		memcpy(buf + at + 4, v, n);
	return at + 4 + n;
}

static size_t put_str(uint8_t *buf, size_t cap, size_t at, uint16_t tag, const char *s)
{
	return put_field(buf, cap, at, tag, s, strlen(s));
}

/* Walks the fields after a frame's fixed part. */
struct fields {
	const uint8_t *p;
	uint32_t len, at;
};

/* The next field: 1 with its tag, value and length, 0 at the end, -1 when
 * one overruns the payload. */
static int next_field(struct fields *f, uint16_t *tag, const uint8_t **v, uint16_t *n, char *err, size_t errlen)
{
	if (f->at == f->len)
		return 0;
	if (f->len - f->at < 4)
		return proto_errf(err, errlen, "truncated field header at byte %u", f->at);
	*tag = get16(f->p + f->at);
	*n = get16(f->p + f->at + 2);
	if (*n > f->len - f->at - 4)
		return proto_errf(err, errlen, "field %u of %u bytes overruns the frame", *tag, *n);
	*v = f->p + f->at + 4;
	f->at += 4u + *n;
	return 1;
}

/* A string field: no NUL, at most PROTO_MAX_STR bytes. */
static bool str_ok(const uint8_t *v, uint16_t n)
{
	return n <= PROTO_MAX_STR && !memchr(v, '\0', n);
}

/* ---- CMD_START ------------------------------------------------------------------ */

size_t proto_encode_cmd(const struct proto_cmd *c, uint8_t *buf, size_t cap)
{
	if (cap > PROTO_MAX_PAYLOAD)
		cap = PROTO_MAX_PAYLOAD;
	if (cap < PROTO_SB_ID_LEN || c->argc == 0 || c->argc > PROTO_SB_MAX_ARGS || !c->argv[0][0] ||
	    c->envc > PROTO_SB_MAX_ENV)
		return 0;
	put32(buf, c->id);
	size_t at = PROTO_SB_ID_LEN;
	for (unsigned i = 0; i < c->argc; i++)
		at = put_str(buf, cap, at, PROTO_T_ARG, c->argv[i]);
	for (unsigned i = 0; i < c->envc; i++)
		at = proto_valid_env(c->env[i], strlen(c->env[i])) ? put_str(buf, cap, at, PROTO_T_ENV, c->env[i]) : 0;
	if (c->cwd)
		at = c->cwd[0] ? put_str(buf, cap, at, PROTO_T_CWD, c->cwd) : 0;
	if (c->timeout_ms)
		at = put_field(buf, cap, at, PROTO_T_TIMEOUT_MS, &c->timeout_ms, 8);
	if (c->cpu_ms)
		at = put_field(buf, cap, at, PROTO_T_CPU_MS, &c->cpu_ms, 8);
	if (c->memory_kib)
		at = put_field(buf, cap, at, PROTO_T_MEMORY_KIB, &c->memory_kib, 8);
	if (c->pty_cols || c->pty_rows) {
		if (!c->pty_cols || !c->pty_rows || c->pty_cols > PROTO_PTY_MAX || c->pty_rows > PROTO_PTY_MAX)
			return 0;
		uint8_t size[4];
		put16(size, c->pty_cols);
		put16(size + 2, c->pty_rows);
		at = put_field(buf, cap, at, PROTO_T_PTY, size, 4);
	}
	return at;
}

int proto_decode_cmd(const uint8_t *p, uint32_t len, struct proto_cmd *c, char *err, size_t errlen)
{
	c->argc = c->envc = 0;
	c->cwd = NULL;
	c->timeout_ms = c->cpu_ms = c->memory_kib = 0;
	c->pty_cols = c->pty_rows = 0;
	if (len < PROTO_SB_ID_LEN || len > PROTO_MAX_PAYLOAD)
		return proto_errf(err, errlen, "CMD_START of %u bytes", len);
	c->id = get32(p);
	struct fields f = { p, len, PROTO_SB_ID_LEN };
	bool timeout_seen = false;
	size_t used = 0;
	uint16_t tag = 0, n = 0;
	const uint8_t *v = NULL;
	int r;
	while ((r = next_field(&f, &tag, &v, &n, err, errlen)) == 1) {
		if (tag == PROTO_T_TIMEOUT_MS) {
			if (n != 8 || timeout_seen)
				return proto_errf(err, errlen, "TIMEOUT_MS field: bad length or repeated");
			timeout_seen = true;
			memcpy(&c->timeout_ms, v, 8);
			if (!c->timeout_ms)
				return proto_errf(err, errlen, "TIMEOUT_MS of 0 (no timeout is no field)");
			continue;
		}
		if (tag == PROTO_T_CPU_MS || tag == PROTO_T_MEMORY_KIB) {
			uint64_t *x = tag == PROTO_T_CPU_MS ? &c->cpu_ms : &c->memory_kib;
			if (n != 8 || *x)
				return proto_errf(err, errlen, "field %u: bad length or repeated", tag);
			memcpy(x, v, 8);
			if (!*x)
				return proto_errf(err, errlen, "field %u of 0 (no limit is no field)", tag);
			continue;
		}
		if (tag == PROTO_T_PTY) {
			if (n != 4 || c->pty_cols)
				return proto_errf(err, errlen, "PTY field: bad length or repeated");
			c->pty_cols = get16(v);
			c->pty_rows = get16(v + 2);
			if (!c->pty_cols || !c->pty_rows || c->pty_cols > PROTO_PTY_MAX || c->pty_rows > PROTO_PTY_MAX)
				return proto_errf(err, errlen, "PTY of %ux%u: each 1..%u", c->pty_cols, c->pty_rows,
						  PROTO_PTY_MAX);
			continue;
		}
		if (tag != PROTO_T_ARG && tag != PROTO_T_ENV && tag != PROTO_T_CWD)
			return proto_errf(err, errlen, "unknown CMD_START field %u", tag);
		if (!str_ok(v, n))
			return proto_errf(err, errlen, "field %u: string too long or with a NUL", tag);
		if ((tag == PROTO_T_ARG && c->argc == PROTO_SB_MAX_ARGS) || (tag == PROTO_T_ENV && c->envc == PROTO_SB_MAX_ENV) ||
		    (tag == PROTO_T_CWD && (c->cwd || n == 0)))
			return proto_errf(err, errlen, "field %u: too many, repeated or empty", tag);
		/* storage has room for the payload and one NUL per string allowed */
		char *s = c->storage + used;
		memcpy(s, v, n);
		s[n] = '\0';
		used += n + 1u;
		if (tag == PROTO_T_ARG) {
			c->argv[c->argc++] = s;
		} else if (tag == PROTO_T_ENV) {
			if (!proto_valid_env(s, n))
				return proto_errf(err, errlen, "environment grant %u is not NAME=VALUE", c->envc);
			c->env[c->envc++] = s;
		} else {
			c->cwd = s;
		}
	}
	if (r < 0)
		return -1;
	if (c->argc == 0 || !c->argv[0][0])
		return proto_errf(err, errlen, "CMD_START without a program");
	c->argv[c->argc] = NULL;
	c->env[c->envc] = NULL;
	return 0;
}

/* ---- signals, output, exits ------------------------------------------------------ */

void proto_encode_resize(uint8_t *buf, uint32_t id, uint16_t cols, uint16_t rows)
{
	put32(buf, id);
	put16(buf + 4, cols);
	put16(buf + 6, rows);
}

int proto_decode_resize(const uint8_t *p, uint32_t len, uint32_t *id, uint16_t *cols, uint16_t *rows, char *err,
			size_t errlen)
{
	if (len != 8)
		return proto_errf(err, errlen, "CMD_RESIZE of %u bytes", len);
	*id = get32(p);
	*cols = get16(p + 4);
	*rows = get16(p + 6);
	if (!*cols || !*rows || *cols > PROTO_PTY_MAX || *rows > PROTO_PTY_MAX)
		return proto_errf(err, errlen, "CMD_RESIZE to %ux%u: each 1..%u", *cols, *rows, PROTO_PTY_MAX);
	return 0;
}

void proto_encode_signal(uint8_t *buf, uint32_t id, uint32_t sig)
{
	put32(buf, id);
	put32(buf + 4, sig);
}

int proto_decode_signal(const uint8_t *p, uint32_t len, uint32_t *id, uint32_t *sig, char *err, size_t errlen)
{
	if (len != 8)
		return proto_errf(err, errlen, "CMD_SIGNAL of %u bytes", len);
	*id = get32(p);
	*sig = get32(p + 4);
	if (*sig < 1 || *sig > PROTO_MAX_SIGNAL)
		return proto_errf(err, errlen, "CMD_SIGNAL with signal %u outside 1..%d", *sig, PROTO_MAX_SIGNAL);
	return 0;
}

void proto_encode_output_hdr(uint8_t *hdr, uint32_t id, uint16_t stream)
{
	put32(hdr, id);
	put32(hdr + 4, stream);
}

int proto_decode_output(const uint8_t *p, uint32_t len, uint32_t *id, uint16_t *stream, const uint8_t **data,
			uint32_t *n, char *err, size_t errlen)
{
	if (len < 8)
		return proto_errf(err, errlen, "CMD_OUTPUT of %u bytes", len);
	uint32_t s = get32(p + 4);
	if (s != PROTO_STDOUT && s != PROTO_STDERR)
		return proto_errf(err, errlen, "CMD_OUTPUT of stream %u", s);
	*id = get32(p);
	*stream = (uint16_t)s;
	*data = p + 8;
	*n = len - 8;
	return 0;
}

void proto_encode_cmd_exit(uint8_t *buf, uint32_t id, const struct proto_exit *e)
{
	put32(buf, id);
	proto_encode_exit(e, buf + PROTO_SB_ID_LEN);
}

int proto_decode_cmd_exit(const uint8_t *p, uint32_t len, uint32_t *id, struct proto_exit *e, char *err,
			  size_t errlen)
{
	if (len != PROTO_CMD_EXIT_LEN)
		return proto_errf(err, errlen, "CMD_EXIT of %u bytes", len);
	*id = get32(p);
	/* proto_decode_exit knows the run's flags: TIMED_OUT is checked here */
	uint8_t copy[PROTO_EXIT_LEN];
	memcpy(copy, p + PROTO_SB_ID_LEN, PROTO_EXIT_LEN);
	uint32_t flags = get32(copy + 12);
	put32(copy + 12, flags & ~PROTO_EXIT_TIMED_OUT);
	if (proto_decode_exit(copy, PROTO_EXIT_LEN, e, err, errlen))
		return -1;
	if (e->stage)
		return proto_errf(err, errlen, "CMD_EXIT of stage %u", e->stage);
	e->flags = flags;
	return 0;
}

/* ---- file operations ------------------------------------------------------------- */

static bool op_known(uint32_t op)
{
	return op >= PROTO_FILE_READ && op <= PROTO_FILE_OP_LAST;
}

size_t proto_encode_file_req(const struct proto_file_req *r, uint8_t *buf, size_t cap)
{
	if (cap > PROTO_MAX_PAYLOAD)
		cap = PROTO_MAX_PAYLOAD;
	bool rename = r->op == PROTO_FILE_RENAME, moded = r->op == PROTO_FILE_WRITE || r->op == PROTO_FILE_MKDIR;
	if (cap < 8 || !op_known(r->op) || !r->path[0] || rename != (r->path2[0] != '\0') || (r->mode && !moded) ||
	    r->mode > 07777)
		return 0;
	put32(buf, r->id);
	put32(buf + 4, r->op);
	size_t at = put_str(buf, cap, 8, PROTO_T_PATH, r->path);
	if (rename)
		at = put_str(buf, cap, at, PROTO_T_PATH2, r->path2);
	if (r->mode)
		at = put_field(buf, cap, at, PROTO_T_MODE, &r->mode, 4);
	return at;
}

/* PATH or PATH2 into dst (PROTO_MAX_STR + 1 bytes): once, 1..PROTO_MAX_STR
 * bytes, no NUL. */
static int path_field(char *dst, uint16_t tag, const uint8_t *v, uint16_t n, char *err, size_t errlen)
{
	if (dst[0] || n == 0 || !str_ok(v, n))
		return proto_errf(err, errlen, "field %u: repeated, empty, too long or with a NUL", tag);
	memcpy(dst, v, n);
	dst[n] = '\0';
	return 0;
}

int proto_decode_file_req(const uint8_t *p, uint32_t len, struct proto_file_req *r, char *err, size_t errlen)
{
	r->path[0] = r->path2[0] = '\0';
	r->mode = 0;
	if (len < 8 || len > PROTO_MAX_PAYLOAD)
		return proto_errf(err, errlen, "FILE_OP of %u bytes", len);
	r->id = get32(p);
	r->op = get32(p + 4);
	if (!op_known(r->op))
		return proto_errf(err, errlen, "FILE_OP of unknown op %u", r->op);
	struct fields f = { p, len, 8 };
	bool mode_seen = false;
	uint16_t tag = 0, n = 0;
	const uint8_t *v = NULL;
	int rc;
	while ((rc = next_field(&f, &tag, &v, &n, err, errlen)) == 1) {
		if (tag == PROTO_T_PATH || tag == PROTO_T_PATH2) {
			if (path_field(tag == PROTO_T_PATH ? r->path : r->path2, tag, v, n, err, errlen))
				return -1;
		} else if (tag == PROTO_T_MODE) {
			if (n != 4 || mode_seen)
				return proto_errf(err, errlen, "MODE field: bad length or repeated");
			mode_seen = true;
			r->mode = get32(v);
			if (!r->mode || r->mode > 07777)
				return proto_errf(err, errlen, "MODE %#o outside 1..07777", r->mode);
		} else {
			return proto_errf(err, errlen, "unknown FILE_OP field %u", tag);
		}
	}
	if (rc < 0)
		return -1;
	if (!r->path[0])
		return proto_errf(err, errlen, "FILE_OP without a PATH");
	if ((r->op == PROTO_FILE_RENAME) != (r->path2[0] != '\0'))
		return proto_errf(err, errlen, "PATH2 is RENAME's, and RENAME's only");
	if (mode_seen && r->op != PROTO_FILE_WRITE && r->op != PROTO_FILE_MKDIR)
		return proto_errf(err, errlen, "MODE is WRITE's and MKDIR's only");
	return 0;
}

bool proto_valid_name(const char *name, size_t n)
{
	if (n == 0 || n > PROTO_NAME_MAX || memchr(name, '/', n) || memchr(name, '\0', n))
		return false;
	return !(n == 1 && name[0] == '.') && !(n == 2 && name[0] == '.' && name[1] == '.');
}

size_t proto_put_entry(uint8_t *buf, size_t cap, size_t at, const struct proto_entry *e)
{
	size_t n = strnlen(e->name, sizeof(e->name));
	if (!proto_valid_name(e->name, n) || cap < at || cap - at < PROTO_ENTRY_HDR + n)
		return 0;
	uint8_t *q = buf + at;
	uint32_t zero = 0;
	uint16_t n16 = (uint16_t)n;
	memcpy(q, &e->mode, 4);
	memcpy(q + 4, &zero, 4);
	memcpy(q + 8, &e->size, 8);
	memcpy(q + 16, &e->mtime_ns, 8);
	memcpy(q + 24, &n16, 2);
	memcpy(q + PROTO_ENTRY_HDR, e->name, n);
	return at + PROTO_ENTRY_HDR + n;
}

int proto_next_entry(const uint8_t *p, uint32_t len, uint32_t *at, struct proto_entry *e, char *err, size_t errlen)
{
	if (*at > len || len - *at < PROTO_ENTRY_HDR)
		return proto_errf(err, errlen, "entry at byte %u is truncated", *at);
	const uint8_t *q = p + *at;
	uint16_t n = get16(q + 24);
	if (get32(q + 4))
		return proto_errf(err, errlen, "entry at byte %u has a nonzero reserved word", *at);
	if (n > len - *at - PROTO_ENTRY_HDR || !proto_valid_name((const char *)q + PROTO_ENTRY_HDR, n))
		return proto_errf(err, errlen, "entry at byte %u: a bad name of %u bytes", *at, n);
	memcpy(&e->mode, q, 4);
	memcpy(&e->size, q + 8, 8);
	memcpy(&e->mtime_ns, q + 16, 8);
	/* what a stat can say: a type and permission bits, an off_t size */
	if (e->mode & ~(uint32_t)PROTO_ENTRY_MODE_BITS)
		return proto_errf(err, errlen, "entry at byte %u has mode %#o", *at, e->mode);
	if (e->size > (uint64_t)INT64_MAX)
		return proto_errf(err, errlen, "entry at byte %u has a size past 2^63", *at);
	memcpy(e->name, q + PROTO_ENTRY_HDR, n);
	e->name[n] = '\0';
	*at += PROTO_ENTRY_HDR + n;
	return 0;
}

size_t proto_encode_file_end(uint8_t *buf, size_t cap, uint32_t id, int32_t error, uint32_t flags,
			     const struct proto_entry *e)
{
	if (cap < PROTO_FILE_END_LEN)
		return 0;
	put32(buf, id);
	memcpy(buf + 4, &error, 4);
	put32(buf + 8, flags);
	return e && !error ? proto_put_entry(buf, cap, PROTO_FILE_END_LEN, e) : PROTO_FILE_END_LEN;
}

int proto_decode_file_end(const uint8_t *p, uint32_t len, uint32_t *id, int32_t *error, uint32_t *flags,
			  struct proto_entry *e, bool *has_entry, char *err, size_t errlen)
{
	*has_entry = false;
	*id = len >= PROTO_SB_ID_LEN ? get32(p) : 0;
	if (len < PROTO_FILE_END_LEN)
		return proto_errf(err, errlen, "FILE_END of %u bytes", len);
	memcpy(error, p + 4, 4);
	*flags = get32(p + 8);
	if (*error < 0 || *error > 4095)
		return proto_errf(err, errlen, "FILE_END with error %d outside 0..4095", *error);
	if (*flags & ~PROTO_FILE_TRUNCATED)
		return proto_errf(err, errlen, "FILE_END with unknown flags %#x", *flags);
	if (len == PROTO_FILE_END_LEN)
		return 0;
	uint32_t at = PROTO_FILE_END_LEN;
	if (*error || proto_next_entry(p, len, &at, e, err, errlen))
		return *error ? proto_errf(err, errlen, "FILE_END with an error and an entry") : -1;
	if (at != len)
		return proto_errf(err, errlen, "FILE_END with %u bytes after its entry", len - at);
	*has_entry = true;
	return 0;
}
