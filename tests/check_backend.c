/* check_backend.c: Check suite for the backends' one-shot path: round trips, levels, ENOSPC, reuse. */
#include "config.h"

#include <check.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "gz_error.h"
#include "gz_alloc.h"
#include "gz_backend.h"
#include "check_suites.h"
#include "testutil.h"

/* Guard bytes after every output window; a write past out_cap shows up here. */
#define CANARY_NBYTES 32
#define CANARY_BYTE 0xa5

/* Body sizes of the round-trip matrix, in bytes. */
static const size_t rt_sizes[] = { 0, 1, 100, 2048, 20480, 102400, 1048576 };
#define RT_NSIZES (sizeof rt_sizes / sizeof rt_sizes[0])
#define RT_BIG ((size_t)1048576)

static const enum tu_kind rt_kinds[] = { TU_TEXT, TU_JSON, TU_RANDOM };
#define RT_NKINDS (sizeof rt_kinds / sizeof rt_kinds[0])

/* (backend, level) pairs over every compiled backend and every level. */
static size_t
pair_count(void)
{
	size_t i, n = 0;

	for (i = 0; gz_backends[i]; i++)
		n += (size_t)(gz_backends[i]->level_max - gz_backends[i]->level_min + 1);
	return n;
}

static void
pair_at(size_t k, const struct gz_backend **be_ret, int *level_ret)
{
	size_t i;

	for (i = 0; gz_backends[i]; i++) {
		size_t n = (size_t)(gz_backends[i]->level_max - gz_backends[i]->level_min + 1);

		if (k < n) {
			*be_ret = gz_backends[i];
			*level_ret = gz_backends[i]->level_min + (int)k;
			return;
		}
		k -= n;
	}
	ck_abort_msg("pair index out of range");
}

static void
canary_set(uint8_t *p)
{
	memset(p, CANARY_BYTE, CANARY_NBYTES);
}

static void
canary_check(const uint8_t *p)
{
	size_t i;

	/* ck_assert records its location on every call (a file write); test
	 * the bytes plainly and fail with the first bad one. */
	for (i = 0; i < CANARY_NBYTES; i++)
		if (p[i] != CANARY_BYTE)
			ck_abort_msg("write beyond out_cap (guard byte %zu)", i);
}

/* Compress body into exactly gz_bound() bytes of space (followed by a
 * canary), verify the member, return its length. */
static size_t
roundtrip(struct gz_compressor *c, const uint8_t *body, size_t len)
{
	size_t bound = gz_bound(c, len), out_len = 0;
	uint8_t *out = malloc(bound + CANARY_NBYTES);

	ck_assert_ptr_nonnull(out);
	ck_assert_uint_ge(bound, len);
	canary_set(out + bound);
	ck_assert_int_eq(c->be->compress(c, body, len, out, bound, &out_len), 0);
	canary_check(out + bound);
	ck_assert_uint_le(out_len, bound);
	/* 10 header + at least 2 deflate + 8 trailer bytes */
	ck_assert_uint_ge(out_len, 20);
	ck_assert_int_eq(tu_verify_member(out, out_len, body, len), 0);
	free(out);
	return out_len;
}

/* Every backend x every level x every size x every kind, with one
 * compressor per (backend, level) reused across all 21 bodies. The 1 MiB
 * bodies run at every level too: the libraries are not instrumented by the
 * sanitizers, so this stays well inside the time budget. */
START_TEST(test_roundtrip)
{
	const struct gz_backend *be;
	struct gz_compressor *c = NULL;
	int level;
	size_t s, k;

	pair_at((size_t)_i, &be, &level);
	ck_assert_int_eq(gz_compressor_new(be, level, &c), 0);
	for (s = 0; s < RT_NSIZES; s++) {
		for (k = 0; k < RT_NKINDS; k++) {
			size_t len = rt_sizes[s], out_len;
			uint8_t *body = tu_payload(len, rt_kinds[k], (uint32_t)(s * 7 + k + 1));

			ck_assert_ptr_nonnull(body);
			out_len = roundtrip(c, body, len);
			/* Proof that it compresses at all: text and JSON from
			 * a 24-word vocabulary shrink to well under half. */
			if (rt_kinds[k] != TU_RANDOM && len >= 2048)
				ck_assert_msg(out_len < len / 2, "%s level %d: %zu -> %zu bytes",
					      be->name, level, len, out_len);
			free(body);
		}
	}
	gz_compressor_free(c);
}
END_TEST

