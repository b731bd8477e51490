/* main.c: gzserve, the sample server: command line, access handler, start and stop. */
/*
 * gzserve serves the files under --root, or a built-in demo, on
 * libmicrohttpd, its responses gzip-compressed by mhdgz. Its files:
 * main.c (this), respond.c (queueing through the handler), files.c
 * (--root), mime.c (media types), demo.c (the demo, /events, /stats),
 * echo.c (POST /echo: request bodies coded gzip), log.c (the access
 * log), gzserve.h (what they share).
 *
 * What to copy from here:
 *  - responses are made with mhdgz_response_from_buffer/_from_fd_at_offset64/
 *    _from_callback instead of MHD_create_response_*, then queued through
 *    the handler with the request method (queue() in respond.c:
 *    mhdgz_queue_response_ex, whose outcome feeds the access log);
 *  - conditional requests (files.c, demo.c) use mhdgz_evaluate_preconditions, so the ETag forms
 *    mhdgz gives gzip responses (W/"x", "x-gzip") still validate;
 *  - a 304 is the 200's own response queued with status 304: libmicrohttpd
 *    sends its header fields without the body (Content-Length stays the
 *    200's, as RFC 9110 section 8.6 requires), and mhdgz gives it the Vary
 *    and ETag form the 200 would have for this client;
 *  - a precompressed FILE.gz (files.c) is queued with Content-Encoding already set, so
 *    the handler leaves it alone;
 *  - a server-sent event stream (demo.c) waits between events by suspending its
 *    connection (MHD_suspend_connection from the content reader) instead of
 *    returning 0, which would spin libmicrohttpd's polling threads.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gzserve.h"

/* /events: how many events, and the milliseconds between them (--events,
 * --event-ms). */
#ifndef GZS_EVENTS
#define GZS_EVENTS 10
#endif
#ifndef GZS_EVENT_MS
#define GZS_EVENT_MS 1000
#endif
/* File descriptors kept for other uses than connections (the listening
 * socket, a thread pool's epoll and signalling descriptors, files being
 * served, stdio): the connection limit is RLIMIT_NOFILE minus these. */
#ifndef GZS_FD_RESERVE
#define GZS_FD_RESERVE 256
#endif
/* listen() backlog: a burst of connections waits here for accept()
 * instead of being dropped (the kernel caps it at net.core.somaxconn). */
#ifndef GZS_LISTEN_BACKLOG
#define GZS_LISTEN_BACKLOG 4096
#endif

/* How long SIGINT/SIGTERM waits for requests in flight before stopping the
 * daemon anyway, in milliseconds: long enough for a large download on a
 * local network, short enough that a stuck client cannot hold a restart. */
#ifndef GZS_GRACE_MS
#define GZS_GRACE_MS 10000
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
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t want = rl.rlim_max;

		rl.rlim_cur = want;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
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
			"gzserve: connection limit reached: %u connections open, the most "
			"RLIMIT_NOFILE %lu allows (minus %u for other uses); new connections "
			"are closed until some end (raise the hard limit: ulimit -Hn)\n",
			(unsigned int)n, s->nofile, (unsigned int)GZS_FD_RESERVE);
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
	(void)upload;
	(void)url; /* decoded; we work from the raw target (see target_to_relpath) */
	if (!rq)
		return MHD_NO; /* the URI callback ran out of memory */
	if (!rq->seen) {
		/* First call: headers only. Answer once the request (and any
		 * body, which we discard) has been read. */
		rq->seen = true;
		snprintf(rq->method, sizeof rq->method, "%s", method);
		if (!s->root && echo_path(rq))
			return echo_begin(rq, conn); /* a body to read (echo.c) */
		return MHD_YES;
	}
	if (rq->echo)
		return echo_request(rq, conn, upload, upload_len);
	if (*upload_len) {
		*upload_len = 0;
		return MHD_YES;
	}
	if (!get && !head)
		return respond_error(rq, conn, MHD_HTTP_METHOD_NOT_ALLOWED);
	if (s->root)
		return serve_file(rq, conn, method);
	{
		/* The demo's paths are plain ASCII: compare the raw path. */
		char path[64];
		size_t n = strcspn(rq->uri, "?#");

		if (n >= sizeof path)
			return respond_error(rq, conn, MHD_HTTP_NOT_FOUND);
		memcpy(path, rq->uri, n);
		path[n] = '\0';
		return serve_demo(rq, conn, path, method);
	}
}

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

