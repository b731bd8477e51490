/* check_hnd_stream_edge.c: streaming edge cases through the handler: short readers, empty bodies, ETag policies, trailers, HTTP/1.0 (suite streaming_body, case edge). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <poll.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/socket.h>
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

/* The early-ending reader on the wire, through libmicrohttpd alone and
 * through mhdgz, for one response of ER_SIZE announced bytes of which
 * ER_REAL come: "/plain..." queues MHD_create_response_from_callback with
 * MHD_queue_response, "/gz..." the twins; a URL ending in 'c' adds the
 * application's own "Transfer-Encoding: chunked". */
enum { ER_SIZE = 16384, ER_REAL = 5000 };

struct er_fix {
	uint8_t *data;
	_Atomic unsigned int frees;
};

static ssize_t
er_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct er_fix *x = cls;

	if (pos >= ER_REAL)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (max > ER_REAL - pos)
		max = (size_t)(ER_REAL - pos);
	if (max > 1000)
		max = 1000;
	memcpy(buf, x->data + pos, max);
	return (ssize_t)max;
}

static void
er_free(void *cls)
{
	struct er_fix *x = cls;

	atomic_fetch_add(&x->frees, 1);
}

static enum MHD_Result
er_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct er_fix *x = s->cls;
	bool plain = strncmp(url, "/plain", 6) == 0;
	struct MHD_Response *r = plain ? MHD_create_response_from_callback(ER_SIZE, 4096, er_read,
									   x, er_free)
				       : mhdgz_response_from_callback(s->gz, ER_SIZE, 4096, er_read,
								      x, er_free);
	enum MHD_Result ok;

	ck_assert_ptr_nonnull(r);
	ck_assert(MHD_add_response_header(r, "Content-Type", "text/plain") == MHD_YES);
	if (url[strlen(url) - 1] == 'c')
		ck_assert(MHD_add_response_header(r, "Transfer-Encoding", "chunked") == MHD_YES);
	ok = plain ? MHD_queue_response(c, 200, r)
		   : mhdgz_queue_response_ex(s->gz, c, TU_REQ(method), 200, r, NULL);
	MHD_destroy_response(r);
	return ok;
}

/* Every byte fd gives until the peer closes it or nothing comes for
 * idle_ms, with the Date and Vary lines left out (a Date differs by the
 * second; mhdgz adds Vary to a response it could compress). *closed_ret:
 * the peer closed. */
static size_t
er_read_all(int fd, uint8_t *out, size_t cap, unsigned int idle_ms, bool *closed_ret)
{
	size_t len = 0, kept = 0, line = 0;

	*closed_ret = false;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, (int)idle_ms) != 1)
			break;
		n = recv(fd, out + len, cap - len, 0);
		if (n <= 0) {
			*closed_ret = n == 0;
			break;
		}
		len += (size_t)n;
		ck_assert_uint_lt(len, cap);
	}
	/* Drop the Date and Vary lines, in place. */
	for (size_t i = 0; i < len; i++) {
		if (out[i] != '\n')
			continue;
		if (!(i + 1 - line >= 5 && (strncasecmp((char *)out + line, "Date:", 5) == 0 ||
					    strncasecmp((char *)out + line, "Vary:", 5) == 0))) {
			memmove(out + kept, out + line, i + 1 - line);
			kept += i + 1 - line;
		}
		line = i + 1;
	}
	memmove(out + kept, out + line, len - line);
	return kept + len - line;
}

/* A reader of a response of known size that ends early. libmicrohttpd
 * ends an application-chunked response there with its last chunk (a
 * complete message; the pipelined second request is answered) and cuts
 * any other short and closes. For a client without Accept-Encoding, mhdgz
 * sends exactly the bytes plain libmicrohttpd sends (but Date and Vary),
 * and closes where it closes; a gzip client of the chunked response gets
 * a complete gzip member of the ER_REAL bytes, twice on one connection;
 * of the other, a stream that ends without its last chunk, then the
 * close; a HEAD of the chunked one carries no Transfer-Encoding. _i:
 * chunked or not. */
