/* main.c: gzserve, the sample server: access handler, start and stop. */
/*
 * gzserve serves the files under --root, or a built-in demo, on
 * libmicrohttpd, its responses compressed by mhdgz (its files, one
 * concern each: DESIGN.md).
 *
 * What to copy from here:
 *  - responses are made with mhdgz_response_from_buffer/_from_fd64/
 *    _from_callback instead of MHD_create_response_*, then queued through
 *    the handler with the request's method and path (queue() in respond.c:
 *    mhdgz_queue_response_ex, whose outcome feeds the access log);
 *  - a file is a fresh fd response per request (files.c), opened beneath
 *    the root (beneath.c); the handler's file cache (--cache-size)
 *    compresses each file version once;
 *  - conditional requests (files.c, demo.c) are the handler's
 *    (MHDGZ_REQUEST_PRECONDITIONS): the ETag forms mhdgz gives coded
 *    responses (W/"x", "x-gzip") still validate, a 304 carries the Vary,
 *    ETag and length of the 200 this client would get, a 412 no content;
 *  - a precompressed FILE.gz (siblings.c), chosen with mhdgz_accept_coding
 *    among the codings mhdgz_coding_info() ranks, is queued with its
 *    Content-Encoding set, so the handler leaves it alone;
 *  - a server-sent event stream (demo.c) waits between events by
 *    suspending its connection (MHD_suspend_connection from the content
 *    reader) instead of returning 0, which would spin libmicrohttpd's
 *    polling threads.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gzserve.h"

/* File descriptors kept for other uses than connections (the listening
 * socket, a thread pool's epoll and signalling descriptors, the walk
 * beneath the root, stdio). */
#ifndef GZS_FD_RESERVE
#define GZS_FD_RESERVE 256
#endif
/* listen() backlog: a burst of connections waits here for accept()
 * instead of being dropped (the kernel caps it at net.core.somaxconn). */
#ifndef GZS_LISTEN_BACKLOG
#define GZS_LISTEN_BACKLOG 4096
#endif

/* Idle keep-alive connections are closed after this many seconds. */
#ifndef GZS_CONN_TIMEOUT_S
#define GZS_CONN_TIMEOUT_S 60
#endif

/* ------------------------------------------------------------------------ */
/* Connections: as many as the descriptors allow                            */
/* ------------------------------------------------------------------------ */

/* Raise the soft RLIMIT_NOFILE to the hard limit (as far as an
 * unprivileged process may) and return it. */
static unsigned long
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 1024;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		getrlimit(RLIMIT_NOFILE, &rl);
	return rl.rlim_cur == RLIM_INFINITY ? 1048576ul : (unsigned long)rl.rlim_cur;
}

/* libmicrohttpd's connection notifications: count open connections and
 * say so, once until they fall back below nine tenths, when the limit is
 * reached: libmicrohttpd then closes new connections at once. */
static void
on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
	      enum MHD_ConnectionNotificationCode toe)
{
	struct server *s = cls;
	int n;

	(void)connection;
	(void)socket_context;
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		n = atomic_fetch_sub(&s->conns, 1) - 1;
		if ((unsigned int)n < s->conn_limit / 10 * 9)
			atomic_store(&s->limit_warned, false);
		return;
	}
	n = atomic_fetch_add(&s->conns, 1) + 1;
	if ((unsigned int)n >= s->conn_limit && !atomic_exchange(&s->limit_warned, true))
		fprintf(stderr,
			"gzserve: connection limit reached (%u, from RLIMIT_NOFILE %lu): "
			"new ones closed until some end (ulimit -Hn)\n",
			(unsigned int)n, s->nofile);
}

/* ------------------------------------------------------------------------ */
/* The access handler                                                       */

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
	   const char *version, const char *upload, size_t *upload_len, void **req_cls)
{
	struct server *s = cls;
	struct req *rq = *req_cls;
	bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0;
	bool head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;

	(void)version;
	if (!rq)
		return MHD_NO; /* the URI callback ran out of memory */
	if (!rq->seen) {
		/* First call: headers only; answered on the next, once the
		 * request is read, or now if it has a body nothing reads. */
		rq->seen = true;
		snprintf(rq->method, sizeof rq->method, "%s", method);
		if (!s->root && echo_path(rq))
			return echo_begin(rq, conn); /* a body to read (echo.c) */
		/* A body nothing reads: answered before it (respond.c). */
		if (has_body(conn))
			return refuse_body(rq, conn, get || head ? 413 : 405, "GET, HEAD");
		return MHD_YES;
	}
	if (rq->echo)
		return echo_request(rq, conn, upload, upload_len);
	if (!get && !head)
		return respond_error(rq, conn, MHD_HTTP_METHOD_NOT_ALLOWED);
	/* Files are found from the raw target (files.c: target_to_relpath);
	 * the demo's plain ASCII paths from libmicrohttpd's decoded url. */
	if (s->root)
		return serve_file(rq, conn, method);
	return serve_demo(rq, conn, url, method);
}

