/* check_hnd_codings.c: zstd and br beside gzip: negotiation tables (q-values, ties, identity, *), options, and buffer responses end to end (Vary, ETag, HEAD, 304, small, not smaller, cache, stats). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hnd_negotiate.h"
#include "hnd_plan.h"
#include "hnd_queue.h"
#include "hnd_handle.h"
#include "check_suites.h"
#include "info.h"
#include "harness.h"
#include "testutil.h"

/* Every coding compiled in: the end-to-end tests need zstd and br. */
static bool
all_codings(void)
{
	return tu_coding_available(MHDGZ_CODING_ZSTD) && tu_coding_available(MHDGZ_CODING_BR);
}

/* ------------------------------------------------------------------------ */
/* RFC 9110 section 12.5.3 negotiation: hnd_accept_choose over a table.     */

struct neg_case {
	const char *order; /* struct mhdgz_options codings */
	const char *ae[3]; /* Accept-Encoding lines, NULL-terminated; ae[0] NULL: absent */
	const char *want;  /* "gzip", "zstd", "br" or "identity" */
};

static const struct neg_case neg_cases[] = {
	/* A browser: every q is 1, the server's order decides. */
	{ "zstd, br, gzip", { "gzip, deflate, br, zstd" }, "zstd" },
	{ "br, zstd, gzip", { "gzip, deflate, br, zstd" }, "br" },
	{ "gzip, br, zstd", { "gzip, deflate, br, zstd" }, "gzip" },
	{ "zstd, br, gzip", { "gzip, deflate, br" }, "br" },
	{ "zstd, br, gzip", { "gzip, deflate" }, "gzip" },
	/* The client's q-values decide first. */
	{ "zstd, br, gzip", { "gzip;q=1, zstd;q=0.5, br;q=0.4" }, "gzip" },
	{ "zstd, br, gzip", { "br;q=0.9, gzip;q=0.8, zstd;q=0.1" }, "br" },
	{ "zstd, br, gzip", { "br;q=0.5, gzip;q=0.5, zstd;q=0.4" }, "br" },
	{ "gzip, br, zstd", { "br;q=0.5, gzip;q=0.5, zstd;q=0.4" }, "gzip" },
	{ "zstd, br, gzip", { "zstd;q=0, br;q=0, gzip" }, "gzip" },
	{ "zstd, br, gzip", { "zstd;q=0.001" }, "zstd" },
	/* Several lines: all of them count, the best listing of a coding. */
	{ "zstd, br, gzip", { "zstd;q=0.2", "br;q=0.3, zstd;q=0.1" }, "br" },
	{ "zstd, br, gzip", { "gzip;q=0.2", "gzip;q=0.9, br;q=0.8" }, "gzip" },
	/* "*": every coding not listed; an explicit listing wins over it. */
	{ "zstd, br, gzip", { "*" }, "zstd" },
	{ "br, gzip", { "*" }, "br" },
	{ "zstd, br, gzip", { "*, zstd;q=0" }, "br" },
	{ "zstd, br, gzip", { "*;q=0.5, gzip" }, "gzip" },
	{ "zstd, br, gzip", { "*;q=0, gzip;q=0.1" }, "gzip" },
	{ "zstd, br, gzip", { "*;q=0" }, "identity" },
	/* identity: explicitly preferred, it wins; identity;q=0 changes
	 * nothing when no coding is acceptable (identity is sent then). */
	{ "zstd, br, gzip", { "identity, gzip;q=0.5" }, "identity" },
	{ "zstd, br, gzip", { "identity;q=0.5, br" }, "br" },
	{ "zstd, br, gzip", { "identity;q=0.5, br;q=0.5" }, "br" },
	{ "zstd, br, gzip", { "identity;q=0" }, "identity" },
	{ "zstd, br, gzip", { "identity;q=0, zstd" }, "zstd" },
	/* Absent, empty, unknown or malformed. */
	{ "zstd, br, gzip", { NULL }, "identity" },
	{ "zstd, br, gzip", { "" }, "identity" },
	{ "zstd, br, gzip", { "deflate, compress" }, "identity" },
	{ "zstd, br, gzip", { "zstd;q=abc, br;q=1.5, gzip;q=0.3" }, "gzip" },
	{ "zstd, br, gzip", { "zstdx, brr, x-gzip" }, "gzip" },
	/* Case-insensitive tokens and parameter names. */
	{ "zstd, br, gzip", { "BR, ZSTD;Q=0.5" }, "br" },
	/* Only what the server offers. */
	{ "gzip", { "zstd, br" }, "identity" },
	{ "gzip", { "zstd, br, gzip;q=0.1" }, "gzip" },
	{ "zstd", { "gzip, br" }, "identity" },
	{ "zstd", { "gzip, zstd;q=0.2" }, "zstd" },
	{ "br, zstd", { "*" }, "br" },
};

