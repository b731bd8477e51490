/* check_hnd_stream_reader.c: content readers that return 0 or fail mid-stream, and allocation failures before the headers, through the handler (suite streaming_live, cases reader and alloc). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "info.h"
#include "stream_harness.h"
#include "testutil.h"

/* ===================================================================== */
/*                      Readers that return 0                            */
/* ===================================================================== */

/* A reader that says "no data yet" three times at the start and at every
 * 64 KiB: the body is exact, the chunked stream carries no empty chunk
 * before the last one, and the reader is called once per 0 and once per
 * piece of data (plus the final end-of-stream), nothing more. */
START_TEST(reader_zero_counted)
{
	bool known = _i & 1;
	enum mhdgz_backend be = _i & 2 ? MHDGZ_BACKEND_ISAL : MHDGZ_BACKEND_ZLIB;
	size_t len = 1 * MIB + 99;
	uint8_t *data;
	struct st_test t;
	struct lfix f;
	uint64_t stops = (len - 1) / (64 * KIB) + 1, calls, bound;

	if (!tu_backend_available(be))
		return;
	data = tu_payload(len, TU_TEXT, 101);
	lfix_init(&f, data, len, len, known, 4096, "text/plain");
	f.stop_every = 64 * KIB;
	f.stop_at_start = true;
	f.stop_zeros = 3;
	st_begin(&t, th_gz_new(be, 0, 0), data, len, live_route, &f);
	st_get(&t, TH_GZIP | TH_RAW);
	expect_dechunked(&t.r);
	expect_gzip_body(&t.r, data, len);
	expect_all_released(&t.s, &f);
	ck_assert_uint_eq(atomic_load(&f.bad_pos), 0);
	calls = atomic_load(&f.zero_calls);
	ck_assert_msg(calls == 3 * stops, "%llu calls returned 0, want %llu",
		      (unsigned long long)calls, (unsigned long long)(3 * stops));
	calls = atomic_load(&f.calls);
	bound = atomic_load(&f.data_calls) + 3 * stops + 1;
	ck_assert_msg(calls <= bound, "%llu reader calls, at most %llu expected",
		      (unsigned long long)calls, (unsigned long long)bound);
	th_stop(&t.s);
	expect_freed_once(&f);
	st_end(&t);
}
END_TEST

/*
 * A reader that has no data for 20 ms at each of 8 stops. libmicrohttpd's
 * internal thread polls a reader that returns 0 again at once (its
 * documented busy wait), so the plain (identity) response sets the
 * baseline; the gzip stream must not call the reader more often than that
 * (a library that itself retried in a loop, or sent empty chunks, would).
 */
START_TEST(reader_zero_timed)
{
	size_t len = 8 * 64 * KIB + 1;
	uint8_t *data = tu_payload(len, TU_TEXT, 103);
	struct st_test t;
	struct lfix f;
	uint64_t z_identity, z_gzip, t0, ms_identity, ms_gzip;

	lfix_init(&f, data, len, len, false, 4096, "text/plain");
	f.stop_every = 64 * KIB;
	f.stop_ms = 20;
	st_begin(&t, th_gz_new(MHDGZ_BACKEND_ZLIB, 6, 0), data, len, live_route, &f);
	t0 = th_now_ms();
	st_get(&t, 0);
	ms_identity = th_now_ms() - t0;
	ck_assert_msg(t.r.rc == CURLE_OK, "%s", curl_easy_strerror(t.r.rc));
	z_identity = atomic_load(&f.zero_calls);
	t0 = th_now_ms();
	st_get(&t, TH_GZIP | TH_RAW);
	ms_gzip = th_now_ms() - t0;
	z_gzip = atomic_load(&f.zero_calls) - z_identity;
	expect_dechunked(&t.r);
	expect_gzip_body(&t.r, data, len);
	fprintf(stderr,
		"reader_zero_timed: 0-returns identity %llu in %llu ms, gzip %llu in %llu ms\n",
		(unsigned long long)z_identity, (unsigned long long)ms_identity,
		(unsigned long long)z_gzip, (unsigned long long)ms_gzip);
	/* Generous: both are libmicrohttpd's polling rate over the same
	 * waits; only a multiple means the library spins by itself. */
	ck_assert_msg(z_gzip <= 4 * z_identity + 1000,
		      "gzip stream: %llu calls returning 0, identity %llu",
		      (unsigned long long)z_gzip, (unsigned long long)z_identity);
	expect_all_released(&t.s, &f);
	st_end(&t);
}
END_TEST

/* ===================================================================== */
/*                       Reader errors mid-stream                        */
/* ===================================================================== */

/* MHD_CONTENT_READER_END_WITH_ERROR: the client sees a failed transfer,
 * never a complete gzip member; counted as a failure; the compressor goes
 * back and the free callback runs once. _i: bit 0 known size, bit 1 error
 * mid-stream (else at position 0). */
START_TEST(reader_error)
{
	bool known = _i & 1, mid = _i & 2;
	size_t len = 1 * MIB, dec_len = 0;
	uint8_t *data = tu_payload(len, TU_TEXT, 107), *dec = NULL;
	struct st_test t;
	struct lfix f;

	lfix_init(&f, data, len, len, known, 8192, "application/json");
	f.err_at = mid ? 200 * KIB + 5 : 0;
	st_begin(&t, th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0), data, len, live_route, &f);
	st_get(&t, TH_GZIP);
	ck_assert_msg(t.r.rc != CURLE_OK, "reader error: the gzip transfer completed (%zu bytes)",
		      t.r.body_len);
	ck_assert_msg(tu_gunzip(t.r.body, t.r.body_len, &dec, &dec_len) != 0,
		      "reader error: the client got a complete gzip member of %zu bytes", dec_len);
	expect_all_released(&t.s, &f);
	ck_assert_uint_ge(th_stats(t.gz).failures, 1);
	/* The same reader without gzip fails the same way (baseline). */
	st_get(&t, 0);
	ck_assert(t.r.rc != CURLE_OK);
	expect_all_released(&t.s, &f);
	th_stop(&t.s);
	expect_freed_once(&f);
	st_end(&t);
}
END_TEST

