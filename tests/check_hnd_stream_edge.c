/* check_hnd_stream_edge.c: streaming edge cases through the handler: short readers, empty bodies, ETag policies, trailers, HTTP/1.0 (suite streaming_body, case edge). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suites.h"
#include "stream_harness.h"
#include "testutil.h"

/* A reader that ends (MHD_CONTENT_READER_END_OF_STREAM) before the size it
 * announced. libmicrohttpd treats that as MHD_CONTENT_READER_END_WITH_ERROR
 * (microhttpd.h, MHD_ContentReaderCallback): the identity client sees a
 * failed transfer. The gzip client must too, not a complete gzip member of
 * a silently shortened body (the same rule the library applies to a file
 * shorter than promised). */
static ssize_t
short_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct th_src *s = cls;
	uint64_t real_len = s->len / 4;

	atomic_fetch_add(&s->calls, 1);
	if (pos >= real_len)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (max > s->chunk)
		max = s->chunk;
	if (max > real_len - pos)
		max = (size_t)(real_len - pos);
	memcpy(buf, s->data + pos, max);
	return (ssize_t)max;
}

START_TEST(known_size_reader_ends_early)
{
	size_t len = 1 * MIB, dec_len = 0;
	uint8_t *data = tu_payload(len, TU_TEXT, 71), *dec = NULL;
	struct st_test t;
	struct bfix f;

	bfix_callback(&f, data, len, true, 8192, 8192, "text/plain");
	f.reader = short_read;
	st_begin(&t, th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0), data, len, body_route, &f);
	/* Baseline: libmicrohttpd's own identity response. */
	st_get(&t, 0);
	ck_assert_msg(t.r.rc != CURLE_OK, "identity: short body accepted (%zu bytes)",
		      t.r.body_len);
	st_get(&t, TH_GZIP);
	if (t.r.rc == CURLE_OK && tu_gunzip(t.r.body, t.r.body_len, &dec, &dec_len) == 0) {
		free(dec);
		ck_abort_msg("gzip: a reader that ended at %zu of %zu announced bytes gave a "
			     "complete gzip member of %zu bytes (transfer OK)",
			     len / 4, len, dec_len);
	}
	expect_released(&t.s, &f);
	st_end(&t);
}
END_TEST

/* Empty bodies: known size 0 is identity (nothing to compress); an
 * unknown size that turns out empty is either identity or one valid gzip
 * member of nothing; an empty file is identity. */
START_TEST(empty_bodies)
{
	static uint8_t none[1];
	struct st_test t;
	struct bfix f;
	int fd = -1;

	if (_i == 2) {
		fd = th_temp_file(none, 0);
		bfix_file(&f, fd, 0, 0, "text/plain");
	} else {
		bfix_callback(&f, none, 0, _i == 0, 4096, 4096, "text/plain");
	}
	st_begin(&t, th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0), NULL, 0, body_route, &f);
	st_get(&t, TH_GZIP);
	ck_assert_msg(t.r.rc == CURLE_OK, "%s", curl_easy_strerror(t.r.rc));
	ck_assert_int_eq(t.r.status, 200);
	if (_i == 1 && th_header(&t.r, "Content-Encoding", NULL)) {
		expect_gzip(&t.r, none, 0, NULL);
	} else {
		ck_assert(th_header(&t.r, "Content-Encoding", NULL) == NULL);
		ck_assert_uint_eq(t.r.body_len, 0);
	}
	if (_i != 2)
		expect_released(&t.s, &f);
	ck_assert(th_wait(th_pool_back_pred, t.gz, RELEASE_WAIT_MS));
	st_end(&t);
	if (fd >= 0)
		close(fd);
}
END_TEST

/*
 * Both representations of one stream, gzip first: the gzip one with
 * etag_gzip, the identity one exact with the strong ETag etag (or no ETag
 * field check when etag is NULL). known: the size is announced.
 */
static void
gzip_then_identity(struct st_test *t, bool known, const char *etag, const char *etag_gzip)
{
	st_get(t, TH_GZIP);
	expect_gzip(&t->r, t->data, t->len, etag_gzip);
	st_get(t, 0);
	expect_identity(&t->r, t->data, t->len, known, true, NULL);
	if (etag)
		ck_assert_str_eq(th_header(&t->r, "ETag", NULL), etag);
}

