/* linger.c: the lingering close of a connection whose request body was refused unread (RFC 9112 section 9.6). */
/*
 * libmicrohttpd sends an answer queued before the body at once and closes
 * with the body unread, and the kernel then resets the connection: a
 * client still sending fails before it reads the answer. So, as nginx's
 * lingering close, the request completed callback gives a duplicate of
 * the socket to a thread that discards up to GZS_LINGER_NBYTES bytes or
 * GZS_LINGER_MS from it, then closes it and logs the bytes
 * (gzserve_test.sh, "Lingering close").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <inttypes.h>
#include <poll.h>
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
	int fd;
	unsigned int port; /* the client's, for the log */
	uint64_t deadline_us, nbytes;
};
static struct {
	const struct server *s;
	pthread_mutex_t lock;
	pthread_t thread;
	struct lingerer l[GZS_LINGER_MAX];
	unsigned int n;
	bool stop;
} lg = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Read what lingerer l has; true when it is done (end, error, bound). */
static bool
drain(struct lingerer *l)
{
	static char sink[64 * 1024];

	while (l->nbytes < GZS_LINGER_NBYTES) {
		uint64_t left = GZS_LINGER_NBYTES - l->nbytes;
		ssize_t n = recv(l->fd, sink, left < sizeof sink ? (size_t)left : sizeof sink,
				 MSG_DONTWAIT);

		if (n <= 0)
			return n == 0 || (errno != EAGAIN && errno != EINTR);
		l->nbytes += (uint64_t)n;
	}
	return true;
}

static void *
linger_thread(void *arg)
{
	struct pollfd p[GZS_LINGER_MAX];

	(void)arg;
	for (;;) {
		unsigned int n, i;
		bool stop;

		pthread_mutex_lock(&lg.lock);
		n = lg.n;
		stop = lg.stop;
		for (i = 0; i < n; i++)
			p[i] = (struct pollfd){ .fd = lg.l[i].fd, .events = POLLIN };
		pthread_mutex_unlock(&lg.lock);
		/* A connection added meanwhile waits up to 100 ms, in the
		 * kernel's buffers. Entries [0, n) are this thread's alone:
		 * others only append. */
		if (!stop)
			poll(p, n, 100);
		for (i = 0; i < n; i++) {
			struct lingerer *l = &lg.l[i];

			if (!stop && !drain(l) && now_us() < l->deadline_us)
				continue;
			if (!lg.s->cfg.quiet)
				fprintf(stderr,
					"gzserve: lingering close: %" PRIu64
					" bytes discarded (client port %u)\n",
					l->nbytes, l->port);
			close(l->fd);
			l->fd = -1;
		}
		pthread_mutex_lock(&lg.lock);
		for (i = 0; i < lg.n;)
			if (lg.l[i].fd < 0)
				lg.l[i] = lg.l[--lg.n];
			else
				i++;
		pthread_mutex_unlock(&lg.lock);
		if (stop)
			return NULL;
	}
}

int
linger_start(const struct server *s)
{
	lg.s = s;
	return pthread_create(&lg.thread, NULL, linger_thread, NULL) == 0 ? 0 : -1;
}

/* The answer is sent, libmicrohttpd is about to close the connection. */
void
linger_add(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	int fd = ci ? fcntl(ci->connect_fd, F_DUPFD_CLOEXEC, 0) : -1;
	struct sockaddr_in6 sa = { 0 }; /* the port is where an IPv4 one's is */
	socklen_t len = sizeof sa;

	if (fd < 0)
		return;
	shutdown(fd, SHUT_WR); /* the end of the answer (libmicrohttpd's too) */
	getpeername(fd, (struct sockaddr *)&sa, &len);
	pthread_mutex_lock(&lg.lock);
	if (lg.n < GZS_LINGER_MAX && !lg.stop) {
		lg.l[lg.n++] = (struct lingerer){ fd, ntohs(sa.sin6_port),
						  now_us() + GZS_LINGER_MS * 1000ull, 0 };
		fd = -1;
	}
	pthread_mutex_unlock(&lg.lock);
	if (fd >= 0)
		close(fd);
}

/* After the daemon stopped: close what still lingers. */
void
linger_stop(void)
{
	pthread_mutex_lock(&lg.lock);
	lg.stop = true;
	pthread_mutex_unlock(&lg.lock);
	pthread_join(lg.thread, NULL);
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
