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
	char base[64]; /* "http://127.0.0.1:PORT" */
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
		struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
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
	snprintf(s->base, sizeof s->base, "http://127.0.0.1:%u", port);
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

/* A growing buffer for bodies and headers. */
struct buf {
	char *p;
	size_t len;
};

static size_t
buf_write(char *data, size_t size, size_t n, void *cls)
{
	struct buf *b = cls;
	char *p = realloc(b->p, b->len + size * n + 1);

	if (!p)
		return 0;
	memcpy(p + b->len, data, size * n);
	b->p = p;
	b->len += size * n;
	b->p[b->len] = '\0';
	return size * n;
}

static void
buf_reset(struct buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = 0;
}

/* The value of header name in a raw header block (last response), or "". */
static void
header_value(const struct buf *h, const char *name, char *out, size_t cap)
{
	const char *p = h->p ? h->p : "", *last = NULL;
	size_t nlen = strlen(name);

	out[0] = '\0';
	for (; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
		if (strncmp(p, "HTTP/", 5) == 0)
			last = NULL;
		if (strncasecmp(p, name, nlen) == 0 && p[nlen] == ':')
			last = p + nlen + 1;
	}
	if (last) {
		size_t n;

		while (*last == ' ')
			last++;
		n = strcspn(last, "\r\n");
		if (n >= cap)
			n = cap - 1;
		memcpy(out, last, n);
		out[n] = '\0';
	}
}

struct xfer {
	CURL *h;
	struct buf body, head;
	long status;
};

static void
xfer_init(struct xfer *x)
{
	memset(x, 0, sizeof *x);
	x->h = curl_easy_init();
	ck_assert_ptr_nonnull(x->h);
	curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, buf_write);
	curl_easy_setopt(x->h, CURLOPT_WRITEDATA, &x->body);
	curl_easy_setopt(x->h, CURLOPT_HEADERFUNCTION, buf_write);
	curl_easy_setopt(x->h, CURLOPT_HEADERDATA, &x->head);
	curl_easy_setopt(x->h, CURLOPT_TIMEOUT, CG_TIMEOUT_S);
	curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L);
}

static void
xfer_fini(struct xfer *x)
{
	buf_reset(&x->body);
	buf_reset(&x->head);
	curl_easy_cleanup(x->h);
}

/* GET (or HEAD) url on x's handle, keeping its connection. ae: the
 * Accept-Encoding to send raw (NULL: none); extra: one more header or
 * NULL. Bodies are not decoded by libcurl. */
static void
xfer_get(struct xfer *x, const char *url, const char *ae, const char *extra, int head)
{
	struct curl_slist *hs = NULL;
	char line[256];
	CURLcode rc;

	buf_reset(&x->body);
	buf_reset(&x->head);
	if (ae) {
		snprintf(line, sizeof line, "Accept-Encoding: %s", ae);
		hs = curl_slist_append(hs, line);
	}
	if (extra)
		hs = curl_slist_append(hs, extra);
	curl_easy_setopt(x->h, CURLOPT_URL, url);
	curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, hs);
	curl_easy_setopt(x->h, CURLOPT_HTTP_CONTENT_DECODING, 0L);
	curl_easy_setopt(x->h, CURLOPT_NOBODY, head ? 1L : 0L);
	rc = curl_easy_perform(x->h);
	curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(hs);
	ck_assert_msg(rc == CURLE_OK, "%s: %s", url, curl_easy_strerror(rc));
	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->status);
}

static long
xfer_connects(struct xfer *x)
{
	long n = -1;

	curl_easy_getinfo(x->h, CURLINFO_NUM_CONNECTS, &n);
	return n;
}

/* Every payload endpoint, raw gzip and identity, on one connection: the
 * gzip body inflates (zlib, Z_STREAM_END) to exactly the generator's bytes,
 * and so does the identity body. */
