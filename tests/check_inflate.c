/* check_inflate.c: Check suite for the core's request body inflater (gz_inflate.c), with exact counters. */
#include "config.h"

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "gz_alloc.h"
#include "gz_error.h"
#include "gz_inflate.h"
#include "check_suites.h"
#include "testutil.h"

/* The sink's output space in these tests, bytes: small, so that bodies
 * take many pieces and the limits fall between and inside them. */
#define INF_CAP 1000

/* What a sink collected; refuse_at: refuse (with 7) on that call. */
struct sink {
	uint8_t *buf;
	size_t len, cap;
	unsigned int calls, refuse_at;
	size_t max_piece;
	bool keep; /* keep the bytes (else only count them) */
};

static int
sink_fn(void *cls, const uint8_t *p, size_t n)
{
	struct sink *s = cls;

	ck_assert_uint_gt(n, 0);
	s->calls++;
	if (s->refuse_at && s->calls == s->refuse_at)
		return 7;
	if (n > s->max_piece)
		s->max_piece = n;
	if (s->keep) {
		if (s->len + n > s->cap) {
			s->cap = (s->len + n) * 2;
			s->buf = realloc(s->buf, s->cap);
			ck_assert_ptr_nonnull(s->buf);
		}
		memcpy(s->buf + s->len, p, n);
	}
	s->len += n;
	return 0;
}

/* One gzip member of body (malloc'd). */
static uint8_t *
member(const uint8_t *body, size_t len, size_t *gz_len)
{
	uint8_t *gz;

	ck_assert_int_eq(tu_gzip(body, len, 6, &gz, gz_len), 0);
	return gz;
}

static struct gz_inflate *
inflater(const struct gz_inflate_limits *lim, struct sink *s)
{
	struct gz_inflate *z = NULL;

	ck_assert_int_eq(gz_inflate_new(lim, INF_CAP, sink_fn, s, &z), GZ_OK);
	return z;
}

/* Feed in[0..len) in pieces of piece bytes; the first result that is not
 * GZ_OK, or GZ_OK. */
static int
feed(struct gz_inflate *z, const uint8_t *in, size_t len, size_t piece)
{
	size_t off = 0;

	while (off < len) {
		size_t n = len - off < piece ? len - off : piece;
		int rc = gz_inflate_feed(z, in + off, n);

		if (rc != GZ_OK)
			return rc;
		off += n;
	}
	return GZ_OK;
}

static void
expect_counts(const struct gz_inflate *z, uint64_t in, uint64_t out, uint32_t members,
	      uint32_t done)
{
	struct gz_inflate_counts c;

	gz_inflate_get_counts(z, &c);
	ck_assert_uint_eq(c.in_nbytes, in);
	ck_assert_uint_eq(c.out_nbytes, out);
	ck_assert_uint_eq(c.members, members);
	ck_assert_uint_eq(c.members_done, done);
}

/* Pieces the body is fed in: a byte, odd sizes, the output space, all. */
static const size_t pieces[] = { 1, 7, 999, 1000, 4096, SIZE_MAX };
#define N_PIECES (sizeof pieces / sizeof pieces[0])

/* One member and two members back to back, fed in every piece size: the
 * bytes, in pieces of at most the output space, and exact counters. */
