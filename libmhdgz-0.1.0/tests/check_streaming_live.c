/* check_streaming_live.c: streaming behaviour over time: readers returning 0 and errors, SSE, shared responses, disconnects, HEAD, bounded memory. */
#define _GNU_SOURCE /* memmem */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <zlib.h>

#include "mhdgz.h"
#include "check_suites.h"
#include "harness.h"
#include "testutil.h"

#define KIB 1024u
#define MIB (1024u * 1024u)

/* How long a test waits for the daemon to release a finished or abandoned
 * response (free callback, compressor back in the pool), in milliseconds. */
#define RELEASE_WAIT_MS 10000

/* How long the SSE server waits for the client to confirm an event before
 * it gives up and produces the next one anyway (counted as late), in
 * milliseconds. Far above any scheduling delay, so only buffering by the
 * server makes an event late. */
#define EVENT_WAIT_MS 3000

/* The reply is one complete gzip member decoding to want. */
static void
expect_gzip_body(const struct th_reply *r, const uint8_t *want, size_t want_len)
{
	uint8_t *dec = NULL;
	size_t dec_len = 0, i;
	const char *ce = th_header(r, "Content-Encoding", NULL);

	ck_assert_msg(r->rc == CURLE_OK, "gzip transfer failed: %s", curl_easy_strerror(r->rc));
	ck_assert_int_eq(r->status, 200);
	ck_assert_msg(ce && strcasecmp(ce, "gzip") == 0, "Content-Encoding: %s",
		      ce ? ce : "(none)");
	ck_assert_msg(tu_gunzip(r->body, r->body_len, &dec, &dec_len) == 0,
		      "%zu bytes are not one complete gzip member", r->body_len);
	for (i = 0; i < dec_len && i < want_len; i++)
		if (dec[i] != want[i])
			break;
	ck_assert_msg(dec_len == want_len && i == want_len,
		      "decoded %zu bytes, want %zu; first difference at %zu", dec_len, want_len, i);
	free(dec);
}

/* ===================================================================== */
/*        Per-response reader state (one per queued response)            */
/* ===================================================================== */

/* Most responses a test makes with per-response state. */
#define MAX_RESP 16

/* The state of one response's reader: which fixture, and whether its free
 * callback has run (a reader call after it is a use after free). */
struct rstate {
	struct lfix *f;
	uint64_t next_pos;     /* the position the next call should have */
	unsigned int zeros;    /* 0 returns left at the current stop */
	uint64_t stop_pos;     /* position of the current stop */
	uint64_t stop_t0;      /* ms when the current stop began */
	_Atomic bool freed;
};

/*
 * Live fixture: a generated body (data, len: cyclic over data when the
 * stream is longer than the buffer), per-response reader state, counters,
 * and the behaviour knobs of the tests below.
 */
struct lfix {
	const uint8_t *data;
	size_t data_len;       /* the generator cycles over data[0..data_len) */
	uint64_t len;          /* body length */
	bool known;            /* announce len (else MHD_SIZE_UNKNOWN) */
	size_t block_size;
	size_t chunk;          /* most bytes per call */
	const char *ctype;
	const char *etag;
	uint64_t err_at;       /* UINT64_MAX: never; else END_WITH_ERROR at this position */
	uint64_t stop_every;   /* > 0: stop (return 0) at every multiple of this position */
	bool stop_at_start;    /* stop at position 0 too */
	unsigned int stop_zeros;  /* counted stops: this many 0 returns */
	unsigned int stop_ms;     /* timed stops: return 0 for this many ms */
	struct rstate rs[MAX_RESP];
	_Atomic unsigned int nresp;
	_Atomic unsigned int frees;
	_Atomic unsigned int after_free;
	_Atomic unsigned int bad_pos;
	_Atomic uint64_t calls;
	_Atomic uint64_t zero_calls;
	_Atomic uint64_t data_calls;
	_Atomic unsigned int create_failures;
};

static void
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

static ssize_t
live_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct rstate *rs = cls;
	struct lfix *f = rs->f;
	size_t n, done = 0;

	atomic_fetch_add(&f->calls, 1);
	if (atomic_load(&rs->freed))
		atomic_fetch_add(&f->after_free, 1);
	if (pos != rs->next_pos)
		atomic_fetch_add(&f->bad_pos, 1);
	if (pos >= f->len)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (pos >= f->err_at)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (f->stop_every && (pos > 0 || f->stop_at_start) && pos % f->stop_every == 0) {
		if (rs->stop_pos != pos) {
			rs->stop_pos = pos;
			rs->zeros = f->stop_zeros;
			rs->stop_t0 = th_now_ms();
		}
		if (rs->zeros > 0 || (f->stop_ms && th_now_ms() - rs->stop_t0 < f->stop_ms)) {
			if (rs->zeros > 0)
				rs->zeros--;
			atomic_fetch_add(&f->zero_calls, 1);
			return 0;
		}
	}
	n = f->chunk < max ? f->chunk : max;
	if (n > f->len - pos)
		n = (size_t)(f->len - pos);
	/* Do not run past the next stop or the error position. */
	if (f->stop_every && n > f->stop_every - pos % f->stop_every)
		n = (size_t)(f->stop_every - pos % f->stop_every);
	if (f->err_at != UINT64_MAX && n > f->err_at - pos)
		n = (size_t)(f->err_at - pos);
	while (done < n) {
		size_t off = (size_t)((pos + done) % f->data_len), k = f->data_len - off;

		if (k > n - done)
			k = n - done;
		memcpy(buf + done, f->data + off, k);
		done += k;
	}
	rs->next_pos = pos + n;
	atomic_fetch_add(&f->data_calls, 1);
	return (ssize_t)n;
}

static void
live_free(void *cls)
{
	struct rstate *rs = cls;

	atomic_store(&rs->freed, true);
	atomic_fetch_add(&rs->f->frees, 1);
}

/* A fresh response per request. */
static enum MHD_Result
live_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct lfix *f = s->cls;
	unsigned int k = atomic_fetch_add(&f->nresp, 1);
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)url;
	if (k >= MAX_RESP) {
		atomic_fetch_add(&f->create_failures, 1);
		return MHD_NO;
	}
	f->rs[k].f = f;
	f->rs[k].stop_pos = UINT64_MAX; /* no stop begun */
	r = mhdgz_response_from_callback(s->gz, f->known ? f->len : MHD_SIZE_UNKNOWN,
					 f->block_size, live_read, &f->rs[k], live_free);
	if (!r) {
		atomic_fetch_add(&f->create_failures, 1);
		return MHD_NO;
	}
	if (f->ctype)
		ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, f->ctype) ==
			  MHD_YES);
	if (f->etag)
		ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, f->etag) == MHD_YES);
	ret = mhdgz_queue_response_ex(s->gz, c, method, MHD_HTTP_OK, r, NULL);
	MHD_destroy_response(r);
	return ret;
}

static bool
all_freed(void *cls)
{
	struct lfix *f = cls;

	return atomic_load(&f->frees) >= atomic_load(&f->nresp);
}

/* Every response made so far is released, each exactly once, with no
 * reader call after its release, and every compressor is back. */
static void
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

/* After the daemon is stopped: exactly one free per response. */
static void
expect_freed_once(struct lfix *f)
{
	unsigned int i, n = atomic_load(&f->nresp);

	ck_assert_uint_eq(atomic_load(&f->frees), n);
	for (i = 0; i < n; i++)
		ck_assert(atomic_load(&f->rs[i].freed));
}

/* ===================================================================== */
/*                      Readers that return 0                            */
/* ===================================================================== */

/* A reader that says "no data yet" three times at the start and at every
 * 64 KiB: the body
 * is exact, the chunked stream carries no empty chunk before the last
 * one, and the reader is called once per 0 and once per piece of data
 * (plus the final end-of-stream), nothing more. */