START_TEST(test_payloads_keepalive)
{
	static const size_t sizes[3] = {PAYLOAD_JSON_2K, PAYLOAD_JSON_20K, PAYLOAD_JSON_100K};
	static const char *const paths[3] = {"/2k.json", "/20k.json", "/100k.json"};
	struct server s;
	struct xfer x;
	char url[128], v[128];
	unsigned int i;

	server_start(&s, NULL);
	xfer_init(&x);
	for (i = 0; i < 3; i++) {
		uint8_t *want, *got;
		size_t want_len = payload_json_sized(sizes[i], &want), got_len;

		ck_assert_uint_eq(want_len, sizes[i]);
		snprintf(url, sizeof url, "%s%s", s.base, paths[i]);

		xfer_get(&x, url, "gzip", NULL, 0);
		ck_assert_int_eq(x.status, 200);
		header_value(&x.head, "Content-Encoding", v, sizeof v);
		ck_assert_str_eq(v, "gzip");
		header_value(&x.head, "Vary", v, sizeof v);
		ck_assert_str_eq(v, "Accept-Encoding");
		ck_assert_int_eq(tu_gunzip(x.body.p, x.body.len, &got, &got_len), 0);
		ck_assert_uint_eq(got_len, want_len);
		ck_assert_int_eq(memcmp(got, want, want_len), 0);
		free(got);
		if (i > 0)
			ck_assert_int_eq(xfer_connects(&x), 0); /* reused */

		xfer_get(&x, url, NULL, NULL, 0);
		ck_assert_int_eq(x.status, 200);
		header_value(&x.head, "Content-Encoding", v, sizeof v);
		ck_assert_str_eq(v, "");
		ck_assert_uint_eq(x.body.len, want_len);
		ck_assert_int_eq(memcmp(x.body.p, want, want_len), 0);
		ck_assert_int_eq(xfer_connects(&x), 0);
		free(want);
	}
	xfer_fini(&x);
	ck_assert_int_eq(server_stop(&s), 0);
}
END_TEST

/* A keep-alive sequence mixing 200, 304, HEAD and 404 on one connection,
 * each answered right. */
START_TEST(test_conditional_sequence)
{
	struct server s;
	struct xfer x;
	char url[128], etag[128], inm[192], v[128];

	server_start(&s, NULL);
	xfer_init(&x);
	snprintf(url, sizeof url, "%s/20k.json", s.base);
	xfer_get(&x, url, "gzip", NULL, 0);
	ck_assert_int_eq(x.status, 200);
	header_value(&x.head, "ETag", etag, sizeof etag);
	ck_assert_msg(strncmp(etag, "W/\"", 3) == 0, "gzip ETag '%s' is not weak", etag);

	snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
	xfer_get(&x, url, "gzip", inm, 0);
	ck_assert_int_eq(x.status, 304);
	ck_assert_uint_eq(x.body.len, 0);
	header_value(&x.head, "ETag", v, sizeof v);
	ck_assert_str_eq(v, etag);
	ck_assert_int_eq(xfer_connects(&x), 0);

	xfer_get(&x, url, "gzip", NULL, 1);
	ck_assert_int_eq(x.status, 200);
	header_value(&x.head, "Content-Encoding", v, sizeof v);
	ck_assert_str_eq(v, "gzip");
	ck_assert_uint_eq(x.body.len, 0);
	ck_assert_int_eq(xfer_connects(&x), 0);

	snprintf(url, sizeof url, "%s/nope", s.base);
	xfer_get(&x, url, "gzip", NULL, 0);
	ck_assert_int_eq(x.status, 404);
	ck_assert_int_eq(xfer_connects(&x), 0);

	snprintf(url, sizeof url, "%s/", s.base);
	xfer_get(&x, url, NULL, NULL, 0);
	ck_assert_int_eq(x.status, 200);
	ck_assert_ptr_nonnull(strstr(x.body.p, "/app.js"));
	ck_assert_int_eq(xfer_connects(&x), 0);
	xfer_fini(&x);
	ck_assert_int_eq(server_stop(&s), 0);
}
END_TEST

/* /events decoded by libcurl as it arrives: each event is flushed through
 * the gzip stream when it happens, not at the end. */
struct events_seen {
	double t[16];
	int n;
	struct buf all;
};

