/* check_hnd_decision.c: e2e tests of the compression decision on buffer responses: statuses, sizes, types, sniffing, opt-out, Accept-Encoding. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hnd_handle.h" /* first: mhdgz.h as the library sees it; hnd_plan() */
#include "hnd_plan.h"
#include "check_suites.h"
#include "info.h"
#include "harness.h"
#include "testutil.h"

/* Responses that are never compressed: 206, Content-Range, an existing
 * Content-Encoding, Cache-Control: no-transform. Headers untouched. */
START_TEST(test_never_compressed)
{
	uint8_t *body = tu_payload(8192, TU_TEXT, 19);
	struct th_route rt[] = {
		{ .path = "/206",
		  .status = 206,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "Content-Range", "bytes 0-8191/20000" } },
		{ .path = "/cr",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "Content-Range", "bytes 0-8191/8192" } },
		{ .path = "/br",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "Content-Encoding", "br" } },
		{ .path = "/nt",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "Cache-Control", "no-transform" } },
		{ .path = "/nt2",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "Cache-Control",
			   "public, No-Transform, max-age=10" } },
	};
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	struct mhdgz_stats st;
	char err[512];
	uint64_t want[MHDGZ_REASON_COUNT] = { 0 };

	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	TH_REQ(h, &s, 0, "/206", th_h_gzip, &rs);
	TH_OK("206", th_v_identity(&rs, 206, body, 8192, TH_E));
	ck_assert_str_eq(th_header(&rs, "Content-Range", NULL), "bytes 0-8191/20000");
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/cr", th_h_gzip, &rs);
	TH_OK("Content-Range", th_v_identity(&rs, 200, body, 8192, TH_E));
	th_reply_free(&rs);

	/* The application's own coding: bytes and header as it set them. */
	TH_REQ(h, &s, 0, "/br", th_h_gzip, &rs);
	ck_assert_int_eq(rs.status, 200);
	ck_assert_int_eq(th_hdr_count(&rs, "Content-Encoding"), 1);
	ck_assert_str_eq(th_header(&rs, "Content-Encoding", NULL), "br");
	ck_assert_uint_eq(rs.body_len, 8192);
	ck_assert_mem_eq(rs.body, body, 8192);
	TH_OK("br", th_v_content_length(&rs, 8192, TH_E));
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/nt", th_h_gzip, &rs);
	TH_OK("no-transform", th_v_identity(&rs, 200, body, 8192, TH_E));
	ck_assert_str_eq(th_header(&rs, "Cache-Control", NULL), "no-transform");
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/nt2", th_h_gzip, &rs);
	TH_OK("no-transform in a list", th_v_identity(&rs, 200, body, 8192, TH_E));
	th_reply_free(&rs);

	st = th_stats(s.gz);
	want[MHDGZ_SKIP_RANGE] = 2;
	want[MHDGZ_SKIP_ENCODED] = 1;
	want[MHDGZ_SKIP_NO_TRANSFORM] = 2;
	th_expect_reasons(&st, want);
	th_site_done(&s, h, body);
}
END_TEST

/* min_size: the default 1024, and a configured one; below it identity with Vary. */
START_TEST(test_min_size)
{
	uint8_t *text = tu_payload(1024, TU_TEXT, 20);
	uint8_t rep[200];
	struct th_route rt[] = {
		{ .path = "/1023",
		  .status = 200,
		  .body = text,
		  .body_len = 1023,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/1024",
		  .status = 200,
		  .body = text,
		  .body_len = 1024,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/99",
		  .status = 200,
		  .body = rep,
		  .body_len = 99,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/100",
		  .status = 200,
		  .body = rep,
		  .body_len = 100,
		  .hdr = { "Content-Type", "text/plain" } },
	};
	struct mhdgz_options o = th_opts();
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	char err[512];

	memset(rep, 'a', sizeof rep);
	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	TH_REQ(h, &s, 0, "/1023", th_h_gzip, &rs);
	TH_OK("1023", th_v_identity(&rs, 200, text, 1023, TH_E));
	ck_assert_msg(th_header(&rs, "Vary", NULL) == NULL, "%s: Vary on a body below min_nbytes",
		      "1023");
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/1024", th_h_gzip, &rs);
	TH_OK("1024", th_v_gzip(&rs, 200, text, 1024, TH_E));
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/100", th_h_gzip, &rs);
	TH_OK("100 default", th_v_identity(&rs, 200, rep, 100, TH_E));
	ck_assert_msg(th_header(&rs, "Vary", NULL) == NULL, "%s: Vary on a body below min_nbytes",
		      "100 default");
	th_reply_free(&rs);
	ck_assert_uint_eq(th_stats(s.gz).reasons[MHDGZ_SKIP_SMALL], 2);
	th_site_stop(&s);

	o.min_nbytes = 100;
	th_site_start(&s, &o, rt, N_ELEMS(rt), 0);
	TH_REQ(h, &s, 0, "/99", th_h_gzip, &rs);
	TH_OK("99", th_v_identity(&rs, 200, rep, 99, TH_E));
	ck_assert_msg(th_header(&rs, "Vary", NULL) == NULL, "%s: Vary on a body below min_nbytes",
		      "99");
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/100", th_h_gzip, &rs);
	TH_OK("100", th_v_gzip(&rs, 200, rep, 100, TH_E));
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/1023", th_h_gzip, &rs);
	TH_OK("1023 min 100", th_v_gzip(&rs, 200, text, 1023, TH_E));
	th_reply_free(&rs);
	th_site_stop(&s);
	curl_easy_cleanup(h);
	free(text);
}
END_TEST

