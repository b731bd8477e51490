/* minimal.c: a complete libmicrohttpd server with zstd and gzip: the two-call change, two-phase handler. */
/* POSIX.1-2008 (sigwait, pthread, ...), also under -std=c11. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
/*
 * Usage: minimal [PORT]  (default 8080; 0 picks a free port). Prints
 * "listening on http://127.0.0.1:PORT/"; SIGINT or SIGTERM stops it.
 */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <microhttpd.h>
#include <mhdgz.h>

static const char page[] =
	"<!doctype html><title>mhdgz</title><p>"
	"Hello, compressed world. Hello, compressed world. Hello, compressed world."
	"</p>\n";

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
	   const char *version, const char *upload, size_t *upload_len, void **req_cls)
{
	static int headers_seen; /* any non-NULL marker will do */
	struct mhdgz *gz = cls;
	struct mhdgz_request req = { .size = sizeof req, .method = method };
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)url, (void)version, (void)upload;
	/* The first call has only the headers. Queueing then, before the
	 * request is read to its end, makes libmicrohttpd (0.9.75) close the
	 * connection after the response; answering on a later call keeps it
	 * alive for the next request. */
	if (!*req_cls) {
		*req_cls = &headers_seen;
		return MHD_YES;
	}
	if (*upload_len) { /* a request body: not wanted here, skip it */
		*upload_len = 0;
		return MHD_YES;
	}
	/* was: MHD_create_response_from_buffer (...) */
	r = mhdgz_response_from_buffer(gz, strlen(page), (void *)page, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
	/* was: MHD_queue_response (...); the method makes a HEAD exact */
	ret = mhdgz_queue_response_ex(gz, conn, &req, MHD_HTTP_OK, r, NULL);
	MHD_destroy_response(r);
	return ret;
}

int
main(int argc, char **argv)
{
	/* min_nbytes 1: the page is below the default 1 KiB threshold. */
	struct mhdgz_options opts = { .size = sizeof opts, .min_nbytes = 1 };
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
	/* Blocked before libmicrohttpd starts its thread, so sigwait() gets them. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigprocmask(SIG_BLOCK, &stop, NULL);
	if (mhdgz_new(&opts, &gz) != 0)
		return 1;
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, on_request, gz,
			     MHD_OPTION_SOCK_ADDR, &sin, MHD_OPTION_END);
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
