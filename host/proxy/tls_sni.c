/* The ClientHello's server name (tls_sni.h). Every length is checked
 * against what contains it before it is used. */
#include "tls_sni.h"

#include <stdbool.h>
#include <string.h>

/* A bounded reader over one region: taking past its end sets bad and
 * yields zeros, so the walk below needs one check per structure. */
struct reader {
	const uint8_t *p;
	size_t left;
	bool bad;
};

static uint32_t take(struct reader *r, unsigned n)
{
	if (r->bad || r->left < n) {
		r->bad = true;
		return 0;
	}
	uint32_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v = v << 8 | r->p[i];
	r->p += n;
	r->left -= n;
	return v;
}

/* The next n bytes as a reader of their own. */
static struct reader sub(struct reader *r, size_t n)
{
	struct reader s = { r->p, n, r->bad || r->left < n };
	if (s.bad) {
		r->bad = true;
		s.left = 0;
		return s;
	}
	r->p += n;
	r->left -= n;
	return s;
}

static enum tls_sni_result bad(const char **why, const char *what)
{
	if (why)
		*why = what;
	return TLS_SNI_BAD;
}

/* The server_name extension's list: exactly one host_name, a name. */
static enum tls_sni_result server_name(struct reader ext, char *out, size_t cap, const char **why)
{
	struct reader list = sub(&ext, take(&ext, 2));
	if (ext.bad || ext.left)
		return bad(why, "a server_name extension of the wrong length");
	bool found = false;
	while (list.left && !list.bad) {
		unsigned type = take(&list, 1);
		struct reader name = sub(&list, take(&list, 2));
		if (list.bad)
			break;
		if (type != 0)
			continue;   /* no other name type is defined; skipped */
		if (found)
			return bad(why, "two host names");
		if (name.left == 0 || name.left > 253 || name.left >= cap)
			return bad(why, "a host name of a wrong length");
		for (size_t i = 0; i < name.left; i++)
			if (name.p[i] < 0x21 || name.p[i] > 0x7e)
				return bad(why, "a host name that is not printable ASCII");
		memcpy(out, name.p, name.left);
		out[name.left] = '\0';
		found = true;
	}
	if (list.bad)
		return bad(why, "a server name list of the wrong length");
	return found ? TLS_SNI_FOUND : TLS_SNI_NONE;
}

enum tls_sni_result tls_sni(const uint8_t *buf, size_t len, char *out, size_t cap, const char **why)
{
	if (cap)
		out[0] = '\0';
	if (len < 5)
		return TLS_SNI_MORE;
	struct reader rec = { buf, len, false };
	unsigned type = take(&rec, 1), major = take(&rec, 1);
	take(&rec, 1);   /* the record's minor version: any 3.x */
	size_t rlen = take(&rec, 2);
	if (type != 22 || major != 3)
		return bad(why, "not a TLS handshake record");
	if (rlen == 0 || rlen > TLS_RECORD_MAX)
		return bad(why, "a record of a wrong length");
	if (rec.left < rlen)
		return TLS_SNI_MORE;
	struct reader hs = sub(&rec, rlen);
	if (take(&hs, 1) != 1)
		return bad(why, "not a ClientHello");
	size_t hlen = take(&hs, 3);
	if (hs.bad || hlen != hs.left)
		return bad(why, "a ClientHello split over records, or of the wrong length");
	struct reader hello = sub(&hs, hlen);
	take(&hello, 2);                          /* legacy_version */
	sub(&hello, 32);                          /* random */
	size_t sid = take(&hello, 1);
	if (sid > 32)
		return bad(why, "a session id over 32 bytes");
	sub(&hello, sid);
	size_t suites = take(&hello, 2);
	if (suites < 2 || suites % 2)
		return bad(why, "a cipher suite list of a wrong length");
	sub(&hello, suites);
	sub(&hello, take(&hello, 1));             /* compression methods */
	if (hello.bad)
		return bad(why, "a ClientHello cut short");
	if (hello.left == 0)
		return TLS_SNI_NONE;                  /* no extensions at all */
	struct reader exts = sub(&hello, take(&hello, 2));
	if (hello.bad || hello.left)
		return bad(why, "an extension list of the wrong length");
	enum tls_sni_result res = TLS_SNI_NONE;
	while (exts.left) {
		unsigned etype = take(&exts, 2);
		struct reader ext = sub(&exts, take(&exts, 2));
		if (exts.bad)
			return bad(why, "an extension of the wrong length");
		if (etype != 0)
			continue;
		if (res != TLS_SNI_NONE)
			return bad(why, "two server_name extensions");
		res = server_name(ext, out, cap, why);
		if (res == TLS_SNI_BAD)
			return res;
	}
	return res;
}
