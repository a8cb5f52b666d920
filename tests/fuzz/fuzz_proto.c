/* libFuzzer harness for the host-agent wire format (guest-agent/proto.c).
 *
 * Input: one byte n, then (n & 7) + 1 chunk sizes, then the stream. The
 * stream is fed to a proto_reader in chunks of those sizes in turn (0: all
 * the room there is), and again in the largest chunks possible; both
 * passes must give the same frames and end the same way (the frame
 * boundaries cannot depend on how the bytes arrived). Every frame, and the
 * stream itself taken as one payload, goes through proto_decode_hello,
 * proto_decode_request and proto_decode_exit, each on an exactly sized heap
 * copy so that reading past the payload is caught. What they accept must
 * hold the promises of proto.h:
 *   - a frame: a known type, at most PROTO_MAX_PAYLOAD bytes;
 *   - HELLO: the version is PROTO_VERSION, 4..4+PROTO_MAX_STR bytes;
 *   - EXIT: PROTO_EXIT_LEN bytes, a known kind, only known flags, the
 *     reserved word 0, a stage below PROTO_MAX_STAGES;
 *   - REQUEST (version PROTO_VERSION): a sandbox's with no stage, else
 *     1..PROTO_MAX_STAGES stages, COMPILE ones first and one RUN stage last, each with argv NULL-terminated,
 *     argc in 1..PROTO_MAX_ARGS and a non-empty argv[0]; env
 *     NULL-terminated, counts within their limits, every string inside
 *     the request's storage, NUL-free (re-encoding gives back exactly as
 *     many bytes) and at most PROTO_MAX_STR long, env entries NAME=VALUE,
 *     allow entries absolute, net_port 0 or PROTO_NET_VSOCK_PORT, time_ns
 *     not 0, run_id 1..PROTO_RUN_ID_MAX of [0-9a-f];
 *     re-encoding succeeds, decodes to the same request and encodes to
 *     the same bytes again;
 *   - proto_stage_continues, on any EXIT bytes (decoded or not), only says
 *     yes for a stage that exited 0 and has a stage after it.
 *
 * A well-formed REQUEST is too deep for libFuzzer to reach from nothing in
 * a short run, so when the first corpus directory on the command line is
 * empty the harness first writes a few seeds into it: a whole session, a
 * request frame, bare HELLO / REQUEST (one stage, and compile + run with
 * limits and NET) / EXIT payloads.
 *
 * Build and run: make fuzz-smoke (short) or make fuzz (FUZZ_TIME seconds). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- seeds ---------------------------------------------------------------- */

static uint8_t seed[4 * PROTO_MAX_PAYLOAD];

static size_t put_frame(size_t at, uint16_t type, const void *p, size_t len)
{
	proto_header(seed + at, type, (uint32_t)len);
	if (len)
		memcpy(seed + at + PROTO_HDR_LEN, p, len);
	return at + PROTO_HDR_LEN + len;
}

static void write_seed(const char *dir, const char *name, size_t len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f)
		return;
	fwrite(seed, 1, len, f);
	fclose(f);
}

