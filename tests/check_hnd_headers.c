/* check_hnd_headers.c: e2e tests of the handler's header rewriting on buffer responses: gzip and identity, Vary merging, 204/304, HEAD, header case. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "check_suites.h"
#include "harness.h"
#include "testutil.h"

/* gzip accepted: Content-Encoding, Content-Length, Vary, no Accept-Ranges,
 * headers kept; then identity for a client without Accept-Encoding. */
START_TEST(test_gzip_basic)
{
	uint8_t *body = tu_payload(8192, TU_TEXT, 11);
	struct th_route rt[] = {
		{ .path = "/t",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "Content-Type", "text/html; charset=utf-8", "Accept-Ranges", "bytes",
			   "X-Custom", "kept", "Cache-Control", "max-age=60" } },
		{ .path = "/many",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain",  "Set-Cookie", "a=1",
			   "X-H0",         "v0",          "X-H1",       "v1",
			   "Set-Cookie",   "b=2; Path=/", "X-H2",       "v2",
			   "X-H3",         "v3",          "Link",       "</a>; rel=preload",
			   "X-H4",         "v4",          "X-H5",       "v5",
			   "X-H6",         "v6",          "Link",       "</b>; rel=preload",
			   "X-H7",         "v7",          "X-H8",       "v8",
			   "Set-Cookie",   "c=3",         "X-H9",       "v9",
			   "X-H10",        "v10",         "X-H11",      "v11" } },
	};
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	struct mhdgz_stats st;
	char err[512];

	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	/* Every other header is copied to the gzip variant, repeated fields
	 * (Set-Cookie cannot be combined, RFC 9110 5.3) included. */
	for (int ae = 1; ae >= 0; ae--) {
		TH_REQ(h, &s, 0, "/many", ae ? th_h_gzip : NULL, &rs);
		if (ae)
			TH_OK("many", th_v_gzip(&rs, 200, body, 8192, TH_E));
		else
			TH_OK("many", th_v_identity(&rs, 200, body, 8192, TH_E));
		ck_assert_int_eq(th_hdr_count(&rs, "Set-Cookie"), 3);
		ck_assert_int_eq(th_hdr_count(&rs, "Link"), 2);
		for (size_t i = 0, n = 0; i < rs.nhdr; i++) {
			if (strcasecmp(rs.hdr_name[i], "Set-Cookie") == 0) {
				static const char *const want[] = { "a=1", "b=2; Path=/", "c=3" };

				ck_assert_str_eq(rs.hdr_value[i], want[n]);
				n++;
			}
		}
		for (int i = 0; i < 12; i++) {
			char name[16], val[16];

			snprintf(name, sizeof name, "X-H%d", i);
			snprintf(val, sizeof val, "v%d", i);
			ck_assert_int_eq(th_hdr_count(&rs, name), 1);
			ck_assert_str_eq(th_header(&rs, name, NULL), val);
		}
		th_reply_free(&rs);
	}
	TH_REQ(h, &s, 0, "/t", th_h_gzip, &rs);
	TH_OK("gzip", th_v_gzip(&rs, 200, body, 8192, TH_E));
	TH_OK("gzip", th_v_vary_ae(&rs, NULL, TH_E));
	ck_assert_ptr_null(th_header(&rs, "Accept-Ranges", NULL));
	ck_assert_str_eq(th_header(&rs, "Content-Type", NULL), "text/html; charset=utf-8");
	ck_assert_str_eq(th_header(&rs, "X-Custom", NULL), "kept");
	ck_assert_str_eq(th_header(&rs, "Cache-Control", NULL), "max-age=60");
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/t", NULL, &rs);
	TH_OK("identity", th_v_identity(&rs, 200, body, 8192, TH_E));
	TH_OK("identity", th_v_vary_ae(&rs, NULL, TH_E));
	ck_assert_ptr_nonnull(th_header(&rs, "Accept-Ranges", NULL));
	ck_assert_str_eq(th_header(&rs, "Accept-Ranges", NULL), "bytes");
	ck_assert_str_eq(th_header(&rs, "X-Custom", NULL), "kept");
	ck_assert_int_eq(rs.num_connects, 0);
	th_reply_free(&rs);

	st = th_stats(s.gz);
	ck_assert_uint_eq(st.responses, 4);
	ck_assert_uint_eq(st.compressed, 2);
	ck_assert_uint_eq(st.reasons[MHDGZ_COMPRESSED], 2);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_NOT_ACCEPTED], 2);
	ck_assert_uint_eq(s.errors, 0);
	th_site_done(&s, h, body);
}
END_TEST

/* Vary merged into the application's Vary: one field, no duplicates, for
 * per-request and shared responses, gzip and identity alike. */