/* Levels outside the native range are refused, never clamped; the range
 * ends themselves and the default are accepted. */
START_TEST(test_level_range)
{
	const struct gz_backend *be = gz_backends[_i];
	struct gz_compressor *sentinel = (struct gz_compressor *)(uintptr_t)0x1;
	struct gz_compressor *c = sentinel;
	const int bad[] = { be->level_min - 1, be->level_max + 1, INT_MIN, INT_MAX };
	const int good[] = { be->level_min, be->level_default, be->level_max };
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_int_eq(gz_compressor_new(be, bad[i], &c), GZ_EINVAL);
		ck_assert_ptr_eq(c, sentinel);
	}
	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		c = NULL;
		ck_assert_int_eq(gz_compressor_new(be, good[i], &c), 0);
		ck_assert_ptr_nonnull(c);
		ck_assert_ptr_eq(c->be, be);
		ck_assert_int_eq(c->level, good[i]);
		ck_assert_ptr_null(c->pool_next);
		ck_assert_ptr_null(c->scratch);
		ck_assert_uint_eq(c->scratch_cap, 0);
		gz_compressor_free(c);
	}
	ck_assert_int_eq(gz_alloc_live(), 0);
}
END_TEST

START_TEST(test_new_bad_args)
{
	struct gz_compressor *c = NULL;

	ck_assert_int_eq(gz_compressor_new(NULL, 6, &c), GZ_EINVAL);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(gz_compressor_new(&gz_backend_zlib, 6, NULL), GZ_EINVAL);
	gz_compressor_free(NULL); /* a no-op */
	ck_assert_int_eq(gz_alloc_live(), 0);
}
END_TEST

/* Too little space: GZ_ENOSPC, nothing written past out_cap, and the
 * compressor then produces the same member as before. */
START_TEST(test_enospc)
{
	const struct gz_backend *be = gz_backends[_i / 3];
	const int levels[] = { be->level_min, be->level_default, be->level_max };
	int level = levels[_i % 3];
	struct gz_compressor *c = NULL;
	const size_t len = 20480;
	uint8_t *body = tu_payload(len, TU_TEXT, 42);
	uint8_t *rnd = tu_payload(len, TU_RANDOM, 43);
	size_t bound, n, n2 = 0, out_len, i;
	uint8_t *out, *first;

	ck_assert_int_eq(gz_compressor_new(be, level, &c), 0);
	bound = gz_bound(c, len);
	out = malloc(bound + CANARY_NBYTES);
	ck_assert_ptr_nonnull(out);
	n = roundtrip(c, body, len);
	first = malloc(n);
	ck_assert_ptr_nonnull(first);
	ck_assert_int_eq(c->be->compress(c, body, len, first, n + 64 <= bound ? n + 64 : bound,
					 &n2),
			 0);
	ck_assert_uint_eq(n2, n);

	{
		const size_t caps[] = { 0, 1, 10, 17, 18, n / 2, n - 1 };

		for (i = 0; i < sizeof caps / sizeof caps[0]; i++) {
			out_len = 12345;
			canary_set(out + caps[i]);
			ck_assert_int_eq(c->be->compress(c, body, len, out, caps[i], &out_len),
					 GZ_ENOSPC);
			canary_check(out + caps[i]);
			ck_assert_uint_eq(out_len, 12345); /* untouched on error */
		}
	}

	/* Incompressible input into exactly its own size: the case where a
	 * caller asks "is it smaller?" by offering in_len bytes. */
	canary_set(out + len);
	ck_assert_int_eq(c->be->compress(c, rnd, len, out, len, &out_len), GZ_ENOSPC);
	canary_check(out + len);

	/* Still healthy: the same member again, byte for byte (a compressor
	 * is deterministic for a given input, level and library build). */
	canary_set(out + bound);
	ck_assert_int_eq(c->be->compress(c, body, len, out, bound, &out_len), 0);
	canary_check(out + bound);
	ck_assert_uint_eq(out_len, n);
	ck_assert(memcmp(out, first, n) == 0);
	ck_assert_int_eq(tu_verify_member(out, out_len, body, len), 0);

	free(first);
	free(out);
	free(rnd);
	free(body);
	gz_compressor_free(c);
}
END_TEST

