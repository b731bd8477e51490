/* gz_dict.c: zstd compression with a prepared raw-content dictionary: the RFC 9842 "dcz" body. */
/*
 * Format (RFC 9842, the "dcz" content coding): a 40-byte header, the zstd
 * skippable frame 5e 2a 4d 18 20 00 00 00 (magic 0x184D2A5E, frame size
 * 32) carrying the 32-byte SHA-256 of the dictionary, then one zstd frame
 * (RFC 8878) compressed with the dictionary as raw content (ZSTD_dct_
 * rawContent: the bytes precede the body, whatever they hold, even a zstd
 * dictionary's magic), whose declared window is at most the larger of 8
 * MiB and 1.25 times the dictionary, and never over 128 MiB, while its
 * matches reach the start of the dictionary whenever that declaration
 * allows it (gz_dcz_window_log). Like the zstd backend: content size
 * pledged, no checksum, no dictionary ID.
 *
 * The ZSTD_CDict is built once per dictionary and level (in a workspace
 * of ours: ZSTD_initStaticCDict) and then only read: zstd documents a CDict as usable by several contexts (threads) at
 * once. Each compression takes a context of its own: a dcz body is built
 * once per (response, dictionary) and cached by the handler, so the
 * context's setup cost is paid once per cache miss. Every allocation goes
 * through gz_malloc (ZSTD_customMem).
 */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gz_error.h"
#include "gz_alloc.h"
#include "gz_backend.h"
#include "gz_dict.h"

/* Dictionaries larger than this, in bytes, are searched with zstd's
 * long-distance matching (gz_dcz_compress). The ordinary window's size:
 * below it the level's own tables find enough; above it, without
 * long-distance matching, the part of the dictionary beyond 8 MiB of the
 * body is in reach but not found. Lower: better ratio for dictionaries of
 * a few MiB, at one pass over the dictionary per dcz body. */
#ifndef GZ_DCZ_LDM_DICT_NBYTES
#define GZ_DCZ_LDM_DICT_NBYTES ((size_t)8 << 20)
#endif

uint64_t
gz_dcz_window_max(size_t dict_len)
{
	uint64_t w = (uint64_t)dict_len + (uint64_t)dict_len / 4; /* 1.25 times */

	if (w < (uint64_t)8 << 20)
		w = (uint64_t)8 << 20;
	if (w > (uint64_t)128 << 20)
		w = (uint64_t)128 << 20;
	return w;
}

int
gz_dcz_window_log(size_t dict_len, size_t in_len)
{
	uint64_t cap = gz_dcz_window_max(dict_len), need = (uint64_t)dict_len + in_len;
	int wlog = 10; /* ZSTD_WINDOWLOG_ABSOLUTEMIN */

	/* Matches reach back 2^wlog bytes: enough for the start of the
	 * dictionary from the end of the body (dict_len + in_len), at most
	 * 128 MiB. */
	while (wlog < GZ_DCZ_WINDOW_LOG_MAX && ((uint64_t)1 << wlog) < need)
		wlog++;
	/* A body no larger than the limit: with the content size pledged and
	 * a window at least the body, libzstd writes a single-segment frame,
	 * whose window is the content size (RFC 8878 section 3.1.1.1.2), and
	 * while no more than that window has been decoded, offsets may reach
	 * anywhere into the dictionary (RFC 8878 section 5). So the frame
	 * declares in_len, within the limit, and reaches the whole
	 * dictionary (test_dcz_large_dictionary, check_codings.c). */
	if (in_len <= cap)
		return wlog;
	/* A larger body declares the window itself: the largest power of two
	 * within the limit (libzstd writes no other window sizes). */
	while (((uint64_t)1 << wlog) > cap)
		wlog--;
	return wlog;
}

#ifdef HAVE_ZSTD
/* RFC 9842: the dcz header's magic (a zstd skippable frame's), then the
 * dictionary's hash. */
static const uint8_t dcz_magic[8] = { 0x5e, 0x2a, 0x4d, 0x18, 0x20, 0x00, 0x00, 0x00 };

#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

struct gz_zdict {
	const ZSTD_CDict *cdict; /* lives in workspace */
	void *workspace;
	size_t dict_len;
	int level;
	uint8_t hash[GZ_DCZ_HASH_NBYTES];
};

static int
level_of(int level)
{
	return level == 0 ? gz_backend_zstd.level_default : level;
}

int
gz_zdict_new(const void *dict, size_t dict_len, int level, const uint8_t hash[GZ_DCZ_HASH_NBYTES],
	     struct gz_zdict **ret)
{
	struct gz_zdict *d;
	ZSTD_compressionParameters cp;
	size_t ws;