START_TEST(reader_zero_counted)
{
	bool known = _i & 1;
	enum mhdgz_backend be = _i & 2 ? MHDGZ_BACKEND_ISAL : MHDGZ_BACKEND_ZLIB;
	size_t len = 1 * MIB + 99;
	uint8_t *data;
	struct mhdgz *gz;
	struct th_server s = {0};
	struct th_reply r;
	struct lfix f;
	uint8_t *gzb = NULL;
	size_t gz_len = 0, nchunks = 0;
	bool early = false;
	uint64_t stops = (len - 1) / (64 * KIB) + 1, calls, bound;

	if (!mhdgz_backend_available(be))
		return;
	data = tu_payload(len, TU_TEXT, 101);
	gz = th_gz_new(be, 0, 0);
	lfix_init(&f, data, len, len, known, 4096, "text/plain");
	f.stop_every = 64 * KIB;
	f.stop_at_start = true;
	f.stop_zeros = 3;
	th_start(&s, gz, 0, live_route, &f);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", TH_GZIP | TH_RAW, &r);
	ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
	ck_assert_msg(th_dechunk(r.body, r.body_len, &gzb, &gz_len, &nchunks, &early) == 0,
		      "raw chunked body malformed (empty chunk before the end: %d)", early);
	ck_assert(!early);
	free(r.body);
	r.body = gzb;
	r.body_len = r.body_cap = gz_len;
	expect_gzip_body(&r, data, len);
	expect_all_released(&s, &f);
	ck_assert_uint_eq(atomic_load(&f.bad_pos), 0);
	calls = atomic_load(&f.zero_calls);
	ck_assert_msg(calls == 3 * stops, "%llu calls returned 0, want %llu",
		      (unsigned long long)calls, (unsigned long long)(3 * stops));
	calls = atomic_load(&f.calls);
	bound = atomic_load(&f.data_calls) + 3 * stops + 1;
	ck_assert_msg(calls <= bound, "%llu reader calls, at most %llu expected",
		      (unsigned long long)calls, (unsigned long long)bound);
	th_stop(&s);
	expect_freed_once(&f);
	th_reply_free(&r);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/*
 * A reader that has no data for 20 ms at each of 8 stops. libmicrohttpd's
 * internal thread polls a reader that returns 0 again at once (its
 * documented busy wait), so the plain (identity) response sets the
 * baseline; the gzip stream must not call the reader more often than that
 * (a library that itself retried in a loop, or sent empty chunks, would).
 */
START_TEST(reader_zero_timed)
{
	size_t len = 8 * 64 * KIB + 1;
	uint8_t *data = tu_payload(len, TU_TEXT, 103);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_ZLIB, 6, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct lfix f;
	uint64_t z_identity, z_gzip, t0, ms_identity, ms_gzip;
	uint8_t *gzb = NULL;
	size_t gz_len = 0, nchunks = 0;
	bool early = false;

	lfix_init(&f, data, len, len, false, 4096, "text/plain");
	f.stop_every = 64 * KIB;
	f.stop_ms = 20;
	th_start(&s, gz, 0, live_route, &f);
	th_reply_init(&r);
	t0 = th_now_ms();
	th_fetch(NULL, s.port, "/", 0, &r);
	ms_identity = th_now_ms() - t0;
	ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
	z_identity = atomic_load(&f.zero_calls);
	t0 = th_now_ms();
	th_fetch(NULL, s.port, "/", TH_GZIP | TH_RAW, &r);
	ms_gzip = th_now_ms() - t0;
	z_gzip = atomic_load(&f.zero_calls) - z_identity;
	ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
	ck_assert(th_dechunk(r.body, r.body_len, &gzb, &gz_len, &nchunks, &early) == 0);
	ck_assert(!early);
	free(r.body);
	r.body = gzb;
	r.body_len = r.body_cap = gz_len;
	expect_gzip_body(&r, data, len);
	fprintf(stderr, "reader_zero_timed: 0-returns identity %llu in %llu ms, gzip %llu in %llu ms\n",
		(unsigned long long)z_identity, (unsigned long long)ms_identity,
		(unsigned long long)z_gzip, (unsigned long long)ms_gzip);
	/* Generous: both are libmicrohttpd's polling rate over the same
	 * waits; only a multiple means the library spins by itself. */
	ck_assert_msg(z_gzip <= 4 * z_identity + 1000,
		      "gzip stream: %llu calls returning 0, identity %llu",
		      (unsigned long long)z_gzip, (unsigned long long)z_identity);
	expect_all_released(&s, &f);
	th_stop(&s);
	th_reply_free(&r);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/* ===================================================================== */
/*                       Reader errors mid-stream                        */
/* ===================================================================== */

/* MHD_CONTENT_READER_END_WITH_ERROR: the client sees a failed transfer,
 * never a complete gzip member; counted as a failure; the compressor goes
 * back and the free callback runs once. _i: bit 0 known size, bit 1 error
 * mid-stream (else at position 0). */
START_TEST(reader_error)
{
	bool known = _i & 1, mid = _i & 2;
	size_t len = 1 * MIB;
	uint8_t *data = tu_payload(len, TU_TEXT, 107);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct lfix f;
	uint8_t *dec = NULL;
	size_t dec_len = 0;

	lfix_init(&f, data, len, len, known, 8192, "application/json");
	f.err_at = mid ? 200 * KIB + 5 : 0;
	th_start(&s, gz, 0, live_route, &f);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", TH_GZIP, &r);
	ck_assert_msg(r.rc != CURLE_OK, "reader error: the gzip transfer completed (%zu bytes)",
		      r.body_len);
	ck_assert_msg(tu_gunzip(r.body, r.body_len, &dec, &dec_len) != 0,
		      "reader error: the client got a complete gzip member of %zu bytes", dec_len);
	expect_all_released(&s, &f);
	ck_assert_uint_ge(th_stats(gz).failures, 1);
	/* The same reader without gzip fails the same way (baseline). */
	th_fetch(NULL, s.port, "/", 0, &r);
	ck_assert(r.rc != CURLE_OK);
	expect_all_released(&s, &f);
	th_stop(&s);
	expect_freed_once(&f);
	th_reply_free(&r);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/* ===================================================================== */
/*                      SSE and low latency                              */
/* ===================================================================== */

#define SSE_EVENTS 6

/*
 * An event stream whose reader produces event k only after the client has
 * received event k-1 (decoded, through libcurl's gzip decoder): the client
 * posts a semaphore per complete event, the reader waits for it at most
 * EVENT_WAIT_MS. A server that buffers event k-1 until more data comes
 * makes every wait time out.
 */
struct sse {
	struct th_src src;    /* frees */
	unsigned int next;    /* next event to produce (daemon thread only) */
	unsigned int late;    /* waits that timed out */
	unsigned int seen;    /* complete events received (client) */
	size_t scan;          /* client: decoded bytes scanned */
	size_t block_size;
	size_t event_pad;     /* bytes of hex padding per event (0: a short event) */
	sem_t got;
	char *expect;         /* every event, concatenated */
	size_t expect_len;
	const char *ctype;
	bool set_low_latency;
	int ll_rc;
	_Atomic unsigned int create_failures;
	unsigned int nchunk_events; /* bulk test: identical chunks to produce */
	unsigned int chunks_done;
};

/* Event k: short, or with pad bytes of pseudo-random hex (compresses to
 * about half: a large event's gzip output exceeds libmicrohttpd's buffer
 * and must be flushed across several reader calls). Returns its length,
 * or 0 if it does not fit in cap. */
static size_t
sse_event(char *buf, size_t cap, unsigned int k, size_t pad)
{
	uint32_t x = 2463534242u + k;
	int n = snprintf(buf, cap, "id: %u\ndata: event %u of the stream, the quick brown fox ", k,
			 k);
	size_t len = (size_t)n, i;

	if (n < 0 || len + pad + 2 >= cap)
		return 0;
	for (i = 0; i < pad; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[len++] = "0123456789abcdef"[x & 15];
	}
	buf[len++] = '\n';
	buf[len++] = '\n';
	return len;
}

static ssize_t
sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sse *e = cls;
	struct timespec ts;
	size_t n;

	(void)pos;
	atomic_fetch_add(&e->src.calls, 1);
	if (e->next == SSE_EVENTS)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (e->next > 0) {
		int rc;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += EVENT_WAIT_MS / 1000;
		ts.tv_nsec += (long)(EVENT_WAIT_MS % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		do
			rc = sem_timedwait(&e->got, &ts);
		while (rc < 0 && errno == EINTR);
		if (rc < 0)
			e->late++;
	}
	n = sse_event(buf, max, e->next, e->event_pad);
	if (n == 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	e->next++;
	return (ssize_t)n;
}

static void
sse_on_data(struct th_reply *r, const uint8_t *p, size_t n)
{
	struct sse *e = r->cls;
	const uint8_t *q;

	(void)p;
	(void)n;
	while (e->scan + 2 <= r->body_len &&
	       (q = memmem(r->body + e->scan, r->body_len - e->scan, "\n\n", 2)) != NULL) {
		e->scan = (size_t)(q - r->body) + 2;
		e->seen++;
		sem_post(&e->got);
	}
}

static enum MHD_Result
sse_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct sse *e = s->cls;
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)url;
	(void)method;
	r = mhdgz_response_from_callback(s->gz, MHD_SIZE_UNKNOWN, e->block_size, sse_read, e,
					 th_src_free);
	if (!r) {
		atomic_fetch_add(&e->create_failures, 1);
		return MHD_NO;
	}
	ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, e->ctype) == MHD_YES);
	ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache") ==
		  MHD_YES);
	if (e->set_low_latency)
		e->ll_rc = mhdgz_response_set_low_latency(s->gz, r);
	ret = mhdgz_queue_response(s->gz, c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* The streams: content type, low latency set by the application or not,
 * backend (and level), hex padding per event. */
static const struct {
	const char *ctype;
	bool ll;
	enum mhdgz_backend be;
	int level;
	size_t pad;
} ev_cases[] = {
	{"text/event-stream", false, MHDGZ_BACKEND_DEFAULT, 0, 0},
	{"Text/Event-Stream; charset=utf-8", false, MHDGZ_BACKEND_DEFAULT, 0, 0},
	{"text/plain; charset=utf-8", true, MHDGZ_BACKEND_DEFAULT, 0, 0},
	{"application/x-ndjson", true, MHDGZ_BACKEND_DEFAULT, 0, 0},
	{"text/event-stream", false, MHDGZ_BACKEND_ZLIB, 9, 0},
	{"text/event-stream", false, MHDGZ_BACKEND_ISAL, 1, 0},
	{"text/event-stream", false, MHDGZ_BACKEND_ISAL, 4, 0},
	{"text/event-stream", false, MHDGZ_BACKEND_DEFAULT, 0, 100 * KIB},
	{"text/event-stream", false, MHDGZ_BACKEND_ISAL, 2, 100 * KIB},
	{"text/plain", true, MHDGZ_BACKEND_ZLIB, 1, 100 * KIB},
};

/* Each event through libcurl's gzip decoder before the next is made. */
START_TEST(events_arrive_one_by_one)
{
	struct mhdgz_options o;
	struct mhdgz *gz = NULL;
	struct th_server s = {0};
	struct th_reply r;
	struct sse *e;
	size_t cap;
	unsigned int k;
	const char *ce;

	if (!mhdgz_backend_available(ev_cases[_i].be))
		return;
	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.backend = ev_cases[_i].be;
	o.level = ev_cases[_i].level;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	e = calloc(1, sizeof *e);
	ck_assert(e != NULL);
	ck_assert_int_eq(sem_init(&e->got, 0, 0), 0);
	e->ctype = ev_cases[_i].ctype;
	e->set_low_latency = ev_cases[_i].ll;
	e->event_pad = ev_cases[_i].pad;
	e->block_size = ev_cases[_i].pad ? ev_cases[_i].pad + 4096 : 4096;
	cap = SSE_EVENTS * e->block_size;
	e->expect = malloc(cap);
	ck_assert(e->expect != NULL);
	for (k = 0; k < SSE_EVENTS; k++) {
		size_t n = sse_event(e->expect + e->expect_len, e->block_size, k, e->event_pad);

		ck_assert(n > 0);
		e->expect_len += n;
	}
	th_start(&s, gz, 0, sse_route, e);
	th_reply_init(&r);
	r.on_data = sse_on_data;
	r.cls = e;
	th_fetch(NULL, s.port, "/events", TH_DECODE, &r);
	ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
	ce = th_header(&r, "Content-Encoding", NULL);
	ck_assert_msg(ce && strcasecmp(ce, "gzip") == 0, "event stream not gzip-coded: %s",
		      ce ? ce : "(none)");
	ck_assert_int_eq(e->ll_rc, 0);
	ck_assert_msg(e->late == 0,
		      "%u of %u events did not reach the client before the next was produced "
		      "(buffered, not sync-flushed)",
		      e->late, SSE_EVENTS - 1);
	ck_assert_uint_eq(e->seen, SSE_EVENTS);
	ck_assert_uint_eq(r.body_len, e->expect_len);
	ck_assert(memcmp(r.body, e->expect, e->expect_len) == 0);
	th_stop(&s);
	ck_assert_uint_eq(atomic_load(&e->src.frees), 1);
	ck_assert(th_pool_back_pred(gz));
	th_reply_free(&r);
	sem_destroy(&e->got);
	free(e->expect);
	free(e);
	mhdgz_free(gz);
}
END_TEST

/* 2000 identical 50-byte chunks, one per reader call: a bulk stream is not
 * flushed per chunk (each sync flush costs at least 5 bytes, RFC 1951
 * empty stored block), a low-latency one is. _i / 3: 0 bulk, 1
 * low-latency (set_low_latency), 2 low-latency (event stream); _i % 3 the
 * backend. */
#define BULK_CHUNKS 2000
#define BULK_LINE "0123456789 the quick brown fox jumps over the dog\n"

static ssize_t
bulk_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sse *e = cls;
	size_t n = sizeof BULK_LINE - 1;

	(void)pos;
	atomic_fetch_add(&e->src.calls, 1);
	if (e->chunks_done == e->nchunk_events)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (n > max)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	memcpy(buf, BULK_LINE, n);
	e->chunks_done++;
	return (ssize_t)n;
}

