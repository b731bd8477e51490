/* check_hnd_fidelity.c: on the wire, a variant mhdgz queues differs from the application's response only by its coding (raw sockets, pipelined requests). */
#define _GNU_SOURCE /* pipe2, F_SETPIPE_SZ */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <nettle/base64.h>
#include <nettle/sha2.h>

#include "check_suites.h"
#include "harness.h"
#include "testutil.h"

/* Longest wait for one response on a raw connection, ms. */
#define FX_WAIT_MS 30000
/* How long "nothing more comes" is watched for, ms. */
#define FX_IDLE_MS 200
/* Body of the resources: above min_nbytes, compressible text. */
#define FX_LEN (64u * 1024)
/* Above the whole-file limit (1 MiB), below the HEAD length limit (16 MiB). */
#define FX_BIG_LEN (1200u * 1000)
/* Outcomes kept per server (requests per test). */
#define FX_MAX_OUT 8

/* The response kinds an application builds. */
enum fx_kind {
	FX_BUF,    /* mhdgz_response_from_buffer */
	FX_CB,     /* mhdgz_response_from_callback, known size */
	FX_CB_UNK, /* mhdgz_response_from_callback, MHD_SIZE_UNKNOWN */
	FX_FD,     /* mhdgz_response_from_fd, below the whole-file limit */
	FX_FD_BIG, /* mhdgz_response_from_fd, above it: a gzip stream */
	/* The other constructor twins. */
	FX_FREE_CB,     /* mhdgz_response_from_buffer_with_free_callback */
	FX_FREE_CB_CLS, /* mhdgz_response_from_buffer_with_free_callback_cls */
	FX_IOVEC,       /* mhdgz_response_from_iovec, three pieces, one empty */
	FX_FD64,        /* mhdgz_response_from_fd64, below the whole-file limit */
	FX_PIPE,        /* mhdgz_response_from_pipe: a stream of unknown size */
	FX_NKINDS
};

static const char *const kind_name[FX_NKINDS] = { "buffer",
						  "callback",
						  "callback-unknown",
						  "fd",
						  "fd-big",
						  "buffer-with-free-callback",
						  "buffer-with-free-callback-cls",
						  "iovec",
						  "fd64",
						  "pipe" };

/* A body compressed whole (its gzip length known before sending). */
static bool
fx_whole(enum fx_kind k)
{
	return k == FX_BUF || k == FX_FD || k == FX_FREE_CB || k == FX_FREE_CB_CLS ||
	       k == FX_IOVEC || k == FX_FD64;
}

/* A stream whose size is not known (MHD_SIZE_UNKNOWN). */
static bool
fx_unknown(enum fx_kind k)
{
	return k == FX_CB_UNK || k == FX_PIPE;
}

/* A body in a temporary file. */
static bool
fx_file(enum fx_kind k)
{
	return k == FX_FD || k == FX_FD_BIG || k == FX_FD64;
}

/* Runs of the application's free callback (buffer-with-free-callback and
 * iovec kinds) in this test process, and of those the runs with another
 * argument than libmicrohttpd's: the buffer for
 * buffer_with_free_callback, the closure for the _cls and iovec twins. */
static _Atomic unsigned int fx_frees, fx_frees_bad_arg;
static const void *fx_free_arg;

static void
fx_free_cb(void *arg)
{
	atomic_fetch_add(&fx_frees, 1);
	if (arg != fx_free_arg)
		atomic_fetch_add(&fx_frees_bad_arg, 1);
}

/* A server answering every URL with one resource made as kind says; the
 * status is the URL's number ("/304"), 200 for "/". */
struct fx {
	struct th_server srv;
	struct mhdgz *gz;
	enum fx_kind kind;
	const uint8_t *body; /* borrowed */
	size_t len;
	int file;                      /* FX_FD*: the body in a temporary file, else -1 */
	const char *hdr[17];           /* name, value pairs, NULL-terminated */
	enum MHD_ResponseFlags rflags; /* mhdgz_response_set_options when nonzero */
	struct th_src src;
	struct MHD_Response *shared; /* non-NULL: queued for every request */
	struct mhdgz_outcome out[FX_MAX_OUT];
	_Atomic unsigned int made; /* responses with a free callback created */
	_Atomic unsigned int nout;
	_Atomic unsigned int errors;
};

static struct MHD_Response *
fx_make(struct fx *x)
{
	struct MHD_Response *r = NULL;
	struct MHD_IoVec iov[3];
	int fd, p[2];

	switch (x->kind) {
	case FX_BUF:
		r = mhdgz_response_from_buffer(x->gz, x->len, (void *)(uintptr_t)x->body,
					       MHD_RESPMEM_PERSISTENT);
		break;
	case FX_CB:
	case FX_CB_UNK:
		r = mhdgz_response_from_callback(x->gz,
						 x->kind == FX_CB ? x->len : MHD_SIZE_UNKNOWN, 4096,
						 th_src_read, &x->src, th_src_free);
		break;
	case FX_FD:
	case FX_FD_BIG:
		/* The application's own descriptor, handed over to the response. */
		fd = dup(x->file);
		if (fd >= 0)
			r = mhdgz_response_from_fd(x->gz, x->len, fd);
		break;
	case FX_FD64:
		fd = dup(x->file);
		if (fd >= 0)
			r = mhdgz_response_from_fd64(x->gz, x->len, fd);
		break;
	case FX_FREE_CB:
		r = mhdgz_response_from_buffer_with_free_callback(x->gz, x->len,
								  (void *)(uintptr_t)x->body,
								  fx_free_cb);
		break;
	case FX_FREE_CB_CLS:
		r = mhdgz_response_from_buffer_with_free_callback_cls(x->gz, x->len,
								      (void *)(uintptr_t)x->body,
								      fx_free_cb, x);
		break;
	case FX_IOVEC:
		iov[0].iov_base = x->body;
		iov[0].iov_len = x->len / 3;
		iov[1].iov_base = x->body + x->len / 3;
		iov[1].iov_len = 0;
		iov[2].iov_base = x->body + x->len / 3;
		iov[2].iov_len = x->len - x->len / 3;
		r = mhdgz_response_from_iovec(x->gz, iov, 3, fx_free_cb, x);
		break;
	case FX_PIPE:
		/* The whole body waits in the pipe, its write end closed. */
		if (pipe2(p, O_CLOEXEC) != 0)
			break;
		if (fcntl(p[1], F_SETPIPE_SZ, (int)(2 * FX_LEN)) < 0 ||
		    write(p[1], x->body, x->len) != (ssize_t)x->len) {
			close(p[0]);
			close(p[1]);
			break;
		}
		close(p[1]);
		r = mhdgz_response_from_pipe(x->gz, p[0]);
		if (!r)
			close(p[0]);
		break;
	default:
		break;
	}
	if (!r)
		return NULL;
	if (x->kind == FX_FREE_CB || x->kind == FX_FREE_CB_CLS || x->kind == FX_IOVEC)
		atomic_fetch_add(&x->made, 1);
	for (int i = 0; x->hdr[i]; i += 2)
		if (MHD_add_response_header(r, x->hdr[i], x->hdr[i + 1]) != MHD_YES)
			atomic_fetch_add(&x->errors, 1);
	if (x->rflags != MHD_RF_NONE && mhdgz_response_set_options(x->gz, r, x->rflags) != 0)
		atomic_fetch_add(&x->errors, 1);
	return r;
}

static enum MHD_Result
fx_route(struct th_server *srv, struct MHD_Connection *c, const char *url, const char *method)
{
	struct fx *x = srv->cls;
	unsigned int status = url[1] ? (unsigned int)atoi(url + 1) : 200;
	struct MHD_Response *r = x->shared ? x->shared : fx_make(x);
	struct mhdgz_outcome o = { .size = sizeof o };
	enum MHD_Result ret;
	unsigned int k;

	if (!r) {
		atomic_fetch_add(&x->errors, 1);
		return MHD_NO;
	}
	ret = mhdgz_queue_response_ex(x->gz, c, TU_REQ(method), status, r, &o);
	if (ret != MHD_YES)
		atomic_fetch_add(&x->errors, 1);
	k = atomic_fetch_add(&x->nout, 1);
	if (k < FX_MAX_OUT)
		x->out[k] = o;
	if (!x->shared)
		MHD_destroy_response(r);
	return ret;
}

/* A handler with min_nbytes (0: default), and the daemon. Set kind, body,
 * len, hdr and rflags before. */
static void
fx_start(struct fx *x, size_t min_nbytes, bool shared)
{
	struct th_daemon_opts o = { .mhd_flags = MHD_USE_ERROR_LOG, .idle_timeout_s = 120 };

	x->gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, min_nbytes);
	x->file = -1;
	atomic_store(&fx_frees, 0);
	atomic_store(&fx_frees_bad_arg, 0);
	fx_free_arg = x->kind == FX_FREE_CB ? (const void *)x->body : (const void *)x;
	if (fx_file(x->kind))
		x->file = th_temp_file(x->body, x->len);
	x->src.data = x->body;
	x->src.len = x->len;
	x->src.chunk = 4096;
	if (shared) {
		x->shared = fx_make(x);
		ck_assert(x->shared != NULL);
	}
	th_start_ex(&x->srv, x->gz, &o, fx_route, x);
}

/* Stops the server; each response made with a free callback has run it
 * exactly once by then (libmicrohttpd is done with them all). */
static void
fx_stop(struct fx *x)
{
	th_stop(&x->srv);
	if (x->shared)
		MHD_destroy_response(x->shared);
	x->shared = NULL;
	ck_assert_msg(atomic_load(&fx_frees) == atomic_load(&x->made),
		      "%s: the free callback ran %u times for %u responses", kind_name[x->kind],
		      atomic_load(&fx_frees), atomic_load(&x->made));
	ck_assert_uint_eq(atomic_load(&fx_frees_bad_arg), 0);
	mhdgz_free(x->gz);
	x->gz = NULL;
	if (x->file >= 0)
		close(x->file);
	x->file = -1;
}

/* The i-th outcome (the i-th request answered). */
static const struct mhdgz_outcome *
fx_out(struct fx *x, unsigned int i)
{
	ck_assert_msg(atomic_load(&x->nout) > i, "request %u was not answered", i);
	return &x->out[i];
}

static void
expect_outcome(const struct mhdgz_outcome *o, const char *coding, enum mhdgz_reason reason,
	       uint64_t body_nbytes, uint64_t coded_nbytes, const char *ctx)
{
	ck_assert_msg(strcmp(o->coding, coding) == 0, "%s: outcome coding %s, want %s", ctx,
		      o->coding, coding);
	ck_assert_msg(o->reason == reason, "%s: outcome reason %s, want %s", ctx,
		      mhdgz_reason_name(o->reason), mhdgz_reason_name(reason));
	ck_assert_msg(o->body_nbytes == body_nbytes, "%s: outcome body_nbytes %llu, want %llu", ctx,
		      (unsigned long long)o->body_nbytes, (unsigned long long)body_nbytes);
	ck_assert_msg(o->coded_nbytes == coded_nbytes, "%s: outcome coded_nbytes %llu, want %llu",
		      ctx, (unsigned long long)o->coded_nbytes, (unsigned long long)coded_nbytes);
}

/* Read one response that must come whole. */
static void
read_resp(int fd, bool head, struct th_raw_response *resp, const char *ctx)
{
	ck_assert_msg(th_raw_read_response(fd, head, FX_WAIT_MS, resp) == 0,
		      "%s: incomplete response after %zu bytes: '%.*s'", ctx, resp->len,
		      (int)(resp->len < 400 ? resp->len : 400), (const char *)resp->bytes);
}

