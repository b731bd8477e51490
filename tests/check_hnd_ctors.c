/* check_hnd_ctors.c: the constructor twins on failure (ownership stays the caller's, as with libmicrohttpd), and libmicrohttpd 1.0's twins on the wire (the others' wire behaviour: check_hnd_fidelity.c). */
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

/* Runs of the free callback. */
struct ct_fix {
	_Atomic int frees;
};

static struct ct_fix *ct_current;

static void
ct_free(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ct_current->frees, 1);
}

/* On failure (no handler, a NULL body with a size) nothing changes hands,
 * as with libmicrohttpd: no free callback runs, and a pipe's descriptor is
 * still the caller's to close. */
START_TEST(test_twins_fail)
{
	struct ct_fix f = { 0 };
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
#if MHD_VERSION >= 0x01000000
	/* libmicrohttpd 1.0's twins: no handler, or a NULL body with a size. */
	ck_assert_ptr_null(mhdgz_response_from_buffer_static(NULL, 3, "abc"));
	ck_assert_ptr_null(mhdgz_response_from_buffer_copy(NULL, 3, "abc"));
	ck_assert_ptr_null(mhdgz_response_empty(NULL, MHD_RF_NONE));
	{
		struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);

		ck_assert_ptr_null(mhdgz_response_from_buffer_static(gz, 3, NULL));
		ck_assert_ptr_null(mhdgz_response_from_buffer_copy(gz, 3, NULL));
		mhdgz_free(gz);
	}
#endif
}
END_TEST

#if MHD_VERSION >= 0x01000000
/* ===================================================================== */
/*       libmicrohttpd 1.0's constructors: _static, _copy, _empty         */
/* ===================================================================== */

/* Longest wait for one response on a raw connection, ms. */
#define C10_WAIT_MS 30000
/* How long "nothing more comes" is watched for, ms. */
#define C10_IDLE_MS 200
/* Body of the buffer twins: compressible text above min_nbytes. */
#define C10_LEN (48u * 1024)

enum c10_kind { C10_STATIC, C10_COPY };

/* A server answering every request with one buffer twin's response. */
struct c10_bufs {
	struct th_server srv;
	struct mhdgz *gz;
	enum c10_kind kind;
	uint8_t *buf;                /* the application's buffer (static: the body) */
	const uint8_t *first;        /* what buf held when the response was made */
	struct MHD_Response *shared; /* non-NULL: queued for every request */
	_Atomic unsigned int errors;
};

static struct MHD_Response *
c10_make(struct c10_bufs *x)
{
	struct MHD_Response *r;
	uint8_t *tmp;

	if (x->kind == C10_STATIC)
		return mhdgz_response_from_buffer_static(x->gz, C10_LEN, x->buf);
	/* The copy's source is gone before the response is queued:
	 * overwritten at once, then freed. */
	tmp = malloc(C10_LEN);
	if (!tmp)
		return NULL;
	memcpy(tmp, x->buf, C10_LEN);
	r = mhdgz_response_from_buffer_copy(x->gz, C10_LEN, tmp);
	memset(tmp, 'x', C10_LEN);
	free(tmp);
	return r;
}

