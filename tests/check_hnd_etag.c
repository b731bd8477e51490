/* check_hnd_etag.c: e2e tests of ETag policies and conditional requests (304, 412) on buffer responses. */
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

/* ETag policies (loop: WEAKEN, SUFFIX, DROP, KEEP); weak ETags stay as they are. */
START_TEST(test_etag_policy)
{
	static const char *const want_strong[] = { "W/\"abc\"", "\"abc-gzip\"", NULL, "\"abc\"" };
	uint8_t *body = tu_payload(5000, TU_JSON, 13);
	struct th_route rt[] = {
		{ .path = "/s", .status = 200, .body = body, .body_len = 5000,
		  .hdr = { "Content-Type", "application/json", "ETag", "\"abc\"" } },
		{ .path = "/ss", .status = 200, .body = body, .body_len = 5000,
		  .hdr = { "Content-Type", "application/json", "ETag", "\"abc\"" },
		  .flags = TH_RT_SHARED },
		{ .path = "/w", .status = 200, .body = body, .body_len = 5000,
		  .hdr = { "Content-Type", "application/json", "ETag", "W/\"abc\"" } },
		{ .path = "/long", .status = 200, .body = body, .body_len = 5000,
		  .hdr = { "Content-Type", "application/json", "ETag", "\"x\"" } },
	};
	struct mhdgz_options o = th_opts();
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	char err[512], ctx[128];

	o.etag_policy = (enum mhdgz_etag_policy)_i;
	th_site_start(&s, &o, rt, N_ELEMS(rt), 0);
	/* Long ETags: 200 characters are rewritten exactly; 3000 are rewritten
	 * exactly or (an implementation limit: dropping a validator is safe)
	 * left out of the gzip variant, but never truncated or mangled. */
	for (int t = 0; t < 2; t++) {
		static char tag[3003], want[3010];
		size_t n = t ? 3000 : 200;

		memset(tag + 1, 'q', n);
		tag[0] = tag[n + 1] = '"';
		tag[n + 2] = '\0';
		rt[3].hdr[3] = tag;
		if (_i == MHDGZ_ETAG_WEAKEN)
			snprintf(want, sizeof want, "W/%s", tag);
		else if (_i == MHDGZ_ETAG_SUFFIX)
			snprintf(want, sizeof want, "\"%.*s-gzip\"", (int)n, tag + 1);
		else
			snprintf(want, sizeof want, "%s", tag);
		th_site_stop(&s);
		th_site_start(&s, &o, rt, N_ELEMS(rt), 0);
		snprintf(ctx, sizeof ctx, "policy %d, %zu-character ETag", _i, n);
		TH_REQ(h, &s, 0, "/long", th_h_gzip, &rs);
		TH_OK(ctx, th_v_gzip(&rs, 200, body, 5000, TH_E));
		if (_i == MHDGZ_ETAG_DROP || (t == 1 && th_header(&rs, "ETag", NULL) == NULL))
			TH_OK(ctx, th_v_etag(&rs, NULL, TH_E));
		else
			TH_OK(ctx, th_v_etag(&rs, want, TH_E));
		th_reply_free(&rs);
		TH_REQ(h, &s, 0, "/long", NULL, &rs);
		TH_OK(ctx, th_v_etag(&rs, tag, TH_E));
		th_reply_free(&rs);
	}
	for (int n = 0; n < 2; n++) {
		for (int p = 0; p < 2; p++) {
			const char *path = p ? "/ss" : "/s";

			snprintf(ctx, sizeof ctx, "policy %d %s gzip #%d", _i, path, n);
			TH_REQ(h, &s, 0, path, th_h_gzip, &rs);
			TH_OK(ctx, th_v_gzip(&rs, 200, body, 5000, TH_E));
			TH_OK(ctx, th_v_etag(&rs, want_strong[_i], TH_E));
			th_reply_free(&rs);
			snprintf(ctx, sizeof ctx, "policy %d %s identity #%d", _i, path, n);
			TH_REQ(h, &s, 0, path, NULL, &rs);
			TH_OK(ctx, th_v_identity(&rs, 200, body, 5000, TH_E));
			TH_OK(ctx, th_v_etag(&rs, "\"abc\"", TH_E));
			th_reply_free(&rs);
		}
		if (_i != MHDGZ_ETAG_DROP) {
			snprintf(ctx, sizeof ctx, "policy %d weak gzip", _i);
			TH_REQ(h, &s, 0, "/w", th_h_gzip, &rs);
			TH_OK(ctx, th_v_gzip(&rs, 200, body, 5000, TH_E));
			TH_OK(ctx, th_v_etag(&rs, "W/\"abc\"", TH_E));
			th_reply_free(&rs);
		}
		snprintf(ctx, sizeof ctx, "policy %d weak identity", _i);
		TH_REQ(h, &s, 0, "/w", NULL, &rs);
		TH_OK(ctx, th_v_identity(&rs, 200, body, 5000, TH_E));
		TH_OK(ctx, th_v_etag(&rs, "W/\"abc\"", TH_E));
		th_reply_free(&rs);
	}
	curl_easy_cleanup(h);
	th_site_stop(&s);
	free(body);
}
END_TEST