static void write_seeds(const char *dir)
{
	static struct proto_request r;
	static uint8_t rq[PROTO_MAX_PAYLOAD], small[PROTO_MAX_PAYLOAD], two[PROTO_MAX_PAYLOAD];
	static char *argv[] = { "sh", "-c", "echo \"$X\" | wc -c", "" };
	static char *env[] = { "X=granted", "LANG=fr_FR.UTF-8" };
	static char *allow[] = { "/usr/bin/sh", "/bin/cat" };
	r.nstages = 1;
	r.stage[0].kind = PROTO_STAGE_RUN;
	r.stage[0].argc = 4;
	memcpy(r.stage[0].argv, argv, sizeof(argv));
	r.envc = 2;
	memcpy(r.env, env, sizeof(env));
	r.nallow = 2;
	memcpy(r.allow, allow, sizeof(allow));
	r.max_output = 1 << 20;
	r.nproc = r.nofile = 256;
	r.fsize = 64 << 20;
	for (unsigned i = 0; i < PROTO_SEED_LEN; i++)
		r.seed[i] = (uint8_t)(i * 37);
	r.time_ns = 1700000000123456789ull;
	snprintf(r.run_id, sizeof(r.run_id), "0123456789abcdef0123456789abcdef");
	size_t rn = proto_encode_request(&r, rq, sizeof(rq));
	/* compile, then run, each with its limits */
	static char *cc[] = { "/usr/bin/gcc", "-o", "p", "p.c" };
	r.nstages = 2;
	r.stage[1] = r.stage[0];
	r.stage[1].cpu_ms = 1500;
	r.stage[1].memory_kib = 65536;
	r.stage[0] = (struct proto_stage){ .kind = PROTO_STAGE_COMPILE, .argc = 4, .cpu_ms = 10000, .memory_kib = 1 << 20 };
	memcpy(r.stage[0].argv, cc, sizeof(cc));
	r.net_port = PROTO_NET_VSOCK_PORT;
	size_t tn = proto_encode_request(&r, two, sizeof(two));
	memset(&r, 0, sizeof(r));
	r.nstages = 1;
	r.stage[0].kind = PROTO_STAGE_RUN;
	r.stage[0].argc = 1;
	r.stage[0].argv[0] = "x";
	r.time_ns = 1;
	snprintf(r.run_id, sizeof(r.run_id), "a");
	size_t sn = proto_encode_request(&r, small, sizeof(small));
	uint8_t hello[64], ex[PROTO_EXIT_LEN];
	size_t hn = proto_encode_hello(hello, sizeof(hello), "vmrun-agent 0.1.0");
	struct proto_exit e = { .kind = PROTO_END_EXITED, .code = 3, .flags = PROTO_EXIT_STDOUT_TRUNCATED,
				.stage = 1, .cpu_ms = 12, .max_rss_kib = 3456, .stdout_bytes = 100000, .stderr_bytes = 20 };
	proto_encode_exit(&e, ex);

	/* schedules: one byte at a time, all at once, mixed */
	static const uint8_t sched[][5] = { { 0, 1 }, { 0, 0 }, { 3, 5, 0, 1, 200 } };
	static const char *const sname[] = { "session-bytes", "session-whole", "session-mixed" };
	for (size_t i = 0; i < 3; i++) {
		size_t ns = (size_t)(sched[i][0] & 7) + 2;
		memcpy(seed, sched[i], ns);
		size_t n = put_frame(ns, PROTO_HELLO, hello, hn);
		n = put_frame(n, PROTO_REQUEST, rq, rn);
		n = put_frame(n, PROTO_STDIN, "abc", 3);
		n = put_frame(n, PROTO_STDIN, NULL, 0);
		n = put_frame(n, PROTO_STDOUT, "out\n", 4);
		n = put_frame(n, PROTO_STDERR, "err\n", 4);
		n = put_frame(n, PROTO_EXIT, ex, sizeof(ex));
		n = put_frame(n, PROTO_ERROR, "failed", 6);
		write_seed(dir, sname[i], n);
	}
	seed[0] = seed[1] = 0;
	write_seed(dir, "request-frame", put_frame(2, PROTO_REQUEST, rq, rn));
	memcpy(seed + 2, rq, rn);
	write_seed(dir, "request-raw", 2 + rn);
	memcpy(seed + 2, small, sn);
	write_seed(dir, "request-min", 2 + sn);
	memcpy(seed + 2, two, tn);
	write_seed(dir, "request-two-stages", 2 + tn);
	memcpy(seed + 2, ex, sizeof(ex));
	write_seed(dir, "exit-raw", 2 + sizeof(ex));
	memcpy(seed + 2, hello, hn);
	write_seed(dir, "hello-raw", 2 + hn);
}

