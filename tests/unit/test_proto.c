/* The host-agent wire format (guest-agent/proto.c): the three payloads
 * encoded and decoded (a REQUEST's version and stages among them), the
 * rule for going on to the next stage, the frame reader over any split of
 * the stream, and everything hostile that either side must refuse. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "proto.h"

static char err[512];

/* ---- helpers ------------------------------------------------------------- */

/* A REQUEST payload built by hand, field by field (room for more than a
 * frame, to build oversized ones). */
struct pb {
	uint8_t b[2 * PROTO_MAX_PAYLOAD];
	size_t n;
};

static void pb_field(struct pb *p, uint16_t tag, const void *v, size_t n)
{
	uint16_t len = (uint16_t)n;
	memcpy(p->b + p->n, &tag, 2);
	memcpy(p->b + p->n + 2, &len, 2);
	if (n)
		memcpy(p->b + p->n + 4, v, n);
	p->n += 4 + n;
}

static void pb_str(struct pb *p, uint16_t tag, const char *s)
{
	pb_field(p, tag, s, strlen(s));
}

static void pb_u64(struct pb *p, uint16_t tag, uint64_t v)
{
	pb_field(p, tag, &v, 8);
}

/* An empty payload but for the version word every REQUEST starts with. */
static void pb_begin(struct pb *p)
{
	memset(p, 0, sizeof(*p));
	uint32_t v = PROTO_VERSION;
	memcpy(p->b, &v, 4);
	p->n = 4;
}

static void pb_stage(struct pb *p, uint32_t kind)
{
	pb_field(p, PROTO_T_STAGE, &kind, 4);
}

/* The version, then a RUN stage with its program. */
static void pb_run(struct pb *p, const char *prog)
{
	pb_begin(p);
	pb_stage(p, PROTO_STAGE_RUN);
	pb_str(p, PROTO_T_ARG, prog);
}

static void pb_limits(struct pb *p)
{
	pb_u64(p, PROTO_T_MAX_OUTPUT, 1000);
	pb_u64(p, PROTO_T_NPROC, 2000);
	pb_u64(p, PROTO_T_NOFILE, 3000);
	pb_u64(p, PROTO_T_FSIZE, 4000);
}

/* The run id the tests use: as long as vmrun's. */
#define RUN_ID "0123456789abcdef0123456789abcdef"
#define TIME_NS 1700000000123456789ull
/* SEED, TIME and RUN_ID (RUN_ID) encoded: their bytes in every request. */
#define UNIQUE_LEN (4 + PROTO_SEED_LEN + 4 + 8 + 4 + 32)

static const uint8_t test_seed[PROTO_SEED_LEN] = {
	1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
	17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 0xff,
};

/* What makes a guest unique, by hand; each field on its own so that tests
 * can leave one out or repeat it. */
static void pb_seed(struct pb *p) { pb_field(p, PROTO_T_SEED, test_seed, PROTO_SEED_LEN); }
static void pb_time(struct pb *p) { pb_u64(p, PROTO_T_TIME, TIME_NS); }
static void pb_run_id(struct pb *p) { pb_str(p, PROTO_T_RUN_ID, RUN_ID); }

/* Every run-wide field a request must have: the limits, SEED, TIME, RUN_ID. */
static void pb_required(struct pb *p)
{
	pb_limits(p);
	pb_seed(p);
	pb_time(p);
	pb_run_id(p);
}

/* The same three in a request built as a struct. */
static void set_unique(struct proto_request *r)
{
	memcpy(r->seed, test_seed, PROTO_SEED_LEN);
	r->time_ns = TIME_NS;
	snprintf(r->run_id, sizeof(r->run_id), "%s", RUN_ID);
}

/* The bytes the encoder writes for set_unique's fields, at p. */
static void assert_unique_bytes(const uint8_t *p)
{
	static const uint8_t seed_hdr[] = { 12, 0, 32, 0 }, time_hdr[] = { 13, 0, 8, 0 }, id_hdr[] = { 14, 0, 32, 0 };
	uint64_t t = TIME_NS;
	assert_memory_equal(p, seed_hdr, 4);
	assert_memory_equal(p + 4, test_seed, PROTO_SEED_LEN);
	assert_memory_equal(p + 36, time_hdr, 4);
	assert_memory_equal(p + 40, &t, 8);
	assert_memory_equal(p + 48, id_hdr, 4);
	assert_memory_equal(p + 52, RUN_ID, 32);
}

static struct pb pb;
static struct proto_request req, req2;
static uint8_t enc[2 * PROTO_MAX_PAYLOAD], enc2[2 * PROTO_MAX_PAYLOAD];

static int decode_pb(void)
{
	memset(err, 0, sizeof(err));
	return proto_decode_request(pb.b, (uint32_t)pb.n, &req, err, sizeof(err));
}

/* Decoding must fail with a reason containing `why`. */
#define assert_refused(why)                                                       \
	do {                                                                      \
		assert_int_equal(decode_pb(), -1);                                \
		if (!strstr(err, (why)))                                          \
			fail_msg("reason \"%s\" lacks \"%s\"", err, (why));       \
	} while (0)

static int setup(void **state)
{
	(void)state;
	pb_begin(&pb);
	memset(&req, 0, sizeof(req));
	memset(&req2, 0, sizeof(req2));
	set_unique(&req);
	return 0;
}

/* Make r a request of one RUN stage; returns that stage. */
static struct proto_stage *run_stage(struct proto_request *r)
{
	r->nstages = 1;
	r->stage[0].kind = PROTO_STAGE_RUN;
	return &r->stage[0];
}

/* Field-by-field equality of two decoded (or hand-built) requests. */
static void assert_same_request(const struct proto_request *a, const struct proto_request *b)
{
	assert_int_equal(a->nstages, b->nstages);
	assert_int_equal(a->envc, b->envc);
	assert_int_equal(a->nallow, b->nallow);
	for (unsigned s = 0; s < a->nstages; s++) {
		const struct proto_stage *x = &a->stage[s], *y = &b->stage[s];
		assert_int_equal(x->kind, y->kind);
		assert_int_equal(x->argc, y->argc);
		for (unsigned i = 0; i < x->argc; i++)
			assert_string_equal(x->argv[i], y->argv[i]);
		assert_true(x->cpu_ms == y->cpu_ms);
		assert_true(x->memory_kib == y->memory_kib);
	}
	for (unsigned i = 0; i < a->envc; i++)
		assert_string_equal(a->env[i], b->env[i]);
	for (unsigned i = 0; i < a->nallow; i++)
		assert_string_equal(a->allow[i], b->allow[i]);
	assert_true(a->max_output == b->max_output);
	assert_true(a->nproc == b->nproc);
	assert_true(a->nofile == b->nofile);
	assert_true(a->fsize == b->fsize);
	assert_int_equal(a->net_port, b->net_port);
	assert_memory_equal(a->seed, b->seed, PROTO_SEED_LEN);
	assert_true(a->time_ns == b->time_ns);
	assert_string_equal(a->run_id, b->run_id);
}

/* ---- HELLO ---------------------------------------------------------------- */

static void hello_round_trip(void **state)
{
	(void)state;
	uint8_t buf[64];
	memset(buf, 0xee, sizeof(buf));
	size_t n = proto_encode_hello(buf, sizeof(buf), "vmrun-agent 0.1.0");
	assert_int_equal(n, 4 + 17);
	static const uint8_t want[] = { 5, 0, 0, 0, 'v', 'm', 'r', 'u', 'n', '-', 'a', 'g', 'e', 'n', 't',
					' ', '0', '.', '1', '.', '0' };
	assert_memory_equal(buf, want, sizeof(want));
	assert_int_equal(buf[n], 0xee);   /* no NUL written after the name */
	uint32_t version = 0;
	assert_int_equal(proto_decode_hello(buf, (uint32_t)n, &version, err, sizeof(err)), 0);
	assert_int_equal(version, PROTO_VERSION);

	/* an empty name */
	assert_int_equal(proto_encode_hello(buf, sizeof(buf), ""), 4);
	assert_int_equal(proto_decode_hello(buf, 4, &version, err, sizeof(err)), 0);

	/* cap: exactly enough, one short */
	assert_int_equal(proto_encode_hello(buf, 7, "abc"), 7);
	memset(buf, 0xee, sizeof(buf));
	assert_int_equal(proto_encode_hello(buf, 6, "abc"), 0);
	assert_int_equal(buf[0], 0xee);
	assert_int_equal(proto_encode_hello(buf, 3, ""), 0);

	/* the longest name, and one more */
	static char name[PROTO_MAX_STR + 2];
	static uint8_t big[PROTO_MAX_STR + 16];
	memset(name, 'n', PROTO_MAX_STR);
	assert_int_equal(proto_encode_hello(big, sizeof(big), name), 4 + PROTO_MAX_STR);
	assert_int_equal(proto_decode_hello(big, 4 + PROTO_MAX_STR, &version, err, sizeof(err)), 0);
	name[PROTO_MAX_STR] = 'n';
	assert_int_equal(proto_encode_hello(big, sizeof(big), name), 0);
}

static void hello_refused(void **state)
{
	(void)state;
	static uint8_t buf[PROTO_MAX_STR + 16];
	uint32_t version;
	uint32_t v = PROTO_VERSION;
	memcpy(buf, &v, 4);
	for (uint32_t len = 0; len < 4; len++) {
		assert_int_equal(proto_decode_hello(buf, len, &version, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "HELLO of"));
	}
	assert_int_equal(proto_decode_hello(buf, 4 + PROTO_MAX_STR + 1, &version, err, sizeof(err)), -1);
	assert_string_equal(err, "HELLO of 4101 bytes");

	/* wrong versions: 0, the last ones, the next one, a byte-swapped 5 */
	const uint32_t bad[] = { 0, 1, 2, 3, 4, 6, 0x05000000u, UINT32_MAX };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(buf, &bad[i], 4);
		memcpy(buf + 4, "agent", 5);
		version = 12345;
		assert_int_equal(proto_decode_hello(buf, 9, &version, err, sizeof(err)), -1);
		assert_int_equal(version, bad[i]);
		assert_non_null(strstr(err, "protocol version"));
	}
	v = 1;
	memcpy(buf, &v, 4);
	assert_int_equal(proto_decode_hello(buf, 4, &version, err, sizeof(err)), -1);
	assert_string_equal(err, "agent speaks protocol version 1, this host 5");
}

/* ---- EXIT ----------------------------------------------------------------- */

