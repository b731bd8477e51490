/* hnd_stats.c: statistics: striped counters, mhdgz_get_stats, reason names. */

#include "gz_pool.h"
#include "hnd_stats.h"
#include "hnd_store.h"
#include "hnd_handle.h"

static _Thread_local unsigned int hnd_stripe_id = ~0u;
static atomic_uint hnd_stripe_next;

struct hnd_stripe *
hnd_stripe_of(struct mhdgz *gz)
{
	if (hnd_stripe_id == ~0u)
		hnd_stripe_id = atomic_fetch_add(&hnd_stripe_next, 1) % HND_STAT_STRIPES;
	return &gz->stats[hnd_stripe_id];
}

void
hnd_count(struct mhdgz *gz, enum hnd_counter which, uint64_t n)
{
	hnd_count_in(hnd_stripe_of(gz), which, n);
}

static uint64_t
sum(const struct mhdgz *gz, enum hnd_counter which)
{
	uint64_t n = 0;
	unsigned int i;

	for (i = 0; i < HND_STAT_STRIPES; i++)
		n += atomic_load_explicit(&gz->stats[i].c[which], memory_order_relaxed);
	return n;
}

/* Add a pool's counters to st's pool_* sums. */
static void
add_pool(struct mhdgz_stats *st, struct gz_pool *pool)
{
	struct gz_pool_stats ps;

	gz_pool_get_stats(pool, &ps);
	st->pool_gets += ps.gets;
	st->pool_misses += ps.misses;
	st->pool_idle += ps.idle;
	st->pool_trims += ps.trims;
}

MHDGZ_API int
mhdgz_get_stats(const struct mhdgz *gz, struct mhdgz_stats *st)
{
	unsigned int i;
	size_t k;

	if (!gz || !st || st->size != sizeof *st)
		return MHDGZ_EINVAL;
	st->responses = sum(gz, HND_C_RESPONSES);
	st->compressed = sum(gz, HND_C_COMPRESSED);
	for (i = 0; i < MHDGZ_REASON_COUNT; i++)
		st->reasons[i] = sum(gz, HND_C_REASON0 + i);
	st->bytes_in = sum(gz, HND_C_BYTES_IN);
	st->bytes_out = sum(gz, HND_C_BYTES_OUT);
	st->compressions = sum(gz, HND_C_COMPRESSIONS);
	st->failures = sum(gz, HND_C_FAILURES);
	st->cache_hits = sum(gz, HND_C_CACHE_HITS);
	st->digests_dropped = sum(gz, HND_C_DIGESTS_DROPPED);
	st->padded = sum(gz, HND_C_PADDED);
	st->dict_hits = sum(gz, HND_C_DICT_HITS);
	st->dict_bytes_saved = sum(gz, HND_C_DICT_SAVED);
	st->uploads = sum(gz, HND_C_UPLOADS);
	st->uploads_gzip = sum(gz, HND_C_UPLOADS_GZIP);
	st->upload_bytes_in = sum(gz, HND_C_UPLOAD_BYTES_IN);
	st->upload_bytes_out = sum(gz, HND_C_UPLOAD_BYTES_OUT);
	for (i = 0; i < MHDGZ_UPLOAD_REFUSAL_COUNT; i++)
		st->uploads_refused[i] = sum(gz, HND_C_UPLOAD_REFUSED0 + i);
	st->store_hits = sum(gz, HND_C_STORE_HITS);
	st->store_misses = sum(gz, HND_C_STORE_MISSES);
	st->store_evictions = sum(gz, HND_C_STORE_EVICTIONS);
	st->store_nbytes = hnd_store_held(&gz->store);
	st->coder_nbytes = atomic_load(&gz->coder_live);
	st->pool_gets = st->pool_misses = st->pool_idle = st->pool_trims = 0;
	/* gzip's pools: whole bodies, streams, low-latency streams. */
	add_pool(st, gz->pool);
	add_pool(st, gz->stream_pool);
	add_pool(st, gz->event_pool);
	for (k = 0; k < GZ_CODING_COUNT; k++) {
		st->coded[k] = sum(gz, HND_C_CODED0 + (unsigned int)k);
		st->coded_bytes_in[k] = sum(gz, HND_C_CODED_IN0 + (unsigned int)k);
		st->coded_bytes_out[k] = sum(gz, HND_C_CODED_OUT0 + (unsigned int)k);
		if (k == GZ_CODING_GZIP || !gz->coder[k].pool)
			continue; /* gzip's pools are counted above */
		add_pool(st, gz->coder[k].pool);
		add_pool(st, gz->coder[k].stream_pool);
	}
	return 0;
}

static const char *const hnd_reason_names[MHDGZ_REASON_COUNT] = {
	[MHDGZ_COMPRESSED] = "compressed",
	[MHDGZ_SKIP_UNTRACKED] = "untracked",
	[MHDGZ_SKIP_OPT_OUT] = "opt-out",
	[MHDGZ_SKIP_STATUS] = "status",
	[MHDGZ_SKIP_RANGE] = "range",
	[MHDGZ_SKIP_ENCODED] = "encoded",
	[MHDGZ_SKIP_NO_TRANSFORM] = "no-transform",
	[MHDGZ_SKIP_EMPTY] = "empty",
	[MHDGZ_SKIP_TYPE] = "type",
	[MHDGZ_SKIP_NOT_ACCEPTED] = "not-accepted",
	[MHDGZ_SKIP_SMALL] = "small",
	[MHDGZ_SKIP_NOT_SMALLER] = "not-smaller",
	[MHDGZ_SKIP_ERROR] = "error",
	[MHDGZ_SKIP_MEMORY] = "memory",
};

MHDGZ_API const char *
mhdgz_reason_name(enum mhdgz_reason reason)
{
	if ((unsigned int)reason >= MHDGZ_REASON_COUNT)
		return "unknown";
	return hnd_reason_names[reason];
}
