/* check_hnd_threads.c: e2e test of the handler called from eight client threads at once (thread per connection). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "check_suites.h"
#include "harness.h"
#include "testutil.h"

enum { NT_THREADS = 8, NT_REQS = 200, NT_KINDS = 9 };

struct client_ctx {
	struct th_site *s;
	int id;
	const uint8_t *text, *json, *small;
	size_t shared_gz_len;
	uint64_t kinds[NT_KINDS];
	int failed;
	char err[512];
};

static void *
client_main(void *arg)
{
	struct client_ctx *c = arg;
	static const char *const inm_gz[] = { "Accept-Encoding: gzip", "If-None-Match: W/\"p\"",
					      NULL };
	CURL *h = curl_easy_init();
	struct th_reply rs = { 0 };

	if (!h) {
		snprintf(c->err, sizeof c->err, "curl_easy_init");
		c->failed = 1;
		return NULL;
	}
	/* First, all threads at once on a shared response nobody has
	 * compressed yet (the variant is built under contention). */
	th_fetch_ex(h, c->s->port, "/race", 0, th_h_gzip, &rs);
	if (th_v_gzip(&rs, 200, c->json, 24000, c->err, sizeof c->err) != 0)
		c->failed = 1;
	th_reply_free(&rs);
	for (int i = 0; i < NT_REQS && !c->failed; i++) {
		int kind = (i + c->id) % NT_KINDS, rc = 0;
		char e[400] = "";

		c->kinds[kind]++;
		switch (kind) {
		case 0: /* per-request gzip */
			th_fetch_ex(h, c->s->port, "/t", 0, th_h_gzip, &rs);
			rc = th_v_gzip(&rs, 200, c->text, 12000, e, sizeof e);
			break;
		case 1: /* per-request identity */
			th_fetch_ex(h, c->s->port, "/t", 0, NULL, &rs);
			rc = th_v_identity(&rs, 200, c->text, 12000, e, sizeof e);
			if (!rc)
				rc = th_v_vary_ae(&rs, NULL, e, sizeof e);
			break;
		case 2: /* shared gzip */
			th_fetch_ex(h, c->s->port, "/s", 0, th_h_gzip, &rs);
			rc = th_v_gzip(&rs, 200, c->json, 24000, e, sizeof e);
			break;
		case 3: /* shared HEAD */
			th_fetch_ex(h, c->s->port, "/s", TH_HEAD, th_h_gzip, &rs);
			rc = rs.rc != CURLE_OK || rs.status != 200 || rs.body_len != 0 ||
			     !th_header(&rs, "Content-Encoding", NULL) ||
			     th_v_content_length(&rs, c->shared_gz_len, e, sizeof e) != 0;
			if (rc && !e[0])
				snprintf(e, sizeof e, "HEAD: rc %d status %ld body %zu CE %s",
					 (int)rs.rc, rs.status, rs.body_len,
					 th_header(&rs, "Content-Encoding", NULL) ? "yes" : "no");
			break;
		case 4: /* type not compressed */
			th_fetch_ex(h, c->s->port, "/png", 0, th_h_gzip, &rs);
			rc = th_v_identity(&rs, 200, c->text, 12000, e, sizeof e);
			break;
		case 5: /* small */
			th_fetch_ex(h, c->s->port, "/small", 0, th_h_gzip, &rs);
			rc = th_v_identity(&rs, 200, c->small, 300, e, sizeof e);
			break;
		case 6: /* conditional: 304 */
			th_fetch_ex(h, c->s->port, "/p", 0, inm_gz, &rs);
			rc = th_v_no_body(&rs, 304, e, sizeof e);
			break;
		case 7: /* MUST_COPY gzip */
			th_fetch_ex(h, c->s->port, "/c", 0, th_h_gzip, &rs);
			rc = th_v_gzip(&rs, 200, c->text, 12000, e, sizeof e);
			break;
		default: /* MUST_FREE gzip */
			th_fetch_ex(h, c->s->port, "/f", 0, th_h_gzip, &rs);
			rc = th_v_gzip(&rs, 200, c->json, 24000, e, sizeof e);
			break;
		}
		if (rc) {
			snprintf(c->err, sizeof c->err, "thread %d request %d kind %d: %s", c->id,
				 i, kind, e);
			c->failed = 1;
		}
		th_reply_free(&rs);
	}
	curl_easy_cleanup(h);
	return NULL;
}