/* Random bytes do not shrink: the original goes out. */
START_TEST(test_incompressible)
{
	uint8_t *body = tu_payload(16384, TU_RANDOM, 21);
	struct th_route rt[] = {
		{ .path = "/r",
		  .status = 200,
		  .body = body,
		  .body_len = 16384,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/rs",
		  .status = 200,
		  .body = body,
		  .body_len = 16384,
		  .hdr = { "Content-Type", "text/plain" },
		  .flags = TH_RT_SHARED },
	};
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	struct mhdgz_stats st;
	char err[512];

	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (int i = 0; i < 3; i++) {
		TH_REQ(h, &s, 0, i ? "/rs" : "/r", th_h_gzip, &rs);
		TH_OK("random", th_v_identity(&rs, 200, body, 16384, TH_E));
		th_reply_free(&rs);
	}
	st = th_stats(s.gz);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_NOT_SMALLER], 3);
	ck_assert_uint_eq(st.compressed, 0);
	ck_assert_uint_eq(st.failures, 0);
	th_site_done(&s, h, body);
}
END_TEST

struct type_case {
	const char *type; /* NULL: no Content-Type */
	int gzip;
};

static void
run_type_cases(const struct mhdgz_options *o, const struct type_case *tc, size_t n)
{
	uint8_t *body = tu_payload(8192, TU_TEXT, 22);
	struct th_route *rt = calloc(n, sizeof *rt);
	char(*paths)[32] = calloc(n, sizeof *paths);
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	char err[512], ctx[160];

	ck_assert_ptr_nonnull(rt);
	ck_assert_ptr_nonnull(paths);
	for (size_t i = 0; i < n; i++) {
		snprintf(paths[i], sizeof paths[i], "/ct/%zu", i);
		rt[i].path = paths[i];
		rt[i].status = 200;
		rt[i].body = body;
		rt[i].body_len = 8192;
		rt[i].hdr[0] = "Content-Type";
		rt[i].hdr[1] = tc[i].type;
	}
	th_site_start(&s, o, rt, n, 0);
	for (size_t i = 0; i < n; i++) {
		snprintf(ctx, sizeof ctx, "Content-Type '%s' (want %s)", tc[i].type,
			 tc[i].gzip ? "gzip" : "identity");
		TH_REQ(h, &s, 0, paths[i], th_h_gzip, &rs);
		if (tc[i].gzip)
			TH_OK(ctx, th_v_gzip(&rs, 200, body, 8192, TH_E));
		else
			TH_OK(ctx, th_v_identity(&rs, 200, body, 8192, TH_E));
		ck_assert_str_eq(th_header(&rs, "Content-Type", NULL), tc[i].type);
		th_reply_free(&rs);
	}
	ck_assert_uint_eq(s.errors, 0);
	curl_easy_cleanup(h);
	th_site_stop(&s);
	free(paths);
	free(rt);
	free(body);
}