static enum MHD_Result
c10_bufs_route(struct th_server *srv, struct MHD_Connection *c, const char *url, const char *method)
{
	struct c10_bufs *x = srv->cls;
	struct MHD_Response *r = x->shared ? x->shared : c10_make(x);
	enum MHD_Result ret;

	(void)url;
	if (!r) {
		atomic_fetch_add(&x->errors, 1);
		return MHD_NO;
	}
	if (!x->shared &&
	    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain") != MHD_YES)
		atomic_fetch_add(&x->errors, 1);
	ret = mhdgz_queue_response_ex(x->gz, c, TU_REQ(method), MHD_HTTP_OK, r, NULL);
	if (ret != MHD_YES)
		atomic_fetch_add(&x->errors, 1);
	if (!x->shared)
		MHD_destroy_response(r);
	return ret;
}

/*
 * mhdgz_response_from_buffer_static and _copy on the wire (loop: static,
 * copy; then the same with one response made at start and shared by every
 * request). A gzip client gets a gzip body that decodes byte for byte to
 * the body, an identity client the body itself. The static body is the
 * application's buffer, read where it is: bytes written into it after the
 * response was made (before it was first queued) are the bytes sent. The
 * copy's source is overwritten (and, per request, freed) right after the
 * call: the bytes sent are those it held then.
 */
START_TEST(test_static_copy_bodies)
{
	struct c10_bufs x = { .kind = (_i & 1) ? C10_COPY : C10_STATIC };
	bool shared = _i >= 2;
	uint8_t *p1 = tu_payload(C10_LEN, TU_TEXT, 1001), *p2 = tu_payload(C10_LEN, TU_TEXT, 1002);
	const uint8_t *want;
	const char *what = x.kind == C10_STATIC ? "static" : "copy";
	struct th_reply r;
	struct mhdgz_stats st;
	char err[256];
	CURL *h;

	ck_assert_int_ne(memcmp(p1, p2, C10_LEN), 0);
	x.gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	x.buf = malloc(C10_LEN);
	ck_assert_ptr_nonnull(x.buf);
	memcpy(x.buf, p1, C10_LEN);
	want = p1;
	if (shared) {
		x.shared = c10_make(&x);
		ck_assert_ptr_nonnull(x.shared);
		ck_assert_int_eq(MHD_add_response_header(x.shared, MHD_HTTP_HEADER_CONTENT_TYPE,
							 "text/plain"),
				 MHD_YES);
		if (x.kind == C10_STATIC) {
			/* Not copied: what the buffer holds when it is sent goes out. */
			memcpy(x.buf, p2, C10_LEN);
			want = p2;
		}
	}
	th_start(&x.srv, x.gz, 0, c10_bufs_route, &x);
	h = th_curl_new();
	th_reply_init(&r);
	for (int n = 0; n < 2; n++) {
		TH_REQ(h, &x.srv, TH_GZIP, "/", NULL, &r);
		ck_assert_msg(th_v_gzip(&r, 200, want, C10_LEN, TH_E) == 0, "%s gzip %d: %s", what,
			      n, err);
		TH_REQ(h, &x.srv, 0, "/", NULL, &r);
		ck_assert_msg(th_v_identity(&r, 200, want, C10_LEN, TH_E) == 0,
			      "%s identity %d: %s", what, n, err);
	}
	th_reply_free(&r);
	curl_easy_cleanup(h);
	th_stop(&x.srv);
	ck_assert_uint_eq(atomic_load(&x.errors), 0);
	st = th_stats(x.gz);
	ck_assert_uint_eq(st.responses, 4);
	ck_assert_uint_eq(st.compressed, 2);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_NOT_ACCEPTED], 2);
	/* One response shared: compressed once, then its cached variant. */
	ck_assert_uint_eq(st.compressions, shared ? 1 : 2);
	if (x.shared)
		MHD_destroy_response(x.shared);
	mhdgz_free(x.gz);
	free(x.buf);
	free(p1);
	free(p2);
}
END_TEST

/* Both buffer twins with an empty body: NULL allowed, Content-Length: 0. */
START_TEST(test_static_copy_empty)
{
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct MHD_Response *r;

	r = mhdgz_response_from_buffer_static(gz, 0, NULL);
	ck_assert_ptr_nonnull(r);
	MHD_destroy_response(r);
	r = mhdgz_response_from_buffer_copy(gz, 0, NULL);
	ck_assert_ptr_nonnull(r);
	MHD_destroy_response(r);
	mhdgz_free(gz);
}
END_TEST

