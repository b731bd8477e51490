/* gz_backend_isal.c: the ISA-L igzip backend (one-shot and streaming), built under HAVE_ISAL. */
/*
 * Levels: 1-4 (default 2), ISA-L's own 0-3 shifted up by one so that 0 is
 * never a level (gz_backend.h). ISA-L level 0 (our 1) uses a fixed trained
 * Huffman table and a small hash (fastest, weakest; on incompressible data
 * it expands by about a quarter when streaming); 1-3 build per-block
 * Huffman codes in a level buffer. Below, "level 0-3" means ISA-L's.
 *
 * Determinism: on x86-64, ISA-L's levels 1 and 2 are not deterministic, so
 * our 2 and 3 compress with its level 3 (gz_isal_native()). Their assembly
 * bodies (isal_deflate_icf_body_hash_hist_01/02/04 in ISA-L 2.30), at the
 * start of a block without history (IGZIP_NO_HIST: every one-shot member,
 * every stream's first block), emit the first byte as a literal and then
 * hash the third byte from register rcx, which still holds the
 * isal_zstream pointer, not the input: the third position goes into bucket
 * crc32c(stream address >> 16) & hash_mask instead of its own. Matches are
 * verified against the data, so the member stays valid, but which ones are
 * found, and so the bytes, depend on where the compressor lives: found
 * because tests/check_pool.c saw pooled compressors produce different
 * members for one input (one fixed, zero-filled input and stream state at
 * addresses with different hash buckets give different output; equal
 * buckets, equal output; ISA-L's C bodies, swapped in, give one output for
 * every address). Not a race and not state left in the level buffer.
 * Identical input must give identical bytes (MHDGZ_ETAG_KEEP, the gzip
 * length remembered by ETag, the compress-once cache), so levels 2-4 are
 * the same compressor here: level 3 (hash map, lazy matching) is
 * deterministic and compresses a little better, at about half the speed on
 * large bodies (ISA-L 2.30 here, 127 KiB of JSON: 170 against 380 MB/s,
 * 18.4 against 19.0 % of the input; equal speed at 400 bytes). Other
 * architectures run ISA-L's C bodies, which are deterministic: there the
 * levels are ISA-L's own.
 *
 * Format: gzip_flag IGZIP_GZIP makes ISA-L write its generic RFC 1952
 * header, 1f 8b 08 00 00000000 00 ff (FLG 0, MTIME 0, XFL 0, OS 255), and
 * the CRC-32/ISIZE trailer. That header is already what we want, so it is
 * not written by hand.
 *
 * One-shot: isal_deflate_stateless, which on overflow falls back to stored
 * blocks; so an output buffer of gz_isal_bound() bytes always suffices.
 * It measured as fast as the streaming path with end_of_stream set (ISA-L
 * 2.30, 2 KiB to 1 MiB text), and only it has that tight bound: the
 * streaming level 0 can expand random data by ~23%. ISA-L's counters are
 * 32-bit, so one-shot input is limited to UINT32_MAX bytes (GZ_EINVAL
 * beyond; use the stream interface).
 *
 * Streaming: isal_deflate with flush NO_FLUSH/SYNC_FLUSH and
 * end_of_stream. ISA-L itself buffers output when fewer than 8 bytes of
 * space are given, so 1-byte windows work without staging here.
 *
 * Memory: the instance (80.5 KiB, mostly the isal_zstream's history
 * buffer) plus, for levels 1-3, a level buffer of ISAL_DEF_LVLx_DEFAULT
 * bytes (276, 324 and 340 KiB; 340 for our 2-4 on x86-64) from gz_malloc:
 * 1 allocation at level 0, 2 at 1-3 (ISA-L 2.30). Nothing is allocated
 * afterwards.
 */
#include "config.h"

#ifdef HAVE_ISAL

#include <stddef.h>
#include <stdint.h>

#include <isa-l/igzip_lib.h>
#ifdef HAVE_VALGRIND_MEMCHECK_H
#include <valgrind/memcheck.h>
#endif

#include "gz_error.h"
#include "gz_alloc.h"
#include "gz_backend.h"