/* The status line starts with version and has status. */
static void
expect_status_line(const struct th_raw_response *resp, const char *version, int status,
		   const char *ctx)
{
	ck_assert_msg(resp->head_len > 12 && strncmp((const char *)resp->bytes, version, 8) == 0 &&
			      resp->status == status,
		      "%s: status line '%.12s', want %s %d", ctx, (const char *)resp->bytes,
		      version, status);
}

/*
 * The body of resp (dechunked when chunked), decoded when gzip, equals
 * orig byte for byte. Returns the length of the body as coded (what a
 * Content-Length would have said).
 */
static size_t
expect_body(const struct th_raw_response *resp, bool gzip, const uint8_t *orig, size_t orig_len,
	    const char *ctx)
{
	const uint8_t *b = resp->bytes + resp->body_off;
	size_t blen = resp->len - resp->body_off, coded;
	uint8_t *dechunked = NULL;

	if (resp->chunked) {
		size_t nchunks = 0;
		bool empty_early = false;

		ck_assert_msg(th_dechunk(b, blen, &dechunked, &blen, &nchunks, &empty_early) == 0 &&
				      !empty_early,
			      "%s: malformed chunked body", ctx);
		b = dechunked;
	}
	coded = blen;
	if (gzip) {
		uint8_t *out = NULL;
		size_t out_len = 0;

		ck_assert_msg(tu_gunzip(b, blen, &out, &out_len) == 0, "%s: bad gzip body", ctx);
		ck_assert_msg(out_len == orig_len && memcmp(out, orig, orig_len) == 0,
			      "%s: gunzipped body (%zu bytes) differs from the original (%zu)", ctx,
			      out_len, orig_len);
		ck_assert_int_eq(tu_check_member(b, blen, orig, orig_len), 0);
		free(out);
	} else {
		ck_assert_msg(blen == orig_len && (orig_len == 0 || memcmp(b, orig, orig_len) == 0),
			      "%s: identity body (%zu bytes) differs from the original (%zu)", ctx,
			      blen, orig_len);
	}
	free(dechunked);
	return coded;
}

static const char *
u64s(char *buf, size_t cap, uint64_t v)
{
	snprintf(buf, cap, "%llu", (unsigned long long)v);
	return buf;
}

static uint8_t *
fx_body(enum fx_kind kind, uint32_t seed)
{
	return tu_payload(kind == FX_FD_BIG ? FX_BIG_LEN : FX_LEN, TU_TEXT, seed);
}

static size_t
fx_len(enum fx_kind kind)
{
	return kind == FX_FD_BIG ? FX_BIG_LEN : FX_LEN;
}

#define AE_GZIP "Accept-Encoding: gzip\r\n"

/* ===================================================================== */
/*  1. HEAD of every response kind                                        */
/* ===================================================================== */

struct head_case {
	enum fx_kind kind;
	bool gzip;   /* the client accepts gzip */
	bool no_len; /* no length can be known without running the reader */
};

static const struct head_case head_cases[] = {
	{ FX_BUF, false, false },         { FX_BUF, true, false },
	{ FX_CB, false, false },          { FX_CB, true, true },
	{ FX_CB_UNK, false, true },       { FX_CB_UNK, true, true },
	{ FX_FD, false, false },          { FX_FD, true, false },
	{ FX_FD_BIG, false, false },      { FX_FD_BIG, true, false },
	{ FX_FREE_CB, false, false },     { FX_FREE_CB, true, false },
	{ FX_FREE_CB_CLS, false, false }, { FX_FREE_CB_CLS, true, false },
	{ FX_IOVEC, false, false },       { FX_IOVEC, true, false },
	{ FX_FD64, false, false },        { FX_FD64, true, false },
	{ FX_PIPE, false, true },         { FX_PIPE, true, true },
};

/* The fields a HEAD of the fx resource sends, as GET sends them. */
static void
expect_head_fields(const struct th_raw_response *head, bool gzip, const char *etag, const char *ctx)
{
	expect_status_line(head, "HTTP/1.1", 200, ctx);
	ck_assert_msg(head->len == head->head_len, "%s: %zu bytes after the head", ctx,
		      head->len - head->head_len);
	th_raw_expect_field(head, "Content-Type", "text/plain; charset=utf-8", ctx);
	th_raw_expect_field(head, "Content-Encoding", gzip ? "gzip" : NULL, ctx);
	th_raw_expect_field(head, "Vary", "Accept-Encoding", ctx);
	th_raw_expect_field(head, "ETag", etag, ctx);
	th_raw_expect_field(head, "Last-Modified", "Tue, 01 Jul 2025 10:00:00 GMT", ctx);
	th_raw_expect_field(head, "X-App", "a", ctx);
	th_raw_expect_field(head, "Transfer-Encoding", NULL, ctx);
}

/* HEAD sends the fields GET sends and not one byte of content; its
 * Content-Length is the one GET sends (gzip: the coded length, also for
 * a file streamed compressed); the connection then answers a pipelined
 * GET. Where no length can be known without running the application's
 * reader, the HEAD has no length and the reader is never called for it;
 * with libmicrohttpd 0.9.75 the connection closes right after its header
 * block, with 1.0 (a head-only response) it answers a GET sent after the
 * HEAD was read, and a HEAD and a GET pipelined in one write. */
START_TEST(test_head_every_kind)
{
	const struct head_case *hc = &head_cases[_i];
	struct fx x = { .kind = hc->kind,
			.len = fx_len(hc->kind),
			.hdr = { "Content-Type", "text/plain; charset=utf-8", "ETag", "\"v1\"",
				 "Last-Modified", "Tue, 01 Jul 2025 10:00:00 GMT", "X-App", "a" } };
	uint8_t *body = fx_body(hc->kind, 101 + (uint32_t)_i);
	bool len_known = !fx_unknown(hc->kind);
	bool closes = hc->no_len && TH_BODYLESS_UNKNOWN_CLOSES;
	char req[512], ctx[96], num[32];
	struct th_raw_response head, head2 = { 0 }, get;
	struct mhdgz_stats st;
	enum mhdgz_reason reason = hc->gzip ? MHDGZ_COMPRESSED : MHDGZ_SKIP_NOT_ACCEPTED;
	const char *etag = hc->gzip ? "W/\"v1\"" : "\"v1\"";
	uint64_t body_nbytes = len_known ? x.len : MHDGZ_NBYTES_UNKNOWN;
	unsigned int heads = hc->no_len && !closes ? 2 : 1, nresp = closes ? 1 : heads + 1;
	static const char get_fmt[] = "GET / HTTP/1.1\r\nHost: t\r\n%s\r\n";
	static const char head_fmt[] = "HEAD / HTTP/1.1\r\nHost: t\r\n%s\r\n";
	size_t coded;
	int fd;

	snprintf(ctx, sizeof ctx, "HEAD %s %s", kind_name[hc->kind],
		 hc->gzip ? "gzip" : "identity");
	x.body = body;
	fx_start(&x, 0, false);
	fd = th_raw_connect(x.srv.port);
	snprintf(req, sizeof req, head_fmt, hc->gzip ? AE_GZIP : "");
	if (!hc->no_len) /* the GET in the same write */
		snprintf(req + strlen(req), sizeof req - strlen(req), get_fmt,
			 hc->gzip ? AE_GZIP : "");
	th_raw_send(fd, req, strlen(req));
	read_resp(fd, true, &head, ctx);
	expect_head_fields(&head, hc->gzip, etag, ctx);
	if (hc->no_len) {
		th_raw_expect_field(&head, "Content-Length", NULL, ctx);
		th_raw_expect_field(&head, "Connection", closes ? "close" : NULL, ctx);
		if (closes)
			th_raw_expect_closed(fd, FX_WAIT_MS, ctx);
		else
			th_raw_expect_idle(fd, FX_IDLE_MS, ctx);
		ck_assert_msg(atomic_load(&x.src.calls) == 0, "%s: HEAD ran the reader %llu times",
			      ctx, (unsigned long long)atomic_load(&x.src.calls));
		expect_outcome(fx_out(&x, 0), hc->gzip ? "gzip" : "identity", reason, body_nbytes,
			       MHDGZ_NBYTES_UNKNOWN, ctx);
	}
	if (hc->no_len && !closes) {
		/* The same connection: a HEAD and a GET in one write. */
		snprintf(req, sizeof req, head_fmt, hc->gzip ? AE_GZIP : "");
		snprintf(req + strlen(req), sizeof req - strlen(req), get_fmt,
			 hc->gzip ? AE_GZIP : "");
		th_raw_send(fd, req, strlen(req));
		read_resp(fd, true, &head2, ctx);
		expect_head_fields(&head2, hc->gzip, etag, ctx);
		th_raw_expect_field(&head2, "Content-Length", NULL, ctx);
		th_raw_expect_field(&head2, "Connection", NULL, ctx);
		expect_outcome(fx_out(&x, 1), hc->gzip ? "gzip" : "identity", reason, body_nbytes,
			       MHDGZ_NBYTES_UNKNOWN, ctx);
	}
	if (!closes) {
		if (!hc->no_len)
			th_raw_expect_field(&head, "Connection", NULL, ctx);
		read_resp(fd, false, &get, ctx);
		expect_status_line(&get, "HTTP/1.1", 200, ctx);
		coded = expect_body(&get, hc->gzip, body, x.len, ctx);
		/* GET and HEAD: the same fields. */
		th_raw_expect_field(&get, "Content-Type", "text/plain; charset=utf-8", ctx);
		th_raw_expect_field(&get, "Content-Encoding", hc->gzip ? "gzip" : NULL, ctx);
		th_raw_expect_field(&get, "Vary", "Accept-Encoding", ctx);
		th_raw_expect_field(&get, "ETag", etag, ctx);
		if (!hc->no_len) {
			th_raw_expect_field(&head, "Content-Length", u64s(num, sizeof num, coded),
					    ctx);
			if (!get.chunked)
				th_raw_expect_field(&get, "Content-Length", num, ctx);
		} else {
			ck_assert_msg(get.chunked, "%s: the GET has a length its HEAD had not",
				      ctx);
		}
		ck_assert_msg(!hc->gzip || coded < x.len, "%s: gzip not smaller", ctx);
		th_raw_expect_idle(fd, FX_IDLE_MS, ctx);
		if (!hc->no_len)
			expect_outcome(fx_out(&x, 0), hc->gzip ? "gzip" : "identity", reason, x.len,
				       coded, ctx);
		/* GET of a file streamed compressed: its length is not known. */
		expect_outcome(fx_out(&x, heads), hc->gzip ? "gzip" : "identity", reason,
			       body_nbytes, get.chunked ? MHDGZ_NBYTES_UNKNOWN : coded, ctx);
		th_raw_response_free(&get);
	}
	ck_assert_uint_eq(atomic_load(&x.nout), nresp);
	close(fd);
	st = th_stats(x.gz);
	ck_assert_uint_eq(st.responses, nresp);
	ck_assert_uint_eq(st.reasons[reason], nresp);
	ck_assert_uint_eq(st.compressed, hc->gzip ? nresp : 0);
	ck_assert_uint_eq(atomic_load(&x.errors), 0);
	th_raw_response_free(&head);
	th_raw_response_free(&head2);
	fx_stop(&x);
	free(body);
}
END_TEST

