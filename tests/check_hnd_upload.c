/* check_hnd_upload.c: request bodies coded gzip (mhdgz_upload_*) end to end: libcurl uploads to a real daemon, statuses, exact counters, a bomb in bounded memory. */
#define _GNU_SOURCE
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include "hnd_upload.h"
#include "check_suites.h"
#include "harness.h"
#include "testutil.h"

/* The JSON body of the uploads, bytes (uncompressed). */
#define UP_BODY_LEN ((size_t)100000)
/* The status the data callback refuses with in the "application" rows. */
#define UP_APP_STATUS 422u

/* A server whose access handler reads every POST body through
 * mhdgz_upload_* and answers "DECODED-LENGTH CRC-32\n" (as gzserve's
 * /echo does), or the refusal. */
struct up_srv {
	struct MHD_Daemon *d;
	uint16_t port;
	struct mhdgz *gz;
	struct mhdgz_upload_options opts;
	bool early;               /* queue a refusal known from the header fields at once */
	uint64_t app_refuse;      /* > 0: the data callback refuses once this many bytes are in */
	_Atomic size_t max_piece; /* largest piece the data callback got */
	/* Body bytes the access handler was given after the piece refused,
	 * and how many of them mhdgz_upload_feed consumed. */
	_Atomic uint64_t after_given, after_consumed;
	pthread_mutex_t lock;
	struct mhdgz_upload_info last; /* of the last request completed */
	unsigned int completed;
};

struct up_req {
	struct up_srv *s;
	struct mhdgz_upload *up;
	uint64_t len;
	uLong crc;
	bool refused; /* a piece before this one was refused */
};

static unsigned int
on_data(void *cls, const void *data, size_t n)
{
	struct up_req *q = cls;
	size_t m = atomic_load(&q->s->max_piece);

	while (n > m && !atomic_compare_exchange_weak(&q->s->max_piece, &m, n))
		;
	q->len += n;
	q->crc = crc32(q->crc, data, (uInt)n);
	if (q->s->app_refuse && q->len >= q->s->app_refuse)
		return UP_APP_STATUS;
	return 0;
}

/* The refusal of an upload, queued as mhdgz.h's request-body pattern
 * shows: mhdgz_upload_refusal_response() for its status. */
