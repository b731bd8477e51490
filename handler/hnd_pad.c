/* hnd_pad.c: BREACH length hiding: the keyed padding length that the core writes as the gzip header's comment (RFC 1952). */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <nettle/hmac.h>

#include <nettle/sha2.h>
#include "hnd_entry.h"
#include "hnd_handle.h"
#include "hnd_pad.h"

/*
 * Why a comment (FCOMMENT) and not an extra field (FEXTRA): every gzip
 * decoder that parses a header at all skips both (zlib's inflate, Python's
 * gzip module, curl through zlib, Chromium's GZipHeader, Go's
 * compress/gzip, libdeflate), but a comment costs one byte of framing (its
 * terminating NUL) where an extra field costs six (XLEN and one subfield
 * header), has no subfield identifier to register (RFC 1952 section
 * 2.3.1.1 asks for registration with a registry that no longer answers),
 * and has no 65535-byte ceiling. Go's gzhttp carries its jitter the same
 * way. The comment is pad - 1 spaces and its NUL: ISO 8859-1 text without
 * an inner NUL, as section 2.3.1 requires. The core writes it
 * (gz_header_comment, gz_compress_member, gz_pump_set_comment); this file
 * only keys its length.
 */

int
hnd_pad_key_init(struct mhdgz *gz, const void *key, size_t key_nbytes)
{
	if (key) {
		if (key_nbytes < MHDGZ_LENGTH_HIDING_KEY_MIN || key_nbytes > sizeof gz->pad_key)
			return MHDGZ_EINVAL;
		memcpy(gz->pad_key, key, key_nbytes);
		gz->pad_key_nbytes = key_nbytes;
		return 0;
	}
	/* 32 bytes, the HMAC-SHA256 output size: more adds nothing. getrandom
	 * waits only until the kernel's pool is first seeded (early boot). */
	for (size_t got = 0; got < 32;) {
		ssize_t n = getrandom(gz->pad_key + got, 32 - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return MHDGZ_EBACKEND;
		got += (size_t)n;
	}
	gz->pad_key_nbytes = 32;
	return 0;
}

bool
hnd_padded(const struct mhdgz *gz, const struct hnd_entry *e, enum gz_coding coding)
{
	if (coding != GZ_CODING_GZIP)
		return false;
	return e->length_hiding > 0 || (e->length_hiding == 0 && gz->pad_default);
}

void
hnd_pad_begin(const struct mhdgz *gz, char kind, const char *etag, uint64_t limit,
	      struct hnd_pad_ctx *pc)
{
	uint8_t head[5];
	size_t etag_len = etag ? strlen(etag) : 0;

	hmac_sha256_set_key(&pc->h, gz->pad_key_nbytes, gz->pad_key);
	/* Unambiguous input: the kind, the ETag's length and bytes, then the
	 * body, so no two (etag, body) pairs hash the same bytes. */
	head[0] = (uint8_t)kind;
	head[1] = (uint8_t)(etag_len >> 24);
	head[2] = (uint8_t)(etag_len >> 16);
	head[3] = (uint8_t)(etag_len >> 8);
	head[4] = (uint8_t)etag_len;
	hmac_sha256_update(&pc->h, sizeof head, head);
	if (etag_len)
		hmac_sha256_update(&pc->h, etag_len, (const uint8_t *)etag);
	pc->left = limit;
}

void
hnd_pad_update(struct hnd_pad_ctx *pc, const uint8_t *data, size_t len)
{
	if (len > pc->left)
		len = (size_t)pc->left;
	if (len)
		hmac_sha256_update(&pc->h, len, data);
	pc->left -= len;
}

size_t
hnd_pad_end(const struct mhdgz *gz, struct hnd_pad_ctx *pc)
{
	uint8_t d[SHA256_DIGEST_SIZE];
	uint64_t v = 0;

	hmac_sha256_digest(&pc->h, sizeof d, d);
	for (unsigned int i = 0; i < 8; i++)
		v = v << 8 | d[i];
	/* Modulo bias below 2^-47 for pad_max <= 65536: uniform enough. */
	return 1 + (size_t)(v % gz->pad_max);
}

size_t
hnd_pad_of_body(const struct mhdgz *gz, const uint8_t *body, size_t len)
{
	struct hnd_pad_ctx pc;

	hnd_pad_begin(gz, HND_PAD_WHOLE, NULL, UINT64_MAX, &pc);
	hnd_pad_update(&pc, body, len);
	return hnd_pad_end(gz, &pc);
}