START_TEST(test_negotiation_table)
{
	const struct neg_case *c = &neg_cases[_i];
	struct mhdgz_options o = th_opts();
	struct mhdgz *gz = NULL;
	struct hnd_accept acc;
	enum gz_coding k = GZ_CODING_COUNT;
	size_t n = 0;
	bool coded;

	if (!all_codings())
		return;
	o.codings = c->order;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	while (n < 3 && c->ae[n])
		n++;
	hnd_accept_parse(c->ae, n, &acc);
	coded = hnd_accept_choose(&acc, gz->policy.order, gz->policy.norder, &k);
	ck_assert_msg(strcmp(coded ? gz_coding_name(k) : "identity", c->want) == 0,
		      "order \"%s\", Accept-Encoding \"%s\"%s: %s, want %s", c->order,
		      c->ae[0] ? c->ae[0] : "(absent)", c->ae[1] ? " + a second line" : "",
		      coded ? gz_coding_name(k) : "identity", c->want);
	/* With gzip alone offered it is the gzip rule, exactly. */
	if (strcmp(c->order, "gzip") == 0)
		ck_assert_int_eq(coded, hnd_accept_wants_gzip(&acc));
	mhdgz_free(gz);
}
END_TEST

/* The options: the list's syntax, levels, codings not built. */
START_TEST(test_options)
{
	static const struct {
		const char *codings;
		int zstd_level, br_level;
		int rc;
		size_t norder;
	} t[] = {
		{ NULL, 0, 0, 0, 2 }, /* the default: zstd, gzip */
		{ "gzip", 0, 0, 0, 1 },
		{ " zstd ,br,\tGZIP ", 0, 0, 0, 3 },
		{ "br", 11, 0, 0, 1 }, /* a zstd level is checked, zstd or not */
		{ "br", 0, 11, 0, 1 },
		{ "zstd", 19, 1, 0, 1 },
		{ "zstd", 20, 0, MHDGZ_EINVAL, 0 },
		{ "zstd", -1, 0, MHDGZ_EINVAL, 0 },
		{ "gzip", 0, 12, MHDGZ_EINVAL, 0 },
		{ "", 0, 0, MHDGZ_EINVAL, 0 },
		{ ",", 0, 0, MHDGZ_EINVAL, 0 },
		{ "gzip,", 0, 0, MHDGZ_EINVAL, 0 },
		{ "gzip gzip", 0, 0, MHDGZ_EINVAL, 0 },
		{ "gzip, gzip", 0, 0, MHDGZ_EINVAL, 0 },
		{ "deflate", 0, 0, MHDGZ_EINVAL, 0 },
		{ "x-gzip", 0, 0, MHDGZ_EINVAL, 0 },
		{ "identity", 0, 0, MHDGZ_EINVAL, 0 },
	};
	size_t i;
	int lo, hi, def;

	if (!all_codings())
		return;
	for (i = 0; i < N_ELEMS(t); i++) {
		struct mhdgz_options o = th_opts();
		struct mhdgz *gz = NULL;
		int rc;

		o.codings = t[i].codings;
		o.zstd.level = t[i].zstd_level;
		o.br.level = t[i].br_level;
		rc = mhdgz_new(&o, &gz);
		ck_assert_msg(rc == t[i].rc, "codings \"%s\" levels %d/%d: %d, want %d",
			      t[i].codings ? t[i].codings : "(null)", t[i].zstd_level,
			      t[i].br_level, rc, t[i].rc);
		if (rc == 0) {
			ck_assert_uint_eq(gz->policy.norder, t[i].norder);
			ck_assert_uint_eq(tu_codings(gz, NULL, 0), t[i].norder);
			mhdgz_free(gz);
		}
	}
	/* The order as parsed, cut to the room given. */
	{
		struct mhdgz_options o = th_opts();
		struct mhdgz *gz = NULL;
		enum mhdgz_coding k[MHDGZ_CODING_COUNT] = { MHDGZ_CODING_COUNT, MHDGZ_CODING_COUNT,
							    MHDGZ_CODING_COUNT };

		o.codings = "br, gzip,zstd";
		ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
		ck_assert_uint_eq(tu_codings(gz, k, 2), 3);
		ck_assert(k[0] == MHDGZ_CODING_BR && k[1] == MHDGZ_CODING_GZIP &&
			  k[2] == MHDGZ_CODING_COUNT);
		ck_assert_uint_eq(tu_codings(gz, k, MHDGZ_CODING_COUNT), 3);
		ck_assert(k[2] == MHDGZ_CODING_ZSTD);
		mhdgz_free(gz);
		ck_assert_uint_eq(tu_codings(NULL, k, 3), 0);
	}
	ck_assert_int_eq(tu_coding_levels(MHDGZ_CODING_ZSTD, &lo, &hi, &def), 0);
	ck_assert(lo == 1 && hi == 19 && def == 3);
	ck_assert_int_eq(tu_coding_levels(MHDGZ_CODING_BR, &lo, &hi, &def), 0);
	ck_assert(lo == 1 && hi == 11 && def == 5);
	ck_assert_int_eq(tu_coding_levels(MHDGZ_CODING_COUNT, NULL, NULL, NULL), MHDGZ_EINVAL);
	ck_assert_int_eq(tu_coding_levels(MHDGZ_CODING_GZIP, NULL, &hi, NULL), 0);
	ck_assert_int_eq(tu_backend_levels(MHDGZ_BACKEND_DEFAULT, NULL, &lo, NULL), 0);
	ck_assert_int_eq(hi, lo);
	ck_assert_str_eq(tu_coding_name(MHDGZ_CODING_GZIP), "gzip");
	ck_assert_str_eq(tu_coding_name(MHDGZ_CODING_ZSTD), "zstd");
	ck_assert_str_eq(tu_coding_name(MHDGZ_CODING_BR), "br");
	{
		struct mhdgz_coding_info ci = { .size = sizeof ci };

		ck_assert_int_eq(mhdgz_coding_info(NULL, MHDGZ_CODING_COUNT, &ci), MHDGZ_EINVAL);
		ck_assert_int_eq(mhdgz_coding_info(NULL, MHDGZ_CODING_GZIP, NULL), MHDGZ_EINVAL);
	}
	ck_assert_int_eq(tu_coding_available(MHDGZ_CODING_GZIP), 1);
	ck_assert_int_eq(tu_coding_available(MHDGZ_CODING_COUNT), 0);
	/* Suffixed ETags of every coding denote the resource. */
	ck_assert_int_eq(hnd_etag_match("\"v1-zstd\"", "\"v1\"", 0), 1);
	ck_assert_int_eq(hnd_etag_match("\"v1-br\"", "\"v1\"", 1), 1);
	ck_assert_int_eq(hnd_etag_match("\"v1-gzip\"", "\"v1\"", 0), 1);
	ck_assert_int_eq(hnd_etag_match("\"v1-brx\"", "\"v1\"", 1), 0);
	ck_assert_int_eq(hnd_etag_match("\"v1-\"", "\"v1\"", 1), 0);
	ck_assert_int_eq(hnd_etag_match("\"v1br\"", "\"v1\"", 1), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The selection without a daemon: per-coding caches and outcomes.         */

static const char *
queued_ce(struct MHD_Response *q)
{
	const char *ce = MHD_get_response_header(q, MHD_HTTP_HEADER_CONTENT_ENCODING);

	return ce ? ce : "identity";
}

START_TEST(test_select_caches)
{
	static const char *const ae[] = { "zstd", "br", "gzip", "zstd, br, gzip", "identity" };
	static const char *const want[] = { "zstd", "br", "gzip", "br", "identity" };
	struct mhdgz_options o = th_opts();
	struct mhdgz *gz = NULL;
	const size_t len = 30000;
	uint8_t *body = tu_payload(len, TU_JSON, 21);
	struct MHD_Response *r;
	struct MHD_Response *first[N_ELEMS(ae)] = { NULL };
	struct mhdgz_stats st;
	size_t i, round;

	if (!all_codings()) {
		free(body);
		return;
	}
	o.codings = "br, zstd, gzip";
	o.etag_policy = MHDGZ_ETAG_SUFFIX;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	r = mhdgz_response_from_buffer(gz, len, body, MHD_RESPMEM_PERSISTENT);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(MHD_add_response_header(r, "Content-Type", "application/json"), MHD_YES);
	ck_assert_int_eq(MHD_add_response_header(r, "ETag", "\"v1\""), MHD_YES);
	for (round = 0; round < 2; round++) {
		for (i = 0; i < N_ELEMS(ae); i++) {
			struct hnd_request rq = { .flags = 0 };
			struct hnd_result res;
			struct MHD_Response *q = NULL;
			const char *lines[1] = { ae[i] };
			char etag[32];
			int rel;

			hnd_accept_parse(lines, 1, &rq.acc);
			rel = hnd_select(gz, &rq, 200, r, &q, &res);
			ck_assert_int_eq(rel, 0); /* cached or the response itself */
			ck_assert_str_eq(queued_ce(q), want[i]);
			if (strcmp(want[i], "identity") == 0) {
				ck_assert_ptr_eq(q, r);
				ck_assert_int_eq(res.reason, MHDGZ_SKIP_NOT_ACCEPTED);
				continue;
			}
			ck_assert_int_eq(res.reason, MHDGZ_COMPRESSED);
			ck_assert_str_eq(gz_coding_name(res.coding), want[i]);
			ck_assert_uint_lt(res.coded_nbytes, len);
			snprintf(etag, sizeof etag, "\"v1-%s\"", want[i]);
			ck_assert_str_eq(MHD_get_response_header(q, "ETag"), etag);
			/* One variant per coding, built once, reused after. */
			if (round == 0 && (i < 3))
				first[i] = q;
			else if (round == 1 && i < 3)
				ck_assert_ptr_eq(q, first[i]);
		}
	}
	ck_assert_ptr_ne(first[0], first[1]);
	ck_assert_ptr_ne(first[1], first[2]);
	st = th_stats(gz);
	/* 2 rounds: zstd 2, br 2 + 2 (the tie), gzip 2; identity 2. */
	ck_assert_uint_eq(st.coded[MHDGZ_CODING_ZSTD], 2);
	ck_assert_uint_eq(st.coded[MHDGZ_CODING_BR], 4);
	ck_assert_uint_eq(st.coded[MHDGZ_CODING_GZIP], 2);
	ck_assert_uint_eq(st.compressed, 8);
	ck_assert_uint_eq(st.compressions, 3);
	ck_assert_uint_eq(st.cache_hits, 5);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_NOT_ACCEPTED], 2);
	MHD_destroy_response(r);
	mhdgz_free(gz);
	free(body);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* End to end: every rule of the decision per coding.                      */

START_TEST(test_e2e_rules)
{
	static const char *const codings[] = { "zstd", "br", "gzip" };
	const char *coding = codings[_i];
	const size_t len = 20000;
	uint8_t *body = tu_payload(len, TU_TEXT, 5);
	uint8_t *rnd = tu_payload(5000, TU_RANDOM, 6);
	struct th_route rt[] = {
		{ .path = "/t",
		  .status = 200,
		  .body = body,
		  .body_len = len,
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"v1\"" },
		  .flags = TH_RT_PRECOND | TH_RT_SHARED,
		  .etag = "\"v1\"" },
		{ .path = "/small",
		  .status = 200,
		  .body = body,
		  .body_len = 500,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/rnd",
		  .status = 200,
		  .body = rnd,
		  .body_len = 5000,
		  .hdr = { "Content-Type", "text/plain" },
		  .flags = TH_RT_SHARED },
		{ .path = "/nt",
		  .status = 200,
		  .body = body,
		  .body_len = len,
		  .hdr = { "Content-Type", "text/plain", "Cache-Control", "no-transform" } },
		{ .path = "/png",
		  .status = 200,
		  .body = body,
		  .body_len = len,
		  .hdr = { "Content-Type", "image/png" } },
	};
	struct mhdgz_options o = th_opts();
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	char err[512], ctx[128], ae[64], inm[64], etag[32];
	const char *hd[] = { ae, NULL, NULL };
	size_t coded_len;
	struct mhdgz_stats st;
	uint64_t want_reasons[MHDGZ_REASON_COUNT] = { 0 };

	if (!all_codings()) {
		curl_easy_cleanup(h);
		free(body);
		free(rnd);
		return;
	}
	o.codings = "zstd, br, gzip";
	o.etag_policy = MHDGZ_ETAG_SUFFIX;
	th_site_start(&s, &o, rt, N_ELEMS(rt), 0);
	/* The client lists the others first at a lower q: this coding wins
	 * on q, not on the server's order. */
	snprintf(ae, sizeof ae, "Accept-Encoding: %s;q=0.9, gzip;q=0.5, zstd;q=0.4, br;q=0.3",
		 coding);
	snprintf(etag, sizeof etag, "\"v1-%s\"", coding);

	snprintf(ctx, sizeof ctx, "%s GET", coding);
	TH_REQ(h, &s, 0, "/t", hd, &rs);
	TH_OK(ctx, th_v_coded(&rs, coding, 200, body, len, TH_E));
	TH_OK(ctx, th_v_etag(&rs, etag, TH_E));
	coded_len = rs.body_len;
	th_reply_free(&rs);
	/* Again: the cached variant, the same bytes' length. */
	TH_REQ(h, &s, 0, "/t", hd, &rs);
	TH_OK(ctx, th_v_coded(&rs, coding, 200, body, len, TH_E));
	ck_assert_uint_eq(rs.body_len, coded_len);
	th_reply_free(&rs);
	/* HEAD: GET's fields and length, no body. */
	snprintf(ctx, sizeof ctx, "%s HEAD", coding);
	TH_REQ(h, &s, TH_HEAD, "/t", hd, &rs);
	ck_assert_int_eq(rs.status, 200);
	ck_assert_uint_eq(rs.body_len, 0);
	ck_assert_str_eq(th_header(&rs, "Content-Encoding", NULL), coding);
	TH_OK(ctx, th_v_content_length(&rs, coded_len, TH_E));
	TH_OK(ctx, th_v_etag(&rs, etag, TH_E));
	TH_OK(ctx, th_v_vary_ae(&rs, NULL, TH_E));
	th_reply_free(&rs);
	/* 304 for this coding's ETag: the 200's ETag, Vary and length. */
	snprintf(ctx, sizeof ctx, "%s 304", coding);
	snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
	hd[1] = inm;
	TH_REQ(h, &s, 0, "/t", hd, &rs);
	TH_OK(ctx, th_v_no_body(&rs, 304, TH_E));
	TH_OK(ctx, th_v_etag(&rs, etag, TH_E));
	TH_OK(ctx, th_v_vary_ae(&rs, NULL, TH_E));
	TH_OK(ctx, th_v_304_length(&rs, coded_len, TH_E));
	th_reply_free(&rs);
	hd[1] = NULL;
	/* Identity for the same resource: its own ETag, Vary. */
	TH_REQ(h, &s, 0, "/t", NULL, &rs);
	TH_OK(ctx, th_v_identity(&rs, 200, body, len, TH_E));
	TH_OK(ctx, th_v_etag(&rs, "\"v1\"", TH_E));
	TH_OK(ctx, th_v_vary_ae(&rs, NULL, TH_E));
	th_reply_free(&rs);
	/* Below min_nbytes, not smaller, no-transform, a skipped type. */
	snprintf(ctx, sizeof ctx, "%s small", coding);
	TH_REQ(h, &s, 0, "/small", hd, &rs);
	TH_OK(ctx, th_v_identity(&rs, 200, body, 500, TH_E));
	/* identity for every client: it does not vary (RFC 9110 section 12.5.5) */
	ck_assert_msg(th_header(&rs, "Vary", NULL) == NULL, "%s: Vary", ctx);
	th_reply_free(&rs);
	snprintf(ctx, sizeof ctx, "%s not smaller", coding);
	for (int n = 0; n < 2; n++) {
		TH_REQ(h, &s, 0, "/rnd", hd, &rs);
		TH_OK(ctx, th_v_identity(&rs, 200, rnd, 5000, TH_E));
		TH_OK(ctx, th_v_vary_ae(&rs, NULL, TH_E));
		th_reply_free(&rs);
	}
	snprintf(ctx, sizeof ctx, "%s no-transform", coding);
	TH_REQ(h, &s, 0, "/nt", hd, &rs);
	TH_OK(ctx, th_v_identity(&rs, 200, body, len, TH_E));
	ck_assert_int_eq(th_hdr_count(&rs, "Vary"), 0);
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/png", hd, &rs);
	TH_OK(ctx, th_v_identity(&rs, 200, body, len, TH_E));
	th_reply_free(&rs);

	st = th_stats(s.gz);
	/* GET x2, HEAD: this coding; 304 is a status skip. */
	ck_assert_uint_eq(st.coded[_i == 2   ? MHDGZ_CODING_GZIP
				   : _i == 1 ? MHDGZ_CODING_BR
					     : MHDGZ_CODING_ZSTD],
			  3);
	ck_assert_uint_eq(st.compressed, 3);
	/* Compressed once: /t, and /rnd once (then remembered not smaller);
	 * the 304 and HEAD reuse /t's variant. */
	ck_assert_uint_eq(st.compressions, 2);
	ck_assert_uint_eq(st.cache_hits, 3); /* GET, HEAD, 304 */
	want_reasons[MHDGZ_COMPRESSED] = 3;
	want_reasons[MHDGZ_SKIP_STATUS] = 1;
	want_reasons[MHDGZ_SKIP_NOT_ACCEPTED] = 1;
	want_reasons[MHDGZ_SKIP_SMALL] = 1;
	want_reasons[MHDGZ_SKIP_NOT_SMALLER] = 2;
	want_reasons[MHDGZ_SKIP_NO_TRANSFORM] = 1;
	want_reasons[MHDGZ_SKIP_TYPE] = 1;
	th_expect_reasons(&st, want_reasons);
	ck_assert_uint_eq(st.failures, 0);
	th_site_done(&s, h, body);
	free(rnd);
}
END_TEST

