/* harness.h: the one HTTP test harness: a libmicrohttpd daemon on 127.0.0.1, a libcurl client, a raw-socket client, checks. */
#ifndef HARNESS_H
#define HARNESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <check.h>
#include <curl/curl.h>

#include "info.h"
#include "mhdgz.h"

/* A HEAD or 304 standing for a 200 whose length is not known (a stream of
 * unknown size, a gzip stream): with libmicrohttpd 0.9.75 it has no framing
 * without a body and closes its connection; with 1.0 it is a head-only
 * response and the connection answers the next request (configure defines
 * HAVE_MHD_HEAD_ONLY). Tests assert the behaviour of the line they are
 * built against. */
#ifdef HAVE_MHD_HEAD_ONLY
#define TH_BODYLESS_UNKNOWN_CLOSES false
#else
#define TH_BODYLESS_UNKNOWN_CLOSES true
#endif

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* Whole-transfer timeout of every request in seconds (CURLOPT_TIMEOUT): a
 * server that hangs fails the transfer instead of the test runner. */
#ifndef TH_CURL_TIMEOUT_S
#define TH_CURL_TIMEOUT_S 60L
#endif

/* Most body bytes a transfer keeps; more fail it (a runaway stream is
 * reported, not swapped in). */
#ifndef TH_MAX_BODY
#define TH_MAX_BODY (64u * 1024 * 1024)
#endif

/* Most response header lines kept per transfer; more set hdr_overflow. */
#define TH_MAX_HDRS 48

/* Built with a sanitizer? Then RSS says nothing and the 1 GiB test is
 * skipped. */
#if defined(__SANITIZE_ADDRESS__)
#define TH_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) ||                         \
	__has_feature(thread_sanitizer)
#define TH_SANITIZED 1
#endif
#endif
#ifndef TH_SANITIZED
#define TH_SANITIZED 0
#endif

/* ===================================================================== */
/*                 Server: a daemon on 127.0.0.1, port 0                 */
/* ===================================================================== */

struct th_server;

/* Answer one request (second call of the access handler, body read):
 * create a response, queue it (normally with mhdgz_queue_response) and
 * destroy it. */
typedef enum MHD_Result (*th_route_fn)(struct th_server *s, struct MHD_Connection *c,
				       const char *url, const char *method);

struct th_server {
	struct MHD_Daemon *d;
	struct mhdgz *gz; /* borrowed */
	uint16_t port;
	th_route_fn route;
	void *cls; /* the test's fixture */
};

/* th_start_ex options: MHD flags besides MHD_USE_INTERNAL_POLLING_THREAD,
 * a thread pool size (0: none), a connection memory limit in bytes (0:
 * libmicrohttpd's default) and an idle timeout in seconds. */
struct th_daemon_opts {
	unsigned int mhd_flags;
	unsigned int pool_threads;
	size_t conn_memory_nbytes;
	unsigned int idle_timeout_s;
};

/* Start a daemon on 127.0.0.1, port 0. threads 0: one internal polling
 * thread; n > 0: a thread pool of n. Fails the test on error. */
void th_start(struct th_server *s, struct mhdgz *gz, unsigned int threads, th_route_fn route,
	      void *cls);
void th_start_ex(struct th_server *s, struct mhdgz *gz, const struct th_daemon_opts *o,
		 th_route_fn route, void *cls);
/* The daemon of th_start_ex with the test's own access handler (called
 * with cls) and request completed callback (done, may be NULL): for tests
 * that read request bodies. *port_ret receives the port; stop it with
 * MHD_stop_daemon. Fails the test on error. */
struct MHD_Daemon *th_daemon_start(const struct th_daemon_opts *o, MHD_AccessHandlerCallback access,
				   void *cls, MHD_RequestCompletedCallback done, void *done_cls,
				   uint16_t *port_ret);
/* Stop the daemon (every connection closed, every response released).
 * Idempotent. */
void th_stop(struct th_server *s);

/* Zeroed options with their size set. */
struct mhdgz_options th_opts(void);
/* A handler with the given backend and level (0: default), min_nbytes
 * (0: default); fails the test on error. */
struct mhdgz *th_gz_new(enum mhdgz_backend backend, int level, size_t min_nbytes);

/* ---------------- A server answering from a table of routes ---------- */

/* Route flags. */
#define TH_RT_SHARED 0x1u    /* one response made at start, queued for every request */
#define TH_RT_UNTRACKED 0x2u /* MHD_create_response_from_buffer, not mhdgz's */
#define TH_RT_IDENTITY 0x4u  /* MHDGZ_RESPONSE_IDENTITY before queueing */
#define TH_RT_PRECOND                                                                              \
	0x8u                 /* queued with MHDGZ_REQUEST_PRECONDITIONS: the library
			      * answers a failed precondition with the 304 of this
			      * route's response or a 412 without content */
