/* check_pump.c: Check suite for the core's stream pump (gz_stream.c), driven without a daemon. */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "gz_error.h"
#include "gz_alloc.h"
#include "gz_backend.h"
#include "gz_pool.h"
#include "gz_stream.h"
#include "check_suites.h"
#include "testutil.h"

/* Body of the scripted sources, in bytes. */
#define PUMP_BODY_LEN ((size_t)200000)
/* Most reads of one test: every script ends well before. */
#define PUMP_MAX_READS 100000

/*
 * A scripted source: gives the body in chunks of the scripted sizes (the
 * script repeats), returns 0 ("no data now") where the script says 0, and
 * fails after fail_at bytes when fail_at is set.
 */
struct src {
	const uint8_t *body;
	size_t len, pos;
	const size_t *script;
	size_t nscript, step;
	size_t fail_at; /* 0: never */
	unsigned int calls, stalls;
	bool last_stall;       /* the last call returned 0 */
	unsigned int sleep_at; /* nonzero: the call of this number sleeps first */
};

static ssize_t
src_read(void *cls, uint8_t *buf, size_t max)
{
	struct src *s = cls;
	size_t want = s->script[s->step++ % s->nscript];

	s->calls++;
	s->last_stall = false;
	if (s->sleep_at && s->calls == s->sleep_at)
		usleep(GZ_PUMP_FLUSH_US + 5000); /* a source that blocks past the bound */
	if (s->fail_at && s->pos >= s->fail_at)
		return GZ_SOURCE_ERROR;
	if (s->pos == s->len)
		return GZ_SOURCE_END;
	if (want == 0) {
		s->stalls++;
		s->last_stall = true;
		return 0;
	}
	if (want > max)
		want = max;
	if (want > s->len - s->pos)
		want = s->len - s->pos;
	memcpy(buf, s->body + s->pos, want);
	s->pos += want;
	return (ssize_t)want;
}

/* An independent inflate following the output: after each read that
 * returned with the source stalled (0 bytes and no end), everything the
 * source gave must decode (the flush promise). */
struct follow {
	z_stream zs;
	uint8_t *dec;
	size_t dec_len, dec_cap;
};

static void
follow_init(struct follow *f, size_t cap)
{
	memset(f, 0, sizeof *f);
	ck_assert_int_eq(inflateInit2(&f->zs, 31), Z_OK);
	f->dec = malloc(cap);
	ck_assert_ptr_nonnull(f->dec);
	f->dec_cap = cap;
}

static int
follow_feed(struct follow *f, const uint8_t *p, size_t n)
{
	int rc = Z_OK;

	f->zs.next_in = (Bytef *)(uintptr_t)p;
	f->zs.avail_in = (uInt)n;
	while (f->zs.avail_in > 0 && rc == Z_OK) {
		f->zs.next_out = f->dec + f->dec_len;
		f->zs.avail_out = (uInt)(f->dec_cap - f->dec_len);
		rc = inflate(&f->zs, Z_SYNC_FLUSH);
		f->dec_len = f->dec_cap - f->zs.avail_out;
		if (rc == Z_BUF_ERROR)
			return -1;
	}
	return rc == Z_OK || rc == Z_STREAM_END ? rc : -1;
}

static void
follow_fini(struct follow *f)
{
	inflateEnd(&f->zs);
	free(f->dec);
}

/* Scripts: chunk sizes, 0 = a stall. */
static const size_t script_bulk[] = { 4096, 100, 0, 65536, 1, 0, 0, 3000 };
static const size_t script_ll[] = { 300, 0, 120, 0, 7000 };

static const struct {
	const size_t *script;
	size_t n;
	unsigned int flags; /* GZ_PUMP_* */
	size_t out_cap;     /* the reader's window, bytes */
} cases[] = {
	{ script_bulk, 8, 0, 16384 },
	{ script_bulk, 8, 0, 1 },
	{ script_ll, 5, GZ_PUMP_LOW_LATENCY, 16384 },
	{ script_ll, 5, GZ_PUMP_LOW_LATENCY, 7 },
	{ script_bulk, 8, GZ_PUMP_PACED, 16384 },
	{ script_bulk, 8, GZ_PUMP_PACED, 1 },
	{ script_ll, 5, GZ_PUMP_PACED | GZ_PUMP_LOW_LATENCY, 7 },
};

