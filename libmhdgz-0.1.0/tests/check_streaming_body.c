/* check_streaming_body.c: streaming round trips, headers and decisions for callback and file responses, end to end. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <unistd.h>

#include <curl/curl.h>

#include "mhdgz.h"
#include "check_suites.h"
#include "harness.h"
#include "testutil.h"

#define KIB 1024u
#define MIB (1024u * 1024u)

/* How long a test waits for the daemon to release a finished response
 * (free callback, compressor back in the pool), in milliseconds. */
#define RELEASE_WAIT_MS 10000

/* ===================================================================== */
/*                  Fixture: one route serving one body                  */
/* ===================================================================== */

enum bf_kind { BF_CALLBACK, BF_FD, BF_FD_OFFSET };

/* A fresh response per request, made from the fixture, queued through
 * mhdgz_queue_response and destroyed at once (the usual pattern). */
struct bfix {
	enum bf_kind kind;
	struct th_src src;    /* BF_CALLBACK: the body; counts frees */
	uint64_t size;        /* announced size, or MHD_SIZE_UNKNOWN */
	size_t block_size;    /* BF_CALLBACK */
	int fd;               /* BF_FD*: the test's descriptor, dup'ed per response */
	uint64_t offset;      /* BF_FD_OFFSET */
	unsigned int status;  /* 0 = 200 */
	const char *hdr[13];  /* name, value pairs, NULL-terminated */
	ssize_t (*reader)(void *cls, uint64_t pos, char *buf, size_t max); /* NULL = th_src_read */
	const char *footer_name, *footer_value; /* a trailer field, if set */
	_Atomic unsigned int create_failures;
	_Atomic unsigned int responses;
};

