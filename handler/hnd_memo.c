/* hnd_memo.c: gzip lengths remembered by strong ETag, so a 304 or HEAD of a response made per request need not compress. */
#include <string.h>

#include "hnd_negotiate.h"
#include "hnd_memo.h"

/*
 * A strong validator names one exact representation (RFC 9110 section
 * 8.8.1): the same strong ETag and length mean the same identity bytes,
 * and so, at the handle's one backend and level, the same gzip length. An
 * application that makes a response per request (a file opened per
 * request, as gzserve does) would otherwise compress the whole body for
 * every 304 and HEAD just to state the gzip 200's Content-Length.
 *
 * A small direct-mapped table: a slot is overwritten by the next key that
 * hashes to it, so a miss costs one compression, never a wrong length.
 */

static uint64_t
memo_hash(const char *etag, size_t etag_len, uint64_t body_len, enum hnd_memo_mode mode)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	size_t i;

	for (i = 0; i < etag_len; i++) {
		h ^= (uint8_t)etag[i];
		h *= 0x100000001b3ull;
	}
	h ^= body_len * 0x9e3779b97f4a7c15ull;
	/* The mode must reach the low bits the slot index is taken from:
	 * shifted to the top, every mode of one ETag shared a slot (a zstd
	 * length evicted the gzip one). */
	h ^= (uint64_t)mode;
	h *= 0x100000001b3ull;
	return h ^ (h >> 32);
}

/* The ETag as a key: only a strong one that fits. */
static bool
memo_key(const char *etag, size_t *len_ret)
{
	const char *op;
	size_t op_len, len;
	bool weak;

	if (!etag || !hnd_etag_parse(etag, &weak, &op, &op_len) || weak)
		return false;
	len = strlen(etag);
	if (len >= HND_MEMO_ETAG_MAX)
		return false;
	*len_ret = len;
	return true;
}

int
hnd_memo_init(struct hnd_memo *m)
{
	memset(m->slot, 0, sizeof m->slot);
	return pthread_mutex_init(&m->lock, NULL) == 0 ? 0 : MHDGZ_ENOMEM;
}

void
hnd_memo_fini(struct hnd_memo *m)
{
	pthread_mutex_destroy(&m->lock);
}

void
hnd_memo_put(struct hnd_memo *m, const char *etag, uint64_t body_len, enum hnd_memo_mode mode,
	     uint64_t gzip_len)
{
	struct hnd_memo_slot *s;
	size_t len;

	if (!memo_key(etag, &len))
		return;
	s = &m->slot[memo_hash(etag, len, body_len, mode) % HND_MEMO_SLOTS];
	pthread_mutex_lock(&m->lock);
	memcpy(s->etag, etag, len + 1);
	s->body_len = body_len;
	s->mode = (uint8_t)mode;
	s->gzip_len = gzip_len;
	s->used = 1;
	pthread_mutex_unlock(&m->lock);
}

bool
hnd_memo_get(struct hnd_memo *m, const char *etag, uint64_t body_len, enum hnd_memo_mode mode,
	     uint64_t *gzip_len_ret)
{
	struct hnd_memo_slot *s;
	bool hit;
	size_t len;

	if (!memo_key(etag, &len))
		return false;
	s = &m->slot[memo_hash(etag, len, body_len, mode) % HND_MEMO_SLOTS];
	pthread_mutex_lock(&m->lock);
	hit = s->used && s->body_len == body_len && s->mode == (uint8_t)mode &&
	      memcmp(s->etag, etag, len + 1) == 0;
	if (hit)
		*gzip_len_ret = s->gzip_len;
	pthread_mutex_unlock(&m->lock);
	return hit;
}
