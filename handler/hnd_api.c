/* hnd_api.c: handler lifetime and options, version, backends, errors and the allocator hook. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gz_alloc.h"
#include "gz_error.h"
#include "gz_pool.h"
#include "hnd_mtype.h"
#include "hnd_entry.h"
#include "hnd_store.h"
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
 * that mhdgz_backend_info names a backend not compiled in). */
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
mhdgz_backend_info(enum mhdgz_backend backend, struct mhdgz_backend_info *info)
{
	const struct gz_backend *be;

	if (!info || info->size != sizeof *info || (unsigned int)backend >= HND_NBACKENDS)
		return MHDGZ_EINVAL;
	be = backend_of(backend);
	memset(&info->name, 0, sizeof *info - offsetof(struct mhdgz_backend_info, name));
	info->backend = backend == MHDGZ_BACKEND_DEFAULT ? (enum mhdgz_backend)be->id : backend;
	info->name = hnd_backend_names[info->backend];
	if (be) {
		info->available = 1;
		info->level_min = be->level_min;
		info->level_max = be->level_max;
		info->level_default = be->level_default;
	}
	return 0;
}

MHDGZ_API int
mhdgz_coding_info(const struct mhdgz *gz, enum mhdgz_coding coding, struct mhdgz_coding_info *info)
{
	const struct gz_backend *be;

	if (!info || info->size != sizeof *info || (unsigned int)coding >= GZ_CODING_COUNT)
		return MHDGZ_EINVAL;
	memset(&info->name, 0, sizeof *info - offsetof(struct mhdgz_coding_info, name));
	info->name = gz_coding_name((enum gz_coding)coding);
	info->rank = -1;
	be = gz && coding == MHDGZ_CODING_GZIP ? gz->be
					       : gz_backend_for_coding((enum gz_coding)coding);
	if (be) {
		info->available = 1;
		info->level_min = be->level_min;
		info->level_max = be->level_max;
		info->level_default = be->level_default;
	}
	for (size_t i = 0; gz && i < gz->policy.norder; i++) {
		if (gz->policy.order[i] == (enum gz_coding)coding) {
			info->enabled = 1;
			info->level = gz->coder[coding].level;
			info->rank = (int)i;
		}
	}
	return 0;
}

/* The detail of the last option mhdgz_new refused on this thread, which
 * mhdgz_strerror gives for that error code (test_option_errors). */
static _Thread_local char opt_detail[160];
static _Thread_local int opt_detail_err;

/* Record what was wrong with an option; returns err. */
static int __attribute__((format(printf, 2, 3))) opt_error(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(opt_detail, sizeof opt_detail, fmt, ap);
	va_end(ap);
	opt_detail_err = err;
	return err;
}

/* A level in a backend's range, or 0 (its default). */
static int
check_level(const char *field, int level, const struct gz_backend *be)
{
	if (level != 0 && (level < be->level_min || level > be->level_max))
		return opt_error(MHDGZ_EINVAL, "%s: %d is outside %d..%d", field, level,
				 be->level_min, be->level_max);
	return 0;
}

/* An int option in lo..hi, or 0 (its default). */
static int
check_range(const char *field, long long v, long long lo, long long hi)
{
	if (v != 0 && (v < lo || v > hi))
		return opt_error(MHDGZ_EINVAL, "%s: %lld is outside %lld..%lld", field, v, lo, hi);
	return 0;
}

/* Everything about the options that needs no allocation, each mistake
 * named: field, value, what is allowed. */
