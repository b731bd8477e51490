/* check_hnd_stream_decision.c: the handler's compression decision and header rules on streaming responses (suite streaming_body, case decision). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "check_suites.h"
#include "stream_harness.h"
#include "testutil.h"

/* Clients that do not accept gzip get the identity body, exact, with
 * Content-Length for a known size; Vary and the strong ETag stay. */
static const char *const not_accepting[] = {
	NULL, "identity", "gzip;q=0", "br, deflate", "*;q=0, identity", "x-gzip;q=0, gzip;q=0",
};

START_TEST(identity_when_not_accepted)
{
	bool known = _i % 2;
	size_t len = 300 * KIB + 9;
	uint8_t *data = tu_payload(len, TU_TEXT, 9);
	struct st_test t;
	struct bfix f;
	struct mhdgz_stats st;

	bfix_callback(&f, data, len, known, 4096, 4096, "text/plain");
	bfix_header(&f, MHD_HTTP_HEADER_ETAG, "\"tag\"");
	st_begin(&t, th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0), data, len, body_route, &f);
	t.r.accept_encoding = not_accepting[_i / 2];
	st_get(&t, 0);
	expect_identity(&t.r, data, len, known, true, NULL);
	ck_assert_str_eq(th_header(&t.r, "ETag", NULL), "\"tag\"");
	expect_released(&t.s, &f);
	st = th_stats(t.gz);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_NOT_ACCEPTED], 1);
	ck_assert_uint_eq(st.compressed, 0);
	ck_assert_uint_eq(st.pool_gets, 0);
	st_end(&t);
}
END_TEST

/* min_size applies to known sizes only: below it identity (with Vary),
 * at it gzip; an unknown size is compressed however short it turns out. */
START_TEST(min_size_known_and_unknown)
{
	/* A known size below min_nbytes goes identity. An unknown size is
	 * decided from the header fields alone (the queue call never runs the
	 * application's reader): a compressible type is compressed, however
	 * short the body turns out to be. */
	static const struct {
		size_t len;
		bool known;
		bool gzip;
	} c[] = {
		{ 1000, true, false }, { 1023, true, false }, { 1024, true, true },
		{ 100, false, true },  { 1, false, true },    { 1023, false, true },
		{ 1024, false, true }, { 5000, false, true },
	};
	size_t i;

	for (i = 0; i < N_ELEMS(c); i++) {
		uint8_t *data = tu_payload(c[i].len, TU_TEXT, (uint32_t)i);
		struct st_test t;
		struct bfix f;
		struct mhdgz_stats st;

		bfix_callback(&f, data, c[i].len, c[i].known, 512, 512, "text/plain");
		/* min_nbytes 1024: the default */
		st_begin(&t, th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0), data, c[i].len, body_route,
			 &f);
		st_get(&t, TH_GZIP);
		if (c[i].gzip)
			expect_gzip(&t.r, data, c[i].len, NULL);
		else /* known, so a Content-Length; identity for all: no Vary */
			expect_identity(&t.r, data, c[i].len, true, false, NULL);
		expect_released(&t.s, &f);
		st = th_stats(t.gz);
		ck_assert_msg(st.reasons[c[i].gzip ? MHDGZ_COMPRESSED : MHDGZ_SKIP_SMALL] == 1,
			      "case %zu: reason not counted", i);
		st_end(&t);
	}
}
END_TEST

/*
 * One unknown-size stream, decided without the size and without its bytes
 * (the queue call never runs the application's reader): by type (the skip
 * list: identity, counted as a type skip); untyped, whatever its bytes
 * (text, binary, none), identity as a type skip with no compressor taken,
 * since there is no type to go by and nothing is read to sniff. The client
 * gets every byte, chunked as from the application's own response.
 */
enum body_kind { BK_TEXT, BK_BINARY, BK_EMPTY };

static const struct {
	const char *ctype; /* NULL: untyped */
	enum body_kind body;
	enum mhdgz_reason reason;
	bool gzip;
} decide_cases[] = {
	/* text: a sniff would say yes, the type says no */
	{ "image/png", BK_TEXT, MHDGZ_SKIP_TYPE, false },
	{ "application/zip", BK_TEXT, MHDGZ_SKIP_TYPE, false },
	{ "video/mp4", BK_TEXT, MHDGZ_SKIP_TYPE, false },
	{ NULL, BK_TEXT, MHDGZ_SKIP_TYPE, false },
	{ NULL, BK_BINARY, MHDGZ_SKIP_TYPE, false },
	{ NULL, BK_EMPTY, MHDGZ_SKIP_TYPE, false },
};

