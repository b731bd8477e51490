/* hnd_api.c: handler lifetime and options, version, backends, errors and the allocator hook. */
#include <string.h>
#include <strings.h>

#include "gz_alloc.h"
#include "gz_error.h"
#include "gz_pool.h"
#include "hnd_mtype.h"
#include "hnd_entry.h"
#include "hnd_memo.h"
#include "hnd_filecache.h"
#include "hnd_handle.h"
#include "hnd_pad.h"
#include "hnd_dict.h"

/* The core's vocabulary is its own; the public values are the same. */
_Static_assert(MHDGZ_OK == GZ_OK && MHDGZ_ENOMEM == GZ_ENOMEM && MHDGZ_EINVAL == GZ_EINVAL &&
		       MHDGZ_EBACKEND == GZ_EBACKEND && MHDGZ_ENOSPC == GZ_ENOSPC &&
		       MHDGZ_ENOTSUP == GZ_ENOTSUP && MHDGZ_EBUSY == GZ_EBUSY,
	       "MHDGZ_E* and GZ_E* agree");
_Static_assert(MHDGZ_BACKEND_ZLIB == GZ_ID_ZLIB && MHDGZ_BACKEND_LIBDEFLATE == GZ_ID_LIBDEFLATE &&
		       MHDGZ_BACKEND_ISAL == GZ_ID_ISAL,
	       "enum mhdgz_backend and GZ_ID_* agree");
_Static_assert(MHDGZ_CODING_GZIP == (int)GZ_CODING_GZIP &&
		       MHDGZ_CODING_ZSTD == (int)GZ_CODING_ZSTD &&
		       MHDGZ_CODING_BR == (int)GZ_CODING_BR &&
		       MHDGZ_CODING_COUNT == (int)GZ_CODING_COUNT,
	       "enum mhdgz_coding and enum gz_coding agree");

/* Names of the backends the public enum knows, compiled in or not (so
 * that mhdgz_backend_from_name can tell unknown from not compiled in). */
static const char *const hnd_backend_names[] = {
	[MHDGZ_BACKEND_ZLIB] = "zlib",
	[MHDGZ_BACKEND_LIBDEFLATE] = "libdeflate",
	[MHDGZ_BACKEND_ISAL] = "isal",
};

#define HND_NBACKENDS (sizeof hnd_backend_names / sizeof hnd_backend_names[0])

static const struct gz_backend *
backend_of(enum mhdgz_backend b)
{
	if (b == MHDGZ_BACKEND_DEFAULT)
		return gz_backend_default();
	return gz_backend_by_id((int)b);
}

MHDGZ_API const char *
mhdgz_version(void)
{
	return MHDGZ_VERSION_STRING;
}

MHDGZ_API int
mhdgz_backend_available(enum mhdgz_backend backend)
{
	return backend_of(backend) != NULL;
}

MHDGZ_API const char *
mhdgz_backend_name(enum mhdgz_backend backend)
{
	if (backend == MHDGZ_BACKEND_DEFAULT)
		return gz_backend_default()->name;
	if ((unsigned int)backend >= HND_NBACKENDS)
		return NULL;
	return hnd_backend_names[backend];
}

MHDGZ_API int
mhdgz_backend_from_name(const char *name, enum mhdgz_backend *backend_ret)
{
	unsigned int b;

	if (!name || !backend_ret)
		return MHDGZ_EINVAL;
	for (b = 1; b < HND_NBACKENDS; b++) {
		if (hnd_backend_names[b] && strcasecmp(name, hnd_backend_names[b]) == 0) {
			if (!backend_of((enum mhdgz_backend)b))
				return MHDGZ_ENOTSUP;
			*backend_ret = (enum mhdgz_backend)b;
			return 0;
		}
	}
	return MHDGZ_EINVAL;
}

MHDGZ_API int
mhdgz_backend_levels(enum mhdgz_backend backend, int *min_ret, int *max_ret, int *default_ret)
{
	const struct gz_backend *be = backend_of(backend);

	if (!be)
		return MHDGZ_ENOTSUP;
	if (min_ret)
		*min_ret = be->level_min;
	if (max_ret)
		*max_ret = be->level_max;
	if (default_ret)
		*default_ret = be->level_default;
	return 0;
}

