/* gzserve.c: sample server on libmicrohttpd: static files or a built-in demo, gzip by mhdgz. */
/*
 * What to copy from here:
 *  - responses are made with mhdgz_response_from_buffer/_from_fd_at_offset64/
 *    _from_callback instead of MHD_create_response_*, then queued through
 *    the handler (respond() below: mhdgz_select + MHD_queue_response, which is
 *    what mhdgz_queue_response does, spelled out so the access log can say
 *    which coding went out);
 *  - conditional requests use mhdgz_evaluate_preconditions, so the ETag forms
 *    mhdgz gives gzip responses (W/"x", "x-gzip") still validate;
 *  - a 304 is the 200's own response queued with status 304: libmicrohttpd
 *    sends its header fields without the body (Content-Length stays the
 *    200's, as RFC 9110 section 8.6 requires), and mhdgz gives it the Vary
 *    and ETag form the 200 would have for this client;
 *  - a precompressed FILE.gz is queued with Content-Encoding already set, so
 *    the handler leaves it alone;
 *  - a server-sent event stream waits between events by suspending its
 *    connection (MHD_suspend_connection from the content reader) instead of
 *    returning 0, which would spin libmicrohttpd's polling threads.
 */
#define _GNU_SOURCE /* strptime, timegm */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/sockios.h>
#include <linux/tcp.h>
#endif

#include <microhttpd.h>
#include <mhdgz.h>

#include "payload.h"

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

/* /events: how many events, and the time between them in microseconds. */
#ifndef GZS_EVENTS
#define GZS_EVENTS 10
#endif
#ifndef GZS_EVENT_INTERVAL_US
#define GZS_EVENT_INTERVAL_US 1000000
#endif

/* Most Accept-Encoding lines read per request; more is not a real client. */
#define GZS_AE_MAX 16

/* Longest request target printed in the access log, in bytes. */
#ifndef GZS_LOG_TARGET_MAX
#define GZS_LOG_TARGET_MAX 512
#endif

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */

struct config {
	const char *bind;
	unsigned int port;
	const char *root;
	enum mhdgz_backend backend;
	int level;
	bool level_set;
	size_t min_size;
	bool min_size_set;
	char *types_buf;    /* the --types argument, split in place */
	const char **types; /* NULL-terminated, or NULL for the default */
	unsigned int threads;
	bool precompressed;
	enum mhdgz_etag_policy etag;
	bool no_compress;
	bool quiet;
};

/* ------------------------------------------------------------------------ */
/* The server                                                               */

/* One built-in resource of the demo, made once and queued for every
 * request: mhdgz compresses it on the first request and reuses the gzip
 * variant afterwards. */
struct demo {
	const char *path;
	const char *type;
	const char *cache_control;
	const uint8_t *body;
	size_t len;
	char etag[24];
	struct MHD_Response *ok; /* queued as 200, and as 304 */
};

/* A file extension and its media type. */
struct mime {
	char *ext; /* lowercase */
	char *type;
};

struct events;

struct server {
	struct config cfg;
	struct mhdgz *gz;
	int level; /* the level in use, for /stats */
	struct MHD_Daemon *daemon;
	char *root;      /* realpath of --root; NULL in demo mode */
	size_t root_len; /* 0 when the root is "/" */
	struct mime *mimes;
	size_t nmimes;
	struct demo *demos;
	size_t ndemos;
	uint8_t *payload[3];

	atomic_uint_fast64_t requests;
	atomic_int in_flight;

	/* The event ticker: streams waiting for their next event, suspended. */
	pthread_mutex_t tick_lock;
	pthread_cond_t tick_cond;
	pthread_t tick_thread;
	bool stopping; /* under tick_lock: no new waits, wake every stream */
	struct events *waiting;
};

/* One request: created by the URI log callback (the first thing
 * libmicrohttpd tells us about a request, with the URI exactly as sent),
 * freed when the request completes, after its access log line. */
struct req {
	struct server *s;
	char *uri; /* raw request target */
	char method[16];
	uint64_t start_us;
	uint64_t sock_start; /* bytes written on the socket before this request */
	bool sock_known;
	bool seen; /* the access handler ran once (headers received) */
	unsigned int status;
	uint64_t body_nbytes; /* identity body bytes of the response */
	const char *coding;
	_Atomic uint64_t stream_nbytes; /* /events: bytes produced so far */
	bool streamed;
};

static uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ------------------------------------------------------------------------ */
/* The demo's built-in files                                                */

static const char demo_index[] =
	"<!doctype html>\n"
	"<html lang=\"en\">\n"
	"<head>\n"
	"<meta charset=\"utf-8\">\n"
	"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	"<title>gzserve: mhdgz demo</title>\n"
	"<link rel=\"icon\" href=\"data:,\">\n"
	"<link rel=\"stylesheet\" href=\"/style.css\">\n"
	"<script src=\"/app.js\" defer></script>\n"
	"</head>\n"
	"<body>\n"
	"<header>\n"
	"<h1>gzserve</h1>\n"
	"<p>A libmicrohttpd server whose responses are gzip-compressed by "
	"<strong>mhdgz</strong>. Every page of this demo, this one included, is "
	"sent with <code>Content-Encoding: gzip</code> to clients that accept it.</p>\n"
	"</header>\n"
	"<main>\n"
	"<section>\n"
	"<h2>Endpoints</h2>\n"
	"<table>\n"
	"<thead><tr><th>Path</th><th>What it is</th></tr></thead>\n"
	"<tbody>\n"
	"<tr><td><a href=\"/2k.json\">/2k.json</a></td><td>2,048 bytes of JSON: "
	"the small benchmark payload</td></tr>\n"
	"<tr><td><a href=\"/20k.json\">/20k.json</a></td><td>20,480 bytes of JSON: "
	"the medium benchmark payload</td></tr>\n"
	"<tr><td><a href=\"/100k.json\">/100k.json</a></td><td>102,400 bytes of JSON: "
	"the large benchmark payload</td></tr>\n"
	"<tr><td><a href=\"/events\">/events</a></td><td>Server-sent events: one a "
	"second for ten seconds, each flushed through the gzip stream as it "
	"happens</td></tr>\n"
	"<tr><td><a href=\"/stats\">/stats</a></td><td>The handler's counters "
	"(mhdgz_get_stats) as JSON</td></tr>\n"
	"</tbody>\n"
	"</table>\n"
	"</section>\n"
	"<section id=\"live\">\n"
	"<h2>Live</h2>\n"
	"<p id=\"status\">JavaScript has not run yet.</p>\n"
	"<p>/100k.json: <span id=\"records\">loading</span></p>\n"
	"<p>/events:</p>\n"
	"<ol id=\"events\"></ol>\n"
	"<pre id=\"stats\"></pre>\n"
	"</section>\n"
	"<section>\n"
	"<h2>Try it</h2>\n"
	"<pre>curl -s -D - -o /dev/null --compressed http://HOST/100k.json\n"
	"curl -s -N --compressed http://HOST/events</pre>\n"
	"</section>\n"
	"</main>\n"
	"</body>\n"
	"</html>\n";

