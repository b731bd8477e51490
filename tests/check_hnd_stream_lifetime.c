/* check_hnd_stream_lifetime.c: when streaming responses and their compressors are released: clients that go away, a daemon stopped mid-stream, HEAD, 1 GiB in bounded memory (suite streaming_live, cases lifetime and memory). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "check_suites.h"
#include "info.h"
#include "stream_harness.h"
#include "testutil.h"

/* ===================================================================== */
/*                     Clients that go away mid-stream                   */
/* ===================================================================== */

static const struct {
	enum mhdgz_backend be;
	int level;
} dc_backends[] = {
	{ MHDGZ_BACKEND_ZLIB, 6 },
	{ MHDGZ_BACKEND_DEFAULT, 0 }, /* libdeflate: streams go to zlib */
	{ MHDGZ_BACKEND_ISAL, 1 },
};

static bool
live_back_to(void *cls)
{
	return tu_alloc_live() == *(int64_t *)cls;
}

/*
 * The client closes after N bytes of a long gzip stream (1 byte, 64 KiB,
 * 1 MiB). _i / 2 selects the backend; _i % 2:
 *  0: pooled: each time the compressor returns to the pool, which the
 *     pool counters show (one get per stream, every compressor created
 *     idle again);
 *  1: MHDGZ_F_NO_POOL with the counting allocator: each compressor is
 *     freed, so the library's live blocks return to their level (a proof
 *     independent of the counters).
 * Either way the free callback runs exactly once per response, never
 * before the reader's last call, and nothing more after the daemon stops
 * and the handler is freed. Counter mismatches are collected and reported
 * at the end, so the teardown (and the sanitizers' leak check) still runs.
 */
START_TEST(client_disconnects)
{
	static const size_t abort_after[] = { 1, 64 * KIB, 1 * MIB };
	size_t be_i = (size_t)_i / 2, dlen = 256 * KIB, i;
	bool no_pool = _i % 2;
	uint8_t *data;
	struct mhdgz *gz;
	struct st_test t;
	struct th_reply *r = &t.r;
	struct lfix f;
	struct mhdgz_stats st;
	int64_t live0 = 0;
	char why[256] = "";

	if (!tu_backend_available(dc_backends[be_i].be))
		return;
	if (no_pool)
		tu_alloc_install(0);
	gz = st_gz_new(dc_backends[be_i].be, dc_backends[be_i].level,
		       no_pool ? MHDGZ_F_NO_POOL : 0);
	data = tu_payload(dlen, TU_TEXT, 301);
	/* 256 MiB at most: the stream outlasts any client here, and ends by
	 * itself if a disconnect were never noticed. */
	lfix_init(&f, data, dlen, 256ull * MIB, false, 16 * KIB, "text/plain");
	st_begin(&t, gz, data, dlen, live_route, &f);
	live0 = tu_alloc_live();
	for (i = 0; i < N_ELEMS(abort_after); i++) {
		r->abort_after = abort_after[i];
		st_get(&t, TH_GZIP);
		ck_assert_msg(r->rc == CURLE_WRITE_ERROR, "abort after %zu: %s", abort_after[i],
			      curl_easy_strerror(r->rc));
		ck_assert_str_eq(th_header(r, "Content-Encoding", NULL), "gzip");
		ck_assert_msg(th_wait(all_freed, &f, RELEASE_WAIT_MS),
			      "abort after %zu: the free callback ran %u times for %u responses",
			      abort_after[i], atomic_load(&f.frees), atomic_load(&f.nresp));
		if (no_pool) {
			ck_assert_msg(th_wait(live_back_to, &live0, RELEASE_WAIT_MS),
				      "abort after %zu: %lld library blocks live, %lld before",
				      abort_after[i], (long long)tu_alloc_live(), (long long)live0);
			continue;
		}
		ck_assert_msg(th_wait(th_pool_back_pred, gz, RELEASE_WAIT_MS),
			      "abort after %zu: compressor not back in the pool", abort_after[i]);
		st = th_stats(gz);
		if (!why[0] && (st.pool_gets != i + 1 || st.pool_idle < 1))
			snprintf(why, sizeof why,
				 "abort after %zu: pool_gets %llu after %zu streams (misses %llu, "
				 "idle %llu)",
				 abort_after[i], (unsigned long long)st.pool_gets, i + 1,
				 (unsigned long long)st.pool_misses,
				 (unsigned long long)st.pool_idle);
	}
	ck_assert_uint_eq(atomic_load(&f.after_free), 0);
	th_stop(&t.s);
	expect_freed_once(&f);
	ck_assert_uint_eq(atomic_load(&f.frees), N_ELEMS(abort_after));
	st_end(&t); /* frees the handler */
	ck_assert_uint_eq(atomic_load(&f.frees), N_ELEMS(abort_after));
	if (no_pool) {
		ck_assert_int_eq(tu_alloc_live(), 0);
		tu_alloc_uninstall();
	}
	ck_assert_msg(!why[0], "compressor pool counters: %s", why);
}
END_TEST