START_TEST(sized_reader_ends_early_wire)
{
	bool chunked = _i;
	struct er_fix x = { .data = tu_payload(ER_REAL, TU_TEXT, 73) };
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s;
	size_t cap = 4 * ER_SIZE, plen, mlen;
	uint8_t *pb = malloc(cap), *mb = malloc(cap);
	char req[512];
	bool pclosed, mclosed;
	int fd;

	ck_assert_ptr_nonnull(pb);
	ck_assert_ptr_nonnull(mb);
	th_start(&s, gz, 0, er_route, &x);
	for (int m = 0; m < 2; m++) {
		const char *path = m ? (chunked ? "/gzc" : "/gz")
				     : (chunked ? "/plainc" : "/plain");

		fd = th_raw_connect(s.port);
		snprintf(req, sizeof req,
			 "GET %s HTTP/1.1\r\nHost: t\r\n\r\nGET %s HTTP/1.1\r\n"
			 "Host: t\r\n\r\n",
			 path, path);
		th_raw_send(fd, req, strlen(req));
		if (m)
			mlen = er_read_all(fd, mb, cap, 1000, &mclosed);
		else
			plen = er_read_all(fd, pb, cap, 1000, &pclosed);
		close(fd);
	}
	ck_assert_msg(plen == mlen && memcmp(pb, mb, plen) == 0,
		      "identity through mhdgz (%zu bytes) differs from libmicrohttpd's (%zu): "
		      "'%.*s' against '%.*s'",
		      mlen, plen, (int)(mlen < 300 ? mlen : 300), (const char *)mb,
		      (int)(plen < 300 ? plen : 300), (const char *)pb);
	ck_assert_int_eq(mclosed, pclosed);
	ck_assert_int_eq(pclosed, !chunked);
	/* The gzip client. */
	fd = th_raw_connect(s.port);
	snprintf(req, sizeof req,
		 "GET %s HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n"
		 "GET %s HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n",
		 chunked ? "/gzc" : "/gz", chunked ? "/gzc" : "/gz");
	th_raw_send(fd, req, strlen(req));
	for (int i = 0; i < (chunked ? 2 : 1); i++) {
		struct th_raw_response r;
		int rc = th_raw_read_response(fd, false, 10000, &r);

		if (chunked) {
			uint8_t *dechunked = NULL, *dec = NULL;
			size_t dlen = 0, nchunks = 0, declen = 0;
			bool empty_early = false;

			ck_assert_msg(rc == 0, "gzip, chunked: incomplete: '%.*s'",
				      (int)(r.len < 400 ? r.len : 400), (const char *)r.bytes);
			th_raw_expect_field(&r, "Content-Encoding", "gzip", "gzip, chunked");
			th_raw_expect_field(&r, "Content-Length", NULL, "gzip, chunked");
			ck_assert(r.chunked);
			ck_assert_int_eq(th_dechunk(r.bytes + r.body_off, r.len - r.body_off,
						    &dechunked, &dlen, &nchunks, &empty_early),
					 0);
			ck_assert_int_eq(tu_gunzip(dechunked, dlen, &dec, &declen), 0);
			ck_assert_uint_eq(declen, ER_REAL);
			ck_assert(memcmp(dec, x.data, ER_REAL) == 0);
			free(dec);
			free(dechunked);
		} else {
			/* No last chunk: the client knows the body is cut. */
			ck_assert_int_eq(rc, -1);
			ck_assert(r.chunked);
			th_raw_expect_field(&r, "Content-Encoding", "gzip", "gzip");
		}
		th_raw_response_free(&r);
	}
	if (chunked)
		th_raw_expect_idle(fd, 200, "after the two gzip responses");
	close(fd);
	if (chunked) {
		/* The HEAD of the gzip stream has no framing field of the
		 * application's (its Transfer-Encoding describes the identity
		 * response's framing) and no byte after its header block; with
		 * libmicrohttpd 1.0 the pipelined GET follows on the connection,
		 * 0.9.75 closes. */
		struct th_raw_response h;

		fd = th_raw_connect(s.port);
		snprintf(req, sizeof req,
			 "HEAD /gzc HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n"
			 "GET /gzc HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n");
		th_raw_send(fd, req, strlen(req));
		ck_assert_int_eq(th_raw_read_response(fd, true, 10000, &h), 0);
		ck_assert_int_eq(h.status, 200);
		ck_assert_uint_eq(h.len, h.head_len);
		th_raw_expect_field(&h, "Transfer-Encoding", NULL, "HEAD");
		th_raw_expect_field(&h, "Content-Length", NULL, "HEAD");
		th_raw_expect_field(&h, "Content-Encoding", "gzip", "HEAD");
		th_raw_response_free(&h);
		if (TH_BODYLESS_UNKNOWN_CLOSES) {
			th_raw_expect_closed(fd, 10000, "HEAD");
		} else {
			ck_assert_int_eq(th_raw_read_response(fd, false, 10000, &h), 0);
			ck_assert_int_eq(h.status, 200);
			ck_assert(h.chunked);
			th_raw_expect_field(&h, "Transfer-Encoding", "chunked", "GET after HEAD");
			th_raw_response_free(&h);
			th_raw_expect_idle(fd, 200, "after HEAD and GET");
		}
		close(fd);
	}
	th_stop(&s);
	/* Each response's free callback ran once: 2 + 2 identity (or 1 + 1
	 * when the first closed), then the gzip ones. */
	ck_assert_uint_eq(atomic_load(&x.frees),
			  chunked ? (TH_BODYLESS_UNKNOWN_CLOSES ? 7u : 8u) : 3u);
	mhdgz_free(gz);
	free(pb);
	free(mb);
	free(x.data);
}
END_TEST

struct ck_case
stream_edge_case(void)
{
	return (struct ck_case){ "edge",
				 CK_CASE_TIMEOUT,
				 { { known_size_reader_ends_early, 0, 0 },
				   { sized_reader_ends_early_wire, 0, 2 },
				   { empty_bodies, 0, 3 },
				   { etag_policies, 0, 4 },
				   { trailer_fields_kept, 0, 0 },
				   { http10_client, 0, 2 } } };
}