/* Every streaming backend at its default level, each scripted source and
 * window: the member decodes to the body; after every stall the output so
 * far decodes to everything given; in low-latency mode a read returns
 * after each chunk's output with all of it decodable; a paced pump calls
 * its source at most once per read; the compressor goes back to the pool
 * the moment the trailer is written. */
START_TEST(test_pump_scripts)
{
	const struct gz_backend *be = gz_backends[_i / (int)(sizeof cases / sizeof cases[0])];
	int ci = _i % (int)(sizeof cases / sizeof cases[0]);
	uint8_t *body = tu_payload(PUMP_BODY_LEN, TU_TEXT, (uint32_t)_i);
	struct src s = { .body = body,
			 .len = PUMP_BODY_LEN,
			 .script = cases[ci].script,
			 .nscript = cases[ci].n };
	struct gz_pool *pool;
	struct gz_pool_stats ps;
	struct gz_pump p;
	struct follow f;
	uint8_t *out = malloc(cases[ci].out_cap), *all = NULL;
	size_t all_len = 0, all_cap = 0;
	unsigned int reads = 0;
	bool end = false;

	if (!(be->caps & GZ_CAP_STREAM)) {
		free(out);
		free(body);
		return;
	}
	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(gz_pool_new(be, be->level_default, 1, &pool), 0);
	ck_assert_int_eq(gz_pump_init(&p, pool, 4096, cases[ci].flags), 0);
	follow_init(&f, PUMP_BODY_LEN + 1);
	while (!end) {
		unsigned int calls0 = s.calls;
		ssize_t n = gz_pump_read(&p, src_read, &s, out, cases[ci].out_cap, &end);

		ck_assert_msg(n >= 0, "%s: gz_pump_read %zd", be->name, n);
		ck_assert_uint_le((size_t)n, cases[ci].out_cap);
		ck_assert_uint_lt(++reads, PUMP_MAX_READS);
		if (all_len + (size_t)n > all_cap) {
			all_cap = 2 * (all_len + (size_t)n) + 64;
			all = realloc(all, all_cap);
			ck_assert_ptr_nonnull(all);
		}
		if (n > 0) /* a paced read may hand over nothing */
			memcpy(all + all_len, out, (size_t)n);
		all_len += (size_t)n;
		ck_assert_int_ge(follow_feed(&f, out, (size_t)n), 0);
		if (cases[ci].flags & GZ_PUMP_PACED)
			ck_assert_uint_le(s.calls - calls0, 1);
		if (n == 0 && !end && s.last_stall) { /* stalled, flushed: all given decodes */
			ck_assert_uint_eq(f.dec_len, s.pos);
			ck_assert_int_eq(memcmp(f.dec, body, s.pos), 0);
		}
		if ((cases[ci].flags & GZ_PUMP_LOW_LATENCY) && n > 0 && !end && p.in_len == 0 &&
		    !p.flushing) {
			/* a chunk's output is complete when the read returns */
			ck_assert_uint_eq(f.dec_len, (size_t)p.in_total);
		}
	}
	ck_assert_uint_gt(s.stalls, 0);
	/* The trailer is written: the compressor is back before fini. */
	gz_pool_get_stats(pool, &ps);
	ck_assert_uint_eq(ps.gets, ps.puts);
	ck_assert_uint_eq(ps.idle, 1);
	ck_assert_ptr_null(p.c);
	ck_assert_uint_eq(p.in_total, PUMP_BODY_LEN);
	ck_assert_uint_eq(p.out_total, all_len);
	ck_assert_int_eq(tu_check_member(all, all_len, body, PUMP_BODY_LEN), 0);
	{
		uint8_t *dec = NULL;
		size_t dec_len = 0;

		ck_assert_int_eq(tu_gunzip(all, all_len, &dec, &dec_len), 0);
		ck_assert_uint_eq(dec_len, PUMP_BODY_LEN);
		ck_assert_int_eq(memcmp(dec, body, PUMP_BODY_LEN), 0);
		free(dec);
	}
	/* After the end: nothing more, still the end. */
	ck_assert_int_eq(gz_pump_read(&p, src_read, &s, out, cases[ci].out_cap, &end), 0);
	ck_assert(end);
	gz_pump_fini(&p);
	follow_fini(&f);
	gz_pool_free(pool);
	free(all);
	free(out);
	free(body);
}
END_TEST

