/* bh_stream.c: the Stream rows: a bulk stream of unknown size served as a chunked gzip stream by a real daemon on 127.0.0.1, read by a keep-alive client. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "bench.h"

/*
 * One op of a Stream row is one request, whole: the client (one keep-alive
 * connection per thread) sends "GET" with "Accept-Encoding: gzip"; the
 * access handler makes mhdgz_response_from_callback(gz, MHD_SIZE_UNKNOWN,
 * BH_STREAM_BLOCK, ...) with Content-Type application/json, queues it with
 * mhdgz_queue_response_ex() and destroys it; libmicrohttpd calls the gzip
 * stream's reader, which calls the application's reader; the client reads
 * the chunked body to its last chunk. Unlike the other handler rows the
 * socket is in the op: the body of a stream is produced only as
 * libmicrohttpd sends it. The application's reader is a bulk one: it
 * fills every buffer it is given from the payload, then ends the stream.
 * out-B/op is the gzip member (the chunks' data, without the chunked
 * framing); chunks/op how many chunks carried it.
 */

/* Bytes of room the application's reader is given per call (block_size
 * of mhdgz_response_from_callback). 4 KiB, as a typical application's
 * reader (and the tests' bulk readers); the pump reads that much per
 * source call, so it sets how many reader calls a body takes. */
#ifndef BH_STREAM_BLOCK
#define BH_STREAM_BLOCK 4096
#endif

/* Room of a client's receive buffer: one whole response (header and
 * chunked body); a coded 100 KiB payload is far smaller. */
#define BH_STREAM_RBUF (512 * 1024)

static struct {
	struct MHD_Daemon *d;
	uint16_t port;
	const struct bh_cfg *cfg;
	int bad; /* a queue did not compress, or failed */
} bh_s;

/* The application's reader: the payload slice at pos, as much as fits. */
static ssize_t
bulk_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	const int *size_idx = cls;
	size_t len = bh_body_len[*size_idx];

	if (pos >= len)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (max > len - pos)
		max = len - (size_t)pos;
	memcpy(buf, bh_body[*size_idx] + pos, max);
	return (ssize_t)max;
}

static enum MHD_Result
stream_ahc(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
	   const char *version, const char *upload, size_t *upload_len, void **req_cls)
{
	static const int idx[BH_NSIZES] = { 0, 1, 2 };
	const struct bh_cfg *c = cls;
	struct mhdgz_outcome oc = { .size = sizeof oc };
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)url, (void)version, (void)upload;
	/* Queued at the second call, the request read whole: libmicrohttpd
	 * 0.9.75 closes a connection whose response came earlier. */
	if (!*req_cls) {
		*req_cls = (void *)c;
		return MHD_YES;
	}
	if (*upload_len)
		return MHD_NO;
	r = mhdgz_response_from_callback(c->h->gz, MHD_SIZE_UNKNOWN, BH_STREAM_BLOCK, bulk_read,
					 (void *)&idx[c->size_idx], NULL);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	ret = mhdgz_queue_response_ex(c->h->gz, conn,
				      &(struct mhdgz_request){ .size = sizeof(struct mhdgz_request),
							       .method = method },
				      MHD_HTTP_OK, r, &oc);
	MHD_destroy_response(r);
	if (ret != MHD_YES || oc.reason != MHDGZ_COMPRESSED)
		bh_s.bad = 1;
	return ret;
}

/* The daemon of one run: an internal polling thread (epoll where there is
 * one, as gzserve), a pool of nthreads threads for the P rows. */
void
bh_stream_start(const struct bh_cfg *c, int nthreads)
{
	const union MHD_DaemonInfo *info;
	struct sockaddr_in sa;

	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bh_s.cfg = c;
	bh_s.bad = 0;
	/* libmicrohttpd warns about a pool of 0 threads: no option then. */
	bh_s.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
					  MHD_USE_ERROR_LOG,
				  0, NULL, NULL, stream_ahc, (void *)c, MHD_OPTION_SOCK_ADDR,
				  (struct sockaddr *)&sa,
				  nthreads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END,
				  (unsigned int)nthreads, MHD_OPTION_END);
	if (!bh_s.d)
		die("%s: cannot start a daemon on 127.0.0.1", c->name);
	info = MHD_get_daemon_info(bh_s.d, MHD_DAEMON_INFO_BIND_PORT);
	if (!info || info->port == 0)
		die("%s: cannot learn the daemon's port", c->name);
	bh_s.port = info->port;
}