/* One request to a server answering with mhdgz_response_empty(flags). */
struct c10_empty_case {
	enum MHD_ResponseFlags flags;
	const char *content_length; /* the application's Content-Length, or NULL */
	bool head;
	bool gzip;
	unsigned int status;
	/* What must come: */
	const char *want_length; /* the Content-Length field, NULL: none */
	const char *want_etag;
	const char *want_vary;
	enum mhdgz_reason reason;
	/* Then mhdgz_response_set_options(MHD_RF_NONE), which libmicrohttpd
	 * 1.0 refuses for a head-only response with a Content-Length: the
	 * flags mhdgz goes by stay those libmicrohttpd kept. */
	bool drop_refused;
};

#define HO MHD_RF_HEAD_ONLY_RESPONSE

static const struct c10_empty_case empty_cases[] = {
	/* Empty: never compressed, "Content-Length: 0", fields as they are. */
	{ MHD_RF_NONE, NULL, false, true, 200, "0", "\"e\"", NULL, MHDGZ_SKIP_EMPTY, false },
	{ MHD_RF_NONE, NULL, false, false, 200, "0", "\"e\"", NULL, MHDGZ_SKIP_EMPTY, false },
	{ MHD_RF_NONE, NULL, true, true, 200, "0", "\"e\"", NULL, MHDGZ_SKIP_EMPTY, false },
	/* An empty response queued with 304 stands for a 200 that may be
	 * coded (mhdgz_queue_response): Vary and the gzip ETag. */
	{ MHD_RF_NONE, NULL, false, true, 304, "0", "W/\"e\"", "Accept-Encoding", MHDGZ_SKIP_STATUS,
	  false },
	/* Head-only with the application's Content-Length: that length, and
	 * nothing added or rewritten, whatever Accept-Encoding says. */
	{ HO, "1234", true, true, 200, "1234", "\"e\"", NULL, MHDGZ_SKIP_EMPTY, false },
	{ HO, "1234", true, false, 200, "1234", "\"e\"", NULL, MHDGZ_SKIP_EMPTY, false },
	{ HO, "1234", false, true, 304, "1234", "\"e\"", NULL, MHDGZ_SKIP_STATUS, false },
	{ HO, "1234", true, true, 304, "1234", "\"e\"", NULL, MHDGZ_SKIP_STATUS, false },
	{ HO, "1234", false, true, 304, "1234", "\"e\"", NULL, MHDGZ_SKIP_STATUS, true },
	{ HO, "1234", true, true, 200, "1234", "\"e\"", NULL, MHDGZ_SKIP_EMPTY, true },
	/* Head-only without one: no length at all (and no chunked framing). */
	{ HO, NULL, true, true, 200, NULL, "\"e\"", NULL, MHDGZ_SKIP_EMPTY, false },
	{ HO, NULL, false, true, 304, NULL, "\"e\"", NULL, MHDGZ_SKIP_STATUS, false },
};

struct c10_empty {
	struct th_server srv;
	struct mhdgz *gz;
	const struct c10_empty_case *ec;
	struct mhdgz_outcome out; /* of the request to "/" */
	enum MHD_Result ret;      /* its queue's result */
	_Atomic unsigned int answered;
	_Atomic unsigned int errors;
};

