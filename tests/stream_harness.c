/* stream_harness.c: fixtures and checks shared by the streaming suites (check_hnd_stream_*.c). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "stream_harness.h"
#include "info.h"
#include "testutil.h"

/* ===================================================================== */
/*                               One test                                */
/* ===================================================================== */

void
st_begin(struct st_test *t, struct mhdgz *gz, uint8_t *data, size_t len, th_route_fn route,
	 void *cls)
{
	memset(t, 0, sizeof *t);
	t->gz = gz;
	t->data = data;
	t->len = len;
	th_start(&t->s, gz, 0, route, cls);
	th_reply_init(&t->r);
}

void
st_get(struct st_test *t, unsigned int flags)
{
	th_fetch(NULL, t->s.port, "/", flags, &t->r);
}

void
st_end(struct st_test *t)
{
	th_stop(&t->s);
	th_reply_free(&t->r);
	mhdgz_free(t->gz);
	free(t->data);
	memset(t, 0, sizeof *t);
}

struct mhdgz *
st_gz_from(const struct mhdgz_options *o)
{
	struct mhdgz *gz = NULL;
	int rc = mhdgz_new(o, &gz);

	ck_assert_msg(rc == 0, "mhdgz_new(%s, level %d, flags %#x): %s",
		      tu_backend_name(o->gzip.backend), o->gzip.level, o->flags,
		      mhdgz_strerror(rc));
	return gz;
}

struct mhdgz *
st_gz_new(enum mhdgz_backend be, int level, unsigned int flags)
{
	struct mhdgz_options o = th_opts();

	o.gzip.backend = be;
	o.gzip.level = level;
	o.flags = flags;
	return st_gz_from(&o);
}

/* ===================================================================== */
/*                              Body fixture                             */
/* ===================================================================== */

enum MHD_Result
body_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct bfix *f = s->cls;
	struct MHD_Response *r = NULL;
	enum MHD_Result ret;
	size_t i;

	(void)url;
	(void)method;
	if (f->kind == BF_CALLBACK) {
		r = mhdgz_response_from_callback(s->gz, f->size, f->block_size,
						 f->reader ? f->reader : th_src_read, &f->src,
						 th_src_free);
	} else {
		int fd = dup(f->fd);

		if (fd >= 0)
			r = f->kind == BF_FD ? mhdgz_response_from_fd(s->gz, (size_t)f->size, fd)
					     : mhdgz_response_from_fd_at_offset64(s->gz, f->size,
										  fd, f->offset);
	}
	if (!r) {
		atomic_fetch_add(&f->create_failures, 1);
		return MHD_NO;
	}
	atomic_fetch_add(&f->responses, 1);
	for (i = 0; f->hdr[i]; i += 2)
		ck_assert(MHD_add_response_header(r, f->hdr[i], f->hdr[i + 1]) == MHD_YES);
	if (f->footer_name)
		ck_assert(MHD_add_response_footer(r, f->footer_name, f->footer_value) == MHD_YES);
	ret = mhdgz_queue_response(s->gz, c, f->status ? f->status : MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static void
bfix_reset(struct bfix *f, enum bf_kind kind, uint64_t size, const char *ctype)
{
	memset(f, 0, sizeof *f);
	f->kind = kind;
	f->size = size;
	f->fd = -1;
	if (ctype) {
		f->hdr[0] = MHD_HTTP_HEADER_CONTENT_TYPE;
		f->hdr[1] = ctype;
	}
}

void
bfix_callback(struct bfix *f, const uint8_t *data, uint64_t len, bool known, size_t chunk,
	      size_t block_size, const char *ctype)
{
	bfix_reset(f, BF_CALLBACK, known ? len : MHD_SIZE_UNKNOWN, ctype);
	f->src.data = data;
	f->src.len = len;
	f->src.chunk = chunk;
	f->block_size = block_size;
}

void
bfix_file(struct bfix *f, int fd, uint64_t size, uint64_t offset, const char *ctype)
{
	bfix_reset(f, offset ? BF_FD_OFFSET : BF_FD, size, ctype);
	f->fd = fd;
	f->offset = offset;
}

void
bfix_header(struct bfix *f, const char *name, const char *value)
{
	size_t i = 0;

	while (f->hdr[i])
		i += 2;
	ck_assert(i + 2 < N_ELEMS(f->hdr));
	f->hdr[i] = name;
	f->hdr[i + 1] = value;
	f->hdr[i + 2] = NULL;
}

static bool
frees_reach(void *cls)
{
	struct bfix *f = cls;

	return atomic_load(&f->src.frees) >= atomic_load(&f->responses);
}

/* ===================================================================== */
/*                              Live fixture                             */
/* ===================================================================== */

void
lfix_init(struct lfix *f, const uint8_t *data, size_t data_len, uint64_t len, bool known,
	  size_t chunk, const char *ctype)
{
	memset(f, 0, sizeof *f);
	f->data = data;
	f->data_len = data_len;
	f->len = len;
	f->known = known;
	f->block_size = chunk;
	f->chunk = chunk;
	f->ctype = ctype;
	f->err_at = UINT64_MAX;
}

/* Copy n bytes of the cyclic body from pos. */
static void
live_fill(const struct lfix *f, uint64_t pos, char *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		size_t off = (size_t)((pos + done) % f->data_len), k = f->data_len - off;

		if (k > n - done)
			k = n - done;
		memcpy(buf + done, f->data + off, k);
		done += k;
	}
}