START_TEST(test_inflate_members)
{
	size_t piece = pieces[_i % N_PIECES], a_len = 100000, b_len = 3333, ga, gb;
	bool two = _i >= (int)N_PIECES;
	uint8_t *a = tu_payload(a_len, TU_JSON, 1), *b = tu_payload(b_len, TU_TEXT, 2);
	uint8_t *g1 = member(a, a_len, &ga), *g2 = member(b, b_len, &gb);
	uint8_t *in = malloc(ga + gb);
	struct sink s = { .keep = true };
	struct gz_inflate *z = inflater(NULL, &s);
	size_t in_len = ga + (two ? gb : 0);

	memcpy(in, g1, ga);
	memcpy(in + ga, g2, gb);
	ck_assert_int_eq(feed(z, in, in_len, piece), GZ_OK);
	ck_assert_int_eq(gz_inflate_finish(z), GZ_OK);
	ck_assert_uint_eq(s.len, a_len + (two ? b_len : 0));
	ck_assert_mem_eq(s.buf, a, a_len);
	if (two)
		ck_assert_mem_eq(s.buf + a_len, b, b_len);
	ck_assert_uint_le(s.max_piece, INF_CAP);
	expect_counts(z, in_len, s.len, two ? 2 : 1, two ? 2 : 1);
	ck_assert_int_eq(gz_inflate_stopped(z), GZ_INF_RUNNING);
	gz_inflate_free(z);
	free(s.buf);
	free(in);
	free(g1);
	free(g2);
	free(a);
	free(b);
}
END_TEST

/* Nothing, and a member of nothing, are whole bodies of 0 bytes. */
START_TEST(test_inflate_empty)
{
	struct sink s = { .keep = true };
	struct gz_inflate *z = inflater(NULL, &s);
	size_t gl;
	uint8_t *g = member((const uint8_t *)"", 0, &gl);

	ck_assert_int_eq(gz_inflate_feed(z, NULL, 0), GZ_OK);
	ck_assert_int_eq(gz_inflate_finish(z), GZ_OK);
	expect_counts(z, 0, 0, 0, 0);
	gz_inflate_free(z);
	z = inflater(NULL, &s);
	ck_assert_int_eq(gz_inflate_feed(z, g, gl), GZ_OK);
	ck_assert_int_eq(gz_inflate_finish(z), GZ_OK);
	expect_counts(z, gl, 0, 1, 1);
	ck_assert_uint_eq(s.calls, 0);
	gz_inflate_free(z);
	gz_inflate_free(NULL);
	free(g);
}
END_TEST

/* Malformed bodies, each fed whole: the error, why, and that it is final. */
enum bad_kind {
	BAD_CRC,      /* a CRC-32 byte flipped */
	BAD_ISIZE,    /* an ISIZE byte flipped */
	BAD_TRAILING, /* a member, then bytes that are not a member */
	BAD_ZEROS,    /* a member, then zero padding */
	BAD_ZLIB,     /* a zlib stream (RFC 1950), not gzip */
	BAD_TEXT,     /* plain text */
	BAD_DEFLATE,  /* a byte of the deflate data flipped */
	N_BAD
};

START_TEST(test_inflate_malformed)
{
	size_t len = 20000, gl;
	uint8_t *body = tu_payload(len, TU_TEXT, 3), *g = member(body, len, &gl);
	uint8_t *in = malloc(gl + 64);
	size_t in_len = gl;
	struct sink s = { .keep = true };
	struct gz_inflate *z = inflater(NULL, &s);
	struct gz_inflate_counts c;
	/* A whole member before the fault: it all went out. */
	bool all_out = _i == BAD_TRAILING || _i == BAD_ZEROS;

	memcpy(in, g, gl);
	switch (_i) {
	case BAD_CRC:
		in[gl - 8] ^= 0x01;
		break;
	case BAD_ISIZE:
		in[gl - 4] ^= 0x01;
		break;
	case BAD_TRAILING:
		memcpy(in + gl, "garbage!", 8);
		in_len += 8;
		break;
	case BAD_ZEROS:
		memset(in + gl, 0, 16);
		in_len += 16;
		break;
	case BAD_ZLIB: {
		uLongf zl = (uLongf)(gl + 64);

		ck_assert_int_eq(compress(in, &zl, body, 10), Z_OK);
		in_len = zl;
		break;
	}
	case BAD_TEXT:
		memcpy(in, "hello, world", 12);
		in_len = 12;
		break;
	case BAD_DEFLATE:
		in[gl / 2] ^= 0xff;
		break;
	}
	ck_assert_int_eq(gz_inflate_feed(z, in, in_len), GZ_EDATA);
	ck_assert_int_eq(gz_inflate_stopped(z), GZ_INF_BAD_DATA);
	gz_inflate_get_counts(z, &c);
	ck_assert_uint_eq(c.members_done, all_out ? 1 : 0);
	if (all_out)
		ck_assert_uint_eq(c.out_nbytes, len);
	/* What went out is the body's start (CRC-32 and ISIZE are checked
	 * after the data: most of it went out). */
	ck_assert_uint_eq(c.out_nbytes, s.len);
	if (_i == BAD_CRC || _i == BAD_ISIZE)
		ck_assert_uint_gt(s.len, len - INF_CAP - 1);
	if (_i != BAD_DEFLATE && s.len > 0)
		ck_assert_mem_eq(s.buf, body, s.len < len ? s.len : len);
	/* Final: no more input is taken, finish says the same. */
	ck_assert_int_eq(gz_inflate_feed(z, g, gl), GZ_EDATA);
	ck_assert_int_eq(gz_inflate_finish(z), GZ_EDATA);
	gz_inflate_get_counts(z, &c);
	ck_assert_uint_le(c.in_nbytes, in_len);
	gz_inflate_free(z);
	free(s.buf);
	free(in);
	free(g);
	free(body);
}
END_TEST