static enum MHD_Result
bulk_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct sse *e = s->cls;
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)url;
	(void)method;
	e->chunks_done = 0;
	r = mhdgz_response_from_callback(s->gz, MHD_SIZE_UNKNOWN, e->block_size, bulk_read, e,
					 th_src_free);
	ck_assert(r != NULL);
	ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, e->ctype) == MHD_YES);
	if (e->set_low_latency)
		ck_assert_int_eq(mhdgz_response_set_low_latency(s->gz, r), 0);
	ret = mhdgz_queue_response(s->gz, c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static const enum mhdgz_backend fp_backends[] = {
	MHDGZ_BACKEND_ZLIB, MHDGZ_BACKEND_DEFAULT, MHDGZ_BACKEND_ISAL,
};

START_TEST(flush_policy)
{
	int mode = _i / (int)N_ELEMS(fp_backends);
	enum mhdgz_backend be = fp_backends[_i % (int)N_ELEMS(fp_backends)];
	struct mhdgz *gz;
	struct th_server s = {0};
	struct th_reply r;
	struct sse *e = calloc(1, sizeof *e);
	uint8_t *want = malloc(BULK_CHUNKS * (sizeof BULK_LINE - 1));
	size_t i, want_len = 0;

	if (!mhdgz_backend_available(be)) {
		free(e);
		free(want);
		return;
	}
	gz = th_gz_new(be, 0, 0);
	ck_assert(e && want);
	for (i = 0; i < BULK_CHUNKS; i++) {
		memcpy(want + want_len, BULK_LINE, sizeof BULK_LINE - 1);
		want_len += sizeof BULK_LINE - 1;
	}
	e->nchunk_events = BULK_CHUNKS;
	e->block_size = 4096;
	e->ctype = mode == 2 ? "text/event-stream" : "text/plain";
	e->set_low_latency = mode == 1;
	th_start(&s, gz, 0, bulk_route, e);
	th_reply_init(&r);
	th_fetch(NULL, s.port, "/", TH_GZIP, &r);
	expect_gzip_body(&r, want, want_len);
	fprintf(stderr, "flush_policy(%s, %s): %zu gzip bytes for %zu bytes in %u chunks\n",
		mhdgz_backend_name(be), mode == 0 ? "bulk" : "low-latency", r.body_len, want_len,
		BULK_CHUNKS);
	if (mode == 0)
		ck_assert_msg(r.body_len < 4000,
			      "bulk stream: %zu gzip bytes for %zu bytes of one repeated line "
			      "(flushed per chunk?)",
			      r.body_len, want_len);
	else
		ck_assert_msg(r.body_len >= BULK_CHUNKS * 5,
			      "low-latency stream: %zu gzip bytes for %u chunks (not flushed per "
			      "chunk)",
			      r.body_len, BULK_CHUNKS);
	th_stop(&s);
	ck_assert_uint_eq(atomic_load(&e->src.frees), 1);
	th_reply_free(&r);
	free(e);
	free(want);
	mhdgz_free(gz);
}
END_TEST

static ssize_t
never_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)cls;
	(void)pos;
	(void)buf;
	(void)max;
	return MHD_CONTENT_READER_END_OF_STREAM;
}