/* The background colour of body is rgb(244, 241, 234): the interop test
 * checks it to know this file arrived (compressed) and applied. */
static const char demo_css[] =
	"/* style.css: the gzserve demo's stylesheet. */\n"
	":root {\n"
	"  --ink: #1d2329;\n"
	"  --muted: #5b6670;\n"
	"  --accent: #b4461e;\n"
	"  --paper: #f4f1ea;\n"
	"  --card: #fffdf8;\n"
	"  --rule: #ddd6c8;\n"
	"}\n"
	"* { box-sizing: border-box; }\n"
	"body {\n"
	"  margin: 0;\n"
	"  padding: 2rem 1rem 4rem;\n"
	"  background-color: #f4f1ea;\n"
	"  color: var(--ink);\n"
	"  font: 16px/1.5 system-ui, -apple-system, \"Segoe UI\", Roboto, sans-serif;\n"
	"}\n"
	"header, main { max-width: 48rem; margin: 0 auto; }\n"
	"h1 { font-size: 2rem; margin: 0 0 .5rem; color: var(--accent); }\n"
	"h2 { font-size: 1.2rem; margin: 2rem 0 .5rem; border-bottom: 1px solid var(--rule); }\n"
	"a { color: var(--accent); text-decoration: none; }\n"
	"a:hover, a:focus { text-decoration: underline; }\n"
	"code, pre { font: 14px/1.4 ui-monospace, \"DejaVu Sans Mono\", monospace; }\n"
	"pre {\n"
	"  background: var(--card);\n"
	"  border: 1px solid var(--rule);\n"
	"  border-radius: 4px;\n"
	"  padding: .75rem 1rem;\n"
	"  overflow-x: auto;\n"
	"}\n"
	"table { width: 100%; border-collapse: collapse; background: var(--card); }\n"
	"th, td {\n"
	"  text-align: left;\n"
	"  padding: .4rem .75rem;\n"
	"  border-bottom: 1px solid var(--rule);\n"
	"}\n"
	"th { color: var(--muted); font-weight: 600; }\n"
	"#js-ok { color: #2f7d32; font-weight: 600; }\n"
	"#events { columns: 2; color: var(--muted); }\n"
	"#events li.done { color: var(--ink); }\n"
	"@media (max-width: 32rem) {\n"
	"  body { padding: 1rem .5rem; }\n"
	"  #events { columns: 1; }\n"
	"}\n";

static const char demo_js[] =
	"// app.js: the gzserve demo's script: proves scripts, fetch() and\n"
	"// EventSource all work through gzip.\n"
	"'use strict';\n"
	"\n"
	"function show(id, text) {\n"
	"  document.getElementById(id).textContent = text;\n"
	"}\n"
	"\n"
	"function markReady() {\n"
	"  // The marker a headless browser test looks for.\n"
	"  const ok = document.createElement('p');\n"
	"  ok.id = 'js-ok';\n"
	"  ok.textContent = 'JavaScript ran (it arrived gzip-compressed).';\n"
	"  document.getElementById('live').prepend(ok);\n"
	"  show('status', 'Loading /100k.json and listening on /events.');\n"
	"}\n"
	"\n"
	"async function loadPayload() {\n"
	"  try {\n"
	"    const res = await fetch('/100k.json');\n"
	"    const doc = await res.json();\n"
	"    show('records', doc.data.length + ' records parsed (' +\n"
	"         (res.headers.get('Content-Type') || '?') + ')');\n"
	"    document.body.dataset.payloadRecords = String(doc.data.length);\n"
	"  } catch (err) {\n"
	"    show('records', 'failed: ' + err);\n"
	"  }\n"
	"}\n"
	"\n"
	"async function loadStats() {\n"
	"  try {\n"
	"    const res = await fetch('/stats', { cache: 'no-store' });\n"
	"    show('stats', JSON.stringify(await res.json(), null, 2));\n"
	"  } catch (err) {\n"
	"    show('stats', 'stats failed: ' + err);\n"
	"  }\n"
	"}\n"
	"\n"
	"function listen() {\n"
	"  const list = document.getElementById('events');\n"
	"  const source = new EventSource('/events');\n"
	"  source.onmessage = (ev) => {\n"
	"    const item = document.createElement('li');\n"
	"    const data = JSON.parse(ev.data);\n"
	"    item.textContent = 'event ' + data.n + ' of ' + data.of + ' at ' +\n"
	"                       data.elapsed_ms + ' ms';\n"
	"    list.appendChild(item);\n"
	"    document.body.dataset.events = String(list.children.length);\n"
	"    if (data.n === data.of) {\n"
	"      item.className = 'done';\n"
	"      source.close(); // the stream ended; do not reconnect\n"
	"      loadStats();\n"
	"    }\n"
	"  };\n"
	"  source.onerror = () => {\n"
	"    if (source.readyState === EventSource.CLOSED)\n"
	"      show('status', 'The event stream closed.');\n"
	"  };\n"
	"}\n"
	"\n"
	"markReady();\n"
	"loadPayload();\n"
	"loadStats();\n"
	"listen();\n";

/* FNV-1a 64: a strong validator of a built-in body (it changes whenever the
 * bytes do, which is all a strong ETag promises, RFC 9110 section 8.8.3). */
static void
etag_of(const uint8_t *p, size_t len, char *out, size_t cap)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	snprintf(out, cap, "\"%016" PRIx64 "\"", h);
}

/* ------------------------------------------------------------------------ */
/* Access log and per-request context                                       */

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
static void *
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
	rq->sock_known = sock_written(conn, &rq->sock_start);
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
static void
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
	free(rq->uri);
	free(rq);
	atomic_fetch_sub(&s->in_flight, 1);
}

/* MHD_OPTION_EXTERNAL_LOGGER: libmicrohttpd's own messages (a client that
 * went away, a port in use), prefixed so they stand out from the access
 * log; --quiet silences them too. */
static void
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

/* ------------------------------------------------------------------------ */
/* Queueing through the handler                                              */

struct ae_lines {
	const char *v[GZS_AE_MAX];
	size_t n;
};

static enum MHD_Result
ae_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct ae_lines *ae = cls;

	(void)kind;
	if (value && strcasecmp(key, MHD_HTTP_HEADER_ACCEPT_ENCODING) == 0 && ae->n < GZS_AE_MAX)
		ae->v[ae->n++] = value;
	return MHD_YES;
}

static void
accept_encoding(struct MHD_Connection *conn, struct ae_lines *ae)
{
	ae->n = 0;
	MHD_get_connection_values(conn, MHD_HEADER_KIND, ae_iter, ae);
}

/*
 * Queue r through the handler; record status, identity body size and the
 * coding that went out for the log. This is mhdgz_queue_response() written
 * out (see mhdgz_select()) to learn which response was queued.
 */