/* The default lists: parameters and case ignored. */
START_TEST(test_content_types_default)
{
	static const struct type_case tc[] = {
		{ "text/html; charset=utf-8", 1 },
		{ "text/plain", 1 },
		{ "text/css", 1 },
		{ "text/csv", 1 },
		{ "TEXT/HTML", 1 },
		{ "Text/Plain;Charset=UTF-8", 1 },
		{ "APPLICATION/JSON", 1 },
		{ "application/json; charset=utf-8", 1 },
		{ "application/vnd.api+json", 1 },
		{ "application/problem+json", 1 },
		{ "application/javascript", 1 },
		{ "application/xml", 1 },
		{ "application/atom+xml", 1 },
		{ "image/svg+xml", 1 },
		{ "application/wasm", 1 },
		{ "image/png", 0 },
		{ "IMAGE/PNG", 0 },
		{ "image/jpeg", 0 },
		{ "image/webp", 0 },
		{ "image/avif", 0 },
		{ "audio/mpeg", 0 },
		{ "video/mp4", 0 },
		{ "video/MP4; codecs=\"avc1\"", 0 },
		{ "application/zip", 0 },
		{ "application/gzip", 0 },
		{ "application/zstd", 0 },
		{ "font/woff2", 0 },
		{ "text/html;charset=utf-8", 1 },
		{ "application/json ; charset=utf-8", 1 },
		{ "application/octet-stream", 0 }, /* not text-like: not on the allow list */
	};

	run_type_cases(NULL, tc, N_ELEMS(tc));
}
END_TEST

/* 140 bytes of a subtype: a media type longer than the 128 bytes the
 * lookup lowercases on the stack (HND_TYPE_LOWER_MAX) takes the scan. */
#define LONG_SUB "x-" TEN TEN TEN TEN TEN TEN TEN TEN TEN TEN TEN TEN TEN "abcdefgh"
#define TEN "aAaAaAaAaA"

/* Replaced lists with wildcards; the skip list is checked first. */
START_TEST(test_content_types_custom)
{
	static const char *const compress[] = { "text/*", "*/*+json", "application/x-custom",
						"application/" LONG_SUB, NULL };
	static const char *const skip[] = { "text/csv", "application/problem+json", NULL };
	static const struct type_case tc[] = {
		{ "text/plain", 1 },
		{ "TEXT/Markdown; charset=x", 1 },
		{ "text/csv", 0 },
		{ "text/CSV; header=present", 0 },
		{ "application/vnd.api+json", 1 },
		{ "application/problem+json", 0 },
		{ "application/x-custom", 1 },
		{ "Application/X-CUSTOM", 1 },
		{ "application/x-custom2", 0 },
		{ "application/x-custo", 0 },
		{ "APPLICATION/" LONG_SUB, 1 },
		{ "application/" LONG_SUB "; q=1", 1 },
		{ "application/" LONG_SUB "i", 0 },
		{ "text/" LONG_SUB, 1 },
		{ "image/" LONG_SUB "+JSON", 1 },
		{ "application/json", 0 }, /* not in the replaced list */
		{ "application/javascript", 0 },
		{ "image/svg+xml", 0 },
		{ "image/png", 0 },
	};
	static const char *const all[] = { "*/*", NULL };
	static const struct type_case tc3[] = {
		{ "application/octet-stream", 1 },
		{ "text/x-foo", 1 },
		{ "application/x-bar", 1 },
		{ "image/png", 0 },
		{ "video/mp4", 0 },
		{ "application/zip", 0 },
	};
	static const char *const skip_images[] = { "image/*", NULL };
	static const struct type_case tc2[] = {
		{ "image/svg+xml", 0 }, { "text/html", 1 }, { "application/json", 1 },
		{ "image/png", 0 },     { "video/mp4", 0 }, { "application/zip", 0 },
	};
	struct mhdgz_options o = th_opts();

	o.compress_types = compress;
	o.skip_types = skip;
	run_type_cases(&o, tc, N_ELEMS(tc));
	o = th_opts();
	o.skip_types = skip_images;
	run_type_cases(&o, tc2, N_ELEMS(tc2));
	/* Everything except the default skip list. */
	o = th_opts();
	o.compress_types = all;
	run_type_cases(&o, tc3, N_ELEMS(tc3));
}
END_TEST

