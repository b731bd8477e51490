/* gz_backend.h: the backend-neutral compressor interface (vtable + registry). */
#ifndef GZ_BACKEND_H
#define GZ_BACKEND_H

#include <stddef.h>
#include <stdint.h>

/* Capability bits of a backend. */
#define GZ_CAP_ONESHOT 0x1u /* compress(): a whole buffer into one gzip member */
#define GZ_CAP_STREAM 0x2u  /* stream(): incremental input/output, sync flush */

/* Flush modes for stream(). */
enum gz_flush {
	GZ_FLUSH_NONE = 0,  /* compress as input allows; output may lag input */
	GZ_FLUSH_SYNC = 1,  /* emit all input so far, ending on a byte boundary */
	GZ_FLUSH_FINISH = 2 /* no more input: emit everything and the gzip trailer */
};

/* Normal (positive) event returned by stream(): the trailer has been written. */
#define GZ_STREAM_END 1

struct gz_backend;

/*
 * Common base of every compressor instance; each backend's instance struct
 * embeds it as its first member, so a struct gz_compressor * can be cast to
 * the backend's own type. The backend and level are fixed at creation.
 */
struct gz_compressor {
	const struct gz_backend *be;
	int level;
	struct gz_compressor *pool_next; /* link while idle in a compressor pool */
	uint64_t pool_idle_since_us;     /* monotonic time of its put, while idle */
	/* The thread that last put it back (gz_pool.c's key for the calling
	 * thread; 0 = none yet): a get prefers its own, cache-warm one. */
	uintptr_t pool_owner;
	/* Output scratch space kept with the compressor (and so across uses
	 * in the compressor pool): whole-buffer users compress into it and copy
	 * the exact result out, so a warm compressor allocates nothing. */
	uint8_t *scratch;
	size_t scratch_cap; /* bytes at scratch */
	/* Stream memory, fixed at creation (gz_compressor_new_win); 0 = the
	 * backend's default. window_bits 9-15: a 2^window_bits-byte history
	 * (zlib windowBits, ISA-L hist_bits). mem_level 1-9: zlib's memLevel
	 * (hash table and pending buffer 2^(mem_level+9) bytes); ISA-L sizes
	 * its level buffer from it. One-shot-only backends ignore both. */
	int window_bits;
	int mem_level;
};

/* Ranges of gz_compressor.window_bits and mem_level (0: default). */
#define GZ_WINDOW_BITS_MIN 9
#define GZ_WINDOW_BITS_MAX 15
#define GZ_MEM_LEVEL_MIN 1
#define GZ_MEM_LEVEL_MAX 9

/*
 * Streaming I/O window, same contract as zlib's z_stream next/avail fields:
 * stream() consumes from in and writes to out, advancing the pointers and
 * decrementing the lengths. out_cap may be as small as 1 byte; output that
 * does not fit is kept inside the compressor until the next call.
 */
struct gz_io {
	const uint8_t *in;
	size_t in_len; /* bytes available at in */
	uint8_t *out;
	size_t out_cap; /* bytes of space at out */
};

/*
 * A backend: a static const table. The core checks caps, never NULL pointers:
 * a backend without GZ_CAP_STREAM has stream == NULL, and the caller must not
 * call it.
 */
/* Backend ids: the values of the public enum mhdgz_backend (the handler
 * checks that they agree at compile time). 0 is "the default", which is
 * not a backend but the first of gz_backends[]. */
#define GZ_ID_ZLIB 1
#define GZ_ID_LIBDEFLATE 2
#define GZ_ID_ISAL 3
/* The backends of the other content codings (not in gz_backends[]). */
#define GZ_ID_ZSTD 4
#define GZ_ID_BROTLI 5

/*
 * Content codings (RFC 9110 section 8.4.1, the IANA HTTP Content Coding
 * Registry) a backend produces. Zero is gzip, so a backend table that does
 * not set .coding is a gzip one. Values are the public enum mhdgz_coding's
 * (checked by the handler at compile time).
 */
enum gz_coding {
	GZ_CODING_GZIP = 0, /* RFC 9110 section 8.4.1.3: one RFC 1952 member */
	GZ_CODING_ZSTD = 1, /* RFC 8878 + RFC 9659: one frame, window <= 8 MiB */
	GZ_CODING_BR = 2,   /* RFC 7932: one brotli stream */
	GZ_CODING_COUNT
};

/*
 * Levels: one convention for every backend, public and internal alike: 1 is
 * the fastest, higher is smaller output, and 0 is never a level (the public
 * options use it for "the default"). zlib's and libdeflate's levels are
 * their own numbers; a library whose scale starts at 0 (ISA-L igzip 0-3) is
 * shifted up by one (1-4) in its backend file.
 */