#define TH_RT_UNCACHED 0x10u /* mhdgz_response_set_uncached() before queueing */

/* One URL the site answers with a buffer response. Strings and body are
 * borrowed. */
struct th_route {
	const char *path;
	unsigned int status;
	const void *body;
	size_t body_len;
	enum MHD_ResponseMemoryMode mode;
	const char *hdr[41];         /* name, value pairs, NULL-terminated */
	unsigned int flags;          /* TH_RT_* */
	const char *etag;            /* the resource's ETag as the app sets it (documentation: the
				      * library reads the response's ETag field) */
	struct MHD_Response *shared; /* TH_RT_SHARED: made by th_site_start */
};

struct th_site {
	struct th_server srv;
	struct mhdgz *gz; /* owned */
	uint16_t port;
	struct th_route *routes;
	size_t nroutes;
	_Atomic unsigned long create_failures; /* mhdgz_response_from_buffer gave NULL */
	_Atomic unsigned long errors;          /* unexpected results in the route */
};

/* mhdgz_new(opts) (NULL: defaults), the shared responses, then a daemon
 * with a 512 KiB connection memory limit (the 64 KiB Accept-Encoding test
 * needs more than the default) and extra_mhd_flags. Fails the test on error. */
void th_site_start(struct th_site *s, const struct mhdgz_options *opts, struct th_route *routes,
		   size_t nroutes, unsigned int extra_mhd_flags);
void th_site_stop(struct th_site *s);
/* th_site_done: how a test ends: the client handle H cleaned up, then the
 * site stopped, then BODY (what its routes served) freed. */
void th_site_done(struct th_site *s, CURL *h, void *body);

/* ===================================================================== */
/*                          Client: libcurl                              */
/* ===================================================================== */

/* th_fetch / th_req flags. */
#define TH_GZIP 0x1u    /* send "Accept-Encoding: gzip"; keep the coded bytes */
#define TH_DECODE 0x2u  /* CURLOPT_ACCEPT_ENCODING "gzip": libcurl decodes */
#define TH_HEAD 0x4u    /* HEAD instead of GET */
#define TH_RAW 0x8u     /* CURLOPT_HTTP_TRANSFER_DECODING 0: raw chunked bytes */
#define TH_HTTP10 0x10u /* an HTTP/1.0 request (no chunked coding possible) */
#define TH_POST 0x20u   /* POST with the reply's upload bytes (none by default) */
#define TH_FRESH                                                                                   \
	0x40u /* a new connection, not kept (libcurl would retry a
			 * request the server closed on a reused one) */

struct th_reply;
/* Called with each piece of body as libcurl delivers it (after the
 * reply keeps it). */
typedef void (*th_data_fn)(struct th_reply *r, const uint8_t *p, size_t n);

struct th_reply {
	CURLcode rc;
	long status;
	long num_connects; /* CURLINFO_NUM_CONNECTS: 0 when the connection was reused */
	uint8_t *body;     /* malloc'd */
	size_t body_len, body_cap;
	bool body_overflow;
	/* Every header line of the final response, then the trailer fields
	 * of a chunked body; names and values malloc'd, value without OWS. */
	char *hdr_name[TH_MAX_HDRS];
	char *hdr_value[TH_MAX_HDRS];
	unsigned int nhdr;
	bool hdr_overflow;
	/* Set by the caller, kept across requests: */
	const char *accept_encoding; /* non-NULL: sent as the Accept-Encoding line */
	bool discard;                /* keep no body bytes (only count them and call on_data) */
	size_t abort_after;          /* > 0: the write callback fails once this many bytes are in */
	th_data_fn on_data;          /* optional */
	void *cls;                   /* for on_data */
	unsigned long timeout_ms;    /* whole transfer; 0: TH_CURL_TIMEOUT_S */
	uint64_t writes;             /* write callback calls */
	const void *upload;          /* TH_POST: the request body, borrowed; NULL: empty */
	size_t upload_len;           /* its bytes */
	/* > 0: CURLOPT_EXPECT_100_TIMEOUT_MS, how long libcurl waits for
	 * "100 Continue" (or a final status) after an "Expect: 100-continue"
	 * line before it sends the body anyway (libcurl's default: 1000) */
	unsigned long expect_100_ms;
};

/* Zero a reply; free what it holds (and zero it again). */
void th_reply_init(struct th_reply *r);
void th_reply_free(struct th_reply *r);

/* A curl handle (fails the test if there is none); free with
 * curl_easy_cleanup. */
CURL *th_curl_new(void);