static enum MHD_Result
body_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct bfix *f = s->cls;
	struct MHD_Response *r = NULL;
	enum MHD_Result ret;
	size_t i;

	(void)url;
	(void)method;
	if (f->kind == BF_CALLBACK) {
		r = mhdgz_response_from_callback(s->gz, f->size, f->block_size,
						 f->reader ? f->reader : th_src_read, &f->src,
						 th_src_free);
	} else {
		int fd = dup(f->fd);

		if (fd >= 0)
			r = f->kind == BF_FD
				    ? mhdgz_response_from_fd(s->gz, (size_t)f->size, fd)
				    : mhdgz_response_from_fd_at_offset64(s->gz, f->size, fd, f->offset);
	}
	if (!r) {
		atomic_fetch_add(&f->create_failures, 1);
		return MHD_NO;
	}
	atomic_fetch_add(&f->responses, 1);
	for (i = 0; f->hdr[i]; i += 2)
		ck_assert(MHD_add_response_header(r, f->hdr[i], f->hdr[i + 1]) == MHD_YES);
	if (f->footer_name)
		ck_assert(MHD_add_response_footer(r, f->footer_name, f->footer_value) == MHD_YES);
	ret = mhdgz_queue_response(s->gz, c, f->status ? f->status : MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static void
bfix_callback(struct bfix *f, const uint8_t *data, uint64_t len, bool known, size_t chunk,
	      size_t block_size, const char *ctype)
{
	memset(f, 0, sizeof *f);
	f->kind = BF_CALLBACK;
	f->src.data = data;
	f->src.len = len;
	f->src.chunk = chunk;
	f->size = known ? len : MHD_SIZE_UNKNOWN;
	f->block_size = block_size;
	f->fd = -1;
	if (ctype) {
		f->hdr[0] = MHD_HTTP_HEADER_CONTENT_TYPE;
		f->hdr[1] = ctype;
	}
}

/* Append a header to the fixture's list. */
static void
bfix_header(struct bfix *f, const char *name, const char *value)
{
	size_t i = 0;

	while (f->hdr[i])
		i += 2;
	ck_assert(i + 2 < N_ELEMS(f->hdr));
	f->hdr[i] = name;
	f->hdr[i + 1] = value;
	f->hdr[i + 2] = NULL;
}

static bool
frees_reach(void *cls)
{
	struct bfix *f = cls;

	return atomic_load(&f->src.frees) >= atomic_load(&f->responses);
}

/* ===================================================================== */
/*                               Checks                                  */
/* ===================================================================== */

static void
expect_same_bytes(const uint8_t *got, size_t got_len, const uint8_t *want, size_t want_len,
		  const char *what)
{
	size_t i, n = got_len < want_len ? got_len : want_len;

	for (i = 0; i < n; i++)
		if (got[i] != want[i])
			break;
	ck_assert_msg(i == n && got_len == want_len,
		      "%s: %zu bytes, want %zu; first difference at byte %zu", what, got_len,
		      want_len, i);
}

/* r is a 200 gzip stream of want[0..want_len): Content-Encoding: gzip
 * once, chunked, no Content-Length, one Vary listing Accept-Encoding, no
 * Accept-Ranges, ETag etag_want (NULL: none), and one complete RFC 1952
 * member decoding to want. */
static void
expect_gzip(const struct th_reply *r, const uint8_t *want, size_t want_len,
	    const char *etag_want)
{
	unsigned int n;
	const char *v;
	uint8_t *dec = NULL;
	size_t dec_len = 0;

	ck_assert_msg(r->rc == CURLE_OK, "gzip transfer failed: %s", curl_easy_strerror(r->rc));
	ck_assert_int_eq(r->status, 200);
	ck_assert(!r->hdr_overflow);
	v = th_header(r, "Content-Encoding", &n);
	ck_assert_msg(v && n == 1 && strcasecmp(v, "gzip") == 0, "Content-Encoding: %s (x%u)",
		      v ? v : "(none)", n);
	v = th_header(r, "Transfer-Encoding", &n);
	ck_assert_msg(v && n == 1 && strcasecmp(v, "chunked") == 0, "Transfer-Encoding: %s",
		      v ? v : "(none)");
	v = th_header(r, "Content-Length", NULL);
	ck_assert_msg(v == NULL, "Content-Length %s on a chunked gzip stream", v);
	v = th_header(r, "Vary", &n);
	ck_assert_msg(v && n == 1 && th_has_token(v, "Accept-Encoding"), "Vary: %s (x%u)",
		      v ? v : "(none)", n);
	ck_assert_msg(th_header(r, "Accept-Ranges", NULL) == NULL, "Accept-Ranges on gzip");
	v = th_header(r, "ETag", &n);
	if (etag_want)
		ck_assert_msg(v && n == 1 && strcmp(v, etag_want) == 0, "ETag %s, want %s",
			      v ? v : "(none)", etag_want);
	else
		ck_assert_msg(v == NULL, "unexpected ETag %s", v);
	ck_assert_msg(tu_gunzip(r->body, r->body_len, &dec, &dec_len) == 0,
		      "%zu gzip bytes do not form one complete gzip member", r->body_len);
	expect_same_bytes(dec, dec_len, want, want_len, "decoded gzip body");
	ck_assert_msg(tu_check_member(r->body, r->body_len, want, want_len) == 0,
		      "gzip header/trailer (RFC 1952) wrong");
	free(dec);
}

/* r is an identity 200 of want[0..want_len): no Content-Encoding (or the
 * one given), Content-Length when known (else chunked), Vary listing
 * Accept-Encoding when vary. */
static void
expect_identity(const struct th_reply *r, const uint8_t *want, size_t want_len, bool known,
		bool vary, const char *ce_want)
{
	unsigned int n;
	const char *v;
	char num[32];

	ck_assert_msg(r->rc == CURLE_OK, "identity transfer failed: %s",
		      curl_easy_strerror(r->rc));
	ck_assert_int_eq(r->status, 200);
	v = th_header(r, "Content-Encoding", &n);
	if (ce_want)
		ck_assert_msg(v && strcmp(v, ce_want) == 0, "Content-Encoding %s, want %s",
			      v ? v : "(none)", ce_want);
	else
		ck_assert_msg(v == NULL, "identity response has Content-Encoding: %s", v);
	v = th_header(r, "Content-Length", &n);
	if (known) {
		snprintf(num, sizeof num, "%zu", want_len);
		ck_assert_msg(v && n == 1 && strcmp(v, num) == 0, "Content-Length %s, want %s",
			      v ? v : "(none)", num);
	} else {
		ck_assert_msg(v == NULL, "Content-Length %s for an unknown size", v);
		v = th_header(r, "Transfer-Encoding", NULL);
		ck_assert_msg(v && strcasecmp(v, "chunked") == 0, "Transfer-Encoding %s",
			      v ? v : "(none)");
	}
	v = th_header(r, "Vary", &n);
	if (vary)
		ck_assert_msg(v && n == 1 && th_has_token(v, "Accept-Encoding"), "Vary: %s (x%u)",
			      v ? v : "(none)", n);
	else
		ck_assert_msg(v == NULL || !th_has_token(v, "Accept-Encoding"), "Vary: %s", v);
	expect_same_bytes(r->body, r->body_len, want, want_len, "identity body");
}

/* After the requests: every response released exactly once, every
 * compressor back in the pool, no reader call after a free callback. */
static void
expect_released(struct th_server *s, struct bfix *f)
{
	ck_assert_msg(th_wait(frees_reach, f, RELEASE_WAIT_MS),
		      "free callback ran %u times for %u responses", atomic_load(&f->src.frees),
		      atomic_load(&f->responses));
	ck_assert_msg(th_wait((bool (*)(void *))th_pool_all_back, s->gz, RELEASE_WAIT_MS),
		      "compressor pool: compressors still out after the responses ended");
	ck_assert_uint_eq(atomic_load(&f->create_failures), 0);
}

/* ===================================================================== */
/*                  Round trips over reader chunk sizes                  */
/* ===================================================================== */

/* Reader chunk size (also the block size) and body size: from 1 byte per
 * call to 1 MiB, bodies of a few hundred KiB to a few MiB, odd lengths. */
static const struct {
	size_t chunk;
	size_t len;
} rt_cases[] = {
	{1, 300 * KIB + 1},          {7, 600 * KIB + 3},       {100, 1 * MIB + 7},
	{4096, 2 * MIB + 11},        {65536, 3 * MIB + 5},     {1 * MIB, 4 * MIB + 12345},
};

/* _i: case * 2 + known. */
START_TEST(roundtrip_chunk_sizes)
{
	size_t ci = (size_t)_i / 2;
	bool known = _i % 2;
	size_t len = rt_cases[ci].len, chunk = rt_cases[ci].chunk;
	uint8_t *data = tu_payload(len, ci % 2 ? TU_JSON : TU_TEXT, (uint32_t)_i + 1);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;
	CURL *h = curl_easy_init();

	bfix_callback(&f, data, len, known, chunk, chunk, "text/plain; charset=utf-8");
	bfix_header(&f, MHD_HTTP_HEADER_ETAG, "\"v1\"");
	th_start(&s, gz, 0, body_route, &f);
	th_reply_init(&r);

	/* Twice over one keep-alive connection, then identity. */
	th_fetch(h, s.port, "/", TH_GZIP, &r);
	expect_gzip(&r, data, len, "W/\"v1\"");
	th_fetch(h, s.port, "/", TH_GZIP, &r);
	expect_gzip(&r, data, len, "W/\"v1\"");
	th_fetch(h, s.port, "/", 0, &r);
	expect_identity(&r, data, len, known, true, NULL);
	ck_assert_str_eq(th_header(&r, "ETag", NULL), "\"v1\"");

	expect_released(&s, &f);
	th_stop(&s);
	ck_assert_uint_eq(atomic_load(&f.src.frees), 3);
	th_reply_free(&r);
	curl_easy_cleanup(h);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/* Every streaming backend at its lowest and highest level (libdeflate
 * hands streams to zlib). _i: case * 2 + known. */
static const struct {
	enum mhdgz_backend be;
	int level;
	unsigned int flags;
} be_cases[] = {
	{MHDGZ_BACKEND_ZLIB, 1, 0},       {MHDGZ_BACKEND_ZLIB, 9, 0},
	{MHDGZ_BACKEND_LIBDEFLATE, 1, 0}, {MHDGZ_BACKEND_LIBDEFLATE, 12, 0},
	{MHDGZ_BACKEND_ISAL, 1, 0}, {MHDGZ_BACKEND_ISAL, 4, 0},
	{MHDGZ_BACKEND_ZLIB, 6, MHDGZ_F_NO_POOL},
};

START_TEST(roundtrip_backends)
{
	size_t ci = (size_t)_i / 2;
	bool known = _i % 2;
	size_t len = 1 * MIB + 333;
	uint8_t *data;
	struct mhdgz_options o;
	struct mhdgz *gz = NULL;
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;
	int rc;

	if (!mhdgz_backend_available(be_cases[ci].be))
		return;
	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.backend = be_cases[ci].be;
	o.level = be_cases[ci].level;
	o.flags = be_cases[ci].flags;
	rc = mhdgz_new(&o, &gz);
	ck_assert_msg(rc == 0, "mhdgz_new: %s", mhdgz_strerror(rc));
	data = tu_payload(len, TU_TEXT, 77);
	bfix_callback(&f, data, len, known, 4096, 4096, "application/json");
	th_start(&s, gz, 0, body_route, &f);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", TH_GZIP, &r);
	expect_gzip(&r, data, len, NULL);
	ck_assert_msg(r.body_len < len / 2, "%zu gzip bytes for %zu of text", r.body_len, len);
	expect_released(&s, &f);
	th_stop(&s);
	th_reply_free(&r);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/* A reader that returns 1, 2, ... 13 bytes in turn (less than it may),
 * with a block size of 4096. */
static ssize_t
irregular_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct th_src *s = cls;
	uint64_t k = atomic_fetch_add(&s->calls, 1);
	size_t n = (size_t)(k % 13) + 1;

	if (pos >= s->len)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (n > max)
		n = max;
	if (n > s->len - pos)
		n = (size_t)(s->len - pos);
	memcpy(buf, s->data + pos, n);
	return (ssize_t)n;
}

START_TEST(roundtrip_irregular_reads)
{
	bool known = _i;
	size_t len = 200 * KIB + 17;
	uint8_t *data = tu_payload(len, TU_TEXT, 5);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_ZLIB, 6, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;

	bfix_callback(&f, data, len, known, 0, 4096, "text/html");
	f.reader = irregular_read;
	th_start(&s, gz, 0, body_route, &f);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", TH_GZIP, &r);
	expect_gzip(&r, data, len, NULL);
	th_fetch(NULL, s.port, "/", 0, &r);
	expect_identity(&r, data, len, known, true, NULL);
	expect_released(&s, &f);
	th_stop(&s);
	th_reply_free(&r);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/* ===================================================================== */
/*                        Decision and headers                           */
/* ===================================================================== */

/* Clients that do not accept gzip get the identity body, exact, with
 * Content-Length for a known size; Vary and the strong ETag stay. */
static const char *const not_accepting[] = {
	NULL, "identity", "gzip;q=0", "br, deflate", "*;q=0, identity", "x-gzip;q=0, gzip;q=0",
};

START_TEST(identity_when_not_accepted)
{
	size_t ai = (size_t)_i / 2;
	bool known = _i % 2;
	size_t len = 300 * KIB + 9;
	uint8_t *data = tu_payload(len, TU_TEXT, 9);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;
	struct mhdgz_stats st;

	bfix_callback(&f, data, len, known, 4096, 4096, "text/plain");
	bfix_header(&f, MHD_HTTP_HEADER_ETAG, "\"tag\"");
	th_start(&s, gz, 0, body_route, &f);
	th_reply_init(&r);
	r.accept_encoding = not_accepting[ai];
	th_fetch(NULL, s.port, "/", 0, &r);
	expect_identity(&r, data, len, known, true, NULL);
	ck_assert_str_eq(th_header(&r, "ETag", NULL), "\"tag\"");
	expect_released(&s, &f);
	st = th_stats(gz);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_NOT_ACCEPTED], 1);
	ck_assert_uint_eq(st.compressed, 0);
	ck_assert_uint_eq(st.pool_gets, 0);
	th_stop(&s);
	th_reply_free(&r);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/* min_size applies to known sizes only: below it identity (with Vary),
 * at it gzip; an unknown size is compressed however short it turns out. */
START_TEST(min_size_known_and_unknown)
{
	/* An unknown size is decided on its first bytes (up to min_nbytes):
	 * one that ends below it goes out identity with its exact length,
	 * read while deciding (issue 12, kind 6); one that reaches it is
	 * compressed. */
	static const struct {
		size_t len;
		bool known;
		bool gzip;
	} c[] = {
		{1000, true, false}, {1023, true, false}, {1024, true, true},
		{100, false, false}, {1, false, false},   {1023, false, false},
		{1024, false, true}, {5000, false, true},
	};
	size_t i;

	for (i = 0; i < N_ELEMS(c); i++) {
		uint8_t *data = tu_payload(c[i].len, TU_TEXT, (uint32_t)i);
		struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0); /* 1024 */
		struct th_server s = {0};
		struct th_reply r;
		struct bfix f;
		struct mhdgz_stats st;

		bfix_callback(&f, data, c[i].len, c[i].known, 512, 512, "text/plain");
		th_start(&s, gz, 0, body_route, &f);
		th_reply_init(&r);
		th_fetch(NULL, s.port, "/", TH_GZIP, &r);
		if (c[i].gzip)
			expect_gzip(&r, data, c[i].len, NULL);
		else /* a Content-Length either way: known, or ended while read */
			expect_identity(&r, data, c[i].len, true, true, NULL);
		expect_released(&s, &f);
		st = th_stats(gz);
		ck_assert_msg(st.reasons[c[i].gzip ? MHDGZ_COMPRESSED : MHDGZ_SKIP_SMALL] == 1,
			      "case %zu: reason not counted", i);
		th_stop(&s);
		th_reply_free(&r);
		mhdgz_free(gz);
		free(data);
	}
}
END_TEST

/* Types on the skip list are identity, counted as a type skip (an untyped
 * stream is sniffed from its first bytes: untyped_stream_sniffed). */
static const char *const identity_types[] = {"image/png", "application/zip", "video/mp4"};

START_TEST(untyped_or_skipped_type_identity)
{
	const char *ct = identity_types[_i];
	size_t len = 64 * KIB;
	uint8_t *data = tu_payload(len, TU_TEXT, 3); /* text: a sniff would say yes */
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;
	struct mhdgz_stats st;

	bfix_callback(&f, data, len, false, 4096, 4096, ct);
	th_start(&s, gz, 0, body_route, &f);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", TH_GZIP, &r);
	expect_identity(&r, data, len, false, false, NULL);
	expect_released(&s, &f);
	st = th_stats(gz);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_TYPE], 1);
	ck_assert_uint_eq(st.pool_gets, 0);
	th_stop(&s);
	th_reply_free(&r);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/* An untyped stream of unknown size is sniffed from the first bytes read
 * while deciding it: text is compressed, binary is identity (counted as a
 * type skip, no compressor taken), and either way the client gets every
 * byte, the sniffed ones first. Case 2: an empty stream is identity,
 * counted as empty, with Content-Length: 0. */