/* No Content-Type: a text-like body is compressed, a binary one is not. */
START_TEST(test_sniff)
{
	uint8_t *text = tu_payload(8192, TU_TEXT, 23);
	uint8_t *json = tu_payload(8192, TU_JSON, 23);
	uint8_t *bin = malloc(8192);
	static const char html[] =
		"<!DOCTYPE html>\n<html><head><title>t</title></head><body>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"</body></html>\n";
	struct th_route rt[] = {
		{ .path = "/text", .status = 200, .body = text, .body_len = 8192 },
		{ .path = "/json", .status = 200, .body = json, .body_len = 8192 },
		{ .path = "/html", .status = 200, .body = html, .body_len = sizeof html - 1 },
		{ .path = "/bin", .status = 200, .body = bin, .body_len = 8192 },
	};
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	struct mhdgz_stats st;
	char err[512];

	ck_assert_ptr_nonnull(bin);
	th_fill_binary(bin, 8192);
	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	TH_REQ(h, &s, 0, "/text", th_h_gzip, &rs);
	TH_OK("text", th_v_gzip(&rs, 200, text, 8192, TH_E));
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/json", th_h_gzip, &rs);
	TH_OK("json", th_v_gzip(&rs, 200, json, 8192, TH_E));
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/html", th_h_gzip, &rs);
	TH_OK("html", th_v_gzip(&rs, 200, html, sizeof html - 1, TH_E));
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/bin", th_h_gzip, &rs);
	TH_OK("binary", th_v_identity(&rs, 200, bin, 8192, TH_E));
	th_reply_free(&rs);
	st = th_stats(s.gz);
	ck_assert_uint_eq(st.reasons[MHDGZ_COMPRESSED], 3);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_TYPE], 1);
	curl_easy_cleanup(h);
	th_site_stop(&s);
	free(text);
	free(json);
	free(bin);
}
END_TEST

/* MHDGZ_RESPONSE_IDENTITY: identity, unchanged, no Vary. */
START_TEST(test_opt_out)
{
	uint8_t *body = tu_payload(8192, TU_TEXT, 24);
	struct th_route rt[] = {
		{ .path = "/o",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"o\"" },
		  .flags = TH_RT_IDENTITY },
		{ .path = "/os",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain" },
		  .flags = TH_RT_IDENTITY | TH_RT_SHARED },
	};
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	char err[512];

	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (int i = 0; i < 4; i++) {
		TH_REQ(h, &s, 0, (i & 1) ? "/os" : "/o", i < 2 ? th_h_gzip : NULL, &rs);
		TH_OK("opt-out", th_v_identity(&rs, 200, body, 8192, TH_E));
		ck_assert_msg(th_header(&rs, "Vary", NULL) == NULL, "opt-out: Vary '%s'",
			      th_header(&rs, "Vary", NULL));
		if (!(i & 1))
			TH_OK("opt-out", th_v_etag(&rs, "\"o\"", TH_E));
		th_reply_free(&rs);
	}
	ck_assert_uint_eq(th_stats(s.gz).reasons[MHDGZ_SKIP_OPT_OUT], 4);
	ck_assert_uint_eq(s.errors, 0);
	th_site_done(&s, h, body);
}
END_TEST

/* A response not created by mhdgz is queued unchanged. */
START_TEST(test_untracked)
{
	uint8_t *body = tu_payload(8192, TU_TEXT, 25);
	struct th_route rt[] = {
		{ .path = "/u",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"u\"" },
		  .flags = TH_RT_UNTRACKED },
	};
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	char err[512];

	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	TH_REQ(h, &s, 0, "/u", th_h_gzip, &rs);
	TH_OK("untracked", th_v_identity(&rs, 200, body, 8192, TH_E));
	TH_OK("untracked", th_v_etag(&rs, "\"u\"", TH_E));
	ck_assert_msg(th_header(&rs, "Vary", NULL) == NULL, "untracked: Vary '%s'",
		      th_header(&rs, "Vary", NULL));
	th_reply_free(&rs);
	ck_assert_uint_eq(th_stats(s.gz).reasons[MHDGZ_SKIP_UNTRACKED], 1);
	ck_assert_uint_eq(th_stats(s.gz).responses, 1);
	th_site_done(&s, h, body);
}
END_TEST

