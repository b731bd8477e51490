/* check_gzserve.c: gzserve end to end with libcurl (keep-alive, events, 16 at once, SIGTERM). */
/*
 * The curl command-line test (gzserve_test.sh) covers the options and the
 * static-file rules; this suite drives the demo the way a program would:
 * one keep-alive connection for a whole sequence, raw gzip bodies decoded
 * by zlib (tests/testutil.c) and compared with payload_json_sized()'s bytes
 * (the generator gzserve serves from), 16 transfers at once through a multi
 * handle, an event stream timed as it arrives, and a SIGTERM while a
 * transfer is in flight.
 *
 * GZSERVE names the binary (make check sets it); default
 * ../examples/gzserve relative to the working directory.
 */
/* memmem(), renameat2() */
#define _GNU_SOURCE
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/aio_abi.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_suites.h"
#include "harness.h"
#include "payload.h"
#include "testutil.h"

/* Upper bound of any one transfer, in seconds: a hung server fails the
 * test instead of hanging make check. */
#define CG_TIMEOUT_S 20L

struct server {
	pid_t pid;
	uint16_t port;
};

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Start gzserve --port 0 [--quiet] [args...] (args NULL-terminated, may
 * be NULL), read its "listening on" line (bounded wait). With err_path
 * its standard error goes to that file and --quiet is left out (the
 * access log and the exit report are wanted). */