START_TEST(untyped_stream_sniffed)
{
	size_t len = _i == 2 ? 0 : 64 * KIB;
	uint8_t *data = malloc(len + 1);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;
	struct mhdgz_stats st;
	size_t i;

	ck_assert_ptr_nonnull(data);
	if (_i == 0)
		tu_fill(data, len, TU_TEXT, 5);
	for (i = 0; _i == 1 && i < len; i++) /* NULs and control bytes: binary */
		data[i] = (uint8_t)(i % 7 == 0 ? 0 : (i * 13) & 0x1f);
	bfix_callback(&f, data, len, false, 4096, 4096, NULL);
	th_start(&s, gz, 0, body_route, &f);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", TH_GZIP, &r);
	st = th_stats(gz);
	if (_i == 0) {
		expect_gzip(&r, data, len, NULL);
		ck_assert_uint_eq(st.reasons[MHDGZ_COMPRESSED], 1);
	} else if (_i == 1) {
		expect_identity(&r, data, len, false, false, NULL);
		ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_TYPE], 1);
		ck_assert_uint_eq(st.pool_gets, 0);
	} else {
		expect_identity(&r, data, len, true, false, NULL);
		ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_EMPTY], 1);
		ck_assert_uint_eq(st.pool_gets, 0);
	}
	expect_released(&s, &f);
	th_stop(&s);
	th_reply_free(&r);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/* The header-only early-outs apply to streams as to buffers. */