/* A handler offering gzip alone (codings "gzip", the way back to the
 * former default) behaves as before the other codings: a browser's
 * Accept-Encoding gets gzip, a zstd-only client identity. */
START_TEST(test_gzip_alone_unchanged)
{
	const size_t len = 8000;
	uint8_t *body = tu_payload(len, TU_JSON, 8);
	struct th_route rt[] = {
		{ .path = "/j",
		  .status = 200,
		  .body = body,
		  .body_len = len,
		  .hdr = { "Content-Type", "application/json" } },
	};
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	char err[512];
	const char *browser[] = { "Accept-Encoding: gzip, deflate, br, zstd", NULL };
	const char *zstd_only[] = { "Accept-Encoding: zstd, br", NULL };
	struct mhdgz_options o = th_opts();
	struct mhdgz_stats st;

	o.codings = "gzip";
	th_site_start(&s, &o, rt, N_ELEMS(rt), 0);
	TH_REQ(h, &s, 0, "/j", browser, &rs);
	TH_OK("browser", th_v_gzip(&rs, 200, body, len, TH_E));
	th_reply_free(&rs);
	TH_REQ(h, &s, 0, "/j", zstd_only, &rs);
	TH_OK("zstd only", th_v_identity(&rs, 200, body, len, TH_E));
	TH_OK("zstd only", th_v_vary_ae(&rs, NULL, TH_E));
	th_reply_free(&rs);
	st = th_stats(s.gz);
	ck_assert_uint_eq(st.coded[MHDGZ_CODING_GZIP], 1);
	ck_assert_uint_eq(st.coded[MHDGZ_CODING_ZSTD], 0);
	ck_assert_uint_eq(st.coded[MHDGZ_CODING_BR], 0);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_NOT_ACCEPTED], 1);
	th_site_done(&s, h, body);
}
END_TEST

