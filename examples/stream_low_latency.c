/* stream_low_latency.c: a body of unknown size whose chunks reach the client as produced. */
/* POSIX.1-2008 (sigwait, pthread, ...), also under -std=c11. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
/*
 * What it teaches: mhdgz_response_from_callback() with MHD_SIZE_UNKNOWN is
 * compressed as one gzip stream, sent chunked. By default the compressor
 * keeps small chunks until it has a block worth sending, which is right for
 * bulk data and wrong for progress lines or logs: a client would see
 * nothing until the end. MHDGZ_RESPONSE_LOW_LATENCY (mhdgz_response_set_flags) sync-flushes
 * every chunk the reader returns (text/event-stream gets this on its own).
 *
 * GET any path: NLINES lines of NDJSON, one every INTERVAL_MS.
 * Usage: stream_low_latency [PORT]  (default 8080; 0 picks a free port).
 * Prints "listening on http://127.0.0.1:PORT/"; SIGINT or SIGTERM stops it.
 */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <microhttpd.h>
#include <mhdgz.h>

#define NLINES 5
#define INTERVAL_MS 300

/* One response's progress; the reader may get less room than a line. */
struct lines {
	unsigned int n; /* lines produced so far */
	char line[64];
	size_t len, off;
};

static ssize_t
read_lines(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct lines *st = cls;
	size_t n;

	(void)pos;
	if (st->off == st->len) {
		if (st->n == NLINES)
			return MHD_CONTENT_READER_END_OF_STREAM;
		/* Waiting here holds only this connection's own thread
		 * (MHD_USE_THREAD_PER_CONNECTION below). */
		if (st->n > 0)
			nanosleep(&(struct timespec){ .tv_nsec = INTERVAL_MS * 1000000L }, NULL);
		st->n++;
		st->len = (size_t)snprintf(st->line, sizeof st->line, "{\"line\":%u,\"of\":%u}\n",
					   st->n, NLINES);
		st->off = 0;
	}
	n = st->len - st->off < max ? st->len - st->off : max;
	memcpy(buf, st->line + st->off, n);
	st->off += n;
	return (ssize_t)n;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
	   const char *version, const char *upload, size_t *upload_len, void **req_cls)
{
	static int headers_seen;
	struct mhdgz *gz = cls;
	struct MHD_Response *r;
	struct lines *st;
	enum MHD_Result ret;

	(void)url, (void)version, (void)upload;
	if (!*req_cls) { /* two-phase: answer once the request is read */
		*req_cls = &headers_seen;
		return MHD_YES;
	}
	if (*upload_len) {
		*upload_len = 0;
		return MHD_YES;
	}
	st = calloc(1, sizeof *st);
	if (!st)
		return MHD_NO;
	/* A state per response, made for this request: free() gets it back. */
	r = mhdgz_response_from_callback(gz, MHD_SIZE_UNKNOWN, 1024, read_lines, st, free);
	if (!r) {
		free(st);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
	/* The point of this example: flush each line through the gzip stream. */
	if (mhdgz_response_set_flags(gz, r, MHDGZ_RESPONSE_LOW_LATENCY) != 0) {
		MHD_destroy_response(r);
		return MHD_NO;
	}
	ret = mhdgz_queue_response_ex(gz, conn,
				      &(struct mhdgz_request){ .size = sizeof(struct mhdgz_request),
							       .method = method },
				      MHD_HTTP_OK, r, NULL);
	MHD_destroy_response(r);
	return ret;
}

int
main(int argc, char **argv)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	long port = argc > 1 ? strtol(argv[1], NULL, 10) : 8080;
	struct mhdgz *gz;
	struct MHD_Daemon *d;
	sigset_t stop;
	int sig;

	if (port < 0 || port > 65535)
		return 2;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigprocmask(SIG_BLOCK, &stop, NULL); /* before any thread: sigwait() gets them */
	if (mhdgz_new(NULL, &gz) != 0)
		return 1;
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0,
			     NULL, NULL, on_request, gz, MHD_OPTION_SOCK_ADDR, &sin,
			     MHD_OPTION_END);
	if (!d)
		return 1;
	printf("listening on http://127.0.0.1:%u/\n",
	       (unsigned)MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port);
	fflush(stdout);
	sigwait(&stop, &sig);
	MHD_stop_daemon(d);
	mhdgz_free(gz);
	return 0;
}
