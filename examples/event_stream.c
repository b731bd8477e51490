/* event_stream.c: server-sent events through a coded stream, suspended between events, resumed by a timer. */
/* POSIX.1-2008 (sigwait, pthread, ...), also under -std=c11. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
/*
 * What it teaches: how a content reader waits for data that does not exist
 * yet. It suspends its connection (MHD_suspend_connection) and returns 0;
 * a producer thread resumes it (MHD_resume_connection) when the next event
 * is due. Returning 0 without suspending makes libmicrohttpd call it again
 * in a busy loop; sleeping in it stalls the polling thread's other
 * connections. mhdgz sync-flushes text/event-stream after every event.
 *
 * GET any path: NEVENTS events, then the stream ends. One timer serves
 * every stream: events come INTERVAL_MS apart, the first two sooner
 * (the first at once, the second at the timer's next tick).
 * Usage: event_stream [PORT]  (default 8080; 0 picks a free port). Prints
 * "listening on http://127.0.0.1:PORT/"; SIGINT or SIGTERM stops it.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <microhttpd.h>
#include <mhdgz.h>

#define NEVENTS 5
#define INTERVAL_MS 200

struct stream {
	struct MHD_Connection *conn;
	struct stream *next; /* on the waiting list */
	unsigned int sent;
	unsigned long tick; /* the ticker's count when the last event went */
	char ev[64];
	size_t len, off;
};

/* The producer's state and the suspended streams, all under lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long ticks;
static struct stream *waiting;
static bool stopping;

/* The producer: every INTERVAL_MS, a new tick wakes every waiting stream
 * for its next event; once stopping, one last pass wakes them to end. */
static void *
ticker(void *arg)
{
	struct stream *st, *next;
	bool last = false;

	(void)arg;
	while (!last) {
		nanosleep(&(struct timespec){ .tv_nsec = INTERVAL_MS * 1000000L }, NULL);
		pthread_mutex_lock(&lock);
		last = stopping;
		ticks++;
		for (st = waiting; st; st = next) {
			next = st->next; /* st may be freed once resumed */
			MHD_resume_connection(st->conn);
		}
		waiting = NULL;
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

static ssize_t
read_events(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *st = cls;
	bool end, wait;
	size_t n;

	(void)pos;
	if (st->off == st->len) {
		pthread_mutex_lock(&lock);
		end = st->sent == NEVENTS || stopping;
		/* The first event at once, each later one after a new tick. */
		wait = !end && st->sent > 0 && st->tick == ticks;
		if (wait) { /* suspended before the ticker can see it listed */
			MHD_suspend_connection(st->conn);
			st->next = waiting;
			waiting = st;
		}
		st->tick = ticks;
		pthread_mutex_unlock(&lock);
		if (end)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (wait)
			return 0; /* nothing yet; asked again after the resume */
		st->sent++;
		st->len = (size_t)snprintf(st->ev, sizeof st->ev,
					   "id: %u\ndata: event %u of %u\n\n", st->sent, st->sent,
					   NEVENTS);
		st->off = 0;
	}
	n = st->len - st->off < max ? st->len - st->off : max;
	memcpy(buf, st->ev + st->off, n);
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
	struct stream *st;
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
	st->conn = conn;
	r = mhdgz_response_from_callback(gz, MHD_SIZE_UNKNOWN, 1024, read_events, st, free);
	if (!r) {
		free(st);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
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
	pthread_t tick;
	sigset_t stop;
	int sig;

	if (port < 0 || port > 65535)
		return 2;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop, NULL); /* before any thread: sigwait() gets them */
	if (mhdgz_new(NULL, &gz) != 0 || pthread_create(&tick, NULL, ticker, NULL) != 0)
		return 1;
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME, 0, NULL,
			     NULL, on_request, gz, MHD_OPTION_SOCK_ADDR, &sin, MHD_OPTION_END);
	if (!d)
		return 1;
	printf("listening on http://127.0.0.1:%u/\n",
	       (unsigned)MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port);
	fflush(stdout);
	sigwait(&stop, &sig);
	/* No connection may stay suspended when the daemon stops. */
	pthread_mutex_lock(&lock);
	stopping = true;
	pthread_mutex_unlock(&lock);
	pthread_join(tick, NULL);
	MHD_stop_daemon(d);
	mhdgz_free(gz);
	return 0;
}