/* ------------------------------------------------------------------------ */
/* Start and stop                                                           */

static int
handler_new(struct server *s)
{
	static const char *const none[] = { NULL };
	struct mhdgz_options o;
	int rc;

	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.gzip.backend = s->cfg.backend;
	if (s->cfg.level_set)
		o.gzip.level = s->cfg.level;
	/* --min-size 0 means "everything", which is mhdgz's 1 (an empty body
	 * is never compressed); mhdgz's 0 means its default. */
	if (s->cfg.min_size_set)
		o.min_nbytes = s->cfg.min_size ? s->cfg.min_size : 1;
	o.compress_types = s->cfg.no_compress ? none : s->cfg.types;
	o.etag_policy = s->cfg.etag;
	if (s->cfg.length_hiding) {
		o.flags |= MHDGZ_F_LENGTH_HIDING;
		o.padding.max_nbytes = s->cfg.length_hiding;
	}
	o.codings = s->cfg.codings;
	o.limits.coder_nbytes = s->cfg.coder_memory;
	/* Files only: the demo's responses are made once and cache their
	 * variants themselves. */
	if (s->cfg.root)
		o.limits.store_nbytes = s->cfg.cache_size;
	rc = mhdgz_new(&o, &s->gz);
	/* options.c checked every other value: the library names the field it
	 * refused (codings: --codings, compress_types: --types). */
	if (rc == MHDGZ_EINVAL || rc == MHDGZ_ENOTSUP)
		bad_option("mhdgz_new: %s", mhdgz_strerror(rc));
	if (rc != 0) {
		fprintf(stderr, "gzserve: mhdgz_new: %s\n", mhdgz_strerror(rc));
		return -1;
	}
	/* The level in use, and the codings in the order mhdgz_new() read
	 * them: the siblings that --precompressed looks for, chosen as on the
	 * fly. */
	for (int k = 0; k < MHDGZ_CODING_COUNT; k++) {
		struct mhdgz_coding_info ci = { .size = sizeof ci };

		if (mhdgz_coding_info(s->gz, (enum mhdgz_coding)k, &ci) == 0 && ci.enabled) {
			s->order[ci.rank] = (enum mhdgz_coding)k;
			s->norder++;
			if (k == MHDGZ_CODING_GZIP)
				s->level = ci.level;
		}
	}
	return 0;
}

/* --bind and --port as a socket address in *ss; true for IPv6. */
static bool
bind_addr(const struct config *cfg, struct sockaddr_storage *ss)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
	bool v6 = strchr(cfg->bind, ':') != NULL;

	memset(ss, 0, sizeof *ss);
	if (v6) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)cfg->port);
		if (inet_pton(AF_INET6, cfg->bind, &sin6->sin6_addr) != 1)
			bad_option("--bind: '%s' is not an IPv6 address", cfg->bind);
	} else {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)cfg->port);
		if (inet_pton(AF_INET, cfg->bind, &sin->sin_addr) != 1)
			bad_option("--bind: '%s' is not an IPv4 address", cfg->bind);
	}
	return v6;
}

/* --root: its real path, and its descriptor, beneath which every file is
 * opened (beneath.c). */
static void
open_root(struct server *s)
{
	struct stat st;

	s->root = realpath(s->cfg.root, NULL);
	if (!s->root || stat(s->root, &st) != 0 || !S_ISDIR(st.st_mode))
		bad_option("--root: '%s' is not a directory", s->cfg.root);
	/* "/" as "": every real path starts with it and then "/". */
	s->root_len = strcmp(s->root, "/") == 0 ? 0 : strlen(s->root);
	s->root_fd = open(s->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->root_fd < 0)
		bad_option("--root: '%s' cannot be opened", s->cfg.root);
}

