/* bh_verify.c: the bench's check, before anything is timed, that every configuration's output decodes (zlib, through tests/testutil) to its input. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "bench.h"
#include "testutil.h"

/* Whether gz[0..gz_len) is one gzip member (zstd frame, brotli stream, as
 * coding says) that decodes, with an independent decoder (zlib inflate,
 * libzstd, libbrotlidec: testutil), to want[0..want_len), with the RFC 1952
 * header and trailer fields mhdgz writes for gzip; a length-hiding comment
 * (FLG FCOMMENT, spaces and a NUL) is checked, then the member without it. */
static bool
gunzip_equal(const char *coding, const uint8_t *gz, size_t gz_len, const uint8_t *want,
	     size_t want_len)
{
	uint8_t *plain = NULL;
	size_t i = 10;
	bool ok;

	if (strcmp(coding, "gzip") != 0 || gz_len <= 10 || gz[3] != 0x10)
		return tu_verify_coded(coding, gz, gz_len, want, want_len) == 0;
	while (i < gz_len && gz[i] == ' ')
		i++;
	if (i == gz_len || gz[i] != 0 || !(plain = malloc(gz_len)))
		return false;
	memcpy(plain, gz, 10);
	plain[3] = 0;
	memcpy(plain + 10, gz + i + 1, gz_len - i - 1);
	ok = tu_verify_coded("gzip", plain, gz_len - (i + 1 - 10), want, want_len) == 0;
	free(plain);
	return ok;
}

/* What the verification daemon serves next (set by the main thread
 * between requests; the daemon handles one request at a time). */
static struct {
	struct mhdgz *gz;
	const struct bh_handler *h;
	int size_idx;
	struct MHD_Response *keep; /* Cached: the response queued again */
} bh_v;

static enum MHD_Result
verify_ahc(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
	   const char *version, const char *upload, size_t *upload_len, void **req_cls)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)cls, (void)url, (void)method, (void)version, (void)upload, (void)upload_len;
	(void)req_cls;
	if (bh_v.keep)
		return mhdgz_queue_response(bh_v.gz, conn, MHD_HTTP_OK, bh_v.keep);
	/* Exactly the op of the GzipHandler rows, queued for real. */
	r = mhdgz_response_from_buffer(bh_v.gz, bh_body_len[bh_v.size_idx], bh_body[bh_v.size_idx],
				       MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	ret = mhdgz_queue_response(bh_v.gz, conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* Whether the header block hdr[0..len) has "name: value" (case-insensitive
 * name, value compared exactly after optional whitespace). */
static bool
has_header(const char *hdr, size_t len, const char *name, const char *value)
{
	const char *p = hdr, *end = hdr + len;
	size_t nl = strlen(name), vl = strlen(value);

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *v;
		if (!eol)
			eol = end;
		if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			v = p + nl + 1;
			while (v < eol && *v == ' ')
				v++;
			if ((size_t)(eol - v) >= vl && strncmp(v, value, vl) == 0)
				return true;
		}
		p = eol + 1;
	}
	return false;
}

/*
 * One GET with the handler's Accept-Encoding over HTTP/1.1 (Connection: close);
 * checks the status, Content-Encoding, Vary and Content-Length, inflates
 * the body and compares it with the payload slice. Returns the compressed
 * body length, or 0 on any failure (with a message).
 *
 * A deliberately minimal client on a plain socket (one request, read to
 * EOF, no chunking: the handler rows' responses have a Content-Length), so
 * that the bench builds without libcurl (configure --disable-tests); the
 * shared test harness is meant to replace it.
 */
static size_t
verify_get(uint16_t port, const char *what)
{
	const char *coding = bh_v.h->coding;
	char req[192];
	struct sockaddr_in sa;
	size_t cap = bh_body_len[bh_v.size_idx] + 65536, len = 0, body_len;
	uint8_t *buf = malloc(cap);
	const char *hend;
	char cl[32];
	ssize_t n;
	int fd;

	if (!buf)
		die("out of memory");
	snprintf(req, sizeof req,
		 "GET /bench HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		 "Accept-Encoding: %s\r\nConnection: close\r\n\r\n",
		 bh_v.h->ae);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
		die("verify %s: connect: %s", what, strerror(errno));
	if (write(fd, req, strlen(req)) != (ssize_t)strlen(req))
		die("verify %s: write failed", what);
	while (len < cap && (n = read(fd, buf + len, cap - len)) > 0)
		len += (size_t)n;
	close(fd);
	hend = memmem(buf, len, "\r\n\r\n", 4);
	if (!hend || len < 12 || memcmp(buf, "HTTP/1.1 200", 12) != 0) {
		fprintf(stderr, "verify %s: bad response\n", what);
		free(buf);
		return 0;
	}
	hend += 4;
	body_len = len - (size_t)(hend - (const char *)buf);
	snprintf(cl, sizeof cl, "%zu", body_len);
	if (!has_header((const char *)buf, (size_t)(hend - (const char *)buf), "Content-Encoding",
			coding) ||
	    !has_header((const char *)buf, (size_t)(hend - (const char *)buf), "Vary",
			"Accept-Encoding") ||
	    !has_header((const char *)buf, (size_t)(hend - (const char *)buf), "Content-Length",
			cl)) {
		fprintf(stderr, "verify %s: headers wrong:\n%.*s", what,
			(int)(hend - (const char *)buf), buf);
		free(buf);
		return 0;
	}
	if (!gunzip_equal(coding, (const uint8_t *)hend, body_len, bh_body[bh_v.size_idx],
			  bh_body_len[bh_v.size_idx])) {
		fprintf(stderr, "verify %s: body does not inflate to the payload\n", what);
		free(buf);
		return 0;
	}
	free(buf);
	return body_len;
}