static enum MHD_Result
queue(struct req *rq, struct MHD_Connection *conn, unsigned int status, struct MHD_Response *r,
      uint64_t body_nbytes)
{
	struct ae_lines ae;
	struct mhdgz_request mreq;
	struct MHD_Response *q = r;
	const char *ce;
	enum MHD_Result ret;
	int rc;

	accept_encoding(conn, &ae);
	memset(&mreq, 0, sizeof mreq);
	mreq.size = sizeof mreq;
	mreq.accept_encoding = ae.v;
	mreq.accept_encoding_count = ae.n;
	rc = mhdgz_select(rq->s->gz, &mreq, status, r, &q, NULL);
	if (rc < 0)
		q = r;
	ce = MHD_get_response_header(q, MHD_HTTP_HEADER_CONTENT_ENCODING);
	rq->coding = ce ? "gzip" : "identity";
	if (ce && strcasecmp(ce, "gzip") != 0)
		rq->coding = "other";
	rq->status = status;
	rq->body_nbytes = body_nbytes;
	/* libmicrohttpd 0.9.75 writes a chunked body's last chunk
	 * ("0\r\n\r\n") after the headers even for HEAD; on a kept-alive
	 * connection the client would read it as the next status line. A
	 * HEAD of a chunked response (the event stream, a gzip stream, both
	 * made for this request alone) closes the connection instead. */
	if (strcmp(rq->method, MHD_HTTP_METHOD_HEAD) == 0 && (rc == MHDGZ_RELEASE || rq->streamed))
		(void)MHD_add_response_header(q, MHD_HTTP_HEADER_CONNECTION, "close");
	ret = MHD_queue_response(conn, status, q);
	if (rc == MHDGZ_RELEASE)
		MHD_destroy_response(q); /* a stream made for this request */
	return ret;
}

/* queue(), then drop the caller's reference to a response made for this
 * request alone. NULL (out of memory) makes libmicrohttpd close the
 * connection. */
static enum MHD_Result
respond(struct req *rq, struct MHD_Connection *conn, unsigned int status,
	struct MHD_Response *r, uint64_t body_nbytes)
{
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	ret = queue(rq, conn, status, r, body_nbytes);
	MHD_destroy_response(r);
	return ret;
}

/* A small HTML body for an error status. */
static enum MHD_Result
respond_error(struct req *rq, struct MHD_Connection *conn, unsigned int status)
{
	static const struct {
		unsigned int status;
		const char *body;
	} pages[] = {
		{400, "<!doctype html><title>400 Bad Request</title><h1>400 Bad Request</h1>\n"},
		{403, "<!doctype html><title>403 Forbidden</title><h1>403 Forbidden</h1>\n"},
		{404, "<!doctype html><title>404 Not Found</title><h1>404 Not Found</h1>\n"},
		{405, "<!doctype html><title>405 Method Not Allowed</title>"
		      "<h1>405 Method Not Allowed</h1><p>GET and HEAD only.</p>\n"},
		{412, "<!doctype html><title>412 Precondition Failed</title>"
		      "<h1>412 Precondition Failed</h1>\n"},
		{416, "<!doctype html><title>416 Range Not Satisfiable</title>"
		      "<h1>416 Range Not Satisfiable</h1>\n"},
		{500, "<!doctype html><title>500 Internal Server Error</title>"
		      "<h1>500 Internal Server Error</h1>\n"},
	};
	const char *body = pages[sizeof pages / sizeof pages[0] - 1].body;
	struct MHD_Response *r;
	size_t i;

	for (i = 0; i < sizeof pages / sizeof pages[0]; i++)
		if (pages[i].status == status)
			body = pages[i].body;
	r = mhdgz_response_from_buffer(rq->s->gz, strlen(body), (void *)body,
				       MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
	if (status == 405)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	return respond(rq, conn, status, r, strlen(body));
}

/* ------------------------------------------------------------------------ */
/* /events: server-sent events through a suspended-between-events stream    */

struct events {
	struct server *s;
	struct MHD_Connection *conn;
	struct req *rq; /* valid while the stream runs (the request outlives it) */
	uint64_t t0_us, due_us;
	unsigned int sent;
	char pending[192]; /* the current event, for a reader buffer too small */
	size_t pend_len, pend_off;
	bool waiting;     /* suspended, on the ticker's list */
	struct events *next;
};

/* Suspend the stream's connection until its next event is due. Returns false
 * when the server is stopping (the stream should end instead). */
static bool
ticker_wait(struct events *ev)
{
	struct server *s = ev->s;
	bool ok = false;

	pthread_mutex_lock(&s->tick_lock);
	if (!s->stopping) {
		/* Suspend before the ticker can see us: it resumes only what is on
		 * its list, under this lock. */
		MHD_suspend_connection(ev->conn);
		ev->waiting = true;
		ev->next = s->waiting;
		s->waiting = ev;
		pthread_cond_signal(&s->tick_cond);
		ok = true;
	}
	pthread_mutex_unlock(&s->tick_lock);
	return ok;
}

/* The ticker thread: resume every stream whose event is due (all of them
 * when stopping), sleep until the next one. */
static void *
ticker_main(void *cls)
{
	struct server *s = cls;

	pthread_mutex_lock(&s->tick_lock);
	for (;;) {
		struct events **pp = &s->waiting;
		uint64_t now = now_us(), next = UINT64_MAX;
		struct timespec ts;

		while (*pp) {
			struct events *ev = *pp;

			if (s->stopping || ev->due_us <= now) {
				*pp = ev->next;
				ev->waiting = false;
				MHD_resume_connection(ev->conn);
			} else {
				if (ev->due_us < next)
					next = ev->due_us;
				pp = &ev->next;
			}
		}
		if (s->stopping)
			break;
		if (next == UINT64_MAX) {
			pthread_cond_wait(&s->tick_cond, &s->tick_lock);
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &ts);
		next -= now;
		ts.tv_sec += (time_t)(next / 1000000u);
		ts.tv_nsec += (long)(next % 1000000u) * 1000;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&s->tick_cond, &s->tick_lock, &ts);
	}
	pthread_mutex_unlock(&s->tick_lock);
	return NULL;
}

