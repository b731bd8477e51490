/* check_hnd_buffer.c: e2e tests of buffer responses over their life: shared responses, memory modes, exact counters, allocation failures, every backend. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "check_suites.h"
#include "info.h"
#include "harness.h"
#include "testutil.h"

/* One response, queued 1,000 times on one keep-alive connection: one compression. */
START_TEST(test_shared_1000)
{
	enum { N = 1000, LEN = 32768 };
	uint8_t *body = tu_payload(LEN, TU_JSON, 26);
	struct th_route rt[] = {
		{ .path = "/s",
		  .status = 200,
		  .body = body,
		  .body_len = LEN,
		  .hdr = { "Content-Type", "application/json" },
		  .flags = TH_RT_SHARED },
	};
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	struct mhdgz_stats st;
	char err[512], ctx[64];
	size_t gz_len = 0;

	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (int i = 0; i < N; i++) {
		snprintf(ctx, sizeof ctx, "request %d", i);
		TH_REQ(h, &s, 0, "/s", th_h_gzip, &rs);
		TH_OK(ctx, th_v_gzip(&rs, 200, body, LEN, TH_E));
		if (i == 0)
			gz_len = rs.body_len;
		ck_assert_msg(rs.body_len == gz_len, "%s: %zu bytes, first was %zu", ctx,
			      rs.body_len, gz_len);
		if (i > 0)
			ck_assert_msg(rs.num_connects == 0, "%s: new connection", ctx);
		th_reply_free(&rs);
	}
	st = th_stats(s.gz);
	ck_assert_uint_eq(st.responses, N);
	ck_assert_uint_eq(st.compressions, 1);
	ck_assert_uint_eq(st.cache_hits, N - 1);
	ck_assert_uint_eq(st.compressed, N);
	ck_assert_uint_eq(st.reasons[MHDGZ_COMPRESSED], N);
	ck_assert_uint_eq(st.bytes_in, (uint64_t)N * LEN);
	ck_assert_uint_eq(st.bytes_out, (uint64_t)N * gz_len);
	ck_assert_uint_eq(st.coded_bytes_in[MHDGZ_CODING_GZIP], (uint64_t)N * LEN);
	ck_assert_uint_eq(st.coded_bytes_out[MHDGZ_CODING_GZIP], (uint64_t)N * gz_len);
	ck_assert_uint_eq(st.failures, 0);
	th_site_done(&s, h, body);
}
END_TEST

/* MHD_RESPMEM_PERSISTENT, MUST_COPY and MUST_FREE, per-request and shared (loop over modes). */
START_TEST(test_memory_modes)
{
	static const enum MHD_ResponseMemoryMode modes[] = { MHD_RESPMEM_PERSISTENT,
							     MHD_RESPMEM_MUST_COPY,
							     MHD_RESPMEM_MUST_FREE };
	uint8_t *body = tu_payload(10000, TU_TEXT, 27);
	uint8_t *small = tu_payload(500, TU_TEXT, 28);
	struct th_route rt[] = {
		{ .path = "/m",
		  .status = 200,
		  .body = body,
		  .body_len = 10000,
		  .mode = modes[_i],
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/ms",
		  .status = 200,
		  .body = body,
		  .body_len = 10000,
		  .mode = modes[_i],
		  .hdr = { "Content-Type", "text/plain" },
		  .flags = TH_RT_SHARED },
		{ .path = "/small",
		  .status = 200,
		  .body = small,
		  .body_len = 500,
		  .mode = modes[_i],
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/empty",
		  .status = 200,
		  .body = NULL,
		  .body_len = 0,
		  .mode = modes[_i],
		  .hdr = { "Content-Type", "text/plain" } },
	};
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	char err[512], ctx[64];

	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (int n = 0; n < 3; n++) {
		for (int p = 0; p < 2; p++) {
			const char *path = p ? "/ms" : "/m";

			snprintf(ctx, sizeof ctx, "mode %d %s gzip", _i, path);
			TH_REQ(h, &s, 0, path, th_h_gzip, &rs);
			TH_OK(ctx, th_v_gzip(&rs, 200, body, 10000, TH_E));
			th_reply_free(&rs);
			snprintf(ctx, sizeof ctx, "mode %d %s identity", _i, path);
			TH_REQ(h, &s, 0, path, NULL, &rs);
			TH_OK(ctx, th_v_identity(&rs, 200, body, 10000, TH_E));
			th_reply_free(&rs);
		}
		TH_REQ(h, &s, 0, "/small", th_h_gzip, &rs);
		TH_OK("small", th_v_identity(&rs, 200, small, 500, TH_E));
		th_reply_free(&rs);
		TH_REQ(h, &s, 0, "/empty", th_h_gzip, &rs);
		TH_OK("empty", th_v_identity(&rs, 200, "", 0, TH_E));
		th_reply_free(&rs);
	}
	ck_assert_uint_eq(th_stats(s.gz).reasons[MHDGZ_SKIP_EMPTY], 3);
	ck_assert_uint_eq(s.errors, 0);
	th_site_done(&s, h, body);
	free(small);
}
END_TEST