static void exit_round_trip(void **state)
{
	(void)state;
	const struct proto_exit e = {
		.kind = PROTO_END_SIGNALED, .code = -7, .signal = 9,
		.flags = PROTO_EXIT_STDOUT_TRUNCATED | PROTO_EXIT_STDERR_TRUNCATED | PROTO_EXIT_OOM_KILLED |
			 PROTO_EXIT_CPU_EXCEEDED,
		.stage = 1, .cpu_ms = 0x0102030405060708ull, .max_rss_kib = 123456, .stdout_bytes = UINT64_MAX,
		.stderr_bytes = 1ull << 40,
	};
	uint8_t buf[PROTO_EXIT_LEN + 4];
	memset(buf, 0xee, sizeof(buf));
	proto_encode_exit(&e, buf);
	for (size_t i = PROTO_EXIT_LEN; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0xee);   /* exactly 56 bytes written */
	/* the layout, little-endian: kind, code, signal, flags, stage, zero, then the u64s */
	static const uint8_t head[] = { 2, 0, 0, 0, 0xf9, 0xff, 0xff, 0xff, 9, 0, 0, 0, 15, 0, 0, 0,
					1, 0, 0, 0, 0, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1 };
	assert_memory_equal(buf, head, sizeof(head));
	assert_int_equal(buf[32], 123456 & 0xff);
	assert_int_equal(buf[40], 0xff);
	assert_int_equal(buf[48 + 5], 1);   /* 1 << 40 */

	struct proto_exit d;
	memset(&d, 0x5a, sizeof(d));
	assert_int_equal(proto_decode_exit(buf, PROTO_EXIT_LEN, &d, err, sizeof(err)), 0);
	assert_memory_equal(&d, &e, sizeof(e));

	/* every known kind decodes */
	for (uint32_t k = PROTO_END_EXITED; k <= PROTO_END_ERROR; k++) {
		struct proto_exit x = { .kind = k, .code = (int32_t)k, .signal = 9 };
		proto_encode_exit(&x, buf);
		assert_int_equal(proto_decode_exit(buf, PROTO_EXIT_LEN, &d, err, sizeof(err)), 0);
		assert_int_equal(d.kind, k);
		assert_int_equal(d.code, (int32_t)k);
	}
}

static void exit_refused(void **state)
{
	(void)state;
	uint8_t buf[PROTO_EXIT_LEN + 8] = { 0 };
	struct proto_exit d;
	const struct proto_exit ok = { .kind = PROTO_END_EXITED };
	proto_encode_exit(&ok, buf);
	const uint32_t lens[] = { 0, 1, PROTO_EXIT_LEN - 1, PROTO_EXIT_LEN + 1, PROTO_EXIT_LEN + 8 };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		assert_int_equal(proto_decode_exit(buf, lens[i], &d, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "EXIT of"));
	}
	assert_int_equal(proto_decode_exit(buf, 55, &d, err, sizeof(err)), -1);
	assert_string_equal(err, "EXIT of 55 bytes");

	const uint32_t kinds[] = { 0, PROTO_END_ERROR + 1, 0x100, UINT32_MAX };
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		struct proto_exit x = { .kind = kinds[i] };
		proto_encode_exit(&x, buf);
		assert_int_equal(proto_decode_exit(buf, PROTO_EXIT_LEN, &d, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "unknown kind"));
	}
	struct proto_exit x = { .kind = 6 };
	proto_encode_exit(&x, buf);
	assert_int_equal(proto_decode_exit(buf, PROTO_EXIT_LEN, &d, err, sizeof(err)), -1);
	assert_string_equal(err, "EXIT with unknown kind 6");
}

/* v2's fields: the flags known, the reserved word 0, a stage a request
 * can have. */
static void exit_stage_and_flags(void **state)
{
	(void)state;
	uint8_t buf[PROTO_EXIT_LEN];
	struct proto_exit d;
	/* every known flag, alone and together, in either stage */
	const uint32_t good[] = { 0, PROTO_EXIT_STDOUT_TRUNCATED, PROTO_EXIT_STDERR_TRUNCATED, PROTO_EXIT_OOM_KILLED,
				  PROTO_EXIT_CPU_EXCEEDED, PROTO_EXIT_FLAGS };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		for (uint32_t st = 0; st < PROTO_MAX_STAGES; st++) {
			struct proto_exit x = { .kind = PROTO_END_SIGNALED, .signal = 9, .flags = good[i], .stage = st };
			proto_encode_exit(&x, buf);
			assert_int_equal(proto_decode_exit(buf, PROTO_EXIT_LEN, &d, err, sizeof(err)), 0);
			assert_int_equal(d.flags, good[i]);
			assert_int_equal(d.stage, st);
		}
	assert_int_equal(PROTO_EXIT_FLAGS, 15);
	/* unknown flags, with or without known ones */
	const uint32_t bad[] = { 16, 16 | PROTO_EXIT_OOM_KILLED, 0x80000000u, UINT32_MAX };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct proto_exit x = { .kind = PROTO_END_EXITED, .flags = bad[i] };
		proto_encode_exit(&x, buf);
		assert_int_equal(proto_decode_exit(buf, PROTO_EXIT_LEN, &d, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "EXIT with unknown flags"));
	}
	struct proto_exit x = { .kind = PROTO_END_EXITED, .flags = 16 | PROTO_EXIT_CPU_EXCEEDED };
	proto_encode_exit(&x, buf);
	assert_int_equal(proto_decode_exit(buf, PROTO_EXIT_LEN, &d, err, sizeof(err)), -1);
	assert_string_equal(err, "EXIT with unknown flags 0x10");
	/* the reserved field */
	const uint32_t zeros[] = { 1, 0x100, UINT32_MAX };
	for (size_t i = 0; i < sizeof(zeros) / sizeof(zeros[0]); i++) {
		x = (struct proto_exit){ .kind = PROTO_END_EXITED, .zero = zeros[i] };
		proto_encode_exit(&x, buf);
		assert_int_equal(proto_decode_exit(buf, PROTO_EXIT_LEN, &d, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "nonzero reserved field"));
	}
	/* a stage no request has */
	const uint32_t stages[] = { PROTO_MAX_STAGES, PROTO_MAX_STAGES + 1, 0x01000000u, UINT32_MAX };
	for (size_t i = 0; i < sizeof(stages) / sizeof(stages[0]); i++) {
		x = (struct proto_exit){ .kind = PROTO_END_EXITED, .stage = stages[i] };
		proto_encode_exit(&x, buf);
		assert_int_equal(proto_decode_exit(buf, PROTO_EXIT_LEN, &d, err, sizeof(err)), -1);
		char want[64];
		snprintf(want, sizeof(want), "EXIT of stage %u", stages[i]);
		assert_string_equal(err, want);
	}
}

/* proto_stage_continues: on only after a stage that exited 0 and is not
 * the last. */
static void stage_continues_table(void **state)
{
	(void)state;
	struct proto_request one = { .nstages = 1 }, two = { .nstages = 2 }, none = { .nstages = 0 };
	static const struct {
		uint32_t kind;
		int32_t code;
		uint32_t stage;
		bool one, two;   /* continues in a request of one stage, of two */
	} t[] = {
		{ PROTO_END_EXITED, 0, 0, false, true },
		{ PROTO_END_EXITED, 0, 1, false, false },    /* the last stage of two */
		{ PROTO_END_EXITED, 1, 0, false, false },    /* a compile error */
		{ PROTO_END_EXITED, 255, 0, false, false },
		{ PROTO_END_SIGNALED, 0, 0, false, false },  /* code is not looked at, the kind is */
		{ PROTO_END_DENIED, 0, 0, false, false },
		{ PROTO_END_NOT_FOUND, 0, 0, false, false },
		{ PROTO_END_ERROR, 0, 0, false, false },
		{ PROTO_END_EXITED, 0, 2, false, false },    /* past the end */
		{ PROTO_END_EXITED, 0, UINT32_MAX, false, false },   /* no wrap to stage 0 */
		{ PROTO_END_EXITED, 0, UINT32_MAX - 1, false, false },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct proto_exit e = { .kind = t[i].kind, .code = t[i].code, .stage = t[i].stage };
		if (proto_stage_continues(&one, &e) != t[i].one || proto_stage_continues(&two, &e) != t[i].two)
			fail_msg("row %zu: kind %u code %d stage %u: continues %d/%d, want %d/%d", i, t[i].kind, t[i].code,
				 t[i].stage, proto_stage_continues(&one, &e), proto_stage_continues(&two, &e), t[i].one,
				 t[i].two);
		assert_false(proto_stage_continues(&none, &e));
	}
	/* the flags do not matter: a truncated compile stage that exited 0 goes on */
	struct proto_exit e = { .kind = PROTO_END_EXITED, .flags = PROTO_EXIT_FLAGS };
	assert_true(proto_stage_continues(&two, &e));
}

/* What the host turns into its own exit status must be one: an exit code
 * of 0..255, a signal of 1..64 (128 + signal must neither overflow nor
 * read as a status that is not a signal). */
static void exit_status_ranges(void **state)
{
	(void)state;
	uint8_t buf[PROTO_EXIT_LEN];
	struct proto_exit d;
	const int32_t good_codes[] = { 0, 1, 124, 255 }, bad_codes[] = { -1, 256, 1000, INT32_MAX, INT32_MIN };
	const int32_t good_sigs[] = { 1, 9, 15, 64 }, bad_sigs[] = { 0, -1, 65, 128, INT32_MAX, INT32_MIN };
	for (size_t i = 0; i < sizeof(good_codes) / sizeof(good_codes[0]); i++) {
		struct proto_exit x = { .kind = PROTO_END_EXITED, .code = good_codes[i] };
		proto_encode_exit(&x, buf);
		assert_int_equal(proto_decode_exit(buf, PROTO_EXIT_LEN, &d, err, sizeof(err)), 0);
		assert_int_equal(d.code, good_codes[i]);
	}
	for (size_t i = 0; i < sizeof(bad_codes) / sizeof(bad_codes[0]); i++) {
		struct proto_exit x = { .kind = PROTO_END_EXITED, .code = bad_codes[i] };
		proto_encode_exit(&x, buf);
		if (proto_decode_exit(buf, PROTO_EXIT_LEN, &d, err, sizeof(err)) != -1)
			fail_msg("EXIT with exit code %d accepted", bad_codes[i]);
		assert_non_null(strstr(err, "exit code"));
	}
	for (size_t i = 0; i < sizeof(good_sigs) / sizeof(good_sigs[0]); i++) {
		struct proto_exit x = { .kind = PROTO_END_SIGNALED, .signal = good_sigs[i] };
		proto_encode_exit(&x, buf);
		assert_int_equal(proto_decode_exit(buf, PROTO_EXIT_LEN, &d, err, sizeof(err)), 0);
		assert_int_equal(d.signal, good_sigs[i]);
	}
	for (size_t i = 0; i < sizeof(bad_sigs) / sizeof(bad_sigs[0]); i++) {
		struct proto_exit x = { .kind = PROTO_END_SIGNALED, .signal = bad_sigs[i] };
		proto_encode_exit(&x, buf);
		if (proto_decode_exit(buf, PROTO_EXIT_LEN, &d, err, sizeof(err)) != -1)
			fail_msg("EXIT with signal %d accepted", bad_sigs[i]);
		assert_non_null(strstr(err, "signal"));
	}
	/* the field a kind does not use is not judged */
	struct proto_exit x = { .kind = PROTO_END_SIGNALED, .code = -7, .signal = 9 };
	proto_encode_exit(&x, buf);
	assert_int_equal(proto_decode_exit(buf, PROTO_EXIT_LEN, &d, err, sizeof(err)), 0);
	x = (struct proto_exit){ .kind = PROTO_END_EXITED, .code = 3, .signal = INT32_MAX };
	proto_encode_exit(&x, buf);
	assert_int_equal(proto_decode_exit(buf, PROTO_EXIT_LEN, &d, err, sizeof(err)), 0);
}

/* ---- REQUEST -------------------------------------------------------------- */