/* A HEAD and a conditional HEAD of a stream of unknown size (a gzip
 * client). The coding comes from the header fields alone: typed, the 200
 * is gzip (Content-Encoding, the weak ETag, Vary) and the 304 carries its
 * ETag and Vary; untyped, the 200 is identity (the queue call does not
 * read it to sniff) and neither carries Vary. No length, and the reader
 * never runs for either. With libmicrohttpd 0.9.75 each closes (no framing
 * of an unknown length without a body); with 1.0 the connection then
 * answers a pipelined HEAD and GET. _i: kind x typed. */
START_TEST(test_head_304_unknown_size)
{
	enum fx_kind kind = _i / 2 ? FX_PIPE : FX_CB_UNK;
	bool typed = _i % 2;
	struct fx x = { .kind = kind, .len = FX_LEN };
	uint8_t *body = fx_body(kind, 151 + (uint32_t)_i);
	static const char *const req[2] = { "HEAD / HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n",
					    "HEAD /304 HTTP/1.1\r\nHost: t\r\n" AE_GZIP
					    "If-None-Match: \"v1\"\r\n\r\n" };
	struct th_raw_response r[2];
	char ctx[96];
	int h = 0;

	x.body = body;
	if (typed) {
		x.hdr[h++] = "Content-Type";
		x.hdr[h++] = "text/plain";
	}
	x.hdr[h++] = "ETag";
	x.hdr[h++] = "\"v1\"";
	x.hdr[h++] = "X-App";
	x.hdr[h++] = "a";
	fx_start(&x, 0, false);
	for (int i = 0; i < 2; i++) {
		int fd = th_raw_connect(x.srv.port);
		unsigned long long calls0 = atomic_load(&x.src.calls);

		snprintf(ctx, sizeof ctx, "%s HEAD %s, %s", i ? "conditional" : "plain",
			 kind_name[kind], typed ? "typed" : "untyped");
		th_raw_send(fd, req[i], strlen(req[i]));
		read_resp(fd, true, &r[i], ctx);
		expect_status_line(&r[i], "HTTP/1.1", i ? 304 : 200, ctx);
		ck_assert_msg(r[i].len == r[i].head_len, "%s: bytes after the head", ctx);
		th_raw_expect_field(&r[i], "Content-Type", typed ? "text/plain" : NULL, ctx);
		th_raw_expect_field(&r[i], "X-App", "a", ctx);
		th_raw_expect_field(&r[i], "Vary", typed ? "Accept-Encoding" : NULL, ctx);
		th_raw_expect_field(&r[i], "ETag", typed ? "W/\"v1\"" : "\"v1\"", ctx);
		th_raw_expect_field(&r[i], "Content-Encoding", typed && i == 0 ? "gzip" : NULL,
				    ctx);
		th_raw_expect_field(&r[i], "Content-Length", NULL, ctx);
		th_raw_expect_field(&r[i], "Transfer-Encoding", NULL, ctx);
		th_raw_expect_field(&r[i], "Connection",
				    TH_BODYLESS_UNKNOWN_CLOSES ? "close" : NULL, ctx);
		if (TH_BODYLESS_UNKNOWN_CLOSES)
			th_raw_expect_closed(fd, FX_WAIT_MS, ctx);
		else
			th_raw_expect_idle(fd, FX_IDLE_MS, ctx);
		ck_assert_uint_eq(atomic_load(&x.src.calls), calls0); /* not for a HEAD */
		if (!TH_BODYLESS_UNKNOWN_CLOSES) {
			/* The connection goes on: a HEAD and a GET in one write. */
			static const char two[] = "HEAD / HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n"
						  "GET / HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n";
			struct th_raw_response h2, get;

			th_raw_send(fd, two, strlen(two));
			read_resp(fd, true, &h2, ctx);
			expect_status_line(&h2, "HTTP/1.1", 200, ctx);
			ck_assert_msg(h2.len == h2.head_len, "%s: bytes after the head", ctx);
			th_raw_expect_field(&h2, "Content-Length", NULL, ctx);
			read_resp(fd, false, &get, ctx);
			expect_status_line(&get, "HTTP/1.1", 200, ctx);
			expect_body(&get, typed, body, x.len, ctx);
			th_raw_expect_field(&get, "Content-Encoding", typed ? "gzip" : NULL, ctx);
			th_raw_expect_idle(fd, FX_IDLE_MS, ctx);
			th_raw_response_free(&h2);
			th_raw_response_free(&get);
		}
		close(fd);
		th_raw_response_free(&r[i]);
	}
	ck_assert_uint_eq(th_stats(x.gz).reasons[MHDGZ_SKIP_STATUS], 1);
	ck_assert_uint_eq(th_stats(x.gz).failures, 0);
	ck_assert_uint_eq(atomic_load(&x.errors), 0);
	fx_stop(&x);
	free(body);
}
END_TEST

/* ===================================================================== */
/*  2. Statuses without content on every response kind                   */
/* ===================================================================== */

/* The ways a response without content is queued. */
enum nb_variant {
	NB_103,         /* 1xx (Early Hints) */
	NB_204,         /* No Content */
	NB_304_ETAG,    /* Not Modified, resource with an ETag */
	NB_304_LASTMOD, /* Not Modified, resource with Last-Modified only */
	NB_NVARIANTS
};

static const char *const nb_name[NB_NVARIANTS] = { "103", "204", "304+etag", "304+last-modified" };

/*
 * 1xx, 204 and 304 queued with each response kind, for identity and gzip
 * clients: not a byte of body, no Transfer-Encoding; then a pipelined GET
 * of the resource (200) comes intact. A 304 carries the 200's Vary and
 * validators, and a Content-Length only when it is that 200's (RFC 9110
 * section 8.6): the gzip length of a body compressed whole or of a file
 * streamed compressed (computed). When that 200 has no length (a content
 * reader's gzip stream, a stream of unknown size), the 304 has none either;
 * with libmicrohttpd 0.9.75 it then closes the connection, the only framing
 * 0.9.75 has for it, and the GET goes on a new connection; with 1.0 it is a
 * head-only response and the pipelined GET is answered on the same
 * connection. _i = kind x client x variant.
 */
START_TEST(test_no_content_statuses)
{
	enum fx_kind kind = (enum fx_kind)(_i / (2 * NB_NVARIANTS));
	bool gzip = (_i / NB_NVARIANTS) % 2;
	enum nb_variant nv = (enum nb_variant)(_i % NB_NVARIANTS);
	unsigned int status = nv == NB_103 ? 103 : nv == NB_204 ? 204 : 304;
	bool whole = fx_whole(kind);
	struct fx x = { .kind = kind, .len = fx_len(kind) };
	uint8_t *body = fx_body(kind, 201 + (uint32_t)_i);
	char req[512], ctx[96], num[32];
	struct th_raw_response nb, get;
	struct mhdgz_stats st;
	const char *etag_200 = nv == NB_304_LASTMOD ? NULL : gzip ? "W/\"v1\"" : "\"v1\"";
	const char *cl_304;
	size_t coded;
	int fd, h = 0;
	/* The 304 of a 200 without length. */
	bool no_len = status == 304 && ((gzip && (kind == FX_CB || fx_unknown(kind))) ||
					(!gzip && fx_unknown(kind)));
	bool closes = no_len && TH_BODYLESS_UNKNOWN_CLOSES;

	snprintf(ctx, sizeof ctx, "%s %s %s", nb_name[nv], kind_name[kind],
		 gzip ? "gzip" : "identity");
	x.body = body;
	x.hdr[h++] = "Content-Type";
	x.hdr[h++] = "text/html";
	if (nv == NB_304_LASTMOD) {
		x.hdr[h++] = "Last-Modified";
		x.hdr[h++] = "Tue, 01 Jul 2025 10:00:00 GMT";
	} else {
		x.hdr[h++] = "ETag";
		x.hdr[h++] = "\"v1\"";
	}
	fx_start(&x, 0, false);
	fd = th_raw_connect(x.srv.port);
	snprintf(req, sizeof req,
		 "GET /%u HTTP/1.1\r\nHost: t\r\n%s%s\r\n"
		 "GET / HTTP/1.1\r\nHost: t\r\n%s\r\n",
		 status, gzip ? AE_GZIP : "",
		 nv == NB_304_LASTMOD ? "If-Modified-Since: Tue, 01 Jul 2025 10:00:00 GMT\r\n"
		 : nv == NB_304_ETAG
			 ? (gzip ? "If-None-Match: W/\"v1\"\r\n" : "If-None-Match: \"v1\"\r\n")
			 : "",
		 gzip ? AE_GZIP : "");
	th_raw_send(fd, req, strlen(req));
	read_resp(fd, false, &nb, ctx);
	if (closes) { /* nothing after the 304's head; the GET on its own */
		th_raw_expect_closed(fd, FX_IDLE_MS * 10, ctx);
		close(fd);
		fd = th_raw_connect(x.srv.port);
		snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: t\r\n%s\r\n",
			 gzip ? AE_GZIP : "");
		th_raw_send(fd, req, strlen(req));
	}
	read_resp(fd, false, &get, ctx);
	expect_status_line(&nb, "HTTP/1.1", (int)status, ctx);
	ck_assert_msg(nb.len == nb.head_len, "%s: %zu bytes after the head", ctx,
		      nb.len - nb.head_len);
	th_raw_expect_field(&nb, "Transfer-Encoding", NULL, ctx);
	th_raw_expect_field(&nb, "Content-Encoding", NULL, ctx);
	th_raw_expect_field(&nb, "Connection", closes ? "close" : NULL, ctx);
	/* The 200 that follows on the same connection, intact. */
	expect_status_line(&get, "HTTP/1.1", 200, ctx);
	coded = expect_body(&get, gzip, body, x.len, ctx);
	th_raw_expect_field(&get, "Content-Encoding", gzip ? "gzip" : NULL, ctx);
	th_raw_expect_field(&get, "Vary", "Accept-Encoding", ctx);
	th_raw_expect_field(&get, "ETag", etag_200, ctx);
	if (status == 304) {
		/* What the 200 for this client carries. */
		th_raw_expect_field(&nb, "Vary", "Accept-Encoding", ctx);
		th_raw_expect_field(&nb, "ETag", etag_200, ctx);
		/* The gzip stream of a big file is chunked, but its length was
		 * computed for the 304: the bytes the 200 sends. */
		if (no_len)
			cl_304 = NULL; /* the 200 has no length: neither has the 304 */
		else
			cl_304 = u64s(num, sizeof num, coded);
		ck_assert_msg(get.chunked == (no_len || (gzip && kind == FX_FD_BIG)),
			      "%s: chunked 200 %d, 304 without length %d", ctx, get.chunked,
			      no_len);
		if (gzip && !whole)
			ck_assert_msg(get.chunked, "%s: the gzip 200 of a stream has a length",
				      ctx);
		if (gzip && whole)
			ck_assert_msg(coded < x.len, "%s: the gzip 200 is not smaller", ctx);
		th_raw_expect_field(&nb, "Content-Length", cl_304, ctx);
	} else {
		/* RFC 9110 section 8.6: never a Content-Length with 1xx or 204. */
		th_raw_expect_field(&nb, "Content-Length", NULL, ctx);
		th_raw_expect_field(&nb, "Vary", NULL, ctx);
		th_raw_expect_field(&nb, "ETag", "\"v1\"", ctx);
	}
	th_raw_expect_idle(fd, FX_IDLE_MS, ctx);
	close(fd);
	expect_outcome(fx_out(&x, 0), "identity", MHDGZ_SKIP_STATUS,
		       fx_unknown(kind) ? MHDGZ_NBYTES_UNKNOWN : x.len, 0, ctx);
	st = th_stats(x.gz);
	ck_assert_uint_eq(st.responses, 2);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_STATUS], 1);
	ck_assert_uint_eq(st.reasons[gzip ? MHDGZ_COMPRESSED : MHDGZ_SKIP_NOT_ACCEPTED], 1);
	ck_assert_uint_eq(atomic_load(&x.errors), 0);
	th_raw_response_free(&nb);
	th_raw_response_free(&get);
	fx_stop(&x);
	free(body);
}
END_TEST