/* Raw rows: one compression as the timed loop does it, inflated. */
static void
verify_raw(const struct bh_cfg *c)
{
	struct bh_worker w;

	memset(&w, 0, sizeof w);
	w.cfg = c;
	worker_setup(&w); /* compresses once into w.zout */
	if (w.bad || !gunzip_equal(gz_coding_name(c->be->coding), w.zout, w.zout_len,
				   bh_body[c->size_idx], bh_body_len[c->size_idx]))
		die("verify %s: raw output does not inflate to the payload", c->name);
	worker_teardown(&w);
}

/* Stream rows: one request through the row's own daemon and client, as
 * the timed loop makes it: a 200 with Content-Encoding gzip, Vary,
 * Transfer-Encoding chunked and no Content-Length, whose chunks' data is
 * one gzip member that decodes to the payload. */
static void
verify_stream(const struct bh_cfg *c)
{
	struct mhdgz_stats st0 = { .size = sizeof st0 }, st1 = { .size = sizeof st1 };
	struct bh_worker w;
	const char *hdr;
	bool ok;

	memset(&w, 0, sizeof w);
	w.cfg = c;
	bh_stream_start(c, 1);
	bh_stream_connect(&w);
	mhdgz_get_stats(c->h->gz, &st0);
	if (bh_stream_op(&w) < 0)
		die("verify %s: no complete chunked 200", c->name);
	mhdgz_get_stats(c->h->gz, &st1);
	hdr = (const char *)w.rbuf;
	if (!has_header(hdr, w.hdr_len, "Content-Encoding", "gzip") ||
	    !has_header(hdr, w.hdr_len, "Vary", "Accept-Encoding") ||
	    !has_header(hdr, w.hdr_len, "Transfer-Encoding", "chunked") ||
	    has_header(hdr, w.hdr_len, "Content-Length", ""))
		die("verify %s: headers wrong:\n%.*s", c->name, (int)w.hdr_len, hdr);
	ok = gunzip_equal("gzip", w.body, w.body_len, bh_body[c->size_idx],
			  bh_body_len[c->size_idx]);
	bh_stream_close(&w);
	if (bh_stream_stop())
		die("verify %s: the stream was not queued compressed", c->name);
	if (!ok)
		die("verify %s: the chunks do not inflate to the payload", c->name);
	if (st1.compressions - st0.compressions != 1)
		die("verify %s: %llu compressions for one request", c->name,
		    (unsigned long long)(st1.compressions - st0.compressions));
}

/* Verify every configuration once: each (handler, size) through a daemon,
 * each raw (backend, level, size) directly. */
void
bh_verify_all(void)
{
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;
	struct sockaddr_in sa;
	struct bh_cfg *c, *p;
	uint16_t port;
	unsigned int nverified = 0;

	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
			     verify_ahc, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
			     MHD_OPTION_END);
	if (!d)
		die("cannot start the verification daemon on 127.0.0.1");
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	if (!info || info->port == 0)
		die("cannot learn the verification daemon's port");
	port = info->port;

	for (c = bh_cfgs; c; c = c->next) {
		/* S and P rows of a configuration share their output: once. */
		for (p = bh_cfgs; p != c; p = p->next)
			if (p->kind == c->kind && p->be == c->be && p->level == c->level &&
			    p->h == c->h && p->size_idx == c->size_idx)
				break;
		if (p != c)
			continue;
		/* Nothing coded: every op checks that the response itself was
		 * chosen, for a client without gzip (bh_runner.c). */
		if (c->kind == K_IDENTITY || c->kind == K_PLAIN)
			continue;
		if (c->kind == K_STREAM) {
			verify_stream(c);
			nverified++;
			continue;
		}
		if (c->kind == K_RAW || c->kind == K_SMALLWIN) {
			verify_raw(c);
			nverified++;
			continue;
		}
		bh_v.gz = c->h->gz;
		bh_v.h = c->h;
		bh_v.size_idx = c->size_idx;
		bh_v.keep = NULL;
		if (c->kind == K_CACHED) {
			struct mhdgz_stats st0 = { .size = sizeof st0 },
					   st1 = { .size = sizeof st1 };
			bh_v.keep = mhdgz_response_from_buffer(c->h->gz, bh_body_len[c->size_idx],
							       bh_body[c->size_idx],
							       MHD_RESPMEM_PERSISTENT);
			if (!bh_v.keep)
				die("verify %s: no response", c->name);
			MHD_add_response_header(bh_v.keep, MHD_HTTP_HEADER_CONTENT_TYPE,
						"application/json");
			mhdgz_get_stats(c->h->gz, &st0);
			if (!verify_get(port, c->name) || !verify_get(port, c->name))
				die("verify %s failed", c->name);
			mhdgz_get_stats(c->h->gz, &st1);
			if (st1.cache_hits - st0.cache_hits != 1 ||
			    st1.compressions - st0.compressions != 1)
				die("verify %s: expected 1 compression and 1 cache hit", c->name);
			MHD_destroy_response(bh_v.keep);
			bh_v.keep = NULL;
		} else {
			struct mhdgz_stats st0 = { .size = sizeof st0 },
					   st1 = { .size = sizeof st1 };

			mhdgz_get_stats(c->h->gz, &st0);
			if (!verify_get(port, c->name))
				die("verify %s failed", c->name);
			mhdgz_get_stats(c->h->gz, &st1);
			if (st1.padded - st0.padded != (c->kind == K_PADDED))
				die("verify %s: %llu padded responses", c->name,
				    (unsigned long long)(st1.padded - st0.padded));
		}
		nverified++;
	}
	MHD_stop_daemon(d);
	fprintf(stderr, "verified %u configurations (coded output decodes to the input)\n",
		nverified);
}
