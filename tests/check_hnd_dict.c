/* check_hnd_dict.c: RFC 9842 compression dictionaries: match patterns, Available-Dictionary parsing, registration, and dcz end to end (header bytes, decoding with the dictionary, fallbacks, Vary, cache, stats). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <nettle/sha2.h>
#include <nettle/base64.h>
#include "hnd_negotiate.h"
#include "hnd_plan.h"
#include "hnd_queue.h"
#include "hnd_handle.h"
#include "hnd_repr.h"
#include "hnd_dict.h"
#include "gz_dict.h"
#include "check_suites.h"
#include "info.h"
#include "harness.h"
#include "testutil.h"


/* The SHA-256 a dictionary was registered under (what a client sends as
 * Available-Dictionary). */
static int
dict_sha256(const struct mhdgz_dictionary *d, uint8_t h[32])
{
	memcpy(h, d->hash, 32);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The pattern subset.                                                      */

static const struct {
	const char *pat, *path;
	bool want;
} match_cases[] = {
	{ "/js/app.js", "/js/app.js", true },
	{ "/js/app.js", "/js/app.jsx", false },
	{ "/js/app.js", "/JS/app.js", false }, /* case-sensitive */
	{ "/js/*", "/js/", true },
	{ "/js/*", "/js/a/b/c.js", true }, /* '*' crosses '/' */
	{ "/js/*", "/css/a.css", false },
	{ "/js/app.*.js", "/js/app.v2.js", true },
	{ "/js/app.*.js", "/js/app..js", true },
	{ "/js/app.*.js", "/js/app.v2.css", false },
	{ "/*/app.js", "/x/y/app.js", true },
	{ "*", "/anything", true },
	{ "/a*b*c", "/aXbYc", true },
	{ "/a*b*c", "/aXbYcZ", false },
	{ "/a*a*a*a*b", "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false },
	{ "/", "/", true },
	{ "/", "", false },
};

START_TEST(test_match_table)
{
	ck_assert_msg(hnd_dict_match(match_cases[_i].pat, match_cases[_i].path) ==
			      match_cases[_i].want,
		      "%s ~ %s", match_cases[_i].pat, match_cases[_i].path);
}
END_TEST

/* SHA-256 of "abc" (FIPS 180-2 example) in base64. */
#define ABC_B64 "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="

START_TEST(test_hash_parse)
{
	static const uint8_t abc[32] = { 0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea,
					 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
					 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c,
					 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad };
	static const char *const bad[] = {
		ABC_B64,                                            /* no colons */
		":" ABC_B64,                                        /* one */
		"::",                                               /* empty */
		":YWJj:",                                           /* 3 bytes */
		":ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=AA:", /* too long */
		":ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0=:",   /* base64url */
		":ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAF=0=:",   /* '=' inside */
		"\"" ABC_B64 "\"",                                  /* a string */
	};
	uint8_t h[32];
	size_t i;

	/* dcz's ETag suffix names the resource too (If-None-Match). */
	ck_assert_int_eq(hnd_etag_match("\"x-dcz-0123abcd\"", "\"x\"", 0), 1);
	ck_assert_int_eq(hnd_etag_match("\"x-dcz-0123abcG\"", "\"x\"", 0), 0);
	ck_assert_int_eq(hnd_etag_match("\"x-dcz-0123abc\"", "\"x\"", 0), 0);
	ck_assert_int_eq(hnd_etag_match("\"x-dcz\"", "\"x\"", 0), 0);
	ck_assert(hnd_dict_parse_hash(":" ABC_B64 ":", h));
	ck_assert_mem_eq(h, abc, 32);
	memset(h, 0, sizeof h);
	ck_assert(hnd_dict_parse_hash(" \t:ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0: ", h));
	ck_assert_mem_eq(h, abc, 32);
	for (i = 0; i < N_ELEMS(bad); i++)
		ck_assert_msg(!hnd_dict_parse_hash(bad[i], h), "%s", bad[i]);
}
END_TEST

START_TEST(test_add_rules)
{
	static const char *const bad_match[] = { "",       "js/*",   "/a b",        "/:name",
						 "/(a|b)", "/{a}",   "/a?",         "/a+",
						 "/a\\*",  "/\"q\"", "https://x/a", "/a#b" };
	static const char *const dest_ok[] = { "script", "style", NULL };
	static const char *const dest_bad[] = { "Script", NULL };
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct mhdgz_dictionary_options o = { .size = sizeof o, .match = "/js/*" };
	const struct mhdgz_dictionary *d = NULL;
	struct MHD_Response *r;
	uint8_t h[32], want[32];
	struct sha256_ctx ctx;
	size_t i;

	ck_assert_int_eq(mhdgz_dictionary_add(NULL, "abc", 3, &o, &d), MHDGZ_EINVAL);
	ck_assert_int_eq(mhdgz_dictionary_add(gz, "abc", 0, &o, &d), MHDGZ_EINVAL);
	ck_assert_int_eq(mhdgz_dictionary_add(gz, NULL, 3, &o, &d), MHDGZ_EINVAL);
	o.size = 1;
	ck_assert_int_eq(mhdgz_dictionary_add(gz, "abc", 3, &o, &d), MHDGZ_EINVAL);
	o.size = sizeof o;
	for (i = 0; i < N_ELEMS(bad_match); i++) {
		o.match = bad_match[i];
		ck_assert_msg(mhdgz_dictionary_add(gz, "abc", 3, &o, &d) == MHDGZ_EINVAL, "%s",
			      bad_match[i]);
	}
	o.match = "/js/*";
	o.id = "has\"quote";
	ck_assert_int_eq(mhdgz_dictionary_add(gz, "abc", 3, &o, &d), MHDGZ_EINVAL);
	o.id = NULL;
	o.match_dest = dest_bad;
	ck_assert_int_eq(mhdgz_dictionary_add(gz, "abc", 3, &o, &d), MHDGZ_EINVAL);
	ck_assert_ptr_null(atomic_load(&gz->dicts));
	if (!tu_coding_available(MHDGZ_CODING_ZSTD)) {
		o.match_dest = NULL;
		ck_assert_int_eq(mhdgz_dictionary_add(gz, "abc", 3, &o, &d), MHDGZ_ENOTSUP);
		mhdgz_free(gz);
		return;
	}
	o.match_dest = dest_ok;
	o.id = "v1";
	ck_assert_int_eq(mhdgz_dictionary_add(gz, "abc", 3, &o, &d), 0);
	ck_assert_int_eq(dict_sha256(d, h), 0);
	sha256_init(&ctx);
	sha256_update(&ctx, 3, (const uint8_t *)"abc");
	sha256_digest(&ctx, 32, want);
	ck_assert_mem_eq(h, want, 32);
	r = MHD_create_response_from_buffer(3, (void *)"abc", MHD_RESPMEM_PERSISTENT);
	ck_assert_int_eq(mhdgz_response_use_as_dictionary(r, d), 0);
	ck_assert_str_eq(MHD_get_response_header(r, "Use-As-Dictionary"),
			 "match=\"/js/*\", match-dest=(\"script\" \"style\"), id=\"v1\"");
	MHD_destroy_response(r);

	/* A response's own body as the dictionary, advertised on it. */
	{
		static const char body[] = "function v1() { return 1; }";
		struct mhdgz_dictionary_options o2 = { .size = sizeof o2, .match = "/v*.js" };
		struct hnd_request rq = { .flags = 0 };
		struct hnd_result res;
		struct MHD_Response *q;
		int fd = th_temp_file(body, sizeof body - 1);

		r = mhdgz_response_from_buffer(gz, sizeof body - 1, (void *)body,
					       MHD_RESPMEM_PERSISTENT);
		ck_assert_int_eq(mhdgz_dictionary_add_response(NULL, r, &o2, &d), MHDGZ_EINVAL);
		ck_assert_int_eq(mhdgz_dictionary_add_response(gz, r, &o2, &d), 0);
		ck_assert_str_eq(MHD_get_response_header(r, "Use-As-Dictionary"),
				 "match=\"/v*.js\"");
		sha256_init(&ctx);
		sha256_update(&ctx, sizeof body - 1, (const uint8_t *)body);
		sha256_digest(&ctx, 32, want);
		ck_assert_int_eq(dict_sha256(d, h), 0);
		ck_assert_mem_eq(h, want, 32);
		/* Once queued, its fields are read-only. */
		hnd_accept_parse(NULL, 0, &rq.acc);
		hnd_select(gz, &rq, 200, r, &q, &res);
		ck_assert_int_eq(mhdgz_dictionary_add_response(gz, r, &o2, &d), MHDGZ_EINVAL);
		MHD_destroy_response(r);
		/* A file response's bytes are read now. */
		r = mhdgz_response_from_fd(gz, sizeof body - 1, fd);
		ck_assert_ptr_nonnull(r);
		ck_assert_int_eq(mhdgz_dictionary_add_response(gz, r, &o2, &d), 0);
		ck_assert_int_eq(dict_sha256(d, h), 0);
		ck_assert_mem_eq(h, want, 32);
		MHD_destroy_response(r);
		/* Not made by this handler. */
		r = MHD_create_response_from_buffer(3, (void *)"abc", MHD_RESPMEM_PERSISTENT);
		ck_assert_int_eq(mhdgz_dictionary_add_response(gz, r, &o2, &d), MHDGZ_EINVAL);
		MHD_destroy_response(r);
	}
	mhdgz_free(gz);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* End to end: a v1 script as the dictionary, v2 served as dcz.             */

struct fixture {
	struct MHD_Response *v1, *v2, *css; /* css: v2's bytes at a path no pattern matches */
};

static enum MHD_Result
route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct fixture *fx = s->cls;
	struct MHD_Response *r = strstr(url, ".css") ? fx->css
				 : strstr(url, "v1") ? fx->v1
						     : fx->v2;
	struct mhdgz_request req = { .size = sizeof req,
				     .method = method,
				     .url = url,
				     .flags = r == fx->v2 ? MHDGZ_REQUEST_PRECONDITIONS : 0 };

	return mhdgz_queue_response_ex(s->gz, c, &req, 200, r, NULL);
}

/* Decode a dcz body with libzstd and the dictionary as raw content. */
static uint8_t *
dcz_decode(const uint8_t *in, size_t in_len, const void *dict, size_t dict_len, size_t cap,
	   size_t *out_len)
{
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	uint8_t *out = malloc(cap);
	size_t r;

	ck_assert_ptr_nonnull(dc);
	ck_assert_uint_ge(in_len, 40);
	ck_assert(!ZSTD_isError(ZSTD_DCtx_loadDictionary_advanced(dc, dict, dict_len,
								  ZSTD_dlm_byRef,
								  ZSTD_dct_rawContent)));
	r = ZSTD_decompressDCtx(dc, out, cap, in + 40, in_len - 40);
	ck_assert_msg(!ZSTD_isError(r), "%s", ZSTD_getErrorName(r));
	*out_len = r;
	ZSTD_freeDCtx(dc);
	return out;
}

START_TEST(test_dcz_e2e)
{
	const size_t len = 60000;
	uint8_t *v1 = tu_payload(len, TU_TEXT, 21), *v2 = malloc(len), *dec;
	struct mhdgz_options o = th_opts();
	struct mhdgz *gz;
	const struct mhdgz_dictionary *d;
	struct mhdgz_dictionary_options dopt = { .size = sizeof dopt,
						 .match = "/js/app.*.js",
						 .id = "app" };
	struct fixture fx;
	struct th_server s;
	struct th_reply rs = { 0 };
	CURL *h = th_curl_new();
	uint8_t hash[32];
	char b64[BASE64_ENCODE_RAW_LENGTH(32) + 1], ad[96], bad_ad[96], err[512], etag[64];
	const char *ae = "Accept-Encoding: gzip, deflate, br, zstd, dcz";
	const char *hd_dcz[] = { ae, ad, NULL, NULL };
	size_t dec_len, dcz_len, i;
	struct mhdgz_stats st;

	if (!tu_coding_available(MHDGZ_CODING_ZSTD)) {
		curl_easy_cleanup(h);
		free(v1);
		free(v2);
		return;
	}
	/* v2: v1 with a few edits spread over it. */
	memcpy(v2, v1, len);
	for (i = 0; i < len; i += 5000)
		memcpy(v2 + i, "/* v2 changed */", 16);
	o.codings = "zstd, gzip";
	o.etag_policy = MHDGZ_ETAG_SUFFIX;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	ck_assert_int_eq(mhdgz_dictionary_add(gz, v1, len, &dopt, &d), 0);
	ck_assert_int_eq(dict_sha256(d, hash), 0);
	base64_encode_raw(b64, 32, hash);
	b64[sizeof b64 - 1] = '\0';
	snprintf(ad, sizeof ad, "Available-Dictionary: :%s:", b64);
	b64[0] = b64[0] == 'A' ? 'B' : 'A'; /* another hash */
	snprintf(bad_ad, sizeof bad_ad, "Available-Dictionary: :%s:", b64);
	fx.v1 = mhdgz_response_from_buffer(gz, len, v1, MHD_RESPMEM_PERSISTENT);
	fx.v2 = mhdgz_response_from_buffer(gz, len, v2, MHD_RESPMEM_PERSISTENT);
	fx.css = mhdgz_response_from_buffer(gz, len, v2, MHD_RESPMEM_PERSISTENT);
	ck_assert_ptr_nonnull(fx.v1);
	ck_assert_ptr_nonnull(fx.v2);
	ck_assert_ptr_nonnull(fx.css);
	ck_assert_int_eq(MHD_add_response_header(fx.css, "Content-Type", "text/css"), MHD_YES);
	ck_assert_int_eq(MHD_add_response_header(fx.v1, "Content-Type", "text/javascript"),
			 MHD_YES);
	ck_assert_int_eq(MHD_add_response_header(fx.v2, "Content-Type", "text/javascript"),
			 MHD_YES);
	ck_assert_int_eq(MHD_add_response_header(fx.v2, "ETag", "\"v2\""), MHD_YES);
	ck_assert_int_eq(mhdgz_response_use_as_dictionary(fx.v1, d), 0);
	th_start(&s, gz, 0, route, &fx);

	/* The dictionary itself: zstd, advertised, Vary on both fields. */
	hd_dcz[1] = NULL; /* a first visit: no dictionary yet */
	TH_REQ(h, &s, 0, "/js/app.v1.js", hd_dcz, &rs);
	hd_dcz[1] = ad;
	TH_OK("v1", th_v_coded(&rs, "zstd", 200, v1, len, TH_E));
	ck_assert_str_eq(th_header(&rs, "Use-As-Dictionary", NULL),
			 "match=\"/js/app.*.js\", id=\"app\"");
	ck_assert_str_eq(th_header(&rs, "Vary", NULL), "Accept-Encoding, Available-Dictionary");
	th_reply_free(&rs);

	/* v2 with the dictionary: dcz, byte-exact header, decodes. */
	snprintf(etag, sizeof etag, "\"v2-dcz-%02x%02x%02x%02x\"", hash[0], hash[1], hash[2],
		 hash[3]);
	for (i = 0; i < 2; i++) { /* built, then cached */
		TH_REQ(h, &s, 0, "/js/app.v2.js", hd_dcz, &rs);
		ck_assert_int_eq(rs.status, 200);
		ck_assert_str_eq(th_header(&rs, "Content-Encoding", NULL), "dcz");
		ck_assert_str_eq(th_header(&rs, "Vary", NULL),
				 "Accept-Encoding, Available-Dictionary");
		ck_assert_str_eq(th_header(&rs, "ETag", NULL), etag);
		ck_assert_ptr_null(th_header(&rs, "Use-As-Dictionary", NULL));
		ck_assert_uint_gt(rs.body_len, 40);
		ck_assert_mem_eq(rs.body, "\x5e\x2a\x4d\x18\x20\x00\x00\x00", 8);
		ck_assert_mem_eq(rs.body + 8, hash, 32);
		/* Then a zstd frame: magic 28 b5 2f fd. */
		ck_assert_mem_eq(rs.body + 40, "\x28\xb5\x2f\xfd", 4);
		dec = dcz_decode(rs.body, rs.body_len, v1, len, len + 1, &dec_len);
		ck_assert_uint_eq(dec_len, len);
		ck_assert_mem_eq(dec, v2, len);
		free(dec);
		dcz_len = rs.body_len;
		th_reply_free(&rs);
	}
	/* The edits cost little against v1: far below plain zstd. */
	ck_assert_uint_lt(dcz_len, 1000);

	/* Fallbacks: each gets the ordinary zstd, and the same Vary. */
	{
		const char *wrong_hash[] = { ae, bad_ad, NULL };
		const char *no_dcz[] = { "Accept-Encoding: gzip, zstd", ad, NULL };
		const char *dcz_zero[] = { "Accept-Encoding: zstd, dcz;q=0", ad, NULL };
		const char *dcz_low[] = { "Accept-Encoding: zstd, dcz;q=0.5", ad, NULL };
		const char *id_first[] = { "Accept-Encoding: identity, zstd;q=0.5, dcz;q=0.5", ad,
					   NULL };
		const char *wrong_id[] = { ae, ad, "Dictionary-ID: \"other\"", NULL };
		const char *no_ad[] = { ae, NULL };
		const char *malformed[] = { ae, "Available-Dictionary: abc", NULL };
		const struct {
			const char *ctx, *path;
			const char *const *hd;
		} fb[] = {
			{ "wrong hash", "/js/app.v2.js", wrong_hash },
			{ "no dcz", "/js/app.v2.js", no_dcz },
			{ "dcz;q=0", "/js/app.v2.js", dcz_zero },
			{ "dcz below zstd", "/js/app.v2.js", dcz_low },
			{ "wrong id", "/js/app.v2.js", wrong_id },
			{ "no Available-Dictionary", "/js/app.v2.js", no_ad },
			{ "malformed", "/js/app.v2.js", malformed },
			{ "URL not matching", "/css/app.v2.css", hd_dcz },
		};
		for (i = 0; i < N_ELEMS(fb); i++) {
			/* A path no pattern matches could never be dcz. */
			bool css = strstr(fb[i].path, ".css") != NULL;

			TH_REQ(h, &s, 0, fb[i].path, fb[i].hd, &rs);
			TH_OK(fb[i].ctx, th_v_coded(&rs, "zstd", 200, v2, len, TH_E));
			ck_assert_msg(strcmp(th_header(&rs, "Vary", NULL),
					     css ? "Accept-Encoding"
						 : "Accept-Encoding, Available-Dictionary") == 0,
				      "%s", fb[i].ctx);
			th_reply_free(&rs);
		}
		/* identity preferred: identity, whatever dcz's q. */
		TH_REQ(h, &s, 0, "/js/app.v2.js", id_first, &rs);
		TH_OK("identity first", th_v_identity(&rs, 200, v2, len, TH_E));
		ck_assert_str_eq(th_header(&rs, "Vary", NULL),
				 "Accept-Encoding, Available-Dictionary");
		th_reply_free(&rs);
	}
	/* The right id is fine. */
	hd_dcz[2] = "Dictionary-ID: \"app\"";
	TH_REQ(h, &s, 0, "/js/app.v2.js", hd_dcz, &rs);
	ck_assert_str_eq(th_header(&rs, "Content-Encoding", NULL), "dcz");
	ck_assert_uint_eq(rs.body_len, dcz_len);
	th_reply_free(&rs);
	/* A conditional GET naming the dcz ETag: 304 with that ETag, dcz's
	 * length (libmicrohttpd 0.9.75 sends one), Vary, no Content-Encoding;
	 * the zstd ETag gets the same 304 (it is the same resource). */
	{
		char inm[96];
		const char *cond[] = { ae, ad, inm, NULL };

		snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
		TH_REQ(h, &s, 0, "/js/app.v2.js", cond, &rs);
		ck_assert_int_eq(rs.status, 304);
		ck_assert_str_eq(th_header(&rs, "ETag", NULL), etag);
		ck_assert_ptr_null(th_header(&rs, "Content-Encoding", NULL));
		ck_assert_str_eq(th_header(&rs, "Vary", NULL),
				 "Accept-Encoding, Available-Dictionary");
		TH_OK("dcz 304", th_v_304_length(&rs, dcz_len, TH_E));
		th_reply_free(&rs);
		snprintf(inm, sizeof inm, "If-None-Match: \"v2-zstd\"");
		TH_REQ(h, &s, 0, "/js/app.v2.js", cond, &rs);
		ck_assert_int_eq(rs.status, 304);
		ck_assert_str_eq(th_header(&rs, "ETag", NULL), etag);
		th_reply_free(&rs);
		/* A client that accepts dcz alone has the dcz 200 too: the
		 * same 304 (RFC 9110 section 15.4.5), not the identity one. */
		{
			const char *only[] = { "Accept-Encoding: dcz", ad, inm, NULL };

			snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
			TH_REQ(h, &s, 0, "/js/app.v2.js", only, &rs);
			ck_assert_int_eq(rs.status, 304);
			ck_assert_str_eq(th_header(&rs, "ETag", NULL), etag);
			TH_OK("dcz-only 304", th_v_304_length(&rs, dcz_len, TH_E));
			th_reply_free(&rs);
		}
	}
	/* HEAD: the same fields and length. */
	TH_REQ(h, &s, TH_HEAD, "/js/app.v2.js", hd_dcz, &rs);
	ck_assert_str_eq(th_header(&rs, "Content-Encoding", NULL), "dcz");
	th_reply_free(&rs);

	th_stop(&s);
	st = th_stats(gz);
	ck_assert_uint_eq(st.dict_hits, 4);
	/* v1 zstd + 8 fallbacks (zstd) + 4 dcz */
	ck_assert_uint_eq(st.coded[MHDGZ_CODING_ZSTD], 13);
	ck_assert_uint_eq(st.compressed, 13);
	/* Compressions: v1 zstd, v2 zstd, v2 dcz, css zstd; the rest cache
	 * hits. */
	ck_assert_uint_eq(st.compressions, 4);
	ck_assert_uint_eq(st.cache_hits, 9);
	ck_assert_uint_gt(st.dict_bytes_saved, 0);
	ck_assert_uint_eq(st.dict_bytes_saved % 4, 0); /* the same saving per hit */
	MHD_destroy_response(fx.v1);
	MHD_destroy_response(fx.v2);
	MHD_destroy_response(fx.css);
	mhdgz_free(gz);
	curl_easy_cleanup(h);
	free(v1);
	free(v2);
}
END_TEST

/* Without dictionaries nothing changes: Vary names Accept-Encoding only,
 * and dcz is never chosen. */
START_TEST(test_no_dicts_unchanged)
{
	const size_t len = 20000;
	uint8_t *v1 = tu_payload(len, TU_TEXT, 22);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct fixture fx;
	struct th_server s;
	struct th_reply rs = { 0 };
	CURL *h = th_curl_new();
	const char *hd[] = { "Accept-Encoding: gzip, dcz", "Available-Dictionary: :" ABC_B64 ":",
			     NULL };
	char err[512];

	fx.v1 = fx.v2 = fx.css = mhdgz_response_from_buffer(gz, len, v1, MHD_RESPMEM_PERSISTENT);
	ck_assert_int_eq(MHD_add_response_header(fx.v1, "Content-Type", "text/plain"), MHD_YES);
	th_start(&s, gz, 0, route, &fx);
	TH_REQ(h, &s, 0, "/js/app.v2.js", hd, &rs);
	TH_OK("no dicts", th_v_gzip(&rs, 200, v1, len, TH_E));
	ck_assert_str_eq(th_header(&rs, "Vary", NULL), "Accept-Encoding");
	th_reply_free(&rs);
	th_stop(&s);
	ck_assert_uint_eq(th_stats(gz).dict_hits, 0);
	MHD_destroy_response(fx.v1);
	mhdgz_free(gz);
	curl_easy_cleanup(h);
	free(v1);
}
END_TEST

/* Every allocation of registration and of the dcz path fails in turn:
 * registration reports MHDGZ_ENOMEM and leaves nothing behind; a request
 * gets dcz, or the ordinary zstd, or identity (the response itself), never
 * a crash; nothing leaks. Through hnd_select, without a daemon. */
START_TEST(test_dcz_faults)
{
	const size_t len = 30000;
	uint8_t *v1 = tu_payload(len, TU_TEXT, 23), *v2 = malloc(len);
	struct mhdgz_options o = th_opts();
	struct mhdgz_dictionary_options dopt = { .size = sizeof dopt, .match = "/a/*" };
	const struct mhdgz_dictionary *d = NULL;
	struct mhdgz *gz;
	struct MHD_Response *r;
	uint8_t hash[32];
	char b64[BASE64_ENCODE_RAW_LENGTH(32) + 1], ad[64];
	const char *lines[1] = { "zstd, dcz" };
	uint64_t k;
	unsigned int got_dcz = 0, got_zstd = 0, got_identity = 0, add_fail = 0;

	if (!tu_coding_available(MHDGZ_CODING_ZSTD)) {
		free(v1);
		free(v2);
		return;
	}
	memcpy(v2, v1, len);
	memcpy(v2 + len / 2, "changed", 7);
	tu_alloc_install(0);
	o.codings = "zstd, gzip";
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	for (k = 1;; k++) { /* registration */
		int rc;

		tu_alloc_fail_at(k);
		rc = mhdgz_dictionary_add(gz, v1, len, &dopt, &d);
		if (!tu_alloc_failed()) {
			ck_assert_int_eq(rc, 0);
			break;
		}
		ck_assert_int_eq(rc, MHDGZ_ENOMEM);
		ck_assert_ptr_null(atomic_load(&gz->dicts));
		add_fail++;
		ck_assert_uint_lt(k, 1000);
	}
	tu_alloc_fail_at(0);
	dict_sha256(d, hash);
	base64_encode_raw(b64, 32, hash);
	b64[sizeof b64 - 1] = '\0';
	snprintf(ad, sizeof ad, ":%s:", b64);
	r = mhdgz_response_from_buffer(gz, len, v2, MHD_RESPMEM_PERSISTENT);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(MHD_add_response_header(r, "Content-Type", "text/plain"), MHD_YES);
	for (k = 1;; k++) { /* a fresh dcz body per request: every allocation in turn */
		struct hnd_request rq = { .flags = HND_REQ_NO_CACHE,
					  .url = "/a/b.js",
					  .avail_dict = ad };
		struct hnd_result res;
		struct MHD_Response *q = NULL;
		const char *ce;
		int rel;

		hnd_accept_parse(lines, 1, &rq.acc);
		tu_alloc_fail_at(k);
		rel = hnd_select(gz, &rq, 200, r, &q, &res);
		ce = MHD_get_response_header(q, "Content-Encoding");
		if (res.dcz) {
			ck_assert_str_eq(ce, "dcz");
			got_dcz++;
		} else if (ce) {
			ck_assert_str_eq(ce, "zstd");
			got_zstd++;
		} else {
			ck_assert_ptr_eq(q, r);
			got_identity++;
		}
		if (rel == HND_RELEASE)
			MHD_destroy_response(q);
		if (!tu_alloc_failed())
			break;
		ck_assert_uint_lt(k, 1000);
	}
	tu_alloc_fail_at(0);
	ck_assert_uint_gt(add_fail, 0);
	ck_assert_uint_gt(got_dcz, 0);
	ck_assert_uint_gt(got_zstd + got_identity, 0);
	MHD_destroy_response(r);
	mhdgz_free(gz);
	ck_assert_int_eq(tu_alloc_live(), 0);
	tu_alloc_uninstall();
	free(v1);
	free(v2);
}
END_TEST

/* The prepared dictionary shared by threads at once (TSan builds check
 * the sharing): each thread queues its own response as dcz and compresses
 * with the dictionary directly, decoding what it got. */
struct par_ctx {
	struct mhdgz *gz;
	const struct mhdgz_dictionary *d;
	const uint8_t *v1, *v2;
	size_t len;
	const char *ad;
	int bad;
};

static void *
par_thread(void *cls)
{
	struct par_ctx *p = cls;
	struct MHD_Response *r = mhdgz_response_from_buffer(p->gz, p->len, (void *)p->v2,
							    MHD_RESPMEM_PERSISTENT);
	const char *lines[1] = { "gzip, zstd, dcz" };
	size_t cap = gz_dcz_bound(p->len), n;
	uint8_t *out = malloc(cap);
	int i;

	if (!r || !out || MHD_add_response_header(r, "Content-Type", "text/plain") != MHD_YES) {
		p->bad++;
		goto out;
	}
	for (i = 0; i < 20; i++) {
		struct hnd_request rq = { .flags = HND_REQ_NO_CACHE,
					  .url = "/p/x",
					  .avail_dict = p->ad };
		struct hnd_result res;
		struct MHD_Response *q;
		size_t dec_len;
		uint8_t *dec;

		hnd_accept_parse(lines, 1, &rq.acc);
		if (hnd_select(p->gz, &rq, 200, r, &q, &res) != 0 || !res.dcz)
			p->bad++;
		if (gz_dcz_compress(p->d->zd, 0, p->v2, p->len, out, cap, &n) != 0) {
			p->bad++;
			continue;
		}
		dec = dcz_decode(out, n, p->v1, p->len, p->len + 1, &dec_len);
		if (dec_len != p->len || memcmp(dec, p->v2, p->len) != 0)
			p->bad++;
		free(dec);
	}
out:
	if (r)
		MHD_destroy_response(r);
	free(out);
	return NULL;
}

START_TEST(test_dcz_threads)
{
	const size_t len = 20000;
	uint8_t *v1 = tu_payload(len, TU_TEXT, 24), *v2 = malloc(len);
	struct mhdgz_options o = th_opts();
	struct mhdgz_dictionary_options dopt = { .size = sizeof dopt, .match = "/p/*" };
	struct par_ctx p[4];
	pthread_t t[4];
	uint8_t hash[32];
	char b64[BASE64_ENCODE_RAW_LENGTH(32) + 1], ad[64];
	const struct mhdgz_dictionary *d;
	struct mhdgz *gz;
	int i;

	if (!tu_coding_available(MHDGZ_CODING_ZSTD)) {
		free(v1);
		free(v2);
		return;
	}
	memcpy(v2, v1, len);
	memcpy(v2 + 100, "threads", 7);
	o.codings = "zstd, gzip";
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	ck_assert_int_eq(mhdgz_dictionary_add(gz, v1, len, &dopt, &d), 0);
	dict_sha256(d, hash);
	base64_encode_raw(b64, 32, hash);
	b64[sizeof b64 - 1] = '\0';
	snprintf(ad, sizeof ad, ":%s:", b64);
	for (i = 0; i < 4; i++) {
		p[i] = (struct par_ctx){ gz, d, v1, v2, len, ad, 0 };
		ck_assert_int_eq(pthread_create(&t[i], NULL, par_thread, &p[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(p[i].bad, 0);
	}
	ck_assert_uint_eq(th_stats(gz).dict_hits, 80);
	mhdgz_free(gz);
	free(v1);
	free(v2);
}
END_TEST

struct ck_case
hnd_dict_case(void)
{
	return (struct ck_case){ "dict",
				 CK_CASE_TIMEOUT,
				 { { test_match_table, 0, (int)N_ELEMS(match_cases) },
				   { test_hash_parse, 0, 0 },
				   { test_add_rules, 0, 0 },
				   { test_dcz_e2e, 0, 0 },
				   { test_dcz_faults, 0, 0 },
				   { test_dcz_threads, 0, 0 },
				   { test_no_dicts_unchanged, 0, 0 } } };
}