/* mhdgz_response_set_low_latency: 0 for streaming responses of the
 * handler, MHDGZ_EINVAL for anything else. */
START_TEST(low_latency_api)
{
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct mhdgz *other = th_gz_new(MHDGZ_BACKEND_ZLIB, 0, 0);
	struct th_src src = {0};
	static char body[] = "hello";
	struct MHD_Response *cb, *cb_other, *buf, *plain, *fdr;
	int fd = th_temp_file("hello, file\n", 12);

	cb = mhdgz_response_from_callback(gz, MHD_SIZE_UNKNOWN, 1024, never_read, &src,
					  th_src_free);
	cb_other = mhdgz_response_from_callback(other, 100, 1024, never_read, &src, th_src_free);
	buf = mhdgz_response_from_buffer(gz, 5, body, MHD_RESPMEM_PERSISTENT);
	plain = MHD_create_response_from_buffer(5, body, MHD_RESPMEM_PERSISTENT);
	fdr = mhdgz_response_from_fd(gz, 12, fd);
	ck_assert(cb && cb_other && buf && plain && fdr);
	ck_assert_int_eq(mhdgz_response_set_low_latency(gz, cb), 0);
	ck_assert_int_eq(mhdgz_response_set_low_latency(gz, fdr), 0);
	ck_assert_int_eq(mhdgz_response_set_low_latency(gz, buf), MHDGZ_EINVAL);
	ck_assert_int_eq(mhdgz_response_set_low_latency(gz, plain), MHDGZ_EINVAL);
	ck_assert_int_eq(mhdgz_response_set_low_latency(gz, cb_other), MHDGZ_EINVAL);
	ck_assert_int_eq(mhdgz_response_set_low_latency(gz, NULL), MHDGZ_EINVAL);
	ck_assert_int_eq(mhdgz_response_set_low_latency(NULL, cb), MHDGZ_EINVAL);
	/* Creation errors: NULL, and the free callback is not called. */
	ck_assert(mhdgz_response_from_callback(NULL, 10, 1024, never_read, &src, th_src_free) ==
		  NULL);
	ck_assert(mhdgz_response_from_callback(gz, 10, 1024, NULL, &src, th_src_free) == NULL);
	ck_assert_uint_eq(atomic_load(&src.frees), 0);
	MHD_destroy_response(cb);
	MHD_destroy_response(cb_other);
	MHD_destroy_response(buf);
	MHD_destroy_response(plain);
	MHD_destroy_response(fdr);
	ck_assert_uint_eq(atomic_load(&src.frees), 2);
	/* The file descriptor went with its response. */
	ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
	mhdgz_free(gz);
	mhdgz_free(other);
}
END_TEST


/* File responses own their descriptor once made (closed when the response
 * is freed); on every failure (NULL handler, unknown size, offset out of
 * range) the caller still owns it, exactly as with libmicrohttpd, so the
 * usual "if (r == NULL) close(fd);" closes it once. */
START_TEST(fd_ownership)
{
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	int fd;

	fd = th_temp_file("abc", 3);
	ck_assert(mhdgz_response_from_fd(NULL, 3, fd) == NULL);
	ck_assert_msg(fcntl(fd, F_GETFD) != -1, "fd closed after a NULL handler");
	ck_assert_int_eq(close(fd), 0);
	fd = th_temp_file("abc", 3);
	ck_assert(mhdgz_response_from_fd_at_offset64(gz, MHD_SIZE_UNKNOWN, fd, 0) == NULL);
	ck_assert_msg(fcntl(fd, F_GETFD) != -1, "fd closed after an unknown size");
	ck_assert_int_eq(close(fd), 0);
	fd = th_temp_file("abc", 3);
	ck_assert(mhdgz_response_from_fd_at_offset64(gz, 3, fd, (uint64_t)INT64_MAX) == NULL);
	ck_assert_msg(fcntl(fd, F_GETFD) != -1, "fd closed after an offset out of range");
	ck_assert_int_eq(close(fd), 0);
	mhdgz_free(gz);
}
END_TEST

/* ===================================================================== */
/*              One response object queued for many connections          */
/* ===================================================================== */

/* A response made once, queued for every request, destroyed by the test
 * after the daemon has stopped. */
struct shared {
	struct MHD_Response *r;
	struct th_src src;
	useconds_t read_sleep_us; /* widen the window in which calls could overlap */
	_Atomic unsigned int queue_failures;
	_Atomic unsigned long tids[8]; /* threads that called the reader */
	_Atomic unsigned int nthreads;
};

/* Record the calling thread (up to 8 distinct ones). */
static void
note_thread(struct shared *sh)
{
	unsigned long me = (unsigned long)pthread_self();
	unsigned int i;

	for (i = 0; i < 8; i++) {
		unsigned long z = 0;

		if (atomic_load(&sh->tids[i]) == me)
			return;
		if (atomic_compare_exchange_strong(&sh->tids[i], &z, me)) {
			atomic_fetch_add(&sh->nthreads, 1);
			return;
		}
	}
}

static ssize_t
shared_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct shared *sh = cls;
	ssize_t n;

	if (sh->read_sleep_us) {
		unsigned int in = atomic_fetch_add(&sh->src.inside, 1) + 1, m;

		m = atomic_load(&sh->src.max_inside);
		while (in > m && !atomic_compare_exchange_weak(&sh->src.max_inside, &m, in))
			;
		usleep(sh->read_sleep_us);
		note_thread(sh);
		atomic_fetch_sub(&sh->src.inside, 1);
	}
	n = th_src_read(&sh->src, pos, buf, max);
	return n;
}

static void
shared_free(void *cls)
{
	struct shared *sh = cls;

	atomic_fetch_add(&sh->src.frees, 1);
}