/* "/" answers with the case's response; "/next" with a plain empty one. */
static enum MHD_Result
c10_empty_route(struct th_server *srv, struct MHD_Connection *c, const char *url,
		const char *method)
{
	struct c10_empty *x = srv->cls;
	const struct c10_empty_case *ec = x->ec;
	bool next = strcmp(url, "/next") == 0;
	struct mhdgz_outcome o = { .size = sizeof o };
	struct MHD_Response *r = mhdgz_response_empty(x->gz, next ? MHD_RF_NONE : ec->flags);
	enum MHD_Result ret;

	if (!r) {
		atomic_fetch_add(&x->errors, 1);
		return MHD_NO;
	}
	if (!next) {
		if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain") !=
			    MHD_YES ||
		    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, "\"e\"") != MHD_YES ||
		    (ec->content_length &&
		     MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH,
					     ec->content_length) != MHD_YES))
			atomic_fetch_add(&x->errors, 1);
		if (ec->drop_refused &&
		    mhdgz_response_set_options(x->gz, r, MHD_RF_NONE) != MHDGZ_EMHD)
			atomic_fetch_add(&x->errors, 1);
	}
	ret = mhdgz_queue_response_ex(x->gz, c, TU_REQ(method), next ? MHD_HTTP_OK : ec->status, r,
				      &o);
	if (next && ret != MHD_YES)
		atomic_fetch_add(&x->errors, 1);
	if (!next) {
		x->out = o;
		x->ret = ret;
		atomic_fetch_add(&x->answered, 1);
	}
	MHD_destroy_response(r);
	return ret;
}

/*
 * mhdgz_response_empty on the wire, exact fields (raw socket): a plain
 * empty response is never compressed and says "Content-Length: 0"; a
 * head-only one (MHD_RF_HEAD_ONLY_RESPONSE) is queued as the application's
 * own response for a HEAD or a 304, never compressed and its fields
 * untouched: the application's Content-Length (or none), its ETag, no
 * Vary. Each answer is followed on the same connection by a pipelined GET
 * that must be answered next, with nothing stray between (the framing
 * held).
 */
START_TEST(test_empty_head_only)
{
	const struct c10_empty_case *ec = &empty_cases[_i];
	struct c10_empty x = { .ec = ec };
	struct th_raw_response r, next;
	char req[512], ctx[128];
	int fd;

	snprintf(ctx, sizeof ctx, "empty flags 0x%x length %s, %s %s %u", (unsigned int)ec->flags,
		 ec->content_length ? ec->content_length : "-", ec->head ? "HEAD" : "GET",
		 ec->gzip ? "gzip" : "identity", ec->status);
	x.gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	th_start(&x.srv, x.gz, 0, c10_empty_route, &x);
	fd = th_raw_connect(x.srv.port);
	snprintf(req, sizeof req,
		 "%s / HTTP/1.1\r\nHost: t\r\n%s\r\nGET /next HTTP/1.1\r\nHost: t\r\n\r\n",
		 ec->head ? "HEAD" : "GET", ec->gzip ? "Accept-Encoding: gzip\r\n" : "");
	th_raw_send(fd, req, strlen(req));
	ck_assert_msg(th_raw_read_response(fd, ec->head, C10_WAIT_MS, &r) == 0,
		      "%s: incomplete response after %zu bytes", ctx, r.len);
	ck_assert_msg(r.status == (int)ec->status, "%s: status %d", ctx, r.status);
	th_raw_expect_field(&r, "Content-Length", ec->want_length, ctx);
	ck_assert_msg(th_raw_field_count(&r, "Content-Length") == (ec->want_length ? 1 : 0),
		      "%s: %d Content-Length fields", ctx,
		      th_raw_field_count(&r, "Content-Length"));
	th_raw_expect_field(&r, "Content-Encoding", NULL, ctx);
	th_raw_expect_field(&r, "Transfer-Encoding", NULL, ctx);
	th_raw_expect_field(&r, "ETag", ec->want_etag, ctx);
	th_raw_expect_field(&r, "Vary", ec->want_vary, ctx);
	th_raw_expect_field(&r, "Content-Type", "text/plain", ctx);
	ck_assert_msg(r.len == r.head_len, "%s: %zu bytes of body", ctx, r.len - r.head_len);
	ck_assert_msg(th_raw_read_response(fd, false, C10_WAIT_MS, &next) == 0,
		      "%s: the pipelined GET was not answered", ctx);
	ck_assert_int_eq(next.status, 200);
	th_raw_expect_field(&next, "Content-Length", "0", ctx);
	th_raw_expect_idle(fd, C10_IDLE_MS, ctx);
	close(fd);
	th_stop(&x.srv);
	ck_assert_uint_eq(atomic_load(&x.errors), 0);
	ck_assert_uint_eq(atomic_load(&x.answered), 1);
	ck_assert_int_eq(x.ret, MHD_YES);
	ck_assert_msg(x.out.reason == ec->reason, "%s: reason %s", ctx,
		      mhdgz_reason_name(x.out.reason));
	ck_assert_str_eq(x.out.coding, "identity");
	th_raw_response_free(&r);
	th_raw_response_free(&next);
	mhdgz_free(x.gz);
}
END_TEST