/* Awkward and malformed Accept-Encoding fields on the wire. */
START_TEST(test_bad_accept_encoding)
{
	size_t clen = 64 * 1024;
	char *commas = malloc(clen + 32);
	uint8_t *body = tu_payload(8192, TU_TEXT, 29);
	struct th_route rt[] = {
		{ .path = "/t",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain" } },
	};
	struct {
		const char *h[3];
		int gzip;
	} cases[] = {
		{ { NULL }, 0 }, /* [0]: 64 KiB of commas, filled in below */
		{ { "Accept-Encoding: gzip;q=abc" }, 0 },
		{ { "Accept-Encoding: gzip;q=-1" }, 0 },
		{ { "Accept-Encoding: gzip;q=1.0001" }, 0 },
		{ { "Accept-Encoding: gzip;q=0.0001" }, 0 },
		{ { "Accept-Encoding: gzip;q=2" }, 0 },
		{ { "Accept-Encoding: gzip;q=abc, *;q=0.2" }, 1 },
		{ { "Accept-Encoding:\tgzip\t;\tq=0.5\t" }, 1 },
		{ { "Accept-Encoding: \t , ,\tgzip\t, ," }, 1 },
		{ { "Accept-Encoding: GZIP;Q=1" }, 1 },
		{ { "Accept-Encoding: x-gzip" }, 1 },
		{ { "Accept-Encoding: *" }, 1 },
		{ { "Accept-Encoding: deflate", "Accept-Encoding: gzip;q=0.5" }, 1 },
		{ { "Accept-Encoding: gzip;q=0", "Accept-Encoding: *" }, 0 },
		{ { "Accept-Encoding: br;q=1, identity;q=0.5" }, 0 },
		{ { "Accept-Encoding: ;;;,,;q=;=;" }, 0 },
	};
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	struct mhdgz_options o = th_opts();
	char err[512], ctx[160];

	ck_assert_ptr_nonnull(commas);
	strcpy(commas, "Accept-Encoding: ");
	memset(commas + 17, ',', clen);
	commas[17 + clen] = '\0';
	cases[0].h[0] = commas;
	o.codings = "gzip"; /* the cases are gzip's: "*" is gzip */
	th_site_start(&s, &o, rt, N_ELEMS(rt), 0);
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < N_ELEMS(cases); i++) {
			snprintf(ctx, sizeof ctx, "case %zu '%.60s' '%.40s'", i, cases[i].h[0],
				 cases[i].h[1] ? cases[i].h[1] : "");
			TH_REQ(h, &s, 0, "/t", cases[i].h, &rs);
			if (cases[i].gzip)
				TH_OK(ctx, th_v_gzip(&rs, 200, body, 8192, TH_E));
			else
				TH_OK(ctx, th_v_identity(&rs, 200, body, 8192, TH_E));
			TH_OK(ctx, th_v_vary_ae(&rs, NULL, TH_E));
			th_reply_free(&rs);
		}
	}
	th_site_done(&s, h, body);
	free(commas);
}
END_TEST

/* ===================================================================== */

/* ===================================================================== */
/*                 The plan, a pure function (hnd_plan)                  */
/* ===================================================================== */

#define PL_HEAD 0x1u   /* a HEAD request */
#define PL_PAD 0x2u    /* length hiding applies */
#define PL_QUEUED 0x4u /* queued before (not fresh) */
#define PL_OPTOUT 0x8u /* MHDGZ_RESPONSE_IDENTITY */
#define PL_ZSTD 0x10u  /* needs zstd (the handle offers "zstd, gzip" where it can) */