static size_t
events_write(char *data, size_t size, size_t n, void *cls)
{
	struct events_seen *e = cls;
	const char *p;
	int count = 0;

	if (buf_write(data, size, n, &e->all) != size * n)
		return 0;
	/* Every "data:" line seen so far, the new ones timed now. */
	for (p = e->all.p; (p = strstr(p, "data: ")); p++)
		count++;
	while (e->n < count && e->n < 16)
		e->t[e->n++] = now_s();
	return size * n;
}

START_TEST(test_events_incremental)
{
	struct server s;
	struct events_seen e;
	char url[128];
	CURL *h;
	CURLcode rc;

	memset(&e, 0, sizeof e);
	server_start(&s, NULL);
	h = curl_easy_init();
	snprintf(url, sizeof url, "%s/events", s.base);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "gzip");
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, events_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &e);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 3600L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	rc = curl_easy_perform(h);
	ck_assert_msg(rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_OK, "%s",
		      curl_easy_strerror(rc));
	ck_assert_msg(e.n >= 3, "only %d events in 3.6 s", e.n);
	/* 2 s apart at the server; buffered delivery would make it ~0. */
	ck_assert_msg(e.t[2] - e.t[0] >= 1.0, "events 1-3 arrived within %.3f s: buffered",
		      e.t[2] - e.t[0]);
	ck_assert_ptr_nonnull(strstr(e.all.p, "data: {\"n\":3,"));
	curl_easy_cleanup(h);
	buf_reset(&e.all);
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
	struct buf b[16];
	uint8_t *want;
	size_t want_len = payload_json_sized(PAYLOAD_JSON_100K, &want);
	char url[128];
	int running = 1, i, msgs;
	double deadline;
	CURLMsg *msg;

	server_start(&s, NULL);
	m = curl_multi_init();
	snprintf(url, sizeof url, "%s/100k.json", s.base);
	memset(b, 0, sizeof b);
	for (i = 0; i < 16; i++) {
		h[i] = curl_easy_init();
		curl_easy_setopt(h[i], CURLOPT_URL, url);
		curl_easy_setopt(h[i], CURLOPT_ACCEPT_ENCODING, (i % 2) ? "gzip" : "identity");
		curl_easy_setopt(h[i], CURLOPT_WRITEFUNCTION, buf_write);
		curl_easy_setopt(h[i], CURLOPT_WRITEDATA, &b[i]);
		curl_easy_setopt(h[i], CURLOPT_TIMEOUT, CG_TIMEOUT_S);
		curl_easy_setopt(h[i], CURLOPT_NOSIGNAL, 1L);
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
		ck_assert_uint_eq(b[i].len, want_len);
		ck_assert_int_eq(memcmp(b[i].p, want, want_len), 0);
		curl_multi_remove_handle(m, h[i]);
		curl_easy_cleanup(h[i]);
		buf_reset(&b[i]);
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
	struct buf b = {0};
	char url[128];
	CURLM *m;
	CURL *h;
	int running = 1, msgs, st = -1;
	double t0, deadline;
	CURLMsg *msg;
	CURLcode result = CURLE_OK;
	bool signalled = false;

	server_start(&s, NULL);
	m = curl_multi_init();
	h = curl_easy_init();
	snprintf(url, sizeof url, "%s/events", s.base);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "gzip");
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, buf_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, CG_TIMEOUT_S);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
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
	ck_assert_ptr_nonnull(strstr(b.p ? b.p : "", "data: {\"n\":1,"));
	ck_assert_msg(now_s() - t0 < 8.0, "the stream did not end at SIGTERM");
	curl_multi_remove_handle(m, h);
	curl_easy_cleanup(h);
	curl_multi_cleanup(m);
	buf_reset(&b);
	for (int i = 0; i < 300 && waitpid(s.pid, &st, WNOHANG) != s.pid; i++)
		usleep(50000);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gzserve did not exit 0 (%d)", st);
}
END_TEST

Suite *
gzserve_suite(void)
{
	Suite *s = suite_create("gzserve");
	TCase *tc = tcase_create("libcurl");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_payloads_keepalive);
	tcase_add_test(tc, test_conditional_sequence);
	tcase_add_test(tc, test_events_incremental);
	tcase_add_test(tc, test_concurrent_16);
	tcase_add_test(tc, test_sigterm_in_flight);
	suite_add_tcase(s, tc);
	return s;
}
