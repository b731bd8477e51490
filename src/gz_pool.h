/* gz_pool.h: the compressor pool, ready compressors per (backend, level). */
#ifndef GZ_POOL_H
#define GZ_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "gz_backend.h"

/*
 * A thread-safe pool of idle compressors of one backend at one level: the C
 * counterpart of the sync.Pool in Go's gziphandler. Creating a compressor
 * costs hundreds of KiB and tens of microseconds (see DESIGN.md, "Why a compressor pool"),
 * so a request takes a ready one and gives it back.
 *
 * gz_pool_get returns a compressor ready for a new gzip member (stream state
 * reset), allocating only when no idle one is left (a miss). gz_pool_put
 * returns it; when idle_cap compressors are already idle it is freed instead.
 * idle_cap == 0 is pass-through mode (get always allocates, put always frees),
 * so AddressSanitizer and valgrind see every lifetime.
 *
 * Trimming (gz_pool_set_trim; off by default): a burst leaves up to
 * idle_cap compressors idle, hundreds of KiB each. Those beyond the low
 * watermark idle_low that have been idle for period_us are freed, least
 * recently used first, and the heap's free pages given back
 * (gz_alloc_release_unused). There is no thread: the pool looks at most
 * every period_us / 4 during a get or put, and gz_pool_trim looks now, for
 * a server that goes quiet after a burst (no get or put to notice). So a
 * compressor idle for period_us is freed by the first get, put or
 * gz_pool_trim at least period_us / 4 after that, or at gz_pool_free.
 */
struct gz_pool;

struct gz_pool_stats {
	uint64_t gets;     /* gz_pool_get calls that returned a compressor */
	uint64_t misses;   /* gets that had to create a compressor */
	uint64_t puts;     /* gz_pool_put calls */
	uint64_t discards; /* puts that freed the compressor (pool full) */
	uint64_t idle;     /* compressors idle in the pool now */
	uint64_t live;     /* compressors created and not yet freed */
	uint64_t trims;    /* idle compressors freed by trimming */
};

/* Create a pool. Returns 0 and *pool_ret, GZ_EINVAL (bad level, NULL
 * backend), GZ_ENOMEM. No compressor is created until the first get. */
int gz_pool_new(const struct gz_backend *be, int level, size_t idle_cap, struct gz_pool **pool_ret);
/* gz_pool_new whose compressors have stream memory settings window_bits
 * and mem_level (gz_compressor_new_win; 0 = default). GZ_EINVAL also for
 * a value out of range. */
int gz_pool_new_win(const struct gz_backend *be, int level, int window_bits, int mem_level,
		    size_t idle_cap, struct gz_pool **pool_ret);
/* The two pools a user of (be, level) needs: one-shot compressors of be,
 * and streaming compressors of gz_stream_backend(be) at gz_stream_level()
 * (gz_backend.h). Always two pools, also when be streams itself: a
 * stream's compressor and a whole body's never wait for each other.
 * Returns 0, or GZ_EINVAL / GZ_ENOMEM with nothing left allocated. */
int gz_pool_pair_new(const struct gz_backend *be, int level, size_t idle_cap,
		     struct gz_pool **oneshot_ret, struct gz_pool **stream_ret);
/* Free the pool and its idle compressors. Compressors still out (taken and
 * not put back) must be put back before; NULL is a no-op. */
void gz_pool_free(struct gz_pool *pool);

/* Take a compressor. Returns 0 and *c_ret, or GZ_ENOMEM / GZ_EBACKEND
 * when a new one could not be created. Thread-safe. */
int gz_pool_get(struct gz_pool *pool, struct gz_compressor **c_ret);
/* Give a compressor back (NULL is a no-op). A compressor whose last
 * operation failed may be put back: it is reset or freed. Thread-safe. */
void gz_pool_put(struct gz_pool *pool, struct gz_compressor *c);

/* Trim idle compressors beyond idle_low once idle for period_us
 * (microseconds; 0 = never, the default). idle_low above idle_cap acts as
 * idle_cap. Returns 0, or GZ_EINVAL for a NULL pool. Thread-safe; takes
 * effect at the next look (get, put or gz_pool_trim); compressors put back
 * while trimming was off count as idle since ever. */
int gz_pool_set_trim(struct gz_pool *pool, size_t idle_low, uint64_t period_us);
/* Free now the idle compressors trimming would free (beyond idle_low, idle
 * for the period); returns how many. Nothing when trimming is off or pool
 * is NULL. Thread-safe. */
size_t gz_pool_trim(struct gz_pool *pool);

/* Snapshot of the counters. Thread-safe. */
void gz_pool_get_stats(struct gz_pool *pool, struct gz_pool_stats *st);

/*
 * The most bytes a streaming compressor of this pool holds over a stream:
 * measured once per pool (then remembered) by the allocator's meter
 * (gz_alloc_meter_start) across a fresh compressor's creation and a
 * stream of 1 MiB of text-like bytes to its end (an empty one for the
 * gzip backends, which allocate nothing after their creation), the peak
 * of its live blocks. The compressor is freed, not pooled. Returns 0, GZ_EINVAL for a pool whose backend does not stream,
 * GZ_ENOMEM or GZ_EBACKEND. Thread-safe (two first calls at once both
 * measure, the same figure).
 */
int gz_pool_state_nbytes(struct gz_pool *pool, uint64_t *nbytes_ret);

const struct gz_backend *gz_pool_backend(const struct gz_pool *pool);
int gz_pool_level(const struct gz_pool *pool);

#endif /* GZ_POOL_H */