static ssize_t
events_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct events *ev = cls;
	uint64_t now;
	size_t n;
	bool stopping;

	(void)pos;
	if (ev->pend_off == ev->pend_len) {
		pthread_mutex_lock(&ev->s->tick_lock);
		stopping = ev->s->stopping;
		pthread_mutex_unlock(&ev->s->tick_lock);
		/* Shutting down ends the stream cleanly (a complete gzip member,
		 * the last chunk): the client sees the end, not a reset. */
		if (ev->sent == GZS_EVENTS || stopping)
			return MHD_CONTENT_READER_END_OF_STREAM;
		now = now_us();
		if (ev->t0_us == 0)
			ev->t0_us = ev->due_us = now;
		if (now < ev->due_us)
			return ticker_wait(ev) ? 0 : MHD_CONTENT_READER_END_OF_STREAM;
		ev->sent++;
		/* Default "message" events, so EventSource.onmessage sees them. */
		n = (size_t)snprintf(ev->pending, sizeof ev->pending,
				     "id: %u\ndata: {\"n\":%u,\"of\":%u,"
				     "\"elapsed_ms\":%" PRIu64 "}\n\n",
				     ev->sent, ev->sent, GZS_EVENTS, (now - ev->t0_us) / 1000);
		ev->pend_len = n;
		ev->pend_off = 0;
		ev->due_us += GZS_EVENT_INTERVAL_US;
	}
	n = ev->pend_len - ev->pend_off;
	if (n > max)
		n = max;
	memcpy(buf, ev->pending + ev->pend_off, n);
	ev->pend_off += n;
	atomic_fetch_add(&ev->rq->stream_nbytes, n);
	return (ssize_t)n;
}

static void
events_free(void *cls)
{
	free(cls);
}

static enum MHD_Result
serve_events(struct req *rq, struct MHD_Connection *conn)
{
	struct events *ev = calloc(1, sizeof *ev);
	struct MHD_Response *r;

	if (!ev)
		return MHD_NO;
	ev->s = rq->s;
	ev->conn = conn;
	ev->rq = rq;
	r = mhdgz_response_from_callback(rq->s->gz, MHD_SIZE_UNKNOWN, 1024, events_read, ev,
					 events_free);
	if (!r) {
		free(ev);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	/* Automatic for text/event-stream; said here because a stream of
	 * another type (NDJSON, logs) needs this call to flush per event. */
	(void)mhdgz_response_set_low_latency(rq->s->gz, r);
	rq->streamed = true;
	return respond(rq, conn, MHD_HTTP_OK, r, 0);
}

/* ------------------------------------------------------------------------ */
/* /stats                                                                   */

static enum MHD_Result
serve_stats(struct req *rq, struct MHD_Connection *conn)
{
	struct server *s = rq->s;
	struct mhdgz_stats st;
	struct MHD_Response *r;
	char *body = NULL;
	size_t len = 0;
	FILE *f;
	unsigned int i;

	memset(&st, 0, sizeof st);
	st.size = sizeof st;
	if (mhdgz_get_stats(s->gz, &st) != 0)
		return respond_error(rq, conn, 500);
	f = open_memstream(&body, &len);
	if (!f)
		return MHD_NO;
	fprintf(f, "{\"version\":\"%s\",\"backend\":\"%s\",\"level\":%d,\"responses\":%" PRIu64
		   ",\"compressed\":%" PRIu64 ",\"reasons\":{",
		mhdgz_version(), mhdgz_backend_name(s->cfg.backend), s->level, st.responses,
		st.compressed);
	for (i = 0; i < MHDGZ_REASON_COUNT; i++)
		fprintf(f, "%s\"%s\":%" PRIu64, i ? "," : "",
			mhdgz_reason_name((enum mhdgz_reason)i), st.reasons[i]);
	fprintf(f, "},\"bytes_in\":%" PRIu64 ",\"bytes_out\":%" PRIu64 ",\"compressions\":%" PRIu64
		   ",\"failures\":%" PRIu64 ",\"cache_hits\":%" PRIu64 ",\"pool_gets\":%" PRIu64
		   ",\"pool_misses\":%" PRIu64 ",\"pool_idle\":%" PRIu64
		   ",\"server\":{\"requests\":%" PRIu64 ",\"in_flight\":%d}}\n",
		st.bytes_in, st.bytes_out, st.compressions, st.failures, st.cache_hits,
		st.pool_gets, st.pool_misses, st.pool_idle, (uint64_t)atomic_load(&s->requests),
		atomic_load(&s->in_flight));
	if (fclose(f) != 0) {
		free(body);
		return MHD_NO;
	}
	/* MUST_FREE: the library frees body with free() with the response. */
	r = mhdgz_response_from_buffer(s->gz, len, body, MHD_RESPMEM_MUST_FREE);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	return respond(rq, conn, MHD_HTTP_OK, r, len);
}

/* ------------------------------------------------------------------------ */
/* The demo's persistent resources                                          */

static int
demo_init(struct server *s)
{
	static const size_t sizes[3] = {PAYLOAD_JSON_2K, PAYLOAD_JSON_20K, PAYLOAD_JSON_100K};
	static const char *const names[3] = {"/2k.json", "/20k.json", "/100k.json"};
	size_t i;

	s->ndemos = 6;
	s->demos = calloc(s->ndemos, sizeof *s->demos);
	if (!s->demos)
		return -1;
	s->demos[0] = (struct demo){.path = "/", .type = "text/html; charset=utf-8",
				    .body = (const uint8_t *)demo_index,
				    .len = sizeof demo_index - 1};
	s->demos[1] = (struct demo){.path = "/style.css", .type = "text/css; charset=utf-8",
				    .body = (const uint8_t *)demo_css, .len = sizeof demo_css - 1};
	s->demos[2] = (struct demo){.path = "/app.js", .type = "text/javascript; charset=utf-8",
				    .body = (const uint8_t *)demo_js, .len = sizeof demo_js - 1};
	for (i = 0; i < 3; i++) {
		/* Valid JSON of exactly the benchmark sizes (see payload.h). */
		if (payload_json_sized(sizes[i], &s->payload[i]) != sizes[i])
			return -1;
		s->demos[3 + i] = (struct demo){.path = names[i], .type = "application/json",
						.body = s->payload[i], .len = sizes[i]};
	}
	for (i = 0; i < s->ndemos; i++) {
		struct demo *d = &s->demos[i];

		d->cache_control = "no-cache"; /* revalidate: the ETag makes it cheap */
		etag_of(d->body, d->len, d->etag, sizeof d->etag);
		d->ok = mhdgz_response_from_buffer(s->gz, d->len, (void *)d->body,
						   MHD_RESPMEM_PERSISTENT);
		if (!d->ok)
			return -1;
		MHD_add_response_header(d->ok, MHD_HTTP_HEADER_CONTENT_TYPE, d->type);
		MHD_add_response_header(d->ok, MHD_HTTP_HEADER_ETAG, d->etag);
		MHD_add_response_header(d->ok, MHD_HTTP_HEADER_CACHE_CONTROL, d->cache_control);
	}
	return 0;
}

static void
demo_fini(struct server *s)
{
	size_t i;

	for (i = 0; s->demos && i < s->ndemos; i++)
		if (s->demos[i].ok)
			MHD_destroy_response(s->demos[i].ok);
	free(s->demos);
	for (i = 0; i < 3; i++)
		free(s->payload[i]);
}

static enum MHD_Result
serve_demo(struct req *rq, struct MHD_Connection *conn, const char *path, const char *method)
{
	struct server *s = rq->s;
	size_t i;

	if (strcmp(path, "/events") == 0)
		return serve_events(rq, conn);
	if (strcmp(path, "/stats") == 0)
		return serve_stats(rq, conn);
	if (strcmp(path, "/204") == 0) {
		/* No content, for clients' keep-alive sequences (tests/interop.sh). */
		static const char empty[] = "";

		return respond(rq, conn, MHD_HTTP_NO_CONTENT,
			       mhdgz_response_from_buffer(s->gz, 0, (void *)empty,
							  MHD_RESPMEM_PERSISTENT),
			       0);
	}
	for (i = 0; i < s->ndemos; i++) {
		struct demo *d = &s->demos[i];
		unsigned int pre;

		if (strcmp(path, d->path) != 0 && !(i == 0 && strcmp(path, "/index.html") == 0))
			continue;
		pre = mhdgz_evaluate_preconditions(conn, method, d->etag);
		if (pre == MHD_HTTP_NOT_MODIFIED)
			return queue(rq, conn, pre, d->ok, 0);
		if (pre != 0)
			return respond_error(rq, conn, pre);
		return queue(rq, conn, MHD_HTTP_OK, d->ok, d->len);
	}
	return respond_error(rq, conn, MHD_HTTP_NOT_FOUND);
}

/* ------------------------------------------------------------------------ */
/* Media types                                                              */

/* What a static site needs, looked up before /etc/mime.types so the web's
 * core extensions get the same type whatever the system's media-types
 * version says (older ones map .js to application/javascript, and a minimal
 * system has no /etc/mime.types at all). */
static const struct {
	const char *ext;
	const char *type;
} builtin_mimes[] = {
	{"html", "text/html"},
	{"htm", "text/html"},
	{"css", "text/css"},
	{"js", "text/javascript"},
	{"mjs", "text/javascript"},
	{"json", "application/json"},
	{"map", "application/json"},
	{"webmanifest", "application/manifest+json"},
	{"txt", "text/plain"},
	{"md", "text/markdown"},
	{"csv", "text/csv"},
	{"xml", "application/xml"},
	{"svg", "image/svg+xml"},
	{"wasm", "application/wasm"},
	{"png", "image/png"},
	{"jpg", "image/jpeg"},
	{"jpeg", "image/jpeg"},
	{"gif", "image/gif"},
	{"webp", "image/webp"},
	{"avif", "image/avif"},
	{"ico", "image/vnd.microsoft.icon"},
	{"pdf", "application/pdf"},
	{"zip", "application/zip"},
	{"gz", "application/gzip"},
	{"woff", "font/woff"},
	{"woff2", "font/woff2"},
	{"ttf", "font/ttf"},
	{"otf", "font/otf"},
	{"mp4", "video/mp4"},
	{"webm", "video/webm"},
	{"mp3", "audio/mpeg"},
	{"ogg", "audio/ogg"},
};

static int
mime_cmp(const void *a, const void *b)
{
	return strcmp(((const struct mime *)a)->ext, ((const struct mime *)b)->ext);
}

/* Read /etc/mime.types ("type ext ext ..." lines) into a sorted table for
 * the extensions the built-in table lacks. A missing file is not an error. */
static int
mime_load(struct server *s, const char *file)
{
	FILE *f = fopen(file, "r");
	char line[1024];
	size_t cap = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		char *save = NULL, *type, *ext;

		if (line[0] == '#')
			continue;
		type = strtok_r(line, " \t\r\n", &save);
		if (!type || !strchr(type, '/'))
			continue;
		while ((ext = strtok_r(NULL, " \t\r\n", &save))) {
			char *p;

			if (s->nmimes == cap) {
				struct mime *m;

				cap = cap ? cap * 2 : 1024;
				m = realloc(s->mimes, cap * sizeof *m);
				if (!m)
					goto fail;
				s->mimes = m;
			}
			s->mimes[s->nmimes].ext = strdup(ext);
			s->mimes[s->nmimes].type = strdup(type);
			if (!s->mimes[s->nmimes].ext || !s->mimes[s->nmimes].type) {
				free(s->mimes[s->nmimes].ext);
				free(s->mimes[s->nmimes].type);
				goto fail;
			}
			for (p = s->mimes[s->nmimes].ext; *p; p++)
				*p = (char)tolower((unsigned char)*p);
			s->nmimes++;
		}
	}
	fclose(f);
	if (s->nmimes)
		qsort(s->mimes, s->nmimes, sizeof *s->mimes, mime_cmp);
	return 0;
fail:
	fclose(f);
	return -1;
}

