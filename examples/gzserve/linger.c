/* linger.c: the lingering close of a connection whose request body was refused unread (RFC 9112 section 9.6). */
/*
 * libmicrohttpd sends an answer queued before the body at once and closes
 * with the body unread, and the kernel then resets the connection: a
 * client still sending fails before it reads the answer. So, as nginx's
 * lingering close, the request completed callback gives a duplicate of
 * the socket to a thread of its own that discards up to GZS_LINGER_NBYTES
 * bytes or GZS_LINGER_MS from it, then closes it and logs the bytes
 * (gzserve_test.sh, "Lingering close").
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gzserve.h"

/* At most 1 MiB (the library's bound for a body refused half way) and
 * 5 s (nginx: 30 s) per connection; 64 connections at once (descriptors
 * from GZS_FD_RESERVE, main.c), past which one closes at once. */
#define GZS_LINGER_NBYTES MHDGZ_UPLOAD_DISCARD_NBYTES
#define GZS_LINGER_MS 5000
#define GZS_LINGER_MAX 64

struct lingerer {
	const struct server *s;
	int fd;
	unsigned int port; /* the client's, for the log */
};
static atomic_uint lingering;

static void *
linger_thread(void *arg)
{
	struct lingerer *l = arg;
	char sink[16 * 1024];
	uint64_t nbytes = 0, now, end = now_us() + GZS_LINGER_MS * 1000ull;
	ssize_t n = 1;

	/* The socket is libmicrohttpd's, non-blocking: wait in poll().
	 * Signals are blocked in every thread (main.c): no EINTR. */
	while (n > 0 && nbytes < GZS_LINGER_NBYTES && (now = now_us()) < end) {
		struct pollfd p = { .fd = l->fd, .events = POLLIN };
		uint64_t left = GZS_LINGER_NBYTES - nbytes;

		if (poll(&p, 1, (int)((end - now) / 1000) + 1) <= 0)
			break;
		n = recv(l->fd, sink, left < sizeof sink ? (size_t)left : sizeof sink,
			 MSG_DONTWAIT);
		nbytes += n > 0 ? (uint64_t)n : 0;
	}
	if (!l->s->cfg.quiet)
		fprintf(stderr,
			"gzserve: lingering close: %" PRIu64 " bytes discarded (client port %u)\n",
			nbytes, l->port);
	close(l->fd);
	free(l);
	atomic_fetch_sub(&lingering, 1);
	return NULL;
}

/* The answer is sent, libmicrohttpd is about to close the connection. */
void
linger_add(const struct server *s, struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct lingerer *l = malloc(sizeof *l);
	struct sockaddr_in6 sa = { 0 }; /* the port is where an IPv4 one's is */
	socklen_t len = sizeof sa;
	pthread_attr_t attr;
	pthread_t t;

	if (atomic_fetch_add(&lingering, 1) >= GZS_LINGER_MAX || !ci || !l ||
	    (l->fd = fcntl(ci->connect_fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		free(l);
		atomic_fetch_sub(&lingering, 1);
		return;
	}
	shutdown(l->fd, SHUT_WR); /* the end of the answer (libmicrohttpd's too) */
	getpeername(l->fd, (struct sockaddr *)&sa, &len);
	l->s = s;
	l->port = ntohs(sa.sin6_port);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, linger_thread, l) != 0) {
		close(l->fd);
		free(l);
		atomic_fetch_sub(&lingering, 1);
	}
	pthread_attr_destroy(&attr);
}

/* Transfer-Encoding, or a Content-Length other than 0 (RFC 9112 6.3). */
bool
has_body(struct MHD_Connection *conn)
{
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_LENGTH);

	return MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
					   MHD_HTTP_HEADER_TRANSFER_ENCODING) ||
	       (cl && strspn(cl, "0") != strlen(cl));
}

/* A body not read, answered on the access handler's first call: sent
 * before the body, then the connection closes, lingering. */
enum MHD_Result
refuse_body(struct req *rq, struct MHD_Connection *conn, unsigned int status, const char *allow)
{
	rq->linger = true;
	return respond_page(rq, conn, status, status == 405 ? MHD_HTTP_HEADER_ALLOW : NULL, allow);
}