/* A paced pump over a source of 1-byte chunks of one repeated letter (a
 * ratio no block fills soon): reads return 0 while the compressor holds the
 * bytes, one source call each; the call after a source call that blocked
 * past GZ_PUMP_FLUSH_US returns output, and everything the source gave
 * decodes from it (a sync flush), without a stall. An unpaced pump over the
 * same source fills its window from many calls in one read. */
START_TEST(test_pump_paced_bound)
{
	static const size_t one[] = { 1 };
	uint8_t body[4096];
	struct src s = { .body = body, .len = sizeof body, .script = one, .nscript = 1 };
	struct gz_pool *pool;
	struct gz_pump p;
	struct follow f;
	uint8_t out[1024];
	bool end = false;
	ssize_t n = 0;
	unsigned int reads = 0;

	memset(body, 'a', sizeof body);
	ck_assert_int_eq(gz_pool_new(&gz_backend_zlib, gz_backend_zlib.level_default, 1, &pool), 0);
	ck_assert_int_eq(gz_pump_init(&p, pool, 4096, GZ_PUMP_PACED), 0);
	follow_init(&f, sizeof body + 1);
	/* Output waits while the calls are quick; the gzip header alone is
	 * not sent either (held for the read with more). */
	for (reads = 0; reads < 8; reads++) {
		n = gz_pump_read(&p, src_read, &s, out, sizeof out, &end);
		ck_assert_int_eq(n, 0);
		ck_assert_uint_eq(s.calls, reads + 1);
		ck_assert_int_ge(follow_feed(&f, out, (size_t)n), 0);
	}
	ck_assert_int_eq(n, 0);
	ck_assert_uint_lt(f.dec_len, s.pos);
	/* The next call blocks past the bound: its read flushes. */
	s.sleep_at = s.calls + 1;
	n = gz_pump_read(&p, src_read, &s, out, sizeof out, &end);
	ck_assert_int_gt(n, 0);
	ck_assert(!end);
	ck_assert_uint_eq(s.stalls, 0);
	ck_assert_int_ge(follow_feed(&f, out, (size_t)n), 0);
	ck_assert_uint_eq(f.dec_len, s.pos);
	ck_assert_int_eq(memcmp(f.dec, body, s.pos), 0);
	gz_pump_fini(&p);
	follow_fini(&f);
	/* Unpaced: one read takes many calls. */
	s.pos = 0;
	s.calls = 0;
	s.sleep_at = 0;
	ck_assert_int_eq(gz_pump_init(&p, pool, 4096, 0), 0);
	n = gz_pump_read(&p, src_read, &s, out, sizeof out, &end);
	ck_assert_int_ge(n, 0);
	ck_assert_uint_gt(s.calls, 1);
	gz_pump_fini(&p);
	gz_pool_free(pool);
}
END_TEST

/* A source that fails midway: GZ_ESOURCE, then the same on every call,
 * never a trailer (no read ever reports the end), and the compressor back
 * in the pool at once. */
START_TEST(test_pump_source_error)
{
	const struct gz_backend *be = &gz_backend_zlib;
	uint8_t *body = tu_payload(PUMP_BODY_LEN, TU_TEXT, 9);
	static const size_t script[] = { 5000 };
	struct src s = {
		.body = body, .len = PUMP_BODY_LEN, .script = script, .nscript = 1, .fail_at = 50000
	};
	struct gz_pool *pool;
	struct gz_pool_stats ps;
	struct gz_pump p;
	uint8_t out[8192];
	bool end = false;
	ssize_t n = 0;
	unsigned int reads = 0;

	ck_assert_int_eq(gz_pool_new(be, be->level_default, 1, &pool), 0);
	ck_assert_int_eq(gz_pump_init(&p, pool, 4096, 0), 0);
	while ((n = gz_pump_read(&p, src_read, &s, out, sizeof out, &end)) >= 0) {
		ck_assert(!end);
		ck_assert_uint_lt(++reads, PUMP_MAX_READS);
	}
	ck_assert_int_eq(n, GZ_ESOURCE);
	gz_pool_get_stats(pool, &ps);
	ck_assert_uint_eq(ps.gets, ps.puts);
	ck_assert_int_eq(gz_pump_read(&p, src_read, &s, out, sizeof out, &end), GZ_ESOURCE);
	ck_assert(!end);
	gz_pump_fini(&p);
	gz_pool_free(pool);
	free(body);
}
END_TEST

