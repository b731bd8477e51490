/* check_hnd_ctors.c: e2e tests of every body constructor twin: same body, coding and ownership as libmicrohttpd's own. */
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

/* Body bytes of every case (text: compresses), in bytes. */
#define CT_LEN 30000
/* The pipe case's body: fits in a pipe's buffer, so it is written whole
 * before the request and the write end closed. */
#define CT_PIPE_LEN 20000

enum ct_kind { CT_FREE_CB, CT_FREE_CB_CLS, CT_IOVEC, CT_FD64, CT_PIPE, CT_NKINDS };

static const char *const ct_name[] = { "buffer_with_free_callback", "buffer_with_free_callback_cls",
				       "iovec", "fd64", "pipe" };

/* One case: the response made per request, the free callback counted. */
struct ct_fix {
	enum ct_kind kind;
	uint8_t *body;
	size_t len;
	_Atomic int frees; /* runs of the application's free callback */
	void *freed_arg;   /* what it was called with */
	int pipe_w;        /* CT_PIPE: write end, closed once written */
};

/* The running case's fixture: crfc(buffer) has no cls of its own. */
static struct ct_fix *ct_current;

static void
ct_free(void *arg)
{
	ct_current->freed_arg = arg;
	atomic_fetch_add(&ct_current->frees, 1);
}

/* A fresh response of the fixture's kind; NULL on failure. */
static struct MHD_Response *
ct_make(struct mhdgz *gz, struct ct_fix *f)
{
	struct MHD_IoVec iov[3];
	int p[2], fd;

	switch (f->kind) {
	case CT_FREE_CB:
		return mhdgz_response_from_buffer_with_free_callback(gz, f->len, f->body, ct_free);
	case CT_FREE_CB_CLS:
		return mhdgz_response_from_buffer_with_free_callback_cls(gz, f->len, f->body,
									 ct_free, f);
	case CT_IOVEC: /* three uneven pieces, one empty */
		iov[0].iov_base = f->body;
		iov[0].iov_len = 1000;
		iov[1].iov_base = f->body + 1000;
		iov[1].iov_len = 0;
		iov[2].iov_base = f->body + 1000;
		iov[2].iov_len = f->len - 1000;
		return mhdgz_response_from_iovec(gz, iov, 3, ct_free, f);
	case CT_FD64:
		fd = th_temp_file(f->body, f->len);
		return mhdgz_response_from_fd64(gz, f->len, fd);
	case CT_PIPE:
		ck_assert_int_eq(pipe(p), 0);
		ck_assert_int_eq(write(p[1], f->body, f->len), (ssize_t)f->len);
		close(p[1]);
		return mhdgz_response_from_pipe(gz, p[0]);
	default:
		return NULL;
	}
}

static enum MHD_Result
ct_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct ct_fix *f = s->cls;
	struct MHD_Response *r = ct_make(s->gz, f);
	enum MHD_Result ret;

	(void)url;
	if (!r)
		return MHD_NO;
	ck_assert_int_eq(MHD_add_response_header(r, "Content-Type", "text/plain"), MHD_YES);
	ret = mhdgz_queue_response_ex(s->gz, c, method, MHD_HTTP_OK, r, NULL);
	MHD_destroy_response(r);
	return ret;
}

/* Each twin, for a gzip and an identity client: the body decodes to the
 * original byte for byte, with exact framing (a Content-Length where the
 * size is known, chunked for a pipe's gzip stream), and the application's
 * free callback runs exactly once per response, with its own argument,
 * once libmicrohttpd is done with it. */