static void
usage(FILE *f)
{
	fprintf(f,
		"Usage: gzserve [OPTION]...\n"
		"A small HTTP server on libmicrohttpd whose responses are gzip-compressed by\n"
		"mhdgz. Without --root it serves a built-in demo: / (index page), /2k.json,\n"
		"/20k.json, /100k.json (the benchmark payloads), /events (server-sent events,\n"
		"one a second for 10 s), /stats (the handler's counters as JSON), /204\n"
		"(an empty 204 No Content) and POST /echo (the decoded length and CRC-32 of\n"
		"the request body, sent identity or with Content-Encoding: gzip).\n"
		"\n"
		"  --bind ADDR       IPv4 or IPv6 address to listen on (default 127.0.0.1)\n"
		"  --port N          TCP port, 0-65535 (default 8080); 0 picks a free port.\n"
		"                    The address is printed on stdout as\n"
		"                    'listening on http://ADDR:PORT/'\n"
		"  --root DIR        serve the files under DIR instead of the demo: index.html\n"
		"                    for directories, no listings, ETag/Last-Modified\n"
		"                    revalidation, single byte ranges\n"
		"  --backend NAME    compressor: zlib, libdeflate or isal (default libdeflate)\n"
		"  --level N         compression level in the backend's range: zlib 1-9,\n"
		"                    libdeflate 1-12, isal 1-4 (igzip 0-3; default 6, 5, 2)\n"
		"  --min-size BYTES  bodies smaller than this are sent uncompressed (default\n"
		"                    %u; 0 compresses every non-empty body)\n"
		"  --types LIST      comma-separated media types to compress, replacing the\n"
		"                    default text-like list: type/subtype, type/*, */*+suffix\n"
		"                    (e.g. 'text/*,application/json,*/*+xml')\n"
		"  --events N        /events: send N events, 1-1000000 (default 10)\n"
		"  --event-ms MS     /events: milliseconds between events (default 1000)\n"
		"  --threads N       libmicrohttpd thread pool size, 1-1024 (default: the\n"
		"                    number of CPUs)\n"
		"  --codings LIST    content codings offered, in the server's order of\n"
		"                    preference (it breaks ties of the client's q-values):\n"
		"                    comma-separated gzip, zstd, br (default: gzip)\n"
		"  --precompressed   with --root: send FILE.gz, FILE.zst or FILE.br for FILE\n"
		"                    when the client accepts that coding (those of --codings,\n"
		"                    chosen as on the fly), with FILE's Content-Type and the\n"
		"                    Content-Encoding (like nginx's gzip_static, brotli_static)\n"
		"  --etag POLICY     the strong ETag of a compressed response: weak (W/\"x\",\n"
		"                    the default), suffix (\"x-gzip\"), drop, or keep\n"
		"  --length-hiding N pad every gzip response with 1 to N bytes (1-%u) in its\n"
		"                    gzip header, a length keyed on the body: BREACH\n"
		"                    mitigation for pages holding a secret next to reflected\n"
		"                    input (default: off; libmhdgz's default N is %u)\n"
		"  --no-compress     never compress on the fly (precompressed files still go)\n"
		"  --cache-size BYTES with --root: keep up to BYTES of compressed file bodies\n"
		"                    for reuse, keyed by each file's identity and times, so a\n"
		"                    file version is compressed once (default %u; 0: off)\n"
		"  --keep-size BYTES with --root: keep up to BYTES of file responses in memory\n"
		"                    (files up to %u bytes, their coded variants included),\n"
		"                    each checked by one stat per request, so a changed file\n"
		"                    is never served stale (default %u; 0: off; not with\n"
		"                    --precompressed or --dictionary)\n"
		"  --dictionary FILE --dictionary-match PATTERN\n"
		"                    RFC 9842: FILE's bytes are a dictionary for requests whose\n"
		"                    path matches PATTERN ('/' first, '*' any run): a client\n"
		"                    that sends its SHA-256 as Available-Dictionary and accepts\n"
		"                    dcz gets dcz (repeatable, up to 16)\n"
		"  --quiet           no access log and no libmicrohttpd messages. The log\n"
		"                    is one line per request on stderr: method, target,\n"
		"                    status, body bytes (uncompressed), bytes sent on the\n"
		"                    socket (headers included; - if unknown), coding\n"
		"                    (gzip, zstd, br or identity), microseconds\n"
		"  --help            this text\n"
		"\n"
		"SIGINT or SIGTERM stops accepting, lets requests in flight finish (up to\n"
		"%d s; open /events streams are ended at once, with a complete gzip\n"
		"member) and exits 0. Exit status 2: invalid option; 1: cannot start.\n",
		MHDGZ_DEFAULT_MIN_NBYTES, MHDGZ_LENGTH_HIDING_MAX_LIMIT,
		MHDGZ_DEFAULT_LENGTH_HIDING_MAX, GZS_CACHE_SIZE_DEFAULT, GZS_KEEP_FILE_MAX,
		GZS_KEEP_SIZE_DEFAULT, GZS_GRACE_MS / 1000);
}