static const struct {
	const char *why;
	unsigned int status;
	const char *ae;    /* Accept-Encoding line, NULL: none */
	const char *ctype; /* Content-Type, NULL: none */
	const char *ce;    /* Content-Encoding, NULL: none */
	enum hnd_kind kind;
	uint64_t len;
	unsigned int flags;
	/* expected */
	enum hnd_plan_kind plan;
	enum mhdgz_reason reason;
	enum gz_coding coding; /* when coded (or a 304 of a coded 200) */
	bool vary;
	bool whole;
} plan_rows[] = {
	{ "buffer GET", 200, "gzip", "text/plain", NULL, HND_BUFFER, 8192, 0, HND_PLAN_WHOLE,
	  MHDGZ_COMPRESSED, GZ_CODING_GZIP, true, true },
	{ "buffer HEAD: the same coded response", 200, "gzip", "text/plain", NULL, HND_BUFFER, 8192,
	  PL_HEAD, HND_PLAN_WHOLE, MHDGZ_COMPRESSED, GZ_CODING_GZIP, true, true },
	{ "buffer below min_nbytes: no Vary", 200, "gzip", "text/plain", NULL, HND_BUFFER, 100, 0,
	  HND_PLAN_IDENTITY, MHDGZ_SKIP_SMALL, GZ_CODING_GZIP, false, true },
	{ "client refuses every coding", 200, "identity", "text/plain", NULL, HND_BUFFER, 8192, 0,
	  HND_PLAN_IDENTITY, MHDGZ_SKIP_NOT_ACCEPTED, GZ_CODING_GZIP, true, true },
	{ "no Accept-Encoding", 200, NULL, "text/plain", NULL, HND_BUFFER, 8192, 0,
	  HND_PLAN_IDENTITY, MHDGZ_SKIP_NOT_ACCEPTED, GZ_CODING_GZIP, true, true },
	{ "image", 200, "gzip", "image/png", NULL, HND_BUFFER, 8192, 0, HND_PLAN_IDENTITY,
	  MHDGZ_SKIP_TYPE, GZ_CODING_GZIP, false, true },
	{ "already coded", 200, "gzip", "text/plain", "br", HND_BUFFER, 8192, 0, HND_PLAN_IDENTITY,
	  MHDGZ_SKIP_ENCODED, GZ_CODING_GZIP, false, true },
	{ "opted out", 200, "gzip", "text/plain", NULL, HND_BUFFER, 8192, PL_OPTOUT,
	  HND_PLAN_IDENTITY, MHDGZ_SKIP_OPT_OUT, GZ_CODING_GZIP, false, true },
	{ "204", 204, "gzip", "text/plain", NULL, HND_BUFFER, 8192, 0, HND_PLAN_IDENTITY,
	  MHDGZ_SKIP_STATUS, GZ_CODING_GZIP, false, true },
	{ "file up to 1 MiB: whole", 200, "gzip", "text/html", NULL, HND_FD, 512 * 1024, 0,
	  HND_PLAN_WHOLE, MHDGZ_COMPRESSED, GZ_CODING_GZIP, true, true },
	{ "larger file: a stream", 200, "gzip", "text/html", NULL, HND_FD, 2 * 1024 * 1024, 0,
	  HND_PLAN_STREAM, MHDGZ_COMPRESSED, GZ_CODING_GZIP, true, false },
	{ "HEAD of a file stream: fields", 200, "gzip", "text/html", NULL, HND_FD, 2 * 1024 * 1024,
	  PL_HEAD, HND_PLAN_STREAM_FIELDS, MHDGZ_COMPRESSED, GZ_CODING_GZIP, true, false },
	{ "reader of unknown size, first queue: in place", 200, "gzip", "text/plain", NULL,
	  HND_CALLBACK, MHD_SIZE_UNKNOWN, 0, HND_PLAN_STREAM_IN_PLACE, MHDGZ_COMPRESSED,
	  GZ_CODING_GZIP, true, false },
	{ "reader of unknown size queued before", 200, "gzip", "text/plain", NULL, HND_CALLBACK,
	  MHD_SIZE_UNKNOWN, PL_QUEUED, HND_PLAN_STREAM, MHDGZ_COMPRESSED, GZ_CODING_GZIP, true,
	  false },
	{ "reader of known size: a stream of its own", 200, "gzip", "text/plain", NULL,
	  HND_CALLBACK, 50000, 0, HND_PLAN_STREAM, MHDGZ_COMPRESSED, GZ_CODING_GZIP, true, false },
	{ "untyped reader: identity, never sniffed", 200, "gzip", NULL, NULL, HND_CALLBACK,
	  MHD_SIZE_UNKNOWN, 0, HND_PLAN_IDENTITY, MHDGZ_SKIP_TYPE, GZ_CODING_GZIP, false, false },
	{ "pipe HEAD", 200, "gzip", "text/plain", NULL, HND_PIPE, MHD_SIZE_UNKNOWN, PL_HEAD,
	  HND_PLAN_STREAM_FIELDS, MHDGZ_COMPRESSED, GZ_CODING_GZIP, true, false },
	{ "304 of a coded 200", 304, "gzip", "text/plain", NULL, HND_BUFFER, 8192, 0,
	  HND_PLAN_NOT_MODIFIED, MHDGZ_SKIP_STATUS, GZ_CODING_GZIP, true, true },
	{ "304 of a small 200: no Vary", 304, "gzip", "text/plain", NULL, HND_BUFFER, 100, 0,
	  HND_PLAN_NOT_MODIFIED, MHDGZ_SKIP_STATUS, GZ_CODING_GZIP, false, true },
	{ "zstd preferred on a tie", 200, "gzip, zstd", "text/plain", NULL, HND_BUFFER, 8192,
	  PL_ZSTD, HND_PLAN_WHOLE, MHDGZ_COMPRESSED, GZ_CODING_ZSTD, true, true },
	{ "length hiding: gzip only", 200, "gzip, zstd", "text/plain", NULL, HND_BUFFER, 8192,
	  PL_ZSTD | PL_PAD, HND_PLAN_WHOLE, MHDGZ_COMPRESSED, GZ_CODING_GZIP, true, true },
	{ "length hiding, zstd alone accepted", 200, "zstd", "text/plain", NULL, HND_BUFFER, 8192,
	  PL_ZSTD | PL_PAD, HND_PLAN_IDENTITY, MHDGZ_SKIP_NOT_ACCEPTED, GZ_CODING_GZIP, true,
	  true },
};

/* Each row: the plan from the request, the fields and the entry's kind
 * and length, with no response, connection or cache; twice, the same. */
