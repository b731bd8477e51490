/* check_hnd_wire.c: e2e tests on the exact bytes of buffer responses: pipelined requests on one raw connection, framing. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "check_suites.h"
#include "harness.h"
#include "testutil.h"

/* Longest wait for one response on the raw connection, ms. */
#define WIRE_WAIT_MS 20000

/* What one pipelined request must get back. */
struct wire_case {
	const char *request; /* the exact bytes sent */
	bool head;
	int status;
	bool gzip;     /* Content-Encoding: gzip, body decodes to the original */
	bool has_body; /* identity: the original body follows */
};

/* Value of name in resp's head equals want (NULL: no such field). */
static void
expect_raw_field(const struct th_raw_response *resp, const char *name, const char *want,
		 const char *ctx)
{
	size_t len = 0;
	const char *v = th_raw_header(resp, name, &len);

	if (!want) {
		ck_assert_msg(v == NULL, "%s: %s '%.*s', want none", ctx, name, (int)len, v);
		return;
	}
	ck_assert_msg(v && len == strlen(want) && strncmp(v, want, len) == 0,
		      "%s: %s '%.*s', want '%s'", ctx, name, v ? (int)len : 6, v ? v : "(none)",
		      want);
}

/* Several requests sent in one write on one connection (HTTP/1.1
 * pipelining): each response comes back whole and in order, framed by a
 * Content-Length that is its body's exact length, and not a byte more
 * follows the last one (loop: per-request responses, one shared). */
START_TEST(test_pipelined)
{
	enum { LEN = 8192 };
	uint8_t *body = tu_payload(LEN, TU_TEXT, 61);
	struct th_route rt[] = {
		{ .path = "/t",
		  .status = 200,
		  .body = body,
		  .body_len = LEN,
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"w\"" },
		  .flags = TH_RT_PRECOND | (_i ? TH_RT_SHARED : 0),
		  .etag = "\"w\"" },
	};
	static const struct wire_case cases[] = {
		{ "GET /t HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n", false, 200, true,
		  true },
		{ "GET /t HTTP/1.1\r\nHost: t\r\n\r\n", false, 200, false, true },
		{ "HEAD /t HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n", true, 200, true,
		  false },
		{ "GET /t HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n"
		  "If-None-Match: W/\"w\"\r\n\r\n",
		  false, 304, false, false },
		{ "GET /t HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n", false, 200, true,
		  true },
	};
	char all[2048] = "", ctx[64];
	struct th_site s;
	struct pollfd pfd;
	size_t gz_len = 0;
	int fd;

	for (size_t i = 0; i < N_ELEMS(cases); i++)
		strcat(all, cases[i].request);
	th_site_start(&s, NULL, rt, N_ELEMS(rt), 0);
	fd = th_raw_connect(s.port);
	th_raw_send(fd, all, strlen(all));
	for (size_t i = 0; i < N_ELEMS(cases); i++) {
		const struct wire_case *c = &cases[i];
		struct th_raw_response resp;
		const uint8_t *b;
		size_t blen;
		char want_len[32];

		snprintf(ctx, sizeof ctx, "response %zu", i);
		ck_assert_msg(th_raw_read_response(fd, c->head, WIRE_WAIT_MS, &resp) == 0,
			      "%s: incomplete after %zu bytes", ctx, resp.len);
		b = resp.bytes + resp.body_off;
		blen = resp.len - resp.body_off;
		ck_assert_msg(resp.status == c->status, "%s: status %d", ctx, resp.status);
		ck_assert_msg(!resp.chunked, "%s: chunked", ctx);
		expect_raw_field(&resp, "Vary", "Accept-Encoding", ctx);
		expect_raw_field(&resp, "Content-Encoding", c->gzip ? "gzip" : NULL, ctx);
		expect_raw_field(&resp, "ETag", c->gzip || c->status == 304 ? "W/\"w\"" : "\"w\"",
				 ctx);
		if (c->gzip && c->has_body) {
			uint8_t *out = NULL;
			size_t out_len = 0;

			ck_assert_msg(tu_gunzip(b, blen, &out, &out_len) == 0, "%s: bad gzip", ctx);
			ck_assert_msg(out_len == LEN && memcmp(out, body, LEN) == 0,
				      "%s: gunzipped body differs", ctx);
			free(out);
			ck_assert_int_eq(tu_check_member(b, blen, body, LEN), 0);
			if (gz_len == 0)
				gz_len = blen;
			ck_assert_uint_eq(blen, gz_len);
		} else if (c->has_body) {
			ck_assert_msg(blen == LEN && memcmp(b, body, LEN) == 0,
				      "%s: identity body differs", ctx);
		} else {
			ck_assert_msg(blen == 0, "%s: %zu body bytes", ctx, blen);
		}
		if (c->has_body) {
			snprintf(want_len, sizeof want_len, "%zu", blen);
			expect_raw_field(&resp, "Content-Length", want_len, ctx);
		} else if (c->head) {
			/* HEAD: the Content-Length GET gets. */
			snprintf(want_len, sizeof want_len, "%zu", gz_len);
			expect_raw_field(&resp, "Content-Length", want_len, ctx);
		}
		th_raw_response_free(&resp);
	}
	/* Nothing after the last response. */
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, 200), 0);
	close(fd);
	ck_assert_uint_eq(th_stats(s.gz).reasons[MHDGZ_COMPRESSED], 3);
	ck_assert_uint_eq(th_stats(s.gz).reasons[MHDGZ_SKIP_NOT_ACCEPTED], 1);
	ck_assert_uint_eq(s.errors, 0);
	th_site_stop(&s);
	free(body);
}
END_TEST

/* ===================================================================== */

struct ck_case
hnd_wire_case(void)
{
	return (struct ck_case){ "wire", CK_CASE_TIMEOUT, { { test_pipelined, 0, 2 } } };
}