__attribute__((format(printf, 1, 2), noreturn)) static void
bad_option(const char *fmt, ...)
{
	va_list ap;

	fputs("gzserve: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'gzserve --help'.\n", stderr);
	exit(2);
}

/* A whole decimal number in [min, max], or exit 2 naming the option. */
static unsigned long long
number_arg(const char *opt, const char *v, unsigned long long min, unsigned long long max)
{
	unsigned long long n;
	char *end;

	errno = 0;
	if (!*v || *v == '-' || *v == '+' || isspace((unsigned char)*v))
		bad_option("%s: '%s' is not a number", opt, v);
	n = strtoull(v, &end, 10);
	if (*end || errno == ERANGE)
		bad_option("%s: '%s' is not a number", opt, v);
	if (n < min || n > max)
		bad_option("%s: %s is out of range (%llu-%llu)", opt, v, min, max);
	return n;
}

/* Split a --types list into a NULL-terminated array; patterns themselves
 * are checked by mhdgz_new(). */
static void
types_arg(struct config *cfg, const char *v)
{
	char *save = NULL, *tok;
	size_t n = 0, cap = 8;

	free(cfg->types_buf);
	free(cfg->types);
	cfg->types_buf = strdup(v);
	cfg->types = malloc(cap * sizeof *cfg->types);
	if (!cfg->types_buf || !cfg->types)
		bad_option("out of memory");
	for (tok = strtok_r(cfg->types_buf, ", \t", &save); tok;
	     tok = strtok_r(NULL, ", \t", &save)) {
		if (n + 1 == cap) {
			const char **t = realloc(cfg->types, (cap *= 2) * sizeof *t);
			if (!t)
				bad_option("out of memory");
			cfg->types = t;
		}
		cfg->types[n++] = tok;
	}
	if (n == 0)
		bad_option("--types: empty list (use --no-compress to compress nothing)");
	cfg->types[n] = NULL;
}

/* --codings: the list as mhdgz_new() takes it, and its codings in order
 * for --precompressed. */
