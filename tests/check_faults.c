/* check_faults.c: allocation failures on the request paths check_e2e and check_streaming leave out: files, 304s, Vary merging, pooled streams (tests/check_faults). */
/*
 * check_e2e's test_faults fails every allocation in turn for a buffer
 * response fetched with gzip, and check_streaming's alloc_failures_fall_back
 * for a callback stream with zlib and ISA-L compressors made per stream.
 * This suite covers the rest of the request path the same way, through a
 * real daemon and libcurl with the counting allocator (tests/testutil.c):
 *
 *   paths    /file    a 200 KB file (mhdgz_response_from_fd): compressed
 *                     whole (read, compress, variant), identity through
 *                     libmicrohttpd's own fd response
 *            /small   a 20 KB file: identity read into a buffer response
 *                     per request (hnd_file_identity), gzip as /file
 *            /big     a 1.2 MB file: a gzip stream per request (pread)
 *            /buf     a buffer response with three Vary fields over 256
 *                     bytes (the merged Vary of a variant goes to the heap;
 *                     the identity queue merges into the response itself)
 *            /cb      a content reader (callback stream)
 *            /unk     a content reader of unknown size: decided on its
 *                     first bytes, which every answer must still carry
 *   requests GET with gzip; GET without Accept-Encoding (identity, Vary
 *            merged into the response); GET with gzip and If-None-Match of
 *            the gzip ETag (a 304: the gzip variant standing for the 200)
 *   handlers libdeflate pooled (streams: zlib pool), libdeflate unpooled,
 *            zlib unpooled, ISA-L unpooled (when compiled in), libdeflate
 *            unpooled with length hiding (MHDGZ_F_LENGTH_HIDING)
 *
 * For each handler x path x request kind, the k-th allocation of the
 * library fails, k = 1, 2, ... until a request needs fewer than k. Every
 * answer must be the identity body, a gzip body that decodes to it, or a
 * 304 without body; a gzip answer always carries Vary: Accept-Encoding;
 * when creating the response itself failed the route refuses (libmicrohttpd
 * closes the connection). Every answer carries Vary: Accept-Encoding (the
 * paths are all compressible). Failures are counted at most once each, nothing
 * leaks (the live-block count returns to its level after every unpooled
 * request, and to zero at the end), and a request without a failure is
 * served as without the allocator.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <check.h>
#include <curl/curl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "mhdgz.h"
#include "check_suites.h"
#include "info.h"
#include "harness.h"
#include "testutil.h"

/* Per-test timeout in seconds (each test makes a few hundred requests). */
#ifndef CK_CASE_TIMEOUT
#define CK_CASE_TIMEOUT 300
#endif

/* Most allocations one request may need; more fails the test. */
#define TF_MAX_K 400

/* How long a response may take to be released after its request, ms. */
#define TF_RELEASE_MS 3000

#define FILE_LEN (200u * 1024)
#define SMALL_LEN (20u * 1024)
#define BIG_LEN (1200u * 1024)
#define BUF_LEN (40u * 1024)
#define CB_LEN (100u * 1024)
#define ETAG "\"ff\""
#define ETAG_GZIP "W/\"ff\""

static const char *const vary_lines[] = {
	"Origin, X-Requested-With, X-Forwarded-Proto, X-Forwarded-Host, X-Forwarded-Port",
	"Cookie, Authorization, X-Api-Key, X-Client-Version, X-Device-Class, X-Feature-Flags",
	"Sec-CH-UA, Sec-CH-UA-Mobile, Sec-CH-UA-Platform, Sec-CH-Prefers-Color-Scheme, DPR",
};

struct fix {
	uint8_t *data;                /* the body of every path, cut to its length */
	int fd;                       /* the file of /file and /big (dup'd per request) */
	_Atomic unsigned int refused; /* responses the library could not create */
	_Atomic unsigned int made;
};

static ssize_t
cb_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	const uint8_t *data = cls;
	size_t n = CB_LEN - (size_t)pos;

	if (pos >= CB_LEN)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (n > max)
		n = max;
	if (n > 7000) /* several reader calls per buffer */
		n = 7000;
	memcpy(buf, data + pos, n);
	return (ssize_t)n;
}

