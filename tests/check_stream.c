/* check_stream.c: Check suite for the streaming path: random chunks and windows, sync flushes, reset. */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "gz_error.h"
#include "gz_alloc.h"
#include "gz_backend.h"
#include "gz_pool.h"
#include "check_suites.h"
#include "testutil.h"

#define CANARY_NBYTES 32
#define CANARY_BYTE 0x5a

/* For the per-call checks of the hot loops: Check's ck_assert records its
 * location in a file on every call, which dominated the run time with
 * 1-byte windows. This one costs nothing until it fails. */
#define HOT_CHECK(cond, ...)                                                                       \
	do {                                                                                       \
		if (!(cond))                                                                       \
			ck_abort_msg(__VA_ARGS__);                                                 \
	} while (0)

/* Body lengths of the randomised test, in bytes: a few hundred KiB so that
 * chunks of up to 64 KiB and many flushes all happen in one member. */
#define RAND_BODY_LEN ((size_t)300000)

/* ------------------------------------------------------------------------ */
/* A stream under test: the compressor, the output so far, and an
 * independent zlib inflate that follows the output to check sync points. */

struct drv {
	struct gz_compressor *c;
	uint8_t *out; /* all output so far */
	size_t out_len;
	size_t out_cap; /* allocated bytes at out, canary room included */
	uint64_t calls;
	uint64_t calls_max; /* a hang shows up as a failure, not a timeout */
	z_stream inf;
	size_t inf_fed; /* bytes of out given to inflate */
	uint8_t *dec;   /* inflate output */
	size_t dec_len;
	size_t dec_cap;
	uint32_t rng;
};

static uint32_t
drv_rand(struct drv *d)
{
	/* xorshift32, deterministic per seed */
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
	/* Level 0 of ISA-L expands random data by ~23% when streaming, and
	 * every flush adds a block header (at most a few hundred bytes). */
	d->out_cap = body_len * 2 + ((size_t)4 << 20);
	d->out = malloc(d->out_cap);
	ck_assert_ptr_nonnull(d->out);
	d->dec_cap = body_len + 1;
	d->dec = malloc(d->dec_cap);
	ck_assert_ptr_nonnull(d->dec);
	d->calls_max = 20 * (uint64_t)body_len + 1000000;
	d->rng = seed ? seed : 1;
	ck_assert_int_eq(inflateInit2(&d->inf, 31), Z_OK);
}

static void
drv_fini(struct drv *d)
{
	inflateEnd(&d->inf);
	free(d->out);
	free(d->dec);
}

/* One stream() call with a window of win bytes at the end of the output,
 * followed by CANARY_NBYTES guard bytes that must stay untouched. */
static int
drv_call(struct drv *d, struct gz_io *io, size_t win, enum gz_flush flush)
{
	uint8_t *start = d->out + d->out_len;
	int rc;

	HOT_CHECK(d->out_len + win + CANARY_NBYTES <= d->out_cap, "test output buffer too small");
	HOT_CHECK(++d->calls <= d->calls_max, "stream() does not converge");
	memset(start + win, CANARY_BYTE, CANARY_NBYTES);
	io->out = start;
	io->out_cap = win;
	rc = d->c->be->stream(d->c, io, flush);
	for (size_t i = 0; i < CANARY_NBYTES; i++)
		HOT_CHECK(start[win + i] == CANARY_BYTE, "write beyond out_cap (window %zu)", win);
	HOT_CHECK(io->out_cap <= win, "out_cap grew: %zu > %zu", io->out_cap, win);
	HOT_CHECK(io->out == start + (win - io->out_cap), "out and out_cap disagree");
	d->out_len += win - io->out_cap;
	return rc;
}

/* Window sizes: often a single byte, often small, sometimes large. */
static size_t
drv_win(struct drv *d)
{
	uint32_t r = drv_rand(d) % 10;

	if (r < 3)
		return 1;
	if (r < 6)
		return 1 + drv_rand(d) % 64;
	return 1 + drv_rand(d) % 65536;
}