/* libmicrohttpd's own empty response for the same requests, made and
 * queued without mhdgz. */
static enum MHD_Result
c10_plain_route(struct th_server *srv, struct MHD_Connection *c, const char *url,
		const char *method)
{
	struct c10_empty *x = srv->cls;
	struct MHD_Response *r = MHD_create_response_empty(x->ec->flags);
	enum MHD_Result ret;

	(void)url;
	(void)method;
	if (!r || MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH,
					  x->ec->content_length) != MHD_YES) {
		atomic_fetch_add(&x->errors, 1);
		if (r)
			MHD_destroy_response(r);
		return MHD_NO;
	}
	ret = MHD_queue_response(c, x->ec->status, r);
	x->ret = ret;
	atomic_fetch_add(&x->answered, 1);
	MHD_destroy_response(r);
	return ret;
}

/*
 * A head-only response answering a GET with 200 (a body is due):
 * libmicrohttpd 1.0 refuses to queue it, and through mhdgz the same
 * happens, the response itself handed on and refused (MHD_NO, the
 * connection closed without a byte), never swapped for one with a body.
 * Loop: through mhdgz, then libmicrohttpd alone.
 */
START_TEST(test_empty_head_only_get)
{
	static const struct c10_empty_case ec = {
		HO, "1234", false, true, 200, NULL, NULL, NULL, MHDGZ_SKIP_EMPTY, false
	};
	struct c10_empty x = { .ec = &ec };
	static const char req[] = "GET / HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n";
	int fd;

	x.gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	th_start(&x.srv, x.gz, 0, _i == 0 ? c10_empty_route : c10_plain_route, &x);
	fd = th_raw_connect(x.srv.port);
	th_raw_send(fd, req, sizeof req - 1);
	th_raw_expect_closed(fd, C10_WAIT_MS, "head-only GET 200");
	close(fd);
	th_stop(&x.srv);
	ck_assert_uint_eq(atomic_load(&x.answered), 1);
	ck_assert_uint_eq(atomic_load(&x.errors), 0);
	ck_assert_int_eq(x.ret, MHD_NO);
	if (_i == 0) {
		ck_assert_int_eq(x.out.reason, MHDGZ_SKIP_EMPTY);
		ck_assert_str_eq(x.out.coding, "identity");
		ck_assert_uint_eq(th_stats(x.gz).compressions, 0);
	}
	mhdgz_free(x.gz);
}
END_TEST

/* The flags of test_empty_flags_recorded: visible in every response's
 * status line and Connection field. */
#define C10_FLAGS (MHD_RF_HTTP_1_0_SERVER | MHD_RF_SEND_KEEP_ALIVE_HEADER)

/* How the response with C10_FLAGS is made. */
enum c10_made {
	C10_MADE_EMPTY,      /* mhdgz_response_empty(gz, C10_FLAGS) */
	C10_MADE_EMPTY_SET,  /* mhdgz_response_empty(gz, MHD_RF_NONE), then set_options */
	C10_MADE_BUFFER_SET, /* mhdgz_response_from_buffer(gz, 0, ...), then set_options */
	C10_NMADE
};

struct c10_flags {
	struct th_server srv;
	struct mhdgz *gz;
	enum c10_made made;
	_Atomic unsigned int errors;
};

