/* check_hnd_stream_file.c: file responses through the handler: streamed, whole, sniffed, shrinking, descriptors closed (suite streaming_body, case file). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suites.h"
#include "stream_harness.h"
#include "testutil.h"

/* A file test: data[0..len) of the given kind in a temporary file, the
 * fixture serving size bytes of it from offset with ctype (and etag, if
 * not NULL). */
struct ftest {
	struct st_test t;
	struct bfix f;
	int fd;
};

static void
ftest_begin(struct ftest *x, size_t len, enum tu_kind kind, uint32_t seed, uint64_t size,
	    uint64_t offset, const char *ctype, const char *etag)
{
	uint8_t *data = tu_payload(len, kind, seed);

	x->fd = th_temp_file(data, len);
	bfix_file(&x->f, x->fd, size, offset, ctype);
	if (etag)
		bfix_header(&x->f, MHD_HTTP_HEADER_ETAG, etag);
	st_begin(&x->t, th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0), data, len, body_route, &x->f);
}

static void
ftest_end(struct ftest *x)
{
	st_end(&x->t);
	close(x->fd);
}

/* Each file response closes its descriptor when freed: count the open
 * descriptors before and after. */
static int
count_fds(void)
{
	int fd, n = 0;

	for (fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

/* A text file: compressed (byte-exact after decoding), identity exact with
 * Content-Length (libmicrohttpd's own file path); _i = 1 uses the offset
 * variant with a body that starts inside the file and ends before its end. */
START_TEST(file_text)
{
	size_t flen = 1536 * KIB + 3, off = _i ? 777 : 0, blen = _i ? flen - 777 - 100 : flen;
	struct ftest x;
	int fds_before;
	CURL *h = th_curl_new();

	ftest_begin(&x, flen, TU_TEXT, 31, blen, off, "text/plain", "\"file\"");
	fds_before = count_fds();
	th_fetch(h, x.t.s.port, "/", TH_GZIP, &x.t.r);
	expect_gzip(&x.t.r, x.t.data + off, blen, "W/\"file\"");
	th_fetch(h, x.t.s.port, "/", 0, &x.t.r);
	expect_identity(&x.t.r, x.t.data + off, blen, true, true, NULL);
	ck_assert_str_eq(th_header(&x.t.r, "ETag", NULL), "\"file\"");
	th_fetch(h, x.t.s.port, "/", TH_GZIP, &x.t.r);
	expect_gzip(&x.t.r, x.t.data + off, blen, "W/\"file\"");
	ck_assert_uint_eq(atomic_load(&x.f.create_failures), 0);
	ck_assert(th_wait(th_pool_back_pred, x.t.gz, RELEASE_WAIT_MS));
	curl_easy_cleanup(h);
	th_stop(&x.t.s);
	/* Every duplicate the responses took is closed (the client's
	 * connection is gone too). */
	ck_assert_int_le(count_fds(), fds_before);
	ftest_end(&x);
}
END_TEST

/* A png-typed file is never compressed: byte-exact identity with
 * Content-Length, even for a gzip client. */
START_TEST(file_png_identity)
{
	size_t len = 700 * KIB + 1, off = _i ? 1 : 0;
	struct ftest x;
	struct mhdgz_stats st;

	ftest_begin(&x, len, _i ? TU_TEXT : TU_RANDOM, 41, len - off, off, "image/png", NULL);
	st_get(&x.t, TH_GZIP);
	expect_identity(&x.t.r, x.t.data + off, len - off, true, false, NULL);
	st = th_stats(x.t.gz);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_TYPE], 1);
	ck_assert_uint_eq(st.pool_gets, 0);
	ftest_end(&x);
}
END_TEST

/* A file that shrinks after its response was made: the gzip stream cannot
 * be completed, so it must end with an error (libcurl sees an incomplete
 * chunked body), never a complete gzip member of a shorter body. */