MHDGZ_API int
mhdgz_coding_available(enum mhdgz_coding coding)
{
	return (unsigned int)coding < GZ_CODING_COUNT &&
	       gz_backend_for_coding((enum gz_coding)coding) != NULL;
}

MHDGZ_API const char *
mhdgz_coding_name(enum mhdgz_coding coding)
{
	return gz_coding_name((enum gz_coding)coding);
}

MHDGZ_API int
mhdgz_coding_levels(enum mhdgz_coding coding, int *min_ret, int *max_ret, int *default_ret)
{
	const struct gz_backend *be;

	if ((unsigned int)coding >= GZ_CODING_COUNT)
		return MHDGZ_EINVAL;
	be = gz_backend_for_coding((enum gz_coding)coding);
	if (!be)
		return MHDGZ_ENOTSUP;
	if (min_ret)
		*min_ret = be->level_min;
	if (max_ret)
		*max_ret = be->level_max;
	if (default_ret)
		*default_ret = be->level_default;
	return 0;
}

/* Parse struct mhdgz_options codings into gz->policy.order: 0, MHDGZ_EINVAL or
 * MHDGZ_ENOTSUP (see mhdgz.h). */
static int
parse_codings(struct mhdgz *gz, const char *list)
{
	const char *p = list;
	bool seen[GZ_CODING_COUNT] = { false };

	gz->policy.norder = 0;
	if (!list) {
		/* The default: zstd first where built (the fastest coding for
		 * the clients that ask for it; bench/README.md, "What the
		 * figures decided"), then gzip, which every client takes. */
		if (gz_backend_for_coding(GZ_CODING_ZSTD))
			gz->policy.order[gz->policy.norder++] = GZ_CODING_ZSTD;
		gz->policy.order[gz->policy.norder++] = GZ_CODING_GZIP;
		return 0;
	}
	for (;;) {
		size_t len;
		enum gz_coding k;

		while (*p == ' ' || *p == '\t')
			p++;
		len = strcspn(p, ", \t");
		for (k = 0; k < GZ_CODING_COUNT; k++)
			if (len == strlen(gz_coding_name(k)) &&
			    strncasecmp(p, gz_coding_name(k), len) == 0)
				break;
		if (k == GZ_CODING_COUNT || seen[k])
			return MHDGZ_EINVAL;
		if (!gz_backend_for_coding(k))
			return MHDGZ_ENOTSUP;
		seen[k] = true;
		gz->policy.order[gz->policy.norder++] = k;
		p += len;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			return 0;
		if (*p != ',')
			return MHDGZ_EINVAL;
		p++;
	}
}

/* Backend, level and pools of the codings other than gzip that are
 * offered; a level out of range is refused even when its coding is not
 * offered (never clamped, never silently ignored). */