static void request_exact_bytes(void **state)
{
	(void)state;
	struct proto_stage *st = run_stage(&req);
	st->argc = 1;
	st->argv[0] = "a";
	req.max_output = 1;
	req.nproc = 2;
	req.nofile = 3;
	req.fsize = 0x1122334455667788ull;
	memset(enc, 0xee, sizeof(enc));
	size_t n = proto_encode_request(&req, enc, sizeof(enc));
	assert_int_equal(n, 4 + 8 + 5 + 4 * 12 + UNIQUE_LEN);
	static const uint8_t want[] = {
		5, 0, 0, 0,
		8, 0, 4, 0, 2, 0, 0, 0,
		1, 0, 1, 0, 'a',
		4, 0, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0,
		5, 0, 8, 0, 2, 0, 0, 0, 0, 0, 0, 0,
		6, 0, 8, 0, 3, 0, 0, 0, 0, 0, 0, 0,
		7, 0, 8, 0, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
	};
	assert_memory_equal(enc, want, sizeof(want));
	assert_unique_bytes(enc + sizeof(want));   /* after the limits */
	assert_int_equal(enc[n], 0xee);
	assert_int_equal(proto_decode_request(enc, (uint32_t)n, &req2, err, sizeof(err)), 0);
	assert_same_request(&req, &req2);
	assert_null(req2.stage[0].argv[1]);
	assert_null(req2.env[0]);

	/* two stages with their limits: each stage's fields after its STAGE */
	memset(&req, 0, sizeof(req));
	set_unique(&req);
	req.nstages = 2;
	req.stage[0] = (struct proto_stage){ .kind = PROTO_STAGE_COMPILE, .argc = 1, .argv = { "c" },
					     .cpu_ms = 0x0102, .memory_kib = 3 };
	req.stage[1] = (struct proto_stage){ .kind = PROTO_STAGE_RUN, .argc = 1, .argv = { "r" }, .memory_kib = 4 };
	memset(enc, 0xee, sizeof(enc));
	n = proto_encode_request(&req, enc, sizeof(enc));
	static const uint8_t want2[] = {
		5, 0, 0, 0,
		8, 0, 4, 0, 1, 0, 0, 0,
		1, 0, 1, 0, 'c',
		9, 0, 8, 0, 2, 1, 0, 0, 0, 0, 0, 0,
		10, 0, 8, 0, 3, 0, 0, 0, 0, 0, 0, 0,
		8, 0, 4, 0, 2, 0, 0, 0,
		1, 0, 1, 0, 'r',
		10, 0, 8, 0, 4, 0, 0, 0, 0, 0, 0, 0,
	};
	assert_int_equal(n, sizeof(want2) + 4 * 12 + UNIQUE_LEN);
	assert_memory_equal(enc, want2, sizeof(want2));
	assert_unique_bytes(enc + sizeof(want2) + 4 * 12);
	assert_int_equal(enc[n], 0xee);
	assert_int_equal(proto_decode_request(enc, (uint32_t)n, &req2, err, sizeof(err)), 0);
	assert_same_request(&req, &req2);
}

static void request_round_trip(void **state)
{
	(void)state;
	static char longest[PROTO_MAX_STR + 1];
	memset(longest, 'L', PROTO_MAX_STR);
	char *argv[] = {
		"/usr/bin/printf", "%s|", "two words", "", "'single' \"double\"", "back\\slash", "new\nline",
		"tab\there", "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80", "$HOME", "*", "", " ", "--", "-n",
		"\x01\x7f\xff", longest,
	};
	char *env[] = { "X=granted", "EMPTY=", "_UNDER_1=a=b=c", "lower=case", "UTF=\xc3\xa9", "LANG=fr_FR.UTF-8" };
	char *allow[] = { "/usr/bin/printf", "/", "/a b/c", "/usr/bin/../bin/x", "/\xc3\xa9" };
	struct proto_stage *st = run_stage(&req);
	st->argc = sizeof(argv) / sizeof(argv[0]);
	memcpy(st->argv, argv, sizeof(argv));
	req.envc = sizeof(env) / sizeof(env[0]);
	memcpy(req.env, env, sizeof(env));
	req.nallow = sizeof(allow) / sizeof(allow[0]);
	memcpy(req.allow, allow, sizeof(allow));
	req.max_output = 0;
	req.nproc = UINT64_MAX;
	req.nofile = 1;
	req.fsize = 1ull << 63;
	size_t n = proto_encode_request(&req, enc, sizeof(enc));
	assert_int_not_equal(n, 0);
	memset(&req2, 0x5a, sizeof(req2));
	assert_int_equal(proto_decode_request(enc, (uint32_t)n, &req2, err, sizeof(err)), 0);
	assert_same_request(&req, &req2);
	assert_null(req2.stage[0].argv[req2.stage[0].argc]);
	assert_null(req2.env[req2.envc]);
	assert_int_equal(strlen(req2.stage[0].argv[16]), PROTO_MAX_STR);
	assert_string_equal(req2.stage[0].argv[3], "");

	/* the decoded copy re-encodes to the same bytes */
	size_t n2 = proto_encode_request(&req2, enc2, sizeof(enc2));
	assert_int_equal(n2, n);
	assert_memory_equal(enc, enc2, n);
}

/* A compile stage and the run stage, each with limits, the extremes
 * among them, round trip; the re-encoding is byte for byte the same. */
static void request_two_stage_round_trip(void **state)
{
	(void)state;
	char *cc[] = { "/usr/bin/gcc", "-O2", "-o", "prog", "prog.c", "" };
	char *run[] = { "./prog", "arg one" };
	req.nstages = 2;
	req.stage[0].kind = PROTO_STAGE_COMPILE;
	req.stage[0].argc = sizeof(cc) / sizeof(cc[0]);
	memcpy(req.stage[0].argv, cc, sizeof(cc));
	req.stage[0].cpu_ms = 10000;
	req.stage[0].memory_kib = 512 * 1024;
	req.stage[1].kind = PROTO_STAGE_RUN;
	req.stage[1].argc = 2;
	memcpy(req.stage[1].argv, run, sizeof(run));
	req.stage[1].cpu_ms = UINT64_MAX;
	req.stage[1].memory_kib = 1;
	char *env[] = { "X=1" };
	char *allow[] = { "/usr/bin/gcc", "/workspace/prog" };
	req.envc = 1;
	memcpy(req.env, env, sizeof(env));
	req.nallow = 2;
	memcpy(req.allow, allow, sizeof(allow));
	req.max_output = 100;
	req.nproc = 10;
	req.nofile = 20;
	req.fsize = 30;
	size_t n = proto_encode_request(&req, enc, sizeof(enc));
	assert_int_not_equal(n, 0);
	memset(&req2, 0x5a, sizeof(req2));
	assert_int_equal(proto_decode_request(enc, (uint32_t)n, &req2, err, sizeof(err)), 0);
	assert_same_request(&req, &req2);
	assert_int_equal(req2.nstages, 2);
	assert_int_equal(req2.stage[0].kind, PROTO_STAGE_COMPILE);
	assert_int_equal(req2.stage[1].kind, PROTO_STAGE_RUN);
	assert_string_equal(req2.stage[0].argv[4], "prog.c");
	assert_null(req2.stage[0].argv[6]);
	assert_string_equal(req2.stage[1].argv[1], "arg one");
	assert_null(req2.stage[1].argv[2]);
	assert_true(req2.stage[0].cpu_ms == 10000);
	assert_true(req2.stage[0].memory_kib == 512 * 1024);
	assert_true(req2.stage[1].cpu_ms == UINT64_MAX);
	assert_true(req2.stage[1].memory_kib == 1);
	size_t n2 = proto_encode_request(&req2, enc2, sizeof(enc2));
	assert_int_equal(n2, n);
	assert_memory_equal(enc, enc2, n);

	/* limits on one stage only stay there */
	req.stage[0].cpu_ms = req.stage[0].memory_kib = 0;
	n = proto_encode_request(&req, enc, sizeof(enc));
	assert_int_equal(proto_decode_request(enc, (uint32_t)n, &req2, err, sizeof(err)), 0);
	assert_true(req2.stage[0].cpu_ms == 0 && req2.stage[0].memory_kib == 0);
	assert_true(req2.stage[1].cpu_ms == UINT64_MAX && req2.stage[1].memory_kib == 1);
	/* and each stage takes up to PROTO_MAX_ARGS arguments of its own */
	for (unsigned s = 0; s < 2; s++) {
		for (unsigned i = 0; i < PROTO_MAX_ARGS; i++)
			req.stage[s].argv[i] = s ? "r" : "c";
		req.stage[s].argc = PROTO_MAX_ARGS;
	}
	n = proto_encode_request(&req, enc, sizeof(enc));
	assert_int_not_equal(n, 0);
	assert_int_equal(proto_decode_request(enc, (uint32_t)n, &req2, err, sizeof(err)), 0);
	assert_same_request(&req, &req2);
}

/* A REQUEST starts with the version, and only this one is taken. */
static void request_version(void **state)
{
	(void)state;
	pb_begin(&pb);
	pb_stage(&pb, PROTO_STAGE_RUN);
	pb_str(&pb, PROTO_T_ARG, "prog");
	pb_required(&pb);
	assert_int_equal(decode_pb(), 0);
	const uint32_t bad[] = { 0, 1, 2, 3, 4, 6, 0x05000000u, UINT32_MAX };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(pb.b, &bad[i], 4);
		char want[96];
		snprintf(want, sizeof(want), "host speaks protocol version %u, this agent 5", bad[i]);
		assert_int_equal(decode_pb(), -1);
		assert_string_equal(err, want);
	}
	/* a v1 request (no version word: it starts with its first ARG) */
	memset(&pb, 0, sizeof(pb));
	pb_str(&pb, PROTO_T_ARG, "ls");
	pb_required(&pb);
	assert_refused("host speaks protocol version 131073, this agent 5");   /* 01 00 02 00 */
	/* too short for a version */
	for (size_t n = 0; n < 4; n++) {
		pb.n = n;
		char want[64];
		snprintf(want, sizeof(want), "REQUEST of %zu bytes has no version", n);
		assert_refused(want);
	}
	/* the version alone: no program */
	pb_begin(&pb);
	assert_refused("no program");
	/* more than a frame is refused outright (the storage holds one) */
	pb_run(&pb, "prog");
	pb_required(&pb);
	pb.n = PROTO_MAX_PAYLOAD + 1;
	assert_refused("REQUEST of 65537 bytes exceeds the 65536-byte maximum");
}

/* 1..PROTO_MAX_STAGES stages, COMPILE before RUN, each with a program;
 * a stage's fields after its STAGE, each at most once. */