/* Misuse and failures: a pool of a whole-buffer-only backend, no room
 * (in_cap 0); every allocation of gz_pump_init failing in turn leaves
 * nothing held; an abandoned pump gives its compressor back at fini. */
START_TEST(test_pump_init)
{
	struct gz_pool *pool;
	struct gz_pool_stats ps;
	struct gz_pump p;
	uint64_t k;
	size_t i;
	int rc;

	for (i = 0; gz_backends[i]; i++) {
		if (gz_backends[i]->caps & GZ_CAP_STREAM)
			continue;
		ck_assert_int_eq(gz_pool_new(gz_backends[i], gz_backends[i]->level_default, 1,
					     &pool),
				 0);
		ck_assert_int_eq(gz_pump_init(&p, pool, 4096, 0), GZ_EINVAL);
		gz_pump_fini(&p);
		gz_pool_free(pool);
	}
	ck_assert_int_eq(gz_pool_new(&gz_backend_zlib, 6, 0, &pool), 0);
	ck_assert_int_eq(gz_pump_init(&p, pool, 0, false), GZ_EINVAL);
	for (k = 1; k < 100; k++) {
		tu_alloc_install(k);
		rc = gz_pump_init(&p, pool, 4096, 0);
		if (rc == 0) {
			ck_assert(!tu_alloc_failed());
			gz_pump_fini(&p);
			ck_assert_int_eq(tu_alloc_live(), 0);
			tu_alloc_uninstall();
			break;
		}
		ck_assert_int_eq(rc, GZ_ENOMEM);
		ck_assert(tu_alloc_failed());
		ck_assert_int_eq(tu_alloc_live(), 0);
		tu_alloc_uninstall();
	}
	ck_assert_uint_lt(k, 100);
	/* Abandoned mid-member (a client gone): fini returns the compressor. */
	ck_assert_int_eq(gz_pump_init(&p, pool, 4096, 0), 0);
	gz_pool_get_stats(pool, &ps);
	ck_assert_uint_eq(ps.gets - ps.puts, 1);
	gz_pump_fini(&p);
	gz_pool_get_stats(pool, &ps);
	ck_assert_uint_eq(ps.gets, ps.puts);
	gz_pool_free(pool);
}
END_TEST

/* Check the comment header of member m[0..len): FLG.FCOMMENT, comment_nbytes
 * - 1 spaces and a NUL after the 10 bytes; then it decodes to body. */
static void
expect_commented(const uint8_t *m, size_t len, size_t comment_nbytes, const uint8_t *body,
		 size_t body_len, const char *ctx)
{
	uint8_t *dec = NULL;
	size_t dec_len = 0, i;

	ck_assert_msg(len > GZ_HEADER_NBYTES + comment_nbytes, "%s: %zu bytes", ctx, len);
	ck_assert_msg(m[0] == 0x1f && m[1] == 0x8b && m[2] == 8 && (m[3] & 0x10) != 0 &&
			      (m[3] & ~0x11) == 0,
		      "%s: FLG %#x", ctx, m[3]);
	for (i = 0; i + 1 < comment_nbytes; i++)
		ck_assert_msg(m[GZ_HEADER_NBYTES + i] == ' ', "%s: comment byte %zu", ctx, i);
	ck_assert_msg(m[GZ_HEADER_NBYTES + comment_nbytes - 1] == 0, "%s: no NUL", ctx);
	ck_assert_msg(tu_gunzip(m, len, &dec, &dec_len) == 0, "%s: does not decode", ctx);
	ck_assert_uint_eq(dec_len, body_len);
	ck_assert_int_eq(memcmp(dec, body, body_len), 0);
	free(dec);
}

/*
 * The core writes the member the caller asks for, with a header comment
 * (length hiding's padding): gz_compress_member for every gzip backend
 * (the plain member plus exactly comment_nbytes), and the pump after
 * gz_pump_set_comment, paced and not, through a 1-byte window too;
 * gz_header_comment gives the same header whole or byte by byte and
 * refuses a header that is not plain.
 */
