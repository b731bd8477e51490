/* gz_backend_zlib.c: the zlib deflate backend (one-shot and streaming). */
/*
 * Levels: zlib's own 1-9 (default 6), passed to deflateInit2 unchanged.
 * Level 0 (stored) is not offered: it never makes a body smaller.
 *
 * Format: windowBits 31 (15-bit window, gzip wrapper), so zlib writes the
 * RFC 1952 header with MTIME 0, no name, XFL from the level and OS 3, and the
 * CRC-32/ISIZE trailer. memLevel 8 is zlib's default and the one deflateBound
 * gives its tight bound for.
 *
 * Memory: the instance plus five zlib blocks (state, window, prev, head,
 * pending buffer): 6 allocations, 268344 bytes (262 KiB) at every level
 * (zlib 1.2.13, x86-64); all through gz_zalloc, all made by deflateInit2.
 *
 * Small bodies: compress() deflates a body of at most GZ_ZLIB_SMALL_MAX
 * bytes with a second stream whose window and hash are sized to it
 * (windowBits 12, memLevel 5, as nginx sizes them from Content-Length),
 * made at the first such body: 5 more blocks, about 40 KiB. Every
 * deflateReset clears the hash head (64 KiB at memLevel 8, 8 KiB at 5) and
 * a 2 KiB body then touches 16 KiB of tables instead of 256 KiB: at 2 KiB,
 * 17-23 % fewer instructions and 8-19 % less time than the full-size
 * stream (bench/README.md, make bench). The window holds the whole body with
 * zlib's lookahead to spare, so every match distance stays reachable; the
 * bytes are zlib's own for those parameters (nginx's, for a body of
 * 1,786-3,833 bytes, to which nginx gives the same parameters; smaller
 * bodies get smaller ones from nginx).
 * Where the small stream's output does not fit (its blocks are shorter,
 * so an incompressible body's stored blocks cost a few more bytes than
 * deflateBound allows for), or it cannot be made, the full-size stream
 * compresses the body as before.
 */
#include "config.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ZLIB_CONST
#include <zlib.h>

#include "gz_error.h"
#include "gz_alloc.h"
#include "gz_backend.h"

/*
 * Below this many bytes of output space, stream() deflates into a staging
 * buffer inside the instance and copies out what fits. zlib asks for more
 * than 6 bytes of output on a sync flush ("to avoid repeated flush markers
 * due to avail_out == 0 on return", zlib.h); staging makes 1-byte windows
 * safe. Larger costs only instance size; smaller than 7 defeats the purpose.
 */
#ifndef GZ_ZLIB_STAGE_NBYTES
#define GZ_ZLIB_STAGE_NBYTES 64
#endif

#define GZ_ZLIB_LEVEL_MIN 1
#define GZ_ZLIB_LEVEL_MAX 9
#define GZ_ZLIB_LEVEL_DEFAULT 6

/* windowBits for a 32 KiB window with the gzip wrapper (15 + 16). */
#define GZ_ZLIB_WBITS_GZIP 31
#define GZ_ZLIB_MEMLEVEL 8

/* The small-body stream (see above): a 4 KiB window, gzip wrapper. */
#define GZ_ZLIB_SMALL_WBITS 12
#define GZ_ZLIB_SMALL_MEMLEVEL 5
/* zlib keeps MIN_LOOKAHEAD (262) bytes of lookahead past the window; a
 * body shorter than the window less that is nginx's rule for 12 bits. */
#define GZ_ZLIB_SMALL_MAX ((1u << GZ_ZLIB_SMALL_WBITS) - 262u - 1u)