/* The ETag policies apply to streams: SUFFIX "x-gzip", DROP none, KEEP
 * unchanged; the identity response keeps "x". */
START_TEST(etag_policies)
{
	static const struct {
		enum mhdgz_etag_policy p;
		const char *want;
	} c[] = {
		{ MHDGZ_ETAG_WEAKEN, "W/\"x\"" },
		{ MHDGZ_ETAG_SUFFIX, "\"x-gzip\"" },
		{ MHDGZ_ETAG_DROP, NULL },
		{ MHDGZ_ETAG_KEEP, "\"x\"" },
	};
	size_t len = 100 * KIB;
	uint8_t *data = tu_payload(len, TU_TEXT, 81);
	struct mhdgz_options o = th_opts();
	struct st_test t;
	struct bfix f;

	o.etag_policy = c[_i].p;
	bfix_callback(&f, data, len, _i % 2, 4096, 4096, "text/plain");
	bfix_header(&f, MHD_HTTP_HEADER_ETAG, "\"x\"");
	st_begin(&t, st_gz_from(&o), data, len, body_route, &f);
	gzip_then_identity(&t, _i % 2, "\"x\"", c[_i].want);
	expect_released(&t.s, &f);
	st_end(&t);
}
END_TEST

/* Trailer fields (MHD_add_response_footer) of a chunked response reach the
 * client on the gzip stream as on the identity one. */
START_TEST(trailer_fields_kept)
{
	size_t len = 200 * KIB + 3;
	uint8_t *data = tu_payload(len, TU_TEXT, 83);
	struct st_test t;
	struct bfix f;
	const char *v;

	bfix_callback(&f, data, len, false, 4096, 4096, "text/plain");
	f.footer_name = "X-Stream-Check";
	f.footer_value = "done";
	st_begin(&t, th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0), data, len, body_route, &f);
	st_get(&t, 0);
	expect_identity(&t.r, data, len, false, true, NULL);
	v = th_header(&t.r, "X-Stream-Check", NULL);
	ck_assert_msg(v && strcmp(v, "done") == 0, "identity trailer: %s", v ? v : "(none)");
	st_get(&t, TH_GZIP);
	expect_gzip(&t.r, data, len, NULL);
	v = th_header(&t.r, "X-Stream-Check", NULL);
	ck_assert_msg(v && strcmp(v, "done") == 0, "gzip trailer: %s", v ? v : "(none)");
	expect_released(&t.s, &f);
	st_end(&t);
}
END_TEST

/* An HTTP/1.0 client cannot receive chunked coding: the gzip stream is
 * delimited by closing the connection (RFC 9112 section 6.3), complete and
 * exact. */
START_TEST(http10_client)
{
	size_t len = 400 * KIB + 1;
	uint8_t *data = tu_payload(len, TU_JSON, 85);
	struct st_test t;
	struct bfix f;

	bfix_callback(&f, data, len, _i, 4096, 4096, "application/json");
	st_begin(&t, th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0), data, len, body_route, &f);
	st_get(&t, TH_GZIP | TH_HTTP10);
	expect_gzip_body(&t.r, data, len);
	ck_assert_str_eq(th_header(&t.r, "Content-Encoding", NULL), "gzip");
	ck_assert(th_header(&t.r, "Transfer-Encoding", NULL) == NULL);
	ck_assert(th_header(&t.r, "Content-Length", NULL) == NULL);
	st_get(&t, TH_HTTP10);
	expect_same_bytes(t.r.body, t.r.body_len, data, len, "HTTP/1.0 identity body");
	expect_released(&t.s, &f);
	st_end(&t);
}
END_TEST

struct ck_case
stream_edge_case(void)
{
	return (struct ck_case){ "edge",
				 CK_CASE_TIMEOUT,
				 { { known_size_reader_ends_early, 0, 0 },
				   { empty_bodies, 0, 3 },
				   { etag_policies, 0, 4 },
				   { trailer_fields_kept, 0, 0 },
				   { http10_client, 0, 2 } } };
}