/* At a stop: true while the reader must still return 0. */
static bool
live_stopped(struct rstate *rs, uint64_t pos)
{
	struct lfix *f = rs->f;

	if (!f->stop_every || (pos == 0 && !f->stop_at_start) || pos % f->stop_every != 0)
		return false;
	if (rs->stop_pos != pos) {
		rs->stop_pos = pos;
		rs->zeros = f->stop_zeros;
		rs->stop_t0 = th_now_ms();
	}
	if (rs->zeros == 0 && !(f->stop_ms && th_now_ms() - rs->stop_t0 < f->stop_ms))
		return false;
	if (rs->zeros > 0)
		rs->zeros--;
	return true;
}

ssize_t
live_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct rstate *rs = cls;
	struct lfix *f = rs->f;
	size_t n;

	atomic_fetch_add(&f->calls, 1);
	if (atomic_load(&rs->freed))
		atomic_fetch_add(&f->after_free, 1);
	if (pos != rs->next_pos)
		atomic_fetch_add(&f->bad_pos, 1);
	if (pos >= f->len)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (pos >= f->err_at)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (live_stopped(rs, pos)) {
		atomic_fetch_add(&f->zero_calls, 1);
		return 0;
	}
	n = f->chunk < max ? f->chunk : max;
	if (n > f->len - pos)
		n = (size_t)(f->len - pos);
	/* Do not run past the next stop or the error position. */
	if (f->stop_every && n > f->stop_every - pos % f->stop_every)
		n = (size_t)(f->stop_every - pos % f->stop_every);
	if (f->err_at != UINT64_MAX && n > f->err_at - pos)
		n = (size_t)(f->err_at - pos);
	live_fill(f, pos, buf, n);
	rs->next_pos = pos + n;
	atomic_fetch_add(&f->data_calls, 1);
	return (ssize_t)n;
}

void
live_free(void *cls)
{
	struct rstate *rs = cls;

	atomic_store(&rs->freed, true);
	atomic_fetch_add(&rs->f->frees, 1);
}

struct MHD_Response *
lfix_response(struct th_server *s, struct lfix *f, unsigned int k)
{
	ck_assert(k < MAX_RESP);
	f->rs[k].f = f;
	f->rs[k].stop_pos = UINT64_MAX; /* no stop begun */
	return mhdgz_response_from_callback(s->gz, f->known ? f->len : MHD_SIZE_UNKNOWN,
					    f->block_size, live_read, &f->rs[k], live_free);
}