/*
 * GET (or as flags say) http://127.0.0.1:port/path into r, sending the
 * "Name: value" lines of hdrs too (NULL-terminated, may be NULL). r's
 * results are reset first; its caller-set fields are kept. h: a handle to
 * reuse (keep-alive) or NULL for a fresh one. Bodies are decoded only with
 * TH_DECODE. Returns r->rc.
 */
CURLcode th_fetch_ex(CURL *h, uint16_t port, const char *path, unsigned int flags,
		     const char *const *hdrs, struct th_reply *r);
/* For a transfer the test performs itself (a multi handle): set h up as
 * th_fetch_ex would, without extra header lines; after the transfer,
 * th_reply_info fills r's status and connection count. */
void th_curl_prepare(CURL *h, uint16_t port, const char *path, unsigned int flags,
		     struct th_reply *r);
void th_reply_info(CURL *h, struct th_reply *r);
CURLcode th_fetch(CURL *h, uint16_t port, const char *path, unsigned int flags, struct th_reply *r);

/* The value of the first header line named name (case-insensitive), or
 * NULL; *count_ret (may be NULL) receives how many lines have the name. */
const char *th_header(const struct th_reply *r, const char *name, unsigned int *count_ret);
/* How many lines are named name. */
int th_hdr_count(const struct th_reply *r, const char *name);
/* Does a comma-separated list name token (case-insensitive, OWS around)? */
bool th_has_token(const char *list, const char *token);

/* Parse a raw chunked body (RFC 9112 section 7.1). Returns 0 when it is
 * well-formed and ends with the last chunk, trailer fields if any, and the
 * empty line;
 * -1 otherwise. *out (malloc'd) receives the chunk data, *nchunks the
 * number of non-empty chunks; *empty_early is set when a zero-size chunk
 * occurs before the end. */
int th_dechunk(const uint8_t *raw, size_t len, uint8_t **out, size_t *out_len, size_t *nchunks,
	       bool *empty_early);

/* ===================================================================== */
/*             Raw-socket client: exact request and response bytes        */
/* ===================================================================== */

/* A TCP connection to 127.0.0.1:port; fails the test on error. */
int th_raw_connect(uint16_t port);
/* Send every byte of req; fails the test on error. */
void th_raw_send(int fd, const void *req, size_t len);

/* One response as it came off the wire. */
struct th_raw_response {
	uint8_t *bytes; /* malloc'd: the whole response, head and body */
	size_t len;
	size_t head_len; /* bytes up to and including the empty line */
	int status;
	bool chunked;    /* Transfer-Encoding: chunked */
	size_t body_off; /* == head_len */
};

/*
 * Read exactly one response from fd, no byte of the next: up to the empty
 * line, then the body as the framing says (none for HEAD, 1xx, 204 and 304;
 * a chunked body up to its last chunk and empty trailer; Content-Length
 * bytes; else until the peer closes). Waits at most timeout_ms for each
 * next byte, and TH_RAW_HARD_FACTOR times that for the whole response (a
 * big body through a small window on a loaded machine keeps coming; one
 * that stalls fails as soon). Returns 0, or -1 (timeout, closed early,
 * bad framing; resp keeps what came). Release with th_raw_response_free.
 */
#define TH_RAW_HARD_FACTOR 10u
int th_raw_read_response(int fd, bool head, unsigned int timeout_ms, struct th_raw_response *resp);
void th_raw_response_free(struct th_raw_response *resp);
/* The field named name in resp's head has exactly the value want (NULL:
 * there is no such field); fails the test naming ctx otherwise. */
void th_raw_expect_field(const struct th_raw_response *resp, const char *name, const char *want,
			 const char *ctx);
/* How many fields named name resp's head has. */
int th_raw_field_count(const struct th_raw_response *resp, const char *name);
/* Not a byte arrives on fd, and the peer does not close it, within
 * wait_ms: the connection is still usable and nothing stray followed the
 * last response read. Fails the test naming ctx otherwise. */
void th_raw_expect_idle(int fd, unsigned int wait_ms, const char *ctx);
/* The peer closes fd cleanly within timeout_ms without another byte
 * (what a response framed by the close, or a HEAD response that closes,
 * must end with). Fails the test naming ctx otherwise. */
void th_raw_expect_closed(int fd, unsigned int timeout_ms, const char *ctx);
/* The value of the first field named name in resp's head (not
 * NUL-terminated: *len_ret gets its length), or NULL. */
const char *th_raw_header(const struct th_raw_response *resp, const char *name, size_t *len_ret);

/* ===================================================================== */
/*      Checks of buffer responses that do not abort (threads use them)   */
/* ===================================================================== */

/* Each returns 0, or -1 with a message in err[0..errcap). */
int th_v_content_length(const struct th_reply *r, size_t want, char *err, size_t errcap);
/* Exactly one Vary field, Accept-Encoding in it once, and besides it
 * exactly the tokens of extra (NULL-terminated; NULL for none), each once. */