static void
mime_free(struct server *s)
{
	size_t i;

	for (i = 0; i < s->nmimes; i++) {
		free(s->mimes[i].ext);
		free(s->mimes[i].type);
	}
	free(s->mimes);
}

static const char *
mime_lookup_ext(const struct server *s, const char *ext)
{
	char low[64];
	struct mime key = {.ext = low}, *m;
	size_t i;

	for (i = 0; ext[i] && i < sizeof low - 1; i++)
		low[i] = (char)tolower((unsigned char)ext[i]);
	if (ext[i])
		return NULL;
	low[i] = '\0';
	for (i = 0; i < sizeof builtin_mimes / sizeof builtin_mimes[0]; i++)
		if (strcmp(builtin_mimes[i].ext, low) == 0)
			return builtin_mimes[i].type;
	if (s->nmimes) {
		m = bsearch(&key, s->mimes, s->nmimes, sizeof *s->mimes, mime_cmp);
		if (m)
			return m->type;
	}
	return NULL;
}

/* The Content-Type for a file name: the longest listed extension wins
 * ("x.tar.gz" tries "tar.gz", then "gz"); text types are declared UTF-8. */
static void
mime_type(const struct server *s, const char *name, char *out, size_t cap)
{
	const char *base = strrchr(name, '/'), *dot, *type = NULL;

	base = base ? base + 1 : name;
	for (dot = strchr(base, '.'); dot && !type; dot = strchr(dot + 1, '.'))
		type = mime_lookup_ext(s, dot + 1);
	if (!type)
		type = "application/octet-stream";
	if (strncmp(type, "text/", 5) == 0)
		snprintf(out, cap, "%s; charset=utf-8", type);
	else
		snprintf(out, cap, "%s", type);
}