enum MHD_Result
live_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct lfix *f = s->cls;
	unsigned int k = atomic_fetch_add(&f->nresp, 1);
	struct MHD_Response *r = NULL;
	enum MHD_Result ret;

	(void)url;
	if (k < MAX_RESP)
		r = lfix_response(s, f, k);
	if (!r) {
		atomic_fetch_add(&f->create_failures, 1);
		return MHD_NO;
	}
	if (f->ctype)
		ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, f->ctype) ==
			  MHD_YES);
	if (f->etag)
		ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, f->etag) == MHD_YES);
	ret = mhdgz_queue_response_ex(s->gz, c, TU_REQ(method), MHD_HTTP_OK, r, NULL);
	MHD_destroy_response(r);
	return ret;
}

bool
all_freed(void *cls)
{
	struct lfix *f = cls;

	return atomic_load(&f->frees) >= atomic_load(&f->nresp);
}

/* ===================================================================== */
/*                               Checks                                  */
/* ===================================================================== */

void
expect_same_bytes(const uint8_t *got, size_t got_len, const uint8_t *want, size_t want_len,
		  const char *what)
{
	size_t i, n = got_len < want_len ? got_len : want_len;

	for (i = 0; i < n; i++)
		if (got[i] != want[i])
			break;
	ck_assert_msg(i == n && got_len == want_len,
		      "%s: %zu bytes, want %zu; first difference at byte %zu", what, got_len,
		      want_len, i);
}

/* v is the only value of its field and equals want (case-insensitive when
 * nocase): one check for the header fields the streaming tests pin. */
static void
expect_one(const struct th_reply *r, const char *name, const char *want, bool nocase)
{
	unsigned int n = 0;
	const char *v = th_header(r, name, &n);

	if (!want) {
		ck_assert_msg(v == NULL, "unexpected %s: %s", name, v);
		return;
	}
	ck_assert_msg(v && n == 1 && (nocase ? strcasecmp(v, want) : strcmp(v, want)) == 0,
		      "%s: %s (x%u), want %s", name, v ? v : "(none)", n, want);
}

/* Vary: one field listing Accept-Encoding (listed), or none naming it. */
static void
expect_vary_ae(const struct th_reply *r, bool listed)
{
	unsigned int n = 0;
	const char *v = th_header(r, "Vary", &n);

	if (listed)
		ck_assert_msg(v && n == 1 && th_has_token(v, "Accept-Encoding"), "Vary: %s (x%u)",
			      v ? v : "(none)", n);
	else
		ck_assert_msg(v == NULL || !th_has_token(v, "Accept-Encoding"), "Vary: %s", v);
}

void
expect_gzip(const struct th_reply *r, const uint8_t *want, size_t want_len, const char *etag_want)
{
	uint8_t *dec = NULL;
	size_t dec_len = 0;

	ck_assert_msg(r->rc == CURLE_OK, "gzip transfer failed: %s", curl_easy_strerror(r->rc));
	ck_assert_int_eq(r->status, 200);
	ck_assert(!r->hdr_overflow);
	expect_one(r, "Content-Encoding", "gzip", true);
	expect_one(r, "Transfer-Encoding", "chunked", true);
	expect_one(r, "Content-Length", NULL, false);
	expect_vary_ae(r, true);
	ck_assert_msg(th_header(r, "Accept-Ranges", NULL) == NULL, "Accept-Ranges on gzip");
	expect_one(r, "ETag", etag_want, false);
	ck_assert_msg(tu_gunzip(r->body, r->body_len, &dec, &dec_len) == 0,
		      "%zu gzip bytes do not form one complete gzip member", r->body_len);
	expect_same_bytes(dec, dec_len, want, want_len, "decoded gzip body");
	ck_assert_msg(tu_check_member(r->body, r->body_len, want, want_len) == 0,
		      "gzip header/trailer (RFC 1952) wrong");
	free(dec);
}

