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
		{ .path = "/s",
		  .status = 200,
		  .body = body,
		  .body_len = 5000,
		  .hdr = { "Content-Type", "application/json", "ETag", "\"abc\"" } },
		{ .path = "/ss",
		  .status = 200,
		  .body = body,
		  .body_len = 5000,
		  .hdr = { "Content-Type", "application/json", "ETag", "\"abc\"" },
		  .flags = TH_RT_SHARED },
		{ .path = "/w",
		  .status = 200,
		  .body = body,
		  .body_len = 5000,
		  .hdr = { "Content-Type", "application/json", "ETag", "W/\"abc\"" } },
		{ .path = "/long",
		  .status = 200,
		  .body = body,
		  .body_len = 5000,
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
	th_site_done(&s, h, body);
}
END_TEST

/* One request of a conditional sequence and what it must get. */
enum cond_want { C_GZIP, C_IDENTITY, C_304, C_412 };
enum cond_len { L_NONE, L_GZIP, L_IDENTITY }; /* a 304's Content-Length, if any, is the 200's */

struct cond_step {
	const char *ctx;
	unsigned int flags; /* 0 (GET), TH_HEAD, TH_POST */
	const char *path;
	const char *hdr[4]; /* request lines, NULL-terminated */
	enum cond_want want;
	const char *etag; /* the one ETag wanted; NULL: not checked */
	bool vary;        /* Vary is exactly Accept-Encoding */
	enum cond_len len304;
	bool reused; /* on the connection of the request before */
};

#define AE "Accept-Encoding: gzip"

/* Run steps on one connection; the first gzip body's length is the one a
 * gzip 304 may announce. */
static void
run_cond_steps(struct th_site *s, const uint8_t *body, size_t len, const struct cond_step *st,
	       size_t n)
{
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	char err[512];
	size_t gz_len = 0;

	for (size_t i = 0; i < n; i++) {
		const char *ctx = st[i].ctx;

		TH_REQ(h, s, st[i].flags, st[i].path, st[i].hdr, &rs);
		switch (st[i].want) {
		case C_GZIP:
			TH_OK(ctx, th_v_gzip(&rs, 200, body, len, TH_E));
			if (!gz_len)
				gz_len = rs.body_len;
			break;
		case C_IDENTITY:
			TH_OK(ctx, th_v_identity(&rs, 200, body, len, TH_E));
			break;
		case C_304:
			TH_OK(ctx, th_v_no_body(&rs, 304, TH_E));
			break;
		case C_412:
			TH_OK(ctx, th_v_no_body(&rs, 412, TH_E));
			break;
		}
		if (st[i].len304 != L_NONE)
			TH_OK(ctx,
			      th_v_304_length(&rs, st[i].len304 == L_GZIP ? gz_len : len, TH_E));
		if (st[i].vary)
			TH_OK(ctx, th_v_vary_ae(&rs, NULL, TH_E));
		if (st[i].etag)
			TH_OK(ctx, th_v_etag(&rs, st[i].etag, TH_E));
		if (st[i].reused)
			ck_assert_msg(rs.num_connects == 0, "%s: new connection", ctx);
		th_reply_free(&rs);
	}
	ck_assert_uint_eq(s->errors, 0);
	curl_easy_cleanup(h);
}

/*
 * Conditional requests (default policy, loop 0: per-request responses,
 * 1: one shared response): the application queues its 200 response with
 * MHDGZ_REQUEST_PRECONDITIONS and the handler answers with a 304. The 304
 * carries the Vary and the ETag the 200 would carry (RFC 9110 15.4.5):
 * W/"abc" for a gzip client, "abc" for the others; and no Content-Length
 * other than that of the 200's content (RFC 9110 8.6).
 */
