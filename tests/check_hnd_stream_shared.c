/* check_hnd_stream_shared.c: one streaming response object queued for many connections, in turn and at once, its reader calls serialised (suite streaming_live, case shared). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suites.h"
#include "stream_harness.h"
#include "testutil.h"


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
	sh->r = mhdgz_response_from_callback(gz, known ? len : MHD_SIZE_UNKNOWN, 4096, shared_read,
					     sh, shared_free);
	ck_assert(sh->r != NULL);
	ck_assert(MHD_add_response_header(sh->r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain") ==
		  MHD_YES);
	ck_assert(MHD_add_response_header(sh->r, MHD_HTTP_HEADER_ETAG, "\"s\"") == MHD_YES);
}

/* After the requests: every compressor back, the response still alive
 * until the test destroys it after the daemon stopped, then freed once. */
static void
shared_end(struct st_test *t, struct shared *sh)
{
	ck_assert(th_wait(th_pool_back_pred, t->gz, RELEASE_WAIT_MS));
	ck_assert_uint_eq(atomic_load(&sh->src.frees), 0);
	th_stop(&t->s);
	ck_assert_uint_eq(atomic_load(&sh->src.frees), 0);
	MHD_destroy_response(sh->r);
	ck_assert_uint_eq(atomic_load(&sh->src.frees), 1);
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
	struct st_test t;
	struct shared sh;
	CURL *h = th_curl_new();
	int i;

	shared_make(&sh, gz, data, len, known);
	st_begin(&t, gz, data, len, shared_route, &sh);
	for (i = 0; i < 6; i++) {
		unsigned int flags = i == 3 ? 0 : i == 4 ? TH_DECODE : TH_GZIP;

		th_fetch(i % 2 ? h : NULL, t.s.port, "/", flags, &t.r);
		if (flags == TH_GZIP) {
			expect_gzip_body(&t.r, data, len);
			ck_assert_str_eq(th_header(&t.r, "ETag", NULL), "W/\"s\"");
			continue;
		}
		/* identity, or gzip decoded by libcurl: the body itself */
		ck_assert_msg(t.r.rc == CURLE_OK, "%s", curl_easy_strerror(t.r.rc));
		if (flags == 0) {
			/* the fields as the application made them, also after
			 * the response carried a coded stream in place */
			ck_assert(th_header(&t.r, "Content-Encoding", NULL) == NULL);
			ck_assert_str_eq(th_header(&t.r, "ETag", NULL), "\"s\"");
		} else
			ck_assert_str_eq(th_header(&t.r, "Content-Encoding", NULL), "gzip");
		ck_assert_uint_eq(t.r.body_len, len);
		ck_assert(memcmp(t.r.body, data, len) == 0);
	}
	curl_easy_cleanup(h);
	shared_end(&t, &sh);
	ck_assert_uint_eq(atomic_load(&sh.queue_failures), 0);
	st_end(&t);
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
	struct st_test t = { .gz = gz, .data = data, .len = len };
	struct shared sh;

	shared_make(&sh, gz, data, len, known);
	th_start(&t.s, gz, 4, shared_route, &sh);
	run_clients(t.s.port, data, len, CC_MIXED);
	shared_end(&t, &sh);
	st_end(&t);
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
	struct th_server s = { 0 };
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

struct ck_case
stream_shared_case(void)
{
	return (struct ck_case){ "shared",
				 CK_CASE_TIMEOUT,
				 { { shared_sequential, 0, 2 },
				   { shared_concurrent, 0, 2 },
				   { shared_reader_calls_serialized, 0, 0 } } };
}