/* A 5,000-byte text resource with only
 * Last-Modified. Its gzip 200 has Content-Length N; the If-Modified-Since
 * 304 says N too, never 5000; the identity 304 says 5000. Then a pipelined
 * request on the same connection. */
START_TEST(test_304_length_of_gzip_200)
{
	enum { LEN = 5000 };
	uint8_t *body = tu_payload(LEN, TU_TEXT, 7);
	struct fx x = { .kind = FX_BUF,
			.body = body,
			.len = LEN,
			.hdr = { "Content-Type", "text/plain", "Last-Modified",
				 "Tue, 01 Jul 2025 10:00:00 GMT" } };
	static const char req[] = "GET / HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n"
				  "GET /304 HTTP/1.1\r\nHost: t\r\n" AE_GZIP
				  "If-Modified-Since: Tue, 01 Jul 2025 10:00:00 GMT\r\n\r\n"
				  "GET /304 HTTP/1.1\r\nHost: t\r\n"
				  "If-Modified-Since: Tue, 01 Jul 2025 10:00:00 GMT\r\n\r\n"
				  "GET / HTTP/1.1\r\nHost: t\r\n\r\n";
	struct th_raw_response r[4];
	char num[32];
	size_t coded;
	int fd;

	fx_start(&x, 0, true);
	fd = th_raw_connect(x.srv.port);
	th_raw_send(fd, req, strlen(req));
	for (int i = 0; i < 4; i++)
		read_resp(fd, false, &r[i], "5000-byte resource");
	expect_status_line(&r[0], "HTTP/1.1", 200, "gzip 200");
	coded = expect_body(&r[0], true, body, LEN, "gzip 200");
	ck_assert_msg(coded < LEN, "gzip 200 not smaller");
	th_raw_expect_field(&r[0], "Content-Length", u64s(num, sizeof num, coded), "gzip 200");
	expect_status_line(&r[1], "HTTP/1.1", 304, "gzip 304");
	th_raw_expect_field(&r[1], "Content-Length", num, "gzip 304");
	th_raw_expect_field(&r[1], "Vary", "Accept-Encoding", "gzip 304");
	th_raw_expect_field(&r[1], "Last-Modified", "Tue, 01 Jul 2025 10:00:00 GMT", "gzip 304");
	th_raw_expect_field(&r[1], "ETag", NULL, "gzip 304");
	th_raw_expect_field(&r[1], "Transfer-Encoding", NULL, "gzip 304");
	expect_status_line(&r[2], "HTTP/1.1", 304, "identity 304");
	th_raw_expect_field(&r[2], "Content-Length", "5000", "identity 304");
	th_raw_expect_field(&r[2], "Vary", "Accept-Encoding", "identity 304");
	expect_status_line(&r[3], "HTTP/1.1", 200, "identity 200");
	expect_body(&r[3], false, body, LEN, "identity 200");
	th_raw_expect_field(&r[3], "Content-Length", "5000", "identity 200");
	th_raw_expect_idle(fd, FX_IDLE_MS, "after the identity 200");
	close(fd);
	expect_outcome(fx_out(&x, 0), "gzip", MHDGZ_COMPRESSED, LEN, coded, "gzip 200");
	expect_outcome(fx_out(&x, 1), "identity", MHDGZ_SKIP_STATUS, LEN, 0, "gzip 304");
	expect_outcome(fx_out(&x, 2), "identity", MHDGZ_SKIP_STATUS, LEN, 0, "identity 304");
	expect_outcome(fx_out(&x, 3), "identity", MHDGZ_SKIP_NOT_ACCEPTED, LEN, LEN,
		       "identity 200");
	for (int i = 0; i < 4; i++)
		th_raw_response_free(&r[i]);
	ck_assert_uint_eq(th_stats(x.gz).compressions, 1);
	ck_assert_uint_eq(atomic_load(&x.errors), 0);
	fx_stop(&x);
	free(body);
}
END_TEST

/* ===================================================================== */
/*  3. A 206 carries the Vary its 200 would carry                        */
/* ===================================================================== */

struct range_case {
	enum fx_kind kind;
	const char *type;
	const char *vary; /* expected on the 206 and the 200 */
};

static const struct range_case range_cases[] = {
	{ FX_BUF, "text/plain", "Accept-Encoding" },
	{ FX_CB, "text/plain", "Accept-Encoding" },
	{ FX_FD, "text/plain", "Accept-Encoding" },
	{ FX_BUF, "image/png", NULL },
	{ FX_FD, "image/png", NULL },
	{ FX_IOVEC, "text/plain", "Accept-Encoding" },
	{ FX_FD64, "text/plain", "Accept-Encoding" },
	{ FX_FREE_CB_CLS, "image/png", NULL },
};

/* A 206 (the application's Content-Range body) for a gzip and an identity
 * client pipelined: identity bytes both times, the Vary the 200 of the
 * same resource carries (RFC 9110 section 15.3.7), none for a type that is
 * never compressed. */
START_TEST(test_206_vary)
{
	const struct range_case *rc = &range_cases[_i];
	enum { PART = 100 };
	uint8_t *full = tu_payload(5000, TU_TEXT, 31);
	struct fx x = { .kind = rc->kind,
			.body = full + 100,
			.len = PART,
			.hdr = { "Content-Type", rc->type, "Content-Range", "bytes 100-199/5000",
				 "ETag", "\"r\"" } };
	static const char req[] = "GET /206 HTTP/1.1\r\nHost: t\r\n" AE_GZIP
				  "Range: bytes=100-199\r\n\r\n"
				  "GET /206 HTTP/1.1\r\nHost: t\r\nRange: bytes=100-199\r\n\r\n";
	struct th_raw_response r[2];
	char ctx[80];
	int fd;

	fx_start(&x, 0, false);
	fd = th_raw_connect(x.srv.port);
	th_raw_send(fd, req, strlen(req));
	for (int i = 0; i < 2; i++) {
		snprintf(ctx, sizeof ctx, "206 %s %s, %s client", kind_name[rc->kind], rc->type,
			 i == 0 ? "gzip" : "identity");
		read_resp(fd, false, &r[i], ctx);
		expect_status_line(&r[i], "HTTP/1.1", 206, ctx);
		expect_body(&r[i], false, full + 100, PART, ctx);
		th_raw_expect_field(&r[i], "Content-Length", "100", ctx);
		th_raw_expect_field(&r[i], "Content-Range", "bytes 100-199/5000", ctx);
		th_raw_expect_field(&r[i], "Content-Encoding", NULL, ctx);
		th_raw_expect_field(&r[i], "Vary", rc->vary, ctx);
		th_raw_expect_field(&r[i], "ETag", "\"r\"", ctx);
		ck_assert_int_eq(th_raw_field_count(&r[i], "Vary"), rc->vary ? 1 : 0);
		expect_outcome(fx_out(&x, (unsigned int)i), "identity", MHDGZ_SKIP_RANGE, PART,
			       PART, ctx);
		th_raw_response_free(&r[i]);
	}
	th_raw_expect_idle(fd, FX_IDLE_MS, "after the second 206");
	close(fd);
	ck_assert_uint_eq(th_stats(x.gz).reasons[MHDGZ_SKIP_RANGE], 2);
	ck_assert_uint_eq(atomic_load(&x.errors), 0);
	fx_stop(&x);
	free(full);
}
END_TEST

/* ===================================================================== */
/*  4. Response options reach every variant                              */
/* ===================================================================== */

struct opt_case {
	enum MHD_ResponseFlags flags;
	enum fx_kind kind;
	bool gzip;
	bool head;
	unsigned int status;
	const char *version;    /* of the status line */
	const char *connection; /* the Connection field, NULL: none */
	bool close;             /* the server closes after this response */
};

#define RF_10 MHD_RF_HTTP_1_0_SERVER
#define RF_STRICT MHD_RF_HTTP_1_0_COMPATIBLE_STRICT
#define RF_KA MHD_RF_SEND_KEEP_ALIVE_HEADER
#define RF_INS MHD_RF_INSANITY_HEADER_CONTENT_LENGTH