/* Incompressible input fits in exactly gz_bound() bytes at every size
 * around the stored-block boundaries (65535 bytes per stored block). */
START_TEST(test_bound_random)
{
	const struct gz_backend *be = gz_backends[_i];
	const size_t lens[] = { 0, 1, 7, 8, 9, 65534, 65535, 65536, 131070, 131071, 200000 };
	struct gz_compressor *c = NULL;
	size_t i;

	ck_assert_int_eq(gz_compressor_new(be, be->level_default, &c), 0);
	for (i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		uint8_t *body = tu_payload(lens[i], TU_RANDOM, (uint32_t)i + 100);

		roundtrip(c, body, lens[i]);
		free(body);
	}
	gz_compressor_free(c);
	/* Same at the extreme levels. */
	ck_assert_int_eq(gz_compressor_new(be, be->level_min, &c), 0);
	for (i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		uint8_t *body = tu_payload(lens[i], TU_RANDOM, (uint32_t)i + 200);

		roundtrip(c, body, lens[i]);
		free(body);
	}
	gz_compressor_free(c);
	ck_assert_int_eq(gz_compressor_new(be, be->level_max, &c), 0);
	for (i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		uint8_t *body = tu_payload(lens[i], TU_RANDOM, (uint32_t)i + 300);

		roundtrip(c, body, lens[i]);
		free(body);
	}
	gz_compressor_free(c);
}
END_TEST

/* One compressor, 300 bodies of varying size and kind, with failed
 * (ENOSPC) calls interleaved: each member must stand on its own. */
START_TEST(test_reuse)
{
	const struct gz_backend *be = gz_backends[_i];
	struct gz_compressor *c = NULL;
	uint32_t rng = 12345;
	uint8_t small[16];
	size_t out_len;
	int i;

	ck_assert_int_eq(gz_compressor_new(be, be->level_default, &c), 0);
	for (i = 0; i < 300; i++) {
		size_t len;
		uint8_t *body;

		rng = rng * 1103515245u + 12345u;
		len = (rng >> 8) % (i % 10 == 0 ? 200000 : 5000);
		body = tu_payload(len, rt_kinds[i % RT_NKINDS], (uint32_t)i);
		ck_assert_ptr_nonnull(body);
		roundtrip(c, body, len);
		if (i % 7 == 0 && len > 0)
			ck_assert_int_eq(c->be->compress(c, body, len, small, sizeof small,
							 &out_len),
					 GZ_ENOSPC);
		free(body);
	}
	gz_compressor_free(c);
}
END_TEST