/* The daemon is stopped while a client is still reading a stream: the
 * stream is abandoned, the compressor goes back before mhdgz_free, the
 * free callback runs once. */
struct stop_mid {
	uint16_t port;
	struct th_reply r;
};

static void *
stop_mid_client(void *arg)
{
	struct stop_mid *m = arg;

	th_fetch(NULL, m->port, "/", TH_GZIP, &m->r);
	return NULL;
}

START_TEST(daemon_stops_mid_stream)
{
	size_t dlen = 128 * KIB;
	uint8_t *data = tu_payload(dlen, TU_TEXT, 303);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_ZLIB, 6, 0);
	struct th_server s = { 0 };
	struct lfix f;
	struct stop_mid m;
	pthread_t t;

	lfix_init(&f, data, dlen, 256ull * MIB, false, 16 * KIB, "text/plain");
	f.stop_every = 32 * KIB;
	f.stop_ms = 1000000; /* stalls at 32 KiB: the stream cannot finish */
	th_start(&s, gz, 0, live_route, &f);
	th_reply_init(&m.r);
	m.port = s.port;
	ck_assert_int_eq(pthread_create(&t, NULL, stop_mid_client, &m), 0);
	usleep(300 * 1000);
	ck_assert_uint_eq(atomic_load(&f.nresp), 1);
	th_stop(&s);
	pthread_join(t, NULL);
	ck_assert(m.r.rc != CURLE_OK);
	expect_freed_once(&f);
	ck_assert(th_pool_back_pred(gz));
	mhdgz_free(gz);
	th_reply_free(&m.r);
	free(data);
}
END_TEST

/* ===================================================================== */
/*                               HEAD                                    */
/* ===================================================================== */

/* HEAD of a gzip stream (queued with its method), of known or unknown
 * size (_i): the GET headers (Content-Encoding, no Content-Length, Vary,
 * weak ETag), no body, no reader call (a HEAD never runs the application's
 * reader, so the gzip length is not known: no framing field; with
 * libmicrohttpd 0.9.75 the connection closes, as 0.9.75 can frame a HEAD
 * of unknown length no other way), and the compressor back in the pool. */
START_TEST(head_like_get)
{
	static const char *const same[] = { "Content-Encoding", "Content-Length", "Vary", "ETag",
					    "Content-Type" };
	bool known = _i;
	size_t len = 300 * KIB + 7, i;
	uint8_t *data = tu_payload(len, TU_TEXT, 401);
	struct st_test t;
	struct th_reply *get = &t.r, head;
	struct lfix f;
	uint64_t calls_before;

	lfix_init(&f, data, len, len, known, 8192, "text/html; charset=utf-8");
	f.etag = "\"h1\"";
	st_begin(&t, th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0), data, len, live_route, &f);
	th_reply_init(&head);
	st_get(&t, TH_GZIP);
	expect_gzip_body(get, data, len);
	expect_all_released(&t.s, &f);
	calls_before = atomic_load(&f.calls);
	th_fetch(NULL, t.s.port, "/", TH_GZIP | TH_HEAD, &head);
	ck_assert_msg(head.rc == CURLE_OK, "HEAD: %s", curl_easy_strerror(head.rc));
	ck_assert_int_eq(head.status, 200);
	ck_assert_uint_eq(head.body_len, 0);
	for (i = 0; i < N_ELEMS(same); i++) {
		const char *g = th_header(get, same[i], NULL), *h = th_header(&head, same[i], NULL);

		ck_assert_msg((g == NULL) == (h == NULL) && (!g || strcmp(g, h) == 0),
			      "%s: GET \"%s\", HEAD \"%s\"", same[i], g ? g : "(none)",
			      h ? h : "(none)");
	}
	ck_assert_str_eq(th_header(&head, "ETag", NULL), "W/\"h1\"");
	ck_assert_str_eq(th_header(&head, "Content-Encoding", NULL), "gzip");
	ck_assert_ptr_null(th_header(&head, "Content-Length", NULL));
	ck_assert_ptr_null(th_header(&head, "Transfer-Encoding", NULL));
	/* No length without running the reader: libmicrohttpd 0.9.75 closes
	 * after it, 1.0's head-only response keeps the connection. */
	if (TH_BODYLESS_UNKNOWN_CLOSES)
		ck_assert_str_eq(th_header(&head, "Connection", NULL), "close");
	else
		ck_assert_ptr_null(th_header(&head, "Connection", NULL));
	ck_assert(th_has_token(th_header(&head, "Vary", NULL), "Accept-Encoding"));
	expect_all_released(&t.s, &f);
	ck_assert_msg(atomic_load(&f.calls) == calls_before, "HEAD called the reader %llu times",
		      (unsigned long long)(atomic_load(&f.calls) - calls_before));
	/* Identity HEAD: Content-Length of the known size. */
	th_fetch(NULL, t.s.port, "/", TH_HEAD, &head);
	ck_assert_int_eq(head.rc, CURLE_OK);
	ck_assert(th_header(&head, "Content-Encoding", NULL) == NULL);
	if (known) {
		char num[32];

		snprintf(num, sizeof num, "%zu", len);
		ck_assert_str_eq(th_header(&head, "Content-Length", NULL), num);
	}
	expect_all_released(&t.s, &f);
	th_stop(&t.s);
	expect_freed_once(&f);
	th_reply_free(&head);
	st_end(&t);
}
END_TEST