/* Chunk sizes, 1 byte .. 64 KiB, spread over the orders of magnitude. */
static size_t
drv_chunk(struct drv *d)
{
	uint32_t r = drv_rand(d) % 10;

	if (r < 3)
		return 1 + drv_rand(d) % 16;
	if (r < 6)
		return 1 + drv_rand(d) % 4096;
	return 1 + drv_rand(d) % 65536;
}

/* Feed in[0..len) with the given flush until it is consumed and, for a
 * sync flush, until the flush is complete (in_len == 0, out_cap > 0). */
static void
drv_feed(struct drv *d, const uint8_t *in, size_t len, enum gz_flush flush, int tiny)
{
	struct gz_io io = { .in = in, .in_len = len };

	for (;;) {
		size_t win = tiny ? 1 : drv_win(d);
		int rc = drv_call(d, &io, win, flush);

		HOT_CHECK(rc == 0, "stream(): %d", rc);
		/* 0 means all input taken or the window full, never "stuck". */
		HOT_CHECK(io.in_len == 0 || io.out_cap == 0, "returned with input and space left");
		if (io.in_len == 0 && (flush == GZ_FLUSH_NONE || io.out_cap > 0))
			break;
	}
}

/* Everything consumed so far must decode from the output so far. */
static void
drv_check_prefix(struct drv *d, const uint8_t *body, size_t consumed)
{
	int rc;

	d->inf.next_in = d->out + d->inf_fed;
	d->inf.avail_in = (uInt)(d->out_len - d->inf_fed);
	d->inf.next_out = d->dec + d->dec_len;
	d->inf.avail_out = (uInt)(d->dec_cap - d->dec_len);
	rc = inflate(&d->inf, Z_SYNC_FLUSH);
	/* Z_BUF_ERROR: nothing new to decode (a repeated flush added nothing). */
	HOT_CHECK(rc == Z_OK || rc == Z_BUF_ERROR, "inflate: %d", rc);
	HOT_CHECK(d->inf.avail_in == 0, "inflate left %u bytes", d->inf.avail_in);
	d->inf_fed = d->out_len;
	d->dec_len = d->dec_cap - d->inf.avail_out;
	HOT_CHECK(d->dec_len == consumed, "prefix decodes to %zu bytes, %zu consumed", d->dec_len,
		  consumed);
	HOT_CHECK(memcmp(d->dec, body, consumed) == 0, "prefix differs from the input");
}

static void
drv_finish(struct drv *d, int tiny)
{
	struct gz_io io = { .in = NULL, .in_len = 0 };
	size_t before;
	int rc;

	do {
		rc = drv_call(d, &io, tiny ? 1 : drv_win(d), GZ_FLUSH_FINISH);
		HOT_CHECK(rc == 0 || rc == GZ_STREAM_END, "stream(FINISH): %d", rc);
	} while (rc == 0);
	/* After the end: the same answer, and not a byte more. */
	before = d->out_len;
	ck_assert_int_eq(drv_call(d, &io, 100, GZ_FLUSH_FINISH), GZ_STREAM_END);
	ck_assert_int_eq(drv_call(d, &io, 1, GZ_FLUSH_FINISH), GZ_STREAM_END);
	ck_assert_uint_eq(d->out_len, before);
}

/* Stream body as one member with random chunks, windows and sync flushes,
 * checking every sync point; the compressor must be at a member start. */
static void
stream_body(struct gz_compressor *c, const uint8_t *body, size_t len, uint32_t seed)
{
	struct drv d;
	size_t pos = 0, bound = gz_bound(c, len);
	int nsync = 0;

	drv_init(&d, c, len, seed);
	while (pos < len) {
		size_t n = drv_chunk(&d);
		enum gz_flush f = drv_rand(&d) % 6 == 0 ? GZ_FLUSH_SYNC : GZ_FLUSH_NONE;

		if (n > len - pos)
			n = len - pos;
		/* At least one sync point per member, in the middle at latest. */
		if (nsync == 0 && pos + n >= len / 2)
			f = GZ_FLUSH_SYNC;
		drv_feed(&d, body + pos, n, f, 0);
		pos += n;
		if (f == GZ_FLUSH_SYNC) {
			drv_check_prefix(&d, body, pos);
			nsync++;
		}
	}
	ck_assert_int_gt(nsync, 0);
	/* The one-shot bound does not depend on where a stream is (zlib's
	 * deflateBound drops the gzip wrapper from a finished stream). */
	ck_assert_uint_eq(gz_bound(c, len), bound);
	drv_finish(&d, 0);
	ck_assert_uint_eq(gz_bound(c, len), bound);
	ck_assert_int_eq(tu_verify_member(d.out, d.out_len, body, len), 0);
	drv_fini(&d);
}

