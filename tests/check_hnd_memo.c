/* check_hnd_memo.c: e2e tests of the gzip lengths remembered by strong ETag: 304s and HEADs of per-request responses compress once. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suites.h"
#include "harness.h"
#include "testutil.h"

/* Revalidations and HEADs per case. */
#define MM_N 20
/* A body compressed whole, and a file above the 1 MiB whole-file limit
 * (streamed compressed), in bytes. */
#define MM_LEN 30000
#define MM_BIG_LEN (1536 * 1024)

/* A resource served the way gzserve serves files: a fresh response per
 * request (a buffer, or the file opened again), with the ETag, queued with
 * 304 when MHDGZ_REQUEST_PRECONDITIONS finds If-None-Match matching. */
struct mm_fix {
	const uint8_t *body;
	size_t len;
	bool file; /* from a temporary file, else a buffer */
	const char *etag;
	char path[64]; /* the file */
};

static enum MHD_Result
mm_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct mm_fix *f = s->cls;
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)url;
	if (f->file) {
		int fd = open(f->path, O_RDONLY | O_CLOEXEC);

		ck_assert_int_ge(fd, 0);
		r = mhdgz_response_from_fd(s->gz, f->len, fd);
		if (!r)
			close(fd);
	} else {
		r = mhdgz_response_from_buffer(s->gz, f->len, (void *)f->body,
					       MHD_RESPMEM_PERSISTENT);
	}
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/plain");
	MHD_add_response_header(r, "ETag", f->etag);
	ret = mhdgz_queue_response_ex(s->gz, c, TU_REQ_PRE(method), MHD_HTTP_OK, r, NULL);
	MHD_destroy_response(r);
	return ret;
}

/*
 * _i: 0 a buffer, 1 a big file; 2 a buffer with a weak ETag (not
 * remembered: every 304 compresses). A gzip GET, then MM_N revalidations
 * and MM_N HEADs on one connection: every 304 and HEAD states the gzip
 * 200's exact length, and the handle compressed once in all (for a strong
 * ETag), not once per request.
 */
START_TEST(test_memo)
{
	bool file = _i == 1, weak = _i == 2;
	size_t len = file ? MM_BIG_LEN : MM_LEN;
	uint8_t *body = tu_payload(len, TU_TEXT, 31 + (uint32_t)_i);
	struct mm_fix f = {
		.body = body, .len = len, .file = file, .etag = weak ? "W/\"m1\"" : "\"m1\""
	};
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = { 0 };
	CURL *h = th_curl_new();
	struct th_reply r = { 0 };
	struct mhdgz_stats st;
	const char *inm[] = { "Accept-Encoding: gzip", NULL, NULL };
	char inm_line[64], num[32];
	size_t gz_len;
	uint8_t *dec = NULL;
	size_t dec_len = 0;

	if (file) {
		int fd = th_temp_file(body, len);

		snprintf(f.path, sizeof f.path, "/proc/self/fd/%d", fd);
		/* Reopened per request through /proc: the same file. */
	}
	th_start(&s, gz, 0, mm_route, &f);
	TH_REQ(h, &s, TH_GZIP, "/", inm, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(tu_gunzip(r.body, r.body_len, &dec, &dec_len), 0);
	ck_assert_uint_eq(dec_len, len);
	ck_assert_int_eq(memcmp(dec, body, len), 0);
	free(dec);
	gz_len = r.body_len;
	snprintf(num, sizeof num, "%zu", gz_len);
	/* The gzip ETag a client holds: weak form under the default policy. */
	snprintf(inm_line, sizeof inm_line, "If-None-Match: %s", th_header(&r, "ETag", NULL));
	inm[1] = inm_line;
	th_reply_free(&r);
	for (int i = 0; i < MM_N; i++) {
		TH_REQ(h, &s, TH_GZIP, "/", inm, &r);
		ck_assert_int_eq(r.status, 304);
		ck_assert_uint_eq(r.body_len, 0);
		ck_assert_str_eq(th_header(&r, "Content-Length", NULL), num);
		ck_assert_ptr_null(th_header(&r, "Content-Encoding", NULL));
		ck_assert_ptr_null(th_header(&r, "Connection", NULL));
		th_reply_free(&r);
		TH_REQ(h, &s, TH_GZIP | TH_HEAD, "/", th_h_gzip, &r);
		ck_assert_int_eq(r.status, 200);
		ck_assert_str_eq(th_header(&r, "Content-Length", NULL), num);
		ck_assert_str_eq(th_header(&r, "Content-Encoding", NULL), "gzip");
		ck_assert_ptr_null(th_header(&r, "Connection", NULL));
		th_reply_free(&r);
	}
	ck_assert_int_eq(r.num_connects, 0); /* the connection was kept */
	st = th_stats(gz);
	if (weak) /* the GET, then each 304 and each HEAD compress */
		ck_assert_uint_eq(st.compressions, 1 + 2 * MM_N);
	else
		ck_assert_uint_eq(st.compressions, 1);
	ck_assert_uint_eq(st.failures, 0);
	th_stop(&s);
	curl_easy_cleanup(h);
	mhdgz_free(gz);
	free(body);
}
END_TEST

struct ck_case
hnd_memo_case(void)
{
	return (struct ck_case){ "memo", CK_CASE_TIMEOUT, { { test_memo, 0, 3 } } };
}