/* Seed the first corpus directory named, if it is empty. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	for (int i = 1; i < *argc; i++) {
		const char *a = (*argv)[i];
		if (a[0] == '-')
			continue;
		DIR *d = opendir(a);
		if (!d)
			return 0;   /* a file: reproducing an input */
		int entries = 0;
		struct dirent *e;
		while ((e = readdir(d)))
			entries += e->d_name[0] != '.';
		closedir(d);
		if (entries == 0)
			write_seeds(a);
		return 0;
	}
	return 0;
}

/* ---- the checks ------------------------------------------------------------ */

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stdout, "fuzz_proto: invariant violated: %s\n", what);
		fflush(stdout);
		abort();
	}
}

static struct proto_request req, again, shape;
static uint8_t enc[PROTO_MAX_PAYLOAD], enc2[PROTO_MAX_PAYLOAD];
static char err[256];

static bool in_storage(const struct proto_request *r, const char *s)
{
	return s >= r->storage && s < r->storage + sizeof(r->storage) &&
	       strnlen(s, (size_t)(r->storage + sizeof(r->storage) - s)) < (size_t)(r->storage + sizeof(r->storage) - s);
}

static bool valid_name(const char *s)
{
	const char *eq = strchr(s, '=');
	if (!eq || eq == s)
		return false;
	for (const char *c = s; c < eq; c++)
		if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || *c == '_' ||
		      (c > s && *c >= '0' && *c <= '9')))
			return false;
	return true;
}