static void
decide_unknown_size(size_t ci)
{
	size_t len = decide_cases[ci].body == BK_EMPTY ? 0 : 64 * KIB, i;
	uint8_t *data = malloc(len + 1);
	struct st_test t;
	struct bfix f;
	struct mhdgz_stats st;

	ck_assert_ptr_nonnull(data);
	if (decide_cases[ci].body == BK_TEXT)
		tu_fill(data, len, TU_TEXT, decide_cases[ci].ctype ? 3 : 5);
	for (i = 0; decide_cases[ci].body == BK_BINARY && i < len; i++)
		data[i] = (uint8_t)(i % 7 == 0 ? 0 : (i * 13) & 0x1f); /* NULs, control bytes */
	bfix_callback(&f, data, len, false, 4096, 4096, decide_cases[ci].ctype);
	st_begin(&t, th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0), data, len, body_route, &f);
	st_get(&t, TH_GZIP);
	if (decide_cases[ci].gzip)
		expect_gzip(&t.r, data, len, NULL);
	else /* the application's own response: chunked, no Vary */
		expect_identity(&t.r, data, len, false, false, NULL);
	expect_released(&t.s, &f);
	st = th_stats(t.gz);
	ck_assert_uint_eq(st.reasons[decide_cases[ci].reason], 1);
	if (!decide_cases[ci].gzip)
		ck_assert_uint_eq(st.pool_gets, 0);
	st_end(&t);
}

/* Types on the skip list are identity, counted as a type skip. */
START_TEST(untyped_or_skipped_type_identity)
{
	decide_unknown_size((size_t)_i);
}
END_TEST

START_TEST(untyped_stream_identity)
{
	decide_unknown_size(3 + (size_t)_i);
}
END_TEST

/* The header-only early-outs apply to streams as to buffers. */
START_TEST(header_rules)
{
	size_t len = 100 * KIB + 1;
	uint8_t *data = tu_payload(len, TU_TEXT, 11);
	struct st_test t;
	struct bfix f;
	unsigned int n;
	const char *v;

	bfix_callback(&f, data, len, true, 4096, 4096, "text/css");
	switch (_i) {
	case 0: /* Cache-Control: no-transform (RFC 9111 section 5.2.2.6) */
		bfix_header(&f, MHD_HTTP_HEADER_CACHE_CONTROL, "public, no-transform");
		break;
	case 1: /* already coded */
		bfix_header(&f, MHD_HTTP_HEADER_CONTENT_ENCODING, "br");
		break;
	case 2: /* Vary merged into one field, Accept-Ranges dropped from gzip */
		bfix_header(&f, MHD_HTTP_HEADER_VARY, "Cookie");
		bfix_header(&f, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
		bfix_header(&f, MHD_HTTP_HEADER_ETAG, "W/\"weak\"");
		break;
	case 3: /* a range response */
		bfix_header(&f, MHD_HTTP_HEADER_CONTENT_RANGE, "bytes 0-102400/200000");
		f.status = MHD_HTTP_PARTIAL_CONTENT;
		break;
	case 4: /* 304: no content, but the Vary and gzip ETag of its 200 */
		bfix_header(&f, MHD_HTTP_HEADER_ETAG, "\"x\"");
		f.status = MHD_HTTP_NOT_MODIFIED;
		break;
	case 5: /* 204: no content */
		f.status = MHD_HTTP_NO_CONTENT;
		break;
	case 6: /* the application asks for chunked coding itself */
		bfix_header(&f, MHD_HTTP_HEADER_TRANSFER_ENCODING, "chunked");
		break;
	}
	st_begin(&t, th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0), data, len, body_route, &f);
	st_get(&t, TH_GZIP);
	ck_assert_msg(t.r.rc == CURLE_OK, "%s", curl_easy_strerror(t.r.rc));
	switch (_i) {
	case 0:
		expect_identity(&t.r, data, len, true, false, NULL);
		break;
	case 1:
		expect_identity(&t.r, data, len, true, false, "br");
		break;
	case 2:
		expect_gzip(&t.r, data, len, "W/\"weak\"");
		v = th_header(&t.r, "Vary", &n);
		ck_assert_msg(n == 1 && th_has_token(v, "Cookie") &&
				      th_has_token(v, "Accept-Encoding"),
			      "Vary: %s (x%u)", v, n);
		st_get(&t, 0);
		expect_identity(&t.r, data, len, true, true, NULL);
		ck_assert_str_eq(th_header(&t.r, "Accept-Ranges", NULL), "bytes");
		break;
	case 3:
		ck_assert_int_eq(t.r.status, 206);
		ck_assert(th_header(&t.r, "Content-Encoding", NULL) == NULL);
		expect_same_bytes(t.r.body, t.r.body_len, data, len, "206 body");
		break;
	case 4:
		ck_assert_int_eq(t.r.status, 304);
		ck_assert_uint_eq(t.r.body_len, 0);
		ck_assert(th_header(&t.r, "Content-Encoding", NULL) == NULL);
		v = th_header(&t.r, "ETag", NULL);
		ck_assert_msg(v && strcmp(v, "W/\"x\"") == 0, "304 ETag %s", v ? v : "(none)");
		ck_assert(th_has_token(th_header(&t.r, "Vary", NULL), "Accept-Encoding"));
		break;
	case 5:
		ck_assert_int_eq(t.r.status, 204);
		ck_assert_uint_eq(t.r.body_len, 0);
		ck_assert(th_header(&t.r, "Content-Encoding", NULL) == NULL);
		break;
	case 6:
		expect_gzip(&t.r, data, len, NULL);
		st_get(&t, 0);
		ck_assert_msg(t.r.rc == CURLE_OK, "%s", curl_easy_strerror(t.r.rc));
		v = th_header(&t.r, "Transfer-Encoding", &n);
		ck_assert_msg(n == 1 && strcasecmp(v, "chunked") == 0,
			      "identity: Transfer-Encoding %s (x%u)", v ? v : "(none)", n);
		expect_same_bytes(t.r.body, t.r.body_len, data, len, "identity body");
		break;
	}
	expect_released(&t.s, &f);
	st_end(&t);
}
END_TEST