struct gz_zlib {
	struct gz_compressor base; /* first: the core casts between the two */
	z_stream zs;
	/* Staged output not yet copied to the caller: stage[stage_off ..
	 * stage_off + stage_len). Non-empty only after a small-window call. */
	size_t stage_off;
	size_t stage_len;
	/* zlib returned Z_STREAM_END: the trailer is written (maybe staged). */
	int ended;
	/* A sync flush completed and no input has been consumed since: a
	 * repeated GZ_FLUSH_SYNC must not reach deflate, which would emit
	 * another empty stored block. */
	int synced;
	/* compress() used the stream; stream() refuses until reset(). */
	int need_reset;
	/* zlib's stream is at the start of a member (deflateInit2 or
	 * deflateReset done, deflate not called since). Kept true whenever no
	 * member is in progress: deflateBound counts the 18-byte gzip wrapper
	 * only then (a finished stream gets 6, zlib's wrapper size), and
	 * reset() can skip a redundant deflateReset (which clears 64 KiB). */
	int fresh;
	uint8_t stage[GZ_ZLIB_STAGE_NBYTES];
	/* The small-body stream, once made (small_ready), always rewound. */
	z_stream small;
	int small_ready;
};

static int
gz_zlib_init(struct gz_compressor *c)
{
	struct gz_zlib *z = (struct gz_zlib *)c;
	int rc;

	z->zs.zalloc = gz_zalloc;
	z->zs.zfree = gz_zfree;
	z->zs.opaque = NULL;
	/* A smaller window or memLevel (streams: gz_compressor_new_win)
	 * shrinks window and prev (2^(windowBits+1) bytes each), head and
	 * the pending buffer (2^(memLevel+8), 2^(memLevel+8) bytes). */
	rc = deflateInit2(&z->zs, c->level, Z_DEFLATED,
			  c->window_bits ? 16 + c->window_bits : GZ_ZLIB_WBITS_GZIP,
			  c->mem_level ? c->mem_level : GZ_ZLIB_MEMLEVEL, Z_DEFAULT_STRATEGY);
	/* deflateInit2 frees its own partial allocations on failure. */
	if (rc == Z_MEM_ERROR)
		return GZ_ENOMEM;
	if (rc != Z_OK)
		return GZ_EBACKEND;
	z->fresh = 1;
	return 0;
}

/* Back to the start of a member. */
static int
gz_zlib_rewind(struct gz_zlib *z)
{
	if (deflateReset(&z->zs) != Z_OK) {
		z->fresh = 0;
		return GZ_EBACKEND;
	}
	z->fresh = 1;
	return 0;
}

static void
gz_zlib_fini(struct gz_compressor *c)
{
	struct gz_zlib *z = (struct gz_zlib *)c;

	(void)deflateEnd(&z->zs);
	if (z->small_ready)
		(void)deflateEnd(&z->small);
}

static size_t
gz_zlib_bound(const struct gz_compressor *c, size_t in_len)
{
	const struct gz_zlib *z = (const struct gz_zlib *)c;
	uLong b;

	if (in_len > ULONG_MAX)
		return SIZE_MAX;
	/* deflateBound only reads the stream; it needs it to see the gzip
	 * wrapper and memLevel, which make the bound tight. The stream is
	 * never left finished (see fresh), so the wrapper is counted. */
	b = deflateBound((z_streamp)&z->zs, (uLong)in_len);
	if (b < in_len || b > SIZE_MAX)
		return SIZE_MAX;
	return (size_t)b;
}

/* Deflate all of in into out as one member, from a fresh stream zs. */
static int
gz_zlib_deflate_buf(z_stream *zs, const void *in, size_t in_len, void *out, size_t out_cap,
		    size_t *out_len_ret)
{
	size_t in_left = in_len, out_left = out_cap;
	int rc;

	zs->next_in = in;
	zs->next_out = out;
	/* avail_in/avail_out are 32-bit: feed windows of at most UINT_MAX
	 * bytes; Z_FINISH only once the rest of the input is in the window. */
	for (;;) {
		uInt in_win = in_left > UINT_MAX ? UINT_MAX : (uInt)in_left;
		uInt out_win = out_left > UINT_MAX ? UINT_MAX : (uInt)out_left;

		zs->avail_in = in_win;
		zs->avail_out = out_win;
		rc = deflate(zs, in_win == in_left ? Z_FINISH : Z_NO_FLUSH);
		in_left -= in_win - zs->avail_in;
		out_left -= out_win - zs->avail_out;
		if (rc == Z_STREAM_END)
			break;
		if (rc != Z_OK && rc != Z_BUF_ERROR)
			return GZ_EBACKEND;
		if (out_left == 0)
			return GZ_ENOSPC;
		/* Z_BUF_ERROR with output space and no progress cannot end. */
		if (rc == Z_BUF_ERROR)
			return GZ_EBACKEND;
	}
	*out_len_ret = out_cap - out_left;
	return 0;
}