/* Exact counters after a known sequence of requests. */
START_TEST(test_stats_sequence)
{
	uint8_t *text = tu_payload(5000, TU_TEXT, 30);
	uint8_t *rnd = tu_payload(6000, TU_RANDOM, 30);
	struct th_route rt[] = {
		{ .path = "/g",
		  .status = 200,
		  .body = text,
		  .body_len = 5000,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/sm",
		  .status = 200,
		  .body = text,
		  .body_len = 500,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/png",
		  .status = 200,
		  .body = text,
		  .body_len = 4000,
		  .hdr = { "Content-Type", "image/png" } },
		{ .path = "/nt",
		  .status = 200,
		  .body = text,
		  .body_len = 4000,
		  .hdr = { "Content-Type", "text/plain", "Cache-Control", "no-transform" } },
		{ .path = "/rnd",
		  .status = 200,
		  .body = rnd,
		  .body_len = 6000,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/204", .status = 204, .body = NULL, .body_len = 0 },
		{ .path = "/br",
		  .status = 200,
		  .body = text,
		  .body_len = 3000,
		  .hdr = { "Content-Type", "text/plain", "Content-Encoding", "br" } },
		{ .path = "/206",
		  .status = 206,
		  .body = text,
		  .body_len = 3000,
		  .hdr = { "Content-Type", "text/plain", "Content-Range", "bytes 0-2999/5000" } },
		{ .path = "/opt",
		  .status = 200,
		  .body = text,
		  .body_len = 3000,
		  .hdr = { "Content-Type", "text/plain" },
		  .flags = TH_RT_IDENTITY },
		{ .path = "/u",
		  .status = 200,
		  .body = text,
		  .body_len = 3000,
		  .hdr = { "Content-Type", "text/plain" },
		  .flags = TH_RT_UNTRACKED },
		{ .path = "/e",
		  .status = 200,
		  .body = NULL,
		  .body_len = 0,
		  .hdr = { "Content-Type", "text/plain" } },
	};
	static const struct {
		const char *path;
		int ae;
		enum mhdgz_reason why;
	} seq[] = {
		{ "/g", 1, MHDGZ_COMPRESSED },         { "/g", 1, MHDGZ_COMPRESSED },
		{ "/g", 1, MHDGZ_COMPRESSED },         { "/g", 0, MHDGZ_SKIP_NOT_ACCEPTED },
		{ "/g", 0, MHDGZ_SKIP_NOT_ACCEPTED },  { "/sm", 1, MHDGZ_SKIP_SMALL },
		{ "/png", 1, MHDGZ_SKIP_TYPE },        { "/nt", 1, MHDGZ_SKIP_NO_TRANSFORM },
		{ "/rnd", 1, MHDGZ_SKIP_NOT_SMALLER }, { "/204", 1, MHDGZ_SKIP_STATUS },
		{ "/br", 1, MHDGZ_SKIP_ENCODED },      { "/206", 1, MHDGZ_SKIP_RANGE },
		{ "/opt", 1, MHDGZ_SKIP_OPT_OUT },     { "/u", 1, MHDGZ_SKIP_UNTRACKED },
		{ "/e", 1, MHDGZ_SKIP_EMPTY },
	};
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	struct mhdgz_stats st;
	uint64_t want[MHDGZ_REASON_COUNT] = { 0 };
	uint64_t in = 0, out = 0;

	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (size_t i = 0; i < N_ELEMS(seq); i++) {
		TH_REQ(h, &s, 0, seq[i].path, seq[i].ae ? th_h_gzip : NULL, &rs);
		want[seq[i].why]++;
		st = th_stats(s.gz);
		th_expect_reasons(&st, want);
		ck_assert_uint_eq(st.responses, i + 1);
		th_reply_free(&rs);
	}
	st = th_stats(s.gz);
	ck_assert_uint_eq(st.compressed, 3);
	ck_assert_uint_eq(st.cache_hits, 0);
	ck_assert_uint_eq(st.failures, 0);
	/* Three gzip bodies built; the random one may count as a fourth
	 * (built, then discarded as not smaller): the header leaves it open. */
	ck_assert_msg(st.compressions == 3 || st.compressions == 4, "compressions %llu",
		      (unsigned long long)st.compressions);
	th_site_stop(&s);

	/* Bytes, on a sequence where their meaning is unambiguous. */
	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (int i = 0; i < 4; i++) {
		TH_REQ(h, &s, 0, "/g", (i & 1) ? NULL : th_h_gzip, &rs);
		in += 5000;
		out += rs.body_len;
		th_reply_free(&rs);
	}
	st = th_stats(s.gz);
	ck_assert_uint_eq(st.bytes_in, in);
	ck_assert_uint_eq(st.bytes_out, out);
	ck_assert_uint_eq(st.compressions, 2);
	th_site_stop(&s);
	curl_easy_cleanup(h);
	free(text);
	free(rnd);
}
END_TEST

/*
 * Allocation failures during requests (loop: backend and pooled/unpooled
 * x PERSISTENT/MUST_COPY/MUST_FREE). The counting allocator is installed
 * while nothing is live, then re-armed before each request so that its
 * k-th allocation fails, for k = 1, 2, ... until a request completes
 * without reaching the k-th allocation. Every response must be the exact
 * identity body or gzip that decodes to it (or a 500 from the application
 * when creating the response itself failed); the counters must say so;
 * nothing may leak.
 */
START_TEST(test_faults)
{
	static const enum MHD_ResponseMemoryMode modes[] = { MHD_RESPMEM_PERSISTENT,
							     MHD_RESPMEM_MUST_COPY,
							     MHD_RESPMEM_MUST_FREE };
	uint8_t *body = tu_payload(30000, TU_TEXT, 31);
	struct th_route rt[] = {
		{ .path = "/f",
		  .status = 200,
		  .body = body,
		  .body_len = 30000,
		  .mode = modes[_i % 3],
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"f\"" } },
	};
	struct mhdgz_options o = th_opts();
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	struct mhdgz_stats st0, st1;
	char err[512], ctx[64];
	uint64_t k, fired_count = 0, errors = 0;
	static const struct {
		enum mhdgz_backend be;
		unsigned int flags;
	} cfg[] = {
		{ MHDGZ_BACKEND_DEFAULT, 0 },
		{ MHDGZ_BACKEND_DEFAULT, MHDGZ_F_NO_POOL },
		{ MHDGZ_BACKEND_ZLIB, 0 },
		{ MHDGZ_BACKEND_ZLIB, MHDGZ_F_NO_POOL },
		{ MHDGZ_BACKEND_ISAL, MHDGZ_F_NO_POOL },
	};

	if (!tu_backend_available(cfg[_i / 3].be)) {
		curl_easy_cleanup(h);
		free(body);
		return;
	}
	o.gzip.backend = cfg[_i / 3].be;
	o.flags = cfg[_i / 3].flags;
	tu_alloc_install(0);
	th_site_start(&s, &o, rt, N_ELEMS(rt), 0);
	for (k = 1; k <= 2000; k++) {
		unsigned long cf0 = s.create_failures;
		int fired;

		snprintf(ctx, sizeof ctx, "k=%llu", (unsigned long long)k);
		st0 = th_stats(s.gz);
		tu_alloc_fail_at(k);
		TH_REQ(h, &s, 0, "/f", th_h_gzip, &rs);
		fired = tu_alloc_failed();
		tu_alloc_fail_at(0);
		st1 = th_stats(s.gz);
		fired_count += fired != 0;
		if (s.create_failures != cf0) {
			ck_assert_msg(fired, "%s: creation failed without an injected failure",
				      ctx);
			ck_assert_int_eq(rs.status, 500);
			ck_assert_uint_eq(st1.responses, st0.responses);
		} else if (th_header(&rs, "Content-Encoding", NULL)) {
			TH_OK(ctx, th_v_gzip(&rs, 200, body, 30000, TH_E));
			TH_OK(ctx, th_v_etag(&rs, "W/\"f\"", TH_E));
			ck_assert_uint_eq(st1.responses, st0.responses + 1);
			ck_assert_uint_eq(st1.compressed, st0.compressed + 1);
			ck_assert_uint_eq(st1.reasons[MHDGZ_COMPRESSED],
					  st0.reasons[MHDGZ_COMPRESSED] + 1);
			ck_assert_uint_eq(st1.failures, st0.failures);
		} else {
			TH_OK(ctx, th_v_identity(&rs, 200, body, 30000, TH_E));
			TH_OK(ctx, th_v_etag(&rs, "\"f\"", TH_E));
			ck_assert_msg(fired, "%s: identity without an injected failure", ctx);
			ck_assert_uint_eq(st1.responses, st0.responses + 1);
			ck_assert_uint_eq(st1.reasons[MHDGZ_SKIP_ERROR],
					  st0.reasons[MHDGZ_SKIP_ERROR] + 1);
			ck_assert_uint_eq(st1.failures, st0.failures + 1);
			errors++;
		}
		th_reply_free(&rs);
		if (!fired)
			break;
	}
	ck_assert_msg(k <= 2000, "still failing after 2000 allocations per request");
	ck_assert_msg(fired_count > 0, "no injected failure fired");
	ck_assert_msg(errors > 0 || s.create_failures > 0, "no failure was observable");
	st1 = th_stats(s.gz);
	ck_assert_uint_eq(st1.failures, st1.reasons[MHDGZ_SKIP_ERROR]);
	ck_assert_uint_eq(st1.reasons[MHDGZ_SKIP_ERROR], errors);
	/* After the storm, a normal request still compresses. */
	TH_REQ(h, &s, 0, "/f", th_h_gzip, &rs);
	TH_OK("after", th_v_gzip(&rs, 200, body, 30000, TH_E));
	th_reply_free(&rs);
	ck_assert_uint_eq(s.errors, 0);
	curl_easy_cleanup(h);
	th_site_stop(&s);
	ck_assert_msg(tu_alloc_live() == 0, "%lld blocks leaked", (long long)tu_alloc_live());
	tu_alloc_uninstall();
	free(body);
}
END_TEST

