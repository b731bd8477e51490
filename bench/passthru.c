/* passthru.c: make bench-passthru's server: in-memory responses through plain libmicrohttpd or through mhdgz, for the pass-through cost. */
/*
 * Usage: passthru [--plain] [--port N] [--threads N]
 *
 * One server, two builds of its responses chosen by --plain: the same
 * request handler creates and queues every response with libmicrohttpd
 * alone (MHD_create_response_from_buffer + MHD_queue_response), or by
 * default through mhdgz (mhdgz_response_from_buffer +
 * mhdgz_queue_response, one handle with default options). Everything else
 * (bodies, header fields, daemon flags) is the same, so the difference in
 * requests per second between the two is what mhdgz costs a response it
 * passes through (bench/passthru.sh measures it with wrk):
 *
 *   /fresh   a 30 KiB JSON body built per request (a template with the
 *            request's sequence number written in, MHD_RESPMEM_MUST_FREE),
 *            Content-Type: application/json; for a client that sends no
 *            Accept-Encoding, mhdgz queues it identity with Vary added.
 *   /png     30 KiB of bytes per request, Content-Type: image/png, a type
 *            mhdgz never compresses (its default skip list), for a client
 *            that accepts gzip.
 *   /off     /fresh with compression turned off for the response
 *            (MHDGZ_RESPONSE_IDENTITY; plain mode has nothing to turn
 *            off), for a client that accepts gzip.
 *   /reused  the /fresh body (sequence 0) in one response created at start
 *            (MHD_RESPMEM_PERSISTENT) and queued for every request; through
 *            mhdgz, a gzip client gets its cached gzip variant, built on the
 *            first request; plain, the identity response itself.
 *
 * Anything else is a 404. Binds 127.0.0.1 (--port 0, the default, picks a
 * free port) and prints "listening on http://127.0.0.1:PORT/" as gzserve
 * does; --threads N is libmicrohttpd's thread pool (default 2). SIGINT or
 * SIGTERM stops it. Not installed; never part of make check.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <microhttpd.h>
#include <mhdgz.h>

#include "payload.h"

/* Body size of /fresh, /off, /reused and /png in bytes (a
 * 30 KB JSON body built per request). */
#ifndef PT_BODY_NBYTES
#define PT_BODY_NBYTES ((size_t)30 * 1024)
#endif

/* The JSON body: PT_JSON_HEAD with the sequence number in its digits, the
 * payload document, "}". */
#define PT_JSON_HEAD "{\"seq\":\"0000000000\",\"data\":"
#define PT_SEQ_OFF 8 /* offset of the digits in PT_JSON_HEAD */
#define PT_SEQ_DIGITS 10

struct pt_server {
	bool plain;       /* libmicrohttpd alone */
	struct mhdgz *gz; /* NULL when plain */
	uint8_t *json;    /* the JSON template, PT_BODY_NBYTES */
	uint8_t *png;     /* the /png bytes, PT_BODY_NBYTES */
	struct MHD_Response *reused;
	atomic_ulong seq; /* requests for /fresh and /off */
};

/* The response over buf[0..len) as the mode makes it. */
static struct MHD_Response *
pt_response(struct pt_server *s, size_t len, void *buf, enum MHD_ResponseMemoryMode mode)
{
	if (s->plain)
		return MHD_create_response_from_buffer(len, buf, mode);
	return mhdgz_response_from_buffer(s->gz, len, buf, mode);
}

static enum MHD_Result
pt_queue(struct pt_server *s, struct MHD_Connection *conn, unsigned int status,
	 struct MHD_Response *r)
{
	if (s->plain)
		return MHD_queue_response(conn, status, r);
	return mhdgz_queue_response(s->gz, conn, status, r);
}

/* A copy of the JSON template with seq written into its digits, malloc()ed
 * (the response frees it: MHD_RESPMEM_MUST_FREE); NULL without memory. */
static uint8_t *
pt_json_body(const struct pt_server *s, unsigned long seq)
{
	uint8_t *b = malloc(PT_BODY_NBYTES);
	int i;

	if (!b)
		return NULL;
	memcpy(b, s->json, PT_BODY_NBYTES);
	for (i = PT_SEQ_DIGITS - 1; i >= 0; i--) {
		b[PT_SEQ_OFF + i] = (uint8_t)('0' + seq % 10);
		seq /= 10;
	}
	return b;
}

/* A fresh response per request of a malloc()ed body of type ctype; with
 * off, compression turned off for it. */
