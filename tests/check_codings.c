/* check_codings.c: Check suite for the zstd and brotli backends: round trips through the reference decoders, streams, RFC 9659 frame rules, pool, allocator. */
#include "config.h"

#include <check.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_ZSTD
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_getFrameHeader */
#include <zstd.h>
#endif

#include "gz_error.h"
#include "gz_alloc.h"
#include "gz_backend.h"
#include "gz_pool.h"
#include "gz_stream.h"
#include "gz_dict.h"
#include "check_suites.h"
#include "testutil.h"

#define CANARY_NBYTES 32
#define CANARY_BYTE 0xc3

/* Costs nothing until it fails (ck_assert writes a file per call). */
#define HOT_CHECK(cond, ...)                                                                       \
	do {                                                                                       \
		if (!(cond))                                                                       \
			ck_abort_msg(__VA_ARGS__);                                                 \
	} while (0)

static const size_t rt_sizes[] = { 0, 1, 100, 2048, 20480, 102400, 1048576 };
#define RT_NSIZES (sizeof rt_sizes / sizeof rt_sizes[0])
static const enum tu_kind rt_kinds[] = { TU_TEXT, TU_JSON, TU_RANDOM };
#define RT_NKINDS (sizeof rt_kinds / sizeof rt_kinds[0])

/* RFC 9659 section 3: 8 MiB. */
#define ZSTD_WINDOW_MAX ((uint64_t)8 << 20)

/* Without zstd and brotli the per-backend tests have nothing to run (a
 * case of 0 runs is a plain test, run once). */
#define NEED_CODINGS()                                                                             \
	do {                                                                                       \
		if (!gz_coding_backends[0])                                                        \
			return;                                                                    \
	} while (0)

static size_t
coding_count(void)
{
	size_t n = 0;

	while (gz_coding_backends[n])
		n++;
	return n;
}

static const char *
cname(const struct gz_backend *be)
{
	return gz_coding_name(be->coding);
}

/* (backend, level) over every level of every coding backend. */
static size_t
pair_count(void)
{
	size_t i, n = 0;

	for (i = 0; gz_coding_backends[i]; i++)
		n += (size_t)(gz_coding_backends[i]->level_max - gz_coding_backends[i]->level_min +
			      1);
	return n;
}

static void
pair_at(size_t k, const struct gz_backend **be_ret, int *level_ret)
{
	size_t i;

	for (i = 0; gz_coding_backends[i]; i++) {
		const struct gz_backend *be = gz_coding_backends[i];
		size_t n = (size_t)(be->level_max - be->level_min + 1);

		if (k < n) {
			*be_ret = be;
			*level_ret = be->level_min + (int)k;
			return;
		}
		k -= n;
	}
	ck_abort_msg("pair index out of range");
}

/* RFC 9659 frame rules of one zstd frame: window <= 8 MiB, no dictionary
 * ID, and the content size when whole (content_len != UINT64_MAX). */
static void
check_zstd_frame(const uint8_t *f, size_t len, uint64_t content_len)
{
#ifdef HAVE_ZSTD
	ZSTD_frameHeader h;

	HOT_CHECK(ZSTD_getFrameHeader(&h, f, len) == 0, "zstd frame header");
	HOT_CHECK(h.frameType == ZSTD_frame, "not a zstd frame");
	HOT_CHECK(h.windowSize <= ZSTD_WINDOW_MAX, "window %llu > 8 MiB",
		  (unsigned long long)h.windowSize);
	HOT_CHECK(h.dictID == 0, "dictionary ID %u", h.dictID);
	if (content_len != UINT64_MAX)
		HOT_CHECK(h.frameContentSize == content_len, "content size %llu, want %llu",
			  (unsigned long long)h.frameContentSize, (unsigned long long)content_len);
	else
		HOT_CHECK(h.frameContentSize == ZSTD_CONTENTSIZE_UNKNOWN, "stream with a size");
	/* One frame: it ends exactly at the end. */
	HOT_CHECK(ZSTD_findFrameCompressedSize(f, len) == len, "trailing bytes after the frame");
#else
	(void)f;
	(void)len;
	(void)content_len;
#endif
}

/* Compress body into exactly gz_bound() bytes (then a canary), decode it
 * with the reference decoder; returns the coded length. */
static size_t
roundtrip(struct gz_compressor *c, const uint8_t *body, size_t len)
{
	size_t bound = gz_bound(c, len), out_len = 0, i;
	uint8_t *out = malloc(bound + CANARY_NBYTES);
	int rc;

	ck_assert_ptr_nonnull(out);
	memset(out + bound, CANARY_BYTE, CANARY_NBYTES);
	rc = c->be->compress(c, body, len, out, bound, &out_len);
	HOT_CHECK(rc == 0, "%s level %d, %zu bytes: compress %d", c->be->name, c->level, len, rc);
	for (i = 0; i < CANARY_NBYTES; i++)
		HOT_CHECK(out[bound + i] == CANARY_BYTE, "write beyond out_cap");
	HOT_CHECK(out_len > 0 && out_len <= bound, "length %zu of bound %zu", out_len, bound);
	HOT_CHECK(tu_verify_coded(cname(c->be), out, out_len, body, len) == 0,
		  "%s level %d, %zu bytes: does not decode to the body", c->be->name, c->level,
		  len);
	if (c->be->coding == GZ_CODING_ZSTD)
		check_zstd_frame(out, out_len, len);
	free(out);
	return out_len;
}