/* The counters of a stream: one decision, compressed, the body's bytes in
 * and the coded bytes out once the stream has ended, one pool get. */
START_TEST(stream_stats)
{
	size_t len = 500 * KIB + 5;
	uint8_t *data = tu_payload(len, TU_TEXT, 21);
	struct st_test t;
	struct bfix f;
	struct mhdgz_stats st;

	bfix_callback(&f, data, len, false, 8192, 8192, "text/plain");
	st_begin(&t, th_gz_new(MHDGZ_BACKEND_ZLIB, 6, 0), data, len, body_route, &f);
	st_get(&t, TH_GZIP);
	expect_gzip(&t.r, data, len, NULL);
	expect_released(&t.s, &f);
	st = th_stats(t.gz);
	ck_assert_uint_eq(st.responses, 1);
	ck_assert_uint_eq(st.compressed, 1);
	ck_assert_uint_eq(st.reasons[MHDGZ_COMPRESSED], 1);
	ck_assert_uint_eq(st.failures, 0);
	ck_assert_uint_eq(st.pool_gets, 1);
	ck_assert_uint_eq(st.bytes_in, len);
	ck_assert_uint_eq(st.bytes_out, t.r.body_len);
	/* all of them gzip's */
	ck_assert_uint_eq(st.coded_bytes_in[MHDGZ_CODING_GZIP], len);
	ck_assert_uint_eq(st.coded_bytes_out[MHDGZ_CODING_GZIP], t.r.body_len);
	ck_assert_uint_eq(st.coded_bytes_in[MHDGZ_CODING_ZSTD] + st.coded_bytes_in[MHDGZ_CODING_BR],
			  0);
	st_end(&t);
}
END_TEST

struct ck_case
stream_decision_case(void)
{
	return (struct ck_case){ "decision",
				 CK_CASE_TIMEOUT,
				 { { identity_when_not_accepted, 0,
				     (int)(2 * N_ELEMS(not_accepting)) },
				   { min_size_known_and_unknown, 0, 0 },
				   { untyped_or_skipped_type_identity, 0, 3 },
				   { untyped_stream_identity, 0, 3 },
				   { header_rules, 0, 7 },
				   { stream_stats, 0, 0 } } };
}