/* ------------------------------------------------------------------------ */
/* Cases: (streaming backend, level) for every level of every streaming
 * backend, so ISA-L 0-3 and zlib 1-9. */

static size_t
stream_pair_count(void)
{
	size_t i, n = 0;

	for (i = 0; gz_backends[i]; i++)
		if (gz_backends[i]->caps & GZ_CAP_STREAM)
			n += (size_t)(gz_backends[i]->level_max - gz_backends[i]->level_min + 1);
	return n;
}

static void
stream_pair_at(size_t k, const struct gz_backend **be_ret, int *level_ret)
{
	size_t i;

	for (i = 0; gz_backends[i]; i++) {
		size_t n;

		if (!(gz_backends[i]->caps & GZ_CAP_STREAM))
			continue;
		n = (size_t)(gz_backends[i]->level_max - gz_backends[i]->level_min + 1);
		if (k < n) {
			*be_ret = gz_backends[i];
			*level_ret = gz_backends[i]->level_min + (int)k;
			return;
		}
		k -= n;
	}
	ck_abort_msg("stream pair index out of range");
}

static size_t
stream_backend_count(void)
{
	size_t i, n = 0;

	for (i = 0; gz_backends[i]; i++)
		if (gz_backends[i]->caps & GZ_CAP_STREAM)
			n++;
	return n;
}

static const struct gz_backend *
stream_backend_at(size_t k)
{
	size_t i;

	for (i = 0; gz_backends[i]; i++)
		if ((gz_backends[i]->caps & GZ_CAP_STREAM) && k-- == 0)
			return gz_backends[i];
	ck_abort_msg("stream backend index out of range");
	return NULL;
}

/* Random chunks 1 B..64 KiB, windows 1 B..64 KiB, sync flushes at random
 * points, three kinds of body, one compressor reset between members. */
START_TEST(test_stream_random)
{
	const struct gz_backend *be;
	struct gz_compressor *c = NULL;
	const enum tu_kind kinds[] = { TU_TEXT, TU_JSON, TU_RANDOM };
	int level;
	size_t k;

	stream_pair_at((size_t)_i, &be, &level);
	ck_assert_int_eq(gz_compressor_new(be, level, &c), 0);
	for (k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
		uint8_t *body = tu_payload(RAND_BODY_LEN, kinds[k], (uint32_t)(_i * 3 + k + 1));

		if (k > 0)
			ck_assert_int_eq(c->be->reset(c), 0);
		stream_body(c, body, RAND_BODY_LEN, (uint32_t)(_i * 101 + k + 7));
		free(body);
	}
	gz_compressor_free(c);
}
END_TEST

/* Every window is one byte; sync flushes after every chunk, each repeated
 * three times with no new input: the repeats must write nothing, and the
 * stream must still end. */
START_TEST(test_stream_one_byte)
{
	const struct gz_backend *be = stream_backend_at((size_t)_i / 2);
	int level = _i % 2 ? be->level_max : be->level_min;
	struct gz_compressor *c = NULL;
	const size_t len = 24000;
	uint8_t *body = tu_payload(len, TU_TEXT, 9);
	struct drv d;
	size_t pos = 0;

	/* The last third incompressible: ISA-L and zlib switch block types. */
	tu_fill(body + 16000, len - 16000, TU_RANDOM, 77);
	ck_assert_int_eq(gz_compressor_new(be, level, &c), 0);
	drv_init(&d, c, len, 3);
	while (pos < len) {
		size_t n = 1 + drv_rand(&d) % 1500;
		int r;

		if (n > len - pos)
			n = len - pos;
		drv_feed(&d, body + pos, n, GZ_FLUSH_SYNC, 1);
		pos += n;
		drv_check_prefix(&d, body, pos);
		for (r = 0; r < 3; r++) {
			struct gz_io io = { .in = NULL, .in_len = 0 };
			size_t before = d.out_len;

			HOT_CHECK(drv_call(&d, &io, 1, GZ_FLUSH_SYNC) == 0,
				  "repeated flush failed");
			HOT_CHECK(io.out_cap == 1 && d.out_len == before, "repeated flush wrote");
		}
	}
	drv_finish(&d, 1);
	ck_assert_int_eq(tu_verify_member(d.out, d.out_len, body, len), 0);
	drv_fini(&d);
	gz_compressor_free(c);
	free(body);
}
END_TEST