/* A small body through the small-body stream, made on first use. Returns
 * 0, or nonzero when the full-size stream must do it (the small stream
 * could not be made or rewound, or its output did not fit). */
static int
gz_zlib_compress_small(struct gz_zlib *z, const void *in, size_t in_len, void *out, size_t out_cap,
		       size_t *out_len_ret)
{
	int rc;

	if (!z->small_ready) {
		z->small.zalloc = gz_zalloc;
		z->small.zfree = gz_zfree;
		z->small.opaque = NULL;
		if (deflateInit2(&z->small, z->base.level, Z_DEFLATED, 16 + GZ_ZLIB_SMALL_WBITS,
				 GZ_ZLIB_SMALL_MEMLEVEL, Z_DEFAULT_STRATEGY) != Z_OK)
			return GZ_ENOMEM;
		z->small_ready = 1;
	}
	rc = gz_zlib_deflate_buf(&z->small, in, in_len, out, out_cap, out_len_ret);
	if (deflateReset(&z->small) != Z_OK) {
		(void)deflateEnd(&z->small);
		z->small_ready = 0;
		return rc == 0 ? 0 : GZ_EBACKEND;
	}
	return rc;
}

static int
gz_zlib_compress(struct gz_compressor *c, const void *in, size_t in_len, void *out, size_t out_cap,
		 size_t *out_len_ret)
{
	struct gz_zlib *z = (struct gz_zlib *)c;
	int rc;

	/* Every member is at least 18 bytes; zlib would also reject a NULL
	 * next_out as a stream error rather than a space problem. */
	if (out_cap == 0)
		return GZ_ENOSPC;
	z->stage_len = 0;
	z->ended = 0;
	z->synced = 0;
	z->need_reset = 1;
	/* Only compressors of the full-size window: a compressor made with
	 * a smaller window or memLevel (streams) keeps its own. */
	if (in_len <= GZ_ZLIB_SMALL_MAX && c->window_bits == 0 && c->mem_level == 0 &&
	    gz_zlib_compress_small(z, in, in_len, out, out_cap, out_len_ret) == 0)
		return 0;
	if (!z->fresh && (rc = gz_zlib_rewind(z)) < 0)
		return rc;
	z->fresh = 0;
	rc = gz_zlib_deflate_buf(&z->zs, in, in_len, out, out_cap, out_len_ret);
	/* Rewind now rather than on the next use, whatever happened: one
	 * deflateReset per call either way, and bound() stays exact. A
	 * failure here is retried by the next compress() or reset(). */
	(void)gz_zlib_rewind(z);
	return rc;
}

static int
gz_zlib_reset(struct gz_compressor *c)
{
	struct gz_zlib *z = (struct gz_zlib *)c;

	z->stage_len = 0;
	z->stage_off = 0;
	z->ended = 0;
	z->synced = 0;
	z->need_reset = 0;
	return z->fresh ? 0 : gz_zlib_rewind(z);
}

/* Copy staged output to the caller's window. */
static void
gz_zlib_drain(struct gz_zlib *z, struct gz_io *io)
{
	size_t n = z->stage_len < io->out_cap ? z->stage_len : io->out_cap;

	if (n == 0)
		return;
	memcpy(io->out, z->stage + z->stage_off, n);
	io->out += n;
	io->out_cap -= n;
	z->stage_off += n;
	z->stage_len -= n;
}