/* The default handler (mhdgz_new(NULL, ...)) offers zstd, then gzip: a
 * browser's Accept-Encoding gets zstd, a gzip client gzip, a client that
 * ranks zstd lower gzip; each body decodes byte for byte with the
 * reference decoders (th_v_coded) and carries Vary. Without zstd built,
 * gzip alone. */
START_TEST(test_default_codings)
{
	const size_t len = 8000;
	uint8_t *body = tu_payload(len, TU_JSON, 9);
	struct th_route rt[] = {
		{ .path = "/j",
		  .status = 200,
		  .body = body,
		  .body_len = len,
		  .hdr = { "Content-Type", "application/json" } },
	};
	const bool zstd = tu_coding_available(MHDGZ_CODING_ZSTD);
	static const struct {
		const char *ae;
		const char *want; /* with zstd built */
	} t[] = {
		{ "Accept-Encoding: gzip, deflate, br, zstd", "zstd" },
		{ "Accept-Encoding: gzip", "gzip" },
		{ "Accept-Encoding: zstd;q=0.5, gzip", "gzip" },
		{ "Accept-Encoding: zstd", "zstd" },
		{ "Accept-Encoding: *", "zstd" },
	};
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	char err[512];
	struct mhdgz_stats st;
	enum mhdgz_coding order[MHDGZ_CODING_COUNT];
	uint64_t out[MHDGZ_CODING_COUNT] = { 0 }, in[MHDGZ_CODING_COUNT] = { 0 };
	size_t i;

	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	if (zstd) {
		ck_assert_uint_eq(tu_codings(s.gz, order, MHDGZ_CODING_COUNT), 2);
		ck_assert_int_eq(order[0], MHDGZ_CODING_ZSTD);
		ck_assert_int_eq(order[1], MHDGZ_CODING_GZIP);
	} else {
		ck_assert_uint_eq(tu_codings(s.gz, order, MHDGZ_CODING_COUNT), 1);
		ck_assert_int_eq(order[0], MHDGZ_CODING_GZIP);
	}
	for (i = 0; i < N_ELEMS(t); i++) {
		const char *hd[] = { t[i].ae, NULL };
		const char *want = zstd ? t[i].want : "gzip";

		TH_REQ(h, &s, 0, "/j", hd, &rs);
		if (!zstd && strcmp(t[i].ae, "Accept-Encoding: zstd") == 0)
			TH_OK(t[i].ae, th_v_identity(&rs, 200, body, len, TH_E));
		else
			TH_OK(t[i].ae, th_v_coded(&rs, want, 200, body, len, TH_E));
		TH_OK(t[i].ae, th_v_vary_ae(&rs, NULL, TH_E));
		if (th_header(&rs, "Content-Encoding", NULL)) {
			int k = strcmp(want, "zstd") == 0 ? MHDGZ_CODING_ZSTD : MHDGZ_CODING_GZIP;

			in[k] += len;
			out[k] += rs.body_len;
		}
		th_reply_free(&rs);
	}
	st = th_stats(s.gz);
	/* Per coding, the bytes before and after (the demo's chart). */
	for (i = 0; i < MHDGZ_CODING_COUNT; i++) {
		ck_assert_uint_eq(st.coded_bytes_in[i], in[i]);
		ck_assert_uint_eq(st.coded_bytes_out[i], out[i]);
	}
	/* A browser's HEAD: GET's coding and coded length, from the kept
	 * variant. */
	{
		const char *hd[] = { t[0].ae, NULL };
		char cl[32];

		TH_REQ(h, &s, TH_HEAD, "/j", hd, &rs);
		snprintf(cl, sizeof cl, "%llu",
			 (unsigned long long)(zstd ? out[MHDGZ_CODING_ZSTD] / 3
						   : out[MHDGZ_CODING_GZIP] / 4));
		ck_assert_str_eq(th_header(&rs, "Content-Encoding", NULL), zstd ? "zstd" : "gzip");
		ck_assert_str_eq(th_header(&rs, "Content-Length", NULL), cl);
		ck_assert_uint_eq(rs.body_len, 0);
		th_reply_free(&rs);
	}
	ck_assert_uint_eq(st.coded[MHDGZ_CODING_ZSTD], zstd ? 3 : 0);
	ck_assert_uint_eq(st.coded[MHDGZ_CODING_GZIP], zstd ? 2 : 4);
	ck_assert_uint_eq(st.coded[MHDGZ_CODING_BR], 0);
	th_site_done(&s, h, body);
}
END_TEST