/* A sync flush after every single input byte, 1-byte windows throughout:
 * the flush machinery on its own. */
START_TEST(test_stream_sync_every_byte)
{
	const struct gz_backend *be = stream_backend_at((size_t)_i);
	struct gz_compressor *c = NULL;
	const size_t len = 1500;
	uint8_t *body = tu_payload(len, TU_JSON, 5);
	struct drv d;
	size_t pos;

	ck_assert_int_eq(gz_compressor_new(be, be->level_default, &c), 0);
	drv_init(&d, c, len, 11);
	for (pos = 0; pos < len; pos++) {
		drv_feed(&d, body + pos, 1, GZ_FLUSH_SYNC, 1);
		drv_check_prefix(&d, body, pos + 1);
	}
	drv_finish(&d, 1);
	ck_assert_int_eq(tu_verify_member(d.out, d.out_len, body, len), 0);
	drv_fini(&d);
	gz_compressor_free(c);
	free(body);
}
END_TEST

/*
 * Sync flushes with a window of the same size on every call, for windows
 * of 1..160 bytes: a flush must complete whatever the window. Regression
 * for ISA-L, whose flush could end with its last bytes in an internal
 * buffer; with more room it then started a new empty block, and with
 * windows of 2, 3 or 117 bytes never completed (tests/fuzz/fuzz_stream).
 */
START_TEST(test_stream_sync_fixed_windows)
{
	const struct gz_backend *be;
	struct gz_compressor *c = NULL;
	const size_t chunks[] = { 0, 1, 37, 300 };
	uint8_t *body = tu_payload(400, TU_TEXT, 21);
	int level;

	stream_pair_at((size_t)_i, &be, &level);
	ck_assert_int_eq(gz_compressor_new(be, level, &c), 0);
	for (size_t win = 1; win <= 160; win++) {
		struct drv d;
		size_t pos = 0;

		drv_init(&d, c, 400, (uint32_t)win);
		d.calls_max = 100000; /* a flush that never completes fails here */
		for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
			struct gz_io io = { .in = body + pos, .in_len = chunks[k] };

			for (;;) {
				HOT_CHECK(drv_call(&d, &io, win, GZ_FLUSH_SYNC) == 0, "stream()");
				if (io.in_len == 0 && io.out_cap > 0)
					break;
			}
			pos += chunks[k];
			drv_check_prefix(&d, body, pos);
		}
		drv_finish(&d, 0);
		ck_assert_int_eq(tu_verify_member(d.out, d.out_len, body, pos), 0);
		drv_fini(&d);
		ck_assert_int_eq(c->be->reset(c), 0);
	}
	gz_compressor_free(c);
	free(body);
}
END_TEST

/* An empty body: FINISH straight away, with 1-byte and with large windows. */
START_TEST(test_stream_empty)
{
	const struct gz_backend *be = stream_backend_at((size_t)_i / 2);
	int tiny = _i % 2;
	struct gz_compressor *c = NULL;
	uint8_t dummy = 0;
	struct drv d;

	ck_assert_int_eq(gz_compressor_new(be, be->level_default, &c), 0);
	drv_init(&d, c, 0, 5);
	drv_finish(&d, tiny);
	ck_assert_int_eq(tu_verify_member(d.out, d.out_len, &dummy, 0), 0);
	drv_fini(&d);

	/* And a sync flush of nothing before the end. */
	ck_assert_int_eq(c->be->reset(c), 0);
	drv_init(&d, c, 0, 6);
	drv_feed(&d, NULL, 0, GZ_FLUSH_SYNC, tiny);
	drv_check_prefix(&d, &dummy, 0);
	drv_finish(&d, tiny);
	ck_assert_int_eq(tu_verify_member(d.out, d.out_len, &dummy, 0), 0);
	drv_fini(&d);
	gz_compressor_free(c);
}
END_TEST

