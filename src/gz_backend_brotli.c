/* gz_backend_brotli.c: the brotli ("br") content-coding backend (whole buffers and streams), built under HAVE_BROTLI. */
/*
 * Levels: brotli's own qualities 1-11 (default GZ_BROTLI_LEVEL_DEFAULT),
 * passed as BROTLI_PARAM_QUALITY unchanged. Quality 0 is not offered (0 is
 * never a level, gz_backend.h): quality 1 is nearly as fast and smaller.
 *
 * Format (RFC 7932, the "br" content coding of RFC 9110's registry): one
 * brotli stream per body, generic mode. A stream's window is
 * GZ_BROTLI_STREAM_LGWIN (512 KiB); a whole buffer's is the smallest
 * that holds it (at least 1 KiB), with the size as BROTLI_PARAM_SIZE_HINT,
 * which changes no byte a decoder needs and bounds the encoder's ring
 * buffer.
 *
 * Flushes: GZ_FLUSH_SYNC is BROTLI_OPERATION_FLUSH (the meta-block in
 * progress is closed and padded to a byte boundary: everything consumed
 * so far can be decoded), GZ_FLUSH_FINISH BROTLI_OPERATION_FINISH. brotli
 * forbids new input while a flush's output is still pending; stream()
 * hands pending output out (BrotliEncoderTakeOutput) before it takes any.
 *
 * Memory: every brotli allocation goes through gz_malloc (the allocator
 * given to BrotliEncoderCreateInstance). libbrotli 1.0.9 has no way to
 * reset an encoder, so each new stream or whole buffer after the first
 * replaces the encoder state: a brotli compressor allocates on every use
 * (the state itself, then its ring buffer and hash tables on first input),
 * and pooling it saves only the instance.
 *
 * Allocation failure: libbrotlienc 1.0.9 as Debian builds it (without
 * BROTLI_ENCODER_CLEANUP_ON_OOM) calls exit() when an allocation inside an
 * encoder fails; only the failure of the encoder state itself
 * (BrotliEncoderCreateInstance) comes back as an error, GZ_ENOMEM. An
 * application whose allocator may fail should not turn brotli on.
 */
#include "config.h"

#ifdef HAVE_BROTLI

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <brotli/encode.h>

#include "gz_error.h"
#include "gz_alloc.h"
#include "gz_backend.h"

/* The window of a stream, in bits (BROTLI_PARAM_LGWIN): a stream holds
 * its compressor for as long as it lasts, and brotli's default 4 MiB window
 * (22) costs about 10 MiB per open stream at quality 5. Larger: better
 * ratio on long streams; smaller: less memory per open stream. */
#ifndef GZ_BROTLI_STREAM_LGWIN
#define GZ_BROTLI_STREAM_LGWIN 19
#endif

/* See bench/README.md for the bench figures behind the default. */
#ifndef GZ_BROTLI_LEVEL_DEFAULT
#define GZ_BROTLI_LEVEL_DEFAULT 5
#endif
#define GZ_BROTLI_LEVEL_MIN 1
#define GZ_BROTLI_LEVEL_MAX 11

struct gz_brotli {
	struct gz_compressor base; /* first: the core casts between the two */
	BrotliEncoderState *st;
	/* st has taken input or produced output: replace it before a new
	 * stream or buffer. */
	int used;
	/* The stream is complete (BrotliEncoderIsFinished). */
	int ended;
	/* All input has been taken with a flush and no input since; pending
	 * output, if any, completes it. */
	int synced;
	/* compress() used the state; stream() refuses until reset(). */
	int need_reset;
};

/* A new encoder state for a body of size_hint bytes (0: unknown, a
 * stream), replacing the old one. 0 or GZ_ENOMEM / GZ_EBACKEND (the old
 * state is kept then). */
