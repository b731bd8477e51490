/* check_hnd_stream_roundtrip.c: streaming round trips through the handler over reader chunk sizes, backends and irregular reads (suite streaming_body, case roundtrip). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "info.h"
#include "stream_harness.h"
#include "testutil.h"

/* Reader chunk size (also the block size) and body size: from 1 byte per
 * call to 1 MiB, bodies of a few hundred KiB to a few MiB, odd lengths. */
static const struct {
	size_t chunk;
	size_t len;
} rt_cases[] = {
	{ 1, 300 * KIB + 1 },   { 7, 600 * KIB + 3 },   { 100, 1 * MIB + 7 },
	{ 4096, 2 * MIB + 11 }, { 65536, 3 * MIB + 5 }, { 1 * MIB, 4 * MIB + 12345 },
};

/* _i: case * 2 + known. */
START_TEST(roundtrip_chunk_sizes)
{
	size_t ci = (size_t)_i / 2;
	bool known = _i % 2;
	size_t len = rt_cases[ci].len, chunk = rt_cases[ci].chunk;
	uint8_t *data = tu_payload(len, ci % 2 ? TU_JSON : TU_TEXT, (uint32_t)_i + 1);
	struct st_test t;
	struct bfix f;
	CURL *h = th_curl_new();

	bfix_callback(&f, data, len, known, chunk, chunk, "text/plain; charset=utf-8");
	bfix_header(&f, MHD_HTTP_HEADER_ETAG, "\"v1\"");
	st_begin(&t, th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0), data, len, body_route, &f);

	/* Twice over one keep-alive connection, then identity. */
	th_fetch(h, t.s.port, "/", TH_GZIP, &t.r);
	expect_gzip(&t.r, data, len, "W/\"v1\"");
	th_fetch(h, t.s.port, "/", TH_GZIP, &t.r);
	expect_gzip(&t.r, data, len, "W/\"v1\"");
	th_fetch(h, t.s.port, "/", 0, &t.r);
	expect_identity(&t.r, data, len, known, true, NULL);
	ck_assert_str_eq(th_header(&t.r, "ETag", NULL), "\"v1\"");

	expect_released(&t.s, &f);
	th_stop(&t.s);
	ck_assert_uint_eq(atomic_load(&f.src.frees), 3);
	curl_easy_cleanup(h);
	st_end(&t);
}
END_TEST

/* Every streaming backend at its lowest and highest level (libdeflate
 * hands streams to zlib). _i: case * 2 + known. */
static const struct {
	enum mhdgz_backend be;
	int level;
	unsigned int flags;
} be_cases[] = {
	{ MHDGZ_BACKEND_ZLIB, 1, 0 },
	{ MHDGZ_BACKEND_ZLIB, 9, 0 },
	{ MHDGZ_BACKEND_LIBDEFLATE, 1, 0 },
	{ MHDGZ_BACKEND_LIBDEFLATE, 12, 0 },
	{ MHDGZ_BACKEND_ISAL, 1, 0 },
	{ MHDGZ_BACKEND_ISAL, 4, 0 },
	{ MHDGZ_BACKEND_ZLIB, 6, MHDGZ_F_NO_POOL },
};

START_TEST(roundtrip_backends)
{
	size_t ci = (size_t)_i / 2, len = 1 * MIB + 333;
	uint8_t *data;
	struct st_test t;
	struct bfix f;

	if (!tu_backend_available(be_cases[ci].be))
		return;
	data = tu_payload(len, TU_TEXT, 77);
	bfix_callback(&f, data, len, _i % 2, 4096, 4096, "application/json");
	st_begin(&t, st_gz_new(be_cases[ci].be, be_cases[ci].level, be_cases[ci].flags), data, len,
		 body_route, &f);
	st_get(&t, TH_GZIP);
	expect_gzip(&t.r, t.data, len, NULL);
	ck_assert_msg(t.r.body_len < len / 2, "%zu gzip bytes for %zu of text", t.r.body_len, len);
	expect_released(&t.s, &f);
	st_end(&t);
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
	struct st_test t;
	struct bfix f;

	bfix_callback(&f, data, len, known, 0, 4096, "text/html");
	f.reader = irregular_read;
	st_begin(&t, th_gz_new(MHDGZ_BACKEND_ZLIB, 6, 0), data, len, body_route, &f);
	st_get(&t, TH_GZIP);
	expect_gzip(&t.r, t.data, len, NULL);
	st_get(&t, 0);
	expect_identity(&t.r, t.data, len, known, true, NULL);
	expect_released(&t.s, &f);
	st_end(&t);
}
END_TEST

struct ck_case
stream_roundtrip_case(void)
{
	return (struct ck_case){ "roundtrip",
				 CK_CASE_TIMEOUT,
				 { { roundtrip_chunk_sizes, 0, (int)(2 * N_ELEMS(rt_cases)) },
				   { roundtrip_backends, 0, (int)(2 * N_ELEMS(be_cases)) },
				   { roundtrip_irregular_reads, 0, 2 } } };
}