/* reset() abandons a half-written member; the next member is whole. */
START_TEST(test_stream_reset_midway)
{
	const struct gz_backend *be = stream_backend_at((size_t)_i);
	struct gz_compressor *c = NULL;
	uint8_t *a = tu_payload(100000, TU_TEXT, 21);
	uint8_t *b = tu_payload(70000, TU_JSON, 22);
	struct drv d;
	int round;

	ck_assert_int_eq(gz_compressor_new(be, be->level_default, &c), 0);
	for (round = 0; round < 3; round++) {
		/* Half of a, with a flush in the middle and tiny windows at the end. */
		drv_init(&d, c, 100000, 30 + (uint32_t)round);
		drv_feed(&d, a, 30000, GZ_FLUSH_SYNC, 0);
		drv_feed(&d, a + 30000, 20000, GZ_FLUSH_NONE, 1);
		drv_fini(&d);
		ck_assert_int_eq(c->be->reset(c), 0);
		stream_body(c, b, 70000, 40 + (uint32_t)round);
		ck_assert_int_eq(c->be->reset(c), 0);
	}
	gz_compressor_free(c);
	free(a);
	free(b);
}
END_TEST

/* compress() takes over the shared state: stream() is refused until
 * reset(), and streaming and one-shot use then alternate freely. */
START_TEST(test_stream_after_compress)
{
	const struct gz_backend *be = stream_backend_at((size_t)_i);
	struct gz_compressor *c = NULL;
	const size_t len = 50000;
	uint8_t *body = tu_payload(len, TU_TEXT, 61);
	uint8_t byte = 0;
	struct gz_io io = { .in = body, .in_len = 10, .out = &byte, .out_cap = 1 };
	size_t bound, out_len = 0;
	uint8_t *out;
	int i;

	ck_assert_int_eq(gz_compressor_new(be, be->level_default, &c), 0);
	bound = gz_bound(c, len);
	out = malloc(bound);
	ck_assert_ptr_nonnull(out);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(c->be->compress(c, body, len, out, bound, &out_len), 0);
		ck_assert_int_eq(tu_verify_member(out, out_len, body, len), 0);
		ck_assert_int_eq(c->be->stream(c, &io, GZ_FLUSH_NONE), GZ_EINVAL);
		ck_assert_uint_eq(io.in_len, 10);
		ck_assert_uint_eq(io.out_cap, 1);
		ck_assert_int_eq(c->be->reset(c), 0);
		stream_body(c, body, len, 70 + (uint32_t)i);
	}
	/* Streaming half a member, then one-shot: compress() starts afresh. */
	ck_assert_int_eq(c->be->reset(c), 0);
	{
		struct drv d;

		drv_init(&d, c, len, 80);
		drv_feed(&d, body, 20000, GZ_FLUSH_NONE, 0);
		drv_fini(&d);
	}
	ck_assert_int_eq(c->be->compress(c, body, len, out, bound, &out_len), 0);
	ck_assert_int_eq(tu_verify_member(out, out_len, body, len), 0);
	free(out);
	free(body);
	gz_compressor_free(c);
}
END_TEST

START_TEST(test_stream_bad_flush)
{
	const struct gz_backend *be = stream_backend_at((size_t)_i);
	struct gz_compressor *c = NULL;
	uint8_t in[4] = { 1, 2, 3, 4 }, out[64];
	struct gz_io io = { .in = in, .in_len = sizeof in, .out = out, .out_cap = sizeof out };

	ck_assert_int_eq(gz_compressor_new(be, be->level_default, &c), 0);
	ck_assert_int_eq(c->be->stream(c, &io, (enum gz_flush)3), GZ_EINVAL);
	ck_assert_int_eq(c->be->stream(c, &io, (enum gz_flush) - 1), GZ_EINVAL);
	ck_assert_uint_eq(io.in_len, sizeof in);
	ck_assert_uint_eq(io.out_cap, sizeof out);
	gz_compressor_free(c);
}
END_TEST