/* ===================================================================== */
/*                 Allocation failures before the headers                */
/* ===================================================================== */

/* Responses made by alloc_route; creation may fail under injection. */
struct afix {
	struct lfix lf;
	_Atomic unsigned int made;    /* responses created */
	_Atomic unsigned int refused; /* creations that failed (connection closed) */
};

static enum MHD_Result
alloc_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct afix *a = s->cls;
	struct lfix *f = &a->lf;
	struct MHD_Response *r = lfix_response(s, f, atomic_load(&f->nresp));
	enum MHD_Result ret;

	(void)url;
	(void)method;
	if (!r) {
		atomic_fetch_add(&a->refused, 1);
		return MHD_NO;
	}
	atomic_fetch_add(&f->nresp, 1);
	atomic_fetch_add(&a->made, 1);
	ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain") ==
		  MHD_YES);
	ret = mhdgz_queue_response(s->gz, c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static bool
alloc_settled(void *cls)
{
	struct afix *a = cls;

	return atomic_load(&a->lf.frees) >= atomic_load(&a->lf.nresp);
}

/*
 * Fail the k-th allocation of the library during one request, for every k
 * until a request needs no more: before the headers are committed any
 * failure must give the identity response with the whole body (style rule
 * 9), or, when the response object itself could not be made, no response
 * (the application's route then refuses). Never a broken gzip body, never
 * a leak: the live-block count returns to its level between requests.
 * With MHDGZ_F_NO_POOL every stream creates its compressor, so the
 * compressor's own allocations (zlib's, ISA-L's) fail in turn too.
 */
START_TEST(alloc_failures_fall_back)
{
	enum mhdgz_backend be = _i ? MHDGZ_BACKEND_ISAL : MHDGZ_BACKEND_ZLIB;
	size_t len = 300 * KIB + 1, k;
	uint8_t *data;
	struct st_test t;
	struct th_reply *r = &t.r;
	struct afix *a;
	int64_t live0;
	unsigned int fired = 0, gzipped = 0, identity = 0, refused = 0;

	if (!tu_backend_available(be))
		return;
	data = tu_payload(len, TU_TEXT, 501);
	a = calloc(1, sizeof *a);
	ck_assert(a != NULL);
	lfix_init(&a->lf, data, len, len, _i == 0, 8192, "text/plain");
	tu_alloc_install(0);
	st_begin(&t, st_gz_new(be, 0, MHDGZ_F_NO_POOL), data, len, alloc_route, a);
	live0 = tu_alloc_live();
	for (k = 1; k < MAX_RESP; k++) {
		unsigned int refused0 = atomic_load(&a->refused);
		const char *ce;

		tu_alloc_fail_at(k);
		st_get(&t, TH_GZIP);
		ck_assert_msg(th_wait(alloc_settled, a, RELEASE_WAIT_MS),
			      "fail at %zu: the response was not released", k);
		ck_assert_msg(th_wait(th_pool_back_pred, t.gz, RELEASE_WAIT_MS),
			      "fail at %zu: compressor not returned", k);
		ce = th_header(r, "Content-Encoding", NULL);
		if (atomic_load(&a->refused) > refused0) {
			refused++;
			ck_assert(r->rc != CURLE_OK);
		} else if (ce) {
			gzipped++;
			expect_gzip_body(r, data, len);
		} else {
			identity++;
			ck_assert_msg(r->rc == CURLE_OK, "fail at %zu: identity transfer: %s", k,
				      curl_easy_strerror(r->rc));
			ck_assert_msg(r->body_len == len && memcmp(r->body, data, len) == 0,
				      "fail at %zu: identity body wrong (%zu bytes)", k,
				      r->body_len);
		}
		ck_assert_msg(tu_alloc_live() == live0,
			      "fail at %zu: %lld blocks live after the request, %lld before", k,
			      (long long)tu_alloc_live(), (long long)live0);
		if (!tu_alloc_failed())
			break; /* the request needed fewer than k allocations */
		fired++;
	}
	tu_alloc_fail_at(0);
	fprintf(stderr,
		"alloc_failures_fall_back(%s): %u injected failures: %u refused, %u identity, %u "
		"gzip\n",
		tu_backend_name(be), fired, refused, identity, gzipped);
	ck_assert_msg(k < MAX_RESP, "more than %d allocations per request", MAX_RESP - 1);
	ck_assert_uint_ge(fired, 3);
	ck_assert_uint_ge(identity, 1);
	ck_assert_uint_eq(atomic_load(&a->lf.after_free), 0);
	th_stop(&t.s);
	expect_freed_once(&a->lf);
	st_end(&t); /* frees the handler: nothing of the library is left */
	ck_assert_int_eq(tu_alloc_live(), 0);
	tu_alloc_uninstall();
	free(a);
}
END_TEST

struct ck_case
stream_reader_case(void)
{
	return (struct ck_case){ "reader",
				 CK_CASE_TIMEOUT,
				 { { reader_zero_counted, 0, 4 },
				   { reader_zero_timed, 0, 0 },
				   { reader_error, 0, 4 } } };
}

struct ck_case
stream_alloc_case(void)
{
	return (struct ck_case){ "alloc", CK_CASE_TIMEOUT, { { alloc_failures_fall_back, 0, 2 } } };
}