/* ===================================================================== */
/*                      1 GiB in bounded memory                          */
/* ===================================================================== */

#define BIG_LEN (1024ull * MIB)
#define BIG_PAGE 4096u
#define RSS_LIMIT_KIB (16u * 1024u)

/* Repeating text with a counter: page p of the stream is a fixed text with
 * p written in its first 16 bytes. Cheap, compressible, not trivially. */
struct big {
	uint8_t page[BIG_PAGE];
	uint64_t produced;
	uLong crc;
	uint64_t rss0_kib, rss_max_kib;
	uint64_t calls;
	unsigned int bad_pos;
	_Atomic unsigned int frees;
	/* client */
	uLong crc_client;
	uint64_t got;
};

static ssize_t
big_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct big *b = cls;
	size_t n = 0;

	if (pos != b->produced)
		b->bad_pos++;
	if (pos >= BIG_LEN)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (max > BIG_LEN - pos)
		max = (size_t)(BIG_LEN - pos);
	while (n < max) {
		uint64_t p = (pos + n) / BIG_PAGE;
		size_t off = (size_t)((pos + n) % BIG_PAGE), k = BIG_PAGE - off;
		char tag[17];

		if (k > max - n)
			k = max - n;
		snprintf(tag, sizeof tag, "%016llx", (unsigned long long)p);
		memcpy(b->page, tag, 16);
		memcpy(buf + n, b->page + off, k);
		n += k;
	}
	b->crc = crc32(b->crc, (const Bytef *)buf, (uInt)n);
	b->produced += n;
	if (b->calls++ % 256 == 0) {
		uint64_t rss = th_rss_kib();

		if (rss > b->rss_max_kib)
			b->rss_max_kib = rss;
	}
	return (ssize_t)n;
}

static void
big_free(void *cls)
{
	struct big *b = cls;

	atomic_fetch_add(&b->frees, 1);
}

static void
big_on_data(struct th_reply *r, const uint8_t *p, size_t n)
{
	struct big *b = r->cls;

	b->crc_client = crc32(b->crc_client, p, (uInt)n);
	b->got += n;
}