/* Our levels (ISA-L's + 1) and the conversion. */
#define GZ_ISAL_LEVEL_MIN (ISAL_DEF_MIN_LEVEL + 1)
#define GZ_ISAL_LEVEL_MAX (ISAL_DEF_MAX_LEVEL + 1)
#define GZ_ISAL_LEVEL_DEFAULT 2

/* 1: our levels 2-3 compress with ISA-L's level 3, deterministic; 0: with
 * ISA-L's 1-2, faster on large bodies, but on x86-64 (ISA-L 2.30, see the
 * top of this file) the bytes then depend on the compressor's address.
 * Set 0 only with an ISA-L whose bodies are fixed. */
#ifndef GZ_ISAL_DETERMINISTIC
#if defined(__x86_64__)
#define GZ_ISAL_DETERMINISTIC 1
#else
#define GZ_ISAL_DETERMINISTIC 0
#endif
#endif

/* ISA-L's level for one of ours. */
static int
gz_isal_native(int level)
{
	if (GZ_ISAL_DETERMINISTIC && (level == 2 || level == 3))
		return 3;
	return level - 1;
}

/* RFC 1952 wrapper sizes and the stored-block format ISA-L falls back to
 * (RFC 1951 section 3.2.4): 5 header bytes per block of at most 65535. */
#define GZ_ISAL_GZIP_HDR_NBYTES 10
#define GZ_ISAL_GZIP_TRL_NBYTES 8
#define GZ_ISAL_STORED_HDR_NBYTES 5
#define GZ_ISAL_STORED_MAX_NBYTES 65535

_Static_assert(ISAL_DEF_MIN_LEVEL == 0 && ISAL_DEF_MAX_LEVEL == 3,
	       "gz_isal_level_buf_nbytes[] covers ISA-L levels 0-3");

/* Level buffer per level: ISA-L's suggested ("DEFAULT", i.e. LARGE) size.
 * Smaller sizes work but split the input into more, smaller blocks. */
static const uint32_t gz_isal_level_buf_nbytes[] = {
	ISAL_DEF_LVL0_DEFAULT,
	ISAL_DEF_LVL1_DEFAULT,
	ISAL_DEF_LVL2_DEFAULT,
	ISAL_DEF_LVL3_DEFAULT,
};
/* ISA-L's smallest level buffers, for a mem_level below 8 (streams of
 * small flushes, where every flush ends a block anyway): the hash table
 * plus 1 Ki tokens. The isal_zstream (80.5 KiB) does not shrink. */
static const uint32_t gz_isal_level_buf_min_nbytes[] = {
	ISAL_DEF_LVL0_MIN,
	ISAL_DEF_LVL1_MIN,
	ISAL_DEF_LVL2_MIN,
	ISAL_DEF_LVL3_MIN,
};

/* Bytes of the level buffer of compressor c at ISA-L level native. */
static uint32_t
gz_isal_level_buf_size(const struct gz_compressor *c, int native)
{
	if (c->mem_level != 0 && c->mem_level < 8)
		return gz_isal_level_buf_min_nbytes[native];
	return gz_isal_level_buf_nbytes[native];
}

struct gz_isal {
	struct gz_compressor base; /* first: the core casts between the two */
	uint8_t *level_buf;        /* NULL for level 0 */
	/* isal_deflate reached ZSTATE_END: the trailer is fully written. */
	int ended;
	/* A sync flush completed and no input has been consumed since: a
	 * repeated GZ_FLUSH_SYNC must not reach isal_deflate, which would
	 * start another block. */
	int synced;
	/* compress() used the stream struct; stream() refuses until reset(). */
	int need_reset;
	struct isal_zstream zs;
};

/* Set the caller-owned fields of the stream; isal_deflate_init and the
 * stateless init clear them, and ISA-L rewrites gzip_flag once it has
 * written the header. */
static void
gz_isal_setup(struct gz_isal *z)
{
	int level = gz_isal_native(z->base.level);

	z->zs.level = (uint32_t)level;
	z->zs.level_buf = z->level_buf;
	z->zs.level_buf_size = z->level_buf ? gz_isal_level_buf_size(&z->base, level) : 0;
	z->zs.gzip_flag = IGZIP_GZIP;
	z->zs.hist_bits = (uint16_t)z->base.window_bits; /* 0: full 32 KiB window */
	z->zs.flush = NO_FLUSH;
	z->zs.end_of_stream = 0;
	z->ended = 0;
	z->synced = 0;
	z->need_reset = 0;
}