/*
 * Conditional requests (default policy, loop 0: per-request responses,
 * 1: one shared response): the application evaluates the validators with
 * mhdgz_evaluate_preconditions() and queues its response with 304. The 304
 * carries the Vary and the ETag the 200 would carry (RFC 9110 15.4.5):
 * W/"abc" for a gzip client, "abc" for the others; and no Content-Length
 * other than that of the 200's content (RFC 9110 8.6).
 */
START_TEST(test_conditional)
{
	uint8_t *body = tu_payload(8192, TU_TEXT, 16);
	struct th_route rt[] = {
		{ .path = "/r", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"abc\"" },
		  .flags = TH_RT_PRECOND | (_i ? TH_RT_SHARED : 0), .etag = "\"abc\"" },
		{ .path = "/n", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain" }, .flags = TH_RT_PRECOND, .etag = NULL },
	};
	static const char *const inm_weak_gz[] = { "Accept-Encoding: gzip",
						   "If-None-Match: W/\"abc\"", NULL };
	static const char *const inm_strong_gz[] = { "Accept-Encoding: gzip",
						     "If-None-Match: \"abc\"", NULL };
	static const char *const inm_strong[] = { "If-None-Match: \"abc\"", NULL };
	static const char *const inm_other_gz[] = { "Accept-Encoding: gzip",
						    "If-None-Match: \"x\", \"y\"", NULL };
	static const char *const inm_star_gz[] = { "Accept-Encoding: gzip", "If-None-Match: *",
						   NULL };
	static const char *const im_ok_gz[] = { "Accept-Encoding: gzip", "If-Match: \"abc\"",
						NULL };
	static const char *const im_weak_gz[] = { "Accept-Encoding: gzip", "If-Match: W/\"abc\"",
						  NULL };
	static const char *const im_bad_gz[] = { "Accept-Encoding: gzip", "If-Match: \"zzz\"",
						 NULL };
	static const char *const inm_post[] = { "If-None-Match: \"abc\"", NULL };
	static const char *const im_bad_inm_gz[] = { "Accept-Encoding: gzip",
						     "If-Match: \"zzz\"", "If-None-Match: \"abc\"",
						     NULL };
	static const char *const im_ok_inm_gz[] = { "Accept-Encoding: gzip",
						    "If-Match: \"abc\"", "If-None-Match: \"abc\"",
						    NULL };
	static const char *const im_star_gz[] = { "Accept-Encoding: gzip", "If-Match: *", NULL };
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	char err[512];
	size_t gz_len = 0;

	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	TH_REQ(h, &s, 0, "/r", th_h_gzip, &rs);
	TH_OK("200 gzip", th_v_gzip(&rs, 200, body, 8192, TH_E));
	TH_OK("200 gzip", th_v_etag(&rs, "W/\"abc\"", TH_E));
	gz_len = rs.body_len;
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", inm_weak_gz, &rs);
	TH_OK("304 gzip", th_v_no_body(&rs, 304, TH_E));
	TH_OK("304 gzip", th_v_304_length(&rs, gz_len, TH_E));
	TH_OK("304 gzip", th_v_vary_ae(&rs, NULL, TH_E));
	TH_OK("304 gzip", th_v_etag(&rs, "W/\"abc\"", TH_E));
	ck_assert_int_eq(rs.num_connects, 0);
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", inm_strong_gz, &rs);
	TH_OK("304 gzip (strong INM)", th_v_no_body(&rs, 304, TH_E));
	TH_OK("304 gzip (strong INM)", th_v_304_length(&rs, gz_len, TH_E));
	TH_OK("304 gzip (strong INM)", th_v_etag(&rs, "W/\"abc\"", TH_E));
	th_reply_free(&rs);

	TH_REQ(h, &s, TH_HEAD, "/r", inm_weak_gz, &rs);
	TH_OK("HEAD 304", th_v_no_body(&rs, 304, TH_E));
	TH_OK("HEAD 304", th_v_304_length(&rs, gz_len, TH_E));
	TH_OK("HEAD 304", th_v_etag(&rs, "W/\"abc\"", TH_E));
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", inm_star_gz, &rs);
	TH_OK("304 *", th_v_no_body(&rs, 304, TH_E));
	TH_OK("304 *", th_v_304_length(&rs, gz_len, TH_E));
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", th_h_gzip, &rs);
	TH_OK("200 gzip after 304", th_v_gzip(&rs, 200, body, 8192, TH_E));
	TH_OK("200 gzip after 304", th_v_etag(&rs, "W/\"abc\"", TH_E));
	ck_assert_int_eq(rs.num_connects, 0);
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", inm_strong, &rs);
	TH_OK("304 identity", th_v_no_body(&rs, 304, TH_E));
	TH_OK("304 identity", th_v_304_length(&rs, (size_t)8192, TH_E));
	TH_OK("304 identity", th_v_vary_ae(&rs, NULL, TH_E));
	TH_OK("304 identity", th_v_etag(&rs, "\"abc\"", TH_E));
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", NULL, &rs);
	TH_OK("200 identity after 304", th_v_identity(&rs, 200, body, 8192, TH_E));
	TH_OK("200 identity after 304", th_v_etag(&rs, "\"abc\"", TH_E));
	TH_OK("200 identity after 304", th_v_vary_ae(&rs, NULL, TH_E));
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", inm_other_gz, &rs);
	TH_OK("INM other", th_v_gzip(&rs, 200, body, 8192, TH_E));
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", im_ok_gz, &rs);
	TH_OK("If-Match ok", th_v_gzip(&rs, 200, body, 8192, TH_E));
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", im_weak_gz, &rs);
	TH_OK("If-Match weak", th_v_no_body(&rs, 412, TH_E));
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", im_bad_gz, &rs);
	TH_OK("If-Match other", th_v_no_body(&rs, 412, TH_E));
	th_reply_free(&rs);

	/* If-None-Match on POST: 412, not 304 (RFC 9110 13.1.2). */
	TH_REQ(h, &s, TH_POST, "/r", inm_post, &rs);
	TH_OK("POST INM", th_v_no_body(&rs, 412, TH_E));
	th_reply_free(&rs);

	/* If-Match is evaluated first (RFC 9110 13.2.2 step 1). */
	TH_REQ(h, &s, 0, "/r", im_bad_inm_gz, &rs);
	TH_OK("If-Match fails before If-None-Match", th_v_no_body(&rs, 412, TH_E));
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/r", im_ok_inm_gz, &rs);
	TH_OK("If-Match passes, If-None-Match matches", th_v_no_body(&rs, 304, TH_E));
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/r", im_star_gz, &rs);
	TH_OK("If-Match *", th_v_gzip(&rs, 200, body, 8192, TH_E));
	th_reply_free(&rs);

	/* A resource without an ETag: only "*" matches. */
	TH_REQ(h, &s, 0, "/n", inm_star_gz, &rs);
	TH_OK("no ETag, INM *", th_v_no_body(&rs, 304, TH_E));
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/n", inm_strong_gz, &rs);
	TH_OK("no ETag, INM tag", th_v_gzip(&rs, 200, body, 8192, TH_E));
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/n", im_ok_gz, &rs);
	TH_OK("no ETag, If-Match tag", th_v_no_body(&rs, 412, TH_E));
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/n", im_star_gz, &rs);
	TH_OK("no ETag, If-Match *", th_v_gzip(&rs, 200, body, 8192, TH_E));
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", th_h_gzip, &rs);
	TH_OK("200 gzip at the end", th_v_gzip(&rs, 200, body, 8192, TH_E));
	ck_assert_int_eq(rs.num_connects, 0);
	th_reply_free(&rs);
	ck_assert_uint_eq(s.errors, 0);
	curl_easy_cleanup(h);
	th_site_stop(&s);
	free(body);
}
END_TEST