START_TEST(test_member_comment)
{
	static const size_t comments[] = { 1, 7, 300 };
	const struct gz_backend *be = gz_backends[_i];
	size_t len = 50000, k;
	uint8_t *body = tu_payload(len, TU_TEXT, 91);
	struct gz_compressor *c;

	ck_assert_int_eq(gz_compressor_new(be, be->level_default, &c), 0);
	for (k = 0; k < sizeof comments / sizeof comments[0]; k++) {
		size_t cn = comments[k], bound = gz_bound(c, len) + cn, plain_len, out_len;
		uint8_t *plain = malloc(bound), *out = malloc(bound), one[GZ_HEADER_NBYTES + 300];
		char ctx[64];

		ck_assert(plain && out);
		snprintf(ctx, sizeof ctx, "%s, comment %zu", be->name, cn);
		if (be->caps & GZ_CAP_ONESHOT) {
			ck_assert_int_eq(gz_compress_member(c, body, len, 0, plain, bound,
							    &plain_len),
					 0);
			ck_assert_int_eq(gz_compress_member(c, body, len, cn, out, bound, &out_len),
					 0);
			ck_assert_uint_eq(out_len, plain_len + cn);
			expect_commented(out, out_len, cn, body, len, ctx);
			ck_assert_int_eq(memcmp(out + GZ_HEADER_NBYTES + cn,
						plain + GZ_HEADER_NBYTES,
						plain_len - GZ_HEADER_NBYTES),
					 0);
			/* byte by byte as whole */
			for (size_t at = 0; at < GZ_HEADER_NBYTES + cn; at++)
				ck_assert_int_eq(gz_header_comment(plain, cn, at, one + at, 1), 0);
			ck_assert_int_eq(memcmp(one, out, GZ_HEADER_NBYTES + cn), 0);
			ck_assert_int_eq(gz_header_comment(plain, cn, 0, one,
							   GZ_HEADER_NBYTES + cn + 1),
					 GZ_EINVAL);
			plain[3] |= 0x08; /* FNAME: not plain */
			ck_assert_int_eq(gz_header_comment(plain, cn, 0, one, 1), GZ_EINVAL);
			ck_assert_int_eq(gz_header_comment(out, 0, 0, one, 1), GZ_EINVAL);
		}
		if (be->caps & GZ_CAP_STREAM) {
			static const struct {
				unsigned int flags;
				size_t cap;
			} runs[] = { { 0, 16384 }, { 0, 1 }, { GZ_PUMP_PACED, 7 } };

			for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
				static const size_t script[] = { 4096, 0, 1000 };
				struct src sr = {
					.body = body, .len = len, .script = script, .nscript = 3
				};
				struct gz_pool *pool;
				struct gz_pump p;
				uint8_t *win = malloc(runs[r].cap);
				size_t got = 0;
				unsigned int reads = 0;
				bool end = false;

				ck_assert_ptr_nonnull(win);
				ck_assert_int_eq(gz_pool_new(be, be->level_default, 1, &pool), 0);
				ck_assert_int_eq(gz_pump_init(&p, pool, 4096, runs[r].flags), 0);
				ck_assert_int_eq(gz_pump_set_comment(&p, cn), 0);
				while (!end) {
					ssize_t n = gz_pump_read(&p, src_read, &sr, win,
								 runs[r].cap, &end);

					ck_assert_msg(n >= 0, "%s: gz_pump_read %zd", ctx, n);
					ck_assert_uint_lt(++reads, PUMP_MAX_READS);
					ck_assert_uint_le(got + (size_t)n, bound);
					if (n > 0)
						memcpy(out + got, win, (size_t)n);
					got += (size_t)n;
					/* once anything went out, no comment can be set */
					if (got > 0)
						ck_assert_int_eq(gz_pump_set_comment(&p, cn),
								 GZ_EINVAL);
				}
				ck_assert_uint_eq(p.out_total, got);
				expect_commented(out, got, cn, body, len, ctx);
				gz_pump_fini(&p);
				gz_pool_free(pool);
				free(win);
			}
		}
		free(plain);
		free(out);
	}
	gz_compressor_free(c);
	free(body);
}
END_TEST

Suite *
pump_suite(void)
{
	const struct ck_case tc[] = {
		{ "pump",
		  60,
		  { { test_pump_scripts, 0,
		      (int)(tu_backend_count() * (sizeof cases / sizeof cases[0])) },
		    { test_pump_source_error, 0, 0 },
		    { test_pump_paced_bound, 0, 0 },
		    { test_pump_init, 0, 0 },
		    { test_member_comment, 0, (int)tu_backend_count() } } }
	};

	return ck_suite("pump", tc, 1);
}