/* ------------------------------------------------------------------------ */
/* Request targets                                                          */

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * The file a request target names, relative to the root, from the target
 * exactly as received (libmicrohttpd's url argument is already decoded, so
 * "%2e%2e%2f" and "%00" could no longer be told apart from what they
 * spell). Refused with 403: a "." or ".." segment, plain or encoded; an
 * encoded "/" or "\" (a separator that did not look like one); a NUL or
 * any control byte. Returns 0 with *rel_ret (malloc'd; "" for the root)
 * and *slash_ret (the path ends in "/"), or the status to refuse with.
 */
static unsigned int
target_to_relpath(const char *target, char **rel_ret, bool *slash_ret)
{
	const char *p = target, *end;
	char *dec, *rel, *seg, *save = NULL;
	size_t n = 0, rlen = 0;

	/* absolute-form (RFC 9112 section 3.2.2): skip scheme and authority */
	if (strncasecmp(p, "http://", 7) == 0 || strncasecmp(p, "https://", 8) == 0) {
		p = strstr(p, "://") + 3;
		p += strcspn(p, "/?#");
	}
	end = p + strcspn(p, "?#");
	if (p == end || *p != '/')
		return MHD_HTTP_BAD_REQUEST;
	*slash_ret = end[-1] == '/';
	dec = malloc((size_t)(end - p) + 1);
	rel = malloc((size_t)(end - p) + 1);
	if (!dec || !rel)
		goto fail500;
	for (; p < end; p++) {
		unsigned char c = (unsigned char)*p;

		if (c == '%') {
			int hi = p + 1 < end ? hexval(p[1]) : -1;
			int lo = p + 2 < end ? hexval(p[2]) : -1;

			if (hi < 0 || lo < 0)
				goto fail400;
			c = (unsigned char)(hi * 16 + lo);
			p += 2;
			if (c == '/' || c == '\\' || c == 0)
				goto fail403;
		} else if (c == '\\') {
			goto fail403;
		}
		if (c < 0x20 || c == 0x7f)
			goto fail403;
		dec[n++] = (char)c;
	}
	dec[n] = '\0';
	for (seg = strtok_r(dec, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
		size_t len = strlen(seg);

		if (strcmp(seg, ".") == 0 || strcmp(seg, "..") == 0)
			goto fail403;
		if (rlen)
			rel[rlen++] = '/';
		memcpy(rel + rlen, seg, len);
		rlen += len;
	}
	rel[rlen] = '\0';
	free(dec);
	*rel_ret = rel;
	return 0;
fail400:
	free(dec);
	free(rel);
	return MHD_HTTP_BAD_REQUEST;
fail403:
	free(dec);
	free(rel);
	return MHD_HTTP_FORBIDDEN;
fail500:
	free(dec);
	free(rel);
	return MHD_HTTP_INTERNAL_SERVER_ERROR;
}

/* ------------------------------------------------------------------------ */
/* Static files                                                             */

/* The real path of path if it exists and is inside the root (symlinks
 * resolved: a link out of the root is refused). NULL with *status_ret 404
 * (does not exist) or 403 (outside the root, or not permitted). */
static char *
resolve(const struct server *s, const char *path, unsigned int *status_ret)
{
	char *real = realpath(path, NULL);

	if (!real) {
		*status_ret = (errno == EACCES || errno == ELOOP) ? MHD_HTTP_FORBIDDEN
								  : MHD_HTTP_NOT_FOUND;
		return NULL;
	}
	if (strncmp(real, s->root, s->root_len) != 0 ||
	    (real[s->root_len] != '/' && real[s->root_len] != '\0')) {
		free(real);
		*status_ret = MHD_HTTP_FORBIDDEN;
		return NULL;
	}
	return real;
}

/* dir + "/" + name, malloc'd. */
static char *
path_join(const char *dir, const char *name)
{
	size_t len = strlen(dir) + 1 + strlen(name) + 1;
	char *p = malloc(len);

	if (p)
		snprintf(p, len, "%s/%s", dir, name);
	return p;
}

/* Open a resolved path as a regular file. O_NONBLOCK so a FIFO planted in the
 * tree cannot block a pool thread in open(); it does nothing to regular
 * files. Returns the fd, or -1 with *status_ret. */
static int
open_regular(const char *real, struct stat *st, unsigned int *status_ret)
{
	int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0) {
		*status_ret = errno == ENOENT ? MHD_HTTP_NOT_FOUND : MHD_HTTP_FORBIDDEN;
		return -1;
	}
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
		close(fd);
		*status_ret = MHD_HTTP_FORBIDDEN;
		return -1;
	}
	return fd;
}

/* Strong validator of a file: inode, size and modification time (ns). It
 * changes whenever the file is replaced or written, as a strong ETag must
 * (RFC 9110 section 8.8.3). */
static void
file_etag(const struct stat *st, char *out, size_t cap)
{
	snprintf(out, cap, "\"%jx-%jx-%jx\"", (uintmax_t)st->st_ino, (uintmax_t)st->st_size,
		 (uintmax_t)st->st_mtim.tv_sec * 1000000000u + (uintmax_t)st->st_mtim.tv_nsec);
}

/* IMF-fixdate (RFC 9110 section 5.6.7). */
static void
http_date(time_t t, char *out, size_t cap)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static bool
parse_http_date(const char *v, time_t *t_ret)
{
	struct tm tm;
	const char *end;

	memset(&tm, 0, sizeof tm);
	end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (!end || *end != '\0')
		return false;
	*t_ret = timegm(&tm);
	return *t_ret != (time_t)-1;
}

static bool
parse_u64(const char **pp, uint64_t *v_ret)
{
	const char *p = *pp;
	uint64_t v = 0;

	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*pp = p;
	*v_ret = v;
	return true;
}

/*
 * Range: bytes=... (RFC 9110 section 14.1.2) for a body of len bytes.
 * Returns 1 with the one range [*first_ret, *last_ret]; -1 if the range is
 * not satisfiable (416); 0 to ignore the header and send the whole body:
 * absent, another unit, malformed, or several ranges (a multipart/byteranges
 * body is not worth it here; RFC 9110 allows ignoring Range).
 */
static int
parse_range(const char *v, uint64_t len, uint64_t *first_ret, uint64_t *last_ret)
{
	uint64_t a, b;

	if (!v || strncasecmp(v, "bytes=", 6) != 0)
		return 0;
	v += 6;
	while (*v == ' ' || *v == '\t')
		v++;
	if (strchr(v, ','))
		return 0;
	if (*v == '-') {
		v++;
		if (!parse_u64(&v, &b))
			return 0;
		while (*v == ' ' || *v == '\t')
			v++;
		if (*v)
			return 0;
		if (b == 0 || len == 0)
			return -1;
		*first_ret = b >= len ? 0 : len - b;
		*last_ret = len - 1;
		return 1;
	}
	if (!parse_u64(&v, &a) || *v++ != '-')
		return 0;
	if (*v >= '0' && *v <= '9') {
		if (!parse_u64(&v, &b) || b < a)
			return 0;
	} else {
		b = UINT64_MAX;
	}
	while (*v == ' ' || *v == '\t')
		v++;
	if (*v)
		return 0;
	if (a >= len)
		return -1;
	*first_ret = a;
	*last_ret = b >= len ? len - 1 : b;
	return 1;
}

/* If-Range (RFC 9110 section 13.1.5): does the range still apply? An
 * entity-tag must match strongly; a date must equal Last-Modified. */