static void
codings_arg(struct config *cfg, const char *v)
{
	const char *p = v;

	cfg->codings = v;
	cfg->norder = 0;
	for (;;) {
		size_t len;
		int k;

		p += strspn(p, " \t");
		len = strcspn(p, ", \t");
		for (k = 0; k < MHDGZ_CODING_COUNT; k++)
			if (len == strlen(mhdgz_coding_name((enum mhdgz_coding)k)) &&
			    strncasecmp(p, mhdgz_coding_name((enum mhdgz_coding)k), len) == 0)
				break;
		if (k == MHDGZ_CODING_COUNT)
			bad_option("--codings: '%.*s' is not gzip, zstd or br", (int)len, p);
		for (size_t i = 0; i < cfg->norder; i++)
			if (cfg->order[i] == (enum mhdgz_coding)k)
				bad_option("--codings: %s listed twice", mhdgz_coding_name(k));
		if (!mhdgz_coding_available((enum mhdgz_coding)k))
			bad_option("--codings: '%s' was not compiled into this libmhdgz",
				   mhdgz_coding_name(k));
		cfg->order[cfg->norder++] = (enum mhdgz_coding)k;
		p += len;
		p += strspn(p, " \t");
		if (*p == '\0')
			return;
		if (*p != ',')
			bad_option("--codings: '%s' is not a comma-separated list", v);
		p++;
	}
}