START_TEST(test_conditional)
{
	static const char W[] = "W/\"abc\"", S[] = "\"abc\"";
	static const struct cond_step steps[] = {
		{ "200 gzip", 0, "/r", { AE }, C_GZIP, W, false, L_NONE, false },
		{ "304 gzip",
		  0,
		  "/r",
		  { AE, "If-None-Match: W/\"abc\"" },
		  C_304,
		  W,
		  true,
		  L_GZIP,
		  true },
		{ "304 gzip (strong INM)",
		  0,
		  "/r",
		  { AE, "If-None-Match: \"abc\"" },
		  C_304,
		  W,
		  false,
		  L_GZIP,
		  false },
		{ "HEAD 304",
		  TH_HEAD,
		  "/r",
		  { AE, "If-None-Match: W/\"abc\"" },
		  C_304,
		  W,
		  false,
		  L_GZIP,
		  false },
		{ "304 *", 0, "/r", { AE, "If-None-Match: *" }, C_304, NULL, false, L_GZIP, false },
		{ "200 gzip after 304", 0, "/r", { AE }, C_GZIP, W, false, L_NONE, true },
		{ "304 identity",
		  0,
		  "/r",
		  { "If-None-Match: \"abc\"" },
		  C_304,
		  S,
		  true,
		  L_IDENTITY,
		  false },
		{ "200 identity after 304", 0, "/r", { NULL }, C_IDENTITY, S, true, L_NONE, false },
		{ "INM other",
		  0,
		  "/r",
		  { AE, "If-None-Match: \"x\", \"y\"" },
		  C_GZIP,
		  NULL,
		  false,
		  L_NONE,
		  false },
		{ "If-Match ok",
		  0,
		  "/r",
		  { AE, "If-Match: \"abc\"" },
		  C_GZIP,
		  NULL,
		  false,
		  L_NONE,
		  false },
		{ "If-Match weak",
		  0,
		  "/r",
		  { AE, "If-Match: W/\"abc\"" },
		  C_412,
		  NULL,
		  false,
		  L_NONE,
		  false },
		{ "If-Match other",
		  0,
		  "/r",
		  { AE, "If-Match: \"zzz\"" },
		  C_412,
		  NULL,
		  false,
		  L_NONE,
		  false },
		/* If-None-Match on POST: 412, not 304 (RFC 9110 13.1.2). */
		{ "POST INM",
		  TH_POST,
		  "/r",
		  { "If-None-Match: \"abc\"" },
		  C_412,
		  NULL,
		  false,
		  L_NONE,
		  false },
		/* If-Match is evaluated first (RFC 9110 13.2.2 step 1). */
		{ "If-Match fails before If-None-Match",
		  0,
		  "/r",
		  { AE, "If-Match: \"zzz\"", "If-None-Match: \"abc\"" },
		  C_412,
		  NULL,
		  false,
		  L_NONE,
		  false },
		{ "If-Match passes, If-None-Match matches",
		  0,
		  "/r",
		  { AE, "If-Match: \"abc\"", "If-None-Match: \"abc\"" },
		  C_304,
		  NULL,
		  false,
		  L_NONE,
		  false },
		{ "If-Match *",
		  0,
		  "/r",
		  { AE, "If-Match: *" },
		  C_GZIP,
		  NULL,
		  false,
		  L_NONE,
		  false },
		/* A resource without an ETag: only "*" matches. */
		{ "no ETag, INM *",
		  0,
		  "/n",
		  { AE, "If-None-Match: *" },
		  C_304,
		  NULL,
		  false,
		  L_NONE,
		  false },
		{ "no ETag, INM tag",
		  0,
		  "/n",
		  { AE, "If-None-Match: \"abc\"" },
		  C_GZIP,
		  NULL,
		  false,
		  L_NONE,
		  false },
		{ "no ETag, If-Match tag",
		  0,
		  "/n",
		  { AE, "If-Match: \"abc\"" },
		  C_412,
		  NULL,
		  false,
		  L_NONE,
		  false },
		{ "no ETag, If-Match *",
		  0,
		  "/n",
		  { AE, "If-Match: *" },
		  C_GZIP,
		  NULL,
		  false,
		  L_NONE,
		  false },
		{ "200 gzip at the end", 0, "/r", { AE }, C_GZIP, NULL, false, L_NONE, true },
	};
	uint8_t *body = tu_payload(8192, TU_TEXT, 16);
	struct th_route rt[] = {
		{ .path = "/r",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"abc\"" },
		  .flags = TH_RT_PRECOND | (_i ? TH_RT_SHARED : 0),
		  .etag = "\"abc\"" },
		{ .path = "/n",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain" },
		  .flags = TH_RT_PRECOND,
		  .etag = NULL },
	};
	struct th_site s;

	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	run_cond_steps(&s, body, 8192, steps, N_ELEMS(steps));
	th_site_stop(&s);
	free(body);
}
END_TEST

/* MHDGZ_ETAG_SUFFIX: "abc-gzip" on gzip responses, and the validators
 * carrying it still give 304 and 412 correctly. */