START_TEST(test_vary_merge)
{
	uint8_t *body = tu_payload(6000, TU_TEXT, 12);
	struct th_route rt[] = {
		{ .path = "/o",
		  .status = 200,
		  .body = body,
		  .body_len = 6000,
		  .hdr = { "Content-Type", "text/plain", "Vary", "Origin" } },
		{ .path = "/so",
		  .status = 200,
		  .body = body,
		  .body_len = 6000,
		  .hdr = { "Content-Type", "text/plain", "Vary", "Origin" },
		  .flags = TH_RT_SHARED },
		{ .path = "/ae",
		  .status = 200,
		  .body = body,
		  .body_len = 6000,
		  .hdr = { "Content-Type", "text/plain", "Vary", "accept-encoding" } },
		{ .path = "/sae",
		  .status = 200,
		  .body = body,
		  .body_len = 6000,
		  .hdr = { "Content-Type", "text/plain", "Vary", "accept-encoding" },
		  .flags = TH_RT_SHARED },
		{ .path = "/two",
		  .status = 200,
		  .body = body,
		  .body_len = 6000,
		  .hdr = { "Content-Type", "text/plain", "Vary", "Origin, Cookie" } },
		{ .path = "/mix",
		  .status = 200,
		  .body = body,
		  .body_len = 6000,
		  .hdr = { "Content-Type", "text/plain", "Vary", "Origin, ACCEPT-ENCODING" } },
		{ .path = "/lines",
		  .status = 200,
		  .body = body,
		  .body_len = 6000,
		  .hdr = { "Content-Type", "text/plain", "Vary", "Origin", "Vary", "Cookie" } },
	};
	static const char *const origin[] = { "Origin", NULL };
	static const char *const origin_cookie[] = { "Origin", "Cookie", NULL };
	static const struct {
		const char *path;
		const char *const *extra;
	} cases[] = {
		{ "/o", origin },
		{ "/so", origin },
		{ "/ae", NULL },
		{ "/sae", NULL },
		{ "/two", origin_cookie },
		{ "/mix", origin },
		{ "/lines", origin_cookie }, /* two Vary lines become one field */
	};
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	char err[512], ctx[128];

	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (size_t i = 0; i < N_ELEMS(cases); i++) {
		/* gzip, identity, gzip, identity: the shared ones must not grow. */
		for (int n = 0; n < 4; n++) {
			int gz = (n % 2) == 0;

			snprintf(ctx, sizeof ctx, "%s %s #%d", cases[i].path,
				 gz ? "gzip" : "identity", n);
			TH_REQ(h, &s, 0, cases[i].path, gz ? th_h_gzip : NULL, &rs);
			if (gz)
				TH_OK(ctx, th_v_gzip(&rs, 200, body, 6000, TH_E));
			else
				TH_OK(ctx, th_v_identity(&rs, 200, body, 6000, TH_E));
			TH_OK(ctx, th_v_vary_ae(&rs, cases[i].extra, TH_E));
			th_reply_free(&rs);
		}
	}
	ck_assert_uint_eq(s.errors, 0);
	th_site_done(&s, h, body);
}
END_TEST

/* Clients that do not accept gzip get the identity body, with Vary, from
 * a handler offering gzip alone. */
START_TEST(test_not_accepted)
{
	static const char *const aes[][3] = {
		{ NULL },
		{ "Accept-Encoding: identity", NULL },
		{ "Accept-Encoding: br, deflate", NULL },
		{ "Accept-Encoding: gzip;q=0", NULL },
		{ "Accept-Encoding: *;q=0", NULL },
		{ "Accept-Encoding: gzip;q=0, *", NULL },
		{ "Accept-Encoding: identity;q=1, x-gzip;q=0", NULL },
		{ "Accept-Encoding: deflate", "Accept-Encoding: gzip;q=0", NULL },
		{ "Accept-Encoding:", NULL },
	};
	uint8_t *body = tu_payload(9000, TU_TEXT, 14);
	struct th_route rt[] = {
		{ .path = "/t",
		  .status = 200,
		  .body = body,
		  .body_len = 9000,
		  .hdr = { "Content-Type", "text/plain" } },
	};
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	struct mhdgz_stats st;
	struct mhdgz_options o = th_opts();
	char err[512], ctx[128];

	/* gzip alone: "*" is then gzip, which "gzip;q=0" refuses. */
	o.codings = "gzip";
	th_site_start(&s, &o, rt, N_ELEMS(rt), 0);
	for (size_t i = 0; i < N_ELEMS(aes); i++) {
		snprintf(ctx, sizeof ctx, "'%s' '%s'", aes[i][0] ? aes[i][0] : "(none)",
			 aes[i][0] && aes[i][1] ? aes[i][1] : "");
		TH_REQ(h, &s, 0, "/t", aes[i], &rs);
		TH_OK(ctx, th_v_identity(&rs, 200, body, 9000, TH_E));
		TH_OK(ctx, th_v_vary_ae(&rs, NULL, TH_E));
		th_reply_free(&rs);
	}
	st = th_stats(s.gz);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_NOT_ACCEPTED], N_ELEMS(aes));
	ck_assert_uint_eq(st.compressed, 0);
	th_site_done(&s, h, body);
}
END_TEST