/* Every backend at its edge and default levels x sizes, per-request and
 * shared: each gzip body decodes to the original (loop over configs). */
static const struct {
	enum mhdgz_backend be;
	int level;
	unsigned int flags;
} be_cfg[] = {
	{ MHDGZ_BACKEND_ZLIB, 1, 0 },
	{ MHDGZ_BACKEND_ZLIB, 6, 0 },
	{ MHDGZ_BACKEND_ZLIB, 9, MHDGZ_F_NO_POOL },
	{ MHDGZ_BACKEND_LIBDEFLATE, 1, 0 },
	{ MHDGZ_BACKEND_LIBDEFLATE, 6, 0 },
	{ MHDGZ_BACKEND_LIBDEFLATE, 12, MHDGZ_F_NO_POOL },
	{ MHDGZ_BACKEND_ISAL, 1, 0 },
	{ MHDGZ_BACKEND_ISAL, 2, 0 },
	{ MHDGZ_BACKEND_ISAL, 4, MHDGZ_F_NO_POOL },
};

START_TEST(test_backends)
{
	static const size_t sizes[] = { 1024, 65536 + 7, 1024 * 1024 + 3 };
	uint8_t *bodies[N_ELEMS(sizes)];
	struct th_route rt[2 * N_ELEMS(sizes)];
	char paths[2 * N_ELEMS(sizes)][32];
	struct mhdgz_options o = th_opts();
	struct th_site s;
	CURL *h;
	struct th_reply rs = { 0 };
	char err[512], ctx[128];

	if (!tu_backend_available(be_cfg[_i].be))
		return;
	o.gzip.backend = be_cfg[_i].be;
	o.gzip.level = be_cfg[_i].level;
	o.flags = be_cfg[_i].flags;
	memset(rt, 0, sizeof rt);
	for (size_t i = 0; i < N_ELEMS(sizes); i++) {
		bodies[i] = tu_payload(sizes[i], (i & 1) ? TU_JSON : TU_TEXT, (uint32_t)(40 + i));
		for (int sh = 0; sh < 2; sh++) {
			struct th_route *r = &rt[2 * i + (size_t)sh];

			snprintf(paths[2 * i + (size_t)sh], sizeof paths[0], "/b/%zu/%d", i, sh);
			r->path = paths[2 * i + (size_t)sh];
			r->status = 200;
			r->body = bodies[i];
			r->body_len = sizes[i];
			r->hdr[0] = "Content-Type";
			r->hdr[1] = (i & 1) ? "application/json" : "text/plain";
			r->flags = sh ? TH_RT_SHARED : 0;
		}
	}
	th_site_start(&s, &o, rt, N_ELEMS(rt), 0);
	h = th_curl_new();
	for (int n = 0; n < 2; n++) {
		for (size_t i = 0; i < N_ELEMS(rt); i++) {
			snprintf(ctx, sizeof ctx, "%s level %d %s #%d",
				 tu_backend_name(o.gzip.backend), o.gzip.level, rt[i].path, n);
			TH_REQ(h, &s, 0, rt[i].path, th_h_gzip, &rs);
			TH_OK(ctx, th_v_gzip(&rs, 200, rt[i].body, rt[i].body_len, TH_E));
			th_reply_free(&rs);
		}
	}
	ck_assert_uint_eq(th_stats(s.gz).failures, 0);
	curl_easy_cleanup(h);
	th_site_stop(&s);
	for (size_t i = 0; i < N_ELEMS(sizes); i++)
		free(bodies[i]);
}
END_TEST