static void
server_start_args(struct server *s, const char *const *args, const char *err_path)
{
	const char *bin = getenv("GZSERVE");
	const char *argv[24];
	char line[256];
	size_t len = 0, n_args = 0;
	int fds[2];
	unsigned int port;

	if (!bin)
		bin = "../examples/gzserve";
	argv[n_args++] = bin;
	argv[n_args++] = "--port";
	argv[n_args++] = "0";
	if (!err_path)
		argv[n_args++] = "--quiet";
	for (size_t i = 0; args && args[i]; i++) {
		ck_assert_uint_lt(n_args, sizeof argv / sizeof argv[0] - 1);
		argv[n_args++] = args[i];
	}
	argv[n_args] = NULL;
	ck_assert_int_eq(pipe(fds), 0);
	s->pid = fork();
	ck_assert_int_ge(s->pid, 0);
	if (s->pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		close(fds[1]);
		if (err_path) {
			int efd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

			if (efd < 0)
				_exit(126);
			dup2(efd, STDERR_FILENO);
			close(efd);
		}
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	while (len < sizeof line - 1 && !memchr(line, '\n', len)) {
		struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
		ssize_t n;

		ck_assert_msg(poll(&pfd, 1, 10000) == 1, "gzserve did not start within 10 s");
		n = read(fds[0], line + len, sizeof line - 1 - len);
		ck_assert_msg(n > 0, "gzserve exited before listening (%s)", bin);
		len += (size_t)n;
		line[len] = '\0';
	}
	close(fds[0]);
	ck_assert_msg(sscanf(line, "listening on http://127.0.0.1:%u/", &port) == 1,
		      "unexpected first line: %s", line);
	s->port = (uint16_t)port;
}

/* gzserve --port 0 --quiet [extra]. */
static void
server_start(struct server *s, const char *extra)
{
	const char *args[] = { extra, NULL };

	server_start_args(s, args, NULL);
}

/* SIGTERM and wait (bounded); returns the exit status, or -1. */
static int
server_stop(struct server *s)
{
	int st, i;

	kill(s->pid, SIGTERM);
	for (i = 0; i < 300; i++) {
		pid_t r = waitpid(s->pid, &st, WNOHANG);

		if (r == s->pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		usleep(50000);
	}
	kill(s->pid, SIGKILL);
	waitpid(s->pid, &st, 0);
	return -1;
}

/* One request on h that must complete (raw bytes: libcurl decodes only
 * with TH_DECODE). */
static void
get(CURL *h, const struct server *s, const char *path, unsigned int flags, const char *extra,
    struct th_reply *r)
{
	const char *hdrs[] = { extra, NULL };

	ck_assert_msg(th_fetch_ex(h, s->port, path, flags, hdrs, r) == CURLE_OK, "%s: %s", path,
		      curl_easy_strerror(r->rc));
}

/* The first header line named name, "" when there is none. */
static const char *
hdr(const struct th_reply *r, const char *name)
{
	const char *v = th_header(r, name, NULL);

	return v ? v : "";
}

/* Every payload endpoint, raw gzip and identity, on one connection: the
 * gzip body inflates (zlib, Z_STREAM_END) to exactly the generator's bytes,
 * and so does the identity body. */
START_TEST(test_payloads_keepalive)
{
	static const size_t sizes[3] = { PAYLOAD_JSON_2K, PAYLOAD_JSON_20K, PAYLOAD_JSON_100K };
	static const char *const paths[3] = { "/2k.json", "/20k.json", "/100k.json" };
	struct server s;
	struct th_reply x = { 0 };
	CURL *h = th_curl_new();
	unsigned int i;

	server_start(&s, NULL);
	for (i = 0; i < 3; i++) {
		uint8_t *want, *got;
		size_t want_len = payload_json_sized(sizes[i], &want), got_len;

		ck_assert_uint_eq(want_len, sizes[i]);
		get(h, &s, paths[i], TH_GZIP, NULL, &x);
		ck_assert_int_eq(x.status, 200);
		ck_assert_str_eq(hdr(&x, "Content-Encoding"), "gzip");
		ck_assert_str_eq(hdr(&x, "Vary"), "Accept-Encoding");
		ck_assert_int_eq(tu_gunzip(x.body, x.body_len, &got, &got_len), 0);
		ck_assert_uint_eq(got_len, want_len);
		ck_assert_int_eq(memcmp(got, want, want_len), 0);
		free(got);
		if (i > 0)
			ck_assert_int_eq(x.num_connects, 0); /* reused */

		get(h, &s, paths[i], 0, NULL, &x);
		ck_assert_int_eq(x.status, 200);
		ck_assert_str_eq(hdr(&x, "Content-Encoding"), "");
		ck_assert_uint_eq(x.body_len, want_len);
		ck_assert_int_eq(memcmp(x.body, want, want_len), 0);
		ck_assert_int_eq(x.num_connects, 0);
		free(want);
	}
	th_reply_free(&x);
	curl_easy_cleanup(h);
	ck_assert_int_eq(server_stop(&s), 0);
}
END_TEST

/* A keep-alive sequence mixing 200, 304, HEAD and 404 on one connection,
 * each answered right. */
START_TEST(test_conditional_sequence)
{
	struct server s;
	struct th_reply x = { 0 };
	CURL *h = th_curl_new();
	char etag[128], inm[192];

	server_start(&s, NULL);
	get(h, &s, "/20k.json", TH_GZIP, NULL, &x);
	ck_assert_int_eq(x.status, 200);
	snprintf(etag, sizeof etag, "%s", hdr(&x, "ETag"));
	ck_assert_msg(strncmp(etag, "W/\"", 3) == 0, "gzip ETag '%s' is not weak", etag);

	snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
	get(h, &s, "/20k.json", TH_GZIP, inm, &x);
	ck_assert_int_eq(x.status, 304);
	ck_assert_uint_eq(x.body_len, 0);
	ck_assert_str_eq(hdr(&x, "ETag"), etag);
	ck_assert_int_eq(x.num_connects, 0);

	get(h, &s, "/20k.json", TH_GZIP | TH_HEAD, NULL, &x);
	ck_assert_int_eq(x.status, 200);
	ck_assert_str_eq(hdr(&x, "Content-Encoding"), "gzip");
	ck_assert_uint_eq(x.body_len, 0);
	ck_assert_int_eq(x.num_connects, 0);

	get(h, &s, "/nope", TH_GZIP, NULL, &x);
	ck_assert_int_eq(x.status, 404);
	ck_assert_int_eq(x.num_connects, 0);

	get(h, &s, "/", 0, NULL, &x);
	ck_assert_int_eq(x.status, 200);
	ck_assert_ptr_nonnull(memmem(x.body, x.body_len, "/app.js", 7));
	ck_assert_int_eq(x.num_connects, 0);
	th_reply_free(&x);
	curl_easy_cleanup(h);
	ck_assert_int_eq(server_stop(&s), 0);
}
END_TEST

/* /events decoded by libcurl as it arrives: each event is flushed through
 * the gzip stream when it happens, not at the end. */
struct events_seen {
	double t[16];
	int n;
};

/* Every "data:" line seen so far, the new ones timed now. */
static void
events_on_data(struct th_reply *r, const uint8_t *p, size_t n)
{
	struct events_seen *e = r->cls;
	int count = 0;

	(void)p;
	(void)n;
	for (const uint8_t *q = r->body, *end = r->body + r->body_len;
	     (q = memmem(q, (size_t)(end - q), "data: ", 6)); q++)
		count++;
	while (e->n < count && e->n < 16)
		e->t[e->n++] = now_s();
}

START_TEST(test_events_incremental)
{
	struct server s;
	struct events_seen e;
	struct th_reply r = { 0 };
	CURLcode rc;

	memset(&e, 0, sizeof e);
	server_start(&s, NULL);
	r.on_data = events_on_data;
	r.cls = &e;
	r.timeout_ms = 3600;
	rc = th_fetch(NULL, s.port, "/events", TH_DECODE, &r);
	ck_assert_msg(rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_OK, "%s",
		      curl_easy_strerror(rc));
	ck_assert_msg(e.n >= 3, "only %d events in 3.6 s", e.n);
	/* 2 s apart at the server; buffered delivery would make it ~0. */
	ck_assert_msg(e.t[2] - e.t[0] >= 1.0, "events 1-3 arrived within %.3f s: buffered",
		      e.t[2] - e.t[0]);
	ck_assert_ptr_nonnull(memmem(r.body, r.body_len, "data: {\"n\":3,", 13));
	th_reply_free(&r);
	ck_assert_int_eq(server_stop(&s), 0);
}
END_TEST

/* 16 transfers at once through a multi handle, libcurl decoding gzip; every
 * body is the generator's bytes. */
START_TEST(test_concurrent_16)
{
	struct server s;
	CURLM *m;
	CURL *h[16];
	struct th_reply b[16];
	uint8_t *want;
	size_t want_len = payload_json_sized(PAYLOAD_JSON_100K, &want);
	int running = 1, i, msgs;
	double deadline;
	CURLMsg *msg;

	server_start(&s, NULL);
	m = curl_multi_init();
	memset(b, 0, sizeof b);
	for (i = 0; i < 16; i++) {
		h[i] = th_curl_new();
		b[i].timeout_ms = CG_TIMEOUT_S * 1000;
		th_curl_prepare(h[i], s.port, "/100k.json", TH_DECODE, &b[i]);
		curl_easy_setopt(h[i], CURLOPT_ACCEPT_ENCODING, (i % 2) ? "gzip" : "identity");
		curl_multi_add_handle(m, h[i]);
	}
	deadline = now_s() + CG_TIMEOUT_S;
	while (running && now_s() < deadline) {
		curl_multi_perform(m, &running);
		if (running)
			curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	ck_assert_int_eq(running, 0);
	while ((msg = curl_multi_info_read(m, &msgs)))
		ck_assert_msg(msg->data.result == CURLE_OK, "%s",
			      curl_easy_strerror(msg->data.result));
	for (i = 0; i < 16; i++) {
		ck_assert_uint_eq(b[i].body_len, want_len);
		ck_assert_int_eq(memcmp(b[i].body, want, want_len), 0);
		curl_multi_remove_handle(m, h[i]);
		curl_easy_cleanup(h[i]);
		th_reply_free(&b[i]);
	}
	curl_multi_cleanup(m);
	free(want);
	ck_assert_int_eq(server_stop(&s), 0);
}
END_TEST

/* SIGTERM while /events streams: the stream ends cleanly (complete gzip,
 * last chunk), and gzserve exits 0. */
START_TEST(test_sigterm_in_flight)
{
	struct server s;
	struct th_reply b = { 0 };
	CURLM *m;
	CURL *h;
	int running = 1, msgs, st = -1;
	double t0, deadline;
	CURLMsg *msg;
	CURLcode result = CURLE_OK;
	bool signalled = false;

	server_start(&s, NULL);
	m = curl_multi_init();
	h = th_curl_new();
	b.timeout_ms = CG_TIMEOUT_S * 1000;
	th_curl_prepare(h, s.port, "/events", TH_DECODE, &b);
	curl_multi_add_handle(m, h);
	t0 = now_s();
	deadline = t0 + CG_TIMEOUT_S;
	while (running && now_s() < deadline) {
		curl_multi_perform(m, &running);
		if (!signalled && now_s() - t0 > 1.5) {
			kill(s.pid, SIGTERM);
			signalled = true;
		}
		if (running)
			curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	ck_assert_int_eq(running, 0);
	while ((msg = curl_multi_info_read(m, &msgs)))
		result = msg->data.result;
	ck_assert_msg(result == CURLE_OK, "the in-flight stream failed: %s",
		      curl_easy_strerror(result));
	ck_assert_ptr_nonnull(memmem(b.body ? b.body : (const uint8_t *)"", b.body_len,
				     "data: {\"n\":1,", 13));
	ck_assert_msg(now_s() - t0 < 8.0, "the stream did not end at SIGTERM");
	curl_multi_remove_handle(m, h);
	curl_easy_cleanup(h);
	curl_multi_cleanup(m);
	th_reply_free(&b);
	for (int i = 0; i < 300 && waitpid(s.pid, &st, WNOHANG) != s.pid; i++)
		usleep(50000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gzserve did not exit 0 (%d)", st);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Files under --root (examples/gzserve/files.c, beneath.c)                 */

/* How long a file must be unchanged before the library's file cache
 * (--cache-size) remembers its coded body, plus a margin. */
#define CG_KEEP_AGE_US 2200000u

/* A scratch directory: base (the server's stderr files) holding www/ (the
 * root). */
struct keep_tree {
	char base[64];
	char root[96];
};

static void
tree_new(struct keep_tree *t)
{
	snprintf(t->base, sizeof t->base, "/tmp/cgkeepXXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(t->base));
	snprintf(t->root, sizeof t->root, "%s/www", t->base);
	ck_assert_int_eq(mkdir(t->root, 0755), 0);
}

static void
tree_free(struct keep_tree *t)
{
	char cmd[160];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->base);
	ck_assert_int_eq(system(cmd), 0);
}

static void
put_file(const struct keep_tree *t, const char *name, const void *data, size_t len)
{
	char path[160];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", t->root, name);
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

/* The response's bytes without its Date line (the one line two servers
 * may not share), malloc'd, NUL-terminated. */
static char *
without_date(const struct th_raw_response *r, size_t *len_ret)
{
	char *out = malloc(r->len + 1);
	size_t i = 0, o = 0;

	ck_assert_ptr_nonnull(out);
	while (i < r->len) {
		size_t eol = i;

		while (eol < r->len && r->bytes[eol] != '\n')
			eol++;
		if (eol < r->len)
			eol++;
		if (!(i < r->head_len && eol - i > 5 &&
		      strncasecmp((const char *)r->bytes + i, "date:", 5) == 0)) {
			memcpy(out + o, r->bytes + i, eol - i);
			o += eol - i;
		}
		i = eol;
	}
	out[o] = '\0';
	*len_ret = o;
	return out;
}

/* GET path (AE: an Accept-Encoding value or NULL) on a new connection;
 * the response read exactly. */
static void
raw_get(uint16_t port, const char *path, const char *ae, struct th_raw_response *resp)
{
	char req[256];
	int fd = th_raw_connect(port);

	snprintf(req, sizeof req,
		 "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%sConnection: close\r\n\r\n", path,
		 ae ? "Accept-Encoding: " : "", ae ? ae : "", ae ? "\r\n" : "");
	th_raw_send(fd, req, strlen(req));
	ck_assert_msg(th_raw_read_response(fd, false, 10000, resp) == 0, "GET %s", path);
	close(fd);
}

/* The body of resp decoded (gzip when Content-Encoding says so) equals
 * want[0..want_len). */
static void
expect_body(const struct th_raw_response *resp, const void *want, size_t want_len, const char *ctx)
{
	size_t ce_len;
	const char *ce = th_raw_header(resp, "Content-Encoding", &ce_len);
	const uint8_t *body = resp->bytes + resp->body_off;
	size_t body_len = resp->len - resp->body_off;
	uint8_t *dec = NULL, *unchunked = NULL;
	size_t dec_len = 0, nchunks;
	bool early;

	if (resp->chunked) {
		ck_assert_msg(th_dechunk(body, body_len, &unchunked, &body_len, &nchunks, &early) ==
				      0,
			      "%s: bad chunked framing", ctx);
		body = unchunked;
	}
	if (ce && ce_len == 4 && strncmp(ce, "gzip", 4) == 0) {
		ck_assert_msg(tu_gunzip(body, body_len, &dec, &dec_len) == 0, "%s: bad gzip", ctx);
		body = dec;
		body_len = dec_len;
	}
	ck_assert_msg(body_len == want_len && memcmp(body, want, want_len) == 0,
		      "%s: %zu bytes, not the file's %zu", ctx, body_len, want_len);
	free(dec);
	free(unchunked);
}

/* GET path (ae: an Accept-Encoding value or NULL) on a new connection:
 * the body is want[0..want_len), decoded. */
static void
expect_get(uint16_t port, const char *path, const char *ae, const void *want, size_t want_len,
	   const char *ctx)
{
	struct th_raw_response r = { 0 };

	raw_get(port, path, ae, &r);
	expect_body(&r, want, want_len, ctx);
	th_raw_response_free(&r);
}

/* Write name with data, its access and modification times then set back
 * to those like (a file under the root) had before: only the change time
 * (and the size, the inode) can tell. */
static void
put_file_times_of(const struct keep_tree *t, const char *name, const char *like, const void *data,
		  size_t len)
{
	char path[160], like_path[160];
	struct stat st;
	struct timespec times[2];

	snprintf(like_path, sizeof like_path, "%s/%s", t->root, like);
	snprintf(path, sizeof path, "%s/%s", t->root, name);
	ck_assert_int_eq(stat(like_path, &st), 0);
	put_file(t, name, data, len);
	times[0] = st.st_atim;
	times[1] = st.st_mtim;
	ck_assert_int_eq(utimensat(AT_FDCWD, path, times, 0), 0);
}

/* A server with the file cache (the default --cache-size) and one with
 * --cache-size 0, on the same files, answer every request with the same
 * bytes (Date aside): GET and HEAD, gzip and identity, 304, 412, a range,
 * for files the cache keeps and files too large or empty for it. All
 * requests go pipelined on one connection per server, each response read
 * exactly, and nothing follows the last. */
START_TEST(test_files_wire_parity)
{
	/* "" and "sub/": directory pages (their index.html). */
	/* mid.json: 100,000 bytes, compressed whole (up to 1 MiB). */
	static const char *const names[] = { "page.html", "data.json", "photo.png", "one.txt",  "",
					     "sub/",      "mid.json",  "big.txt",   "empty.txt" };
	static const char *const files[] = { "page.html", "data.json",  "photo.png",
					     "one.txt",   "index.html", "sub/index.html",
					     "mid.json",  "big.txt",    "empty.txt" };
	static const struct {
		bool head;
		const char *fields; /* after Host */
	} reqs[] = {
		{ false, "Accept-Encoding: gzip\r\n" },
		{ false, "" },
		{ true, "Accept-Encoding: gzip\r\n" },
		{ true, "" },
		{ false, "If-None-Match: *\r\nAccept-Encoding: gzip\r\n" },
		{ false, "If-Match: \"other\"\r\n" },
		{ false, "Range: bytes=0-0\r\n" },
		{ false, "If-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n" },
		{ false, "Accept-Encoding: gzip\r\n" },
	};
	const size_t nreq = sizeof reqs / sizeof reqs[0];
	struct keep_tree t;
	struct server kept, plain;
	char pipe_req[4096];
	const char *args[] = { "--root", t.root, NULL };
	const char *args0[] = { "--root", t.root, "--cache-size", "0", NULL };
	uint8_t *page = tu_payload(20000, TU_TEXT, 1), *photo = tu_payload(20008, TU_RANDOM, 2);
	uint8_t *big = tu_payload(1536 * 1024, TU_TEXT, 3), *json;
	size_t json_len = payload_json_sized(5000, &json), p;
	const struct {
		const uint8_t *data;
		size_t len;
	} content[] = { { page, 20000 },           { json, json_len },
			{ photo, 20008 },          { (const uint8_t *)"x", 1 },
			{ page + 100, 5000 },      { json + 10, 3000 },
			{ big + 7, 100000 },       { big, 1536 * 1024 },
			{ (const uint8_t *)"", 0 } };
	char sub_dir[160];

	memcpy(photo, "\x89PNG\r\n\x1a\n", 8);
	tree_new(&t);
	snprintf(sub_dir, sizeof sub_dir, "%s/sub", t.root);
	ck_assert_int_eq(mkdir(sub_dir, 0755), 0);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		put_file(&t, files[i], content[i].data, content[i].len);
	tu_sleep_us(CG_KEEP_AGE_US);
	server_start_args(&kept, args, NULL);
	server_start_args(&plain, args0, NULL);

	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		int fk = th_raw_connect(kept.port), fp = th_raw_connect(plain.port);

		for (p = 0, pipe_req[0] = '\0'; p < nreq; p++) {
			size_t used = strlen(pipe_req);

			snprintf(pipe_req + used, sizeof pipe_req - used,
				 "%s /%s HTTP/1.1\r\nHost: a\r\n%s\r\n",
				 reqs[p].head ? "HEAD" : "GET", names[i], reqs[p].fields);
		}
		th_raw_send(fk, pipe_req, strlen(pipe_req));
		th_raw_send(fp, pipe_req, strlen(pipe_req));
		for (p = 0; p < nreq; p++) {
			struct th_raw_response rk = { 0 }, rp = { 0 };
			char *a, *b, ctx[96];
			size_t alen, blen;

			snprintf(ctx, sizeof ctx, "/%s request %zu", names[i], p + 1);
			ck_assert_msg(th_raw_read_response(fk, reqs[p].head, 10000, &rk) == 0,
				      "%s: cache server", ctx);
			ck_assert_msg(th_raw_read_response(fp, reqs[p].head, 10000, &rp) == 0,
				      "%s: --cache-size 0 server", ctx);
			a = without_date(&rk, &alen);
			b = without_date(&rp, &blen);
			ck_assert_msg(alen == blen && memcmp(a, b, alen) == 0,
				      "%s: the wire differs:\n--- cache\n%.*s\n--- no cache\n%.*s",
				      ctx, (int)rk.head_len, a, (int)rp.head_len, b);
			if (!reqs[p].head && rk.status == 200)
				expect_body(&rk, content[i].data, content[i].len, ctx);
			free(a);
			free(b);
			th_raw_response_free(&rk);
			th_raw_response_free(&rp);
		}
		th_raw_expect_idle(fk, 100, "cache server after the pipeline");
		th_raw_expect_idle(fp, 100, "--cache-size 0 server after the pipeline");
		close(fk);
		close(fp);
	}
	ck_assert_int_eq(server_stop(&kept), 0);
	ck_assert_int_eq(server_stop(&plain), 0);
	tree_free(&t);
	free(page);
	free(photo);
	free(big);
	free(json);
}
END_TEST

/* The file cache never serves a coded body of a file that changed:
 * rewritten in place with the same size and modification time, grown
 * with the same modification time, replaced by a rename, replaced by a
 * symlink to a file outside the root, deleted. Each next GET gets the
 * file as it is now (or what gzserve with --cache-size 0 answers). */
START_TEST(test_files_never_stale)
{
	struct keep_tree t;
	struct server kept, plain;
	struct th_raw_response r = { 0 }, r0 = { 0 };
	char path[160], path2[160], secret[160];
	const char *args[] = { "--root", t.root, NULL };
	const char *args0[] = { "--root", t.root, "--cache-size", "0", NULL };
	uint8_t *v1 = tu_payload(8000, TU_TEXT, 10), *v2 = tu_payload(8000, TU_TEXT, 11);
	uint8_t *v3 = tu_payload(9000, TU_TEXT, 12);
	uint8_t *w1 = tu_payload(100000, TU_TEXT, 13), *w2 = tu_payload(100000, TU_TEXT, 14);

	tree_new(&t);
	for (int i = 1; i <= 5; i++) {
		snprintf(path, sizeof path, "m%d.txt", i);
		put_file(&t, path, v1, 8000);
	}
	snprintf(path, sizeof path, "%s/d", t.root);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	put_file(&t, "d/m6.txt", v1, 8000);
	/* m7: 100,000 bytes. */
	put_file(&t, "m7.txt", w1, 100000);
	snprintf(secret, sizeof secret, "%s/secret.txt", t.base);
	{
		FILE *f = fopen(secret, "w");

		ck_assert_ptr_nonnull(f);
		fputs("TOP-SECRET-OUTSIDE-ROOT\n", f);
		fclose(f);
	}
	tu_sleep_us(CG_KEEP_AGE_US);
	server_start_args(&kept, args, NULL);
	server_start_args(&plain, args0, NULL);
	expect_get(kept.port, "/m7.txt", "gzip", w1, 100000, "m7");
	for (int i = 1; i <= 6; i++) { /* each coded body cached */
		snprintf(path, sizeof path, i == 6 ? "/d/m%d.txt" : "/m%d.txt", i);
		expect_get(kept.port, path, "gzip", v1, 8000, path);
	}

	/* m1: the same size, other bytes, the modification time set back:
	 * only the change time tells. */
	put_file_times_of(&t, "m1.txt", "m1.txt", v2, 8000);
	expect_get(kept.port, "/m1.txt", "gzip", v2, 8000, "m1 rewritten in place");

	/* m2: grown, the modification time set back. */
	put_file_times_of(&t, "m2.txt", "m2.txt", v3, 9000);
	expect_get(kept.port, "/m2.txt", NULL, v3, 9000, "m2 grown");

	/* m3: replaced by a rename (another inode), same size and time. */
	put_file_times_of(&t, "m3.new", "m3.txt", v2, 8000);
	snprintf(path, sizeof path, "%s/m3.txt", t.root);
	snprintf(path2, sizeof path2, "%s/m3.new", t.root);
	ck_assert_int_eq(rename(path2, path), 0);
	expect_get(kept.port, "/m3.txt", "gzip", v2, 8000, "m3 replaced by rename");

	/* m4: a symlink to a file outside the root: what gzserve answers
	 * without the cache, and never the file's bytes. */
	snprintf(path, sizeof path, "%s/m4.txt", t.root);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(symlink(secret, path), 0);
	raw_get(kept.port, "/m4.txt", NULL, &r);
	raw_get(plain.port, "/m4.txt", NULL, &r0);
	ck_assert_int_eq(r.status, r0.status);
	ck_assert_int_ne(r.status, 200);
	ck_assert_ptr_null(memmem(r.bytes, r.len, "TOP-SECRET", 10));
	th_raw_response_free(&r);
	th_raw_response_free(&r0);

	/* m5: deleted. */
	snprintf(path, sizeof path, "%s/m5.txt", t.root);
	ck_assert_int_eq(unlink(path), 0);
	raw_get(kept.port, "/m5.txt", NULL, &r);
	ck_assert_int_eq(r.status, 404);
	th_raw_response_free(&r);

	/* d/m6: its directory moved out of the root and a symlink to it put
	 * in its place: the same file, unchanged, which the open beneath the
	 * root now refuses. */
	snprintf(path, sizeof path, "%s/d", t.root);
	snprintf(path2, sizeof path2, "%s/d-outside", t.base);
	ck_assert_int_eq(rename(path, path2), 0);
	ck_assert_int_eq(symlink(path2, path), 0);
	raw_get(kept.port, "/d/m6.txt", NULL, &r);
	raw_get(plain.port, "/d/m6.txt", NULL, &r0);
	ck_assert_int_eq(r.status, r0.status);
	ck_assert_int_ne(r.status, 200);
	th_raw_response_free(&r);
	th_raw_response_free(&r0);

	/* m7: rewritten in place, the same size, the times set back but the
	 * change time: the gzip body and the identity body are the new
	 * bytes. */
	put_file_times_of(&t, "m7.txt", "m7.txt", w2, 100000);
	expect_get(kept.port, "/m7.txt", "gzip", w2, 100000, "m7 rewritten, gzip");
	expect_get(kept.port, "/m7.txt", NULL, w2, 100000, "m7 rewritten, identity");

	/* m1 again, written again first: changed just now, and the new
	 * bytes. */
	put_file_times_of(&t, "m1.txt", "m1.txt", v2, 8000);
	expect_get(kept.port, "/m1.txt", NULL, v2, 8000, "m1 again");

	ck_assert_int_eq(server_stop(&kept), 0);
	ck_assert_int_eq(server_stop(&plain), 0);
	tree_free(&t);
	free(v1);
	free(v2);
	free(v3);
	free(w1);
	free(w2);
}
END_TEST

/* An absolute symlink inside the root naming a file under it (refused
 * by openat2 with RESOLVE_BENEATH, resolved by beneath.c's walk from the
 * root's descriptor) is served; a file named with a slash ("/f.txt/") is
 * a 404, as nginx answers (ENOTDIR); a gzip 304, then the gzip 200. */
START_TEST(test_files_lookup_and_304)
{
	struct keep_tree t;
	struct server kept;
	struct th_raw_response r = { 0 };
	char path[160], target[160], req[256];
	const char *args[] = { "--root", t.root, NULL };
	uint8_t *body = tu_payload(10000, TU_TEXT, 30);
	int fd;

	tree_new(&t);
	put_file(&t, "f.txt", body, 10000);
	snprintf(path, sizeof path, "%s/abs.txt", t.root);
	snprintf(target, sizeof target, "%s/f.txt", t.root);
	ck_assert_int_eq(symlink(target, path), 0);
	tu_sleep_us(CG_KEEP_AGE_US);
	server_start_args(&kept, args, NULL);
	for (int i = 0; i < 2; i++) {
		expect_get(kept.port, "/abs.txt", "gzip", body, 10000, "absolute symlink");
		raw_get(kept.port, "/f.txt/", NULL, &r);
		ck_assert_msg(r.status == 404, "/f.txt/: status %d, want 404", r.status);
		th_raw_response_free(&r);
	}
	expect_get(kept.port, "/f.txt", NULL, body, 10000, "f.txt");
	fd = th_raw_connect(kept.port);
	snprintf(req, sizeof req,
		 "GET /f.txt HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: gzip\r\n"
		 "If-None-Match: *\r\nConnection: close\r\n\r\n");
	th_raw_send(fd, req, strlen(req));
	ck_assert_int_eq(th_raw_read_response(fd, false, 10000, &r), 0);
	ck_assert_int_eq(r.status, 304);
	close(fd);
	th_raw_response_free(&r);
	expect_get(kept.port, "/f.txt", "gzip", body, 10000, "f.txt, gzip after the 304");
	ck_assert_int_eq(server_stop(&kept), 0);
	tree_free(&t);
	free(body);
}
END_TEST

/* Eight threads, 40 requests each, over five files (gzip and identity
 * alternating) while a small --cache-size evicts and re-adds their coded
 * bodies all along: every body is its file's. Under ThreadSanitizer
 * (.ci/run) a race makes gzserve exit 66 and the test fail. */
#define CG_KC_THREADS 8
#define CG_KC_REQS 40

struct kc_arg {
	uint16_t port;
	int id;
	const uint8_t *body[5];
	atomic_int *bad;
};

static void *
kc_thread(void *p)
{
	struct kc_arg *a = p;
	CURL *h = curl_easy_init();
	static const char *const ae[] = { "Accept-Encoding: gzip", NULL };

	if (!h) {
		atomic_fetch_add(a->bad, 1);
		return NULL;
	}
	for (int i = 0; i < CG_KC_REQS; i++) {
		int k = (a->id + i) % 5;
		char path[32];
		struct th_reply r = { 0 };
		uint8_t *dec = NULL;
		size_t dec_len = 0;
		bool gz = (i & 1) != 0;

		r.timeout_ms = CG_TIMEOUT_S * 1000;
		snprintf(path, sizeof path, "/k%d.txt", k);
		if (th_fetch_ex(h, a->port, path, 0, gz ? ae : NULL, &r) != CURLE_OK ||
		    r.status != 200) {
			atomic_fetch_add(a->bad, 1);
		} else if (gz) {
			if (tu_gunzip(r.body, r.body_len, &dec, &dec_len) != 0 || dec_len != 9000 ||
			    memcmp(dec, a->body[k], 9000) != 0)
				atomic_fetch_add(a->bad, 1);
			free(dec);
		} else if (r.body_len != 9000 || memcmp(r.body, a->body[k], 9000) != 0) {
			atomic_fetch_add(a->bad, 1);
		}
		th_reply_free(&r);
	}
	curl_easy_cleanup(h);
	return NULL;
}

START_TEST(test_files_concurrent)
{
	struct keep_tree t;
	struct server kept;
	char name[32];
	/* 8,000 bytes: room for the coded bodies of a few of the files. */
	const char *args[] = { "--root", t.root, "--cache-size", "8000", "--threads", "4", NULL };
	uint8_t *body[5];
	pthread_t th[CG_KC_THREADS];
	struct kc_arg arg[CG_KC_THREADS];
	atomic_int bad;

	atomic_init(&bad, 0);
	tree_new(&t);
	for (int k = 0; k < 5; k++) {
		body[k] = tu_payload(9000, TU_TEXT, (uint32_t)(40 + k));
		snprintf(name, sizeof name, "k%d.txt", k);
		put_file(&t, name, body[k], 9000);
	}
	tu_sleep_us(CG_KEEP_AGE_US);
	server_start_args(&kept, args, NULL);
	for (int i = 0; i < CG_KC_THREADS; i++) {
		arg[i] = (struct kc_arg){ .port = kept.port, .id = i, .bad = &bad };
		memcpy(arg[i].body, body, sizeof arg[i].body);
		ck_assert_int_eq(pthread_create(&th[i], NULL, kc_thread, &arg[i]), 0);
	}
	for (int i = 0; i < CG_KC_THREADS; i++)
		pthread_join(th[i], NULL);
	ck_assert_int_eq(atomic_load(&bad), 0);
	ck_assert_int_eq(server_stop(&kept), 0);
	tree_free(&t);
	for (int k = 0; k < 5; k++)
		free(body[k]);
}
END_TEST

/* A Linux native AIO write (io_submit), its writer keeping the file
 * open, is seen by the next GET: the file cache keys a coded body on the
 * file's size and change time, which the write moves on. */
START_TEST(test_files_aio_write)
{
	static char buf[4096] __attribute__((aligned(4096)));
	struct keep_tree t;
	struct server kept;
	char path[192];
	const char *args[] = { "--root", t.root, NULL };
	uint8_t *v1 = tu_payload(4096, TU_TEXT, 70), *v2 = tu_payload(4096, TU_TEXT, 71);
	aio_context_t ctx = 0;
	struct iocb cb = { 0 }, *cbs[1] = { &cb };
	struct io_event ev;
	int fd;

	tree_new(&t);
	put_file(&t, "a.txt", v1, 4096);
	tu_sleep_us(CG_KEEP_AGE_US);
	server_start_args(&kept, args, NULL);
	for (int i = 0; i < 3; i++)
		expect_get(kept.port, "/a.txt", "gzip", v1, 4096, "a.txt");
	snprintf(path, sizeof path, "%s/a.txt", t.root);
	fd = open(path, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(syscall(SYS_io_setup, 1, &ctx), 0);
	memcpy(buf, v2, 4096);
	cb.aio_fildes = (uint32_t)fd;
	cb.aio_lio_opcode = IOCB_CMD_PWRITE;
	cb.aio_buf = (uint64_t)(uintptr_t)buf;
	cb.aio_nbytes = 4096;
	ck_assert_int_eq(syscall(SYS_io_submit, ctx, 1, cbs), 1);
	ck_assert_int_eq(syscall(SYS_io_getevents, ctx, 1, 1, &ev, NULL), 1);
	ck_assert_int_eq(ev.res, 4096);
	expect_get(kept.port, "/a.txt", "gzip", v2, 4096, "a.txt after the AIO write");
	ck_assert_int_eq(server_stop(&kept), 0);
	ck_assert_int_eq(close(fd), 0);
	ck_assert_int_eq(syscall(SYS_io_destroy, ctx), 0);
	tree_free(&t);
	free(v1);
	free(v2);
}
END_TEST

/* The path under the root of each file of test_files_changes, in the
 * order they are changed. */
static const char *const cg_notified[] = {
	"a1.txt",      /* rewritten in place, the times set back */
	"a2.txt",      /* replaced by a rename */
	"a3.txt",      /* deleted */
	"a4.txt",      /* made unreadable (chmod 0) */
	"d1/b.txt",    /* its directory made unreadable */
	"x/y/z/c.txt", /* x/y renamed, a new x/y/z/c.txt in its place */
	"h.txt",       /* a hard link made outside the root, written through it */
	"m/mf.txt",    /* a tmpfs mounted over m/ holding another mf.txt */
	"s/sf.txt",    /* s: a symlink to d2/, the file beneath rewritten */
	"u.txt",       /* unchanged */
};
#define CG_NOTIFIED_N (sizeof cg_notified / sizeof cg_notified[0])

/* Make test_files_changes's change number i (its file's new bytes: w).
 * false when it cannot be made here (mount(2) not permitted). */
static bool
notified_change(const struct keep_tree *t, size_t i, const uint8_t *w)
{
	char path[192], path2[192];
	FILE *f;

	switch (i) {
	case 0:
		put_file_times_of(t, "a1.txt", "a1.txt", w, 7000);
		return true;
	case 1:
		put_file_times_of(t, "a2.new", "a2.txt", w, 7000);
		snprintf(path, sizeof path, "%s/a2.new", t->root);
		snprintf(path2, sizeof path2, "%s/a2.txt", t->root);
		ck_assert_int_eq(rename(path, path2), 0);
		return true;
	case 2:
		snprintf(path, sizeof path, "%s/a3.txt", t->root);
		ck_assert_int_eq(unlink(path), 0);
		return true;
	case 3:
	case 4:
		snprintf(path, sizeof path, "%s/%s", t->root, i == 3 ? "a4.txt" : "d1");
		ck_assert_int_eq(chmod(path, 0), 0);
		return true;
	case 5:
		snprintf(path, sizeof path, "%s/x/y", t->root);
		snprintf(path2, sizeof path2, "%s/x/y.old", t->root);
		ck_assert_int_eq(rename(path, path2), 0);
		ck_assert_int_eq(mkdir(path, 0755), 0);
		snprintf(path, sizeof path, "%s/x/y/z", t->root);
		ck_assert_int_eq(mkdir(path, 0755), 0);
		put_file(t, "x/y/z/c.txt", w, 7000);
		return true;
	case 6:
		snprintf(path, sizeof path, "%s/h.txt", t->root);
		snprintf(path2, sizeof path2, "%s/h-link", t->base);
		ck_assert_int_eq(link(path, path2), 0);
		f = fopen(path2, "r+b"); /* the same inode, written in place */
		ck_assert_ptr_nonnull(f);
		ck_assert_uint_eq(fwrite(w, 1, 7000, f), 7000);
		ck_assert_int_eq(fclose(f), 0);
		return true;
	case 7:
		snprintf(path, sizeof path, "%s/m", t->root);
		if (mount("cgkeep", path, "tmpfs", 0, "size=1m") != 0) {
			printf("test_files_changes: mount(2) not permitted (%s): the mount step "
			       "is skipped\n",
			       strerror(errno));
			return false;
		}
		put_file(t, "m/mf.txt", w, 7000);
		return true;
	default:
		put_file_times_of(t, "d2/sf.txt", "d2/sf.txt", w, 7000);
		return true;
	}
}

/* Changes only a new lookup sees: every file is first served three times
 * (the cache then holds its gzip body); then, one file at a time, a file
 * is changed, and its next GET answers as gzserve with --cache-size 0
 * does (with the bytes on disk); every file not changed yet is served
 * once more. The mount step runs where mount(2) is permitted (root with
 * CAP_SYS_ADMIN). */
START_TEST(test_files_changes)
{
	static const char *const dirs[] = { "d1", "x", "x/y", "x/y/z", "m", "d2" };
	struct keep_tree t;
	struct server kept, plain;
	struct th_raw_response r = { 0 }, r0 = { 0 };
	char path[192], url[64];
	const char *args[] = { "--root", t.root, NULL };
	const char *args0[] = { "--root", t.root, "--cache-size", "0", NULL };
	uint8_t *v[CG_NOTIFIED_N], *w = tu_payload(7000, TU_TEXT, 99);
	bool mounted = false;
	size_t i, k;

	tree_new(&t);
	for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		snprintf(path, sizeof path, "%s/%s", t.root, dirs[i]);
		ck_assert_int_eq(mkdir(path, 0755), 0);
	}
	snprintf(path, sizeof path, "%s/s", t.root);
	ck_assert_int_eq(symlink("d2", path), 0);
	for (i = 0; i < CG_NOTIFIED_N; i++) {
		v[i] = tu_payload(7000, TU_TEXT, (uint32_t)(60 + i));
		put_file(&t, i == 8 ? "d2/sf.txt" : cg_notified[i], v[i], 7000);
	}
	tu_sleep_us(CG_KEEP_AGE_US);
	server_start_args(&kept, args, NULL);
	server_start_args(&plain, args0, NULL);
	for (int round = 0; round < 3; round++)
		for (i = 0; i < CG_NOTIFIED_N; i++) {
			snprintf(url, sizeof url, "/%s", cg_notified[i]);
			expect_get(kept.port, url, round == 1 ? NULL : "gzip", v[i], 7000, url);
		}

	for (i = 0; i + 1 < CG_NOTIFIED_N; i++) {
		size_t len, len0;
		char *a, *b;
		bool same = i == 3 || i == 4; /* a mode change: the same bytes */

		if (!notified_change(&t, i, w))
			continue;
		mounted |= i == 7;
		snprintf(url, sizeof url, "/%s", cg_notified[i]);
		raw_get(kept.port, url, "gzip", &r);
		raw_get(plain.port, url, "gzip", &r0);
		a = without_date(&r, &len);
		b = without_date(&r0, &len0);
		ck_assert_msg(len == len0 && memcmp(a, b, len) == 0,
			      "%s: cache:\n%s\nno cache:\n%s", url, a, b);
		if (r0.status == 200)
			expect_body(&r, same ? v[i] : w, 7000, url);
		free(a);
		free(b);
		th_raw_response_free(&r);
		th_raw_response_free(&r0);
		for (k = i + 1; k < CG_NOTIFIED_N; k++) {
			snprintf(url, sizeof url, "/%s", cg_notified[k]);
			expect_get(kept.port, url, "gzip", v[k], 7000, url);
		}
	}
	expect_get(kept.port, "/u.txt", "gzip", v[CG_NOTIFIED_N - 1], 7000, "u.txt again");
	if (mounted) {
		snprintf(path, sizeof path, "%s/m", t.root);
		ck_assert_int_eq(umount(path), 0);
	}
	ck_assert_int_eq(server_stop(&kept), 0);
	ck_assert_int_eq(server_stop(&plain), 0);
	snprintf(path, sizeof path, "%s/d1", t.root);
	ck_assert_int_eq(chmod(path, 0755), 0);
	tree_free(&t);
	for (i = 0; i < CG_NOTIFIED_N; i++)
		free(v[i]);
	free(w);
}
END_TEST

/* test_files_swap_race: the swapping thread's state. */
struct swap_arg {
	char dir[192], link[192], tmp[192]; /* www/d, www/d.link, www/d.dir */
	atomic_bool stop;
	unsigned long swaps;
};

/* Swap the directory www/d and the symlink www/d.link (to a directory
 * outside the root holding its own f.txt) as fast as it goes: atomically
 * where renameat2() can exchange, else by three renames (then for a
 * moment there is no d at all). */
static void *
swap_thread(void *p)
{
	struct swap_arg *a = p;
	bool exchange = true;

	while (!atomic_load(&a->stop)) {
		if (exchange &&
		    renameat2(AT_FDCWD, a->dir, AT_FDCWD, a->link, RENAME_EXCHANGE) == 0) {
			a->swaps++;
			continue;
		}
		exchange = false;
		if (rename(a->dir, a->tmp) != 0 || rename(a->link, a->dir) != 0 ||
		    rename(a->dir, a->link) != 0 || rename(a->tmp, a->dir) != 0)
			break;
		a->swaps++;
	}
	return NULL;
}

/* A directory inside the root swapped for a symlink to outside and back,
 * all along, while a client asks for a file beneath it: every answer is
 * the file inside (200), or 403 or 404; never the outside file's bytes
 * (beneath.c opens nothing by an absolute path, so no check can race the
 * open). Bounded: 2,000 requests or 5 s. */
START_TEST(test_files_swap_race)
{
	struct keep_tree t;
	struct server srv;
	struct swap_arg sw = { 0 };
	/* Deep below the swapped directory: the old check-then-open (a
	 * realpath() prefix check, then open()) had more time to lose. */
	static const char deep[] = "/a/b/c/e/f/g";
	char out[160], path[192], cmd[512];
	const char *args[] = { "--root", t.root, "--threads", "2", NULL };
	CURL *h = curl_easy_init();
	pthread_t th;
	double t0;
	int n = 0, leaked = 0, ok200 = 0, other = 0;
	FILE *f;

	ck_assert_ptr_nonnull(h);
	tree_new(&t);
	snprintf(out, sizeof out, "%s/out", t.base);
	snprintf(cmd, sizeof cmd, "mkdir -p '%s%s' '%s/d%s'", out, deep, t.root, deep);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(path, sizeof path, "%s%s/f.txt", out, deep);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("TOP-SECRET-OUTSIDE-ROOT\n", f);
	fclose(f);
	snprintf(sw.dir, sizeof sw.dir, "%s/d", t.root);
	snprintf(sw.link, sizeof sw.link, "%s/d.link", t.root);
	snprintf(sw.tmp, sizeof sw.tmp, "%s/d.dir", t.root);
	snprintf(path, sizeof path, "d%s/f.txt", deep);
	put_file(&t, path, "inside the root\n", 16);
	ck_assert_int_eq(symlink(out, sw.link), 0);
	server_start_args(&srv, args, NULL);
	atomic_init(&sw.stop, false);
	ck_assert_int_eq(pthread_create(&th, NULL, swap_thread, &sw), 0);
	for (t0 = now_s(); n < 2000 && now_s() - t0 < 5.0; n++) {
		struct th_reply r = { 0 };

		r.timeout_ms = CG_TIMEOUT_S * 1000;
		snprintf(path, sizeof path, "/d%s/f.txt", deep);
		ck_assert_int_eq(th_fetch_ex(h, srv.port, path, 0, NULL, &r), CURLE_OK);
		if (r.body && memmem(r.body, r.body_len, "TOP-SECRET", 10))
			leaked++;
		else if (r.status == 200 && r.body_len == 16 && memcmp(r.body, "inside", 6) == 0)
			ok200++;
		else if (r.status != 403 && r.status != 404)
			other++;
		th_reply_free(&r);
	}
	atomic_store(&sw.stop, true);
	pthread_join(th, NULL);
	curl_easy_cleanup(h);
	ck_assert_int_eq(server_stop(&srv), 0);
	ck_assert_msg(leaked == 0 && other == 0,
		      "%d of %d responses had the outside file's bytes, %d another answer "
		      "(%lu swaps)",
		      leaked, n, other, sw.swaps);
	ck_assert_msg(sw.swaps > 0 && ok200 > 0, "%lu swaps, %d of %d answers the inside file",
		      sw.swaps, ok200, n);
	tree_free(&t);
}
END_TEST

Suite *
gzserve_suite(void)
{
	const struct ck_case cases[] = {
		{ "libcurl",
		  60,
		  { { test_payloads_keepalive, 0, 0 },
		    { test_conditional_sequence, 0, 0 },
		    { test_events_incremental, 0, 0 },
		    { test_concurrent_16, 0, 0 },
		    { test_sigterm_in_flight, 0, 0 } } },
		{ "files",
		  60,
		  { { test_files_wire_parity, 0, 0 },
		    { test_files_never_stale, 0, 0 },
		    { test_files_lookup_and_304, 0, 0 },
		    { test_files_concurrent, 0, 0 },
		    { test_files_changes, 0, 0 },
		    { test_files_aio_write, 0, 0 },
		    { test_files_swap_race, 0, 0 } } },
	};

	return ck_suite("gzserve", cases, sizeof cases / sizeof cases[0]);
}