START_TEST(test_plan)
{
	struct mhdgz_options o = th_opts();
	struct mhdgz *gz;
	struct hnd_plan p, again;
	size_t i;
	bool zstd = tu_coding_available(MHDGZ_CODING_ZSTD);

	o.codings = zstd ? "zstd, gzip" : "gzip";
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	for (i = 0; i < N_ELEMS(plan_rows); i++) {
		struct hnd_request rq = { .head = plan_rows[i].flags & PL_HEAD };
		struct hnd_facts f = { .content_type = plan_rows[i].ctype,
				       .content_encoding = plan_rows[i].ce };
		struct hnd_plan_in in = { .status = plan_rows[i].status,
					  .rq = &rq,
					  .f = &f,
					  .kind = plan_rows[i].kind,
					  .body_len = plan_rows[i].len,
					  .opt_out = plan_rows[i].flags & PL_OPTOUT,
					  .padded = plan_rows[i].flags & PL_PAD,
					  .fresh = !(plan_rows[i].flags & PL_QUEUED) };
		const char *ae = plan_rows[i].ae;
		enum gz_coding want = plan_rows[i].coding;

		if ((plan_rows[i].flags & PL_ZSTD) && !zstd)
			continue;
		hnd_accept_parse(ae ? &ae : NULL, ae ? 1 : 0, &rq.acc);
		hnd_plan(&gz->policy, &in, &p);
		ck_assert_msg(p.kind == plan_rows[i].plan, "%s: plan %d, want %d", plan_rows[i].why,
			      (int)p.kind, (int)plan_rows[i].plan);
		ck_assert_msg(p.d.reason == plan_rows[i].reason, "%s: reason %s, want %s",
			      plan_rows[i].why, mhdgz_reason_name(p.d.reason),
			      mhdgz_reason_name(plan_rows[i].reason));
		ck_assert_msg(p.d.vary == plan_rows[i].vary, "%s: vary %d", plan_rows[i].why,
			      p.d.vary);
		ck_assert_msg(p.whole == plan_rows[i].whole, "%s: whole %d", plan_rows[i].why,
			      p.whole);
		if (p.d.reason == MHDGZ_COMPRESSED)
			ck_assert_msg(p.d.coding == want, "%s: coding %d", plan_rows[i].why,
				      (int)p.d.coding);
		if (p.kind == HND_PLAN_NOT_MODIFIED) {
			/* the 304 of the 200 this request would get */
			bool coded_200 = plan_rows[i].vary;

			ck_assert_msg(p.d.gzip_304 == coded_200, "%s: gzip_304 %d",
				      plan_rows[i].why, p.d.gzip_304);
			ck_assert_msg((p.d200.reason == MHDGZ_COMPRESSED) == coded_200,
				      "%s: the 200's reason %s", plan_rows[i].why,
				      mhdgz_reason_name(p.d200.reason));
		}
		ck_assert_ptr_null(p.dict);
		hnd_plan(&gz->policy, &in, &again);
		ck_assert_msg(again.kind == p.kind && again.d.reason == p.d.reason &&
				      again.d.coding == p.d.coding && again.d.vary == p.d.vary,
			      "%s: a second plan differs", plan_rows[i].why);
	}
	mhdgz_free(gz);
}
END_TEST

/* The store's answer for test_plan_known_len: per coding, a length, not
 * smaller (UINT64_MAX), or nothing; counts the questions. */
struct known_fix {
	bool known[GZ_CODING_COUNT];
	uint64_t len[GZ_CODING_COUNT];
	unsigned int asked;
	enum gz_coding asked_coding;
};

static enum hnd_known
known_answer(void *cls, enum gz_coding coding, uint64_t *len_ret)
{
	struct known_fix *k = cls;

	k->asked++;
	k->asked_coding = coding;
	if (!k->known[coding])
		return HND_KNOWN_NOTHING;
	if (k->len[coding] == UINT64_MAX)
		return HND_KNOWN_NOT_SMALLER;
	*len_ret = k->len[coding];
	return HND_KNOWN_LEN;
}

/*
 * Where the length comes from, as an input of the plan: a HEAD of a body
 * coded whole asks the store once, for the planned coding: a length known
 * plans the fields with it (no coding), "not smaller" plans identity for
 * that reason, nothing known plans the body coded to learn it. A GET, a
 * stream, a digest (of the coded bytes) and identity never ask.
 */