/* Stop the daemon; nonzero if a queue went wrong during the run. */
int
bh_stream_stop(void)
{
	MHD_stop_daemon(bh_s.d);
	bh_s.d = NULL;
	return bh_s.bad;
}

void
bh_stream_connect(struct bh_worker *w)
{
	struct sockaddr_in sa;
	int one = 1;

	w->rbuf = malloc(BH_STREAM_RBUF);
	w->body_cap = bh_body_len[w->cfg->size_idx] + 65536;
	w->body = malloc(w->body_cap);
	if (!w->rbuf || !w->body)
		die("out of memory");
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons(bh_s.port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	w->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (w->fd < 0 || connect(w->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
		die("%s: connect: %s", w->cfg->name, strerror(errno));
	setsockopt(w->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void
bh_stream_close(struct bh_worker *w)
{
	if (!w->rbuf) /* not connected */
		return;
	close(w->fd);
	free(w->rbuf);
	free(w->body);
	w->rbuf = NULL;
	w->body = NULL;
}

/* Read more of the response into rbuf; -1 at EOF or on error. */
static int
read_more(struct bh_worker *w, size_t *len)
{
	ssize_t n;

	if (*len == BH_STREAM_RBUF)
		return -1;
	do
		n = read(w->fd, w->rbuf + *len, BH_STREAM_RBUF - *len);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return -1;
	*len += (size_t)n;
	return 0;
}

/* The offset of the next CRLF at or after pos, reading as needed; -1 on
 * EOF. */
static ssize_t
find_crlf(struct bh_worker *w, size_t pos, size_t *len)
{
	const uint8_t *eol;

	while (!(eol = memmem(w->rbuf + pos, *len - pos, "\r\n", 2)))
		if (read_more(w, len) < 0)
			return -1;
	return eol - w->rbuf;
}

/*
 * One request on the worker's connection: the response's header block
 * goes to rbuf[0..hdr_len), the chunks' data to body[0..body_len). Returns
 * 0, or -1 for anything but a 200 with a complete chunked body. The server
 * sends nothing after the response (one request at a time), so rbuf holds
 * this response alone.
 */
int
bh_stream_op(struct bh_worker *w)
{
	static const char req[] = "GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
				  "Accept-Encoding: gzip\r\n\r\n";
	size_t len = 0, pos;
	const uint8_t *hend;
	ssize_t eol;

	w->body_len = 0;
	if (write(w->fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1))
		return -1;
	while (!(hend = memmem(w->rbuf, len, "\r\n\r\n", 4)))
		if (read_more(w, &len) < 0)
			return -1;
	if (len < 12 || memcmp(w->rbuf, "HTTP/1.1 200", 12) != 0)
		return -1;
	w->hdr_len = (size_t)(hend + 4 - w->rbuf);
	pos = w->hdr_len;
	for (;;) {
		size_t size = 0, i;

		if ((eol = find_crlf(w, pos, &len)) < 0)
			return -1;
		for (i = pos; i < (size_t)eol; i++) {
			int d = w->rbuf[i];

			if (d >= '0' && d <= '9')
				d -= '0';
			else if ((d | 0x20) >= 'a' && (d | 0x20) <= 'f')
				d = (d | 0x20) - 'a' + 10;
			else
				break; /* a chunk extension */
			size = size * 16 + (size_t)d;
		}
		if (i == pos)
			return -1;
		pos = (size_t)eol + 2;
		if (size == 0)
			break;
		while (len - pos < size + 2)
			if (read_more(w, &len) < 0)
				return -1;
		if (w->body_len + size > w->body_cap)
			return -1;
		memcpy(w->body + w->body_len, w->rbuf + pos, size);
		w->body_len += size;
		w->chunks++;
		pos += size + 2;
	}
	/* Trailer fields, then the empty line. */
	for (;;) {
		if ((eol = find_crlf(w, pos, &len)) < 0)
			return -1;
		if ((size_t)eol == pos)
			break;
		pos = (size_t)eol + 2;
	}
	w->out_bytes += w->body_len;
	return 0;
}