/* Responses that outlive the handle: a long-lived
 * buffer response with its cached gzip representation and a callback
 * response, both destroyed after MHD_stop_daemon() and mhdgz_free(), in
 * the README's teardown order. On the wire (raw socket, pipelined): gzip,
 * identity and HEAD answers on one connection; after mhdgz_free() the
 * response still serves its identity bytes through plain libmicrohttpd
 * (MHD_queue_response on a new daemon, two pipelined GETs). Nothing
 * crashes (ASan), the handle's memory goes with the last response (the
 * counting allocator sees every mhdgz block freed then, not before), and
 * the reader's free callback runs once. */
static struct MHD_Response *outlive_r;
static int outlive_freed;

static ssize_t
outlive_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)cls;
	(void)pos;
	(void)buf;
	(void)max;
	return MHD_CONTENT_READER_END_OF_STREAM;
}

static void
outlive_free(void *cls)
{
	*(int *)cls += 1;
}

static enum MHD_Result
outlive_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	(void)url;
	return mhdgz_queue_response_ex(s->gz, c, TU_REQ(method), MHD_HTTP_OK, outlive_r, NULL);
}

/* The same response queued by plain libmicrohttpd, no handle involved. */
static enum MHD_Result
outlive_plain_route(struct th_server *s, struct MHD_Connection *c, const char *url,
		    const char *method)
{
	(void)s;
	(void)url;
	(void)method;
	return MHD_queue_response(c, MHD_HTTP_OK, outlive_r);
}

