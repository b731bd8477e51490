/* hnd_pad.h: BREACH length hiding: the padding of a gzip member, keyed by HMAC. */
#ifndef HND_PAD_H
#define HND_PAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nettle/hmac.h>

#include "gz_backend.h"

struct mhdgz;
struct hnd_entry;

/* Bytes of a stream's body its padding is keyed on (with its ETag): a
 * stream's gzip header, which carries the padding, is held back until this
 * many bytes (or the whole body) have been read. More covers more of a
 * page, at the cost of that much memory per stream while it is read and of
 * first-byte latency for a slow producer. */
#ifndef HND_PAD_KEY_NBYTES
#define HND_PAD_KEY_NBYTES (64 * 1024)
#endif

/* What the key covers: a whole body, or a stream's first bytes. */
#define HND_PAD_WHOLE 'W'
#define HND_PAD_STREAM 'S'

struct hnd_pad_ctx {
	struct hmac_sha256_ctx h;
	uint64_t left; /* body bytes still to be keyed */
};

/* The handle's key: a copy of key[0..key_nbytes), or 32 bytes of
 * getrandom() for NULL. 0, MHDGZ_EINVAL (bad size), MHDGZ_EBACKEND. */
int hnd_pad_key_init(struct mhdgz *gz, const void *key, size_t key_nbytes);
/* Whether e's bytes in coding carry padding (its setting or the handle's;
 * gzip only: the padding is a gzip header field). */
bool hnd_padded(const struct mhdgz *gz, const struct hnd_entry *e, enum gz_coding coding);
/* The padding length, 1..gz->pad_max: HMAC-SHA256 under the handle's key of
 * kind, etag (may be NULL) and the first limit bytes given to update. */
void hnd_pad_begin(const struct mhdgz *gz, char kind, const char *etag, uint64_t limit,
		   struct hnd_pad_ctx *pc);
void hnd_pad_update(struct hnd_pad_ctx *pc, const uint8_t *data, size_t len);
size_t hnd_pad_end(const struct mhdgz *gz, struct hnd_pad_ctx *pc);
/* The same for a whole body (kind HND_PAD_WHOLE, no ETag). */
size_t hnd_pad_of_body(const struct mhdgz *gz, const uint8_t *body, size_t len);

#endif /* HND_PAD_H */