static void request_stage_rules(void **state)
{
	(void)state;
	/* no stage: limits only, or an ARG with no STAGE before it */
	pb_begin(&pb);
	pb_required(&pb);
	assert_refused("no program");
	pb_begin(&pb);
	pb_str(&pb, PROTO_T_ARG, "prog");
	pb_required(&pb);
	assert_refused("ARG before any STAGE");
	/* CPU_MS or MEMORY_KIB before any STAGE */
	static const uint16_t lim[] = { PROTO_T_CPU_MS, PROTO_T_MEMORY_KIB };
	for (size_t i = 0; i < 2; i++) {
		pb_begin(&pb);
		pb_u64(&pb, lim[i], 1000);
		pb_stage(&pb, PROTO_STAGE_RUN);
		pb_str(&pb, PROTO_T_ARG, "prog");
		pb_required(&pb);
		char want[64];
		snprintf(want, sizeof(want), "field %u before any STAGE", lim[i]);
		assert_refused(want);
	}
	/* three stages */
	pb_begin(&pb);
	for (int i = 0; i < 3; i++) {
		pb_stage(&pb, i < 2 ? PROTO_STAGE_COMPILE : PROTO_STAGE_RUN);
		pb_str(&pb, PROTO_T_ARG, "prog");
	}
	pb_required(&pb);
	assert_refused("more than 2 stages");
	/* the kinds in the wrong order, or the wrong kind alone */
	static const struct { unsigned n; uint32_t kinds[2]; const char *why; } order[] = {
		{ 2, { PROTO_STAGE_RUN, PROTO_STAGE_COMPILE }, "stage 0 is of kind 2, not 1" },
		{ 2, { PROTO_STAGE_RUN, PROTO_STAGE_RUN }, "stage 0 is of kind 2, not 1" },
		{ 2, { PROTO_STAGE_COMPILE, PROTO_STAGE_COMPILE }, "stage 1 is of kind 1, not 2" },
		{ 1, { PROTO_STAGE_COMPILE }, "stage 0 is of kind 1, not 2" },
		{ 1, { 0 }, "stage 0 is of kind 0, not 2" },
		{ 1, { 3 }, "stage 0 is of kind 3, not 2" },
		{ 2, { PROTO_STAGE_COMPILE, UINT32_MAX }, "stage 1 is of kind 4294967295, not 2" },
	};
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		pb_begin(&pb);
		for (unsigned k = 0; k < order[i].n; k++) {
			pb_stage(&pb, order[i].kinds[k]);
			pb_str(&pb, PROTO_T_ARG, "prog");
		}
		pb_required(&pb);
		assert_refused(order[i].why);
	}
	/* a stage without ARG: first, last, or with only limits */
	pb_begin(&pb);
	pb_stage(&pb, PROTO_STAGE_COMPILE);
	pb_stage(&pb, PROTO_STAGE_RUN);
	pb_str(&pb, PROTO_T_ARG, "prog");
	pb_required(&pb);
	assert_refused("stage 0 has no program");
	pb_begin(&pb);
	pb_stage(&pb, PROTO_STAGE_COMPILE);
	pb_str(&pb, PROTO_T_ARG, "cc");
	pb_stage(&pb, PROTO_STAGE_RUN);
	pb_u64(&pb, PROTO_T_CPU_MS, 5);
	pb_required(&pb);
	assert_refused("stage 1 has no program");
	/* CPU_MS or MEMORY_KIB twice in one stage (even the same value) */
	for (size_t i = 0; i < 2; i++) {
		pb_run(&pb, "prog");
		pb_u64(&pb, lim[i], 7);
		pb_required(&pb);
		assert_int_equal(decode_pb(), 0);
		pb_u64(&pb, lim[i], 7);
		char want[64];
		snprintf(want, sizeof(want), "stage limit field %u: bad length or repeated", lim[i]);
		assert_refused(want);
		/* once in each of two stages is fine, each its own */
		pb_begin(&pb);
		pb_stage(&pb, PROTO_STAGE_COMPILE);
		pb_str(&pb, PROTO_T_ARG, "cc");
		pb_u64(&pb, lim[i], 1);
		pb_stage(&pb, PROTO_STAGE_RUN);
		pb_str(&pb, PROTO_T_ARG, "prog");
		pb_u64(&pb, lim[i], 2);
		pb_required(&pb);
		assert_int_equal(decode_pb(), 0);
		uint64_t a = lim[i] == PROTO_T_CPU_MS ? req.stage[0].cpu_ms : req.stage[0].memory_kib;
		uint64_t b = lim[i] == PROTO_T_CPU_MS ? req.stage[1].cpu_ms : req.stage[1].memory_kib;
		assert_true(a == 1 && b == 2);
		/* a bad length */
		static const size_t lens[] = { 0, 4, 7, 9 };
		uint8_t z[16] = { 1 };
		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			pb_run(&pb, "prog");
			pb_field(&pb, lim[i], z, lens[l]);
			pb_required(&pb);
			assert_refused(want);
		}
		/* 0 is no limit, which is spelled by leaving the field out */
		pb_run(&pb, "prog");
		pb_u64(&pb, lim[i], 0);
		pb_required(&pb);
		snprintf(want, sizeof(want), "stage limit field %u of 0", lim[i]);
		assert_refused(want);
	}
	/* a STAGE field of a bad length */
	static const size_t slens[] = { 0, 1, 3, 5, 8 };
	uint8_t kind[8] = { PROTO_STAGE_RUN };
	for (size_t l = 0; l < sizeof(slens) / sizeof(slens[0]); l++) {
		pb_begin(&pb);
		pb_field(&pb, PROTO_T_STAGE, kind, slens[l]);
		pb_str(&pb, PROTO_T_ARG, "prog");
		pb_required(&pb);
		char want[64];
		snprintf(want, sizeof(want), "STAGE field of %zu bytes", slens[l]);
		assert_refused(want);
	}
	/* and the good two-stage request these were cut from */
	pb_begin(&pb);
	pb_stage(&pb, PROTO_STAGE_COMPILE);
	pb_str(&pb, PROTO_T_ARG, "cc");
	pb_stage(&pb, PROTO_STAGE_RUN);
	pb_str(&pb, PROTO_T_ARG, "prog");
	pb_required(&pb);
	assert_int_equal(decode_pb(), 0);
	assert_int_equal(req.nstages, 2);
}

/* The encoder holds a request to the same stage rules. */
static void encode_stage_rules(void **state)
{
	(void)state;
	req.nstages = 2;
	req.stage[0] = (struct proto_stage){ .kind = PROTO_STAGE_COMPILE, .argc = 1, .argv = { "cc" } };
	req.stage[1] = (struct proto_stage){ .kind = PROTO_STAGE_RUN, .argc = 1, .argv = { "prog" } };
	assert_int_not_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.nstages = 0;
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.nstages = 3;
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.nstages = 1;   /* a lone COMPILE stage */
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.nstages = 2;
	req.stage[0].kind = PROTO_STAGE_RUN;
	req.stage[1].kind = PROTO_STAGE_COMPILE;
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.stage[0].kind = PROTO_STAGE_COMPILE;
	req.stage[1].kind = PROTO_STAGE_RUN;
	req.stage[0].argc = 0;
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.stage[0].argc = 1;
	req.stage[1].argv[0] = "";
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.stage[1].argv[0] = "prog";
	req.stage[1].argc = PROTO_MAX_ARGS + 1;
	for (unsigned i = 0; i <= PROTO_MAX_ARGS; i++)
		req.stage[1].argv[i] = "a";
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.stage[1].argc = 1;
	assert_int_not_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	/* a cap too small for the version word */
	for (size_t cap = 0; cap < 4; cap++)
		assert_int_equal(proto_encode_request(&req, enc, cap), 0);
}

/* Fields in any order, limits first: decoding does not care, but for a
 * stage's own fields coming after its STAGE. */
static void request_any_order(void **state)
{
	(void)state;
	pb_run_id(&pb);
	pb_u64(&pb, PROTO_T_FSIZE, 4);
	pb_str(&pb, PROTO_T_ALLOW, "/bin/true");
	pb_stage(&pb, PROTO_STAGE_RUN);
	pb_str(&pb, PROTO_T_ARG, "true");
	pb_u64(&pb, PROTO_T_NOFILE, 3);
	pb_str(&pb, PROTO_T_ENV, "A=1");
	pb_u64(&pb, PROTO_T_NPROC, 2);
	pb_seed(&pb);
	pb_str(&pb, PROTO_T_ARG, "x");
	pb_u64(&pb, PROTO_T_MAX_OUTPUT, 1);
	pb_u64(&pb, PROTO_T_CPU_MS, 9);
	pb_time(&pb);
	assert_int_equal(decode_pb(), 0);
	assert_string_equal(req.run_id, RUN_ID);
	assert_true(req.time_ns == TIME_NS);
	assert_int_equal(req.nstages, 1);
	assert_int_equal(req.stage[0].argc, 2);
	assert_string_equal(req.stage[0].argv[0], "true");
	assert_string_equal(req.stage[0].argv[1], "x");
	assert_null(req.stage[0].argv[2]);
	assert_true(req.stage[0].cpu_ms == 9);
	assert_int_equal(req.envc, 1);
	assert_string_equal(req.env[0], "A=1");
	assert_int_equal(req.nallow, 1);
	assert_string_equal(req.allow[0], "/bin/true");
	assert_int_equal(req.max_output, 1);
	assert_int_equal(req.nproc, 2);
	assert_int_equal(req.nofile, 3);
	assert_int_equal(req.fsize, 4);
}

static void request_truncated_and_overrun(void **state)
{
	(void)state;
	pb_run(&pb, "ls");
	pb_required(&pb);
	assert_int_equal(decode_pb(), 0);
	size_t good = pb.n;   /* 4 + 8 + 6 + 48 + 84 = 150 */
	assert_int_equal(good, 150);
	/* 1..3 stray bytes: a truncated field header */
	for (int extra = 1; extra <= 3; extra++) {
		pb.n = good;
		pb.b[pb.n++] = PROTO_T_ARG;
		if (extra > 1)
			pb.b[pb.n++] = 0;
		if (extra > 2)
			pb.b[pb.n++] = 1;
		assert_refused("truncated field header at byte 150");
	}
	/* a field whose length runs past the payload, by one byte or many */
	pb.n = good;
	pb_field(&pb, PROTO_T_ARG, "abcde", 5);
	pb.n--;
	assert_refused("field 1 of 5 bytes overruns the request");
	pb.n = good;
	uint8_t hdr[4] = { PROTO_T_ENV, 0, 0xff, 0xff };
	memcpy(pb.b + pb.n, hdr, 4);
	pb.n += 4;
	assert_refused("overruns");
	/* a limit whose 8 bytes are cut */
	pb_run(&pb, "ls");
	pb_required(&pb);
	pb_u64(&pb, PROTO_T_NPROC, 1);
	pb.n -= 1;
	assert_refused("overruns");
	/* the payload shorter than it claims: decode only reads len bytes
	 * (a field at the end cut by the length given) */
	pb_begin(&pb);
	pb_required(&pb);
	pb_stage(&pb, PROTO_STAGE_RUN);
	pb_str(&pb, PROTO_T_ARG, "ls");
	pb.n -= 2;
	assert_refused("overruns");
}

static void request_bad_strings(void **state)
{
	(void)state;
	static const uint16_t tags[] = { PROTO_T_ARG, PROTO_T_ENV, PROTO_T_ALLOW };
	static const char *const ok_value[] = { "a", "A=1", "/a" };
	for (size_t t = 0; t < 3; t++) {
		/* a NUL at the start, inside, at the end */
		const char *v = ok_value[t];
		size_t vl = strlen(v);
		const size_t at[] = { 0, 1, vl };
		for (size_t k = 0; k < 3; k++) {
			char b[16];
			memcpy(b, v, at[k]);
			b[at[k]] = '\0';
			memcpy(b + at[k] + 1, v + at[k], vl - at[k]);
			pb_run(&pb, "prog");
			pb_field(&pb, tags[t], b, vl + 1);
			pb_required(&pb);
			assert_refused("string too long or with a NUL");
		}
		/* the longest string is fine, one byte more is not */
		static char s[PROTO_MAX_STR + 2];
		memset(s, 'x', sizeof(s) - 1);
		memcpy(s, ok_value[t], strlen(ok_value[t]));
		s[PROTO_MAX_STR] = '\0';
		pb_run(&pb, "prog");
		pb_str(&pb, tags[t], s);
		pb_required(&pb);
		assert_int_equal(decode_pb(), 0);
		s[PROTO_MAX_STR] = 'x';
		pb_run(&pb, "prog");
		pb_field(&pb, tags[t], s, PROTO_MAX_STR + 1);
		pb_required(&pb);
		assert_refused("string too long or with a NUL");
	}
}

