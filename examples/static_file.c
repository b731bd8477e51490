/* static_file.c: one file by descriptor with an ETag, conditional requests and a 304. */
/* POSIX.1-2008 (sigwait, pthread, ...), also under -std=c11. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
/*
 * What it teaches: mhdgz_response_from_fd() for a file body (identity keeps
 * libmicrohttpd's sendfile; gzip is made by mhdgz), a strong ETag from the
 * file's metadata, and MHDGZ_REQUEST_PRECONDITIONS instead of comparing
 * If-None-Match by hand: a gzip client revalidates with the ETag mhdgz gave
 * its response (W/"x" by default), which a plain string compare would miss.
 * The handler answers a match with the 304 of the 200 this client would
 * get (its ETag and Vary, RFC 9110 section 15.4.5), a failed If-Match with
 * a 412 without content.
 *
 * Usage: static_file PORT FILE [CONTENT-TYPE]  (PORT 0 picks a free port;
 * type default text/plain). GET or HEAD of any path gets FILE, another
 * method 405 (no other error pages: a missing file closes the
 * connection). Prints
 * "listening on http://127.0.0.1:PORT/"; SIGINT or SIGTERM stops it.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <microhttpd.h>
#include <mhdgz.h>

static const char *file_name;
static const char *file_type = "text/plain; charset=utf-8";

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
	   const char *version, const char *upload, size_t *upload_len, void **req_cls)
{
	static int headers_seen;
	struct mhdgz *gz = cls;
	struct MHD_Response *r;
	struct stat st;
	char etag[80];
	struct mhdgz_request req = { .size = sizeof req,
				     .method = method,
				     .flags = MHDGZ_REQUEST_PRECONDITIONS };
	enum MHD_Result ret;
	int fd;

	(void)url, (void)version, (void)upload;
	if (!*req_cls) { /* two-phase: answer once the request is read */
		*req_cls = &headers_seen;
		return MHD_YES;
	}
	if (*upload_len) {
		*upload_len = 0;
		return MHD_YES;
	}
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		r = mhdgz_response_from_buffer(gz, 0, (void *)"", MHD_RESPMEM_PERSISTENT);
		if (!r)
			return MHD_NO;
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
		ret = mhdgz_queue_response_ex(gz, conn, &req, MHD_HTTP_METHOD_NOT_ALLOWED, r, NULL);
		MHD_destroy_response(r);
		return ret;
	}
	fd = open(file_name, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		return MHD_NO; /* this example has no error pages */
	}
	/* Inode, size, mtime and ctime in ns: it changes whenever the bytes
	 * may have (ctime too: a rewrite in place can set mtime back). */
	snprintf(etag, sizeof etag, "\"%jx-%jx-%jx-%jx\"", (uintmax_t)st.st_ino,
		 (uintmax_t)st.st_size,
		 (uintmax_t)st.st_mtim.tv_sec * 1000000000u + (uintmax_t)st.st_mtim.tv_nsec,
		 (uintmax_t)st.st_ctim.tv_sec * 1000000000u + (uintmax_t)st.st_ctim.tv_nsec);
	/* For a 304 or 412 the file is never read: no body is sent. */
	r = mhdgz_response_from_fd(gz, (size_t)st.st_size, fd); /* owns fd if made */
	if (!r) {
		close(fd); /* as with libmicrohttpd: still ours on failure */
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, file_type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
	ret = mhdgz_queue_response_ex(gz, conn, &req, MHD_HTTP_OK, r, NULL);
	MHD_destroy_response(r);
	return ret;
}

int
main(int argc, char **argv)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	long port = argc > 2 ? strtol(argv[1], NULL, 10) : -1;
	struct mhdgz *gz;
	struct MHD_Daemon *d;
	sigset_t stop;
	int sig;

	if (port < 0 || port > 65535) {
		fprintf(stderr, "usage: static_file PORT FILE [CONTENT-TYPE]\n");
		return 2;
	}
	file_name = argv[2];
	if (argc > 3)
		file_type = argv[3];
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigprocmask(SIG_BLOCK, &stop, NULL); /* before any thread: sigwait() gets them */
	if (mhdgz_new(NULL, &gz) != 0)
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
