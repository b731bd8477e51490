/* gz_pool.c: the compressor pool, a locked LIFO of idle compressors of one (backend, level). */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "gz_error.h"
#include "gz_alloc.h"
#include "gz_backend.h"
#include "gz_pool.h"

/* Largest whole-buffer scratch space (bytes) an idle compressor keeps. The
 * scratch follows the compressor through the pool so a warm compressor
 * allocates nothing; but one large body would otherwise pin its output size
 * in every idle compressor forever. Larger: fewer allocations for big
 * bodies; smaller: less memory held by an idle pool (idle_cap times this). */
#ifndef GZ_POOL_SCRATCH_KEEP_MAX
#define GZ_POOL_SCRATCH_KEEP_MAX (256u * 1024u)
#endif

/* How many idle compressors, from the most recently put, a get looks
 * through for one the calling thread put back itself (see gz_pool_get).
 * Larger: a thread finds its own among more idle ones, in a pool shared by
 * more threads; every step is one more compressor's first cache line read
 * under the lock. 8 covers a thread pool of up to 8 threads in steady state. */
#ifndef GZ_POOL_AFFINITY_SCAN
#define GZ_POOL_AFFINITY_SCAN 8
#endif

/* Input of gz_pool_state_nbytes's measuring stream, in bytes: twice the
 * largest stream window of a coding (zstd's and brotli's 512 KiB), so a
 * compressor that grows its buffers with its input has grown them all. */
#ifndef GZ_POOL_MEASURE_NBYTES
#define GZ_POOL_MEASURE_NBYTES (1024u * 1024u)
#endif

/*
 * Invariants, all under lock:
 *  - idle is the length of the free list and idle <= idle_cap;
 *  - live == misses - discards - trims: every compressor this pool created
 *    and has not freed is either idle or out with a user;
 *  - gets - puts == compressors out with users (given every put matches a
 *    get of this pool);
 *  - the free list runs from the most to the least recently put, and
 *    pool_idle_since_us never increases along it (read under the lock), so
 *    a trim cuts it once: after idle_low entries, at the first entry idle
 *    for the period, everything to the tail goes. A get may unlink an entry
 *    from the middle (its own thread's, see gz_pool_get), which keeps the
 *    order.
 * The lock guards only list links and counters: creating, resetting and
 * freeing a compressor (hundreds of KiB, microseconds) happen outside it, so
 * the critical section is a handful of loads and stores. A get that creates
 * its compressor counts gets/misses/live only once the creation succeeded,
 * so a failed get leaves every counter as it was.
 */
struct gz_pool {
	pthread_mutex_t lock;
	const struct gz_backend *be; /* fixed at creation, read without the lock */
	int level;                   /* native level of be, fixed at creation */
	int window_bits, mem_level;  /* of every compressor (0: default) */
	size_t idle_cap;             /* most compressors kept idle; 0 = pass-through */
	struct gz_compressor *head;  /* free list through pool_next; LIFO, so the
	                              * most recently used (cache-warm) one goes
	                              * out first, unless the caller's own is
	                              * near the head */
	size_t idle_low;             /* trimming keeps this many idle */
	uint64_t trim_period_us;     /* 0: never trim */
	uint64_t next_look_us;       /* a get or put trims from this time on */
	struct gz_pool_stats st;
	_Atomic uint64_t state_nbytes; /* gz_pool_state_nbytes, once measured */
};

/*
 * The calling thread's key: the address of a thread-local byte, unique
 * among the threads alive at one time (a new thread may get the key of one
 * that ended, and with it that thread's compressors: harmless, it is only a
 * preference). Never 0.
 */
static uintptr_t
gz_pool_thread_key(void)
{
	static __thread char me;

	return (uintptr_t)&me;
}

/* CLOCK_MONOTONIC in microseconds; 0 if the clock fails (then nothing is
 * ever old enough to trim). */