/* Exactly PROTO_MAX_* fields of a kind are taken, one more is refused. */
static void request_counts(void **state)
{
	(void)state;
	static const struct { uint16_t tag; unsigned max; const char *value; } kinds[] = {
		{ PROTO_T_ARG, PROTO_MAX_ARGS, "a" },
		{ PROTO_T_ENV, PROTO_MAX_ENV, "A=" },
		{ PROTO_T_ALLOW, PROTO_MAX_ALLOW, "/" },
	};
	for (size_t k = 0; k < 3; k++) {
		pb_begin(&pb);
		pb_stage(&pb, PROTO_STAGE_RUN);
		if (kinds[k].tag != PROTO_T_ARG)
			pb_str(&pb, PROTO_T_ARG, "prog");
		for (unsigned i = 0; i < kinds[k].max; i++)
			pb_str(&pb, kinds[k].tag, kinds[k].value);
		pb_required(&pb);
		assert_int_equal(decode_pb(), 0);
		unsigned got = kinds[k].tag == PROTO_T_ARG ? req.stage[0].argc : kinds[k].tag == PROTO_T_ENV ? req.envc : req.nallow;
		assert_int_equal(got, kinds[k].max);
		assert_null(req.stage[0].argv[req.stage[0].argc]);
		assert_null(req.env[req.envc]);
		pb_str(&pb, kinds[k].tag, kinds[k].value);
		char why[64];
		snprintf(why, sizeof(why), "too many fields of type %u", kinds[k].tag);
		assert_refused(why);
	}
	/* all three at their maximum at once, in both stages, with long
	 * strings: the storage holds it */
	pb_begin(&pb);
	static char s[PROTO_MAX_STR + 1];
	memset(s, 's', 60);
	for (unsigned k = 0; k < PROTO_MAX_STAGES; k++) {
		pb_stage(&pb, k + 1 < PROTO_MAX_STAGES ? PROTO_STAGE_COMPILE : PROTO_STAGE_RUN);
		for (unsigned i = 0; i < PROTO_MAX_ARGS; i++)
			pb_field(&pb, PROTO_T_ARG, s, 20);
	}
	s[0] = 'E';
	s[1] = '=';
	for (unsigned i = 0; i < PROTO_MAX_ENV; i++)
		pb_field(&pb, PROTO_T_ENV, s, 60);
	s[0] = '/';
	for (unsigned i = 0; i < PROTO_MAX_ALLOW; i++)
		pb_field(&pb, PROTO_T_ALLOW, s, 60);
	pb_required(&pb);
	assert_true(pb.n <= PROTO_MAX_PAYLOAD);
	assert_int_equal(decode_pb(), 0);
	assert_int_equal(req.stage[0].argc, PROTO_MAX_ARGS);
	assert_int_equal(req.stage[1].argc, PROTO_MAX_ARGS);
	assert_int_equal(req.envc, PROTO_MAX_ENV);
	assert_int_equal(req.nallow, PROTO_MAX_ALLOW);
	assert_int_equal(strlen(req.allow[PROTO_MAX_ALLOW - 1]), 60);
	/* and a full frame of one-byte strings (the most NULs storage needs) */
	pb_begin(&pb);
	for (unsigned i = 0; i < PROTO_MAX_ALLOW; i++)
		pb_str(&pb, PROTO_T_ALLOW, "/");
	pb_stage(&pb, PROTO_STAGE_RUN);
	pb_str(&pb, PROTO_T_ARG, "prog");
	memset(s, 'y', PROTO_MAX_STR);
	for (unsigned i = 1; i < PROTO_MAX_ARGS && pb.n + 4 + PROTO_MAX_STR + 48 + UNIQUE_LEN <= PROTO_MAX_PAYLOAD; i++)
		pb_field(&pb, PROTO_T_ARG, s, PROTO_MAX_STR);
	pb_required(&pb);
	assert_int_equal(decode_pb(), 0);
	assert_int_equal(req.nallow, PROTO_MAX_ALLOW);
}

static void request_limits(void **state)
{
	(void)state;
	static const uint16_t lim[] = { PROTO_T_MAX_OUTPUT, PROTO_T_NPROC, PROTO_T_NOFILE, PROTO_T_FSIZE };
	for (size_t miss = 0; miss < 4; miss++) {
		/* one missing */
		pb_run(&pb, "prog");
		pb_seed(&pb);
		pb_time(&pb);
		pb_run_id(&pb);
		for (size_t i = 0; i < 4; i++)
			if (i != miss)
				pb_u64(&pb, lim[i], 1);
		assert_refused("a limit is missing");
		/* one repeated (even with the same value) */
		pb_u64(&pb, lim[miss], 1);
		assert_int_equal(decode_pb(), 0);
		pb_u64(&pb, lim[miss], 1);
		assert_refused("bad length or repeated");
		/* a bad length: 0, 4, 7, 9, 16 */
		static const size_t lens[] = { 0, 4, 7, 9, 16 };
		uint8_t z[16] = { 0 };
		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			pb_run(&pb, "prog");
			for (size_t i = 0; i < 4; i++)
				if (i == miss)
					pb_field(&pb, lim[i], z, lens[l]);
				else
					pb_u64(&pb, lim[i], 1);
			char why[64];
			snprintf(why, sizeof(why), "limit field %u: bad length or repeated", lim[miss]);
			assert_refused(why);
		}
	}
	/* none at all */
	pb_run(&pb, "prog");
	assert_refused("a limit is missing");
}

static void request_unknown_tag(void **state)
{
	(void)state;
	static const uint16_t bad[] = { 0, PROTO_T_SANDBOX + 1, PROTO_T_MODE + 1, 0x100, 0x8001, 0xffff };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pb_run(&pb, "prog");
		pb_required(&pb);
		pb_field(&pb, bad[i], "", 0);
		char why[64];
		snprintf(why, sizeof(why), "unknown field %u", bad[i]);
		assert_refused(why);
	}
	/* an unknown tag with 8 bytes is not taken for a limit either */
	pb_run(&pb, "prog");
	pb_required(&pb);
	pb_u64(&pb, PROTO_T_MODE + 1, 1);
	assert_refused("unknown field 21");
}

/* r: one RUN stage of "a", every limit 1, no NET. */
static void small_request(struct proto_request *r)
{
	memset(r, 0, sizeof(*r));
	struct proto_stage *st = run_stage(r);
	st->argc = 1;
	st->argv[0] = "a";
	r->max_output = r->nproc = r->nofile = r->fsize = 1;
	set_unique(r);
}

/* NET (v3): the run may use the network. Once, a u32, and only the host
 * proxy's port; encoded after the limits, and only when set. */
static void request_net(void **state)
{
	(void)state;
	assert_int_equal(PROTO_T_NET, 11);
	assert_int_equal(PROTO_NET_VSOCK_PORT, 3128);
	assert_string_equal(PROTO_NET_PROXY_ADDR, "127.0.0.1");
	assert_int_equal(PROTO_NET_PROXY_PORT, 3128);
	/* round trip, and the field's bytes at the end */
	small_request(&req);
	size_t without = proto_encode_request(&req, enc, sizeof(enc));
	assert_int_not_equal(without, 0);
	assert_int_equal(proto_decode_request(enc, (uint32_t)without, &req2, err, sizeof(err)), 0);
	assert_int_equal(req2.net_port, 0);
	req.net_port = PROTO_NET_VSOCK_PORT;
	memset(enc, 0xee, sizeof(enc));
	size_t n = proto_encode_request(&req, enc, sizeof(enc));
	assert_int_equal(n, without + 8);
	static const uint8_t field[] = { 11, 0, 4, 0, 0x38, 0x0c, 0, 0 };   /* 3128 */
	assert_memory_equal(enc + without, field, sizeof(field));
	assert_int_equal(enc[n], 0xee);
	memset(&req2, 0x5a, sizeof(req2));
	assert_int_equal(proto_decode_request(enc, (uint32_t)n, &req2, err, sizeof(err)), 0);
	assert_same_request(&req, &req2);
	assert_int_equal(req2.net_port, PROTO_NET_VSOCK_PORT);
	size_t n2 = proto_encode_request(&req2, enc2, sizeof(enc2));
	assert_int_equal(n2, n);
	assert_memory_equal(enc, enc2, n);
	/* a decoded request without NET has none, whatever r held before */
	assert_int_equal(proto_decode_request(enc, (uint32_t)without, &req2, err, sizeof(err)), 0);
	assert_int_equal(req2.net_port, 0);
	/* anywhere among the fields, even before the first STAGE */
	uint32_t port = PROTO_NET_VSOCK_PORT;
	pb_begin(&pb);
	pb_field(&pb, PROTO_T_NET, &port, 4);
	pb_stage(&pb, PROTO_STAGE_RUN);
	pb_str(&pb, PROTO_T_ARG, "prog");
	pb_required(&pb);
	assert_int_equal(decode_pb(), 0);
	assert_int_equal(req.net_port, PROTO_NET_VSOCK_PORT);

	/* repeated, even with the same value */
	pb_field(&pb, PROTO_T_NET, &port, 4);
	assert_refused("NET field: bad length or repeated");

	/* any other value: 0 included (no network is no field) */
	static const uint32_t bad[] = { 0, 1, 3127, 3129, PROTO_VSOCK_PORT, 0x00000c38u << 16, UINT32_MAX };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pb_run(&pb, "prog");
		pb_required(&pb);
		pb_field(&pb, PROTO_T_NET, &bad[i], 4);
		char why[64];
		snprintf(why, sizeof(why), "NET field names port %u, not 3128", bad[i]);
		assert_refused(why);
	}

	/* a bad length: 0, 2, 3, 5, 8 */
	static const size_t lens[] = { 0, 2, 3, 5, 8 };
	uint8_t v[8] = { 0x38, 0x0c, 0, 0, 0, 0, 0, 0 };
	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
		pb_run(&pb, "prog");
		pb_required(&pb);
		pb_field(&pb, PROTO_T_NET, v, lens[l]);
		assert_refused("NET field: bad length or repeated");
	}

	/* the encoder sends only what the decoder takes (req again: the
	 * decodes above wrote into it) */
	small_request(&req);
	for (size_t i = 1; i < sizeof(bad) / sizeof(bad[0]); i++) {
		req.net_port = bad[i];
		assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	}
	/* and NET must fit cap like any field */
	req.net_port = PROTO_NET_VSOCK_PORT;
	assert_int_equal(proto_encode_request(&req, enc, without + 7), 0);
	assert_int_equal(proto_encode_request(&req, enc, without + 8), without + 8);
}

/* SEED, TIME, RUN_ID (v4): what makes a restored guest unique. Each
 * round-trips, byte for byte, and a decoded request holds exactly what
 * was sent, whatever r held before. */