static enum MHD_Result
route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct fix *f = s->cls;
	struct MHD_Response *r = NULL;
	unsigned int status = MHD_HTTP_OK;
	enum MHD_Result ret;
	const char *type = "text/plain";

	if (strcmp(url, "/file") == 0 || strcmp(url, "/big") == 0 || strcmp(url, "/small") == 0) {
		int fd = dup(f->fd);
		ck_assert_int_ge(fd, 0);
		/* Ownership of fd passes to the response; on failure (NULL) it
		 * stays ours, as with libmicrohttpd (mhdgz.h). */
		r = mhdgz_response_from_fd(s->gz,
					   strcmp(url, "/file") == 0  ? FILE_LEN
					   : strcmp(url, "/big") == 0 ? BIG_LEN
								      : SMALL_LEN,
					   fd);
		if (!r)
			close(fd);
	} else if (strcmp(url, "/buf") == 0) {
		r = mhdgz_response_from_buffer(s->gz, BUF_LEN, f->data, MHD_RESPMEM_PERSISTENT);
		type = "text/html; charset=utf-8";
	} else if (strcmp(url, "/cb") == 0 || strcmp(url, "/unk") == 0) {
		r = mhdgz_response_from_callback(s->gz,
						 strcmp(url, "/cb") == 0 ? CB_LEN
									 : MHD_SIZE_UNKNOWN,
						 16 * 1024, cb_read, f->data, NULL);
		type = "application/json";
	}
	if (!r) {
		atomic_fetch_add(&f->refused, 1);
		return MHD_NO;
	}
	atomic_fetch_add(&f->made, 1);
	ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type) == MHD_YES);
	ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, ETAG) == MHD_YES);
	if (strcmp(url, "/buf") == 0)
		for (size_t i = 0; i < N_ELEMS(vary_lines); i++)
			ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, vary_lines[i]) ==
				  MHD_YES);
	ret = mhdgz_queue_response_ex(s->gz, c,
				      &(struct mhdgz_request){
					      .size = sizeof(struct mhdgz_request),
					      .method = method,
					      .flags = MHDGZ_REQUEST_PRECONDITIONS },
				      status, r, NULL);
	MHD_destroy_response(r);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* The client                                                               */

enum kind { K_GZIP, K_IDENTITY, K_NOT_MODIFIED, K_COUNT };
static const char *const kind_names[K_COUNT] = { "gzip", "identity", "304" };

/* A connection per request: on a reused one, libcurl would silently retry
 * a request the server refused (closed) and hide the refusal. */
static void
fetch(CURL *h, uint16_t port, const char *path, enum kind k, struct th_reply *r)
{
	static const char *const inm[] = { "If-None-Match: " ETAG_GZIP, NULL };

	th_fetch_ex(h, port, path, TH_FRESH | (k != K_IDENTITY ? TH_GZIP : 0),
		    k == K_NOT_MODIFIED ? inm : NULL, r);
}

/* Does any Vary line list Accept-Encoding? */
static bool
vary_ae(const struct th_reply *r)
{
	for (unsigned int i = 0; i < r->nhdr; i++)
		if (strcasecmp(r->hdr_name[i], "Vary") == 0 &&
		    th_has_token(r->hdr_value[i], "Accept-Encoding"))
			return true;
	return false;
}

/* ------------------------------------------------------------------------ */

static const struct {
	enum mhdgz_backend be;
	unsigned int flags;
} cfgs[] = {
	{ MHDGZ_BACKEND_DEFAULT, 0 },
	{ MHDGZ_BACKEND_DEFAULT, MHDGZ_F_NO_POOL },
	{ MHDGZ_BACKEND_ZLIB, MHDGZ_F_NO_POOL },
	{ MHDGZ_BACKEND_ISAL, MHDGZ_F_NO_POOL },
	/* BREACH length hiding: the padded body, the stream's key prefix and
	 * rewritten header. */
	{ MHDGZ_BACKEND_DEFAULT, MHDGZ_F_NO_POOL | MHDGZ_F_LENGTH_HIDING },
};