static enum MHD_Result
c10_flags_route(struct th_server *srv, struct MHD_Connection *c, const char *url,
		const char *method)
{
	struct c10_flags *x = srv->cls;
	unsigned int status = strcmp(url, "/304") == 0 ? MHD_HTTP_NOT_MODIFIED : MHD_HTTP_OK;
	struct MHD_Response *r = NULL;
	enum MHD_Result ret;

	switch (x->made) {
	case C10_MADE_EMPTY:
		r = mhdgz_response_empty(x->gz, C10_FLAGS);
		break;
	case C10_MADE_EMPTY_SET:
		r = mhdgz_response_empty(x->gz, MHD_RF_NONE);
		if (r && mhdgz_response_set_options(x->gz, r, C10_FLAGS) != 0)
			atomic_fetch_add(&x->errors, 1);
		break;
	default:
		r = mhdgz_response_from_buffer(x->gz, 0, NULL, MHD_RESPMEM_PERSISTENT);
		if (r && mhdgz_response_set_options(x->gz, r, C10_FLAGS) != 0)
			atomic_fetch_add(&x->errors, 1);
		break;
	}
	if (!r) {
		atomic_fetch_add(&x->errors, 1);
		return MHD_NO;
	}
	if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain") != MHD_YES ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, "\"e\"") != MHD_YES)
		atomic_fetch_add(&x->errors, 1);
	ret = mhdgz_queue_response_ex(x->gz, c, TU_REQ(method), status, r, NULL);
	if (ret != MHD_YES)
		atomic_fetch_add(&x->errors, 1);
	MHD_destroy_response(r);
	return ret;
}

/* The response bytes without the Date line (which changes each second). */
static char *
c10_without_date(const struct th_raw_response *r)
{
	char *s = malloc(r->len + 1), *d;

	ck_assert_ptr_nonnull(s);
	memcpy(s, r->bytes, r->len);
	s[r->len] = '\0';
	d = strstr(s, "\r\nDate: ");
	if (d) {
		char *end = strstr(d + 2, "\r\n");

		ck_assert_ptr_nonnull(end);
		memmove(d, end, strlen(end) + 1);
	}
	return s;
}

/*
 * Flags given to mhdgz_response_empty are recorded as
 * mhdgz_response_set_options records them: the 304 mhdgz queues in the
 * response's place for a gzip client (its coded ETag, Vary) carries them
 * like the response itself (an HTTP/1.0 status line, "Connection:
 * Keep-Alive"), and the bytes on the wire are the same, but for Date,
 * whether the flags came at creation or through
 * mhdgz_response_set_options on an empty response made either way.
 */
