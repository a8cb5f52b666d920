#include "proto.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "fields are copied in host order");
_Static_assert(PROTO_MAX_STR <= UINT16_MAX, "a field length fits its u16");
_Static_assert(sizeof(struct proto_exit) == PROTO_EXIT_LEN, "EXIT has a fixed layout");

int proto_errf(char *err, size_t errlen, const char *fmt, ...)
{
	char msg[1024];   /* the arguments may point into err */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(err, errlen, "%s", msg);
	return -1;
}

static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

void proto_reader_init(struct proto_reader *r)
{
	r->have = 0;
	r->consumed = 0;
}

static void drop_consumed(struct proto_reader *r)
{
	if (!r->consumed)
		return;
	memmove(r->buf, r->buf + r->consumed, r->have - r->consumed);
	r->have -= r->consumed;
	r->consumed = 0;
}

uint8_t *proto_reader_space(struct proto_reader *r, size_t *room)
{
	drop_consumed(r);
	*room = sizeof(r->buf) - r->have;
	return r->buf + r->have;
}

ssize_t proto_reader_fill(struct proto_reader *r, int fd)
{
	size_t room;
	uint8_t *dst = proto_reader_space(r, &room);
	ssize_t k = read(fd, dst, room);
	if (k > 0)
		proto_reader_fed(r, (size_t)k);
	return k;
}

void proto_reader_fed(struct proto_reader *r, size_t n)
{
	r->have += n;
}

int proto_reader_next(struct proto_reader *r, uint16_t *type, const uint8_t **payload, uint32_t *len,
		      char *err, size_t errlen)
{
	drop_consumed(r);
	if (r->have < PROTO_HDR_LEN)
		return 0;
	uint32_t n = get32(r->buf);
	uint16_t t = get16(r->buf + 4);
	if (n > PROTO_MAX_PAYLOAD)
		return proto_errf(err, errlen, "frame of %u bytes exceeds the %u-byte maximum", n, PROTO_MAX_PAYLOAD);
	if (t < PROTO_HELLO || t > PROTO_TYPE_LAST || get16(r->buf + 6))
		return proto_errf(err, errlen, "unknown frame type %u", t);
	if (r->have < PROTO_HDR_LEN + n)
		return 0;
	*type = t;
	*len = n;
	*payload = r->buf + PROTO_HDR_LEN;
	r->consumed = PROTO_HDR_LEN + n;
	return 1;
}

void proto_header(uint8_t *hdr, uint16_t type, uint32_t len)
{
	uint16_t zero = 0;
	memcpy(hdr, &len, 4);
	memcpy(hdr + 4, &type, 2);
	memcpy(hdr + 6, &zero, 2);
}

int proto_send(int fd, uint16_t type, const void *payload, uint32_t len)
{
	if (len > PROTO_MAX_PAYLOAD) {
		errno = EMSGSIZE;
		return -1;
	}
	uint8_t hdr[PROTO_HDR_LEN];
	proto_header(hdr, type, len);
	struct iovec iov[2] = { { hdr, sizeof(hdr) }, { (void *)payload, len } };
	size_t left = sizeof(hdr) + len;
	int n = 2;
	struct iovec *v = iov;
	while (left) {
		ssize_t k = writev(fd, v, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		left -= (size_t)k;
		while (n && (size_t)k >= v->iov_len) {
			k -= (ssize_t)v->iov_len;
			v++;
			n--;
		}
		if (n) {
			v->iov_base = (uint8_t *)v->iov_base + k;
			v->iov_len -= (size_t)k;
		}
	}
	return 0;
}

size_t proto_encode_hello(uint8_t *buf, size_t cap, const char *name)
{
	size_t n = strlen(name);
	if (cap < 4 + n || n > PROTO_MAX_STR)
		return 0;
	uint32_t v = PROTO_VERSION;
	memcpy(buf, &v, 4);
	memcpy(buf + 4, name, n);
	return 4 + n;
}

int proto_decode_hello(const uint8_t *p, uint32_t len, uint32_t *version, char *err, size_t errlen)
{
	if (len < 4 || len > 4 + PROTO_MAX_STR)
		return proto_errf(err, errlen, "HELLO of %u bytes", len);
	*version = get32(p);
	if (*version != PROTO_VERSION)
		return proto_errf(err, errlen, "agent speaks protocol version %u, this host %u", *version, PROTO_VERSION);
	return 0;
}

/* ---- REQUEST ------------------------------------------------------------ */

static size_t put_field(uint8_t *buf, size_t cap, size_t at, uint16_t tag, const void *v, size_t n)
{
	if (n > PROTO_MAX_STR || cap - at < 4 + n)
		return 0;
	uint16_t len = (uint16_t)n;
	memcpy(buf + at, &tag, 2);
	memcpy(buf + at + 2, &len, 2);
	memcpy(buf + at + 4, v, n);
	return at + 4 + n;
}

bool proto_valid_env(const char *s, size_t n)
{
	const char *eq = memchr(s, '=', n);
	if (!eq || eq == s)
		return false;
	for (const char *c = s; c < eq; c++)
		if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || *c == '_' ||
		      (c > s && *c >= '0' && *c <= '9')))
			return false;
	return true;
}

