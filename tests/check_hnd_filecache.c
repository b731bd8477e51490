/* check_hnd_filecache.c: e2e tests of the file cache: a file version compressed once across fresh fd responses, never stale, bounded, HEAD/304 lengths. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hnd_handle.h" /* mhdgz.h, and the racy window: first, as the library sees it */
#include "check_suites.h"
#include "harness.h"
#include "testutil.h"

/* Requests per file, bytes per file (compressed whole), files. */
#define FC_N 8
#define FC_LEN 30000
#define FC_FILES 3

/* Files served as a file server does: opened per request, a fresh fd
 * response each time; /N is file N. With etag, an ETag made of size and
 * mtime (as gzserve's), and 304 when MHDGZ_REQUEST_PRECONDITIONS finds If-None-Match matching. */
struct fc_fix {
	char path[FC_FILES][64];
	bool etag;
	int8_t length_hiding; /* per response: 0 handle default, 1 on */
};

static enum MHD_Result
fc_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct fc_fix *f = s->cls;
	unsigned int n = (unsigned int)(url[1] - '0');
	struct MHD_Response *r;
	struct stat st;
	char etag[64];
	enum MHD_Result ret;
	int fd;

	ck_assert_uint_lt(n, FC_FILES);
	fd = open(f->path[n], O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	r = mhdgz_response_from_fd(s->gz, (uint64_t)st.st_size, fd);
	if (!r) {
		close(fd);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "text/plain");
	if (f->length_hiding)
		ck_assert_int_eq(mhdgz_response_set_flags(s->gz, r, MHDGZ_RESPONSE_LENGTH_HIDING),
				 0);
	if (f->etag) {
		snprintf(etag, sizeof etag, "\"%llx-%llx\"", (unsigned long long)st.st_size,
			 (unsigned long long)st.st_mtim.tv_sec);
		MHD_add_response_header(r, "ETag", etag);
	}
	ret = mhdgz_queue_response_ex(s->gz, c, TU_REQ_PRE(method), MHD_HTTP_OK, r, NULL);
	MHD_destroy_response(r);
	return ret;
}

/* Write data[0..len) to path (replacing it in place, the same inode). */
static void
fc_write(const char *path, const uint8_t *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	ck_assert_int_eq(close(fd), 0);
}