START_TEST(test_registry)
{
	size_t n = 0;

	/* Preference order: libdeflate, isal (if built), zlib. */
#ifdef HAVE_LIBDEFLATE
	ck_assert_ptr_eq(gz_backends[n++], &gz_backend_libdeflate);
#endif
#ifdef HAVE_ISAL
	ck_assert_ptr_eq(gz_backends[n++], &gz_backend_isal);
#endif
	ck_assert_ptr_eq(gz_backends[n++], &gz_backend_zlib);
	ck_assert_ptr_null(gz_backends[n]);
	ck_assert_uint_eq(tu_backend_count(), n);

	ck_assert_ptr_eq(gz_backend_find("zlib"), &gz_backend_zlib);
#ifdef HAVE_LIBDEFLATE
	ck_assert_ptr_eq(gz_backend_find("libdeflate"), &gz_backend_libdeflate);
#else
	ck_assert_ptr_null(gz_backend_find("libdeflate"));
#endif
#ifdef HAVE_ISAL
	ck_assert_ptr_eq(gz_backend_find("isal"), &gz_backend_isal);
#else
	ck_assert_ptr_null(gz_backend_find("isal"));
#endif
	ck_assert_ptr_null(gz_backend_find("ZLIB")); /* case-sensitive */
	ck_assert_ptr_null(gz_backend_find("zlib "));
	ck_assert_ptr_null(gz_backend_find(""));
	ck_assert_ptr_null(gz_backend_find("brotli"));
	ck_assert_ptr_null(gz_backend_find(NULL));

	/* The documented level ranges and capabilities (mhdgz.h). */
	ck_assert_str_eq(gz_backend_zlib.name, "zlib");
	ck_assert_uint_eq(gz_backend_zlib.caps, GZ_CAP_ONESHOT | GZ_CAP_STREAM);
	ck_assert_int_eq(gz_backend_zlib.level_min, 1);
	ck_assert_int_eq(gz_backend_zlib.level_max, 9);
	ck_assert_int_eq(gz_backend_zlib.level_default, 6);
#ifdef HAVE_LIBDEFLATE
	ck_assert_int_eq(gz_backend_libdeflate.id, GZ_ID_LIBDEFLATE);
	/* The process-wide allocator is routed only where libdeflate cannot
	 * take one per compressor. */
#ifdef HAVE_LIBDEFLATE_ALLOC_COMPRESSOR_EX
	ck_assert_ptr_null(gz_backend_libdeflate.global_alloc_init);
#else
	ck_assert_ptr_nonnull(gz_backend_libdeflate.global_alloc_init);
#endif
	ck_assert_str_eq(gz_backend_libdeflate.name, "libdeflate");
	ck_assert_uint_eq(gz_backend_libdeflate.caps, GZ_CAP_ONESHOT);
	ck_assert_int_eq(gz_backend_libdeflate.level_min, 1);
	ck_assert_int_eq(gz_backend_libdeflate.level_max, 12);
	ck_assert_int_eq(gz_backend_libdeflate.level_default, 5);
	ck_assert_ptr_null(gz_backend_libdeflate.stream);
	ck_assert_ptr_null(gz_backend_libdeflate.reset);
	ck_assert_ptr_eq(gz_stream_backend(&gz_backend_libdeflate), &gz_backend_zlib);
	ck_assert_int_eq(gz_stream_level(&gz_backend_libdeflate, 6), 6);
	ck_assert_int_eq(gz_stream_level(&gz_backend_libdeflate, 12), 9);
#endif
	ck_assert_int_eq(gz_backend_zlib.id, GZ_ID_ZLIB);
	ck_assert_ptr_eq(gz_backend_by_id(GZ_ID_ZLIB), &gz_backend_zlib);
	ck_assert_ptr_null(gz_backend_by_id(0));
	ck_assert_ptr_null(gz_backend_by_id(99));
	ck_assert_ptr_eq(gz_backend_default(), gz_backends[0]);
	ck_assert_ptr_eq(gz_stream_backend(&gz_backend_zlib), &gz_backend_zlib);
#ifdef HAVE_ISAL
	ck_assert_str_eq(gz_backend_isal.name, "isal");
	ck_assert_uint_eq(gz_backend_isal.caps, GZ_CAP_ONESHOT | GZ_CAP_STREAM);
	ck_assert_int_eq(gz_backend_isal.level_min, 1);
	ck_assert_int_eq(gz_backend_isal.level_max, 4);
	ck_assert_int_eq(gz_backend_isal.level_default, 2);
	ck_assert_int_eq(gz_backend_isal.id, GZ_ID_ISAL);
	ck_assert_ptr_eq(gz_stream_backend(&gz_backend_isal), &gz_backend_isal);
#endif
	for (n = 0; gz_backends[n]; n++) {
		const struct gz_backend *be = gz_backends[n];

		ck_assert_uint_ge(be->inst_nbytes, sizeof(struct gz_compressor));
		ck_assert(be->level_min <= be->level_default && be->level_default <= be->level_max);
		ck_assert(be->caps & GZ_CAP_ONESHOT);
		ck_assert_ptr_nonnull(be->init);
		ck_assert_ptr_nonnull(be->fini);
		ck_assert_ptr_nonnull(be->bound);
		ck_assert_ptr_nonnull(be->compress);
		if (be->caps & GZ_CAP_STREAM) {
			ck_assert_ptr_nonnull(be->reset);
			ck_assert_ptr_nonnull(be->stream);
		}
	}
}
END_TEST