static enum MHD_Result
pt_fresh(struct pt_server *s, struct MHD_Connection *conn, uint8_t *body, const char *ctype,
	 bool off)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (!body)
		return MHD_NO;
	r = pt_response(s, PT_BODY_NBYTES, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body); /* still ours: ownership passes only with success */
		return MHD_NO;
	}
	if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype) != MHD_YES ||
	    (off && !s->plain &&
	     mhdgz_response_set_flags(s->gz, r, MHDGZ_RESPONSE_IDENTITY) != 0)) {
		MHD_destroy_response(r);
		return MHD_NO;
	}
	ret = pt_queue(s, conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
	   const char *version, const char *upload, size_t *upload_len, void **req_cls)
{
	static int headers_seen; /* any non-NULL marker will do */
	static const char not_found[] = "not found\n";
	struct pt_server *s = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)method, (void)version, (void)upload;
	/* Answer on the second call, as minimal.c explains: queueing on the
	 * first makes libmicrohttpd 0.9.75 close the connection after it. */
	if (!*req_cls) {
		*req_cls = &headers_seen;
		return MHD_YES;
	}
	if (*upload_len) {
		*upload_len = 0;
		return MHD_YES;
	}
	if (strcmp(url, "/fresh") == 0 || strcmp(url, "/off") == 0)
		return pt_fresh(s, conn, pt_json_body(s, atomic_fetch_add(&s->seq, 1) + 1),
				"application/json", url[1] == 'o');
	if (strcmp(url, "/png") == 0) {
		uint8_t *b = malloc(PT_BODY_NBYTES);

		if (b)
			memcpy(b, s->png, PT_BODY_NBYTES);
		return pt_fresh(s, conn, b, "image/png", false);
	}
	if (strcmp(url, "/reused") == 0)
		return pt_queue(s, conn, MHD_HTTP_OK, s->reused);
	r = pt_response(s, sizeof not_found - 1, (void *)not_found, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
	ret = pt_queue(s, conn, MHD_HTTP_NOT_FOUND, r);
	MHD_destroy_response(r);
	return ret;
}

/* The bodies and the reused response; 0 or -1. */
static int
pt_setup(struct pt_server *s)
{
	static const uint8_t png_sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	size_t head = sizeof PT_JSON_HEAD - 1, i;
	uint8_t *doc = NULL;
	uint32_t x = 2463534242u;

	s->json = malloc(PT_BODY_NBYTES);
	s->png = malloc(PT_BODY_NBYTES);
	if (!s->json || !s->png ||
	    payload_json_sized(PT_BODY_NBYTES - head - 1, &doc) != PT_BODY_NBYTES - head - 1)
		return -1;
	memcpy(s->json, PT_JSON_HEAD, head);
	memcpy(s->json + head, doc, PT_BODY_NBYTES - head - 1);
	s->json[PT_BODY_NBYTES - 1] = '}';
	free(doc);
	/* A PNG signature and xorshift bytes: what an image is to a
	 * compressor, though only its type matters to mhdgz. */
	memcpy(s->png, png_sig, sizeof png_sig);
	for (i = sizeof png_sig; i < PT_BODY_NBYTES; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		s->png[i] = (uint8_t)x;
	}
	s->reused = pt_response(s, PT_BODY_NBYTES, s->json, MHD_RESPMEM_PERSISTENT);
	if (!s->reused || MHD_add_response_header(s->reused, MHD_HTTP_HEADER_CONTENT_TYPE,
						  "application/json") != MHD_YES)
		return -1;
	return 0;
}

static void
usage(FILE *to)
{
	fprintf(to, "usage: passthru [--plain] [--port N] [--threads N]\n"
		    "  --plain      libmicrohttpd alone (default: through mhdgz)\n"
		    "  --port N     port on 127.0.0.1 (default 0: a free one)\n"
		    "  --threads N  libmicrohttpd thread pool size (default 2)\n");
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = { { "plain", no_argument, NULL, 'P' },
						  { "port", required_argument, NULL, 'p' },
						  { "threads", required_argument, NULL, 't' },
						  { "help", no_argument, NULL, 'h' },
						  { NULL, 0, NULL, 0 } };
	struct pt_server s = { .plain = false };
	struct sockaddr_in sin = { .sin_family = AF_INET };
	long port = 0, threads = 2;
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;
	sigset_t stop;
	int c, sig, rc = 1;
	char *end;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'P':
			s.plain = true;
			break;
		case 'p':
			port = strtol(optarg, &end, 10);
			if (*end || port < 0 || port > 65535) {
				usage(stderr);
				return 2;
			}
			break;
		case 't':
			threads = strtol(optarg, &end, 10);
			if (*end || threads < 1 || threads > 256) {
				usage(stderr);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* Blocked before libmicrohttpd starts its threads, so sigwait() gets them. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigprocmask(SIG_BLOCK, &stop, NULL);
	if (!s.plain && mhdgz_new(NULL, &s.gz) != 0) {
		fprintf(stderr, "passthru: mhdgz_new failed\n");
		return 1;
	}
	if (pt_setup(&s) != 0) {
		fprintf(stderr, "passthru: out of memory\n");
		goto out;
	}
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG, 0,
			     NULL, NULL, on_request, &s, MHD_OPTION_SOCK_ADDR, &sin,
			     MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)(threads > 1 ? threads : 0),
			     MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "passthru: cannot listen on 127.0.0.1 port %ld\n", port);
		goto out;
	}
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	printf("listening on http://127.0.0.1:%u/\n", info ? (unsigned)info->port : (unsigned)port);
	fflush(stdout);
	sigwait(&stop, &sig);
	MHD_stop_daemon(d);
	rc = 0;
out:
	if (s.reused)
		MHD_destroy_response(s.reused);
	mhdgz_free(s.gz);
	free(s.json);
	free(s.png);
	return rc;
}