static enum MHD_Result
queue_refusal(struct MHD_Connection *c, const struct mhdgz_upload *up)
{
	struct mhdgz_upload_info info = { .size = sizeof info };
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (mhdgz_upload_get_info(up, &info) != 0 || !info.status)
		return MHD_NO;
	r = mhdgz_upload_refusal_response(info.status);
	if (!r)
		return MHD_NO;
	ret = MHD_queue_response(c, info.status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
up_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
	  const char *version, const char *data, size_t *size, void **req_cls)
{
	struct up_srv *s = cls;
	struct up_req *q = *req_cls;
	struct MHD_Response *r;
	enum MHD_Result ret;
	char text[64];
	int n;

	(void)url;
	(void)method;
	(void)version;
	if (!q) {
		struct mhdgz_upload_info info = { .size = sizeof info };

		q = calloc(1, sizeof *q);
		if (!q)
			return MHD_NO;
		q->s = s;
		q->crc = crc32(0, NULL, 0);
		*req_cls = q;
		if (mhdgz_upload_new(s->gz, c, s->opts.size ? &s->opts : NULL, on_data, q,
				     &q->up) != 0)
			return MHD_NO;
		/* (no ck_assert here: this is the daemon's thread) */
		if (mhdgz_upload_get_info(q->up, &info) != 0)
			return MHD_NO;
		if (s->early && info.status)
			return queue_refusal(c, q->up);
		return MHD_YES;
	}
	if (*size) {
		size_t given = *size;
		bool refused = q->refused;

		q->refused = mhdgz_upload_feed(q->up, data, size) != 0;
		if (refused) {
			atomic_fetch_add(&s->after_given, given);
			atomic_fetch_add(&s->after_consumed, given - *size);
		}
		/* Past the discard bound nothing is consumed: close. */
		return *size ? MHD_NO : MHD_YES;
	}
	if (mhdgz_upload_finish(q->up) != 0)
		return queue_refusal(c, q->up);
	n = snprintf(text, sizeof text, "%llu %08lx\n", (unsigned long long)q->len,
		     (unsigned long)q->crc);
	r = MHD_create_response_from_buffer((size_t)n, text, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static void
up_done(void *cls, struct MHD_Connection *c, void **req_cls, enum MHD_RequestTerminationCode toe)
{
	struct up_srv *s = cls;
	struct up_req *q = *req_cls;

	(void)c;
	(void)toe;
	if (!q)
		return;
	pthread_mutex_lock(&s->lock);
	s->last.size = sizeof s->last;
	if (q->up)
		mhdgz_upload_get_info(q->up, &s->last);
	s->completed++;
	pthread_mutex_unlock(&s->lock);
	mhdgz_upload_free(q->up);
	free(q);
	*req_cls = NULL;
}

static void
up_start(struct up_srv *s)
{
	struct th_daemon_opts o = { .mhd_flags = MHD_USE_AUTO };

	s->gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	pthread_mutex_init(&s->lock, NULL);
	s->d = th_daemon_start(&o, up_access, s, up_done, s, &s->port);
}

static void
up_stop(struct up_srv *s)
{
	MHD_stop_daemon(s->d);
	mhdgz_free(s->gz);
	pthread_mutex_destroy(&s->lock);
}

static bool
completed_pred(void *cls)
{
	struct up_srv *s = cls;
	bool done;

	pthread_mutex_lock(&s->lock);
	done = s->completed > 0;
	pthread_mutex_unlock(&s->lock);
	return done;
}

/* The info of the request completed last (waits for its completion). */
static struct mhdgz_upload_info
last_info(struct up_srv *s)
{
	struct mhdgz_upload_info info;

	ck_assert_msg(th_wait(completed_pred, s, 10000), "the request did not complete");
	pthread_mutex_lock(&s->lock);
	info = s->last;
	s->completed = 0;
	pthread_mutex_unlock(&s->lock);
	return info;
}

/* POST body[0..len) to /echo with the header lines hdrs (NULL-terminated). */
static void
post(CURL *h, struct up_srv *s, const void *body, size_t len, const char *const *hdrs,
     struct th_reply *r)
{
	r->upload = body;
	r->upload_len = len;
	ck_assert_msg(th_fetch_ex(h, s->port, "/echo", TH_POST, hdrs, r) == CURLE_OK, "POST: %s",
		      curl_easy_strerror(r->rc));
}

/* The answer of an accepted body. */
static void
expect_echo(const struct th_reply *r, const uint8_t *want, size_t len)
{
	char text[64];

	snprintf(text, sizeof text, "%llu %08lx\n", (unsigned long long)len,
		 (unsigned long)crc32(crc32(0, NULL, 0), want, (uInt)len));
	ck_assert_int_eq(r->status, 200);
	ck_assert_uint_eq(r->body_len, strlen(text));
	ck_assert_mem_eq(r->body, text, strlen(text));
}

/* The refusal response: status, exact body, type, Accept-Encoding on 415. */
static void
expect_refusal(const struct th_reply *r, unsigned int status)
{
	char text[96];

	snprintf(text, sizeof text, "%u %s\n", status, MHD_get_reason_phrase_for(status));
	ck_assert_int_eq(r->status, (long)status);
	ck_assert_uint_eq(r->body_len, strlen(text));
	ck_assert_mem_eq(r->body, text, strlen(text));
	ck_assert_str_eq(th_header(r, "Content-Type", NULL), "text/plain; charset=utf-8");
	if (status == 415) {
		ck_assert_int_eq(th_hdr_count(r, "Accept-Encoding"), 1);
		ck_assert_str_eq(th_header(r, "Accept-Encoding", NULL), "gzip");
	} else {
		ck_assert_int_eq(th_hdr_count(r, "Accept-Encoding"), 0);
	}
}

/* What a row sends. */
enum up_body {
	B_IDENT,     /* the JSON as it is */
	B_GZ1,       /* one gzip member of it */
	B_GZ2,       /* two members: the JSON, then a text */
	B_EMPTY,     /* no bytes */
	B_TRUNC,     /* one member without its last 4 bytes (half the trailer) */
	B_TRUNC_MID, /* one member cut in the middle of its data */
	B_BADCRC,    /* one member, a CRC-32 byte flipped */
	B_GARBAGE,   /* one member, then bytes that are not a member */
	B_MEMBERS17, /* seventeen members of a small text */
};

struct up_row {
	const char *name;
	const char *ce; /* the Content-Encoding line, or NULL */
	enum up_body body;
	unsigned int status;
	enum mhdgz_upload_refusal refusal;
	const char *coding; /* info.coding */
	unsigned int flags; /* UP_* */
};

#define UP_CHUNKED 0x1u   /* sent with Transfer-Encoding: chunked */
#define UP_EARLY 0x2u     /* the server queues header-known refusals at once */
#define UP_SMALL_MAX 0x4u /* max_decoded_nbytes 1000 */
#define UP_APP 0x8u       /* the data callback refuses after 50000 bytes */

static const struct up_row up_rows[] = {
	{ "identity, no field", NULL, B_IDENT, 200, MHDGZ_UPLOAD_OK, "identity", 0 },
	{ "identity named", "identity", B_IDENT, 200, MHDGZ_UPLOAD_OK, "identity", 0 },
	{ "identity chunked", NULL, B_IDENT, 200, MHDGZ_UPLOAD_OK, "identity", UP_CHUNKED },
	{ "gzip", "gzip", B_GZ1, 200, MHDGZ_UPLOAD_OK, "gzip", 0 },
	{ "gzip chunked", "gzip", B_GZ1, 200, MHDGZ_UPLOAD_OK, "gzip", UP_CHUNKED },
	{ "x-gzip", "x-gzip", B_GZ1, 200, MHDGZ_UPLOAD_OK, "gzip", 0 },
	{ "GZip, case", "GZip", B_GZ1, 200, MHDGZ_UPLOAD_OK, "gzip", 0 },
	{ "identity, gzip", "identity , gzip,", B_GZ1, 200, MHDGZ_UPLOAD_OK, "gzip", 0 },
	{ "two members", "gzip", B_GZ2, 200, MHDGZ_UPLOAD_OK, "gzip", 0 },
	{ "empty gzip", "gzip", B_EMPTY, 200, MHDGZ_UPLOAD_OK, "gzip", 0 },
	{ "br", "br", B_IDENT, 415, MHDGZ_UPLOAD_CODING, NULL, 0 },
	{ "br, early", "br", B_IDENT, 415, MHDGZ_UPLOAD_CODING, NULL, UP_EARLY },
	{ "gzip twice", "gzip, gzip", B_GZ1, 415, MHDGZ_UPLOAD_CODING, NULL, 0 },
	{ "deflate", "deflate", B_GZ1, 415, MHDGZ_UPLOAD_CODING, NULL, 0 },
	{ "gzip, br", "gzip, br", B_GZ1, 415, MHDGZ_UPLOAD_CODING, NULL, 0 },
	{ "truncated trailer", "gzip", B_TRUNC, 400, MHDGZ_UPLOAD_TRUNCATED, "gzip", 0 },
	{ "truncated data", "gzip", B_TRUNC_MID, 400, MHDGZ_UPLOAD_TRUNCATED, "gzip", 0 },
	{ "bad CRC-32", "gzip", B_BADCRC, 400, MHDGZ_UPLOAD_MALFORMED, "gzip", 0 },
	{ "trailing garbage", "gzip", B_GARBAGE, 400, MHDGZ_UPLOAD_MALFORMED, "gzip", 0 },
	{ "not gzip", "gzip", B_IDENT, 400, MHDGZ_UPLOAD_MALFORMED, "gzip", 0 },
	{ "17 members", "gzip", B_MEMBERS17, 413, MHDGZ_UPLOAD_MEMBERS, "gzip", 0 },
	{ "identity over max", NULL, B_IDENT, 413, MHDGZ_UPLOAD_TOO_LARGE, "identity",
	  UP_SMALL_MAX },
	{ "identity over max, early", NULL, B_IDENT, 413, MHDGZ_UPLOAD_TOO_LARGE, "identity",
	  UP_SMALL_MAX | UP_EARLY },
	{ "gzip over max", "gzip", B_GZ1, 413, MHDGZ_UPLOAD_TOO_LARGE, "gzip", UP_SMALL_MAX },
	{ "application refuses, identity", NULL, B_IDENT, UP_APP_STATUS, MHDGZ_UPLOAD_APPLICATION,
	  "identity", UP_APP },
	{ "application refuses, gzip", "gzip", B_GZ1, UP_APP_STATUS, MHDGZ_UPLOAD_APPLICATION,
	  "gzip", UP_APP },
};

#define N_UP_ROWS ((int)N_ELEMS(up_rows))

/* The bytes a row sends, and the bytes they decode to (want). */
struct up_bodies {
	uint8_t *json, *text, *send, *want;
	size_t send_len, want_len;
};

static void
make_body(enum up_body kind, struct up_bodies *b)
{
	size_t text_len = 3000, g1, g2;
	uint8_t *m1, *m2;

	b->json = tu_payload(UP_BODY_LEN, TU_JSON, 11);
	b->text = tu_payload(text_len, TU_TEXT, 12);
	ck_assert_int_eq(tu_gzip(b->json, UP_BODY_LEN, 6, &m1, &g1), 0);
	ck_assert_int_eq(tu_gzip(b->text, text_len, 6, &m2, &g2), 0);
	b->send = malloc(g1 + 17 * g2 + 16);
	b->want = malloc(UP_BODY_LEN + 17 * text_len);
	ck_assert(b->send && b->want);
	memcpy(b->send, m1, g1);
	b->send_len = g1;
	memcpy(b->want, b->json, UP_BODY_LEN);
	b->want_len = UP_BODY_LEN;
	switch (kind) {
	case B_IDENT:
		free(b->send);
		b->send = malloc(UP_BODY_LEN);
		ck_assert_ptr_nonnull(b->send);
		memcpy(b->send, b->json, UP_BODY_LEN);
		b->send_len = UP_BODY_LEN;
		break;
	case B_GZ1:
		break;
	case B_GZ2:
		memcpy(b->send + g1, m2, g2);
		b->send_len += g2;
		memcpy(b->want + UP_BODY_LEN, b->text, text_len);
		b->want_len += text_len;
		break;
	case B_EMPTY:
		b->send_len = 0;
		b->want_len = 0;
		break;
	case B_TRUNC:
		b->send_len -= 4;
		break;
	case B_TRUNC_MID:
		b->send_len /= 2;
		break;
	case B_BADCRC:
		b->send[g1 - 8] ^= 0x10;
		break;
	case B_GARBAGE:
		memcpy(b->send + g1, "not a member", 12);
		b->send_len += 12;
		break;
	case B_MEMBERS17:
		for (int k = 0; k < 17; k++) {
			memcpy(b->send + (size_t)k * g2, m2, g2);
			memcpy(b->want + (size_t)k * text_len, b->text, text_len);
		}
		b->send_len = 17 * g2;
		b->want_len = 16 * text_len; /* the 17th never begins */
		break;
	}
	free(m1);
	free(m2);
}

static void
free_bodies(struct up_bodies *b)
{
	free(b->json);
	free(b->text);
	free(b->send);
	free(b->want);
}

/* One row: the answer, the upload's info, the handler's counters exactly,
 * and that the connection is kept for a next request (unless the
 * refusal went out before the body, which closes it). */
START_TEST(test_upload_rows)
{
	const struct up_row *row = &up_rows[_i];
	struct up_srv s = { .early = (row->flags & UP_EARLY) != 0 };
	struct up_bodies b;
	struct th_reply r, r2;
	struct mhdgz_upload_info info;
	struct mhdgz_stats st;
	const char *hdrs[5];
	char ce[64];
	int nh = 0;
	CURL *h = th_curl_new();
	uint64_t want_out;

	make_body(row->body, &b);
	if (row->flags & UP_SMALL_MAX) {
		s.opts.size = sizeof s.opts;
		s.opts.max_decoded_nbytes = 1000;
	}
	if (row->flags & UP_APP)
		s.app_refuse = 50000;
	up_start(&s);
	if (row->ce) {
		snprintf(ce, sizeof ce, "Content-Encoding: %s", row->ce);
		hdrs[nh++] = ce;
	}
	if (row->flags & UP_CHUNKED)
		hdrs[nh++] = "Transfer-Encoding: chunked";
	th_reply_init(&r);
	if (row->flags & UP_EARLY) {
		/* A refusal queued before the body is read is for a client
		 * that waits (RFC 9110 section 10.1.1): libmicrohttpd closes
		 * the connection at once, and a client still sending into it
		 * gets a reset, which may come before it reads the refusal
		 * (libcurl: "Failed sending data to the peer"; seen under
		 * ThreadSanitizer). So these rows wait, as long as the
		 * transfer may take, and send no body. */
		hdrs[nh++] = "Expect: 100-continue";
		r.expect_100_ms = TH_CURL_TIMEOUT_S * 1000ul;
	}
	hdrs[nh] = NULL;
	post(h, &s, b.send, b.send_len, hdrs, &r);
	if (row->status == 200)
		expect_echo(&r, b.want, b.want_len);
	else
		expect_refusal(&r, row->status);
	info = last_info(&s);
	ck_assert_msg(info.refusal == row->refusal, "%s: refusal %s", row->name,
		      hnd_upload_refusal_name(info.refusal));
	ck_assert_str_eq(info.refusal_name, hnd_upload_refusal_name(row->refusal));
	ck_assert_uint_eq(info.status, row->status == 200 ? 0 : row->status);
	if (row->coding)
		ck_assert_str_eq(info.coding, row->coding);
	else
		ck_assert_ptr_null(info.coding);

	/* What was decoded and read, exactly. */
	switch (row->refusal) {
	case MHDGZ_UPLOAD_OK:
		want_out = b.want_len;
		ck_assert_uint_eq(info.encoded_nbytes, b.send_len);
		break;
	case MHDGZ_UPLOAD_MEMBERS:
		want_out = b.want_len;
		ck_assert_uint_eq(info.members, 16);
		ck_assert_uint_eq(info.encoded_nbytes, b.send_len / 17 * 16);
		break;
	case MHDGZ_UPLOAD_TOO_LARGE:
		/* gzip: exactly the limit; identity: nothing of the piece
		 * that passes it (here the first). */
		want_out = strcmp(row->coding, "gzip") == 0 ? 1000 : 0;
		break;
	case MHDGZ_UPLOAD_CODING:
		want_out = 0;
		ck_assert_uint_eq(info.encoded_nbytes, 0);
		break;
	case MHDGZ_UPLOAD_APPLICATION:
		/* the pieces before the one that reached 50000 bytes */
		want_out = info.decoded_nbytes;
		ck_assert_uint_lt(want_out, 50000);
		break;
	default:
		want_out = info.decoded_nbytes; /* the start, checked below */
		ck_assert_uint_le(want_out, b.want_len);
		break;
	}
	ck_assert_uint_eq(info.decoded_nbytes, want_out);
	ck_assert_uint_eq(info.members, row->body == B_GZ2         ? 2
					: row->body == B_MEMBERS17 ? 16
					: row->body == B_EMPTY || !row->coding ||
							strcmp(row->coding, "identity") == 0
						? 0
					: row->body == B_GARBAGE ? 2
								 : 1);
	ck_assert_uint_le(atomic_load(&s.max_piece), row->coding && strcmp(row->coding, "gzip") == 0
							     ? MHDGZ_UPLOAD_DEFAULT_CHUNK_NBYTES
							     : UP_BODY_LEN);
	st = th_stats(s.gz);
	ck_assert_uint_eq(st.uploads, 1);
	ck_assert_uint_eq(st.uploads_gzip, row->coding && strcmp(row->coding, "gzip") == 0);
	ck_assert_uint_eq(st.upload_bytes_in, info.encoded_nbytes);
	ck_assert_uint_eq(st.upload_bytes_out, info.decoded_nbytes);
	for (int k = 0; k < MHDGZ_UPLOAD_REFUSAL_COUNT; k++)
		ck_assert_uint_eq(st.uploads_refused[k], k == (int)row->refusal);
	ck_assert_uint_eq(st.responses, 0); /* nothing went through the response path */

	/* The same connection serves the next request, but after a refusal
	 * sent before the body was read. */
	th_reply_init(&r2);
	post(h, &s, b.json, 10, NULL, &r2);
	expect_echo(&r2, b.json, 10);
	ck_assert_int_eq(r2.num_connects, (row->flags & UP_EARLY) ? 1 : 0);
	th_reply_free(&r);
	th_reply_free(&r2);
	curl_easy_cleanup(h);
	up_stop(&s);
	free_bodies(&b);
}
END_TEST

/*
 * The bomb: 1 GiB of zeros compressed to about 1 MiB. With the default
 * limits the ratio stops it once the 1 MiB burst is decoded; with the
 * ratio check off, the 64 MiB limit stops it after exactly 64 MiB. Either
 * way 413, the memory of the process (server and client) stays flat, and
 * the connection is kept.
 */
START_TEST(test_upload_bomb)
{
	const uint64_t zeros = 1ull << 30;
	struct up_srv s = { 0 };
	const char *hdrs[] = { "Content-Encoding: gzip", NULL };
	struct th_reply r;
	struct mhdgz_upload_info info;
	struct mhdgz_stats st;
	uint8_t *bomb;
	size_t bomb_len;
	uint64_t rss0, rss1;
	CURL *h = th_curl_new();

	ck_assert_int_eq(tu_gzip_zeros(zeros, &bomb, &bomb_len), 0);
	ck_assert_uint_lt(bomb_len, 1100 * 1024);
	ck_assert_uint_gt(bomb_len, 900 * 1024);
	if (_i == 1) {
		s.opts.size = sizeof s.opts;
		s.opts.max_ratio = 2000; /* above deflate's 1032: off */
	}
	up_start(&s);
	th_reply_init(&r);
	rss0 = th_rss_kib();
	post(h, &s, bomb, bomb_len, hdrs, &r);
	rss1 = th_rss_kib();
	expect_refusal(&r, 413);
	info = last_info(&s);
	if (_i == 0) {
		ck_assert_int_eq(info.refusal, MHDGZ_UPLOAD_RATIO);
		ck_assert_uint_le(info.decoded_nbytes, MHDGZ_UPLOAD_DEFAULT_RATIO_BURST_NBYTES);
		ck_assert_uint_gt(info.decoded_nbytes, MHDGZ_UPLOAD_DEFAULT_RATIO_BURST_NBYTES -
							       MHDGZ_UPLOAD_DEFAULT_CHUNK_NBYTES);
	} else {
		ck_assert_int_eq(info.refusal, MHDGZ_UPLOAD_TOO_LARGE);
		ck_assert_uint_eq(info.decoded_nbytes, MHDGZ_UPLOAD_DEFAULT_MAX_DECODED_NBYTES);
	}
	ck_assert_uint_le(info.decoded_nbytes, MHDGZ_UPLOAD_DEFAULT_MAX_DECODED_NBYTES);
	ck_assert_uint_lt(info.encoded_nbytes, bomb_len);
	st = th_stats(s.gz);
	ck_assert_uint_eq(st.upload_bytes_out, info.decoded_nbytes);
	ck_assert_uint_eq(st.upload_bytes_in, info.encoded_nbytes);
	ck_assert_uint_eq(st.uploads_refused[info.refusal], 1);
	if (!TH_SANITIZED)
		ck_assert_msg(rss1 < rss0 + 16 * 1024, "RSS grew from %llu to %llu KiB",
			      (unsigned long long)rss0, (unsigned long long)rss1);
	/* Kept alive: the rest of the body was read and discarded. */
	{
		struct th_reply r2;

		th_reply_init(&r2);
		post(h, &s, "x", 1, NULL, &r2);
		expect_echo(&r2, (const uint8_t *)"x", 1);
		ck_assert_int_eq(r2.num_connects, 0);
		th_reply_free(&r2);
	}
	th_reply_free(&r);
	curl_easy_cleanup(h);
	up_stop(&s);
	free(bomb);
}
END_TEST

/*
 * POST to /echo, raw: the header block hdr (declaring a Content-Length of
 * body_nbytes), then body bytes, reading whatever comes back while
 * sending, until the server closes or all is sent and read. Bounded: at
 * most body_nbytes sent, and 30 s (a bound, not a measured time). The
 * bytes received are in *resp (malloc'd), the body bytes sent in
 * *sent_ret.
 */
static void
raw_flood(uint16_t port, const char *hdr, uint64_t body_nbytes, char **resp, size_t *resp_len,
	  uint64_t *sent_ret)
{
	static char chunk[64 * 1024];
	int fd = th_raw_connect(port);
	uint64_t sent = 0, deadline = th_now_ms() + 30000;
	size_t cap = 4096, len = 0;
	bool writing = true;
	char *buf = malloc(cap);

	ck_assert_ptr_nonnull(buf);
	memset(chunk, 'x', sizeof chunk);
	th_raw_send(fd, hdr, strlen(hdr));
	while (th_now_ms() < deadline) {
		struct pollfd p = { .fd = fd, .events = POLLIN | (writing ? POLLOUT : 0) };

		if (poll(&p, 1, 1000) < 0)
			break;
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n;

			if (len == cap) {
				buf = realloc(buf, cap *= 2);
				ck_assert_ptr_nonnull(buf);
			}
			n = recv(fd, buf + len, cap - len, 0);
			if (n <= 0)
				break; /* the server closed (or reset) */
			len += (size_t)n;
			continue;
		}
		if (writing && (p.revents & POLLOUT)) {
			size_t want = body_nbytes - sent < sizeof chunk
					      ? (size_t)(body_nbytes - sent)
					      : sizeof chunk;
			ssize_t n = send(fd, chunk, want, MSG_NOSIGNAL | MSG_DONTWAIT);

			if (n > 0)
				sent += (uint64_t)n;
			else if (n < 0 && errno != EAGAIN && errno != EINTR)
				writing = false; /* reset: keep reading what came */
			if (sent == body_nbytes)
				writing = false;
		}
	}
	close(fd);
	*resp = buf;
	*resp_len = len;
	*sent_ret = sent;
}

/*
 * A refused body is never read for long (mhdgz.h, request bodies). Early
 * (_i 0): a br body of 64 MiB, far past MHDGZ_UPLOAD_DISCARD_NBYTES,
 * refused on the first call: the client, still sending, reads the
 * complete 415 answer, and the access handler is given no byte of the
 * body. Half way (_i 1): a "gzip" body that is not gzip, refused at its
 * first piece: mhdgz_upload_feed consumes at most
 * MHDGZ_UPLOAD_DISCARD_NBYTES bytes after that piece, then nothing, and
 * the connection is closed without an answer (libmicrohttpd takes none
 * while a body is read).
 */
START_TEST(test_upload_discard_bound)
{
	const uint64_t body = 64ull << 20;
	struct up_srv s = { .early = true };
	struct mhdgz_upload_info info;
	char hdr[256], *resp;
	size_t resp_len;
	uint64_t sent;

	up_start(&s);
	snprintf(hdr, sizeof hdr,
		 "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Encoding: %s\r\n"
		 "Content-Length: %llu\r\n\r\n",
		 _i == 0 ? "br" : "gzip", (unsigned long long)body);
	raw_flood(s.port, hdr, body, &resp, &resp_len, &sent);
	info = last_info(&s);
	if (_i == 0) {
		static const char want[] = "415 Unsupported Media Type\n";
		char *blank = memmem(resp, resp_len, "\r\n\r\n", 4);

		ck_assert_msg(resp_len > 12 && memcmp(resp, "HTTP/1.1 415 ", 13) == 0,
			      "no 415: %zu bytes back", resp_len);
		ck_assert_ptr_nonnull(blank);
		ck_assert_uint_eq(resp_len - (size_t)(blank + 4 - resp), strlen(want));
		ck_assert_mem_eq(blank + 4, want, strlen(want));
		ck_assert_int_eq(info.refusal, MHDGZ_UPLOAD_CODING);
		ck_assert_uint_eq(info.encoded_nbytes, 0);
		ck_assert_uint_eq(atomic_load(&s.after_given), 0);
	} else {
		uint64_t consumed = atomic_load(&s.after_consumed);

		ck_assert_uint_eq(resp_len, 0);
		ck_assert_int_eq(info.refusal, MHDGZ_UPLOAD_MALFORMED);
		ck_assert_uint_le(consumed, MHDGZ_UPLOAD_DISCARD_NBYTES);
		/* Pieces are at most libmicrohttpd's read buffer: the bound
		 * was read up to its last piece, and the one that passes it
		 * was given and not consumed. */
		ck_assert_uint_gt(consumed, MHDGZ_UPLOAD_DISCARD_NBYTES - 64 * 1024);
		ck_assert_uint_gt(atomic_load(&s.after_given), consumed);
	}
	ck_assert_uint_lt(sent, body);
	free(resp);
	up_stop(&s);
}
END_TEST

/*
 * Every allocation of an upload failing in turn (mhdgz's allocator, so
 * zlib's state and window too): before the upload exists the application
 * closes the connection (mhdgz_upload_new gave MHDGZ_ENOMEM); the window,
 * which zlib allocates on the first output, gives 500 (nomem); then the
 * body goes through. Nothing is left allocated.
 */
START_TEST(test_upload_alloc_failures)
{
	struct up_srv s = { 0 };
	const char *hdrs[] = { "Content-Encoding: gzip", NULL };
	uint8_t *body = tu_payload(UP_BODY_LEN, TU_JSON, 13), *g;
	size_t gl;
	unsigned int k, closed = 0, nomem = 0;
	struct mhdgz_stats st;
	CURL *h = th_curl_new();

	ck_assert_int_eq(tu_gzip(body, UP_BODY_LEN, 6, &g, &gl), 0);
	tu_alloc_install(0);
	up_start(&s);
	for (k = 1; k < 20; k++) {
		struct th_reply r;
		CURLcode rc;

		th_reply_init(&r);
		r.upload = g;
		r.upload_len = gl;
		tu_alloc_fail_at(k);
		rc = th_fetch_ex(h, s.port, "/echo", TH_POST | TH_FRESH, hdrs, &r);
		(void)last_info(&s);
		if (!tu_alloc_failed()) {
			ck_assert_int_eq(rc, CURLE_OK);
			expect_echo(&r, body, UP_BODY_LEN);
			th_reply_free(&r);
			break;
		}
		if (rc != CURLE_OK) {
			closed++;
		} else {
			expect_refusal(&r, 500);
			nomem++;
		}
		th_reply_free(&r);
	}
	ck_assert_uint_lt(k, 20);
	ck_assert_uint_ge(closed, 3); /* the upload, the inflater, its buffer, zlib's state */
	ck_assert_uint_ge(nomem, 1);  /* zlib's window */
	st = th_stats(s.gz);
	ck_assert_uint_eq(st.uploads, nomem + 1);
	ck_assert_uint_eq(st.uploads_refused[MHDGZ_UPLOAD_NOMEM], nomem);
	ck_assert_uint_eq(st.uploads_refused[MHDGZ_UPLOAD_OK], 1);
	curl_easy_cleanup(h);
	up_stop(&s);
	ck_assert_int_eq(tu_alloc_live(), 0);
	tu_alloc_uninstall();
	free(g);
	free(body);
}
END_TEST

/* The API's edges without a body: arguments, names, the refusal response. */
START_TEST(test_upload_api)
{
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct mhdgz_upload_options o = { .size = 1 };
	struct mhdgz_upload *up = NULL;
	struct mhdgz_upload_info info = { .size = 1 };
	struct MHD_Response *r;
	size_t n = 5;

	ck_assert_int_eq(mhdgz_upload_new(NULL, NULL, NULL, on_data, NULL, &up), MHDGZ_EINVAL);
	ck_assert_int_eq(mhdgz_upload_new(gz, (struct MHD_Connection *)gz, &o, on_data, NULL, &up),
			 MHDGZ_EINVAL);
	ck_assert_ptr_null(up);
	ck_assert_uint_eq(mhdgz_upload_feed(NULL, "abcde", &n), 500);
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_eq(mhdgz_upload_finish(NULL), 500);
	ck_assert_int_eq(mhdgz_upload_get_info(NULL, &info), MHDGZ_EINVAL);
	mhdgz_upload_free(NULL);
	ck_assert_str_eq(hnd_upload_refusal_name(MHDGZ_UPLOAD_OK), "ok");
	ck_assert_str_eq(hnd_upload_refusal_name(MHDGZ_UPLOAD_RATIO), "ratio");
	ck_assert_str_eq(hnd_upload_refusal_name(MHDGZ_UPLOAD_NOMEM), "nomem");
	ck_assert_str_eq(hnd_upload_refusal_name(MHDGZ_UPLOAD_REFUSAL_COUNT), "unknown");
	r = mhdgz_upload_refusal_response(415);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(MHD_get_response_header(r, "Accept-Encoding"), "gzip");
	MHD_destroy_response(r);
	r = mhdgz_upload_refusal_response(413);
	ck_assert_ptr_nonnull(r);
	ck_assert_ptr_null(MHD_get_response_header(r, "Accept-Encoding"));
	MHD_destroy_response(r);
	mhdgz_free(gz);
}
END_TEST

struct ck_case
hnd_upload_case(void)
{
	return (struct ck_case){ "upload",
				 CK_CASE_TIMEOUT,
				 { { test_upload_rows, 0, N_UP_ROWS },
				   { test_upload_bomb, 0, 2 },
				   { test_upload_discard_bound, 0, 2 },
				   { test_upload_alloc_failures, 0, 0 },
				   { test_upload_api, 0, 0 } } };
}