struct gz_backend {
	int id;            /* GZ_ID_* */
	const char *name;  /* "zlib", "libdeflate", "isal" */
	unsigned int caps; /* GZ_CAP_* */
	int level_min;     /* level range, inclusive (see above), >= 1 */
	int level_max;
	int level_default;
	size_t inst_nbytes; /* sizeof the backend's instance struct */

	/* Per-backend global set-up, or NULL: route the library's process-wide
	 * allocator through the given functions, for a library that cannot
	 * take one per object (libdeflate without
	 * libdeflate_alloc_compressor_ex). Run once per process by
	 * gz_alloc_set_hook, the first time a hook is installed. */
	void (*global_alloc_init)(void *(*malloc_fn)(size_t nbytes), void (*free_fn)(void *ptr));

	/* Set up a zero-filled instance of inst_nbytes (base already filled in).
	 * Returns 0 or GZ_ENOMEM / GZ_EBACKEND; on error fini is not
	 * called, so init cleans up after itself. */
	int (*init)(struct gz_compressor *c);
	/* Release everything init and use allocated (not the instance itself). */
	void (*fini)(struct gz_compressor *c);

	/* Worst-case size in bytes of one gzip member for in_len input bytes. */
	size_t (*bound)(const struct gz_compressor *c, size_t in_len);

	/* GZ_CAP_ONESHOT: compress in[0..in_len) into one complete gzip member
	 * (RFC 1952: MTIME 0, no name, CRC-32 and ISIZE trailer) at out.
	 * Returns 0 and *out_len_ret, GZ_ENOSPC if out_cap is too small, or
	 * GZ_EBACKEND / GZ_ENOMEM. Never writes beyond out + out_cap and (the
	 * gzip backends) allocates nothing; zstd sizes its workspace on first
	 * use and brotli makes a new encoder per body (their files say more). Leaves the compressor ready for another compress();
	 * any stream in progress is abandoned, and stream() returns
	 * GZ_EINVAL until reset() is called. */
	int (*compress)(struct gz_compressor *c, const void *in, size_t in_len, void *out,
			size_t out_cap, size_t *out_len_ret);

	/* GZ_CAP_STREAM: start a new gzip member (discarding any stream state).
	 * A compressor fresh from gz_compressor_new is already at the start of
	 * a member. */
	int (*reset)(struct gz_compressor *c);
	/* GZ_CAP_STREAM: advance the stream. Returns 0 (progress made or more
	 * output space needed), GZ_STREAM_END once the trailer has been fully
	 * written (only with GZ_FLUSH_FINISH; later calls keep returning it and
	 * write nothing), or a negative MHDGZ_E* code (GZ_EINVAL for a flush
	 * value outside enum gz_flush). Never writes beyond out + out_cap and
	 * (the gzip backends) allocates nothing; zstd and brotli allocate their
	 * stream buffers with the stream's first input.
	 * A sync flush is complete when the call returns with io->in_len == 0
	 * and io->out_cap > 0: every byte consumed so far can then be decoded
	 * from the output. Repeating GZ_FLUSH_SYNC with no new input after that
	 * writes nothing, so a caller may always loop "until in_len == 0 and
	 * out_cap > 0", even with a 1-byte window. */
	int (*stream)(struct gz_compressor *c, struct gz_io *io, enum gz_flush flush);

	/* The content coding of what compress() and stream() produce; zero
	 * (GZ_CODING_GZIP) for the gzip backends. For the other codings,
	 * "member" above reads "frame" (zstd) or "stream" (brotli), "sync
	 * flush" a zstd block flush or a brotli BROTLI_OPERATION_FLUSH, and
	 * "trailer" the end of the frame or stream. */
	enum gz_coding coding;
};

/* The backend tables, one per gz_backend_<name>.c, each existing only
 * under its HAVE_<LIB> (zlib is always built: it is the streaming
 * fallback). Prefer the registry and its lookups. */
extern const struct gz_backend gz_backend_zlib;
#ifdef HAVE_LIBDEFLATE
extern const struct gz_backend gz_backend_libdeflate;
#endif
#ifdef HAVE_ISAL
extern const struct gz_backend gz_backend_isal;
#endif

#ifdef HAVE_ZSTD
extern const struct gz_backend gz_backend_zstd;
/* A libzstd error code (ZSTD_isError(r)) as ours: GZ_ENOMEM, GZ_ENOSPC or
 * GZ_EBACKEND (gz_backend_zstd.c; gz_dict.c uses it too). */
int gz_zstd_err(size_t r);
#endif
#ifdef HAVE_BROTLI
extern const struct gz_backend gz_backend_brotli;
#endif