/* A body cut anywhere inside a member: feeds succeed, finish says
 * truncated; cut at the end of the first of two members it is whole. */
START_TEST(test_inflate_truncated)
{
	size_t len = 5000, gl;
	uint8_t *body = tu_payload(len, TU_JSON, 4), *g = member(body, len, &gl);
	static const size_t cuts[] = { 1, 2, 9, 10, 100 };
	size_t i;

	for (i = 0; i <= (sizeof cuts / sizeof cuts[0]); i++) {
		/* cuts[], then "all but the last byte" */
		size_t cut = i < (sizeof cuts / sizeof cuts[0]) ? cuts[i] : gl - 1;
		struct sink s = { .keep = false };
		struct gz_inflate *z = inflater(NULL, &s);

		ck_assert_int_eq(gz_inflate_feed(z, g, cut), GZ_OK);
		ck_assert_int_eq(gz_inflate_finish(z), GZ_EDATA);
		ck_assert_int_eq(gz_inflate_stopped(z), GZ_INF_TRUNCATED);
		expect_counts(z, cut, s.len, 1, 0);
		gz_inflate_free(z);
	}
	free(g);
	free(body);
}
END_TEST

/* max_out: a body of exactly the limit passes; one byte less of limit
 * stops with exactly max_out bytes delivered, however it is fed. */
START_TEST(test_inflate_max_out)
{
	size_t len = 100000, gl, piece = pieces[_i];
	uint8_t *body = tu_payload(len, TU_JSON, 5), *g = member(body, len, &gl);
	struct gz_inflate_limits lim = { .max_out = len };
	struct sink s = { .keep = true };
	struct gz_inflate *z = inflater(&lim, &s);
	struct gz_inflate_counts c;

	ck_assert_int_eq(feed(z, g, gl, piece), GZ_OK);
	ck_assert_int_eq(gz_inflate_finish(z), GZ_OK);
	expect_counts(z, gl, len, 1, 1);
	gz_inflate_free(z);

	lim.max_out = len - 1;
	s.len = 0;
	z = inflater(&lim, &s);
	ck_assert_int_eq(feed(z, g, gl, piece), GZ_ELIMIT);
	ck_assert_int_eq(gz_inflate_stopped(z), GZ_INF_MAX_OUT);
	gz_inflate_get_counts(z, &c);
	ck_assert_uint_eq(c.out_nbytes, len - 1);
	ck_assert_uint_eq(s.len, len - 1);
	ck_assert_mem_eq(s.buf, body, len - 1);
	ck_assert_uint_eq(c.members_done, 0);
	ck_assert_int_eq(gz_inflate_finish(z), GZ_ELIMIT);
	gz_inflate_free(z);

	/* A small limit, inside the first piece. */
	lim.max_out = 10;
	s.len = 0;
	z = inflater(&lim, &s);
	ck_assert_int_eq(feed(z, g, gl, piece), GZ_ELIMIT);
	gz_inflate_get_counts(z, &c);
	ck_assert_uint_eq(c.out_nbytes, 10);
	gz_inflate_free(z);
	free(s.buf);
	free(g);
	free(body);
}
END_TEST