static int
gz_brotli_renew(struct gz_brotli *b, size_t size_hint)
{
	BrotliEncoderState *st = BrotliEncoderCreateInstance(gz_opaque_malloc, gz_opaque_free,
							     NULL);
	uint32_t lgwin = GZ_BROTLI_STREAM_LGWIN;
	int ok;

	if (!st)
		return GZ_ENOMEM;
	if (size_hint > 0) {
		/* The window holds (1 << lgwin) - 16 bytes (RFC 7932 9.1). */
		lgwin = BROTLI_MIN_WINDOW_BITS;
		while (lgwin < BROTLI_DEFAULT_WINDOW && ((size_t)1 << lgwin) - 16 < size_hint)
			lgwin++;
	}
	ok = BrotliEncoderSetParameter(st, BROTLI_PARAM_QUALITY, (uint32_t)b->base.level) &&
	     BrotliEncoderSetParameter(st, BROTLI_PARAM_LGWIN, lgwin) &&
	     BrotliEncoderSetParameter(st, BROTLI_PARAM_MODE, BROTLI_MODE_GENERIC);
	if (ok && size_hint > 0)
		ok = BrotliEncoderSetParameter(st, BROTLI_PARAM_SIZE_HINT,
					       size_hint > (1u << 30) ? (1u << 30)
								      : (uint32_t)size_hint);
	if (!ok) {
		BrotliEncoderDestroyInstance(st);
		return GZ_EBACKEND;
	}
	if (b->st)
		BrotliEncoderDestroyInstance(b->st);
	b->st = st;
	b->used = 0;
	return 0;
}

static int
gz_brotli_init(struct gz_compressor *c)
{
	return gz_brotli_renew((struct gz_brotli *)c, 0);
}

static void
gz_brotli_fini(struct gz_compressor *c)
{
	struct gz_brotli *b = (struct gz_brotli *)c;

	if (b->st)
		BrotliEncoderDestroyInstance(b->st);
	b->st = NULL;
}

static size_t
gz_brotli_bound(const struct gz_compressor *c, size_t in_len)
{
	/* 0 means the bound overflows; an empty input still takes a byte or
	 * two (an empty last meta-block). */
	size_t b = BrotliEncoderMaxCompressedSize(in_len);

	(void)c;
	if (b == 0 && in_len > 0)
		return SIZE_MAX;
	return b < 2 ? 2 : b;
}

static int
gz_brotli_compress(struct gz_compressor *c, const void *in, size_t in_len, void *out,
		   size_t out_cap, size_t *out_len_ret)
{
	struct gz_brotli *b = (struct gz_brotli *)c;
	size_t avail_in = in_len, avail_out = out_cap;
	const uint8_t *next_in = in_len ? in : NULL;
	uint8_t *next_out = out;
	int rc;

	if (out_cap == 0)
		return GZ_ENOSPC;
	b->need_reset = 1;
	b->ended = 0;
	b->synced = 0;
	rc = gz_brotli_renew(b, in_len ? in_len : 1);
	if (rc < 0)
		return rc;
	b->used = 1;
	/* One FINISH call takes all input; output beyond out_cap stays in
	 * the encoder, which is how a too small window shows. */
	if (!BrotliEncoderCompressStream(b->st, BROTLI_OPERATION_FINISH, &avail_in, &next_in,
					 &avail_out, &next_out, NULL))
		return GZ_EBACKEND;
	if (!BrotliEncoderIsFinished(b->st))
		return avail_out == 0 ? GZ_ENOSPC : GZ_EBACKEND;
	*out_len_ret = out_cap - avail_out;
	return 0;
}

static int
gz_brotli_reset(struct gz_compressor *c)
{
	struct gz_brotli *b = (struct gz_brotli *)c;
	int rc = b->used ? gz_brotli_renew(b, 0) : 0;

	if (rc < 0)
		return rc;
	b->ended = 0;
	b->synced = 0;
	b->need_reset = 0;
	return 0;
}