static enum MHD_Result
big_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct big *b = s->cls;
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)url;
	(void)method;
	r = mhdgz_response_from_callback(s->gz, MHD_SIZE_UNKNOWN, 64 * KIB, big_read, b, big_free);
	ck_assert(r != NULL);
	ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain") ==
		  MHD_YES);
	ret = mhdgz_queue_response(s->gz, c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

START_TEST(one_gib_bounded_memory)
{
	struct mhdgz *gz;
	struct th_server s = { 0 };
	struct th_reply r;
	struct big *b;
	size_t i;
	uint64_t t0, ms;

	if (TH_SANITIZED) {
		fprintf(stderr, "one_gib_bounded_memory: skipped under a sanitizer\n");
		return;
	}
	gz = th_gz_new(MHDGZ_BACKEND_ZLIB, 1, 0);
	b = calloc(1, sizeof *b);
	ck_assert(b != NULL);
	for (i = 0; i < BIG_PAGE; i++)
		b->page[i] = (uint8_t) "the quick brown fox jumps over the lazy dog; "[i % 45];
	b->page[BIG_PAGE - 1] = '\n';
	b->crc = crc32(0L, Z_NULL, 0);
	b->crc_client = crc32(0L, Z_NULL, 0);
	th_start(&s, gz, 0, big_route, b);
	th_reply_init(&r);
	r.discard = true;
	r.on_data = big_on_data;
	r.cls = b;
	b->rss0_kib = th_rss_kib();
	ck_assert(b->rss0_kib > 0);
	t0 = th_now_ms();
	th_fetch(NULL, s.port, "/", TH_DECODE, &r);
	ms = th_now_ms() - t0;
	fprintf(stderr,
		"one_gib_bounded_memory: %llu ms, RSS %llu KiB before, at most %llu KiB during\n",
		(unsigned long long)ms, (unsigned long long)b->rss0_kib,
		(unsigned long long)b->rss_max_kib);
	ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
	ck_assert_str_eq(th_header(&r, "Content-Encoding", NULL), "gzip");
	ck_assert_uint_eq(b->bad_pos, 0);
	ck_assert_uint_eq(b->produced, BIG_LEN);
	ck_assert_uint_eq(b->got, BIG_LEN);
	ck_assert_msg(b->crc_client == b->crc, "CRC-32 %08lx received, %08lx produced",
		      b->crc_client, b->crc);
	ck_assert_msg(b->rss_max_kib < b->rss0_kib + RSS_LIMIT_KIB,
		      "RSS grew by %llu KiB while streaming 1 GiB",
		      (unsigned long long)(b->rss_max_kib - b->rss0_kib));
	th_stop(&s);
	ck_assert_uint_eq(atomic_load(&b->frees), 1);
	ck_assert(th_pool_back_pred(gz));
	th_reply_free(&r);
	free(b);
	mhdgz_free(gz);
}
END_TEST


/* ===================================================================== */
/*          A reader that adds a footer to its own response              */
/* ===================================================================== */

/* libmicrohttpd's own test_get_chunked pattern: the reader reaches its
 * response through a pointer the route set, and adds a trailer field with
 * the last block, after the route has destroyed its reference. */
struct self_footer {
	struct MHD_Response *r; /* set by the route; used by the reader */
	const uint8_t *data;
	size_t len;
	_Atomic unsigned int frees, after_free, footers;
};

#define SF_BLOCK 1024u

static ssize_t
sf_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct self_footer *sf = cls;
	size_t n = sf->len - (size_t)pos < SF_BLOCK ? sf->len - (size_t)pos : SF_BLOCK;

	if (atomic_load(&sf->frees))
		atomic_fetch_add(&sf->after_free, 1);
	if (sf->len == 0 || (pos < sf->len && pos + n == sf->len)) {
		/* with the last block (at once for an empty body) */
		if (MHD_add_response_footer(sf->r, "X-Footer", "late") != MHD_YES)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		atomic_fetch_add(&sf->footers, 1);
	}
	if (pos >= sf->len)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (n > max)
		n = max;
	memcpy(buf, sf->data + pos, n);
	return (ssize_t)n;
}

static void
sf_free(void *cls)
{
	struct self_footer *sf = cls;

	atomic_fetch_add(&sf->frees, 1);
}

static enum MHD_Result
sf_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	/* s->cls: two of them, one for "/b", one for every other URL */
	struct self_footer *sf = (struct self_footer *)s->cls + (strcmp(url, "/b") == 0);
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)method;
	r = mhdgz_response_from_callback(s->gz, MHD_SIZE_UNKNOWN, SF_BLOCK, sf_read, sf, sf_free);
	if (!r)
		return MHD_NO;
	sf->r = r;
	if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain") != MHD_YES ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_TRAILER, "X-Footer") != MHD_YES ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, "\"f1\"") != MHD_YES) {
		MHD_destroy_response(r);
		return MHD_NO;
	}
	ret = mhdgz_queue_response(s->gz, c, MHD_HTTP_OK, r);
	MHD_destroy_response(r); /* the reader keeps using it */
	return ret;
}

static bool
sf_freed(void *cls)
{
	return atomic_load(&((struct self_footer *)cls)->frees) > 0;
}

/*
 * The footer a reader adds to its own response, after the route destroyed
 * its reference, reaches the client in the trailer, whatever the coding
 * (_i % 4: identity, gzip, zstd, br), for a body and an empty one (_i / 4);
 * the body decodes byte for byte; the free callback runs once, after the
 * reader's last call. The coded stream is carried by the application's own
 * response, which libmicrohttpd keeps while it reads (hnd_stream_in_place):
 * a response of mhdgz's beside it left the reader writing into a freed one.
 */