static int
gz_isal_init(struct gz_compressor *c)
{
	struct gz_isal *z = (struct gz_isal *)c;
	uint32_t nbytes = gz_isal_level_buf_size(c, gz_isal_native(c->level));

	if (nbytes) {
		/* Not zeroed: ISA-L reads hash entries here before writing them
		 * but checks every candidate match against the data, so the
		 * initial contents never change the output (filled with 0x00,
		 * 0xff or random bytes, level 1-3 output is byte-identical).
		 * valgrind cannot know that and would trace the "uninitialised"
		 * bytes into the compressed output; under valgrind they are
		 * declared defined (a no-op otherwise). */
		z->level_buf = gz_malloc(nbytes);
		if (!z->level_buf)
			return GZ_ENOMEM;
#ifdef HAVE_VALGRIND_MEMCHECK_H
		VALGRIND_MAKE_MEM_DEFINED(z->level_buf, nbytes);
#endif
	}
	isal_deflate_init(&z->zs);
	gz_isal_setup(z);
	return 0;
}

static void
gz_isal_fini(struct gz_compressor *c)
{
	struct gz_isal *z = (struct gz_isal *)c;

	gz_free(z->level_buf);
	z->level_buf = NULL;
}

static size_t
gz_isal_bound(const struct gz_compressor *c, size_t in_len)
{
	size_t blocks = in_len / GZ_ISAL_STORED_MAX_NBYTES + 1;

	(void)c;
	/* What isal_deflate_stateless needs to fall back to stored blocks:
	 * header, trailer, and 5 bytes per stored block (one block even for
	 * empty input; the +1 over-counts by one block when in_len is a
	 * nonzero multiple of 65535). */
	if (in_len > SIZE_MAX - GZ_ISAL_STORED_HDR_NBYTES * blocks - GZ_ISAL_GZIP_HDR_NBYTES -
			     GZ_ISAL_GZIP_TRL_NBYTES)
		return SIZE_MAX;
	return in_len + GZ_ISAL_STORED_HDR_NBYTES * blocks + GZ_ISAL_GZIP_HDR_NBYTES +
	       GZ_ISAL_GZIP_TRL_NBYTES;
}

static int
gz_isal_compress(struct gz_compressor *c, const void *in, size_t in_len, void *out, size_t out_cap,
		 size_t *out_len_ret)
{
	struct gz_isal *z = (struct gz_isal *)c;
	int rc;

	if (in_len > UINT32_MAX)
		return GZ_EINVAL;
	/* The stateless path shares the stream struct: the stream state is
	 * gone after this, hence reset() before the next stream(). */
	isal_deflate_stateless_init(&z->zs);
	gz_isal_setup(z);
	z->need_reset = 1;
	/* ISA-L never writes through next_in. */
	z->zs.next_in = (uint8_t *)(uintptr_t)in;
	z->zs.avail_in = (uint32_t)in_len;
	z->zs.next_out = out;
	z->zs.avail_out = out_cap > UINT32_MAX ? UINT32_MAX : (uint32_t)out_cap;
	rc = isal_deflate_stateless(&z->zs);
	if (rc == STATELESS_OVERFLOW)
		return GZ_ENOSPC;
	if (rc != COMP_OK)
		return GZ_EBACKEND;
	*out_len_ret = z->zs.total_out;
	return 0;
}

static int
gz_isal_reset(struct gz_compressor *c)
{
	struct gz_isal *z = (struct gz_isal *)c;

	isal_deflate_reset(&z->zs);
	gz_isal_setup(z);
	return 0;
}