static uint64_t
gz_now_us(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/*
 * Under the lock: unlink the idle compressors beyond idle_low that have been
 * idle since now - period or earlier and return them as a list (through
 * pool_next) for the caller to free outside the lock; counts them.
 */
static struct gz_compressor *
gz_pool_cut_locked(struct gz_pool *pool, uint64_t now_us)
{
	struct gz_compressor **link = &pool->head, *cut;
	size_t kept = 0, n = 0;

	pool->next_look_us = now_us + pool->trim_period_us / 4;
	while (*link && (kept < pool->idle_low || now_us < pool->trim_period_us ||
			 (*link)->pool_idle_since_us > now_us - pool->trim_period_us)) {
		link = &(*link)->pool_next;
		kept++;
	}
	cut = *link;
	*link = NULL;
	for (struct gz_compressor *c = cut; c; c = c->pool_next)
		n++;
	pool->st.idle -= n;
	pool->st.live -= n;
	pool->st.trims += n;
	return cut;
}

/* Free a list cut by gz_pool_cut_locked (outside the lock); returns its length. */
static size_t
gz_pool_free_list(struct gz_compressor *c)
{
	size_t n = 0;

	while (c) {
		struct gz_compressor *next = c->pool_next;

		gz_compressor_free(c);
		c = next;
		n++;
	}
	if (n)
		gz_alloc_release_unused();
	return n;
}

int
gz_pool_new(const struct gz_backend *be, int level, size_t idle_cap, struct gz_pool **pool_ret)
{
	return gz_pool_new_win(be, level, 0, 0, idle_cap, pool_ret);
}

int
gz_pool_new_win(const struct gz_backend *be, int level, int window_bits, int mem_level,
		size_t idle_cap, struct gz_pool **pool_ret)
{
	struct gz_pool *pool;

	if (!be || !pool_ret)
		return GZ_EINVAL;
	if ((window_bits != 0 &&
	     (window_bits < GZ_WINDOW_BITS_MIN || window_bits > GZ_WINDOW_BITS_MAX)) ||
	    (mem_level != 0 && (mem_level < GZ_MEM_LEVEL_MIN || mem_level > GZ_MEM_LEVEL_MAX)))
		return GZ_EINVAL;
	/* Checked here, not at the first get, so a bad configuration fails at
	 * set-up rather than on the first request. Never clamped. */
	if (level < be->level_min || level > be->level_max)
		return GZ_EINVAL;
	pool = gz_calloc(1, sizeof *pool);
	if (!pool)
		return GZ_ENOMEM;
	/* pthread_mutex_init fails only for lack of resources (EAGAIN, ENOMEM). */
	if (pthread_mutex_init(&pool->lock, NULL) != 0) {
		gz_free(pool);
		return GZ_ENOMEM;
	}
	pool->be = be;
	pool->level = level;
	pool->window_bits = window_bits;
	pool->mem_level = mem_level;
	pool->idle_cap = idle_cap;
	*pool_ret = pool;
	return 0;
}

/* Text-like bytes (words of a small vocabulary, spaces, newlines) from a
 * seed: matches at every distance, as a page or a log has. */
static void
gz_pool_text(uint8_t *buf, size_t len, uint32_t seed)
{
	static const char *const words[] = { "the ",    "of ", "stream ",     "window ", "value",
					     "\"id\":", "12",  "compressor ", "\n",      "state " };
	size_t off = 0;

	while (off < len) {
		const char *w;

		seed = seed * 1103515245u + 12345u;
		w = words[(seed >> 16) % (sizeof words / sizeof words[0])];
		while (*w && off < len)
			buf[off++] = (uint8_t)*w++;
	}
}

int
gz_pool_state_nbytes(struct gz_pool *pool, uint64_t *nbytes_ret)
{
	uint64_t got = atomic_load_explicit(&pool->state_nbytes, memory_order_relaxed);
	enum { CHUNK = 64 * 1024 };
	uint8_t *in = NULL, *out = NULL;
	struct gz_compressor *c = NULL;
	uint32_t nchunks;
	int rc = GZ_ENOMEM;

	if (got) {
		*nbytes_ret = got;
		return 0;
	}
	if (!(pool->be->caps & GZ_CAP_STREAM))
		return GZ_EINVAL;
	in = gz_malloc(CHUNK);
	out = gz_malloc(CHUNK);
	if (!in || !out)
		goto done;
	gz_alloc_meter_start();
	rc = gz_compressor_new_win(pool->be, pool->level, pool->window_bits, pool->mem_level, &c);
	/* The gzip backends allocate everything when created (stream()
	 * allocates nothing): their stream is empty, microseconds. */
	nchunks = pool->be->coding == GZ_CODING_GZIP ? 0 : GZ_POOL_MEASURE_NBYTES / CHUNK;
	for (uint32_t k = 0; rc >= 0 && k <= nchunks; k++) {
		bool last = k == nchunks;
		struct gz_io io = { in, last ? 0 : CHUNK, out, CHUNK };

		gz_pool_text(in, CHUNK, k);
		do {
			io.out = out;
			io.out_cap = CHUNK;
			rc = pool->be->stream(c, &io, last ? GZ_FLUSH_FINISH : GZ_FLUSH_NONE);
		} while (rc == 0 && (io.in_len > 0 || io.out_cap == 0 || last));
	}
	got = gz_alloc_meter_stop();
	if (rc == GZ_STREAM_END) {
		atomic_store_explicit(&pool->state_nbytes, got, memory_order_relaxed);
		*nbytes_ret = got;
		rc = 0;
	} else if (rc >= 0) {
		rc = GZ_EBACKEND;
	}
done:
	gz_compressor_free(c);
	gz_free(in);
	gz_free(out);
	return rc;
}

int
gz_pool_pair_new(const struct gz_backend *be, int level, size_t idle_cap,
		 struct gz_pool **oneshot_ret, struct gz_pool **stream_ret)
{
	struct gz_pool *oneshot = NULL, *stream = NULL;
	int rc;

	if (!be || !oneshot_ret || !stream_ret)
		return GZ_EINVAL;
	rc = gz_pool_new(be, level, idle_cap, &oneshot);
	if (rc < 0)
		return rc;
	rc = gz_pool_new(gz_stream_backend(be), gz_stream_level(be, level), idle_cap, &stream);
	if (rc < 0) {
		gz_pool_free(oneshot);
		return rc;
	}
	*oneshot_ret = oneshot;
	*stream_ret = stream;
	return 0;
}

void
gz_pool_free(struct gz_pool *pool)
{
	struct gz_compressor *c, *next;

	if (!pool)
		return;
	/* No user may hold a compressor now (contract), so no lock is needed. */
	for (c = pool->head; c; c = next) {
		next = c->pool_next;
		gz_compressor_free(c);
	}
	pthread_mutex_destroy(&pool->lock);
	gz_free(pool);
}

/*
 * Under the lock: unlink and return the idle compressor the thread with key
 * me put back most recently, if it is among the first GZ_POOL_AFFINITY_SCAN;
 * else the head (the most recently put); NULL if none is idle.
 *
 * Why: a compressor's working memory (libdeflate re-initialises its hash
 * tables, part of its 653 KiB at levels 2-9, on every call; zlib's window
 * and tables likewise) sits in the caches of the CPU that last used it. A plain LIFO hands it to whichever
 * thread asks next: with two threads compressing 2 KiB bodies, 16 % of the
 * gets took the other thread's compressor, and such a call cost about
 * 13 microseconds more (bench/README.md, "Parallel rows"). Taking one's
 * own keeps each compressor on one thread while there are enough of them.
 */
static struct gz_compressor *
gz_pool_take_locked(struct gz_pool *pool, uintptr_t me)
{
	struct gz_compressor **link = &pool->head, **take = &pool->head, *c;
	unsigned int k;

	for (k = 0; *link && k < GZ_POOL_AFFINITY_SCAN; k++, link = &(*link)->pool_next) {
		if ((*link)->pool_owner == me) {
			take = link;
			break;
		}
	}
	c = *take;
	if (c)
		*take = c->pool_next;
	return c;
}

int
gz_pool_get(struct gz_pool *pool, struct gz_compressor **c_ret)
{
	struct gz_compressor *c, *old = NULL;
	uintptr_t me = gz_pool_thread_key();
	int rc;

	pthread_mutex_lock(&pool->lock);
	c = gz_pool_take_locked(pool, me);
	if (c) {
		pool->st.idle--;
		pool->st.gets++;
	}
	if (pool->trim_period_us) {
		uint64_t now = gz_now_us();

		if (now >= pool->next_look_us)
			old = gz_pool_cut_locked(pool, now);
	}
	pthread_mutex_unlock(&pool->lock);
	gz_pool_free_list(old);
	if (c) {
		/* Idle compressors were reset when they were put back. */
		c->pool_next = NULL;
		*c_ret = c;
		return 0;
	}

	/* Miss: create outside the lock. A new compressor is at the start of
	 * a member already, so it needs no reset. */
	rc = gz_compressor_new_win(pool->be, pool->level, pool->window_bits, pool->mem_level, &c);
	if (rc < 0)
		return rc;
	c->pool_next = NULL;
	pthread_mutex_lock(&pool->lock);
	pool->st.gets++;
	pool->st.misses++;
	pool->st.live++;
	pthread_mutex_unlock(&pool->lock);
	*c_ret = c;
	return 0;
}

void
gz_pool_put(struct gz_pool *pool, struct gz_compressor *c)
{
	struct gz_compressor *old = NULL;
	int keep;

	if (!c)
		return;
	/*
	 * Reset before the compressor becomes visible to other users, so no
	 * stream state (and none of the previous body) leaks into the next
	 * member. Done here rather than in get so idle compressors hold no
	 * half-finished stream. Pass-through mode frees every compressor and
	 * skips the work. One-shot-only backends leave a compressor reusable
	 * after every compress() and have no reset.
	 */
	keep = pool->idle_cap > 0;
	if (keep && (c->be->caps & GZ_CAP_STREAM))
		keep = c->be->reset(c) == 0;
	if (keep && c->scratch_cap > GZ_POOL_SCRATCH_KEEP_MAX) {
		gz_free(c->scratch);
		c->scratch = NULL;
		c->scratch_cap = 0;
	}

	pthread_mutex_lock(&pool->lock);
	pool->st.puts++;
	if (keep && pool->st.idle < pool->idle_cap) {
		/* Timed under the lock, so the list stays ordered by it. */
		uint64_t now = pool->trim_period_us ? gz_now_us() : 0;

		c->pool_idle_since_us = now;
		c->pool_owner = gz_pool_thread_key();
		c->pool_next = pool->head;
		pool->head = c;
		pool->st.idle++;
		if (pool->trim_period_us && now >= pool->next_look_us)
			old = gz_pool_cut_locked(pool, now);
	} else {
		/* Pool full, pass-through, or reset failed: a compressor we can
		 * not trust is never pooled. All count as discards, which keeps
		 * live == misses - discards - trims. */
		pool->st.discards++;
		pool->st.live--;
		keep = 0;
	}
	pthread_mutex_unlock(&pool->lock);
	if (!keep)
		gz_compressor_free(c);
	gz_pool_free_list(old);
}

int
gz_pool_set_trim(struct gz_pool *pool, size_t idle_low, uint64_t period_us)
{
	if (!pool)
		return GZ_EINVAL;
	pthread_mutex_lock(&pool->lock);
	pool->idle_low = idle_low;
	pool->trim_period_us = period_us;
	pool->next_look_us = 0;
	pthread_mutex_unlock(&pool->lock);
	return 0;
}

size_t
gz_pool_trim(struct gz_pool *pool)
{
	struct gz_compressor *old = NULL;

	if (!pool)
		return 0;
	pthread_mutex_lock(&pool->lock);
	if (pool->trim_period_us)
		old = gz_pool_cut_locked(pool, gz_now_us());
	pthread_mutex_unlock(&pool->lock);
	return gz_pool_free_list(old);
}

void
gz_pool_get_stats(struct gz_pool *pool, struct gz_pool_stats *st)
{
	pthread_mutex_lock(&pool->lock);
	*st = pool->st;
	pthread_mutex_unlock(&pool->lock);
}

const struct gz_backend *
gz_pool_backend(const struct gz_pool *pool)
{
	return pool->be;
}

int
gz_pool_level(const struct gz_pool *pool)
{
	return pool->level;
}