static int
check_options(const struct mhdgz_options *o)
{
	int rc;

	if ((unsigned int)o->gzip.backend >= HND_NBACKENDS)
		return opt_error(MHDGZ_EINVAL, "gzip.backend: %d is outside 0..%u",
				 (int)o->gzip.backend, (unsigned int)HND_NBACKENDS - 1);
	if (!backend_of(o->gzip.backend))
		return opt_error(MHDGZ_ENOTSUP, "gzip.backend: %s is not compiled in",
				 hnd_backend_names[o->gzip.backend]);
	if ((rc = check_level("gzip.level", o->gzip.level, backend_of(o->gzip.backend))) < 0)
		return rc;
	if ((unsigned int)o->etag_policy > MHDGZ_ETAG_KEEP)
		return opt_error(MHDGZ_EINVAL, "etag_policy: %d is outside 0..%d",
				 (int)o->etag_policy, MHDGZ_ETAG_KEEP);
	if (o->flags & ~(MHDGZ_F_NO_POOL | MHDGZ_F_CONTENT_DIGEST | MHDGZ_F_LENGTH_HIDING))
		return opt_error(MHDGZ_EINVAL, "flags: 0x%x is not an MHDGZ_F_* flag",
				 o->flags & ~(MHDGZ_F_NO_POOL | MHDGZ_F_CONTENT_DIGEST |
					      MHDGZ_F_LENGTH_HIDING));
	if ((rc = check_range("gzip.stream_window_bits", o->gzip.stream_window_bits,
			      GZ_WINDOW_BITS_MIN, GZ_WINDOW_BITS_MAX)) < 0 ||
	    (rc = check_range("gzip.stream_mem_level", o->gzip.stream_mem_level, GZ_MEM_LEVEL_MIN,
			      GZ_MEM_LEVEL_MAX)) < 0 ||
	    (rc = check_range("gzip.event_window_bits", o->gzip.event_window_bits,
			      GZ_WINDOW_BITS_MIN, GZ_WINDOW_BITS_MAX)) < 0 ||
	    (rc = check_range("gzip.event_mem_level", o->gzip.event_mem_level, GZ_MEM_LEVEL_MIN,
			      GZ_MEM_LEVEL_MAX)) < 0)
		return rc;
	for (enum gz_coding k = GZ_CODING_ZSTD; k < GZ_CODING_COUNT; k++) {
		int level = k == GZ_CODING_ZSTD ? o->zstd.level : o->br.level;
		const struct gz_backend *be = gz_backend_for_coding(k);
		char field[16];

		snprintf(field, sizeof field, "%s.level", gz_coding_name(k));
		if (level != 0 && !be)
			return opt_error(MHDGZ_ENOTSUP, "%s: %s is not compiled in", field,
					 gz_coding_name(k));
		if (be && (rc = check_level(field, level, be)) < 0)
			return rc;
	}
	if (o->padding.max_nbytes > MHDGZ_LENGTH_HIDING_MAX_LIMIT)
		return opt_error(MHDGZ_EINVAL, "padding.max_nbytes: %zu is outside 1..%d",
				 o->padding.max_nbytes, MHDGZ_LENGTH_HIDING_MAX_LIMIT);
	if (o->padding.key && (o->padding.key_nbytes < MHDGZ_LENGTH_HIDING_KEY_MIN ||
			       o->padding.key_nbytes > MHDGZ_LENGTH_HIDING_KEY_MAX))
		return opt_error(MHDGZ_EINVAL, "padding.key_nbytes: %zu is outside %d..%d",
				 o->padding.key_nbytes, MHDGZ_LENGTH_HIDING_KEY_MIN,
				 MHDGZ_LENGTH_HIDING_KEY_MAX);
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
			if (hnd_ascii_is(p, len, gz_coding_name(k)))
				break;
		if (k == GZ_CODING_COUNT || seen[k])
			return opt_error(
				MHDGZ_EINVAL,
				"codings: \"%.*s\" is not one of gzip, zstd, br (each once)",
				(int)(len < 32 ? len : 32), p);
		if (!gz_backend_for_coding(k))
			return opt_error(MHDGZ_ENOTSUP, "codings: %s is not compiled in",
					 gz_coding_name(k));
		seen[k] = true;
		gz->policy.order[gz->policy.norder++] = k;
		p += len;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			return 0;
		if (*p != ',')
			return opt_error(MHDGZ_EINVAL,
					 "codings: \"%s\" is not a comma-separated list", list);
		p++;
	}
}

/* Backend, level and pools of the codings other than gzip that are
 * offered (their levels were checked by check_options, also those of
 * codings not offered: never clamped, never silently ignored). */
static int
coders_init(struct mhdgz *gz, const struct mhdgz_options *o, size_t cap)
{
	const int levels[GZ_CODING_COUNT] = {
		[GZ_CODING_ZSTD] = o->zstd.level, [GZ_CODING_BR] = o->br.level
	};
	size_t i;
	int rc;

	gz->coder[GZ_CODING_GZIP] = (struct hnd_coder){
		.be = gz->be, .level = gz->level, .pool = gz->pool, .stream_pool = gz->stream_pool
	};
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
	gz_pool_free(gz->event_pool);
	hnd_store_fini(&gz->store);
	hnd_dicts_free(gz);
	gz_pool_free(gz->stream_pool);
	gz_pool_free(gz->pool);
	hnd_types_fini(&gz->policy.types);
	gz_free(gz->alloc);
}

/* The handle's compressor pools: gzip's three (whole bodies; streams;
 * low-latency streams, whose compressors are smaller: event_window_bits)
 * and the other codings' (whole bodies and streams), with their
 * trimming. 0 or a negative error (the caller frees what was made). */