/* MHDGZ_ETAG_SUFFIX: "abc-gzip" on gzip responses, and the validators
 * carrying it still give 304 and 412 correctly. */
START_TEST(test_conditional_suffix)
{
	uint8_t *body = tu_payload(8192, TU_TEXT, 17);
	struct th_route rt[] = {
		{ .path = "/r", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"abc\"" },
		  .flags = TH_RT_PRECOND | (_i ? TH_RT_SHARED : 0), .etag = "\"abc\"" },
	};
	static const char *const inm_sfx_gz[] = { "Accept-Encoding: gzip",
						  "If-None-Match: \"abc-gzip\"", NULL };
	static const char *const inm_sfx[] = { "If-None-Match: \"abc-gzip\"", NULL };
	static const char *const inm_plain_gz[] = { "Accept-Encoding: gzip",
						    "If-None-Match: \"abc\"", NULL };
	static const char *const im_sfx_gz[] = { "Accept-Encoding: gzip",
						 "If-Match: \"abc-gzip\"", NULL };
	static const char *const im_plain_gz[] = { "Accept-Encoding: gzip", "If-Match: \"abc\"",
						   NULL };
	static const char *const im_bad_gz[] = { "Accept-Encoding: gzip",
						 "If-Match: \"zzz-gzip\"", NULL };
	struct mhdgz_options o = th_opts();
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	char err[512];
	size_t gz_len = 0;

	o.etag_policy = MHDGZ_ETAG_SUFFIX;
	th_site_start(&s, &o, rt, N_ELEMS(rt), 0);
	TH_REQ(h, &s, 0, "/r", th_h_gzip, &rs);
	TH_OK("200 gzip", th_v_gzip(&rs, 200, body, 8192, TH_E));
	TH_OK("200 gzip", th_v_etag(&rs, "\"abc-gzip\"", TH_E));
	gz_len = rs.body_len;
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", inm_sfx_gz, &rs);
	TH_OK("304 suffix", th_v_no_body(&rs, 304, TH_E));
	TH_OK("304 suffix", th_v_304_length(&rs, gz_len, TH_E));
	TH_OK("304 suffix", th_v_vary_ae(&rs, NULL, TH_E));
	TH_OK("304 suffix", th_v_etag(&rs, "\"abc-gzip\"", TH_E));
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", inm_plain_gz, &rs);
	TH_OK("304 plain tag, gzip client", th_v_no_body(&rs, 304, TH_E));
	TH_OK("304 plain tag, gzip client", th_v_304_length(&rs, gz_len, TH_E));
	TH_OK("304 plain tag, gzip client", th_v_etag(&rs, "\"abc-gzip\"", TH_E));
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", inm_sfx, &rs);
	TH_OK("304 identity client", th_v_no_body(&rs, 304, TH_E));
	TH_OK("304 identity client", th_v_304_length(&rs, (size_t)8192, TH_E));
	TH_OK("304 identity client", th_v_etag(&rs, "\"abc\"", TH_E));
	TH_OK("304 identity client", th_v_vary_ae(&rs, NULL, TH_E));
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", im_sfx_gz, &rs);
	TH_OK("If-Match suffix", th_v_gzip(&rs, 200, body, 8192, TH_E));
	TH_OK("If-Match suffix", th_v_etag(&rs, "\"abc-gzip\"", TH_E));
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", im_plain_gz, &rs);
	TH_OK("If-Match plain", th_v_gzip(&rs, 200, body, 8192, TH_E));
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", im_bad_gz, &rs);
	TH_OK("If-Match other", th_v_no_body(&rs, 412, TH_E));
	th_reply_free(&rs);

	TH_REQ(h, &s, 0, "/r", NULL, &rs);
	TH_OK("identity", th_v_identity(&rs, 200, body, 8192, TH_E));
	TH_OK("identity", th_v_etag(&rs, "\"abc\"", TH_E));
	ck_assert_int_eq(rs.num_connects, 0);
	th_reply_free(&rs);
	curl_easy_cleanup(h);
	th_site_stop(&s);
	free(body);
}
END_TEST

/* ===================================================================== */

TCase *
hnd_etag_tcase(void)
{
	TCase *tc = tcase_create("etag");

	tcase_add_loop_test(tc, test_etag_policy, 0, 4);
	tcase_add_loop_test(tc, test_conditional, 0, 2);
	tcase_add_loop_test(tc, test_conditional_suffix, 0, 2);
	return tc;
}