int th_v_vary_ae(const struct th_reply *r, const char *const *extra, char *err, size_t errcap);
/* A gzip response with want_status: one Content-Encoding: gzip, a true
 * Content-Length, smaller than orig, no Accept-Ranges: bytes, one valid
 * RFC 1952 member decoding to orig, Vary listing Accept-Encoding once. */
int th_v_gzip(const struct th_reply *r, long want_status, const void *orig, size_t orig_len,
	      char *err, size_t errcap);
/* The same for any coding ("gzip", "zstd", "br"): Content-Encoding: coding
 * and one frame (member, stream) that the reference decoder
 * (tu_decode) decodes to orig. */
int th_v_coded(const struct th_reply *r, const char *coding, long want_status, const void *orig,
	       size_t orig_len, char *err, size_t errcap);
/* An identity response: no Content-Encoding, Content-Length, body == orig. */
int th_v_identity(const struct th_reply *r, long want_status, const void *orig, size_t orig_len,
		  char *err, size_t errcap);
/* No Content-Encoding and not a byte of body (204, 304, HEAD, 412). */
int th_v_no_body(const struct th_reply *r, long want_status, char *err, size_t errcap);
/* A 304 may carry Content-Length only if it equals the length of the
 * content the 200 would have had (RFC 9110 8.6). */
int th_v_304_length(const struct th_reply *r, size_t len_200, char *err, size_t errcap);
/* The ETag field: exactly one with value want, or none if want is NULL. */
int th_v_etag(const struct th_reply *r, const char *want, char *err, size_t errcap);

/* Shorthands for the tests: every check names its context (char err[]). */
#define TH_E err, sizeof err
#define TH_OK(ctx, call) ck_assert_msg((call) == 0, "%s: %s", (ctx), err)
/* A request on a site through handle h that must complete. */
#define TH_REQ(h, s, flags, p, hd, r)                                                              \
	ck_assert_msg(th_fetch_ex((h), (s)->port, (p), (flags), (hd), (r)) == CURLE_OK &&          \
			      !(r)->body_overflow && !(r)->hdr_overflow,                           \
		      "%s: transfer %s", (p), curl_easy_strerror((r)->rc))

extern const char *const th_h_gzip[]; /* { "Accept-Encoding: gzip", NULL } */

/* ===================================================================== */
/*                             Utilities                                 */
/* ===================================================================== */

/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t th_now_ms(void);
/* Poll pred(cls) every 5 ms for at most timeout_ms; returns its last value. */
bool th_wait(bool (*pred)(void *cls), void *cls, unsigned int timeout_ms);
/* The handler's counters; fails the test on error. */
struct mhdgz_stats th_stats(struct mhdgz *gz);
/* Each reason counter equals want[reason]. */
void th_expect_reasons(const struct mhdgz_stats *st, const uint64_t want[MHDGZ_REASON_COUNT]);
/* Every compressor taken from the handle's compressor pools is back: each
 * pool's gets equal its puts (gz_pool_get_stats), pooled or not. */
bool th_pool_all_back(struct mhdgz *gz);
/* th_wait predicate over a struct mhdgz *. */
bool th_pool_back_pred(void *gz);
/* VmRSS of this process in KiB (0 if unknown). */
uint64_t th_rss_kib(void);
/* A temporary file (mkstemp, unlinked) holding data; returns an fd opened
 * read-write, positioned at 0. Fails the test on error. */
int th_temp_file(const void *data, size_t len);
/* A compressible body no sniffer takes for text (PNG signature, NUL runs). */
void th_fill_binary(uint8_t *b, size_t len);

/* ===================================================================== */
/*                    A body source for content readers                  */
/* ===================================================================== */

/*
 * The body a content reader serves: data[0..len), at most chunk bytes per
 * call (and at most libmicrohttpd's max). Counts calls and free-callback
 * runs, and records protocol violations (a call after the free callback,
 * a call while another is running).
 */
struct th_src {
	const uint8_t *data; /* borrowed */
	uint64_t len;
	size_t chunk;
	_Atomic uint64_t calls;
	_Atomic uint64_t bytes;      /* bytes returned */
	_Atomic unsigned int frees;  /* free callback runs */
	_Atomic unsigned int inside; /* calls running now */
	_Atomic unsigned int max_inside;
	_Atomic unsigned int after_free; /* calls after the free callback */
};

/* MHD_ContentReaderCallback over a struct th_src. */
ssize_t th_src_read(void *cls, uint64_t pos, char *buf, size_t max);
/* MHD_ContentReaderFreeCallback over a struct th_src: counts. */
void th_src_free(void *cls);

#endif /* HARNESS_H */