/* Every coding backend x level x size x kind, one compressor reused. */
START_TEST(test_roundtrip)
{
	NEED_CODINGS();
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
			if (rt_kinds[k] != TU_RANDOM && len >= 2048)
				ck_assert_msg(out_len < len / 2, "%s level %d: %zu -> %zu bytes",
					      be->name, level, len, out_len);
			free(body);
		}
	}
	gz_compressor_free(c);
	ck_assert_int_eq(gz_alloc_live(), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Streams: random chunks, random windows (often 1 byte), random sync
 * flushes; after each, everything consumed decodes from the output. */

struct drv {
	struct gz_compressor *c;
	uint8_t *out;
	size_t out_len, out_cap;
	uint64_t calls, calls_max;
	struct tu_dec *dec;
	size_t dec_fed;
	uint32_t rng;
};

static uint32_t
drv_rand(struct drv *d)
{
	uint32_t x = d->rng;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	d->rng = x;
	return x;
}

static void
drv_init(struct drv *d, struct gz_compressor *c, size_t body_len, uint32_t seed)
{
	memset(d, 0, sizeof *d);
	d->c = c;
	d->out_cap = body_len * 2 + ((size_t)1 << 20);
	d->out = malloc(d->out_cap);
	ck_assert_ptr_nonnull(d->out);
	d->calls_max = 20 * (uint64_t)body_len + 1000000;
	d->rng = seed ? seed : 1;
	d->dec = tu_dec_new(cname(c->be));
	ck_assert_ptr_nonnull(d->dec);
}

static void
drv_fini(struct drv *d)
{
	tu_dec_free(d->dec);
	free(d->out);
}

static int
drv_call(struct drv *d, struct gz_io *io, size_t win, enum gz_flush flush)
{
	uint8_t *start = d->out + d->out_len;
	size_t i;
	int rc;

	HOT_CHECK(d->out_len + win + CANARY_NBYTES <= d->out_cap, "test buffer too small");
	HOT_CHECK(++d->calls <= d->calls_max, "stream() does not converge");
	memset(start + win, CANARY_BYTE, CANARY_NBYTES);
	io->out = start;
	io->out_cap = win;
	rc = d->c->be->stream(d->c, io, flush);
	for (i = 0; i < CANARY_NBYTES; i++)
		HOT_CHECK(start[win + i] == CANARY_BYTE, "write beyond out_cap (window %zu)", win);
	HOT_CHECK(io->out == start + (win - io->out_cap), "out and out_cap disagree");
	d->out_len += win - io->out_cap;
	return rc;
}

static size_t
drv_win(struct drv *d, int tiny)
{
	uint32_t r = drv_rand(d) % 10;

	if (tiny || r < 3)
		return 1;
	if (r < 6)
		return 1 + drv_rand(d) % 64;
	return 1 + drv_rand(d) % 65536;
}

static void
drv_feed(struct drv *d, const uint8_t *in, size_t len, enum gz_flush flush, int tiny)
{
	struct gz_io io = { .in = in, .in_len = len };

	for (;;) {
		int rc = drv_call(d, &io, drv_win(d, tiny), flush);

		HOT_CHECK(rc == 0, "stream(): %d", rc);
		HOT_CHECK(io.in_len == 0 || io.out_cap == 0, "returned with input and space left");
		if (io.in_len == 0 && (flush == GZ_FLUSH_NONE || io.out_cap > 0))
			break;
	}
}

static void
drv_check_prefix(struct drv *d, const uint8_t *body, size_t consumed)
{
	size_t n;
	const uint8_t *p;

	HOT_CHECK(tu_dec_feed(d->dec, d->out + d->dec_fed, d->out_len - d->dec_fed) == 0,
		  "reference decoder failed at a sync point");
	d->dec_fed = d->out_len;
	p = tu_dec_data(d->dec, &n);
	HOT_CHECK(n == consumed, "prefix decodes to %zu bytes, %zu consumed", n, consumed);
	HOT_CHECK(n == 0 || memcmp(p, body, n) == 0, "prefix differs from the input");
}

static void
drv_finish(struct drv *d, int tiny)
{
	struct gz_io io = { .in = NULL, .in_len = 0 };
	size_t before;
	int rc;

	do {
		rc = drv_call(d, &io, drv_win(d, tiny), GZ_FLUSH_FINISH);
		HOT_CHECK(rc == 0 || rc == GZ_STREAM_END, "stream(FINISH): %d", rc);
	} while (rc == 0);
	before = d->out_len;
	ck_assert_int_eq(drv_call(d, &io, 100, GZ_FLUSH_FINISH), GZ_STREAM_END);
	ck_assert_int_eq(drv_call(d, &io, 1, GZ_FLUSH_SYNC), GZ_STREAM_END);
	ck_assert_uint_eq(d->out_len, before);
}

/* One stream of body: chunks of 1 byte .. 64 KiB (tiny: 1-16 bytes, every
 * window 1 byte), a sync flush on one chunk in five (and at least one),
 * each checked; then the whole output through the one-shot decoder. */
static void
stream_body(struct gz_compressor *c, const uint8_t *body, size_t len, uint32_t seed, int tiny)
{
	struct drv d;
	size_t pos = 0;
	int nsync = 0;

	drv_init(&d, c, len, seed);
	while (pos < len) {
		uint32_t r = drv_rand(&d);
		size_t n = tiny ? 1 + r % 16 : (r % 3 == 0 ? 1 + r % 16 : 1 + r % 65536);
		enum gz_flush f = drv_rand(&d) % 5 == 0 ? GZ_FLUSH_SYNC : GZ_FLUSH_NONE;

		if (n > len - pos)
			n = len - pos;
		if (nsync == 0 && pos + n >= len / 2)
			f = GZ_FLUSH_SYNC;
		drv_feed(&d, body + pos, n, f, tiny);
		pos += n;
		if (f == GZ_FLUSH_SYNC) {
			drv_check_prefix(&d, body, pos);
			/* A repeated flush with no input adds nothing. */
			if (nsync % 4 == 0)
				drv_feed(&d, NULL, 0, GZ_FLUSH_SYNC, tiny);
			drv_check_prefix(&d, body, pos);
			nsync++;
		}
	}
	drv_finish(&d, tiny);
	HOT_CHECK(tu_dec_feed(d.dec, d.out + d.dec_fed, d.out_len - d.dec_fed) == 0 &&
			  tu_dec_ended(d.dec),
		  "%s level %d: the stream does not end", c->be->name, c->level);
	HOT_CHECK(tu_verify_coded(cname(c->be), d.out, d.out_len, body, len) == 0,
		  "%s level %d: stream does not decode to the body", c->be->name, c->level);
	if (c->be->coding == GZ_CODING_ZSTD)
		check_zstd_frame(d.out, d.out_len, UINT64_MAX);
	drv_fini(&d);
}

/* Every level: random chunks, windows and flushes over 200 KB of each kind,
 * two streams per compressor (reset in between). */
START_TEST(test_stream_random)
{
	NEED_CODINGS();
	const struct gz_backend *be;
	struct gz_compressor *c = NULL;
	int level;
	size_t k;

	pair_at((size_t)_i, &be, &level);
	ck_assert_int_eq(gz_compressor_new(be, level, &c), 0);
	for (k = 0; k < RT_NKINDS; k++) {
		const size_t len = 200000;
		uint8_t *body = tu_payload(len, rt_kinds[k], (uint32_t)(_i * 3 + k + 1));

		stream_body(c, body, len, (uint32_t)(_i * 31 + k + 7), 0);
		ck_assert_int_eq(be->reset(c), 0);
		free(body);
	}
	gz_compressor_free(c);
}
END_TEST

/* 1-byte output windows and tiny chunks at the default, lowest and highest
 * levels. */
START_TEST(test_stream_one_byte)
{
	NEED_CODINGS();
	const struct gz_backend *be = gz_coding_backends[_i / 3];
	const int levels[] = { be->level_default, be->level_min, be->level_max };
	struct gz_compressor *c = NULL;
	const size_t len = 30000;
	uint8_t *body = tu_payload(len, _i % 2 ? TU_JSON : TU_TEXT, (uint32_t)_i + 5);

	ck_assert_int_eq(gz_compressor_new(be, levels[_i % 3], &c), 0);
	stream_body(c, body, len, (uint32_t)_i + 99, 1);
	free(body);
	gz_compressor_free(c);
}
END_TEST

/* An empty stream is one valid frame/stream of nothing; so is a stream
 * flushed before any input. */
START_TEST(test_stream_empty)
{
	NEED_CODINGS();
	const struct gz_backend *be = gz_coding_backends[_i];
	struct gz_compressor *c = NULL;
	struct drv d;
	int pass;

	ck_assert_int_eq(gz_compressor_new(be, be->level_default, &c), 0);
	for (pass = 0; pass < 2; pass++) {
		drv_init(&d, c, 0, 3);
		if (pass == 1)
			drv_feed(&d, NULL, 0, GZ_FLUSH_SYNC, 1);
		drv_finish(&d, pass);
		ck_assert_int_eq(tu_verify_coded(cname(be), d.out, d.out_len, NULL, 0), 0);
		drv_fini(&d);
		ck_assert_int_eq(be->reset(c), 0);
	}
	gz_compressor_free(c);
}
END_TEST

/* reset() in the middle abandons the stream; compress() in the middle does
 * too, and stream() then refuses until reset(); a bad flush is refused. */
START_TEST(test_stream_reset_and_misuse)
{
	NEED_CODINGS();
	const struct gz_backend *be = gz_coding_backends[_i];
	struct gz_compressor *c = NULL;
	const size_t len = 50000;
	uint8_t *body = tu_payload(len, TU_TEXT, 77);
	uint8_t small[64];
	struct gz_io io = { .in = body, .in_len = 1000, .out = small, .out_cap = sizeof small };

	ck_assert_int_eq(gz_compressor_new(be, be->level_default, &c), 0);
	ck_assert_int_eq(be->stream(c, &io, (enum gz_flush)7), GZ_EINVAL);
	ck_assert_int_eq(be->stream(c, &io, GZ_FLUSH_SYNC), 0);
	ck_assert_int_eq(be->reset(c), 0);
	stream_body(c, body, len, 5, 0);

	io = (struct gz_io){ .in = body, .in_len = 1000, .out = small, .out_cap = sizeof small };
	ck_assert_int_eq(be->stream(c, &io, GZ_FLUSH_NONE), GZ_STREAM_END); /* ended */
	ck_assert_int_eq(be->reset(c), 0);
	ck_assert_int_eq(be->stream(c, &io, GZ_FLUSH_SYNC), 0);
	roundtrip(c, body, len);
	io = (struct gz_io){ .in = body, .in_len = 10, .out = small, .out_cap = sizeof small };
	ck_assert_int_eq(be->stream(c, &io, GZ_FLUSH_NONE), GZ_EINVAL);
	ck_assert_int_eq(io.in_len, 10);
	ck_assert_int_eq(be->reset(c), 0);
	stream_body(c, body, len, 6, 0);
	free(body);
	gz_compressor_free(c);
	ck_assert_int_eq(gz_alloc_live(), 0);
}
END_TEST

/* Too little space: GZ_ENOSPC, out_len untouched, and the compressor then
 * makes the same bytes as before; incompressible data fits its bound. */
START_TEST(test_enospc_bound)
{
	NEED_CODINGS();
	const struct gz_backend *be = gz_coding_backends[_i];
	struct gz_compressor *c = NULL;
	const size_t len = 20480;
	uint8_t *body = tu_payload(len, TU_JSON, 42);
	uint8_t *rnd = tu_payload(200000, TU_RANDOM, 43);
	uint8_t *out, *first;
	size_t n, out_len, i;
	const size_t lens[] = { 0, 1, 7, 65535, 65536, 131072, 200000 };

	ck_assert_int_eq(gz_compressor_new(be, be->level_default, &c), 0);
	out = malloc(gz_bound(c, 200000));
	ck_assert_ptr_nonnull(out);
	n = roundtrip(c, body, len);
	first = malloc(n + 64);
	/* zstd may need a little more than the result's size to make it
	 * (ZSTD_compress2 reports dstSize_tooSmall for an exact fit). */
	ck_assert_int_eq(be->compress(c, body, len, first, n + 64, &out_len), 0);
	ck_assert_uint_eq(out_len, n);
	{
		const size_t caps[] = { 0, 1, 4, n / 2, n - 1 };

		for (i = 0; i < sizeof caps / sizeof caps[0]; i++) {
			out_len = 12345;
			ck_assert_int_eq(be->compress(c, body, len, out, caps[i], &out_len),
					 GZ_ENOSPC);
			ck_assert_uint_eq(out_len, 12345);
		}
	}
	ck_assert_int_eq(be->compress(c, rnd, len, out, len, &out_len), GZ_ENOSPC);
	ck_assert_int_eq(be->compress(c, body, len, out, gz_bound(c, len), &out_len), 0);
	ck_assert_uint_eq(out_len, n);
	ck_assert(memcmp(out, first, n) == 0);
	for (i = 0; i < sizeof lens / sizeof lens[0]; i++)
		roundtrip(c, rnd, lens[i]);
	ck_assert_uint_eq(gz_bound(c, SIZE_MAX), SIZE_MAX);
	free(first);
	free(out);
	free(rnd);
	free(body);
	gz_compressor_free(c);
}
END_TEST

START_TEST(test_registry)
{
	size_t n = 0, i;

#ifdef HAVE_ZSTD
	ck_assert_ptr_eq(gz_coding_backends[n++], &gz_backend_zstd);
	ck_assert_ptr_eq(gz_backend_for_coding(GZ_CODING_ZSTD), &gz_backend_zstd);
	ck_assert_str_eq(gz_backend_zstd.name, "zstd");
	ck_assert_int_eq(gz_backend_zstd.id, GZ_ID_ZSTD);
	ck_assert_int_eq(gz_backend_zstd.level_min, 1);
	ck_assert_int_eq(gz_backend_zstd.level_max, 19);
#else
	ck_assert_ptr_null(gz_backend_for_coding(GZ_CODING_ZSTD));
#endif
#ifdef HAVE_BROTLI
	ck_assert_ptr_eq(gz_coding_backends[n++], &gz_backend_brotli);
	ck_assert_ptr_eq(gz_backend_for_coding(GZ_CODING_BR), &gz_backend_brotli);
	ck_assert_str_eq(gz_backend_brotli.name, "brotli");
	ck_assert_int_eq(gz_backend_brotli.id, GZ_ID_BROTLI);
	ck_assert_int_eq(gz_backend_brotli.level_min, 1);
	ck_assert_int_eq(gz_backend_brotli.level_max, 11);
#else
	ck_assert_ptr_null(gz_backend_for_coding(GZ_CODING_BR));
#endif
	ck_assert_ptr_null(gz_coding_backends[n]);
	ck_assert_uint_eq(coding_count(), n);
	ck_assert_ptr_eq(gz_backend_for_coding(GZ_CODING_GZIP), gz_backend_default());
	ck_assert_ptr_null(gz_backend_for_coding(GZ_CODING_COUNT));
	ck_assert_str_eq(gz_coding_name(GZ_CODING_GZIP), "gzip");
	ck_assert_str_eq(gz_coding_name(GZ_CODING_ZSTD), "zstd");
	ck_assert_str_eq(gz_coding_name(GZ_CODING_BR), "br");
	ck_assert_ptr_null(gz_coding_name(GZ_CODING_COUNT));
	/* The gzip registry and its lookups are untouched. */
	ck_assert_ptr_null(gz_backend_find("zstd"));
	ck_assert_ptr_null(gz_backend_find("brotli"));
	ck_assert_ptr_null(gz_backend_by_id(GZ_ID_ZSTD));
	for (i = 0; gz_backends[i]; i++)
		ck_assert_int_eq(gz_backends[i]->coding, GZ_CODING_GZIP);
	for (i = 0; gz_coding_backends[i]; i++) {
		const struct gz_backend *be = gz_coding_backends[i];

		ck_assert_uint_eq(be->caps, GZ_CAP_ONESHOT | GZ_CAP_STREAM);
		ck_assert(be->level_min <= be->level_default && be->level_default <= be->level_max);
		ck_assert_ptr_eq(gz_stream_backend(be), be);
		ck_assert_int_eq(gz_stream_level(be, be->level_max), be->level_max);
		ck_assert_int_ne(be->coding, GZ_CODING_GZIP);
	}
}
END_TEST

/* Through a pool pair and the pump, as the handler uses them: a source that
 * stalls is flushed at the stall, the frame/stream completes, the
 * compressor goes back to the pool at the end and is reused. */
struct src {
	const uint8_t *body;
	size_t len, pos, step;
	int calls;
};

static ssize_t
src_read(void *cls, uint8_t *buf, size_t max)
{
	struct src *s = cls;
	size_t n;

	/* Every third call has no data (a stall). */
	if (++s->calls % 3 == 0)
		return 0;
	if (s->pos == s->len)
		return GZ_SOURCE_END;
	n = s->len - s->pos < s->step ? s->len - s->pos : s->step;
	if (n > max)
		n = max;
	memcpy(buf, s->body + s->pos, n);
	s->pos += n;
	return (ssize_t)n;
}

START_TEST(test_pump)
{
	NEED_CODINGS();
	const struct gz_backend *be = gz_coding_backends[_i / 2];
	bool low_latency = _i % 2;
	struct gz_pool *one = NULL, *str = NULL;
	const size_t len = 100000;
	uint8_t *body = tu_payload(len, TU_JSON, 9);
	uint8_t *out = malloc(len * 2);
	struct gz_pool_stats st;
	int round;

	ck_assert_int_eq(gz_pool_pair_new(be, be->level_default, 4, &one, &str), 0);
	ck_assert_ptr_eq(gz_pool_backend(str), be);
	for (round = 0; round < 3; round++) {
		struct gz_pump p;
		struct src s = { body, len, 0, 1000 + 3000 * (size_t)round, 0 };
		struct tu_dec *dec = tu_dec_new(cname(be));
		size_t out_len = 0, dn;
		bool end = false;
		int guard = 0;

		ck_assert_int_eq(gz_pump_init(&p, str, 4096, low_latency ? GZ_PUMP_LOW_LATENCY : 0),
				 0);
		while (!end) {
			ssize_t n = gz_pump_read(&p, src_read, &s, out + out_len,
						 1 + (size_t)guard % 700, &end);

			ck_assert_int_ge(n, 0);
			ck_assert_int_eq(tu_dec_feed(dec, out + out_len, (size_t)n), 0);
			out_len += (size_t)n;
			/* 0 bytes without the end: all the source gave is out. */
			if (n == 0 && !end) {
				tu_dec_data(dec, &dn);
				ck_assert_uint_eq(dn, s.pos);
			}
			ck_assert_int_lt(++guard, 1000000);
		}
		ck_assert(tu_dec_ended(dec));
		ck_assert_ptr_null(p.c); /* back in the pool at the end */
		gz_pump_fini(&p);
		tu_dec_free(dec);
		ck_assert_int_eq(tu_verify_coded(cname(be), out, out_len, body, len), 0);
	}
	gz_pool_get_stats(str, &st);
	ck_assert_uint_eq(st.gets, 3);
	ck_assert_uint_eq(st.misses, 1);
	ck_assert_uint_eq(st.idle, 1);
	gz_pool_free(one);
	gz_pool_free(str);
	free(out);
	free(body);
	ck_assert_int_eq(gz_alloc_live(), 0);
}
END_TEST

/* Every allocation of the libraries goes through the core's allocator, and
 * a failure of any one of them is a clean GZ_ENOMEM (or GZ_EBACKEND where
 * the library does not say why) with nothing leaked. libbrotlienc 1.0.9
 * calls exit() when an allocation inside an encoder fails (built without
 * BROTLI_ENCODER_CLEANUP_ON_OOM; gz_backend_brotli.c): for brotli only the
 * failures it survives are injected, the instance (1), the encoder state
 * at creation (2) and the new state of compress() (3). */
START_TEST(test_alloc_faults)
{
	NEED_CODINGS();
	const struct gz_backend *be = gz_coding_backends[_i];
	const size_t len = 20000;
	uint8_t *body = tu_payload(len, TU_TEXT, 11);
	uint8_t *out = malloc(len * 2);
	uint64_t total, k;
	int rc;

	/* Count the allocations of a create + compress + stream + free. */
	tu_alloc_install(0);
	{
		struct gz_compressor *c = NULL;
		size_t out_len;
		struct gz_io io = { .in = body, .in_len = len, .out = out, .out_cap = len * 2 };

		ck_assert_int_eq(gz_compressor_new(be, be->level_default, &c), 0);
		ck_assert_int_eq(be->compress(c, body, len, out, len * 2, &out_len), 0);
		ck_assert_int_eq(be->reset(c), 0);
		ck_assert_int_eq(be->stream(c, &io, GZ_FLUSH_FINISH), GZ_STREAM_END);
		gz_compressor_free(c);
	}
	total = tu_alloc_count();
	ck_assert_uint_gt(total, 1);
	ck_assert_int_eq(tu_alloc_live(), 0);
	tu_alloc_uninstall();

	if (be->coding == GZ_CODING_BR)
		total = 3;
	for (k = 1; k <= total; k++) {
		struct gz_compressor *c = NULL;
		size_t out_len;
		struct gz_io io = { .in = body, .in_len = len, .out = out, .out_cap = len * 2 };

		tu_alloc_install(k);
		rc = gz_compressor_new(be, be->level_default, &c);
		if (rc == 0) {
			rc = be->compress(c, body, len, out, len * 2, &out_len);
			ck_assert(rc == 0 || rc == GZ_ENOMEM || rc == GZ_EBACKEND);
			if (rc == 0)
				ck_assert_int_eq(tu_verify_coded(cname(be), out, out_len, body,
								 len),
						 0);
			rc = be->reset(c);
			ck_assert(rc == 0 || rc == GZ_ENOMEM || rc == GZ_EBACKEND);
			if (rc == 0) {
				rc = be->stream(c, &io, GZ_FLUSH_FINISH);
				ck_assert(rc == GZ_STREAM_END || rc == GZ_ENOMEM ||
					  rc == GZ_EBACKEND);
			}
			gz_compressor_free(c);
		} else {
			ck_assert(rc == GZ_ENOMEM || rc == GZ_EBACKEND);
			ck_assert_ptr_null(c);
		}
		ck_assert(tu_alloc_failed());
		ck_assert_int_eq(tu_alloc_live(), 0);
		tu_alloc_uninstall();
	}
	free(out);
	free(body);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Windows as the frame header declares them. */

#ifdef HAVE_ZSTD
/* The window a zstd frame header declares, read from its bytes (RFC 8878
 * section 3.1.1.1): a single-segment frame's is its content size, else
 * the Window_Descriptor's exponent and mantissa. *single_ret says which. */
static uint64_t
declared_window(const uint8_t *f, size_t len, int *single_ret)
{
	static const unsigned int fcs_bytes[4] = { 0, 2, 4, 8 };
	uint8_t fhd;
	unsigned int did;
	size_t at;
	uint64_t fcs = 0;

	ck_assert_uint_ge(len, 6);
	ck_assert_mem_eq(f, "\x28\xb5\x2f\xfd", 4);
	fhd = f[4];
	*single_ret = (fhd >> 5) & 1;
	if (!*single_ret) {
		unsigned int exponent = f[5] >> 3, mantissa = f[5] & 7;
		uint64_t base = (uint64_t)1 << (10 + exponent);

		return base + base / 8 * mantissa;
	}
	did = (unsigned int[]){ 0, 1, 2, 4 }[fhd & 3];
	at = 5 + did;
	ck_assert_uint_ge(len, at + 8);
	switch (fcs_bytes[fhd >> 6] ? fcs_bytes[fhd >> 6] : 1) {
	case 1:
		fcs = f[at];
		break;
	case 2:
		fcs = (uint64_t)(f[at] | f[at + 1] << 8) + 256;
		break;
	case 4:
		for (int i = 3; i >= 0; i--)
			fcs = fcs << 8 | f[at + i];
		break;
	default:
		for (int i = 7; i >= 0; i--)
			fcs = fcs << 8 | f[at + i];
		break;
	}
	return fcs;
}
#endif

/* Every level a user may set (1-19, also through struct mhdgz_options
 * zstd.level, which reaches the backend unchanged): a whole body over 8
 * MiB, whose frame cannot be single-segment, declares a window of at most
 * 8 MiB, and so does a stream (content size unknown); both decode with the
 * reference decoder limited to 8 MiB (RFC 9659 section 3). Zeros, so
 * that level 19 takes milliseconds. */
START_TEST(test_zstd_window_every_level)
{
#ifdef HAVE_ZSTD
	const size_t len = ((size_t)9 << 20) + 12345;
	int level = gz_backend_zstd.level_min + _i, single;
	uint8_t *body = calloc(1, len), *out;
	struct gz_compressor *c = NULL;
	size_t cap, out_len = 0;
	struct gz_io io;

	ck_assert_int_eq(gz_backend_zstd.level_min, 1);
	ck_assert_int_eq(gz_backend_zstd.level_max, 19);
	ck_assert_ptr_nonnull(body);
	memcpy(body + len / 2, "a little text in the middle", 27);
	ck_assert_int_eq(gz_compressor_new(&gz_backend_zstd, level, &c), 0);
	cap = gz_bound(c, len);
	out = malloc(cap);
	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(c->be->compress(c, body, len, out, cap, &out_len), 0);
	ck_assert_uint_le(declared_window(out, out_len, &single), ZSTD_WINDOW_MAX);
	ck_assert_int_eq(single, 0);
	ck_assert_int_eq(tu_verify_coded("zstd", out, out_len, body, len), 0);

	ck_assert_int_eq(c->be->reset(c), 0);
	io = (struct gz_io){ .in = body, .in_len = len, .out = out, .out_cap = cap };
	ck_assert_int_eq(c->be->stream(c, &io, GZ_FLUSH_FINISH), GZ_STREAM_END);
	out_len = cap - io.out_cap;
	ck_assert_uint_le(declared_window(out, out_len, &single), ZSTD_WINDOW_MAX);
	ck_assert_int_eq(single, 0);
	ck_assert_int_eq(tu_verify_coded("zstd", out, out_len, body, len), 0);
	gz_compressor_free(c);
	free(out);
	free(body);
	ck_assert_int_eq(gz_alloc_live(), 0);
#endif
}
END_TEST

/* gz_dcz_window_log: the start of the dictionary within reach from the
 * end of the body wherever the frame's declared window stays within RFC
 * 9842's limit. */
START_TEST(test_dcz_window_log)
{
	static const struct {
		size_t dict_len, in_len;
		int want;
	} t[] = {
		{ 0, 100, 10 }, /* plain zstd: sized to the body */
		{ 0, (size_t)8 << 20, 23 },
		{ 0, ((size_t)8 << 20) + 1, 23 }, /* over 8 MiB: 8 MiB declared */
		{ 60000, 60000, 17 },
		{ 10000000, 60000, 24 },         /* 16 MiB: the whole dictionary */
		{ 10000000, 10000000, 25 },      /* 32 MiB; declares 10,000,000 */
		{ 10000000, 12500000, 25 },      /* the limit itself */
		{ 10000000, 12500001, 23 },      /* over it: 8 MiB, not 16 */
		{ (size_t)100 << 20, 1000, 27 }, /* 128 MiB at most */
		{ (size_t)100 << 20, (size_t)125 << 20, 27 },
		{ (size_t)100 << 20, ((size_t)125 << 20) + 1, 26 },
	};

	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		ck_assert_msg(gz_dcz_window_log(t[i].dict_len, t[i].in_len) == t[i].want,
			      "dict %zu, body %zu: %d, want %d", t[i].dict_len, t[i].in_len,
			      gz_dcz_window_log(t[i].dict_len, t[i].in_len), t[i].want);
}
END_TEST

#ifdef HAVE_ZSTD
/* Text of words of 2-9 random lowercase letters, a line every 12 words: a
 * large vocabulary, as in source code, so that 8-byte sequences rarely
 * repeat and a match finder finds the dictionary's long matches (the
 * 24 words of TU_TEXT repeat within any window). */
static void
fill_words(uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t x = seed ? seed : 1;
	size_t i = 0, words = 0;

	while (i < len) {
		unsigned int n;

		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		n = 2 + x % 8;
		for (unsigned int k = 0; k < n && i < len; k++) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			p[i++] = (uint8_t)('a' + x % 26);
		}
		if (i < len)
			p[i++] = ++words % 12 == 0 ? '\n' : ' ';
	}
}

/* The dcz body of v2 against dict: its frame's declared window, and its
 * decoding by the reference decoder allowed exactly RFC 9842's window
 * limit (ZSTD_DCtx_setMaxWindowSize). Returns the body's length. */
static size_t
dcz_check(const struct gz_zdict *zd, const uint8_t *dict, size_t dict_len, const uint8_t *v2,
	  size_t len, uint64_t want_window, int want_single)
{
	size_t cap = gz_dcz_bound(len), n = 0, r;
	uint8_t *out = malloc(cap), *dec = malloc(len + 1);
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	int single;

	ck_assert_ptr_nonnull(out);
	ck_assert_ptr_nonnull(dec);
	ck_assert_ptr_nonnull(dc);
	ck_assert_int_eq(gz_dcz_compress(zd, 0, v2, len, out, cap, &n), 0);
	ck_assert_uint_eq(declared_window(out + GZ_DCZ_HEADER_NBYTES, n - GZ_DCZ_HEADER_NBYTES,
					  &single),
			  want_window);
	ck_assert_int_eq(single, want_single);
	ck_assert_uint_le(want_window, gz_dcz_window_max(dict_len));
	ck_assert(!ZSTD_isError(ZSTD_DCtx_setMaxWindowSize(dc, gz_dcz_window_max(dict_len))));
	ck_assert(!ZSTD_isError(ZSTD_DCtx_loadDictionary_advanced(dc, dict, dict_len,
								  ZSTD_dlm_byRef,
								  ZSTD_dct_rawContent)));
	r = ZSTD_decompressDCtx(dc, dec, len + 1, out + GZ_DCZ_HEADER_NBYTES,
				n - GZ_DCZ_HEADER_NBYTES);
	ck_assert_msg(!ZSTD_isError(r), "%s", ZSTD_getErrorName(r));
	ck_assert_uint_eq(r, len);
	ck_assert_mem_eq(dec, v2, len);
	ZSTD_freeDCtx(dc);
	free(dec);
	free(out);
	return n;
}
#endif

/* A 10 MB text dictionary (over 8 MiB) and its next version with ten
 * edits: the dcz frame reaches the whole dictionary, declares the body's
 * size as its window (within the limit, 1.25 times the dictionary),
 * decodes under the limit, and is at least 15 % smaller than the frame of
 * an 8 MiB window (the largest power of two within the limit), compressed
 * here with libzstd directly at the same level. A body over the limit
 * declares 8 MiB. */
START_TEST(test_dcz_large_dictionary)
{
#ifdef HAVE_ZSTD
	const size_t len = 10000000, big = 12600000;
	uint8_t *dict = malloc(len), *v2 = malloc(big), hash[32] = { 0 };
	struct gz_zdict *zd = NULL;
	ZSTD_CDict *cd;
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	size_t n, old, cap = gz_dcz_bound(len);
	uint8_t *out = malloc(cap);

	ck_assert_ptr_nonnull(dict);
	ck_assert_ptr_nonnull(v2);
	ck_assert_ptr_nonnull(out);
	ck_assert_ptr_nonnull(cc);
	fill_words(dict, len, 31);
	memcpy(v2, dict, len);
	for (size_t i = 1; i <= 10; i++)
		memcpy(v2 + i * (len / 11), "/* v2 */", 8);
	fill_words(v2 + len, big - len, 32);
	ck_assert_int_eq(gz_zdict_new(dict, len, 0, hash, &zd), 0);
	n = dcz_check(zd, dict, len, v2, len, len, 1);

	/* The 8 MiB window, as libzstd does it with the same dictionary. */
	cd = ZSTD_createCDict_advanced(dict, len, ZSTD_dlm_byRef, ZSTD_dct_rawContent,
				       ZSTD_getCParams(gz_backend_zstd.level_default,
						       ZSTD_CONTENTSIZE_UNKNOWN, len),
				       ZSTD_defaultCMem);
	ck_assert_ptr_nonnull(cd);
	ck_assert(!ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel,
						       gz_backend_zstd.level_default)));
	ck_assert(!ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_windowLog, 23)));
	ck_assert(!ZSTD_isError(ZSTD_CCtx_refCDict(cc, cd)));
	old = ZSTD_compress2(cc, out, cap, v2, len);
	ck_assert(!ZSTD_isError(old));
	ck_assert_msg((n - GZ_DCZ_HEADER_NBYTES) * 100 <= old * 85,
		      "dcz frame %zu bytes, with an 8 MiB window %zu", n - GZ_DCZ_HEADER_NBYTES,
		      old);

	/* Over the limit (12,500,000 bytes): 8 MiB declared, still decodes. */
	dcz_check(zd, dict, len, v2, big, (uint64_t)8 << 20, 0);
	ZSTD_freeCDict(cd);
	ZSTD_freeCCtx(cc);
	gz_zdict_free(zd);
	free(out);
	free(v2);
	free(dict);
	ck_assert_int_eq(gz_alloc_live(), 0);
#endif
}
END_TEST

Suite *
codings_suite(void)
{
	int nc = (int)coding_count();
	int np = (int)pair_count();
	const struct ck_case cases[] = {
		/* brotli 10-11 and zstd 19 on 1 MiB bodies take seconds each. */
		{ "roundtrip", 600, { { test_roundtrip, 0, np } } },
		{ "stream",
		  600,
		  { { test_stream_random, 0, np },
		    { test_stream_one_byte, 0, nc * 3 },
		    { test_stream_empty, 0, nc },
		    { test_stream_reset_and_misuse, 0, nc } } },
		{ "space", 60, { { test_enospc_bound, 0, nc } } },
		{ "registry", 0, { { test_registry, 0, 0 } } },
		{ "pump", 60, { { test_pump, 0, nc * 2 } } },
		{ "alloc", 120, { { test_alloc_faults, 0, nc } } },
		{ "window",
		  120,
		  { { test_zstd_window_every_level, 0, 19 },
		    { test_dcz_window_log, 0, 0 },
		    { test_dcz_large_dictionary, 0, 0 } } },
	};

	return ck_suite("codings", cases, sizeof cases / sizeof cases[0]);
}