static const struct opt_case opt_cases[] = {
	/* HTTP/1.0 server: every variant says HTTP/1.0; kept alive on
	 * request, unless the body has no length (no chunked in 1.0). */
	{ RF_10, FX_BUF, false, false, 200, "HTTP/1.0", "Keep-Alive", false },
	{ RF_10, FX_BUF, true, false, 200, "HTTP/1.0", "Keep-Alive", false },
	{ RF_10, FX_BUF, true, true, 200, "HTTP/1.0", "Keep-Alive", false },
	{ RF_10, FX_BUF, true, false, 304, "HTTP/1.0", "Keep-Alive", false },
	{ RF_10, FX_FD, false, false, 200, "HTTP/1.0", "Keep-Alive", false },
	{ RF_10, FX_FD, true, false, 200, "HTTP/1.0", "Keep-Alive", false },
	{ RF_10, FX_CB, false, false, 200, "HTTP/1.0", "Keep-Alive", false },
	{ RF_10, FX_CB, true, false, 200, "HTTP/1.0", "close", true },
	{ RF_10, FX_CB, true, true, 200, "HTTP/1.0", "close", true },
	{ RF_10, FX_FD_BIG, true, false, 200, "HTTP/1.0", "close", true },
	/* HTTP/1.0-compatible strict: close after every response, a length
	 * where there is one, never chunked. */
	{ RF_STRICT, FX_BUF, false, false, 200, "HTTP/1.1", "close", true },
	{ RF_STRICT, FX_BUF, true, false, 200, "HTTP/1.1", "close", true },
	{ RF_STRICT, FX_BUF, true, true, 200, "HTTP/1.1", "close", true },
	{ RF_STRICT, FX_FD, false, false, 200, "HTTP/1.1", "close", true },
	{ RF_STRICT, FX_FD, true, false, 200, "HTTP/1.1", "close", true },
	{ RF_STRICT, FX_CB, false, false, 200, "HTTP/1.1", "close", true },
	{ RF_STRICT, FX_CB, true, false, 200, "HTTP/1.1", "close", true },
	{ RF_STRICT, FX_FD_BIG, true, false, 200, "HTTP/1.1", "close", true },
	/* Keep-Alive header sent to HTTP/1.1 clients too. */
	{ RF_KA, FX_BUF, false, false, 200, "HTTP/1.1", "Keep-Alive", false },
	{ RF_KA, FX_BUF, true, false, 200, "HTTP/1.1", "Keep-Alive", false },
	{ RF_KA, FX_BUF, true, false, 304, "HTTP/1.1", "Keep-Alive", false },
	{ RF_KA, FX_FD, false, false, 200, "HTTP/1.1", "Keep-Alive", false },
	{ RF_KA, FX_CB, true, false, 200, "HTTP/1.1", "Keep-Alive", false },
	{ RF_KA, FX_FD_BIG, true, false, 200, "HTTP/1.1", "Keep-Alive", false },
	/* An application's own Content-Length allowed: it describes the
	 * identity body, so no variant copies it; libmicrohttpd's own is the
	 * one sent (checked by reading exactly that many bytes). */
	{ RF_INS, FX_BUF, false, false, 200, "HTTP/1.1", NULL, false },
	{ RF_INS, FX_BUF, true, false, 200, "HTTP/1.1", NULL, false },
	{ RF_INS, FX_FD, true, false, 200, "HTTP/1.1", NULL, false },
	{ RF_INS, FX_CB, true, false, 200, "HTTP/1.1", NULL, false },
	/* The other constructor twins. */
	{ RF_10, FX_IOVEC, true, false, 200, "HTTP/1.0", "Keep-Alive", false },
	{ RF_10, FX_FREE_CB, true, false, 304, "HTTP/1.0", "Keep-Alive", false },
	{ RF_10, FX_PIPE, true, false, 200, "HTTP/1.0", "close", true },
	{ RF_10, FX_PIPE, false, false, 200, "HTTP/1.0", "close", true },
	{ RF_STRICT, FX_FD64, true, false, 200, "HTTP/1.1", "close", true },
	{ RF_STRICT, FX_PIPE, true, false, 200, "HTTP/1.1", "close", true },
	{ RF_KA, FX_FREE_CB_CLS, true, false, 200, "HTTP/1.1", "Keep-Alive", false },
	{ RF_KA, FX_PIPE, true, false, 200, "HTTP/1.1", "Keep-Alive", false },
	/* A HEAD or 304 standing for a 200 without length: 0.9.75 closes
	 * after it, 1.0's head-only response keeps the connection. */
	{ RF_KA, FX_CB_UNK, false, true, 200, "HTTP/1.1",
	  TH_BODYLESS_UNKNOWN_CLOSES ? "close" : "Keep-Alive", TH_BODYLESS_UNKNOWN_CLOSES },
	{ RF_KA, FX_PIPE, false, false, 304, "HTTP/1.1",
	  TH_BODYLESS_UNKNOWN_CLOSES ? "close" : "Keep-Alive", TH_BODYLESS_UNKNOWN_CLOSES },
	{ RF_KA, FX_CB, true, false, 304, "HTTP/1.1",
	  TH_BODYLESS_UNKNOWN_CLOSES ? "close" : "Keep-Alive", TH_BODYLESS_UNKNOWN_CLOSES },
	/* ... unless the application's own response would close: strict
	 * framing has no chunks, so its 200 of unknown length is ended by the
	 * close, and so are its HEAD and 304 on both lines. */
	{ RF_STRICT, FX_CB_UNK, false, true, 200, "HTTP/1.1", "close", true },
	{ RF_STRICT, FX_PIPE, false, false, 304, "HTTP/1.1", "close", true },
};

/* The flags set with mhdgz_response_set_options() on the application's
 * response shape what goes out whichever variant is queued: the gzip
 * representation, a gzip stream, a 304, a HEAD, the sendfile identity
 * response. Kept-alive rows answer a pipelined GET; closing rows end
 * right after their response. */
START_TEST(test_response_options)
{
	const struct opt_case *oc = &opt_cases[_i];
	struct fx x = { .kind = oc->kind,
			.len = fx_len(oc->kind),
			.rflags = oc->flags,
			.hdr = { "Content-Type", "text/plain", "ETag", "\"o\"" } };
	uint8_t *body = fx_body(oc->kind, 301 + (uint32_t)_i);
	bool gzip_stream = oc->gzip && oc->status == 200 && !oc->head &&
			   (oc->kind == FX_CB || oc->kind == FX_FD_BIG || fx_unknown(oc->kind));
	enum mhdgz_reason reason = oc->gzip ? MHDGZ_COMPRESSED : MHDGZ_SKIP_NOT_ACCEPTED;
	struct mhdgz_stats st;
	char req[512], ctx[96];
	struct th_raw_response r, next;
	int fd;

	snprintf(ctx, sizeof ctx, "flags 0x%x %s %s %s %u", (unsigned int)oc->flags,
		 kind_name[oc->kind], oc->gzip ? "gzip" : "identity", oc->head ? "HEAD" : "GET",
		 oc->status);
	x.body = body;
	fx_start(&x, 0, false);
	fd = th_raw_connect(x.srv.port);
	snprintf(req, sizeof req, "%s /%u HTTP/1.1\r\nHost: t\r\nConnection: keep-alive\r\n%s\r\n",
		 oc->head ? "HEAD" : "GET", oc->status, oc->gzip ? AE_GZIP : "");
	if (!oc->close)
		snprintf(req + strlen(req), sizeof req - strlen(req),
			 "GET / HTTP/1.1\r\nHost: t\r\nConnection: keep-alive\r\n%s\r\n",
			 oc->gzip ? AE_GZIP : "");
	th_raw_send(fd, req, strlen(req));
	read_resp(fd, oc->head, &r, ctx);
	expect_status_line(&r, oc->version, (int)oc->status, ctx);
	th_raw_expect_field(&r, "Connection", oc->connection, ctx);
	/* Chunked only for a gzip stream on a connection kept alive. */
	th_raw_expect_field(&r, "Transfer-Encoding", gzip_stream && !oc->close ? "chunked" : NULL,
			    ctx);
	th_raw_expect_field(&r, "Vary", "Accept-Encoding", ctx);
	th_raw_expect_field(&r, "ETag", oc->gzip ? "W/\"o\"" : "\"o\"", ctx);
	if (oc->status == 200)
		th_raw_expect_field(&r, "Content-Encoding", oc->gzip ? "gzip" : NULL, ctx);
	if (oc->status == 200 && !oc->head)
		expect_body(&r, oc->gzip, body, x.len, ctx);
	if (oc->close) {
		/* A body without length ends with the close (read up to it
		 * above); one with a length is followed by the close. */
		if (th_raw_header(&r, "Content-Length", &(size_t){ 0 }) || oc->head)
			th_raw_expect_closed(fd, FX_WAIT_MS, ctx);
	} else {
		read_resp(fd, false, &next, ctx);
		expect_status_line(&next, oc->version, 200, ctx);
		th_raw_expect_field(&next, "Connection", oc->connection, ctx);
		expect_body(&next, oc->gzip, body, x.len, ctx);
		th_raw_expect_idle(fd, FX_IDLE_MS, ctx);
		th_raw_response_free(&next);
	}
	close(fd);
	ck_assert_uint_eq(atomic_load(&x.errors), 0);
	/* The first request, then the pipelined GET of kept-alive rows. */
	st = th_stats(x.gz);
	ck_assert_uint_eq(st.responses, oc->close ? 1 : 2);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_STATUS], oc->status == 304 ? 1 : 0);
	ck_assert_uint_eq(st.reasons[reason], (oc->status == 304 ? 0 : 1) + (oc->close ? 0 : 1));
	th_raw_response_free(&r);
	fx_stop(&x);
	free(body);
}
END_TEST

/* ===================================================================== */
/*  5. Integrity fields describe the bytes they were computed over        */
/* ===================================================================== */

static const enum fx_kind digest_kinds[] = { FX_BUF,     FX_CB,    FX_FD,   FX_FD_BIG, FX_CB_UNK,
					     FX_FREE_CB, FX_IOVEC, FX_FD64, FX_PIPE };

static const char *const digest_fields[] = { "Content-MD5", "Digest", "Content-Digest",
					     "Repr-Digest" };

/* A gzip response never carries Content-MD5, Digest, Content-Digest or
 * Repr-Digest computed over the identity bytes (each dropped is counted);
 * the identity response pipelined after it keeps them unchanged. */
START_TEST(test_digests)
{
	enum fx_kind kind = digest_kinds[_i];
	struct fx x = {
		.kind = kind,
		.len = fx_len(kind),
		.hdr = { "Content-Type", "application/json", "Content-MD5",
			 "Q2hlY2sgSW50ZWdyaXR5IQ==", "Digest",
			 "sha-256=X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=", "Content-Digest",
			 "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:", "Repr-Digest",
			 "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:" },
	};
	uint8_t *body = fx_body(kind, 401 + (uint32_t)_i);
	static const char req[] = "GET / HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n"
				  "GET / HTTP/1.1\r\nHost: t\r\n\r\n";
	struct th_raw_response gzr, idr;
	char ctx[64];
	int fd;

	snprintf(ctx, sizeof ctx, "digests %s", kind_name[kind]);
	x.body = body;
	fx_start(&x, 0, false);
	fd = th_raw_connect(x.srv.port);
	th_raw_send(fd, req, strlen(req));
	read_resp(fd, false, &gzr, ctx);
	read_resp(fd, false, &idr, ctx);
	th_raw_expect_idle(fd, FX_IDLE_MS, ctx);
	close(fd);
	expect_status_line(&gzr, "HTTP/1.1", 200, ctx);
	th_raw_expect_field(&gzr, "Content-Encoding", "gzip", ctx);
	expect_body(&gzr, true, body, x.len, ctx);
	expect_status_line(&idr, "HTTP/1.1", 200, ctx);
	th_raw_expect_field(&idr, "Content-Encoding", NULL, ctx);
	expect_body(&idr, false, body, x.len, ctx);
	for (size_t k = 0; k < N_ELEMS(digest_fields); k++) {
		th_raw_expect_field(&gzr, digest_fields[k], NULL, ctx);
		th_raw_expect_field(&idr, digest_fields[k], x.hdr[3 + 2 * k], ctx);
	}
	ck_assert_uint_eq(th_stats(x.gz).digests_dropped, 4);
	ck_assert_uint_eq(th_stats(x.gz).reasons[MHDGZ_COMPRESSED], 1);
	ck_assert_uint_eq(atomic_load(&x.errors), 0);
	th_raw_response_free(&gzr);
	th_raw_response_free(&idr);
	fx_stop(&x);
	free(body);
}
END_TEST

/* ===================================================================== */
/*  6. Streams of unknown size decided on their first bytes               */
/* ===================================================================== */

struct unk_case {
	size_t len;
	bool typed;  /* Content-Type: text/plain, else none */
	bool binary; /* th_fill_binary: no sniffer takes it for text */
	enum mhdgz_reason reason;
	const char *vary;
	const char *cl; /* expected Content-Length, NULL: chunked */
};

static const struct unk_case unk_cases[] = {
	{ 0, true, false, MHDGZ_COMPRESSED, "Accept-Encoding", NULL },
	{ 0, false, false, MHDGZ_SKIP_TYPE, NULL, NULL },
	{ 12, true, false, MHDGZ_COMPRESSED, "Accept-Encoding", NULL },
	{ 1000, true, false, MHDGZ_COMPRESSED, "Accept-Encoding", NULL },
	{ 600, false, false, MHDGZ_SKIP_TYPE, NULL, NULL },
	{ 8192, false, false, MHDGZ_SKIP_TYPE, NULL, NULL },
	{ 8192, false, true, MHDGZ_SKIP_TYPE, NULL, NULL },
	{ 1500, true, false, MHDGZ_COMPRESSED, "Accept-Encoding", NULL },
};