static void check_request(const struct proto_request *r)
{
	check(r->sandbox ? r->nstages == 0 : (r->nstages >= 1 && r->nstages <= PROTO_MAX_STAGES),
	      "a sandbox: no stage; a run: nstages in 1..PROTO_MAX_STAGES");
	for (unsigned s = 0; s < r->nstages; s++) {
		const struct proto_stage *st = &r->stage[s];
		check(st->kind == (s + 1 == r->nstages ? PROTO_STAGE_RUN : PROTO_STAGE_COMPILE),
		      "compile stages first, the run stage last");
		check(st->argc >= 1 && st->argc <= PROTO_MAX_ARGS, "argc in 1..PROTO_MAX_ARGS");
		check(st->argv[st->argc] == NULL, "argv NULL-terminated");
		for (unsigned i = 0; i < st->argc; i++) {
			check(st->argv[i] && in_storage(r, st->argv[i]), "argv strings lie in the storage");
			check(strlen(st->argv[i]) <= PROTO_MAX_STR, "argv strings within PROTO_MAX_STR");
		}
		check(st->argv[0][0] != '\0', "argv[0] is not empty");
	}
	check(r->envc <= PROTO_MAX_ENV, "envc within PROTO_MAX_ENV");
	check(r->env[r->envc] == NULL, "env NULL-terminated");
	check(r->nallow <= PROTO_MAX_ALLOW, "nallow within PROTO_MAX_ALLOW");
	for (unsigned i = 0; i < r->envc; i++) {
		check(r->env[i] && in_storage(r, r->env[i]), "env strings lie in the storage");
		check(strlen(r->env[i]) <= PROTO_MAX_STR, "env strings within PROTO_MAX_STR");
		check(valid_name(r->env[i]), "env entries are NAME=VALUE");
	}
	for (unsigned i = 0; i < r->nallow; i++) {
		check(r->allow[i] && in_storage(r, r->allow[i]), "allow strings lie in the storage");
		check(strlen(r->allow[i]) <= PROTO_MAX_STR, "allow strings within PROTO_MAX_STR");
		check(r->allow[i][0] == '/', "allow entries are absolute");
	}
	check(r->net_port == 0 || r->net_port == PROTO_NET_VSOCK_PORT, "NET names the proxy's port or is absent");
	check(r->time_ns != 0, "TIME is not 0");
	check(proto_valid_run_id(r->run_id, strnlen(r->run_id, sizeof(r->run_id))) &&
	      strnlen(r->run_id, sizeof(r->run_id)) <= PROTO_RUN_ID_MAX, "RUN_ID is 1..32 of [0-9a-f], terminated");
	for (const char *c = r->run_id; *c; c++)
		check((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f'), "RUN_ID is hex, lowercase");
}

static void check_same(const struct proto_request *a, const struct proto_request *b)
{
	check(a->nstages == b->nstages && a->envc == b->envc && a->nallow == b->nallow && a->sandbox == b->sandbox,
	      "re-decoded counts");
	for (unsigned s = 0; s < a->nstages; s++) {
		const struct proto_stage *x = &a->stage[s], *y = &b->stage[s];
		check(x->kind == y->kind && x->argc == y->argc, "re-decoded stage");
		check(x->cpu_ms == y->cpu_ms && x->memory_kib == y->memory_kib, "re-decoded stage limits");
		for (unsigned i = 0; i < x->argc; i++)
			check(strcmp(x->argv[i], y->argv[i]) == 0, "re-decoded argv");
	}
	for (unsigned i = 0; i < a->envc; i++)
		check(strcmp(a->env[i], b->env[i]) == 0, "re-decoded env");
	for (unsigned i = 0; i < a->nallow; i++)
		check(strcmp(a->allow[i], b->allow[i]) == 0, "re-decoded allow");
	check(a->max_output == b->max_output && a->nproc == b->nproc && a->nofile == b->nofile &&
	      a->fsize == b->fsize, "re-decoded limits");
	check(a->net_port == b->net_port, "re-decoded NET");
	check(memcmp(a->seed, b->seed, PROTO_SEED_LEN) == 0, "re-decoded SEED");
	check(a->time_ns == b->time_ns, "re-decoded TIME");
	check(strcmp(a->run_id, b->run_id) == 0, "re-decoded RUN_ID");
}

/* All three decoders on one payload, from an exactly sized copy. */
static void decode_all(const uint8_t *p, uint32_t len)
{
	uint8_t *copy = malloc(len ? len : 1);
	if (!copy)
		abort();
	if (len)
		memcpy(copy, p, len);

	uint32_t version;
	err[0] = '\0';
	if (proto_decode_hello(copy, len, &version, err, sizeof(err)) == 0)
		check(version == PROTO_VERSION && len >= 4 && len <= 4 + PROTO_MAX_STR, "accepted HELLO");
	else
		check(err[0] != '\0', "a refused HELLO says why");

	struct proto_exit e;
	err[0] = '\0';
	if (proto_decode_exit(copy, len, &e, err, sizeof(err)) == 0) {
		check(len == PROTO_EXIT_LEN && e.kind >= PROTO_END_EXITED && e.kind <= PROTO_END_ERROR, "accepted EXIT");
		check(!(e.flags & ~PROTO_EXIT_FLAGS) && e.zero == 0 && e.stage < PROTO_MAX_STAGES,
		      "accepted EXIT: known flags, reserved 0, a stage there can be");
	} else {
		check(err[0] != '\0', "a refused EXIT says why");
	}
	/* proto_stage_continues is pure over any EXIT, decoded or not */
	if (len >= PROTO_EXIT_LEN) {
		memcpy(&e, copy, PROTO_EXIT_LEN);
		for (unsigned n = 0; n <= PROTO_MAX_STAGES + 1; n++) {
			shape.nstages = n;   /* all of the request it reads */
			bool want = e.kind == PROTO_END_EXITED && e.code == 0 && (uint64_t)e.stage + 1 < n;
			check(proto_stage_continues(&shape, &e) == want, "proto_stage_continues: an exit 0 with a stage after it");
		}
	}

	err[0] = '\0';
	if (proto_decode_request(copy, len, &req, err, sizeof(err)) == 0) {
		check(len <= PROTO_MAX_PAYLOAD, "an accepted request fits a frame");
		check_request(&req);
		size_t n = proto_encode_request(&req, enc, sizeof(enc));
		check(n != 0, "a decoded request re-encodes");
		/* every field of the input is in the re-encoding, each string
		 * whole (a NUL inside would have shortened it) */
		check(n == len, "re-encoding has the input's length");
		check(proto_decode_request(enc, (uint32_t)n, &again, err, sizeof(err)) == 0, "the re-encoding decodes");
		check_request(&again);
		check_same(&req, &again);
		size_t n2 = proto_encode_request(&again, enc2, sizeof(enc2));
		check(n2 == n && memcmp(enc, enc2, n) == 0, "encoding is canonical");
	} else {
		check(err[0] != '\0', "a refused request says why");
	}
	free(copy);
}

/* What one pass over the stream saw. */
struct pass {
	size_t frames;
	uint64_t digest;     /* types, lengths and payloads of all frames, in order */
	int end;             /* -1 malformed, 0 ran out of bytes */
	size_t leftover;     /* bytes fed but not taken by a frame */
};

static uint64_t mix(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static struct proto_reader rd;

static void run_pass(const uint8_t *s, size_t n, const uint8_t *sched, size_t nsched, bool decode, struct pass *out)
{
	proto_reader_init(&rd);
	memset(out, 0, sizeof(*out));
	out->digest = 0xcbf29ce484222325ull;
	size_t fed = 0, taken = 0, step = 0;
	for (;;) {
		uint16_t type;
		const uint8_t *p;
		uint32_t len;
		int r;
		err[0] = '\0';
		while ((r = proto_reader_next(&rd, &type, &p, &len, err, sizeof(err))) == 1) {
			check(type >= PROTO_HELLO && type <= PROTO_TYPE_LAST, "frame type known");
			check(len <= PROTO_MAX_PAYLOAD, "frame within PROTO_MAX_PAYLOAD");
			check(p == rd.buf + PROTO_HDR_LEN, "payload right after the header");
			taken += PROTO_HDR_LEN + len;
			check(taken <= fed, "a frame is made of bytes fed");
			out->frames++;
			uint8_t hdr[6];
			memcpy(hdr, &type, 2);
			memcpy(hdr + 2, &len, 4);
			out->digest = mix(mix(out->digest, hdr, sizeof(hdr)), p, len);
			if (decode)
				decode_all(p, len);
		}
		if (r < 0) {
			check(err[0] != '\0', "a malformed stream says why");
			out->end = -1;
			out->leftover = fed - taken;
			return;
		}
		if (fed == n)
			break;
		size_t room;
		uint8_t *dst = proto_reader_space(&rd, &room);
		check(room > 0, "the reader always has room when it wants bytes");
		size_t k = nsched ? sched[step++ % nsched] : 0;
		if (k == 0 || k > room)
			k = room;
		if (k > n - fed)
			k = n - fed;
		memcpy(dst, s + fed, k);
		proto_reader_fed(&rd, k);
		fed += k;
	}
	out->end = 0;
	out->leftover = fed - taken;
	check(out->leftover < PROTO_HDR_LEN + PROTO_MAX_PAYLOAD, "what is left is less than a frame");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t nsched = (size_t)(data[0] & 7) + 1;
	if (size < 1 + nsched)
		return 0;
	const uint8_t *sched = data + 1;
	const uint8_t *s = data + 1 + nsched;
	size_t n = size - 1 - nsched;

	struct pass chunked, whole;
	run_pass(s, n, sched, nsched, true, &chunked);
	run_pass(s, n, NULL, 0, false, &whole);
	check(chunked.frames == whole.frames, "same frames whatever the chunks");
	check(chunked.digest == whole.digest, "same frame contents whatever the chunks");
	check(chunked.end == whole.end, "same end whatever the chunks");
	if (chunked.end == 0)
		check(chunked.leftover == whole.leftover, "same bytes left whatever the chunks");

	/* The stream as one payload: the decoders straight on fuzzed bytes. */
	if (n <= PROTO_MAX_PAYLOAD)
		decode_all(s, (uint32_t)n);
	return 0;
}