START_TEST(in_place_footers)
{
	static const char *const coding[] = { NULL, "gzip", "zstd", "br" };
	const char *want = coding[_i % 4];
	size_t len = _i / 4 ? 0 : 40 * KIB + 7;
	struct mhdgz_options o = { .size = sizeof o, .codings = "gzip, zstd, br" };
	struct self_footer sf = { .len = len }, *pair;
	struct st_test t;
	uint8_t *data = tu_payload(len ? len : 1, TU_TEXT, 77), *dec = NULL;
	size_t dec_len = 0;
	unsigned int n;

	if (want && strcmp(want, "gzip") != 0 &&
	    !tu_coding_available(strcmp(want, "zstd") == 0 ? MHDGZ_CODING_ZSTD : MHDGZ_CODING_BR))
		return;
	sf.data = data;
	pair = calloc(2, sizeof *pair);
	ck_assert(pair != NULL);
	pair[0] = sf;
	st_begin(&t, st_gz_from(&o), data, len, sf_route, pair);
	t.r.accept_encoding = want ? want : "identity";
	st_get(&t, 0);
	ck_assert_msg(t.r.rc == CURLE_OK, "%s", curl_easy_strerror(t.r.rc));
	ck_assert_int_eq(t.r.status, 200);
	if (want) {
		ck_assert_str_eq(th_header(&t.r, "Content-Encoding", NULL), want);
		ck_assert_str_eq(th_header(&t.r, "ETag", NULL), "W/\"f1\"");
		ck_assert_msg(tu_decode(want, t.r.body, t.r.body_len, &dec, &dec_len) == 0,
			      "%s body does not decode", want);
		ck_assert_uint_eq(dec_len, len);
		ck_assert(len == 0 || memcmp(dec, data, len) == 0);
		free(dec);
	} else {
		ck_assert(th_header(&t.r, "Content-Encoding", NULL) == NULL);
		ck_assert_str_eq(th_header(&t.r, "ETag", NULL), "\"f1\"");
		ck_assert_uint_eq(t.r.body_len, len);
		ck_assert(len == 0 || memcmp(t.r.body, data, len) == 0);
	}
	ck_assert_str_eq(th_header(&t.r, "Trailer", &n), "X-Footer");
	ck_assert_uint_eq(n, 1);
	ck_assert_msg(th_header(&t.r, "X-Footer", &n) != NULL, "%s: no X-Footer trailer",
		      want ? want : "identity");
	ck_assert_str_eq(th_header(&t.r, "X-Footer", NULL), "late");
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(th_hdr_count(&t.r, "Content-Length"), 0);
	ck_assert(th_wait(sf_freed, pair, RELEASE_WAIT_MS));
	ck_assert(th_wait(th_pool_back_pred, t.gz, RELEASE_WAIT_MS));
	th_stop(&t.s);
	ck_assert_uint_eq(atomic_load(&pair[0].frees), 1);
	ck_assert_uint_eq(atomic_load(&pair[0].after_free), 0);
	ck_assert_uint_eq(atomic_load(&pair[0].footers), 1);
	ck_assert_uint_eq(atomic_load(&pair[1].frees), 0);
	free(pair);
	st_end(&t);
}
END_TEST

/* The same response pattern, two GETs pipelined in one write on a raw
 * socket (gzip): each response is chunked, ends with its last chunk and
 * the X-Footer trailer, and not a byte more; the connection stays open;
 * each response is freed once, never before its reader's last call. */
