/* gz_backend_zstd.c: the zstd content-coding backend (whole buffers and streams), built under HAVE_ZSTD. */
/*
 * Levels: zstd's own 1-19 (default GZ_ZSTD_LEVEL_DEFAULT), passed as
 * ZSTD_c_compressionLevel. zstd's negative ("fast") levels are not offered
 * (0 is never a level here, see gz_backend.h), nor its "ultra" levels
 * 20-22, whose default windows (32-128 MiB) RFC 9659 forbids and whose
 * match finders cost hundreds of MiB.
 *
 * Format (RFC 8878 and RFC 9659 section 3, "zstd" content coding): one
 * frame per body; the window is capped at 8 MiB (ZSTD_c_windowLog <=
 * GZ_ZSTD_WINDOW_LOG_MAX) at every level, so every HTTP decoder, which may
 * refuse larger windows, accepts it; no dictionary, and no dictionary ID
 * field (ZSTD_c_dictIDFlag 0); a whole buffer's frame carries its content
 * size (ZSTD_compress2 pledges it), a stream's does not (it is not known
 * when the frame header is written); no content checksum (the transport
 * already checks, and RFC 9659 does not ask for one). zstd shrinks the
 * window of a whole buffer to its size by itself.
 *
 * Flushes: GZ_FLUSH_SYNC is ZSTD_e_flush (the block in progress is closed,
 * everything consumed so far can be decoded), GZ_FLUSH_FINISH ZSTD_e_end
 * (the last block; the frame is complete).
 *
 * Memory: every zstd allocation goes through gz_malloc (ZSTD_customMem).
 * Unlike the gzip backends, a zstd context sizes its workspace at its first
 * compression (by level, window and, for whole buffers, input size) and
 * keeps it, so a new compressor allocates on first use; zstd frees and
 * reallocates a workspace that stays much larger than needed for many
 * uses in a row. An allocation failure is a clean GZ_ENOMEM (or
 * GZ_EBACKEND). At gz_bound() bytes a buffer always fits; in just its
 * coded size ZSTD_compress2 may report GZ_ENOSPC. ZSTD_createCCtx_advanced and ZSTD_getCParams are in
 * zstd's "static linking only" section, exported by every libzstd since
 * 1.3 (Debian 12: 1.5.4); configure asks for libzstd >= 1.4.0.
 */
#include "config.h"

#ifdef HAVE_ZSTD

#include <stddef.h>
#include <stdint.h>

#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

#include "gz_error.h"
#include "gz_alloc.h"
#include "gz_backend.h"

/* Level 3 is zstd's own default (ZSTD_CLEVEL_DEFAULT); see bench/README.md for the
 * bench figures behind the choice. */
#ifndef GZ_ZSTD_LEVEL_DEFAULT
#define GZ_ZSTD_LEVEL_DEFAULT 3
#endif
#define GZ_ZSTD_LEVEL_MIN 1
#define GZ_ZSTD_LEVEL_MAX 19

/* RFC 9659 section 3: "the window size is limited to 8 MB" (2^23 bytes). */
#define GZ_ZSTD_WINDOW_LOG_MAX 23

/* The window of a stream, as a power of two (capped further by the
 * level's own). A stream holds its compressor for as long as it lasts (an
 * event stream: the connection's life), and zstd's stream buffers grow
 * with the window: level 3's default 2 MiB window makes 3.6 MiB per open
 * stream, 512 KiB about 1.2 MiB. A whole buffer's window is sized to the
 * buffer by zstd itself. Larger: better ratio on long streams; smaller:
 * less memory per open stream. */
#ifndef GZ_ZSTD_STREAM_WINDOW_LOG
#define GZ_ZSTD_STREAM_WINDOW_LOG 19
#endif

struct gz_zstd {
	struct gz_compressor base; /* first: the core casts between the two */
	ZSTD_CCtx *cctx;
	/* ZSTD_e_end completed: the frame is whole; later calls write nothing
	 * (zstd itself would start a new frame). */
	int ended;
	/* A flush completed and no input has been consumed since. */
	int synced;
	/* compress() used the context; stream() refuses until reset(). */
	int need_reset;
	/* No stream() call since the last reset: the next one starts a frame
	 * and sets the stream window. */
	int fresh;
	unsigned int wlog_whole, wlog_stream; /* ZSTD_c_windowLog of each use */
};

int
gz_zstd_err(size_t r)
{
	switch (ZSTD_getErrorCode(r)) {
	case ZSTD_error_memory_allocation:
		return GZ_ENOMEM;
	case ZSTD_error_dstSize_tooSmall:
		return GZ_ENOSPC;
	default:
		return GZ_EBACKEND;
	}
}

static int
gz_zstd_init(struct gz_compressor *c)
{
	struct gz_zstd *z = (struct gz_zstd *)c;
	const ZSTD_customMem mem = { gz_opaque_malloc, gz_opaque_free, NULL };
	/* The window zstd would pick for an input of unknown size, capped. */
	unsigned int wlog = ZSTD_getCParams(c->level, ZSTD_CONTENTSIZE_UNKNOWN, 0).windowLog;

	if (wlog > GZ_ZSTD_WINDOW_LOG_MAX)
		wlog = GZ_ZSTD_WINDOW_LOG_MAX;
	z->wlog_whole = wlog;
	z->wlog_stream = wlog < GZ_ZSTD_STREAM_WINDOW_LOG ? wlog : GZ_ZSTD_STREAM_WINDOW_LOG;
	z->fresh = 1;
	z->cctx = ZSTD_createCCtx_advanced(mem);
	if (!z->cctx)
		return GZ_ENOMEM;
	/* Parameters are sticky: session resets keep them. */
	if (ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, c->level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_windowLog, (int)wlog)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_contentSizeFlag, 1)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 0)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_dictIDFlag, 0))) {
		ZSTD_freeCCtx(z->cctx);
		z->cctx = NULL;
		return GZ_EBACKEND;
	}
	return 0;
}