START_TEST(test_conditional_suffix)
{
	static const char G[] = "\"abc-gzip\"", S[] = "\"abc\"";
	static const struct cond_step steps[] = {
		{ "200 gzip", 0, "/r", { AE }, C_GZIP, G, false, L_NONE, false },
		{ "304 suffix",
		  0,
		  "/r",
		  { AE, "If-None-Match: \"abc-gzip\"" },
		  C_304,
		  G,
		  true,
		  L_GZIP,
		  false },
		{ "304 plain tag, gzip client",
		  0,
		  "/r",
		  { AE, "If-None-Match: \"abc\"" },
		  C_304,
		  G,
		  false,
		  L_GZIP,
		  false },
		{ "304 identity client",
		  0,
		  "/r",
		  { "If-None-Match: \"abc-gzip\"" },
		  C_304,
		  S,
		  true,
		  L_IDENTITY,
		  false },
		{ "If-Match suffix",
		  0,
		  "/r",
		  { AE, "If-Match: \"abc-gzip\"" },
		  C_GZIP,
		  G,
		  false,
		  L_NONE,
		  false },
		{ "If-Match plain",
		  0,
		  "/r",
		  { AE, "If-Match: \"abc\"" },
		  C_GZIP,
		  NULL,
		  false,
		  L_NONE,
		  false },
		{ "If-Match other",
		  0,
		  "/r",
		  { AE, "If-Match: \"zzz-gzip\"" },
		  C_412,
		  NULL,
		  false,
		  L_NONE,
		  false },
		{ "identity", 0, "/r", { NULL }, C_IDENTITY, S, false, L_NONE, true },
	};
	uint8_t *body = tu_payload(8192, TU_TEXT, 17);
	struct th_route rt[] = {
		{ .path = "/r",
		  .status = 200,
		  .body = body,
		  .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"abc\"" },
		  .flags = TH_RT_PRECOND | (_i ? TH_RT_SHARED : 0),
		  .etag = "\"abc\"" },
	};
	struct mhdgz_options o = th_opts();
	struct th_site s;

	o.etag_policy = MHDGZ_ETAG_SUFFIX;
	th_site_start(&s, &o, rt, N_ELEMS(rt), 0);
	run_cond_steps(&s, body, 8192, steps, N_ELEMS(steps));
	th_site_stop(&s);
	free(body);
}
END_TEST

/*
 * Two resources with the same strong ETag and length but other bytes, as
 * an "mtime-size" ETag gives two files unpacked together: an entity tag
 * tells apart the representations of one resource only (RFC 9110 section
 * 8.8.3), so a coded length remembered under it is its path's
 * (hnd_store_resource): each HEAD states its own GET's length.
 */
struct pr_fix {
	uint8_t *a, *b;
	size_t len;
};

static enum MHD_Result
pr_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct pr_fix *f = s->cls;
	struct mhdgz_request req = { .size = sizeof req, .method = method, .url = url };
	struct MHD_Response *r = mhdgz_response_from_buffer(s->gz, f->len,
							    strcmp(url, "/a") == 0 ? f->a : f->b,
							    MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	ck_assert_ptr_nonnull(r);
	MHD_add_response_header(r, "Content-Type", "text/plain");
	MHD_add_response_header(r, "ETag", "\"5f3a-4e20\"");
	ret = mhdgz_queue_response_ex(s->gz, c, &req, MHD_HTTP_OK, r, NULL);
	MHD_destroy_response(r);
	return ret;
}

START_TEST(test_etag_per_resource)
{
	struct pr_fix f = { .len = 20000 };
	struct mhdgz_options o = th_opts();
	struct mhdgz *gz;
	struct th_server s = { 0 };
	CURL *h = th_curl_new();
	struct th_reply r = { 0 };
	char get_a[32], get_b[32];

	f.a = tu_payload(f.len, TU_TEXT, 5);
	f.b = tu_payload(f.len, TU_TEXT, 6);
	memset(f.b + f.len / 2, 'z', f.len / 2); /* b codes smaller than a */
	o.codings = "gzip";
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	th_start(&s, gz, 0, pr_route, &f);
	TH_REQ(h, &s, TH_GZIP, "/a", NULL, &r);
	ck_assert_str_eq(th_header(&r, "Content-Encoding", NULL), "gzip");
	snprintf(get_a, sizeof get_a, "%s", th_header(&r, "Content-Length", NULL));
	th_reply_free(&r);
	TH_REQ(h, &s, TH_GZIP | TH_HEAD, "/b", NULL, &r);
	snprintf(get_b, sizeof get_b, "%s", th_header(&r, "Content-Length", NULL));
	th_reply_free(&r);
	TH_REQ(h, &s, TH_GZIP, "/b", NULL, &r);
	ck_assert_str_eq(th_header(&r, "Content-Length", NULL), get_b);
	ck_assert_uint_eq(r.body_len, strtoull(get_b, NULL, 10));
	ck_assert_str_ne(get_a, get_b);
	th_reply_free(&r);
	TH_REQ(h, &s, TH_GZIP | TH_HEAD, "/a", NULL, &r);
	ck_assert_str_eq(th_header(&r, "Content-Length", NULL), get_a);
	th_reply_free(&r);
	th_stop(&s);
	curl_easy_cleanup(h);
	mhdgz_free(gz);
	free(f.a);
	free(f.b);
}
END_TEST

/* ===================================================================== */

struct ck_case
hnd_etag_case(void)
{
	return (struct ck_case){ "etag",
				 CK_CASE_TIMEOUT,
				 { { test_etag_policy, 0, 4 },
				   { test_conditional, 0, 2 },
				   { test_conditional_suffix, 0, 2 },
				   { test_etag_per_resource, 0, 0 } } };
}