static int
coders_init(struct mhdgz *gz, const struct mhdgz_options *o, size_t cap)
{
	const int levels[GZ_CODING_COUNT] = {
		[GZ_CODING_ZSTD] = o->zstd_level, [GZ_CODING_BR] = o->br_level
	};
	size_t i;
	int rc;

	gz->coder[GZ_CODING_GZIP] = (struct hnd_coder){
		.be = gz->be, .level = gz->level, .pool = gz->pool, .stream_pool = gz->stream_pool
	};
	for (i = 0; i < GZ_CODING_COUNT; i++) {
		const struct gz_backend *be = gz_backend_for_coding((enum gz_coding)i);

		if (i == GZ_CODING_GZIP || levels[i] == 0)
			continue;
		if (!be)
			return MHDGZ_ENOTSUP;
		if (levels[i] < be->level_min || levels[i] > be->level_max)
			return MHDGZ_EINVAL;
	}
	for (i = 0; i < gz->policy.norder; i++) {
		enum gz_coding k = gz->policy.order[i];
		struct hnd_coder *cd = &gz->coder[k];

		if (k == GZ_CODING_GZIP)
			continue;
		cd->be = gz_backend_for_coding(k);
		cd->level = levels[k] ? levels[k] : cd->be->level_default;
		rc = gz_pool_pair_new(cd->be, cd->level, cap, &cd->pool, &cd->stream_pool);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Free a handle and everything it holds (the last reference is gone, or
 * mhdgz_new failed half way). */
static void
handle_destroy(struct mhdgz *gz)
{
	size_t k;

	if (!gz)
		return;
	for (k = 0; k < GZ_CODING_COUNT; k++) {
		if (k == GZ_CODING_GZIP) /* the handle's own pools, below */
			continue;
		gz_pool_free(gz->coder[k].stream_pool);
		gz_pool_free(gz->coder[k].pool);
	}
	hnd_table_fini(&gz->table);
	if (gz->memo_ready)
		hnd_memo_fini(&gz->memo);
	gz_pool_free(gz->event_pool);
	hnd_fc_fini(&gz->filecache);
	hnd_dicts_free(gz);
	gz_pool_free(gz->stream_pool);
	gz_pool_free(gz->pool);
	hnd_typelist_fini(&gz->policy.compress_types);
	hnd_typelist_fini(&gz->policy.skip_types);
	gz_free(gz->alloc);
}

MHDGZ_API int
mhdgz_new(const struct mhdgz_options *opts, struct mhdgz **gz_ret)
{
	struct mhdgz_options o;
	struct mhdgz *gz;
	void *block;
	size_t cap;
	int rc;

	if (!gz_ret)
		return MHDGZ_EINVAL;
	memset(&o, 0, sizeof o);
	if (opts) {
		if (opts->size != sizeof o)
			return MHDGZ_EINVAL;
		o = *opts;
	}
	if ((unsigned int)o.backend >= HND_NBACKENDS ||
	    (unsigned int)o.etag_policy > MHDGZ_ETAG_KEEP)
		return MHDGZ_EINVAL;
	/* Aligned to HND_CACHELINE, which the layout of struct mhdgz needs
	 * and the allocator (malloc's 16 bytes) does not promise. */
	block = gz_calloc(1, sizeof *gz + HND_CACHELINE - 1);
	if (!block)
		return MHDGZ_ENOMEM;
	gz = (struct mhdgz *)(((uintptr_t)block + HND_CACHELINE - 1) &
			      ~(uintptr_t)(HND_CACHELINE - 1));
	gz->alloc = block;
	atomic_init(&gz->refs, 1);
	gz->destroy = handle_destroy;
	gz->be = backend_of(o.backend);
	if (!gz->be) {
		rc = MHDGZ_ENOTSUP;
		goto fail;
	}
	gz->level = o.level != 0 ? o.level : gz->be->level_default;
	if (gz->level < gz->be->level_min || gz->level > gz->be->level_max) {
		rc = MHDGZ_EINVAL;
		goto fail;
	}
	if (!(gz->be->caps & GZ_CAP_ONESHOT)) {
		rc = MHDGZ_ENOTSUP;
		goto fail;
	}
	gz->policy.min_nbytes = o.min_nbytes ? o.min_nbytes : MHDGZ_DEFAULT_MIN_NBYTES;
	gz->etag_policy = o.etag_policy;
	gz->policy.content_digest = (o.flags & MHDGZ_F_CONTENT_DIGEST) != 0;
	gz->pad_default = (o.flags & MHDGZ_F_LENGTH_HIDING) != 0;
	gz->pad_max = o.length_hiding_max ? o.length_hiding_max : MHDGZ_DEFAULT_LENGTH_HIDING_MAX;
	if (gz->pad_max > MHDGZ_LENGTH_HIDING_MAX_LIMIT) {
		rc = MHDGZ_EINVAL;
		goto fail;
	}
	rc = hnd_pad_key_init(gz, o.length_hiding_key, o.length_hiding_key_nbytes);
	if (rc < 0)
		goto fail;
	rc = hnd_typelist_init(&gz->policy.compress_types,
			       o.compress_types ? o.compress_types : hnd_default_compress_types);
	if (rc < 0)
		goto fail;
	rc = hnd_typelist_init(&gz->policy.skip_types,
			       o.skip_types ? o.skip_types : hnd_default_skip_types);
	if (rc < 0)
		goto fail;
	cap = (o.flags & MHDGZ_F_NO_POOL) ? 0
	      : o.pool_idle_cap           ? o.pool_idle_cap
					  : HND_POOL_IDLE_CAP;
	/* Three pools: whole bodies; streams; low-latency streams, whose
	 * compressors are smaller (event_window_bits). Streams of a
	 * whole-buffer backend are zlib's (gz_stream_backend). */
	rc = gz_pool_new(gz->be, gz->level, cap, &gz->pool);
	if (rc < 0)
		goto fail;
	rc = gz_pool_new_win(gz_stream_backend(gz->be), gz_stream_level(gz->be, gz->level),
			     o.stream_window_bits, o.stream_mem_level, cap, &gz->stream_pool);
	if (rc < 0)
		goto fail;
	rc = gz_pool_new_win(gz_stream_backend(gz->be), gz_stream_level(gz->be, gz->level),
			     o.event_window_bits ? o.event_window_bits
						 : MHDGZ_DEFAULT_EVENT_WINDOW_BITS,
			     o.event_mem_level ? o.event_mem_level : MHDGZ_DEFAULT_EVENT_MEM_LEVEL,
			     cap, &gz->event_pool);
	if (rc < 0)
		goto fail;
	/* The other codings' pools (zstd, br: whole bodies and streams). */
	rc = parse_codings(gz, o.codings);
	if (rc < 0)
		goto fail;
	rc = coders_init(gz, &o, cap);
	if (rc < 0)
		goto fail;
	if (o.pool_trim_ms != MHDGZ_POOL_TRIM_NEVER) {
		size_t low = o.pool_idle_low ? o.pool_idle_low : MHDGZ_DEFAULT_POOL_IDLE_LOW;
		uint64_t period_us = (uint64_t)(o.pool_trim_ms ? o.pool_trim_ms
							       : MHDGZ_DEFAULT_POOL_TRIM_MS) *
				     1000u;

		/* Cannot fail: the pools exist. */
		gz_pool_set_trim(gz->pool, low, period_us);
		gz_pool_set_trim(gz->stream_pool, low, period_us);
		gz_pool_set_trim(gz->event_pool, low, period_us);
		for (size_t k = 0; k < GZ_CODING_COUNT; k++) {
			if (k == GZ_CODING_GZIP || !gz->coder[k].pool)
				continue;
			gz_pool_set_trim(gz->coder[k].pool, low, period_us);
			gz_pool_set_trim(gz->coder[k].stream_pool, low, period_us);
		}
	}
	rc = hnd_table_init(&gz->table);
	if (rc < 0)
		goto fail;
	rc = hnd_memo_init(&gz->memo);
	if (rc < 0)
		goto fail;
	gz->memo_ready = true;
	rc = hnd_fc_init(&gz->filecache, o.file_cache_nbytes);
	if (rc < 0)
		goto fail;
	*gz_ret = gz;
	return 0;
fail:
	handle_destroy(gz);
	return rc;
}


MHDGZ_API size_t
mhdgz_trim(struct mhdgz *gz)
{
	if (!gz)
		return 0;
	size_t n = gz_pool_trim(gz->pool) + gz_pool_trim(gz->stream_pool) +
		   gz_pool_trim(gz->event_pool);

	for (size_t k = 0; k < GZ_CODING_COUNT; k++)
		if (k != GZ_CODING_GZIP && gz->coder[k].pool)
			n += gz_pool_trim(gz->coder[k].pool) +
			     gz_pool_trim(gz->coder[k].stream_pool);
	return n;
}

MHDGZ_API void
mhdgz_free(struct mhdgz *gz)
{
	if (gz)
		hnd_gz_unref(gz);
}

MHDGZ_API size_t
mhdgz_get_codings(const struct mhdgz *gz, enum mhdgz_coding *order_ret, size_t order_cap)
{
	if (!gz)
		return 0;
	for (size_t i = 0; i < gz->policy.norder && i < order_cap; i++)
		order_ret[i] = (enum mhdgz_coding)gz->policy.order[i];
	return gz->policy.norder;
}

MHDGZ_API const char *
mhdgz_strerror(int err)
{
	const char *msg = gz_strerror(err);

	if (msg)
		return msg;
	return err == MHDGZ_EMHD ? "libmicrohttpd refused a call" : "unknown error";
}

MHDGZ_API int
mhdgz_set_allocator(const struct mhdgz_allocator *alloc)
{
	if (!alloc)
		return gz_alloc_set_hook(NULL, NULL, NULL);
	if (alloc->size != sizeof *alloc || !alloc->malloc_fn || !alloc->free_fn)
		return MHDGZ_EINVAL;
	return gz_alloc_set_hook(alloc->malloc_fn, alloc->free_fn, alloc->cls);
}