START_TEST(file_truncated_gzip_errors)
{
	size_t len = 2 * MIB, cut = _i ? 0 : 256 * KIB + 3;
	struct ftest x;
	uint8_t *dec = NULL, *body = NULL;
	size_t dec_len = 0, body_len = 0, nchunks = 0;
	bool early;

	ftest_begin(&x, len, TU_TEXT, 51, len, 0, "text/plain", NULL);
	ck_assert_int_eq(ftruncate(x.fd, (off_t)cut), 0);
	st_get(&x.t, TH_GZIP | TH_RAW);
	ck_assert_msg(x.t.r.rc != CURLE_OK, "truncated file: transfer completed (%zu bytes)",
		      x.t.r.body_len);
	if (th_dechunk(x.t.r.body, x.t.r.body_len, &body, &body_len, &nchunks, &early) == 0) {
		/* A properly terminated chunked body would claim completeness. */
		ck_abort_msg("truncated file: chunked body properly terminated");
	}
	/* Whatever chunks arrived must not decode to a complete member. */
	ck_assert(tu_gunzip(x.t.r.body, x.t.r.body_len, &dec, &dec_len) != 0);
	ck_assert(th_wait(th_pool_back_pred, x.t.gz, RELEASE_WAIT_MS));
	th_stop(&x.t.s);
	ck_assert_uint_ge(th_stats(x.t.gz).failures, 1);
	ftest_end(&x);
}
END_TEST

/* An untyped file is sniffed (its first bytes are there to read): text is
 * compressed, binary is not. Larger than the whole-file limit (1 MiB), so
 * the stream path is what is tested. */
START_TEST(file_untyped_sniffed)
{
	size_t len = 1536 * KIB + 5;
	struct ftest x;

	ftest_begin(&x, len, _i ? TU_RANDOM : TU_TEXT, 61, len, 0, NULL, NULL);
	st_get(&x.t, TH_GZIP);
	if (_i)
		expect_identity(&x.t.r, x.t.data, len, true, false, NULL);
	else
		expect_gzip(&x.t.r, x.t.data, len, NULL);
	ftest_end(&x);
}
END_TEST

/* A file up to 1 MiB is compressed whole when first queued: a gzip 200
 * with the compressed Content-Length (not chunked), the same on HEAD. */
START_TEST(file_small_whole)
{
	size_t len = 300 * KIB + 7, dec_len = 0;
	struct ftest x;
	struct th_reply *r = &x.t.r;
	struct mhdgz_stats st;
	uint8_t *dec = NULL;
	char want_len[32];
	const char *v;

	ftest_begin(&x, len, TU_JSON, 62, len, 0, "application/json", NULL);
	st_get(&x.t, TH_GZIP);
	ck_assert_int_eq(r->status, 200);
	ck_assert_str_eq(th_header(r, "Content-Encoding", NULL), "gzip");
	ck_assert_ptr_null(th_header(r, "Transfer-Encoding", NULL));
	snprintf(want_len, sizeof want_len, "%zu", r->body_len);
	v = th_header(r, "Content-Length", NULL);
	ck_assert_msg(v && strcmp(v, want_len) == 0, "Content-Length %s, want %s", v, want_len);
	ck_assert_int_eq(tu_gunzip(r->body, r->body_len, &dec, &dec_len), 0);
	expect_same_bytes(dec, dec_len, x.t.data, len, "decoded whole-file gzip body");
	free(dec);
	st_get(&x.t, TH_GZIP | TH_HEAD);
	ck_assert_uint_eq(r->body_len, 0);
	v = th_header(r, "Content-Length", NULL);
	ck_assert_msg(v && strcmp(v, want_len) == 0, "HEAD Content-Length %s, want %s", v,
		      want_len);
	/* A fresh response per request: each is compressed once, whole. */
	st = th_stats(x.t.gz);
	ck_assert_uint_eq(st.compressions, 2);
	ck_assert_uint_eq(st.compressed, 2);
	ftest_end(&x);
}
END_TEST

struct ck_case
stream_file_case(void)
{
	return (struct ck_case){ "file",
				 CK_CASE_TIMEOUT,
				 { { file_text, 0, 2 },
				   { file_png_identity, 0, 2 },
				   { file_truncated_gzip_errors, 0, 2 },
				   { file_untyped_sniffed, 0, 2 },
				   { file_small_whole, 0, 0 } } };
}