START_TEST(test_scratch)
{
	struct gz_compressor *c = NULL;
	uint8_t *p;

	ck_assert_int_eq(gz_compressor_new(gz_backend_default(),
					   gz_backend_default()->level_default, &c),
			 0);
	ck_assert_int_eq(gz_compressor_scratch(c, 1000), 0);
	ck_assert_ptr_nonnull(c->scratch);
	ck_assert_uint_eq(c->scratch_cap, 1000);
	memset(c->scratch, 0x11, 1000); /* ASan: all 1000 bytes are ours */
	p = c->scratch;
	/* Smaller or equal requests keep the block. */
	ck_assert_int_eq(gz_compressor_scratch(c, 0), 0);
	ck_assert_int_eq(gz_compressor_scratch(c, 1000), 0);
	ck_assert_ptr_eq(c->scratch, p);
	ck_assert_uint_eq(c->scratch_cap, 1000);
	ck_assert_int_eq(gz_compressor_scratch(c, 5000), 0);
	ck_assert_uint_eq(c->scratch_cap, 5000);
	memset(c->scratch, 0x22, 5000);
	gz_compressor_free(c); /* frees the scratch too (ASan/LSan would see a leak) */
	ck_assert_int_eq(gz_alloc_live(), 0);
}
END_TEST

START_TEST(test_strerror)
{
	ck_assert_str_eq(gz_strerror(GZ_OK), "success");
	ck_assert_str_eq(gz_strerror(GZ_ENOMEM), "out of memory");
	ck_assert_str_eq(gz_strerror(GZ_EINVAL), "invalid argument");
	ck_assert_str_eq(gz_strerror(GZ_EBACKEND), "compression library error");
	ck_assert_str_eq(gz_strerror(GZ_ENOSPC), "output does not fit in the space given");
	ck_assert_str_eq(gz_strerror(GZ_ENOTSUP), "backend or capability not compiled in");
	ck_assert_str_eq(gz_strerror(GZ_EBUSY), "resource in use");
	/* Codes the core does not produce are the handler's to name. */
	ck_assert_ptr_null(gz_strerror(-6));
	ck_assert_ptr_null(gz_strerror(-8));
	ck_assert_ptr_null(gz_strerror(1));
	ck_assert_ptr_null(gz_strerror(INT_MIN));
}
END_TEST

/* zlib's member of body at level with windowBits wbits and memLevel mem
 * (gzip wrapper), made here with zlib directly; malloc'd. */
static uint8_t *
zlib_reference(const uint8_t *body, size_t len, int level, int wbits, int mem, size_t *len_ret)
{
	z_stream zs;
	size_t cap = len + len / 8 + 256;
	uint8_t *out = malloc(cap);

	ck_assert_ptr_nonnull(out);
	memset(&zs, 0, sizeof zs);
	ck_assert_int_eq(deflateInit2(&zs, level, Z_DEFLATED, 16 + wbits, mem, Z_DEFAULT_STRATEGY),
			 Z_OK);
	zs.next_in = (Bytef *)(uintptr_t)body;
	zs.avail_in = (uInt)len;
	zs.next_out = out;
	zs.avail_out = (uInt)cap;
	ck_assert_int_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
	*len_ret = zs.total_out;
	deflateEnd(&zs);
	return out;
}