START_TEST(in_place_footers_pipelined)
{
	static const char req[] = "GET /a HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n"
				  "GET /b HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n";
	size_t len = 10 * KIB + 3;
	struct self_footer *sf = calloc(2, sizeof *sf);
	struct st_test t;
	uint8_t *data = tu_payload(len, TU_TEXT, 78);
	int fd, i;

	ck_assert(sf != NULL);
	for (i = 0; i < 2; i++) {
		sf[i].len = len;
		sf[i].data = data;
	}
	st_begin(&t, th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0), data, len, sf_route, sf);
	fd = th_raw_connect(t.s.port);
	th_raw_send(fd, req, sizeof req - 1);
	for (i = 0; i < 2; i++) {
		struct th_raw_response resp;
		uint8_t *body = NULL, *dec = NULL;
		size_t body_len = 0, dec_len = 0, nchunks = 0;
		bool early = false;
		static const char tr[] = "\r\nX-Footer: late\r\n\r\n";

		ck_assert_int_eq(th_raw_read_response(fd, false, 10000, &resp), 0);
		ck_assert_int_eq(resp.status, 200);
		ck_assert(resp.chunked);
		th_raw_expect_field(&resp, "Content-Encoding", "gzip", "pipelined");
		th_raw_expect_field(&resp, "Trailer", "X-Footer", "pipelined");
		th_raw_expect_field(&resp, "Content-Length", NULL, "pipelined");
		ck_assert_int_eq(th_dechunk(resp.bytes + resp.head_len, resp.len - resp.head_len,
					    &body, &body_len, &nchunks, &early),
				 0);
		ck_assert(!early);
		/* the last chunk, then the footer, then the end */
		ck_assert(resp.len >= sizeof tr - 1 + 3);
		ck_assert_msg(memcmp(resp.bytes + resp.len - (sizeof tr - 1), tr, sizeof tr - 1) ==
				      0,
			      "response %d does not end with the X-Footer trailer", i);
		ck_assert_int_eq(tu_gunzip(body, body_len, &dec, &dec_len), 0);
		ck_assert_uint_eq(dec_len, len);
		ck_assert(memcmp(dec, data, len) == 0);
		free(dec);
		free(body);
		th_raw_response_free(&resp);
	}
	th_raw_expect_idle(fd, 200, "after two pipelined responses");
	close(fd);
	th_stop(&t.s);
	for (i = 0; i < 2; i++) {
		ck_assert_uint_eq(atomic_load(&sf[i].frees), 1);
		ck_assert_uint_eq(atomic_load(&sf[i].footers), 1);
		ck_assert_uint_eq(atomic_load(&sf[i].after_free), 0);
	}
	free(sf);
	st_end(&t);
}
END_TEST

/* ===================================================================== */
/*        One response of unknown size queued again and again            */
/* ===================================================================== */

/* An application that keeps one response and queues it for every request
 * (libmicrohttpd allows it): the reader is pure (bytes by position). */
struct shared_resp {
	struct MHD_Response *r;
	const uint8_t *data;
	size_t data_len; /* cycled over */
	uint64_t len;
	_Atomic unsigned int frees, after_free;
};

static ssize_t
shared_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct shared_resp *sr = cls;
	size_t n = 16 * KIB, i;

	if (atomic_load(&sr->frees))
		atomic_fetch_add(&sr->after_free, 1);
	if (pos >= sr->len)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (n > max)
		n = max;
	if (n > sr->len - pos)
		n = (size_t)(sr->len - pos);
	for (i = 0; i < n; i++)
		buf[i] = (char)sr->data[(pos + i) % sr->data_len];
	return (ssize_t)n;
}

static void
shared_free(void *cls)
{
	atomic_fetch_add(&((struct shared_resp *)cls)->frees, 1);
}

static enum MHD_Result
shared_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct shared_resp *sr = s->cls;

	(void)url;
	return mhdgz_queue_response_ex(s->gz, c, TU_REQ(method), MHD_HTTP_OK, sr->r, NULL);
}

static struct MHD_Response *
shared_new(struct mhdgz *gz, struct shared_resp *sr)
{
	struct MHD_Response *r = mhdgz_response_from_callback(gz, MHD_SIZE_UNKNOWN, 16 * KIB,
							      shared_read, sr, shared_free);

	ck_assert(r != NULL);
	ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain") ==
		  MHD_YES);
	sr->r = r;
	return r;
}

/* th_wait predicate: two compressors taken, one idle again (the other held). */
static bool
one_of_two_held(void *gz)
{
	struct mhdgz_stats st = th_stats(gz);

	return st.pool_gets == 2 && st.pool_misses == 2 && st.pool_idle == 1;
}

/*
 * A response the application keeps and queues for every request: its first
 * coded queue carries the stream in place, the second a stream of its own;
 * both clients go away mid-stream while the application still holds the
 * response. The second stream's compressor comes back when its connection
 * goes; the in-place one's comes back with the response (mhdgz.h,
 * mhdgz_response_from_callback: one per kept response), and the reader is
 * never called after its free callback. The fixture is not changed while
 * a reader may run (ThreadSanitizer).
 */