START_TEST(header_rules)
{
	size_t len = 100 * KIB + 1;
	uint8_t *data = tu_payload(len, TU_TEXT, 11);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply r;
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
	th_start(&s, gz, 0, body_route, &f);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", TH_GZIP, &r);
	ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
	switch (_i) {
	case 0:
		expect_identity(&r, data, len, true, false, NULL);
		break;
	case 1:
		expect_identity(&r, data, len, true, false, "br");
		break;
	case 2:
		expect_gzip(&r, data, len, "W/\"weak\"");
		v = th_header(&r, "Vary", &n);
		ck_assert_msg(n == 1 && th_has_token(v, "Cookie") && th_has_token(v, "Accept-Encoding"),
			      "Vary: %s (x%u)", v, n);
		th_fetch(NULL, s.port, "/", 0, &r);
		expect_identity(&r, data, len, true, true, NULL);
		ck_assert_str_eq(th_header(&r, "Accept-Ranges", NULL), "bytes");
		break;
	case 3:
		ck_assert_int_eq(r.status, 206);
		ck_assert(th_header(&r, "Content-Encoding", NULL) == NULL);
		expect_same_bytes(r.body, r.body_len, data, len, "206 body");
		break;
	case 4:
		ck_assert_int_eq(r.status, 304);
		ck_assert_uint_eq(r.body_len, 0);
		ck_assert(th_header(&r, "Content-Encoding", NULL) == NULL);
		v = th_header(&r, "ETag", NULL);
		ck_assert_msg(v && strcmp(v, "W/\"x\"") == 0, "304 ETag %s", v ? v : "(none)");
		ck_assert(th_has_token(th_header(&r, "Vary", NULL), "Accept-Encoding"));
		break;
	case 5:
		ck_assert_int_eq(r.status, 204);
		ck_assert_uint_eq(r.body_len, 0);
		ck_assert(th_header(&r, "Content-Encoding", NULL) == NULL);
		break;
	case 6:
		expect_gzip(&r, data, len, NULL);
		th_fetch(NULL, s.port, "/", 0, &r);
		ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
		v = th_header(&r, "Transfer-Encoding", &n);
		ck_assert_msg(n == 1 && strcasecmp(v, "chunked") == 0, "identity: Transfer-Encoding "
			      "%s (x%u)", v ? v : "(none)", n);
		expect_same_bytes(r.body, r.body_len, data, len, "identity body");
		break;
	}
	expect_released(&s, &f);
	th_stop(&s);
	th_reply_free(&r);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/* The counters of a stream: one decision, compressed, the body's bytes in
 * and the coded bytes out once the stream has ended, one pool get. */
START_TEST(stream_stats)
{
	size_t len = 500 * KIB + 5;
	uint8_t *data = tu_payload(len, TU_TEXT, 21);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_ZLIB, 6, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;
	struct mhdgz_stats st;

	bfix_callback(&f, data, len, false, 8192, 8192, "text/plain");
	th_start(&s, gz, 0, body_route, &f);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", TH_GZIP, &r);
	expect_gzip(&r, data, len, NULL);
	expect_released(&s, &f);
	st = th_stats(gz);
	ck_assert_uint_eq(st.responses, 1);
	ck_assert_uint_eq(st.compressed, 1);
	ck_assert_uint_eq(st.reasons[MHDGZ_COMPRESSED], 1);
	ck_assert_uint_eq(st.failures, 0);
	ck_assert_uint_eq(st.pool_gets, 1);
	ck_assert_uint_eq(st.bytes_in, len);
	ck_assert_uint_eq(st.bytes_out, r.body_len);
	th_stop(&s);
	th_reply_free(&r);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/* ===================================================================== */
/*                               Files                                   */
/* ===================================================================== */

static void
bfix_file(struct bfix *f, int fd, uint64_t size, uint64_t offset, const char *ctype)
{
	memset(f, 0, sizeof *f);
	f->kind = offset ? BF_FD_OFFSET : BF_FD;
	f->fd = fd;
	f->size = size;
	f->offset = offset;
	if (ctype) {
		f->hdr[0] = MHD_HTTP_HEADER_CONTENT_TYPE;
		f->hdr[1] = ctype;
	}
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
	uint8_t *data = tu_payload(flen, TU_TEXT, 31);
	int fd = th_temp_file(data, flen), fds_before;
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;
	CURL *h = curl_easy_init();

	bfix_file(&f, fd, blen, off, "text/plain");
	bfix_header(&f, MHD_HTTP_HEADER_ETAG, "\"file\"");
	th_start(&s, gz, 0, body_route, &f);
	fds_before = count_fds();
	th_reply_init(&r);
	th_fetch(h, s.port, "/", TH_GZIP, &r);
	expect_gzip(&r, data + off, blen, "W/\"file\"");
	th_fetch(h, s.port, "/", 0, &r);
	expect_identity(&r, data + off, blen, true, true, NULL);
	ck_assert_str_eq(th_header(&r, "ETag", NULL), "\"file\"");
	th_fetch(h, s.port, "/", TH_GZIP, &r);
	expect_gzip(&r, data + off, blen, "W/\"file\"");
	ck_assert_uint_eq(atomic_load(&f.create_failures), 0);
	ck_assert(th_wait(th_pool_back_pred, gz, RELEASE_WAIT_MS));
	curl_easy_cleanup(h);
	th_stop(&s);
	/* Every duplicate the responses took is closed (the client's
	 * connection is gone too). */
	ck_assert_int_le(count_fds(), fds_before);
	th_reply_free(&r);
	mhdgz_free(gz);
	close(fd);
	free(data);
}
END_TEST

/* A png-typed file is never compressed: byte-exact identity with
 * Content-Length, even for a gzip client. */
START_TEST(file_png_identity)
{
	size_t len = 700 * KIB + 1;
	uint8_t *data = tu_payload(len, _i ? TU_TEXT : TU_RANDOM, 41);
	int fd = th_temp_file(data, len);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;
	struct mhdgz_stats st;

	bfix_file(&f, fd, len, _i ? 1 : 0, "image/png");
	if (_i)
		f.size = len - 1;
	th_start(&s, gz, 0, body_route, &f);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", TH_GZIP, &r);
	expect_identity(&r, data + (_i ? 1 : 0), _i ? len - 1 : len, true, false, NULL);
	st = th_stats(gz);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_TYPE], 1);
	ck_assert_uint_eq(st.pool_gets, 0);
	th_stop(&s);
	th_reply_free(&r);
	mhdgz_free(gz);
	close(fd);
	free(data);
}
END_TEST