static enum MHD_Result
shared_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct shared *sh = s->cls;
	enum MHD_Result ret;

	(void)url;
	(void)method;
	ret = mhdgz_queue_response(s->gz, c, MHD_HTTP_OK, sh->r);
	if (ret != MHD_YES)
		atomic_fetch_add(&sh->queue_failures, 1);
	return ret;
}

static void
shared_make(struct shared *sh, struct mhdgz *gz, const uint8_t *data, size_t len, bool known)
{
	memset(sh, 0, sizeof *sh);
	sh->src.data = data;
	sh->src.len = len;
	sh->src.chunk = 4096;
	sh->r = mhdgz_response_from_callback(gz, known ? len : MHD_SIZE_UNKNOWN, 4096,
					     shared_read, sh, shared_free);
	ck_assert(sh->r != NULL);
	ck_assert(MHD_add_response_header(sh->r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain") ==
		  MHD_YES);
	ck_assert(MHD_add_response_header(sh->r, MHD_HTTP_HEADER_ETAG, "\"s\"") == MHD_YES);
}

/* Sequentially over one keep-alive connection and over new ones: every
 * gzip body complete and exact (the reader restarts at 0 for each use),
 * identity too; the free callback runs once, when the test destroys the
 * response after the daemon is done with it. */
START_TEST(shared_sequential)
{
	bool known = _i;
	size_t len = 700 * KIB + 13;
	uint8_t *data = tu_payload(len, TU_TEXT, 201);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply r;
	struct shared sh;
	CURL *h = curl_easy_init();
	int i;

	shared_make(&sh, gz, data, len, known);
	th_start(&s, gz, 0, shared_route, &sh);
	th_reply_init(&r);
	for (i = 0; i < 6; i++) {
		unsigned int flags = i == 3 ? 0 : i == 4 ? TH_DECODE : TH_GZIP;

		th_fetch(i % 2 ? h : NULL, s.port, "/", flags, &r);
		if (flags == 0) {
			ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
			ck_assert(th_header(&r, "Content-Encoding", NULL) == NULL);
			ck_assert_uint_eq(r.body_len, len);
			ck_assert(memcmp(r.body, data, len) == 0);
		} else if (flags == TH_DECODE) {
			ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
			ck_assert_str_eq(th_header(&r, "Content-Encoding", NULL), "gzip");
			ck_assert_uint_eq(r.body_len, len);
			ck_assert(memcmp(r.body, data, len) == 0);
		} else {
			expect_gzip_body(&r, data, len);
			ck_assert_str_eq(th_header(&r, "ETag", NULL), "W/\"s\"");
		}
	}
	ck_assert(th_wait(th_pool_back_pred, gz, RELEASE_WAIT_MS));
	ck_assert_uint_eq(atomic_load(&sh.src.frees), 0);
	curl_easy_cleanup(h);
	th_stop(&s);
	ck_assert_uint_eq(atomic_load(&sh.src.frees), 0);
	MHD_destroy_response(sh.r);
	ck_assert_uint_eq(atomic_load(&sh.src.frees), 1);
	ck_assert_uint_eq(atomic_load(&sh.queue_failures), 0);
	th_reply_free(&r);
	mhdgz_free(gz);
	free(data);
}
END_TEST

#define CC_THREADS 4
#define CC_REQUESTS 4

/* run_clients modes. */
enum cc_mode {
	CC_MIXED,    /* gzip, then identity for the last request */
	CC_IDENTITY, /* identity only */
	CC_GZIP      /* gzip only */
};

struct cc_client {
	pthread_t t;
	enum cc_mode mode;
	uint16_t port;
	const uint8_t *data;
	size_t len;
	unsigned int ok, bad, failed;
	char why[160];
};

/* One client thread: CC_REQUESTS on one keep-alive handle, gzip except
 * the last, each verified; results for the main thread to assert. */
static void *
cc_main(void *arg)
{
	struct cc_client *c = arg;
	CURL *h = curl_easy_init();
	struct th_reply r;
	int i;

	th_reply_init(&r);
	for (i = 0; i < CC_REQUESTS && h; i++) {
		bool gz = c->mode == CC_GZIP || (c->mode == CC_MIXED && i < CC_REQUESTS - 1);
		uint8_t *dec = NULL;
		size_t dec_len = 0;

		th_fetch(h, c->port, "/", gz ? TH_GZIP : 0, &r);
		if (r.rc != CURLE_OK || r.status != 200) {
			c->failed++;
			snprintf(c->why, sizeof c->why, "request %d: %s, status %ld", i,
				 curl_easy_strerror(r.rc), r.status);
			continue;
		}
		if (gz) {
			const char *ce = th_header(&r, "Content-Encoding", NULL);

			if (!ce || strcmp(ce, "gzip") != 0 ||
			    tu_gunzip(r.body, r.body_len, &dec, &dec_len) != 0 ||
			    dec_len != c->len || memcmp(dec, c->data, c->len) != 0) {
				c->bad++;
				snprintf(c->why, sizeof c->why,
					 "request %d: gzip body wrong (%zu coded, %zu decoded)", i,
					 r.body_len, dec_len);
			} else {
				c->ok++;
			}
			free(dec);
		} else if (r.body_len != c->len || memcmp(r.body, c->data, c->len) != 0) {
			c->bad++;
			snprintf(c->why, sizeof c->why, "request %d: identity body wrong", i);
		} else {
			c->ok++;
		}
	}
	th_reply_free(&r);
	if (h)
		curl_easy_cleanup(h);
	return NULL;
}

static void
run_clients(uint16_t port, const uint8_t *data, size_t len, enum cc_mode mode)
{
	struct cc_client c[CC_THREADS];
	int i;

	memset(c, 0, sizeof c);
	for (i = 0; i < CC_THREADS; i++) {
		c[i].port = port;
		c[i].mode = mode;
		c[i].data = data;
		c[i].len = len;
		ck_assert_int_eq(pthread_create(&c[i].t, NULL, cc_main, &c[i]), 0);
	}
	for (i = 0; i < CC_THREADS; i++)
		pthread_join(c[i].t, NULL);
	for (i = 0; i < CC_THREADS; i++)
		ck_assert_msg(c[i].ok == CC_REQUESTS && c[i].bad == 0 && c[i].failed == 0,
			      "client %d: %u ok, %u wrong, %u failed: %s", i, c[i].ok, c[i].bad,
			      c[i].failed, c[i].why);
}

/* Concurrently, on a thread pool of 4: every body exact. */
START_TEST(shared_concurrent)
{
	bool known = _i;
	size_t len = 600 * KIB + 1;
	uint8_t *data = tu_payload(len, TU_JSON, 203);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct shared sh;

	shared_make(&sh, gz, data, len, known);
	th_start(&s, gz, 4, shared_route, &sh);
	run_clients(s.port, data, len, CC_MIXED);
	ck_assert(th_wait(th_pool_back_pred, gz, RELEASE_WAIT_MS));
	th_stop(&s);
	ck_assert_uint_eq(atomic_load(&sh.src.frees), 0);
	MHD_destroy_response(sh.r);
	ck_assert_uint_eq(atomic_load(&sh.src.frees), 1);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/*
 * Drop-in parity with MHD_create_response_from_callback: libmicrohttpd
 * calls the content reader of one response under that response's mutex,
 * so a reader shared by concurrent connections never runs twice at once
 * (readers that keep state, such as a FILE * they seek, rely on it). The
 * identity phase shows libmicrohttpd's behaviour on this machine (and that
 * the clients really ran on several daemon threads); the gzip streams of
 * the same response must keep it.
 */
START_TEST(shared_reader_calls_serialized)
{
	size_t len = 256 * KIB;
	uint8_t *data = tu_payload(len, TU_TEXT, 205);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct shared sh;
	unsigned int id_max, id_threads, gz_max, gz_threads, i;

	shared_make(&sh, gz, data, len, false);
	sh.read_sleep_us = 200;
	th_start(&s, gz, 4, shared_route, &sh);
	/* Which worker accepts a connection is up to the kernel: repeat a
	 * phase (at most 5 times) until two workers took part. */
	for (i = 0; i < 5 && atomic_load(&sh.nthreads) < 2; i++)
		run_clients(s.port, data, len, CC_IDENTITY);
	id_max = atomic_load(&sh.src.max_inside);
	id_threads = atomic_load(&sh.nthreads);
	atomic_store(&sh.src.max_inside, 0);
	atomic_store(&sh.nthreads, 0);
	for (i = 0; i < 8; i++)
		atomic_store(&sh.tids[i], 0);
	for (i = 0; i < 5 && atomic_load(&sh.nthreads) < 2; i++)
		run_clients(s.port, data, len, CC_GZIP);
	gz_max = atomic_load(&sh.src.max_inside);
	gz_threads = atomic_load(&sh.nthreads);
	th_stop(&s);
	MHD_destroy_response(sh.r);
	fprintf(stderr,
		"shared_reader_calls_serialized: identity: %u daemon threads, at most %u calls at "
		"once; gzip: %u threads, at most %u at once\n",
		id_threads, id_max, gz_threads, gz_max);
	if (id_threads < 2 || gz_threads < 2) {
		fprintf(stderr, "shared_reader_calls_serialized: inconclusive (one daemon thread "
				"served every client)\n");
		mhdgz_free(gz);
		free(data);
		return;
	}
	ck_assert_msg(id_max == 1, "libmicrohttpd itself ran the reader %u times at once", id_max);
	ck_assert_msg(gz_max == 1,
		      "gzip streams ran the reader of one response %u times at once "
		      "(libmicrohttpd serialises reader calls per response)",
		      gz_max);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/* ===================================================================== */
/*                     Clients that go away mid-stream                   */
/* ===================================================================== */

static const struct {
	enum mhdgz_backend be;
	int level;
} dc_backends[] = {
	{MHDGZ_BACKEND_ZLIB, 6},
	{MHDGZ_BACKEND_DEFAULT, 0}, /* libdeflate: streams go to zlib */
	{MHDGZ_BACKEND_ISAL, 1},
};

static bool
live_back_to(void *cls)
{
	return tu_alloc_live() == *(int64_t *)cls;
}

/*
 * The client closes after N bytes of a long gzip stream (1 byte, 64 KiB,
 * 1 MiB). _i / 2 selects the backend; _i % 2:
 *  0: pooled: each time the compressor returns to the pool, which the
 *     pool counters show (one get per stream, every compressor created
 *     idle again);
 *  1: MHDGZ_F_NO_POOL with the counting allocator: each compressor is
 *     freed, so the library's live blocks return to their level (a proof
 *     independent of the counters).
 * Either way the free callback runs exactly once per response, never
 * before the reader's last call, and nothing more after the daemon stops
 * and the handler is freed. Counter mismatches are collected and reported
 * at the end, so the teardown (and the sanitizers' leak check) still runs.
 */
START_TEST(client_disconnects)
{
	static const size_t abort_after[] = {1, 64 * KIB, 1 * MIB};
	size_t be_i = (size_t)_i / 2, dlen = 256 * KIB, i;
	bool no_pool = _i % 2;
	uint8_t *data;
	struct mhdgz_options o;
	struct mhdgz *gz = NULL;
	struct th_server s = {0};
	struct th_reply r;
	struct lfix f;
	struct mhdgz_stats st;
	int64_t live0 = 0;
	char why[256] = "";

	if (!mhdgz_backend_available(dc_backends[be_i].be))
		return;
	if (no_pool)
		tu_alloc_install(0);
	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.backend = dc_backends[be_i].be;
	o.level = dc_backends[be_i].level;
	o.flags = no_pool ? MHDGZ_F_NO_POOL : 0;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	data = tu_payload(dlen, TU_TEXT, 301);
	/* 256 MiB at most: the stream outlasts any client here, and ends by
	 * itself if a disconnect were never noticed. */
	lfix_init(&f, data, dlen, 256ull * MIB, false, 16 * KIB, "text/plain");
	th_start(&s, gz, 0, live_route, &f);
	th_reply_init(&r);
	live0 = tu_alloc_live();
	for (i = 0; i < N_ELEMS(abort_after); i++) {
		r.abort_after = abort_after[i];
		th_fetch(NULL, s.port, "/", TH_GZIP, &r);
		ck_assert_msg(r.rc == CURLE_WRITE_ERROR, "abort after %zu: %s", abort_after[i],
			      curl_easy_strerror(r.rc));
		ck_assert_str_eq(th_header(&r, "Content-Encoding", NULL), "gzip");
		ck_assert_msg(th_wait(all_freed, &f, RELEASE_WAIT_MS),
			      "abort after %zu: the free callback ran %u times for %u responses",
			      abort_after[i], atomic_load(&f.frees), atomic_load(&f.nresp));
		if (no_pool) {
			ck_assert_msg(th_wait(live_back_to, &live0, RELEASE_WAIT_MS),
				      "abort after %zu: %lld library blocks live, %lld before",
				      abort_after[i], (long long)tu_alloc_live(),
				      (long long)live0);
			continue;
		}
		ck_assert_msg(th_wait(th_pool_back_pred, gz, RELEASE_WAIT_MS),
			      "abort after %zu: compressor not back in the pool", abort_after[i]);
		st = th_stats(gz);
		if (!why[0] && (st.pool_gets != i + 1 || st.pool_idle < 1))
			snprintf(why, sizeof why,
				 "abort after %zu: pool_gets %llu after %zu streams (misses %llu, "
				 "idle %llu)",
				 abort_after[i], (unsigned long long)st.pool_gets, i + 1,
				 (unsigned long long)st.pool_misses,
				 (unsigned long long)st.pool_idle);
	}
	ck_assert_uint_eq(atomic_load(&f.after_free), 0);
	th_stop(&s);
	expect_freed_once(&f);
	ck_assert_uint_eq(atomic_load(&f.frees), N_ELEMS(abort_after));
	mhdgz_free(gz);
	ck_assert_uint_eq(atomic_load(&f.frees), N_ELEMS(abort_after));
	if (no_pool) {
		ck_assert_int_eq(tu_alloc_live(), 0);
		tu_alloc_uninstall();
	}
	th_reply_free(&r);
	free(data);
	ck_assert_msg(!why[0], "compressor pool counters: %s", why);
}
END_TEST

/* The daemon is stopped while a client is still reading a stream: the
 * stream is abandoned, the compressor goes back before mhdgz_free, the
 * free callback runs once. */
struct stop_mid {
	uint16_t port;
	struct th_reply r;
};

static void *
stop_mid_client(void *arg)
{
	struct stop_mid *m = arg;

	th_fetch(NULL, m->port, "/", TH_GZIP, &m->r);
	return NULL;
}

START_TEST(daemon_stops_mid_stream)
{
	size_t dlen = 128 * KIB;
	uint8_t *data = tu_payload(dlen, TU_TEXT, 303);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_ZLIB, 6, 0);
	struct th_server s = {0};
	struct lfix f;
	struct stop_mid m;
	pthread_t t;

	lfix_init(&f, data, dlen, 256ull * MIB, false, 16 * KIB, "text/plain");
	f.stop_every = 32 * KIB;
	f.stop_ms = 1000000; /* stalls at 32 KiB: the stream cannot finish */
	th_start(&s, gz, 0, live_route, &f);
	th_reply_init(&m.r);
	m.port = s.port;
	ck_assert_int_eq(pthread_create(&t, NULL, stop_mid_client, &m), 0);
	usleep(300 * 1000);
	ck_assert_uint_eq(atomic_load(&f.nresp), 1);
	th_stop(&s);
	pthread_join(t, NULL);
	ck_assert(m.r.rc != CURLE_OK);
	expect_freed_once(&f);
	ck_assert(th_pool_back_pred(gz));
	mhdgz_free(gz);
	th_reply_free(&m.r);
	free(data);
}
END_TEST

/* ===================================================================== */
/*                               HEAD                                    */
/* ===================================================================== */

/* HEAD of a gzip stream (queued with its method): the GET headers
 * (Content-Encoding, no Content-Length, Vary, weak ETag), no body, no
 * reader call (a HEAD never runs the application's reader, so the gzip
 * length is not known: no framing field, and the connection closes, as
 * libmicrohttpd 0.9.75 can frame a HEAD of unknown length no other way),
 * and the compressor back in the pool. _i: known size. */
START_TEST(head_like_get)
{
	static const char *const same[] = {"Content-Encoding", "Content-Length", "Vary", "ETag",
					   "Content-Type"};
	bool known = _i;
	size_t len = 300 * KIB + 7, i;
	uint8_t *data = tu_payload(len, TU_TEXT, 401);
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = {0};
	struct th_reply get, head;
	struct lfix f;
	uint64_t calls_before;

	lfix_init(&f, data, len, len, known, 8192, "text/html; charset=utf-8");
	f.etag = "\"h1\"";
	th_start(&s, gz, 0, live_route, &f);
	th_reply_init(&get);
	th_reply_init(&head);
	th_fetch(NULL, s.port, "/", TH_GZIP, &get);
	expect_gzip_body(&get, data, len);
	expect_all_released(&s, &f);
	calls_before = atomic_load(&f.calls);
	th_fetch(NULL, s.port, "/", TH_GZIP | TH_HEAD, &head);
	ck_assert_msg(head.rc == CURLE_OK, "HEAD: %s", curl_easy_strerror(head.rc));
	ck_assert_int_eq(head.status, 200);
	ck_assert_uint_eq(head.body_len, 0);
	for (i = 0; i < N_ELEMS(same); i++) {
		const char *g = th_header(&get, same[i], NULL), *h = th_header(&head, same[i], NULL);

		ck_assert_msg((g == NULL) == (h == NULL) && (!g || strcmp(g, h) == 0),
			      "%s: GET \"%s\", HEAD \"%s\"", same[i], g ? g : "(none)",
			      h ? h : "(none)");
	}
	ck_assert_str_eq(th_header(&head, "ETag", NULL), "W/\"h1\"");
	ck_assert_ptr_null(th_header(&head, "Transfer-Encoding", NULL));
	ck_assert_str_eq(th_header(&head, "Connection", NULL), "close");
	ck_assert(th_has_token(th_header(&head, "Vary", NULL), "Accept-Encoding"));
	expect_all_released(&s, &f);
	ck_assert_msg(atomic_load(&f.calls) == calls_before,
		      "HEAD called the reader %llu times",
		      (unsigned long long)(atomic_load(&f.calls) - calls_before));
	/* Identity HEAD: Content-Length of the known size. */
	th_fetch(NULL, s.port, "/", TH_HEAD, &head);
	ck_assert_int_eq(head.rc, CURLE_OK);
	ck_assert(th_header(&head, "Content-Encoding", NULL) == NULL);
	if (known) {
		char num[32];

		snprintf(num, sizeof num, "%zu", len);
		ck_assert_str_eq(th_header(&head, "Content-Length", NULL), num);
	}
	expect_all_released(&s, &f);
	th_stop(&s);
	expect_freed_once(&f);
	th_reply_free(&get);
	th_reply_free(&head);
	mhdgz_free(gz);
	free(data);
}
END_TEST

/* ===================================================================== */
/*                      1 GiB in bounded memory                          */
/* ===================================================================== */

#define BIG_LEN (1024ull * MIB)
#define BIG_PAGE 4096u
#define RSS_LIMIT_KIB (16u * 1024u)

/* Repeating text with a counter: page p of the stream is a fixed text with
 * p written in its first 16 bytes. Cheap, compressible, not trivially. */
struct big {
	uint8_t page[BIG_PAGE];
	uint64_t produced;
	uLong crc;
	uint64_t rss0_kib, rss_max_kib;
	uint64_t calls;
	unsigned int bad_pos;
	_Atomic unsigned int frees;
	/* client */
	uLong crc_client;
	uint64_t got;
};

static ssize_t
big_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct big *b = cls;
	size_t n = 0;

	if (pos != b->produced)
		b->bad_pos++;
	if (pos >= BIG_LEN)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (max > BIG_LEN - pos)
		max = (size_t)(BIG_LEN - pos);
	while (n < max) {
		uint64_t p = (pos + n) / BIG_PAGE;
		size_t off = (size_t)((pos + n) % BIG_PAGE), k = BIG_PAGE - off;
		char tag[17];

		if (k > max - n)
			k = max - n;
		snprintf(tag, sizeof tag, "%016llx", (unsigned long long)p);
		memcpy(b->page, tag, 16);
		memcpy(buf + n, b->page + off, k);
		n += k;
	}
	b->crc = crc32(b->crc, (const Bytef *)buf, (uInt)n);
	b->produced += n;
	if (b->calls++ % 256 == 0) {
		uint64_t rss = th_rss_kib();

		if (rss > b->rss_max_kib)
			b->rss_max_kib = rss;
	}
	return (ssize_t)n;
}

static void
big_free(void *cls)
{
	struct big *b = cls;

	atomic_fetch_add(&b->frees, 1);
}

static void
big_on_data(struct th_reply *r, const uint8_t *p, size_t n)
{
	struct big *b = r->cls;

	b->crc_client = crc32(b->crc_client, p, (uInt)n);
	b->got += n;
}

static enum MHD_Result
big_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct big *b = s->cls;
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)url;
	(void)method;
	r = mhdgz_response_from_callback(s->gz, MHD_SIZE_UNKNOWN, 64 * KIB, big_read, b,
					 big_free);
	ck_assert(r != NULL);
	ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain") ==
		  MHD_YES);
	ret = mhdgz_queue_response(s->gz, c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

START_TEST(one_gib_bounded_memory)
{
	struct mhdgz *gz;
	struct th_server s = {0};
	struct th_reply r;
	struct big *b;
	size_t i;
	uint64_t t0, ms;

	if (TH_SANITIZED) {
		fprintf(stderr, "one_gib_bounded_memory: skipped under a sanitizer\n");
		return;
	}
	gz = th_gz_new(MHDGZ_BACKEND_ZLIB, 1, 0);
	b = calloc(1, sizeof *b);
	ck_assert(b != NULL);
	for (i = 0; i < BIG_PAGE; i++)
		b->page[i] = (uint8_t)"the quick brown fox jumps over the lazy dog; "[i % 45];
	b->page[BIG_PAGE - 1] = '\n';
	b->crc = crc32(0L, Z_NULL, 0);
	b->crc_client = crc32(0L, Z_NULL, 0);
	th_start(&s, gz, 0, big_route, b);
	th_reply_init(&r);
	r.discard = true;
	r.on_data = big_on_data;
	r.cls = b;
	b->rss0_kib = th_rss_kib();
	ck_assert(b->rss0_kib > 0);
	t0 = th_now_ms();
	th_fetch(NULL, s.port, "/", TH_DECODE, &r);
	ms = th_now_ms() - t0;
	fprintf(stderr,
		"one_gib_bounded_memory: %llu ms, RSS %llu KiB before, at most %llu KiB during\n",
		(unsigned long long)ms, (unsigned long long)b->rss0_kib,
		(unsigned long long)b->rss_max_kib);
	ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
	ck_assert_str_eq(th_header(&r, "Content-Encoding", NULL), "gzip");
	ck_assert_uint_eq(b->bad_pos, 0);
	ck_assert_uint_eq(b->produced, BIG_LEN);
	ck_assert_uint_eq(b->got, BIG_LEN);
	ck_assert_msg(b->crc_client == b->crc, "CRC-32 %08lx received, %08lx produced",
		      b->crc_client, b->crc);
	ck_assert_msg(b->rss_max_kib < b->rss0_kib + RSS_LIMIT_KIB,
		      "RSS grew by %llu KiB while streaming 1 GiB",
		      (unsigned long long)(b->rss_max_kib - b->rss0_kib));
	th_stop(&s);
	ck_assert_uint_eq(atomic_load(&b->frees), 1);
	ck_assert(th_pool_back_pred(gz));
	th_reply_free(&r);
	free(b);
	mhdgz_free(gz);
}
END_TEST


/* ===================================================================== */
/*                 Allocation failures before the headers                */
/* ===================================================================== */

/* Responses made by alloc_route; creation may fail under injection. */
struct afix {
	struct lfix lf;
	_Atomic unsigned int made;   /* responses created */
	_Atomic unsigned int refused; /* creations that failed (connection closed) */
};

static enum MHD_Result
alloc_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct afix *a = s->cls;
	struct lfix *f = &a->lf;
	unsigned int k = atomic_load(&f->nresp);
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)url;
	(void)method;
	ck_assert(k < MAX_RESP);
	f->rs[k].f = f;
	f->rs[k].stop_pos = UINT64_MAX; /* no stop begun */
	r = mhdgz_response_from_callback(s->gz, f->known ? f->len : MHD_SIZE_UNKNOWN,
					 f->block_size, live_read, &f->rs[k], live_free);
	if (!r) {
		atomic_fetch_add(&a->refused, 1);
		return MHD_NO;
	}
	atomic_fetch_add(&f->nresp, 1);
	atomic_fetch_add(&a->made, 1);
	ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain") ==
		  MHD_YES);
	ret = mhdgz_queue_response(s->gz, c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static bool
alloc_settled(void *cls)
{
	struct afix *a = cls;

	return atomic_load(&a->lf.frees) >= atomic_load(&a->lf.nresp);
}

/*
 * Fail the k-th allocation of the library during one request, for every k
 * until a request needs no more: before the headers are committed any
 * failure must give the identity response with the whole body (style rule
 * 9), or, when the response object itself could not be made, no response
 * (the application's route then refuses). Never a broken gzip body, never
 * a leak: the live-block count returns to its level between requests.
 * With MHDGZ_F_NO_POOL every stream creates its compressor, so the
 * compressor's own allocations (zlib's, ISA-L's) fail in turn too.
 */
START_TEST(alloc_failures_fall_back)
{
	enum mhdgz_backend be = _i ? MHDGZ_BACKEND_ISAL : MHDGZ_BACKEND_ZLIB;
	size_t len = 300 * KIB + 1, k;
	uint8_t *data;
	struct mhdgz_options o;
	struct mhdgz *gz = NULL;
	struct th_server s = {0};
	struct th_reply r;
	struct afix *a;
	int64_t live0;
	unsigned int fired = 0, gzipped = 0, identity = 0, refused = 0;

	if (!mhdgz_backend_available(be))
		return;
	data = tu_payload(len, TU_TEXT, 501);
	a = calloc(1, sizeof *a);
	ck_assert(a != NULL);
	lfix_init(&a->lf, data, len, len, _i == 0, 8192, "text/plain");
	tu_alloc_install(0);
	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.backend = be;
	o.flags = MHDGZ_F_NO_POOL;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	th_start(&s, gz, 0, alloc_route, a);
	th_reply_init(&r);
	live0 = tu_alloc_live();
	for (k = 1; k < MAX_RESP; k++) {
		unsigned int refused0 = atomic_load(&a->refused);
		const char *ce;

		tu_alloc_fail_at(k);
		th_fetch(NULL, s.port, "/", TH_GZIP, &r);
		ck_assert_msg(th_wait(alloc_settled, a, RELEASE_WAIT_MS),
			      "fail at %zu: the response was not released", k);
		ck_assert_msg(th_wait(th_pool_back_pred, gz, RELEASE_WAIT_MS),
			      "fail at %zu: compressor not returned", k);
		ce = th_header(&r, "Content-Encoding", NULL);
		if (atomic_load(&a->refused) > refused0) {
			refused++;
			ck_assert(r.rc != CURLE_OK);
		} else if (ce) {
			gzipped++;
			expect_gzip_body(&r, data, len);
		} else {
			identity++;
			ck_assert_msg(r.rc == CURLE_OK, "fail at %zu: identity transfer: %s", k,
				      curl_easy_strerror(r.rc));
			ck_assert_msg(r.body_len == len && memcmp(r.body, data, len) == 0,
				      "fail at %zu: identity body wrong (%zu bytes)", k, r.body_len);
		}
		ck_assert_msg(tu_alloc_live() == live0,
			      "fail at %zu: %lld blocks live after the request, %lld before", k,
			      (long long)tu_alloc_live(), (long long)live0);
		if (!tu_alloc_failed())
			break; /* the request needed fewer than k allocations */
		fired++;
	}
	tu_alloc_fail_at(0);
	fprintf(stderr,
		"alloc_failures_fall_back(%s): %u injected failures: %u refused, %u identity, %u "
		"gzip\n",
		mhdgz_backend_name(be), fired, refused, identity, gzipped);
	ck_assert_msg(k < MAX_RESP, "more than %d allocations per request", MAX_RESP - 1);
	ck_assert_uint_ge(fired, 3);
	ck_assert_uint_ge(identity, 1);
	ck_assert_uint_eq(atomic_load(&a->lf.after_free), 0);
	th_stop(&s);
	expect_freed_once(&a->lf);
	mhdgz_free(gz);
	ck_assert_int_eq(tu_alloc_live(), 0);
	tu_alloc_uninstall();
	th_reply_free(&r);
	free(a);
	free(data);
}
END_TEST

/* ===================================================================== */

Suite *
streaming_live_suite(void)
{
	Suite *s = suite_create("streaming_live");
	TCase *tc;

	tc = tcase_create("reader");
	tcase_set_timeout(tc, CK_CASE_TIMEOUT);
	tcase_add_loop_test(tc, reader_zero_counted, 0, 4);
	tcase_add_test(tc, reader_zero_timed);
	tcase_add_loop_test(tc, reader_error, 0, 4);
	suite_add_tcase(s, tc);

	tc = tcase_create("latency");
	tcase_set_timeout(tc, CK_CASE_TIMEOUT);
	tcase_add_loop_test(tc, events_arrive_one_by_one, 0, (int)N_ELEMS(ev_cases));
	tcase_add_loop_test(tc, flush_policy, 0, (int)(3 * N_ELEMS(fp_backends)));
	tcase_add_test(tc, low_latency_api);
	tcase_add_test(tc, fd_ownership);
	suite_add_tcase(s, tc);

	tc = tcase_create("shared");
	tcase_set_timeout(tc, CK_CASE_TIMEOUT);
	tcase_add_loop_test(tc, shared_sequential, 0, 2);
	tcase_add_loop_test(tc, shared_concurrent, 0, 2);
	tcase_add_test(tc, shared_reader_calls_serialized);
	suite_add_tcase(s, tc);

	tc = tcase_create("lifetime");
	tcase_set_timeout(tc, CK_CASE_TIMEOUT);
	tcase_add_loop_test(tc, client_disconnects, 0, (int)(2 * N_ELEMS(dc_backends)));
	tcase_add_test(tc, daemon_stops_mid_stream);
	tcase_add_loop_test(tc, head_like_get, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("alloc");
	tcase_set_timeout(tc, CK_CASE_TIMEOUT);
	tcase_add_loop_test(tc, alloc_failures_fall_back, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("memory");
	tcase_set_timeout(tc, CK_CASE_TIMEOUT);
	tcase_add_test(tc, one_gib_bounded_memory);
	suite_add_tcase(s, tc);
	return s;
}