/* The daemon, listening; its "listening on" line printed. 0 or -1. */
static int
start_daemon(struct server *s, struct sockaddr_storage *ss, bool v6)
{
	/* Suspend/resume for /events; it also brings the inter-thread
	 * channel MHD_quiesce_daemon() needs with a thread pool. */
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
			     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0);
	const union MHD_DaemonInfo *info;
	unsigned long avail;

	s->nofile = raise_nofile();
	/* Descriptors past the reserve: half for sockets, half for the two
	 * a connection serving a file holds (gzserve(1)); past the file
	 * limit a 503 at once (serve_file), not a stalled accept(). */
	avail = s->nofile > 2 * GZS_FD_RESERVE ? s->nofile - GZS_FD_RESERVE : s->nofile / 2;
	s->conn_limit = (unsigned int)(avail / 2);
	s->file_limit = (unsigned int)(avail / 4);
	s->daemon = MHD_start_daemon(
		flags, (uint16_t)s->cfg.port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
		on_mhd_log, s, /* first, or it misses some */
		MHD_OPTION_SOCK_ADDR, (struct sockaddr *)ss, MHD_OPTION_CONNECTION_LIMIT,
		s->conn_limit, MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned int)GZS_LISTEN_BACKLOG,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_THREAD_POOL_SIZE,
		(unsigned int)(s->cfg.threads > 1 ? s->cfg.threads : 0),
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)GZS_CONN_TIMEOUT_S,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
		s, MHD_OPTION_END);
	if (!s->daemon) {
		fprintf(stderr, "gzserve: cannot listen on %s port %u\n", s->cfg.bind, s->cfg.port);
		return -1;
	}
	/* Once listening: a refused port is the only line then. */
	if (!s->cfg.quiet)
		fprintf(stderr,
			"gzserve: up to %u connections, %u of them serving files "
			"(RLIMIT_NOFILE %lu)\n",
			s->conn_limit, s->file_limit, s->nofile);
	info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	printf(v6 ? "listening on http://[%s]:%u/\n" : "listening on http://%s:%u/\n", s->cfg.bind,
	       info ? info->port : s->cfg.port);
	fflush(stdout);
	return 0;
}

/* Wait for SIGINT/SIGTERM; once a second, give back the compressors a
 * burst left idle (mhdgz_trim: the pools trim by themselves only when
 * compressors are taken or given back, and a quiet server takes none).
 * Then stop accepting, let requests in flight finish (GZS_GRACE_MS at
 * most) and stop the daemon. */
static void
serve_until_signal(struct server *s, const sigset_t *sigs)
{
	const struct timespec tick = { .tv_sec = 1, .tv_nsec = 0 };
	MHD_socket lfd;
	uint64_t deadline;
	int sig;

	while ((sig = sigtimedwait(sigs, NULL, &tick)) != SIGINT && sig != SIGTERM)
		mhdgz_trim(s->gz);
	if (!s->cfg.quiet)
		fprintf(stderr, "gzserve: %s: finishing requests in flight\n",
			sig == SIGINT ? "SIGINT" : "SIGTERM");
	/* Stop accepting; connections already open are served. */
	lfd = MHD_quiesce_daemon(s->daemon);
	if (lfd != MHD_INVALID_SOCKET)
		close(lfd);
	/* Event streams end at their next event instead of running on. */
	ticker_stop(s);
	deadline = now_us() + (uint64_t)GZS_GRACE_MS * 1000u;
	while (atomic_load(&s->in_flight) > 0 && now_us() < deadline)
		usleep(10000);
	ticker_join(s);
	MHD_stop_daemon(s->daemon);
}

int
main(int argc, char **argv)
{
	static struct server srv;
	struct server *s = &srv;
	struct sockaddr_storage ss;
	sigset_t sigs;
	bool v6;

	parse_options(argc, argv, &s->cfg);
	v6 = bind_addr(&s->cfg, &ss);
	if (s->cfg.root)
		open_root(s);
	/* Signals are taken by sigtimedwait(); every thread started from
	 * here on inherits the block, so none of them is interrupted. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (handler_new(s) != 0 || dict_init(s) != 0)
		return 1;
	if (s->root ? mime_load(s, "/etc/mime.types") != 0 : demo_init(s) != 0) {
		fprintf(stderr, "gzserve: out of memory\n");
		return 1;
	}
	if (ticker_start(s) != 0) {
		fprintf(stderr, "gzserve: cannot start a thread\n");
		return 1;
	}
	if (start_daemon(s, &ss, v6) != 0)
		return 1;
	serve_until_signal(s, &sigs);
	demo_fini(s);
	dict_fini(s);
	mhdgz_free(s->gz);
	mime_free(s);
	if (s->root)
		close(s->root_fd);
	free(s->root);
	free(s->cfg.types_buf);
	free(s->cfg.types);
	return 0;
}
