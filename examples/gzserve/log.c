/* log.c: gzserve's per-request context and access log (one line per request on stderr). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#ifdef __linux__
#include <linux/sockios.h>
#include <linux/tcp.h>
#endif

#include "gzserve.h"

/* Longest request target printed in the access log, in bytes. */
#ifndef GZS_LOG_TARGET_MAX
#define GZS_LOG_TARGET_MAX 512
#endif

uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Bytes this process has written on the connection's socket, from the
 * kernel: acknowledged bytes plus the send queue. Headers and chunk framing
 * included, so it is what "bytes sent" means on the wire. */
static bool
sock_written(struct MHD_Connection *conn, uint64_t *nbytes_ret)
{
#if defined(__linux__) && defined(TCP_INFO) && defined(SIOCOUTQ)
	const union MHD_ConnectionInfo *ci;
	struct tcp_info ti;
	socklen_t len = sizeof ti;
	int outq = 0;

	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return false;
	memset(&ti, 0, sizeof ti);
	if (getsockopt(ci->connect_fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
	    len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof ti.tcpi_bytes_acked)
		return false;
	if (ioctl(ci->connect_fd, SIOCOUTQ, &outq) != 0 || outq < 0)
		return false;
	*nbytes_ret = ti.tcpi_bytes_acked + (uint64_t)outq;
	return true;
#else
	(void)conn;
	(void)nbytes_ret;
	return false;
#endif
}

/* MHD_OPTION_URI_LOG_CALLBACK: a request line arrived. Its return value
 * becomes the request's *req_cls. */
void *
on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct server *s = cls;
	struct req *rq = calloc(1, sizeof *rq);

	if (!rq)
		return NULL;
	rq->s = s;
	rq->uri = strdup(uri ? uri : "");
	if (!rq->uri) {
		free(rq);
		return NULL; /* on_request closes the connection */
	}
	rq->start_us = now_us();
	/* Two system calls now and two at the end, for the log only. */
	rq->sock_known = !s->cfg.quiet && sock_written(conn, &rq->sock_start);
	rq->coding = "-";
	strcpy(rq->method, "-");
	atomic_fetch_add(&s->in_flight, 1);
	atomic_fetch_add(&s->requests, 1);
	return rq;
}

/* Print the request target with anything unprintable escaped, so a log line
 * stays one line whatever a client sends, and cut after GZS_LOG_TARGET_MAX
 * bytes so a 20 KB URL does not become a 20 KB log line. */
static void
log_target(FILE *f, const char *uri)
{
	const unsigned char *p;

	for (p = (const unsigned char *)uri; *p; p++) {
		if (p - (const unsigned char *)uri == GZS_LOG_TARGET_MAX) {
			fputs("...", f);
			break;
		}
		if (*p < 0x21 || *p > 0x7e || *p == '\\')
			fprintf(f, "\\x%02x", *p);
		else
			fputc(*p, f);
	}
}

/* MHD_OPTION_NOTIFY_COMPLETED: the response is sent (or the connection
 * failed). One access log line, then the request's context goes. */
void
on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
	     enum MHD_RequestTerminationCode toe)
{
	struct server *s = cls;
	struct req *rq = *req_cls;
	uint64_t sent = 0;
	bool sent_known = false;

	if (!rq)
		return;
	*req_cls = NULL;
	if (rq->sock_known && sock_written(conn, &sent) && sent >= rq->sock_start) {
		sent -= rq->sock_start;
		sent_known = true;
	}
	if (rq->streamed)
		rq->body_nbytes = atomic_load(&rq->stream_nbytes);
	if (!s->cfg.quiet) {
		/* One write per line: lines from pool threads do not interleave. */
		char *line = NULL;
		size_t line_len = 0;
		FILE *f = open_memstream(&line, &line_len);

		if (f) {
			fprintf(f, "%s ", rq->method);
			log_target(f, rq->uri);
			fprintf(f, " %u %" PRIu64 " ", rq->status, rq->body_nbytes);
			if (sent_known)
				fprintf(f, "%" PRIu64, sent);
			else
				fputc('-', f);
			fprintf(f, " %s %" PRIu64 "us%s\n", rq->coding, now_us() - rq->start_us,
				toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " aborted");
			if (fclose(f) == 0)
				(void)!write(STDERR_FILENO, line, line_len);
			free(line);
		}
	}
	if (rq->linger && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
		linger_add(s, conn);
	mhdgz_upload_free(rq->upload);
	free(rq->uri);
	free(rq);
	atomic_fetch_sub(&s->in_flight, 1);
}

/* MHD_OPTION_EXTERNAL_LOGGER: libmicrohttpd's own messages (a client that
 * went away, a port in use), prefixed so they stand out from the access
 * log; --quiet silences them too. */
void
on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct server *s = cls;
	char msg[512];
	size_t n;

	if (s->cfg.quiet)
		return;
	vsnprintf(msg, sizeof msg, fmt, ap);
	n = strcspn(msg, "\n");
	fprintf(stderr, "gzserve: libmicrohttpd: %.*s\n", (int)n, msg);
}