/* Length hiding with the default codings: a browser gets gzip, padded
 * (the padding lives in the gzip header; zstd counts as refused). */
START_TEST(test_default_codings_padded)
{
	const size_t len = 8000;
	uint8_t *body = tu_payload(len, TU_JSON, 10);
	struct th_route rt[] = {
		{ .path = "/j",
		  .status = 200,
		  .body = body,
		  .body_len = len,
		  .hdr = { "Content-Type", "application/json" } },
	};
	struct mhdgz_options o = th_opts();
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	char err[512];
	const char *browser[] = { "Accept-Encoding: gzip, deflate, br, zstd", NULL };
	struct mhdgz_stats st;
	uint8_t *dec = NULL;
	size_t dec_len = 0;

	o.flags = MHDGZ_F_LENGTH_HIDING;
	th_site_start(&s, &o, rt, N_ELEMS(rt), 0);
	TH_REQ(h, &s, 0, "/j", browser, &rs);
	ck_assert_int_eq(rs.status, 200);
	ck_assert_str_eq(th_header(&rs, "Content-Encoding", NULL), "gzip");
	TH_OK("browser", th_v_vary_ae(&rs, NULL, TH_E));
	ck_assert_uint_gt(rs.body_len, 10);
	ck_assert_uint_eq(rs.body[3], 0x10); /* FLG FCOMMENT: the padding */
	ck_assert_int_eq(tu_gunzip(rs.body, rs.body_len, &dec, &dec_len), 0);
	ck_assert_uint_eq(dec_len, len);
	ck_assert_mem_eq(dec, body, len);
	free(dec);
	th_reply_free(&rs);
	st = th_stats(s.gz);
	ck_assert_uint_eq(st.padded, 1);
	ck_assert_uint_eq(st.coded[MHDGZ_CODING_GZIP], 1);
	ck_assert_uint_eq(st.coded[MHDGZ_CODING_ZSTD], 0);
	th_site_done(&s, h, body);
}
END_TEST