static void
parse_options(int argc, char **argv, struct config *cfg)
{
	enum {
		O_BIND = 256,
		O_PORT,
		O_ROOT,
		O_BACKEND,
		O_LEVEL,
		O_MIN_SIZE,
		O_TYPES,
		O_THREADS,
		O_EVENTS,
		O_EVENT_MS,
		O_PRECOMPRESSED,
		O_CODINGS,
		O_ETAG,
		O_LENGTH_HIDING,
		O_NO_COMPRESS,
		O_CACHE_SIZE,
		O_KEEP_SIZE,
		O_DICTIONARY,
		O_DICTIONARY_MATCH,
		O_QUIET,
		O_HELP
	};
	static const struct option longopts[] = {
		{ "bind", required_argument, NULL, O_BIND },
		{ "port", required_argument, NULL, O_PORT },
		{ "root", required_argument, NULL, O_ROOT },
		{ "backend", required_argument, NULL, O_BACKEND },
		{ "level", required_argument, NULL, O_LEVEL },
		{ "min-size", required_argument, NULL, O_MIN_SIZE },
		{ "types", required_argument, NULL, O_TYPES },
		{ "threads", required_argument, NULL, O_THREADS },
		{ "events", required_argument, NULL, O_EVENTS },
		{ "event-ms", required_argument, NULL, O_EVENT_MS },
		{ "precompressed", no_argument, NULL, O_PRECOMPRESSED },
		{ "codings", required_argument, NULL, O_CODINGS },
		{ "etag", required_argument, NULL, O_ETAG },
		{ "length-hiding", required_argument, NULL, O_LENGTH_HIDING },
		{ "no-compress", no_argument, NULL, O_NO_COMPRESS },
		{ "cache-size", required_argument, NULL, O_CACHE_SIZE },
		{ "keep-size", required_argument, NULL, O_KEEP_SIZE },
		{ "dictionary", required_argument, NULL, O_DICTIONARY },
		{ "dictionary-match", required_argument, NULL, O_DICTIONARY_MATCH },
		{ "quiet", no_argument, NULL, O_QUIET },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	const char *level_arg = NULL;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int c, rc, lmin, lmax;

	cfg->bind = "127.0.0.1";
	cfg->port = 8080;
	cfg->backend = MHDGZ_BACKEND_DEFAULT;
	cfg->threads = ncpu > 0 ? (unsigned int)(ncpu > 1024 ? 1024 : ncpu) : 1;
	cfg->etag = MHDGZ_ETAG_WEAKEN;
	cfg->cache_size = GZS_CACHE_SIZE_DEFAULT;
	cfg->keep_size = GZS_KEEP_SIZE_DEFAULT;
	cfg->order[0] = MHDGZ_CODING_GZIP;
	cfg->norder = 1;
	cfg->events = GZS_EVENTS;
	cfg->event_ms = GZS_EVENT_MS;
	opterr = 0; /* our own messages, and exit 2 */
	while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		switch (c) {
		case O_BIND:
			cfg->bind = optarg;
			break;
		case O_PORT:
			cfg->port = (unsigned int)number_arg("--port", optarg, 0, 65535);
			break;
		case O_ROOT:
			cfg->root = optarg;
			break;
		case O_BACKEND:
			rc = mhdgz_backend_from_name(optarg, &cfg->backend);
			if (rc == MHDGZ_ENOTSUP)
				bad_option("--backend: '%s' was not compiled into this libmhdgz",
					   optarg);
			if (rc != 0)
				bad_option("--backend: '%s' is not zlib, libdeflate or isal",
					   optarg);
			break;
		case O_LEVEL:
			level_arg = optarg;
			break;
		case O_MIN_SIZE:
			cfg->min_size = (size_t)number_arg("--min-size", optarg, 0, SIZE_MAX);
			cfg->min_size_set = true;
			break;
		case O_TYPES:
			types_arg(cfg, optarg);
			break;
		case O_THREADS:
			cfg->threads = (unsigned int)number_arg("--threads", optarg, 1, 1024);
			break;
		case O_EVENTS:
			cfg->events = (unsigned int)number_arg("--events", optarg, 1, 1000000);
			break;
		case O_EVENT_MS:
			cfg->event_ms = (unsigned int)number_arg("--event-ms", optarg, 0, 3600000);
			break;
		case O_PRECOMPRESSED:
			cfg->precompressed = true;
			break;
		case O_CODINGS:
			codings_arg(cfg, optarg);
			break;
		case O_ETAG:
			if (strcmp(optarg, "weak") == 0)
				cfg->etag = MHDGZ_ETAG_WEAKEN;
			else if (strcmp(optarg, "suffix") == 0)
				cfg->etag = MHDGZ_ETAG_SUFFIX;
			else if (strcmp(optarg, "drop") == 0)
				cfg->etag = MHDGZ_ETAG_DROP;
			else if (strcmp(optarg, "keep") == 0)
				cfg->etag = MHDGZ_ETAG_KEEP;
			else
				bad_option("--etag: '%s' is not weak, suffix, drop or keep",
					   optarg);
			break;
		case O_LENGTH_HIDING:
			cfg->length_hiding = (size_t)number_arg("--length-hiding", optarg, 1,
								MHDGZ_LENGTH_HIDING_MAX_LIMIT);
			break;
		case O_NO_COMPRESS:
			cfg->no_compress = true;
			break;
		case O_CACHE_SIZE:
			cfg->cache_size = (size_t)number_arg("--cache-size", optarg, 0, SIZE_MAX);
			break;
		case O_KEEP_SIZE:
			cfg->keep_size = (size_t)number_arg("--keep-size", optarg, 0, SIZE_MAX);
			break;
		case O_DICTIONARY:
			if (cfg->ndict == GZS_DICT_MAX)
				bad_option("--dictionary: at most %d", GZS_DICT_MAX);
			if (cfg->ndict && !cfg->dict_match[cfg->ndict - 1])
				bad_option("--dictionary %s needs a --dictionary-match",
					   cfg->dict_file[cfg->ndict - 1]);
			cfg->dict_file[cfg->ndict++] = optarg;
			break;
		case O_DICTIONARY_MATCH:
			if (!cfg->ndict || cfg->dict_match[cfg->ndict - 1])
				bad_option("--dictionary-match follows a --dictionary");
			cfg->dict_match[cfg->ndict - 1] = optarg;
			break;
		case O_QUIET:
			cfg->quiet = true;
			break;
		case O_HELP:
			usage(stdout);
			exit(0);
		case ':':
			bad_option("%s needs a value", argv[optind - 1]);
		default:
			if (optopt)
				bad_option("unknown option '-%c'", optopt);
			bad_option("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		bad_option("unexpected argument '%s'", argv[optind]);
	if (cfg->ndict && !cfg->dict_match[cfg->ndict - 1])
		bad_option("--dictionary %s needs a --dictionary-match",
			   cfg->dict_file[cfg->ndict - 1]);
	if (cfg->precompressed && !cfg->root)
		bad_option("--precompressed needs --root");
	/* The level's range depends on the backend, whichever came first. */
	if (level_arg) {
		if (mhdgz_backend_levels(cfg->backend, &lmin, &lmax, NULL) != 0)
			bad_option("--backend: not available");
		cfg->level = (int)number_arg("--level", level_arg, (unsigned long long)lmin,
					     (unsigned long long)lmax);
		cfg->level_set = true;
	}
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
	o.backend = s->cfg.backend;
	if (s->cfg.level_set)
		o.level = s->cfg.level;
	/* --min-size 0 means "everything", which is mhdgz's 1 (an empty body
	 * is never compressed); mhdgz's 0 means its default. */
	if (s->cfg.min_size_set)
		o.min_nbytes = s->cfg.min_size ? s->cfg.min_size : 1;
	o.compress_types = s->cfg.no_compress ? none : s->cfg.types;
	o.etag_policy = s->cfg.etag;
	if (s->cfg.length_hiding) {
		o.flags |= MHDGZ_F_LENGTH_HIDING;
		o.length_hiding_max = s->cfg.length_hiding;
	}
	o.codings = s->cfg.codings;
	/* Files only: the demo's responses are made once and cache their
	 * variants themselves. */
	if (s->cfg.root)
		o.file_cache_nbytes = s->cfg.cache_size;
	s->level = s->cfg.level;
	if (!s->cfg.level_set)
		(void)mhdgz_backend_levels(s->cfg.backend, NULL, NULL, &s->level);
	rc = mhdgz_new(&o, &s->gz);
	if (rc == MHDGZ_EINVAL && s->cfg.types) {
		fprintf(stderr, "gzserve: --types: invalid media type pattern in the list\n"
				"Try 'gzserve --help'.\n");
		exit(2);
	}
	if (rc != 0) {
		fprintf(stderr, "gzserve: mhdgz_new: %s\n", mhdgz_strerror(rc));
		return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static struct server srv;
	struct server *s = &srv;
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;
	struct sockaddr *sa;
	const union MHD_DaemonInfo *info;
	unsigned int flags, port;
	sigset_t sigs;
	uint64_t deadline;
	int sig = 0;
	bool v6;

	parse_options(argc, argv, &s->cfg);

	memset(&sin, 0, sizeof sin);
	memset(&sin6, 0, sizeof sin6);
	v6 = strchr(s->cfg.bind, ':') != NULL;
	if (v6) {
		sin6.sin6_family = AF_INET6;
		sin6.sin6_port = htons((uint16_t)s->cfg.port);
		if (inet_pton(AF_INET6, s->cfg.bind, &sin6.sin6_addr) != 1)
			bad_option("--bind: '%s' is not an IPv6 address", s->cfg.bind);
		sa = (struct sockaddr *)&sin6;
	} else {
		sin.sin_family = AF_INET;
		sin.sin_port = htons((uint16_t)s->cfg.port);
		if (inet_pton(AF_INET, s->cfg.bind, &sin.sin_addr) != 1)
			bad_option("--bind: '%s' is not an IPv4 address", s->cfg.bind);
		sa = (struct sockaddr *)&sin;
	}
	if (s->cfg.root) {
		struct stat st;

		s->root = realpath(s->cfg.root, NULL);
		if (!s->root || stat(s->root, &st) != 0 || !S_ISDIR(st.st_mode))
			bad_option("--root: '%s' is not a directory", s->cfg.root);
		/* "/" as "": every real path starts with it and then "/". */
		s->root_len = strcmp(s->root, "/") == 0 ? 0 : strlen(s->root);
		/* Files are opened beneath it (files.c); -1: by real path only. */
		s->root_fd = open(s->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}

	/* Signals are taken by sigwait() below; every thread started from
	 * here on inherits the block, so none of them is interrupted. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (handler_new(s) != 0 || dict_init(s) != 0)
		return 1;
	/* Kept responses would bypass the sibling and dictionary choices. */
	if (s->root && !s->cfg.precompressed && !s->cfg.ndict && s->cfg.keep_size) {
		s->keep = keep_new(s->cfg.keep_size);
		if (!s->keep) {
			fprintf(stderr, "gzserve: out of memory\n");
			return 1;
		}
	}
	if (s->root ? mime_load(s, "/etc/mime.types") != 0 : demo_init(s) != 0) {
		fprintf(stderr, "gzserve: out of memory\n");
		return 1;
	}
	if (ticker_start(s) != 0) {
		fprintf(stderr, "gzserve: cannot start a thread\n");
		return 1;
	}

	s->nofile = raise_nofile();
	s->conn_limit = s->nofile > 2 * GZS_FD_RESERVE ? (unsigned int)(s->nofile - GZS_FD_RESERVE)
						       : (unsigned int)(s->nofile / 2);
	if (!s->cfg.quiet)
		fprintf(stderr, "gzserve: up to %u connections (RLIMIT_NOFILE %lu)\n",
			s->conn_limit, s->nofile);

	/* Suspend/resume for /events; it also brings the inter-thread
	 * channel MHD_quiesce_daemon() needs with a thread pool. */
	flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME |
		MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0);
	s->daemon = MHD_start_daemon(flags, (uint16_t)s->cfg.port, NULL, NULL, on_request, s,
				     MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log,
				     s, /* first, or it misses some */
				     MHD_OPTION_SOCK_ADDR, sa, MHD_OPTION_CONNECTION_LIMIT,
				     s->conn_limit, MHD_OPTION_LISTEN_BACKLOG_SIZE,
				     (unsigned int)GZS_LISTEN_BACKLOG, MHD_OPTION_NOTIFY_CONNECTION,
				     on_connection, s, MHD_OPTION_THREAD_POOL_SIZE,
				     (unsigned int)(s->cfg.threads > 1 ? s->cfg.threads : 0),
				     MHD_OPTION_CONNECTION_TIMEOUT,
				     (unsigned int)GZS_CONN_TIMEOUT_S, MHD_OPTION_URI_LOG_CALLBACK,
				     on_uri, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
				     MHD_OPTION_END);
	if (!s->daemon) {
		fprintf(stderr, "gzserve: cannot listen on %s port %u\n", s->cfg.bind, s->cfg.port);
		return 1;
	}
	info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	port = info ? info->port : s->cfg.port;
	printf(v6 ? "listening on http://[%s]:%u/\n" : "listening on http://%s:%u/\n", s->cfg.bind,
	       port);
	fflush(stdout);

	/* Wait for SIGINT/SIGTERM; once a second, give back the compressors
	 * a burst left idle (mhdgz_trim: the pools trim by themselves only
	 * when compressors are taken or given back, and a quiet server takes
	 * none). */
	for (;;) {
		const struct timespec tick = { .tv_sec = 1, .tv_nsec = 0 };

		sig = sigtimedwait(&sigs, NULL, &tick);
		if (sig == SIGINT || sig == SIGTERM)
			break;
		mhdgz_trim(s->gz);
	}
	if (!s->cfg.quiet)
		fprintf(stderr, "gzserve: %s: finishing requests in flight\n",
			sig == SIGINT ? "SIGINT" : "SIGTERM");

	/* Stop accepting; connections already open are served. */
	{
		MHD_socket lfd = MHD_quiesce_daemon(s->daemon);

		if (lfd != MHD_INVALID_SOCKET)
			close(lfd);
	}
	/* Event streams end at their next event instead of running on. */
	ticker_stop(s);
	deadline = now_us() + (uint64_t)GZS_GRACE_MS * 1000u;
	while (atomic_load(&s->in_flight) > 0 && now_us() < deadline)
		usleep(10000);
	ticker_join(s);
	MHD_stop_daemon(s->daemon);
	if (s->keep && !s->cfg.quiet)
		keep_report(s->keep, stderr);
	keep_free(s->keep); /* its responses before the handler */
	demo_fini(s);
	dict_fini(s);
	mhdgz_free(s->gz);
	mime_free(s);
	if (s->root && s->root_fd >= 0)
		close(s->root_fd);
	free(s->root);
	free(s->cfg.types_buf);
	free(s->cfg.types);
	return 0;
}