/* The ratio: 8 MiB of zeros (about 1030:1) with a limit of 200 and a
 * 64 KiB burst stops on the first piece past the burst, having delivered
 * the whole pieces up to it; under a limit above deflate's most (1032) it
 * passes whole. */
START_TEST(test_inflate_ratio)
{
	const uint64_t n = 8u << 20, burst = 64u << 10;
	size_t gl;
	uint8_t *g = NULL;
	struct gz_inflate_limits lim = { .ratio = 200, .ratio_burst = burst };
	struct sink s = { .keep = false };
	struct gz_inflate *z = inflater(&lim, &s);
	struct gz_inflate_counts c;

	ck_assert_int_eq(tu_gzip_zeros(n, &g, &gl), 0);
	ck_assert_uint_lt(gl, n / 1000);
	ck_assert_int_eq(gz_inflate_feed(z, g, gl), GZ_ELIMIT);
	ck_assert_int_eq(gz_inflate_stopped(z), GZ_INF_RATIO);
	gz_inflate_get_counts(z, &c);
	/* Pieces are INF_CAP bytes: the first total past the burst. */
	ck_assert_uint_eq(c.out_nbytes, burst / INF_CAP * INF_CAP);
	ck_assert_uint_eq(s.len, c.out_nbytes);
	ck_assert_uint_gt(c.out_nbytes + INF_CAP, 200 * c.in_nbytes);
	gz_inflate_free(z);

	lim.ratio = 1033;
	s.len = 0;
	z = inflater(&lim, &s);
	ck_assert_int_eq(gz_inflate_feed(z, g, gl), GZ_OK);
	ck_assert_int_eq(gz_inflate_finish(z), GZ_OK);
	expect_counts(z, gl, n, 1, 1);
	gz_inflate_free(z);
	free(g);

	/* The bomb maker itself, checked by tu_gunzip (zlib, CRC-32 and
	 * ISIZE): a length that is no multiple of its 1 MiB step. */
	{
		const size_t odd = (3u << 20) + 12345;
		uint8_t *dec;
		size_t dec_len, i;

		ck_assert_int_eq(tu_gzip_zeros(odd, &g, &gl), 0);
		ck_assert_int_eq(tu_gunzip(g, gl, &dec, &dec_len), 0);
		ck_assert_uint_eq(dec_len, odd);
		for (i = 0; i < odd && dec[i] == 0; i++)
			;
		ck_assert_uint_eq(i, odd);
		free(dec);
		free(g);
	}
}
END_TEST

/* max_members: three members under a cap of 2 stop at the third's first
 * byte, the first two delivered whole; under a cap of 3 all pass. */
START_TEST(test_inflate_member_cap)
{
	size_t len = 3000, gl;
	uint8_t *body = tu_payload(len, TU_TEXT, 6), *g = member(body, len, &gl);
	uint8_t *in = malloc(3 * gl);
	struct gz_inflate_limits lim = { .max_members = 2 };
	struct sink s = { .keep = false };
	struct gz_inflate *z;

	for (int k = 0; k < 3; k++)
		memcpy(in + (size_t)k * gl, g, gl);
	z = inflater(&lim, &s);
	ck_assert_int_eq(gz_inflate_feed(z, in, 3 * gl), GZ_ELIMIT);
	ck_assert_int_eq(gz_inflate_stopped(z), GZ_INF_MEMBERS);
	expect_counts(z, 2 * gl, 2 * len, 2, 2);
	gz_inflate_free(z);
	lim.max_members = 3;
	s.len = 0;
	z = inflater(&lim, &s);
	ck_assert_int_eq(feed(z, in, 3 * gl, 5), GZ_OK);
	ck_assert_int_eq(gz_inflate_finish(z), GZ_OK);
	expect_counts(z, 3 * gl, 3 * len, 3, 3);
	gz_inflate_free(z);
	free(in);
	free(g);
	free(body);
}
END_TEST