START_TEST(test_plan_known_len)
{
	static const struct {
		const char *why;
		bool head, digest, known;
		uint64_t len;
		enum hnd_kind kind;
		uint64_t body_len;
		const char *ae;
		unsigned int asked;
		enum hnd_plan_kind plan;
		enum mhdgz_reason reason;
	} rows[] = {
		{ "HEAD, length known", true, false, true, 1234, HND_BUFFER, 8192, "gzip", 1,
		  HND_PLAN_WHOLE_FIELDS, MHDGZ_COMPRESSED },
		{ "HEAD, not smaller", true, false, true, UINT64_MAX /* not smaller */, HND_BUFFER,
		  8192, "gzip", 1, HND_PLAN_IDENTITY, MHDGZ_SKIP_NOT_SMALLER },
		{ "HEAD, nothing known", true, false, false, 0, HND_BUFFER, 8192, "gzip", 1,
		  HND_PLAN_WHOLE, MHDGZ_COMPRESSED },
		{ "HEAD of a small file, known", true, false, true, 77, HND_FD, 8192, "gzip", 1,
		  HND_PLAN_WHOLE_FIELDS, MHDGZ_COMPRESSED },
		{ "GET, known", false, false, true, 1234, HND_BUFFER, 8192, "gzip", 0,
		  HND_PLAN_WHOLE, MHDGZ_COMPRESSED },
		{ "HEAD with a digest", true, true, true, 1234, HND_BUFFER, 8192, "gzip", 0,
		  HND_PLAN_WHOLE, MHDGZ_COMPRESSED },
		{ "HEAD of a stream", true, false, true, 1234, HND_FD, 4u << 20, "gzip", 0,
		  HND_PLAN_STREAM_FIELDS, MHDGZ_COMPRESSED },
		{ "HEAD, identity client", true, false, true, 1234, HND_BUFFER, 8192, NULL, 0,
		  HND_PLAN_IDENTITY, MHDGZ_SKIP_NOT_ACCEPTED },
	};
	struct mhdgz_options o = th_opts();
	struct mhdgz *gz;
	size_t i;

	o.flags |= MHDGZ_F_CONTENT_DIGEST;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	for (i = 0; i < N_ELEMS(rows); i++) {
		struct hnd_request rq = { .head = rows[i].head };
		struct hnd_facts f = { .content_type = "text/plain",
				       .content_digest = rows[i].digest };
		struct known_fix k = { .asked = 0 };
		struct hnd_plan_in in = { .status = 200,
					  .rq = &rq,
					  .f = &f,
					  .kind = rows[i].kind,
					  .body_len = rows[i].body_len,
					  .fresh = true,
					  .known_len = known_answer,
					  .known_cls = &k };
		struct hnd_plan p;
		const char *ae = rows[i].ae;

		k.known[GZ_CODING_GZIP] = rows[i].known;
		k.len[GZ_CODING_GZIP] = rows[i].len;
		hnd_accept_parse(ae ? &ae : NULL, ae ? 1 : 0, &rq.acc);
		hnd_plan(&gz->policy, &in, &p);
		ck_assert_msg(k.asked == rows[i].asked, "%s: asked %u times", rows[i].why, k.asked);
		if (k.asked)
			ck_assert_msg(k.asked_coding == GZ_CODING_GZIP, "%s: asked for %d",
				      rows[i].why, (int)k.asked_coding);
		ck_assert_msg(p.kind == rows[i].plan, "%s: plan %d, want %d", rows[i].why,
			      (int)p.kind, (int)rows[i].plan);
		ck_assert_msg(p.d.reason == rows[i].reason, "%s: reason %s", rows[i].why,
			      mhdgz_reason_name(p.d.reason));
		if (p.kind == HND_PLAN_WHOLE_FIELDS)
			ck_assert_msg(p.coded_len == rows[i].len, "%s: length %llu", rows[i].why,
				      (unsigned long long)p.coded_len);
		else
			ck_assert_msg(p.coded_len == MHDGZ_NBYTES_UNKNOWN, "%s: a length",
				      rows[i].why);
	}
	mhdgz_free(gz);
}
END_TEST

struct ck_case
hnd_decision_case(void)
{
	return (struct ck_case){ "decision",
				 CK_CASE_TIMEOUT,
				 { { test_never_compressed, 0, 0 },
				   { test_min_size, 0, 0 },
				   { test_incompressible, 0, 0 },
				   { test_content_types_default, 0, 0 },
				   { test_content_types_custom, 0, 0 },
				   { test_sniff, 0, 0 },
				   { test_opt_out, 0, 0 },
				   { test_untracked, 0, 0 },
				   { test_bad_accept_encoding, 0, 0 },
				   { test_plan, 0, 0 },
				   { test_plan_known_len, 0, 0 } } };
}