static const struct {
	const char *path;
	size_t len;
} paths[] = {
	{ "/file", FILE_LEN }, { "/big", BIG_LEN }, { "/buf", BUF_LEN },
	{ "/cb", CB_LEN },     { "/unk", CB_LEN },  { "/small", SMALL_LEN },
};

/* The live blocks between requests: the handler's own (*live0), plus one
 * per item its store holds (store_nbytes / 128: after a request only
 * coded lengths remain, by strong ETag, each one block charged 128 bytes;
 * hnd_store.c). */
struct live_want {
	struct mhdgz *gz;
	int64_t live0;
};

static int64_t
live_want(const struct live_want *w)
{
	return w->live0 + (int64_t)(th_stats(w->gz).store_nbytes / 128);
}

static bool
live_is(void *cls)
{
	return tu_alloc_live() == live_want(cls);
}

START_TEST(test_request_faults)
{
	size_t ci = (size_t)_i / N_ELEMS(paths), pi = (size_t)_i % N_ELEMS(paths);
	bool pooled = !(cfgs[ci].flags & MHDGZ_F_NO_POOL);
	const uint8_t *want;
	size_t want_len = paths[pi].len;
	struct mhdgz_options o;
	struct mhdgz *gz = NULL;
	struct th_server s = { 0 };
	struct fix f;
	struct th_reply r = { 0 };
	CURL *h;
	unsigned int counts[K_COUNT][4] = { { 0 } }; /* refused, gzip, identity, 304 */
	struct live_want lw;

	if (!tu_backend_available(cfgs[ci].be))
		return;
	memset(&f, 0, sizeof f);
	f.data = tu_payload(BIG_LEN, TU_TEXT, 77 + (uint32_t)pi);
	f.fd = th_temp_file(f.data, BIG_LEN);
	want = f.data;
	h = curl_easy_init();
	ck_assert_ptr_nonnull(h);

	tu_alloc_install(0);
	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.gzip.backend = cfgs[ci].be;
	o.flags = cfgs[ci].flags;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	th_start(&s, gz, 0, route, &f);

	/* Unpooled, nothing of ours outlives a request: the handler's own
	 * blocks are all that is live between requests. */
	lw.gz = gz;
	lw.live0 = tu_alloc_live();
	for (int k = 0; k < K_COUNT; k++) {
		size_t n;

		/* A request without failures first (pooled: it leaves the
		 * compressors the path needs in the pool). */
		fetch(h, s.port, paths[pi].path, (enum kind)k, &r);
		ck_assert_int_eq(r.rc, CURLE_OK);
		ck_assert(th_wait(th_pool_back_pred, gz, TF_RELEASE_MS));
		for (n = 1; n <= TF_MAX_K; n++) {
			struct mhdgz_stats s0 = th_stats(gz), s1;
			unsigned int refused0 = atomic_load(&f.refused);
			const char *ce, *etag;
			char ctx[96];
			int fired;

			snprintf(ctx, sizeof ctx, "%s %s %s k=%zu", tu_backend_name(cfgs[ci].be),
				 paths[pi].path, kind_names[k], n);
			tu_alloc_fail_at(n);
			fetch(h, s.port, paths[pi].path, (enum kind)k, &r);
			ck_assert_msg(th_wait(th_pool_back_pred, gz, TF_RELEASE_MS),
				      "%s: a compressor did not come back", ctx);
			fired = tu_alloc_failed();
			tu_alloc_fail_at(0);
			if (!pooled)
				ck_assert_msg(th_wait(live_is, &lw, TF_RELEASE_MS),
					      "%s: %lld blocks live, %lld before", ctx,
					      (long long)tu_alloc_live(),
					      (long long)live_want(&lw));
			s1 = th_stats(gz);
			ce = th_header(&r, "Content-Encoding", NULL);
			etag = th_header(&r, "ETag", NULL);
			if (atomic_load(&f.refused) > refused0) {
				ck_assert_msg(fired, "%s: refused without a failure", ctx);
				ck_assert_msg(r.rc != CURLE_OK, "%s: a refused request answered",
					      ctx);
				counts[k][0]++;
			} else if (r.status == MHD_HTTP_NOT_MODIFIED) {
				ck_assert_msg(k == K_NOT_MODIFIED, "%s: unexpected 304", ctx);
				ck_assert_msg(r.rc == CURLE_OK && r.body_len == 0,
					      "%s: 304 with a body", ctx);
				ck_assert_msg(etag && (!strcmp(etag, ETAG) ||
						       !strcmp(etag, ETAG_GZIP)),
					      "%s: 304 ETag '%s'", ctx, etag ? etag : "");
				ck_assert_msg(vary_ae(&r), "%s: 304 without Vary: Accept-Encoding",
					      ctx);
				counts[k][3]++;
			} else {
				ck_assert_msg(r.rc == CURLE_OK && r.status == 200,
					      "%s: curl %d (%s), status %ld", ctx, r.rc,
					      curl_easy_strerror(r.rc), r.status);
				ck_assert_msg(k != K_NOT_MODIFIED, "%s: 200 to a matching ETag",
					      ctx);
				if (ce) {
					uint8_t *dec = NULL;
					size_t dec_len = 0;

					ck_assert_msg(k == K_GZIP && !strcmp(ce, "gzip"),
						      "%s: Content-Encoding '%s'", ctx, ce);
					ck_assert_msg(vary_ae(&r),
						      "%s: gzip without Vary: Accept-Encoding",
						      ctx);
					ck_assert_msg(tu_gunzip(r.body, r.body_len, &dec,
								&dec_len) == 0 &&
							      dec_len == want_len &&
							      memcmp(dec, want, want_len) == 0,
						      "%s: gzip body does not decode to the body",
						      ctx);
					free(dec);
					counts[k][1]++;
				} else {
					ck_assert_msg(r.body_len == want_len &&
							      !memcmp(r.body, want, want_len),
						      "%s: identity body of %zu bytes", ctx,
						      r.body_len);
					ck_assert_msg(k == K_IDENTITY || fired,
						      "%s: identity without a failure", ctx);
					/* Every path is compressible: the identity
					 * varies with Accept-Encoding too. */
					ck_assert_msg(vary_ae(&r),
						      "%s: identity without Vary: Accept-Encoding",
						      ctx);
					counts[k][2]++;
				}
			}
			/* A failure is counted once, and only when one fired. */
			ck_assert_msg(s1.failures - s0.failures <= (uint64_t)fired,
				      "%s: %llu failures counted", ctx,
				      (unsigned long long)(s1.failures - s0.failures));
			ck_assert_msg(s1.reasons[MHDGZ_SKIP_ERROR] - s0.reasons[MHDGZ_SKIP_ERROR] <=
					      s1.failures - s0.failures,
				      "%s: an error reason without a failure counted", ctx);
			if (!fired)
				break;
		}
		ck_assert_msg(n <= TF_MAX_K, "%s %s: more than %d allocations per request",
			      paths[pi].path, kind_names[k], TF_MAX_K);
		fprintf(stderr,
			"faults %-10s %-5s %-8s: %3zu allocations: %u refused, %u gzip, %u identity, "
			"%u 304\n",
			tu_backend_name(cfgs[ci].be), paths[pi].path, kind_names[k], n - 1,
			counts[k][0], counts[k][1], counts[k][2], counts[k][3]);
		ck_assert_msg(n > 1, "%s %s: no allocation to fail", paths[pi].path, kind_names[k]);
	}
	th_stop(&s);
	curl_easy_cleanup(h);
	mhdgz_free(gz);
	ck_assert_msg(tu_alloc_live() == 0, "%lld blocks leaked", (long long)tu_alloc_live());
	tu_alloc_uninstall();
	close(f.fd);
	th_reply_free(&r);
	free(f.data);
}
END_TEST

Suite *
faults_suite(void)
{
	const struct ck_case cases[] = {
		{ "requests",
		  CK_CASE_TIMEOUT,
		  { { test_request_faults, 0, (int)(N_ELEMS(cfgs) * N_ELEMS(paths)) } } },
	};

	return ck_suite("faults", cases, sizeof cases / sizeof cases[0]);
}