/* An unknown-size content-reader stream queued twice for a gzip client on
 * one connection (pipelined). The queue call never runs the application's
 * reader, so the coding comes from the header fields alone: a compressible
 * type goes gzip whatever the body turns out to be (empty: an empty gzip
 * member; min_nbytes does not apply to a length not known), an untyped one
 * goes identity (no type to go by, no sniff) without Vary: both chunked,
 * as the application's own response. */
START_TEST(test_unknown_size_from_fields)
{
	const struct unk_case uc = unk_cases[_i];
	uint8_t *body = tu_payload(uc.len, TU_TEXT, 501 + (uint32_t)_i);
	struct fx x = { .kind = FX_CB_UNK, .body = body, .len = uc.len };
	static const char req[] = "GET / HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n"
				  "GET / HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n";
	bool gzip = uc.reason == MHDGZ_COMPRESSED;
	struct th_raw_response r;
	char ctx[80];
	int fd;

	if (uc.binary)
		th_fill_binary(body, uc.len);
	if (uc.typed) {
		x.hdr[0] = "Content-Type";
		x.hdr[1] = "text/plain";
	}
	fx_start(&x, 0, false);
	fd = th_raw_connect(x.srv.port);
	th_raw_send(fd, req, strlen(req));
	for (unsigned int i = 0; i < 2; i++) {
		snprintf(ctx, sizeof ctx, "unknown size %zu %s%s, request %u", uc.len,
			 uc.typed ? "typed" : "untyped", uc.binary ? " binary" : "", i);
		read_resp(fd, false, &r, ctx);
		expect_status_line(&r, "HTTP/1.1", 200, ctx);
		expect_body(&r, gzip, body, uc.len, ctx);
		th_raw_expect_field(&r, "Content-Encoding", gzip ? "gzip" : NULL, ctx);
		th_raw_expect_field(&r, "Content-Length", uc.cl, ctx);
		th_raw_expect_field(&r, "Transfer-Encoding", uc.cl ? NULL : "chunked", ctx);
		th_raw_expect_field(&r, "Vary", uc.vary, ctx);
		th_raw_expect_field(&r, "Connection", NULL, ctx);
		expect_outcome(fx_out(&x, i), gzip ? "gzip" : "identity", uc.reason,
			       uc.cl ? uc.len : MHDGZ_NBYTES_UNKNOWN,
			       uc.cl ? uc.len : MHDGZ_NBYTES_UNKNOWN, ctx);
		th_raw_response_free(&r);
	}
	th_raw_expect_idle(fd, FX_IDLE_MS, "after the second stream");
	close(fd);
	ck_assert_uint_eq(th_stats(x.gz).reasons[uc.reason], 2);
	ck_assert_uint_eq(atomic_load(&x.errors), 0);
	fx_stop(&x);
	/* One response per request, each freed once. */
	ck_assert_uint_eq(atomic_load(&x.src.frees), 2);
	free(body);
}
END_TEST

/* ===================================================================== */
/*  7. Descriptors the library duplicates are close-on-exec               */
/* ===================================================================== */

/* Open descriptors of this process, other than app_fd, on the same file
 * as app_fd; each must be close-on-exec. Returns how many there are. */
static unsigned int
count_dups(int app_fd, const char *ctx)
{
	struct stat want, st;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	unsigned int n = 0;

	ck_assert(d != NULL);
	ck_assert_int_eq(fstat(app_fd, &want), 0);
	while ((de = readdir(d)) != NULL) {
		int fd = atoi(de->d_name);

		if (de->d_name[0] == '.' || fd == app_fd || fd == dirfd(d))
			continue;
		/* Through /proc only, never the descriptor itself: the daemon's
		 * thread may close it meanwhile (ThreadSanitizer would see a
		 * race between that close and an fstat here). */
		char path[64], line[128];
		FILE *info;
		unsigned long flags = 0;
		bool have_flags = false;

		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		if (stat(path, &st) != 0 || st.st_dev != want.st_dev || st.st_ino != want.st_ino)
			continue;
		snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
		info = fopen(path, "r");
		if (!info)
			continue; /* closed meanwhile */
		while (fgets(line, sizeof line, info))
			if (sscanf(line, "flags: %lo", &flags) == 1)
				have_flags = true;
		fclose(info);
		if (!have_flags)
			continue;
		ck_assert_msg(flags & O_CLOEXEC,
			      "%s: descriptor %d on the response's file is inherited by exec", ctx,
			      fd);
		n++;
	}
	closedir(d);
	return n;
}

/* The sendfile identity response and a gzip stream of a big file each
 * read the file through a duplicate the library makes; no such duplicate
 * survives an exec. The stream's is watched while it is being sent
 * (incompressible content fills the socket buffers and holds it open). */
START_TEST(test_dups_cloexec)
{
	enum { LEN = 12 * 1024 * 1024 };
	uint8_t *body = tu_payload(LEN, TU_RANDOM, 9);
	struct fx x = {
		.kind = FX_FD_BIG, .body = body, .len = LEN, .hdr = { "Content-Type", "text/plain" }
	};
	static const char req[] = "GET / HTTP/1.1\r\nHost: t\r\n\r\n"
				  "GET / HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n";
	struct th_raw_response r;
	int fd, app_fd;

	fx_start(&x, 0, true);
	/* Only the response's own descriptor is the application's now. */
	close(x.file);
	x.file = -1;
	app_fd = -1;
	for (int k = 0; k < 1024 && app_fd < 0; k++) {
		struct stat st;

		if (fstat(k, &st) == 0 && fcntl(k, F_GETFD) >= 0 &&
		    !(fcntl(k, F_GETFD) & FD_CLOEXEC) && S_ISREG(st.st_mode) && st.st_nlink == 0 &&
		    (uint64_t)st.st_size == LEN)
			app_fd = k;
	}
	ck_assert_msg(app_fd >= 0, "the response's descriptor not found");
	ck_assert_uint_eq(count_dups(app_fd, "before any request"), 0);
	fd = th_raw_connect(x.srv.port);
	/* A small receive window: the stream cannot finish into buffers. */
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &(int){ 64 * 1024 }, sizeof(int)),
			 0);
	th_raw_send(fd, req, strlen(req));
	read_resp(fd, false, &r, "identity");
	expect_body(&r, false, body, LEN, "identity");
	th_raw_response_free(&r);
	/* The gzip stream is under way (its head may not be sent yet): the
	 * sendfile response's duplicate and the stream's. */
	{
		uint64_t deadline = th_now_ms() + FX_WAIT_MS;
		unsigned int n;

		while ((n = count_dups(app_fd, "while streaming")) < 2 && th_now_ms() < deadline)
			usleep(5000);
		ck_assert_uint_eq(n, 2);
	}
	read_resp(fd, false, &r, "gzip stream");
	th_raw_expect_field(&r, "Content-Encoding", "gzip", "gzip stream");
	expect_body(&r, true, body, LEN, "gzip stream");
	th_raw_response_free(&r);
	th_raw_expect_idle(fd, FX_IDLE_MS, "after the gzip stream");
	close(fd);
	ck_assert_uint_le(count_dups(app_fd, "after"), 2);
	ck_assert_uint_eq(atomic_load(&x.errors), 0);
	fx_stop(&x);
	free(body);
}
END_TEST

/*
 * A small file's identity GET is read into memory per queue
 * (hnd_file_identity): like libmicrohttpd's fd response, a response kept
 * and queued again sends what the file holds at that queue, and of a file
 * cut below the announced size no more than the file holds is sent (the
 * response is libmicrohttpd's fd response then, which stalls such a
 * response; it never completes). Pipelined on one connection.
 */
START_TEST(test_small_file_identity_current)
{
	uint8_t *body = fx_body(FX_FD, 31);
	uint8_t *other = tu_payload(FX_LEN, TU_TEXT, 32);
	struct fx x = {
		.kind = FX_FD, .body = body, .len = FX_LEN, .hdr = { "Content-Type", "text/plain" }
	};
	static const char req[] = "GET / HTTP/1.1\r\nHost: t\r\n\r\n";
	struct th_raw_response r;
	int fd;

	fx_start(&x, 0, true);
	fd = th_raw_connect(x.srv.port);
	th_raw_send(fd, req, strlen(req));
	read_resp(fd, false, &r, "first");
	th_raw_expect_field(&r, "Content-Length", "65536", "first");
	expect_body(&r, false, body, FX_LEN, "first");
	th_raw_response_free(&r);
	/* The same size, other bytes: the second queue sends them. */
	ck_assert_int_eq(pwrite(x.file, other, FX_LEN, 0), (ssize_t)FX_LEN);
	th_raw_send(fd, req, strlen(req));
	th_raw_send(fd, req, strlen(req));
	read_resp(fd, false, &r, "rewritten");
	expect_body(&r, false, other, FX_LEN, "rewritten");
	th_raw_response_free(&r);
	read_resp(fd, false, &r, "rewritten, pipelined");
	expect_body(&r, false, other, FX_LEN, "rewritten, pipelined");
	th_raw_response_free(&r);
	th_raw_expect_idle(fd, FX_IDLE_MS, "after the rewritten file");
	/* Cut to half: the announced length cannot be sent. */
	ck_assert_int_eq(ftruncate(x.file, FX_LEN / 2), 0);
	th_raw_send(fd, req, strlen(req));
	ck_assert_int_ne(th_raw_read_response(fd, false, FX_IDLE_MS, &r), 0);
	ck_assert_uint_le(r.len, r.body_off + FX_LEN / 2);
	th_raw_response_free(&r);
	close(fd);
	ck_assert_uint_eq(atomic_load(&x.errors), 0);
	fx_stop(&x);
	free(body);
	free(other);
}
END_TEST

/* ===================================================================== */

/* ===================================================================== */
/*  Digest trailers                                                        */
/* ===================================================================== */

/* A stream with an integrity trailer (MHD_add_response_footer): the gzip
 * stream sends no Content-Digest of the identity bytes in its trailer
 * (counted as dropped), the identity stream keeps it. */
static const char dt_digest[] = "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:";

static enum MHD_Result
dt_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct th_src *src = s->cls;
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)url;
	r = mhdgz_response_from_callback(s->gz, MHD_SIZE_UNKNOWN, 4096, th_src_read, src, NULL);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/plain");
	MHD_add_response_footer(r, "Content-Digest", dt_digest);
	ret = mhdgz_queue_response_ex(s->gz, c, TU_REQ(method), MHD_HTTP_OK, r, NULL);
	MHD_destroy_response(r);
	return ret;
}

/* Does buf[0..n) hold the bytes of str? */
static bool
dt_has(const char *buf, size_t n, const char *str)
{
	size_t k = strlen(str);

	for (size_t i = 0; i + k <= n; i++)
		if (memcmp(buf + i, str, k) == 0)
			return true;
	return false;
}

/* Read until the peer closes (Connection: close asked), at most 10 s. */
static size_t
dt_read_all(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	struct timeval tv = { .tv_sec = 10 };

	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
	while (n < cap - 1) {
		ssize_t k = recv(fd, buf + n, cap - 1 - n, 0);

		if (k <= 0)
			break;
		n += (size_t)k;
	}
	buf[n] = '\0';
	return n;
}