/* Reads one response from fd and checks its body: gzip (decoded) or
 * identity, byte for byte; HEAD: none, with the GET's Content-Length. */
static void
outlive_expect(int fd, bool head, bool gzip, const uint8_t *body, size_t len, const char *ctx)
{
	struct th_raw_response r;
	const uint8_t *b;
	size_t blen;

	ck_assert_msg(th_raw_read_response(fd, head, 30000, &r) == 0, "%s: incomplete", ctx);
	ck_assert_msg(r.status == 200, "%s: status %d", ctx, r.status);
	th_raw_expect_field(&r, "Content-Encoding", gzip ? "gzip" : NULL, ctx);
	th_raw_expect_field(&r, "Transfer-Encoding", NULL, ctx);
	b = r.bytes + r.body_off;
	blen = r.len - r.body_off;
	if (head) {
		ck_assert_msg(blen == 0, "%s: %zu bytes after the HEAD's head", ctx, blen);
	} else if (gzip) {
		uint8_t *dec = NULL;
		size_t dec_len = 0;
		char cl[32];

		ck_assert_int_eq(tu_gunzip(b, blen, &dec, &dec_len), 0);
		ck_assert_msg(dec_len == len && memcmp(dec, body, len) == 0, "%s: body differs",
			      ctx);
		snprintf(cl, sizeof cl, "%zu", blen);
		th_raw_expect_field(&r, "Content-Length", cl, ctx);
		free(dec);
	} else {
		ck_assert_msg(blen == len && memcmp(b, body, len) == 0, "%s: body differs", ctx);
	}
	th_raw_response_free(&r);
}