static void
gz_zstd_fini(struct gz_compressor *c)
{
	struct gz_zstd *z = (struct gz_zstd *)c;

	ZSTD_freeCCtx(z->cctx);
	z->cctx = NULL;
}

static size_t
gz_zstd_bound(const struct gz_compressor *c, size_t in_len)
{
	size_t b = ZSTD_compressBound(in_len);

	(void)c;
	/* An input too large for a frame gives an error code (huge). */
	if (ZSTD_isError(b) || b < in_len)
		return SIZE_MAX;
	return b;
}

static int
gz_zstd_compress(struct gz_compressor *c, const void *in, size_t in_len, void *out, size_t out_cap,
		 size_t *out_len_ret)
{
	struct gz_zstd *z = (struct gz_zstd *)c;
	size_t r;

	/* A frame is never empty (4-byte magic at least). */
	if (out_cap == 0)
		return GZ_ENOSPC;
	z->need_reset = 1;
	z->ended = 0;
	z->synced = 0;
	/* Abandon any frame in progress (parameters can change only between
	 * frames); ZSTD_compress2 then pledges in_len, so the frame header
	 * carries the content size. */
	r = ZSTD_CCtx_reset(z->cctx, ZSTD_reset_session_only);
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_windowLog, (int)z->wlog_whole);
	if (!ZSTD_isError(r))
		r = ZSTD_compress2(z->cctx, out, out_cap, in_len ? in : "", in_len);
	if (ZSTD_isError(r))
		return gz_zstd_err(r);
	*out_len_ret = r;
	return 0;
}

static int
gz_zstd_reset(struct gz_compressor *c)
{
	struct gz_zstd *z = (struct gz_zstd *)c;

	z->ended = 0;
	z->synced = 0;
	z->need_reset = 0;
	z->fresh = 1;
	return ZSTD_isError(ZSTD_CCtx_reset(z->cctx, ZSTD_reset_session_only)) ? GZ_EBACKEND : 0;
}

static int
gz_zstd_stream(struct gz_compressor *c, struct gz_io *io, enum gz_flush flush)
{
	struct gz_zstd *z = (struct gz_zstd *)c;
	ZSTD_EndDirective mode;

	switch (flush) {
	case GZ_FLUSH_NONE:
		mode = ZSTD_e_continue;
		break;
	case GZ_FLUSH_SYNC:
		mode = ZSTD_e_flush;
		break;
	case GZ_FLUSH_FINISH:
		mode = ZSTD_e_end;
		break;
	default:
		return GZ_EINVAL;
	}
	if (z->need_reset)
		return GZ_EINVAL;
	if (z->ended)
		return GZ_STREAM_END;
	if (mode == ZSTD_e_flush && io->in_len == 0 && z->synced)
		return 0;
	if (z->fresh) {
		if (ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_windowLog,
							(int)z->wlog_stream)))
			return GZ_EBACKEND;
		z->fresh = 0;
	}

	for (;;) {
		ZSTD_inBuffer ib = { io->in, io->in_len, 0 };
		ZSTD_outBuffer ob = { io->out, io->out_cap, 0 };
		size_t r = ZSTD_compressStream2(z->cctx, &ob, &ib, mode);

		if (ZSTD_isError(r)) {
			/* ENOSPC cannot happen here (zstd buffers what does
			 * not fit); any error ends the stream for the pump. */
			return gz_zstd_err(r) == GZ_ENOMEM ? GZ_ENOMEM : GZ_EBACKEND;
		}
		io->in += ib.pos;
		io->in_len -= ib.pos;
		io->out += ob.pos;
		io->out_cap -= ob.pos;
		if (ib.pos)
			z->synced = 0;
		/* e_continue returns once the input is taken or the output is
		 * full; e_flush and e_end return 0 once complete (all input
		 * consumed and everything written). */
		if (mode == ZSTD_e_continue)
			return 0;
		if (r == 0) {
			if (mode == ZSTD_e_end) {
				z->ended = 1;
				return GZ_STREAM_END;
			}
			z->synced = 1;
			return 0;
		}
		if (io->out_cap == 0)
			return 0;
		/* Not complete with room left: zstd stops early only when its
		 * own buffers cycle; go round again, but never spin. */
		if (ib.pos == 0 && ob.pos == 0)
			return GZ_EBACKEND;
	}
}

const struct gz_backend gz_backend_zstd = {
	.id = GZ_ID_ZSTD,
	.name = "zstd",
	.caps = GZ_CAP_ONESHOT | GZ_CAP_STREAM,
	.level_min = GZ_ZSTD_LEVEL_MIN,
	.level_max = GZ_ZSTD_LEVEL_MAX,
	.level_default = GZ_ZSTD_LEVEL_DEFAULT,
	.inst_nbytes = sizeof(struct gz_zstd),
	.global_alloc_init = NULL, /* ZSTD_customMem is per context */
	.init = gz_zstd_init,
	.fini = gz_zstd_fini,
	.bound = gz_zstd_bound,
	.compress = gz_zstd_compress,
	.reset = gz_zstd_reset,
	.stream = gz_zstd_stream,
	.coding = GZ_CODING_ZSTD,
};

#endif /* HAVE_ZSTD */