/* A file that shrinks after its response was made: the gzip stream cannot
 * be completed, so it must end with an error (libcurl sees an incomplete
 * chunked body), never a complete gzip member of a shorter body. */
START_TEST(file_truncated_gzip_errors)
{
	size_t len = 2 * MIB, cut = _i ? 0 : 256 * KIB + 3;
	uint8_t *data = tu_payload(len, TU_TEXT, 51);
	int fd = th_temp_file(data, len);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;
	uint8_t *dec = NULL, *body = NULL;
	size_t dec_len = 0, body_len = 0, nchunks = 0;
	bool early;

	bfix_file(&f, fd, len, 0, "text/plain");
	th_start(&s, gz, 0, body_route, &f);
	ck_assert_int_eq(ftruncate(fd, (off_t)cut), 0);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", TH_GZIP | TH_RAW, &r);
	ck_assert_msg(r.rc != CURLE_OK, "truncated file: transfer completed (%zu bytes)",
		      r.body_len);
	if (th_dechunk(r.body, r.body_len, &body, &body_len, &nchunks, &early) == 0) {
		/* A properly terminated chunked body would claim completeness. */
		ck_abort_msg("truncated file: chunked body properly terminated");
	}
	/* Whatever chunks arrived must not decode to a complete member. */
	ck_assert(tu_gunzip(r.body, r.body_len, &dec, &dec_len) != 0);
	ck_assert(th_wait(th_pool_back_pred, gz, RELEASE_WAIT_MS));
	th_stop(&s);
	ck_assert_uint_ge(th_stats(gz).failures, 1);
	th_reply_free(&r);
	mhdgz_free(gz);
	close(fd);
	free(data);
}
END_TEST