START_TEST(test_threads)
{
	uint8_t *text = tu_payload(12000, TU_TEXT, 32);
	uint8_t *json = tu_payload(24000, TU_JSON, 32);
	uint8_t *small = tu_payload(300, TU_TEXT, 32);
	struct th_route rt[] = {
		{ .path = "/t",
		  .status = 200,
		  .body = text,
		  .body_len = 12000,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/s",
		  .status = 200,
		  .body = json,
		  .body_len = 24000,
		  .hdr = { "Content-Type", "application/json", "ETag", "\"s\"" },
		  .flags = TH_RT_SHARED },
		{ .path = "/png",
		  .status = 200,
		  .body = text,
		  .body_len = 12000,
		  .hdr = { "Content-Type", "image/png" } },
		{ .path = "/small",
		  .status = 200,
		  .body = small,
		  .body_len = 300,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/p",
		  .status = 200,
		  .body = text,
		  .body_len = 12000,
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"p\"" },
		  .flags = TH_RT_PRECOND,
		  .etag = "\"p\"" },
		{ .path = "/c",
		  .status = 200,
		  .body = text,
		  .body_len = 12000,
		  .mode = MHD_RESPMEM_MUST_COPY,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/f",
		  .status = 200,
		  .body = json,
		  .body_len = 24000,
		  .mode = MHD_RESPMEM_MUST_FREE,
		  .hdr = { "Content-Type", "application/json" } },
		{ .path = "/race",
		  .status = 200,
		  .body = json,
		  .body_len = 24000,
		  .hdr = { "Content-Type", "application/json" },
		  .flags = TH_RT_SHARED },
	};
	struct client_ctx ctx[NT_THREADS];
	pthread_t tid[NT_THREADS];
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	struct mhdgz_stats st;
	uint64_t kinds[NT_KINDS] = { 0 }, want[MHDGZ_REASON_COUNT] = { 0 }, total;
	char err[512];
	size_t gz_len;

	/* Thread per connection: mhdgz is called from 8 threads at once. */
	th_site_start(&s, NULL, rt, N_ELEMS(rt), MHD_USE_THREAD_PER_CONNECTION);
	/* Build the shared variant first, so the counters below are exact. */
	TH_REQ(h, &s, 0, "/s", th_h_gzip, &rs);
	TH_OK("prefetch", th_v_gzip(&rs, 200, json, 24000, TH_E));
	gz_len = rs.body_len;
	th_reply_free(&rs);
	curl_easy_cleanup(h);
	for (int i = 0; i < NT_THREADS; i++) {
		memset(&ctx[i], 0, sizeof ctx[i]);
		ctx[i].s = &s;
		ctx[i].id = i;
		ctx[i].text = text;
		ctx[i].json = json;
		ctx[i].small = small;
		ctx[i].shared_gz_len = gz_len;
		ck_assert_int_eq(pthread_create(&tid[i], NULL, client_main, &ctx[i]), 0);
	}
	for (int i = 0; i < NT_THREADS; i++)
		pthread_join(tid[i], NULL);
	for (int i = 0; i < NT_THREADS; i++) {
		ck_assert_msg(!ctx[i].failed, "%s", ctx[i].err);
		for (int k = 0; k < NT_KINDS; k++)
			kinds[k] += ctx[i].kinds[k];
	}
	total = 0;
	for (int k = 0; k < NT_KINDS; k++)
		total += kinds[k];
	ck_assert_uint_eq(total, NT_THREADS * NT_REQS);
	/* prefetch + /race + the gzip kinds */
	want[MHDGZ_COMPRESSED] = 1 + NT_THREADS + kinds[0] + kinds[2] + kinds[3] + kinds[7] +
				 kinds[8];
	want[MHDGZ_SKIP_NOT_ACCEPTED] = kinds[1];
	want[MHDGZ_SKIP_TYPE] = kinds[4];
	want[MHDGZ_SKIP_SMALL] = kinds[5];
	want[MHDGZ_SKIP_STATUS] = kinds[6];
	st = th_stats(s.gz);
	th_expect_reasons(&st, want);
	ck_assert_uint_eq(st.responses, total + 1 + NT_THREADS);
	ck_assert_uint_eq(st.compressed, want[MHDGZ_COMPRESSED]);
	/* /race is built once, or (if racing builds are allowed) up to once
	 * per thread; everything else is exact. A 304 of a fresh response
	 * with its body (kind 6) needs the gzip 200's Content-Length
	 * (libmicrohttpd 0.9.75 always sends one on a 304): the first one
	 * compresses, and the handle remembers the length under the strong
	 * ETag "p", so the others do not; threads that miss at once may each
	 * compress (at most one per thread). */
	ck_assert_uint_ge(st.compressions, 2 + kinds[0] + (kinds[6] > 0) + kinds[7] + kinds[8]);
	ck_assert_uint_le(st.compressions, 1 + NT_THREADS + kinds[0] +
						   (kinds[6] > 0 ? NT_THREADS : 0) + kinds[7] +
						   kinds[8]);
	ck_assert_uint_ge(st.cache_hits, kinds[2] + kinds[3]);
	ck_assert_uint_le(st.cache_hits, kinds[2] + kinds[3] + NT_THREADS - 1);
	ck_assert_uint_eq(st.failures, 0);
	ck_assert_uint_eq(s.errors, 0);
	th_site_stop(&s);
	free(text);
	free(json);
	free(small);
}
END_TEST

