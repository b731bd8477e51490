/* hnd_stats.h: the handle's counters, striped over cache lines. */
#ifndef HND_STATS_H
#define HND_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "gz_backend.h"
#include "hnd_public.h"

/* Counters are striped over this many cache lines so threads of a pool do
 * not bounce one line between cores; reads sum the stripes. */
#ifndef HND_STAT_STRIPES
#define HND_STAT_STRIPES 8
#endif

enum hnd_counter {
	HND_C_RESPONSES,
	HND_C_COMPRESSED,
	HND_C_BYTES_IN,
	HND_C_BYTES_OUT,
	HND_C_COMPRESSIONS,
	HND_C_FAILURES,
	HND_C_CACHE_HITS,
	HND_C_DIGESTS_DROPPED,
	HND_C_PADDED,
	HND_C_DICT_HITS,  /* dcz responses queued (hnd_dict.c) */
	HND_C_DICT_SAVED, /* their bytes under plain zstd's, summed */
	HND_C_REASON0,    /* + enum mhdgz_reason */
	/* + enum gz_coding: coded variants queued per coding */
	HND_C_CODED0 = HND_C_REASON0 + MHDGZ_REASON_COUNT,
	/* Request bodies (hnd_upload.c). */
	HND_C_UPLOADS = HND_C_CODED0 + GZ_CODING_COUNT,
	HND_C_UPLOADS_GZIP,
	HND_C_UPLOAD_BYTES_IN,
	HND_C_UPLOAD_BYTES_OUT,
	HND_C_UPLOAD_REFUSED0, /* + enum mhdgz_upload_refusal */
	/* The store of coded bytes and lengths (hnd_store.c). */
	HND_C_STORE_HITS = HND_C_UPLOAD_REFUSED0 + MHDGZ_UPLOAD_REFUSAL_COUNT,
	HND_C_STORE_MISSES,
	HND_C_STORE_EVICTIONS,
	/* + enum gz_coding: bytes_in and bytes_out of the coded responses */
	HND_C_CODED_IN0,
	HND_C_CODED_OUT0 = HND_C_CODED_IN0 + GZ_CODING_COUNT,
	HND_C_COUNT = HND_C_CODED_OUT0 + GZ_CODING_COUNT
};

struct hnd_stripe {
	_Atomic uint64_t c[HND_C_COUNT];
} __attribute__((aligned(64)));

void hnd_count(struct mhdgz *gz, enum hnd_counter which, uint64_t n);
/* The calling thread's stripe of gz's counters, for several counts in a
 * row (hnd_count finds it in thread-local storage each time, which in a
 * shared library is a call). */
struct hnd_stripe *hnd_stripe_of(struct mhdgz *gz);
static inline void
hnd_count_in(struct hnd_stripe *st, enum hnd_counter which, uint64_t n)
{
	if (n) /* a zero add would still take the cache line */
		atomic_fetch_add_explicit(&st->c[which], n, memory_order_relaxed);
}

#endif /* HND_STATS_H */