static void request_unique_round_trip(void **state)
{
	(void)state;
	assert_int_equal(PROTO_T_SEED, 12);
	assert_int_equal(PROTO_T_TIME, 13);
	assert_int_equal(PROTO_T_RUN_ID, 14);
	assert_int_equal(PROTO_SEED_LEN, 32);
	assert_int_equal(PROTO_RUN_ID_MAX, 32);
	assert_int_equal(PROTO_READY_VSOCK_PORT, 10001);
	small_request(&req);
	size_t n = proto_encode_request(&req, enc, sizeof(enc));
	assert_int_not_equal(n, 0);
	memset(&req2, 0x5a, sizeof(req2));
	assert_int_equal(proto_decode_request(enc, (uint32_t)n, &req2, err, sizeof(err)), 0);
	assert_same_request(&req, &req2);
	assert_memory_equal(req2.seed, test_seed, PROTO_SEED_LEN);
	assert_true(req2.time_ns == TIME_NS);
	assert_string_equal(req2.run_id, RUN_ID);
	size_t n2 = proto_encode_request(&req2, enc2, sizeof(enc2));
	assert_int_equal(n2, n);
	assert_memory_equal(enc, enc2, n);
	/* the extremes: a one-char id, every hex digit, the largest time */
	static const char *const ids[] = { "0", "f", "abcdef", "0123456789", "ffffffffffffffffffffffffffffffff" };
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		small_request(&req);
		snprintf(req.run_id, sizeof(req.run_id), "%s", ids[i]);
		req.time_ns = i ? UINT64_MAX : 1;
		memset(req.seed, (int)i, PROTO_SEED_LEN);
		n = proto_encode_request(&req, enc, sizeof(enc));
		assert_int_equal(n, 4 + 8 + 5 + 48 + UNIQUE_LEN - 32 + strlen(ids[i]));
		assert_int_equal(proto_decode_request(enc, (uint32_t)n, &req2, err, sizeof(err)), 0);
		assert_same_request(&req, &req2);
	}
	/* any order, and anywhere among the fields */
	pb_begin(&pb);
	pb_time(&pb);
	pb_limits(&pb);
	pb_run_id(&pb);
	pb_stage(&pb, PROTO_STAGE_RUN);
	pb_seed(&pb);
	pb_str(&pb, PROTO_T_ARG, "prog");
	assert_int_equal(decode_pb(), 0);
	assert_string_equal(req.run_id, RUN_ID);
	assert_true(req.time_ns == TIME_NS);
	assert_memory_equal(req.seed, test_seed, PROTO_SEED_LEN);
}

/* Each of the three is required, once, at its exact length; TIME is not 0;
 * RUN_ID is 1..32 of [0-9a-f]. */
static void request_unique_refused(void **state)
{
	(void)state;
	void (*const put[3])(struct pb *) = { pb_seed, pb_time, pb_run_id };
	static const char *const missing[3] = { "the SEED field is missing", "the TIME field is missing",
						"the RUN_ID field is missing" };
	static const char *const repeated[3] = { "field 12 repeated", "field 13 repeated", "field 14 repeated" };
	for (size_t miss = 0; miss < 3; miss++) {
		pb_run(&pb, "prog");
		pb_limits(&pb);
		for (size_t i = 0; i < 3; i++)
			if (i != miss)
				put[i](&pb);
		assert_refused(missing[miss]);
		put[miss](&pb);
		assert_int_equal(decode_pb(), 0);
		put[miss](&pb);   /* repeated, even with the same value */
		assert_refused(repeated[miss]);
	}
	/* none of them (a v3 request with a v4 version word) */
	pb_run(&pb, "prog");
	pb_limits(&pb);
	assert_refused("the SEED field is missing");
	/* SEED and TIME of a bad length */
	static uint8_t z[64] = { 1 };
	static const size_t seed_lens[] = { 0, 1, 16, 31, 33, 64 };
	for (size_t l = 0; l < sizeof(seed_lens) / sizeof(seed_lens[0]); l++) {
		pb_run(&pb, "prog");
		pb_limits(&pb);
		pb_field(&pb, PROTO_T_SEED, z, seed_lens[l]);
		pb_time(&pb);
		pb_run_id(&pb);
		char want[64];
		snprintf(want, sizeof(want), "SEED field of %zu bytes, not 32", seed_lens[l]);
		assert_refused(want);
	}
	static const size_t time_lens[] = { 0, 4, 7, 9, 16 };
	for (size_t l = 0; l < sizeof(time_lens) / sizeof(time_lens[0]); l++) {
		pb_run(&pb, "prog");
		pb_limits(&pb);
		pb_seed(&pb);
		pb_field(&pb, PROTO_T_TIME, z, time_lens[l]);
		pb_run_id(&pb);
		char want[64];
		snprintf(want, sizeof(want), "TIME field of %zu bytes, not 8", time_lens[l]);
		assert_refused(want);
	}
	/* a TIME of 0 */
	pb_run(&pb, "prog");
	pb_limits(&pb);
	pb_seed(&pb);
	pb_u64(&pb, PROTO_T_TIME, 0);
	pb_run_id(&pb);
	assert_refused("TIME field of 0");
	/* RUN_IDs that are not: empty, too long, a char outside [0-9a-f] */
	static const char *const bad_ids[] = {
		"", "0123456789abcdef0123456789abcdef0", "ABCDEF", "0123g", "01 23", "-1", "0x1f", "abc\n",
		"../x", "\xc3\xa9",
	};
	for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
		pb_run(&pb, "prog");
		pb_limits(&pb);
		pb_seed(&pb);
		pb_time(&pb);
		pb_str(&pb, PROTO_T_RUN_ID, bad_ids[i]);
		if (decode_pb() != -1)
			fail_msg("RUN_ID \"%s\" accepted", bad_ids[i]);
		assert_string_equal(err, "RUN_ID field is not 1 to 32 of [0-9a-f]");
	}
	/* a NUL inside the id */
	pb_run(&pb, "prog");
	pb_limits(&pb);
	pb_seed(&pb);
	pb_time(&pb);
	pb_field(&pb, PROTO_T_RUN_ID, "ab\0cd", 5);
	assert_refused("RUN_ID field is not 1 to 32 of [0-9a-f]");
}

/* The encoder sends only what the decoder takes: no TIME of 0, no run id
 * that is not one, none without its NUL inside the array. */
static void encode_unique_refusals(void **state)
{
	(void)state;
	small_request(&req);
	size_t n = proto_encode_request(&req, enc, sizeof(enc));
	assert_int_not_equal(n, 0);
	req.time_ns = 0;
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.time_ns = 1;
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), n);
	static const char *const bad_ids[] = { "", "ABC", "12 3", "xyz", "0123456789abcdef0123456789abcde-" };
	for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
		snprintf(req.run_id, sizeof(req.run_id), "%s", bad_ids[i]);
		if (proto_encode_request(&req, enc, sizeof(enc)) != 0)
			fail_msg("encoded run id \"%s\"", bad_ids[i]);
	}
	memset(req.run_id, 'a', sizeof(req.run_id));   /* 33 chars, no NUL */
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	/* the seed is any 32 bytes: all zero is still sent */
	small_request(&req);
	memset(req.seed, 0, sizeof(req.seed));
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), n);
	/* and the three must fit cap like any field */
	assert_int_equal(proto_encode_request(&req, enc, n - 1), 0);
	assert_int_equal(proto_encode_request(&req, enc, n), n);
	/* proto_valid_run_id on its own */
	assert_true(proto_valid_run_id("a", 1));
	assert_true(proto_valid_run_id(RUN_ID, 32));
	assert_false(proto_valid_run_id(RUN_ID "0", 33));
	assert_false(proto_valid_run_id("", 0));
	assert_false(proto_valid_run_id("aG", 2));
	assert_true(proto_valid_run_id("aG", 1));   /* only n bytes are looked at */
}

static void request_no_program(void **state)
{
	(void)state;
	/* empty request */
	assert_refused("no program");
	/* limits only */
	pb_required(&pb);
	assert_refused("no program");
	/* an empty argv[0], even with more arguments after it */
	pb_run(&pb, "");
	pb_str(&pb, PROTO_T_ARG, "x");
	pb_required(&pb);
	assert_refused("no program");
	/* an empty argv[1] is fine */
	pb_run(&pb, "x");
	pb_str(&pb, PROTO_T_ARG, "");
	pb_required(&pb);
	assert_int_equal(decode_pb(), 0);
	assert_int_equal(req.stage[0].argc, 2);
	assert_string_equal(req.stage[0].argv[1], "");
}

static void request_bad_env(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"FOO", "", "=", "=x", "1A=x", "A-B=x", "A B=x", "A.B=x", "\xc3\x84=x", "A\n=x", "$A=x", " A=x",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pb_run(&pb, "prog");
		pb_str(&pb, PROTO_T_ENV, "GOOD=1");
		pb_str(&pb, PROTO_T_ENV, bad[i]);
		pb_required(&pb);
		if (decode_pb() != -1)
			fail_msg("environment grant \"%s\" accepted", bad[i]);
		assert_string_equal(err, "environment grant 1 is not NAME=VALUE");
	}
	static const char *const good[] = { "_=x", "A1=", "a=b=c", "Z_9=\n", "x==" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		pb_run(&pb, "prog");
		pb_str(&pb, PROTO_T_ENV, good[i]);
		pb_required(&pb);
		if (decode_pb() != 0)
			fail_msg("environment grant \"%s\" refused: %s", good[i], err);
		assert_string_equal(req.env[0], good[i]);
	}
}

static void request_relative_allow(void **state)
{
	(void)state;
	static const char *const bad[] = { "bin/sh", "", "./x", "~/x", " /x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pb_run(&pb, "prog");
		pb_str(&pb, PROTO_T_ALLOW, "/ok");
		pb_str(&pb, PROTO_T_ALLOW, "/ok2");
		pb_str(&pb, PROTO_T_ALLOW, bad[i]);
		pb_required(&pb);
		assert_int_equal(decode_pb(), -1);
		assert_string_equal(err, "allowlist entry 2 is not an absolute path");
	}
}