static bool
if_range_ok(struct MHD_Connection *conn, const char *etag, time_t mtime)
{
	const char *v;
	time_t t;

	v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_RANGE);
	if (!v)
		return true;
	if (v[0] == '"')
		return strcmp(v, etag) == 0;
	if (v[0] == 'W' && v[1] == '/')
		return false;
	return parse_http_date(v, &t) && t == mtime;
}

/* If-Modified-Since (RFC 9110 section 13.1.3), evaluated only when there is
 * no If-None-Match (section 13.2.2 step 4). */
static bool
not_modified_since(struct MHD_Connection *conn, time_t mtime)
{
	const char *v;
	time_t t;

	if (MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH))
		return false;
	v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_MODIFIED_SINCE);
	return v && parse_http_date(v, &t) && mtime <= t;
}

/* The FILE.gz beside FILE, if it is a regular file inside the root. */
static int
open_precompressed(const struct server *s, const char *real, struct stat *st)
{
	size_t len = strlen(real) + 4;
	char *gzpath = malloc(len), *gzreal;
	unsigned int status;
	int fd;

	if (!gzpath)
		return -1;
	snprintf(gzpath, len, "%s.gz", real);
	gzreal = resolve(s, gzpath, &status);
	free(gzpath);
	if (!gzreal)
		return -1;
	fd = open_regular(gzreal, st, &status);
	free(gzreal);
	return fd;
}

static bool
accepts_gzip(struct MHD_Connection *conn)
{
	struct ae_lines ae;

	accept_encoding(conn, &ae);
	return mhdgz_accept_gzip_q(ae.v, ae.n) > 0;
}

static enum MHD_Result
redirect_slash(struct req *rq, struct MHD_Connection *conn)
{
	const char *q = rq->uri + strcspn(rq->uri, "?#");
	size_t len = (size_t)(q - rq->uri);
	char *loc = malloc(len + 2 + strlen(q));
	static const char body[] = "<!doctype html><title>301 Moved Permanently</title>"
				   "<h1>301 Moved Permanently</h1>\n";
	struct MHD_Response *r;

	if (!loc)
		return MHD_NO;
	memcpy(loc, rq->uri, len);
	loc[len] = '/';
	strcpy(loc + len + 1, *q == '?' ? q : "");
	r = mhdgz_response_from_buffer(rq->s->gz, sizeof body - 1, (void *)body,
				       MHD_RESPMEM_PERSISTENT);
	if (r) {
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
					"text/html; charset=utf-8");
		MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, loc);
	}
	free(loc);
	return respond(rq, conn, MHD_HTTP_MOVED_PERMANENTLY, r, sizeof body - 1);
}

static enum MHD_Result
serve_file(struct req *rq, struct MHD_Connection *conn, const char *method)
{
	struct server *s = rq->s;
	char *rel = NULL, *real = NULL, *path;
	bool slash, is_get = strcmp(method, "GET") == 0, sibling = false, not_modified;
	unsigned int status;
	struct stat st, gst;
	char type[160], etag[80], lastmod[64], crange[96];
	const char *name;
	struct MHD_Response *r;
	uint64_t first = 0, last = 0, len;
	int fd = -1, gzfd = -1, range = 0;
	enum MHD_Result ret;

	status = target_to_relpath(rq->uri, &rel, &slash);
	if (status)
		return respond_error(rq, conn, status);
	path = path_join(s->root, rel);
	if (!path)
		goto oom;
	real = resolve(s, path, &status);
	free(path);
	if (!real)
		goto refuse;
	if (stat(real, &st) != 0) {
		status = MHD_HTTP_NOT_FOUND;
		goto refuse;
	}
	name = rel;
	if (S_ISDIR(st.st_mode)) {
		if (!slash) {
			free(rel);
			free(real);
			return redirect_slash(rq, conn);
		}
		/* index.html, or nothing: no directory listings. */
		path = path_join(real, "index.html");
		if (!path)
			goto oom;
		free(real);
		real = resolve(s, path, &status);
		free(path);
		if (!real) {
			if (status == MHD_HTTP_NOT_FOUND)
				status = MHD_HTTP_FORBIDDEN;
			goto refuse;
		}
		name = "index.html";
	}
	fd = open_regular(real, &st, &status);
	if (fd < 0)
		goto refuse;
	mime_type(s, name, type, sizeof type);

	if (s->cfg.precompressed) {
		gzfd = open_precompressed(s, real, &gst);
		sibling = gzfd >= 0;
		if (gzfd >= 0 && !accepts_gzip(conn)) {
			close(gzfd);
			gzfd = -1;
		}
		if (gzfd >= 0) {
			/* Serve the .gz: its own validators and length. */
			close(fd);
			fd = gzfd;
			st = gst;
		}
	}
	file_etag(&st, etag, sizeof etag);
	http_date(st.st_mtim.tv_sec, lastmod, sizeof lastmod);

	status = mhdgz_evaluate_preconditions(conn, method, etag);
	if (status == 0 && not_modified_since(conn, st.st_mtim.tv_sec))
		status = MHD_HTTP_NOT_MODIFIED;
	if (status == MHD_HTTP_PRECONDITION_FAILED) {
		close(fd);
		goto refuse;
	}
	/* A 304 is the 200 below queued with status 304 (see the top of the
	 * file); the file is opened but never read. */
	not_modified = status == MHD_HTTP_NOT_MODIFIED;

	len = (uint64_t)st.st_size;
	/* Ranges of the identity body only; a precompressed body is sent whole. */
	if (is_get && !not_modified && gzfd < 0 && if_range_ok(conn, etag, st.st_mtim.tv_sec))
		range = parse_range(MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
								MHD_HTTP_HEADER_RANGE),
				    len, &first, &last);
	if (range < 0) {
		struct MHD_Response *e416;
		static const char body[] = "<!doctype html><title>416 Range Not Satisfiable</title>"
					   "<h1>416 Range Not Satisfiable</h1>\n";

		close(fd);
		e416 = mhdgz_response_from_buffer(s->gz, sizeof body - 1, (void *)body,
						  MHD_RESPMEM_PERSISTENT);
		if (!e416)
			goto oom;
		snprintf(crange, sizeof crange, "bytes */%" PRIu64, len);
		MHD_add_response_header(e416, MHD_HTTP_HEADER_CONTENT_TYPE,
					"text/html; charset=utf-8");
		MHD_add_response_header(e416, MHD_HTTP_HEADER_CONTENT_RANGE, crange);
		ret = respond(rq, conn, MHD_HTTP_RANGE_NOT_SATISFIABLE, e416, sizeof body - 1);
		goto out;
	}
	if (range > 0)
		r = mhdgz_response_from_fd_at_offset64(s->gz, last - first + 1, fd, first);
	else
		r = mhdgz_response_from_fd_at_offset64(s->gz, len, fd, 0);
	fd = -1; /* the response owns it now, also on failure */
	if (!r)
		goto oom;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
	MHD_add_response_header(r, MHD_HTTP_HEADER_LAST_MODIFIED, lastmod);
	if (gzfd >= 0) {
		/* Already coded: the handler skips responses with a
		 * Content-Encoding, so this is sent as it is. */
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
	} else {
		MHD_add_response_header(r, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
	}
	if (sibling)
		MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
	if (range > 0) {
		snprintf(crange, sizeof crange, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, first,
			 last, len);
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, crange);
		ret = respond(rq, conn, MHD_HTTP_PARTIAL_CONTENT, r, last - first + 1);
	} else if (not_modified) {
		ret = respond(rq, conn, MHD_HTTP_NOT_MODIFIED, r, 0);
	} else {
		ret = respond(rq, conn, MHD_HTTP_OK, r, len);
	}