static int
gz_zlib_stream(struct gz_compressor *c, struct gz_io *io, enum gz_flush flush)
{
	struct gz_zlib *z = (struct gz_zlib *)c;
	int zflush;

	switch (flush) {
	case GZ_FLUSH_NONE:
		zflush = Z_NO_FLUSH;
		break;
	case GZ_FLUSH_SYNC:
		zflush = Z_SYNC_FLUSH;
		break;
	case GZ_FLUSH_FINISH:
		zflush = Z_FINISH;
		break;
	default:
		return GZ_EINVAL;
	}
	if (z->need_reset)
		return GZ_EINVAL;

	gz_zlib_drain(z, io);
	if (z->stage_len > 0)
		return 0;
	if (z->ended)
		return GZ_STREAM_END;
	if (zflush == Z_SYNC_FLUSH && io->in_len == 0 && z->synced)
		return 0;

	z->fresh = 0;
	for (;;) {
		int staged = io->out_cap < GZ_ZLIB_STAGE_NBYTES;
		uInt in_win = io->in_len > UINT_MAX ? UINT_MAX : (uInt)io->in_len;
		uInt out_win;
		/* A flush applies only once all of the input is in the window. */
		int f = in_win == io->in_len ? zflush : Z_NO_FLUSH;
		size_t used, made;
		int rc;

		if (staged) {
			out_win = sizeof z->stage;
			z->zs.next_out = z->stage;
		} else {
			out_win = io->out_cap > UINT_MAX ? UINT_MAX : (uInt)io->out_cap;
			z->zs.next_out = io->out;
		}
		z->zs.next_in = io->in;
		z->zs.avail_in = in_win;
		z->zs.avail_out = out_win;
		rc = deflate(&z->zs, f);
		used = in_win - z->zs.avail_in;
		made = out_win - z->zs.avail_out;
		io->in += used;
		io->in_len -= used;
		if (used)
			z->synced = 0;
		if (staged) {
			z->stage_off = 0;
			z->stage_len = made;
			gz_zlib_drain(z, io);
		} else {
			io->out += made;
			io->out_cap -= made;
		}

		if (rc == Z_STREAM_END) {
			/* All output is out of zlib (in io->out or the stage),
			 * so the stream can rewind at once (see fresh). */
			z->ended = 1;
			(void)gz_zlib_rewind(z);
			return z->stage_len ? 0 : GZ_STREAM_END;
		}
		/* No progress possible (nothing to do, or a repeated flush): a
		 * normal condition, not an error. */
		if (rc == Z_BUF_ERROR)
			return 0;
		if (rc != Z_OK)
			return GZ_EBACKEND;
		/* zlib's rule: a sync flush is done when deflate leaves output
		 * space unused. */
		if (f == Z_SYNC_FLUSH && z->zs.avail_out > 0) {
			z->synced = 1;
			return 0;
		}
		if (io->out_cap == 0 || z->stage_len > 0)
			return 0;
		if (f == Z_NO_FLUSH && io->in_len == 0)
			return 0;
		/* More input windows, or a flush or finish still in progress
		 * with output space left: go round again. */
	}
}

const struct gz_backend gz_backend_zlib = {
	.id = GZ_ID_ZLIB,
	.name = "zlib",
	.caps = GZ_CAP_ONESHOT | GZ_CAP_STREAM,
	.level_min = GZ_ZLIB_LEVEL_MIN,
	.level_max = GZ_ZLIB_LEVEL_MAX,
	.level_default = GZ_ZLIB_LEVEL_DEFAULT,
	.inst_nbytes = sizeof(struct gz_zlib),
	.global_alloc_init = NULL, /* zalloc/zfree are per stream */
	.init = gz_zlib_init,
	.fini = gz_zlib_fini,
	.bound = gz_zlib_bound,
	.compress = gz_zlib_compress,
	.reset = gz_zlib_reset,
	.stream = gz_zlib_stream,
};