/* 204 and 304 carry neither Content-Encoding nor body, and the connection
 * stays usable for the next request. */
START_TEST(test_no_content_statuses)
{
	uint8_t *body = tu_payload(4096, TU_TEXT, 15);
	struct th_route rt[] = {
		{ .path = "/t",
		  .status = 200,
		  .body = body,
		  .body_len = 4096,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/204",
		  .status = 204,
		  .body = body,
		  .body_len = 4096,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/204e", .status = 204, .body = NULL, .body_len = 0 },
		{ .path = "/304",
		  .status = 304,
		  .body = body,
		  .body_len = 4096,
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"n\"" } },
		{ .path = "/304s",
		  .status = 304,
		  .body = body,
		  .body_len = 4096,
		  .hdr = { "Content-Type", "text/plain" },
		  .flags = TH_RT_SHARED },
		{ .path = "/e",
		  .status = 200,
		  .body = NULL,
		  .body_len = 0,
		  .hdr = { "Content-Type", "text/plain" } },
	};
	static const char *const seq[] = { "/204", "/204e", "/304", "/304s", "/e", "/304s" };
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	char err[512], ctx[128];

	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	TH_REQ(h, &s, 0, "/t", th_h_gzip, &rs);
	TH_OK("first", th_v_gzip(&rs, 200, body, 4096, TH_E));
	th_reply_free(&rs);
	for (size_t i = 0; i < N_ELEMS(seq); i++) {
		long want = strcmp(seq[i], "/e") == 0 ? 200 : (seq[i][1] == '2' ? 204 : 304);

		snprintf(ctx, sizeof ctx, "%s", seq[i]);
		TH_REQ(h, &s, 0, seq[i], th_h_gzip, &rs);
		TH_OK(ctx,
		      want == 304 ? th_v_no_body(&rs, 304, TH_E) : th_v_no_body(&rs, want, TH_E));
		ck_assert_msg(rs.num_connects == 0, "%s: new connection", ctx);
		th_reply_free(&rs);
		snprintf(ctx, sizeof ctx, "request after %s", seq[i]);
		TH_REQ(h, &s, 0, "/t", th_h_gzip, &rs);
		TH_OK(ctx, th_v_gzip(&rs, 200, body, 4096, TH_E));
		ck_assert_msg(rs.num_connects == 0, "%s: new connection", ctx);
		th_reply_free(&rs);
	}
	ck_assert_uint_eq(s.errors, 0);
	th_site_done(&s, h, body);
}
END_TEST

static void
expect_same_header(const struct th_reply *a, const struct th_reply *b, const char *name)
{
	const char *va = th_header(a, name, NULL), *vb = th_header(b, name, NULL);

	ck_assert_msg(th_hdr_count(a, name) == th_hdr_count(b, name),
		      "%s: %d fields on GET, %d on HEAD", name, th_hdr_count(a, name),
		      th_hdr_count(b, name));
	ck_assert_msg((va == NULL) == (vb == NULL) && (!va || strcmp(va, vb) == 0),
		      "%s: GET '%s', HEAD '%s'", name, va ? va : "(none)", vb ? vb : "(none)");
}

/* HEAD gets exactly the headers GET gets, and no body (loop: per-request,
 * shared with HEAD first). */
