/* gz_backend_libdeflate.c: the libdeflate backend (whole buffers only), built under HAVE_LIBDEFLATE. */
/*
 * Levels: libdeflate's own 1-12 (default 6), passed to
 * libdeflate_alloc_compressor unchanged. 1-9 are roughly zlib's levels,
 * faster and with output no larger; 10-12 use near-optimal parsing (much
 * slower, a few percent smaller). Level 0 (stored) is not offered.
 *
 * Format: libdeflate_gzip_compress writes the RFC 1952 header with MTIME 0,
 * no name, XFL from the level and OS 255 (unknown), and the CRC-32/ISIZE
 * trailer. libdeflate has no streaming interface, so no GZ_CAP_STREAM.
 *
 * Memory: the instance plus one libdeflate block whose size depends on the
 * level (hash tables and match finder): 2 allocations, 198 KiB at level 1,
 * 653 KiB at 2-9, 8.6 MiB at 10-12 (libdeflate 1.14, x86-64). Compressing
 * allocates nothing.
 *
 * Allocator: with libdeflate_alloc_compressor_ex (libdeflate 1.19 and later;
 * configure's link test defines HAVE_LIBDEFLATE_ALLOC_COMPRESSOR_EX), each
 * compressor is given gz_malloc/gz_free in its struct libdeflate_options,
 * and libdeflate's process-wide allocator is never touched: the
 * application's own libdeflate compressors keep whatever allocator it
 * chose, and ours follow the core's hook from the first one on. Older
 * libdeflate (1.14) has only the process-wide
 * libdeflate_set_memory_allocator, shared with any other libdeflate user in
 * the process: it is routed through gz_malloc only once the application
 * installs an allocator of its own (global_alloc_init below), and from
 * then on serves the application's compressors too (mhdgz_set_allocator
 * says so). test_set_allocator_libdeflate_own (check_negotiate.c) pins the
 * first; check_alloc.c's fault injection covers both.
 */
#include "config.h"

#ifdef HAVE_LIBDEFLATE

#include <stddef.h>
#include <string.h>

#include <libdeflate.h>

#include "gz_error.h"
#include "gz_alloc.h"
#include "gz_backend.h"

#define GZ_LIBDEFLATE_LEVEL_MIN 1
#define GZ_LIBDEFLATE_LEVEL_MAX 12
/* 5, not libdeflate's own 6: on the benchmark payload it takes 0.70x of
 * level 6's time at 20 KiB and 100 KiB for 0.9-1.1 % more bytes, and its
 * output is still smaller than Go gzhttp's default (klauspost level 5)
 * at 2k, 20k and 100k (bench/README.md, make bench-compare). */
#define GZ_LIBDEFLATE_LEVEL_DEFAULT 5

struct gz_libdeflate {
	struct gz_compressor base; /* first: the core casts between the two */
	struct libdeflate_compressor *ld;
};

static int
gz_libdeflate_init(struct gz_compressor *c)
{
	struct gz_libdeflate *d = (struct gz_libdeflate *)c;
#ifdef HAVE_LIBDEFLATE_ALLOC_COMPRESSOR_EX
	struct libdeflate_options opts;

	memset(&opts, 0, sizeof opts);
	opts.sizeof_options = sizeof opts;
	opts.malloc_func = gz_malloc;
	opts.free_func = gz_free; /* kept in the compressor, which frees itself with it */
	d->ld = libdeflate_alloc_compressor_ex(c->level, &opts);
#else
	d->ld = libdeflate_alloc_compressor(c->level);
#endif
	/* The level was checked by gz_compressor_new, so NULL can only mean
	 * the allocation failed. */
	if (!d->ld)
		return GZ_ENOMEM;
	return 0;
}

static void
gz_libdeflate_fini(struct gz_compressor *c)
{
	struct gz_libdeflate *d = (struct gz_libdeflate *)c;

	libdeflate_free_compressor(d->ld);
	d->ld = NULL;
}

static size_t
gz_libdeflate_bound(const struct gz_compressor *c, size_t in_len)
{
	const struct gz_libdeflate *d = (const struct gz_libdeflate *)c;

	return libdeflate_gzip_compress_bound(d->ld, in_len);
}

static int
gz_libdeflate_compress(struct gz_compressor *c, const void *in, size_t in_len, void *out,
		       size_t out_cap, size_t *out_len_ret)
{
	struct gz_libdeflate *d = (struct gz_libdeflate *)c;
	size_t n;

	/* 0 is libdeflate's only failure: the output did not fit (a gzip
	 * member is never empty). The compressor keeps no per-call state. */
	n = libdeflate_gzip_compress(d->ld, in, in_len, out, out_cap);
	if (n == 0)
		return GZ_ENOSPC;
	*out_len_ret = n;
	return 0;
}

#ifndef HAVE_LIBDEFLATE_ALLOC_COMPRESSOR_EX
/* Only without libdeflate_alloc_compressor_ex. libdeflate 1.14's allocator
 * must not change while one of its compressors exists (it frees with the
 * current one); gz_malloc/gz_free read the core's hook on every call, so
 * libdeflate is pointed at them once and never again. */
static void
gz_libdeflate_global_alloc_init(void *(*malloc_fn)(size_t nbytes), void (*free_fn)(void *ptr))
{
	libdeflate_set_memory_allocator(malloc_fn, free_fn);
}
#define GZ_LIBDEFLATE_GLOBAL_ALLOC_INIT gz_libdeflate_global_alloc_init
#else
#define GZ_LIBDEFLATE_GLOBAL_ALLOC_INIT NULL /* the allocator is per compressor */
#endif

const struct gz_backend gz_backend_libdeflate = {
	.id = GZ_ID_LIBDEFLATE,
	.name = "libdeflate",
	.caps = GZ_CAP_ONESHOT,
	.level_min = GZ_LIBDEFLATE_LEVEL_MIN,
	.level_max = GZ_LIBDEFLATE_LEVEL_MAX,
	.level_default = GZ_LIBDEFLATE_LEVEL_DEFAULT,
	.inst_nbytes = sizeof(struct gz_libdeflate),
	.global_alloc_init = GZ_LIBDEFLATE_GLOBAL_ALLOC_INIT,
	.init = gz_libdeflate_init,
	.fini = gz_libdeflate_fini,
	.bound = gz_libdeflate_bound,
	.compress = gz_libdeflate_compress,
	.reset = NULL,
	.stream = NULL,
};

#endif /* HAVE_LIBDEFLATE */