/* An untyped file is sniffed (its first bytes are there to read): text is
 * compressed, binary is not. Larger than the whole-file limit (1 MiB), so
 * the stream path is what is tested. */
START_TEST(file_untyped_sniffed)
{
	size_t len = 1536 * KIB + 5;
	uint8_t *data = tu_payload(len, _i ? TU_RANDOM : TU_TEXT, 61);
	int fd = th_temp_file(data, len);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;

	bfix_file(&f, fd, len, 0, NULL);
	th_start(&s, gz, 0, body_route, &f);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", TH_GZIP, &r);
	if (_i)
		expect_identity(&r, data, len, true, false, NULL);
	else
		expect_gzip(&r, data, len, NULL);
	th_stop(&s);
	th_reply_free(&r);
	mhdgz_free(gz);
	close(fd);
	free(data);
}
END_TEST


/* A file up to 1 MiB is compressed whole when first queued: a gzip 200
 * with the compressed Content-Length (not chunked), the same on HEAD. */
START_TEST(file_small_whole)
{
	size_t len = 300 * KIB + 7;
	uint8_t *data = tu_payload(len, TU_JSON, 62), *dec = NULL;
	int fd = th_temp_file(data, len);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;
	struct mhdgz_stats st;
	size_t dec_len = 0;
	char want_len[32];
	const char *v;

	bfix_file(&f, fd, len, 0, "application/json");
	th_start(&s, gz, 0, body_route, &f);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", TH_GZIP, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(th_header(&r, "Content-Encoding", NULL), "gzip");
	ck_assert_ptr_null(th_header(&r, "Transfer-Encoding", NULL));
	snprintf(want_len, sizeof want_len, "%zu", r.body_len);
	v = th_header(&r, "Content-Length", NULL);
	ck_assert_msg(v && strcmp(v, want_len) == 0, "Content-Length %s, want %s", v, want_len);
	ck_assert_int_eq(tu_gunzip(r.body, r.body_len, &dec, &dec_len), 0);
	expect_same_bytes(dec, dec_len, data, len, "decoded whole-file gzip body");
	free(dec);
	th_fetch(NULL, s.port, "/", TH_GZIP | TH_HEAD, &r);
	ck_assert_uint_eq(r.body_len, 0);
	v = th_header(&r, "Content-Length", NULL);
	ck_assert_msg(v && strcmp(v, want_len) == 0, "HEAD Content-Length %s, want %s", v,
		      want_len);
	/* A fresh response per request: each is compressed once, whole. */
	st = th_stats(gz);
	ck_assert_uint_eq(st.compressions, 2);
	ck_assert_uint_eq(st.compressed, 2);
	th_stop(&s);
	th_reply_free(&r);
	mhdgz_free(gz);
	close(fd);
	free(data);
}
END_TEST