/*
 * zlib's small bodies (up to 3,833 bytes: shorter than a 4 KiB window less
 * zlib's 262 bytes of lookahead) are deflated with windowBits 12 and memLevel 5, the
 * larger ones with 15 and 8: byte for byte what zlib itself gives with
 * those parameters (and nginx, which sizes them so from Content-Length),
 * at every level, on both sides of the limit. An incompressible small
 * body still fits gz_bound() (the full-size stream takes it over), and a
 * failed allocation of the small stream falls back without an error or a
 * leak.
 */
START_TEST(test_zlib_small_bodies)
{
	const size_t lens[] = { 1, 1000, 2048, 3833, 3834, 3835, 4096, 20480 };
	uint8_t *body = tu_payload(20480, TU_JSON, 41);
	uint8_t *rnd = tu_payload(3833, TU_RANDOM, 42);
	struct gz_compressor *c = NULL;

	for (int level = 1; level <= 9; level++) {
		ck_assert_int_eq(gz_compressor_new(&gz_backend_zlib, level, &c), 0);
		for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
			bool small = lens[i] <= 3833;
			size_t bound = gz_bound(c, lens[i]), out_len = 0, ref_len = 0;
			uint8_t *out = malloc(bound);
			uint8_t *ref = zlib_reference(body, lens[i], level, small ? 12 : 15,
						      small ? 5 : 8, &ref_len);

			ck_assert_ptr_nonnull(out);
			ck_assert_int_eq(c->be->compress(c, body, lens[i], out, bound, &out_len),
					 0);
			ck_assert_msg(out_len == ref_len && memcmp(out, ref, ref_len) == 0,
				      "level %d, %zu bytes: %zu bytes, zlib (%d, %d) gives %zu",
				      level, lens[i], out_len, small ? 12 : 15, small ? 5 : 8,
				      ref_len);
			free(out);
			free(ref);
		}
		roundtrip(c, rnd, 3833);
		gz_compressor_free(c);
	}

	tu_alloc_install(0);
	for (uint64_t k = 1; k <= 8; k++) {
		size_t bound, out_len = 0;
		uint8_t *out;

		ck_assert_int_eq(gz_compressor_new(&gz_backend_zlib, 6, &c), 0);
		bound = gz_bound(c, 2048);
		out = malloc(bound); /* the test's own, not through the hook */
		ck_assert_ptr_nonnull(out);
		tu_alloc_fail_at(k);
		ck_assert_int_eq(c->be->compress(c, body, 2048, out, bound, &out_len), 0);
		tu_alloc_fail_at(0);
		ck_assert_int_eq(tu_check_member(out, out_len, body, 2048), 0);
		/* Once made, the small stream serves the next small body. */
		ck_assert_int_eq(c->be->compress(c, body, 3000, out, bound + 1024, &out_len), 0);
		ck_assert_int_eq(tu_check_member(out, out_len, body, 3000), 0);
		gz_compressor_free(c);
		free(out);
		ck_assert_int_eq(tu_alloc_live(), 0);
	}
	tu_alloc_uninstall();
	free(body);
	free(rnd);
}
END_TEST

Suite *
backend_suite(void)
{
	int nb = (int)tu_backend_count();
	const struct ck_case cases[] = {
		/* Generous: the slowest pair (libdeflate 12 on 1 MiB) takes a few
		 * hundred milliseconds; sanitizer builds slow the test code. */
		{ "roundtrip", 120, { { test_roundtrip, 0, (int)pair_count() } } },
		{ "levels", 0, { { test_level_range, 0, nb }, { test_new_bad_args, 0, 0 } } },
		{ "space", 60, { { test_enospc, 0, nb * 3 }, { test_bound_random, 0, nb } } },
		{ "reuse", 60, { { test_reuse, 0, nb }, { test_zlib_small_bodies, 0, 0 } } },
		{ "registry",
		  0,
		  { { test_registry, 0, 0 }, { test_scratch, 0, 0 }, { test_strerror, 0, 0 } } },
	};

	return ck_suite("backend", cases, sizeof cases / sizeof cases[0]);
}