/* The registry, in preference order: libdeflate, isal, zlib (those
 * compiled in). NULL-terminated. The first is the default backend. */
extern const struct gz_backend *const gz_backends[];

/* The backends of the codings other than gzip that were compiled in (zstd,
 * brotli), NULL-terminated. Kept apart from gz_backends[], which are the
 * gzip backends: lookups by name or id and the default stay gzip's. */
extern const struct gz_backend *const gz_coding_backends[];
/* The backend of a coding other than gzip, NULL if it was not compiled in;
 * for GZ_CODING_GZIP the default (gzip) backend. Never NULL for gzip. */
const struct gz_backend *gz_backend_for_coding(enum gz_coding coding);
/* The coding's token as Content-Encoding carries it: "gzip", "zstd",
 * "br"; NULL for a value out of range. */
const char *gz_coding_name(enum gz_coding coding);

/* The default backend: gz_backends[0]. Never NULL. */
const struct gz_backend *gz_backend_default(void);
/* Look a backend up by name (case-sensitive) or by GZ_ID_*; NULL if not
 * compiled in, unknown, or name is NULL. */
const struct gz_backend *gz_backend_find(const char *name);
const struct gz_backend *gz_backend_by_id(int id);
/* The backend that compresses streams for be: be itself if it streams,
 * else zlib (the one backend always built). Its level for be's level is
 * gz_stream_level(). */
const struct gz_backend *gz_stream_backend(const struct gz_backend *be);
/*
 * The level at which gz_stream_backend(be) compresses streams for be at
 * level: the same number, capped at the stream backend's maximum.
 * libdeflate's levels were designed to track zlib's ratios level for
 * level, and its 10-12 (slow near-optimal parsing) have no zlib
 * counterpart, so they stream at zlib 9.
 */
int gz_stream_level(const struct gz_backend *be, int level);

/* Create a compressor of backend be at a native level. Returns 0 and
 * *c_ret, GZ_EINVAL for a level outside [level_min, level_max] (never
 * clamped), GZ_ENOMEM or GZ_EBACKEND. The caller owns *c_ret and
 * releases it with gz_compressor_free. */
int gz_compressor_new(const struct gz_backend *be, int level, struct gz_compressor **c_ret);
/* gz_compressor_new with stream memory settings (struct gz_compressor:
 * window_bits 0 or 9-15, mem_level 0 or 1-9; 0 = the backend's default).
 * GZ_EINVAL for a value out of range, else as gz_compressor_new. */
int gz_compressor_new_win(const struct gz_backend *be, int level, int window_bits, int mem_level,
			  struct gz_compressor **c_ret);
/* Release a compressor (and its scratch space); NULL is a no-op. */
void gz_compressor_free(struct gz_compressor *c);
/* Make c->scratch hold at least nbytes. Returns 0 or GZ_ENOMEM (the old
 * scratch, if any, is kept). */
int gz_compressor_scratch(struct gz_compressor *c, size_t nbytes);

/*
 * RFC 1952 section 2.3.1: a member header with a comment (FCOMMENT) of
 * comment_nbytes bytes: comment_nbytes - 1 spaces and the terminating NUL
 * (ISO 8859-1 text without an inner NUL, which every gzip decoder skips).
 * The gzip backends write a plain 10-byte header (no FEXTRA, FNAME or
 * FHCRC; FTEXT at most); the core rewrites it, here and in the stream pump
 * (gz_pump_set_comment). BREACH length hiding carries its padding so.
 */
#define GZ_HEADER_NBYTES 10
/* The comment header at out[0 .. GZ_HEADER_NBYTES + comment_nbytes) from
 * the plain header hdr[0 .. GZ_HEADER_NBYTES): bytes [from, from + n) of
 * it, so that it can go out in pieces. GZ_EINVAL if hdr is not a plain
 * member header or comment_nbytes is 0. */
int gz_header_comment(const uint8_t *hdr, size_t comment_nbytes, size_t from, uint8_t *out,
		      size_t n);
/*
 * compress() of a gzip backend into one member whose header carries a
 * comment of comment_nbytes (0: none, as compress() alone): the member at
 * out, *out_len_ret bytes, out_cap at least gz_bound(c, in_len) +
 * comment_nbytes. Returns as compress(); GZ_EINVAL for a comment on a
 * coding other than gzip or a backend header that is not plain.
 */
int gz_compress_member(struct gz_compressor *c, const void *in, size_t in_len,
		       size_t comment_nbytes, uint8_t *out, size_t out_cap, size_t *out_len_ret);

/* Convenience wrappers (no switch on the backend; they go through the table). */
static inline size_t
gz_bound(const struct gz_compressor *c, size_t in_len)
{
	return c->be->bound(c, in_len);
}

#endif /* GZ_BACKEND_H */