/* ===================================================================== */
/*                          More edge cases                              */
/* ===================================================================== */

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
	size_t len = 1 * MIB;
	uint8_t *data = tu_payload(len, TU_TEXT, 71), *dec = NULL;
	size_t dec_len = 0;
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;

	bfix_callback(&f, data, len, true, 8192, 8192, "text/plain");
	f.reader = short_read;
	th_start(&s, gz, 0, body_route, &f);
	th_reply_init(&r);
	/* Baseline: libmicrohttpd's own identity response. */
	th_fetch(NULL, s.port, "/", 0, &r);
	ck_assert_msg(r.rc != CURLE_OK, "identity: short body accepted (%zu bytes)", r.body_len);
	th_fetch(NULL, s.port, "/", TH_GZIP, &r);
	if (r.rc == CURLE_OK && tu_gunzip(r.body, r.body_len, &dec, &dec_len) == 0) {
		free(dec);
		ck_abort_msg("gzip: a reader that ended at %zu of %zu announced bytes gave a "
			     "complete gzip member of %zu bytes (transfer OK)",
			     len / 4, len, dec_len);
	}
	expect_released(&s, &f);
	th_stop(&s);
	th_reply_free(&r);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/* Empty bodies: known size 0 is identity (nothing to compress); an
 * unknown size that turns out empty is either identity or one valid gzip
 * member of nothing; an empty file is identity. */
START_TEST(empty_bodies)
{
	static uint8_t none[1];
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;
	int fd = -1;

	if (_i == 2) {
		fd = th_temp_file(none, 0);
		bfix_file(&f, fd, 0, 0, "text/plain");
	} else {
		bfix_callback(&f, none, 0, _i == 0, 4096, 4096, "text/plain");
	}
	th_start(&s, gz, 0, body_route, &f);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", TH_GZIP, &r);
	ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
	ck_assert_int_eq(r.status, 200);
	if (_i == 1 && th_header(&r, "Content-Encoding", NULL)) {
		expect_gzip(&r, none, 0, NULL);
	} else {
		ck_assert(th_header(&r, "Content-Encoding", NULL) == NULL);
		ck_assert_uint_eq(r.body_len, 0);
	}
	if (_i != 2)
		expect_released(&s, &f);
	ck_assert(th_wait(th_pool_back_pred, gz, RELEASE_WAIT_MS));
	th_stop(&s);
	th_reply_free(&r);
	mhdgz_free(gz);
	if (fd >= 0)
		close(fd);
}
END_TEST

/* The ETag policies apply to streams: SUFFIX "x-gzip", DROP none, KEEP
 * unchanged; the identity response keeps "x". */