START_TEST(test_empty_flags_recorded)
{
	static const char req[] = "GET /304 HTTP/1.1\r\nHost: t\r\nConnection: keep-alive\r\n"
				  "Accept-Encoding: gzip\r\n\r\n"
				  "GET / HTTP/1.1\r\nHost: t\r\nConnection: keep-alive\r\n"
				  "Accept-Encoding: gzip\r\n\r\n";
	char *seen[C10_NMADE][2];

	for (int m = 0; m < C10_NMADE; m++) {
		struct c10_flags x = { .made = (enum c10_made)m };
		struct th_raw_response r[2];
		char ctx[64];
		int fd;

		snprintf(ctx, sizeof ctx, "flags made %d", m);
		x.gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
		th_start(&x.srv, x.gz, 0, c10_flags_route, &x);
		fd = th_raw_connect(x.srv.port);
		th_raw_send(fd, req, sizeof req - 1);
		for (int k = 0; k < 2; k++)
			ck_assert_msg(th_raw_read_response(fd, false, C10_WAIT_MS, &r[k]) == 0,
				      "%s: response %d incomplete", ctx, k);
		th_raw_expect_idle(fd, C10_IDLE_MS, ctx);
		close(fd);
		th_stop(&x.srv);
		ck_assert_uint_eq(atomic_load(&x.errors), 0);
		/* The 304 in the response's place: mhdgz's own (the gzip
		 * ETag, Vary), with the response's flags. */
		ck_assert_int_eq(r[0].status, 304);
		ck_assert_int_eq(strncmp((const char *)r[0].bytes, "HTTP/1.0 ", 9), 0);
		th_raw_expect_field(&r[0], "Connection", "Keep-Alive", ctx);
		th_raw_expect_field(&r[0], "ETag", "W/\"e\"", ctx);
		th_raw_expect_field(&r[0], "Vary", "Accept-Encoding", ctx);
		/* The 200: the response itself, empty. */
		ck_assert_int_eq(r[1].status, 200);
		ck_assert_int_eq(strncmp((const char *)r[1].bytes, "HTTP/1.0 ", 9), 0);
		th_raw_expect_field(&r[1], "Connection", "Keep-Alive", ctx);
		th_raw_expect_field(&r[1], "Content-Length", "0", ctx);
		th_raw_expect_field(&r[1], "ETag", "\"e\"", ctx);
		for (int k = 0; k < 2; k++) {
			seen[m][k] = c10_without_date(&r[k]);
			th_raw_response_free(&r[k]);
		}
		mhdgz_free(x.gz);
	}
	for (int m = 1; m < C10_NMADE; m++)
		for (int k = 0; k < 2; k++)
			ck_assert_msg(strcmp(seen[m][k], seen[0][k]) == 0,
				      "response %d, made %d:\n%s\nmade 0:\n%s", k, m, seen[m][k],
				      seen[0][k]);
	for (int m = 0; m < C10_NMADE; m++)
		for (int k = 0; k < 2; k++)
			free(seen[m][k]);
}
END_TEST

/* mhdgz_response_set_options with libmicrohttpd 1.0's head-only flag:
 * refused (MHDGZ_EMHD) on a response with a body, accepted on an empty
 * one however it was made. */
START_TEST(test_set_options_head_only)
{
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct MHD_Response *r;

	r = mhdgz_response_from_buffer_static(gz, 5, "hello");
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(mhdgz_response_set_options(gz, r, HO), MHDGZ_EMHD);
	MHD_destroy_response(r);
	r = mhdgz_response_from_buffer_copy(gz, 0, NULL);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(mhdgz_response_set_options(gz, r, HO), 0);
	ck_assert_int_eq(mhdgz_response_set_options(gz, r, MHD_RF_NONE), 0);
	MHD_destroy_response(r);
	r = mhdgz_response_empty(gz, HO | MHD_RF_HTTP_1_0_SERVER);
	ck_assert_ptr_nonnull(r);
	MHD_destroy_response(r);
	mhdgz_free(gz);
}
END_TEST
#endif /* MHD_VERSION >= 0x01000000 */

/* The tests of libmicrohttpd 1.0's twins, or NULL rows (the end of the
 * list) when built against 0.9. */
#if MHD_VERSION >= 0x01000000
#define C10_FN(test) test
#define C10_NEMPTY N_ELEMS(empty_cases)
#else
#define C10_FN(test) NULL
#define C10_NEMPTY 0
#endif

struct ck_case
hnd_ctors_case(void)
{
	return (struct ck_case){ "ctors",
				 CK_CASE_TIMEOUT,
				 { { test_twins_fail, 0, 0 },
				   { C10_FN(test_static_copy_bodies), 0, 4 },
				   { C10_FN(test_static_copy_empty), 0, 0 },
				   { C10_FN(test_empty_head_only), 0, (int)C10_NEMPTY },
				   { C10_FN(test_empty_head_only_get), 0, 2 },
				   { C10_FN(test_empty_flags_recorded), 0, 0 },
				   { C10_FN(test_set_options_head_only), 0, 0 } } };
}