/* Stream memory settings (gz_compressor_new_win): every window and
 * memLevel in a grid round-trips a stream of small sync-flushed events,
 * each the same bytes from a second compressor of the same settings; out of
 * range is GZ_EINVAL, for compressors and pools alike. */
START_TEST(test_stream_window_settings)
{
	const struct gz_backend *be = stream_backend_at((size_t)_i);
	const int wins[] = { 9, 10, 12, 15, 0 }, mems[] = { 1, 4, 5, 8, 9, 0 };
	const int bad[][2] = { { 8, 0 }, { 16, 0 }, { -1, 0 }, { 0, 10 }, { 0, -1 } };
	enum { NEV = 200, EVLEN = 150 };
	uint8_t *body = tu_payload(NEV * EVLEN, TU_JSON, 9);
	size_t cap = NEV * EVLEN * 2 + 1024;
	uint8_t *out[2] = { malloc(cap), malloc(cap) };
	struct gz_compressor *c = NULL;
	struct gz_pool *pool = NULL;

	ck_assert_ptr_nonnull(out[0]);
	ck_assert_ptr_nonnull(out[1]);
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
		ck_assert_int_eq(gz_compressor_new_win(be, be->level_default, bad[k][0], bad[k][1],
						       &c),
				 GZ_EINVAL);
		ck_assert_int_eq(gz_pool_new_win(be, be->level_default, bad[k][0], bad[k][1], 4,
						 &pool),
				 GZ_EINVAL);
	}
	for (size_t w = 0; w < sizeof wins / sizeof wins[0]; w++)
		for (size_t m = 0; m < sizeof mems / sizeof mems[0]; m++) {
			size_t len[2];

			for (int r = 0; r < 2; r++) {
				struct gz_io io = { .out = out[r], .out_cap = cap };

				ck_assert_int_eq(gz_compressor_new_win(be, be->level_default,
								       wins[w], mems[m], &c),
						 0);
				ck_assert_int_eq(c->window_bits, wins[w]);
				ck_assert_int_eq(c->mem_level, mems[m]);
				for (int e = 0; e < NEV; e++) {
					io.in = body + (size_t)e * EVLEN;
					io.in_len = EVLEN;
					ck_assert_int_eq(c->be->stream(c, &io, GZ_FLUSH_SYNC), 0);
					ck_assert_uint_eq(io.in_len, 0);
				}
				ck_assert_int_eq(c->be->stream(c, &io, GZ_FLUSH_FINISH),
						 GZ_STREAM_END);
				len[r] = cap - io.out_cap;
				gz_compressor_free(c);
			}
			ck_assert_int_eq(tu_verify_member(out[0], len[0], body, NEV * EVLEN), 0);
			ck_assert_msg(len[0] == len[1] && memcmp(out[0], out[1], len[0]) == 0,
				      "%s window %d mem %d: two compressors, two outputs", be->name,
				      wins[w], mems[m]);
		}
	free(out[0]);
	free(out[1]);
	free(body);
}
END_TEST

Suite *
stream_suite(void)
{
	int nb = (int)stream_backend_count();
	const struct ck_case cases[] = {
		{ "random", 120, { { test_stream_random, 0, (int)stream_pair_count() } } },
		{ "tiny",
		  60,
		  { { test_stream_one_byte, 0, nb * 2 },
		    { test_stream_sync_every_byte, 0, nb },
		    { test_stream_sync_fixed_windows, 0, (int)stream_pair_count() },
		    { test_stream_empty, 0, nb * 2 } } },
		{ "reset",
		  60,
		  { { test_stream_reset_midway, 0, nb },
		    { test_stream_after_compress, 0, nb },
		    { test_stream_bad_flush, 0, nb } } },
		{ "window", 60, { { test_stream_window_settings, 0, nb } } },
	};

	return ck_suite("stream", cases, sizeof cases / sizeof cases[0]);
}