out:
	free(rel);
	free(real);
	return ret;
oom:
	free(rel);
	free(real);
	return MHD_NO;
refuse:
	free(rel);
	free(real);
	return respond_error(rq, conn, status);
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
		return MHD_YES;
	}
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
		"one a second for 10 s), /stats (the handler's counters as JSON) and /204\n"
		"(an empty 204 No Content).\n"
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
		"                    libdeflate 1-12, isal 1-4 (igzip 0-3; default 6, 6, 2)\n"
		"  --min-size BYTES  bodies smaller than this are sent uncompressed (default\n"
		"                    %u; 0 compresses every non-empty body)\n"
		"  --types LIST      comma-separated media types to compress, replacing the\n"
		"                    default text-like list: type/subtype, type/*, */*+suffix\n"
		"                    (e.g. 'text/*,application/json,*/*+xml')\n"
		"  --threads N       libmicrohttpd thread pool size, 1-1024 (default: the\n"
		"                    number of CPUs)\n"
		"  --precompressed   with --root: send FILE.gz for FILE when the client accepts\n"
		"                    gzip, with FILE's Content-Type and Content-Encoding: gzip\n"
		"                    (like nginx's gzip_static)\n"
		"  --etag POLICY     the strong ETag of a compressed response: weak (W/\"x\",\n"
		"                    the default), suffix (\"x-gzip\"), drop, or keep\n"
		"  --no-compress     never compress on the fly (precompressed files still go)\n"
		"  --quiet           no access log and no libmicrohttpd messages. The log\n"
		"                    is one line per request on stderr: method, target,\n"
		"                    status, body bytes (uncompressed), bytes sent on the\n"
		"                    socket (headers included; - if unknown), coding\n"
		"                    (gzip or identity), microseconds\n"
		"  --help            this text\n"
		"\n"
		"SIGINT or SIGTERM stops accepting, lets requests in flight finish (up to\n"
		"%d s; open /events streams are ended at once, with a complete gzip\n"
		"member) and exits 0. Exit status 2: invalid option; 1: cannot start.\n",
		MHDGZ_DEFAULT_MIN_NBYTES, GZS_GRACE_MS / 1000);
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
		O_PRECOMPRESSED,
		O_ETAG,
		O_NO_COMPRESS,
		O_QUIET,
		O_HELP
	};
	static const struct option longopts[] = {
		{"bind", required_argument, NULL, O_BIND},
		{"port", required_argument, NULL, O_PORT},
		{"root", required_argument, NULL, O_ROOT},
		{"backend", required_argument, NULL, O_BACKEND},
		{"level", required_argument, NULL, O_LEVEL},
		{"min-size", required_argument, NULL, O_MIN_SIZE},
		{"types", required_argument, NULL, O_TYPES},
		{"threads", required_argument, NULL, O_THREADS},
		{"precompressed", no_argument, NULL, O_PRECOMPRESSED},
		{"etag", required_argument, NULL, O_ETAG},
		{"no-compress", no_argument, NULL, O_NO_COMPRESS},
		{"quiet", no_argument, NULL, O_QUIET},
		{"help", no_argument, NULL, O_HELP},
		{NULL, 0, NULL, 0},
	};
	const char *level_arg = NULL;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int c, rc, lmin, lmax;

	cfg->bind = "127.0.0.1";
	cfg->port = 8080;
	cfg->backend = MHDGZ_BACKEND_DEFAULT;
	cfg->threads = ncpu > 0 ? (unsigned int)(ncpu > 1024 ? 1024 : ncpu) : 1;
	cfg->etag = MHDGZ_ETAG_WEAKEN;
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
		case O_PRECOMPRESSED:
			cfg->precompressed = true;
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
		case O_NO_COMPRESS:
			cfg->no_compress = true;
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
	static const char *const none[] = {NULL};
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
	}

	/* Signals are taken by sigwait() below; every thread started from
	 * here on inherits the block, so none of them is interrupted. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (handler_new(s) != 0)
		return 1;
	if (s->root ? mime_load(s, "/etc/mime.types") != 0 : demo_init(s) != 0) {
		fprintf(stderr, "gzserve: out of memory\n");
		return 1;
	}
	pthread_mutex_init(&s->tick_lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&s->tick_cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (pthread_create(&s->tick_thread, NULL, ticker_main, s) != 0) {
		fprintf(stderr, "gzserve: cannot start a thread\n");
		return 1;
	}

	/* Suspend/resume for /events; it also brings the inter-thread
	 * channel MHD_quiesce_daemon() needs with a thread pool. */
	flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME |
		MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0);
	s->daemon = MHD_start_daemon(
		flags, (uint16_t)s->cfg.port, NULL, NULL, on_request, s,
		MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s, /* first, or it misses some */
		MHD_OPTION_SOCK_ADDR, sa,
		MHD_OPTION_THREAD_POOL_SIZE,
		(unsigned int)(s->cfg.threads > 1 ? s->cfg.threads : 0),
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)GZS_CONN_TIMEOUT_S,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
		s, MHD_OPTION_END);
	if (!s->daemon) {
		fprintf(stderr, "gzserve: cannot listen on %s port %u\n", s->cfg.bind,
			s->cfg.port);
		return 1;
	}
	info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	port = info ? info->port : s->cfg.port;
	printf(v6 ? "listening on http://[%s]:%u/\n" : "listening on http://%s:%u/\n", s->cfg.bind,
	       port);
	fflush(stdout);

	while (sigwait(&sigs, &sig) != 0)
		;
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
	pthread_mutex_lock(&s->tick_lock);
	s->stopping = true;
	pthread_cond_signal(&s->tick_cond);
	pthread_mutex_unlock(&s->tick_lock);
	deadline = now_us() + (uint64_t)GZS_GRACE_MS * 1000u;
	while (atomic_load(&s->in_flight) > 0 && now_us() < deadline)
		usleep(10000);
	pthread_join(s->tick_thread, NULL);
	MHD_stop_daemon(s->daemon);
	demo_fini(s);
	mhdgz_free(s->gz);
	mime_free(s);
	free(s->root);
	free(s->cfg.types_buf);
	free(s->cfg.types);
	pthread_cond_destroy(&s->tick_cond);
	pthread_mutex_destroy(&s->tick_lock);
	return 0;
}