START_TEST(etag_policies)
{
	static const struct {
		enum mhdgz_etag_policy p;
		const char *want;
	} c[] = {
		{MHDGZ_ETAG_WEAKEN, "W/\"x\""},
		{MHDGZ_ETAG_SUFFIX, "\"x-gzip\""},
		{MHDGZ_ETAG_DROP, NULL},
		{MHDGZ_ETAG_KEEP, "\"x\""},
	};
	size_t len = 100 * KIB;
	uint8_t *data = tu_payload(len, TU_TEXT, 81);
	struct mhdgz_options o;
	struct mhdgz *gz = NULL;
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;

	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.etag_policy = c[_i].p;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	bfix_callback(&f, data, len, _i % 2, 4096, 4096, "text/plain");
	bfix_header(&f, MHD_HTTP_HEADER_ETAG, "\"x\"");
	th_start(&s, gz, 0, body_route, &f);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", TH_GZIP, &r);
	expect_gzip(&r, data, len, c[_i].want);
	th_fetch(NULL, s.port, "/", 0, &r);
	expect_identity(&r, data, len, _i % 2, true, NULL);
	ck_assert_str_eq(th_header(&r, "ETag", NULL), "\"x\"");
	expect_released(&s, &f);
	th_stop(&s);
	th_reply_free(&r);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/* Trailer fields (MHD_add_response_footer) of a chunked response reach the
 * client on the gzip stream as on the identity one. */
START_TEST(trailer_fields_kept)
{
	size_t len = 200 * KIB + 3;
	uint8_t *data = tu_payload(len, TU_TEXT, 83);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;
	const char *v;

	bfix_callback(&f, data, len, false, 4096, 4096, "text/plain");
	f.footer_name = "X-Stream-Check";
	f.footer_value = "done";
	th_start(&s, gz, 0, body_route, &f);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", 0, &r);
	expect_identity(&r, data, len, false, true, NULL);
	v = th_header(&r, "X-Stream-Check", NULL);
	ck_assert_msg(v && strcmp(v, "done") == 0, "identity trailer: %s", v ? v : "(none)");
	th_fetch(NULL, s.port, "/", TH_GZIP, &r);
	expect_gzip(&r, data, len, NULL);
	v = th_header(&r, "X-Stream-Check", NULL);
	ck_assert_msg(v && strcmp(v, "done") == 0, "gzip trailer: %s", v ? v : "(none)");
	expect_released(&s, &f);
	th_stop(&s);
	th_reply_free(&r);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/* An HTTP/1.0 client cannot receive chunked coding: the gzip stream is
 * delimited by closing the connection (RFC 9112 section 6.3), complete and
 * exact. */
START_TEST(http10_client)
{
	size_t len = 400 * KIB + 1;
	uint8_t *data = tu_payload(len, TU_JSON, 85), *dec = NULL;
	size_t dec_len = 0;
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct bfix f;
	const char *v;

	bfix_callback(&f, data, len, _i, 4096, 4096, "application/json");
	th_start(&s, gz, 0, body_route, &f);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", TH_GZIP | TH_HTTP10, &r);
	ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
	ck_assert_int_eq(r.status, 200);
	v = th_header(&r, "Content-Encoding", NULL);
	ck_assert_msg(v && strcmp(v, "gzip") == 0, "Content-Encoding: %s", v ? v : "(none)");
	ck_assert(th_header(&r, "Transfer-Encoding", NULL) == NULL);
	ck_assert(th_header(&r, "Content-Length", NULL) == NULL);
	ck_assert_msg(tu_gunzip(r.body, r.body_len, &dec, &dec_len) == 0,
		      "HTTP/1.0: %zu bytes are not one complete gzip member", r.body_len);
	expect_same_bytes(dec, dec_len, data, len, "HTTP/1.0 gzip body");
	free(dec);
	th_fetch(NULL, s.port, "/", TH_HTTP10, &r);
	expect_same_bytes(r.body, r.body_len, data, len, "HTTP/1.0 identity body");
	expect_released(&s, &f);
	th_stop(&s);
	th_reply_free(&r);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/* ===================================================================== */

Suite *
streaming_body_suite(void)
{
	Suite *s = suite_create("streaming_body");
	TCase *tc;

	tc = tcase_create("roundtrip");
	tcase_set_timeout(tc, CK_CASE_TIMEOUT);
	tcase_add_loop_test(tc, roundtrip_chunk_sizes, 0, (int)(2 * N_ELEMS(rt_cases)));
	tcase_add_loop_test(tc, roundtrip_backends, 0, (int)(2 * N_ELEMS(be_cases)));
	tcase_add_loop_test(tc, roundtrip_irregular_reads, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("decision");
	tcase_set_timeout(tc, CK_CASE_TIMEOUT);
	tcase_add_loop_test(tc, identity_when_not_accepted, 0, (int)(2 * N_ELEMS(not_accepting)));
	tcase_add_test(tc, min_size_known_and_unknown);
	tcase_add_loop_test(tc, untyped_or_skipped_type_identity, 0, (int)N_ELEMS(identity_types));
	tcase_add_loop_test(tc, untyped_stream_sniffed, 0, 3);
	tcase_add_loop_test(tc, header_rules, 0, 7);
	tcase_add_test(tc, stream_stats);
	suite_add_tcase(s, tc);

	tc = tcase_create("file");
	tcase_set_timeout(tc, CK_CASE_TIMEOUT);
	tcase_add_loop_test(tc, file_text, 0, 2);
	tcase_add_loop_test(tc, file_png_identity, 0, 2);
	tcase_add_loop_test(tc, file_truncated_gzip_errors, 0, 2);
	tcase_add_loop_test(tc, file_untyped_sniffed, 0, 2);
	tcase_add_test(tc, file_small_whole);
	suite_add_tcase(s, tc);

	tc = tcase_create("edge");
	tcase_set_timeout(tc, CK_CASE_TIMEOUT);
	tcase_add_test(tc, known_size_reader_ends_early);
	tcase_add_loop_test(tc, empty_bodies, 0, 3);
	tcase_add_loop_test(tc, etag_policies, 0, 4);
	tcase_add_test(tc, trailer_fields_kept);
	tcase_add_loop_test(tc, http10_client, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
