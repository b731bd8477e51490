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
/* memmem() */
#define _GNU_SOURCE
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

/* Start gzserve --port 0 --quiet [extra], read its "listening on" line
 * (bounded wait). */
static void
server_start(struct server *s, const char *extra)
{
	const char *bin = getenv("GZSERVE");
	char line[256];
	size_t len = 0;
	int fds[2];
	unsigned int port;

	if (!bin)
		bin = "../examples/gzserve";
	ck_assert_int_eq(pipe(fds), 0);
	s->pid = fork();
	ck_assert_int_ge(s->pid, 0);
	if (s->pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		close(fds[1]);
		if (extra)
			execl(bin, bin, "--port", "0", "--quiet", extra, (char *)NULL);
		else
			execl(bin, bin, "--port", "0", "--quiet", (char *)NULL);
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
	};

	return ck_suite("gzserve", cases, sizeof cases / sizeof cases[0]);
}