/* mhdgz_new(o) fails with rc and mhdgz_strerror(rc) is exactly want. */
static void
expect_refused(const struct mhdgz_options *o, int rc, const char *want)
{
	struct mhdgz *gz = NULL;

	ck_assert_int_eq(mhdgz_new(o, &gz), rc);
	ck_assert_ptr_null(gz);
	ck_assert_str_eq(mhdgz_strerror(rc), want);
}

/* An option mhdgz_new() refuses is named with what it allows, in the
 * message mhdgz_strerror() gives for the code on this thread; a handler
 * made afterwards clears it. */
START_TEST(test_option_errors)
{
	static const uint8_t key[8];
	struct mhdgz_options o;
	struct mhdgz *gz = NULL;
	char want[96];

	o = th_opts();
	o.gzip.backend = (enum mhdgz_backend)7;
	expect_refused(&o, MHDGZ_EINVAL, "gzip.backend: 7 is outside 0..3");
	o = th_opts();
	o.gzip.backend = MHDGZ_BACKEND_ZLIB;
	o.gzip.level = 10;
	expect_refused(&o, MHDGZ_EINVAL, "gzip.level: 10 is outside 1..9");
	o = th_opts();
	o.gzip.stream_window_bits = 8;
	expect_refused(&o, MHDGZ_EINVAL, "gzip.stream_window_bits: 8 is outside 9..15");
	o = th_opts();
	o.gzip.event_mem_level = 10;
	expect_refused(&o, MHDGZ_EINVAL, "gzip.event_mem_level: 10 is outside 1..9");
	o = th_opts();
	o.zstd.level = 23;
	if (tu_coding_available(MHDGZ_CODING_ZSTD))
		expect_refused(&o, MHDGZ_EINVAL, "zstd.level: 23 is outside 1..19");
	else
		expect_refused(&o, MHDGZ_ENOTSUP, "zstd.level: zstd is not compiled in");
	o = th_opts();
	o.br.level = -1;
	if (tu_coding_available(MHDGZ_CODING_BR))
		expect_refused(&o, MHDGZ_EINVAL, "br.level: -1 is outside 1..11");
	o = th_opts();
	o.etag_policy = (enum mhdgz_etag_policy)9;
	expect_refused(&o, MHDGZ_EINVAL, "etag_policy: 9 is outside 0..3");
	o = th_opts();
	o.flags = 0x1u;
	expect_refused(&o, MHDGZ_EINVAL, "flags: 0x1 is not an MHDGZ_F_* flag");
	o = th_opts();
	o.padding.max_nbytes = 65537;
	expect_refused(&o, MHDGZ_EINVAL, "padding.max_nbytes: 65537 is outside 1..65536");
	o = th_opts();
	o.padding.key = key;
	o.padding.key_nbytes = sizeof key;
	expect_refused(&o, MHDGZ_EINVAL, "padding.key_nbytes: 8 is outside 16..64");
	o = th_opts();
	o.codings = "gzip, gzip";
	expect_refused(&o, MHDGZ_EINVAL,
		       "codings: \"gzip\" is not one of gzip, zstd, br (each once)");
	o = th_opts();
	o.codings = "gzip;q=1";
	expect_refused(&o, MHDGZ_EINVAL,
		       "codings: \"gzip;q=1\" is not one of gzip, zstd, br (each once)");
	o = th_opts();
	o.size = 1;
	snprintf(want, sizeof want, "size: 1 is not sizeof(struct mhdgz_options), %zu", sizeof o);
	expect_refused(&o, MHDGZ_EINVAL, want);
	ck_assert_int_eq(mhdgz_new(NULL, NULL), MHDGZ_EINVAL);
	ck_assert_str_eq(mhdgz_strerror(MHDGZ_EINVAL), "gz_ret: NULL");
	/* Another code keeps its own words; a handler made clears the detail. */
	ck_assert_str_eq(mhdgz_strerror(MHDGZ_ENOMEM), "out of memory");
	o = th_opts();
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	ck_assert_str_eq(mhdgz_strerror(MHDGZ_EINVAL), "invalid argument");
	mhdgz_free(gz);
}
END_TEST