/* The sink refuses on its third call: stopped, its value kept, nothing
 * more delivered. */
START_TEST(test_inflate_sink_refuses)
{
	size_t len = 50000, gl;
	uint8_t *body = tu_payload(len, TU_JSON, 7), *g = member(body, len, &gl);
	struct sink s = { .keep = false, .refuse_at = 3 };
	struct gz_inflate *z = inflater(NULL, &s);
	struct gz_inflate_counts c;

	ck_assert_int_eq(gz_inflate_feed(z, g, gl), GZ_ESINK);
	ck_assert_int_eq(gz_inflate_stopped(z), GZ_INF_SINK);
	ck_assert_int_eq(gz_inflate_sink_rc(z), 7);
	gz_inflate_get_counts(z, &c);
	ck_assert_uint_eq(c.out_nbytes, 2 * INF_CAP);
	ck_assert_int_eq(gz_inflate_feed(z, g, gl), GZ_ESINK);
	ck_assert_uint_eq(s.calls, 3);
	gz_inflate_free(z);
	ck_assert_int_eq(gz_inflate_new(NULL, 0, NULL, NULL, &z), GZ_EINVAL);
	ck_assert_int_eq(gz_inflate_new(NULL, 0, sink_fn, &s, NULL), GZ_EINVAL);
	free(g);
	free(body);
}
END_TEST

/* Every allocation of gz_inflate_new failing in turn: GZ_ENOMEM and
 * nothing left allocated, until it succeeds; then it works. */
START_TEST(test_inflate_alloc_failures)
{
	size_t len = 4000, gl;
	uint8_t *body = tu_payload(len, TU_JSON, 8), *g = member(body, len, &gl);
	uint64_t k;

	for (k = 1; k < 50; k++) {
		struct sink s = { .keep = false };
		struct gz_inflate *z = NULL;
		int rc;

		tu_alloc_install(k);
		rc = gz_inflate_new(NULL, 0, sink_fn, &s, &z);
		if (rc == GZ_OK) {
			ck_assert(!tu_alloc_failed());
			ck_assert_int_eq(gz_inflate_feed(z, g, gl), GZ_OK);
			ck_assert_int_eq(gz_inflate_finish(z), GZ_OK);
			ck_assert_uint_eq(s.len, len);
			gz_inflate_free(z);
			ck_assert_int_eq(tu_alloc_live(), 0);
			tu_alloc_uninstall();
			break;
		}
		ck_assert_int_eq(rc, GZ_ENOMEM);
		ck_assert_ptr_null(z);
		ck_assert_int_eq(tu_alloc_live(), 0);
		tu_alloc_uninstall();
	}
	ck_assert_uint_gt(k, 1);
	ck_assert_uint_lt(k, 50);
	free(g);
	free(body);
}
END_TEST

Suite *
inflate_suite(void)
{
	const struct ck_case tc[] = { { "inflate",
					60,
					{ { test_inflate_members, 0, (int)(2 * N_PIECES) },
					  { test_inflate_empty, 0, 0 },
					  { test_inflate_malformed, 0, N_BAD },
					  { test_inflate_truncated, 0, 0 },
					  { test_inflate_max_out, 0, (int)N_PIECES },
					  { test_inflate_ratio, 0, 0 },
					  { test_inflate_member_cap, 0, 0 },
					  { test_inflate_sink_refuses, 0, 0 },
					  { test_inflate_alloc_failures, 0, 0 } } } };

	return ck_suite("inflate", tc, 1);
}
