/* check_hnd_stream_latency.c: low-latency streams through the handler: SSE events delivered one by one, flush policy, the low-latency and file-descriptor API (suite streaming_live, case latency). */
#define _GNU_SOURCE /* memmem */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "check_suites.h"
#include "info.h"
#include "stream_harness.h"
#include "testutil.h"

/* How long the SSE server waits for the client to confirm an event before
 * it gives up and produces the next one anyway (counted as late), in
 * milliseconds. Far above any scheduling delay, so only buffering by the
 * server makes an event late. */
#define EVENT_WAIT_MS 3000

#define SSE_EVENTS 6

/*
 * An event stream whose reader produces event k only after the client has
 * received event k-1 (decoded, through libcurl's gzip decoder): the client
 * posts a semaphore per complete event, the reader waits for it at most
 * EVENT_WAIT_MS. A server that buffers event k-1 until more data comes
 * makes every wait time out. The bulk test uses the same route with
 * bulk_read.
 */
struct sse {
	struct th_src src; /* frees */
	ssize_t (*read)(void *cls, uint64_t pos, char *buf, size_t max);
	unsigned int next; /* next event to produce (daemon thread only) */
	unsigned int late; /* waits that timed out */
	unsigned int seen; /* complete events received (client) */
	size_t scan;       /* client: decoded bytes scanned */
	size_t block_size;
	size_t event_pad; /* bytes of hex padding per event (0: a short event) */
	sem_t got;
	char *expect; /* every event, concatenated */
	size_t expect_len;
	const char *ctype;
	const char *cache_control; /* NULL: none */
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

/* Wait at most EVENT_WAIT_MS for the client to confirm the last event. */
static void
sse_wait(struct sse *e)
{
	struct timespec ts;
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

static ssize_t
sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sse *e = cls;
	size_t n;

	(void)pos;
	atomic_fetch_add(&e->src.calls, 1);
	if (e->next == SSE_EVENTS)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (e->next > 0)
		sse_wait(e);
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
	e->chunks_done = 0;
	r = mhdgz_response_from_callback(s->gz, MHD_SIZE_UNKNOWN, e->block_size, e->read, e,
					 th_src_free);
	if (!r) {
		atomic_fetch_add(&e->create_failures, 1);
		return MHD_NO;
	}
	ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, e->ctype) == MHD_YES);
	if (e->cache_control)
		ck_assert(MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL,
						  e->cache_control) == MHD_YES);
	if (e->set_low_latency)
		e->ll_rc = mhdgz_response_set_flags(s->gz, r, MHDGZ_RESPONSE_LOW_LATENCY);
	ret = mhdgz_queue_response(s->gz, c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* A stream of ctype made by read, block_size bytes per block; expect
 * (the bytes the client must get) has room for expect_cap bytes. */
static struct sse *
sse_new(ssize_t (*read)(void *, uint64_t, char *, size_t), const char *ctype, size_t block_size,
	size_t expect_cap)
{
	struct sse *e = calloc(1, sizeof *e);

	ck_assert(e != NULL);
	ck_assert_int_eq(sem_init(&e->got, 0, 0), 0);
	e->read = read;
	e->ctype = ctype;
	e->block_size = block_size;
	e->expect = malloc(expect_cap);
	ck_assert(e->expect != NULL);
	return e;
}

/* After the stream: made once (low latency set without error if asked),
 * released once, its compressor back; then free everything. */
static void
sse_end(struct st_test *t, struct sse *e)
{
	ck_assert_uint_eq(atomic_load(&e->create_failures), 0);
	ck_assert_int_eq(e->ll_rc, 0);
	th_stop(&t->s);
	ck_assert_uint_eq(atomic_load(&e->src.frees), 1);
	ck_assert(th_pool_back_pred(t->gz));
	st_end(t);
	sem_destroy(&e->got);
	free(e->expect);
	free(e);
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
	{ "text/event-stream", false, MHDGZ_BACKEND_DEFAULT, 0, 0 },
	{ "Text/Event-Stream; charset=utf-8", false, MHDGZ_BACKEND_DEFAULT, 0, 0 },
	{ "text/plain; charset=utf-8", true, MHDGZ_BACKEND_DEFAULT, 0, 0 },
	{ "application/x-ndjson", true, MHDGZ_BACKEND_DEFAULT, 0, 0 },
	{ "text/event-stream", false, MHDGZ_BACKEND_ZLIB, 9, 0 },
	{ "text/event-stream", false, MHDGZ_BACKEND_ISAL, 1, 0 },
	{ "text/event-stream", false, MHDGZ_BACKEND_ISAL, 4, 0 },
	{ "text/event-stream", false, MHDGZ_BACKEND_DEFAULT, 0, 100 * KIB },
	{ "text/event-stream", false, MHDGZ_BACKEND_ISAL, 2, 100 * KIB },
	{ "text/plain", true, MHDGZ_BACKEND_ZLIB, 1, 100 * KIB },
};

/* Each event through libcurl's gzip decoder before the next is made. */
START_TEST(events_arrive_one_by_one)
{
	struct st_test t;
	struct sse *e;
	size_t block_size;
	unsigned int k;
	const char *ce;

	if (!tu_backend_available(ev_cases[_i].be))
		return;
	block_size = ev_cases[_i].pad ? ev_cases[_i].pad + 4096 : 4096;
	e = sse_new(sse_read, ev_cases[_i].ctype, block_size, SSE_EVENTS * block_size);
	e->cache_control = "no-cache";
	e->set_low_latency = ev_cases[_i].ll;
	e->event_pad = ev_cases[_i].pad;
	for (k = 0; k < SSE_EVENTS; k++) {
		size_t n = sse_event(e->expect + e->expect_len, e->block_size, k, e->event_pad);

		ck_assert(n > 0);
		e->expect_len += n;
	}
	st_begin(&t, st_gz_new(ev_cases[_i].be, ev_cases[_i].level, 0), NULL, 0, sse_route, e);
	t.r.on_data = sse_on_data;
	t.r.cls = e;
	th_fetch(NULL, t.s.port, "/events", TH_DECODE, &t.r);
	ck_assert_msg(t.r.rc == CURLE_OK, "%s", curl_easy_strerror(t.r.rc));
	ce = th_header(&t.r, "Content-Encoding", NULL);
	ck_assert_msg(ce && strcasecmp(ce, "gzip") == 0, "event stream not gzip-coded: %s",
		      ce ? ce : "(none)");
	ck_assert_msg(e->late == 0,
		      "%u of %u events did not reach the client before the next was produced "
		      "(buffered, not sync-flushed)",
		      e->late, SSE_EVENTS - 1);
	ck_assert_uint_eq(e->seen, SSE_EVENTS);
	ck_assert_uint_eq(t.r.body_len, e->expect_len);
	ck_assert(memcmp(t.r.body, e->expect, e->expect_len) == 0);
	sse_end(&t, e);
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

static const enum mhdgz_backend fp_backends[] = {
	MHDGZ_BACKEND_ZLIB,
	MHDGZ_BACKEND_DEFAULT,
	MHDGZ_BACKEND_ISAL,
};

START_TEST(flush_policy)
{
	int mode = _i / (int)N_ELEMS(fp_backends);
	enum mhdgz_backend be = fp_backends[_i % (int)N_ELEMS(fp_backends)];
	struct st_test t;
	struct sse *e;
	size_t i, want_len = 0;

	if (!tu_backend_available(be))
		return;
	e = sse_new(bulk_read, mode == 2 ? "text/event-stream" : "text/plain", 4096,
		    BULK_CHUNKS * (sizeof BULK_LINE - 1));
	for (i = 0; i < BULK_CHUNKS; i++) {
		memcpy(e->expect + want_len, BULK_LINE, sizeof BULK_LINE - 1);
		want_len += sizeof BULK_LINE - 1;
	}
	e->nchunk_events = BULK_CHUNKS;
	e->set_low_latency = mode == 1;
	st_begin(&t, th_gz_new(be, 0, 0), NULL, 0, sse_route, e);
	st_get(&t, TH_GZIP);
	expect_gzip_body(&t.r, (const uint8_t *)e->expect, want_len);
	fprintf(stderr, "flush_policy(%s, %s): %zu gzip bytes for %zu bytes in %u chunks\n",
		tu_backend_name(be), mode == 0 ? "bulk" : "low-latency", t.r.body_len, want_len,
		BULK_CHUNKS);
	if (mode == 0)
		ck_assert_msg(t.r.body_len < 4000,
			      "bulk stream: %zu gzip bytes for %zu bytes of one repeated line "
			      "(flushed per chunk?)",
			      t.r.body_len, want_len);
	else
		ck_assert_msg(t.r.body_len >= BULK_CHUNKS * 5,
			      "low-latency stream: %zu gzip bytes for %u chunks (not flushed per "
			      "chunk)",
			      t.r.body_len, BULK_CHUNKS);
	sse_end(&t, e);
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

/* MHDGZ_RESPONSE_LOW_LATENCY (mhdgz_response_set_flags): 0 for streaming responses of the
 * handler, MHDGZ_EINVAL for anything else. */
START_TEST(low_latency_api)
{
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct mhdgz *other = th_gz_new(MHDGZ_BACKEND_ZLIB, 0, 0);
	struct th_src src = { 0 };
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
	ck_assert_int_eq(mhdgz_response_set_flags(gz, cb, MHDGZ_RESPONSE_LOW_LATENCY), 0);
	ck_assert_int_eq(mhdgz_response_set_flags(gz, fdr, MHDGZ_RESPONSE_LOW_LATENCY), 0);
	ck_assert_int_eq(mhdgz_response_set_flags(gz, buf, MHDGZ_RESPONSE_LOW_LATENCY),
			 MHDGZ_EINVAL);
	ck_assert_int_eq(mhdgz_response_set_flags(gz, plain, MHDGZ_RESPONSE_LOW_LATENCY),
			 MHDGZ_EINVAL);
	ck_assert_int_eq(mhdgz_response_set_flags(gz, cb_other, MHDGZ_RESPONSE_LOW_LATENCY),
			 MHDGZ_EINVAL);
	ck_assert_int_eq(mhdgz_response_set_flags(gz, NULL, MHDGZ_RESPONSE_LOW_LATENCY),
			 MHDGZ_EINVAL);
	ck_assert_int_eq(mhdgz_response_set_flags(NULL, cb, MHDGZ_RESPONSE_LOW_LATENCY),
			 MHDGZ_EINVAL);
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
	static const struct {
		bool null_gz;
		uint64_t size;
		uint64_t offset;
		const char *why;
	} fail[] = {
		{ true, 3, 0, "a NULL handler" },
		{ false, MHD_SIZE_UNKNOWN, 0, "an unknown size" },
		{ false, 3, (uint64_t)INT64_MAX, "an offset out of range" },
	};
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	size_t i;

	for (i = 0; i < N_ELEMS(fail); i++) {
		int fd = th_temp_file("abc", 3);

		if (fail[i].null_gz)
			ck_assert(mhdgz_response_from_fd(NULL, (size_t)fail[i].size, fd) == NULL);
		else
			ck_assert(mhdgz_response_from_fd_at_offset64(gz, fail[i].size, fd,
								     fail[i].offset) == NULL);
		ck_assert_msg(fcntl(fd, F_GETFD) != -1, "fd closed after %s", fail[i].why);
		ck_assert_int_eq(close(fd), 0);
	}
	mhdgz_free(gz);
}
END_TEST

/* zstd and br streams: each event through libcurl's zstd or
 * brotli decoder before the next is made (a zstd block flush, a brotli
 * BROTLI_OPERATION_FLUSH per event); then a bulk stream of 2000 chunks
 * through the reference decoder, flushed per chunk only when low-latency.
 * _i: 0 zstd, 1 br; _i / 2: the same, 2000 bulk chunks. */
START_TEST(events_coded)
{
	static const char *const codings[] = { "zstd", "br" };
	const char *coding = codings[_i % 2];
	struct mhdgz_options o = { .size = sizeof o, .codings = "zstd, br, gzip" };
	struct st_test t;
	struct sse *e;
	unsigned int k;
	uint8_t *dec = NULL;
	size_t dec_len = 0, i;

	if (!tu_coding_available(MHDGZ_CODING_ZSTD) || !tu_coding_available(MHDGZ_CODING_BR))
		return;
	if (_i < 2) {
		e = sse_new(sse_read, "text/event-stream", 4096, SSE_EVENTS * 4096);
		for (k = 0; k < SSE_EVENTS; k++) {
			size_t n = sse_event(e->expect + e->expect_len, 4096, k, 0);

			ck_assert(n > 0);
			e->expect_len += n;
		}
		st_begin(&t, st_gz_from(&o), NULL, 0, sse_route, e);
		t.r.on_data = sse_on_data;
		t.r.cls = e;
		t.r.accept_encoding = coding;
		th_fetch(NULL, t.s.port, "/events", TH_DECODE, &t.r);
		ck_assert_msg(t.r.rc == CURLE_OK, "%s", curl_easy_strerror(t.r.rc));
		ck_assert_str_eq(th_header(&t.r, "Content-Encoding", NULL), coding);
		ck_assert_msg(e->late == 0, "%s: %u of %u events buffered, not flushed", coding,
			      e->late, SSE_EVENTS - 1);
		ck_assert_uint_eq(e->seen, SSE_EVENTS);
		ck_assert_uint_eq(t.r.body_len, e->expect_len);
		ck_assert(memcmp(t.r.body, e->expect, e->expect_len) == 0);
		sse_end(&t, e);
		return;
	}
	e = sse_new(bulk_read, "text/plain", 4096, BULK_CHUNKS * (sizeof BULK_LINE - 1));
	for (i = 0; i < BULK_CHUNKS; i++) {
		memcpy(e->expect + e->expect_len, BULK_LINE, sizeof BULK_LINE - 1);
		e->expect_len += sizeof BULK_LINE - 1;
	}
	e->nchunk_events = BULK_CHUNKS;
	e->set_low_latency = _i >= 4;
	st_begin(&t, st_gz_from(&o), NULL, 0, sse_route, e);
	t.r.accept_encoding = coding;
	st_get(&t, 0);
	ck_assert_int_eq(t.r.status, 200);
	ck_assert_str_eq(th_header(&t.r, "Content-Encoding", NULL), coding);
	ck_assert_msg(tu_decode(coding, t.r.body, t.r.body_len, &dec, &dec_len) == 0,
		      "%s stream does not decode", coding);
	expect_same_bytes(dec, dec_len, (const uint8_t *)e->expect, e->expect_len, coding);
	free(dec);
	fprintf(stderr, "events_coded(%s, %s): %zu bytes for %zu bytes in %u chunks\n", coding,
		_i >= 4 ? "low-latency" : "bulk", t.r.body_len, e->expect_len, BULK_CHUNKS);
	/* A flush costs a few bytes (zstd: an empty block header of 3, brotli:
	 * an empty metadata block), so per chunk it shows. */
	if (_i < 4)
		ck_assert_uint_lt(t.r.body_len, 4000);
	else
		ck_assert_uint_ge(t.r.body_len, BULK_CHUNKS * 3);
	sse_end(&t, e);
}
END_TEST

/* A comet stream, as libmicrohttpd's comet example serves it: a reader
 * that blocks COMET_MS before each line, of unknown size and text type. */
enum { COMET_MS = 200, COMET_MAX = 100 };
/* Sanitizers (ThreadSanitizer too, which gcc's TH_SANITIZED misses) slow
 * every step: the bounds below are four times as long under them. */
#if TH_SANITIZED || defined(__SANITIZE_THREAD__)
#define COMET_SLOW 4
#else
#define COMET_SLOW 1
#endif

struct comet {
	unsigned int limit; /* lines before the end; 0: COMET_MAX */
	_Atomic unsigned int next;
	_Atomic uint64_t produced_ms[COMET_MAX];
	_Atomic unsigned int frees;
	uint64_t arrived_ms[COMET_MAX]; /* client */
	unsigned int seen;
};

static ssize_t
comet_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct comet *c = cls;
	unsigned int k = atomic_load(&c->next);
	int n;

	(void)pos;
	if (k >= (c->limit ? c->limit : COMET_MAX))
		return MHD_CONTENT_READER_END_OF_STREAM;
	usleep(COMET_MS * 1000);
	n = snprintf(buf, max, "line %u\n", k);
	atomic_store(&c->produced_ms[k], th_now_ms());
	atomic_store(&c->next, k + 1);
	return n;
}

static void
comet_free(void *cls)
{
	struct comet *c = cls;

	atomic_fetch_add(&c->frees, 1);
}

static enum MHD_Result
comet_route(struct th_server *s, struct MHD_Connection *conn, const char *url, const char *method)
{
	struct MHD_Response *r = mhdgz_response_from_callback(s->gz, MHD_SIZE_UNKNOWN, 256,
							      comet_read, s->cls, comet_free);
	enum MHD_Result ok;

	(void)url;
	ck_assert_ptr_nonnull(r);
	ck_assert(MHD_add_response_header(r, "Content-Type", "text/plain") == MHD_YES);
	ok = mhdgz_queue_response_ex(s->gz, conn, TU_REQ(method), 200, r, NULL);
	MHD_destroy_response(r);
	return ok;
}

static void
comet_data(struct th_reply *r, const uint8_t *p, size_t n)
{
	struct comet *c = r->cls;

	for (size_t i = 0; i < n; i++)
		if (p[i] == '\n' && c->seen < COMET_MAX)
			c->arrived_ms[c->seen++] = th_now_ms();
}

/* Each line of a reader that blocks 200 ms per line reaches a gzip client
 * (decoded by libcurl as it arrives) within 250 ms of being produced (four
 * times that under sanitizers), and the stream ends with every line. The
 * pump calls the reader once per libmicrohttpd read and sync-flushes what
 * the compressor held for GZ_PUMP_FLUSH_US. */
START_TEST(blocking_reader_lines)
{
	struct comet c = { .limit = 5 };
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	uint64_t bound = 250 * COMET_SLOW;
	struct th_server s;
	struct th_reply r;
	char want[64] = "";

	th_start(&s, gz, 0, comet_route, &c);
	th_reply_init(&r);
	r.on_data = comet_data;
	r.cls = &c;
	ck_assert_int_eq(th_fetch(NULL, s.port, "/", TH_DECODE, &r), CURLE_OK);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(th_header(&r, "Content-Encoding", NULL), "gzip");
	for (unsigned int k = 0; k < c.limit; k++)
		snprintf(want + strlen(want), sizeof want - strlen(want), "line %u\n", k);
	ck_assert_uint_eq(r.body_len, strlen(want));
	ck_assert(memcmp(r.body, want, r.body_len) == 0);
	ck_assert_uint_eq(c.seen, c.limit);
	for (unsigned int k = 0; k < c.limit; k++) {
		uint64_t made = atomic_load(&c.produced_ms[k]);

		ck_assert_msg(c.arrived_ms[k] - made <= bound,
			      "line %u arrived %llu ms after it was produced", k,
			      (unsigned long long)(c.arrived_ms[k] - made));
	}
	th_reply_free(&r);
	th_stop(&s);
	ck_assert_uint_eq(atomic_load(&c.frees), 1);
	mhdgz_free(gz);
}
END_TEST

/* A client that leaves a comet stream after two lines: MHD_stop_daemon
 * returns within a second of it (four under sanitizers; the reader blocks
 * 200 ms per call, and is called once per libmicrohttpd read), and the
 * reader's free callback has run once. */
START_TEST(blocking_reader_client_leaves)
{
	struct comet c = { .limit = 0 };
	struct mhdgz *gz = th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	uint64_t bound = 1000 * COMET_SLOW, t0;
	struct th_server s;
	struct th_reply r;

	th_start(&s, gz, 0, comet_route, &c);
	th_reply_init(&r);
	r.on_data = comet_data;
	r.cls = &c;
	r.abort_after = strlen("line 0\nline 1\n");
	ck_assert_int_ne(th_fetch(NULL, s.port, "/", TH_DECODE, &r), CURLE_OK);
	ck_assert_uint_ge(c.seen, 2);
	t0 = th_now_ms();
	th_stop(&s);
	ck_assert_msg(th_now_ms() - t0 <= bound, "MHD_stop_daemon took %llu ms",
		      (unsigned long long)(th_now_ms() - t0));
	ck_assert_uint_eq(atomic_load(&c.frees), 1);
	ck_assert_uint_lt(atomic_load(&c.next), COMET_MAX);
	th_reply_free(&r);
	mhdgz_free(gz);
}
END_TEST

/* Two padded streams on one polling thread: the reader calls in order. */
#define PK_CALLS 200 /* per stream: 64 KiB of key in 1 KiB calls, and more */
struct pk {
	_Atomic unsigned int n;
	char log[2 * PK_CALLS + 8];   /* 'a' or 'b' per reader call */
	_Atomic unsigned int started; /* routes that queued their stream */
	_Atomic unsigned int waits;
	struct pk_stream {
		struct pk *pk;
		char name;
		unsigned int calls;
	} st[2];
};

static ssize_t
pk_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct pk_stream *p = cls;
	unsigned int k;

	(void)pos;
	/* each waits (no data now) until both requests are in, so that both
	 * read their keys at once; boundedly */
	if (atomic_load(&p->pk->started) < 2 && atomic_fetch_add(&p->pk->waits, 1) < 5000000)
		return 0;
	if (p->calls >= PK_CALLS)
		return MHD_CONTENT_READER_END_OF_STREAM;
	p->calls++;
	k = atomic_fetch_add(&p->pk->n, 1);
	if (k < sizeof p->pk->log)
		p->pk->log[k] = p->name;
	memset(buf, p->name, max < 1024 ? max : 1024);
	return (ssize_t)(max < 1024 ? max : 1024);
}

static enum MHD_Result
pk_route(struct th_server *s, struct MHD_Connection *conn, const char *url, const char *method)
{
	struct pk *pk = s->cls;
	struct pk_stream *p = &pk->st[strcmp(url, "/b") == 0];
	struct MHD_Response *r = mhdgz_response_from_callback(s->gz, MHD_SIZE_UNKNOWN, 1024,
							      pk_read, p, NULL);
	enum MHD_Result ok;

	ck_assert_ptr_nonnull(r);
	ck_assert(MHD_add_response_header(r, "Content-Type", "text/plain") == MHD_YES);
	ok = mhdgz_queue_response_ex(s->gz, conn, TU_REQ(method), 200, r, NULL);
	MHD_destroy_response(r);
	atomic_fetch_add(&pk->started, 1);
	return ok;
}

struct pk_client {
	pthread_t t;
	uint16_t port;
	const char *path;
	struct th_reply r;
};

static void *
pk_client_main(void *arg)
{
	struct pk_client *c = arg;

	th_fetch(NULL, c->port, c->path, TH_GZIP, &c->r);
	return NULL;
}

/*
 * Length hiding keys a stream's padding on its first 64 KiB; the reader is
 * still called once per libmicrohttpd read (pad_key, hnd_stream.c), so a
 * polling thread serves its other connections between the calls: two
 * padded streams on one thread have their reader calls interleaved, where
 * a loop over the key's 64 calls inside one read ran them back to back.
 */
START_TEST(pad_key_interleaves)
{
	struct pk *pk = calloc(1, sizeof *pk);
	struct mhdgz *gz = st_gz_new(MHDGZ_BACKEND_DEFAULT, 0, MHDGZ_F_LENGTH_HIDING);
	struct pk_client c[2];
	struct th_server s;
	unsigned int i, run = 0, max_run = 0, n;

	ck_assert_ptr_nonnull(pk);
	for (i = 0; i < 2; i++) {
		pk->st[i].pk = pk;
		pk->st[i].name = (char)('a' + i);
	}
	th_start(&s, gz, 1, pk_route, pk);
	for (i = 0; i < 2; i++) {
		c[i].port = s.port;
		c[i].path = i ? "/b" : "/a";
		th_reply_init(&c[i].r);
		ck_assert_int_eq(pthread_create(&c[i].t, NULL, pk_client_main, &c[i]), 0);
	}
	for (i = 0; i < 2; i++)
		pthread_join(c[i].t, NULL);
	for (i = 0; i < 2; i++) {
		ck_assert_msg(c[i].r.rc == CURLE_OK, "%s", curl_easy_strerror(c[i].r.rc));
		uint8_t *dec = NULL;
		size_t dec_len = 0;

		ck_assert_str_eq(th_header(&c[i].r, "Content-Encoding", NULL), "gzip");
		/* padded: the member's header carries a comment */
		ck_assert(c[i].r.body_len > 10 && (c[i].r.body[3] & 0x10) != 0);
		ck_assert_int_eq(tu_gunzip(c[i].r.body, c[i].r.body_len, &dec, &dec_len), 0);
		ck_assert_uint_eq(dec_len, PK_CALLS * 1024u);
		free(dec);
	}
	n = atomic_load(&pk->n);
	ck_assert_uint_eq(n, 2 * PK_CALLS);
	/* The longest run of one stream's calls while both read their keys
	 * (64 calls each, nothing written yet; each waits for the other's
	 * request): 64 with the loop. Past the
	 * keys a full socket may leave one stream waiting, so runs there say
	 * nothing. */
	{
		unsigned int seen[2] = { 0, 0 };

		for (i = 0; i < n && seen[0] < 64 && seen[1] < 64; i++) {
			seen[pk->log[i] == 'b']++;
			run = i > 0 && pk->log[i] == pk->log[i - 1] ? run + 1 : 1;
			if (run > max_run)
				max_run = run;
		}
	}
	fprintf(stderr, "pad_key_interleaves: longest run %u: %.60s\n", max_run, pk->log);
	ck_assert_uint_le(max_run, 8);
	th_stop(&s);
	for (i = 0; i < 2; i++)
		th_reply_free(&c[i].r);
	mhdgz_free(gz);
	free(pk);
}
END_TEST

struct ck_case
stream_latency_case(void)
{
	return (struct ck_case){ "latency",
				 CK_CASE_TIMEOUT,
				 { { events_arrive_one_by_one, 0, (int)N_ELEMS(ev_cases) },
				   { flush_policy, 0, (int)(3 * N_ELEMS(fp_backends)) },
				   { low_latency_api, 0, 0 },
				   { fd_ownership, 0, 0 },
				   { events_coded, 0, 6 },
				   { blocking_reader_lines, 0, 0 },
				   { blocking_reader_client_leaves, 0, 0 },
				   { pad_key_interleaves, 0, 0 } } };
}