START_TEST(test_digest_trailer)
{
	bool gzip = _i == 0;
	uint8_t *body = tu_payload(FX_LEN, TU_TEXT, 77);
	struct th_src src = { .data = body, .len = FX_LEN, .chunk = 1000 };
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = { 0 };
	char req[256], *buf = malloc(4 * FX_LEN);
	struct mhdgz_stats st;
	size_t n;
	int fd;

	ck_assert_ptr_nonnull(buf);
	th_start(&s, gz, 0, dt_route, &src);
	fd = th_raw_connect(s.port);
	snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n%s\r\n",
		 gzip ? AE_GZIP : "");
	th_raw_send(fd, req, strlen(req));
	n = dt_read_all(fd, buf, 4 * FX_LEN);
	close(fd);
	ck_assert_uint_gt(n, 0);
	ck_assert_msg((strstr(buf, "Content-Encoding: gzip") != NULL) == gzip, "coding");
	ck_assert_msg(strstr(buf, "Transfer-Encoding: chunked") != NULL, "chunked");
	if (gzip) {
		ck_assert_msg(!dt_has(buf, n, dt_digest),
			      "the gzip stream's trailer carries the identity digest");
	} else {
		ck_assert_msg(dt_has(buf, n, dt_digest), "the identity stream lost its trailer");
	}
	th_stop(&s);
	st = th_stats(gz);
	ck_assert_uint_eq(st.digests_dropped, gzip ? 1 : 0);
	mhdgz_free(gz);
	free(buf);
	free(body);
}
END_TEST

/* ===================================================================== */
/*  The 304 of a 200 served identity                                       */
/* ===================================================================== */

/* A text resource below min_nbytes, strong ETag "abc": its 200 goes out
 * identity with "abc" also to a gzip client, so its 304 (the 200's own
 * response queued with 304) carries "abc", never W/"abc", and the 200's
 * Content-Length; then a pipelined GET on the same connection. */
static const char id_body[] = "a small text body, served identity below min_nbytes\n";

static enum MHD_Result
id_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)url;
	r = mhdgz_response_from_buffer(s->gz, sizeof id_body - 1, (void *)id_body,
				       MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/plain");
	MHD_add_response_header(r, "ETag", "\"abc\"");
	ret = mhdgz_queue_response_ex(s->gz, c, TU_REQ_PRE(method), MHD_HTTP_OK, r, NULL);
	MHD_destroy_response(r);
	return ret;
}

START_TEST(test_304_of_identity_200)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n"
				  "GET / HTTP/1.1\r\nHost: t\r\n" AE_GZIP
				  "If-None-Match: \"abc\"\r\n\r\n"
				  "GET / HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n";
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0); /* min 1024 */
	struct th_server s = { 0 };
	struct th_raw_response r[3];
	char num[32];
	int fd;

	snprintf(num, sizeof num, "%zu", sizeof id_body - 1);
	th_start(&s, gz, 0, id_route, NULL);
	fd = th_raw_connect(s.port);
	th_raw_send(fd, req, strlen(req));
	for (int i = 0; i < 3; i++)
		read_resp(fd, false, &r[i], "small resource");
	expect_status_line(&r[0], "HTTP/1.1", 200, "identity 200");
	th_raw_expect_field(&r[0], "Content-Encoding", NULL, "identity 200");
	th_raw_expect_field(&r[0], "ETag", "\"abc\"", "identity 200");
	th_raw_expect_field(&r[0], "Content-Length", num, "identity 200");
	expect_status_line(&r[1], "HTTP/1.1", 304, "its 304");
	th_raw_expect_field(&r[1], "ETag", "\"abc\"", "its 304");
	th_raw_expect_field(&r[1], "Content-Length", num, "its 304");
	th_raw_expect_field(&r[1], "Vary", NULL, "its 304"); /* nor its 200 (below min_nbytes) */
	th_raw_expect_field(&r[0], "Vary", NULL, "identity 200");
	th_raw_expect_field(&r[1], "Content-Encoding", NULL, "its 304");
	expect_status_line(&r[2], "HTTP/1.1", 200, "then a 200");
	th_raw_expect_field(&r[2], "ETag", "\"abc\"", "then a 200");
	th_raw_expect_idle(fd, FX_IDLE_MS, "after the three");
	close(fd);
	for (int i = 0; i < 3; i++)
		th_raw_response_free(&r[i]);
	th_stop(&s);
	mhdgz_free(gz);
}
END_TEST

/*
 * Preconditions evaluated by the queue call (MHDGZ_REQUEST_PRECONDITIONS):
 * the obvious application code makes its 200 response with its
 * validators and queues it with status 200; the handler answers a failed
 * precondition in its place. "/" is a text body the handler codes; "/coded"
 * one the application coded itself (Content-Encoding: gzip).
 */
#define PRE_LM "Sun, 06 Nov 1994 08:49:37 GMT"
static _Atomic unsigned int pre_status; /* outcome->status of the last queue */
static _Atomic uint64_t pre_coded;      /* its coded_nbytes */

static enum MHD_Result
pre_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	static uint8_t body[4096];
	struct mhdgz_request req = { .size = sizeof req,
				     .method = method,
				     .flags = MHDGZ_REQUEST_PRECONDITIONS };
	struct mhdgz_outcome o = { .size = sizeof o };
	bool coded = strcmp(url, "/coded") == 0;
	struct MHD_Response *r;
	enum MHD_Result ret;

	for (size_t i = 0; i < sizeof body; i++)
		body[i] = (uint8_t) "precondition "[i % 13];
	r = mhdgz_response_from_buffer(s->gz, sizeof body, body, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/plain");
	MHD_add_response_header(r, "ETag", coded ? "\"pc\"" : "\"pf\"");
	MHD_add_response_header(r, "Last-Modified", PRE_LM);
	if (coded)
		MHD_add_response_header(r, "Content-Encoding", "gzip");
	ret = mhdgz_queue_response_ex(s->gz, c, &req, MHD_HTTP_OK, r, &o);
	atomic_store(&pre_status, o.status);
	atomic_store(&pre_coded, o.coded_nbytes);
	MHD_destroy_response(r);
	return ret;
}

/* Send one request on fd, read its response, check its status and the
 * status the outcome reported. */
static void
pre_get(int fd, const char *path, const char *fields, int status, struct th_raw_response *r,
	const char *ctx)
{
	char req[512];
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n%s\r\n", path, fields);

	th_raw_send(fd, req, (size_t)n);
	read_resp(fd, false, r, ctx);
	expect_status_line(r, "HTTP/1.1", status, ctx);
	ck_assert_msg(atomic_load(&pre_status) == (unsigned int)status, "%s: outcome status %u",
		      ctx, atomic_load(&pre_status));
}

/* A failed If-Match or If-Unmodified-Since gets a 412 without content:
 * not the resource's body (coded or not), none of its representation
 * fields; the connection stays open and the next GET gets the gzip 200. */
START_TEST(test_preconditions_412)
{
	static const char *const failing[] = {
		AE_GZIP "If-Match: \"zzz\"\r\n",
		AE_GZIP "If-Match: W/\"pf\"\r\n", /* strong comparison */
		AE_GZIP "If-Unmodified-Since: Sat, 01 Jan 1994 00:00:00 GMT\r\n",
		AE_GZIP "If-Match: \"zzz\"\r\nIf-None-Match: \"pf\"\r\n", /* step 1 first */
	};
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = { 0 };
	struct th_raw_response r;
	int fd;

	th_start(&s, gz, 0, pre_route, NULL);
	fd = th_raw_connect(s.port);
	for (size_t i = 0; i < N_ELEMS(failing); i++) {
		pre_get(fd, i % 2 ? "/coded" : "/", failing[i], 412, &r, "412");
		th_raw_expect_field(&r, "Content-Length", "0", "412");
		ck_assert_uint_eq(r.len, r.head_len);
		th_raw_expect_field(&r, "Content-Encoding", NULL, "412");
		th_raw_expect_field(&r, "Content-Type", NULL, "412");
		th_raw_expect_field(&r, "ETag", NULL, "412");
		ck_assert_uint_eq(atomic_load(&pre_coded), 0);
		th_raw_response_free(&r);
	}
	/* If-Unmodified-Since is not evaluated under If-Match (step 2). */
	pre_get(fd, "/",
		AE_GZIP
		"If-Match: \"pf\"\r\nIf-Unmodified-Since: Sat, 01 Jan 1994 00:00:00 GMT\r\n",
		200, &r, "If-Match passes");
	th_raw_expect_field(&r, "Content-Encoding", "gzip", "If-Match passes");
	th_raw_response_free(&r);
	pre_get(fd, "/", AE_GZIP "If-Unmodified-Since: " PRE_LM "\r\n", 200, &r, "unmodified");
	th_raw_expect_field(&r, "Content-Encoding", "gzip", "unmodified");
	th_raw_response_free(&r);
	th_raw_expect_idle(fd, FX_IDLE_MS, "after the 412s");
	close(fd);
	th_stop(&s);
	mhdgz_free(gz);
}
END_TEST

/* A matching If-None-Match or an If-Modified-Since not before
 * Last-Modified gets the 304 of the 200 this client would get: its ETag
 * form, Vary and length, no content; If-Modified-Since only without
 * If-None-Match (RFC 9110 section 13.2.2). The 304 of a response the
 * application coded itself carries its ETag and length but no
 * Content-Encoding (section 15.4.5). */
START_TEST(test_preconditions_304)
{
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = { 0 };
	struct th_raw_response r, g;
	char num[32];
	size_t len;
	const char *v;
	int fd;

	th_start(&s, gz, 0, pre_route, NULL);
	fd = th_raw_connect(s.port);
	pre_get(fd, "/", AE_GZIP, 200, &g, "gzip 200");
	th_raw_expect_field(&g, "Content-Encoding", "gzip", "gzip 200");
	v = th_raw_header(&g, "Content-Length", &len);
	ck_assert_ptr_nonnull(v);
	snprintf(num, sizeof num, "%.*s", (int)len, v);
	pre_get(fd, "/", AE_GZIP "If-None-Match: W/\"pf\"\r\n", 304, &r, "INM");
	th_raw_expect_field(&r, "ETag", "W/\"pf\"", "INM");
	th_raw_expect_field(&r, "Vary", "Accept-Encoding", "INM");
	th_raw_expect_field(&r, "Content-Encoding", NULL, "INM");
	th_raw_expect_field(&r, "Content-Length", num, "INM");
	ck_assert_uint_eq(r.len, r.head_len);
	th_raw_response_free(&r);
	pre_get(fd, "/", "If-None-Match: \"pf\"\r\n", 304, &r, "identity INM");
	th_raw_expect_field(&r, "ETag", "\"pf\"", "identity INM");
	th_raw_expect_field(&r, "Content-Length", "4096", "identity INM");
	th_raw_response_free(&r);
	pre_get(fd, "/", AE_GZIP "If-Modified-Since: " PRE_LM "\r\n", 304, &r, "IMS");
	th_raw_expect_field(&r, "ETag", "W/\"pf\"", "IMS");
	th_raw_response_free(&r);
	pre_get(fd, "/", AE_GZIP "If-Modified-Since: Sunday, 06-Nov-94 08:49:37 GMT\r\n", 304, &r,
		"IMS RFC 850");
	th_raw_response_free(&r);
	pre_get(fd, "/", AE_GZIP "If-Modified-Since: Sat, 01 Jan 1994 00:00:00 GMT\r\n", 200, &r,
		"modified since");
	th_raw_expect_field(&r, "Content-Encoding", "gzip", "modified since");
	th_raw_response_free(&r);
	pre_get(fd, "/", AE_GZIP "If-None-Match: \"x\"\r\nIf-Modified-Since: " PRE_LM "\r\n", 200,
		&r, "INM over IMS");
	th_raw_response_free(&r);
	pre_get(fd, "/", AE_GZIP "If-Modified-Since: not a date\r\n", 200, &r, "not a date");
	th_raw_response_free(&r);
	pre_get(fd, "/coded", AE_GZIP "If-None-Match: \"pc\"\r\n", 304, &r, "app-coded");
	th_raw_expect_field(&r, "ETag", "\"pc\"", "app-coded");
	th_raw_expect_field(&r, "Content-Encoding", NULL, "app-coded");
	th_raw_expect_field(&r, "Content-Length", "4096", "app-coded");
	th_raw_response_free(&r);
	th_raw_response_free(&g);
	th_raw_expect_idle(fd, FX_IDLE_MS, "after the 304s");
	close(fd);
	th_stop(&s);
	mhdgz_free(gz);
}
END_TEST