/* The encoder refuses what the decoder would, and what does not fit. */
static void encode_refusals(void **state)
{
	(void)state;
	static char longest[PROTO_MAX_STR + 2];
	static char *many[PROTO_MAX_ALLOW + 2];
	run_stage(&req);
	req.stage[0].argc = 1;
	req.stage[0].argv[0] = "prog";
	assert_int_not_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);

	/* no argv, too many args / env / allow entries */
	req.stage[0].argc = 0;
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	for (unsigned i = 0; i <= PROTO_MAX_ALLOW; i++)
		many[i] = "/";
	req.stage[0].argc = PROTO_MAX_ARGS + 1;
	for (unsigned i = 0; i <= PROTO_MAX_ARGS; i++)
		req.stage[0].argv[i] = "a";
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.stage[0].argc = PROTO_MAX_ARGS;
	assert_int_not_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.stage[0].argc = 1;
	req.envc = PROTO_MAX_ENV + 1;
	for (unsigned i = 0; i < PROTO_MAX_ENV; i++)
		req.env[i] = "A=";
	req.env[PROTO_MAX_ENV] = "A=";
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.envc = PROTO_MAX_ENV;
	assert_int_not_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.envc = 0;
	memcpy(req.allow, many, sizeof(req.allow));
	req.nallow = PROTO_MAX_ALLOW;
	assert_int_not_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.nallow = PROTO_MAX_ALLOW + 1;
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.nallow = 0;

	/* bad environment grants */
	static const char *const bad_env[] = { "FOO", "=x", "1A=x", "A-B=x", "" };
	req.envc = 1;
	for (size_t i = 0; i < sizeof(bad_env) / sizeof(bad_env[0]); i++) {
		req.env[0] = (char *)bad_env[i];
		if (proto_encode_request(&req, enc, sizeof(enc)) != 0)
			fail_msg("encoded environment grant \"%s\"", bad_env[i]);
	}
	req.envc = 0;

	/* relative allowlist entries */
	static const char *const bad_allow[] = { "bin/sh", "", "./x" };
	req.nallow = 1;
	for (size_t i = 0; i < sizeof(bad_allow) / sizeof(bad_allow[0]); i++) {
		req.allow[0] = (char *)bad_allow[i];
		if (proto_encode_request(&req, enc, sizeof(enc)) != 0)
			fail_msg("encoded allowlist entry \"%s\"", bad_allow[i]);
	}
	req.nallow = 0;

	/* strings over PROTO_MAX_STR, in each kind of field */
	memset(longest, 'x', PROTO_MAX_STR + 1);
	req.stage[0].argv[0] = longest;
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	longest[PROTO_MAX_STR] = '\0';
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 4 + 8 + 4 + PROTO_MAX_STR + 48 + UNIQUE_LEN);
	longest[PROTO_MAX_STR] = 'x';
	req.stage[0].argv[0] = "prog";
	longest[0] = 'E';
	longest[1] = '=';
	req.envc = 1;
	req.env[0] = longest;
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.envc = 0;
	longest[0] = '/';
	req.nallow = 1;
	req.allow[0] = longest;
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.nallow = 0;
}

/* The decoder refuses an empty argv[0] ("no program"), so the encoder must
 * not produce one. */
static void encode_refuses_empty_program(void **state)
{
	(void)state;
	run_stage(&req);
	req.stage[0].argc = 2;
	req.stage[0].argv[0] = "";
	req.stage[0].argv[1] = "x";
	size_t n = proto_encode_request(&req, enc, sizeof(enc));
	if (n)   /* show that the decoder refuses what was encoded */
		assert_int_equal(proto_decode_request(enc, (uint32_t)n, &req2, err, sizeof(err)), -1);
	assert_int_equal(n, 0);
}

static void encode_fit(void **state)
{
	(void)state;
	run_stage(&req);
	req.stage[0].argc = 2;
	req.stage[0].argv[0] = "prog";
	req.stage[0].argv[1] = "argument";
	size_t need = proto_encode_request(&req, enc, sizeof(enc));
	assert_int_equal(need, 4 + 8 + 8 + 12 + 48 + UNIQUE_LEN);
	/* exactly enough room, one byte short, far too short */
	memset(enc2, 0xee, sizeof(enc2));
	assert_int_equal(proto_encode_request(&req, enc2, need), need);
	assert_memory_equal(enc, enc2, need);
	assert_int_equal(enc2[need], 0xee);
	for (size_t cap = 0; cap < need; cap++) {
		memset(enc2, 0xee, sizeof(enc2));
		if (proto_encode_request(&req, enc2, cap) != 0)
			fail_msg("encoded into %zu bytes of %zu needed", cap, need);
		for (size_t i = cap; i < need + 4; i++)
			if (enc2[i] != 0xee)
				fail_msg("cap %zu: byte %zu written", cap, i);
	}
	/* more than one frame holds, whatever cap says */
	static char s[PROTO_MAX_STR + 1];
	memset(s, 'z', PROTO_MAX_STR);
	req.stage[0].argc = 0;
	for (unsigned i = 0; i < 16; i++)
		req.stage[0].argv[req.stage[0].argc++] = s;
	/* 12 + 16 * 4100 + 48 + 84 = 65744 > 65536 */
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
	req.stage[0].argc = 15;
	size_t n = proto_encode_request(&req, enc, sizeof(enc));
	assert_int_equal(n, 12 + 15 * (4 + PROTO_MAX_STR) + 48 + UNIQUE_LEN);
	/* and filling the frame to the byte: 65536 exactly */
	size_t rest = PROTO_MAX_PAYLOAD - n - 4;
	static char t[PROTO_MAX_STR + 1];
	memset(t, 't', rest);
	req.stage[0].argv[req.stage[0].argc++] = t;
	n = proto_encode_request(&req, enc, sizeof(enc));
	assert_int_equal(n, PROTO_MAX_PAYLOAD);
	assert_int_equal(proto_decode_request(enc, (uint32_t)n, &req2, err, sizeof(err)), 0);
	assert_int_equal(req2.stage[0].argc, 16);
	t[rest] = 't';
	assert_int_equal(proto_encode_request(&req, enc, sizeof(enc)), 0);
}

/* ---- the frame reader ----------------------------------------------------- */

struct frame {
	uint16_t type;
	uint32_t len;
	size_t end;   /* stream offset just past it */
	const uint8_t *payload;
};

static uint8_t stream[4 * PROTO_MAX_PAYLOAD];
static size_t stream_len;
static struct frame frames[16];
static size_t nframes;

static void add_frame(uint16_t type, const void *p, uint32_t len)
{
	proto_header(stream + stream_len, type, len);
	if (len)
		memcpy(stream + stream_len + PROTO_HDR_LEN, p, len);
	frames[nframes].type = type;
	frames[nframes].len = len;
	frames[nframes].payload = stream + stream_len + PROTO_HDR_LEN;
	stream_len += PROTO_HDR_LEN + len;
	frames[nframes].end = stream_len;
	nframes++;
}

/* A session's worth of frames, one of the largest size among them. */
static void build_stream(void)
{
	stream_len = nframes = 0;
	uint8_t buf[64];
	size_t n = proto_encode_hello(buf, sizeof(buf), "vmrun-agent 0.1.0");
	add_frame(PROTO_HELLO, buf, (uint32_t)n);
	memset(&req, 0, sizeof(req));
	set_unique(&req);
	run_stage(&req);
	req.stage[0].argc = 3;
	req.stage[0].argv[0] = "sh";
	req.stage[0].argv[1] = "-c";
	req.stage[0].argv[2] = "cat";
	n = proto_encode_request(&req, enc, sizeof(enc));
	add_frame(PROTO_REQUEST, enc, (uint32_t)n);
	add_frame(PROTO_STDIN, "abc", 3);
	static uint8_t big[PROTO_MAX_PAYLOAD];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7 + (i >> 8));
	add_frame(PROTO_STDIN, big, PROTO_MAX_PAYLOAD);
	add_frame(PROTO_STDIN, NULL, 0);
	add_frame(PROTO_STDOUT, "out", 3);
	add_frame(PROTO_STDERR, big, 1);
	struct proto_exit e = { .kind = PROTO_END_EXITED, .code = 3 };
	proto_encode_exit(&e, buf);
	add_frame(PROTO_EXIT, buf, PROTO_EXIT_LEN);
	add_frame(PROTO_ERROR, "bye", 3);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Feed the stream in chunks of the sizes chunk() gives; every frame must
 * come out exactly once, intact, as soon as its last byte is in (with
 * chunks of one byte: at exactly that byte). */
static void feed_stream(size_t (*chunk)(size_t room), bool exact)
{
	static struct proto_reader r;
	proto_reader_init(&r);
	size_t fed = 0, got = 0;
	while (fed < stream_len || got < nframes) {
		uint16_t type;
		const uint8_t *p;
		uint32_t len;
		int rc;
		while ((rc = proto_reader_next(&r, &type, &p, &len, err, sizeof(err))) == 1) {
			assert_true(got < nframes);
			assert_int_equal(type, frames[got].type);
			assert_int_equal(len, frames[got].len);
			if (len)
				assert_memory_equal(p, frames[got].payload, len);
			assert_true(fed >= frames[got].end);
			if (exact)
				assert_int_equal(fed, frames[got].end);
			got++;
		}
		assert_int_equal(rc, 0);
		if (fed == stream_len)
			break;
		/* nothing came out although a whole frame was in */
		if (got < nframes)
			assert_true(fed < frames[got].end);
		size_t room;
		uint8_t *dst = proto_reader_space(&r, &room);
		assert_true(room > 0);
		size_t n = chunk(room);
		if (n > room)
			n = room;
		if (n > stream_len - fed)
			n = stream_len - fed;
		memcpy(dst, stream + fed, n);
		proto_reader_fed(&r, n);
		fed += n;
	}
	assert_int_equal(got, nframes);
	assert_int_equal(fed, stream_len);
}

static size_t one_byte(size_t room) { (void)room; return 1; }
static size_t all_room(size_t room) { return room; }
static size_t random_chunk(size_t room) { return 1 + (size_t)(next_rand() % (next_rand() & 1 ? 16 : room)); }

static void reader_byte_at_a_time(void **state)
{
	(void)state;
	build_stream();
	feed_stream(one_byte, true);
}

static void reader_many_frames_per_feed(void **state)
{
	(void)state;
	build_stream();
	feed_stream(all_room, false);
	/* small frames all in one feed */
	static struct proto_reader r;
	proto_reader_init(&r);
	size_t room;
	uint8_t *dst = proto_reader_space(&r, &room);
	assert_int_equal(room, PROTO_HDR_LEN + PROTO_MAX_PAYLOAD);
	uint8_t hdr[PROTO_HDR_LEN];
	size_t n = 0;
	for (int i = 0; i < 5; i++) {
		proto_header(hdr, PROTO_STDOUT, (uint32_t)i);
		memcpy(dst + n, hdr, PROTO_HDR_LEN);
		memset(dst + n + PROTO_HDR_LEN, 'a' + i, (size_t)i);
		n += PROTO_HDR_LEN + (size_t)i;
	}
	proto_reader_fed(&r, n);
	for (int i = 0; i < 5; i++) {
		uint16_t type;
		const uint8_t *p;
		uint32_t len;
		assert_int_equal(proto_reader_next(&r, &type, &p, &len, err, sizeof(err)), 1);
		assert_int_equal(type, PROTO_STDOUT);
		assert_int_equal(len, i);
		for (int k = 0; k < i; k++)
			assert_int_equal(p[k], 'a' + i);
	}
	uint16_t type;
	const uint8_t *p;
	uint32_t len;
	assert_int_equal(proto_reader_next(&r, &type, &p, &len, err, sizeof(err)), 0);
	assert_int_equal(proto_reader_next(&r, &type, &p, &len, err, sizeof(err)), 0);
	/* all consumed: the whole buffer is free again */
	proto_reader_space(&r, &room);
	assert_int_equal(room, PROTO_HDR_LEN + PROTO_MAX_PAYLOAD);
}

static void reader_random_splits(void **state)
{
	(void)state;
	build_stream();
	for (int i = 0; i < 300; i++)
		feed_stream(random_chunk, false);
}

/* Feed raw bytes at once, return what the first next() says. */
static int reader_on(const uint8_t *bytes, size_t n)
{
	static struct proto_reader r;
	proto_reader_init(&r);
	size_t room;
	uint8_t *dst = proto_reader_space(&r, &room);
	memcpy(dst, bytes, n);
	proto_reader_fed(&r, n);
	uint16_t type;
	const uint8_t *p;
	uint32_t len;
	memset(err, 0, sizeof(err));
	return proto_reader_next(&r, &type, &p, &len, err, sizeof(err));
}

