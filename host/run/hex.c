/* Hex (hex.h). */
#include "hex.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

void hex_of(const void *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

void sha256_hex(const void *p, size_t n, char out[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256(n ? p : (const void *)"", n, md);
	hex_of(md, sizeof(md), out);
}

int sha256_file_hex(const char *path, char out[65])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char buf[65536], d[EVP_MAX_MD_SIZE];
	unsigned dl = 0;
	ssize_t n = 0;
	bool ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	while (ok && (n = read(fd, buf, sizeof(buf))) > 0)
		ok = EVP_DigestUpdate(md, buf, (size_t)n);
	int e = n < 0 ? errno : EIO;
	ok = ok && n == 0 && EVP_DigestFinal_ex(md, d, &dl) && dl == SHA256_DIGEST_LENGTH;
	EVP_MD_CTX_free(md);
	close(fd);
	if (!ok) {
		errno = e;
		return -1;
	}
	hex_of(d, dl, out);
	return 0;
}

int sha256_read_sum(const char *path, char out[65])
{
	char text[80];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text));
	if (fd >= 0)
		close(fd);
	if (n != 65 || text[64] != '\n')
		return -1;
	text[64] = '\0';
	if (!hex_is_sha256(text))
		return -1;
	memcpy(out, text, 65);
	return 0;
}

bool hex_is_sha256(const char *s)
{
	if (!s || strlen(s) != 64)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}