/* mhdgz_coding_info() with a handle: enabled, level in use and rank in
 * the order of preference; without, what the build offers. */
START_TEST(test_coding_info)
{
	struct mhdgz_options o = th_opts();
	struct mhdgz_coding_info ci = { .size = sizeof ci };
	struct mhdgz_backend_info bi = { .size = sizeof bi };
	struct mhdgz *gz = NULL;

	ck_assert_int_eq(mhdgz_backend_info(MHDGZ_BACKEND_ZLIB, &bi), 0);
	o.gzip.backend = MHDGZ_BACKEND_ZLIB;
	o.gzip.level = 3;
	if (tu_coding_available(MHDGZ_CODING_ZSTD) && tu_coding_available(MHDGZ_CODING_BR)) {
		o.codings = "br, gzip";
		o.br.level = 4;
		o.zstd.level = 7; /* checked, not offered */
	} else {
		o.codings = "gzip"; /* gzip alone (the default offers zstd too) */
	}
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	ck_assert_int_eq(mhdgz_coding_info(gz, MHDGZ_CODING_GZIP, &ci), 0);
	ck_assert_str_eq(ci.name, "gzip");
	ck_assert(ci.available == 1 && ci.enabled == 1 && ci.level == 3);
	ck_assert(ci.level_min == 1 && ci.level_max == 9 && ci.level_default == 6);
	ck_assert_int_eq(ci.rank, strcmp(o.codings, "gzip") ? 1 : 0);
	ck_assert_int_eq(mhdgz_coding_info(gz, MHDGZ_CODING_ZSTD, &ci), 0);
	ck_assert_str_eq(ci.name, "zstd");
	ck_assert(ci.enabled == 0 && ci.level == 0 && ci.rank == -1);
	if (strcmp(o.codings, "gzip") != 0) {
		ck_assert_int_eq(mhdgz_coding_info(gz, MHDGZ_CODING_BR, &ci), 0);
		ck_assert(ci.available == 1 && ci.enabled == 1 && ci.level == 4 && ci.rank == 0);
		ck_assert(ci.level_min == 1 && ci.level_max == 11 && ci.level_default == 5);
	}
	ck_assert_int_eq(mhdgz_coding_info(NULL, MHDGZ_CODING_GZIP, &ci), 0);
	ck_assert(ci.enabled == 0 && ci.level == 0 && ci.rank == -1);
	ci.size = 0;
	ck_assert_int_eq(mhdgz_coding_info(gz, MHDGZ_CODING_GZIP, &ci), MHDGZ_EINVAL);
	mhdgz_free(gz);
}
END_TEST

struct ck_case
hnd_codings_case(void)
{
	return (struct ck_case){ "codings",
				 CK_CASE_TIMEOUT,
				 { { test_negotiation_table, 0, (int)N_ELEMS(neg_cases) },
				   { test_options, 0, 0 },
				   { test_select_caches, 0, 0 },
				   { test_e2e_rules, 0, 3 },
				   { test_gzip_alone_unchanged, 0, 0 },
				   { test_default_codings, 0, 0 },
				   { test_default_codings_padded, 0, 0 },
				   { test_option_errors, 0, 0 },
				   { test_coding_info, 0, 0 } } };
}