START_TEST(in_place_shared_client_leaves)
{
	size_t dlen = 256 * KIB;
	uint8_t *data = tu_payload(dlen, TU_RANDOM, 311);
	struct shared_resp sr = { .data = data, .data_len = dlen, .len = 256ull * MIB };
	struct st_test t;
	int i;

	st_begin(&t, th_gz_new(MHDGZ_BACKEND_ZLIB, 6, 0), data, dlen, shared_route, &sr);
	shared_new(t.gz, &sr);
	t.r.abort_after = 64 * KIB;
	for (i = 0; i < 2; i++) { /* in place, then a stream of its own */
		st_get(&t, TH_GZIP);
		ck_assert_msg(t.r.rc == CURLE_WRITE_ERROR, "%d: %s", i, curl_easy_strerror(t.r.rc));
		ck_assert_str_eq(th_header(&t.r, "Content-Encoding", NULL), "gzip");
	}
	ck_assert_msg(th_wait(one_of_two_held, t.gz, RELEASE_WAIT_MS),
		      "the abandoned stream of its own did not give its compressor back");
	MHD_destroy_response(sr.r); /* the application lets go */
	th_stop(&t.s);
	ck_assert(th_wait(th_pool_back_pred, t.gz, RELEASE_WAIT_MS));
	ck_assert_uint_eq(atomic_load(&sr.frees), 1);
	ck_assert_uint_eq(atomic_load(&sr.after_free), 0);
	st_end(&t);
}
END_TEST

#if MHD_VERSION >= 0x01000000
/*
 * libmicrohttpd 1.0: an application's own Content-Length on a response of
 * unknown size (MHD_RF_INSANITY_HEADER_CONTENT_LENGTH, set through
 * mhdgz_response_set_options). Coded, the body has another length: the
 * gzip response must not carry the identity Content-Length (every coded
 * variant drops it, copy_iter), in place or not.
 */
START_TEST(in_place_app_content_length)
{
	size_t len = 40 * KIB + 7;
	uint8_t *data = tu_payload(len, TU_TEXT, 312), *dec = NULL;
	struct shared_resp sr = { .data = data, .data_len = len, .len = len };
	struct st_test t;
	char cl[32];
	size_t dec_len = 0;
	unsigned int k;

	st_begin(&t, th_gz_new(MHDGZ_BACKEND_ZLIB, 6, 0), data, len, shared_route, &sr);
	shared_new(t.gz, &sr);
	snprintf(cl, sizeof cl, "%zu", len);
	ck_assert_int_eq(mhdgz_response_set_options(t.gz, sr.r,
						    MHD_RF_INSANITY_HEADER_CONTENT_LENGTH),
			 0);
	ck_assert(MHD_add_response_header(sr.r, MHD_HTTP_HEADER_CONTENT_LENGTH, cl) == MHD_YES);
	for (k = 0; k < 2; k++) { /* in place, then a stream of its own */
		st_get(&t, TH_GZIP);
		ck_assert_msg(t.r.rc == CURLE_OK, "%s", curl_easy_strerror(t.r.rc));
		ck_assert_str_eq(th_header(&t.r, "Content-Encoding", NULL), "gzip");
		ck_assert_msg(th_hdr_count(&t.r, "Content-Length") == 0,
			      "queue %u: the gzip stream carries the identity Content-Length %s", k,
			      th_header(&t.r, "Content-Length", NULL));
		ck_assert_int_eq(tu_gunzip(t.r.body, t.r.body_len, &dec, &dec_len), 0);
		ck_assert_uint_eq(dec_len, len);
		ck_assert(memcmp(dec, data, len) == 0);
		free(dec);
		dec = NULL;
	}
	MHD_destroy_response(sr.r);
	th_stop(&t.s);
	ck_assert_uint_eq(atomic_load(&sr.frees), 1);
	st_end(&t);
}
END_TEST
#endif

/* ===================================================================== */
/*              The coder budget: live streams' compressor state          */
/* ===================================================================== */

struct coder_wait {
	struct mhdgz *gz;
	uint64_t queued; /* responses decided */
};

static bool
decided_pred(void *cls)
{
	struct coder_wait *w = cls;
	struct mhdgz_stats st = th_stats(w->gz);
	uint64_t n = 0;

	/* reasons are counted last, once a response is decided */
	for (int k = 0; k < MHDGZ_REASON_COUNT; k++)
		n += st.reasons[k];
	return n >= w->queued;
}

static bool
coder_back_pred(void *gz)
{
	return th_stats(gz).coder_nbytes == 0;
}

/* n raw clients asking for br that never read: each stream, once decided,
 * holds its compressor (the body outlasts the socket buffers). */
