/* hnd_handle.h: the handle: its options, coders, pools, table, caches and counters. */
#ifndef HND_HANDLE_H
#define HND_HANDLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gz_backend.h"
#include "gz_pool.h"
#include "hnd_entry.h"
#include "hnd_filecache.h"
#include "hnd_memo.h"
#include "hnd_mtype.h"
#include "hnd_plan.h"
#include "hnd_public.h"
#include "hnd_stats.h"

/* Default idle cap of the compressor pool: enough for a thread pool of 16
 * workers to never miss, while bounding idle memory (zlib level 6 state is
 * ~268 KiB, libdeflate's up to ~1 MiB at level 10-12). */
#ifndef HND_POOL_IDLE_CAP
#define HND_POOL_IDLE_CAP 16
#endif

/* The cache line size the layout of struct mhdgz assumes (x86-64, most
 * arm64 cores); mhdgz_new allocates the handle aligned to it. */
#define HND_CACHELINE 64
#define HND_LINE_ALIGNED __attribute__((aligned(HND_CACHELINE)))


/* A content coding the handle offers: its backend, level and pools. For
 * gzip, the pools are the handle's own pool and stream_pool (not owned
 * here); for the others, created by mhdgz_new and owned here. */
struct hnd_coder {
	const struct gz_backend *be; /* NULL: not offered */
	int level;
	struct gz_pool *pool;        /* whole buffers */
	struct gz_pool *stream_pool; /* streams */
};

/*
 * Layout: what every response writes, from whichever thread serves it, sits
 * on cache lines of its own, apart from the settings every response reads:
 * refs (each entry's creation and release), table (its lock and count, at
 * each creation, lookup and release), memo and filecache (their locks, for
 * responses with a strong ETag or from a file), stats (striped). Sharing a
 * line, each such write would evict the settings from the other CPUs'
 * caches (false sharing): with two threads, misses on every response
 * (bench/README.md, "Parallel rows"). The handle itself is allocated
 * HND_CACHELINE-aligned (mhdgz_new) so the lines are where the layout says.
 */
struct mhdgz {
	/* 1 for the application until mhdgz_free, plus 1 per live entry: the
	 * handle outlives every response made through it. */
	atomic_uint refs;
	/* Frees the handle at the last reference's drop (hnd_api.c sets it:
	 * entries and uploads, below it, hold references). */
	void (*destroy)(struct mhdgz *gz);
	void *alloc; /* the block gz_calloc returned, the handle aligned within it */
	const struct gz_backend *be HND_LINE_ALIGNED;
	int level;
	enum mhdgz_etag_policy etag_policy;
	struct hnd_policy policy;    /* what the plan reads */
	struct gz_pool *pool;        /* whole-buffer (one-shot) compressors */
	struct gz_pool *stream_pool; /* streaming compressors (stream_window_bits) */
	struct gz_pool *event_pool;  /* low-latency streams' (event_window_bits) */
	struct hnd_table table HND_LINE_ALIGNED;
	struct hnd_memo memo HND_LINE_ALIGNED;
	bool memo_ready;
	/* off unless options limits.store_nbytes */
	struct hnd_filecache filecache HND_LINE_ALIGNED;
	/* BREACH length hiding (hnd_pad.c): on for every response unless a
	 * response says otherwise; padding of 1..pad_max bytes; the HMAC key. */
	bool pad_default HND_LINE_ALIGNED;
	size_t pad_max;
	size_t pad_key_nbytes;
	uint8_t pad_key[MHDGZ_LENGTH_HIDING_KEY_MAX];
	struct hnd_stripe stats[HND_STAT_STRIPES];
	/* The live streams' compressor budget (options coder_nbytes;
	 * UINT64_MAX: none) and the charges held now (hnd_coder_charge,
	 * hnd_stream.h). */
	uint64_t coder_budget;
	_Atomic uint64_t coder_live HND_LINE_ALIGNED;
	struct hnd_coder coder[GZ_CODING_COUNT];
	/* Compression dictionaries (hnd_dict.c): newest first, published
	 * with a release store; never removed before the handle is freed. */
	_Atomic(struct mhdgz_dictionary *) dicts;
};

/* The pool of coding's whole-buffer (stream false) or stream compressors. */
static inline struct gz_pool *
hnd_pool(const struct mhdgz *gz, enum gz_coding coding, bool stream)
{
	return stream ? gz->coder[coding].stream_pool : gz->coder[coding].pool;
}

/* The pool of a coding's streams: for gzip, low-latency streams have
 * their own (smaller windows: event_window_bits, event_mem_level). */
static inline struct gz_pool *
hnd_stream_pool(const struct mhdgz *gz, enum gz_coding coding, bool low_latency)
{
	if (coding == GZ_CODING_GZIP && low_latency)
		return gz->event_pool;
	return hnd_pool(gz, coding, true);
}

/* Take or drop a reference to the handle; the last drop frees it. */
static inline void
hnd_gz_ref(struct mhdgz *gz)
{
	atomic_fetch_add_explicit(&gz->refs, 1, memory_order_relaxed);
}

static inline void
hnd_gz_unref(struct mhdgz *gz)
{
	/* acq_rel: whatever a response's last user did happens before the
	 * handle is freed by whoever drops the last reference. */
	if (atomic_fetch_sub_explicit(&gz->refs, 1, memory_order_acq_rel) == 1)
		gz->destroy(gz);
}

#endif /* HND_HANDLE_H */