/* Set path's mtime to sec seconds (atime too). */
static void
fc_set_mtime(const char *path, time_t sec)
{
	struct timespec ts[2] = { { .tv_sec = sec }, { .tv_sec = sec } };

	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* A handler with the store at budget bytes (0: its default, no file
 * versions); racy: keep the default racy window, else remember files
 * changed just now (tests). */
static struct mhdgz *
fc_gz(size_t budget, bool racy)
{
	struct mhdgz_options o = th_opts();
	struct mhdgz *gz;

	o.limits.store_nbytes = budget;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	if (!racy)
		gz->store.racy_ns = 0;
	return gz;
}

static void
fc_files(struct fc_fix *f, uint8_t *body[FC_FILES])
{
	for (unsigned int i = 0; i < FC_FILES; i++) {
		int fd;

		snprintf(f->path[i], sizeof f->path[i], "/tmp/mhdgz-fc-XXXXXX");
		fd = mkstemp(f->path[i]);
		ck_assert_int_ge(fd, 0);
		close(fd);
		body[i] = tu_payload(FC_LEN, TU_TEXT, 70 + i);
		fc_write(f->path[i], body[i], FC_LEN);
		fc_set_mtime(f->path[i], 1000000000 + (time_t)i); /* not racy either way */
	}
}

static void
fc_files_done(struct fc_fix *f, uint8_t *body[FC_FILES])
{
	for (unsigned int i = 0; i < FC_FILES; i++) {
		unlink(f->path[i]);
		free(body[i]);
	}
}

/* A gzip GET of path p decoding to want[0..len); returns the coded length. */
static size_t
fc_get(CURL *h, struct th_server *s, const char *p, const uint8_t *want, size_t len)
{
	struct th_reply r = { 0 };
	uint8_t *dec = NULL;
	size_t n, dec_len = 0;

	TH_REQ(h, s, TH_GZIP, p, th_h_gzip, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(th_header(&r, "Content-Encoding", NULL), "gzip");
	/* tu_gunzip: also a padded header (FCOMMENT), as length hiding sends */
	ck_assert_int_eq(tu_gunzip(r.body, r.body_len, &dec, &dec_len), 0);
	ck_assert_uint_eq(dec_len, len);
	ck_assert_int_eq(memcmp(dec, want, len), 0);
	free(dec);
	n = r.body_len;
	th_reply_free(&r);
	return n;
}

/*
 * FC_N gzip GETs of one file, each through a fresh fd response: one
 * compression, FC_N - 1 hits, the bytes held are the coded body and its
 * overhead. HEADs and 304s state the same length without compressing; a
 * client without gzip is served identity and does not look the cache up.
 * _i 1: with length hiding on per response, the padded bytes are what is
 * remembered (a different key from unpadded).
 */
START_TEST(test_fc_hits)
{
	struct fc_fix f = { .etag = true, .length_hiding = (int8_t)_i };
	uint8_t *body[FC_FILES];
	struct mhdgz *gz = fc_gz(1024 * 1024, false);
	struct th_server s = { 0 };
	CURL *h = th_curl_new();
	struct th_reply r = { 0 };
	struct mhdgz_stats st;
	char num[32], inm[96], err[256];
	const char *hd[] = { "Accept-Encoding: gzip", inm, NULL };
	size_t gz_len = 0;

	fc_files(&f, body);
	th_start(&s, gz, 0, fc_route, &f);
	for (int i = 0; i < FC_N; i++) {
		size_t n = fc_get(h, &s, "/0", body[0], FC_LEN);

		if (i)
			ck_assert_uint_eq(n, gz_len);
		gz_len = n;
	}
	snprintf(num, sizeof num, "%zu", gz_len);
	TH_REQ(h, &s, TH_GZIP | TH_HEAD, "/0", th_h_gzip, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(th_header(&r, "Content-Length", NULL), num);
	ck_assert_str_eq(th_header(&r, "Content-Encoding", NULL), "gzip");
	snprintf(inm, sizeof inm, "If-None-Match: %s", th_header(&r, "ETag", NULL));
	th_reply_free(&r);
	TH_REQ(h, &s, TH_GZIP, "/0", hd, &r);
	ck_assert_int_eq(r.status, 304);
	TH_OK("304", th_v_304_length(&r, gz_len, TH_E));
	th_reply_free(&r);
	TH_REQ(h, &s, 0, "/0", NULL, &r);
	TH_OK("identity", th_v_identity(&r, 200, body[0], FC_LEN, TH_E));
	th_reply_free(&r);
	st = th_stats(gz);
	ck_assert_uint_eq(st.compressions, 1);
	ck_assert_uint_eq(st.store_misses, 1);
	/* The GETs after the first, the HEAD and the 304: each a lookup of
	 * the file version the first GET stored (hnd_store.c), the same
	 * bytes and their length. */
	ck_assert_uint_eq(st.store_hits, FC_N + 1);
	ck_assert_uint_eq(st.store_evictions, 0);
	ck_assert_uint_eq(st.store_nbytes, gz_len + 128);
	ck_assert_uint_eq(st.padded, _i ? FC_N + 1 : 0); /* GETs and the HEAD */
	ck_assert_uint_eq(st.failures, 0);
	th_stop(&s);
	curl_easy_cleanup(h);
	mhdgz_free(gz);
	fc_files_done(&f, body);
}
END_TEST

/*
 * A changed file is never served stale: after a GET remembered it, the
 * file is rewritten in place and the next GET decodes to the new bytes.
 * _i 0: same size, new mtime; 1: same mtime (set back), new size; 2: same
 * size and mtime set back (only the change time tells).
 */
START_TEST(test_fc_stale)
{
	struct fc_fix f = { 0 };
	uint8_t *body[FC_FILES], *next;
	size_t next_len = _i == 1 ? FC_LEN + 1000 : FC_LEN;
	struct mhdgz *gz = fc_gz(1024 * 1024, false);
	struct th_server s = { 0 };
	CURL *h = th_curl_new();
	struct mhdgz_stats st;

	fc_files(&f, body);
	next = tu_payload(next_len, TU_TEXT, 99);
	th_start(&s, gz, 0, fc_route, &f);
	fc_get(h, &s, "/0", body[0], FC_LEN);
	fc_get(h, &s, "/0", body[0], FC_LEN);
	/* Into another tick of the file system's clock, so that the change
	 * time differs (what the default racy window guarantees). */
	usleep(30 * 1000);
	fc_write(f.path[0], next, next_len);
	fc_set_mtime(f.path[0], _i == 0 ? 1000000100 : 1000000000);
	fc_get(h, &s, "/0", next, next_len);
	fc_get(h, &s, "/0", next, next_len);
	st = th_stats(gz);
	ck_assert_uint_eq(st.compressions, 2);
	ck_assert_uint_eq(st.store_misses, 2);
	ck_assert_uint_eq(st.store_hits, 2);
	th_stop(&s);
	curl_easy_cleanup(h);
	mhdgz_free(gz);
	free(next);
	fc_files_done(&f, body);
}
END_TEST

/*
 * A budget that holds two of the three coded files: served round robin,
 * the least recently used one is evicted each time (every GET a miss),
 * the bytes held never exceed the budget, and every body is right.
 */
START_TEST(test_fc_evict)
{
	struct fc_fix f = { 0 };
	uint8_t *body[FC_FILES];
	struct mhdgz *probe = fc_gz(1024 * 1024, false), *gz;
	struct th_server s = { 0 };
	CURL *h = th_curl_new();
	struct mhdgz_stats st;
	size_t len[FC_FILES], budget;
	char p[4];

	fc_files(&f, body);
	/* The coded lengths, learnt with a roomy cache. */
	th_start(&s, probe, 0, fc_route, &f);
	for (unsigned int i = 0; i < FC_FILES; i++) {
		snprintf(p, sizeof p, "/%u", i);
		len[i] = fc_get(h, &s, p, body[i], FC_LEN);
	}
	th_stop(&s);
	mhdgz_free(probe);
	budget = len[0] + len[1] + len[2] + 3 * 128 - 1; /* one short of all three */
	gz = fc_gz(budget, false);
	th_start(&s, gz, 0, fc_route, &f);
	for (unsigned int k = 0; k < 2 * FC_FILES; k++) {
		snprintf(p, sizeof p, "/%u", k % FC_FILES);
		fc_get(h, &s, p, body[k % FC_FILES], FC_LEN);
		st = th_stats(gz);
		ck_assert_uint_le(st.store_nbytes, budget);
	}
	st = th_stats(gz);
	ck_assert_uint_eq(st.store_hits, 0);
	ck_assert_uint_eq(st.store_misses, 2 * FC_FILES);
	ck_assert_uint_eq(st.store_evictions, 2 * FC_FILES - 2);
	ck_assert_uint_eq(st.compressions, 2 * FC_FILES);
	/* The most recent is a hit. */
	fc_get(h, &s, "/2", body[2], FC_LEN);
	ck_assert_uint_eq(th_stats(gz).store_hits, 1);
	th_stop(&s);
	curl_easy_cleanup(h);
	mhdgz_free(gz);
	fc_files_done(&f, body);
}
END_TEST

/*
 * _i 0: off (the default): nothing looked up, one compression per GET.
 * _i 1: on with the default racy window, a file changed just now is
 * compressed but not remembered, so a rewrite within the file system's
 * timestamp tick cannot be served stale.
 */
START_TEST(test_fc_off_racy)
{
	struct fc_fix f = { 0 };
	uint8_t *body[FC_FILES];
	struct mhdgz *gz = _i ? fc_gz(1024 * 1024, true) : th_gz_new(MHDGZ_BACKEND_DEFAULT, 0, 0);
	struct th_server s = { 0 };
	CURL *h = th_curl_new();
	struct mhdgz_stats st;

	fc_files(&f, body);
	fc_write(f.path[0], body[0], FC_LEN); /* changed now */
	th_start(&s, gz, 0, fc_route, &f);
	for (int i = 0; i < FC_N; i++)
		fc_get(h, &s, "/0", body[0], FC_LEN);
	st = th_stats(gz);
	ck_assert_uint_eq(st.compressions, FC_N);
	ck_assert_uint_eq(st.store_hits, 0);
	ck_assert_uint_eq(st.store_misses, _i ? FC_N : 0);
	ck_assert_uint_eq(st.store_nbytes, 0);
	th_stop(&s);
	curl_easy_cleanup(h);
	mhdgz_free(gz);
	fc_files_done(&f, body);
}
END_TEST

/* Client threads and GETs per thread of test_fc_threads. */
#define FC_THREADS 4
#define FC_THREAD_REQS 24

struct fc_client {
	struct th_server *s;
	uint8_t **body;
	unsigned int id;
	bool failed;
	char err[160];
};

/* FC_THREAD_REQS gzip GETs over the files, from file id on; no Check
 * assertions off the test's thread: a failure is recorded. */
static void *
fc_client_main(void *cls)
{
	struct fc_client *c = cls;
	CURL *h = th_curl_new();

	for (unsigned int k = 0; k < FC_THREAD_REQS && !c->failed; k++) {
		unsigned int n = (c->id + k) % FC_FILES;
		struct th_reply r = { 0 };
		uint8_t *dec = NULL;
		size_t dec_len = 0;
		char p[4];

		snprintf(p, sizeof p, "/%u", n);
		if (th_fetch_ex(h, c->s->port, p, TH_GZIP, th_h_gzip, &r) != CURLE_OK ||
		    r.status != 200 || tu_gunzip(r.body, r.body_len, &dec, &dec_len) != 0 ||
		    dec_len != FC_LEN || memcmp(dec, c->body[n], FC_LEN) != 0) {
			snprintf(c->err, sizeof c->err, "thread %u, GET %u of %s: wrong reply",
				 c->id, k, p);
			c->failed = true;
		}
		free(dec);
		th_reply_free(&r);
	}
	curl_easy_cleanup(h);
	return NULL;
}

/*
 * FC_THREADS clients at once on a thread-per-connection daemon, over the
 * three files with a budget for two (hits, misses and evictions race):
 * every body right, every lookup a hit or a miss, every miss one
 * compression, the bytes held within the budget.
 */
START_TEST(test_fc_threads)
{
	struct fc_fix f = { 0 };
	uint8_t *body[FC_FILES];
	struct mhdgz *gz = fc_gz(2 * 8192, false);
	struct th_daemon_opts o = { .mhd_flags = MHD_USE_THREAD_PER_CONNECTION };
	struct th_server s = { 0 };
	struct fc_client c[FC_THREADS];
	pthread_t tid[FC_THREADS];
	struct mhdgz_stats st;

	fc_files(&f, body);
	th_start_ex(&s, gz, &o, fc_route, &f);
	for (unsigned int i = 0; i < FC_THREADS; i++) {
		c[i] = (struct fc_client){ .s = &s, .body = body, .id = i };
		ck_assert_int_eq(pthread_create(&tid[i], NULL, fc_client_main, &c[i]), 0);
	}
	for (unsigned int i = 0; i < FC_THREADS; i++)
		pthread_join(tid[i], NULL);
	for (unsigned int i = 0; i < FC_THREADS; i++)
		ck_assert_msg(!c[i].failed, "%s", c[i].err);
	st = th_stats(gz);
	ck_assert_uint_eq(st.store_hits + st.store_misses, FC_THREADS * FC_THREAD_REQS);
	ck_assert_uint_eq(st.compressions, st.store_misses);
	ck_assert_uint_ge(st.store_misses, FC_FILES);
	ck_assert_uint_le(st.store_nbytes, 2 * 8192);
	ck_assert_uint_eq(st.failures, 0);
	th_stop(&s);
	mhdgz_free(gz);
	fc_files_done(&f, body);
}
END_TEST

/* The file the allocator hook rewrites (same size, same mtime) when the
 * buffer a GET read it into is freed: after the read, before the coded
 * bytes go to the store. */
static struct {
	const char *path;
	const uint8_t *next;
	void *watch;
	bool armed;
} fc_mid;

static void *
fc_mid_malloc(size_t n, void *cls)
{
	void *p = malloc(n ? n : 1);

	(void)cls;
	if (fc_mid.armed && n == FC_LEN && !fc_mid.watch)
		fc_mid.watch = p;
	return p;
}

static void
fc_mid_free(void *p, void *cls)
{
	(void)cls;
	if (fc_mid.armed && p == fc_mid.watch) {
		fc_mid.armed = false;
		fc_mid.watch = NULL;
		usleep(30 * 1000); /* another tick of the file system's clock */
		fc_write(fc_mid.path, fc_mid.next, FC_LEN);
		fc_set_mtime(fc_mid.path, 1000000000);
	}
	free(p);
}

/*
 * A file rewritten in place (same size, same mtime) after a GET read it
 * but before its coded bytes were remembered: they are the old version's
 * and must not be remembered under the new version, so the next GET
 * decodes to the new bytes.
 */
START_TEST(test_fc_changed_while_coded)
{
	struct mhdgz_allocator a = { sizeof a, fc_mid_malloc, fc_mid_free, NULL };
	struct fc_fix f = { 0 };
	uint8_t *body[FC_FILES], *next;
	struct mhdgz *gz;
	struct th_server s = { 0 };
	CURL *h;

	ck_assert_int_eq(mhdgz_set_allocator(&a), 0);
	gz = fc_gz(1024 * 1024, false);
	h = th_curl_new();
	fc_files(&f, body);
	next = tu_payload(FC_LEN, TU_TEXT, 99);
	fc_mid.path = f.path[0];
	fc_mid.next = next;
	th_start(&s, gz, 0, fc_route, &f);
	fc_mid.armed = true;
	fc_get(h, &s, "/0", body[0], FC_LEN); /* read, then the file changes */
	ck_assert(!fc_mid.armed);
	fc_get(h, &s, "/0", next, FC_LEN);
	fc_get(h, &s, "/0", next, FC_LEN);
	th_stop(&s);
	curl_easy_cleanup(h);
	mhdgz_free(gz);
	free(next);
	fc_files_done(&f, body);
}
END_TEST

struct ck_case
hnd_filecache_case(void)
{
	return (struct ck_case){ "filecache",
				 CK_CASE_TIMEOUT,
				 { { test_fc_hits, 0, 2 },
				   { test_fc_stale, 0, 3 },
				   { test_fc_evict, 0, 0 },
				   { test_fc_off_racy, 0, 2 },
				   { test_fc_threads, 0, 0 },
				   { test_fc_changed_while_coded, 0, 0 } } };
}