bool proto_valid_run_id(const char *s, size_t n)
{
	if (n == 0 || n > PROTO_RUN_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* The stage rules both sides hold a request to: 1..PROTO_MAX_STAGES
 * stages, COMPILE ones before the one RUN stage, each with a program. */
static int check_stages(const struct proto_request *r, char *err, size_t errlen)
{
	if (r->sandbox)
		return r->nstages ? proto_errf(err, errlen, "a sandbox with %u stages (none)", r->nstages) : 0;
	if (r->nstages == 0 || r->nstages > PROTO_MAX_STAGES)
		return proto_errf(err, errlen, "%u stages (1 to %u)", r->nstages, PROTO_MAX_STAGES);
	for (unsigned i = 0; i < r->nstages; i++) {
		const struct proto_stage *st = &r->stage[i];
		uint32_t want = i + 1 == r->nstages ? PROTO_STAGE_RUN : PROTO_STAGE_COMPILE;
		if (st->kind != want)
			return proto_errf(err, errlen, "stage %u is of kind %u, not %u (compile stages first, run last)", i,
				    st->kind, want);
		if (st->argc == 0 || st->argc > PROTO_MAX_ARGS || !st->argv[0] || !st->argv[0][0])
			return proto_errf(err, errlen, "stage %u has no program", i);
	}
	return 0;
}

size_t proto_encode_request(const struct proto_request *r, uint8_t *buf, size_t cap)
{
	char why[128];
	if (cap > PROTO_MAX_PAYLOAD)
		cap = PROTO_MAX_PAYLOAD;
	if (cap < 4 || check_stages(r, why, sizeof(why)) || r->envc > PROTO_MAX_ENV || r->nallow > PROTO_MAX_ALLOW)
		return 0;
	uint32_t version = PROTO_VERSION;
	memcpy(buf, &version, 4);
	size_t at = 4;
	if (r->sandbox && !(at = put_field(buf, cap, at, PROTO_T_SANDBOX, "", 0)))
		return 0;
	for (unsigned s = 0; s < r->nstages; s++) {
		const struct proto_stage *st = &r->stage[s];
		if (!(at = put_field(buf, cap, at, PROTO_T_STAGE, &st->kind, 4)))
			return 0;
		for (unsigned i = 0; i < st->argc; i++)
			if (!(at = put_field(buf, cap, at, PROTO_T_ARG, st->argv[i], strlen(st->argv[i]))))
				return 0;
		if ((st->cpu_ms && !(at = put_field(buf, cap, at, PROTO_T_CPU_MS, &st->cpu_ms, 8))) ||
		    (st->memory_kib && !(at = put_field(buf, cap, at, PROTO_T_MEMORY_KIB, &st->memory_kib, 8))))
			return 0;
	}
	for (unsigned i = 0; i < r->envc; i++) {
		size_t n = strlen(r->env[i]);
		if (!proto_valid_env(r->env[i], n) || !(at = put_field(buf, cap, at, PROTO_T_ENV, r->env[i], n)))
			return 0;
	}
	for (unsigned i = 0; i < r->nallow; i++)
		if (r->allow[i][0] != '/' ||
		    !(at = put_field(buf, cap, at, PROTO_T_ALLOW, r->allow[i], strlen(r->allow[i]))))
			return 0;
	const struct { uint16_t tag; uint64_t v; } limits[] = {
		{ PROTO_T_MAX_OUTPUT, r->max_output }, { PROTO_T_NPROC, r->nproc },
		{ PROTO_T_NOFILE, r->nofile }, { PROTO_T_FSIZE, r->fsize },
	};
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
		if (!(at = put_field(buf, cap, at, limits[i].tag, &limits[i].v, 8)))
			return 0;
	/* What makes the guest unique: always sent, and only values the
	 * decoder takes (a run_id array without its NUL is not one). */
	size_t idn = strnlen(r->run_id, sizeof(r->run_id));
	if (!r->time_ns || !proto_valid_run_id(r->run_id, idn) ||
	    !(at = put_field(buf, cap, at, PROTO_T_SEED, r->seed, PROTO_SEED_LEN)) ||
	    !(at = put_field(buf, cap, at, PROTO_T_TIME, &r->time_ns, 8)) ||
	    !(at = put_field(buf, cap, at, PROTO_T_RUN_ID, r->run_id, idn)))
		return 0;
	/* The one port NET may name: what the decoder would refuse is not sent. */
	if (r->net_port && (r->net_port != PROTO_NET_VSOCK_PORT ||
			    !(at = put_field(buf, cap, at, PROTO_T_NET, &r->net_port, 4))))
		return 0;
	return at;
}

/* A u64 field of the current stage (CPU_MS, MEMORY_KIB): once each, and
 * not 0, which is "no limit" and spelled by leaving the field out (the
 * encoder does; accepting an explicit 0 would give a request two
 * encodings). */
static int stage_limit(struct proto_stage *st, uint16_t tag, const uint8_t *v, uint16_t n, unsigned *seen,
		       char *err, size_t errlen)
{
	unsigned bit = tag == PROTO_T_CPU_MS ? 1u : 2u;
	if (n != 8 || (*seen & bit))
		return proto_errf(err, errlen, "stage limit field %u: bad length or repeated", tag);
	*seen |= bit;
	uint64_t x;
	memcpy(&x, v, 8);
	if (x == 0)
		return proto_errf(err, errlen, "stage limit field %u of 0 (no limit is no field)", tag);
	*(tag == PROTO_T_CPU_MS ? &st->cpu_ms : &st->memory_kib) = x;
	return 0;
}

/* NET: once, a u32, and only the host proxy's port (a request must not
 * send the forwarder to another host service). r->net_port is 0 until the
 * field is seen, since 0 is not a value it may have. */
static int net_field(struct proto_request *r, const uint8_t *v, uint16_t n, char *err, size_t errlen)
{
	if (n != 4 || r->net_port)
		return proto_errf(err, errlen, "NET field: bad length or repeated");
	uint32_t port = get32(v);
	if (port != PROTO_NET_VSOCK_PORT)
		return proto_errf(err, errlen, "NET field names port %u, not %u", port, PROTO_NET_VSOCK_PORT);
	r->net_port = port;
	return 0;
}

/* SEED, TIME, RUN_ID: each exactly once (the bits of *seen), at its exact
 * length; a TIME of 0 or a RUN_ID that is not [0-9a-f]{1,32} is refused,
 * since the agent sets the guest's clock from one and puts the other in
 * every stage's environment. */
static int unique_field(struct proto_request *r, uint16_t tag, const uint8_t *v, uint16_t n, unsigned *seen,
			char *err, size_t errlen)
{
	unsigned bit = 1u << (tag - PROTO_T_SEED);
	if (*seen & bit)
		return proto_errf(err, errlen, "field %u repeated", tag);
	*seen |= bit;
	if (tag == PROTO_T_SEED) {
		if (n != PROTO_SEED_LEN)
			return proto_errf(err, errlen, "SEED field of %u bytes, not %u", n, PROTO_SEED_LEN);
		memcpy(r->seed, v, PROTO_SEED_LEN);
	} else if (tag == PROTO_T_TIME) {
		if (n != 8)
			return proto_errf(err, errlen, "TIME field of %u bytes, not 8", n);
		memcpy(&r->time_ns, v, 8);
		if (!r->time_ns)
			return proto_errf(err, errlen, "TIME field of 0");
	} else {
		if (!proto_valid_run_id((const char *)v, n))
			return proto_errf(err, errlen, "RUN_ID field is not 1 to %u of [0-9a-f]", PROTO_RUN_ID_MAX);
		memcpy(r->run_id, v, n);
		r->run_id[n] = '\0';
	}
	return 0;
}

#define UNIQUE_ALL 7u   /* the bits of SEED, TIME and RUN_ID */

int proto_decode_request(const uint8_t *p, uint32_t len, struct proto_request *r, char *err, size_t errlen)
{
	r->nstages = r->envc = r->nallow = 0;
	r->net_port = 0;
	r->sandbox = false;
	r->time_ns = 0;
	r->run_id[0] = '\0';
	if (len < 4)
		return proto_errf(err, errlen, "REQUEST of %u bytes has no version", len);
	/* storage holds one frame's strings: a longer payload could overrun it */
	if (len > PROTO_MAX_PAYLOAD)
		return proto_errf(err, errlen, "REQUEST of %u bytes exceeds the %u-byte maximum", len, PROTO_MAX_PAYLOAD);
	uint32_t version = get32(p);
	if (version != PROTO_VERSION)
		return proto_errf(err, errlen, "host speaks protocol version %u, this agent %u", version, PROTO_VERSION);
	unsigned seen = 0;         /* run-wide limit tags present, as bits */
	unsigned stage_seen = 0;   /* the current stage's limit fields */
	unsigned unique_seen = 0;  /* SEED, TIME, RUN_ID present, as bits */
	struct proto_stage *st = NULL;
	size_t used = 0;
	uint32_t at = 4;
	while (at < len) {
		if (len - at < 4)
			return proto_errf(err, errlen, "truncated field header at byte %u", at);
		uint16_t tag = get16(p + at), n = get16(p + at + 2);
		const uint8_t *v = p + at + 4;
		if (n > len - at - 4)
			return proto_errf(err, errlen, "field %u of %u bytes overruns the request", tag, n);
		at += 4u + n;
		if (tag >= PROTO_T_MAX_OUTPUT && tag <= PROTO_T_FSIZE) {
			if (n != 8 || (seen & (1u << tag)))
				return proto_errf(err, errlen, "limit field %u: bad length or repeated", tag);
			seen |= 1u << tag;
			uint64_t x;
			memcpy(&x, v, 8);
			uint64_t *dst[] = { &r->max_output, &r->nproc, &r->nofile, &r->fsize };
			*dst[tag - PROTO_T_MAX_OUTPUT] = x;
			continue;
		}
		if (tag == PROTO_T_STAGE) {
			if (n != 4)
				return proto_errf(err, errlen, "STAGE field of %u bytes", n);
			if (r->nstages == PROTO_MAX_STAGES)
				return proto_errf(err, errlen, "more than %u stages", PROTO_MAX_STAGES);
			st = &r->stage[r->nstages++];
			*st = (struct proto_stage){ .kind = get32(v) };
			stage_seen = 0;
			continue;
		}
		if (tag == PROTO_T_SANDBOX) {
			if (n != 0 || r->sandbox)
				return proto_errf(err, errlen, "SANDBOX field: bad length or repeated");
			r->sandbox = true;
			continue;
		}
		if (tag == PROTO_T_NET) {
			if (net_field(r, v, n, err, errlen))
				return -1;
			continue;
		}
		if (tag >= PROTO_T_SEED && tag <= PROTO_T_RUN_ID) {
			if (unique_field(r, tag, v, n, &unique_seen, err, errlen))
				return -1;
			continue;
		}
		if (tag == PROTO_T_CPU_MS || tag == PROTO_T_MEMORY_KIB) {
			if (!st)
				return proto_errf(err, errlen, "field %u before any STAGE", tag);
			if (stage_limit(st, tag, v, n, &stage_seen, err, errlen))
				return -1;
			continue;
		}
		if (tag < PROTO_T_ARG || tag > PROTO_T_ALLOW)
			return proto_errf(err, errlen, "unknown field %u", tag);
		if (n > PROTO_MAX_STR || memchr(v, '\0', n))
			return proto_errf(err, errlen, "field %u: string too long or with a NUL", tag);
		if (tag == PROTO_T_ARG && !st)
			return proto_errf(err, errlen, "ARG before any STAGE");
		/* Counts first: storage has room for one NUL per allowed string. */
		if ((tag == PROTO_T_ARG && st->argc == PROTO_MAX_ARGS) || (tag == PROTO_T_ENV && r->envc == PROTO_MAX_ENV) ||
		    (tag == PROTO_T_ALLOW && r->nallow == PROTO_MAX_ALLOW))
			return proto_errf(err, errlen, "too many fields of type %u", tag);
		char *s = r->storage + used;
		memcpy(s, v, n);
		s[n] = '\0';
		used += n + 1u;
		if (tag == PROTO_T_ARG) {
			st->argv[st->argc++] = s;
		} else if (tag == PROTO_T_ENV) {
			if (!proto_valid_env(s, n))
				return proto_errf(err, errlen, "environment grant %u is not NAME=VALUE", r->envc);
			r->env[r->envc++] = s;
		} else {
			if (s[0] != '/')
				return proto_errf(err, errlen, "allowlist entry %u is not an absolute path", r->nallow);
			r->allow[r->nallow++] = s;
		}
	}
	for (unsigned i = 0; i < r->nstages; i++)
		r->stage[i].argv[r->stage[i].argc] = NULL;
	if (r->nstages == 0 && !r->sandbox)
		return proto_errf(err, errlen, "no program");
	if (check_stages(r, err, errlen))
		return -1;
	if (seen != ((1u << PROTO_T_MAX_OUTPUT) | (1u << PROTO_T_NPROC) | (1u << PROTO_T_NOFILE) | (1u << PROTO_T_FSIZE)))
		return proto_errf(err, errlen, "a limit is missing");
	if (unique_seen != UNIQUE_ALL)
		return proto_errf(err, errlen, "%s field is missing",
				  !(unique_seen & 1u) ? "the SEED" : !(unique_seen & 2u) ? "the TIME" : "the RUN_ID");
	r->env[r->envc] = NULL;
	return 0;
}

void proto_encode_exit(const struct proto_exit *e, uint8_t *buf)
{
	memcpy(buf, e, PROTO_EXIT_LEN);
}

int proto_decode_exit(const uint8_t *p, uint32_t len, struct proto_exit *e, char *err, size_t errlen)
{
	if (len != PROTO_EXIT_LEN)
		return proto_errf(err, errlen, "EXIT of %u bytes", len);
	memcpy(e, p, PROTO_EXIT_LEN);
	if (e->kind < PROTO_END_EXITED || e->kind > PROTO_END_ERROR)
		return proto_errf(err, errlen, "EXIT with unknown kind %u", e->kind);
	/* The host passes these on as its own exit status (code, 128 +
	 * signal): a value no process can end with is a malformed frame, not
	 * something to clamp into a plausible status. */
	if (e->kind == PROTO_END_EXITED && (e->code < 0 || e->code > 255))
		return proto_errf(err, errlen, "EXIT with exit code %d outside 0..255", e->code);
	if (e->kind == PROTO_END_SIGNALED && (e->signal < 1 || e->signal > PROTO_MAX_SIGNAL))
		return proto_errf(err, errlen, "EXIT with signal %d outside 1..%d", e->signal, PROTO_MAX_SIGNAL);
	if (e->flags & ~PROTO_EXIT_FLAGS)
		return proto_errf(err, errlen, "EXIT with unknown flags %#x", e->flags & ~PROTO_EXIT_FLAGS);
	if (e->zero)
		return proto_errf(err, errlen, "EXIT with a nonzero reserved field (%#x)", e->zero);
	if (e->stage >= PROTO_MAX_STAGES)
		return proto_errf(err, errlen, "EXIT of stage %u", e->stage);
	return 0;
}

bool proto_stage_continues(const struct proto_request *r, const struct proto_exit *e)
{
	/* 64-bit: a stage of UINT32_MAX must not wrap around to 0 */
	return (uint64_t)e->stage + 1 < r->nstages && e->kind == PROTO_END_EXITED && e->code == 0;
}