void
expect_identity(const struct th_reply *r, const uint8_t *want, size_t want_len, bool known,
		bool vary, const char *ce_want)
{
	const char *v;
	char num[32];

	ck_assert_msg(r->rc == CURLE_OK, "identity transfer failed: %s", curl_easy_strerror(r->rc));
	ck_assert_int_eq(r->status, 200);
	v = th_header(r, "Content-Encoding", NULL);
	if (ce_want)
		ck_assert_msg(v && strcmp(v, ce_want) == 0, "Content-Encoding %s, want %s",
			      v ? v : "(none)", ce_want);
	else
		ck_assert_msg(v == NULL, "identity response has Content-Encoding: %s", v);
	if (known) {
		snprintf(num, sizeof num, "%zu", want_len);
		expect_one(r, "Content-Length", num, false);
	} else {
		ck_assert_msg(th_header(r, "Content-Length", NULL) == NULL,
			      "Content-Length %s for an unknown size",
			      th_header(r, "Content-Length", NULL));
		v = th_header(r, "Transfer-Encoding", NULL);
		ck_assert_msg(v && strcasecmp(v, "chunked") == 0, "Transfer-Encoding %s",
			      v ? v : "(none)");
	}
	expect_vary_ae(r, vary);
	expect_same_bytes(r->body, r->body_len, want, want_len, "identity body");
}

void
expect_gzip_body(const struct th_reply *r, const uint8_t *want, size_t want_len)
{
	uint8_t *dec = NULL;
	size_t dec_len = 0;
	const char *ce = th_header(r, "Content-Encoding", NULL);

	ck_assert_msg(r->rc == CURLE_OK, "gzip transfer failed: %s", curl_easy_strerror(r->rc));
	ck_assert_int_eq(r->status, 200);
	ck_assert_msg(ce && strcasecmp(ce, "gzip") == 0, "Content-Encoding: %s",
		      ce ? ce : "(none)");
	ck_assert_msg(tu_gunzip(r->body, r->body_len, &dec, &dec_len) == 0,
		      "%zu bytes are not one complete gzip member", r->body_len);
	expect_same_bytes(dec, dec_len, want, want_len, "decoded gzip body");
	free(dec);
}

void
expect_dechunked(struct th_reply *r)
{
	uint8_t *data = NULL;
	size_t len = 0, nchunks = 0;
	bool early = false;

	ck_assert_msg(r->rc == CURLE_OK, "%s", curl_easy_strerror(r->rc));
	ck_assert_msg(th_dechunk(r->body, r->body_len, &data, &len, &nchunks, &early) == 0,
		      "raw chunked body malformed (empty chunk before the end: %d)", early);
	ck_assert(!early);
	free(r->body);
	r->body = data;
	r->body_len = r->body_cap = len;
}

void
expect_released(struct th_server *s, struct bfix *f)
{
	ck_assert_msg(th_wait(frees_reach, f, RELEASE_WAIT_MS),
		      "free callback ran %u times for %u responses", atomic_load(&f->src.frees),
		      atomic_load(&f->responses));
	ck_assert_msg(th_wait((bool (*)(void *))th_pool_all_back, s->gz, RELEASE_WAIT_MS),
		      "compressor pool: compressors still out after the responses ended");
	ck_assert_uint_eq(atomic_load(&f->create_failures), 0);
}

void
expect_all_released(struct th_server *s, struct lfix *f)
{
	ck_assert_msg(th_wait(all_freed, f, RELEASE_WAIT_MS),
		      "free callback ran %u times for %u responses", atomic_load(&f->frees),
		      atomic_load(&f->nresp));
	ck_assert_msg(th_wait(th_pool_back_pred, s->gz, RELEASE_WAIT_MS),
		      "compressor pool: a compressor was not returned");
	ck_assert_uint_eq(atomic_load(&f->after_free), 0);
	ck_assert_uint_eq(atomic_load(&f->create_failures), 0);
}

void
expect_freed_once(struct lfix *f)
{
	unsigned int i, n = atomic_load(&f->nresp);

	ck_assert_uint_eq(atomic_load(&f->frees), n);
	for (i = 0; i < n; i++)
		ck_assert(atomic_load(&f->rs[i].freed));
}