/* ===================================================================== */
/* One shared response from eight threads: its gzip body, coded once and
 * held by the store (hnd_store.c), is reused by every gzip GET and HEAD
 * (each a cache hit); each decodes to the body, every HEAD states the gzip
 * length and every 304 is one, none compressing. Under ThreadSanitizer
 * (.ci/run) this is the check of the store's lock-free reuse
 * (hnd_store_holds) beside its lookups. */

enum { NU_REQS = 40, NU_LEN = 16000 };

struct unc_ctx {
	struct th_site *s;
	const uint8_t *body;
	size_t gz_len;
	uint64_t gets_gz;
	int failed;
	char err[256];
};

static void *
unc_client(void *arg)
{
	struct unc_ctx *c = arg;
	static const char *const h_304[] = { "Accept-Encoding: gzip", "If-None-Match: W/\"u\"",
					     NULL };
	CURL *h = curl_easy_init();

	if (!h) {
		snprintf(c->err, sizeof c->err, "curl_easy_init");
		c->failed = 1;
		return NULL;
	}
	for (int i = 0; i < NU_REQS && !c->failed; i++) {
		struct th_reply rs = { 0 };
		int kind = i % 4;
		CURLcode rc = th_fetch_ex(h, c->s->port, "/u", kind == 2 ? TH_HEAD : 0,
					  kind == 1   ? NULL
					  : kind == 3 ? h_304
						      : th_h_gzip,
					  &rs);
		uint8_t *dec = NULL;
		size_t dec_len = 0;
		const char *cl = th_header(&rs, "Content-Length", NULL);

		if (rc != CURLE_OK) {
			snprintf(c->err, sizeof c->err, "request %d: %s", i,
				 curl_easy_strerror(rc));
			c->failed = 1;
		} else if (kind == 0) {
			c->gets_gz++;
			if (rs.status != 200 ||
			    tu_gunzip(rs.body, rs.body_len, &dec, &dec_len) != 0 ||
			    dec_len != NU_LEN || memcmp(dec, c->body, NU_LEN) != 0 ||
			    rs.body_len != c->gz_len) {
				snprintf(c->err, sizeof c->err, "request %d: gzip body wrong", i);
				c->failed = 1;
			}
		} else if (kind == 1) {
			if (rs.status != 200 || rs.body_len != NU_LEN ||
			    memcmp(rs.body, c->body, NU_LEN) != 0) {
				snprintf(c->err, sizeof c->err, "request %d: identity body wrong",
					 i);
				c->failed = 1;
			}
		} else if (kind == 2) {
			if (rs.status != 200 || rs.body_len != 0 || !cl ||
			    strtoull(cl, NULL, 10) != c->gz_len) {
				snprintf(c->err, sizeof c->err, "request %d: HEAD length %s", i,
					 cl ? cl : "none");
				c->failed = 1;
			}
		} else if (rs.status != 304 || rs.body_len != 0) {
			snprintf(c->err, sizeof c->err, "request %d: status %ld, not 304", i,
				 rs.status);
			c->failed = 1;
		}
		free(dec);
		th_reply_free(&rs);
	}
	curl_easy_cleanup(h);
	return NULL;
}