	level = level_of(level);
	if (level < gz_backend_zstd.level_min || level > gz_backend_zstd.level_max ||
	    dict_len > GZ_DICT_MAX_NBYTES || (!dict && dict_len))
		return GZ_EINVAL;
	d = gz_calloc(1, sizeof *d);
	if (!d)
		return GZ_ENOMEM;
	d->dict_len = dict_len;
	d->level = level;
	memcpy(d->hash, hash, GZ_DCZ_HASH_NBYTES);
	/* A static CDict in a workspace of our own, not
	 * ZSTD_createCDict_advanced: libzstd before 1.5.6 (Debian 12 has
	 * 1.5.4) dereferences NULL there when its allocation fails
	 * (facebook/zstd#3847). One allocation, then no other. */
	cp = ZSTD_getCParams(level, ZSTD_CONTENTSIZE_UNKNOWN, dict_len);
	ws = ZSTD_estimateCDictSize_advanced(dict_len, cp, ZSTD_dlm_byCopy);
	/* Zeroed: libzstd 1.5.4 reads parts of a static CDict it never wrote
	 * (valgrind memcheck sees it branch on them); zeros make that defined. */
	d->workspace = gz_calloc(1, ws);
	if (!d->workspace) {
		gz_free(d);
		return GZ_ENOMEM;
	}
	d->cdict = ZSTD_initStaticCDict(d->workspace, ws, dict_len ? dict : "", dict_len,
					ZSTD_dlm_byCopy, ZSTD_dct_rawContent, cp);
	if (!d->cdict) {
		gz_free(d->workspace);
		gz_free(d);
		return GZ_EBACKEND;
	}
	*ret = d;
	return 0;
}

void
gz_zdict_free(struct gz_zdict *d)
{
	if (!d)
		return;
	gz_free(d->workspace); /* the static CDict lives in it */
	gz_free(d);
}

size_t
gz_dcz_bound(size_t in_len)
{
	size_t b = ZSTD_compressBound(in_len);

	if (ZSTD_isError(b) || b < in_len || b > SIZE_MAX - GZ_DCZ_HEADER_NBYTES)
		return SIZE_MAX;
	return b + GZ_DCZ_HEADER_NBYTES;
}

int
gz_dcz_compress(const struct gz_zdict *d, int level, const void *in, size_t in_len, void *out,
		size_t out_cap, size_t *out_len_ret)
{
	const ZSTD_customMem mem = { gz_opaque_malloc, gz_opaque_free, NULL };
	size_t hdr = d ? GZ_DCZ_HEADER_NBYTES : 0, r;
	ZSTD_CCtx *cctx;

	if (out_cap <= hdr)
		return GZ_ENOSPC;
	level = d ? d->level : level_of(level);
	if (level < gz_backend_zstd.level_min || level > gz_backend_zstd.level_max)
		return GZ_EINVAL;
	cctx = ZSTD_createCCtx_advanced(mem);
	if (!cctx)
		return GZ_ENOMEM;
	r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog,
					   gz_dcz_window_log(d ? d->dict_len : 0, in_len));
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 0);
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_dictIDFlag, 0);
	/* A dictionary over GZ_DCZ_LDM_DICT_NBYTES: the match finder's tables
	 * (sized by level, 2^17 entries at level 3) keep only the last part
	 * of it, so the body's first match into its start is never found and
	 * a window that reaches it buys nothing. Long-distance matching finds
	 * such matches; it needs the dictionary loaded into this context (a
	 * CDict's tables hold no long-distance state), which costs one pass
	 * over the dictionary per body (about 1 ms per MB), paid once per
	 * cached dcz body. test_dcz_large_dictionary (check_codings.c) pins
	 * the gain. */
	if (!ZSTD_isError(r) && d && d->dict_len > GZ_DCZ_LDM_DICT_NBYTES)
		r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_enableLongDistanceMatching, 1);
	if (!ZSTD_isError(r) && d && d->dict_len > GZ_DCZ_LDM_DICT_NBYTES)
		r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_forceAttachDict, ZSTD_dictForceLoad);
	if (!ZSTD_isError(r) && d)
		r = ZSTD_CCtx_refCDict(cctx, d->cdict);
	if (!ZSTD_isError(r))
		r = ZSTD_compress2(cctx, (uint8_t *)out + hdr, out_cap - hdr, in_len ? in : "",
				   in_len);
	ZSTD_freeCCtx(cctx);
	if (ZSTD_isError(r))
		return gz_zstd_err(r);
	if (d) {
		memcpy(out, dcz_magic, sizeof dcz_magic);
		memcpy((uint8_t *)out + sizeof dcz_magic, d->hash, GZ_DCZ_HASH_NBYTES);
	}
	*out_len_ret = hdr + r;
	return 0;
}

#else /* !HAVE_ZSTD */

int
gz_zdict_new(const void *dict, size_t dict_len, int level, const uint8_t hash[GZ_DCZ_HASH_NBYTES],
	     struct gz_zdict **ret)
{
	(void)dict;
	(void)dict_len;
	(void)level;
	(void)hash;
	(void)ret;
	return GZ_ENOTSUP;
}

void
gz_zdict_free(struct gz_zdict *d)
{
	(void)d;
}

size_t
gz_dcz_bound(size_t in_len)
{
	(void)in_len;
	return SIZE_MAX;
}

int
gz_dcz_compress(const struct gz_zdict *d, int level, const void *in, size_t in_len, void *out,
		size_t out_cap, size_t *out_len_ret)
{
	(void)d;
	(void)level;
	(void)in;
	(void)in_len;
	(void)out;
	(void)out_cap;
	(void)out_len_ret;
	return GZ_ENOTSUP;
}

#endif /* HAVE_ZSTD */
