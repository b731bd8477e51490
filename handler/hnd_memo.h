/* hnd_memo.h: coded lengths by strong ETag. */
#ifndef HND_MEMO_H
#define HND_MEMO_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gz_backend.h"

/* hnd_memo.c: gzip lengths by strong ETag (see there). Slots of the
 * table, and the longest ETag remembered, in bytes. */
#ifndef HND_MEMO_SLOTS
#define HND_MEMO_SLOTS 64
#endif
#define HND_MEMO_ETAG_MAX 128

/* Which gzip bytes a length is of: compressed whole, or a stream (of a
 * file: HND_FD_BLOCK input blocks), flushed per block or not. */
enum hnd_memo_mode { HND_MEMO_WHOLE, HND_MEMO_STREAM, HND_MEMO_STREAM_LL };

/* The memo's mode of a coding's bytes, padded by length hiding or not:
 * the modes above for unpadded gzip, shifted per other coding, and apart
 * again when padded (length hiding is per response, so one ETag may name a
 * padded and an unpadded length), so that each is remembered apart. */
#define HND_MEMO_MODE(mode, coding, padded)                                                        \
	((enum hnd_memo_mode)((unsigned int)(mode) + 4u * (unsigned int)(coding) +                 \
			      ((padded) ? 16u : 0u)))

/* What the gzip length is when gzip was found not smaller (identity 200). */
#define HND_MEMO_NOT_SMALLER UINT64_MAX

struct hnd_memo_slot {
	uint64_t body_len, gzip_len;
	uint8_t mode, used;
	char etag[HND_MEMO_ETAG_MAX];
};

struct hnd_memo {
	pthread_mutex_t lock;
	struct hnd_memo_slot slot[HND_MEMO_SLOTS];
};

int hnd_memo_init(struct hnd_memo *m);
void hnd_memo_fini(struct hnd_memo *m);
/* Remember, or look up, the gzip length of the representation named by a
 * strong etag with body_len identity bytes; a weak, absent or too long ETag
 * is never remembered. Thread-safe. */
void hnd_memo_put(struct hnd_memo *m, const char *etag, uint64_t body_len, enum hnd_memo_mode mode,
		  uint64_t gzip_len);
bool hnd_memo_get(struct hnd_memo *m, const char *etag, uint64_t body_len, enum hnd_memo_mode mode,
		  uint64_t *gzip_len_ret);

#endif /* HND_MEMO_H */