static int
gz_isal_stream(struct gz_compressor *c, struct gz_io *io, enum gz_flush flush)
{
	struct gz_isal *z = (struct gz_isal *)c;

	if ((flush != GZ_FLUSH_NONE && flush != GZ_FLUSH_SYNC && flush != GZ_FLUSH_FINISH) ||
	    z->need_reset)
		return GZ_EINVAL;
	if (z->ended)
		return GZ_STREAM_END;
	if (flush == GZ_FLUSH_SYNC && io->in_len == 0 && z->synced)
		return 0;

	for (;;) {
		uint32_t in_win = io->in_len > UINT32_MAX ? UINT32_MAX : (uint32_t)io->in_len;
		uint32_t out_win = io->out_cap > UINT32_MAX ? UINT32_MAX : (uint32_t)io->out_cap;
		/* A flush or the end applies only once all input is in the window. */
		int last = in_win == io->in_len;
		uint16_t isal_flush = (flush == GZ_FLUSH_SYNC && last) ? SYNC_FLUSH : NO_FLUSH;
		uint16_t eos = flush == GZ_FLUSH_FINISH && last;
		int state0 = z->zs.internal_state.state;
		size_t used, made;
		int rc;

		/* A flush whose last bytes wait in ISA-L's tmp_out_buff (the
		 * window ended inside them: ZSTATE_TMP_NEW_HDR) is complete once
		 * they are out. Given more room than that, ISA-L 2.30 goes on to
		 * start a new, empty block (~120 bytes at level 0), and when the
		 * window size repeats the flush never completes: found by
		 * tests/fuzz/fuzz_stream (windows of 2, 3 or 117 bytes). So it
		 * gets exactly the pending bytes; it then returns at avail_out 0
		 * in ZSTATE_NEW_HDR. */
		if (isal_flush == SYNC_FLUSH && in_win == 0 &&
		    z->zs.internal_state.state == ZSTATE_TMP_NEW_HDR) {
			uint32_t pending = z->zs.internal_state.tmp_out_end -
					   z->zs.internal_state.tmp_out_start;
			if (pending > 0 && pending < out_win)
				out_win = pending;
		}
		if (out_win == 0)
			return 0;
		z->zs.next_in = (uint8_t *)(uintptr_t)io->in;
		z->zs.avail_in = in_win;
		z->zs.next_out = io->out;
		z->zs.avail_out = out_win;
		z->zs.flush = isal_flush;
		z->zs.end_of_stream = eos;
		rc = isal_deflate(&z->zs);
		used = in_win - z->zs.avail_in;
		made = out_win - z->zs.avail_out;
		io->in += used;
		io->in_len -= used;
		io->out += made;
		io->out_cap -= made;
		if (used)
			z->synced = 0;
		if (rc != COMP_OK)
			return GZ_EBACKEND;

		if (z->zs.internal_state.state == ZSTATE_END) {
			z->ended = 1;
			return GZ_STREAM_END;
		}
		/* ISA-L's rule (igzip_lib.h): a flush is complete when output
		 * space is left or the state is back at ZSTATE_NEW_HDR; the
		 * second covers a flush that ends exactly at the window's end. */
		if (isal_flush == SYNC_FLUSH && io->in_len == 0 &&
		    (io->out_cap > 0 || z->zs.internal_state.state == ZSTATE_NEW_HDR)) {
			z->synced = 1;
			return 0;
		}
		if (io->out_cap == 0)
			return 0;
		if (isal_flush == NO_FLUSH && !eos && io->in_len == 0)
			return 0;
		/* Output space left, yet input or a flush or finish pending:
		 * go round again, unless ISA-L did nothing at all, which with
		 * space available would repeat forever. */
		if (!used && !made && (int)z->zs.internal_state.state == state0)
			return GZ_EBACKEND;
	}
}

const struct gz_backend gz_backend_isal = {
	.id = GZ_ID_ISAL,
	.name = "isal",
	.caps = GZ_CAP_ONESHOT | GZ_CAP_STREAM,
	.level_min = GZ_ISAL_LEVEL_MIN,
	.level_max = GZ_ISAL_LEVEL_MAX,
	.level_default = GZ_ISAL_LEVEL_DEFAULT,
	.inst_nbytes = sizeof(struct gz_isal),
	.global_alloc_init = NULL, /* ISA-L allocates nothing itself */
	.init = gz_isal_init,
	.fini = gz_isal_fini,
	.bound = gz_isal_bound,
	.compress = gz_isal_compress,
	.reset = gz_isal_reset,
	.stream = gz_isal_stream,
};

#endif /* HAVE_ISAL */