static int
pools_init(struct mhdgz *gz, const struct mhdgz_options *o)
{
	size_t cap = (o->flags & MHDGZ_F_NO_POOL) ? 0
		     : o->limits.pool_idle_cap    ? o->limits.pool_idle_cap
						  : HND_POOL_IDLE_CAP;
	int rc;

	/* Streams of a whole-buffer backend are zlib's (gz_stream_backend). */
	rc = gz_pool_new(gz->be, gz->level, cap, &gz->pool);
	if (rc < 0)
		return rc;
	rc = gz_pool_new_win(gz_stream_backend(gz->be), gz_stream_level(gz->be, gz->level),
			     o->gzip.stream_window_bits, o->gzip.stream_mem_level, cap,
			     &gz->stream_pool);
	if (rc < 0)
		return rc;
	rc = gz_pool_new_win(gz_stream_backend(gz->be), gz_stream_level(gz->be, gz->level),
			     o->gzip.event_window_bits ? o->gzip.event_window_bits
						       : MHDGZ_DEFAULT_EVENT_WINDOW_BITS,
			     o->gzip.event_mem_level ? o->gzip.event_mem_level
						     : MHDGZ_DEFAULT_EVENT_MEM_LEVEL,
			     cap, &gz->event_pool);
	if (rc < 0)
		return rc;
	/* The other codings' pools (zstd, br: whole bodies and streams). */
	rc = parse_codings(gz, o->codings);
	if (rc < 0)
		return rc;
	rc = coders_init(gz, o, cap);
	if (rc < 0)
		return rc;
	if (o->limits.pool_trim_ms != MHDGZ_POOL_TRIM_NEVER) {
		size_t low = o->limits.pool_idle_low ? o->limits.pool_idle_low
						     : MHDGZ_DEFAULT_POOL_IDLE_LOW;
		uint64_t period_us = (uint64_t)(o->limits.pool_trim_ms
							? o->limits.pool_trim_ms
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
	return 0;
}

MHDGZ_API int
mhdgz_new(const struct mhdgz_options *opts, struct mhdgz **gz_ret)
{
	struct mhdgz_options o;
	struct mhdgz *gz;
	void *block;
	int rc;

	opt_detail[0] = '\0';
	opt_detail_err = 0;
	if (!gz_ret)
		return opt_error(MHDGZ_EINVAL, "gz_ret: NULL");
	memset(&o, 0, sizeof o);
	if (opts) {
		if (opts->size != sizeof o)
			return opt_error(MHDGZ_EINVAL,
					 "size: %zu is not sizeof(struct mhdgz_options), %zu",
					 opts->size, sizeof o);
		o = *opts;
	}
	rc = check_options(&o);
	if (rc < 0)
		return rc;
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
	gz->be = backend_of(o.gzip.backend);
	gz->level = o.gzip.level != 0 ? o.gzip.level : gz->be->level_default;
	if (!(gz->be->caps & GZ_CAP_ONESHOT)) {
		rc = opt_error(MHDGZ_ENOTSUP, "gzip.backend: %s cannot compress whole bodies",
			       gz->be->name);
		goto fail;
	}
	gz->policy.min_nbytes = o.min_nbytes ? o.min_nbytes : MHDGZ_DEFAULT_MIN_NBYTES;
	gz->etag_policy = o.etag_policy;
	gz->policy.content_digest = (o.flags & MHDGZ_F_CONTENT_DIGEST) != 0;
	gz->pad_default = (o.flags & MHDGZ_F_LENGTH_HIDING) != 0;
	gz->pad_max = o.padding.max_nbytes ? o.padding.max_nbytes : MHDGZ_DEFAULT_LENGTH_HIDING_MAX;
	rc = hnd_pad_key_init(gz, o.padding.key, o.padding.key_nbytes);
	if (rc < 0) {
		opt_error(rc, "padding.key: getrandom() failed");
		goto fail;
	}
	rc = hnd_typelist_init(&gz->policy.types.compress,
			       o.compress_types ? o.compress_types : hnd_default_compress_types);
	if (rc < 0) {
		opt_error(rc, "compress_types: an entry is not a media type pattern");
		goto fail;
	}
	rc = hnd_typelist_init(&gz->policy.types.skip,
			       o.skip_types ? o.skip_types : hnd_default_skip_types);
	if (rc < 0) {
		opt_error(rc, "skip_types: an entry is not a media type pattern");
		goto fail;
	}
	rc = hnd_types_index(&gz->policy.types);
	if (rc < 0) {
		opt_error(rc, "compress_types, skip_types: out of memory");
		goto fail;
	}
	rc = pools_init(gz, &o);
	if (rc < 0)
		goto fail;
	rc = hnd_table_init(&gz->table);
	if (rc < 0)
		goto fail;
	gz->coder_budget = o.limits.coder_nbytes == MHDGZ_CODER_NBYTES_UNLIMITED ? UINT64_MAX
			   : o.limits.coder_nbytes ? o.limits.coder_nbytes
						   : MHDGZ_DEFAULT_CODER_NBYTES;
	rc = hnd_store_init(&gz->store, o.limits.store_nbytes);
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

MHDGZ_API const char *
mhdgz_strerror(int err)
{
	const char *msg = gz_strerror(err);

	if (err != 0 && err == opt_detail_err && opt_detail[0])
		return opt_detail;
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