START_TEST(test_threads_shared)
{
	uint8_t *body = tu_payload(NU_LEN, TU_JSON, 33);
	struct th_route rt[] = {
		{ .path = "/u",
		  .status = 200,
		  .body = body,
		  .body_len = NU_LEN,
		  .hdr = { "Content-Type", "application/json", "ETag", "\"u\"" },
		  .flags = TH_RT_SHARED | TH_RT_PRECOND,
		  .etag = "\"u\"" },
	};
	struct unc_ctx ctx[NT_THREADS];
	pthread_t tid[NT_THREADS];
	struct th_site s;
	CURL *h = th_curl_new();
	struct th_reply rs = { 0 };
	struct mhdgz_stats st;
	char err[512];
	uint64_t gets = 0;
	size_t gz_len;

	th_site_start(&s, NULL, rt, N_ELEMS(rt), MHD_USE_THREAD_PER_CONNECTION);
	TH_REQ(h, &s, 0, "/u", th_h_gzip, &rs);
	TH_OK("prefetch", th_v_gzip(&rs, 200, body, NU_LEN, TH_E));
	gz_len = rs.body_len;
	th_reply_free(&rs);
	curl_easy_cleanup(h);
	for (int i = 0; i < NT_THREADS; i++) {
		memset(&ctx[i], 0, sizeof ctx[i]);
		ctx[i].s = &s;
		ctx[i].body = body;
		ctx[i].gz_len = gz_len;
		ck_assert_int_eq(pthread_create(&tid[i], NULL, unc_client, &ctx[i]), 0);
	}
	for (int i = 0; i < NT_THREADS; i++)
		pthread_join(tid[i], NULL);
	for (int i = 0; i < NT_THREADS; i++) {
		ck_assert_msg(!ctx[i].failed, "%s", ctx[i].err);
		gets += ctx[i].gets_gz;
	}
	st = th_stats(s.gz);
	ck_assert_uint_eq(gets, NT_THREADS * NU_REQS / 4);
	ck_assert_uint_eq(st.compressions, 1);
	/* the gzip GETs and HEADs, and the first 304 (its length; later ones
	 * reuse that 304) */
	ck_assert_uint_eq(st.cache_hits, 2 * gets + 1);
	ck_assert_uint_eq(st.failures, 0);
	ck_assert_uint_eq(s.errors, 0);
	th_site_stop(&s);
	free(body);
}
END_TEST

/* ===================================================================== */

struct ck_case
hnd_threads_case(void)
{
	return (struct ck_case){ "threads",
				 CK_CASE_TIMEOUT,
				 { { test_threads, 0, 0 }, { test_threads_shared, 0, 0 } } };
}