START_TEST(test_twins)
{
	struct ct_fix f = { .kind = (enum ct_kind)(_i / 2) };
	bool gzip = _i % 2 == 0;
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = { 0 };
	struct th_reply r;
	struct mhdgz_stats st;
	char err[512], ctx[96];

	f.len = f.kind == CT_PIPE ? CT_PIPE_LEN : CT_LEN;
	f.body = tu_payload(f.len, TU_TEXT, (uint32_t)_i);
	ct_current = &f;
	snprintf(ctx, sizeof ctx, "%s, %s client", ct_name[f.kind], gzip ? "gzip" : "identity");
	th_start(&s, gz, 0, ct_route, &f);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", gzip ? TH_GZIP : 0, &r);
	ck_assert_msg(r.rc == CURLE_OK, "%s: %s", ctx, curl_easy_strerror(r.rc));
	if (!gzip && f.kind == CT_PIPE) { /* unknown size: chunked, as libmicrohttpd's */
		ck_assert_ptr_null(th_header(&r, "Content-Encoding", NULL));
		ck_assert_str_eq(th_header(&r, "Transfer-Encoding", NULL), "chunked");
		ck_assert_uint_eq(r.body_len, f.len);
		ck_assert_int_eq(memcmp(r.body, f.body, f.len), 0);
	} else if (!gzip) {
		TH_OK(ctx, th_v_identity(&r, 200, f.body, f.len, TH_E));
	} else if (f.kind == CT_PIPE) {
		uint8_t *dec = NULL;
		size_t dec_len = 0;

		ck_assert_str_eq(th_header(&r, "Content-Encoding", NULL), "gzip");
		ck_assert_str_eq(th_header(&r, "Transfer-Encoding", NULL), "chunked");
		ck_assert_ptr_null(th_header(&r, "Content-Length", NULL));
		ck_assert_int_eq(tu_gunzip(r.body, r.body_len, &dec, &dec_len), 0);
		ck_assert_uint_eq(dec_len, f.len);
		ck_assert_int_eq(memcmp(dec, f.body, f.len), 0);
		free(dec);
	} else {
		TH_OK(ctx, th_v_gzip(&r, 200, f.body, f.len, TH_E));
	}
	ck_assert(th_has_token(th_header(&r, "Vary", NULL), "Accept-Encoding"));
	th_stop(&s); /* libmicrohttpd is done with every response */
	st = th_stats(gz);
	ck_assert_uint_eq(st.reasons[gzip ? MHDGZ_COMPRESSED : MHDGZ_SKIP_NOT_ACCEPTED], 1);
	ck_assert_uint_eq(st.failures, 0);
	if (f.kind == CT_FREE_CB || f.kind == CT_FREE_CB_CLS || f.kind == CT_IOVEC) {
		ck_assert_int_eq(atomic_load(&f.frees), 1);
		ck_assert_ptr_eq(f.freed_arg, f.kind == CT_FREE_CB ? (void *)f.body : (void *)&f);
	}
	th_reply_free(&r);
	mhdgz_free(gz);
	free(f.body);
}
END_TEST

/* On failure (no handler, a NULL body with a size) nothing changes hands,
 * as with libmicrohttpd: no free callback runs, and a pipe's descriptor is
 * still the caller's to close. */
START_TEST(test_twins_fail)
{
	struct ct_fix f = { .kind = CT_FREE_CB };
	struct MHD_IoVec iov = { .iov_base = NULL, .iov_len = 5 };
	int p[2];

	ct_current = &f;
	ck_assert_ptr_null(mhdgz_response_from_buffer_with_free_callback(NULL, 3, "abc", ct_free));
	ck_assert_ptr_null(mhdgz_response_from_buffer_with_free_callback_cls(NULL, 3, "abc",
									     ct_free, &f));
	ck_assert_ptr_null(mhdgz_response_from_iovec(NULL, &iov, 1, ct_free, &f));
	ck_assert_int_eq(atomic_load(&f.frees), 0);
	{
		struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);

		ck_assert_ptr_null(mhdgz_response_from_iovec(gz, &iov, 1, ct_free, &f));
		ck_assert_ptr_null(mhdgz_response_from_buffer_with_free_callback(gz, 3, NULL,
										 ct_free));
		ck_assert_int_eq(atomic_load(&f.frees), 0);
		mhdgz_free(gz);
	}
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_ptr_null(mhdgz_response_from_pipe(NULL, p[0]));
	ck_assert_int_ne(fcntl(p[0], F_GETFD), -1);
	ck_assert_int_eq(close(p[0]), 0);
	ck_assert_int_eq(close(p[1]), 0);
}
END_TEST

struct ck_case
hnd_ctors_case(void)
{
	return (struct ck_case){ "ctors",
				 CK_CASE_TIMEOUT,
				 { { test_twins, 0, 2 * CT_NKINDS }, { test_twins_fail, 0, 0 } } };
}