/* ===================================================================== */
/*  Content-Digest recomputed (MHDGZ_F_CONTENT_DIGEST)                     */
/* ===================================================================== */

/* want = the RFC 9530 Content-Digest value of b: "sha-256=:base64:". */
static void
cd_value(const uint8_t *b, size_t len, char want[64])
{
	struct sha256_ctx ctx;
	uint8_t digest[SHA256_DIGEST_SIZE];

	sha256_init(&ctx);
	sha256_update(&ctx, len, b);
	sha256_digest(&ctx, sizeof digest, digest);
	memcpy(want, "sha-256=:", 9);
	base64_encode_raw(want + 9, sizeof digest, digest);
	memcpy(want + 9 + BASE64_ENCODE_RAW_LENGTH(SHA256_DIGEST_SIZE), ":", 2);
}

static enum MHD_Result
cd_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	const uint8_t *body = s->cls;
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)url;
	r = mhdgz_response_from_buffer(s->gz, FX_LEN, (void *)body, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/plain");
	MHD_add_response_header(r, "ETag", "\"cd\""); /* strong: the memo knows its length */
	MHD_add_response_header(r, "Content-Digest", "sha-256=:AAAA:");
	MHD_add_response_header(r, "Repr-Digest", "sha-256=:BBBB:");
	ret = mhdgz_queue_response_ex(s->gz, c, TU_REQ(method), MHD_HTTP_OK, r, NULL);
	MHD_destroy_response(r);
	return ret;
}

/* With the flag, the gzip response carries one Content-Digest, the SHA-256
 * of exactly the gzip bytes on the wire (RFC 9530: "sha-256=:base64:"),
 * and no Repr-Digest of the identity; the identity response pipelined
 * after it keeps the application's fields. */
START_TEST(test_content_digest_recomputed)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n"
				  "GET / HTTP/1.1\r\nHost: t\r\n\r\n"
				  "HEAD / HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n";
	uint8_t *body = tu_payload(FX_LEN, TU_TEXT, 91);
	struct mhdgz_options o = th_opts();
	struct mhdgz *gz;
	struct th_server s = { 0 };
	struct th_raw_response r[3];
	char want[64], num[32];
	int fd;

	o.flags |= MHDGZ_F_CONTENT_DIGEST;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	th_start(&s, gz, 0, cd_route, body);
	fd = th_raw_connect(s.port);
	th_raw_send(fd, req, strlen(req));
	read_resp(fd, false, &r[0], "gzip");
	read_resp(fd, false, &r[1], "identity");
	/* A HEAD whose gzip length a fresh response's strong ETag tells: the
	 * same Content-Digest as the GET (the body is compressed to give it). */
	read_resp(fd, true, &r[2], "HEAD");
	th_raw_expect_field(&r[0], "Content-Encoding", "gzip", "gzip");
	expect_body(&r[0], true, body, FX_LEN, "gzip");
	cd_value(r[0].bytes + r[0].body_off, r[0].len - r[0].body_off, want);
	th_raw_expect_field(&r[0], "Content-Digest", want, "gzip");
	th_raw_expect_field(&r[2], "Content-Digest", want, "HEAD");
	th_raw_expect_field(&r[2], "Content-Length",
			    u64s(num, sizeof num, r[0].len - r[0].body_off), "HEAD");
	th_raw_expect_field(&r[0], "Repr-Digest", NULL, "gzip");
	th_raw_expect_field(&r[1], "Content-Encoding", NULL, "identity");
	th_raw_expect_field(&r[1], "Content-Digest", "sha-256=:AAAA:", "identity");
	th_raw_expect_field(&r[1], "Repr-Digest", "sha-256=:BBBB:", "identity");
	th_raw_expect_idle(fd, FX_IDLE_MS, "after both");
	close(fd);
	th_raw_response_free(&r[0]);
	th_raw_response_free(&r[1]);
	th_raw_response_free(&r[2]);
	th_stop(&s);
	mhdgz_free(gz);
	free(body);
}
END_TEST

/* A gzip stream of a response with a Content-Digest (an unknown-size
 * reader with it as a trailer, or a known-size reader with it as a header
 * field): with the flag, the stream announces "Trailer: Content-Digest" and
 * ends with a Content-Digest trailer, the SHA-256 of exactly the gzip
 * bytes of its chunks; the identity stream pipelined after it keeps the
 * application's field where it put it. _i: 0 trailer, 1 header, 2 header
 * with length hiding (the digest covers the padded gzip header too). */
struct cds {
	struct th_src src;
	bool header; /* the digest as a header field, else as a trailer */
};

static enum MHD_Result
cds_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct cds *x = s->cls;
	bool header = x->header;
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)url;
	r = mhdgz_response_from_callback(s->gz, header ? x->src.len : MHD_SIZE_UNKNOWN, 4096,
					 th_src_read, &x->src, NULL);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/plain");
	if (header)
		MHD_add_response_header(r, "Content-Digest", dt_digest);
	else
		MHD_add_response_footer(r, "Content-Digest", dt_digest);
	ret = mhdgz_queue_response_ex(s->gz, c, TU_REQ(method), MHD_HTTP_OK, r, NULL);
	MHD_destroy_response(r);
	return ret;
}

START_TEST(test_content_digest_stream)
{
	bool header = _i >= 1, padded = _i == 2;
	static const char req[] = "GET / HTTP/1.1\r\nHost: t\r\n" AE_GZIP "\r\n"
				  "GET / HTTP/1.1\r\nHost: t\r\n\r\n";
	uint8_t *body = tu_payload(FX_LEN, TU_TEXT, 93);
	struct cds x = { .src = { .data = body, .len = FX_LEN, .chunk = 1000 }, .header = header };
	struct mhdgz_options o = th_opts();
	struct mhdgz *gz;
	struct th_server s = { 0 };
	struct th_raw_response r[2];
	uint8_t *gzbytes = NULL;
	size_t gzlen = 0, nchunks = 0;
	bool empty_early = false;
	char want[64], line[96];
	const char *ctx = padded   ? "header digest, length hiding"
			  : header ? "header digest"
				   : "trailer digest";
	int fd;

	o.flags |= MHDGZ_F_CONTENT_DIGEST | (padded ? MHDGZ_F_LENGTH_HIDING : 0);
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	th_start(&s, gz, 0, cds_route, &x);
	fd = th_raw_connect(s.port);
	th_raw_send(fd, req, strlen(req));
	read_resp(fd, false, &r[0], ctx);
	read_resp(fd, false, &r[1], ctx);
	th_raw_expect_idle(fd, FX_IDLE_MS, ctx);
	close(fd);
	/* The gzip stream: chunked, the trailer announced and sent. */
	ck_assert(r[0].chunked);
	th_raw_expect_field(&r[0], "Content-Encoding", "gzip", ctx);
	th_raw_expect_field(&r[0], "Trailer", "Content-Digest", ctx);
	th_raw_expect_field(&r[0], "Content-Digest", NULL, ctx);
	if (!padded) /* the strict member check wants FLG 0 */
		expect_body(&r[0], true, body, FX_LEN, ctx);
	ck_assert_int_eq(th_dechunk(r[0].bytes + r[0].body_off, r[0].len - r[0].body_off, &gzbytes,
				    &gzlen, &nchunks, &empty_early),
			 0);
	if (padded) {
		uint8_t *dec = NULL;
		size_t dec_len = 0;

		ck_assert_int_eq(tu_gunzip(gzbytes, gzlen, &dec, &dec_len), 0);
		ck_assert_msg(dec_len == FX_LEN && memcmp(dec, body, FX_LEN) == 0,
			      "%s: the padded stream decodes to other bytes", ctx);
		free(dec);
	}
	/* Padded: FLG.FCOMMENT set in the header the digest covers. */
	ck_assert_msg(gzlen > 10 && ((gzbytes[3] & 0x10) != 0) == padded, "%s: FLG 0x%02x", ctx,
		      gzlen > 3 ? gzbytes[3] : 0);
	cd_value(gzbytes, gzlen, want);
	snprintf(line, sizeof line, "\r\n0\r\nContent-Digest: %s\r\n\r\n", want);
	ck_assert_msg(r[0].len >= strlen(line) &&
			      memcmp(r[0].bytes + r[0].len - strlen(line), line, strlen(line)) == 0,
		      "%s: the stream does not end with the trailer '%s'", ctx, want);
	ck_assert_msg(!dt_has((const char *)r[0].bytes, r[0].len, dt_digest),
		      "%s: the identity digest reached the gzip stream", ctx);
	/* The identity response: the application's field where it was. */
	th_raw_expect_field(&r[1], "Content-Encoding", NULL, ctx);
	th_raw_expect_field(&r[1], "Trailer", NULL, ctx);
	expect_body(&r[1], false, body, FX_LEN, ctx);
	if (header)
		th_raw_expect_field(&r[1], "Content-Digest", dt_digest, ctx);
	else
		ck_assert_msg(dt_has((const char *)r[1].bytes, r[1].len, dt_digest),
			      "%s: the identity stream lost its trailer", ctx);
	th_stop(&s);
	ck_assert_uint_eq(th_stats(gz).digests_dropped, 1);
	ck_assert_uint_eq(th_stats(gz).failures, 0);
	th_raw_response_free(&r[0]);
	th_raw_response_free(&r[1]);
	mhdgz_free(gz);
	free(gzbytes);
	free(body);
}
END_TEST

Suite *
fidelity_suite(void)
{
	const struct ck_case cases[] = {
		{ "fidelity",
		  CK_CASE_TIMEOUT,
		  { { test_head_every_kind, 0, (int)N_ELEMS(head_cases) },
		    { test_head_304_unknown_size, 0, 4 },
		    { test_no_content_statuses, 0, FX_NKINDS * 2 * NB_NVARIANTS },
		    { test_304_length_of_gzip_200, 0, 0 },
		    { test_206_vary, 0, (int)N_ELEMS(range_cases) },
		    { test_response_options, 0, (int)N_ELEMS(opt_cases) },
		    { test_unknown_size_from_fields, 0, (int)N_ELEMS(unk_cases) },
		    { test_dups_cloexec, 0, 0 },
		    { test_small_file_identity_current, 0, 0 },
		    { test_304_of_identity_200, 0, 0 },
		    { test_preconditions_412, 0, 0 },
		    { test_preconditions_304, 0, 0 } } },
		{ "integrity",
		  CK_CASE_TIMEOUT,
		  { { test_digests, 0, (int)N_ELEMS(digest_kinds) },
		    { test_digest_trailer, 0, 2 },
		    { test_content_digest_recomputed, 0, 0 },
		    { test_content_digest_stream, 0, 3 } } }
	};

	return ck_suite("fidelity", cases, N_ELEMS(cases));
}
