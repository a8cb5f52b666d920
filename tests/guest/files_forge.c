/* A hostile guest's file operations, for the evaluation's test-only agent
 * (never shipped): guest-agent/files.c as it is, except that an operation
 * on a path whose last component starts with "forge-" is answered with
 * the forgery that name picks, as an agent under a compromised guest
 * kernel could send them. What the host makes of each is the case.
 *
 *   forge-list      a LIST of 4200 valid 255-byte names: past the host's
 *                   most for one listing (4096 entries' worth)
 *   forge-names     a LIST whose entries name "../../etc/passwd", "..",
 *                   and one with a nonzero reserved word
 *   forge-stat      a STAT whose entry is the largest of everything
 *                   (size, mode, mtime), then stray frames: an END, DATA,
 *                   OUTPUT and EXIT of ids nothing under way has
 *   forge-stat-name a STAT whose entry is named "../../../etc/shadow",
 *                   then the honest answer
 *   forge-read      a READ of 3 MiB sent at once, past the host's credit
 *
 * Built from files.c itself (its files_request renamed), so that the
 * agent is the real one in every other way. */
#define files_request files_request_real
#include "../../guest-agent/files.c"
#undef files_request

int files_request(struct files *f, const struct proto_file_req *r, struct outq *q);

/* A 255-byte entry named by n, into buf at at. */
static size_t long_entry(uint8_t *buf, size_t cap, size_t at, unsigned n)
{
	struct proto_entry e = { .mode = S_IFREG | 0644, .size = n, .mtime_ns = 0 };
	memset(e.name, 'a' + n % 26, PROTO_NAME_MAX);
	snprintf(e.name, 12, "%010u", n);
	e.name[10] = '-';
	return proto_put_entry(buf, cap, at, &e);
}

static int forge_list(uint32_t id, struct outq *q)
{
	static uint8_t buf[PROTO_MAX_PAYLOAD];
	size_t at = PROTO_SB_ID_LEN;
	for (unsigned n = 0; n < 4200; n++) {
		size_t next = long_entry(buf, sizeof(buf), at, n);
		if (!next) {
			if (outq_put(q, PROTO_FILE_DATA, &id, PROTO_SB_ID_LEN, buf + PROTO_SB_ID_LEN,
				     (uint32_t)(at - PROTO_SB_ID_LEN)) < 0)
				return -1;
			next = long_entry(buf, sizeof(buf), PROTO_SB_ID_LEN, n);
		}
		at = next;
	}
	if (outq_put(q, PROTO_FILE_DATA, &id, PROTO_SB_ID_LEN, buf + PROTO_SB_ID_LEN, (uint32_t)(at - PROTO_SB_ID_LEN)) < 0)
		return -1;
	return end(q, id, 0, 0, NULL);
}

/* An entry named "name" in place of a valid one of the same length. */
static size_t raw_entry(uint8_t *buf, size_t cap, size_t at, const char *name, uint32_t reserved)
{
	struct proto_entry e = { .mode = S_IFREG | 0644 };
	size_t n = strlen(name);
	memset(e.name, 'x', n);
	size_t next = proto_put_entry(buf, cap, at, &e);
	if (next) {
		memcpy(buf + at + 4, &reserved, 4);
		memcpy(buf + at + PROTO_ENTRY_HDR, name, n);
	}
	return next;
}

static int forge_names(uint32_t id, struct outq *q)
{
	static const char *const names[] = { "../../etc/passwd", ".." };
	uint8_t buf[1024];
	for (unsigned i = 0; i < 3; i++) {
		size_t at = raw_entry(buf, sizeof(buf), PROTO_SB_ID_LEN, i < 2 ? names[i] : "reserved", i < 2 ? 0 : 7);
		if (outq_put(q, PROTO_FILE_DATA, &id, PROTO_SB_ID_LEN, buf + PROTO_SB_ID_LEN,
			     (uint32_t)(at - PROTO_SB_ID_LEN)) < 0)
			return -1;
	}
	return end(q, id, 0, 0, NULL);
}

static int forge_stat(uint32_t id, struct outq *q)
{
	struct proto_entry e = { .mode = UINT32_MAX, .size = UINT64_MAX, .mtime_ns = INT64_MIN };
	snprintf(e.name, sizeof(e.name), "forge-stat");
	uint8_t buf[64], one[8];
	proto_encode_output_hdr(one, 0xfffffff1u, PROTO_STDOUT);
	struct proto_exit x = { 0 };
	uint8_t exitbuf[PROTO_CMD_EXIT_LEN];
	proto_encode_cmd_exit(exitbuf, 0xfffffff2u, &x);
	uint32_t stray = 0xfffffff0u;
	size_t n = proto_encode_file_end(buf, sizeof(buf), id + 7777, 0, 0, NULL);
	if (end(q, id, 0, 0, &e) < 0 || outq_put(q, PROTO_FILE_END, buf, (uint32_t)n, NULL, 0) < 0 ||
	    outq_put(q, PROTO_FILE_DATA, &stray, 4, "stray", 5) < 0 ||
	    outq_put(q, PROTO_CMD_OUTPUT, one, sizeof(one), "forged-output", 13) < 0 ||
	    outq_put(q, PROTO_CMD_EXIT, exitbuf, sizeof(exitbuf), NULL, 0) < 0)
		return -1;
	return 0;
}

static int forge_stat_name(uint32_t id, struct outq *q)
{
	const char *name = "../../../etc/shadow";
	uint8_t buf[PROTO_FILE_END_LEN + PROTO_ENTRY_HDR + 64];
	size_t n = proto_encode_file_end(buf, PROTO_FILE_END_LEN, id, 0, 0, NULL);
	n = raw_entry(buf, sizeof(buf), n, name, 0);
	if (outq_put(q, PROTO_FILE_END, buf, (uint32_t)n, NULL, 0) < 0)
		return -1;
	struct proto_entry e = { .mode = S_IFREG | 0600, .size = 5 };
	snprintf(e.name, sizeof(e.name), "honest");
	return end(q, id, 0, 0, &e);
}

/* 3 MiB of a READ at once, past the 1 MiB the host's credit allows in
 * flight, then its end. */
static int forge_read(uint32_t id, struct outq *q)
{
	static uint8_t zeros[PROTO_SB_CHUNK];
	for (size_t sent = 0; sent < 3u << 20; sent += sizeof(zeros))
		if (outq_put(q, PROTO_FILE_DATA, &id, PROTO_SB_ID_LEN, zeros, sizeof(zeros)) < 0)
			return -1;
	return end(q, id, 0, 0, NULL);
}

int files_request(struct files *f, const struct proto_file_req *r, struct outq *q)
{
	const char *b = base_name(r->path);
	if (strncmp(b, "forge-", 6))
		return files_request_real(f, r, q);
	if (!strcmp(b, "forge-list"))
		return forge_list(r->id, q);
	if (!strcmp(b, "forge-names"))
		return forge_names(r->id, q);
	if (!strcmp(b, "forge-stat"))
		return forge_stat(r->id, q);
	if (!strcmp(b, "forge-stat-name"))
		return forge_stat_name(r->id, q);
	if (!strcmp(b, "forge-read"))
		return forge_read(r->id, q);
	return files_request_real(f, r, q);
}