START_TEST(test_head)
{
	static const char *const names[] = { "Content-Encoding", "Vary",         "ETag",
					     "Content-Length",   "Content-Type", "Accept-Ranges" };
	uint8_t *body = tu_payload(20000, TU_TEXT, 18);
	struct th_route rt[] = {
		{ .path = "/t",
		  .status = 200,
		  .body = body,
		  .body_len = 20000,
		  .hdr = { "Content-Type", "text/css", "ETag", "\"h1\"", "Accept-Ranges", "bytes" },
		  .flags = _i ? TH_RT_SHARED : 0 },
	};
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply head = { 0 }, get = { 0 };
	char err[512];

	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (int ae = 1; ae >= 0; ae--) {
		TH_REQ(h, &s, TH_HEAD, "/t", ae ? th_h_gzip : NULL, &head);
		ck_assert_int_eq(head.status, 200);
		ck_assert_uint_eq(head.body_len, 0);
		TH_REQ(h, &s, 0, "/t", ae ? th_h_gzip : NULL, &get);
		ck_assert_int_eq(get.num_connects, 0);
		if (ae)
			TH_OK("GET gzip", th_v_gzip(&get, 200, body, 20000, TH_E));
		else
			TH_OK("GET identity", th_v_identity(&get, 200, body, 20000, TH_E));
		for (size_t i = 0; i < N_ELEMS(names); i++)
			expect_same_header(&get, &head, names[i]);
		th_reply_free(&head);
		th_reply_free(&get);
		/* And a HEAD after the GET, then a GET on the same connection. */
		TH_REQ(h, &s, TH_HEAD, "/t", ae ? th_h_gzip : NULL, &head);
		ck_assert_uint_eq(head.body_len, 0);
		ck_assert_int_eq(head.num_connects, 0);
		th_reply_free(&head);
		TH_REQ(h, &s, 0, "/t", ae ? th_h_gzip : NULL, &get);
		ck_assert_int_eq(get.num_connects, 0);
		if (ae)
			TH_OK("GET gzip after HEAD", th_v_gzip(&get, 200, body, 20000, TH_E));
		else
			TH_OK("GET identity after HEAD",
			      th_v_identity(&get, 200, body, 20000, TH_E));
		th_reply_free(&get);
	}
	th_site_done(&s, h, body);
}
END_TEST

/* Header names as the application happens to spell them: matching is
 * case-insensitive (RFC 9110 5.1), values of case-insensitive tokens too. */
START_TEST(test_header_case)
{
	uint8_t *body = tu_payload(8192, TU_TEXT, 33);
	struct th_route rt[] = {
		{ .path = "/lc",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "content-type", "text/plain", "etag", "\"lc\"", "vary", "origin",
			   "accept-ranges", "bytes" } },
		{ .path = "/nt",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "content-type", "text/plain", "cache-control", "NO-TRANSFORM" } },
		{ .path = "/ce",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "content-type", "text/plain", "content-encoding", "br" } },
		{ .path = "/cr",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "content-type", "text/plain", "content-range", "bytes 0-8191/9000" } },
		{ .path = "/png",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "CONTENT-TYPE", "IMAGE/PNG" } },
	};
	static const char *const origin[] = { "origin", NULL };
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	struct mhdgz_stats st;
	char err[512];
	uint64_t want[MHDGZ_REASON_COUNT] = { 0 };

	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	TH_REQ(h, &s, 0, "/lc", th_h_gzip, &rs);
	TH_OK("lowercase", th_v_gzip(&rs, 200, body, 8192, TH_E));
	TH_OK("lowercase", th_v_etag(&rs, "W/\"lc\"", TH_E));
	TH_OK("lowercase", th_v_vary_ae(&rs, origin, TH_E));
	ck_assert_ptr_null(th_header(&rs, "Accept-Ranges", NULL));
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/nt", th_h_gzip, &rs);
	TH_OK("no-transform", th_v_identity(&rs, 200, body, 8192, TH_E));
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/ce", th_h_gzip, &rs);
	ck_assert_int_eq(th_hdr_count(&rs, "Content-Encoding"), 1);
	ck_assert_str_eq(th_header(&rs, "Content-Encoding", NULL), "br");
	ck_assert_uint_eq(rs.body_len, 8192);
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/cr", th_h_gzip, &rs);
	TH_OK("content-range", th_v_identity(&rs, 200, body, 8192, TH_E));
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/png", th_h_gzip, &rs);
	TH_OK("png", th_v_identity(&rs, 200, body, 8192, TH_E));
	th_reply_free(&rs);
	st = th_stats(s.gz);
	want[MHDGZ_COMPRESSED] = 1;
	want[MHDGZ_SKIP_NO_TRANSFORM] = 1;
	want[MHDGZ_SKIP_ENCODED] = 1;
	want[MHDGZ_SKIP_RANGE] = 1;
	want[MHDGZ_SKIP_TYPE] = 1;
	th_expect_reasons(&st, want);
	ck_assert_uint_eq(s.errors, 0);
	th_site_done(&s, h, body);
}
END_TEST

/* ===================================================================== */

struct ck_case
hnd_headers_case(void)
{
	return (struct ck_case){ "headers",
				 CK_CASE_TIMEOUT,
				 { { test_gzip_basic, 0, 0 },
				   { test_vary_merge, 0, 0 },
				   { test_not_accepted, 0, 0 },
				   { test_no_content_statuses, 0, 0 },
				   { test_head, 0, 2 },
				   { test_header_case, 0, 0 } } };
}