static void reader_hostile(void **state)
{
	(void)state;
	uint8_t h[PROTO_HDR_LEN];
	/* too long: refused from the header alone */
	proto_header(h, PROTO_STDIN, PROTO_MAX_PAYLOAD + 1);
	assert_int_equal(reader_on(h, sizeof(h)), -1);
	assert_string_equal(err, "frame of 65537 bytes exceeds the 65536-byte maximum");
	proto_header(h, PROTO_STDIN, UINT32_MAX);
	assert_int_equal(reader_on(h, sizeof(h)), -1);
	/* the maximum is fine: waits for the payload */
	proto_header(h, PROTO_STDIN, PROTO_MAX_PAYLOAD);
	assert_int_equal(reader_on(h, sizeof(h)), 0);
	/* unknown types */
	static const uint16_t bad[] = { 0, PROTO_TYPE_LAST + 1, 0x100, 0xffff };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		proto_header(h, bad[i], 0);
		assert_int_equal(reader_on(h, sizeof(h)), -1);
		char want[64];
		snprintf(want, sizeof(want), "unknown frame type %u", bad[i]);
		assert_string_equal(err, want);
	}
	for (uint16_t t = PROTO_HELLO; t <= PROTO_ERROR; t++) {
		proto_header(h, t, 0);
		assert_int_equal(reader_on(h, sizeof(h)), 1);
	}
	/* the reserved field must be zero */
	for (int b = 6; b < 8; b++) {
		proto_header(h, PROTO_STDIN, 0);
		h[b] = 1;
		assert_int_equal(reader_on(h, sizeof(h)), -1);
	}
	/* a partial header is just not there yet */
	proto_header(h, 0xffff, UINT32_MAX);
	for (size_t n = 0; n < PROTO_HDR_LEN; n++)
		assert_int_equal(reader_on(h, n), 0);
	/* a good frame before a bad header still comes out first */
	static struct proto_reader r;
	proto_reader_init(&r);
	size_t room;
	uint8_t *dst = proto_reader_space(&r, &room);
	proto_header(dst, PROTO_STDOUT, 2);
	memcpy(dst + 8, "ok", 2);
	proto_header(dst + 10, 99, 0);
	proto_reader_fed(&r, 18);
	uint16_t type;
	const uint8_t *p;
	uint32_t len;
	assert_int_equal(proto_reader_next(&r, &type, &p, &len, err, sizeof(err)), 1);
	assert_int_equal(type, PROTO_STDOUT);
	assert_memory_equal(p, "ok", 2);
	assert_int_equal(proto_reader_next(&r, &type, &p, &len, err, sizeof(err)), -1);
	assert_string_equal(err, "unknown frame type 99");
}

static void header_layout(void **state)
{
	(void)state;
	uint8_t h[PROTO_HDR_LEN + 1];
	memset(h, 0xee, sizeof(h));
	proto_header(h, 0x0506, 0x01020304);
	static const uint8_t want[] = { 4, 3, 2, 1, 6, 5, 0, 0, 0xee };
	assert_memory_equal(h, want, sizeof(want));
}

/* ---- proto_send ----------------------------------------------------------- */

struct drain {
	int fd;
	uint8_t *buf;
	size_t len, cap;
	size_t chunk;
	bool slow;
};

static void *drain_thread(void *arg)
{
	struct drain *d = arg;
	for (;;) {
		size_t n = d->cap - d->len < d->chunk ? d->cap - d->len : d->chunk;
		ssize_t k = read(d->fd, d->buf + d->len, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		d->len += (size_t)k;
		if (d->slow)
			usleep(50);
	}
	return NULL;
}

static volatile sig_atomic_t ticks;
static void on_alarm(int sig)
{
	(void)sig;
	ticks++;
}

static void send_over_socketpair(void **state)
{
	(void)state;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	static uint8_t got[2 * PROTO_MAX_PAYLOAD];
	struct drain d = { .fd = sv[1], .buf = got, .cap = sizeof(got), .chunk = 1000 };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, drain_thread, &d), 0);

	static uint8_t big[PROTO_MAX_PAYLOAD];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i ^ (i >> 9));
	assert_int_equal(proto_send(sv[0], PROTO_STDOUT, "hi", 2), 0);
	assert_int_equal(proto_send(sv[0], PROTO_STDIN, NULL, 0), 0);
	assert_int_equal(proto_send(sv[0], PROTO_STDERR, big, PROTO_MAX_PAYLOAD), 0);
	/* too long: refused, nothing written */
	errno = 0;
	assert_int_equal(proto_send(sv[0], PROTO_STDERR, big, PROTO_MAX_PAYLOAD + 1), -1);
	assert_int_equal(errno, EMSGSIZE);
	assert_int_equal(proto_send(sv[0], PROTO_ERROR, "end", 3), 0);
	close(sv[0]);
	pthread_join(t, NULL);
	close(sv[1]);

	size_t want = 10 + 8 + 8 + PROTO_MAX_PAYLOAD + 11;
	assert_int_equal(d.len, want);
	static const uint8_t h1[] = { 2, 0, 0, 0, PROTO_STDOUT, 0, 0, 0, 'h', 'i', 0, 0, 0, 0, PROTO_STDIN, 0, 0, 0,
				      0, 0, 1, 0, PROTO_STDERR, 0, 0, 0 };
	assert_memory_equal(got, h1, sizeof(h1));
	assert_memory_equal(got + 26, big, PROTO_MAX_PAYLOAD);
	static const uint8_t tail[] = { 3, 0, 0, 0, PROTO_ERROR, 0, 0, 0, 'e', 'n', 'd' };
	assert_memory_equal(got + 26 + PROTO_MAX_PAYLOAD, tail, sizeof(tail));

	/* what was sent parses back */
	static struct proto_reader r;
	proto_reader_init(&r);
	size_t room;
	uint8_t *dst = proto_reader_space(&r, &room);
	memcpy(dst, got, 26);
	proto_reader_fed(&r, 26);
	uint16_t type;
	const uint8_t *p;
	uint32_t len;
	assert_int_equal(proto_reader_next(&r, &type, &p, &len, err, sizeof(err)), 1);
	assert_int_equal(type, PROTO_STDOUT);
	assert_int_equal(proto_reader_next(&r, &type, &p, &len, err, sizeof(err)), 1);
	assert_int_equal(type, PROTO_STDIN);
	assert_int_equal(len, 0);
	assert_int_equal(proto_reader_next(&r, &type, &p, &len, err, sizeof(err)), 0);

	/* writev cut short: a signal (no SA_RESTART) interrupting a blocked
	 * write returns what was written so far, or EINTR; proto_send must go
	 * on from exactly there. A small buffer and a slow reader make the
	 * writes block. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	int small = 4096;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	static uint8_t many[8 * (PROTO_HDR_LEN + PROTO_MAX_PAYLOAD)];
	struct drain d2 = { .fd = sv[1], .buf = many, .cap = sizeof(many), .chunk = 777, .slow = true };
	struct sigaction sa = { .sa_handler = on_alarm }, old;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
	sigset_t alrm, prev;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &alrm, &prev);
	assert_int_equal(pthread_create(&t, NULL, drain_thread, &d2), 0);   /* blocks SIGALRM */
	pthread_sigmask(SIG_SETMASK, &prev, NULL);
	struct itimerval it = { { 0, 300 }, { 0, 300 } }, off = { { 0, 0 }, { 0, 0 } };
	ticks = 0;
	setitimer(ITIMER_REAL, &it, NULL);
	for (int i = 0; i < 8; i++) {
		big[0] = (uint8_t)i;
		assert_int_equal(proto_send(sv[0], PROTO_STDOUT, big, PROTO_MAX_PAYLOAD - (uint32_t)i), 0);
	}
	setitimer(ITIMER_REAL, &off, NULL);
	sigaction(SIGALRM, &old, NULL);
	close(sv[0]);
	pthread_join(t, NULL);
	close(sv[1]);
	assert_true(ticks > 0);
	size_t at = 0;
	for (int i = 0; i < 8; i++) {
		uint8_t h[PROTO_HDR_LEN];
		proto_header(h, PROTO_STDOUT, PROTO_MAX_PAYLOAD - (uint32_t)i);
		assert_true(at + PROTO_HDR_LEN + PROTO_MAX_PAYLOAD - (size_t)i <= d2.len);
		assert_memory_equal(many + at, h, PROTO_HDR_LEN);
		assert_int_equal(many[at + PROTO_HDR_LEN], i);
		assert_memory_equal(many + at + PROTO_HDR_LEN + 1, big + 1, PROTO_MAX_PAYLOAD - 1 - (size_t)i);
		at += PROTO_HDR_LEN + PROTO_MAX_PAYLOAD - (size_t)i;
	}
	assert_int_equal(d2.len, at);

	/* the peer gone: -1, EPIPE (SIGPIPE is ignored, as the agent does) */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	close(sv[1]);
	errno = 0;
	assert_int_equal(proto_send(sv[0], PROTO_STDOUT, "x", 1), -1);
	assert_int_equal(errno, EPIPE);
	close(sv[0]);
	/* a bad fd */
	assert_int_equal(proto_send(-1, PROTO_STDOUT, "x", 1), -1);
	assert_int_equal(errno, EBADF);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(hello_round_trip, setup),
		cmocka_unit_test_setup(hello_refused, setup),
		cmocka_unit_test_setup(exit_round_trip, setup),
		cmocka_unit_test_setup(exit_refused, setup),
		cmocka_unit_test_setup(exit_status_ranges, setup),
		cmocka_unit_test_setup(exit_stage_and_flags, setup),
		cmocka_unit_test_setup(stage_continues_table, setup),
		cmocka_unit_test_setup(request_exact_bytes, setup),
		cmocka_unit_test_setup(request_round_trip, setup),
		cmocka_unit_test_setup(request_two_stage_round_trip, setup),
		cmocka_unit_test_setup(request_version, setup),
		cmocka_unit_test_setup(request_stage_rules, setup),
		cmocka_unit_test_setup(encode_stage_rules, setup),
		cmocka_unit_test_setup(request_any_order, setup),
		cmocka_unit_test_setup(request_truncated_and_overrun, setup),
		cmocka_unit_test_setup(request_bad_strings, setup),
		cmocka_unit_test_setup(request_counts, setup),
		cmocka_unit_test_setup(request_limits, setup),
		cmocka_unit_test_setup(request_unknown_tag, setup),
		cmocka_unit_test_setup(request_net, setup),
		cmocka_unit_test_setup(request_unique_round_trip, setup),
		cmocka_unit_test_setup(request_unique_refused, setup),
		cmocka_unit_test_setup(encode_unique_refusals, setup),
		cmocka_unit_test_setup(request_no_program, setup),
		cmocka_unit_test_setup(request_bad_env, setup),
		cmocka_unit_test_setup(request_relative_allow, setup),
		cmocka_unit_test_setup(encode_refusals, setup),
		cmocka_unit_test_setup(encode_refuses_empty_program, setup),
		cmocka_unit_test_setup(encode_fit, setup),
		cmocka_unit_test_setup(header_layout, setup),
		cmocka_unit_test_setup(reader_byte_at_a_time, setup),
		cmocka_unit_test_setup(reader_many_frames_per_feed, setup),
		cmocka_unit_test_setup(reader_random_splits, setup),
		cmocka_unit_test_setup(reader_hostile, setup),
		cmocka_unit_test_setup(send_over_socketpair, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