START_TEST(test_handle_outlived)
{
	enum { LEN = 32768 };
	uint8_t *body = tu_payload(LEN, TU_JSON, 12);
	struct mhdgz *gz;
	struct MHD_Response *cb;
	struct th_server s = { 0 };
	static const char req[] = "GET / HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n"
				  "GET / HTTP/1.1\r\nHost: t\r\n\r\n"
				  "HEAD / HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n";
	static const char req_plain[] =
		"GET / HTTP/1.1\r\nHost: t\r\n\r\n"
		"GET / HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n";
	int fd;

	tu_alloc_install(0);
	gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	outlive_r = mhdgz_response_from_buffer(gz, LEN, body, MHD_RESPMEM_PERSISTENT);
	ck_assert_ptr_nonnull(outlive_r);
	ck_assert_int_eq(MHD_add_response_header(outlive_r, "Content-Type", "application/json"),
			 MHD_YES);
	outlive_freed = 0;
	cb = mhdgz_response_from_callback(gz, MHD_SIZE_UNKNOWN, 1024, outlive_read, &outlive_freed,
					  outlive_free);
	ck_assert_ptr_nonnull(cb);
	th_start(&s, gz, 0, outlive_route, NULL);
	fd = th_raw_connect(s.port);
	th_raw_send(fd, req, strlen(req));
	outlive_expect(fd, false, true, body, LEN, "gzip GET");
	outlive_expect(fd, false, false, body, LEN, "identity GET");
	outlive_expect(fd, true, true, body, LEN, "gzip HEAD");
	th_raw_expect_idle(fd, 200, "after the HEAD");
	close(fd);
	th_stop(&s);
	mhdgz_free(gz); /* the responses keep the handle alive */
	ck_assert_int_gt(tu_alloc_live(), 0);
	MHD_destroy_response(cb);
	ck_assert_int_eq(outlive_freed, 1);
	ck_assert_int_gt(tu_alloc_live(), 0);
	/* Still a plain libmicrohttpd response: identity bytes for anyone. */
	th_start(&s, NULL, 0, outlive_plain_route, NULL);
	fd = th_raw_connect(s.port);
	th_raw_send(fd, req_plain, strlen(req_plain));
	outlive_expect(fd, false, false, body, LEN, "plain GET after mhdgz_free");
	outlive_expect(fd, false, false, body, LEN, "plain gzip-accepting GET after mhdgz_free");
	th_raw_expect_idle(fd, 200, "after the plain GETs");
	close(fd);
	th_stop(&s);
	ck_assert_int_gt(tu_alloc_live(), 0);
	MHD_destroy_response(outlive_r); /* the last one: the handle goes too */
	ck_assert_int_eq(tu_alloc_live(), 0);
	tu_alloc_uninstall();
	free(body);
}
END_TEST

/* ===================================================================== */

struct ck_case
hnd_buffer_case(void)
{
	return (struct ck_case){ "lifecycle",
				 CK_CASE_TIMEOUT,
				 { { test_shared_1000, 0, 0 },
				   { test_memory_modes, 0, 3 },
				   { test_stats_sequence, 0, 0 },
				   { test_faults, 0, 15 },
				   { test_backends, 0, (int)N_ELEMS(be_cfg) },
				   { test_handle_outlived, 0, 0 } } };
}