/* Hand out output the encoder holds, as much as fits. */
static void
gz_brotli_drain(struct gz_brotli *b, struct gz_io *io)
{
	while (io->out_cap > 0 && BrotliEncoderHasMoreOutput(b->st)) {
		size_t n = io->out_cap;
		const uint8_t *p = BrotliEncoderTakeOutput(b->st, &n);

		if (n == 0)
			break;
		memcpy(io->out, p, n);
		io->out += n;
		io->out_cap -= n;
	}
}

static int
gz_brotli_stream(struct gz_compressor *c, struct gz_io *io, enum gz_flush flush)
{
	struct gz_brotli *b = (struct gz_brotli *)c;
	BrotliEncoderOperation op;

	switch (flush) {
	case GZ_FLUSH_NONE:
		op = BROTLI_OPERATION_PROCESS;
		break;
	case GZ_FLUSH_SYNC:
		op = BROTLI_OPERATION_FLUSH;
		break;
	case GZ_FLUSH_FINISH:
		op = BROTLI_OPERATION_FINISH;
		break;
	default:
		return GZ_EINVAL;
	}
	if (b->need_reset)
		return GZ_EINVAL;
	if (b->ended)
		return GZ_STREAM_END;

	gz_brotli_drain(b, io);
	if (BrotliEncoderHasMoreOutput(b->st))
		return 0;
	if (BrotliEncoderIsFinished(b->st)) {
		b->ended = 1;
		return GZ_STREAM_END;
	}
	if (op == BROTLI_OPERATION_FLUSH && io->in_len == 0 && b->synced)
		return 0;

	for (;;) {
		size_t avail_in = io->in_len, avail_out = io->out_cap;
		const uint8_t *next_in = io->in_len ? io->in : NULL;
		uint8_t *next_out = io->out;
		size_t used, made;

		b->used = 1;
		/* A NULL output window with nothing of it: brotli keeps what it
		 * makes, and drain hands it out. */
		if (!BrotliEncoderCompressStream(b->st, op, &avail_in, &next_in, &avail_out,
						 &next_out, NULL))
			return GZ_EBACKEND;
		used = io->in_len - avail_in;
		made = io->out_cap - avail_out;
		io->in += used;
		io->in_len -= used;
		io->out += made;
		io->out_cap -= made;
		if (used)
			b->synced = 0;
		if (op == BROTLI_OPERATION_FINISH && BrotliEncoderIsFinished(b->st)) {
			b->ended = 1;
			return GZ_STREAM_END;
		}
		if (op == BROTLI_OPERATION_FLUSH && io->in_len == 0 &&
		    !BrotliEncoderHasMoreOutput(b->st)) {
			b->synced = 1;
			return 0;
		}
		if (op == BROTLI_OPERATION_PROCESS && io->in_len == 0)
			return 0;
		if (io->out_cap == 0)
			return 0;
		/* brotli stops with room left after a meta-block; never spin. */
		if (used == 0 && made == 0 && !BrotliEncoderHasMoreOutput(b->st))
			return op == BROTLI_OPERATION_PROCESS ? 0 : GZ_EBACKEND;
	}
}

const struct gz_backend gz_backend_brotli = {
	.id = GZ_ID_BROTLI,
	.name = "brotli",
	.caps = GZ_CAP_ONESHOT | GZ_CAP_STREAM,
	.level_min = GZ_BROTLI_LEVEL_MIN,
	.level_max = GZ_BROTLI_LEVEL_MAX,
	.level_default = GZ_BROTLI_LEVEL_DEFAULT,
	.inst_nbytes = sizeof(struct gz_brotli),
	.global_alloc_init = NULL, /* the allocator is per encoder */
	.init = gz_brotli_init,
	.fini = gz_brotli_fini,
	.bound = gz_brotli_bound,
	.compress = gz_brotli_compress,
	.reset = gz_brotli_reset,
	.stream = gz_brotli_stream,
	.coding = GZ_CODING_BR,
};

#endif /* HAVE_BROTLI */