static void
slow_br_clients(struct coder_wait *w, uint16_t port, int *fds, unsigned int n)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\nAccept-Encoding: br\r\n\r\n";

	for (unsigned int k = 0; k < n; k++) {
		fds[k] = th_raw_connect(port);
		th_raw_send(fds[k], req, sizeof req - 1);
		w->queued++;
		ck_assert_msg(th_wait(decided_pred, w, 10000), "stream %u not decided", k);
	}
}

/*
 * limits.coder_nbytes (struct mhdgz_options): a br stream is charged what a br
 * compressor holds at its peak (measured once), C. With a budget of 3.5 C
 * (_i 1) and 5 slow readers, exactly 3 streams are coded and 2 sent
 * identity (MHDGZ_SKIP_MEMORY); the charges held are 3 C, and 0 once the
 * clients are gone. Without a budget (_i 0) all 5 are coded.
 */
START_TEST(test_coder_budget)
{
	const unsigned int k_clients = 5, fit = _i == 0 ? k_clients : 3;
	struct mhdgz_options o = th_opts();
	struct th_server s = { 0 };
	struct coder_wait w = { 0 };
	struct mhdgz_stats st;
	uint8_t *data = tu_payload(256 * KIB, TU_TEXT, 303);
	struct lfix f;
	uint64_t c;
	int fds[8];

	if (!tu_coding_available(MHDGZ_CODING_BR)) {
		free(data);
		return;
	}
	/* One stream under the default budget: its charge. */
	lfix_init(&f, data, 256 * KIB, 1ull << 30, false, 16 * KIB, "text/plain");
	o.codings = "br";
	w.gz = st_gz_from(&o);
	th_start(&s, w.gz, 0, live_route, &f);
	slow_br_clients(&w, s.port, fds, 1);
	st = th_stats(w.gz);
	ck_assert_uint_eq(st.reasons[MHDGZ_COMPRESSED], 1);
	c = st.coder_nbytes;
	ck_assert_msg(c > 1024 * 1024 && c < 64ull * 1024 * 1024, "br charge %llu bytes",
		      (unsigned long long)c);
	close(fds[0]);
	ck_assert_msg(th_wait(coder_back_pred, w.gz, RELEASE_WAIT_MS), "charge not given back");
	th_stop(&s);
	mhdgz_free(w.gz);

	o.limits.coder_nbytes = _i == 0 ? MHDGZ_CODER_NBYTES_UNLIMITED : (size_t)(3 * c + c / 2);
	w.gz = st_gz_from(&o);
	w.queued = 0;
	lfix_init(&f, data, 256 * KIB, 1ull << 30, false, 16 * KIB, "text/plain");
	th_start(&s, w.gz, 0, live_route, &f);
	slow_br_clients(&w, s.port, fds, k_clients);
	st = th_stats(w.gz);
	ck_assert_uint_eq(st.reasons[MHDGZ_COMPRESSED], fit);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_MEMORY], k_clients - fit);
	ck_assert_uint_eq(st.coded[MHDGZ_CODING_BR], fit);
	ck_assert_uint_eq(st.coder_nbytes, fit * c);
	ck_assert_str_eq(mhdgz_reason_name(MHDGZ_SKIP_MEMORY), "memory");
	for (unsigned int k = 0; k < k_clients; k++)
		close(fds[k]);
	ck_assert_msg(th_wait(coder_back_pred, w.gz, RELEASE_WAIT_MS),
		      "%llu bytes still charged after the clients left",
		      (unsigned long long)th_stats(w.gz).coder_nbytes);
	th_stop(&s);
	mhdgz_free(w.gz);
	free(data);
}
END_TEST

struct ck_case
stream_lifetime_case(void)
{
	return (struct ck_case){ "lifetime",
				 CK_CASE_TIMEOUT,
				 {
					 { client_disconnects, 0, (int)(2 * N_ELEMS(dc_backends)) },
					 { daemon_stops_mid_stream, 0, 0 },
					 { head_like_get, 0, 2 },
					 { in_place_footers, 0, 8 },
					 { in_place_footers_pipelined, 0, 0 },
					 { in_place_shared_client_leaves, 0, 0 },
					 { test_coder_budget, 0, 2 },
#if MHD_VERSION >= 0x01000000
					 { in_place_app_content_length, 0, 0 },
#endif
				 } };
}

struct ck_case
stream_memory_case(void)
{
	return (struct ck_case){ "memory", CK_CASE_TIMEOUT, { { one_gib_bounded_memory, 0, 0 } } };
}
